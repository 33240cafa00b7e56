//! At-least-once delivery, end to end: a reliable `testkit::ReplaySpout`
//! replays what fails and logs every emit, ack and fail; the tests read that
//! log back and hold it against the `--json` summary.
//!
//! - Under chaos (explicit fails, dropped tuples that time out, panicking
//!   bolts) every one of 100 000 messages is acked exactly once, and only
//!   failed messages are replayed.
//! - With `acker_executors = 0` every tuple is acked as soon as it is emitted.
//! - A bolt that never acks makes every tree time out, and the spout replays.

use std::time::Duration;

use serde_json::Value;

use crate::util::{tail, IdTally, Output, ReplayEvent, ReplayLog, SquallCommand, Workspace};

/// The spout component's failures of every kind, summed from the summary.
fn spout_failed(out: &Output, spout: &str) -> u64 {
    ["failed_explicit", "failed_timeout", "failed_panic", "failed_shutdown"]
        .iter()
        .map(|field| out.stat(spout, field))
        .sum()
}

/// Starts `topology`, waits (at most `within`) for the ReplaySpout's done
/// file `<ws>/done`, then sends SIGINT and waits for the graceful exit.
/// Returns the output and the time from start to the done file.
fn run_until_done(ws: &Workspace, topology: &str, within: Duration) -> (Output, Duration) {
    let topology = ws.write_topology("topology.toml", topology);
    let mut cmd = SquallCommand::run_until_interrupted(ws, &topology);
    // The watchdog: the wait for the done file, plus a drain.
    cmd.limit(within + Duration::from_secs(30));
    let mut child = cmd.spawn();
    child.wait_for_file(&ws.path("done"), within);
    let done_after = child.elapsed();
    child.interrupt();
    (child.wait(), done_after)
}

/// Checks that the log ends with exactly one `close`, as its last line.
#[track_caller]
fn assert_closed_once_at_the_end(log: &ReplayLog, ctx: &str) {
    let closes = log.closes();
    assert_eq!(
        closes,
        [log.events.len() - 1],
        "the log must end with exactly one `close` line (at 0-based index {})\n{ctx}",
        log.events.len() - 1
    );
}

/// Tuples the chaos test pushes through: the issue asks for 100 000.
const CHAOS_MESSAGES: u64 = 100_000;

#[test]
fn under_chaos_every_message_is_acked_exactly_once_and_only_failed_ones_are_replayed() {
    chaos("acking_chaos", 2, "shuffle", [None, None, None]);
}

/// The chaos run with every task on one thread: source, chaos, flaky and
/// sink chained (one task each), so fails, timeouts and the chaos bolt's
/// panics and rebuilds all happen inside a chain.
#[test]
fn under_chaos_in_one_chain_every_message_is_acked_exactly_once() {
    chaos(
        "acking_chaos_chained",
        1,
        "local_or_shuffle",
        [Some("source"), Some("chaos"), Some("flaky")],
    );
}

