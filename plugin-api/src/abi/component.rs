//! The catalogue a library exports: one descriptor per component.

use abi_stable::{
    sabi_trait::TD_Opaque,
    std_types::{RStr, RString, RVec},
    StableAbi,
};

use super::dyn_bolt::{BasicBoltAdapter, BoltAdapter};
use super::dyn_spout::SpoutAdapter;
use super::dyn_wait::WaitAdapter;
use super::guard::to_plugin_error;
use super::{
    guard, BoltBox, DynBolt_TO, DynSpout_TO, DynWaitStrategy_TO, PResult, SpoutBox, WaitStrategyBox,
};
use crate::{
    BasicBolt, Bolt, ComponentConfig, ErrorKind, OutputDeclarer, Spout, StreamDecl, WaitStrategy,
};

/// What a component is. An open set: a host skips kinds it does not know.
#[repr(transparent)]
#[derive(StableAbi, Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ComponentKind(pub u8);

impl ComponentKind {
    /// A source of tuples.
    pub const SPOUT: Self = Self(0);
    /// A processing step.
    pub const BOLT: Self = Self(1);
    /// A way for an idle or blocked thread to wait.
    pub const WAIT_STRATEGY: Self = Self(2);
    /// Contract 1.1: a custom stream grouping.
    pub const GROUPING: Self = Self(3);
    /// Contract 1.2: where a topology's checkpoints are committed.
    pub const STATE_BACKEND: Self = Self(4);
    /// Contract 1.3: decides which of a group's partitions a host runs.
    pub const COORDINATOR: Self = Self(5);

    /// The kind's name as the catalogue prints it.
    pub fn name(self) -> &'static str {
        match self {
            Self::SPOUT => "spout",
            Self::BOLT => "bolt",
            Self::WAIT_STRATEGY => "wait_strategy",
            Self::STATE_BACKEND => "state_backend",
            Self::GROUPING => "grouping",
            Self::COORDINATOR => "coordinator",
            _ => "unknown",
        }
    }
}

/// A constructed component instance.
#[repr(u8)]
#[derive(StableAbi)]
pub enum ComponentBox {
    /// A spout.
    Spout(SpoutBox),
    /// A bolt.
    Bolt(BoltBox),
    /// A wait strategy.
    WaitStrategy(WaitStrategyBox),
}

impl std::fmt::Debug for ComponentBox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ComponentBox::Spout(_) => "ComponentBox::Spout",
            ComponentBox::Bolt(_) => "ComponentBox::Bolt",
            ComponentBox::WaitStrategy(_) => "ComponentBox::WaitStrategy",
        })
    }
}

/// One entry of a library's catalogue.
#[repr(C)]
#[derive(StableAbi, Debug)]
pub struct ComponentDescriptor {
    /// Spout, bolt or wait strategy.
    pub kind: ComponentKind,
    /// The name a topology uses after `alias::`.
    pub name: RString,
    /// A one-line description.
    pub description: RString,
    /// Declared output streams with their fields (empty for wait strategies).
    pub outputs: RVec<StreamDecl>,
    /// True for a basic bolt: the host anchors its emits and acks its inputs.
    pub auto_ack: bool,
    /// Builds an instance from the component's TOML config table, given as a
    /// TOML document.
    pub new: extern "C" fn(config: RStr<'_>) -> PResult<ComponentBox>,
}

/// Everything a library exports.
#[repr(C)]
#[derive(StableAbi, Debug)]
pub struct Catalogue {
    /// The library's name (its crate name).
    pub plugin: RString,
    /// The library's own version.
    pub version: RString,
    /// The contract version it was built against.
    pub contract_version: RString,
    /// Its components.
    pub components: RVec<ComponentDescriptor>,
}

/// Builds a [`Catalogue`]; used by [`export_plugin!`](crate::export_plugin).
#[derive(Debug)]
pub struct CatalogueBuilder {
    catalogue: Catalogue,
    extensions: RVec<super::ComponentExt>,
    extensions_12: RVec<super::ComponentExt12>,
    extensions_13: RVec<super::ComponentExt13>,
}

impl CatalogueBuilder {
    /// Starts a catalogue for the library `plugin` at `version`.
    pub fn new(plugin: &str, version: &str) -> Self {
        Self {
            catalogue: Catalogue {
                plugin: plugin.into(),
                version: version.into(),
                contract_version: super::CONTRACT_VERSION.into(),
                components: RVec::new(),
            },
            extensions: RVec::new(),
            extensions_12: RVec::new(),
            extensions_13: RVec::new(),
        }
    }

    /// Adds a spout.
    pub fn spout<S: Spout>(&mut self) -> &mut Self {
        let mut outputs = OutputDeclarer::default();
        S::declare_outputs(&mut outputs);
        self.extensions.push(super::ext_adapt::spout_ext::<S>());
        self.extensions_12.push(super::adapt_1_2::spout_12::<S>());
        self.extensions_13.push(super::adapt_1_3::spout_13::<S>());
        self.push(ComponentKind::SPOUT, S::NAME, S::DESCRIPTION, outputs, false, new_spout::<S>)
    }

    /// Adds a rich bolt.
    pub fn bolt<B: Bolt>(&mut self) -> &mut Self {
        let mut outputs = OutputDeclarer::default();
        B::declare_outputs(&mut outputs);
        self.extensions.push(super::ext_adapt::bolt_ext::<B>());
        self.extensions_12.push(super::adapt_1_2::bolt_12::<B>());
        self.extensions_13.push(super::adapt_1_3::bolt_13::<B>());
        self.push(ComponentKind::BOLT, B::NAME, B::DESCRIPTION, outputs, false, new_bolt::<B>)
    }

