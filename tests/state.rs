//! Durable state (issue 21) in the embedded store (plugins/state-embedded,
//! no server) and against the real servers: a keyed word count
//! whose counts live in a `[state]` backend, killed with SIGKILL at five
//! points of its run and restarted each time (once with another `count`
//! parallelism), ends with every word's count exactly its true count.
//!
//! The spout is `RandomSentenceSpout` in `cycle` order: sentence `i` is
//! `SENTENCES[i % 3]`, so the true counts of `LIMIT` sentences are known.
//! It keeps a checkpoint position (contract 1.2), so a restart emits again
//! from the last committed checkpoint's barrier; the counts restored are
//! the effects of exactly the sentences before it.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::reload::final_counts;
use crate::util::{
    plugin_path, require_service, unique_name, Service, SquallCommand, TcpProxy, Workspace,
    POSTGRES, REDIS,
};

const SENTENCES: [&str; 3] = ["the cow jumped", "over the moon", "the man went to the store"];

/// Sentences in the whole run (emitted at 10,000 per second, `THROTTLE`:
/// about 4 s).
const LIMIT: u64 = 40_000;

fn true_counts(limit: u64) -> BTreeMap<String, u64> {
    let mut counts = BTreeMap::new();
    for i in 0..limit {
        for w in SENTENCES[(i % 3) as usize].split_whitespace() {
            *counts.entry(w.to_owned()).or_default() += 1;
        }
    }
    counts
}

/// A backend plugin under test: its library, component and config.
struct BackendUnderTest {
    /// The server it needs (`None`: none, it keeps its state in a file).
    service: Option<Service>,
    library: &'static str,
    component: &'static str,
    config: String,
}

fn redis_backend() -> BackendUnderTest {
    BackendUnderTest {
        service: Some(REDIS),
        library: "state_redis",
        component: "RedisState",
        config: r#"url = "redis://127.0.0.1:6379""#.to_owned(),
    }
}

fn postgres_backend() -> BackendUnderTest {
    BackendUnderTest {
        service: Some(POSTGRES),
        library: "state_postgres",
        component: "PostgresState",
        config: r#"url = "host=127.0.0.1 port=5432 user=postgres dbname=postgres""#.to_owned(),
    }
}

/// The embedded backend: a file per namespace in the folder `state` beside
/// the topology file (in the test's workspace).
fn embedded_backend() -> BackendUnderTest {
    BackendUnderTest {
        service: None,
        library: "state_embedded",
        component: "EmbeddedState",
        config: r#"path = "${SQUALL_TOPOLOGY_DIR}/state""#.to_owned(),
    }
}

/// True when `backend`'s server answers, or it needs none.
fn require_backend(backend: &BackendUnderTest) -> bool {
    backend.service.is_none_or(require_service)
}

/// The spouts' throttle: about `LIMIT / RATE` seconds for the whole input.
const THROTTLE: &str = r#"throttle = { tuples_per_sec = 10000, mode = "smooth" }"#;

/// Where the sentences come from: all three emit `SENTENCES[i % 3]` for
/// `i` in `0..LIMIT`, each keeping a checkpoint position.
#[derive(Clone)]
pub(crate) enum Source {
    /// `RandomSentenceSpout` in `cycle` order.
    Random,
    /// A JetStream stream holding the sentences, read by `nats::JetStreamSpout`
    /// through a durable consumer it creates.
    JetStream { stream: String, consumer: String },
    /// A file of the sentences, read by `files::LineSpout`.
    File(std::path::PathBuf),
    /// A Redis stream of entries `sentence = …`, read by `redis::StreamSpout`
    /// (group `durable_wc`, consumer `c`) and taken out by `redis::EntryField`.
    RedisStream(String),
    /// A Kafka topic of 4 partitions holding the sentences, read by two
    /// `kafka::KafkaSpout` tasks: by a group subscription (`group = true`:
    /// the tasks join one by one, so partitions move between them at every
    /// start), or by explicit assignment (2 partitions each).
    Kafka { topic: String, group_id: String, group: bool },
}

