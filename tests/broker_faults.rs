//! The broker faults every connector must survive (issue 24), each against
//! a real server:
//!
//! - Redis restarted, its stream lost: with `create_group` the group is
//!   created again and new entries flow; without it `/readyz` answers 503,
//!   `last_error` says why and `connector_up` is 0 (never a silent stall).
//! - NATS stopped for 10 s, then started: nothing lost, the log says when
//!   the connection dropped and came back, `nats_reconnects` counts it.
//! - A Kafka broker restarted empty (Tansu keeps nothing): one line names
//!   the missing topic, `/readyz` answers 503 and errors are counted while
//!   the spout waits; the topic created again is read from its start.
//! - Poison input, for each connector, with its default `max_deliver`: the
//!   bad message goes to the dead letters, the rest flow.
//! - The file spout's checkpoint advances while every line fails (each is
//!   dead-lettered, which completes it).
//!
//! The restart tests run a server of their own (`util::OwnServer`: the
//! machine's binaries, the machine's flags, another port), so stopping it
//! disturbs no other test; it is started again within the test and killed
//! when the test ends.

use std::collections::{BTreeMap, HashSet};
use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use ::redis::{Connection, Value as RedisValue};
use async_nats::jetstream::{self, consumer, stream};
use futures_util::StreamExt;

use crate::http::request;
use crate::util::*;

/// Polls until `done` holds or `within` passes; panics with `what()`.
fn wait_until(within: Duration, mut done: impl FnMut() -> bool, what: impl Fn() -> String) {
    let deadline = Instant::now() + within;
    while !done() {
        assert!(Instant::now() < deadline, "timed out after {within:?}: {}", what());
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Starts `topology` with `--http 0`; returns the child and the address.
fn start_with_http(ws: &Workspace, topology: &Path) -> (Running, SocketAddr) {
    let mut cmd = SquallCommand::run_until_interrupted(ws, topology);
    cmd.args(["--http", "0"]).limit(Duration::from_secs(240));
    let mut child = cmd.spawn();
    let addr = crate::http::bound_addr(&mut child);
    child.wait_for_stderr("running", Duration::from_secs(60));
    (child, addr)
}

/// The value of the first `/metrics` line of `name` (any labels; a counter
/// is exported as `<name>_total`), if any.
fn metric(addr: SocketAddr, name: &str) -> Option<f64> {
    let text = request(addr, "GET", "/metrics").body;
    let total = format!("{name}_total");
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .find(|l| {
            [name, total.as_str()]
                .iter()
                .any(|n| l.starts_with(n) && l[n.len()..].starts_with(['{', ' ']))
        })
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
}

fn stop_and_check_exit(child: Running) -> Output {
    child.interrupt();
    let out = child.wait();
    assert_eq!(out.status.code(), Some(0), "a graceful stop exits 0\n{}", out.context());
    out
}

// ---------------------------------------------------------------- Redis

fn redis_connect(url: &str) -> Connection {
    ::redis::Client::open(url).and_then(|c| c.get_connection()).expect("redis answers")
}

fn redis_fill(con: &mut Connection, stream: &str, uids: std::ops::Range<u64>, body: &str) {
    let mut pipe = ::redis::pipe();
    for uid in uids {
        pipe.cmd("XADD").arg(stream).arg("*").arg("uid").arg(uid).arg("body").arg(body).ignore();
    }
    pipe.query::<()>(con).expect("XADD");
}

/// `(uid, body, entry fields)` of every entry of `stream` (empty when it is missing).
fn redis_entries(url: &str, stream: &str) -> Vec<Vec<(String, String)>> {
    let Ok(mut con) = ::redis::Client::open(url).and_then(|c| c.get_connection()) else {
        return Vec::new();
    };
    let page: Vec<(String, Vec<String>)> =
        ::redis::cmd("XRANGE").arg(stream).arg("-").arg("+").query(&mut con).unwrap_or_default();
    page.into_iter()
        .map(|(_, flat)| flat.chunks_exact(2).map(|p| (p[0].clone(), p[1].clone())).collect())
        .collect()
}

fn field<'a>(pairs: &'a [(String, String)], key: &str) -> &'a str {
    pairs.iter().find(|(k, _)| k == key).map_or("", |(_, v)| v.as_str())
}

fn redis_uids(url: &str, stream: &str) -> HashSet<u64> {
    redis_entries(url, stream).iter().filter_map(|p| field(p, "uid").parse().ok()).collect()
}

/// StreamSpout -> PackBolt -> ChaosBolt (`chaos`) -> StreamAppend.
fn redis_topology(
    ws: &Workspace,
    url: &str,
    input: &str,
    spout: &str,
    chaos: &str,
) -> std::path::PathBuf {
    ws.write_topology(
        "redis.toml",
        &format!(
            r#"
[topology]
message_timeout_secs = 10
max_spout_pending = 1000

[plugins]
testkit = "{{testkit}}"
redis = "{{redis}}"

[spouts.source]
component = "redis::StreamSpout"
config = {{ url = "{url}", stream = "{input}", group = "g", batch = 100, block_ms = 100, {spout} }}

[bolts.pack]
component = "testkit::PackBolt"
inputs = [{{ from = "source" }}]

[bolts.middle]
component = "testkit::ChaosBolt"
inputs = [{{ from = "pack" }}]
config = {{ {chaos} }}

[bolts.sink]
component = "redis::StreamAppend"
tick_tuple_freq_secs = 1
inputs = [{{ from = "middle" }}]
config = {{ url = "{url}", stream = "{input}_out", batch = 50 }}
"#
        ),
    )
}

