//! The connection settings both components share, the bounded connect retry,
//! and the small runtime each component runs its client on.

use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use async_nats::{Client, ConnectOptions, ServerAddr};
use serde::{Deserialize, Deserializer};

/// How to reach the server: the keys every NATS component accepts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Connection {
    /// `nats://host:port` (or `tls://…`), comma-separated for several servers.
    pub url: String,
    /// A `.creds` file (JWT and NKey seed).
    pub credentials_file: Option<PathBuf>,
    /// A bearer token.
    pub token: Option<String>,
    /// Require TLS.
    pub tls: bool,
    /// A PEM file of root certificates to trust (implies TLS).
    pub ca_file: Option<PathBuf>,
    /// The time limit of one connection attempt.
    pub connect_timeout: Duration,
    /// Attempts at start before giving up (at least 1).
    pub connect_attempts: u32,
}

/// The default server: the local one.
pub fn default_url() -> String {
    "nats://127.0.0.1:4222".to_owned()
}

/// 2 s per connection attempt.
pub fn default_connect_timeout() -> Duration {
    Duration::from_secs(2)
}

/// 5 attempts at start.
pub fn default_connect_attempts() -> u32 {
    5
}

/// Deserialises a humantime duration: `"2s"`, `"500ms"`, `"1m 30s"`.
pub fn duration<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    let text = String::deserialize(d)?;
    humantime::parse_duration(&text).map_err(|e| {
        serde::de::Error::custom(format!(
            "{text:?} is not a duration ({e}); write e.g. \"2s\" or \"500ms\""
        ))
    })
}

/// Deserialises an optional humantime duration.
pub fn opt_duration<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
    duration(d).map(Some)
}

impl Connection {
    /// Checks what can be checked without a server: the URL parses, the
    /// attempt count and timeout are positive, the files exist.
    ///
    /// # Errors
    /// The first problem, naming the key.
    pub fn check(&self) -> squall_plugin_api::Result<()> {
        if self.url.trim().is_empty() {
            return Err("url must not be empty".into());
        }
        for server in self.url.split(',') {
            ServerAddr::from_str(server.trim()).map_err(|e| {
                format!("url {:?} is not a NATS server address: {e}", server.trim())
            })?;
        }
        if self.connect_attempts == 0 {
            return Err("connect_attempts must be at least 1".into());
        }
        if self.connect_timeout.is_zero() {
            return Err("connect_timeout must be longer than 0".into());
        }
        for (key, path) in
            [("credentials_file", &self.credentials_file), ("ca_file", &self.ca_file)]
        {
            if let Some(path) = path {
                if !path.is_file() {
                    return Err(format!("{key} {:?} is not a readable file", path.display()).into());
                }
            }
        }
        if self.credentials_file.is_some() && self.token.is_some() {
            return Err("give credentials_file or token, not both".into());
        }
        Ok(())
    }

    fn servers(&self) -> Vec<ServerAddr> {
        self.url.split(',').filter_map(|s| ServerAddr::from_str(s.trim()).ok()).collect()
    }

    async fn options(&self, name: &str) -> Result<ConnectOptions, String> {
        let mut options = match &self.credentials_file {
            Some(path) => ConnectOptions::with_credentials_file(path)
                .await
                .map_err(|e| format!("credentials_file {:?}: {e}", path.display()))?,
            None => ConnectOptions::new(),
        };
        if let Some(token) = &self.token {
            options = options.token(token.clone());
        }
        if self.tls || self.ca_file.is_some() {
            options = options.require_tls(true);
        }
        if let Some(ca) = &self.ca_file {
            options = options.add_root_certificates(ca.clone());
        }
        // After the first connection the client reconnects on its own, for
        // ever, with its own backoff; acks and publishes wait in its buffer.
        Ok(options
            .name(name)
            .connection_timeout(self.connect_timeout)
            .max_reconnects(None::<usize>))
    }

    /// One connection attempt.
    ///
    /// # Errors
    /// The server cannot be reached, refuses the credentials, or the
    /// credentials file cannot be read.
    pub async fn connect_once(&self, name: &str) -> Result<Client, String> {
        let options = self.options(name).await?;
        options
            .connect(self.servers())
            .await
            .map_err(|e| format!("cannot connect to {}: {e}", self.url))
    }

    /// Connects, trying `connect_attempts` times with a pause that doubles
    /// from 250 ms (at most 2 s) between attempts, so an unreachable server is
    /// a clear error after a bounded time, never a hang.
    ///
    /// # Errors
    /// The last attempt's error, with the number of attempts.
    pub async fn connect(&self, name: &str) -> Result<Client, String> {
        let mut pause = Duration::from_millis(250);
        let mut last = String::new();
        for attempt in 1..=self.connect_attempts {
            match self.connect_once(name).await {
                Ok(client) => return Ok(client),
                Err(e) => last = e,
            }
            if attempt < self.connect_attempts {
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_secs(2));
            }
        }
        Err(format!("{last} (gave up after {} attempts)", self.connect_attempts))
    }
}

/// A single-threaded tokio runtime for one component's I/O thread.
///
/// # Errors
/// The operating system refused the runtime's resources.
pub fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread().enable_all().build()
}

