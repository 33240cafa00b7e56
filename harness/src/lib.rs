//! Runs a squall topology in process, on fixed input tuples, until it
//! completes: Storm's `Testing.completeTopology` for plugin authors.
//!
//! The topology runs on the real host (`squall-host`: binding, executors,
//! groupings, acker, message timeouts, drain), in the test's own process.
//! The plugin under test is not loaded from its `.so`: a plugin crate built
//! with `crate-type = ["cdylib", "rlib"]` is linked into its own tests, and
//! [`Harness::plugin`] hands the `__SquallPlugin` type that `export_plugin!`
//! generates to the host, which reads its root module exactly as it reads a
//! loaded library's (contract check, host services, panic strategy), without
//! `dlopen`.
//!
//! - [`Harness::feed`] replaces a spout of the topology with a feeder that
//!   declares the same streams and emits the given tuples once each,
//!   reliably, with message id = the tuple's position in the feed, and never
//!   replays.
//! - A capture bolt is subscribed to every non-direct stream of every
//!   component; [`Completed::emitted`] lists what each component emitted.
//! - [`Harness::run_until_complete`] returns once every fed tuple has been
//!   acked or failed (a message timeout counts as a fail) and the topology
//!   has drained: every queue empty, every bolt done executing.
//!
//! ```
//! use std::time::Duration;
//! use squall_harness::Harness;
//! use squall_plugin_api::{MessageId, Value};
//!
//! let done = Harness::new(
//!     r#"
//!     [spouts.sentences]
//!     component = "examples::RandomSentenceSpout"
//!
//!     [bolts.split]
//!     component = "examples::SplitSentence"
//!     inputs = [{ from = "sentences" }]
//!     "#,
//! )
//! .plugin::<squall_examples::__SquallPlugin>("examples")
//! .feed("sentences", vec![vec![Value::from("a b a")]])
//! .run_until_complete(Duration::from_secs(10))
//! .unwrap();
//! assert_eq!(done.acked_by("sentences"), [MessageId(0)]);
//! assert_eq!(done.values("split", "default").len(), 3);
//! ```
//!
//! The harness itself lives in the host (`squall_host::harness`), where
//! `squall test` runs the `[[tests]]` of a topology file on it; this crate
//! re-exports it for plugin tests.
//!
//! Limits: tuples on direct streams are not captured (a capture bolt cannot
//! subscribe to them), and a fed spout runs one task. Spouts that are not fed
//! run as written and their tuples are captured too, but completion counts
//! only fed tuples. Only one plugin crate that calls `export_plugin!` can be
//! linked into one test binary (its root-module symbol is exported by name).

#![warn(missing_docs)]

pub use squall_host::harness::{injector, Completed, FedTuple, Harness, HarnessError, STEP};
