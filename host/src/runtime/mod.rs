//! Starting a bound topology and stopping it gracefully.
//!
//! # Start
//! 1. Build every instance on the calling thread ([`instantiate`]), so a
//!    constructor error or panic is reported before any thread starts.
//! 2. Create the queues: a bounded data channel per bolt task (capacity
//!    `receive_buffer_size / producer_batch_size` batches), an unbounded
//!    control channel per task, an unbounded channel per acker.
//! 3. Spawn one thread per task, one per acker, and the system thread
//!    (timeout ticks, tick tuples; it parks 5000 µs per turn).
//!
//! # Shutdown (graceful drain)
//! 1. `Draining`: throttled waits are canceled (for good: the backlog of a
//!    throttled edge is executed unthrottled); every spout calls `deactivate`
//!    once and stops calling `next_tuple`; spouts keep receiving acks and
//!    timeouts, bolts keep executing, executors flush partial batches
//!    whenever idle. With `--duration`, a throttled wait that ends at or past
//!    the deadline begins this step itself (`RunControl::throttle`).
//! 2. Wait until the topology is drained — no spout active, no tree pending,
//!    nothing unsent anywhere, and every transferred tuple received and
//!    executed, twice in a row 10 ms apart — or until `shutdown_timeout_secs`.
//! 3. `Stopping`: spouts fail what is still pending (reason: shutdown) and
//!    call `close`; bolts call `cleanup`.
//! 4. Join every thread. A thread still inside plugin code `JOIN_GRACE`
//!    after step 3 (a call that blocks) is reported and left behind: the
//!    process exits anyway, with an error.
//!
//! Emits that race with shutdown: a bolt that emits during step 3 may find
//! its downstream already stopped; such tuples are untracked or belong to a
//! tree the spout has just failed, so nothing is lost silently.

mod build;
mod instantiate;
mod system;

use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::Sender;

pub use build::start;
pub use instantiate::{instantiate, instantiate_within, wait_strategy, Instances, StartError};

use crate::executor::batch::Batch;
use crate::executor::{RunControl, RunState};
use crate::metrics::{Report, StatField, TaskStats};
use crate::topology::{Kind, Topology};

/// A started topology.
#[derive(Debug)]
pub struct RunningTopology {
    /// The topology.
    pub topology: Arc<Topology>,
    /// The run state shared with every thread.
    pub run: Arc<RunControl>,
    /// Published counters per task id.
    pub stats: Vec<Arc<TaskStats>>,
    queues: Vec<Option<Sender<Batch>>>,
    threads: Vec<JoinHandle<()>>,
    started: Instant,
}

/// What happened to the trees in flight when the drain began.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct DrainReport {
    /// Trees pending at the spouts when the drain began.
    pub in_flight_at_start: u64,
    /// Of the trees that ended during the drain: acked.
    pub acked: u64,
    /// ... failed explicitly or by a panic.
    pub failed: u64,
    /// ... timed out.
    pub timed_out: u64,
    /// Failed at shutdown because the drain timed out.
    pub failed_at_shutdown: u64,
    /// True when the drain finished before `shutdown_timeout_secs`.
    pub completed: bool,
    /// How long the drain took, in seconds.
    pub secs: f64,
    /// Threads that had not stopped `JOIN_GRACE` after `Stopping`: their
    /// plugin code blocks. The process exits without them.
    pub stuck_threads: Vec<String>,
}

/// How long threads get to leave their loops after `Stopping` before they
/// are reported as stuck (a plugin call that blocks) and left behind.
pub const JOIN_GRACE: Duration = Duration::from_secs(2);

impl RunningTopology {
    /// Time since start.
    pub fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }

    /// A snapshot report of every component.
    pub fn report(&self) -> Report {
        let depths: Vec<u64> =
            self.queues.iter().map(|q| q.as_ref().map_or(0, |q| q.len() as u64)).collect();
        Report::collect(&self.topology, &self.stats, &depths, self.elapsed())
    }

    fn sum(&self, kind: Option<Kind>, field: StatField) -> u64 {
        self.topology
            .components
            .iter()
            .filter(|c| kind.is_none_or(|k| c.kind == k))
            .flat_map(|c| c.tasks.clone())
            .map(|t| self.stats[t as usize].get(field))
            .sum()
    }

    /// A signature of the topology's progress; equal twice in a row with no
    /// work in between means drained.
    fn drained_signature(&self) -> Option<(u64, u64)> {
        let active = self.sum(Some(Kind::Spout), StatField::Active);
        let pending = self.sum(Some(Kind::Spout), StatField::Pending);
        let unsent = self.sum(None, StatField::Unsent);
        let transferred = self.sum(None, StatField::Transferred);
        let received = self.sum(Some(Kind::Bolt), StatField::Received);
        let queued: usize = self.queues.iter().flatten().map(Sender::len).sum();
        (active == 0 && pending == 0 && unsent == 0 && queued == 0 && transferred == received)
            .then_some((transferred, self.sum(Some(Kind::Bolt), StatField::Executed)))
    }

    /// Runs the shutdown protocol (see the module doc) and joins every thread.
    pub fn shutdown(mut self) -> (Report, DrainReport) {
        let begin = Instant::now();
        let timeout = Duration::from_secs(self.topology.settings.shutdown_timeout_secs);
        let at_start = |s: &Self| {
            (
                s.sum(Some(Kind::Spout), StatField::Pending),
                s.sum(Some(Kind::Spout), StatField::Acked),
                s.sum(Some(Kind::Spout), StatField::FailedExplicit)
                    + s.sum(Some(Kind::Spout), StatField::FailedPanic),
                s.sum(Some(Kind::Spout), StatField::FailedTimeout),
            )
        };
        let (pending0, acked0, failed0, timed0) = at_start(&self);
        self.run.advance(RunState::Draining);
        let mut last = None;
        let completed = loop {
            std::thread::sleep(Duration::from_millis(10));
            let signature = self.drained_signature();
            if signature.is_some() && signature == last {
                break true;
            }
            last = signature;
            if begin.elapsed() >= timeout {
                tracing::warn!(
                    "drain did not finish within shutdown_timeout_secs = {}",
                    timeout.as_secs()
                );
                break false;
            }
        };
        let (_, acked1, failed1, timed1) = at_start(&self);
        self.run.advance(RunState::Stopping);
        // A plugin call that blocks would keep its thread forever: wait for
        // the threads up to a grace period, then leave the stuck ones behind
        // (the process exits without them) and report them.
        let grace_end = Instant::now() + JOIN_GRACE;
        while self.threads.iter().any(|t| !t.is_finished()) && Instant::now() < grace_end {
            std::thread::sleep(Duration::from_millis(5));
        }
        let mut stuck_threads = Vec::new();
        for t in self.threads.drain(..) {
            if !t.is_finished() {
                stuck_threads.push(t.thread().name().unwrap_or("unnamed").to_owned());
            } else if t.join().is_err() {
                tracing::error!("an executor thread panicked");
            }
        }
        let drain = DrainReport {
            in_flight_at_start: pending0,
            acked: acked1 - acked0,
            failed: failed1 - failed0,
            timed_out: timed1 - timed0,
            failed_at_shutdown: self.sum(Some(Kind::Spout), StatField::FailedShutdown),
            completed,
            secs: begin.elapsed().as_secs_f64(),
            stuck_threads,
        };
        (self.report(), drain)
    }
}
