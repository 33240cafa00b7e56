//! A windowed bolt reads its window in `prepare` (contract 1.1,
//! `TaskContext::window`): the host hands every task the window its topology
//! entry configures, and nothing to other components.
//!
//! The plugin under test is defined here and handed to the harness in
//! process, as a plugin crate hands its own `__SquallPlugin`.

use std::time::Duration;

use squall_harness::Harness;
use squall_plugin_api::prelude::*;
use squall_plugin_api::MessageId;

/// Stands for a source of `["ts"]`; every test feeds it.
struct Stamps;

impl Spout for Stamps {
    const NAME: &'static str = "Stamps";
    const CONFIG_KEYS: Option<&'static [ConfigKey]> = Some(&[]);

    fn declare_outputs(outputs: &mut OutputDeclarer) {
        outputs.declare(&["ts"]);
    }

    fn new(_config: &ComponentConfig<'_>) -> Result<Self> {
        Ok(Stamps)
    }

    fn next_tuple(&mut self, _collector: &mut SpoutCollector<'_>) -> Result<()> {
        Ok(())
    }
}

/// What a task read from its context in `prepare`, as tuple values:
/// `kind` ("count", "time" or "none"), `length` and `slide` (tuples or
/// milliseconds), `timestamp_field` and `lag` (milliseconds).
fn describe(window: Option<WindowSpec>) -> Vec<Value> {
    let millis = |d: Duration| Value::U64(d.as_millis() as u64);
    let (kind, length, slide) = match window.as_ref().map(|w| w.size) {
        Some(WindowSize::Count { length, slide }) => {
            ("count", Value::U64(length), Value::U64(slide))
        }
        Some(WindowSize::Time { length, slide }) => ("time", millis(length), millis(slide)),
        None => ("none", Value::U64(0), Value::U64(0)),
    };
    let event_time = window.and_then(|w| w.event_time);
    let field = event_time.as_ref().map_or("", |e| e.timestamp_field.as_str());
    let lag = event_time.as_ref().map_or(Value::U64(0), |e| millis(e.lag));
    vec![Value::from(kind), length, slide, Value::from(field), lag]
}

const FIELDS: [&str; 5] = ["kind", "length", "slide", "timestamp_field", "lag"];

/// Emits, per window, what `prepare` read from the context, and the
/// window's size.
#[derive(Default)]
struct WindowEcho {
    seen: Vec<Value>,
}

impl WindowedBolt for WindowEcho {
    const NAME: &'static str = "WindowEcho";
    const CONFIG_KEYS: Option<&'static [ConfigKey]> = Some(&[]);

    fn declare_outputs(outputs: &mut OutputDeclarer) {
        let mut fields = FIELDS.to_vec();
        fields.push("tuples");
        outputs.declare(&fields);
    }

    fn new(_config: &ComponentConfig<'_>) -> Result<Self> {
        Ok(Self::default())
    }

    fn prepare(&mut self, context: &TaskContext) -> Result<()> {
        self.seen = describe(context.window());
        Ok(())
    }

    fn execute(&mut self, window: &Window<'_>, collector: &mut BasicCollector<'_>) -> Result<()> {
        let mut values = self.seen.clone();
        values.push(Value::U64(window.tuples().len() as u64));
        collector.emit(&values);
        Ok(())
    }
}

/// An ordinary bolt: emits what its context says of a window, per input.
#[derive(Default)]
struct PlainEcho {
    seen: Vec<Value>,
}

impl BasicBolt for PlainEcho {
    const NAME: &'static str = "PlainEcho";
    const CONFIG_KEYS: Option<&'static [ConfigKey]> = Some(&[]);

    fn declare_outputs(outputs: &mut OutputDeclarer) {
        outputs.declare(&FIELDS);
    }

    fn new(_config: &ComponentConfig<'_>) -> Result<Self> {
        Ok(Self::default())
    }

    fn prepare(&mut self, context: &TaskContext) -> Result<()> {
        self.seen = describe(context.window());
        Ok(())
    }

    fn execute(&mut self, _input: &Tuple<'_>, collector: &mut BasicCollector<'_>) -> Result<()> {
        collector.emit(&self.seen);
        Ok(())
    }
}

/// Emits, per input, the grouping of each of its subscriptions as its
/// context reports it: `["grouping", "custom"]`.
#[derive(Default)]
struct InputEcho {
    inputs: Vec<Vec<Value>>,
}

impl BasicBolt for InputEcho {
    const NAME: &'static str = "InputEcho";
    const CONFIG_KEYS: Option<&'static [ConfigKey]> = Some(&[]);

    fn declare_outputs(outputs: &mut OutputDeclarer) {
        outputs.declare(&["grouping", "custom"]);
    }

    fn new(_config: &ComponentConfig<'_>) -> Result<Self> {
        Ok(Self::default())
    }

    fn prepare(&mut self, context: &TaskContext) -> Result<()> {
        self.inputs = context
            .inputs()
            .iter()
            .map(|i| vec![Value::from(i.grouping.as_str()), Value::from(i.custom.as_str())])
            .collect();
        Ok(())
    }

    fn execute(&mut self, _input: &Tuple<'_>, collector: &mut BasicCollector<'_>) -> Result<()> {
        for values in &self.inputs {
            collector.emit(values);
        }
        Ok(())
    }
}

/// Sends every tuple to the first task.
struct First;

impl Grouping for First {
    const NAME: &'static str = "First";
    const CONFIG_KEYS: Option<&'static [ConfigKey]> = Some(&[]);

    fn new(_config: &ComponentConfig<'_>) -> Result<Self> {
        Ok(First)
    }

    fn choose(&mut self, _values: &[Value], targets: &mut Vec<u32>) {
        targets.push(0);
    }
}

