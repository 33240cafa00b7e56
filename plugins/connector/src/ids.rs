//! The one message-id policy of every connector.
//!
//! A spout's message ids come back to it in `ack` and `fail`. After a panic
//! the host rebuilds the instance, and acks for the predecessor's ids may
//! still arrive: an id must never be reused, so a new instance cannot take
//! one for its own. Ids are drawn from one counter for the whole process
//! (every task of every connector built on this crate in this library),
//! starting at 1. They grow, so a spout may also use them as its reading
//! order (the file spout does).

use std::sync::atomic::{AtomicU64, Ordering};

static NEXT: AtomicU64 = AtomicU64::new(1);

/// Hands out message ids (see the module doc). Cheap: one relaxed atomic
/// add per id, no lock, no system call.
#[derive(Debug, Clone, Copy, Default)]
pub struct MessageIds;

impl MessageIds {
    /// The next id: unique in this process, and greater than every id
    /// handed out before it.
    #[inline]
    pub fn next(self) -> u64 {
        NEXT.fetch_add(1, Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_grow_and_never_repeat_across_instances_and_threads() {
        let a = MessageIds;
        let first = a.next();
        let handles: Vec<_> = (0..4)
            .map(|_| {
                std::thread::spawn(|| (0..1000).map(|_| MessageIds.next()).collect::<Vec<_>>())
            })
            .collect();
        let mut all: Vec<u64> = handles.into_iter().flat_map(|h| h.join().unwrap()).collect();
        all.push(first);
        let n = all.len();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), n, "no id twice");
        assert!(MessageIds.next() > first);
    }
}
