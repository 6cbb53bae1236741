//! `open` and `close` of keyed process functions: once per worker instance, `open` with the
//! instance's index and the parallelism, after the state is restored and before the first
//! record; `close` after the instance's last output (timers fired by the final watermark
//! included), also when the job fails.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::thread::ThreadId;
use std::time::Duration;

use spate::dataflow::{KeyedProcessFunction, ProcessContext, TimeDomain};
use spate::prelude::*;

use crate::checkpoints::{rows, Flaky};

/// What happened, in order: `Open(index, parallelism)`, `Out(index)` per record emitted,
/// `Close(index)`.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Event {
    Open(usize, usize),
    Out(usize),
    Close(usize),
}

/// Sums per key; emits the sum at the end of event time (a timer at the maximum watermark),
/// and notes its lifecycle in `log`. Worker threads are told apart by their thread id, which
/// `open` maps to the instance's index.
struct Summing {
    log: &'static Mutex<Vec<Event>>,
    index: Mutex<HashMap<ThreadId, usize>>,
}

impl Summing {
    fn new(log: &'static Mutex<Vec<Event>>) -> Self {
        Summing {
            log,
            index: Mutex::new(HashMap::new()),
        }
    }

    /// This worker's index, as given to `open` (`None` before `open`).
    fn me(&self) -> Option<usize> {
        let id = std::thread::current().id();
        self.index.lock().unwrap().get(&id).copied()
    }
}

impl KeyedProcessFunction<u64, u64, (u64, u64)> for Summing {
    type State = u64;

    fn open(&self, ctx: &RuntimeContext) -> FunctionResult {
        let (index, parallelism) = (
            ctx.index_of_this_subtask(),
            ctx.number_of_parallel_subtasks(),
        );
        self.index
            .lock()
            .unwrap()
            .insert(std::thread::current().id(), index);
        self.log
            .lock()
            .unwrap()
            .push(Event::Open(index, parallelism));
        Ok(())
    }

    fn process_element(&self, v: u64, ctx: &mut ProcessContext<'_, u64, u64, (u64, u64)>) {
        assert!(self.me().is_some(), "a record before open");
        *ctx.state().get_or_insert(0) += v;
        ctx.register_event_time_timer(i64::MAX - 1);
    }

    fn on_timer(
        &self,
        _ts: i64,
        _domain: TimeDomain,
        ctx: &mut ProcessContext<'_, u64, u64, (u64, u64)>,
    ) {
        let me = self.me().expect("a timer before open");
        let sum = ctx.state().unwrap_or(0);
        ctx.collect((*ctx.key(), sum));
        self.log.lock().unwrap().push(Event::Out(me));
    }

    fn close(&self) -> FunctionResult {
        let me = self.me().ok_or("close before open")?;
        self.log.lock().unwrap().push(Event::Close(me));
        Ok(())
    }
}

static LOGS: [Mutex<Vec<Event>>; 3] = [
    Mutex::new(Vec::new()),
    Mutex::new(Vec::new()),
    Mutex::new(Vec::new()),
];

#[test]
fn a_keyed_process_function_opens_and_closes_once_per_worker_around_its_outputs() {
    for workers in 1..=3usize {
        let log = &LOGS[workers - 1];
        let env = StreamEnv::new(JobConfig::local(workers));
        let out = env
            .from_collection((0u64..1_000).collect())
            .assign_timestamps_and_watermarks(
                WatermarkStrategy::for_monotonous_timestamps()
                    .with_timestamp_assigner(|v: &u64, _| *v as i64),
            )
            .key_by(|v: &u64| v % 7)
            .process(Summing::new(log))
            .collect();
        env.execute("lifecycle").unwrap();

        let mut got = out.take();
        got.sort();
        let mut expected: BTreeMap<u64, u64> = BTreeMap::new();
        for v in 0u64..1_000 {
            *expected.entry(v % 7).or_default() += v;
        }
        assert_eq!(got, expected.into_iter().collect::<Vec<_>>());

        let log = log.lock().unwrap().clone();
        let mut opened: Vec<(usize, usize)> = log
            .iter()
            .filter_map(|e| match e {
                Event::Open(i, p) => Some((*i, *p)),
                _ => None,
            })
            .collect();
        opened.sort();
        assert_eq!(
            opened,
            (0..workers).map(|i| (i, workers)).collect::<Vec<_>>(),
            "{workers} workers: one open per instance, with its index and the parallelism"
        );
        for i in 0..workers {
            let closes: Vec<usize> = log
                .iter()
                .enumerate()
                .filter(|(_, e)| **e == Event::Close(i))
                .map(|(at, _)| at)
                .collect();
            assert_eq!(
                closes.len(),
                1,
                "{workers} workers: instance {i} closes once"
            );
            let open_at = log
                .iter()
                .position(|e| matches!(e, Event::Open(j, _) if *j == i));
            assert!(open_at < Some(closes[0]), "open before close");
            let outs: Vec<usize> = log
                .iter()
                .enumerate()
                .filter(|(_, e)| **e == Event::Out(i))
                .map(|(at, _)| at)
                .collect();
            assert!(
                outs.iter().all(|at| *at < closes[0] && Some(*at) > open_at),
                "{workers} workers: instance {i} emits between its open and its close: {log:?}"
            );
        }
        assert_eq!(
            log.iter().filter(|e| matches!(e, Event::Out(_))).count(),
            7,
            "one output per key"
        );
    }
}

