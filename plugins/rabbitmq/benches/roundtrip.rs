//! RabbitMQ -> squall -> RabbitMQ against a hand-written lapin program
//! doing the same work, in one run: messages/s of both, medians of 3
//! rounds, and their ratio.
//!
//! squall runs `QueueSpout -> testkit::IdBolt -> QueuePublish` with acking
//! on (an input is acked to RabbitMQ after its output's publisher confirm).
//! The baseline consumes the input queue with the same prefetch, publishes
//! each body to the output queue with confirms (at most as many in flight
//! as the prefetch) and acks the input after its confirm. Both publish
//! persistent messages. Each round uses fresh queues of `N` messages
//! (`SQUALL_RABBITMQ_BENCH_N`, default 50000); a rate is counted from the
//! first output message to the N-th, so process start-up is left out.
//!
//! Needs the local RabbitMQ (127.0.0.1:5672); without it the bench says so
//! and does nothing. It builds the host and plugins in release mode first.
//!
//! ```text
//! cargo bench -p squall-rabbitmq --bench roundtrip
//! ```

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use lapin::options::{
    BasicAckOptions, BasicConsumeOptions, BasicPublishOptions, BasicQosOptions,
    ConfirmSelectOptions, QueueDeclareOptions, QueueDeleteOptions,
};
use lapin::types::FieldTable;
use lapin::{BasicProperties, Channel, Connection, ConnectionProperties};

const URL: &str = "amqp://guest:guest@127.0.0.1:5672/%2f";
/// The prefetch of both, and the baseline's confirms in flight.
const PREFETCH: u16 = 1000;

fn main() {
    if std::env::args().any(|a| a == "--test") {
        return;
    }
    let addr = "127.0.0.1:5672".parse().expect("an address");
    if std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(1)).is_err() {
        eprintln!("roundtrip bench: no RabbitMQ on 127.0.0.1:5672; skipped");
        return;
    }
    let n: u64 = std::env::var("SQUALL_RABBITMQ_BENCH_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(50_000);
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    build(&root);
    let rt =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let (mut squall, mut baseline) = (Vec::new(), Vec::new());
    for round in 1..=3 {
        let s = rt.block_on(round_squall(&root, n));
        let b = rt.block_on(round_baseline(n));
        println!(
            "round {round}: squall {s:.0} msg/s, lapin {b:.0} msg/s (load average {})",
            load()
        );
        squall.push(s);
        baseline.push(b);
    }
    let (s, b) = (median(&mut squall), median(&mut baseline));
    println!(
        "rabbitmq roundtrip, {n} messages, median of 3: squall {s:.0} msg/s, lapin {b:.0} msg/s, ratio {:.2} (target >= 0.8)",
        s / b
    );
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

fn release_dir(root: &Path) -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map_or_else(|| root.join("target"), PathBuf::from)
        .join("release")
}

fn build(root: &Path) {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    for (key, _) in std::env::vars_os() {
        let key = key.to_string_lossy().into_owned();
        if key.starts_with("CARGO_PKG_")
            || key.starts_with("CARGO_MANIFEST_")
            || key == "CARGO_CRATE_NAME"
        {
            cmd.env_remove(key);
        }
    }
    let status = cmd
        .current_dir(root)
        .args(["build", "--release", "-p", "squall-host", "-p", "squall-testkit"])
        .args(["-p", "squall-rabbitmq"])
        .status()
        .expect("run cargo build");
    assert!(status.success(), "cargo build failed");
}

fn unique(prefix: &str) -> String {
    let nanos =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
    format!("{prefix}_{}_{nanos}", std::process::id())
}

async fn channel() -> (Connection, Channel) {
    let c = Connection::connect(URL, ConnectionProperties::default()).await.expect("connect");
    let ch = c.create_channel().await.expect("channel");
    (c, ch)
}

async fn declare(ch: &Channel, q: &str) {
    ch.queue_declare(q.into(), QueueDeclareOptions::durable(), FieldTable::default())
        .await
        .expect("declare");
}

async fn ready(ch: &Channel, q: &str) -> u64 {
    let options = QueueDeclareOptions { passive: true, ..Default::default() };
    ch.queue_declare(q.into(), options, FieldTable::default())
        .await
        .map_or(0, |q| u64::from(q.message_count()))
}

