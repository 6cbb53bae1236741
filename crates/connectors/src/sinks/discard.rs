//! The discard sink: counts records and writes nothing, for benchmarks.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use spate_types::{Sink, SinkContext, SinkWriter, SpateResult};

/// A sink that drops every record and counts them.
///
/// Clones share the count: keep a clone to read [`DiscardSink::count`] after (or while) the
/// job runs.
#[derive(Debug, Clone, Default)]
pub struct DiscardSink {
    count: Arc<AtomicU64>,
}

impl DiscardSink {
    /// A sink with a count of zero.
    pub fn new() -> Self {
        DiscardSink::default()
    }

    /// The number of records discarded so far, by all workers of this process.
    pub fn count(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }
}

impl<T: Send + 'static> Sink<T> for DiscardSink {
    fn name(&self) -> String {
        "discard".to_owned()
    }

    fn create_writer(&self, _ctx: &SinkContext) -> SpateResult<Box<dyn SinkWriter<T>>> {
        Ok(Box::new(DiscardWriter {
            count: Arc::clone(&self.count),
        }))
    }
}

/// One worker's writer of a [`DiscardSink`].
struct DiscardWriter {
    count: Arc<AtomicU64>,
}

impl<T> SinkWriter<T> for DiscardWriter {
    fn write_batch(&mut self, records: &mut Vec<T>) -> SpateResult<()> {
        self.count
            .fetch_add(records.len() as u64, Ordering::Relaxed);
        records.clear();
        Ok(())
    }

    fn close(&mut self) -> SpateResult<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts() {
        let sink = DiscardSink::new();
        let mut writer = Sink::<u8>::create_writer(
            &sink.clone(),
            &SinkContext {
                worker_index: 0,
                workers: 1,
            },
        )
        .unwrap();
        let mut batch = vec![1, 2, 3];
        writer.write_batch(&mut batch).unwrap();
        assert!(batch.is_empty());
        assert_eq!(sink.count(), 3);
    }
}
