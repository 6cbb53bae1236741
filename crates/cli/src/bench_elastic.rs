//! `spate bench autoscale` and `spate bench shedding`: the elasticity experiments.
//!
//! Both run one job shape, embedded in this process: a [`ScheduledSource`] whose rate
//! follows a schedule, an operator with a fixed cost per record ([`Cost`], waited, so that
//! the job's capacity is `workers / cost` on any machine), then a keyed tumbling count over
//! the records' sequence numbers as event time (one record = 1 ms), collected. The counts
//! are deterministic, so they are compared with a recount of the generator's records: the
//! oracle of "nothing lost, nothing duplicated" (autoscaling), and of the error that shedding
//! causes.
//!
//! * `autoscale` steps the rate (by default 0.7× → 2.1× → 0.7× of one worker's capacity)
//!   and runs the job under DS2 and under the threshold controller, sampling the workers and
//!   the source backlog four times a second: decisions per step, the time until the backlog
//!   stays below a second of input, oscillations, p99 latency, memory.
//! * `shedding` runs a fixed worker count at several loads (multiples of its capacity) under
//!   `--overload shed` and `--overload backpressure`, and once with a utility function:
//!   p99 latency, the shed fraction against the minimum `1 − capacity / rate`, the backlog's
//!   growth, memory, the utility kept, and the windowed count's error.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use clap::Args;
use serde::{Deserialize, Serialize};
use spate_connectors::{CollectSink, RateSchedule, ScheduledSource, Tick};
use spate_dataflow::{
    AutoscaleConfig, JobConfig, OutputTag, OverloadPolicy, ScalingPolicy, StreamEnv, TimeWindow,
    TumblingEventTimeWindows, WatermarkStrategy, WindowContext,
};
use spate_elasticity::ds2::Ds2Config;
use spate_elasticity::workload::Cost;
use spate_metrics::{JobSnapshot, JobView};

/// `spate bench autoscale`.
#[derive(Debug, Args)]
pub struct AutoscaleBenchArgs {
    /// `ds2`, `threshold`, or `both` (DS2 first).
    #[arg(long, default_value = "both")]
    pub policy: String,
    /// The rate schedule, in multiples of one worker's capacity (1 / --cost-us).
    #[arg(long, default_value = "0.7x:30s,2.1x:40s,0.7x:40s")]
    pub schedule: String,
    /// The costly operator's cost per record, µs (waited, not computed).
    #[arg(long, default_value_t = 250)]
    pub cost_us: u64,
    /// Workers at the start.
    #[arg(long, default_value_t = 1)]
    pub workers: usize,
    /// The most workers the autoscaler may use.
    #[arg(long, default_value_t = 8)]
    pub max_workers: usize,
    /// The policy window.
    #[arg(long, default_value = "2s", value_parser = crate::util::parse_duration)]
    pub policy_window: Duration,
    /// DS2's headroom factor.
    #[arg(long, default_value_t = 0.1)]
    pub factor: f64,
    /// Keys of the windowed count.
    #[arg(long, default_value_t = 100)]
    pub keys: u64,
    /// Checkpoint interval.
    #[arg(long, default_value = "1s", value_parser = crate::util::parse_duration)]
    pub checkpoint_interval: Duration,
}

/// `spate bench shedding`.
#[derive(Debug, Args)]
pub struct SheddingBenchArgs {
    /// Loads to run at, in multiples of the job's capacity (workers / cost).
    #[arg(long, default_value = "0.5,1.5,3")]
    pub loads: String,
    /// `shed`, `backpressure` or `both` (above capacity; half load and below run shed only).
    #[arg(long, default_value = "both")]
    pub overload: String,
    /// Also run the highest load with `shed_by` and a utility (the key's last two digits).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub utility: bool,
    /// Seconds per run (the first 3 s are a warm-up outside the latency figures).
    #[arg(long, default_value_t = 15)]
    pub seconds: u64,
    /// Worker threads.
    #[arg(long, default_value_t = 2)]
    pub workers: usize,
    /// The costly operator's cost per record, µs (waited, not computed).
    #[arg(long, default_value_t = 250)]
    pub cost_us: u64,
    /// Headroom H.
    #[arg(long, default_value_t = spate_dataflow::DEFAULT_HEADROOM)]
    pub headroom: f64,
    /// Keys of the windowed count.
    #[arg(long, default_value_t = 100)]
    pub keys: u64,
}

