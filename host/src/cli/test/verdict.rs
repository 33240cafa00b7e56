//! The pure half of `squall test`: does what a run produced satisfy one
//! `[[tests.expect]]`, and if not, the readable diff. No threads, no
//! plugins: what the run produced comes in as [`Seen`] tuples.

use std::fmt::Write as _;

use squall_plugin_api::Value;

use crate::config::Check;

/// A tuple a component emitted (or a bolt received): its field names and
/// its values.
#[derive(Debug, Clone, PartialEq)]
pub struct Seen {
    /// The stream's field names, in order.
    pub fields: Vec<String>,
    /// The values.
    pub values: Vec<Value>,
}

/// Checks `seen` against `check` (not [`Check::Trees`], see [`trees`]):
/// `None` when it holds, else the lines that say why.
pub fn tuples(check: &Check, seen: &[Seen]) -> Option<Vec<String>> {
    match check {
        Check::Equals { tuples, ordered: true } => ordered_diff(tuples, seen),
        Check::Equals { tuples, ordered: false } => unordered_diff(tuples, seen, false),
        Check::Contains(tuples) => unordered_diff(tuples, seen, true),
        Check::Count(n) if seen.len() as u64 == *n => None,
        Check::Count(n) => {
            let mut lines = vec![format!("expected {n} tuple(s), got {}:", seen.len())];
            lines.extend(listed(seen, None));
            Some(lines)
        }
        Check::NoOutput if seen.is_empty() => None,
        Check::NoOutput => {
            let mut lines = vec![format!("expected no output, got {} tuple(s):", seen.len())];
            lines.extend(listed(seen, None));
            Some(lines)
        }
        Check::Trees { .. } => Some(vec!["trees are checked with trees_of".into()]),
    }
}

/// Checks the input positions whose trees failed and completed against
/// `failed` and `acked` (each exact when given); `pending` are the
/// positions neither acked nor failed.
pub fn trees(
    want_failed: Option<&[u64]>,
    want_acked: Option<&[u64]>,
    failed: &[u64],
    acked: &[u64],
    pending: &[u64],
) -> Option<Vec<String>> {
    let mut lines = Vec::new();
    for (what, want, got) in [("failed", want_failed, failed), ("acked", want_acked, acked)] {
        let Some(want) = want else { continue };
        let mut want = want.to_vec();
        want.sort_unstable();
        if want != got {
            lines.push(format!("expected the trees of inputs {want:?} {what}, got {got:?}"));
        }
    }
    if lines.is_empty() {
        return None;
    }
    lines.push(format!(
        "(failed: {failed:?}; acked: {acked:?}; still pending when the run stopped: {pending:?})"
    ));
    Some(lines)
}

/// At most this many tuples are listed when a count or no_output fails.
const LISTED: usize = 20;

fn listed(seen: &[Seen], like: Option<&toml::Value>) -> Vec<String> {
    let mut lines: Vec<String> =
        seen.iter().take(LISTED).map(|s| format!("  + {}", render_seen(s, like))).collect();
    if seen.len() > LISTED {
        lines.push(format!("  ... and {} more", seen.len() - LISTED));
    }
    lines
}

/// The largest lists diffed line by line (the diff is quadratic).
const DIFF_LIMIT: usize = 4000;

