//! Signals as an orchestrator sends them: SIGTERM drains exactly like the
//! first Ctrl-C, a second stop signal exits at once with 130, SIGHUP
//! reloads the file live and the topology keeps running. Also: logs carry no colour codes
//! when stderr is not a terminal, and `inspect | head -1` exits quietly.

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::util::{plugin_path, squall_bin, tail, Output, ReplayLog, SquallCommand, Workspace};

/// A reliable ReplaySpout with more messages than the run emits, into a
/// slow-ish bolt: trees are always in flight.
fn topology(ws: &Workspace, micros: u64) -> std::path::PathBuf {
    ws.write_topology(
        "signals.toml",
        &format!(
            r#"
[topology]
max_spout_pending = 500
shutdown_timeout_secs = 30

[plugins]
testkit = "{{testkit}}"

[spouts.source]
component = "testkit::ReplaySpout"
config = {{ messages = 1000000, log = "{{dir}}/replay.log" }}

[bolts.sink]
component = "testkit::SleepBolt"
config = {{ micros = {micros} }}
inputs = [{{ from = "source" }}]
"#
        ),
    )
}

fn context(out: &Output) -> String {
    format!(
        "status: {}\n--- summary\n{}\n--- stderr (tail)\n{}",
        out.status,
        out.json.as_ref().map_or_else(|| "(none)".into(), |j| j.to_string()),
        tail(&out.stderr, 40)
    )
}

#[test]
fn sigterm_drains_like_the_first_ctrl_c() {
    let ws = Workspace::new("sigterm_drains");
    let path = topology(&ws, 100);
    let mut cmd = SquallCommand::run_until_interrupted(&ws, &path);
    cmd.limit(Duration::from_secs(60));
    let mut child = cmd.spawn();
    child.wait_for_stderr("running", Duration::from_secs(20));
    child.wait_for_stat("source", "acked", |n| n >= 500, Duration::from_secs(30));
    child.terminate();
    let out = child.wait();
    let ctx = context(&out);
    out.assert_code(0);
    assert!(out.stderr.contains("SIGTERM: draining"), "the signal is acknowledged\n{ctx}");
    assert_eq!(out.summary()["outcome"], "completed", "\n{ctx}");
    let drain = &out.summary()["drain"];
    assert_eq!(drain["completed"], true, "\n{ctx}");
    let in_flight = drain["in_flight_at_start"].as_u64().expect("in_flight_at_start");
    assert!(in_flight > 0, "SIGTERM came with trees in flight\n{ctx}");
    let settled: u64 = ["acked", "failed", "timed_out", "failed_at_shutdown"]
        .iter()
        .map(|k| drain[*k].as_u64().expect("an integer"))
        .sum();
    assert_eq!(settled, in_flight, "every tree in flight at the start was settled\n{ctx}");
    // `close` ran last, after every emitted id was acked.
    let log = ReplayLog::read(&ws, "replay.log");
    assert_eq!(log.closes(), [log.events.len() - 1], "close is the last event\n{ctx}");
    assert_eq!(log.acks(), log.emits(), "every emit was acked before close\n{ctx}");
}

/// Starts the slow topology, sends `first`, waits for the drain to begin,
/// sends `second`, and checks the process exited at once with 130.
fn second_signal_exits_at_once(test: &str, first: libc::c_int, second: libc::c_int) {
    let ws = Workspace::new(test);
    // 500 trees in flight at 100 ms each: the drain would take ~50 s.
    let path = topology(&ws, 100_000);
    let mut cmd = SquallCommand::run_until_interrupted(&ws, &path);
    cmd.limit(Duration::from_secs(60));
    let mut child = cmd.spawn();
    child.wait_for_stderr("running", Duration::from_secs(20));
    child.wait_for_stat("sink", "executed", |n| n >= 1, Duration::from_secs(20));
    child.signal(first);
    child.wait_for_stderr(": draining", Duration::from_secs(10));
    child.signal(second);
    let out = child.wait();
    let ctx = context(&out);
    out.assert_code(130);
    assert!(out.stderr.contains("exiting at once"), "\n{ctx}");
    assert!(out.json.is_none(), "the drain was cut short: no summary\n{ctx}");
}

#[test]
fn a_second_sigterm_exits_at_once_with_130() {
    second_signal_exits_at_once("second_sigterm", libc::SIGTERM, libc::SIGTERM);
}

#[test]
fn sigterm_after_ctrl_c_exits_at_once_with_130() {
    second_signal_exits_at_once("sigint_then_sigterm", libc::SIGINT, libc::SIGTERM);
}

#[test]
fn sighup_reloads_an_unchanged_file_and_the_topology_keeps_running() {
    let ws = Workspace::new("sighup");
    let path = topology(&ws, 100);
    let mut cmd = SquallCommand::run_until_interrupted(&ws, &path);
    cmd.limit(Duration::from_secs(60));
    let mut child = cmd.spawn();
    child.wait_for_stderr("running", Duration::from_secs(20));
    let before = child.wait_for_stat("source", "acked", |n| n >= 1, Duration::from_secs(30));
    child.signal(libc::SIGHUP);
    child.wait_for_stderr("reload #1 (SIGHUP) succeeded", Duration::from_secs(10));
    assert!(child.stderr_snapshot().contains("nothing changed"), "the file did not change");
    // Still running: the spout keeps getting acks well after the SIGHUP.
    child.wait_for_stat("source", "acked", |n| n >= before + 2000, Duration::from_secs(30));
    child.interrupt();
    let out = child.wait();
    let ctx = context(&out);
    out.assert_code(0);
    assert_eq!(out.summary()["outcome"], "completed", "\n{ctx}");
    assert_eq!(out.summary()["reloads"]["succeeded"], 1, "\n{ctx}");
    assert_eq!(out.summary()["reloads"]["failed"], 0, "\n{ctx}");
}

#[test]
fn logs_to_a_pipe_carry_no_colour_codes() {
    let ws = Workspace::new("no_colour");
    let path = topology(&ws, 100);
    // NO_COLOR unset: only the pipe decides.
    let mut cmd = SquallCommand::run(&ws, &path, "300ms");
    cmd.env_remove("NO_COLOR");
    let out = cmd.output();
    out.assert_code(0);
    assert!(out.stderr.contains("running"), "a log line was written\n{}", context(&out));
    assert!(!out.stderr.contains('\u{1b}'), "no escape codes in piped logs\n{}", context(&out));
}

#[test]
fn inspect_into_a_closed_pipe_exits_quietly() {
    // `squall inspect x.so | head -1`: stdout closes after the first line.
    let mut child = Command::new(squall_bin())
        .arg("inspect")
        .arg(plugin_path("testkit"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn squall inspect");
    // Close our end of stdout before squall writes: every write fails with EPIPE.
    drop(child.stdout.take());
    let mut stderr = String::new();
    child.stderr.take().expect("stderr").read_to_string(&mut stderr).expect("read stderr");
    let status = child.wait().expect("wait");
    assert!(status.success(), "exit {status}; stderr:\n{stderr}");
    assert!(!stderr.contains("panicked"), "no panic on a closed pipe:\n{stderr}");
    assert!(stderr.is_empty(), "nothing on stderr:\n{stderr}");
}
