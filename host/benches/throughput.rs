//! Throughput benchmark: squall against a hand-written crossbeam pipeline of
//! the same shape, in one run, as medians of several runs.
//!
//! Workloads (topologies in `topologies/perf/`, modelled on Storm's
//! storm-perf topologies):
//! - `const-null`: constant spout → null bolt (tuples/s at the bolt);
//! - `const-id-null`: constant spout → id bolt → null bolt (tuples/s at the last bolt);
//! - `wordcount`: sentence spout → split → count on a fields grouping (sentences/s);
//! - the first two again with acking on (acked trees/s), and complete latency
//!   at half the measured maximum rate;
//! - issue 12's targets: complete latency at smooth-throttled rates, with
//!   the default settings and with the named low-latency profile
//!   (`topologies/profiles/low-latency.toml`); the CPU an idle topology and
//!   a spout held at max pending use with the default wait strategies, in
//!   steady state (every thread's schedstat over 10 s, after 2 s) and over
//!   the whole process (rusage); the throughput targets, quoting the first
//!   table's medians of the same run.
//!
//! `cargo bench -p squall-host --bench throughput` runs it; `BENCH_SECS`
//! (default 10) and `BENCH_RUNS` (default 3) set the length and the number
//! of runs. `-- --test` (CI's bench smoke) does one 1-second run of each.
//! `SQUALL_PREVIOUS_BIN=/path/to/older/squall` also runs the three
//! throughput workloads and const-null acked with that build, alternating
//! with this one, and prints this build / previous (the median of the
//! per-pair ratios, and the medians' ratio), per second and per CPU second
//! of the process. `SQUALL_PREVIOUS_PLUGIN_DIR`
//! gives that build its own plugins (default: this build's).
//! `BENCH_ONLY=chain` compares operator chains on (as shipped) and off
//! (`chain = false` on every bolt) the same way, with this build on both
//! sides; `BENCH_CHAIN=off` runs this build unchained everywhere (the
//! previous build as it is). `BENCH_ONLY=previous` runs only that comparison; `BENCH_ONLY=http` only
//! the cost of `--http`; `BENCH_ONLY=baseline` only the first table (each
//! workload alternating with its hand-written baseline, run by run). Last, the cost of `squall tap` (no tap, the
//! previous build, a tap attached; `BENCH_TAP_ONLY=1` runs only that).
//! The plugins must be built: `cargo build --release --workspace`.

use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use crossbeam_channel::bounded;
use rustc_hash::FxHashMap;
use serde_json::Value as Json;
use squall_plugin_api::Value;

const BATCH: usize = 1000;
const QUEUE_BATCHES: usize = 50;

#[derive(Clone)]
struct Settings {
    /// False: every bolt runs with `chain = false` (no operator chains).
    chain: bool,
    /// The squall binary measured.
    bin: PathBuf,
    /// Another build of squall to compare with (`SQUALL_PREVIOUS_BIN`), run
    /// alternately with `bin` in the same bench run.
    previous: Option<PathBuf>,
    /// The plugins `previous` runs with (default: `plugin_dir`).
    previous_plugins: Option<PathBuf>,
    secs: u64,
    runs: usize,
    root: PathBuf,
    plugin_dir: PathBuf,
    scratch: PathBuf,
}

