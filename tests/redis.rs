//! The Redis Streams connector (`squall-redis`) against the local Redis:
//! no entry lost under chaos and a restart, a host killed with SIGKILL among
//! three sharing a group, SIGTERM flushing its acks, a connection cut and
//! restored, and bad config. Every key is a `unique_name` and is deleted at
//! the end (also when the test fails).

use std::collections::HashSet;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use ::redis::{Connection, Value as RedisValue};

use crate::util::{
    loc_of, require_service, tail, unique_name, Output, Running, SquallCommand, Workspace, REDIS,
};

const URL: &str = "redis://127.0.0.1:6379";

/// A connection of the test's own.
fn connect() -> Connection {
    ::redis::Client::open(URL).and_then(|c| c.get_connection()).expect("redis answers")
}

/// Deletes its keys when dropped, so a failing test leaves nothing behind.
struct Keys(Vec<String>);

impl Drop for Keys {
    fn drop(&mut self) {
        if let Ok(mut con) = ::redis::Client::open(URL).and_then(|c| c.get_connection()) {
            let _: Result<i64, _> = ::redis::cmd("DEL").arg(&self.0).query(&mut con);
        }
    }
}

/// XADDs entries `uid = first..first+n` (and a payload) in pipelines.
fn fill(con: &mut Connection, stream: &str, first: u64, n: u64) {
    let mut uid = first;
    while uid < first + n {
        let mut pipe = ::redis::pipe();
        for _ in 0..1000.min(first + n - uid) {
            pipe.cmd("XADD").arg(stream).arg("*").arg("uid").arg(uid).arg("body").arg("x");
            pipe.ignore();
            uid += 1;
        }
        pipe.query::<()>(con).expect("XADD");
    }
}

/// Every entry of `stream` as `(entry id, [(field, value)])`, read in pages.
fn read_all(con: &mut Connection, stream: &str) -> Vec<(String, Vec<(String, String)>)> {
    let mut out = Vec::new();
    let mut start = "-".to_owned();
    loop {
        let page: Vec<(String, Vec<String>)> = ::redis::cmd("XRANGE")
            .arg(stream)
            .arg(&start)
            .arg("+")
            .arg("COUNT")
            .arg(10_000)
            .query(con)
            .expect("XRANGE");
        let Some((last, _)) = page.last() else { return out };
        start = format!("({last}");
        for (id, flat) in page {
            let pairs = flat.chunks_exact(2).map(|p| (p[0].clone(), p[1].clone())).collect();
            out.push((id, pairs));
        }
    }
}

/// The `uid`s of the output stream's entries (each once).
fn output_uids(con: &mut Connection, stream: &str) -> HashSet<u64> {
    read_all(con, stream)
        .iter()
        .filter_map(|(_, pairs)| pairs.iter().find(|(k, _)| k == "uid"))
        .map(|(_, v)| v.parse().expect("a numeric uid"))
        .collect()
}

/// How many entries are pending in `group` (XPENDING's summary count).
fn pending_count(con: &mut Connection, stream: &str, group: &str) -> i64 {
    let summary: RedisValue =
        ::redis::cmd("XPENDING").arg(stream).arg(group).query(con).expect("XPENDING");
    match summary {
        RedisValue::Array(items) => match items.first() {
            Some(RedisValue::Int(n)) => *n,
            other => panic!("XPENDING summary starts with {other:?}"),
        },
        other => panic!("XPENDING summary is {other:?}"),
    }
}

/// The ids of the entries pending in `group`.
fn pending_ids(con: &mut Connection, stream: &str, group: &str) -> HashSet<String> {
    let rows: Vec<(String, String, u64, u64)> = ::redis::cmd("XPENDING")
        .arg(stream)
        .arg(group)
        .arg("-")
        .arg("+")
        .arg(1_000_000)
        .query(con)
        .expect("XPENDING range");
    rows.into_iter().map(|(id, ..)| id).collect()
}

