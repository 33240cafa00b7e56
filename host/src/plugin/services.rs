//! Contract 1.1's host services: what a plugin library gets through
//! `PluginRoot::attach_host` — logging through the host's `tracing`, with the
//! component and task attached, and user metrics the host exports.
//!
//! An executor thread runs one task at a time; [`enter_task`] tells this
//! module which, so a plugin call knows its task without passing anything
//! across the boundary (a chain of tasks on one thread swaps each task's
//! [`Scope`] in around its turns). Calls from another thread (a constructor, the
//! plugin's own threads) log without a task and cannot register metrics.
//!
//! Contract 1.3 adds labelled series ([`DynHost13::register_labelled_metric`],
//! handed over through `PluginRoot::attach_host_1_3`):
//! one family, several series told apart by the plugin's labels, each
//! exported while the plugin holds a handle to it ([`UserMetrics`]).

use std::cell::RefCell;
use std::sync::{Arc, Mutex};

use abi_stable::sabi_trait::TD_Opaque;
use abi_stable::std_types::{RArc, RResult, RSlice, RStr, RVec};
use squall_plugin_api::abi::{
    AtomicCell, DynHost, DynHost13, DynHost13_TO, DynHost_TO, Host13Box, HostBox, LogLevel,
    MetricCells, MetricKind, MetricLabel, MetricStorage, CONTRACT_VERSION,
};
use squall_plugin_api::{ErrorKind, PluginError};

/// Where a task's plugin warnings and user metrics go: the task's counters
/// (`metrics::TaskStats` implements it). A trait, so that this layer does
/// not depend on the metrics above it.
pub trait TaskSink: Send + Sync + 'static {
    /// Records a warning or error the plugin logged (for `last_errors`).
    fn record_error(&self, message: String);
    /// The task's user metrics.
    fn user_metrics(&self) -> &UserMetrics;
}

/// The task the current thread runs.
#[derive(Clone)]
struct TaskScope {
    component: String,
    task: u32,
    stats: Arc<dyn TaskSink>,
    /// The metrics (name and labels; none for an unlabelled one) the
    /// current instance registered since its `open` or `prepare` began: a
    /// second registration of an unlabelled one is refused, and of a
    /// labelled one while a handle to it lives.
    registered: Vec<(String, Vec<(String, String)>)>,
}

thread_local! {
    static CURRENT: RefCell<Option<TaskScope>> = const { RefCell::new(None) };
    /// The task whose instance this thread is building (its constructor).
    static BUILDING: RefCell<Option<(String, u32)>> = const { RefCell::new(None) };
}

/// Warnings and errors a constructor logged, by component and task: they
/// join the task's last errors when the task starts (its counters do not
/// exist while it is built).
type Early = std::collections::HashMap<(String, u32), Vec<String>>;
static EARLY: Mutex<Option<Early>> = Mutex::new(None);

/// Marks the calling thread as running task `task` of `component`; plugin
/// log events and metrics from this thread are attributed to it. What its
/// constructor logged at warning level or above is added to its last errors.
pub fn enter_task(component: &str, task: u32, stats: Arc<dyn TaskSink>) {
    let early = EARLY
        .lock()
        .ok()
        .and_then(|mut e| e.as_mut()?.remove(&(component.to_owned(), task)))
        .unwrap_or_default();
    for message in early {
        stats.record_error(message);
    }
    CURRENT.with(|c| {
        *c.borrow_mut() =
            Some(TaskScope { component: component.to_owned(), task, stats, registered: Vec::new() })
    });
}

/// A task's scope taken off its thread: a chain (several tasks on one
/// thread) keeps one per task and swaps it in around each of the task's
/// turns, so plugin calls are attributed to the task that makes them.
#[derive(Default)]
pub struct Scope(Option<TaskScope>);

impl std::fmt::Debug for Scope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let task = self.0.as_ref().map(|s| (&s.component, s.task));
        f.debug_tuple("Scope").field(&task).finish()
    }
}

