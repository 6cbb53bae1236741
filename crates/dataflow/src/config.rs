//! Job configuration: parallelism, processes, epochs and flow control.

use std::ffi::OsString;
use std::path::PathBuf;
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
    /// Restores even when the snapshot holds state that no operator of the job claims (an
    /// operator removed, or its uid changed), dropping that state (Flink's
    /// `--allowNonRestoredState`). Without it such a restore fails, naming the uids.
    pub allow_non_restored_state: bool,
    /// Where to write a savepoint when the job ends (a clean stop or the end of its input):
    /// the final checkpoint, copied into a self-contained location that retention never
    /// touches, to restore later with `restore`, on any number of workers.
    pub savepoint_dir: Option<String>,
    /// The directory under which savepoints asked for while the job runs (the REST API's
    /// savepoint and stop with savepoint) are written; a request may name only a location
    /// inside it. `None`: `<checkpoint_dir>/savepoints`.
    pub savepoint_root: Option<String>,
    /// How the supervisor restarts a checkpointed job whose process died.
    pub restart_strategy: RestartStrategy,
    /// Where keyed operators keep the state of their keys: on the heap (the default), or on
    /// local disk with incremental checkpoints (see [`StateBackend`]).
    pub state_backend: StateBackend,
    /// Set in a process the supervisor started: it runs workers and never supervises.
    pub supervised: bool,
    /// Runs even a one-process checkpointed job as a child of a supervisor, which restarts it
    /// when the process dies (kill -9, out of memory). The `spate` CLI sets this; embedded
    /// jobs restart failed runs in place instead.
    pub supervise_single_process: bool,
    /// How a supervisor starts this program again for each of the job's processes; `None`:
    /// this executable with this process's arguments ([`LaunchCommand::current`]). A program
    /// that embeds Spate in an interpreter sets it (a Python script: `sys.executable` and
    /// `sys.orig_argv[1:]`), since the executable of the process is the interpreter's binary,
    /// which may not find the embedding's environment (a virtual environment) again.
    pub launch: Option<LaunchCommand>,
    /// Whether `execute` installs Spate's Ctrl-C / SIGTERM handler, which calls
    /// [`crate::request_stop`]. It replaces the process's own SIGINT handler for the life of
    /// the process, so a program with a handler of its own (Python's `KeyboardInterrupt`)
    /// turns it off and stops the job itself ([`crate::StopHandle`] or `request_stop`). A
    /// process that a supervisor started (`SPATE_SUPERVISED`) installs it regardless: that is
    /// how the supervisor's SIGTERM stops it cleanly.
    pub install_signal_handler: bool,
    /// Where the job serves its REST API, `/metrics` and dashboard while it runs (by default
    /// a free port on 127.0.0.1); `None` serves nothing. A multi-process job's supervisor
    /// serves it, never its processes. The environment overrides it: `SPATE_REST=off`,
    /// `SPATE_REST_PORT`, `SPATE_REST_BIND`, and the token in `SPATE_REST_TOKEN`.
    pub rest: Option<spate_web::ServerConfig>,
    /// Scales the job's workers to its input rate while it runs (see [`crate::autoscale`]);
    /// `None`: the worker count stays as configured. Needs `checkpoint_dir`: a decision is
    /// applied by stopping with a final checkpoint and restoring it on the new count.
    pub autoscale: Option<AutoscaleConfig>,
    /// What the job does when its input outruns it (see [`crate::shedding`]).
    pub overload: OverloadPolicy,
}

/// How a job scales itself (see [`crate::autoscale`]).
#[derive(Debug, Clone, PartialEq)]
pub struct AutoscaleConfig {
    /// The policy that decides.
    pub policy: ScalingPolicy,
    /// How long each policy window measures (DS2's default: 10 s).
    pub window: Duration,
    /// DS2's settings, and the bounds (total workers over all processes) and warm-up that
    /// every policy keeps.
    pub ds2: spate_elasticity::ds2::Ds2Config,
    /// With `Some(n)`, the process count scales too: a decision of `W` workers runs as
    /// `⌈W / n⌉` processes of `⌈W / processes⌉` threads each (a supervised job whose
    /// processes the supervisor starts on this machine). `None`: the processes stay as
    /// configured and only their threads change.
    pub workers_per_process: Option<usize>,
}

