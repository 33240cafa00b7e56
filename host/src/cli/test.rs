//! `squall test TOPOLOGY.toml`: runs the topology's `[[tests]]` (see
//! `config::test_cases`) one after the other, each on a fresh in-process
//! run of the real plugins on simulated time ([`crate::harness`]), checks
//! every expectation ([`verdict`]), prints a diff for each that fails, and
//! writes JUnit XML with `--junit`.
//!
//! Every spout is replaced during a test: by its inputs when the test gives
//! some, by nothing otherwise, so only the test's tuples enter.

mod verdict;

use std::fmt::Write as _;
use std::path::Path;
use std::time::{Duration, Instant};

use squall_plugin_api::{MessageId, Value};

use super::Failure;
use crate::config::{
    Check, Expectation, InputTarget, Loc, Override, Subject, TestDecl, TopologyConfig,
};
use crate::harness::{injector, Completed, FedTuple, Harness, HarnessError};
use verdict::Seen;

/// How long one test may run (real time) before it fails.
pub const TEST_TIMEOUT: Duration = Duration::from_secs(120);

/// The outcome of one test.
#[derive(Debug)]
struct Outcome {
    name: String,
    /// Why it failed, one line each (empty: it passed).
    failures: Vec<String>,
    took: Duration,
}

/// Runs the tests of the topology at `path` (those whose name contains
/// `only`), prints the results, and writes them to `junit` as JUnit XML.
///
/// # Errors
/// [`Failure::Config`] for an invalid file or one with no `[[tests]]`,
/// [`Failure::Load`] and [`Failure::Start`] when the plugins cannot be
/// loaded or built, [`Failure::Other`] when a test fails (exit 1) or the
/// XML cannot be written.
pub fn test(
    path: &Path,
    sets: &[Override],
    junit: Option<&Path>,
    only: Option<&str>,
) -> Result<(), Failure> {
    let config = crate::config::load_partial(path, sets)
        .map_err(|(diags, config)| super::with_plugin_checks(diags, config.as_deref()))?;
    if config.tests.is_empty() {
        let mut d = crate::config::Diagnostics::new();
        let help = "add [[tests]] tables (docs/topology.md, \"Testing a topology\")";
        d.push(path, Loc::START, format!("{} has no [[tests]]", path.display()), Some(help.into()));
        return Err(Failure::Config(d));
    }
    // The plugins load as for `squall run`, once, before any test (no
    // constructor runs: each test builds its own instances, and the
    // spouts', which the tests replace, never).
    super::bind(&config)?;
    let chosen: Vec<&TestDecl> =
        config.tests.iter().filter(|t| only.is_none_or(|o| t.name.contains(o))).collect();
    let started = Instant::now();
    let mut outcomes = Vec::new();
    for test in chosen {
        let outcome = run_one(&config, test)?;
        print_outcome(&outcome);
        outcomes.push(outcome);
    }
    summarise(&config, &outcomes, started.elapsed(), junit)
}

/// Prints one test's result, and why it failed.
fn print_outcome(outcome: &Outcome) {
    if outcome.failures.is_empty() {
        println!("test {:?} ... ok", outcome.name);
    } else {
        println!("test {:?} ... FAILED", outcome.name);
        for line in &outcome.failures {
            println!("  {line}");
        }
    }
}

/// Prints the result line of the tests run in `took`, writes the JUnit
/// XML to `junit` if asked, and fails when a test failed.
fn summarise(
    config: &TopologyConfig,
    outcomes: &[Outcome],
    took: Duration,
    junit: Option<&Path>,
) -> Result<(), Failure> {
    let failed = outcomes.iter().filter(|o| !o.failures.is_empty()).count();
    let passed = outcomes.len() - failed;
    println!(
        "\ntest result: {}. {passed} passed; {failed} failed; {} filtered out; finished in {:.2}s",
        if failed == 0 { "ok" } else { "FAILED" },
        config.tests.len() - outcomes.len(),
        took.as_secs_f64()
    );
    if let Some(file) = junit {
        let xml = junit_xml(&config.name, outcomes);
        std::fs::write(file, xml).map_err(|e| {
            Failure::Other(anyhow::anyhow!("cannot write --junit {}: {e}", file.display()))
        })?;
    }
    if failed > 0 {
        return Err(Failure::Other(anyhow::anyhow!(
            "{failed} of {} test(s) failed",
            outcomes.len()
        )));
    }
    Ok(())
}

/// `file:line:col` of `loc`.
fn at(config: &TopologyConfig, loc: Loc) -> String {
    format!("{}:{}:{}", config.sources.name(loc).display(), loc.line, loc.col)
}

