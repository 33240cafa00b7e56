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
}

#[cfg(test)]
mod tests {
    use super::*;
    use squall_plugin_api::testing::Recorder;

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
