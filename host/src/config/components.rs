//! Readers for `[spouts.NAME]` and `[bolts.NAME]`: component references, config
//! tables, inputs with their groupings, and throttles.
//!
//! A spout or bolt whose table is broken is still returned (with defaults), so
//! that inputs naming it do not produce a second, misleading "unknown component"
//! error. A broken component reference becomes a placeholder with an empty alias;
//! the error has already been reported, and a config with any error is never
//! handed out.

use toml::de::DeValue;
use toml::Spanned;

use super::defaults::{self, keys};
use super::diagnostic::Loc;
use super::limits;
use super::model::{
    BoltDecl, ComponentDecl, ComponentRef, ConfigKeyLoc, GroupingSpec, InputDecl, SpoutDecl,
    ThrottleMode, ThrottleRate, ThrottleSpec, WaitOverrides,
};
use super::suggest::did_you_mean;
use super::wait::{read_wait_overrides, Situation};
use super::walk::{entries, quoted_list, Key, Section, Value, Walker};

/// Parses `"alias::Component"` (already interpolated) and checks that the alias
/// is declared in `[plugins]`. `context` names where it is written.
pub(crate) fn component_ref(
    w: &mut Walker<'_>,
    text: Spanned<String>,
    context: &str,
) -> Option<ComponentRef> {
    let span = text.span();
    let Some((alias, component)) =
        text.get_ref().split_once("::").filter(|(a, c)| !a.is_empty() && !c.is_empty())
    else {
        let message = format!("invalid component reference \"{}\" in {context}", text.get_ref());
        let help = "write it as \"alias::Component\", with the alias declared in [plugins]";
        w.error(&span, message, Some(help.to_string()));
        return None;
    };
    if !w.aliases.iter().any(|a| a == alias) {
        let help = did_you_mean(alias, w.aliases.iter().map(String::as_str))
            .unwrap_or_else(|| format!("declare it in [plugins]: {alias} = \"path/to/lib.so\""));
        w.error(&span, format!("unknown plugin alias \"{alias}\" in {context}"), Some(help));
        return None;
    }
    Some(ComponentRef {
        alias: alias.to_string(),
        component: component.to_string(),
        loc: w.loc(&span),
    })
}

/// Reads every `[spouts.NAME]`, in file order.
pub(crate) fn read_spouts(w: &mut Walker<'_>, value: Option<&Value<'_>>) -> Vec<SpoutDecl> {
    let Some(table) = value.and_then(|v| w.table(v, "\"spouts\"")) else { return Vec::new() };
    entries(table).into_iter().map(|(key, value)| read_spout(w, key, value)).collect()
}

fn read_spout(w: &mut Walker<'_>, key: &Key<'_>, value: &Value<'_>) -> SpoutDecl {
    let mut spout =
        SpoutDecl { decl: declared(w, key, "spout"), throttle: None, max_spout_pending: None };
    let owner = format!("spout {:?}", key.get_ref());
    let Some(table) = w.table(value, &owner) else { return spout };
    let s = Section::new(table, key.span(), owner);
    s.check_keys(w, keys::SPOUT);
    read_common(w, &s, &mut spout.decl);
    spout.throttle = s.get("throttle").and_then(|v| read_throttle(w, v, &s.context));
    spout.max_spout_pending = s
        .uint(w, "max_spout_pending", 0, u64::from(limits::MAX_SPOUT_PENDING))
        .and_then(|n| u32::try_from(n).ok());
    if let Some(v) = s.get("wait") {
        spout.decl.wait = read_wait_overrides(w, v, &s.context, Situation::SPOUT);
    }
    spout
}

/// Reads every `[bolts.NAME]`, in file order.
pub(crate) fn read_bolts(w: &mut Walker<'_>, value: Option<&Value<'_>>) -> Vec<BoltDecl> {
    let Some(table) = value.and_then(|v| w.table(v, "\"bolts\"")) else { return Vec::new() };
    entries(table).into_iter().map(|(key, value)| read_bolt(w, key, value)).collect()
}

fn read_bolt(w: &mut Walker<'_>, key: &Key<'_>, value: &Value<'_>) -> BoltDecl {
    let mut bolt = BoltDecl {
        decl: declared(w, key, "bolt"),
        inputs: Vec::new(),
        tick_tuple_freq_secs: None,
        window: None,
    };
    let owner = format!("bolt {:?}", key.get_ref());
    let Some(table) = w.table(value, &owner) else { return bolt };
    let s = Section::new(table, key.span(), owner);
    s.check_keys(w, keys::BOLT);
    read_common(w, &s, &mut bolt.decl);
    match s.get("inputs") {
        Some(v) => bolt.inputs = read_inputs(w, v, &s.context),
        None => {
            let help = "subscribe to a spout or bolt: inputs = [{ from = \"NAME\" }]";
            s.missing(w, "inputs", Some(help.to_string()));
        }
    }
    bolt.tick_tuple_freq_secs = s.uint(w, "tick_tuple_freq_secs", 1, limits::MAX_DURATION_SECS);
    if let Some(v) = s.get("wait") {
        bolt.decl.wait = read_wait_overrides(w, v, &s.context, Situation::BOLT);
    }
    bolt.window = super::window::read_window(w, &s);
    bolt
}