fn main() {
    let smoke = std::env::args().any(|a| a == "--test");
    let env_num = |k: &str, d: u64| std::env::var(k).ok().and_then(|v| v.parse().ok()).unwrap_or(d);
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("host/ is inside the workspace")
        .to_path_buf();
    let plugin_dir = std::env::var_os("SQUALL_PLUGIN_DIR")
        .map_or_else(|| root.join("target/release"), PathBuf::from);
    let scratch = std::env::temp_dir().join(format!("squall-bench-{}", std::process::id()));
    std::fs::create_dir_all(&scratch).expect("temp dir");
    let s = Settings {
        // BENCH_CHAIN=off: this build runs every bolt with `chain = false`
        // (the previous build, which may not know the key, as it is).
        chain: std::env::var("BENCH_CHAIN").as_deref() != Ok("off"),
        bin: PathBuf::from(env!("CARGO_BIN_EXE_squall")),
        previous: std::env::var_os("SQUALL_PREVIOUS_BIN").map(PathBuf::from),
        previous_plugins: std::env::var_os("SQUALL_PREVIOUS_PLUGIN_DIR").map(PathBuf::from),
        secs: if smoke { 1 } else { env_num("BENCH_SECS", 10) },
        runs: if smoke { 1 } else { env_num("BENCH_RUNS", 3) as usize },
        root,
        plugin_dir,
        scratch,
    };
    for lib in ["libsquall_testkit.so", "libsquall_examples.so"] {
        if !s.plugin_dir.join(lib).exists() {
            eprintln!(
                "missing {}: run `cargo build --release --workspace` first",
                s.plugin_dir.join(lib).display()
            );
            std::process::exit(2);
        }
    }
    if std::env::var_os("BENCH_TAP_ONLY").is_some() {
        tap_cost(&s);
        let _ = std::fs::remove_dir_all(&s.scratch);
        return;
    }
    println!("squall throughput benchmark: {} run(s) of {} s each, medians", s.runs, s.secs);
    match std::env::var("BENCH_ONLY").as_deref() {
        Ok("previous") => return against_previous(&s),
        Ok("http") => return http_cost(&s),
        Ok("chain") => return chain_gain(&s),
        _ => {}
    }
    println!("{:<22} {:>16} {:>16} {:>8}", "workload", "squall /s", "baseline /s", "ratio");
    let workloads: [(&str, &str, &str, Baseline); 3] = [
        ("const-null", "bolt", "executed", const_null),
        ("const-id-null", "null", "executed", const_id_null),
        ("wordcount", "split", "executed", wordcount),
    ];
    // This run's medians, by workload: the targets table quotes them instead
    // of measuring them again (one figure per workload and run).
    let mut medians: FxHashMap<&str, f64> = FxHashMap::default();
    for (name, component, field, baseline) in workloads {
        let file = format!("{name}.toml");
        // Alternating, so that both see the same moments of a shared machine.
        let (mut ours, mut theirs, mut pairs) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..s.runs {
            let o = squall_rate(&s, &s.bin, &file, component, field, None).0;
            let t = baseline(Duration::from_secs(s.secs));
            pairs.push(o / t);
            ours.push(o);
            theirs.push(t);
        }
        let (ours, theirs, pair) =
            (median(ours.into_iter()), median(theirs.into_iter()), median(pairs.into_iter()));
        medians.insert(name, ours);
        println!(
            "{name:<22} {ours:>16.0} {theirs:>16.0} {:>8.2}   (median of the {} pairs: {pair:.3})",
            ours / theirs,
            s.runs
        );
    }
    if std::env::var("BENCH_ONLY").as_deref() == Ok("baseline") {
        let _ = std::fs::remove_dir_all(&s.scratch);
        return;
    }
    for name in ["const-null-ack", "const-id-null-ack", "const-null-latency"] {
        let runs: Vec<(f64, (f64, f64))> = (0..s.runs)
            .map(|_| squall_rate(&s, &s.bin, &format!("{name}.toml"), "spout", "acked", None))
            .collect();
        let ours = median(runs.iter().map(|r| r.0));
        medians.insert(name, ours);
        let p50 = median(runs.iter().map(|r| (r.1).0));
        println!("{name:<22} {ours:>16.0} {:>16} {:>8}   acked/s; p50 complete latency {p50:.0} us at full load", "-", "-");
    }
    // Complete latency at half the maximum rate, on the latency topology
    // (batches of one tuple), throttled in smooth mode.
    let max = median(
        (0..s.runs)
            .map(|_| squall_rate(&s, &s.bin, "const-null-latency.toml", "spout", "acked", None).0),
    );
    let half = (max / 2.0).max(1.0) as u64;
    let lat: Vec<(f64, f64)> = (0..s.runs)
        .map(|_| squall_rate(&s, &s.bin, "const-null-latency.toml", "spout", "acked", Some(half)).1)
        .collect();
    println!(
        "complete latency at {half}/s (half of {max:.0}/s): p50 {:.0} us, p99 {:.0} us",
        median(lat.iter().map(|l| l.0)),
        median(lat.iter().map(|l| l.1))
    );
    http_cost(&s);
    if s.previous.is_some() {
        against_previous(&s);
    }
    targets(&s, smoke, &medians);
    tap_cost(&s);
    let _ = std::fs::remove_dir_all(&s.scratch);
}

