//! The validated, typed topology: what the rest of the host sees.
//!
//! Nothing here carries TOML spans. Every name the user wrote carries a [`Loc`]
//! instead, so that checks that need the loaded plugins (unknown component, missing
//! stream, unknown field) can still point at the file. Defaults are already applied;
//! see [`super::defaults`] for each one and where it comes from.

use std::path::PathBuf;

use super::defaults;
use super::diagnostic::Loc;
use super::limits::{
    MAX_ACKER_EXECUTORS, MAX_DURATION_SECS, MAX_LIFECYCLE_SECS, MAX_MEMORY_BUDGET_MIB, MAX_MILLIS,
    MAX_RECEIVE_BUFFER_BYTES, MAX_RECEIVE_BUFFER_SIZE, MAX_RESTARTS, MAX_SPOUT_PENDING,
    MAX_SPOUT_RECVQ_SKIPS, MAX_TIMEOUT_BUCKETS,
};
use super::setting::settings_table;

// The `[topology]` settings: one entry per key, and everything about the
// key is in its entry (see `setting.rs` for what is generated from it).
//
// # Adding a setting
//
// Write one entry in `table` below, where it should come in "did you mean"
// order:
//
// ```text
// /// What it does, for rustdoc (the default and range are added).
// checkpoint_interval_secs: u64 {
//     default: 10,
//     range: 1..=MAX_DURATION_SECS,
//     // Optional: a check against the other settings, run once every key
//     // is read and valid; the error is reported at this key's value
//     // (file:line:col), or at [topology] when it is not written.
//     check: |s| {
//         if s.checkpoint_interval_secs < s.message_timeout_secs {
//             Ok(())
//         } else {
//             Err(super::setting::Problem::new(format!(
//                 "must be shorter than message_timeout_secs ({} s), found {}",
//                 s.message_timeout_secs, s.checkpoint_interval_secs
//             )))
//         }
//     },
// }
// ```
//
// That gives the `Settings` field, its default, its type and range check
// with the diagnostic at the value, its place in the unknown-key
// suggestions and its cross-check. The type is `u64`, `u32`, `usize`,
// `Option<u32>` (absent or 0 is `None`) or `bool`; an integer needs a
// `range` (it does not compile without one), `bool` has none. A bound used
// by other keys too belongs in `limits.rs`; one of this key alone can be
// written here. Then add the key's row to the `[topology]` table of
// docs/topology.md: a unit test (`the_docs_list_every_setting_...`) fails
// until the row gives the same type, default and range. The defaults must
// pass every check (a unit test says so too).
//
// A key that is not a plain value (`name`, `http`) is read by hand in
// `settings.rs`; a field that is not a key goes in `read_elsewhere`.
settings_table! {
    table {
        /// Storm `topology.message.timeout.secs` (seed 003): a tracked tree
        /// not completed within it fails with reason timeout.
        message_timeout_secs: u64 {
            default: 30,
            range: 1..=MAX_DURATION_SECS,
        }
        /// Storm `topology.enable.message.timeouts` (seed 003).
        enable_message_timeouts: bool {
            default: true,
        }
        /// Storm `topology.max.spout.pending`, per spout task. `None` =
        /// unlimited (the key was absent or 0).
        max_spout_pending: Option<u32> {
            default: None,
            range: 0..=MAX_SPOUT_PENDING,
        }
        /// Storm `topology.acker.executors` (seed 004; Storm defaults to one
        /// per worker): the number of acker executors; 0 disables tracking
        /// (spout tuples are acked on emit).
        acker_executors: u32 {
            default: 1,
            range: 0..=MAX_ACKER_EXECUTORS,
        }
        /// Storm `topology.spout.recvq.skips` (seed 000, `conf/defaults.yaml`).
        spout_recvq_skips: u32 {
            default: 3,
            range: 1..=MAX_SPOUT_RECVQ_SKIPS,
        }
        /// Storm 2.x `topology.executor.receive.buffer.size`: each bolt
        /// task's receive queue, in tuples.
        receive_buffer_size: usize {
            default: 32768,
            range: 2..=MAX_RECEIVE_BUFFER_SIZE,
        }
        /// `receive_buffer_bytes`: the byte budget of each bolt task's receive
        /// queue (encoded value bytes); 0 = no byte budget, only the tuple count.
        receive_buffer_bytes: u64 {
            default: super::limits::DEFAULT_RECEIVE_BUFFER_BYTES,
            range: 0..=MAX_RECEIVE_BUFFER_BYTES,
        }
        /// Storm `topology.producer.batch.size`. Once read, clamped like Storm
        /// does to `max(1, min(value, receive_buffer_size / 2))` (see
        /// `settings.rs`).
        producer_batch_size: usize {
            default: 1,
            range: 1..=MAX_RECEIVE_BUFFER_SIZE,
        }
        /// Storm `topology.batch.flush.interval.millis`; 0 = flush only when idle.
        batch_flush_interval_millis: u64 {
            default: 1,
            range: 0..=MAX_MILLIS,
        }
        /// Buckets of each spout's pending RotatingMap. Storm hard-codes 2, so
        /// a tuple times out between T and 2T (seed 003).
        timeout_buckets: u32 {
            default: 2,
            range: 2..=MAX_TIMEOUT_BUCKETS,
        }
        /// How long a graceful shutdown may drain before the host stops
        /// waiting (ours).
        shutdown_timeout_secs: u64 {
            default: 10,
            range: 0..=MAX_LIFECYCLE_SECS,
        }
        /// How long building every instance (the plugins' constructors) may take
        /// before the host gives up on a constructor that blocks.
        startup_timeout_secs: u64 {
            default: 30,
            range: 1..=MAX_LIFECYCLE_SECS,
        }
        /// Restarts of a panicking component instance allowed within
        /// `restart_window_secs`; one more stops the topology (ours).
        max_restarts: u32 {
            default: 3,
            range: 0..=MAX_RESTARTS,
        }
        /// The window over which `max_restarts` is counted (ours).
        restart_window_secs: u64 {
            default: 60,
            range: 0..=MAX_DURATION_SECS,
        }
        /// Load plugin libraries even when they, or a folder on their path, are
        /// writable by group or others (refused by default; see
        /// docs/operations.md).
        allow_writable_plugins: bool {
            default: false,
        }
        /// The most memory, in MiB, the topology's queues and pending maps are
        /// estimated to need (see [`super::limits::estimate`]); a topology
        /// estimated above it is refused at validate time. 4 GiB by default.
        memory_budget_mib: u64 {
            default: 4096,
            range: 1..=MAX_MEMORY_BUDGET_MIB,
        }
    }
    read_elsewhere {
        /// `http`: where `squall run` serves metrics, the REST API and the live
        /// page (`--http` overrides it); off when `None`. Read by hand (an
        /// address or a table).
        http: Option<std::net::SocketAddr> = None,
        /// `[topology.http]`: who may use the endpoint, and how it is served.
        http_options: HttpOptions = HttpOptions::default(),
        /// How long an acker polls its queue when it runs out of messages: the
        /// `spin_micros` of `[wait.bolt]` (Storm's acker is a bolt), 0 when the
        /// bolt wait is not progressive. Not a `[topology]` key.
        acker_spin_micros: u64 = defaults::BOLT_SPIN_MICROS,
    }
}

