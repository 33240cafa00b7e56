//! `squall validate`.

use std::path::Path;

use super::{load, Failure};

/// Loads the plugins, checks the topology, and builds every instance
/// (constructors check their config) without starting anything.
pub fn validate(path: &Path) -> Result<(), Failure> {
    let topology = load(path)?;
    super::instantiate(&topology)?;
    let tasks: u32 = topology.components.iter().map(|c| c.parallelism()).sum();
    println!(
        "{}: topology \"{}\" is valid ({} components, {} tasks, {} acker executors)",
        path.display(),
        topology.name,
        topology.components.len(),
        tasks,
        topology.settings.acker_executors
    );
    for c in &topology.components {
        for s in &c.outputs {
            for sub in &s.subscribers {
                // Stream names come from the plugin's catalogue, not the
                // checked topology file: escape what a library could smuggle in.
                println!(
                    "  {} --{}:{:?}--> {}",
                    c.name,
                    crate::plugin::escape_controls(&s.decl.name),
                    sub.grouping,
                    topology.components[sub.component].name
                );
            }
        }
    }
    Ok(())
}
