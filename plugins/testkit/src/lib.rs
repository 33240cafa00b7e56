//! Test and benchmark components for squall: each does one thing, and its
//! name says which.
//!
//! # Overview
//! Benchmark plumbing:
//! - [`ConstSpout`] emits one constant string, `per_call` tuples per call
//!   (a contract 1.3 host's whole batch per `next_batch`);
//!   [`EmptySpout`] never emits (idle CPU).
//! - [`NullBolt`] discards; [`IdBolt`] re-emits; [`SleepBolt`] re-emits after a
//!   pause (a slow consumer for backpressure); [`PackBolt`] packs a tuple's
//!   names and values into one list value.
//!
//! Fault injection:
//! - [`ChaosBolt`] panics, fails or drops a random share of its inputs.
//! - [`PanicBolt`] / [`PanicSpout`] panic after `after` tuples, at most `times`
//!   times per process.
//! - [`FailOnNew`]'s constructor returns an error; [`PanicOnNew`]'s panics;
//!   [`BlockOnNew`]'s blocks (for the startup timeout); [`PanicOnPrepare`]'s
//!   `prepare` panics; [`BlockOnPrepare`]'s `prepare` blocks (for the live
//!   reload's deadline).
//!
//! Observation (they write files a test reads back):
//! - [`ReplaySpout`] emits ids reliably, replays failures and logs every emit,
//!   ack and fail.
//! - [`RecordBolt`] writes what reached each task (per-key counts, ticks).
//! - [`LatencyBolt`] writes percentiles of execute time minus a send time
//!   carried in the input (latency benches against a broker).
//! - [`LifecycleSpout`] / [`LifecycleBolt`] log every lifecycle call.
//! - [`ListSpout`] emits a list of integers once each, reliably, and logs acks
//!   and fails (event-time timestamps for windowed bolts).
//! - [`WindowSizeBolt`] (windowed, contract 1.1) emits each window's shape.
//! - [`TickCountBolt`] needs tick tuples (contract 1.2's `TICKS`).
//!
//! Routing:
//! - [`DirectSpout`] sends with `emit_direct`; [`MultiStreamSpout`] emits on
//!   two named streams.
//!
//! Unless a component's doc says otherwise, its output is the default stream
//! with fields `["value"]`, its config keys are all optional, and an unknown
//! key is an error.
//!
//! # Example
//! ```toml
//! [plugins]
//! testkit = "../target/release/libsquall_testkit.so"
//!
//! [spouts.source]
//! component = "testkit::ConstSpout"
//! config = { value = "x", per_call = 64 }
//!
//! [bolts.sink]
//! component = "testkit::NullBolt"
//! inputs = [{ from = "source", grouping = "shuffle" }]
//! ```

#![warn(missing_docs)]

mod faults;
mod latency;
mod lifecycle;
mod plumbing;
mod record;
mod replay;
mod routing;
#[cfg(test)]
mod test_support;
mod ticks;
mod window;

use serde::Deserialize;
use squall_plugin_api::{ComponentConfig, Result, SmallStr, Value};

pub use faults::{
    BlockOnNew, BlockOnPrepare, ChaosBolt, FailOnNew, PanicBolt, PanicOnNew, PanicOnPrepare,
    PanicSpout,
};
pub use latency::LatencyBolt;
pub use lifecycle::{LifecycleBolt, LifecycleSpout};
pub use plumbing::{ConstSpout, EmptySpout, IdBolt, NullBolt, PackBolt, SleepBolt};
pub use record::RecordBolt;
pub use replay::ReplaySpout;
pub use routing::{DirectSpout, MultiStreamSpout};
pub use ticks::TickCountBolt;
pub use window::{ListSpout, WindowDigest, WindowSizeBolt};

squall_plugin_api::export_plugin! {
    spouts: [
        ConstSpout, EmptySpout, PanicSpout, FailOnNew, BlockOnNew, ReplaySpout, LifecycleSpout,
        DirectSpout, MultiStreamSpout, ListSpout,
    ],
    bolts: [ChaosBolt],
    basic_bolts: [NullBolt, IdBolt, PackBolt, PanicBolt, PanicOnNew, PanicOnPrepare, BlockOnPrepare, SleepBolt, RecordBolt, LifecycleBolt, LatencyBolt, TickCountBolt],
    windowed_bolts: [WindowSizeBolt, WindowDigest],
}

/// A string value to emit again and again: inline when short, shared (one
/// buffer for every copy) otherwise, so emitting it never allocates.
fn shared_or_inline(s: &str) -> Value {
    if s.len() <= SmallStr::CAPACITY {
        Value::str(s)
    } else {
        Value::shared_str(s)
    }
}

/// The config of components that take none: every key is refused.
#[derive(Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
struct NoConfig {}

/// Refuses any config key, for components that take none.
fn parse_no_config(config: &ComponentConfig<'_>) -> Result<()> {
    config
        .parse::<NoConfig>()
        .map(drop)
        .map_err(|e| format!("this component takes no config: {e}").into())
}

/// Checks that the path-valued key `key` is not empty, and returns it.
fn require_path<'a>(path: &'a str, key: &str) -> Result<&'a str> {
    if path.is_empty() {
        return Err(format!("{key} must not be empty").into());
    }
    Ok(path)
}

