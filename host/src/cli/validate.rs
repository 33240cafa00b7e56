//! `squall validate`.

use std::io::Write as _;
use std::path::Path;

use super::{bind, Failure};
use crate::config::Override;
use crate::topology::Topology;

/// Loads the plugins, checks the topology and the files `[topology.http]`
/// names (token files, TLS certificate and key), and builds every instance
/// (constructors check their config) without starting anything.
///
/// With `print`, the effective topology (after includes and `sets`) is
/// printed as TOML on stdout as soon as the file checks pass, before the
/// plugins are loaded; the summary then goes to stderr, so that stdout is
/// one TOML document.
pub fn validate(path: &Path, sets: &[Override], print: bool) -> Result<(), Failure> {
    let config = if print {
        let (config, text) = crate::config::load_effective(path, sets).map_err(Failure::Config)?;
        write_stdout(&text)?;
        config
    } else {
        crate::config::load_partial(path, sets)
            .map_err(|(diags, config)| super::with_plugin_checks(diags, config.as_deref()))?
    };
    // The token and TLS files, read as `squall run` reads them: a missing
    // or unusable file is exit 78 here too, not only once the host starts.
    crate::http::check_files(&config.settings.http_options).map_err(Failure::http_config)?;
    let topology = bind(&config)?;
    super::instantiate(&topology)?;
    let summary = summary(path, &topology);
    if print {
        eprint!("{summary}");
        Ok(())
    } else {
        write_stdout(&summary)
    }
}

/// Writes `text` on stdout; a closed stdout (`| head`) ends it quietly.
fn write_stdout(text: &str) -> Result<(), Failure> {
    match std::io::stdout().lock().write_all(text.as_bytes()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(()),
    }
}

/// "… is valid (…)", then one line per edge.
fn summary(path: &Path, topology: &Topology) -> String {
    use std::fmt::Write as _;
    let tasks: u32 = topology.components.iter().map(|c| c.parallelism()).sum();
    let mut out = format!(
        "{}: topology \"{}\" is valid ({} components, {} tasks, {} acker executors)\n",
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
                let fields: Vec<&str> = s.decl.fields.iter().map(|f| f.as_str()).collect();
                let _ = writeln!(
                    out,
                    "  {} --{}:{}--> {}",
                    c.name,
                    crate::plugin::escape_controls(&s.decl.name),
                    crate::plugin::escape_controls(&sub.grouping.label(&fields)),
                    topology.components[sub.component].name
                );
            }
        }
    }
    out
}
