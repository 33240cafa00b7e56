//! Latency of publish → JetStream → `JetStreamSpout` → bolt `execute` at a
//! paced 1,000 messages/s: p50, p99 and p999 per run, and their medians
//! over 3 runs, next to the target (p50 ≤ 200 µs), and the same figures
//! for a hand-written async-nats pull consumer (the broker's floor).
//!
//! Each run makes a fresh stream and durable pull consumer, starts
//! `squall run` on `JetStreamSpout (emit = "payload") → testkit::LatencyBolt`
//! (acking on, as shipped), waits until the spout's pull request is waiting
//! on the server, then publishes `SQUALL_NATS_LATENCY_WARMUP` (default 500)
//! warm-up messages and `SQUALL_NATS_LATENCY_N` (default 5000) measured
//! ones, one every millisecond on an absolute schedule. Each payload is the
//! send time (`SystemTime`, nanoseconds since the epoch, decimal) taken just
//! before the publish; the bolt records its own `SystemTime` at `execute`
//! minus that, skipping the warm-up, and writes its percentiles when the
//! run is stopped (SIGTERM, after the consumer has no message left
//! pending). Same machine, same clock.
//!
//! Needs the local NATS server (127.0.0.1:4222); without it the bench says
//! so and does nothing. It builds the host and plugins in release mode first.
//!
//! ```text
//! cargo bench -p squall-nats --bench latency
//! ```

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use async_nats::jetstream::{self, consumer, stream};
use common::{build, median, release_dir, unique, URL};

/// One message every millisecond.
const PERIOD: Duration = Duration::from_millis(1);
/// The target of issue 9.
const TARGET_P50_MICROS: f64 = 200.0;

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn main() {
    if std::env::args().any(|a| a == "--test") {
        // `cargo bench -- --test` (bench smoke): compile-only check.
        return;
    }
    if !common::server_up("latency") {
        return;
    }
    let n = env_u64("SQUALL_NATS_LATENCY_N", 5000);
    let warmup = env_u64("SQUALL_NATS_LATENCY_WARMUP", 500);
    let root = common::root();
    build(&root);
    // The publisher runs on one thread, so that it takes as little of the
    // machine from squall as it can.
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let js =
        rt.block_on(async { jetstream::new(async_nats::connect(URL).await.expect("connect")) });
    let mut squall: [Vec<f64>; 3] = Default::default();
    let mut baseline: [Vec<f64>; 3] = Default::default();
    for run in 1..=3 {
        let s = rt.block_on(run_squall(&js, &root, n, warmup));
        println!("run {run}: squall     {s} (load average {})", common::load_average());
        let b = rt.block_on(run_baseline(&js, n, warmup));
        println!("run {run}: async-nats {b} (load average {})", common::load_average());
        for (i, v) in [s.p50, s.p99, s.p999].into_iter().enumerate() {
            squall[i].push(v);
        }
        for (i, v) in [b.p50, b.p99, b.p999].into_iter().enumerate() {
            baseline[i].push(v);
        }
    }
    let [p50, p99, p999] = squall.map(|mut v| median(&mut v));
    let [b50, b99, b999] = baseline.map(|mut v| median(&mut v));
    println!(
        "nats latency at 1000 msg/s, {n} messages, medians of 3: \
         publish -> JetStreamSpout -> bolt execute p50 {p50:.0} µs, p99 {p99:.0} µs, p999 {p999:.0} µs \
         (target p50 <= {TARGET_P50_MICROS:.0} µs: {}); \
         publish -> hand-written async-nats consumer p50 {b50:.0} µs, p99 {b99:.0} µs, p999 {b999:.0} µs",
        if p50 <= TARGET_P50_MICROS { "met" } else { "not met" }
    );
}

/// One run's figures, in microseconds.
#[derive(Debug, Clone, Copy)]
struct Figures {
    recorded: u64,
    p50: f64,
    p99: f64,
    p999: f64,
    max: f64,
}

impl std::fmt::Display for Figures {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} recorded, p50 {:.0} µs, p99 {:.0} µs, p999 {:.0} µs, max {:.0} µs",
            self.recorded, self.p50, self.p99, self.p999, self.max
        )
    }
}

fn now_nanos() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos() as u64
}

async fn consumer_info(
    js: &jetstream::Context,
    stream: &str,
    name: &str,
) -> jetstream::consumer::Info {
    let stream = js.get_stream(stream).await.expect("the stream");
    stream.consumer_info(name).await.expect("consumer info")
}

/// A fresh stream and durable pull consumer: `(stream, subject, consumer)`.
async fn setup(js: &jetstream::Context) -> (String, String, String) {
    let stream_name = unique("LATENCY");
    let subject = unique("latency");
    let consumer_name = unique("lat");
    js.create_stream(stream::Config {
        name: stream_name.clone(),
        subjects: vec![subject.clone()],
        ..Default::default()
    })
    .await
    .expect("create stream");
    js.get_stream(&stream_name)
        .await
        .unwrap()
        .create_consumer(consumer::pull::Config {
            durable_name: Some(consumer_name.clone()),
            ack_policy: consumer::AckPolicy::Explicit,
            ack_wait: Duration::from_secs(30),
            max_ack_pending: 1000,
            ..Default::default()
        })
        .await
        .expect("create consumer");
    (stream_name, subject, consumer_name)
}

