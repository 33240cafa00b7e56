//! A component's configuration, as the topology file gave it, and the
//! struct that reads it declared once.
//!
//! [`declare_config!`](crate::declare_config) writes a component's serde
//! config struct and its declared keys (the `CONFIG_KEYS` that `squall
//! validate` checks and `squall inspect` prints) from one table. A default
//! is written once, as the TOML text `inspect` prints; parsing fills every
//! missing key from it before serde reads the table, so the struct and the
//! declaration cannot disagree.
//!
//! ```
//! use squall_plugin_api::prelude::*;
//!
//! squall_plugin_api::declare_config! {
//!     #[derive(Debug, Clone, PartialEq)]
//!     pub struct MyConfig {
//!         url: String = required(String, "the server"),
//!         batch: usize = default(Integer, "64", "messages per read"),
//!         subject: Option<String> = maybe(String, "a filter"),
//!     }
//! }
//!
//! struct MySpout(MyConfig);
//!
//! impl Spout for MySpout {
//!     const NAME: &'static str = "MySpout";
//!     const CONFIG_KEYS: Option<&'static [ConfigKey]> = Some(MyConfig::KEYS);
//!
//!     fn declare_outputs(outputs: &mut OutputDeclarer) {
//!         outputs.declare(&["message"]);
//!     }
//!
//!     fn new(config: &ComponentConfig<'_>) -> Result<Self> {
//!         MyConfig::parse(config).map(MySpout)
//!     }
//!
//!     fn next_tuple(&mut self, _collector: &mut SpoutCollector<'_>) -> Result<()> {
//!         Ok(())
//!     }
//! }
//!
//! let c = MyConfig::parse(&ComponentConfig::new("url = \"x\"\nbatch = 8")).unwrap();
//! assert_eq!((c.batch, c.subject), (8, None));
//! assert_eq!(MySpout::CONFIG_KEYS.unwrap()[1].default, Some("64"));
//! let e = MySpout::new(&ComponentConfig::new("url = \"x\"\nbacth = 8")).err().unwrap();
//! assert!(e.to_string().contains("unknown field `bacth`"), "{e}");
//! ```
//!
//! The crate using the macro depends on `serde` (with `derive`): the
//! struct derives `serde::Deserialize`, and field attributes such as
//! `#[serde(deserialize_with = "...")]` pass through. Components that share
//! keys (a connection) declare them in a struct of their own and read both
//! from one table with [`Table::take`] and [`Table::finish`];
//! [`concat_keys`] joins the declarations into one `CONFIG_KEYS`.

use serde::de::DeserializeOwned;

use crate::{ConfigKey, Result};

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

