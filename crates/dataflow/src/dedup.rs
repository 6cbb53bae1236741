//! Record-id deduplication: [`DataStream::dedup_by`].
//!
//! A record is dropped when a record with the same id was kept before and its time bucket has
//! not expired; otherwise it is kept (emitted unchanged, with its timestamp) and remembered.
//!
//! # Layout
//!
//! Records are routed by the key group of their id (`stable_hash(id) % max_parallelism`), so
//! all copies of an id meet on one worker, and the state of one key group is one unit: a
//! restore on another number of workers moves whole key groups, as for every keyed operator.
//! The operator is a keyed process function ([`crate::process`]) whose key *is* the key group,
//! so checkpoints, the cut at epoch boundaries, timers and restores are those of process
//! functions.
//!
//! Per key group, ids live in **event-time buckets** of `retention / buckets` each (a record
//! goes to the bucket of its timestamp). Each bucket has
//!
//! * a **Bloom filter** ([`BloomFilter`], sized for the bucket's share of
//!   `expected_ids_per_bucket` at `false_positive_rate`), the fast path: a negative answer
//!   means the id is not in that bucket, and the exact store is not consulted;
//! * an **exact id store** (a hash set of the ids themselves) behind it: a positive Bloom
//!   answer is confirmed there, so a false positive never drops a record.
//!
//! # Time and expiry (event time)
//!
//! Buckets follow event time, as Flink users expect of state with a retention: a record needs
//! a timestamp (`assign_timestamps_and_watermarks` upstream). A record at `t` is compared with
//! the buckets within the retention of `t` on either side (a bucket `[s, e)` is consulted iff
//! `e + retention > t` and `s <= t + retention`, so the verdict does not depend on the order
//! in which copies far apart in time arrive): ids are remembered for at least `retention` and
//! at most `retention + retention / buckets` of event time. A bucket is dropped when the
//! watermark reaches `e + retention` (an event-time timer per bucket and key group), at which
//! point no record that is not late would consult it anyway. So for records that are not late the result
//! depends only on the records, never on how fast watermarks travel; a late record (below the
//! watermark) is compared with the buckets still held.
//!
//! # State and checkpoints
//!
//! A snapshot holds the ids of every bucket (not the Bloom filters: they are rebuilt from the
//! ids on the first record after a restore, with the sizes of the restoring job's
//! configuration). Records of the interval after a checkpoint's cut are held until the cut is
//! taken, as in every process function, so the state reflects exactly the records before it.
//!
//! # Metrics
//!
//! `<name>.numDuplicatesDropped`, `<name>.numBloomFalsePositives` (Bloom positives that the
//! exact store refuted) and `<name>.numBloomProbes`.

use std::collections::{BTreeMap, HashSet};
use std::hash::Hash;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rustc_hash::FxBuildHasher;
use spate_types::keygroup::{key_group_for_hash, stable_hash, KeyGroup};
use spate_types::{Data, SpateError};

use crate::keyed::KeyFn;
use crate::process::{
    build_keyed_process_grouped, no_timestamp_error, KeyedProcessFunction, ProcessContext,
    TimeDomain,
};
use crate::stream::DataStream;
use crate::time::{Timestamp, NO_TIMESTAMP};

/// The settings of [`DataStream::dedup_by`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DedupConfig {
    /// How long (in event time) an id is remembered after the bucket of its first record ends.
    pub retention: Duration,
    /// The number of buckets the retention is cut into: more buckets free memory in smaller
    /// steps, at the cost of more Bloom probes per record.
    pub buckets: u32,
    /// The number of distinct ids expected per bucket over the whole job (each key group's
    /// filter is sized for its share); more ids raise the false-positive rate, never the
    /// result.
    pub expected_ids_per_bucket: u64,
    /// The Bloom filters' target false-positive rate, in `(0, 1)`.
    pub false_positive_rate: f64,
}

impl Default for DedupConfig {
    /// One hour in six buckets, a million ids per bucket, 1% false positives.
    fn default() -> Self {
        DedupConfig {
            retention: Duration::from_secs(3600),
            buckets: 6,
            expected_ids_per_bucket: 1_000_000,
            false_positive_rate: 0.01,
        }
    }
}

