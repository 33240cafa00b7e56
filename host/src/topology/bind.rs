//! `bind`: a validated config plus its loaded plugins becomes a [`Topology`].
//!
//! Checks that need the plugins happen here, each reported as a diagnostic at
//! the place in the TOML file that names the thing: an unknown component (with
//! "did you mean"), a component of the wrong kind, an undeclared input
//! stream, a fields grouping on an undeclared field, a direct grouping on a
//! stream that is not direct (and the reverse), and (contract 1.1) config
//! keys a component or plugin wait strategy did not declare, input fields a
//! bolt needs, and inputs a bolt's `check_inputs` refuses.

use std::collections::HashMap;

use abi_stable::std_types::{RString, RVec};
use squall_plugin_api::abi::{ComponentKind, ConfigKeyDecl, StoreKind};
use squall_plugin_api::{StreamDecl, DEFAULT_STREAM};

use super::grouping::CustomGrouping;
use super::{
    Component, Grouping, Input, Kind, LibraryInfo, OutputStream, Subscriber, Topology, WaitPlan,
};
use crate::config::validate::{budget_error, PluginBuffers};
use crate::config::{
    suggest, BoltDecl, ComponentDecl, ComponentRef, ConfigKeyLoc, Diagnostics, GroupingSpec,
    InputDecl, Loc, PluginDecl, TopologyConfig, WaitOverrides, WaitSpec,
};

/// The stream a windowed bolt sends its late tuples on (event time).
pub const LATE_STREAM: &str = "late";
use crate::plugin::{
    load_library_with, Descriptor, ExtConstructor, Factory, Library, LoadError, LoadOptions,
};

/// Why a topology could not be bound.
#[derive(Debug, thiserror::Error)]
pub enum BindError {
    /// One or more plugin libraries failed to load.
    #[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n"))]
    Load(Vec<LoadError>),
    /// The topology does not fit its plugins.
    #[error("{0}")]
    Config(Diagnostics),
}

/// Loads every plugin library of `config` and binds the topology to them.
///
/// # Errors
/// [`BindError::Load`] lists every library that failed to load;
/// [`BindError::Config`] lists every mismatch between the topology and its
/// plugins, each with file:line:col.
pub fn bind(config: &TopologyConfig) -> Result<Topology, BindError> {
    bind_with(config, &mut |decl, options| {
        // The digest of the bytes loaded (the loader hashes its private copy).
        let lib = load_library_with(&decl.alias, &decl.path, decl.sha256.as_deref(), options)?;
        let digest = lib.digest.clone();
        Ok((lib, digest))
    })
}

/// [`bind`], with some libraries already loaded: an alias of `config` found
/// in `provided` uses that library and its path is not opened (its digest
/// reads `in-process`); the other aliases are loaded from their paths. The
/// in-process test harness hands over plugins linked into the test binary
/// this way.
///
/// # Errors
/// As [`bind`].
pub fn bind_provided(
    config: &TopologyConfig,
    mut provided: HashMap<String, Library>,
) -> Result<Topology, BindError> {
    bind_with(config, &mut |decl, options| {
        if let Some(lib) = provided.remove(&decl.alias) {
            let digest = lib.digest.clone();
            return Ok((lib, digest));
        }
        let lib = load_library_with(&decl.alias, &decl.path, decl.sha256.as_deref(), options)?;
        let digest = lib.digest.clone();
        Ok((lib, digest))
    })
}

/// How [`bind_with`] loads one `[plugins]` entry: the library and the
/// SHA-256 (lowercase hex) of the bytes it was loaded from.
pub type LibraryLoader<'l> =
    dyn FnMut(&PluginDecl, LoadOptions) -> Result<(Library, String), LoadError> + 'l;

/// As [`bind`], with each library loaded by `load` (a live reload loads
/// its libraries through its own private folder: see `runtime::reload`).
///
/// # Errors
/// As [`bind`].
pub fn bind_with(
    config: &TopologyConfig,
    load: &mut LibraryLoader<'_>,
) -> Result<Topology, BindError> {
    let mut libraries = HashMap::new();
    let mut infos = Vec::new();
    let mut load_errors = Vec::new();
    let to_load: Vec<_> =
        config.plugins.iter().filter(|d| !libraries.contains_key(&d.alias)).collect();
    for decl in to_load {
        let options = LoadOptions {
            allow_writable: decl.allow_writable || config.settings.allow_writable_plugins,
        };
        match load(decl, options) {
            Ok((lib, digest)) => {
                infos.push(LibraryInfo {
                    alias: decl.alias.clone(),
                    path: decl.path.clone(),
                    digest,
                });
                libraries.insert(decl.alias.clone(), lib);
            }
            Err(e) => load_errors.push(e),
        }
    }
    if !load_errors.is_empty() {
        return Err(BindError::Load(load_errors));
    }
    let mut topology =
        Binder { config, libraries: &libraries, diags: Diagnostics::new(), buffers: Vec::new() }
            .bind()?;
    topology.libraries = infos;
    Ok(topology)
}

