//! `squall new plugin NAME`: writes a ready plugin crate.
//!
//! The crate has a spout (`Numbers`) and a basic bolt (`Square`) with unit
//! tests, a `topology.toml` that runs them, and a README. It depends on
//! `squall-plugin-api` by version (`"1.3"`, the first with
//! `declare_config!`), or, with `--api-path`, on a local checkout's
//! `plugin-api` folder (offline builds, and this repo's own test); then,
//! when the checkout also has the `harness` crate (unpublished), the crate
//! gets an in-process end-to-end test using it.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};

use super::Failure;

/// Arguments of `squall new plugin`.
#[derive(Debug, clap::Args)]
pub struct NewPluginArgs {
    /// The crate name: ASCII letters, digits, `-` and `_`, starting with a letter.
    pub name: String,
    /// Where to write the crate (default: `./NAME`). Must not exist, or be an
    /// empty folder.
    #[arg(long)]
    pub path: Option<PathBuf>,
    /// Depend on the `squall-plugin-api` crate in this folder (a squall
    /// checkout's `plugin-api`) instead of the published one; adds an
    /// in-process test when the checkout has `harness/` next to it.
    #[arg(long, value_name = "PATH")]
    pub api_path: Option<PathBuf>,
}

/// One generated file: its path in the crate and its template.
const FILES: &[(&str, &str)] = &[
    ("Cargo.toml", include_str!("new/Cargo.toml.in")),
    ("src/lib.rs", include_str!("new/lib.rs.in")),
    ("src/spout.rs", include_str!("new/spout.rs.in")),
    ("src/bolt.rs", include_str!("new/bolt.rs.in")),
    ("topology.toml", include_str!("new/topology.toml.in")),
    ("README.md", include_str!("new/README.md.in")),
    (".gitignore", "/target\n"),
];

/// The in-process test, written only when the harness crate is at hand.
const HARNESS_TEST: (&str, &str) = ("tests/harness.rs", include_str!("new/harness.rs.in"));

/// Writes the crate; prints where and what to do next. Every refusal (a
/// bad name, a non-empty folder, a bad `--api-path`) exits with 1.
pub fn new_plugin(args: NewPluginArgs) -> Result<(), Failure> {
    write_plugin(args).map_err(Failure::Other)
}

/// Checks the name and the folder, then writes every file of the crate
/// from its template.
fn write_plugin(args: NewPluginArgs) -> anyhow::Result<()> {
    check_crate_name(&args.name)?;
    let dir = args.path.clone().unwrap_or_else(|| PathBuf::from(&args.name));
    check_target_dir(&dir)?;
    let (api_dependency, harness) = api_dependency(args.api_path.as_deref())?;
    let vars = Vars::new(&args.name, api_dependency, harness.as_deref());
    let mut files: Vec<(&str, &str)> = FILES.to_vec();
    if harness.is_some() {
        files.push(HARNESS_TEST);
    }
    for (path, template) in files {
        let path = dir.join(path);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("cannot create {}", parent.display()))?;
        }
        std::fs::write(&path, vars.fill(template))
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    println!("created plugin crate {} in {}", args.name, dir.display());
    println!("  cd {} && cargo test --release && cargo build --release", dir.display());
    println!("  squall run topology.toml --duration 10s");
    println!("  squall test topology.toml");
    Ok(())
}

/// The crate's dependency on `squall-plugin-api`: the published version,
/// or the checkout's folder named by `--api-path`; with that, the
/// checkout's `harness` folder when it has one.
fn api_dependency(api_path: Option<&Path>) -> anyhow::Result<(String, Option<PathBuf>)> {
    let Some(api) = api_path else {
        return Ok(("squall-plugin-api = \"1.3\"".to_owned(), None));
    };
    let api =
        std::fs::canonicalize(api).with_context(|| format!("--api-path {}", api.display()))?;
    if !api.join("Cargo.toml").is_file() {
        bail!(
            "--api-path {}: no Cargo.toml there (name squall's plugin-api folder)",
            api.display()
        );
    }
    let harness =
        api.parent().map(|p| p.join("harness")).filter(|h| h.join("Cargo.toml").is_file());
    let dep = format!("squall-plugin-api = {{ version = \"1.3\", path = {} }}", quoted(&api));
    Ok((dep, harness))
}

/// What the templates' `{{...}}` placeholders stand for.
struct Vars<'a> {
    /// `{{crate}}`: the crate's name.
    name: &'a str,
    /// `{{lib}}` and `{{alias}}`: the library's name (`-` made `_`).
    lib: String,
    /// `{{api_dependency}}`: the `squall-plugin-api` line of Cargo.toml.
    api_dependency: String,
    /// `{{dev_dependencies}}`: the harness's section of Cargo.toml, if any.
    dev_dependencies: String,
    /// `{{harness_note}}`: the README's mention of the harness test.
    harness_note: &'static str,
    /// `{{dir_var}}`: the variable naming where the crate builds.
    dir_var: String,
}

impl<'a> Vars<'a> {
    /// The values for crate `name`, depending on the plugin API through
    /// `api_dependency`, and on the harness crate at `harness` if any.
    fn new(name: &'a str, api_dependency: String, harness: Option<&Path>) -> Self {
        let lib = name.replace('-', "_");
        let dev_dependencies = match harness {
            Some(h) => format!(
                "\n# The in-process test harness (tests/harness.rs); not published, so a path\n\
                 # to the squall checkout.\n[dev-dependencies]\nsquall-harness = {{ path = {} }}\n",
                quoted(h)
            ),
            None => String::new(),
        };
        let harness_note =
            if harness.is_some() { ", and tests/harness.rs: the topology in process" } else { "" };
        // The scaffold's own variable: SQUALL_PLUGIN_DIR names where squall's
        // libraries are (a durable topology needs its state backend's), which
        // is not where this crate builds its own.
        let dir_var = format!("{}_DIR", lib.to_uppercase());
        Vars { name, lib, api_dependency, dev_dependencies, harness_note, dir_var }
    }

