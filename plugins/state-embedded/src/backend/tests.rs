//! Unit tests on real files in a fresh folder under the system's temporary
//! folder (removed at the end of each test): the shared backend suite
//! (`squall_plugin_api::testing::check_state_backend`, which the Redis and
//! PostgreSQL backends run too), atomicity of a failing commit, reopening,
//! the lock, namespaces and the config.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use squall_plugin_api::testing::{del, loaded, pairs, put, writes};

use super::*;

/// A fresh folder, removed on drop.
struct Dir(PathBuf);

impl Dir {
    fn new(test: &str) -> Self {
        static N: AtomicU64 = AtomicU64::new(0);
        let nanos = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos();
        let name = format!(
            "squall-embedded-{test}-{}-{nanos:x}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        );
        Dir(std::env::temp_dir().join(name))
    }

    fn backend(&self) -> EmbeddedState {
        let config = format!("path = {:?}\n", self.0.display().to_string());
        EmbeddedState::new(&ComponentConfig::new(&config)).unwrap()
    }

    fn open(&self, namespace: &str) -> EmbeddedState {
        let mut b = self.backend();
        b.open(namespace).unwrap();
        b
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The assertions every backend passes (round trip, deletes, fencing,
/// clear), shared with the Redis and PostgreSQL backends' tests.
#[test]
fn passes_the_shared_backend_suite() {
    let dir = Dir::new("suite");
    squall_plugin_api::testing::check_state_backend(|name| dir.open(name)).unwrap();
}

/// Deleting from a scope that never existed creates nothing.
#[test]
fn a_delete_in_an_unknown_scope_lists_no_scope() {
    let dir = Dir::new("deletes");
    let b = &mut dir.open("deletes");
    b.commit(1, &[writes("s", vec![put("a", "1")])]).unwrap();
    b.commit(2, &[writes("u", vec![del("x")])]).unwrap();
    assert_eq!(b.scopes().unwrap(), ["s"]);
}

#[test]
fn bad_config_is_refused_in_one_line() {
    for (config, says) in [
        ("", "path"),
        ("path = \"\"\n", "must not be empty"),
        ("path = \"state\"\n", "is relative"),
        ("path = \"/x\"\ncache_mib = 0\n", "cache_mib"),
        ("path = \"/x\"\nfolder = \"/y\"\n", "folder"),
        ("path = 3\n", "path"),
    ] {
        let e = EmbeddedState::new(&ComponentConfig::new(config)).unwrap_err().to_string();
        assert!(e.contains(says) && !e.contains('\n'), "{config:?}: {e}");
    }
    let e = EmbeddedState::new(&ComponentConfig::new("path = \"state\"\n")).unwrap_err();
    assert!(e.to_string().contains("${SQUALL_TOPOLOGY_DIR}/state"), "{e}");
}

#[test]
fn a_folder_that_cannot_be_made_is_a_one_line_error() {
    let dir = Dir::new("not-a-folder");
    std::fs::create_dir_all(&dir.0).unwrap();
    let file = dir.0.join("plain");
    std::fs::write(&file, b"x").unwrap();
    let config = format!("path = {:?}\n", file.join("below").display().to_string());
    let mut b = EmbeddedState::new(&ComponentConfig::new(&config)).unwrap();
    let e = b.open("ns").unwrap_err().to_string();
    assert!(e.contains("cannot create folder") && !e.contains('\n'), "{e}");
    // A file that is not a store is refused, and left as it is.
    std::fs::write(dir.0.join("junk.redb"), vec![7_u8; 8192]).unwrap();
    let e = dir.backend().open("junk").unwrap_err().to_string();
    assert!(e.contains("junk.redb") && !e.contains('\n'), "{e}");
    assert_eq!(std::fs::read(dir.0.join("junk.redb")).unwrap(), vec![7_u8; 8192]);
}

#[test]
fn a_commit_failing_midway_leaves_the_previous_checkpoint_intact() {
    let dir = Dir::new("atomic");
    let mut b = dir.open("atomic");
    b.commit(
        1,
        &[writes("a", vec![put("k", "1"), put("gone", "x")]), writes("p", vec![put("0", "1")])],
    )
    .unwrap();
    b.fail_after = Some(3);
    let e = b
        .commit(
            2,
            &[
                writes("a", vec![put("k", "2"), del("gone")]),
                writes("b", vec![put("x", "1"), put("y", "2")]),
                writes("p", vec![put("0", "2")]),
            ],
        )
        .unwrap_err()
        .to_string();
    assert!(e.contains("commit of checkpoint 2 failed") && !e.contains('\n'), "{e}");
    let check = |b: &mut EmbeddedState| {
        assert_eq!(b.last_committed().unwrap(), Some(1));
        assert_eq!(loaded(b, "a"), pairs(&[("gone", "x"), ("k", "1")]));
        assert_eq!(loaded(b, "p"), pairs(&[("0", "1")]));
        assert!(b.load("b").unwrap().is_empty());
        assert_eq!(b.scopes().unwrap(), ["a", "p"]);
    };
    check(&mut b);
    b.close();
    let mut again = dir.open("atomic");
    check(&mut again);
    again.commit(2, &[writes("a", vec![put("k", "2")])]).unwrap();
    assert_eq!(loaded(&mut again, "a"), pairs(&[("gone", "x"), ("k", "2")]));
}

#[test]
fn a_reopened_store_holds_every_commit() {
    let dir = Dir::new("reopen");
    let mut b = dir.open("reopen");
    for n in 1..=20_u64 {
        let v = n.to_string();
        b.commit(n, &[writes("c/w", vec![put(&format!("k{}", n % 7), &v)])]).unwrap();
    }
    // Dropped without close, as a process that exits without cleanup.
    drop(b);
    let mut b = dir.open("reopen");
    assert_eq!(b.last_committed().unwrap(), Some(20));
    let got = loaded(&mut b, "c/w");
    assert_eq!(got.len(), 7);
    assert!(got.contains(&("k6".to_owned(), "20".to_owned())), "{got:?}");
    assert!(got.contains(&("k0".to_owned(), "14".to_owned())), "{got:?}");
}

/// Seen failing without the mapping of redb's refusal: the message was
/// "cannot open as a redb store: Database already open. Cannot acquire
/// lock.", which does not say who holds it.
#[test]
fn a_second_open_of_one_store_is_refused_in_one_line_until_the_first_closes() {
    let dir = Dir::new("lock");
    let mut first = dir.open("wc");
    first.commit(1, &[writes("a", vec![put("k", "1")])]).unwrap();
    let started = Instant::now();
    let e = dir.backend().open("wc").unwrap_err().to_string();
    assert!(started.elapsed() < Duration::from_secs(2), "refused at once, not waiting");
    assert!(e.contains("in use by another process") && !e.contains('\n'), "{e}");
    assert!(e.contains(&dir.0.join("wc.redb").display().to_string()), "names the file: {e}");
    // Another namespace in the same folder is another file.
    let mut other = dir.open("wc2");
    assert_eq!(other.last_committed().unwrap(), None);
    first.close();
    let mut second = dir.open("wc");
    assert_eq!(second.last_committed().unwrap(), Some(1));
}

#[test]
fn namespaces_are_apart_and_clear_deletes_one_only() {
    let dir = Dir::new("clear");
    let mut a = dir.open("topo/a");
    let mut b = dir.open("topo%a");
    a.commit(1, &[writes("s", vec![put("k", "a")])]).unwrap();
    b.commit(7, &[writes("s", vec![put("k", "b")])]).unwrap();
    assert_eq!(loaded(&mut a, "s"), pairs(&[("k", "a")]));
    assert_eq!(loaded(&mut b, "s"), pairs(&[("k", "b")]));
    a.clear().unwrap();
    assert_eq!(a.last_committed().unwrap(), None);
    assert!(a.scopes().unwrap().is_empty());
    assert!(a.load("s").unwrap().is_empty());
    assert_eq!(b.last_committed().unwrap(), Some(7));
    assert_eq!(loaded(&mut b, "s"), pairs(&[("k", "b")]));
    // After a clear, numbering starts again.
    a.commit(1, &[writes("s", vec![put("k", "again")])]).unwrap();
    assert_eq!(loaded(&mut a, "s"), pairs(&[("k", "again")]));
    let mut files: Vec<String> = std::fs::read_dir(&dir.0)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    assert_eq!(files, ["topo%25a.redb", "topo%2Fa.redb"]);
}

#[test]
fn a_namespace_never_names_a_file_outside_the_folder() {
    assert_eq!(file_name("../../etc/x"), "..%2F..%2Fetc%2Fx.redb");
    assert_eq!(file_name(".."), "...redb");
    assert_eq!(file_name("wc.p3"), "wc.p3.redb");
    assert_eq!(file_name("é"), "%C3%A9.redb");
    let dir = Dir::new("ns");
    assert!(dir.backend().open("").unwrap_err().to_string().contains("must not be empty"));
}

#[test]
fn a_call_before_open_is_an_error_not_a_panic() {
    let dir = Dir::new("unopened");
    let mut b = dir.backend();
    let e = b.last_committed().unwrap_err().to_string();
    assert!(e.contains("before open"), "{e}");
    assert!(b.commit(1, &[]).is_err());
}

fn many(n: usize) -> Vec<StateRecord> {
    (0..n)
        .map(|i| StateRecord {
            key: format!("key-{i:08}").into_bytes().into(),
            value: ROption::RSome(format!("value-{i}").into_bytes().into()),
        })
        .collect()
}

fn commit_and_load(n: usize) -> (Duration, Duration) {
    let dir = Dir::new("many");
    let mut b = dir.open("many");
    let records = many(n);
    let started = Instant::now();
    b.commit(1, &[writes("big", records.clone())]).unwrap();
    let commit = started.elapsed();
    b.close();
    let mut b = dir.open("many");
    let started = Instant::now();
    let mut got = b.load("big").unwrap();
    let load = started.elapsed();
    assert_eq!(got.len(), n);
    got.sort_by(|x, y| x.key.cmp(&y.key));
    assert_eq!(got, records);
    (commit, load)
}

#[test]
fn loads_100k_records() {
    let (commit, load) = commit_and_load(100_000);
    eprintln!("embedded: commit of 100000 records took {commit:?}, load {load:?}");
}

/// Measures; run with `cargo test --release -p squall-state-embedded -- --ignored`.
#[test]
#[ignore = "a measurement: 1 M records"]
fn measure_commit_and_load_of_1m_records() {
    for _ in 0..3 {
        let (commit, load) = commit_and_load(1_000_000);
        eprintln!("embedded: commit of 1000000 records took {commit:?}, load {load:?}");
    }
}