impl Source {
    /// The `[plugins]` line, the spout's table (and any bolt between it and
    /// the split bolt), and the split bolt's input: component and stream.
    pub(crate) fn spout(&self) -> (String, String, &'static str, &'static str) {
        match self {
            Source::Random => {
                let sentences: Vec<String> = SENTENCES.iter().map(|s| format!("{s:?}")).collect();
                let table = format!(
                    r#"[spouts.sentences]
component = "examples::RandomSentenceSpout"
config = {{ order = "cycle", limit = {LIMIT}, sentences = [{}] }}
{THROTTLE}"#,
                    sentences.join(", ")
                );
                (String::new(), table, "sentences", "default")
            }
            Source::JetStream { stream, consumer } => {
                let plugin = format!("nats = \"{}\"", plugin_path("nats").display());
                let table = format!(
                    r#"[spouts.sentences]
component = "nats::JetStreamSpout"
config = {{ url = "nats://{url}", stream = "{stream}", consumer = "{consumer}", create_consumer = true, ack_wait = "2s", max_ack_pending = 20000, emit = "payload", payload_as = "string", fetch_wait = "100ms" }}
{THROTTLE}"#,
                    url = crate::util::NATS.addr,
                );
                (plugin, table, "sentences", "payload")
            }
            Source::File(path) => {
                let plugin = format!("files = \"{}\"", plugin_path("files").display());
                let table = format!(
                    r#"[spouts.sentences]
component = "files::LineSpout"
config = {{ path = "{}" }}
{THROTTLE}"#,
                    path.display()
                );
                (plugin, table, "sentences", "default")
            }
            Source::RedisStream(stream) => {
                let plugin = format!("redis = \"{}\"", plugin_path("redis").display());
                let table = format!(
                    r#"[spouts.sentences]
component = "redis::StreamSpout"
config = {{ url = "redis://{addr}", stream = "{stream}", group = "durable_wc", consumer = "c", batch = 500 }}
{THROTTLE}

[bolts.sentence]
component = "redis::EntryField"
config = {{ field = "sentence" }}
inputs = [{{ from = "sentences" }}]"#,
                    addr = REDIS.addr,
                );
                (plugin, table, "sentence", "default")
            }
            Source::Kafka { topic, group_id, group } => {
                let plugin = format!("kafka = \"{}\"", plugin_path("kafka").display());
                let read = if *group {
                    format!("topics = [\"{topic}\"]")
                } else {
                    format!("assign = [\"{topic}\"]")
                };
                let table = format!(
                    r#"[spouts.sentences]
component = "kafka::KafkaSpout"
parallelism = 2
config = {{ {read}, group_id = "{group_id}", {tansu} }}
{THROTTLE}"#,
                    tansu = crate::kafka::TANSU,
                );
                (plugin, table, "sentences", "default")
            }
        }
    }
}

fn topology(backend: &BackendUnderTest, namespace: &str, count_tasks: u32) -> String {
    topology_from(&Source::Random, backend, namespace, count_tasks)
}

fn topology_from(
    source: &Source,
    backend: &BackendUnderTest,
    namespace: &str,
    count_tasks: u32,
) -> String {
    let (plugin, spout, from, stream) = source.spout();
    format!(
        r#"
[topology]
name = "durable-wc"
message_timeout_secs = 30
max_spout_pending = 2000

[plugins]
examples = "{examples}"
state = "{state}"
{plugin}

[state]
backend = "state::{component}"
namespace = "{namespace}"
interval_ms = 200
config = {{ {config} }}

{spout}

[bolts.split]
component = "examples::SplitSentence"
parallelism = 2
inputs = [{{ from = "{from}", stream = "{stream}", grouping = "shuffle" }}]

[bolts.count]
component = "examples::DurableWordCount"
parallelism = {count_tasks}
inputs = [{{ from = "split", grouping = {{ fields = ["word"] }} }}]
"#,
        examples = plugin_path("examples").display(),
        state = plugin_path(backend.library).display(),
        component = backend.component,
        config = backend.config,
    )
}

/// Runs the kill test on `backend`: five SIGKILLs at seeded random points,
/// a restart after each (the third with 3 `count` tasks instead of 2), then
/// a run to the end; the counts printed at its graceful stop are compared
/// with the true counts.
fn killed_five_times(backend: BackendUnderTest, test: &str) {
    killed_five_times_from(&Source::Random, backend, test);
}

/// The kill test with the sentences from `source`.
fn killed_five_times_from(source: &Source, backend: BackendUnderTest, test: &str) {
    let make = |b: &BackendUnderTest, ns: &str, tasks: u32| topology_from(source, b, ns, tasks);
    killed_five_times_with(&make, &true_counts(LIMIT), backend, test);
}