#[test]
fn redis_restarted_losing_its_stream_recreates_the_group_and_new_entries_flow() {
    let Some(mut server) = OwnServer::start(ServerKind::Redis, "redis_restart") else { return };
    let url = server.url();
    let input = "events";
    redis_fill(&mut redis_connect(&url), input, 0..100, "x");
    let ws = Workspace::new("redis_restart_recreate");
    let path = redis_topology(&ws, &url, input, "create_group = true", "");
    let (child, addr) = start_with_http(&ws, &path);
    let out = format!("{input}_out");
    wait_until(
        Duration::from_secs(60),
        || redis_uids(&url, &out).len() >= 100,
        || tail(&child.stderr_snapshot(), 20),
    );

    // Restart: Redis keeps nothing on disk here, so the stream and its group are gone.
    server.stop();
    server.up();
    redis_fill(&mut redis_connect(&url), input, 100..1100, "x");
    wait_until(
        Duration::from_secs(45),
        || {
            let uids = redis_uids(&url, &out);
            (100..1100).all(|u| uids.contains(&u))
        },
        || {
            format!(
                "{} of the 1000 new entries reached the output (a silent stall?)\n{}",
                redis_uids(&url, &out).len(),
                tail(&child.stderr_snapshot(), 20)
            )
        },
    );
    let recreated = metric(addr, "squall_user_redis_groups_recreated").unwrap_or(0.0);
    assert!(recreated >= 1.0, "the recreation is counted: {recreated}");
    let out = stop_and_check_exit(child);
    assert!(out.stderr.contains("created it again"), "the log says so\n{}", out.context());
}

#[test]
fn redis_restarted_without_create_group_is_not_ready_and_says_why() {
    let Some(mut server) = OwnServer::start(ServerKind::Redis, "redis_nogroup") else { return };
    let url = server.url();
    let input = "events";
    let create_group = |con: &mut Connection| {
        ::redis::cmd("XGROUP")
            .arg("CREATE")
            .arg(input)
            .arg("g")
            .arg("0")
            .arg("MKSTREAM")
            .query::<RedisValue>(con)
            .expect("XGROUP CREATE");
    };
    create_group(&mut redis_connect(&url));
    redis_fill(&mut redis_connect(&url), input, 0..10, "x");
    let ws = Workspace::new("redis_restart_nogroup");
    let path = redis_topology(&ws, &url, input, "create_group = false", "");
    let (child, addr) = start_with_http(&ws, &path);
    let out = format!("{input}_out");
    wait_until(
        Duration::from_secs(60),
        || redis_uids(&url, &out).len() >= 10,
        || tail(&child.stderr_snapshot(), 20),
    );
    assert_eq!(request(addr, "GET", "/readyz").status, 200);

    server.stop();
    server.up();
    std::thread::sleep(Duration::from_secs(12));
    eprintln!("DEBUG rss {:?}", child.rss_kib());
    if child.rss_kib().is_none() {
        let out = child.wait();
        panic!("DEAD {:?}\n{}", out.status, log_tail(&out.stderr));
    }
    wait_until(
        Duration::from_secs(30),
        || request(addr, "GET", "/readyz").status == 503,
        || {
            format!(
                "/readyz still says {} without the group: a silent stall\n{}",
                request(addr, "GET", "/readyz").body,
                tail(&child.stderr_snapshot(), 20)
            )
        },
    );
    let ready = request(addr, "GET", "/readyz").json();
    assert_eq!(ready["connectors_down"][0]["component"], "source", "{ready}");
    // First the connection was lost; once it is back, the missing group.
    let last_error = || {
        let topology = request(addr, "GET", "/api/v1/topology").json();
        let source = crate::http::component(&topology, "source");
        source["last_error"]["message"].as_str().unwrap_or_default().to_owned()
    };
    wait_until(
        Duration::from_secs(20),
        || last_error().contains("consumer group \"g\"") && last_error().contains("create_group"),
        || format!("last_error says why: {}", last_error()),
    );
    assert_eq!(request(addr, "GET", "/readyz").status, 503, "still not ready");
    assert_eq!(metric(addr, "squall_user_connector_up"), Some(0.0));

    // The group is back: ready again, and entries flow.
    create_group(&mut redis_connect(&url));
    redis_fill(&mut redis_connect(&url), input, 10..20, "x");
    wait_until(
        Duration::from_secs(30),
        || request(addr, "GET", "/readyz").status == 200,
        || request(addr, "GET", "/readyz").body,
    );
    wait_until(
        Duration::from_secs(30),
        || (10..20).all(|u| redis_uids(&url, &out).contains(&u)),
        || tail(&child.stderr_snapshot(), 20),
    );
    stop_and_check_exit(child);
}

