//! [`WordCount`]: running counts per word, printed at shutdown.

use rustc_hash::FxHashMap;
use std::fmt::Write as _;
use std::io::Write as _;

use squall_plugin_api::metrics;
use squall_plugin_api::prelude::*;

use crate::first_str;

/// Counts the words in its inputs' first value and emits `(word, count)` on
/// the default stream `["word", "count"]` for each input. Takes no config;
/// tick tuples are ignored.
///
/// At `cleanup` it prints its counts to stdout, sorted by word, one
/// `wordcount: <word> <count>` line each, in a single write. With a fields
/// grouping on `word` every word is counted by exactly one task, so the
/// lines of all tasks together are the topology's totals.
///
/// Contract 1.1: in `prepare` it logs through the host and registers two
/// metrics, `words` (a counter of words counted) and `distinct_words` (a
/// gauge), exported by `squall run --http` in `/metrics` and the REST API.
#[derive(Debug, Default)]
pub struct WordCount {
    counts: FxHashMap<String, u64>,
    metrics: Option<(metrics::Counter, metrics::Gauge)>,
    /// The `(word, count)` tuples of a run, back to back (kept to reuse
    /// its capacity).
    out: Vec<Value>,
}

impl WordCount {
    /// Adds one to `word`'s count and returns the new count. Allocates only
    /// the first time a word is seen.
    fn count(&mut self, word: &str) -> u64 {
        if let Some(count) = self.counts.get_mut(word) {
            *count += 1;
            return *count;
        }
        self.counts.insert(word.to_owned(), 1);
        if let Some((_, distinct)) = &self.metrics {
            distinct.set(self.counts.len() as i64);
        }
        1
    }

    /// [`execute_batch`](BasicBolt::execute_batch) for a run of one-value
    /// inputs (the common case): the words are read from the run's values
    /// back to back, with no `Tuple` built per input. The same outcome as
    /// the loop over `inputs`: every word before a non-string is counted
    /// and emitted, and the non-string fails alone. When the run says that
    /// the output stream goes nowhere ([`Run::wired`]), the words are
    /// counted and nothing is built or emitted.
    fn count_words(
        &mut self,
        run: Run<'_>,
        inputs: &mut Inputs<'_, '_>,
        collector: &mut BasicBatchCollector<'_>,
    ) -> Result<()> {
        // Where no one would get the `(word, count)` tuples (no
        // subscriber, no tap), they are not built: the words are counted.
        let emit = run.wired(StreamId::DEFAULT);
        let mut failed = None;
        for (i, value) in run.values().iter().enumerate() {
            let Some(word) = value.as_str() else {
                failed = Some(i);
                break;
            };
            let count = self.count(word);
            if emit {
                // The input's own value, copied whole, and the count built
                // in place (see `execute_batch`).
                self.out.push(value.clone());
                Value::push_u64(&mut self.out, count);
            }
        }
        let counted = failed.unwrap_or(run.len());
        // The inputs up to a failed one are taken: the host fails that one.
        let result = match failed {
            None => {
                inputs.take_all();
                Ok(())
            }
            Some(i) => {
                let input = inputs.nth(i).ok_or("a run shorter than its values")?;
                first_str(&input, "a word").map(|_| ())
            }
        };
        if emit {
            self.flush(run.range(0..counted), collector);
        } else if let Some((words, _)) = &self.metrics {
            words.add(counted as u64);
        }
        result
    }

    /// Emits the tuples in `self.out`, one per input of `inputs`.
    fn flush(&mut self, inputs: Run<'_>, collector: &mut BasicBatchCollector<'_>) {
        if !inputs.is_empty() {
            if let Some((words, _)) = &self.metrics {
                words.add(inputs.len() as u64);
            }
            collector.emit_each(&inputs, &self.out);
        }
        self.out.clear();
    }

    /// The cleanup report: `wordcount: <word> <count>` lines, sorted by word.
    fn report(&self) -> String {
        let mut sorted: Vec<_> = self.counts.iter().collect();
        sorted.sort_unstable();
        let mut report = String::new();
        for (word, count) in sorted {
            // Writing to a String cannot fail.
            let _ = writeln!(report, "wordcount: {word} {count}");
        }
        report
    }
}

/// The tag of [`WordCount`]'s saved state: one entry per word, keyed by the
/// word, holding its count as 8 little-endian bytes.
pub const STATE_FORMAT: &str = "word-count/1";

