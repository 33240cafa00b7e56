//! Redis Streams connector for squall.
//!
//! - [`StreamSpout`] reads a stream through a consumer group (XREADGROUP)
//!   and emits one tracked tuple per entry on `["id", "fields"]`. An entry is
//!   XACKed only when its whole tuple tree is acked, so delivery is at least
//!   once; failed trees are re-emitted, entries idle in dead consumers are
//!   claimed (XAUTOCLAIM), and entries delivered `max_deliver` times go to a
//!   dead-letter stream.
//! - [`StreamAppend`] XADDs its inputs to a stream in pipelines and acks each
//!   input after the server's reply.
//! - [`EntryField`] emits one named field of an entry on `["value"]`, for
//!   bolts that read a single value.
//!
//! Both use the blocking client of the `redis` crate. The spout's I/O runs on
//! one thread of its own per task, handing entries over a bounded channel, so
//! `next_tuple` never waits; a full channel stops the reads (back-pressure
//! into Redis). No async runtime is needed for one connection per task, and
//! none is started. The bolt sends its pipeline from `execute` (one round trip
//! per batch, bounded by `timeout_ms`).
//!
//! Every key, the guarantees and the failure behaviour are described in
//! `docs/connectors-redis.md`.
//!
//! # Example
//! ```toml
//! [plugins]
//! redis = "../target/release/libsquall_redis.so"
//!
//! [spouts.events]
//! component = "redis::StreamSpout"
//! config = { url = "redis://127.0.0.1:6379", stream = "events", group = "squall" }
//!
//! [bolts.out]
//! component = "redis::StreamAppend"
//! tick_tuple_freq_secs = 1
//! inputs = [{ from = "events" }]
//! config = { url = "redis://127.0.0.1:6379", stream = "events-copy", maxlen = 100000 }
//! ```

#![warn(missing_docs)]

mod append;
mod conn;
mod field;
mod reader;
mod spout;

pub use append::StreamAppend;
pub use field::EntryField;
pub use spout::StreamSpout;

squall_plugin_api::export_plugin! {
    spouts: [StreamSpout],
    bolts: [StreamAppend],
    basic_bolts: [EntryField],
}
