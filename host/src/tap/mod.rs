//! Taps: samples of the tuples flowing out of or into a component, for
//! `squall tap` and `GET /api/v1/tap` (docs/http-api.md, "Tap").
//!
//! # Cost
//!
//! Every task owns a [`TapPoint`], shared with the [`TapHub`]. With no tap
//! attached, the emit path reads one relaxed `AtomicBool` per emit (and the
//! bolt loop one per input batch) and takes no branch past it: no lock, no
//! allocation, no clock. With a tap attached, a tuple that is due (see
//! [`Sampler`]) is copied and offered to the tap's bounded channel with
//! `try_send`; a full channel (a slow or stalled client) drops the sample and
//! counts it ([`TapCounters::dropped`]). Nothing on the tuple's path ever
//! waits for a client: the point's subscriber list is taken with `try_lock`,
//! and a tuple that meets a point the HTTP thread is attaching a tap to (or
//! detaching one from) at that instant is not sampled (and not counted:
//! that happens only while a tap starts or ends).
//!
//! # Sampling
//!
//! A tap asks for a share of the tuples, `rate` in (0, 1]. Each task keeps,
//! per tap, a counter in parts per million: every tuple adds `rate × 10⁶`,
//! and a tuple that brings it to 10⁶ or more is sampled (10⁶ is taken off).
//! Over `n` tuples a task samples `⌊n × rate⌋` or one fewer: deterministic,
//! with no clock and no random numbers.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crossbeam_channel::{Receiver, Sender, TrySendError};
use squall_plugin_api::Value;

/// Which side of a component a tap samples.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TapSide {
    /// What the component emits (`--outputs-of`).
    Outputs,
    /// What the bolt receives, before it executes it (`--inputs-of`).
    Inputs,
}

/// One sampled tuple, as the task saw it.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// Outputs or inputs.
    pub side: TapSide,
    /// The task that emitted (outputs) or received (inputs) it.
    pub task: u32,
    /// Its stream.
    pub stream: String,
    /// Inputs: the component and task it came from.
    pub from: Option<(String, u32)>,
    /// Inputs: the stream's field names (outputs: the tapped component's
    /// declared fields, filled in by the reader).
    pub fields: Option<Vec<String>>,
    /// Its values.
    pub values: Vec<Value>,
    /// The roots of the trees it belongs to (empty when untracked).
    pub roots: Vec<u64>,
    /// A spout's message id, when it gave one.
    pub message_id: Option<u64>,
}

/// Counters of one tap, over all its tasks.
#[derive(Debug, Default)]
pub struct TapCounters {
    /// Tuples that were due for a sample and went to the channel.
    pub sampled: AtomicU64,
    /// Tuples that were due for a sample and were dropped: the channel was
    /// full (the client reads too slowly) or the point was busy.
    pub dropped: AtomicU64,
}

/// The deterministic per-task sampler of one tap (see the module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sampler {
    /// `rate × 10⁶`, in 1..=10⁶.
    ppm: u32,
    /// Accumulated parts per million.
    acc: u32,
}

/// One in a million: the unit of a [`Sampler`]'s counter.
const MILLION: u32 = 1_000_000;

impl Sampler {
    /// A sampler of `rate` (clamped into one in a million ..= 1).
    pub fn new(rate: f64) -> Self {
        let ppm = (rate * f64::from(MILLION)).round().clamp(1.0, f64::from(MILLION)) as u32;
        Self { ppm, acc: 0 }
    }

    /// True when this tuple is sampled.
    #[inline]
    pub fn take(&mut self) -> bool {
        self.acc += self.ppm;
        if self.acc >= MILLION {
            self.acc -= MILLION;
            true
        } else {
            false
        }
    }
}

/// One tap attached to one point.
#[derive(Debug)]
struct Subscriber {
    id: u64,
    side: TapSide,
    /// Only this stream (`None`: every stream).
    stream: Option<String>,
    sampler: Sampler,
    to_tap: Sender<Sample>,
    counters: Arc<TapCounters>,
    /// Every tap's, summed (the hub's).
    totals: Arc<TapCounters>,
}

