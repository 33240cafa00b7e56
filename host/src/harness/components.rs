//! The harness's own components, handed to the host in process like any
//! plugin's: [`Feeder`] replaces a fed spout, [`Capture`] records what every
//! component emits.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use squall_plugin_api::abi::{Catalogue, CatalogueBuilder, ComponentExt, PluginSource};
use squall_plugin_api::prelude::*;

use super::run::{lookup, Fed, Run};

/// The alias the harness's components are bound under.
pub(crate) const ALIAS: &str = "__harness";
/// The name of the capture bolt in a harness topology.
pub(crate) const CAPTURE: &str = "__capture";

/// One output stream of a fed spout, as the feeder must declare it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct StreamSpec {
    pub name: String,
    pub fields: Vec<String>,
    pub direct: bool,
}

/// [`Feeder`]'s `config`.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct FeederConfig {
    /// The harness run number.
    pub run: u64,
    /// The spout's name in the topology.
    pub spout: String,
    /// The spout's output streams, in declaration order.
    pub streams: Vec<StreamSpec>,
}

/// [`Capture`]'s `config`.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct CaptureConfig {
    /// The harness run number.
    pub run: u64,
}

fn find_run(id: u64) -> Result<Arc<Run>> {
    lookup(id).ok_or_else(|| format!("harness run {id} is not registered").into())
}

/// Stands in for a fed spout: declares its streams, emits the fed tuples
/// once each, reliably, with message id = the tuple's position in the feed,
/// and reports every ack and fail to the run. Never replays.
pub(crate) struct Feeder {
    run: Arc<Run>,
    spout: String,
    /// Stream positions by name.
    streams: Vec<String>,
    tuples: std::vec::IntoIter<Fed>,
    next_id: u64,
    /// Taken, so that once its tuples are out the executor blocks on its
    /// control queue (and answers a simulated-time sync at once) instead
    /// of napping; it is never woken: the feeder has nothing more to emit.
    _waker: Option<Waker>,
}

impl Spout for Feeder {
    const NAME: &'static str = "Feeder";
    const DESCRIPTION: &'static str = "squall-harness: emits fixed tuples once each, reliably";
    /// Its position (how many tuples it emitted) is in each checkpoint, so
    /// a durable topology under test does not warn that it keeps none.
    const CHECKPOINTS: bool = true;

    fn declare_outputs(_outputs: &mut OutputDeclarer) {}

    fn declare_outputs_for(
        config: &ComponentConfig<'_>,
        outputs: &mut OutputDeclarer,
    ) -> Result<()> {
        let config: FeederConfig = config.parse()?;
        for s in &config.streams {
            let fields: Vec<&str> = s.fields.iter().map(String::as_str).collect();
            if s.direct {
                outputs.declare_direct_stream(&s.name, &fields);
            } else {
                outputs.declare_stream(&s.name, &fields);
            }
        }
        Ok(())
    }

    fn new(config: &ComponentConfig<'_>) -> Result<Self> {
        let config: FeederConfig = config.parse()?;
        let run = find_run(config.run)?;
        let tuples = run.feed(&config.spout).into_iter();
        let streams = config.streams.into_iter().map(|s| s.name).collect();
        Ok(Feeder { run, spout: config.spout, streams, tuples, next_id: 0, _waker: None })
    }

    fn open(&mut self, context: &TaskContext) -> Result<()> {
        self._waker = context.waker();
        Ok(())
    }

    fn next_tuple(&mut self, collector: &mut SpoutCollector<'_>) -> Result<()> {
        let Some((stream, values)) = self.tuples.next() else { return Ok(()) };
        let id = MessageId(self.next_id);
        self.next_id += 1;
        let position = self
            .streams
            .iter()
            .position(|s| *s == stream)
            .ok_or_else(|| format!("fed stream {stream:?} is not declared"))?;
        collector.emit_to(StreamId(position as u32), &values, Some(id));
        self.run.sent();
        Ok(())
    }

    fn ack(&mut self, message_id: MessageId) {
        self.run.complete(&self.spout, message_id, true);
    }

    fn fail(&mut self, message_id: MessageId) {
        self.run.complete(&self.spout, message_id, false);
    }

    fn checkpoint(&mut self, _checkpoint: u64) -> Option<State> {
        let mut position = State::new("squall-feeder/1");
        position.entries.push(squall_plugin_api::StateEntry {
            key: vec![Value::U64(self.next_id)].into(),
            bytes: Default::default(),
        });
        Some(position)
    }

    /// A test feeds every tuple it lists, also on a backend that holds an
    /// earlier run's position (`state = "topology"`).
    fn restore_checkpoint(&mut self, _position: State) -> Result<()> {
        Ok(())
    }
}

/// Subscribed to every non-direct stream of the topology: records each
/// tuple under its source component and stream, and is acked for it.
pub(crate) struct Capture {
    run: Arc<Run>,
}

impl BasicBolt for Capture {
    const NAME: &'static str = "Capture";
    const DESCRIPTION: &'static str = "squall-harness: records every tuple it receives";

    fn new(config: &ComponentConfig<'_>) -> Result<Self> {
        let config: CaptureConfig = config.parse()?;
        Ok(Capture { run: find_run(config.run)? })
    }

    fn execute(&mut self, input: &Tuple<'_>, _collector: &mut BasicCollector<'_>) -> Result<()> {
        if !input.is_tick() {
            self.run.capture(input.source_component(), input.source_stream(), input.to_values());
        }
        Ok(())
    }
}

/// The harness's components as a plugin linked in process.
pub(crate) struct HarnessPlugin;

impl HarnessPlugin {
    fn builder() -> CatalogueBuilder {
        let mut builder = CatalogueBuilder::new("squall-harness", env!("CARGO_PKG_VERSION"));
        builder.spout::<Feeder>();
        builder.basic_bolt::<Capture>();
        builder
    }
}

impl PluginSource for HarnessPlugin {
    fn catalogue() -> Catalogue {
        Self::builder().build()
    }

    fn extensions() -> abi_stable_rvec::RVec<ComponentExt> {
        Self::builder().build_extensions()
    }

    /// The 1.2 descriptors: the feeder keeps a checkpoint position.
    fn extensions_1_2() -> abi_stable_rvec::RVec<squall_plugin_api::abi::ComponentExt12> {
        Self::builder().build_extensions_12()
    }
}

/// `RVec` as the plugin API re-exports it for `export_plugin!`.
mod abi_stable_rvec {
    pub(crate) use squall_plugin_api::__private::RVec;
}
