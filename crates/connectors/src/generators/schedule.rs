//! The scheduled generator: records at a rate that follows a schedule, to drive autoscaling
//! and load-shedding experiments.
//!
//! A [`RateSchedule`] is a piecewise-linear rate over time: segments of a duration, a rate at
//! their start and a rate at their end (a step has both equal, a ramp does not). After the last
//! segment its last rate holds forever. On the command line it is written
//! `1000:10s,3000:20s,1000:10s` (steps, `RATE:DURATION`), `1000..3000:30s` (a ramp,
//! `FROM..TO:DURATION`), or relative to a base rate, `1x:10s,3x:20s,1x:10s`
//! ([`RateSchedule::parse_relative`]). Rates are records per second (zero is allowed: a
//! pause); durations take `ms`, `s`, `m` or `h`.
//!
//! Record `seq` (0, 1, 2, … over the whole job) comes due at `time_of(seq)`, the time at which
//! the integral of the rate, [`RateSchedule::records_due`], reaches `seq`: record 0 is due at
//! once. A [`ScheduledSource`] emits [`Tick`]s `{seq, key, due_ms}`, where `key` is a hash of
//! `seq` modulo the number of keys and `due_ms` the Unix-epoch milliseconds at which the record
//! came due, so a sink measures latency as `now − due_ms` (it is also the natural event time).
//!
//! * **Bounds.** Unbounded by default; [`ScheduledSource::total`] stops after `n` records and
//!   [`ScheduledSource::duration`] after the records due before that much schedule time
//!   (`duration(d)` on `1000:10s` with `d = 10 s` gives 10 000 records). With both, the first
//!   reached ends it. Either makes the source bounded.
//! * **Lanes.** The sequence is cut into a fixed number of lanes (64 by default): lane `l` owns
//!   the records with `seq % lanes == l`, and worker `w` of `n` reads the lanes with
//!   `l % n == w`. Each lane is a split with its own checkpoint position (its next `seq` and
//!   the schedule's anchor), so a checkpoint taken on any number of workers restores onto any
//!   other number: every lane goes on where it stood, nothing lost and nothing duplicated. The
//!   multiset of `(seq, key)` is the same whatever the worker count and the restores. A worker
//!   beyond the number of lanes reads nothing. Each lane is also a watermark split, in order
//!   of `seq` and so of `due_ms`; as every lane must have given a record for the watermark to
//!   pass a time, the watermark lags the schedule by about `lanes / rate` seconds.
//! * **Anchor.** The schedule runs on the wall clock from an anchor, in Unix milliseconds: the
//!   first poll of the first reader of the source value (readers of one source value share it;
//!   a clone gets a fresh one), or [`ScheduledSource::anchor_ms`]. The anchor travels in the
//!   checkpoint positions and a restore keeps it, so the schedule goes on in real time: the
//!   records that came due while the job was down are a backlog, emitted as fast as the engine
//!   takes them, like an external system that kept producing. Otherwise the reader is strictly
//!   on schedule: it never emits a record before it is due.
//! * **Backlog.** [`SourceReader::progress`] reports `(emitted, due)` over the reader's lanes,
//!   as of its last poll (capped by the bound), so the engine's `pendingRecords` is the number
//!   of records due and not yet emitted: zero on schedule, growing when the job falls behind.

use std::fmt;
use std::str::FromStr;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use spate_types::{
    Source, SourceContext, SourceOutput, SourceReader, SourceStatus, SpateError, SpateResult,
    SplitPosition,
};

use super::splitmix::SplitMix64;

/// The default number of distinct keys.
pub const DEFAULT_KEYS: u64 = 1000;

/// The default number of lanes (splits): the most workers the source spreads over.
pub const DEFAULT_LANES: u32 = 64;

/// The most lanes a source may have.
pub const MAX_LANES: u32 = 1 << 16;

/// One record of a [`ScheduledSource`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Hash)]
pub struct Tick {
    /// The record's number over the whole job, in schedule order: 0, 1, 2, …
    pub seq: u64,
    /// `splitmix(seq) % keys`.
    pub key: u64,
    /// When the schedule made the record due, in milliseconds since the Unix epoch.
    pub due_ms: i64,
}

/// One piece of a [`RateSchedule`]: `duration` long, from the rate `from` to the rate `to`
/// (records per second), linearly.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Segment {
    /// How long it lasts (positive).
    pub duration: Duration,
    /// The rate at its start.
    pub from: f64,
    /// The rate at its end.
    pub to: f64,
}

impl Segment {
    /// A constant `rate` for `duration`.
    pub fn step(rate: f64, duration: Duration) -> Self {
        Segment {
            duration,
            from: rate,
            to: rate,
        }
    }

    /// A rate going linearly from `from` to `to` over `duration`.
    pub fn ramp(from: f64, to: f64, duration: Duration) -> Self {
        Segment { duration, from, to }
    }
}

/// A piecewise-linear rate over time. See the [module docs](self).
#[derive(Debug, Clone, PartialEq)]
pub struct RateSchedule {
    segments: Vec<Segment>,
    /// The start of each segment, in seconds, then the end of the last.
    starts: Vec<f64>,
    /// The records due at the start of each segment, then at the end of the last.
    cum: Vec<f64>,
}

impl RateSchedule {
    /// A schedule of `segments`, in order. They must be non-empty, with positive durations and
    /// finite rates of at least 0, not all 0.
    pub fn new(segments: Vec<Segment>) -> SpateResult<Self> {
        if segments.is_empty() {
            return Err(SpateError::Config(
                "a rate schedule needs at least one segment".into(),
            ));
        }
        for s in &segments {
            if s.duration.is_zero() {
                return Err(SpateError::Config(
                    "a rate schedule segment must last more than 0s".into(),
                ));
            }
            for r in [s.from, s.to] {
                if !(r.is_finite() && r >= 0.0) {
                    return Err(SpateError::Config(format!(
                        "a rate schedule's rates must be finite and at least 0, not {r}"
                    )));
                }
            }
        }
        if segments.iter().all(|s| s.from == 0.0 && s.to == 0.0) {
            return Err(SpateError::Config(
                "a rate schedule whose rates are all 0 never produces a record".into(),
            ));
        }
        let mut starts = Vec::with_capacity(segments.len() + 1);
        let mut cum = Vec::with_capacity(segments.len() + 1);
        let (mut t, mut c) = (0.0, 0.0);
        for s in &segments {
            starts.push(t);
            cum.push(c);
            let len = s.duration.as_secs_f64();
            t += len;
            c += (s.from + s.to) / 2.0 * len;
        }
        starts.push(t);
        cum.push(c);
        Ok(RateSchedule {
            segments,
            starts,
            cum,
        })
    }

