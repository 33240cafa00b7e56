//! What a component instance learns about its place in the topology.

use abi_stable::{
    std_types::{ROption, RString, RVec},
    StableAbi,
};

use std::cell::Cell;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::abi;
use crate::{Waker, WindowSpec, DEFAULT_STREAM};

/// One declared output stream: its name, its fields, and whether it is direct.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq)]
pub struct StreamDecl {
    /// The stream's name.
    pub name: RString,
    /// The names of its fields, in order.
    pub fields: RVec<RString>,
    /// True when tuples on this stream are sent with `emit_direct`.
    pub direct: bool,
}

/// The tasks of one downstream component, for `emit_direct`.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq)]
pub struct ComponentTasks {
    /// The component's name in the topology.
    pub component: RString,
    /// Its task ids.
    pub tasks: RVec<u32>,
}

/// Collects a component's output stream declarations (Storm's `declareOutputFields`).
#[derive(Debug, Default)]
pub struct OutputDeclarer {
    streams: Vec<StreamDecl>,
}

impl OutputDeclarer {
    /// Declares the default stream with these fields.
    pub fn declare(&mut self, fields: &[&str]) -> &mut Self {
        self.declare_stream(DEFAULT_STREAM, fields)
    }

    /// Declares a named stream with these fields.
    pub fn declare_stream(&mut self, name: &str, fields: &[&str]) -> &mut Self {
        self.push(name, fields, false)
    }

    /// Declares a named stream whose tuples are sent with `emit_direct`.
    pub fn declare_direct_stream(&mut self, name: &str, fields: &[&str]) -> &mut Self {
        self.push(name, fields, true)
    }

    fn push(&mut self, name: &str, fields: &[&str], direct: bool) -> &mut Self {
        self.streams.retain(|s| s.name.as_str() != name);
        self.streams.push(StreamDecl {
            name: name.into(),
            fields: fields.iter().map(|f| RString::from(*f)).collect(),
            direct,
        });
        self
    }

    /// The declared streams, in declaration order.
    pub fn into_streams(self) -> Vec<StreamDecl> {
        self.streams
    }
}

/// Handed to `open` / `prepare`: the topology, the component, the task, and
/// (contract 1.1) the component's effective settings, its inputs and, for
/// spouts and (contract 1.3) rich bolts, a [`Waker`].
///
/// The 1.0 fields (`topology`, `component`, `task_id`, `task_index`,
/// `parallelism`, `outputs`, `downstream`) are read through `Deref` to
/// [`abi::TaskContext`](crate::abi::TaskContext). Tests build one with
/// [`TaskContext::builder`].
#[derive(Debug, Clone)]
pub struct TaskContext {
    raw: abi::TaskContext,
    ext: abi::TaskExt,
    waker: Option<Waker>,
    waker_taken: Cell<bool>,
}

impl TaskContext {
    /// Wraps what the host passed. `ext` is absent when a 1.0 host (or a 1.0
    /// entry point) called the component: the settings then read as defaults.
    pub fn from_host(
        raw: abi::TaskContext,
        ext: Option<abi::TaskExt>,
        waker: Option<Waker>,
    ) -> Self {
        let ext = ext.unwrap_or_else(|| abi::TaskExt {
            tick_freq_millis: 0,
            message_timeout_millis: 0,
            max_spout_pending: 0,
            ackers: 0,
            inputs: RVec::new(),
            topology_dir: RString::new(),
            window: ROption::RNone,
        });
        Self { raw, ext, waker, waker_taken: Cell::new(false) }
    }

    /// Starts a context for unit tests: component `component`, one task with
    /// id 1 and index 0, no outputs, no inputs.
    pub fn builder(component: &str) -> TaskContextBuilder {
        TaskContextBuilder {
            context: Self::from_host(
                abi::TaskContext {
                    topology: "test".into(),
                    component: component.into(),
                    task_id: 1,
                    task_index: 0,
                    parallelism: 1,
                    outputs: RVec::new(),
                    downstream: RVec::new(),
                },
                None,
                None,
            ),
        }
    }

    /// The 1.0 part, as it crossed the boundary.
    pub fn raw(&self) -> &abi::TaskContext {
        &self.raw
    }

