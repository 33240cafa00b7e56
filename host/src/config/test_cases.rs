//! `[[tests]]`: tests of a topology written in its own TOML, which
//! `squall test` runs (see `cli::test` and docs/topology.md, "Testing a
//! topology"). `squall run` and `squall validate` read and check them too,
//! and run none.
//!
//! ```toml
//! [[tests]]
//! name = "a sentence is split into its words"
//! advance = "30s"                      # simulated time, after the inputs
//!
//! [[tests.inputs]]
//! spout = "sentences"                  # or bolt = "count": injected at a bolt
//! tuples = [["a b a"]]                 # each an array, or a table by field name
//!
//! [[tests.expect]]
//! outputs_of = "split"                 # or inputs_of = "sink", trees_of = "sentences"
//! equals = [{ word = "a" }, { word = "b" }, { word = "a" }]
//! ```
//!
//! Every name is checked here against the topology's spouts and bolts, at
//! the place it is written; streams and fields are checked when the test
//! runs (they need the plugins).

use super::defaults::keys;
use super::diagnostic::Loc;
use super::walk::{Section, Value, Walker};
use toml::de::DeValue;

/// One `[[tests]]` table.
#[derive(Clone, Debug, PartialEq)]
pub struct TestDecl {
    /// `name`.
    pub name: String,
    /// Where the table starts.
    pub loc: Loc,
    /// `[[tests.inputs]]`, in file order.
    pub inputs: Vec<TestInput>,
    /// `advance`: how far the simulated clock moves once the inputs are
    /// processed, in milliseconds (0: it does not move).
    pub advance_millis: u64,
    /// `[[tests.expect]]`, in file order.
    pub expect: Vec<Expectation>,
    /// `state = "topology"`: the test runs on the topology's `[state]`
    /// backend. By default (`state = "memory"`) it runs on the in-memory
    /// backend, so a test never reads or writes the topology's real state
    /// and gives the same result every time.
    pub topology_state: bool,
}

/// Where the tuples of a [`TestInput`] enter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InputTarget {
    /// `spout = "NAME"`: the spout is replaced by one that emits the tuples.
    Spout(String),
    /// `bolt = "NAME"`: the tuples arrive at the bolt as if from an input.
    Bolt(String),
}

/// One `[[tests.inputs]]` table.
#[derive(Clone, Debug, PartialEq)]
pub struct TestInput {
    /// The spout replaced, or the bolt fed.
    pub target: InputTarget,
    /// `stream`: the spout's stream the tuples are emitted on (`None`:
    /// `default`); for a bolt, the stream of its input they stand for
    /// (`None`: its first input's).
    pub stream: Option<String>,
    /// `from`: for a bolt, the component of its input they stand for
    /// (`None`: its first input's).
    pub from: Option<String>,
    /// `tuples`: each an array (values in field order) or a table (by
    /// field name).
    pub tuples: Vec<toml::Value>,
    /// Where the table starts.
    pub loc: Loc,
}

/// What an [`Expectation`] looks at.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Subject {
    /// `outputs_of = "NAME"`: the tuples the component emitted.
    OutputsOf(String),
    /// `inputs_of = "NAME"`: the tuples that reached the bolt (a sink's
    /// view), from every input it subscribes to.
    InputsOf(String),
    /// `trees_of = "NAME"`: the tuple trees of a spout's (or an injected
    /// bolt's) test inputs.
    TreesOf(String),
}

impl Subject {
    /// The component named.
    pub fn component(&self) -> &str {
        match self {
            Subject::OutputsOf(c) | Subject::InputsOf(c) | Subject::TreesOf(c) => c,
        }
    }
}

/// The assertion of an [`Expectation`].
#[derive(Clone, Debug, PartialEq)]
pub enum Check {
    /// `equals = [...]`: exactly these tuples, in this order (or in any
    /// order with `unordered = true`).
    Equals {
        /// The tuples.
        tuples: Vec<toml::Value>,
        /// False with `unordered = true`.
        ordered: bool,
    },
    /// `contains = [...]`: at least these tuples (each as often as listed),
    /// in any order, among others.
    Contains(Vec<toml::Value>),
    /// `count = N`: exactly N tuples.
    Count(u64),
    /// `no_output = true`: no tuple at all.
    NoOutput,
    /// `failed = [...]` and/or `acked = [...]` (with `trees_of`): the trees
    /// of these inputs (by position among the component's test inputs,
    /// from 0) failed, or completed; the lists are exact.
    Trees {
        /// `failed`.
        failed: Option<Vec<u64>>,
        /// `acked`.
        acked: Option<Vec<u64>>,
    },
}

