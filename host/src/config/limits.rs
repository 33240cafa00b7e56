//! The range of every numeric setting, the character set of names, and the
//! memory estimate a topology must fit (issue 14, "Hardening").
//!
//! Every bound here is checked at validate time, and an out-of-range value is
//! a diagnostic with file:line:col (exit 78), never a panic or an allocation
//! the host cannot make. The bounds are generous for real topologies and
//! small enough that no arithmetic on them overflows (a duration added to an
//! `Instant`, `rate × period`, `tasks × receive_buffer_size × bytes`).
//! `docs/topology.md` lists each one next to its key.

/// Longest duration in seconds for `message_timeout_secs`,
/// `tick_tuple_freq_secs` and `restart_window_secs`: one day.
pub const MAX_DURATION_SECS: u64 = 86_400;
/// Longest `shutdown_timeout_secs` and `startup_timeout_secs`: one hour.
pub const MAX_LIFECYCLE_SECS: u64 = 3_600;
/// Longest millisecond setting (`batch_flush_interval_millis`, a throttle's
/// `period_millis`, a progressive wait's `level3_sleep_millis`): one minute.
pub const MAX_MILLIS: u64 = 60_000;
/// Longest `park_micros` of the park wait strategy: one minute, like
/// `level3_sleep_millis` (the drain cuts either short).
pub const MAX_PARK_MICROS: u64 = 60_000_000;
/// Longest `spin_micros` of the bolt wait: 10 ms (a spin burns a core).
pub const MAX_SPIN_MICROS: u64 = 10_000;

/// Most tasks of one spout or bolt (`parallelism`).
pub const MAX_PARALLELISM: u32 = 1_024;
/// Most tasks of the whole topology (every spout and bolt task is a thread).
pub const MAX_TOTAL_TASKS: u64 = 4_096;
/// Most acker executors (each is a thread).
pub const MAX_ACKER_EXECUTORS: u32 = 64;
/// Largest `receive_buffer_size` and `producer_batch_size`, in tuples: 2²⁰.
pub const MAX_RECEIVE_BUFFER_SIZE: u64 = 1 << 20;
/// Largest `receive_buffer_bytes`: 1 TiB (0 turns the byte budget off).
pub(crate) const MAX_RECEIVE_BUFFER_BYTES: u64 = 1 << 40;
/// Largest `max_spout_pending`, in trees per spout task.
pub const MAX_SPOUT_PENDING: u32 = 1_000_000;
/// Most buckets of a spout's pending RotatingMap.
pub const MAX_TIMEOUT_BUCKETS: u32 = 1_024;
/// Largest `spout_recvq_skips`.
pub const MAX_SPOUT_RECVQ_SKIPS: u32 = 1_000_000;
/// Largest `max_restarts`.
pub const MAX_RESTARTS: u32 = 1_000_000;
/// Largest throttle `tuples_per_sec`: one billion.
pub const MAX_TUPLES_PER_SEC: u64 = 1_000_000_000;
/// Largest throttle `bytes_per_sec`: one TB/s.
pub const MAX_BYTES_PER_SEC: u64 = 1_000_000_000_000;

/// Largest `memory_budget_mib`: 1 TiB.
pub const MAX_MEMORY_BUDGET_MIB: u64 = 1 << 20;

/// What the estimate counts for one tuple slot of a receive queue: a tuple of
/// a few small values (its header, the values vector and their bytes).
pub const QUEUE_SLOT_BYTES: u64 = 256;
/// What the estimate counts for one entry of a spout's pending map together
/// with the acker's entry for the same root.
pub const PENDING_ENTRY_BYTES: u64 = 192;
/// What the estimate counts for each task and acker thread, whatever it
/// runs: its allocator heap (mimalloc gives every thread its own pages),
/// its stack, its executor and its instance. Measured on the 2-core dev VM
/// as the resident set of `squall run` with one spout and N - 1 idle
/// `NullBolt` tasks at `receive_buffer_size = 64` (queues empty): 48 MB at
/// 10 tasks, 319 MB at 100, 1,048 MB at 300, 4.9-5.1 GB at 1,000, i.e. about
/// 2.8 MB + 2.2 KB × tasks per task; rounded up here. That was with the
/// allocator's transparent huge pages, which `squall` now turns off unless
/// `MIMALLOC_ALLOW_THP` is set: the same 1,000 tasks then use 876 MiB, and
/// this figure stays the bound for an operator who allows them again.
pub const TASK_BYTES: u64 = 3 << 20;
/// What the estimate counts, per task, for every task of the topology (the
/// per-task tables sized by the topology: contexts, routes, counters); see
/// [`TASK_BYTES`].
pub const TASK_PEER_BYTES: u64 = 2_304;
/// The default `receive_buffer_bytes`: 4 MiB of values per bolt queue
/// (4 values of 1 MB; a queue of 32768 small tuples holds less than that).
pub const DEFAULT_RECEIVE_BUFFER_BYTES: u64 = 4 << 20;

