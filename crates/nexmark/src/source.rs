//! The Nexmark generator as a Spate source.
//!
//! [`NexmarkSource`] spreads the generator's partitions over the workers: worker `i` of `W`
//! reads the partitions `p` with `p % W == i` ([`SourceContext::my_partitions`]). A reader
//! with several partitions takes one event from each in turn, in partition order; since
//! partition `p` of `K` generates the event numbers `p, p+K, ...`, the reader emits its
//! events in increasing event number, so in increasing event time. What is generated
//! depends on the [`GeneratorConfig`] only, never on the number of workers.
//!
//! An optional wall-clock rate limit (`max_events_per_s`, over the whole job) paces the
//! readers: each gets the share of its partitions, and follows a fixed schedule from its
//! first poll (event `k` is due `k / rate` seconds after it). A reader ahead of the schedule
//! returns [`SourceStatus::Idle`]; one that fell behind (a busy worker) catches up.

use std::time::Instant;

use spate_types::{
    Source, SourceContext, SourceOutput, SourceReader, SourceStatus, SpateError, SpateResult,
    SplitPosition,
};

use crate::generator::{GeneratorConfig, GeneratorShared, NexmarkGenerator};
use crate::model::Event;

/// The most events one poll generates, whatever the engine asks for. Small batches keep the
/// batch buffers (about 100 bytes an event, copied two or three times on the way to the
/// first operators) in the L2 cache together with the generator's 1 MiB `extra` string,
/// which bids slice at random places: 1024 events cost about 10% less time per event than
/// the engine's 4096 (q0, one worker).
const MAX_POLL: usize = 1024;

/// A parallel source of Nexmark events from the deterministic generator.
#[derive(Debug)]
pub struct NexmarkSource {
    config: GeneratorConfig,
    max_events_per_s: Option<f64>,
    keep_alive: bool,
    shared: &'static GeneratorShared,
}

impl NexmarkSource {
    /// A source generating what `config` describes, paced to at most `max_events_per_s`
    /// events per second of wall-clock time over the whole job (`None`: as fast as it can).
    ///
    /// Builds the generator's shared data (a few milliseconds) once for all readers.
    pub fn new(config: GeneratorConfig, max_events_per_s: Option<f64>) -> SpateResult<Self> {
        config.validate()?;
        if let Some(limit) = max_events_per_s {
            if !(limit.is_finite() && limit > 0.0) {
                return Err(SpateError::Config(format!(
                    "nexmark rate limit {limit}: expected a positive number of events per second"
                )));
            }
        }
        let shared = GeneratorShared::cached(&config);
        Ok(NexmarkSource {
            config,
            max_events_per_s,
            keep_alive: false,
            shared,
        })
    }

    /// With `true`, a reader whose events are all emitted stays idle instead of finishing,
    /// as nexmark-flink's `keep-alive` option: the job runs until it is stopped.
    pub fn keep_alive(mut self, keep_alive: bool) -> Self {
        self.keep_alive = keep_alive;
        self
    }

    /// What this source generates.
    pub fn config(&self) -> &GeneratorConfig {
        &self.config
    }

    /// The wall-clock rate limit over the whole job, if any.
    pub fn max_events_per_s(&self) -> Option<f64> {
        self.max_events_per_s
    }
}

impl Source<Event> for NexmarkSource {
    fn name(&self) -> String {
        "nexmark-generator".to_string()
    }

    fn is_bounded(&self) -> bool {
        self.config.events.is_some() && !self.keep_alive
    }

    fn create_reader(&self, ctx: &SourceContext) -> SpateResult<Box<dyn SourceReader<Event>>> {
        let mut reader = NexmarkReader::new(&self.config, self.shared, self.max_events_per_s, ctx)?;
        reader.keep_alive = self.keep_alive;
        Ok(Box::new(reader))
    }
}

/// One worker's reader of a [`NexmarkSource`]: the generators of its partitions.
#[derive(Debug)]
pub struct NexmarkReader {
    /// The live generators, in partition order.
    generators: Vec<NexmarkGenerator>,
    /// The partition of each live generator.
    partitions: Vec<usize>,
    /// The partitions whose generators are exhausted.
    finished: Vec<usize>,
    /// The generator that gives the next event.
    cursor: usize,
    emitted: u64,
    total: Option<u64>,
    /// This reader's share of the rate limit, in events per second.
    events_per_s: Option<f64>,
    started: Option<Instant>,
    /// Idle instead of finished once every event is emitted.
    keep_alive: bool,
}