#[test]
fn redis_poison_goes_to_the_dead_letters_after_the_default_max_deliver_and_the_rest_flow() {
    if !require_service(REDIS) {
        return;
    }
    let url = "redis://127.0.0.1:6379";
    let input = unique_name("poison_in");
    let keys = [input.clone(), format!("{input}_out"), format!("{input}:dead")];
    struct Del<'a>(&'a [String]);
    impl Drop for Del<'_> {
        fn drop(&mut self) {
            if let Ok(mut con) =
                ::redis::Client::open("redis://127.0.0.1:6379").and_then(|c| c.get_connection())
            {
                let _: Result<i64, _> = ::redis::cmd("DEL").arg(self.0).query(&mut con);
            }
        }
    }
    let _del = Del(&keys);
    let mut con = redis_connect(url);
    redis_fill(&mut con, &input, 0..20, "good");
    redis_fill(&mut con, &input, 20..21, "POISON");
    redis_fill(&mut con, &input, 21..40, "good");
    let ws = Workspace::new("redis_poison");
    let path =
        redis_topology(&ws, url, &input, "min_idle_ms = 600000", "fail_matching = \"POISON\"");
    let (child, _addr) = start_with_http(&ws, &path);
    wait_until(
        Duration::from_secs(60),
        || !redis_entries(url, &keys[2]).is_empty(),
        || tail(&child.stderr_snapshot(), 20),
    );
    let good: HashSet<u64> = (0..40).filter(|&u| u != 20).collect();
    wait_until(
        Duration::from_secs(30),
        || redis_uids(url, &keys[1]) == good,
        || format!("{:?}", redis_uids(url, &keys[1])),
    );
    stop_and_check_exit(child);
    let dead = redis_entries(url, &keys[2]);
    assert_eq!(dead.len(), 1, "{dead:?}");
    assert_eq!(field(&dead[0], "uid"), "20");
    assert_eq!(field(&dead[0], "deliveries"), "10", "the default max_deliver: {dead:?}");
    assert!(field(&dead[0], "reason").contains("max_deliver = 10"), "{dead:?}");
}

// ---------------------------------------------------------------- NATS

/// A JetStream client of the test's own, on a runtime of its own.
struct Js {
    rt: tokio::runtime::Runtime,
    js: jetstream::Context,
}

impl Js {
    fn connect(url: &str) -> Self {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let client = rt.block_on(async_nats::connect(url)).expect("connect to NATS");
        Self { rt, js: jetstream::new(client) }
    }

    fn stream(&self, name: &str, subject: &str) {
        let config = stream::Config {
            name: name.to_owned(),
            subjects: vec![subject.to_owned()],
            ..Default::default()
        };
        self.rt.block_on(self.js.create_stream(config)).expect("create stream");
    }

    fn consumer(&self, stream: &str, name: &str) {
        let config = consumer::pull::Config {
            durable_name: Some(name.to_owned()),
            ack_policy: consumer::AckPolicy::Explicit,
            ack_wait: Duration::from_secs(30),
            max_deliver: 11,
            ..Default::default()
        };
        self.rt
            .block_on(async {
                self.js
                    .get_stream(stream)
                    .await
                    .expect("stream")
                    .create_consumer(config)
                    .await
                    .map(drop)
            })
            .expect("create consumer");
    }

    /// Publishes `payloads`, retrying while the server is away.
    fn publish(&self, subject: &str, payloads: impl Iterator<Item = String>) {
        self.rt.block_on(async {
            for p in payloads {
                for attempt in 1.. {
                    let sent = match self.js.publish(subject.to_owned(), p.clone().into()).await {
                        Ok(ack) => ack.await.map(drop).map_err(|e| e.to_string()),
                        Err(e) => Err(e.to_string()),
                    };
                    match sent {
                        Ok(()) => break,
                        Err(e) if attempt < 100 => {
                            eprintln!("publish: {e}; again");
                            tokio::time::sleep(Duration::from_millis(200)).await;
                        }
                        Err(e) => panic!("publish to {subject}: {e}"),
                    }
                }
            }
        });
    }

    /// Every message of `stream`: `(payload, headers as text)`.
    fn messages(&self, stream: &str) -> Vec<(String, String)> {
        self.rt.block_on(async {
            let Ok(mut s) = self.js.get_stream(stream).await else { return Vec::new() };
            let Ok(info) = s.info().await else { return Vec::new() };
            let total = info.state.messages;
            let mut out = Vec::new();
            if total == 0 {
                return out;
            }
            let c = s
                .create_consumer(consumer::pull::Config {
                    ack_policy: consumer::AckPolicy::None,
                    ..Default::default()
                })
                .await
                .unwrap();
            let mut messages = c.stream().max_messages_per_batch(5000).messages().await.unwrap();
            while (out.len() as u64) < total {
                let Ok(Some(Ok(m))) =
                    tokio::time::timeout(Duration::from_secs(10), messages.next()).await
                else {
                    break;
                };
                let headers = m
                    .headers
                    .as_ref()
                    .map(|h| {
                        h.iter()
                            .map(|(k, v)| {
                                format!(
                                    "{k}: {}",
                                    v.iter().map(|v| v.as_str()).collect::<Vec<_>>().join(",")
                                )
                            })
                            .collect::<Vec<_>>()
                            .join("\n")
                    })
                    .unwrap_or_default();
                out.push((String::from_utf8_lossy(&m.payload).into_owned(), headers));
            }
            out
        })
    }

