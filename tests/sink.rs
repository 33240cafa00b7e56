//! The exactly-once PostgreSQL sink (issue 21, item 4) against the real
//! PostgreSQL: a durable word count whose `(word, count)` outputs go into
//! a table through `PostgresSink`, killed with SIGKILL at five points and
//! restarted each time, ends with every expected row in the table exactly
//! once.
//!
//! With exact state (tests/state.rs), `DurableWordCount` emits `(w, 1)`,
//! `(w, 2)`, ... `(w, C)` for each word `w` of true count `C`, also across
//! restarts; a replay emits some of them again, so the table holds each
//! once only if the sink writes each committed row once.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::util::{
    plugin_path, require_service, unique_name, SquallCommand, TcpProxy, Workspace, POSTGRES, REDIS,
};

const SENTENCES: [&str; 3] = ["the cow jumped", "over the moon", "the man went to the store"];
const LIMIT: u64 = 30_000;
const RATE: u64 = 10_000;
const URL: &str = "host=127.0.0.1 port=5432 user=postgres dbname=postgres";

fn true_counts(limit: u64) -> BTreeMap<String, i64> {
    let mut counts = BTreeMap::new();
    for i in 0..limit {
        for w in SENTENCES[(i % 3) as usize].split_whitespace() {
            *counts.entry(w.to_owned()).or_default() += 1;
        }
    }
    counts
}

fn pg() -> postgres::Client {
    postgres::Client::connect(URL, postgres::NoTls).expect("connect to PostgreSQL")
}

