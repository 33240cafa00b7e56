//! Every default of the topology file, with where it comes from, and the reference
//! of every accepted key (the `[topology]` settings are in their table, in
//! `model.rs`). `docs/topology.md` is written from this page.
//!
//! # File structure
//!
//! Top-level keys: `include` (other files to compose; see `config::compose`),
//! `topology`, `plugins`, `wait`, `spouts`, `bolts`. Any other key,
//! at any level listed below, is an error (with a "did you mean" when one is close).
//! Every string value may use environment interpolation (`${VAR}`,
//! `${VAR:-default}`, `${VAR:?message}`, `$$`; see `config::interpolate`), including
//! strings inside component `config` tables.
//!
//! ## `[topology]`
//!
//! Two keys are read by hand: `name` (string; default: the file stem; not
//! empty, a name; Storm `topology.name`) and `http` (string; off; `PORT`
//! (loopback) or `HOST:PORT`: serve metrics, the REST API and the live page;
//! `squall run --http` overrides it; or the table below). Every other key
//! is one entry of the settings table in `model.rs`
//! ([`Settings`](super::Settings), whose field docs give each key's default,
//! range and Storm name).
//!
//! ## `[topology.http]`
//!
//! Instead of `http = "ADDR"`, a table (see `docs/http-api.md`). A non-loopback
//! `addr` without `token_file` or `token_env` is an error.
//!
//! | key | type | default | rule |
//! | --- | --- | --- | --- |
//! | `addr` | string | off | as `http` above |
//! | `token_file`, `token_env` | string | none | a file (relative to the TOML file) or an environment variable holding the `control` token |
//! | `read_token_file`, `read_token_env` | string | none | the same for a `read`-only token |
//! | `metrics_public` | bool | false | `/metrics` needs no token |
//! | `allowed_hosts` | array of strings | `[]` | more `Host` names to answer to |
//! | `cors_origins` | array of strings | `[]` | origins sent CORS headers |
//! | `tls_cert`, `tls_key` | string | none | PEM files; both or neither |
//! | `max_connections` | integer | 512 | 1 … 65536; more connections get 503 |
//!
//! ## `[plugins]`
//!
//! `alias = "path"` or `alias = { path = "path", sha256 = "hex" }`. The path is
//! interpolated, then resolved against the TOML file's directory when relative.
//! `sha256` is optional, 64 hex digits (either case). An alias is letters, digits,
//! `_` and `-`. Components are then named `"alias::Component"`.
//!
//! ## `[wait.spout]`, `[wait.bolt]`, `[wait.backpressure]`
//!
//! Each optional. `strategy` (default `"progressive"`) is one of:
//! - `"progressive"`: keys `level1_count`, `level2_count`, `level3_sleep_millis`,
//!   `level3_max_sleep_millis`
//!   override that situation's defaults (spout 0/0/1, bolt 1/1000/1,
//!   backpressure 1/1000/1 — Storm's `topology.*.wait.progressive.*`).
//! - `"park"`: key `park_micros` (default 100, 0 = busy spin; Storm's
//!   `topology.*.wait.park.microsec`).
//! - `"alias::Component"`: a plugin strategy; every other key of the table is
//!   passed to the plugin as its TOML config.
//!
//! ## `[spouts.NAME]`
//!
//! | key | type | default | rule |
//! | --- | --- | --- | --- |
//! | `component` | string | required | `"alias::Component"` with a declared alias |
//! | `parallelism` | integer | 1 | ≥ 1 |
//! | `config` | table | empty | any TOML; handed to the constructor as a TOML document |
//! | `throttle` | table | none | see *Throttle* |
//! | `max_spout_pending` | integer | topology's | 0 = unlimited for this spout |
//! | `wait.spout`, `wait.backpressure` | table | topology's | same keys as `[wait.*]` |
//! | `chain` | boolean | true | false: never chained with a neighbour (see docs/topology.md) |
//!
//! ## `[bolts.NAME]`
//!
//! | key | type | default | rule |
//! | --- | --- | --- | --- |
//! | `component` | string | required | `"alias::Component"` with a declared alias |
//! | `parallelism` | integer | 1 | ≥ 1 |
//! | `config` | table | empty | as for spouts |
//! | `inputs` | array of tables | required | not empty; see *Inputs* |
//! | `tick_tuple_freq_secs` | integer | none | ≥ 1; Storm `topology.tick.tuple.freq.secs` |
//! | `wait.bolt`, `wait.backpressure` | table | topology's | same keys as `[wait.*]` |
//! | `chain` | boolean | true | false: never chained with a neighbour (see docs/topology.md) |
//!
//! Component names are unique across spouts and bolts and may not start with `__`
//! (reserved, as in Storm, for `__system`, `__acker`, …).
//!
//! ## Inputs
//!
//! | key | type | default | rule |
//! | --- | --- | --- | --- |
//! | `from` | string | required | a declared spout or bolt; bolts may not form a cycle |
//! | `stream` | string | `"default"` | not empty |
//! | `grouping` | string or table | `"shuffle"` | `"shuffle"`, `"all"`, `"global"`, `"direct"`, `"local_or_shuffle"`, `"none"`, or `{ fields = ["f", …] }` (not empty, no repeats) |
//! | `throttle` | table | none | see *Throttle* |
//!
//! A bolt may subscribe to one `(from, stream)` pair only once.
//!
//! ## Throttle
//!
//! | key | type | default | rule |
//! | --- | --- | --- | --- |
//! | `tuples_per_sec` | integer | — | > 0; exactly one of this and `bytes_per_sec` |
//! | `bytes_per_sec` | integer | — | > 0 |
//! | `mode` | string | `"period"` | `"period"` (HDFS `DataTransferThrottler`) or `"smooth"` |
//! | `period_millis` | integer | 500 | > 0 |

