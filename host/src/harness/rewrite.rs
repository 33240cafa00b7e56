//! The topology a harness runs: the one written, with each fed spout
//! replaced by a [`Feed`]'s feeder, an [`Injector`] added for each bolt
//! that tuples are injected into, and a capture bolt subscribed to every
//! non-direct stream.
//!
//! The requests are resolved against the topology as written in one pass
//! ([`Plan::resolve`]), which checks each of them; the config is then
//! rewritten from the plan.

use std::collections::HashMap;
use std::path::PathBuf;

use squall_plugin_api::{Value, DEFAULT_STREAM};

use super::components::{CaptureConfig, FeederConfig, StreamSpec, ALIAS, CAPTURE};
use super::run::{Fed, Registered};
use super::{injector, FedTuple, Harness, HarnessError, Request, Target};
use crate::config::{
    BoltDecl, ComponentDecl, ComponentRef, GroupingSpec, InputDecl, Loc, PluginDecl, SpoutDecl,
    TopologyConfig, WaitOverrides,
};
use crate::plugin::IN_PROCESS_PATH;
use crate::topology::Topology;

/// What the rewrite adds to a run's result.
#[derive(Debug, Default)]
pub(super) struct Shape {
    /// The field names of every captured `(component, stream)`.
    pub fields: HashMap<(String, String), Vec<String>>,
    /// Per bolt: the `(component, stream)` pairs it subscribes to.
    pub inputs: HashMap<String, Vec<(String, String)>>,
}

/// A spout replaced by a feeder, and the tuples the feeder emits.
#[derive(Debug)]
struct Feed {
    spout: String,
    tuples: Vec<Fed>,
}

/// The feeder [`Harness::inject`] adds for one bolt: a stream for each
/// input it stands for, the bolt's inputs from it (with those inputs'
/// groupings), and its tuples. Its name is [`injector`]`(bolt)`.
#[derive(Debug)]
struct Injector {
    bolt: String,
    streams: Vec<StreamSpec>,
    inputs: Vec<InputDecl>,
    tuples: Vec<Fed>,
}

/// One stream the capture bolt subscribes to.
#[derive(Debug)]
struct Captured {
    component: String,
    stream: String,
    fields: Vec<String>,
}

/// The requests, resolved against the topology as written.
#[derive(Debug, Default)]
struct Plan {
    feeds: Vec<Feed>,
    injectors: Vec<Injector>,
}

impl Harness {
    /// The topology to run: fed spouts replaced by feeders, the injectors
    /// and the capture bolt added, and the harness plugin declared. Hands
    /// each feeder's tuples to the run.
    ///
    /// # Errors
    /// A request that does not fit the topology ([`HarnessError::Usage`]).
    pub(super) fn rewrite(
        &self,
        mut config: TopologyConfig,
        written: &Topology,
        registered: &Registered,
    ) -> Result<(TopologyConfig, Shape), HarnessError> {
        let plan = Plan::resolve(&self.requests, self.silence, &config, written)?;
        let run = registered.id;
        let mut captured = captured(written);
        for feed in plan.feeds {
            replace_spout(&mut config, written, run, &feed.spout);
            registered.run.set_feed(&feed.spout, feed.tuples);
        }
        for added in plan.injectors {
            let name = injector(&added.bolt);
            captured.extend(added.streams.iter().map(|s| Captured {
                component: name.clone(),
                stream: s.name.clone(),
                fields: s.fields.clone(),
            }));
            registered.run.set_feed(&name, added.add_to(&mut config, run));
        }
        let inputs = inputs_by_bolt(&config);
        add_capture(&mut config, run, &captured);
        let fields = captured.into_iter().map(|c| ((c.component, c.stream), c.fields)).collect();
        config.plugins.push(PluginDecl {
            alias: ALIAS.to_owned(),
            path: PathBuf::from(IN_PROCESS_PATH),
            sha256: None,
            allow_writable: false,
            loc: Loc::START,
        });
        Ok((config, Shape { fields, inputs }))
    }
}

