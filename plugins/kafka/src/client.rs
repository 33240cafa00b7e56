//! What both components share: the connection keys (declared once), the
//! librdkafka configuration built from them and checked against
//! librdkafka itself, the client context that turns librdkafka's errors
//! into log lines and [`Health`], topic look-ups and creation, and a tiny
//! executor for the admin client's futures (no async runtime is linked).

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake};
use std::thread::Thread;
use std::time::Duration;

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::config::RDKafkaLogLevel;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::metadata::Metadata;
use rdkafka::{ClientConfig, ClientContext};
use squall_connector::Health;
use squall_plugin_api::Result;

squall_connector::connector_config! {
    /// How to reach the cluster: the keys every Kafka component accepts,
    /// declared once for both.
    #[derive(Debug, Clone, PartialEq)]
    pub struct Connection {
        brokers: String = default(String, "\"127.0.0.1:9092\"", "bootstrap.servers: host:port, comma-separated"),
        properties: BTreeMap<String, toml::Value> = default(Table, "{}", "librdkafka properties passed through (checked against librdkafka at validate)"),
        #[serde(deserialize_with = "squall_connector::config::duration")]
        connect_timeout: Duration = default(Duration, "\"10s\"", "how long open waits for the cluster's metadata before it fails"),
    }
}

/// Properties the components set themselves; `properties` may not set them
/// (each has a key of its own, or the component's guarantees rest on it).
const RESERVED: &[(&str, &str)] = &[
    ("bootstrap.servers", "use the key `brokers`"),
    ("metadata.broker.list", "use the key `brokers`"),
    ("group.id", "use the key `group_id`"),
    ("enable.auto.commit", "the spout commits completed offsets itself"),
    ("enable.auto.offset.store", "the spout commits completed offsets itself"),
    ("auto.offset.reset", "use the key `first_poll`"),
    ("enable.partition.eof", "the spout does not use end-of-partition events"),
    ("transactional.id", "use delivery = \"exactly-once\" and transactional_id_prefix"),
    ("transaction.timeout.ms", "use the key `transaction_timeout`"),
    ("queued.max.messages.kbytes", "use the spout's key `prefetch_bytes`"),
    ("queue.buffering.max.kbytes", "use the bolt's key `buffer_bytes`"),
    ("enable.idempotence", "use the bolt's key `idempotent`"),
    ("message.timeout.ms", "use the bolt's key `delivery_timeout`"),
];

impl Connection {
    /// Checks what needs no broker: the broker list is not empty, the
    /// timeout is positive, no reserved property is set, and each property
    /// value is a string, a number or a boolean.
    ///
    /// # Errors
    /// The first problem, naming the key or property.
    pub fn check(&self) -> Result<()> {
        if self.brokers.trim().is_empty() {
            return Err("brokers must not be empty".into());
        }
        if self.connect_timeout.is_zero() {
            return Err("connect_timeout must be longer than 0".into());
        }
        for name in self.properties.keys() {
            if let Some((_, why)) = RESERVED.iter().find(|(k, _)| k == name) {
                return Err(format!("properties: {name:?} is set by the component ({why})").into());
            }
        }
        self.property_values().map(drop)
    }

    fn property_values(&self) -> Result<Vec<(String, String)>> {
        self.properties
            .iter()
            .map(|(k, v)| {
                let text = match v {
                    toml::Value::String(s) => s.clone(),
                    toml::Value::Integer(n) => n.to_string(),
                    toml::Value::Float(f) => f.to_string(),
                    toml::Value::Boolean(b) => b.to_string(),
                    other => {
                        return Err(format!(
                            "properties: {k:?} must be a string, a number or a boolean, found a {}",
                            other.type_str()
                        )
                        .into())
                    }
                };
                Ok((k.clone(), text))
            })
            .collect()
    }

