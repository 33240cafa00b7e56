//! Backpressure: a slow bolt slows the spout through full queues; nothing is
//! dropped and memory plateaus instead of growing with the backlog.

use std::time::Duration;

use crate::util::{SquallCommand, Workspace};

/// A spout emitting as fast as it can into a bolt that takes 100 µs per
/// tuple — thousands of times slower than the spout — for 6 s.
fn slow_bolt_topology(ws: &Workspace) -> std::path::PathBuf {
    ws.write_topology(
        "backpressure.toml",
        r#"
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
inputs = [{ from = "fast" }]

[bolts.sink]
component = "testkit::NullBolt"
inputs = [{ from = "slow" }]
"#,
    )
}

#[test]
fn a_slow_bolt_slows_the_spout_without_dropping_anything_and_memory_plateaus() {
    let ws = Workspace::new("backpressure");
    let topology = slow_bolt_topology(&ws);
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
    assert!(out.component("fast")["backpressure_secs"].as_f64().unwrap_or(0.0) > 1.0, "\n{ctx}");
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
