//! Taps: samples of the tuples flowing out of or into a component, for
//! `squall tap` and `GET /api/v1/tap` (docs/http-api.md, "Tap").
//!
//! # Cost
//!
//! Every task owns a [`TapPort`]: its half of a [`TapPoint`] shared with the
//! [`TapHub`]. With no tap attached, the emit path reads one relaxed
//! `AtomicBool` per emit (and the bolt loop one per input batch) and takes
//! no branch past it: no lock, no allocation, no clock.
//!
//! The taps attached to a task live in its port, owned by the task thread,
//! so a tapped tuple takes no lock either. The HTTP thread never touches
//! them: it posts an attach or a detach to the point (under the point's
//! lock, which only the posting side and the task's next tapped tuple
//! take) and the task applies it before its next tuple. A tuple that is due
//! for a sample (see [`Sampler`]) is copied and offered to the tap's
//! bounded channel with `try_send`. A full channel (a slow or stalled
//! client) costs no copy: the sample is dropped and counted
//! ([`TapCounters::dropped`]). Nothing on the tuple's path ever waits for
//! a client.
//!
//! # Memory
//!
//! A tap's channel is bounded twice: in samples (`capacity`) and in bytes
//! ([`TapRequest::max_bytes`], [`TAP_BUFFER_BYTES`] over HTTP). Each sample
//! is weighed once ([`Sample::weight`]: its values' bytes, its value
//! slots, names and roots) and added to the tap's queued bytes when sent;
//! the reader takes it off ([`Tap::try_recv`]). A sample that would take
//! the queued bytes past the bound is dropped and counted like one that
//! finds the channel full, unless nothing is queued (so that one sample
//! larger than the bound still goes through, alone). A task that sees the
//! bound reached makes no copy. So an unread tap holds at most
//! `max_bytes`, or one sample when that is larger; its HTTP body holds at
//! most one frame more ([`TAP_FRAME_BYTES`], or one line when that is
//! larger). At most [`MAX_TAPS`] taps are attached at once, and the
//! topology's memory estimate counts all of them full
//! (`config::limits::TAPS_BYTES`).
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
    Outputs = 0,
    /// What the bolt receives, before it executes it (`--inputs-of`).
    Inputs = 1,
}

/// The tap's bounds live with the memory estimate that counts them.
pub use crate::config::limits::{MAX_TAPS, TAP_BUFFER_BYTES, TAP_FRAME_BYTES};

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

impl Sample {
    /// What the sample holds in memory, roughly from above: a fixed head,
    /// a [`Value`] slot per value and its content bytes
    /// ([`Value::encoded_len`]; a shared buffer counts whole, since the
    /// sample keeps it alive), the names and the roots.
    pub fn weight(&self) -> u64 {
        const HEAD: usize = 160;
        let values: usize =
            self.values.iter().map(|v| std::mem::size_of::<Value>() + v.encoded_len()).sum();
        let names = self.stream.len()
            + self.from.as_ref().map_or(0, |(c, _)| c.len())
            + self.fields.as_ref().map_or(0, |f| f.iter().map(|n| n.len() + 24).sum());
        (HEAD + values + names + self.roots.len() * 8) as u64
    }
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

    /// How many tuples from now the next sampled one is (1: the next).
    fn until_due(&self) -> u32 {
        (MILLION - self.acc).div_ceil(self.ppm)
    }

    /// Lets `n` tuples pass that are all known to be before the next
    /// sampled one (`n < until_due()`): as `n` calls of [`Self::take`].
    fn pass(&mut self, n: u32) {
        self.acc += n * self.ppm;
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
    /// The bytes of the samples in the channel (the tap's, shared).
    queued: Arc<AtomicU64>,
    /// The most bytes `queued` may reach.
    max_bytes: u64,
    /// `queued` when a sample last did not fit (`u64::MAX`: none since the
    /// last one sent): while `queued` has not dropped below it, no copy is
    /// made (the reader has taken nothing since).
    stalled_at: u64,
    counters: Arc<TapCounters>,
    /// Every tap's, summed (the hub's).
    totals: Arc<TapCounters>,
}

/// What the HTTP thread posts to a task's port.
#[derive(Debug)]
enum Change {
    Attach(Subscriber),
    Detach(u64),
}

/// The shared half of a task's tap: whether the task must look at its
/// port, and the attaches and detaches posted for it.
#[derive(Debug, Default)]
pub struct TapPoint {
    /// True while the task has a tap attached or a change to apply. Stored
    /// under `changes`' lock by both sides (so that no post is missed);
    /// read relaxed on the emit path: a tap attached a moment ago may miss
    /// the tuples of that moment, which sampling allows.
    hot: AtomicBool,
    /// True while `changes` holds a post the task has not applied.
    pending: AtomicBool,
    changes: Mutex<Vec<Change>>,
}

impl TapPoint {
    /// True when the task must offer its tuples to its port: the one load
    /// the emit path pays while no tap is attached.
    #[inline(always)]
    pub fn attached(&self) -> bool {
        self.hot.load(Ordering::Relaxed)
    }

