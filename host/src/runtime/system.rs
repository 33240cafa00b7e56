//! The system thread: timeout ticks and tick tuples.
//!
//! It parks [`Park::SYSTEM_THREAD_MICROS`] (5000 µs) per turn, like Storm's
//! internal system executor, so an idle topology costs it about 200 wake-ups
//! per second.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::Sender;

use crate::executor::batch::{AckerInput, Control};
use crate::executor::{RunControl, RunState};
use crate::topology::Topology;
use crate::wait::park::Park;

/// Runs until the topology stops.
pub fn run(
    topology: Arc<Topology>,
    run: Arc<RunControl>,
    controls: Vec<Sender<Control>>,
    ackers: Vec<Sender<AckerInput>>,
) {
    let park = Park::new(Park::SYSTEM_THREAD_MICROS);
    let start = Instant::now();
    let settings = &topology.settings;
    // Storm: spouts and ackers get timeout ticks only when trees are tracked
    // and message timeouts are enabled.
    let timeout_period = (settings.enable_message_timeouts && !ackers.is_empty())
        .then(|| Duration::from_secs(settings.message_timeout_secs.max(1)));
    let mut next_timeout = timeout_period.map(|p| start + p);
    let mut tick_bolts: Vec<(Duration, Instant, Vec<u32>)> = topology
        .components
        .iter()
        .filter_map(|c| {
            let period = Duration::from_secs(c.tick_tuple_freq_secs?.max(1));
            Some((period, start + period, c.tasks.clone().collect()))
        })
        .collect();
    while run.state() != RunState::Stopping {
        park.idle(0);
        let now = Instant::now();
        if let (Some(period), Some(next)) = (timeout_period, next_timeout.as_mut()) {
            if now >= *next {
                *next += period;
                for control in &controls {
                    let _ = control.send(Control::TimeoutTick);
                }
                for acker in &ackers {
                    let _ = acker.send(AckerInput::Tick);
                }
            }
        }
        for (period, next, tasks) in &mut tick_bolts {
            if now >= *next {
                *next += *period;
                for &t in tasks.iter() {
                    let _ = controls[t as usize].send(Control::TickTuple);
                }
            }
        }
    }
}