/// Where "a message is ready for `next_tuple`" is announced, in one place:
/// it wakes the spout's executor through the wake handle of contract 1.1
/// (`context.waker()` in `open`), so an idle spout blocks instead of
/// polling. Without a handle (a 1.0 host) it does nothing, and the executor
/// polls `next_tuple` under its wait strategy.
#[derive(Debug, Clone, Default)]
pub struct ReadyHook(pub Option<squall_plugin_api::Waker>);

impl ReadyHook {
    /// A message was put into the spout's channel.
    #[inline]
    pub fn ready(&self) {
        if let Some(waker) = &self.0 {
            waker.wake();
        }
    }
}

/// The `Connection` keys, repeated in each component's config struct (serde's
/// `flatten` does not combine with `deny_unknown_fields`).
macro_rules! connection_keys {
    ($(#[$meta:meta])* $vis:vis struct $name:ident { $($(#[$fmeta:meta])* $field:ident : $ty:ty,)* }) => {
        $(#[$meta])*
        $vis struct $name {
            $($(#[$fmeta])* $field: $ty,)*
            #[serde(default = "crate::connect::default_url")]
            url: String,
            #[serde(default)]
            credentials_file: Option<std::path::PathBuf>,
            #[serde(default)]
            token: Option<String>,
            #[serde(default)]
            tls: bool,
            #[serde(default)]
            ca_file: Option<std::path::PathBuf>,
            #[serde(default = "crate::connect::default_connect_timeout", deserialize_with = "crate::connect::duration")]
            connect_timeout: std::time::Duration,
            #[serde(default = "crate::connect::default_connect_attempts")]
            connect_attempts: u32,
        }

        impl $name {
            fn connection(&self) -> crate::connect::Connection {
                crate::connect::Connection {
                    url: self.url.clone(),
                    credentials_file: self.credentials_file.clone(),
                    token: self.token.clone(),
                    tls: self.tls,
                    ca_file: self.ca_file.clone(),
                    connect_timeout: self.connect_timeout,
                    connect_attempts: self.connect_attempts,
                }
            }
        }
    };
}
pub(crate) use connection_keys;

/// The declared config keys of a NATS component: its own `$key`s followed by
/// the [`Connection`] keys every component accepts (the declarations of the
/// fields [`connection_keys!`] adds), as a `CONFIG_KEYS` value.
macro_rules! declare_keys {
    ($($key:expr),* $(,)?) => {
        Some(&[
            $($key,)*
            squall_plugin_api::ConfigKey::optional(
                "url",
                squall_plugin_api::KeyKind::String,
                "\"nats://127.0.0.1:4222\"",
                "the server; several comma-separated",
            ),
            squall_plugin_api::ConfigKey::maybe(
                "credentials_file",
                squall_plugin_api::KeyKind::String,
                "a .creds file (user JWT and NKey seed)",
            ),
            squall_plugin_api::ConfigKey::maybe("token", squall_plugin_api::KeyKind::String, "a bearer token (not with credentials_file)"),
            squall_plugin_api::ConfigKey::optional("tls", squall_plugin_api::KeyKind::Bool, "false", "require TLS"),
            squall_plugin_api::ConfigKey::maybe(
                "ca_file",
                squall_plugin_api::KeyKind::String,
                "a PEM file of root certificates to trust (implies tls)",
            ),
            squall_plugin_api::ConfigKey::optional(
                "connect_timeout",
                squall_plugin_api::KeyKind::Duration,
                "\"2s\"",
                "the limit of one connection attempt",
            ),
            squall_plugin_api::ConfigKey::optional(
                "connect_attempts",
                squall_plugin_api::KeyKind::Integer,
                "5",
                "connection attempts at start before giving up",
            ),
        ])
    };
}
pub(crate) use declare_keys;

/// Sample values of the connection keys that have no default, for
/// `testing::check_config_keys`.
#[cfg(test)]
pub(crate) const CONNECTION_SAMPLES: &str = r#"
credentials_file = "/etc/nats/user.creds"
token = "secret"
ca_file = "/etc/nats/ca.pem"
"#;

#[cfg(test)]
mod tests {
    use super::*;

    fn conn(url: &str) -> Connection {
        Connection {
            url: url.into(),
            credentials_file: None,
            token: None,
            tls: false,
            ca_file: None,
            connect_timeout: Duration::from_millis(200),
            connect_attempts: 2,
        }
    }

    #[test]
    fn check_refuses_a_bad_url_and_a_missing_file() {
        assert!(conn("nats://127.0.0.1:4222").check().is_ok());
        assert!(conn("nats://a:1, nats://b:2").check().is_ok());
        let e = conn("http://[::1").check().unwrap_err().to_string();
        assert!(e.contains("not a NATS server address"), "{e}");
        let mut c = conn("nats://127.0.0.1:4222");
        c.ca_file = Some("/nonexistent/ca.pem".into());
        assert!(c.check().unwrap_err().to_string().contains("ca_file"));
    }

    #[test]
    fn connect_gives_up_after_its_attempts() {
        // Port 1 on loopback refuses at once.
        let rt = runtime().unwrap();
        let e = rt.block_on(conn("nats://127.0.0.1:1").connect("test")).unwrap_err();
        assert!(e.contains("gave up after 2 attempts"), "{e}");
    }
}