/// Declares a config struct and its keys from one table (see [`config`]).
///
/// Each field is `name: Type = required(Kind, "doc")`,
/// `maybe(Kind, "doc")` (an `Option`, absent by default) or
/// `default(Kind, "TOML text", "doc")`, where `Kind` is a [`KeyKind`]
/// variant. Field attributes (`#[serde(...)]`) pass through; the struct
/// derives `serde::Deserialize` with `deny_unknown_fields`, so the crate
/// depends on `serde`. The struct gets `KEYS` (for a component's
/// `CONFIG_KEYS`), `parse` (a component's `config` table, defaults filled
/// in) and `take` (its keys out of a shared [`config::Table`]).
///
/// [`config`]: crate::config
/// [`KeyKind`]: crate::KeyKind
/// [`config::Table`]: crate::config::Table
#[macro_export]
macro_rules! declare_config {
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident {
            $(
                $(#[$fmeta:meta])*
                $field:ident : $ty:ty = $how:ident ( $kind:ident , $($arg:literal),+ ) ,
            )*
        }
    ) => {
        $(#[$meta])*
        #[derive(serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        $vis struct $name {
            $(
                #[doc = $crate::__config_key_doc!($($arg),+)]
                $(#[$fmeta])*
                pub $field: $ty,
            )*
        }

        impl $name {
            /// The declared keys, in declaration order.
            pub const KEYS: &'static [$crate::ConfigKey] = &[
                $( $crate::__config_key!($how, stringify!($field), $kind, $($arg),+), )*
            ];

            /// Reads a component's `config` table, defaults filled in.
            ///
            /// # Errors
            /// An unknown key, a missing required key or a bad value, named.
            #[allow(dead_code)]
            pub fn parse(config: &$crate::ComponentConfig<'_>) -> $crate::Result<Self> {
                let mut table = $crate::config::Table::parse(config)?;
                let this = Self::take(&mut table)?;
                table.finish(&[Self::KEYS])?;
                Ok(this)
            }

            /// Takes this struct's keys out of `table` and reads them.
            ///
            /// # Errors
            /// As for `parse`.
            #[allow(dead_code)]
            pub fn take(table: &mut $crate::config::Table) -> $crate::Result<Self> {
                table.take(Self::KEYS)
            }
        }
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __config_key {
    (required, $name:expr, $kind:ident, $doc:literal) => {
        $crate::ConfigKey::required($name, $crate::KeyKind::$kind, $doc)
    };
    (maybe, $name:expr, $kind:ident, $doc:literal) => {
        $crate::ConfigKey::maybe($name, $crate::KeyKind::$kind, $doc)
    };
    (default, $name:expr, $kind:ident, $default:literal, $doc:literal) => {
        $crate::ConfigKey::optional($name, $crate::KeyKind::$kind, $default, $doc)
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __config_key_doc {
    ($doc:literal) => {
        $doc
    };
    ($default:literal, $doc:literal) => {
        $doc
    };
}

/// A component's `config` table, read by one or more declared structs
/// ([`declare_config!`](crate::declare_config)).
#[derive(Debug, Clone, Default)]
pub struct Table(toml::Table);

impl Table {
    /// Parses the table.
    ///
    /// # Errors
    /// The TOML is malformed.
    pub fn parse(config: &ComponentConfig<'_>) -> Result<Self> {
        if config.as_str().trim().is_empty() {
            return Ok(Self::default());
        }
        config.parse::<toml::Table>().map(Self)
    }

    /// Takes the `keys` out of the table, fills in their defaults and reads
    /// them as `T`.
    ///
    /// # Errors
    /// A missing required key, a bad value, or a declared default that does
    /// not parse (a bug of the declaration, named).
    pub fn take<T: DeserializeOwned>(&mut self, keys: &[ConfigKey]) -> Result<T> {
        let mut mine = toml::Table::new();
        for key in keys {
            match self.0.remove(key.name) {
                Some(v) => {
                    mine.insert(key.name.to_owned(), v);
                }
                None => {
                    if let Some(text) = key.default {
                        mine.insert(key.name.to_owned(), default_value(key.name, text)?);
                    }
                }
            }
        }
        let text = toml::to_string(&mine).map_err(|e| format!("cannot re-encode config: {e}"))?;
        ComponentConfig::new(&text).parse()
    }

    /// Fails on any key no struct took, naming it and what is accepted.
    ///
    /// # Errors
    /// The first unknown key.
    pub fn finish(self, accepted: &[&[ConfigKey]]) -> Result<()> {
        let Some(unknown) = self.0.keys().next() else { return Ok(()) };
        let names: Vec<&str> = accepted.iter().flat_map(|k| k.iter().map(|k| k.name)).collect();
        if names.is_empty() {
            return Err(format!("unknown field `{unknown}`: it takes no config keys").into());
        }
        Err(format!("unknown field `{unknown}`, expected one of {}", names.join(", ")).into())
    }
}

fn default_value(name: &str, text: &str) -> Result<toml::Value> {
    let doc: toml::Table = toml::from_str(&format!("v = {text}"))
        .map_err(|e| format!("the declared default of {name} ({text}) is not TOML: {e}"))?;
    doc.into_iter()
        .next()
        .map(|(_, v)| v)
        .ok_or_else(|| format!("the declared default of {name} ({text}) is empty").into())
}

/// Joins two key declarations into one array, for `CONFIG_KEYS` (`N` is
/// `a.len() + b.len()`, which the compiler checks).
///
/// ```
/// use squall_plugin_api::{ConfigKey, KeyKind};
/// const A: &[ConfigKey] = &[ConfigKey::required("a", KeyKind::String, "a")];
/// const B: &[ConfigKey] = &[ConfigKey::maybe("b", KeyKind::String, "b")];
/// const ALL: [ConfigKey; 2] = squall_plugin_api::config::concat_keys(A, B);
/// assert_eq!(ALL[1].name, "b");
/// ```
pub const fn concat_keys<const N: usize>(a: &[ConfigKey], b: &[ConfigKey]) -> [ConfigKey; N] {
    assert!(a.len() + b.len() == N, "N must be the sum of the lengths");
    assert!(!a.is_empty() || !b.is_empty(), "nothing to join");
    let mut out = [if a.is_empty() { b[0] } else { a[0] }; N];
    let mut i = 0;
    while i < a.len() {
        out[i] = a[i];
        i += 1;
    }
    let mut j = 0;
    while j < b.len() {
        out[a.len() + j] = b[j];
        j += 1;
    }
    out
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

    crate::declare_config! {
        #[derive(Debug, PartialEq)]
        struct Conn {
            url: String = default(String, "\"nats://127.0.0.1:4222\"", "the server"),
        }
    }

    crate::declare_config! {
        #[derive(Debug, PartialEq)]
        struct Own {
            stream: String = required(String, "the stream"),
            batch: u32 = default(Integer, "256", "per pull"),
            #[serde(default)]
            limit: Option<u64> = maybe(Integer, "at most this many"),
            create: bool = default(Bool, "false", "create it"),
        }
    }

    #[test]
    fn defaults_come_from_the_declaration_and_unknown_keys_are_named() {
        let own = Own::parse(&ComponentConfig::new("stream = \"S\"")).unwrap();
        assert_eq!(own, Own { stream: "S".into(), batch: 256, limit: None, create: false });
        let e = Own::parse(&ComponentConfig::new("stream = \"S\"\nbatc = 1")).unwrap_err();
        assert!(e.to_string().contains("unknown field `batc`"), "{e}");
        let e = Own::parse(&ComponentConfig::new("batch = 1")).unwrap_err();
        assert!(e.to_string().contains("stream"), "{e}");
        let e = Own::parse(&ComponentConfig::new("stream = \"S\"\nbatch = \"x\"")).unwrap_err();
        assert!(e.to_string().contains("batch"), "{e}");
        assert_eq!(Own::KEYS.len(), 4);
        assert!(Own::KEYS[0].required);
        assert_eq!(Own::KEYS[1].default, Some("256"));
        assert_eq!(Own::KEYS[2].default, None);
        assert!(!Own::KEYS[2].required);
        assert_eq!(Own::KEYS[3].doc, "create it");
    }

    #[test]
    fn two_structs_share_one_table() {
        const ALL: [ConfigKey; 5] = concat_keys(Own::KEYS, Conn::KEYS);
        let config = ComponentConfig::new("stream = \"S\"\nurl = \"nats://h:1\"\nlimit = 2");
        let mut t = Table::parse(&config).unwrap();
        let own = Own::take(&mut t).unwrap();
        let conn = Conn::take(&mut t).unwrap();
        t.finish(&[&ALL]).unwrap();
        assert_eq!(own.limit, Some(2));
        assert_eq!(conn.url, "nats://h:1");
        let mut t = Table::parse(&ComponentConfig::new("stream = \"S\"\nzzz = 1")).unwrap();
        Own::take(&mut t).unwrap();
        Conn::take(&mut t).unwrap();
        let e = t.finish(&[&ALL]).unwrap_err().to_string();
        assert!(e.contains("`zzz`") && e.contains("url"), "{e}");
    }

    #[test]
    fn a_default_that_is_not_toml_is_named() {
        let keys = [ConfigKey::optional("n", crate::KeyKind::Integer, "[", "n")];
        let e = Table::default().take::<toml::Table>(&keys).unwrap_err().to_string();
        assert!(e.contains("declared default of n"), "{e}");
    }
}
