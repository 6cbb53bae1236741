//! The collection source: the elements of a `Vec`, like Flink's `fromCollection`.
//!
//! Element `i` goes to worker `i % workers`, and each worker emits its elements in their
//! order in the `Vec`. The source is bounded; the elements are cloned out of a shared copy.

use std::sync::Arc;

use spate_types::{Source, SourceContext, SourceOutput, SourceReader, SourceStatus, SpateResult};

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
            out.push(item.clone());
            emitted += 1;
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
