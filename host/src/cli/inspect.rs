//! `squall inspect`.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::Path;

use squall_plugin_api::abi::{ComponentKind, ConfigKeyDecl, StoreDecl};

use super::Failure;
use crate::plugin::{escape_controls, load_library, Descriptor, Library};

/// Prints a library's catalogue: components, kinds, streams, fields, contract
/// version and (contract 1.1) each component's declared config keys, the
/// input fields a bolt expects, and the library's custom groupings.
///
/// A closed stdout (`squall inspect x.so | head -1`) ends the output quietly,
/// as `ls | head` does.
///
/// A bare file name (`squall inspect libx.so`) means the file in the current
/// folder: the loader opens the path itself and hands `dlopen` the path of
/// its private copy, so `LD_LIBRARY_PATH` and the system folders are never
/// searched. Everything printed from the catalogue has its control
/// characters escaped: a library cannot write terminal escapes through it.
pub fn inspect(path: &Path) -> Result<(), Failure> {
    let alias = path
        .file_stem()
        .map_or_else(|| "plugin".to_owned(), |s| escape_controls(&s.to_string_lossy()));
    let library = load_library(&alias, path, None).map_err(|e| Failure::Load(vec![e]))?;
    let out = render(&library, path);
    match std::io::stdout().lock().write_all(out.as_bytes()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(()),
    }
}

/// What `inspect` prints for a loaded library.
fn render(library: &Library, path: &Path) -> String {
    let mut out = String::new();
    let e = |text: &str| escape_controls(text);
    let (plugin, version) = (e(&library.plugin), e(&library.version));
    let _ = writeln!(out, "plugin {plugin} {version} (contract {})", e(&library.contract));
    let _ = writeln!(out, "path   {}", e(&path.to_string_lossy()));
    let contract_1_0 = library.is_contract_1_0();
    for d in &library.descriptors {
        write_component(&mut out, d, contract_1_0);
    }
    out
}

/// One component of the library: its kind and name (with a note on how
/// it is acked), description, streams, checkpoint position and extension.
fn write_component(out: &mut String, d: &Descriptor, contract_1_0: bool) {
    let e = |text: &str| escape_controls(text);
    let note = if d.windowed {
        " (windowed: the host buffers its windows)"
    } else if d.kind == ComponentKind::BOLT && d.auto_ack {
        " (basic: acked by the host)"
    } else {
        ""
    };
    let _ = writeln!(out, "  {:<14} {}{note}", d.kind.name(), e(&d.name));
    if !d.description.is_empty() {
        let _ = writeln!(out, "  {:<14}   {}", "", e(&d.description));
    }
    if d.kind != ComponentKind::GROUPING {
        write_streams(out, d);
    }
    if d.windowed && !declares(d, crate::topology::LATE_STREAM) {
        let _ = writeln!(
            out,
            "  {:<14}   stream {} [the fields of its first input] (added by the host: \
             event-time tuples behind the watermark)",
            "",
            crate::topology::LATE_STREAM
        );
    }
    if d.kind == ComponentKind::SPOUT {
        let position = if d.durable {
            "kept (CHECKPOINTS): with [state], a restart resumes from the last checkpoint"
        } else {
            "none: with [state], a restart does not resume where the last checkpoint left it"
        };
        let _ = writeln!(out, "  {:<14}   checkpoint position: {position}", "");
    }
    write_extension(out, d, contract_1_0);
}

/// True when the component declares `stream` for an empty config.
fn declares(d: &Descriptor, stream: &str) -> bool {
    d.outputs("").is_ok_and(|streams| streams.iter().any(|s| s.name.as_str() == stream))
}

/// One `stream NAME [fields]` line per output stream: what the component
/// declares for an empty config (a 1.1 component's streams may depend on
/// its config; when it refuses an empty config, a line says they come from
/// its config).
fn write_streams(out: &mut String, d: &Descriptor) {
    let e = |text: &str| escape_controls(text);
    let outputs = match d.outputs("") {
        Ok(streams) => streams,
        Err(error) => {
            let _ = writeln!(
                out,
                "  {:<14}   streams: declared from its config (without one: {})",
                "",
                e(&error.message)
            );
            return;
        }
    };
    for s in outputs {
        let fields: Vec<String> = s.fields.iter().map(|f| e(f)).collect();
        let direct = if s.direct { " direct" } else { "" };
        let _ =
            writeln!(out, "  {:<14}   stream {}{direct} [{}]", "", e(&s.name), fields.join(", "));
    }
}