    /// The 1.1 settings, as they crossed the boundary.
    pub fn ext(&self) -> &abi::TaskExt {
        &self.ext
    }

    /// The tick tuple period, when the component gets ticks.
    pub fn tick_freq(&self) -> Option<Duration> {
        nonzero_millis(self.ext.tick_freq_millis)
    }

    /// The message timeout, when timeouts are on.
    pub fn message_timeout(&self) -> Option<Duration> {
        nonzero_millis(self.ext.message_timeout_millis)
    }

    /// This task's `max_spout_pending`, when it is bounded.
    pub fn max_spout_pending(&self) -> Option<u32> {
        (self.ext.max_spout_pending > 0).then_some(self.ext.max_spout_pending)
    }

    /// True when tuple trees are tracked (the topology runs ackers).
    pub fn acking(&self) -> bool {
        self.ext.ackers > 0
    }

    /// The inputs this component subscribes to.
    pub fn inputs(&self) -> &[abi::InputDecl] {
        &self.ext.inputs
    }

    /// A windowed bolt's window, as its topology entry configures it
    /// (`None` for every other component, and under a 1.0 host).
    pub fn window(&self) -> Option<WindowSpec> {
        self.ext.window.as_ref().into_option().and_then(WindowSpec::from_settings)
    }

    /// Resolves a path from the component's config the way the topology's
    /// plugin paths are resolved: relative paths against the folder of the
    /// topology file, absolute paths as they are.
    pub fn resolve_path(&self, path: impl AsRef<Path>) -> PathBuf {
        let path = path.as_ref();
        if path.is_absolute() || self.ext.topology_dir.is_empty() {
            path.to_path_buf()
        } else {
            Path::new(self.ext.topology_dir.as_str()).join(path)
        }
    }

    /// The task's wake handle: a spout's on a 1.1 host, a rich bolt's on a
    /// 1.3 host (`None` otherwise).
    ///
    /// Taking it opts a spout in: when `next_tuple` emits nothing, its
    /// executor blocks until [`Waker::wake`] is called (or acks, ticks or the
    /// drain need it) instead of polling through the spout wait strategy. A
    /// spout that takes it must call `wake` whenever new data becomes
    /// available, from any thread.
    ///
    /// A bolt calls `wake` from its own threads when it has something to
    /// settle (a delivery report to ack): the host then calls
    /// [`Bolt::woken`](crate::Bolt::woken) on the bolt's thread between two
    /// batches, even when no input is coming.
    pub fn waker(&self) -> Option<Waker> {
        let waker = self.waker.clone()?;
        self.waker_taken.set(true);
        Some(waker)
    }

    /// True once [`TaskContext::waker`] handed out the wake handle.
    pub fn waker_taken(&self) -> bool {
        self.waker_taken.get()
    }
}

impl std::ops::Deref for TaskContext {
    type Target = abi::TaskContext;

    fn deref(&self) -> &abi::TaskContext {
        &self.raw
    }
}

fn nonzero_millis(millis: u64) -> Option<Duration> {
    (millis > 0).then(|| Duration::from_millis(millis))
}

/// Builds a [`TaskContext`] for unit tests ([`TaskContext::builder`]).
#[derive(Debug)]
pub struct TaskContextBuilder {
    context: TaskContext,
}

impl TaskContextBuilder {
    /// Sets the task's id, its index and the component's parallelism.
    pub fn task(mut self, task_id: u32, task_index: u32, parallelism: u32) -> Self {
        self.context.raw.task_id = task_id;
        self.context.raw.task_index = task_index;
        self.context.raw.parallelism = parallelism;
        self
    }

    /// Sets the topology's name.
    pub fn topology(mut self, name: &str) -> Self {
        self.context.raw.topology = name.into();
        self
    }

    /// Sets the declared outputs (as the component's `declare_outputs` gives them).
    pub fn outputs(mut self, outputs: OutputDeclarer) -> Self {
        self.context.raw.outputs = outputs.into_streams().into();
        self
    }

    /// Adds a downstream component with its task ids (for `emit_direct`).
    pub fn downstream(mut self, component: &str, tasks: &[u32]) -> Self {
        self.context
            .raw
            .downstream
            .push(ComponentTasks { component: component.into(), tasks: tasks.into() });
        self
    }