    /// A constant rate, forever.
    pub fn constant(rate: f64) -> SpateResult<Self> {
        RateSchedule::new(vec![Segment::step(rate, Duration::from_secs(1))])
    }

    /// Parses `RATE:DURATION` steps and `FROM..TO:DURATION` ramps separated by commas, such as
    /// `1000:10s,1000..3000:30s,500:1m`. Errors name the bad piece.
    pub fn parse(s: &str) -> SpateResult<Self> {
        parse_schedule(s, None)
    }

    /// Parses a schedule of multiples of `base` records per second, such as
    /// `1x:10s,3x:20s,1x:10s` or `0.5x..2x:1m` (the `x` may be left out).
    pub fn parse_relative(s: &str, base: f64) -> SpateResult<Self> {
        if !(base.is_finite() && base > 0.0) {
            return Err(SpateError::Config(format!(
                "rate schedule `{s}`: the base rate must be a positive number of records per \
                 second, not {base}"
            )));
        }
        parse_schedule(s, Some(base))
    }

    /// The segments, in order.
    pub fn segments(&self) -> &[Segment] {
        &self.segments
    }

    /// How long the segments last together (the last rate holds after).
    pub fn length(&self) -> Duration {
        self.segments.iter().map(|s| s.duration).sum()
    }

    /// The rate `elapsed` after the start, in records per second.
    pub fn rate_at(&self, elapsed: Duration) -> f64 {
        let t = elapsed.as_secs_f64();
        match self.segment_at(t) {
            Some(i) => {
                let s = &self.segments[i];
                let tau = t - self.starts[i];
                s.from + (s.to - s.from) * tau / s.duration.as_secs_f64()
            }
            None => self.tail_rate(),
        }
    }

    /// The records due `elapsed` after the start: the integral of the rate from 0 to `elapsed`.
    pub fn records_due(&self, elapsed: Duration) -> f64 {
        self.due_secs(elapsed.as_secs_f64())
    }

    /// When record `seq` comes due: the earliest time at which [`records_due`](Self::records_due)
    /// reaches `seq` (record 0 at once). `None` if never (the schedule ends at rate 0 first).
    pub fn time_of(&self, seq: u64) -> Option<Duration> {
        let t = self.time_secs(seq as f64);
        t.is_finite()
            .then(|| Duration::try_from_secs_f64(t).unwrap_or(Duration::MAX))
    }

    fn tail_rate(&self) -> f64 {
        self.segments.last().map_or(0.0, |s| s.to)
    }

    /// The segment that holds `t` seconds (`None` from the end of the last one on).
    fn segment_at(&self, t: f64) -> Option<usize> {
        let n = self.segments.len();
        if t >= self.starts[n] {
            return None;
        }
        Some(self.starts[1..n].partition_point(|&s| s <= t))
    }

    /// `records_due` at `t` seconds (0 before the start).
    fn due_secs(&self, t: f64) -> f64 {
        if t.is_nan() || t <= 0.0 {
            return 0.0;
        }
        let n = self.segments.len();
        match self.segment_at(t) {
            Some(i) => {
                let s = &self.segments[i];
                let tau = t - self.starts[i];
                let len = s.duration.as_secs_f64();
                self.cum[i] + s.from * tau + (s.to - s.from) * tau * tau / (2.0 * len)
            }
            None => self.cum[n] + self.tail_rate() * (t - self.starts[n]),
        }
    }

    /// The inverse of `due_secs`: the earliest `t` with `due_secs(t) >= x` (infinite if none).
    fn time_secs(&self, x: f64) -> f64 {
        if x <= 0.0 {
            return 0.0;
        }
        let n = self.segments.len();
        let i = self.cum[1..].partition_point(|&c| c < x);
        if i == n {
            let rate = self.tail_rate();
            return if rate > 0.0 {
                self.starts[n] + (x - self.cum[n]) / rate
            } else {
                f64::INFINITY
            };
        }
        let r = x - self.cum[i];
        if r <= 0.0 {
            return self.starts[i];
        }
        let s = &self.segments[i];
        let len = s.duration.as_secs_f64();
        let (a, b) = (s.from, s.to);
        let tau = if a == b {
            r / a
        } else {
            // k/2 τ² + a τ = r, solved in the form that does not cancel.
            let k = (b - a) / len;
            let disc = (a * a + 2.0 * k * r).max(0.0);
            2.0 * r / (a + disc.sqrt())
        };
        self.starts[i] + tau.clamp(0.0, len)
    }

    /// The number of records due at `t` seconds: those with `time_secs(seq) <= t`.
    fn due_count(&self, t: f64) -> u64 {
        if t.is_nan() || t < 0.0 {
            return 0;
        }
        let mut n = (self.due_secs(t).floor() as u64).saturating_add(1);
        // Rounding may put the closed forms one record apart at a boundary.
        for _ in 0..4 {
            if n > 0 && self.time_secs((n - 1) as f64) > t {
                n -= 1;
            } else if n < u64::MAX && self.time_secs(n as f64) <= t {
                n += 1;
            } else {
                break;
            }
        }
        n
    }

    /// The number of records due before `t` seconds: those with `time_secs(seq) < t`.
    fn count_before(&self, t: f64) -> u64 {
        if t.is_nan() || t <= 0.0 {
            return 0;
        }
        let mut n = self.due_secs(t).ceil() as u64;
        for _ in 0..4 {
            if n > 0 && self.time_secs((n - 1) as f64) >= t {
                n -= 1;
            } else if n < u64::MAX && self.time_secs(n as f64) < t {
                n += 1;
            } else {
                break;
            }
        }
        n
    }
}

impl FromStr for RateSchedule {
    type Err = SpateError;

    fn from_str(s: &str) -> SpateResult<Self> {
        RateSchedule::parse(s)
    }
}

/// The form [`RateSchedule::parse`] reads.
impl fmt::Display for RateSchedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, s) in self.segments.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            if s.from == s.to {
                write!(f, "{}:", s.from)?;
            } else {
                write!(f, "{}..{}:", s.from, s.to)?;
            }
            let d = s.duration;
            if d.subsec_nanos() == 0 {
                write!(f, "{}s", d.as_secs())?;
            } else if d.subsec_nanos() % 1_000_000 == 0 {
                write!(f, "{}ms", d.as_millis())?;
            } else {
                write!(f, "{}s", d.as_secs_f64())?;
            }
        }
        Ok(())
    }
}

