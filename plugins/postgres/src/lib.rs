//! An exactly-once PostgreSQL sink for squall: [`PostgresSink`].
//!
//! The sink stages the rows of each checkpoint interval in a durable store
//! of its own, so they are part of the checkpoint; once the checkpoint
//! commits it writes them with `COPY`, in one transaction with a progress
//! row that says they were written. A restart after a crash restores the
//! rows that were staged and not yet known to be written, and writes only
//! those the progress table does not already record. See docs/state.md,
//! "Exactly-once output to PostgreSQL".
//!
//! ```toml
//! [plugins]
//! pg = "target/release/libsquall_postgres.so"
//!
//! [state]
//! backend = "memory"           # or a durable backend: the sink needs one
//!
//! [bolts.store]
//! component = "pg::PostgresSink"
//! inputs = [{ from = "count" }]
//! config = { table = "counts", columns = ["word", "count"] }
//! ```

#![warn(missing_docs)]

mod buffer;
mod render;
mod sink;

pub use sink::PostgresSink;

squall_plugin_api::export_plugin! {
    basic_bolts: [PostgresSink],
}
