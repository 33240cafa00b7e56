//! Files squall reads but does not own (plugin libraries, token files, TLS
//! certificates and keys): regular files only, opened without blocking, and
//! read up to a cap.
//!
//! A FIFO would block the open until a writer came (and the read until it
//! closed), a character device such as `/dev/zero` never ends, and a
//! directory or a socket cannot be read at all: each is refused before
//! anything is opened or read, with what it is. A regular file is opened
//! with `O_NONBLOCK` and looked at again through its descriptor, so a path
//! swapped for a FIFO between the two looks is refused too, and a read
//! stops one byte past the cap, so a file that grows while it is read
//! cannot take the process's memory.

use std::fs::{File, OpenOptions};
use std::io::Read as _;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// Why a file could not be opened as a regular file.
#[derive(Debug)]
pub enum OpenError {
    /// The path does not exist.
    Missing,
    /// The path is a chain of symbolic links that never ends in a file.
    SymlinkLoop,
    /// The path names a FIFO, a device, a directory or a socket: what it is,
    /// with its article (`a FIFO (named pipe)`).
    NotRegular(&'static str),
    /// Anything else the system refused (permission denied, ...).
    Io(std::io::Error),
}

impl From<std::io::Error> for OpenError {
    fn from(e: std::io::Error) -> Self {
        match e.raw_os_error() {
            Some(libc::ENOENT) => OpenError::Missing,
            Some(libc::ELOOP) => OpenError::SymlinkLoop,
            _ => OpenError::Io(e),
        }
    }
}

/// Opens `path` for reading if it is a regular file (after following
/// symbolic links), without ever waiting for a writer.
///
/// # Errors
/// The path is missing, a symbolic link loop, not a regular file, or cannot
/// be opened.
pub fn open_regular(path: &Path) -> Result<File, OpenError> {
    let meta = std::fs::metadata(path)?;
    if !meta.is_file() {
        return Err(OpenError::NotRegular(describe_file_type(meta.file_type())));
    }
    // O_NONBLOCK: should the path become a FIFO between the stat and the
    // open, the open returns at once instead of waiting for a writer.
    let file = OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(OpenError::NotRegular(describe_file_type(meta.file_type())));
    }
    Ok(file)
}

/// `a FIFO`, `a directory`, ...: what a non-regular file is.
pub fn describe_file_type(t: std::fs::FileType) -> &'static str {
    if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO (named pipe)"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_socket() {
        "a socket"
    } else {
        "not a regular file"
    }
}

/// The most bytes a token file may hold (a token is one short line).
pub const TOKEN_FILE_CAP: u64 = 64 * 1024;

/// The most bytes a PEM file (a certificate chain, a key, a CA bundle) may
/// hold: a chain of a dozen certificates is tens of KiB.
pub const PEM_FILE_CAP: u64 = 1024 * 1024;

/// Why [`read_capped`] could not read a file. Each renders as one line
/// naming what the file is (`the token file`) and its path.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The path does not exist.
    #[error("{what} {} does not exist", escape_controls(&path.to_string_lossy()))]
    Missing {
        /// What the file is.
        what: String,
        /// Its path.
        path: PathBuf,
    },
    /// The path is a symbolic link loop.
    #[error(
        "{what} {} is a symbolic link loop (too many levels of symbolic links)",
        escape_controls(&path.to_string_lossy())
    )]
    SymlinkLoop {
        /// What the file is.
        what: String,
        /// Its path.
        path: PathBuf,
    },
    /// The path names a FIFO, a device, a directory or a socket.
    #[error("{what} {} is {kind}, not a regular file", escape_controls(&path.to_string_lossy()))]
    NotRegular {
        /// What the file is.
        what: String,
        /// Its path.
        path: PathBuf,
        /// What it is instead, with its article.
        kind: &'static str,
    },
    /// The file holds more than the cap.
    #[error(
        "{what} {} is too large ({len} bytes; at most {} are read)",
        escape_controls(&path.to_string_lossy()),
        shown_bytes(*cap)
    )]
    TooLarge {
        /// What the file is.
        what: String,
        /// Its path.
        path: PathBuf,
        /// Its length (or what was read of it).
        len: u64,
        /// The cap.
        cap: u64,
    },
    /// The system refused to open or read it.
    #[error("cannot read {what} {}: {source}", escape_controls(&path.to_string_lossy()))]
    Io {
        /// What the file is.
        what: String,
        /// Its path.
        path: PathBuf,
        /// The system's answer.
        source: std::io::Error,
    },
}