    /// The librdkafka configuration: `brokers`, the component's own
    /// `settings` (defaults a property may override, then fixed ones it may
    /// not), and `properties`. Checked by building librdkafka's native
    /// configuration, so an unknown property or a bad value is an error
    /// here, with librdkafka's own message.
    ///
    /// # Errors
    /// A property librdkafka refuses.
    pub fn client_config(
        &self,
        defaults: &[(&str, String)],
        fixed: &[(&str, String)],
    ) -> Result<ClientConfig> {
        let mut config = ClientConfig::new();
        config.set("bootstrap.servers", self.brokers.trim());
        config.set_log_level(RDKafkaLogLevel::Warning);
        for (k, v) in defaults {
            config.set(*k, v);
        }
        for (k, v) in self.property_values()? {
            config.set(k, v);
        }
        for (k, v) in fixed {
            config.set(*k, v);
        }
        config.create_native_config().map_err(|e| format!("properties: {}", describe(&e)))?;
        Ok(config)
    }
}

/// librdkafka's message for a configuration error, without the wrapper's
/// prefix.
fn describe(e: &KafkaError) -> String {
    match e {
        KafkaError::ClientConfig(_, message, key, value) => {
            format!("librdkafka refuses {key:?} = {value:?}: {message}")
        }
        other => other.to_string(),
    }
}

/// The client context of both components: librdkafka's log lines of
/// warning level and above go to the host's log (the first 8, then ever
/// more sparsely, so a broker that is down does not flood it), and
/// its connection errors to [`Health`].
#[derive(Debug, Clone)]
pub struct Context0 {
    label: Arc<str>,
    health: Option<Health>,
    logged: Arc<AtomicU64>,
    quiet: bool,
}

impl Context0 {
    /// A context for the task `label`, reporting to `health` if given.
    pub fn new(label: &str, health: Option<Health>) -> Self {
        Self { label: label.into(), health, logged: Arc::new(AtomicU64::new(0)), quiet: false }
    }

    /// A context that logs nothing (a probe whose failure is reported
    /// elsewhere).
    pub fn quiet() -> Self {
        Self { quiet: true, ..Self::new("kafka probe", None) }
    }

    /// The task's label.
    pub fn label(&self) -> &str {
        &self.label
    }

    /// A broker in librdkafka's statistics that holds requests and has
    /// sent nothing for `stall`, described; `None` when every broker
    /// answers. A broker that stopped answering keeps its connection open
    /// (a stopped process, a partition of the network), so librdkafka
    /// reports no error until `socket.timeout.ms`.
    pub fn stalled(statistics: &rdkafka::Statistics, stall: Duration) -> Option<String> {
        let stall_us = i64::try_from(stall.as_micros()).unwrap_or(i64::MAX);
        // A logical broker (the group coordinator's connection) may hold a
        // JoinGroup for as long as a rebalance takes: only the brokers'
        // own connections count.
        let broker = statistics.brokers.values().find(|b| {
            b.source != "logical" && b.state == "UP" && b.waitresp_cnt > 0 && b.rxidle > stall_us
        })?;
        Some(format!(
            "broker {} has answered nothing for {} ms with {} request(s) waiting",
            broker.name,
            broker.rxidle / 1000,
            broker.waitresp_cnt
        ))
    }

    /// True when a line may be logged now: the first 8, then the 16th,
    /// 32nd, 64th... (a broker that is down does not flood the log).
    fn may_log(&self) -> bool {
        let n = self.logged.fetch_add(1, Ordering::Relaxed) + 1;
        !self.quiet && (n <= 8 || n.is_power_of_two())
    }
}

impl ClientContext for Context0 {
    fn log(&self, level: RDKafkaLogLevel, fac: &str, message: &str) {
        let serious = matches!(
            level,
            RDKafkaLogLevel::Emerg
                | RDKafkaLogLevel::Alert
                | RDKafkaLogLevel::Critical
                | RDKafkaLogLevel::Error
        );
        if !(serious || matches!(level, RDKafkaLogLevel::Warning)) || !self.may_log() {
            return;
        }
        if serious {
            squall_plugin_api::error!("{}: librdkafka {fac}: {message}", self.label);
        } else {
            squall_plugin_api::warn!("{}: librdkafka {fac}: {message}", self.label);
        }
    }

