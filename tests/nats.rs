//! The NATS JetStream connector against the real local server: no message
//! lost under chaos, a killed host, a drained host and a cut connection;
//! config errors with their place in the file.
//!
//! Every test makes its own streams, subjects and consumers with
//! `util::unique_name` and deletes them when it ends (also when it fails).

use std::collections::HashSet;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use async_nats::jetstream::{self, consumer, stream};
use futures_util::StreamExt;

use crate::util::*;

/// A client for setting up and checking, on a runtime of its own; the
/// streams it created are deleted when it is dropped.
pub(crate) struct Broker {
    rt: tokio::runtime::Runtime,
    js: jetstream::Context,
    streams: Vec<String>,
}

/// One input stream with its consumer, and one output stream.
struct Pipeline {
    input: String,
    in_subject: String,
    consumer: String,
    output: String,
    out_subject: String,
}

impl Broker {
    pub(crate) fn connect() -> Self {
        Self::connect_to(NATS.addr)
    }

    /// A client of the server at `addr` (a test's own server).
    pub(crate) fn connect_to(addr: &str) -> Self {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let client = rt.block_on(async_nats::connect(addr)).expect("connect to NATS");
        let js = jetstream::new(client);
        Self { rt, js, streams: Vec::new() }
    }

    pub(crate) fn create_stream(&mut self, name: &str, subject: &str) {
        let config = stream::Config {
            name: name.to_owned(),
            subjects: vec![subject.to_owned()],
            ..Default::default()
        };
        self.rt.block_on(self.js.create_stream(config)).expect("create stream");
        self.streams.push(name.to_owned());
    }

    fn create_consumer(&self, stream: &str, name: &str, ack_wait: Duration) {
        let config = consumer::pull::Config {
            durable_name: Some(name.to_owned()),
            ack_policy: consumer::AckPolicy::Explicit,
            ack_wait,
            max_ack_pending: 20_000,
            ..Default::default()
        };
        self.rt
            .block_on(async {
                let s = self.js.get_stream(stream).await.expect("the stream exists");
                s.create_consumer(config).await.map(drop)
            })
            .expect("create consumer");
    }

    /// Streams `IN`/`OUT` with subjects `in.data`/`out.data` (all unique) and
    /// a durable consumer on the input.
    fn pipeline(&mut self, ack_wait: Duration) -> Pipeline {
        let p = Pipeline {
            input: unique_name("IN"),
            in_subject: unique_name("in"),
            consumer: unique_name("squall"),
            output: unique_name("OUT"),
            out_subject: unique_name("out"),
        };
        self.create_stream(&p.input, &p.in_subject);
        self.create_stream(&p.output, &p.out_subject);
        self.create_consumer(&p.input, &p.consumer, ack_wait);
        p
    }

    /// Publishes payloads `id-0` … `id-(n-1)`, many PubAcks in flight.
    fn publish_ids(&self, subject: &str, n: u64) {
        self.publish_each(subject, n, |i| format!("id-{i}"));
    }

    /// Publishes `payload(0)` … `payload(n-1)` in order, many PubAcks in flight.
    pub(crate) fn publish_each(&self, subject: &str, n: u64, payload: impl Fn(u64) -> String) {
        self.rt.block_on(async {
            let mut acks = Vec::with_capacity(1000);
            for i in 0..n {
                let ack = self.js.publish(subject.to_owned(), payload(i).into()).await.unwrap();
                acks.push(ack);
                if acks.len() == 1000 {
                    for a in acks.drain(..) {
                        a.await.expect("PubAck");
                    }
                }
            }
            for a in acks {
                a.await.expect("PubAck");
            }
        });
    }

    fn message_count(&self, stream: &str) -> u64 {
        self.rt.block_on(async {
            for attempt in 1.. {
                let info = match self.js.get_stream(stream).await {
                    Ok(mut s) => {
                        s.info().await.map(|i| i.state.messages).map_err(|e| e.to_string())
                    }
                    Err(e) => Err(e.to_string()),
                };
                match info {
                    Ok(n) => return n,
                    Err(e) if attempt < 5 => eprintln!("stream info: {e}; asking again"),
                    Err(e) => panic!("stream info of {stream}: {e}"),
                }
            }
            unreachable!("the loop returns or panics")
        })
    }