impl Default for AutoscaleConfig {
    fn default() -> Self {
        AutoscaleConfig {
            policy: ScalingPolicy::Ds2,
            window: Duration::from_secs(10),
            ds2: spate_elasticity::ds2::Ds2Config::default(),
            workers_per_process: None,
        }
    }
}

impl AutoscaleConfig {
    /// How a decision of `total` workers runs on a job of `processes` processes now:
    /// `(processes, threads per process)`.
    pub fn layout(&self, total: usize, processes: usize) -> (usize, usize) {
        let processes = match self.workers_per_process {
            Some(n) => total.div_ceil(n.max(1)).max(1),
            None => processes.max(1),
        };
        (processes, total.div_ceil(processes).max(1))
    }
}

/// The decision rule of an autoscaler.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ScalingPolicy {
    /// DS2 (Kalavri et al., OSDI 2018): the parallelism each operator needs, from its true
    /// rates, in one step.
    Ds2,
    /// The simple controller DS2 is compared with: one worker more when the workers are busier
    /// than `high` (a share of their time), one fewer when they are below `low`.
    Threshold {
        /// Busy share above which a worker is added (0.8).
        high: f64,
        /// Busy share below which a worker is removed (0.3).
        low: f64,
    },
}

impl std::str::FromStr for ScalingPolicy {
    type Err = SpateError;

    fn from_str(s: &str) -> Result<Self, SpateError> {
        match s {
            "ds2" => Ok(ScalingPolicy::Ds2),
            "threshold" => Ok(ScalingPolicy::Threshold {
                high: 0.8,
                low: 0.3,
            }),
            _ => Err(SpateError::Config(format!(
                "unknown autoscaling policy `{s}`: use ds2 or threshold"
            ))),
        }
    }
}

/// The default headroom H of [`OverloadPolicy::Shed`]. At load R against capacity C the
/// controller sheds `1 − H·C/R`, which is `(1 − H)·(C/R) / (1 − C/R)` over the minimum
/// `1 − C/R`: 4 % at 1.5× overload for H = 0.98 (10 % would take H = 0.95, with no margin
/// for the load model's error or the start of an overload), 1 % at 3×. The latency it buys
/// is measured in BENCHMARKS.md ("Load shedding at the default headroom").
pub const DEFAULT_HEADROOM: f64 = 0.98;

/// What a job does when its input comes faster than it can process.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum OverloadPolicy {
    /// The sources slow down to the job's pace and fall behind their input (flow control).
    #[default]
    Backpressure,
    /// Drops records (Aurora's load shedding) so that the load stays within `headroom` ×
    /// the capacity; every record shed is counted.
    Shed {
        /// H: the share of the capacity the job may use ([`DEFAULT_HEADROOM`]).
        headroom: f64,
    },
}

impl std::str::FromStr for OverloadPolicy {
    type Err = SpateError;

    fn from_str(s: &str) -> Result<Self, SpateError> {
        match s {
            "backpressure" => Ok(OverloadPolicy::Backpressure),
            "shed" => Ok(OverloadPolicy::Shed {
                headroom: DEFAULT_HEADROOM,
            }),
            _ => Err(SpateError::Config(format!(
                "unknown overload policy `{s}`: use backpressure or shed"
            ))),
        }
    }
}

/// A program and its arguments: how a supervisor starts each process of a job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LaunchCommand {
    /// The program to run (a path, or a name looked up on `PATH`).
    pub program: PathBuf,
    /// Its arguments, without the program itself.
    pub args: Vec<OsString>,
}

impl LaunchCommand {
    /// `program` with `args`.
    pub fn new(
        program: impl Into<PathBuf>,
        args: impl IntoIterator<Item = impl Into<OsString>>,
    ) -> Self {
        LaunchCommand {
            program: program.into(),
            args: args.into_iter().map(Into::into).collect(),
        }
    }

    /// This process's program (`current_exe`) with the arguments it was started with.
    pub fn current() -> SpateResult<Self> {
        let program = std::env::current_exe().map_err(|e| {
            SpateError::io_context("cannot find this program to start its processes", e)
        })?;
        Ok(LaunchCommand {
            program,
            args: std::env::args_os().skip(1).collect(),
        })
    }
}

