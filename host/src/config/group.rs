//! `[group]`: hosts that share one topology's partitions (docs/scaling.md).
//!
//! ```toml
//! [group]
//! name = "words"                    # the group; --group overrides it
//! partitions = 8                    # how many partitions the input has
//! host_id = "worker-1"              # this host (default: hostname-pid); --host-id overrides it
//! coordinator = "nats::JetStreamLeases"   # the default
//! lease_ms = 5000                   # every other key is the coordinator's
//! ```
//!
//! The host reads `name`, `partitions`, `coordinator` and `host_id`; every
//! other key is the coordinator's config, checked against the keys it
//! declares once the plugins are loaded. Without `coordinator`, the group
//! uses [`DEFAULT_COORDINATOR`] of the `[plugins]` alias `nats`, or of the
//! library [`DEFAULT_LIBRARY`] beside the `squall` binary when no alias
//! `nats` is declared.
//!
//! A group runs one instance of the topology per partition it owns, each
//! with its own state namespace (`NAMESPACE.pK`); `${SQUALL_PARTITION}` in
//! any string of the file is the partition's number (0 outside a group).

use super::components::{component_ref, toml_kind};
use super::diagnostic::Loc;
use super::model::{ComponentRef, ConfigKeyLoc, PluginDecl};
use super::state::{BackendDecl, StateDecl};
use super::walk::{entries, Section, Value, Walker};

/// The most partitions a group may have.
pub const MAX_PARTITIONS: u64 = 4096;
/// The variable that holds a partition's number in the topology's strings.
pub const PARTITION_VAR: &str = "SQUALL_PARTITION";
/// The alias and coordinator a `[group]` without `coordinator` uses.
pub const DEFAULT_COORDINATOR: (&str, &str) = ("nats", "JetStreamLeases");
/// The library of the default coordinator when `[plugins]` has no alias
/// `nats`: looked for beside the `squall` binary.
pub const DEFAULT_LIBRARY: &str = "libsquall_nats.so";
/// The keys the host reads; the others are the coordinator's.
const HOST_KEYS: &[&str] = &["name", "partitions", "coordinator", "host_id"];

/// `[group]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupDecl {
    /// Where `[group]` is written.
    pub loc: Loc,
    /// `name`.
    pub name: String,
    /// `partitions`.
    pub partitions: u32,
    /// `coordinator`, or the default.
    pub coordinator: ComponentRef,
    /// The coordinator's keys (every key but the host's), as TOML text.
    pub config: String,
    /// Where each of the coordinator's keys is written.
    pub config_keys: Vec<ConfigKeyLoc>,
    /// `host_id`, if written (the default is computed at run time).
    pub host_id: Option<String>,
    /// The default coordinator's library, when no alias `nats` is declared.
    pub implicit_plugin: Option<PluginDecl>,
}

/// True for a name made of ASCII letters, digits, `_` and `-`.
fn plain(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// The default coordinator's library beside the running binary.
fn default_library() -> std::path::PathBuf {
    let dir = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(std::path::Path::to_path_buf))
        .unwrap_or_default();
    dir.join(DEFAULT_LIBRARY)
}

/// Reads `[group]`.
pub(crate) fn read_group(w: &mut Walker<'_>, value: Option<&Value<'_>>) -> Option<GroupDecl> {
    let value = value?;
    let table = w.table(value, "[group]")?;
    let s = Section::new(table, value.span(), "[group]".to_owned());
    let loc = w.loc(&value.span());
    let name = group_name(w, &s);
    let partitions = s.uint(w, "partitions", 1, MAX_PARTITIONS);
    if s.get("partitions").is_none() {
        s.missing(w, "partitions", Some("partitions = 8: the input's partition count".to_owned()));
    }
    let (coordinator, implicit_plugin) = group_coordinator(w, &s, loc)?;
    let host_id = group_host_id(w, &s)?;
    let (config, config_keys) = coordinator_config(w, table, value);
    let name = name?;
    let partitions = u32::try_from(partitions?).ok()?;
    Some(GroupDecl {
        loc,
        name,
        partitions,
        coordinator,
        config,
        config_keys,
        host_id,
        implicit_plugin,
    })
}

/// `name`, a plain name; `None` (an error) when missing or not plain.
fn group_name(w: &mut Walker<'_>, s: &Section<'_, '_>) -> Option<String> {
    match s.string(w, "name") {
        Some(n) if plain(n.get_ref()) => Some(n.into_inner()),
        Some(n) => {
            let message = format!("name {:?} in [group] is not a plain name", n.get_ref());
            let help = "letters, digits, '_' and '-', at most 64".to_owned();
            w.error(&n.span(), message, Some(help));
            None
        }
        None => {
            if s.get("name").is_none() {
                s.missing(w, "name", Some("name = \"my-group\", or --group NAME".to_owned()));
            }
            None
        }
    }
}

/// `coordinator`, or [`DEFAULT_COORDINATOR`] with the library it implies
/// when `[plugins]` declares no alias `nats`. `None` for a reference in
/// error.
fn group_coordinator(
    w: &mut Walker<'_>,
    s: &Section<'_, '_>,
    loc: Loc,
) -> Option<(ComponentRef, Option<PluginDecl>)> {
    if let Some(text) = s.string(w, "coordinator") {
        return Some((component_ref(w, text, "[group] coordinator")?, None));
    }
    let (alias, component) = DEFAULT_COORDINATOR;
    let reference = ComponentRef { alias: alias.to_owned(), component: component.to_owned(), loc };
    let implicit = (!w.aliases.iter().any(|a| a == alias)).then(|| PluginDecl {
        alias: alias.to_owned(),
        path: default_library(),
        sha256: None,
        allow_writable: false,
        loc,
    });
    Some((reference, implicit))
}

/// `host_id`, if written: `Some(None)` without one, `None` (an error) for
/// one a lease key cannot hold.
fn group_host_id(w: &mut Walker<'_>, s: &Section<'_, '_>) -> Option<Option<String>> {
    match s.string(w, "host_id") {
        Some(h) if host_id_ok(h.get_ref()) => Some(Some(h.into_inner())),
        Some(h) => {
            let message = format!("host_id {:?} in [group] is not a valid host id", h.get_ref());
            let help = "letters, digits, '_', '-' and '=', at most 128".to_owned();
            w.error(&h.span(), message, Some(help));
            None
        }
        None => Some(None),
    }
}

/// The coordinator's config: every key of `[group]` the host does not
/// read, as TOML text, and where each is written.
fn coordinator_config(
    w: &mut Walker<'_>,
    table: &toml::de::DeTable<'_>,
    value: &Value<'_>,
) -> (String, Vec<ConfigKeyLoc>) {
    let theirs: Vec<_> = entries(table)
        .into_iter()
        .filter(|(key, _)| !HOST_KEYS.contains(&key.get_ref().as_ref()))
        .collect();
    let config_keys = theirs
        .iter()
        .map(|(key, value)| ConfigKeyLoc {
            name: key.get_ref().to_string(),
            loc: w.loc(&key.span()),
            kind: toml_kind(value.get_ref()),
        })
        .collect();
    let context = "[group]";
    let config = w.user_table(theirs, "", context);
    (w.document(&config, &value.span(), context), config_keys)
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
