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