impl DedupConfig {
    /// Checks the settings, with a one-line reason.
    pub fn validate(&self) -> Result<(), SpateError> {
        let bad = |why: &str| Err(SpateError::Config(format!("dedup: {why}")));
        if self.retention.as_millis() < 1 {
            return bad("the retention must be at least 1 ms");
        }
        if self.buckets == 0 {
            return bad("there must be at least one bucket");
        }
        if u128::from(self.buckets) > self.retention.as_millis() {
            return bad("a bucket must span at least 1 ms (fewer buckets or a longer retention)");
        }
        if self.expected_ids_per_bucket == 0 {
            return bad("the expected ids per bucket must be at least 1");
        }
        if !(self.false_positive_rate > 0.0 && self.false_positive_rate < 1.0) {
            return bad("the false-positive rate must be in (0, 1)");
        }
        Ok(())
    }

    fn bucket_ms(&self) -> i64 {
        (self.retention.as_millis() / u128::from(self.buckets.max(1))).max(1) as i64
    }

    fn retention_ms(&self) -> i64 {
        i64::try_from(self.retention.as_millis()).unwrap_or(i64::MAX / 4)
    }
}

/// A Bloom filter over 64-bit hashes: `m` bits, `k` probes by double hashing
/// (Kirsch–Mitzenmacher) of two independent mixes of the hash.
#[derive(Debug, Clone)]
pub struct BloomFilter {
    words: Vec<u64>,
    bits: u64,
    probes: u32,
}

/// SplitMix64's finalizer: a bijective mix of a 64-bit value.
#[inline]
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl BloomFilter {
    /// A filter for `expected` items at false-positive rate `fpr`: `m = -n ln p / ln² 2` bits
    /// and `k = m/n ln 2` probes (at least 64 bits and one probe).
    pub fn new(expected: u64, fpr: f64) -> Self {
        let n = expected.max(1) as f64;
        let p = fpr.clamp(1e-12, 0.5);
        let ln2 = std::f64::consts::LN_2;
        let bits = ((-n * p.ln()) / (ln2 * ln2)).ceil().max(64.0) as u64;
        let probes = ((bits as f64 / n) * ln2).round().clamp(1.0, 32.0) as u32;
        BloomFilter {
            words: vec![0; bits.div_ceil(64) as usize],
            bits,
            probes,
        }
    }

    #[inline]
    fn positions(&self, hash: u64) -> impl Iterator<Item = u64> + '_ {
        let h1 = mix(hash);
        let h2 = mix(hash ^ 0x9e37_79b9_7f4a_7c15) | 1;
        (0..u64::from(self.probes)).map(move |i| {
            let x = h1.wrapping_add(i.wrapping_mul(h2));
            // Maps x onto [0, bits) without a division.
            ((u128::from(x) * u128::from(self.bits)) >> 64) as u64
        })
    }

    /// Adds an item by its hash.
    #[inline]
    pub fn insert(&mut self, hash: u64) {
        let positions: smallvec::SmallVec<[u64; 16]> = self.positions(hash).collect();
        for bit in positions {
            self.words[(bit / 64) as usize] |= 1 << (bit % 64);
        }
    }

    /// Whether the item may have been added (`false`: it certainly was not).
    #[inline]
    pub fn contains(&self, hash: u64) -> bool {
        self.positions(hash)
            .all(|bit| self.words[(bit / 64) as usize] & (1 << (bit % 64)) != 0)
    }

    /// The filter's size in bits.
    pub fn bits(&self) -> u64 {
        self.bits
    }

    /// The number of probes per item.
    pub fn probes(&self) -> u32 {
        self.probes
    }
}

/// One time bucket of a key group: the ids, and their filter (absent after a restore until
/// the next record rebuilds it).
#[derive(Debug)]
struct Bucket<I> {
    ids: HashSet<I, FxBuildHasher>,
    bloom: Option<BloomFilter>,
}

/// Counts of a [`DedupTable`]'s work.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct DedupCounts {
    /// Bloom filter queries.
    pub probes: u64,
    /// Positive Bloom answers that the exact store refuted.
    pub false_positives: u64,
    /// Records found to be duplicates.
    pub duplicates: u64,
}

