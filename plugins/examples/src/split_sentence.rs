//! [`SplitSentence`]: one sentence in, one tuple per word out.

use squall_plugin_api::prelude::*;

use crate::first_str;

/// Splits the sentence in the input's first value on whitespace and emits
/// each word on the default stream `["word"]`. Takes no config.
///
/// Words of up to 31 bytes are stored inline in the emitted value, so
/// splitting allocates nothing. The words of one sentence go to the host in
/// one `emit_many` call. An input whose first value is not a string fails.
#[derive(Debug, Default)]
pub struct SplitSentence {
    /// The words of the sentence being split (kept to reuse its capacity).
    words: Vec<Value>,
}

impl SplitSentence {
    /// Emits the words buffered for untracked sentences, in one call.
    fn flush(&mut self, untracked: Option<Tuple<'_>>, collector: &mut BasicBatchCollector<'_>) {
        if let Some(input) = untracked {
            if !self.words.is_empty() {
                collector.for_input(&input).emit_many(self.words.len(), &self.words);
            }
        }
        self.words.clear();
    }
}

impl BasicBolt for SplitSentence {
    const NAME: &'static str = "SplitSentence";
    const DESCRIPTION: &'static str = "splits each sentence into words";
    const CONFIG_KEYS: Option<&'static [ConfigKey]> = Some(&[]);

    fn declare_outputs(outputs: &mut OutputDeclarer) {
        outputs.declare(&["word"]);
    }

    fn new(_config: &ComponentConfig<'_>) -> Result<Self> {
        Ok(SplitSentence::default())
    }

    fn execute(&mut self, input: &Tuple<'_>, collector: &mut BasicCollector<'_>) -> Result<()> {
        self.words.clear();
        self.words.extend(first_str(input, "a sentence")?.split_whitespace().map(Value::from));
        collector.emit_many(self.words.len(), &self.words);
        Ok(())
    }

    /// A run of sentences (contract 1.3): the words of consecutive untracked
    /// sentences go to the host in one `emit_many` (none of them is
    /// anchored, so whose collector carries them does not matter); a
    /// tracked sentence's words in one of their own, anchored to it. A
    /// sentence that is not a string fails alone, after the words of the
    /// sentences before it were emitted, as one `execute` per sentence.
    fn execute_batch(
        &mut self,
        inputs: &mut Inputs<'_, '_>,
        collector: &mut BasicBatchCollector<'_>,
    ) -> Result<()> {
        self.words.clear();
        // The last untracked sentence whose words are in `self.words`.
        let mut untracked: Option<Tuple<'_>> = None;
        for input in inputs {
            let sentence = match first_str(&input, "a sentence") {
                Ok(sentence) => sentence,
                Err(e) => {
                    self.flush(untracked, collector);
                    return Err(e);
                }
            };
            if input.anchor() == Anchor::NONE {
                push_words(&mut self.words, sentence);
                untracked = Some(input);
                continue;
            }
            self.flush(untracked.take(), collector);
            push_words(&mut self.words, sentence);
            collector.for_input(&input).emit_many(self.words.len(), &self.words);
            self.words.clear();
        }
        self.flush(untracked, collector);
        Ok(())
    }
}