    /// The ids in every message of `stream` (read with an ephemeral consumer).
    fn ids_in(&self, stream: &str) -> HashSet<u64> {
        self.rt.block_on(async {
            let total =
                self.js.get_stream(stream).await.unwrap().info().await.unwrap().state.messages;
            let mut ids = HashSet::new();
            if total == 0 {
                return ids;
            }
            let s = self.js.get_stream(stream).await.unwrap();
            let c = s
                .create_consumer(consumer::pull::Config {
                    ack_policy: consumer::AckPolicy::None,
                    ..Default::default()
                })
                .await
                .unwrap();
            let mut messages = c.stream().max_messages_per_batch(5000).messages().await.unwrap();
            let mut seen = 0u64;
            while seen < total {
                let m = tokio::time::timeout(Duration::from_secs(10), messages.next())
                    .await
                    .expect("reading the output stream stalled")
                    .expect("the stream ended")
                    .expect("a message");
                seen += 1;
                let text = std::str::from_utf8(&m.payload).expect("UTF-8 payload");
                let id = text.strip_prefix("id-").and_then(|n| n.parse().ok());
                ids.insert(id.unwrap_or_else(|| panic!("unexpected payload {text:?}")));
            }
            ids
        })
    }

    /// Pulls up to `n` messages from the durable consumer (for at most 5 s)
    /// and acks them; returns how many had been delivered before.
    fn take_redelivered(&self, stream: &str, consumer: &str, n: usize) -> usize {
        self.rt.block_on(async {
            let s = self.js.get_stream(stream).await.unwrap();
            let c: consumer::PullConsumer = s.get_consumer(consumer).await.unwrap();
            let mut batch = c
                .batch()
                .max_messages(n.max(1))
                .expires(Duration::from_secs(5))
                .messages()
                .await
                .unwrap();
            let mut redelivered = 0;
            while let Some(m) = batch.next().await {
                let m = m.expect("a message");
                if m.info().expect("JetStream metadata").delivered > 1 {
                    redelivered += 1;
                }
                m.double_ack().await.expect("ack confirmed");
            }
            redelivered
        })
    }

    /// The messages in `stream`, 0 while it does not exist.
    fn message_count_if_any(&self, stream: &str) -> u64 {
        let exists = self.rt.block_on(self.js.get_stream(stream)).is_ok();
        if exists {
            self.message_count(stream)
        } else {
            0
        }
    }

    /// `(num_ack_pending, num_pending)` of a consumer; `None` while it (or
    /// its stream) does not exist or does not answer.
    pub(crate) fn pending_if_any(&self, stream: &str, consumer: &str) -> Option<(usize, u64)> {
        self.rt.block_on(async {
            let info = self.js.get_stream(stream).await.ok()?.consumer_info(consumer).await.ok()?;
            Some((info.num_ack_pending, info.num_pending))
        })
    }

    /// Deletes a key-value bucket (a group's leases), if it exists.
    pub(crate) fn delete_bucket(&self, bucket: &str) {
        let _ = self.rt.block_on(self.js.delete_key_value(bucket));
    }

    /// `(num_ack_pending, num_pending)` of a consumer.
    pub(crate) fn pending(&self, stream: &str, consumer: &str) -> (usize, u64) {
        self.rt.block_on(async {
            // A loaded machine (parallel tests) can delay an API answer past
            // the client's request timeout: ask again.
            for attempt in 1.. {
                let info = match self.js.get_stream(stream).await {
                    Ok(s) => s.consumer_info(consumer).await.map_err(|e| e.to_string()),
                    Err(e) => Err(e.to_string()),
                };
                match info {
                    Ok(info) => return (info.num_ack_pending, info.num_pending),
                    Err(e) if attempt < 5 => eprintln!("consumer info: {e}; asking again"),
                    Err(e) => panic!("consumer info of {stream}/{consumer}: {e}"),
                }
            }
            unreachable!("the loop returns or panics")
        })
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        for s in std::mem::take(&mut self.streams) {
            let _ = self.rt.block_on(self.js.delete_stream(&s));
        }
    }
}