/// The kill test of the topology `make` writes (with a namespace and a
/// `count` parallelism), whose final counts must be `expected`.
fn killed_five_times_with(
    make: &dyn Fn(&BackendUnderTest, &str, u32) -> String,
    expected: &BTreeMap<String, u64>,
    backend: BackendUnderTest,
    test: &str,
) {
    if !require_backend(&backend) {
        return;
    }
    let ws = Workspace::new(test);
    let namespace = unique_name("squall_kill");
    let mut rng = 0x5EED_u64 ^ u64::from(std::process::id());
    let mut next = || {
        rng = rng.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z ^= z >> 27;
        z
    };
    for kill in 0..5 {
        let tasks = if kill >= 2 { 3 } else { 2 };
        let file =
            ws.write_topology(&format!("run{kill}.toml"), &make(&backend, &namespace, tasks));
        let mut cmd = SquallCommand::run_until_interrupted(&ws, &file);
        cmd.limit(Duration::from_secs(60));
        let mut child = cmd.spawn();
        child.wait_for_stderr("running;", Duration::from_secs(30));
        let after = Duration::from_millis(300 + next() % 500);
        eprintln!(
            "kill {kill}: SIGKILL {} ms after start ({tasks} count tasks)",
            after.as_millis()
        );
        std::thread::sleep(after);
        child.signal(libc::SIGKILL);
        let out = child.wait();
        assert!(out.stdout.lines().all(|l| !l.starts_with("wordcount:")), "killed before cleanup");
    }
    // The last run, with 2 tasks again: emits what is left, drains, prints.
    let (counts, context) = last_run(&ws, &make(&backend, &namespace, 2), "12s");
    assert_eq!(&counts, expected, "\n{context}");
}

/// The run after the kills: `topology` for `duration`, which must exit 0
/// having restored a checkpoint; returns the counts it printed (and its
/// output, for messages), after removing the state it used.
fn last_run(ws: &Workspace, topology: &str, duration: &str) -> (BTreeMap<String, u64>, String) {
    let file = ws.write_topology("last.toml", topology);
    let out = SquallCommand::run(ws, &file, duration).limit(Duration::from_secs(60)).output();
    out.assert_code(0);
    assert!(out.stderr.contains("durable state: restored checkpoint"), "\n{}", out.context());
    let counts = final_counts(&out.stdout);
    SquallCommand::new(ws, ["state", "rm", "--yes"]).arg(&file).output().assert_code(0);
    (counts, out.context())
}

#[test]
fn word_counts_in_redis_are_exact_after_five_kills_and_a_rescale() {
    killed_five_times(redis_backend(), "state_kill_redis");
}

#[test]
fn word_counts_in_postgres_are_exact_after_five_kills_and_a_rescale() {
    killed_five_times(postgres_backend(), "state_kill_postgres");
}

/// Seen failing with the commits not made durable (redb's
/// `Durability::None`): after the kills nothing was restored ("durable
/// state: restored checkpoint" missing from the last run). A commit split
/// into one transaction per scope was not caught in one run (the window
/// between them is a few ms of each 200 ms interval); the plugin's unit
/// test `a_commit_failing_midway_leaves_the_previous_checkpoint_intact`
/// covers atomicity.
#[test]
fn word_counts_in_the_embedded_store_are_exact_after_five_kills_and_a_rescale() {
    killed_five_times(embedded_backend(), "state_kill_embedded");
}

/// Two squall processes on one embedded store: the second is refused at
/// once, in one line, with exit code 69, and the first runs on, commits,
/// and stops normally.
///
/// Seen failing without the backend's mapping of redb's lock refusal: exit
/// 69 and one line, but "cannot open as a redb store: Database already
/// open. Cannot acquire lock.", which the test refuses (it must say the
/// store is in use by another process). The lock itself is redb's and
/// cannot be turned off to see a second writer.
#[test]
fn a_second_squall_on_the_same_embedded_store_is_refused_in_one_line() {
    let ws = Workspace::new("state_embedded_lock");
    let backend = embedded_backend();
    let file = ws.write_topology("wc.toml", &topology(&backend, "locked", 2));
    let mut cmd = SquallCommand::run_until_interrupted(&ws, &file);
    cmd.limit(Duration::from_secs(60));
    let mut first = cmd.spawn();
    first.wait_for_stderr("running;", Duration::from_secs(30));
    let started = std::time::Instant::now();
    let second = SquallCommand::run(&ws, &file, "5s").limit(Duration::from_secs(30)).output();
    let took = started.elapsed();
    second.assert_code(69);
    assert!(took < Duration::from_secs(5), "refused at once, not after {took:?}");
    let lines: Vec<&str> = second.stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "one line\n{}", second.context());
    let store = ws.dir().join("state").join("locked.redb");
    assert!(
        lines[0].contains("in use by another process")
            && lines[0].contains(&store.canonicalize().unwrap().display().to_string()),
        "names the store and why\n{}",
        second.context()
    );
    // The first one was not disturbed: it drains, commits and stops.
    first.signal(libc::SIGTERM);
    let out = first.wait();
    out.assert_code(0);
    assert!(!final_counts(&out.stdout).is_empty(), "\n{}", out.context());
    let ls = SquallCommand::new(&ws, ["state", "ls"]).arg(&file).output();
    ls.assert_code(0);
    assert!(ls.stdout.contains("count/counts\t"), "\n{}", ls.context());
}