/// `[state]` for the backend: `redis` or `postgres`.
fn state_section(backend: &str, namespace: &str) -> String {
    let (library, component, config) = match backend {
        "redis" => ("state_redis", "RedisState", r#"url = "redis://127.0.0.1:6379""#.to_owned()),
        _ => ("state_postgres", "PostgresState", format!("url = {URL:?}")),
    };
    format!(
        r#"state = "{path}"

[state]
backend = "state::{component}"
namespace = "{namespace}"
interval_ms = 200
config = {{ {config} }}
"#,
        path = plugin_path(library).display(),
    )
}

/// Where the sentences come from.
enum Source {
    /// `examples::RandomSentenceSpout`, the `LIMIT` sentences in order.
    Random,
    /// A Kafka topic pre-loaded with the `LIMIT` sentences, read by two
    /// `kafka::KafkaSpout` tasks (2 of its 4 partitions each), positions in
    /// the checkpoint.
    Kafka { topic: String, group_id: String },
}

impl Source {
    /// The `[plugins]` line and the spout's table.
    fn spout(&self) -> (String, String) {
        match self {
            Source::Random => {
                let throttle =
                    format!(r#"throttle = {{ tuples_per_sec = {RATE}, mode = "smooth" }}"#);
                let sentences: Vec<String> = SENTENCES.iter().map(|s| format!("{s:?}")).collect();
                let table = format!(
                    r#"[spouts.sentences]
component = "examples::RandomSentenceSpout"
config = {{ order = "cycle", limit = {LIMIT}, sentences = [{}] }}
{throttle}"#,
                    sentences.join(", ")
                );
                (String::new(), table)
            }
            // The kill test's Kafka source in tests/state.rs: two tasks,
            // two partitions each by assignment, the same throttle.
            Source::Kafka { topic, group_id } => {
                let (plugin, table, ..) = crate::state::Source::Kafka {
                    topic: topic.clone(),
                    group_id: group_id.clone(),
                    group: false,
                }
                .spout();
                (plugin, table)
            }
        }
    }
}

fn topology(
    source: &Source,
    state: &str,
    table: &str,
    count_tasks: u32,
    sink_tasks: u32,
) -> String {
    let (source_plugin, spout) = source.spout();
    format!(
        r#"
[topology]
name = "sink-wc"
message_timeout_secs = 30
max_spout_pending = 2000

[plugins]
examples = "{examples}"
pg = "{pg}"
{source_plugin}
{state}
{spout}

[bolts.split]
component = "examples::SplitSentence"
parallelism = 2
inputs = [{{ from = "sentences", grouping = "shuffle" }}]

[bolts.count]
component = "examples::DurableWordCount"
parallelism = {count_tasks}
inputs = [{{ from = "split", grouping = {{ fields = ["word"] }} }}]

[bolts.store]
component = "pg::PostgresSink"
parallelism = {sink_tasks}
inputs = [{{ from = "count", grouping = "shuffle" }}]
config = {{ table = "{table}", name = "{table}", columns = ["word", "count"], create_table = true, column_types = {{ count = "bigint" }}, url = "{URL}" }}
"#,
        examples = plugin_path("examples").display(),
        pg = plugin_path("postgres").display(),
    )
}

/// Rows, distinct rows, and `(word, count)` pairs that are not expected.
fn table_counts(table: &str) -> (i64, i64, i64) {
    let mut client = pg();
    let row = client
        .query_one(
            &format!(
                "SELECT count(*), count(DISTINCT (word, count)), \
                 count(*) FILTER (WHERE count < 1) FROM \"{table}\""
            ),
            &[],
        )
        .expect("count the rows");
    let mut unexpected: i64 = row.get(2);
    let per_word = client
        .query(&format!("SELECT word, max(count) FROM \"{table}\" GROUP BY word"), &[])
        .expect("the counts per word");
    let truth = true_counts(LIMIT);
    for r in per_word {
        let (word, max): (String, i64) = (r.get(0), r.get(1));
        if truth.get(&word).is_none_or(|&c| max > c) {
            unexpected += 1;
        }
    }
    (row.get(0), row.get(1), unexpected)
}

fn drop_table(table: &str) {
    let mut client = pg();
    let _ = client.batch_execute(&format!("DROP TABLE IF EXISTS \"{table}\""));
    // Each test's sink is named after its table: tests running beside it
    // keep their progress rows (deleting them would make their restored
    // rows look unwritten).
    let _ = client.execute("DELETE FROM squall_sink_progress WHERE sink = $1", &[&table]);
}

/// Five SIGKILLs at seeded random points (the third and later runs with 3
/// `count` and 3 sink tasks), a run to the end, then the table is read.
fn killed_five_times(backend: &str, test: &str) {
    if !require_service(POSTGRES) || (backend == "redis" && !require_service(REDIS)) {
        return;
    }
    killed_five_times_from(&Source::Random, backend, test);
}

/// [`killed_five_times`] with the sentences from `source`.
fn killed_five_times_from(source: &Source, backend: &str, test: &str) {
    let ws = Workspace::new(test);
    let namespace = unique_name("squall_sink");
    let table = unique_name("sink_rows");
    let state = state_section(backend, &namespace);
    let mut rng = 0x51_4E4B_u64 ^ u64::from(std::process::id());
    let mut next = || {
        rng = rng.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z ^= z >> 27;
        z
    };
    let mut skipped_seen = false;
    for kill in 0..5 {
        let tasks = if kill >= 2 { 3 } else { 2 };
        let file = ws.write_topology(
            &format!("run{kill}.toml"),
            &topology(source, &state, &table, tasks, tasks),
        );
        let mut cmd = SquallCommand::run_until_interrupted(&ws, &file);
        cmd.limit(Duration::from_secs(60));
        let mut child = cmd.spawn();
        child.wait_for_stderr("running;", Duration::from_secs(30));
        let after = Duration::from_millis(300 + next() % 600);
        std::thread::sleep(after);
        child.signal(libc::SIGKILL);
        let out = child.wait();
        skipped_seen |= out.stderr.contains("not written again");
        let (rows, distinct, unexpected) = table_counts(&table);
        eprintln!(
            "kill {kill}: SIGKILL {} ms after start ({tasks} tasks): {rows} rows, {distinct} \
             distinct, {unexpected} unexpected",
            after.as_millis()
        );
        assert_eq!(rows, distinct, "a duplicate after kill {kill}\n{}", out.context());
        assert_eq!(unexpected, 0, "\n{}", out.context());
    }
    let file = ws.write_topology("last.toml", &topology(source, &state, &table, 2, 2));
    let out = SquallCommand::run(&ws, &file, "8s").limit(Duration::from_secs(60)).output();
    out.assert_code(0);
    assert!(out.stderr.contains("durable state: restored checkpoint"), "\n{}", out.context());
    let (rows, distinct, unexpected) = table_counts(&table);
    let expected: i64 = true_counts(LIMIT).values().sum();
    eprintln!(
        "end: {rows} rows, {distinct} distinct, {unexpected} unexpected, {expected} expected; \
         a restart skipped rows already written: {skipped_seen}"
    );
    SquallCommand::new(&ws, ["state", "rm", "--yes"]).arg(&file).output().assert_code(0);
    drop_table(&table);
    assert_eq!((rows, distinct, unexpected), (expected, expected, 0), "\n{}", out.context());
}

#[test]
fn the_sink_table_holds_each_row_once_after_five_kills_with_redis_state() {
    killed_five_times("redis", "sink_kill_redis");
}

#[test]
fn the_sink_table_holds_each_row_once_after_five_kills_with_postgres_state() {
    killed_five_times("postgres", "sink_kill_postgres");
}

/// Kafka → squall → PostgreSQL exactly once (issue 40): the sentences come
/// from a Kafka topic, whose positions are in each checkpoint; after five
/// kills every row is in the table once, and the group's committed offsets
/// reach the end of every partition.
#[test]
fn kafka_fed_rows_are_in_the_table_once_after_five_kills() {
    if !require_service(POSTGRES) || !require_service(crate::util::KAFKA) {
        return;
    }
    let kafka = crate::kafka::Kafka::local();
    let topic = unique_name("sink_sentences");
    let group_id = unique_name("sink_group");
    kafka.create_topic(&topic, 4);
    let sentences: Vec<String> =
        (0..LIMIT).map(|i| SENTENCES[(i % 3) as usize].to_owned()).collect();
    let produced = kafka.produce(&topic, 4, &sentences);
    let source = Source::Kafka { topic: topic.clone(), group_id: group_id.clone() };
    killed_five_times_from(&source, "postgres", "sink_kill_kafka");
    assert_eq!(
        kafka.committed(&group_id, &topic, 4),
        produced,
        "the group's committed offsets are the records produced per partition"
    );
}

#[test]
fn without_state_the_sink_fails_its_tuples_and_says_why() {
    if !require_service(POSTGRES) {
        return;
    }
    let ws = Workspace::new("sink_no_state");
    let table = unique_name("sink_nostate");
    let toml = topology(&Source::Random, "", &table, 1, 1)
        .replace("url = \"host", "checkpoint_wait_ms = 300, url = \"host");
    let file = ws.write_topology("nostate.toml", &toml);
    let out = SquallCommand::run(&ws, &file, "3s").limit(Duration::from_secs(60)).output();
    drop_table(&table);
    assert!(out.stderr.contains("the topology needs a [state] table"), "\n{}", out.context());
    assert!(out.stat("store", "failed") > 0, "\n{}", out.context());
}

#[test]
fn a_column_that_is_no_input_field_is_refused_at_its_location() {
    let ws = Workspace::new("sink_validate");
    let toml = topology(&Source::Random, "", "t", 1, 1)
        .replace("columns = [\"word\", \"count\"]", "columns = [\"word\", \"cnt\"]");
    let file = ws.write_topology("bad.toml", &toml);
    let out = SquallCommand::validate(&ws, &file).output();
    out.assert_code(78);
    let line = out.single_error_line();
    assert!(line.contains("bad.toml:") && line.contains("\"cnt\""), "{line}\n{}", out.context());
}

#[test]
fn a_graceful_stop_at_full_load_writes_every_row_it_executed() {
    if !require_service(POSTGRES) {
        return;
    }
    let ws = Workspace::new("sink_graceful");
    let table = unique_name("sink_graceful");
    // The spout unthrottled and unlimited: the last checkpoint, taken
    // after the drain, holds rows of its own.
    let toml = topology(
        &Source::Random,
        "\n[state]\nbackend = \"memory\"\ninterval_ms = 1000\n",
        &table,
        2,
        1,
    )
    .replace(&format!("limit = {LIMIT}, "), "")
    .replace(&format!("throttle = {{ tuples_per_sec = {RATE}, mode = \"smooth\" }}"), "");
    let file = ws.write_topology("graceful.toml", &toml);
    let out = SquallCommand::run(&ws, &file, "3s").limit(Duration::from_secs(60)).output();
    let (rows, distinct, _) = table_counts(&table);
    drop_table(&table);
    out.assert_code(0);
    let executed = out.stat("store", "executed") as i64;
    assert!(executed > 0, "\n{}", out.context());
    assert_eq!((rows, distinct), (executed, executed), "\n{}", out.context());
}

#[test]
fn rows_staged_while_postgres_is_cut_off_are_written_once_it_is_back() {
    if !require_service(POSTGRES) || !require_service(REDIS) {
        return;
    }
    let ws = Workspace::new("sink_cut");
    let namespace = unique_name("squall_sink_cut");
    let table = unique_name("sink_cut");
    let proxy = TcpProxy::start(POSTGRES.addr);
    let via_proxy = format!(
        "url = \"host=127.0.0.1 port={} user=postgres dbname=postgres\", \
         connect_timeout_ms = 1000, timeout_ms = 2000",
        proxy.addr().port()
    );
    let toml = topology(&Source::Random, &state_section("redis", &namespace), &table, 2, 2)
        .replace(&format!("url = \"{URL}\""), &via_proxy);
    let file = ws.write_topology("cut.toml", &toml);
    let mut child = SquallCommand::run(&ws, &file, "10s").limit(Duration::from_secs(60)).spawn();
    child.wait_for_stderr("running;", Duration::from_secs(30));
    std::thread::sleep(Duration::from_millis(800));
    proxy.cut();
    child.wait_for_stderr("rows stay staged", Duration::from_secs(10));
    std::thread::sleep(Duration::from_secs(2));
    proxy.restore();
    let out = child.wait();
    let (rows, distinct, unexpected) = table_counts(&table);
    SquallCommand::new(&ws, ["state", "rm", "--yes"]).arg(&file).output().assert_code(0);
    drop_table(&table);
    out.assert_code(0);
    let expected: i64 = true_counts(LIMIT).values().sum();
    assert_eq!((rows, distinct, unexpected), (expected, expected, 0), "\n{}", out.context());
}
