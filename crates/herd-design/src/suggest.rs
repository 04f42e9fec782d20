//! "Did you mean": the closest allowed name to a misspelt one, for error messages.

/// The allowed name closest to `written` (Jaro–Winkler similarity, via clap's own `strsim`), when it is
/// close enough to be a likely misspelling; `None` otherwise, so an unrelated word gets no guess.
pub fn closest<'a>(written: &str, allowed: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let written = written.trim().to_lowercase();
    allowed
        .into_iter()
        .map(|name| (strsim::jaro_winkler(&written, &name.to_lowercase()), name))
        // clap suggests at 0.7; names here are short, so a slightly stricter bar avoids odd guesses.
        .filter(|(score, _)| *score >= 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, name)| name)
}

/// ` (did you mean `NAME`?)` for the closest allowed name, or nothing.
pub fn did_you_mean<'a>(written: &str, allowed: impl IntoIterator<Item = &'a str>) -> String {
    closest(written, allowed).map_or_else(String::new, |name| format!(" (did you mean `{name}`?)"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_misspelling_finds_its_name_and_an_unrelated_word_finds_none() {
        let families = ["group_size", "unanimity", "difficulty", "source_strength"];
        assert_eq!(closest("group_sise", families), Some("group_size"));
        assert_eq!(closest("Unanimty", families), Some("unanimity"));
        assert_eq!(closest("zebra", families), None);
        assert_eq!(did_you_mean("sourcestrength", families), " (did you mean `source_strength`?)");
        assert_eq!(did_you_mean("zebra", families), "");
    }
}