/// The dedup state of one key group: event-time buckets of ids with their Bloom filters. See
/// the [module docs](self). Public for benchmarks and tests; jobs use
/// [`DataStream::dedup_by`].
#[derive(Debug)]
pub struct DedupTable<I> {
    buckets: BTreeMap<i64, Bucket<I>>,
}

impl<I> Default for DedupTable<I> {
    fn default() -> Self {
        DedupTable {
            buckets: BTreeMap::new(),
        }
    }
}

/// The sizes a table works with (from the job's configuration).
#[derive(Debug, Clone, Copy)]
pub struct TableParams {
    bucket_ms: i64,
    retention_ms: i64,
    expected: u64,
    fpr: f64,
}

impl TableParams {
    /// The parameters of one key group's table under `config`, with `key_groups` groups
    /// sharing the expected ids.
    pub fn new(config: &DedupConfig, key_groups: u32) -> Self {
        TableParams {
            bucket_ms: config.bucket_ms(),
            retention_ms: config.retention_ms(),
            expected: config
                .expected_ids_per_bucket
                .div_ceil(u64::from(key_groups.max(1)))
                .max(1),
            fpr: config.false_positive_rate,
        }
    }
}

impl<I: Hash + Eq + Clone> DedupTable<I> {
    /// Looks `id` (with `hash = stable_hash(id)`) up at event time `ts`; remembers it if new.
    /// Returns whether it is new (the record is kept).
    pub fn observe(
        &mut self,
        params: &TableParams,
        id: &I,
        hash: u64,
        ts: Timestamp,
        counts: &mut DedupCounts,
    ) -> bool {
        let oldest = ts
            .saturating_sub(params.retention_ms)
            .div_euclid(params.bucket_ms);
        let newest = ts
            .saturating_add(params.retention_ms)
            .div_euclid(params.bucket_ms);
        for bucket in self.buckets.range_mut(oldest..=newest).map(|(_, b)| b) {
            let bloom = bucket.bloom.get_or_insert_with(|| {
                let mut bloom = BloomFilter::new(params.expected, params.fpr);
                for id in &bucket.ids {
                    bloom.insert(stable_hash(id));
                }
                bloom
            });
            counts.probes += 1;
            if bloom.contains(hash) {
                if bucket.ids.contains(id) {
                    counts.duplicates += 1;
                    return false;
                }
                counts.false_positives += 1;
            }
        }
        let index = ts.div_euclid(params.bucket_ms);
        let bucket = self.buckets.entry(index).or_insert_with(|| Bucket {
            ids: HashSet::default(),
            bloom: None,
        });
        bucket
            .bloom
            .get_or_insert_with(|| BloomFilter::new(params.expected, params.fpr))
            .insert(hash);
        bucket.ids.insert(id.clone());
        true
    }

    /// When the bucket of `ts` expires: the watermark at its end plus the retention.
    pub fn expiry_of(params: &TableParams, ts: Timestamp) -> Timestamp {
        ts.div_euclid(params.bucket_ms)
            .saturating_add(1)
            .saturating_mul(params.bucket_ms)
            .saturating_add(params.retention_ms)
    }

    /// Drops the buckets that expire at or before `watermark`.
    pub fn expire(&mut self, params: &TableParams, watermark: Timestamp) {
        self.buckets.retain(|&index, _| {
            index
                .saturating_add(1)
                .saturating_mul(params.bucket_ms)
                .saturating_add(params.retention_ms)
                > watermark
        });
    }

    /// The number of ids held.
    pub fn len(&self) -> usize {
        self.buckets.values().map(|b| b.ids.len()).sum()
    }

    /// Whether no id is held.
    pub fn is_empty(&self) -> bool {
        self.buckets.is_empty()
    }

    /// The number of buckets held.
    pub fn bucket_count(&self) -> usize {
        self.buckets.len()
    }

    /// An estimate of the heap bytes held: the filters' bits and the hash sets' slots (one
    /// control byte and one `I` per slot; heap data owned by an `I` is not counted).
    pub fn memory_bytes(&self) -> usize {
        self.buckets
            .values()
            .map(|b| {
                b.bloom.as_ref().map_or(0, |f| f.words.len() * 8)
                    + b.ids.capacity() * (std::mem::size_of::<I>() + 1)
            })
            .sum()
    }
}