/// `[topology.http]` beyond its `addr`: the tokens (read from files or
/// environment variables, never written in the topology file), what is open
/// without one, the names the endpoint answers to, and TLS. See
/// `docs/http-api.md`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HttpOptions {
    /// A file holding the `control` token (which also grants `read`).
    pub token_file: Option<PathBuf>,
    /// An environment variable holding the `control` token.
    pub token_env: Option<String>,
    /// A file holding a `read`-only token.
    pub read_token_file: Option<PathBuf>,
    /// An environment variable holding a `read`-only token.
    pub read_token_env: Option<String>,
    /// `/metrics` needs no token even when tokens are set.
    pub metrics_public: bool,
    /// Host names (with or without `:PORT`) the endpoint answers to besides
    /// the bound address, `localhost` and IP literals.
    pub allowed_hosts: Vec<String>,
    /// Origins that may call the API from another site (CORS); none by default.
    pub cors_origins: Vec<String>,
    /// The TLS certificate chain (PEM); with `tls_key`, serve HTTPS.
    pub tls_cert: Option<PathBuf>,
    /// The TLS private key (PEM).
    pub tls_key: Option<PathBuf>,
    /// The most connections served at once; past it, 503.
    pub max_connections: Option<u32>,
}

impl HttpOptions {
    /// A control token is configured (a file or a variable).
    pub fn has_control_token(&self) -> bool {
        self.token_file.is_some() || self.token_env.is_some()
    }
}