fn xlen(con: &mut Connection, stream: &str) -> u64 {
    ::redis::cmd("XLEN").arg(stream).query(con).expect("XLEN")
}

/// The streams and group of one test.
struct Names {
    input: String,
    output: String,
    dead: String,
    group: String,
    _keys: Keys,
}

fn names(test: &str) -> Names {
    let input = unique_name(&format!("{test}_in"));
    let output = unique_name(&format!("{test}_out"));
    let dead = unique_name(&format!("{test}_dead"));
    let keys = Keys(vec![input.clone(), output.clone(), dead.clone()]);
    Names { input, output, dead, group: unique_name(&format!("{test}_group")), _keys: keys }
}

/// Options of [`topology`].
struct Options<'a> {
    /// The url both connector components use.
    url: &'a str,
    /// Extra keys of the spout's config (`key = value, ...`).
    spout: &'a str,
    /// The middle bolt's table body (after `[bolts.middle]`).
    middle: &'a str,
    message_timeout_secs: u64,
}

/// StreamSpout -> PackBolt -> middle -> StreamAppend.
fn topology(ws: &Workspace, file: &str, n: &Names, o: &Options<'_>) -> PathBuf {
    ws.write_topology(
        file,
        &format!(
            r#"
[topology]
message_timeout_secs = {timeout}
max_spout_pending = 3000
shutdown_timeout_secs = 30

[plugins]
testkit = "{{testkit}}"
redis = "{{redis}}"

[spouts.source]
component = "redis::StreamSpout"
config = {{ url = "{url}", stream = "{input}", group = "{group}", dead_letter_stream = "{dead}", batch = 200, block_ms = 200, {spout} }}

[bolts.pack]
component = "testkit::PackBolt"
inputs = [{{ from = "source" }}]

[bolts.middle]
inputs = [{{ from = "pack" }}]
{middle}

[bolts.sink]
component = "redis::StreamAppend"
tick_tuple_freq_secs = 1
inputs = [{{ from = "middle" }}]
config = {{ url = "{url}", stream = "{output}", batch = 100 }}
"#,
            timeout = o.message_timeout_secs,
            url = o.url,
            input = n.input,
            output = n.output,
            dead = n.dead,
            group = n.group,
            spout = o.spout,
            middle = o.middle,
        ),
    )
}

fn start(ws: &Workspace, path: &Path) -> Running {
    let mut cmd = SquallCommand::run_until_interrupted(ws, path);
    cmd.limit(Duration::from_secs(300));
    let mut child = cmd.spawn();
    child.wait_for_stderr("running", Duration::from_secs(30));
    child
}

