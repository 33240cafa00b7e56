//! The machinery behind the `[topology]` settings table ([`settings_table!`]).
//!
//! The table itself is in `model.rs`, where [`Settings`](super::Settings) is
//! declared: one entry per key, with its type, default, range, doc and an
//! optional cross-check. Everything else is generated from that one entry:
//!
//! - the field of [`Settings`](super::Settings), with its doc, default and
//!   range in rustdoc;
//! - its value in `Settings::default()`;
//! - its reader: the type and range check, with the diagnostic at the value
//!   (`file:line:col`), and the fall-back to the default when it is wrong;
//! - its name in the list unknown keys are checked against (and "did you
//!   mean" picks from, in table order);
//! - its cross-check, run once every key has been read;
//! - its row for the test that checks `docs/topology.md` against the table.
//!
//! A value type is one that implements [`SettingValue`]: `u64`, `u32`,
//! `usize` and `Option<u32>` (absent or 0 is `None`) take an inclusive
//! range; `bool` takes none. An integer setting written without a range does
//! not compile (its bounds are a `RangeInclusive`, and the missing range is
//! `()`), so every numeric setting has one.

use std::ops::RangeInclusive;

use super::walk::{Section, Walker};

/// What reading one key found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Read<T> {
    /// The key is not written: the default applies.
    Absent,
    /// The key is written and valid.
    Valid(T),
    /// The key is written and wrong; the diagnostic is recorded, the default
    /// applies.
    Invalid,
}

/// Why a cross-check refused a setting: a message that follows
/// `"KEY" in [topology]` (e.g. `must be shorter than …, found …`) and an
/// optional help.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Problem {
    /// What is wrong.
    pub(crate) message: String,
    /// How to fix it.
    pub(crate) help: Option<String>,
}

impl Problem {
    /// A problem without help.
    #[allow(dead_code)] // until a setting of the table has a cross-check
    pub(crate) fn new(message: impl Into<String>) -> Self {
        Self { message: message.into(), help: None }
    }

    /// The same problem, with `help`.
    #[allow(dead_code)] // until a setting of the table has a cross-check
    pub(crate) fn with_help(mut self, help: impl Into<String>) -> Self {
        self.help = Some(help.into());
        self
    }
}

/// A setting's entry as the docs check reads it.
#[cfg(test)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Row {
    /// The key.
    pub(crate) name: &'static str,
    /// The TOML type as docs/topology.md writes it: `integer` or `bool`.
    pub(crate) kind: &'static str,
    /// The default as docs/topology.md writes it first (`None`: a word,
    /// such as "unlimited").
    pub(crate) default: Option<String>,
    /// The inclusive range, for integers.
    pub(crate) range: Option<(u64, u64)>,
}

/// A type a setting can have: how its value is read and checked, and how
/// its default and range read in the docs.
pub(crate) trait SettingValue: Sized {
    /// What bounds a value: an inclusive range for integers, `()` for `bool`.
    type Bounds;

    /// Reads `key` of `s`, reporting a value of the wrong type or out of
    /// `bounds` at the value.
    fn read(
        w: &mut Walker<'_>,
        s: &Section<'_, '_>,
        key: &str,
        bounds: &Self::Bounds,
    ) -> Read<Self>;

    /// The TOML type, as the docs name it.
    #[cfg(test)]
    const KIND: &'static str = "integer";

    /// The default as the docs write it, if it is a value.
    #[cfg(test)]
    fn doc_default(&self) -> Option<String>;

    /// The range as `(min, max)`, if there is one.
    #[cfg(test)]
    fn doc_range(bounds: &Self::Bounds) -> Option<(u64, u64)>;
}

/// The integer under `key` in `min..=max`.
fn read_uint(w: &mut Walker<'_>, s: &Section<'_, '_>, key: &str, min: u64, max: u64) -> Read<u64> {
    match s.get(key) {
        None => Read::Absent,
        Some(value) => match w.uint(value, &s.what(key), min, max) {
            Some(n) => Read::Valid(n),
            None => Read::Invalid,
        },
    }
}

impl<T> Read<T> {
    fn map_or_invalid<U>(self, f: impl FnOnce(T) -> Option<U>) -> Read<U> {
        match self {
            Read::Absent => Read::Absent,
            Read::Valid(v) => f(v).map_or(Read::Invalid, Read::Valid),
            Read::Invalid => Read::Invalid,
        }
    }
}

impl SettingValue for u64 {
    type Bounds = RangeInclusive<u64>;

    fn read(w: &mut Walker<'_>, s: &Section<'_, '_>, key: &str, b: &Self::Bounds) -> Read<Self> {
        read_uint(w, s, key, *b.start(), *b.end())
    }

