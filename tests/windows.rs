//! Windowed bolts end to end: a reliable `testkit::ReplaySpout` feeds a
//! `testkit::WindowSizeBolt` (one `(tuples, new, expired, first)` tuple per
//! window), recorded by `testkit::RecordBolt`. Every message id must be
//! acked exactly once: a tuple is acked when it leaves its last window.

use std::time::Duration;

use crate::util::{tail, ReplayLog, SquallCommand, Workspace};

/// Runs `topology` until the spout's done file appears, then interrupts it;
/// checks the exit and that every id `0..messages` was acked exactly once.
fn run_all_acked(ws: &Workspace, topology: &str, messages: u64) {
    let topology = ws.write_topology("topology.toml", topology);
    let mut cmd = SquallCommand::run_until_interrupted(ws, &topology);
    cmd.limit(Duration::from_secs(90));
    let mut child = cmd.spawn();
    child.wait_for_file(&ws.path("done"), Duration::from_secs(60));
    child.interrupt();
    let out = child.wait();
    let ctx = format!("status: {}\n--- stderr\n{}", out.status, tail(&out.stderr, 40));
    out.assert_code(0);
    let tally = ReplayLog::read(ws, "replay.log").tally();
    assert_eq!(tally.len() as u64, messages, "ids in the log\n{ctx}");
    for id in 0..messages {
        let acks = tally.get(&id).map_or(0, |t| t.acks);
        assert_eq!(acks, 1, "id {id} acked {acks} times\n{ctx}");
    }
}

/// The `key <key> <count>` lines of the RecordBolt's file for task `task`.
fn recorded(ws: &Workspace, task: u32) -> Vec<(String, u64)> {
    ws.read(format!("record.{task}"))
        .lines()
        .filter_map(|l| l.strip_prefix("key "))
        .filter_map(|l| l.rsplit_once(' '))
        .map(|(k, n)| (k.to_string(), n.parse().expect("a count")))
        .collect()
}

fn topology(messages: u64, window: &str) -> String {
    format!(
        r#"
[topology]
message_timeout_secs = 30
max_spout_pending = 500
acker_executors = 1

[plugins]
testkit = "{{testkit}}"

[spouts.source]
component = "testkit::ReplaySpout"
config = {{ messages = {messages}, log = "{{dir}}/replay.log", done_file = "{{dir}}/done" }}

[bolts.window]
component = "testkit::WindowSizeBolt"
{window}
inputs = [{{ from = "source", grouping = "global" }}]

[bolts.record]
component = "testkit::RecordBolt"
config = {{ out = "{{dir}}/record" }}
inputs = [{{ from = "window" }}]
"#
    )
}

#[test]
fn count_tumbling_windows_ack_every_message_once_and_hold_length_count_tuples() {
    let ws = Workspace::new("windows_count");
    run_all_acked(&ws, &topology(1000, "window = { length_count = 100 }"), 1000);
    // Tasks: source 0, window 1, record 2. Ten full windows, nothing else.
    assert_eq!(recorded(&ws, 2), vec![("100".to_string(), 10)]);
}

#[test]
fn time_sliding_windows_ack_every_message_once() {
    let ws = Workspace::new("windows_time");
    let window = r#"window = { length = "2s", slide = "500ms" }"#;
    run_all_acked(&ws, &topology(2000, window), 2000);
    // Every tuple is in exactly length / slide = 4 windows (all of them
    // fired: the last tuple was acked, so its last window ran).
    let held: u64 = recorded(&ws, 2).iter().map(|(k, n)| k.parse::<u64>().unwrap() * n).sum();
    assert_eq!(held, 4 * 2000);
}