/// The bytes one tap may hold for its reader (see the tap module's doc,
/// "Memory").
pub const TAP_BUFFER_BYTES: u64 = 2 << 20;
/// The most taps attached at once (a tap past these is refused, 503).
pub const MAX_TAPS: usize = 8;
/// A tap's HTTP body ends a frame after the sample that brings it past
/// this many bytes (a large value's line is twice its bytes, in hex): what
/// the body holds outside the tap's bound while the client has not taken it.
pub const TAP_FRAME_BYTES: u64 = 256 << 10;
/// What the estimate counts for taps: [`MAX_TAPS`] taps, each holding its
/// bound of samples and one frame of its HTTP body.
pub const TAPS_BYTES: u64 = MAX_TAPS as u64 * (TAP_BUFFER_BYTES + TAP_FRAME_BYTES);

/// Longest component, stream or topology name, in bytes.
pub const MAX_NAME_LEN: usize = 128;
/// The most `max_connections` of `[topology.http]`.
pub const MAX_HTTP_CONNECTIONS: u32 = 65_536;

/// Whether `c` may appear in a component, stream or topology name: ASCII
/// letters, digits, `_`, `-` and `.`.
pub fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.')
}

/// Why `name` is not a valid component, stream or topology name, if it is not.
pub fn name_problem(name: &str) -> Option<String> {
    if name.is_empty() {
        return Some("is empty".to_owned());
    }
    if name.len() > MAX_NAME_LEN {
        return Some(format!("is longer than {MAX_NAME_LEN} bytes ({} bytes)", name.len()));
    }
    let bad = name.chars().find(|&c| !is_name_char(c))?;
    Some(format!("contains {bad:?}"))
}

/// The help that goes with a [`name_problem`].
pub const NAME_HELP: &str = "a name is 1 to 128 ASCII letters, digits, \"_\", \"-\" or \".\"";

/// What a topology's size is, for [`estimate`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Size {
    /// Spout and bolt tasks.
    pub tasks: u64,
    /// Bolt tasks (each has a receive queue with a byte budget).
    pub bolt_tasks: u64,
    /// Acker executors (each a thread with a queue).
    pub acker_executors: u64,
    /// `receive_buffer_size`, in tuples.
    pub receive_buffer_size: u64,
    /// `receive_buffer_bytes` (0: off).
    pub receive_buffer_bytes: u64,
    /// Trees that may be pending at once, over all spouts.
    pub pending_roots: u64,
    /// What plugins declare their tasks buffer outside the host's queues
    /// (contract 1.3), over all tasks; 0 before the plugins are loaded.
    pub plugin_buffers: u64,
}

/// The parts of a topology's estimated memory need, in bytes (each
/// saturating instead of overflowing).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Estimate {
    /// Task and acker threads: [`TASK_BYTES`] + [`TASK_PEER_BYTES`] × threads each.
    pub threads: u64,
    /// Every queue full of [`QUEUE_SLOT_BYTES`]-byte tuples.
    pub slots: u64,
    /// Every bolt queue holding its byte budget of values.
    pub values: u64,
    /// Every spout task's pending map full.
    pub pending: u64,
    /// Every tap there may be, holding what it may hold ([`TAPS_BYTES`]).
    pub taps: u64,
    /// What plugins declare they buffer ([`Size::plugin_buffers`]).
    pub plugins: u64,
}

