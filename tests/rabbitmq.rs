//! The RabbitMQ connector (issue 24, item 6: a fourth broker on the core)
//! against the real server on 127.0.0.1:5672: a round trip with exact
//! counts, the connection cut and restored through a `TcpProxy` (`/readyz`
//! 503 while it is down, nothing lost), and a poison message dead-lettered
//! after the default `max_deliver` while the rest flow.

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use lapin::options::{
    BasicGetOptions, BasicPublishOptions, ConfirmSelectOptions, QueueDeclareOptions,
    QueueDeleteOptions,
};
use lapin::types::{AMQPValue, FieldTable};
use lapin::{BasicProperties, Connection, ConnectionProperties};

use crate::http::request;
use crate::util::*;

const URL: &str = "amqp://guest:guest@127.0.0.1:5672/%2f";

/// A client of the test's own, on a runtime of its own.
struct Amqp {
    rt: tokio::runtime::Runtime,
    _connection: Connection,
    channel: lapin::Channel,
    /// Queues deleted when the test ends.
    queues: std::cell::RefCell<Vec<String>>,
}

impl Amqp {
    fn connect() -> Self {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let (connection, channel) = rt.block_on(async {
            let c =
                Connection::connect(URL, ConnectionProperties::default()).await.expect("connect");
            let ch = c.create_channel().await.expect("channel");
            ch.confirm_select(ConfirmSelectOptions::default()).await.expect("confirms");
            (c, ch)
        });
        Self { rt, _connection: connection, channel, queues: Default::default() }
    }

    /// Declares a durable queue, deleted when the test ends.
    fn queue(&self, name: &str) {
        self.rt
            .block_on(self.channel.queue_declare(
                name.into(),
                QueueDeclareOptions::durable(),
                FieldTable::default(),
            ))
            .expect("declare");
        self.queues.borrow_mut().push(name.to_owned());
    }

    /// Publishes `payloads` to `queue`, each confirmed.
    fn publish(&self, queue: &str, payloads: impl Iterator<Item = String>) {
        self.rt.block_on(async {
            let mut confirms = Vec::new();
            for p in payloads {
                let c = self
                    .channel
                    .basic_publish(
                        "".into(),
                        queue.into(),
                        BasicPublishOptions::default(),
                        p.as_bytes(),
                        BasicProperties::default().with_delivery_mode(2),
                    )
                    .await
                    .expect("publish");
                confirms.push(c);
            }
            for c in confirms {
                assert!(c.await.expect("confirm").is_ack(), "the server confirmed");
            }
        });
    }

    /// Messages ready in `queue` (not counting unacked ones).
    fn ready(&self, queue: &str) -> u32 {
        let options = QueueDeclareOptions { passive: true, ..Default::default() };
        self.rt
            .block_on(self.channel.queue_declare(queue.into(), options, FieldTable::default()))
            .map_or(0, |q| q.message_count())
    }

    /// Takes every message of `queue` (acked): `(payload, headers)`.
    fn take_all(&self, queue: &str) -> Vec<(String, HashMap<String, String>)> {
        self.rt.block_on(async {
            let mut out = Vec::new();
            let options = BasicGetOptions { no_ack: true };
            while let Ok(Some(m)) = self.channel.basic_get(queue.into(), options).await {
                let d = m.delivery;
                let headers = d
                    .properties
                    .headers()
                    .as_ref()
                    .map(|h| {
                        h.inner()
                            .iter()
                            .map(|(k, v)| (k.to_string(), value_text(v)))
                            .collect::<HashMap<_, _>>()
                    })
                    .unwrap_or_default();
                out.push((String::from_utf8_lossy(&d.data).into_owned(), headers));
            }
            out
        })
    }
}

fn value_text(v: &AMQPValue) -> String {
    match v {
        AMQPValue::LongString(s) => String::from_utf8_lossy(s.as_bytes()).into_owned(),
        AMQPValue::ShortString(s) => s.to_string(),
        AMQPValue::LongLongInt(n) => n.to_string(),
        AMQPValue::LongInt(n) => n.to_string(),
        other => format!("{other:?}"),
    }
}

impl Drop for Amqp {
    fn drop(&mut self) {
        for q in self.queues.borrow().iter() {
            let _ = self.rt.block_on(
                self.channel.queue_delete(q.as_str().into(), QueueDeleteOptions::default()),
            );
        }
    }
}

