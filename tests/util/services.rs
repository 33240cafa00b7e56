//! The real servers some tests talk to (NATS with JetStream, Redis), found on
//! loopback. A test that needs one calls [`require_service`]: on a machine
//! that does not run it, the test says that it skipped; under
//! `SQUALL_REQUIRE_TOOLS=1` (CI), a missing server fails the test instead.

use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::REQUIRE_VAR;

/// A server a test may need: its name and its loopback address.
#[derive(Debug, Clone, Copy)]
pub struct Service {
    /// What the skip message calls it.
    pub name: &'static str,
    /// Where it listens.
    pub addr: &'static str,
}

/// NATS with JetStream, as the project's machines run it.
pub const NATS: Service = Service { name: "NATS (JetStream)", addr: "127.0.0.1:4222" };

/// Redis, as the project's machines run it.
pub const REDIS: Service = Service { name: "Redis", addr: "127.0.0.1:6379" };

/// RabbitMQ, as the project's machines run it (guest/guest, vhost /).
pub const RABBITMQ: Service = Service { name: "RabbitMQ", addr: "127.0.0.1:5672" };

/// PostgreSQL, as the project's machines run it (trust auth on loopback).
pub const POSTGRES: Service = Service { name: "PostgreSQL", addr: "127.0.0.1:5432" };

/// A Kafka broker (the project's test broker, Tansu: `bash
/// ../shared/kafka/start-kafka.sh start`).
pub const KAFKA: Service = Service { name: "Kafka", addr: "127.0.0.1:9092" };

/// True when `service` accepts a TCP connection within a second. When it
/// does not, prints that the calling test is skipped and returns false; under
/// `SQUALL_REQUIRE_TOOLS=1` panics instead, so CI never skips.
pub fn require_service(service: Service) -> bool {
    let addr: SocketAddr = service.addr.parse().expect("service addresses are literal");
    if TcpStream::connect_timeout(&addr, Duration::from_secs(1)).is_ok() {
        return true;
    }
    let required = std::env::var(REQUIRE_VAR).is_ok_and(|v| v == "1");
    assert!(
        !required,
        "{} does not answer on {}, and {REQUIRE_VAR}=1 requires it",
        service.name, service.addr
    );
    eprintln!(
        "SKIPPED: {} does not answer on {}; set {REQUIRE_VAR}=1 to make this a failure",
        service.name, service.addr
    );
    false
}

/// A name no other test (or earlier run) uses: `prefix` and a random suffix,
/// for streams, subjects, consumers and keys.
pub fn unique_name(prefix: &str) -> String {
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
    let seed = u64::from(nanos) ^ (u64::from(std::process::id()) << 32);
    // One SplitMix64 step spreads nearby seeds apart.
    let z = squall_plugin_api::rng::SplitMix64::new(seed).next_u64();
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("{prefix}_{:012x}_{n}", z & 0xFFFF_FFFF_FFFF)
}