impl NexmarkReader {
    /// The reader of the worker `ctx` describes.
    pub fn new(
        config: &GeneratorConfig,
        shared: &'static GeneratorShared,
        max_events_per_s: Option<f64>,
        ctx: &SourceContext,
    ) -> SpateResult<Self> {
        let partitions: Vec<usize> = ctx.my_partitions(config.partitions).collect();
        let generators = partitions
            .iter()
            .map(|&p| NexmarkGenerator::with_shared(config, p, shared))
            .collect::<SpateResult<Vec<_>>>()?;
        let total = config.events.map(|_| {
            partitions
                .iter()
                .filter_map(|&p| config.events_in_partition(p))
                .sum()
        });
        let share = partitions.len() as f64 / config.partitions as f64;
        Ok(NexmarkReader {
            generators,
            partitions,
            finished: Vec::new(),
            cursor: 0,
            emitted: 0,
            total,
            events_per_s: max_events_per_s.map(|limit| limit * share),
            started: None,
            keep_alive: false,
        })
    }

    /// How many events the schedule allows now, if there is a rate limit.
    fn allowed_now(&mut self) -> Option<u64> {
        let rate = self.events_per_s?;
        let started = *self.started.get_or_insert_with(Instant::now);
        Some(due_since(started, rate))
    }
}

impl NexmarkReader {
    /// What a reader with no events left answers.
    fn finished_status(&self) -> SourceStatus {
        if self.keep_alive {
            SourceStatus::Idle
        } else {
            SourceStatus::Finished
        }
    }
}

/// The events due `rate` per second since `started`: event k is due k / rate seconds after
/// the start, event 0 right away.
fn due_since(started: Instant, rate: f64) -> u64 {
    let due = (started.elapsed().as_secs_f64() * rate).floor();
    if due >= u64::MAX as f64 {
        u64::MAX
    } else {
        due as u64 + 1
    }
}

impl SourceReader<Event> for NexmarkReader {
    fn poll(
        &mut self,
        out: &mut SourceOutput<'_, Event>,
        max_records: usize,
    ) -> SpateResult<SourceStatus> {
        if self.generators.is_empty() {
            return Ok(self.finished_status());
        }
        let mut budget = max_records.min(MAX_POLL);
        if let Some(allowed) = self.allowed_now() {
            let left = allowed.saturating_sub(self.emitted);
            if left == 0 {
                return Ok(SourceStatus::Idle);
            }
            budget = budget.min(usize::try_from(left).unwrap_or(usize::MAX));
        }
        let mut emitted = 0;
        if let [generator] = self.generators.as_mut_slice() {
            while emitted < budget {
                match generator.next_event() {
                    Some(event) => {
                        out.push(event);
                        emitted += 1;
                    }
                    None => {
                        self.generators.clear();
                        self.finished.append(&mut self.partitions);
                        break;
                    }
                }
            }
        } else {
            while emitted < budget && !self.generators.is_empty() {
                match self.generators[self.cursor].next_event() {
                    Some(event) => {
                        out.push(event);
                        emitted += 1;
                        self.cursor += 1;
                    }
                    None => {
                        // Exhausted: the others still go on in the same order.
                        self.generators.remove(self.cursor);
                        let done = self.partitions.remove(self.cursor);
                        self.finished.push(done);
                    }
                }
                if self.cursor >= self.generators.len() {
                    self.cursor = 0;
                }
            }
        }
        self.emitted += emitted as u64;
        // A bounded reader knows when it is done; finish without an extra empty poll.
        let exhausted = self.generators.is_empty()
            || (self.generators.iter().all(|g| g.remaining() == Some(0)));
        if exhausted {
            self.generators.clear();
            self.finished.append(&mut self.partitions);
            Ok(self.finished_status())
        } else {
            Ok(SourceStatus::More)
        }
    }

    fn progress(&self) -> Option<(u64, u64)> {
        self.total.map(|total| (self.emitted, total))
    }

