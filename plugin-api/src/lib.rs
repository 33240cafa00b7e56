//! The contract between the squall host and its plugins.
//!
//! A plugin is an ordinary Rust crate built as a `cdylib`. It implements plain
//! Rust traits — [`Spout`], [`Bolt`] (acks by itself), [`BasicBolt`] (acked
//! for it) and [`WaitStrategy`] — and calls [`export_plugin!`] once. This is
//! the only crate it depends on.
//!
//! # Overview
//! - [`Value`] is one tuple field; short strings are stored inline, so the
//!   common emit allocates nothing. [`Tuple`] is an input as a bolt sees it.
//! - [`SpoutCollector`], [`BoltCollector`] and [`BasicCollector`] emit, anchor,
//!   ack, fail and reset timeouts.
//! - [`ComponentConfig`] carries the component's TOML `config` table; read it
//!   with a struct that [`declare_config!`] writes, with its declared keys,
//!   from one table (module [`config`]).
//! - Contract 1.1: [`info!`], [`warn!`], [`error!`], [`debug!`] and
//!   [`trace!`] log through the host's `tracing` with the component and task
//!   attached, and [`metrics`] registers counters, gauges and histograms the
//!   host exports (see [`host`]). A library built against 1.0 keeps loading
//!   and working in a 1.1 host.
//! - Contract 1.2: durable state. A bolt keeps [`KeyValueState`] and
//!   [`ValueState`] stores and lists them in [`Bolt::stores`]; the host
//!   checkpoints them into a [`StateBackend`] (a new component kind) and
//!   restores them after a restart, repartitioned by key. A spout keeps a
//!   checkpoint position ([`Spout::checkpoint`]), and components declare a
//!   close budget (`CLOSE_BUDGET`), the tick tuples they need (`TICKS`) and
//!   the streams they emit on (`EMITS`), checked at validate. Libraries
//!   built against 1.0 and 1.1
//!   keep loading and working in a 1.2 host.
//! - Contract 1.3: batches across the boundary. The host hands a bolt a
//!   run of inputs in one call ([`Bolt::execute_batch`] and
//!   [`BasicBolt::execute_batch`], which by default call `execute` on
//!   each; a basic bolt's emits name their input through a
//!   [`BasicBatchCollector`]) and lets
//!   a spout emit up to a bound in one call ([`Spout::next_batch`], which by
//!   default calls `next_tuple` until it emits nothing). Group
//!   coordinators ([`Coordinator`]) are a new component kind. User metrics
//!   may carry labels of their own ([`metrics::gauge_with`] and its
//!   kin: one series per label set, exported while its handle lives).
//!   Libraries built against 1.0, 1.1 and 1.2 keep loading and working;
//!   a library built against 1.3 refuses a host older than 1.3 in one line
//!   (its catalogue fails).
//! - [`rng`] is SplitMix64, a small non-cryptographic random number
//!   generator for plugins and tests (plain Rust, outside the ABI).
//! - [`abi`] is the stable-ABI layer (abi_stable `#[sabi_trait]` objects and a
//!   prefix-type root module). A host refuses a library built against an
//!   incompatible contract at load time, before calling any of its code. Every
//!   entry point is wrapped in a panic guard, so a panic in plugin code becomes
//!   an error and never takes the host down.
//!
//! # Example
//! A complete plugin: a spout that emits sentences reliably, and a basic bolt
//! that splits them into words.
//!
//! ```
//! use squall_plugin_api::prelude::*;
//!
//! squall_plugin_api::declare_config! {
//!     struct SentenceConfig {
//!         count: u64 = default(Integer, "3", "how many sentences to emit"),
//!     }
//! }
//!
//! /// Emits `count` sentences, each tracked by its index.
//! pub struct Sentences { next: u64, count: u64 }
//!
//! impl Spout for Sentences {
//!     const NAME: &'static str = "Sentences";
//!     const DESCRIPTION: &'static str = "emits a fixed number of sentences";
//!     const CONFIG_KEYS: Option<&'static [ConfigKey]> = Some(SentenceConfig::KEYS);
//!
//!     fn declare_outputs(outputs: &mut OutputDeclarer) {
//!         outputs.declare(&["sentence"]);
//!     }
//!
//!     fn new(config: &ComponentConfig<'_>) -> Result<Self> {
//!         let config = SentenceConfig::parse(config)?;
//!         Ok(Sentences { next: 0, count: config.count })
//!     }
//!
//!     fn next_tuple(&mut self, collector: &mut SpoutCollector<'_>) -> Result<()> {
//!         if self.next < self.count {
//!             collector.emit_with_id(&[Value::from("the cow jumped")], self.next);
//!             self.next += 1;
//!         }
//!         Ok(())
//!     }
//!
//!     fn fail(&mut self, id: MessageId) {
//!         eprintln!("message {} failed", id.0);
//!     }
//! }
//!
//! /// Splits each sentence into words.
//! pub struct Split;
//!
//! impl BasicBolt for Split {
//!     const NAME: &'static str = "Split";
//!
//!     fn declare_outputs(outputs: &mut OutputDeclarer) {
//!         outputs.declare(&["word"]);
//!     }
//!
//!     fn new(_config: &ComponentConfig<'_>) -> Result<Self> {
//!         Ok(Split)
//!     }
//!
//!     fn execute(&mut self, input: &Tuple<'_>, collector: &mut BasicCollector<'_>) -> Result<()> {
//!         let sentence = input.get(0).and_then(Value::as_str).ok_or("expected a string")?;
//!         for word in sentence.split_whitespace() {
//!             collector.emit(&[Value::from(word)]);
//!         }
//!         Ok(())
//!     }
//! }
//!
//! squall_plugin_api::export_plugin! {
//!     spouts: [Sentences],
//!     basic_bolts: [Split],
//! }
//! # fn main() {
//! #     use squall_plugin_api::abi::PluginSource;
//! #     let catalogue = __SquallPlugin::catalogue();
//! #     assert_eq!(catalogue.components.len(), 2);
//! #     assert_eq!(catalogue.components[0].name.as_str(), "Sentences");
//! # }
//! ```
//!
//! Build it with `crate-type = ["cdylib"]` and name it in a topology's
//! `[plugins]` table; see `docs/plugins.md` (the guide) and
//! `docs/plugin-reference.md` (every trait item and key).

