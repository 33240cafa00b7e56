//! The end of a harness feed flushes the windows (issue 25, item 3): a
//! window that never fills on a finite feed, or a time window still open,
//! gets its trailing tuples executed, then acked, so the run completes.
//! A run that cannot complete fails at its timeout, naming the pending ids.

use std::time::{Duration, Instant};

use squall_harness::{Harness, HarnessError};
use squall_plugin_api::prelude::*;
use squall_plugin_api::MessageId;

/// Stands for a source of `["n"]`; every test feeds it.
struct Numbers;

impl Spout for Numbers {
    const NAME: &'static str = "Numbers";
    const CONFIG_KEYS: Option<&'static [ConfigKey]> = Some(&[]);

    fn declare_outputs(outputs: &mut OutputDeclarer) {
        outputs.declare(&["n"]);
    }

    fn new(_config: &ComponentConfig<'_>) -> Result<Self> {
        Ok(Numbers)
    }

    fn next_tuple(&mut self, _collector: &mut SpoutCollector<'_>) -> Result<()> {
        Ok(())
    }
}

/// Emits, per window, its first and last `n` and its size.
struct Span;

impl WindowedBolt for Span {
    const NAME: &'static str = "Span";
    const CONFIG_KEYS: Option<&'static [ConfigKey]> = Some(&[]);

    fn declare_outputs(outputs: &mut OutputDeclarer) {
        outputs.declare(&["first", "last", "size"]);
    }

    fn new(_config: &ComponentConfig<'_>) -> Result<Self> {
        Ok(Span)
    }

    fn execute(&mut self, window: &Window<'_>, collector: &mut BasicCollector<'_>) -> Result<()> {
        let tuples = window.tuples();
        let n = |t: Option<&Tuple<'_>>| t.and_then(|t| t.get(0).cloned()).unwrap_or(Value::Null);
        collector.emit(&[n(tuples.first()), n(tuples.last()), Value::U64(tuples.len() as u64)]);
        Ok(())
    }
}

/// Never acks nor fails what it gets.
struct Sink;

impl Bolt for Sink {
    const NAME: &'static str = "Sink";
    const CONFIG_KEYS: Option<&'static [ConfigKey]> = Some(&[]);

    fn new(_config: &ComponentConfig<'_>) -> Result<Self> {
        Ok(Sink)
    }

    fn execute(&mut self, _input: &Tuple<'_>, _collector: &mut BoltCollector<'_>) -> Result<()> {
        Ok(())
    }
}

squall_plugin_api::export_plugin! {
    spouts: [Numbers],
    bolts: [Sink],
    windowed_bolts: [Span],
}

fn numbers(range: std::ops::RangeInclusive<u64>) -> Vec<Vec<Value>> {
    range.map(|n| vec![Value::U64(n)]).collect()
}

fn span(first: u64, last: u64, size: u64) -> Vec<Value> {
    vec![Value::U64(first), Value::U64(last), Value::U64(size)]
}

fn topology(window: &str) -> String {
    format!(
        r#"
[spouts.numbers]
component = "w::Numbers"

[bolts.spans]
component = "w::Span"
window = {window}
inputs = [{{ from = "numbers" }}]
"#
    )
}

#[test]
fn a_sliding_count_window_s_trailing_tuples_get_their_window_at_the_end_of_the_feed() {
    // length 3, slide 2: windows fire at tuples 2 and 4; tuple 5 would wait
    // for a sixth forever, and tuple 4 with it.
    let done = Harness::new(&topology("{ length_count = 3, slide_count = 2 }"))
        .plugin::<__SquallPlugin>("w")
        .feed("numbers", numbers(1..=5))
        .run_until_complete(Duration::from_secs(20))
        .expect("the feed completes");
    assert_eq!(done.values("spans", "default"), vec![span(1, 2, 2), span(2, 4, 3), span(4, 5, 2)]);
    assert_eq!(done.acked_by("numbers"), (0..5).map(MessageId).collect::<Vec<_>>());
    assert!(done.failed_by("numbers").is_empty());
}

#[test]
fn a_time_window_still_open_at_the_end_of_the_feed_is_flushed_at_once() {
    // A 20 min tumbling window: without the flush its tuples wait until it
    // ends (up to 20 min, at a multiple of 20 min), past the 5 s timeout.
    let topology =
        format!("[topology]\nmessage_timeout_secs = 3600\n{}", topology(r#"{ length = "20m" }"#));
    let done = Harness::new(&topology)
        .plugin::<__SquallPlugin>("w")
        .feed("numbers", numbers(1..=3))
        .run_until_complete(Duration::from_secs(5))
        .expect("the feed completes");
    // Its window, then the next one with only them expired (as when the
    // clock passes both).
    let empty = vec![Value::Null, Value::Null, Value::U64(0)];
    assert_eq!(done.values("spans", "default"), vec![span(1, 3, 3), empty]);
    assert_eq!(done.acked_by("numbers"), (0..3).map(MessageId).collect::<Vec<_>>());
}

#[test]
fn a_feed_that_cannot_complete_fails_at_its_timeout_naming_the_pending_ids() {
    let topology = r#"
[topology]
shutdown_timeout_secs = 30

[spouts.numbers]
component = "w::Numbers"

[bolts.sink]
component = "w::Sink"
inputs = [{ from = "numbers" }]
"#;
    let started = Instant::now();
    let result = Harness::new(topology)
        .plugin::<__SquallPlugin>("w")
        .feed("numbers", numbers(1..=3))
        .run_until_complete(Duration::from_secs(1));
    let elapsed = started.elapsed();
    let Err(error @ HarnessError::Timeout { .. }) = result else {
        panic!("expected a timeout, got {result:?}");
    };
    let text = error.to_string();
    assert!(text.starts_with("3 fed tuple(s) neither acked nor failed after 1s"), "{text}");
    assert!(text.contains("numbers [0, 1, 2]"), "{text}");
    // The timeout holds: no drain of shutdown_timeout_secs = 30 after it
    // (a bound on a hang; the join grace is 2 s).
    assert!(elapsed < Duration::from_secs(6), "took {elapsed:?}");
}
