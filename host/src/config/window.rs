//! A bolt's window: `window = { length = "30s", slide = "5s" }` (time) or
//! `window = { length_count = 1000, slide_count = 100 }` (count), tumbling
//! when the slide is absent or equal to the length; `timestamp_field = "ts"`
//! and `lag = "2s"` make a time window run on event time.
//!
//! Whether the component is a windowed bolt is known only once its plugin is
//! loaded; `topology` checks that (a windowed bolt needs `window`, any other
//! bolt refuses it).

use super::diagnostic::Loc;
use super::limits;
use super::walk::{Section, Value, Walker};
use super::TopologyConfig;

/// The keys of a `window` table.
pub(crate) const WINDOW_KEYS: &[&str] = &["length", "slide", "length_count", "slide_count"];

/// The largest `length_count`: the buffer holds up to twice that many tuples.
pub const MAX_WINDOW_COUNT: u64 = 10_000_000;

/// How a window is cut.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WindowSize {
    /// By tuple count.
    Count {
        /// Tuples per window.
        length: u64,
        /// Tuples between two windows (`== length`: tumbling).
        slide: u64,
    },
    /// By time.
    Time {
        /// Duration of a window, in milliseconds.
        length_millis: u64,
        /// Time between two window ends, in milliseconds.
        slide_millis: u64,
    },
}

/// A bolt's `window`, `timestamp_field` and `lag`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WindowDecl {
    /// Where `window` is written.
    pub loc: Loc,
    /// Count or time, length and slide.
    pub size: WindowSize,
    /// Event time: the input field holding each tuple's timestamp (integer
    /// milliseconds since the epoch).
    pub timestamp_field: Option<String>,
    /// Event time: how far the watermark trails the largest timestamp seen
    /// (milliseconds; 0 when absent).
    pub lag_millis: u64,
}

/// Why a text is not a duration (the text, trimmed, is quoted).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    /// A number alone.
    #[error("\"{0}\" has no unit")]
    NoUnit(String),
    /// A unit other than `ms`, `s`, `m` or `h`.
    #[error("\"{text}\" has an unknown unit \"{unit}\"")]
    UnknownUnit {
        /// The text.
        text: String,
        /// The unit.
        unit: String,
    },
    /// No number first.
    #[error("\"{0}\" does not start with a number")]
    NoNumber(String),
    /// Past the longest duration a topology may give.
    #[error("\"{0}\" is longer than {max} s", max = limits::MAX_DURATION_SECS)]
    TooLong(String),
}

/// Parses a duration: an integer followed by `ms`, `s`, `m` or `h`.
///
/// # Errors
/// No unit, an unknown unit, no number, or longer than
/// [`limits::MAX_DURATION_SECS`].
pub fn parse_duration_millis(text: &str) -> Result<u64, DurationError> {
    let text = text.trim();
    let split = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    let (digits, unit) = text.split_at(split);
    let factor = match unit.trim() {
        "ms" => 1,
        "s" => 1000,
        "m" => 60_000,
        "h" => 3_600_000,
        "" => return Err(DurationError::NoUnit(text.to_owned())),
        other => {
            let (text, unit) = (text.to_owned(), other.to_owned());
            return Err(DurationError::UnknownUnit { text, unit });
        }
    };
    let n: u64 = digits.parse().map_err(|_| DurationError::NoNumber(text.to_owned()))?;
    n.checked_mul(factor)
        .filter(|&ms| ms <= limits::MAX_DURATION_SECS * 1000)
        .ok_or_else(|| DurationError::TooLong(text.to_owned()))
}

/// The duration under `key` of `s`, in milliseconds (0 only when `zero`).
fn duration(w: &mut Walker<'_>, s: &Section<'_, '_>, key: &str, zero: bool) -> Option<u64> {
    let value = s.get(key)?;
    let text = w.string(value, &s.what(key))?;
    match parse_duration_millis(&text) {
        Ok(0) if !zero => {
            w.error(&value.span(), format!("{} must be longer than 0", s.what(key)), None);
            None
        }
        Ok(ms) => Some(ms),
        Err(e) => {
            let help = "write a whole number and a unit: \"500ms\", \"30s\", \"5m\", \"1h\"";
            w.error(&value.span(), format!("{} is invalid: {e}", s.what(key)), Some(help.into()));
            None
        }
    }
}