/// The cost of `squall tap`'s hook (docs/performance.md, "Tap"):
/// const-id-null with no tap attached, with this build and (with
/// `SQUALL_PREVIOUS_BIN`) the previous one, alternating; then with a tap on
/// the id bolt's outputs at 1 in 1000 and at every tuple (a client reading
/// as fast as it can; the samples it cannot take are dropped). Both with
/// `--http` on, so only the tap differs. `BENCH_TAP_ONLY=1` runs only this.
fn tap_cost(s: &Settings) {
    let (mut off, mut previous, mut sparse, mut every) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for _ in 0..s.runs {
        off.push(tap_rate(s, &s.bin, None).0);
        if let Some(bin) = &s.previous {
            previous.push(tap_rate(s, bin, None).0);
        }
        sparse.push(tap_rate(s, &s.bin, Some(0.001)));
        every.push(tap_rate(s, &s.bin, Some(1.0)));
    }
    let off = median(off.into_iter());
    println!("const-id-null with --http, no tap attached: {off:.0}/s");
    if !previous.is_empty() {
        let previous = median(previous.into_iter());
        println!(
            "  previous build, no tap: {previous:.0}/s; this build / previous {:.3}",
            off / previous
        );
    }
    for (rate, runs) in [(0.001, sparse), (1.0, every)] {
        let ours = median(runs.iter().map(|r| r.0));
        let lines = median(runs.iter().map(|r| r.1 as f64));
        println!(
            "  tap on id's outputs at {rate}: {ours:.0}/s ({:.3} of no tap); the client read {lines:.0} samples",
            ours / off
        );
    }
}

/// const-id-null for `s.secs` with `--http`; with `tap`, a client reads
/// `GET /api/v1/tap?outputs_of=id&sample=RATE` from the start. The null
/// bolt's executed tuples per second, and the lines the client read.
fn tap_rate(s: &Settings, bin: &Path, tap: Option<f64>) -> (f64, u64) {
    let source = s.root.join("topologies/perf/const-id-null.toml");
    let text = std::fs::read_to_string(&source).expect("perf topology").replace(
        "${SQUALL_PLUGIN_DIR:-../../target/release}",
        &plugins_for(s, bin).display().to_string(),
    );
    let toml = s.scratch.join("const-id-null-tap.toml");
    std::fs::write(&toml, text).expect("write topology");
    let json = s.scratch.join("summary-tap.json");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let mut cmd = Command::new(bin);
    cmd.args(["run", &toml.display().to_string(), "--stats-interval", "0s", "--duration"])
        .arg(format!("{}s", s.secs))
        .args(["--json", &json.display().to_string(), "--http", &port.to_string()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped());
    let child = cmd.spawn().expect("run squall");
    let reader = tap.map(|rate| {
        thread::spawn(move || {
            use std::io::{BufRead, Write};
            let started = Instant::now();
            let stream = loop {
                match std::net::TcpStream::connect(("127.0.0.1", port)) {
                    Ok(stream) => break stream,
                    Err(_) if started.elapsed() < Duration::from_secs(10) => {
                        thread::sleep(Duration::from_millis(5));
                    }
                    Err(e) => panic!("the endpoint never came up: {e}"),
                }
            };
            let mut writer = stream.try_clone().expect("clone");
            write!(
                writer,
                "GET /api/v1/tap?outputs_of=id&sample={rate} HTTP/1.1\r\nHost: 127.0.0.1\r\n\
                 X-Requested-With: bench\r\nConnection: close\r\n\r\n"
            )
            .expect("send");
            // Chunk sizes and status lines are not samples.
            let lines = std::io::BufReader::new(stream).lines().map_while(Result::ok);
            lines.filter(|l| l.contains("\"component\"")).count() as u64
        })
    });
    let out = child.wait_with_output().expect("wait for squall");
    assert!(out.status.success(), "squall failed: {}", String::from_utf8_lossy(&out.stderr));
    let lines = reader.map_or(0, |r| r.join().unwrap_or(0));
    let summary: Json =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("summary")).expect("json");
    let elapsed = summary["elapsed_secs"].as_f64().expect("elapsed_secs");
    let null = summary["components"]
        .as_array()
        .expect("components")
        .iter()
        .find(|c| c["name"] == "null")
        .expect("the null bolt");
    (null["executed"].as_f64().expect("executed") / elapsed, lines)
}

type Baseline = fn(Duration) -> f64;

/// A middle stage of a baseline pipeline: maps one input to zero or more outputs.
type Stage = Box<dyn FnMut(&Value, &mut Vec<Value>) + Send>;