    fn delete(&self, stream: &str) {
        let _ = self.rt.block_on(self.js.delete_stream(stream));
    }
}

/// JetStreamSpout -> ChaosBolt (`chaos`) -> JetStreamPublish.
fn nats_topology(
    ws: &Workspace,
    url: &str,
    input: &str,
    consumer: &str,
    out_subject: &str,
    spout: &str,
    chaos: &str,
) -> std::path::PathBuf {
    ws.write_topology(
        "nats.toml",
        &format!(
            r#"
[topology]
message_timeout_secs = 10
max_spout_pending = 1000

[plugins]
nats = "{{nats}}"
testkit = "{{testkit}}"

[spouts.in]
component = "nats::JetStreamSpout"
config = {{ url = "{url}", stream = "{input}", consumer = "{consumer}", emit = "payload", payload_as = "string", {spout} }}

[bolts.chaos]
component = "testkit::ChaosBolt"
inputs = [{{ from = "in", stream = "payload" }}]
config = {{ {chaos} }}

[bolts.out]
component = "nats::JetStreamPublish"
tick_tuple_freq_secs = 1
inputs = [{{ from = "chaos" }}]
config = {{ url = "{url}", subject = "{out_subject}", payload_field = "value" }}
"#
        ),
    )
}

fn ids(messages: &[(String, String)]) -> HashSet<u64> {
    messages.iter().filter_map(|(p, _)| p.strip_prefix("id-")?.parse().ok()).collect()
}

#[test]
fn nats_stopped_for_10_s_loses_nothing_and_the_log_says_when_it_dropped_and_came_back() {
    let Some(mut server) = OwnServer::start(ServerKind::Nats, "nats_outage") else { return };
    let url = server.url();
    let js = Js::connect(&url);
    js.stream("IN", "in");
    js.stream("OUT", "out");
    js.consumer("IN", "squall");
    js.publish("in", (0..1000).map(|i| format!("id-{i}")));
    let ws = Workspace::new("nats_outage");
    let path = nats_topology(&ws, &url, "IN", "squall", "out", "", "");
    let (child, addr) = start_with_http(&ws, &path);
    wait_until(
        Duration::from_secs(60),
        || ids(&js.messages("OUT")).len() >= 1000,
        || tail(&child.stderr_snapshot(), 20),
    );

    server.stop();
    std::thread::sleep(Duration::from_secs(10));
    server.up();
    js.publish("in", (1000..2000).map(|i| format!("id-{i}")));
    wait_until(
        Duration::from_secs(90),
        || ids(&js.messages("OUT")).len() >= 2000,
        || {
            let got = ids(&js.messages("OUT"));
            format!(
                "missing {:?}\n{}",
                (0..2000).filter(|i| !got.contains(i)).take(10).collect::<Vec<_>>(),
                tail(&child.stderr_snapshot(), 20)
            )
        },
    );
    let reconnects = metric(addr, "squall_user_nats_reconnects").unwrap_or(0.0);
    let out = stop_and_check_exit(child);
    assert!(
        out.stderr.contains("connection lost: disconnected from the server"),
        "the log says when the connection dropped\n{}",
        out.context()
    );
    assert!(
        out.stderr.contains("reconnected to the server after"),
        "and when it came back\n{}",
        out.context()
    );
    assert!(reconnects >= 1.0, "nats_reconnects counts it: {reconnects}");
}