/// The input fields a bolt expects and its config keys, one aligned row
/// each (`name  type  default  doc`, where the default reads `required` for
/// a key that must be given and `-` for an optional key without one).
fn write_extension(out: &mut String, d: &Descriptor, contract_1_0: bool) {
    let e = |text: &str| escape_controls(text);
    let pad = "";
    if contract_1_0 {
        let _ = writeln!(out, "  {pad:<14}   config keys: not declared (contract 1.0)");
        return;
    }
    if d.kind == ComponentKind::BOLT {
        let fields: Vec<String> = d.input_fields.iter().map(|f| e(f)).collect();
        let fields = if fields.is_empty() { "any".to_owned() } else { fields.join(", ") };
        let _ = writeln!(out, "  {pad:<14}   input fields: {fields}");
        if let Some(stores) = &d.stores {
            let _ = writeln!(out, "  {pad:<14}   stores: {}", stores_line(stores));
        }
    }
    let Some(config_keys) = &d.config_keys else {
        let _ = writeln!(out, "  {pad:<14}   config keys: not declared");
        return;
    };
    if config_keys.is_empty() {
        let _ = writeln!(out, "  {pad:<14}   config keys: none");
        return;
    }
    let _ = writeln!(out, "  {pad:<14}   config keys:");
    let rows: Vec<[String; 4]> = config_keys.iter().map(key_row).collect();
    let width = |i: usize| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0);
    let (name, kind, default) = (width(0), width(1), width(2));
    for [n, k, d, doc] in &rows {
        let line = format!("  {pad:<14}     {n:<name$}  {k:<kind$}  {d:<default$}  {doc}");
        let _ = writeln!(out, "{}", line.trim_end());
    }
}

/// A bolt's declared durable stores (contract 1.3), as `inspect` prints
/// them: `counts (keyed), total (value)`, or `none`. A bolt that does not
/// declare them (`STORES`) gets no line.
fn stores_line(stores: &[StoreDecl]) -> String {
    if stores.is_empty() {
        return "none".to_owned();
    }
    let e = |text: &str| escape_controls(text);
    let named: Vec<String> =
        stores.iter().map(|s| format!("{} ({})", e(&s.name), s.kind.name())).collect();
    named.join(", ")
}

/// One config key's row: name, type, default (`required` for a key that
/// must be given, `-` for an optional key without one) and doc, escaped.
fn key_row(k: &ConfigKeyDecl) -> [String; 4] {
    let e = |text: &str| escape_controls(text);
    let default = if k.required {
        "required".to_owned()
    } else if k.default.is_empty() {
        "-".to_owned()
    } else {
        e(&k.default)
    };
    [e(&k.name), e(&k.kind), default, e(&k.doc)]
}

#[cfg(test)]
mod tests {
    use squall_plugin_api::abi::{CatalogueBuilder, GroupingContext};
    use squall_plugin_api::prelude::*;

    use super::*;

    /// A bolt with keys of every sort and expected input fields.
    struct Joiner;