/// One row of the windowed count: key, window start (a sequence number), records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
struct Count {
    key: u64,
    start: i64,
    count: u64,
}

/// Records per window of the count (one record per ms of event time).
const WINDOW_RECORDS: i64 = 10_000;

/// Latency samples (µs since the record was due) and utilities seen after the costly
/// operator.
#[derive(Debug, Default)]
struct Probe {
    /// (ms since the run started, latency µs), one in 8 records.
    latencies: Vec<(u32, u32)>,
    utility_sum: f64,
    utility_n: u64,
}

/// The job of both experiments, and with `shed_by` (a utility to shed by) the records it
/// shed, from its side output.
fn build(
    env: &StreamEnv,
    source: ScheduledSource,
    cost: Cost,
    shed_by: bool,
    probe: Arc<Mutex<Probe>>,
    started: Instant,
) -> (
    spate_connectors::CollectHandle<Count>,
    Option<spate_connectors::CollectHandle<Tick>>,
) {
    let schedule = source.schedule().clone();
    let ticks = env
        .from_source(source)
        .assign_timestamps_and_watermarks(
            WatermarkStrategy::for_bounded_out_of_orderness(Duration::from_millis(1000))
                .with_timestamp_assigner(|t: &Tick, _| t.seq as i64),
        )
        .uid("ticks");
    let (ticks, shed) = if shed_by {
        let tag = OutputTag::<Tick>::new("shed");
        let kept = ticks.shed_by_with_side_output(utility, &tag).uid("shed");
        let (sink, handle) = CollectSink::new();
        kept.side_output(&tag).sink_to(sink).uid("collect-shed");
        (kept, Some(handle))
    } else {
        (ticks, None)
    };
    let (sink, handle) = CollectSink::new();
    ticks
        .flat_map_batches(move |batch, out| {
            cost.spend(batch.len());
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_micros() as i64);
            let t = started.elapsed().as_millis() as u32;
            let mut p = probe.lock().unwrap_or_else(|p| p.into_inner());
            for (i, (_, tick)) in batch.iter().enumerate() {
                if (tick.seq + i as u64) % 8 == 0 {
                    let latency = (now - due_us(&schedule, tick)).clamp(0, u32::MAX as i64);
                    p.latencies.push((t, latency as u32));
                }
                p.utility_sum += utility(tick);
                p.utility_n += 1;
            }
            drop(p);
            std::mem::swap(batch, out);
        })
        .name("cost")
        .uid("cost")
        .key_by(|t: &Tick| t.key)
        .window(TumblingEventTimeWindows::of(Duration::from_millis(
            WINDOW_RECORDS as u64,
        )))
        .aggregate_with(
            spate_dataflow::Count,
            |key: &u64, w: &WindowContext<'_, TimeWindow>, count: i64, out: &mut Vec<Count>| {
                out.push(Count {
                    key: *key,
                    start: w.window.start,
                    count: count as u64,
                })
            },
        )
        .uid("count")
        .sink_to(sink)
        .uid("collect");
    (handle, shed)
}

/// The utility of a record under `shed_by`: its key's last two digits.
fn utility(t: &Tick) -> f64 {
    (t.key % 100) as f64
}

/// The exact counts of the records `0..total` of `source`.
fn oracle(source: &ScheduledSource, total: u64) -> BTreeMap<(u64, i64), u64> {
    let mut counts = BTreeMap::new();
    for seq in 0..total {
        let start = seq as i64 / WINDOW_RECORDS * WINDOW_RECORDS;
        *counts.entry((source.key_of(seq), start)).or_insert(0) += 1;
    }
    counts
}

