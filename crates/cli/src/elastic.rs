//! The flags of elasticity: `--autoscale` (DS2 or a threshold controller) and `--overload`
//! (backpressure or Aurora's load shedding), shared by the commands that run a job.

use std::time::Duration;

use anyhow::{bail, Result};
use clap::Args;
use spate_dataflow::{AutoscaleConfig, JobConfig, OverloadPolicy, ScalingPolicy};
use spate_elasticity::ds2::Ds2Config;

/// Autoscaling and overload flags.
#[derive(Debug, Clone, Args)]
pub struct ElasticArgs {
    /// Scale the workers to the input rate while the job runs: `ds2` (the parallelism each
    /// operator needs from its true rates, in one step) or `threshold` (one worker more above
    /// 80% busy, one fewer below 30%). Needs `--checkpoint-dir`: a decision stops the job with
    /// a final checkpoint and restores it on the new worker count.
    #[arg(long, requires = "checkpoint_dir")]
    pub autoscale: Option<ScalingPolicy>,
    /// The fewest workers the autoscaler runs on: per process, or in all with
    /// `--workers-per-process`.
    #[arg(long, default_value_t = 1, requires = "autoscale")]
    pub min_workers: usize,
    /// The most workers the autoscaler runs on: per process, or in all with
    /// `--workers-per-process`.
    #[arg(long, default_value_t = 16, requires = "autoscale")]
    pub max_workers: usize,
    /// Scale the process count too: a decision of W workers runs as ⌈W / N⌉ processes on
    /// this machine, of ⌈W / processes⌉ threads each.
    #[arg(long, value_name = "N", requires = "autoscale")]
    pub workers_per_process: Option<usize>,
    /// How long each policy window measures, such as `10s`.
    #[arg(long, default_value = "10s", value_parser = crate::util::parse_duration, requires = "autoscale")]
    pub policy_window: Duration,
    /// Windows ignored after every rescale.
    #[arg(long, default_value_t = 2, requires = "autoscale")]
    pub warm_up_windows: u32,
    /// Headroom of DS2: π = ⌈target / rate per instance × (1 + factor)⌉.
    #[arg(long, default_value_t = 0.1, requires = "autoscale")]
    pub autoscale_factor: f64,
    /// Seconds in which a backlog at the sources should be worked off: DS2 adds
    /// backlog / catch-up to a source's rate.
    #[arg(long, default_value_t = 30.0, requires = "autoscale")]
    pub catch_up: f64,
    /// What the job does when its input outruns it: `backpressure` (the sources slow down
    /// and fall behind) or `shed` (records are dropped to keep the load within the headroom;
    /// every record shed is counted in `numRecordsShed`).
    #[arg(long, default_value = "backpressure")]
    pub overload: OverloadPolicy,
    /// With `--overload shed`: the share of the capacity the job may use (H).
    #[arg(long, default_value_t = spate_dataflow::DEFAULT_HEADROOM)]
    pub headroom: f64,
    /// With `--overload shed`: write the records shed to part files in this directory (JSON
    /// lines, exactly once under checkpoints) instead of only counting them.
    #[arg(long, value_name = "DIR")]
    pub shed_output: Option<std::path::PathBuf>,
}

impl ElasticArgs {
    /// Sets the job's autoscaling and overload policy.
    pub fn apply(&self, config: &mut JobConfig) -> Result<()> {
        if let Some(policy) = self.autoscale {
            if self.min_workers == 0 || self.min_workers > self.max_workers {
                bail!(
                    "--min-workers {} and --max-workers {}: need 1 <= min <= max",
                    self.min_workers,
                    self.max_workers
                );
            }
            if self.workers_per_process == Some(0) {
                bail!("--workers-per-process 0: need at least 1");
            }
            // Bounds per process, unless the process count itself scales.
            let per = match self.workers_per_process {
                Some(_) => 1,
                None => config.processes,
            };
            config.autoscale = Some(AutoscaleConfig {
                policy,
                window: self.policy_window,
                ds2: Ds2Config {
                    factor: self.autoscale_factor,
                    catch_up_secs: self.catch_up,
                    warm_up_windows: self.warm_up_windows,
                    min_workers: self.min_workers * per,
                    max_workers: self.max_workers * per,
                    ..Ds2Config::default()
                },
                workers_per_process: self.workers_per_process,
            });
        }
        if self.shed_output.is_some() && !matches!(self.overload, OverloadPolicy::Shed { .. }) {
            bail!("--shed-output needs --overload shed");
        }
        config.overload = match self.overload {
            OverloadPolicy::Shed { .. } => OverloadPolicy::Shed {
                headroom: self.headroom,
            },
            other => other,
        };
        Ok(())
    }
}