    /// Under a rate limit, the events already due and not yet read: the rest of a bounded
    /// run is not waiting yet. Without one, the rest of the run (`progress`).
    fn backlog(&self) -> Option<u64> {
        let rate = self.events_per_s?;
        let due = self.started.map_or(0, |started| due_since(started, rate));
        let due = self.total.map_or(due, |total| due.min(total));
        Some(due.saturating_sub(self.emitted))
    }

    /// Each partition is a split; its position is the number of its next event. Exhausted
    /// partitions are not listed (they restart at their end: nothing).
    fn snapshot(&self) -> Option<Vec<SplitPosition>> {
        let mut positions: Vec<SplitPosition> = self
            .partitions
            .iter()
            .zip(&self.generators)
            .map(|(&p, g)| SplitPosition {
                split: p as u64,
                position: serde_json::json!(g.next_event_number()),
            })
            .collect();
        positions.extend(self.finished.iter().map(|&p| SplitPosition {
            split: p as u64,
            position: serde_json::json!(null),
        }));
        Some(positions)
    }

    /// Regenerates each partition up to its position (the generator is deterministic, so the
    /// events after it are the ones the failed run would have produced).
    fn restore(&mut self, positions: &[SplitPosition]) -> SpateResult<()> {
        let mut i = 0;
        while i < self.generators.len() {
            let p = self.partitions[i] as u64;
            match positions.iter().find(|s| s.split == p) {
                Some(SplitPosition { position, .. }) if position.is_null() => {
                    self.generators.remove(i);
                    let part = self.partitions.remove(i);
                    self.finished.push(part);
                    continue;
                }
                Some(SplitPosition { position, .. }) => {
                    let target = position.as_u64().ok_or_else(|| {
                        SpateError::Config(format!(
                            "checkpoint: nexmark partition {p} has a bad position {position}"
                        ))
                    })?;
                    let generator = &mut self.generators[i];
                    while generator.next_event_number() < target {
                        if generator.next_event().is_none() {
                            break;
                        }
                    }
                }
                None => {}
            }
            i += 1;
        }
        // Go on with the partition whose next event comes first, as the failed run would.
        self.cursor = (0..self.generators.len())
            .min_by_key(|&i| self.generators[i].next_event_number())
            .unwrap_or(0);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drain(reader: &mut NexmarkReader, max: usize) -> Vec<Event> {
        let (mut records, mut dead, mut dropped) = (Vec::new(), Vec::new(), 0);
        loop {
            let mut out = SourceOutput::new(&mut records, &mut dead, &mut dropped);
            match reader.poll(&mut out, max).unwrap() {
                SourceStatus::Finished => return records,
                SourceStatus::More => {}
                SourceStatus::Idle => std::thread::yield_now(),
            }
        }
    }

    #[test]
    fn one_worker_emits_in_event_time_order() {
        let cfg = GeneratorConfig {
            events: Some(1001),
            partitions: 4,
            ..Default::default()
        };
        let source = NexmarkSource::new(cfg.clone(), None).unwrap();
        assert!(source.is_bounded());
        assert_eq!(source.name(), "nexmark-generator");
        let ctx = SourceContext {
            worker_index: 0,
            workers: 1,
        };
        let mut reader = NexmarkReader::new(&cfg, source.shared, None, &ctx).unwrap();
        let events = drain(&mut reader, 64);
        assert_eq!(events.len(), 1001);
        assert_eq!(reader.progress(), Some((1001, 1001)));
        let times: Vec<i64> = events.iter().map(Event::date_time).collect();
        let want: Vec<i64> = (0..1001).map(|n| cfg.event_time_ms(n)).collect();
        assert_eq!(times, want);
    }

    #[test]
    fn worker_without_partitions_finishes() {
        let cfg = GeneratorConfig {
            partitions: 2,
            ..Default::default()
        };
        let source = NexmarkSource::new(cfg, None).unwrap();
        assert!(!source.is_bounded());
        let mut reader = source
            .create_reader(&SourceContext {
                worker_index: 2,
                workers: 3,
            })
            .unwrap();
        let (mut records, mut dead, mut dropped) = (Vec::new(), Vec::new(), 0);
        let mut out = SourceOutput::new(&mut records, &mut dead, &mut dropped);
        assert_eq!(reader.poll(&mut out, 10).unwrap(), SourceStatus::Finished);
        assert_eq!(reader.progress(), None);
    }

    /// With keep-alive, a reader emits all its events, then stays idle (and the source is
    /// unbounded); it never finishes.
    #[test]
    fn a_kept_alive_reader_idles_after_its_events() {
        let cfg = GeneratorConfig {
            events: Some(10),
            ..Default::default()
        };
        let source = NexmarkSource::new(cfg, None).unwrap().keep_alive(true);
        assert!(!source.is_bounded());
        let mut reader = source
            .create_reader(&SourceContext {
                worker_index: 0,
                workers: 1,
            })
            .unwrap();
        let (mut records, mut dead, mut dropped) = (Vec::new(), Vec::new(), 0);
        let mut statuses = Vec::new();
        for _ in 0..3 {
            let mut out = SourceOutput::new(&mut records, &mut dead, &mut dropped);
            statuses.push(reader.poll(&mut out, 64).unwrap());
        }
        assert_eq!(records.len(), 10);
        assert_eq!(statuses, vec![SourceStatus::Idle; 3]);
    }

    #[test]
    fn rate_limit_paces_the_reader() {
        let cfg = GeneratorConfig {
            events: Some(100),
            ..Default::default()
        };
        let source = NexmarkSource::new(cfg, Some(1000.0)).unwrap();
        let mut reader = source
            .create_reader(&SourceContext {
                worker_index: 0,
                workers: 1,
            })
            .unwrap();
        let (mut records, mut dead, mut dropped) = (Vec::new(), Vec::new(), 0);
        let started = Instant::now();
        let mut out = SourceOutput::new(&mut records, &mut dead, &mut dropped);
        let first = reader.poll(&mut out, 1000).unwrap();
        assert_eq!(first, SourceStatus::More);
        assert!(
            out.len() < 10,
            "the first poll is not a burst: {}",
            out.len()
        );
        loop {
            let mut out = SourceOutput::new(&mut records, &mut dead, &mut dropped);
            if reader.poll(&mut out, 1000).unwrap() == SourceStatus::Finished {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        assert_eq!(records.len(), 100);
        assert!(
            started.elapsed().as_secs_f64() >= 0.095,
            "{:?}",
            started.elapsed()
        );
    }

    #[test]
    fn a_rate_limited_reader_waits_on_what_is_due_not_on_the_rest_of_the_run() {
        let cfg = GeneratorConfig {
            events: Some(1_000_000),
            ..Default::default()
        };
        let ctx = SourceContext {
            worker_index: 0,
            workers: 1,
        };
        // Without a rate, the whole rest of the run waits (the engine's `total − done`).
        let free = NexmarkSource::new(cfg.clone(), None).unwrap();
        let reader = NexmarkReader::new(&cfg, free.shared, None, &ctx).unwrap();
        assert_eq!(reader.backlog(), None);
        // At 1 000 events/s, only what came due since the first poll waits: about 50 after
        // 50 ms of not reading, never the million of the run.
        let paced = NexmarkSource::new(cfg.clone(), Some(1000.0)).unwrap();
        let mut reader = NexmarkReader::new(&cfg, paced.shared, Some(1000.0), &ctx).unwrap();
        assert_eq!(
            reader.backlog(),
            Some(0),
            "nothing is due before the first poll"
        );
        let (mut records, mut dead, mut dropped) = (Vec::new(), Vec::new(), 0);
        let mut out = SourceOutput::new(&mut records, &mut dead, &mut dropped);
        reader.poll(&mut out, 1000).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(50));
        let waiting = reader.backlog().unwrap();
        assert!((40..=1000).contains(&waiting), "{waiting}");
        let mut out = SourceOutput::new(&mut records, &mut dead, &mut dropped);
        reader.poll(&mut out, 100_000).unwrap();
        assert!(reader.backlog().unwrap() < 5, "{:?}", reader.backlog());
    }

    #[test]
    fn rejects_bad_rate_limit() {
        for limit in [0.0, -1.0, f64::INFINITY, f64::NAN] {
            assert!(NexmarkSource::new(GeneratorConfig::default(), Some(limit)).is_err());
        }
    }
}