#[test]
fn event_time_windows_send_late_tuples_on_the_late_stream_and_ack_them() {
    let ws = Workspace::new("windows_late");
    // Timestamps (ms): 500 arrives after the watermark reached 3000, 200
    // after it reached 10000: both are late. 20000 never leaves its window.
    let toml = r#"
[topology]
message_timeout_secs = 5
acker_executors = 1

[plugins]
testkit = "{testkit}"

[spouts.source]
component = "testkit::ListSpout"
config = { values = [1000, 2000, 3000, 500, 4000, 10000, 200, 20000], out = "{dir}/acks" }

[bolts.window]
component = "testkit::WindowSizeBolt"
window = { length = "1s" }
timestamp_field = "value"
lag = "0s"
inputs = [{ from = "source", grouping = "global" }]

[bolts.record]
component = "testkit::RecordBolt"
config = { out = "{dir}/record" }
inputs = [{ from = "window" }]

[bolts.late]
component = "testkit::RecordBolt"
config = { out = "{dir}/late" }
inputs = [{ from = "window", stream = "late" }]
"#;
    let topology = ws.write_topology("topology.toml", toml);
    let out = SquallCommand::run(&ws, &topology, "3s").output();
    let ctx = format!("status: {}\n--- stderr\n{}", out.status, tail(&out.stderr, 40));
    out.assert_code(0);
    let late: Vec<(String, u64)> = ws
        .read("late.3")
        .lines()
        .filter_map(|l| l.strip_prefix("key "))
        .filter_map(|l| l.rsplit_once(' '))
        .map(|(k, n)| (k.to_string(), n.parse().unwrap()))
        .collect();
    assert_eq!(late, vec![("200".to_string(), 1), ("500".to_string(), 1)], "{ctx}");
    // Five windows with one tuple ([1000, 2000) ... [10000, 11000)), two
    // with only the previous window's expired tuple; then the drain's
    // flush: [20000, 21000), whose watermark never came, and the window
    // with only its tuple expired.
    assert_eq!(recorded(&ws, 2), vec![("0".to_string(), 3), ("1".to_string(), 6)], "{ctx}");
    // Ids 0..=7 acked exactly once (3 and 6 are the late ones; 7, 20000,
    // at the drain's flush).
    let acks = ws.read("acks");
    for id in 0..=7 {
        let n = acks.lines().filter(|l| *l == format!("acked {id}")).count();
        assert_eq!(n, 1, "id {id}:\n{acks}\n{ctx}");
    }
}

/// A graceful stop flushes the windows (issue 25, item 3): a count window's
/// trailing tuples, and a time window that would stay open a minute, get
/// their windows, then their acks, and the drain ends at once instead of
/// waiting out `shutdown_timeout_secs` and failing them at shutdown.
#[test]
fn a_graceful_stop_flushes_the_windows_and_acks_their_trailing_tuples() {
    let ws = Workspace::new("windows_drain_flush");
    let toml = r#"
[topology]
shutdown_timeout_secs = 30
message_timeout_secs = 300

[plugins]
testkit = "{testkit}"

[spouts.source]
component = "testkit::ListSpout"
config = { values = [1, 2, 3, 4, 5], out = "{dir}/acks" }

[bolts.count]
component = "testkit::WindowSizeBolt"
window = { length_count = 3 }
inputs = [{ from = "source" }]

[bolts.time]
component = "testkit::WindowSizeBolt"
window = { length = "60s" }
inputs = [{ from = "source" }]

[bolts.count_record]
component = "testkit::RecordBolt"
config = { out = "{dir}/count" }
inputs = [{ from = "count" }]

[bolts.time_record]
component = "testkit::RecordBolt"
config = { out = "{dir}/time" }
inputs = [{ from = "time" }]
"#;
    let topology = ws.write_topology("topology.toml", toml);
    let started = std::time::Instant::now();
    let out = SquallCommand::run(&ws, &topology, "2s").output();
    let elapsed = started.elapsed();
    let ctx = format!("status: {}\n--- stderr\n{}", out.status, tail(&out.stderr, 40));
    out.assert_code(0);
    // A bound on a hang (the drain may take 30 s), not a timing.
    assert!(elapsed < Duration::from_secs(15), "took {elapsed:?}\n{ctx}");
    let acks = ws.read("acks");
    for id in 0..5 {
        let n = acks.lines().filter(|l| *l == format!("acked {id}")).count();
        assert_eq!(n, 1, "id {id}:\n{acks}\n{ctx}");
    }
    assert!(!acks.contains("failed"), "{acks}\n{ctx}");
    // Windows by size: the count window's [1, 2, 3] and its flushed [4, 5];
    // the time window's five tuples, then the window with only them expired.
    let keyed = |file: &str| {
        let mut v: Vec<(String, u64)> = ws
            .read(file)
            .lines()
            .filter_map(|l| l.strip_prefix("key "))
            .filter_map(|l| l.rsplit_once(' '))
            .map(|(k, n)| (k.to_string(), n.parse().expect("a count")))
            .collect();
        v.sort();
        v
    };
    assert_eq!(keyed("count.3"), vec![("2".to_string(), 1), ("3".to_string(), 1)], "{ctx}");
    assert_eq!(keyed("time.4"), vec![("0".to_string(), 1), ("5".to_string(), 1)], "{ctx}");
}