/// A table as it is checkpointed: the ids of each bucket.
#[derive(serde::Serialize)]
struct TableRef<'a, I> {
    buckets: Vec<(i64, Vec<&'a I>)>,
}

#[derive(serde::Deserialize)]
struct TableOwned<I> {
    buckets: Vec<(i64, Vec<I>)>,
}

impl<I: serde::Serialize> serde::Serialize for DedupTable<I> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        TableRef {
            buckets: self
                .buckets
                .iter()
                .map(|(&i, b)| (i, b.ids.iter().collect()))
                .collect(),
        }
        .serialize(s)
    }
}

impl<'de, I: serde::Deserialize<'de> + Hash + Eq> serde::Deserialize<'de> for DedupTable<I> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let owned = TableOwned::<I>::deserialize(d)?;
        Ok(DedupTable {
            buckets: owned
                .buckets
                .into_iter()
                .map(|(i, ids)| {
                    (
                        i,
                        Bucket {
                            ids: ids.into_iter().collect(),
                            bloom: None,
                        },
                    )
                })
                .collect(),
        })
    }
}

/// The dedup operator as a process function keyed by the key group of the id.
struct Dedup<T, I> {
    id: Arc<dyn Fn(&T) -> I + Send + Sync>,
    params: TableParams,
    duplicates: Arc<AtomicU64>,
    false_positives: Arc<AtomicU64>,
    probes: Arc<AtomicU64>,
    name: String,
    _records: PhantomData<fn(T)>,
}