fn parse_schedule(s: &str, base: Option<f64>) -> SpateResult<RateSchedule> {
    let bad = |piece: &str, why: String| {
        SpateError::Config(format!("rate schedule `{s}`: `{piece}` {why}"))
    };
    if s.trim().is_empty() {
        return Err(SpateError::Config(
            "the rate schedule is empty: give RATE:DURATION pieces such as 1000:10s,3000:20s"
                .into(),
        ));
    }
    let mut segments = Vec::new();
    for piece in s.split(',') {
        let p = piece.trim();
        if p.is_empty() {
            return Err(SpateError::Config(format!(
                "rate schedule `{s}`: an empty piece between two commas"
            )));
        }
        let Some((rates, duration)) = p.rsplit_once(':') else {
            return Err(bad(
                p,
                "is not RATE:DURATION or FROM..TO:DURATION (such as 1000:10s or 1000..3000:30s)"
                    .into(),
            ));
        };
        let duration = parse_duration(duration.trim()).map_err(|why| bad(p, why))?;
        let rate = |r: &str| parse_rate(r.trim(), base).map_err(|why| bad(p, why));
        let (from, to) = match rates.split_once("..") {
            Some((a, b)) => (rate(a)?, rate(b)?),
            None => {
                let r = rate(rates)?;
                (r, r)
            }
        };
        segments.push(Segment::ramp(from, to, duration));
    }
    RateSchedule::new(segments).map_err(|e| match e {
        SpateError::Config(m) => SpateError::Config(format!("rate schedule `{s}`: {m}")),
        e => e,
    })
}

/// A rate in records per second, or with a base a multiple of it (`3x` or `3`).
fn parse_rate(r: &str, base: Option<f64>) -> Result<f64, String> {
    let (number, what) = match base {
        Some(_) => (
            r.strip_suffix('x').unwrap_or(r),
            "a multiple of the base rate",
        ),
        None if r.ends_with('x') => {
            return Err(format!(
                "has the multiplier `{r}`, which needs a base rate (RateSchedule::parse_relative)"
            ))
        }
        None => (r, "a rate in records per second"),
    };
    match number.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(v * base.unwrap_or(1.0)),
        _ => Err(format!(
            "has `{r}`, which is not {what} (a number of at least 0)"
        )),
    }
}

/// `500ms`, `10s`, `1.5m`, `2h`: a positive duration with a unit.
fn parse_duration(d: &str) -> Result<Duration, String> {
    let split = d
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(d.len());
    let (number, unit) = d.split_at(split);
    // Milliseconds divide, so that `300ms` is exactly 0.3 s.
    let (scale, divide) = match unit {
        "ms" => (1.0, 1000.0),
        "s" => (1.0, 1.0),
        "m" => (60.0, 1.0),
        "h" => (3600.0, 1.0),
        "" => {
            return Err(format!(
                "has the duration `{d}` without a unit (ms, s, m or h)"
            ))
        }
        _ => {
            return Err(format!(
                "has `{d}`, which is not a duration such as 500ms, 10s or 2m"
            ))
        }
    };
    let value: f64 = number
        .parse()
        .map_err(|_| format!("has `{d}`, which is not a duration such as 500ms, 10s or 2m"))?;
    match Duration::try_from_secs_f64(value * scale / divide) {
        Ok(duration) if !duration.is_zero() => Ok(duration),
        _ => Err(format!("has the duration `{d}`, which must be more than 0")),
    }
}

/// No anchor yet.
const NO_ANCHOR: i64 = i64::MIN;

/// A source of [`Tick`]s at the rate of a [`RateSchedule`]. See the [module docs](self).
#[derive(Debug)]
pub struct ScheduledSource {
    schedule: Arc<RateSchedule>,
    keys: u64,
    lanes: u32,
    total: Option<u64>,
    end: Option<Duration>,
    anchor_ms: Option<i64>,
    /// The anchor the first reader to poll fixed, shared by this value's readers.
    started: Arc<AtomicI64>,
}

/// A clone has the same settings and a fresh anchor.
impl Clone for ScheduledSource {
    fn clone(&self) -> Self {
        ScheduledSource {
            schedule: Arc::clone(&self.schedule),
            keys: self.keys,
            lanes: self.lanes,
            total: self.total,
            end: self.end,
            anchor_ms: self.anchor_ms,
            started: Arc::new(AtomicI64::new(NO_ANCHOR)),
        }
    }
}

impl ScheduledSource {
    /// An unbounded source at the rate of `schedule`, with 1000 keys and 64 lanes.
    pub fn new(schedule: RateSchedule) -> Self {
        ScheduledSource {
            schedule: Arc::new(schedule),
            keys: DEFAULT_KEYS,
            lanes: DEFAULT_LANES,
            total: None,
            end: None,
            anchor_ms: None,
            started: Arc::new(AtomicI64::new(NO_ANCHOR)),
        }
    }

    /// Sets the number of distinct keys (default 1000; at least 1).
    pub fn keys(mut self, keys: u64) -> Self {
        self.keys = keys;
        self
    }

    /// Sets the number of lanes (default 64; 1 to [`MAX_LANES`]). A checkpoint restores only
    /// onto the same number of lanes.
    pub fn lanes(mut self, lanes: u32) -> Self {
        self.lanes = lanes;
        self
    }

    /// Stops after `n` records (`seq` `0..n`).
    pub fn total(mut self, n: u64) -> Self {
        self.total = Some(n);
        self
    }

    /// Stops after the records due before `d` of schedule time.
    pub fn duration(mut self, d: Duration) -> Self {
        self.end = Some(d);
        self
    }

    /// Starts the schedule at `t`, in milliseconds since the Unix epoch, instead of at the
    /// first poll (a restore keeps the checkpoint's anchor).
    pub fn anchor_ms(mut self, t: i64) -> Self {
        self.anchor_ms = Some(t);
        self
    }

    /// The schedule.
    pub fn schedule(&self) -> &RateSchedule {
        &self.schedule
    }

    /// The key of record `seq` (what its [`Tick`] carries): for oracles that recount a
    /// job's output.
    pub fn key_of(&self, seq: u64) -> u64 {
        SplitMix64::new(seq).next_u64() % self.keys
    }