/// When `tick` came due, in µs since the Unix epoch: its `due_ms` holds whole milliseconds
/// (the schedule's anchor plus the record's offset, rounded down), the schedule the offset to
/// the microsecond, so that a latency of 2 ms is not read as anything from 1 to 3.
fn due_us(schedule: &RateSchedule, tick: &Tick) -> i64 {
    let offset = schedule
        .time_of(tick.seq)
        .map_or(0, |d| (d.as_secs_f64() * 1e6).round() as i64);
    let anchor_ms = tick.due_ms - offset.div_euclid(1000);
    anchor_ms * 1000 + offset
}

/// The 99th percentile of latencies in µs, in ms.
fn p99(mut xs: Vec<u32>) -> Option<f64> {
    if xs.is_empty() {
        return None;
    }
    xs.sort_unstable();
    Some(f64::from(xs[(xs.len() - 1) * 99 / 100]) / 1000.0)
}

/// One sample of a running job.
#[derive(Debug, Clone, Copy)]
struct Sample {
    t: f64,
    workers: usize,
    backlog: f64,
    /// The shedding controller's latest period: capacity, stream and queue load, and the
    /// largest drop fraction.
    shedding: Option<[f64; 4]>,
}

fn backlog(snap: &JobSnapshot) -> Option<f64> {
    let sources: Vec<usize> = snap
        .operators
        .iter()
        .filter(|o| o.kind == "source")
        .map(|o| o.index)
        .collect();
    if snap.subtasks.is_empty() {
        return None;
    }
    Some(
        sources
            .iter()
            .map(|&s| snap.sum_of(s, "pendingRecords"))
            .sum(),
    )
}

/// A job of the experiments, built, with its live view and probes.
struct Experiment {
    env: StreamEnv,
    view: Arc<Mutex<Option<Arc<dyn JobView>>>>,
    probe: Arc<Mutex<Probe>>,
    started: Instant,
    handle: spate_connectors::CollectHandle<Count>,
    /// With `shed_by`: the records shed, from its side output.
    shed: Option<spate_connectors::CollectHandle<Tick>>,
    done: Arc<std::sync::atomic::AtomicBool>,
}

impl Experiment {
    fn new(config: JobConfig, source: ScheduledSource, cost_us: u64, shed_by: bool) -> Self {
        let probe = Arc::new(Mutex::new(Probe::default()));
        let started = Instant::now();
        let mut env = StreamEnv::new(config);
        let view: Arc<Mutex<Option<Arc<dyn JobView>>>> = Arc::default();
        let slot = Arc::clone(&view);
        env.on_start(move |v| *slot.lock().unwrap_or_else(|p| p.into_inner()) = Some(v));
        let cost = Cost::wait(Duration::from_micros(cost_us));
        let (handle, shed) = build(&env, source, cost, shed_by, Arc::clone(&probe), started);
        Experiment {
            env,
            view,
            probe,
            started,
            handle,
            shed,
            done: Arc::default(),
        }
    }

    /// Runs the job to its end, sampling it.
    fn run(
        self,
        name: &str,
    ) -> (
        spate_types::SpateResult<spate_dataflow::JobResult>,
        Vec<Sample>,
    ) {
        let samples = sampler(Arc::clone(&self.view), Arc::clone(&self.done), self.started);
        let result = self.env.execute(name);
        self.done.store(true, std::sync::atomic::Ordering::Relaxed);
        (result, samples.join().unwrap_or_default())
    }
}

/// Samples the job four times a second until `done`.
fn sampler(
    view: Arc<Mutex<Option<Arc<dyn JobView>>>>,
    done: Arc<std::sync::atomic::AtomicBool>,
    started: Instant,
) -> std::thread::JoinHandle<Vec<Sample>> {
    std::thread::spawn(move || {
        let mut samples = Vec::new();
        while !done.load(std::sync::atomic::Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(250));
            let v = view.lock().unwrap_or_else(|p| p.into_inner()).clone();
            let Some(v) = v else { continue };
            let snap = v.snapshot();
            if snap.state != spate_metrics::JobState::Running {
                continue;
            }
            if let Some(b) = backlog(&snap) {
                samples.push(Sample {
                    t: started.elapsed().as_secs_f64(),
                    workers: snap.parallelism,
                    backlog: b,
                    shedding: snap.shedding.as_ref().map(|s| {
                        let fraction = s.fractions.values().copied().fold(0.0, f64::max);
                        [s.capacity, s.stream_load, s.queue_load, fraction]
                    }),
                });
            }
        }
        samples
    })
}

