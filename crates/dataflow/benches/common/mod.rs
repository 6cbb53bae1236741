//! What the engine benches share: a generated source of `0..RECORDS` and a sink that counts.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use spate_types::{
    Data, Sink, SinkContext, SinkWriter, Source, SourceContext, SourceOutput, SourceReader,
    SourceStatus, SpateResult,
};

/// Records per job.
pub const RECORDS: u64 = 4_000_000;

/// `0..RECORDS`.
pub struct Generated;

impl Source<u64> for Generated {
    fn name(&self) -> String {
        "generated".into()
    }

    fn is_bounded(&self) -> bool {
        true
    }

    fn create_reader(&self, _ctx: &SourceContext) -> SpateResult<Box<dyn SourceReader<u64>>> {
        Ok(Box::new(GeneratedReader { next: 0 }))
    }
}

struct GeneratedReader {
    next: u64,
}

impl SourceReader<u64> for GeneratedReader {
    fn poll(
        &mut self,
        out: &mut SourceOutput<'_, u64>,
        max_records: usize,
    ) -> SpateResult<SourceStatus> {
        let end = RECORDS.min(self.next + max_records as u64);
        for i in self.next..end {
            out.push(i);
        }
        self.next = end;
        Ok(if self.next < RECORDS {
            SourceStatus::More
        } else {
            SourceStatus::Finished
        })
    }
}

/// Counts what it receives.
pub struct Counting(pub Arc<AtomicU64>);

impl<T: Data> Sink<T> for Counting {
    fn name(&self) -> String {
        "counting".into()
    }

    fn create_writer(&self, _ctx: &SinkContext) -> SpateResult<Box<dyn SinkWriter<T>>> {
        Ok(Box::new(CountingWriter(Arc::clone(&self.0))))
    }
}

struct CountingWriter(Arc<AtomicU64>);

impl<T: Data> SinkWriter<T> for CountingWriter {
    fn write_batch(&mut self, records: &mut Vec<T>) -> SpateResult<()> {
        self.0.fetch_add(records.len() as u64, Ordering::Relaxed);
        records.clear();
        Ok(())
    }

    fn close(&mut self) -> SpateResult<()> {
        Ok(())
    }
}
