//! Topic templates: `counts`, `counts.{region}`, `{kind}-events`.
//!
//! A template is literal text with `{field}` placeholders, each replaced by
//! the text of the input's field: a string as it is, bytes decoded as
//! UTF-8, anything else in its `Display` form (a number `42` is `"42"`).
//! The result must be a Kafka topic name (1 to 249 of `a-z A-Z 0-9 . _ -`),
//! so a value cannot turn the topic into something its author did not see;
//! an input whose value does not fit is failed with the reason.

use std::fmt;

use squall_plugin_api::prelude::*;

/// One piece of a parsed template.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    Literal(String),
    Field(String),
}

/// A parsed topic template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicTemplate {
    parts: Vec<Part>,
}

/// Why a template could not be parsed or rendered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TemplateError(String);

impl fmt::Display for TemplateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for TemplateError {}

fn topic_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')
}

impl TopicTemplate {
    /// Parses `template`.
    ///
    /// # Errors
    /// An unclosed or empty placeholder, or a character Kafka refuses in
    /// the literal text.
    pub fn parse(template: &str) -> std::result::Result<Self, TemplateError> {
        let err = |m: String| TemplateError(format!("topic template {template:?}: {m}"));
        if template.is_empty() {
            return Err(err("is empty".into()));
        }
        let mut parts = Vec::new();
        let mut rest = template;
        while !rest.is_empty() {
            match rest.find('{') {
                Some(0) => {
                    let end = rest.find('}').ok_or_else(|| err("a '{' is not closed".into()))?;
                    let name = rest[1..end].trim();
                    if name.is_empty()
                        || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
                    {
                        return Err(err(format!("{{{name}}} is not a field name")));
                    }
                    parts.push(Part::Field(name.to_owned()));
                    rest = &rest[end + 1..];
                }
                found => {
                    let end = found.unwrap_or(rest.len());
                    let literal = &rest[..end];
                    if let Some(c) = literal.chars().find(|&c| !topic_char(c)) {
                        return Err(err(format!(
                            "{c:?} cannot be in a topic name (a-z, A-Z, 0-9, '.', '_', '-')"
                        )));
                    }
                    parts.push(Part::Literal(literal.to_owned()));
                    rest = &rest[end..];
                }
            }
        }
        Ok(Self { parts })
    }

    /// The topic when the template has no placeholder.
    pub fn literal(&self) -> Option<&str> {
        match self.parts.as_slice() {
            [Part::Literal(l)] => Some(l),
            _ => None,
        }
    }

    /// The fields the template reads.
    pub fn fields(&self) -> impl Iterator<Item = &str> {
        self.parts.iter().filter_map(|p| match p {
            Part::Field(f) => Some(f.as_str()),
            Part::Literal(_) => None,
        })
    }

    /// Renders the topic of `input` into `out` (cleared first).
    ///
    /// # Errors
    /// A missing field, or a value that would not make a topic name.
    pub fn render_into(
        &self,
        input: &Tuple<'_>,
        out: &mut String,
    ) -> std::result::Result<(), TemplateError> {
        out.clear();
        for part in &self.parts {
            match part {
                Part::Literal(l) => out.push_str(l),
                Part::Field(f) => {
                    let value = input.field(f).ok_or_else(|| {
                        TemplateError(format!("topic template: the input has no field {f:?}"))
                    })?;
                    let start = out.len();
                    push_text(value, out);
                    if out.len() == start || !out[start..].chars().all(topic_char) {
                        return Err(TemplateError(format!(
                            "topic template: field {f:?} = {:?} cannot be in a topic name",
                            &out[start..]
                        )));
                    }
                }
            }
        }
        if out.len() > 249 {
            return Err(TemplateError(format!(
                "topic template: the topic is {} bytes long, more than 249",
                out.len()
            )));
        }
        Ok(())
    }
}

/// The text of a value: strings as they are, bytes decoded (lossy), others
/// in their `Display` form.
pub(crate) fn push_text(value: &Value, out: &mut String) {
    use std::fmt::Write as _;
    if let Some(s) = value.as_str() {
        out.push_str(s);
    } else if let Some(b) = value.as_bytes() {
        out.push_str(&String::from_utf8_lossy(b));
    } else {
        let _ = write!(out, "{value}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_parse_literals_and_fields() {
        let t = TopicTemplate::parse("counts.{region}-v1").unwrap();
        assert_eq!(t.fields().collect::<Vec<_>>(), ["region"]);
        assert_eq!(t.literal(), None);
        assert_eq!(TopicTemplate::parse("counts").unwrap().literal(), Some("counts"));
        for bad in ["", "a b", "{", "{}", "a/{x}", "{a b}"] {
            assert!(TopicTemplate::parse(bad).is_err(), "{bad:?}");
        }
    }
}