/// Exactly `want`, in order: a line diff (longest common subsequence).
fn ordered_diff(want: &[toml::Value], seen: &[Seen]) -> Option<Vec<String>> {
    let (n, m) = (want.len(), seen.len());
    if n == m && want.iter().zip(seen).all(|(w, s)| matches(w, s)) {
        return None;
    }
    let head = format!("expected {n} tuple(s) in this order, got {m} (- expected, + got):");
    if n > DIFF_LIMIT || m > DIFF_LIMIT {
        let first = want.iter().zip(seen).position(|(w, s)| !matches(w, s)).unwrap_or(n.min(m));
        let mut lines = vec![head, format!("  the first difference is at position {first}")];
        if let Some(w) = want.get(first) {
            lines.push(format!("  - {}", render_expected(w, seen.get(first))));
        }
        if let Some(s) = seen.get(first) {
            lines.push(format!("  + {}", render_seen(s, want.get(first))));
        }
        return Some(lines);
    }
    // lcs[i][j]: the longest common subsequence of want[i..] and seen[j..].
    let mut lcs = vec![vec![0u32; m + 1]; n + 1];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            lcs[i][j] = if matches(&want[i], &seen[j]) {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let mut lines = vec![head];
    let (mut i, mut j) = (0, 0);
    while i < n || j < m {
        if i < n && j < m && matches(&want[i], &seen[j]) {
            lines.push(format!("    {}", render_seen(&seen[j], Some(&want[i]))));
            i += 1;
            j += 1;
        } else if j < m && (i == n || lcs[i][j + 1] >= lcs[i + 1][j]) {
            lines.push(format!("  + {}", render_seen(&seen[j], want.get(i))));
            j += 1;
        } else {
            let near = seen.get(j).or_else(|| seen.last());
            lines.push(format!("  - {}", render_expected(&want[i], near)));
            i += 1;
        }
    }
    Some(lines)
}

/// `want` in any order: exactly (`contains` false) or among others.
fn unordered_diff(want: &[toml::Value], seen: &[Seen], contains: bool) -> Option<Vec<String>> {
    let mut used = vec![false; seen.len()];
    let mut missing = Vec::new();
    for w in want {
        match (0..seen.len()).find(|&j| !used[j] && matches(w, &seen[j])) {
            Some(j) => used[j] = true,
            None => missing.push(w),
        }
    }
    let extra: Vec<&Seen> = seen.iter().zip(&used).filter(|(_, u)| !**u).map(|(s, _)| s).collect();
    if missing.is_empty() && (contains || extra.is_empty()) {
        return None;
    }
    let like = want.first();
    let mut lines = vec![if contains {
        format!(
            "{} of {} expected tuple(s) missing among the {} got:",
            missing.len(),
            want.len(),
            seen.len()
        )
    } else {
        format!(
            "expected {} tuple(s) in any order, got {}: {} missing (-), {} unexpected (+):",
            want.len(),
            seen.len(),
            missing.len(),
            extra.len()
        )
    }];
    lines.extend(missing.iter().map(|w| format!("  - {}", render_expected(w, seen.first()))));
    let shown = if contains { &[][..] } else { &extra[..] };
    lines.extend(shown.iter().take(LISTED).map(|s| format!("  + {}", render_seen(s, like))));
    if shown.len() > LISTED {
        lines.push(format!("  ... and {} more", shown.len() - LISTED));
    }
    if contains && !extra.is_empty() {
        lines.push("  got:".into());
        lines.extend(seen.iter().take(LISTED).map(|s| format!("  + {}", render_seen(s, like))));
    }
    Some(lines)
}

/// True when `seen` is the tuple `want` describes: an array of its values
/// in order, or a table of every field by name.
pub fn matches(want: &toml::Value, seen: &Seen) -> bool {
    match want {
        toml::Value::Array(items) => {
            items.len() == seen.values.len()
                && items.iter().zip(&seen.values).all(|(w, v)| value_eq(w, v))
        }
        toml::Value::Table(table) => {
            table.len() == seen.fields.len()
                && seen
                    .fields
                    .iter()
                    .zip(&seen.values)
                    .all(|(f, v)| table.get(f).is_some_and(|w| value_eq(w, v)))
        }
        _ => false,
    }
}

/// One value: integers compare by number whatever their width and sign,
/// floats by value, strings by text (inline, heap or shared alike), bytes
/// against an array of integers.
pub fn value_eq(want: &toml::Value, got: &Value) -> bool {
    use toml::Value as T;
    match (want, got) {
        (T::Integer(w), Value::I64(g)) => w == g,
        (T::Integer(w), Value::U64(g)) => u64::try_from(*w).is_ok_and(|w| w == *g),
        (T::Integer(w), Value::F64(g)) => (*w as f64) == *g,
        (T::Float(w), Value::F64(g)) => w == g || (w.is_nan() && g.is_nan()),
        (T::Float(w), Value::I64(g)) => *w == *g as f64,
        (T::Float(w), Value::U64(g)) => *w == *g as f64,
        (T::Boolean(w), Value::Bool(g)) => w == g,
        (T::String(w), g) => g.as_str() == Some(w.as_str()),
        (T::Datetime(w), g) => g.as_str() == Some(w.to_string().as_str()),
        (T::Array(items), g) => {
            if let Some(bytes) = g.as_bytes() {
                items.len() == bytes.len()
                    && items.iter().zip(bytes).all(|(w, b)| *w == T::Integer(i64::from(*b)))
            } else if let Some(list) = g.as_list() {
                items.len() == list.len() && items.iter().zip(list).all(|(w, v)| value_eq(w, v))
            } else {
                false
            }
        }
        _ => false,
    }
}

/// A seen tuple, written as `like` is written (a table by field name, or
/// an array), a table when there is nothing to go by.
pub fn render_seen(seen: &Seen, like: Option<&toml::Value>) -> String {
    if matches!(like, Some(toml::Value::Array(_))) {
        let values: Vec<String> = seen.values.iter().map(render_value).collect();
        return format!("[{}]", values.join(", "));
    }
    let pairs: Vec<String> = seen
        .fields
        .iter()
        .zip(&seen.values)
        .map(|(f, v)| format!("{} = {}", key(f), render_value(v)))
        .collect();
    if pairs.is_empty() {
        "{}".into()
    } else {
        format!("{{ {} }}", pairs.join(", "))
    }
}

/// An expected tuple; a table's keys in the order of `near`'s fields (the
/// tuple it is shown beside), the others after.
pub fn render_expected(want: &toml::Value, near: Option<&Seen>) -> String {
    match want {
        toml::Value::Table(table) => {
            let mut keys: Vec<&String> = table.keys().collect();
            if let Some(near) = near {
                let at = |k: &String| near.fields.iter().position(|f| f == k).unwrap_or(usize::MAX);
                keys.sort_by_key(|k| at(k));
            }
            let pairs: Vec<String> =
                keys.iter().map(|k| format!("{} = {}", key(k), render_toml(&table[*k]))).collect();
            if pairs.is_empty() {
                "{}".into()
            } else {
                format!("{{ {} }}", pairs.join(", "))
            }
        }
        other => render_toml(other),
    }
}

fn key(name: &str) -> String {
    let bare =
        !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if bare {
        name.to_owned()
    } else {
        format!("{name:?}")
    }
}

fn render_toml(value: &toml::Value) -> String {
    match value {
        toml::Value::String(s) => format!("{s:?}"),
        toml::Value::Array(items) => {
            let items: Vec<String> = items.iter().map(render_toml).collect();
            format!("[{}]", items.join(", "))
        }
        toml::Value::Table(t) => {
            let pairs: Vec<String> =
                t.iter().map(|(k, v)| format!("{} = {}", key(k), render_toml(v))).collect();
            format!("{{ {} }}", pairs.join(", "))
        }
        other => other.to_string(),
    }
}

/// One value as TOML writes it (strings quoted, lists as arrays; bytes as
/// an array of integers; null, which TOML lacks, as `null`).
pub fn render_value(value: &Value) -> String {
    match value {
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::I64(n) => n.to_string(),
        Value::U64(n) => n.to_string(),
        Value::F64(x) => {
            let mut s = x.to_string();
            if x.is_finite() && !s.contains(['.', 'e']) {
                s.push_str(".0");
            }
            s
        }
        Value::List(items) => {
            let items: Vec<String> = items.iter().map(render_value).collect();
            format!("[{}]", items.join(", "))
        }
        other => match (other.as_str(), other.as_bytes()) {
            (Some(s), _) => format!("{s:?}"),
            (None, Some(bytes)) => {
                let mut out = String::from("[");
                for (i, b) in bytes.iter().enumerate() {
                    let _ = write!(out, "{}{b}", if i == 0 { "" } else { ", " });
                }
                out.push(']');
                out
            }
            (None, None) => format!("{other}"),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seen(fields: &[&str], values: Vec<Value>) -> Seen {
        Seen { fields: fields.iter().map(|f| f.to_string()).collect(), values }
    }

    fn toml_tuples(text: &str) -> Vec<toml::Value> {
        let table: toml::Table = toml::from_str(&format!("t = {text}")).expect("valid TOML");
        table["t"].as_array().expect("an array").clone()
    }

    fn squares(pairs: &[(u64, u64)]) -> Vec<Seen> {
        pairs
            .iter()
            .map(|&(n, s)| seen(&["n", "square"], vec![Value::U64(n), Value::U64(s)]))
            .collect()
    }

    #[test]
    fn a_table_matches_every_field_by_name_and_numbers_by_value() {
        let want = toml_tuples("[{ square = 9, n = 3 }, [3, 9]]");
        let got = &squares(&[(3, 9)])[0];
        assert!(matches(&want[0], got));
        assert!(matches(&want[1], got));
        let dropped = seen(&["n"], vec![Value::U64(3)]);
        assert!(!matches(&want[0], &dropped), "a dropped field is a difference");
        assert!(!matches(&want[1], &dropped));
        assert!(value_eq(&toml::Value::String("a".into()), &Value::from("a")));
        assert!(!value_eq(&toml::Value::Integer(-1), &Value::U64(u64::MAX)));
    }

    #[test]
    fn an_ordered_diff_marks_what_is_missing_and_what_came_instead() {
        let want =
            toml_tuples("[{ n = 1, square = 1 }, { n = 2, square = 4 }, { n = 3, square = 9 }]");
        assert_eq!(
            tuples(
                &Check::Equals { tuples: want.clone(), ordered: true },
                &squares(&[(1, 1), (2, 4), (3, 9)])
            ),
            None
        );
        let lines = tuples(
            &Check::Equals { tuples: want, ordered: true },
            &squares(&[(1, 1), (3, 9), (2, 5)]),
        )
        .expect("differs");
        assert_eq!(
            lines[1..],
            [
                "    { n = 1, square = 1 }",
                "  - { n = 2, square = 4 }",
                "    { n = 3, square = 9 }",
                "  + { n = 2, square = 5 }",
            ]
        );
    }

    #[test]
    fn unordered_contains_count_and_no_output_say_what_differs() {
        let want = toml_tuples("[[3, 9], [1, 1]]");
        let got = squares(&[(1, 1), (3, 9)]);
        assert_eq!(tuples(&Check::Equals { tuples: want.clone(), ordered: false }, &got), None);
        assert_eq!(tuples(&Check::Contains(want[..1].to_vec()), &got), None);
        let more = squares(&[(1, 1), (3, 9), (4, 16)]);
        let lines = tuples(&Check::Equals { tuples: want.clone(), ordered: false }, &more).unwrap();
        assert_eq!(lines[1..], ["  + [4, 16]"]);
        let lines = tuples(&Check::Contains(toml_tuples("[[5, 25]]")), &got).unwrap();
        assert!(lines[0].starts_with("1 of 1 expected tuple(s) missing"), "{lines:?}");
        assert_eq!(lines[1], "  - [5, 25]");
        assert_eq!(tuples(&Check::Count(2), &got), None);
        assert_eq!(tuples(&Check::Count(3), &got).unwrap()[0], "expected 3 tuple(s), got 2:");
        assert_eq!(tuples(&Check::NoOutput, &[]), None);
        assert_eq!(tuples(&Check::NoOutput, &got).unwrap()[1], "  + { n = 1, square = 1 }");
    }

    #[test]
    fn trees_are_exact_lists_of_input_positions() {
        assert_eq!(trees(Some(&[1]), Some(&[2, 0]), &[1], &[0, 2], &[]), None);
        let lines = trees(Some(&[1]), None, &[], &[0, 2], &[1]).unwrap();
        assert_eq!(lines[0], "expected the trees of inputs [1] failed, got []");
        assert!(lines[1].contains("still pending when the run stopped: [1]"), "{lines:?}");
    }
}