/// One `[[tests.expect]]` table.
#[derive(Clone, Debug, PartialEq)]
pub struct Expectation {
    /// What it looks at.
    pub subject: Subject,
    /// `stream`: only the tuples on this stream (`None`: `default` for
    /// `outputs_of`; every input for `inputs_of`).
    pub stream: Option<String>,
    /// The assertion.
    pub check: Check,
    /// Where the table starts.
    pub loc: Loc,
}

/// The names of the topology's spouts and bolts, which the tests may name.
pub(crate) struct Names<'a> {
    pub spouts: Vec<&'a str>,
    pub bolts: Vec<&'a str>,
}

/// Reads the top-level `tests` array of tables.
pub(crate) fn read_tests(
    w: &mut Walker<'_>,
    value: Option<&Value<'_>>,
    names: &Names<'_>,
) -> Vec<TestDecl> {
    let Some(value) = value else { return Vec::new() };
    let Some(items) = array(w, value, "\"tests\"", "an array of tables ([[tests]])") else {
        return Vec::new();
    };
    let mut tests = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let context = format!("test {}", i + 1);
        let Some(table) = w.table(item, &context) else { continue };
        let s = Section::new(table, item.span(), context);
        if let Some(test) = read_test(w, &s, item, names, i) {
            tests.push(test);
        }
    }
    for (i, test) in tests.iter().enumerate() {
        if tests[..i].iter().any(|t| t.name == test.name) {
            w.error_at(test.loc, format!("two tests are named {:?}", test.name), None);
        }
    }
    tests
}

fn array<'v, 'i>(
    w: &mut Walker<'_>,
    value: &'v Value<'i>,
    what: &str,
    expected: &str,
) -> Option<&'v toml::de::DeArray<'i>> {
    match value.get_ref() {
        DeValue::Array(items) => Some(items),
        _ => {
            w.wrong_type(value, what, expected);
            None
        }
    }
}

/// One `[[tests]]` table: its name, inputs, simulated time, state backend
/// and expectations.
fn read_test(
    w: &mut Walker<'_>,
    s: &Section<'_, '_>,
    item: &Value<'_>,
    names: &Names<'_>,
    index: usize,
) -> Option<TestDecl> {
    s.check_keys(w, keys::TEST);
    let loc = w.loc(&item.span());
    let name = test_name(w, s, index);
    let context = format!("test {name:?}");
    let advance_millis = read_advance(w, s, &context)?;
    let topology_state = read_test_state(w, s, &context)?;
    let inputs = read_inputs(w, s, &context, names);
    let expect = read_expects(w, s, &context, names);
    Some(TestDecl { name, loc, inputs, advance_millis, expect, topology_state })
}

/// A test's `name`; a test without one (an error) is called by its
/// position, `test N`.
fn test_name(w: &mut Walker<'_>, s: &Section<'_, '_>, index: usize) -> String {
    match s.string(w, "name") {
        Some(name) => name.into_inner(),
        None => {
            if s.get("name").is_none() {
                s.missing(w, "name", Some("every test has a name = \"...\"".into()));
            }
            format!("test {}", index + 1)
        }
    }
}

/// A test's `advance` in milliseconds (0 when absent or invalid); `None`
/// when it is not a string.
fn read_advance(w: &mut Walker<'_>, s: &Section<'_, '_>, context: &str) -> Option<u64> {
    let Some(value) = s.get("advance") else { return Some(0) };
    let what = format!("\"advance\" in {context}");
    let text = w.string(value, &what)?;
    match super::window::parse_duration_millis(&text) {
        Ok(ms) => Some(ms),
        Err(e) => {
            let help = "write a whole number and a unit: \"500ms\", \"30s\", \"5m\", \"1h\"";
            w.error(&value.span(), format!("{what} is invalid: {e}"), Some(help.into()));
            Some(0)
        }
    }
}