/// Pushes [`CHAOS_MESSAGES`] through source → chaos → flaky → sink, the
/// two chaos bolts at `parallelism` with `grouping` between them all, and
/// checks the ReplaySpout's log: every message acked exactly once, only
/// failed ones replayed. `chained` is what chaos, flaky and sink run
/// chained to, as the summary says.
fn chaos(test: &str, parallelism: u32, grouping: &str, chained: [Option<&str>; 3]) {
    let ws = Workspace::new(test);
    let toml = format!(
        r#"
[topology]
# Dropped tuples time out after between 1 and 2 s.
message_timeout_secs = 1
max_spout_pending = 2000
acker_executors = 2
# About 100 panics are expected; none may stop the topology.
max_restarts = 1000
restart_window_secs = 60

[plugins]
testkit = "{{testkit}}"

[spouts.source]
component = "testkit::ReplaySpout"
config = {{ messages = {CHAOS_MESSAGES}, log = "{{dir}}/replay.log", done_file = "{{dir}}/done" }}

[bolts.chaos]
component = "testkit::ChaosBolt"
parallelism = {parallelism}
config = {{ fail_rate = 0.01, drop_rate = 0.005, panic_rate = 0.001, seed = 2024 }}
inputs = [{{ from = "source", grouping = "{grouping}" }}]

[bolts.flaky]
component = "testkit::ChaosBolt"
parallelism = {parallelism}
config = {{ fail_rate = 0.01, seed = 4048 }}
inputs = [{{ from = "chaos", grouping = "{grouping}" }}]

[bolts.sink]
component = "testkit::NullBolt"
inputs = [{{ from = "flaky", grouping = "{grouping}" }}]
"#
    );
    let (out, done_after) = run_until_done(&ws, &toml, Duration::from_secs(180));
    for (bolt, chained) in ["chaos", "flaky", "sink"].into_iter().zip(chained) {
        let to = out.component(bolt)["chained_to"].as_str();
        assert_eq!(to, chained, "{bolt} chained to\n{}", out.context());
    }
    eprintln!(
        "chaos: {CHAOS_MESSAGES} messages all acked {done_after:.2?} after the start; \
         the process exited after {:.2?} (summary: elapsed_secs {}, drain {})",
        out.elapsed,
        out.json.as_ref().map_or(Value::Null, |j| j["elapsed_secs"].clone()),
        out.json.as_ref().map_or(Value::Null, |j| j["drain"].clone()),
    );
    let ctx = format!(
        "command: {}\nstatus: {} after {:.2?}\n--- summary\n{}\n--- stderr (tail)\n{}",
        out.command,
        out.status,
        out.elapsed,
        out.json.as_ref().map_or_else(|| "(none)".into(), |j| j.to_string()),
        tail(&out.stderr, 60)
    );
    out.assert_code(0);
    assert_eq!(out.summary()["outcome"], "completed", "\n{ctx}");

    // The log: every id 0..N acked exactly once, none missing, none foreign.
    let log = ReplayLog::read(&ws, "replay.log");
    assert_closed_once_at_the_end(&log, &ctx);
    let tally = log.tally();
    if let Some((&id, _)) = tally.range(CHAOS_MESSAGES..).next() {
        panic!("the log names id {id}, beyond 0..{CHAOS_MESSAGES}:\n{}\n{ctx}", log.history(id));
    }
    let missing: Vec<u64> =
        (0..CHAOS_MESSAGES).filter(|id| tally.get(id).is_none_or(|t| t.acks == 0)).collect();
    assert!(
        missing.is_empty(),
        "{} ids were never acked, e.g. {:?}; history of the first:\n{}\n{ctx}",
        missing.len(),
        &missing[..missing.len().min(10)],
        log.history(missing[0])
    );
    let twice: Vec<(u64, IdTally)> =
        tally.iter().filter(|(_, t)| t.acks > 1).map(|(&id, &t)| (id, t)).collect();
    assert!(
        twice.is_empty(),
        "{} ids were acked more than once, e.g. {:?}; history of the first:\n{}\n{ctx}",
        twice.len(),
        &twice[..twice.len().min(5)],
        log.history(twice[0].0)
    );
    // Replays come only after fails: the k-th emit of an id needs k - 1 fails before it.
    if let Some((id, line)) = log.replay_without_fail() {
        panic!(
            "line {line}: id {id} was emitted again without a `fail` since its previous \
             emit:\n{}\n{ctx}",
            log.history(id)
        );
    }
    // Once acked, an id is done: its ack is its last event.
    let after_ack: Vec<u64> = tally
        .iter()
        .filter(|(_, t)| !matches!(t.last, Some(ReplayEvent::Ack(_))))
        .map(|(&id, _)| id)
        .collect();
    assert!(
        after_ack.is_empty(),
        "{} ids have events after their ack, e.g. {:?}; history of the first:\n{}\n{ctx}",
        after_ack.len(),
        &after_ack[..after_ack.len().min(10)],
        log.history(after_ack[0])
    );

    // The log agrees with the summary.
    let (acks, fails, emits) = (log.acks(), log.fails(), log.emits());
    assert_eq!(acks, CHAOS_MESSAGES, "one ack line per message\n{ctx}");
    assert_eq!(out.stat("source", "acked"), acks, "`ack` lines vs the spout's acked\n{ctx}");
    let failed = spout_failed(&out, "source");
    assert_eq!(failed, fails, "`fail` lines vs the spout's failures of every kind\n{ctx}");
    assert_eq!(out.stat("source", "failed"), failed, "`failed` is the sum of its kinds\n{ctx}");
    assert_eq!(emits, CHAOS_MESSAGES + fails, "each fail was replayed exactly once\n{ctx}");
    assert_eq!(out.stat("source", "emitted"), emits, "`emit` lines vs the spout's emitted\n{ctx}");

    // Failures of every kind happened, and nothing was left at shutdown.
    assert!(out.stat("source", "failed_explicit") > 0, "explicit fails reach the spout\n{ctx}");
    assert!(out.stat("source", "failed_timeout") > 0, "dropped tuples time out\n{ctx}");
    assert!(
        out.stat("chaos", "failed_panic") > 0 || out.stat("chaos", "restarts") > 0,
        "the chaos bolt panicked and was rebuilt\n{ctx}"
    );
    assert_eq!(out.stat("source", "failed_shutdown"), 0, "all was acked before Ctrl-C\n{ctx}");
    assert_eq!(out.stat("source", "pending"), 0, "\n{ctx}");
    assert_eq!(out.summary()["drain"]["completed"], true, "\n{ctx}");
}

