//! [`DurableWordCount`]: [`WordCount`](crate::WordCount) with its counts in
//! a durable store (contract 1.2), so they survive a crash and follow their
//! words to whichever task counts them after a restart with another
//! parallelism.

use std::fmt::Write as _;
use std::io::Write as _;

use squall_plugin_api::prelude::*;

/// Counts words as [`WordCount`](crate::WordCount) does, in a
/// [`KeyValueState`] called `counts`, keyed by the word. The host
/// checkpoints the counts that changed into the topology's `[state]`
/// backend and restores them at start; at `cleanup` it prints every count it
/// holds, one `wordcount: <word> <count>` line each.
pub struct DurableWordCount {
    counts: KeyValueState<u64>,
}

impl std::fmt::Debug for DurableWordCount {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DurableWordCount").field("counts", &self.counts).finish()
    }
}

impl BasicBolt for DurableWordCount {
    const NAME: &'static str = "DurableWordCount";
    const DESCRIPTION: &'static str =
        "counts words in a durable store; prints the totals at shutdown";
    const CONFIG_KEYS: Option<&'static [ConfigKey]> = Some(&[]);
    const INPUT_FIELDS: &'static [&'static str] = &["word"];
    const STORES: Option<&'static [StoreSpec]> = Some(&[StoreSpec::keyed("counts")]);

    fn check_inputs(config: &ComponentConfig<'_>, inputs: &[InputDecl]) -> Result<()> {
        <crate::WordCount as BasicBolt>::check_inputs(config, inputs)
    }

    fn declare_outputs(outputs: &mut OutputDeclarer) {
        outputs.declare(&["word", "count"]);
    }

    fn new(_config: &ComponentConfig<'_>) -> Result<Self> {
        Ok(Self { counts: KeyValueState::new("counts") })
    }

    fn execute(&mut self, input: &Tuple<'_>, collector: &mut BasicCollector<'_>) -> Result<()> {
        if input.is_tick() {
            return Ok(());
        }
        let word = input.get(0).filter(|v| v.as_str().is_some()).ok_or("expected a word")?;
        let count = self.counts.entry(word);
        *count += 1;
        let count = *count;
        collector.emit(&[word.clone(), Value::U64(count)]);
        Ok(())
    }

    fn stores(&mut self) -> Stores<'_> {
        Stores::none().with(&mut self.counts)
    }

    fn cleanup(&mut self) {
        let mut sorted: Vec<(&str, u64)> =
            self.counts.iter().filter_map(|(w, c)| Some((w.as_str()?, *c))).collect();
        sorted.sort_unstable();
        let mut report = String::new();
        for (word, count) in sorted {
            let _ = writeln!(report, "wordcount: {word} {count}");
        }
        let mut stdout = std::io::stdout().lock();
        let _ = stdout.write_all(report.as_bytes()).and_then(|()| stdout.flush());
    }
}

#[cfg(test)]
mod tests {
    use squall_plugin_api::testing::Recorder;

    use super::*;

    #[test]
    fn counts_survive_a_checkpoint_and_a_restore_into_a_new_instance() {
        let config = ComponentConfig::new("");
        let mut bolt = DurableWordCount::new(&config).unwrap();
        let mut recorder = Recorder::default();
        for w in ["cow", "moon", "cow"] {
            let values = [Value::from(w)];
            let input = Tuple::new(&values, &[], "split", "default", 1, Anchor(1));
            bolt.execute(&input, &mut BasicCollector::new(recorder.output())).unwrap();
        }
        let changes = bolt.stores().take_changes().unwrap();
        let mut fresh = DurableWordCount::new(&config).unwrap();
        fresh.stores().restore(&changes).unwrap();
        assert_eq!(fresh.counts.get(&Value::from("cow")), Some(&2));
        assert_eq!(fresh.counts.get(&Value::from("moon")), Some(&1));
        assert!(fresh.stores().take_changes().unwrap().is_empty(), "restored counts are clean");
    }
}
