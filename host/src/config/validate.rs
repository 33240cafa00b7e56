//! Checks across components, run after every table has been read: at least one
//! spout, unique names, inputs that name a declared component, and no cycle among
//! bolts. Like the readers, each `check_*` pushes its errors and carries on.
//!
//! Checks that need the loaded plugins (the component exists in its library, the
//! stream is declared, a grouping field is an output field) run later, in
//! `topology`, from the [`Loc`](super::Loc)s carried in the config.

use std::collections::hash_map::Entry;
use std::collections::{HashMap, HashSet, VecDeque};

use super::diagnostic::{Loc, LISTED_PER_KIND};
use super::limits;
use super::model::BoltDecl;
use super::suggest::did_you_mean;
use super::walk::Walker;
use super::TopologyConfig;

/// Runs every cross-component check.
pub(crate) fn check(w: &mut Walker<'_>, config: &TopologyConfig) {
    check_has_spout(w, config);
    check_unique_names(w, config);
    check_inputs(w, config);
    check_cycles(w, &config.bolts);
}

/// The topology's size: at most [`limits::MAX_TOTAL_TASKS`] tasks, reported
/// at the component that crosses the limit, and an estimated memory need
/// ([`limits::estimate`]) within `memory_budget_mib`, reported at the
/// config's `budget_loc`. What plugins buffer is added once they are
/// loaded ([`budget_error`] at bind).
pub(crate) fn check_size(w: &mut Walker<'_>, config: &TopologyConfig) {
    check_task_count(w, config);
    if let Some((message, help)) = budget_error(config, &[]) {
        w.error_at(config.budget_loc, message, Some(help));
    }
}

/// What one component's tasks buffer outside the host's queues, as its
/// plugin declared (contract 1.3): its name, its reference, and the bytes
/// of all its tasks.
pub(crate) struct PluginBuffers {
    /// The component's name in the topology.
    pub name: String,
    /// `alias::Component`.
    pub reference: String,
    /// Tasks × the bytes one task declared.
    pub bytes: u64,
}

/// The error and its help when the topology is estimated to need more
/// than `memory_budget_mib`, with `buffers` (what plugins declared they
/// buffer) added to the host's own estimate; `None` when it fits.
pub(crate) fn budget_error(
    config: &TopologyConfig,
    buffers: &[PluginBuffers],
) -> Option<(String, String)> {
    let settings = &config.settings;
    let size = limits::Size {
        tasks: config
            .spouts
            .iter()
            .map(|s| u64::from(s.decl.parallelism))
            .chain(config.bolts.iter().map(|b| u64::from(b.decl.parallelism)))
            .sum(),
        bolt_tasks: config.bolts.iter().map(|b| u64::from(b.decl.parallelism)).sum(),
        acker_executors: u64::from(settings.acker_executors),
        receive_buffer_size: settings.receive_buffer_size as u64,
        receive_buffer_bytes: settings.receive_buffer_bytes,
        pending_roots: pending_roots(config),
        plugin_buffers: buffers.iter().map(|b| b.bytes).fold(0, u64::saturating_add),
    };
    let estimate = limits::estimate(size);
    let budget = settings.memory_budget_mib.saturating_mul(1 << 20);
    if estimate.total() <= budget {
        return None;
    }
    let mut help = "lower parallelism, receive_buffer_size, receive_buffer_bytes or \
                    max_spout_pending"
        .to_string();
    if !buffers.is_empty() {
        help.push_str(", or what the plugins buffer (their config)");
    }
    help.push_str(", or raise memory_budget_mib in [topology]");
    Some((over_budget(config, &size, &estimate, buffers), help))
}

/// Counts the topology's tasks, reporting at the component that takes the
/// count over [`limits::MAX_TOTAL_TASKS`].
fn check_task_count(w: &mut Walker<'_>, config: &TopologyConfig) {
    let components = config
        .spouts
        .iter()
        .map(|s| (s.decl.parallelism, s.decl.loc))
        .chain(config.bolts.iter().map(|b| (b.decl.parallelism, b.decl.loc)));
    let mut tasks = 0u64;
    for (parallelism, loc) in components {
        let before = tasks;
        tasks += u64::from(parallelism);
        if before <= limits::MAX_TOTAL_TASKS && tasks > limits::MAX_TOTAL_TASKS {
            let message =
                format!("the topology has more than {} tasks in all", limits::MAX_TOTAL_TASKS);
            let help = "lower the parallelism of its spouts and bolts".to_string();
            w.error_at(loc, message, Some(help));
        }
    }
}