/// Reads the regular file at `path`, at most `cap` bytes. `what` names it
/// in the error (`the token file`).
///
/// # Errors
/// A missing file, a symbolic link loop, a file that is not regular (a
/// FIFO is refused without being opened), a file larger than `cap` (also
/// one that grows past it while it is read), or a read error.
pub fn read_capped(path: &Path, what: &str, cap: u64) -> Result<Vec<u8>, ReadError> {
    let (what, path) = (what.to_owned(), path.to_path_buf());
    let mut file = match open_regular(&path) {
        Ok(file) => file,
        Err(OpenError::Missing) => return Err(ReadError::Missing { what, path }),
        Err(OpenError::SymlinkLoop) => return Err(ReadError::SymlinkLoop { what, path }),
        Err(OpenError::NotRegular(kind)) => return Err(ReadError::NotRegular { what, path, kind }),
        Err(OpenError::Io(source)) => return Err(ReadError::Io { what, path, source }),
    };
    let len = match file.metadata() {
        Ok(meta) => meta.len(),
        Err(source) => return Err(ReadError::Io { what, path, source }),
    };
    if len > cap {
        return Err(ReadError::TooLarge { what, path, len, cap });
    }
    let mut bytes = Vec::with_capacity(usize::try_from(len).unwrap_or(0));
    if let Err(source) = (&mut file).take(cap + 1).read_to_end(&mut bytes) {
        return Err(ReadError::Io { what, path, source });
    }
    if bytes.len() as u64 > cap {
        return Err(ReadError::TooLarge { what, path, len: bytes.len() as u64, cap });
    }
    Ok(bytes)
}

/// `64 KiB`, `1 MiB`.
fn shown_bytes(n: u64) -> String {
    if n >= 1024 * 1024 && n.is_multiple_of(1024 * 1024) {
        format!("{} MiB", n / (1024 * 1024))
    } else if n >= 1024 && n.is_multiple_of(1024) {
        format!("{} KiB", n / 1024)
    } else {
        format!("{n} bytes")
    }
}

/// `text` with every control character escaped as Rust would (`\n`,
/// `\u{1b}`); everything else is kept as it is. Paths and messages a user
/// or a plugin supplies are printed through it, so they cannot write
/// terminal escapes.
pub fn escape_controls(text: &str) -> String {
    if !text.chars().any(char::is_control) {
        return text.to_owned();
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if c.is_control() {
            out.extend(c.escape_debug());
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("squall-files-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("mkdir");
        dir
    }

    #[test]
    fn a_small_regular_file_is_read_whole() {
        let dir = scratch("small");
        let path = dir.join("token");
        std::fs::write(&path, b"t0ken\n").expect("write");
        assert_eq!(read_capped(&path, "the token file", 64).expect("read"), b"t0ken\n");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_file_over_the_cap_is_refused_with_its_size() {
        let dir = scratch("large");
        let path = dir.join("token");
        std::fs::write(&path, vec![b'a'; 2048]).expect("write");
        let e = read_capped(&path, "the token file", 1024).expect_err("too large").to_string();
        assert!(e.contains("is too large (2048 bytes; at most 1 KiB are read)"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn devices_fifos_directories_and_missing_files_are_refused_in_one_line() {
        let dir = scratch("kinds");
        let fifo = dir.join("fifo");
        let c_path = std::ffi::CString::new(fifo.to_string_lossy().as_bytes()).expect("no NUL");
        // SAFETY: a valid NUL-terminated path; mkfifo only creates a file.
        assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) }, 0, "mkfifo");
        let cases = [
            (Path::new("/dev/zero"), "is a character device, not a regular file"),
            (fifo.as_path(), "is a FIFO (named pipe), not a regular file"),
            (dir.as_path(), "is a directory, not a regular file"),
            (&dir.join("missing"), "does not exist"),
        ];
        for (path, want) in cases {
            let e =
                read_capped(path, "the TLS key", PEM_FILE_CAP).expect_err("refused").to_string();
            assert!(e.starts_with("the TLS key "), "{e}");
            assert!(e.contains(want), "{e}");
            assert_eq!(e.lines().count(), 1, "{e}");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