fn median(values: impl Iterator<Item = f64>) -> f64 {
    let mut v: Vec<f64> = values.collect();
    v.sort_by(f64::total_cmp);
    if v.is_empty() {
        return 0.0;
    }
    v[v.len() / 2]
}

/// Runs a perf topology; returns `field` of `component` per second and the
/// spout's complete latency p50/p99. With `throttle`, the spout is limited
/// to that many tuples/s (smooth mode).
fn squall_rate(
    s: &Settings,
    bin: &Path,
    file: &str,
    component: &str,
    field: &str,
    throttle: Option<u64>,
) -> (f64, (f64, f64)) {
    let run = squall_run(s, bin, file, component, field, throttle, false, false, None);
    (run.rate, (run.latency[0], run.latency[1]))
}

/// The plugins `bin` runs with: the previous build's own
/// (`SQUALL_PREVIOUS_PLUGIN_DIR`) when `bin` is that build, else this one's.
fn plugins_for<'a>(s: &'a Settings, bin: &Path) -> &'a Path {
    match (&s.previous, &s.previous_plugins) {
        (Some(previous), Some(dir)) if previous == bin => dir,
        _ => &s.plugin_dir,
    }
}

/// This build against `SQUALL_PREVIOUS_BIN`, run alternately (this one,
/// then the previous, `runs` times) on the throughput workloads and
/// const-null acked: the median of the per-pair ratios, which cancels a
/// load that drifts between pairs, and the ratio of the medians.
fn against_previous(s: &Settings) {
    let Some(previous) = &s.previous else {
        eprintln!("BENCH_ONLY=previous needs SQUALL_PREVIOUS_BIN");
        std::process::exit(2);
    };
    println!("this build / previous, {} alternating runs each", s.runs);
    let workloads = [
        ("const-null", "bolt", "executed"),
        ("const-null-ack", "spout", "acked"),
        ("wordcount", "split", "executed"),
        ("const-id-null", "null", "executed"),
    ];
    for (name, component, field) in workloads {
        let file = format!("{name}.toml");
        let (mut ours, mut theirs) = (Vec::new(), Vec::new());
        let run = |bin| squall_run(s, bin, &file, component, field, None, false, false, None);
        for _ in 0..s.runs {
            ours.push(run(&s.bin));
            theirs.push(run(previous));
        }
        compare(name, &ours, &theirs);
    }
}

/// Operator chains on (as shipped) against off (`chain = false` on every
/// bolt), run alternately on the workloads the chains change; as
/// [`against_previous`], with this build on both sides.
fn chain_gain(s: &Settings) {
    println!("chained / unchained, {} alternating runs each", s.runs);
    let off = Settings { chain: false, ..s.clone() };
    let workloads = [
        ("const-null", "bolt", "executed"),
        ("const-id-null", "null", "executed"),
        ("wordcount", "split", "executed"),
        ("const-null-ack", "spout", "acked"),
        ("const-id-null-ack", "spout", "acked"),
    ];
    for (name, component, field) in workloads {
        let file = format!("{name}.toml");
        let (mut ours, mut theirs) = (Vec::new(), Vec::new());
        for _ in 0..s.runs {
            ours.push(squall_run(s, &s.bin, &file, component, field, None, false, false, None));
            theirs
                .push(squall_run(&off, &s.bin, &file, component, field, None, false, false, None));
        }
        compare(name, &ours, &theirs);
    }
}

