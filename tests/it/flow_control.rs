//! Flow control: an unbounded source feeding a slow sink never runs ahead of it by more than
//! the configured epochs in flight.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use spate::prelude::*;
use spate::types::{Sink, SinkContext, SinkWriter};

struct Slow {
    received: Arc<AtomicU64>,
    per_batch: Duration,
}

struct SlowWriter(Arc<AtomicU64>, Duration);

impl Sink<u64> for Slow {
    fn name(&self) -> String {
        "slow".into()
    }
    fn create_writer(&self, _: &SinkContext) -> SpateResult<Box<dyn SinkWriter<u64>>> {
        Ok(Box::new(SlowWriter(
            Arc::clone(&self.received),
            self.per_batch,
        )))
    }
}

impl SinkWriter<u64> for SlowWriter {
    fn write_batch(&mut self, records: &mut Vec<u64>) -> SpateResult<()> {
        std::thread::sleep(self.1);
        self.0.fetch_add(records.len() as u64, Ordering::SeqCst);
        records.clear();
        Ok(())
    }
    fn close(&mut self) -> SpateResult<()> {
        Ok(())
    }
}

#[test]
fn in_flight_records_stay_bounded_with_a_slow_sink() {
    let workers = 2;
    let mut config = JobConfig::local(workers);
    config.epoch_max_records = 1000;
    config.max_epochs_in_flight = 3;
    config.poll_batch = 500;
    let bound = config.epoch_max_records as u64 * config.max_epochs_in_flight * workers as u64;
    let env = StreamEnv::new(config);
    let emitted = Arc::new(AtomicU64::new(0));
    let received = Arc::new(AtomicU64::new(0));
    let counter = Arc::clone(&emitted);
    env.from_source(SequenceSource::new(0, None))
        .inspect(move |_| {
            counter.fetch_add(1, Ordering::SeqCst);
        })
        .sink_to(Slow {
            received: Arc::clone(&received),
            per_batch: Duration::from_millis(2),
        });

    let stop = env.stop_handle();
    let (e, r) = (Arc::clone(&emitted), Arc::clone(&received));
    let sampler = std::thread::spawn(move || {
        let mut worst = 0;
        for _ in 0..150 {
            std::thread::sleep(Duration::from_millis(10));
            let emitted_now = e.load(Ordering::SeqCst);
            let received_now = r.load(Ordering::SeqCst);
            worst = worst.max(emitted_now.saturating_sub(received_now));
        }
        stop.stop();
        worst
    });
    let result = env.execute("slow sink").expect("job stops cleanly");
    let worst = sampler.join().expect("sampler runs");
    let total = emitted.load(Ordering::SeqCst);
    assert!(total > 0, "the source produced nothing");
    assert!(worst <= bound, "{worst} records in flight, bound {bound}");
    // The sink got everything the source emitted: a stop drains, it does not drop.
    assert_eq!(received.load(Ordering::SeqCst), total);
    assert_eq!(result.totals["sequence-0.numRecordsOut"], total);
}