impl Estimate {
    /// The sum.
    pub fn total(&self) -> u64 {
        self.threads
            .saturating_add(self.slots)
            .saturating_add(self.values)
            .saturating_add(self.pending)
            .saturating_add(self.taps)
            .saturating_add(self.plugins)
    }
}

/// The memory a topology is estimated to need: every task and acker thread
/// at its measured cost, every receive queue full of [`QUEUE_SLOT_BYTES`]
/// tuples, every bolt queue holding `receive_buffer_bytes` of values on top,
/// and every spout task's pending map full at its `max_spout_pending` (an
/// unlimited one counts one receive queue's worth), the taps' buffers, and
/// what plugins declare they buffer.
pub fn estimate(size: Size) -> Estimate {
    let threads = size.tasks.saturating_add(size.acker_executors);
    let per_thread = TASK_BYTES.saturating_add(threads.saturating_mul(TASK_PEER_BYTES));
    Estimate {
        threads: threads.saturating_mul(per_thread),
        slots: threads.saturating_mul(size.receive_buffer_size).saturating_mul(QUEUE_SLOT_BYTES),
        values: size.bolt_tasks.saturating_mul(size.receive_buffer_bytes),
        pending: size.pending_roots.saturating_mul(PENDING_ENTRY_BYTES),
        taps: TAPS_BYTES,
        plugins: size.plugin_buffers,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_letters_digits_and_a_little_punctuation() {
        assert_eq!(name_problem("word-count_2.v1"), None);
        assert_eq!(name_problem("").as_deref(), Some("is empty"));
        assert_eq!(name_problem("a\0b").as_deref(), Some("contains '\\0'"));
        assert_eq!(name_problem("a\u{1b}[2J").as_deref(), Some("contains '\\u{1b}'"));
        assert_eq!(name_problem("a b").as_deref(), Some("contains ' '"));
        assert_eq!(name_problem("caf\u{e9}").as_deref(), Some("contains '\u{e9}'"));
        assert!(name_problem(&"a".repeat(129)).is_some());
        assert_eq!(name_problem(&"a".repeat(128)), None);
    }

    #[test]
    fn the_estimate_counts_threads_slots_values_and_pending_trees() {
        let size = Size {
            tasks: 2,
            bolt_tasks: 1,
            acker_executors: 1,
            receive_buffer_size: 32768,
            receive_buffer_bytes: 1 << 20,
            pending_roots: 10,
            plugin_buffers: 7 << 20,
        };
        let e = estimate(size);
        assert_eq!(e.threads, 3 * (TASK_BYTES + 3 * TASK_PEER_BYTES));
        assert_eq!(e.slots, 3 * 32768 * QUEUE_SLOT_BYTES);
        assert_eq!(e.values, 1 << 20);
        assert_eq!(e.pending, 10 * PENDING_ENTRY_BYTES);
        assert_eq!(e.taps, TAPS_BYTES);
        assert_eq!(e.plugins, 7 << 20);
        assert_eq!(e.total(), e.threads + e.slots + e.values + e.pending + e.taps + e.plugins);
    }

    #[test]
    fn a_thousand_tasks_are_estimated_at_what_they_were_measured_to_use() {
        // 1 spout and 999 idle bolts, receive_buffer_size = 64: 4.9-5.1 GB
        // of RSS measured (see TASK_BYTES); the old estimate said 16 MiB.
        let size = Size {
            tasks: 1000,
            bolt_tasks: 999,
            acker_executors: 1,
            receive_buffer_size: 64,
            receive_buffer_bytes: 0,
            pending_roots: 64,
            plugin_buffers: 0,
        };
        let gib = estimate(size).total() as f64 / f64::from(1u32 << 30);
        assert!((4.6..6.0).contains(&gib), "{gib} GiB");
    }

    #[test]
    fn the_estimate_saturates() {
        let size = Size {
            tasks: u64::MAX,
            bolt_tasks: u64::MAX,
            acker_executors: 1,
            receive_buffer_size: u64::MAX,
            receive_buffer_bytes: u64::MAX,
            pending_roots: u64::MAX,
            plugin_buffers: 0,
        };
        assert_eq!(estimate(size).total(), u64::MAX);
    }
}