/// Swaps the calling thread's task scope with `scope`: call it once to
/// take a task's scope in, and again to take it back out.
pub fn swap_scope(scope: &mut Scope) {
    CURRENT.with(|c| std::mem::swap(&mut *c.borrow_mut(), &mut scope.0));
}

/// A new instance of the calling thread's task is about to `open` or
/// `prepare` (at start, after a rebuild, in a live swap): it may register
/// the metrics its predecessor did, and gets the same cells.
pub fn instance_starts() {
    CURRENT.with(|c| {
        if let Some(scope) = c.borrow_mut().as_mut() {
            scope.registered.clear();
        }
    });
}

/// While alive, the calling thread builds task `task` of `component`: what
/// the constructor logs names the component and task, and its warnings
/// are kept for the task's last errors ([`enter_task`]).
#[derive(Debug)]
pub struct Constructing(());

impl Constructing {
    /// Marks the calling thread as building `component`'s task `task`.
    pub fn enter(component: &str, task: u32) -> Constructing {
        BUILDING.with(|b| *b.borrow_mut() = Some((component.to_owned(), task)));
        Constructing(())
    }
}

impl Drop for Constructing {
    fn drop(&mut self) {
        BUILDING.with(|b| *b.borrow_mut() = None);
    }
}

/// The component and task being built on this thread, if any.
fn building() -> Option<(String, u32)> {
    BUILDING.with(|b| b.borrow().clone())
}

/// One user metric of a task as an exporter reads it: a copy of its cells
/// taken under the registry's lock.
#[derive(Debug, Clone)]
pub struct UserMetric {
    /// Its name as the plugin registered it.
    pub name: String,
    /// Its help text.
    pub help: String,
    /// The labels it was registered with besides the task's (contract
    /// 1.3), in the plugin's order; empty for an unlabelled metric.
    pub labels: Vec<(String, String)>,
    kind: MetricKind,
    values: Vec<u64>,
}

impl UserMetric {
    /// The kind.
    pub fn kind(&self) -> MetricKind {
        self.kind
    }

    /// Cell `i`'s value.
    pub fn cell(&self, i: usize) -> u64 {
        self.values.get(i).copied().unwrap_or(0)
    }
}

/// One registered metric (or labelled series): the host's reference to
/// its cells.
#[derive(Debug)]
struct Registered {
    name: String,
    help: String,
    labels: Vec<(String, String)>,
    cells: RArc<MetricStorage>,
}

impl Registered {
    /// A labelled series whose every plugin handle was dropped: the
    /// registry's reference is the only one left.
    fn abandoned(&self) -> bool {
        !self.labels.is_empty() && RArc::strong_count(&self.cells) == 1
    }
}

/// The user metrics of one task; written at registration, read by exporters.
///
/// An unlabelled metric stays while the process lives (a rebuilt instance
/// gets its cells back). A labelled series (contract 1.3) stays while the
/// plugin holds a handle to it: [`snapshot`](Self::snapshot) drops the
/// series whose handles are all gone, so they are exported no more. The
/// registry hands no reference to the cells to anyone but the plugin, so
/// the count of references it sees is exact under its lock.
#[derive(Debug, Default)]
pub struct UserMetrics {
    inner: Mutex<Vec<Registered>>,
}

impl UserMetrics {
    /// The registered metrics, in registration order, after dropping the
    /// labelled series no handle holds any more.
    pub fn snapshot(&self) -> Vec<UserMetric> {
        let Ok(mut metrics) = self.inner.lock() else { return Vec::new() };
        metrics.retain(|m| !m.abandoned());
        metrics
            .iter()
            .map(|m| UserMetric {
                name: m.name.clone(),
                help: m.help.clone(),
                labels: m.labels.clone(),
                kind: m.cells.kind,
                values: m
                    .cells
                    .values
                    .iter()
                    .map(|c| c.0.load(std::sync::atomic::Ordering::Relaxed))
                    .collect(),
            })
            .collect()
    }

