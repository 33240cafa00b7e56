//! [`RandomSentenceSpout`]: Storm's sentence spout, reliable by default.

use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};

use serde::Deserialize;
use squall_plugin_api::prelude::*;
use squall_plugin_api::SmallStr;

use squall_plugin_api::rng::SplitMix64;

/// In which order the spout picks its sentences.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Order {
    /// Uniformly at random, from a generator seeded with `seed`.
    #[default]
    Random,
    /// In the configured order, round-robin: deterministic.
    Cycle,
}

squall_plugin_api::declare_config! {
    /// The spout's `config` table (every key is optional).
    #[derive(Debug, Clone, PartialEq)]
    struct RandomSentenceConfig {
        seed: u64 = default(Integer, "42", "seeds the generator of order = \"random\""),
        #[serde(default = "default_sentences")]
        sentences: Vec<String> = maybe(Array, "the sentences to emit (Storm's five by default)"),
        order: Order = default(String, "\"random\"", "\"random\" or \"cycle\""),
        limit: Option<u64> = maybe(Integer, "emit at most this many new messages per task"),
        reliable: bool = default(Bool, "true", "emit with message ids and replay failed ones"),
    }
}

/// The sentences of Storm's `RandomSentenceSpout`.
fn default_sentences() -> Vec<String> {
    [
        "the cow jumped over the moon",
        "an apple a day keeps the doctor away",
        "four score and seven years ago",
        "snow white and the seven dwarfs",
        "i am at two with nature",
    ]
    .map(String::from)
    .to_vec()
}

/// Hashes message ids with one multiply (Fibonacci hashing). The spout issues
/// ids sequentially, so this spreads them perfectly over the table's buckets
/// and costs far less than SipHash on every emit and ack.
#[derive(Debug, Default)]
struct MessageIdHasher(u64);

impl Hasher for MessageIdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.write_u64(self.0.rotate_left(8) ^ u64::from(byte));
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

/// Message id → index of its sentence, for the messages not yet acked.
type Pending = HashMap<u64, usize, BuildHasherDefault<MessageIdHasher>>;

/// Emits one sentence per `next_tuple` on the default stream `["sentence"]`.
///
/// Config keys: `seed` (u64, 42), `sentences` (strings, Storm's five),
/// `order` (`"random"` | `"cycle"`), `limit` (new messages per task, none by
/// default) and `reliable` (true).
///
/// When reliable, every sentence is emitted with a message id (0, 1, 2, ...)
/// and remembered until it is acked; a failed one is replayed, with the same
/// id, before any new sentence. Each task emits its own `limit`; with
/// `order = "random"`, task index 0 draws from `seed` and the other tasks from
/// streams derived from it, so parallel tasks do not repeat each other.
#[derive(Debug)]
pub struct RandomSentenceSpout {
    /// One precomputed value per sentence, emitted by reference: an emit
    /// copies it into the host's batch, which for an inline string
    /// ([`SmallStr`]) is a memcpy and for a shared one a reference-count
    /// increment. Nothing is allocated per emit.
    sentences: Vec<Value>,
    order: Order,
    seed: u64,
    rng: SplitMix64,
    /// The next index for `order = "cycle"`.
    next_in_cycle: usize,
    limit: Option<u64>,
    /// New messages emitted so far; also the next message id.
    emitted: u64,
    reliable: bool,
    pending: Pending,
    /// Failed message ids, replayed first, oldest first.
    replay: VecDeque<u64>,
    /// Set by `restore_state`: `open` keeps the generator it restored.
    restored: bool,
    /// The new sentences of one `next_batch` call, back to back, and their
    /// message ids when reliable (kept to reuse their capacity).
    batch: Vec<Value>,
    ids: Vec<MessageId>,
}

/// The format of [`RandomSentenceSpout`]'s saved state: one entry whose
/// bytes are little-endian u64s: emitted, next in cycle, the generator's
/// position, the pending count, then (id, sentence index) per pending
/// message, then the replay count and the replay ids in order.
const STATE_FORMAT: &str = "examples.RandomSentenceSpout/1";

impl RandomSentenceSpout {
    /// The value to emit for `sentence`: inline when short, shared otherwise.
    fn sentence_value(sentence: &str) -> Value {
        if sentence.len() <= SmallStr::CAPACITY {
            Value::str(sentence)
        } else {
            Value::shared_str(sentence)
        }
    }