/// What one autoscaling run measured.
#[derive(Debug, Serialize)]
struct AutoscaleRun {
    policy: String,
    decisions: usize,
    steps: Vec<StepResult>,
    /// Direction changes of the worker count within a step (up then down, or down then up).
    oscillations: usize,
    p99_latency_ms: Option<f64>,
    peak_rss_mb: Option<f64>,
    records: u64,
    rows: usize,
    lost: u64,
    duplicated: u64,
    seconds: f64,
    decision_log: Vec<(usize, usize, String)>,
}

#[derive(Debug, Serialize)]
struct StepResult {
    rate: f64,
    seconds: f64,
    decisions: usize,
    workers_at_end: usize,
    /// Workers that hold the step's rate at the nominal capacity (⌈rate × cost⌉).
    workers_needed: usize,
    /// From the step's start until the backlog stays below half a second of input.
    time_to_stable_s: Option<f64>,
    backlog_at_end: f64,
}

fn compare(expected: &BTreeMap<(u64, i64), u64>, got: &[Count]) -> (u64, u64) {
    let mut seen: BTreeMap<(u64, i64), u64> = BTreeMap::new();
    for c in got {
        *seen.entry((c.key, c.start)).or_insert(0) += c.count;
    }
    let (mut lost, mut dup) = (0, 0);
    for (k, &n) in expected {
        let g = seen.get(k).copied().unwrap_or(0);
        if g < n {
            lost += n - g;
        } else {
            dup += g - n;
        }
    }
    for (k, &g) in &seen {
        if !expected.contains_key(k) {
            dup += g;
        }
    }
    (lost, dup)
}

/// Runs `spate bench autoscale`.
pub fn autoscale(args: &AutoscaleBenchArgs) -> Result<()> {
    if args.cost_us == 0 {
        bail!("--cost-us must be positive");
    }
    let capacity = 1e6 / args.cost_us as f64;
    let schedule = RateSchedule::parse_relative(&args.schedule, capacity)?;
    let policies: Vec<&str> = match args.policy.as_str() {
        "both" => vec!["ds2", "threshold"],
        p @ ("ds2" | "threshold") => vec![p],
        other => bail!("--policy {other}: use ds2, threshold or both"),
    };
    for policy in policies {
        let run = autoscale_run(args, policy, &schedule, capacity)?;
        println!(
            "{}",
            serde_json::to_string(&serde_json::json!({
                "bench": "autoscale",
                "schedule": args.schedule,
                "cost_us": args.cost_us,
                "capacity_per_worker": capacity,
                "window_s": args.policy_window.as_secs_f64(),
                "run": run,
            }))?
        );
    }
    Ok(())
}