/// How many tuple trees the spouts may have pending at once: each task's
/// `max_spout_pending` (else `receive_buffer_size`) times its tasks; none
/// without ackers.
fn pending_roots(config: &TopologyConfig) -> u64 {
    let settings = &config.settings;
    if settings.acker_executors == 0 {
        return 0;
    }
    config
        .spouts
        .iter()
        .map(|s| {
            let per_task = s
                .effective_max_spout_pending(settings)
                .map_or(settings.receive_buffer_size as u64, u64::from);
            u64::from(s.decl.parallelism).saturating_mul(per_task)
        })
        .fold(0u64, u64::saturating_add)
}

/// The error for a topology estimated to need more than its memory budget:
/// the need, the budget, and what each part of the estimate takes.
fn over_budget(
    config: &TopologyConfig,
    size: &limits::Size,
    estimate: &limits::Estimate,
    buffers: &[PluginBuffers],
) -> String {
    let settings = &config.settings;
    let mib = |b: u64| b.div_ceil(1 << 20);
    let threads = size.tasks + u64::from(settings.acker_executors);
    let (bolt_tasks, pending_roots) = (size.bolt_tasks, size.pending_roots);
    let mut message = format!(
        "the topology is estimated to need {} MiB, more than memory_budget_mib = {}: \
         {} MiB for {threads} task and acker threads (about {:.1} MiB each, as measured), \
         {} MiB for {threads} queues of receive_buffer_size {} at {} B a tuple, \
         {} MiB for {bolt_tasks} bolt queues holding receive_buffer_bytes = {}, \
         {} MiB for {pending_roots} pending trees at {} B, \
         {} MiB for the buffers of {} taps",
        mib(estimate.total()),
        settings.memory_budget_mib,
        mib(estimate.threads),
        estimate.threads as f64 / threads.max(1) as f64 / f64::from(1u32 << 20),
        mib(estimate.slots),
        settings.receive_buffer_size,
        limits::QUEUE_SLOT_BYTES,
        mib(estimate.values),
        settings.receive_buffer_bytes,
        mib(estimate.pending),
        limits::PENDING_ENTRY_BYTES,
        mib(estimate.taps),
        limits::MAX_TAPS,
    );
    if !buffers.is_empty() {
        let each: Vec<String> = buffers
            .iter()
            .map(|b| format!("{} MiB in \"{}\" ({})", mib(b.bytes), b.name, b.reference))
            .collect();
        message.push_str(&format!(
            ", {} MiB that plugins declare they buffer: {}",
            mib(estimate.plugins),
            each.join(", ")
        ));
    }
    message
}

fn check_has_spout(w: &mut Walker<'_>, config: &TopologyConfig) {
    if config.spouts.is_empty() {
        let help = "declare one: [spouts.NAME] with component = \"alias::Component\"";
        w.error_at(Loc::START, "topology has no spouts".to_string(), Some(help.to_string()));
    }
}

/// Spouts and bolts share one namespace: an input's `from` must be unambiguous.
fn check_unique_names(w: &mut Walker<'_>, config: &TopologyConfig) {
    let spouts: HashSet<&str> = config.spouts.iter().map(|s| s.decl.name.as_str()).collect();
    for bolt in config.bolts.iter().filter(|b| spouts.contains(b.decl.name.as_str())) {
        let message = format!("\"{}\" is declared both as a spout and as a bolt", bolt.decl.name);
        let help = "give the bolt or the spout another name".to_string();
        w.error_at(bolt.decl.loc, message, Some(help));
    }
}