#[cfg(test)]
mod tests {
    use squall_plugin_api::abi::{ComponentKind, PluginSource};

    use super::*;

    /// `(kind, name, auto_ack, [(stream, fields, direct)])` for each component.
    type Listing = Vec<(&'static str, String, bool, Vec<(String, Vec<String>, bool)>)>;

    fn listing() -> Listing {
        __SquallPlugin::catalogue()
            .components
            .iter()
            .map(|c| {
                let streams = c
                    .outputs
                    .iter()
                    .map(|s| {
                        (
                            s.name.to_string(),
                            s.fields.iter().map(|f| f.to_string()).collect(),
                            s.direct,
                        )
                    })
                    .collect();
                (c.kind.name(), c.name.to_string(), c.auto_ack, streams)
            })
            .collect()
    }

    fn value_stream(name: &str, direct: bool) -> (String, Vec<String>, bool) {
        (name.to_owned(), vec!["value".to_owned()], direct)
    }

    #[test]
    fn catalogue_lists_every_component_with_its_streams() {
        let default = || vec![value_stream("default", false)];
        let expected: Listing = vec![
            ("spout", "ConstSpout".into(), false, default()),
            ("spout", "EmptySpout".into(), false, default()),
            ("spout", "PanicSpout".into(), false, default()),
            ("spout", "FailOnNew".into(), false, default()),
            ("spout", "BlockOnNew".into(), false, default()),
            ("spout", "ReplaySpout".into(), false, default()),
            ("spout", "LifecycleSpout".into(), false, default()),
            ("spout", "DirectSpout".into(), false, vec![value_stream("direct", true)]),
            (
                "spout",
                "MultiStreamSpout".into(),
                false,
                vec![value_stream("even", false), value_stream("odd", false)],
            ),
            ("spout", "ListSpout".into(), false, default()),
            ("bolt", "ChaosBolt".into(), false, default()),
            ("bolt", "NullBolt".into(), true, vec![]),
            ("bolt", "IdBolt".into(), true, default()),
            ("bolt", "PackBolt".into(), true, default()),
            ("bolt", "PanicBolt".into(), true, default()),
            ("bolt", "PanicOnNew".into(), true, default()),
            ("bolt", "PanicOnPrepare".into(), true, default()),
            ("bolt", "BlockOnPrepare".into(), true, default()),
            ("bolt", "SleepBolt".into(), true, default()),
            ("bolt", "RecordBolt".into(), true, vec![]),
            ("bolt", "LifecycleBolt".into(), true, vec![]),
            ("bolt", "LatencyBolt".into(), true, vec![]),
            (
                "bolt",
                "TickCountBolt".into(),
                true,
                vec![("default".to_owned(), vec!["count".to_owned()], false)],
            ),
        ];
        assert_eq!(listing(), expected);
        assert_eq!(__SquallPlugin::catalogue().plugin.as_str(), "squall-testkit");
    }

    #[test]
    fn every_component_declares_its_config_keys() {
        let extensions = __SquallPlugin::extensions();
        // Every 1.0 component has its 1.1 description; the two windowed
        // bolts have only the latter.
        for d in __SquallPlugin::catalogue().components.iter() {
            assert!(
                extensions.iter().any(|e| e.name == d.name && e.kind == d.kind),
                "{} has no 1.1 description",
                d.name
            );
        }
        assert_eq!(extensions.len(), __SquallPlugin::catalogue().components.len() + 2);
        for c in extensions.iter() {
            assert!(c.declares_config, "{} does not declare its config keys", c.name);
            for key in c.config_keys.iter() {
                assert!(!key.doc.is_empty(), "{}.{} has no doc", c.name, key.name);
            }
        }
    }

    #[test]
    fn every_component_has_a_description() {
        let catalogue = __SquallPlugin::catalogue();
        for c in catalogue.components.iter() {
            assert!(!c.description.is_empty(), "{}", c.name);
            assert_ne!(c.kind, ComponentKind::WAIT_STRATEGY);
        }
    }

    #[test]
    fn constructors_report_errors_and_panics_through_the_descriptor() {
        let catalogue = __SquallPlugin::catalogue();
        let new = |name: &str, config: &str| {
            let c = catalogue.components.iter().find(|c| c.name.as_str() == name).unwrap();
            (c.new)(config.into()).into_result().map(drop)
        };
        assert!(new("NullBolt", "").is_ok());
        let err = new("FailOnNew", "").unwrap_err();
        assert_eq!(err.to_string(), "fail_on_new: refusing to start on purpose");
        assert!(!err.is_panic());
        let err = new("PanicOnNew", "").unwrap_err();
        assert!(err.is_panic());
        assert_eq!(err.to_string(), "panicked: panic_on_new: panicking on purpose");
        let err = new("ConstSpout", "per_call = -1").unwrap_err();
        assert!(err.message.contains("per_call"), "{err}");
    }

    #[test]
    fn short_values_are_inline_and_long_ones_shared() {
        assert!(matches!(shared_or_inline("hello"), Value::SmallStr(_)));
        assert!(matches!(shared_or_inline(&"z".repeat(32)), Value::SharedStr(_)));
    }
}
