//! `squall top ADDR` under tmux: the dashboard of a running topology fills
//! in and its counters move, the window key switches the rate window, a
//! topology that goes away shows as unreachable without ending the
//! dashboard, an endpoint that is not there yet shows "connecting to ADDR",
//! and `q` or Esc ends it with exit 0 and the terminal out of raw mode.
//!
//! Every tmux session is named after this process and the test, and a guard
//! kills it by that name however the test ends.

use std::net::{SocketAddr, TcpListener};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::util::{require_tool, squall_bin, Workspace};

/// A throttled reliable spout into a bolt: counters that move steadily, for
/// as long as the test needs.
const TOPOLOGY: &str = r#"
[topology]
name = "dash"
max_spout_pending = 200

[plugins]
testkit = "{testkit}"

[spouts.source]
component = "testkit::ConstSpout"
config = { reliable = true }
throttle = { tuples_per_sec = 500 }

[bolts.relay]
component = "testkit::NullBolt"
inputs = [{ from = "source" }]
"#;

/// How long any one thing the test waits for may take.
const WITHIN: Duration = Duration::from_secs(30);

/// A detached tmux session running one shell command; killed (by its exact
/// name) when dropped.
struct Tmux {
    name: String,
}

impl Tmux {
    /// Starts `command` in a 160×40 session named after this process and `test`.
    fn start(test: &str, command: &str) -> Self {
        let name = format!("squall-{}-{test}", std::process::id());
        let status = Command::new("tmux")
            .args(["new-session", "-d", "-s", &name, "-x", "160", "-y", "40", command])
            .status()
            .expect("run tmux");
        assert!(status.success(), "tmux new-session failed: {status}");
        Tmux { name }
    }

    /// The session's active pane, matched by exact name (`=NAME:`).
    fn pane(&self) -> String {
        format!("={}:", self.name)
    }

