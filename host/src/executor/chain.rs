//! Operator chains: several tasks on one thread (which tasks:
//! `config::chain`).
//!
//! A chain is a spout or bolt task (its head) and the bolt tasks chained
//! below it. The thread runs one turn of each task in order, head first, so
//! a batch the head sends is executed by the next task in the same round:
//! it crosses no thread and wakes nobody. Each task keeps everything it has
//! on its own thread: its receive and control queues (which keep
//! backpressure and the queue figures exact), its counters and capacity,
//! its restart after a panic, its live swap, its checkpoint barriers.
//!
//! A turn never waits inside a chain ([`Step`]); the chain waits once all
//! its tasks are idle, on every task's queues at once, as the first running
//! task's own wait would ([`Idle`]). When a task is blocked on a full queue
//! and no task made progress, the chain waits with that task's
//! backpressure strategy.

use std::time::{Duration, Instant};

use crossbeam_channel::Select;

use super::bolt::{BoltExecutor, BoltLoop, DEEP_IDLE};
use super::core::TaskCore;
use super::spout::{SpoutExecutor, SpoutLoop};
use super::{Idle, Step};
use crate::plugin::services::{swap_scope, Scope};
use crate::wait::progressive::Level;
use crate::wait::WaitStrategy;

/// One task of a chain, before it runs.
#[derive(Debug)]
pub enum Task {
    /// A spout task (only ever the head).
    Spout(Box<SpoutExecutor>),
    /// A bolt task.
    Bolt(Box<BoltExecutor>),
}

/// Tasks that run on one thread, head first.
#[derive(Debug)]
pub struct Chain {
    tasks: Vec<Task>,
}

/// A running task and its loop state.
enum Member {
    Spout(Box<SpoutExecutor>, Box<SpoutLoop>),
    Bolt(Box<BoltExecutor>, Box<BoltLoop>),
}

/// A member, the scope its plugin calls run in, and whether it still runs.
struct Slot {
    member: Member,
    scope: Scope,
    running: bool,
}

impl Slot {
    /// Runs `f` on the member with its task scope in place.
    fn scoped<R>(&mut self, f: impl FnOnce(&mut Member) -> R) -> R {
        swap_scope(&mut self.scope);
        let r = f(&mut self.member);
        swap_scope(&mut self.scope);
        r
    }
}

impl Member {
    /// Takes the task onto this thread; its scope is taken back out.
    fn enter(task: Task) -> Slot {
        let member = match task {
            Task::Spout(mut s) => {
                let lp = s.enter();
                Member::Spout(s, Box::new(lp))
            }
            Task::Bolt(mut b) => {
                let lp = b.enter();
                Member::Bolt(b, Box::new(lp))
            }
        };
        let mut scope = Scope::default();
        swap_scope(&mut scope);
        Slot { member, scope, running: true }
    }

    fn begin(&mut self) -> bool {
        match self {
            Member::Spout(s, _) => s.begin(),
            Member::Bolt(b, _) => b.begin(),
        }
    }

    #[inline]
    fn step(&mut self) -> Step {
        match self {
            Member::Spout(s, lp) => s.step::<false>(lp),
            Member::Bolt(b, lp) => b.step::<false>(lp),
        }
    }

    fn end(&mut self) {
        match self {
            Member::Spout(s, lp) => s.end(lp),
            Member::Bolt(b, lp) => b.end(lp),
        }
    }

    fn core(&self) -> &TaskCore {
        match self {
            Member::Spout(s, _) => s.core(),
            Member::Bolt(b, _) => b.core(),
        }
    }

    /// The member's backpressure wait; counts the time in its stats.
    fn backpressure_wait(&mut self, counter: u32) -> u32 {
        let started = Instant::now();
        let next = match self {
            Member::Spout(s, _) => s.backpressure_wait(counter),
            Member::Bolt(b, _) => b.backpressure_wait(counter),
        };
        match self {
            Member::Spout(s, lp) => s.blocked_for(lp, started.elapsed()),
            Member::Bolt(b, lp) => b.blocked_for(lp, started.elapsed()),
        }
        next
    }

    /// Adds this member's queues to a chain's wait.
    fn watch<'a>(&'a self, select: &mut Select<'a>) {
        select.recv(&self.core().control);
        if let Member::Bolt(b, _) = self {
            select.recv(b.receive());
        }
    }

    /// True when something waits in this member's queues.
    fn has_input(&self) -> bool {
        !self.core().control.is_empty()
            || matches!(self, Member::Bolt(b, _) if !b.receive().is_empty())
    }
}

impl Chain {
    /// A chain of `tasks`, head first; each task's only input comes from
    /// the task before it (`config::chain`).
    pub fn new(tasks: Vec<Task>) -> Self {
        Self { tasks }
    }

