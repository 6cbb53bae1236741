//! Key groups: the unit of state partitioning, as in Flink.
//!
//! A key hashes into one of `max_parallelism` key groups. Worker `i` of `n` owns the
//! contiguous range of groups `[ceil(i·m/n), ceil((i+1)·m/n))`, exactly Flink's
//! `KeyGroupRangeAssignment`, so restoring on another worker count moves whole groups and the
//! number of groups (the max parallelism) can never change for a job's state.
//!
//! The hash is stable across processes and runs (FxHash of the key's `Hash` followed by a
//! 64-bit finalizer), never `RandomState`.

use std::hash::{Hash, Hasher};

/// The default number of key groups (Flink's default max parallelism for small jobs).
pub const DEFAULT_MAX_PARALLELISM: u32 = 128;

/// A key group index in `0..max_parallelism`.
pub type KeyGroup = u32;

/// A stable 64-bit hash of a key: the same on every worker, process and run.
#[inline]
pub fn stable_hash<K: Hash + ?Sized>(key: &K) -> u64 {
    let mut hasher = rustc_hash::FxHasher::default();
    key.hash(&mut hasher);
    fmix64(hasher.finish())
}

/// MurmurHash3's 64-bit finalizer: spreads FxHash's weak low bits over all bits.
#[inline]
fn fmix64(mut k: u64) -> u64 {
    k ^= k >> 33;
    k = k.wrapping_mul(0xff51_afd7_ed55_8ccd);
    k ^= k >> 33;
    k = k.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    k ^ (k >> 33)
}

/// The key group of a key hash.
#[inline]
pub fn key_group_for_hash(hash: u64, max_parallelism: u32) -> KeyGroup {
    debug_assert!(max_parallelism > 0);
    (hash % u64::from(max_parallelism)) as KeyGroup
}

/// The key group of a key.
#[inline]
pub fn key_group<K: Hash + ?Sized>(key: &K, max_parallelism: u32) -> KeyGroup {
    key_group_for_hash(stable_hash(key), max_parallelism)
}

/// The worker (operator instance) that owns `group` when `parallelism` workers share
/// `max_parallelism` groups.
#[inline]
pub fn worker_for_key_group(group: KeyGroup, max_parallelism: u32, parallelism: usize) -> usize {
    debug_assert!(group < max_parallelism);
    (u64::from(group) * parallelism as u64 / u64::from(max_parallelism)) as usize
}

/// A contiguous, half-open range of key groups `[start, end)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct KeyGroupRange {
    /// First group in the range.
    pub start: KeyGroup,
    /// One past the last group in the range.
    pub end: KeyGroup,
}

impl KeyGroupRange {
    /// The groups owned by worker `index` of `parallelism`.
    pub fn for_worker(index: usize, parallelism: usize, max_parallelism: u32) -> Self {
        assert!(
            index < parallelism,
            "worker index {index} out of {parallelism}"
        );
        let m = u64::from(max_parallelism);
        let p = parallelism as u64;
        let i = index as u64;
        let start = (i * m).div_ceil(p) as KeyGroup;
        let end = ((i + 1) * m).div_ceil(p) as KeyGroup;
        KeyGroupRange { start, end }
    }

    /// Whether `group` lies in the range.
    pub fn contains(&self, group: KeyGroup) -> bool {
        self.start <= group && group < self.end
    }

    /// The number of groups in the range.
    pub fn len(&self) -> u32 {
        self.end - self.start
    }

    /// Whether the range holds no group (more workers than groups).
    pub fn is_empty(&self) -> bool {
        self.end == self.start
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The ranges of all workers tile `0..max` and agree with `worker_for_key_group`.
        #[test]
        fn ranges_tile_and_agree(max in 1u32..2048, parallelism in 1usize..300) {
            prop_assume!(parallelism as u32 <= max);
            let mut next = 0;
            for w in 0..parallelism {
                let r = KeyGroupRange::for_worker(w, parallelism, max);
                prop_assert_eq!(r.start, next);
                for g in r.start..r.end {
                    prop_assert_eq!(worker_for_key_group(g, max, parallelism), w);
                }
                next = r.end;
            }
            prop_assert_eq!(next, max);
        }
    }

    #[test]
    fn hash_is_stable() {
        // Fixed values: a change here would silently re-partition every saved state.
        assert_eq!(stable_hash(&42u64), 9_043_581_952_180_239_741);
        assert_eq!(
            key_group(&42u64, 128),
            (9_043_581_952_180_239_741u64 % 128) as u32
        );
        assert_eq!(
            stable_hash("auction"),
            stable_hash(&String::from("auction"))
        );
        let groups: std::collections::HashSet<_> =
            (0u64..10_000).map(|k| key_group(&k, 128)).collect();
        assert_eq!(
            groups.len(),
            128,
            "small integer keys must reach every group"
        );
    }
}