    /// Sets the tick tuple period.
    pub fn tick_freq(mut self, period: Duration) -> Self {
        self.context.ext.tick_freq_millis = period.as_millis() as u64;
        self
    }

    /// Sets the message timeout.
    pub fn message_timeout(mut self, timeout: Duration) -> Self {
        self.context.ext.message_timeout_millis = timeout.as_millis() as u64;
        self
    }

    /// Sets `max_spout_pending`.
    pub fn max_spout_pending(mut self, max: u32) -> Self {
        self.context.ext.max_spout_pending = max;
        self
    }

    /// Sets the number of ackers.
    pub fn ackers(mut self, ackers: u32) -> Self {
        self.context.ext.ackers = ackers;
        self
    }

    /// Adds an input: `grouping` is a grouping name (`"fields"` with
    /// `grouping_fields`), `fields` the stream's declared fields.
    pub fn input(
        mut self,
        component: &str,
        stream: &str,
        grouping: &str,
        grouping_fields: &[&str],
        fields: &[&str],
    ) -> Self {
        let strings = |s: &[&str]| s.iter().map(|f| RString::from(*f)).collect();
        self.context.ext.inputs.push(abi::InputDecl {
            component: component.into(),
            stream: stream.into(),
            grouping: grouping.into(),
            grouping_fields: strings(grouping_fields),
            fields: strings(fields),
            custom: RString::new(),
        });
        self
    }

    /// Sets the window [`TaskContext::window`] returns (a windowed bolt's).
    pub fn window(mut self, window: WindowSpec) -> Self {
        self.context.ext.window = ROption::RSome(window.to_settings());
        self
    }

    /// Sets the folder [`TaskContext::resolve_path`] resolves against.
    pub fn topology_dir(mut self, dir: impl AsRef<Path>) -> Self {
        self.context.ext.topology_dir = dir.as_ref().to_string_lossy().as_ref().into();
        self
    }

    /// Hands the spout a wake handle that calls `wake` (for testing a spout's
    /// waking).
    pub fn waker(mut self, wake: impl Fn() + Send + Sync + 'static) -> Self {
        self.context.waker = Some(Waker::from_fn(wake));
        self
    }