#[test]
fn without_ackers_every_spout_tuple_is_acked_as_soon_as_it_is_emitted() {
    const MESSAGES: u64 = 1000;
    let ws = Workspace::new("acking_no_ackers");
    let toml = format!(
        r#"
[topology]
acker_executors = 0

[plugins]
testkit = "{{testkit}}"

[spouts.source]
component = "testkit::ReplaySpout"
config = {{ messages = {MESSAGES}, log = "{{dir}}/replay.log", done_file = "{{dir}}/done" }}

[bolts.pass]
component = "testkit::IdBolt"
inputs = [{{ from = "source" }}]

[bolts.sink]
component = "testkit::NullBolt"
inputs = [{{ from = "pass" }}]
"#
    );
    let (out, _) = run_until_done(&ws, &toml, Duration::from_secs(30));
    let ctx = out.context();
    out.assert_code(0);
    assert_eq!(out.summary()["outcome"], "completed", "\n{ctx}");
    assert_eq!(out.stat("source", "acked"), MESSAGES, "\n{ctx}");
    assert_eq!(spout_failed(&out, "source"), 0, "nothing can fail untracked\n{ctx}");
    assert_eq!(out.stat("source", "emitted"), MESSAGES, "nothing is replayed\n{ctx}");
    assert_eq!(out.stat("source", "pending"), 0, "\n{ctx}");
    assert_eq!(out.stat("sink", "executed"), MESSAGES, "every tuple still flows\n{ctx}");
    assert!(
        out.component("source")["complete_latency_us"].is_null(),
        "no tree is tracked, so no complete latency is measured\n{ctx}"
    );

    // The host acks right after the `next_tuple` that emitted (see
    // `SpoutTracker::ack_now`): ReplaySpout emits one id per call, so the log
    // is `emit 0, ack 0, emit 1, ack 1, ...`, then `close`.
    let log = ReplayLog::read(&ws, "replay.log");
    let expected: Vec<ReplayEvent> = (0..MESSAGES)
        .flat_map(|id| [ReplayEvent::Emit(id), ReplayEvent::Ack(id)])
        .chain([ReplayEvent::Close])
        .collect();
    if let Some(i) =
        (0..expected.len().max(log.events.len())).find(|&i| log.events.get(i) != expected.get(i))
    {
        panic!(
            "the log differs from emit/ack pairs at line {}: found {:?}, expected {:?}\n\
             (the log has {} lines, {} expected)\n{ctx}",
            i + 1,
            log.events.get(i),
            expected.get(i),
            log.events.len(),
            expected.len()
        );
    }
}