    /// The index of the next new sentence.
    fn pick(&mut self) -> usize {
        match self.order {
            Order::Random => self.rng.below(self.sentences.len() as u64) as usize,
            Order::Cycle => {
                let index = self.next_in_cycle;
                self.next_in_cycle = (index + 1) % self.sentences.len();
                index
            }
        }
    }

    /// Replays the oldest failed message that is still pending; false when there is none.
    fn replay_one(&mut self, collector: &mut SpoutCollector<'_>) -> bool {
        while let Some(id) = self.replay.pop_front() {
            if let Some(&index) = self.pending.get(&id) {
                collector.emit_with_id(std::slice::from_ref(&self.sentences[index]), id);
                return true;
            }
        }
        false
    }
}

impl Spout for RandomSentenceSpout {
    const NAME: &'static str = "RandomSentenceSpout";
    const CHECKPOINTS: bool = true;
    const CONFIG_KEYS: Option<&'static [ConfigKey]> = Some(RandomSentenceConfig::KEYS);
    const DESCRIPTION: &'static str =
        "emits sentences picked at random or in order; replays failed ones";

    fn declare_outputs(outputs: &mut OutputDeclarer) {
        outputs.declare(&["sentence"]);
    }

    fn new(config: &ComponentConfig<'_>) -> Result<Self> {
        let config = RandomSentenceConfig::parse(config)?;
        if config.sentences.is_empty() {
            return Err("sentences must not be empty".into());
        }
        Ok(Self {
            sentences: config.sentences.iter().map(|s| Self::sentence_value(s)).collect(),
            order: config.order,
            seed: config.seed,
            rng: SplitMix64::new(config.seed),
            next_in_cycle: 0,
            limit: config.limit,
            emitted: 0,
            reliable: config.reliable,
            pending: Pending::default(),
            replay: VecDeque::new(),
            restored: false,
            batch: Vec::new(),
            ids: Vec::new(),
        })
    }

    fn open(&mut self, context: &TaskContext) -> Result<()> {
        if !self.restored {
            self.rng = SplitMix64::for_stream(self.seed, u64::from(context.task_index));
        }
        Ok(())
    }

    /// Where the spout is: a live swap's new instance goes on from here
    /// (the next id, the next sentence, and the messages still to replay),
    /// so no id is emitted twice.
    fn save_state(&mut self) -> Option<State> {
        let mut words = vec![
            self.emitted,
            self.next_in_cycle as u64,
            self.rng.position(),
            self.pending.len() as u64,
        ];
        let mut pending: Vec<(u64, usize)> = self.pending.iter().map(|(&i, &s)| (i, s)).collect();
        pending.sort_unstable();
        for (id, index) in pending {
            words.extend([id, index as u64]);
        }
        words.push(self.replay.len() as u64);
        words.extend(self.replay.iter().copied());
        let mut state = State::new(STATE_FORMAT);
        state.push(&[], words.iter().flat_map(|w| w.to_le_bytes()).collect());
        Some(state)
    }

    fn restore_state(&mut self, state: State) -> Result<()> {
        if state.format.as_str() != STATE_FORMAT {
            return Err(format!(
                "unknown state format `{}` (expected `{STATE_FORMAT}`)",
                state.format
            )
            .into());
        }
        let entry = state.entries.first().ok_or("an empty state")?;
        let mut words =
            entry.bytes.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")));
        let mut next = || words.next().ok_or("a truncated state");
        self.emitted = next()?;
        self.next_in_cycle = next()? as usize % self.sentences.len();
        self.rng = SplitMix64::new(next()?);
        for _ in 0..next()? {
            let (id, index) = (next()?, next()? as usize);
            if index >= self.sentences.len() {
                return Err(format!("message {id}: sentence {index} is not in the config").into());
            }
            self.pending.insert(id, index);
        }
        for _ in 0..next()? {
            self.replay.push_back(next()?);
        }
        self.restored = true;
        Ok(())
    }

    /// Contract 1.2: the position at a checkpoint barrier: the next id, the
    /// next sentence, and the failed messages still to replay (in the swap
    /// state's format, with no pending message: the effects of every message
    /// emitted before the barrier are in the checkpoint).
    fn checkpoint(&mut self, _checkpoint: u64) -> Option<State> {
        let pending = std::mem::take(&mut self.pending);
        let position = self.save_state();
        self.pending = pending;
        position
    }

    fn restore_checkpoint(&mut self, position: State) -> Result<()> {
        if position.is_no_checkpoint() {
            return Ok(());
        }
        self.restore_state(position)
    }

