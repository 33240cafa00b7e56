//! Redis Stream -> squall -> Redis Stream, against a hand-written program of
//! the same job: messages/s of both and their ratio, medians of several runs.
//!
//! - squall: `redis::StreamSpout` -> `testkit::PackBolt` ->
//!   `redis::StreamAppend`, acking on (one acker): each entry is XACKed after
//!   its copy was XADDed.
//! - baseline: one thread with one connection: XREADGROUP a batch, XADD the
//!   batch's entries in one pipeline (the same fields squall writes: `id` and
//!   the entry's fields), XACK the batch, repeat.
//!
//! Both read the same pre-filled input stream (`BENCH_MESSAGES` entries,
//! default 200,000, each `uid` and a 16-byte `body`) through a fresh group,
//! with reads of 200 entries. The rate is measured from the first entry in the
//! output stream to the last, so squall's start-up is not counted.
//!
//! ```text
//! cargo build --release -p squall-host -p squall-testkit -p squall-redis
//! cargo bench -p squall-redis --bench pipeline
//! ```
//!
//! `BENCH_RUNS` (default 3) sets the runs of each; `-- --test` does one run
//! of 10,000 messages. Needs Redis on 127.0.0.1:6379 (`REDIS_URL`).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use redis::{Connection, Value as RedisValue};

/// Read and write batch of both contenders.
const BATCH: usize = 200;