/// A JetStream stream with the `LIMIT` sentences, in order.
fn sentence_stream(broker: &mut crate::nats::Broker) -> Source {
    let stream = unique_name("SENTENCES");
    let subject = unique_name("sentences");
    broker.create_stream(&stream, &subject);
    broker.publish_each(&subject, LIMIT, |i| SENTENCES[(i % 3) as usize].to_owned());
    Source::JetStream { stream, consumer: unique_name("durable_wc") }
}

#[test]
fn jetstream_fed_counts_in_redis_are_exact_after_five_kills_and_a_rescale() {
    if !require_service(crate::util::NATS) {
        return;
    }
    let mut broker = crate::nats::Broker::connect();
    let source = sentence_stream(&mut broker);
    killed_five_times_from(&source, redis_backend(), "state_kill_jetstream_redis");
    let Source::JetStream { stream, consumer } = &source else { unreachable!() };
    assert_eq!(broker.pending(stream, consumer), (0, 0), "every message acked to the server");
}

#[test]
fn jetstream_fed_counts_in_postgres_are_exact_after_five_kills_and_a_rescale() {
    if !require_service(crate::util::NATS) {
        return;
    }
    let mut broker = crate::nats::Broker::connect();
    let source = sentence_stream(&mut broker);
    killed_five_times_from(&source, postgres_backend(), "state_kill_jetstream_postgres");
    let Source::JetStream { stream, consumer } = &source else { unreachable!() };
    assert_eq!(broker.pending(stream, consumer), (0, 0), "every message acked to the server");
}

#[test]
fn redis_stream_fed_counts_in_postgres_are_exact_after_five_kills_and_a_rescale() {
    if !require_service(REDIS) {
        return;
    }
    let stream = unique_name("squall_sentences");
    let mut con = redis::Client::open(format!("redis://{}", REDIS.addr))
        .and_then(|c| c.get_connection())
        .expect("redis answers");
    for chunk in (0..LIMIT).collect::<Vec<_>>().chunks(1000) {
        let mut pipe = redis::pipe();
        for i in chunk {
            pipe.cmd("XADD").arg(&stream).arg("*").arg("sentence").arg(SENTENCES[(i % 3) as usize]);
            pipe.ignore();
        }
        pipe.query::<()>(&mut con).expect("XADD");
    }
    let source = Source::RedisStream(stream.clone());
    killed_five_times_from(&source, postgres_backend(), "state_kill_redis_stream");
    let pending: (u64, redis::Value, redis::Value, redis::Value) =
        redis::cmd("XPENDING").arg(&stream).arg("durable_wc").query(&mut con).unwrap();
    let _: i64 = redis::cmd("DEL").arg(&stream).query(&mut con).unwrap();
    assert_eq!(pending.0, 0, "every entry XACKed");
}

/// The kill test on sentences from a Kafka topic (4 partitions, record `i`
/// to partition `i % 4`), counted into Redis; at the end each partition's
/// committed offset in the group is the number of records produced to it.
fn kafka_fed_counts_after_five_kills(group: bool, test: &str) {
    if !require_service(crate::util::KAFKA) {
        return;
    }
    let kafka = crate::kafka::Kafka::local();
    let topic = unique_name("kill_sentences");
    let group_id = unique_name("kill_group");
    kafka.create_topic(&topic, 4);
    let sentences: Vec<String> =
        (0..LIMIT).map(|i| SENTENCES[(i % 3) as usize].to_owned()).collect();
    let produced = kafka.produce(&topic, 4, &sentences);
    let source = Source::Kafka { topic: topic.clone(), group_id: group_id.clone(), group };
    killed_five_times_from(&source, redis_backend(), test);
    assert_eq!(
        kafka.committed(&group_id, &topic, 4),
        produced,
        "the group's committed offsets are the records produced per partition"
    );
}

#[test]
fn kafka_fed_counts_in_redis_are_exact_after_five_kills_and_a_rescale() {
    kafka_fed_counts_after_five_kills(false, "state_kill_kafka_assign");
}

