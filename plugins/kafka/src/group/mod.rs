//! [`KafkaGroup`]: a group coordinator (contract 1.3) on Kafka's own
//! consumer group protocol (docs/scaling.md, "The Kafka coordinator").
//!
//! squall's partitions are the input topic's partitions. Each host's
//! coordinator is a member of one Kafka consumer group, subscribed to the
//! topic; the broker's assignment (cooperative-sticky by default) says
//! which partitions the host runs, and the group generation is the
//! partitions' fencing epoch. The member reads no record itself: each
//! assigned partition's topology run reads it, with a `KafkaSpout` on
//! `assign = ["TOPIC:${SQUALL_PARTITION}"]`.
//!
//! - [`ownership`]: the pure core: what the member holds, and when a
//!   revocation may go back to the group (only once the host released
//!   every partition of it).
//! - `member`: the consumer, its rebalance callback and the epochs.
//! - `report`: the group as `squall group status` shows it, read without
//!   joining.

pub mod ownership;

mod member;
mod report;

use std::time::Duration;

use rdkafka::consumer::{BaseConsumer, Consumer};
use squall_plugin_api::abi::PartitionEvent;
use squall_plugin_api::{ComponentConfig, ConfigKey, Coordinator, Result};

use crate::client::{self, with_connection, Context0};
use report::SpoutDecl;

pub use member::EPOCH_TAG;

squall_connector::connector_config! {
    /// `[group]`'s keys for the Kafka coordinator (the host keeps
    /// `partitions`, `coordinator` and `host_id`, and passes `name`).
    #[derive(Debug, Clone, PartialEq)]
    struct GroupKeys {
        name: String = default(String, "\"\"", "the group's name (the host passes [group] name)"),
        topic: Option<String> = maybe(String, "the input topic whose partitions the hosts share (default: the one topic the partitions' KafkaSpouts read with assign)"),
        group_id: Option<String> = maybe(String, "the Kafka consumer group the hosts join (default: squall-group-NAME); not the spouts' group_id"),
        #[serde(deserialize_with = "squall_connector::config::duration")]
        retry_after: Duration = default(Duration, "\"1s\"", "how long a partition that failed to start waits before it is started again, under a new epoch"),
        spouts: Vec<Vec<SpoutDecl>> = default(Array, "[]", "set by the host: each partition's spouts of this plugin, checked against the topic"),
    }
}

with_connection!(GroupConfig, GroupKeys);

/// The group's topic and consumer groups, resolved from the keys and the
/// partitions' spouts.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Resolved {
    topic: String,
    group_id: String,
    /// The consumer group the partitions' spouts commit to, when they
    /// agree on one.
    spout_group: Option<String>,
}

/// What one `KafkaSpout` of a partition reads, from its config text.
#[derive(Debug, Default)]
struct SpoutReads {
    assign: Vec<String>,
    topics: Vec<String>,
    group_id: Option<String>,
}

fn spout_reads(decl: &SpoutDecl) -> Option<SpoutReads> {
    if decl.component != "KafkaSpout" {
        return None;
    }
    let table: toml::Table = decl.config.parse().ok()?;
    let strings = |key: &str| -> Vec<String> {
        table
            .get(key)
            .and_then(toml::Value::as_array)
            .map(|a| a.iter().filter_map(|v| v.as_str().map(str::to_owned)).collect())
            .unwrap_or_default()
    };
    Some(SpoutReads {
        assign: strings("assign"),
        topics: strings("topics"),
        group_id: table.get("group_id").and_then(toml::Value::as_str).map(str::to_owned),
    })
}

/// The topic of an `assign` entry (`topic:partition` or `topic`).
fn assigned_topic(entry: &str) -> &str {
    entry.rsplit_once(':').map_or(entry, |(t, _)| t)
}