    /// The number of records the source emits in all, or `None` if unbounded.
    pub fn limit(&self) -> Option<u64> {
        let by_end = self
            .end
            .map(|d| self.schedule.count_before(d.as_secs_f64()));
        match (self.total, by_end) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn check(&self) -> SpateResult<()> {
        if self.keys == 0 {
            return Err(SpateError::Config(
                "scheduled source: the number of keys must be at least 1".into(),
            ));
        }
        if !(1..=MAX_LANES).contains(&self.lanes) {
            return Err(SpateError::Config(format!(
                "scheduled source: the number of lanes must be 1 to {MAX_LANES}, not {}",
                self.lanes
            )));
        }
        if let Some(n) = self.limit().filter(|&n| n > 0) {
            if self.schedule.time_of(n - 1).is_none() {
                return Err(SpateError::Config(format!(
                    "scheduled source: the schedule `{}` ends at rate 0 after {} records, so the \
                     total of {n} is never reached",
                    self.schedule,
                    self.schedule.due_count(f64::MAX)
                )));
            }
        }
        Ok(())
    }

    /// The reader of the worker described by `ctx`.
    fn reader(&self, ctx: &SourceContext) -> SpateResult<ScheduledReader> {
        self.check()?;
        let workers = ctx.workers.max(1);
        let lanes = u64::from(self.lanes);
        let limit = self.limit().unwrap_or(u64::MAX);
        let own = ctx
            .my_partitions(self.lanes as usize)
            .map(|l| Lane {
                lane: l as u32,
                next: l as u64,
            })
            .collect();
        Ok(ScheduledReader {
            schedule: Arc::clone(&self.schedule),
            keys: self.keys,
            lanes,
            limit,
            own,
            worker: ctx.worker_index,
            workers,
            anchor_ms: self.anchor_ms,
            shared_anchor: Arc::clone(&self.started),
            announced: false,
            polled_at: None,
            due: 0,
        })
    }
}

impl Source<Tick> for ScheduledSource {
    fn name(&self) -> String {
        format!("schedule:{}", self.schedule)
    }

    fn is_bounded(&self) -> bool {
        self.total.is_some() || self.end.is_some()
    }

    fn create_reader(&self, ctx: &SourceContext) -> SpateResult<Box<dyn SourceReader<Tick>>> {
        Ok(Box::new(self.reader(ctx)?))
    }
}

/// One lane of a reader.
#[derive(Debug, Clone, Copy)]
struct Lane {
    lane: u32,
    /// Its next `seq` (`≡ lane` modulo the lanes).
    next: u64,
}

/// One worker's reader of a [`ScheduledSource`].
struct ScheduledReader {
    schedule: Arc<RateSchedule>,
    keys: u64,
    lanes: u64,
    /// The number of records of the job (`u64::MAX` when unbounded).
    limit: u64,
    /// The lanes it owns, in increasing order.
    own: Vec<Lane>,
    worker: usize,
    workers: usize,
    anchor_ms: Option<i64>,
    shared_anchor: Arc<AtomicI64>,
    /// Whether its lanes were announced as watermark splits.
    announced: bool,
    /// The records due at the last poll, over the whole job (at most `limit`).
    due: u64,
    /// When the last poll was (and its time, seconds since the Unix epoch).
    polled_at: Option<(std::time::Instant, f64)>,
}

/// A reader not polled for this long reports its backlog as of now, not of its last poll.
const STALE: std::time::Duration = std::time::Duration::from_millis(20);

/// Now, in seconds since the Unix epoch.
fn now_secs() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

impl ScheduledReader {
    fn finished(&self, lane: &Lane) -> bool {
        lane.next >= self.limit
    }

    /// The number of the records of `lane` below `bound`.
    fn lane_count(&self, lane: u32, bound: u64) -> u64 {
        let lane = u64::from(lane);
        if bound > lane {
            (bound - lane - 1) / self.lanes + 1
        } else {
            0
        }
    }

    /// The anchor, fixed now (`now` in Unix seconds) if it is not yet.
    fn anchor(&mut self, now: f64) -> i64 {
        if let Some(a) = self.anchor_ms {
            return a;
        }
        let mine = (now * 1000.0).floor() as i64;
        let a = match self.shared_anchor.compare_exchange(
            NO_ANCHOR,
            mine,
            Ordering::AcqRel,
            Ordering::Acquire,
        ) {
            Ok(_) => mine,
            Err(theirs) => theirs,
        };
        self.anchor_ms = Some(a);
        a
    }

    fn tick(&self, seq: u64, anchor: i64) -> Tick {
        // Rounded to the microsecond first, so that a due time of exactly 3 ms is not 2 ms
        // by a rounding error.
        let micros = (self.schedule.time_secs(seq as f64) * 1e6).round() as i64;
        Tick {
            seq,
            key: SplitMix64::new(seq).next_u64() % self.keys,
            due_ms: anchor.saturating_add(micros.div_euclid(1000)),
        }
    }

    /// [`SourceReader::poll`] at `now`, in seconds since the Unix epoch.
    fn poll_at(
        &mut self,
        out: &mut SourceOutput<'_, Tick>,
        max_records: usize,
        now: f64,
    ) -> SpateResult<SourceStatus> {
        let active = self.own.iter().filter(|l| !self.finished(l)).count();
        if active == 0 {
            return Ok(SourceStatus::Finished);
        }
        if !self.announced {
            // Every lane is a watermark split from the start, so that one that has not given
            // a record yet holds the watermark.
            for lane in self.own.iter().filter(|l| !self.finished(l)) {
                out.split(lane.lane);
            }
            self.announced = true;
        }
        let anchor = self.anchor(now);
        let elapsed = now - anchor as f64 / 1000.0;
        let due = self.schedule.due_count(elapsed).min(self.limit);
        self.due = due;
        self.polled_at = Some((std::time::Instant::now(), now));
        let lowest = self
            .own
            .iter()
            .filter(|l| !self.finished(l))
            .map(|l| l.next)
            .min()
            .unwrap_or(u64::MAX);
        if lowest >= due {
            return Ok(SourceStatus::Idle);
        }
        // About `max_records` in all: the same number of rounds of the lanes for every lane,
        // from the one furthest behind, so that a backlog keeps the lanes together.
        let rounds = (max_records.max(1) / active).max(1) as u64;
        let high = due.min(lowest.saturating_add(rounds.saturating_mul(self.lanes)));
        for i in 0..self.own.len() {
            let Lane { lane, mut next } = self.own[i];
            if next >= high {
                continue;
            }
            out.split(lane);
            while next < high {
                out.push(self.tick(next, anchor));
                next = next.saturating_add(self.lanes);
            }
            self.own[i].next = next;
            if next >= self.limit {
                out.split_finished(lane);
            }
        }
        Ok(SourceStatus::More)
    }
}

impl SourceReader<Tick> for ScheduledReader {
    fn poll(
        &mut self,
        out: &mut SourceOutput<'_, Tick>,
        max_records: usize,
    ) -> SpateResult<SourceStatus> {
        self.poll_at(out, max_records, now_secs())
    }