impl Plan {
    /// Checks and resolves every request, in order; with `silence`, every
    /// spout no request feeds gets a feeder of no tuples.
    fn resolve(
        requests: &[Request],
        silence: bool,
        config: &TopologyConfig,
        written: &Topology,
    ) -> Result<Self, HarnessError> {
        let mut plan = Plan::default();
        for request in requests {
            match &request.target {
                Target::Spout(spout) => plan.feed(config, written, spout, request)?,
                Target::Bolt { bolt, from } => {
                    plan.inject(config, written, bolt, from.as_deref(), request)?;
                }
            }
        }
        if silence {
            for spout in &config.spouts {
                if !plan.feeds.iter().any(|f| f.spout == spout.decl.name) {
                    plan.feeds.push(Feed { spout: spout.decl.name.clone(), tuples: Vec::new() });
                }
            }
        }
        Ok(plan)
    }

    /// A request to feed `spout`: its tuples join the spout's feed.
    fn feed(
        &mut self,
        config: &TopologyConfig,
        written: &Topology,
        spout: &str,
        request: &Request,
    ) -> Result<(), HarnessError> {
        let stream = request.stream.as_deref().unwrap_or(DEFAULT_STREAM);
        let fields = spout_stream(config, written, spout, stream)?;
        let tuples = fed(&request.tuples, spout, stream, &fields)?;
        match self.feeds.iter_mut().find(|f| f.spout == spout) {
            Some(feed) => feed.tuples.extend(tuples),
            None => self.feeds.push(Feed { spout: spout.to_owned(), tuples }),
        }
        Ok(())
    }

    /// A request to inject into `bolt`: its tuples join the bolt's
    /// injector, which declares the input's stream once.
    fn inject(
        &mut self,
        config: &TopologyConfig,
        written: &Topology,
        bolt: &str,
        from: Option<&str>,
        request: &Request,
    ) -> Result<(), HarnessError> {
        let (input, fields) = bolt_input(config, written, bolt, from, request.stream.as_deref())?;
        let tuples = fed(&request.tuples, &injector(bolt), &input.stream, &fields)?;
        let at = match self.injectors.iter().position(|i| i.bolt == bolt) {
            Some(at) => at,
            None => {
                let bolt = bolt.to_owned();
                let (streams, inputs, tuples) = (Vec::new(), Vec::new(), Vec::new());
                self.injectors.push(Injector { bolt, streams, inputs, tuples });
                self.injectors.len() - 1
            }
        };
        let added = &mut self.injectors[at];
        if !added.streams.iter().any(|s| s.name == input.stream) {
            let name = input.stream.clone();
            added.streams.push(StreamSpec { name, fields, direct: false });
            added.inputs.push(InputDecl { from: injector(bolt), ..input });
        }
        added.tuples.extend(tuples);
        Ok(())
    }
}

impl Injector {
    /// Adds the injector's spout to `config` and its inputs to its bolt's;
    /// returns its tuples.
    fn add_to(self, config: &mut TopologyConfig, run: u64) -> Vec<Fed> {
        let name = injector(&self.bolt);
        let feeder = FeederConfig { run, spout: name.clone(), streams: self.streams };
        config.spouts.push(SpoutDecl {
            decl: harness_decl(name, "Feeder", to_toml(&feeder)),
            throttle: None,
            max_spout_pending: None,
        });
        let target =
            config.bolts.iter_mut().find(|b| b.decl.name == self.bolt).expect("checked by inject");
        target.inputs.extend(self.inputs);
        self.tuples
    }
}

/// `tuples` as the feeder of `feeder` emits them on `stream`: values in
/// the order of `fields`.
fn fed(
    tuples: &[FedTuple],
    feeder: &str,
    stream: &str,
    fields: &[String],
) -> Result<Vec<Fed>, HarnessError> {
    let what = format!("{feeder:?} stream {stream:?}");
    let ordered = tuples.iter().enumerate().map(|(i, t)| ordered(t, fields, i, &what));
    ordered.map(|values| Ok((stream.to_owned(), values?))).collect()
}

