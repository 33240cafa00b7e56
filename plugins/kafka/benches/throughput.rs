//! Kafka through squall against bare rdkafka loops, in one run, as ratios
//! of medians.
//!
//! - **consume**: `KafkaSpout -> testkit::NullBolt` with acking on (a record
//!   counts once its tree completed, `kafka_acked`), reading a topic
//!   pre-loaded with `N` records of 100 bytes, against a bare `BaseConsumer`
//!   loop reading the same topic (every partition assigned from the start).
//!   After each squall round the group's committed offsets are checked to
//!   equal `N` in total. The squall rate is counted between the first and
//!   the last sample of `/metrics` (every 20 ms) from the first acked record
//!   to the `N`-th, so the process start and the group join are left out;
//!   the baseline's from its first record to its `N`-th, plus a synchronous
//!   commit at the end.
//! - **produce**: `examples::RandomSentenceSpout` (one 100-byte sentence,
//!   `limit = N`) `-> kafka::KafkaPublish` (acked on the broker's delivery
//!   report, idempotent, `linger.ms` 5: its defaults), counted on
//!   `kafka_produced`, against a bare idempotent `BaseProducer` loop with
//!   `linger.ms` 5 sending `N` records of 100 bytes and polling its delivery
//!   reports until all are in. Twice per round: with the topology
//!   defaults (`producer_batch_size = 1`, Storm's), and with the settings
//!   of the host's throughput bench (`topologies/perf/`, storm-perf's:
//!   `producer_batch_size = 1000`, `receive_buffer_size = 50000`), under
//!   which the spout is asked for up to a batch per call and the sink
//!   takes runs of inputs.
//!
//! Rounds alternate squall and the baseline. `SQUALL_KAFKA_BENCH_N`
//! (default 500000) and `SQUALL_KAFKA_BENCH_RUNS` (default 3) set the size
//! and the rounds; `SQUALL_KAFKA_BENCH_PARTITIONS` (default 4) the input
//! topic's partitions; `SQUALL_KAFKA_BENCH_SPOUT` adds keys to the spout's
//! config (say `prefetch_bytes = 67108864`). The broker is the local one on 127.0.0.1:9092
//! (`bash ../shared/kafka/start-kafka.sh start`); without it the bench says
//! so and does nothing. The host and the plugins must be built:
//!
//! ```text
//! cargo build --release -p squall-host -p squall-kafka -p squall-testkit -p squall-examples
//! cargo bench -p squall-kafka --bench throughput
//! ```

use std::future::Future;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::task::{Context, Poll, Wake};
use std::time::{Duration, Instant};

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::{ClientConfig, Offset, TopicPartitionList};

const BROKERS: &str = "127.0.0.1:9092";
const PAYLOAD: usize = 100;