#[test]
fn nats_poison_goes_to_the_dead_letters_after_the_default_max_deliver_and_the_rest_flow() {
    if !require_service(NATS) {
        return;
    }
    let url = "nats://127.0.0.1:4222";
    let js = Js::connect(url);
    let (input, output, dead) = (unique_name("PIN"), unique_name("POUT"), unique_name("PDEAD"));
    let (in_subject, out_subject, dead_subject) =
        (unique_name("pin"), unique_name("pout"), unique_name("pdead"));
    struct Cleanup<'a>(&'a Js, [&'a str; 3]);
    impl Drop for Cleanup<'_> {
        fn drop(&mut self) {
            for s in self.1 {
                self.0.delete(s);
            }
        }
    }
    js.stream(&input, &in_subject);
    js.stream(&output, &out_subject);
    js.stream(&dead, &dead_subject);
    let _cleanup = Cleanup(&js, [&input, &output, &dead]);
    let ws = Workspace::new("nats_poison");
    // The spout creates its consumer: from its own default max_deliver.
    let spout = format!("create_consumer = true, dead_letter_subject = \"{dead_subject}\"");
    let path = nats_topology(
        &ws,
        url,
        &input,
        "squall",
        &out_subject,
        &spout,
        "fail_matching = \"POISON\"",
    );
    js.publish(&in_subject, (0..20).map(|i| format!("id-{i}")));
    js.publish(&in_subject, std::iter::once("POISON".to_owned()));
    js.publish(&in_subject, (20..40).map(|i| format!("id-{i}")));
    let (child, _addr) = start_with_http(&ws, &path);
    wait_until(
        Duration::from_secs(60),
        || !js.messages(&dead).is_empty(),
        || tail(&child.stderr_snapshot(), 20),
    );
    wait_until(
        Duration::from_secs(30),
        || ids(&js.messages(&output)).len() == 40,
        || format!("{:?}", ids(&js.messages(&output))),
    );
    stop_and_check_exit(child);
    let dead = js.messages(&dead);
    assert_eq!(dead.len(), 1, "{dead:?}");
    assert_eq!(dead[0].0, "POISON");
    assert!(dead[0].1.contains("Squall-Deliveries: 10"), "{dead:?}");
    assert!(dead[0].1.contains("max_deliver = 10"), "the reason: {dead:?}");
}

// ---------------------------------------------------------------- files

/// LineSpout -> SplitSentence -> ChaosBolt (`chaos`) -> JsonLinesSink.
fn files_topology(ws: &Workspace, input: &Path, chaos: &str) -> std::path::PathBuf {
    ws.write_topology(
        "files.toml",
        &format!(
            r#"
[topology]
message_timeout_secs = 10
max_spout_pending = 500

[plugins]
files = "{{files}}"
examples = "{{examples}}"
testkit = "{{testkit}}"

[spouts.lines]
component = "files::LineSpout"
config = {{ path = "{input}", checkpoint_interval_ms = 100 }}

[bolts.split]
component = "examples::SplitSentence"
inputs = [{{ from = "lines" }}]

[bolts.chaos]
component = "testkit::ChaosBolt"
inputs = [{{ from = "split" }}]
config = {{ {chaos} }}

[bolts.sink]
component = "files::JsonLinesSink"
config = {{ path = "{{dir}}/out.jsonl", fsync = "never" }}
inputs = [{{ from = "chaos" }}]
"#,
            input = input.display()
        ),
    )
}

fn checkpoint_offset(input: &Path) -> u64 {
    let path = format!("{}.squall-checkpoint", input.display());
    std::fs::read_to_string(path)
        .ok()
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
        .and_then(|v| v["offset"].as_u64())
        .unwrap_or(0)
}

fn dead_letters(input: &Path) -> Vec<serde_json::Value> {
    let path = format!("{}.squall-dead-letters", input.display());
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).expect("a dead letter is one JSON object"))
        .collect()
}

#[test]
fn a_poison_line_goes_to_the_dead_letter_file_after_the_default_max_deliver_and_the_rest_flow() {
    let ws = Workspace::new("files_poison");
    let input = ws.path("in.txt");
    let mut text = String::new();
    for i in 0..30 {
        if i == 10 {
            text.push_str("POISON pill\n");
        }
        text.push_str(&format!("good{i} line\n"));
    }
    std::fs::write(&input, &text).unwrap();
    let path = files_topology(&ws, &input, "fail_matching = \"POISON\"");
    let (child, addr) = start_with_http(&ws, &path);
    wait_until(
        Duration::from_secs(60),
        || !dead_letters(&input).is_empty(),
        || format!("no dead letter (retried for ever?)\n{}", tail(&child.stderr_snapshot(), 20)),
    );
    wait_until(
        Duration::from_secs(30),
        || checkpoint_offset(&input) == text.len() as u64,
        || format!("checkpoint at {} of {}", checkpoint_offset(&input), text.len()),
    );
    let counted = metric(addr, "squall_user_lines_dead_lettered");
    stop_and_check_exit(child);
    let dead = dead_letters(&input);
    assert_eq!(dead.len(), 1, "{dead:?}");
    assert_eq!(dead[0]["line"], "POISON pill");
    assert!(dead[0]["reason"].as_str().unwrap().contains("max_deliver = 10"), "{dead:?}");
    assert_eq!(counted, Some(1.0), "the dead letter is in /metrics");
    let out = ws.read("out.jsonl");
    for i in 0..30 {
        assert!(out.contains(&format!("\"good{i}\"")), "good{i} flowed");
    }
}

#[test]
fn the_file_checkpoint_advances_while_every_line_fails() {
    let ws = Workspace::new("files_all_fail");
    let input = ws.path("in.txt");
    let text: String = (0..200).map(|i| format!("line {i}\n")).collect();
    std::fs::write(&input, &text).unwrap();
    let path = files_topology(&ws, &input, "fail_rate = 1.0");
    let (child, _addr) = start_with_http(&ws, &path);
    wait_until(
        Duration::from_secs(90),
        || checkpoint_offset(&input) == text.len() as u64,
        || {
            format!(
                "checkpoint at {} of {} bytes while every line fails\n{}",
                checkpoint_offset(&input),
                text.len(),
                tail(&child.stderr_snapshot(), 10)
            )
        },
    );
    stop_and_check_exit(child);
    assert_eq!(dead_letters(&input).len(), 200, "every line is dead-lettered once");
}

