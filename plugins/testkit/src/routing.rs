//! Stream routing: [`DirectSpout`] (direct grouping) and
//! [`MultiStreamSpout`] (named streams, no default stream).

use serde::Deserialize;
use squall_plugin_api::prelude::*;

/// The direct stream [`DirectSpout`] declares.
const DIRECT_STREAM: &str = "direct";

/// [`DirectSpout`]'s config.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
struct DirectConfig {
    target: String,
    #[serde(default = "default_limit")]
    limit: u64,
}

fn default_limit() -> u64 {
    1000
}

/// Declares only the direct stream `"direct"` (`["value"]`) and sends
/// `limit` (u64, 1000) unreliable tuples with `emit_direct`, round-robin over
/// the tasks of component `target` (string, required). Each tuple's value is
/// the id of the task it is sent to (`U64`), so a [`RecordBolt`](crate::RecordBolt)
/// downstream can check that it only received its own id.
///
/// `open` fails when `target` does not subscribe to this spout.
#[derive(Debug)]
pub struct DirectSpout {
    target: String,
    limit: u64,
    emitted: u64,
    stream: StreamId,
    tasks: Vec<u32>,
}

impl Spout for DirectSpout {
    const NAME: &'static str = "DirectSpout";
    const CONFIG_KEYS: Option<&'static [ConfigKey]> = Some(&[
        ConfigKey::required("target", KeyKind::String, "the component whose tasks are sent to"),
        ConfigKey::optional("limit", KeyKind::Integer, "1000", "tuples sent in all"),
    ]);
    const DESCRIPTION: &'static str =
        "emit_direct round-robin over the tasks of `target`; value = target task id";

    fn declare_outputs(outputs: &mut OutputDeclarer) {
        outputs.declare_direct_stream(DIRECT_STREAM, &["value"]);
    }

    fn new(config: &ComponentConfig<'_>) -> Result<Self> {
        let config: DirectConfig = config.parse()?;
        if config.target.is_empty() {
            return Err("target must not be empty".into());
        }
        Ok(Self {
            target: config.target,
            limit: config.limit,
            emitted: 0,
            stream: StreamId::DEFAULT,
            tasks: Vec::new(),
        })
    }

    fn open(&mut self, context: &TaskContext) -> Result<()> {
        self.stream = context
            .stream_id(DIRECT_STREAM)
            .ok_or_else(|| format!("the host did not declare stream \"{DIRECT_STREAM}\""))?;
        self.tasks = context.tasks_of(&self.target).to_vec();
        if self.tasks.is_empty() {
            return Err(format!(
                "target component \"{}\" does not subscribe to \"{}\"",
                self.target, context.component
            )
            .into());
        }
        Ok(())
    }

    fn next_tuple(&mut self, collector: &mut SpoutCollector<'_>) -> Result<()> {
        if self.emitted >= self.limit {
            return Ok(());
        }
        if self.tasks.is_empty() {
            return Err("next_tuple before open: no target tasks".into());
        }
        let task = self.tasks[(self.emitted % self.tasks.len() as u64) as usize];
        collector.emit_direct(task, self.stream, &[Value::U64(u64::from(task))], None);
        self.emitted += 1;
        Ok(())
    }
}

/// [`MultiStreamSpout`]'s config.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
struct MultiStreamConfig {
    #[serde(default = "default_limit")]
    limit: u64,
}

/// Declares streams `"even"` and `"odd"` (each `["value"]`, no default
/// stream) and emits the counter 0, 1, ... (`U64`, unreliable) on the one
/// matching its parity, `limit` (u64, 1000) tuples in all.
#[derive(Debug)]
pub struct MultiStreamSpout {
    limit: u64,
    emitted: u64,
    /// `[even, odd]`, looked up at `open`.
    streams: [StreamId; 2],
}

impl Spout for MultiStreamSpout {
    const NAME: &'static str = "MultiStreamSpout";
    const CONFIG_KEYS: Option<&'static [ConfigKey]> =
        Some(&[ConfigKey::optional("limit", KeyKind::Integer, "1000", "tuples emitted in all")]);
    const DESCRIPTION: &'static str = "emits a counter on stream \"even\" or \"odd\" by parity";