fn autoscale_run(
    args: &AutoscaleBenchArgs,
    policy: &str,
    schedule: &RateSchedule,
    capacity: f64,
) -> Result<AutoscaleRun> {
    let dir = tempfile::tempdir()?;
    let mut config = JobConfig::local(args.workers);
    // Small polls: a batch of the costly operator takes 256 × cost (64 ms at 250 µs), so a
    // policy window sees whole batches and the sources report their backlog often.
    config.poll_batch = 256;
    config.checkpoint_dir = Some(dir.path().join("checkpoints").display().to_string());
    config.checkpoint_interval = Some(args.checkpoint_interval);
    config.rest = None;
    config.autoscale = Some(AutoscaleConfig {
        policy: policy.parse::<ScalingPolicy>()?,
        window: args.policy_window,
        ds2: Ds2Config {
            factor: args.factor,
            min_workers: 1,
            max_workers: args.max_workers,
            ..Ds2Config::default()
        },
        workers_per_process: None,
    });
    let total = schedule.records_due(schedule.length()).floor() as u64;
    let source = ScheduledSource::new(schedule.clone())
        .keys(args.keys)
        .lanes(64)
        .total(total);
    let expected = oracle(&source, total);
    let job = Experiment::new(config, source, args.cost_us, false);
    let (started, view, probe, handle) = (
        job.started,
        Arc::clone(&job.view),
        Arc::clone(&job.probe),
        job.handle.clone(),
    );
    let (result, samples) = job.run(&format!("autoscale-{policy}"));
    let result = result?;
    let seconds = started.elapsed().as_secs_f64();
    let snap = result.snapshot.unwrap_or_else(|| {
        view.lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .map(|v| v.snapshot())
            .expect("the job started")
    });
    let decisions = snap
        .autoscaler
        .as_ref()
        .map(|a| a.decisions.clone())
        .unwrap_or_default();
    let got = handle.take();
    let (lost, duplicated) = compare(&expected, &got);
    // The steps of the schedule, in seconds from the start.
    let mut steps = Vec::new();
    let mut oscillations = 0;
    let mut from = 0.0;
    for seg in schedule.segments() {
        let to = from + seg.duration.as_secs_f64();
        let rate = seg.to;
        let in_step: Vec<&Sample> = samples.iter().filter(|s| s.t >= from && s.t < to).collect();
        let step_decisions = decisions
            .iter()
            .filter(|d| {
                let t = (d.timestamp - snap.start_time) as f64 / 1000.0;
                t >= from && t < to
            })
            .count();
        // The direction changes of the worker count within the step.
        let mut last_dir = 0i32;
        let mut prev = in_step.first().map(|s| s.workers);
        for s in &in_step {
            if let Some(p) = prev {
                let dir = (s.workers as i32 - p as i32).signum();
                if dir != 0 {
                    if last_dir != 0 && dir != last_dir {
                        oscillations += 1;
                    }
                    last_dir = dir;
                }
            }
            prev = Some(s.workers);
        }
        let limit = (rate * 0.5).max(1.0);
        let stable = (0..in_step.len())
            .find(|&i| in_step[i..].iter().all(|s| s.backlog <= limit))
            .map(|i| in_step[i].t - from);
        steps.push(StepResult {
            rate,
            seconds: seg.duration.as_secs_f64(),
            decisions: step_decisions,
            workers_at_end: in_step.last().map_or(0, |s| s.workers),
            workers_needed: (rate / capacity).ceil().max(1.0) as usize,
            time_to_stable_s: stable,
            backlog_at_end: in_step.last().map_or(0.0, |s| s.backlog),
        });
        from = to;
    }
    let latencies: Vec<u32> = probe
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .latencies
        .iter()
        .map(|&(_, l)| l)
        .collect();
    Ok(AutoscaleRun {
        policy: policy.into(),
        decisions: decisions.len(),
        steps,
        oscillations,
        p99_latency_ms: p99(latencies),
        peak_rss_mb: crate::util::peak_rss_mb(),
        records: total,
        rows: got.len(),
        lost,
        duplicated,
        seconds,
        decision_log: decisions
            .iter()
            .map(|d| (d.from_workers, d.to_workers, d.reason.clone()))
            .collect(),
    })
}

/// What one shedding run measured.
#[derive(Debug, Serialize)]
struct ShedRun {
    load: f64,
    overload: String,
    utility: bool,
    rate: f64,
    capacity: f64,
    p99_latency_ms: Option<f64>,
    /// The p99 of each whole second of the run from 0 (ms; null for a second without
    /// samples), to tell a run's steady latency from a hiccup of the machine.
    p99_by_second_ms: Vec<Option<f64>>,
    records: u64,
    shed: u64,
    shed_fraction: f64,
    /// 1 − capacity / rate (0 at or below capacity).
    min_fraction: f64,
    /// The source's backlog at the end, and its growth over the schedule's second half
    /// (records/s).
    backlog_at_end: f64,
    backlog_growth_per_s: f64,
    rss_mb: Option<f64>,
    /// The mean utility of the records that got through (of all records: 49.5).
    kept_utility: Option<f64>,
    /// The windowed count against the exact one: mean of |got − exact| / exact per window.
    count_error: f64,
    /// With `shed_by`: the records its side output gave back (all those shed).
    side_records: Option<u64>,
    /// With `shed_by`: Σ over keys and windows of |exact − counted − shed to the side
    /// output|, the records neither counted nor given back (0 when nothing is lost).
    unaccounted: Option<u64>,
    /// Twice a second: seconds into the run, the backlog, and the shedding controller's
    /// capacity, stream load, queue load and drop fraction (rounded), to tell how a run went.
    timeline: Vec<[f64; 6]>,
}

