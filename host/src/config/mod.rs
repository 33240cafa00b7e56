//! The topology file: TOML text → a typed, validated [`TopologyConfig`], or every
//! error in the file at once as [`Diagnostics`].
//!
//! # Stages
//!
//! 1. **Parse.** toml's `de` layer turns the text into a tree of values, each with
//!    its byte span. A syntax error stops here, as one diagnostic with the
//!    parser's line and column.
//! 2. **Compose** (`compose`, `overrides`). The files the topology includes
//!    are read and merged with it, then every `--set` override is applied.
//!    Every text keeps its own place in one offset space (`source`), so a
//!    value from an included file or a `--set` argument is reported there.
//!    A missing file, a cycle or a syntax error in any file stops here.
//! 3. **Read** (`walk` and the readers in `settings`, `wait` and `components`).
//!    Each table is walked by hand rather than deserialized with serde, because
//!    serde stops at the first error. Every value is checked for type and range,
//!    every string is interpolated from the environment (`${VAR:-default}`, see
//!    `interpolate`), unknown keys are reported with a "did you mean", and
//!    defaults ([`defaults`]) fill what is absent. A bad value is reported and
//!    replaced by its default, so reading always goes on to the end.
//! 4. **Validate** (`validate`). Checks that span components: at least one
//!    spout, one namespace for spouts and bolts, inputs that name a declared
//!    component, no cycle among bolts.
//!
//! The result is handed out only if no stage found an error. Diagnostics are
//! sorted by position.
//!
//! # What the output promises
//!
//! Nothing in [`TopologyConfig`] carries a TOML span: every name the user wrote
//! carries a [`Loc`] instead, so the checks that need the loaded plugins (the
//! component exists, the stream and the grouping fields are declared) can point at
//! the file too ([`TopologyConfig::sources`] names the file a [`Loc`] is in).
//! Spouts, bolts and inputs are in file order (the order of first definition
//! across included files). Plugin paths are resolved against the directory of
//! the TOML file that wrote them. Every component reference names a declared
//! plugin alias.
//!
//! The accepted keys, their types and defaults are listed in [`defaults`].

mod addr;
pub mod chain;
mod components;
pub mod compose;
pub mod defaults;
mod diagnostic;
pub mod group;
mod interpolate;
pub mod limits;
mod model;
mod overrides;
mod print;
mod setting;
mod settings;
mod source;
pub mod state;
mod suggest;
pub mod test_cases;
pub(crate) mod validate;
mod wait;
mod walk;
pub mod window;

use std::path::{Path, PathBuf};

use toml::de::DeTable;

pub use addr::{parse_addr, AddrError};
pub use diagnostic::{Diagnostic, Diagnostics, Loc, Sources};
pub use group::GroupDecl;
pub use model::{
    BoltDecl, ComponentDecl, ComponentRef, ConfigKeyLoc, GroupingSpec, HttpOptions, InputDecl,
    PluginDecl, Settings, SpoutDecl, ThrottleMode, ThrottleRate, ThrottleSpec, WaitDefaults,
    WaitOverrides, WaitSpec,
};
pub use overrides::{NotKeyValue, Override};
pub use state::{BackendDecl, StateDecl};
pub use suggest::suggest;
pub use test_cases::{Check, Expectation, InputTarget, Subject, TestDecl, TestInput};
pub use window::{WindowDecl, WindowSize};

use defaults::keys;
use walk::Walker;

