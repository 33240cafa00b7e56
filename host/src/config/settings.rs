//! Readers for the `[topology]` and `[plugins]` tables.

use std::path::PathBuf;

use super::defaults::keys;
use super::diagnostic::Loc;
use super::limits;
use super::model::{PluginDecl, Settings};
use super::walk::{entries, Key, Section, Value, Walker};

/// What `[topology]` holds: the name and the settings.
#[derive(Debug)]
pub(crate) struct TopologySection {
    pub(crate) name: String,
    pub(crate) name_loc: Loc,
    pub(crate) settings: Settings,
    /// Where an over-budget topology is reported: `memory_budget_mib`,
    /// else `receive_buffer_size`, else the `[topology]` table, else 1:1.
    pub(crate) budget_loc: Loc,
}

/// Reads `[topology]`; `default_name` (the file stem) applies when `name` is
/// absent, with every character outside the name character set replaced by `_`.
pub(crate) fn read_topology(
    w: &mut Walker<'_>,
    value: Option<&Value<'_>>,
    default_name: &str,
) -> TopologySection {
    let mut out = TopologySection {
        name: sanitized_name(default_name),
        name_loc: Loc::START,
        settings: Settings::default(),
        budget_loc: Loc::START,
    };
    let Some(value) = value else { return out };
    let Some(table) = w.table(value, "\"topology\"") else { return out };
    let section = Section::new(table, value.span(), "[topology]".to_string());
    section.check_keys(w, &keys::topology());
    if let Some(name) = section.string(w, "name") {
        out.name_loc = w.loc(&name.span());
        if name.get_ref().trim().is_empty() {
            w.error(&name.span(), "\"name\" in [topology] is empty".to_string(), None);
        } else if let Some(problem) = limits::name_problem(name.get_ref()) {
            let message = format!("topology name {:?} {problem}", name.get_ref());
            w.error(&name.span(), message, Some(limits::NAME_HELP.to_string()));
        } else {
            out.name = name.into_inner();
        }
    }
    out.budget_loc = ["memory_budget_mib", "receive_buffer_size"]
        .iter()
        .find_map(|key| section.get(key))
        .map_or_else(|| w.loc(&value.span()), |v| w.loc(&v.span()));
    out.settings = read_settings(w, &section);
    if let Some(value) = section.get("http") {
        read_http(w, value, &mut out.settings);
    }
    out
}

/// `http = "ADDR"`, or a `[topology.http]` table with `addr` and the
/// access settings. Binding anything but loopback without a control token
/// is an error at the address.
fn read_http(w: &mut Walker<'_>, value: &Value<'_>, settings: &mut Settings) {
    let (addr, options) = match value.get_ref() {
        toml::de::DeValue::Table(table) => read_http_table(w, table, value),
        _ => (
            w.string(value, "\"http\" in [topology]").map(|a| toml::Spanned::new(value.span(), a)),
            Default::default(),
        ),
    };
    settings.http_options = options;
    let Some(addr) = addr else { return };
    match super::parse_addr(addr.get_ref()) {
        Ok(a) if !a.ip().is_loopback() && !settings.http_options.has_control_token() => {
            let message = format!(
                "the HTTP endpoint would listen on {a}, reachable from other hosts, with no control token"
            );
            let help =
                "set token_file or token_env in [topology.http], or bind loopback (a bare port)";
            w.error(&addr.span(), message, Some(help.to_string()));
        }
        Ok(a) => settings.http = Some(a),
        Err(e) => {
            let help = "write a port (bound on loopback) or HOST:PORT".to_string();
            w.error(&addr.span(), format!("\"http\" in [topology]: {e}"), Some(help));
        }
    }
}