use super::model::WaitSpec;

/// Default `parallelism` of a spout or bolt.
pub const PARALLELISM: u32 = 1;
/// Default `park_micros` of the park strategy: Storm's `topology.*.wait.park.microsec`.
pub const PARK_MICROS: u64 = 100;
/// Default throttle accounting period: HDFS `DataTransferThrottler`'s 500 ms (seed 002).
pub const THROTTLE_PERIOD_MILLIS: u64 = crate::throttle::DEFAULT_PERIOD.as_millis() as u64;
/// The stream an input subscribes to when it names none (the plugin
/// contract's default stream).
pub use squall_plugin_api::DEFAULT_STREAM;

/// Storm's spout wait levels `(level1_count, level2_count, level3_sleep_millis)`:
/// `topology.spout.wait.progressive.level1.count = 0`, `level2.count = 0`,
/// `level3.sleep.millis = 1` (seed 000). An idle spout sleeps 1 ms at once.
pub const SPOUT_WAIT_LEVELS: (u32, u32, u64) = (0, 0, 1);
/// The longest sleep an idle spout backs off to (`level3_max_sleep_millis`
/// of the spout wait): each idle turn after the first doubles the level-3
/// sleep, from `level3_sleep_millis` up to this. Not in Storm, which sleeps
/// `level3_sleep_millis` on every idle turn (see the wait module's deliberate
/// differences).
pub const SPOUT_IDLE_MAX_SLEEP_MILLIS: u64 = 8;
/// How long a bolt (and an acker) polls its queues when it runs out of work,
/// before it waits as its strategy says (`spin_micros` of the bolt wait).
/// Not in Storm; see the wait module's deliberate differences.
pub const BOLT_SPIN_MICROS: u64 = 20;
/// Storm's bolt wait levels: 1 / 1000 / 1 ms (seed 000).
pub const BOLT_WAIT_LEVELS: (u32, u32, u64) = (1, 1000, 1);
/// Storm's backpressure wait levels: 1 / 1000 / 1 ms (seed 000).
pub const BACKPRESSURE_WAIT_LEVELS: (u32, u32, u64) = (1, 1000, 1);

/// The progressive strategy with `levels` as
/// `(level1_count, level2_count, level3_sleep_millis)`.
/// No back-off: every level-3 sleep is `level3_sleep_millis`. No spin.
pub fn progressive((level1_count, level2_count, level3_sleep_millis): (u32, u32, u64)) -> WaitSpec {
    WaitSpec::Progressive {
        level1_count,
        level2_count,
        level3_sleep_millis,
        level3_max_sleep_millis: level3_sleep_millis,
        spin_micros: 0,
    }
}

/// Storm's spout wait, progressive 0 / 0 / 1 ms, with squall's back-off of
/// the level-3 sleep up to [`SPOUT_IDLE_MAX_SLEEP_MILLIS`].
pub fn spout_wait() -> WaitSpec {
    let (level1_count, level2_count, level3_sleep_millis) = SPOUT_WAIT_LEVELS;
    WaitSpec::Progressive {
        level1_count,
        level2_count,
        level3_sleep_millis,
        level3_max_sleep_millis: SPOUT_IDLE_MAX_SLEEP_MILLIS,
        spin_micros: 0,
    }
}

/// Storm's bolt wait, progressive 1 / 1000 / 1 ms, after squall's spin of
/// [`BOLT_SPIN_MICROS`].
pub fn bolt_wait() -> WaitSpec {
    let (level1_count, level2_count, level3_sleep_millis) = BOLT_WAIT_LEVELS;
    WaitSpec::Progressive {
        level1_count,
        level2_count,
        level3_sleep_millis,
        level3_max_sleep_millis: level3_sleep_millis,
        spin_micros: BOLT_SPIN_MICROS,
    }
}

