//! `squall run`: what a topology computes, how tuples are routed, which
//! lifecycle calls the host makes and in what order, and how a run ends.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use crate::util::{read_records, Output, Record, SquallCommand, Workspace};

/// The sentences of the word-count tests, emitted in this order, round robin.
const SENTENCES: &[&str] = &[
    "the cow jumped over the moon",
    "an apple a day keeps the doctor away",
    "four score and seven years ago",
];

/// Sentences the word-count spout emits: its `limit`, with parallelism 1.
pub(crate) const SENTENCE_LIMIT: u64 = 200;

/// What the word-count topology must print: each word of the first
/// `SENTENCE_LIMIT` sentences of the cycle, counted.
pub(crate) fn expected_word_counts() -> BTreeMap<String, u64> {
    let mut counts = BTreeMap::new();
    for i in 0..SENTENCE_LIMIT as usize {
        for word in SENTENCES[i % SENTENCES.len()].split_whitespace() {
            *counts.entry(word.to_owned()).or_insert(0) += 1;
        }
    }
    counts
}

/// The word-count topology over the fixed sentences, with `acker_executors`.
pub(crate) fn word_count_topology(acker_executors: u32) -> String {
    let sentences: Vec<String> = SENTENCES.iter().map(|s| format!("{s:?}")).collect();
    format!(
        r#"
[topology]
name = "wordcount-e2e"
acker_executors = {acker_executors}

[plugins]
examples = "{{examples}}"

[spouts.sentences]
component = "examples::RandomSentenceSpout"
parallelism = 1
config = {{ order = "cycle", sentences = [{}], limit = {SENTENCE_LIMIT} }}

[bolts.split]
component = "examples::SplitSentence"
parallelism = 2
inputs = [{{ from = "sentences", grouping = "shuffle" }}]

[bolts.count]
component = "examples::WordCount"
parallelism = 2
inputs = [{{ from = "split", grouping = {{ fields = ["word"] }} }}]
"#,
        sentences.join(", ")
    )
}

/// The `wordcount: <word> <count>` lines of stdout, summed over tasks. Fails
/// if one word is printed twice: with a fields grouping on `word`, exactly one
/// task counts each word.
#[track_caller]
pub(crate) fn printed_word_counts(out: &Output) -> BTreeMap<String, u64> {
    let mut counts = BTreeMap::new();
    for line in out.stdout.lines() {
        let Some(rest) = line.strip_prefix("wordcount: ") else { continue };
        let (word, count) = rest
            .rsplit_once(' ')
            .unwrap_or_else(|| panic!("malformed line {line:?}\n{}", out.context()));
        let count: u64 =
            count.parse().unwrap_or_else(|_| panic!("malformed count {line:?}\n{}", out.context()));
        let previous = counts.insert(word.to_owned(), count);
        assert!(
            previous.is_none(),
            "{word:?} was counted by two tasks despite the fields grouping\n{}",
            out.context()
        );
    }
    counts
}

/// Runs the word-count topology and checks the counts and the summary.
fn check_word_count(test: &str, acker_executors: u32) {
    let ws = Workspace::new(test);
    let topology = ws.write_topology("wc.toml", &word_count_topology(acker_executors));
    let out = SquallCommand::run(&ws, &topology, "2s").output();
    out.assert_code(0);

    assert_eq!(printed_word_counts(&out), expected_word_counts(), "\n{}", out.context());
    let words: u64 = expected_word_counts().values().sum();
    assert_eq!(out.summary()["outcome"], "completed", "\n{}", out.context());
    assert_eq!(out.stat("sentences", "emitted"), SENTENCE_LIMIT, "\n{}", out.context());
    assert_eq!(out.stat("sentences", "acked"), SENTENCE_LIMIT, "\n{}", out.context());
    assert_eq!(out.stat("sentences", "failed"), 0, "\n{}", out.context());
    assert_eq!(out.stat("split", "executed"), SENTENCE_LIMIT, "\n{}", out.context());
    assert_eq!(out.stat("split", "emitted"), words, "\n{}", out.context());
    assert_eq!(out.stat("count", "executed"), words, "\n{}", out.context());
}