    #[cfg(test)]
    fn doc_default(&self) -> Option<String> {
        Some(self.to_string())
    }

    #[cfg(test)]
    fn doc_range(b: &Self::Bounds) -> Option<(u64, u64)> {
        Some((*b.start(), *b.end()))
    }
}

impl SettingValue for u32 {
    type Bounds = RangeInclusive<u32>;

    fn read(w: &mut Walker<'_>, s: &Section<'_, '_>, key: &str, b: &Self::Bounds) -> Read<Self> {
        read_uint(w, s, key, u64::from(*b.start()), u64::from(*b.end()))
            .map_or_invalid(|n| u32::try_from(n).ok())
    }

    #[cfg(test)]
    fn doc_default(&self) -> Option<String> {
        Some(self.to_string())
    }

    #[cfg(test)]
    fn doc_range(b: &Self::Bounds) -> Option<(u64, u64)> {
        Some((u64::from(*b.start()), u64::from(*b.end())))
    }
}

/// Bounds in `u64`, as the limits are written.
impl SettingValue for usize {
    type Bounds = RangeInclusive<u64>;

    fn read(w: &mut Walker<'_>, s: &Section<'_, '_>, key: &str, b: &Self::Bounds) -> Read<Self> {
        read_uint(w, s, key, *b.start(), *b.end()).map_or_invalid(|n| usize::try_from(n).ok())
    }

    #[cfg(test)]
    fn doc_default(&self) -> Option<String> {
        Some(self.to_string())
    }

    #[cfg(test)]
    fn doc_range(b: &Self::Bounds) -> Option<(u64, u64)> {
        Some((*b.start(), *b.end()))
    }
}

/// An optional count: absent or 0 is `None` (unlimited).
impl SettingValue for Option<u32> {
    type Bounds = RangeInclusive<u32>;

    fn read(w: &mut Walker<'_>, s: &Section<'_, '_>, key: &str, b: &Self::Bounds) -> Read<Self> {
        <u32 as SettingValue>::read(w, s, key, b)
            .map_or_invalid(|n| Some(Some(n).filter(|&n| n > 0)))
    }

    #[cfg(test)]
    fn doc_default(&self) -> Option<String> {
        self.map(|n| n.to_string())
    }

    #[cfg(test)]
    fn doc_range(b: &Self::Bounds) -> Option<(u64, u64)> {
        Some((u64::from(*b.start()), u64::from(*b.end())))
    }
}

impl SettingValue for bool {
    type Bounds = ();

    fn read(w: &mut Walker<'_>, s: &Section<'_, '_>, key: &str, _: &()) -> Read<Self> {
        match s.get(key) {
            None => Read::Absent,
            Some(value) => w.bool(value, &s.what(key)).map_or(Read::Invalid, Read::Valid),
        }
    }

    #[cfg(test)]
    const KIND: &'static str = "bool";

    #[cfg(test)]
    fn doc_default(&self) -> Option<String> {
        Some(self.to_string())
    }

    #[cfg(test)]
    fn doc_range((): &()) -> Option<(u64, u64)> {
        None
    }
}

/// Reports a cross-check's `problem` with `key`: at its value when it is
/// written, else at `s` (the `[topology]` table, where the other key the
/// check compares with is written, since the defaults pass every check).
#[allow(dead_code)] // until a setting of the table has a cross-check
pub(crate) fn report(w: &mut Walker<'_>, s: &Section<'_, '_>, key: &str, problem: Problem) {
    let span = s.get(key).map_or_else(|| s.span.clone(), toml::Spanned::span);
    w.error(&span, format!("{} {}", s.what(key), problem.message), problem.help);
}

/// The bounds of an entry: its `range`, or `()` when it has none.
macro_rules! setting_bounds {
    () => {
        ()
    };
    ($range:expr) => {
        $range
    };
}
pub(crate) use setting_bounds;

