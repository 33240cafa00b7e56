//! Groups (issue 22) against the real NATS server and Redis: hosts running
//! one topology with `[group]` share its 8 partitions through leases in
//! JetStream KV; each partition's counts (`examples::DurableWordCount`) and
//! its spout's position live in the partition's own Redis namespace.
//!
//! The input: 40 words, `w00` … `w39`; word `i` is published to partition
//! `i % 8`'s subject, so each partition has 5 words and every word is
//! counted in one partition only. The true count of each word is known.
//! After each scenario every host stops (SIGTERM: last checkpoint, release),
//! and the counts read back from every partition's namespace (`squall state
//! show --partition K`) must be exactly the true counts.
//!
//! Each test uses its own stream, group, bucket and namespace.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::nats::Broker;
use crate::util::{
    plugin_path, require_service, require_tool, unique_name, OwnServer, Running, ServerKind,
    SquallCommand, Workspace, NATS, REDIS,
};

const PARTITIONS: u32 = 8;
const WORDS: u32 = 40;
const LEASE_MS: u64 = 2000;

/// Word `i`'s text.
fn word(i: u32) -> String {
    format!("w{i:02}")
}

/// A group under test: its input, its topology file and its hosts.
struct Group {
    ws: Workspace,
    file: PathBuf,
    broker: Broker,
    stream: String,
    bucket: String,
    per_partition: u64,
    hosts: BTreeMap<String, Running>,
    /// `RUST_LOG` for the hosts started from now on (`None`: theirs).
    log_filter: Option<&'static str>,
}

impl Group {
    /// Publishes `per_partition` messages to each partition and writes the
    /// topology (each partition's spout throttled to `rate` tuples/s);
    /// `None` when a service is missing.
    fn new(test: &str, per_partition: u64, rate: u32) -> Option<Self> {
        if !require_service(NATS) {
            return None;
        }
        Self::on(NATS.addr, test, per_partition, rate)
    }

    /// As [`Group::new`], with the leases and the input on the NATS server
    /// at `nats_addr`.
    fn on(nats_addr: &str, test: &str, per_partition: u64, rate: u32) -> Option<Self> {
        if !require_service(REDIS) {
            return None;
        }
        let ws = Workspace::new(test);
        let mut broker = Broker::connect_to(nats_addr);
        let stream = unique_name("GROUP");
        let subject = unique_name("group");
        broker.create_stream(&stream, &format!("{subject}.>"));
        for k in 0..PARTITIONS {
            let words: Vec<String> = (0..WORDS).filter(|i| i % PARTITIONS == k).map(word).collect();
            broker.publish_each(&format!("{subject}.{k}"), per_partition, |j| {
                words[(j % words.len() as u64) as usize].clone()
            });
        }
        let bucket = unique_name("squall_group_test");
        let namespace = unique_name("squall_group");
        let toml = format!(
            r#"
[topology]
name = "group-wc"
message_timeout_secs = 30
max_spout_pending = 500

[plugins]
examples = "{examples}"
nats = "{nats}"
state = "{state}"

[group]
name = "{group}"
partitions = {PARTITIONS}
lease_ms = {LEASE_MS}
url = "nats://{nats_addr}"
bucket = "{bucket}"

[state]
backend = "state::RedisState"
namespace = "{namespace}"
interval_ms = 200
config = {{ url = "redis://{redis_addr}" }}

[spouts.words]
component = "nats::JetStreamSpout"
config = {{ url = "nats://{nats_addr}", stream = "{stream}", consumer = "c-${{SQUALL_PARTITION}}", subject = "{subject}.${{SQUALL_PARTITION}}", create_consumer = true, ack_wait = "3s", max_ack_pending = 5000, emit = "payload", payload_as = "string", payload_field = "word", fetch_wait = "100ms" }}
throttle = {{ tuples_per_sec = {rate}, mode = "smooth" }}

[bolts.count]
component = "examples::DurableWordCount"
parallelism = 2
inputs = [{{ from = "words", stream = "payload", grouping = {{ fields = ["word"] }} }}]
"#,
            examples = plugin_path("examples").display(),
            nats = plugin_path("nats").display(),
            state = plugin_path("state_redis").display(),
            group = unique_name("g"),
            redis_addr = REDIS.addr,
        );
        let file = ws.write_topology("group.toml", &toml);
        Some(Self {
            ws,
            file,
            broker,
            stream,
            bucket,
            per_partition,
            hosts: BTreeMap::new(),
            log_filter: None,
        })
    }