/// Appends the words of `sentence` to `words`, each built in place
/// ([`Value::push_str`]: a word built on the stack and then pushed makes
/// the push wait for the narrow stores that built it).
fn push_words(words: &mut Vec<Value>, sentence: &str) {
    for word in sentence.split_whitespace() {
        Value::push_str(words, word);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use squall_plugin_api::testing::{Recorder, TestRun};

    #[test]
    fn emits_one_tuple_per_word() {
        let values = [Value::from("  the cow\tjumped \n over ")];
        let input = Tuple::new(&values, &[], "sentences", "default", 1, Anchor(7));
        let mut bolt = SplitSentence::default();
        let mut recorder = Recorder::default();
        bolt.execute(&input, &mut BasicCollector::new(recorder.output())).unwrap();
        assert_eq!(recorder.first_strings(), ["the", "cow", "jumped", "over"]);
        assert!(recorder
            .emitted
            .iter()
            .all(|e| e.values.len() == 1 && matches!(e.values[0], Value::SmallStr(_))));
        assert!(recorder.emit_many_calls.is_empty(), "a 1.0 output takes one emit per word");
    }

    #[test]
    fn a_1_2_output_takes_the_words_of_a_sentence_in_one_call() {
        let mut bolt = SplitSentence::default();
        let mut recorder = Recorder::default();
        for sentence in ["a b c", "", "d e"] {
            let values = [Value::from(sentence)];
            let input = Tuple::new(&values, &[], "sentences", "default", 1, Anchor(7));
            bolt.execute(&input, &mut BasicCollector::from_bolt_output(recorder.bolt_output()))
                .unwrap();
        }
        assert_eq!(recorder.first_strings(), ["a", "b", "c", "d", "e"]);
        assert_eq!(recorder.emit_many_calls, [3, 0, 2]);
        assert_eq!(recorder.refused, 0);
    }

    /// Runs one `execute_batch` over `(value, anchor)` inputs (anchor 0:
    /// untracked); returns the result and how many inputs were taken.
    fn run_batch(
        bolt: &mut SplitSentence,
        recorder: &mut Recorder,
        inputs: &[(Value, u64)],
    ) -> (Result<()>, u32) {
        let mut run = TestRun::new("sentences");
        for (v, a) in inputs {
            run.push(std::slice::from_ref(v), if *a == 0 { Anchor::NONE } else { Anchor(*a) });
        }
        let mut taken = 0;
        let mut run = run.inputs(&mut taken);
        let mut collector = BasicBatchCollector::from_bolt_output(recorder.bolt_output());
        let result = bolt.execute_batch(&mut run, &mut collector);
        drop(collector);
        (result, taken)
    }

    #[test]
    fn a_run_of_untracked_sentences_goes_out_in_one_call_a_tracked_one_anchored() {
        let mut bolt = SplitSentence::default();
        let mut recorder = Recorder::default();
        let run = [
            (Value::from("a b"), 0),
            (Value::from("c"), 0),
            (Value::from("d e"), 7),
            (Value::from(""), 0),
            (Value::from("f"), 0),
        ];
        let (result, taken) = run_batch(&mut bolt, &mut recorder, &run);
        result.unwrap();
        assert_eq!(taken, 5);
        assert_eq!(recorder.first_strings(), ["a", "b", "c", "d", "e", "f"]);
        assert_eq!(recorder.emit_many_calls, [3, 2, 1]);
        let anchors: Vec<_> = recorder.emitted.iter().map(|e| e.anchors.clone()).collect();
        let none = Vec::new;
        assert_eq!(
            anchors,
            [none(), none(), none(), vec![Anchor(7)], vec![Anchor(7)], none()],
            "only the tracked sentence's words are anchored, to it"
        );
    }

    #[test]
    fn a_non_string_in_a_run_fails_alone_after_the_words_before_it() {
        let mut bolt = SplitSentence::default();
        let mut recorder = Recorder::default();
        let run = [(Value::from("a b"), 0), (Value::U64(3), 0), (Value::from("c"), 0)];
        let (result, taken) = run_batch(&mut bolt, &mut recorder, &run);
        assert_eq!(result.unwrap_err().to_string(), "expected a sentence (a string), got U64(3)");
        assert_eq!(taken, 2, "the failing input is the one taken last");
        assert_eq!(recorder.first_strings(), ["a", "b"]);
        // The host hands the rest to the next call.
        let (result, taken) = run_batch(&mut bolt, &mut recorder, &run[2..]);
        result.unwrap();
        assert_eq!(taken, 1);
        assert_eq!(recorder.first_strings(), ["a", "b", "c"]);
    }

    #[test]
    fn a_non_string_input_fails() {
        let values = [Value::I64(1)];
        let input = Tuple::new(&values, &[], "sentences", "default", 1, Anchor(7));
        let mut recorder = Recorder::default();
        let err = SplitSentence::default()
            .execute(&input, &mut BasicCollector::new(recorder.output()))
            .unwrap_err();
        assert_eq!(err.to_string(), "expected a sentence (a string), got I64(1)");
    }
}
