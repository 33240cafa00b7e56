//! [`QueuePublish`]: publishes its inputs with publisher confirms, and acks
//! each input once RabbitMQ confirmed it.

use std::time::{Duration, Instant};

use lapin::options::{BasicPublishOptions, ConfirmSelectOptions};
use lapin::BasicProperties;
use squall_plugin_api::metrics::{self, Counter};
use squall_plugin_api::prelude::*;

use crate::conn;

squall_connector::connector_config! {
    /// The bolt's `config` table: the struct and its declared keys.
    #[derive(Debug, Clone, PartialEq)]
    struct PublishConfig {
        url: String = default(String, "\"amqp://guest:guest@127.0.0.1:5672/%2f\"", "amqp://user:password@host:port/vhost (vhost / is %2f)"),
        exchange: String = default(String, "\"\"", "the exchange (\"\": the default exchange, which routes to the queue named by routing_key)"),
        routing_key: String = required(String, "the routing key (with the default exchange: the queue)"),
        declare: bool = default(Bool, "false", "declare the queue routing_key names (durable); only with the default exchange"),
        payload_field: Option<String> = maybe(String, "the input field published as the body (default: the first field)"),
        batch: usize = default(Integer, "100", "inputs published before their confirms are awaited together"),
        linger_ms: u64 = default(Integer, "50", "a partial batch is published when its oldest input is this old"),
        #[serde(deserialize_with = "squall_connector::config::duration")]
        confirm_timeout: Duration = default(Duration, "\"5s\"", "how long a batch waits for its confirms before its inputs fail"),
        #[serde(deserialize_with = "squall_connector::config::duration")]
        connect_timeout: Duration = default(Duration, "\"5s\"", "the limit of one connection attempt"),
    }
}

/// The bolt's counters.
#[derive(Debug)]
struct PublishMetrics {
    confirmed: Counter,
    failed: Counter,
}

/// A connected channel in confirm mode.
#[derive(Debug)]
struct Link {
    connection: lapin::Connection,
    channel: lapin::Channel,
}

/// Publishes one message per input (persistent, `delivery_mode` 2) to
/// `exchange` with `routing_key`; the body is `payload_field` (or the first
/// field): bytes as they are, strings as UTF-8, other values as text.
/// Inputs are published as they arrive and their confirms awaited `batch` at
/// a time (or when the oldest is `linger_ms` old, or at a tick: give the
/// bolt `tick_tuple_freq_secs`); each input is acked once RabbitMQ confirmed
/// it, failed (so the spout replays it) on a nack, a timeout or a lost
/// connection, after which the next batch reconnects. No outputs.
#[derive(Debug)]
pub struct QueuePublish {
    config: PublishConfig,
    rt: Option<tokio::runtime::Runtime>,
    link: Option<Link>,
    /// Published, confirm not yet awaited.
    waiting: Vec<(Anchor, lapin::PublisherConfirm)>,
    /// Inputs that could not be published (connection down): failed at the flush.
    unsent: Vec<Anchor>,
    oldest: Option<Instant>,
    metrics: Option<PublishMetrics>,
    errors: u64,
    name: String,
}

impl QueuePublish {
    fn rt(&self) -> &tokio::runtime::Runtime {
        self.rt.as_ref().expect("prepared")
    }

    fn connect(&mut self) -> std::result::Result<(), conn::AmqpError> {
        // Only after a failure (which drops the link) is the link checked
        // again: no per-input status query.
        if self.link.is_some() {
            return Ok(());
        }
        let config = self.config.clone();
        let name = self.name.clone();
        let link = self.rt().block_on(async move {
            let connection = conn::connect(&config.url, &name, config.connect_timeout).await?;
            let channel = connection
                .create_channel()
                .await
                .map_err(|cause| conn::AmqpError::Step { what: "open a channel", cause })?;
            channel.confirm_select(ConfirmSelectOptions::default()).await.map_err(|cause| {
                conn::AmqpError::Step { what: "enable publisher confirms", cause }
            })?;
            if config.declare {
                conn::declare(&channel, &config.routing_key).await?;
            }
            Ok::<_, conn::AmqpError>(Link { connection, channel })
        })?;
        self.link = Some(link);
        Ok(())
    }

