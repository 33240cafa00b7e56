//! The group as `squall group status` shows it: every member's heartbeat,
//! every partition's lease and its JetStream consumers' lag, read from the
//! broker without joining.

use std::time::{Duration, SystemTime};

use super::assign::LeaseValue;
use super::lease::{connect, member_key, partition_key, LeaseError, Leases};
use super::LeaseConfig;

/// One spout of a partition's topology, as the host passes it.
pub use squall_plugin_api::PartitionSpout as SpoutDecl;

/// One partition as read from the broker.
#[derive(Debug, serde::Serialize)]
struct PartitionRow {
    partition: u32,
    /// The lease's owner (`None`: released, or never taken).
    owner: Option<String>,
    epoch: u64,
    /// How long ago the lease was last written (a renewal, a take, a release).
    age_ms: u64,
    /// `held`, `expired` (its owner stopped renewing), `released` or `free`.
    state: &'static str,
    /// Messages of the partition's JetStream consumers not yet delivered
    /// (`None`: no JetStream spout, or it could not be read).
    pending: Option<u64>,
    /// Delivered and not yet acknowledged (with durable state, acks wait
    /// for the checkpoint that covers them).
    unacked: Option<u64>,
}

/// One member's heartbeat.
#[derive(Debug, serde::Serialize)]
struct MemberRow {
    host: String,
    /// `alive`, `silent` (no heartbeat within the lease time), `leaving` or `left`.
    state: &'static str,
    age_ms: u64,
    partitions: Vec<u32>,
}

/// What `status` answers before `join`.
#[derive(Debug, serde::Serialize)]
pub(super) struct GroupReport {
    group: String,
    bucket: String,
    lease_ms: u64,
    members: Vec<MemberRow>,
    partitions: Vec<PartitionRow>,
}

/// A JetStream spout's server, stream and consumer.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Consumer {
    url: String,
    stream: String,
    consumer: String,
}