impl BasicBolt for WordCount {
    const NAME: &'static str = "WordCount";
    const DESCRIPTION: &'static str = "counts words; prints the totals at shutdown";
    const CONFIG_KEYS: Option<&'static [ConfigKey]> = Some(&[]);
    const INPUT_FIELDS: &'static [&'static str] = &["word"];

    /// Counts are per word, so every task must see every occurrence of its
    /// words: more than one task needs a fields grouping on `word`.
    fn check_inputs(_config: &ComponentConfig<'_>, inputs: &[InputDecl]) -> Result<()> {
        for input in inputs {
            let on_word = input.grouping.as_str() == "fields"
                && input.grouping_fields.iter().any(|f| f.as_str() == "word");
            let single = matches!(input.grouping.as_str(), "global" | "all");
            if !on_word && !single {
                return Err(format!(
                    "input from \"{}\" uses grouping \"{}\"; counting needs grouping = {{ fields = [\"word\"] }}",
                    input.component, input.grouping
                )
                .into());
            }
        }
        Ok(())
    }

    fn declare_outputs(outputs: &mut OutputDeclarer) {
        outputs.declare(&["word", "count"]);
    }

    fn new(_config: &ComponentConfig<'_>) -> Result<Self> {
        Ok(WordCount::default())
    }

    fn prepare(&mut self, context: &TaskContext) -> Result<()> {
        let words = metrics::counter("words", "Words counted by this task.");
        let distinct = metrics::gauge("distinct_words", "Distinct words this task has seen.");
        self.metrics = Some((words, distinct));
        squall_plugin_api::info!(
            "counting words as task {} of {}",
            context.task_index + 1,
            context.parallelism
        );
        Ok(())
    }

    fn execute(&mut self, input: &Tuple<'_>, collector: &mut BasicCollector<'_>) -> Result<()> {
        if input.is_tick() {
            return Ok(());
        }
        let word = first_str(input, "a word")?;
        let count = self.count(word);
        if let Some((words, _)) = &self.metrics {
            words.inc();
        }
        collector.emit(&[Value::from(word), Value::U64(count)]);
        Ok(())
    }

    /// A run of words (contract 1.3): each is counted and its
    /// `(word, count)` emitted, anchored to it, as in `execute`; the run's
    /// tuples go to the host with one `emit_each` (one call for untracked
    /// words). An input that is not a string fails alone, after the tuples
    /// of the words before it were emitted. (A run holds one source's
    /// tuples: ticks come to `execute`.)
    fn execute_batch(
        &mut self,
        inputs: &mut Inputs<'_, '_>,
        collector: &mut BasicBatchCollector<'_>,
    ) -> Result<()> {
        let run = inputs.remaining();
        if run.arity() == Some(1) {
            return self.count_words(run, inputs, collector);
        }
        let mut result = Ok(());
        for input in inputs.by_ref() {
            match first_str(&input, "a word") {
                Ok(word) => {
                    let count = self.count(word);
                    // The input's own value, copied whole, and the count
                    // built in place: values built on the stack in narrow
                    // stores and then pushed make the push wait for them
                    // (a store-forwarding stall per value; see
                    // `Value::push_str`).
                    self.out.push(input.values()[0].clone());
                    Value::push_u64(&mut self.out, count);
                }
                Err(e) => {
                    result = Err(e);
                    break;
                }
            }
        }
        // One tuple per input taken, but the one that failed.
        let counted = inputs.taken() - usize::from(result.is_err());
        self.flush(run.range(0..counted), collector);
        result
    }

    /// The counts, one entry per word (keyed by the word, so a handover to
    /// a different number of tasks sends each word's count where the fields
    /// grouping routes the word).
    fn save_state(&mut self) -> Option<State> {
        let mut state = State::new(STATE_FORMAT);
        for (word, count) in &self.counts {
            state.push(&[Value::from(word.as_str())], count.to_le_bytes().to_vec());
        }
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
        for entry in state.entries.iter() {
            let word =
                entry.key.first().and_then(Value::as_str).ok_or("a count without its word")?;
            let bytes: [u8; 8] =
                entry.bytes.as_slice().try_into().map_err(|_| "a count that is not 8 bytes")?;
            *self.counts.entry(word.to_owned()).or_default() += u64::from_le_bytes(bytes);
        }
        Ok(())
    }

    fn cleanup(&mut self) {
        let report = self.report();
        if report.is_empty() {
            return;
        }
        // One locked write, so the lines of tasks that clean up at the same
        // time do not interleave. A closed stdout is not worth a panic.
        let mut stdout = std::io::stdout().lock();
        let _ = stdout.write_all(report.as_bytes()).and_then(|()| stdout.flush());
    }
}

#[cfg(test)]
mod tests {
    use squall_plugin_api::{SYSTEM_COMPONENT, TICK_STREAM};

