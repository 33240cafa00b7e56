//! NATS JetStream connector for squall: a reliable spout over a durable pull
//! consumer, and a bolt that publishes with PubAck-driven acking.
//!
//! # Overview
//! - [`JetStreamSpout`] pulls from a durable consumer and emits
//!   `["subject", "payload", "headers"]` (or just `["payload"]` on stream
//!   `payload`); it acks a message to JetStream only when its squall tree
//!   completes and naks it when the tree fails or times out, dead-letters
//!   poison messages after `max_deliver`, and resolves everything it holds
//!   at `close`.
//! - [`JetStreamPublish`] publishes each input to a subject built from a
//!   [template](template) (`counts.{word}`, `words.{partition(word, 4)}`)
//!   and acks the input only after the server's PubAck.
//! - [`JetStreamLeases`] coordinates a group of hosts (`[group]`, contract
//!   1.3): each partition is owned by one host at a time, through leases
//!   in a JetStream KV bucket, each fenced by its epoch.
//!
//! Each component runs the async-nats client on its own single-threaded
//! tokio runtime, on its own thread; the executor's thread never blocks on
//! the network. Every key, guarantee and failure mode is in
//! docs/connectors.md (section "NATS JetStream").
//!
//! # Example
//! ```toml
//! [plugins]
//! nats = "../target/release/libsquall_nats.so"
//!
//! [spouts.in]
//! component = "nats::JetStreamSpout"
//! config = { stream = "ORDERS", consumer = "squall", ack_wait = "30s" }
//!
//! [bolts.out]
//! component = "nats::JetStreamPublish"
//! tick_tuple_freq_secs = 1
//! inputs = [{ from = "in" }]
//! config = { subject = "copied.{subject}", payload_field = "payload" }
//! ```

#![warn(missing_docs)]

mod connect;
pub mod group;
mod publish;
mod spout;
pub mod template;

pub use group::JetStreamLeases;
pub use publish::JetStreamPublish;
pub use spout::{JetStreamSpout, DEAD_LETTER_REASON, DELIVERIES, ORIGINAL_SUBJECT};

squall_plugin_api::export_plugin! {
    spouts: [JetStreamSpout],
    bolts: [JetStreamPublish],
    coordinators: [JetStreamLeases],
}
