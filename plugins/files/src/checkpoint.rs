//! The spout's progress: which lines are acked ([`AckTracker`]) and the
//! checkpoint file that records where to resume ([`Position`], [`read`],
//! [`write_atomic`]).

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// Where reading resumes: every line before `offset` in `file` (and every
/// line of the files before it, in the spout's reading order) was acked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Position {
    /// The file's path as the spout opened it (lossy UTF-8).
    pub file: String,
    /// The file's inode when it was read: tells a rotated file from its successor.
    pub inode: u64,
    /// The byte offset of the first line not known to be acked.
    pub offset: u64,
}

/// The checkpoint file's content: one JSON object.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct CheckpointFile {
    /// The format's version, 1.
    version: u32,
    #[serde(flatten)]
    position: Position,
}

/// The format version this crate writes and reads.
const VERSION: u32 = 1;

/// The checkpoint path for `input` when the config names none:
/// `<input>.squall-checkpoint`, beside the input (for a directory
/// `dir/`, the file `dir.squall-checkpoint` next to it).
pub fn default_path(input: &Path) -> PathBuf {
    let mut name = input.file_name().map(|n| n.to_os_string()).unwrap_or_else(|| ".".into());
    name.push(".squall-checkpoint");
    input.with_file_name(name)
}

/// Why a checkpoint cannot be read or written; each message names the
/// file (and, for a bad one, says how to start over).
#[derive(Debug)]
pub enum CheckpointError {
    /// The file exists but cannot be read.
    Read {
        /// The checkpoint file.
        path: PathBuf,
        /// The system's answer.
        cause: io::Error,
    },
    /// The file is not a checkpoint.
    Corrupt {
        /// The checkpoint file.
        path: PathBuf,
        /// What the JSON reader said.
        cause: serde_json::Error,
    },
    /// The file is a checkpoint of another version.
    Version {
        /// The checkpoint file.
        path: PathBuf,
        /// Its version.
        found: u32,
    },
    /// The position cannot be encoded.
    Encode(serde_json::Error),
    /// The new checkpoint cannot be written.
    Write {
        /// The checkpoint file.
        path: PathBuf,
        /// The system's answer.
        cause: io::Error,
    },
}

impl std::fmt::Display for CheckpointError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Read { path, cause } => {
                write!(f, "cannot read checkpoint {}: {cause}", path.display())
            }
            Self::Corrupt { path, cause } => write!(
                f,
                "checkpoint {} is corrupt ({cause}); delete it to read the input from the start",
                path.display()
            ),
            Self::Version { path, found } => write!(
                f,
                "checkpoint {} has version {found}, this spout reads version {VERSION}",
                path.display()
            ),
            Self::Encode(cause) => write!(f, "cannot encode checkpoint: {cause}"),
            Self::Write { path, cause } => {
                write!(f, "cannot write checkpoint {}: {cause}", path.display())
            }
        }
    }
}

impl std::error::Error for CheckpointError {}

/// Reads the checkpoint at `path`: `None` when there is none yet.
///
/// # Errors
/// When the file exists but cannot be read or is not a checkpoint.
pub fn read(path: &Path) -> Result<Option<Position>, CheckpointError> {
    let text = match fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(cause) => return Err(CheckpointError::Read { path: path.to_path_buf(), cause }),
    };
    let file: CheckpointFile = serde_json::from_str(&text)
        .map_err(|cause| CheckpointError::Corrupt { path: path.to_path_buf(), cause })?;
    if file.version != VERSION {
        return Err(CheckpointError::Version { path: path.to_path_buf(), found: file.version });
    }
    Ok(Some(file.position))
}

/// Replaces the checkpoint at `path` with `position`, atomically: the new
/// content goes to `<path>.tmp`, is fsynced and renamed over `path`, and the
/// directory is fsynced, so a crash leaves the old or the new checkpoint,
/// never a torn one.
///
/// # Errors
/// Any I/O error, naming the file.
pub fn write_atomic(path: &Path, position: &Position) -> Result<(), CheckpointError> {
    let mut tmp_name = path.file_name().map(|n| n.to_os_string()).unwrap_or_default();
    tmp_name.push(".tmp");
    let tmp = path.with_file_name(tmp_name);
    let content =
        serde_json::to_string(&CheckpointFile { version: VERSION, position: position.clone() })
            .map_err(CheckpointError::Encode)?;
    let result = (|| -> io::Result<()> {
        let mut file = File::create(&tmp)?;
        file.write_all(content.as_bytes())?;
        file.write_all(b"\n")?;
        file.sync_all()?;
        fs::rename(&tmp, path)?;
        // The rename is durable once the directory is.
        let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
        File::open(dir)?.sync_all()
    })();
    result.map_err(|cause| CheckpointError::Write { path: path.to_path_buf(), cause })
}

/// One line in flight or acked but not yet part of the acked prefix.
#[derive(Debug)]
struct Slot<T> {
    item: T,
    acked: bool,
}

/// The lines emitted and not yet in the contiguous acked prefix, keyed by
/// a sequence number that grows in reading order.
///
/// An ack marks its line; acked lines leave the tracker only from the front,
/// so [`AckTracker::first`] is always the earliest line not known to be
/// acked, however the acks arrive. That line's position is the checkpoint.
#[derive(Debug)]
pub struct AckTracker<T> {
    slots: BTreeMap<u64, Slot<T>>,
}

