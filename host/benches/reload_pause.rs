//! The pause of a live swap under load (issues 11 and 20), in two layouts:
//!
//! - **bolt only**: a reliable `ConstSpout` (acking on, unthrottled) feeds a
//!   stateless `SleepBolt { micros = 0 }` (the bolt swapped) and a
//!   `NullBolt`. The swapped bolt comes from its own copy of the testkit
//!   library.
//! - **one library**: the spout (throttled to 1,000 msg/s, acking on) and
//!   both bolts come from the same copy, so a reload swaps all three: the
//!   spout drains while the bolts, holding their prepared instances, keep
//!   executing (issue 20's layout, as README's word count and every crate
//!   `squall new plugin` writes have it).
//!
//! Each reload appends a byte to the copy, so its digest changes and its
//! components are rebuilt from a fresh copy of the library, as after a real
//! rebuild.
//!
//! A sampler reads the bolt's published `executed` count every millisecond.
//! The pause of a swap is the longest time the count did not move in the
//! window from the reload request to 100 ms after it returned; the same
//! measure over the second before the reload is the baseline (the executor
//! publishes its counts every few milliseconds under load, so the baseline
//! is not zero). Also printed: the pause the executor itself measured (in
//! the reload's summary line). Medians of `BENCH_RUNS` (default 3) reloads.
//!
//! `cargo bench -p squall-host --bench reload_pause` (the plugins must be
//! built: `cargo build --release -p squall-testkit`); `-- --test` does one.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use squall_host::metrics::StatField;
use squall_host::runtime::{Reloader, TopologyHandle};