fn main() {
    if std::env::args().any(|a| a == "--test") {
        return; // bench smoke: compile only
    }
    if TcpStream::connect_timeout(&BROKERS.parse().expect("an address"), Duration::from_secs(1))
        .is_err()
    {
        eprintln!("kafka throughput bench: no broker on {BROKERS}; skipped");
        return;
    }
    let env = |k: &str, d: u64| std::env::var(k).ok().and_then(|v| v.parse().ok()).unwrap_or(d);
    let n = env("SQUALL_KAFKA_BENCH_N", 500_000);
    let runs = env("SQUALL_KAFKA_BENCH_RUNS", 3) as usize;
    let partitions = env("SQUALL_KAFKA_BENCH_PARTITIONS", 4) as i32;
    let release = release_dir();
    for f in ["squall", "libsquall_kafka.so", "libsquall_testkit.so", "libsquall_examples.so"] {
        assert!(release.join(f).exists(), "{} is not built (see the module doc)", f);
    }
    let scratch = std::env::temp_dir().join(unique("squall-kafka-bench"));
    std::fs::create_dir_all(&scratch).expect("a scratch directory");

    let input = unique("bench_in");
    create_topic(&input, partitions);
    let loaded = Instant::now();
    produce_bare(&input, n);
    println!(
        "pre-loaded {n} records of {PAYLOAD} B into {partitions} partition(s) in {:.1} s",
        loaded.elapsed().as_secs_f64()
    );
    let (mut consume_s, mut consume_b, mut produce_s, mut produce_b) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut produce_perf = Vec::new();
    for round in 1..=runs {
        let (s, rss) = consume_squall(&release, &scratch, &input, partitions, n);
        let b = consume_bare(&input, partitions, n);
        println!(
            "round {round} consume: squall {s:.0} rec/s (peak RSS {rss:.0} MiB), rdkafka {b:.0} \
             rec/s, ratio {:.2} (load average {})",
            s / b,
            load_average()
        );
        consume_s.push(s);
        consume_b.push(b);
        let out = unique("bench_out");
        create_topic(&out, 1);
        let (s, rss) = produce_squall(&release, &scratch, &out, n, "");
        let out = unique("bench_out");
        create_topic(&out, 1);
        let (p, prss) = produce_squall(&release, &scratch, &out, n, PERF_SETTINGS);
        let out = unique("bench_out");
        create_topic(&out, 1);
        let started = Instant::now();
        produce_bare(&out, n);
        let b = n as f64 / started.elapsed().as_secs_f64();
        println!(
            "round {round} produce: squall {s:.0} rec/s (peak RSS {rss:.0} MiB), with the perf \
             settings {p:.0} rec/s (peak RSS {prss:.0} MiB), rdkafka {b:.0} rec/s, ratios {:.2} \
             and {:.2} (load average {})",
            s / b,
            p / b,
            load_average()
        );
        produce_s.push(s);
        produce_perf.push(p);
        produce_b.push(b);
    }
    let (cs, cb) = (median(&mut consume_s), median(&mut consume_b));
    let (ps, pb) = (median(&mut produce_s), median(&mut produce_b));
    let pp = median(&mut produce_perf);
    println!(
        "kafka -> squall -> null (acked, committed), {n} records, median of {runs}: squall {cs:.0} \
         rec/s, bare BaseConsumer {cb:.0} rec/s, ratio {:.2}",
        cs / cb
    );
    println!(
        "squall -> kafka (KafkaPublish), {n} records, median of {runs}: squall {ps:.0} rec/s, \
         bare BaseProducer {pb:.0} rec/s, ratio {:.2}",
        ps / pb
    );
    println!(
        "squall -> kafka (KafkaPublish) with the perf settings, {n} records, median of {runs}: \
         squall {pp:.0} rec/s, bare BaseProducer {pb:.0} rec/s, ratio {:.2}",
        pp / pb
    );
    let _ = std::fs::remove_dir_all(&scratch);
}

/// `target/release` of the workspace (or of `CARGO_TARGET_DIR`).
fn release_dir() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    std::env::var_os("CARGO_TARGET_DIR")
        .map_or_else(|| root.join("target"), PathBuf::from)
        .join("release")
}

fn unique(prefix: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("{prefix}_{}_{nanos}", std::process::id())
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().map(str::to_owned))
        .unwrap_or_else(|| "?".into())
}

fn config() -> ClientConfig {
    let mut c = ClientConfig::new();
    c.set("bootstrap.servers", BROKERS);
    c
}

/// Waits for a future on this thread (the admin client completes it).
fn block_on<F: Future>(future: F) -> F::Output {
    struct Unpark(std::thread::Thread);
    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Arc::new(Unpark(std::thread::current())).into();
    let mut cx = Context::from_waker(&waker);
    let mut future = std::pin::pin!(future);
    loop {
        if let Poll::Ready(out) = future.as_mut().poll(&mut cx) {
            return out;
        }
        std::thread::park_timeout(Duration::from_millis(10));
    }
}

fn create_topic(topic: &str, partitions: i32) {
    let admin: AdminClient<DefaultClientContext> = config().create().expect("an admin client");
    let new = NewTopic::new(topic, partitions, TopicReplication::Fixed(1));
    for r in block_on(admin.create_topics([&new], &AdminOptions::new())).expect("create topics") {
        r.unwrap_or_else(|(t, e)| panic!("cannot create topic {t}: {e}"));
    }
}

