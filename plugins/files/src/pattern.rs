//! [`Pattern`]: which file names of a directory the spout reads.

/// A file-name pattern: `*` matches any run of characters (none included),
/// `?` exactly one, anything else itself. `"*.log"` matches `app.log` but
/// not `app.log.1`. There are no character classes or escapes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pattern {
    chars: Vec<char>,
}

impl Pattern {
    /// The pattern `text`.
    pub fn new(text: &str) -> Self {
        Self { chars: text.chars().collect() }
    }

    /// True when all of `name` matches the pattern.
    pub fn matches(&self, name: &str) -> bool {
        let name: Vec<char> = name.chars().collect();
        // Greedy with one backtrack point: the position after the last `*`.
        let (mut p, mut n) = (0, 0);
        let mut star: Option<(usize, usize)> = None;
        while n < name.len() {
            match self.chars.get(p) {
                Some('*') => {
                    star = Some((p + 1, n));
                    p += 1;
                }
                Some(&c) if c == '?' || c == name[n] => {
                    p += 1;
                    n += 1;
                }
                _ => match star {
                    Some((after, from)) => {
                        p = after;
                        n = from + 1;
                        star = Some((after, from + 1));
                    }
                    None => return false,
                },
            }
        }
        self.chars[p..].iter().all(|&c| c == '*')
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stars_and_question_marks_match_as_in_a_shell() {
        let log = Pattern::new("*.log");
        assert!(log.matches("app.log"));
        assert!(log.matches(".log"));
        assert!(!log.matches("app.log.1"));
        assert!(!log.matches("app.txt"));
        let part = Pattern::new("part-??.*");
        assert!(part.matches("part-01.json"));
        assert!(!part.matches("part-1.json"));
        assert!(Pattern::new("*").matches(""));
        assert!(Pattern::new("a*b*c").matches("aXXbYYbc"));
        assert!(!Pattern::new("a*b*c").matches("aXXbYYbd"));
        assert!(Pattern::new("exact").matches("exact"));
        assert!(!Pattern::new("exact").matches("exactly"));
    }
}