/// A test's `state`: true for `"topology"`, false for `"memory"` (the
/// default) or an unknown name; `None` when it is not a string.
fn read_test_state(w: &mut Walker<'_>, s: &Section<'_, '_>, context: &str) -> Option<bool> {
    let Some(value) = s.get("state") else { return Some(false) };
    let what = format!("\"state\" in {context}");
    match w.string(value, &what)?.as_str() {
        "memory" => Some(false),
        "topology" => Some(true),
        other => {
            let help = "\"memory\" (the default: the in-memory backend, empty at each \
                        test) or \"topology\" (the topology's [state] backend)";
            w.error(
                &value.span(),
                format!("{what} is {other:?}: expected \"memory\" or \"topology\""),
                Some(help.into()),
            );
            Some(false)
        }
    }
}

/// A test's `[[tests.inputs]]` tables, in file order (those in error
/// left out).
fn read_inputs(
    w: &mut Walker<'_>,
    s: &Section<'_, '_>,
    context: &str,
    names: &Names<'_>,
) -> Vec<TestInput> {
    let mut inputs = Vec::new();
    let Some(value) = s.get("inputs") else { return inputs };
    let what = format!("\"inputs\" in {context}");
    for (i, item) in array(w, value, &what, "an array of tables").into_iter().flatten().enumerate()
    {
        let ctx = format!("input {} of {context}", i + 1);
        let Some(table) = w.table(item, &ctx) else { continue };
        let s = Section::new(table, item.span(), ctx);
        if let Some(input) = read_input(w, &s, item, names) {
            inputs.push(input);
        }
    }
    inputs
}

/// A test's `[[tests.expect]]` tables, in file order (those in error left
/// out); a test without any is an error.
fn read_expects(
    w: &mut Walker<'_>,
    s: &Section<'_, '_>,
    context: &str,
    names: &Names<'_>,
) -> Vec<Expectation> {
    let mut expect = Vec::new();
    let Some(value) = s.get("expect") else {
        s.missing(w, "expect", Some("add [[tests.expect]] tables: what must come out".into()));
        return expect;
    };
    let what = format!("\"expect\" in {context}");
    for (i, item) in array(w, value, &what, "an array of tables").into_iter().flatten().enumerate()
    {
        let ctx = format!("expectation {} of {context}", i + 1);
        let Some(table) = w.table(item, &ctx) else { continue };
        let s = Section::new(table, item.span(), ctx);
        if let Some(e) = read_expect(w, &s, item, names) {
            expect.push(e);
        }
    }
    expect
}

/// The component named under `key`, checked against `known`.
fn named(
    w: &mut Walker<'_>,
    s: &Section<'_, '_>,
    key: &str,
    known: &[&str],
    kind: &str,
) -> Option<String> {
    let text = s.string(w, key)?;
    if !known.contains(&text.get_ref().as_str()) {
        let help =
            super::suggest::did_you_mean(text.get_ref(), known.iter().copied()).or_else(|| {
                Some(format!("the topology's {kind}s: {}", super::walk::quoted_list(known)))
            });
        let message =
            format!("{} names no {kind} of the topology: {:?}", s.what(key), text.get_ref());
        w.error(&text.span(), message, help);
        return None;
    }
    Some(text.into_inner())
}

/// One `[[tests.inputs]]` table: where its tuples enter, and the tuples.
fn read_input(
    w: &mut Walker<'_>,
    s: &Section<'_, '_>,
    item: &Value<'_>,
    names: &Names<'_>,
) -> Option<TestInput> {
    s.check_keys(w, keys::TEST_INPUT);
    let target = input_target(w, s, item, names)?;
    let stream = s.string(w, "stream").map(|t| t.into_inner());
    let from = match (&target, s.get("from")) {
        (_, None) => None,
        (InputTarget::Bolt(_), Some(_)) => {
            let mut all = names.spouts.clone();
            all.extend(&names.bolts);
            Some(named(w, s, "from", &all, "component")?)
        }
        (InputTarget::Spout(_), Some(value)) => {
            w.error(&value.span(), format!("{} is for bolt inputs only", s.what("from")), None);
            None
        }
    };
    let tuples = match s.get("tuples") {
        Some(value) => read_tuples(w, value, &s.what("tuples"))?,
        None => {
            s.missing(w, "tuples", Some("tuples = [[\"a value\"], ...]".into()));
            return None;
        }
    };
    Some(TestInput { target, stream, from, tuples, loc: w.loc(&item.span()) })
}