/// The bare producer loop: `n` records of `PAYLOAD` bytes, idempotent,
/// `linger.ms` 5 (KafkaPublish's defaults), until every delivery report is
/// in.
fn produce_bare(topic: &str, n: u64) {
    let producer: BaseProducer = config()
        .set("enable.idempotence", "true")
        .set("linger.ms", "5")
        .create()
        .expect("a producer");
    let payload = vec![b'x'; PAYLOAD];
    for _ in 0..n {
        let mut record = BaseRecord::<(), [u8]>::to(topic).payload(&payload);
        loop {
            match producer.send(record) {
                Ok(()) => break,
                Err((_, r)) => {
                    record = r;
                    producer.poll(Duration::from_millis(1));
                }
            }
        }
        producer.poll(Duration::ZERO);
    }
    producer.flush(Duration::from_secs(120)).expect("every record delivered");
}

/// The bare consumer loop: every partition from the start, until `n`
/// records came; then one synchronous commit. Records per second from the
/// assignment to the commit.
fn consume_bare(topic: &str, partitions: i32, n: u64) -> f64 {
    let consumer: BaseConsumer = config()
        .set("group.id", unique("bench_bare"))
        .set("enable.auto.commit", "false")
        .set("fetch.wait.max.ms", "10")
        .create()
        .expect("a consumer");
    let mut tpl = TopicPartitionList::new();
    for p in 0..partitions {
        tpl.add_partition_offset(topic, p, Offset::Beginning).expect("a partition");
    }
    // From the assignment: librdkafka fetches ahead into its queue (64 MiB
    // by default), so timing from the first record would leave most of the
    // transfer out (it did: 0.4 to 1.8 million records/s).
    let t0 = Instant::now();
    consumer.assign(&tpl).expect("assign");
    let mut seen = 0u64;
    let deadline = Instant::now() + Duration::from_secs(600);
    while seen < n {
        assert!(Instant::now() < deadline, "the bare consumer read only {seen} of {n}");
        let Some(m) = consumer.poll(Duration::from_millis(100)) else { continue };
        m.expect("a record");
        seen += 1;
    }
    consumer.commit_consumer_state(CommitMode::Sync).expect("commit");
    n as f64 / t0.elapsed().as_secs_f64()
}

/// A free loopback port for `--http`.
fn free_port() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").expect("a port");
    l.local_addr().expect("an address")
}

/// The sum of a `/metrics` sample's values over its label sets (`None`:
/// no answer, or no sample yet).
fn metric(addr: SocketAddr, name: &str) -> Option<f64> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_millis(500)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    // The host checks `Host` (a loopback name or address).
    write!(s, "GET /metrics HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").ok()?;
    let mut raw = Vec::new();
    let _ = s.read_to_end(&mut raw);
    let text = String::from_utf8_lossy(&raw);
    let values: Vec<f64> = text
        .lines()
        .filter(|l| l.starts_with(name) && l[name.len()..].starts_with(['{', ' ']))
        .filter_map(|l| l.rsplit(' ').next()?.parse().ok())
        .collect();
    (!values.is_empty()).then(|| values.iter().sum())
}

/// The peak resident set (`VmHWM`) of process `pid`, in MiB.
fn peak_rss_mib(pid: u32) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            let line = s.lines().find(|l| l.starts_with("VmHWM:"))?;
            line.split_whitespace().nth(1)?.parse::<f64>().ok()
        })
        .map_or(f64::NAN, |kib| kib / 1024.0)
}