impl GroupConfig {
    /// Checks the keys and the partitions' spouts (module doc).
    fn resolve(&self) -> Result<Resolved> {
        self.connection.check()?;
        if self.retry_after.is_zero() {
            return Err("retry_after must be longer than 0".into());
        }
        let reads: Vec<Vec<SpoutReads>> =
            self.spouts.iter().map(|p| p.iter().filter_map(spout_reads).collect()).collect();
        let topic = match &self.topic {
            Some(t) => t.clone(),
            None => topic_of(&reads)?,
        };
        client::check_topic("topic", &topic)?;
        check_spouts(&reads, &topic)?;
        let group_id =
            self.group_id.clone().unwrap_or_else(|| format!("squall-group-{}", self.name));
        if group_id.trim().is_empty() {
            return Err("group_id must not be empty".into());
        }
        let spout_groups: std::collections::BTreeSet<String> =
            reads.iter().flatten().filter_map(|r| r.group_id.clone()).collect();
        if spout_groups.contains(&group_id) {
            return Err(format!(
                "group_id {group_id:?} is also the partitions' KafkaSpout group_id: give them \
                 different groups (the broker refuses the spouts' offset commits in a group whose \
                 members are the hosts)"
            )
            .into());
        }
        let spout_group = match spout_groups.len() {
            1 => spout_groups.into_iter().next(),
            _ => None,
        };
        Ok(Resolved { topic, group_id, spout_group })
    }
}

/// The one topic the partitions' `KafkaSpout`s read with `assign`.
fn topic_of(reads: &[Vec<SpoutReads>]) -> Result<String> {
    let topics: std::collections::BTreeSet<&str> =
        reads.iter().flatten().flat_map(|r| r.assign.iter().map(|a| assigned_topic(a))).collect();
    let mut it = topics.iter();
    match (it.next(), it.next()) {
        (Some(t), None) => Ok((*t).to_owned()),
        (None, _) => Err("topic is missing, and no KafkaSpout of the topology reads assigned \
                          partitions to take it from: set topic = \"TOPIC\" and give the spout \
                          assign = [\"TOPIC:${SQUALL_PARTITION}\"]"
            .into()),
        (Some(_), Some(_)) => Err(format!(
            "topic is missing, and the KafkaSpouts read several topics ({}): set topic = \"...\"",
            topics.iter().copied().collect::<Vec<_>>().join(", ")
        )
        .into()),
    }
}

/// Each partition `k`'s `KafkaSpout`s read the topic's partition `k` only,
/// and none subscribes to the topic in a consumer group of its own.
fn check_spouts(reads: &[Vec<SpoutReads>], topic: &str) -> Result<()> {
    let own = format!("{topic}:${{SQUALL_PARTITION}}");
    for (k, spouts) in reads.iter().enumerate() {
        for r in spouts {
            if r.topics.iter().any(|t| t == topic) {
                return Err(format!(
                    "partition {k}'s KafkaSpout subscribes to {topic:?} in a consumer group of its \
                     own: in a Kafka group each partition's spout reads its own partition, \
                     assign = [\"{own}\"]"
                )
                .into());
            }
            let mine = format!("{topic}:{k}");
            if let Some(other) = r.assign.iter().find(|a| assigned_topic(a) == topic && **a != mine)
            {
                return Err(format!(
                    "partition {k}'s KafkaSpout reads {other:?}: in a Kafka group each \
                     partition's spout reads its own partition, assign = [\"{own}\"]"
                )
                .into());
            }
        }
    }
    Ok(())
}

/// A group coordinator on Kafka's consumer group protocol: `[group]
/// coordinator = "kafka::KafkaGroup"`.
pub struct KafkaGroup {
    config: GroupConfig,
    resolved: Resolved,
    member: Option<member::Member>,
}

impl std::fmt::Debug for KafkaGroup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KafkaGroup").field("resolved", &self.resolved).finish_non_exhaustive()
    }
}

