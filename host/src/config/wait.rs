//! Readers for wait strategies: the topology's `[wait.*]` tables and the
//! per-component `wait.*` overrides (seed 000, Storm's `IWaitStrategy`).
//!
//! A wait table names its `strategy` (default `"progressive"`). The built-ins take
//! their own keys, and anything else is an error. A plugin strategy
//! (`"alias::Component"`) takes any keys, which go to the plugin as its config.
//! The progressive keys override the defaults of the table's *situation* (Storm's
//! spout, bolt or backpressure defaults), also in a per-component override.

use super::components::{component_ref, toml_kind};
use super::defaults::{self, keys};
use super::model::{ConfigKeyLoc, WaitDefaults, WaitOverrides, WaitSpec};
use super::walk::{entries, quoted_list, Section, Value, Walker};

/// The three situations in which an executor waits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Situation {
    /// A spout emitted nothing, or reached max-spout-pending.
    Spout,
    /// A bolt found its receive queue empty.
    Bolt,
    /// Emits are pending because a downstream queue is full.
    Backpressure,
}

impl Situation {
    /// Situations a spout can be in.
    pub(crate) const SPOUT: [Situation; 2] = [Situation::Spout, Situation::Backpressure];
    /// Situations a bolt can be in.
    pub(crate) const BOLT: [Situation; 2] = [Situation::Bolt, Situation::Backpressure];

    fn key(self) -> &'static str {
        match self {
            Situation::Spout => "spout",
            Situation::Bolt => "bolt",
            Situation::Backpressure => "backpressure",
        }
    }

    fn from_key(key: &str) -> Option<Situation> {
        [Situation::Spout, Situation::Bolt, Situation::Backpressure]
            .into_iter()
            .find(|s| s.key() == key)
    }

    /// Storm's progressive levels for this situation.
    fn default_levels(self) -> (u32, u32, u64) {
        match self {
            Situation::Spout => defaults::SPOUT_WAIT_LEVELS,
            Situation::Bolt => defaults::BOLT_WAIT_LEVELS,
            Situation::Backpressure => defaults::BACKPRESSURE_WAIT_LEVELS,
        }
    }
}

/// Reads the top-level `[wait]` table; situations left out keep Storm's defaults.
pub(crate) fn read_wait_defaults(w: &mut Walker<'_>, value: Option<&Value<'_>>) -> WaitDefaults {
    let mut out = WaitDefaults::default();
    let Some(table) = value.and_then(|v| w.table(v, "\"wait\"")) else { return out };
    for (key, value) in entries(table) {
        let Some(situation) = Situation::from_key(key.get_ref()) else {
            w.unknown_key(key, keys::WAIT_SITUATIONS, "[wait]");
            continue;
        };
        let context = format!("[wait.{}]", situation.key());
        if let Some(spec) = read_wait_spec(w, value, situation, &context) {
            match situation {
                Situation::Spout => out.spout = spec,
                Situation::Bolt => out.bolt = spec,
                Situation::Backpressure => out.backpressure = spec,
            }
        }
    }
    out
}

/// Reads a component's `wait` table. `owner` names the component (`bolt "count"`)
/// and `allowed` lists the situations it can be in.
pub(crate) fn read_wait_overrides(
    w: &mut Walker<'_>,
    value: &Value<'_>,
    owner: &str,
    allowed: [Situation; 2],
) -> WaitOverrides {
    let mut out = WaitOverrides::default();
    let Some(table) = w.table(value, &format!("\"wait\" in {owner}")) else { return out };
    let allowed_keys = allowed.map(Situation::key);
    for (key, value) in entries(table) {
        let situation = Situation::from_key(key.get_ref());
        let Some(situation) = situation.filter(|s| allowed.contains(s)) else {
            if situation.is_some() {
                let message = format!("\"wait.{}\" does not apply to {owner}", key.get_ref());
                let help = format!("it can wait in {}", quoted_list(&allowed_keys));
                w.error(&key.span(), message, Some(help));
            } else {
                w.unknown_key(key, &allowed_keys, &format!("\"wait\" of {owner}"));
            }
            continue;
        };
        let spec =
            read_wait_spec(w, value, situation, &format!("wait.{} of {owner}", situation.key()));
        match situation {
            Situation::Spout => out.spout = spec,
            Situation::Bolt => out.bolt = spec,
            Situation::Backpressure => out.backpressure = spec,
        }
    }
    out
}

