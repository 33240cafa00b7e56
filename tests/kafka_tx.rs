//! `KafkaPublish` with `delivery = "exactly-once"` against the local broker
//! (Tansu, `bash ../shared/kafka/start-kafka.sh start`): a Kafka
//! transaction per checkpoint.
//!
//! What Tansu shows right, and these tests check directly: a
//! `read_committed` consumer does not see the records of an open
//! transaction; offsets sent with `send_offsets_to_transaction` are
//! committed with the transaction (and not when it is aborted); a second
//! producer's `init_transactions` fences the first. What it does not: it
//! hands the records of *aborted* transactions to `read_committed`
//! consumers too (shared/kafka/README.md). So the kill test tells committed
//! copies from aborted ones by the sink's commit marker, which Tansu keeps
//! right: each record carries its transaction's `<transactional id>:<sequence>`
//! (`sequence_header`), and the marker, the committed offset of group
//! `<transactional id>` on the progress topic, is the last sequence
//! committed. A record of run `r` is in a committed transaction iff its
//! sequence is above the marker read after run `r - 1` and at most the one
//! read after run `r` (the process is dead then, so no commit can follow):
//! that is the `read_committed` view an Apache Kafka broker gives.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Headers;
use rdkafka::{ClientConfig, Message, Offset, TopicPartitionList};

use crate::kafka::{metric, start, stop, Kafka, TANSU};
use crate::util::*;

const BROKERS: &str = "127.0.0.1:9092";
const HEADER: &str = "squall-txn";

/// The marker of each transactional id.
type Markers = BTreeMap<String, u64>;

/// One record of the output topic.
#[derive(Debug, Clone)]
struct Out {
    offset: i64,
    value: String,
    /// `(transactional id, sequence)` from the header.
    txn: Option<(String, u64)>,
}

/// Reads partition 0 of `topic` with `isolation` until `expected` records
/// came and then `quiet` more passed without one, or `within` passed.
fn read(
    topic: &str,
    isolation: &str,
    expected: usize,
    quiet: Duration,
    within: Duration,
) -> Vec<Out> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", BROKERS)
        .set("group.id", unique_name("tx_reader"))
        .set("enable.auto.commit", "false")
        .set("isolation.level", isolation)
        .set("fetch.wait.max.ms", "10")
        .create()
        .expect("consumer");
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(topic, 0, Offset::Beginning).unwrap();
    consumer.assign(&tpl).expect("assign");
    let mut out = Vec::new();
    let deadline = Instant::now() + within;
    let mut last = Instant::now();
    while Instant::now() < deadline {
        if out.len() >= expected && last.elapsed() >= quiet {
            break;
        }
        let Some(m) = consumer.poll(Duration::from_millis(50)) else { continue };
        let m = m.expect("read");
        last = Instant::now();
        let txn = m.headers().and_then(|h| {
            let h = h.iter().find(|h| h.key == HEADER)?;
            let text = String::from_utf8_lossy(h.value?).into_owned();
            let (tid, seq) = text.rsplit_once(':')?;
            Some((tid.to_owned(), seq.parse().ok()?))
        });
        let value = String::from_utf8_lossy(m.payload().unwrap_or_default()).into_owned();
        out.push(Out { offset: m.offset(), value, txn });
    }
    out
}

/// The commit marker of transactional id `tid`: the last sequence committed
/// (0: none).
fn marker(kafka: &Kafka, tid: &str, progress: &str) -> u64 {
    let m = kafka.committed(tid, progress, 1)[&0];
    u64::try_from(m).unwrap_or(0)
}

/// `KafkaSpout` (the input's partitions by assignment, with the fields the
/// input offsets need) -> `KafkaPublish` exactly-once, with `[state]`.
struct Setup {
    input: String,
    output: String,
    prefix: String,
    offsets_group: String,
    /// The input's partitions, one spout task each.
    partitions: i32,
}