#[test]
fn word_count_on_a_bounded_input_gives_exact_counts_with_acking() {
    check_word_count("word_count_with_acking", 1);
}

#[test]
fn word_count_on_a_bounded_input_gives_exact_counts_without_ackers() {
    check_word_count("word_count_without_ackers", 0);
}

#[test]
fn two_plugin_libraries_load_side_by_side_in_one_topology() {
    let ws = Workspace::new("two_libraries");
    let topology = ws.write_topology(
        "two.toml",
        r#"
[plugins]
testkit = "{testkit}"
examples = "{examples}"

[spouts.source]
component = "testkit::ConstSpout"
config = { value = "red green blue green", limit = 50, reliable = true }

[bolts.split]
component = "examples::SplitSentence"
inputs = [{ from = "source" }]

[bolts.sink]
component = "testkit::RecordBolt"
config = { out = "{dir}/sink" }
inputs = [{ from = "split" }]
"#,
    );
    let out = SquallCommand::run(&ws, &topology, "1s").output();
    out.assert_code(0);
    let records = read_records(&ws, "sink", 1, &out);
    let keys = &records.values().next().expect("one report").keys;
    let expected: BTreeMap<String, u64> =
        [("blue", 50), ("green", 100), ("red", 50)].map(|(k, n)| (k.to_owned(), n)).into();
    assert_eq!(keys, &expected, "\n{}", out.context());
    assert_eq!(out.stat("source", "acked"), 50, "\n{}", out.context());
    assert_eq!(out.stat("split", "executed"), 50, "\n{}", out.context());
}

/// Keys the grouping tests' spout emits, each `ROUNDS` times, in order.
const KEYS: usize = 20;
/// How many times the grouping tests' spout emits each key.
const ROUNDS: u64 = 15;
/// Tasks of the grouping tests' `RecordBolt`.
const SINK_TASKS: usize = 3;

/// `k0`..`k19`, as the grouping tests' spout emits them.
fn key_names() -> BTreeSet<String> {
    (0..KEYS).map(|i| format!("k{i}")).collect()
}

/// A spout cycling over `k0..k19` (`ROUNDS` times, unreliable) into a
/// 3-task `RecordBolt` with `grouping` (TOML); returns the reports by task id.
fn run_grouping(test: &str, grouping: &str) -> (BTreeMap<u32, Record>, Output) {
    let ws = Workspace::new(test);
    let keys: Vec<String> = key_names().iter().map(|k| format!("{k:?}")).collect();
    // `key_names` is sorted as strings; the order of emission does not matter.
    let topology = ws.write_topology(
        "grouping.toml",
        &format!(
            r#"
[plugins]
examples = "{{examples}}"
testkit = "{{testkit}}"

[spouts.source]
component = "examples::RandomSentenceSpout"
config = {{ order = "cycle", sentences = [{}], limit = {}, reliable = false }}

[bolts.sink]
component = "testkit::RecordBolt"
parallelism = {SINK_TASKS}
config = {{ out = "{{dir}}/sink" }}
inputs = [{{ from = "source", grouping = {grouping} }}]
"#,
            keys.join(", "),
            KEYS as u64 * ROUNDS
        ),
    );
    let out = SquallCommand::run(&ws, &topology, "1s").output();
    out.assert_code(0);
    let records = read_records(&ws, "sink", SINK_TASKS, &out);
    (records, out)
}

