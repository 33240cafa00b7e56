//! Benchmark plumbing: [`ConstSpout`], [`EmptySpout`], [`NullBolt`],
//! [`IdBolt`], [`PackBolt`] and [`SleepBolt`].

use std::time::Duration;

use serde::Deserialize;
use squall_plugin_api::prelude::*;

use crate::{parse_no_config, shared_or_inline};

/// [`ConstSpout`]'s config.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
struct ConstConfig {
    #[serde(default = "default_value")]
    value: String,
    #[serde(default)]
    reliable: bool,
    #[serde(default)]
    limit: Option<u64>,
    #[serde(default = "default_per_call")]
    per_call: u32,
    #[serde(default)]
    fresh: bool,
    #[serde(default = "default_repeat")]
    repeat: usize,
    #[serde(default)]
    extra_values: usize,
}

fn default_repeat() -> usize {
    1
}

fn default_value() -> String {
    "hello".to_owned()
}

fn default_per_call() -> u32 {
    1
}

/// Emits the same string again and again on `["value"]`: the cheapest
/// possible source, for throughput benchmarks.
///
/// Config: `value` (string, `"hello"`), `reliable` (false; when true every
/// tuple carries a sequential message id 0, 1, 2, ...; acks and fails are
/// ignored, nothing is replayed), `limit` (total tuples per task, none by
/// default), `per_call` (tuples per `next_tuple`, 1; more: a spout that hands
/// a whole batch over in one call), `repeat` (the value is
/// `value` repeated this many times, 1; for big values) and `fresh` (false;
/// when true every emit carries its own copy of the value instead of a
/// shared reference, so memory use grows with the tuples in flight) and
/// `extra_values` (0; emits that many values more than the one field it
/// declares: a plugin bug, for the host's arity check; `next_batch` then
/// emits one `next_tuple`'s worth per call, so each refused call counts
/// as on an older host).
///
/// The value is built once; an emit copies it by reference, so short values
/// (up to 31 bytes, stored inline) and long ones (shared) allocate nothing.
/// With `per_call` above 1 the tuples of a call go out in one
/// [`SpoutCollector::emit_many`] (or `emit_many_with_ids`), from a buffer of
/// copies built once.
///
/// A contract 1.3 host calls [`Spout::next_batch`] instead: it emits the
/// `max` tuples the host asks for (fewer when `limit` is near) in one
/// `emit_many` (or `emit_many_with_ids`) per [`MANY_CHUNK`] tuples,
/// whatever `per_call` says; with `fresh` it emits them one by one, each
/// with its own copy, as `next_tuple` does.
#[derive(Debug)]
pub struct ConstSpout {
    value: Value,
    text: String,
    fresh: bool,
    extra_values: usize,
    reliable: bool,
    limit: Option<u64>,
    per_call: u32,
    /// Tuples emitted so far; also the next message id.
    emitted: u64,
    /// With `per_call` above 1, or once `next_batch` was called: the values
    /// of up to [`MANY_CHUNK`] tuples, back to back, handed to `emit_many`.
    many: Vec<Value>,
    /// The message ids of one `emit_many_with_ids` call (reused).
    ids: Vec<MessageId>,
}

/// The most tuples one `emit_many` call of [`ConstSpout`] carries (bounds its buffer).
const MANY_CHUNK: usize = 1024;