    /// Registers metric `name` (with `labels`, empty for an unlabelled
    /// one), or returns the cells it has. `mine`: the calling instance
    /// registered this series before, so a handle of it still alive would
    /// be a second one (refused).
    // String error: it crosses the ABI to the plugin as its refusal's text.
    pub(crate) fn register(
        &self,
        kind: MetricKind,
        name: &str,
        help: &str,
        labels: &[(String, String)],
        mine: bool,
    ) -> Result<RArc<MetricStorage>, String> {
        let mut metrics = self.inner.lock().map_err(|_| "metrics registry poisoned".to_owned())?;
        if let Some(m) = metrics.iter().find(|m| m.name == name && m.labels == labels) {
            if m.cells.kind != kind {
                return Err(format!("{name:?} is already registered as another kind of metric"));
            }
            if mine && RArc::strong_count(&m.cells) > 1 {
                return Err(format!(
                    "{name:?} with labels {} is already registered by this instance and a \
                     handle to it is alive: keep that handle (a second one counts into the \
                     same series, so each event would count twice), or drop it first",
                    label_list(labels)
                ));
            }
            return Ok(m.cells.clone());
        }
        if let Some(m) = metrics.iter().find(|m| m.name == name) {
            if m.cells.kind != kind {
                return Err(format!("{name:?} is already registered as another kind of metric"));
            }
            if m.help != help {
                return Err(format!(
                    "{name:?} is already registered with the help text {:?}: the series of \
                     one metric share its kind and help",
                    m.help
                ));
            }
        }
        let values: RVec<AtomicCell> = (0..kind.cells()).map(|_| AtomicCell::default()).collect();
        let cells = RArc::new(MetricStorage { kind, values });
        metrics.push(Registered {
            name: name.to_owned(),
            help: help.to_owned(),
            labels: labels.to_vec(),
            cells: cells.clone(),
        });
        Ok(cells)
    }
}

/// `{a="x", b="y"}`, for messages.
fn label_list(labels: &[(String, String)]) -> String {
    let pairs: Vec<String> = labels.iter().map(|(n, v)| format!("{n}={v:?}")).collect();
    format!("{{{}}}", pairs.join(", "))
}

/// The labels the host puts on every user metric's series itself (and
/// `le`, a histogram bucket's bound): a plugin's labels may not take them.
pub const HOST_LABELS: &[&str] = &["topology", "component", "task", "le"];

/// Refuses labels whose names Prometheus would not take, that are the
/// host's own ([`HOST_LABELS`]), or that repeat one.
fn check_labels(name: &str, labels: &[(String, String)]) -> Result<(), String> {
    if labels.is_empty() {
        return Err(format!(
            "metric {name:?} is registered with labels, and none were given (register it \
             without labels instead)"
        ));
    }
    for (i, (label, _)) in labels.iter().enumerate() {
        if !valid_metric_name(label) {
            return Err(format!(
                "label name {label:?} of metric {name:?} is not [a-zA-Z_][a-zA-Z0-9_]*"
            ));
        }
        if label.starts_with("__") {
            return Err(format!(
                "label name {label:?} of metric {name:?} starts with \"__\", which Prometheus \
                 reserves"
            ));
        }
        if HOST_LABELS.contains(&label.as_str()) {
            return Err(format!(
                "label {label:?} of metric {name:?} is one the host sets itself ({}): choose \
                 another name",
                HOST_LABELS.join(", ")
            ));
        }
        if labels[..i].iter().any(|(l, _)| l == label) {
            return Err(format!("label {label:?} of metric {name:?} is given twice"));
        }
    }
    Ok(())
}

