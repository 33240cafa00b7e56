//! The graceful drain: Ctrl-C in the middle of a run loses nothing. Spouts
//! stop emitting, every tree in flight is acked or failed before the spout's
//! `close`, and the `drain` section of the summary says so, whether the trees
//! are acked, fail or time out.

use std::time::Duration;

use crate::util::{tail, Output, ReplayEvent, ReplayLog, SquallCommand, Workspace};

/// More messages than the run can emit before Ctrl-C: the spout is still
/// emitting when the drain begins.
const MESSAGES: u64 = 1_000_000;

/// The cap on trees in flight; the drain has at most this many to finish.
const MAX_PENDING: u64 = 5000;

/// The command, status, summary and the tail of stderr, for assertions.
fn context(out: &Output) -> String {
    format!(
        "command: {}\nstatus: {} after {:.2?}\n--- summary\n{}\n--- stderr (tail)\n{}",
        out.command,
        out.status,
        out.elapsed,
        out.json.as_ref().map_or_else(|| "(none)".into(), |j| j.to_string()),
        tail(&out.stderr, 60)
    )
}

/// What the drain tests expect of the log beyond "settled before `close`".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    /// A healthy topology: every tree is acked, none fails.
    AllAcked,
    /// Bolts fail and drop tuples: fails (explicit and by timeout) happen,
    /// during the run and the drain.
    SomeFail,
}

/// A reliable ReplaySpout (`MESSAGES`, still emitting at Ctrl-C) into
/// `middle` (a `[bolts.middle]` body without `inputs`) into a NullBolt, with
/// `topology` added to `[topology]`.
fn drain_topology(topology: &str, middle: &str) -> String {
    format!(
        r#"
[topology]
max_spout_pending = {MAX_PENDING}
shutdown_timeout_secs = 20
{topology}

[plugins]
testkit = "{{testkit}}"

[spouts.source]
component = "testkit::ReplaySpout"
config = {{ messages = {MESSAGES}, log = "{{dir}}/replay.log" }}

[bolts.middle]
{middle}
inputs = [{{ from = "source" }}]

[bolts.sink]
component = "testkit::NullBolt"
inputs = [{{ from = "middle" }}]
"#
    )
}

/// Runs `toml`, sends SIGINT once the spout has had trees settled (and, for
/// `SomeFail`, failed: timeouts included), and checks that the drain settled
/// every emitted message before the spout's `close`.
fn interrupt_mid_run_and_check(test: &str, toml: &str, expect: Expect) {
    let ws = Workspace::new(test);
    let topology = ws.write_topology("drain.toml", toml);
    let mut cmd = SquallCommand::run_until_interrupted(&ws, &topology);
    cmd.limit(Duration::from_secs(60));
    let mut child = cmd.spawn();
    child.wait_for_stderr("running", Duration::from_secs(20));
    let within = Duration::from_secs(30);
    child.wait_for_stat("source", "acked", |n| n >= 1000, within);
    if expect == Expect::SomeFail {
        // Explicit fails come at once; timeouts after 1-2 s.
        child.wait_for_stat("source", "failed", |n| n >= 200, within);
    }
    child.interrupt();
    let out = child.wait();
    let ctx = context(&out);
    out.assert_code(0);
    assert!(out.stderr.contains("interrupt"), "the interrupt is acknowledged\n{ctx}");
    assert_eq!(out.summary()["outcome"], "completed", "\n{ctx}");

    // The summary: the drain started with trees in flight and finished them all.
    let drain = &out.summary()["drain"];
    let in_flight = drain["in_flight_at_start"].as_u64().unwrap_or_else(|| {
        panic!("drain.in_flight_at_start is not an integer\n{ctx}");
    });
    assert!(in_flight > 0, "Ctrl-C came mid-run, with trees in flight\n{ctx}");
    assert!(in_flight <= MAX_PENDING, "more in flight than max_spout_pending\n{ctx}");
    assert_eq!(drain["completed"], true, "the drain finished in time\n{ctx}");
    let settled: u64 = ["acked", "failed", "timed_out", "failed_at_shutdown"]
        .iter()
        .map(|k| drain[*k].as_u64().expect("an integer"))
        .sum();
    assert_eq!(settled, in_flight, "the drain's figures add up exactly\n{ctx}");
    assert_eq!(drain["failed_at_shutdown"], 0, "\n{ctx}");
    assert_eq!(out.stat("source", "failed_shutdown"), 0, "\n{ctx}");
    assert_eq!(out.stat("source", "pending"), 0, "nothing is pending at the end\n{ctx}");

    // The log: every emitted id was acked or failed, once per emit, before `close`.
    let log = ReplayLog::read(&ws, "replay.log");
    let closes = log.closes();
    assert_eq!(
        closes,
        [log.events.len() - 1],
        "the log must end with exactly one `close` line; events after it were lost to the \
         spout\n{ctx}"
    );
    let emits = log.emits();
    assert!(emits > 0, "the spout emitted before Ctrl-C\n{ctx}");
    assert!(emits < MESSAGES, "the spout was still emitting when Ctrl-C came ({emits})\n{ctx}");
    let tally = log.tally();
    let unsettled: Vec<u64> = tally
        .iter()
        .filter(|(_, t)| {
            t.acks + t.fails != t.emits
                || !matches!(t.last, Some(ReplayEvent::Ack(_) | ReplayEvent::Fail(_)))
        })
        .map(|(&id, _)| id)
        .collect();
    assert!(
        unsettled.is_empty(),
        "{} ids do not end settled before `close` (one ack or fail per emit, the last \
         event an ack or fail), e.g. {:?}; history of the first:\n{}\n{ctx}",
        unsettled.len(),
        &unsettled[..unsettled.len().min(10)],
        log.history(unsettled[0])
    );
    if let Some((id, line)) = log.replay_without_fail() {
        panic!("line {line}: id {id} was replayed without a fail:\n{}\n{ctx}", log.history(id));
    }
    assert_eq!(log.acks(), out.stat("source", "acked"), "`ack` lines vs the summary\n{ctx}");
    assert_eq!(log.fails(), out.stat("source", "failed"), "`fail` lines vs the summary\n{ctx}");
    assert_eq!(emits, out.stat("source", "emitted"), "`emit` lines vs the summary\n{ctx}");
    match expect {
        Expect::AllAcked => {
            assert_eq!(log.fails(), 0, "nothing fails in this topology\n{ctx}");
            assert_eq!(
                out.stat("sink", "executed"),
                emits,
                "every emitted tuple reached the sink\n{ctx}"
            );
        }
        Expect::SomeFail => {
            assert!(out.stat("source", "failed_explicit") > 0, "\n{ctx}");
            assert!(out.stat("source", "failed_timeout") > 0, "\n{ctx}");
            // Trees dropped before Ctrl-C were still pending when it came.
            assert!(
                drain["timed_out"].as_u64().is_some_and(|n| n > 0),
                "dropped trees time out during the drain\n{ctx}"
            );
        }
    }
}