/// Waits until a pull request of the consumer waits on the server.
async fn wait_for_pull(
    js: &jetstream::Context,
    stream: &str,
    consumer: &str,
    mut alive: impl FnMut() -> bool,
) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while consumer_info(js, stream, consumer).await.num_waiting == 0 {
        assert!(Instant::now() < deadline, "the consumer never pulled");
        assert!(alive(), "the consumer exited before it pulled");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Publishes `total` messages, one per `PERIOD` on an absolute schedule,
/// each carrying its send time; waits for every PubAck.
async fn publish_paced(js: &jetstream::Context, subject: &str, total: u64) {
    let mut acks = tokio::task::JoinSet::new();
    let start = tokio::time::Instant::now() + Duration::from_millis(10);
    for i in 0..total {
        tokio::time::sleep_until(start + PERIOD * i as u32).await;
        let payload = now_nanos().to_string();
        let ack = js.publish(subject.to_owned(), payload.into()).await.expect("publish");
        acks.spawn(async move { ack.await.map(drop) });
        while let Some(done) = acks.try_join_next() {
            done.unwrap().expect("PubAck");
        }
    }
    while let Some(done) = acks.join_next().await {
        done.unwrap().expect("PubAck");
    }
}

/// The hand-written floor: an async-nats pull consumer on a one-thread
/// runtime of its own (as the spout's I/O thread is), recording receive
/// time minus send time and acking each message.
async fn run_baseline(js: &jetstream::Context, n: u64, warmup: u64) -> Figures {
    let (stream_name, subject, consumer_name) = setup(js).await;
    let total = warmup + n;
    let (stream2, consumer2) = (stream_name.clone(), consumer_name.clone());
    let reader = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async move {
            use futures_util::StreamExt;
            let js = jetstream::new(async_nats::connect(URL).await.expect("connect"));
            let consumer: consumer::PullConsumer =
                js.get_stream(&stream2).await.unwrap().get_consumer(&consumer2).await.unwrap();
            let mut messages =
                consumer.stream().max_messages_per_batch(256).messages().await.unwrap();
            let mut latencies = Vec::with_capacity(total as usize);
            while (latencies.len() as u64) < total {
                let Some(Ok(m)) = messages.next().await else { continue };
                let now = now_nanos();
                let sent: u64 = std::str::from_utf8(&m.payload).unwrap().parse().unwrap();
                latencies.push(now.saturating_sub(sent));
                m.ack().await.unwrap();
            }
            latencies
        })
    });
    wait_for_pull(js, &stream_name, &consumer_name, || !reader.is_finished()).await;
    publish_paced(js, &subject, total).await;
    let mut latencies = reader.join().expect("the reader");
    let _ = js.delete_stream(&stream_name).await;
    let mut measured = latencies.split_off(warmup as usize);
    measured.sort_unstable();
    let at = |q: f64| {
        measured[((measured.len() as f64 * q) as usize).min(measured.len() - 1)] as f64 / 1000.0
    };
    Figures {
        recorded: measured.len() as u64,
        p50: at(0.5),
        p99: at(0.99),
        p999: at(0.999),
        max: *measured.last().unwrap() as f64 / 1000.0,
    }
}

async fn run_squall(js: &jetstream::Context, root: &Path, n: u64, warmup: u64) -> Figures {
    let (stream_name, subject, consumer_name) = setup(js).await;
    let release = release_dir(root);
    let dir = std::env::temp_dir().join(unique("squall-nats-latency"));
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join("lat");
    let topology = dir.join("latency.toml");
    std::fs::write(
        &topology,
        format!(
            r#"
[plugins]
nats = "{release}/libsquall_nats.so"
testkit = "{release}/libsquall_testkit.so"

[spouts.in]
component = "nats::JetStreamSpout"
config = {{ stream = "{stream_name}", consumer = "{consumer_name}", emit = "payload" }}

[bolts.latency]
component = "testkit::LatencyBolt"
inputs = [{{ from = "in", stream = "payload" }}]
config = {{ out = "{out}", skip = {warmup} }}
"#,
            release = release.display(),
            out = out.display(),
        ),
    )
    .unwrap();
    let mut child = Command::new(release.join("squall"))
        .arg("run")
        .arg(&topology)
        .env("SQUALL_ALLOW_WRITABLE_PLUGINS", "1")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start squall");

    wait_for_pull(js, &stream_name, &consumer_name, || child.try_wait().is_ok_and(|s| s.is_none()))
        .await;
    let total = warmup + n;
    publish_paced(js, &subject, total).await;

    // Done when every message was delivered and acked.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let info = consumer_info(js, &stream_name, &consumer_name).await;
        if info.num_pending == 0
            && info.num_ack_pending == 0
            && info.ack_floor.stream_sequence >= total
        {
            break;
        }
        assert!(Instant::now() < deadline, "not every message was acked: {info:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // SIGTERM: a graceful drain, then cleanup writes the report.
    let _ = Command::new("kill").arg("-TERM").arg(child.id().to_string()).status();
    let status = child.wait().expect("wait for squall");
    assert!(status.success(), "squall exited with {status}");
    let report = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("lat.") && !n.ends_with(".tmp"))
        })
        .expect("the latency report");
    let text = std::fs::read_to_string(&report).unwrap();
    let get = |key: &str| -> u64 {
        text.lines()
            .find_map(|l| l.strip_prefix(key).and_then(|v| v.strip_prefix(' ')))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no {key} in {text:?}"))
    };
    assert_eq!(get("tuples"), total, "every message reached the bolt once: {text}");
    assert_eq!(get("unparsed"), 0, "{text}");
    let micros = |key: &str| get(key) as f64 / 1000.0;
    let figures = Figures {
        recorded: get("recorded"),
        p50: micros("p50"),
        p99: micros("p99"),
        p999: micros("p999"),
        max: micros("max"),
    };
    let _ = std::fs::remove_dir_all(&dir);
    let _ = js.delete_stream(&stream_name).await;
    figures
}
