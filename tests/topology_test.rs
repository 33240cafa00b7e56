//! `squall test`: the `[[tests]]` of a topology file, run in process on the
//! real plugins and simulated time: tuples fed in place of a spout and
//! injected at a bolt, every kind of expectation, tick tuples, a window and
//! a message timeout on the simulated clock, a readable diff and exit 1 on
//! a failing test, JUnit XML, and a mistyped key at its file:line:col.

use crate::util::{SquallCommand, Workspace};

/// The topology under test: sentences -> split -> count, a tick bolt and a
/// 10 s window on the words, a bolt failing "poison" inputs, and a bolt fed
/// by its own spout that never acks (its trees time out).
const BASE: &str = r#"
[topology]
name = "tested"
acker_executors = 1

[plugins]
examples = "{examples}"
testkit = "{testkit}"

[spouts.sentences]
component = "examples::RandomSentenceSpout"

[spouts.quiet]
component = "examples::RandomSentenceSpout"

[bolts.split]
component = "examples::SplitSentence"
inputs = [{ from = "sentences" }]

[bolts.count]
component = "examples::WordCount"
inputs = [{ from = "split", grouping = { fields = ["word"] } }]

[bolts.ticker]
component = "testkit::TickCountBolt"
tick_tuple_freq_secs = 2
inputs = [{ from = "split" }]

[bolts.window]
component = "testkit::WindowSizeBolt"
window = { length = "10s" }
inputs = [{ from = "split" }]

[bolts.chaos]
component = "testkit::ChaosBolt"
config = { fail_matching = "poison" }
inputs = [{ from = "sentences" }]

[bolts.dropper]
component = "testkit::ChaosBolt"
config = { drop_rate = 1.0 }
inputs = [{ from = "quiet" }]
"#;

const PASSING: &str = r#"
include = ["base.toml"]

[[tests]]
name = "a sentence is split and its words counted"

[[tests.inputs]]
spout = "sentences"
tuples = [["the cow the"]]

[[tests.expect]]
outputs_of = "split"
equals = [["the"], ["cow"], ["the"]]

[[tests.expect]]
outputs_of = "count"
equals = [{ word = "the", count = 1 }, { word = "cow", count = 1 }, { word = "the", count = 2 }]

[[tests.expect]]
inputs_of = "count"
contains = [{ word = "cow" }]

[[tests.expect]]
outputs_of = "dropper"
no_output = true

[[tests.expect]]
trees_of = "sentences"
acked = [0]

[[tests.expect]]
outputs_of = "ticker"
no_output = true

[[tests]]
name = "ticks and a window on simulated time"
advance = "10s"

[[tests.inputs]]
spout = "sentences"
tuples = [["a b c"]]

[[tests.expect]]
outputs_of = "ticker"
equals = [[3], [3], [3], [3], [3]]

# The 10 s window fires at 10 s with the three words; the flush at the end
# (as at a drain) runs the next window, which holds only them, expired.
[[tests.expect]]
outputs_of = "window"
equals = [
    { tuples = 3, new = 3, expired = 0, first = 'SmallStr("a")' },
    { tuples = 0, new = 0, expired = 3, first = "" },
]

[[tests]]
name = "a poisoned input fails its tree and a dropped one times out"
advance = "60s"

[[tests.inputs]]
bolt = "chaos"
tuples = [["fine"], ["poison pill"]]

[[tests.inputs]]
spout = "quiet"
tuples = [["held"]]

[[tests.expect]]
trees_of = "chaos"
acked = [0]
failed = [1]

[[tests.expect]]
outputs_of = "chaos"
equals = [{ value = "fine" }]

[[tests.expect]]
trees_of = "quiet"
failed = [0]
"#;