#[test]
fn ctrl_c_in_the_middle_of_a_run_acks_every_emitted_message_before_close() {
    interrupt_mid_run_and_check(
        "drain_mid_run",
        &drain_topology(
            "",
            r#"component = "testkit::SleepBolt"
parallelism = 2
config = { micros = 200 }"#,
        ),
        Expect::AllAcked,
    );
}

#[test]
fn ctrl_c_while_trees_fail_and_time_out_settles_every_emitted_message_before_close() {
    // Dropped tuples time out after between 1 and 2 s, so trees dropped
    // just before Ctrl-C time out during the drain.
    interrupt_mid_run_and_check(
        "drain_with_failures",
        &drain_topology(
            "message_timeout_secs = 1",
            r#"component = "testkit::ChaosBolt"
parallelism = 2
config = { fail_rate = 0.02, drop_rate = 0.01, seed = 99 }"#,
        ),
        Expect::SomeFail,
    );
}

#[test]
fn long_configured_sleeps_end_when_the_drain_begins() {
    // An idle spout sleeps `level3_sleep_millis` per turn and an idle bolt
    // parks `park_micros`: 30 s each. The drain must not wait them out (nor
    // blame plugin code for them).
    let ws = Workspace::new("long_sleeps");
    let topology = ws.write_topology(
        "sleepy.toml",
        r#"
[topology]
shutdown_timeout_secs = 10

[plugins]
testkit = "{testkit}"

[wait.spout]
level3_sleep_millis = 30000

[wait.bolt]
strategy = "park"
park_micros = 30000000

[spouts.source]
component = "testkit::EmptySpout"

[bolts.sink]
component = "testkit::NullBolt"
inputs = [{ from = "source" }]
"#,
    );
    let out = SquallCommand::run(&ws, &topology, "1s").output();
    let ctx = context(&out);
    out.assert_code(0);
    assert_eq!(out.summary()["outcome"], "completed", "\n{ctx}");
    assert_eq!(out.summary()["drain"]["completed"], true, "the drain finished\n{ctx}");
    assert_eq!(out.summary()["drain"]["stuck_threads"], serde_json::json!([]), "\n{ctx}");
}

