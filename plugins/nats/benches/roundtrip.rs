//! JetStream -> squall -> JetStream against a hand-written async-nats
//! program doing the same work, in one run: messages/s of both, medians of
//! 3 rounds, and their ratio.
//!
//! squall runs `JetStreamSpout -> testkit::IdBolt -> JetStreamPublish` with
//! acking on (a message is acked to JetStream after its output's PubAck).
//! The baseline consumes the same kind of input from a durable pull
//! consumer, publishes each payload (PubAcks pipelined) and acks the input
//! after its PubAck. Each round uses fresh streams of `N` messages
//! (`SQUALL_NATS_BENCH_N`, default 200000); a rate is counted from the first
//! output message to the N-th, so process start-up is left out.
//!
//! Needs the local NATS server (127.0.0.1:4222); without it the bench says
//! so and does nothing. It builds the host and plugins in release mode first.
//!
//! ```text
//! cargo bench -p squall-nats --bench roundtrip
//! ```

mod common;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_nats::jetstream::{self, consumer, stream};
use futures_util::StreamExt;

use common::{build, median, release_dir, unique, URL};

fn main() {
    if std::env::args().any(|a| a == "--test") {
        // `cargo bench -- --test` (bench smoke): compile-only check.
        return;
    }
    if !common::server_up("roundtrip") {
        return;
    }
    let n: u64 =
        std::env::var("SQUALL_NATS_BENCH_N").ok().and_then(|v| v.parse().ok()).unwrap_or(200_000);
    let root = common::root();
    build(&root);
    let rt =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let js =
        rt.block_on(async { jetstream::new(async_nats::connect(URL).await.expect("connect")) });
    let (mut squall, mut baseline) = (Vec::new(), Vec::new());
    for round in 1..=3 {
        let s = rt.block_on(round_squall(&js, &root, n));
        let b = rt.block_on(round_baseline(&js, n));
        println!(
            "round {round}: squall {s:.0} msg/s, async-nats {b:.0} msg/s (load average {})",
            common::load_average()
        );
        squall.push(s);
        baseline.push(b);
    }
    let (s, b) = (median(&mut squall), median(&mut baseline));
    println!(
        "nats roundtrip, {n} messages, median of 3: squall {s:.0} msg/s, async-nats {b:.0} msg/s, ratio {:.2} (target >= 0.8)",
        s / b
    );
}

struct Streams {
    input: String,
    in_subject: String,
    consumer: String,
    output: String,
    out_subject: String,
}

/// Fresh input and output streams, a durable consumer, and `n` messages.
async fn setup(js: &jetstream::Context, n: u64) -> Streams {
    let s = Streams {
        input: unique("BENCH_IN"),
        in_subject: unique("bench_in"),
        consumer: unique("bench"),
        output: unique("BENCH_OUT"),
        out_subject: unique("bench_out"),
    };
    for (name, subject) in [(&s.input, &s.in_subject), (&s.output, &s.out_subject)] {
        js.create_stream(stream::Config {
            name: name.clone(),
            subjects: vec![subject.clone()],
            ..Default::default()
        })
        .await
        .expect("create stream");
    }
    js.get_stream(&s.input)
        .await
        .unwrap()
        .create_consumer(consumer::pull::Config {
            durable_name: Some(s.consumer.clone()),
            ack_policy: consumer::AckPolicy::Explicit,
            ack_wait: Duration::from_secs(60),
            max_ack_pending: 20_000,
            ..Default::default()
        })
        .await
        .expect("create consumer");
    let payload = bytes::Bytes::from(vec![b'x'; 100]);
    let mut acks = Vec::with_capacity(1000);
    for _ in 0..n {
        acks.push(js.publish(s.in_subject.clone(), payload.clone()).await.unwrap());
        if acks.len() == 1000 {
            for a in acks.drain(..) {
                a.await.unwrap();
            }
        }
    }
    for a in acks {
        a.await.unwrap();
    }
    s
}

async fn teardown(js: &jetstream::Context, s: &Streams) {
    let _ = js.delete_stream(&s.input).await;
    let _ = js.delete_stream(&s.output).await;
}

async fn count(js: &jetstream::Context, stream: &str) -> u64 {
    js.get_stream(stream).await.unwrap().info().await.unwrap().state.messages
}

/// Polls the output until it holds `n` messages; the rate from the first
/// output message to the last.
async fn measure(js: &jetstream::Context, output: &str, n: u64) -> f64 {
    let deadline = Instant::now() + Duration::from_secs(600);
    let mut first: Option<(Instant, u64)> = None;
    loop {
        let c = count(js, output).await;
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

async fn round_squall(js: &jetstream::Context, root: &Path, n: u64) -> f64 {
    let s = setup(js, n).await;
    let release = release_dir(root);
    let dir = std::env::temp_dir().join(unique("squall-nats-bench"));
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
nats = "{release}/libsquall_nats.so"
testkit = "{release}/libsquall_testkit.so"

[spouts.in]
component = "nats::JetStreamSpout"
config = {{ stream = "{input}", consumer = "{consumer}", emit = "payload", batch = 1024 }}

[bolts.id]
component = "testkit::IdBolt"
inputs = [{{ from = "in", stream = "payload" }}]

[bolts.out]
component = "nats::JetStreamPublish"
tick_tuple_freq_secs = 1
inputs = [{{ from = "id" }}]
config = {{ subject = "{out}", payload_field = "value" }}
"#,
            release = release.display(),
            input = s.input,
            consumer = s.consumer,
            out = s.out_subject,
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
    let rate = measure(js, &s.output, n).await;
    // SIGTERM: a graceful drain.
    let _ = Command::new("kill").arg("-TERM").arg(child.id().to_string()).status();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&dir);
    teardown(js, &s).await;
    rate
}

async fn round_baseline(js: &jetstream::Context, n: u64) -> f64 {
    let s = setup(js, n).await;
    let consumer: consumer::PullConsumer =
        js.get_stream(&s.input).await.unwrap().get_consumer(&s.consumer).await.unwrap();
    let out_subject = s.out_subject.clone();
    let js2 = js.clone();
    let limit = Arc::new(tokio::sync::Semaphore::new(5000));
    let worker = tokio::spawn(async move {
        let mut messages = consumer.stream().max_messages_per_batch(1024).messages().await.unwrap();
        let mut done = 0u64;
        while done < n {
            let Some(Ok(m)) = messages.next().await else { continue };
            done += 1;
            let permit = Arc::clone(&limit).acquire_owned().await.unwrap();
            let ack = js2.publish(out_subject.clone(), m.payload.clone()).await.unwrap();
            tokio::spawn(async move {
                if ack.await.is_ok() {
                    let _ = m.ack().await;
                }
                drop(permit);
            });
        }
    });
    let rate = measure(js, &s.output, n).await;
    worker.abort();
    teardown(js, &s).await;
    rate
}
