//! Contract 1.3 batches on the real host: a bolt gets a run of inputs per
//! call, and what happens to each input is what one call per tuple did. A
//! panic or an error in the middle of a batch fails the one input being
//! executed; the inputs after it are executed (by the restarted instance
//! after a panic), each once, in order.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use squall_harness::Harness;
use squall_plugin_api::prelude::*;
use squall_plugin_api::MessageId;

/// Stands for a source of `["n"]`; every test feeds it.
struct Numbers;

impl Spout for Numbers {
    const NAME: &'static str = "Numbers";

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

/// Set once `Boom` has panicked: it panics on 3 once per process.
static PANICKED: AtomicBool = AtomicBool::new(false);

/// Re-emits `n`; panics on 3 the first time, fails 5 with an error.
struct Boom;

impl BasicBolt for Boom {
    const NAME: &'static str = "Boom";

    fn declare_outputs(outputs: &mut OutputDeclarer) {
        outputs.declare(&["n"]);
    }

    fn new(_config: &ComponentConfig<'_>) -> Result<Self> {
        Ok(Boom)
    }

    fn execute(&mut self, input: &Tuple<'_>, collector: &mut BasicCollector<'_>) -> Result<()> {
        let n = input.get(0).and_then(Value::as_u64).ok_or("expected n")?;
        if n == 3 && !PANICKED.swap(true, Ordering::SeqCst) {
            panic!("boom on 3");
        }
        if n == 5 {
            return Err("5 is refused".into());
        }
        collector.emit(&[Value::U64(n)]);
        Ok(())
    }
}

/// The largest run of inputs `Runs` got in one call.
static LONGEST_RUN: AtomicUsize = AtomicUsize::new(0);
/// The inputs `Runs` got, over all calls.
static SEEN: AtomicUsize = AtomicUsize::new(0);

/// A rich bolt that takes each run whole: emits each input anchored to it,
/// then acks them all.
struct Runs;

impl Bolt for Runs {
    const NAME: &'static str = "Runs";

    fn declare_outputs(outputs: &mut OutputDeclarer) {
        outputs.declare(&["n"]);
    }

    fn new(_config: &ComponentConfig<'_>) -> Result<Self> {
        Ok(Runs)
    }

    fn execute(&mut self, input: &Tuple<'_>, collector: &mut BoltCollector<'_>) -> Result<()> {
        collector.emit(&[input.anchor()], input.values());
        collector.ack(input);
        SEEN.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }

    fn execute_batch(
        &mut self,
        inputs: &mut Inputs<'_, '_>,
        collector: &mut BoltCollector<'_>,
    ) -> Result<()> {
        let run = inputs.take_all();
        LONGEST_RUN.fetch_max(run.len(), Ordering::SeqCst);
        SEEN.fetch_add(run.len(), Ordering::SeqCst);
        for input in run {
            collector.emit(&[input.anchor()], input.values());
        }
        for input in run {
            collector.ack(&input);
        }
        Ok(())
    }
}

squall_plugin_api::export_plugin! {
    spouts: [Numbers],
    bolts: [Runs],
    basic_bolts: [Boom],
}

fn numbers(range: std::ops::Range<u64>) -> Vec<Vec<Value>> {
    range.map(|n| vec![Value::U64(n)]).collect()
}

fn topology(bolt: &str) -> String {
    format!(
        r#"
[topology]
producer_batch_size = 100

[spouts.numbers]
component = "b::Numbers"

[bolts.bolt]
component = "b::{bolt}"
inputs = [{{ from = "numbers" }}]
"#
    )
}

#[test]
fn a_panic_or_an_error_in_a_batch_fails_only_the_input_being_executed() {
    let done = Harness::new(&topology("Boom"))
        .plugin::<__SquallPlugin>("b")
        .feed("numbers", numbers(0..10))
        .run_until_complete(Duration::from_secs(20))
        .expect("the feed completes");
    assert!(PANICKED.load(Ordering::SeqCst), "the bolt panicked on 3");
    assert_eq!(done.failed_by("numbers"), [MessageId(3), MessageId(5)]);
    let acked: Vec<MessageId> = [0, 1, 2, 4, 6, 7, 8, 9].into_iter().map(MessageId).collect();
    assert_eq!(done.acked_by("numbers"), acked);
    // Every input after the panic was executed once, by the new instance,
    // in order; 3 panicked and 5 was refused.
    let emitted: Vec<Vec<Value>> =
        [0, 1, 2, 4, 6, 7, 8, 9].into_iter().map(|n| vec![Value::U64(n)]).collect();
    assert_eq!(done.values("bolt", "default"), emitted);
}

#[test]
fn a_bolt_that_takes_its_batch_whole_gets_runs_of_inputs_in_one_call() {
    let done = Harness::new(&topology("Runs"))
        .plugin::<__SquallPlugin>("b")
        .feed("numbers", numbers(0..500))
        .run_until_complete(Duration::from_secs(20))
        .expect("the feed completes");
    assert_eq!(done.acked_by("numbers"), (0..500).map(MessageId).collect::<Vec<_>>());
    assert!(done.failed_by("numbers").is_empty());
    assert_eq!(done.values("bolt", "default"), numbers(0..500), "each once, in order");
    assert_eq!(SEEN.load(Ordering::SeqCst), 500, "each input was handed over once");
    let longest = LONGEST_RUN.load(Ordering::SeqCst);
    assert!(longest > 1, "the host called execute_batch with runs of inputs (longest: {longest})");
}
