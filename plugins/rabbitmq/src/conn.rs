//! The connection: the keys both components share, connecting with a
//! bounded wait, and declaring queues.

use std::time::Duration;

use lapin::options::QueueDeclareOptions;
use lapin::types::FieldTable;
use lapin::{Channel, Connection, ConnectionProperties};

/// The default server: the local RabbitMQ, guest user, vhost `/`.
#[cfg(test)]
pub const DEFAULT_URL: &str = "amqp://guest:guest@127.0.0.1:5672/%2f";

/// A single-threaded tokio runtime for one component's I/O.
pub fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread().enable_all().build()
}

/// A runtime with one worker thread of its own, for a bolt: the client's
/// I/O (heartbeats, confirms) goes on while `execute` is not running.
pub fn background_runtime(name: &str) -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name(name)
        .enable_all()
        .build()
}

/// Why a connection, a channel, a queue or a url is unusable; each message
/// names the url (its password redacted) or the queue.
#[derive(Debug)]
pub enum AmqpError {
    /// The server refused the connection.
    Connect { url: String, cause: lapin::Error },
    /// No connection within the timeout.
    ConnectTimeout { url: String, timeout: Duration },
    /// A step on the connection failed: "open a channel", ...
    Step { what: &'static str, cause: lapin::Error },
    /// The server refused to declare a queue.
    Declare { queue: String, cause: lapin::Error },
    /// The server refused to consume a queue.
    Consume { queue: String, cause: lapin::Error },
    /// A publish failed.
    Publish(lapin::Error),
    /// The url does not start with `amqp://`.
    Scheme { url: String },
    /// The url does not parse (the parser's words).
    BadUrl { url: String, cause: String },
}

impl std::fmt::Display for AmqpError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Connect { url, cause } => write!(f, "cannot connect to {url}: {cause}"),
            Self::ConnectTimeout { url, timeout } => {
                write!(f, "cannot connect to {url} within {timeout:?}")
            }
            Self::Step { what, cause } => write!(f, "cannot {what}: {cause}"),
            Self::Declare { queue, cause } => write!(f, "cannot declare queue {queue:?}: {cause}"),
            Self::Consume { queue, cause } => write!(f, "cannot consume queue {queue:?}: {cause}"),
            Self::Publish(cause) => cause.fmt(f),
            Self::Scheme { url } => write!(f, "url {url:?} must start with amqp://"),
            Self::BadUrl { url, cause } => write!(f, "url {url:?} is not an AMQP url: {cause}"),
        }
    }
}

impl std::error::Error for AmqpError {}

/// Connects to `url` (as `name`, which the management UI shows), waiting
/// at most `timeout`.
///
/// # Errors
/// The reason, with the address.
pub async fn connect(url: &str, name: &str, timeout: Duration) -> Result<Connection, AmqpError> {
    let props = ConnectionProperties::default().with_connection_name(name.into());
    match tokio::time::timeout(timeout, Connection::connect(url, props)).await {
        Ok(Ok(c)) => Ok(c),
        Ok(Err(cause)) => Err(AmqpError::Connect { url: redact(url), cause }),
        Err(_) => Err(AmqpError::ConnectTimeout { url: redact(url), timeout }),
    }
}

/// Declares a durable queue (a no-op when it exists with the same flags).
///
/// # Errors
/// The server refused (say, the queue exists with other flags).
pub async fn declare(channel: &Channel, queue: &str) -> Result<(), AmqpError> {
    channel
        .queue_declare(queue.into(), QueueDeclareOptions::durable(), FieldTable::default())
        .await
        .map(drop)
        .map_err(|cause| AmqpError::Declare { queue: queue.to_owned(), cause })
}

/// `url` without its password, for messages.
pub fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else { return url.to_owned() };
    match rest.split_once('@') {
        Some((user, host)) => {
            let user = user.split_once(':').map_or(user, |(u, _)| u);
            format!("{scheme}://{user}:***@{host}")
        }
        None => url.to_owned(),
    }
}

/// Checks the url's form (`amqp://...`).
///
/// # Errors
/// Not an `amqp://` url.
pub fn check_url(url: &str) -> Result<(), AmqpError> {
    if !url.starts_with("amqp://") {
        return Err(AmqpError::Scheme { url: redact(url) });
    }
    url.parse::<lapin::uri::AMQPUri>()
        .map(drop)
        .map_err(|e| AmqpError::BadUrl { url: redact(url), cause: e.to_string() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_password_never_reaches_a_message() {
        assert_eq!(redact("amqp://guest:secret@h:5672/%2f"), "amqp://guest:***@h:5672/%2f");
        assert_eq!(redact("amqp://h:5672"), "amqp://h:5672");
        assert!(check_url("amqp://guest:guest@127.0.0.1:5672/%2f").is_ok());
        assert!(check_url("http://x").unwrap_err().to_string().contains("amqp://"));
    }
}