    /// The finished context.
    pub fn build(self) -> TaskContext {
        self.context
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::sync::Arc;

    use super::*;

    #[test]
    fn the_builder_starts_with_one_task_and_no_settings() {
        let context = TaskContext::builder("split").build();
        assert_eq!(context.topology.as_str(), "test");
        assert_eq!(context.component.as_str(), "split");
        assert_eq!((context.task_id, context.task_index, context.parallelism), (1, 0, 1));
        assert!(context.outputs.is_empty() && context.downstream.is_empty());
        assert_eq!(context.tick_freq(), None);
        assert_eq!(context.message_timeout(), None);
        assert_eq!(context.max_spout_pending(), None);
        assert!(!context.acking());
        assert!(context.inputs().is_empty());
        assert_eq!(context.window(), None);
        assert!(context.waker().is_none());
        assert!(!context.waker_taken(), "there was no waker to take");
    }

    #[test]
    fn the_builder_sets_every_field_and_the_accessors_read_them() {
        let mut outputs = OutputDeclarer::default();
        outputs.declare(&["word"]).declare_direct_stream("direct", &["n"]);
        let context = TaskContext::builder("count")
            .topology("wc")
            .task(7, 2, 4)
            .outputs(outputs)
            .downstream("sink", &[8, 9])
            .tick_freq(Duration::from_secs(5))
            .message_timeout(Duration::from_millis(1500))
            .max_spout_pending(64)
            .ackers(2)
            .input("split", "default", "fields", &["word"], &["word"])
            .build();
        assert_eq!(context.topology.as_str(), "wc");
        assert_eq!((context.task_id, context.task_index, context.parallelism), (7, 2, 4));
        assert_eq!(context.stream_id("default"), Some(crate::StreamId::DEFAULT));
        assert_eq!(context.stream_id("direct"), Some(crate::StreamId(1)));
        assert_eq!(context.stream_id("nosuch"), None);
        assert_eq!(context.tasks_of("sink"), [8, 9]);
        assert_eq!(context.tick_freq(), Some(Duration::from_secs(5)));
        assert_eq!(context.message_timeout(), Some(Duration::from_millis(1500)));
        assert_eq!(context.max_spout_pending(), Some(64));
        assert!(context.acking());
        let [input] = context.inputs() else { panic!("one input") };
        assert_eq!(input.component.as_str(), "split");
        assert_eq!(input.stream.as_str(), "default");
        assert_eq!(input.grouping.as_str(), "fields");
        assert_eq!(input.grouping_fields.as_slice(), [RString::from("word")]);
        assert_eq!(input.fields.as_slice(), [RString::from("word")]);
        assert_eq!(context.raw().component, context.component);
        assert_eq!(context.ext().ackers, 2);
        assert_eq!(context.window(), None, "not a windowed bolt");
    }

    #[test]
    fn the_window_crosses_the_boundary_and_reads_back_the_same() {
        use crate::{EventTime, WindowSize};
        let count = WindowSpec::count(1000, 100);
        let time = WindowSpec::time(Duration::from_secs(30), Duration::from_secs(30));
        let event = WindowSpec::time(Duration::from_secs(10), Duration::from_millis(2500))
            .with_event_time("ts", Duration::from_secs(2));
        for spec in [&count, &time, &event] {
            let context = TaskContext::builder("top").window(spec.clone()).build();
            assert_eq!(context.window().as_ref(), Some(spec));
        }
        let settings = event.to_settings();
        assert_eq!(settings.kind, abi::WindowKind::TIME);
        assert_eq!((settings.length, settings.slide), (10_000, 2500));
        assert_eq!(settings.timestamp_field.as_str(), "ts");
        assert_eq!(settings.lag_millis, 2000);
        assert_eq!(
            event.event_time,
            Some(EventTime { timestamp_field: "ts".into(), lag: Duration::from_secs(2) })
        );
        let settings = count.to_settings();
        assert_eq!(settings.kind, abi::WindowKind::COUNT);
        assert_eq!((settings.length, settings.slide), (1000, 100));
        assert!(settings.timestamp_field.is_empty() && settings.lag_millis == 0);
        assert_eq!(count.size, WindowSize::Count { length: 1000, slide: 100 });
        assert!(!count.is_tumbling() && time.is_tumbling() && !event.is_tumbling());
    }

    #[test]
    fn a_window_kind_this_contract_does_not_know_reads_as_no_window() {
        let mut settings = WindowSpec::count(3, 3).to_settings();
        settings.kind = abi::WindowKind(9);
        let raw = TaskContext::builder("top").build().raw().clone();
        let mut ext = TaskContext::builder("top").build().ext().clone();
        ext.window = ROption::RSome(settings);
        let context = TaskContext::from_host(raw, Some(ext), None);
        assert_eq!(context.window(), None);
    }

    #[test]
    fn a_1_0_host_leaves_every_setting_at_its_default() {
        let raw = TaskContext::builder("old").build().raw().clone();
        let context = TaskContext::from_host(raw, None, None);
        assert_eq!(context.tick_freq(), None);
        assert!(!context.acking());
        assert_eq!(context.resolve_path("a/b"), PathBuf::from("a/b"));
    }

    #[test]
    fn resolve_path_joins_relative_paths_to_the_topology_dir() {
        let context = TaskContext::builder("c").topology_dir("/srv/topologies").build();
        assert_eq!(
            context.resolve_path("data/in.txt"),
            PathBuf::from("/srv/topologies/data/in.txt")
        );
        assert_eq!(context.resolve_path("/var/in.txt"), PathBuf::from("/var/in.txt"));
        let no_dir = TaskContext::builder("c").build();
        assert_eq!(no_dir.resolve_path("data/in.txt"), PathBuf::from("data/in.txt"));
    }

    #[test]
    fn taking_the_waker_is_recorded_and_it_calls_the_hosts_wake() {
        let woken = Arc::new(AtomicU32::new(0));
        let counter = Arc::clone(&woken);
        let context = TaskContext::builder("source")
            .waker(move || {
                counter.fetch_add(1, Ordering::SeqCst);
            })
            .build();
        assert!(!context.waker_taken(), "not taken until asked for");
        let waker = context.waker().expect("the builder gave one");
        assert!(context.waker_taken());
        waker.wake();
        waker.clone().wake();
        assert_eq!(woken.load(Ordering::SeqCst), 2);
    }
}