/// A `[topology.http]` table: its `addr` (unparsed) and access settings;
/// `tls_cert` without `tls_key`, or the reverse, is an error.
fn read_http_table(
    w: &mut Walker<'_>,
    table: &toml::de::DeTable<'_>,
    value: &Value<'_>,
) -> (Option<toml::Spanned<String>>, super::model::HttpOptions) {
    let s = Section::new(table, value.span(), "[topology.http]".to_string());
    s.check_keys(w, keys::HTTP);
    let options = super::model::HttpOptions {
        token_file: http_file(w, &s, "token_file"),
        token_env: http_env(w, &s, "token_env"),
        read_token_file: http_file(w, &s, "read_token_file"),
        read_token_env: http_env(w, &s, "read_token_env"),
        metrics_public: s.bool_or(w, "metrics_public", false),
        allowed_hosts: string_list(w, &s, "allowed_hosts"),
        cors_origins: string_list(w, &s, "cors_origins"),
        tls_cert: http_file(w, &s, "tls_cert"),
        tls_key: http_file(w, &s, "tls_key"),
        max_connections: s
            .uint(w, "max_connections", 1, u64::from(limits::MAX_HTTP_CONNECTIONS))
            .and_then(|n| u32::try_from(n).ok()),
    };
    if options.tls_cert.is_some() != options.tls_key.is_some() {
        let help = "set both tls_cert and tls_key, or neither".to_string();
        w.error(
            &value.span(),
            "[topology.http] has only one of tls_cert and tls_key".into(),
            Some(help),
        );
    }
    (s.string(w, "addr"), options)
}

/// A file path under `key` of `[topology.http]`, relative to the file
/// that writes it.
fn http_file(w: &mut Walker<'_>, s: &Section<'_, '_>, key: &str) -> Option<PathBuf> {
    s.string(w, key).map(|p| {
        let span = p.span();
        resolve(w, p.into_inner(), &span)
    })
}

/// An environment variable's name under `key` of `[topology.http]`; a
/// name that cannot be one (empty, with `=` or NUL) is an error.
fn http_env(w: &mut Walker<'_>, s: &Section<'_, '_>, key: &str) -> Option<String> {
    let name = s.string(w, key)?;
    if name.get_ref().is_empty() || name.get_ref().contains(['=', '\0']) {
        let message = format!("{} is not an environment variable name", s.what(key));
        w.error(&name.span(), message, None);
        return None;
    }
    Some(name.into_inner())
}

/// An array of strings under `key`, empty when absent.
fn string_list(w: &mut Walker<'_>, s: &Section<'_, '_>, key: &str) -> Vec<String> {
    let Some(value) = s.get(key) else { return Vec::new() };
    let toml::de::DeValue::Array(items) = value.get_ref() else {
        w.wrong_type(value, &s.what(key), "an array of strings");
        return Vec::new();
    };
    items.iter().filter_map(|item| w.string(item, &s.what(key))).collect()
}

/// A file stem made into a valid topology name.
fn sanitized_name(stem: &str) -> String {
    let name: String = stem
        .chars()
        .map(|c| if limits::is_name_char(c) { c } else { '_' })
        .take(limits::MAX_NAME_LEN)
        .collect();
    if name.is_empty() {
        "topology".to_string()
    } else {
        name
    }
}

/// The settings of the table (see `model.rs`), then the clamp of
/// `producer_batch_size`.
fn read_settings(w: &mut Walker<'_>, s: &Section<'_, '_>) -> Settings {
    let mut settings = Settings::read_table(w, s);
    settings.producer_batch_size =
        clamp_batch_size(settings.producer_batch_size, settings.receive_buffer_size);
    settings
}

/// Storm's clamp (`JCQueue`'s producer batch): a batch never exceeds half the
/// receive queue, and is at least 1.
fn clamp_batch_size(batch: usize, receive_buffer_size: usize) -> usize {
    batch.min(receive_buffer_size / 2).max(1)
}