#[test]
fn a_slow_bolt_with_a_backlog_keeps_publishing_and_is_named_when_the_drain_times_out() {
    // 1 ms per tuple behind a full queue: the bolt never empties it.
    let ws = Workspace::new("slow_backlog");
    let topology = ws.write_topology(
        "slow.toml",
        r#"
[topology]
shutdown_timeout_secs = 1

[plugins]
testkit = "{testkit}"

[spouts.source]
component = "testkit::ConstSpout"

# On a thread of its own: chained to the spout, the bolt would pace it and
# no backlog would build.
[bolts.slow]
component = "testkit::SleepBolt"
config = { micros = 1000 }
chain = false
inputs = [{ from = "source" }]
"#,
    );
    let mut cmd = SquallCommand::run_until_interrupted(&ws, &topology);
    cmd.limit(Duration::from_secs(60));
    let mut child = cmd.spawn();
    child.wait_for_stderr("running", Duration::from_secs(20));
    // The stats show the bolt's progress while the backlog lasts.
    child.wait_for_stat("slow", "executed", |n| n >= 100, Duration::from_secs(20));
    child.interrupt();
    let out = child.wait();
    let ctx = context(&out);
    // The drain times out with the backlog still queued: that is no failure
    // of plugin code, and the warning says who holds how much.
    out.assert_code(0);
    assert_eq!(out.summary()["drain"]["completed"], false, "\n{ctx}");
    assert_eq!(out.summary()["drain"]["stuck_threads"], serde_json::json!([]), "\n{ctx}");
    assert!(!out.stderr.contains("blocked in plugin code"), "nothing is blocked\n{ctx}");
    let warning = out.stderr.lines().find(|l| l.contains("drain did not finish")).unwrap_or("");
    assert!(warning.contains("\"slow\": ") && warning.contains("queued batches"), "\n{ctx}");
    assert!(out.stat("slow", "executed") >= 100, "\n{ctx}");
}

#[test]
fn a_thousand_draining_spouts_wait_for_their_replies_instead_of_burning_the_cores() {
    // 999 reliable spouts, each with one tree in flight, behind one bolt
    // that takes 5 ms a tuple: the drain lasts seconds. A spout whose tree
    // completed has nothing to emit while the run drains; it must wait for
    // replies on its control queue, not nap and wake a thousand times a
    // second: a thousand napping spouts took the cores the drain's bolt
    // needed, and a thousand components took 5-16 s to stop.
    let ws = Workspace::new("thousand_draining_spouts");
    let topology = ws.write_topology(
        "thousand.toml",
        r#"
[topology]
max_spout_pending = 1
shutdown_timeout_secs = 90
# Room for every tree in flight: no spout waits on backpressure.
receive_buffer_size = 2048
# A thousand tasks need about 5 GiB by the estimate (threads as measured).
memory_budget_mib = 6144

[plugins]
testkit = "{testkit}"

[spouts.source]
component = "testkit::ConstSpout"
parallelism = 999
config = { reliable = true }

[bolts.slow]
component = "testkit::SleepBolt"
config = { micros = 5000 }
inputs = [{ from = "source", grouping = "shuffle" }]
"#,
    );
    let mut cmd = SquallCommand::run_until_interrupted(&ws, &topology);
    cmd.limit(Duration::from_secs(150));
    let mut child = cmd.spawn();
    child.wait_for_stderr("running", Duration::from_secs(60));
    // Every spout has run its first turns and holds its tree. "running" is
    // logged once the threads are spawned, not once each has opened: on a
    // loaded machine hundreds of spouts were still starting seconds later
    // (300 a second), and their start-up (each thread's first allocator
    // pages, then a zeroed 2 MiB huge page each) fell in the measured
    // second (1.85 of a core, with 470 of the 999 trees in flight).
    child.wait_for_stats(
        "source",
        &["emitted", "acked"],
        |v| v[0].saturating_sub(v[1]) == 999,
        Duration::from_secs(60),
    );
    child.wait_for_stat("slow", "executed", |n| n >= 200, Duration::from_secs(60));
    child.interrupt();
    // One second inside the drain, after its first second.
    std::thread::sleep(Duration::from_secs(1));
    let start = child.cpu_seconds().expect("the run's CPU time");
    let window = std::time::Instant::now();
    std::thread::sleep(Duration::from_secs(1));
    let cpu = child.cpu_seconds().expect("still draining") - start;
    let share = cpu / window.elapsed().as_secs_f64();
    let out = child.wait();
    let ctx = context(&out);
    out.assert_code(0);
    let drain = &out.summary()["drain"];
    assert_eq!(drain["completed"], true, "every tree settled\n{ctx}");
    assert_eq!(drain["failed"], 0, "\n{ctx}");
    assert_eq!(drain["timed_out"], 0, "\n{ctx}");
    let secs = drain["secs"].as_f64().expect("drain secs");
    assert_eq!(drain["in_flight_at_start"], 999, "every spout held a tree\n{ctx}");
    assert!(secs > 2.2, "the drain ended before the measured second\n{ctx}");
    eprintln!(
        "the drain took {secs:.2} s; in its second second the process used {share:.2} of a core"
    );
    assert!(share < 0.5, "while draining, the process used {share:.2} of a core\n{ctx}");
}