    /// `template` with every placeholder replaced.
    fn fill(&self, template: &str) -> String {
        template
            .replace("{{crate}}", self.name)
            .replace("{{lib}}", &self.lib)
            .replace("{{alias}}", &self.lib)
            .replace("{{api_dependency}}", &self.api_dependency)
            .replace("{{dev_dependencies}}", &self.dev_dependencies)
            .replace("{{harness_note}}", self.harness_note)
            .replace("{{dir_var}}", &self.dir_var)
    }
}

/// A path as a TOML string.
fn quoted(path: &Path) -> String {
    toml::Value::String(path.display().to_string()).to_string()
}

/// Names Rust or Cargo will not take as a crate (or library) name.
const RESERVED: &[&str] = &[
    "as",
    "async",
    "await",
    "break",
    "const",
    "continue",
    "crate",
    "dyn",
    "else",
    "enum",
    "extern",
    "false",
    "fn",
    "for",
    "if",
    "impl",
    "in",
    "let",
    "loop",
    "match",
    "mod",
    "move",
    "mut",
    "pub",
    "ref",
    "return",
    "self",
    "Self",
    "static",
    "struct",
    "super",
    "trait",
    "true",
    "type",
    "unsafe",
    "use",
    "where",
    "while",
    "abstract",
    "become",
    "box",
    "do",
    "final",
    "gen",
    "macro",
    "override",
    "priv",
    "try",
    "typeof",
    "unsized",
    "virtual",
    "yield",
    "std",
    "core",
    "alloc",
    "proc_macro",
    "test",
    "serde",
    "squall_plugin_api",
    "squall_harness",
];

/// Refuses a name that is not a valid crate name, with the reason.
fn check_crate_name(name: &str) -> anyhow::Result<()> {
    let lib = name.replace('-', "_");
    let Some(first) = name.chars().next() else { bail!("the plugin name is empty") };
    if !first.is_ascii_alphabetic() {
        bail!("invalid plugin name {name:?}: it must start with an ASCII letter");
    }
    if let Some(bad) = name.chars().find(|c| !(c.is_ascii_alphanumeric() || *c == '-' || *c == '_'))
    {
        bail!("invalid plugin name {name:?}: {bad:?} is not allowed (use ASCII letters, digits, '-' and '_')");
    }
    if name.len() > 64 {
        bail!("invalid plugin name {name:?}: longer than 64 characters");
    }
    if RESERVED.contains(&lib.as_str()) {
        bail!("invalid plugin name {name:?}: {lib:?} is a reserved name in Rust or clashes with a dependency");
    }
    Ok(())
}

/// Refuses a target that exists and is not an empty folder.
fn check_target_dir(dir: &Path) -> anyhow::Result<()> {
    match std::fs::symlink_metadata(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e).with_context(|| format!("cannot use {}", dir.display())),
        Ok(meta) if !meta.is_dir() => bail!("{} exists and is not a folder", dir.display()),
        Ok(_) => {
            let mut entries =
                std::fs::read_dir(dir).with_context(|| format!("cannot read {}", dir.display()))?;
            if entries.next().is_some() {
                bail!("{} exists and is not empty; choose another --path", dir.display());
            }
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn valid_crate_names_pass() {
        for name in ["my-plugin", "wc", "a_b-9"] {
            check_crate_name(name).unwrap();
        }
    }

    #[test]
    fn bad_crate_names_say_why() {
        let cases = [
            ("", "empty"),
            ("9lives", "start with an ASCII letter"),
            ("-x", "start with an ASCII letter"),
            ("my plugin", "' ' is not allowed"),
            ("caf\u{e9}", "is not allowed"),
            ("self", "reserved"),
            ("squall-plugin-api", "reserved"),
        ];
        for (name, why) in cases {
            let e = check_crate_name(name).unwrap_err().to_string();
            assert!(e.contains(why), "{name:?}: {e}");
        }
        assert!(check_crate_name(&"a".repeat(65)).unwrap_err().to_string().contains("64"));
    }

    #[test]
    fn a_non_empty_folder_is_refused_and_an_empty_one_accepted() {
        let dir = std::env::temp_dir().join(format!("squall-new-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        check_target_dir(&dir).unwrap();
        std::fs::write(dir.join("x"), "").unwrap();
        let e = check_target_dir(&dir).unwrap_err().to_string();
        assert!(e.contains("not empty"), "{e}");
        let e = check_target_dir(&dir.join("x")).unwrap_err().to_string();
        assert!(e.contains("not a folder"), "{e}");
        check_target_dir(&dir.join("absent")).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn every_placeholder_is_filled() {
        for (path, template) in FILES.iter().chain([&HARNESS_TEST]) {
            let known = [
                "crate",
                "lib",
                "alias",
                "api_dependency",
                "dev_dependencies",
                "harness_note",
                "dir_var",
            ];
            let mut rest = *template;
            while let Some(at) = rest.find("{{") {
                let end = rest[at..].find("}}").map(|e| at + e).expect("closed placeholder");
                // `${{{dir_var}}:-…}`: a shell expansion around a placeholder.
                let key = rest[at + 2..end].trim_start_matches('{');
                assert!(known.contains(&key), "{path}: unknown placeholder {key}");
                rest = &rest[end..];
            }
        }
    }
}
