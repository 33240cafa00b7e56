//! Tests against the real Redis on 127.0.0.1:6379 (and, for the restart
//! test, a private `redis-server` on another port). Without a server a test
//! says it skipped; under `SQUALL_REQUIRE_TOOLS=1` it fails instead.

use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use squall_plugin_api::testing::{del, loaded, pairs, put, writes};

use super::*;

const REDIS: &str = "127.0.0.1:6379";

fn required() -> bool {
    std::env::var("SQUALL_REQUIRE_TOOLS").is_ok_and(|v| v == "1")
}

/// True when Redis answers; otherwise skips (or fails when required).
fn require_redis() -> bool {
    let addr: SocketAddr = REDIS.parse().unwrap();
    if TcpStream::connect_timeout(&addr, Duration::from_secs(1)).is_ok() {
        return true;
    }
    assert!(
        !required(),
        "Redis does not answer on {REDIS}, and SQUALL_REQUIRE_TOOLS=1 requires it"
    );
    eprintln!("SKIPPED: Redis does not answer on {REDIS}; set SQUALL_REQUIRE_TOOLS=1 to fail");
    false
}

fn unique(prefix: &str) -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos();
    format!("{prefix}-{}-{nanos:x}-{}", std::process::id(), N.fetch_add(1, Ordering::Relaxed))
}

fn backend_at(url: &str) -> RedisState {
    let config = format!("url = {url:?}\nconnect_timeout_ms = 2000\n");
    RedisState::new(&ComponentConfig::new(&config)).unwrap()
}

/// A backend opened on a fresh namespace; [`Ns::drop`] clears it.
struct Ns {
    backend: RedisState,
    name: String,
}

impl Ns {
    fn new(test: &str) -> Self {
        let name = unique(test);
        let mut backend = backend_at("redis://127.0.0.1:6379");
        backend.open(&name).unwrap();
        Ns { backend, name }
    }
}

impl Drop for Ns {
    fn drop(&mut self) {
        let _ = self.backend.clear();
    }
}

fn raw() -> Connection {
    Client::open("redis://127.0.0.1:6379").unwrap().get_connection().unwrap()
}

#[test]
fn bad_config_is_refused_in_one_line() {
    let e = RedisState::new(&ComponentConfig::new("url = \"htp://x\"\n")).unwrap_err().to_string();
    assert!(e.contains("not a valid redis url") && !e.contains('\n'), "{e}");
    let e = RedisState::new(&ComponentConfig::new("batch = 0\n")).unwrap_err().to_string();
    assert!(e.contains("batch"), "{e}");
}

#[test]
fn an_unreachable_server_is_a_one_line_error() {
    let mut b = RedisState::new(&ComponentConfig::new(
        "url = \"redis://127.0.0.1:1\"\nconnect_timeout_ms = 200\n",
    ))
    .unwrap();
    let e = b.open("x").unwrap_err().to_string();
    assert!(e.starts_with("cannot connect to redis at 127.0.0.1:1"), "{e}");
    assert!(!e.contains('\n'), "{e}");
}

/// The assertions every backend passes (round trip, deletes, fencing,
/// clear), shared with the other backends (`check_state_backend`).
#[test]
fn passes_the_shared_backend_suite() {
    if !require_redis() {
        return;
    }
    let mut names = Vec::new();
    let result = squall_plugin_api::testing::check_state_backend(|name| {
        let name = unique(&format!("suite-{name}"));
        let mut b = backend_at("redis://127.0.0.1:6379");
        b.open(&name).unwrap();
        names.push(name);
        b
    });
    for name in names {
        let mut b = backend_at("redis://127.0.0.1:6379");
        if b.open(&name).is_ok() {
            let _ = b.clear();
        }
    }
    result.unwrap();
}

