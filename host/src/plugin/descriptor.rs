//! One descriptor per component, whatever contract its library was built
//! against.
//!
//! A library describes a component in up to four places, one per contract
//! minor that added something: the 1.0 catalogue entry, the 1.1
//! [`ComponentExt`], the 1.2 [`ComponentExt12`] and the 1.3
//! [`ComponentExt13`]. [`normalise`] folds them into one [`Descriptor`],
//! with the defaults of a component that lacks what a later contract
//! added, so the rest of the host (binding, `inspect`, the executors) sees
//! one shape. Adding a contract item is one field here and its use.

use std::time::Duration;

use abi_stable::std_types::{RSlice, RStr};
use squall_plugin_api::abi::{
    ComponentDescriptor, ComponentExt, ComponentExt12, ComponentExt13, ComponentKind,
    ConfigKeyDecl, InputDecl, PResult, StoreDecl,
};
use squall_plugin_api::{PluginError, StreamDecl};

use super::Factory;

/// A 1.1 component's `declare_outputs`.
type DeclareOutputs =
    extern "C" fn(config: RStr<'_>) -> PResult<abi_stable::std_types::RVec<StreamDecl>>;

/// A 1.1 bolt's `check_inputs`.
type CheckInputs = extern "C" fn(config: RStr<'_>, inputs: RSlice<'_, InputDecl>) -> PResult<()>;

/// Where a component's output streams come from.
#[derive(Debug, Clone)]
enum Outputs {
    /// Fixed by its 1.0 descriptor.
    Fixed(Vec<StreamDecl>),
    /// Declared for each config (contract 1.1).
    FromConfig(DeclareOutputs),
}

/// A component as the host uses it.
#[derive(Debug, Clone)]
pub struct Descriptor {
    /// Spout, bolt, wait strategy, grouping, state backend or coordinator.
    pub kind: ComponentKind,
    /// The name a topology uses after `alias::`.
    pub name: String,
    /// A one-line description.
    pub description: String,
    /// The config keys it declared (`None`: it declared none, so any key
    /// is passed through unchecked).
    pub config_keys: Option<Vec<ConfigKeyDecl>>,
    /// The fields it expects on every input stream (bolts, contract 1.1).
    pub input_fields: Vec<String>,
    /// A basic bolt: the host anchors its emits and acks its inputs.
    pub auto_ack: bool,
    /// A windowed bolt (contract 1.1).
    pub windowed: bool,
    /// A spout whose message ids its successor can ack (contract 1.1).
    pub ids_survive_swap: bool,
    /// How long `close` or `cleanup` may take (contract 1.2; `None`: not
    /// declared).
    pub close_budget: Option<Duration>,
    /// A bolt with durable stores or a spout with a checkpoint position
    /// (contract 1.2).
    pub durable: bool,
    /// The longest a bolt may go between two tick tuples (contract 1.2;
    /// `None`: it needs none).
    pub ticks: Option<Duration>,
    /// The streams it emits on (contract 1.2; empty: not declared).
    pub emits: Vec<String>,
    /// Contract 1.3: a bolt that takes whole batches (`execute_batch`), or
    /// a spout that fills one per call (`next_batch`): its instances are
    /// built through contract 1.3. False for a component built through an
    /// earlier contract, which the host calls once per tuple.
    pub batch: bool,
    /// The durable stores a bolt declares (contract 1.3, `Bolt::STORES`;
    /// `None`: not declared).
    pub stores: Option<Vec<StoreDecl>>,
    /// How its instances are built: through the newest contract its
    /// library describes it in.
    pub factory: Factory,
    outputs: Outputs,
    check_inputs: Option<CheckInputs>,
    /// What one task buffers outside the host's queues (contract 1.3).
    buffer_bytes: Option<extern "C" fn(RStr<'_>) -> PResult<u64>>,
}

impl Descriptor {
    /// Its output streams for `config`.
    ///
    /// # Errors
    /// The component refused the config (contract 1.1 components declare
    /// their outputs from it).
    pub fn outputs(&self, config: &str) -> Result<Vec<StreamDecl>, PluginError> {
        match &self.outputs {
            Outputs::Fixed(streams) => Ok(streams.clone()),
            Outputs::FromConfig(declare) => {
                declare(config.into()).into_result().map(|s| s.into_vec())
            }
        }
    }

    /// The most bytes one task buffers outside the host's queues with
    /// `config` (contract 1.3 spouts and bolts; 0 for the others).
    ///
    /// # Errors
    /// The component refused the config.
    pub fn buffer_bytes(&self, config: &str) -> Result<u64, PluginError> {
        match self.buffer_bytes {
            Some(f) => f(config.into()).into_result(),
            None => Ok(0),
        }
    }

    /// Lets a bolt check what it is subscribed to (contract 1.1; others
    /// accept any input).
    ///
    /// # Errors
    /// The bolt refused its inputs.
    pub fn check_inputs(&self, config: &str, inputs: &[InputDecl]) -> Result<(), PluginError> {
        match self.check_inputs {
            Some(check) => check(config.into(), inputs.into()).into_result(),
            None => Ok(()),
        }
    }
}

/// What a library exports, as each contract describes it.
#[derive(Debug, Default)]
pub struct Parts<'a> {
    /// The 1.0 catalogue's entries.
    pub v1_0: &'a [ComponentDescriptor],
    /// The 1.1 descriptions (empty for a 1.0 library).
    pub v1_1: &'a [ComponentExt],
    /// The 1.2 descriptions (empty before 1.2).
    pub v1_2: &'a [ComponentExt12],
    /// The 1.3 descriptions (empty before 1.3).
    pub v1_3: &'a [ComponentExt13],
}

/// Folds a library's descriptions into one [`Descriptor`] per component:
/// those of the 1.0 catalogue in its order, then those that only later
/// contracts describe (windowed bolts, groupings, state backends,
/// coordinators). A description whose newest part lacks a constructor for
/// its kind is left out (it cannot be built).
pub fn normalise(parts: &Parts<'_>) -> Vec<Descriptor> {
    let mut seen: Vec<(ComponentKind, &str)> = Vec::new();
    let names = parts
        .v1_0
        .iter()
        .map(|d| (d.kind, d.name.as_str()))
        .chain(parts.v1_1.iter().map(|e| (e.kind, e.name.as_str())))
        .chain(parts.v1_2.iter().map(|e| (e.kind, e.name.as_str())))
        .chain(parts.v1_3.iter().map(|e| (e.kind, e.name.as_str())));
    for key in names {
        if !seen.contains(&key) {
            seen.push(key);
        }
    }
    seen.into_iter().filter_map(|(kind, name)| one(parts, kind, name)).collect()
}

fn one(parts: &Parts<'_>, kind: ComponentKind, name: &str) -> Option<Descriptor> {
    let v10 = parts.v1_0.iter().find(|d| d.kind == kind && d.name.as_str() == name);
    let v11 = parts.v1_1.iter().find(|d| d.kind == kind && d.name.as_str() == name);
    let v12 = parts.v1_2.iter().find(|d| d.kind == kind && d.name.as_str() == name);
    let v13 = parts.v1_3.iter().find(|d| d.kind == kind && d.name.as_str() == name);
    // A 1.3 spout or bolt that asks for one call per tuple is built
    // through its 1.2 descriptor, whose objects have no batch entry point.
    let batched = v13.filter(|e| e.batch || v12.is_none());
    let factory = match (batched, v12, v11.and_then(|e| e.new.into_option()), v10) {
        (Some(v13), ..) => Factory::V13(v13.new),
        (None, Some(v12), ..) => Factory::V12(v12.new),
        (None, None, Some(new), _) => Factory::Ext(new),
        (None, None, None, Some(d)) => Factory::V1(d.new),
        (None, None, None, None) => return None,
    };
    let outputs = match (v11, v10) {
        (Some(e), _) => Outputs::FromConfig(e.declare_outputs),
        (None, Some(d)) => Outputs::Fixed(d.outputs.to_vec()),
        (None, None) => Outputs::Fixed(Vec::new()),
    };
    let millis = |ms: u64| (ms > 0).then(|| Duration::from_millis(ms));
    Some(Descriptor {
        kind,
        name: name.to_owned(),
        description: v11
            .map(|e| e.description.to_string())
            .or_else(|| v10.map(|d| d.description.to_string()))
            .unwrap_or_default(),
        config_keys: v11.filter(|e| e.declares_config).map(|e| e.config_keys.to_vec()),
        input_fields: v11
            .map(|e| e.input_fields.iter().map(|f| f.to_string()).collect())
            .unwrap_or_default(),
        auto_ack: v11.map_or_else(|| v10.is_some_and(|d| d.auto_ack), |e| e.auto_ack),
        windowed: v11.is_some_and(|e| e.windowed),
        ids_survive_swap: v11.is_some_and(|e| e.ids_survive_swap),
        close_budget: v12.and_then(|e| millis(e.close_budget_ms)),
        durable: v12.is_some_and(|e| e.durable),
        ticks: v12.filter(|_| kind == ComponentKind::BOLT).and_then(|e| millis(e.ticks_ms)),
        emits: v12.map(|e| e.emits.iter().map(|s| s.to_string()).collect()).unwrap_or_default(),
        batch: batched.is_some_and(|e| e.batch),
        stores: v13
            .filter(|e| kind == ComponentKind::BOLT && e.declares_stores)
            .map(|e| e.stores.to_vec()),
        factory,
        outputs,
        check_inputs: v11.filter(|_| kind == ComponentKind::BOLT).map(|e| e.check_inputs),
        buffer_bytes: v13.map(|e| e.buffer_bytes),
    })
}
