//! The state API: every kind of keyed state against a naive per-key oracle, TTL expiry with a
//! fake clock against a naive model of Flink's rules, keyed state through a failure and a
//! restore on more workers (a failure-free run is the oracle), and operator state dealt out
//! evenly on a rescale with nothing lost or doubled.

use std::cell::Cell;
use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use spate::prelude::*;

use crate::checkpoints::{rows, Flaky};

/// A pseudo-random sequence (xorshift), so that inputs are varied but fixed.
fn noise(seed: u64) -> impl Iterator<Item = u64> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    std::iter::from_fn(move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        Some(x)
    })
}

/// Per key, its records in order: one collection item per key, so that a key's records come
/// from one reader and keep their order on any number of workers.
fn per_key<X: Clone>(
    keys: u32,
    mut record: impl FnMut(u32, &mut dyn Iterator<Item = u64>) -> Vec<X>,
) -> Vec<(u32, Vec<X>)> {
    (0..keys)
        .map(|k| (k, record(k, &mut noise(u64::from(k) + 1))))
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Every kind against an oracle

/// What the function saw of each state after one record.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
struct Seen {
    key: u32,
    step: u32,
    previous: Option<u64>,
    list: Vec<u64>,
    map: Vec<(u64, u64)>,
    map_facts: (u64, u64, bool, bool, Option<u64>),
    max: Option<u64>,
    mean: Option<u64>,
}

struct Mean;

impl AggregateFunction<u64> for Mean {
    type Acc = (u64, u64);
    type Out = u64;
    fn create_accumulator(&self) -> (u64, u64) {
        (0, 0)
    }
    fn add(&self, v: &u64, acc: &mut (u64, u64)) {
        acc.0 += 1;
        acc.1 += v;
    }
    fn get_result(&self, acc: &(u64, u64)) -> u64 {
        acc.1 / acc.0.max(1)
    }
    fn merge(&self, a: (u64, u64), b: (u64, u64)) -> (u64, u64) {
        (a.0 + b.0, a.1 + b.1)
    }
}

struct AllKinds {
    value: ValueStateDescriptor<u64>,
    list: ListStateDescriptor<u64>,
    map: MapStateDescriptor<u64, u64>,
    max: ReducingStateDescriptor<u64>,
    mean: AggregatingStateDescriptor<u64, (u64, u64), u64>,
    step: ValueStateDescriptor<u32>,
}

impl AllKinds {
    fn new() -> Self {
        AllKinds {
            value: ValueStateDescriptor::new("value"),
            list: ListStateDescriptor::new("list"),
            map: MapStateDescriptor::new("map"),
            max: ReducingStateDescriptor::new("max", u64::max),
            mean: AggregatingStateDescriptor::new("mean", Mean),
            step: ValueStateDescriptor::new("step"),
        }
    }
}

impl KeyedProcessFunction<u32, (u32, u64), Seen> for AllKinds {
    type State = KeyedState;

    fn process_element(
        &self,
        (key, x): (u32, u64),
        ctx: &mut ProcessContext<'_, u32, KeyedState, Seen>,
    ) {
        let step = {
            let mut s = ctx.value_state(&self.step);
            let step = s.value().copied().unwrap_or(0) + 1;
            s.update(step);
            step
        };
        let previous = ctx.value_state(&self.value).value().copied();
        ctx.value_state(&self.value).update(x);
        {
            let mut l = ctx.list_state(&self.list);
            match x % 10 {
                0 => l.clear(),
                1 => l.update(vec![x, x + 1]),
                2 => l.add_all([x, x / 2]),
                _ => l.add(x),
            }
        }
        let list: Vec<u64> = ctx.list_state(&self.list).get().copied().collect();
        {
            let mut m = ctx.map_state(&self.map);
            match x % 9 {
                0 => m.clear(),
                1 => {
                    m.remove(&(x % 5));
                }
                2 => m.put_all([(x % 5, x), ((x + 1) % 5, x + 1)]),
                _ => m.put(x % 5, x),
            }
        }
        let mut m = ctx.map_state(&self.map);
        let mut map: Vec<(u64, u64)> = m.entries().map(|(k, v)| (*k, *v)).collect();
        map.sort_unstable();
        let map_facts = (
            m.keys().sum(),
            m.values().sum(),
            m.contains(&0),
            m.is_empty(),
            m.get(&1).copied(),
        );
        drop(m);
        ctx.reducing_state(&self.max).add(x);
        let max = ctx.reducing_state(&self.max).get().copied();
        ctx.aggregating_state(&self.mean).add(x);
        let mean = ctx.aggregating_state(&self.mean).get();
        if x % 13 == 0 {
            ctx.reducing_state(&self.max).clear();
            ctx.aggregating_state(&self.mean).clear();
        }
        if x % 17 == 0 {
            ctx.value_state(&self.value).clear();
        }
        ctx.collect(Seen {
            key,
            step,
            previous,
            list,
            map,
            map_facts,
            max,
            mean,
        });
    }
}

/// The same function, naively: plain collections per key.
fn all_kinds_oracle(input: &[(u32, Vec<u64>)]) -> Vec<Seen> {
    let mut out = Vec::new();
    for (key, xs) in input {
        let (mut value, mut list, mut map) = (None, Vec::new(), BTreeMap::new());
        let (mut max, mut mean): (Option<u64>, Option<(u64, u64)>) = (None, None);
        for (i, &x) in xs.iter().enumerate() {
            let previous = value.replace(x);
            match x % 10 {
                0 => list.clear(),
                1 => list = vec![x, x + 1],
                2 => list.extend([x, x / 2]),
                _ => list.push(x),
            }
            match x % 9 {
                0 => map.clear(),
                1 => {
                    map.remove(&(x % 5));
                }
                2 => {
                    map.insert(x % 5, x);
                    map.insert((x + 1) % 5, x + 1);
                }
                _ => {
                    map.insert(x % 5, x);
                }
            }
            max = Some(max.map_or(x, |m: u64| m.max(x)));
            let (n, sum) = mean.unwrap_or((0, 0));
            mean = Some((n + 1, sum + x));
            out.push(Seen {
                key: *key,
                step: i as u32 + 1,
                previous,
                list: list.clone(),
                map: map.iter().map(|(k, v)| (*k, *v)).collect(),
                map_facts: (
                    map.keys().sum(),
                    map.values().sum(),
                    map.contains_key(&0),
                    map.is_empty(),
                    map.get(&1).copied(),
                ),
                max,
                mean: mean.map(|(n, s)| s / n),
            });
            if x % 13 == 0 {
                (max, mean) = (None, None);
            }
            if x % 17 == 0 {
                value = None;
            }
        }
    }
    out.sort();
    out
}

#[test]
fn every_kind_of_keyed_state_matches_a_naive_oracle_on_1_and_3_workers() {
    let input = per_key(25, |_, r| {
        let n = 20 + r.next().unwrap() % 40;
        r.take(n as usize).map(|x| x % 100).collect()
    });
    let expected = all_kinds_oracle(&input);
    assert!(expected.iter().any(|s| s.list.is_empty() && s.step > 1));
    assert!(expected.iter().any(|s| s.max.is_some() && s.mean.is_some()));
    for workers in [1, 3] {
        let env = StreamEnv::new(JobConfig::local(workers));
        let seen = env
            .from_collection(input.clone())
            .flat_map(|(k, xs): (u32, Vec<u64>)| xs.into_iter().map(move |x| (k, x)))
            .key_by(|r: &(u32, u64)| r.0)
            .process(AllKinds::new())
            .collect();
        env.execute("all kinds of state").unwrap();
        let mut seen = seen.take();
        seen.sort();
        assert_eq!(seen, expected, "{workers} workers");
    }
}

// ---------------------------------------------------------------------------------------------
// TTL with a fake clock

thread_local! {
    /// The fake processing time of this worker thread, set from each record.
    static NOW: Cell<i64> = const { Cell::new(0) };
}

const TTL_MS: i64 = 100;

/// A write of `x` at time `t`, or a read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
struct Op {
    t: i64,
    write: bool,
    x: u64,
}

struct Expiring {
    value: ValueStateDescriptor<u64>,
    map: MapStateDescriptor<u64, u64>,
}

type Read = (u32, i64, Option<u64>, Option<u64>);

impl KeyedProcessFunction<u32, (u32, Op), Read> for Expiring {
    type State = KeyedState;

    fn process_element(
        &self,
        (key, op): (u32, Op),
        ctx: &mut ProcessContext<'_, u32, KeyedState, Read>,
    ) {
        NOW.with(|n| n.set(op.t));
        if op.write {
            ctx.value_state(&self.value).update(op.x);
            ctx.map_state(&self.map).put(op.x % 3, op.x);
        } else {
            let v = ctx.value_state(&self.value).value().copied();
            let m = ctx.map_state(&self.map).get(&(op.x % 3)).copied();
            ctx.collect((key, op.t, v, m));
        }
    }
}

/// Flink's TTL rules, naively: `(value, last access)` per state and per map entry.
fn ttl_oracle(input: &[(u32, Vec<Op>)], on_read: bool, return_expired: bool) -> Vec<Read> {
    fn read(cell: &mut Option<(u64, i64)>, t: i64, on_read: bool, ret: bool) -> Option<u64> {
        let (v, stamp) = (*cell)?;
        if stamp + TTL_MS <= t {
            *cell = None;
            return ret.then_some(v);
        }
        if on_read {
            *cell = Some((v, t));
        }
        Some(v)
    }
    let mut out = Vec::new();
    for (key, ops) in input {
        let mut value = None;
        let mut map: HashMap<u64, Option<(u64, i64)>> = HashMap::new();
        for op in ops {
            if op.write {
                value = Some((op.x, op.t));
                map.insert(op.x % 3, Some((op.x, op.t)));
            } else {
                let v = read(&mut value, op.t, on_read, return_expired);
                let cell = map.entry(op.x % 3).or_default();
                let m = read(cell, op.t, on_read, return_expired);
                out.push((*key, op.t, v, m));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn ttl_expires_values_and_map_entries_by_update_type_and_visibility() {
    let input = per_key(12, |_, r| {
        let mut t = 1_000;
        (0..60)
            .map(|_| {
                let n = r.next().unwrap();
                t += (n % 120) as i64;
                Op {
                    t,
                    write: n % 10 < 3,
                    x: (n >> 8) % 50,
                }
            })
            .collect()
    });
    let mut answers = Vec::new();
    for (on_read, return_expired) in [(false, false), (true, false), (false, true), (true, true)] {
        let expected = ttl_oracle(&input, on_read, return_expired);
        let mut config = StateTtlConfig::new(Duration::from_millis(TTL_MS as u64))
            .with_time_provider(|| NOW.with(Cell::get));
        if on_read {
            config = config.update_ttl_on_read_and_write();
        }
        if return_expired {
            config = config.return_expired_if_not_cleaned_up();
        }
        for workers in [1, 3] {
            let env = StreamEnv::new(JobConfig::local(workers));
            let reads = env
                .from_collection(input.clone())
                .flat_map(|(k, ops): (u32, Vec<Op>)| ops.into_iter().map(move |op| (k, op)))
                .key_by(|r: &(u32, Op)| r.0)
                .process(Expiring {
                    value: ValueStateDescriptor::new("v").enable_time_to_live(config.clone()),
                    map: MapStateDescriptor::new("m").enable_time_to_live(config.clone()),
                })
                .collect();
            env.execute("ttl").unwrap();
            let mut reads = reads.take();
            reads.sort();
            assert_eq!(
                reads, expected,
                "on_read {on_read}, return_expired {return_expired}, {workers} workers"
            );
        }
        let found = |r: &&Read| r.2.is_some();
        answers.push(expected.iter().filter(found).count());
    }
    // The four settings differ on this input: refreshing on read keeps more values alive,
    // and returning expired ones shows more.
    assert!(
        answers[0] < answers[1] && answers[0] < answers[2],
        "{answers:?}"
    );
    assert!(
        answers[1] < answers[3] && answers[2] < answers[3],
        "{answers:?}"
    );
}

// ---------------------------------------------------------------------------------------------
// Failure and restore

const EVENTS: u64 = 30_000;

/// Rolling facts per key that do not depend on the order of its records, and a summary of
/// each key's whole state at the end of the input.
struct Tally {
    count: ValueStateDescriptor<u64>,
    values: ListStateDescriptor<u64>,
    buckets: MapStateDescriptor<u64, u64>,
    sum: ReducingStateDescriptor<u64>,
    mean: AggregatingStateDescriptor<u64, (u64, u64), u64>,
}

impl KeyedProcessFunction<u64, u64, String> for Tally {
    type State = KeyedState;

    fn process_element(&self, x: u64, ctx: &mut ProcessContext<'_, u64, KeyedState, String>) {
        let n = {
            let mut c = ctx.value_state(&self.count);
            let n = c.value().copied().unwrap_or(0) + 1;
            c.update(n);
            n
        };
        ctx.list_state(&self.values).add(x);
        let len = ctx.list_state(&self.values).get().count();
        {
            let mut b = ctx.map_state(&self.buckets);
            let seen = b.get(&(x % 10)).copied().unwrap_or(0);
            b.put(x % 10, seen + 1);
        }
        let in_buckets: u64 = ctx.map_state(&self.buckets).values().sum();
        ctx.reducing_state(&self.sum).add(x);
        ctx.aggregating_state(&self.mean).add(x);
        ctx.register_event_time_timer(MAX_WATERMARK);
        ctx.collect(format!("{} #{n} {len} {in_buckets}", ctx.key()));
    }

    fn on_timer(
        &self,
        _ts: Timestamp,
        _domain: TimeDomain,
        ctx: &mut ProcessContext<'_, u64, KeyedState, String>,
    ) {
        let listed: u64 = ctx.list_state(&self.values).get().sum();
        let mut buckets: Vec<(u64, u64)> = ctx
            .map_state(&self.buckets)
            .entries()
            .map(|(k, v)| (*k, *v))
            .collect();
        buckets.sort_unstable();
        let sum = ctx.reducing_state(&self.sum).get().copied();
        let mean = ctx.aggregating_state(&self.mean).get();
        let key = *ctx.key();
        ctx.collect(format!("{key} end {listed} {sum:?} {mean:?} {buckets:?}"));
    }
}

fn tally(
    out: &Path,
    workers: usize,
    checkpoints: Option<(&Path, bool)>,
    fail_after: u64,
) -> SpateResult<JobResult> {
    let mut config = JobConfig::local(workers);
    if let Some((dir, restore)) = checkpoints {
        config.checkpoint_interval = Some(Duration::from_millis(100));
        config.checkpoint_dir = Some(dir.display().to_string());
        config.restore = restore.then(|| "latest".to_string());
    }
    config.restart_strategy = spate::dataflow::RestartStrategy::None;
    let env = StreamEnv::new(config);
    env.from_source(Flaky::new(EVENTS, 30_000.0, fail_after))
        .assign_timestamps_and_watermarks(
            WatermarkStrategy::for_bounded_out_of_orderness(Duration::from_millis(50))
                .with_timestamp_assigner(|v: &u64, _| *v as i64),
        )
        .key_by(|v: &u64| v % 7)
        .process(Tally {
            count: ValueStateDescriptor::new("count"),
            values: ListStateDescriptor::new("values"),
            buckets: MapStateDescriptor::new("buckets"),
            sum: ReducingStateDescriptor::new("sum", |a: u64, b: u64| a + b),
            mean: AggregatingStateDescriptor::new("mean", Mean),
        })
        .write_jsonl(out);
    env.execute("tally")
}

#[test]
fn keyed_state_survives_a_failure_and_a_restore_on_more_workers() {
    let tmp = tempfile::tempdir().unwrap();
    let (expected_dir, out, ckpt) = (
        tmp.path().join("e"),
        tmp.path().join("o"),
        tmp.path().join("c"),
    );
    tally(&expected_dir, 1, None, u64::MAX).unwrap();
    let expected = rows(&expected_dir);
    assert_eq!(
        expected.len() as u64,
        EVENTS + 7,
        "a row per record and per key"
    );
    let total: u64 = (0..EVENTS).sum();
    let ends: u64 = expected
        .iter()
        .filter(|r| r.contains(" end "))
        .map(|r| {
            r.trim_matches('"')
                .split(' ')
                .nth(2)
                .unwrap()
                .parse::<u64>()
                .unwrap()
        })
        .sum();
    assert_eq!(ends, total, "the lists hold every value once");

    assert!(tally(&out, 2, Some((&ckpt, false)), EVENTS / 2).is_err());
    assert!(rows(&out).len() < expected.len());
    let result = tally(&out, 3, Some((&ckpt, true)), u64::MAX).unwrap();
    assert!(
        result
            .metrics
            .get("checkpoints.numberOfCompletedCheckpoints")
            .copied()
            .unwrap_or(0)
            >= 1
    );
    assert_eq!(
        rows(&out),
        expected,
        "2 -> 3 workers: nothing lost, nothing twice"
    );
}

// ---------------------------------------------------------------------------------------------
// Operator state

/// What the instances of [`Remember`] did, over a job's runs.
#[derive(Default)]
struct Log {
    next_id: AtomicUsize,
    restored: Mutex<Vec<Vec<u64>>>,
    /// Per instance, its latest snapshot.
    snapshots: Mutex<HashMap<usize, Vec<u64>>>,
}

/// Remembers every value its instance saw (its operator state) and passes values on.
struct Remember {
    id: usize,
    seen: Vec<u64>,
    log: Arc<Log>,
}

impl Clone for Remember {
    fn clone(&self) -> Self {
        Remember {
            id: self.log.next_id.fetch_add(1, Ordering::SeqCst),
            seen: self.seen.clone(),
            log: Arc::clone(&self.log),
        }
    }
}

impl CheckpointedFunction<u64, u64> for Remember {
    type State = u64;

    fn flat_map(&mut self, value: u64, out: &mut Vec<u64>) {
        self.seen.push(value);
        out.push(value);
    }

    fn snapshot_state(&mut self) -> Vec<u64> {
        let mut snapshots = self.log.snapshots.lock().unwrap();
        snapshots.insert(self.id, self.seen.clone());
        self.seen.clone()
    }

    fn restore_state(&mut self, state: Vec<u64>) {
        self.log.restored.lock().unwrap().push(state.clone());
        self.seen = state;
    }
}

fn remember(
    workers: usize,
    ckpt: &Path,
    restore: bool,
    fail_after: u64,
    log: &Arc<Log>,
) -> SpateResult<JobResult> {
    let mut config = JobConfig::local(workers);
    config.checkpoint_interval = Some(Duration::from_millis(100));
    config.checkpoint_dir = Some(ckpt.display().to_string());
    config.restore = restore.then(|| "latest".to_string());
    config.restart_strategy = spate::dataflow::RestartStrategy::None;
    let env = StreamEnv::new(config);
    env.from_source(Flaky::new(EVENTS, 30_000.0, fail_after))
        .flat_map_with_operator_state(Remember {
            id: usize::MAX,
            seen: Vec::new(),
            log: Arc::clone(log),
        })
        .sink_to(DiscardSink::new());
    env.execute("operator state")
}

#[test]
fn operator_state_is_dealt_out_evenly_on_a_rescale_with_nothing_lost_or_doubled() {
    let tmp = tempfile::tempdir().unwrap();
    let ckpt = tmp.path().join("c");
    let first = Arc::new(Log::default());
    assert!(remember(2, &ckpt, false, EVENTS / 2, &first).is_err());
    assert!(
        first.restored.lock().unwrap().is_empty(),
        "a fresh start restores nothing"
    );

    let second = Arc::new(Log::default());
    remember(3, &ckpt, true, u64::MAX, &second).unwrap();
    let restored = second.restored.lock().unwrap().clone();
    assert_eq!(restored.len(), 3, "every new instance restores");
    let sizes: Vec<usize> = restored.iter().map(Vec::len).collect();
    let (min, max) = (sizes.iter().min().unwrap(), sizes.iter().max().unwrap());
    assert!(*min > 0 && max - min <= 1, "an even split: {sizes:?}");
    let mut union: Vec<u64> = restored.concat();
    union.sort_unstable();
    let before = union.len();
    union.dedup();
    assert_eq!(union.len(), before, "no value restored twice");

    // The last snapshot of each instance (the final checkpoint) holds every value once.
    let mut last: Vec<u64> = second
        .snapshots
        .lock()
        .unwrap()
        .values()
        .flatten()
        .copied()
        .collect();
    last.sort_unstable();
    assert_eq!(last, (0..EVENTS).collect::<Vec<_>>());
}