squall_plugin_api::export_plugin! {
    spouts: [Stamps],
    basic_bolts: [PlainEcho, InputEcho],
    windowed_bolts: [WindowEcho],
    groupings: [First],
}

const TIMEOUT: Duration = Duration::from_secs(30);

fn stamps(list: &[u64]) -> Vec<Vec<Value>> {
    list.iter().map(|&ts| vec![Value::U64(ts)]).collect()
}

fn row(kind: &str, length: u64, slide: u64, field: &str, lag: u64) -> Vec<Value> {
    vec![
        Value::from(kind),
        Value::U64(length),
        Value::U64(slide),
        Value::from(field),
        Value::U64(lag),
    ]
}

#[test]
fn a_count_window_is_read_in_prepare_and_other_bolts_have_none() {
    let topology = r#"
[spouts.stamps]
component = "w::Stamps"

[bolts.windows]
component = "w::WindowEcho"
parallelism = 2
inputs = [{ from = "stamps", grouping = "global" }]
window = { length_count = 3, slide_count = 3 }

[bolts.plain]
component = "w::PlainEcho"
inputs = [{ from = "stamps" }]
"#;
    let done = Harness::new(topology)
        .plugin::<__SquallPlugin>("w")
        .feed("stamps", stamps(&[1, 2, 3, 4, 5, 6]))
        .run_until_complete(TIMEOUT)
        .expect("every tuple is in a full window, so every one is acked");

    let ids: Vec<MessageId> = (0..6).map(MessageId).collect();
    assert_eq!(done.acked_by("stamps"), ids);
    let mut window = row("count", 3, 3, "", 0);
    window.push(Value::U64(3));
    assert_eq!(done.values("windows", "default"), [window.clone(), window]);
    assert_eq!(done.values("plain", "default"), vec![row("none", 0, 0, "", 0); 6]);
}

#[test]
fn an_event_time_window_is_read_with_its_field_and_lag() {
    // No acking: the fed tuples complete as they are emitted, and the drain
    // runs the queued ones through the windows before the bolts stop.
    let topology = r#"
[topology]
acker_executors = 0

[spouts.stamps]
component = "w::Stamps"

[bolts.windows]
component = "w::WindowEcho"
inputs = [{ from = "stamps", grouping = "global" }]
window = { length = "2s", slide = "1s" }
timestamp_field = "ts"
lag = "500ms"
"#;
    let done = Harness::new(topology)
        .plugin::<__SquallPlugin>("w")
        .feed("stamps", stamps(&[1000, 2000, 4000]))
        .run_until_complete(TIMEOUT)
        .expect("the run completes");

    // The watermark reaches 3500 ms: the windows ending at 2000 ([0, 2000)
    // holds 1000) and 3000 ([1000, 3000) holds 1000 and 2000) fire.
    let with = |tuples: u64| {
        let mut values = row("time", 2000, 1000, "ts", 500);
        values.push(Value::U64(tuples));
        values
    };
    assert_eq!(done.values("windows", "default"), [with(1), with(2)]);
}

#[test]
fn a_custom_grouping_is_named_in_the_inputs_of_the_context() {
    let topology = r#"
[spouts.stamps]
component = "w::Stamps"

[bolts.inputs]
component = "w::InputEcho"
inputs = [{ from = "stamps", grouping = { custom = "w::First" } }]
"#;
    let done = Harness::new(topology)
        .plugin::<__SquallPlugin>("w")
        .feed("stamps", stamps(&[1]))
        .run_until_complete(TIMEOUT)
        .expect("the run completes");
    assert_eq!(
        done.values("inputs", "default"),
        [vec![Value::from("custom"), Value::from("w::First")]]
    );
}

/// Two tuples stay in a count window that never fills: the end of the feed
/// flushes it, so the run completes with a last, shorter window (the
/// timeout and its error are in `window_flush.rs`).
#[test]
fn a_count_window_that_never_fills_is_flushed_at_the_end_of_the_feed() {
    let topology = r#"
[topology]
shutdown_timeout_secs = 30

[spouts.stamps]
component = "w::Stamps"

[bolts.windows]
component = "w::WindowEcho"
window = { length_count = 3 }
inputs = [{ from = "stamps" }]
"#;
    let done = Harness::new(topology)
        .plugin::<__SquallPlugin>("w")
        .feed("stamps", stamps(&[1, 2, 3, 4, 5]))
        .run_until_complete(TIMEOUT)
        .expect("the feed completes");
    let sizes: Vec<Value> =
        done.values("windows", "default").into_iter().filter_map(|v| v.last().cloned()).collect();
    assert_eq!(sizes, [Value::U64(3), Value::U64(2)]);
    assert_eq!(done.acked_by("stamps"), (0..5).map(MessageId).collect::<Vec<_>>());
}

/// Tick tuples never enter a window: `tick_tuple_freq_secs` on a windowed
/// bolt would do nothing, so it is refused where the bolt is declared.
#[test]
fn tick_tuple_freq_secs_on_a_windowed_bolt_is_refused() {
    let topology = r#"
[spouts.stamps]
component = "w::Stamps"

[bolts.windows]
component = "w::WindowEcho"
window = { length_count = 3 }
tick_tuple_freq_secs = 1
inputs = [{ from = "stamps" }]
"#;
    let e = Harness::new(topology)
        .plugin::<__SquallPlugin>("w")
        .feed("stamps", stamps(&[1, 2, 3]))
        .run_until_complete(TIMEOUT)
        .unwrap_err();
    let message = e.to_string();
    assert!(matches!(e, squall_harness::HarnessError::Config(_)), "{message}");
    assert!(
        message.contains("harness.toml:5:8") && message.contains("tick_tuple_freq_secs"),
        "{message}"
    );
}
