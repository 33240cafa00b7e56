//! Durable state's costs (issue 21), measured on the `squall` binary:
//!
//! - **throughput**: the word count (`RandomSentenceSpout` unthrottled and
//!   untracked, 2 split tasks, 2 `DurableWordCount` tasks: full load, every
//!   queue full) with no `[state]`, and with
//!   its counts checkpointed every second into Redis, into PostgreSQL and
//!   into the embedded store (a redb file in the scratch folder);
//!   runs alternate in each round, and the ratios to no-state are taken
//!   within the round. Medians over `BENCH_RUNS` rounds (default 3), each
//!   run `BENCH_SECS` long (default 8).
//! - **checkpoint duration** p50 and p99 at full load, and the process's
//!   RSS near the end of each run.
//! - **restore** of `BENCH_KEYS` keys (default 1,000,000) at start, for
//!   each backend: a topology whose one bolt holds that many keys is
//!   checkpointed once, then started again, and the restore's own time is
//!   read from the summary.
//!
//! `cargo bench -p squall-host --bench durable` with the workspace built in
//! release (`cargo build --release --workspace`), Redis and PostgreSQL on
//! loopback; `-- --test` runs one short round. The embedded store lives in
//! the scratch folder under the system's temporary folder: put `TMPDIR` on
//! the disk to measure.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

fn main() {
    let smoke = std::env::args().any(|a| a == "--test");
    let env = |k: &str, d: u64| std::env::var(k).ok().and_then(|v| v.parse().ok()).unwrap_or(d);
    let (runs, secs, keys) = if smoke {
        (1, 2, 10_000)
    } else {
        (env("BENCH_RUNS", 3) as usize, env("BENCH_SECS", 8), env("BENCH_KEYS", 1_000_000))
    };
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("workspace").to_path_buf();
    let bin_dir = std::env::var_os("SQUALL_PLUGIN_DIR")
        .map_or_else(|| root.join("target/release"), PathBuf::from);
    let squall = bin_dir.join("squall");
    for lib in [
        "libsquall_examples.so",
        "libsquall_state_redis.so",
        "libsquall_state_postgres.so",
        "libsquall_state_embedded.so",
    ] {
        if !bin_dir.join(lib).exists() || !squall.exists() {
            eprintln!(
                "missing {}: run `cargo build --release --workspace`",
                bin_dir.join(lib).display()
            );
            std::process::exit(2);
        }
    }
    let scratch = std::env::temp_dir().join(format!("squall-durable-bench-{}", std::process::id()));
    std::fs::create_dir_all(&scratch).expect("scratch");
    let bench = Bench { squall, dir: bin_dir, scratch };

    let variants = [
        ("no state", None),
        ("redis", Some(REDIS)),
        ("postgres", Some(POSTGRES)),
        ("embedded", Some(EMBEDDED)),
    ];
    let mut rates: Vec<Vec<f64>> = vec![Vec::new(); variants.len()];
    let mut ratios: Vec<Vec<f64>> = vec![Vec::new(); variants.len()];
    let mut p50: Vec<Vec<f64>> = vec![Vec::new(); variants.len()];
    let mut p99: Vec<Vec<f64>> = vec![Vec::new(); variants.len()];
    let mut rss: Vec<Vec<f64>> = vec![Vec::new(); variants.len()];
    for round in 0..runs {
        let mut base = 0.0;
        // Alternate the order each round, so neither variant always runs first.
        let order: Vec<usize> = if round % 2 == 0 {
            (0..variants.len()).collect()
        } else {
            (0..variants.len()).rev().collect()
        };
        let mut round_rates = vec![0.0; variants.len()];
        for &i in &order {
            let (name, backend) = variants[i];
            let run = bench.word_count(name, backend, secs);
            round_rates[i] = run.rate;
            rates[i].push(run.rate);
            rss[i].push(run.rss_mib);
            if let Some((a, b)) = run.p50_p99 {
                p50[i].push(a);
                p99[i].push(b);
            }
            eprintln!(
                "round {round}: {name}: {:.0} sentences/s, RSS {:.0} MiB",
                run.rate, run.rss_mib
            );
        }
        base += round_rates[0];
        for i in 0..variants.len() {
            ratios[i].push(round_rates[i] / base);
        }
    }
    println!("word count with durable counts, {runs} round(s) of {secs} s per variant (medians):");
    for (i, (name, _)) in variants.iter().enumerate() {
        let checkpoint = match (median(&p50[i]), median(&p99[i])) {
            (Some(a), Some(b)) => format!(", checkpoint p50 {a:.1} ms, p99 {b:.1} ms"),
            _ => String::new(),
        };
        println!(
            "  {name:>9}: {:>9.0} sentences/s, ratio to no state {:.3}, RSS {:.0} MiB{checkpoint}",
            median(&rates[i]).unwrap_or(0.0),
            median(&ratios[i]).unwrap_or(0.0),
            median(&rss[i]).unwrap_or(0.0),
        );
    }
    for (name, backend) in [("redis", REDIS), ("postgres", POSTGRES), ("embedded", EMBEDDED)] {
        let (restore, records) = bench.restore(name, backend, keys);
        println!("  restore of {records} records from {name}: {restore:.3} s");
    }
    let _ = std::fs::remove_dir_all(&bench.scratch);
}