/// Polls until `done` holds or `within` passes; the last value of `what`
/// goes into the panic message.
fn wait_until(within: Duration, mut done: impl FnMut() -> bool, what: impl Fn() -> String) {
    let started = Instant::now();
    while !done() {
        assert!(started.elapsed() < within, "not done within {within:?}: {}", what());
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Waits until every uid `0..n` is in the output and nothing is pending.
fn wait_for_all(
    con: &mut Connection,
    n: &Names,
    total: u64,
    within: Duration,
    children: &[&Running],
) {
    let started = Instant::now();
    loop {
        let uids = output_uids(con, &n.output);
        let pending = pending_count(con, &n.input, &n.group);
        if uids.len() as u64 == total && pending == 0 {
            return;
        }
        if started.elapsed() > within {
            let missing: Vec<u64> = (0..total).filter(|u| !uids.contains(u)).take(10).collect();
            let logs: Vec<String> =
                children.iter().map(|c| tail(&c.stderr_snapshot(), 30)).collect();
            panic!(
                "after {within:?}: {} of {total} uids in the output (first missing: {missing:?}), \
                 {} pending\n{}",
                uids.len(),
                pending,
                logs.join("\n---\n")
            );
        }
        std::thread::sleep(Duration::from_millis(300));
    }
}

/// Asserts a clean exit with no panic in the log.
fn assert_clean(out: &Output) {
    out.assert_code(0);
    assert!(!out.stderr.contains("panicked"), "a panic\n{}", out.context());
}

#[test]
fn no_entry_is_lost_under_chaos_and_a_restart() {
    if !require_service(REDIS) {
        return;
    }
    const TOTAL: u64 = 100_000;
    let n = names("redis_loss");
    let mut con = connect();
    fill(&mut con, &n.input, 0, TOTAL);
    let ws = Workspace::new("redis_loss");
    let options = Options {
        url: URL,
        spout: "max_pending = 2000, max_deliver = 20, min_idle_ms = 1000, claim_interval_ms = 500",
        middle:
            "component = \"testkit::ChaosBolt\"\nconfig = { fail_rate = 0.01, drop_rate = 0.005 }",
        message_timeout_secs: 2,
    };
    let path = topology(&ws, "loss.toml", &n, &options);
    // First run: stopped (SIGTERM) part of the way, with trees failed,
    // dropped and in flight. What it had not acked stays pending.
    let first = start(&ws, &path);
    wait_until(
        Duration::from_secs(120),
        || xlen(&mut connect(), &n.output) >= TOTAL / 3,
        || {
            format!(
                "output has {} entries\n{}",
                xlen(&mut connect(), &n.output),
                tail(&first.stderr_snapshot(), 30)
            )
        },
    );
    first.terminate();
    let out = first.wait();
    assert_clean(&out);
    let left = pending_count(&mut con, &n.input, &n.group);
    assert!(left > 0, "the first run left something pending to claim\n{}", out.context());
    // Second run: a new consumer reads the rest and claims what the first
    // one left once it has been idle min_idle_ms.
    let second = start(&ws, &path);
    wait_for_all(&mut con, &n, TOTAL, Duration::from_secs(240), &[&second]);
    second.interrupt();
    let out = second.wait();
    assert_clean(&out);
    assert_eq!(pending_count(&mut con, &n.input, &n.group), 0, "{}", out.context());
    assert_eq!(xlen(&mut con, &n.dead), 0, "nothing was dead-lettered\n{}", out.context());
    assert!(
        out.stderr.contains("claimed"),
        "the second run claimed idle entries\n{}",
        out.context()
    );
}

#[test]
fn survivors_claim_the_entries_of_a_killed_host() {
    if !require_service(REDIS) {
        return;
    }
    const TOTAL: u64 = 30_000;
    let n = names("redis_kill");
    let mut con = connect();
    fill(&mut con, &n.input, 0, TOTAL);
    let ws = Workspace::new("redis_kill");
    let options = Options {
        url: URL,
        spout: "max_pending = 500, min_idle_ms = 2000, claim_interval_ms = 500",
        middle: "component = \"testkit::SleepBolt\"\nconfig = { micros = 300 }",
        message_timeout_secs: 30,
    };
    let path = topology(&ws, "kill.toml", &n, &options);
    // Three processes, one group; each consumer is named <host>-<pid>-0.
    let hosts: Vec<Running> = (0..3).map(|_| start(&ws, &path)).collect();
    wait_until(
        Duration::from_secs(120),
        || xlen(&mut connect(), &n.output) >= TOTAL / 6,
        || format!("output has {} entries", xlen(&mut connect(), &n.output)),
    );
    let mut hosts = hosts.into_iter();
    let victim = hosts.next().expect("three hosts");
    let victim_consumer = format!("-{}-0", victim.pid());
    let owned = {
        let rows: Vec<(String, String, u64, u64)> = ::redis::cmd("XPENDING")
            .arg(&n.input)
            .arg(&n.group)
            .arg("-")
            .arg("+")
            .arg(100_000)
            .query(&mut con)
            .expect("XPENDING");
        rows.iter().filter(|r| r.1.ends_with(&victim_consumer)).count()
    };
    victim.signal(libc::SIGKILL);
    drop(victim);
    assert!(owned > 0, "the victim had entries pending when it was killed");
    let survivors: Vec<Running> = hosts.collect();
    wait_for_all(
        &mut con,
        &n,
        TOTAL,
        Duration::from_secs(240),
        &survivors.iter().collect::<Vec<_>>(),
    );
    let mut claimed = false;
    for host in survivors {
        host.terminate();
        let out = host.wait();
        assert_clean(&out);
        claimed |= out.stderr.contains("claimed");
    }
    assert!(claimed, "a survivor claimed the victim's entries");
    assert_eq!(pending_count(&mut con, &n.input, &n.group), 0);
}

#[test]
fn sigterm_flushes_the_acks_of_its_completed_trees() {
    if !require_service(REDIS) {
        return;
    }
    const TOTAL: u64 = 30_000;
    let n = names("redis_term");
    let mut con = connect();
    fill(&mut con, &n.input, 0, TOTAL);
    let ws = Workspace::new("redis_term");
    let options = Options {
        url: URL,
        // min_idle_ms long: nothing is claimed back by this very run.
        // Acks gather for 5 s, so the drain ends with many of them unsent:
        // only close's flush writes them.
        spout: "max_pending = 500, min_idle_ms = 600000, ack_interval_ms = 5000",
        middle: "component = \"testkit::SleepBolt\"\nconfig = { micros = 200 }",
        message_timeout_secs: 30,
    };
    let path = topology(&ws, "term.toml", &n, &options);
    let child = start(&ws, &path);
    wait_until(
        Duration::from_secs(120),
        || xlen(&mut connect(), &n.output) >= 3000,
        || {
            format!(
                "output has {} entries\n{}",
                xlen(&mut connect(), &n.output),
                tail(&child.stderr_snapshot(), 30)
            )
        },
    );
    child.terminate();
    let out = child.wait();
    assert_clean(&out);
    assert_eq!(out.summary()["drain"]["completed"], true, "{}", out.context());
    // Every entry that made it to the output was acked in squall (the
    // append acks after its XADD): none of them may still be pending.
    let done: HashSet<String> = read_all(&mut con, &n.output)
        .into_iter()
        .filter_map(|(_, pairs)| pairs.into_iter().find(|(k, _)| k == "id").map(|(_, v)| v))
        .collect();
    let pending = pending_ids(&mut con, &n.input, &n.group);
    let stuck: Vec<&String> = done.intersection(&pending).take(10).collect();
    assert!(stuck.is_empty(), "acked in squall but still pending: {stuck:?}\n{}", out.context());
    // What is left pending was read but never emitted: at most what the
    // spout's channel holds (2 x batch).
    assert!(pending.len() <= 400, "{} pending after the drain\n{}", pending.len(), out.context());
    assert!(done.len() as u64 + pending.len() as u64 <= TOTAL);
}

/// A TCP proxy to Redis that the test can cut (every connection closed, new
/// ones refused) and restore.
struct Proxy {
    port: u16,
    up: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
    live: Arc<Mutex<Vec<TcpStream>>>,
    acceptor: Option<JoinHandle<()>>,
}

impl Proxy {
    fn start(upstream: &'static str) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the proxy");
        listener.set_nonblocking(true).expect("nonblocking");
        let port = listener.local_addr().expect("bound").port();
        let up = Arc::new(AtomicBool::new(true));
        let stop = Arc::new(AtomicBool::new(false));
        let live = Arc::new(Mutex::new(Vec::new()));
        let (up2, stop2, live2) = (up.clone(), stop.clone(), live.clone());
        let acceptor = std::thread::spawn(move || {
            while !stop2.load(Ordering::Relaxed) {
                let client = match listener.accept() {
                    Ok((client, _)) => client,
                    Err(_) => {
                        std::thread::sleep(Duration::from_millis(5));
                        continue;
                    }
                };
                if !up2.load(Ordering::Relaxed) {
                    drop(client); // refused while cut
                    continue;
                }
                let _ = client.set_nonblocking(false);
                let Ok(server) = TcpStream::connect(upstream) else { continue };
                let mut live = live2.lock().expect("not poisoned");
                for (from, to) in [(&client, &server), (&server, &client)] {
                    let (mut from, mut to) =
                        (from.try_clone().expect("clone"), to.try_clone().expect("clone"));
                    std::thread::spawn(move || {
                        let mut buf = [0_u8; 16 * 1024];
                        while let Ok(n) = from.read(&mut buf) {
                            if n == 0 || to.write_all(&buf[..n]).is_err() {
                                break;
                            }
                        }
                        let _ = to.shutdown(Shutdown::Both);
                        let _ = from.shutdown(Shutdown::Both);
                    });
                }
                live.push(client);
                live.push(server);
            }
        });
        Self { port, up, stop, live, acceptor: Some(acceptor) }
    }

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Closes every proxied connection and refuses new ones.
    fn cut(&self) {
        self.up.store(false, Ordering::Relaxed);
        for s in self.live.lock().expect("not poisoned").drain(..) {
            let _ = s.shutdown(Shutdown::Both);
        }
    }

    fn restore(&self) {
        self.up.store(true, Ordering::Relaxed);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.cut();
        self.stop.store(true, Ordering::Relaxed);
        if let Some(a) = self.acceptor.take() {
            let _ = a.join();
        }
    }
}

#[test]
fn a_cut_connection_is_reopened_and_nothing_is_lost() {
    if !require_service(REDIS) {
        return;
    }
    const TOTAL: u64 = 30_000;
    let n = names("redis_cut");
    let mut con = connect();
    fill(&mut con, &n.input, 0, TOTAL);
    let proxy = Proxy::start("127.0.0.1:6379");
    let url = proxy.url();
    let ws = Workspace::new("redis_cut");
    let options = Options {
        url: &url,
        // A failed append counts as a delivery; an outage must not use them up.
        spout: "max_pending = 500, max_deliver = 100000, min_idle_ms = 600000",
        middle: "component = \"testkit::SleepBolt\"\nconfig = { micros = 200 }",
        message_timeout_secs: 30,
    };
    let path = topology(&ws, "cut.toml", &n, &options);
    let mut child = start(&ws, &path);
    wait_until(
        Duration::from_secs(120),
        || xlen(&mut connect(), &n.output) >= 3000,
        || format!("output has {} entries", xlen(&mut connect(), &n.output)),
    );
    proxy.cut();
    std::thread::sleep(Duration::from_secs(2));
    let during = xlen(&mut con, &n.output);
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(xlen(&mut con, &n.output), during, "nothing is appended while the proxy is cut");
    proxy.restore();
    wait_for_all(&mut con, &n, TOTAL, Duration::from_secs(180), &[&child]);
    child.wait_for_stderr("reconnected", Duration::from_secs(10));
    child.interrupt();
    let out = child.wait();
    assert_clean(&out);
    assert_eq!(pending_count(&mut con, &n.input, &n.group), 0);
    assert_eq!(xlen(&mut con, &n.dead), 0, "{}", out.context());
}

#[test]
fn bad_config_is_one_line_at_its_place_and_an_unreachable_server_a_clear_error() {
    if !require_service(REDIS) {
        return;
    }
    let ws = Workspace::new("redis_bad_config");
    let write = |name: &str, spout_config: &str| {
        ws.write_topology(
            name,
            &format!(
                r#"
[plugins]
redis = "{{redis}}"
testkit = "{{testkit}}"

[spouts.source]
component = "redis::StreamSpout"
config = {{ {spout_config} }}

[bolts.sink]
component = "testkit::NullBolt"
inputs = [{{ from = "source" }}]
"#
            ),
        )
    };
    let unknown = write(
        "unknown.toml",
        "url = \"redis://127.0.0.1\", stream = \"s\", group = \"g\", colour = 1",
    );
    let out = SquallCommand::validate(&ws, &unknown).output();
    out.assert_code(78);
    let line = out.single_error_line();
    // Caught by the declared keys, at the key, before the constructor runs.
    let (row, col) = loc_of(&std::fs::read_to_string(&unknown).unwrap(), "colour");
    assert!(
        line.contains(&format!("unknown.toml:{row}:{col}: error:"))
            && line.contains("unknown config key \"colour\" for redis::StreamSpout"),
        "{line}"
    );

    let bad_url = write("url.toml", "url = \"http://127.0.0.1\", stream = \"s\", group = \"g\"");
    let out = SquallCommand::run(&ws, &bad_url, "5s").output();
    out.assert_code(78);
    let line = out.single_error_line();
    assert!(
        line.contains("url.toml:6:9: error:") && line.contains("not a valid redis url"),
        "{line}"
    );

    // Nothing listens on port 1: open retries for connect_timeout_ms, then
    // the run stops with the reason.
    let unreachable = write(
        "unreachable.toml",
        "url = \"redis://127.0.0.1:1\", stream = \"s\", group = \"g\", connect_timeout_ms = 1500",
    );
    let out = SquallCommand::run(&ws, &unreachable, "30s").output();
    assert_ne!(out.status.code(), Some(0), "{}", out.context());
    assert!(out.status.code().is_some(), "exited, not killed\n{}", out.context());
    assert!(
        out.stderr.contains("cannot connect to redis at 127.0.0.1:1"),
        "the error names the server\n{}",
        out.context()
    );
    assert!(out.elapsed < Duration::from_secs(20), "bounded: {:?}", out.elapsed);
}

#[test]
fn entries_that_keep_failing_go_to_the_dead_letter_stream_with_the_reason() {
    if !require_service(REDIS) {
        return;
    }
    const TOTAL: u64 = 200;
    let n = names("redis_dead");
    let mut con = connect();
    fill(&mut con, &n.input, 0, TOTAL);
    let ws = Workspace::new("redis_dead");
    let options = Options {
        url: URL,
        spout: "max_deliver = 3",
        middle: "component = \"testkit::ChaosBolt\"\nconfig = { fail_rate = 1.0 }",
        message_timeout_secs: 30,
    };
    let path = topology(&ws, "dead.toml", &n, &options);
    let child = start(&ws, &path);
    wait_until(
        Duration::from_secs(60),
        || xlen(&mut connect(), &n.dead) >= TOTAL,
        || {
            format!(
                "{} dead-lettered\n{}",
                xlen(&mut connect(), &n.dead),
                tail(&child.stderr_snapshot(), 30)
            )
        },
    );
    wait_until(
        Duration::from_secs(10),
        || pending_count(&mut connect(), &n.input, &n.group) == 0,
        || "entries still pending".to_owned(),
    );
    child.interrupt();
    let out = child.wait();
    assert_clean(&out);
    assert_eq!(xlen(&mut con, &n.output), 0, "every input failed");
    let dead = read_all(&mut con, &n.dead);
    assert_eq!(dead.len() as u64, TOTAL, "each entry dead-lettered once");
    let field = |pairs: &[(String, String)], key: &str| {
        pairs.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone()).unwrap_or_default()
    };
    let uids: HashSet<u64> =
        dead.iter().map(|(_, p)| field(p, "uid").parse().expect("uid")).collect();
    assert_eq!(uids, (0..TOTAL).collect());
    for (_, pairs) in &dead {
        assert_eq!(field(pairs, "deliveries"), "3", "{pairs:?}");
        assert_eq!(field(pairs, "source_stream"), n.input, "{pairs:?}");
        assert!(
            field(pairs, "reason").contains("failed on delivery 3 of max_deliver = 3"),
            "{pairs:?}"
        );
        assert_eq!(field(pairs, "body"), "x", "the original fields follow: {pairs:?}");
    }
    assert!(out.stderr.contains("dead-lettered"), "the log says so\n{}", out.context());
}
