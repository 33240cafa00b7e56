//! The throttler end to end: a throttled spout or bolt input holds its rate
//! over a `--duration` run (a count check: rate × duration, not a timing
//! assertion on the machine's speed), in both modes, in tuples/s and bytes/s,
//! per spout task and per input edge; and Ctrl-C in the middle of a long
//! throttled wait stops the run at once.

use std::time::Duration;

use crate::util::{tail, Output, SquallCommand, Workspace};

/// How long the counted runs last.
const DURATION: &str = "5s";

/// The rate of the counted runs, in tuples per second.
const RATE: u64 = 2_000;

/// `RATE` × 5 s.
const EXPECTED: u64 = 10_000;

/// The value every spout emits: 10 encoded bytes.
const VALUE: &str = "0123456789";

/// The command, status, summary and the tail of stderr, for assertions.
fn context(out: &Output) -> String {
    format!(
        "command: {}\nstatus: {} after {:.2?}\n--- summary\n{}\n--- stderr (tail)\n{}",
        out.command,
        out.status,
        out.elapsed,
        out.json.as_ref().map_or_else(|| "(none)".into(), |j| j.to_string()),
        tail(&out.stderr, 30)
    )
}

/// A `ConstSpout` "source" (emitting `VALUE`; unreliable unless `topology`
/// is [`RELIABLE`]) into a `NullBolt` "sink". `topology` is the body of
/// `[topology]` (empty: no ackers), `spout` goes into the spout's table,
/// `input` into the sink's input table (after `from`).
fn topology(topology: &str, spout: &str, input: &str) -> String {
    let (topology, reliable) = match topology {
        "" => ("acker_executors = 0", false),
        other => (other, other == RELIABLE),
    };
    format!(
        r#"
[topology]
{topology}

[plugins]
testkit = "{{testkit}}"

[spouts.source]
component = "testkit::ConstSpout"
config = {{ value = "{VALUE}", reliable = {reliable} }}
{spout}

[bolts.sink]
component = "testkit::NullBolt"
inputs = [{{ from = "source"{input} }}]
"#
    )
}

/// Runs `toml` for `DURATION` and checks that it completed.
fn run_for_five_seconds(test: &str, toml: &str) -> Output {
    let ws = Workspace::new(test);
    let path = ws.write_topology("throttle.toml", toml);
    let out = SquallCommand::run(&ws, &path, DURATION).output();
    let ctx = context(&out);
    out.assert_code(0);
    assert_eq!(out.summary()["outcome"], "completed", "\n{ctx}");
    assert_eq!(out.summary()["drain"]["completed"], true, "\n{ctx}");
    out
}

/// Asserts `actual` is `EXPECTED` ± 2 %.
#[track_caller]
fn assert_within_2_percent(what: &str, actual: u64, out: &Output) {
    let (low, high) = (EXPECTED * 98 / 100, EXPECTED * 102 / 100);
    assert!(
        (low..=high).contains(&actual),
        "{what}: {actual}, expected {EXPECTED} ± 2 % ({low}..={high})\n{}",
        context(out)
    );
}

/// The seconds `name` spent waiting in its throttler, summed over its tasks.
fn throttle_secs(out: &Output, name: &str) -> f64 {
    out.component(name)["throttle_secs"].as_f64().unwrap_or_else(|| {
        panic!("{name}.throttle_secs is not a number\n{}", context(out));
    })
}

/// A throttled executor spends the run blocked in its throttler: emitting or
/// executing 10 000 tuples takes milliseconds, so at least 4 s of the 5 s are
/// throttle waits (and the waits block on a condition variable, never spin).
#[track_caller]
fn assert_waited_in_the_throttler(out: &Output, name: &str) {
    let waited = throttle_secs(out, name);
    assert!(waited >= 4.0, "{name} waited {waited:.3} s in its throttler\n{}", context(out));
}