impl KafkaGroup {
    /// The consumer's configuration, for member `client_id`.
    fn client_config(&self, client_id: &str) -> Result<rdkafka::ClientConfig> {
        let defaults = [
            ("partition.assignment.strategy", "cooperative-sticky".to_owned()),
            ("statistics.interval.ms", "1000".to_owned()),
        ];
        let fixed = [
            ("group.id", self.resolved.group_id.clone()),
            ("client.id", client_id.to_owned()),
            ("enable.auto.commit", "false".to_owned()),
            ("enable.auto.offset.store", "false".to_owned()),
            ("enable.partition.eof", "false".to_owned()),
        ];
        self.config.connection.client_config(&defaults, &fixed)
    }

    /// The topic's partition count, read within `connect_timeout`.
    fn topic_partitions(&self, config: &rdkafka::ClientConfig) -> Result<u32> {
        let (brokers, topic) = (self.config.connection.brokers.trim(), &self.resolved.topic);
        let mut probe = config.clone();
        probe.remove("group.id");
        let consumer: BaseConsumer<Context0> = probe
            .create_with_context(Context0::quiet())
            .map_err(|e| format!("cannot create a consumer: {e}"))?;
        let timeout = self.config.connection.connect_timeout;
        let metadata = consumer.fetch_metadata(Some(topic), timeout).map_err(|e| {
            format!("cannot read topic {topic:?} from {brokers} within {timeout:?}: {e}")
        })?;
        let count = client::partitions(&metadata, std::slice::from_ref(topic))
            .first()
            .and_then(|(_, n)| *n)
            .ok_or_else(|| format!("topic {topic:?} does not exist on {brokers}"))?;
        Ok(u32::try_from(count).unwrap_or(u32::MAX))
    }
}

impl Coordinator for KafkaGroup {
    const NAME: &'static str = "KafkaGroup";
    const DESCRIPTION: &'static str =
        "a Kafka consumer group: the broker assigns the topic's partitions, fenced by generation";
    const CONFIG_KEYS: Option<&'static [ConfigKey]> = Some(&GroupConfig::KEYS);

    fn new(config: &ComponentConfig<'_>) -> Result<Self> {
        let config = GroupConfig::parse(config)?;
        let resolved = config.resolve()?;
        let group = Self { config, resolved, member: None };
        group.client_config("squall")?;
        Ok(group)
    }

    fn join(&mut self, member: &str, partitions: u32) -> Result<u32> {
        let name = self.config.name.clone();
        let config = self.client_config(member)?;
        let found = self.topic_partitions(&config).map_err(|e| format!("group {name}: {e}"))?;
        if partitions != 0 && partitions != found {
            return Err(format!(
                "group {name}: topic {:?} has {found} partitions, but [group] partitions = \
                 {partitions}: they must be equal",
                self.resolved.topic
            )
            .into());
        }
        let joining = member::Joining {
            group: name.clone(),
            group_id: self.resolved.group_id.clone(),
            topic: self.resolved.topic.clone(),
            host: member.to_owned(),
            retry_after: self.config.retry_after,
        };
        let joined =
            member::Member::join(&config, joining).map_err(|e| format!("group {name}: {e}"))?;
        self.member = Some(joined);
        Ok(found)
    }

    fn poll(&mut self, wait: Duration) -> Result<Vec<PartitionEvent>> {
        match self.member.as_mut() {
            Some(m) => Ok(m.poll(wait)),
            None => Ok(Vec::new()),
        }
    }

    fn released(&mut self, partition: u32, epoch: u64) -> Result<()> {
        if let Some(m) = self.member.as_mut() {
            m.released(partition, epoch);
        }
        Ok(())
    }

    fn status(&mut self) -> Result<String> {
        if let Some(m) = self.member.as_mut() {
            return Ok(m.status().to_string());
        }
        let config = self.client_config("squall-group-status")?;
        let query = report::Query {
            name: &self.config.name,
            group_id: &self.resolved.group_id,
            topic: &self.resolved.topic,
            spout_group: self.resolved.spout_group.as_deref(),
            timeout: self.config.connection.connect_timeout,
        };
        let report = report::read(&config, &query)
            .map_err(|e| format!("group {}: {e}", self.config.name))?;
        Ok(report.to_string())
    }