    /// `(emitted, due)` over this reader's lanes: the engine reports the difference as the
    /// records pending. Due as of the last poll, or as of now when that poll is stale (flow
    /// control holds the reader back while its backlog keeps growing).
    fn progress(&self) -> Option<(u64, u64)> {
        let now_due = match (self.polled_at, self.anchor_ms) {
            (Some((at, then)), Some(anchor)) if at.elapsed() > STALE => {
                let elapsed = then + at.elapsed().as_secs_f64() - anchor as f64 / 1000.0;
                self.schedule
                    .due_count(elapsed)
                    .min(self.limit)
                    .max(self.due)
            }
            _ => self.due,
        };
        let (mut done, mut due) = (0u64, 0u64);
        for lane in &self.own {
            done += self.lane_count(lane.lane, lane.next.min(self.limit));
            due += self.lane_count(lane.lane, now_due);
        }
        Some((done, due))
    }

    fn snapshot(&self) -> Option<Vec<SplitPosition>> {
        let anchor = self.anchor_ms.or_else(|| {
            let shared = self.shared_anchor.load(Ordering::Acquire);
            (shared != NO_ANCHOR).then_some(shared)
        });
        Some(
            self.own
                .iter()
                .map(|lane| SplitPosition {
                    split: u64::from(lane.lane),
                    position: serde_json::json!({
                        "lanes": self.lanes,
                        "next": lane.next,
                        "anchor_ms": anchor,
                    }),
                })
                .collect(),
        )
    }