fn rss_mb() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}

/// Runs `spate bench shedding`.
pub fn shedding(args: &SheddingBenchArgs) -> Result<()> {
    if args.cost_us == 0 || args.workers == 0 || args.seconds < 4 {
        bail!("--cost-us and --workers must be positive and --seconds at least 4");
    }
    let loads: Vec<f64> = args
        .loads
        .split(',')
        .map(|l| l.trim().parse::<f64>())
        .collect::<Result<_, _>>()
        .map_err(|e| anyhow::anyhow!("--loads {}: {e}", args.loads))?;
    let modes: Vec<&str> = match args.overload.as_str() {
        "both" => vec!["shed", "backpressure"],
        m @ ("shed" | "backpressure") => vec![m],
        other => bail!("--overload {other}: use shed, backpressure or both"),
    };
    let mut runs = Vec::new();
    for &load in &loads {
        for &mode in &modes {
            if load <= 1.0 && mode == "backpressure" && modes.len() > 1 {
                continue;
            }
            runs.push((load, mode, false));
        }
    }
    if args.utility {
        if let Some(max) = loads.iter().copied().reduce(f64::max) {
            runs.push((max, "shed", true));
        }
    }
    for (load, mode, utility) in runs {
        let run = shed_run(args, load, mode, utility)?;
        println!(
            "{}",
            serde_json::to_string(&serde_json::json!({"bench": "shedding", "run": run}))?
        );
    }
    Ok(())
}

