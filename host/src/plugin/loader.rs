//! Opening one plugin library and reading its catalogue.

use std::path::{Path, PathBuf};

use abi_stable::library::{AbiHeaderRef, LibraryError, ROOT_MODULE_LOADER_NAME_WITH_NUL};
use libloading::os::unix::{Library as UnixLibrary, RTLD_LOCAL, RTLD_NOW};
use sha2::{Digest, Sha256};
use squall_plugin_api::abi::{Catalogue, ComponentDescriptor, PluginRoot_Ref, CONTRACT_VERSION};

use super::LoadError;

/// A loaded, checked plugin library and its catalogue.
#[derive(Debug)]
pub struct Library {
    /// The alias the topology gave it.
    pub alias: String,
    /// The path it was loaded from.
    pub path: PathBuf,
    /// What it exports.
    pub catalogue: Catalogue,
}

impl Library {
    /// The component called `name`, if the library exports one.
    pub fn component(&self, name: &str) -> Option<&ComponentDescriptor> {
        self.catalogue.components.iter().find(|c| c.name.as_str() == name)
    }
}

/// Loads the plugin library at `path`, checks its contract, and reads its catalogue.
///
/// # Errors
/// A [`LoadError`] naming `alias` and `path` for a missing file, a digest
/// mismatch, a file that is not a shared library, a library that is not a
/// squall plugin, an incompatible contract, or a failing catalogue.
pub fn load_library(alias: &str, path: &Path, sha256: Option<&str>) -> Result<Library, LoadError> {
    let (alias_s, path_b) = (alias.to_owned(), path.to_path_buf());
    if !path.exists() {
        return Err(LoadError::Missing { alias: alias_s, path: path_b });
    }
    if let Some(expected) = sha256 {
        check_digest(alias, path, expected)?;
    }
    let root = open_root(alias, path)?;
    let catalogue = (root.catalogue())().into_result().map_err(|e| LoadError::Catalogue {
        alias: alias_s.clone(),
        path: path_b.clone(),
        detail: e.to_string(),
    })?;
    tracing::debug!(alias, path = %path.display(), plugin = %catalogue.plugin, version = %catalogue.version, "loaded plugin");
    Ok(Library { alias: alias_s, path: path_b, catalogue })
}

fn check_digest(alias: &str, path: &Path, expected: &str) -> Result<(), LoadError> {
    let bytes = std::fs::read(path).map_err(|source| LoadError::Read {
        alias: alias.to_owned(),
        path: path.to_path_buf(),
        source,
    })?;
    let found: String = Sha256::digest(&bytes).iter().map(|b| format!("{b:02x}")).collect();
    if found.eq_ignore_ascii_case(expected) {
        return Ok(());
    }
    Err(LoadError::Checksum {
        alias: alias.to_owned(),
        path: path.to_path_buf(),
        expected: expected.to_owned(),
        found,
    })
}

/// Opens the library with `RTLD_NOW` (so unresolved symbols fail here, not
/// mid-stream), finds abi_stable's header, and lets abi_stable check it.
fn open_root(alias: &str, path: &Path) -> Result<PluginRoot_Ref, LoadError> {
    // SAFETY: loading a library runs its initialisers. Plugins are trusted
    // code by design (DESIGN.md: operators choose which libraries to load);
    // the ABI checks below keep us from calling into an incompatible one.
    let library = unsafe { UnixLibrary::open(Some(path), RTLD_NOW | RTLD_LOCAL) }.map_err(|e| {
        LoadError::NotALibrary {
            alias: alias.to_owned(),
            path: path.to_path_buf(),
            detail: dl_detail(&e),
        }
    })?;
    // SAFETY: the symbol, when present, is abi_stable's `LibHeader` static,
    // whose first field is an `AbiHeader`; `AbiHeaderRef` is a reference to
    // it. abi_stable's own loader reads it the same way.
    let header =
        unsafe { library.get::<AbiHeaderRef>(ROOT_MODULE_LOADER_NAME_WITH_NUL.as_bytes()) }
            .map(|symbol| *symbol)
            .map_err(|_| LoadError::NotAPlugin {
                alias: alias.to_owned(),
                path: path.to_path_buf(),
            })?;
    // Never dlclose: vtables and allocators of plugin-made values must stay mapped.
    std::mem::forget(library);
    let incompatible = |e: LibraryError| LoadError::Incompatible {
        alias: alias.to_owned(),
        path: path.to_path_buf(),
        host_contract: CONTRACT_VERSION,
        detail: condense(&e),
    };
    let header = header.upgrade().map_err(incompatible)?;
    header.init_root_module::<PluginRoot_Ref>().map_err(incompatible)
}