/// Per bolt: the `(component, stream)` pairs it subscribes to.
fn inputs_by_bolt(config: &TopologyConfig) -> HashMap<String, Vec<(String, String)>> {
    let inputs =
        |b: &BoltDecl| b.inputs.iter().map(|i| (i.from.clone(), i.stream.clone())).collect();
    config.bolts.iter().map(|b| (b.decl.name.clone(), inputs(b))).collect()
}

/// Replaces spout `spout` of `config` by a feeder that declares the same
/// streams (one task).
fn replace_spout(config: &mut TopologyConfig, written: &Topology, run: u64, spout: &str) {
    let component = written.components.iter().find(|c| c.name == spout).expect("checked by feed");
    let streams = component
        .outputs
        .iter()
        .map(|o| StreamSpec {
            name: o.decl.name.to_string(),
            fields: o.decl.fields.iter().map(ToString::to_string).collect(),
            direct: o.decl.direct,
        })
        .collect();
    let feeder = FeederConfig { run, spout: spout.to_owned(), streams };
    let decl =
        &mut config.spouts.iter_mut().find(|s| s.decl.name == spout).expect("checked by feed").decl;
    decl.component = reference("Feeder", decl.component.loc);
    decl.parallelism = 1;
    decl.config = to_toml(&feeder);
    decl.config_keys.clear();
}

/// Every non-direct stream of the topology as written.
fn captured(written: &Topology) -> Vec<Captured> {
    written
        .components
        .iter()
        .flat_map(|c| c.outputs.iter().filter(|o| !o.decl.direct).map(move |o| (c, o)))
        .map(|(c, o)| Captured {
            component: c.name.clone(),
            stream: o.decl.name.to_string(),
            fields: o.decl.fields.iter().map(ToString::to_string).collect(),
        })
        .collect()
}

/// Adds the capture bolt, subscribed to every stream of `captured` (none
/// when there is nothing to capture).
fn add_capture(config: &mut TopologyConfig, run: u64, captured: &[Captured]) {
    if captured.is_empty() {
        return;
    }
    let inputs = captured
        .iter()
        .map(|c| InputDecl {
            from: c.component.clone(),
            from_loc: Loc::START,
            stream: c.stream.clone(),
            stream_loc: Loc::START,
            grouping: GroupingSpec::Shuffle,
            grouping_loc: Loc::START,
            throttle: None,
            loc: Loc::START,
        })
        .collect();
    config.bolts.push(BoltDecl {
        decl: harness_decl(CAPTURE.to_owned(), "Capture", to_toml(&CaptureConfig { run })),
        inputs,
        tick_tuple_freq_secs: None,
        window: None,
    });
}

/// The declaration of one of the harness's own components, `name`, of
/// component `component` (one task).
fn harness_decl(name: String, component: &str, config: String) -> ComponentDecl {
    ComponentDecl {
        name,
        loc: Loc::START,
        component: reference(component, Loc::START),
        parallelism: 1,
        config,
        config_keys: Vec::new(),
        wait: WaitOverrides::default(),
        chain: true,
    }
}

/// The fields of `spout`'s stream `stream`, which a feeder can emit on.
fn spout_stream(
    config: &TopologyConfig,
    written: &Topology,
    spout: &str,
    stream: &str,
) -> Result<Vec<String>, HarnessError> {
    let is_spout = config.spouts.iter().any(|s| s.decl.name == spout);
    let Some(component) = written.components.iter().find(|c| c.name == spout && is_spout) else {
        let spouts: Vec<&str> = config.spouts.iter().map(|s| s.decl.name.as_str()).collect();
        return Err(HarnessError::Usage(format!(
            "feed: the topology has no spout {spout:?} (its spouts: {})",
            spouts.join(", ")
        )));
    };
    let Some(out) = component.outputs.iter().find(|o| o.decl.name.as_str() == stream) else {
        let streams: Vec<&str> = component.outputs.iter().map(|o| o.decl.name.as_str()).collect();
        return Err(HarnessError::Usage(format!(
            "feed: spout {spout:?} declares no stream {stream:?} (it declares: {})",
            streams.join(", ")
        )));
    };
    if out.decl.direct {
        return Err(HarnessError::Usage(format!(
            "feed: stream {stream:?} of spout {spout:?} is direct; the harness feeds only non-direct streams"
        )));
    }
    Ok(out.decl.fields.iter().map(ToString::to_string).collect())
}