const REDIS: &str = r#"backend = "state::RedisState"
config = { url = "redis://127.0.0.1:6379" }"#;
const POSTGRES: &str = r#"backend = "state::PostgresState"
config = { url = "host=127.0.0.1 port=5432 user=postgres dbname=postgres" }"#;
/// In the folder `state` beside the topology file (the scratch folder).
const EMBEDDED: &str = r#"backend = "emb::EmbeddedState"
config = { path = "${SQUALL_TOPOLOGY_DIR}/state" }"#;

struct Bench {
    squall: PathBuf,
    dir: PathBuf,
    scratch: PathBuf,
}

struct Run {
    rate: f64,
    rss_mib: f64,
    p50_p99: Option<(f64, f64)>,
}

fn median(v: &[f64]) -> Option<f64> {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    (!v.is_empty()).then(|| v[v.len() / 2])
}

fn lib(dir: &Path, name: &str) -> String {
    dir.join(format!("libsquall_{name}.so")).display().to_string()
}

impl Bench {
    fn plugins(&self) -> String {
        format!(
            "[plugins]\nexamples = \"{}\"\nstate = \"{}\"\npg = \"{}\"\nemb = \"{}\"\n",
            lib(&self.dir, "examples"),
            lib(&self.dir, "state_redis"),
            lib(&self.dir, "state_postgres"),
            lib(&self.dir, "state_embedded")
        )
    }

    fn state(&self, backend: Option<&str>, namespace: &str) -> String {
        backend.map_or_else(String::new, |b| {
            format!(
                "[state]\nnamespace = \"{namespace}\"\ninterval_ms = 1000\n{}\n",
                b.replace("state::PostgresState", "pg::PostgresState")
            )
        })
    }