fn dl_detail(e: &libloading::Error) -> String {
    let text = e.to_string();
    // dlerror() repeats the path; keep the part after the last ": ".
    text.rsplit(": ").next().unwrap_or(&text).to_owned()
}

/// Condenses an abi_stable error into one line.
///
/// abi_stable's layout report runs to tens of kilobytes; users need the first
/// mismatching item: `path.to.field: reason (expected X, found Y)`. The full
/// report goes to the debug log.
fn condense(e: &LibraryError) -> String {
    match e {
        LibraryError::IncompatibleVersionNumber { expected_version, actual_version, .. } => {
            format!("the library was built against contract {actual_version}, this host speaks {expected_version}")
        }
        LibraryError::InvalidAbiHeader(_) => {
            "the library was built with an incompatible abi_stable version".to_owned()
        }
        LibraryError::AbiInstability(_) => {
            let full = e.to_string();
            tracing::debug!(report = %full, "full abi_stable layout report");
            first_layout_mismatch(&full).unwrap_or_else(|| "type layouts differ".to_owned())
        }
        other => {
            let text = other.to_string();
            text.lines().find(|l| !l.trim().is_empty()).unwrap_or("unknown error").trim().to_owned()
        }
    }
}

/// Finds the first `Error:` entry in abi_stable's layout report and the field
/// path that leads to it.
fn first_layout_mismatch(report: &str) -> Option<String> {
    let mut path: Vec<&str> = Vec::new();
    let mut collecting = false;
    let mut lines = report.lines().map(str::trim);
    while let Some(line) = lines.next() {
        if line.ends_with("error(s)inside:") {
            collecting = true;
            path.clear();
        } else if line == "Layout of expected type:" {
            collecting = false;
        } else if collecting {
            if let Some(field) = line.strip_prefix("field_name:") {
                path.push(field.trim());
            }
        } else if let Some(kind) = line.strip_prefix("Error:") {
            // The report continues with "Expected:", the value, "Found:", the value.
            let rest: Vec<&str> = lines.by_ref().take(4).collect();
            let expected = rest.get(1).copied().unwrap_or("?");
            let found = rest.get(3).copied().unwrap_or("?");
            let at = if path.is_empty() { "root module".to_owned() } else { path.join(".") };
            return Some(format!("{at}: {} (expected {expected}, found {found})", kind.trim()));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_file_is_reported_with_alias_and_path() {
        let e = load_library("ex", Path::new("/nonexistent/libnope.so"), None).unwrap_err();
        assert_eq!(e.to_string(), "plugin \"ex\": /nonexistent/libnope.so does not exist");
    }

    #[test]
    fn a_text_file_is_not_a_library() {
        let dir = std::env::temp_dir().join(format!("squall-loader-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("libfake.so");
        std::fs::write(&path, "not an ELF file").unwrap();
        let e = load_library("fake", &path, None).unwrap_err();
        assert!(matches!(e, LoadError::NotALibrary { .. }), "{e}");
        assert!(!e.to_string().contains('\n'));
    }

    #[test]
    fn digest_mismatch_is_refused_before_loading() {
        let dir = std::env::temp_dir().join(format!("squall-digest-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("libx.so");
        std::fs::write(&path, "abc").unwrap();
        let e = load_library("x", &path, Some(&"0".repeat(64))).unwrap_err();
        assert!(e.to_string().contains("ba7816bf"), "{e}");
    }

    #[test]
    fn layout_report_is_condensed_to_the_first_mismatch() {
        let report = "blah\n  3 error(s)inside:\n field_name: catalogue\n field_name: __returns\nLayout of expected type:\n...\nError: mismatched type\nExpected:\n  u64\nFound:\n  u32\nError: other\n";
        assert_eq!(
            first_layout_mismatch(report).unwrap(),
            "catalogue.__returns: mismatched type (expected u64, found u32)"
        );
    }
}
