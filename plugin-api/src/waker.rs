//! The spout's wake handle (contract 1.1).

use abi_stable::{sabi_trait::TD_Opaque, std_types::RArc};

use crate::abi::{DynWaker, DynWaker_TO, WakerBox};

/// Tells a spout's executor that `next_tuple` has something to emit.
///
/// A spout gets one from [`TaskContext::waker`](crate::TaskContext::waker) in
/// `open`. It is cheap to clone and may be called from any thread, for
/// example the plugin's own I/O thread right after it queued a message. A
/// wake while the executor is busy costs one atomic operation.
#[derive(Clone)]
pub struct Waker(WakerBox);

impl Waker {
    /// Wraps the host's wake handle.
    pub fn from_host(waker: WakerBox) -> Self {
        Self(waker)
    }

    /// A wake handle that calls `wake` (for unit tests of a spout's waking).
    pub fn from_fn(wake: impl Fn() + Send + Sync + 'static) -> Self {
        Self(DynWaker_TO::from_ptr(RArc::new(FnWaker(std::sync::Arc::new(wake))), TD_Opaque))
    }

    /// Wakes the executor, if it is blocked waiting for this spout.
    #[inline]
    pub fn wake(&self) {
        self.0.wake();
    }
}

impl std::fmt::Debug for Waker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Waker")
    }
}

type WakeFn = std::sync::Arc<dyn Fn() + Send + Sync>;

#[derive(Clone)]
struct FnWaker(WakeFn);

impl DynWaker for FnWaker {
    fn wake(&self) {
        (self.0)();
    }
}