    /// Awaits the confirms of everything published; acks or fails each input.
    fn flush(&mut self, collector: &mut BoltCollector<'_>) {
        self.oldest = None;
        for anchor in self.unsent.drain(..) {
            collector.fail(anchor);
            if let Some(m) = &self.metrics {
                m.failed.inc();
            }
        }
        if self.waiting.is_empty() {
            return;
        }
        let waiting = std::mem::take(&mut self.waiting);
        let timeout = self.config.confirm_timeout;
        let outcomes = self.rt().block_on(confirms(waiting, timeout));
        let mut first_error = None;
        for (anchor, outcome) in outcomes {
            match outcome {
                Ok(()) => {
                    collector.ack(anchor);
                    if let Some(m) = &self.metrics {
                        m.confirmed.inc();
                    }
                }
                Err(e) => {
                    collector.fail(anchor);
                    if let Some(m) = &self.metrics {
                        m.failed.inc();
                    }
                    first_error.get_or_insert(e);
                }
            }
        }
        if let Some(e) = first_error {
            if self.link.as_ref().is_some_and(|l| !l.connection.status().connected()) {
                self.link = None;
            }
            self.report(&e.to_string());
        }
    }

    fn report(&mut self, e: &str) {
        self.errors += 1;
        if self.errors.is_power_of_two() || self.errors.is_multiple_of(100) {
            squall_plugin_api::warn!(
                "rabbitmq publish to {:?}: inputs failed for replay: {e} (error #{})",
                self.config.routing_key,
                self.errors
            );
        }
    }
}

/// Why a publish was not confirmed.
#[derive(Debug)]
enum Unconfirmed {
    Nacked,
    Lost(lapin::Error),
    Timeout(Duration),
}

/// Awaits the confirms of `waiting`, all within `timeout`: each input's
/// outcome, in order.
async fn confirms(
    waiting: Vec<(Anchor, lapin::PublisherConfirm)>,
    timeout: Duration,
) -> Vec<(Anchor, std::result::Result<(), Unconfirmed>)> {
    let deadline = tokio::time::Instant::now() + timeout;
    let mut out = Vec::with_capacity(waiting.len());
    for (anchor, confirm) in waiting {
        let outcome = match tokio::time::timeout_at(deadline, confirm).await {
            Ok(Ok(c)) if c.is_ack() => Ok(()),
            Ok(Ok(_)) => Err(Unconfirmed::Nacked),
            Ok(Err(e)) => Err(Unconfirmed::Lost(e)),
            Err(_) => Err(Unconfirmed::Timeout(timeout)),
        };
        out.push((anchor, outcome));
    }
    out
}

impl std::fmt::Display for Unconfirmed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Nacked => f.write_str("nacked by the server"),
            Self::Lost(cause) => cause.fmt(f),
            Self::Timeout(timeout) => write!(f, "no confirm within {timeout:?}"),
        }
    }
}

/// A list where a message body belongs.
#[derive(Debug)]
struct ListBody;

impl std::fmt::Display for ListBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a list cannot be a message body")
    }
}

impl std::error::Error for ListBody {}

/// The body of `value`: bytes and strings as they are, numbers and
/// booleans as text, null as empty.
fn body(value: &Value) -> std::result::Result<std::borrow::Cow<'_, [u8]>, ListBody> {
    use std::borrow::Cow;
    if let Some(b) = value.as_bytes() {
        return Ok(Cow::Borrowed(b));
    }
    if let Some(s) = value.as_str() {
        return Ok(Cow::Borrowed(s.as_bytes()));
    }
    Ok(Cow::Owned(match value {
        Value::Null => Vec::new(),
        Value::Bool(b) => b.to_string().into_bytes(),
        Value::I64(n) => n.to_string().into_bytes(),
        Value::U64(n) => n.to_string().into_bytes(),
        Value::F64(n) => n.to_string().into_bytes(),
        _ => return Err(ListBody),
    }))
}

impl Bolt for QueuePublish {
    const NAME: &'static str = "QueuePublish";
    const CONFIG_KEYS: Option<&'static [ConfigKey]> = Some(PublishConfig::KEYS);
    const DESCRIPTION: &'static str =
        "publishes each input to RabbitMQ with publisher confirms; acks after the confirm";