/// Where an input's tuples enter: exactly one of `spout` and `bolt`,
/// naming one of the topology's.
fn input_target(
    w: &mut Walker<'_>,
    s: &Section<'_, '_>,
    item: &Value<'_>,
    names: &Names<'_>,
) -> Option<InputTarget> {
    match (s.get("spout").is_some(), s.get("bolt").is_some()) {
        (true, false) => Some(InputTarget::Spout(named(w, s, "spout", &names.spouts, "spout")?)),
        (false, true) => Some(InputTarget::Bolt(named(w, s, "bolt", &names.bolts, "bolt")?)),
        (true, true) => {
            w.error(&item.span(), format!("{} names both a spout and a bolt", s.context), None);
            None
        }
        (false, false) => {
            s.missing(w, "spout", Some("name the spout it replaces, or bolt = \"...\"".into()));
            None
        }
    }
}

/// A list of tuples: each an array or a table.
fn read_tuples(w: &mut Walker<'_>, value: &Value<'_>, what: &str) -> Option<Vec<toml::Value>> {
    let items = array(w, value, what, "an array of tuples")?;
    let mut out = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let path = format!("{what}[{i}]");
        if !matches!(item.get_ref(), DeValue::Array(_) | DeValue::Table(_)) {
            w.wrong_type(item, &path, "a tuple: an array of values or a table by field name");
            continue;
        }
        if let Some(v) = w.user_value(item, &format!("[{i}]"), what) {
            out.push(v);
        }
    }
    Some(out)
}

/// The subject keys of an expectation, with the names they may take.
const SUBJECTS: [&str; 3] = ["outputs_of", "inputs_of", "trees_of"];
/// The check keys of an expectation (`unordered` goes with `equals`;
/// `failed` and `acked` may go together).
const CHECKS: [&str; 6] = ["equals", "contains", "count", "no_output", "failed", "acked"];

/// One `[[tests.expect]]` table: what it looks at, and its one assertion.
fn read_expect(
    w: &mut Walker<'_>,
    s: &Section<'_, '_>,
    item: &Value<'_>,
    names: &Names<'_>,
) -> Option<Expectation> {
    s.check_keys(w, keys::TEST_EXPECT);
    let loc = w.loc(&item.span());
    let subject = read_subject(w, s, item, names)?;
    let stream = s.string(w, "stream").map(|t| t.into_inner());
    let check = read_check(w, s, item, matches!(subject, Subject::TreesOf(_)))?;
    if s.get("unordered").is_some() && !matches!(check, Check::Equals { .. }) {
        w.error(&item.span(), format!("{} goes with equals only", s.what("unordered")), None);
    }
    Some(Expectation { subject, stream, check, loc })
}

/// An expectation's subject: exactly one of `outputs_of`, `inputs_of` and
/// `trees_of`, naming a component it may look at.
fn read_subject(
    w: &mut Walker<'_>,
    s: &Section<'_, '_>,
    item: &Value<'_>,
    names: &Names<'_>,
) -> Option<Subject> {
    let given: Vec<&str> = SUBJECTS.iter().copied().filter(|k| s.get(k).is_some()).collect();
    let mut all = names.spouts.clone();
    all.extend(&names.bolts);
    match given.as_slice() {
        ["outputs_of"] => Some(Subject::OutputsOf(named(w, s, "outputs_of", &all, "component")?)),
        ["inputs_of"] => Some(Subject::InputsOf(named(w, s, "inputs_of", &names.bolts, "bolt")?)),
        ["trees_of"] => Some(Subject::TreesOf(named(w, s, "trees_of", &all, "component")?)),
        [] => {
            let help = "outputs_of = \"COMPONENT\", inputs_of = \"BOLT\" or trees_of = \"SPOUT\"";
            w.error(
                &item.span(),
                format!(
                    "{} says what it looks at in none of outputs_of, inputs_of, trees_of",
                    s.context
                ),
                Some(help.into()),
            );
            None
        }
        _ => {
            w.error(
                &item.span(),
                format!("{} names more than one of outputs_of, inputs_of, trees_of", s.context),
                None,
            );
            None
        }
    }
}

