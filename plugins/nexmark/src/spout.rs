//! [`NexmarkSpout`]: the Nexmark event generator as a spout.

use std::collections::VecDeque;

use serde::Deserialize;
use squall_plugin_api::prelude::*;

use crate::model::{Generator, GeneratorConfig, Kind};

/// The spout's `config` table.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SpoutConfig {
    #[serde(default)]
    events: Option<u64>,
    #[serde(default)]
    first_event_time_ms: u64,
    #[serde(default = "default_rate")]
    events_per_sec: u64,
    #[serde(default = "two")]
    hot_auction_ratio: u64,
    #[serde(default = "four")]
    hot_seller_ratio: u64,
    #[serde(default = "four")]
    hot_bidder_ratio: u64,
    #[serde(default = "default_active_people")]
    num_active_people: u64,
    #[serde(default = "default_in_flight")]
    num_in_flight_auctions: u64,
    #[serde(default = "default_categories")]
    num_categories: u64,
    #[serde(default = "default_batch")]
    batch: u32,
    #[serde(default)]
    reliable: bool,
}

fn default_rate() -> u64 {
    10_000
}
fn two() -> u64 {
    2
}
fn four() -> u64 {
    4
}
fn default_active_people() -> u64 {
    1000
}
fn default_in_flight() -> u64 {
    100
}
fn default_categories() -> u64 {
    5
}
fn default_batch() -> u32 {
    256
}

impl SpoutConfig {
    fn generator(&self) -> GeneratorConfig {
        GeneratorConfig {
            first_event_time_ms: self.first_event_time_ms,
            events_per_sec: self.events_per_sec,
            hot_auction_ratio: self.hot_auction_ratio,
            hot_seller_ratio: self.hot_seller_ratio,
            hot_bidder_ratio: self.hot_bidder_ratio,
            num_active_people: self.num_active_people,
            num_in_flight_auctions: self.num_in_flight_auctions,
            num_categories: self.num_categories,
        }
    }
}

/// The format of the spout's saved position.
const POSITION: &str = "nexmark-generator/1";

/// Generates Nexmark events ([`crate::model`]) on three streams, `person`
/// (`PERSON_FIELDS`), `auction` (`AUCTION_FIELDS`) and `bid`
/// (`BID_FIELDS`), in event-id order.
///
/// Task `i` of `n` generates the events `i, i + n, i + 2n, …` (below
/// `events`, when given): together the tasks generate each id once. Each
/// `next_tuple` generates up to `batch` events and hands each run of
/// events of one kind to the host in one `emit_many_to` call, so the
/// tuples of a task leave it in id order, and therefore in event-time
/// order.
///
/// With `reliable = true` every tuple carries its event id as message id; a
/// failed id is generated again and re-emitted (no event is kept in
/// memory: an id is its event). In a topology with `[state]` its
/// checkpoint position is the next id and the ids still to replay.
#[derive(Debug)]
pub struct NexmarkSpout {
    generator: Generator,
    events: Option<u64>,
    batch: u32,
    reliable: bool,
    /// The next new id of this task.
    next: u64,
    /// How many tasks split the ids.
    step: u64,
    /// Set when a checkpoint position was restored (the task's first id is
    /// then not its index).
    restored: Option<u64>,
    /// Stream ids of person, auction, bid.
    streams: [StreamId; 3],
    /// The run of one kind being gathered, its kind and message ids.
    values: Vec<Value>,
    ids: Vec<MessageId>,
    count: usize,
    kind: Kind,
    replay: VecDeque<u64>,
}

impl NexmarkSpout {
    /// Generates event `id` into the current run, handing the run over
    /// first when `id` is of another kind.
    #[inline]
    fn push(&mut self, id: u64, collector: &mut SpoutCollector<'_>) {
        let event = self.generator.event(id);
        let kind = event.kind();
        if kind != self.kind {
            self.flush(collector);
            self.kind = kind;
        }
        event.write_values(&mut self.values);
        if self.reliable {
            self.ids.push(MessageId(id));
        }
        self.count += 1;
    }

    fn flush(&mut self, collector: &mut SpoutCollector<'_>) {
        if self.count == 0 {
            return;
        }
        let stream = self.streams[self.kind as usize];
        collector.emit_many_to(stream, self.count, &self.values, &self.ids);
        self.values.clear();
        self.ids.clear();
        self.count = 0;
    }
}

