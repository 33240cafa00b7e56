//! `files::LineSpout` -> `testkit::NullBolt`, acking on: lines/s read,
//! emitted and acked, for this build and, when `SQUALL_OLD_PLUGIN_DIR` names
//! another build's release folder (its `squall` and plugins), for that one
//! too, rounds alternating, medians of `BENCH_RUNS` (3) and their ratio.
//!
//! Each round writes a fresh input of `BENCH_LINES` lines (default
//! 4,000,000, 60 bytes each: more than either reads in the run), runs
//! `squall run --duration BENCH_SECS` (default 4) and divides the spout's
//! acked count in the `--json` summary by the duration. Start-up (well under
//! 1 % of the run) is counted for both alike.
//!
//! ```text
//! cargo build --release -p squall-host -p squall-testkit -p squall-files
//! SQUALL_OLD_PLUGIN_DIR=/path/to/old/target/release cargo bench -p squall-files --bench lines
//! ```
//!
//! `-- --test` only checks that it builds.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

fn main() {
    if std::env::args().any(|a| a == "--test") {
        return;
    }
    let num = |k: &str, d: u64| std::env::var(k).ok().and_then(|v| v.parse().ok()).unwrap_or(d);
    let (lines, secs, runs) =
        (num("BENCH_LINES", 4_000_000), num("BENCH_SECS", 4), num("BENCH_RUNS", 3));
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let new = std::env::var_os("CARGO_TARGET_DIR")
        .map_or_else(|| root.join("target"), PathBuf::from)
        .join("release");
    let old = std::env::var_os("SQUALL_OLD_PLUGIN_DIR").map(PathBuf::from);
    let (mut news, mut olds) = (Vec::new(), Vec::new());
    for round in 1..=runs {
        let n = round_rate(&new, lines, secs);
        news.push(n);
        let o = old.as_deref().map(|d| round_rate(d, lines, secs));
        if let Some(o) = o {
            olds.push(o);
        }
        println!(
            "round {round}: this build {n:.0} lines/s{} (load average {})",
            o.map(|o| format!(", old build {o:.0} lines/s")).unwrap_or_default(),
            load()
        );
    }
    let n = median(&mut news);
    if olds.is_empty() {
        println!("files LineSpout -> NullBolt, median of {runs}: {n:.0} lines/s");
    } else {
        let o = median(&mut olds);
        println!(
            "files LineSpout -> NullBolt, median of {runs}: this build {n:.0} lines/s, old build {o:.0} lines/s, ratio {:.2}",
            n / o
        );
    }
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().map(str::to_owned))
        .unwrap_or_else(|| "?".into())
}

/// One run of the build in `release`: acked lines per second.
fn round_rate(release: &Path, lines: u64, secs: u64) -> f64 {
    let nanos =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
    let dir =
        std::env::temp_dir().join(format!("squall-files-bench-{}-{nanos}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let input = dir.join("in.txt");
    let mut w = std::io::BufWriter::new(std::fs::File::create(&input).unwrap());
    for i in 0..lines {
        writeln!(w, "line {i:>12} the quick brown fox jumps over the lazy dog").unwrap();
    }
    w.flush().unwrap();
    drop(w);
    let topology = dir.join("bench.toml");
    std::fs::write(
        &topology,
        format!(
            r#"
[topology]
max_spout_pending = 10000

[plugins]
files = "{release}/libsquall_files.so"
testkit = "{release}/libsquall_testkit.so"

[spouts.lines]
component = "files::LineSpout"
config = {{ path = "{input}" }}

[bolts.sink]
component = "testkit::NullBolt"
inputs = [{{ from = "lines" }}]
"#,
            release = release.display(),
            input = input.display(),
        ),
    )
    .unwrap();
    let json = dir.join("summary.json");
    let status = Command::new(release.join("squall"))
        .arg("run")
        .arg(&topology)
        .args(["--duration", &format!("{secs}s"), "--stats-interval", "0s", "--json"])
        .arg(&json)
        .env("SQUALL_ALLOW_WRITABLE_PLUGINS", "1")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("run squall");
    assert!(status.success(), "squall exited with {status}");
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let acked = summary["components"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["name"] == "lines"))
        .and_then(|c| c["acked"].as_u64())
        .expect("the spout's acked count");
    assert!(acked < lines, "the input ran out: raise BENCH_LINES");
    let _ = std::fs::remove_dir_all(&dir);
    acked as f64 / secs as f64
}
