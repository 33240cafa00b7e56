//! RabbitMQ connector for squall, on `squall_connector`.
//!
//! - [`QueueSpout`] consumes a queue with manual acks and a prefetch (the
//!   pending cap): a message is acked to RabbitMQ only when its tuple tree
//!   completes; a failed tree is emitted again after a backoff; the delivery
//!   that fails `max_deliver` times goes to a dead-letter queue (published
//!   with a publisher confirm, then acked). A lost connection is logged,
//!   counted and turns `/readyz` to 503; the spout reconnects with backoff,
//!   and RabbitMQ redelivers what was unacked.
//! - [`QueuePublish`] publishes its inputs (persistent) with publisher
//!   confirms, and acks each input once RabbitMQ confirmed it.
//!
//! Every key, the guarantees and the failure behaviour are in
//! docs/connectors.md ("RabbitMQ").
//!
//! # Example
//! ```toml
//! [plugins]
//! rabbitmq = "../target/release/libsquall_rabbitmq.so"
//!
//! [spouts.orders]
//! component = "rabbitmq::QueueSpout"
//! config = { url = "amqp://guest:guest@127.0.0.1:5672/%2f", queue = "orders" }
//!
//! [bolts.out]
//! component = "rabbitmq::QueuePublish"
//! tick_tuple_freq_secs = 1
//! inputs = [{ from = "orders" }]
//! config = { routing_key = "orders-copy", declare = true }
//! ```

#![warn(missing_docs)]

mod conn;
mod publish;
mod spout;

pub use publish::QueuePublish;
pub use spout::QueueSpout;

squall_plugin_api::export_plugin! {
    spouts: [QueueSpout],
    bolts: [QueuePublish],
}