/// How a failed job is restarted from its latest checkpoint (Flink's restart strategies).
#[derive(Debug, Clone, PartialEq)]
pub enum RestartStrategy {
    /// Never: the first failure fails the job.
    None,
    /// Up to `attempts` restarts, `delay` apart.
    FixedDelay {
        /// Restarts allowed.
        attempts: u32,
        /// Wait before each restart.
        delay: Duration,
    },
    /// Restarts with a delay that grows by `multiplier` from `initial` up to `max`, and
    /// falls back to `initial` after `reset_after` without failure (Flink's default).
    ExponentialDelay {
        /// The first delay.
        initial: Duration,
        /// The largest delay.
        max: Duration,
        /// Growth per failure.
        multiplier: f64,
        /// A run this long without failure resets the delay.
        reset_after: Duration,
    },
    /// Restarts unless more than `max_failures` happen within `interval`.
    FailureRate {
        /// Failures tolerated per interval.
        max_failures: u32,
        /// The measuring interval.
        interval: Duration,
        /// Wait before each restart.
        delay: Duration,
    },
}

impl Default for RestartStrategy {
    fn default() -> Self {
        RestartStrategy::ExponentialDelay {
            initial: Duration::from_secs(1),
            max: Duration::from_secs(60),
            multiplier: 1.5,
            reset_after: Duration::from_secs(3600),
        }
    }
}

impl std::str::FromStr for RestartStrategy {
    type Err = SpateError;

    /// `none`, `fixed-delay:ATTEMPTS:DELAY_MS`, `exponential-delay[:INITIAL_MS:MAX_MS]`,
    /// `failure-rate:MAX_FAILURES:INTERVAL_MS:DELAY_MS`.
    fn from_str(s: &str) -> Result<Self, SpateError> {
        let parts: Vec<&str> = s.split(':').collect();
        let bad = || {
            SpateError::Config(format!(
                "restart strategy `{s}`: expected none, fixed-delay:ATTEMPTS:DELAY_MS, \
                 exponential-delay[:INITIAL_MS:MAX_MS] or failure-rate:MAX:INTERVAL_MS:DELAY_MS"
            ))
        };
        let num = |i: usize| -> Result<u64, SpateError> {
            parts.get(i).and_then(|p| p.parse().ok()).ok_or_else(bad)
        };
        let ms = |i: usize| num(i).map(Duration::from_millis);
        match (parts[0], parts.len()) {
            ("none", 1) => Ok(RestartStrategy::None),
            ("fixed-delay", 3) => Ok(RestartStrategy::FixedDelay {
                attempts: num(1)? as u32,
                delay: ms(2)?,
            }),
            ("exponential-delay", 1) => Ok(RestartStrategy::default()),
            ("exponential-delay", 3) => Ok(RestartStrategy::ExponentialDelay {
                initial: ms(1)?,
                max: ms(2)?,
                multiplier: 1.5,
                reset_after: Duration::from_secs(3600),
            }),
            ("failure-rate", 4) => Ok(RestartStrategy::FailureRate {
                max_failures: num(1)? as u32,
                interval: ms(2)?,
                delay: ms(3)?,
            }),
            _ => Err(bad()),
        }
    }
}

/// Where keyed operators (process functions, windows, joins) keep the state of their keys
/// (Flink's state backends).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StateBackend {
    /// A hash map on the heap per operator instance; checkpoints are full snapshots. The
    /// fastest, for state that fits in memory.
    Memory,
    /// An embedded B-tree (redb) per worker and operator on local disk, behind a write-back
    /// cache of hot keys, for state larger than memory. Checkpoints are incremental: only keys
    /// changed since the previous completed checkpoint are uploaded.
    Disk {
        /// The local directory under which each run makes a scratch directory (removed when
        /// the run ends); `None`: the system's temporary directory.
        dir: Option<std::path::PathBuf>,
        /// Keys each operator instance keeps in memory.
        cache_keys: usize,
        /// Incremental checkpoints between two full ones (a restore reads at most this many
        /// deltas after a base); 0 makes every checkpoint full.
        full_every: u32,
    },
}

impl StateBackend {
    /// Keys cached in memory per operator instance by default.
    pub const DEFAULT_CACHE_KEYS: usize = 100_000;
    /// Incremental checkpoints between full ones by default.
    pub const DEFAULT_FULL_EVERY: u32 = 10;

    /// The disk backend with default settings under `dir` (or the temporary directory).
    pub fn disk(dir: Option<std::path::PathBuf>) -> Self {
        StateBackend::Disk {
            dir,
            cache_keys: Self::DEFAULT_CACHE_KEYS,
            full_every: Self::DEFAULT_FULL_EVERY,
        }
    }
}

