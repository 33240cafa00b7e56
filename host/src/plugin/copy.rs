//! Private copies: every library is loaded from a copy the process owns.
//!
//! `dlopen` maps a library's file; the pages it maps are the file's pages.
//! When that file is later written in place (`cp new.so lib.so`) or
//! truncated, the mapped code changes or vanishes under the running
//! process, which dies with SIGBUS at its next access past the new end. So
//! the loader copies the bytes it checked and hashed into a file of its own,
//! in a private folder (mode 0700, in `$TMPDIR`, `squall-PID/` by default),
//! loads that copy under a name used once (`dlopen` of a name it has seen
//! returns the old code) and unlinks the name as soon as the copy is mapped.
//! Nothing outside the process can reach the mapped file any more.
//!
//! The folders are removed when the command ends ([`PrivateCopies`]).

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::Write as _;
use std::os::unix::fs::{DirBuilderExt, FileExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError};

use sha2::{Digest, Sha256};

/// What the process keeps about its copies, behind one lock: a load copies,
/// loads and unlinks with the lock held, so the folders are never removed
/// under a load in progress.
#[derive(Debug)]
pub(super) struct State {
    /// The folders made (or found private and ours) for copies, to remove.
    dirs: Vec<PathBuf>,
    /// Copies made so far: each copy's name is used once.
    copies: u64,
    /// What was loaded, by the path it was loaded for and the SHA-256 of
    /// its bytes: loading the same bytes for the same path again (a reload
    /// that leaves a library alone, two aliases of one file) reuses the
    /// mapped library instead of mapping another copy.
    pub(super) loaded: BTreeMap<(PathBuf, String), super::loader::Root>,
}

static STATE: Mutex<State> =
    Mutex::new(State { dirs: Vec::new(), copies: 0, loaded: BTreeMap::new() });

/// The process's copy state, locked.
pub(super) fn state() -> MutexGuard<'static, State> {
    STATE.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The folder libraries are copied into unless a caller names another:
/// `$TMPDIR/squall-PID` (made absolute, so `dlopen` is given a path).
pub fn private_dir() -> PathBuf {
    let tmp = std::env::temp_dir();
    let tmp = std::path::absolute(&tmp).unwrap_or(tmp);
    tmp.join(format!("squall-{}", std::process::id()))
}

/// Removes every folder this process made for private copies (and the
/// copies in it, though each is unlinked once loaded). Loaded libraries stay
/// mapped. A later load makes its folder again.
pub fn remove_private_copies() {
    remove_dirs(&mut state());
}

/// As [`remove_private_copies`], unless a load holds the state right now
/// (for an exit that must not wait: the second stop signal).
pub fn try_remove_private_copies() {
    match STATE.try_lock() {
        Ok(mut state) => remove_dirs(&mut state),
        Err(std::sync::TryLockError::Poisoned(p)) => remove_dirs(&mut p.into_inner()),
        Err(std::sync::TryLockError::WouldBlock) => {}
    }
}

fn remove_dirs(state: &mut State) {
    for dir in std::mem::take(&mut state.dirs) {
        if let Err(e) = std::fs::remove_dir_all(&dir) {
            if e.kind() != std::io::ErrorKind::NotFound {
                tracing::warn!("cannot remove the private folder {}: {e}", dir.display());
            }
        }
    }
}

/// Owned by a command that loads libraries (`run`, `validate`, `inspect`):
/// when it is dropped, however the command ends, the private folders go
/// ([`remove_private_copies`]).
#[derive(Debug)]
#[must_use = "the folders are removed when the guard is dropped"]
pub struct PrivateCopies(());

impl PrivateCopies {
    /// A guard for the command about to run.
    pub fn guard() -> Self {
        Self(())
    }
}

impl Drop for PrivateCopies {
    fn drop(&mut self) {
        remove_private_copies();
    }
}

/// A copy made by [`copy_into`]: its path, length and SHA-256.
#[derive(Debug)]
pub(super) struct Copy {
    pub(super) path: PathBuf,
    pub(super) file: File,
    pub(super) len: u64,
    pub(super) digest: String,
}

impl Copy {
    /// Unlinks the copy's name (a mapping of it stays).
    pub(super) fn unlink(&self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Why a copy could not be made: about the folder or the copy (`Private`),
/// or reading the source (`Read`).
#[derive(Debug)]
pub(super) enum CopyError {
    Private(String),
    Read(std::io::Error),
}

/// Copies `source` (an open descriptor, read from its start with positioned
/// reads) into a new file with a unique name in `dir`, hashing the bytes as
/// they are copied. `dir` is made private (0700) if it does not exist, and
/// refused if it exists but is not a folder of ours that only we can use;
/// unless `allow_writable`, its parent must be safe as a plugin folder is
/// (the sticky `/tmp` is). The copy is created exclusively, read-only.
pub(super) fn copy_into(
    state: &mut State,
    dir: &Path,
    alias: &str,
    source: &File,
    allow_writable: bool,
) -> Result<Copy, CopyError> {
    ensure_private(state, dir, allow_writable).map_err(|e| CopyError::Private(e.to_string()))?;
    let (path, mut file) = loop {
        state.copies += 1;
        let path = dir.join(format!("{}-{}.so", file_safe(alias), state.copies));
        match OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o500)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&path)
        {
            Ok(file) => break (path, file),
            // Left by an earlier process with our pid: take the next name.
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => {
                return Err(CopyError::Private(format!("cannot create {}: {e}", path.display())))
            }
        }
    };
    let written = stream(source, &mut file, &path);
    match written {
        Ok((len, digest)) => Ok(Copy { path, file, len, digest }),
        Err(e) => {
            let _ = std::fs::remove_file(&path);
            Err(e)
        }
    }
}