impl Spout for ConstSpout {
    const NAME: &'static str = "ConstSpout";
    const DESCRIPTION: &'static str = "emits one constant string, per_call tuples per next_tuple";
    const CONFIG_KEYS: Option<&'static [ConfigKey]> = Some(&[
        ConfigKey::optional("value", KeyKind::String, "\"hello\"", "the string emitted"),
        ConfigKey::optional(
            "reliable",
            KeyKind::Bool,
            "false",
            "emit with sequential message ids (never replayed)",
        ),
        ConfigKey::maybe(
            "limit",
            KeyKind::Integer,
            "tuples per task in all (no limit when left out)",
        ),
        ConfigKey::optional("per_call", KeyKind::Integer, "1", "tuples per next_tuple call"),
        ConfigKey::optional(
            "fresh",
            KeyKind::Bool,
            "false",
            "give every emit its own copy of the value",
        ),
        ConfigKey::optional(
            "repeat",
            KeyKind::Integer,
            "1",
            "the value is `value` repeated this often",
        ),
        ConfigKey::optional(
            "extra_values",
            KeyKind::Integer,
            "0",
            "values emitted beyond the declared field (a plugin bug, for the arity check)",
        ),
    ]);

    fn declare_outputs(outputs: &mut OutputDeclarer) {
        outputs.declare(&["value"]);
    }

    fn new(config: &ComponentConfig<'_>) -> Result<Self> {
        let config: ConstConfig = config.parse()?;
        if config.per_call == 0 {
            return Err("per_call must be at least 1".into());
        }
        if config.repeat == 0 {
            return Err("repeat must be at least 1".into());
        }
        let text = config.value.repeat(config.repeat);
        let value = shared_or_inline(&text);
        let many = if config.per_call > 1 {
            let one = if config.fresh { Value::from(text.as_str()) } else { value.clone() };
            let tuples = (config.per_call as usize).min(MANY_CHUNK);
            vec![one; tuples * (1 + config.extra_values)]
        } else {
            Vec::new()
        };
        Ok(Self {
            value,
            text,
            fresh: config.fresh,
            extra_values: config.extra_values,
            reliable: config.reliable,
            limit: config.limit,
            per_call: config.per_call,
            emitted: 0,
            many,
            ids: Vec::new(),
        })
    }

    fn next_tuple(&mut self, collector: &mut SpoutCollector<'_>) -> Result<()> {
        let mut count = u64::from(self.per_call);
        if let Some(limit) = self.limit {
            count = count.min(limit.saturating_sub(self.emitted));
        }
        if self.per_call > 1 {
            return self.emit_many(count, collector);
        }
        self.emit_one_by_one(count, collector);
        Ok(())
    }

    fn next_batch(&mut self, max: usize, collector: &mut SpoutCollector<'_>) -> Result<()> {
        if self.extra_values > 0 {
            // A deliberately wrong shape (the fault tests): one
            // `next_tuple`'s worth per call, so that each refused call
            // counts as it does on a host that calls `next_tuple`.
            return self.next_tuple(collector);
        }
        let mut count = max as u64;
        if let Some(limit) = self.limit {
            count = count.min(limit.saturating_sub(self.emitted));
        }
        if self.fresh {
            // Every tuple its own copy: a buffer would share one.
            self.emit_one_by_one(count, collector);
            return Ok(());
        }
        let arity = 1 + self.extra_values;
        if self.many.len() < MANY_CHUNK * arity {
            self.many.resize(MANY_CHUNK * arity, self.value.clone());
        }
        self.emit_many(count, collector)
    }
}

impl ConstSpout {
    /// Emits `count` tuples with one `emit` (or `emit_with_id`) each.
    fn emit_one_by_one(&mut self, count: u64, collector: &mut SpoutCollector<'_>) {
        let fresh;
        let wrong;
        let values = if self.extra_values > 0 {
            wrong = vec![self.value.clone(); 1 + self.extra_values];
            &wrong[..]
        } else if self.fresh {
            fresh = [Value::from(self.text.as_str())];
            &fresh[..]
        } else {
            std::slice::from_ref(&self.value)
        };
        for _ in 0..count {
            if self.reliable {
                collector.emit_with_id(values, self.emitted);
            } else {
                collector.emit(values);
            }
            self.emitted += 1;
        }
    }

    /// Emits `count` tuples with `emit_many`, [`MANY_CHUNK`] at most per call.
    fn emit_many(&mut self, mut count: u64, collector: &mut SpoutCollector<'_>) -> Result<()> {
        let arity = 1 + self.extra_values;
        while count > 0 {
            let n = (count as usize).min(self.many.len() / arity);
            let values = &self.many[..n * arity];
            if self.reliable {
                self.ids.clear();
                self.ids.extend((self.emitted..self.emitted + n as u64).map(MessageId));
                collector.emit_many_with_ids(values, &self.ids);
            } else {
                collector.emit_many(n, values);
            }
            self.emitted += n as u64;
            count -= n as u64;
        }
        Ok(())
    }
}

/// Declares `["value"]` and never emits: for measuring an idle topology's CPU.
#[derive(Debug)]
pub struct EmptySpout;

impl Spout for EmptySpout {
    const NAME: &'static str = "EmptySpout";
    const DESCRIPTION: &'static str = "never emits anything (idle-CPU benchmark)";
    const CONFIG_KEYS: Option<&'static [ConfigKey]> = Some(&[]);

    fn declare_outputs(outputs: &mut OutputDeclarer) {
        outputs.declare(&["value"]);
    }