/// An expectation's one assertion; `failed` and `acked` go with `trees_of`
/// (`trees`) and only they do.
fn read_check(
    w: &mut Walker<'_>,
    s: &Section<'_, '_>,
    item: &Value<'_>,
    trees: bool,
) -> Option<Check> {
    let checks: Vec<&str> = CHECKS.iter().copied().filter(|k| s.get(k).is_some()).collect();
    if let Some((message, help)) = misfit(s, &checks, trees) {
        w.error(&item.span(), message, help.map(Into::into));
        return None;
    }
    match checks.as_slice() {
        ["failed"] | ["acked"] | ["failed", "acked"] => {
            Some(Check::Trees { failed: tree_ids(w, s, "failed"), acked: tree_ids(w, s, "acked") })
        }
        ["equals"] => Some(Check::Equals {
            tuples: read_tuples(w, s.get("equals")?, &s.what("equals"))?,
            ordered: !s.bool_or(w, "unordered", false),
        }),
        ["contains"] => {
            Some(Check::Contains(read_tuples(w, s.get("contains")?, &s.what("contains"))?))
        }
        ["count"] => Some(Check::Count(s.uint(w, "count", 0, u64::MAX)?)),
        ["no_output"] => {
            if !s.bool_or(w, "no_output", true) {
                let message = format!("{} must be true (or left out)", s.what("no_output"));
                w.error(&item.span(), message, Some("to expect some output, use count".into()));
                return None;
            }
            Some(Check::NoOutput)
        }
        _ => {
            let message =
                format!("{} has more than one assertion ({})", s.context, checks.join(", "));
            w.error(&item.span(), message, Some("write one [[tests.expect]] per assertion".into()));
            None
        }
    }
}

/// The error (message and help) of assertion keys that do not fit the
/// subject: none at all, `failed` or `acked` without `trees_of` (`trees`),
/// or a single other one with it.
fn misfit(
    s: &Section<'_, '_>,
    checks: &[&str],
    trees: bool,
) -> Option<(String, Option<&'static str>)> {
    let tree_checks = matches!(checks, ["failed"] | ["acked"] | ["failed", "acked"]);
    match checks {
        [] => Some((
            format!("{} asserts nothing", s.context),
            Some("equals, contains, count or no_output; with trees_of, failed or acked"),
        )),
        _ if tree_checks && !trees => Some((
            format!("{} checks trees (failed, acked) without trees_of", s.context),
            Some("trees_of = \"SPOUT\""),
        )),
        [_] if trees && !tree_checks => {
            Some((format!("{} with trees_of takes failed or acked", s.context), None))
        }
        _ => None,
    }
}

