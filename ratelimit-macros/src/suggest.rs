//! "Did you mean": the closest of the known words to a misspelt one, for the messages of
//! unknown arguments.

/// The word of `known` that `word` (lowercased) most likely meant: its synonym in `synonyms`,
/// else the nearest of `known` within rustc's distance for typos (a third of the known word's
/// length, at least 1); `None` when none is close.
pub(crate) fn closest<'a>(
    word: &str,
    known: impl IntoIterator<Item = &'a str>,
    synonyms: &[(&str, &'a str)],
) -> Option<&'a str> {
    let lower = word.to_lowercase();
    synonyms
        .iter()
        .find(|(synonym, _)| *synonym == lower)
        .map(|(_, meant)| *meant)
        .or_else(|| {
            known
                .into_iter()
                .map(|known| (known, edit_distance(&lower, known)))
                .filter(|(known, distance)| *distance <= known.len().max(3) / 3)
                .min_by_key(|(_, distance)| *distance)
                .map(|(known, _)| known)
        })
}

/// The Levenshtein distance between two short ASCII-ish strings.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut current = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let substitution = previous[j] + usize::from(ca != *cb);
            current.push(substitution.min(previous[j + 1] + 1).min(current[j] + 1));
        }
        previous = current;
    }
    previous[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edit_distance_counts_edits() {
        assert_eq!(edit_distance("thresold", "threshold"), 1);
        assert_eq!(edit_distance("", "key"), 3);
        assert_eq!(edit_distance("name", "name"), 0);
        assert_eq!(edit_distance("limitr", "limiter"), 1);
    }

    #[test]
    fn synonyms_come_before_near_words() {
        let known = ["period", "threshold", "limiter"];
        let synonyms = [("limit", "threshold")];
        assert_eq!(closest("limit", known, &synonyms), Some("threshold"));
        assert_eq!(closest("Thresold", known, &synonyms), Some("threshold"));
        assert_eq!(closest("limitr", known, &synonyms), Some("limiter"));
        assert_eq!(closest("zzz", known, &synonyms), None);
    }
}
