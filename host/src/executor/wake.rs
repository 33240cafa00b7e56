//! The wake handle a spout gets in `open` (contract 1.1).
//!
//! `wake` puts a token in a one-slot channel that the spout's executor
//! selects on when it has nothing to do: a wake while the executor is busy
//! costs one failed `try_send` (the slot is full), a wake while it is
//! blocked costs a futex wake-up.

use abi_stable::sabi_trait::TD_Opaque;
use abi_stable::std_types::RArc;
use crossbeam_channel::{bounded, Receiver, Sender};
use squall_plugin_api::abi::{DynWaker, DynWaker_TO, WakerBox};

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
}