/// Runs one test; a plugin that fails to load or build stops everything
/// (it did for the first test too, so it is not the test's fault).
fn run_one(config: &TopologyConfig, test: &TestDecl) -> Result<Outcome, Failure> {
    let started = Instant::now();
    let mut failures = Vec::new();
    let config = &test_config(config, test);
    let harness = Harness::from_config(config.clone())
        .silence_unfed_spouts()
        .simulated_time(Duration::from_millis(test.advance_millis));
    let harness = feed(harness, config, test, &mut failures);
    let outcome = |failures| Outcome { name: test.name.clone(), failures, took: started.elapsed() };
    if !failures.is_empty() {
        return Ok(outcome(failures));
    }
    let completed = match complete(harness)? {
        Ok(done) => done,
        Err(e) => {
            failures.push(format!("{}: {e}", at(config, test.loc)));
            return Ok(outcome(failures));
        }
    };
    for expectation in &test.expect {
        if let Some(lines) = check(config, test, expectation, &completed) {
            failures.push(format!("{}: {}", at(config, expectation.loc), describe(expectation)));
            failures.extend(lines.into_iter().map(|l| format!("  {l}")));
        }
    }
    Ok(outcome(failures))
}

/// The topology as `test` runs it: hermetic unless it asks for the
/// topology's state, on the in-memory backend, empty at each test, never
/// the topology's real state (a second run would start from the first's).
fn test_config(config: &TopologyConfig, test: &TestDecl) -> TopologyConfig {
    let mut config = config.clone();
    if !test.topology_state {
        if let Some(state) = config.state.as_mut() {
            state.backend = crate::config::BackendDecl::Memory;
            state.config = String::new();
            state.config_keys.clear();
        }
    }
    config
}

/// Hands the harness the test's inputs; an input whose tuples cannot be
/// fed is a failure of the test, pushed onto `failures`.
fn feed(
    mut harness: Harness,
    config: &TopologyConfig,
    test: &TestDecl,
    failures: &mut Vec<String>,
) -> Harness {
    for input in &test.inputs {
        let tuples = match fed_tuples(&input.tuples) {
            Ok(tuples) => tuples,
            Err(e) => {
                failures.push(format!("{}: {e}", at(config, input.loc)));
                continue;
            }
        };
        harness = match &input.target {
            InputTarget::Spout(spout) => {
                harness.feed_tuples(spout, input.stream.as_deref(), tuples)
            }
            InputTarget::Bolt(bolt) => {
                harness.inject(bolt, input.from.as_deref(), input.stream.as_deref(), tuples)
            }
        };
    }
    harness
}

/// Runs the harness until the run completes. A topology that cannot load
/// or start is an error of every test (`Err`); a misused harness, a failed
/// run or a timeout fails this test (`Ok(Err(why))`).
fn complete(harness: Harness) -> Result<Result<Completed, String>, Failure> {
    match harness.run_until_complete(TEST_TIMEOUT) {
        Ok(done) => Ok(Ok(done)),
        Err(HarnessError::Config(d)) => Err(Failure::Config(d)),
        Err(HarnessError::Load(e)) => Err(Failure::Load(e)),
        Err(HarnessError::Start(e)) => Err(Failure::Start(e)),
        Err(HarnessError::Usage(e)) => Ok(Err(e.to_string())),
        Err(e @ (HarnessError::Run { .. } | HarnessError::Timeout { .. })) => {
            Ok(Err(e.to_string()))
        }
    }
}

/// What an expectation looks at, for its failure's first line.
fn describe(e: &Expectation) -> String {
    let stream = e.stream.as_ref().map(|s| format!(" on stream {s:?}")).unwrap_or_default();
    match &e.subject {
        Subject::OutputsOf(c) => {
            let stream = e.stream.as_deref().unwrap_or(squall_plugin_api::DEFAULT_STREAM);
            format!("the outputs of {c:?} on stream {stream:?}")
        }
        Subject::InputsOf(c) => format!("the inputs of {c:?}{stream}"),
        Subject::TreesOf(c) => format!("the trees of the inputs of {c:?}"),
    }
}

/// A table where a tuple holds a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("a table is not a tuple value")]
struct TableValue;

/// Why a test's tuple cannot be fed (its position in the input's list).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
enum BadTuple {
    /// A value of it is a table.
    #[error("tuple {0}: {TableValue}")]
    TableValue(usize),
    /// Neither an array nor a table.
    #[error("tuple {0} is neither an array nor a table")]
    NotATuple(usize),
}

