//! The stable-ABI layer: everything that actually crosses the library boundary.
//!
//! Plugin authors never name anything here; the [`export_plugin!`](crate::export_plugin)
//! macro and the adapters wire their plain-Rust types to it. The host uses it
//! directly.
//!
//! # Evolution rules (contract 1.x)
//! - Prefix types ([`PluginRoot`]) and `#[sabi_trait]` traits may gain fields or
//!   methods only after their `#[sabi(last_prefix_field)]`, which never moves.
//! - Exhaustive enums ([`Value`](crate::Value), [`ComponentBox`]) are frozen.
//!   Open sets use `u8` newtypes with constants ([`ComponentKind`],
//!   [`ErrorKind`](crate::ErrorKind), [`WaitSituation`](crate::WaitSituation)).
//! - Field names are ABI: renaming one breaks every built plugin.

mod adapt_1_2;
mod adapt_1_3;
mod component;
mod context;
mod dyn_bolt;
mod dyn_spout;
mod dyn_wait;
mod ext;
mod ext_adapt;
mod guard;
mod host;
mod output;
mod root;
mod v1_2;
mod v1_3;

pub use component::{
    Catalogue, CatalogueBuilder, ComponentBox, ComponentDescriptor, ComponentKind,
};
pub use context::{InputDecl, TaskContext, TaskExt, WindowKind, WindowSettings};
pub use dyn_bolt::{BoltBox, DynBolt, DynBolt_TO};
pub use dyn_spout::{DynSpout, DynSpout_TO, SpoutBox};
pub use dyn_wait::{DynWaitStrategy, DynWaitStrategy_TO, WaitStrategyBox};
pub use ext::{
    BoltExtBox, ComponentExt, ComponentExtBox, ConfigKeyDecl, DynBoltExt, DynBoltExt_TO,
    DynGrouping, DynGrouping_TO, DynSpoutExt, DynSpoutExt_TO, DynWaker, DynWaker_TO, GroupingBox,
    GroupingContext, SpoutExtBox, SpoutOutput, SpoutOutputMut, SpoutOutput_TO, State, StateEntry,
    WakerBox, WindowView,
};
pub use guard::{guard, PResult};
pub use host::{
    AtomicCell, DynHost, DynHost13, DynHost13_TO, DynHost_TO, Host13Box, HostBox, LogLevel,
    MetricCells, MetricKind, MetricLabel, MetricStorage, HISTOGRAM_CELLS,
};
pub use output::{Output, OutputMut, Output_TO};
pub use root::{
    lib_header, v1_0, v1_1, v1_2_root, PanicStrategy, PluginRoot, PluginRoot_Ref, PluginSource,
    ABI_BASELINE, CONTRACT_VERSION, ROOT_SYMBOL,
};

pub use v1_2::{
    Bolt12Box, BoltOutput, BoltOutputMut, BoltOutput_TO, ComponentBox12, ComponentExt12, DynBolt12,
    DynBolt12_TO, DynSpout12, DynSpout12_TO, DynStateBackend, DynStateBackend_TO, ScopeWrites,
    Spout12Box, StateBackendBox, StateRecord, StoreDelta,
};
pub use v1_3::{
    Bolt13Box, ComponentBox13, ComponentExt13, CoordinatorBox, DynBolt13, DynBolt13_TO,
    DynCoordinator, DynCoordinator_TO, DynSpout13, DynSpout13_TO, PartitionChange, PartitionEvent,
    Spout13Box, StoreDecl, StoreKind,
};

#[doc(hidden)]
pub mod __private {
    pub use abi_stable::library::LibHeader;
}