struct Binder<'a> {
    config: &'a TopologyConfig,
    libraries: &'a HashMap<String, Library>,
    diags: Diagnostics,
    /// What each component's plugin declared its tasks buffer (contract
    /// 1.3), for the memory estimate.
    buffers: Vec<PluginBuffers>,
}

impl<'a> Binder<'a> {
    /// Binds every component, then wires the spouts' limits, the bolts'
    /// windows, ticks and inputs, and the state backend; every mismatch
    /// is a diagnostic.
    fn bind(mut self) -> Result<Topology, BindError> {
        let config = self.config;
        let mut components = Vec::new();
        let mut next_task = 0u32;
        let mut names: HashMap<&str, usize> = HashMap::new();
        let decls = config
            .spouts
            .iter()
            .map(|s| (Kind::Spout, &s.decl))
            .chain(config.bolts.iter().map(|b| (Kind::Bolt, &b.decl)));
        for (kind, decl) in decls {
            let Some(component) = self.bind_component(kind, decl, next_task) else { continue };
            next_task = component.tasks.end;
            names.insert(decl.name.as_str(), components.len());
            components.push(component);
        }
        self.wire(&mut components, &names);
        chain(config, &mut components, &names);
        let topology = Topology {
            name: config.name.clone(),
            settings: config.settings.clone(),
            components,
            task_count: next_task,
            file: config.file.clone(),
            sources: config.sources.clone(),
            libraries: Vec::new(),
            state: config.state.as_ref().and_then(|decl| self.bind_state(decl)),
            simulated: None,
        };
        if let Some(group) = &config.group {
            self.check_coordinator(group);
        }
        self.check_budget();
        // A shared mistake (an unknown plugin wait strategy in `[wait.*]`)
        // is met once per component; report it once.
        self.diags.sort();
        self.diags.items.dedup();
        self.diags.into_result(topology).map_err(BindError::Config)
    }

    /// Binds one declared component to its descriptor, its tasks numbered
    /// from `first_task`; `None` (with diagnostics) when it does not bind.
    fn bind_component(
        &mut self,
        kind: Kind,
        decl: &ComponentDecl,
        first_task: u32,
    ) -> Option<Component> {
        let ComponentDecl {
            name,
            loc,
            component: reference,
            parallelism,
            config,
            config_keys,
            wait,
            chain: _,
        } = decl;
        let wanted = if kind == Kind::Spout { ComponentKind::SPOUT } else { ComponentKind::BOLT };
        let descriptor = self.resolve(reference, wanted)?;
        // A config whose keys are wrong is reported there, not again when
        // the component refuses it while declaring its outputs.
        let errors = self.diags.items.len();
        self.check_config_keys(descriptor, reference, *loc, config_keys);
        let keys_ok = self.diags.items.len() == errors;
        let declared = self.outputs(descriptor, config, reference, keys_ok)?;
        let outputs: Vec<OutputStream> = declared
            .into_iter()
            .map(|decl| OutputStream { decl, subscribers: Vec::new() })
            .collect();
        self.check_emits(descriptor, &outputs, (kind, name), reference, *loc);
        if keys_ok {
            self.buffer_bytes(descriptor, decl, kind);
        }
        let wait = self.wait_plans(wait);
        let tasks = first_task..first_task + parallelism;
        Some(component(decl, kind, descriptor, outputs, tasks, wait))
    }

    /// Sets the spouts' throttles and pending limits, binds the bolts'
    /// windows, then their ticks and inputs (a window's timestamp field is
    /// checked against the inputs).
    fn wire(&mut self, components: &mut [Component], names: &HashMap<&str, usize>) {
        let config = self.config;
        for spout in &config.spouts {
            if let Some(&i) = names.get(spout.decl.name.as_str()) {
                components[i].throttle = spout.throttle.clone();
                components[i].max_spout_pending =
                    spout.effective_max_spout_pending(&config.settings);
            }
        }
        for bolt in &config.bolts {
            let Some(&to) = names.get(bolt.decl.name.as_str()) else { continue };
            self.bind_window(components, names, to, bolt);
        }
        for bolt in &config.bolts {
            let Some(&to) = names.get(bolt.decl.name.as_str()) else { continue };
            components[to].tick_tuple_freq_secs = bolt.tick_tuple_freq_secs;
            self.check_ticks(&components[to], bolt);
            for input in &bolt.inputs {
                self.bind_input(components, names, to, input);
            }
            self.check_timestamp_field(components, to);
            self.check_inputs(components, to, &bolt.decl.component);
            self.check_keyed_stores(&components[to], bolt);
        }
    }