impl<T> Default for AckTracker<T> {
    fn default() -> Self {
        Self { slots: BTreeMap::new() }
    }
}

impl<T> AckTracker<T> {
    /// Records the line `seq` as emitted; `seq` must exceed every earlier one.
    pub fn insert(&mut self, seq: u64, item: T) {
        debug_assert!(self.slots.last_key_value().is_none_or(|(&last, _)| last < seq));
        self.slots.insert(seq, Slot { item, acked: false });
    }

    /// Marks `seq` acked and drops the acked prefix. False for an id this
    /// tracker does not hold (acked already, or from an earlier instance).
    pub fn ack(&mut self, seq: u64) -> bool {
        match self.slots.get_mut(&seq) {
            Some(slot) if !slot.acked => slot.acked = true,
            _ => return false,
        }
        while self.slots.first_key_value().is_some_and(|(_, slot)| slot.acked) {
            self.slots.pop_first();
        }
        true
    }

    /// The line `seq` if it is still waiting for its ack (to replay it).
    pub fn unacked(&self, seq: u64) -> Option<&T> {
        self.slots.get(&seq).filter(|slot| !slot.acked).map(|slot| &slot.item)
    }

    /// The earliest line not known to be acked.
    pub fn first(&self) -> Option<&T> {
        self.slots.first_key_value().map(|(_, slot)| &slot.item)
    }

    /// Lines held: in flight, plus acked ones behind an unacked one.
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// True when every emitted line is acked.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_prefix_advances_only_over_contiguous_acks() {
        let mut tracker = AckTracker::default();
        for seq in 10..15 {
            tracker.insert(seq, seq * 100);
        }
        assert_eq!(tracker.first(), Some(&1000));
        // Out of order: 11 and 13 acked, 10 not yet: nothing moves.
        assert!(tracker.ack(11));
        assert!(tracker.ack(13));
        assert_eq!(tracker.first(), Some(&1000));
        assert_eq!(tracker.len(), 5);
        // 10 acked: the prefix jumps over 11 to 12, which is not acked.
        assert!(tracker.ack(10));
        assert_eq!(tracker.first(), Some(&1200));
        assert_eq!(tracker.len(), 3);
        // 12 acked: over 13 to 14.
        assert!(tracker.ack(12));
        assert_eq!(tracker.first(), Some(&1400));
        assert!(tracker.ack(14));
        assert!(tracker.is_empty());
        assert_eq!(tracker.first(), None);
    }

    #[test]
    fn acks_of_unknown_or_repeated_ids_change_nothing() {
        let mut tracker = AckTracker::default();
        tracker.insert(1, "a");
        tracker.insert(2, "b");
        assert!(tracker.ack(2));
        assert!(!tracker.ack(2), "a second ack of the same id");
        assert!(!tracker.ack(99), "an id from an earlier instance");
        assert_eq!(tracker.first(), Some(&"a"));
        assert_eq!(tracker.len(), 2);
    }

    #[test]
    fn only_unacked_lines_are_offered_for_replay() {
        let mut tracker = AckTracker::default();
        tracker.insert(1, "a");
        tracker.insert(2, "b");
        tracker.insert(3, "c");
        tracker.ack(2);
        assert_eq!(tracker.unacked(1), Some(&"a"));
        assert_eq!(tracker.unacked(2), None, "acked, though still held behind 1");
        assert_eq!(tracker.unacked(3), Some(&"c"));
        assert_eq!(tracker.unacked(4), None);
    }

    fn temp_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("squall-files-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn a_checkpoint_round_trips_and_replaces_the_old_one() {
        let dir = temp_dir("checkpoint-roundtrip");
        let path = dir.join("in.log.squall-checkpoint");
        assert_eq!(read(&path).unwrap(), None, "no checkpoint yet");
        let first = Position { file: "/x/in.log".into(), inode: 7, offset: 42 };
        write_atomic(&path, &first).unwrap();
        assert_eq!(read(&path).unwrap(), Some(first));
        let second = Position { file: "/x/in \"2\".log".into(), inode: 8, offset: 0 };
        write_atomic(&path, &second).unwrap();
        assert_eq!(read(&path).unwrap(), Some(second));
        let left: Vec<_> = fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(left, ["in.log.squall-checkpoint"], "no temporary file is left behind");
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_corrupt_checkpoint_is_an_error_that_says_how_to_start_over() {
        let dir = temp_dir("checkpoint-corrupt");
        let path = dir.join("c");
        fs::write(&path, "{\"version\":1,\"file\":\"a\"").unwrap();
        let err = read(&path).unwrap_err().to_string();
        assert!(err.contains("is corrupt") && err.contains("delete it"), "{err}");
        fs::write(&path, "{\"version\":2,\"file\":\"a\",\"inode\":1,\"offset\":0}").unwrap();
        assert!(read(&path).unwrap_err().to_string().contains("version 2"));
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_default_checkpoint_sits_beside_the_input() {
        assert_eq!(
            default_path(Path::new("/var/log/app.log")),
            Path::new("/var/log/app.log.squall-checkpoint")
        );
        assert_eq!(default_path(Path::new("spool/")), Path::new("spool.squall-checkpoint"));
        assert_eq!(default_path(Path::new("in")), Path::new("in.squall-checkpoint"));
    }
}
