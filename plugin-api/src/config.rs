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
        toml::from_str(self.text).map_err(|e| {
            let mut message = e.message().split_whitespace().collect::<Vec<_>>().join(" ");
            // The message may not name the key; the line it points at does.
            if let Some(span) = e.span() {
                let start =
                    self.text[..span.start.min(self.text.len())].rfind('\n').map_or(0, |i| i + 1);
                let line = self.text[start..].lines().next().unwrap_or("").trim();
                if !line.is_empty() && !message.contains(line) {
                    message = format!("{message} (at `{line}`)");
                }
            }
            message.into()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Conf {
        count: u32,
    }

    #[test]
    fn config_errors_are_one_line_and_name_the_key() {
        let e = ComponentConfig::new("count = -1\n").parse::<Conf>().unwrap_err().to_string();
        assert!(!e.contains('\n'), "{e}");
        assert!(e.contains("count = -1"), "{e}");
        let e = ComponentConfig::new("cuont = 1\n").parse::<Conf>().unwrap_err().to_string();
        assert!(!e.contains('\n') && e.contains("cuont"), "{e}");
    }
}