    fn next_tuple(&mut self, collector: &mut SpoutCollector<'_>) -> Result<()> {
        if self.replay_one(collector) || self.limit.is_some_and(|limit| self.emitted >= limit) {
            return Ok(());
        }
        let index = self.pick();
        let id = self.emitted;
        self.emitted += 1;
        let values = std::slice::from_ref(&self.sentences[index]);
        if self.reliable {
            self.pending.insert(id, index);
            collector.emit_with_id(values, id);
        } else {
            collector.emit(values);
        }
        Ok(())
    }

    /// Replays first, one emit each, as `next_tuple` does; then up to the
    /// rest of `max` new sentences in one `emit_many` (one call across the
    /// plugin boundary instead of one per sentence).
    fn next_batch(&mut self, max: usize, collector: &mut SpoutCollector<'_>) -> Result<()> {
        let mut room = max;
        while room > 0 && self.replay_one(collector) {
            room -= 1;
        }
        if let Some(limit) = self.limit {
            room = room.min(limit.saturating_sub(self.emitted) as usize);
        }
        if room == 0 {
            return Ok(());
        }
        self.batch.clear();
        self.ids.clear();
        for _ in 0..room {
            let index = self.pick();
            let id = self.emitted;
            self.emitted += 1;
            self.batch.push(self.sentences[index].clone());
            if self.reliable {
                self.pending.insert(id, index);
                self.ids.push(MessageId(id));
            }
        }
        if self.reliable {
            collector.emit_many_with_ids(&self.batch, &self.ids);
        } else {
            collector.emit_many(room, &self.batch);
        }
        Ok(())
    }

    fn ack(&mut self, message_id: MessageId) {
        self.pending.remove(&message_id.0);
    }