/// Every `from` names a declared component, and no bolt subscribes to the same
/// stream of the same component twice.
///
/// Linear in the number of inputs and names: a name is looked up in a set,
/// and a "did you mean" (a distance to every name) is worked out only for
/// the unknown names that are shown ([`LISTED_PER_KIND`], the first by
/// position); 12,000 unknown names among 12,000 bolts took 33 s when each
/// got one.
fn check_inputs(w: &mut Walker<'_>, config: &TopologyConfig) {
    let names: Vec<&str> = config
        .spouts
        .iter()
        .map(|s| s.decl.name.as_str())
        .chain(config.bolts.iter().map(|b| b.decl.name.as_str()))
        .collect();
    let known: HashSet<&str> = names.iter().copied().collect();
    let mut unknown = Vec::new();
    for bolt in &config.bolts {
        let mut seen: HashSet<(&str, &str)> = HashSet::new();
        for input in &bolt.inputs {
            if !known.contains(input.from.as_str()) {
                unknown.push((input, bolt.decl.name.as_str()));
            } else if !seen.insert((input.from.as_str(), input.stream.as_str())) {
                let message = format!(
                    "bolt \"{}\" subscribes to stream \"{}\" of \"{}\" twice",
                    bolt.decl.name, input.stream, input.from
                );
                w.error_at(input.from_loc, message, Some("remove one of the inputs".to_string()));
            }
        }
    }
    // In the order they are shown: by file, then position.
    unknown.sort_by(|(a, _), (b, _)| {
        (w.file_of(a.from_loc), a.from_loc).cmp(&(w.file_of(b.from_loc), b.from_loc))
    });
    for (i, (input, bolt)) in unknown.into_iter().enumerate() {
        let message =
            format!("unknown spout or bolt \"{}\" in inputs of bolt \"{bolt}\"", input.from);
        let help = (i < LISTED_PER_KIND)
            .then(|| did_you_mean(&input.from, names.iter().copied()))
            .flatten();
        w.error_at(input.from_loc, message, help);
    }
}

/// Reports each self-subscription, and one cycle per strongly connected group of
/// bolts, at the `from` of the input that closes it.
fn check_cycles(w: &mut Walker<'_>, bolts: &[BoltDecl]) {
    let graph = BoltGraph::new(bolts);
    for bolt in bolts {
        if let Some(input) = bolt.inputs.iter().find(|i| i.from == bolt.decl.name) {
            w.error_at(
                input.from_loc,
                format!("bolt \"{}\" subscribes to itself", bolt.decl.name),
                None,
            );
        }
    }
    for component in strongly_connected(&graph.successors) {
        if component.len() < 2 {
            continue;
        }
        let Some(cycle) = graph.cycle_through(&component) else { continue };
        // `[first, …, last, first]`: the input of `first` that names `last` closes it.
        let &[first, .., last, _] = cycle.as_slice() else { continue };
        let Some(loc) = graph.edge_loc(last, first) else { continue };
        let names: Vec<&str> = cycle.iter().map(|&b| bolts[b].decl.name.as_str()).collect();
        w.error_at(loc, format!("bolts form a cycle: {}", names.join(" -> ")), None);
    }
}

/// Bolts as nodes (indices into the bolt list, i.e. file order), with an edge
/// `a -> b` when `b` subscribes to `a`: the direction tuples flow.
struct BoltGraph {
    successors: Vec<Vec<usize>>,
    /// `from_loc` of the first input of `b` naming `a`, by `(a, b)`.
    edge_locs: HashMap<(usize, usize), Loc>,
}

impl BoltGraph {
    fn new(bolts: &[BoltDecl]) -> Self {
        let index: HashMap<&str, usize> =
            bolts.iter().enumerate().map(|(i, b)| (b.decl.name.as_str(), i)).collect();
        let mut successors = vec![Vec::new(); bolts.len()];
        let mut edge_locs = HashMap::new();
        for (b, bolt) in bolts.iter().enumerate() {
            for input in &bolt.inputs {
                let Some(&a) = index.get(input.from.as_str()) else { continue };
                // The first input naming `a` keeps its location; a second one
                // (another stream) adds no edge.
                if let Entry::Vacant(e) = edge_locs.entry((a, b)) {
                    e.insert(input.from_loc);
                    successors[a].push(b);
                }
            }
        }
        BoltGraph { successors, edge_locs }
    }

    fn edge_loc(&self, from: usize, to: usize) -> Option<Loc> {
        self.edge_locs.get(&(from, to)).copied()
    }