    fn post(&self, change: Change) {
        let mut changes = self.changes.lock().unwrap_or_else(|e| e.into_inner());
        changes.push(change);
        self.pending.store(true, Ordering::Relaxed);
        self.hot.store(true, Ordering::Relaxed);
    }
}

/// A task's own half of its tap: the taps attached to it, owned by the
/// task thread (see the module doc).
#[derive(Debug, Default)]
pub struct TapPort {
    point: Arc<TapPoint>,
    subs: Vec<Subscriber>,
    /// By side (outputs, inputs): how many more tuples of that side no tap
    /// is due to sample, so that they pass with a countdown. The taps'
    /// samplers were moved past them when the count was set; 0: offer the
    /// next tuple. Only taps of every stream are counted ahead (a tap of
    /// one stream does not see the others' tuples).
    skip: [u32; 2],
}

impl TapPort {
    /// The port of `point`.
    pub fn new(point: Arc<TapPoint>) -> Self {
        Self { point, subs: Vec::new(), skip: [0; 2] }
    }

    /// While a tap is attached: true when this tuple on `side` must go to
    /// [`Self::offer`]; false when no tap is due to sample it (a
    /// countdown, so that a sparse tap costs almost nothing per tuple).
    #[inline(always)]
    pub fn due(&mut self, side: TapSide) -> bool {
        let skip = &mut self.skip[side as usize];
        if *skip == 0 || self.point.pending.load(Ordering::Relaxed) {
            return true;
        }
        *skip -= 1;
        false
    }

    /// Counts ahead the tuples of `side` no tap is due to sample, and moves
    /// the taps' samplers past them.
    fn plan_skip(&mut self, side: TapSide) {
        let mut ahead = u32::MAX;
        for sub in self.subs.iter().filter(|s| s.side == side) {
            if sub.stream.is_some() {
                ahead = 0;
                break;
            }
            ahead = ahead.min(sub.sampler.until_due() - 1);
        }
        if ahead > 0 && ahead < u32::MAX {
            for sub in self.subs.iter_mut().filter(|s| s.side == side) {
                sub.sampler.pass(ahead);
            }
        }
        self.skip[side as usize] = ahead;
    }

    /// True when a tap is attached (or being attached): the one load the
    /// emit path pays.
    #[inline(always)]
    pub fn attached(&self) -> bool {
        self.point.attached()
    }

    /// Applies what the HTTP thread posted: taken at most once per post,
    /// never per tuple.
    #[cold]
    fn apply(&mut self) {
        let mut changes = self.point.changes.lock().unwrap_or_else(|e| e.into_inner());
        for change in changes.drain(..) {
            match change {
                Change::Attach(sub) => self.subs.push(sub),
                Change::Detach(id) => self.subs.retain(|s| s.id != id),
            }
        }
        self.point.pending.store(false, Ordering::Relaxed);
        self.point.hot.store(!self.subs.is_empty(), Ordering::Relaxed);
        self.skip = [0; 2];
    }