/// Counts per key `v % 20`; notes, per attempt, whether the open ran before the instance's
/// first record and whether that record's key had state already, and counts its closes.
struct Counting {
    events: u64,
    closed: &'static AtomicUsize,
    first: &'static Mutex<Vec<(usize, bool)>>,
    index: Mutex<HashMap<ThreadId, (usize, bool)>>,
}

impl KeyedProcessFunction<u64, u64, (u64, u64)> for Counting {
    type State = u64;

    fn open(&self, ctx: &RuntimeContext) -> FunctionResult {
        self.index.lock().unwrap().insert(
            std::thread::current().id(),
            (ctx.index_of_this_subtask(), false),
        );
        Ok(())
    }

    fn process_element(&self, _v: u64, ctx: &mut ProcessContext<'_, u64, u64, (u64, u64)>) {
        let id = std::thread::current().id();
        {
            let mut index = self.index.lock().unwrap();
            let (i, seen) = index.get_mut(&id).expect("a record before open");
            if !*seen {
                *seen = true;
                self.first.lock().unwrap().push((*i, ctx.state().is_some()));
            }
        }
        let n = ctx.state().get_or_insert(0);
        *n += 1;
        let n = *n;
        if n == self.events / 20 {
            ctx.collect((*ctx.key(), n));
        }
    }

    fn close(&self) -> FunctionResult {
        self.closed.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
}

static FIRST_FAILING: Mutex<Vec<(usize, bool)>> = Mutex::new(Vec::new());
static FIRST_RESTORED: Mutex<Vec<(usize, bool)>> = Mutex::new(Vec::new());
static CLOSED_FAILING: AtomicUsize = AtomicUsize::new(0);
static CLOSED_RESTORED: AtomicUsize = AtomicUsize::new(0);

#[test]
fn a_restored_keyed_process_function_reads_its_state_in_its_first_record() {
    const EVENTS: u64 = 30_000;
    let tmp = tempfile::tempdir().unwrap();
    let (out, ckpt) = (tmp.path().join("o"), tmp.path().join("c"));
    let run = |restore: bool,
               fail_after: u64,
               first: &'static Mutex<Vec<(usize, bool)>>,
               closed: &'static AtomicUsize| {
        let mut config = JobConfig::local(2);
        config.checkpoint_interval = Some(Duration::from_millis(50));
        config.checkpoint_dir = Some(ckpt.display().to_string());
        config.restore = restore.then(|| "latest".to_string());
        let env = StreamEnv::new(config);
        let source =
            Flaky::new(EVENTS, 30_000.0, fail_after).after_a_checkpoint_in(Some(ckpt.clone()));
        env.from_source(source)
            .key_by(|v: &u64| v % 20)
            .process(Counting {
                events: EVENTS,
                closed,
                first,
                index: Mutex::new(HashMap::new()),
            })
            .write_jsonl(&out);
        env.execute("restored counts")
    };
    assert!(run(false, EVENTS / 2, &FIRST_FAILING, &CLOSED_FAILING).is_err());
    // As in Flink, the failed job's instances close too.
    assert_eq!(CLOSED_FAILING.load(Ordering::SeqCst), 2);
    run(true, u64::MAX, &FIRST_RESTORED, &CLOSED_RESTORED).unwrap();
    assert_eq!(CLOSED_RESTORED.load(Ordering::SeqCst), 2);
    // The failing run starts from nothing; the restored one finds every key's count.
    let mut failing = FIRST_FAILING.lock().unwrap().clone();
    failing.sort();
    assert_eq!(failing, vec![(0, false), (1, false)]);
    let mut restored = FIRST_RESTORED.lock().unwrap().clone();
    restored.sort();
    assert_eq!(restored, vec![(0, true), (1, true)]);
    // And the counts end right: each key reaches its total once.
    let expected: Vec<String> = (0..20)
        .map(|k| format!("[{k},{}]", EVENTS / 20))
        .collect::<Vec<_>>();
    let mut expected = expected;
    expected.sort();
    assert_eq!(rows(&out), expected);
}