/// The TOML tuples as harness tuples.
fn fed_tuples(tuples: &[toml::Value]) -> Result<Vec<FedTuple>, BadTuple> {
    tuples
        .iter()
        .enumerate()
        .map(|(i, t)| match t {
            toml::Value::Array(items) => items
                .iter()
                .map(to_value)
                .collect::<Result<_, _>>()
                .map(FedTuple::Values)
                .map_err(|TableValue| BadTuple::TableValue(i)),
            toml::Value::Table(table) => table
                .iter()
                .map(|(k, v)| Ok((k.clone(), to_value(v)?)))
                .collect::<Result<_, _>>()
                .map(FedTuple::Named)
                .map_err(|TableValue| BadTuple::TableValue(i)),
            _ => Err(BadTuple::NotATuple(i)),
        })
        .collect()
}

/// One TOML value as a tuple value: integers are `I64`, arrays lists.
fn to_value(value: &toml::Value) -> Result<Value, TableValue> {
    Ok(match value {
        toml::Value::String(s) => Value::from(s.as_str()),
        toml::Value::Integer(n) => Value::I64(*n),
        toml::Value::Float(x) => Value::F64(*x),
        toml::Value::Boolean(b) => Value::Bool(*b),
        toml::Value::Datetime(d) => Value::from(d.to_string().as_str()),
        toml::Value::Array(items) => {
            Value::List(items.iter().map(to_value).collect::<Result<Vec<_>, _>>()?.into())
        }
        toml::Value::Table(_) => return Err(TableValue),
    })
}

/// Checks one expectation against what the run produced.
fn check(
    config: &TopologyConfig,
    test: &TestDecl,
    expectation: &Expectation,
    done: &Completed,
) -> Option<Vec<String>> {
    if let (Subject::TreesOf(component), Check::Trees { failed, acked }) =
        (&expectation.subject, &expectation.check)
    {
        let key = if config.spouts.iter().any(|s| s.decl.name == *component) {
            component.clone()
        } else {
            injector(component)
        };
        let given = test
            .inputs
            .iter()
            .filter(|i| matches!(&i.target, InputTarget::Spout(s) | InputTarget::Bolt(s) if s == component))
            .count();
        if given == 0 {
            return Some(vec![format!("the test gives {component:?} no inputs: it has no trees")]);
        }
        let positions = |ids: Option<&Vec<MessageId>>| -> Vec<u64> {
            ids.map(|ids| ids.iter().map(|id| id.0).collect()).unwrap_or_default()
        };
        return verdict::trees(
            failed.as_deref(),
            acked.as_deref(),
            &positions(done.failed.get(&key)),
            &positions(done.acked.get(&key)),
            &positions(done.pending.get(&key)),
        );
    }
    let seen = match seen(expectation, done) {
        Ok(seen) => seen,
        Err(e) => return Some(vec![e.to_string()]),
    };
    verdict::tuples(&expectation.check, &seen)
}

/// Why an expectation cannot be checked against a run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum Unchecked {
    /// `outputs_of` a stream the component does not emit on.
    #[error(
        "{component:?} emits on no stream {stream:?} (its streams: {})",
        if streams.is_empty() { "none".to_owned() } else { streams.join(", ") }
    )]
    NoStream {
        /// The component.
        component: String,
        /// The stream asked for.
        stream: String,
        /// Its streams, sorted.
        streams: Vec<String>,
    },
    /// `inputs_of` a stream the bolt does not receive.
    #[error("{bolt:?} has no input on stream {stream:?} (its inputs: {})", inputs.join(", "))]
    NoInput {
        /// The bolt.
        bolt: String,
        /// The stream asked for ("" for any).
        stream: String,
        /// Its inputs, as `"component" stream "stream"`.
        inputs: Vec<String>,
    },
    /// `trees_of` with a tuple assertion.
    #[error("trees_of takes failed or acked")]
    Trees,
}

/// The tuples an `outputs_of` or `inputs_of` expectation looks at.
fn seen(expectation: &Expectation, done: &Completed) -> Result<Vec<Seen>, Unchecked> {
    match &expectation.subject {
        Subject::OutputsOf(component) => {
            let stream = expectation.stream.as_deref().unwrap_or(squall_plugin_api::DEFAULT_STREAM);
            if !done.fields.contains_key(&(component.clone(), stream.to_owned())) {
                let mut streams: Vec<String> = done
                    .fields
                    .keys()
                    .filter(|(c, _)| c == component)
                    .map(|(_, s)| s.clone())
                    .collect();
                streams.sort_unstable();
                let (component, stream) = (component.clone(), stream.to_owned());
                return Err(Unchecked::NoStream { component, stream, streams });
            }
            Ok(emitted(done, component, stream))
        }
        Subject::InputsOf(bolt) => {
            let inputs = done.inputs.get(bolt).cloned().unwrap_or_default();
            let chosen: Vec<&(String, String)> = inputs
                .iter()
                .filter(|(_, s)| expectation.stream.as_ref().is_none_or(|want| want == s))
                .collect();
            if chosen.is_empty() {
                let inputs = inputs.iter().map(|(c, s)| format!("{c:?} stream {s:?}")).collect();
                let stream = expectation.stream.clone().unwrap_or_default();
                return Err(Unchecked::NoInput { bolt: bolt.clone(), stream, inputs });
            }
            Ok(chosen.into_iter().flat_map(|(c, s)| emitted(done, c, s)).collect())
        }
        Subject::TreesOf(_) => Err(Unchecked::Trees),
    }
}