/// `text` (a topology) with `chain = false` on every bolt.
fn unchained(text: &str) -> String {
    text.lines()
        .flat_map(|l| {
            let bolt = l.starts_with("[bolts.");
            std::iter::once(l).chain(bolt.then_some("chain = false"))
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Prints `ours` against `theirs` (runs taken alternately): per second
/// and per CPU second, each as the median of the per-pair ratios (which
/// cancels a load that drifts between pairs) and the ratio of the medians.
fn compare(what: &str, ours: &[Run], theirs: &[Run]) {
    let ratios = |f: fn(&Run) -> f64| {
        let pairs = median(ours.iter().zip(theirs).map(|(a, b)| f(a) / f(b)));
        let (a, b) = (median(ours.iter().map(f)), median(theirs.iter().map(f)));
        (a, b, pairs, a / b)
    };
    let (a, b, pairs, medians) = ratios(|r| r.rate);
    let (ca, cb, cpu_pairs, cpu_medians) = ratios(|r| r.per_cpu);
    println!("{what}");
    println!("  per second:     {a:>14.0} vs {b:>14.0}   pairs {pairs:.3}   medians {medians:.3}");
    println!(
        "  per CPU second: {ca:>14.0} vs {cb:>14.0}   pairs {cpu_pairs:.3}   medians {cpu_medians:.3}"
    );
}

/// The cost of --http with the page open: const-null without and with it
/// (the topology polled every second, as the live page does, plus a
/// Prometheus scrape every second), alternating, in this run.
fn http_cost(s: &Settings) {
    let (mut off, mut on, mut shares) = (Vec::new(), Vec::new(), Vec::new());
    let (mut ok, mut refused) = (0, 0);
    let run = |http| {
        squall_run(s, &s.bin, "const-null.toml", "bolt", "executed", None, http, false, None)
    };
    for _ in 0..s.runs {
        off.push(run(false));
        let with = run(true);
        let load = with.http.as_ref().expect("a --http run has a poller");
        ok += load.ok;
        refused += load.refused;
        shares.push(load.cpu.0 / load.cpu.1.max(f64::MIN_POSITIVE));
        on.push(with);
    }
    compare("const-null with --http polled every second / without", &on, &off);
    println!(
        "  the endpoint's threads (__http*): {:.3} % of the process's CPU (median of the runs); \
         {ok} requests answered 200, {refused} refused",
        median(shares.into_iter()) * 100.0
    );
    assert_eq!(refused, 0, "the poller's requests were refused: the bench would measure nothing");
}

/// Runs a perf topology once and returns what it measured ([`Run`]: the
/// rate, the rate per CPU second, complete latency p50/p99/p999, and with
/// `http` what the poller saw); with `defaults`, the topology's batch and queue settings are removed so the
/// defaults apply; with `profile`, the topology includes that file of
/// `topologies/profiles/` (a named profile of docs/performance.md).
#[allow(clippy::too_many_arguments)]
fn squall_run(
    s: &Settings,
    bin: &Path,
    file: &str,
    component: &str,
    field: &str,
    throttle: Option<u64>,
    http: bool,
    defaults: bool,
    profile: Option<&str>,
) -> Run {
    let source = s.root.join("topologies/perf").join(file);
    let mut text = std::fs::read_to_string(&source).expect("perf topology");
    if let Some(profile) = profile {
        let path = s.root.join("topologies/profiles").join(profile);
        text = format!("include = [{:?}]\n{text}", path.display().to_string());
    }
    if !s.chain && bin == s.bin {
        text = unchained(&text);
    }
    if defaults {
        text = text
            .lines()
            .filter(|l| {
                !["producer_batch_size", "receive_buffer_size", "spout_recvq_skips"]
                    .iter()
                    .any(|k| l.starts_with(k))
            })
            .collect::<Vec<_>>()
            .join("\n");
    }
    text = text.replace(
        "${SQUALL_PLUGIN_DIR:-../../target/release}",
        &plugins_for(s, bin).display().to_string(),
    );
    if let Some(rate) = throttle {
        text = text.replacen(
            "reliable = true }",
            &format!(
                "reliable = true }}\nthrottle = {{ tuples_per_sec = {rate}, mode = \"smooth\" }}"
            ),
            1,
        );
    }
    let toml = s.scratch.join(file);
    std::fs::write(&toml, text).expect("write topology");
    let json = s.scratch.join("summary.json");
    let mut cmd = Command::new(bin);
    cmd.args(["run", &toml.display().to_string(), "--stats-interval", "0s", "--duration"])
        .arg(format!("{}s", s.secs))
        .arg("--json")
        .arg(&json);
    // With `http`: serve --http and poll it as the live page does (the
    // topology every second) plus a Prometheus scrape every second.
    let port = http.then(|| {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        cmd.args(["--http", &port.to_string()]);
        port
    });
    let child = cmd
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run squall");
    let poller = port.map(|port| {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let pid = child.id();
        let thread = thread::spawn(move || {
            let mut load = HttpLoad::default();
            while !flag.load(Ordering::Relaxed) {
                for path in ["/api/v1/topology", "/metrics"] {
                    match http_get(port, path) {
                        Some(200) => load.ok += 1,
                        // Not up yet, or the run is ending.
                        None => {}
                        Some(_) => load.refused += 1,
                    }
                }
                if let Some(cpu) = thread_cpu(pid) {
                    load.cpu = cpu;
                }
                thread::sleep(Duration::from_secs(1));
            }
            load
        });
        (stop, thread)
    });
    let cpu_before = children_cpu();
    let out = child.wait_with_output().expect("run squall");
    let cpu = children_cpu() - cpu_before;
    let load = poller.map(|(stop, thread)| {
        stop.store(true, Ordering::Relaxed);
        thread.join().expect("the poller")
    });
    assert!(out.status.success(), "squall failed: {}", String::from_utf8_lossy(&out.stderr));
    let summary: Json =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("summary")).expect("json");
    let elapsed = summary["elapsed_secs"].as_f64().expect("elapsed_secs");
    let c = summary["components"]
        .as_array()
        .expect("components")
        .iter()
        .find(|c| c["name"] == component)
        .expect("component");
    let count = c[field].as_f64().expect("field");
    let lat = &summary["components"][0]["complete_latency_us"];
    let at = |q: &str| lat[q].as_f64().unwrap_or(0.0);
    Run {
        rate: count / elapsed,
        per_cpu: count / cpu.max(f64::MIN_POSITIVE),
        latency: [at("p50"), at("p99"), at("p999")],
        http: load,
    }
}

/// What one [`squall_run`] measured.
#[derive(Debug)]
struct Run {
    /// `field` of `component` per second of the run.
    rate: f64,
    /// `field` of `component` per CPU second of the process (user + system,
    /// start-up and drain included): the cost, steadier than the rate on
    /// a shared machine.
    per_cpu: f64,
    /// The spout's complete latency p50/p99/p999 (µs).
    latency: [f64; 3],
    /// With `http`, what the poller saw.
    http: Option<HttpLoad>,
}

/// One `GET path` on loopback `port` (with the `Host` the endpoint's
/// rebinding check accepts), read to the end: the status code, `None` if
/// not served.
fn http_get(port: u16, path: &str) -> Option<u16> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(stream, "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n")
        .ok()?;
    let mut response = Vec::new();
    stream.read_to_end(&mut response).ok()?;
    let head = std::str::from_utf8(response.get(..12)?).ok()?;
    head.strip_prefix("HTTP/1.1 ")?.parse().ok()
}

/// What the poller of a `--http` run saw.
#[derive(Debug, Default)]
struct HttpLoad {
    /// Requests answered 200.
    ok: usize,
    /// Requests answered anything else (a bench that measured refusals
    /// would measure nothing).
    refused: usize,
    /// The last reading of the process's CPU seconds: (`__http*` threads, all threads).
    cpu: (f64, f64),
}

/// On-CPU seconds of `pid`'s threads named `__http…` and of all its
/// threads (`schedstat`'s ns, where `stat` counts 10 ms ticks that a few
/// requests never reach).
fn thread_cpu(pid: u32) -> Option<(f64, f64)> {
    let threads = thread_times(pid)?;
    let sum = |http: bool| {
        let ns: u64 = threads
            .iter()
            .filter(|(name, _)| !http || name.starts_with("__http"))
            .map(|t| t.1)
            .sum();
        ns as f64 / 1e9
    };
    Some((sum(true), sum(false)))
}

/// Each thread of `pid`: its name and its on-CPU time in ns, from
/// `/proc/<pid>/task/*/{comm,schedstat}`.
fn thread_times(pid: u32) -> Option<Vec<(String, u64)>> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    let read = |dir: &Path| -> Option<(String, u64)> {
        let name = std::fs::read_to_string(dir.join("comm")).ok()?;
        let sched = std::fs::read_to_string(dir.join("schedstat")).ok()?;
        Some((name.trim_end().to_owned(), sched.split_whitespace().next()?.parse().ok()?))
    };
    Some(tasks.filter_map(|t| read(&t.ok()?.path())).collect())
}