/// The input of `bolt` that an injection stands for (from `from` on
/// `stream`, or its first input), and the fields of that stream.
fn bolt_input(
    config: &TopologyConfig,
    written: &Topology,
    bolt: &str,
    from: Option<&str>,
    stream: Option<&str>,
) -> Result<(InputDecl, Vec<String>), HarnessError> {
    let Some(decl) = config.bolts.iter().find(|b| b.decl.name == bolt) else {
        let bolts: Vec<&str> = config.bolts.iter().map(|b| b.decl.name.as_str()).collect();
        return Err(HarnessError::Usage(format!(
            "inject: the topology has no bolt {bolt:?} (its bolts: {})",
            bolts.join(", ")
        )));
    };
    let input = decl
        .inputs
        .iter()
        .find(|i| from.is_none_or(|f| i.from == f) && stream.is_none_or(|s| i.stream == s));
    let Some(input) = input else {
        let inputs: Vec<String> =
            decl.inputs.iter().map(|i| format!("{:?} stream {:?}", i.from, i.stream)).collect();
        return Err(HarnessError::Usage(format!(
            "inject: bolt {bolt:?} has no input{}{} (its inputs: {})",
            from.map(|f| format!(" from {f:?}")).unwrap_or_default(),
            stream.map(|s| format!(" on stream {s:?}")).unwrap_or_default(),
            if inputs.is_empty() { "none".to_owned() } else { inputs.join(", ") }
        )));
    };
    if matches!(input.grouping, GroupingSpec::Direct) {
        return Err(HarnessError::Usage(format!(
            "inject: the input of bolt {bolt:?} from {:?} is direct; the harness feeds only non-direct streams",
            input.from
        )));
    }
    let fields = written
        .components
        .iter()
        .find(|c| c.name == input.from)
        .and_then(|c| c.outputs.iter().find(|o| o.decl.name.as_str() == input.stream))
        .map(|o| o.decl.fields.iter().map(ToString::to_string).collect())
        .unwrap_or_default();
    Ok((input.clone(), fields))
}

/// `tuple`'s values in the order of `fields`.
fn ordered(
    tuple: &FedTuple,
    fields: &[String],
    i: usize,
    what: &str,
) -> Result<Vec<Value>, HarnessError> {
    match tuple {
        FedTuple::Values(values) if values.len() == fields.len() => Ok(values.clone()),
        FedTuple::Values(values) => Err(HarnessError::Usage(format!(
            "feed: tuple {i} for {what} has {} value(s); the stream declares {} field(s) ({})",
            values.len(),
            fields.len(),
            fields.join(", ")
        ))),
        FedTuple::Named(named) => {
            if let Some((name, _)) = named.iter().find(|(n, _)| !fields.contains(n)) {
                return Err(HarnessError::Usage(format!(
                    "feed: tuple {i} for {what} names field {name:?}, which the stream does not declare (its fields: {})",
                    fields.join(", ")
                )));
            }
            fields
                .iter()
                .map(|f| {
                    named.iter().find(|(n, _)| n == f).map(|(_, v)| v.clone()).ok_or_else(|| {
                        HarnessError::Usage(format!(
                            "feed: tuple {i} for {what} has no value for field {f:?}"
                        ))
                    })
                })
                .collect()
        }
    }
}

/// `__harness::component`, at `loc`.
fn reference(component: &str, loc: Loc) -> ComponentRef {
    ComponentRef { alias: ALIAS.to_owned(), component: component.to_owned(), loc }
}

/// A harness component's config as TOML text.
fn to_toml<T: serde::Serialize>(value: &T) -> String {
    // Plain structs of strings, numbers and lists always serialize.
    toml::to_string(value).expect("harness configs serialize to TOML")
}
