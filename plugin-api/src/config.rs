//! A component's configuration, as the topology file gave it.

use serde::de::DeserializeOwned;

/// The component's `config` table from the topology, as a TOML document.
///
/// Read it into your own struct with [`ComponentConfig::parse`]; add
/// `#[serde(deny_unknown_fields)]` so that a typo is an error, not a default.
#[derive(Debug, Clone, Copy)]
pub struct ComponentConfig<'a> {
    text: &'a str,
}

impl<'a> ComponentConfig<'a> {
    /// Wraps a TOML document.
    pub fn new(text: &'a str) -> Self {
        Self { text }
    }

    /// The raw TOML text (empty when the topology gave no `config`).
    pub fn as_str(&self) -> &'a str {
        self.text
    }

    /// Deserialises the table into `T`.
    ///
    /// # Errors
    /// When the table does not match `T`; the message names the key.
    pub fn parse<T: DeserializeOwned>(&self) -> crate::Result<T> {
        // toml's report spans several lines and points into this re-serialised
        // table, not the topology file: keep its one-line message.
        toml::from_str(self.text)
            .map_err(|e| e.message().split_whitespace().collect::<Vec<_>>().join(" ").into())
    }
}
