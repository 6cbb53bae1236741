//! Job configuration: parallelism, processes, epochs and flow control.

use std::time::Duration;

use spate_types::{SpateError, SpateResult, DEFAULT_MAX_PARALLELISM};

/// How a job runs. Built by the user (or the CLI) and fixed once the job starts.
#[derive(Debug, Clone)]
pub struct JobConfig {
    /// Worker threads per process.
    pub workers: usize,
    /// Processes in the job. With more than one, [`crate::StreamEnv::execute`] in a process
    /// without a process index launches and supervises the others (see [`crate::cluster`]).
    pub processes: usize,
    /// This process's index, when it is one of a multi-process job.
    pub process_index: Option<usize>,
    /// `host:port` of every process, in index order. Empty means "pick free local ports".
    pub addresses: Vec<String>,
    /// The number of key groups: the maximum parallelism of keyed state.
    pub max_parallelism: u32,
    /// An epoch closes on a worker after this many records from its sources ...
    pub epoch_max_records: usize,
    /// ... or after this much time, whichever comes first.
    pub epoch_interval: Duration,
    /// Flow control: a worker's sources stop while this many of its epochs are incomplete
    /// somewhere downstream. In-flight data per worker is bounded by
    /// `max_epochs_in_flight × epoch_max_records` records.
    pub max_epochs_in_flight: u64,
    /// The most records asked of a source in one poll.
    pub poll_batch: usize,
    /// How often sources (and timestamp assigners) emit watermarks; 200 ms as in Flink.
    pub auto_watermark_interval: Duration,
    /// How often a checkpoint cut is taken; `None`: never. Every worker crosses a checkpoint
    /// boundary epoch at this period of its clock (see [`crate::checkpoint`]).
    pub checkpoint_interval: Option<Duration>,
    /// Where checkpoints go: a directory, or an `s3://`, `gs://`, `az://` or `memory://` URL.
    /// `None`: the job does not checkpoint.
    pub checkpoint_dir: Option<String>,
    /// How many complete checkpoints to keep.
    pub checkpoints_retained: usize,
    /// Consecutive failed checkpoints the job tolerates before it fails.
    pub tolerable_checkpoint_failures: u32,
    /// What to restore at start: `"latest"` (the newest complete checkpoint in
    /// `checkpoint_dir`), a checkpoint or savepoint location, or `None` to start empty.
    pub restore: Option<String>,
}

impl Default for JobConfig {
    fn default() -> Self {
        JobConfig {
            workers: 1,
            processes: 1,
            process_index: None,
            addresses: Vec::new(),
            max_parallelism: DEFAULT_MAX_PARALLELISM,
            epoch_max_records: 32 * 1024,
            epoch_interval: Duration::from_millis(50),
            max_epochs_in_flight: 4,
            poll_batch: 4096,
            auto_watermark_interval: Duration::from_millis(200),
            checkpoint_interval: None,
            checkpoint_dir: None,
            checkpoints_retained: 3,
            tolerable_checkpoint_failures: 0,
            restore: None,
        }
    }
}

/// Environment variables through which a supervisor tells a child process its place.
pub(crate) const ENV_PROCESS_INDEX: &str = "SPATE_PROCESS_INDEX";
pub(crate) const ENV_ADDRESSES: &str = "SPATE_ADDRESSES";

impl JobConfig {
    /// A configuration with `workers` threads in one process.
    pub fn local(workers: usize) -> Self {
        JobConfig {
            workers,
            ..Default::default()
        }
    }

    /// Sets the worker threads per process.
    pub fn with_workers(mut self, workers: usize) -> Self {
        self.workers = workers;
        self
    }

    /// Sets the number of processes.
    pub fn with_processes(mut self, processes: usize) -> Self {
        self.processes = processes;
        self
    }

    /// The total number of workers over all processes.
    pub fn total_workers(&self) -> usize {
        self.workers * self.processes
    }

    /// Checks the settings; every error is one line naming the setting.
    pub fn validate(&self) -> SpateResult<()> {
        let bad = |m: String| Err(SpateError::Config(m));
        if self.workers == 0 {
            return bad("workers must be at least 1".into());
        }
        if self.processes == 0 {
            return bad("processes must be at least 1".into());
        }
        if self.max_parallelism == 0 || self.max_parallelism > 32768 {
            return bad(format!(
                "max parallelism {} must be between 1 and 32768",
                self.max_parallelism
            ));
        }
        if self.total_workers() > self.max_parallelism as usize {
            return bad(format!(
                "{} workers exceed the max parallelism {}: every worker needs a key group",
                self.total_workers(),
                self.max_parallelism
            ));
        }
        if self.epoch_max_records == 0 || self.max_epochs_in_flight == 0 || self.poll_batch == 0 {
            return bad("epoch size, epochs in flight and poll batch must be at least 1".into());
        }
        if let Some(i) = self.process_index {
            if i >= self.processes {
                return bad(format!(
                    "process index {i} out of {} processes",
                    self.processes
                ));
            }
        }
        if !self.addresses.is_empty() && self.addresses.len() != self.processes {
            return bad(format!(
                "{} addresses given for {} processes",
                self.addresses.len(),
                self.processes
            ));
        }
        Ok(())
    }

    /// Applies what a supervisor passed to this process through the environment.
    pub(crate) fn apply_env(&mut self) -> SpateResult<()> {
        if let Ok(index) = std::env::var(ENV_PROCESS_INDEX) {
            let index = index.parse().map_err(|_| {
                SpateError::Config(format!("{ENV_PROCESS_INDEX}={index} is not a number"))
            })?;
            self.process_index = Some(index);
        }
        if let Ok(addresses) = std::env::var(ENV_ADDRESSES) {
            self.addresses = addresses.split(',').map(str::to_owned).collect();
            self.processes = self.addresses.len();
        }
        Ok(())
    }
}
