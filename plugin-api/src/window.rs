//! Windowed bolts (contract 1.1), modelled on Storm's `BaseWindowedBolt`.
//!
//! The host buffers a windowed bolt's input tuples into the windows its
//! topology entry configures (`window = { length = "30s", slide = "5s" }`,
//! or `{ length_count = 1000, slide_count = 100 }`), and calls
//! [`WindowedBolt::execute`] once per window with every tuple in it, the
//! tuples that entered it and the ones that left it. Emits are anchored to
//! every tuple of the window; a tuple is acked when it leaves the last window
//! that holds it.

use std::time::Duration;

use crate::abi::{InputDecl, WindowKind, WindowSettings, WindowView};
use crate::{
    BasicCollector, ComponentConfig, ConfigKey, OutputDeclarer, Result, State, TaskContext, Tuple,
};

/// One window, as [`WindowedBolt::execute`] sees it.
#[derive(Debug, Clone, Copy)]
pub struct Window<'a> {
    view: &'a WindowView<'a>,
}

impl<'a> Window<'a> {
    /// Wraps the host's view (the host does this; tests can too).
    pub fn new(view: &'a WindowView<'a>) -> Self {
        Self { view }
    }

    /// Every tuple in the window, oldest first.
    pub fn tuples(&self) -> &'a [Tuple<'a>] {
        self.view.tuples.as_slice()
    }

    /// The tuples that entered the window since the previous one.
    pub fn new_tuples(&self) -> &'a [Tuple<'a>] {
        self.view.new_tuples.as_slice()
    }

    /// The tuples that left the window since the previous one.
    pub fn expired(&self) -> &'a [Tuple<'a>] {
        self.view.expired.as_slice()
    }

    /// The window's start in milliseconds since the Unix epoch (0 for count
    /// windows).
    pub fn start_millis(&self) -> u64 {
        self.view.start_millis
    }

    /// The window's end in milliseconds since the Unix epoch (0 for count
    /// windows).
    pub fn end_millis(&self) -> u64 {
        self.view.end_millis
    }
}

/// How a window is cut (part of a [`WindowSpec`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WindowSize {
    /// By tuple count: `window = { length_count = .., slide_count = .. }`.
    Count {
        /// Tuples per window.
        length: u64,
        /// Tuples between two windows (`== length`: tumbling).
        slide: u64,
    },
    /// By time: `window = { length = "..", slide = ".." }`.
    Time {
        /// The window's duration.
        length: Duration,
        /// The time between two window ends (`== length`: tumbling).
        slide: Duration,
    },
}

/// Event time: the window runs on a field of the tuples instead of the
/// clock (part of a [`WindowSpec`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventTime {
    /// The input field holding each tuple's timestamp (integer milliseconds
    /// since the Unix epoch): the topology's `timestamp_field`.
    pub timestamp_field: String,
    /// How far the watermark trails the largest timestamp seen: the
    /// topology's `lag` (zero when absent).
    pub lag: Duration,
}

/// A windowed bolt's window as its topology entry configures it (`window`,
/// `timestamp_field`, `lag`), read in `prepare` with
/// [`TaskContext::window`](crate::TaskContext::window).
///
/// ```
/// use std::time::Duration;
/// use squall_plugin_api::prelude::*;
///
/// let spec = WindowSpec::time(Duration::from_secs(30), Duration::from_secs(5))
///     .with_event_time("ts", Duration::from_secs(2));
/// let context = TaskContext::builder("top").window(spec.clone()).build();
/// assert_eq!(context.window(), Some(spec));
/// assert!(!context.window().unwrap().is_tumbling());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WindowSpec {
    /// Count or time, length and slide.
    pub size: WindowSize,
    /// Event time (time windows only), or `None` for processing time.
    pub event_time: Option<EventTime>,
}

impl WindowSpec {
    /// A count window of `length` tuples that fires every `slide` tuples.
    pub fn count(length: u64, slide: u64) -> Self {
        Self { size: WindowSize::Count { length, slide }, event_time: None }
    }

    /// A processing-time window of `length` whose ends are `slide` apart.
    pub fn time(length: Duration, slide: Duration) -> Self {
        Self { size: WindowSize::Time { length, slide }, event_time: None }
    }

    /// The same window on event time: timestamps from `timestamp_field`, the
    /// watermark `lag` behind the largest one seen. (The host runs event
    /// time on time windows only.)
    pub fn with_event_time(mut self, timestamp_field: &str, lag: Duration) -> Self {
        self.event_time = Some(EventTime { timestamp_field: timestamp_field.to_owned(), lag });
        self
    }

    /// True when each tuple is in exactly one window (slide == length).
    pub fn is_tumbling(&self) -> bool {
        match self.size {
            WindowSize::Count { length, slide } => slide == length,
            WindowSize::Time { length, slide } => slide == length,
        }
    }

    /// Reads what crossed the boundary (`None` for a kind this contract
    /// does not know).
    pub fn from_settings(settings: &WindowSettings) -> Option<Self> {
        let size = match settings.kind {
            WindowKind::COUNT => {
                WindowSize::Count { length: settings.length, slide: settings.slide }
            }
            WindowKind::TIME => WindowSize::Time {
                length: Duration::from_millis(settings.length),
                slide: Duration::from_millis(settings.slide),
            },
            _ => return None,
        };
        let event_time = (!settings.timestamp_field.is_empty()).then(|| EventTime {
            timestamp_field: settings.timestamp_field.to_string(),
            lag: Duration::from_millis(settings.lag_millis),
        });
        Some(Self { size, event_time })
    }