/// Reads `window`, `timestamp_field` and `lag` of a bolt's section (`None`
/// when it has no `window`, or on an error, which is reported).
pub(crate) fn read_window(w: &mut Walker<'_>, bolt: &Section<'_, '_>) -> Option<WindowDecl> {
    let Some(value) = bolt.get("window") else {
        for key in ["timestamp_field", "lag"] {
            if let Some(v) = bolt.get(key) {
                let help = "add a time window: window = { length = \"10s\" }";
                w.error(&v.span(), format!("{} needs a window", bolt.what(key)), Some(help.into()));
            }
        }
        return None;
    };
    let loc = w.loc(&value.span());
    let table = w.table(value, &bolt.what("window"))?;
    let s = Section::new(table, value.span(), bolt.what("window"));
    s.check_keys(w, WINDOW_KEYS);
    let size = window_size(w, &s, value)?;
    let timestamp_field = match bolt.string(w, "timestamp_field") {
        Some(field) if matches!(size, WindowSize::Count { .. }) => {
            let help = "event time needs a time window: window = { length = \"10s\" }";
            let message = "timestamp_field needs a time window, not a count window";
            w.error(&field.span(), message.into(), Some(help.into()));
            return None;
        }
        field => field.map(|f| f.into_inner()),
    };
    let lag_millis = match bolt.get("lag") {
        Some(v) if timestamp_field.is_none() => {
            let help = "name the event-time field: timestamp_field = \"ts\"";
            w.error(
                &v.span(),
                format!("{} needs a timestamp_field", bolt.what("lag")),
                Some(help.into()),
            );
            return None;
        }
        Some(_) => duration(w, bolt, "lag", true)?,
        None => 0,
    };
    Some(WindowDecl { loc, size, timestamp_field, lag_millis })
}

/// The window's size: a time window (`length`, `slide`) or a count window
/// (`length_count`, `slide_count`), never both; the slide defaults to the
/// length and may not exceed it.
fn window_size(w: &mut Walker<'_>, s: &Section<'_, '_>, value: &Value<'_>) -> Option<WindowSize> {
    let time = s.get("length").is_some() || s.get("slide").is_some();
    let count = s.get("length_count").is_some() || s.get("slide_count").is_some();
    let help = "write window = { length = \"30s\", slide = \"5s\" } (time) or \
                { length_count = 1000, slide_count = 100 } (count)";
    if time && count {
        let message = format!("{} mixes time (length, slide) and count keys", s.context);
        w.error(&value.span(), message, Some(help.into()));
        return None;
    }
    let size = if count { count_size(w, s, help)? } else { time_size(w, s, help)? };
    let (length, slide, key) = match size {
        WindowSize::Count { length, slide } => (length, slide, "slide_count"),
        WindowSize::Time { length_millis, slide_millis } => (length_millis, slide_millis, "slide"),
    };
    if slide > length {
        let span = s.get(key).map_or(value.span(), |v| v.span());
        let message = format!("{} is longer than the window", s.what(key));
        let help = "a tuple would be in no window: make the slide at most the length";
        w.error(&span, message, Some(help.into()));
        return None;
    }
    Some(size)
}

/// A count window's `length_count` (required) and `slide_count`.
fn count_size(w: &mut Walker<'_>, s: &Section<'_, '_>, help: &str) -> Option<WindowSize> {
    let Some(length) = s.uint(w, "length_count", 1, MAX_WINDOW_COUNT) else {
        if s.get("length_count").is_none() {
            s.missing(w, "length_count", Some(help.into()));
        }
        return None;
    };
    let slide = match s.get("slide_count") {
        Some(_) => s.uint(w, "slide_count", 1, MAX_WINDOW_COUNT)?,
        None => length,
    };
    Some(WindowSize::Count { length, slide })
}

/// A time window's `length` (required) and `slide`, as durations.
fn time_size(w: &mut Walker<'_>, s: &Section<'_, '_>, help: &str) -> Option<WindowSize> {
    let Some(length_millis) = duration(w, s, "length", false) else {
        if s.get("length").is_none() {
            s.missing(w, "length", Some(help.into()));
        }
        return None;
    };
    let slide_millis = match s.get("slide") {
        Some(_) => duration(w, s, "slide", false)?,
        None => length_millis,
    };
    Some(WindowSize::Time { length_millis, slide_millis })
}

/// Storm's rule: with message timeouts on, a time window's length plus its
/// slide (and the event-time lag) must be shorter than the message timeout,
/// or its tuples time out while they wait in the window. Reported at the
/// window.
pub(crate) fn check_window_timeouts(w: &mut Walker<'_>, config: &TopologyConfig) {
    let settings = &config.settings;
    if !settings.enable_message_timeouts || settings.acker_executors == 0 {
        return;
    }
    let timeout_millis = settings.message_timeout_secs.saturating_mul(1000);
    for bolt in &config.bolts {
        let Some(window) = &bolt.window else { continue };
        let WindowSize::Time { length_millis, slide_millis } = window.size else { continue };
        let held = length_millis + slide_millis + window.lag_millis;
        if held >= timeout_millis {
            let message = format!(
                "the window of bolt {:?} holds tuples up to {held} ms (length + slide + lag), \
                 not less than message_timeout_secs ({} s)",
                bolt.decl.name, settings.message_timeout_secs
            );
            let help = format!(
                "raise topology.message_timeout_secs above {} or shorten the window",
                held.div_ceil(1000)
            );
            w.error_at(window.loc, message, Some(help));
        }
    }
}