    fn new(config: &ComponentConfig<'_>) -> Result<Self> {
        let config = PublishConfig::parse(config)?;
        conn::check_url(&config.url)?;
        if config.routing_key.is_empty() && config.exchange.is_empty() {
            return Err("routing_key must not be empty with the default exchange".into());
        }
        if config.declare && !config.exchange.is_empty() {
            return Err("declare applies only with the default exchange (exchange = \"\")".into());
        }
        if !(1..=100_000).contains(&config.batch) {
            return Err(format!("batch must be between 1 and 100000, got {}", config.batch).into());
        }
        if config.confirm_timeout.is_zero() || config.connect_timeout.is_zero() {
            return Err("confirm_timeout and connect_timeout must be longer than 0".into());
        }
        Ok(Self {
            config,
            rt: None,
            link: None,
            waiting: Vec::new(),
            unsent: Vec::new(),
            oldest: None,
            metrics: None,
            errors: 0,
            name: String::new(),
        })
    }

    fn prepare(&mut self, context: &TaskContext) -> Result<()> {
        self.name =
            format!("squall {} {} task {}", context.topology, context.component, context.task_id);
        self.rt = Some(conn::background_runtime(&format!(
            "amqp-{}-{}",
            context.component, context.task_id
        ))?);
        self.connect()?;
        self.metrics = Some(PublishMetrics {
            confirmed: metrics::counter(
                "rabbitmq_published",
                "Messages published and confirmed by RabbitMQ.",
            ),
            failed: metrics::counter(
                "rabbitmq_publish_failed",
                "Inputs failed because their publish was nacked, timed out or lost.",
            ),
        });
        Ok(())
    }

    fn execute(&mut self, input: &Tuple<'_>, collector: &mut BoltCollector<'_>) -> Result<()> {
        if input.is_tick() {
            self.flush(collector);
            return Ok(());
        }
        let value = match &self.config.payload_field {
            Some(name) => {
                input.field(name).ok_or_else(|| format!("the input has no field {name:?}"))?
            }
            None => input.get(0).ok_or("the input has no fields")?,
        };
        let payload = body(value)?;
        self.oldest.get_or_insert_with(Instant::now);
        let published = match self.connect() {
            Ok(()) => {
                let channel = &self.link.as_ref().expect("connected").channel;
                let props = BasicProperties::default().with_delivery_mode(2);
                let exchange = self.config.exchange.as_str().into();
                let key = self.config.routing_key.as_str().into();
                self.rt
                    .as_ref()
                    .expect("prepared")
                    .block_on(channel.basic_publish(
                        exchange,
                        key,
                        BasicPublishOptions::default(),
                        &payload,
                        props,
                    ))
                    .map_err(conn::AmqpError::Publish)
            }
            Err(e) => Err(e),
        };
        match published {
            Ok(confirm) => self.waiting.push((input.anchor(), confirm)),
            Err(e) => {
                self.link = None;
                self.unsent.push(input.anchor());
                self.report(&e.to_string());
            }
        }
        let due = self
            .oldest
            .is_some_and(|t| t.elapsed() >= Duration::from_millis(self.config.linger_ms));
        if self.waiting.len() + self.unsent.len() >= self.config.batch || due {
            self.flush(collector);
        }
        Ok(())
    }

    fn cleanup(&mut self) {
        if let (Some(rt), Some(link)) = (self.rt.as_ref(), self.link.take()) {
            let _ = rt.block_on(async {
                tokio::time::timeout(Duration::from_secs(2), async {
                    let _ = link.channel.close(200, "squall closing".into()).await;
                    let _ = link.connection.close(200, "squall closing".into()).await;
                })
                .await
            });
        }
        if let Some(rt) = self.rt.take() {
            rt.shutdown_timeout(Duration::from_secs(1));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_declared_defaults_are_the_ones_used_and_bad_values_are_refused() {
        let c = PublishConfig::parse(&ComponentConfig::new("routing_key = \"q\"")).unwrap();
        assert_eq!((c.batch, c.linger_ms, c.exchange.as_str()), (100, 50, ""));
        let err =
            |text: &str| QueuePublish::new(&ComponentConfig::new(text)).unwrap_err().to_string();
        assert!(err("routing_key = \"\"").contains("routing_key"));
        assert!(err("routing_key = \"q\"\nexchange = \"x\"\ndeclare = true").contains("declare"));
        assert!(err("routing_key = \"q\"\nbatch = 0").contains("batch"));
        assert!(err("routing_key = \"q\"\nurl = \"redis://x\"").contains("amqp://"));
    }

    #[test]
    fn bodies_are_bytes_strings_or_text() {
        assert_eq!(body(&Value::str("a")).unwrap().as_ref(), b"a");
        assert_eq!(body(&Value::U64(7)).unwrap().as_ref(), b"7");
        assert_eq!(body(&Value::Null).unwrap().as_ref(), b"");
    }
}
