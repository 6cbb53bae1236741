//! `StreamEnv`: where a job is described and executed (Flink's `StreamExecutionEnvironment`).

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use spate_types::{Data, Source, SpateError, SpateResult};

use crate::checkpoint::coordinator::CheckpointRuntime;
use crate::cluster;
use crate::config::JobConfig;
use crate::execute::{install_signal_handler, run_worker, JobShared, Progress, RunningJob};
use crate::plan::{ErasedStream, NodeKind, Plan, StrategySlot};
use crate::stream::{add_node, DataStream};
use crate::time::WatermarkStrategy;

/// The entry point of a job: add sources, build the graph on the streams, then `execute`.
///
/// ```
/// use spate_dataflow::{JobConfig, StreamEnv};
/// # use spate_types::*;
/// # struct Numbers;
/// # impl Source<u64> for Numbers {
/// #     fn name(&self) -> String { "numbers".into() }
/// #     fn is_bounded(&self) -> bool { true }
/// #     fn create_reader(&self, ctx: &SourceContext) -> SpateResult<Box<dyn SourceReader<u64>>> {
/// #         struct R(Vec<u64>);
/// #         impl SourceReader<u64> for R {
/// #             fn poll(&mut self, out: &mut SourceOutput<'_, u64>, _max: usize) -> SpateResult<SourceStatus> {
/// #                 self.0.drain(..).for_each(|x| out.push(x)); Ok(SourceStatus::Finished)
/// #             }
/// #         }
/// #         Ok(Box::new(R(if ctx.worker_index == 0 { (1..=10).collect() } else { vec![] })))
/// #     }
/// # }
/// let env = StreamEnv::new(JobConfig::local(2));
/// env.from_source(Numbers)
///     .filter(|x| x % 2 == 0)
///     .map(|x| x * 10)
///     .key_by(|x| x % 3)
///     .sum(|x| *x);
/// let result = env.execute("example").unwrap();
/// assert_eq!(result.totals["numbers-0.numRecordsOut"], 10);
/// ```
pub struct StreamEnv {
    plan: Rc<RefCell<Plan>>,
    config: JobConfig,
    stop: Arc<AtomicBool>,
    progress: Arc<Progress>,
    on_start: Vec<StartHook>,
}

/// What [`StreamEnv::on_start`] calls with the view of a job that starts.
type StartHook = Box<dyn Fn(Arc<dyn spate_metrics::JobView>)>;

/// Which part a process played in a job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The only process: it ran every worker.
    Single,
    /// Process 0 of several: it holds the job-wide totals.
    Leader,
    /// Another process of several.
    Follower,
    /// The launcher that started and supervised the processes (it ran no worker).
    Supervisor,
}

/// What `execute` reports when a job ends well.
#[derive(Debug, Clone)]
pub struct JobResult {
    /// This process's part in the job.
    pub role: Role,
    /// Wall time from start to the end of the last worker.
    pub elapsed: Duration,
    /// Source totals over the whole job (records, dropped and dead-lettered records per
    /// source), on [`Role::Single`] and [`Role::Leader`]; empty elsewhere.
    pub totals: BTreeMap<String, u64>,
    /// This process's operator counters (`<operator>.numRecordsIn` / `.numRecordsOut`).
    pub metrics: BTreeMap<String, u64>,
    /// How many timely operators the job's plan built on global worker 0 (a chain of
    /// operators counts once; see [`crate::chain`]), on [`Role::Single`] and
    /// [`Role::Leader`]; 0 elsewhere.
    pub operators: usize,
    /// The job was canceled ([`spate_metrics::JobView::cancel`]): its sources stopped, its
    /// sinks were dropped without a final commit, and no savepoint was written.
    pub canceled: bool,
    /// The last snapshot of the job in this process: metrics of every operator instance,
    /// checkpoints, exceptions, state transitions (`None` on the supervisor).
    pub snapshot: Option<spate_metrics::JobSnapshot>,
}