/// Declares [`Settings`](super::Settings) from its table; see the module
/// doc for what it generates, and `model.rs` for the table and how to add a
/// setting.
macro_rules! settings_table {
    (
        table {
            $(
                $(#[doc = $doc:literal])*
                $name:ident: $ty:ty {
                    default: $default:expr,
                    $(range: $range:expr,)?
                    $(check: $check:expr,)?
                }
            )*
        }
        read_elsewhere {
            $(
                $(#[doc = $odoc:literal])*
                $oname:ident: $oty:ty = $odefault:expr,
            )*
        }
    ) => {
        /// The `[topology]` table: Storm's `topology.*` settings, in snake
        /// case, and squall's own. Every field but the last few is one entry
        /// of the settings table in `config/model.rs`.
        #[derive(Clone, Debug, PartialEq, Eq)]
        pub struct Settings {
            $(
                $(#[doc = $doc])*
                #[doc = ""]
                #[doc = concat!("Default `", stringify!($default), "`", $("; range `", stringify!($range), "`",)? ".")]
                pub $name: $ty,
            )*
            $(
                $(#[doc = $odoc])*
                pub $oname: $oty,
            )*
        }

        impl Default for Settings {
            fn default() -> Self {
                Settings {
                    $($name: $default,)*
                    $($oname: $odefault,)*
                }
            }
        }

        impl Settings {
            /// The keys of the table, in table order.
            pub(crate) const KEYS: &'static [&'static str] = &[$(stringify!($name)),*];

            /// Reads every key of the table from `s` (`[topology]`); a key
            /// that is absent, or wrong (reported), takes its default. The
            /// cross-checks run when every key was valid, and report at the
            /// key they belong to. The keys read elsewhere take their defaults.
            pub(crate) fn read_table(
                w: &mut $crate::config::walk::Walker<'_>,
                s: &$crate::config::walk::Section<'_, '_>,
            ) -> Self {
                use $crate::config::setting::{Read, SettingValue};
                let mut out = Settings::default();
                let mut invalid = false;
                $(
                    let bounds: <$ty as SettingValue>::Bounds =
                        $crate::config::setting::setting_bounds!($($range)?);
                    match <$ty as SettingValue>::read(w, s, stringify!($name), &bounds) {
                        Read::Absent => {}
                        Read::Valid(value) => out.$name = value,
                        Read::Invalid => invalid = true,
                    }
                )*
                if !invalid {
                    $($(
                        let check: fn(&Settings) -> Result<(), $crate::config::setting::Problem> =
                            $check;
                        if let Err(problem) = check(&out) {
                            $crate::config::setting::report(w, s, stringify!($name), problem);
                        }
                    )?)*
                }
                out
            }

            /// Every cross-check's verdict on `self`, by key (for tests:
            /// the defaults pass them all).
            #[cfg(test)]
            pub(crate) fn check_all(&self) -> Vec<(&'static str, Result<(), $crate::config::setting::Problem>)> {
                #[allow(unused_mut)]
                let mut out = Vec::new();
                $($(
                    let check: fn(&Settings) -> Result<(), $crate::config::setting::Problem> =
                        $check;
                    out.push((stringify!($name), check(self)));
                )?)*
                out
            }

            /// Every entry of the table as the docs check reads it.
            #[cfg(test)]
            pub(crate) fn rows() -> Vec<$crate::config::setting::Row> {
                use $crate::config::setting::{Row, SettingValue};
                let defaults = Settings::default();
                vec![$({
                    let bounds: <$ty as SettingValue>::Bounds =
                        $crate::config::setting::setting_bounds!($($range)?);
                    Row {
                        name: stringify!($name),
                        kind: <$ty as SettingValue>::KIND,
                        default: SettingValue::doc_default(&defaults.$name),
                        range: <$ty as SettingValue>::doc_range(&bounds),
                    }
                }),*]
            }
        }
    };
}
pub(crate) use settings_table;

#[cfg(test)]
mod tests {
    use std::path::Path;

    use toml::de::DeTable;

    use super::super::diagnostic::Diagnostics;
    use super::super::source::SourceMap;
    use super::*;

    // A table of its own, with a cross-check, as a new setting would be
    // written in `model.rs`.
    settings_table! {
        table {
            /// A timeout.
            timeout_secs: u64 {
                default: 30,
                range: 1..=100,
            }
            /// Shorter than the timeout.
            interval_secs: u32 {
                default: 10,
                range: 1..=100,
                check: |s| {
                    if u64::from(s.interval_secs) < s.timeout_secs {
                        Ok(())
                    } else {
                        Err(Problem::new(format!(
                            "must be shorter than timeout_secs ({}), found {}",
                            s.timeout_secs, s.interval_secs
                        ))
                        .with_help("lower it, or raise timeout_secs"))
                    }
                },
            }
            /// A switch.
            enabled: bool {
                default: true,
            }
            /// A cap; 0 = none.
            cap: Option<u32> {
                default: None,
                range: 0..=5,
            }
            /// A size.
            size: usize {
                default: 4,
                range: 2..=8,
            }
        }
        read_elsewhere {
            /// Not a key.
            derived: u8 = 7,
        }
    }

    fn no_env(_: &str) -> Option<String> {
        None
    }

    /// Reads `text` as the `[t]` table: the settings and the diagnostics as
    /// `line:col message (help)`.
    fn read(text: &str) -> (Settings, Vec<String>) {
        let doc = DeTable::parse(text).expect("test document is valid TOML");
        let sources = SourceMap::single(Path::new("t.toml"), text);
        let mut w = Walker::new(&sources, &no_env);
        let s = Section::new(doc.get_ref(), 0..0, "[t]".to_string());
        let settings = Settings::read_table(&mut w, &s);
        let diags: Diagnostics = w.finish();
        let lines = diags
            .items
            .iter()
            .map(|d| match &d.help {
                Some(help) => format!("{} {} ({help})", d.loc, d.message),
                None => format!("{} {}", d.loc, d.message),
            })
            .collect();
        (settings, lines)
    }

    #[test]
    fn an_empty_table_is_the_defaults_and_fields_read_elsewhere_keep_theirs() {
        let (settings, diags) = read("");
        assert!(diags.is_empty(), "{diags:?}");
        assert_eq!(settings, Settings::default());
        assert_eq!(
            (settings.timeout_secs, settings.interval_secs, settings.enabled),
            (30, 10, true)
        );
        assert_eq!((settings.cap, settings.size, settings.derived), (None, 4, 7));
        assert_eq!(Settings::KEYS, ["timeout_secs", "interval_secs", "enabled", "cap", "size"]);
    }

    #[test]
    fn written_values_are_read_and_zero_caps_are_none() {
        let (settings, diags) =
            read("timeout_secs = 50\ninterval_secs = 20\nenabled = false\ncap = 3\nsize = 8");
        assert!(diags.is_empty(), "{diags:?}");
        assert_eq!(settings.timeout_secs, 50);
        assert_eq!(settings.interval_secs, 20);
        assert!(!settings.enabled);
        assert_eq!(settings.cap, Some(3));
        assert_eq!(settings.size, 8);
        assert_eq!(read("cap = 0").0.cap, None);
    }

    #[test]
    fn a_wrong_value_is_reported_at_it_and_takes_the_default() {
        let (settings, diags) = read("timeout_secs = 0\nenabled = 1\ncap = 6\nsize = \"x\"");
        assert_eq!(
            diags,
            [
                "1:16 \"timeout_secs\" in [t] must be at least 1, found 0",
                "2:11 \"enabled\" in [t] must be true or false, found an integer",
                "3:7 \"cap\" in [t] must be at most 5, found 6",
                "4:8 \"size\" in [t] must be an integer, found a string",
            ]
        );
        assert_eq!(settings, Settings::default());
    }

    #[test]
    fn a_cross_check_is_reported_at_its_key_or_at_the_table() {
        let (_, diags) = read("timeout_secs = 5\n\ninterval_secs = 9");
        assert_eq!(
            diags,
            ["3:17 \"interval_secs\" in [t] must be shorter than timeout_secs (5), found 9 \
                 (lower it, or raise timeout_secs)"]
        );
        // Not written: at the table (here the section's span, 1:1).
        let (_, diags) = read("timeout_secs = 5");
        assert_eq!(
            diags,
            ["1:1 \"interval_secs\" in [t] must be shorter than timeout_secs (5), found 10 \
                 (lower it, or raise timeout_secs)"]
        );
        assert!(read("timeout_secs = 11").1.is_empty());
    }

    #[test]
    fn no_cross_check_runs_after_a_wrong_value() {
        // The timeout falls back to 30 after its error, and the check would
        // fail on that default (40 >= 30): a second, misleading error. No
        // check runs after a wrong value.
        let (_, diags) = read("timeout_secs = 500\ninterval_secs = 40");
        assert_eq!(diags, ["1:16 \"timeout_secs\" in [t] must be at most 100, found 500"]);
    }

    #[test]
    fn the_rows_give_each_keys_type_default_and_range() {
        let rows = Settings::rows();
        let row = |name: &str| rows.iter().find(|r| r.name == name).expect("a row").clone();
        let timeout = row("timeout_secs");
        assert_eq!(
            (timeout.kind, timeout.default.as_deref(), timeout.range),
            ("integer", Some("30"), Some((1, 100)))
        );
        let enabled = row("enabled");
        assert_eq!(
            (enabled.kind, enabled.default.as_deref(), enabled.range),
            ("bool", Some("true"), None)
        );
        assert_eq!(row("cap").default, None, "no value: the docs write a word");
        assert_eq!(row("size").range, Some((2, 8)));
        let checks = Settings::default().check_all();
        assert_eq!(checks.len(), 1);
        assert_eq!(checks[0], ("interval_secs", Ok(())));
    }
}