    /// The true count of every word.
    fn expected(&self) -> BTreeMap<String, u64> {
        let mut counts = BTreeMap::new();
        for k in 0..PARTITIONS {
            let words: Vec<u32> = (0..WORDS).filter(|i| i % PARTITIONS == k).collect();
            for j in 0..self.per_partition {
                *counts.entry(word(words[(j % words.len() as u64) as usize])).or_default() += 1;
            }
        }
        counts
    }

    /// Starts host `id`.
    fn start(&mut self, id: &str) {
        self.start_with(id, &[]);
    }

    /// Starts host `id` with more arguments.
    fn start_with(&mut self, id: &str, more: &[&str]) -> &mut Running {
        let mut cmd = SquallCommand::new(&self.ws, ["run"]);
        cmd.arg(&self.file).args(["--host-id", id, "--stats-interval", "0s"]).args(more);
        cmd.limit(Duration::from_secs(240));
        if let Some(filter) = self.log_filter {
            cmd.env("RUST_LOG", filter);
        }
        self.hosts.insert(id.to_owned(), cmd.spawn());
        self.hosts.get_mut(id).expect("just inserted")
    }

    /// What host `id` logged so far.
    fn log(&self, id: &str) -> String {
        self.hosts[id].stderr_snapshot()
    }

    /// The partitions host `id` runs now, as its log says.
    fn held(&self, id: &str) -> BTreeSet<u32> {
        held_in(&self.log(id))
    }

