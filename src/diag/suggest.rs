//! "Did you mean" candidates for a misspelt name.

/// The closest candidates to `name`, best first, for "did you mean" hints: names that
/// hold `name` as a whole `_`-separated part (`ksys_read` for `read`), shortest first,
/// then names within a few typing mistakes of it.
pub fn closest<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> Vec<&'a str> {
    let limit = (name.len() / 3).max(1) + 1;
    let mut holding = Vec::new();
    let mut near = Vec::new();
    for c in candidates {
        if holds_word(c, name) {
            holding.push((c.len(), c));
        } else if c.len().abs_diff(name.len()) <= limit {
            // Optimal string alignment: `raed` for `read` is one mistake, not two.
            let d = strsim::osa_distance(name, c);
            if d <= limit {
                near.push((d, c));
            }
        }
    }
    holding.sort();
    near.sort();
    holding
        .into_iter()
        .chain(near)
        .take(3)
        .map(|(_, c)| c)
        .collect()
}

/// Whether `word` (3 bytes or more) is a whole `_`-separated part of the longer `name`.
fn holds_word(name: &str, word: &str) -> bool {
    word.len() >= 3
        && name.len() > word.len()
        && name.match_indices(word).any(|(at, _)| {
            let end = at + word.len();
            (at == 0 || name.as_bytes()[at - 1] == b'_')
                && (end == name.len() || name.as_bytes()[end] == b'_')
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggests_transposed_function_name() {
        let names = ["vfs_read", "vfs_write", "vfs_readv", "kernel_read"];
        assert_eq!(closest("vfs_raed", names)[0], "vfs_read");
    }

    #[test]
    fn names_holding_the_word_come_before_typing_mistakes() {
        let names = [
            "jread",
            "eat",
            "vfs_read",
            "ksys_read",
            "vfs_readv",
            "readahead",
        ];
        assert_eq!(closest("read", names), ["vfs_read", "ksys_read", "jread"]);
        // A word inside another word is not a whole part; two letters are too few.
        assert_eq!(
            closest("ead", ["eat", "jread", "ead_x"]),
            ["ead_x", "eat", "jread"]
        );
        assert!(closest("fs", ["vfs_read", "fs_read"]).is_empty());
    }
}
