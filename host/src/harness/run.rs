//! What one harness run shares with its feeder spouts and its capture bolt:
//! the tuples to feed, what was captured, and which message ids came back.
//!
//! Components find their run through a process-wide registry keyed by a run
//! number written into their `config`, so harness runs in parallel tests of
//! one binary never see each other's tuples.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::time::Instant;

use squall_plugin_api::{MessageId, Value};

/// One tuple to feed: its stream and values.
pub(crate) type Fed = (String, Vec<Value>);

/// The state of one harness run.
#[derive(Debug, Default)]
pub(crate) struct Run {
    state: Mutex<State>,
    /// Signalled at every ack and fail.
    changed: Condvar,
}

#[derive(Debug, Default)]
struct State {
    /// Per fed spout: its tuples, message id = position.
    feeds: HashMap<String, Vec<Fed>>,
    /// Per component: every tuple it emitted on a captured stream.
    emitted: HashMap<String, Vec<(String, Vec<Value>)>>,
    acked: HashMap<String, Vec<MessageId>>,
    failed: HashMap<String, Vec<MessageId>>,
    /// Ids acked or failed so far, over all spouts.
    done: usize,
    /// Fed tuples emitted so far, over all feeders.
    sent: usize,
}

/// What a run collected, taken out of it at the end.
#[derive(Debug, Default)]
pub(crate) struct Collected {
    pub emitted: HashMap<String, Vec<(String, Vec<Value>)>>,
    pub acked: HashMap<String, Vec<MessageId>>,
    pub failed: HashMap<String, Vec<MessageId>>,
    /// Fed ids neither acked nor failed, per spout.
    pub pending: HashMap<String, Vec<MessageId>>,
}

impl Run {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock (none of the code below panics)
        // leaves plain data behind; keep going with it.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Sets the tuples `spout`'s feeder emits.
    pub(crate) fn set_feed(&self, spout: &str, tuples: Vec<Fed>) {
        self.lock().feeds.insert(spout.to_owned(), tuples);
    }

    /// The tuples `spout`'s feeder emits.
    pub(crate) fn feed(&self, spout: &str) -> Vec<Fed> {
        self.lock().feeds.get(spout).cloned().unwrap_or_default()
    }

    /// Records that a feeder emitted one of its tuples.
    pub(crate) fn sent(&self) {
        self.lock().sent += 1;
    }

    /// True once every feeder has emitted all its tuples.
    pub(crate) fn fed_out(&self) -> bool {
        let state = self.lock();
        state.sent >= state.feeds.values().map(Vec::len).sum()
    }

    /// Records one tuple `component` emitted on `stream`.
    pub(crate) fn capture(&self, component: &str, stream: &str, values: Vec<Value>) {
        let mut state = self.lock();
        let list = match state.emitted.get_mut(component) {
            Some(list) => list,
            None => state.emitted.entry(component.to_owned()).or_default(),
        };
        list.push((stream.to_owned(), values));
    }

    /// Records that `spout`'s message `id` was acked (`acked`) or failed.
    pub(crate) fn complete(&self, spout: &str, id: MessageId, acked: bool) {
        let mut state = self.lock();
        let map = if acked { &mut state.acked } else { &mut state.failed };
        map.entry(spout.to_owned()).or_default().push(id);
        state.done += 1;
        drop(state);
        self.changed.notify_all();
    }

    /// Waits until every fed tuple is acked or failed, `until` passes, or
    /// `stop()` is true (checked at least every 10 ms, without the lock);
    /// true when complete.
    pub(crate) fn wait_complete(&self, until: Instant, mut stop: impl FnMut() -> bool) -> bool {
        let mut state = self.lock();
        loop {
            let total: usize = state.feeds.values().map(Vec::len).sum();
            if state.done >= total {
                return true;
            }
            let now = Instant::now();
            if now >= until {
                return false;
            }
            drop(state);
            if stop() {
                return false;
            }
            state = self.lock();
            let slice = (until - now).min(std::time::Duration::from_millis(10));
            state = self.changed.wait_timeout(state, slice).unwrap_or_else(|e| e.into_inner()).0;
        }
    }

    /// Takes everything collected so far; ids lists come sorted.
    pub(crate) fn take(&self) -> Collected {
        let mut state = self.lock();
        let mut out = Collected {
            emitted: std::mem::take(&mut state.emitted),
            acked: std::mem::take(&mut state.acked),
            failed: std::mem::take(&mut state.failed),
            pending: HashMap::new(),
        };
        for ids in out.acked.values_mut().chain(out.failed.values_mut()) {
            ids.sort_unstable();
        }
        out.pending = pending(&state.feeds, &out.acked, &out.failed);
        out
    }

    /// The fed ids neither acked nor failed yet, per spout, sorted.
    pub(crate) fn pending(&self) -> HashMap<String, Vec<MessageId>> {
        let state = self.lock();
        pending(&state.feeds, &state.acked, &state.failed)
    }
}

/// The ids of `feeds` in neither `acked` nor `failed`.
fn pending(
    feeds: &HashMap<String, Vec<Fed>>,
    acked: &HashMap<String, Vec<MessageId>>,
    failed: &HashMap<String, Vec<MessageId>>,
) -> HashMap<String, Vec<MessageId>> {
    let mut out = HashMap::new();
    for (spout, tuples) in feeds {
        let answered = |id: &MessageId| {
            [acked, failed].iter().any(|m| m.get(spout).is_some_and(|v| v.contains(id)))
        };
        let pending: Vec<_> =
            (0..tuples.len() as u64).map(MessageId).filter(|id| !answered(id)).collect();
        if !pending.is_empty() {
            out.insert(spout.clone(), pending);
        }
    }
    out
}

fn registry() -> &'static Mutex<HashMap<u64, Arc<Run>>> {
    static RUNS: OnceLock<Mutex<HashMap<u64, Arc<Run>>>> = OnceLock::new();
    RUNS.get_or_init(Default::default)
}

/// A registered run; unregistered when dropped.
#[derive(Debug)]
pub(crate) struct Registered {
    pub id: u64,
    pub run: Arc<Run>,
}

impl Registered {
    /// Registers a new, empty run under a fresh number.
    pub(crate) fn new() -> Self {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        let id = NEXT.fetch_add(1, Ordering::Relaxed);
        let run = Arc::new(Run::default());
        registry().lock().unwrap_or_else(|e| e.into_inner()).insert(id, run.clone());
        Registered { id, run }
    }
}

impl Drop for Registered {
    fn drop(&mut self) {
        registry().lock().unwrap_or_else(|e| e.into_inner()).remove(&self.id);
    }
}

/// The run registered under `id`, if it is still registered.
pub(crate) fn lookup(id: u64) -> Option<Arc<Run>> {
    registry().lock().unwrap_or_else(|e| e.into_inner()).get(&id).cloned()
}