    fn declare_outputs(outputs: &mut OutputDeclarer) {
        outputs.declare_stream("even", &["value"]).declare_stream("odd", &["value"]);
    }

    fn new(config: &ComponentConfig<'_>) -> Result<Self> {
        let config: MultiStreamConfig = config.parse()?;
        Ok(Self { limit: config.limit, emitted: 0, streams: [StreamId::DEFAULT; 2] })
    }

    fn open(&mut self, context: &TaskContext) -> Result<()> {
        for (slot, name) in self.streams.iter_mut().zip(["even", "odd"]) {
            *slot = context
                .stream_id(name)
                .ok_or_else(|| format!("the host did not declare stream \"{name}\""))?;
        }
        Ok(())
    }

    fn next_tuple(&mut self, collector: &mut SpoutCollector<'_>) -> Result<()> {
        if self.emitted < self.limit {
            let stream = self.streams[(self.emitted % 2) as usize];
            collector.emit_to(stream, &[Value::U64(self.emitted)], None);
            self.emitted += 1;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn declared_config_keys_match_the_config_structs() {
        use squall_plugin_api::testing::check_config_keys;
        check_config_keys::<DirectConfig>(DirectSpout::CONFIG_KEYS, "target = \"t\"").unwrap();
        check_config_keys::<MultiStreamConfig>(MultiStreamSpout::CONFIG_KEYS, "").unwrap();
    }
    use crate::test_support::context;
    use squall_plugin_api::testing::Recorder;

    #[test]
    fn direct_spout_round_robins_over_the_target_tasks_with_their_ids() {
        let mut spout =
            DirectSpout::new(&ComponentConfig::new("target = \"sink\"\nlimit = 5")).unwrap();
        let ctx =
            context("direct", 1, 0, &[("direct", true)], &[("other", &[9]), ("sink", &[4, 6])]);
        spout.open(&ctx).unwrap();
        let mut recorder = Recorder::default();
        for _ in 0..7 {
            spout.next_tuple(&mut SpoutCollector::new(recorder.output())).unwrap();
        }
        let sent: Vec<_> = recorder
            .emitted
            .iter()
            .map(|e| (e.stream, e.direct_task, e.values[0].as_u64()))
            .collect();
        let expected: Vec<_> =
            [4, 6, 4, 6, 4].iter().map(|&t| (0, Some(t), Some(u64::from(t)))).collect();
        assert_eq!(sent, expected);
    }

    #[test]
    fn direct_spout_refuses_a_target_that_does_not_subscribe() {
        let mut spout = DirectSpout::new(&ComponentConfig::new("target = \"sink\"")).unwrap();
        let err =
            spout.open(&context("direct", 1, 0, &[("direct", true)], &[])).unwrap_err().to_string();
        assert_eq!(err, "target component \"sink\" does not subscribe to \"direct\"");
        let err = DirectSpout::new(&ComponentConfig::new("")).unwrap_err().to_string();
        assert!(err.contains("missing field `target`"), "{err}");
    }

    #[test]
    fn multi_stream_spout_splits_by_parity() {
        let mut spout = MultiStreamSpout::new(&ComponentConfig::new("limit = 5")).unwrap();
        spout.open(&context("multi", 1, 0, &[("even", false), ("odd", false)], &[])).unwrap();
        let mut recorder = Recorder::default();
        for _ in 0..6 {
            spout.next_tuple(&mut SpoutCollector::new(recorder.output())).unwrap();
        }
        let sent: Vec<_> =
            recorder.emitted.iter().map(|e| (e.stream, e.values[0].as_u64().unwrap())).collect();
        assert_eq!(sent, [(0, 0), (1, 1), (0, 2), (1, 3), (0, 4)]);
        assert!(recorder.emitted.iter().all(|e| e.message_id.is_none() && e.direct_task.is_none()));
    }
}