/// Runs `topology` in squall with `--http` until `name` reaches `n`;
/// returns the rate between the first sample above 0 and the first at
/// `n`, and squall's peak RSS by then (MiB), then stops squall gracefully
/// (SIGTERM).
fn run_squall(release: &Path, topology: &Path, name: &str, n: u64) -> (f64, f64) {
    let addr = free_port();
    let mut child: Child = Command::new(release.join("squall"))
        .arg("run")
        .arg(topology)
        .args(["--http", &addr.to_string()])
        .env("SQUALL_ALLOW_WRITABLE_PLUGINS", "1")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start squall");
    let deadline = Instant::now() + Duration::from_secs(180);
    let mut first: Option<(Instant, f64)> = None;
    let mut last = None;
    let rate = loop {
        let now = Instant::now();
        if now > deadline {
            let _ = child.kill();
            panic!("squall did not reach {n} {name} within 180 s (last sample {last:?})");
        }
        last = metric(addr, name);
        if let Some(v) = last {
            if v > 0.0 && first.is_none() {
                first = Some((now, v));
            }
            if v >= n as f64 {
                let (t0, v0) = first.unwrap_or((now, 0.0));
                break (v - v0) / now.duration_since(t0).as_secs_f64().max(1e-3);
            }
        }
        if let Ok(Some(status)) = child.try_wait() {
            let mut err = String::new();
            if let Some(mut e) = child.stderr.take() {
                let _ = e.read_to_string(&mut err);
            }
            panic!("squall exited early ({status}):\n{err}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let rss = peak_rss_mib(child.id());
    let _ = Command::new("kill").arg("-TERM").arg(child.id().to_string()).status();
    let mut err = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut err);
    }
    let status = child.wait().expect("squall ends");
    assert!(status.success(), "squall's graceful stop failed ({status}):\n{err}");
    (rate, rss)
}

fn consume_squall(
    release: &Path,
    scratch: &Path,
    topic: &str,
    partitions: i32,
    n: u64,
) -> (f64, f64) {
    let group = unique("bench_squall");
    let path = scratch.join(format!("{group}.toml"));
    std::fs::write(
        &path,
        format!(
            r#"
[topology]
max_spout_pending = 20000

[plugins]
kafka = "{release}/libsquall_kafka.so"
testkit = "{release}/libsquall_testkit.so"

[spouts.in]
component = "kafka::KafkaSpout"
config = {{ assign = ["{topic}"], group_id = "{group}", max_pending = 20000, properties = {{ "fetch.wait.max.ms" = 10 }}{extra} }}

[bolts.null]
component = "testkit::NullBolt"
inputs = [{{ from = "in" }}]
"#,
            release = release.display(),
            extra = std::env::var("SQUALL_KAFKA_BENCH_SPOUT").map(|e| format!(", {e}")).unwrap_or_default(),
        ),
    )
    .expect("write the topology");
    let (rate, rss) = run_squall(release, &path, "squall_user_kafka_acked_total", n);
    // The offsets: committed at close at the latest.
    let consumer: BaseConsumer = config().set("group.id", &group).create().expect("a consumer");
    let mut tpl = TopicPartitionList::new();
    for p in 0..partitions {
        tpl.add_partition(topic, p);
    }
    let committed = consumer.committed_offsets(tpl, Duration::from_secs(10)).expect("committed");
    let total: i64 =
        committed.elements().iter().filter_map(|e| e.offset().to_raw()).filter(|o| *o > 0).sum();
    assert_eq!(total, n as i64, "the group's committed offsets after the squall round");
    (rate, rss)
}

/// The `[topology]` keys of the host's throughput bench (storm-perf's).
const PERF_SETTINGS: &str = "producer_batch_size = 1000\nreceive_buffer_size = 50000";

/// `settings`: more `[topology]` keys.
fn produce_squall(
    release: &Path,
    scratch: &Path,
    topic: &str,
    n: u64,
    settings: &str,
) -> (f64, f64) {
    let path = scratch.join(format!("{topic}.toml"));
    std::fs::write(
        &path,
        format!(
            r#"
[topology]
max_spout_pending = 20000
{settings}

[plugins]
kafka = "{release}/libsquall_kafka.so"
examples = "{release}/libsquall_examples.so"

[spouts.in]
component = "examples::RandomSentenceSpout"
config = {{ order = "cycle", limit = {n}, sentences = ["{sentence}"] }}

[bolts.out]
component = "kafka::KafkaPublish"
tick_tuple_freq_secs = 1
inputs = [{{ from = "in" }}]
config = {{ topic = "{topic}", value_field = "sentence" }}
"#,
            release = release.display(),
            sentence = "x".repeat(PAYLOAD),
        ),
    )
    .expect("write the topology");
    run_squall(release, &path, "squall_user_kafka_produced_total", n)
}