/// A task's tap point: whether any tap is attached, and the taps.
#[derive(Debug, Default)]
pub struct TapPoint {
    /// True while any tap is attached (set under `subs`' lock; read
    /// relaxed on the emit path: a tap attached a moment ago may miss the
    /// tuples of that moment, which sampling allows).
    attached: AtomicBool,
    subs: Mutex<Vec<Subscriber>>,
}

impl TapPoint {
    /// True when a tap is attached: the one load the emit path pays.
    #[inline(always)]
    pub fn attached(&self) -> bool {
        self.attached.load(Ordering::Relaxed)
    }

    /// Offers one tuple on `side` and `stream` to every tap attached for
    /// it; `sample` builds the copy, at most once. Never blocks.
    #[cold]
    #[inline(never)]
    pub fn offer(&self, side: TapSide, stream: &str, sample: impl FnOnce() -> Sample) {
        let Ok(mut subs) = self.subs.try_lock() else {
            // The HTTP thread is attaching or detaching: this tuple is not
            // sampled.
            return;
        };
        let mut sample = Some(sample);
        let mut built: Option<Sample> = None;
        for sub in subs.iter_mut() {
            if sub.side != side || sub.stream.as_deref().is_some_and(|s| s != stream) {
                continue;
            }
            if !sub.sampler.take() {
                continue;
            }
            if built.is_none() {
                built = sample.take().map(|f| f());
            }
            let Some(copy) = built.clone() else { continue };
            let sent = match sub.to_tap.try_send(copy) {
                Ok(()) => true,
                Err(TrySendError::Full(_)) => false,
                Err(TrySendError::Disconnected(_)) => continue,
            };
            for c in [&sub.counters, &sub.totals] {
                let counter = if sent { &c.sampled } else { &c.dropped };
                counter.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    fn attach(&self, sub: Subscriber) {
        let mut subs = self.subs.lock().unwrap_or_else(|e| e.into_inner());
        subs.push(sub);
        self.attached.store(true, Ordering::Relaxed);
    }

    fn detach(&self, id: u64) {
        let mut subs = self.subs.lock().unwrap_or_else(|e| e.into_inner());
        subs.retain(|s| s.id != id);
        self.attached.store(!subs.is_empty(), Ordering::Relaxed);
    }
}

/// The field names of each stream a tap can sample: `(stream, fields)`.
pub type StreamFields = Vec<(String, Vec<String>)>;

/// What a tap asks for.
#[derive(Debug, Clone)]
pub struct TapRequest {
    /// The component.
    pub component: String,
    /// Its outputs or (a bolt's) inputs.
    pub side: TapSide,
    /// Only this stream.
    pub stream: Option<String>,
    /// The share of tuples sampled, in (0, 1].
    pub rate: f64,
    /// How many samples the channel holds for the reader before it drops.
    pub capacity: usize,
}

/// An attached tap: read its samples from [`Tap::samples`]; dropping it
/// detaches it from every task.
#[derive(Debug)]
pub struct Tap {
    id: u64,
    points: Vec<Arc<TapPoint>>,
    /// The samples, in the order each task offered them (tasks interleaved).
    pub samples: Receiver<Sample>,
    /// Sampled and dropped, over all tasks.
    pub counters: Arc<TapCounters>,
    attached: Arc<AtomicU64>,
}

impl Drop for Tap {
    fn drop(&mut self) {
        for point in &self.points {
            point.detach(self.id);
        }
        self.attached.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Attaches taps to task points, and sums what every tap sampled and
/// dropped (`GET /api/v1/topology`'s `taps`).
#[derive(Debug, Default)]
pub struct TapHub {
    next_id: AtomicU64,
    totals: Arc<TapCounters>,
    attached: Arc<AtomicU64>,
}

impl TapHub {
    /// Attaches a tap for `request` to `points` (the component's tasks'
    /// points).
    pub fn attach(&self, request: &TapRequest, points: Vec<Arc<TapPoint>>) -> Tap {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (to_tap, samples) = crossbeam_channel::bounded(request.capacity.max(1));
        let counters = Arc::new(TapCounters::default());
        for point in &points {
            point.attach(Subscriber {
                id,
                side: request.side,
                stream: request.stream.clone(),
                sampler: Sampler::new(request.rate),
                to_tap: to_tap.clone(),
                counters: counters.clone(),
                totals: self.totals.clone(),
            });
        }
        self.attached.fetch_add(1, Ordering::Relaxed);
        Tap { id, points, samples, counters, attached: self.attached.clone() }
    }

    /// Taps attached now, and samples sampled and dropped by every tap
    /// since the start.
    pub fn totals(&self) -> (u64, u64, u64) {
        (
            self.attached.load(Ordering::Relaxed),
            self.totals.sampled.load(Ordering::Relaxed),
            self.totals.dropped.load(Ordering::Relaxed),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(stream: &str, n: i64) -> Sample {
        Sample {
            side: TapSide::Outputs,
            task: 0,
            stream: stream.into(),
            from: None,
            fields: None,
            values: vec![Value::I64(n)],
            roots: Vec::new(),
            message_id: None,
        }
    }

    fn request(rate: f64, capacity: usize) -> TapRequest {
        TapRequest { component: "c".into(), side: TapSide::Outputs, stream: None, rate, capacity }
    }

    #[test]
    fn a_sampler_takes_the_floor_of_n_times_the_rate_or_one_fewer() {
        for rate in [1.0, 0.5, 0.1, 0.3, 0.013, 1e-6] {
            let s = Sampler::new(rate);
            for n in [1u64, 10, 999, 10_000, 123_457] {
                let mut s2 = s;
                let taken = (0..n).filter(|_| s2.take()).count() as u64;
                let want = (n as f64 * rate).floor() as u64;
                assert!(taken == want || taken + 1 == want, "rate {rate} n {n}: {taken} vs {want}");
            }
        }
    }

    #[test]
    fn no_tap_means_nothing_attached_and_a_dropped_tap_detaches() {
        let point = Arc::new(TapPoint::default());
        assert!(!point.attached());
        let hub = TapHub::default();
        let tap = hub.attach(&request(1.0, 8), vec![point.clone()]);
        assert!(point.attached());
        point.offer(TapSide::Outputs, "default", || sample("default", 1));
        assert_eq!(tap.samples.try_recv().map(|s| s.values), Ok(vec![Value::I64(1)]));
        drop(tap);
        assert!(!point.attached());
    }

    #[test]
    fn a_full_channel_drops_and_counts_and_never_blocks() {
        let point = Arc::new(TapPoint::default());
        let hub = TapHub::default();
        let tap = hub.attach(&request(1.0, 3), vec![point.clone()]);
        for n in 0..10 {
            point.offer(TapSide::Outputs, "default", || sample("default", n));
        }
        assert_eq!(tap.counters.sampled.load(Ordering::Relaxed), 3);
        assert_eq!(tap.counters.dropped.load(Ordering::Relaxed), 7);
        assert_eq!(hub.totals(), (1, 3, 7));
        let got: Vec<_> = tap.samples.try_iter().map(|s| s.values[0].clone()).collect();
        assert_eq!(got, [Value::I64(0), Value::I64(1), Value::I64(2)], "the oldest are kept");
    }

    #[test]
    fn a_tap_sees_only_its_side_and_stream_at_its_rate() {
        let point = Arc::new(TapPoint::default());
        let hub = TapHub::default();
        let mut words = request(0.5, 100);
        words.stream = Some("words".into());
        let words = hub.attach(&words, vec![point.clone()]);
        let mut inputs = request(1.0, 100);
        inputs.side = TapSide::Inputs;
        let inputs = hub.attach(&inputs, vec![point.clone()]);
        for n in 0..20 {
            let stream = if n % 2 == 0 { "words" } else { "other" };
            point.offer(TapSide::Outputs, stream, || sample(stream, n));
        }
        point.offer(TapSide::Inputs, "default", || sample("default", 99));
        let got: Vec<_> = words.samples.try_iter().map(|s| s.values[0].clone()).collect();
        assert_eq!(got, [2, 6, 10, 14, 18].map(Value::I64), "every other tuple of \"words\"");
        assert_eq!(inputs.samples.try_iter().count(), 1);
    }
}