impl Setup {
    fn new(name: &str, partitions: i32, values: &[String]) -> (Self, BTreeMap<i32, i64>) {
        let kafka = Kafka::local();
        let s = Setup {
            input: unique_name(&format!("{name}_in")),
            output: unique_name(&format!("{name}_out")),
            prefix: unique_name(&format!("{name}_tx")),
            offsets_group: unique_name(&format!("{name}_offsets")),
            partitions,
        };
        kafka.create_topic(&s.input, partitions);
        kafka.create_topic(&s.output, 1);
        let produced = kafka.produce(&s.input, partitions, values);
        (s, produced)
    }

    /// The topology: `state` is the `[state]` table's body, `throttle` the
    /// spout's rate (0: none), `tasks` the sink's parallelism.
    fn topology(
        &self,
        ws: &Workspace,
        file: &str,
        state: &str,
        throttle: u64,
        tasks: u32,
    ) -> PathBuf {
        self.topology_with(ws, file, state, throttle, tasks, ["", ""])
    }

    /// [`Setup::topology`] with more keys for the spout's and the sink's
    /// config (`", key = value"`).
    fn topology_with(
        &self,
        ws: &Workspace,
        file: &str,
        state: &str,
        throttle: u64,
        tasks: u32,
        [spout_keys, sink_keys]: [&str; 2],
    ) -> PathBuf {
        let throttle = match throttle {
            0 => String::new(),
            n => format!("throttle = {{ tuples_per_sec = {n}, mode = \"smooth\" }}"),
        };
        ws.write_topology(
            file,
            &format!(
                r#"
[topology]
name = "kafka-tx"
message_timeout_secs = 30
max_spout_pending = 2000

[plugins]
kafka = "{{kafka}}"
state = "{state_lib}"

[state]
{state}

[spouts.in]
component = "kafka::KafkaSpout"
parallelism = {spouts}
config = {{ assign = [{assign}], group_id = "{input}_spout", fields = ["value", "topic", "partition", "offset"], {TANSU}{spout_keys} }}
{throttle}

[bolts.out]
component = "kafka::KafkaPublish"
parallelism = {tasks}
tick_tuple_freq_secs = 1
inputs = [{{ from = "in", grouping = {{ fields = ["partition"] }} }}]
config = {{ topic = "{output}", value_field = "value", delivery = "exactly-once", transactional_id_prefix = "{prefix}", offsets_group = "{group}", sequence_header = "{HEADER}"{sink_keys} }}
"#,
                state_lib = plugin_path("state_embedded").display(),
                spouts = self.partitions,
                assign = (0..self.partitions)
                    .map(|p| format!("\"{}:{p}\"", self.input))
                    .collect::<Vec<_>>()
                    .join(", "),
                input = self.input,
                output = self.output,
                prefix = self.prefix,
                group = self.offsets_group,
            ),
        )
    }
}

fn embedded(ws: &Workspace, interval_ms: u64) -> String {
    format!(
        "backend = \"state::EmbeddedState\"\ninterval_ms = {interval_ms}\nconfig = {{ path = \"{}\" }}",
        ws.path("state").display()
    )
}

