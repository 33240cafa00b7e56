//! Operator chains: which bolts run on the thread of their upstream
//! component, task by task, taking its batches without a thread hop.
//!
//! A bolt is chained to its upstream when all of these hold:
//! - every input of the bolt comes from one component, unthrottled;
//! - each input's grouping is `local_or_shuffle`, or both components run
//!   one task and the grouping is not `direct` or custom;
//! - both run the same parallelism;
//! - neither says `chain = false`, neither is windowed (a window keeps its
//!   own deadlines) and the upstream is not a throttled spout (its throttle
//!   sleeps on its thread);
//! - the upstream has no other chained bolt: the first bolt in file order
//!   that qualifies takes it.
//!
//! Task `k` of a chained bolt then runs on the thread of task `k` of its
//! upstream, and a `local_or_shuffle` input sends task `k`'s tuples to task
//! `k` (the most local task there is). Chains may be longer than two: a
//! chained bolt may host a chained bolt of its own.
//!
//! The rule reads only the checked TOML, so `squall graph` shows the same
//! chains the host runs.

use super::{BoltDecl, GroupingSpec, TopologyConfig};

/// One chained bolt: its index among `config.bolts` and the name of the
/// component it is chained to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    /// The bolt's index in [`TopologyConfig::bolts`].
    pub bolt: usize,
    /// The upstream component whose tasks host the bolt's tasks.
    pub upstream: String,
}

/// Every chained bolt of `config`, in file order.
pub fn links(config: &TopologyConfig) -> Vec<Link> {
    let mut hosting: Vec<&str> = Vec::new();
    let mut links = Vec::new();
    for (i, bolt) in config.bolts.iter().enumerate() {
        let Some(upstream) = chainable(config, bolt) else { continue };
        if hosting.contains(&upstream) {
            continue;
        }
        hosting.push(upstream);
        links.push(Link { bolt: i, upstream: upstream.to_owned() });
    }
    links
}

/// The name of the component `bolt` may be chained to, under the module's
/// rule (not yet checking that it hosts no other chained bolt).
fn chainable<'a>(config: &'a TopologyConfig, bolt: &BoltDecl) -> Option<&'a str> {
    if !bolt.decl.chain || bolt.window.is_some() {
        return None;
    }
    let from = bolt.inputs.first()?.from.as_str();
    if bolt.inputs.iter().any(|i| i.from != from || i.throttle.is_some()) || from == bolt.decl.name
    {
        return None;
    }
    let (name, parallelism) = if let Some(s) = config.spouts.iter().find(|s| s.decl.name == from) {
        if !s.decl.chain || s.throttle.is_some() {
            return None;
        }
        (s.decl.name.as_str(), s.decl.parallelism)
    } else {
        let b = config.bolts.iter().find(|b| b.decl.name == from)?;
        if !b.decl.chain || b.window.is_some() {
            return None;
        }
        (b.decl.name.as_str(), b.decl.parallelism)
    };
    if parallelism != bolt.decl.parallelism {
        return None;
    }
    let single = parallelism == 1;
    let fits = |g: &GroupingSpec| match g {
        GroupingSpec::LocalOrShuffle => true,
        GroupingSpec::Direct | GroupingSpec::Custom { .. } => false,
        _ => single,
    };
    bolt.inputs.iter().all(|i| fits(&i.grouping)).then_some(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(text: &str) -> TopologyConfig {
        let head = "[topology]\nname = \"t\"\n[plugins]\np = \"lib.so\"\n";
        crate::config::parse_str(&format!("{head}{text}"), std::path::Path::new("t.toml"))
            .expect("a valid topology")
    }

    fn chained(text: &str) -> Vec<(String, String)> {
        let c = config(text);
        links(&c).into_iter().map(|l| (c.bolts[l.bolt].decl.name.clone(), l.upstream)).collect()
    }

    fn pair(a: &str, b: &str) -> (String, String) {
        (a.to_owned(), b.to_owned())
    }

    #[test]
    fn a_local_or_shuffle_bolt_of_equal_parallelism_is_chained_in_a_line() {
        let text = r#"
[spouts.s]
component = "p::S"
parallelism = 2
[bolts.a]
component = "p::A"
parallelism = 2
inputs = [{ from = "s", grouping = "local_or_shuffle" }]
[bolts.b]
component = "p::B"
parallelism = 2
inputs = [{ from = "a", grouping = "local_or_shuffle" }]
"#;
        assert_eq!(chained(text), vec![pair("a", "s"), pair("b", "a")]);
    }

    #[test]
    fn shuffle_across_tasks_other_parallelism_throttles_windows_and_chain_false_are_not() {
        let base = r#"
[spouts.s]
component = "p::S"
parallelism = 2
"#;
        let cases = [
            // shuffle over two tasks
            "[bolts.a]\ncomponent = \"p::A\"\nparallelism = 2\ninputs = [{ from = \"s\" }]",
            // another parallelism
            "[bolts.a]\ncomponent = \"p::A\"\nparallelism = 3\n\
             inputs = [{ from = \"s\", grouping = \"local_or_shuffle\" }]",
            // chain = false
            "[bolts.a]\ncomponent = \"p::A\"\nparallelism = 2\nchain = false\n\
             inputs = [{ from = \"s\", grouping = \"local_or_shuffle\" }]",
            // a throttled edge
            "[bolts.a]\ncomponent = \"p::A\"\nparallelism = 2\n\
             inputs = [{ from = \"s\", grouping = \"local_or_shuffle\", \
             throttle = { tuples_per_sec = 10 } }]",
            // a windowed bolt
            "[bolts.a]\ncomponent = \"p::A\"\nparallelism = 2\nwindow = { length_count = 4 }\n\
             inputs = [{ from = \"s\", grouping = \"local_or_shuffle\" }]",
        ];
        for case in cases {
            assert_eq!(chained(&format!("{base}{case}")), vec![], "{case}");
        }
        let throttled = r#"
[spouts.s]
component = "p::S"
throttle = { tuples_per_sec = 10 }
[bolts.a]
component = "p::A"
inputs = [{ from = "s" }]
"#;
        assert_eq!(chained(throttled), vec![]);
    }

    #[test]
    fn one_task_each_chains_any_grouping_but_direct_and_only_one_bolt_per_upstream() {
        let text = r#"
[spouts.s]
component = "p::S"
[bolts.a]
component = "p::A"
inputs = [{ from = "s", grouping = { fields = ["word"] } }]
[bolts.b]
component = "p::B"
inputs = [{ from = "s" }]
[bolts.c]
component = "p::C"
inputs = [{ from = "b", grouping = "direct" }]
[bolts.d]
component = "p::D"
inputs = [{ from = "a" }, { from = "b" }]
"#;
        assert_eq!(chained(text), vec![pair("a", "s")]);
    }
}