/// A topology file, read and validated: the first typed stage of the pipeline
/// (`TopologyConfig` → `Topology` → `Plan` → `RunningTopology`).
#[derive(Clone, Debug, PartialEq)]
pub struct TopologyConfig {
    /// The file as named by the caller.
    pub file: PathBuf,
    /// The files it was read from (itself first, then its includes) and the
    /// `--set` arguments: what a [`Loc`]'s `source` names.
    pub sources: Sources,
    /// The directory relative paths in the file are resolved against (`.` when
    /// the file name has no directory part).
    pub dir: PathBuf,
    /// `[topology] name`, or the file stem.
    pub name: String,
    /// Where the name is written; 1:1 when it is the file stem.
    pub name_loc: Loc,
    /// The `[topology]` settings, defaults applied.
    pub settings: Settings,
    /// `[plugins]`, in file order.
    pub plugins: Vec<PluginDecl>,
    /// `[wait.*]`, defaults applied.
    pub wait: WaitDefaults,
    /// `[spouts.*]`, in file order.
    pub spouts: Vec<SpoutDecl>,
    /// `[bolts.*]`, in file order.
    pub bolts: Vec<BoltDecl>,
    /// `[state]`: where durable state is checkpointed (`None`: nowhere).
    pub state: Option<StateDecl>,
    /// `[[tests]]`, in file order: what `squall test` runs.
    pub tests: Vec<TestDecl>,
    /// `[group]`: the group of hosts sharing this topology's partitions
    /// (`None`: this process runs the topology alone).
    pub group: Option<GroupDecl>,
    /// Where a topology over its memory budget is reported:
    /// `memory_budget_mib`, else `receive_buffer_size`, else `[topology]`.
    pub budget_loc: Loc,
}

/// Reads and validates the topology file at `path` and the files it
/// includes, interpolating from the process environment.
///
/// # Errors
///
/// Every problem in the files, each with its file, line and column. A file that
/// cannot be read is one diagnostic at 1:1.
///
/// Anything but a regular file (a FIFO, a device, a directory) is refused
/// before it is read, and so is a file larger than [`MAX_TOPOLOGY_BYTES`].
pub fn load(path: &Path) -> Result<TopologyConfig, Diagnostics> {
    load_with(path, &[])
}

/// [`load`] with `--set` overrides applied after the includes.
///
/// # Errors
///
/// As [`load`]; an error in an override is reported against its argument.
pub fn load_with(path: &Path, sets: &[Override]) -> Result<TopologyConfig, Diagnostics> {
    read_file(path, sets, false).map(|(config, _)| config)
}

/// [`load_with`], also returning the composed topology as one TOML document
/// (what `squall validate --print` prints; see the `print` module).
///
/// # Errors
///
/// As [`load_with`]; nothing is printed for a topology with errors.
pub fn load_effective(
    path: &Path,
    sets: &[Override],
) -> Result<(TopologyConfig, String), Diagnostics> {
    let (config, printed) = read_file(path, sets, true)?;
    Ok((config, printed.unwrap_or_default()))
}

/// [`load_with`], also returning, with the errors, what could be read of
/// a topology that has errors (`None` when the TOML itself could not be
/// read), so that the plugins can check what is intact.
///
/// # Errors
///
/// As [`load_with`].
pub fn load_partial(
    path: &Path,
    sets: &[Override],
) -> Result<TopologyConfig, (Diagnostics, Option<Box<TopologyConfig>>)> {
    read_file_partial(path, sets, false).map(|(config, _)| config)
}

fn read_file(
    path: &Path,
    sets: &[Override],
    print: bool,
) -> Result<(TopologyConfig, Option<String>), Diagnostics> {
    read_file_partial(path, sets, print).map_err(|(diags, _)| diags)
}

type Partial = (Diagnostics, Option<Box<TopologyConfig>>);

fn read_file_partial(
    path: &Path,
    sets: &[Override],
    print: bool,
) -> Result<(TopologyConfig, Option<String>), Partial> {
    read_file_for(path, sets, print, None)
}

/// The variable that holds the absolute folder of the topology file named
/// to squall, for paths that a plugin must not take relative to the working
/// directory (a state backend's `path`: a backend has no task context to
/// resolve a relative path with).
pub const TOPOLOGY_DIR_VAR: &str = "SQUALL_TOPOLOGY_DIR";

/// The absolute folder of the topology file `file` (symbolic links resolved
/// when it exists), as [`TOPOLOGY_DIR_VAR`] holds it.
pub fn topology_dir(file: &Path) -> String {
    let dir = match file.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let dir = dir.canonicalize().or_else(|_| std::path::absolute(dir)).unwrap_or(dir.to_path_buf());
    dir.to_string_lossy().into_owned()
}