    /// Asks the component's plugin what one task buffers with its config
    /// (contract 1.3), for the memory estimate; a refusal is reported at
    /// the component.
    fn buffer_bytes(&mut self, descriptor: &Descriptor, decl: &ComponentDecl, kind: Kind) {
        match descriptor.buffer_bytes(&decl.config) {
            Ok(0) => {}
            Ok(bytes) => self.buffers.push(PluginBuffers {
                name: decl.name.clone(),
                reference: format!("{}::{}", decl.component.alias, decl.component.component),
                bytes: bytes.saturating_mul(u64::from(decl.parallelism)),
            }),
            Err(e) => {
                let kind = if kind == Kind::Spout { "spout" } else { "bolt" };
                let message = format!(
                    "{kind} \"{}\" ({}::{}) refused its config: {e}",
                    decl.name, decl.component.alias, decl.component.component
                );
                self.error(decl.loc, message, None);
            }
        }
    }

    /// The memory estimate again, with what the plugins declared they
    /// buffer (the estimate without them was checked when the file was
    /// read): over `memory_budget_mib`, it is reported where that check
    /// reports.
    fn check_budget(&mut self) {
        if self.buffers.is_empty() {
            return;
        }
        if let Some((message, help)) = budget_error(self.config, &self.buffers) {
            self.error(self.config.budget_loc, message, Some(help));
        }
    }

    /// A bolt that declares a keyed store (contract 1.3, `Bolt::STORES`)
    /// and runs several tasks has every input grouped by fields. Otherwise
    /// several tasks would write one key, the last writer winning, and a
    /// restore would give each key to the task the fields grouping picks,
    /// not the one its tuples go to (docs/state.md, "Mistakes squall
    /// refuses"). Undeclared stores are checked at the first checkpoint.
    fn check_keyed_stores(&mut self, component: &Component, bolt: &BoltDecl) {
        if component.tasks.len() < 2 {
            return;
        }
        let Some(descriptor) = self.descriptor(&bolt.decl.component, ComponentKind::BOLT) else {
            return;
        };
        let Some(store) = descriptor.stores.iter().flatten().find(|s| s.kind == StoreKind::KEYED)
        else {
            return;
        };
        for input in &bolt.inputs {
            let grouping = match &input.grouping {
                GroupingSpec::Fields(_) => continue,
                GroupingSpec::Custom { component, .. } => {
                    format!("the custom grouping {}::{}", component.alias, component.component)
                }
                other => other.name().to_owned(),
            };
            let message = format!(
                "bolt \"{}\" ({}) keeps keyed store {:?}, but its input from \"{}\" is grouped \
                 by {grouping}: with {} tasks, several would write one key and the last would \
                 win, and a restore would give each key to the task a fields grouping picks",
                bolt.decl.name,
                component.reference,
                store.name.as_str(),
                input.from,
                component.tasks.len(),
            );
            let help = "group the input by the fields the store's key is made of, in the key's \
                        order (grouping = { fields = [...] }), or set parallelism = 1";
            self.error(input.grouping_loc, message, Some(help.to_owned()));
        }
    }

    /// A component that declares the streams it emits on (`EMITS`) declares
    /// each of them among its outputs for this config: otherwise every
    /// emit on the missing one would be refused at run time.
    fn check_emits(
        &mut self,
        descriptor: &Descriptor,
        outputs: &[OutputStream],
        (kind, name): (Kind, &str),
        reference: &ComponentRef,
        loc: Loc,
    ) {
        let declared = |s: &str| outputs.iter().any(|o| o.decl.name.as_str() == s);
        let missing: Vec<&str> =
            descriptor.emits.iter().map(String::as_str).filter(|s| !declared(s)).collect();
        if missing.is_empty() {
            return;
        }
        let kind = if kind == Kind::Spout { "spout" } else { "bolt" };
        let streams: Vec<String> = missing.iter().map(|s| format!("{s:?}")).collect();
        let outputs: Vec<&str> = outputs.iter().map(|o| o.decl.name.as_str()).collect();
        let message = format!(
            "{kind} \"{name}\" ({}::{}) emits on stream {}, but with this config it \
             declares {}: every such emit would be refused at run time",
            reference.alias,
            reference.component,
            streams.join(" and "),
            if outputs.is_empty() {
                "no output stream".to_owned()
            } else {
                format!("only {}", outputs.join(", "))
            },
        );
        let help = "check the component's config: the plugin's declare_outputs_for \
                    decides its streams from it (squall inspect lists them)";
        self.error(loc, message, Some(help.to_owned()));
    }