// ---------------------------------------------------------------- shutdown

#[test]
fn a_jetstream_pull_longer_than_two_seconds_still_stops_cleanly_within_its_budget() {
    if !require_service(NATS) {
        return;
    }
    let url = "nats://127.0.0.1:4222";
    let js = Js::connect(url);
    let (input, subject) = (unique_name("SLOW"), unique_name("slow"));
    let (output, out_subject) = (unique_name("SLOWOUT"), unique_name("slowout"));
    js.stream(&input, &subject);
    js.stream(&output, &out_subject);
    struct Cleanup<'a>(&'a Js, [&'a str; 2]);
    impl Drop for Cleanup<'_> {
        fn drop(&mut self) {
            for s in self.1 {
                self.0.delete(s);
            }
        }
    }
    let _cleanup = Cleanup(&js, [&input, &output]);
    js.publish(&subject, (0..10).map(|i| format!("id-{i}")));
    let ws = Workspace::new("nats_slow_stop");
    // An idle consumer: each pull waits its whole fetch_wait for messages,
    // longer than the host's former fixed 2 s grace.
    let spout = "create_consumer = true, fetch_wait = \"5s\"";
    let path = nats_topology(&ws, url, &input, "squall", &out_subject, spout, "");
    let (mut child, _addr) = start_with_http(&ws, &path);
    child.wait_for_stat("chaos", "executed", |n| n >= 10, Duration::from_secs(30));
    let stopped = Instant::now();
    child.terminate();
    let out = child.wait();
    assert_eq!(out.status.code(), Some(0), "SIGTERM exits 0\n{}", out.context());
    assert!(!out.stderr.contains("did not stop within"), "{}", out.context());
    let took = stopped.elapsed();
    assert!(took < Duration::from_secs(31), "within the declared budget: {took:?}");
}

#[test]
fn a_broker_slow_to_reply_at_shutdown_still_stops_cleanly_and_the_pull_in_progress_is_cancelled() {
    if !require_service(NATS) {
        return;
    }
    let js = Js::connect("nats://127.0.0.1:4222");
    let (input, subject) = (unique_name("LAGIN"), unique_name("lagin"));
    js.stream(&input, &subject);
    struct Cleanup<'a>(&'a Js, &'a str);
    impl Drop for Cleanup<'_> {
        fn drop(&mut self) {
            self.0.delete(self.1);
        }
    }
    let _cleanup = Cleanup(&js, &input);
    js.publish(&subject, (0..10).map(|i| format!("id-{i}")));
    let proxy = TcpProxy::start(NATS.addr);
    let ws = Workspace::new("nats_slow_broker_stop");
    let fetch_wait = Duration::from_secs(8);
    let delay = Duration::from_millis(2500);
    let path = ws.write_topology(
        "slow.toml",
        &format!(
            r#"
[plugins]
nats = "{{nats}}"
testkit = "{{testkit}}"

[spouts.in]
component = "nats::JetStreamSpout"
config = {{ url = "{url}", stream = "{input}", consumer = "squall", create_consumer = true, fetch_wait = "{fetch}s", close_timeout = "3s" }}

[bolts.sink]
component = "testkit::NullBolt"
inputs = [{{ from = "in" }}]
"#,
            url = proxy.url(),
            fetch = fetch_wait.as_secs(),
        ),
    );
    let (mut child, _addr) = start_with_http(&ws, &path);
    child.wait_for_stat("sink", "executed", |n| n >= 10, Duration::from_secs(30));

    // The broker turns slow; wait for the next pull request, sent through
    // the slow proxy: its answer (the pull's end, after fetch_wait) comes
    // 2.5 s late, at `natural_end`. Then stop.
    proxy.delay_replies(delay);
    proxy.watch(b"CONSUMER.MSG.NEXT");
    wait_until(
        fetch_wait + delay + Duration::from_secs(5),
        || proxy.seen() >= 1,
        || format!("no pull request\n{}", tail(&child.stderr_snapshot(), 10)),
    );
    let pulled = Instant::now();
    child.terminate();
    let out = child.wait();
    let exited = Instant::now();
    assert_eq!(out.status.code(), Some(0), "SIGTERM exits 0\n{}", out.context());
    assert!(!out.stderr.contains("did not stop within"), "{}", out.context());
    // The declared close budget is 2 × the longest close_timeout, 30 s.
    let took = exited - pulled;
    eprintln!("stopped {took:?} after the pull began; its own end: {:?}", fetch_wait + delay);
    assert!(took < Duration::from_secs(30), "within the declared budget: {took:?}");
    // Cancelled, the pull lets the client flush and the I/O thread end
    // within close_timeout; awaited, it holds them past it, and the
    // thread is left behind with its acks unflushed.
    assert!(
        !out.stderr.contains("did not finish within close_timeout"),
        "the I/O thread ended and flushed within close_timeout\n{}",
        out.context()
    );
    assert!(
        out.stderr.contains("close cancelled the pull in progress"),
        "the log says the pull was cancelled\n{}",
        out.context()
    );
}

