//! The sequence generator: the numbers `start..end`, as fast as possible or at a target rate.
//!
//! Worker `w` of `n` emits the values `v` with `v % n == w`, in increasing order, and, with a
//! rate, its share `rate / n` of it. Unthrottled, a reader emits hundreds of millions of values
//! per second, which makes it the source for measuring flow control against a slow sink.

use spate_types::{
    Source, SourceContext, SourceOutput, SourceReader, SourceStatus, SpateResult, SplitPosition,
};

use super::throttle::{check_rate, Throttle};

/// A source of the `u64` values `start..end` (`end` excluded). See the [module docs](self).
#[derive(Debug, Clone)]
pub struct SequenceSource {
    start: u64,
    end: Option<u64>,
    rate: Option<f64>,
}

impl SequenceSource {
    /// The values from `start` (included) to `end` (excluded); with `end` of `None`, the
    /// sequence is unbounded (it stops only before `u64::MAX`).
    pub fn new(start: u64, end: Option<u64>) -> Self {
        SequenceSource {
            start,
            end,
            rate: None,
        }
    }

    /// Limits the whole job to `events_per_second` values per second of wall-clock time
    /// (default: as fast as possible). It must be positive and finite.
    pub fn rate(mut self, events_per_second: f64) -> Self {
        self.rate = Some(events_per_second);
        self
    }
}

impl Source<u64> for SequenceSource {
    fn name(&self) -> String {
        match self.end {
            Some(end) => format!("sequence:{}..{end}", self.start),
            None => format!("sequence:{}..", self.start),
        }
    }

    fn is_bounded(&self) -> bool {
        self.end.is_some()
    }

    fn create_reader(&self, ctx: &SourceContext) -> SpateResult<Box<dyn SourceReader<u64>>> {
        check_rate("sequence source", self.rate)?;
        let workers = ctx.workers.max(1) as u64;
        let worker = ctx.worker_index as u64;
        let end = self.end.unwrap_or(u64::MAX);
        // The first value `v >= start` with `v % workers == worker`.
        let offset = (worker + workers - self.start % workers) % workers;
        let (next, remaining) = match self.start.checked_add(offset) {
            Some(first) if first < end => (first, (end - first - 1) / workers + 1),
            _ => (0, 0),
        };
        Ok(Box::new(SequenceReader {
            next,
            step: workers,
            remaining,
            total: remaining,
            bounded: self.end.is_some(),
            throttle: self.rate.map(|rate| Throttle::new(rate / workers as f64)),
            done_before: None,
            worker,
        }))
    }
}

/// One worker's reader of a [`SequenceSource`].
struct SequenceReader {
    next: u64,
    step: u64,
    remaining: u64,
    total: u64,
    bounded: bool,
    throttle: Option<Throttle>,
    /// After restores: which values earlier runs emitted.
    done_before: Option<crate::collection::Replayed>,
    worker: u64,
}

impl SourceReader<u64> for SequenceReader {
    fn poll(
        &mut self,
        out: &mut SourceOutput<'_, u64>,
        max_records: usize,
    ) -> SpateResult<SourceStatus> {
        if self.remaining == 0 {
            return Ok(SourceStatus::Finished);
        }
        let mut n = (max_records.max(1) as u64).min(self.remaining);
        if let Some(throttle) = &mut self.throttle {
            n = throttle.allowance(n);
            if n == 0 {
                return Ok(SourceStatus::Idle);
            }
            throttle.emitted(n);
        }
        let (mut v, step) = (self.next, self.step);
        match &self.done_before {
            None => {
                for _ in 0..n {
                    out.push(v);
                    v = v.wrapping_add(step);
                }
            }
            Some(done) => {
                for _ in 0..n {
                    if !done.contains(v) {
                        out.push(v);
                    }
                    v = v.wrapping_add(step);
                }
            }
        }
        self.next = v;
        self.remaining -= n;
        Ok(SourceStatus::More)
    }

    fn progress(&self) -> Option<(u64, u64)> {
        self.bounded
            .then(|| (self.total - self.remaining, self.total))
    }

    fn snapshot(&self) -> Option<Vec<SplitPosition>> {
        let next = if self.remaining == 0 {
            u64::MAX
        } else {
            self.next
        };
        Some(vec![crate::collection::round_robin_position(
            self.worker,
            next,
            self.step,
            self.done_before.as_ref(),
        )])
    }

    fn restore(&mut self, positions: &[SplitPosition]) -> SpateResult<()> {
        self.done_before = crate::collection::round_robin_restore(positions)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(source: &SequenceSource, worker: usize, workers: usize) -> Vec<u64> {
        let mut reader = source
            .create_reader(&SourceContext {
                worker_index: worker,
                workers,
            })
            .unwrap();
        let (mut recs, mut letters, mut dropped) = (Vec::new(), Vec::new(), 0);
        while reader
            .poll(
                &mut SourceOutput::new(&mut recs, &mut letters, &mut dropped),
                3,
            )
            .unwrap()
            != SourceStatus::Finished
        {}
        recs
    }

    #[test]
    fn partitions_by_value() {
        let source = SequenceSource::new(5, Some(15));
        assert_eq!(read(&source, 0, 4), [8, 12]);
        assert_eq!(read(&source, 1, 4), [5, 9, 13]);
        assert_eq!(read(&source, 2, 4), [6, 10, 14]);
        assert_eq!(read(&source, 3, 4), [7, 11]);
        assert_eq!(read(&source, 0, 1), (5..15).collect::<Vec<_>>());
        assert!(read(&SequenceSource::new(10, Some(3)), 0, 1).is_empty());
        assert_eq!(
            read(&SequenceSource::new(u64::MAX - 3, None), 0, 1),
            [u64::MAX - 3, u64::MAX - 2, u64::MAX - 1]
        );
        assert!(read(&SequenceSource::new(u64::MAX - 1, Some(u64::MAX)), 0, 4).is_empty());
        assert_eq!(
            read(&SequenceSource::new(u64::MAX - 1, Some(u64::MAX)), 2, 4),
            [u64::MAX - 1]
        );
    }

    #[test]
    fn bad_rate_is_a_config_error() {
        let source = SequenceSource::new(0, None).rate(0.0);
        assert!(source
            .create_reader(&SourceContext {
                worker_index: 0,
                workers: 1
            })
            .is_err());
    }
}
