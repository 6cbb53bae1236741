//! A stop through the signal path (what Ctrl-C and SIGTERM call) ends the jobs running at that
//! moment and no later one.
//!
//! This is a test binary of its own, not part of `tests/it`: such a stop reaches every job
//! running in the process, so it would stop the jobs of tests running beside it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use spate::prelude::*;

#[test]
fn a_signal_stop_ends_the_running_job_and_not_the_next_one() {
    // Job 1 is unbounded: only a stop ends it.
    let env = StreamEnv::new(JobConfig::local(2));
    let seen = Arc::new(AtomicU64::new(0));
    let counter = Arc::clone(&seen);
    env.from_source(SequenceSource::new(0, None).rate(50_000.0))
        .inspect(move |_| {
            counter.fetch_add(1, Ordering::SeqCst);
        })
        .sink_to(DiscardSink::new());
    let watched = Arc::clone(&seen);
    let stopper = std::thread::spawn(move || {
        let deadline = Instant::now() + Duration::from_secs(30);
        while watched.load(Ordering::SeqCst) < 1000 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        // The handler of Ctrl-C and SIGTERM calls exactly this.
        spate::dataflow::request_stop();
    });
    env.execute("stopped by a signal")
        .expect("a signal stops the job cleanly");
    stopper.join().unwrap();
    assert!(seen.load(Ordering::SeqCst) >= 1000);

    // Job 2, in the same process, runs to its end: about half a second, during which a stop
    // left over from job 1 would end it early.
    let env = StreamEnv::new(JobConfig::local(2));
    let out = env
        .from_source(SequenceSource::new(0, Some(100_000)).rate(200_000.0))
        .collect();
    env.execute("after the stop").expect("the next job runs");
    let mut got = out.take();
    got.sort_unstable();
    assert!(
        got == (0..100_000).collect::<Vec<u64>>(),
        "the second job gave {} of its 100000 values",
        got.len()
    );
}
