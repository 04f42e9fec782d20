//! `--shard k/n`: a partition of the units of an experiment into n disjoint shards.

use crate::expand::Unit;
use sha2::{Digest, Sha256};

/// Shard `index` of `count` (1-based, as written on the command line: `2/8`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    pub index: u32,
    pub count: u32,
}

impl Shard {
    pub const WHOLE: Shard = Shard { index: 1, count: 1 };

    /// Whether `unit` belongs to this shard. The choice hashes the unit's shard group, so it depends on
    /// nothing but the unit itself: every unit lands in exactly one shard whatever the expansion order, and
    /// the units that share an image or a society stay together.
    pub fn contains(&self, unit: &Unit) -> bool {
        if self.count == 1 {
            return true;
        }
        let key = format!("{}\u{0}{}", unit.key.experiment, unit.shard_group());
        let digest = Sha256::digest(key.as_bytes());
        let mut first = [0u8; 8];
        first.copy_from_slice(&digest[..8]);
        u64::from_le_bytes(first) % u64::from(self.count) == u64::from(self.index - 1)
    }
}

impl std::str::FromStr for Shard {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || format!("`{s}` is not a shard: write k/n with 1 ≤ k ≤ n, e.g. 2/8");
        let (k, n) = s.split_once('/').ok_or_else(bad)?;
        let index: u32 = k.trim().parse().map_err(|_| bad())?;
        let count: u32 = n.trim().parse().map_err(|_| bad())?;
        if index == 0 || count == 0 || index > count {
            return Err(bad());
        }
        Ok(Shard { index, count })
    }
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}