    /// A shortest cycle through the component's first bolt (in file order), as
    /// `[first, …, first]`; it exists because the component is strongly connected.
    fn cycle_through(&self, component: &[usize]) -> Option<Vec<usize>> {
        let members: HashSet<usize> = component.iter().copied().collect();
        let start = *component.iter().min()?;
        let mut parent: HashMap<usize, usize> = HashMap::new();
        let mut queue = VecDeque::from([start]);
        while let Some(node) = queue.pop_front() {
            for &next in &self.successors[node] {
                if next == node || !members.contains(&next) {
                    continue;
                }
                if next == start {
                    let mut path = vec![start, node];
                    let mut at = node;
                    while at != start {
                        // Every node reached from `start` has a parent.
                        at = *parent.get(&at)?;
                        path.push(at);
                    }
                    path.reverse();
                    return Some(path);
                }
                if let Entry::Vacant(e) = parent.entry(next) {
                    e.insert(node);
                    queue.push_back(next);
                }
            }
        }
        None
    }
}

/// Tarjan's strongly connected components, iterative so that a topology with
/// many bolts cannot overflow the stack. Components come out in reverse
/// topological order; each lists its nodes in no particular order.
fn strongly_connected(successors: &[Vec<usize>]) -> Vec<Vec<usize>> {
    let n = successors.len();
    let mut t = Tarjan {
        index: vec![None; n],
        low: vec![0; n],
        on_stack: vec![false; n],
        stack: Vec::new(),
        components: Vec::new(),
        next_index: 0,
    };
    for root in 0..n {
        if t.index[root].is_none() {
            t.search(successors, root);
        }
    }
    t.components
}

/// The state of Tarjan's search: each node's discovery index and low link,
/// the stack of nodes not yet in a component, and the components found.
struct Tarjan {
    index: Vec<Option<usize>>,
    low: Vec<usize>,
    on_stack: Vec<bool>,
    stack: Vec<usize>,
    components: Vec<Vec<usize>>,
    next_index: usize,
}

impl Tarjan {
    /// The depth-first search from `root`, with an explicit stack of frames
    /// (node, how many of its successors have been visited).
    fn search(&mut self, successors: &[Vec<usize>], root: usize) {
        let mut frames = vec![(root, 0)];
        self.discover(root);
        while let Some(frame) = frames.last_mut() {
            let (v, visited) = *frame;
            if let Some(&s) = successors[v].get(visited) {
                frame.1 += 1;
                match self.index[s] {
                    None => {
                        self.discover(s);
                        frames.push((s, 0));
                    }
                    Some(si) if self.on_stack[s] => self.low[v] = self.low[v].min(si),
                    Some(_) => {}
                }
                continue;
            }
            frames.pop();
            if let Some(&(parent, _)) = frames.last() {
                self.low[parent] = self.low[parent].min(self.low[v]);
            }
            if self.index[v] == Some(self.low[v]) {
                self.close(v);
            }
        }
    }

    /// Gives `v` the next discovery index and pushes it on the stack.
    fn discover(&mut self, v: usize) {
        self.index[v] = Some(self.next_index);
        self.low[v] = self.next_index;
        self.next_index += 1;
        self.stack.push(v);
        self.on_stack[v] = true;
    }

    /// Pops the component whose root is `v`: the stack down to `v`.
    fn close(&mut self, v: usize) {
        let mut component = Vec::new();
        while let Some(x) = self.stack.pop() {
            self.on_stack[x] = false;
            component.push(x);
            if x == v {
                break;
            }
        }
        self.components.push(component);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sorted(mut components: Vec<Vec<usize>>) -> Vec<Vec<usize>> {
        for c in &mut components {
            c.sort_unstable();
        }
        components.sort();
        components
    }

    #[test]
    fn a_chain_has_only_single_node_components() {
        let graph = vec![vec![1], vec![2], vec![]];
        assert_eq!(sorted(strongly_connected(&graph)), vec![vec![0], vec![1], vec![2]]);
    }

    #[test]
    fn two_separate_cycles_are_two_components() {
        // 0 -> 1 -> 0, 2 -> 3 -> 4 -> 2, 1 -> 2
        let graph = vec![vec![1], vec![0, 2], vec![3], vec![4], vec![2]];
        assert_eq!(sorted(strongly_connected(&graph)), vec![vec![0, 1], vec![2, 3, 4]]);
    }

    #[test]
    fn a_long_chain_does_not_overflow_the_stack() {
        let n = 200_000;
        let graph: Vec<Vec<usize>> =
            (0..n).map(|i| if i + 1 < n { vec![i + 1] } else { vec![0] }).collect();
        let components = strongly_connected(&graph);
        assert_eq!(components.len(), 1);
        assert_eq!(components[0].len(), n);
    }
}