#[test]
fn the_tests_of_a_topology_pass_on_the_real_plugins_and_simulated_time() {
    let ws = Workspace::new("topology-test-pass");
    ws.write_topology("base.toml", BASE);
    let file = ws.write_topology("tested.toml", PASSING);
    let mut cmd = SquallCommand::new(&ws, ["test"]);
    cmd.arg(&file).args(["--junit"]).arg(ws.path("junit.xml"));
    let out = cmd.output();
    out.assert_code(0);
    for name in [
        "a sentence is split and its words counted",
        "ticks and a window on simulated time",
        "a poisoned input fails its tree and a dropped one times out",
    ] {
        assert!(out.stdout.contains(&format!("test {name:?} ... ok")), "{}", out.context());
    }
    assert!(out.stdout.contains("test result: ok. 3 passed; 0 failed"), "{}", out.context());
    // Simulated: 70 s of topology time take far less than that.
    assert!(out.elapsed.as_secs() < 60, "{:?}\n{}", out.elapsed, out.context());
    let xml = ws.read("junit.xml");
    assert_eq!(xml.matches("<testcase ").count(), 3, "{xml}");
    assert!(xml.contains("failures=\"0\""), "{xml}");
}

const FAILING: &str = r#"
include = ["base.toml"]

[[tests]]
name = "the counts are wrong on purpose"

[[tests.inputs]]
spout = "sentences"
tuples = [["a b"]]

[[tests.expect]]
outputs_of = "count"
equals = [{ word = "a", count = 1 }, { word = "b", count = 2 }]

[[tests]]
name = "this one passes"

[[tests.inputs]]
spout = "sentences"
tuples = [["a"]]

[[tests.expect]]
outputs_of = "split"
count = 1
"#;

#[test]
fn a_failing_test_prints_a_diff_exits_1_and_is_a_junit_failure() {
    let ws = Workspace::new("topology-test-fail");
    ws.write_topology("base.toml", BASE);
    let file = ws.write_topology("wrong.toml", FAILING);
    let mut cmd = SquallCommand::new(&ws, ["test"]);
    cmd.arg(&file).args(["--junit"]).arg(ws.path("junit.xml"));
    let out = cmd.output();
    out.assert_code(1);
    let stdout = &out.stdout;
    assert!(
        stdout.contains("test \"the counts are wrong on purpose\" ... FAILED"),
        "{}",
        out.context()
    );
    assert!(stdout.contains("test \"this one passes\" ... ok"), "{}", out.context());
    assert!(
        stdout.contains("wrong.toml:11:1: the outputs of \"count\" on stream \"default\""),
        "{}",
        out.context()
    );
    assert!(stdout.contains("    { word = \"a\", count = 1 }\n"), "{}", out.context());
    assert!(stdout.contains("  - { word = \"b\", count = 2 }\n"), "{}", out.context());
    assert!(stdout.contains("  + { word = \"b\", count = 1 }\n"), "{}", out.context());
    assert!(stdout.contains("test result: FAILED. 1 passed; 1 failed"), "{}", out.context());
    assert!(out.stderr.contains("1 of 2 test(s) failed"), "{}", out.context());
    let xml = ws.read("junit.xml");
    assert_eq!(xml.matches("<failure ").count(), 1, "{xml}");
    assert!(xml.contains("- { word = &quot;b&quot;, count = 2 }"), "{xml}");
}

#[test]
fn a_mistyped_key_or_name_in_a_test_is_a_config_error_at_its_place() {
    let ws = Workspace::new("topology-test-keys");
    ws.write_topology("base.toml", BASE);
    let file = ws.write_topology(
        "typo.toml",
        r#"include = ["base.toml"]

[[tests]]
name = "typo"

[[tests.inputs]]
spout = "sentence"
tuples = [["a"]]

[[tests.expect]]
outputs_of = "split"
equls = [["a"]]
"#,
    );
    let out = SquallCommand::new(&ws, ["test"]).arg(&file).output();
    out.assert_code(78);
    assert!(out.stderr.contains("typo.toml:7:9"), "{}", out.context());
    assert!(
        out.stderr.contains("names no spout of the topology: \"sentence\""),
        "{}",
        out.context()
    );
    assert!(out.stderr.contains("typo.toml:12:1"), "{}", out.context());
    assert!(out.stderr.contains("unknown key \"equls\""), "{}", out.context());
    assert!(out.stderr.contains("did you mean \"equals\"?"), "{}", out.context());
    // `squall validate` reads the tests too.
    SquallCommand::validate(&ws, &file).output().assert_code(78);
    // A topology with no tests is told so.
    let none = SquallCommand::new(&ws, ["test"]).arg(ws.path("base.toml")).output();
    none.assert_code(78);
    assert!(none.stderr.contains("has no [[tests]]"), "{}", none.context());
}