/// The consumers `spouts` read: each `JetStreamSpout` with a named consumer.
fn consumers(spouts: &[SpoutDecl]) -> Vec<Consumer> {
    spouts
        .iter()
        .filter(|s| s.component == "JetStreamSpout")
        .filter_map(|s| {
            let table: toml::Table = s.config.parse().ok()?;
            let text = |key: &str| table.get(key).and_then(toml::Value::as_str).map(str::to_owned);
            Some(Consumer {
                url: text("url").unwrap_or_else(|| "nats://127.0.0.1:4222".to_owned()),
                stream: text("stream")?,
                consumer: text("consumer")?,
            })
        })
        .collect()
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Reads the group from `bucket`, which must exist.
///
/// # Errors
/// The broker cannot be reached, or no host of the group has run yet.
pub(super) async fn read(
    config: &LeaseConfig,
    bucket: &str,
    lease: Duration,
    timeout: Duration,
) -> Result<GroupReport, LeaseError> {
    let group = &config.name;
    let broker = |e: LeaseError| LeaseError::Broker(format!("group {group}: {e}"));
    let leases = Leases::attach(&config.url, bucket, timeout).await.map_err(broker)?;
    let mut members = read_members(&leases, lease).await.map_err(broker)?;
    let mut clients = Vec::new();
    let mut partitions = Vec::new();
    let count = u32::try_from(config.spouts.len()).unwrap_or(u32::MAX);
    for k in partition_keys(&leases, count).await.map_err(broker)? {
        let mut row = read_partition(&leases, k, lease).await.map_err(broker)?;
        if let (Some(o), "held" | "expired") = (&row.owner, row.state) {
            if let Some(m) = members.iter_mut().find(|m| &m.host == o) {
                m.partitions.push(k);
            }
        }
        let spouts = config.spouts.get(k as usize).map_or(&[][..], Vec::as_slice);
        (row.pending, row.unacked) = consumer_lag(&mut clients, spouts, timeout).await;
        partitions.push(row);
    }
    Ok(GroupReport {
        group: group.clone(),
        bucket: bucket.to_owned(),
        lease_ms: millis(lease),
        members,
        partitions,
    })
}

/// How long ago `at` was.
fn age_of(at: SystemTime) -> Duration {
    SystemTime::now().duration_since(at).unwrap_or_default()
}

/// Every member's heartbeat, by host name (`partitions` still empty).
async fn read_members(leases: &Leases, lease: Duration) -> Result<Vec<MemberRow>, LeaseError> {
    let mut members = Vec::new();
    for key in leases.keys("h.").await? {
        let Some((_, value, at)) = leases.entry(&key).await? else { continue };
        let age = age_of(at);
        let state = match value.as_ref() {
            b"alive" if age <= lease => "alive",
            b"alive" => "silent",
            b"leaving" => "leaving",
            _ => "left",
        };
        let host = key["h.".len()..].to_owned();
        debug_assert_eq!(member_key(&host), key);
        members.push(MemberRow { host, state, age_ms: millis(age), partitions: Vec::new() });
    }
    members.sort_by(|a, b| a.host.cmp(&b.host));
    Ok(members)
}

/// The partitions to show: the host's `count` (0: not known, then every
/// partition key the bucket holds).
async fn partition_keys(leases: &Leases, count: u32) -> Result<Vec<u32>, LeaseError> {
    if count > 0 {
        return Ok((0..count).collect());
    }
    let mut ks: Vec<u32> = leases
        .keys("p.")
        .await?
        .iter()
        .filter_map(|k| k.strip_prefix("p.")?.parse().ok())
        .collect();
    ks.sort_unstable();
    Ok(ks)
}

/// Partition `k`'s lease (its consumers' lag not read yet).
async fn read_partition(
    leases: &Leases,
    k: u32,
    lease: Duration,
) -> Result<PartitionRow, LeaseError> {
    let entry = leases.entry(&partition_key(k)).await?;
    let (owner, epoch, age) = match entry {
        Some((_, bytes, at)) => match serde_json::from_slice::<LeaseValue>(&bytes) {
            Ok(v) => (v.owner, v.epoch, Some(age_of(at))),
            Err(_) => (None, 0, Some(age_of(at))),
        },
        None => (None, 0, None),
    };
    let state = match (&owner, age) {
        (Some(_), Some(a)) if a <= lease => "held",
        (Some(_), _) => "expired",
        (None, Some(_)) => "released",
        (None, None) => "free",
    };
    Ok(PartitionRow {
        partition: k,
        owner,
        epoch,
        age_ms: age.map_or(0, millis),
        state,
        pending: None,
        unacked: None,
    })
}

/// The (pending, unacked) messages summed over the JetStream consumers
/// `spouts` read; `None` when none could be read. `clients` keeps one
/// JetStream context per server URL across calls.
async fn consumer_lag(
    clients: &mut Vec<(String, async_nats::jetstream::Context)>,
    spouts: &[SpoutDecl],
    timeout: Duration,
) -> (Option<u64>, Option<u64>) {
    let (mut pending, mut unacked) = (None, None);
    for c in consumers(spouts) {
        let js = match clients.iter().find(|(url, _)| url == &c.url) {
            Some((_, js)) => js.clone(),
            None => {
                let Ok(client) = connect(&c.url, timeout, "squall group status").await else {
                    continue;
                };
                let js = async_nats::jetstream::new(client);
                clients.push((c.url.clone(), js.clone()));
                js
            }
        };
        let Ok(stream) = js.get_stream(&c.stream).await else { continue };
        let Ok(info) = stream.consumer_info(&c.consumer).await else { continue };
        *pending.get_or_insert(0) += info.num_pending;
        *unacked.get_or_insert(0) += info.num_ack_pending as u64;
    }
    (pending, unacked)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lag_is_read_from_each_jetstream_spout_with_a_named_consumer() {
        let spouts = [
            SpoutDecl {
                component: "JetStreamSpout".into(),
                config: "stream = \"S\"\nconsumer = \"c-1\"".into(),
            },
            SpoutDecl { component: "JetStreamSpout".into(), config: "stream = \"S\"".into() },
            SpoutDecl {
                component: "Other".into(),
                config: "stream = \"S\"\nconsumer = \"c\"".into(),
            },
        ];
        let found = consumers(&spouts);
        assert_eq!(
            found,
            [Consumer {
                url: "nats://127.0.0.1:4222".into(),
                stream: "S".into(),
                consumer: "c-1".into()
            }]
        );
    }
}