/// spout -> chaos -> publish; `extra` goes into the spout's config.
fn chaos_topology(ws: &Workspace, p: &Pipeline, url: &str, extra: &str) -> PathBuf {
    ws.write_topology(
        "nats.toml",
        &format!(
            r#"
[topology]
message_timeout_secs = 2
max_spout_pending = 2000

[plugins]
nats = "{{nats}}"
testkit = "{{testkit}}"

[spouts.in]
component = "nats::JetStreamSpout"
config = {{ url = "{url}", stream = "{input}", consumer = "{consumer}", emit = "payload", batch = 512{extra} }}

[bolts.chaos]
component = "testkit::ChaosBolt"
parallelism = 2
inputs = [{{ from = "in", stream = "payload" }}]
config = {{ fail_rate = 0.01, drop_rate = 0.005 }}

[bolts.out]
component = "nats::JetStreamPublish"
tick_tuple_freq_secs = 1
inputs = [{{ from = "chaos" }}]
config = {{ url = "{url}", subject = "{out}", payload_field = "value" }}
"#,
            input = p.input,
            consumer = p.consumer,
            out = p.out_subject,
        ),
    )
}

/// Waits until the output holds every id below `n`, or the consumer is idle
/// (nothing pending, nothing ack-pending) and the output stopped growing,
/// or `within` passed. Returns the ids missing from the output.
fn wait_for_output(broker: &Broker, p: &Pipeline, n: u64, within: Duration) -> Vec<u64> {
    let deadline = Instant::now() + within;
    let (mut last_count, mut stable) = (u64::MAX, 0);
    loop {
        std::thread::sleep(Duration::from_secs(1));
        let count = broker.message_count(&p.output);
        let idle = broker.pending(&p.input, &p.consumer) == (0, 0);
        stable = if count == last_count && idle { stable + 1 } else { 0 };
        last_count = count;
        if count >= n || stable >= 3 || Instant::now() > deadline {
            let ids = broker.ids_in(&p.output);
            let missing: Vec<u64> = (0..n).filter(|i| !ids.contains(i)).collect();
            if missing.is_empty() || stable >= 3 || Instant::now() > deadline {
                return missing;
            }
        }
    }
}

/// The loss test itself: `n` ids through spout -> chaos (1 % failed, 0.5 %
/// dropped) -> publish. Returns the ids missing from the output, and checks
/// the host exited 0 after SIGTERM.
fn run_chaos(test: &str, n: u64, extra: &str) -> (Vec<u64>, (usize, u64)) {
    let mut broker = Broker::connect();
    let p = broker.pipeline(Duration::from_secs(20));
    broker.publish_ids(&p.in_subject, n);
    let ws = Workspace::new(test);
    let topology = chaos_topology(&ws, &p, "nats://127.0.0.1:4222", extra);
    let mut cmd = SquallCommand::run_until_interrupted(&ws, &topology);
    cmd.limit(Duration::from_secs(300));
    let running = cmd.spawn();
    let missing = wait_for_output(&broker, &p, n, Duration::from_secs(180));
    running.terminate();
    let out = running.wait();
    out.assert_code(0);
    assert!(!out.stderr.contains("panicked"), "{}", out.context());
    (missing, broker.pending(&p.input, &p.consumer))
}

#[test]
fn no_message_is_lost_when_a_bolt_fails_and_drops_tuples() {
    if !require_service(NATS) {
        return;
    }
    let (missing, pending) = run_chaos("nats-chaos", 100_000, "");
    assert!(
        missing.is_empty(),
        "{} ids missing from the output, e.g. {:?}",
        missing.len(),
        &missing[..missing.len().min(10)]
    );
    assert_eq!(pending, (0, 0), "the consumer still has (ack pending, pending) messages");
}

#[test]
fn the_loss_check_catches_a_spout_that_acks_on_emit() {
    if !require_service(NATS) {
        return;
    }
    // The hidden flag acks to the broker on emit, as a broken spout would:
    // failed and dropped tuples are then never redelivered.
    let (missing, _) = run_chaos("nats-chaos-broken", 10_000, ", unsafe_ack_on_emit = true");
    assert!(!missing.is_empty(), "acking on emit lost nothing: the loss check cannot fail");
}