/// The process environment, with [`group::PARTITION_VAR`] set to
/// `partition` (a group's partition), or to `0` when the environment does
/// not set it, and [`TOPOLOGY_DIR_VAR`] to the folder of `file`.
fn environment(partition: Option<u32>, file: &Path) -> impl Fn(&str) -> Option<String> {
    let dir = topology_dir(file);
    move |name| match (name == group::PARTITION_VAR, partition) {
        _ if name == TOPOLOGY_DIR_VAR => Some(dir.clone()),
        (true, Some(k)) => Some(k.to_string()),
        (true, None) => Some(std::env::var(name).unwrap_or_else(|_| "0".to_owned())),
        (false, _) => std::env::var(name).ok(),
    }
}

/// [`load_with`] for partition `partition` of a group:
/// `${SQUALL_PARTITION}` is its number.
///
/// # Errors
///
/// As [`load_with`].
pub fn load_partition(
    path: &Path,
    sets: &[Override],
    partition: u32,
) -> Result<TopologyConfig, Diagnostics> {
    read_file_for(path, sets, false, Some(partition)).map(|(config, _)| config).map_err(|(d, _)| d)
}

fn read_file_for(
    path: &Path,
    sets: &[Override],
    print: bool,
    partition: Option<u32>,
) -> Result<(TopologyConfig, Option<String>), Partial> {
    match read_topology_file(path) {
        Ok(text) => read_composed_partial(text, path, sets, &environment(partition, path), print),
        Err(e) => {
            let mut diags = Diagnostics::new();
            diags.push(path, Loc::START, format!("cannot read topology file: {e}"), None);
            Err((diags, None))
        }
    }
}

/// The largest topology file `load` reads: 16 MiB.
pub const MAX_TOPOLOGY_BYTES: u64 = 16 << 20;

/// Reads a regular file of at most [`MAX_TOPOLOGY_BYTES`], without ever
/// blocking on a FIFO.
fn read_topology_file(path: &Path) -> std::io::Result<String> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let not_regular = || std::io::Error::other("not a regular file");
    if !std::fs::metadata(path)?.is_file() {
        return Err(not_regular());
    }
    let file = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(path)?;
    if !file.metadata()?.is_file() {
        return Err(not_regular());
    }
    let mut text = String::new();
    file.take(MAX_TOPOLOGY_BYTES + 1).read_to_string(&mut text)?;
    if text.len() as u64 > MAX_TOPOLOGY_BYTES {
        return Err(std::io::Error::other(format!("larger than {} MiB", MAX_TOPOLOGY_BYTES >> 20)));
    }
    Ok(text)
}

/// Reads and validates topology `text`, as if it were the content of `file`
/// (which names it in diagnostics and anchors relative paths). Interpolates from
/// the process environment.
///
/// # Errors
///
/// Every problem in the text, each with its line and column.
pub fn parse_str(text: &str, file: &Path) -> Result<TopologyConfig, Diagnostics> {
    let dir = topology_dir(file);
    parse_str_with_env(text, file, &|name| {
        if name == TOPOLOGY_DIR_VAR {
            Some(dir.clone())
        } else {
            std::env::var(name).ok()
        }
    })
}

