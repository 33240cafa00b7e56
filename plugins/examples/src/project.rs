//! [`Project`]: keeps some fields of each input, as its config lists them
//! (outputs declared from the config, contract 1.1).

use squall_plugin_api::prelude::*;

squall_plugin_api::declare_config! {
    /// The bolt's `config` table.
    #[derive(Debug, Clone, PartialEq)]
    struct ProjectConfig {
        fields: Vec<String> = required(
            Array,
            "the input fields to keep, in output order; they are the output's fields"
        ),
    }
}

/// The listed fields, checked: at least one, none empty, no repeats.
fn listed_fields(config: &ComponentConfig<'_>) -> Result<Vec<String>> {
    let ProjectConfig { fields } = ProjectConfig::parse(config)?;
    if fields.is_empty() {
        return Err("fields is empty; list the input fields to keep".into());
    }
    for (i, field) in fields.iter().enumerate() {
        if field.is_empty() {
            return Err(format!("fields[{i}] is an empty name").into());
        }
        if fields[..i].contains(field) {
            return Err(format!("fields lists \"{field}\" twice").into());
        }
    }
    Ok(fields)
}

/// Where the listed fields are in the tuples of one subscription.
#[derive(Debug)]
struct Route {
    component: String,
    stream: String,
    positions: Vec<usize>,
}

/// Emits the fields its config lists (`fields = ["word", "count"]`) of each
/// input, in that order, on the default stream, whose fields are exactly the
/// listed ones: Storm's `Fields`-based projection as a bolt.
///
/// Its outputs are declared from its config (`declare_outputs_for`), so
/// `squall validate` checks what subscribes to it against the listed fields:
/// a fields grouping on a kept field validates, one on a dropped field is
/// refused. `check_inputs` refuses an input stream that lacks a listed
/// field. Tick tuples are ignored.
#[derive(Debug)]
pub struct Project {
    fields: Vec<String>,
    /// Per subscription, from the task context.
    routes: Vec<Route>,
    /// The values of the tuple being emitted (kept to reuse its capacity).
    out: Vec<Value>,
}

impl Project {
    /// The listed values of `input`, into `self.out`.
    fn project(&mut self, input: &Tuple<'_>) -> Result<()> {
        self.out.clear();
        let route = self
            .routes
            .iter()
            .find(|r| r.component == input.source_component() && r.stream == input.source_stream());
        match route {
            Some(route) => {
                for &i in &route.positions {
                    self.out.push(input.get(i).cloned().ok_or_else(|| short(input, i))?);
                }
            }
            // Without a 1.1 host's inputs (a 1.0 host, a unit test), by name.
            None => {
                for field in &self.fields {
                    let value = input.field(field).ok_or_else(|| {
                        format!(
                            "input from \"{}\" (stream \"{}\") has no field \"{field}\"",
                            input.source_component(),
                            input.source_stream()
                        )
                    })?;
                    self.out.push(value.clone());
                }
            }
        }
        Ok(())
    }
}

fn short(input: &Tuple<'_>, i: usize) -> Error {
    format!(
        "input from \"{}\" (stream \"{}\") has {} values, field {i} is missing",
        input.source_component(),
        input.source_stream(),
        input.values().len()
    )
    .into()
}

impl BasicBolt for Project {
    const NAME: &'static str = "Project";
    const DESCRIPTION: &'static str = "emits the listed fields of each input, in that order";
    const CONFIG_KEYS: Option<&'static [ConfigKey]> = Some(ProjectConfig::KEYS);

    fn declare_outputs_for(
        config: &ComponentConfig<'_>,
        outputs: &mut OutputDeclarer,
    ) -> Result<()> {
        let fields = listed_fields(config)?;
        let fields: Vec<&str> = fields.iter().map(String::as_str).collect();
        outputs.declare(&fields);
        Ok(())
    }

    /// Every input stream must carry every listed field. (A bad list is
    /// reported once, by `declare_outputs_for`.)
    fn check_inputs(config: &ComponentConfig<'_>, inputs: &[InputDecl]) -> Result<()> {
        let Ok(fields) = listed_fields(config) else { return Ok(()) };
        for input in inputs {
            let missing: Vec<&str> = fields
                .iter()
                .map(String::as_str)
                .filter(|f| !input.fields.iter().any(|have| have.as_str() == *f))
                .collect();
            if !missing.is_empty() {
                let have: Vec<&str> = input.fields.iter().map(|f| f.as_str()).collect();
                return Err(format!(
                    "input from \"{}\" (stream \"{}\") has no field {}; it has: {}",
                    input.component,
                    input.stream,
                    missing.iter().map(|f| format!("\"{f}\"")).collect::<Vec<_>>().join(", "),
                    if have.is_empty() { "none".to_owned() } else { have.join(", ") }
                )
                .into());
            }
        }
        Ok(())
    }

    fn new(config: &ComponentConfig<'_>) -> Result<Self> {
        let fields = listed_fields(config)?;
        let out = Vec::with_capacity(fields.len());
        Ok(Project { fields, routes: Vec::new(), out })
    }

    fn prepare(&mut self, context: &TaskContext) -> Result<()> {
        self.routes.clear();
        for input in context.inputs() {
            let positions = self
                .fields
                .iter()
                .map(|f| input.fields.iter().position(|have| have.as_str() == f))
                .collect::<Option<Vec<usize>>>()
                .ok_or_else(|| {
                    format!(
                        "input from \"{}\" (stream \"{}\") lacks a listed field",
                        input.component, input.stream
                    )
                })?;
            self.routes.push(Route {
                component: input.component.to_string(),
                stream: input.stream.to_string(),
                positions,
            });
        }
        Ok(())
    }

