//! Readers for the `[topology]` and `[plugins]` tables.

use std::path::PathBuf;

use super::defaults::{self, keys};
use super::diagnostic::Loc;
use super::model::{PluginDecl, Settings};
use super::walk::{entries, Key, Section, Value, Walker};

/// What `[topology]` holds: the name and the settings.
#[derive(Debug)]
pub(crate) struct TopologySection {
    pub(crate) name: String,
    pub(crate) name_loc: Loc,
    pub(crate) settings: Settings,
}

/// Reads `[topology]`; `default_name` (the file stem) applies when `name` is absent.
pub(crate) fn read_topology(
    w: &mut Walker<'_>,
    value: Option<&Value<'_>>,
    default_name: &str,
) -> TopologySection {
    let mut out = TopologySection {
        name: default_name.to_string(),
        name_loc: Loc::START,
        settings: Settings::default(),
    };
    let Some(value) = value else { return out };
    let Some(table) = w.table(value, "\"topology\"") else { return out };
    let section = Section::new(table, value.span(), "[topology]".to_string());
    section.check_keys(w, keys::TOPOLOGY);
    if let Some(name) = section.string(w, "name") {
        out.name_loc = w.loc(&name.span());
        if name.get_ref().trim().is_empty() {
            w.error(&name.span(), "\"name\" in [topology] is empty".to_string(), None);
        } else {
            out.name = name.into_inner();
        }
    }
    out.settings = read_settings(w, &section);
    out
}

fn read_settings(w: &mut Walker<'_>, s: &Section<'_, '_>) -> Settings {
    let receive_buffer_size =
        s.usize_or(w, "receive_buffer_size", defaults::RECEIVE_BUFFER_SIZE, 2);
    let producer_batch_size =
        s.usize_or(w, "producer_batch_size", defaults::PRODUCER_BATCH_SIZE, 1);
    Settings {
        message_timeout_secs: s.u64_or(
            w,
            "message_timeout_secs",
            defaults::MESSAGE_TIMEOUT_SECS,
            1,
        ),
        enable_message_timeouts: s.bool_or(
            w,
            "enable_message_timeouts",
            defaults::ENABLE_MESSAGE_TIMEOUTS,
        ),
        max_spout_pending: s.opt_u32(w, "max_spout_pending", 0).filter(|&n| n > 0),
        acker_executors: s.u32_or(w, "acker_executors", defaults::ACKER_EXECUTORS, 0),
        spout_recvq_skips: s.u32_or(w, "spout_recvq_skips", defaults::SPOUT_RECVQ_SKIPS, 1),
        receive_buffer_size,
        producer_batch_size: clamp_batch_size(producer_batch_size, receive_buffer_size),
        batch_flush_interval_millis: s.u64_or(
            w,
            "batch_flush_interval_millis",
            defaults::BATCH_FLUSH_INTERVAL_MILLIS,
            0,
        ),
        timeout_buckets: s.u32_or(w, "timeout_buckets", defaults::TIMEOUT_BUCKETS, 2),
        shutdown_timeout_secs: s.u64_or(
            w,
            "shutdown_timeout_secs",
            defaults::SHUTDOWN_TIMEOUT_SECS,
            0,
        ),
        startup_timeout_secs: s.u64_or(
            w,
            "startup_timeout_secs",
            defaults::STARTUP_TIMEOUT_SECS,
            1,
        ),
        max_restarts: s.u32_or(w, "max_restarts", defaults::MAX_RESTARTS, 0),
        restart_window_secs: s.u64_or(w, "restart_window_secs", defaults::RESTART_WINDOW_SECS, 0),
    }
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
        w.error(&key.span(), format!("invalid plugin alias \"{alias}\""), help);
    }
}

fn read_plugin(w: &mut Walker<'_>, key: &Key<'_>, value: &Value<'_>) -> Option<PluginDecl> {
    let alias: &str = key.get_ref();
    let context = format!("plugin \"{alias}\"");
    let (path, sha256) = match value.get_ref() {
        toml::de::DeValue::String(_) => (w.string(value, &context)?, None),
        toml::de::DeValue::Table(table) => {
            let section = Section::new(table, value.span(), context);
            section.check_keys(w, keys::PLUGIN);
            let sha256 = read_sha256(w, &section);
            let Some(path) = section.string(w, "path") else {
                if section.get("path").is_none() {
                    let help = format!("write {alias} = {{ path = \"path/to/lib.so\" }}");
                    section.missing(w, "path", Some(help));
                }
                return None;
            };
            (path.into_inner(), sha256)
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
    Some(PluginDecl { alias: alias.to_string(), path: resolve(w, path), sha256, loc })
}

/// A relative library path is relative to the TOML file, not the working directory.
fn resolve(w: &Walker<'_>, path: String) -> PathBuf {
    let path = PathBuf::from(path);
    if path.is_relative() {
        w.dir().join(path)
    } else {
        path
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
