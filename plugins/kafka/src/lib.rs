//! Kafka connector for squall, on `squall_connector` and librdkafka (the
//! `rdkafka` crate, bundled build, no async runtime).
//!
//! - [`KafkaSpout`] reads topics in a consumer group (cooperative-sticky
//!   rebalancing by default) or explicitly assigned partitions, emits the
//!   fields it is asked for, and commits per partition only the offsets
//!   whose trees completed (Storm's rule: one past the highest contiguous
//!   done offset), on an interval, at a revocation and at close. Failed
//!   trees are replayed with backoff; after `max_deliver` deliveries a
//!   record goes to a dead-letter topic with its reason in headers, and the
//!   offset moves past it.
//! - [`KafkaPublish`] produces each input to a topic built from a template
//!   over its fields, with key, partition and headers from fields, on an
//!   idempotent producer, and acks the input only on the broker's delivery
//!   report.
//! - [`KafkaGroup`] coordinates a `[group]` of hosts through a Kafka
//!   consumer group: the broker assigns the input topic's partitions, and
//!   the group generation fences them.
//!
//! Every key, guarantee and failure mode is in docs/connectors.md
//! (section "Kafka").
//!
//! # Example
//! ```toml
//! [plugins]
//! kafka = "../target/release/libsquall_kafka.so"
//!
//! [spouts.in]
//! component = "kafka::KafkaSpout"
//! config = { topics = ["sentences"], group_id = "wordcount" }
//!
//! [bolts.out]
//! component = "kafka::KafkaPublish"
//! tick_tuple_freq_secs = 1
//! inputs = [{ from = "in" }]
//! config = { topic = "copies", value_field = "value" }
//! ```

#![warn(missing_docs)]

mod client;
mod durable;
pub mod group;
mod offsets;
mod publish;
mod spout;
pub mod template;
mod transact;

pub use group::KafkaGroup;
pub use publish::KafkaPublish;
pub use spout::{
    KafkaSpout, DEAD_LETTER_REASON, DELIVERIES, ORIGINAL_OFFSET, ORIGINAL_PARTITION, ORIGINAL_TOPIC,
};

squall_plugin_api::export_plugin! {
    spouts: [KafkaSpout],
    bolts: [KafkaPublish],
    coordinators: [KafkaGroup],
}