    /// The thread's name: every task's `component-task`, joined by `+`.
    pub fn thread_name(&self) -> String {
        let names: Vec<String> = self
            .tasks
            .iter()
            .map(|t| match t {
                Task::Spout(s) => s.context(),
                Task::Bolt(b) => b.context(),
            })
            .map(|c| format!("{}-{}", c.component, c.task_id))
            .collect();
        names.join("+")
    }

    /// Runs every task to its end. A chain of one task runs its own loop,
    /// which waits inside its turns.
    pub fn run(mut self) {
        if self.tasks.len() == 1 {
            match self.tasks.pop() {
                Some(Task::Spout(s)) => s.run(),
                Some(Task::Bolt(b)) => b.run(),
                None => {}
            }
            return;
        }
        let mut slots = begin(self.tasks);
        let (mut idle_counter, mut bp_counter) = (0u32, 0u32);
        loop {
            let (mut busy, mut blocked, mut idle, mut running) = (false, None, None, 0);
            for (i, slot) in slots.iter_mut().enumerate().filter(|(_, s)| s.running) {
                match slot.scoped(Member::step) {
                    Step::Stop => {
                        slot.scoped(Member::end);
                        slot.running = false;
                        continue;
                    }
                    Step::Busy => busy = true,
                    Step::Blocked => blocked = Some(i),
                    Step::Idle(kind) => {
                        idle.get_or_insert(kind);
                    }
                }
                running += 1;
            }
            if running == 0 {
                break;
            }
            if busy {
                (idle_counter, bp_counter) = (0, 0);
                continue;
            }
            // The furthest task down the chain that is blocked waits for
            // room: the ones above it wait on it.
            if let Some(i) = blocked {
                bp_counter = slots[i].scoped(|m| m.backpressure_wait(bp_counter));
                continue;
            }
            bp_counter = 0;
            if let Some(kind) = idle {
                idle_counter = wait(&mut slots, kind, idle_counter);
            }
        }
    }
}

/// Enters and begins every task; one that cannot begin has ended.
fn begin(tasks: Vec<Task>) -> Vec<Slot> {
    let mut slots: Vec<Slot> = tasks.into_iter().map(Member::enter).collect();
    for slot in &mut slots {
        if !slot.scoped(Member::begin) {
            slot.scoped(Member::end);
            slot.running = false;
        }
    }
    slots
}

/// The chain's wait once every running task is idle: the first running
/// task's own wait (`kind`), on every task's queues at once. Returns the
/// next idle counter.
fn wait(slots: &mut [Slot], kind: Idle, counter: u32) -> u32 {
    let Some(head) = slots.iter().position(|s| s.running) else { return counter };
    let started = Instant::now();
    let next = match kind {
        Idle::Nap => {
            // A spout that cannot wake its executor naps as its strategy
            // says; nothing reaches the tasks below it meanwhile but
            // control messages, which wait at most one nap.
            if let Member::Spout(s, lp) = &mut slots[head].member {
                s.nap(lp);
            }
            counter
        }
        Idle::Block { woken } => {
            // Only a spout blocks; it is always its chain's head.
            let Member::Spout(s, _) = &slots[head].member else { return counter };
            block(slots, head, woken, s.wake_signal().1);
            s.take_wake();
            counter
        }
        Idle::Queues => queues_idle(slots, head, counter),
    };
    if let Member::Spout(s, lp) = &mut slots[head].member {
        s.waited(lp, started.elapsed());
    }
    next
}

/// Blocks on every running task's queues (and, when `woken`, the head
/// spout's wake signal) for up to `limit`.
fn block(slots: &[Slot], head: usize, woken: bool, limit: Duration) {
    let mut select = Select::new();
    for slot in slots.iter().filter(|s| s.running) {
        slot.member.watch(&mut select);
    }
    if let (true, Member::Spout(s, _)) = (woken, &slots[head].member) {
        select.recv(s.wake_signal().0);
    }
    let _ = select.ready_timeout(limit);
}

/// A bolt head's idle wait (`BoltExecutor::idle`), on every task's queues.
fn queues_idle(slots: &mut [Slot], head: usize, counter: u32) -> u32 {
    let core = slots[head].member.core();
    let WaitStrategy::Progressive(p) = &core.wait else {
        return match &mut slots[head].member {
            Member::Bolt(b, _) => b.bolt_wait(counter),
            // Only a bolt waits on its queues.
            Member::Spout(..) => counter,
        };
    };
    if counter == 0 && !p.spin.is_zero() {
        let ready = || slots.iter().any(|s| s.running && s.member.has_input());
        if crate::wait::spin_until(p.spin, ready) {
            return 0;
        }
    }
    let (level, next) = p.level(counter);
    let timeout = match level {
        Level::Spin => return p.idle(counter, &core.run.canceler),
        Level::Park => crate::wait::PARK_WAIT,
        Level::Sleep => DEEP_IDLE,
    };
    block(slots, head, false, timeout);
    next
}
