//! Events through a broker: [`Encode`] turns the generator's tuples into
//! one record value each ([`crate::codec`]), [`Decode`] turns the values
//! back into the generator's tuples, on the generator's three streams, so
//! the query bolts read events from Kafka unchanged:
//!
//! ```text
//! load:   Generator → Encode → kafka::KafkaPublish          (topologies/nexmark/load-kafka.toml)
//! query:  kafka::KafkaSpout → Decode → qN → Sink            (topologies/nexmark/kafka/qN.toml)
//! ```

use squall_plugin_api::prelude::*;

use crate::codec::{self, kind_of_len};
use crate::model::Kind;
use crate::{check_kinds, Empty};

squall_plugin_api::declare_config! {
    /// The config of [`Encode`].
    #[derive(Debug, Clone, PartialEq)]
    pub(crate) struct EncodeConfig {
        partitions: u64 = default(Integer, "1", "partition = the task's tuple count modulo this"),
    }
}

/// Encodes each generator tuple (person, auction or bid) as one value
/// ([`crate::codec`]). Output: `(partition, value)`: `value` the encoded
/// event, a string (every encoded event is UTF-8); `partition` the
/// task's tuple count modulo `partitions`, so a task deals its events to
/// the partitions in turn and every partition's event time advances at
/// the same pace (`KafkaPublish`'s `partition_field`).
#[derive(Debug)]
pub struct Encode {
    partitions: u64,
    count: u64,
    bytes: Vec<u8>,
}

impl BasicBolt for Encode {
    const NAME: &'static str = "Encode";
    const DESCRIPTION: &'static str =
        "encodes each generator event as one compact value, with a round-robin partition";
    const CONFIG_KEYS: Option<&'static [ConfigKey]> = Some(EncodeConfig::KEYS);
    const EMITS: &'static [&'static str] = &["default"];

    fn declare_outputs(outputs: &mut OutputDeclarer) {
        outputs.declare(&["partition", "value"]);
    }

    fn check_inputs(_config: &ComponentConfig<'_>, inputs: &[InputDecl]) -> Result<()> {
        check_kinds(inputs, &[Kind::Person, Kind::Auction, Kind::Bid], &[])
    }

    fn new(config: &ComponentConfig<'_>) -> Result<Self> {
        let config = EncodeConfig::parse(config)?;
        if config.partitions == 0 || config.partitions > i32::MAX as u64 {
            return Err("partitions must be between 1 and 2^31 - 1".into());
        }
        Ok(Self { partitions: config.partitions, count: 0, bytes: Vec::with_capacity(64) })
    }

    fn execute(&mut self, input: &Tuple<'_>, collector: &mut BasicCollector<'_>) -> Result<()> {
        let values = input.values();
        let kind = kind_of_len(values.len()).ok_or("not a person, auction or bid tuple")?;
        self.bytes.clear();
        codec::encode_values(kind, values, &mut self.bytes)?;
        let text = std::str::from_utf8(&self.bytes).map_err(|e| e.to_string())?;
        let partition = self.count % self.partitions;
        self.count += 1;
        collector.emit(&[Value::U64(partition), Value::str(text)]);
        Ok(())
    }
}

/// Decodes each value ([`crate::codec`]) into the generator's tuple, on
/// the generator's stream of its kind (`person`, `auction`, `bid`, with
/// the generator's fields): a query subscribes to `Decode` as it would
/// to the generator. Its inputs have one field, the encoded event, a
/// string or bytes (`KafkaSpout`'s default `fields = ["value"]`). A value
/// that is not an encoded event is an error of the tuple: logged, the
/// tuple failed.
#[derive(Debug)]
pub struct Decode {
    streams: [StreamId; 3],
    values: Vec<Value>,
}