/// The CPU share of one core an idle topology uses over `secs`: in steady
/// state (every thread's on-CPU time from `/proc/<pid>/task/*/schedstat`,
/// in ns, between 2 s after the start and `secs` later), and for the whole
/// run including start-up and shutdown (the child's rusage, 10 ms ticks).
fn idle_cpu(s: &Settings, file: &str, secs: u64) -> (f64, f64) {
    let source = s.root.join("topologies/perf").join(file);
    let text = std::fs::read_to_string(source)
        .expect("idle topology")
        .replace("${SQUALL_PLUGIN_DIR:-../../target/release}", &s.plugin_dir.display().to_string());
    let toml = s.scratch.join(file);
    std::fs::write(&toml, text).expect("write topology");
    let before = children_cpu();
    let started = Instant::now();
    let mut child = Command::new(&s.bin)
        .args(["run", &toml.display().to_string(), "--stats-interval", "0s", "--duration"])
        .arg(format!("{}s", secs + 3))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("run squall");
    thread::sleep(Duration::from_secs(2));
    let (cpu0, t0) = (threads_cpu_ns(child.id()), Instant::now());
    thread::sleep(Duration::from_secs(secs));
    let (cpu1, t1) = (threads_cpu_ns(child.id()), Instant::now());
    assert!(child.wait().expect("wait for squall").success());
    let steady = (cpu1 - cpu0) as f64 / 1e9 / (t1 - t0).as_secs_f64();
    let whole = (children_cpu() - before) / started.elapsed().as_secs_f64();
    (steady, whole)
}