    use super::*;
    use squall_plugin_api::testing::{Recorder, TestRun};

    fn execute(
        bolt: &mut WordCount,
        recorder: &mut Recorder,
        values: &[Value],
        stream: &str,
        component: &str,
    ) {
        let input = Tuple::new(values, &[], component, stream, 1, Anchor(1));
        bolt.execute(&input, &mut BasicCollector::new(recorder.output())).unwrap();
    }

    /// Runs one `execute_batch` over `(value, anchor)` inputs from "split"
    /// (anchor 0: untracked); returns the result and the inputs taken.
    fn run_batch(
        bolt: &mut WordCount,
        recorder: &mut Recorder,
        inputs: &[(Value, u64)],
    ) -> (Result<()>, u32) {
        let mut run = TestRun::new("split");
        for (word, a) in inputs {
            run.push(std::slice::from_ref(word), if *a == 0 { Anchor::NONE } else { Anchor(*a) });
        }
        let mut taken = 0;
        let mut inputs = run.inputs(&mut taken);
        let mut collector = BasicBatchCollector::from_bolt_output(recorder.bolt_output());
        let result = bolt.execute_batch(&mut inputs, &mut collector);
        drop(collector);
        (result, taken)
    }

    #[test]
    fn a_run_is_counted_and_emitted_per_word_each_anchored_to_its_input() {
        let mut bolt = WordCount::default();
        let mut recorder = Recorder::default();
        let word = Value::from;
        let run = [(word("a"), 0), (word("b"), 0), (word("a"), 9), (word("a"), 0)];
        let (result, taken) = run_batch(&mut bolt, &mut recorder, &run);
        result.unwrap();
        assert_eq!(taken, 4);
        let emitted: Vec<_> =
            recorder.emitted.iter().map(|e| (e.values.clone(), e.anchors.clone())).collect();
        let tuple = |w: &str, c: u64| vec![Value::from(w), Value::U64(c)];
        assert_eq!(
            emitted,
            [
                (tuple("a", 1), vec![]),
                (tuple("b", 1), vec![]),
                (tuple("a", 2), vec![Anchor(9)]),
                (tuple("a", 3), vec![]),
            ]
        );
        assert_eq!(recorder.emit_many_calls, [2, 1], "untracked rows in one call each");
    }

    #[test]
    fn a_non_string_in_a_run_fails_alone_after_the_words_before_it() {
        let mut bolt = WordCount::default();
        let mut recorder = Recorder::default();
        let run = [(Value::from("a"), 0), (Value::I64(1), 0), (Value::from("a"), 0)];
        let (result, taken) = run_batch(&mut bolt, &mut recorder, &run);
        assert_eq!(result.unwrap_err().to_string(), "expected a word (a string), got I64(1)");
        assert_eq!(taken, 2, "the failing input is the one taken last");
        let (result, taken) = run_batch(&mut bolt, &mut recorder, &run[2..]);
        result.unwrap();
        assert_eq!(taken, 1);
        let counts: Vec<_> = recorder.emitted.iter().map(|e| e.values[1].clone()).collect();
        assert_eq!(counts, [Value::U64(1), Value::U64(2)]);
    }

    #[test]
    fn inputs_of_two_values_are_counted_by_their_first_as_one_value_inputs_are() {
        // Runs of one-value inputs take a path of their own (the values
        // read back to back); inputs with more values take the general
        // loop. Both count, emit, anchor and fail alike.
        let tagged = |w: Value| [w, Value::U64(0)];
        for wide in [false, true] {
            let mut bolt = WordCount::default();
            let mut recorder = Recorder::default();
            let inputs = [(Value::from("a"), 0), (Value::from("a"), 7), (Value::I64(1), 0)];
            let mut run = TestRun::new("split");
            for (v, a) in &inputs {
                let anchor = if *a == 0 { Anchor::NONE } else { Anchor(*a) };
                if wide {
                    run.push(&tagged(v.clone()), anchor);
                } else {
                    run.push(std::slice::from_ref(v), anchor);
                }
            }
            let mut taken = 0;
            let mut inputs = run.inputs(&mut taken);
            let mut collector = BasicBatchCollector::from_bolt_output(recorder.bolt_output());
            let err = bolt.execute_batch(&mut inputs, &mut collector).unwrap_err();
            drop(collector);
            assert_eq!(err.to_string(), "expected a word (a string), got I64(1)", "wide: {wide}");
            assert_eq!(taken, 3, "wide: {wide}");
            let emitted: Vec<_> =
                recorder.emitted.iter().map(|e| (e.values.clone(), e.anchors.clone())).collect();
            let tuple = |c: u64| vec![Value::from("a"), Value::U64(c)];
            assert_eq!(emitted, [(tuple(1), vec![]), (tuple(2), vec![Anchor(7)])], "wide: {wide}");
        }
    }

