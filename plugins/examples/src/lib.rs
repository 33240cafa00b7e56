//! Word count, squall's "hello world": what a third-party plugin looks like.
//!
//! # Overview
//! - [`RandomSentenceSpout`] emits sentences (`["sentence"]`), picked at random
//!   or in order, reliably by default: failed sentences are replayed.
//! - [`SplitSentence`] splits each sentence into words (`["word"]`).
//! - [`WordCount`] counts the words it sees (`["word", "count"]`) and prints
//!   its totals at shutdown, one `wordcount: <word> <count>` line per word.
//! - [`RollingTopN`] (a windowed bolt) ranks the words of each window.
//! - [`Project`] keeps the fields its config lists: its outputs are declared
//!   from its config.
//! - [`PartialKeyGrouping`] is a custom grouping (two candidate tasks per key).
//!
//! This is Storm's `WordCountTopology` (storm-starter), with the spout's
//! sentences and the bolts' behaviour kept the same.
//!
//! # Example
//! ```toml
//! [plugins]
//! examples = "../target/release/libsquall_examples.so"
//!
//! [spouts.sentences]
//! component = "examples::RandomSentenceSpout"
//! config = { seed = 7, order = "cycle", limit = 1000 }
//!
//! [bolts.split]
//! component = "examples::SplitSentence"
//! inputs = [{ from = "sentences", grouping = "shuffle" }]
//!
//! [bolts.count]
//! component = "examples::WordCount"
//! inputs = [{ from = "split", grouping = { fields = ["word"] } }]
//! ```

#![warn(missing_docs)]

mod durable_count;
mod partial_key;
mod project;
mod random_sentence;
mod rolling_top_n;
mod split_sentence;
mod word_count;

use squall_plugin_api::{Result, Tuple};

pub use durable_count::DurableWordCount;
pub use partial_key::PartialKeyGrouping;
pub use project::Project;
pub use random_sentence::{Order, RandomSentenceSpout};
pub use rolling_top_n::RollingTopN;
pub use split_sentence::SplitSentence;
pub use word_count::WordCount;

squall_plugin_api::export_plugin! {
    spouts: [RandomSentenceSpout],
    basic_bolts: [SplitSentence, WordCount, Project, DurableWordCount],
    windowed_bolts: [RollingTopN],
    groupings: [PartialKeyGrouping],
}

/// The input's first value as a string, or an error naming what was expected.
fn first_str<'a>(input: &Tuple<'a>, what: &str) -> Result<&'a str> {
    match input.get(0) {
        Some(value) => value
            .as_str()
            .ok_or_else(|| format!("expected {what} (a string), got {value:?}").into()),
        None => Err(format!("expected {what} (a string), got an empty tuple").into()),
    }
}

#[cfg(test)]
mod tests {
    use squall_plugin_api::abi::{ComponentKind, PluginSource};
    use squall_plugin_api::{Anchor, Value};

    use super::*;

    #[test]
    fn catalogue_lists_the_1_0_components_with_their_fields() {
        let catalogue = __SquallPlugin::catalogue();
        assert_eq!(catalogue.plugin.as_str(), "squall-examples");
        let listed: Vec<_> = catalogue
            .components
            .iter()
            .map(|c| {
                let streams: Vec<_> = c
                    .outputs
                    .iter()
                    .map(|s| {
                        (
                            s.name.to_string(),
                            s.fields.iter().map(|f| f.to_string()).collect::<Vec<_>>(),
                        )
                    })
                    .collect();
                (c.kind, c.name.to_string(), c.auto_ack, streams)
            })
            .collect();
        let default = |fields: &[&str]| {
            vec![("default".to_owned(), fields.iter().map(|f| f.to_string()).collect())]
        };
        assert_eq!(
            listed,
            vec![
                (
                    ComponentKind::SPOUT,
                    "RandomSentenceSpout".to_owned(),
                    false,
                    default(&["sentence"])
                ),
                (ComponentKind::BOLT, "SplitSentence".to_owned(), true, default(&["word"])),
                (ComponentKind::BOLT, "WordCount".to_owned(), true, default(&["word", "count"])),
                // Its streams come from its config: the 1.0 descriptor has none.
                (ComponentKind::BOLT, "Project".to_owned(), true, vec![]),
                (
                    ComponentKind::BOLT,
                    "DurableWordCount".to_owned(),
                    true,
                    default(&["word", "count"])
                ),
            ]
        );
    }

    #[test]
    fn first_str_names_what_it_expected() {
        let values = [Value::U64(3)];
        let input = Tuple::new(&values, &[], "spout", "default", 1, Anchor::NONE);
        assert_eq!(
            first_str(&input, "a word").unwrap_err().to_string(),
            "expected a word (a string), got U64(3)"
        );
        let empty = Tuple::new(&[], &[], "spout", "default", 1, Anchor::NONE);
        assert_eq!(
            first_str(&empty, "a word").unwrap_err().to_string(),
            "expected a word (a string), got an empty tuple"
        );
    }
}
