//! [`RollingTopN`]: the most frequent words of each window (Storm's rolling
//! top words, as a windowed bolt).

use rustc_hash::FxHashMap;

use squall_plugin_api::prelude::*;

use crate::first_str;

squall_plugin_api::declare_config! {
    /// The bolt's `config` table.
    #[derive(Debug, Clone, PartialEq)]
    struct RollingTopNConfig {
        top_n: u32 = default(Integer, "3", "how many words each ranking holds"),
    }
}

/// Counts the words (each input's first value) of every window and emits
/// its top `top_n` words, most frequent first, as one `(rank, word, count)`
/// tuple each on the default stream `["rank", "word", "count"]` (rank 1 is
/// the most frequent; ties go to the smaller word). The window is set in
/// the topology (`window = { length = "10s", slide = "2s" }`); every emit
/// is anchored by the host to the window's tuples.
///
/// It keeps running counts: it adds the window's new tuples and takes away
/// its expired ones, so a sliding window costs what slid, not its length.
#[derive(Debug, Default)]
pub struct RollingTopN {
    top_n: usize,
    counts: FxHashMap<String, u64>,
}

impl RollingTopN {
    /// The current ranking: at most `top_n` `(word, count)`, most frequent
    /// first, ties by word.
    fn ranking(&self) -> Vec<(&str, u64)> {
        let mut all: Vec<(&str, u64)> = self.counts.iter().map(|(w, c)| (w.as_str(), *c)).collect();
        all.sort_unstable_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        all.truncate(self.top_n);
        all
    }
}

impl WindowedBolt for RollingTopN {
    const NAME: &'static str = "RollingTopN";
    const DESCRIPTION: &'static str = "emits the top N words of each window as (rank, word, count)";
    const CONFIG_KEYS: Option<&'static [ConfigKey]> = Some(RollingTopNConfig::KEYS);
    const INPUT_FIELDS: &'static [&'static str] = &["word"];

    fn declare_outputs(outputs: &mut OutputDeclarer) {
        outputs.declare(&["rank", "word", "count"]);
    }

    fn new(config: &ComponentConfig<'_>) -> Result<Self> {
        let config = RollingTopNConfig::parse(config)?;
        if config.top_n == 0 {
            return Err("top_n must be at least 1".into());
        }
        Ok(Self { top_n: config.top_n as usize, counts: FxHashMap::default() })
    }

    fn execute(&mut self, window: &Window<'_>, collector: &mut BasicCollector<'_>) -> Result<()> {
        for tuple in window.new_tuples() {
            let word = first_str(tuple, "a word")?;
            *self.counts.entry(word.to_owned()).or_default() += 1;
        }
        for tuple in window.expired() {
            let word = first_str(tuple, "a word")?;
            if let Some(count) = self.counts.get_mut(word) {
                *count -= 1;
                if *count == 0 {
                    self.counts.remove(word);
                }
            }
        }
        for (rank, (word, count)) in self.ranking().into_iter().enumerate() {
            collector.emit(&[Value::U64(rank as u64 + 1), Value::from(word), Value::U64(count)]);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use squall_plugin_api::abi::WindowView;
    use squall_plugin_api::testing::Recorder;

    fn words(list: &[&str]) -> Vec<Vec<Value>> {
        list.iter().map(|w| vec![Value::from(*w)]).collect()
    }

    fn run(bolt: &mut RollingTopN, new: &[Vec<Value>], expired: &[Vec<Value>]) -> Vec<String> {
        fn view(v: &[Value]) -> Tuple<'_> {
            Tuple::new(v, &[], "src", "default", 0, Anchor::NONE)
        }
        let new: Vec<Tuple<'_>> = new.iter().map(|v| view(v)).collect();
        let expired: Vec<Tuple<'_>> = expired.iter().map(|v| view(v)).collect();
        let view = WindowView {
            tuples: new.as_slice().into(),
            new_tuples: new.as_slice().into(),
            expired: expired.as_slice().into(),
            start_millis: 0,
            end_millis: 0,
        };
        let mut recorder = Recorder::default();
        {
            let mut collector = BasicCollector::new(recorder.output());
            bolt.execute(&Window::new(&view), &mut collector).unwrap();
        }
        recorder
            .emitted
            .iter()
            .map(|e| format!("{:?} {:?} {:?}", e.values[0], e.values[1].as_str(), e.values[2]))
            .collect()
    }

    #[test]
    fn ranks_the_window_and_forgets_expired_words() {
        let mut bolt = RollingTopN { top_n: 2, counts: FxHashMap::default() };
        let first = words(&["b", "a", "b", "c", "a", "b"]);
        assert_eq!(
            run(&mut bolt, &first, &[]),
            vec!["U64(1) Some(\"b\") U64(3)", "U64(2) Some(\"a\") U64(2)"]
        );
        // "b" x3 leave, "c" arrives: c 2, a 2 (tie by word: a first).
        let second = words(&["c"]);
        let gone = words(&["b", "b", "b"]);
        assert_eq!(
            run(&mut bolt, &second, &gone),
            vec!["U64(1) Some(\"a\") U64(2)", "U64(2) Some(\"c\") U64(2)"]
        );
        assert!(!bolt.counts.contains_key("b"));
    }
}