/// Reads `[plugins]`, recording every alias on the walker so that component
/// references can be checked against them.
pub(crate) fn read_plugins(w: &mut Walker<'_>, value: Option<&Value<'_>>) -> Vec<PluginDecl> {
    let Some(value) = value else { return Vec::new() };
    let Some(table) = w.table(value, "\"plugins\"") else { return Vec::new() };
    let mut plugins = Vec::new();
    for (key, value) in entries(table) {
        let alias: &str = key.get_ref();
        // Recorded even when the entry is broken: that error is reported once,
        // here, not again at every component that uses the alias.
        w.aliases.push(alias.to_string());
        check_alias(w, key);
        if let Some(plugin) = read_plugin(w, key, value) {
            plugins.push(plugin);
        }
    }
    plugins
}

fn check_alias(w: &mut Walker<'_>, key: &Key<'_>) {
    let alias: &str = key.get_ref();
    let valid = !alias.is_empty()
        && alias.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if !valid {
        let help = Some("an alias is made of letters, digits, \"_\" and \"-\"".to_string());
        w.error(&key.span(), format!("invalid plugin alias {alias:?}"), help);
    }
}

fn read_plugin(w: &mut Walker<'_>, key: &Key<'_>, value: &Value<'_>) -> Option<PluginDecl> {
    let alias: &str = key.get_ref();
    let context = format!("plugin {alias:?}");
    let mut allow_writable = false;
    let (path, sha256, path_span) = match value.get_ref() {
        toml::de::DeValue::String(_) => (w.string(value, &context)?, None, value.span()),
        toml::de::DeValue::Table(table) => {
            let section = Section::new(table, value.span(), context);
            section.check_keys(w, keys::PLUGIN);
            let sha256 = read_sha256(w, &section);
            allow_writable = section.bool_or(w, "allow_writable", false);
            let Some(path) = section.string(w, "path") else {
                if section.get("path").is_none() {
                    let help = format!("write {alias} = {{ path = \"path/to/lib.so\" }}");
                    section.missing(w, "path", Some(help));
                }
                return None;
            };
            let span = path.span();
            (path.into_inner(), sha256, span)
        }
        _ => {
            w.wrong_type(value, &context, "a path string or a table { path, sha256 }");
            return None;
        }
    };
    let loc = w.loc(&key.span());
    if path.is_empty() {
        w.error(&value.span(), format!("path of plugin \"{alias}\" is empty"), None);
        return None;
    }
    Some(PluginDecl {
        alias: alias.to_string(),
        path: resolve(w, path, &path_span),
        sha256,
        allow_writable,
        loc,
    })
}

/// A relative library path is relative to the TOML file that writes it (at
/// `span`), not the working directory; one given with `--set` is relative to
/// the working directory.
/// `.` components are dropped (`dir/./lib.so` is `dir/lib.so`), so messages
/// show the path plainly; `..` stays (it may cross a symbolic link).
fn resolve(w: &Walker<'_>, path: String, span: &std::ops::Range<usize>) -> PathBuf {
    let path = PathBuf::from(path);
    let joined = if path.is_relative() { w.dir_at(span).join(path) } else { path };
    let plain: PathBuf =
        joined.components().filter(|c| *c != std::path::Component::CurDir).collect();
    if plain.as_os_str().is_empty() {
        joined
    } else {
        plain
    }
}

fn read_sha256(w: &mut Walker<'_>, section: &Section<'_, '_>) -> Option<String> {
    let digest = section.string(w, "sha256")?;
    let text = digest.get_ref();
    if text.len() == 64 && text.chars().all(|c| c.is_ascii_hexdigit()) {
        Some(text.to_ascii_lowercase())
    } else {
        let message = format!("{} must be 64 hex digits, found \"{text}\"", section.what("sha256"));
        let help = Some("compute it with `sha256sum path/to/lib.so`".to_string());
        w.error(&digest.span(), message, help);
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn producer_batch_is_clamped_to_half_the_receive_buffer() {
        assert_eq!(clamp_batch_size(1, 32768), 1);
        assert_eq!(clamp_batch_size(2000, 1024), 512);
        assert_eq!(clamp_batch_size(5, 2), 1);
        assert_eq!(clamp_batch_size(5, 3), 1);
    }
}
