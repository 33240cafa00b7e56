//! [`SplitSentence`]: one sentence in, one tuple per word out.

use squall_plugin_api::prelude::*;

use crate::first_str;

/// Splits the sentence in the input's first value on whitespace and emits
/// each word on the default stream `["word"]`. Takes no config.
///
/// Words of up to 31 bytes are stored inline in the emitted value, so
/// splitting allocates nothing. An input whose first value is not a string
/// fails.
#[derive(Debug)]
pub struct SplitSentence;

impl BasicBolt for SplitSentence {
    const NAME: &'static str = "SplitSentence";
    const DESCRIPTION: &'static str = "splits each sentence into words";
    const CONFIG_KEYS: Option<&'static [ConfigKey]> = Some(&[]);

    fn declare_outputs(outputs: &mut OutputDeclarer) {
        outputs.declare(&["word"]);
    }

    fn new(_config: &ComponentConfig<'_>) -> Result<Self> {
        Ok(SplitSentence)
    }

    fn execute(&mut self, input: &Tuple<'_>, collector: &mut BasicCollector<'_>) -> Result<()> {
        for word in first_str(input, "a sentence")?.split_whitespace() {
            collector.emit(&[Value::from(word)]);
        }
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
        let mut recorder = Recorder::default();
        SplitSentence.execute(&input, &mut BasicCollector::new(recorder.output())).unwrap();
        assert_eq!(recorder.first_strings(), ["the", "cow", "jumped", "over"]);
        assert!(recorder
            .emitted
            .iter()
            .all(|e| e.values.len() == 1 && matches!(e.values[0], Value::SmallStr(_))));
    }

    #[test]
    fn a_non_string_input_fails() {
        let values = [Value::I64(1)];
        let input = Tuple::new(&values, &[], "sentences", "default", 1, Anchor(7));
        let mut recorder = Recorder::default();
        let err =
            SplitSentence.execute(&input, &mut BasicCollector::new(recorder.output())).unwrap_err();
        assert_eq!(err.to_string(), "expected a sentence (a string), got I64(1)");
    }
}