/// A count window acks a tuple only once the tuple has left every window
/// it can be in, so it holds up to `length_count` tuples unacked before the
/// first ones are acked. When every input of the windowed bolt comes
/// straight from spouts whose `max_spout_pending` caps their trees in
/// flight below `length_count` (summed over the spouts and their tasks),
/// the window never fills: the spouts stop at the cap, and every tree
/// waits for its message timeout. Refused at the window. Not checked when
/// acking is off (nothing caps the trees), when a spout is unlimited, or
/// when an input comes from a bolt (a bolt may emit any number of tuples
/// per tree).
pub(crate) fn check_count_windows(w: &mut Walker<'_>, config: &TopologyConfig) {
    let settings = &config.settings;
    if settings.acker_executors == 0 {
        return;
    }
    let spouts: std::collections::HashMap<&str, &crate::config::model::SpoutDecl> =
        config.spouts.iter().map(|s| (s.decl.name.as_str(), s)).collect();
    for bolt in &config.bolts {
        let Some(window) = &bolt.window else { continue };
        let WindowSize::Count { length, .. } = window.size else { continue };
        let Some(in_flight) = trees_in_flight(bolt, &spouts, settings) else { continue };
        if length > in_flight {
            let message = format!(
                "the count window of bolt {:?} holds {length} tuples before it acks any, but its \
                 spouts keep at most {in_flight} trees in flight (max_spout_pending × \
                 parallelism): the window would never fill, and every tree would time out",
                bolt.decl.name
            );
            let help = format!(
                "raise max_spout_pending to at least {length} in all, or shorten length_count"
            );
            w.error_at(window.loc, message, Some(help));
        }
    }
}

