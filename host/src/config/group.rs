//! `[group]`: hosts that share one topology's partitions (docs/scaling.md).
//!
//! ```toml
//! [group]
//! name = "words"                    # the group; --group overrides it
//! partitions = 8                    # how many partitions the input has
//! lease_ms = 5000                   # how long a silent host keeps its partitions
//! url = "nats://127.0.0.1:4222"     # the NATS server holding the leases (JetStream KV)
//! bucket = "squall_group_words"     # the KV bucket (default: squall_group_NAME)
//! host_id = "worker-1"              # this host (default: hostname-pid); --host-id overrides it
//! ```
//!
//! A group runs one instance of the topology per partition it owns, each
//! with its own state namespace (`NAMESPACE.pK`); `${SQUALL_PARTITION}` in
//! any string of the file is the partition's number (0 outside a group).

use super::defaults::keys;
use super::diagnostic::Loc;
use super::state::{BackendDecl, StateDecl};
use super::walk::{Section, Value, Walker};

/// The default lease time.
pub const DEFAULT_LEASE_MS: u64 = 5000;
/// The shortest lease time accepted.
pub const MIN_LEASE_MS: u64 = 300;
/// The longest lease time accepted (ten minutes).
pub const MAX_LEASE_MS: u64 = 600_000;
/// The most partitions a group may have.
pub const MAX_PARTITIONS: u64 = 4096;
/// The default NATS server.
pub const DEFAULT_URL: &str = "nats://127.0.0.1:4222";
/// The variable that holds a partition's number in the topology's strings.
pub const PARTITION_VAR: &str = "SQUALL_PARTITION";

/// `[group]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupDecl {
    /// Where `[group]` is written.
    pub loc: Loc,
    /// `name`.
    pub name: String,
    /// `partitions`.
    pub partitions: u32,
    /// `lease_ms`.
    pub lease_ms: u64,
    /// `url`: the NATS server with JetStream.
    pub url: String,
    /// `bucket`, or `squall_group_NAME`.
    pub bucket: String,
    /// `host_id`, if written (the default is computed at run time).
    pub host_id: Option<String>,
}

/// True for a name made of ASCII letters, digits, `_` and `-` (what a KV
/// bucket and a key token may hold).
fn plain(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// Reads `[group]`.
pub(crate) fn read_group(w: &mut Walker<'_>, value: Option<&Value<'_>>) -> Option<GroupDecl> {
    let value = value?;
    let table = w.table(value, "[group]")?;
    let s = Section::new(table, value.span(), "[group]".to_owned());
    s.check_keys(w, keys::GROUP);
    let loc = w.loc(&value.span());
    let plain_help = "letters, digits, '_' and '-', at most 64".to_owned();
    let name = match s.string(w, "name") {
        Some(n) if plain(n.get_ref()) => Some(n.into_inner()),
        Some(n) => {
            let message = format!("name {:?} in [group] is not a plain name", n.get_ref());
            w.error(&n.span(), message, Some(plain_help.clone()));
            None
        }
        None => {
            if s.get("name").is_none() {
                s.missing(w, "name", Some("name = \"my-group\", or --group NAME".to_owned()));
            }
            None
        }
    };
    let partitions = s.uint(w, "partitions", 1, MAX_PARTITIONS);
    if s.get("partitions").is_none() {
        s.missing(w, "partitions", Some("partitions = 8: the input's partition count".to_owned()));
    }
    let lease_ms = s.u64_in(w, "lease_ms", DEFAULT_LEASE_MS, MIN_LEASE_MS, MAX_LEASE_MS);
    let url = s.string(w, "url").map_or_else(|| DEFAULT_URL.to_owned(), |u| u.into_inner());
    let bucket = match s.string(w, "bucket") {
        Some(b) if plain(b.get_ref()) => Some(b.into_inner()),
        Some(b) => {
            let message = format!("bucket {:?} in [group] is not a plain name", b.get_ref());
            w.error(&b.span(), message, Some(plain_help));
            return None;
        }
        None => None,
    };
    let host_id = match s.string(w, "host_id") {
        Some(h) if host_id_ok(h.get_ref()) => Some(h.into_inner()),
        Some(h) => {
            let message = format!("host_id {:?} in [group] is not a valid host id", h.get_ref());
            let help = "letters, digits, '_', '-' and '=', at most 128".to_owned();
            w.error(&h.span(), message, Some(help));
            return None;
        }
        None => None,
    };
    let name = name?;
    let partitions = u32::try_from(partitions?).ok()?;
    let bucket = bucket.unwrap_or_else(|| format!("squall_group_{name}"));
    Some(GroupDecl { loc, name, partitions, lease_ms, url, bucket, host_id })
}

/// True for a host id a lease key can hold.
pub fn host_id_ok(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 128
        && id.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'='))
}

/// A group's partitions keep their state in a shared backend: the memory
/// backend, or none, cannot move a partition to another host.
pub(crate) fn check_group_state(w: &mut Walker<'_>, group: &GroupDecl, state: Option<&StateDecl>) {
    let why = match state {
        None => "a group needs [state]",
        Some(StateDecl { backend: BackendDecl::Memory, .. }) => {
            "a group cannot use the memory state backend"
        }
        Some(_) => return,
    };
    w.error_at(
        group.loc,
        format!("{why}: a partition's state and positions move with it to another host"),
        Some("[state] backend = \"alias::RedisState\" (or another shared backend)".to_owned()),
    );
}
