//! [`LoadError`]: why a plugin library could not be used.

use std::path::PathBuf;

/// Why a plugin library could not be loaded. Each renders as one line naming
/// the plugin alias and the path.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The file does not exist.
    #[error("plugin \"{alias}\": {} does not exist", path.display())]
    Missing {
        /// The alias from `[plugins]`.
        alias: String,
        /// The resolved path.
        path: PathBuf,
    },
    /// The file could not be read to check its digest.
    #[error("plugin \"{alias}\": cannot read {}: {source}", path.display())]
    Read {
        /// The alias from `[plugins]`.
        alias: String,
        /// The resolved path.
        path: PathBuf,
        /// The IO error.
        source: std::io::Error,
    },
    /// The file's SHA-256 digest differs from the one the topology pins.
    #[error("plugin \"{alias}\": {} has sha256 {found}, but the topology expects {expected}", path.display())]
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
    /// `dlopen` refused the file: not a shared library, wrong architecture,
    /// or unresolved symbols.
    #[error("plugin \"{alias}\": {} is not a loadable shared library: {detail}", path.display())]
    NotALibrary {
        /// The alias from `[plugins]`.
        alias: String,
        /// The resolved path.
        path: PathBuf,
        /// What the dynamic loader said.
        detail: String,
    },
    /// The library has no abi_stable root module.
    #[error("plugin \"{alias}\": {} is a shared library but not a squall plugin (no root module; was it built with squall_plugin_api::export_plugin!?)", path.display())]
    NotAPlugin {
        /// The alias from `[plugins]`.
        alias: String,
        /// The resolved path.
        path: PathBuf,
    },
    /// The library was built against an incompatible contract.
    #[error("plugin \"{alias}\": {} is incompatible with this host (contract {host_contract}): {detail}", path.display())]
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
    #[error("plugin \"{alias}\": {} failed to list its components: {detail}", path.display())]
    Catalogue {
        /// The alias from `[plugins]`.
        alias: String,
        /// The resolved path.
        path: PathBuf,
        /// The plugin's error.
        detail: String,
    },
}