#![deny(missing_docs)]
#![allow(non_local_definitions, non_camel_case_types)] // abi_stable naming (`PluginRoot_Ref`, `DynSpout_TO`) and derive noise on recent rustc

pub mod abi;
mod batch;
mod bolt;
mod collector;
pub mod config;
mod context;
mod coordinator;
mod error;
mod export;
mod grouping;
pub mod host;
mod keys;
pub mod rng;
mod spout;
pub mod state;
pub mod testing;
mod tuple;
mod value;
mod wait;
mod waker;
mod window;

pub use abi::{InputDecl, State, StateEntry};
pub use batch::{InputHeader, InputStream, Inputs, Run, RunIter, RunView};
pub use bolt::{BasicBolt, Bolt};
pub use collector::{BasicBatchCollector, BasicCollector, BoltCollector, SpoutCollector};
pub use config::ComponentConfig;
pub use context::{ComponentTasks, OutputDeclarer, StreamDecl, TaskContext, TaskContextBuilder};
pub use coordinator::{Coordinator, PartitionSpout};
pub use error::{Error, ErrorKind, PluginError, Result};
pub use grouping::Grouping;
pub use host::metrics;
pub use keys::{ConfigKey, KeyKind};
pub use spout::Spout;
pub use state::{KeyValueState, StateBackend, StateStore, StoreSpec, Stores, ValueState};
pub use tuple::{
    Anchor, MessageId, StreamId, Tuple, DEFAULT_STREAM, SYSTEM_COMPONENT, TICK_STREAM,
};
pub use value::{SmallStr, Value};
pub use wait::{WaitSituation, WaitStrategy};
pub use waker::Waker;
pub use window::{EventTime, Window, WindowSize, WindowSpec, WindowedBolt};

/// The plugin guide, `docs/plugins.md`: its Rust examples compile and run as
/// doctests (its one `ignore` block is a file of the examples crate, which
/// a doctest of this crate cannot link; that crate's tests check it).
#[cfg(doctest)]
#[doc = include_str!("../../docs/plugins.md")]
pub struct PluginsGuide;

/// The plugin reference, `docs/plugin-reference.md`: its Rust examples
/// compile and run as doctests too.
#[cfg(doctest)]
#[doc = include_str!("../../docs/plugin-reference.md")]
pub struct PluginReference;

/// The durable state guide, `docs/state.md`: its Rust examples compile as
/// doctests.
#[cfg(doctest)]
#[doc = include_str!("../../docs/state.md")]
pub struct StateGuide;

#[doc(hidden)]
pub mod __private {
    pub use abi_stable::std_types::RVec;
}

/// Everything a plugin author needs, in one `use`.
pub mod prelude {
    /// What [`Grouping::prepare`](crate::Grouping::prepare) is given.
    pub use crate::abi::GroupingContext;
    pub use crate::{
        Anchor, BasicBatchCollector, BasicBolt, BasicCollector, Bolt, BoltCollector,
        ComponentConfig, ConfigKey, Coordinator, Error, Grouping, InputDecl, Inputs, KeyKind,
        KeyValueState, MessageId, OutputDeclarer, Result, Run, Spout, SpoutCollector, State,
        StateBackend, StoreSpec, Stores, StreamId, TaskContext, Tuple, Value, ValueState,
        WaitSituation, WaitStrategy, Waker, Window, WindowSize, WindowSpec, WindowedBolt,
    };
}
