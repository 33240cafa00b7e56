// tests/harness.rs
use std::collections::HashMap;
use std::time::Duration;

use squall_examples::__SquallPlugin;
use squall_harness::Harness;
use squall_plugin_api::{MessageId, Value};

const WORDCOUNT: &str = r#"
[topology]
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

#[test]
fn counts_words_and_reports_the_sentence_split_fails() {
    let sentences = vec![
        vec![Value::from("a b")],
        vec![Value::U64(7)], // SplitSentence returns Err: the tuple fails
        vec![Value::from("b")],
    ];
    let done = Harness::new(WORDCOUNT)
        .plugin::<__SquallPlugin>("examples")
        .feed("sentences", sentences)
        .run_until_complete(Duration::from_secs(30))
        .expect("the run completes");

    assert_eq!(done.acked_by("sentences"), [MessageId(0), MessageId(2)]);
    assert_eq!(done.failed_by("sentences"), [MessageId(1)]);
    // WordCount emits (word, running count): the highest count is the total.
    let mut totals = HashMap::new();
    for v in done.values("count", "default") {
        let total = totals.entry(v[0].as_str().unwrap().to_owned()).or_insert(0);
        *total = v[1].as_u64().unwrap().max(*total);
    }
    assert_eq!(totals, HashMap::from([("a".to_owned(), 1), ("b".to_owned(), 2)]));
}
