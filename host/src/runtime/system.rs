//! The system thread: timeout ticks and tick tuples.
//!
//! Storm's system executor parks 5 ms per turn (about 200 wake-ups a
//! second, whatever the periods). This one sleeps until its next deadline
//! (the next timeout tick or tick tuple), at most [`MAX_SLEEP`] so that it
//! sees the run stop; the drain cuts a sleep short. Its ticks are on time
//! instead of up to 5 ms late, and an idle topology wakes it a few times a
//! second.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::Sender;

use super::LiveCell;
use crate::acker::msg::AckerInput;
use crate::clock::SimulatedTime;
use crate::control::{Control, RunControl, RunState};
use crate::topology::Topology;

/// The longest the system thread sleeps before it looks at the run state.
/// The drain ends its sleep at once (it waits on the run's canceler), so
/// this only bounds how late a tick bolt added by a live reload ticks first.
const MAX_SLEEP: Duration = Duration::from_secs(1);

/// The system task: sends timeout ticks to spouts, bolts and ackers, and
/// tick tuples to bolts that asked for them. It reads the live topology
/// ([`LiveCell`]) at every tick, so tasks a live reload adds get theirs.
#[derive(Debug)]
pub struct SystemTask {
    run: Arc<RunControl>,
    ackers: Vec<Sender<AckerInput>>,
    /// `message_timeout_secs`, when timeouts are on and trees are tracked.
    timeout_period: Option<Duration>,
}

/// Per bolt with `tick_tuple_freq_secs`: its name and period.
fn tick_bolts(topology: &Topology) -> Vec<(String, Duration)> {
    topology
        .components
        .iter()
        .filter_map(|c| Some((c.name.clone(), Duration::from_secs(c.tick_tuple_freq_secs?.max(1)))))
        .collect()
}

/// The tick schedule of `topology`, by bolt: name, period, next tick. A
/// bolt that `before` (the schedule until a reload) holds with the same
/// period keeps its next tick; any other starts one period after `now` (and
/// not before `start`).
fn reschedule(
    before: &[(String, Duration, Instant)],
    topology: &Topology,
    now: Instant,
    start: Instant,
) -> Vec<(String, Duration, Instant)> {
    tick_bolts(topology)
        .into_iter()
        .map(|(name, period)| {
            let next = before
                .iter()
                .find(|(n, p, _)| *n == name && *p == period)
                .map_or(now.max(start) + period, |(_, _, next)| *next);
            (name, period, next)
        })
        .collect()
}

impl SystemTask {
    /// The system task of `topology`.
    pub fn new(topology: &Topology, run: Arc<RunControl>, ackers: Vec<Sender<AckerInput>>) -> Self {
        let settings = &topology.settings;
        // Storm: spouts and ackers get timeout ticks only when trees are tracked
        // and message timeouts are enabled.
        let timeout_period = (settings.enable_message_timeouts && !ackers.is_empty())
            .then(|| Duration::from_secs(settings.message_timeout_secs.max(1)));
        Self { run, ackers, timeout_period }
    }

    /// Runs until the topology stops.
    pub fn run(self, live: &LiveCell) {
        if let Some(simulated) = live.get().topology.simulated.clone() {
            return self.run_simulated(live, &simulated);
        }
        let start = Instant::now();
        let mut next_timeout = self.timeout_period.map(|p| start + p);
        let mut ticks: Vec<(String, Duration, Instant)> = Vec::new();
        let mut seen: Option<Arc<Topology>> = None;
        while self.run.state() != RunState::Stopping {
            let now_live = live.get();
            if !seen.as_ref().is_some_and(|t| Arc::ptr_eq(t, &now_live.topology)) {
                ticks = reschedule(&ticks, &now_live.topology, Instant::now(), start);
                seen = Some(now_live.topology.clone());
            }
            let next = ticks.iter().map(|(_, _, n)| n).chain(&next_timeout).min().copied();
            let now = Instant::now();
            let sleep = next.map_or(MAX_SLEEP, |n| n.saturating_duration_since(now)).min(MAX_SLEEP);
            drop(now_live);
            crate::wait::nap(sleep, &self.run.canceler);
            let now_live = live.get();
            let controls = &now_live.wiring.controls;
            let now = Instant::now();
            if let (Some(period), Some(next)) = (self.timeout_period, next_timeout.as_mut()) {
                if now >= *next {
                    *next += period;
                    for control in controls {
                        let _ = control.send(Control::TimeoutTick);
                    }
                    for acker in &self.ackers {
                        let _ = acker.send(AckerInput::Tick);
                    }
                }
            }
            for (name, period, next) in &mut ticks {
                if now >= *next {
                    *next += *period;
                    let tasks = now_live.topology.components.iter().find(|c| c.name == *name);
                    for t in tasks.map(|c| c.tasks.clone()).into_iter().flatten() {
                        let _ = controls[t as usize].send(Control::TickTuple);
                    }
                }
            }
        }
    }
}

