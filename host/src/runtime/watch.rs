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

fn watch(file: &Path, handle: &TopologyHandle) {
    let mut paths = watched(file, handle);
    let mut applied = signature(&paths);
    let mut seen = applied.clone();
    let mut stable_since = Instant::now();
    tracing::info!("--watch: reloading when {} file(s) change", paths.len());
    while handle.state() == RunState::Running {
        if handle.wait_until(Instant::now() + POLL) {
            return;
        }
        let now = signature(&paths);
        if now != seen {
            seen = now;
            stable_since = Instant::now();
            continue;
        }
        if seen == applied || stable_since.elapsed() < SETTLE {
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
        applied = signature(&paths);
        seen = applied.clone();
    }
}
