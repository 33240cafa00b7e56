//! Groups: hosts that share one topology's partitions, each partition owned
//! by exactly one host at a time, through leases in the broker
//! (docs/scaling.md).
//!
//! - [`assign`]: the pure core. From what a host sees of the leases and the
//!   members, which partitions it takes and gives up (sticky fair shares).
//! - [`lease`]: the leases in NATS JetStream's key-value store: create,
//!   then update against the expected revision; each lease carries a
//!   fencing epoch.
//! - [`member`]: the thin shell. The lease keeper's loop (heartbeat,
//!   renewals, plan) and one thread per partition held, which runs the
//!   topology for that partition, fenced ([`crate::state::Fence`]) and
//!   restored from the partition's own state namespace.
//!
//! The host owns membership and assignment; a partition's work is an
//! ordinary topology run ([`crate::runtime::start_fenced`]), so a taker
//! restores exactly the partition's last committed checkpoint: its keyed
//! state and its spouts' positions.

pub mod assign;
pub mod lease;
pub mod member;

pub use member::{Counters, Member, PartitionStatus, Partitions, Settings, Status};

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