/// The on-CPU time of every thread of `pid`, in ns (`schedstat`'s first field).
fn threads_cpu_ns(pid: u32) -> u64 {
    thread_times(pid).map_or(0, |threads| threads.iter().map(|t| t.1).sum())
}

/// User + system CPU seconds of all waited-for children (getrusage).
fn children_cpu() -> f64 {
    // SAFETY: getrusage writes one rusage struct into the zeroed value we own.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage);
        usage
    };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

/// Runs `stages` threads connected by bounded channels of batches; the first
/// produces with `produce`, the middle ones map with `map`, the last counts.
fn pipeline(
    duration: Duration,
    produce: impl FnMut(&mut Vec<Value>) + Send + 'static,
    maps: Vec<Stage>,
    consume: impl FnMut(&Value) + Send + 'static,
) -> f64 {
    let stop = Arc::new(AtomicBool::new(false));
    let (first_tx, mut rx) = bounded::<Vec<Value>>(QUEUE_BATCHES);
    let mut handles = Vec::new();
    {
        let stop = stop.clone();
        let mut produce = produce;
        handles.push(thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let mut batch = Vec::with_capacity(BATCH);
                produce(&mut batch);
                if first_tx.send(batch).is_err() {
                    return;
                }
            }
        }));
    }
    for mut map in maps {
        let (tx, next_rx) = bounded::<Vec<Value>>(QUEUE_BATCHES);
        let input = std::mem::replace(&mut rx, next_rx);
        handles.push(thread::spawn(move || {
            let mut out = Vec::with_capacity(BATCH);
            for batch in input {
                for v in &batch {
                    map(v, &mut out);
                    if out.len() >= BATCH
                        && tx.send(std::mem::replace(&mut out, Vec::with_capacity(BATCH))).is_err()
                    {
                        return;
                    }
                }
            }
        }));
    }
    let started = Instant::now();
    let counter = thread::spawn(move || {
        let mut consume = consume;
        let mut n = 0u64;
        let deadline = Instant::now() + duration;
        while Instant::now() < deadline {
            let Ok(batch) = rx.recv() else { break };
            for v in &batch {
                consume(v);
            }
            n += batch.len() as u64;
        }
        n
    });
    let n = counter.join().expect("consumer");
    let rate = n as f64 / started.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    drop(handles);
    rate
}

fn const_null(d: Duration) -> f64 {
    let value = Value::from("some data");
    pipeline(
        d,
        move |b| b.extend((0..BATCH).map(|_| value.clone())),
        vec![],
        |v| {
            black_box(v);
        },
    )
}

fn const_id_null(d: Duration) -> f64 {
    let value = Value::from("some data");
    pipeline(
        d,
        move |b| b.extend((0..BATCH).map(|_| value.clone())),
        vec![Box::new(|v, out| out.push(v.clone()))],
        |v| {
            black_box(v);
        },
    )
}

/// Sentences/s: the counter sees words, so divide by the mean words per sentence.
fn wordcount(d: Duration) -> f64 {
    let sentences: Vec<Value> = [
        "the cow jumped over the moon",
        "an apple a day keeps the doctor away",
        "four score and seven years ago",
        "snow white and the seven dwarfs",
        "i am at two with nature",
    ]
    .iter()
    .map(|s| if s.len() > 31 { Value::shared_str(s) } else { Value::from(*s) })
    .collect();
    let words_per_sentence = sentences
        .iter()
        .map(|s| s.as_str().unwrap_or("").split_whitespace().count())
        .sum::<usize>() as f64
        / 5.0;
    let mut rng = 0x2545_f491_4f6c_dd1d_u64;
    let mut counts: FxHashMap<String, u64> = FxHashMap::default();
    let words = pipeline(
        d,
        move |b| {
            for _ in 0..BATCH {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                b.push(sentences[(rng % 5) as usize].clone());
            }
        },
        vec![Box::new(|v, out| {
            for w in v.as_str().unwrap_or("").split_whitespace() {
                out.push(Value::from(w));
            }
        })],
        move |v| {
            let w = v.as_str().unwrap_or("");
            match counts.get_mut(w) {
                Some(c) => *c += 1,
                None => {
                    counts.insert(w.to_owned(), 1);
                }
            }
        },
    );
    words / words_per_sentence
}