impl JobResult {
    /// Whether this process reports for the whole job (the single process or the leader).
    pub fn is_reporter(&self) -> bool {
        matches!(self.role, Role::Single | Role::Leader)
    }

    /// The sum of the totals whose name ends with `suffix` (e.g. `.numRecordsDropped`).
    pub fn total_of(&self, suffix: &str) -> u64 {
        self.totals
            .iter()
            .filter(|(k, _)| k.ends_with(suffix))
            .map(|(_, v)| v)
            .sum()
    }
}

/// A handle that stops a running job cleanly from another thread.
#[derive(Debug, Clone)]
pub struct StopHandle(Arc<AtomicBool>);

impl StopHandle {
    /// Closes the job's sources; the job drains, flushes its sinks and `execute` returns.
    pub fn stop(&self) {
        self.0.store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

impl StreamEnv {
    /// A new environment with `config`.
    pub fn new(config: JobConfig) -> Self {
        StreamEnv {
            plan: Rc::new(RefCell::new(Plan::default())),
            config,
            stop: Arc::new(AtomicBool::new(false)),
            progress: Arc::new(Progress::default()),
            on_start: Vec::new(),
        }
    }

    /// Calls `f` with the live view of the job when `execute` starts it (before its first
    /// record): a snapshot on demand, and control (cancel, savepoints, stop with savepoint).
    /// The view stays valid after the job ends (its last snapshot, operations refused).
    pub fn on_start(&mut self, f: impl Fn(Arc<dyn spate_metrics::JobView>) + 'static) -> &mut Self {
        self.on_start.push(Box::new(f));
        self
    }

    /// Chains no operator to another: every operator runs as a timely operator of its own
    /// (Flink's `env.disableOperatorChaining()`), for debugging and for measuring what
    /// chaining gains.
    pub fn disable_operator_chaining(&self) -> &Self {
        self.plan.borrow_mut().chaining_disabled = true;
        self
    }

    /// The configuration the job will run with.
    pub fn config(&self) -> &JobConfig {
        &self.config
    }

    /// The configuration, to change before `execute`.
    pub fn config_mut(&mut self) -> &mut JobConfig {
        &mut self.config
    }

    /// A stream read from `source`, in parallel on every worker.
    pub fn from_source<T: Data>(&self, source: impl Source<T>) -> DataStream<T> {
        self.from_source_arc(Arc::new(source))
    }

    /// Like [`from_source`](Self::from_source), for a shared source.
    pub fn from_source_arc<T: Data>(&self, source: Arc<dyn Source<T>>) -> DataStream<T> {
        let op = format!("source:{}", source.name());
        let slot: StrategySlot = Arc::new(Mutex::new(None));
        let shed_slot: StrategySlot = Arc::new(Mutex::new(None));
        let strategy = Arc::clone(&slot);
        let shed = Arc::clone(&shed_slot);
        let builder: crate::plan::Builder = Arc::new(move |ctx, _inputs, name| {
            let strategy = strategy
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .as_ref()
                .and_then(|s| s.downcast_ref::<WatermarkStrategy<T>>().cloned());
            let shed = shed
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .as_ref()
                .and_then(|s| s.downcast_ref::<Arc<dyn spate_types::Sink<T>>>().cloned());
            Some(ErasedStream::new(
                ctx.add_source(name, &source, strategy, shed),
            ))
        });
        let node = add_node(&self.plan, &op, NodeKind::Source, vec![], "none", builder);
        self.plan.borrow_mut().nodes[node].source_strategy = Some(slot);
        self.plan.borrow_mut().nodes[node].source_shed = Some(shed_slot);
        let stream = DataStream::from_node(Rc::clone(&self.plan), node);
        // Source names default to a short, stable form: `<name>-<id>`.
        let short = source_short_name(&op, node);
        stream.name(&short)
    }

    /// The job graph described so far.
    pub fn plan(&self) -> Plan {
        self.plan.borrow().clone()
    }

    /// A handle that stops the job cleanly from another thread.
    pub fn stop_handle(&self) -> StopHandle {
        StopHandle(Arc::clone(&self.stop))
    }

    /// Progress of the bounded sources in this process, for progress bars.
    pub fn progress(&self) -> Arc<Progress> {
        Arc::clone(&self.progress)
    }

    /// Runs the job until its bounded sources end, it is stopped (Ctrl-C, SIGTERM or a
    /// [`StopHandle`]), or it fails.
    ///
    /// With `processes > 1` and no process index (set by a supervisor through the
    /// environment), this process becomes the supervisor: it starts the processes on this
    /// machine, each running this same program with the same arguments, and waits for them.
    pub fn execute(&self, job_name: &str) -> SpateResult<JobResult> {
        let mut config = self.config.clone();
        config.apply_env()?;
        config.validate()?;
        // A supervised process always installs it: the supervisor stops it with SIGTERM.
        if config.install_signal_handler || config.supervised {
            install_signal_handler();
        }
        // A signal stops the jobs running when it arrives, this one from now until it returns.
        let running = RunningJob::register();
        let claims = self.plan.borrow().state_ids()?;
        if config.supervises() {
            // A restore that cannot work fails here, once, not in every restarted process.
            if config.restore.is_some() {
                check_restore(&config, &claims)?;
            }
            let plan = self.plan.borrow().clone();
            let observer =
                crate::view::Observer::start(job_name, &config, &plan, Arc::clone(&self.stop));
            let hub = crate::report::Hub::start()?;
            let view: Arc<dyn spate_metrics::JobView> = Arc::new(crate::report::SupervisorView {
                observer: Arc::clone(&observer),
                hub: Arc::clone(&hub),
            });
            let operated = Arc::clone(&observer);
            let _server = crate::web::serve(&config, job_name, Arc::clone(&view), move || {
                !operated.operations().is_empty()
            })?;
            for hook in &self.on_start {
                hook(Arc::clone(&view));
            }
            let env = [
                (crate::report::ENV_CONTROL_ADDR, hub.address().to_owned()),
                (crate::report::ENV_JOB_ID, observer.job_id().to_owned()),
            ];
            // The supervisor scales the job: it restarts its processes on a new count.
            let _autoscaler = config.autoscale.clone().map(|a| {
                let job = Arc::new(crate::autoscale::Supervised {
                    view: Arc::clone(&view),
                    observer: Arc::clone(&observer),
                });
                crate::autoscale::Autoscaler::start(a, config.workers, config.processes, job)
            });
            // A stop asked for through the view reaches the processes as a signal would.
            let supervised = cluster::supervise(&config, &running, &observer, &hub, &env);
            // The processes' last reports arrive as they exit.
            hub.wait_for_last_reports(Duration::from_secs(5));
            let restarts = match supervised {
                Ok(restarts) => restarts,
                Err(e) => {
                    observer.run_failed(&e, false);
                    observer.end();
                    return Err(e);
                }
            };
            observer.finish();
            let snapshot = view.snapshot();
            return Ok(JobResult {
                role: Role::Supervisor,
                elapsed: running.elapsed(),
                totals: BTreeMap::new(),
                metrics: BTreeMap::from([
                    ("fullRestarts".to_owned(), restarts),
                    ("numRestarts".to_owned(), restarts),
                ]),
                operators: 0,
                canceled: observer.canceled(),
                snapshot: Some(snapshot),
            });
        }
        let plan = Arc::new(self.plan.borrow().clone());
        if plan.nodes.is_empty() {
            return Err(SpateError::Job(
                "the job has no operators: add a source".into(),
            ));
        }
        // A process that nobody supervises restarts a checkpointed job in place: a failure that
        // a restart may cure (storage, network, a bug; not bad input or configuration) runs the
        // job again from its latest completed checkpoint, as the restart strategy allows.
        let observer =
            crate::view::Observer::start(job_name, &config, &plan, Arc::clone(&self.stop));
        let view: Arc<dyn spate_metrics::JobView> = observer.clone();
        let operated = Arc::clone(&observer);
        let _server = crate::web::serve(&config, job_name, Arc::clone(&view), move || {
            !operated.operations().is_empty()
        })?;
        for hook in &self.on_start {
            hook(Arc::clone(&view));
        }
        // A process that a supervisor started reports to it.
        let reporter = config
            .supervised
            .then(|| {
                crate::report::report_to_supervisor(&observer, config.process_index.unwrap_or(0))
            })
            .flatten();
        // However `execute` ends, the sampler stops, pending operations fail and the
        // supervisor gets the last report.
        struct EndObserver(Arc<crate::view::Observer>, Option<crate::report::Reporter>);
        impl Drop for EndObserver {
            fn drop(&mut self) {
                self.0.end();
                if let Some(r) = &self.1 {
                    r.final_report();
                }
            }
        }
        let _end = EndObserver(Arc::clone(&observer), reporter);
        // An embedded job scales itself: it restarts its runs in place on a new count. (A
        // supervised process is scaled by its supervisor.)
        let _autoscaler = config
            .autoscale
            .clone()
            .filter(|_| !config.supervised && config.process_index.is_none())
            .map(|a| {
                let job = Arc::new(crate::autoscale::InProcess(Arc::clone(&observer)));
                crate::autoscale::Autoscaler::start(a, config.workers, config.processes, job)
            });
        let mut backoff = cluster::Backoff::new(&config.restart_strategy);
        let mut restarts = 0u64;
        let mut checkpoint_ids = 0u64;
        let launch_base = match config.checkpoint_dir.as_deref() {
            Some(dir) => cluster::newest_complete(&open_storage(dir)?)?,
            None => 0,
        };
        loop {
            let started = Instant::now();
            let mut runtime_opened = false;
            let result = self.run_in_process(
                &config,
                &plan,
                job_name,
                &mut runtime_opened,
                &mut checkpoint_ids,
                &running,
                &observer,
            );
            let error = match result {
                Ok(_) if !running.stop_requested() && observer.rescale_pending() => {
                    // The run stopped with a final checkpoint for a rescale: run again from
                    // it on the new count.
                    // An embedded job keeps its one process (`validate` refuses to scale it).
                    let to = observer.take_rescale().expect("a rescale is pending");
                    let workers = to.workers;
                    config.workers = workers;
                    config.restore = Some("latest".to_owned());
                    observer.rescaling(to);
                    tracing::info!(
                        workers,
                        "autoscaler: restoring the final checkpoint on the new worker count"
                    );
                    continue;
                }
                Ok(mut r) => {
                    r.metrics.insert("fullRestarts".to_owned(), restarts);
                    r.metrics.insert("numRestarts".to_owned(), restarts);
                    r.canceled = observer.canceled();
                    observer.finish();
                    r.snapshot = Some(observer.job_snapshot());
                    return Ok(r);
                }
                Err(e) => e,
            };
            let retryable = runtime_opened
                && config.checkpoint_dir.is_some()
                && error.domain() != spate_types::ErrorDomain::User
                && !running.stop_requested()
                && !observer.canceled()
                && !self.stop.load(std::sync::atomic::Ordering::Relaxed);
            if !retryable {
                observer.run_failed(&error, false);
                return Err(error);
            }
            let Some(delay) = backoff.next(started.elapsed()) else {
                let error = SpateError::Execution(format!(
                    "{error}; the restart strategy allows no more restarts after {restarts}"
                ));
                observer.run_failed(&error, false);
                return Err(error);
            };
            observer.run_failed(&error, true);
            restarts += 1;
            tracing::warn!(%error, restart = restarts, ?delay, "restarting the job from its latest checkpoint");
            std::thread::sleep(delay);
            // A restart restores the job's own latest checkpoint once it has one; until then,
            // what the first run restored (a savepoint, say), never an older checkpoint.
            let dir = config
                .checkpoint_dir
                .as_deref()
                .expect("retried only with checkpoints");
            if cluster::newest_complete(&open_storage(dir)?)? > launch_base {
                config.restore = Some("latest".to_owned());
            }
        }
    }

    /// Runs the job's workers in this process once.
    #[allow(clippy::too_many_arguments)] // the run's inputs and the ids it carries over
    fn run_in_process(
        &self,
        config: &JobConfig,
        plan: &Arc<Plan>,
        job_name: &str,
        runtime_opened: &mut bool,
        checkpoint_ids: &mut u64,
        running: &RunningJob,
        observer: &Arc<crate::view::Observer>,
    ) -> SpateResult<JobResult> {
        let role = match config.process_index {
            None => Role::Single,
            Some(0) => Role::Leader,
            Some(_) => Role::Follower,
        };
        let plan = Arc::clone(plan);
        let mut job = JobShared::new(
            config.clone(),
            Arc::clone(&self.stop),
            running.flag(),
            Arc::clone(&self.progress),
        );
        job.observer = Some(Arc::clone(observer));
        job.cancel = observer.cancel_flag();
        let shedding = match config.overload {
            crate::config::OverloadPolicy::Shed { headroom } => {
                let control = Arc::new(crate::shedding::ShedControl::new(plan.nodes.len()));
                job.shedding = Some(Arc::clone(&control));
                Some((control, headroom))
            }
            crate::config::OverloadPolicy::Backpressure => None,
        };
        let claims = plan.state_ids()?;
        let restore_started = Instant::now();
        job.checkpoints = CheckpointRuntime::open(
            &job.config,
            &claims,
            &job.metrics,
            runtime_opened,
            *checkpoint_ids,
            Some(Arc::clone(observer)),
        )?;
        *runtime_opened = true;
        observer.begin_run(
            Arc::clone(&job.live),
            job.checkpoints.clone(),
            restore_started,
        );
        // Load shedding's controller measures this run (and stops with it).
        let _shedder = shedding.map(|(control, headroom)| {
            crate::shedding::Shedder::start(
                Arc::clone(observer),
                control,
                crate::shedding::places(&plan),
                config.workers,
                headroom,
            )
        });
        let shared = Arc::new(job);
        // However the run ends, a restart's checkpoint ids follow those this run began.
        struct NoteIds<'a>(&'a mut u64, Option<Arc<CheckpointRuntime>>);
        impl Drop for NoteIds<'_> {
            fn drop(&mut self) {
                if let Some(rt) = &self.1 {
                    *self.0 = (*self.0).max(rt.highest_id());
                }
            }
        }
        let _note_ids = NoteIds(checkpoint_ids, shared.checkpoints.clone());
        let worker_shared = Arc::clone(&shared);
        let name = job_name.to_owned();
        tracing::info!(job = %name, plan = %plan.describe(), "starting job");
        let worker_logic = move |worker: &mut timely::worker::Worker| {
            // The last resort: a panic that no operator caught (in Spate or in timely) fails
            // the job with a message, never ends the process silently or hangs the others.
            let index = worker.index();
            let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                run_worker(worker, &plan, &name, Arc::clone(&worker_shared))
            }));
            if let Err(payload) = run {
                let message = crate::function::panic_message(payload.as_ref());
                worker_shared.fail(SpateError::Internal(format!(
                    "worker {index} panicked: {message}"
                )));
            }
        };
        let guards = match shared.config.process_index {
            None => {
                let communication = if shared.config.workers == 1 {
                    timely::CommunicationConfig::Thread
                } else {
                    timely::CommunicationConfig::Process(shared.config.workers)
                };
                let config = timely::Config { communication, worker: timely::WorkerConfig::default() };
                timely::execute(config, worker_logic)
            }
            Some(index) => {
                use timely::communication::allocator::zero_copy::initialize::initialize_networking_from_sockets;
                use timely::communication::allocator::{AllocatorBuilder, ProcessBuilder};
                if shared.config.addresses.len() != shared.config.processes {
                    return Err(SpateError::Config(
                        "a process of a multi-process job needs the addresses of all processes".into(),
                    ));
                }
                let sockets = cluster::connect_peers(&shared.config.addresses, index)?;
                let hooks = timely::communication::Hooks::default();
                let threads = shared.config.workers;
                let process = ProcessBuilder::new_typed_vector(threads, hooks.refill.clone(), hooks.spill.clone());
                let (builders, guard) = initialize_networking_from_sockets(process, sockets, index, threads, hooks)
                    .map_err(|e| SpateError::io_context("cannot start the network between processes", e))?;
                timely::execute::execute_from(
                    builders.into_iter().map(AllocatorBuilder::Tcp).collect(),
                    Box::new(guard),
                    timely::WorkerConfig::default(),
                    worker_logic,
                )
            }
        }
        .map_err(|e| SpateError::Execution(format!("cannot start workers: {e}")))?;
        let mut panics = Vec::new();
        for result in guards.join() {
            if let Err(panic) = result {
                panics.push(panic);
            }
        }
        if let Some(error) = shared.take_error() {
            return Err(error);
        }
        if let Some(panic) = panics.into_iter().next() {
            return Err(SpateError::Internal(format!("a worker panicked: {panic}")));
        }
        let stop_request = observer.take_stop_request();
        if observer.canceled() {
            // Canceled: no savepoint.
        } else if let (Some(request), Some(rt)) = (&stop_request, &shared.checkpoints) {
            // A stop with savepoint: the final checkpoint goes to the requested target.
            if matches!(role, Role::Single | Role::Leader) {
                observer.complete_stop(request, rt);
            }
        } else if let (Some(target), Some(rt)) = (&shared.config.savepoint_dir, &shared.checkpoints)
        {
            // The final checkpoint is complete everywhere (workers wait for it before they
            // close), so the process of worker 0 copies it out.
            if matches!(role, Role::Single | Role::Leader) {
                rt.export_savepoint(target)?;
            }
        }
        let totals = std::mem::take(&mut *shared.totals.lock().unwrap_or_else(|p| p.into_inner()));
        Ok(JobResult {
            role,
            elapsed: running.elapsed(),
            totals,
            metrics: shared.metrics.snapshot(),
            operators: shared.operators.load(std::sync::atomic::Ordering::Relaxed),
            canceled: false,
            snapshot: None,
        })
    }
}

fn open_storage(dir: &str) -> SpateResult<spate_checkpoint::CheckpointStorage> {
    spate_checkpoint::CheckpointStorage::open(dir, spate_checkpoint::CheckpointConfig::default())
}

/// Checks, before any process starts, that what `config.restore` names can be restored into
/// a job with these state ids.
fn check_restore(config: &JobConfig, claims: &[String]) -> SpateResult<()> {
    let Some(dir) = config.checkpoint_dir.as_deref() else {
        return Ok(());
    };
    let storage = open_storage(dir)?;
    match crate::checkpoint::coordinator::resolve_restore(&storage, config)? {
        Some(r) => crate::checkpoint::coordinator::check_claims(&r, config, claims),
        None => Ok(()),
    }
}

fn source_short_name(op: &str, node: usize) -> String {
    // `source:jsonl:/a/b.jsonl` → `jsonl-0`; a plain `source:numbers` → `numbers-0`.
    let rest = op.strip_prefix("source:").unwrap_or(op);
    let kind = rest
        .split([':', ' ', '/'])
        .next()
        .filter(|s| !s.is_empty())
        .unwrap_or("source");
    format!("{kind}-{node}")
}