    fn leave(&mut self) {
        if let Some(m) = self.member.as_mut() {
            m.leave();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group(text: &str) -> Result<KafkaGroup> {
        KafkaGroup::new(&ComponentConfig::new(text))
    }

    /// `[group]`'s keys in `base`, and `spouts` as the host passes them:
    /// partition `k`'s one KafkaSpout reads `assign[k]` in group `s`.
    fn with_spouts(base: &str, assign: &[&str]) -> String {
        let mut table: toml::Table = base.parse().unwrap();
        let parts = assign
            .iter()
            .map(|a| {
                let mut spout = toml::Table::new();
                spout.insert("component".into(), "KafkaSpout".into());
                spout.insert(
                    "config".into(),
                    format!("assign = [\"{a}\"]\ngroup_id = \"s\"").into(),
                );
                toml::Value::Array(vec![toml::Value::Table(spout)])
            })
            .collect();
        table.insert("spouts".into(), toml::Value::Array(parts));
        toml::to_string(&table).unwrap()
    }

    #[test]
    fn the_topic_comes_from_the_partitions_spouts_and_each_reads_its_own_partition() {
        let g = group(&with_spouts("name = \"words\"", &["in:0", "in:1"])).unwrap();
        assert_eq!(g.resolved.topic, "in");
        assert_eq!(g.resolved.group_id, "squall-group-words");
        assert_eq!(g.resolved.spout_group.as_deref(), Some("s"));
        let e = group(&with_spouts("name = \"w\"", &["in:1", "in:0"])).unwrap_err();
        let e = e.to_string();
        assert!(e.contains("partition 0's KafkaSpout reads \"in:1\""), "{e}");
        assert!(e.contains("assign = [\"in:${SQUALL_PARTITION}\"]"), "{e}");
        let e = group("name = \"w\"").unwrap_err().to_string();
        assert!(e.contains("topic is missing"), "{e}");
        let g = group("name = \"w\"\ntopic = \"t\"\ngroup_id = \"hosts\"").unwrap();
        assert_eq!((g.resolved.topic.as_str(), g.resolved.group_id.as_str()), ("t", "hosts"));
    }

    #[test]
    fn bad_keys_are_one_clear_error_each() {
        let cases = [
            ("name = \"w\"\ntopic = \"a b\"", "not a Kafka topic name"),
            ("name = \"w\"\ntopic = \"t\"\nretry_after = \"0s\"", "retry_after"),
            ("name = \"w\"\ntopic = \"t\"\ngroup_id = \" \"", "group_id must not be empty"),
            ("name = \"w\"\ntopic = \"t\"\nlease_ms = 5", "lease_ms"),
            ("name = \"w\"\ntopic = \"t\"\nproperties = { \"no.such\" = 1 }", "no.such"),
            ("name = \"w\"\ntopic = \"t\"\nproperties = { \"group.id\" = \"g\" }", "group_id"),
            ("name = \"w\"\ntopic = 3", "topic"),
        ];
        for (text, expected) in cases {
            let e = group(text).unwrap_err().to_string();
            assert!(e.contains(expected), "{text:?}: {e}");
        }
        let e = group(&with_spouts("name = \"w\"\ngroup_id = \"s\"", &["in:0"]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("also the partitions' KafkaSpout group_id"), "{e}");
        let subscribed =
            "spouts = [[{ component = \"KafkaSpout\", config = 'topics = [\"in\"]' }]]";
        let e = group(&format!("name = \"w\"\ntopic = \"in\"\n{subscribed}")).unwrap_err();
        assert!(e.to_string().contains("subscribes to \"in\""), "{e}");
    }
}