/// The tuples `component` emitted on `stream`, with the stream's fields.
fn emitted(done: &Completed, component: &str, stream: &str) -> Vec<Seen> {
    let key = (component.to_owned(), stream.to_owned());
    let fields = done.fields.get(&key).cloned().unwrap_or_default();
    done.emitted
        .get(component)
        .into_iter()
        .flatten()
        .filter(|(s, _)| s == stream)
        .map(|(_, values)| Seen { fields: fields.clone(), values: values.clone() })
        .collect()
}

/// The outcomes as a JUnit XML document: one `<testsuite>` named after the
/// topology, one `<testcase>` per test, a `<failure>` holding the diff.
fn junit_xml(topology: &str, outcomes: &[Outcome]) -> String {
    let failures = outcomes.iter().filter(|o| !o.failures.is_empty()).count();
    let total: f64 = outcomes.iter().map(|o| o.took.as_secs_f64()).sum();
    let mut xml = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        xml,
        "<testsuites tests=\"{}\" failures=\"{failures}\" time=\"{total:.3}\">",
        outcomes.len()
    );
    let _ = writeln!(
        xml,
        "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{failures}\" errors=\"0\" time=\"{total:.3}\">",
        escape(topology),
        outcomes.len()
    );
    for o in outcomes {
        let _ = write!(
            xml,
            "    <testcase classname=\"{}\" name=\"{}\" time=\"{:.3}\"",
            escape(topology),
            escape(&o.name),
            o.took.as_secs_f64()
        );
        if o.failures.is_empty() {
            xml.push_str("/>\n");
        } else {
            let first = o.failures.first().map_or("", String::as_str);
            let _ = writeln!(
                xml,
                ">\n      <failure message=\"{}\">{}</failure>\n    </testcase>",
                escape(first),
                escape(&o.failures.join("\n"))
            );
        }
    }
    xml.push_str("  </testsuite>\n</testsuites>\n");
    xml
}

/// Escapes text for an XML attribute or element; drops characters XML 1.0
/// cannot hold.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\n' | '\t' | '\r' => out.push(c),
            c if (c as u32) < 0x20 => {}
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn junit_xml_has_one_case_per_test_and_escapes_the_diff() {
        let outcomes = [
            Outcome { name: "ok one".into(), failures: vec![], took: Duration::from_millis(5) },
            Outcome {
                name: "a <bad> \"one\"".into(),
                failures: vec!["t.toml:3:1: the outputs of \"x\"".into(), "  - [1] & more".into()],
                took: Duration::from_millis(7),
            },
        ];
        let xml = junit_xml("topo", &outcomes);
        assert!(xml.contains("<testsuite name=\"topo\" tests=\"2\" failures=\"1\""), "{xml}");
        assert!(
            xml.contains("<testcase classname=\"topo\" name=\"ok one\" time=\"0.005\"/>"),
            "{xml}"
        );
        assert!(xml.contains("name=\"a &lt;bad&gt; &quot;one&quot;\""), "{xml}");
        assert!(xml.contains("  - [1] &amp; more</failure>"), "{xml}");
        assert_eq!(xml.matches("<testcase").count(), 2);
    }

    #[test]
    fn toml_tuples_become_values_in_order_or_by_name() {
        let table: toml::Table = toml::from_str("t = [[1, \"a\", 2.5, true], { n = 3 }]").unwrap();
        let tuples = fed_tuples(table["t"].as_array().unwrap()).unwrap();
        assert_eq!(
            tuples[0],
            FedTuple::Values(vec![
                Value::I64(1),
                Value::from("a"),
                Value::F64(2.5),
                Value::Bool(true)
            ])
        );
        assert_eq!(tuples[1], FedTuple::Named(vec![("n".into(), Value::I64(3))]));
        let nested: toml::Table = toml::from_str("t = [[{ a = 1 }]]").unwrap();
        assert_eq!(fed_tuples(nested["t"].as_array().unwrap()), Err(BadTuple::TableValue(0)));
    }
}