#[test]
fn round_trip() {
    if !require_redis() {
        return;
    }
    let mut ns = Ns::new("round-trip");
    let b = &mut ns.backend;
    assert_eq!(b.last_committed().unwrap(), None);
    assert!(b.scopes().unwrap().is_empty());
    assert!(b.load("count/words").unwrap().is_empty());
    b.commit(
        1,
        &[
            writes("count/words", vec![put("a", "1"), put("b", "2")]),
            writes("spout/$position", vec![put("0", "p1")]),
        ],
    )
    .unwrap();
    assert_eq!(b.last_committed().unwrap(), Some(1));
    assert_eq!(b.scopes().unwrap(), ["count/words", "spout/$position"]);
    assert_eq!(loaded(b, "count/words"), pairs(&[("a", "1"), ("b", "2")]));
    b.commit(2, &[writes("count/words", vec![put("a", "3"), put("c", "4")])]).unwrap();
    assert_eq!(b.last_committed().unwrap(), Some(2));
    assert_eq!(loaded(b, "count/words"), pairs(&[("a", "3"), ("b", "2"), ("c", "4")]));
    assert_eq!(loaded(b, "spout/$position"), pairs(&[("0", "p1")]));
    // A commit with no writes still moves the checkpoint.
    b.commit(3, &[]).unwrap();
    assert_eq!(b.last_committed().unwrap(), Some(3));
    // Binary keys and values survive.
    let bin =
        StateRecord { key: vec![0, 255, 10].into(), value: ROption::RSome(vec![0, 0, 13].into()) };
    b.commit(4, &[writes("bin", vec![bin.clone()])]).unwrap();
    assert_eq!(b.load("bin").unwrap(), vec![bin]);
}

#[test]
fn deletes() {
    if !require_redis() {
        return;
    }
    let mut ns = Ns::new("deletes");
    let b = &mut ns.backend;
    b.commit(
        1,
        &[writes("s", vec![put("a", "1"), put("b", "2")]), writes("t", vec![put("x", "1")])],
    )
    .unwrap();
    b.commit(2, &[writes("s", vec![del("a"), del("never")])]).unwrap();
    assert_eq!(loaded(b, "s"), pairs(&[("b", "2")]));
    // Within one commit the later write of a key wins.
    b.commit(
        3,
        &[writes("s", vec![put("k", "1"), del("k"), put("j", "1"), del("j"), put("j", "2")])],
    )
    .unwrap();
    assert_eq!(loaded(b, "s"), pairs(&[("b", "2"), ("j", "2")]));
    // A scope whose last record is deleted is no longer listed.
    b.commit(4, &[writes("t", vec![del("x")])]).unwrap();
    assert_eq!(b.scopes().unwrap(), ["s"]);
    assert!(b.load("t").unwrap().is_empty());
}

#[test]
fn an_aborted_transaction_is_not_visible() {
    if !require_redis() {
        return;
    }
    let mut ns = Ns::new("aborted");
    let b = &mut ns.backend;
    b.commit(1, &[writes("a", vec![put("k", "1")])]).unwrap();
    b.inject_bad_command = true;
    let e = b
        .commit(2, &[writes("a", vec![put("k", "2"), del("k")]), writes("b", vec![put("x", "1")])])
        .unwrap_err()
        .to_string();
    assert!(e.contains("commit of checkpoint 2 failed"), "{e}");
    assert!(e.contains("aborted"), "{e}");
    assert!(!e.contains('\n'), "{e}");
    assert_eq!(b.last_committed().unwrap(), Some(1));
    assert_eq!(loaded(b, "a"), pairs(&[("k", "1")]));
    assert!(b.load("b").unwrap().is_empty());
    assert_eq!(b.scopes().unwrap(), ["a"]);
    // The host retries the writes with the next checkpoint.
    b.commit(3, &[writes("a", vec![put("k", "2")]), writes("b", vec![put("x", "1")])]).unwrap();
    assert_eq!(b.last_committed().unwrap(), Some(3));
    assert_eq!(loaded(b, "b"), pairs(&[("x", "1")]));
}

#[test]
fn a_key_of_another_type_refuses_the_whole_commit() {
    if !require_redis() {
        return;
    }
    let mut ns = Ns::new("wrongtype");
    let data_b = Keys::new("squall:state", &ns.name).data("b");
    let b = &mut ns.backend;
    b.commit(1, &[writes("a", vec![put("k", "1")])]).unwrap();
    redis::cmd("SET").arg(&data_b).arg("not a hash").query::<()>(&mut raw()).unwrap();
    let e = b
        .commit(2, &[writes("a", vec![put("k", "2")]), writes("b", vec![put("x", "1")])])
        .unwrap_err()
        .to_string();
    assert!(e.contains("holds a string, not a hash"), "{e}");
    assert_eq!(b.last_committed().unwrap(), Some(1));
    assert_eq!(loaded(b, "a"), pairs(&[("k", "1")]));
    redis::cmd("DEL").arg(&data_b).query::<()>(&mut raw()).unwrap();
}