fn main() {
    let smoke = std::env::args().any(|a| a == "--test");
    let runs: usize = if smoke {
        1
    } else {
        std::env::var("BENCH_RUNS").ok().and_then(|v| v.parse().ok()).unwrap_or(3)
    };
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("workspace").to_path_buf();
    let plugin_dir = std::env::var_os("SQUALL_PLUGIN_DIR")
        .map_or_else(|| root.join("target/release"), PathBuf::from);
    let testkit = plugin_dir.join("libsquall_testkit.so");
    if !testkit.exists() {
        eprintln!("missing {}: run `cargo build --release -p squall-testkit`", testkit.display());
        std::process::exit(2);
    }
    let layouts = [
        ("bolt only", "testkit", ""),
        ("one library", "work", r#"throttle = { tuples_per_sec = 1000, mode = "smooth" }"#),
    ];
    for (name, spout_lib, throttle) in layouts {
        scenario(&testkit, runs, name, spout_lib, throttle);
    }
}

/// One layout: the spout and the sink from `spout_lib`, the swapped
/// `SleepBolt` from the copy `work`.
fn scenario(testkit: &Path, runs: usize, name: &str, spout_lib: &str, throttle: &str) {
    let scratch = std::env::temp_dir().join(format!(
        "squall-reload-bench-{}-{}",
        std::process::id(),
        name.replace(' ', "-")
    ));
    std::fs::create_dir_all(&scratch).expect("scratch");
    let work = scratch.join("libwork.so");
    std::fs::copy(testkit, &work).expect("copy testkit");
    let file = scratch.join("reload.toml");
    std::fs::write(
        &file,
        format!(
            r#"
[topology]
name = "reload-pause"

[plugins]
testkit = "{}"
work = "{}"

[spouts.source]
component = "{spout_lib}::ConstSpout"
config = {{ reliable = true }}
{throttle}

[bolts.work]
component = "work::SleepBolt"
config = {{ micros = 0 }}
inputs = [{{ from = "source" }}]

[bolts.sink]
component = "{spout_lib}::NullBolt"
inputs = [{{ from = "work" }}]
"#,
            testkit.display(),
            work.display()
        ),
    )
    .expect("write topology");

    let config = squall_host::config::load(&file).unwrap_or_else(|d| panic!("{d}"));
    let topology = squall_host::topology::bind(&config).unwrap_or_else(|e| panic!("{e}"));
    let instances = squall_host::runtime::instantiate(&topology).expect("instances");
    let running = squall_host::runtime::start(topology, instances).expect("start");
    let handle = running.handle().clone();
    let mut reloader = Reloader::new(file.clone(), handle.clone());
    let task =
        handle.topology().components.iter().find(|c| c.name == "work").expect("work").tasks.start;
    std::thread::sleep(Duration::from_secs(2));

    println!("live swap under load, {name}: {runs} reload(s), medians");
    let (mut gaps, mut baselines, mut reported, mut rates) = (vec![], vec![], vec![], vec![]);
    for run in 0..runs {
        let sampling = Arc::new(AtomicBool::new(true));
        let sampler = {
            let (handle, sampling) = (handle.clone(), sampling.clone());
            std::thread::spawn(move || sample(&handle, task, &sampling))
        };
        std::thread::sleep(Duration::from_secs(1));
        // A new digest for the `work` library (a new file renamed over it,
        // as an install does): the bolt is rebuilt.
        let mut bytes = std::fs::read(&work).expect("read the library");
        bytes.push(run as u8);
        let staged = scratch.join("libwork.staged");
        std::fs::write(&staged, &bytes).expect("write the library");
        std::fs::rename(&staged, &work).expect("install the library");
        let begin = Instant::now();
        let report = reloader.reload("bench");
        assert_eq!(report.outcome.kind(), "applied", "{}", report.line);
        let summary = report.line;
        let end = Instant::now();
        std::thread::sleep(Duration::from_millis(300));
        sampling.store(false, Ordering::Relaxed);
        let samples = sampler.join().expect("sampler");
        let before: Vec<_> = samples.iter().copied().filter(|(t, _)| *t < begin).collect();
        let during: Vec<_> = samples
            .iter()
            .copied()
            .filter(|(t, _)| *t >= begin && *t <= end + Duration::from_millis(100))
            .collect();
        let baseline = longest_gap(&before);
        let gap = longest_gap(&during);
        let rate = before
            .first()
            .zip(before.last())
            .map(|((t0, n0), (t1, n1))| (n1 - n0) as f64 / t1.duration_since(*t0).as_secs_f64())
            .unwrap_or(0.0);
        let pause = summary
            .split(r#"rebuilt "work""#)
            .nth(1)
            .and_then(|s| s.split("pause ").nth(1))
            .and_then(|s| s.split(' ').next())
            .and_then(|s| s.parse::<f64>().ok())
            .unwrap_or(f64::NAN);
        println!(
            "run {}: longest gap {:.1} ms (baseline {:.1} ms), executor's pause {pause:.2} ms, {:.0} tuples/s before",
            run + 1,
            ms(gap),
            ms(baseline),
            rate
        );
        gaps.push(ms(gap));
        baselines.push(ms(baseline));
        reported.push(pause);
        rates.push(rate);
    }
    println!(
        "{name}: median: longest gap {:.1} ms (target <= 20 ms), baseline {:.1} ms, executor's pause {:.2} ms, {:.0} tuples/s",
        median(&mut gaps),
        median(&mut baselines),
        median(&mut reported),
        median(&mut rates)
    );
    let outcome = running.stop();
    assert!(outcome.error.is_none(), "{:?}", outcome.error);
    let _ = std::fs::remove_dir_all(&scratch);
}

/// `(when, executed)` every millisecond until `sampling` is cleared.
fn sample(handle: &TopologyHandle, task: u32, sampling: &AtomicBool) -> Vec<(Instant, u64)> {
    let mut out = Vec::with_capacity(4096);
    while sampling.load(Ordering::Relaxed) {
        out.push((Instant::now(), handle.task_stats(task).get(StatField::Executed)));
        std::thread::sleep(Duration::from_millis(1));
    }
    out
}

/// The longest time the count stayed the same between samples.
fn longest_gap(samples: &[(Instant, u64)]) -> Duration {
    let mut longest = Duration::ZERO;
    let mut since: Option<(Instant, u64)> = None;
    for &(t, n) in samples {
        match since {
            Some((t0, n0)) if n == n0 => longest = longest.max(t.duration_since(t0)),
            _ => since = Some((t, n)),
        }
    }
    longest
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}