    /// What crosses the boundary (durations in whole milliseconds).
    pub fn to_settings(&self) -> WindowSettings {
        let millis = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        let (kind, length, slide) = match self.size {
            WindowSize::Count { length, slide } => (WindowKind::COUNT, length, slide),
            WindowSize::Time { length, slide } => (WindowKind::TIME, millis(length), millis(slide)),
        };
        let (timestamp_field, lag_millis) = match &self.event_time {
            Some(e) => (e.timestamp_field.as_str().into(), millis(e.lag)),
            None => (Default::default(), 0),
        };
        WindowSettings { kind, length, slide, timestamp_field, lag_millis }
    }
}

/// A bolt that processes windows of tuples instead of single tuples.
///
/// Export it with `windowed_bolts: [...]` in
/// [`export_plugin!`](crate::export_plugin). It exists only in contract 1.1:
/// a 1.0 host does not see it.
pub trait WindowedBolt: Send + Sized + 'static {
    /// The name a topology uses after `alias::`.
    const NAME: &'static str;
    /// A one-line description for `squall inspect`.
    const DESCRIPTION: &'static str = "";
    /// The config keys the bolt accepts (see [`Spout::CONFIG_KEYS`](crate::Spout::CONFIG_KEYS)).
    const CONFIG_KEYS: Option<&'static [ConfigKey]> = None;
    /// Fields every input stream must carry.
    const INPUT_FIELDS: &'static [&'static str] = &[];
    /// Contract 1.2: how long `cleanup` may take at shutdown; the host waits
    /// at least this long for the task's thread before it reports the task
    /// as blocked (`None`: the host's default grace).
    const CLOSE_BUDGET: Option<std::time::Duration> = None;
    /// Contract 1.2: the streams the component emits on, by name. When
    /// given, `squall validate` refuses a topology whose config makes the
    /// component declare outputs without one of them (a config that
    /// renames or drops a stream), instead of letting every such emit be
    /// refused at run time (empty: not declared; nothing is checked).
    const EMITS: &'static [&'static str] = &[];
    /// Contract 1.3: the durable stores [`stores`](Self::stores) may
    /// return, by name and kind (`None`, the default: not declared). Declared,
    /// `squall inspect` lists them and `squall validate` refuses a keyed
    /// store whose inputs are not grouped by fields (several tasks would
    /// write one key); a checkpoint whose stores differ from the list is
    /// refused.
    const STORES: Option<&'static [crate::state::StoreSpec]> = None;

    /// Declares the output streams and their fields.
    fn declare_outputs(_outputs: &mut OutputDeclarer) {}

    /// Declares the outputs for a given config; the default calls
    /// `declare_outputs`.
    ///
    /// # Errors
    /// When the config is invalid.
    fn declare_outputs_for(
        _config: &ComponentConfig<'_>,
        outputs: &mut OutputDeclarer,
    ) -> Result<()> {
        Self::declare_outputs(outputs);
        Ok(())
    }

    /// Checks the subscribed inputs (see [`Bolt::check_inputs`](crate::Bolt::check_inputs)).
    ///
    /// # Errors
    /// When the bolt cannot work with these inputs.
    fn check_inputs(_config: &ComponentConfig<'_>, _inputs: &[InputDecl]) -> Result<()> {
        Ok(())
    }

    /// Builds an instance from the component's `config` table (the `window`
    /// settings are the host's, not in it).
    ///
    /// # Errors
    /// When the config is invalid.
    fn new(config: &ComponentConfig<'_>) -> Result<Self>;

    /// Called once on the task's thread before the first window.
    /// [`TaskContext::window`] gives the window the topology configured.
    ///
    /// # Errors
    /// When the bolt cannot start.
    fn prepare(&mut self, _context: &TaskContext) -> Result<()> {
        Ok(())
    }

    /// Processes one window. Emits are anchored to the window's tuples.
    ///
    /// # Errors
    /// An error fails every tuple of the window that is not in a later one
    /// yet: their trees fail and their spouts replay them.
    fn execute(&mut self, window: &Window<'_>, collector: &mut BasicCollector<'_>) -> Result<()>;

    /// Called once at shutdown.
    fn cleanup(&mut self) {}

    /// Saves the state a replacing instance takes over (`None`: none).
    fn save_state(&mut self) -> Option<State> {
        None
    }

    /// Takes over a predecessor's state, before `prepare`.
    ///
    /// # Errors
    /// When the format is unknown; the default refuses every state.
    fn restore_state(&mut self, state: State) -> Result<()> {
        Err(format!("{} keeps no state; it cannot take over `{}`", Self::NAME, state.format).into())
    }

    /// Contract 1.2: the durable stores the bolt keeps (none by default).
    /// The host checkpoints what they change and restores them after a
    /// restart, each key on the task its fields grouping routes it to; a
    /// live swap hands them to the new instance (docs/state.md).
    fn stores(&mut self) -> crate::state::Stores<'_> {
        crate::state::Stores::none()
    }

    /// Contract 1.2: checkpoint `checkpoint` is committed: everything the
    /// stores held at its barrier is durable (a sink that writes elsewhere
    /// may write what it staged for it now).
    fn committed(&mut self, _checkpoint: u64) {}
}
