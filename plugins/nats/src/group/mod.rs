//! Group coordination through leases in NATS JetStream's key-value store
//! ([`JetStreamLeases`], docs/scaling.md): each partition of a group is
//! owned by exactly one host at a time.
//!
//! - [`assign`]: the pure core. From what a host sees of the leases and the
//!   members, which partitions it takes and gives up (sticky fair shares).
//! - [`lease`]: the leases in the bucket: create, then update against the
//!   expected revision; each lease carries a fencing epoch.
//! - `keeper`: one member's steps (heartbeat, renewals, read, plan), run
//!   by the host's polls.
//! - `report`: the group as `squall group status` shows it, read from the
//!   bucket without joining.

pub mod assign;
pub mod lease;

mod keeper;
mod report;

use std::time::Duration;

use squall_plugin_api::abi::PartitionEvent;
use squall_plugin_api::{ComponentConfig, ConfigKey, Coordinator, Result};

/// The shortest lease time accepted.
const MIN_LEASE_MS: u64 = 300;
/// The longest lease time accepted (ten minutes).
const MAX_LEASE_MS: u64 = 600_000;

squall_connector::connector_config! {
    /// `[group]`'s keys for the leases (the host keeps `partitions`,
    /// `coordinator` and `host_id`, and passes `name`).
    #[derive(Debug, Clone, PartialEq)]
    struct LeaseConfig {
        name: String = default(String, "\"\"", "the group's name (the host passes [group] name)"),
        lease_ms: u64 = default(Integer, "5000", "how long a silent host keeps its partitions (300 to 600000)"),
        url: String = default(String, "\"nats://127.0.0.1:4222\"", "the NATS server holding the leases (JetStream KV)"),
        bucket: Option<String> = maybe(String, "the KV bucket (default: squall_group_NAME)"),
        spouts: Vec<Vec<report::SpoutDecl>> = default(Array, "[]", "set by the host for `squall group status`: each partition's spouts of this plugin, whose lag it shows"),
    }
}

/// True for a name made of ASCII letters, digits, `_` and `-` (what a KV
/// bucket may be called).
fn plain(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// The group's leases in a JetStream KV bucket: `[group]` without a
/// `coordinator` key means this one.
pub struct JetStreamLeases {
    config: LeaseConfig,
    bucket: String,
    runtime: tokio::runtime::Runtime,
    keeper: Option<keeper::Keeper>,
}

impl std::fmt::Debug for JetStreamLeases {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JetStreamLeases").field("bucket", &self.bucket).finish_non_exhaustive()
    }
}

impl JetStreamLeases {
    fn lease(&self) -> Duration {
        Duration::from_millis(self.config.lease_ms)
    }

    /// How long one broker request may wait.
    fn timeout(&self) -> Duration {
        (self.lease() / 4).clamp(Duration::from_millis(100), Duration::from_secs(2))
    }
}

impl Coordinator for JetStreamLeases {
    const NAME: &'static str = "JetStreamLeases";
    const DESCRIPTION: &'static str =
        "group leases in a JetStream KV bucket: sticky fair shares, fenced by each lease's epoch";
    const CONFIG_KEYS: Option<&'static [ConfigKey]> = Some(LeaseConfig::KEYS);

    fn new(config: &ComponentConfig<'_>) -> Result<Self> {
        let config = LeaseConfig::parse(config)?;
        if !(MIN_LEASE_MS..=MAX_LEASE_MS).contains(&config.lease_ms) {
            return Err(format!(
                "lease_ms = {} is out of range: {MIN_LEASE_MS} to {MAX_LEASE_MS}",
                config.lease_ms
            )
            .into());
        }
        let bucket = match &config.bucket {
            Some(b) if plain(b) => b.clone(),
            Some(b) => {
                return Err(format!(
                    "bucket {b:?} is not a plain name (letters, digits, '_' and '-', at most 64)"
                )
                .into())
            }
            None => format!("squall_group_{}", config.name),
        };
        let runtime =
            crate::connect::runtime().map_err(|e| format!("cannot start a runtime: {e}"))?;
        Ok(Self { config, bucket, runtime, keeper: None })
    }

    fn join(&mut self, member: &str, partitions: u32) -> Result<u32> {
        if partitions == 0 {
            return Err("the JetStream leases need [group] partitions".into());
        }
        let timeout = self.timeout();
        let name = self.config.name.clone();
        let leases = self
            .runtime
            .block_on(lease::Leases::open(&self.config.url, &self.bucket, timeout))
            .map_err(|e| format!("group {name}: {e}"))?;
        let settings =
            keeper::Settings { name, partitions, lease: self.lease(), host_id: member.to_owned() };
        let (keeper, watcher) = keeper::Keeper::new(settings, leases);
        // The watch runs on the same thread, while a poll waits; it ends
        // with the keeper (or the runtime).
        self.runtime.spawn(watcher);
        self.keeper = Some(keeper);
        Ok(partitions)
    }

    fn poll(&mut self, wait: Duration) -> Result<Vec<PartitionEvent>> {
        let Some(keeper) = self.keeper.as_mut() else { return Ok(Vec::new()) };
        self.runtime.block_on(async {
            keeper.step().await;
            if !keeper.has_changes() {
                tokio::time::sleep(wait).await;
            }
        });
        Ok(keeper.drain())
    }

    fn released(&mut self, partition: u32, epoch: u64) -> Result<()> {
        if let Some(keeper) = self.keeper.as_mut() {
            self.runtime.block_on(keeper.released(partition, epoch));
        }
        Ok(())
    }

    fn status(&mut self) -> Result<String> {
        if let Some(keeper) = &self.keeper {
            return Ok(keeper.status().to_string());
        }
        let timeout = Duration::from_secs(2);
        let read = report::read(&self.config, &self.bucket, self.lease(), timeout);
        let report = self.runtime.block_on(read)?;
        serde_json::to_string(&report).map_err(|e| e.to_string().into())
    }

    fn leave(&mut self) {
        if let Some(keeper) = self.keeper.as_mut() {
            self.runtime.block_on(keeper.leave());
        }
    }
}