/// spout -> slow bolt, for the drain test.
#[test]
fn sigterm_resolves_every_held_message_before_exit() {
    if !require_service(NATS) {
        return;
    }
    let mut broker = Broker::connect();
    // A long ack_wait: anything left unresolved would stay ack-pending.
    let p = broker.pipeline(Duration::from_secs(120));
    broker.publish_ids(&p.in_subject, 5000);
    let ws = Workspace::new("nats-sigterm");
    let topology = ws.write_topology(
        "nats.toml",
        &format!(
            r#"
[topology]
max_spout_pending = 50

[plugins]
nats = "{{nats}}"
testkit = "{{testkit}}"

[spouts.in]
component = "nats::JetStreamSpout"
config = {{ stream = "{input}", consumer = "{consumer}", emit = "payload", batch = 200 }}

[bolts.slow]
component = "testkit::SleepBolt"
inputs = [{{ from = "in", stream = "payload" }}]
config = {{ micros = 2000 }}
"#,
            input = p.input,
            consumer = p.consumer
        ),
    );
    let mut running = SquallCommand::run_until_interrupted(&ws, &topology).spawn();
    running.wait_for_stat("slow", "executed", |n| n >= 500, Duration::from_secs(30));
    // The spout holds up to 50 trees in flight and up to 200 messages in its
    // channel, all ack-pending on the server.
    let (ack_pending, _) = broker.pending(&p.input, &p.consumer);
    assert!(ack_pending > 0, "nothing was in flight before SIGTERM");
    running.terminate();
    let out = running.wait();
    out.assert_code(0);
    // A naked message counts as ack-pending on the server until it is
    // delivered again, which is at once. So pull now, well within the
    // 120 s ack_wait: everything the host held must come back redelivered.
    let (ack_pending, pending) = broker.pending(&p.input, &p.consumer);
    assert!(pending > 0, "the run consumed everything; nothing was left to nak");
    let redelivered = broker.take_redelivered(&p.input, &p.consumer, ack_pending);
    assert_eq!(
        redelivered, ack_pending,
        "of {ack_pending} messages ack-pending after the drain, only {redelivered} came back at once\n{}",
        out.context()
    );
    assert_eq!(
        broker.pending(&p.input, &p.consumer).0,
        0,
        "messages left to ack_wait after a drain"
    );
}