#[test]
fn a_bolt_that_never_acks_makes_every_tree_time_out_and_the_spout_replays() {
    const MESSAGES: u64 = 200;
    let ws = Workspace::new("acking_timeout");
    let topology = ws.write_topology(
        "timeout.toml",
        &format!(
            r#"
[topology]
message_timeout_secs = 1

[plugins]
testkit = "{{testkit}}"

[spouts.source]
component = "testkit::ReplaySpout"
config = {{ messages = {MESSAGES}, log = "{{dir}}/replay.log" }}

[bolts.blackhole]
component = "testkit::ChaosBolt"
config = {{ drop_rate = 1.0 }}
inputs = [{{ from = "source" }}]
"#
        ),
    );
    // A tree times out after between 1 and 2 s: 4.5 s see every id fail at
    // least once and be replayed. The timeout ticks come every whole second,
    // so the drain begins half-way between two: every id is in flight then
    // (replayed at the 4 s tick), and times out during the drain.
    let out = SquallCommand::run(&ws, &topology, "4500ms").output();
    let ctx = format!(
        "command: {}\nstatus: {} after {:.2?}\n--- summary\n{}\n--- stderr (tail)\n{}",
        out.command,
        out.status,
        out.elapsed,
        out.json.as_ref().map_or_else(|| "(none)".into(), |j| j.to_string()),
        tail(&out.stderr, 60)
    );
    out.assert_code(0);
    assert_eq!(out.summary()["outcome"], "completed", "\n{ctx}");

    assert_eq!(out.stat("source", "acked"), 0, "no tree can complete\n{ctx}");
    assert!(out.stat("source", "failed_timeout") > 0, "\n{ctx}");
    assert_eq!(out.stat("source", "failed_explicit"), 0, "nothing fails explicitly\n{ctx}");
    assert_eq!(out.stat("source", "failed_panic"), 0, "\n{ctx}");
    assert_eq!(out.stat("blackhole", "acked"), 0, "\n{ctx}");
    // Deactivated spouts emit no more, so the drain ends when the pending
    // trees have timed out: within 2 s, long before shutdown_timeout_secs.
    let drain = &out.summary()["drain"];
    assert_eq!(drain["completed"], true, "the drain waits out the timeouts\n{ctx}");
    assert_eq!(out.stat("source", "failed_shutdown"), 0, "\n{ctx}");
    assert_eq!(out.stat("source", "pending"), 0, "\n{ctx}");
    assert!(
        drain["in_flight_at_start"].as_u64().is_some_and(|n| n > 0),
        "trees were in flight when the drain began\n{ctx}"
    );
    assert!(
        drain["timed_out"].as_u64().is_some_and(|n| n > 0),
        "the trees in flight at the drain time out during it\n{ctx}"
    );

    let log = ReplayLog::read(&ws, "replay.log");
    assert_closed_once_at_the_end(&log, &ctx);
    assert_eq!(log.acks(), 0, "\n{ctx}");
    assert_eq!(log.fails(), spout_failed(&out, "source"), "`fail` lines vs the summary\n{ctx}");
    assert_eq!(log.emits(), out.stat("source", "emitted"), "`emit` lines vs the summary\n{ctx}");
    assert!(
        log.emits() > MESSAGES,
        "timed-out ids are replayed: {} emits for {MESSAGES} messages\n{ctx}",
        log.emits()
    );
    if let Some((id, line)) = log.replay_without_fail() {
        panic!("line {line}: id {id} was replayed without a fail:\n{}\n{ctx}", log.history(id));
    }
    let tally = log.tally();
    let ids: Vec<u64> = tally.keys().copied().collect();
    assert_eq!(ids, (0..MESSAGES).collect::<Vec<_>>(), "every id was emitted\n{ctx}");
    // Every tree ended in a timeout before `close`: as many fails as emits.
    if let Some((&id, _)) = tally.iter().find(|(_, t)| t.fails != t.emits) {
        panic!("id {id} has not failed once per emit:\n{}\n{ctx}", log.history(id));
    }
}