#[test]
fn a_spout_throttled_to_2000_tuples_per_sec_for_5_s_emits_10000_tuples_in_period_mode() {
    // The default mode: HDFS's period throttler, 500 ms periods of 1000 tuples.
    let toml = topology("", &format!("throttle = {{ tuples_per_sec = {RATE} }}"), "");
    let out = run_for_five_seconds("period_spout", &toml);
    assert_within_2_percent("source.emitted", out.stat("source", "emitted"), &out);
    assert_eq!(out.stat("sink", "executed"), out.stat("source", "emitted"), "\n{}", context(&out));
    assert_waited_in_the_throttler(&out, "source");
}

// No end-to-end count test for the smooth mode: at 2000/s it grants one
// tuple per wake-up and makes up late wake-ups at only 4 % over the rate (to
// keep its 10 ms burst bound), so on a VM losing more than ~4 % of its time to
// steal it falls short of ±2 % — a test of the machine, not of squall. Its
// accuracy is covered with a manual clock and late wake-ups by the property
// tests in `host/src/throttle/smooth.rs`, and measured by the
// `throttle_accuracy` bench (docs/throttling.md).

#[test]
fn a_spout_throttled_to_20000_bytes_per_sec_of_10_byte_tuples_emits_10000_tuples_in_5_s() {
    // Bytes are the encoded size of the values: "0123456789" is 10 bytes.
    assert_eq!(VALUE.len(), 10);
    let toml = topology("", &format!("throttle = {{ bytes_per_sec = {} }}", RATE * 10), "");
    let out = run_for_five_seconds("bytes_spout", &toml);
    assert_within_2_percent("source.emitted", out.stat("source", "emitted"), &out);
    assert_waited_in_the_throttler(&out, "source");
}

#[test]
fn a_spout_throttle_is_a_rate_per_task() {
    // Two tasks at 1000 tuples/s each: 2000 tuples/s for the component.
    let toml = topology(
        "",
        &format!("parallelism = 2\nthrottle = {{ tuples_per_sec = {} }}", RATE / 2),
        "",
    );
    let out = run_for_five_seconds("per_task", &toml);
    assert_eq!(out.component("source")["tasks"], 2, "\n{}", context(&out));
    assert_within_2_percent("source.emitted (2 tasks)", out.stat("source", "emitted"), &out);
}

/// A reliable spout with at most 100 trees in flight: the backlog of a
/// throttled input, which the drain executes unthrottled, is at most 100
/// tuples (1 % of the count), while the queue stays large enough that the
/// bolt spends a period's budget without waiting for the spout to refill it.
const RELIABLE: &str = "acker_executors = 1\nmax_spout_pending = 100";

/// A small receive queue (16 tuples) and no ackers: a backlog of a handful of
/// tuples behind a throttled input.
const SMALL_QUEUE: &str = "acker_executors = 0\nreceive_buffer_size = 16";

#[test]
fn a_throttled_bolt_input_executes_2000_tuples_per_sec_while_the_spout_runs_free() {
    // The spout is not throttled; max_spout_pending holds it.
    let toml = topology(RELIABLE, "", &format!(", throttle = {{ tuples_per_sec = {RATE} }}"));
    let out = run_for_five_seconds("period_edge", &toml);
    assert_within_2_percent("sink.executed", out.stat("sink", "executed"), &out);
    assert_eq!(throttle_secs(&out, "source"), 0.0, "the spout has no throttle\n{}", context(&out));
    assert_waited_in_the_throttler(&out, "sink");
}

