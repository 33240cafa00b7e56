//! Tests against the real PostgreSQL on 127.0.0.1:5432. Without a server a
//! test says it skipped; under `SQUALL_REQUIRE_TOOLS=1` it fails instead.

use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use squall_plugin_api::testing::{del, loaded, pairs, put, writes};

use super::*;

const PG: &str = "127.0.0.1:5432";
const URL: &str = "host=127.0.0.1 port=5432 user=postgres dbname=postgres";

/// True when PostgreSQL answers; otherwise skips (or fails when required).
fn require_pg() -> bool {
    let addr: SocketAddr = PG.parse().unwrap();
    if TcpStream::connect_timeout(&addr, Duration::from_secs(1)).is_ok() {
        return true;
    }
    let required = std::env::var("SQUALL_REQUIRE_TOOLS").is_ok_and(|v| v == "1");
    assert!(
        !required,
        "PostgreSQL does not answer on {PG}, and SQUALL_REQUIRE_TOOLS=1 requires it"
    );
    eprintln!("SKIPPED: PostgreSQL does not answer on {PG}; set SQUALL_REQUIRE_TOOLS=1 to fail");
    false
}

fn unique(prefix: &str) -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos();
    format!("{prefix}-{}-{nanos:x}-{}", std::process::id(), N.fetch_add(1, Ordering::Relaxed))
}

fn backend() -> PostgresState {
    PostgresState::new(&ComponentConfig::new(&format!("url = {URL:?}\n"))).unwrap()
}

/// A backend opened on a fresh namespace; dropping it clears the namespace.
struct Ns {
    backend: PostgresState,
    name: String,
}

impl Ns {
    fn new(test: &str) -> Self {
        let name = unique(test);
        let mut backend = backend();
        backend.open(&name).unwrap();
        Ns { backend, name }
    }
}

impl Drop for Ns {
    fn drop(&mut self) {
        let _ = self.backend.clear();
    }
}

#[test]
fn bad_config_is_refused_in_one_line() {
    let e = PostgresState::new(&ComponentConfig::new("table = \"a;b\"\n")).unwrap_err().to_string();
    assert!(e.contains("table"), "{e}");
    let e = PostgresState::new(&ComponentConfig::new("url = \"postgres://x:y:z\"\n"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("not a valid postgres connection string") && !e.contains('\n'), "{e}");
    assert!(PostgresState::new(&ComponentConfig::new(
        "url = \"postgresql://root@127.0.0.1/test\"\n"
    ))
    .is_ok());
}

#[test]
fn an_unreachable_server_is_a_one_line_error() {
    let mut b = PostgresState::new(&ComponentConfig::new(
        "url = \"host=127.0.0.1 port=1 user=postgres\"\nconnect_timeout_ms = 300\n",
    ))
    .unwrap();
    let e = b.open("x").unwrap_err().to_string();
    assert!(e.starts_with("cannot connect to postgres at 127.0.0.1:1"), "{e}");
    assert!(!e.contains('\n'), "{e}");
}

/// The assertions every backend passes (round trip, deletes, fencing,
/// clear), shared with the other backends (`check_state_backend`).
#[test]
fn passes_the_shared_backend_suite() {
    if !require_pg() {
        return;
    }
    let mut names = Vec::new();
    let result = squall_plugin_api::testing::check_state_backend(|name| {
        let name = unique(&format!("suite-{name}"));
        let mut b = backend();
        b.open(&name).unwrap();
        names.push(name);
        b
    });
    for name in names {
        let mut b = backend();
        if b.open(&name).is_ok() {
            let _ = b.clear();
        }
    }
    result.unwrap();
}

#[test]
fn round_trip() {
    if !require_pg() {
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
            writes("spout/$position", vec![put("0", "p'1")]),
        ],
    )
    .unwrap();
    assert_eq!(b.last_committed().unwrap(), Some(1));
    assert_eq!(b.scopes().unwrap(), ["count/words", "spout/$position"]);
    assert_eq!(loaded(b, "count/words"), pairs(&[("a", "1"), ("b", "2")]));
    b.commit(2, &[writes("count/words", vec![put("a", "3"), put("c", "4")])]).unwrap();
    assert_eq!(loaded(b, "count/words"), pairs(&[("a", "3"), ("b", "2"), ("c", "4")]));
    assert_eq!(loaded(b, "spout/$position"), pairs(&[("0", "p'1")]));
    b.commit(3, &[]).unwrap();
    assert_eq!(b.last_committed().unwrap(), Some(3));
    let bin =
        StateRecord { key: vec![0, 255, 10].into(), value: ROption::RSome(vec![0, 0, 13].into()) };
    b.commit(4, &[writes("it's", vec![bin.clone()])]).unwrap();
    assert_eq!(b.load("it's").unwrap(), vec![bin]);
}

