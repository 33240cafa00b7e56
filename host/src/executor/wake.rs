//! The wake handles: a spout's in `open` (contract 1.1), a rich bolt's
//! before `prepare` (contract 1.3).
//!
//! A spout's `wake` puts a token in a one-slot channel that the spout's
//! executor selects on when it has nothing to do: a wake while the executor
//! is busy costs one failed `try_send` (the slot is full), a wake while it is
//! blocked costs a futex wake-up.
//!
//! A bolt's `wake` sends [`Control::Woken`] on the task's control queue,
//! which a bolt (or the chain it runs in) already waits on; a flag keeps
//! at most one such message queued, so a wake while one is pending costs
//! one atomic swap.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use abi_stable::sabi_trait::TD_Opaque;
use abi_stable::std_types::RArc;
use crossbeam_channel::{bounded, Receiver, Sender};
use squall_plugin_api::abi::{DynWaker, DynWaker_TO, WakerBox};

use crate::control::Control;

#[derive(Clone)]
struct ChannelWaker(Sender<()>);

impl DynWaker for ChannelWaker {
    fn wake(&self) {
        let _ = self.0.try_send(());
    }
}

/// A wake handle and the receiver its wakes arrive on.
pub fn spout_waker() -> (WakerBox, Receiver<()>) {
    let (tx, rx) = bounded(1);
    (DynWaker_TO::from_ptr(RArc::new(ChannelWaker(tx)), TD_Opaque), rx)
}

#[derive(Clone)]
struct BoltWaker {
    pending: Arc<AtomicBool>,
    control: Sender<Control>,
}

impl DynWaker for BoltWaker {
    fn wake(&self) {
        if !self.pending.swap(true, Ordering::AcqRel) {
            let _ = self.control.send(Control::Woken);
        }
    }
}

/// A bolt's wake handle, and the flag its executor clears (with
/// [`take_wake`]) before it calls `woken`.
pub fn bolt_waker(control: Sender<Control>) -> (WakerBox, Arc<AtomicBool>) {
    let pending = Arc::new(AtomicBool::new(false));
    let waker = BoltWaker { pending: pending.clone(), control };
    (DynWaker_TO::from_ptr(RArc::new(waker), TD_Opaque), pending)
}

/// Clears a bolt's pending wake: a wake from now on sends a new message.
pub fn take_wake(pending: &AtomicBool) {
    pending.store(false, Ordering::Release);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wakes_coalesce_into_one_token() {
        let (waker, rx) = spout_waker();
        let clone = waker.clone();
        std::thread::spawn(move || {
            clone.wake();
            clone.wake();
        })
        .join()
        .unwrap();
        waker.wake();
        assert_eq!(rx.try_recv(), Ok(()));
        assert!(rx.try_recv().is_err(), "several wakes leave one token");
    }

    #[test]
    fn a_bolts_wakes_coalesce_until_the_executor_takes_them() {
        let (tx, rx) = crossbeam_channel::unbounded();
        let (waker, pending) = bolt_waker(tx);
        waker.wake();
        waker.clone().wake();
        assert!(matches!(rx.try_recv(), Ok(Control::Woken)));
        assert!(rx.try_recv().is_err(), "one message for wakes not yet taken");
        take_wake(&pending);
        waker.wake();
        assert!(matches!(rx.try_recv(), Ok(Control::Woken)), "a wake after the take is sent");
    }
}
