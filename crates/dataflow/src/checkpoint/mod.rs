//! Checkpoints in the engine: where the cuts are, what each worker snapshots, and how the
//! parts become a manifest.
//!
//! * this module: checkpoint boundaries in the epoch space (below);
//! * [`snapshot`]: what one worker gathers for each checkpoint, and what a restore hands back;
//! * [`coordinator`]: uploads, manifests, completion, and what a restore reads and which
//!   state ids it must find claimed.
//!
//! Storage, manifests and retention live in the `spate-checkpoint` crate.
//!
//! # Checkpoint boundaries in the epoch space
//!
//! An epoch is a `u64` whose high 32 bits count checkpoint intervals and whose low 32 bits
//! count epochs within one: `epoch = (interval << 32) | sequence`. Checkpoint `c` is the cut
//! **before epoch `c << 32`**: every operator's state at checkpoint `c` reflects exactly the
//! records of the epochs below it. Every worker jumps to the boundary `c << 32` when its clock
//! says interval `c` has begun; no message is needed to agree on the cut, since the boundary
//! is a number every worker knows. A worker that is idle moves within its interval but never
//! crosses a boundary by itself.
//!
//! Without a checkpoint interval, the interval stays 0 and epochs count up from 0 as before.

pub(crate) mod coordinator;
pub(crate) mod snapshot;

use std::time::{Duration, Instant};

use crate::plan::Epoch;

/// The bits of an epoch that count epochs within one checkpoint interval.
pub const SEQUENCE_BITS: u32 = 32;

/// The first epoch of checkpoint interval `c`: checkpoint `c` is the cut before it.
pub fn boundary(c: u64) -> Epoch {
    c << SEQUENCE_BITS
}

/// The checkpoint interval an epoch belongs to.
pub fn interval_of(epoch: Epoch) -> u64 {
    epoch >> SEQUENCE_BITS
}

/// A worker's clock of checkpoint boundaries.
#[derive(Debug, Clone)]
pub(crate) struct EpochClock {
    period: Option<Duration>,
    origin: Instant,
}

impl EpochClock {
    pub(crate) fn new(period: Option<Duration>) -> Self {
        EpochClock {
            period,
            origin: Instant::now(),
        }
    }

    /// The boundary to jump to now, if the clock has entered an interval beyond `epoch`'s.
    pub(crate) fn boundary_due(&self, epoch: Epoch, now: Instant) -> Option<Epoch> {
        let period = self.period?;
        let elapsed = now.saturating_duration_since(self.origin);
        let due = (elapsed.as_nanos() / period.as_nanos().max(1)) as u64;
        (due > interval_of(epoch)).then(|| boundary(due))
    }

    /// The next boundary after `epoch`, or `u64::MAX` without checkpoints.
    pub(crate) fn next_boundary(&self, epoch: Epoch) -> Epoch {
        match self.period {
            Some(_) => boundary(interval_of(epoch) + 1),
            None => Epoch::MAX,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn boundaries_split_the_epoch_space() {
        assert_eq!(interval_of(boundary(3)), 3);
        assert_eq!(interval_of(boundary(3) - 1), 2);
        let clock = EpochClock::new(Some(Duration::from_millis(100)));
        let t = clock.origin + Duration::from_millis(250);
        assert_eq!(clock.boundary_due(5, t), Some(boundary(2)));
        assert_eq!(clock.boundary_due(boundary(2) + 7, t), None);
        assert_eq!(EpochClock::new(None).boundary_due(5, t), None);
    }
}