/// The records are produced while the checkpoint interval runs (a
/// `read_uncommitted` consumer sees them), but a `read_committed` consumer
/// sees none until the checkpoint holding them committed; then it sees
/// each once, and the transaction committed the marker and the input
/// offsets with them.
#[test]
fn records_are_visible_to_read_committed_only_once_their_checkpoint_committed() {
    if !require_service(KAFKA) {
        return;
    }
    let values: Vec<String> = (0..300).map(|i| format!("v{i}")).collect();
    let (s, produced) = Setup::new("txvis", 2, &values);
    let ws = Workspace::new("kafka_tx_visible");
    let path = s.topology(&ws, "tx.toml", &embedded(&ws, 8000), 0, 1);
    let (child, addr) = start(&ws, &path);
    let metrics = || crate::http::request(addr, "GET", "/metrics").body;
    // Within the first interval: every record is in the broker, in the
    // open transaction.
    let uncommitted =
        read(&s.output, "read_uncommitted", values.len(), Duration::ZERO, Duration::from_secs(4));
    // Up to 2 s for a read_committed consumer to see them (it returns as
    // soon as it has all of them; a fetch takes a few ms here).
    let committed_early =
        read(&s.output, "read_committed", values.len(), Duration::ZERO, Duration::from_secs(2));
    let checkpoints = metric(&metrics(), "squall_checkpoint_last_committed");
    let tid = format!("{}-0", s.prefix);
    let kafka = Kafka::local();
    let marker_early = marker(&kafka, &tid, &s.output);
    assert_eq!(
        uncommitted.len(),
        values.len(),
        "produced into the open transaction during the interval\n{}",
        tail(&child.stderr_snapshot(), 30)
    );
    assert_eq!(
        checkpoints,
        Some(0.0),
        "no checkpoint committed yet (interval 8 s): the test looked in time"
    );
    assert_eq!(committed_early.len(), 0, "read_committed sees nothing before the commit");
    assert_eq!(marker_early, 0, "no marker before the commit");
    // After the first checkpoint committed: each record once.
    let committed = read(
        &s.output,
        "read_committed",
        values.len(),
        Duration::from_secs(1),
        Duration::from_secs(20),
    );
    let text = metrics();
    let out = stop(child);
    let mut seen: Vec<String> = committed.iter().map(|r| r.value.clone()).collect();
    seen.sort();
    let mut want = values.clone();
    want.sort();
    assert_eq!(seen, want, "each record once, after the commit\n{}", out.context());
    assert!(committed.iter().all(|r| r.txn == Some((tid.clone(), 1))), "all in transaction 1");
    assert!(metric(&text, "squall_user_kafka_transactions_committed_total") >= Some(1.0), "{text}");
    assert_eq!(marker(&kafka, &tid, &s.output), 1, "the marker committed with the records");
    assert_eq!(
        kafka.committed(&s.offsets_group, &s.input, 2),
        produced,
        "the input offsets committed in the transaction\n{}",
        out.context()
    );
}

