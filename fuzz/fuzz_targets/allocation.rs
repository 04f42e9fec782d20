//! Fuzz the allocation parser (and the answer parser on the same bytes): any input
//! must parse without panicking, and any allocation produced must be non-negative,
//! finite, over exactly the decider's recipients, and sum to the pool.
#![no_main]

use std::sync::OnceLock;

use herd_parse::{ParseStatus, Roster, parse_allocation, parse_answer, recipients, round_to_pool};
use libfuzzer_sys::fuzz_target;

fn roster() -> &'static Roster {
    static ROSTER: OnceLock<Roster> = OnceLock::new();
    ROSTER.get_or_init(|| Roster::with_default_ids(20).expect("20 ids"))
}

fuzz_target!(|data: &[u8]| {
    let r = roster();
    // The first byte picks the decider and the pool; the rest is the model output.
    let (sel, raw) = match data.split_first() {
        Some((s, rest)) => (*s, rest),
        None => (0, data),
    };
    let decider = &r.ids()[usize::from(sel) % r.len()];
    let pool = [100.0, 1.0, 37.5, 1e6][usize::from(sel >> 5) % 4];

    let p = parse_allocation(raw, r, decider, pool);
    match &p.allocation {
        None => assert_eq!(p.status, ParseStatus::Failed),
        Some(a) => {
            assert_ne!(p.status, ParseStatus::Failed);
            let mut want = recipients(r, decider);
            want.sort_unstable();
            assert!(a.keys().map(String::as_str).eq(want.iter().copied()));
            assert!(a.values().all(|v| v.is_finite() && *v >= 0.0));
            let sum: f64 = a.values().sum();
            assert!((sum - pool).abs() <= 1e-9 * pool, "sum {sum} pool {pool}");
            if let Some(rounded) = round_to_pool(a, 100) {
                assert_eq!(rounded.values().sum::<u32>(), 100);
            }
        }
    }
    assert_eq!(p.failure.is_some(), p.status == ParseStatus::Failed);
    assert_eq!(p.reason.is_none(), p.status == ParseStatus::Ok);

    let a = parse_answer(raw);
    assert_eq!(a.answer.is_some(), a.status != ParseStatus::Failed);
});