impl SystemTask {
    /// Runs on simulated time until the topology stops: every deadline up
    /// to the clock's reading is sent in time order (timeout ticks before
    /// the tick tuples due at the same reading), then the reading is
    /// recorded as ticked ([`SimulatedTime::ticked`]). Only the test moves
    /// the clock; the thread looks at it every millisecond. The tick
    /// schedule is the topology's at the start (a test reloads nothing).
    fn run_simulated(self, live: &LiveCell, simulated: &SimulatedTime) {
        let mut next_timeout = self.timeout_period;
        let mut ticks: Vec<(String, Duration, Duration)> = tick_bolts(&live.get().topology)
            .into_iter()
            .map(|(name, period)| (name, period, period))
            .collect();
        while self.run.state() != RunState::Stopping {
            let now = simulated.clock.peek();
            loop {
                let next = ticks.iter().map(|(_, _, n)| *n).chain(next_timeout).min();
                let Some(at) = next.filter(|at| *at <= now) else { break };
                let now_live = live.get();
                let controls = &now_live.wiring.controls;
                if let (Some(period), Some(next)) = (self.timeout_period, next_timeout.as_mut()) {
                    if *next == at {
                        *next += period;
                        for control in controls {
                            let _ = control.send(Control::TimeoutTick);
                        }
                        for acker in &self.ackers {
                            let _ = acker.send(AckerInput::Tick);
                        }
                    }
                }
                for (name, period, next) in &mut ticks {
                    if *next == at {
                        *next += *period;
                        let tasks = now_live.topology.components.iter().find(|c| c.name == *name);
                        for t in tasks.map(|c| c.tasks.clone()).into_iter().flatten() {
                            let _ = controls[t as usize].send(Control::TickTuple);
                        }
                    }
                }
            }
            simulated.ticked(now);
            crate::wait::nap(Duration::from_millis(1), &self.run.canceler);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::fixtures::{bolt, component, linked};
    use crate::topology::Kind;

    /// s -> a (ticks every 2 s), b (every 0 s: at least 1), c (no ticks).
    fn ticking() -> Topology {
        let mut a = bolt("a", 1..2, &[0]);
        a.tick_tuple_freq_secs = Some(2);
        let mut b = bolt("b", 2..3, &[0]);
        b.tick_tuple_freq_secs = Some(0);
        linked(vec![component("s", Kind::Spout, 0..1), a, b, bolt("c", 3..4, &[0])])
    }

    const SEC: Duration = Duration::from_secs(1);

    #[test]
    fn only_bolts_that_asked_for_ticks_get_them_at_least_a_second_apart() {
        assert_eq!(tick_bolts(&ticking()), [("a".to_owned(), 2 * SEC), ("b".to_owned(), SEC)]);
    }

    #[test]
    fn a_reload_keeps_the_schedule_of_a_bolt_whose_period_is_unchanged() {
        let start = Instant::now();
        let first = reschedule(&[], &ticking(), start, start);
        assert_eq!(
            first,
            [("a".to_owned(), 2 * SEC, start + 2 * SEC), ("b".to_owned(), SEC, start + SEC)]
        );
        let mut reloaded = ticking();
        reloaded.components[2].tick_tuple_freq_secs = Some(3);
        reloaded.components[3].tick_tuple_freq_secs = Some(5);
        let now = start + 10 * SEC;
        let next = reschedule(&first, &reloaded, now, start);
        assert_eq!(
            next,
            [
                ("a".to_owned(), 2 * SEC, start + 2 * SEC),
                ("b".to_owned(), 3 * SEC, now + 3 * SEC),
                ("c".to_owned(), 5 * SEC, now + 5 * SEC),
            ],
            "a keeps its next tick; b (new period) and c (new) start from now"
        );
        let mut removed = ticking();
        removed.components[1].tick_tuple_freq_secs = None;
        assert_eq!(reschedule(&first, &removed, now, start), [("b".to_owned(), SEC, start + SEC)]);
    }

    #[test]
    fn timeout_ticks_run_only_when_trees_are_tracked_and_timeouts_are_on() {
        let run = Arc::new(RunControl::default());
        let (acker, _rx) = crossbeam_channel::unbounded();
        let mut t = ticking();
        t.settings.message_timeout_secs = 7;
        let with = SystemTask::new(&t, run.clone(), vec![acker.clone()]);
        assert_eq!(with.timeout_period, Some(7 * SEC));
        let without_ackers = SystemTask::new(&t, run.clone(), Vec::new());
        assert_eq!(without_ackers.timeout_period, None);
        t.settings.enable_message_timeouts = false;
        assert_eq!(SystemTask::new(&t, run, vec![acker]).timeout_period, None);
    }
}