    impl BasicBolt for Joiner {
        const NAME: &'static str = "Joiner";
        const CONFIG_KEYS: Option<&'static [ConfigKey]> = Some(&[
            ConfigKey::required("path", KeyKind::String, "the file to read"),
            ConfigKey::optional("window", KeyKind::Duration, "\"5s\"", "how long to wait"),
            ConfigKey::maybe("limit", KeyKind::Integer, "stop after this many"),
        ]);
        const INPUT_FIELDS: &'static [&'static str] = &["user", "ts"];

        fn new(_config: &ComponentConfig<'_>) -> Result<Self> {
            Ok(Joiner)
        }

        fn execute(&mut self, _: &Tuple<'_>, _: &mut BasicCollector<'_>) -> Result<()> {
            Ok(())
        }
    }

    /// A spout that does not declare its keys.
    struct Quiet;

    impl Spout for Quiet {
        const NAME: &'static str = "Quiet";

        fn declare_outputs(_outputs: &mut OutputDeclarer) {}

        fn new(_config: &ComponentConfig<'_>) -> Result<Self> {
            Ok(Quiet)
        }

        fn next_tuple(&mut self, _: &mut SpoutCollector<'_>) -> Result<()> {
            Ok(())
        }
    }

    /// A custom grouping.
    struct First;

    impl Grouping for First {
        const NAME: &'static str = "First";
        const DESCRIPTION: &'static str = "sends everything to the first task";
        const CONFIG_KEYS: Option<&'static [ConfigKey]> = Some(&[]);

        fn new(_config: &ComponentConfig<'_>) -> Result<Self> {
            Ok(First)
        }

        fn prepare(&mut self, _context: &GroupingContext) -> Result<()> {
            Ok(())
        }

        fn choose(&mut self, _values: &[Value], targets: &mut Vec<u32>) {
            targets.push(0);
        }
    }

    fn builder() -> CatalogueBuilder {
        let mut builder = CatalogueBuilder::new("demo", "0.3.0");
        builder.basic_bolt::<Joiner>().spout::<Quiet>().grouping::<First>();
        builder
    }

    /// The library `builder` describes, as a library built against
    /// `contract` (1.0.0: its 1.0 catalogue only; 1.1.0: and its 1.1 part;
    /// 1.3.0: and its 1.3 part).
    fn library(builder: impl Fn() -> CatalogueBuilder, contract: &str) -> Library {
        let catalogue = builder().build();
        let v1_1 =
            if contract == "1.0.0" { Vec::new() } else { builder().build_extensions().into_vec() };
        let v1_3 = if contract < "1.3.0" {
            Vec::new()
        } else {
            builder().build_extensions_13().into_vec()
        };
        let descriptors = crate::plugin::descriptor::normalise(&crate::plugin::descriptor::Parts {
            v1_0: &catalogue.components,
            v1_1: &v1_1,
            v1_3: &v1_3,
            ..Default::default()
        });
        Library {
            alias: "demo".into(),
            path: "/p/libdemo.so".into(),
            plugin: "demo".into(),
            version: "0.3.0".into(),
            contract: contract.into(),
            descriptors,
            digest: String::new(),
        }
    }

    fn lines(library: &Library) -> Vec<String> {
        render(library, Path::new("/p/libdemo.so"))
            .lines()
            .map(|l| l.trim_end().to_owned())
            .collect()
    }

    #[test]
    fn keys_inputs_and_groupings_are_listed_aligned() {
        let library = library(builder, "1.1.0");
        let lines = lines(&library);
        let expected = [
            "  bolt           Joiner (basic: acked by the host)",
            "                   input fields: user, ts",
            "                   config keys:",
            "                     path    string    required  the file to read",
            "                     window  duration  \"5s\"      how long to wait",
            "                     limit   integer   -         stop after this many",
            "  spout          Quiet",
            "                   checkpoint position: none: with [state], a restart does not \
             resume where the last checkpoint left it",
            "                   config keys: not declared",
            "  grouping       First",
            "                   sends everything to the first task",
            "                   config keys: none",
        ];
        assert_eq!(lines[2..], expected, "\n{}", lines.join("\n"));
    }

    #[test]
    fn a_1_0_library_says_its_keys_are_not_declared() {
        let library = library(builder, "1.0.0");
        let lines = lines(&library);
        let notes: Vec<&str> =
            lines.iter().filter(|l| l.contains("config keys")).map(|l| l.trim()).collect();
        assert_eq!(notes, ["config keys: not declared (contract 1.0)"; 2]);
        assert!(!lines.iter().any(|l| l.contains("grouping")), "{lines:?}");
    }

    /// A bolt whose stream has the fields its config lists (none: refused),
    /// and which declares two stores.
    struct Pick;

    impl BasicBolt for Pick {
        const NAME: &'static str = "Pick";
        const CONFIG_KEYS: Option<&'static [ConfigKey]> = Some(&[]);
        const STORES: Option<&'static [StoreSpec]> =
            Some(&[StoreSpec::keyed("pending"), StoreSpec::value("seen")]);

        fn declare_outputs_for(
            config: &ComponentConfig<'_>,
            outputs: &mut OutputDeclarer,
        ) -> Result<()> {
            let fields: Vec<String> = config.as_str().split_whitespace().map(Into::into).collect();
            if fields.is_empty() {
                return Err("no fields listed".into());
            }
            let fields: Vec<&str> = fields.iter().map(String::as_str).collect();
            outputs.declare(&fields);
            Ok(())
        }

        fn new(_config: &ComponentConfig<'_>) -> Result<Self> {
            Ok(Pick)
        }

        fn execute(&mut self, _: &Tuple<'_>, _: &mut BasicCollector<'_>) -> Result<()> {
            Ok(())
        }
    }

    #[test]
    fn streams_declared_from_the_config_are_said_to_be() {
        let builder = || {
            let mut builder = CatalogueBuilder::new("demo", "0.3.0");
            builder.basic_bolt::<Pick>();
            builder
        };
        let library = library(builder, "1.3.0");
        let lines = lines(&library);
        let expected = [
            "  bolt           Pick (basic: acked by the host)",
            "                   streams: declared from its config (without one: no fields listed)",
            "                   input fields: any",
            "                   stores: pending (keyed), seen (value)",
            "                   config keys: none",
        ];
        assert_eq!(lines[2..], expected, "\n{}", lines.join("\n"));
    }
}