    /// A bolt that declares it needs tick tuples (`Bolt::TICKS`) gets them,
    /// at least as often as it asks: without them it would run doing
    /// nothing, and exit 0.
    fn check_ticks(&mut self, component: &Component, bolt: &BoltDecl) {
        let Some(needed) = component.needs_ticks else { return };
        let needed_secs = needed.as_secs().max(1);
        let every = if needed.subsec_millis() == 0 {
            format!("{} s", needed.as_secs())
        } else {
            format!("{} ms", needed.as_millis())
        };
        match bolt.tick_tuple_freq_secs {
            None => {
                let message = format!(
                    "bolt \"{}\" ({}) needs tick tuples at least every {every}, but it has no \
                     tick_tuple_freq_secs: it would run without doing its work",
                    bolt.decl.name, component.reference
                );
                let help = format!(
                    "add tick_tuple_freq_secs = {needed_secs} to [bolts.{}]",
                    bolt.decl.name
                );
                self.error(bolt.decl.loc, message, Some(help));
            }
            Some(secs) if std::time::Duration::from_secs(secs) > needed => {
                let message = format!(
                    "bolt \"{}\" ({}) needs tick tuples at least every {every}, but \
                     tick_tuple_freq_secs = {secs}",
                    bolt.decl.name, component.reference
                );
                let help = format!("set tick_tuple_freq_secs = {needed_secs} or less");
                self.error(bolt.decl.loc, message, Some(help));
            }
            Some(_) => {}
        }
    }

    /// `[state]`: the backend's component, with its config keys checked.
    fn bind_state(&mut self, decl: &crate::config::StateDecl) -> Option<super::StatePlan> {
        use crate::config::BackendDecl;
        let backend = match &decl.backend {
            BackendDecl::Memory => super::BackendPlan::Memory,
            BackendDecl::Plugin(reference) => {
                let kind = ComponentKind::STATE_BACKEND;
                let library = self.libraries.get(&reference.alias)?;
                let Some((descriptor, Factory::V12(new))) =
                    library.descriptor(&reference.component, kind).map(|d| (d, d.factory))
                else {
                    let help = suggest(&reference.component, library.names(kind))
                        .map(|s| format!("did you mean \"{}::{s}\"?", reference.alias));
                    let message = format!(
                        "unknown state backend \"{}::{}\": plugin \"{}\" exports no state \
                         backend of that name (state backends are contract 1.2)",
                        reference.alias, reference.component, reference.alias
                    );
                    self.error(reference.loc, message, help);
                    return None;
                };
                self.check_config_keys(descriptor, reference, decl.loc, &decl.config_keys);
                super::BackendPlan::Plugin {
                    reference: format!("{}::{}", reference.alias, reference.component),
                    new,
                    config: decl.config.clone(),
                }
            }
        };
        Some(super::StatePlan {
            backend,
            namespace: decl.namespace.clone(),
            interval: std::time::Duration::from_millis(decl.interval_ms),
        })
    }

    /// `[group]`: its coordinator exists (contract 1.3), and the keys
    /// written for it are the ones it declares.
    fn check_coordinator(&mut self, group: &crate::config::GroupDecl) {
        let reference = &group.coordinator;
        let kind = ComponentKind::COORDINATOR;
        // An unknown alias was reported by config; a library that did not
        // load, by the loader.
        let Some(library) = self.libraries.get(&reference.alias) else { return };
        match library.descriptor(&reference.component, kind) {
            Some(descriptor) if matches!(descriptor.factory, Factory::V13(_)) => {
                self.check_config_keys(descriptor, reference, group.loc, &group.config_keys);
            }
            _ => {
                let help = suggest(&reference.component, library.names(kind))
                    .map(|s| format!("did you mean \"{}::{s}\"?", reference.alias));
                let message = format!(
                    "unknown group coordinator \"{}::{}\": plugin \"{}\" exports no \
                     coordinator of that name (coordinators are contract 1.3)",
                    reference.alias, reference.component, reference.alias
                );
                self.error(reference.loc, message, help);
            }
        }
    }

