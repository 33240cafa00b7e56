//! Environment interpolation inside string values.
//!
//! Substitution runs on each string *after* the TOML is parsed, never on the raw
//! text: spans stay exact, and a variable's value cannot inject TOML (a value with
//! a quote or a newline stays inside its string). The syntax is Vector's, made
//! strict:
//!
//! | written             | becomes                                                        |
//! | ------------------- | -------------------------------------------------------------- |
//! | `${VAR}`            | the value of `VAR`; an error if `VAR` is unset                 |
//! | `${VAR:-default}`   | the value of `VAR`, or `default` if `VAR` is unset or empty    |
//! | `${VAR:?message}`   | the value of `VAR`, or an error quoting `message` if unset or empty |
//! | `$$`                | a literal `$`                                                  |
//! | `$VAR` (no braces)  | an error, so a forgotten brace is never silently kept          |
//!
//! A `$` followed by anything else (a digit, a space, the end of the string) is kept
//! as it is, so regexes and prices need no escaping. Variable names are
//! `[A-Za-z_][A-Za-z0-9_]*`. A default runs up to the first `}` and is taken
//! literally (no nested interpolation).

/// One problem in one string. `Display` is a predicate that follows the name of the
/// value, e.g. `plugin "examples"` + ` uses environment variable "X", which is not set`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum InterpolateError {
    /// `${VAR}` with `VAR` unset and no default.
    #[error("uses environment variable \"{name}\", which is not set")]
    Unset { name: String },
    /// `${VAR:?message}` with `VAR` unset or empty.
    #[error("needs environment variable \"{name}\": {message}")]
    Required { name: String, message: String },
    /// `${` without a closing `}`.
    #[error("has an unterminated \"${{\"")]
    Unterminated,
    /// `${…}` whose inside is not one of the accepted forms.
    #[error("has an invalid interpolation \"{expr}\"")]
    Invalid { expr: String },
    /// `$VAR` without braces.
    #[error("has \"${name}\" without braces")]
    Bare { name: String },
}

impl InterpolateError {
    /// How to fix it, for the diagnostic's help.
    pub(crate) fn help(&self) -> Option<String> {
        match self {
            InterpolateError::Unset { name } => {
                Some(format!("set it, or give a default: \"${{{name}:-default}}\""))
            }
            InterpolateError::Required { .. } => None,
            InterpolateError::Unterminated => {
                Some("close it with \"}\", or write \"$$\" for a literal dollar".to_string())
            }
            InterpolateError::Invalid { .. } => Some(
                "write \"${VAR}\", \"${VAR:-default}\" or \"${VAR:?message}\"; \"$$\" is a literal dollar"
                    .to_string(),
            ),
            InterpolateError::Bare { name } => Some(format!(
                "write \"${{{name}}}\" to use the variable, or \"$${name}\" for a literal dollar"
            )),
        }
    }
}

