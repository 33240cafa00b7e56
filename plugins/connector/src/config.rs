//! Config declared once: [`connector_config!`](crate::connector_config)
//! is squall-plugin-api's [`declare_config!`](squall_plugin_api::declare_config)
//! (and [`Table`] and [`concat_keys`] are its), re-exported under the name
//! the connectors use. It writes the serde struct and the declared keys
//! (`CONFIG_KEYS`, what `squall validate` checks and `squall inspect`
//! prints) from one table. This module adds the humantime [`duration`]
//! deserialisers connectors use for their timeouts.
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

use std::time::Duration;

use serde::{Deserialize, Deserializer};

pub use squall_plugin_api::config::{concat_keys, Table};

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
    use squall_plugin_api::{ComponentConfig, ConfigKey};

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