impl<T, I> KeyedProcessFunction<KeyGroup, T, T> for Dedup<T, I>
where
    T: Data,
    I: Data + Hash + Eq,
{
    type State = DedupTable<I>;

    fn process_element(&self, value: T, ctx: &mut ProcessContext<'_, KeyGroup, Self::State, T>) {
        let ts = ctx.timestamp();
        if ts == NO_TIMESTAMP {
            ctx.fail(no_timestamp_error(&self.name));
            return;
        }
        let id = (self.id)(&value);
        let hash = stable_hash(&id);
        let mut counts = DedupCounts::default();
        let table = ctx.state().get_or_insert_with(DedupTable::default);
        let buckets_before = table.bucket_count();
        let new = table.observe(&self.params, &id, hash, ts, &mut counts);
        let added_bucket = table.bucket_count() > buckets_before;
        self.probes.fetch_add(counts.probes, Ordering::Relaxed);
        if counts.false_positives > 0 {
            self.false_positives
                .fetch_add(counts.false_positives, Ordering::Relaxed);
        }
        if new {
            if added_bucket {
                ctx.register_event_time_timer(DedupTable::<I>::expiry_of(&self.params, ts));
            }
            ctx.collect(value);
        } else {
            self.duplicates.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn on_timer(
        &self,
        timestamp: Timestamp,
        _domain: TimeDomain,
        ctx: &mut ProcessContext<'_, KeyGroup, Self::State, T>,
    ) {
        let state = ctx.state();
        if let Some(table) = state.as_mut() {
            table.expire(&self.params, timestamp);
            if table.is_empty() {
                *state = None;
            }
        }
    }
}

/// The key group of a key that is a key group.
fn identity_group(group: &KeyGroup, _max_parallelism: u32) -> KeyGroup {
    *group
}

impl<T: Data> DataStream<T> {
    /// Drops records whose id (`id(record)`) was seen before within the retention, with a
    /// Bloom-filter fast path and an exact id store behind it, in event-time buckets. See the
    /// [`dedup`](crate::dedup) module for the exact semantics.
    ///
    /// Records need timestamps. An invalid `config` fails the job with a one-line reason.
    ///
    /// ```no_run
    /// # use spate_dataflow::{DataStream, dedup::DedupConfig};
    /// # fn f(events: DataStream<(u64, String)>) {
    /// let unique = events.dedup_by(|e: &(u64, String)| e.0, DedupConfig::default());
    /// # }
    /// ```
    pub fn dedup_by<I, F>(&self, id: F, config: DedupConfig) -> DataStream<T>
    where
        I: Data + Hash + Eq,
        F: Fn(&T) -> I + Send + Sync + 'static,
    {
        let id: Arc<dyn Fn(&T) -> I + Send + Sync> = Arc::new(id);
        self.process_node("dedup", "hash", move |ctx, input, name| {
            if let Err(e) = config.validate() {
                ctx.shared().fail(e);
            }
            let maxp = ctx.config().max_parallelism;
            let metric = |m: &str| ctx.shared().metrics.counter(&format!("{name}.{m}"));
            let f = Dedup {
                id: Arc::clone(&id),
                params: TableParams::new(&config, maxp),
                duplicates: metric("numDuplicatesDropped"),
                false_positives: metric("numBloomFalsePositives"),
                probes: metric("numBloomProbes"),
                name: name.to_owned(),
                _records: PhantomData,
            };
            let key_id = Arc::clone(&id);
            let key: KeyFn<KeyGroup, T> =
                Arc::new(move |x: &T| key_group_for_hash(stable_hash(&key_id(x)), maxp));
            build_keyed_process_grouped(ctx, input, key, Arc::new(f), name, identity_group)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bloom_has_no_false_negatives_and_about_its_false_positive_rate() {
        let mut bloom = BloomFilter::new(10_000, 0.01);
        for i in 0..10_000u64 {
            bloom.insert(stable_hash(&i));
        }
        assert!((0..10_000u64).all(|i| bloom.contains(stable_hash(&i))));
        let fp = (10_000..110_000u64)
            .filter(|i| bloom.contains(stable_hash(i)))
            .count();
        // 1% of 100 000, with a wide margin for chance.
        assert!((500..1500).contains(&fp), "{fp} false positives");
        assert_eq!(bloom.probes(), 7);
    }

    fn params(retention: u64, buckets: u32) -> TableParams {
        TableParams::new(
            &DedupConfig {
                retention: Duration::from_millis(retention),
                buckets,
                expected_ids_per_bucket: 100,
                false_positive_rate: 0.01,
            },
            1,
        )
    }

    #[test]
    fn table_remembers_within_the_retention_and_forgets_after() {
        let p = params(100, 4); // buckets of 25 ms
        let mut t = DedupTable::<u64>::default();
        let mut c = DedupCounts::default();
        assert!(t.observe(&p, &1, stable_hash(&1u64), 10, &mut c));
        assert!(!t.observe(&p, &1, stable_hash(&1u64), 50, &mut c));
        // Bucket [0, 25) is consulted while 25 + 100 > ts.
        assert!(!t.observe(&p, &1, stable_hash(&1u64), 124, &mut c));
        assert!(t.observe(&p, &1, stable_hash(&1u64), 125, &mut c));
        assert_eq!(c.duplicates, 2);
        assert_eq!(DedupTable::<u64>::expiry_of(&p, 10), 125);
        t.expire(&p, 124);
        assert_eq!(t.bucket_count(), 2);
        t.expire(&p, 125);
        assert_eq!(t.bucket_count(), 1, "the bucket of ts 125 stays");
        assert_eq!(t.len(), 1);
    }

    #[test]
    fn table_survives_serialization_and_rebuilds_filters() {
        let p = params(1000, 10);
        let mut t = DedupTable::<String>::default();
        let mut c = DedupCounts::default();
        for i in 0..500u64 {
            let id = format!("id{}", i % 300);
            t.observe(&p, &id, stable_hash(&id), i as i64, &mut c);
        }
        let bytes = bincode::serialize(&t).unwrap();
        let mut back: DedupTable<String> = bincode::deserialize(&bytes).unwrap();
        assert_eq!(back.len(), 300);
        for i in 0..300u64 {
            let id = format!("id{i}");
            assert!(!back.observe(&p, &id, stable_hash(&id), 600, &mut c));
        }
        assert!(back.observe(&p, &"new".to_string(), stable_hash("new"), 600, &mut c));
    }

    #[test]
    fn bad_configs_are_refused_in_one_line() {
        let ok = DedupConfig::default();
        assert!(ok.validate().is_ok());
        for bad in [
            DedupConfig { buckets: 0, ..ok },
            DedupConfig {
                false_positive_rate: 1.0,
                ..ok
            },
            DedupConfig {
                retention: Duration::ZERO,
                ..ok
            },
            DedupConfig {
                expected_ids_per_bucket: 0,
                ..ok
            },
        ] {
            let err = bad.validate().unwrap_err().to_string();
            assert!(err.contains("dedup:") && !err.contains('\n'), "{err}");
        }
    }
}
