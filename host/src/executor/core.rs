//! [`TaskCore`]: what every executor task owns besides its instance and its
//! loop's own state, and the restart-after-panic code both loops share.

use std::sync::Arc;
use std::time::Instant;

use crossbeam_channel::Receiver;
use squall_plugin_api::abi::{TaskContext, TaskExt};
use squall_plugin_api::PluginError;

use super::transfer::Transfer;
use super::RestartPolicy;
use crate::control::{Control, RunControl, RunError, TaskName};
use crate::metrics::{LocalStats, StatField, TaskStats};
use crate::plugin::{Factory, Instance};
use crate::wait::WaitStrategy;

/// The longest a task waits for full downstream queues to take what it
/// batched before it takes new routes.
const REWIRE_FLUSH_LIMIT: std::time::Duration = std::time::Duration::from_secs(10);

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
}

/// The waits of one task: its main strategy (spout or bolt wait) and its
/// backpressure strategy.
pub type Waits = (WaitStrategy, WaitStrategy);

impl TaskCore {
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
        }
    }

    /// Takes new routes (a live reload): flushes what is batched for the
    /// old ones first, so every tuple emitted before reaches the task it was
    /// routed to, then reports on `rewire.done`. The new task → component
    /// table, for a bolt downstream of replaced tasks.
    pub fn rewire(
        &mut self,
        rewire: crate::control::Rewire,
        stats: &mut LocalStats,
    ) -> Option<Arc<crate::executor::bolt::SourceTable>> {
        self.transfer.flush_all(stats);
        let deadline = Instant::now() + REWIRE_FLUSH_LIMIT;
        while !self.transfer.flush_pending(stats) && Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_micros(100));
        }
        if self.transfer.has_pending() {
            tracing::warn!(
                "{}: downstream queues stayed full for {} s while taking new routes; \
                 the batches still waiting go on to their old targets",
                self.label,
                REWIRE_FLUSH_LIMIT.as_secs()
            );
        }
        self.transfer.rewire(rewire.streams, rewire.queues, rewire.queue_bytes);
        let _ = rewire.done.send(self.name.task.0);
        rewire.sources
    }

    /// Hands `state`, saved by the instance a new one replaces, to the new
    /// one through `restore`. A new instance built against contract 1.0
    /// (`takes_state` false) cannot take state: it starts fresh, with a
    /// warning.
    ///
    /// # Errors
    /// The new instance refused the state: the plugin's message.
    pub fn hand_state(
        &self,
        state: Option<squall_plugin_api::State>,
        takes_state: bool,
        restore: impl FnOnce(squall_plugin_api::State) -> squall_plugin_api::abi::PResult<()>,
    ) -> Result<(), String> {
        let Some(state) = state else { return Ok(()) };
        if !takes_state {
            tracing::warn!(
                "{}: the new version was built against contract 1.0 and cannot take over \
                 state `{}`; it starts with fresh state",
                self.label,
                state.format
            );
            return Ok(());
        }
        restore(state).into_result().map_err(|e| e.to_string())
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
