//! Declared config keys (contract 1.1): what `squall inspect` prints and
//! `squall validate` checks before a component's constructor runs.

use abi_stable::std_types::RString;

use crate::abi::ConfigKeyDecl;

/// The TOML type of a config key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyKind {
    /// A string.
    String,
    /// An integer.
    Integer,
    /// A float (an integer is accepted too).
    Float,
    /// `true` or `false`.
    Bool,
    /// An array.
    Array,
    /// A table.
    Table,
    /// A duration written as a string: `"250ms"`, `"5s"`, `"2m"`.
    Duration,
    /// Anything.
    Any,
}

impl KeyKind {
    /// The name `inspect` prints and the boundary carries.
    pub const fn name(self) -> &'static str {
        match self {
            KeyKind::String => "string",
            KeyKind::Integer => "integer",
            KeyKind::Float => "float",
            KeyKind::Bool => "bool",
            KeyKind::Array => "array",
            KeyKind::Table => "table",
            KeyKind::Duration => "duration",
            KeyKind::Any => "any",
        }
    }
}

/// One config key a component accepts: name, type, default and a one-line doc.
///
/// ```
/// use squall_plugin_api::{ConfigKey, KeyKind};
///
/// const KEYS: &[ConfigKey] = &[
///     ConfigKey::required("path", KeyKind::String, "the file to read"),
///     ConfigKey::optional("batch", KeyKind::Integer, "64", "lines per next_tuple call"),
/// ];
/// # assert_eq!(KEYS.len(), 2);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConfigKey {
    /// The key.
    pub name: &'static str,
    /// Its type.
    pub kind: KeyKind,
    /// The default, as TOML text; `None` when there is none.
    pub default: Option<&'static str>,
    /// True when the key must be given.
    pub required: bool,
    /// A one-line description.
    pub doc: &'static str,
}

impl ConfigKey {
    /// A key that must be given.
    pub const fn required(name: &'static str, kind: KeyKind, doc: &'static str) -> Self {
        Self { name, kind, default: None, required: true, doc }
    }

    /// A key that may be left out, with no default (the component does
    /// without it).
    pub const fn maybe(name: &'static str, kind: KeyKind, doc: &'static str) -> Self {
        Self { name, kind, default: None, required: false, doc }
    }

    /// A key with a default (TOML text, e.g. `"64"`, `"\"5s\""`, `"true"`).
    pub const fn optional(
        name: &'static str,
        kind: KeyKind,
        default: &'static str,
        doc: &'static str,
    ) -> Self {
        Self { name, kind, default: Some(default), required: false, doc }
    }

    pub(crate) fn to_decl(self) -> ConfigKeyDecl {
        ConfigKeyDecl {
            name: self.name.into(),
            kind: self.kind.name().into(),
            default: self.default.map_or_else(RString::new, RString::from),
            required: self.required,
            doc: self.doc.into(),
        }
    }
}