    fn restore(&mut self, positions: &[SplitPosition]) -> SpateResult<()> {
        let mut anchor: Option<i64> = None;
        for pos in positions {
            let p = &pos.position;
            let (Some(lanes), Some(next), Some(anchor_value)) = (
                p.get("lanes").and_then(|v| v.as_u64()),
                p.get("next").and_then(|v| v.as_u64()),
                p.get("anchor_ms"),
            ) else {
                return Err(SpateError::Internal(format!(
                    "a scheduled-source split position that is not {{lanes, next, anchor_ms}}: {p}"
                )));
            };
            if lanes != self.lanes {
                return Err(SpateError::Config(format!(
                    "the checkpoint's scheduled source has {lanes} lanes and this job's {}: \
                     restore it with .lanes({lanes})",
                    self.lanes
                )));
            }
            // A lane of an unbounded source that ran to the end stands at `u64::MAX`.
            if pos.split >= lanes || (next % lanes != pos.split && next != u64::MAX) {
                return Err(SpateError::Internal(format!(
                    "a scheduled-source position of lane {} at seq {next}, not of that lane",
                    pos.split
                )));
            }
            if let Some(a) = anchor_value.as_i64() {
                anchor = Some(anchor.map_or(a, |b| b.min(a)));
            }
            let split = pos.split as usize;
            if split % self.workers == self.worker {
                if let Some(lane) = self.own.get_mut(split / self.workers) {
                    debug_assert_eq!(lane.lane as usize, split);
                    lane.next = next;
                }
            }
        }
        if anchor.is_some() {
            self.anchor_ms = anchor;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use spate_types::SplitMark;

    use super::*;

    fn ctx(worker_index: usize, workers: usize) -> SourceContext {
        SourceContext {
            worker_index,
            workers,
        }
    }

    fn secs(s: f64) -> Duration {
        Duration::from_secs_f64(s)
    }

    fn config_message(e: SpateError) -> String {
        match e {
            SpateError::Config(m) => m,
            other => panic!("not a config error: {other}"),
        }
    }

    /// Polls `reader` once at `now` (Unix seconds), appending to `recs` and `marks`.
    fn poll_once(
        reader: &mut ScheduledReader,
        recs: &mut Vec<Tick>,
        marks: &mut Vec<SplitMark>,
        max: usize,
        now: f64,
    ) -> SourceStatus {
        let (mut letters, mut dropped) = (Vec::new(), 0);
        let mut batch = Vec::new();
        let mut batch_marks = Vec::new();
        let status = reader
            .poll_at(
                &mut SourceOutput::new(&mut batch, &mut letters, &mut dropped)
                    .with_splits(&mut batch_marks),
                max,
                now,
            )
            .unwrap();
        assert!(letters.is_empty() && dropped == 0);
        // Marks are relative to the poll's output: shift them onto `recs`.
        let base = recs.len();
        marks.extend(batch_marks.into_iter().map(|m| match m {
            SplitMark::Start { split, at } => SplitMark::Start {
                split,
                at: at + base,
            },
            SplitMark::Pending { split, at } => SplitMark::Pending {
                split,
                at: at + base,
            },
            SplitMark::Finished { split, at } => SplitMark::Finished {
                split,
                at: at + base,
            },
        }));
        recs.extend(batch);
        status
    }

    /// Polls a boxed reader in real time until it finishes.
    fn drain(reader: &mut dyn SourceReader<Tick>, max: usize) -> Vec<Tick> {
        let (mut recs, mut letters, mut dropped) = (Vec::new(), Vec::new(), 0);
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        loop {
            let status = reader
                .poll(
                    &mut SourceOutput::new(&mut recs, &mut letters, &mut dropped),
                    max,
                )
                .unwrap();
            match status {
                SourceStatus::Finished => return recs,
                SourceStatus::Idle => std::thread::sleep(Duration::from_micros(200)),
                SourceStatus::More => {}
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the reader never ends"
            );
        }
    }

    fn seqs(ticks: &[Tick]) -> Vec<u64> {
        let mut s: Vec<u64> = ticks.iter().map(|t| t.seq).collect();
        s.sort_unstable();
        s
    }

    #[test]
    fn parses_steps_ramps_and_multiples() {
        let s = RateSchedule::parse("1000:10s,3000:20s,1000:10s").unwrap();
        assert_eq!(
            s.segments(),
            [
                Segment::step(1000.0, secs(10.0)),
                Segment::step(3000.0, secs(20.0)),
                Segment::step(1000.0, secs(10.0)),
            ]
        );
        assert_eq!(s.length(), secs(40.0));
        let r = RateSchedule::parse(" 1000..3000 : 30s , 0:500ms,2.5:1.5m,7:1h").unwrap();
        assert_eq!(
            r.segments(),
            [
                Segment::ramp(1000.0, 3000.0, secs(30.0)),
                Segment::step(0.0, Duration::from_millis(500)),
                Segment::step(2.5, secs(90.0)),
                Segment::step(7.0, secs(3600.0)),
            ]
        );
        assert_eq!(
            RateSchedule::parse_relative("1x:10s,3x:20s,1x:10s", 1000.0).unwrap(),
            s
        );
        assert_eq!(
            RateSchedule::parse_relative("0.5x..2:1m", 100.0)
                .unwrap()
                .segments(),
            [Segment::ramp(50.0, 200.0, secs(60.0))]
        );
        // Display gives back what parse reads.
        for text in [
            "1000:10s,3000:20s,1000:10s",
            "1000..3000:30s,0:500ms,2.5:90s",
        ] {
            let s: RateSchedule = text.parse().unwrap();
            assert_eq!(s.to_string(), text);
            assert_eq!(RateSchedule::parse(&s.to_string()).unwrap(), s);
        }
    }

    #[test]
    fn bad_schedules_name_the_piece() {
        let cases = [
            ("", "empty"),
            ("  ", "empty"),
            ("1000", "`1000` is not RATE:DURATION"),
            ("1000:10s,abc:5s", "`abc:5s` has `abc`, which is not a rate"),
            ("1000:10", "`1000:10` has the duration `10` without a unit"),
            ("1000:10y", "`1000:10y` has `10y`, which is not a duration"),
            (
                "1000:0s",
                "`1000:0s` has the duration `0s`, which must be more than 0",
            ),
            ("-5:1s", "`-5:1s` has `-5`, which is not a rate"),
            ("inf:1s", "`inf:1s` has `inf`"),
            ("1..:5s", "`1..:5s` has ``, which is not a rate"),
            ("1000:10s,,2000:1s", "an empty piece"),
            (
                "3x:1s",
                "`3x:1s` has the multiplier `3x`, which needs a base rate",
            ),
            ("0:5s,0..0:1s", "never produces a record"),
        ];
        for (text, want) in cases {
            let msg = config_message(RateSchedule::parse(text).unwrap_err());
            assert!(msg.contains(want), "{text:?}: {msg}");
            assert!(!msg.contains('\n'), "{msg}");
            if !text.trim().is_empty() {
                assert!(msg.contains(&format!("`{text}`")), "{msg}");
            }
        }
        let msg = config_message(RateSchedule::parse_relative("1x:1s", 0.0).unwrap_err());
        assert!(msg.contains("base rate must be a positive"), "{msg}");
        let msg = config_message(RateSchedule::parse_relative("ax:1s", 10.0).unwrap_err());
        assert!(
            msg.contains("`ax:1s` has `ax`, which is not a multiple"),
            "{msg}"
        );
        assert!(RateSchedule::new(vec![]).is_err());
        assert!(RateSchedule::new(vec![Segment::step(f64::NAN, secs(1.0))]).is_err());
    }

    #[test]
    fn records_due_and_rate_follow_the_segments() {
        let s = RateSchedule::parse("1000:10s,1000..3000:10s").unwrap();
        let close = |a: f64, b: f64| (a - b).abs() < 1e-6 * b.abs().max(1.0);
        assert_eq!(s.records_due(Duration::ZERO), 0.0);
        assert!(close(s.records_due(secs(5.0)), 5000.0));
        assert!(close(s.records_due(secs(10.0)), 10_000.0));
        assert!(close(s.records_due(secs(15.0)), 17_500.0));
        assert!(close(s.records_due(secs(20.0)), 30_000.0));
        // The last rate holds after the end.
        assert!(close(s.records_due(secs(25.0)), 45_000.0));
        assert!(close(s.rate_at(secs(3.0)), 1000.0));
        assert!(close(s.rate_at(secs(15.0)), 2000.0));
        assert!(close(s.rate_at(secs(20.0)), 3000.0));
        assert!(close(s.rate_at(secs(100.0)), 3000.0));
        let down = RateSchedule::parse("3000..1000:10s,0:5s").unwrap();
        assert!(close(down.records_due(secs(10.0)), 20_000.0));
        assert!(close(
            down.records_due(secs(5.0)),
            3000.0 * 5.0 - 100.0 * 25.0
        ));
        assert!(close(down.records_due(secs(1000.0)), 20_000.0));
        assert_eq!(down.rate_at(secs(12.0)), 0.0);
        assert_eq!(down.time_of(19_999).map(|d| d <= secs(10.0)), Some(true));
        assert_eq!(down.time_of(20_001), None);
    }

    #[test]
    fn time_of_inverts_records_due() {
        let schedules = [
            "1000:10s,3000:20s,1000:10s",
            "1000..3000:30s",
            "3000..1000:30s,500:1s",
            "0..5000:2s,5000..0:2s,0:1s,7:3s,100..100000:1s",
            "0:1s,250.5:3s",
            "1:1s",
        ];
        for text in schedules {
            let s = RateSchedule::parse(text).unwrap();
            let end = s.records_due(s.length()) + 1000.0;
            let mut last = 0.0;
            let mut seq = 0u64;
            let mut checked = 0;
            while (seq as f64) < end {
                // The closed forms, in f64 seconds.
                let at = s.time_secs(seq as f64);
                assert!(at >= last, "{text}: time_of({seq}) = {at} < {last}");
                last = at;
                let due = s.due_secs(at);
                assert!(
                    (due - seq as f64).abs() <= 1e-9 * (seq as f64).max(1.0),
                    "{text}: records_due(time_of({seq})) = {due}"
                );
                let count = s.due_count(at);
                assert!(
                    count > seq,
                    "{text}: due_count at time_of({seq}) is {count}"
                );
                assert!(s.time_secs(count as f64) > at);
                assert!(s.count_before(at) <= seq, "{text}: {seq}");
                // The public API, to the nanosecond of a Duration.
                let t = s.time_of(seq).unwrap();
                let due = s.records_due(t);
                assert!(
                    (due - seq as f64).abs() <= 1e-3,
                    "{text}: records_due(time_of({seq})) = {due}"
                );
                seq += 1 + seq / 64;
                checked += 1;
            }
            assert!(checked > 200, "{text}: {checked}");
        }
        let zero_end = RateSchedule::parse("10:1s,0:1s").unwrap();
        assert_eq!(zero_end.time_of(10), Some(secs(1.0)));
        assert_eq!(zero_end.time_of(11), None);
        assert_eq!(zero_end.due_count(100.0), 11);
    }

    #[test]
    fn bounds_and_checks() {
        let s = RateSchedule::parse("1000:10s").unwrap();
        let source = ScheduledSource::new(s.clone());
        assert!(!source.is_bounded());
        assert_eq!(source.limit(), None);
        assert_eq!(source.clone().total(7).limit(), Some(7));
        assert!(source.clone().total(7).is_bounded());
        assert_eq!(source.clone().duration(secs(10.0)).limit(), Some(10_000));
        assert_eq!(source.clone().duration(secs(2.5)).limit(), Some(2500));
        assert!(source.clone().duration(secs(2.5)).is_bounded());
        assert_eq!(
            source.clone().duration(secs(2.5)).total(100).limit(),
            Some(100)
        );
        assert_eq!(source.name(), "schedule:1000:10s");
        for bad in [
            source.clone().keys(0),
            source.clone().lanes(0),
            source.clone().lanes(MAX_LANES + 1),
        ] {
            assert!(bad.create_reader(&ctx(0, 1)).is_err());
        }
        let ends = ScheduledSource::new(RateSchedule::parse("10:1s,0:1s").unwrap());
        let msg = config_message(ends.clone().total(12).reader(&ctx(0, 1)).err().unwrap());
        assert!(msg.contains("never reached"), "{msg}");
        assert!(ends.clone().total(11).reader(&ctx(0, 1)).is_ok());
        assert!(ends.duration(secs(10.0)).reader(&ctx(0, 1)).is_ok());
    }

    #[test]
    fn every_record_once_on_any_number_of_workers() {
        let source = ScheduledSource::new(RateSchedule::parse("200000:50ms").unwrap()).total(5000);
        let mut one_worker = Vec::new();
        for workers in 1..=3 {
            let mut all = Vec::new();
            for w in 0..workers {
                let mut reader = source.create_reader(&ctx(w, workers)).unwrap();
                let ticks = drain(reader.as_mut(), 128);
                assert!(ticks.iter().all(|t| t.seq as usize % 64 % workers == w));
                all.extend(ticks);
            }
            assert_eq!(seqs(&all), (0..5000).collect::<Vec<_>>(), "{workers}");
            for t in &all {
                assert_eq!(t.key, SplitMix64::new(t.seq).next_u64() % DEFAULT_KEYS);
            }
            let mut content: Vec<(u64, u64)> = all.iter().map(|t| (t.seq, t.key)).collect();
            content.sort_unstable();
            if workers == 1 {
                one_worker = content;
            } else {
                assert_eq!(content, one_worker);
            }
        }
        // More workers than lanes: the extra ones read nothing.
        let few = source.clone().lanes(2);
        let mut reader = few.create_reader(&ctx(2, 3)).unwrap();
        assert!(drain(reader.as_mut(), 10).is_empty());
    }

    #[test]
    fn lanes_are_watermark_splits_in_order() {
        let source = ScheduledSource::new(RateSchedule::parse("1000:1s").unwrap())
            .lanes(4)
            .total(40)
            .anchor_ms(0);
        let mut reader = source.reader(&ctx(0, 1)).unwrap();
        let (mut recs, mut marks) = (Vec::new(), Vec::new());
        for i in 0..100 {
            if poll_once(&mut reader, &mut recs, &mut marks, 7, i as f64 * 0.001)
                == SourceStatus::Finished
            {
                break;
            }
        }
        assert_eq!(seqs(&recs), (0..40).collect::<Vec<_>>());
        // Each record sits under the mark of its lane, and each lane is in order of seq.
        let mut current = None;
        let mut last: HashMap<u32, u64> = HashMap::new();
        let mut finished = Vec::new();
        let mut marks_iter = marks.iter().peekable();
        for (i, t) in recs.iter().enumerate() {
            while let Some(m) = marks_iter.next_if(|m| match m {
                SplitMark::Start { at, .. }
                | SplitMark::Pending { at, .. }
                | SplitMark::Finished { at, .. } => *at <= i,
            }) {
                match *m {
                    SplitMark::Start { split, .. } => current = Some(split),
                    SplitMark::Finished { split, .. } => finished.push(split),
                    SplitMark::Pending { .. } => {}
                }
            }
            let lane = (t.seq % 4) as u32;
            assert_eq!(current, Some(lane), "record {t:?}");
            if let Some(prev) = last.insert(lane, t.seq) {
                assert!(prev < t.seq);
            }
            assert!(!finished.contains(&lane));
            assert_eq!(t.due_ms, t.seq as i64);
        }
        finished.extend(marks_iter.filter_map(|m| match *m {
            SplitMark::Finished { split, .. } => Some(split),
            _ => None,
        }));
        finished.sort_unstable();
        assert_eq!(finished, [0, 1, 2, 3]);
    }

    #[test]
    fn restores_onto_more_workers_without_loss_or_duplicates() {
        let total = 20_000;
        let anchor = 1_700_000_000_000i64;
        let start = anchor as f64 / 1000.0;
        let source = ScheduledSource::new(RateSchedule::parse("100000:1s").unwrap())
            .total(total)
            .anchor_ms(anchor);
        let mut emitted = Vec::new();
        let mut positions = Vec::new();
        for w in 0..2 {
            let mut reader = source.reader(&ctx(w, 2)).unwrap();
            let (mut recs, mut marks) = (Vec::new(), Vec::new());
            // Part-way, unevenly: worker 1 is held back by small polls.
            let max = if w == 0 { 100_000 } else { 50 };
            for i in 1..=20 {
                poll_once(
                    &mut reader,
                    &mut recs,
                    &mut marks,
                    max,
                    start + 0.005 * i as f64,
                );
            }
            assert!(!recs.is_empty() && (recs.len() as u64) < total / 2);
            emitted.extend(recs);
            positions.extend(reader.snapshot().unwrap());
        }
        assert_eq!(positions.len(), 64);
        // Three new readers of a new source value, which knows no anchor but the checkpoint's.
        let again = ScheduledSource::new(RateSchedule::parse("100000:1s").unwrap()).total(total);
        for w in 0..3 {
            let mut reader = again.reader(&ctx(w, 3)).unwrap();
            reader.restore(&positions).unwrap();
            assert_eq!(reader.anchor_ms, Some(anchor));
            let (mut recs, mut marks) = (Vec::new(), Vec::new());
            let mut now = start + 0.1;
            while poll_once(&mut reader, &mut recs, &mut marks, 333, now) != SourceStatus::Finished
            {
                now += 0.01;
            }
            for t in &recs {
                assert_eq!(t.due_ms, anchor + (t.seq / 100) as i64);
            }
            assert_eq!(reader.progress().map(|(d, t)| d == t), Some(true));
            emitted.extend(recs);
        }
        assert_eq!(emitted.len() as u64, total, "duplicates or losses");
        assert_eq!(seqs(&emitted), (0..total).collect::<Vec<_>>());
        // A checkpoint of other lanes does not restore.
        let mut other = again.clone().lanes(8).reader(&ctx(0, 1)).unwrap();
        let msg = config_message(other.restore(&positions).unwrap_err());
        assert!(msg.contains(".lanes(64)"), "{msg}");
    }

    #[test]
    fn emits_on_schedule_in_real_time() {
        let schedule = RateSchedule::parse("10000:1s").unwrap();
        let anchor = (now_secs() * 1000.0) as i64;
        let source = ScheduledSource::new(schedule.clone()).anchor_ms(anchor);
        let mut reader = source.create_reader(&ctx(0, 1)).unwrap();
        let (mut recs, mut letters, mut dropped) = (Vec::new(), Vec::new(), 0);
        let since = |t: f64| secs((t - anchor as f64 / 1000.0).max(0.0));
        let begin = std::time::Instant::now();
        let mut before = now_secs();
        while begin.elapsed() < Duration::from_millis(100) {
            before = now_secs();
            reader
                .poll(
                    &mut SourceOutput::new(&mut recs, &mut letters, &mut dropped),
                    1_000_000,
                )
                .unwrap();
            let due = schedule.records_due(since(now_secs()));
            assert!(
                recs.len() as f64 <= due + 1.0 + 1e-6,
                "{} emitted, {due} due",
                recs.len()
            );
            std::thread::sleep(Duration::from_micros(300));
        }
        // And it keeps up: everything due at the last poll was emitted.
        assert!(recs.len() as f64 >= schedule.records_due(since(before)).floor());
        let now_ms = (now_secs() * 1000.0) as i64;
        assert!(recs.iter().all(|t| t.due_ms <= now_ms));
        // Each record's due time is its schedule time.
        assert!(recs
            .iter()
            .all(|t| t.due_ms == anchor + (t.seq / 10) as i64));
    }

    #[test]
    fn exact_pacing_at_given_times() {
        let schedule = RateSchedule::parse("1000:1s,1000..5000:2s").unwrap();
        let source = ScheduledSource::new(schedule.clone())
            .lanes(5)
            .anchor_ms(10_000);
        let mut reader = source.reader(&ctx(0, 1)).unwrap();
        let (mut recs, mut marks) = (Vec::new(), Vec::new());
        // Before the anchor nothing is due.
        assert_eq!(
            poll_once(&mut reader, &mut recs, &mut marks, 1000, 9.0),
            SourceStatus::Idle
        );
        assert!(recs.is_empty());
        for i in 0..300 {
            let now = 10.0 + i as f64 * 0.01;
            poll_once(&mut reader, &mut recs, &mut marks, usize::MAX, now);
            assert_eq!(
                recs.len() as u64,
                schedule.due_count(now - 10.0),
                "at {now}"
            );
            assert_eq!(
                reader.progress(),
                Some((recs.len() as u64, recs.len() as u64))
            );
        }
    }

    #[test]
    fn a_reader_held_back_reports_its_growing_backlog() {
        // 100 000 records/s: a reader not polled for 50 ms falls ~5 000 records behind, and
        // says so without being polled.
        let source = ScheduledSource::new(RateSchedule::parse("100000:10s").unwrap());
        let mut reader = source.reader(&ctx(0, 1)).unwrap();
        let (mut recs, mut marks) = (Vec::new(), Vec::new());
        poll_once(&mut reader, &mut recs, &mut marks, usize::MAX, now_secs());
        let (done, due) = reader.progress().unwrap();
        assert!(due - done < 1_000, "{done} of {due} right after a poll");
        std::thread::sleep(std::time::Duration::from_millis(50));
        let (done, due) = reader.progress().unwrap();
        assert!(due - done >= 3_000, "{done} of {due} after 50 ms unpolled");
    }

    #[test]
    fn a_backlog_comes_at_once_and_is_reported() {
        // Anchored 10 s ago: 10 001 records are due at once.
        let anchor = (now_secs() * 1000.0) as i64 - 10_000;
        let schedule = RateSchedule::parse("1000:1s").unwrap();
        let source = ScheduledSource::new(schedule).anchor_ms(anchor);
        let mut reader = source.create_reader(&ctx(0, 1)).unwrap();
        let (mut recs, mut letters, mut dropped) = (Vec::new(), Vec::new(), 0);
        reader
            .poll(
                &mut SourceOutput::new(&mut recs, &mut letters, &mut dropped),
                640,
            )
            .unwrap();
        assert_eq!(recs.len(), 640);
        let (done, due) = reader.progress().unwrap();
        assert_eq!(done, 640);
        assert!((10_001..10_100).contains(&due), "{due}");
        reader
            .poll(
                &mut SourceOutput::new(&mut recs, &mut letters, &mut dropped),
                1_000_000,
            )
            .unwrap();
        assert!(recs.len() >= 10_001);
        let (done, due) = reader.progress().unwrap();
        assert_eq!(done, due);
        assert_eq!(seqs(&recs), (0..recs.len() as u64).collect::<Vec<_>>());

        // Bounded: the whole backlog in one poll, then the end.
        let bounded = ScheduledSource::new(RateSchedule::parse("1000:1s").unwrap())
            .total(5000)
            .anchor_ms(anchor);
        let mut reader = bounded.create_reader(&ctx(0, 1)).unwrap();
        let mut recs = Vec::new();
        let status = reader
            .poll(
                &mut SourceOutput::new(&mut recs, &mut letters, &mut dropped),
                10_000,
            )
            .unwrap();
        assert_eq!(status, SourceStatus::More);
        assert_eq!(seqs(&recs), (0..5000).collect::<Vec<_>>());
        let status = reader
            .poll(
                &mut SourceOutput::new(&mut recs, &mut letters, &mut dropped),
                10_000,
            )
            .unwrap();
        assert_eq!(status, SourceStatus::Finished);
    }

    #[test]
    fn readers_of_one_source_share_the_first_anchor() {
        let source = ScheduledSource::new(RateSchedule::parse("1000:1s").unwrap());
        let mut a = source.reader(&ctx(0, 2)).unwrap();
        let mut b = source.reader(&ctx(1, 2)).unwrap();
        let (mut recs, mut marks) = (Vec::new(), Vec::new());
        poll_once(&mut a, &mut recs, &mut marks, 10, 100.0);
        // b has not polled yet, and its snapshot already carries the anchor.
        let pos = b.snapshot().unwrap();
        assert_eq!(pos[0].position["anchor_ms"], 100_000);
        poll_once(&mut b, &mut recs, &mut marks, 10, 100.5);
        assert_eq!(b.anchor_ms, Some(100_000));
        // A clone starts afresh.
        let mut c = source.clone().reader(&ctx(0, 1)).unwrap();
        poll_once(&mut c, &mut recs, &mut marks, 10, 200.0);
        assert_eq!(c.anchor_ms, Some(200_000));
    }
}