/// [`parse_str`] with the environment given as a lookup function, for tests.
///
/// # Errors
///
/// Every problem in the text, each with its line and column.
pub fn parse_str_with_env(
    text: &str,
    file: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<TopologyConfig, Diagnostics> {
    read_composed(text.to_string(), file, &[], env, false).map(|(config, _)| config)
}

/// Every stage after reading the topology file's `text`: compose, read,
/// validate; and, when `print` is set, render the composed document.
fn read_composed(
    text: String,
    file: &Path,
    sets: &[Override],
    env: &dyn Fn(&str) -> Option<String>,
    print: bool,
) -> Result<(TopologyConfig, Option<String>), Diagnostics> {
    read_composed_partial(text, file, sets, env, print).map_err(|(diags, _)| diags)
}

/// [`read_composed`], also returning what was read when there are errors.
fn read_composed_partial(
    text: String,
    file: &Path,
    sets: &[Override],
    env: &dyn Fn(&str) -> Option<String>,
    print: bool,
) -> Result<(TopologyConfig, Option<String>), Partial> {
    let tree = compose::read_tree(text, file, env).map_err(|d| (d, None))?;
    let mut map = source::SourceMap::new();
    let order = compose::add_sources(tree, &mut map);
    let set_ids = overrides::add_sources(sets, &mut map);
    let mut doc = compose::merge(&map, &order).map_err(|d| (d, None))?;
    let mut diags = overrides::apply(&mut doc, &map, &set_ids, sets);
    let mut w = Walker::new(&map, env);
    let config = read_document(&mut w, &doc, file, map.names());
    validate::check(&mut w, &config);
    validate::check_size(&mut w, &config);
    window::check_window_timeouts(&mut w, &config);
    window::check_count_windows(&mut w, &config);
    diags.append(w.finish());
    diags.sort();
    if !diags.is_empty() {
        return Err((diags, Some(Box::new(config))));
    }
    let printed = print.then(|| print::render(&doc, &config.plugins));
    Ok((config, printed))
}

/// Reads every top-level table. `[plugins]` goes first, whatever its place in
/// the file, so that component references can be checked against the aliases.
fn read_document(
    w: &mut Walker<'_>,
    doc: &DeTable<'_>,
    file: &Path,
    sources: Sources,
) -> TopologyConfig {
    let dir = base_dir(file);
    w.check_keys(doc, keys::TOP, "the top-level table");
    let stem = file.file_stem().map_or_else(|| "topology".into(), |s| s.to_string_lossy());
    let plugins = settings::read_plugins(w, doc.get("plugins"));
    let mut topology = settings::read_topology(w, doc.get("topology"), &stem);
    let wait = wait::read_wait_defaults(w, doc.get("wait"));
    topology.settings.acker_spin_micros = match wait.bolt {
        WaitSpec::Progressive { spin_micros, .. } => spin_micros,
        _ => 0,
    };
    let config = TopologyConfig {
        file: file.to_path_buf(),
        sources,
        dir,
        name: topology.name,
        name_loc: topology.name_loc,
        settings: topology.settings,
        plugins,
        wait,
        spouts: components::read_spouts(w, doc.get("spouts")),
        bolts: components::read_bolts(w, doc.get("bolts")),
        state: None,
        tests: Vec::new(),
        group: None,
        budget_loc: topology.budget_loc,
    };
    let mut config = config;
    read_dependent(w, doc, &mut config);
    config
}

/// The directory relative paths in `file` are resolved against: its own
/// (`.` for a bare file name).
fn base_dir(file: &Path) -> PathBuf {
    match file.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// Reads the tables checked against what the rest declared: `[state]`
/// (its interval against the message timeout), `[[tests]]` (against the
/// component names) and `[group]` (against the state; it may add a plugin).
fn read_dependent(w: &mut Walker<'_>, doc: &DeTable<'_>, config: &mut TopologyConfig) {
    config.state = state::read_state(w, doc.get("state"), &config.name);
    let names = test_cases::Names {
        spouts: config.spouts.iter().map(|s| s.decl.name.as_str()).collect(),
        bolts: config.bolts.iter().map(|b| b.decl.name.as_str()).collect(),
    };
    let tests = test_cases::read_tests(w, doc.get("tests"), &names);
    config.tests = tests;
    if let Some(decl) = &config.state {
        let s = &config.settings;
        state::check_interval(w, decl, s.message_timeout_secs, s.enable_message_timeouts);
    }
    config.group = group::read_group(w, doc.get("group"));
    if let Some(g) = &config.group {
        group::check_group_state(w, g, config.state.as_ref());
        config.plugins.extend(g.implicit_plugin.clone());
    }
}

/// The parser's error, at the parser's position.
fn syntax_error(text: &str, file: &Path, error: &toml::de::Error) -> Diagnostics {
    let span = error.span().unwrap_or(0..0);
    let loc = diagnostic::LineIndex::new(text).loc(span.start);
    let mut message = format!("invalid TOML: {}", error.message().trim().replace('\n', " "));
    if error.message() == "duplicate key" {
        if let Some(key) = text.get(span).filter(|k| !k.is_empty()) {
            let quoted = key.starts_with(['"', '\'']);
            message =
                if quoted { format!("{message} {key}") } else { format!("{message} \"{key}\"") };
        }
    }
    let mut diags = Diagnostics::new();
    diags.push(file, loc, message, None);
    diags
}

#[cfg(test)]
mod compose_tests;
#[cfg(test)]
mod tests;
