//! Backpressure: a slow bolt slows the spout through full queues; nothing is
//! dropped and memory plateaus instead of growing with the backlog.

use std::time::Duration;

use crate::util::{SquallCommand, Workspace};

/// A spout emitting as fast as it can into a bolt that takes 100 µs per
/// tuple — thousands of times slower than the spout — for 6 s; `chain` is
/// the bolt's `chain` key (false: the bolt runs on a thread of its own and
/// the spout meets a full queue; true: it runs on the spout's thread).
fn slow_bolt_topology(ws: &Workspace, chain: bool) -> std::path::PathBuf {
    ws.write_topology(
        "backpressure.toml",
        &r#"
[topology]
acker_executors = 0
receive_buffer_size = 1024

[plugins]
testkit = "{testkit}"

[spouts.fast]
component = "testkit::ConstSpout"
config = { value = "a value that is long enough to be stored on the heap, not inline" }

[bolts.slow]
component = "testkit::SleepBolt"
config = { micros = 100 }
chain = CHAIN
inputs = [{ from = "fast" }]

[bolts.sink]
component = "testkit::NullBolt"
inputs = [{ from = "slow" }]
"#
        .replace("CHAIN", &chain.to_string()),
    )
}

#[test]
fn a_slow_bolt_slows_the_spout_without_dropping_anything_and_memory_plateaus() {
    slow_bolt_run("backpressure", false);
}

/// The same bolt chained to the spout: the spout's thread executes the bolt
/// between its own turns, so the spout is paced without waiting on a full
/// queue, and the same holds: nothing dropped, memory flat.
#[test]
fn a_slow_bolt_chained_to_its_spout_paces_it_without_dropping_anything() {
    slow_bolt_run("backpressure_chained", true);
}

fn slow_bolt_run(test: &str, chain: bool) {
    let ws = Workspace::new(test);
    let topology = slow_bolt_topology(&ws, chain);
    let mut command = SquallCommand::run(&ws, &topology, "6s");
    command.limit(Duration::from_secs(40));
    let running = command.spawn();
    // Sample the resident set every 250 ms while the topology runs.
    let mut samples = Vec::new();
    std::thread::sleep(Duration::from_millis(500));
    for _ in 0..20 {
        if let Some(kib) = running.rss_kib() {
            samples.push(kib);
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    let out = running.wait();
    out.assert_code(0);
    let ctx = out.context();
    assert!(samples.len() >= 10, "too few RSS samples: {samples:?}\n{ctx}");

    // Nothing dropped: everything the spout emitted was executed by the slow
    // bolt (the drain lets the queues empty), and passed on to the sink.
    let emitted = out.stat("fast", "emitted");
    let slow = out.stat("slow", "executed");
    let sink = out.stat("sink", "executed");
    assert!(emitted > 0, "\n{ctx}");
    assert_eq!(slow, emitted, "every emitted tuple was executed by the slow bolt\n{ctx}");
    assert_eq!(sink, slow, "and reached the sink\n{ctx}");
    // The spout was held back: it spent time waiting on backpressure and
    // emitted about as much as the bolt could take (10 k/s for ~6 s), not
    // millions.
    if !chain {
        let bp = out.component("fast")["backpressure_secs"].as_f64().unwrap_or(0.0);
        assert!(bp > 1.0, "\n{ctx}");
    }
    let chained = out.component("slow")["chained_to"].as_str();
    assert_eq!(chained, chain.then_some("fast"), "\n{ctx}");
    assert!(emitted < 200_000, "the spout was not slowed: {emitted} tuples\n{ctx}");

    // Memory plateaus: the second half of the run does not grow beyond the
    // first half's peak by more than a little allocator noise.
    let half = samples.len() / 2;
    let first = *samples[..half].iter().max().expect("samples");
    let second = *samples[half..].iter().max().expect("samples");
    assert!(
        second <= first + first / 10 + 1024,
        "RSS kept growing under backpressure: first half peak {first} KiB, second half peak {second} KiB ({samples:?})\n{ctx}"
    );
}

/// A spout of 1 MB values, each its own copy, into a bolt that takes 20 ms
/// per tuple, with `budget` as `receive_buffer_bytes` (none when empty).
fn big_values_topology(ws: &Workspace, budget: &str) -> std::path::PathBuf {
    ws.write_topology(
        "big.toml",
        &format!(
            r#"
[topology]
shutdown_timeout_secs = 2
{budget}

[plugins]
testkit = "{{testkit}}"

[spouts.big]
component = "testkit::ConstSpout"
config = {{ value = "x", repeat = 1000000, fresh = true }}

# On a thread of its own, so the spout meets the budget (chained, the bolt
# would pace it).
[bolts.slow]
component = "testkit::SleepBolt"
config = {{ micros = 20000 }}
chain = false
inputs = [{{ from = "big" }}]
"#
        ),
    )
}

#[test]
fn a_byte_budget_bounds_memory_under_big_values() {
    // 16 MiB of values may wait in the slow bolt's queue. Without the budget
    // the queue takes 32768 tuples of 1 MB: RSS grew by hundreds of MB a
    // second.
    let ws = Workspace::new("byte_budget");
    let topology = big_values_topology(&ws, "receive_buffer_bytes = 16777216");
    let mut command = SquallCommand::run_until_interrupted(&ws, &topology);
    command.limit(Duration::from_secs(60));
    let mut running = command.spawn();
    running.wait_for_stat("slow", "executed", |n| n >= 20, Duration::from_secs(30));
    // From here on the queue is full: sample the resident set while the
    // bolt executes 100 more tuples (about 2 s).
    let mut peak = 0;
    let executed = running.wait_for_stat("slow", "executed", |_| true, Duration::from_secs(5));
    while running.wait_for_stat("slow", "executed", |_| true, Duration::from_secs(5))
        < executed + 100
    {
        peak = peak.max(running.rss_kib().unwrap_or(0));
        std::thread::sleep(Duration::from_millis(50));
    }
    running.interrupt();
    let out = running.wait();
    let ctx = out.context();
    out.assert_code(0);
    // The budget (16 MiB) plus the batch in the consumer's hands, the
    // producer's pending batch and its copy, the allocator and the host:
    // a stated bound of 128 MiB.
    assert!(peak > 0, "RSS was sampled\n{ctx}");
    assert!(peak < 128 * 1024, "RSS peaked at {peak} KiB with a 16 MiB byte budget\n{ctx}");
    let bp = out.component("big")["backpressure_secs"].as_f64().unwrap_or(0.0);
    assert!(bp > 0.5, "the spout was held back by the byte budget ({bp} s)\n{ctx}");
}
