//! File connectors for a machine with no broker.
//!
//! # Overview
//! - [`LineSpout`] emits the lines of a file, or of the files of a directory
//!   in name order, reliably (`["line", "file", "offset"]`). It records the
//!   contiguous acked prefix of its input in a checkpoint file beside the
//!   input and resumes there after a restart, so every line is delivered at
//!   least once across crashes. With `follow = true` it reads on at the end
//!   like `tail -F`, across rotation and truncation.
//! - [`JsonLinesSink`] appends each input tuple to a file as one JSON object
//!   keyed by field name and acks it only once written (and, under
//!   `fsync = "always"`, synced).
//!
//! Every config key, the guarantee and what happens on each failure are in
//! `docs/connectors.md`.
//!
//! # Example
//! ```toml
//! [plugins]
//! files = "../target/release/libsquall_files.so"
//! examples = "../target/release/libsquall_examples.so"
//!
//! [spouts.lines]
//! component = "files::LineSpout"
//! config = { path = "/var/log/app.log", follow = true }
//!
//! [bolts.split]
//! component = "examples::SplitSentence"
//! inputs = [{ from = "lines" }]
//!
//! [bolts.out]
//! component = "files::JsonLinesSink"
//! config = { path = "/tmp/words.jsonl", fsync = "interval" }
//! inputs = [{ from = "split" }]
//! ```

#![warn(missing_docs)]

pub mod checkpoint;
pub mod json;
pub mod pattern;
mod sink;
pub mod source;
mod spout;

pub use sink::{Fsync, JsonLinesSink};
pub use spout::LineSpout;

squall_plugin_api::export_plugin! {
    spouts: [LineSpout],
    bolts: [JsonLinesSink],
}

#[cfg(test)]
mod tests {
    use squall_plugin_api::abi::{ComponentKind, PluginSource};

    use super::*;

    #[test]
    fn catalogue_lists_the_spout_and_the_sink_with_their_fields() {
        let catalogue = __SquallPlugin::catalogue();
        assert_eq!(catalogue.plugin.as_str(), "squall-files");
        let listed: Vec<_> = catalogue
            .components
            .iter()
            .map(|c| {
                let fields: Vec<Vec<String>> = c
                    .outputs
                    .iter()
                    .map(|s| s.fields.iter().map(|f| f.to_string()).collect())
                    .collect();
                (c.kind, c.name.to_string(), c.auto_ack, fields)
            })
            .collect();
        assert_eq!(
            listed,
            [
                (
                    ComponentKind::SPOUT,
                    "LineSpout".to_owned(),
                    false,
                    vec![vec!["line".to_owned(), "file".to_owned(), "offset".to_owned()]]
                ),
                (ComponentKind::BOLT, "JsonLinesSink".to_owned(), false, vec![]),
            ]
        );
    }
}
