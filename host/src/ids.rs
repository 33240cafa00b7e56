//! Identifier newtypes shared by the acker, the executors and the timeout maps.
//!
//! Storm passes root ids, edge ids and task ids around as bare `long`s and
//! `int`s. squall wraps each one in its own type (STYLE.md §2.5). The acker XORs
//! edge ids together, and handing it a root id by mistake would corrupt its
//! bookkeeping without any error, so the compiler has to catch the mix-up.
//!
//! - [`RootId`]: the random 64-bit id of a spout tuple tree (Storm's
//!   `MessageId` root, drawn with `MessageId.generateId`).
//! - [`EdgeId`]: the random 64-bit id of one edge of a tree, meaning one tuple
//!   sent to one task. A XOR of several edge ids is also an `EdgeId`: it is the
//!   value that `__ack_init` and `__ack_ack` messages carry.
//! - [`TaskId`]: the id of a task (one instance of a component).

use std::ops::{BitXor, BitXorAssign};

/// The random 64-bit id of a spout tuple tree.
///
/// A spout gets a fresh root id for each tuple that it emits with a message id.
/// The acker keys its ledger by root id, and acker tasks split the roots among
/// themselves by hashing it (see `acker::ledger::acker_for`).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RootId(pub u64);

/// The random 64-bit id of one edge of a tuple tree, or the XOR of several.
///
/// Each tuple sent to a task gets a fresh edge id. The acker learns each edge
/// id twice: once when the edge is created (in the spout's init value, or in
/// the ack value of the bolt that emitted it) and once when it is acked. The
/// two XORs cancel, so the tree is complete when the XOR of everything the
/// acker has heard is zero. Use `^` to combine ids and [`EdgeId::xor_all`] to
/// fold a list.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EdgeId(pub u64);

impl EdgeId {
    /// The XOR of no edge ids: the ack value of a complete tree.
    pub const ZERO: EdgeId = EdgeId(0);

    /// XORs all `ids` together. The result is [`EdgeId::ZERO`] for an empty list.
    ///
    /// ```
    /// # use squall_host::ids::EdgeId;
    /// let init_val = EdgeId::xor_all([EdgeId(0b01), EdgeId(0b10)]);
    /// assert_eq!(init_val, EdgeId(0b11));
    /// assert_eq!(EdgeId::xor_all([]), EdgeId::ZERO);
    /// ```
    pub fn xor_all<I: IntoIterator<Item = EdgeId>>(ids: I) -> EdgeId {
        ids.into_iter().fold(EdgeId::ZERO, |acc, id| acc ^ id)
    }
}

impl BitXor for EdgeId {
    type Output = EdgeId;

    fn bitxor(self, rhs: EdgeId) -> EdgeId {
        EdgeId(self.0 ^ rhs.0)
    }
}

impl BitXorAssign for EdgeId {
    fn bitxor_assign(&mut self, rhs: EdgeId) {
        self.0 ^= rhs.0;
    }
}

/// The id of one task, i.e. one instance of a spout, bolt or acker.
///
/// The acker remembers the spout task of each root so that it can send that
/// task the root's ack or fail (Storm's `emitDirect` to `spout-task`).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TaskId(pub u32);

impl TaskId {
    /// The `__system` task: the source of tick tuples (Storm's task -1).
    pub const SYSTEM: TaskId = TaskId(u32::MAX);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xoring_an_edge_id_twice_cancels_it() {
        let mut val = EdgeId(0xdead_beef);
        val ^= EdgeId(0x1234);
        val ^= EdgeId(0x1234);
        assert_eq!(val, EdgeId(0xdead_beef));
        assert_eq!(val ^ val, EdgeId::ZERO);
    }

    #[test]
    fn xor_all_folds_every_id() {
        let ids = [EdgeId(1), EdgeId(2), EdgeId(4)];
        assert_eq!(EdgeId::xor_all(ids), EdgeId(7));
        assert_eq!(EdgeId::xor_all(ids.iter().copied().chain(ids)), EdgeId::ZERO);
    }
}
