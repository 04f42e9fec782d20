//! Which units the page shows: a bounded, deterministic number per condition, so a run of 86,460
//! trials gives a page of a few thousand samples, the same page every time.

use std::cmp::Ordering;
use std::collections::BTreeMap;

use herd_design::sha256_hex;

/// Up to `per_condition` items of each condition (`condition(item)`): those whose `spread(item)`
/// has the lowest SHA-256, ties by position. The spread key leaves out the factors a condition varies
/// (N and level for a trial; reasoning, instrument, labels and pass for a decider), so the page shows
/// the same trial indices and deciders in every condition that shares them, and neither the first
/// trials of a run nor its storage order decide which ones. Returns the picks and the number of
/// conditions.
pub(crate) fn pick<T>(
    items: Vec<T>,
    condition: impl Fn(&T) -> String,
    spread: impl Fn(&T) -> String,
    per_condition: usize,
) -> (Vec<T>, usize) {
    let mut by_condition: BTreeMap<String, Vec<(String, usize, T)>> = BTreeMap::new();
    for (position, item) in items.into_iter().enumerate() {
        let rank = sha256_hex(spread(&item).as_bytes());
        by_condition.entry(condition(&item)).or_default().push((rank, position, item));
    }
    let conditions = by_condition.len();
    let mut picked = Vec::new();
    for mut group in by_condition.into_values() {
        group.sort_by(|a, b| (&a.0, a.1).cmp(&(&b.0, b.1)));
        picked.extend(group.into_iter().take(per_condition).map(|(_, _, item)| item));
    }
    (picked, conditions)
}

/// Orders condition values as a reader expects: numbers by value (N = 2 before N = 10), text by text,
/// a missing value first.
pub(crate) fn natural(a: &str, b: &str) -> Ordering {
    match (a.parse::<f64>(), b.parse::<f64>()) {
        (Ok(x), Ok(y)) => x.total_cmp(&y),
        _ => a.cmp(b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_condition_keeps_at_most_k_items_and_the_same_ones_in_any_order() {
        let items: Vec<(u32, u32)> = (0..4).flat_map(|n| (0..50).map(move |seed| (n, seed))).collect();
        let condition = |&(n, _): &(u32, u32)| format!("n={n}");
        let spread = |&(_, seed): &(u32, u32)| format!("seed={seed}");
        let (picked, conditions) = pick(items.clone(), condition, spread, 3);
        assert_eq!(conditions, 4);
        assert_eq!(picked.len(), 12);
        // The same trial indices in every condition, and not simply the first ones.
        let seeds = |n: u32| picked.iter().filter(|i| i.0 == n).map(|i| i.1).collect::<Vec<_>>();
        assert!((1..4).all(|n| seeds(n) == seeds(0)), "{picked:?}");
        assert_ne!(seeds(0), vec![0, 1, 2]);
        // Storage order does not matter.
        let mut reversed = items;
        reversed.reverse();
        let (again, _) = pick(reversed, condition, spread, 3);
        let mut a = picked.clone();
        let mut b = again;
        a.sort();
        b.sort();
        assert_eq!(a, b);
        // A condition with fewer items than K shows them all.
        assert_eq!(pick(vec![(9, 1)], condition, spread, 3).0, vec![(9, 1)]);
    }

    #[test]
    fn numbers_sort_by_value() {
        let mut values = vec!["10", "2", "0", "far", "near"];
        values.sort_by(|a, b| natural(a, b));
        assert_eq!(values, ["0", "2", "10", "far", "near"]);
    }
}
