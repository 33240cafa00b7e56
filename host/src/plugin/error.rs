//! [`LoadError`]: why a plugin library could not be used.

use std::path::{Path, PathBuf};

pub use crate::files::escape_controls;

/// Why a plugin library could not be loaded. Each renders as one line naming
/// the plugin alias and the path.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The file does not exist.
    #[error("plugin \"{alias}\": {} does not exist{hint}", shown(path))]
    Missing {
        /// The alias from `[plugins]`.
        alias: String,
        /// The resolved path.
        path: PathBuf,
        /// Empty, or a hint that starts with " (help: ": see
        /// [`LoadError::missing`].
        hint: String,
    },
    /// The path is a chain of symbolic links that never ends in a file.
    #[error(
        "plugin \"{alias}\": {} is a symbolic link loop (too many levels of symbolic links)",
        shown(path)
    )]
    SymlinkLoop {
        /// The alias from `[plugins]`.
        alias: String,
        /// The resolved path.
        path: PathBuf,
    },
    /// The path names a FIFO, a device, a directory or a socket.
    #[error("plugin \"{alias}\": {} is {kind}, not a regular file", shown(path))]
    NotRegular {
        /// The alias from `[plugins]`.
        alias: String,
        /// The resolved path.
        path: PathBuf,
        /// What it is instead, with its article.
        kind: &'static str,
    },
    /// The library or a folder on its path could be replaced by someone else.
    #[error("plugin \"{alias}\": refusing to load {}: {} {reason} (fix: {fix}, or allow it with allow_writable_plugins = true in [topology] or {}=1)", shown(path), shown(culprit), super::loader::ALLOW_WRITABLE_ENV)]
    Unsafe {
        /// The alias from `[plugins]`.
        alias: String,
        /// The resolved path.
        path: PathBuf,
        /// The file or folder at fault.
        culprit: PathBuf,
        /// What is wrong with it: "is writable by others", ...
        reason: String,
        /// The command that fixes it: `chmod go-w PATH` or `chown …`.
        fix: String,
    },
    /// The file could not be opened or read.
    #[error("plugin \"{alias}\": cannot read {}: {source}", shown(path))]
    Read {
        /// The alias from `[plugins]`.
        alias: String,
        /// The resolved path.
        path: PathBuf,
        /// The IO error.
        source: std::io::Error,
    },
    /// The file's SHA-256 digest differs from the one the topology pins.
    #[error(
        "plugin \"{alias}\": {} has sha256 {found}, but the topology expects {expected}",
        shown(path)
    )]
    Checksum {
        /// The alias from `[plugins]`.
        alias: String,
        /// The resolved path.
        path: PathBuf,
        /// The digest from the topology.
        expected: String,
        /// The file's digest.
        found: String,
    },
    /// The file is an ELF file, but part of what the dynamic loader would
    /// read or map lies past its end: it is truncated (or still being
    /// written). Mapping it would kill the process with SIGBUS.
    #[error(
        "plugin \"{alias}\": {} is truncated: {what} ({len} bytes); refusing to load it",
        shown(path)
    )]
    Truncated {
        /// The alias from `[plugins]`.
        alias: String,
        /// The resolved path.
        path: PathBuf,
        /// What lies out of bounds, e.g. "its loadable segment 3 (PT_LOAD,
        /// file bytes 1000..2000) ends past the end of the file".
        what: String,
        /// The file's length in bytes.
        len: u64,
    },
    /// The private copy the library is loaded from could not be made.
    #[error("plugin \"{alias}\": cannot make a private copy of {} to load: {detail}", shown(path))]
    PrivateCopy {
        /// The alias from `[plugins]`.
        alias: String,
        /// The resolved path.
        path: PathBuf,
        /// What went wrong with the private folder or the copy.
        detail: String,
    },
    /// `dlopen` refused the file: not a shared library, wrong architecture,
    /// or unresolved symbols.
    #[error("plugin \"{alias}\": {} is not a loadable shared library: {detail}", shown(path))]
    NotALibrary {
        /// The alias from `[plugins]`.
        alias: String,
        /// The resolved path.
        path: PathBuf,
        /// What the dynamic loader said.
        detail: String,
    },
    /// The library has no abi_stable root module.
    #[error("plugin \"{alias}\": {} is a shared library but not a squall plugin (no root module; was it built with squall_plugin_api::export_plugin!?)", shown(path))]
    NotAPlugin {
        /// The alias from `[plugins]`.
        alias: String,
        /// The resolved path.
        path: PathBuf,
    },
    /// The library was built with `panic = "abort"`.
    #[error("plugin \"{alias}\": {} was built with panic = \"abort\", so its first panic would abort squall; build it with panic = \"unwind\" (Rust's default: remove `panic = \"abort\"` from its [profile.*] and RUSTFLAGS)", shown(path))]
    PanicAbort {
        /// The alias from `[plugins]`.
        alias: String,
        /// The resolved path.
        path: PathBuf,
    },
    /// The library was built against an incompatible contract.
    #[error("plugin \"{alias}\": {} is incompatible with this host (contract {host_contract}): {detail}", shown(path))]
    Incompatible {
        /// The alias from `[plugins]`.
        alias: String,
        /// The resolved path.
        path: PathBuf,
        /// The contract version this host speaks.
        host_contract: &'static str,
        /// The condensed reason: a version mismatch, or the first mismatching item.
        detail: String,
    },
    /// The library's catalogue function failed or panicked.
    #[error("plugin \"{alias}\": {} failed to list its components: {detail}", shown(path))]
    Catalogue {
        /// The alias from `[plugins]`.
        alias: String,
        /// The resolved path.
        path: PathBuf,
        /// The plugin's error.
        detail: String,
    },
}

/// A path for a one-line message: control characters (newline, ESC, ...)
/// are escaped, so a path cannot forge log lines or terminal escapes.
pub(crate) fn shown(path: &Path) -> String {
    escape_controls(&path.to_string_lossy())
}

impl LoadError {
    /// The file at `path` does not exist. When a Rust library (`.rlib`) of
    /// the same name lies next to it, the crate was built without
    /// `crate-type = ["cdylib"]`: Cargo then writes no shared library at
    /// all, and the error says so.
    pub fn missing(alias: &str, path: &Path) -> LoadError {
        let rlib = path.with_extension("rlib");
        let hint = if path.extension().is_some_and(|e| e == "so") && rlib.is_file() {
            format!(
                " (help: {} is there: the crate was built as a Rust library only; add \
                 crate-type = [\"cdylib\"] under [lib] in its Cargo.toml and build it again)",
                shown(&rlib)
            )
        } else {
            String::new()
        };
        LoadError::Missing { alias: alias.to_owned(), path: path.to_path_buf(), hint }
    }
}
