//! The host's side of a collector, as plugins see it across the boundary.

use abi_stable::{
    sabi_trait,
    sabi_types::RMut,
    std_types::{ROption, RSlice},
};

use crate::{Anchor, MessageId, Value};

/// Implemented by the host; a plugin calls it to emit, ack, fail and reset timeouts.
///
/// One object serves spouts and bolts: spouts pass a message id and no anchors,
/// bolts pass anchors and no message id.
#[sabi_trait]
pub trait Output {
    /// Emits `values` on output stream `stream` (an index into the declared
    /// streams, or `u32::MAX` for `"default"`). `direct_task` is set for
    /// `emit_direct`. Errors (undeclared stream, bad direct task) are recorded by
    /// the host and reported when the current call returns.
    fn emit(
        &mut self,
        stream: u32,
        values: RSlice<'_, Value>,
        anchors: RSlice<'_, Anchor>,
        message_id: ROption<MessageId>,
        direct_task: ROption<u32>,
    );

    /// Acks an input tuple.
    fn ack(&mut self, anchor: Anchor);

    /// Fails an input tuple; its whole tree fails at once.
    fn fail(&mut self, anchor: Anchor);

    /// Restarts the message timeout of the tree an input tuple belongs to.
    // Evolution rule: this is the last field of contract 1.0's prefix. Never move
    // it; new methods go after it, with default bodies.
    #[sabi(last_prefix_field)]
    fn reset_timeout(&mut self, anchor: Anchor);
}

/// A borrowed [`Output`] object, valid for one call.
pub type OutputMut<'a> = Output_TO<'a, RMut<'a, ()>>;
