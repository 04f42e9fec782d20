//! Roster ids and lenient key mapping.

use std::collections::HashMap;

/// Why a list of ids is not a usable roster.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RosterError {
    /// No ids at all.
    #[error("a roster needs at least one id")]
    Empty,
    /// An id that is empty or only whitespace.
    #[error("roster ids must not be empty or whitespace")]
    BlankId,
    /// The same id twice.
    #[error("duplicate roster id {0:?}")]
    Duplicate(String),
}

/// How a model's key matched a roster id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyMatch {
    /// Index of the id in [`Roster::ids`].
    pub index: usize,
    /// `true` only when the key is exactly the id, byte for byte.
    pub exact: bool,
}

/// The participants of a trial, by id, with the lookups used to map a model's keys
/// back to ids.
///
/// A key maps to an id, in this order:
/// 1. exactly (`agent_07`);
/// 2. after normalisation: ASCII lowercase, with spaces, `_`, `-`, `.`, `#`, quotes and
///    markdown (`*`, `` ` ``) removed and a trailing `[label]` or `(label)` dropped
///    (`Agent_07`, `agent 07`, `agent07`, `agent_07 [Wug]`);
/// 3. by its trailing number, when the key is a number alone or a number after a
///    known prefix (the roster's own id prefix, or `agent`, `participant`, `player`,
///    `p`, `id`, `member`, `person`, `target`), and exactly one roster id ends in that
///    number (`7`, `07`, `Agent 7`, `P7`, `agent_7`, `Participant #7`).
///
/// A key that matches nothing, or whose number two roster ids share, is unknown.
#[derive(Debug, Clone)]
pub struct Roster {
    ids: Vec<String>,
    exact: HashMap<String, usize>,
    /// normalised form → index; `None` when two ids normalise alike.
    normalised: HashMap<String, Option<usize>>,
    /// trailing number → index; `None` when two ids share the number.
    by_number: HashMap<u64, Option<usize>>,
    /// normalised alphabetic prefixes of the ids (`agent` for `agent_07`).
    prefixes: Vec<String>,
}

const GENERIC_PREFIXES: &[&str] = &["agent", "participant", "player", "p", "id", "member", "person", "target"];

impl Roster {
    /// A roster of the given ids, in order.
    pub fn new<I, S>(ids: I) -> Result<Self, RosterError>
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let ids: Vec<String> = ids.into_iter().map(Into::into).collect();
        if ids.is_empty() {
            return Err(RosterError::Empty);
        }
        let mut exact = HashMap::new();
        let mut normalised: HashMap<String, Option<usize>> = HashMap::new();
        let mut by_number: HashMap<u64, Option<usize>> = HashMap::new();
        let mut prefixes: Vec<String> = Vec::new();
        for (i, id) in ids.iter().enumerate() {
            if id.trim().is_empty() {
                return Err(RosterError::BlankId);
            }
            if exact.insert(id.clone(), i).is_some() {
                return Err(RosterError::Duplicate(id.clone()));
            }
            normalised.entry(normalise(id)).and_modify(|e| *e = None).or_insert(Some(i));
            if let Some((prefix, n)) = split_number(&normalise(id)) {
                by_number.entry(n).and_modify(|e| *e = None).or_insert(Some(i));
                if !prefixes.iter().any(|p| p == prefix) {
                    prefixes.push(prefix.to_owned());
                }
            }
        }
        Ok(Self { ids, exact, normalised, by_number, prefixes })
    }

    /// The project's default ids for a society of `n` agents: `agent_01` … `agent_20`
    /// (zero-padded to two digits, or more when `n` needs them).
    pub fn default_ids(n: usize) -> Vec<String> {
        Self::numbered_ids("agent_", n.to_string().len().max(2), n)
    }

    /// Numbered ids as the design crate makes them: `{prefix}{index:0width$}` for
    /// index 1..=n (`numbered_ids("agent_", 2, 20)` = [`Roster::default_ids`]`(20)`).
    pub fn numbered_ids(prefix: &str, width: usize, n: usize) -> Vec<String> {
        (1..=n).map(|i| format!("{prefix}{i:0width$}")).collect()
    }

    /// A roster of [`Roster::default_ids`]; `None` when `n` is 0.
    pub fn with_default_ids(n: usize) -> Option<Self> {
        Self::new(Self::default_ids(n)).ok()
    }

    /// The ids, in roster order.
    pub fn ids(&self) -> &[String] {
        &self.ids
    }

    /// Number of ids (never 0).
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    /// Always `false`: a roster has at least one id.
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// Map a model's key to a roster id (see the type's docs for the rules).
    pub fn resolve(&self, key: &str) -> Option<KeyMatch> {
        if let Some(&index) = self.exact.get(key) {
            return Some(KeyMatch { index, exact: true });
        }
        if key.len() > 200 {
            return None;
        }
        let norm = normalise(key);
        if norm.is_empty() {
            return None;
        }
        if let Some(&found) = self.normalised.get(&norm) {
            return found.map(|index| KeyMatch { index, exact: false });
        }
        let (prefix, n) = split_number(&norm)?;
        let known =
            prefix.is_empty() || self.prefixes.iter().any(|p| p == prefix) || GENERIC_PREFIXES.contains(&prefix);
        if !known {
            return None;
        }
        self.by_number.get(&n).copied().flatten().map(|index| KeyMatch { index, exact: false })
    }
}

