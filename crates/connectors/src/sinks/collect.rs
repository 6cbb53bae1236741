//! The collect sink, for tests: every record written by every worker of this process, in one
//! shared `Vec`.
//!
//! **At least once** under checkpoints: records are visible as soon as they are written, so a
//! run restarted in place from a checkpoint adds the records after the checkpoint again.

use std::sync::{Arc, Mutex, MutexGuard};

use spate_types::{Sink, SinkContext, SinkWriter, SpateResult};

/// A sink that collects records in memory; read them through its [`CollectHandle`].
///
/// Records of one worker keep their order; records of different workers interleave in the
/// order their batches were written.
pub struct CollectSink<T> {
    records: Arc<Mutex<Vec<T>>>,
}

/// The reading end of a [`CollectSink`]: it can be cloned and read from any thread, also while
/// the job runs.
pub struct CollectHandle<T> {
    records: Arc<Mutex<Vec<T>>>,
}

impl<T> Clone for CollectHandle<T> {
    fn clone(&self) -> Self {
        CollectHandle {
            records: Arc::clone(&self.records),
        }
    }
}

impl<T: Send + 'static> CollectSink<T> {
    /// A sink and the handle to read what it collects.
    pub fn new() -> (CollectSink<T>, CollectHandle<T>) {
        let records = Arc::new(Mutex::new(Vec::new()));
        (
            CollectSink {
                records: Arc::clone(&records),
            },
            CollectHandle { records },
        )
    }
}

impl<T: Send + 'static> CollectSink<T> {
    /// A sink that collects into the records `handle` reads (several jobs into one handle,
    /// or a handle made before the job).
    pub fn with_handle(handle: &CollectHandle<T>) -> CollectSink<T> {
        CollectSink {
            records: Arc::clone(&handle.records),
        }
    }
}

impl<T: Send + 'static> CollectHandle<T> {
    /// A handle with nothing collected yet (see [`CollectSink::with_handle`]).
    pub fn new() -> CollectHandle<T> {
        CollectHandle {
            records: Arc::new(Mutex::new(Vec::new())),
        }
    }
}

impl<T: Send + 'static> Default for CollectHandle<T> {
    fn default() -> Self {
        Self::new()
    }
}

/// Locks the records; a worker that panicked while holding the lock left whole batches only.
fn lock<T>(records: &Mutex<Vec<T>>) -> MutexGuard<'_, Vec<T>> {
    records
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl<T> CollectHandle<T> {
    /// Takes every record collected so far, leaving none.
    pub fn take(&self) -> Vec<T> {
        std::mem::take(&mut *lock(&self.records))
    }

    /// A copy of every record collected so far.
    pub fn snapshot(&self) -> Vec<T>
    where
        T: Clone,
    {
        lock(&self.records).clone()
    }

    /// The number of records collected so far.
    pub fn len(&self) -> usize {
        lock(&self.records).len()
    }

    /// Whether no record was collected so far.
    pub fn is_empty(&self) -> bool {
        lock(&self.records).is_empty()
    }
}

impl<T: Send + 'static> Sink<T> for CollectSink<T> {
    fn name(&self) -> String {
        "collect".to_owned()
    }

    fn create_writer(&self, _ctx: &SinkContext) -> SpateResult<Box<dyn SinkWriter<T>>> {
        Ok(Box::new(CollectWriter {
            records: Arc::clone(&self.records),
        }))
    }
}

/// One worker's writer of a [`CollectSink`].
struct CollectWriter<T> {
    records: Arc<Mutex<Vec<T>>>,
}

impl<T> SinkWriter<T> for CollectWriter<T> {
    fn write_batch(&mut self, records: &mut Vec<T>) -> SpateResult<()> {
        if !records.is_empty() {
            lock(&self.records).append(records);
        }
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
    fn collects_from_all_writers() {
        let (sink, handle) = CollectSink::<u32>::new();
        let mut a = sink
            .create_writer(&SinkContext {
                worker_index: 0,
                workers: 2,
            })
            .unwrap();
        let mut b = sink
            .create_writer(&SinkContext {
                worker_index: 1,
                workers: 2,
            })
            .unwrap();
        let mut batch = vec![1, 2];
        a.write_batch(&mut batch).unwrap();
        assert!(batch.is_empty());
        b.write_batch(&mut vec![3]).unwrap();
        assert_eq!(handle.clone().snapshot(), [1, 2, 3]);
        assert_eq!(handle.len(), 3);
        assert_eq!(handle.take(), [1, 2, 3]);
        assert!(handle.is_empty());
    }
}
