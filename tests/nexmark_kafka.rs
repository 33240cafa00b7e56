//! Nexmark from Kafka, on the local broker (Tansu, 127.0.0.1:9092): the
//! shipped `topologies/nexmark/load-kafka.toml` pre-loads a topic with the
//! generator's first 1,000 events (`nexmark::Encode` → `KafkaPublish`),
//! then the shipped `topologies/nexmark/kafka/q0.toml` (`KafkaSpout` →
//! `nexmark::Decode` → q0) reads them, with q0's output also produced to a
//! second topic: it must hold exactly the generator's bids, in id order,
//! every field equal (`Generator::event` is the reference).

use std::time::Duration;

use squall_nexmark::model::{Event, Generator, GeneratorConfig, BID_FIELDS};
use squall_plugin_api::Value;

use crate::kafka::Kafka;
use crate::util::*;

const EVENTS: u64 = 1000;

/// A shipped topology's text, run with the plugins of this build.
fn shipped(rel: &str) -> String {
    std::fs::read_to_string(workspace_root().join(rel)).expect("the shipped topology")
}

/// The component named `name` in a `--json` summary.
fn component<'a>(summary: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    summary["components"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["name"] == name))
        .unwrap_or_else(|| panic!("no component {name} in {summary}"))
}

/// Runs `topology` (a path in `ws`) for `duration` with the topic and
/// plugin directory set; returns its `--json` summary.
fn run(ws: &Workspace, topology: &str, duration: &str, topic: &str) -> serde_json::Value {
    let mut cmd = SquallCommand::run(ws, &ws.path(topology), duration);
    cmd.env("SQUALL_PLUGIN_DIR", release_dir()).env("NEXMARK_TOPIC", topic);
    let out = cmd.output();
    out.assert_code(0);
    serde_json::from_str(&ws.read("summary.json")).expect("a JSON summary")
}

/// The bid `event` as KafkaPublish writes a tuple by default: one JSON
/// object, field name to value.
fn bid_json(event: &Event) -> serde_json::Value {
    let object = BID_FIELDS
        .iter()
        .zip(event.values())
        .map(|(name, v)| {
            let v = match (&v, v.as_str()) {
                (Value::U64(n), _) => serde_json::json!(n),
                (_, Some(s)) => serde_json::json!(s),
                _ => panic!("a bid holds integers and strings: {v:?}"),
            };
            (name.to_string(), v)
        })
        .collect();
    serde_json::Value::Object(object)
}

#[test]
fn q0_from_kafka_gives_exactly_the_generators_bids() {
    if !require_service(KAFKA) {
        return;
    }
    let kafka = Kafka::local();
    let (input, output) = (unique_name("nexmark_events"), unique_name("nexmark_q0"));
    kafka.create_topic(&output, 1);
    let ws = Workspace::new("nexmark_kafka");

    let load = shipped("topologies/nexmark/load-kafka.toml");
    let load = load.replace("events = 2000000,", &format!("events = {EVENTS},"));
    assert!(load.contains(&format!("events = {EVENTS},")), "the loader's event count was set");
    ws.write("load.toml", load);
    let summary = run(&ws, "load.toml", "3s", &input);
    let acked = component(&summary, "events")["acked"].as_u64();
    assert_eq!(acked, Some(EVENTS), "every event was delivered to {input}");

    // q0 as shipped, and its output also to `output`, every field as JSON.
    let mut q0 = shipped("topologies/nexmark/kafka/q0.toml");
    q0.push_str(&format!(
        "\n[bolts.out]\ncomponent = \"kafka::KafkaPublish\"\ntick_tuple_freq_secs = 1\n\
         inputs = [{{ from = \"q0\", grouping = \"local_or_shuffle\" }}]\n\
         config = {{ topic = \"{output}\" }}\n"
    ));
    ws.write("q0.toml", q0);
    let summary = run(&ws, "q0.toml", "4s", &input);
    let counts = |name: &str| {
        let c = component(&summary, name);
        (c["emitted"].as_u64(), c["errors"].as_u64())
    };
    let generator = Generator::new(GeneratorConfig::default()).unwrap();
    let bids: Vec<Event> =
        (0..EVENTS).map(|id| generator.event(id)).filter(|e| matches!(e, Event::Bid(_))).collect();
    assert_eq!(counts("kafka"), (Some(EVENTS), Some(0)), "the spout read every record once");
    assert_eq!(counts("events"), (Some(EVENTS), Some(0)), "Decode decoded every record");
    assert_eq!(counts("q0"), (Some(bids.len() as u64), Some(0)), "q0 passed every bid");

    let read = kafka.read_all(&output, 1, bids.len(), Duration::from_secs(30));
    let got: Vec<serde_json::Value> =
        read.iter().map(|r| serde_json::from_str(&r.value).expect("a JSON object")).collect();
    let expected: Vec<serde_json::Value> = bids.iter().map(bid_json).collect();
    assert_eq!(got.len(), expected.len(), "one record per bid");
    assert_eq!(got, expected, "q0's output from Kafka is the generator's bids, in order");
}