/// Lowercase; drop separators, quotes and markdown; drop one trailing bracketed label.
fn normalise(key: &str) -> String {
    let mut k = key.trim();
    // Drop a trailing "[label]" or "(label)".
    for (open, close) in [('[', ']'), ('(', ')')] {
        if k.ends_with(close)
            && let Some(p) = k.rfind(open)
            && p > 0
        {
            k = k.get(..p).unwrap_or(k).trim_end();
        }
    }
    k.chars()
        .filter(|c| !matches!(c, ' ' | '_' | '-' | '.' | '#' | '"' | '\'' | '*' | '`' | ':'))
        .filter(|c| !c.is_whitespace())
        .map(|c| c.to_ascii_lowercase())
        .collect()
}

/// Split a normalised key into an alphabetic prefix and a trailing number:
/// `agent07` → (`agent`, 7). `None` unless it is letters then digits only.
fn split_number(norm: &str) -> Option<(&str, u64)> {
    let digits_at = norm.char_indices().find(|(_, c)| c.is_ascii_digit()).map(|(i, _)| i)?;
    let (prefix, digits) = norm.split_at(digits_at);
    if !prefix.chars().all(|c| c.is_ascii_lowercase()) {
        return None;
    }
    if digits.is_empty() || digits.len() > 18 || !digits.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok().map(|n| (prefix, n))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(r: &Roster, key: &str) -> Option<(String, bool)> {
        r.resolve(key).map(|m| (r.ids()[m.index].clone(), m.exact))
    }

    #[test]
    fn default_ids() {
        assert_eq!(Roster::default_ids(3), ["agent_01", "agent_02", "agent_03"]);
        assert_eq!(Roster::default_ids(120)[0], "agent_001");
        assert!(Roster::with_default_ids(0).is_none());
        assert_eq!(Roster::numbered_ids("P", 1, 2), ["P1", "P2"]);
    }

    #[test]
    fn lenient_forms() {
        let r = Roster::with_default_ids(20).unwrap();
        assert_eq!(id(&r, "agent_07"), Some(("agent_07".into(), true)));
        for k in [
            "7",
            "07",
            "Agent 7",
            "agent7",
            "P7",
            "agent_7",
            "Agent_07",
            "AGENT-07",
            "agent_07 [Wug]",
            "Participant #7",
            " agent_07 ",
            "**agent_07**",
        ] {
            assert_eq!(id(&r, k), Some(("agent_07".into(), false)), "{k}");
        }
        for k in ["21", "0", "group 7", "agent_7b", "", "seven", "x7"] {
            assert_eq!(id(&r, k), None, "{k}");
        }
    }

    #[test]
    fn shared_numbers_are_ambiguous() {
        let r = Roster::new(["red_1", "blue_1", "blue_2"]).unwrap();
        assert_eq!(id(&r, "1"), None);
        assert_eq!(id(&r, "2"), Some(("blue_2".into(), false)));
        assert_eq!(id(&r, "Blue 1"), Some(("blue_1".into(), false)));
    }

    #[test]
    fn errors() {
        assert_eq!(Roster::new(Vec::<String>::new()).unwrap_err(), RosterError::Empty);
        assert_eq!(Roster::new(["a", "a"]).unwrap_err(), RosterError::Duplicate("a".into()));
        assert_eq!(Roster::new(["a", " "]).unwrap_err(), RosterError::BlankId);
    }
}