#[test]
fn deletes() {
    if !require_pg() {
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
    // Within one commit the later write of a key wins, also across entries of one scope.
    b.commit(
        3,
        &[
            writes("s", vec![put("k", "1"), del("k"), put("j", "1")]),
            writes("s", vec![del("j"), put("j", "2")]),
        ],
    )
    .unwrap();
    assert_eq!(loaded(b, "s"), pairs(&[("b", "2"), ("j", "2")]));
    b.commit(4, &[writes("t", vec![del("x")])]).unwrap();
    assert_eq!(b.scopes().unwrap(), ["s"]);
    assert!(b.load("t").unwrap().is_empty());
}

#[test]
fn a_commit_failing_inside_the_transaction_is_not_visible() {
    if !require_pg() {
        return;
    }
    let mut ns = Ns::new("rollback");
    let b = &mut ns.backend;
    b.commit(1, &[writes("a", vec![put("k", "1")])]).unwrap();
    // A scope name PostgreSQL cannot store (text holds no NUL): the COPY
    // fails after the other scope's rows were sent.
    let e = b
        .commit(
            2,
            &[writes("a", vec![put("k", "2"), put("n", "1")]), writes("b\0", vec![put("x", "1")])],
        )
        .unwrap_err()
        .to_string();
    assert!(e.contains("commit of checkpoint 2 failed"), "{e}");
    assert!(!e.contains('\n'), "{e}");
    assert_eq!(b.last_committed().unwrap(), Some(1));
    assert_eq!(loaded(b, "a"), pairs(&[("k", "1")]));
    assert_eq!(b.scopes().unwrap(), ["a"]);
    b.commit(3, &[writes("a", vec![put("k", "2")])]).unwrap();
    assert_eq!(loaded(b, "a"), pairs(&[("k", "2")]));
}

fn terminate(pid: i32) {
    let mut admin = Client::connect(URL, NoTls).unwrap();
    let killed: bool = admin.query_one("SELECT pg_terminate_backend($1)", &[&pid]).unwrap().get(0);
    assert!(killed);
    std::thread::sleep(Duration::from_millis(100));
}

#[test]
fn a_connection_dropped_before_commit_leaves_nothing_and_the_next_call_reconnects() {
    if !require_pg() {
        return;
    }
    let mut ns = Ns::new("dropped");
    let b = &mut ns.backend;
    b.commit(1, &[writes("a", vec![put("k", "1")])]).unwrap();
    b.before_commit = Some(terminate);
    let e = b
        .commit(2, &[writes("a", vec![put("k", "2"), del("k")]), writes("b", vec![put("x", "1")])])
        .unwrap_err()
        .to_string();
    assert!(e.contains("connection lost"), "{e}");
    assert!(!e.contains('\n'), "{e}");
    assert!(b.client.is_none());
    assert_eq!(b.last_committed().unwrap(), Some(1));
    assert_eq!(loaded(b, "a"), pairs(&[("k", "1")]));
    assert!(b.load("b").unwrap().is_empty());
    b.commit(3, &[writes("b", vec![put("x", "1")])]).unwrap();
    let mut other = backend();
    other.open(&ns.name).unwrap();
    assert_eq!(other.last_committed().unwrap(), Some(3));
    assert_eq!(loaded(&mut other, "b"), pairs(&[("x", "1")]));
    other.close();
}

#[test]
fn clear_deletes_the_namespace_only() {
    if !require_pg() {
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

fn check_many(b: &mut PostgresState, n: usize) -> Duration {
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
    if !require_pg() {
        return;
    }
    let mut ns = Ns::new("100k");
    ns.backend.commit(1, &[writes("big", many(100_000))]).unwrap();
    let took = check_many(&mut ns.backend, 100_000);
    eprintln!("postgres: load of 100000 records took {took:?}");
}

/// Measures; run with `cargo test --release -p squall-state-postgres -- --ignored`.
#[test]
#[ignore = "a measurement: 1 M records"]
fn measure_load_of_1m_records() {
    if !require_pg() {
        return;
    }
    let mut ns = Ns::new("1m");
    let started = Instant::now();
    ns.backend.commit(1, &[writes("big", many(1_000_000))]).unwrap();
    eprintln!("postgres: commit of 1000000 records took {:?}", started.elapsed());
    for _ in 0..3 {
        let took = check_many(&mut ns.backend, 1_000_000);
        eprintln!("postgres: load of 1000000 records took {took:?}");
    }
}

#[test]
fn a_commit_not_numbered_above_the_last_one_is_refused_and_writes_nothing() {
    if !require_pg() {
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

/// Backends opening at once (a group's partitions on one host) each create
/// the missing tables: `CREATE TABLE IF NOT EXISTS` is not safe against
/// itself in PostgreSQL. Every one must open.
#[test]
fn backends_creating_the_tables_at_once_all_open() {
    if !require_pg() {
        return;
    }
    for round in 0..30 {
        let table = unique(&format!("race{round}")).replace('-', "_");
        let config = format!("url = {URL:?}\ntable = {table:?}\n");
        let start = std::sync::Barrier::new(16);
        let results: Vec<std::result::Result<(), String>> = std::thread::scope(|s| {
            let opens: Vec<_> = (0..16)
                .map(|i| {
                    let (config, start) = (&config, &start);
                    s.spawn(move || {
                        let mut b = PostgresState::new(&ComponentConfig::new(config)).unwrap();
                        start.wait();
                        b.open(&format!("ns{i}")).map_err(|e| e.to_string())
                    })
                })
                .collect();
            opens.into_iter().map(|t| t.join().unwrap()).collect()
        });
        let mut client = Config::from_str(URL).unwrap().connect(NoTls).unwrap();
        let _ = client.batch_execute(&format!(
            "DROP TABLE IF EXISTS \"{table}\"; DROP TABLE IF EXISTS \"{table}_checkpoints\";"
        ));
        for r in &results {
            assert!(r.is_ok(), "round {round}: {r:?}");
        }
    }
}
