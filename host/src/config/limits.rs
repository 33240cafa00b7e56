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

/// The memory a topology is estimated to need, in bytes: every task's receive
/// queue full of [`QUEUE_SLOT_BYTES`]-byte tuples, every acker's queue
/// likewise, and every spout task's pending map full at its
/// `max_spout_pending` (an unlimited one counts one receive queue's worth).
/// Saturates instead of overflowing.
pub fn estimate_bytes(
    tasks: u64,
    acker_executors: u64,
    receive_buffer_size: u64,
    pending_roots: u64,
) -> u64 {
    let queues = tasks.saturating_add(acker_executors);
    queues
        .saturating_mul(receive_buffer_size)
        .saturating_mul(QUEUE_SLOT_BYTES)
        .saturating_add(pending_roots.saturating_mul(PENDING_ENTRY_BYTES))
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
    fn the_estimate_saturates() {
        assert_eq!(estimate_bytes(2, 1, 32768, 0), 3 * 32768 * QUEUE_SLOT_BYTES);
        assert_eq!(estimate_bytes(u64::MAX, 1, u64::MAX, u64::MAX), u64::MAX);
    }
}
