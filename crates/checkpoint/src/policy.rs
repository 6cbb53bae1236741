//! How many failed checkpoints a job tolerates.

use spate_types::{SpateError, SpateResult};

/// Counts consecutive failed checkpoints and decides when the job must fail: after more than
/// `tolerable` failures in a row, as Flink's `execution.checkpointing.tolerable-failed-checkpoints`.
/// A completed checkpoint resets the count.
///
/// The default tolerates 0 failures, Flink's default: the first failed checkpoint fails the job
/// (which then restarts from the latest complete checkpoint under its restart strategy).
///
/// ```
/// use spate_checkpoint::TolerableFailures;
/// use spate_types::SpateError;
///
/// let mut policy = TolerableFailures::new(1);
/// let disk_full = || SpateError::Execution("disk full".into());
/// assert!(policy.record_failure(&disk_full()).is_ok()); // 1 in a row: tolerated
/// policy.record_success();
/// assert!(policy.record_failure(&disk_full()).is_ok()); // the count was reset
/// assert!(policy.record_failure(&disk_full()).is_err()); // 2 in a row: the job fails
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TolerableFailures {
    tolerable: u32,
    consecutive: u32,
    failed_total: u64,
    completed_total: u64,
}

impl TolerableFailures {
    /// A policy that tolerates `tolerable` consecutive failed checkpoints.
    pub fn new(tolerable: u32) -> Self {
        TolerableFailures {
            tolerable,
            ..Self::default()
        }
    }

    /// A checkpoint completed: the run of failures is over.
    pub fn record_success(&mut self) {
        self.consecutive = 0;
        self.completed_total += 1;
    }

    /// A checkpoint failed with `error`. `Ok` while the failures in a row are within the limit;
    /// past it, an error that says so and names the last failure, for the job to fail with.
    pub fn record_failure(&mut self, error: &SpateError) -> SpateResult<()> {
        self.consecutive = self.consecutive.saturating_add(1);
        self.failed_total += 1;
        if self.consecutive > self.tolerable {
            return Err(SpateError::Execution(format!(
                "{} checkpoint(s) failed in a row, more than the {} tolerated; last failure: {error}",
                self.consecutive, self.tolerable
            )));
        }
        Ok(())
    }

    /// Failed checkpoints since the last completed one.
    pub fn consecutive_failures(&self) -> u32 {
        self.consecutive
    }

    /// The number of consecutive failures tolerated.
    pub fn tolerable(&self) -> u32 {
        self.tolerable
    }

    /// Checkpoints failed since the policy was made (Flink's `numberOfFailedCheckpoints`).
    pub fn failed_total(&self) -> u64 {
        self.failed_total
    }

    /// Checkpoints completed since the policy was made (`numberOfCompletedCheckpoints`).
    pub fn completed_total(&self) -> u64 {
        self.completed_total
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_tolerance_fails_on_the_first_failure() {
        let mut p = TolerableFailures::default();
        let err = p
            .record_failure(&SpateError::Execution("disk full".into()))
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "job failed: 1 checkpoint(s) failed in a row, more than the 0 tolerated; last failure: job failed: disk full"
        );
    }

    #[test]
    fn counts() {
        let mut p = TolerableFailures::new(2);
        let e = SpateError::Internal("x".into());
        p.record_failure(&e).unwrap();
        p.record_failure(&e).unwrap();
        assert_eq!(p.consecutive_failures(), 2);
        p.record_success();
        assert_eq!(p.consecutive_failures(), 0);
        p.record_failure(&e).unwrap();
        p.record_failure(&e).unwrap();
        assert!(p.record_failure(&e).is_err());
        assert_eq!((p.failed_total(), p.completed_total()), (5, 1));
    }
}