    fn error(&self, error: KafkaError, reason: &str) {
        let code = error.rdkafka_error_code();
        let connection = matches!(
            code,
            Some(
                RDKafkaErrorCode::BrokerTransportFailure
                    | RDKafkaErrorCode::AllBrokersDown
                    | RDKafkaErrorCode::Resolve
                    | RDKafkaErrorCode::MessageTimedOut
            )
        );
        match (&self.health, connection) {
            (Some(health), true) => health.lost(reason),
            _ => {
                if self.may_log() {
                    squall_plugin_api::warn!("{}: librdkafka: {error}: {reason}", self.label);
                }
            }
        }
    }
}

/// A probe consumer (topic look-ups) uses the default rebalance.
impl rdkafka::consumer::ConsumerContext for Context0 {}

/// Runs a future to completion on this thread (the admin client's futures
/// are completed by its own thread; this only waits for them).
pub fn block_on<F: Future>(future: F) -> F::Output {
    struct Unpark(Thread);
    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Arc::new(Unpark(std::thread::current())).into();
    let mut cx = Context::from_waker(&waker);
    let mut future = std::pin::pin!(future);
    loop {
        if let Poll::Ready(out) = future.as_mut().poll(&mut cx) {
            return out;
        }
        std::thread::park();
    }
}

/// What the cluster says about `topics`: the partition count of each, or
/// `None` for a topic it does not know.
pub fn partitions(metadata: &Metadata, topics: &[String]) -> Vec<(String, Option<usize>)> {
    topics
        .iter()
        .map(|t| {
            let found = metadata.topics().iter().find(|m| m.name() == t).and_then(|m| {
                (m.error().is_none() && !m.partitions().is_empty()).then(|| m.partitions().len())
            });
            (t.clone(), found)
        })
        .collect()
}

/// Creates `topics` with `partitions` partitions each (replication 1, the
/// cluster default for the rest); a topic that exists already is fine.
///
/// # Errors
/// The admin client cannot be built, or the cluster refused a topic.
pub fn create_topics(
    config: &ClientConfig,
    topics: &[String],
    partitions: i32,
    timeout: Duration,
) -> std::result::Result<(), CreateTopicsError> {
    if topics.is_empty() {
        return Ok(());
    }
    let admin: AdminClient<_> = config
        .create_with_context(Context0::new("kafka admin", None))
        .map_err(CreateTopicsError::Admin)?;
    let new: Vec<NewTopic<'_>> =
        topics.iter().map(|t| NewTopic::new(t, partitions, TopicReplication::Fixed(1))).collect();
    let options = AdminOptions::new().operation_timeout(Some(timeout));
    let results = block_on(admin.create_topics(&new, &options))
        .map_err(|source| CreateTopicsError::Request { topics: topics.to_vec(), source })?;
    for result in results {
        match result {
            Ok(_) | Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {}
            Err((topic, code)) => return Err(CreateTopicsError::Refused { topic, code }),
        }
    }
    Ok(())
}

/// Why [`create_topics`] failed.
#[derive(Debug, thiserror::Error)]
pub enum CreateTopicsError {
    /// The admin client could not be created.
    #[error("cannot create the admin client: {0}")]
    Admin(KafkaError),
    /// The request failed as a whole.
    #[error("cannot create topics {topics:?}: {source}")]
    Request {
        /// The topics asked for.
        topics: Vec<String>,
        /// The client's error.
        source: KafkaError,
    },
    /// The broker refused one topic.
    #[error("cannot create topic {topic:?}: {code}")]
    Refused {
        /// The topic.
        topic: String,
        /// The broker's error code.
        code: RDKafkaErrorCode,
    },
}

/// A topic name Kafka accepts: 1 to 249 of `[a-zA-Z0-9._-]`, not `.` or `..`.
pub fn check_topic(key: &str, topic: &str) -> Result<()> {
    let ok = !topic.is_empty()
        && topic.len() <= 249
        && topic != "."
        && topic != ".."
        && topic.chars().all(|c| c.is_ascii_alphanumeric() || "._-".contains(c));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{key}: {topic:?} is not a Kafka topic name (1 to 249 of a-z, A-Z, 0-9, '.', '_', '-')"
        )
        .into())
    }
}