    /// The descriptor of `alias::Component` of kind `kind`, if it exists.
    fn descriptor(&self, reference: &ComponentRef, kind: ComponentKind) -> Option<&'a Descriptor> {
        let libraries = self.libraries;
        libraries.get(&reference.alias)?.descriptor(&reference.component, kind)
    }

    /// The component's output streams for its config. `None` when the
    /// component refused its config, which is reported unless `report` is
    /// false (its keys were reported wrong).
    fn outputs(
        &mut self,
        descriptor: &Descriptor,
        config: &str,
        reference: &ComponentRef,
        report: bool,
    ) -> Option<Vec<StreamDecl>> {
        match descriptor.outputs(config) {
            Ok(outputs) => Some(outputs),
            Err(_) if !report => None,
            Err(e) => {
                let message = format!(
                    "{}::{} refused its config while declaring its outputs: {}",
                    reference.alias, reference.component, e.message
                );
                self.error(reference.loc, message, None);
                None
            }
        }
    }

    /// Reports keys of a component's `config` (or of a plugin wait
    /// strategy's `[wait.*]` table) that it did not declare (with a
    /// did-you-mean), keys of the wrong type, and required keys left out,
    /// before any constructor runs.
    fn check_config_keys(
        &mut self,
        descriptor: &Descriptor,
        reference: &ComponentRef,
        component_loc: Loc,
        written: &[ConfigKeyLoc],
    ) {
        let Some(config_keys) = &descriptor.config_keys else { return };
        let component = format!("{}::{}", reference.alias, reference.component);
        for key in written {
            let Some(decl) = config_keys.iter().find(|k| k.name.as_str() == key.name) else {
                self.unknown_config_key(key, config_keys, &component);
                continue;
            };
            if !kind_fits(decl.kind.as_str(), key.kind) {
                let message = format!(
                    "config key \"{}\" of {component} must be {} {}, not {} {}",
                    key.name,
                    article(decl.kind.as_str()),
                    decl.kind,
                    article(key.kind),
                    key.kind
                );
                self.error(key.loc, message, Some(decl.doc.to_string()).filter(|d| !d.is_empty()));
            }
        }
        for decl in config_keys.iter().filter(|k| k.required) {
            if !written.iter().any(|k| k.name == decl.name.as_str()) {
                let message =
                    format!("{component} needs config key \"{}\" ({})", decl.name, decl.kind);
                let help = format!("add it to the component's config table: {}", decl.doc);
                self.error(component_loc, message, Some(help));
            }
        }
    }

    /// A 1.1 bolt's checks of what it is subscribed to: the input fields it
    /// declared, then its own `check_inputs`.
    fn check_inputs(&mut self, components: &[Component], to: usize, reference: &ComponentRef) {
        let Some(descriptor) = self.descriptor(reference, ComponentKind::BOLT) else { return };
        let bolt = &components[to];
        let inputs = super::input_decls(components, bolt);
        if let Err(e) = descriptor.check_inputs(&bolt.config, &inputs) {
            let message = format!(
                "bolt \"{}\" ({}) refuses its inputs: {}",
                bolt.name, bolt.reference, e.message
            );
            self.error(bolt.loc, message, None);
        }
    }

    /// Reports an input stream that lacks a field the bolt declared it needs.
    fn check_input_fields(&mut self, bolt: &Component, input: &InputDecl, decl: &StreamDecl) {
        let missing: Vec<&str> = bolt
            .input_fields
            .iter()
            .filter(|f| !decl.fields.iter().any(|d| d.as_str() == f.as_str()))
            .map(String::as_str)
            .collect();
        if missing.is_empty() {
            return;
        }
        let fields: Vec<&str> = decl.fields.iter().map(|f| f.as_str()).collect();
        let message = format!(
            "bolt \"{}\" ({}) needs field(s) {} on its inputs, but stream \"{}\" of \"{}\" has: {}",
            bolt.name,
            bolt.reference,
            missing.join(", "),
            input.stream,
            input.from,
            if fields.is_empty() { "no fields".to_owned() } else { fields.join(", ") }
        );
        self.error(input.from_loc, message, None);
    }

    fn error(&mut self, loc: Loc, message: String, help: Option<String>) {
        self.diags.push_at(&self.config.sources, loc, message, help);
    }

    /// Finds `alias::Component` in its library and checks its kind.
    fn resolve(
        &mut self,
        reference: &ComponentRef,
        wanted: ComponentKind,
    ) -> Option<&'a Descriptor> {
        let libraries = self.libraries;
        let library = libraries.get(&reference.alias)?; // unknown aliases were reported by config
        if let Some(descriptor) = library.descriptor(&reference.component, wanted) {
            return Some(descriptor);
        }
        let (message, help) = match library.named(&reference.component) {
            Some(other) => (
                format!(
                    "\"{}::{}\" is a {}, not a {}",
                    reference.alias,
                    reference.component,
                    other.kind.name(),
                    wanted.name()
                ),
                None,
            ),
            None => (
                format!(
                    "unknown component \"{}::{}\": plugin \"{}\" exports no {} of that name",
                    reference.alias,
                    reference.component,
                    reference.alias,
                    wanted.name()
                ),
                suggest(&reference.component, library.names(wanted))
                    .map(|s| format!("did you mean \"{}::{s}\"?", reference.alias)),
            ),
        };
        self.error(reference.loc, message, help);
        None
    }

    fn wait_plans(&mut self, overrides: &WaitOverrides) -> [WaitPlan; 3] {
        let defaults = &self.config.wait;
        let pick = |o: &Option<WaitSpec>, d: &WaitSpec| o.clone().unwrap_or_else(|| d.clone());
        let specs = [
            pick(&overrides.spout, &defaults.spout),
            pick(&overrides.bolt, &defaults.bolt),
            pick(&overrides.backpressure, &defaults.backpressure),
        ];
        specs.map(|spec| self.wait_plan(spec))
    }

    fn wait_plan(&mut self, spec: WaitSpec) -> WaitPlan {
        if let WaitSpec::Plugin { component, config, keys } = &spec {
            let resolved = self.resolve(component, ComponentKind::WAIT_STRATEGY);
            if let Some((d, Factory::V1(new))) = resolved.map(|d| (d, d.factory)) {
                // A table shared by several components is checked once per
                // component; `bind` drops the repeated diagnostics.
                self.check_config_keys(d, component, component.loc, keys);
                return WaitPlan::Plugin {
                    name: format!("{}::{}", component.alias, component.component),
                    new,
                    config: config.clone(),
                    loc: component.loc,
                };
            }
            // Reported already; any valid plan keeps binding going.
            return WaitPlan::Builtin(WaitSpec::Park {
                park_micros: crate::config::defaults::PARK_MICROS,
            });
        }
        WaitPlan::Builtin(spec)
    }

    /// A windowed bolt needs a `window` and any other bolt refuses one; a
    /// windowed bolt gets a `late` stream (unless it declares one) with the
    /// fields of its first input, for event-time tuples behind the watermark.
    fn bind_window(
        &mut self,
        components: &mut [Component],
        names: &HashMap<&str, usize>,
        to: usize,
        bolt: &BoltDecl,
    ) {
        let component = &components[to];
        if !self.check_windowed(component, bolt) {
            return;
        }
        if bolt.tick_tuple_freq_secs.is_some() {
            let message = format!(
                "bolt \"{}\" ({}) is a windowed bolt: tick tuples never enter a window, so \
                 tick_tuple_freq_secs would do nothing",
                bolt.decl.name, component.reference
            );
            let help = "remove tick_tuple_freq_secs: the host fires time windows itself";
            self.error(bolt.decl.loc, message, Some(help.to_string()));
        }
        components[to].window = bolt.window.clone();
        if components[to].outputs.iter().any(|s| s.decl.name.as_str() == LATE_STREAM) {
            return;
        }
        let fields = first_input_fields(components, names, bolt);
        components[to].outputs.push(OutputStream {
            decl: StreamDecl { name: LATE_STREAM.into(), fields, direct: false },
            subscribers: Vec::new(),
        });
    }

    /// Reports `key`, which is none of the `config_keys` `component`
    /// declares, with the keys it does accept and a did-you-mean.
    fn unknown_config_key(
        &mut self,
        key: &ConfigKeyLoc,
        config_keys: &[ConfigKeyDecl],
        component: &str,
    ) {
        let declared = || config_keys.iter().map(|k| k.name.as_str());
        let help = suggest(&key.name, declared()).map(|s| format!("did you mean \"{s}\"?"));
        let known: Vec<&str> = declared().collect();
        let known = if known.is_empty() { "none".to_owned() } else { known.join(", ") };
        let message =
            format!("unknown config key \"{}\" for {component} (it accepts: {known})", key.name);
        self.error(key.loc, message, help);
    }

    /// Reports a windowed bolt without a window, or a window on a bolt that
    /// is not windowed; true when the bolt is windowed and has its window.
    fn check_windowed(&mut self, component: &Component, bolt: &BoltDecl) -> bool {
        match (&bolt.window, component.windowed) {
            (None, true) => {
                let message = format!(
                    "bolt \"{}\" ({}) is a windowed bolt: it needs a window",
                    bolt.decl.name, component.reference
                );
                let help = "add window = { length = \"10s\" } or window = { length_count = 100 }";
                self.error(bolt.decl.loc, message, Some(help.to_string()));
                false
            }
            (Some(window), false) => {
                let message = format!(
                    "bolt \"{}\" ({}) is not a windowed bolt: it takes no window",
                    bolt.decl.name, component.reference
                );
                self.error(window.loc, message, Some("remove its window".to_string()));
                false
            }
            (None, false) => false,
            (Some(_), true) => true,
        }
    }

    /// An event-time window needs its timestamp field on every input.
    fn check_timestamp_field(&mut self, components: &[Component], to: usize) {
        let bolt = &components[to];
        let Some(field) = bolt.window.as_ref().and_then(|w| w.timestamp_field.as_ref()) else {
            return;
        };
        for input in &bolt.inputs {
            let decl = &components[input.from].outputs[input.stream as usize].decl;
            if !decl.fields.iter().any(|f| f.as_str() == field) {
                let fields: Vec<&str> = decl.fields.iter().map(|f| f.as_str()).collect();
                let message = format!(
                    "bolt \"{}\" takes its event time from field \"{field}\", but stream \"{}\" of \"{}\" has: {}",
                    bolt.name,
                    decl.name,
                    components[input.from].name,
                    fields.join(", ")
                );
                self.error(input.loc, message, None);
            }
        }
    }

    fn bind_input(
        &mut self,
        components: &mut [Component],
        names: &HashMap<&str, usize>,
        to: usize,
        input: &InputDecl,
    ) {
        // Unknown sources were reported by config; a source whose component
        // failed to resolve has no entry and was reported too.
        let Some(&from) = names.get(input.from.as_str()) else { return };
        let source = &components[from];
        let Some(stream) = self.stream_index(source, input) else { return };
        let decl = &source.outputs[stream].decl;
        let target = components[to].name.clone();
        let Some(grouping) = self.grouping(&input.grouping, input, decl, target) else { return };
        self.check_input_fields(&components[to], input, decl);
        let tasks: Vec<u32> = components[to].tasks.clone().collect();
        components[from].outputs[stream].subscribers.push(Subscriber {
            component: to,
            grouping,
            tasks,
            pairwise: false,
        });
        components[to].inputs.push(Input {
            from,
            stream: stream as u32,
            grouping: components[from].outputs[stream]
                .subscribers
                .last()
                .map(|s| s.grouping.clone())
                .unwrap_or(Grouping::Shuffle),
            loc: input.from_loc,
            throttle: input.throttle.clone(),
        });
    }

    /// The index among `source`'s outputs of the stream `input` reads;
    /// `None` (reported, with the streams it does declare) when there is
    /// no such stream.
    fn stream_index(&mut self, source: &Component, input: &InputDecl) -> Option<usize> {
        let found = source.outputs.iter().position(|s| s.decl.name.as_str() == input.stream);
        if found.is_none() {
            let help = suggest(&input.stream, source.outputs.iter().map(|s| s.decl.name.as_str()))
                .map(|s| format!("did you mean \"{s}\"?"));
            let declared: Vec<&str> = source.outputs.iter().map(|s| s.decl.name.as_str()).collect();
            self.error(
                input.stream_loc,
                format!(
                    "component \"{}\" ({}) declares no stream \"{}\" (it declares: {})",
                    input.from,
                    source.reference,
                    input.stream,
                    if declared.is_empty() { "none".to_owned() } else { declared.join(", ") }
                ),
                help,
            );
        }
        found
    }

    /// The grouping `spec` an input of `target` subscribes with to stream
    /// `decl`, checked against it (direct or not, field names, a plugin's
    /// custom grouping and its config keys); `None` once reported.
    fn grouping(
        &mut self,
        spec: &GroupingSpec,
        input: &InputDecl,
        decl: &StreamDecl,
        target: String,
    ) -> Option<Grouping> {
        if !self.check_direct(matches!(spec, GroupingSpec::Direct), input, decl) {
            return None;
        }
        Some(match spec {
            GroupingSpec::Shuffle => Grouping::Shuffle,
            GroupingSpec::All => Grouping::All,
            GroupingSpec::Global => Grouping::Global,
            GroupingSpec::Direct => Grouping::Direct,
            GroupingSpec::LocalOrShuffle => Grouping::LocalOrShuffle,
            GroupingSpec::None => Grouping::None,
            GroupingSpec::Custom { component, config, config_keys } => {
                let new = self.custom_grouping(component, config_keys)?;
                Grouping::Custom(std::sync::Arc::new(CustomGrouping {
                    name: format!("{}::{}", component.alias, component.component),
                    new,
                    config: config.clone(),
                    source: input.from.clone(),
                    stream: input.stream.clone(),
                    fields: decl.fields.to_vec(),
                    target,
                    loc: component.loc,
                }))
            }
            GroupingSpec::Fields(fields) => {
                Grouping::Fields(self.field_indexes(fields, input, decl)?)
            }
        })
    }

    /// Reports a `direct` grouping on a stream that is not direct, or a
    /// direct stream subscribed otherwise; true when they agree.
    fn check_direct(&mut self, direct: bool, input: &InputDecl, decl: &StreamDecl) -> bool {
        if direct == decl.direct {
            return true;
        }
        let message = if direct {
            format!(
                "grouping \"direct\" needs a direct stream, but \"{}\" of \"{}\" is not direct",
                input.stream, input.from
            )
        } else {
            format!(
                "stream \"{}\" of \"{}\" is direct: subscribe with grouping = \"direct\"",
                input.stream, input.from
            )
        };
        self.error(input.grouping_loc, message, None);
        false
    }

    /// The constructor of the custom grouping `component` names, its
    /// `config_keys` checked against those it declares; `None` (reported)
    /// when the plugin exports no such grouping.
    fn custom_grouping(
        &mut self,
        component: &ComponentRef,
        config_keys: &[ConfigKeyLoc],
    ) -> Option<ExtConstructor> {
        let descriptor = self.descriptor(component, ComponentKind::GROUPING);
        let Some((descriptor, Factory::Ext(new))) = descriptor.map(|d| (d, d.factory)) else {
            let message = format!(
                "unknown grouping \"{}::{}\": plugin \"{}\" exports no custom grouping of that name",
                component.alias, component.component, component.alias
            );
            self.error(component.loc, message, None);
            return None;
        };
        self.check_config_keys(descriptor, component, component.loc, config_keys);
        Some(new)
    }

    /// The positions in `decl` of the `fields` a fields grouping names;
    /// `None` when one is not a field of the stream (each such reported).
    fn field_indexes(
        &mut self,
        fields: &[(String, Loc)],
        input: &InputDecl,
        decl: &StreamDecl,
    ) -> Option<Vec<usize>> {
        let mut indexes = Vec::new();
        for (field, loc) in fields {
            match decl.fields.iter().position(|f| f.as_str() == field) {
                Some(i) => indexes.push(i),
                None => {
                    let help = suggest(field, decl.fields.iter().map(|f| f.as_str()))
                        .map(|s| format!("did you mean \"{s}\"?"));
                    let declared: Vec<&str> = decl.fields.iter().map(|f| f.as_str()).collect();
                    self.error(
                        *loc,
                        format!(
                            "fields grouping on \"{field}\", but stream \"{}\" of \"{}\" has fields [{}]",
                            input.stream,
                            input.from,
                            declared.join(", ")
                        ),
                        help,
                    );
                }
            }
        }
        (indexes.len() == fields.len()).then_some(indexes)
    }
}