/// Runs killed with SIGKILL at random points, then a run to the end: every
/// input record is in exactly one committed transaction, no run produced
/// again a batch an earlier run had committed, and the input offsets
/// committed in the transactions reach the end of the input.
#[test]
fn a_kill_mid_run_and_a_restart_commit_every_record_once() {
    if !require_service(KAFKA) {
        return;
    }
    const N: usize = 12_000;
    let values: Vec<String> = (0..N).map(|i| format!("r{i}")).collect();
    let (s, produced) = Setup::new("txkill", 2, &values);
    let kafka = Kafka::local();
    let ws = Workspace::new("kafka_tx_kill");
    let state = embedded(&ws, 300);
    let tids = [format!("{}-0", s.prefix), format!("{}-1", s.prefix)];
    let markers = |k: &Kafka| -> Markers {
        tids.iter().map(|t| (t.clone(), marker(k, t, &s.output))).collect()
    };
    let mut rng = 0x7478_6B69_6C6C_u64 ^ u64::from(std::process::id());
    let mut next = || {
        rng = rng.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z ^ (z >> 27)
    };
    // Per run: the marker before it, the marker after it, its records.
    let mut runs: Vec<(Markers, Markers, Vec<Out>)> = Vec::new();
    let mut end = 0_i64;
    let mut before = markers(&kafka);
    let mut last_out = None;
    // Whether a restart found a restored batch its marker said was
    // committed (and did not produce it again).
    let mut skipped_seen = false;
    // Whether a task settled the batches of a task that no longer runs.
    let mut settled_seen = false;
    for run in 0..4 {
        // Two sink tasks, then one: the second task's transactional id is
        // then settled by the first (its store goes to task 1 mod 1 = 0).
        let tasks = if run < 2 { 2 } else { 1 };
        let file = s.topology(&ws, &format!("run{run}.toml"), &state, 1000, tasks);
        if run < 3 {
            let mut cmd = SquallCommand::run_until_interrupted(&ws, &file);
            cmd.limit(Duration::from_secs(60));
            let mut child = cmd.spawn();
            child.wait_for_stderr("running;", Duration::from_secs(30));
            let after = Duration::from_millis(700 + next() % 1500);
            std::thread::sleep(after);
            child.signal(libc::SIGKILL);
            let out = child.wait();
            eprintln!("run {run}: SIGKILL {} ms after start", after.as_millis());
            for line in out.stderr.lines().filter(|l| l.contains("staged batch")) {
                eprintln!("  {line}");
            }
            skipped_seen |= out.stderr.contains("not produced again");
            settled_seen |= out.stderr.contains("(a task that no longer runs), fenced now");
            last_out = Some(out);
        } else {
            let out = SquallCommand::run(&ws, &file, "10s").limit(Duration::from_secs(60)).output();
            out.assert_code(0);
            skipped_seen |= out.stderr.contains("not produced again");
            settled_seen |= out.stderr.contains("(a task that no longer runs), fenced now");
            last_out = Some(out);
        }
        // The process is gone: a commit it sent is done within a moment.
        std::thread::sleep(Duration::from_secs(1));
        let after = markers(&kafka);
        let all =
            read(&s.output, "read_uncommitted", 0, Duration::from_secs(1), Duration::from_secs(10));
        let mine: Vec<Out> = all.into_iter().filter(|r| r.offset >= end).collect();
        end = mine.iter().map(|r| r.offset + 1).max().unwrap_or(end);
        eprintln!("run {run}: {} records produced, markers {before:?} -> {after:?}", mine.len());
        runs.push((before.clone(), after.clone(), mine));
        before = after;
    }
    let out = last_out.expect("a last run");
    let mut committed: BTreeMap<String, u32> = BTreeMap::new();
    let mut again = Vec::new();
    let mut aborted = 0;
    for (run, (from, to, records)) in runs.iter().enumerate() {
        for r in records {
            let (tid, seq) = r.txn.clone().unwrap_or_else(|| panic!("no {HEADER} header: {r:?}"));
            if seq <= from[&tid] {
                again.push((run, tid, seq));
            } else if seq <= to[&tid] {
                *committed.entry(r.value.clone()).or_default() += 1;
            } else {
                aborted += 1;
            }
        }
    }
    eprintln!(
        "{} distinct records committed, {aborted} copies in transactions that did not commit",
        committed.len()
    );
    assert!(again.is_empty(), "batches committed by an earlier run produced again: {again:?}");
    assert!(skipped_seen, "a restart skipped a batch its marker said was committed");
    eprintln!("a task settled another id's batches: {settled_seen}");
    let twice: Vec<_> = committed.iter().filter(|(_, n)| **n > 1).take(5).collect();
    assert!(twice.is_empty(), "committed twice: {twice:?}\n{}", out.context());
    let missing: Vec<_> = values.iter().filter(|v| !committed.contains_key(*v)).take(5).collect();
    assert!(missing.is_empty(), "never committed: {missing:?}\n{}", out.context());
    assert_eq!(committed.len(), N);
    // Tansu's read_committed view holds every committed copy (and the
    // aborted ones too, which an Apache Kafka broker would hide).
    let view: BTreeSet<String> =
        read(&s.output, "read_committed", N, Duration::from_secs(1), Duration::from_secs(20))
            .into_iter()
            .map(|r| r.value)
            .collect();
    assert_eq!(view.len(), N, "every record in the read_committed view");
    assert_eq!(
        kafka.committed(&s.offsets_group, &s.input, 2),
        produced,
        "the input offsets committed in the last transactions\n{}",
        out.context()
    );
}