/// A file of the `LIMIT` sentences, in order, in a workspace of its own.
fn sentence_file(test: &str) -> (Workspace, Source) {
    let ws = Workspace::new(test);
    let path = ws.dir().join("sentences.txt");
    let mut text = String::new();
    for i in 0..LIMIT {
        text.push_str(SENTENCES[(i % 3) as usize]);
        text.push('\n');
    }
    std::fs::write(&path, text).unwrap();
    (ws, Source::File(path))
}

#[test]
fn file_fed_counts_in_redis_are_exact_after_five_kills_and_a_rescale() {
    let (_input, source) = sentence_file("state_kill_file_input");
    killed_five_times_from(&source, redis_backend(), "state_kill_file_redis");
}

#[test]
fn file_fed_counts_in_postgres_are_exact_after_five_kills_and_a_rescale() {
    let (_input, source) = sentence_file("state_kill_file_input_pg");
    killed_five_times_from(&source, postgres_backend(), "state_kill_file_postgres");
}

/// Sentences `s0` … `s999` in cycle order through a tumbling count window of
/// 10 (one task), whose digests (`s<first>..s<last>#10`) are counted
/// durably: window `k` holds sentences `10k … 10k+9`.
fn window_topology(backend: &BackendUnderTest, namespace: &str, count_tasks: u32) -> String {
    let sentences: Vec<String> = (0..1000).map(|i| format!("\"s{i}\"")).collect();
    format!(
        r#"
[topology]
name = "durable-windows"
message_timeout_secs = 30
max_spout_pending = 2000

[plugins]
examples = "{examples}"
testkit = "{testkit}"
state = "{state}"

[state]
backend = "state::{component}"
namespace = "{namespace}"
interval_ms = 200
config = {{ {config} }}

[spouts.sentences]
component = "examples::RandomSentenceSpout"
config = {{ order = "cycle", limit = {LIMIT}, sentences = [{sentences}] }}
{THROTTLE}

[bolts.windows]
component = "testkit::WindowDigest"
window = {{ length_count = 10 }}
inputs = [{{ from = "sentences", grouping = "global" }}]

[bolts.count]
component = "examples::DurableWordCount"
parallelism = {count_tasks}
inputs = [{{ from = "windows", grouping = {{ fields = ["word"] }} }}]
"#,
        examples = plugin_path("examples").display(),
        testkit = plugin_path("testkit").display(),
        state = plugin_path(backend.library).display(),
        component = backend.component,
        config = backend.config,
        sentences = sentences.join(", "),
    )
}

#[test]
fn tumbling_window_results_are_exact_after_five_kills() {
    let mut expected = BTreeMap::new();
    for k in 0..LIMIT / 10 {
        let first = (10 * k) % 1000;
        *expected.entry(format!("s{first}..s{}#10", first + 9)).or_default() += 1;
    }
    killed_five_times_with(&window_topology, &expected, redis_backend(), "state_kill_window");
}

#[test]
fn squall_state_lists_and_shows_the_committed_counts_and_rm_deletes_them() {
    let backend = redis_backend();
    if !require_backend(&backend) {
        return;
    }
    let ws = Workspace::new("state_cli");
    let namespace = unique_name("squall_cli");
    let file = ws.write_topology("wc.toml", &topology(&backend, &namespace, 2));
    let out = SquallCommand::run(&ws, &file, "7s").limit(Duration::from_secs(60)).output();
    out.assert_code(0);
    let ls = SquallCommand::new(&ws, ["state", "ls"]).arg(&file).output();
    ls.assert_code(0);
    assert!(ls.stdout.contains("last committed checkpoint: "), "\n{}", ls.context());
    assert!(ls.stdout.contains("count/counts\t"), "\n{}", ls.context());
    assert!(ls.stdout.contains("sentences/$position\t1 records"), "\n{}", ls.context());
    let show = SquallCommand::new(&ws, ["state", "show"]).arg(&file).arg("count/counts").output();
    show.assert_code(0);
    let the = true_counts(LIMIT)["the"];
    assert!(show.stdout.contains(&format!("\"the\" = {the}")), "\n{}", show.context());
    // rm asks first; no answer (stdin is empty) keeps everything.
    let kept = SquallCommand::new(&ws, ["state", "rm"]).arg(&file).output();
    assert_ne!(kept.status.code(), Some(0), "\n{}", kept.context());
    assert!(kept.stderr.contains("nothing deleted"), "\n{}", kept.context());
    let still = SquallCommand::new(&ws, ["state", "ls"]).arg(&file).output();
    assert!(still.stdout.contains("count/counts\t"), "\n{}", still.context());
    let rm = SquallCommand::new(&ws, ["state", "rm", "--yes"]).arg(&file).output();
    rm.assert_code(0);
    let after = SquallCommand::new(&ws, ["state", "ls"]).arg(&file).output();
    assert!(after.stdout.contains("no checkpoint committed"), "\n{}", after.context());
}