/// The fields of the stream `bolt`'s first input reads (those of its
/// `late` stream); none when it has no input or that stream is unknown.
fn first_input_fields(
    components: &[Component],
    names: &HashMap<&str, usize>,
    bolt: &BoltDecl,
) -> RVec<RString> {
    bolt.inputs
        .first()
        .and_then(|input| {
            let source = &components[*names.get(input.from.as_str())?];
            let stream = source.outputs.iter().find(|s| s.decl.name.as_str() == input.stream)?;
            Some(stream.decl.fields.clone())
        })
        .unwrap_or_default()
}

/// True when a value of TOML type `written` fits a declared key type.
/// A bound component, as its descriptor and its declaration make it;
/// what the topology wires later (inputs, window, ticks, limits) is unset.
fn component(
    decl: &ComponentDecl,
    kind: Kind,
    descriptor: &Descriptor,
    outputs: Vec<OutputStream>,
    tasks: std::ops::Range<u32>,
    wait: [WaitPlan; 3],
) -> Component {
    let default_stream =
        outputs.iter().position(|s| s.decl.name.as_str() == DEFAULT_STREAM).map(|i| i as u32);
    let reference = &decl.component;
    Component {
        name: decl.name.clone(),
        kind,
        reference: format!("{}::{}", reference.alias, reference.component),
        loc: decl.loc,
        factory: descriptor.factory,
        input_fields: descriptor.input_fields.clone(),
        config: decl.config.clone(),
        tasks,
        retired: Vec::new(),
        outputs,
        default_stream,
        auto_ack: descriptor.auto_ack,
        windowed: descriptor.windowed,
        ids_survive_swap: descriptor.ids_survive_swap,
        window: None,
        inputs: Vec::new(),
        tick_tuple_freq_secs: None,
        throttle: None,
        max_spout_pending: None,
        wait,
        outdated: false,
        close_budget: descriptor.close_budget,
        needs_ticks: descriptor.ticks,
        checkpoints: kind == Kind::Spout && descriptor.durable,
        chain_from: None,
    }
}

/// Marks the chained bolts (`config::chain`) and their pairwise inputs.
fn chain(config: &TopologyConfig, components: &mut [Component], names: &HashMap<&str, usize>) {
    for link in crate::config::chain::links(config) {
        let bolt = config.bolts[link.bolt].decl.name.as_str();
        let (Some(&to), Some(&from)) = (names.get(bolt), names.get(link.upstream.as_str())) else {
            continue;
        };
        if components[to].windowed || components[from].windowed {
            continue;
        }
        components[to].chain_from = Some(from);
        for stream in &mut components[from].outputs {
            for sub in stream.subscribers.iter_mut().filter(|s| s.component == to) {
                sub.pairwise = matches!(sub.grouping, Grouping::LocalOrShuffle);
            }
        }
    }
}

fn kind_fits(declared: &str, written: &str) -> bool {
    match declared {
        "any" => true,
        "duration" => written == "string",
        "float" => written == "float" || written == "integer",
        _ => declared == written,
    }
}

fn article(kind: &str) -> &'static str {
    if kind.starts_with(['a', 'e', 'i', 'o', 'u']) {
        "an"
    } else {
        "a"
    }
}