    fn fail(&mut self, message_id: MessageId) {
        if self.pending.contains_key(&message_id.0) {
            self.replay.push_back(message_id.0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use squall_plugin_api::testing::Recorder;

    fn spout(config: &str) -> RandomSentenceSpout {
        RandomSentenceSpout::new(&ComponentConfig::new(config)).unwrap()
    }

    fn next(spout: &mut RandomSentenceSpout, recorder: &mut Recorder) {
        spout.next_tuple(&mut SpoutCollector::new(recorder.output())).unwrap();
    }

    #[test]
    fn empty_config_gives_storms_defaults() {
        let config = RandomSentenceConfig::parse(&ComponentConfig::new("")).unwrap();
        assert_eq!(config.seed, 42);
        assert_eq!(config.sentences.len(), 5);
        assert_eq!(config.sentences[0], "the cow jumped over the moon");
        assert_eq!(config.order, Order::Random);
        assert_eq!(config.limit, None);
        assert!(config.reliable);
    }

    #[test]
    fn bad_config_is_refused_with_the_key_named() {
        let err = RandomSentenceSpout::new(&ComponentConfig::new("order = \"shuffled\""))
            .unwrap_err()
            .to_string();
        assert!(err.contains("unknown variant `shuffled`"), "{err}");
        let err =
            RandomSentenceSpout::new(&ComponentConfig::new("seeds = 1")).unwrap_err().to_string();
        assert!(err.contains("unknown field `seeds`"), "{err}");
        let err = RandomSentenceSpout::new(&ComponentConfig::new("sentences = []"))
            .unwrap_err()
            .to_string();
        assert_eq!(err, "sentences must not be empty");
    }

    #[test]
    fn short_sentences_are_inline_and_long_ones_shared() {
        let spout =
            spout("sentences = [\"a short one\", \"an apple a day keeps the doctor away\"]");
        assert!(matches!(spout.sentences[0], Value::SmallStr(_)));
        assert!(matches!(spout.sentences[1], Value::SharedStr(_)));
    }

    #[test]
    fn cycle_emits_in_order_one_per_call_up_to_the_limit() {
        let mut spout = spout(
            "order = \"cycle\"\nlimit = 4\nreliable = false\nsentences = [\"a\", \"b\", \"c\"]",
        );
        let mut recorder = Recorder::default();
        for _ in 0..6 {
            next(&mut spout, &mut recorder);
        }
        assert_eq!(recorder.first_strings(), ["a", "b", "c", "a"]);
        assert!(recorder
            .emitted
            .iter()
            .all(|e| e.message_id.is_none() && e.stream == StreamId::DEFAULT.0));
    }

    #[test]
    fn random_order_is_fixed_by_the_seed() {
        let run = |seed: u64| {
            let mut spout = spout(&format!("seed = {seed}"));
            let mut recorder = Recorder::default();
            for _ in 0..50 {
                next(&mut spout, &mut recorder);
            }
            recorder.first_strings()
        };
        assert_eq!(run(1), run(1));
        assert_ne!(run(1), run(2));
    }

    #[test]
    fn a_restored_spout_goes_on_where_its_predecessor_stopped() {
        let config = "order = \"cycle\"\nlimit = 5\nsentences = [\"a\", \"b\", \"c\"]";
        let mut old = spout(config);
        let mut recorder = Recorder::default();
        for _ in 0..3 {
            next(&mut old, &mut recorder);
        }
        old.ack(MessageId(0));
        old.fail(MessageId(1));
        let mut new = spout(config);
        new.restore_state(old.save_state().expect("a state")).expect("restored");
        let mut recorder = Recorder::default();
        for _ in 0..4 {
            next(&mut new, &mut recorder);
        }
        let ids: Vec<u64> = recorder.emitted.iter().map(|e| e.message_id.unwrap().0).collect();
        assert_eq!(ids, [1, 3, 4], "the replay first, then new ids up to the limit");
        assert_eq!(recorder.first_strings(), ["b", "a", "b"], "the cycle goes on");
        assert!(new.restore_state(State::new("other/1")).is_err());
    }

    #[test]
    fn a_batch_emits_what_as_many_next_tuple_calls_would_in_one_call() {
        for reliable in [false, true] {
            let config = format!("seed = 7\nlimit = 10\nreliable = {reliable}");
            let (mut one, mut many) = (spout(&config), spout(&config));
            let (mut singles, mut batches) = (Recorder::default(), Recorder::default());
            for _ in 0..10 {
                next(&mut one, &mut singles);
            }
            let mut collector = SpoutCollector::from_ext(batches.spout_output());
            many.next_batch(4, &mut collector).unwrap();
            many.next_batch(64, &mut collector).unwrap();
            many.next_batch(64, &mut collector).unwrap(); // past the limit: nothing
            drop(collector);
            assert_eq!(batches.first_strings(), singles.first_strings(), "reliable: {reliable}");
            let ids = |r: &Recorder| r.emitted.iter().map(|e| e.message_id).collect::<Vec<_>>();
            assert_eq!(ids(&batches), ids(&singles), "reliable: {reliable}");
            assert_eq!(batches.emit_many_calls, [4, 6], "one call per batch; reliable: {reliable}");
            assert_eq!(many.pending.len(), if reliable { 10 } else { 0 });
        }
        // Replays come first, one emit each, and count toward `max`.
        let mut spout = spout("order = \"cycle\"\nsentences = [\"a\", \"b\", \"c\"]");
        let mut recorder = Recorder::default();
        let mut collector = SpoutCollector::from_ext(recorder.spout_output());
        spout.next_batch(3, &mut collector).unwrap();
        spout.fail(MessageId(1));
        spout.next_batch(3, &mut collector).unwrap();
        drop(collector);
        let ids: Vec<_> = recorder.emitted.iter().map(|e| e.message_id.unwrap().0).collect();
        assert_eq!(ids, [0, 1, 2, 1, 3, 4]);
        assert_eq!(recorder.first_strings(), ["a", "b", "c", "b", "a", "b"]);
    }

    #[test]
    fn failed_messages_are_replayed_first_with_the_same_id() {
        let mut spout = spout("order = \"cycle\"\nlimit = 3\nsentences = [\"a\", \"b\", \"c\"]");
        let mut recorder = Recorder::default();
        for _ in 0..3 {
            next(&mut spout, &mut recorder);
        }
        spout.ack(MessageId(0));
        spout.fail(MessageId(2));
        spout.fail(MessageId(1));
        spout.fail(MessageId(0)); // already acked: nothing to replay
        for _ in 0..4 {
            next(&mut spout, &mut recorder);
        }
        let ids: Vec<_> = recorder.emitted.iter().map(|e| e.message_id.unwrap().0).collect();
        assert_eq!(ids, [0, 1, 2, 2, 1]);
        assert_eq!(recorder.first_strings(), ["a", "b", "c", "c", "b"]);
        spout.ack(MessageId(1));
        spout.ack(MessageId(2));
        assert!(spout.pending.is_empty());
    }
}
