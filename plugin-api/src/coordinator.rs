//! Contract 1.3: group coordinators, the component kind that decides which
//! of a group's partitions a host runs.

use crate::abi::PartitionEvent;
use crate::{ComponentConfig, ConfigKey, Result};

/// A group coordinator, named by a topology's `[group] coordinator =
/// "alias::Name"` (export it with `coordinators: [..]` in
/// [`export_plugin!`](crate::export_plugin)).
///
/// The host owns the partitions' work: for each partition this coordinator
/// assigns, it restores the partition's state namespace and runs the
/// topology for it, fenced by the event's epoch; for each revoke it stops
/// the partition, commits what is complete, and calls
/// [`released`](Self::released). The host calls every method from one
/// thread, one call at a time.
pub trait Coordinator: Send + Sized + 'static {
    /// The name a topology's `[group] coordinator = "alias::Name"` uses.
    const NAME: &'static str;
    /// A one-line description for `squall inspect`.
    const DESCRIPTION: &'static str = "";
    /// The keys of `[group]` it accepts besides the host's (`name`,
    /// `partitions`, `coordinator`, `host_id`), checked by `squall validate`.
    const CONFIG_KEYS: Option<&'static [ConfigKey]> = None;

    /// Builds an instance from `[group]`'s keys that are not the host's,
    /// plus `name` (the group's name) and `spouts` (each partition's spouts
    /// of this plugin: `[[{ component, config }, ...], ...]`, each config
    /// as TOML text), which the host sets.
    ///
    /// # Errors
    /// When the config is invalid.
    fn new(config: &ComponentConfig<'_>) -> Result<Self>;

    /// Joins the group as `member`. `partitions` is the count the topology
    /// declares (0: the coordinator knows it). Returns the partition count.
    ///
    /// # Errors
    /// When the group cannot be reached or joined.
    fn join(&mut self, member: &str, partitions: u32) -> Result<u32>;

    /// Runs the protocol for at most `wait` and returns what changed.
    ///
    /// # Errors
    /// A transient error is reported and the host polls again; ownership
    /// not renewed in time expires at the host (its fence).
    fn poll(&mut self, wait: std::time::Duration) -> Result<Vec<PartitionEvent>>;

    /// The host stopped `partition` (held under `epoch`) and committed its
    /// last checkpoint.
    ///
    /// # Errors
    /// When the release cannot be told to the group (it then expires).
    fn released(&mut self, partition: u32, epoch: u64) -> Result<()>;

    /// The group as this instance sees it, as one JSON document. Before
    /// [`join`](Self::join) (`squall group status`), the whole group as read
    /// from its broker; once joined, this member's view, whose fields
    /// `members` (live member ids), `share` and `counters` (numbers) the
    /// host shows on its group endpoint.
    ///
    /// # Errors
    /// When the group cannot be read.
    fn status(&mut self) -> Result<String>;

    /// This host is leaving: take nothing more. The host then stops every
    /// partition it runs, still polling (so that ownership stays renewed),
    /// and calls [`released`](Self::released) for each; the member has left
    /// once every partition is released.
    fn leave(&mut self) {}
}

/// One spout of a partition's topology, as the host passes it in a
/// coordinator's `spouts` config key (only the spouts of the coordinator's
/// own plugin): how a coordinator learns what each partition reads.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct PartitionSpout {
    /// The component's name in the plugin (`JetStreamSpout`, `KafkaSpout`).
    pub component: String,
    /// Its config table, as TOML text.
    #[serde(default)]
    pub config: String,
}