/// A metric name Prometheus accepts: `[a-zA-Z_][a-zA-Z0-9_]*`, at most 100 bytes.
pub fn valid_metric_name(name: &str) -> bool {
    let mut chars = name.chars();
    name.len() <= 100
        && chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The host object handed to every 1.1 library (and, as its
/// [`Host13Box`], to every library with `attach_host_1_3`).
#[derive(Debug, Clone, Copy)]
pub struct HostServices;

impl HostServices {
    /// As the ABI object a library's `attach_host` takes.
    pub fn boxed() -> HostBox {
        DynHost_TO::from_value(HostServices, TD_Opaque)
    }

    /// As the ABI object a library's `attach_host_1_3` takes.
    pub fn boxed_1_3() -> Host13Box {
        DynHost13_TO::from_value(HostServices, TD_Opaque)
    }
}

macro_rules! at_level {
    ($level:expr, $mac:ident, $($rest:tt)*) => {
        match $level {
            LogLevel::ERROR => tracing::$mac!(target: "plugin", tracing::Level::ERROR, $($rest)*),
            LogLevel::WARN => tracing::$mac!(target: "plugin", tracing::Level::WARN, $($rest)*),
            LogLevel::INFO => tracing::$mac!(target: "plugin", tracing::Level::INFO, $($rest)*),
            LogLevel::DEBUG => tracing::$mac!(target: "plugin", tracing::Level::DEBUG, $($rest)*),
            _ => tracing::$mac!(target: "plugin", tracing::Level::TRACE, $($rest)*),
        }
    };
}

impl DynHost for HostServices {
    fn log_enabled(&self, level: LogLevel) -> bool {
        at_level!(level, enabled,)
    }

    fn log(&self, level: LogLevel, message: RStr<'_>) {
        let message = message.as_str();
        CURRENT.with(|c| match &*c.borrow() {
            Some(scope) => {
                at_level!(level, event, component = %scope.component, task = scope.task, "{message}");
                if level <= LogLevel::WARN {
                    scope.stats.record_error(message.to_owned());
                }
            }
            None => match building() {
                Some((component, task)) => {
                    at_level!(level, event, component = %component, task, "{message}");
                    if level <= LogLevel::WARN {
                        let message = format!("{component}/{task}: {message}");
                        if let Ok(mut early) = EARLY.lock() {
                            let early = early.get_or_insert_with(Early::new);
                            early.entry((component, task)).or_default().push(message);
                        }
                    }
                }
                None => at_level!(level, event, "{message}"),
            },
        });
    }

    fn register_metric(
        &self,
        kind: MetricKind,
        name: RStr<'_>,
        help: RStr<'_>,
    ) -> RResult<MetricCells, PluginError> {
        let refuse =
            |m: String| RResult::RErr(PluginError { kind: ErrorKind::RUNTIME, message: m.into() });
        if let Err(m) = check_metric(kind, name.as_str()) {
            return refuse(m);
        }
        CURRENT.with(|c| match &mut *c.borrow_mut() {
            Some(scope) => {
                // Two handles of one instance would count into one series
                // twice per event.
                if scope.registered.iter().any(|(n, l)| n == name.as_str() && l.is_empty()) {
                    return refuse(format!(
                        "{:?} is already registered by this instance of {:?} (task {}): keep \
                         the first handle; a second one counts into the same series, so each \
                         event would count twice",
                        name.as_str(),
                        scope.component,
                        scope.task
                    ));
                }
                // Checked above: `mine` is for labelled series.
                let user = scope.stats.user_metrics();
                match user.register(kind, name.as_str(), help.as_str(), &[], false) {
                    Ok(cells) => {
                        scope.registered.push((name.as_str().to_owned(), Vec::new()));
                        RResult::ROk(MetricCells { cells })
                    }
                    Err(m) => refuse(m),
                }
            }
            None => refuse(off_task_thread()),
        })
    }
}

impl DynHost13 for HostServices {
    fn contract_version(&self) -> RStr<'static> {
        RStr::from_str(CONTRACT_VERSION)
    }

    fn register_labelled_metric(
        &self,
        kind: MetricKind,
        name: RStr<'_>,
        help: RStr<'_>,
        labels: RSlice<'_, MetricLabel<'_>>,
    ) -> RResult<MetricCells, PluginError> {
        let refuse =
            |m: String| RResult::RErr(PluginError { kind: ErrorKind::RUNTIME, message: m.into() });
        let name = name.as_str();
        let labels: Vec<(String, String)> = labels
            .iter()
            .map(|l| (l.name.as_str().to_owned(), l.value.as_str().to_owned()))
            .collect();
        if let Err(m) = check_metric(kind, name).and_then(|()| check_labels(name, &labels)) {
            return refuse(m);
        }
        CURRENT.with(|c| match &mut *c.borrow_mut() {
            Some(scope) => {
                let key = (name.to_owned(), labels);
                let mine = scope.registered.contains(&key);
                let user = scope.stats.user_metrics();
                match user.register(kind, name, help.as_str(), &key.1, mine) {
                    Ok(cells) => {
                        if !mine {
                            scope.registered.push(key);
                        }
                        RResult::ROk(MetricCells { cells })
                    }
                    Err(m) => refuse(m),
                }
            }
            None => refuse(off_task_thread()),
        })
    }
}

/// Refuses a metric whose name is not a Prometheus name or whose kind is
/// unknown.
fn check_metric(kind: MetricKind, name: &str) -> Result<(), String> {
    if !valid_metric_name(name) {
        return Err(format!("metric name {name:?} is not [a-zA-Z_][a-zA-Z0-9_]*"));
    }
    let known =
        [MetricKind::COUNTER, MetricKind::GAUGE, MetricKind::HISTOGRAM, MetricKind::DURATION];
    if !known.contains(&kind) {
        return Err(format!("unknown metric kind {}", kind.0));
    }
    Ok(())
}

/// Why a metric registered off a task's thread is refused (naming the
/// component when it was registered in its constructor).
fn off_task_thread() -> String {
    match building() {
        Some((component, task)) => format!(
            "component \"{component}\" (task {task}) registered it in its constructor \
             (new): register metrics in open or prepare, on the task's own thread"
        ),
        None => "register metrics in open or prepare, on the task's own thread".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A task's sink as the tests read it: the errors recorded, and the
    /// user metrics (the host's is `metrics::TaskStats`, a layer above).
    #[derive(Default)]
    struct Sink {
        errors: Mutex<Vec<String>>,
        user: UserMetrics,
    }

    impl TaskSink for Sink {
        fn record_error(&self, message: String) {
            self.errors.lock().unwrap().push(message);
        }

        fn user_metrics(&self) -> &UserMetrics {
            &self.user
        }
    }

    #[test]
    fn metric_names_follow_prometheus() {
        assert!(valid_metric_name("distinct_words"));
        assert!(valid_metric_name("_x9"));
        assert!(!valid_metric_name("9x"));
        assert!(!valid_metric_name("a-b"));
        assert!(!valid_metric_name(""));
    }

    #[test]
    fn a_metric_registered_in_a_constructor_is_refused_naming_the_component_and_kept() {
        let host = HostServices;
        let constructing = Constructing::enter("splitter", 4);
        let refused = host.register_metric(MetricKind::COUNTER, "words".into(), "".into());
        let message = refused.into_result().unwrap_err().message.to_string();
        assert!(message.contains("\"splitter\"") && message.contains("new"), "{message}");
        // What plugin-api's `metrics::counter` logs when the host refuses.
        host.log(
            LogLevel::WARN,
            format!("metric \"words\" not registered: {message}").as_str().into(),
        );
        drop(constructing);
        let stats = Arc::new(Sink::default());
        enter_task("splitter", 4, stats.clone());
        let errors = stats.errors.lock().unwrap().clone();
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(errors[0].contains("splitter/4") && errors[0].contains("words"), "{errors:?}");
        CURRENT.with(|c| *c.borrow_mut() = None);
    }

    #[test]
    fn a_task_registers_once_per_name_and_kind_and_off_task_registration_is_refused() {
        let host = HostServices;
        assert!(
            host.register_metric(MetricKind::COUNTER, "c".into(), "".into()).is_err(),
            "no task"
        );
        let stats = Arc::new(Sink::default());
        enter_task("count", 3, stats.clone());
        let a = host.register_metric(MetricKind::COUNTER, "c".into(), "h".into()).unwrap();
        let twice = host.register_metric(MetricKind::COUNTER, "c".into(), "h".into());
        let message = twice.into_result().unwrap_err().message.to_string();
        assert!(message.contains("already registered by this instance"), "{message}");
        // A new instance (a rebuild after a panic) gets the same cells back.
        instance_starts();
        let b = host.register_metric(MetricKind::COUNTER, "c".into(), "h".into()).unwrap();
        a.cells.values[0].0.fetch_add(2, std::sync::atomic::Ordering::Relaxed);
        assert_eq!(b.cells.values[0].0.load(std::sync::atomic::Ordering::Relaxed), 2, "same cells");
        instance_starts();
        assert!(host.register_metric(MetricKind::GAUGE, "c".into(), "".into()).is_err());
        let h = host.register_metric(MetricKind::HISTOGRAM, "h".into(), "".into()).unwrap();
        assert_eq!(h.cells.values.len(), squall_plugin_api::abi::HISTOGRAM_CELLS);
        let d = host.register_metric(MetricKind::DURATION, "d".into(), "".into()).unwrap();
        assert_eq!(
            (d.cells.kind, d.cells.values.len()),
            (MetricKind::DURATION, squall_plugin_api::abi::HISTOGRAM_CELLS)
        );
        assert!(host.register_metric(MetricKind(4), "e".into(), "".into()).is_err());
        let all = stats.user.snapshot();
        assert_eq!(all.iter().map(|m| m.name.as_str()).collect::<Vec<_>>(), ["c", "h", "d"]);
        assert_eq!(all[0].cell(0), 2);
    }
    /// Registers a labelled series through the ABI method; the refusal's text.
    fn labelled(
        kind: MetricKind,
        name: &str,
        help: &str,
        labels: &[(&str, &str)],
    ) -> Result<MetricCells, String> {
        let labels: Vec<MetricLabel<'_>> = labels
            .iter()
            .map(|&(name, value)| MetricLabel { name: name.into(), value: value.into() })
            .collect();
        let answer = HostServices.register_labelled_metric(
            kind,
            name.into(),
            help.into(),
            labels.as_slice().into(),
        );
        answer.into_result().map_err(|e| e.message.to_string())
    }

    #[test]
    fn labels_are_prometheus_names_none_of_the_hosts_each_given_once() {
        let stats = Arc::new(Sink::default());
        enter_task("in", 1, stats.clone());
        let refusal = |labels: &[(&str, &str)]| {
            labelled(MetricKind::GAUGE, "lag", "", labels).map(|_| ()).unwrap_err()
        };
        let m = refusal(&[("9x", "")]);
        assert!(m.contains("label name \"9x\" of metric \"lag\" is not [a-zA-Z_]"), "{m}");
        let m = refusal(&[("a-b", "")]);
        assert!(m.contains("\"a-b\""), "{m}");
        let m = refusal(&[("__name", "")]);
        assert!(m.contains("\"__name\"") && m.contains("reserves"), "{m}");
        for host_label in ["topology", "component", "task", "le"] {
            let m = refusal(&[("topic", "t"), (host_label, "1")]);
            assert!(
                m.contains(&format!(
                    "label {host_label:?} of metric \"lag\" is one the host sets itself"
                )),
                "{m}"
            );
        }
        let m = refusal(&[("partition", "1"), ("partition", "2")]);
        assert!(m.contains("label \"partition\" of metric \"lag\" is given twice"), "{m}");
        let m = refusal(&[]);
        assert!(m.contains("none were given"), "{m}");
        let m = labelled(MetricKind::GAUGE, "9lag", "", &[("p", "1")]).map(|_| ()).unwrap_err();
        assert!(m.contains("metric name \"9lag\""), "{m}");
        assert!(stats.user.snapshot().is_empty(), "nothing registered");
        // Any text is a value.
        assert!(labelled(MetricKind::GAUGE, "lag", "", &[("topic", "a\"b\\c\nd é")]).is_ok());
    }

    #[test]
    fn one_family_has_a_series_per_label_set_registered_once_while_a_handle_lives() {
        let stats = Arc::new(Sink::default());
        enter_task("in", 1, stats.clone());
        let p0 =
            labelled(MetricKind::GAUGE, "lag", "behind", &[("topic", "t"), ("partition", "0")]);
        let p0 = p0.unwrap();
        let p1 =
            labelled(MetricKind::GAUGE, "lag", "behind", &[("topic", "t"), ("partition", "1")]);
        assert!(p1.is_ok(), "another label set: another series of the family");
        let twice =
            labelled(MetricKind::GAUGE, "lag", "behind", &[("topic", "t"), ("partition", "0")]);
        let m = twice.map(|_| ()).unwrap_err();
        assert!(
            m.contains("already registered by this instance and a handle to it is alive"),
            "{m}"
        );
        let kind = labelled(MetricKind::COUNTER, "lag", "behind", &[("partition", "2")]);
        assert!(kind.map(|_| ()).unwrap_err().contains("another kind"));
        let help = labelled(MetricKind::GAUGE, "lag", "other", &[("partition", "2")]);
        let m = help.map(|_| ()).unwrap_err();
        assert!(m.contains("help text \"behind\""), "{m}");
        // The handle dropped (a partition given up), the series may be
        // registered again: before a scrape it has the same cells.
        p0.cells.values[0].0.store(7, std::sync::atomic::Ordering::Relaxed);
        drop(p0);
        let again =
            labelled(MetricKind::GAUGE, "lag", "behind", &[("topic", "t"), ("partition", "0")]);
        assert_eq!(again.unwrap().cells.values[0].0.load(std::sync::atomic::Ordering::Relaxed), 7);
        // A new instance may register what its predecessor still holds.
        let held =
            labelled(MetricKind::GAUGE, "lag", "behind", &[("topic", "t"), ("partition", "5")]);
        instance_starts();
        let next =
            labelled(MetricKind::GAUGE, "lag", "behind", &[("topic", "t"), ("partition", "5")]);
        assert!(held.is_ok() && next.is_ok(), "{next:?}");
    }

    #[test]
    fn a_labelled_series_leaves_the_snapshot_once_its_handles_are_dropped() {
        let stats = Arc::new(Sink::default());
        enter_task("in", 1, stats.clone());
        let host = HostServices;
        let plain = host.register_metric(MetricKind::COUNTER, "c".into(), "".into()).unwrap();
        let p0 = labelled(MetricKind::GAUGE, "lag", "", &[("partition", "0")]).unwrap();
        let p1 = labelled(MetricKind::GAUGE, "lag", "", &[("partition", "1")]).unwrap();
        let clone = p0.clone();
        p0.cells.values[0].0.store(5, std::sync::atomic::Ordering::Relaxed);
        /// One exported series: name, labels, first cell.
        type Seen = (String, Vec<(String, String)>, u64);
        let series = |stats: &Sink| -> Vec<Seen> {
            stats
                .user
                .snapshot()
                .into_iter()
                .map(|m| (m.name.clone(), m.labels.clone(), m.cell(0)))
                .collect()
        };
        let label = |p: &str| vec![("partition".to_owned(), p.to_owned())];
        assert_eq!(
            series(&stats),
            [("c".into(), vec![], 0), ("lag".into(), label("0"), 5), ("lag".into(), label("1"), 0)]
        );
        drop(p0);
        assert_eq!(series(&stats).len(), 3, "a clone of the handle still holds it");
        drop(clone);
        drop(plain);
        assert_eq!(
            series(&stats),
            [("c".into(), vec![], 0), ("lag".into(), label("1"), 0)],
            "partition 0 is gone; an unlabelled metric stays"
        );
        // Registered again once gone: a new series, from zero.
        let p0 = labelled(MetricKind::GAUGE, "lag", "", &[("partition", "0")]).unwrap();
        assert_eq!(series(&stats)[2], ("lag".into(), label("0"), 0));
        drop((p0, p1));
        assert_eq!(series(&stats), [("c".into(), vec![], 0)]);
    }
}
