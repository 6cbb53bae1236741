//! Workloads for elasticity experiments: operators whose cost per record is set, not found.
//!
//! A [`Cost`] makes an operator spend a fixed time per record, so that an experiment knows
//! its job's capacity in advance. The time is *waited* by default (the thread sleeps): the
//! capacity then follows the number of worker threads, not the machine's cores, and an
//! autoscaling or shedding test behaves the same on 2 cores as on 64. [`Cost::compute`]
//! spins instead, for CPU-bound runs.
//!
//! Each call pays for its records before it returns, as a computing operator would: a batch
//! of `k` records is released `k × cost` after it came in, not earlier. A wait sleeps what
//! is owed; a sleeping thread wakes 50–100 µs late, and what the late wake-up overpays is
//! credited to the next call, so the average cost per record is the one set. (Spinning the
//! last 100 µs instead of sleeping them made no difference to the latencies measured, and a
//! spinning thread holds a core that another worker may need.) Each `Cost` value has its own account (its busy time lands on the operator that owes it).
//!
//! (An earlier version let debts under a millisecond ride on to a later call, to sleep less
//! often. A batch then went through free and the next paid for both, which made the
//! operator's latency at 96 % of its capacity about twice its latency at half load for
//! that reason alone; see BENCHMARKS.md, "Load shedding at the default headroom".)

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How a [`Cost`] spends its time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Spend {
    /// Sleeps: the thread yields its core.
    Wait,
    /// Spins: the thread keeps its core busy.
    Compute,
}

/// A fixed cost per record. See the [module docs](self).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cost {
    per_record: Duration,
    spend: Spend,
    id: u64,
}

static NEXT_ID: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// Per cost id: nanoseconds owed (negative: paid ahead by a late wake-up).
    static DEBT: RefCell<HashMap<u64, f64>> = RefCell::new(HashMap::new());
}

impl Cost {
    /// Waits `per_record` per record.
    pub fn wait(per_record: Duration) -> Self {
        Cost {
            per_record,
            spend: Spend::Wait,
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
        }
    }

    /// Spins `per_record` per record.
    pub fn compute(per_record: Duration) -> Self {
        Cost {
            spend: Spend::Compute,
            ..Cost::wait(per_record)
        }
    }

    /// The cost of one record.
    pub fn per_record(&self) -> Duration {
        self.per_record
    }

    /// The records per second one thread gets through at this cost (infinite at zero cost).
    pub fn capacity_per_thread(&self) -> f64 {
        1.0 / self.per_record.as_secs_f64()
    }

    /// Spends the cost of `records` records on this thread.
    pub fn spend(&self, records: usize) {
        if self.per_record.is_zero() || records == 0 {
            return;
        }
        let owed = DEBT.with(|d| {
            let mut d = d.borrow_mut();
            let debt = d.entry(self.id).or_insert(0.0);
            *debt += self.per_record.as_nanos() as f64 * records as f64;
            *debt
        });
        if owed <= 0.0 {
            return;
        }
        let start = Instant::now();
        let want = Duration::from_nanos(owed as u64);
        match self.spend {
            Spend::Wait => std::thread::sleep(want),
            Spend::Compute => {
                while start.elapsed() < want {
                    std::hint::spin_loop();
                }
            }
        }
        let paid = start.elapsed().as_nanos() as f64;
        DEBT.with(|d| {
            if let Some(debt) = d.borrow_mut().get_mut(&self.id) {
                *debt -= paid;
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_average_cost_is_the_one_set() {
        for cost in [
            Cost::wait(Duration::from_micros(200)),
            Cost::compute(Duration::from_micros(50)),
        ] {
            let start = Instant::now();
            for _ in 0..2_000 {
                cost.spend(1);
            }
            let spent = start.elapsed().as_secs_f64();
            let set = cost.per_record().as_secs_f64() * 2_000.0;
            // Every call pays before it returns; a late wake-up is made up by the next.
            assert!(
                spent >= set && spent < set * 1.5 + 0.01,
                "{spent} s for {set} s of cost"
            );
        }
    }

    #[test]
    fn a_zero_cost_is_free_and_capacity_is_its_inverse() {
        let free = Cost::wait(Duration::ZERO);
        let start = Instant::now();
        free.spend(1_000_000);
        assert!(start.elapsed() < Duration::from_millis(50));
        assert_eq!(
            Cost::wait(Duration::from_micros(250)).capacity_per_thread(),
            4000.0
        );
    }

    #[test]
    fn each_call_pays_before_it_returns() {
        // Two costs, one record each: neither rides on a debt, each sleeps its own 600 µs.
        for cost in [
            Cost::wait(Duration::from_micros(600)),
            Cost::wait(Duration::from_micros(600)),
        ] {
            let start = Instant::now();
            cost.spend(1);
            assert!(start.elapsed() >= Duration::from_micros(600));
        }
    }
}
