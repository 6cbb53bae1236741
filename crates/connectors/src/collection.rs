//! The collection source: the elements of a `Vec`, like Flink's `fromCollection`.
//!
//! Element `i` goes to worker `i % workers`, and each worker emits its elements in their
//! order in the `Vec`. The source is bounded; the elements are cloned out of a shared copy.

use std::sync::Arc;

use spate_types::{
    Source, SourceContext, SourceOutput, SourceReader, SourceStatus, SpateError, SpateResult,
    SplitPosition,
};

/// A bounded source of the elements of a `Vec`. See the [module docs](self).
pub struct CollectionSource<T> {
    items: Arc<Vec<T>>,
}

impl<T: Clone + Send + Sync + 'static> CollectionSource<T> {
    /// A source of `items`.
    pub fn new(items: Vec<T>) -> Self {
        CollectionSource {
            items: Arc::new(items),
        }
    }

    /// The number of elements.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Whether there are no elements.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
}

impl<T: Clone + Send + Sync + 'static> From<Vec<T>> for CollectionSource<T> {
    fn from(items: Vec<T>) -> Self {
        CollectionSource::new(items)
    }
}

impl<T: Clone + Send + Sync + 'static> Source<T> for CollectionSource<T> {
    fn name(&self) -> String {
        format!("collection[{}]", self.items.len())
    }

    fn is_bounded(&self) -> bool {
        true
    }

    fn create_reader(&self, ctx: &SourceContext) -> SpateResult<Box<dyn SourceReader<T>>> {
        let workers = ctx.workers.max(1);
        let total = self
            .items
            .len()
            .saturating_sub(ctx.worker_index)
            .div_ceil(workers);
        Ok(Box::new(CollectionReader {
            items: Arc::clone(&self.items),
            next: ctx.worker_index,
            step: workers,
            emitted: 0,
            total: total as u64,
            done_before: None,
        }))
    }
}

/// One worker's reader of a [`CollectionSource`].
struct CollectionReader<T> {
    items: Arc<Vec<T>>,
    next: usize,
    step: usize,
    emitted: u64,
    total: u64,
    /// After restores: which items earlier runs emitted.
    done_before: Option<Replayed>,
}

impl<T: Clone> SourceReader<T> for CollectionReader<T> {
    fn poll(
        &mut self,
        out: &mut SourceOutput<'_, T>,
        max_records: usize,
    ) -> SpateResult<SourceStatus> {
        let budget = max_records.max(1);
        let mut emitted = 0;
        while emitted < budget {
            let Some(item) = self.items.get(self.next) else {
                break;
            };
            let replayed = self
                .done_before
                .as_ref()
                .is_some_and(|d| d.contains(self.next as u64));
            if !replayed {
                out.push(item.clone());
                emitted += 1;
            }
            self.next = self.next.saturating_add(self.step);
        }
        self.emitted += emitted as u64;
        Ok(if emitted == 0 && self.next >= self.items.len() {
            SourceStatus::Finished
        } else {
            SourceStatus::More
        })
    }

    fn progress(&self) -> Option<(u64, u64)> {
        Some((self.emitted, self.total))
    }

    /// One split per worker: the next item index, and the worker count (so that a restore on
    /// another number of workers knows which items were read).
    fn snapshot(&self) -> Option<Vec<SplitPosition>> {
        Some(vec![round_robin_position(
            (self.next % self.step) as u64,
            self.next as u64,
            self.step as u64,
            self.done_before.as_ref(),
        )])
    }

    fn restore(&mut self, positions: &[SplitPosition]) -> SpateResult<()> {
        self.done_before = round_robin_restore(positions)?;
        Ok(())
    }
}

/// What earlier runs of a round-robin reader (items `i` read by worker `i % workers`) emitted:
/// item `i` was emitted iff, in some layer `(workers, next)`, `i < next[i % workers]`. Each
/// restore adds a layer, so the record stays exact through any sequence of restores on any
/// numbers of workers.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Replayed {
    layers: Vec<(u64, Vec<u64>)>,
}

impl Replayed {
    pub(crate) fn contains(&self, i: u64) -> bool {
        self.layers
            .iter()
            .any(|(workers, next)| i < next[(i % workers) as usize])
    }
}