    fn new(config: &ComponentConfig<'_>) -> Result<Self> {
        parse_no_config(config)?;
        Ok(EmptySpout)
    }

    fn next_tuple(&mut self, _collector: &mut SpoutCollector<'_>) -> Result<()> {
        Ok(())
    }
}

/// Discards every input (which is then acked): the cheapest possible sink.
#[derive(Debug)]
pub struct NullBolt;

impl BasicBolt for NullBolt {
    const NAME: &'static str = "NullBolt";
    const DESCRIPTION: &'static str = "discards every input";
    const CONFIG_KEYS: Option<&'static [ConfigKey]> = Some(&[]);

    fn new(config: &ComponentConfig<'_>) -> Result<Self> {
        parse_no_config(config)?;
        Ok(NullBolt)
    }

    fn execute(&mut self, _input: &Tuple<'_>, _collector: &mut BasicCollector<'_>) -> Result<()> {
        Ok(())
    }

    /// Takes the whole run at once (the host acks what it took).
    fn execute_batch(
        &mut self,
        inputs: &mut Inputs<'_, '_>,
        _collector: &mut BasicBatchCollector<'_>,
    ) -> Result<()> {
        inputs.take_all();
        Ok(())
    }
}

/// Re-emits every input's values unchanged on `["value"]`.
///
/// A contract 1.3 host hands it a run of inputs per call: when they all
/// have as many values, it re-emits the run's values as they lie in the
/// host's batch ([`Run::values`]) with one
/// [`BasicBatchCollector::emit_each`] (one `emit_many` for a row of
/// untracked inputs), each tuple anchored to its input as one `execute`
/// per input would; else one emit per input.
#[derive(Debug, Default)]
pub struct IdBolt;

impl BasicBolt for IdBolt {
    const NAME: &'static str = "IdBolt";
    const DESCRIPTION: &'static str = "re-emits every input unchanged";
    const CONFIG_KEYS: Option<&'static [ConfigKey]> = Some(&[]);

    fn declare_outputs(outputs: &mut OutputDeclarer) {
        outputs.declare(&["value"]);
    }

    fn new(config: &ComponentConfig<'_>) -> Result<Self> {
        parse_no_config(config)?;
        Ok(IdBolt)
    }

    fn execute(&mut self, input: &Tuple<'_>, collector: &mut BasicCollector<'_>) -> Result<()> {
        collector.emit(input.values());
        Ok(())
    }

    fn execute_batch(
        &mut self,
        inputs: &mut Inputs<'_, '_>,
        collector: &mut BasicBatchCollector<'_>,
    ) -> Result<()> {
        let run = inputs.take_all();
        if run.arity().is_some() {
            collector.emit_each(&run, run.values());
        } else {
            // Inputs of different shapes: each emit is checked on its own.
            for input in run {
                collector.for_input(&input).emit(input.values());
            }
        }
        Ok(())
    }
}

/// Packs every input into one value on `["value"]`: a list of the input's
/// field names and values, alternating, with a list value spliced in as its
/// items. So `id = "1-0", fields = ["a", "1"]` becomes `["id", "1-0", "a",
/// "1"]`: a multi-field tuple made fit for the single-field testkit bolts
/// (such as [`ChaosBolt`](crate::ChaosBolt)), and still a name/value list.
#[derive(Debug)]
pub struct PackBolt;

impl BasicBolt for PackBolt {
    const NAME: &'static str = "PackBolt";
    const DESCRIPTION: &'static str = "packs each input's names and values into one list";
    const CONFIG_KEYS: Option<&'static [ConfigKey]> = Some(&[]);

    fn declare_outputs(outputs: &mut OutputDeclarer) {
        outputs.declare(&["value"]);
    }

    fn new(config: &ComponentConfig<'_>) -> Result<Self> {
        parse_no_config(config)?;
        Ok(PackBolt)
    }

    fn execute(&mut self, input: &Tuple<'_>, collector: &mut BasicCollector<'_>) -> Result<()> {
        let mut packed = Vec::with_capacity(input.values().len() * 2);
        for (i, value) in input.values().iter().enumerate() {
            match value.as_list() {
                Some(items) => packed.extend(items.iter().cloned()),
                None => {
                    let name = input.fields().get(i).map_or("", |f| f.as_str());
                    packed.push(Value::from(name));
                    packed.push(value.clone());
                }
            }
        }
        collector.emit(&[Value::List(packed.into())]);
        Ok(())
    }
}