/// One `[plugins]` entry: a shared library and the alias components use for it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PluginDecl {
    /// The key in `[plugins]`, used as `alias::Component`.
    pub alias: String,
    /// The library path after interpolation, joined to the TOML file's directory
    /// when relative.
    pub path: PathBuf,
    /// Expected SHA-256 of the library, 64 lowercase hex digits.
    pub sha256: Option<String>,
    /// `allow_writable = true`: load it even if group or others can write it
    /// or a folder on its path.
    pub allow_writable: bool,
    /// Where the alias is written.
    pub loc: Loc,
}

/// A component named as `alias::Component`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ComponentRef {
    /// The plugin alias, declared in `[plugins]`.
    pub alias: String,
    /// The component name inside that plugin's catalogue.
    pub component: String,
    /// Where the reference string is written.
    pub loc: Loc,
}

/// How an idle or blocked thread waits, in one situation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WaitSpec {
    /// Storm's `WaitStrategyProgressive`: `level1_count` immediate returns, then
    /// `level2_count` ~1 ns parks, then sleeps of `level3_sleep_millis`.
    Progressive {
        /// Calls that return at once.
        level1_count: u32,
        /// Further calls that park for about 1 ns.
        level2_count: u32,
        /// Sleep per call after that.
        level3_sleep_millis: u64,
        /// The longest level-3 sleep: each idle turn at level 3 doubles the
        /// sleep, from `level3_sleep_millis` up to this (equal: no back-off).
        level3_max_sleep_millis: u64,
        /// The bolt wait only (squall's own): how long the first idle turn
        /// after work polls the queues before level 1 (0 = no spin).
        spin_micros: u64,
    },
    /// Storm's `WaitStrategyPark`: park for `park_micros` (0 = busy spin).
    Park {
        /// Microseconds per wait.
        park_micros: u64,
    },
    /// A wait strategy from a plugin.
    Plugin {
        /// The strategy component.
        component: ComponentRef,
        /// Every key of the wait table other than `strategy`, as a TOML document.
        config: String,
        /// Those keys, where each is written (checked against the keys the
        /// strategy declares).
        keys: Vec<ConfigKeyLoc>,
    },
}

/// The topology-wide `[wait.*]` strategies, one per situation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WaitDefaults {
    /// Spout wait: `next_tuple` emitted nothing, or max-spout-pending is reached.
    pub spout: WaitSpec,
    /// Bolt wait: the receive queue was empty.
    pub bolt: WaitSpec,
    /// Backpressure wait: emits are pending because a downstream queue is full.
    pub backpressure: WaitSpec,
}

impl Default for WaitDefaults {
    fn default() -> Self {
        WaitDefaults {
            spout: defaults::spout_wait(),
            bolt: defaults::bolt_wait(),
            backpressure: defaults::backpressure_wait(),
        }
    }
}

/// Per-component `wait.*` overrides; `None` uses the topology's [`WaitDefaults`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WaitOverrides {
    /// Spouts only.
    pub spout: Option<WaitSpec>,
    /// Bolts only.
    pub bolt: Option<WaitSpec>,
    /// Spouts and bolts.
    pub backpressure: Option<WaitSpec>,
}

/// A rate limit on a spout or on one input edge (HDFS `DataTransferThrottler`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ThrottleSpec {
    /// Period-based (the HDFS algorithm) or smooth.
    pub mode: ThrottleMode,
    /// What is limited, and to how much per second.
    pub rate: ThrottleRate,
    /// The accounting period; `bytes_per_period = rate * period_millis / 1000`.
    pub period_millis: u64,
    /// Where the `throttle` value is written.
    pub loc: Loc,
}

pub use crate::throttle::ThrottleMode;

/// The limited quantity, per second; always greater than 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ThrottleRate {
    /// Tuples per second.
    TuplesPerSec(u64),
    /// Serialized bytes per second.
    BytesPerSec(u64),
}

/// One top-level key of a component's `config` table, where it is written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigKeyLoc {
    /// The key.
    pub name: String,
    /// Where the key is written.
    pub loc: Loc,
    /// The TOML type of its value (`string`, `integer`, `float`, `bool`,
    /// `datetime`, `array`, `table`).
    pub kind: &'static str,
}