    /// Offers one tuple on `side` and `stream` to every tap attached for
    /// it, when [`Self::due`] said so (not otherwise: the samplers were
    /// moved past the tuples it lets pass); `sample` builds the copy, at
    /// most once, and only when a tap both wants this tuple and has room
    /// for it. Never blocks.
    #[cold]
    #[inline(never)]
    pub fn offer(&mut self, side: TapSide, stream: &str, sample: impl FnOnce() -> Sample) {
        if self.point.pending.load(Ordering::Relaxed) {
            self.apply();
        }
        let mut sample = Some(sample);
        let mut built: Option<(Sample, u64)> = None;
        let last = self.subs.len().saturating_sub(1);
        for (i, sub) in self.subs.iter_mut().enumerate() {
            if sub.side != side || sub.stream.as_deref().is_some_and(|s| s != stream) {
                continue;
            }
            if !sub.sampler.take() {
                continue;
            }
            if sub.stalled() {
                // A slow or stalled client: no copy is made for it.
                sub.count(false);
                continue;
            }
            if built.is_none() {
                built = sample.take().map(|f| {
                    let s = f();
                    let w = s.weight();
                    (s, w)
                });
            }
            let Some(weight) = built.as_ref().map(|(_, w)| *w) else { continue };
            // The last tap takes the copy itself; the others a clone.
            sub.send(weight, || if i == last { built.take() } else { built.clone() });
        }
        self.plan_skip(side);
    }
}

impl Subscriber {
    /// True when its channel is full, or its bytes are at their limit or
    /// have not dropped since a sample last did not fit.
    fn stalled(&self) -> bool {
        let queued = self.queued.load(Ordering::Relaxed);
        self.to_tap.is_full() || queued >= self.max_bytes || queued >= self.stalled_at
    }

    /// Sends the sample `copy` gives, of `weight` bytes, if they fit, and
    /// counts it sampled or dropped. The bytes are claimed first: other
    /// tasks of this tap send too. A sample that cannot be had, or a
    /// reader gone, is not counted (its tap's detach is posted, dropping a
    /// [`Tap`] posts it, and applied before the next tuple).
    fn send(&mut self, weight: u64, copy: impl FnOnce() -> Option<(Sample, u64)>) {
        let before = self.queued.fetch_add(weight, Ordering::Relaxed);
        let fits = before == 0 || before.saturating_add(weight) <= self.max_bytes;
        let sent = fits && {
            let Some((copy, _)) = copy() else {
                self.queued.fetch_sub(weight, Ordering::Relaxed);
                return;
            };
            match self.to_tap.try_send(copy) {
                Ok(()) => true,
                Err(TrySendError::Full(_)) => false,
                Err(TrySendError::Disconnected(_)) => {
                    self.queued.fetch_sub(weight, Ordering::Relaxed);
                    return;
                }
            }
        };
        if sent {
            self.stalled_at = u64::MAX;
        } else {
            self.queued.fetch_sub(weight, Ordering::Relaxed);
            self.stalled_at = before;
        }
        self.count(sent);
    }

    /// Counts one tuple sampled (`sent`) or dropped, in its tap's counters
    /// and the hub's.
    fn count(&self, sent: bool) {
        for c in [&self.counters, &self.totals] {
            let counter = if sent { &c.sampled } else { &c.dropped };
            counter.fetch_add(1, Ordering::Relaxed);
        }
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
    /// How many bytes of samples ([`Sample::weight`]) the channel holds
    /// for the reader before it drops (see the module doc, "Memory").
    pub max_bytes: u64,
}

/// Why a tap cannot be attached: a request that asks for no side or both,
/// a bad rate or limit, or a component or stream the topology does not
/// have. One line, naming what exists.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TapError {
    /// Both `outputs_of` and `inputs_of`.
    #[error("give outputs_of or inputs_of, not both")]
    BothSides,
    /// Neither.
    #[error("give outputs_of=COMPONENT or inputs_of=BOLT")]
    NoSide,
    /// An empty component name.
    #[error("the component name is empty")]
    EmptyComponent,
    /// A sampling rate outside (0, 1], as written.
    #[error("sample must be a share in (0, 1], got {0:?}")]
    Rate(String),
    /// A limit that is not a positive whole number, as written.
    #[error("limit must be a whole number of samples, at least 1, got {0:?}")]
    Limit(String),
    /// No such component.
    #[error("no component {component:?} (the topology's components: {})", known.join(", "))]
    UnknownComponent {
        /// The name asked for.
        component: String,
        /// The topology's components.
        known: Vec<String>,
    },
    /// The inputs of a spout.
    #[error("{0:?} is a spout: it has no inputs to tap")]
    SpoutInputs(String),
    /// No such stream on the side asked for.
    #[error(
        "{component:?} {} no stream {stream:?} (its streams: {})",
        match side { TapSide::Outputs => "emits", TapSide::Inputs => "receives" },
        if streams.is_empty() { "none".to_owned() } else { streams.join(", ") }
    )]
    UnknownStream {
        /// The component.
        component: String,
        /// The side asked for.
        side: TapSide,
        /// The stream asked for.
        stream: String,
        /// The streams that side has.
        streams: Vec<String>,
    },
}

