//! Per-process metrics: named counters that operators bump and reporters read.
//!
//! Names follow Flink's (`<operator>.numRecordsIn`, `<operator>.numRecordsOut`), so that
//! dashboards and alerts map one to one. Counters are shared by the workers of a process and
//! bumped once per batch, not per record.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// A registry of named counters.
#[derive(Debug, Default)]
pub struct Metrics {
    counters: Mutex<BTreeMap<String, Arc<AtomicU64>>>,
}

impl Metrics {
    /// The counter called `name`, created at zero on first use.
    pub fn counter(&self, name: &str) -> Arc<AtomicU64> {
        let mut counters = self.counters.lock().unwrap_or_else(|p| p.into_inner());
        Arc::clone(counters.entry(name.to_owned()).or_default())
    }

    /// The current value of every counter.
    pub fn snapshot(&self) -> BTreeMap<String, u64> {
        let counters = self.counters.lock().unwrap_or_else(|p| p.into_inner());
        counters
            .iter()
            .map(|(k, v)| (k.clone(), v.load(Ordering::Relaxed)))
            .collect()
    }
}
