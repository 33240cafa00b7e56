//! The acker (seed 004): tracks every spout tuple tree and reports to the
//! spout when the tree is fully processed or has failed.
//!
//! This is Storm's at-least-once machinery. Each root (spout tuple) has an
//! `ack_val`, the XOR of every edge id the acker has heard of. A tree is
//! complete when `ack_val` returns to zero. An explicit fail anywhere fails
//! the root at once.
//!
//! - [`msg`] holds the protocol's messages.
//! - [`ledger`] is the pure bookkeeping: Storm's `Acker.execute` without
//!   threads, clocks or messages. It also holds [`acker_for`], which routes a
//!   root to one of several acker tasks.

pub mod ledger;
pub mod msg;
pub mod task;

pub use ledger::{acker_for, AckLedger, Completion, Outcome};
