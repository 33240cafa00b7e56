//! The I/O thread's channel to `next_tuple`.
//!
//! The producer (the I/O thread) asks the broker for at most
//! [`Feeder::room`] messages, so the feed never holds much more than its
//! capacity, and a slow topology stops the reads: the messages stay on the
//! broker, where other consumers can take them. Each [`Feeder::push`] wakes
//! the spout's executor through the wake handle of contract 1.1 (one
//! atomic operation while the executor is busy), so an idle spout blocks
//! instead of polling.
//!
//! A producer that found no room can ask to be told when there is
//! ([`Feeder::on_room`] and [`Feeder::want_room`]): the consumer calls the
//! hook once when the feed has drained to half its capacity. Until armed,
//! that costs the consumer one relaxed atomic load per message.
//!
//! The channel itself never refuses a message: a broker that sends more
//! than was asked for (a JetStream pull may) is held, not dropped.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use crossbeam_channel::{Receiver, Sender, TryRecvError};
use squall_plugin_api::Waker;

type Hook = Box<dyn Fn() + Send + Sync>;

struct Shared {
    capacity: usize,
    armed: AtomicBool,
    closed: AtomicBool,
    on_room: OnceLock<Hook>,
}

/// The producer's end (module doc).
pub struct Feeder<T> {
    tx: Sender<T>,
    waker: Option<Waker>,
    shared: Arc<Shared>,
}

/// The consumer's end, read by `next_tuple`.
pub struct Feed<T> {
    rx: Receiver<T>,
    shared: Arc<Shared>,
    low_water: usize,
}

/// A feed of `capacity` messages (at least 1) that wakes `waker` on each push.
pub fn feed<T>(capacity: usize, waker: Option<Waker>) -> (Feeder<T>, Feed<T>) {
    let capacity = capacity.max(1);
    let (tx, rx) = crossbeam_channel::unbounded();
    let shared = Arc::new(Shared {
        capacity,
        armed: AtomicBool::new(false),
        closed: AtomicBool::new(false),
        on_room: OnceLock::new(),
    });
    (Feeder { tx, waker, shared: shared.clone() }, Feed { rx, shared, low_water: capacity / 2 })
}

impl<T> Feeder<T> {
    /// How many messages may be asked for now.
    #[inline]
    pub fn room(&self) -> usize {
        self.shared.capacity.saturating_sub(self.tx.len())
    }

    /// The capacity.
    pub fn capacity(&self) -> usize {
        self.shared.capacity
    }

    /// Messages waiting for the spout.
    pub fn len(&self) -> usize {
        self.tx.len()
    }

    /// True when none waits.
    pub fn is_empty(&self) -> bool {
        self.tx.is_empty()
    }

    /// Hands one message to the spout and wakes its executor. False when
    /// the spout is gone (the message then stays unacked on the broker).
    #[inline]
    pub fn push(&self, message: T) -> bool {
        if self.tx.send(message).is_err() {
            return false;
        }
        if let Some(w) = &self.waker {
            w.wake();
        }
        true
    }

    /// Sets the hook called when room appears after [`Feeder::want_room`]
    /// (once per feed; later calls are ignored).
    pub fn on_room(&self, hook: impl Fn() + Send + Sync + 'static) {
        let _ = self.shared.on_room.set(Box::new(hook));
    }

    /// Asks for the hook's call when the feed has drained to half. Check
    /// [`Feeder::room`] again after this call: room that appeared just
    /// before it is not announced.
    pub fn want_room(&self) {
        self.shared.armed.store(true, Ordering::SeqCst);
    }

    /// True when the spout has dropped its end.
    pub fn is_closed(&self) -> bool {
        self.shared.closed.load(Ordering::Relaxed)
    }
}

/// Why [`Feed::take`] returned nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Empty {
    /// Nothing waits now.
    Now,
    /// The I/O thread has ended: nothing will come.
    Closed,
}

impl<T> Feed<T> {
    /// The next message, without waiting.
    ///
    /// # Errors
    /// [`Empty::Now`] when none waits, [`Empty::Closed`] when the I/O
    /// thread has ended and the feed is empty.
    #[inline]
    pub fn take(&self) -> Result<T, Empty> {
        match self.rx.try_recv() {
            Ok(m) => {
                if self.shared.armed.load(Ordering::Relaxed) && self.rx.len() <= self.low_water {
                    self.room_appeared();
                }
                Ok(m)
            }
            Err(TryRecvError::Empty) => Err(Empty::Now),
            Err(TryRecvError::Disconnected) => Err(Empty::Closed),
        }
    }

    #[cold]
    fn room_appeared(&self) {
        if self.shared.armed.swap(false, Ordering::SeqCst) {
            if let Some(hook) = self.shared.on_room.get() {
                hook();
            }
        }
    }

    /// Messages waiting.
    pub fn len(&self) -> usize {
        self.rx.len()
    }

    /// True when none waits.
    pub fn is_empty(&self) -> bool {
        self.rx.is_empty()
    }
}

impl<T> Drop for Feed<T> {
    fn drop(&mut self) {
        self.shared.closed.store(true, Ordering::Relaxed);
        // A producer waiting for room must not wait for ever.
        if let Some(hook) = self.shared.on_room.get() {
            hook();
        }
    }
}

impl<T> std::fmt::Debug for Feeder<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Feeder")
            .field("capacity", &self.shared.capacity)
            .field("len", &self.tx.len())
            .finish()
    }
}

impl<T> std::fmt::Debug for Feed<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Feed")
            .field("capacity", &self.shared.capacity)
            .field("len", &self.rx.len())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;

    use super::*;

    #[test]
    fn room_shrinks_with_pushes_and_the_producer_is_told_when_it_drained() {
        let wakes = Arc::new(AtomicUsize::new(0));
        let w = wakes.clone();
        let (tx, rx) = feed::<u32>(
            4,
            Some(Waker::from_fn(move || {
                w.fetch_add(1, Ordering::Relaxed);
            })),
        );
        let rooms = Arc::new(AtomicUsize::new(0));
        let r = rooms.clone();
        tx.on_room(move || {
            r.fetch_add(1, Ordering::Relaxed);
        });
        for i in 0..5 {
            assert!(tx.push(i), "never refused, even past the capacity");
        }
        assert_eq!(wakes.load(Ordering::Relaxed), 5, "one wake per push");
        assert_eq!(tx.room(), 0);
        tx.want_room();
        assert_eq!(rx.take(), Ok(0));
        assert_eq!(rx.take(), Ok(1));
        assert_eq!(rooms.load(Ordering::Relaxed), 0, "3 left: above half");
        assert_eq!(rx.take(), Ok(2));
        assert_eq!(rooms.load(Ordering::Relaxed), 1, "2 left: told");
        assert_eq!(rx.take(), Ok(3));
        assert_eq!(rooms.load(Ordering::Relaxed), 1, "once per want_room");
        assert_eq!(rx.take(), Ok(4));
        assert_eq!(rx.take(), Err(Empty::Now));
        drop(tx);
        assert_eq!(rx.take(), Err(Empty::Closed));
    }
}
