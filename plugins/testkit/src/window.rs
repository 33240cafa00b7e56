//! [`WindowSizeBolt`]: a windowed bolt that reports each window's shape.

use squall_plugin_api::prelude::*;
use squall_plugin_api::DEFAULT_STREAM;

/// Emits one tuple per window on the default stream
/// `["tuples", "new", "expired", "first"]`: how many tuples the window holds,
/// how many entered and left since the previous window, and the first
/// value of its oldest tuple's `Display` (empty for an empty window). The
/// window is set in the topology. Config: `stream` (default `"default"`),
/// the stream it declares its outputs on; it emits on `default` whatever
/// the config says, and declares so (`EMITS`), so that validate refuses any
/// other `stream` (a test of the contract 1.2 `EMITS` check).
#[derive(Debug, Default)]
pub struct WindowSizeBolt;

const SIZE_FIELDS: [&str; 4] = ["tuples", "new", "expired", "first"];

impl WindowedBolt for WindowSizeBolt {
    const NAME: &'static str = "WindowSizeBolt";
    const DESCRIPTION: &'static str = "emits (tuples, new, expired, first) per window";
    const CONFIG_KEYS: Option<&'static [ConfigKey]> = Some(&[ConfigKey::optional(
        "stream",
        KeyKind::String,
        "\"default\"",
        "the stream its outputs are declared on (it emits on default)",
    )]);
    const EMITS: &'static [&'static str] = &[DEFAULT_STREAM];

    fn declare_outputs_for(
        config: &ComponentConfig<'_>,
        outputs: &mut OutputDeclarer,
    ) -> Result<()> {
        #[derive(serde::Deserialize)]
        struct Outputs {
            stream: Option<String>,
        }
        let stream = config.parse::<Outputs>()?.stream;
        outputs.declare_stream(stream.as_deref().unwrap_or(DEFAULT_STREAM), &SIZE_FIELDS);
        Ok(())
    }

    fn new(_config: &ComponentConfig<'_>) -> Result<Self> {
        Ok(Self)
    }

    fn execute(&mut self, window: &Window<'_>, collector: &mut BasicCollector<'_>) -> Result<()> {
        let first = window
            .tuples()
            .first()
            .and_then(|t| t.get(0))
            .map(|v| match v {
                Value::U64(n) => n.to_string(),
                Value::I64(n) => n.to_string(),
                other => format!("{other:?}"),
            })
            .unwrap_or_default();
        collector.emit(&[
            Value::U64(window.tuples().len() as u64),
            Value::U64(window.new_tuples().len() as u64),
            Value::U64(window.expired().len() as u64),
            Value::from(first.as_str()),
        ]);
        Ok(())
    }
}

/// Emits one string per window on `["word"]`: `<first>..<last>#<n>`, the
/// first value of the window's oldest and newest tuple and how many tuples it
/// holds. A downstream count of these strings tells a lost, duplicated or
/// shifted window apart from a right one. Takes no config.
#[derive(Debug, Default)]
pub struct WindowDigest;

impl WindowedBolt for WindowDigest {
    const NAME: &'static str = "WindowDigest";
    const DESCRIPTION: &'static str = "emits <first>..<last>#<n> per window";
    const CONFIG_KEYS: Option<&'static [ConfigKey]> = Some(&[]);

    fn declare_outputs(outputs: &mut OutputDeclarer) {
        outputs.declare(&["word"]);
    }

    fn new(_config: &ComponentConfig<'_>) -> Result<Self> {
        Ok(Self)
    }

    fn execute(&mut self, window: &Window<'_>, collector: &mut BasicCollector<'_>) -> Result<()> {
        let text = |t: Option<&Tuple<'_>>| {
            t.and_then(|t| t.get(0)).and_then(Value::as_str).unwrap_or_default().to_owned()
        };
        let tuples = window.tuples();
        let digest = format!("{}..{}#{}", text(tuples.first()), text(tuples.last()), tuples.len());
        collector.emit(&[Value::from(digest.as_str())]);
        Ok(())
    }
}

/// [`ListSpout`]'s config.
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct ListConfig {
    values: Vec<u64>,
    out: String,
}

/// Emits each of its `values` once, in order, as `U64` on `["value"]`, with
/// message id = its index, and writes `acked <i>` / `failed <i>` lines (in
/// the order they came) to `out` at close. For event-time windows: the
/// values are the timestamps.
#[derive(Debug)]
pub struct ListSpout {
    values: Vec<u64>,
    next: usize,
    out: String,
    log: String,
}

impl Spout for ListSpout {
    const NAME: &'static str = "ListSpout";
    const DESCRIPTION: &'static str = "emits a list of integers once each, reliably";
    const CONFIG_KEYS: Option<&'static [ConfigKey]> = Some(&[
        ConfigKey::required("values", KeyKind::Array, "the integers to emit, in order"),
        ConfigKey::required("out", KeyKind::String, "where acked/failed lines go at close"),
    ]);

    fn declare_outputs(outputs: &mut OutputDeclarer) {
        outputs.declare(&["value"]);
    }

    fn new(config: &ComponentConfig<'_>) -> Result<Self> {
        let config: ListConfig = config.parse()?;
        Ok(Self { values: config.values, next: 0, out: config.out, log: String::new() })
    }

    fn next_tuple(&mut self, collector: &mut SpoutCollector<'_>) -> Result<()> {
        if let Some(&v) = self.values.get(self.next) {
            collector.emit_with_id(&[Value::U64(v)], self.next as u64);
            self.next += 1;
        }
        Ok(())
    }

    fn ack(&mut self, message_id: MessageId) {
        self.log.push_str(&format!("acked {}\n", message_id.0));
    }

    fn fail(&mut self, message_id: MessageId) {
        self.log.push_str(&format!("failed {}\n", message_id.0));
    }

    fn close(&mut self) {
        let _ = std::fs::write(&self.out, &self.log);
    }
}
