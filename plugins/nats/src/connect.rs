//! The connection settings both components share, the bounded connect retry,
//! and the small runtime each component runs its client on.

use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use async_nats::{Client, ConnectOptions, Event, ServerAddr};
use squall_connector::Health;

squall_connector::connector_config! {
    /// How to reach the server: the keys every NATS component accepts,
    /// declared once for both.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct Connection {
        url: String = default(String, "\"nats://127.0.0.1:4222\"", "the server; several comma-separated"),
        credentials_file: Option<PathBuf> = maybe(String, "a .creds file (user JWT and NKey seed)"),
        token: Option<String> = maybe(String, "a bearer token (not with credentials_file)"),
        tls: bool = default(Bool, "false", "require TLS"),
        ca_file: Option<PathBuf> = maybe(String, "a PEM file of root certificates to trust (implies tls)"),
        #[serde(deserialize_with = "squall_connector::config::duration")]
        connect_timeout: Duration = default(Duration, "\"2s\"", "the limit of one connection attempt"),
        connect_attempts: u32 = default(Integer, "5", "connection attempts at start before giving up"),
    }
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

    // String, here and below: async-nats reports connect and credential
    // errors as text-bearing types of several kinds; the message is what
    // callers log and return as the component's error.
    async fn options(&self, name: &str, health: Option<&Health>) -> Result<ConnectOptions, String> {
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
        // The connection's drops and returns: a log line each, the
        // `connector_up` gauge and `nats_reconnects` (squall_connector::health).
        if let Some(health) = health {
            let health = health.clone();
            options = options.event_callback(move |event| {
                match event {
                    Event::Disconnected => health.lost("disconnected from the server"),
                    Event::Connected => health.restored("reconnected to the server"),
                    _ => {}
                }
                std::future::ready(())
            });
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
        self.connect_watched(name, None).await
    }

    /// One connection attempt whose drops and returns `health` reports.
    ///
    /// # Errors
    /// As for [`Connection::connect_once`].
    pub async fn connect_watched(
        &self,
        name: &str,
        health: Option<&Health>,
    ) -> Result<Client, String> {
        let options = self.options(name, health).await?;
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
    pub async fn connect(&self, name: &str, health: Option<&Health>) -> Result<Client, String> {
        let mut pause = Duration::from_millis(250);
        let mut last = String::new();
        for attempt in 1..=self.connect_attempts {
            match self.connect_watched(name, health).await {
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

    /// The longest [`Connection::connect`] can take.
    pub fn connect_budget(&self) -> Duration {
        (self.connect_timeout + Duration::from_secs(2)) * self.connect_attempts
    }
}

/// A single-threaded tokio runtime for one component's I/O thread.
///
/// # Errors
/// The operating system refused the runtime's resources.
pub fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread().enable_all().build()
}

/// A NATS component's config: its own keys (`$keys`, declared with
/// `squall_connector::connector_config!`) and the [`Connection`] keys, read
/// from one table. It derefs to `$keys`; `KEYS` declares both.
macro_rules! with_connection {
    ($name:ident, $keys:ident) => {
        #[derive(Debug, Clone, PartialEq)]
        struct $name {
            keys: $keys,
            connection: crate::connect::Connection,
        }

        impl std::ops::Deref for $name {
            type Target = $keys;
            fn deref(&self) -> &$keys {
                &self.keys
            }
        }

        impl $name {
            const N: usize = $keys::KEYS.len() + crate::connect::Connection::KEYS.len();
            const KEYS: [squall_plugin_api::ConfigKey; Self::N] =
                squall_connector::config::concat_keys(
                    $keys::KEYS,
                    crate::connect::Connection::KEYS,
                );

            fn parse(
                config: &squall_plugin_api::ComponentConfig<'_>,
            ) -> squall_plugin_api::Result<Self> {
                let mut table = squall_connector::config::Table::parse(config)?;
                let keys = $keys::take(&mut table)?;
                let connection = crate::connect::Connection::take(&mut table)?;
                table.finish(&[&Self::KEYS])?;
                Ok(Self { keys, connection })
            }

            fn connection(&self) -> crate::connect::Connection {
                self.connection.clone()
            }
        }
    };
}
pub(crate) use with_connection;

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
        let e = rt.block_on(conn("nats://127.0.0.1:1").connect("test", None)).unwrap_err();
        assert!(e.contains("gave up after 2 attempts"), "{e}");
    }
}