/// The component `key` names, with its name checked and every other key
/// at its default (a table that cannot be read stays so).
fn declared(w: &mut Walker<'_>, key: &Key<'_>, kind: &str) -> ComponentDecl {
    let loc = w.loc(&key.span());
    check_name(w, key, kind);
    ComponentDecl {
        name: key.get_ref().to_string(),
        loc,
        component: placeholder(loc),
        parallelism: defaults::PARALLELISM,
        config: String::new(),
        config_keys: Vec::new(),
        wait: WaitOverrides::default(),
        chain: true,
    }
}

/// Stands in for a component reference that could not be read.
fn placeholder(loc: Loc) -> ComponentRef {
    ComponentRef { alias: String::new(), component: String::new(), loc }
}

/// Names use the character set of [`limits::name_problem`] (they become
/// thread names, log fields and file names), and `__` is Storm's prefix for
/// system components (`__system`, `__acker`); a tick tuple comes from `__system`.
fn check_name(w: &mut Walker<'_>, key: &Key<'_>, kind: &str) {
    let name: &str = key.get_ref();
    if name.is_empty() {
        w.error(&key.span(), format!("{kind} name is empty"), None);
    } else if let Some(problem) = limits::name_problem(name) {
        let message = format!("{kind} name {name:?} {problem}");
        w.error(&key.span(), message, Some(limits::NAME_HELP.to_string()));
    } else if name.starts_with("__") {
        let help = "names starting with \"__\" are reserved for system components";
        w.error(&key.span(), format!("{kind} name {name:?} is reserved"), Some(help.to_string()));
    }
}

/// Three of the keys spouts and bolts share: `component`, `parallelism`,
/// `config` (`wait`, whose situations are the kind's, is read by each).
fn read_common(w: &mut Walker<'_>, s: &Section<'_, '_>, decl: &mut ComponentDecl) {
    let component = match s.string(w, "component") {
        Some(text) => component_ref(w, text, &s.context),
        None => {
            if s.get("component").is_none() {
                let help = "name its implementation: component = \"alias::Component\"";
                s.missing(w, "component", Some(help.to_string()));
            }
            None
        }
    };
    decl.component = component.unwrap_or_else(|| placeholder(w.loc(&s.span)));
    decl.parallelism =
        s.u32_in(w, "parallelism", defaults::PARALLELISM, 1, limits::MAX_PARALLELISM);
    (decl.config, decl.config_keys) = read_config(w, s);
    decl.chain = s.bool_or(w, "chain", true);
}

/// The `config` table as the TOML document the component's constructor
/// reads, and where each of its top-level keys is written (for the checks
/// against the keys a component declares).
fn read_config(w: &mut Walker<'_>, s: &Section<'_, '_>) -> (String, Vec<ConfigKeyLoc>) {
    let Some(value) = s.get("config") else { return (String::new(), Vec::new()) };
    let Some(table) = w.table(value, &s.what("config")) else {
        return (String::new(), Vec::new());
    };
    let context = format!("config of {}", s.context);
    config_document(w, value, table, &context)
}

/// A config table as a TOML document, with its top-level keys' locations.
pub(super) fn config_document(
    w: &mut Walker<'_>,
    value: &Value<'_>,
    table: &toml::de::DeTable<'_>,
    context: &str,
) -> (String, Vec<ConfigKeyLoc>) {
    let keys = entries(table)
        .iter()
        .map(|(key, value)| ConfigKeyLoc {
            name: key.get_ref().to_string(),
            loc: w.loc(&key.span()),
            kind: toml_kind(value.get_ref()),
        })
        .collect();
    let table = w.user_table(entries(table), "", context);
    (w.document(&table, &value.span(), context), keys)
}