/// An attached tap: read its samples with [`Tap::try_recv`]; dropping it
/// detaches it from every task, including those a live reload added since.
#[derive(Debug)]
pub struct Tap {
    id: u64,
    /// The samples, in the order each task offered them (tasks interleaved).
    samples: Receiver<Sample>,
    /// The bytes of the samples in `samples`.
    queued: Arc<AtomicU64>,
    /// Sampled and dropped, over all tasks.
    pub counters: Arc<TapCounters>,
    active: Arc<Mutex<Vec<Active>>>,
}

impl Tap {
    /// The next sample waiting, if any; its bytes are free for the tasks
    /// again.
    pub fn try_recv(&self) -> Option<Sample> {
        let sample = self.samples.try_recv().ok()?;
        self.queued.fetch_sub(sample.weight(), Ordering::Relaxed);
        Some(sample)
    }

    /// Every sample waiting now (as [`Self::try_recv`]).
    pub fn try_iter(&self) -> impl Iterator<Item = Sample> + '_ {
        std::iter::from_fn(|| self.try_recv())
    }

    /// The bytes of the samples waiting for the reader.
    pub fn queued_bytes(&self) -> u64 {
        self.queued.load(Ordering::Relaxed)
    }
}

impl Drop for Tap {
    fn drop(&mut self) {
        let mut active = self.active.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(i) = active.iter().position(|a| a.id == self.id) {
            for point in &active.swap_remove(i).points {
                point.post(Change::Detach(self.id));
            }
        }
    }
}

/// A tap as the hub keeps it, to attach it to tasks added later.
#[derive(Debug)]
struct Active {
    id: u64,
    component: String,
    side: TapSide,
    stream: Option<String>,
    rate: f64,
    to_tap: Sender<Sample>,
    queued: Arc<AtomicU64>,
    max_bytes: u64,
    counters: Arc<TapCounters>,
    /// The points it is attached to.
    points: Vec<Arc<TapPoint>>,
}

/// Attaches taps to task points, and sums what every tap sampled and
/// dropped (`GET /api/v1/topology`'s `taps`).
#[derive(Debug, Default)]
pub struct TapHub {
    next_id: AtomicU64,
    totals: Arc<TapCounters>,
    active: Arc<Mutex<Vec<Active>>>,
}

impl TapHub {
    /// Attaches a tap for `request` to `points` (the component's tasks'
    /// points).
    pub fn attach(&self, request: &TapRequest, points: Vec<Arc<TapPoint>>) -> Tap {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (to_tap, samples) = crossbeam_channel::bounded(request.capacity.max(1));
        let counters = Arc::new(TapCounters::default());
        let queued = Arc::new(AtomicU64::new(0));
        let mut tap = Active {
            id,
            component: request.component.clone(),
            side: request.side,
            stream: request.stream.clone(),
            rate: request.rate,
            to_tap,
            queued: queued.clone(),
            max_bytes: request.max_bytes,
            counters: counters.clone(),
            points: Vec::new(),
        };
        for point in points {
            self.attach_point(&mut tap, point);
        }
        let mut active = self.active.lock().unwrap_or_else(|e| e.into_inner());
        active.push(tap);
        Tap { id, samples, queued, counters, active: self.active.clone() }
    }

    fn attach_point(&self, tap: &mut Active, point: Arc<TapPoint>) {
        point.post(Change::Attach(Subscriber {
            id: tap.id,
            side: tap.side,
            stream: tap.stream.clone(),
            sampler: Sampler::new(tap.rate),
            to_tap: tap.to_tap.clone(),
            queued: tap.queued.clone(),
            max_bytes: tap.max_bytes,
            stalled_at: u64::MAX,
            counters: tap.counters.clone(),
            totals: self.totals.clone(),
        }));
        tap.points.push(point);
    }

    /// Attaches every tap to the tasks of its component that it does not
    /// cover yet: after a live reload added tasks. `points` gives a
    /// component's tasks' points (`None`: the component is gone).
    pub fn cover(&self, points: impl Fn(&str) -> Option<Vec<Arc<TapPoint>>>) {
        let mut active = self.active.lock().unwrap_or_else(|e| e.into_inner());
        for tap in active.iter_mut() {
            let Some(now) = points(&tap.component) else { continue };
            for point in now {
                if !tap.points.iter().any(|p| Arc::ptr_eq(p, &point)) {
                    self.attach_point(tap, point);
                }
            }
        }
    }

