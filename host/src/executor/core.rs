//! [`TaskCore`]: what every executor task owns besides its instance and its
//! loop's own state, and the restart-after-panic code both loops share.

use std::sync::Arc;
use std::time::Instant;

use crossbeam_channel::Receiver;
use squall_plugin_api::abi::{TaskContext, TaskExt};
use squall_plugin_api::PluginError;

use super::swap::{RewireAction, RewireMachine};
use super::transfer::Transfer;
use super::RestartPolicy;
use crate::control::{Control, RunControl, RunError, TaskName};
use crate::metrics::{LocalStats, StatField, TaskStats};
use crate::plugin::{Factory, Instance};
use crate::wait::WaitStrategy;

/// The parts every executor task is built from.
#[derive(Debug)]
pub struct TaskCore {
    /// The task, as errors and logs name it.
    pub name: TaskName,
    /// `name` rendered once, for the rate-limited error log.
    pub label: String,
    /// The task's context, as handed to `open`/`prepare`.
    pub context: TaskContext,
    /// Its contract 1.1 settings, handed to 1.1 components beside `context`.
    pub ext: TaskExt,
    /// Rebuilds the instance after a panic.
    pub constructor: Factory,
    /// The component's config, for rebuilding.
    pub config: String,
    /// Outgoing side.
    pub transfer: Transfer,
    /// Control queue: acker replies, ticks, activate/deactivate.
    pub control: Receiver<Control>,
    /// The spout or bolt wait strategy.
    pub wait: WaitStrategy,
    /// The backpressure wait strategy.
    pub backpressure_wait: WaitStrategy,
    /// Published counters.
    pub shared: Arc<TaskStats>,
    /// Run state.
    pub run: Arc<RunControl>,
    /// Restart limits.
    pub restarts: RestartPolicy,
    /// Set when a panic was not followed by a rebuild (restart limit): the
    /// instance is never called again.
    pub poisoned: bool,
    /// Where the task reports its part of each checkpoint (durable state;
    /// `None`: the topology has no `[state]`).
    pub checkpoints: Option<crossbeam_channel::Sender<crate::state::Report>>,
    /// New routes taken while batches for tasks they no longer reach are
    /// still on their way, with whom to tell once they arrived (see
    /// [`RewireMachine`]). Checked once per loop turn.
    pub rewiring: Option<(RewireMachine, Vec<crossbeam_channel::Sender<u32>>)>,
}

/// The waits of one task: its main strategy (spout or bolt wait) and its
/// backpressure strategy.
pub type Waits = (WaitStrategy, WaitStrategy);

impl TaskCore {
    /// The backpressure wait, once; returns the next counter. Past its
    /// spins, a progressive strategy waits on the full queue instead of
    /// parking or sleeping, for as long as
    /// [`Progressive::queue_wait`](crate::wait::progressive::Progressive::queue_wait)
    /// says, or until the consumer makes room, which wakes it at once (the wait module's
    /// deliberate differences). The drain's beginning ends the wait, and
    /// while the drain lasts it waits at most
    /// [`DRAIN_NAP`](crate::wait::DRAIN_NAP), as the strategy's own naps do.
    pub fn backpressure_idle(&mut self, counter: u32) -> u32 {
        if let WaitStrategy::Progressive(p) = &self.backpressure_wait {
            if let (Some(wait), next) = p.queue_wait(counter) {
                let canceler = &self.run.canceler;
                let (timeout, cancel) = if canceler.is_canceled() {
                    (wait.min(crate::wait::DRAIN_NAP), None)
                } else {
                    (wait, Some(canceler.closed()))
                };
                if self.transfer.wait_for_room(timeout, cancel) {
                    return next;
                }
            }
        }
        self.backpressure_wait.idle(counter, &self.run.canceler)
    }

    /// Reports this task's part of checkpoint `checkpoint`.
    pub fn report(&self, checkpoint: u64, part: crate::state::Part) {
        if let Some(to) = &self.checkpoints {
            let _ = to.send(crate::state::Report { checkpoint, task: self.name.task.0, part });
        }
    }