/// The position of a round-robin reader: its own cursor, plus what earlier runs emitted.
pub(crate) fn round_robin_position(
    worker: u64,
    next: u64,
    workers: u64,
    earlier: Option<&Replayed>,
) -> SplitPosition {
    SplitPosition {
        split: worker,
        position: serde_json::json!({
            "next": next,
            "workers": workers,
            "earlier": earlier.map(|e| &e.layers),
        }),
    }
}

/// Decodes the positions of every old reader into what they (and the runs before them)
/// emitted.
pub(crate) fn round_robin_restore(positions: &[SplitPosition]) -> SpateResult<Option<Replayed>> {
    let Some(first) = positions.first() else {
        return Ok(None);
    };
    let bad = || SpateError::Config("checkpoint: malformed round-robin source position".into());
    let workers = first.position["workers"]
        .as_u64()
        .filter(|w| *w > 0)
        .ok_or_else(bad)?;
    let mut next = vec![0u64; workers as usize];
    let mut layers: Vec<(u64, Vec<u64>)> = Vec::new();
    for p in positions {
        let n = p.position["next"].as_u64().ok_or_else(bad)?;
        *next.get_mut(p.split as usize).ok_or_else(bad)? = n;
        if let Some(earlier) = p.position.get("earlier").filter(|e| !e.is_null()) {
            let earlier: Vec<(u64, Vec<u64>)> =
                serde_json::from_value(earlier.clone()).map_err(|_| bad())?;
            for layer in earlier {
                if !layers.contains(&layer) {
                    layers.push(layer);
                }
            }
        }
    }
    layers.push((workers, next));
    Ok(Some(Replayed { layers }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_all(source: &CollectionSource<u32>, worker: usize, workers: usize) -> Vec<u32> {
        let mut reader = source
            .create_reader(&SourceContext {
                worker_index: worker,
                workers,
            })
            .unwrap();
        let (mut recs, mut letters, mut dropped) = (Vec::new(), Vec::new(), 0);
        loop {
            let mut out = SourceOutput::new(&mut recs, &mut letters, &mut dropped);
            if reader.poll(&mut out, 2).unwrap() == SourceStatus::Finished {
                break;
            }
        }
        assert_eq!(
            reader.progress(),
            Some((recs.len() as u64, recs.len() as u64))
        );
        recs
    }

    #[test]
    fn restored_readers_skip_what_was_read_even_on_other_worker_counts() {
        let source = CollectionSource::new((0..100u32).collect());
        for (before, after, polls) in [(2, 3, 4), (3, 2, 7), (1, 4, 10), (4, 1, 1)] {
            let mut seen = Vec::new();
            let mut positions = Vec::new();
            for w in 0..before {
                let mut r = source
                    .create_reader(&SourceContext {
                        worker_index: w,
                        workers: before,
                    })
                    .unwrap();
                let (mut recs, mut letters, mut dropped) = (Vec::new(), Vec::new(), 0);
                for _ in 0..polls + w {
                    let mut out = SourceOutput::new(&mut recs, &mut letters, &mut dropped);
                    r.poll(&mut out, 3).unwrap();
                }
                seen.extend(recs);
                positions.extend(r.snapshot().unwrap());
            }
            for w in 0..after {
                let mut r = source
                    .create_reader(&SourceContext {
                        worker_index: w,
                        workers: after,
                    })
                    .unwrap();
                r.restore(&positions).unwrap();
                let (mut recs, mut letters, mut dropped) = (Vec::new(), Vec::new(), 0);
                loop {
                    let mut out = SourceOutput::new(&mut recs, &mut letters, &mut dropped);
                    if r.poll(&mut out, 5).unwrap() == SourceStatus::Finished {
                        break;
                    }
                }
                seen.extend(recs);
            }
            seen.sort_unstable();
            assert_eq!(
                seen,
                (0..100).collect::<Vec<_>>(),
                "{before} -> {after} workers"
            );
        }
    }

    #[test]
    fn round_robin_in_order() {
        let source = CollectionSource::new((0..10).collect());
        assert_eq!(read_all(&source, 0, 3), [0, 3, 6, 9]);
        assert_eq!(read_all(&source, 1, 3), [1, 4, 7]);
        assert_eq!(read_all(&source, 2, 3), [2, 5, 8]);
        assert_eq!(read_all(&source, 0, 1), (0..10).collect::<Vec<_>>());
        assert_eq!(read_all(&source, 11, 12), Vec::<u32>::new());
        assert!(read_all(&CollectionSource::new(vec![]), 0, 1).is_empty());
    }
}
