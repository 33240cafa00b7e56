//! Config declared once: [`connector_config!`](crate::connector_config)
//! writes the serde struct and the declared keys (`CONFIG_KEYS`, what
//! `squall validate` checks and `squall inspect` prints) from one table.
//! A default is written once, as the TOML text `inspect` prints; parsing
//! fills every missing key from it before serde reads the table, so the
//! struct and the declaration cannot disagree.
//!
//! ```
//! use std::time::Duration;
//! use squall_plugin_api::ComponentConfig;
//!
//! squall_connector::connector_config! {
//!     #[derive(Debug, Clone, PartialEq)]
//!     pub struct MyConfig {
//!         url: String = required(String, "the server"),
//!         batch: usize = default(Integer, "64", "messages per read"),
//!         #[serde(deserialize_with = "squall_connector::config::duration")]
//!         wait: Duration = default(Duration, "\"1s\"", "how long a read waits"),
//!         subject: Option<String> = maybe(String, "a filter"),
//!     }
//! }
//!
//! let c = MyConfig::parse(&ComponentConfig::new("url = \"x\"\nbatch = 8")).unwrap();
//! assert_eq!((c.batch, c.wait, c.subject), (8, Duration::from_secs(1), None));
//! assert_eq!(MyConfig::KEYS[1].default, Some("64"));
//! assert!(MyConfig::parse(&ComponentConfig::new("url = \"x\"\nbacth = 8")).is_err());
//! ```
//!
//! A connector whose components share keys (the connection) declares them
//! in a struct of their own and reads both from one table with
//! [`Table::take`] and [`Table::finish`]; [`concat_keys`] joins the
//! declarations into one `CONFIG_KEYS`.

use std::time::Duration;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer};
use squall_plugin_api::{ComponentConfig, ConfigKey, Result};

/// Declares a config struct and its keys (module doc). Each field is
/// `name: Type = required(Kind, "doc")`, `maybe(Kind, "doc")` (an
/// `Option`, absent by default) or `default(Kind, "TOML text", "doc")`,
/// where `Kind` is a [`KeyKind`](squall_plugin_api::KeyKind) variant.
/// Field attributes (`#[serde(...)]`) pass through. The struct gets
/// `KEYS`, `parse` and `take` (for [`Table`]).
#[macro_export]
macro_rules! connector_config {
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
                #[doc = $crate::__key_doc!($($arg),+)]
                $(#[$fmeta])*
                pub $field: $ty,
            )*
        }

        impl $name {
            /// The declared keys, in declaration order.
            pub const KEYS: &'static [$crate::__private::ConfigKey] = &[
                $( $crate::__key!($how, stringify!($field), $kind, $($arg),+), )*
            ];

            /// Reads a component's `config` table, defaults filled in.
            ///
            /// # Errors
            /// An unknown key, a missing required key or a bad value, named.
            #[allow(dead_code)]
            pub fn parse(config: &$crate::__private::ComponentConfig<'_>) -> $crate::__private::Result<Self> {
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
            pub fn take(table: &mut $crate::config::Table) -> $crate::__private::Result<Self> {
                table.take(Self::KEYS)
            }
        }
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __key {
    (required, $name:expr, $kind:ident, $doc:literal) => {
        $crate::__private::ConfigKey::required($name, $crate::__private::KeyKind::$kind, $doc)
    };
    (maybe, $name:expr, $kind:ident, $doc:literal) => {
        $crate::__private::ConfigKey::maybe($name, $crate::__private::KeyKind::$kind, $doc)
    };
    (default, $name:expr, $kind:ident, $default:literal, $doc:literal) => {
        $crate::__private::ConfigKey::optional(
            $name,
            $crate::__private::KeyKind::$kind,
            $default,
            $doc,
        )
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __key_doc {
    ($doc:literal) => {
        $doc
    };
    ($default:literal, $doc:literal) => {
        $doc
    };
}

/// A component's `config` table, read by one or more declared structs.
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
        Err(format!("unknown field `{unknown}`, expected one of {}", names.join(", ")).into())
    }
}

fn default_value(name: &str, text: &str) -> Result<toml::Value> {
    let doc: toml::Table = toml::from_str(&format!("v = {text}"))
        .map_err(|e| format!("the declared default of {name} ({text}) is not TOML: {e}"))?;
    Ok(doc.into_iter().next().map(|(_, v)| v).expect("one key"))
}

