//! Errors on both sides of the plugin boundary.
//!
//! Plugin authors return [`Error`] (any boxed error, so `?` works on anything).
//! The adapters in [`crate::abi`] turn it, and any panic, into a [`PluginError`]
//! that crosses the boundary as plain `repr(C)` data.

use abi_stable::{std_types::RString, StableAbi};

/// The error type plugin code returns: any error, boxed.
pub type Error = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Shorthand for `Result<T, Error>`.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What kind of failure a [`PluginError`] reports.
///
/// An open set: new constants may be added in later contract versions, so the
/// host must treat unknown values like [`ErrorKind::RUNTIME`].
#[repr(transparent)]
#[derive(StableAbi, Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ErrorKind(pub u8);

impl ErrorKind {
    /// The component's configuration was rejected.
    pub const CONFIG: Self = Self(0);
    /// The component returned an error.
    pub const RUNTIME: Self = Self(1);
    /// Plugin code panicked; the panic was caught on the plugin side.
    pub const PANIC: Self = Self(2);
    /// The library refuses a host whose contract is older than its own
    /// (contract 1.3; an older host reads it as [`ErrorKind::RUNTIME`]).
    pub const CONTRACT: Self = Self(3);

    /// A short lowercase name, for messages and metrics.
    pub fn name(self) -> &'static str {
        match self {
            Self::CONFIG => "config",
            Self::PANIC => "panic",
            Self::CONTRACT => "contract",
            _ => "error",
        }
    }
}

/// An error that crosses the plugin boundary.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq)]
pub struct PluginError {
    /// The kind of failure.
    pub kind: ErrorKind,
    /// A one-line, human-readable message.
    pub message: RString,
}

impl PluginError {
    /// Builds an error of the given kind.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Self { kind, message: RString::from(message.into()) }
    }

    /// True when this error reports a caught panic.
    pub fn is_panic(&self) -> bool {
        self.kind == ErrorKind::PANIC
    }
}

impl std::fmt::Display for PluginError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.is_panic() {
            write!(f, "panicked: {}", self.message)
        } else {
            f.write_str(&self.message)
        }
    }
}

impl std::error::Error for PluginError {}