    #[test]
    fn words_are_counted_without_emitting_when_no_one_would_get_the_counts() {
        let mut bolt = WordCount::default();
        let mut recorder = Recorder::default();
        let mut run = TestRun::new("split");
        for v in [Value::from("a"), Value::from("b"), Value::from("a"), Value::I64(1)] {
            run.push(std::slice::from_ref(&v), Anchor::NONE);
        }
        run.unwire(StreamId::DEFAULT);
        let mut taken = 0;
        let mut inputs = run.inputs(&mut taken);
        let mut collector = BasicBatchCollector::from_bolt_output(recorder.bolt_output());
        let err = bolt.execute_batch(&mut inputs, &mut collector).unwrap_err();
        drop(collector);
        assert_eq!(err.to_string(), "expected a word (a string), got I64(1)");
        assert_eq!(taken, 4, "the non-string fails alone");
        assert!(recorder.emitted.is_empty() && recorder.emit_many_calls.is_empty());
        assert_eq!(bolt.report(), "wordcount: a 2\nwordcount: b 1\n");
    }

    #[test]
    fn emits_the_running_count_per_word() {
        let mut bolt = WordCount::default();
        let mut recorder = Recorder::default();
        for word in ["cow", "moon", "cow"] {
            execute(&mut bolt, &mut recorder, &[Value::from(word)], "default", "split");
        }
        let emitted: Vec<_> = recorder.emitted.iter().map(|e| e.values.clone()).collect();
        assert_eq!(
            emitted,
            [
                vec![Value::from("cow"), Value::U64(1)],
                vec![Value::from("moon"), Value::U64(1)],
                vec![Value::from("cow"), Value::U64(2)],
            ]
        );
    }

    #[test]
    fn ticks_are_not_counted() {
        let mut bolt = WordCount::default();
        let mut recorder = Recorder::default();
        execute(&mut bolt, &mut recorder, &[Value::U64(5)], TICK_STREAM, SYSTEM_COMPONENT);
        assert!(recorder.emitted.is_empty());
        assert!(bolt.counts.is_empty());
    }

    #[test]
    fn report_lists_words_sorted_in_the_documented_format() {
        let mut bolt = WordCount::default();
        for word in ["the", "cow", "the", "apple"] {
            bolt.count(word);
        }
        assert_eq!(bolt.report(), "wordcount: apple 1\nwordcount: cow 1\nwordcount: the 2\n");
        assert_eq!(WordCount::default().report(), "");
    }

    #[test]
    fn saved_counts_restore_into_a_fresh_bolt_and_add_up() {
        let mut bolt = WordCount::default();
        for word in ["cow", "moon", "cow"] {
            bolt.count(word);
        }
        let state = bolt.save_state().expect("word count has state");
        assert_eq!(state.format.as_str(), STATE_FORMAT);
        assert_eq!(state.entries.len(), 2, "one entry per word");

        let mut restored = WordCount::default();
        restored.restore_state(state.clone()).unwrap();
        assert_eq!(restored.report(), "wordcount: cow 2\nwordcount: moon 1\n");
        // Two tasks' states handed to one task add up.
        restored.restore_state(state).unwrap();
        assert_eq!(restored.report(), "wordcount: cow 4\nwordcount: moon 2\n");
        let mut recorder = Recorder::default();
        execute(&mut restored, &mut recorder, &[Value::from("moon")], "default", "split");
        assert_eq!(recorder.emitted[0].values, [Value::from("moon"), Value::U64(3)]);
    }

    #[test]
    fn restore_refuses_an_unknown_format_and_malformed_entries() {
        let mut bolt = WordCount::default();
        let err = bolt.restore_state(State::new("word-count/0")).unwrap_err().to_string();
        assert_eq!(err, "unknown state format `word-count/0` (expected `word-count/1`)");
        let mut short = State::new(STATE_FORMAT);
        short.push(&[Value::from("cow")], vec![1, 2, 3]);
        let err = bolt.restore_state(short).unwrap_err().to_string();
        assert_eq!(err, "a count that is not 8 bytes");
        let mut keyless = State::new(STATE_FORMAT);
        keyless.push(&[Value::U64(1)], 1u64.to_le_bytes().to_vec());
        let err = bolt.restore_state(keyless).unwrap_err().to_string();
        assert_eq!(err, "a count without its word");
        assert!(bolt.counts.is_empty(), "nothing was counted from refused states");
    }
}
