//! Groups: hosts that share one topology's partitions, each partition owned
//! by exactly one host at a time, as a coordinator plugin decides
//! (docs/scaling.md; contract 1.3's coordinators).
//!
//! [`member`] drives the coordinator: it joins, polls, and runs one thread
//! per partition assigned, which runs the topology for that partition,
//! fenced ([`crate::state::Fence`]) by the coordinator's epoch and restored
//! from the partition's own state namespace. A partition's work is an
//! ordinary topology run ([`crate::runtime::start_fenced`]), so a taker
//! restores exactly the partition's last committed checkpoint: its keyed
//! state and its spouts' positions.

pub mod member;

pub use member::{
    Counters, JoinError, Member, PartitionError, PartitionStatus, Partitions, Settings, Status,
};

/// This host's default id: its host name and process id.
pub fn default_host_id() -> String {
    let name = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .unwrap_or_else(|_| "host".to_owned());
    let name: String = name
        .trim()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '-' })
        .take(100)
        .collect();
    let name = if name.is_empty() { "host".to_owned() } else { name };
    format!("{name}-{}", std::process::id())
}
