//! [`Canceler`]: the shared "stop waiting" signal: it ends throttled waits,
//! wait strategies' sleeps, the acker's and the control plane's timed waits
//! (the topology's drain cancels it). It began as HDFS's throttler canceler:
//!
//! HDFS passes a `Canceler` to `DataTransferThrottler.throttle` and checks
//! `isCancelled()` before each wait; an in-progress `wait()` is only ended by a
//! thread interrupt. Here the canceler also owns the condition variable that real
//! waits block on, so [`Canceler::cancel`] ends a wait that is already in progress
//! at once, which is what a graceful shutdown needs.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, Receiver, Sender};

/// A clonable, shared cancellation flag that also wakes sleepers.
///
/// All clones refer to the same flag. Once canceled it stays canceled.
#[derive(Debug, Clone, Default)]
pub struct Canceler {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    /// Lock-free copy of the flag for cheap polling.
    canceled: AtomicBool,
    /// The flag as seen under the lock, paired with `wake`.
    locked: Mutex<bool>,
    /// Notified once, by `cancel`.
    wake: Condvar,
    /// Dropped by `cancel`, which disconnects `closed`.
    open: Mutex<Option<Sender<()>>>,
    /// Never receives a message; disconnected (so ready) once canceled.
    closed: Receiver<()>,
}

impl Default for Inner {
    fn default() -> Self {
        let (open, closed) = bounded(0);
        Self {
            canceled: AtomicBool::new(false),
            locked: Mutex::new(false),
            wake: Condvar::new(),
            open: Mutex::new(Some(open)),
            closed,
        }
    }
}

impl Canceler {
    /// A canceler that has not been canceled.
    pub fn new() -> Self {
        Self::default()
    }

    /// Cancels: every current and future wait on this canceler (or a clone)
    /// returns at once.
    pub fn cancel(&self) {
        self.inner.canceled.store(true, Ordering::SeqCst);
        *self.lock() = true;
        self.inner.wake.notify_all();
        drop(self.inner.open.lock().unwrap_or_else(PoisonError::into_inner).take());
    }

    /// A channel that never carries a message and is disconnected once
    /// canceled: a thread blocked in a `crossbeam_channel::Select` that
    /// also receives on it wakes at the cancel (as a condition wait would).
    pub fn closed(&self) -> &Receiver<()> {
        &self.inner.closed
    }

    /// Whether [`Canceler::cancel`] has been called on this canceler or a clone.
    ///
    /// A single atomic load: cheap enough to poll.
    pub fn is_canceled(&self) -> bool {
        self.inner.canceled.load(Ordering::SeqCst)
    }

    /// Blocks the calling thread for `timeout`, or until canceled if that comes
    /// first. Returns `true` if the wait ended because of a cancel.
    ///
    /// Spurious wake-ups are absorbed: without a cancel this returns no earlier
    /// than `timeout` after the call.
    pub fn wait_timeout(&self, timeout: Duration) -> bool {
        match Instant::now().checked_add(timeout) {
            Some(deadline) => self.wait_until(deadline),
            None => self.wait_forever(),
        }
    }

    /// Blocks the calling thread until `deadline`, or until canceled if that
    /// comes first. Returns `true` if the wait ended because of a cancel.
    pub fn wait_until(&self, deadline: Instant) -> bool {
        let mut canceled = self.lock();
        loop {
            if *canceled {
                return true;
            }
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            canceled = self
                .inner
                .wake
                .wait_timeout(canceled, deadline - now)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }

    /// Blocks until canceled. Always returns `true`.
    fn wait_forever(&self) -> bool {
        let mut canceled = self.lock();
        while !*canceled {
            canceled = self.inner.wake.wait(canceled).unwrap_or_else(PoisonError::into_inner);
        }
        true
    }

    /// The flag's lock. Nothing panics while holding it, but stay usable even
    /// if something did.
    fn lock(&self) -> MutexGuard<'_, bool> {
        self.inner.locked.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::thread;

    #[test]
    fn a_new_canceler_is_not_canceled() {
        assert!(!Canceler::new().is_canceled());
    }

    #[test]
    fn cancel_is_seen_by_every_clone_and_is_permanent() {
        let canceler = Canceler::new();
        let clone = canceler.clone();
        clone.cancel();
        assert!(canceler.is_canceled());
        canceler.cancel();
        assert!(clone.is_canceled());
    }

    #[test]
    fn a_wait_without_cancel_lasts_its_full_timeout() {
        let canceler = Canceler::new();
        let started = Instant::now();
        assert!(!canceler.wait_timeout(Duration::from_millis(20)));
        assert!(started.elapsed() >= Duration::from_millis(20));
    }

    #[test]
    fn a_wait_on_a_canceled_canceler_returns_at_once() {
        let canceler = Canceler::new();
        canceler.cancel();
        assert!(canceler.wait_timeout(Duration::from_secs(3600)));
        assert!(canceler.wait_timeout(Duration::MAX));
    }

    #[test]
    fn a_select_on_closed_wakes_at_the_cancel() {
        let canceler = Canceler::new();
        assert!(canceler.closed().try_recv().is_err_and(|e| e.is_empty()), "open until the cancel");
        let waiter = canceler.clone();
        let handle = thread::spawn(move || {
            let mut select = crossbeam_channel::Select::new();
            select.recv(waiter.closed());
            select.ready_timeout(Duration::from_secs(3600)).is_ok()
        });
        thread::sleep(Duration::from_millis(5));
        canceler.cancel();
        assert!(handle.join().expect("waiter thread panicked"), "woken by the cancel");
        assert!(canceler.closed().try_recv().is_err_and(|e| e.is_disconnected()));
    }

    #[test]
    fn cancel_from_another_thread_ends_an_unbounded_wait() {
        let canceler = Canceler::new();
        let waiter = canceler.clone();
        let handle = thread::spawn(move || waiter.wait_timeout(Duration::MAX));
        thread::sleep(Duration::from_millis(5));
        canceler.cancel();
        assert!(handle.join().expect("waiter thread panicked"));
    }
}