/// [`SleepBolt`]'s config.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
struct SleepConfig {
    #[serde(default = "default_micros")]
    micros: u64,
}

fn default_micros() -> u64 {
    1000
}

/// Sleeps `micros` (u64, default 1000) per input, then re-emits its values on
/// `["value"]`: a slow consumer, for backpressure tests.
#[derive(Debug)]
pub struct SleepBolt {
    pause: Duration,
}

impl BasicBolt for SleepBolt {
    const NAME: &'static str = "SleepBolt";
    const DESCRIPTION: &'static str = "sleeps `micros` per input, then re-emits it";
    const CONFIG_KEYS: Option<&'static [ConfigKey]> = Some(&[ConfigKey::optional(
        "micros",
        KeyKind::Integer,
        "1000",
        "microseconds slept per input",
    )]);

    fn declare_outputs(outputs: &mut OutputDeclarer) {
        outputs.declare(&["value"]);
    }

    fn new(config: &ComponentConfig<'_>) -> Result<Self> {
        let config: SleepConfig = config.parse()?;
        Ok(Self { pause: Duration::from_micros(config.micros) })
    }

    fn execute(&mut self, input: &Tuple<'_>, collector: &mut BasicCollector<'_>) -> Result<()> {
        if !self.pause.is_zero() {
            std::thread::sleep(self.pause);
        }
        collector.emit(input.values());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn declared_config_keys_match_the_config_structs() {
        use squall_plugin_api::testing::check_config_keys;
        check_config_keys::<ConstConfig>(ConstSpout::CONFIG_KEYS, "limit = 5").unwrap();
        check_config_keys::<SleepConfig>(SleepBolt::CONFIG_KEYS, "").unwrap();
        check_config_keys::<crate::NoConfig>(EmptySpout::CONFIG_KEYS, "").unwrap();
        check_config_keys::<crate::NoConfig>(NullBolt::CONFIG_KEYS, "").unwrap();
        check_config_keys::<crate::NoConfig>(IdBolt::CONFIG_KEYS, "").unwrap();
    }
    use squall_plugin_api::testing::{Recorder, TestRun};

    fn const_spout(config: &str) -> ConstSpout {
        ConstSpout::new(&ComponentConfig::new(config)).unwrap()
    }

    #[test]
    fn const_spout_defaults_to_one_unreliable_hello_per_call() {
        let mut spout = const_spout("");
        let mut recorder = Recorder::default();
        for _ in 0..3 {
            spout.next_tuple(&mut SpoutCollector::new(recorder.output())).unwrap();
        }
        assert_eq!(recorder.first_strings(), ["hello", "hello", "hello"]);
        assert!(recorder.emitted.iter().all(|e| e.message_id.is_none()));
        assert!(matches!(spout.value, Value::SmallStr(_)));
    }

    #[test]
    fn const_spout_emits_per_call_tuples_with_sequential_ids_up_to_the_limit() {
        let mut spout = const_spout("value = \"x\"\nreliable = true\nper_call = 3\nlimit = 7");
        let mut recorder = Recorder::default();
        for _ in 0..4 {
            spout.next_tuple(&mut SpoutCollector::new(recorder.output())).unwrap();
        }
        let ids: Vec<_> = recorder.emitted.iter().map(|e| e.message_id.unwrap().0).collect();
        assert_eq!(ids, [0, 1, 2, 3, 4, 5, 6]);
    }

    #[test]
    fn const_spout_hands_per_call_tuples_over_in_one_emit_many() {
        let mut spout = const_spout("value = \"x\"\nreliable = true\nper_call = 3\nlimit = 7");
        let mut recorder = Recorder::default();
        for _ in 0..4 {
            spout.next_tuple(&mut SpoutCollector::from_ext(recorder.spout_output())).unwrap();
        }
        assert_eq!(recorder.emit_many_calls, [3, 3, 1], "one call per next_tuple, up to the limit");
        let ids: Vec<_> = recorder.emitted.iter().map(|e| e.message_id.unwrap().0).collect();
        assert_eq!(ids, [0, 1, 2, 3, 4, 5, 6]);
        assert!(recorder.emitted.iter().all(|e| e.values == [Value::from("x")]));

        let mut spout = const_spout("per_call = 2500\nextra_values = 1");
        let mut recorder = Recorder::default();
        spout.next_tuple(&mut SpoutCollector::from_ext(recorder.spout_output())).unwrap();
        assert_eq!(recorder.emit_many_calls, [1024, 1024, 452], "in chunks of at most 1024");
        assert!(recorder.emitted.iter().all(|e| e.values.len() == 2 && e.message_id.is_none()));
    }

    #[test]
    fn const_spout_next_batch_emits_max_tuples_in_one_emit_many_per_chunk() {
        let mut spout = const_spout("");
        let mut recorder = Recorder::default();
        spout.next_batch(1000, &mut SpoutCollector::from_ext(recorder.spout_output())).unwrap();
        spout.next_batch(2500, &mut SpoutCollector::from_ext(recorder.spout_output())).unwrap();
        assert_eq!(recorder.emit_many_calls, [1000, 1024, 1024, 452], "not one call per tuple");
        assert!(recorder.emitted.iter().all(|e| e.values == [Value::from("hello")]));
        assert!(recorder.emitted.iter().all(|e| e.message_id.is_none()));

        // Reliable: sequential ids, up to the limit, then nothing;
        // `per_call` is next_tuple's only.
        let mut spout = const_spout("reliable = true\nlimit = 1500\nper_call = 7");
        let mut recorder = Recorder::default();
        for _ in 0..3 {
            spout.next_batch(1000, &mut SpoutCollector::from_ext(recorder.spout_output())).unwrap();
        }
        assert_eq!(recorder.emit_many_calls, [1000, 500]);
        let ids: Vec<_> = recorder.emitted.iter().map(|e| e.message_id.unwrap().0).collect();
        assert_eq!(ids, (0..1500).collect::<Vec<_>>());
        assert!(recorder.emitted.iter().all(|e| e.values.len() == 1));

        // The wrong shape of `extra_values` (the host's arity tests): one
        // next_tuple's worth per call, whatever `max`, so that each refused
        // call counts once as on a host that calls next_tuple.
        let mut spout = const_spout("limit = 100\nper_call = 10\nextra_values = 1");
        let mut recorder = Recorder::default();
        spout.next_batch(1000, &mut SpoutCollector::from_ext(recorder.spout_output())).unwrap();
        assert_eq!(recorder.emit_many_calls, [10]);
        assert!(recorder.emitted.iter().all(|e| e.values.len() == 2));
    }

    #[test]
    fn const_spout_next_batch_with_fresh_gives_every_tuple_its_own_copy() {
        let mut spout = const_spout(&format!("value = \"{}\"\nfresh = true", "z".repeat(40)));
        let mut recorder = Recorder::default();
        spout.next_batch(3, &mut SpoutCollector::from_ext(recorder.spout_output())).unwrap();
        assert!(recorder.emit_many_calls.is_empty());
        assert_eq!(recorder.emitted.len(), 3, "one emit each, no buffer of copies");
        assert!(recorder.emitted.iter().all(|e| matches!(e.values[0], Value::Str(_))));
    }

    /// `tuples` as inputs: each a tuple of its values, anchored as given
    /// (0: untracked).
    fn inputs_of(values: &[Vec<Value>], anchors: &[u64]) -> TestRun {
        let mut run = TestRun::new("spout");
        for (v, &a) in values.iter().zip(anchors) {
            run.push(v, if a == 0 { Anchor::NONE } else { Anchor(a) });
        }
        run
    }

    #[test]
    fn id_bolt_re_emits_a_run_in_one_call_each_tuple_anchored_to_its_input() {
        let values: Vec<Vec<Value>> = (0..64_u64).map(|i| vec![Value::U64(i)]).collect();
        let mut bolt = IdBolt;
        let mut taken = 0;
        let mut recorder = Recorder::default();
        let tuples = inputs_of(&values, &[0; 64]);
        let mut inputs = tuples.inputs(&mut taken);
        let mut collector = BasicBatchCollector::from_bolt_output(recorder.bolt_output());
        bolt.execute_batch(&mut inputs, &mut collector).unwrap();
        drop(collector);
        assert_eq!(taken, 64, "every input taken: the host acks them all");
        assert_eq!(recorder.emit_many_calls, [64], "one call for the untracked run");
        let emitted: Vec<_> = recorder.emitted.iter().map(|e| e.values.clone()).collect();
        assert_eq!(emitted, values);
        assert!(recorder.emitted.iter().all(|e| e.anchors.is_empty()));

        // Tracked inputs: each tuple anchored to its own input.
        let mut recorder = Recorder::default();
        let tuples = inputs_of(&values[..3], &[11, 0, 13]);
        let mut inputs = tuples.inputs(&mut taken);
        let mut collector = BasicBatchCollector::from_bolt_output(recorder.bolt_output());
        bolt.execute_batch(&mut inputs, &mut collector).unwrap();
        drop(collector);
        assert_eq!(taken, 3);
        let anchors: Vec<_> = recorder.emitted.iter().map(|e| e.anchors.clone()).collect();
        assert_eq!(anchors, [vec![Anchor(11)], vec![], vec![Anchor(13)]]);
        assert_eq!(recorder.emitted[2].values, values[2]);
        assert!(recorder.acked.is_empty() && recorder.failed.is_empty(), "the host acks");

        // Inputs of two shapes: one emit each, each checked on its own.
        let mixed = vec![vec![Value::U64(1)], vec![Value::U64(2), Value::U64(3)]];
        let mut recorder = Recorder::default();
        let tuples = inputs_of(&mixed, &[21, 22]);
        let mut inputs = tuples.inputs(&mut taken);
        let mut collector = BasicBatchCollector::from_bolt_output(recorder.bolt_output());
        bolt.execute_batch(&mut inputs, &mut collector).unwrap();
        drop(collector);
        assert!(recorder.emit_many_calls.is_empty());
        let emitted: Vec<_> =
            recorder.emitted.iter().map(|e| (e.values.clone(), e.anchors.clone())).collect();
        assert_eq!(
            emitted,
            [(mixed[0].clone(), vec![Anchor(21)]), (mixed[1].clone(), vec![Anchor(22)])]
        );
    }

    #[test]
    fn null_bolt_takes_a_whole_run_and_emits_nothing() {
        let values: Vec<Vec<Value>> = (0..5_u64).map(|i| vec![Value::U64(i)]).collect();
        let tuples = inputs_of(&values, &[1, 2, 3, 4, 5]);
        let mut taken = 0;
        let mut recorder = Recorder::default();
        let mut inputs = tuples.inputs(&mut taken);
        let mut collector = BasicBatchCollector::from_bolt_output(recorder.bolt_output());
        NullBolt.execute_batch(&mut inputs, &mut collector).unwrap();
        drop(collector);
        assert_eq!(taken, 5);
        assert!(recorder.emitted.is_empty() && recorder.acked.is_empty());
    }

    #[test]
    fn const_spout_shares_a_long_value_and_refuses_zero_per_call() {
        let spout = const_spout(&format!("value = \"{}\"", "y".repeat(40)));
        assert!(matches!(spout.value, Value::SharedStr(_)));
        let err = ConstSpout::new(&ComponentConfig::new("per_call = 0")).unwrap_err();
        assert_eq!(err.to_string(), "per_call must be at least 1");
    }

    #[test]
    fn id_and_sleep_bolts_re_emit_their_input() {
        let values = [Value::from("a"), Value::U64(2)];
        let input = Tuple::new(&values, &[], "spout", "default", 1, Anchor(9));
        let mut recorder = Recorder::default();
        IdBolt.execute(&input, &mut BasicCollector::new(recorder.output())).unwrap();
        let mut sleep = SleepBolt::new(&ComponentConfig::new("micros = 0")).unwrap();
        sleep.execute(&input, &mut BasicCollector::new(recorder.output())).unwrap();
        assert_eq!(recorder.emitted.len(), 2);
        assert!(recorder.emitted.iter().all(|e| e.values == values));
    }

    #[test]
    fn pack_bolt_splices_lists_and_pairs_other_values_with_their_names() {
        let values =
            [Value::from("1-0"), Value::List(vec![Value::from("a"), Value::U64(1)].into())];
        let input = Tuple::new(&values, &[], "spout", "default", 1, Anchor(9));
        let mut recorder = Recorder::default();
        PackBolt.execute(&input, &mut BasicCollector::new(recorder.output())).unwrap();
        assert_eq!(recorder.emitted.len(), 1);
        let packed = [Value::from(""), Value::from("1-0"), Value::from("a"), Value::U64(1)];
        assert_eq!(recorder.emitted[0].values, [Value::List(packed.to_vec().into())]);
    }

    #[test]
    fn components_without_config_refuse_unknown_keys() {
        let err = NullBolt::new(&ComponentConfig::new("value = 1")).unwrap_err().to_string();
        assert!(err.contains("takes no config"), "{err}");
    }
}