impl std::str::FromStr for StateBackend {
    type Err = SpateError;

    /// `memory`, `disk`, or `disk:DIR`.
    fn from_str(s: &str) -> Result<Self, SpateError> {
        match s.split_once(':') {
            None if s == "memory" => Ok(StateBackend::Memory),
            None if s == "disk" => Ok(StateBackend::disk(None)),
            Some(("disk", dir)) if !dir.is_empty() => Ok(StateBackend::disk(Some(dir.into()))),
            _ => Err(SpateError::Config(format!(
                "state backend `{s}`: expected memory, disk or disk:DIR"
            ))),
        }
    }
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
            allow_non_restored_state: false,
            savepoint_dir: None,
            savepoint_root: None,
            restart_strategy: RestartStrategy::default(),
            state_backend: StateBackend::Memory,
            supervised: false,
            supervise_single_process: false,
            launch: None,
            install_signal_handler: true,
            rest: Some(spate_web::ServerConfig::default()),
            autoscale: None,
            overload: OverloadPolicy::Backpressure,
        }
    }
}

/// Environment variables through which a supervisor tells a child process its place.
pub(crate) const ENV_PROCESS_INDEX: &str = "SPATE_PROCESS_INDEX";
pub(crate) const ENV_ADDRESSES: &str = "SPATE_ADDRESSES";
pub(crate) const ENV_SUPERVISED: &str = "SPATE_SUPERVISED";
/// What a restarted process restores: `latest`, a location, or `none`.
pub(crate) const ENV_RESTORE: &str = "SPATE_RESTORE";
/// The worker threads of a process that an autoscaler's supervisor restarted on a new count.
pub(crate) const ENV_WORKERS: &str = "SPATE_WORKERS";
/// The job's process count, when its supervisor scales the processes.
pub(crate) const ENV_PROCESSES: &str = "SPATE_PROCESSES";

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

    /// Where savepoints taken while the job runs go (see [`JobConfig::savepoint_root`]);
    /// `None` when the job has no checkpoint directory, so it cannot take any.
    pub fn savepoint_root(&self) -> Option<String> {
        let dir = self.checkpoint_dir.as_deref()?;
        Some(match &self.savepoint_root {
            Some(root) => root.clone(),
            None => format!("{}/savepoints", dir.trim_end_matches('/')),
        })
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
        if let StateBackend::Disk { cache_keys: 0, .. } = self.state_backend {
            return bad("the disk state backend needs a cache of at least 1 key".into());
        }
        if let Some(i) = self.process_index {
            if i >= self.processes {
                return bad(format!(
                    "process index {i} out of {} processes",
                    self.processes
                ));
            }
        }
        if let Some(a) = &self.autoscale {
            let d = &a.ds2;
            if self.checkpoint_dir.is_none() {
                return bad(
                    "autoscaling needs a checkpoint directory: a decision moves the \
                     state through a final checkpoint"
                        .into(),
                );
            }
            if d.min_workers == 0 || d.min_workers > d.max_workers {
                return bad(format!(
                    "autoscaling bounds {}..{} workers: need 1 <= min <= max",
                    d.min_workers, d.max_workers
                ));
            }
            if d.max_workers > self.max_parallelism as usize {
                return bad(format!(
                    "autoscaling up to {} workers exceeds the max parallelism {}",
                    d.max_workers, self.max_parallelism
                ));
            }
            if let Some(n) = a.workers_per_process {
                if n == 0 {
                    return bad("autoscaling with 0 workers per process".into());
                }
                // A supervised process gets its addresses from its supervisor.
                if !self.addresses.is_empty() && !self.supervised {
                    return bad(
                        "autoscaling the process count needs processes the supervisor starts \
                         on this machine, not --addresses"
                            .into(),
                    );
                }
                if self.processes == 1 && !self.supervise_single_process && !self.supervised {
                    return bad(
                        "autoscaling the process count needs a supervised job: one started by \
                         the CLI, or with more than one process"
                            .into(),
                    );
                }
            }
            if a.window < Duration::from_secs(1) {
                return bad("the autoscaling policy window must be at least 1 s".into());
            }
            if !(d.factor.is_finite() && d.factor >= 0.0) {
                return bad(format!("autoscaling factor {} must be >= 0", d.factor));
            }
            if !(d.catch_up_secs.is_finite() && d.catch_up_secs > 0.0) {
                return bad(format!(
                    "autoscaling catch-up time {} s must be positive",
                    d.catch_up_secs
                ));
            }
        }
        if let OverloadPolicy::Shed { headroom } = self.overload {
            if !(headroom > 0.0 && headroom <= 1.0) {
                return bad(format!("headroom {headroom} must be in (0, 1]"));
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
        if std::env::var_os(ENV_SUPERVISED).is_some() {
            self.supervised = true;
        }
        if let Ok(restore) = std::env::var(ENV_RESTORE) {
            self.restore = (restore != "none").then_some(restore);
        }
        if let Ok(processes) = std::env::var(ENV_PROCESSES) {
            self.processes = processes.parse().map_err(|_| {
                SpateError::Config(format!("{ENV_PROCESSES}={processes} is not a number"))
            })?;
        }
        if let Ok(workers) = std::env::var(ENV_WORKERS) {
            self.workers = workers.parse().map_err(|_| {
                SpateError::Config(format!("{ENV_WORKERS}={workers} is not a number"))
            })?;
        }
        self.apply_rest_env()
    }

    /// `SPATE_REST`, `SPATE_REST_PORT`, `SPATE_REST_BIND` and `SPATE_REST_TOKEN` over
    /// [`JobConfig::rest`].
    fn apply_rest_env(&mut self) -> SpateResult<()> {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        match var("SPATE_REST").as_deref() {
            None | Some("on") => {}
            Some("off") => {
                self.rest = None;
                return Ok(());
            }
            Some(other) => {
                return Err(SpateError::Config(format!(
                    "SPATE_REST={other}: use on or off"
                )))
            }
        }
        let (port, bind) = (var("SPATE_REST_PORT"), var("SPATE_REST_BIND"));
        if port.is_none() && bind.is_none() && self.rest.is_none() {
            return Ok(());
        }
        let rest = self.rest.get_or_insert_with(Default::default);
        if let Some(port) = port {
            rest.port = port.parse().map_err(|_| {
                SpateError::Config(format!("SPATE_REST_PORT={port} is not a port number"))
            })?;
        }
        if let Some(bind) = bind {
            rest.bind = bind.parse().map_err(|_| {
                SpateError::Config(format!("SPATE_REST_BIND={bind} is not an IP address"))
            })?;
        }
        if rest.token.is_none() {
            rest.token =
                spate_web::token_from_env(spate_web::TOKEN_ENV).map_err(SpateError::Config)?;
        }
        Ok(())
    }

    /// Whether `execute` in this process supervises others (and restarts them) rather than
    /// running workers.
    pub(crate) fn supervises(&self) -> bool {
        !self.supervised
            && self.process_index.is_none()
            && (self.processes > 1
                || (self.checkpoint_dir.is_some() && self.supervise_single_process))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_decision_keeps_the_processes_unless_they_scale_too() {
        let fixed = AutoscaleConfig::default();
        assert_eq!(fixed.layout(5, 2), (2, 3), "two processes of three threads");
        assert_eq!(fixed.layout(1, 1), (1, 1));
        let scaled = AutoscaleConfig {
            workers_per_process: Some(2),
            ..AutoscaleConfig::default()
        };
        assert_eq!(scaled.layout(1, 3), (1, 1), "down to one process");
        assert_eq!(scaled.layout(4, 1), (2, 2));
        assert_eq!(
            scaled.layout(5, 1),
            (3, 2),
            "⌈5 / 2⌉ processes, ⌈5 / 3⌉ threads"
        );
        let single = AutoscaleConfig {
            workers_per_process: Some(1),
            ..AutoscaleConfig::default()
        };
        assert_eq!(single.layout(3, 1), (3, 1));
    }

    #[test]
    fn scaling_processes_needs_a_supervisor_that_starts_them() {
        let mut config = JobConfig::local(1);
        config.checkpoint_dir = Some("/tmp/ckpt".into());
        config.autoscale = Some(AutoscaleConfig {
            workers_per_process: Some(1),
            ..AutoscaleConfig::default()
        });
        let err = config.validate().unwrap_err().to_string();
        assert!(err.contains("needs a supervised job"), "{err}");
        config.supervise_single_process = true;
        config.validate().unwrap();
        config.processes = 2;
        config.addresses = vec!["127.0.0.1:1".into(), "127.0.0.1:2".into()];
        let err = config.validate().unwrap_err().to_string();
        assert!(err.contains("not --addresses"), "{err}");
    }
}