/// `id-N` values read back from a Kafka topic.
fn kafka_ids(records: &[crate::kafka::Read]) -> HashSet<u64> {
    records.iter().filter_map(|r| r.value.strip_prefix("id-")?.parse().ok()).collect()
}

/// A Kafka broker that answers nothing for 10 s (frozen: its connections
/// stay open, as with a hung broker or a partitioned network): `/readyz`
/// answers 503 while it is silent and 200 again after, the log says when
/// the connection was lost and when it came back, and every record read
/// before, during and after the outage reaches the output topic.
#[test]
fn kafka_silent_for_10_s_is_not_ready_meanwhile_and_loses_nothing() {
    let Some(server) = OwnServer::start(ServerKind::Kafka, "kafka_outage") else { return };
    let brokers = server.url();
    let kafka = crate::kafka::Kafka::at(&brokers);
    kafka.create_topic("in", 2);
    kafka.create_topic("out", 1);
    kafka.produce("in", 2, &(0..1000).map(|i| format!("id-{i}")).collect::<Vec<_>>());
    let ws = Workspace::new("kafka_outage");
    let path = ws.write_topology(
        "outage.toml",
        &format!(
            r#"
[plugins]
kafka = "{{kafka}}"

[spouts.in]
component = "kafka::KafkaSpout"
config = {{ brokers = "{brokers}", topics = ["in"], group_id = "outage", {tansu} }}

[bolts.out]
component = "kafka::KafkaPublish"
tick_tuple_freq_secs = 1
inputs = [{{ from = "in" }}]
config = {{ brokers = "{brokers}", topic = "out", value_field = "value" }}
"#,
            tansu = crate::kafka::TANSU,
        ),
    );
    let (child, addr) = start_with_http(&ws, &path);
    let read = |n: usize| kafka_ids(&kafka.read_all("out", 1, n, Duration::from_secs(2)));
    wait_until(
        Duration::from_secs(60),
        || read(1000).len() >= 1000,
        || tail(&child.stderr_snapshot(), 20),
    );
    assert_eq!(request(addr, "GET", "/readyz").status, 200);

    let frozen = Instant::now();
    server.freeze();
    wait_until(
        Duration::from_secs(9),
        || request(addr, "GET", "/readyz").status == 503,
        || {
            format!(
                "/readyz still 200 with the broker silent\n{}",
                tail(&child.stderr_snapshot(), 20)
            )
        },
    );
    std::thread::sleep(Duration::from_secs(10).saturating_sub(frozen.elapsed()));
    server.thaw();
    kafka.produce("in", 2, &(1000..2000).map(|i| format!("id-{i}")).collect::<Vec<_>>());
    wait_until(
        Duration::from_secs(90),
        || read(2000).len() >= 2000,
        || {
            let got = read(2000);
            format!(
                "missing {:?}\n{}",
                (0..2000).filter(|i| !got.contains(i)).take(10).collect::<Vec<_>>(),
                tail(&child.stderr_snapshot(), 20)
            )
        },
    );
    wait_until(
        Duration::from_secs(30),
        || request(addr, "GET", "/readyz").status == 200,
        || format!("/readyz not 200 after the outage\n{}", tail(&child.stderr_snapshot(), 20)),
    );
    let out = stop_and_check_exit(child);
    assert!(
        out.stderr.contains("connection lost: broker"),
        "the log says when the broker went silent\n{}",
        out.context()
    );
    assert!(
        out.stderr.contains("answers again") || out.stderr.contains("records flow again"),
        "and when it came back\n{}",
        out.context()
    );
}

/// The last log lines of `stderr`, without the stats tables.
fn log_tail(stderr: &str) -> String {
    let table = |l: &&str| {
        let first = l.split_whitespace().next().unwrap_or_default();
        ["component", "in", "sink"].contains(&first)
    };
    tail(&stderr.lines().filter(|l| !table(l)).collect::<Vec<_>>().join("\n"), 30)
}

/// The spout `name`'s error count and last error in `/api/v1/topology`.
fn spout_errors(addr: SocketAddr, name: &str) -> (u64, String) {
    let topology = request(addr, "GET", "/api/v1/topology").json();
    let c = crate::http::component(&topology, name);
    let errors = c["summary"]["errors"].as_u64().unwrap_or(0);
    (errors, c["last_error"]["message"].as_str().unwrap_or_default().to_owned())
}

