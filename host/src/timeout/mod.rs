//! Message timeouts (seed 003): the pending maps that expire tuple trees.
//!
//! Storm keeps every in-flight root in a [`RotatingMap`]: the spout's pending
//! map has 2 buckets and the acker's has 3. A tick every
//! `message_timeout_secs` rotates the map, and whatever falls out of the
//! oldest bucket has timed out. For the spout, a timed-out entry means
//! `fail(msg_id)` with reason TIMEOUT. The acker drops its entries silently.
//! `reset_timeout` moves a root back to the newest bucket.
//!
//! [`rotating_map`] holds the pure data structure, which has no clock and no
//! threads. The caller decides when to rotate, which is where the period `T`
//! comes from. The module doc of [`rotating_map`] states the expiry law: with
//! 2 buckets, an entry expires between `T` and `2T` after it was last put.

pub mod rotating_map;

pub use rotating_map::RotatingMap;