/// Joins two key declarations into one array, for `CONFIG_KEYS` (`N` is
/// `a.len() + b.len()`, which the compiler checks).
///
/// ```
/// use squall_plugin_api::{ConfigKey, KeyKind};
/// const A: &[ConfigKey] = &[ConfigKey::required("a", KeyKind::String, "a")];
/// const B: &[ConfigKey] = &[ConfigKey::maybe("b", KeyKind::String, "b")];
/// const ALL: [ConfigKey; 2] = squall_connector::config::concat_keys(A, B);
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

/// Deserialises a humantime duration: `"2s"`, `"500ms"`, `"1m 30s"`. A
/// duration beyond a year is refused here, at the key, rather than later.
///
/// # Errors
/// Not a string, not a duration, or too long.
pub fn duration<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<Duration, D::Error> {
    let text = String::deserialize(d)?;
    let parsed = humantime::parse_duration(&text).map_err(|e| {
        serde::de::Error::custom(format!(
            "{text:?} is not a duration ({e}); write e.g. \"2s\" or \"500ms\""
        ))
    })?;
    if parsed > Duration::from_secs(365 * 86_400) {
        return Err(serde::de::Error::custom(format!(
            "{text:?} is longer than a year; write a shorter duration"
        )));
    }
    Ok(parsed)
}

/// [`duration`] for an `Option<Duration>` field (with `#[serde(default)]`).
///
/// # Errors
/// As for [`duration`].
pub fn opt_duration<'de, D: Deserializer<'de>>(
    d: D,
) -> std::result::Result<Option<Duration>, D::Error> {
    duration(d).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;

    crate::connector_config! {
        #[derive(Debug, PartialEq)]
        struct Conn {
            url: String = default(String, "\"nats://127.0.0.1:4222\"", "the server"),
        }
    }

    crate::connector_config! {
        #[derive(Debug, PartialEq)]
        struct Own {
            stream: String = required(String, "the stream"),
            batch: u32 = default(Integer, "256", "per pull"),
            #[serde(deserialize_with = "crate::config::duration")]
            wait: Duration = default(Duration, "\"1s\"", "per pull"),
            #[serde(default, deserialize_with = "crate::config::opt_duration")]
            delay: Option<Duration> = maybe(Duration, "nak delay"),
            create: bool = default(Bool, "false", "create it"),
        }
    }

    #[test]
    fn defaults_come_from_the_declaration_and_unknown_keys_are_named() {
        let own = Own::parse(&ComponentConfig::new("stream = \"S\"")).unwrap();
        assert_eq!(
            own,
            Own {
                stream: "S".into(),
                batch: 256,
                wait: Duration::from_secs(1),
                delay: None,
                create: false
            }
        );
        let e = Own::parse(&ComponentConfig::new("stream = \"S\"\nbatc = 1")).unwrap_err();
        assert!(e.to_string().contains("unknown field `batc`"), "{e}");
        let e = Own::parse(&ComponentConfig::new("batch = 1")).unwrap_err();
        assert!(e.to_string().contains("stream"), "{e}");
        let e =
            Own::parse(&ComponentConfig::new("stream = \"S\"\nwait = \"9999 days\"")).unwrap_err();
        assert!(e.to_string().contains("longer than a year"), "{e}");
        assert_eq!(Own::KEYS.len(), 5);
        assert!(Own::KEYS[0].required);
        assert_eq!(Own::KEYS[2].default, Some("\"1s\""));
        assert_eq!(Own::KEYS[3].default, None);
    }

    #[test]
    fn two_structs_share_one_table() {
        const ALL: [ConfigKey; 6] = concat_keys(Own::KEYS, Conn::KEYS);
        let config = ComponentConfig::new("stream = \"S\"\nurl = \"nats://h:1\"\ndelay = \"2s\"");
        let mut t = Table::parse(&config).unwrap();
        let own: Own = Own::take(&mut t).unwrap();
        let conn: Conn = Conn::take(&mut t).unwrap();
        t.finish(&[&ALL]).unwrap();
        assert_eq!(own.delay, Some(Duration::from_secs(2)));
        assert_eq!(conn.url, "nats://h:1");
        let mut t = Table::parse(&ComponentConfig::new("stream = \"S\"\nzzz = 1")).unwrap();
        let _: Own = Own::take(&mut t).unwrap();
        let _: Conn = Conn::take(&mut t).unwrap();
        let e = t.finish(&[&ALL]).unwrap_err().to_string();
        assert!(e.contains("`zzz`") && e.contains("url"), "{e}");
    }
}
