//! `squall inspect`.

use std::path::Path;
use std::process::ExitCode;

use super::EXIT_UNAVAILABLE;
use crate::plugin::{escape_controls, load_library};

/// Prints a library's catalogue: components, kinds, streams, fields, contract version.
///
/// A bare file name (`squall inspect libx.so`) means the file in the current
/// folder: the loader opens the path itself and hands `dlopen` its open
/// descriptor, so `LD_LIBRARY_PATH` and the system folders are never
/// searched. Everything printed from the catalogue has its control
/// characters escaped: a library cannot write terminal escapes through it.
pub fn inspect(path: &Path) -> anyhow::Result<ExitCode> {
    let alias = path
        .file_stem()
        .map_or_else(|| "plugin".to_owned(), |s| escape_controls(&s.to_string_lossy()));
    let library = match load_library(&alias, path, None) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("error: {e}");
            return Ok(ExitCode::from(EXIT_UNAVAILABLE));
        }
    };
    let c = &library.catalogue;
    let e = |text: &str| escape_controls(text);
    println!("plugin {} {} (contract {})", e(&c.plugin), e(&c.version), e(&c.contract_version));
    println!("path   {}", e(&path.to_string_lossy()));
    for d in c.components.iter() {
        let basic = if d.auto_ack { " (basic: acked by the host)" } else { "" };
        println!("  {:<14} {}{}", d.kind.name(), e(&d.name), basic);
        if !d.description.is_empty() {
            println!("  {:<14}   {}", "", e(&d.description));
        }
        for s in d.outputs.iter() {
            let fields: Vec<String> = s.fields.iter().map(|f| e(f)).collect();
            let direct = if s.direct { " direct" } else { "" };
            println!("  {:<14}   stream {}{direct} [{}]", "", e(&s.name), fields.join(", "));
        }
    }
    Ok(ExitCode::SUCCESS)
}