/// What a `[spouts.NAME]` and a `[bolts.NAME]` table both declare.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ComponentDecl {
    /// The table name; the component id in the topology.
    pub name: String,
    /// Where the name is written.
    pub loc: Loc,
    /// The implementation.
    pub component: ComponentRef,
    /// Number of instances (tasks); at least 1.
    pub parallelism: u32,
    /// The `config` table as a TOML document (empty string when absent).
    pub config: String,
    /// The `config` table's top-level keys, where they are written.
    pub config_keys: Vec<ConfigKeyLoc>,
    /// Wait strategy overrides (a spout's `spout` and `backpressure`, a
    /// bolt's `bolt` and `backpressure`).
    pub wait: WaitOverrides,
    /// `chain` (default true): false keeps the component out of every
    /// operator chain, on a thread of its own per task.
    pub chain: bool,
}

/// A `[spouts.NAME]` table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpoutDecl {
    /// The keys every component has.
    pub decl: ComponentDecl,
    /// Optional rate limit on this spout's emits.
    pub throttle: Option<ThrottleSpec>,
    /// Per-spout override of the topology's `max_spout_pending`; `Some(0)` means
    /// unlimited for this spout. See [`SpoutDecl::effective_max_spout_pending`].
    pub max_spout_pending: Option<u32>,
}

impl SpoutDecl {
    /// The in-flight cap per task for this spout: its own setting if given,
    /// else the topology's; `None` means unlimited.
    pub fn effective_max_spout_pending(&self, settings: &Settings) -> Option<u32> {
        match self.max_spout_pending {
            Some(0) => None,
            Some(n) => Some(n),
            None => settings.max_spout_pending.filter(|&n| n > 0),
        }
    }
}

/// A `[bolts.NAME]` table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BoltDecl {
    /// The keys every component has.
    pub decl: ComponentDecl,
    /// Subscriptions, in file order; never empty in a valid config.
    pub inputs: Vec<InputDecl>,
    /// Storm `topology.tick.tuple.freq.secs` for this bolt; at least 1.
    pub tick_tuple_freq_secs: Option<u64>,
    /// The window of a windowed bolt (`window`, `timestamp_field`, `lag`).
    pub window: Option<super::window::WindowDecl>,
}

/// One element of a bolt's `inputs` array: a subscription to a stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InputDecl {
    /// The upstream spout or bolt.
    pub from: String,
    /// Where `from`'s value is written.
    pub from_loc: Loc,
    /// The upstream stream (default `"default"`).
    pub stream: String,
    /// Where `stream`'s value is written, or the input table when defaulted.
    pub stream_loc: Loc,
    /// How tuples are spread over this bolt's tasks.
    pub grouping: GroupingSpec,
    /// Where `grouping`'s value is written, or the input table when defaulted.
    pub grouping_loc: Loc,
    /// Optional rate limit on this edge.
    pub throttle: Option<ThrottleSpec>,
    /// Where the input table is written.
    pub loc: Loc,
}

/// Storm's stream groupings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GroupingSpec {
    /// Random, evenly spread.
    Shuffle,
    /// Hash of these fields picks the task; each field with where it is written.
    Fields(Vec<(String, Loc)>),
    /// Every task gets every tuple.
    All,
    /// Everything goes to the task with the lowest id.
    Global,
    /// The emitter picks the task (`emit_direct`).
    Direct,
    /// A task in the same worker if there is one, else shuffle.
    LocalOrShuffle,
    /// No preference; currently the same as shuffle (as in Storm).
    None,
    /// A plugin's grouping (contract 1.1): `{ custom = "alias::Name", config = {...} }`.
    Custom {
        /// The grouping's implementation.
        component: ComponentRef,
        /// Its `config` table as a TOML document.
        config: String,
        /// The `config` table's top-level keys, where they are written.
        config_keys: Vec<ConfigKeyLoc>,
    },
}

impl GroupingSpec {
    /// The grouping's name as the topology file spells it (`fields` and
    /// `custom` for the tables).
    pub fn name(&self) -> &'static str {
        match self {
            GroupingSpec::Shuffle => "shuffle",
            GroupingSpec::Fields(_) => "fields",
            GroupingSpec::All => "all",
            GroupingSpec::Global => "global",
            GroupingSpec::Direct => "direct",
            GroupingSpec::LocalOrShuffle => "local_or_shuffle",
            GroupingSpec::None => "none",
            GroupingSpec::Custom { .. } => "custom",
        }
    }
}