/// Reads one wait table. `None` after an error (already reported).
fn read_wait_spec(
    w: &mut Walker<'_>,
    value: &Value<'_>,
    situation: Situation,
    context: &str,
) -> Option<WaitSpec> {
    let table = w.table(value, context)?;
    let section = Section::new(table, value.span(), context.to_string());
    let strategy = match section.get("strategy") {
        None => return Some(progressive(w, &section, situation)),
        Some(_) => section.string(w, "strategy")?,
    };
    match strategy.get_ref().as_str() {
        "progressive" => Some(progressive(w, &section, situation)),
        "park" => {
            section.check_keys(w, keys::PARK);
            Some(WaitSpec::Park {
                park_micros: section.u64_in(
                    w,
                    "park_micros",
                    defaults::PARK_MICROS,
                    0,
                    super::limits::MAX_PARK_MICROS,
                ),
            })
        }
        name if name.contains("::") => plugin(w, &section, strategy),
        name => {
            let message = format!("unknown wait strategy \"{name}\" in {context}");
            let help = super::suggest::did_you_mean(name, keys::STRATEGIES.iter().copied())
                .unwrap_or_else(|| {
                    "use \"progressive\", \"park\" or \"alias::Component\" for a plugin strategy"
                        .to_string()
                });
            w.error(&strategy.span(), message, Some(help));
            None
        }
    }
}

fn progressive(w: &mut Walker<'_>, section: &Section<'_, '_>, situation: Situation) -> WaitSpec {
    // Only the bolt wait polls a queue, so only it spins.
    let spins = situation == Situation::Bolt;
    section.check_keys(w, if spins { keys::PROGRESSIVE_BOLT } else { keys::PROGRESSIVE });
    let (level1_count, level2_count, level3_sleep_millis) = situation.default_levels();
    let sleep =
        section.u64_in(w, "level3_sleep_millis", level3_sleep_millis, 0, super::limits::MAX_MILLIS);
    // The back-off cap defaults to the situation's (spouts back off, the
    // others do not), and never below the sleep itself.
    let default_max = match situation {
        Situation::Spout => defaults::SPOUT_IDLE_MAX_SLEEP_MILLIS,
        _ => sleep,
    };
    let max =
        section.u64_in(w, "level3_max_sleep_millis", default_max, 0, super::limits::MAX_MILLIS);
    WaitSpec::Progressive {
        level1_count: section.u32_or(w, "level1_count", level1_count, 0),
        level2_count: section.u32_or(w, "level2_count", level2_count, 0),
        level3_sleep_millis: sleep,
        level3_max_sleep_millis: max.max(sleep),
        spin_micros: if spins {
            section.u64_in(
                w,
                "spin_micros",
                defaults::BOLT_SPIN_MICROS,
                0,
                super::limits::MAX_SPIN_MICROS,
            )
        } else {
            0
        },
    }
}

/// A plugin strategy: every key but `strategy` is the plugin's config. Where
/// each key is written is kept, for the check against the keys the strategy
/// declares (at bind time, once the plugin is loaded).
fn plugin(
    w: &mut Walker<'_>,
    section: &Section<'_, '_>,
    strategy: toml::Spanned<String>,
) -> Option<WaitSpec> {
    let component = component_ref(w, strategy, &section.context)?;
    let rest: Vec<_> =
        entries(section.table).into_iter().filter(|(k, _)| k.get_ref() != "strategy").collect();
    let keys = rest
        .iter()
        .map(|(key, value)| ConfigKeyLoc {
            name: key.get_ref().to_string(),
            loc: w.loc(&key.span()),
            kind: toml_kind(value.get_ref()),
        })
        .collect();
    let table = w.user_table(rest, "", &section.context);
    let config = w.document(&table, &section.span, &section.context);
    Some(WaitSpec::Plugin { component, config, keys })
}
