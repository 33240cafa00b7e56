//! `squall inspect`.

use std::path::Path;
use std::process::ExitCode;

use super::EXIT_UNAVAILABLE;
use crate::plugin::load_library;

/// Prints a library's catalogue: components, kinds, streams, fields, contract version.
pub fn inspect(path: &Path) -> anyhow::Result<ExitCode> {
    let alias =
        path.file_stem().map_or_else(|| "plugin".to_owned(), |s| s.to_string_lossy().into_owned());
    let library = match load_library(&alias, path, None) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("error: {e}");
            return Ok(ExitCode::from(EXIT_UNAVAILABLE));
        }
    };
    let c = &library.catalogue;
    println!("plugin {} {} (contract {})", c.plugin, c.version, c.contract_version);
    println!("path   {}", path.display());
    for d in c.components.iter() {
        let basic = if d.auto_ack { " (basic: acked by the host)" } else { "" };
        println!("  {:<14} {}{}", d.kind.name(), d.name, basic);
        if !d.description.is_empty() {
            println!("  {:<14}   {}", "", d.description);
        }
        for s in d.outputs.iter() {
            let fields: Vec<&str> = s.fields.iter().map(|f| f.as_str()).collect();
            let direct = if s.direct { " direct" } else { "" };
            println!("  {:<14}   stream {}{direct} [{}]", "", s.name, fields.join(", "));
        }
    }
    Ok(ExitCode::SUCCESS)
}