fn main() {
    let smoke = std::env::args().any(|a| a == "--test");
    let env_num = |k: &str, d: u64| std::env::var(k).ok().and_then(|v| v.parse().ok()).unwrap_or(d);
    let messages = if smoke { 10_000 } else { env_num("BENCH_MESSAGES", 200_000) };
    let runs = if smoke { 1 } else { env_num("BENCH_RUNS", 3) as usize };
    let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let release = std::env::var_os("SQUALL_PLUGIN_DIR")
        .map_or_else(|| root.join("target/release"), PathBuf::from);
    let bin = release.join("squall");
    for needed in
        [bin.clone(), release.join("libsquall_testkit.so"), release.join("libsquall_redis.so")]
    {
        if !needed.exists() {
            eprintln!(
                "error: {} is missing; build first: cargo build --release -p squall-host -p squall-testkit -p squall-redis",
                needed.display()
            );
            std::process::exit(1);
        }
    }
    let mut con = match redis::Client::open(url.as_str()).and_then(|c| c.get_connection()) {
        Ok(con) => con,
        Err(e) => {
            eprintln!("error: cannot connect to redis at {url}: {e}");
            std::process::exit(1);
        }
    };
    let scratch = std::env::temp_dir().join(format!("squall-redis-bench-{}", std::process::id()));
    std::fs::create_dir_all(&scratch).expect("temp dir");

    println!(
        "redis stream -> stream, {messages} messages, {runs} run(s) each, alternating, medians"
    );
    let mut ours = Vec::new();
    let mut theirs = Vec::new();
    for run in 0..runs {
        let rate = squall_run(&mut con, &url, &bin, &release, &scratch, messages, run);
        println!("  run {}: squall   {:>10.0} msg/s", run + 1, rate);
        ours.push(rate);
        let rate = baseline_run(&mut con, &url, messages, run);
        println!("  run {}: baseline {:>10.0} msg/s", run + 1, rate);
        theirs.push(rate);
    }
    let (ours, theirs) = (median(ours), median(theirs));
    println!("squall   (spout -> PackBolt -> StreamAppend, acking) {ours:>10.0} msg/s");
    println!("baseline (XREADGROUP -> pipelined XADD -> XACK)       {theirs:>10.0} msg/s");
    println!("ratio squall / baseline                               {:>10.2}", ours / theirs);
    let _ = std::fs::remove_dir_all(&scratch);
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// Stream and group names of one run; the streams are deleted on drop.
struct Streams {
    input: String,
    output: String,
    group: String,
    url: String,
}

impl Streams {
    fn new(con: &mut Connection, url: &str, who: &str, run: usize, messages: u64) -> Self {
        let tag = format!("{}_{who}_{run}", std::process::id());
        let s = Self {
            input: format!("squall_bench_in_{tag}"),
            output: format!("squall_bench_out_{tag}"),
            group: format!("squall_bench_group_{tag}"),
            url: url.to_owned(),
        };
        let mut uid = 0;
        while uid < messages {
            let mut pipe = redis::pipe();
            for _ in 0..1000.min(messages - uid) {
                pipe.cmd("XADD")
                    .arg(&s.input)
                    .arg("*")
                    .arg("uid")
                    .arg(uid)
                    .arg("body")
                    .arg("0123456789abcdef")
                    .ignore();
                uid += 1;
            }
            pipe.query::<()>(con).expect("XADD");
        }
        redis::cmd("XGROUP")
            .arg("CREATE")
            .arg(&s.input)
            .arg(&s.group)
            .arg("0")
            .query::<()>(con)
            .expect("XGROUP CREATE");
        s
    }
}

impl Drop for Streams {
    fn drop(&mut self) {
        if let Ok(mut con) = redis::Client::open(self.url.as_str()).and_then(|c| c.get_connection())
        {
            let _: Result<i64, _> =
                redis::cmd("DEL").arg(&self.input).arg(&self.output).query(&mut con);
        }
    }
}

fn xlen(con: &mut Connection, stream: &str) -> u64 {
    redis::cmd("XLEN").arg(stream).query(con).expect("XLEN")
}

/// Polls the output until it holds `messages` entries; the rate from the
/// first output entry to the last.
fn watch(con: &mut Connection, output: &str, messages: u64, child: Option<&mut Child>) -> f64 {
    let limit = Instant::now() + Duration::from_secs(600);
    let mut first: Option<(Instant, u64)> = None;
    let mut child = child;
    loop {
        let n = xlen(con, output);
        let now = Instant::now();
        if n > 0 && first.is_none() {
            first = Some((now, n));
        }
        if n >= messages {
            let (t0, n0) = first.expect("set before");
            let secs = now.duration_since(t0).as_secs_f64().max(1e-3);
            return (n - n0) as f64 / secs;
        }
        if let Some(c) = child.as_deref_mut() {
            if let Ok(Some(status)) = c.try_wait() {
                panic!("squall exited early with {status}");
            }
        }
        assert!(now < limit, "output stuck at {n} of {messages}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn squall_run(
    con: &mut Connection,
    url: &str,
    bin: &Path,
    release: &Path,
    scratch: &Path,
    messages: u64,
    run: usize,
) -> f64 {
    let s = Streams::new(con, url, "squall", run, messages);
    let topology = scratch.join(format!("bench-{run}.toml"));
    std::fs::write(
        &topology,
        format!(
            r#"
[topology]
name = "redis-bench"
max_spout_pending = 5000
acker_executors = 1

[plugins]
testkit = "{testkit}"
redis = "{redis}"

[spouts.source]
component = "redis::StreamSpout"
config = {{ url = "{url}", stream = "{input}", group = "{group}", consumer = "bench", batch = {BATCH}, max_pending = 5000, create_group = false }}

[bolts.pack]
component = "testkit::PackBolt"
inputs = [{{ from = "source" }}]

[bolts.sink]
component = "redis::StreamAppend"
tick_tuple_freq_secs = 1
inputs = [{{ from = "pack" }}]
config = {{ url = "{url}", stream = "{output}", batch = {BATCH} }}
"#,
            testkit = release.join("libsquall_testkit.so").display(),
            redis = release.join("libsquall_redis.so").display(),
            input = s.input,
            group = s.group,
            output = s.output,
        ),
    )
    .expect("write the topology");
    let mut child = Command::new(bin)
        .arg("run")
        .arg(&topology)
        .args(["--stats-interval", "0s"])
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start squall");
    let rate = watch(con, &s.output, messages, Some(&mut child));
    let _ = Command::new("kill").arg("-TERM").arg(child.id().to_string()).status();
    let _ = child.wait();
    rate
}

/// The hand-written contender, on a thread of its own.
fn baseline_run(con: &mut Connection, url: &str, messages: u64, run: usize) -> f64 {
    let s = Streams::new(con, url, "baseline", run, messages);
    let (input, output, group) = (s.input.clone(), s.output.clone(), s.group.clone());
    let url2 = url.to_owned();
    let worker = std::thread::spawn(move || {
        let mut con =
            redis::Client::open(url2.as_str()).and_then(|c| c.get_connection()).expect("connect");
        let mut done = 0_u64;
        while done < messages {
            let reply: RedisValue = redis::cmd("XREADGROUP")
                .arg("GROUP")
                .arg(&group)
                .arg("bench")
                .arg("COUNT")
                .arg(BATCH)
                .arg("BLOCK")
                .arg(500)
                .arg("STREAMS")
                .arg(&input)
                .arg(">")
                .query(&mut con)
                .expect("XREADGROUP");
            let entries = stream_entries(&reply);
            if entries.is_empty() {
                continue;
            }
            let mut pipe = redis::pipe();
            for (id, fields) in &entries {
                let cmd = pipe.cmd("XADD").arg(&output).arg("*").arg("id").arg(id);
                for f in fields {
                    cmd.arg(f);
                }
                cmd.ignore();
            }
            pipe.query::<()>(&mut con).expect("XADD pipeline");
            let ids: Vec<&String> = entries.iter().map(|(id, _)| id).collect();
            redis::cmd("XACK")
                .arg(&input)
                .arg(&group)
                .arg(ids)
                .query::<i64>(&mut con)
                .expect("XACK");
            done += entries.len() as u64;
        }
    });
    let rate = watch(con, &s.output, messages, None);
    worker.join().expect("the baseline thread");
    rate
}

/// `(id, [f1, v1, ...])` of an XREADGROUP reply on one stream.
fn stream_entries(reply: &RedisValue) -> Vec<(String, Vec<Vec<u8>>)> {
    fn items(v: &RedisValue) -> &[RedisValue] {
        match v {
            RedisValue::Array(a) => a,
            _ => &[],
        }
    }
    fn bytes(v: &RedisValue) -> Vec<u8> {
        match v {
            RedisValue::BulkString(b) => b.clone(),
            RedisValue::SimpleString(s) => s.clone().into_bytes(),
            _ => Vec::new(),
        }
    }
    let mut out = Vec::new();
    for stream in items(reply) {
        for entry in items(stream).get(1).map(items).unwrap_or(&[]) {
            let parts = items(entry);
            let Some(id) = parts.first() else { continue };
            let id = String::from_utf8_lossy(&bytes(id)).into_owned();
            let fields =
                parts.get(1).map(|f| items(f).iter().map(bytes).collect()).unwrap_or_default();
            out.push((id, fields));
        }
    }
    out
}