/// How many tuple trees the spouts feeding `bolt` keep in flight at most
/// (`max_spout_pending` × parallelism, summed over its distinct spouts);
/// `None` when nothing caps them: the bolt has no input, an input comes
/// from a bolt, or a spout is unlimited.
fn trees_in_flight(
    bolt: &crate::config::model::BoltDecl,
    spouts: &std::collections::HashMap<&str, &crate::config::model::SpoutDecl>,
    settings: &crate::config::model::Settings,
) -> Option<u64> {
    if bolt.inputs.is_empty() {
        return None;
    }
    let mut in_flight = 0u64;
    let mut seen = std::collections::HashSet::new();
    for input in &bolt.inputs {
        let spout = spouts.get(input.from.as_str())?;
        if !seen.insert(input.from.as_str()) {
            continue;
        }
        let per_task = spout.effective_max_spout_pending(settings)?;
        in_flight = in_flight
            .saturating_add(u64::from(per_task).saturating_mul(u64::from(spout.decl.parallelism)));
    }
    Some(in_flight)
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::{parse_duration_millis, WindowDecl, WindowSize};

    fn topology(bolt_extra: &str, timeout: u64) -> String {
        format!(
            "[topology]\nmessage_timeout_secs = {timeout}\n\n[plugins]\nex = \"libex.so\"\n\n\
             [spouts.s]\ncomponent = \"ex::Spout\"\n\n[bolts.w]\ncomponent = \"ex::W\"\n\
             inputs = [{{ from = \"s\" }}]\n{bolt_extra}\n"
        )
    }

    fn parse(text: &str) -> Result<Option<WindowDecl>, Vec<String>> {
        match crate::config::parse_str_with_env(text, Path::new("t.toml"), &|_| None) {
            Ok(config) => Ok(config.bolts[0].window.clone()),
            Err(diags) => {
                Err(diags.items.iter().map(|d| format!("{} {}", d.loc, d.message)).collect())
            }
        }
    }

    #[test]
    fn windows_are_read() {
        let w = parse(&topology("window = { length = \"30s\", slide = \"5s\" }", 60)).unwrap();
        let w = w.unwrap();
        assert_eq!(w.size, WindowSize::Time { length_millis: 30_000, slide_millis: 5_000 });
        assert_eq!((w.loc.line, w.loc.col), (13, 10));
        let w = parse(&topology("window = { length_count = 1000 }", 30)).unwrap().unwrap();
        assert_eq!(w.size, WindowSize::Count { length: 1000, slide: 1000 });
        let text =
            topology("window = { length = \"10s\" }\ntimestamp_field = \"ts\"\nlag = \"2s\"", 30);
        let w = parse(&text).unwrap().unwrap();
        assert_eq!((w.timestamp_field.as_deref(), w.lag_millis), (Some("ts"), 2000));
        assert_eq!(parse(&topology("", 30)).unwrap(), None);
    }

    #[test]
    fn bad_windows_are_reported_where_they_are_written() {
        let cases = [
            ("window = { length = \"30s\", slide_count = 5 }", "13:10", "mixes time"),
            ("window = { length = \"5s\", slide = \"6s\" }", "13:35", "longer than the window"),
            ("window = { lenght = \"5s\" }", "13:12", "unknown key"),
            ("window = { length = \"5\" }", "13:21", "no unit"),
            ("window = { length_count = 10 }\ntimestamp_field = \"ts\"", "14:19", "count window"),
            ("lag = \"1s\"", "13:7", "needs a window"),
            ("window = { length = \"5s\" }\nlag = \"1s\"", "14:7", "needs a timestamp_field"),
            // Storm's rule: 20 s + 15 s is not less than the 30 s timeout.
            ("window = { length = \"20s\", slide = \"15s\" }", "13:10", "message_timeout_secs"),
        ];
        for (extra, at, says) in cases {
            let errors = parse(&topology(extra, 30)).expect_err(extra);
            assert!(
                errors.iter().any(|e| e.starts_with(at) && e.contains(says)),
                "{extra}: expected `{says}` at {at}, got {errors:?}"
            );
        }
        // Without timeouts the rule does not apply.
        let text = topology("window = { length = \"20s\", slide = \"15s\" }", 30)
            .replace("[topology]\n", "[topology]\nenable_message_timeouts = false\n");
        assert!(parse(&text).is_ok());
    }

    #[test]
    fn a_count_window_longer_than_the_spouts_can_keep_in_flight_is_refused() {
        let with = |pending: &str, extra: &str| {
            topology(extra, 30).replace("[topology]\n", &format!("[topology]\n{pending}\n"))
        };
        // One spout task with at most 100 trees in flight: a window of 150
        // tuples never fills (nothing is acked before it fires), so every
        // tree times out.
        let errors = parse(&with("max_spout_pending = 100", "window = { length_count = 150 }"))
            .expect_err("refused");
        assert!(
            errors.iter().any(|e| e.starts_with("14:10") && e.contains("max_spout_pending")),
            "{errors:?}"
        );
        // A sliding one too: it acks nothing before `length` tuples arrived.
        let sliding = "window = { length_count = 150, slide_count = 10 }";
        assert!(parse(&with("max_spout_pending = 100", sliding)).is_err());
        // Two spout tasks of 100: 200 in flight is enough; so is 150.
        let two = with("max_spout_pending = 100", "window = { length_count = 150 }")
            .replace("component = \"ex::Spout\"", "component = \"ex::Spout\"\nparallelism = 2");
        assert!(parse(&two).is_ok(), "{:?}", parse(&two));
        assert!(parse(&with("max_spout_pending = 150", "window = { length_count = 150 }")).is_ok());
        // Unlimited, or without ackers, nothing caps the trees in flight.
        assert!(parse(&with("", "window = { length_count = 150 }")).is_ok());
        let no_acker = "max_spout_pending = 100\nacker_executors = 0";
        assert!(parse(&with(no_acker, "window = { length_count = 150 }")).is_ok());
        // The spout's own max_spout_pending counts.
        let own = with("max_spout_pending = 1000", "window = { length_count = 150 }").replace(
            "component = \"ex::Spout\"",
            "component = \"ex::Spout\"\nmax_spout_pending = 10",
        );
        assert!(parse(&own).is_err());
        // Through a bolt, a tree may carry any number of tuples: not checked.
        let via_bolt = with(
            "max_spout_pending = 100",
            "window = { length_count = 150 }\n\n[bolts.m]\ncomponent = \"ex::M\"\ninputs = [{ from = \"s\" }]",
        )
        .replace("inputs = [{ from = \"s\" }]\nwindow", "inputs = [{ from = \"m\" }]\nwindow");
        assert!(parse(&via_bolt).is_ok(), "{:?}", parse(&via_bolt));
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration_millis("30s"), Ok(30_000));
        assert_eq!(parse_duration_millis("250ms"), Ok(250));
        assert_eq!(parse_duration_millis("2m"), Ok(120_000));
        assert_eq!(parse_duration_millis("1h"), Ok(3_600_000));
        assert!(parse_duration_millis("30").unwrap_err().to_string().contains("no unit"));
        assert!(parse_duration_millis("3d").unwrap_err().to_string().contains("unknown unit"));
        assert!(parse_duration_millis("s").unwrap_err().to_string().contains("number"));
        assert!(parse_duration_millis("99999999999h").unwrap_err().to_string().contains("longer"));
    }
}