fn ids(messages: &[(String, HashMap<String, String>)]) -> Vec<u64> {
    messages.iter().filter_map(|(p, _)| p.strip_prefix("id-")?.parse().ok()).collect()
}

/// Polls until `done` holds or `within` passes; panics with `what()`.
fn wait_until(within: Duration, mut done: impl FnMut() -> bool, what: impl Fn() -> String) {
    let deadline = Instant::now() + within;
    while !done() {
        assert!(Instant::now() < deadline, "timed out after {within:?}: {}", what());
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// QueueSpout (at `spout_url`) -> ChaosBolt (`chaos`) -> QueuePublish.
fn topology(ws: &Workspace, spout_url: &str, input: &str, output: &str, chaos: &str) -> PathBuf {
    ws.write_topology(
        "rabbitmq.toml",
        &format!(
            r#"
[topology]
message_timeout_secs = 10

[plugins]
rabbitmq = "{{rabbitmq}}"
testkit = "{{testkit}}"

[spouts.in]
component = "rabbitmq::QueueSpout"
config = {{ url = "{spout_url}", queue = "{input}", emit = "payload", prefetch = 500, connect_timeout = "2s" }}

[bolts.chaos]
component = "testkit::ChaosBolt"
inputs = [{{ from = "in" }}]
config = {{ {chaos} }}

[bolts.out]
component = "rabbitmq::QueuePublish"
tick_tuple_freq_secs = 1
inputs = [{{ from = "chaos" }}]
config = {{ url = "{URL}", routing_key = "{output}" }}
"#
        ),
    )
}

fn start(ws: &Workspace, path: &Path) -> (Running, SocketAddr) {
    let mut cmd = SquallCommand::run_until_interrupted(ws, path);
    cmd.args(["--http", "0"]).limit(Duration::from_secs(180));
    let mut child = cmd.spawn();
    let addr = crate::http::bound_addr(&mut child);
    child.wait_for_stderr("running", Duration::from_secs(60));
    (child, addr)
}

fn stop(child: Running) -> Output {
    child.interrupt();
    let out = child.wait();
    assert_eq!(out.status.code(), Some(0), "a graceful stop exits 0\n{}", out.context());
    out
}

/// The value of the first `/metrics` line of `name` (a counter ends in `_total`).
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

#[test]
fn a_round_trip_through_squall_delivers_every_message_exactly_once() {
    if !require_service(RABBITMQ) {
        return;
    }
    let amqp = Amqp::connect();
    let (input, output) = (unique_name("rq_in"), unique_name("rq_out"));
    amqp.queue(&input);
    amqp.queue(&output);
    amqp.queue(&format!("{input}.dead-letters"));
    amqp.publish(&input, (0..2000).map(|i| format!("id-{i}")));
    let ws = Workspace::new("rabbitmq_round_trip");
    let (child, _addr) = start(&ws, &topology(&ws, URL, &input, &output, ""));
    wait_until(
        Duration::from_secs(60),
        || amqp.ready(&output) >= 2000,
        || {
            format!(
                "{} of 2000 arrived\n{}",
                amqp.ready(&output),
                tail(&child.stderr_snapshot(), 20)
            )
        },
    );
    let out = stop(child);
    let got = amqp.take_all(&output);
    let ids = ids(&got);
    let unique: HashSet<u64> = ids.iter().copied().collect();
    assert_eq!(ids.len(), 2000, "no duplicate, none lost\n{}", out.context());
    assert_eq!(unique, (0..2000).collect::<HashSet<_>>());
    assert_eq!(amqp.ready(&input), 0, "every input acked (none requeued at close)");
    assert_eq!(out.stat("in", "acked"), 2000, "\n{}", out.context());
}

#[test]
fn a_cut_connection_is_not_ready_while_down_and_nothing_is_lost() {
    if !require_service(RABBITMQ) {
        return;
    }
    let amqp = Amqp::connect();
    let (input, output) = (unique_name("rq_cut_in"), unique_name("rq_cut_out"));
    amqp.queue(&input);
    amqp.queue(&output);
    amqp.queue(&format!("{input}.dead-letters"));
    let proxy = TcpProxy::start(RABBITMQ.addr);
    let url = format!("amqp://guest:guest@{}/%2f", proxy.addr());
    amqp.publish(&input, (0..500).map(|i| format!("id-{i}")));
    let ws = Workspace::new("rabbitmq_cut");
    let (child, addr) = start(&ws, &topology(&ws, &url, &input, &output, ""));
    wait_until(
        Duration::from_secs(60),
        || amqp.ready(&output) >= 500,
        || tail(&child.stderr_snapshot(), 20),
    );
    assert_eq!(request(addr, "GET", "/readyz").status, 200);

    proxy.cut();
    wait_until(
        Duration::from_secs(20),
        || request(addr, "GET", "/readyz").status == 503,
        || format!("/readyz while the broker is away: {}", request(addr, "GET", "/readyz").body),
    );
    let ready = request(addr, "GET", "/readyz").json();
    assert_eq!(ready["connectors_down"][0]["component"], "in", "{ready}");
    assert_eq!(metric(addr, "squall_user_connector_up"), Some(0.0));
    amqp.publish(&input, (500..1000).map(|i| format!("id-{i}")));
    std::thread::sleep(Duration::from_secs(1));
    proxy.restore();
    wait_until(
        Duration::from_secs(30),
        || request(addr, "GET", "/readyz").status == 200,
        || request(addr, "GET", "/readyz").body,
    );
    let mut seen = HashSet::new();
    wait_until(
        Duration::from_secs(60),
        || {
            seen.extend(ids(&amqp.take_all(&output)));
            seen.len() >= 1000
        },
        || tail(&child.stderr_snapshot(), 20),
    );
    let reconnects = metric(addr, "squall_user_rabbitmq_reconnects").unwrap_or(0.0);
    let out = stop(child);
    assert_eq!(seen, (0..1000).collect::<HashSet<_>>(), "nothing lost");
    assert!(reconnects >= 1.0, "rabbitmq_reconnects counts it: {reconnects}");
    assert!(out.stderr.contains("connection lost"), "the log says so\n{}", out.context());
    assert!(out.stderr.contains("reconnected to RabbitMQ after"), "{}", out.context());
}

#[test]
fn a_poison_message_goes_to_the_dead_letters_after_the_default_max_deliver_and_the_rest_flow() {
    if !require_service(RABBITMQ) {
        return;
    }
    let amqp = Amqp::connect();
    let (input, output) = (unique_name("rq_poison_in"), unique_name("rq_poison_out"));
    let dead = format!("{input}.dead-letters");
    amqp.queue(&input);
    amqp.queue(&output);
    amqp.queue(&dead);
    amqp.publish(&input, (0..20).map(|i| format!("id-{i}")));
    amqp.publish(&input, std::iter::once("POISON".to_owned()));
    amqp.publish(&input, (20..40).map(|i| format!("id-{i}")));
    let ws = Workspace::new("rabbitmq_poison");
    // A short backoff keeps the ten deliveries within seconds.
    let path = ws.write_topology(
        "poison.toml",
        &std::fs::read_to_string(topology(&ws, URL, &input, &output, "fail_matching = \"POISON\""))
            .unwrap()
            .replace(
                "connect_timeout = \"2s\"",
                "connect_timeout = \"2s\", retry_backoff = \"10ms\"",
            ),
    );
    let (child, addr) = start(&ws, &path);
    wait_until(
        Duration::from_secs(60),
        || amqp.ready(&dead) >= 1,
        || format!("no dead letter\n{}", tail(&child.stderr_snapshot(), 20)),
    );
    wait_until(
        Duration::from_secs(30),
        || amqp.ready(&output) >= 40,
        || format!("{} of 40 good ones", amqp.ready(&output)),
    );
    let counted = metric(addr, "squall_user_rabbitmq_dead_lettered");
    stop(child);
    let dead = amqp.take_all(&dead);
    assert_eq!(dead.len(), 1, "{dead:?}");
    assert_eq!(dead[0].0, "POISON");
    assert_eq!(dead[0].1["x-squall-deliveries"], "10", "the default max_deliver: {dead:?}");
    assert!(dead[0].1["x-squall-dead-letter-reason"].contains("max_deliver = 10"), "{dead:?}");
    assert_eq!(counted, Some(1.0), "the dead letter is in /metrics");
    let good: HashSet<u64> = ids(&amqp.take_all(&output)).into_iter().collect();
    assert_eq!(good, (0..40).collect::<HashSet<_>>());
    assert_eq!(amqp.ready(&input), 0);
}