/// Issue #12's targets, each figure next to its target (medians of the runs).
/// `medians` holds this run's throughput medians from the first table.
fn targets(s: &Settings, smoke: bool, medians: &FxHashMap<&str, f64>) {
    println!();
    println!("{:<72} {:>14} {:>10}  met", "target (issue #12)", "measured", "target");
    let line = |what: &str, measured: f64, target: f64, unit: &str, at_most: bool| {
        let met = if at_most { measured <= target } else { measured >= target };
        println!(
            "{what:<72} {:>14} {:>10}  {}",
            format!("{measured:.1}{unit}"),
            format!("{}{target}{unit}", if at_most { "<= " } else { ">= " }),
            if met { "yes" } else { "NO" }
        );
    };
    let runs = s.runs;
    // Complete latency at smooth-throttled rates, default batch and queue
    // settings; then the same with the named low-latency profile.
    for profile in [None, Some("low-latency.toml")] {
        for file in ["const-null-ack.toml", "const-id-null-ack.toml"] {
            for rate in [10_000u64, 100_000] {
                let lat: Vec<[f64; 3]> = (0..runs)
                    .map(|_| {
                        let at = Some(rate);
                        squall_run(s, &s.bin, file, "spout", "acked", at, false, true, profile)
                            .latency
                    })
                    .collect();
                let q = |i: usize| median(lat.iter().map(|l| l[i]));
                let name = file.trim_end_matches(".toml");
                let suffix = profile.map_or(String::new(), |p| format!(" [{p}]"));
                println!(
                    "{:<72} {:>14} {:>10}  -",
                    format!("{name} at {rate}/s: latency p50/p99/p999{suffix}"),
                    format!("{:.0}/{:.0}/{:.0}us", q(0), q(1), q(2)),
                    "-"
                );
                if name == "const-id-null-ack" && rate == 100_000 {
                    line(
                        &format!("  const-id-null-ack at 100000/s: p50{suffix}"),
                        q(0),
                        20.0,
                        "us",
                        true,
                    );
                    line(
                        &format!("  const-id-null-ack at 100000/s: p99{suffix}"),
                        q(1),
                        200.0,
                        "us",
                        true,
                    );
                }
            }
        }
    }
    let secs = if smoke { 2 } else { 10 };
    for (file, what) in [
        ("idle.toml", "idle topology (empty spout)"),
        ("idle-held.toml", "spout held at max pending, nothing acked"),
    ] {
        let cpu: Vec<(f64, f64)> = (0..runs).map(|_| idle_cpu(s, file, secs)).collect();
        let steady = median(cpu.iter().map(|c| c.0)) * 100.0;
        let whole = median(cpu.iter().map(|c| c.1)) * 100.0;
        line(&format!("{what}, CPU over {secs} s"), steady, 1.0, "%", true);
        println!(
            "{:<72} {:>14} {:>10}  -",
            "  the same, over the whole process (start-up, run and stop)",
            format!("{whole:.1}%"),
            "-"
        );
    }
    let rate = |file: &str, component: &str, field: &str| {
        median((0..runs).map(|_| squall_rate(s, &s.bin, file, component, field, None).0))
    };
    line(
        "const-null, 64 tuples per next_tuple (M tuples/s)",
        rate("const-null-batch.toml", "bolt", "executed") / 1e6,
        30.0,
        "M",
        false,
    );
    // The first table's medians of this run (measured once per run).
    line(
        "const-null, 1 tuple per call (M tuples/s)",
        medians["const-null"] / 1e6,
        12.0,
        "M",
        false,
    );
    line("wordcount (M sentences/s)", medians["wordcount"] / 1e6, 1.5, "M", false);
    line("const-null acked (M trees/s)", medians["const-null-ack"] / 1e6, 3.0, "M", false);
}