/// A second instance with the same transactional ids fences the first: the
/// first says so in one error line, `/readyz` answers 503 and its inputs
/// fail, while the second commits.
#[test]
fn a_second_instance_with_the_same_transactional_id_fences_the_first() {
    if !require_service(KAFKA) {
        return;
    }
    let values: Vec<String> = (0..40_000).map(|i| format!("f{i}")).collect();
    let (s, _) = Setup::new("txfence", 1, &values);
    let kafka = Kafka::local();
    let tid = format!("{}-0", s.prefix);
    let state = "backend = \"memory\"\ninterval_ms = 300";
    let ws_a = Workspace::new("kafka_tx_fence_a");
    let ws_b = Workspace::new("kafka_tx_fence_b");
    let (mut a, addr_a) = start(&ws_a, &s.topology(&ws_a, "a.toml", state, 1000, 1));
    let deadline = Instant::now() + Duration::from_secs(20);
    while marker(&kafka, &tid, &s.output) == 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(200));
    }
    let first = marker(&kafka, &tid, &s.output);
    assert!(first > 0, "the first instance commits\n{}", tail(&a.stderr_snapshot(), 30));
    assert_eq!(crate::http::request(addr_a, "GET", "/readyz").status, 200);
    let (b, _) = start(&ws_b, &s.topology(&ws_b, "b.toml", state, 1000, 1));
    let fenced = format!("fenced: another producer took transactional.id \"{tid}\"");
    // A commit of the first instance that is under way when the second
    // fences it waits for the broker up to its `delivery_timeout` (30 s)
    // before the fence shows: one local CI run saw its bolt stand still
    // for the 20 s this wait had been.
    a.wait_for_stderr(&fenced, Duration::from_secs(60));
    let readyz = crate::http::request(addr_a, "GET", "/readyz").status;
    let at_fence = marker(&kafka, &tid, &s.output);
    let deadline = Instant::now() + Duration::from_secs(20);
    while marker(&kafka, &tid, &s.output) <= at_fence && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(200));
    }
    let later = marker(&kafka, &tid, &s.output);
    std::thread::sleep(Duration::from_secs(1));
    a.interrupt();
    let out_a = a.wait();
    let out_b = stop(b);
    assert_eq!(readyz, 503, "the fenced instance is not ready\n{}", out_a.context());
    assert!(
        later > at_fence,
        "the second instance commits: {at_fence} -> {later}\n{}",
        out_b.context()
    );
    let lines = out_a.stderr.lines().filter(|l| l.contains(&fenced)).count();
    assert_eq!(lines, 1, "one error line\n{}", out_a.context());
    assert!(
        out_a.stat("out", "failed") > 0,
        "the fenced instance fails its inputs\n{}",
        out_a.context()
    );
    assert!(!out_b.stderr.contains("fenced"), "{}", out_b.context());
}