#[test]
fn a_transaction_cut_before_exec_leaves_nothing() {
    // What a kill -9 of the host mid-commit looks like to Redis: MULTI and
    // queued writes, then the connection closes without EXEC.
    if !require_redis() {
        return;
    }
    let mut ns = Ns::new("cut");
    ns.backend.commit(1, &[writes("a", vec![put("k", "1")])]).unwrap();
    let keys = Keys::new("squall:state", &ns.name);
    {
        let mut con = raw();
        redis::cmd("MULTI").query::<()>(&mut con).unwrap();
        redis::cmd("HSET").arg(keys.data("a")).arg("k").arg("2").query::<()>(&mut con).unwrap();
        redis::cmd("SET").arg(&keys.checkpoint).arg("2").query::<()>(&mut con).unwrap();
    }
    std::thread::sleep(Duration::from_millis(100));
    let b = &mut ns.backend;
    assert_eq!(b.last_committed().unwrap(), Some(1));
    assert_eq!(loaded(b, "a"), pairs(&[("k", "1")]));
}

#[test]
fn last_committed_survives_a_lost_connection_and_a_new_instance() {
    if !require_redis() {
        return;
    }
    let mut ns = Ns::new("reconnect");
    ns.backend.commit(7, &[writes("a", vec![put("k", "1")])]).unwrap();
    // Kill every connection of ours: the next call fails or reconnects.
    let id: i64 = redis::cmd("CLIENT").arg("ID").query(ns.backend.con.as_mut().unwrap()).unwrap();
    redis::cmd("CLIENT").arg("KILL").arg("ID").arg(id).query::<()>(&mut raw()).unwrap();
    let first = ns.backend.commit(8, &[writes("a", vec![put("k", "2")])]);
    if let Err(e) = &first {
        assert!(e.to_string().contains("connection lost"), "{e}");
        assert_eq!(ns.backend.last_committed().unwrap(), Some(7));
        ns.backend.commit(8, &[writes("a", vec![put("k", "2")])]).unwrap();
    }
    assert_eq!(ns.backend.last_committed().unwrap(), Some(8));
    let mut other = backend_at("redis://127.0.0.1:6379");
    other.open(&ns.name).unwrap();
    assert_eq!(other.last_committed().unwrap(), Some(8));
    assert_eq!(loaded(&mut other, "a"), pairs(&[("k", "2")]));
    other.close();
}

#[test]
fn clear_deletes_every_key_of_the_namespace_only() {
    if !require_redis() {
        return;
    }
    let mut ns = Ns::new("clear");
    let mut other = Ns::new("clear-other");
    ns.backend
        .commit(1, &[writes("a", vec![put("k", "1")]), writes("b", vec![put("k", "1")])])
        .unwrap();
    other.backend.commit(5, &[writes("a", vec![put("k", "1")])]).unwrap();
    ns.backend.clear().unwrap();
    assert_eq!(ns.backend.last_committed().unwrap(), None);
    assert!(ns.backend.scopes().unwrap().is_empty());
    assert!(ns.backend.load("a").unwrap().is_empty());
    let pattern = format!("squall:state:{{{}}}*", ns.name);
    let left: Vec<String> = redis::cmd("KEYS").arg(&pattern).query(&mut raw()).unwrap();
    assert!(left.is_empty(), "{left:?}");
    assert_eq!(other.backend.last_committed().unwrap(), Some(5));
    assert_eq!(loaded(&mut other.backend, "a"), pairs(&[("k", "1")]));
}

fn many(n: usize) -> Vec<StateRecord> {
    (0..n)
        .map(|i| StateRecord {
            key: format!("key-{i:08}").into_bytes().into(),
            value: ROption::RSome(format!("value-{i}").into_bytes().into()),
        })
        .collect()
}

