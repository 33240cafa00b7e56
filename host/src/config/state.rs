//! `[state]`: where a topology's durable state is checkpointed (contract 1.2).
//!
//! ```toml
//! [state]
//! backend = "redis_state::RedisState"   # or "memory"
//! namespace = "wordcount"               # default: the topology's name
//! interval_ms = 1000                    # the checkpoint interval
//! [state.config]                        # the backend's own keys
//! url = "redis://127.0.0.1:6379"
//! ```

use super::components::{component_ref, config_document};
use super::defaults::keys;
use super::diagnostic::Loc;
use super::limits;
use super::model::{ComponentRef, ConfigKeyLoc};
use super::walk::{Section, Value, Walker};

/// The default checkpoint interval (Storm's `topology.state.checkpoint.interval.ms`).
pub const DEFAULT_INTERVAL_MS: u64 = 1000;

/// The shortest checkpoint interval accepted.
pub const MIN_INTERVAL_MS: u64 = 10;

/// Where checkpoints are committed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BackendDecl {
    /// The host's in-memory backend: state survives live swaps and resizes,
    /// not the process (for tests, and topologies that want no server).
    Memory,
    /// A state backend from a plugin.
    Plugin(ComponentRef),
}

/// `[state]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StateDecl {
    /// Where `[state]` is written.
    pub loc: Loc,
    /// `backend`.
    pub backend: BackendDecl,
    /// `namespace`, or the topology's name.
    pub namespace: String,
    /// `interval_ms`.
    pub interval_ms: u64,
    /// Where `interval_ms` is written (the table when it is not).
    pub interval_loc: Loc,
    /// `[state.config]` as a TOML document, for the backend's constructor.
    pub config: String,
    /// Where each key of `[state.config]` is written.
    pub config_keys: Vec<ConfigKeyLoc>,
}

/// Reads `[state]`; `name` is the topology's name (the default namespace).
pub(crate) fn read_state(
    w: &mut Walker<'_>,
    value: Option<&Value<'_>>,
    name: &str,
) -> Option<StateDecl> {
    let value = value?;
    let table = w.table(value, "[state]")?;
    let s = Section::new(table, value.span(), "[state]".to_owned());
    s.check_keys(w, keys::STATE);
    let loc = w.loc(&value.span());
    let backend = match s.string(w, "backend") {
        Some(text) if text.get_ref() == "memory" => BackendDecl::Memory,
        Some(text) => BackendDecl::Plugin(component_ref(w, text, "[state] backend")?),
        None => {
            if s.get("backend").is_none() {
                let help = "backend = \"memory\", or a plugin's: backend = \"alias::Name\"";
                s.missing(w, "backend", Some(help.to_owned()));
            }
            return None;
        }
    };
    let namespace = match s.string(w, "namespace") {
        Some(ns) if ns.get_ref().is_empty() => {
            w.error(&ns.span(), "namespace in [state] is empty".to_owned(), None);
            return None;
        }
        Some(ns) => ns.into_inner(),
        None => name.to_owned(),
    };
    let interval_loc = s.get("interval_ms").map_or(loc, |v| w.loc(&v.span()));
    let interval_ms = s.u64_in(
        w,
        "interval_ms",
        DEFAULT_INTERVAL_MS,
        MIN_INTERVAL_MS,
        limits::MAX_DURATION_SECS * 1000,
    );
    let (config, config_keys) = match s.get("config") {
        Some(v) => match w.table(v, "config in [state]") {
            Some(t) => config_document(w, v, t, "[state.config]"),
            None => (String::new(), Vec::new()),
        },
        None => (String::new(), Vec::new()),
    };
    Some(StateDecl { loc, backend, namespace, interval_ms, interval_loc, config, config_keys })
}

/// The interval must be shorter than the message timeout: spouts tell
/// their broker only what a committed checkpoint covers, so a message stays
/// unacknowledged there for up to an interval plus the commit.
pub(crate) fn check_interval(w: &mut Walker<'_>, state: &StateDecl, timeout_secs: u64, on: bool) {
    if on && state.interval_ms >= timeout_secs.saturating_mul(1000) {
        w.error_at(
            state.interval_loc,
            format!(
                "interval_ms = {} in [state] is not shorter than message_timeout_secs = \
                 {timeout_secs}",
                state.interval_ms
            ),
            Some(
                "spouts acknowledge their broker only once a checkpoint commits: keep the \
                 interval well under the message timeout"
                    .to_owned(),
            ),
        );
    }
}