/// Substitutes every `${…}` in `text`, looking variables up with `env`.
///
/// # Errors
///
/// Every problem found in the string, in order (an unset variable does not hide a
/// later one).
pub(crate) fn interpolate(
    text: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<String, Vec<InterpolateError>> {
    if !text.contains('$') {
        return Ok(text.to_string());
    }
    let mut out = String::with_capacity(text.len());
    let mut errors = Vec::new();
    let mut rest = text;
    while let Some(dollar) = rest.find('$') {
        out.push_str(&rest[..dollar]);
        let after = &rest[dollar + 1..];
        rest = match after.chars().next() {
            Some('$') => {
                out.push('$');
                &after[1..]
            }
            Some('{') => match after.find('}') {
                Some(close) => {
                    match expand(&after[1..close], env) {
                        Ok(value) => out.push_str(&value),
                        Err(e) => errors.push(e),
                    }
                    &after[close + 1..]
                }
                None => {
                    errors.push(InterpolateError::Unterminated);
                    ""
                }
            },
            Some(c) if is_name_start(c) => {
                let len = after.find(|c: char| !is_name_char(c)).unwrap_or(after.len());
                errors.push(InterpolateError::Bare { name: after[..len].to_string() });
                &after[len..]
            }
            _ => {
                out.push('$');
                after
            }
        };
    }
    out.push_str(rest);
    if errors.is_empty() {
        Ok(out)
    } else {
        Err(errors)
    }
}

/// Expands the inside of one `${…}`.
fn expand(inner: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<String, InterpolateError> {
    let name_len = inner.find(|c: char| !is_name_char(c)).unwrap_or(inner.len());
    let (name, tail) = inner.split_at(name_len);
    if !name.starts_with(is_name_start) {
        return Err(InterpolateError::Invalid { expr: format!("${{{inner}}}") });
    }
    let value = env(name);
    let set = value.as_deref().is_some_and(|v| !v.is_empty());
    if tail.is_empty() {
        value.ok_or_else(|| InterpolateError::Unset { name: name.to_string() })
    } else if let Some(default) = tail.strip_prefix(":-") {
        Ok(if set { value.unwrap_or_default() } else { default.to_string() })
    } else if let Some(message) = tail.strip_prefix(":?") {
        match value {
            Some(v) if set => Ok(v),
            _ => Err(InterpolateError::Required {
                name: name.to_string(),
                message: message.to_string(),
            }),
        }
    } else {
        Err(InterpolateError::Invalid { expr: format!("${{{inner}}}") })
    }
}

fn is_name_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_'
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        match name {
            "HOME" => Some("/home/storm".to_string()),
            "EMPTY" => Some(String::new()),
            _ => None,
        }
    }

    fn run(text: &str) -> Result<String, Vec<InterpolateError>> {
        interpolate(text, &env)
    }

    #[test]
    fn text_without_dollars_is_unchanged() {
        assert_eq!(run("plain text").unwrap(), "plain text");
    }

    #[test]
    fn a_set_variable_is_substituted() {
        assert_eq!(run("${HOME}/lib.so").unwrap(), "/home/storm/lib.so");
    }

    #[test]
    fn a_default_applies_when_the_variable_is_unset_or_empty() {
        assert_eq!(run("${NOPE:-../target}/x").unwrap(), "../target/x");
        assert_eq!(run("${EMPTY:-dflt}").unwrap(), "dflt");
        assert_eq!(run("${HOME:-dflt}").unwrap(), "/home/storm");
        assert_eq!(run("${NOPE:-}").unwrap(), "");
    }

    #[test]
    fn a_double_dollar_is_a_literal_dollar() {
        assert_eq!(run("cost: $$5 and $${HOME}").unwrap(), "cost: $5 and ${HOME}");
    }

    #[test]
    fn a_dollar_not_followed_by_a_name_is_kept() {
        assert_eq!(run("^a$ $1 $").unwrap(), "^a$ $1 $");
    }

    #[test]
    fn an_unset_variable_without_default_is_an_error() {
        assert_eq!(run("${NOPE}"), Err(vec![InterpolateError::Unset { name: "NOPE".to_string() }]));
    }

    #[test]
    fn an_empty_variable_without_default_is_used_as_empty() {
        assert_eq!(run("a${EMPTY}b").unwrap(), "ab");
    }

    #[test]
    fn every_problem_in_a_string_is_reported() {
        let errors = run("${A}/${B}/$C/${").unwrap_err();
        assert_eq!(
            errors,
            vec![
                InterpolateError::Unset { name: "A".to_string() },
                InterpolateError::Unset { name: "B".to_string() },
                InterpolateError::Bare { name: "C".to_string() },
                InterpolateError::Unterminated,
            ]
        );
    }

    #[test]
    fn a_required_variable_reports_its_message() {
        let errors = run("${EMPTY:?set the database url}").unwrap_err();
        assert_eq!(
            errors[0].to_string(),
            "needs environment variable \"EMPTY\": set the database url"
        );
    }

    #[test]
    fn malformed_expressions_are_errors_with_help() {
        for text in ["${}", "${1X}", "${A-b}", "${A B}"] {
            let errors = run(text).unwrap_err();
            assert!(matches!(errors[0], InterpolateError::Invalid { .. }), "{text}");
            assert!(errors[0].help().is_some());
        }
    }

    #[test]
    fn substituted_values_are_not_interpolated_again() {
        let env = |_: &str| Some("${HOME}".to_string());
        assert_eq!(interpolate("${X}", &env).unwrap(), "${HOME}");
    }

    #[test]
    fn multibyte_text_around_variables_survives() {
        assert_eq!(run("é${HOME}ü$").unwrap(), "é/home/storm\u{fc}$");
    }
}