    fn execute(&mut self, input: &Tuple<'_>, collector: &mut BasicCollector<'_>) -> Result<()> {
        if input.is_tick() {
            return Ok(());
        }
        self.project(input)?;
        collector.emit(&self.out);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use abi_stable::std_types::RString;
    use squall_plugin_api::testing::{tick_tuple, Recorder};

    use super::*;

    fn config(text: &str) -> ComponentConfig<'_> {
        ComponentConfig::new(text)
    }

    fn declared(text: &str) -> Result<Vec<(String, Vec<String>)>> {
        let mut outputs = OutputDeclarer::default();
        Project::declare_outputs_for(&config(text), &mut outputs)?;
        Ok(outputs
            .into_streams()
            .into_iter()
            .map(|s| (s.name.to_string(), s.fields.iter().map(|f| f.to_string()).collect()))
            .collect())
    }

    fn input(component: &str, fields: &[&str]) -> InputDecl {
        InputDecl {
            component: component.into(),
            stream: "default".into(),
            grouping: "shuffle".into(),
            grouping_fields: Default::default(),
            fields: fields.iter().map(|f| RString::from(*f)).collect(),
            custom: Default::default(),
        }
    }

    /// Runs `bolt` on tuples of `(component, fields, values)`; what it emitted.
    fn run(bolt: &mut Project, tuples: &[(&str, &[&str], Vec<Value>)]) -> Vec<Vec<Value>> {
        let mut recorder = Recorder::default();
        {
            let mut collector = BasicCollector::new(recorder.output());
            for (component, fields, values) in tuples {
                let fields: Vec<RString> = fields.iter().map(|f| RString::from(*f)).collect();
                let tuple = Tuple::new(values, &fields, component, "default", 0, Anchor(1));
                bolt.execute(&tuple, &mut collector).unwrap();
            }
            bolt.execute(&tick_tuple(), &mut collector).unwrap();
        }
        recorder.emitted.into_iter().map(|e| e.values).collect()
    }

    #[test]
    fn the_output_fields_are_exactly_the_listed_ones_in_order() {
        let streams = declared("fields = [\"count\", \"word\"]").unwrap();
        assert_eq!(streams, [("default".to_owned(), vec!["count".to_owned(), "word".to_owned()])]);
    }

    #[test]
    fn an_empty_missing_or_repeating_list_is_refused() {
        for (text, expected) in [
            ("fields = []", "fields is empty"),
            ("fields = [\"a\", \"\"]", "fields[1] is an empty name"),
            ("fields = [\"a\", \"b\", \"a\"]", "fields lists \"a\" twice"),
            ("", "fields"),
            ("fields = \"a\"", "fields"),
        ] {
            let declared = declared(text).unwrap_err().to_string();
            assert!(declared.contains(expected), "{text}: {declared}");
            let built = Project::new(&config(text)).unwrap_err().to_string();
            assert!(built.contains(expected), "{text}: {built}");
        }
    }

    #[test]
    fn check_inputs_refuses_an_input_without_a_listed_field() {
        let text = "fields = [\"word\", \"count\"]";
        let ok = [input("count", &["word", "count"]), input("other", &["count", "x", "word"])];
        Project::check_inputs(&config(text), &ok).unwrap();
        let bad = [input("count", &["word", "count"]), input("split", &["word"])];
        assert_eq!(
            Project::check_inputs(&config(text), &bad).unwrap_err().to_string(),
            "input from \"split\" (stream \"default\") has no field \"count\"; it has: word"
        );
        let none = [input("empty", &[])];
        assert_eq!(
            Project::check_inputs(&config("fields = [\"a\", \"b\"]"), &none)
                .unwrap_err()
                .to_string(),
            "input from \"empty\" (stream \"default\") has no field \"a\", \"b\"; it has: none"
        );
    }

    #[test]
    fn emits_the_listed_fields_of_each_input_in_the_listed_order() {
        let mut bolt = Project::new(&config("fields = [\"count\", \"word\"]")).unwrap();
        let context = TaskContext::builder("project")
            .input("count", "default", "shuffle", &[], &["word", "count"])
            .input("more", "default", "shuffle", &[], &["n", "count", "word", "x"])
            .build();
        bolt.prepare(&context).unwrap();
        let emitted = run(
            &mut bolt,
            &[
                ("count", &["word", "count"], vec![Value::from("cow"), Value::U64(2)]),
                (
                    "more",
                    &["n", "count", "word", "x"],
                    vec![Value::U64(9), Value::U64(5), Value::from("moon"), Value::Null],
                ),
            ],
        );
        assert_eq!(
            emitted,
            [vec![Value::U64(2), Value::from("cow")], vec![Value::U64(5), Value::from("moon")]]
        );
    }

    #[test]
    fn without_the_hosts_inputs_it_projects_by_field_name() {
        let mut bolt = Project::new(&config("fields = [\"b\"]")).unwrap();
        bolt.prepare(&TaskContext::builder("project").build()).unwrap();
        let emitted =
            run(&mut bolt, &[("src", &["a", "b"], vec![Value::U64(1), Value::from("two")])]);
        assert_eq!(emitted, [vec![Value::from("two")]]);

        let mut recorder = Recorder::default();
        let mut collector = BasicCollector::new(recorder.output());
        let values = [Value::U64(1)];
        let fields = [RString::from("a")];
        let tuple = Tuple::new(&values, &fields, "src", "default", 0, Anchor(1));
        assert_eq!(
            bolt.execute(&tuple, &mut collector).unwrap_err().to_string(),
            "input from \"src\" (stream \"default\") has no field \"b\""
        );
    }
}
