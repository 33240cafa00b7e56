//! [`PartialKeyGrouping`]: a custom grouping (contract 1.1) that balances
//! skewed keys with two choices per key.

use std::hash::{Hash, Hasher};

use rustc_hash::FxHasher;
use squall_plugin_api::prelude::*;

squall_plugin_api::declare_config! {
    /// The grouping's `config` table.
    #[derive(Debug, PartialEq)]
    struct PartialKeyConfig {
        fields: Vec<String> = required(Array, "the fields that make the key"),
    }
}

/// Partial-key grouping ("the power of two choices", Nasir et al., ICDE
/// 2015; Storm's `PartialKeyGrouping`): each key has two candidate tasks,
/// picked by two independent hashes of its fields, and every tuple goes to
/// whichever of the two this sender has sent fewer tuples to. A hot key is
/// split over two tasks instead of overloading one, and every key still
/// lands on at most two tasks, so a downstream count needs only a merge of
/// two partial counts per key.
///
/// The hashes are FxHash of the field values with two fixed seeds: every
/// host picks the same two candidates for a key. The second hash picks
/// among the tasks other than the first candidate, so with two or more
/// tasks the candidates always differ.
#[derive(Debug)]
pub struct PartialKeyGrouping {
    fields: Vec<String>,
    /// The key fields' positions in the stream.
    indexes: Vec<usize>,
    /// Tuples this sender sent to each target, by target index.
    sent: Vec<u64>,
}

impl PartialKeyGrouping {
    fn hash(&self, values: &[Value], seed: u64) -> u64 {
        let mut hasher = FxHasher::default();
        seed.hash(&mut hasher);
        for &i in &self.indexes {
            values.get(i).unwrap_or(&Value::Null).hash(&mut hasher);
        }
        let h = hasher.finish();
        h ^ (h >> 32)
    }

    /// The key's two candidate tasks (indexes), distinct when there are at
    /// least two targets: the second hash picks among the other targets.
    fn candidates(&self, values: &[Value]) -> (usize, usize) {
        let n = self.sent.len() as u64;
        let first = self.hash(values, 0x9E37_79B9_7F4A_7C15) % n;
        if n == 1 {
            return (0, 0);
        }
        let offset = 1 + self.hash(values, 0xC2B2_AE3D_27D4_EB4F) % (n - 1);
        (first as usize, ((first + offset) % n) as usize)
    }
}

impl Grouping for PartialKeyGrouping {
    const NAME: &'static str = "PartialKeyGrouping";
    const DESCRIPTION: &'static str =
        "balances skewed keys: each key goes to the less loaded of its two candidate tasks";
    const CONFIG_KEYS: Option<&'static [ConfigKey]> = Some(PartialKeyConfig::KEYS);

    fn new(config: &ComponentConfig<'_>) -> Result<Self> {
        let config = PartialKeyConfig::parse(config)?;
        if config.fields.is_empty() {
            return Err("fields must name at least one field".into());
        }
        Ok(Self { fields: config.fields, indexes: Vec::new(), sent: Vec::new() })
    }

    fn prepare(&mut self, context: &GroupingContext) -> Result<()> {
        self.indexes = self
            .fields
            .iter()
            .map(|name| {
                context.fields.iter().position(|f| f.as_str() == name).ok_or_else(|| {
                    let declared: Vec<&str> = context.fields.iter().map(|f| f.as_str()).collect();
                    format!(
                        "stream \"{}\" of \"{}\" has no field \"{name}\" (it has: {})",
                        context.stream,
                        context.source,
                        declared.join(", ")
                    )
                })
            })
            .collect::<std::result::Result<_, _>>()?;
        self.sent = vec![0; context.targets.len().max(1)];
        Ok(())
    }

    fn choose(&mut self, values: &[Value], targets: &mut Vec<u32>) {
        let (first, second) = self.candidates(values);
        let pick = if self.sent[second] < self.sent[first] { second } else { first };
        self.sent[pick] += 1;
        targets.push(pick as u32);
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{HashMap, HashSet};

    use super::*;

    fn grouping(targets: u32) -> PartialKeyGrouping {
        let mut g = PartialKeyGrouping::new(&ComponentConfig::new("fields = [\"word\"]")).unwrap();
        let context = GroupingContext {
            source: "split".into(),
            stream: "default".into(),
            fields: vec!["word".into()].into(),
            target: "count".into(),
            targets: (10..10 + targets).collect(),
        };
        g.prepare(&context).unwrap();
        g
    }

    /// A skewed stream: "hot" is half of all tuples, the rest spread over 200 keys.
    fn skewed(n: usize) -> Vec<String> {
        (0..n).map(|i| if i % 2 == 0 { "hot".into() } else { format!("w{}", i % 200) }).collect()
    }

    #[test]
    fn a_hot_key_is_split_over_two_tasks_and_the_load_stays_balanced() {
        let mut g = grouping(4);
        let mut load = [0u64; 4];
        let mut tasks_of: HashMap<String, HashSet<u32>> = HashMap::new();
        for word in skewed(100_000) {
            let mut out = Vec::new();
            g.choose(&[Value::from(word.as_str())], &mut out);
            assert_eq!(out.len(), 1);
            load[out[0] as usize] += 1;
            tasks_of.entry(word).or_default().insert(out[0]);
        }
        assert!(tasks_of.values().all(|t| t.len() <= 2), "a key reached more than two tasks");
        assert_eq!(tasks_of["hot"].len(), 2, "the hot key is split over its two candidates");
        // A fields grouping would send at least half of all tuples to the hot
        // key's task; two choices keep every task under 30 %.
        let max = *load.iter().max().unwrap() as f64 / 100_000.0;
        assert!(max < 0.30, "busiest task took {max:.3} of the tuples: {load:?}");
    }

    #[test]
    fn the_same_key_gets_the_same_two_candidates_on_every_host() {
        let (a, b) = (grouping(8), grouping(8));
        for word in ["x", "hot", "w17"] {
            let v = [Value::from(word)];
            let (first, second) = a.candidates(&v);
            assert_eq!((first, second), b.candidates(&v));
            assert_ne!(first, second, "two distinct candidates for {word}");
        }
    }

    #[test]
    fn a_missing_key_field_is_refused_at_prepare() {
        let mut g = PartialKeyGrouping::new(&ComponentConfig::new("fields = [\"wrod\"]")).unwrap();
        let context = GroupingContext {
            source: "split".into(),
            stream: "default".into(),
            fields: vec!["word".into()].into(),
            target: "count".into(),
            targets: vec![1, 2].into(),
        };
        let e = g.prepare(&context).unwrap_err().to_string();
        assert!(e.contains("no field \"wrod\""), "{e}");
    }
}
