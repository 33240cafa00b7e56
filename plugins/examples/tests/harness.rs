//! Word count end to end, in process, on the real host (squall-harness):
//! fixed sentences in, exact counts out, and a failed tuple reported by id.

use std::collections::HashMap;
use std::time::Duration;

use squall_examples::__SquallPlugin;
use squall_harness::{Harness, HarnessError};
use squall_plugin_api::{MessageId, Value};

/// Storm's word count with two split and two count tasks, one acker.
const WORDCOUNT: &str = r#"
[topology]
name = "wordcount-harness"
acker_executors = 1

[spouts.sentences]
component = "examples::RandomSentenceSpout"

[bolts.split]
component = "examples::SplitSentence"
parallelism = 2
inputs = [{ from = "sentences", grouping = "shuffle" }]

[bolts.count]
component = "examples::WordCount"
parallelism = 2
inputs = [{ from = "split", grouping = { fields = ["word"] } }]
"#;

const TIMEOUT: Duration = Duration::from_secs(30);

fn sentences(texts: &[&str]) -> Vec<Vec<Value>> {
    texts.iter().map(|t| vec![Value::from(*t)]).collect()
}

/// The highest count `count` emitted per word: its total.
fn totals(done: &squall_harness::Completed) -> HashMap<String, u64> {
    let mut totals = HashMap::new();
    for values in done.values("count", "default") {
        let word = values[0].as_str().expect("a word").to_owned();
        let count = values[1].as_u64().expect("a count");
        let total = totals.entry(word).or_insert(0);
        *total = count.max(*total);
    }
    totals
}

#[test]
fn word_count_counts_fixed_sentences_exactly() {
    let done = Harness::new(WORDCOUNT)
        .plugin::<__SquallPlugin>("examples")
        .feed(
            "sentences",
            sentences(&["the cow jumped over the moon", "the man went to the store"]),
        )
        .run_until_complete(TIMEOUT)
        .expect("the run completes");

    assert_eq!(done.acked_by("sentences"), [MessageId(0), MessageId(1)]);
    assert!(done.failed_by("sentences").is_empty(), "{:?}", done.failed);
    // The feeder's own tuples are captured under the spout's name.
    assert_eq!(done.values("sentences", "default").len(), 2);
    let mut words: Vec<String> = done
        .values("split", "default")
        .iter()
        .map(|v| v[0].as_str().expect("a word").to_owned())
        .collect();
    words.sort();
    let mut expected: Vec<&str> =
        "the cow jumped over the moon the man went to the store".split(' ').collect();
    expected.sort();
    assert_eq!(words, expected);
    // One (word, count) per word seen, and the counts add up per word.
    assert_eq!(done.values("count", "default").len(), 12);
    let expected: HashMap<String, u64> = [
        ("the", 4),
        ("cow", 1),
        ("jumped", 1),
        ("over", 1),
        ("moon", 1),
        ("man", 1),
        ("went", 1),
        ("to", 1),
        ("store", 1),
    ]
    .into_iter()
    .map(|(w, c)| (w.to_owned(), c))
    .collect();
    assert_eq!(totals(&done), expected);
}

#[test]
fn a_tuple_the_split_bolt_fails_is_reported_failed_by_its_message_id() {
    // SplitSentence is a basic bolt: an `Err` from `execute` (here: the
    // sentence is not a string) fails the input, and the tree with it.
    let done = Harness::new(WORDCOUNT)
        .plugin::<__SquallPlugin>("examples")
        .feed(
            "sentences",
            vec![vec![Value::from("a b")], vec![Value::U64(7)], vec![Value::from("b")]],
        )
        .run_until_complete(TIMEOUT)
        .expect("the run completes");

    assert_eq!(done.acked_by("sentences"), [MessageId(0), MessageId(2)]);
    assert_eq!(done.failed_by("sentences"), [MessageId(1)]);
    let expected: HashMap<String, u64> = [("a".to_owned(), 1), ("b".to_owned(), 2)].into();
    assert_eq!(totals(&done), expected);
}

#[test]
fn feeding_a_spout_the_topology_lacks_is_a_clear_error() {
    let e = Harness::new(WORDCOUNT)
        .plugin::<__SquallPlugin>("examples")
        .feed("sentence", sentences(&["a"]))
        .run_until_complete(TIMEOUT)
        .unwrap_err();
    assert!(matches!(e, HarnessError::Usage(_)), "{e}");
    assert_eq!(
        e.to_string(),
        "feed: the topology has no spout \"sentence\" (its spouts: sentences)"
    );
}

#[test]
fn a_tuple_of_the_wrong_arity_is_a_clear_error() {
    let e = Harness::new(WORDCOUNT)
        .plugin::<__SquallPlugin>("examples")
        .feed("sentences", vec![vec![Value::from("a"), Value::from("b")]])
        .run_until_complete(TIMEOUT)
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "feed: tuple 0 for \"sentences\" stream \"default\" has 2 value(s); the stream declares 1 field(s) (sentence)"
    );
}

#[test]
fn an_invalid_topology_reports_its_line() {
    let text = "[spouts.sentences]\ncomponent = \"examples::NoSuchSpout\"\n";
    let e = Harness::new(text)
        .plugin::<__SquallPlugin>("examples")
        .run_until_complete(TIMEOUT)
        .unwrap_err();
    assert!(matches!(e, HarnessError::Config(_)), "{e}");
    assert!(e.to_string().contains("harness.toml:2:"), "{e}");
    assert!(e.to_string().contains("NoSuchSpout"), "{e}");
}

#[test]
fn project_emits_the_listed_fields_of_word_count_in_the_listed_order() {
    let text = format!(
        "{WORDCOUNT}
[bolts.project]
component = \"examples::Project\"
config = {{ fields = [\"count\", \"word\"] }}
inputs = [{{ from = \"count\", grouping = \"shuffle\" }}]
"
    );
    let done = Harness::new(&text)
        .plugin::<__SquallPlugin>("examples")
        .feed("sentences", sentences(&["b a b"]))
        .run_until_complete(TIMEOUT)
        .expect("the run completes");

    assert_eq!(done.acked_by("sentences"), [MessageId(0)]);
    let mut projected = done.values("project", "default");
    projected.sort_by_key(|v| (v[0].as_u64(), v[1].as_str().map(str::to_owned)));
    let row = |count: u64, word: &str| vec![Value::U64(count), Value::from(word)];
    assert_eq!(projected, [row(1, "a"), row(1, "b"), row(2, "b")]);
}

/// docs/plugins.md shows tests/guide_harness.rs as its harness example (the
/// guide's doc tests cannot link the harness): the two must not drift.
#[test]
fn the_guide_shows_this_file() {
    let guide = include_str!("../../../docs/plugins.md");
    let file = include_str!("guide_harness.rs");
    assert!(
        guide.contains(&format!("```rust,ignore\n{file}```")),
        "docs/plugins.md's harness example differs from plugins/examples/tests/guide_harness.rs"
    );
}
