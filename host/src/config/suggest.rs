//! "Did you mean" suggestions for keys, aliases, component names, groupings and
//! anything else the user spells.
//!
//! The distance is optimal-string-alignment (Damerau–Levenshtein without repeated
//! edits of one substring), so a swapped pair of letters (`exmaples`) costs one edit
//! like a missing or extra letter does. A candidate is offered only if it is within
//! `max(len, 3) / 3` edits of what was written, the same bound rustc uses for its
//! suggestions: one typo in a short word, more in a long one. Case differences alone
//! always qualify (`Shuffle` → `shuffle`).

/// The candidate closest to `name`, if one is close enough to be a plausible typo.
///
/// Ties go to the earliest candidate, so callers list candidates in the order they
/// would like them offered (usually file or documentation order).
pub fn suggest<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<String> {
    let max_distance = name.chars().count().max(3) / 3;
    let lowered = name.to_lowercase();
    let mut best: Option<(usize, &str)> = None;
    for candidate in candidates {
        #[cfg(test)]
        COMPARED.with(|n| n.set(n.get() + 1));
        let distance = if candidate.to_lowercase() == lowered {
            0
        } else {
            strsim::osa_distance(name, candidate)
        };
        if distance <= max_distance && best.is_none_or(|(d, _)| distance < d) {
            best = Some((distance, candidate));
        }
    }
    best.map(|(_, candidate)| candidate.to_string())
}

#[cfg(test)]
thread_local! {
    /// Candidates [`suggest`] has compared a name with on this thread: the
    /// work a test can bound.
    pub(crate) static COMPARED: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// `did you mean "…"?` for the closest candidate, if any.
pub(crate) fn did_you_mean<'a>(
    name: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<String> {
    suggest(name, candidates).map(|c| format!("did you mean \"{c}\"?"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_letter_suggests_the_key() {
        let keys = ["component", "parallelism", "config"];
        assert_eq!(suggest("paralelism", keys).as_deref(), Some("parallelism"));
    }

    #[test]
    fn a_swapped_pair_of_letters_counts_as_one_typo() {
        assert_eq!(suggest("exmaples", ["extra", "examples"]).as_deref(), Some("examples"));
    }

    #[test]
    fn case_differences_alone_are_suggested() {
        assert_eq!(suggest("Shuffle", ["all", "shuffle"]).as_deref(), Some("shuffle"));
    }

    #[test]
    fn distant_names_get_no_suggestion() {
        assert_eq!(suggest("xyz", ["parallelism", "component"]), None);
        assert_eq!(suggest("ab", ["cd"]), None);
        assert_eq!(suggest("anything", std::iter::empty()), None);
    }

    #[test]
    fn the_closest_candidate_wins_and_ties_go_to_the_first() {
        assert_eq!(suggest("splt", ["spout", "split"]).as_deref(), Some("split"));
        assert_eq!(suggest("cat", ["bat", "hat"]).as_deref(), Some("bat"));
    }

    #[test]
    fn did_you_mean_formats_the_help_text() {
        assert_eq!(did_you_mean("splt", ["split"]).as_deref(), Some("did you mean \"split\"?"));
    }
}