/// A Kafka broker restarted empty (Tansu keeps nothing: the topic, the
/// group and its committed offsets are gone) is the fault "the topic is
/// gone": one log line names the missing topic, `/readyz` answers 503,
/// and an error is counted per check (once a second) while the spout waits
/// for it, never a silent stall. Once the topic is created again the group
/// joins again and, its committed offsets gone, reads it from the start
/// (`first_poll = committed-or-earliest`); only what the new topic
/// delivered is committed. SIGTERM stops it within its close budget.
#[test]
fn kafka_restarted_empty_is_a_clear_error_not_a_stall() {
    let Some(mut server) = OwnServer::start(ServerKind::Kafka, "kafka_empty") else { return };
    let brokers = server.url();
    let kafka = crate::kafka::Kafka::at(&brokers);
    let input = "events_in";
    kafka.create_topic(input, 2);
    kafka.produce(input, 2, &(0..200).map(|i| format!("id-{i}")).collect::<Vec<_>>());
    let ws = Workspace::new("kafka_empty");
    let path = ws.write_topology(
        "empty.toml",
        &format!(
            r#"
[plugins]
kafka = "{{kafka}}"
testkit = "{{testkit}}"

[spouts.in]
component = "kafka::KafkaSpout"
config = {{ brokers = "{brokers}", topics = ["{input}"], group_id = "empty", commit_interval = "200ms", {tansu} }}

[bolts.sink]
component = "testkit::NullBolt"
inputs = [{{ from = "in" }}]
"#,
            tansu = crate::kafka::TANSU,
        ),
    );
    let (mut child, addr) = start_with_http(&ws, &path);
    child.wait_for_stat("sink", "executed", |n| n >= 200, Duration::from_secs(60));
    let want = BTreeMap::from([(0, 100), (1, 100)]);
    wait_until(
        Duration::from_secs(30),
        || kafka.committed("empty", input, 2) == want,
        || format!("committed {:?}", kafka.committed("empty", input, 2)),
    );
    assert_eq!(request(addr, "GET", "/readyz").status, 200);

    // Restarted on the same port: an empty cluster. It comes back once
    // the consumer gave its assignment up (no heartbeat for the session
    // timeout, 6 s): librdkafka 2.12.1 fetching a partition Tansu lost
    // can crash (docs/connectors.md, "Kafka").
    server.stop();
    let lost = "the assignment of events_in:0, events_in:1 was lost";
    wait_until(
        Duration::from_secs(30),
        || child.stderr_snapshot().contains(lost),
        || format!("the assignment is kept\n{}", log_tail(&child.stderr_snapshot())),
    );
    server.up();
    wait_until(
        Duration::from_secs(30),
        || request(addr, "GET", "/readyz").status == 503,
        || format!("/readyz still 200 with the topic gone\n{}", log_tail(&child.stderr_snapshot())),
    );
    let named = format!("cannot read: topic(s) \"{input}\" do not exist on {brokers} any more");
    // The plugin's own line (the host's `next_tuple` lines repeat it).
    let said = |stderr: &str| {
        stderr.lines().filter(|l| l.contains(&named) && !l.contains("next_tuple")).count()
    };
    wait_until(
        Duration::from_secs(30),
        || said(&child.stderr_snapshot()) >= 1 && spout_errors(addr, "in").1.contains(&named),
        || {
            format!(
                "no line, or no last_error, names the missing topic: {:?}\n{}",
                spout_errors(addr, "in"),
                log_tail(&child.stderr_snapshot())
            )
        },
    );
    let before = spout_errors(addr, "in").0;
    wait_until(
        Duration::from_secs(20),
        || spout_errors(addr, "in").0 >= before + 3,
        || format!("no error counted per check (a silent stall?): {:?}", spout_errors(addr, "in")),
    );
    assert_eq!(request(addr, "GET", "/readyz").status, 503, "still not ready");
    assert_eq!(metric(addr, "squall_user_connector_up"), Some(0.0));

    // The topic comes back, empty: read from its start (no committed offsets).
    kafka.create_topic(input, 2);
    kafka.produce(input, 2, &(1000..1100).map(|i| format!("id-{i}")).collect::<Vec<_>>());
    child.wait_for_stat("sink", "executed", |n| n >= 300, Duration::from_secs(60));
    wait_until(
        Duration::from_secs(30),
        || request(addr, "GET", "/readyz").status == 200,
        || format!("/readyz not 200 with the topic back\n{}", log_tail(&child.stderr_snapshot())),
    );
    // Only what the new topic delivered is committed: 50 per partition,
    // not an offset of the lost records (100 per partition).
    let want = BTreeMap::from([(0, 50), (1, 50)]);
    wait_until(
        Duration::from_secs(30),
        || kafka.committed("empty", input, 2) == want,
        || format!("committed {:?}", kafka.committed("empty", input, 2)),
    );

    let stopped = Instant::now();
    child.terminate();
    let out = child.wait();
    let took = stopped.elapsed();
    eprintln!("stopped {took:?} after SIGTERM");
    assert_eq!(out.status.code(), Some(0), "SIGTERM exits 0\n{}", out.context());
    assert!(!out.stderr.contains("did not stop within"), "{}", out.context());
    assert!(took < Duration::from_secs(30), "within the close budget: {took:?}");
    assert_eq!(said(&out.stderr), 1, "one line says the topic is gone\n{}", out.context());
    assert_eq!(out.stat("sink", "executed"), 300, "each record once\n{}", out.context());
}