    /// Adds a basic bolt.
    pub fn basic_bolt<B: BasicBolt>(&mut self) -> &mut Self {
        let mut outputs = OutputDeclarer::default();
        B::declare_outputs(&mut outputs);
        self.extensions.push(super::ext_adapt::basic_bolt_ext::<B>());
        self.extensions_12.push(super::adapt_1_2::basic_bolt_12::<B>());
        self.extensions_13.push(super::adapt_1_3::basic_bolt_13::<B>());
        self.push(ComponentKind::BOLT, B::NAME, B::DESCRIPTION, outputs, true, new_basic_bolt::<B>)
    }

    /// Adds a wait strategy.
    pub fn wait_strategy<W: WaitStrategy>(&mut self) -> &mut Self {
        let outputs = OutputDeclarer::default();
        self.extensions.push(super::ext_adapt::wait_ext::<W>());
        self.push(
            ComponentKind::WAIT_STRATEGY,
            W::NAME,
            W::DESCRIPTION,
            outputs,
            false,
            new_wait::<W>,
        )
    }

    fn push(
        &mut self,
        kind: ComponentKind,
        name: &str,
        description: &str,
        outputs: OutputDeclarer,
        auto_ack: bool,
        new: extern "C" fn(RStr<'_>) -> PResult<ComponentBox>,
    ) -> &mut Self {
        self.catalogue.components.push(ComponentDescriptor {
            kind,
            name: name.into(),
            description: description.into(),
            outputs: outputs.into_streams().into(),
            auto_ack,
            new,
        });
        self
    }

    /// Adds a windowed bolt (contract 1.1: it has no 1.0 descriptor).
    pub fn windowed_bolt<B: crate::WindowedBolt>(&mut self) -> &mut Self {
        self.extensions.push(super::ext_adapt::windowed_bolt_ext::<B>());
        self.extensions_12.push(super::adapt_1_2::windowed_bolt_12::<B>());
        self.extensions_13.push(super::adapt_1_3::windowed_bolt_13::<B>());
        self
    }

    /// Adds a state backend (contract 1.2: it has no 1.0 descriptor).
    pub fn state_backend<S: crate::state::StateBackend>(&mut self) -> &mut Self {
        let (v12, ext) = super::adapt_1_2::backend_12::<S>();
        self.extensions.push(ext);
        self.extensions_12.push(v12);
        self
    }

    /// Adds a group coordinator (contract 1.3: it has no earlier descriptor
    /// but its 1.1 one, for its config keys).
    pub fn coordinator<C: crate::Coordinator>(&mut self) -> &mut Self {
        let (v13, ext) = super::adapt_1_3::coordinator_13::<C>();
        self.extensions.push(ext);
        self.extensions_13.push(v13);
        self
    }

    /// Adds a custom grouping (contract 1.1: it has no 1.0 descriptor).
    pub fn grouping<G: crate::Grouping>(&mut self) -> &mut Self {
        self.extensions.push(super::ext_adapt::grouping_ext::<G>());
        self
    }

    /// The finished 1.0 catalogue.
    pub fn build(self) -> Catalogue {
        self.catalogue
    }

    /// The finished 1.1 descriptors, one per component.
    pub fn build_extensions(self) -> RVec<super::ComponentExt> {
        self.extensions
    }

    /// The finished 1.2 descriptors (wait strategies and groupings have none).
    pub fn build_extensions_12(self) -> RVec<super::ComponentExt12> {
        self.extensions_12
    }

    /// The finished 1.3 descriptors (spouts, bolts other than windowed
    /// ones, and coordinators).
    pub fn build_extensions_13(self) -> RVec<super::ComponentExt13> {
        self.extensions_13
    }
}

extern "C" fn new_spout<S: Spout>(config: RStr<'_>) -> PResult<ComponentBox> {
    guard(|| {
        let spout = S::new(&ComponentConfig::new(config.as_str()))
            .map_err(to_plugin_error(ErrorKind::CONFIG))?;
        Ok(ComponentBox::Spout(DynSpout_TO::from_value(SpoutAdapter(spout), TD_Opaque)))
    })
}

extern "C" fn new_bolt<B: Bolt>(config: RStr<'_>) -> PResult<ComponentBox> {
    guard(|| {
        let bolt = B::new(&ComponentConfig::new(config.as_str()))
            .map_err(to_plugin_error(ErrorKind::CONFIG))?;
        Ok(ComponentBox::Bolt(DynBolt_TO::from_value(BoltAdapter(bolt), TD_Opaque)))
    })
}

extern "C" fn new_basic_bolt<B: BasicBolt>(config: RStr<'_>) -> PResult<ComponentBox> {
    guard(|| {
        let bolt = B::new(&ComponentConfig::new(config.as_str()))
            .map_err(to_plugin_error(ErrorKind::CONFIG))?;
        Ok(ComponentBox::Bolt(DynBolt_TO::from_value(BasicBoltAdapter(bolt), TD_Opaque)))
    })
}

extern "C" fn new_wait<W: WaitStrategy>(config: RStr<'_>) -> PResult<ComponentBox> {
    guard(|| {
        let wait = W::new(&ComponentConfig::new(config.as_str()))
            .map_err(to_plugin_error(ErrorKind::CONFIG))?;
        Ok(ComponentBox::WaitStrategy(DynWaitStrategy_TO::from_value(WaitAdapter(wait), TD_Opaque)))
    })
}