    /// The screen as text, or `None` once the session has ended.
    fn capture(&self) -> Option<String> {
        let out = Command::new("tmux")
            .args(["capture-pane", "-p", "-t", &self.pane()])
            .output()
            .expect("run tmux");
        out.status.success().then(|| String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// Types `keys` (tmux key names: `q`, `Escape`, `w`).
    fn send(&self, keys: &str) {
        let status = Command::new("tmux")
            .args(["send-keys", "-t", &self.pane(), keys])
            .status()
            .expect("run tmux");
        assert!(status.success(), "tmux send-keys {keys} failed");
    }

    /// Polls the screen until `ready` holds for it; panics with the last
    /// screen after [`WITHIN`], or if the session ends first.
    fn wait_for(&self, what: &str, ready: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + WITHIN;
        let mut last = String::new();
        loop {
            match self.capture() {
                Some(screen) if ready(&screen) => return screen,
                Some(screen) => last = screen,
                None => {
                    panic!("the tmux session ended while waiting for {what}; last screen:\n{last}")
                }
            }
            assert!(
                Instant::now() < deadline,
                "never saw {what} within {WITHIN:?}; screen:\n{last}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Polls until the session has ended (its command exited).
    fn wait_until_ended(&self) {
        let deadline = Instant::now() + WITHIN;
        while let Some(screen) = self.capture() {
            assert!(Instant::now() < deadline, "still running after {WITHIN:?}; screen:\n{screen}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let exact = format!("={}", self.name);
        let _ = Command::new("tmux").args(["kill-session", "-t", &exact]).output();
    }
}

/// `squall top ADDR`, then its exit code into `exit` and the terminal's
/// settings into `stty` (read after it restored them).
fn top_command(ws: &Workspace, addr: SocketAddr) -> String {
    top_command_with(ws, addr, "")
}

/// `squall top ADDR EXTRA` (EXTRA already quoted for the shell).
fn top_command_with(ws: &Workspace, addr: SocketAddr, extra: &str) -> String {
    let quote = |p: &Path| format!("'{}'", p.display().to_string().replace('\'', r"'\''"));
    format!(
        "{} top {addr}{extra}; echo $? > {}; stty -a > {}",
        quote(&squall_bin()),
        quote(&ws.path("exit")),
        quote(&ws.path("stty"))
    )
}

/// After `q` or Esc: the session ended, `squall top` exited 0, and the
/// terminal is back in canonical mode with echo (raw mode undone).
fn assert_quit_cleanly(ws: &Workspace, tmux: &Tmux) {
    tmux.wait_until_ended();
    assert_eq!(ws.read("exit").trim(), "0", "squall top's exit code");
    let stty = ws.read("stty");
    let flags: Vec<&str> = stty.split_whitespace().collect();
    assert!(flags.contains(&"icanon") && flags.contains(&"echo"), "still in raw mode:\n{stty}");
}

/// The `emitted` cell of `component`'s row on `screen`.
fn emitted(screen: &str, component: &str) -> Option<u64> {
    let row = screen.lines().find(|l| l.split_whitespace().next() == Some(component))?;
    row.split_whitespace().nth(3)?.parse().ok()
}

#[test]
fn top_shows_the_running_topology_live_and_quits_on_q() {
    if require_tool("tmux").is_none() {
        return;
    }
    let ws = Workspace::new("top_live");
    let (child, addr) = crate::http::start(&ws, TOPOLOGY);
    let tmux = Tmux::start("live", &top_command(&ws, addr));

    let screen = tmux.wait_for("the table", |s| {
        s.contains("dash · running · up") && emitted(s, "source").is_some_and(|n| n > 0)
    });
    for column in ["component", "emit/s", "exec/s", "capacity", "latency p99", "errors"] {
        assert!(screen.contains(column), "no {column} column:\n{screen}");
    }
    assert!(screen.lines().any(|l| l.starts_with("relay") && l.contains("bolt")), "{screen}");
    let first = emitted(&screen, "source").expect("a count");
    tmux.wait_for("the source's emitted count to grow", |s| {
        emitted(s, "source").is_some_and(|n| n > first)
    });

    tmux.send("w");
    tmux.wait_for("the 1m window", |s| s.contains("rate window: 1m"));

    // The topology goes away: the dashboard says so and keeps running.
    child.interrupt();
    assert!(child.wait().status.success(), "the topology drains on SIGINT");
    tmux.wait_for("the endpoint reported unreachable", |s| s.contains("dash · unreachable: "));

    tmux.send("q");
    assert_quit_cleanly(&ws, &tmux);
}

#[test]
fn top_waits_for_an_endpoint_that_is_not_there_and_quits_on_esc() {
    if require_tool("tmux").is_none() {
        return;
    }
    let ws = Workspace::new("top_connecting");
    // A port that was free a moment ago; nothing listens on it now.
    let addr = TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("a port");
    let tmux = Tmux::start("connecting", &top_command(&ws, addr));

    let screen = tmux.wait_for("the retry", |s| s.contains("retrying"));
    assert!(screen.starts_with(&format!("connecting to {addr} ...")), "{screen}");
    assert!(screen.contains("q/Esc quit"), "the footer names the keys:\n{screen}");

    tmux.send("Escape");
    assert_quit_cleanly(&ws, &tmux);
}

#[test]
fn top_reads_a_token_file_and_connects_over_tls() {
    if require_tool("tmux").is_none() {
        return;
    }
    let ws = Workspace::new("top_tls_token");
    let Some((cert, key)) = crate::tls::self_signed(&ws, "squall-top") else { return };
    ws.write("read.token", "r3ad-for-top\n");
    let toml = format!(
        "{TOPOLOGY}\n[topology.http]\nread_token_file = \"read.token\"\ntls_cert = {:?}\ntls_key = {:?}\n",
        cert.display().to_string(),
        key.display().to_string()
    );
    let (child, addr) = crate::http::start(&ws, &toml);
    let tls = format!(" --tls-ca '{}'", cert.display());
    // Without the token: the dashboard shows the 401 and keeps asking.
    let denied = Tmux::start("tls-denied", &top_command_with(&ws, addr, &tls));
    denied.wait_for("the 401", |s| s.contains("HTTP 401"));
    denied.send("q");
    denied.wait_until_ended();
    // With it: the table fills in.
    let extra = format!("{tls} --token-file '{}'", ws.path("read.token").display());
    let tmux = Tmux::start("tls-token", &top_command_with(&ws, addr, &extra));
    tmux.wait_for("the table over TLS with a token", |s| {
        s.contains("dash · running · up") && emitted(s, "source").is_some_and(|n| n > 0)
    });
    tmux.send("q");
    assert_quit_cleanly(&ws, &tmux);
    child.interrupt();
    assert!(child.wait().status.success());
}
