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

use crate::acker::msg::AckerInput;
use crate::control::{Control, RunControl, RunState};
use crate::topology::Topology;

/// The longest the system thread sleeps before it looks at the run state.
const MAX_SLEEP: Duration = Duration::from_millis(250);

/// The system task: sends timeout ticks to spouts and ackers, and tick
/// tuples to bolts that asked for them.
#[derive(Debug)]
pub struct SystemTask {
    run: Arc<RunControl>,
    controls: Vec<Sender<Control>>,
    ackers: Vec<Sender<AckerInput>>,
    /// `message_timeout_secs`, when timeouts are on and trees are tracked.
    timeout_period: Option<Duration>,
    /// Per bolt with `tick_tuple_freq_secs`: its period and its tasks.
    tick_bolts: Vec<(Duration, Vec<u32>)>,
}

impl SystemTask {
    /// The system task of `topology`.
    pub fn new(
        topology: &Topology,
        run: Arc<RunControl>,
        controls: Vec<Sender<Control>>,
        ackers: Vec<Sender<AckerInput>>,
    ) -> Self {
        let settings = &topology.settings;
        // Storm: spouts and ackers get timeout ticks only when trees are tracked
        // and message timeouts are enabled.
        let timeout_period = (settings.enable_message_timeouts && !ackers.is_empty())
            .then(|| Duration::from_secs(settings.message_timeout_secs.max(1)));
        let tick_bolts = topology
            .components
            .iter()
            .filter_map(|c| {
                let period = Duration::from_secs(c.tick_tuple_freq_secs?.max(1));
                Some((period, c.tasks.clone().collect()))
            })
            .collect();
        Self { run, controls, ackers, timeout_period, tick_bolts }
    }

    /// Runs until the topology stops.
    pub fn run(self) {
        let start = Instant::now();
        let mut next_timeout = self.timeout_period.map(|p| start + p);
        let mut next_tick: Vec<Instant> = self.tick_bolts.iter().map(|(p, _)| start + *p).collect();
        while self.run.state() != RunState::Stopping {
            let next = next_tick.iter().chain(&next_timeout).min().copied();
            let now = Instant::now();
            let sleep = next.map_or(MAX_SLEEP, |n| n.saturating_duration_since(now)).min(MAX_SLEEP);
            crate::wait::nap(sleep, &self.run.canceler);
            let now = Instant::now();
            if let (Some(period), Some(next)) = (self.timeout_period, next_timeout.as_mut()) {
                if now >= *next {
                    *next += period;
                    for control in &self.controls {
                        let _ = control.send(Control::TimeoutTick);
                    }
                    for acker in &self.ackers {
                        let _ = acker.send(AckerInput::Tick);
                    }
                }
            }
            for ((period, tasks), next) in self.tick_bolts.iter().zip(&mut next_tick) {
                if now >= *next {
                    *next += *period;
                    for &t in tasks {
                        let _ = self.controls[t as usize].send(Control::TickTuple);
                    }
                }
            }
        }
    }
}