#[test]
fn survivors_deliver_the_messages_of_a_killed_host() {
    if !require_service(NATS) {
        return;
    }
    let mut broker = Broker::connect();
    let p = broker.pipeline(Duration::from_secs(2));
    let n = 30_000;
    broker.publish_ids(&p.in_subject, n);
    let ws = Workspace::new("nats-kill");
    let topology = ws.write_topology(
        "nats.toml",
        &format!(
            r#"
[topology]
message_timeout_secs = 1
max_spout_pending = 500

[plugins]
nats = "{{nats}}"

[spouts.in]
component = "nats::JetStreamSpout"
config = {{ stream = "{input}", consumer = "{consumer}", emit = "payload", batch = 256 }}

[bolts.out]
component = "nats::JetStreamPublish"
tick_tuple_freq_secs = 1
inputs = [{{ from = "in", stream = "payload" }}]
config = {{ subject = "{out}", payload_field = "payload" }}
"#,
            input = p.input,
            consumer = p.consumer,
            out = p.out_subject,
        ),
    );
    let hosts: Vec<Running> = (0..3)
        .map(|_| {
            let mut cmd = SquallCommand::run_until_interrupted(&ws, &topology);
            cmd.limit(Duration::from_secs(300));
            cmd.spawn()
        })
        .collect();
    let deadline = Instant::now() + Duration::from_secs(60);
    while broker.message_count(&p.output) < n / 10 {
        assert!(Instant::now() < deadline, "the hosts made no progress");
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut hosts = hosts.into_iter();
    let victim = hosts.next().expect("three hosts");
    victim.signal(libc::SIGKILL);
    let killed = victim.wait();
    assert_eq!(std::os::unix::process::ExitStatusExt::signal(&killed.status), Some(libc::SIGKILL));
    let missing = wait_for_output(&broker, &p, n, Duration::from_secs(120));
    // What the victim published but had not acked is in the output already;
    // the stream redelivers it once its ack_wait (2 s) runs out, and the
    // survivors publish it again and ack it. Stopping them before that
    // left it ack-pending (CI saw (232, 0)): wait for the consumer to settle.
    let settle = Instant::now() + Duration::from_secs(30);
    while broker.pending(&p.input, &p.consumer) != (0, 0) && Instant::now() < settle {
        std::thread::sleep(Duration::from_millis(200));
    }
    for host in hosts {
        host.terminate();
        let out = host.wait();
        out.assert_code(0);
    }
    assert!(
        missing.is_empty(),
        "{} ids missing after a host was killed, e.g. {:?}",
        missing.len(),
        &missing[..missing.len().min(10)]
    );
    assert_eq!(broker.pending(&p.input, &p.consumer), (0, 0), "the victim's messages were acked");
}

#[test]
fn a_cut_connection_reconnects_without_losing_messages() {
    if !require_service(NATS) {
        return;
    }
    let mut broker = Broker::connect();
    let p = broker.pipeline(Duration::from_secs(5));
    let n = 20_000;
    broker.publish_ids(&p.in_subject, n);
    let proxy = TcpProxy::start(NATS.addr);
    let ws = Workspace::new("nats-cut");
    let topology = chaos_topology(&ws, &p, &proxy.url(), "");
    let mut cmd = SquallCommand::run_until_interrupted(&ws, &topology);
    cmd.limit(Duration::from_secs(300));
    let running = cmd.spawn();
    let deadline = Instant::now() + Duration::from_secs(60);
    while broker.message_count(&p.output) < n / 10 {
        assert!(Instant::now() < deadline, "no progress before the cut");
        std::thread::sleep(Duration::from_millis(50));
    }
    proxy.cut();
    let during = broker.message_count(&p.output);
    std::thread::sleep(Duration::from_secs(3));
    proxy.restore();
    let missing = wait_for_output(&broker, &p, n, Duration::from_secs(120));
    running.terminate();
    let out = running.wait();
    out.assert_code(0);
    assert!(during < n, "everything was through before the cut; the test proved nothing");
    assert!(!out.stderr.contains("panicked"), "{}", out.context());
    assert!(
        missing.is_empty(),
        "{} ids missing after the cut, e.g. {:?}\n{}",
        missing.len(),
        &missing[..missing.len().min(10)],
        out.context()
    );
}

/// A spout config on its own line, so the error's place is known.
fn spout_topology(ws: &Workspace, config: &str) -> PathBuf {
    ws.write_topology(
        "bad.toml",
        &format!(
            r#"[plugins]
nats = "{{nats}}"

[spouts.in]
component = "nats::JetStreamSpout"
config = {{ {config} }}

[bolts.sink]
component = "nats::JetStreamPublish"
inputs = [{{ from = "in" }}]
config = {{ subject = "unused" }}
"#
        ),
    )
}

#[test]
fn bad_configs_are_one_line_errors_at_the_spout_with_exit_78() {
    if !require_service(NATS) {
        return;
    }
    let mut broker = Broker::connect();
    let stream = unique_name("BAD");
    broker.create_stream(&stream, &unique_name("bad"));
    let missing_stream = unique_name("NOSUCH");
    let cases = [
        (
            format!(r#"url = "nats://127.0.0.1:notaport", stream = "{stream}", consumer = "c""#),
            "not a NATS server address".to_owned(),
        ),
        (
            format!(r#"stream = "{missing_stream}", consumer = "c""#),
            format!("stream \"{missing_stream}\" does not exist"),
        ),
        (
            format!(r#"stream = "{stream}", consumer = "nope""#),
            format!("consumer \"nope\" does not exist on stream \"{stream}\""),
        ),
    ];
    let ws = Workspace::new("nats-bad");
    for (config, want) in cases {
        let topology = spout_topology(&ws, &config);
        for mode in ["validate", "run"] {
            let out = if mode == "validate" {
                SquallCommand::validate(&ws, &topology).output()
            } else {
                SquallCommand::run(&ws, &topology, "5s").output()
            };
            out.assert_code(78);
            let line = out.single_error_line();
            assert!(
                line.contains("bad.toml:4:9: error: spout \"in\"") && line.contains(&want),
                "{mode} {config}: {line}"
            );
        }
    }
}

#[test]
fn a_spout_key_typo_is_reported_at_the_key_with_a_did_you_mean_and_exit_78() {
    // The declared keys are checked before the constructor runs, so no
    // server is needed: the stream and consumer named here do not exist.
    let ws = Workspace::new("nats-typo");
    let config = r#"stream = "S", consumer = "c", ack_wiat = "5s""#;
    let topology = spout_topology(&ws, config);
    let text = std::fs::read_to_string(&topology).unwrap();
    let (row, col) = loc_of(&text, "ack_wiat");
    let at = format!("{}:{row}:{col}: error: ", topology.display());
    for mode in ["validate", "run"] {
        let out = if mode == "validate" {
            SquallCommand::validate(&ws, &topology).output()
        } else {
            SquallCommand::run(&ws, &topology, "5s").output()
        };
        out.assert_code(78);
        let line = out.single_error_line();
        assert!(line.starts_with(&at), "{mode}: not at {at}\n{}", out.context());
        assert!(
            line.contains("unknown config key \"ack_wiat\" for nats::JetStreamSpout"),
            "{mode}: {line}"
        );
        assert!(line.contains("did you mean \"ack_wait\"?"), "{mode}: {line}");
    }
}

#[test]
fn an_unreachable_server_is_a_clear_error_after_bounded_retries() {
    // No server needed: port 1 on loopback refuses.
    let ws = Workspace::new("nats-unreachable");
    let topology = spout_topology(
        &ws,
        r#"url = "nats://127.0.0.1:1", stream = "S", consumer = "c", connect_attempts = 3, connect_timeout = "500ms""#,
    );
    let started = Instant::now();
    let mut cmd = SquallCommand::run(&ws, &topology, "30s");
    cmd.limit(Duration::from_secs(60));
    let out = cmd.output();
    assert_ne!(out.status.code(), Some(0), "{}", out.context());
    assert!(
        out.stderr.contains("cannot connect to nats://127.0.0.1:1")
            && out.stderr.contains("gave up after 3 attempts"),
        "{}",
        out.context()
    );
    assert!(started.elapsed() < Duration::from_secs(25), "took {:?}", started.elapsed());
}

/// FNV-1a 64 of `word` modulo `n`: the partition `{partition(word, n)}`
/// picks (docs/connectors.md gives the constants).
fn partition_of(word: &str, n: u64) -> u64 {
    let hash = word.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    });
    hash % n
}

/// The `wordcount: <word> <count>` lines a WordCount prints at cleanup.
fn word_counts(stdout: &str) -> std::collections::BTreeMap<String, u64> {
    let mut counts = std::collections::BTreeMap::new();
    for line in stdout.lines() {
        if let Some(rest) = line.strip_prefix("wordcount: ") {
            let (word, count) = rest.rsplit_once(' ').expect("word and count");
            let previous = counts.insert(word.to_owned(), count.parse::<u64>().unwrap());
            assert!(previous.is_none(), "{word} was counted by two tasks of one process");
        }
    }
    counts
}

#[test]
fn keyed_work_across_hosts_counts_each_word_once_on_the_host_of_its_partition() {
    if !require_service(NATS) {
        return;
    }
    // The shipped topologies of docs/scaling.md, as shipped, with names
    // made unique and the input made known through --set: group A splits
    // 500 sentences into 2 partitions; two group B hosts read one each.
    let mut broker = Broker::connect();
    let stream = unique_name("SCALE");
    let prefix = unique_name("scale");
    broker.streams.push(stream.clone());
    let sentences = ["the cow jumped over the moon", "an apple a day", "the moon and the cow"];
    let rounds = 100;
    let mut expected = std::collections::BTreeMap::<String, u64>::new();
    for s in sentences {
        for w in s.split_whitespace() {
            *expected.entry(w.to_owned()).or_default() += rounds;
        }
    }
    let total: u64 = expected.values().sum();
    let quoted: Vec<String> = sentences.iter().map(|s| format!("{s:?}")).collect();
    let spout_config = format!(
        "{{ order = \"cycle\", limit = {}, sentences = [{}] }}",
        rounds * sentences.len() as u64,
        quoted.join(", ")
    );
    let ws = Workspace::new("nats-scale");
    let scale = workspace_root().join("topologies/scale");
    let set = |cmd: &mut SquallCommand, key: &str, value: &str| {
        cmd.arg("--set").arg(format!("{key}={value}"));
    };

    let mut group_a = SquallCommand::run_until_interrupted(&ws, &scale.join("words-split.toml"));
    group_a.env("SQUALL_PLUGIN_DIR", release_dir()).limit(Duration::from_secs(240));
    set(&mut group_a, "spouts.sentences.config", &spout_config);
    set(&mut group_a, "bolts.publish.config.subject", &format!("{prefix}.{{partition(word, 2)}}"));
    set(&mut group_a, "bolts.publish.config.create_stream", &stream);
    set(&mut group_a, "bolts.publish.config.stream_subjects", &format!("[\"{prefix}.>\"]"));
    let group_a = group_a.spawn();
    let deadline = Instant::now() + Duration::from_secs(120);
    while broker.message_count_if_any(&stream) < total {
        assert!(Instant::now() < deadline, "group A did not publish {total} words");
        std::thread::sleep(Duration::from_millis(100));
    }

    let hosts: Vec<(String, Running)> = (0..2)
        .map(|k| {
            let consumer = format!("count-{k}");
            let topology = scale.join("words-count.toml");
            let mut validate = SquallCommand::validate(&ws, &topology);
            let mut run = SquallCommand::run_until_interrupted(&ws, &topology);
            for cmd in [&mut validate, &mut run] {
                cmd.env("SQUALL_PLUGIN_DIR", release_dir()).limit(Duration::from_secs(240));
                set(cmd, "spouts.words.config.stream", &stream);
                set(cmd, "spouts.words.config.subject", &format!("{prefix}.{k}"));
                set(cmd, "spouts.words.config.consumer", &consumer);
            }
            validate.output().assert_code(0);
            (consumer, run.spawn())
        })
        .collect();
    // Every word delivered and acked by its host.
    let deadline = Instant::now() + Duration::from_secs(120);
    for (consumer, _) in &hosts {
        loop {
            let pending = broker.pending_if_any(&stream, consumer);
            if pending == Some((0, 0)) {
                break;
            }
            assert!(Instant::now() < deadline, "{consumer} did not finish: {pending:?}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    group_a.terminate();
    group_a.wait().assert_code(0);
    assert_eq!(broker.message_count(&stream), total, "group A published every word once");

    let mut counted = std::collections::BTreeMap::<String, u64>::new();
    for (k, (_, host)) in hosts.into_iter().enumerate() {
        host.terminate();
        let out = host.wait();
        out.assert_code(0);
        let counts = word_counts(&out.stdout);
        assert!(!counts.is_empty(), "host {k} counted nothing\n{}", out.context());
        for (word, count) in counts {
            assert_eq!(partition_of(&word, 2), k as u64, "{word} was counted on host {k}");
            assert!(counted.insert(word.clone(), count).is_none(), "{word} was counted twice");
        }
    }
    assert_eq!(counted, expected, "the per-word counts over both hosts");
}

#[test]
fn inspect_lists_the_declared_keys_of_every_connector_component() {
    let ws = Workspace::new("connector-inspect");
    for (plugin, components) in [
        ("nats", &["JetStreamSpout", "JetStreamPublish"][..]),
        ("redis", &["StreamSpout", "StreamAppend", "EntryField"][..]),
    ] {
        let out = SquallCommand::inspect(&ws, &plugin_path(plugin)).output();
        out.assert_code(0);
        let lines: Vec<&str> = out.stdout.lines().collect();
        for name in components {
            // The key rows under the component, up to the next component.
            let at = lines
                .iter()
                .position(|l| l.split_whitespace().nth(1) == Some(name))
                .unwrap_or_else(|| panic!("no component {name}\n{}", out.context()));
            let section: Vec<&str> =
                lines[at + 1..].iter().take_while(|l| l.starts_with("   ")).copied().collect();
            let keys_at = section
                .iter()
                .position(|l| l.trim() == "config keys:")
                .unwrap_or_else(|| panic!("{name} lists no keys\n{}", out.context()));
            let rows: Vec<Vec<&str>> = section[keys_at + 1..]
                .iter()
                .map(|l| l.split_whitespace().take(3).collect())
                .collect();
            let expect: &[&[&str]] = match *name {
                "JetStreamSpout" => &[
                    &["stream", "string", "required"],
                    &["ack_wait", "duration", "\"30s\""],
                    &["payload_as", "string", "\"bytes\""],
                    &["connect_attempts", "integer", "5"],
                ],
                "JetStreamPublish" => &[
                    &["subject", "string", "required"],
                    &["max_in_flight", "integer", "4096"],
                    &["url", "string", "\"nats://127.0.0.1:4222\""],
                ],
                "StreamSpout" => &[&["group", "string", "required"], &["batch", "integer", "100"]],
                "StreamAppend" => &[&["maxlen", "integer", "-"], &["approx", "bool", "true"]],
                _ => &[&["field", "string", "required"]],
            };
            for row in expect {
                assert!(rows.iter().any(|r| r == row), "{name}: no row {row:?}\n{}", out.context());
            }
        }
    }
}