/// The input positions listed under `failed` or `acked` (`None`: absent).
fn tree_ids(w: &mut Walker<'_>, s: &Section<'_, '_>, key: &str) -> Option<Vec<u64>> {
    let value = s.get(key)?;
    let items = array(w, value, &s.what(key), "an array of input positions")?;
    let what = s.what(key);
    Some(items.iter().filter_map(|v| w.uint(v, &what, 0, u64::MAX)).collect())
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::config::{parse_str_with_env, Diagnostics, TopologyConfig};

    const TOPOLOGY: &str = r#"[plugins]
ex = "libex.so"

[spouts.numbers]
component = "ex::Numbers"

[bolts.square]
component = "ex::Square"
inputs = [{ from = "numbers" }]
"#;

    fn parse(tests: &str) -> Result<TopologyConfig, Diagnostics> {
        parse_str_with_env(&format!("{TOPOLOGY}{tests}"), Path::new("t.toml"), &|_| None)
    }

    /// Each diagnostic as `line:col message`.
    fn errors(tests: &str) -> Vec<String> {
        match parse(tests) {
            Ok(_) => panic!("expected diagnostics"),
            Err(d) => d.items.iter().map(|d| format!("{} {}", d.loc, d.message)).collect(),
        }
    }

    #[test]
    fn a_test_reads_its_inputs_time_and_every_kind_of_expectation() {
        let config = parse(
            r#"
[[tests]]
name = "squares"
advance = "30s"
[[tests.inputs]]
spout = "numbers"
tuples = [[3], { n = 4 }]
[[tests.inputs]]
bolt = "square"
from = "numbers"
stream = "default"
tuples = [[5]]
[[tests.expect]]
outputs_of = "square"
equals = [{ n = 3, square = 9 }]
unordered = true
[[tests.expect]]
inputs_of = "square"
contains = [[3]]
[[tests.expect]]
outputs_of = "numbers"
count = 2
[[tests.expect]]
outputs_of = "square"
stream = "other"
no_output = true
[[tests.expect]]
trees_of = "numbers"
failed = []
acked = [1, 0]
"#,
        )
        .expect("valid");
        let test = &config.tests[0];
        assert_eq!((test.name.as_str(), test.advance_millis), ("squares", 30_000));
        assert_eq!(test.loc.line, 11);
        assert_eq!(test.inputs[0].target, InputTarget::Spout("numbers".into()));
        assert_eq!(test.inputs[0].tuples.len(), 2);
        assert_eq!(test.inputs[1].target, InputTarget::Bolt("square".into()));
        assert_eq!(test.inputs[1].from.as_deref(), Some("numbers"));
        let checks: Vec<&Check> = test.expect.iter().map(|e| &e.check).collect();
        assert!(matches!(checks[0], Check::Equals { ordered: false, .. }));
        assert!(matches!(checks[1], Check::Contains(t) if t.len() == 1));
        assert_eq!(checks[2], &Check::Count(2));
        assert_eq!(checks[3], &Check::NoOutput);
        assert_eq!(checks[4], &Check::Trees { failed: Some(vec![]), acked: Some(vec![1, 0]) });
        assert_eq!(test.expect[1].subject, Subject::InputsOf("square".into()));
        assert_eq!(test.expect[3].stream.as_deref(), Some("other"));
    }

    #[test]
    fn unknown_keys_and_names_are_reported_at_their_line_and_column() {
        let got = errors(
            r#"
[[tests]]
name = "t"
advnce = "1s"
[[tests.inputs]]
spout = "numbrs"
tuples = [[1]]
[[tests.expect]]
outputs_of = "square"
equal = [[1, 1]]
"#,
        );
        assert_eq!(
            got,
            [
                "13:1 unknown key \"advnce\" in test 1",
                "15:9 \"spout\" in input 1 of test \"t\" names no spout of the topology: \"numbrs\"",
                "17:1 expectation 1 of test \"t\" asserts nothing",
                "19:1 unknown key \"equal\" in expectation 1 of test \"t\"",
            ]
        );
    }

    #[test]
    fn an_expectation_with_two_assertions_or_a_tree_check_without_trees_of_is_refused() {
        let got = errors(
            r#"
[[tests]]
name = "t"
[[tests.expect]]
outputs_of = "square"
count = 1
no_output = true
[[tests.expect]]
outputs_of = "square"
failed = [0]
[[tests.expect]]
trees_of = "numbers"
count = 1
[[tests.inputs]]
tuples = "x"
"#,
        );
        assert_eq!(got.len(), 4, "{got:?}");
        assert!(got[0].contains("has more than one assertion (count, no_output)"), "{got:?}");
        assert!(got[1].contains("checks trees (failed, acked) without trees_of"), "{got:?}");
        assert!(got[2].contains("with trees_of takes failed or acked"), "{got:?}");
        assert!(got[3].contains("missing key \"spout\" in input 1"), "{got:?}");
    }

    #[test]
    fn a_test_needs_a_name_and_expectations_and_names_are_unique() {
        let got = errors("\n[[tests]]\n[[tests]]\nname = \"a\"\nexpect = []\n[[tests]]\nname = \"a\"\nexpect = []\n");
        assert_eq!(got.len(), 3, "{got:?}");
        assert!(
            got.iter().any(|e| e.starts_with("11:1 missing key \"name\" in test 1")),
            "{got:?}"
        );
        assert!(got.iter().any(|e| e.starts_with("11:1 missing key \"expect\"")), "{got:?}");
        assert_eq!(got[2], "15:1 two tests are named \"a\"");
    }
}
