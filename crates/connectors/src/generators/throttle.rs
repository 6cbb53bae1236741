//! A wall-clock schedule for rate-limited generators.

use std::time::Instant;

use spate_types::{SpateError, SpateResult};

/// Lets a reader emit `rate` records per second of wall-clock time, counted from its first
/// poll.
///
/// The schedule is strict: a reader that was not polled for a while (the engine held it back)
/// may catch up at full speed until it is on schedule again.
#[derive(Debug)]
pub(crate) struct Throttle {
    rate: f64,
    start: Option<Instant>,
    emitted: u64,
}

impl Throttle {
    /// A schedule of `rate` records per second.
    pub fn new(rate: f64) -> Self {
        Throttle {
            rate,
            start: None,
            emitted: 0,
        }
    }

    /// How many of `want` records may be emitted now (0 when ahead of schedule).
    pub fn allowance(&mut self, want: u64) -> u64 {
        let start = *self.start.get_or_insert_with(Instant::now);
        let due = (start.elapsed().as_secs_f64() * self.rate).floor();
        // One record is due at once; `as` saturates for huge values.
        let due = (due as u64).saturating_add(1);
        due.saturating_sub(self.emitted).min(want)
    }

    /// Records that `n` records were emitted.
    pub fn emitted(&mut self, n: u64) {
        self.emitted += n;
    }
}

/// Checks a rate given by the user.
pub(crate) fn check_rate(source: &str, rate: Option<f64>) -> SpateResult<()> {
    match rate {
        Some(r) if !(r.is_finite() && r > 0.0) => Err(SpateError::Config(format!(
            "{source}: the rate must be a positive number of events per second, not {r}"
        ))),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ahead_of_schedule_gets_nothing() {
        let mut throttle = Throttle::new(1.0);
        assert_eq!(throttle.allowance(10), 1);
        throttle.emitted(1);
        assert_eq!(throttle.allowance(10), 0);
        let mut fast = Throttle::new(1e12);
        std::thread::sleep(std::time::Duration::from_millis(2));
        assert_eq!(fast.allowance(10), 10);
    }

    #[test]
    fn rates_are_checked() {
        assert!(check_rate("s", None).is_ok());
        assert!(check_rate("s", Some(5.0)).is_ok());
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            let msg = check_rate("sequence", Some(bad)).unwrap_err().to_string();
            assert!(
                msg.contains("sequence") && msg.contains("positive"),
                "{msg}"
            );
        }
    }
}