    /// Taps attached now, and samples sampled and dropped by every tap
    /// since the start.
    pub fn totals(&self) -> (u64, u64, u64) {
        let attached = self.active.lock().map_or(0, |a| a.len() as u64);
        (
            attached,
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
        TapRequest {
            component: "c".into(),
            side: TapSide::Outputs,
            stream: None,
            rate,
            capacity,
            max_bytes: u64::MAX,
        }
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
        let mut port = TapPort::new(point.clone());
        assert!(!port.attached());
        let hub = TapHub::default();
        let tap = hub.attach(&request(1.0, 8), vec![point.clone()]);
        assert!(port.attached());
        port.offer(TapSide::Outputs, "default", || sample("default", 1));
        assert_eq!(tap.try_recv().map(|s| s.values), Some(vec![Value::I64(1)]));
        drop(tap);
        assert!(port.attached(), "the detach waits for the task's next tuple");
        port.offer(TapSide::Outputs, "default", || panic!("no tap is left to build a copy for"));
        assert!(!port.attached());
        assert!(port.subs.is_empty());
    }

    #[test]
    fn a_full_channel_drops_and_counts_and_never_blocks() {
        let point = Arc::new(TapPoint::default());
        let mut port = TapPort::new(point.clone());
        let hub = TapHub::default();
        let tap = hub.attach(&request(1.0, 3), vec![point]);
        let mut built = 0;
        for n in 0..10 {
            port.offer(TapSide::Outputs, "default", || {
                built += 1;
                sample("default", n)
            });
        }
        assert_eq!(built, 3, "no copy is made for a full channel");
        assert_eq!(tap.counters.sampled.load(Ordering::Relaxed), 3);
        assert_eq!(tap.counters.dropped.load(Ordering::Relaxed), 7);
        assert_eq!(hub.totals(), (1, 3, 7));
        let got: Vec<_> = tap.try_iter().map(|s| s.values[0].clone()).collect();
        assert_eq!(got, [Value::I64(0), Value::I64(1), Value::I64(2)], "the oldest are kept");
    }

    #[test]
    fn an_unread_tap_holds_at_most_its_bytes_and_counts_what_it_drops() {
        let point = Arc::new(TapPoint::default());
        let mut port = TapPort::new(point.clone());
        let hub = TapHub::default();
        let big = |n: u8| Sample {
            values: vec![Value::Bytes(vec![n; 10_000].into())],
            ..sample("default", 0)
        };
        let weight = big(0).weight();
        assert!(weight > 10_000 && weight < 11_000, "{weight}");
        let mut req = request(1.0, 1024);
        req.max_bytes = 3 * weight + weight / 2;
        let tap = hub.attach(&req, vec![point]);
        let mut built = 0;
        for n in 0..100 {
            port.offer(TapSide::Outputs, "default", || {
                built += 1;
                big(n)
            });
        }
        assert_eq!(tap.queued_bytes(), 3 * weight, "three fit, the fourth would not");
        assert!(built <= 4, "no copy once the bound is reached ({built} built)");
        assert_eq!(tap.counters.sampled.load(Ordering::Relaxed), 3);
        assert_eq!(tap.counters.dropped.load(Ordering::Relaxed), 97);
        // Reading frees the bytes: the next samples fit again.
        assert_eq!(tap.try_iter().count(), 3);
        assert_eq!(tap.queued_bytes(), 0);
        port.offer(TapSide::Outputs, "default", || big(1));
        assert_eq!(tap.queued_bytes(), weight);

        // A sample larger than the bound goes through alone.
        let point = Arc::new(TapPoint::default());
        let mut port = TapPort::new(point.clone());
        let mut small = request(1.0, 1024);
        small.max_bytes = weight / 2;
        let tap = hub.attach(&small, vec![point]);
        for n in 0..3 {
            port.offer(TapSide::Outputs, "default", || big(n));
        }
        assert_eq!(tap.counters.sampled.load(Ordering::Relaxed), 1);
        assert_eq!(tap.counters.dropped.load(Ordering::Relaxed), 2);
    }

    #[test]
    fn a_tap_sees_only_its_side_and_stream_at_its_rate() {
        let point = Arc::new(TapPoint::default());
        let mut port = TapPort::new(point.clone());
        let hub = TapHub::default();
        let mut words = request(0.5, 100);
        words.stream = Some("words".into());
        let words = hub.attach(&words, vec![point.clone()]);
        let mut inputs = request(1.0, 100);
        inputs.side = TapSide::Inputs;
        let inputs = hub.attach(&inputs, vec![point]);
        for n in 0..20 {
            let stream = if n % 2 == 0 { "words" } else { "other" };
            port.offer(TapSide::Outputs, stream, || sample(stream, n));
        }
        port.offer(TapSide::Inputs, "default", || sample("default", 99));
        let got: Vec<_> = words.try_iter().map(|s| s.values[0].clone()).collect();
        assert_eq!(got, [2, 6, 10, 14, 18].map(Value::I64), "every other tuple of \"words\"");
        assert_eq!(inputs.try_iter().count(), 1);
    }

    #[test]
    fn two_taps_on_one_task_get_one_copy_each_and_a_late_attach_is_applied() {
        let point = Arc::new(TapPoint::default());
        let mut port = TapPort::new(point.clone());
        let hub = TapHub::default();
        let first = hub.attach(&request(1.0, 8), vec![point.clone()]);
        port.offer(TapSide::Outputs, "default", || sample("default", 1));
        let second = hub.attach(&request(1.0, 8), vec![point]);
        let mut built = 0;
        port.offer(TapSide::Outputs, "default", || {
            built += 1;
            sample("default", 2)
        });
        assert_eq!(built, 1, "one copy, cloned for the other tap");
        let values = |tap: &Tap| tap.try_iter().map(|s| s.values[0].clone()).collect::<Vec<_>>();
        assert_eq!(values(&first), [Value::I64(1), Value::I64(2)]);
        assert_eq!(values(&second), [Value::I64(2)]);
        assert_eq!(hub.totals(), (2, 3, 0));
    }

    #[test]
    fn a_tap_covers_the_tasks_added_after_it_and_detaches_from_them() {
        let first = Arc::new(TapPoint::default());
        let hub = TapHub::default();
        let tap = hub.attach(&request(1.0, 8), vec![first.clone()]);
        let added = Arc::new(TapPoint::default());
        let mut port = TapPort::new(added.clone());
        assert!(!port.attached(), "a task added by a reload starts untapped");
        let (p1, p2) = (first.clone(), added.clone());
        hub.cover(|c| (c == "c").then(|| vec![p1.clone(), p2.clone()]));
        hub.cover(|c| (c == "c").then(|| vec![p1.clone(), p2.clone()]));
        assert!(port.attached());
        port.offer(TapSide::Outputs, "default", || sample("default", 7));
        assert_eq!(port.subs.len(), 1, "covered once, however often cover runs");
        assert_eq!(tap.try_recv().map(|s| s.values), Some(vec![Value::I64(7)]));
        drop(tap);
        assert_eq!(hub.totals().0, 0);
        port.offer(TapSide::Outputs, "default", || panic!("detached"));
        assert!(!port.attached());
    }

    #[test]
    fn a_port_that_counts_ahead_samples_exactly_the_tuples_its_sampler_would() {
        for rate in [1.0, 0.5, 0.3, 0.013, 0.001] {
            let point = Arc::new(TapPoint::default());
            let mut port = TapPort::new(point.clone());
            let hub = TapHub::default();
            let tap = hub.attach(&request(rate, 100_000), vec![point]);
            let mut sampler = Sampler::new(rate);
            let want: Vec<i64> = (0..20_000).filter(|_| sampler.take()).collect();
            for n in 0..20_000 {
                // An inputs tuple in between: no tap on that side.
                if port.due(TapSide::Inputs) {
                    port.offer(TapSide::Inputs, "default", || sample("default", -1));
                }
                if port.due(TapSide::Outputs) {
                    port.offer(TapSide::Outputs, "default", || sample("default", n));
                }
            }
            let got: Vec<i64> = tap
                .try_iter()
                .map(|s| match s.values[0] {
                    Value::I64(n) => n,
                    ref other => panic!("{other:?}"),
                })
                .collect();
            assert_eq!(got, want, "rate {rate}");
        }
    }
}
