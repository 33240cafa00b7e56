//! `KafkaGroup` against the local broker (127.0.0.1:9092, the project's
//! test broker Tansu; skipped when nothing answers there): two members of
//! one group, driven as the host drives a coordinator. When the second
//! joins, the broker revokes partitions from the first; those partitions
//! are assigned to the second only after the first released them (it holds
//! them for longer than the broker's rebalance round takes), and under a
//! higher epoch.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::net::TcpStream;
use std::sync::Arc;
use std::task::{Context, Poll, Wake};
use std::time::{Duration, Instant};

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::ClientConfig;
use squall_kafka::KafkaGroup;
use squall_plugin_api::abi::{PartitionChange, PartitionEvent};
use squall_plugin_api::{ComponentConfig, Coordinator};

const BROKERS: &str = "127.0.0.1:9092";

fn block_on<F: Future>(future: F) -> F::Output {
    struct Unpark(std::thread::Thread);
    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Arc::new(Unpark(std::thread::current())).into();
    let mut cx = Context::from_waker(&waker);
    let mut future = std::pin::pin!(future);
    loop {
        if let Poll::Ready(out) = future.as_mut().poll(&mut cx) {
            return out;
        }
        std::thread::park_timeout(Duration::from_millis(10));
    }
}

fn unique(prefix: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("{prefix}_{nanos:x}_{}", std::process::id())
}

fn create_topic(topic: &str, partitions: i32) {
    let admin: AdminClient<DefaultClientContext> =
        ClientConfig::new().set("bootstrap.servers", BROKERS).create().expect("admin client");
    let new = NewTopic::new(topic, partitions, TopicReplication::Fixed(1));
    let results = block_on(admin.create_topics([&new], &AdminOptions::new())).expect("create");
    for r in results {
        r.unwrap_or_else(|(t, e)| panic!("cannot create topic {t}: {e}"));
    }
}

fn member(group: &str, topic: &str) -> KafkaGroup {
    let text = format!(
        "name = \"{group}\"\ntopic = \"{topic}\"\nbrokers = \"{BROKERS}\"\nproperties = {{ \
         \"session.timeout.ms\" = 6000, \"heartbeat.interval.ms\" = 500, \
         \"max.poll.interval.ms\" = 10000 }}"
    );
    KafkaGroup::new(&ComponentConfig::new(&text)).expect("a valid config")
}

/// What one member holds, as its events say.
#[derive(Debug, Default)]
struct Held {
    epochs: BTreeMap<u32, u64>,
    revoked: BTreeMap<u32, u64>,
}

impl Held {
    fn apply(&mut self, events: Vec<PartitionEvent>) {
        for e in events {
            match e.change {
                PartitionChange::ASSIGNED => {
                    self.epochs.insert(e.partition, e.epoch);
                }
                PartitionChange::REVOKED => {
                    self.epochs.remove(&e.partition);
                    self.revoked.insert(e.partition, e.epoch);
                }
                PartitionChange::LOST => panic!("partition {} lost: {e:?}", e.partition),
                _ => {}
            }
        }
    }
}

fn poll(m: &mut KafkaGroup, held: &mut Held) {
    held.apply(m.poll(Duration::from_millis(50)).expect("poll"));
}

#[test]
fn a_revoked_partition_is_assigned_to_another_member_only_after_its_release() {
    if TcpStream::connect_timeout(&BROKERS.parse().unwrap(), Duration::from_secs(1)).is_err() {
        eprintln!("no Kafka broker on {BROKERS}: skipped");
        return;
    }
    let topic = unique("kgroup_protocol");
    create_topic(&topic, 4);
    let group = unique("kgp");
    let (mut a, mut b) = (member(&group, &topic), member(&group, &topic));
    let (mut held_a, mut held_b) = (Held::default(), Held::default());
    assert_eq!(a.join("a", 4).expect("a joins"), 4);
    let deadline = Instant::now() + Duration::from_secs(30);
    while held_a.epochs.len() < 4 {
        assert!(Instant::now() < deadline, "a got {held_a:?}");
        poll(&mut a, &mut held_a);
    }
    assert_eq!(b.join("b", 4).expect("b joins"), 4);
    let deadline = Instant::now() + Duration::from_secs(30);
    while held_a.revoked.is_empty() {
        assert!(Instant::now() < deadline, "nothing revoked from a: {held_a:?}");
        poll(&mut a, &mut held_a);
        poll(&mut b, &mut held_b);
    }
    let revoked = held_a.revoked.clone();
    // a keeps the revoked partitions unreleased for longer than a round of
    // the broker's rebalance takes (about 8 s on Tansu, module doc of the
    // e2e test): b must not be assigned any of them meanwhile.
    let hold = Instant::now() + Duration::from_secs(15);
    while Instant::now() < hold {
        poll(&mut a, &mut held_a);
        poll(&mut b, &mut held_b);
        let early: BTreeSet<&u32> =
            held_b.epochs.keys().filter(|k| revoked.contains_key(k)).collect();
        assert!(early.is_empty(), "b was assigned {early:?} before a released them: {held_b:?}");
    }
    let released_at = Instant::now();
    for (&k, &epoch) in &revoked {
        a.released(k, epoch).expect("released");
    }
    let deadline = Instant::now() + Duration::from_secs(40);
    while !revoked.keys().all(|k| held_b.epochs.contains_key(k)) {
        assert!(Instant::now() < deadline, "b never got {revoked:?}: {held_b:?}");
        poll(&mut a, &mut held_a);
        poll(&mut b, &mut held_b);
    }
    eprintln!(
        "a gave up {revoked:?}; b got them {:?} after their release: {:?}",
        released_at.elapsed(),
        held_b.epochs
    );
    for (k, old) in &revoked {
        assert!(held_b.epochs[k] > *old, "partition {k}: epoch {} after {old}", held_b.epochs[k]);
    }
    let all: BTreeSet<&u32> = held_a.epochs.keys().chain(held_b.epochs.keys()).collect();
    assert_eq!(all.len(), 4, "a {held_a:?}, b {held_b:?}");
    a.leave();
    b.leave();
}