/// Fresh input and output queues, `n` messages in the input.
async fn setup(n: u64) -> (String, String) {
    let (input, output) = (unique("bench_in"), unique("bench_out"));
    let (_c, ch) = channel().await;
    declare(&ch, &input).await;
    declare(&ch, &output).await;
    declare(&ch, &format!("{input}.dead-letters")).await;
    ch.confirm_select(ConfirmSelectOptions::default()).await.unwrap();
    let payload = vec![b'x'; 100];
    let mut confirms = Vec::with_capacity(1000);
    for _ in 0..n {
        let props = BasicProperties::default().with_delivery_mode(2);
        let c = ch
            .basic_publish(
                "".into(),
                input.as_str().into(),
                BasicPublishOptions::default(),
                &payload,
                props,
            )
            .await
            .unwrap();
        confirms.push(c);
        if confirms.len() == 1000 {
            for c in confirms.drain(..) {
                c.await.unwrap();
            }
        }
    }
    for c in confirms {
        c.await.unwrap();
    }
    (input, output)
}

async fn teardown(input: &str, output: &str) {
    let (_c, ch) = channel().await;
    for q in [input.to_owned(), output.to_owned(), format!("{input}.dead-letters")] {
        let _ = ch.queue_delete(q.as_str().into(), QueueDeleteOptions::default()).await;
    }
}

/// Polls the output until it holds `n` messages; the rate from the first
/// output message to the last.
async fn measure(output: &str, n: u64) -> f64 {
    let (_c, ch) = channel().await;
    let deadline = Instant::now() + Duration::from_secs(600);
    let mut first: Option<(Instant, u64)> = None;
    loop {
        let c = ready(&ch, output).await;
        let now = Instant::now();
        if c > 0 && first.is_none() {
            first = Some((now, c));
        }
        if c >= n {
            let (t0, c0) = first.expect("set above");
            return (c - c0) as f64 / now.duration_since(t0).as_secs_f64().max(1e-3);
        }
        assert!(now < deadline, "the output reached only {c} of {n} messages");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn round_squall(root: &Path, n: u64) -> f64 {
    let (input, output) = setup(n).await;
    let release = release_dir(root);
    let dir = std::env::temp_dir().join(unique("squall-rabbitmq-bench"));
    std::fs::create_dir_all(&dir).unwrap();
    let topology = dir.join("bench.toml");
    std::fs::write(
        &topology,
        format!(
            r#"
[topology]
max_spout_pending = 5000
producer_batch_size = 64

[plugins]
rabbitmq = "{release}/libsquall_rabbitmq.so"
testkit = "{release}/libsquall_testkit.so"

[spouts.in]
component = "rabbitmq::QueueSpout"
config = {{ queue = "{input}", emit = "payload", prefetch = {PREFETCH} }}

[bolts.id]
component = "testkit::IdBolt"
inputs = [{{ from = "in" }}]

[bolts.out]
component = "rabbitmq::QueuePublish"
tick_tuple_freq_secs = 1
inputs = [{{ from = "id" }}]
config = {{ routing_key = "{output}", batch = {PREFETCH} }}
"#,
            release = release.display(),
        ),
    )
    .unwrap();
    let mut child: Child = Command::new(release.join("squall"))
        .arg("run")
        .arg(&topology)
        .env("SQUALL_ALLOW_WRITABLE_PLUGINS", "1")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start squall");
    let rate = measure(&output, n).await;
    let _ = Command::new("kill").arg("-TERM").arg(child.id().to_string()).status();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&dir);
    teardown(&input, &output).await;
    rate
}

async fn round_baseline(n: u64) -> f64 {
    let (input, output) = setup(n).await;
    let (conn, consume) = channel().await;
    let publish = conn.create_channel().await.unwrap();
    publish.confirm_select(ConfirmSelectOptions::default()).await.unwrap();
    consume.basic_qos(PREFETCH, BasicQosOptions::default()).await.unwrap();
    let mut consumer = consume
        .basic_consume(
            input.as_str().into(),
            "bench".into(),
            BasicConsumeOptions::default(),
            FieldTable::default(),
        )
        .await
        .unwrap();
    let out = output.clone();
    let limit = Arc::new(tokio::sync::Semaphore::new(usize::from(PREFETCH)));
    let worker = tokio::spawn(async move {
        let mut done = 0u64;
        while done < n {
            let Some(Ok(d)) = consumer.next().await else { continue };
            done += 1;
            let permit = Arc::clone(&limit).acquire_owned().await.unwrap();
            let props = BasicProperties::default().with_delivery_mode(2);
            let confirm = publish
                .basic_publish(
                    "".into(),
                    out.as_str().into(),
                    BasicPublishOptions::default(),
                    &d.data,
                    props,
                )
                .await
                .unwrap();
            tokio::spawn(async move {
                if confirm.await.is_ok_and(|c| c.is_ack()) {
                    let _ = d.ack(BasicAckOptions::default()).await;
                }
                drop(permit);
            });
        }
    });
    let rate = measure(&output, n).await;
    worker.abort();
    drop(conn);
    teardown(&input, &output).await;
    rate
}