#[test]
fn an_untracked_throttled_bolt_input_executes_2000_tuples_per_sec() {
    // No ackers: the sink (contract 1.3) takes untracked runs, whose views
    // the executor builds in a loop of its own unless an edge is throttled.
    // Nothing holds the spout, so the drain at the end executes what is
    // queued, unthrottled: a small queue keeps that backlog small. An
    // unthrottled sink would execute millions.
    let toml = topology(SMALL_QUEUE, "", &format!(", throttle = {{ tuples_per_sec = {RATE} }}"));
    let out = run_for_five_seconds("period_edge_untracked", &toml);
    let executed = out.stat("sink", "executed");
    assert!(
        (EXPECTED * 98 / 100..=EXPECTED * 2).contains(&executed),
        "sink.executed: {executed}, expected {EXPECTED} plus the drained backlog\n{}",
        context(&out)
    );
    assert_waited_in_the_throttler(&out, "sink");
}

#[test]
fn a_bytes_throttle_on_a_bolt_input_counts_the_encoded_size_of_the_values() {
    let toml = topology(RELIABLE, "", &format!(", throttle = {{ bytes_per_sec = {} }}", RATE * 10));
    let out = run_for_five_seconds("bytes_edge", &toml);
    assert_within_2_percent("sink.executed", out.stat("sink", "executed"), &out);
    assert_waited_in_the_throttler(&out, "sink");
}

/// 1 tuple/s in 10 s periods: a budget of 10 tuples per period. The first 10
/// emits (or executes) pass at once, and the 10th waits for the next period,
/// about 10 s away.
const LONG_WAIT: &str = "throttle = { tuples_per_sec = 1, period_millis = 10000 }";

/// Runs `toml` until interrupted, sends SIGINT once `waiter`'s `column`
/// reaches its count (so it sits in the long throttled wait), and checks
/// that the run drained and completed.
fn interrupt_a_long_throttled_wait(test: &str, toml: &str, waiter: (&str, &str, u64)) -> Output {
    let ws = Workspace::new(test);
    let path = ws.write_topology("throttle.toml", toml);
    let mut cmd = SquallCommand::run_until_interrupted(&ws, &path);
    cmd.limit(Duration::from_secs(40));
    let mut child = cmd.spawn();
    child.wait_for_stderr("running", Duration::from_secs(20));
    let (component, column, count) = waiter;
    child.wait_for_stat(component, column, |n| n >= count, Duration::from_secs(20));
    child.interrupt();
    let out = child.wait();
    let ctx = context(&out);
    out.assert_code(0);
    assert_eq!(out.summary()["outcome"], "completed", "\n{ctx}");
    assert_eq!(out.summary()["drain"]["completed"], true, "\n{ctx}");
    out
}

#[test]
fn ctrl_c_during_a_10_s_spout_throttle_wait_stops_the_run_at_once() {
    let toml = topology("", LONG_WAIT, "");
    // The spout pays after use: it emits its 10th tuple, then waits.
    let out = interrupt_a_long_throttled_wait("ctrl_c_spout", &toml, ("source", "emitted", 10));
    let ctx = context(&out);
    assert_eq!(out.stat("source", "emitted"), 10, "one period's budget, then the wait\n{ctx}");
    // Uncanceled, the wait would last to the end of the 10 s period.
    assert!(throttle_secs(&out, "source") < 5.0, "the wait was cut short\n{ctx}");
}

#[test]
fn ctrl_c_during_a_10_s_wait_on_a_throttled_bolt_input_stops_the_run_at_once() {
    // The spout fills the small queue; the sink executes 10 tuples and waits.
    // The drain cancels the wait and executes the backlog unthrottled.
    let toml = topology(SMALL_QUEUE, "", &format!(", {LONG_WAIT}"));
    // An edge throttles each tuple before executing it: the 10th waits
    // with 9 executed.
    let out = interrupt_a_long_throttled_wait("ctrl_c_edge", &toml, ("sink", "executed", 9));
    let ctx = context(&out);
    let executed = out.stat("sink", "executed");
    assert!(executed > 10, "the backlog was executed in the drain ({executed})\n{ctx}");
    assert_eq!(executed, out.stat("source", "emitted"), "the drain executed everything\n{ctx}");
    assert!(throttle_secs(&out, "sink") < 5.0, "the wait was cut short\n{ctx}");
}