/// With a small `max_staged_bytes` and a long checkpoint interval the sink
/// refuses the records that would pass the bound: those inputs fail (the
/// metric, the warning), their spout replays them, and once a commit freed
/// the space they are staged. Every record ends up committed once, and the
/// staged bytes sampled stay within the bound.
#[test]
fn inputs_past_max_staged_bytes_fail_and_are_replayed_until_a_commit_frees_space() {
    if !require_service(KAFKA) {
        return;
    }
    // 120 records of 20 KB (2.4 MB) against 1 MiB: about 50 fit in one
    // checkpoint interval of 1.5 s, and all arrive in the first.
    const N: usize = 120;
    const MAX: f64 = 1_048_576.0;
    let pad = "x".repeat(20_000);
    let values: Vec<String> = (0..N).map(|i| format!("s{i:04}-{pad}")).collect();
    let (s, produced) = Setup::new("txfull", 1, &values);
    let ws = Workspace::new("kafka_tx_full");
    let spout = ", max_deliver = 1000, retry_backoff = \"50ms\", retry_backoff_max = \"300ms\"";
    let sink = ", max_staged_bytes = 1048576";
    let path = s.topology_with(&ws, "full.toml", &embedded(&ws, 1500), 0, 1, [spout, sink]);
    let (child, addr) = start(&ws, &path);
    let metrics = || crate::http::request(addr, "GET", "/metrics").body;
    let mut most = 0.0_f64;
    let deadline = Instant::now() + Duration::from_secs(40);
    let mut text = metrics();
    while Instant::now() < deadline {
        text = metrics();
        most = most.max(metric(&text, "squall_user_kafka_staged_bytes").unwrap_or(0.0));
        let records = metric(&text, "squall_user_kafka_transaction_records_total");
        if records >= Some(N as f64) {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = stop(child);
    let full = metric(&text, "squall_user_kafka_staged_full_total").unwrap_or(0.0);
    assert!(full > 0.0, "inputs were refused at the bound\n{text}\n{}", out.context());
    assert!(out.stat("out", "failed") > 0, "and failed\n{}", out.context());
    assert!(
        out.stderr.contains("max_staged_bytes = 1048576: inputs fail until a commit frees space"),
        "the warning names the key\n{}",
        out.context()
    );
    assert!(most > 0.0 && most <= MAX, "staged bytes sampled: at most {most}");
    let tid = format!("{}-0", s.prefix);
    let kafka = Kafka::local();
    let last = marker(&kafka, &tid, &s.output);
    assert!(last >= 2, "more than one transaction: marker {last}");
    let committed =
        read(&s.output, "read_committed", N, Duration::from_secs(1), Duration::from_secs(20));
    let mut seen: Vec<&str> = committed
        .iter()
        .filter(|r| r.txn.as_ref().is_some_and(|(t, q)| *t == tid && *q <= last))
        .map(|r| r.value.split('-').next().unwrap_or_default())
        .collect();
    seen.sort_unstable();
    let want: Vec<String> = (0..N).map(|i| format!("s{i:04}")).collect();
    assert_eq!(seen, want, "each record committed once\n{}", out.context());
    assert_eq!(committed.len(), N, "and nothing else produced");
    assert_eq!(kafka.committed(&s.offsets_group, &s.input, 1), produced, "the input offsets");
}

/// Bad exactly-once config: one clear line at the key, exit 78.
#[test]
fn bad_exactly_once_config_is_one_clear_error() {
    let ws = Workspace::new("kafka_tx_bad");
    let cases = [
        (r#"topic = "t", delivery = "exactly-twice""#, "exactly-once"),
        (r#"topic = "{k}", delivery = "exactly-once""#, "needs progress_topic"),
        (r#"topic = "t", offsets_group = "g""#, "applies only with delivery = \"exactly-once\""),
        (
            r#"topic = "t", delivery = "exactly-once", idempotent = false"#,
            "needs idempotent = true",
        ),
        (
            r#"topic = "t", delivery = "exactly-once", transaction_timeout = "5s""#,
            "transaction_timeout must be at least delivery_timeout",
        ),
        (r#"topic = "t", properties = { "transactional.id" = "x" }"#, "transactional_id_prefix"),
        (
            r#"topic = "t", delivery = "exactly-once", max_staged_bytes = 1024"#,
            "max_staged_bytes must be 1048576 ... 2147483648",
        ),
        (
            r#"topic = "t", delivery = "exactly-once", max_stage_bytes = 1048576"#,
            "did you mean \"max_staged_bytes\"?",
        ),
    ];
    for (config, want) in cases {
        let path = ws.write_topology(
            "bad.toml",
            &format!(
                r#"[plugins]
kafka = "{{kafka}}"
testkit = "{{testkit}}"

[spouts.in]
component = "testkit::EmptySpout"

[bolts.out]
component = "kafka::KafkaPublish"
tick_tuple_freq_secs = 1
inputs = [{{ from = "in" }}]
config = {{ {config} }}
"#
            ),
        );
        let out = SquallCommand::validate(&ws, &path).output();
        out.assert_code(78);
        let line = out.single_error_line();
        assert!(
            line.contains("bad.toml:") && line.contains(want),
            "{config}: {line}\n{}",
            out.context()
        );
    }
}