/// Copies `source` into `file`, 64 KiB at a time: the length and the SHA-256.
fn stream(source: &File, file: &mut File, path: &Path) -> Result<(u64, String), CopyError> {
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 64 * 1024];
    let mut offset = 0u64;
    loop {
        // Positioned reads leave the descriptor's offset alone.
        let n = match source.read_at(&mut buf, offset) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(CopyError::Read(e)),
        };
        hasher.update(&buf[..n]);
        file.write_all(&buf[..n])
            .map_err(|e| CopyError::Private(format!("cannot write {}: {e}", path.display())))?;
        offset += n as u64;
    }
    Ok((offset, super::loader::hex(&hasher.finalize())))
}

/// Why the folder private copies are made in cannot be used.
#[derive(Debug, thiserror::Error)]
pub(super) enum FolderError {
    /// The folder or its parent cannot be looked at.
    #[error("{}: {cause}", path.display())]
    Stat {
        /// The folder or its parent.
        path: PathBuf,
        /// The system's answer.
        cause: std::io::Error,
    },
    /// Others could write to the parent.
    #[error(
        "{} {reason}, so others could replace a copy before it is loaded (set TMPDIR to a \
         folder only you can write)",
        parent.display()
    )]
    UnsafeParent {
        /// The parent.
        parent: PathBuf,
        /// What is wrong with it: "is writable by others", ...
        reason: String,
    },
    /// The folder cannot be created.
    #[error("cannot create {}: {cause}", dir.display())]
    Create {
        /// The folder.
        dir: PathBuf,
        /// The system's answer.
        cause: std::io::Error,
    },
    /// The folder exists but is not ours alone.
    #[error(
        "{} exists and is not a private folder of yours (a folder owned by uid {euid} with mode \
         0700); remove it",
        dir.display()
    )]
    NotPrivate {
        /// The folder.
        dir: PathBuf,
        /// Our effective uid.
        euid: u32,
    },
    /// Code cannot be mapped from the folder.
    #[error(
        "{} is on a filesystem mounted noexec, where libraries cannot be mapped; set TMPDIR to a \
         folder on a filesystem that allows executables",
        dir.display()
    )]
    Noexec {
        /// The folder.
        dir: PathBuf,
    },
}

/// Makes `dir` (mode 0700) or checks that the existing one is a folder, not
/// a link, owned by us and closed to group and others; and that code can be
/// mapped from it.
fn ensure_private(state: &mut State, dir: &Path, allow_writable: bool) -> Result<(), FolderError> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    let euid = unsafe { libc::geteuid() };
    let stat = |path: PathBuf| move |cause| FolderError::Stat { path, cause };
    if !allow_writable {
        if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
            let meta = std::fs::metadata(parent).map_err(stat(parent.to_path_buf()))?;
            if let Some((reason, _)) = super::loader::unsafe_mode(&meta, euid, true) {
                let parent = parent.to_path_buf();
                return Err(FolderError::UnsafeParent { parent, reason: reason.to_string() });
            }
        }
    }
    let made = match std::fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => true,
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => false,
        Err(cause) => return Err(FolderError::Create { dir: dir.to_path_buf(), cause }),
    };
    if !made {
        let meta = std::fs::symlink_metadata(dir).map_err(stat(dir.to_path_buf()))?;
        if !meta.is_dir() || meta.uid() != euid || meta.mode() & 0o077 != 0 {
            return Err(FolderError::NotPrivate { dir: dir.to_path_buf(), euid });
        }
    }
    if !state.dirs.iter().any(|d| d == dir) {
        state.dirs.push(dir.to_path_buf());
    }
    if noexec(dir) {
        return Err(FolderError::Noexec { dir: dir.to_path_buf() });
    }
    Ok(())
}

/// True when `dir` is on a filesystem mounted `noexec`.
fn noexec(dir: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c_path) = std::ffi::CString::new(dir.as_os_str().as_bytes()) else { return false };
    let mut stat = std::mem::MaybeUninit::<libc::statvfs>::uninit();
    // SAFETY: `c_path` is a valid NUL-terminated string and `stat` points to
    // writable memory of the size statvfs fills; it is read only on success.
    let rc = unsafe { libc::statvfs(c_path.as_ptr(), stat.as_mut_ptr()) };
    if rc != 0 {
        return false;
    }
    // SAFETY: statvfs returned 0, so it initialised `stat`.
    let stat = unsafe { stat.assume_init() };
    stat.f_flag & libc::ST_NOEXEC != 0
}

/// `alias` with everything but ASCII letters, digits, `-` and `_` replaced
/// by `_`, at most 40 characters: a part of a file name.
fn file_safe(alias: &str) -> String {
    let safe: String = alias
        .chars()
        .take(40)
        .map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '_' })
        .collect();
    if safe.is_empty() {
        "plugin".to_owned()
    } else {
        safe
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    fn alias_parts_of_file_names_are_safe() {
        assert_eq!(file_safe("ok-name_1"), "ok-name_1");
        assert_eq!(file_safe("../x/\n"), "___x__");
        assert_eq!(file_safe(""), "plugin");
        assert_eq!(file_safe(&"a".repeat(99)).len(), 40);
    }

    #[test]
    fn a_folder_that_is_not_private_is_refused() {
        let dir = std::env::temp_dir().join(format!("squall-open-copies-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        let mut state = State { dirs: Vec::new(), copies: 0, loaded: BTreeMap::new() };
        let e = ensure_private(&mut state, &dir, false).unwrap_err().to_string();
        assert!(e.contains("is not a private folder of yours"), "{e}");
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        ensure_private(&mut state, &dir, false).unwrap();
        assert_eq!(state.dirs, std::slice::from_ref(&dir));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