fn shed_run(args: &SheddingBenchArgs, load: f64, mode: &str, utility: bool) -> Result<ShedRun> {
    let capacity = args.workers as f64 * 1e6 / args.cost_us as f64;
    let rate = load * capacity;
    let seconds = Duration::from_secs(args.seconds);
    let schedule = RateSchedule::new(vec![spate_connectors::generators::Segment::step(
        rate, seconds,
    )])?;
    let total = schedule.records_due(seconds).floor() as u64;
    let mut config = JobConfig::local(args.workers);
    config.poll_batch = 256;
    config.rest = None;
    config.overload = match mode {
        "shed" => OverloadPolicy::Shed {
            headroom: args.headroom,
        },
        _ => OverloadPolicy::Backpressure,
    };
    let source = ScheduledSource::new(schedule)
        .keys(args.keys)
        .lanes(64)
        .duration(seconds);
    let expected = oracle(&source, total);
    let job = Experiment::new(config, source, args.cost_us, utility);
    let (started, view, probe, handle, done) = (
        job.started,
        Arc::clone(&job.view),
        Arc::clone(&job.probe),
        job.handle.clone(),
        Arc::clone(&job.done),
    );
    let shed_handle = job.shed.clone();
    // A backpressured run would go on until its backlog is worked off: it is stopped at the
    // end of its schedule instead, as an unbounded input would never let it catch up.
    let stopper = {
        let view = Arc::clone(&view);
        let done = Arc::clone(&done);
        std::thread::spawn(move || {
            let deadline = started + seconds + Duration::from_secs(2);
            while Instant::now() < deadline && !done.load(std::sync::atomic::Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(100));
            }
            if !done.load(std::sync::atomic::Ordering::Relaxed) {
                if let Some(v) = view.lock().unwrap_or_else(|p| p.into_inner()).clone() {
                    let _ = v.cancel();
                }
            }
        })
    };
    let (result, samples) = job.run(&format!("shedding-{mode}-{load}"));
    let _ = stopper.join();
    let result = result?;
    let snap = result
        .snapshot
        .ok_or_else(|| anyhow::anyhow!("the job left no snapshot"))?;
    let shed: f64 = snap
        .operators
        .iter()
        .map(|o| snap.sum_of(o.index, "numRecordsShed"))
        .sum();
    let read: f64 = snap
        .operators
        .iter()
        .filter(|o| o.kind == "source")
        .map(|o| snap.sum_of(o.index, "numRecordsOut"))
        .sum::<f64>()
        + if utility { 0.0 } else { shed };
    let got = handle.take();
    // Per window: the relative error of the count over all keys.
    let mut exact: BTreeMap<i64, u64> = BTreeMap::new();
    for ((_, start), n) in &expected {
        *exact.entry(*start).or_insert(0) += n;
    }
    let mut seen: BTreeMap<i64, u64> = BTreeMap::new();
    for c in &got {
        *seen.entry(c.start).or_insert(0) += c.count;
    }
    // With shed_by, the records shed come back through its side output: per key and window,
    // they and the records counted must make up every record due.
    let (side_records, unaccounted) = match shed_handle {
        Some(h) => {
            let side = h.take();
            let mut accounted: BTreeMap<(u64, i64), u64> = BTreeMap::new();
            for c in &got {
                *accounted.entry((c.key, c.start)).or_insert(0) += c.count;
            }
            for t in &side {
                let start = t.seq as i64 / WINDOW_RECORDS * WINDOW_RECORDS;
                *accounted.entry((t.key, start)).or_insert(0) += 1;
            }
            let mut off = 0u64;
            for (k, &n) in &expected {
                off += n.abs_diff(accounted.remove(k).unwrap_or(0));
            }
            off += accounted.values().sum::<u64>();
            (Some(side.len() as u64), Some(off))
        }
        None => (None, None),
    };
    let count_error = exact
        .iter()
        .map(|(w, &n)| (seen.get(w).copied().unwrap_or(0) as f64 - n as f64).abs() / n as f64)
        .sum::<f64>()
        / exact.len().max(1) as f64;
    let p = probe.lock().unwrap_or_else(|p| p.into_inner());
    let mut by_second: Vec<Vec<u32>> = Vec::new();
    for &(t, l) in &p.latencies {
        let s = (t / 1000) as usize;
        if by_second.len() <= s {
            by_second.resize_with(s + 1, Vec::new);
        }
        by_second[s].push(l);
    }
    let warm = 3_000;
    let latencies: Vec<u32> = p
        .latencies
        .iter()
        .filter(|&&(t, _)| t >= warm)
        .map(|&(_, l)| l)
        .collect();
    let half = seconds.as_secs_f64() / 2.0;
    let end = seconds.as_secs_f64();
    let second_half: Vec<&Sample> = samples
        .iter()
        .filter(|s| s.t >= half && s.t <= end)
        .collect();
    let growth = match (second_half.first(), second_half.last()) {
        (Some(a), Some(b)) if b.t > a.t => (b.backlog - a.backlog) / (b.t - a.t),
        _ => 0.0,
    };
    Ok(ShedRun {
        load,
        overload: mode.into(),
        utility,
        rate,
        capacity,
        p99_latency_ms: p99(latencies),
        p99_by_second_ms: by_second.into_iter().map(p99).collect(),
        records: read as u64,
        shed: shed as u64,
        shed_fraction: if read > 0.0 { shed / read } else { 0.0 },
        min_fraction: (1.0 - capacity / rate).max(0.0),
        backlog_at_end: samples.last().map_or(0.0, |s| s.backlog),
        backlog_growth_per_s: growth,
        rss_mb: rss_mb(),
        kept_utility: (p.utility_n > 0).then(|| p.utility_sum / p.utility_n as f64),
        count_error,
        side_records,
        unaccounted,
        timeline: samples
            .iter()
            .step_by(2)
            .map(|s| {
                let [c, stream, queue, f] = s.shedding.unwrap_or_default();
                let r = |x: f64, d: f64| (x * d).round() / d;
                [
                    r(s.t, 10.0),
                    s.backlog,
                    r(c, 100.0),
                    r(stream, 100.0),
                    r(queue, 100.0),
                    r(f, 1000.0),
                ]
            })
            .collect(),
    })
}