/// A Kafka component's config: its own keys (`$keys`, declared with
/// `squall_connector::connector_config!`) and the [`Connection`] keys, read
/// from one table. It derefs to `$keys`; `KEYS` declares both.
macro_rules! with_connection {
    ($name:ident, $keys:ident) => {
        #[derive(Debug, Clone, PartialEq)]
        struct $name {
            keys: $keys,
            connection: crate::client::Connection,
        }

        impl std::ops::Deref for $name {
            type Target = $keys;
            fn deref(&self) -> &$keys {
                &self.keys
            }
        }

        impl $name {
            const N: usize = $keys::KEYS.len() + crate::client::Connection::KEYS.len();
            const KEYS: [squall_plugin_api::ConfigKey; Self::N] =
                squall_connector::config::concat_keys($keys::KEYS, crate::client::Connection::KEYS);

            fn parse(
                config: &squall_plugin_api::ComponentConfig<'_>,
            ) -> squall_plugin_api::Result<Self> {
                let mut table = squall_connector::config::Table::parse(config)?;
                let keys = $keys::take(&mut table)?;
                let connection = crate::client::Connection::take(&mut table)?;
                table.finish(&[&Self::KEYS])?;
                Ok(Self { keys, connection })
            }
        }
    };
}
pub(crate) use with_connection;

#[cfg(test)]
mod tests {
    use super::*;
    use squall_plugin_api::ComponentConfig;

    fn conn(text: &str) -> Connection {
        Connection::parse(&ComponentConfig::new(text)).unwrap()
    }

    #[test]
    fn an_unknown_property_is_refused_by_librdkafka_itself() {
        let c = conn("properties = { \"linger.ms\" = 5, \"client.id\" = \"x\" }");
        c.check().unwrap();
        let config = c.client_config(&[], &[]).unwrap();
        assert_eq!(config.get("linger.ms"), Some("5"));
        let c = conn("properties = { \"no.such.property\" = 1 }");
        c.check().unwrap();
        let e = c.client_config(&[], &[]).unwrap_err().to_string();
        assert!(e.contains("no.such.property") && e.contains("No such configuration"), "{e}");
        let c = conn("properties = { \"linger.ms\" = \"soon\" }");
        let e = c.client_config(&[], &[]).unwrap_err().to_string();
        assert!(e.contains("linger.ms"), "{e}");
        // Built without TLS: librdkafka refuses it at once, not at connect.
        let c = conn("properties = { \"security.protocol\" = \"ssl\" }");
        let e = c.client_config(&[], &[]).unwrap_err().to_string();
        assert!(e.contains("security.protocol"), "{e}");
    }

    #[test]
    fn reserved_and_nested_properties_are_refused_with_the_key_to_use() {
        let e = conn("properties = { \"group.id\" = \"g\" }").check().unwrap_err().to_string();
        assert!(e.contains("group_id"), "{e}");
        // The bounds the memory estimate counts have keys of their own.
        for (property, key) in [
            ("queued.max.messages.kbytes", "prefetch_bytes"),
            ("queue.buffering.max.kbytes", "buffer_bytes"),
            ("message.timeout.ms", "delivery_timeout"),
        ] {
            let text = format!("properties = {{ \"{property}\" = 1 }}");
            let e = conn(&text).check().unwrap_err().to_string();
            assert!(e.contains(key), "{e}");
        }
        let e = conn("properties = { a = [1] }").check().unwrap_err().to_string();
        assert!(e.contains("must be a string"), "{e}");
        assert!(conn("brokers = \" \"").check().is_err());
    }

    #[test]
    fn topic_names_are_checked() {
        assert!(check_topic("topic", "orders.v1_a-b").is_ok());
        for bad in ["", ".", "..", "a b", "a/b", &"x".repeat(250)] {
            assert!(check_topic("topic", bad).is_err(), "{bad:?}");
        }
    }
}