impl Spout for NexmarkSpout {
    const NAME: &'static str = "Generator";
    const DESCRIPTION: &'static str =
        "generates Nexmark people, auctions and bids from their event ids (Beam's model)";
    const CONFIG_KEYS: Option<&'static [ConfigKey]> = Some(&[
        ConfigKey::maybe(
            "events",
            KeyKind::Integer,
            "events to generate over all tasks (ids 0..events); unbounded when absent",
        ),
        ConfigKey::optional(
            "first_event_time_ms",
            KeyKind::Integer,
            "0",
            "event time of event 0, ms since the epoch",
        ),
        ConfigKey::optional(
            "events_per_sec",
            KeyKind::Integer,
            "10000",
            "events per second of event time",
        ),
        ConfigKey::optional(
            "hot_auction_ratio",
            KeyKind::Integer,
            "2",
            "1 - 1/ratio of bids go to hot auctions",
        ),
        ConfigKey::optional(
            "hot_seller_ratio",
            KeyKind::Integer,
            "4",
            "1 - 1/ratio of auctions have a hot seller",
        ),
        ConfigKey::optional(
            "hot_bidder_ratio",
            KeyKind::Integer,
            "4",
            "1 - 1/ratio of bids come from hot bidders",
        ),
        ConfigKey::optional(
            "num_active_people",
            KeyKind::Integer,
            "1000",
            "random people are drawn from the last this many",
        ),
        ConfigKey::optional(
            "num_in_flight_auctions",
            KeyKind::Integer,
            "100",
            "random auctions are drawn from the last this many; sets auction lengths",
        ),
        ConfigKey::optional("num_categories", KeyKind::Integer, "5", "auction categories, from 10"),
        ConfigKey::optional(
            "batch",
            KeyKind::Integer,
            "256",
            "events per next_tuple call per task",
        ),
        ConfigKey::optional(
            "reliable",
            KeyKind::Bool,
            "false",
            "emit with message ids (the event id) and replay failed events",
        ),
    ]);
    const CHECKPOINTS: bool = true;
    const EMITS: &'static [&'static str] = &["person", "auction", "bid"];

    fn declare_outputs(outputs: &mut OutputDeclarer) {
        for kind in [Kind::Person, Kind::Auction, Kind::Bid] {
            outputs.declare_stream(kind.stream(), kind.fields());
        }
    }

    fn new(config: &ComponentConfig<'_>) -> Result<Self> {
        let config: SpoutConfig = config.parse()?;
        if config.batch == 0 {
            return Err("batch must be at least 1".into());
        }
        Ok(Self {
            generator: Generator::new(config.generator())?,
            events: config.events,
            batch: config.batch,
            reliable: config.reliable,
            next: 0,
            step: 1,
            restored: None,
            streams: [StreamId::DEFAULT; 3],
            values: Vec::with_capacity(config.batch as usize * 9),
            ids: Vec::new(),
            count: 0,
            kind: Kind::Bid,
            replay: VecDeque::new(),
        })
    }

    fn open(&mut self, context: &TaskContext) -> Result<()> {
        for (slot, kind) in self.streams.iter_mut().zip([Kind::Person, Kind::Auction, Kind::Bid]) {
            *slot =
                context.stream_id(kind.stream()).ok_or("the generator's streams are declared")?;
        }
        self.step = u64::from(context.parallelism.max(1));
        match self.restored {
            Some(step) if step != self.step => {
                return Err(format!(
                    "the checkpoint was taken with {step} generator tasks; this run has {}: \
                     the id split would change",
                    self.step
                )
                .into());
            }
            Some(_) => {}
            None => self.next = u64::from(context.task_index),
        }
        Ok(())
    }

    fn next_tuple(&mut self, collector: &mut SpoutCollector<'_>) -> Result<()> {
        let mut budget = self.batch;
        while budget > 0 {
            let Some(id) = self.replay.pop_front() else { break };
            self.push(id, collector);
            budget -= 1;
        }
        while budget > 0 {
            if self.events.is_some_and(|limit| self.next >= limit) {
                break;
            }
            let id = self.next;
            self.next += self.step;
            self.push(id, collector);
            budget -= 1;
        }
        self.flush(collector);
        Ok(())
    }

    fn fail(&mut self, message_id: MessageId) {
        // Any id below `next` of this task's split is one it generated.
        if message_id.0 < self.next && message_id.0 % self.step == self.next % self.step {
            self.replay.push_back(message_id.0);
        }
    }

    fn checkpoint(&mut self, _checkpoint: u64) -> Option<State> {
        let mut bytes = Vec::with_capacity(16 + 8 * self.replay.len());
        bytes.extend_from_slice(&self.next.to_le_bytes());
        bytes.extend_from_slice(&self.step.to_le_bytes());
        for id in &self.replay {
            bytes.extend_from_slice(&id.to_le_bytes());
        }
        let mut state = State::new(POSITION);
        state.push(&[], bytes);
        Some(state)
    }

    fn restore_checkpoint(&mut self, position: State) -> Result<()> {
        if position.is_no_checkpoint() {
            return Ok(());
        }
        if position.format.as_str() != POSITION || position.entries.len() != 1 {
            return Err(format!("unknown generator position `{}`", position.format).into());
        }
        let bytes = position.entries[0].bytes.as_slice();
        if bytes.len() < 16 || !bytes.len().is_multiple_of(8) {
            return Err("a generator position is 8-byte words".into());
        }
        let word = |i: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&bytes[8 * i..8 * i + 8]);
            u64::from_le_bytes(b)
        };
        self.next = word(0);
        self.restored = Some(word(1));
        self.replay = (2..bytes.len() / 8).map(word).collect();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Event;
    use squall_plugin_api::testing::{check_config_keys, Recorder};

    fn run_task(config: &str, index: u32, tasks: u32, calls: usize) -> Vec<(u32, Vec<Value>)> {
        let mut spout = NexmarkSpout::new(&ComponentConfig::new(config)).unwrap();
        let mut outputs = OutputDeclarer::default();
        NexmarkSpout::declare_outputs(&mut outputs);
        let context =
            TaskContext::builder("events").task(index + 1, index, tasks).outputs(outputs).build();
        spout.open(&context).unwrap();
        let mut recorder = Recorder::default();
        {
            let mut collector = SpoutCollector::from_ext(recorder.spout_output());
            for _ in 0..calls {
                spout.next_tuple(&mut collector).unwrap();
            }
        }
        assert_eq!(recorder.refused, 0);
        recorder.emitted.iter().map(|e| (e.stream, e.values.clone())).collect()
    }

    #[test]
    fn tasks_split_the_ids_and_generate_the_generators_events() {
        let generator = Generator::new(GeneratorConfig::default()).unwrap();
        let config = "events = 1000\nbatch = 64";
        let mut all: Vec<(u32, Vec<Value>)> = Vec::new();
        for task in 0..3 {
            let emitted = run_task(config, task, 3, 100);
            // Task `task` emits ids task, task + 3, ... in order.
            let expected: Vec<(u32, Vec<Value>)> = (u64::from(task)..1000)
                .step_by(3)
                .map(|id| {
                    let event = generator.event(id);
                    (event.kind() as u32, event.values())
                })
                .collect();
            assert_eq!(emitted, expected, "task {task}");
            all.extend(emitted);
        }
        assert_eq!(all.len(), 1000);
        let one = run_task(config, 0, 1, 100);
        let mut sorted_one = one.clone();
        let key = |t: &(u32, Vec<Value>)| (t.0, format!("{:?}", t.1));
        sorted_one.sort_by_key(key);
        all.sort_by_key(key);
        assert_eq!(all, sorted_one);
        assert!(matches!(generator.event(0), Event::Person(_)));
    }

    #[test]
    fn reliable_tuples_carry_their_event_ids_and_failed_ones_come_back() {
        let mut spout =
            NexmarkSpout::new(&ComponentConfig::new("events = 10\nreliable = true")).unwrap();
        let mut outputs = OutputDeclarer::default();
        NexmarkSpout::declare_outputs(&mut outputs);
        spout.open(&TaskContext::builder("events").outputs(outputs).build()).unwrap();
        let mut recorder = Recorder::default();
        {
            let mut collector = SpoutCollector::from_ext(recorder.spout_output());
            spout.next_tuple(&mut collector).unwrap();
            spout.fail(MessageId(4));
            spout.fail(MessageId(99)); // never emitted: ignored
            spout.next_tuple(&mut collector).unwrap();
        }
        let ids: Vec<u64> = recorder.emitted.iter().map(|e| e.message_id.unwrap().0).collect();
        assert_eq!(ids, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 4]);
        // Runs of one kind go out in one call each: person, auctions, bids, then the replay.
        assert_eq!(recorder.emit_many_calls, [1, 3, 6, 1]);
    }

    #[test]
    fn a_checkpoint_position_resumes_the_split() {
        let outputs = || {
            let mut outputs = OutputDeclarer::default();
            NexmarkSpout::declare_outputs(&mut outputs);
            outputs
        };
        let mut spout = NexmarkSpout::new(&ComponentConfig::new("batch = 5")).unwrap();
        let context = TaskContext::builder("events").task(2, 1, 2).outputs(outputs()).build();
        spout.open(&context).unwrap();
        let mut recorder = Recorder::default();
        {
            let mut collector = SpoutCollector::from_ext(recorder.spout_output());
            spout.next_tuple(&mut collector).unwrap();
        }
        spout.replay.push_back(3);
        let position = spout.checkpoint(1).unwrap();
        let mut again = NexmarkSpout::new(&ComponentConfig::new("batch = 5")).unwrap();
        again.restore_checkpoint(position.clone()).unwrap();
        again.open(&context).unwrap();
        assert_eq!((again.next, again.replay.iter().copied().collect::<Vec<_>>()), (11, vec![3]));
        let mut other = NexmarkSpout::new(&ComponentConfig::new("")).unwrap();
        other.restore_checkpoint(position).unwrap();
        let three = TaskContext::builder("events").task(2, 1, 3).outputs(outputs()).build();
        assert!(other.open(&three).is_err());
    }

    #[test]
    fn the_config_keys_match_the_config_struct() {
        check_config_keys::<SpoutConfig>(NexmarkSpout::CONFIG_KEYS, "events = 10").unwrap();
        assert!(NexmarkSpout::new(&ComponentConfig::new("events_per_sec = 0")).is_err());
        assert!(NexmarkSpout::new(&ComponentConfig::new("rate = 5")).is_err());
    }
}