impl BasicBolt for Decode {
    const NAME: &'static str = "Decode";
    const DESCRIPTION: &'static str =
        "decodes Encode's values into the generator's person, auction and bid tuples";
    const CONFIG_KEYS: Option<&'static [ConfigKey]> = Some(&[]);
    const EMITS: &'static [&'static str] = &["person", "auction", "bid"];

    fn declare_outputs(outputs: &mut OutputDeclarer) {
        for kind in [Kind::Person, Kind::Auction, Kind::Bid] {
            outputs.declare_stream(kind.stream(), kind.fields());
        }
    }

    fn check_inputs(_config: &ComponentConfig<'_>, inputs: &[InputDecl]) -> Result<()> {
        match inputs.iter().find(|i| i.fields.len() != 1) {
            Some(i) => Err(format!(
                "input from \"{}\" stream \"{}\" has {} fields; Decode reads one, the encoded \
                 event (KafkaSpout's fields = [\"value\"])",
                i.component,
                i.stream,
                i.fields.len()
            )
            .into()),
            None => Ok(()),
        }
    }

    fn new(config: &ComponentConfig<'_>) -> Result<Self> {
        config.parse::<Empty>()?;
        Ok(Self { streams: [StreamId::DEFAULT; 3], values: Vec::with_capacity(9) })
    }

    fn prepare(&mut self, context: &TaskContext) -> Result<()> {
        for (slot, kind) in self.streams.iter_mut().zip([Kind::Person, Kind::Auction, Kind::Bid]) {
            *slot = context.stream_id(kind.stream()).ok_or("Decode's streams are declared")?;
        }
        Ok(())
    }

    #[inline]
    fn execute(&mut self, input: &Tuple<'_>, collector: &mut BasicCollector<'_>) -> Result<()> {
        let value = input.get(0).ok_or("an empty tuple")?;
        let bytes = match value.as_str() {
            Some(s) => s.as_bytes(),
            None => value.as_bytes().ok_or("the encoded event is neither a string nor bytes")?,
        };
        self.values.clear();
        let kind = codec::decode(bytes, &mut self.values)?;
        collector.emit_to(self.streams[kind as usize], &self.values);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Generator, GeneratorConfig};
    use squall_plugin_api::testing::Recorder;

    #[test]
    fn encode_then_decode_gives_the_generators_tuples_on_their_streams() {
        let generator = Generator::new(GeneratorConfig::default()).unwrap();
        let events: Vec<_> = (0..500).map(|id| generator.event(id)).collect();
        let mut encode = Encode::new(&ComponentConfig::new("partitions = 3")).unwrap();
        let mut encoded = Recorder::default();
        {
            let mut collector = BasicCollector::new(encoded.output());
            for event in &events {
                let values = event.values();
                let tuple = Tuple::new(&values, &[], "events", event.kind().stream(), 0, Anchor(1));
                encode.execute(&tuple, &mut collector).unwrap();
            }
        }
        let partitions: Vec<_> = encoded.emitted.iter().map(|e| e.values[0].clone()).collect();
        assert_eq!(partitions[..4], [Value::U64(0), Value::U64(1), Value::U64(2), Value::U64(0)]);

        let mut outputs = OutputDeclarer::default();
        Decode::declare_outputs(&mut outputs);
        let mut decode = Decode::new(&ComponentConfig::new("")).unwrap();
        decode.prepare(&TaskContext::builder("decode").outputs(outputs).build()).unwrap();
        let mut decoded = Recorder::default();
        {
            let mut collector = BasicCollector::new(decoded.output());
            for e in &encoded.emitted {
                let value = [e.values[1].clone()];
                let tuple = Tuple::new(&value, &[], "kafka", "default", 0, Anchor(1));
                decode.execute(&tuple, &mut collector).unwrap();
            }
            // Bytes decode as strings do; anything else is an error.
            let bytes = [Value::Bytes(e_bytes(&encoded.emitted[7].values[1]).into())];
            decode
                .execute(&Tuple::new(&bytes, &[], "k", "default", 0, Anchor(1)), &mut collector)
                .unwrap();
            let bad = [Value::from("Bxx")];
            assert!(decode
                .execute(&Tuple::new(&bad, &[], "k", "default", 0, Anchor(1)), &mut collector)
                .is_err());
        }
        let got: Vec<(u32, Vec<Value>)> =
            decoded.emitted.iter().map(|e| (e.stream, e.values.clone())).collect();
        let mut expected: Vec<(u32, Vec<Value>)> =
            events.iter().map(|e| (e.kind() as u32, e.values())).collect();
        expected.push((events[7].kind() as u32, events[7].values()));
        assert_eq!(got, expected);
    }

    fn e_bytes(value: &Value) -> Vec<u8> {
        value.as_str().unwrap().as_bytes().to_vec()
    }

    #[test]
    fn bad_config_is_refused_and_partitions_defaults_to_one() {
        let config = EncodeConfig::parse(&ComponentConfig::new("")).unwrap();
        assert_eq!(config.partitions, 1);
        assert!(Encode::new(&ComponentConfig::new("partitions = 0")).is_err());
        assert!(Decode::new(&ComponentConfig::new("field = 1")).is_err());
    }
}