/// A durable word count whose `[state]` is the embedded store beside the
/// file: `squall test` runs its tests on the in-memory backend instead.
const DURABLE: &str = r#"
[topology]
name = "tested-durable"
acker_executors = 1

[plugins]
examples = "{examples}"
state = "{state_embedded}"

[state]
backend = "state::EmbeddedState"
config = { path = "${SQUALL_TOPOLOGY_DIR}/state" }

[spouts.sentences]
component = "examples::RandomSentenceSpout"

[bolts.split]
component = "examples::SplitSentence"
inputs = [{ from = "sentences" }]

[bolts.count]
component = "examples::DurableWordCount"
inputs = [{ from = "split", grouping = { fields = ["word"] } }]

[[tests]]
name = "durable counts start from nothing"

[[tests.inputs]]
spout = "sentences"
tuples = [["the cow the"]]

[[tests.expect]]
outputs_of = "count"
equals = [{ word = "the", count = 1 }, { word = "cow", count = 1 }, { word = "the", count = 2 }]
"#;

#[test]
fn a_durable_topology_is_tested_on_the_memory_backend_every_time_alike() {
    let ws = Workspace::new("topology-test-durable");
    let file = ws.write_topology("durable.toml", DURABLE);
    for run in 1..=2 {
        let mut cmd = SquallCommand::new(&ws, ["test"]);
        cmd.arg(&file);
        let out = cmd.output();
        out.assert_code(0);
        assert!(
            out.stdout.contains("test \"durable counts start from nothing\" ... ok"),
            "run {run}: {}",
            out.context()
        );
        assert!(!out.stderr.contains("keeps no checkpoint position"), "{}", out.context());
    }
    assert!(!ws.path("state").exists(), "the topology's own store is never opened");
}

/// A sliding count window (length 4, slide 2) on six tuples: at the end of
/// the input it slides on until its last tuple has left, so each tuple is
/// in two windows, as docs/plugins.md ("Flush") says.
const SLIDING: &str = r#"
[topology]
name = "sliding"
acker_executors = 1

[plugins]
testkit = "{testkit}"
examples = "{examples}"

[spouts.sentences]
component = "examples::RandomSentenceSpout"

[bolts.window]
component = "testkit::WindowSizeBolt"
window = { length_count = 4, slide_count = 2 }
inputs = [{ from = "sentences" }]

[[tests]]
name = "six tuples make four windows"

[[tests.inputs]]
spout = "sentences"
tuples = [["a"], ["b"], ["c"], ["d"], ["e"], ["f"]]

[[tests.expect]]
outputs_of = "window"
equals = [
    { tuples = 2, new = 2, expired = 0, first = 'SmallStr("a")' },
    { tuples = 4, new = 2, expired = 0, first = 'SmallStr("a")' },
    { tuples = 4, new = 2, expired = 2, first = 'SmallStr("c")' },
    { tuples = 2, new = 0, expired = 2, first = 'SmallStr("e")' },
]
"#;

#[test]
fn a_sliding_count_window_slides_on_at_the_end_of_the_input() {
    let ws = Workspace::new("topology-test-sliding");
    let file = ws.write_topology("sliding.toml", SLIDING);
    let mut cmd = SquallCommand::new(&ws, ["test"]);
    cmd.arg(&file);
    let out = cmd.output();
    assert!(
        out.stdout.contains("test \"six tuples make four windows\" ... ok"),
        "{}",
        out.context()
    );
    out.assert_code(0);
}

/// The README's word counts ship `[[tests]]` that pass, the durable one on
/// the in-memory backend (its store beside the file is never opened).
#[test]
fn the_shipped_word_counts_pass_their_own_tests() {
    let ws = Workspace::new("topology-test-shipped");
    let root = crate::util::workspace_root();
    for name in ["wordcount.toml", "wordcount-durable.toml"] {
        let mut cmd = SquallCommand::new(&ws, ["test"]);
        cmd.arg(root.join("topologies").join(name))
            .env("SQUALL_PLUGIN_DIR", crate::util::release_dir());
        let out = cmd.output();
        out.assert_code(0);
        assert!(
            out.stdout.contains("test \"every word of the sentences is counted\" ... ok"),
            "{name}\n{}",
            out.context()
        );
    }
}
