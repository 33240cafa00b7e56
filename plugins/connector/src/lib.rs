//! `squall-connector`: what every reliable squall spout needs, in one place.
//!
//! A connector moves messages between a broker (or a file) and a topology,
//! at least once. Each piece here is one decision made once for every
//! connector, the project's and third parties':
//!
//! | module | what |
//! | --- | --- |
//! | [`pending`] | the pending map with its cap, retry with backoff, `max_deliver` and the dead-letter decision with its reason, and the broker ack that can be deferred (acked downstream is not yet acked to the broker) |
//! | [`ids`] | the one message-id policy: unique in the process, so an instance rebuilt after a panic never mistakes a predecessor's id for its own |
//! | [`backoff`] | exponential backoff with a cap, for retries and reconnections |
//! | [`feed`] | the I/O thread's bounded channel to `next_tuple`, which wakes the spout's executor (contract 1.1's wake handle) and, when it was full, the producer |
//! | [`io`] | the I/O thread itself: started with a ready handshake, stopped within a declared close budget |
//! | [`health`] | the connection's state, seen by the host: a gauge `connector_up` (0 turns `/readyz` to 503), a reconnect counter, log lines when the connection drops and comes back, and the error `next_tuple` reports (so `last_error` says why) |
//! | [`durable`] | with durable state (contract 1.2): the broker messages a checkpoint position covers, so a restart neither loses nor counts twice |
//! | [`config`] | [`connector_config!`] (squall-plugin-api's `declare_config!`): the serde struct and the declared keys (`CONFIG_KEYS`) from one table, defaults written once; humantime durations |
//!
//! Nothing here takes a lock or makes a system call per tuple: the pending
//! map is the spout's own, the feed is a lock-free channel, the health
//! check in `next_tuple` is one relaxed atomic load.
//!
//! docs/plugins.md ("Writing a connector on squall-connector") shows a
//! complete connector on it.

pub mod backoff;
pub mod config;
pub mod durable;
pub mod feed;
pub mod health;
pub mod ids;
pub mod io;
pub mod pending;

pub use backoff::Backoff;
pub use durable::{Delivery, Positions};
pub use feed::{feed, Feed, Feeder};
pub use health::Health;
pub use ids::MessageIds;
pub use io::IoThread;
pub use pending::{Acked, DeadReason, Failed, Pending, Redelivery, RetryPolicy};

/// The default `max_deliver` of every connector: deliveries after which a
/// message that keeps failing is dead-lettered. Finite, so a poison message
/// is never retried for ever in silence.
pub const DEFAULT_MAX_DELIVER: u32 = 10;

/// Declares a connector's config struct and its keys from one table:
/// squall-plugin-api's [`declare_config!`](squall_plugin_api::declare_config)
/// under the name the connectors use (see [`config`]).
pub use squall_plugin_api::declare_config as connector_config;