    /// Waits until every partition runs on one of the hosts and `ready`
    /// holds for the partitions of each.
    fn wait_until(
        &self,
        what: &str,
        within: Duration,
        ready: impl Fn(&BTreeMap<String, BTreeSet<u32>>) -> bool,
    ) {
        let deadline = Instant::now() + within;
        loop {
            let held: BTreeMap<String, BTreeSet<u32>> =
                self.hosts.keys().map(|id| (id.clone(), self.held(id))).collect();
            let all: BTreeSet<u32> = held.values().flatten().copied().collect();
            let total: usize = held.values().map(BTreeSet::len).sum();
            if all.len() == PARTITIONS as usize && total == PARTITIONS as usize && ready(&held) {
                eprintln!("{what}: {held:?}");
                return;
            }
            assert!(Instant::now() < deadline, "{what}: not within {within:?}: {held:?}\n{}", {
                self.hosts
                    .keys()
                    .map(|id| format!("--- {id}\n{}", tail(&self.log(id), 40)))
                    .collect::<String>()
            });
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Waits until each live host holds at least `min` partitions.
    fn wait_settled(&self, min: usize, within: Duration) {
        self.wait_until("settled", within, |held| held.values().all(|h| h.len() >= min));
    }

    /// Waits until every message of every partition is acknowledged to the
    /// server (which happens only once a checkpoint covering it committed).
    fn wait_all_acked(&self, within: Duration) {
        let deadline = Instant::now() + within;
        loop {
            let pending: Vec<Option<(usize, u64)>> = (0..PARTITIONS)
                .map(|k| self.broker.pending_if_any(&self.stream, &format!("c-{k}")))
                .collect();
            if pending.iter().all(|p| *p == Some((0, 0))) {
                return;
            }
            assert!(Instant::now() < deadline, "not all acked within {within:?}: {pending:?}");
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Stops every host with SIGTERM; each must exit 0.
    fn stop_all(&mut self) -> BTreeMap<String, String> {
        for running in self.hosts.values() {
            running.terminate();
        }
        let mut logs = BTreeMap::new();
        for (id, running) in std::mem::take(&mut self.hosts) {
            let out = running.wait();
            out.assert_code(0);
            logs.insert(id, out.stderr);
        }
        logs
    }

    /// What `squall group status --json` reads from the broker.
    fn status(&self) -> serde_json::Value {
        let out = SquallCommand::new(&self.ws, ["group", "status"])
            .arg(&self.file)
            .arg("--json")
            .output();
        out.assert_code(0);
        serde_json::from_str(&out.stdout).expect("JSON")
    }

    /// The counts committed in every partition's namespace.
    fn counts(&self) -> BTreeMap<String, u64> {
        let mut counts = BTreeMap::new();
        for k in 0..PARTITIONS {
            let out = SquallCommand::new(&self.ws, ["state", "show"])
                .arg(&self.file)
                .args(["count/counts", "--partition", &k.to_string()])
                .output();
            out.assert_code(0);
            for line in out.stdout.lines() {
                let (key, value) = line.split_once(" = ").expect("KEY = VALUE");
                let word = key.trim_matches('"').to_owned();
                let n: u64 = value.parse().expect("a count");
                assert!(counts.insert(word, n).is_none(), "a word in two partitions: {line}");
            }
        }
        counts
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        // A dropped child is killed (SIGKILL ends a stopped one too).
        self.hosts.clear();
        for k in 0..PARTITIONS {
            let _ = SquallCommand::new(&self.ws, ["state", "rm", "--yes"])
                .arg(&self.file)
                .args(["--partition", &k.to_string()])
                .output();
        }
        self.broker.delete_bucket(&self.bucket);
    }
}

/// One `GET /healthz` with its own short read timeout: `Some(status)`, or
/// `None` when no answer came within `within`.
fn healthz_within(addr: std::net::SocketAddr, within: Duration) -> Option<u16> {
    use std::io::{Read as _, Write as _};
    let mut s = std::net::TcpStream::connect_timeout(&addr, within).ok()?;
    s.set_read_timeout(Some(within)).ok()?;
    let req = format!("GET /healthz HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).ok()?;
    let mut head = [0u8; 12];
    s.read_exact(&mut head).ok()?;
    std::str::from_utf8(&head[9..12]).ok()?.parse().ok()
}

/// Issue 42, item 5. A group member's endpoint answered one request at a
/// time on one thread, with 2 s per read: a client sending one byte every
/// 1.5 s held it for good (`/healthz` answered 0 of 20), and 20 idle
/// connections held it 2 s each (0 of 12). It is served by the topology
/// endpoint's server now: each connection a task, a request head due
/// whole within its deadline. With the slow client and 20 idle
/// connections open, 12 `/healthz` in a row are each answered within 5 s
/// (a generous bound: the answer is the assertion, not its speed).
/// Seen failing on the previous build: "/healthz answered 0 of 12".
#[test]
fn a_slow_client_and_idle_connections_do_not_block_a_members_endpoint() {
    let Some(mut g) = Group::new("group_slow_client", 5, 100) else { return };
    let addr = crate::http::bound_addr(g.start_with("h1", &["--http", "0"]));
    crate::http::poll(addr, "/healthz", Duration::from_secs(30), |v| v["status"] == "ok");

    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let slow = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            use std::io::Write as _;
            let mut s = std::net::TcpStream::connect(addr).expect("connect");
            let req = format!("GET /healthz HTTP/1.1\r\nHost: {addr}\r\n\r\n");
            for b in req.bytes() {
                if stop.load(std::sync::atomic::Ordering::Relaxed) || s.write_all(&[b]).is_err() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(1500));
            }
        })
    };
    std::thread::sleep(Duration::from_millis(300));
    let idle: Vec<std::net::TcpStream> =
        (0..20).map(|_| std::net::TcpStream::connect(addr).expect("connect")).collect();
    std::thread::sleep(Duration::from_millis(300));

    let tries = 12;
    let mut answered = 0;
    for _ in 0..tries {
        match healthz_within(addr, Duration::from_secs(5)) {
            Some(200) => answered += 1,
            // One miss is enough to know; the old endpoint missed them all.
            _ => break,
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    drop(idle);
    assert_eq!(answered, tries, "/healthz answered {answered} of {tries}");
    let _ = slow.join();
    g.stop_all();
}

/// The partitions a host's log says it runs now: `partition K: running`
/// adds K; released, lost, stopped or failed to start removes it.
fn held_in(log: &str) -> BTreeSet<u32> {
    let mut held = BTreeSet::new();
    for line in log.lines() {
        let Some(at) = line.find("partition ") else { continue };
        let rest = &line[at + "partition ".len()..];
        let Some((k, what)) = rest.split_once(": ") else { continue };
        let Ok(k) = k.parse::<u32>() else { continue };
        if what.starts_with("running (epoch") {
            held.insert(k);
        } else if what.starts_with("released")
            || what.contains("was lost to another host")
            || what.starts_with("could not start")
            || what.starts_with("taken by another host before")
            || what.starts_with("stopped with an error")
        {
            held.remove(&k);
        }
    }
    held
}

/// The stale redeliveries a host's spouts recognised (and did not emit), as
/// its log says at each spout's close.
fn stale_in(log: &str) -> u64 {
    let marker = " redelivered message(s) whose acks were already confirmed";
    log.lines()
        .filter_map(|l| l.find(marker).map(|at| &l[..at]))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

#[test]
fn a_killed_hosts_partitions_move_to_the_survivors_and_every_count_is_exact() {
    let Some(mut g) = Group::new("group_kill", 4000, 400) else { return };
    for id in ["h0", "h1", "h2"] {
        g.start(id);
    }
    g.wait_settled(2, Duration::from_secs(60));
    let victim = g.held("h1");
    let killed = Instant::now();
    g.hosts["h1"].signal(libc::SIGKILL);
    let _ = g.hosts.remove("h1").map(Running::wait);
    g.wait_until("taken over", Duration::from_secs(60), |held| {
        victim.iter().all(|k| held.values().any(|h| h.contains(k)))
    });
    let moved = killed.elapsed();
    eprintln!("the killed host's partitions {victim:?} run again after {moved:?}");
    // Each was taken at its lease's expiry: by the read the expiry timer
    // started, or by a turn or a wake that came first after the expiry
    // was due. A takeover that waited for a later turn says how long after
    // the expiry it came, and fails here (seen so with the timer turned
    // off). How long the expiry and the restore take is the group bench's.
    let logs = g.hosts.keys().map(|id| g.log(id)).collect::<String>();
    for k in &victim {
        let taken = format!("partition {k}: taken over from h1, whose lease expired");
        let line = logs.lines().find(|l| l.contains(&taken));
        assert!(
            line.is_some_and(|l| l.contains("at the expiry it foresaw")
                || l.contains("which came first after the expiry was due")),
            "partition {k} was taken over from h1 at its expiry: {line:?}\n{}",
            tail(&logs, 80)
        );
        eprintln!("{}", line.unwrap_or_default());
    }
    g.wait_all_acked(Duration::from_secs(120));
    g.stop_all();
    assert_eq!(g.counts(), g.expected());
}

#[test]
fn a_host_that_joins_takes_its_share_and_every_count_is_exact() {
    let Some(mut g) = Group::new("group_join", 4000, 400) else { return };
    g.start("h0");
    g.start("h1");
    g.wait_settled(4, Duration::from_secs(60));
    let addr = crate::http::bound_addr(g.start_with("h2", &["--http", "0"]));
    g.wait_until("joined", Duration::from_secs(60), |held| {
        held.values().all(|h| (2..=3).contains(&h.len()))
    });
    // The joiner's endpoint shows its partitions with their lease epochs.
    let view = crate::http::poll(addr, "/api/v1/group", Duration::from_secs(10), |v| {
        v["partitions"].as_array().is_some_and(|p| p.len() >= 2)
    });
    assert_eq!(view["host"], "h2");
    let members: Vec<&str> =
        view["members"].as_array().unwrap().iter().filter_map(|m| m.as_str()).collect();
    assert_eq!(members, ["h0", "h1", "h2"]);
    let mine: BTreeSet<u32> = view["partitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            assert!(p["epoch"].as_u64().unwrap() >= 2, "taken after a release: {p}");
            p["partition"].as_u64().unwrap() as u32
        })
        .collect();
    assert_eq!(mine, g.held("h2"), "the endpoint and the log agree");
    assert_eq!(crate::http::request(addr, "GET", "/readyz").status, 200);
    let metrics = crate::http::request(addr, "GET", "/metrics").body;
    assert!(metrics.contains("squall_group_partition_epoch{partition="), "{metrics}");
    // `squall group status` reads the same from the broker, without joining.
    let status = g.status();
    let hosts: Vec<&str> =
        status["members"].as_array().unwrap().iter().map(|m| m["host"].as_str().unwrap()).collect();
    assert_eq!(hosts, ["h0", "h1", "h2"], "{status:#}");
    for m in status["members"].as_array().unwrap() {
        let id = m["host"].as_str().unwrap();
        assert_eq!(m["state"], "alive", "{status:#}");
        let listed: BTreeSet<u32> = m["partitions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|k| k.as_u64().unwrap() as u32)
            .collect();
        assert_eq!(listed, g.held(id), "{id}: the broker and the log agree\n{status:#}");
    }
    for p in status["partitions"].as_array().unwrap() {
        assert_eq!(p["state"], "held", "{status:#}");
        assert!(p["epoch"].as_u64().unwrap() >= 1, "{status:#}");
        assert!(p["pending"].is_u64() && p["unacked"].is_u64(), "the lag is read: {status:#}");
    }
    // The joiner's live page shows the same partitions, with their epochs.
    if let (Some(chromium), Some(chromedriver)) =
        (require_tool("chromium"), require_tool("chromedriver"))
    {
        let profile = g.ws.path("chromium-profile");
        let browser = crate::browser::Browser::start(&chromedriver, &chromium, &profile);
        browser.open(&format!("http://{addr}/"));
        browser
            .wait("the host", Duration::from_secs(20), |b| b.text("#host").filter(|t| t == "h2"));
        let rows = browser.wait("h2's partitions", Duration::from_secs(20), |b| {
            let n = b.count("#partitions tbody tr");
            (n == mine.len()).then_some(n)
        });
        for k in &mine {
            let epoch = browser.text(&format!("#partitions tr[data-partition=\"{k}\"] .epoch"));
            assert!(epoch.is_some_and(|e| e.parse::<u64>().is_ok_and(|e| e >= 2)), "partition {k}");
        }
        eprintln!("the live page shows h2's {rows} partitions");
    }
    g.wait_all_acked(Duration::from_secs(120));
    let status = g.status();
    for p in status["partitions"].as_array().unwrap() {
        assert_eq!((p["pending"].as_u64(), p["unacked"].as_u64()), (Some(0), Some(0)), "{p}");
    }
    let logs = g.stop_all();
    assert!(!logs["h2"].contains("taken over from"), "the joiner took released partitions only");
    // Every host left and released its partitions; the text form says so.
    let status = g.status();
    assert!(status["members"].as_array().unwrap().iter().all(|m| m["state"] == "left"));
    assert!(status["partitions"].as_array().unwrap().iter().all(|p| p["state"] == "released"));
    let text = SquallCommand::new(&g.ws, ["group", "status"]).arg(&g.file).output();
    text.assert_code(0);
    assert!(
        text.stdout.contains("PARTITION") && text.stdout.contains("released"),
        "{}",
        text.stdout
    );
    assert_eq!(g.counts(), g.expected());
}

#[test]
fn a_host_woken_after_its_lease_expired_commits_nothing_and_every_count_is_exact() {
    let Some(mut g) = Group::new("group_zombie", 3000, 400) else { return };
    for id in ["h0", "h1", "h2"] {
        g.start(id);
    }
    g.wait_settled(2, Duration::from_secs(60));
    let victim = g.held("h2");
    g.hosts["h2"].signal(libc::SIGSTOP);
    // While h2 is stopped its leases expire; the others take its partitions
    // and process everything, also what h2 had counted and not committed.
    let others = ["h0", "h1"];
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let taken: BTreeSet<u32> = others.iter().flat_map(|id| g.held(id)).collect();
        if victim.is_subset(&taken) {
            break;
        }
        assert!(Instant::now() < deadline, "h2's partitions {victim:?} were not taken: {taken:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
    g.wait_all_acked(Duration::from_secs(120));
    // h2 wakes up: its stores still hold changes it never committed.
    g.hosts["h2"].signal(libc::SIGCONT);
    let deadline = Instant::now() + Duration::from_secs(30);
    while !(g.log("h2").contains("was lost to another host")
        && g.log("h2").contains("not committed: partition"))
    {
        assert!(
            Instant::now() < deadline,
            "h2 did not find its leases lost and its commits refused\n{}",
            tail(&g.log("h2"), 60)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // Once the group settles again (h2 gets partitions back), stop it all.
    g.wait_settled(2, Duration::from_secs(60));
    let logs = g.stop_all();
    assert!(logs["h2"].contains("lost "), "\n{}", tail(&logs["h2"], 40));
    assert_eq!(g.counts(), g.expected(), "h2's late commits would have overwritten counts");
}

/// Seen failing before the JetStream spout recognised stale redeliveries
/// (2026-12-01: counts 2 to 52 % too high, every partition): a message whose
/// ack timed out (`ack_wait` 3 s) was sent again by the server while its
/// ack was on the way; the copy waited in the spout's feed until after the
/// ack was confirmed, when its sequence had left the position, and was
/// counted a second time. The spout now remembers confirmed sequences for
/// a while (`squall_connector::durable`, "Stale redeliveries").
#[test]
fn a_rolling_restart_of_every_host_loses_nothing_and_counts_nothing_twice() {
    let Some(mut g) = Group::new("group_rolling", 4000, 200) else { return };
    // The watch's reports of each release (debug) show it saw them.
    g.log_filter = Some("info,squall_host::group::member=debug");
    for id in ["h0", "h1", "h2"] {
        g.start(id);
    }
    g.wait_settled(2, Duration::from_secs(60));
    let mut stale = 0;
    let mut stopped = Vec::new();
    for id in ["h0", "h1", "h2"] {
        let running = g.hosts.remove(id).expect("running");
        running.terminate();
        let out = running.wait();
        out.assert_code(0);
        assert!(out.stderr.contains(&format!("host {id} left")), "\n{}", tail(&out.stderr, 40));
        assert!(!out.stderr.contains("not committed"), "\n{}", tail(&out.stderr, 40));
        stale += stale_in(&out.stderr);
        stopped.push(out.stderr);
        g.start(id);
        g.wait_settled(2, Duration::from_secs(60));
    }
    g.wait_all_acked(Duration::from_secs(120));
    let logs = g.stop_all();
    for (id, log) in &logs {
        assert!(!log.contains("taken over from"), "{id}: a SIGTERM releases, nothing expires");
        stale += stale_in(log);
    }
    eprintln!("stale redeliveries recognised and not counted: {stale}");
    // No partition waits for more than its restore and the moment in which
    // its taker learns of the release. The taker's watch wakes it (the take
    // says "woken by the watch"), so it need not wait for its next turn
    // (lease/4 = 500 ms, or two while the leaving host still counted in the
    // shares: seen so on CI, 1.30 s idle with a 257 ms restore). A take on
    // the taker's own turn is fine only when that turn's read began before
    // the watch reported the release (the release landed mid-turn, and the
    // read found it first); the taker's log must hold the watch's report,
    // so a watch that runs but never reports fails too; or when the read
    // began before the watch was watching (the taker had just joined), and
    // the taker's log shows its watch did start (a debug line), so a watch
    // that never starts fails too. A take
    // that another host won first sends the loser back to read and plan
    // at once (seen failing before that: both hosts chose the lowest free
    // partitions, and the loser's share waited 461 ms for its turn, when
    // its watch had reported the release). No timing is asserted: how
    // long the wake takes (6-57 ms on a quiet machine, 267 ms once on CI
    // beside other tests) is the machine's, not the mechanism's.
    stopped.extend(logs.into_values());
    let moves = moves_in(&stopped);
    assert!(moves.len() >= 6, "each restart moves partitions away and back: {moves:?}");
    for m in &moves {
        eprintln!("{m:?}");
        let woken = m.learnt.contains("woken by the watch");
        let read_first = m.learnt.contains("read began before the watch reported the release");
        // A host that had just joined (or whose watch was starting again)
        // finds a release with its first read; its watch never saw it.
        let unwatched = m.learnt.contains("read began before the watch was watching");
        assert!(
            (unwatched && m.watched) || (m.reported && (woken || read_first)),
            "partition {} idle {:?} after its release (epoch {}), its restore took {:?}: its \
             taker learnt of it {:?}, its watch {} the release and {}\n{}",
            m.partition,
            m.idle,
            m.epoch,
            m.restore,
            m.learnt,
            if m.reported { "reported" } else { "never reported" },
            if m.watched { "did start" } else { "never started" },
            stopped
                .iter()
                .enumerate()
                .flat_map(|(i, l)| l.lines().map(move |line| (i, line)))
                .filter(|(_, l)| l.contains(&format!("partition {}", m.partition))
                    || l.contains("group ")
                    || l.contains("watch"))
                .map(|(i, l)| format!("log {i}: {l}\n"))
                .collect::<String>()
        );
    }
    assert_eq!(g.counts(), g.expected());
}

/// A partition released by one host and run again by another.
#[derive(Debug)]
#[allow(dead_code)] // the fields are printed
struct Move {
    partition: u32,
    epoch: u64,
    /// From the release to the taker's `running`.
    idle: Duration,
    /// From the take to `running`: starting the topology and restoring its state.
    restore: Duration,
    /// How the taker learnt of the release, as its take line says.
    learnt: String,
    /// The taker's watch reported the release (a debug line).
    reported: bool,
    /// The taker's watch started watching the leases (a debug line).
    watched: bool,
}

/// The seconds since the month began at the start of a log line
/// (`2026-12-02T19:30:00.123456Z  INFO …`); `None` for other lines.
fn logged_at(line: &str) -> Option<f64> {
    let stamp = line.split_whitespace().next()?.strip_suffix('Z')?;
    let (date, time) = stamp.split_once('T')?;
    let day: f64 = date.rsplit('-').next()?.parse().ok()?;
    let mut parts = time.split(':');
    let (h, m, s): (f64, f64, f64) =
        (parts.next()?.parse().ok()?, parts.next()?.parse().ok()?, parts.next()?.parse().ok()?);
    Some(day * 86_400.0 + h * 3600.0 + m * 60.0 + s)
}

/// Every release (`partition K: released (epoch E)`) that a take of epoch
/// E + 1 and a run followed, in any of the hosts' logs.
fn moves_in(logs: &[String]) -> Vec<Move> {
    let mut moves = Vec::new();
    for line in logs.iter().flat_map(|l| l.lines()) {
        let Some(at) = line.find("partition ") else { continue };
        let rest = &line[at + "partition ".len()..];
        let Some((k, what)) = rest.split_once(": released (epoch ") else { continue };
        let (Ok(partition), Some(Ok(epoch))) =
            (k.parse::<u32>(), what.strip_suffix(')').map(str::parse::<u64>))
        else {
            continue;
        };
        let take = format!("partition {partition}: taken (epoch {}) ", epoch + 1);
        // The taker's log, and its take line there.
        let Some((taker, taken)) = logs.iter().find_map(|l| {
            let taken = l.lines().find(|t| t.contains(&take))?;
            Some((l, taken))
        }) else {
            continue;
        };
        let run = format!("partition {partition}: running (epoch {})", epoch + 1);
        let report = format!("the watch saw partition {partition} released (epoch {epoch})");
        let (Some(released), Some(took), Some(running)) = (
            logged_at(line),
            logged_at(taken),
            taker.lines().find(|l| l.contains(&run)).and_then(logged_at),
        ) else {
            continue;
        };
        let learnt = taken.split_once(take.as_str()).map_or("", |(_, how)| how).to_owned();
        moves.push(Move {
            partition,
            epoch,
            idle: Duration::from_secs_f64((running - released).max(0.0)),
            restore: Duration::from_secs_f64((running - took).max(0.0)),
            learnt,
            reported: taker.contains(&report),
            watched: taker.contains("the watch is watching the leases"),
        });
    }
    moves
}

/// The group's broker (a NATS server of the test's own, so the tests
/// beside it never notice) stops for twice the lease time mid-run, then
/// starts again with its store: no lease can be renewed meanwhile, so every
/// host's fences run out and its commits are refused; once the server is
/// back, the leases, the consumers and the commits recover.
#[test]
fn a_broker_restart_mid_run_recovers_leases_and_consumers_and_every_count_is_exact() {
    let Some(mut server) = OwnServer::start(ServerKind::Nats, "group_broker") else { return };
    let addr = server.addr().to_string();
    let Some(mut g) = Group::on(&addr, "group_broker", 3000, 400) else { return };
    for id in ["h0", "h1", "h2"] {
        g.start(id);
    }
    g.wait_settled(2, Duration::from_secs(60));
    let before = g.hosts.keys().map(|id| (id.clone(), g.held(id))).collect::<BTreeMap<_, _>>();
    std::thread::sleep(Duration::from_secs(1));
    server.stop();
    std::thread::sleep(Duration::from_millis(2 * LEASE_MS));
    server.up();
    g.wait_all_acked(Duration::from_secs(120));
    let after = g.hosts.keys().map(|id| (id.clone(), g.held(id))).collect::<BTreeMap<_, _>>();
    eprintln!("partitions before the restart {before:?}, after {after:?}");
    let logs = g.stop_all();
    for (id, log) in &logs {
        assert!(log.contains(&format!("host {id} left")), "{id}\n{}", tail(log, 40));
    }
    assert_eq!(g.counts(), g.expected());
}

#[test]
fn a_group_table_with_an_unknown_key_or_without_shared_state_is_refused_with_its_place() {
    let ws = Workspace::new("group_config");
    let base = format!(
        r#"[plugins]
examples = "{}"

[spouts.s]
component = "examples::RandomSentenceSpout"
"#,
        plugin_path("examples").display()
    );
    let file = ws.write_topology(
        "typo.toml",
        &format!(
            "{base}\n[state]\nbackend = \"memory\"\n\n[group]\nname = \"g\"\npartitions = 4\nlease = 3000\n"
        ),
    );
    let out = SquallCommand::validate(&ws, &file).output();
    out.assert_code(78);
    assert!(out.stderr.contains("typo.toml:13:1"), "the unknown key's place\n{}", out.context());
    assert!(out.stderr.contains("lease_ms"), "a did-you-mean\n{}", out.context());
    assert!(
        out.stderr.contains("typo.toml:10:1") && out.stderr.contains("memory state backend"),
        "the memory backend cannot move partitions\n{}",
        out.context()
    );
    let file = ws.write_topology("nopart.toml", &format!("{base}\n[group]\nname = \"g\"\n"));
    let out = SquallCommand::validate(&ws, &file).output();
    out.assert_code(78);
    assert!(
        out.stderr.contains("nopart.toml:7:1: error: missing key \"partitions\""),
        "\n{}",
        out.context()
    );
    let file = ws.write_topology(
        "nostate.toml",
        &format!("{base}\n[group]\nname = \"g\"\npartitions = 2\n"),
    );
    let out = SquallCommand::validate(&ws, &file).output();
    out.assert_code(78);
    assert!(
        out.stderr.contains("nostate.toml:7:1: error: a group needs [state]"),
        "\n{}",
        out.context()
    );
    // `squall group status` of a file without [group], and of a group no
    // host has run: one line each, not a hang or a made-up table.
    let plain = ws.write_topology("plain.toml", &base);
    let out = SquallCommand::new(&ws, ["group", "status"]).arg(&plain).output();
    out.assert_code(1);
    assert!(out.stderr.contains("has no [group] table"), "\n{}", out.context());
    if require_service(NATS) {
        let file = ws.write_topology(
            "never.toml",
            &format!(
                "[plugins]\nexamples = \"{}\"\nstate = \"{}\"\n\n\
                 [spouts.s]\ncomponent = \"examples::RandomSentenceSpout\"\n\n\
                 [state]\nbackend = \"state::RedisState\"\n\n\
                 [group]\nname = \"{}\"\npartitions = 2\nurl = \"nats://{}\"\n",
                plugin_path("examples").display(),
                plugin_path("state_redis").display(),
                unique_name("never"),
                NATS.addr
            ),
        );
        let out = SquallCommand::new(&ws, ["group", "status"]).arg(&file).output();
        out.assert_code(69);
        assert!(out.stderr.contains("no host of the group has run yet"), "\n{}", out.context());
    }
}