fn check_many(b: &mut RedisState, n: usize) -> Duration {
    let started = Instant::now();
    let mut got = b.load("big").unwrap();
    let took = started.elapsed();
    assert_eq!(got.len(), n);
    got.sort_by(|x, y| x.key.cmp(&y.key));
    assert_eq!(got, many(n));
    took
}

#[test]
fn loads_100k_records() {
    if !require_redis() {
        return;
    }
    let mut ns = Ns::new("100k");
    ns.backend.commit(1, &[writes("big", many(100_000))]).unwrap();
    let took = check_many(&mut ns.backend, 100_000);
    eprintln!("redis: load of 100000 records took {took:?}");
}

/// Measures; run with `cargo test --release -p squall-state-redis -- --ignored`.
#[test]
#[ignore = "a measurement: 1 M records"]
fn measure_load_of_1m_records() {
    if !require_redis() {
        return;
    }
    let mut ns = Ns::new("1m");
    let started = Instant::now();
    ns.backend.commit(1, &[writes("big", many(1_000_000))]).unwrap();
    eprintln!("redis: commit of 1000000 records took {:?}", started.elapsed());
    for _ in 0..3 {
        let took = check_many(&mut ns.backend, 1_000_000);
        eprintln!("redis: load of 1000000 records took {took:?}");
    }
}

/// A private redis-server without persistence, on a free port.
fn spawn_server(port: u16) -> Option<Child> {
    let child = Command::new("redis-server")
        .args([
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn();
    let child = match child {
        Ok(c) => c,
        Err(e) => {
            assert!(
                !required(),
                "cannot start redis-server ({e}), and SQUALL_REQUIRE_TOOLS=1 requires it"
            );
            eprintln!("SKIPPED: cannot start redis-server: {e}");
            return None;
        }
    };
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_err() {
        assert!(Instant::now() < deadline, "redis-server on {port} did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    Some(child)
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

#[test]
fn works_again_once_a_stopped_server_is_back() {
    let port = free_port();
    let Some(mut server) = spawn_server(port) else { return };
    let mut b = backend_at(&format!("redis://127.0.0.1:{port}"));
    b.open("restart").unwrap();
    b.commit(1, &[writes("a", vec![put("k", "1")])]).unwrap();
    server.kill().unwrap();
    server.wait().unwrap();
    let e = b.commit(2, &[writes("a", vec![put("k", "2")])]).unwrap_err().to_string();
    assert!(e.contains("commit of checkpoint 2"), "{e}");
    assert!(!e.contains('\n'), "{e}");
    let e = b.commit(3, &[writes("a", vec![put("k", "3")])]).unwrap_err().to_string();
    assert!(e.contains("cannot reconnect"), "{e}");
    let Some(mut server) = spawn_server(port) else { return };
    // The server lost its data (no persistence); the backend just works again.
    b.commit(4, &[writes("a", vec![put("k", "4")])]).unwrap();
    assert_eq!(b.last_committed().unwrap(), Some(4));
    assert_eq!(loaded(&mut b, "a"), pairs(&[("k", "4")]));
    server.kill().unwrap();
    server.wait().unwrap();
}

#[test]
fn a_commit_not_numbered_above_the_last_one_is_refused_and_writes_nothing() {
    if !require_redis() {
        return;
    }
    let mut ns = Ns::new("fenced");
    let b = &mut ns.backend;
    // A newer owner's first commit (a group's fence) is numbered high.
    b.commit(5 << 32, &[writes("a", vec![put("k", "new")])]).unwrap();
    for late in [3, 5 << 32] {
        let e = b.commit(late, &[writes("a", vec![put("k", "old")])]).unwrap_err().to_string();
        assert!(e.contains("not above the last committed"), "{e}");
    }
    assert_eq!(b.last_committed().unwrap(), Some(5 << 32));
    assert_eq!(loaded(b, "a"), pairs(&[("k", "new")]));
    b.commit((5 << 32) + 1, &[writes("a", vec![put("k", "next")])]).unwrap();
    assert_eq!(loaded(b, "a"), pairs(&[("k", "next")]));
}