    /// A task core; `poisoned` starts false.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        name: TaskName,
        (context, ext): (TaskContext, TaskExt),
        constructor: Factory,
        config: String,
        transfer: Transfer,
        control: Receiver<Control>,
        (wait, backpressure_wait): Waits,
        shared: Arc<TaskStats>,
        run: Arc<RunControl>,
        restarts: RestartPolicy,
    ) -> Self {
        Self {
            label: name.to_string(),
            name,
            context,
            ext,
            constructor,
            config,
            transfer,
            control,
            wait,
            backpressure_wait,
            shared,
            run,
            restarts,
            poisoned: false,
            checkpoints: None,
            rewiring: None,
        }
    }

    /// Takes new routes (a live reload) at once: what is batched is sent
    /// first (in order, to the tasks it was routed to), then every emit
    /// follows the new routes. The reloader hears on `rewire.done` once the
    /// batches for tasks the new routes no longer reach have all arrived
    /// ([`advance_rewire`](Self::advance_rewire), every loop turn), and
    /// only then retires those tasks. Returns the new task → component
    /// table, for a bolt downstream of replaced tasks.
    pub fn rewire(
        &mut self,
        rewire: crate::control::Rewire,
        stats: &mut LocalStats,
    ) -> Option<Arc<crate::executor::bolt::SourceTable>> {
        self.transfer.flush_all(stats);
        let mut old = self.transfer.targets();
        self.transfer.rewire(rewire.streams, rewire.queues, rewire.queue_bytes);
        let mut dones = vec![rewire.done];
        // A rewire while another is still on its way: both wait for the
        // tasks either left behind.
        if let Some((earlier, told)) = self.rewiring.take() {
            old.extend_from_slice(earlier.left_behind());
            dones.extend(told);
        }
        let machine = RewireMachine::new(Instant::now(), &old, &self.transfer.targets());
        self.rewiring = Some((machine, dones));
        self.advance_rewire();
        rewire.sources
    }

    /// Tells the reloader a rewire is done once no batch for a task left
    /// behind waits any more. The loops call it once per turn while
    /// [`rewiring`](Self::rewiring) is set; it never waits.
    #[cold]
    pub fn advance_rewire(&mut self) {
        let Some((machine, dones)) = &mut self.rewiring else { return };
        let pending = self.transfer.pending_to(machine.left_behind());
        match machine.poll(Instant::now(), pending) {
            RewireAction::Wait => {}
            RewireAction::Warn => tracing::warn!(
                "{}: the tasks a reload retires have not taken this task's last batches \
                 for {} s (their queues stay full); they stay until they have",
                self.label,
                super::swap::REWIRE_WARN_AFTER.as_secs()
            ),
            RewireAction::Done => {
                for done in dones.drain(..) {
                    let _ = done.send(self.name.task.0);
                }
                self.rewiring = None;
            }
        }
    }

    /// Hands `state`, saved by the instance a new one replaces, to the new
    /// one through `restore`. A new instance built against contract 1.0
    /// (`takes_state` false) cannot take state: it starts fresh, with a
    /// warning.
    ///
    /// # Errors
    /// The new instance refused the state: the plugin's message (a String:
    /// it becomes a lifecycle error's or a reload error's text).
    pub fn hand_state(
        &self,
        state: Option<squall_plugin_api::State>,
        takes_state: bool,
        restore: impl FnOnce(squall_plugin_api::State) -> squall_plugin_api::abi::PResult<()>,
    ) -> Result<(), String> {
        hand_state(&self.label, state, takes_state, restore)
    }

    /// Records a fatal error for this task.
    pub fn fail(&self, error: impl FnOnce(TaskName) -> RunError) {
        self.run.fail(error(self.name.clone()));
    }

    /// After `call` panicked with `e`: a fresh instance from the constructor
    /// when the restart policy allows one (counted in `stats`). `None` when
    /// the limit is reached (the task is poisoned: never called again) or
    /// the rebuild failed; either way the run has failed.
    pub fn rebuild(
        &mut self,
        call: &'static str,
        e: &PluginError,
        stats: &mut LocalStats,
    ) -> Option<Instance> {
        if !self.restarts.allow(Instant::now()) {
            self.poisoned = true;
            let cause = e.to_string();
            self.fail(|task| RunError::RestartLimit { task, call, cause });
            return None;
        }
        tracing::warn!("{}: {call} {e}; rebuilding the instance", self.label);
        stats.add(StatField::Restarts, 1);
        match self.constructor.build(&self.config) {
            Ok(built) => Some(built),
            Err(e) => {
                let cause = e.to_string();
                self.fail(|task| RunError::Rebuild { task, cause });
                None
            }
        }
    }
}

/// [`TaskCore::hand_state`] for the task labelled `label`, callable off the
/// task thread (a bolt prepares its new instance on a thread of its own).
///
/// # Errors
/// The new instance refused the state: the plugin's message (a String: it
/// becomes a lifecycle error's or a reload error's text).
pub fn hand_state(
    label: &str,
    state: Option<squall_plugin_api::State>,
    takes_state: bool,
    restore: impl FnOnce(squall_plugin_api::State) -> squall_plugin_api::abi::PResult<()>,
) -> Result<(), String> {
    let Some(state) = state else { return Ok(()) };
    if !takes_state {
        tracing::warn!(
            "{label}: the new version was built against contract 1.0 and cannot take over \
             state `{}`; it starts with fresh state",
            state.format
        );
        return Ok(());
    }
    restore(state).into_result().map_err(|e| e.to_string())
}
