//! `squall run --watch`: reloads when the topology file or a plugin library
//! it names changes.
//!
//! Polling, not inotify: every [`POLL`] the watcher reads the size and
//! modification time of each watched file (a handful of `stat` calls). Why
//! not the `notify` crate: one more dependency tree for a few files, and an
//! inotify watch on a file follows its inode, so an operator's atomic
//! `mv new.so plugin.so` (or cargo's hard link) needs watching the folder
//! and filtering events anyway; a poll sees every way a file is replaced.
//!
//! Bursts coalesce: a change is acted on only once every watched file has
//! kept the same size and modification time for [`SETTLE`], so an editor's
//! save or a linker still writing a library gives one reload, after the
//! last write. A library caught mid-write anyway fails its digest check (it
//! is hashed again as it is loaded) and the reload fails, leaving the
//! topology as it was; the next change triggers another.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use super::TopologyHandle;
use crate::control::RunState;

/// How often the watched files are checked.
pub const POLL: Duration = Duration::from_millis(250);
/// How long every watched file must stay unchanged before a reload.
pub const SETTLE: Duration = Duration::from_millis(500);

type Signature = Vec<Option<(u64, SystemTime)>>;

/// Starts the watcher thread for `file` (the topology) and the libraries of
/// the running topology. It ends with the run.
///
/// # Errors
/// When the thread cannot be spawned.
pub fn spawn(file: PathBuf, handle: TopologyHandle) -> std::io::Result<()> {
    std::thread::Builder::new().name("__watch".into()).spawn(move || watch(&file, &handle))?;
    Ok(())
}

fn watched(file: &Path, handle: &TopologyHandle) -> Vec<PathBuf> {
    let mut paths = vec![file.to_path_buf()];
    // The libraries the file names now (it may name new ones after a reload).
    match crate::config::load(file) {
        Ok(config) => paths.extend(config.plugins.iter().map(|p| p.path.clone())),
        Err(_) => paths.extend(handle.topology().libraries.iter().map(|l| l.path.clone())),
    }
    paths
}

fn signature(paths: &[PathBuf]) -> Signature {
    paths
        .iter()
        .map(|p| std::fs::metadata(p).ok().and_then(|m| Some((m.len(), m.modified().ok()?))))
        .collect()
}

/// When to reload: once the watched files differ from what the last reload
/// loaded, and have all kept the same size and modification time for
/// [`SETTLE`].
#[derive(Debug)]
struct Settle {
    /// What the last reload (or the start) loaded.
    applied: Signature,
    /// What the last poll saw.
    seen: Signature,
    /// When the files last changed.
    stable_since: Instant,
}

impl Settle {
    fn new(applied: Signature, now: Instant) -> Self {
        Self { seen: applied.clone(), applied, stable_since: now }
    }

    /// The files read `current` at `now`: true when a reload is due.
    fn poll(&mut self, current: Signature, now: Instant) -> bool {
        if current != self.seen {
            self.seen = current;
            self.stable_since = now;
            return false;
        }
        self.seen != self.applied && now.duration_since(self.stable_since) >= SETTLE
    }

    /// A reload ran and loaded `applied`.
    fn reloaded(&mut self, applied: Signature) {
        self.seen = applied.clone();
        self.applied = applied;
    }
}

fn watch(file: &Path, handle: &TopologyHandle) {
    let mut paths = watched(file, handle);
    let mut settle = Settle::new(signature(&paths), Instant::now());
    tracing::info!("--watch: reloading when {} file(s) change", paths.len());
    while handle.state() == RunState::Running {
        if handle.wait_until(Instant::now() + POLL) {
            return;
        }
        if !settle.poll(signature(&paths), Instant::now()) {
            continue;
        }
        match handle.request_reload("--watch") {
            // The reload logs its own summary; wait for it, so the next
            // change is compared with what it loaded.
            Some(outcome) => {
                let _ = outcome.recv();
            }
            None => return,
        }
        paths = watched(file, handle);
        settle.reloaded(signature(&paths));
    }
}

#[cfg(test)]
mod tests {
    use std::time::UNIX_EPOCH;

    use super::*;

    fn files(sizes: &[u64]) -> Signature {
        sizes.iter().map(|&n| Some((n, UNIX_EPOCH + Duration::from_secs(n)))).collect()
    }

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn files_that_do_not_change_never_reload() {
        let t0 = Instant::now();
        let mut settle = Settle::new(files(&[1, 2]), t0);
        for i in 1..10 {
            assert!(!settle.poll(files(&[1, 2]), t0 + i * 300 * MS));
        }
    }

    #[test]
    fn a_change_reloads_once_the_files_have_settled() {
        let t0 = Instant::now();
        let mut settle = Settle::new(files(&[1, 2]), t0);
        assert!(!settle.poll(files(&[1, 3]), t0 + 250 * MS), "just changed");
        assert!(!settle.poll(files(&[1, 3]), t0 + 500 * MS), "stable for 250 ms");
        assert!(settle.poll(files(&[1, 3]), t0 + 750 * MS), "stable for SETTLE");
        settle.reloaded(files(&[1, 3]));
        assert!(!settle.poll(files(&[1, 3]), t0 + 2000 * MS), "loaded: nothing more to do");
    }

    #[test]
    fn a_burst_of_writes_gives_one_reload_after_the_last() {
        let t0 = Instant::now();
        let mut settle = Settle::new(files(&[1]), t0);
        assert!(!settle.poll(files(&[2]), t0 + 250 * MS));
        assert!(!settle.poll(files(&[3]), t0 + 500 * MS), "still being written");
        assert!(!settle.poll(files(&[4]), t0 + 750 * MS), "still being written");
        assert!(!settle.poll(files(&[4]), t0 + 1000 * MS));
        assert!(settle.poll(files(&[4]), t0 + 1250 * MS), "SETTLE after the last write");
    }

    #[test]
    fn a_file_put_back_as_it_was_reloads_nothing() {
        let t0 = Instant::now();
        let mut settle = Settle::new(files(&[1]), t0);
        assert!(!settle.poll(files(&[2]), t0 + 250 * MS));
        assert!(!settle.poll(files(&[1]), t0 + 500 * MS));
        assert!(!settle.poll(files(&[1]), t0 + 5000 * MS));
    }

    #[test]
    fn a_missing_file_has_no_signature_and_a_written_one_has_its_size() {
        let dir = std::env::temp_dir().join(format!("squall-watch-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a folder");
        let file = dir.join("topology.toml");
        std::fs::write(&file, "12345").expect("write");
        let sig = signature(&[file.clone(), dir.join("missing.so")]);
        assert_eq!(sig.len(), 2);
        assert_eq!(sig[0].map(|(len, _)| len), Some(5));
        assert_eq!(sig[1], None);
        std::fs::remove_dir_all(&dir).expect("clean up");
    }
}