/// Storm's backpressure wait: progressive 1 / 1000 / 1 ms.
pub fn backpressure_wait() -> WaitSpec {
    progressive(BACKPRESSURE_WAIT_LEVELS)
}

/// The keys each table accepts; unknown keys are checked against these lists, and
/// "did you mean" picks from them in this order.
pub(crate) mod keys {
    use crate::config::GroupingSpec;

    /// `include` is read (and removed) by `compose` before the walk; it is
    /// listed so that a misspelt `includes` gets a "did you mean".
    pub(crate) const TOP: &[&str] =
        &["include", "topology", "plugins", "wait", "state", "group", "spouts", "bolts", "tests"];
    /// `[[tests]]` (`squall test`).
    pub(crate) const TEST: &[&str] = &["name", "advance", "state", "inputs", "expect"];
    /// `[[tests.inputs]]`.
    pub(crate) const TEST_INPUT: &[&str] = &["spout", "bolt", "from", "stream", "tuples"];
    /// `[[tests.expect]]`.
    pub(crate) const TEST_EXPECT: &[&str] = &[
        "outputs_of",
        "inputs_of",
        "trees_of",
        "stream",
        "equals",
        "unordered",
        "contains",
        "count",
        "no_output",
        "failed",
        "acked",
    ];
    /// `[state]` (contract 1.2's durable state).
    pub(crate) const STATE: &[&str] = &["backend", "namespace", "interval_ms", "config"];
    /// `[topology]`: `name`, the keys of the settings table (see
    /// `model.rs`), `http`.
    pub(crate) fn topology() -> Vec<&'static str> {
        let table = crate::config::Settings::KEYS.iter().copied();
        std::iter::once("name").chain(table).chain(std::iter::once("http")).collect()
    }
    pub(crate) const HTTP: &[&str] = &[
        "addr",
        "token_file",
        "token_env",
        "read_token_file",
        "read_token_env",
        "metrics_public",
        "allowed_hosts",
        "cors_origins",
        "tls_cert",
        "tls_key",
        "max_connections",
    ];
    pub(crate) const PLUGIN: &[&str] = &["path", "sha256", "allow_writable"];
    pub(crate) const WAIT_SITUATIONS: &[&str] = &["spout", "bolt", "backpressure"];
    pub(crate) const PROGRESSIVE: &[&str] = &[
        "strategy",
        "level1_count",
        "level2_count",
        "level3_sleep_millis",
        "level3_max_sleep_millis",
    ];
    /// The bolt wait's progressive keys: the others and `spin_micros`.
    pub(crate) const PROGRESSIVE_BOLT: &[&str] = &[
        "strategy",
        "level1_count",
        "level2_count",
        "level3_sleep_millis",
        "level3_max_sleep_millis",
        "spin_micros",
    ];
    pub(crate) const PARK: &[&str] = &["strategy", "park_micros"];
    pub(crate) const STRATEGIES: &[&str] = &["progressive", "park"];
    pub(crate) const SPOUT: &[&str] =
        &["component", "parallelism", "config", "throttle", "max_spout_pending", "wait", "chain"];
    pub(crate) const BOLT: &[&str] = &[
        "component",
        "parallelism",
        "config",
        "inputs",
        "tick_tuple_freq_secs",
        "wait",
        "chain",
        "window",
        "timestamp_field",
        "lag",
    ];
    pub(crate) const INPUT: &[&str] = &["from", "stream", "grouping", "throttle"];
    pub(crate) const GROUPING_TABLE: &[&str] = &["fields", "custom", "config"];
    /// The groupings written as a name, and what each name means; `fields`
    /// is written as a table (`{ fields = [...] }`).
    pub(crate) const NAMED_GROUPINGS: &[(&str, GroupingSpec)] = &[
        ("shuffle", GroupingSpec::Shuffle),
        ("all", GroupingSpec::All),
        ("global", GroupingSpec::Global),
        ("direct", GroupingSpec::Direct),
        ("local_or_shuffle", GroupingSpec::LocalOrShuffle),
        ("none", GroupingSpec::None),
    ];

    /// Every grouping name, for suggestions: the named ones and `fields`.
    pub(crate) fn grouping_names() -> Vec<&'static str> {
        let mut names: Vec<&str> = NAMED_GROUPINGS.iter().map(|(n, _)| *n).collect();
        names.insert(1, "fields");
        names
    }
    pub(crate) const THROTTLE: &[&str] =
        &["tuples_per_sec", "bytes_per_sec", "mode", "period_millis"];
    pub(crate) const THROTTLE_MODES: &[&str] = &["period", "smooth"];
}
