//! The group as `squall group status` shows it, read from the broker
//! without joining: the consumer group's state and members (each with the
//! partitions the broker assigned it), and per partition its owner, the
//! epoch its last owner committed, and the offset its spouts committed.

use std::collections::BTreeMap;
use std::time::Duration;

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::TopicPartitionList;

use squall_plugin_api::Result;

use super::member::parse_epoch;
use crate::client::Context0;

/// One spout of a partition's topology, as the host passes it.
pub use squall_plugin_api::PartitionSpout as SpoutDecl;

/// One member as the broker describes it.
#[derive(Debug, serde::Serialize)]
struct MemberRow {
    /// Its client id: the host's id (`None`: the broker names none, as
    /// Tansu does).
    host: Option<String>,
    /// Where it connects from.
    address: Option<String>,
    /// The partitions of the topic assigned to it.
    partitions: Vec<u32>,
}

/// One partition.
#[derive(Debug, serde::Serialize)]
struct PartitionRow {
    partition: u32,
    /// The member assigned it (`None`: none, or the broker lists no members).
    owner: Option<String>,
    /// The epoch its last owner committed (`None`: never assigned).
    epoch: Option<u64>,
    /// The offset its spouts' consumer group committed (`None`: none).
    committed: Option<i64>,
}

/// What the report needs.
#[derive(Debug)]
pub struct Query<'a> {
    /// The squall group.
    pub name: &'a str,
    /// The Kafka consumer group.
    pub group_id: &'a str,
    /// The input topic.
    pub topic: &'a str,
    /// The consumer group the partitions' spouts commit to, if one.
    pub spout_group: Option<&'a str>,
    /// How long each request may wait.
    pub timeout: Duration,
}

/// The partitions of `topic` in a consumer protocol assignment
/// (version, then `[topic, [partition]]`, then user data).
pub fn decode_assignment(bytes: &[u8], topic: &str) -> Vec<u32> {
    fn take<'b>(bytes: &mut &'b [u8], n: usize) -> Option<&'b [u8]> {
        let (head, rest) = (bytes.get(..n)?, bytes.get(n..)?);
        *bytes = rest;
        Some(head)
    }
    fn int(bytes: &mut &[u8]) -> Option<i32> {
        Some(i32::from_be_bytes(take(bytes, 4)?.try_into().ok()?))
    }
    let mut b = bytes;
    let mut out = Vec::new();
    let parsed = (|| -> Option<()> {
        take(&mut b, 2)?;
        for _ in 0..int(&mut b)?.max(0) {
            let len = i16::from_be_bytes(take(&mut b, 2)?.try_into().ok()?);
            let name = take(&mut b, usize::try_from(len).ok()?)?;
            for _ in 0..int(&mut b)?.max(0) {
                let p = int(&mut b)?;
                if name == topic.as_bytes() {
                    out.extend(u32::try_from(p).ok());
                }
            }
        }
        Some(())
    })();
    if parsed.is_none() {
        out.clear();
    }
    out.sort_unstable();
    out
}

fn consumer(config: &rdkafka::ClientConfig, group_id: &str) -> Result<BaseConsumer<Context0>> {
    let mut config = config.clone();
    config.set("group.id", group_id);
    config
        .create_with_context(Context0::quiet())
        .map_err(|e| format!("cannot create a consumer: {e}").into())
}

/// The committed offsets of `group_id` on `partitions` of `topic`, with
/// their metadata.
fn committed(
    consumer: &BaseConsumer<Context0>,
    topic: &str,
    partitions: u32,
    timeout: Duration,
) -> Result<BTreeMap<u32, (Option<i64>, String)>> {
    let mut tpl = TopicPartitionList::new();
    for k in 0..partitions {
        tpl.add_partition(topic, i32::try_from(k).unwrap_or(i32::MAX));
    }
    let committed = consumer
        .committed_offsets(tpl, timeout)
        .map_err(|e| format!("cannot read committed offsets: {e}"))?;
    Ok(committed
        .elements()
        .iter()
        .filter_map(|e| {
            let k = u32::try_from(e.partition()).ok()?;
            let offset = e.offset().to_raw().filter(|o| *o >= 0);
            Some((k, (offset, e.metadata().to_owned())))
        })
        .collect())
}

/// Reads the group from the broker (module doc).
///
/// # Errors
/// The broker cannot be reached, or the topic does not exist.
pub fn read(config: &rdkafka::ClientConfig, q: &Query<'_>) -> Result<serde_json::Value> {
    let c = consumer(config, q.group_id)?;
    let metadata = c
        .fetch_metadata(Some(q.topic), q.timeout)
        .map_err(|e| format!("cannot read the topic {:?}: {e}", q.topic))?;
    let partitions = crate::client::partitions(&metadata, &[q.topic.to_owned()])
        .first()
        .and_then(|(_, n)| *n)
        .ok_or_else(|| format!("topic {:?} does not exist", q.topic))?;
    let partitions = u32::try_from(partitions).unwrap_or(u32::MAX);
    let list = c
        .fetch_group_list(Some(q.group_id), q.timeout)
        .map_err(|e| format!("cannot describe consumer group {:?}: {e}", q.group_id))?;
    let (mut state, mut protocol, mut members) = (String::from("Dead"), String::new(), Vec::new());
    for g in list.groups().iter().filter(|g| g.name() == q.group_id) {
        state = g.state().to_owned();
        protocol = g.protocol().to_owned();
        let named = |s: &str| (!s.is_empty()).then(|| s.to_owned());
        members.extend(g.members().iter().map(|m| MemberRow {
            host: named(m.client_id()),
            address: named(m.client_host()),
            partitions: m.assignment().map(|a| decode_assignment(a, q.topic)).unwrap_or_default(),
        }));
    }
    members.sort_by(|a, b| a.host.cmp(&b.host));
    let epochs = committed(&c, q.topic, partitions, q.timeout)?;
    let spouts = match q.spout_group {
        Some(g) => committed(&consumer(config, g)?, q.topic, partitions, q.timeout)?,
        None => BTreeMap::new(),
    };
    let rows: Vec<PartitionRow> = (0..partitions)
        .map(|k| PartitionRow {
            partition: k,
            owner: members.iter().find(|m| m.partitions.contains(&k)).and_then(|m| m.host.clone()),
            epoch: epochs.get(&k).and_then(|(_, meta)| parse_epoch(meta)),
            committed: spouts.get(&k).and_then(|(o, _)| *o),
        })
        .collect();
    Ok(serde_json::json!({
        "group": q.name,
        "group_id": q.group_id,
        "topic": q.topic,
        "state": state,
        "protocol": protocol,
        "members": members,
        "partitions": rows,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_assignment_is_decoded_for_one_topic() {
        let mut b = vec![0, 1, 0, 0, 0, 2];
        for (topic, parts) in [("other", &[0i32][..]), ("words", &[3, 1][..])] {
            b.extend((topic.len() as i16).to_be_bytes());
            b.extend(topic.as_bytes());
            b.extend((parts.len() as i32).to_be_bytes());
            for p in parts {
                b.extend(p.to_be_bytes());
            }
        }
        b.extend(0i32.to_be_bytes());
        assert_eq!(decode_assignment(&b, "words"), [1, 3]);
        assert_eq!(decode_assignment(&b, "none"), Vec::<u32>::new());
        assert_eq!(decode_assignment(&b[..9], "words"), Vec::<u32>::new(), "truncated");
        assert_eq!(decode_assignment(&[], "words"), Vec::<u32>::new());
    }
}