/// The TOML type of a value, as declared config keys name types.
pub(super) fn toml_kind(value: &DeValue<'_>) -> &'static str {
    match value {
        DeValue::String(_) => "string",
        DeValue::Integer(_) => "integer",
        DeValue::Float(_) => "float",
        DeValue::Boolean(_) => "bool",
        DeValue::Datetime(_) => "datetime",
        DeValue::Array(_) => "array",
        DeValue::Table(_) => "table",
    }
}

fn read_inputs(w: &mut Walker<'_>, value: &Value<'_>, owner: &str) -> Vec<InputDecl> {
    let DeValue::Array(items) = value.get_ref() else {
        w.wrong_type(value, &format!("\"inputs\" in {owner}"), "an array of tables");
        return Vec::new();
    };
    if items.is_empty() {
        let help = "subscribe to a spout or bolt: inputs = [{ from = \"NAME\" }]";
        w.error(&value.span(), format!("\"inputs\" in {owner} is empty"), Some(help.to_string()));
    }
    let context = |i: usize| format!("input {} of {owner}", i + 1);
    items.iter().enumerate().filter_map(|(i, item)| read_input(w, item, context(i))).collect()
}

/// One input table; `None` when `from` is missing or unreadable (reported).
fn read_input(w: &mut Walker<'_>, item: &Value<'_>, context: String) -> Option<InputDecl> {
    let table = w.table(item, &context)?;
    let loc = w.loc(&item.span());
    let s = Section::new(table, item.span(), context);
    s.check_keys(w, keys::INPUT);
    let from = s.string(w, "from");
    if s.get("from").is_none() {
        s.missing(w, "from", Some("name the spout or bolt to subscribe to".to_string()));
    }
    let (stream, stream_loc) = match s.string(w, "stream") {
        Some(stream) if stream.get_ref().is_empty() => {
            w.error(&stream.span(), format!("{} is empty", s.what("stream")), None);
            (defaults::DEFAULT_STREAM.to_string(), loc)
        }
        Some(stream) => {
            if let Some(problem) = limits::name_problem(stream.get_ref()) {
                let message = format!("stream name {:?} {problem}", stream.get_ref());
                w.error(&stream.span(), message, Some(limits::NAME_HELP.to_string()));
            }
            (stream.get_ref().clone(), w.loc(&stream.span()))
        }
        None => (defaults::DEFAULT_STREAM.to_string(), loc),
    };
    let (grouping, grouping_loc) = match s.get("grouping") {
        Some(v) => {
            (read_grouping(w, v, &s.context).unwrap_or(GroupingSpec::Shuffle), w.loc(&v.span()))
        }
        None => (GroupingSpec::Shuffle, loc),
    };
    let throttle = s.get("throttle").and_then(|v| read_throttle(w, v, &s.context));
    let from = from?;
    let from_loc = w.loc(&from.span());
    Some(InputDecl {
        from: from.into_inner(),
        from_loc,
        stream,
        stream_loc,
        grouping,
        grouping_loc,
        throttle,
        loc,
    })
}

/// A grouping: one of the names in [`keys::NAMED_GROUPINGS`], or `{ fields = [...] }`.
fn read_grouping(w: &mut Walker<'_>, value: &Value<'_>, owner: &str) -> Option<GroupingSpec> {
    let what = format!("\"grouping\" in {owner}");
    match value.get_ref() {
        DeValue::String(_) => {
            let name = w.string(value, &what)?;
            if let Some((_, spec)) = keys::NAMED_GROUPINGS.iter().find(|(n, _)| *n == name) {
                return Some(spec.clone());
            }
            if name == "fields" {
                let help = "write grouping = { fields = [\"FIELD\", ...] }";
                let message = format!("grouping \"fields\" in {owner} needs the field names");
                w.error(&value.span(), message, Some(help.to_string()));
                return None;
            }
            let names = keys::grouping_names();
            let help = did_you_mean(&name, names.iter().copied())
                .unwrap_or_else(|| format!("expected {}", quoted_list(&names)));
            w.error(&value.span(), format!("unknown grouping \"{name}\" in {owner}"), Some(help));
            None
        }
        DeValue::Table(table) => {
            let s = Section::new(table, value.span(), format!("grouping of {owner}"));
            s.check_keys(w, keys::GROUPING_TABLE);
            if s.get("custom").is_some() {
                return read_custom_grouping(w, &s);
            }
            if let Some(config) = s.get("config") {
                let help = "only a custom grouping takes a config: { custom = \"alias::Name\", config = {...} }";
                w.error(
                    &config.span(),
                    format!("{} needs \"custom\"", s.what("config")),
                    Some(help.to_string()),
                );
            }
            read_fields(w, &s).map(GroupingSpec::Fields)
        }
        _ => {
            w.wrong_type(
                value,
                &what,
                "a string, { fields = [...] } or { custom = \"alias::Name\" }",
            );
            None
        }
    }
}

/// `{ custom = "alias::Name", config = {...} }`: a plugin's grouping.
fn read_custom_grouping(w: &mut Walker<'_>, s: &Section<'_, '_>) -> Option<GroupingSpec> {
    if let Some(fields) = s.get("fields") {
        let message = format!("{} cannot have both \"custom\" and \"fields\"", s.context);
        w.error(&fields.span(), message, None);
        return None;
    }
    let text = s.string(w, "custom")?;
    let component = component_ref(w, text, &s.context)?;
    let (config, config_keys) = match s.get("config") {
        None => (String::new(), Vec::new()),
        Some(value) => {
            let table = w.table(value, &s.what("config"))?;
            config_document(w, value, table, &format!("config of {}", s.context))
        }
    };
    Some(GroupingSpec::Custom { component, config, config_keys })
}

/// `fields = ["a", "b"]`: not empty, no field twice.
fn read_fields(w: &mut Walker<'_>, s: &Section<'_, '_>) -> Option<Vec<(String, Loc)>> {
    let Some(value) = s.get("fields") else {
        s.missing(w, "fields", Some("write { fields = [\"FIELD\", ...] }".to_string()));
        return None;
    };
    let what = s.what("fields");
    let DeValue::Array(items) = value.get_ref() else {
        w.wrong_type(value, &what, "an array of field names");
        return None;
    };
    if items.is_empty() {
        w.error(
            &value.span(),
            format!("{what} is empty"),
            Some("name at least one field".to_string()),
        );
        return None;
    }
    let mut fields: Vec<(String, Loc)> = Vec::new();
    let mut ok = true;
    for item in items.iter() {
        let Some(name) = w.string(item, &format!("field in {}", s.context)) else {
            ok = false;
            continue;
        };
        let loc = w.loc(&item.span());
        if name.is_empty() {
            w.error(&item.span(), format!("empty field name in {}", s.context), None);
            ok = false;
        } else if fields.iter().any(|(f, _)| *f == name) {
            w.error(&item.span(), format!("field \"{name}\" appears twice in {}", s.context), None);
            ok = false;
        } else {
            fields.push((name, loc));
        }
    }
    ok.then_some(fields)
}

/// A throttle table under a spout or an input; `owner` names that.
fn read_throttle(w: &mut Walker<'_>, value: &Value<'_>, owner: &str) -> Option<ThrottleSpec> {
    let table = w.table(value, &format!("\"throttle\" in {owner}"))?;
    let s = Section::new(table, value.span(), format!("throttle of {owner}"));
    s.check_keys(w, keys::THROTTLE);
    let mode = read_throttle_mode(w, &s);
    let period_millis =
        s.u64_in(w, "period_millis", defaults::THROTTLE_PERIOD_MILLIS, 1, limits::MAX_MILLIS);
    let tuples = s.uint(w, "tuples_per_sec", 1, limits::MAX_TUPLES_PER_SEC);
    let bytes = s.uint(w, "bytes_per_sec", 1, limits::MAX_BYTES_PER_SEC);
    let rate =
        match (s.table.get_key_value("tuples_per_sec"), s.table.get_key_value("bytes_per_sec")) {
            (Some(_), Some((key, _))) => {
                let message =
                    format!("{} sets both \"tuples_per_sec\" and \"bytes_per_sec\"", s.context);
                w.error(&key.span(), message, Some("keep one of them".to_string()));
                return None;
            }
            (None, None) => {
                let message =
                    format!("{} needs \"tuples_per_sec\" or \"bytes_per_sec\"", s.context);
                w.error(
                    &s.span,
                    message,
                    Some("for example: { tuples_per_sec = 1000 }".to_string()),
                );
                return None;
            }
            (Some(_), None) => ThrottleRate::TuplesPerSec(tuples?),
            (None, Some(_)) => ThrottleRate::BytesPerSec(bytes?),
        };
    Some(ThrottleSpec { mode, rate, period_millis, loc: w.loc(&value.span()) })
}

fn read_throttle_mode(w: &mut Walker<'_>, s: &Section<'_, '_>) -> ThrottleMode {
    let Some(mode) = s.string(w, "mode") else { return ThrottleMode::Period };
    match mode.get_ref().as_str() {
        "period" => ThrottleMode::Period,
        "smooth" => ThrottleMode::Smooth,
        other => {
            let help = did_you_mean(other, keys::THROTTLE_MODES.iter().copied())
                .unwrap_or_else(|| format!("expected {}", quoted_list(keys::THROTTLE_MODES)));
            w.error(
                &mode.span(),
                format!("unknown throttle mode \"{other}\" in {}", s.context),
                Some(help),
            );
            ThrottleMode::Period
        }
    }
}
