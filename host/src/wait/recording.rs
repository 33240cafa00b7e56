//! A wait strategy that records each call's situation and counter instead of
//! waiting, and runs a test hook; the executor loop tests drive it.

use std::sync::{Arc, Mutex};

use squall_plugin_api::WaitSituation;

/// The hook a test runs on every wait: it sees the call's index, situation
/// and counter, and can change the world (drain a queue, stop the run).
pub type Hook = dyn FnMut(usize, WaitSituation, u32) + Send;

/// Shared by the strategies of one executor, so one log holds every situation.
#[derive(Clone)]
pub struct Recorder {
    /// Every call so far: situation and counter passed in.
    pub calls: Arc<Mutex<Vec<(WaitSituation, u32)>>>,
    hook: Arc<Mutex<Box<Hook>>>,
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorder").finish_non_exhaustive()
    }
}

impl Recorder {
    /// A recorder running `hook` on each call.
    pub fn new(hook: impl FnMut(usize, WaitSituation, u32) + Send + 'static) -> Self {
        Self { calls: Arc::default(), hook: Arc::new(Mutex::new(Box::new(hook))) }
    }

    /// The strategy for one situation.
    pub fn strategy(&self, situation: WaitSituation) -> super::WaitStrategy {
        super::WaitStrategy::Recording(Recording { situation, recorder: self.clone() })
    }

    /// The calls recorded so far.
    pub fn calls(&self) -> Vec<(WaitSituation, u32)> {
        self.calls.lock().expect("recorder lock").clone()
    }
}

/// One situation's recording strategy.
#[derive(Debug)]
pub struct Recording {
    situation: WaitSituation,
    recorder: Recorder,
}

impl Recording {
    /// Records the call, runs the hook, returns `counter + 1`.
    pub fn idle(&mut self, counter: u32, _drain: &crate::cancel::Canceler) -> u32 {
        let index = {
            let mut calls = self.recorder.calls.lock().expect("recorder lock");
            calls.push((self.situation, counter));
            calls.len() - 1
        };
        (self.recorder.hook.lock().expect("recorder lock"))(index, self.situation, counter);
        counter + 1
    }
}