/// Checks an even spread: every tuple arrived once, and a producer's round
/// robin gives each task the same share, give or take one.
#[track_caller]
fn assert_spread_evenly(records: &BTreeMap<u32, Record>, out: &Output) {
    let total = KEYS as u64 * ROUNDS;
    let per_task: Vec<u64> = records.values().map(|r| r.tuples).collect();
    assert_eq!(per_task.iter().sum::<u64>(), total, "{records:#?}\n{}", out.context());
    let (min, max) = (per_task.iter().min().unwrap(), per_task.iter().max().unwrap());
    assert!(*min > 0, "a task got nothing: {per_task:?}\n{}", out.context());
    assert!(max - min <= 1, "uneven spread {per_task:?}\n{}", out.context());
    let mut keys: BTreeMap<String, u64> = BTreeMap::new();
    for r in records.values() {
        for (k, n) in &r.keys {
            *keys.entry(k.clone()).or_insert(0) += n;
        }
    }
    let expected: BTreeMap<String, u64> = key_names().into_iter().map(|k| (k, ROUNDS)).collect();
    assert_eq!(keys, expected, "\n{}", out.context());
}

#[test]
fn shuffle_grouping_spreads_tuples_evenly_over_the_tasks() {
    let (records, out) = run_grouping("grouping_shuffle", r#""shuffle""#);
    assert_spread_evenly(&records, &out);
}

#[test]
fn local_or_shuffle_grouping_spreads_like_shuffle_in_one_process() {
    let (records, out) = run_grouping("grouping_local_or_shuffle", r#""local_or_shuffle""#);
    assert_spread_evenly(&records, &out);
}

#[test]
fn none_grouping_spreads_like_shuffle() {
    let (records, out) = run_grouping("grouping_none", r#""none""#);
    assert_spread_evenly(&records, &out);
}

#[test]
fn fields_grouping_sends_each_key_to_exactly_one_task() {
    let (records, out) = run_grouping("grouping_fields", r#"{ fields = ["sentence"] }"#);
    let mut owner: BTreeMap<&str, u32> = BTreeMap::new();
    for (task, r) in &records {
        for (key, n) in &r.keys {
            if let Some(other) = owner.insert(key, *task) {
                panic!(
                    "key {key} reached tasks {other} and {task}\n{records:#?}\n{}",
                    out.context()
                );
            }
            assert_eq!(*n, ROUNDS, "task {task} got key {key} {n} times\n{}", out.context());
        }
    }
    let seen: BTreeSet<String> = owner.keys().map(|k| k.to_string()).collect();
    assert_eq!(seen, key_names(), "\n{}", out.context());
    assert!(
        records.values().all(|r| r.tuples > 0),
        "20 keys should reach all 3 tasks: {records:#?}\n{}",
        out.context()
    );
}

#[test]
fn all_grouping_sends_every_tuple_to_every_task() {
    let (records, out) = run_grouping("grouping_all", r#""all""#);
    let expected: BTreeMap<String, u64> = key_names().into_iter().map(|k| (k, ROUNDS)).collect();
    for (task, r) in &records {
        assert_eq!(r.tuples, KEYS as u64 * ROUNDS, "task {task}\n{}", out.context());
        assert_eq!(r.keys, expected, "task {task}\n{}", out.context());
    }
}

#[test]
fn global_grouping_sends_everything_to_the_lowest_task_id() {
    let (records, out) = run_grouping("grouping_global", r#""global""#);
    let lowest = *records.keys().next().expect("three reports");
    for (task, r) in &records {
        let expected = if *task == lowest { KEYS as u64 * ROUNDS } else { 0 };
        assert_eq!(r.tuples, expected, "task {task} (lowest is {lowest})\n{}", out.context());
    }
}

#[test]
fn direct_grouping_delivers_each_tuple_to_the_task_the_emitter_named() {
    let ws = Workspace::new("grouping_direct");
    let topology = ws.write_topology(
        "direct.toml",
        r#"
[plugins]
testkit = "{testkit}"

[spouts.source]
component = "testkit::DirectSpout"
config = { target = "sink", limit = 300 }

[bolts.sink]
component = "testkit::RecordBolt"
parallelism = 3
config = { out = "{dir}/sink" }
inputs = [{ from = "source", stream = "direct", grouping = "direct" }]
"#,
    );
    let out = SquallCommand::run(&ws, &topology, "1s").output();
    out.assert_code(0);
    let records = read_records(&ws, "sink", 3, &out);
    for (task, r) in &records {
        let expected: BTreeMap<String, u64> = [(task.to_string(), 100)].into();
        assert_eq!(r.keys, expected, "task {task} got others' tuples\n{}", out.context());
    }
}

#[test]
fn named_streams_reach_only_their_subscribers() {
    let ws = Workspace::new("named_streams");
    let topology = ws.write_topology(
        "streams.toml",
        r#"
[plugins]
testkit = "{testkit}"

[spouts.source]
component = "testkit::MultiStreamSpout"
config = { limit = 300 }

[bolts.evens]
component = "testkit::RecordBolt"
parallelism = 2
config = { out = "{dir}/evens" }
inputs = [{ from = "source", stream = "even" }]

[bolts.odds]
component = "testkit::RecordBolt"
parallelism = 2
config = { out = "{dir}/odds" }
inputs = [{ from = "source", stream = "odd" }]
"#,
    );
    let out = SquallCommand::run(&ws, &topology, "1s").output();
    out.assert_code(0);
    for (prefix, parity) in [("evens", 0), ("odds", 1)] {
        let records = read_records(&ws, prefix, 2, &out);
        let mut seen = BTreeSet::new();
        for r in records.values() {
            for (key, n) in &r.keys {
                let value: u64 = key.parse().expect("MultiStreamSpout emits numbers");
                assert_eq!(value % 2, parity, "{prefix} got {value}\n{}", out.context());
                assert_eq!(*n, 1, "{prefix} got {value} {n} times\n{}", out.context());
                seen.insert(value);
            }
        }
        let expected: BTreeSet<u64> = (0..300).filter(|v| v % 2 == parity).collect();
        assert_eq!(seen, expected, "{prefix}\n{}", out.context());
    }
}

#[test]
fn tick_tuples_are_delivered_at_the_configured_frequency() {
    let ws = Workspace::new("ticks");
    let topology = ws.write_topology(
        "ticks.toml",
        r#"
[plugins]
testkit = "{testkit}"

[spouts.source]
component = "testkit::ConstSpout"
config = { limit = 10 }

[bolts.sink]
component = "testkit::RecordBolt"
tick_tuple_freq_secs = 1
config = { out = "{dir}/sink" }
inputs = [{ from = "source" }]
"#,
    );
    let out = SquallCommand::run(&ws, &topology, "4s").output();
    out.assert_code(0);
    let records = read_records(&ws, "sink", 1, &out);
    let r = records.values().next().expect("one report");
    // One tick a second over 4 s: 3 or 4, depending on when the first one fires;
    // never more than one a second.
    assert!((2..=5).contains(&r.ticks), "{} ticks in 4 s\n{}", r.ticks, out.context());
    assert_eq!(r.tuples, 10, "ticks are not counted as tuples\n{}", out.context());
    assert_eq!(out.stat("sink", "ticks"), r.ticks, "the summary counts ticks\n{}", out.context());
}

#[test]
fn lifecycle_calls_come_in_storms_order_and_spouts_deactivate_before_bolts_clean_up() {
    let ws = Workspace::new("lifecycle");
    let topology = ws.write_topology(
        "lifecycle.toml",
        r#"
[plugins]
testkit = "{testkit}"

[spouts.source]
component = "testkit::LifecycleSpout"
parallelism = 2
config = { log = "{dir}/events.log", limit = 5 }

[bolts.sink]
component = "testkit::LifecycleBolt"
parallelism = 2
config = { log = "{dir}/events.log" }
inputs = [{ from = "source" }]
"#,
    );
    let out = SquallCommand::run(&ws, &topology, "1s").output();
    out.assert_code(0);
    let log = ws.read("events.log");
    let lines: Vec<(&str, &str)> = log
        .lines()
        .map(|l| l.split_once(' ').unwrap_or_else(|| panic!("malformed log line {l:?}\n{log}")))
        .collect();
    let context = format!("--- events.log\n{log}\n{}", out.context());

    // Both instances of each component are built before any task starts.
    let news = lines.iter().take_while(|(_, e)| *e == "new").count();
    assert_eq!(news, 4, "constructors first\n{context}");
    assert_eq!(lines.iter().filter(|(_, e)| *e == "new").count(), 4, "{context}");

    let mut by_task: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (who, event) in &lines[news..] {
        by_task.entry(who).or_default().push(event);
    }
    let spouts: Vec<_> = by_task.keys().filter(|w| w.starts_with("source:")).copied().collect();
    let bolts: Vec<_> = by_task.keys().filter(|w| w.starts_with("sink:")).copied().collect();
    assert_eq!((spouts.len(), bolts.len()), (2, 2), "tasks {:?}\n{context}", by_task.keys());
    for who in &spouts {
        assert_eq!(
            by_task[who],
            ["open", "activate", "first_next_tuple", "deactivate", "close"],
            "spout task {who}\n{context}"
        );
    }
    for who in &bolts {
        assert_eq!(
            by_task[who],
            ["prepare", "first_execute", "cleanup"],
            "bolt task {who}\n{context}"
        );
    }
    let position = |who: &str, event: &str| {
        lines.iter().position(|(w, e)| *w == who && *e == event).expect("checked above")
    };
    let last_deactivate = spouts.iter().map(|w| position(w, "deactivate")).max().unwrap();
    let first_cleanup = bolts.iter().map(|w| position(w, "cleanup")).min().unwrap();
    assert!(
        last_deactivate < first_cleanup,
        "a bolt cleaned up before a spout deactivated\n{context}"
    );
}

#[test]
fn a_plugin_wait_strategy_runs_the_topology() {
    let ws = Workspace::new("plugin_wait_strategy");
    let extra = r#"
[wait.spout]
strategy = "extra::ExponentialBackoff"
spin_count = 5
max_sleep_micros = 500

[wait.bolt]
strategy = "extra::ExponentialBackoff"
"#;
    let mut toml = word_count_topology(1);
    toml = toml.replace("[plugins]\n", "[plugins]\nextra = \"{wait_extra}\"\n");
    toml.push_str(extra);
    let topology = ws.write_topology("wait.toml", &toml);
    let out = SquallCommand::run(&ws, &topology, "2s").output();
    out.assert_code(0);
    assert_eq!(printed_word_counts(&out), expected_word_counts(), "\n{}", out.context());
    assert_eq!(out.stat("sentences", "acked"), SENTENCE_LIMIT, "\n{}", out.context());
}

#[test]
fn a_plugin_wait_strategy_receives_the_other_keys_of_its_table_as_config() {
    let ws = Workspace::new("plugin_wait_strategy_config");
    let mut toml = word_count_topology(1);
    toml = toml.replace("[plugins]\n", "[plugins]\nextra = \"{wait_extra}\"\n");
    // ExponentialBackoff refuses a maximum below its minimum.
    toml.push_str(
        r#"
[wait.backpressure]
strategy = "extra::ExponentialBackoff"
min_sleep_micros = 50
max_sleep_micros = 5
"#,
    );
    let topology = ws.write_topology("wait.toml", &toml);
    // A strategy that rejects its config is a config error (exit 78), at
    // the place the topology names the strategy.
    let text = ws.read("wait.toml");
    let (line, col) = crate::util::loc_of(&text, "\"extra::ExponentialBackoff\"");
    let at = format!("{}:{line}:{col}: error: ", topology.display());
    for out in [
        SquallCommand::validate(&ws, &topology).output(),
        SquallCommand::run(&ws, &topology, "60s").limit(Duration::from_secs(30)).output(),
    ] {
        out.assert_code(78);
        let line = out.stderr.lines().find(|l| l.contains(": error: ")).unwrap_or_default();
        assert!(line.starts_with(&at), "expected {at:?}\n{}", out.context());
        assert!(line.contains("extra::ExponentialBackoff"), "\n{}", out.context());
        assert!(line.contains("max_sleep_micros"), "the plugin's reason\n{}", out.context());
    }
}

#[test]
fn ctrl_c_drains_the_topology_and_exits_cleanly() {
    let ws = Workspace::new("ctrl_c");
    let topology = ws.write_topology("wc.toml", &word_count_topology(1));
    let mut cmd = SquallCommand::run_until_interrupted(&ws, &topology);
    cmd.limit(Duration::from_secs(40));
    let mut child = cmd.spawn();
    // The signal handlers are installed before the host logs that it runs.
    child.wait_for_stderr("running", Duration::from_secs(20));
    // Every sentence is acked before the interrupt.
    let acked = |n| n >= SENTENCE_LIMIT;
    child.wait_for_stat("sentences", "acked", acked, Duration::from_secs(30));
    child.interrupt();
    let out = child.wait();
    out.assert_code(0);
    assert!(out.stderr.contains("interrupt"), "the interrupt is acknowledged\n{}", out.context());
    assert_eq!(printed_word_counts(&out), expected_word_counts(), "\n{}", out.context());
    assert_eq!(out.summary()["outcome"], "completed", "\n{}", out.context());
    assert_eq!(out.stat("sentences", "acked"), SENTENCE_LIMIT, "\n{}", out.context());
}

#[test]
fn a_second_ctrl_c_exits_at_once_with_130() {
    let ws = Workspace::new("second_ctrl_c");
    // A slow bolt with many trees in flight: the drain would take ~10 s.
    let topology = ws.write_topology(
        "slow.toml",
        r#"
[topology]
max_spout_pending = 100
shutdown_timeout_secs = 20

[plugins]
testkit = "{testkit}"

[spouts.source]
component = "testkit::ConstSpout"
config = { reliable = true }

[bolts.slow]
component = "testkit::SleepBolt"
config = { micros = 100000 }
inputs = [{ from = "source" }]
"#,
    );
    let mut cmd = SquallCommand::run_until_interrupted(&ws, &topology);
    cmd.limit(Duration::from_secs(40));
    let mut child = cmd.spawn();
    child.wait_for_stderr("running", Duration::from_secs(20));
    child.wait_for_stat("slow", "executed", |n| n >= 1, Duration::from_secs(20));
    child.interrupt();
    child.wait_for_stderr("interrupt: draining", Duration::from_secs(10));
    child.interrupt();
    let out = child.wait();
    out.assert_code(130);
    // The drain (~10 s of backlog) never finished: no summary, no drain line.
    assert!(out.json.is_none(), "no summary after a second Ctrl-C\n{}", out.context());
    assert!(!out.stderr.contains("drain: "), "the drain was cut short\n{}", out.context());
}

#[test]
fn a_custom_grouping_from_a_plugin_routes_each_key_to_at_most_two_tasks() {
    // examples::PartialKeyGrouping: two candidate tasks per key, the less
    // loaded one per tuple. Every key cycles 15 times, so each goes to both
    // of its candidates (when they differ), never to a third task.
    let (records, out) = run_grouping(
        "grouping_custom",
        r#"{ custom = "examples::PartialKeyGrouping", config = { fields = ["sentence"] } }"#,
    );
    let total: u64 = records.values().map(|r| r.tuples).sum();
    assert_eq!(total, KEYS as u64 * ROUNDS, "every tuple arrived once\n{}", out.context());
    let mut tasks_of: BTreeMap<&str, BTreeSet<u32>> = BTreeMap::new();
    let mut counts: BTreeMap<&str, u64> = BTreeMap::new();
    for (task, r) in &records {
        for (key, n) in &r.keys {
            tasks_of.entry(key).or_default().insert(*task);
            *counts.entry(key).or_default() += n;
        }
    }
    assert!(
        tasks_of.values().all(|t| t.len() <= 2),
        "a key reached more than two tasks: {tasks_of:?}\n{}",
        out.context()
    );
    assert!(
        tasks_of.values().any(|t| t.len() == 2),
        "no key was split over its two candidates: {tasks_of:?}\n{}",
        out.context()
    );
    assert!(counts.values().all(|&n| n == ROUNDS), "{counts:?}\n{}", out.context());
}