/// A checkpoint's PostgreSQL transaction interrupted by SIGKILL: the
/// backend is slowed (every reply held 1 s) so that the kill lands after the
/// commit sent all its writes, the new checkpoint number last, and before
/// its `COMMIT`. The restart must start from the checkpoint before it, and
/// the counts end exact.
#[test]
fn a_commit_interrupted_by_a_kill_is_never_visible() {
    if !require_service(POSTGRES) {
        return;
    }
    let ws = Workspace::new("state_torn_commit");
    let namespace = unique_name("squall_torn");
    let (pg_host, pg_port) = POSTGRES.addr.split_once(':').expect("host:port");
    let proxy = TcpProxy::start(POSTGRES.addr);
    let mut via_proxy = postgres_backend();
    let port = proxy.addr().port();
    via_proxy.config =
        format!(r#"url = "host=127.0.0.1 port={port} user=postgres dbname=postgres""#);
    let file = ws.write_topology("torn.toml", &topology(&via_proxy, &namespace, 2));
    let mut cmd = SquallCommand::run_until_interrupted(&ws, &file);
    cmd.limit(Duration::from_secs(90));
    let mut child = cmd.spawn();
    child.wait_for_stderr("running;", Duration::from_secs(30));
    std::thread::sleep(Duration::from_millis(800));
    // From now on each round trip of the backend takes a second: once the
    // next commit has sent its new checkpoint number (its last write), its
    // COMMIT is a second away.
    proxy.watch(b"(namespace, checkpoint) VALUES");
    proxy.delay_replies(Duration::from_secs(1));
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while proxy.seen() == 0 {
        assert!(std::time::Instant::now() < deadline, "no commit began within 20 s");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(300));
    child.signal(libc::SIGKILL);
    let killed = child.wait();
    proxy.delay_replies(Duration::ZERO);
    let direct = format!(r#"url = "host={pg_host} port={pg_port} user=postgres dbname=postgres""#);
    let mut backend = postgres_backend();
    backend.config = direct;
    let (counts, context) = last_run(&ws, &topology(&backend, &namespace, 2), "8s");
    assert_eq!(counts, true_counts(LIMIT), "\n{}\n{context}", killed.context());
}

/// A live resize of the durable counter (2 tasks to 3, SIGHUP) while the
/// spout emits, then a SIGKILL after the checkpoints that follow it, then a
/// restart with 2 tasks: every count exact.
#[test]
fn a_live_resize_of_durable_counts_then_a_kill_keeps_every_count_exact() {
    if !require_service(REDIS) {
        return;
    }
    let ws = Workspace::new("state_live_resize");
    let namespace = unique_name("squall_resize");
    let file = ws.write_topology("live.toml", &topology(&redis_backend(), &namespace, 2));
    let mut cmd = SquallCommand::run_until_interrupted(&ws, &file);
    cmd.limit(Duration::from_secs(90));
    let mut child = cmd.spawn();
    child.wait_for_stderr("running;", Duration::from_secs(30));
    std::thread::sleep(Duration::from_millis(800));
    ws.write_topology("live.toml", &topology(&redis_backend(), &namespace, 3));
    child.signal(libc::SIGHUP);
    child.wait_for_stderr("reload #1 (SIGHUP) succeeded", Duration::from_secs(30));
    // Checkpoints of the resized topology commit, then the process dies.
    std::thread::sleep(Duration::from_millis(1200));
    child.signal(libc::SIGKILL);
    let killed = child.wait();
    assert!(
        killed.stderr.contains(r#"resized "count" from 2 to 3 tasks"#),
        "the reload resized the counter\n{}",
        killed.context()
    );
    let (counts, context) = last_run(&ws, &topology(&redis_backend(), &namespace, 2), "8s");
    assert_eq!(counts, true_counts(LIMIT), "\n{}\n{context}", killed.context());
}

#[test]
fn checkpoints_fail_while_the_backend_is_cut_off_then_catch_up_and_counts_stay_exact() {
    if !require_service(REDIS) {
        return;
    }
    let ws = Workspace::new("state_backend_down");
    let namespace = unique_name("squall_down");
    let proxy = TcpProxy::start(REDIS.addr);
    let mut via_proxy = redis_backend();
    via_proxy.config = format!(
        r#"url = "redis://{}", timeout_ms = 1000, connect_timeout_ms = 1000"#,
        proxy.addr()
    );
    let file = ws.write_topology("down.toml", &topology(&via_proxy, &namespace, 2));
    let mut cmd = SquallCommand::run_until_interrupted(&ws, &file);
    cmd.limit(Duration::from_secs(90));
    let mut child = cmd.spawn();
    child.wait_for_stderr("running;", Duration::from_secs(30));
    std::thread::sleep(Duration::from_secs(1));
    // Redis is out of reach for 10 s while the spout emits (4 s in all).
    proxy.cut();
    child.wait_for_stderr("not committed", Duration::from_secs(10));
    std::thread::sleep(Duration::from_secs(10));
    proxy.restore();
    child.wait_for_stderr("the state backend is back", Duration::from_secs(20));
    // Everything was emitted during the cut; a checkpoint after it has
    // committed what failed meanwhile. Killed now, nothing is replayed.
    std::thread::sleep(Duration::from_secs(1));
    child.signal(libc::SIGKILL);
    let killed = child.wait();
    assert!(killed.stderr.contains("retried with the next checkpoint"), "\n{}", killed.context());
    // A restart straight to Redis restores every count.
    let direct = ws.write_topology("direct.toml", &topology(&redis_backend(), &namespace, 2));
    let out = SquallCommand::run(&ws, &direct, "3s").limit(Duration::from_secs(60)).output();
    out.assert_code(0);
    let counts = final_counts(&out.stdout);
    SquallCommand::new(&ws, ["state", "rm", "--yes"]).arg(&direct).output().assert_code(0);
    assert_eq!(counts, true_counts(LIMIT), "\n{}\n{}", killed.context(), out.context());
    // The writes that failed during the cut were committed after it: the
    // restart has nothing left to emit again.
    assert_eq!(out.stat("sentences", "emitted"), 0, "\n{}", out.context());
}

#[test]
fn the_api_and_metrics_show_checkpoints_as_they_commit() {
    let ws = Workspace::new("state_api");
    let toml = std::fs::read_to_string(
        crate::util::workspace_root().join("topologies/wordcount-durable.toml"),
    )
    .expect("the example topology")
    .replace(
        "${SQUALL_PLUGIN_DIR:-../target/release}/libsquall_examples.so",
        &plugin_path("examples").display().to_string(),
    )
    .replace(
        "${SQUALL_PLUGIN_DIR:-../target/release}/libsquall_state_embedded.so",
        &plugin_path("state_embedded").display().to_string(),
    )
    .replace("interval_ms = 1000", "interval_ms = 100");
    let (child, addr) = crate::http::start(&ws, &toml);
    let t = crate::http::poll(addr, "/api/v1/topology", Duration::from_secs(30), |t| {
        t["durable_state"]["last_committed"].as_u64().unwrap_or(0) >= 3
    });
    let d = &t["durable_state"];
    assert_eq!(d["backend"], "state::EmbeddedState", "{d:#}");
    assert_eq!(d["namespace"], "wordcount-durable", "{d:#}");
    assert!(d["committed"].as_u64().unwrap() >= 3, "{d:#}");
    assert_eq!(d["failed"], 0, "{d:#}");
    assert!(d["last_records"].as_u64().unwrap() > 0, "the counts and the position: {d:#}");
    assert!(d["duration_p99_ms"].as_f64().is_some(), "{d:#}");
    let text = crate::http::request(addr, "GET", "/metrics").body;
    let committed = text
        .lines()
        .find_map(|l| l.strip_prefix("squall_checkpoints_total{"))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse::<f64>().ok())
        .unwrap_or_else(|| panic!("no squall_checkpoints_total:\n{text}"));
    assert!(committed >= 3.0, "{text}");
    crate::http::promtool_check(&ws, &text);
    drop(child);
}

/// `squall state` on the `memory` backend (here chosen with `--set` over a
/// topology that names the embedded store) says in one line that it keeps
/// nothing outside the running process, and never opens the store.
#[test]
fn squall_state_on_the_memory_backend_says_it_keeps_nothing_outside_the_process() {
    let ws = Workspace::new("state_cli_memory");
    let file = ws.write_topology("wc.toml", &topology(&embedded_backend(), "cli_memory", 2));
    let memory = "state.backend=memory";
    for args in [vec!["state", "ls"], vec!["state", "show"], vec!["state", "rm", "--yes"]] {
        let mut cmd = SquallCommand::new(&ws, args.clone());
        cmd.arg(&file).args(["--set", memory]);
        if args[1] == "show" {
            cmd.arg("count/counts");
        }
        let out = cmd.output();
        out.assert_code(0);
        let lines: Vec<&str> = out.stdout.lines().collect();
        assert_eq!(lines.len(), 1, "{args:?}\n{}", out.context());
        assert!(lines[0].contains("running squall process only"), "{args:?}\n{}", out.context());
    }
    assert!(!ws.path("state").exists(), "the embedded store was not opened");
}

/// Issue 41: a keyed store fed by a grouping that sends one word to
/// several tasks would keep the last writer's count. `DurableWordCount`
/// declares its keyed store (contract 1.3, `STORES`), so `squall validate`
/// refuses such a grouping at the input's `grouping`, before anything
/// runs; with one task, or a fields grouping, it validates. (A library
/// that does not declare its stores is refused at the first checkpoint
/// instead: `compat::a_plugin_built_against_contract_1_2_...`.) Seen
/// failing with the validate check's call commented out: exit 0.
#[test]
fn a_declared_keyed_store_fed_by_another_grouping_is_refused_at_validate() {
    let ws = Workspace::new("state_keyed_grouping");
    let fields = r#"grouping = { fields = ["word"] }"#;
    let text = topology(&embedded_backend(), "keyed_grouping", 2);
    assert!(text.contains(fields), "{text}");
    for grouping in ["all", "global"] {
        let text = text.replace(fields, &format!("grouping = \"{grouping}\""));
        let file = ws.write_topology(&format!("{grouping}.toml"), &text);
        let out = SquallCommand::validate(&ws, &file).output();
        assert_ne!(out.status.code(), Some(0), "\n{}", out.context());
        let lines: Vec<&str> = out.stderr.lines().filter(|l| l.contains(": error: ")).collect();
        assert_eq!(lines.len(), 1, "\n{}", out.context());
        let (line, col) = crate::util::loc_of(&text, &format!("\"{grouping}\" }}]"));
        let prefix = format!("{}:{line}:{col}: error: ", file.display());
        assert!(lines[0].starts_with(&prefix), "expected {prefix}\n{}", out.context());
        let says = format!(
            "bolt \"count\" (examples::DurableWordCount) keeps keyed store \"counts\", but \
             its input from \"split\" is grouped by {grouping}: with 2 tasks"
        );
        assert!(lines[0].contains(&says), "{says:?}\n{}", out.context());
    }
    let one_task =
        topology(&embedded_backend(), "keyed_grouping", 1).replace(fields, r#"grouping = "all""#);
    let file = ws.write_topology("one_task.toml", &one_task);
    SquallCommand::validate(&ws, &file).output().assert_code(0);
    let file = ws.write_topology("fields.toml", &text);
    SquallCommand::validate(&ws, &file).output().assert_code(0);
}

/// A throttled spout does not hold checkpoints: JetStream at 20 tuples/s
/// (its `batch` of 256 is what one pull brings), with checkpoints every
/// 200 ms, commits about every 200 ms and keeps to its rate. Seen failing
/// before the throttle's wait served the control queue and the spout took
/// one message per call when throttled: 1 checkpoint committed in 6 s, and
/// 256 sentences emitted.
#[test]
fn a_throttled_spout_keeps_checkpointing_and_its_rate() {
    if !require_service(crate::util::NATS) {
        return;
    }
    let mut broker = crate::nats::Broker::connect();
    let source = sentence_stream(&mut broker);
    let ws = Workspace::new("state_throttled");
    let toml = topology_from(&source, &embedded_backend(), "throttled", 2)
        .replace(THROTTLE, r#"throttle = { tuples_per_sec = 20, mode = "smooth" }"#);
    let file = ws.write_topology("throttled.toml", &toml);
    let out = SquallCommand::run(&ws, &file, "6s").output();
    out.assert_code(0);
    let ctx = out.context();
    let d = &out.summary()["durable_state"];
    let committed = d["committed"].as_u64().unwrap_or(0);
    // 6 s at one per 200 ms is 30; the machine is shared, so a third.
    assert!(committed >= 10, "{committed} checkpoints committed: {d:#}\n{ctx}");
    // 6 s at 20/s, plus the smooth mode's burst allowance.
    let emitted = out.stat("sentences", "emitted");
    eprintln!("throttled to 20/s for 6 s: {committed} checkpoints committed, {emitted} emitted");
    assert!(emitted <= 6 * 20 + 25, "{emitted} sentences emitted at 20/s in 6 s\n{ctx}");
    assert!(emitted >= 60, "{emitted} sentences emitted at 20/s in 6 s\n{ctx}");
}
