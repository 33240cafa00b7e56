//! Signals, as a terminal user or an orchestrator sends them.
//!
//! - The first SIGINT (Ctrl-C) or SIGTERM (`docker stop`, `kubectl delete
//!   pod`, `systemctl stop`) starts the graceful drain.
//! - A second SIGINT or SIGTERM exits at once with 130.
//! - SIGHUP reloads the topology file live (see `runtime::reload`); the
//!   reload logs its own summary line, and a failed reload leaves the
//!   topology running as it was.
//!
//! A dedicated thread reads the signals (through `signal-hook`'s self-pipe,
//! so nothing but a flag write runs in the handler itself) and drains the
//! topology through its [`TopologyHandle`].

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook::iterator::Signals as SignalIter;

use super::exit::EXIT_INTERRUPTED;
use crate::runtime::TopologyHandle;

/// The signal thread's shared state.
#[derive(Debug, Default)]
struct Shared {
    stops: AtomicU32,
    first: Mutex<Option<&'static str>>,
    handle: OnceLock<TopologyHandle>,
}

/// Handles SIGINT, SIGTERM and SIGHUP for `squall run`.
#[derive(Debug, Clone)]
pub struct Signals {
    shared: Arc<Shared>,
}

impl Signals {
    /// Installs the handlers and starts the signal thread.
    ///
    /// # Errors
    /// When the handlers cannot be registered or the thread cannot start.
    pub fn install() -> std::io::Result<Self> {
        let mut iter = SignalIter::new([SIGINT, SIGTERM, SIGHUP])?;
        let shared = Arc::new(Shared::default());
        let seen = shared.clone();
        std::thread::Builder::new().name("__signals".into()).spawn(move || {
            for signal in iter.forever() {
                on_signal(&seen, signal);
            }
        })?;
        Ok(Self { shared })
    }

    /// From now on, a stop signal drains `handle`; one that came before is
    /// applied at once.
    pub fn attach(&self, handle: TopologyHandle) {
        let handle = self.shared.handle.get_or_init(|| handle);
        if self.shared.stops.load(Ordering::SeqCst) > 0 {
            handle.drain();
        }
    }

    /// The first stop signal received ("interrupt" or "SIGTERM"), if any.
    pub fn stop_requested(&self) -> Option<&'static str> {
        *self.shared.first.lock().ok()?
    }
}

fn on_signal(shared: &Shared, signal: i32) {
    let what = match signal {
        SIGINT => "interrupt",
        SIGTERM => "SIGTERM",
        SIGHUP => {
            match shared.handle.get().map(|h| h.request_reload("SIGHUP")) {
                Some(Some(_)) => tracing::info!("SIGHUP: reloading the topology file"),
                _ => tracing::warn!("SIGHUP: the topology is not running yet; nothing reloaded"),
            }
            return;
        }
        _ => return,
    };
    if let Ok(mut first) = shared.first.lock() {
        first.get_or_insert(what);
    }
    if shared.stops.fetch_add(1, Ordering::SeqCst) >= 1 {
        eprintln!("second stop signal ({what}): exiting at once");
        // No destructor runs past `exit`: remove the private copies' folders
        // here, unless a library is being loaded right now.
        crate::plugin::try_remove_private_copies();
        std::process::exit(i32::from(EXIT_INTERRUPTED));
    }
    eprintln!("{what}: draining (send SIGINT or SIGTERM again to exit at once)");
    if let Some(handle) = shared.handle.get() {
        handle.drain();
    }
}
