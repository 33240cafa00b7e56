//! A squall state backend in a local file, with no server to run:
//! [`EmbeddedState`].
//!
//! Each namespace (a topology's state) is one [redb] file,
//! `PATH/NAMESPACE.redb`, holding:
//!
//! - a table `squall:meta` with the last committed checkpoint number;
//! - a table `s:SCOPE` per scope, record key → record value (bytes).
//!
//! A commit is one redb write transaction: every insert and delete, the
//! check that the checkpoint's number is above the last committed one, and
//! the new number, then `commit`, which fsyncs the file before it returns.
//! A crash at any point leaves the previous checkpoint or the new one,
//! never a mix. The file is locked (`flock`) while a process has it open:
//! a second process on the same namespace and path is refused at `open`
//! with one line. See `docs/state-backends.md`, "EmbeddedState".
//!
//! ```toml
//! [plugins]
//! state_embedded = "${SQUALL_PLUGIN_DIR:-../target/release}/libsquall_state_embedded.so"
//!
//! [state]
//! backend = "state_embedded::EmbeddedState"
//! config = { path = "${SQUALL_TOPOLOGY_DIR}/state" }
//! ```
//!
//! [redb]: https://docs.rs/redb

#![warn(missing_docs)]

mod backend;

pub use backend::EmbeddedState;

squall_plugin_api::export_plugin! {
    state_backends: [EmbeddedState],
}