    /// Runs `squall` on `toml` for `secs`, sampling its RSS near the end;
    /// returns the `--json` summary and the RSS (MiB).
    fn run(&self, name: &str, toml: &str, secs: u64) -> (serde_json::Value, f64) {
        let file = self.scratch.join(format!("{}.toml", name.replace(' ', "-")));
        let json = self.scratch.join(format!("{}.json", name.replace(' ', "-")));
        std::fs::write(&file, toml).expect("write the topology");
        let mut child = Command::new(&self.squall)
            .args(["run", "--stats-interval", "0s", "--duration"])
            .arg(format!("{secs}s"))
            .arg("--json")
            .arg(&json)
            .arg(&file)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("start squall");
        let started = Instant::now();
        let sample_at = Duration::from_millis(secs * 1000 * 9 / 10);
        let mut rss = 0.0;
        while child.try_wait().expect("wait").is_none() {
            if rss == 0.0 && started.elapsed() >= sample_at {
                rss = rss_mib(child.id());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let text = std::fs::read_to_string(&json).expect("the --json summary");
        (serde_json::from_str(&text).expect("a JSON summary"), rss)
    }

    fn word_count(&self, name: &str, backend: Option<&str>, secs: u64) -> Run {
        let namespace = format!("squall-bench-{}-{}", std::process::id(), name.replace(' ', "-"));
        let toml = format!(
            "[topology]\nname = \"bench\"\nacker_executors = 0\n\n{}\n{}\n\
             [spouts.sentences]\ncomponent = \"examples::RandomSentenceSpout\"\nconfig = {{ seed = 42 }}\n\n\
             [bolts.split]\ncomponent = \"examples::SplitSentence\"\nparallelism = 2\n\
             inputs = [{{ from = \"sentences\", grouping = \"shuffle\" }}]\n\n\
             [bolts.count]\ncomponent = \"examples::DurableWordCount\"\nparallelism = 2\n\
             inputs = [{{ from = \"split\", grouping = {{ fields = [\"word\"] }} }}]\n",
            self.plugins(),
            self.state(backend, &namespace)
        );
        let (summary, rss_mib) = self.run(name, &toml, secs);
        self.clear(backend, &namespace);
        let acked = summary["components"][0]["emitted"].as_f64().unwrap_or(0.0);
        let elapsed = summary["elapsed_secs"].as_f64().unwrap_or(1.0);
        let d = &summary["durable_state"];
        let p50_p99 = d["duration_p50_ms"].as_f64().zip(d["duration_p99_ms"].as_f64());
        Run { rate: acked / elapsed, rss_mib, p50_p99 }
    }

    /// Checkpoints `keys` distinct keys, then starts again and returns the
    /// restore's time and record count.
    fn restore(&self, name: &str, backend: &str, keys: u64) -> (f64, u64) {
        let namespace = format!("squall-bench-{}-restore-{name}", std::process::id());
        // `keys / 1000` sentences of 1000 distinct words each, emitted once
        // (`order = "cycle"`, `limit` = their number).
        let words_per_sentence = 1000u64;
        let sentences: Vec<String> = (0..keys / words_per_sentence)
            .map(|s| {
                let words: Vec<String> = (0..words_per_sentence)
                    .map(|w| format!("w{}", s * words_per_sentence + w))
                    .collect();
                format!("\"{}\"", words.join(" "))
            })
            .collect();
        let toml = |limit: u64| {
            format!(
                "[topology]\nname = \"restore\"\nmessage_timeout_secs = 60\n\n{}\n{}\n\
                 [spouts.sentences]\ncomponent = \"examples::RandomSentenceSpout\"\n\
                 config = {{ order = \"cycle\", limit = {limit}, sentences = [{}] }}\n\n\
                 [bolts.split]\ncomponent = \"examples::SplitSentence\"\n\
                 inputs = [{{ from = \"sentences\", grouping = \"shuffle\" }}]\n\n\
                 [bolts.count]\ncomponent = \"examples::DurableWordCount\"\nparallelism = 2\n\
                 inputs = [{{ from = \"split\", grouping = {{ fields = [\"word\"] }} }}]\n",
                self.plugins(),
                self.state(Some(backend), &namespace),
                sentences.join(", ")
            )
        };
        let fill_secs = (keys / 50_000).clamp(5, 120);
        let _ = self.run(&format!("fill-{name}"), &toml(sentences.len() as u64), fill_secs);
        let (summary, _) = self.run(&format!("restore-{name}"), &toml(sentences.len() as u64), 2);
        self.clear(Some(backend), &namespace);
        let d = &summary["durable_state"];
        (
            d["restore_secs"].as_f64().unwrap_or(f64::NAN),
            d["restored_records"].as_u64().unwrap_or(0),
        )
    }

    fn clear(&self, backend: Option<&str>, namespace: &str) {
        let Some(b) = backend else { return };
        let file = self.scratch.join("clear.toml");
        let toml = format!(
            "{}\n{}\n[spouts.s]\ncomponent = \"examples::RandomSentenceSpout\"\n",
            self.plugins(),
            self.state(Some(b), namespace)
        );
        std::fs::write(&file, toml).expect("write");
        let _ = Command::new(&self.squall)
            .args(["state", "rm", "--yes"])
            .arg(&file)
            .stdout(std::process::Stdio::null())
            .status();
    }
}

fn rss_mib(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|kib| kib.parse::<f64>().ok())
        .map_or(0.0, |kib| kib / 1024.0)
}
