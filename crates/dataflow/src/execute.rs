//! Running a plan: the per-worker loop, source driving and flow control.
//!
//! Every worker thread builds the whole plan (data parallelism: each operator has an instance
//! on each worker) and then runs the loop in [`run_worker`]:
//!
//! 1. If fewer than `max_epochs_in_flight` of its epochs are incomplete at the sinks (read
//!    from a probe on the sinks' outputs, which sees all workers), poll the sources.
//! 2. Close the epoch after `epoch_max_records` records or `epoch_interval`, whichever comes
//!    first. A worker whose sources have nothing to give jumps its epoch forward to the
//!    flow-control limit, so an idle worker never holds back a busy one.
//! 3. Step the timely worker.
//!
//! Because sources stop while epochs are in flight, a fast source can never run unboundedly
//! ahead of the slowest operator, and timely's unbounded channels hold at most
//! `max_epochs_in_flight × epoch_max_records` records per worker.

use std::cell::RefCell;
use std::collections::{BTreeMap, VecDeque};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use spate_types::{
    DeadLetter, Sink, SinkContext, SinkWriter, Source, SourceContext, SourceOutput, SourceReader,
    SourceStatus, SpateError, SpateResult, SplitMark,
};
use timely::container::CapacityContainerBuilder;
use timely::dataflow::channels::pact::{Exchange, Pipeline};
use timely::dataflow::operators::generic::builder_rc::OperatorBuilder;
use timely::dataflow::operators::generic::operator::empty;
use timely::dataflow::operators::vec::Broadcast;
use timely::dataflow::operators::{Operator, Probe};
use timely::dataflow::{InputHandleVec, ProbeHandle, Scope};

use crate::chain::Chain;
use crate::checkpoint::coordinator::{
    note_completed, CheckpointRuntime, Report, WorkerCheckpointer,
};
use crate::checkpoint::snapshot::{Cuts, SharedSnapshots, SnapshotHandle, WorkerSnapshots};
use crate::checkpoint::{boundary, interval_of, EpochClock};
use crate::config::JobConfig;
use crate::metrics::{add, Cells, LatencyProbe, LiveMetrics, Metrics, Seals, SEALS_KEPT};
use crate::plan::{Epoch, ErasedStream, Flow, Plan, TStream, WStream};
use crate::time::{
    self, SourceWatermarks, Timestamp, WatermarkStrategy, WmMsg, MAX_WATERMARK, NO_TIMESTAMP,
};

/// The signal-stop flags of the jobs running in this process. Ctrl-C and SIGTERM set those of
/// the jobs running at that moment; a job that starts later registers a fresh flag, so a stop
/// never reaches a job that was not running when it was asked for.
static RUNNING_JOBS: Mutex<Vec<Arc<AtomicBool>>> = Mutex::new(Vec::new());

/// Asks every job running in this process to stop cleanly: sources close, sinks flush,
/// `execute` returns `Ok`. This is what Ctrl-C and SIGTERM do. Jobs started afterwards are not
/// affected.
pub fn request_stop() {
    let running = RUNNING_JOBS.lock().unwrap_or_else(|p| p.into_inner());
    for flag in running.iter() {
        flag.store(true, Ordering::SeqCst);
    }
}

/// A job's entry among the running jobs that [`request_stop`] reaches, from the start of
/// `execute` to its end (restarts in place included), with the time it started; dropping it
/// removes the entry.
pub(crate) struct RunningJob {
    flag: Arc<AtomicBool>,
    started: Instant,
}

impl RunningJob {
    /// Registers a job that has just started, with a flag no stop has set yet.
    pub(crate) fn register() -> Self {
        let flag = Arc::new(AtomicBool::new(false));
        RUNNING_JOBS
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(Arc::clone(&flag));
        RunningJob {
            flag,
            started: Instant::now(),
        }
    }

    /// The wall time since the job started.
    pub(crate) fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }

    /// The flag that [`request_stop`] sets for this job.
    pub(crate) fn flag(&self) -> Arc<AtomicBool> {
        Arc::clone(&self.flag)
    }

    /// Whether a signal (or [`request_stop`]) asked this job to stop.
    pub(crate) fn stop_requested(&self) -> bool {
        self.flag.load(Ordering::Relaxed)
    }
}

impl Drop for RunningJob {
    fn drop(&mut self) {
        RUNNING_JOBS
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|flag| !Arc::ptr_eq(flag, &self.flag));
    }
}

/// Installs the Ctrl-C / SIGTERM handler that calls [`request_stop`] (once per process).
pub(crate) fn install_signal_handler() {
    static INSTALLED: std::sync::Once = std::sync::Once::new();
    INSTALLED.call_once(|| {
        // A second handler (the embedding program installed its own) is not an error: that
        // program then decides how to stop, for example by calling `request_stop`.
        let _ = ctrlc::set_handler(request_stop);
    });
}

/// State one process's workers share while a job runs.
pub(crate) struct JobShared {
    pub(crate) config: JobConfig,
    /// Set when any worker of this process fails; all of them then stop.
    abort: AtomicBool,
    /// Set when the job is canceled: every worker stops as on a failure, with no error.
    pub(crate) cancel: Arc<AtomicBool>,
    error: Mutex<Option<SpateError>>,
    /// A stop asked for by the API ([`crate::StopHandle`]).
    pub(crate) stop: Arc<AtomicBool>,
    /// A stop asked for by a signal or [`request_stop`] while this job runs.
    signal_stop: Arc<AtomicBool>,
    pub(crate) metrics: Arc<Metrics>,
    /// The live cells of this run's operator instances and workers.
    pub(crate) live: Arc<LiveMetrics>,
    /// The job's observer (state, checkpoints, exceptions, control), shared by its runs.
    pub(crate) observer: Option<Arc<crate::view::Observer>>,
    /// Source-side totals over all workers of all processes, filled on global worker 0.
    pub(crate) totals: Mutex<BTreeMap<String, u64>>,
    /// Bounded-source progress of this process's workers: (done, total).
    pub(crate) progress: Arc<Progress>,
    /// Checkpoint storage and coordination, when the job checkpoints.
    pub(crate) checkpoints: Option<Arc<CheckpointRuntime>>,
    /// The number of timely operators the plan built on worker 0 (see
    /// [`crate::JobResult::operators`]).
    pub(crate) operators: AtomicUsize,
    /// The disk state backend's scratch directory for this run, made by the first operator
    /// that needs it and removed when the run ends.
    state_dir: std::sync::OnceLock<Result<tempfile::TempDir, String>>,
    /// The drop fractions of load shedding, when the job sheds under overload.
    pub(crate) shedding: Option<Arc<crate::shedding::ShedControl>>,
}

/// Progress of a job's bounded sources in this process, for progress bars.
#[derive(Debug, Default)]
pub struct Progress {
    /// Units done (bytes or events), summed over this process's workers.
    pub done: AtomicU64,
    /// Units in all, summed over this process's workers; 0 when unknown.
    pub total: AtomicU64,
}

impl JobShared {
    pub(crate) fn new(
        config: JobConfig,
        stop: Arc<AtomicBool>,
        signal_stop: Arc<AtomicBool>,
        progress: Arc<Progress>,
    ) -> Self {
        JobShared {
            config,
            abort: AtomicBool::new(false),
            cancel: Arc::new(AtomicBool::new(false)),
            error: Mutex::new(None),
            stop,
            signal_stop,
            metrics: Arc::new(Metrics::default()),
            live: Arc::new(LiveMetrics::default()),
            observer: None,
            totals: Mutex::new(BTreeMap::new()),
            progress,
            checkpoints: None,
            operators: AtomicUsize::new(0),
            state_dir: std::sync::OnceLock::new(),
            shedding: None,
        }
    }

    /// The run's scratch directory for disk-backed state, under `base` (or the system's
    /// temporary directory).
    fn state_dir(&self, base: Option<&std::path::Path>) -> SpateResult<&std::path::Path> {
        let made = self.state_dir.get_or_init(|| {
            let mut b = tempfile::Builder::new();
            b.prefix("spate-state-");
            let made = match base {
                Some(dir) => std::fs::create_dir_all(dir).and_then(|()| b.tempdir_in(dir)),
                None => b.tempdir(),
            };
            made.map_err(|e| {
                let dir = base.map_or_else(std::env::temp_dir, |d| d.to_path_buf());
                format!("cannot make a state directory under {}: {e}", dir.display())
            })
        });
        match made {
            Ok(dir) => Ok(dir.path()),
            Err(e) => Err(SpateError::Config(e.clone())),
        }
    }

    /// Records the first error and makes every worker stop.
    pub(crate) fn fail(&self, error: SpateError) {
        if self.config.supervised && self.config.processes > 1 {
            // One process of several cannot end alone: timely's shutdown waits for its peers,
            // which wait for this process's progress. So it ends at once, as a crash would,
            // and the supervisor stops the others and restarts the job (or fails it).
            let index = self.config.process_index.unwrap_or(0);
            eprintln!("error: process {index}: {error}");
            std::process::exit(1);
        }
        let mut slot = self.error.lock().unwrap_or_else(|p| p.into_inner());
        if slot.is_none() {
            *slot = Some(error);
        }
        self.abort.store(true, Ordering::SeqCst);
    }

    /// Whether the job is failing: every worker stops.
    pub(crate) fn aborted(&self) -> bool {
        self.abort.load(Ordering::Relaxed) || self.cancel.load(Ordering::Relaxed)
    }

    pub(crate) fn take_error(&self) -> Option<SpateError> {
        self.error.lock().unwrap_or_else(|p| p.into_inner()).take()
    }

    fn stop_requested(&self) -> bool {
        self.stop.load(Ordering::Relaxed) || self.signal_stop.load(Ordering::Relaxed)
    }
}

/// What a node builder gets: the worker's scope and the job's shared state.
pub struct BuildCtx<'s> {
    pub(crate) scope: Scope<'s, Epoch>,
    pub(crate) shared: Arc<JobShared>,
    pub(crate) drivers: Vec<Box<dyn SourceDriver>>,
    pub(crate) probe: ProbeHandle<Epoch>,
    pub(crate) snapshots: SharedSnapshots,
    /// The state id ([`Plan::state_ids`]) of the node being built.
    pub(crate) uid: String,
    /// The job's name, as given to `execute`.
    pub(crate) job: String,
    /// Whether the node being built is chained to its input (see [`Plan::chain_heads`]).
    pub(crate) chained: bool,
    /// The side outputs of the node being built that the job reads (see [`crate::side`]).
    pub(crate) sides: Vec<Arc<dyn crate::side::SidePort>>,
    /// The plan index of the node being built.
    pub(crate) node: usize,
    /// The node's keyed operator reads what an earlier operator of the same node counted
    /// already (a window's local pre-aggregation): it counts no input.
    pub(crate) skip_input_count: bool,
    /// When this worker closed its epochs (for epoch latency).
    pub(crate) seals: Seals,
}

impl<'s> BuildCtx<'s> {
    /// This worker's global index.
    pub(crate) fn index(&self) -> usize {
        self.scope.index()
    }

    /// The number of workers over all processes.
    pub(crate) fn peers(&self) -> usize {
        self.scope.peers()
    }

    pub(crate) fn config(&self) -> &JobConfig {
        &self.shared.config
    }

    /// The live metric cells of the node being built on this worker.
    pub(crate) fn cells(&self) -> Arc<Cells> {
        self.shared.live.instance(self.node, self.index())
    }

    /// A probe that records the epoch latency of the node being built on this worker.
    pub(crate) fn latency_probe(&self) -> LatencyProbe {
        LatencyProbe::new(Rc::clone(&self.seals), self.cells())
    }

    /// The shared state of the job in this process.
    pub(crate) fn shared(&self) -> &Arc<JobShared> {
        &self.shared
    }

    /// The watermark of a stream after its records are exchanged between workers: every
    /// worker's watermark, broadcast and combined (see [`crate::time`]).
    pub(crate) fn exchange_wm(&self, wm: WStream<'s>, name: &str) -> WStream<'s> {
        time::exchange(wm, self.index(), self.peers(), name)
    }

    /// The combined watermark of several inputs on this worker.
    pub(crate) fn merge_wms(&self, wms: Vec<WStream<'s>>, name: &str) -> WStream<'s> {
        time::merge(self.scope, wms, name)
    }

    /// The state id of the node being built: what its checkpointed state belongs to.
    pub(crate) fn uid(&self) -> &str {
        &self.uid
    }

    /// Registers the node being built as a stateful operator for checkpoints; `None` when the
    /// job does not checkpoint.
    pub(crate) fn stateful(&mut self) -> Option<SnapshotHandle> {
        let id = self.uid.clone();
        self.stateful_as(&id)
    }

    fn stateful_as(&mut self, id: &str) -> Option<SnapshotHandle> {
        self.shared.checkpoints.as_ref()?;
        if self.snapshots.borrow().operators.iter().any(|o| o == id) {
            self.shared.fail(SpateError::Internal(format!(
                "two stateful operators registered the state id `{id}`"
            )));
        }
        Some(SnapshotHandle::register(&self.snapshots, id))
    }

    /// The restored snapshots of the node being built, one per old worker (none when not
    /// restoring, or when the checkpoint has no state of its uid: it then starts empty).
    pub(crate) fn restored_parts(&self) -> Vec<bytes::Bytes> {
        self.restored_parts_as(&self.uid)
    }

    fn restored_parts_as(&self, id: &str) -> Vec<bytes::Bytes> {
        match self.shared.checkpoints.as_ref() {
            Some(rt) => match rt.restored_parts(id, self.index() == 0) {
                Ok(parts) => parts,
                Err(e) => {
                    self.shared.fail(e);
                    Vec::new()
                }
            },
            None => Vec::new(),
        }
    }

    /// Reads a file of the restored checkpoint (the chains of incremental snapshots).
    pub(crate) fn restored_file_reader(&self) -> crate::state::backend::FileReader {
        let rt = self.shared.checkpoints.clone();
        Box::new(move |name: &str| match rt.as_ref() {
            Some(rt) => rt.restored_file(name),
            None => Err(SpateError::Internal(format!(
                "the job does not checkpoint, so there is no file {name} to restore"
            ))),
        })
    }

    /// The store for the keyed state of the node being built on this worker, as the job's
    /// state backend says; `checkpoints` when the operator takes part in checkpoints. A disk
    /// store that cannot be made fails the job and falls back to memory.
    pub(crate) fn keyed_states<K, S>(
        &self,
        checkpoints: bool,
        group: fn(&K, u32) -> spate_types::keygroup::KeyGroup,
    ) -> crate::state::backend::KeyedStates<K, S>
    where
        K: spate_types::Data + std::hash::Hash + Eq,
        S: serde::Serialize + serde::de::DeserializeOwned,
    {
        use crate::state::backend::{DiskSetup, DiskStates, KeyedStates};
        let crate::config::StateBackend::Disk {
            dir,
            cache_keys,
            full_every,
        } = &self.shared.config.state_backend
        else {
            return KeyedStates::Memory(Default::default());
        };
        let name = self.uid();
        let opened = self.shared.state_dir(dir.as_deref()).and_then(|root| {
            let path = root.join(format!("w{}", self.index())).join(format!(
                "{}.redb",
                crate::checkpoint::snapshot::sanitize(name)
            ));
            DiskStates::open(DiskSetup {
                path,
                cache_keys: *cache_keys,
                full_every: *full_every,
                checkpoints,
                max_parallelism: self.shared.config.max_parallelism,
                operator: name.to_owned(),
                worker: self.index(),
            })
            .map(|disk| disk.with_group(group))
        });
        match opened {
            Ok(disk) => KeyedStates::Disk(Box::new(disk)),
            Err(e) => {
                self.shared.fail(e);
                KeyedStates::Memory(Default::default())
            }
        }
    }

    fn restore_source<T>(&self, reader: &mut dyn SourceReader<T>) -> SpateResult<()> {
        let Some(rt) = self.shared.checkpoints.as_ref() else {
            return Ok(());
        };
        match rt.restored_positions(&self.uid, self.index() == 0)? {
            Some(positions) => reader.restore(&positions),
            None => Ok(()),
        }
    }

    /// Adds a source: creates this worker's reader and the input that feeds its records.
    pub(crate) fn add_source<T: spate_types::Data>(
        &mut self,
        name: &str,
        source: &Arc<dyn Source<T>>,
        strategy: Option<WatermarkStrategy<T>>,
        shed_sink: Option<Arc<dyn Sink<T>>>,
    ) -> Flow<'s, T> {
        let ctx = SourceContext {
            worker_index: self.index(),
            workers: self.peers(),
        };
        let reader = match source
            .create_reader(&ctx)
            .and_then(|mut reader| self.restore_source(reader.as_mut()).map(|()| reader))
        {
            Ok(reader) => reader,
            Err(e) => {
                self.shared.fail(e);
                return Flow {
                    data: empty(self.scope),
                    wm: empty(self.scope),
                };
            }
        };
        let mut input = InputHandleVec::<Epoch, (Timestamp, T)>::new();
        let stream = input.to_stream(self.scope);
        let mut wm_input = InputHandleVec::<Epoch, WmMsg>::new();
        let wm_stream = wm_input.to_stream(self.scope);
        let dead_letters = match source.dead_letter_sink() {
            Some(sink) => {
                let mut dl_input = InputHandleVec::<Epoch, (Timestamp, DeadLetter)>::new();
                let dl_stream = dl_input.to_stream(self.scope);
                let id = format!("{}.dead-letters", self.uid);
                let input = SinkInput::Single(dl_stream);
                self.add_sink_as(&format!("{name}.dead-letters"), &id, input, &sink);
                Some(dl_input)
            }
            None => None,
        };
        // The records shed here go to the source's shed sink, if it has one.
        let shed_input = shed_sink.map(|sink| {
            let mut shed_input = InputHandleVec::<Epoch, (Timestamp, T)>::new();
            let shed = Flow {
                data: shed_input.to_stream(self.scope),
                wm: wm_stream.clone(),
            };
            let id = format!("{}.shed", self.uid);
            let input = SinkInput::Forward(Chain::of(shed));
            self.add_sink_as(&format!("{name}.shed"), &id, input, &sink);
            shed_input
        });
        let records_out = self
            .shared
            .metrics
            .counter(&format!("{name}.numRecordsOut"));
        self.drivers.push(Box::new(TypedDriver {
            name: name.to_owned(),
            uid: self.uid.clone(),
            reader,
            input: Some(input),
            wm_input: Some(wm_input),
            finished: false,
            watermarks: strategy
                .map(|s| SourceWatermarks::new(s, self.shared.config.auto_watermark_interval)),
            marks: Vec::new(),
            stamped: Vec::new(),
            dead_letter_input: dead_letters,
            shed_input,
            buffer: Vec::new(),
            dead_letters: Vec::new(),
            dropped: 0,
            emitted: 0,
            dead_lettered: 0,
            records_out,
            cells: self.cells(),
            last_progress: (0, 0),
            checkpointed: VecDeque::new(),
            shed: self.shared.shedding.clone().map(|control| {
                let seed = (self.index() as u64) << 32 | self.node as u64;
                (
                    control,
                    spate_elasticity::shedding::RandomDropper::new(seed),
                    self.node,
                )
            }),
        }));
        Flow {
            data: stream,
            wm: wm_stream,
        }
    }

    /// Adds a sink: each worker writes what reaches it; with `single`, every record goes to
    /// global worker 0 first (for outputs that must be one file).
    pub(crate) fn add_sink<T: spate_types::Data>(
        &mut self,
        name: &str,
        input: SinkInput<'s, T>,
        sink: &Arc<dyn Sink<T>>,
    ) {
        let id = self.uid.clone();
        self.add_sink_as(name, &id, input, sink);
    }

    /// [`add_sink`](Self::add_sink) with the state id `id`.
    fn add_sink_as<T: spate_types::Data>(
        &mut self,
        name: &str,
        id: &str,
        input: SinkInput<'s, T>,
        sink: &Arc<dyn Sink<T>>,
    ) {
        let ctx = SinkContext {
            worker_index: self.index(),
            workers: self.peers(),
        };
        let restored = self.restored_parts_as(id);
        let writer = match sink.create_writer(&ctx).and_then(|mut w| {
            if !restored.is_empty() {
                let states: Vec<Vec<u8>> = restored.iter().map(|b| b.to_vec()).collect();
                w.restore(&states)?;
            }
            Ok(w)
        }) {
            Ok(w) => Some(w),
            Err(e) => {
                self.shared.fail(e);
                None
            }
        };
        let (cells, latency) = if id == self.uid {
            (self.cells(), Some(self.latency_probe()))
        } else {
            (Cells::detached(), None)
        };
        let mut state = SinkState {
            cells,
            latency,
            name: name.to_owned(),
            writer,
            scratch: Vec::new(),
            shared: Arc::clone(&self.shared),
            records_in: self.shared.metrics.counter(&format!("{name}.numRecordsIn")),
            cuts: Cuts::new(self.stateful_as(id)),
            committed: 0,
            since_cut: 0,
        };
        let scope = self.scope;
        // The sink has an (empty) output so that a probe on it sees an epoch complete only
        // once the sink has consumed it.
        let done: timely::dataflow::StreamVec<'s, Epoch, ()> = match input {
            SinkInput::Single(stream) => stream
                .unary_frontier::<CapacityContainerBuilder<Vec<()>>, _, _, _>(
                    Exchange::new(|_: &(Timestamp, T)| 0u64),
                    name,
                    move |_, info| {
                        let activator = scope.activator_for(Rc::clone(&info.address));
                        move |(input, frontier), _output| {
                            state.guarded(|state| {
                                input.for_each(|cap, batch| {
                                    let epoch = cap.least().copied().unwrap_or(0);
                                    state.receive(epoch, batch);
                                });
                                state.step(frontier, &activator);
                            });
                        }
                    },
                ),
            SinkInput::Forward(chain) => {
                // The sink runs the chain of forward operators before it, if any.
                let mut builder = OperatorBuilder::new(chain.name_with(name), scope);
                let info = builder.operator_info();
                let mut pull = chain.attach(&mut builder);
                let (_output, done) = builder.new_output::<Vec<()>>();
                builder.build(move |_capabilities| {
                    let activator = scope.activator_for(Rc::clone(&info.address));
                    move |frontiers| {
                        state.guarded(|state| {
                            pull(&frontiers[0].frontier(), &mut |cap, batch| {
                                let epoch = cap.least().copied().unwrap_or(0);
                                state.receive(epoch, batch);
                            });
                            state.step(&frontiers[0], &activator);
                        });
                    }
                });
                done
            }
        };
        done.probe_with(&self.probe);
    }
}

/// What a sink reads: a stream that all workers send to worker 0, or a chain of this worker's
/// forward operators (maybe none) that the sink's operator runs first.
pub(crate) enum SinkInput<'s, T> {
    Single(TStream<'s, T>),
    Forward(Chain<'s, T>),
}

/// One worker's sink writer inside its operator.
struct SinkState<T> {
    cells: Arc<Cells>,
    latency: Option<LatencyProbe>,
    name: String,
    writer: Option<Box<dyn SinkWriter<T>>>,
    scratch: Vec<T>,
    shared: Arc<JobShared>,
    records_in: Arc<AtomicU64>,
    /// With checkpoints: the cuts (and the records held past the next one), what is published.
    cuts: Cuts<Epoch, Vec<(Timestamp, T)>>,
    committed: u64,
    /// Records written since the last cut: with checkpoints, none by the end (the final
    /// checkpoint comes after the end of the input has been processed everywhere).
    since_cut: u64,
}

impl<T> SinkState<T> {
    /// Runs `f` (which calls the sink's writer); a panic in it fails the job with the sink's
    /// name, and the writer is dropped.
    fn guarded(&mut self, f: impl FnOnce(&mut Self)) {
        let shared = Arc::clone(&self.shared);
        let name = std::mem::take(&mut self.name);
        if crate::function::guard(&shared, &name, || f(self)).is_none() {
            self.writer = None;
        }
        self.name = name;
    }

    /// Writes records, or holds them if they come after a cut not yet taken.
    fn receive(&mut self, epoch: Epoch, data: &mut Vec<(Timestamp, T)>) {
        if self.cuts.holds(epoch) {
            self.cuts.hold(epoch, std::mem::take(data));
        } else {
            self.write(data);
        }
    }

    /// Takes every cut the input has passed: prepares the writer's output for it (first
    /// phase of the commit), then writes what was held for the next interval.
    fn cut(&mut self, frontier: &timely::progress::frontier::MutableAntichain<Epoch>) {
        while self.cuts.due(frontier) {
            let prepared = match self.writer.as_mut() {
                Some(w) => w.pre_commit(self.cuts.next()),
                None => Ok(Vec::new()),
            };
            match prepared {
                Ok(bytes) => {
                    self.since_cut = 0;
                    for (_, mut records) in self.cuts.taken(Some(bytes)) {
                        self.write_counted(&mut records);
                    }
                }
                Err(e) => {
                    self.shared.fail(e);
                    self.writer = None;
                    return;
                }
            }
        }
        for (_, mut records) in self.cuts.released() {
            self.write_counted(&mut records);
        }
    }

    /// After the records of an activation: cuts, publishing, time-based rolling, the end.
    fn step(
        &mut self,
        frontier: &timely::progress::frontier::MutableAntichain<Epoch>,
        activator: &timely::scheduling::Activator,
    ) {
        let start = Instant::now();
        if let Some(l) = self.latency.as_mut() {
            l.observe(&frontier.frontier());
        }
        self.step_inner(frontier, activator);
        self.cells.add_busy(start.elapsed().as_nanos() as u64);
    }

    fn step_inner(
        &mut self,
        frontier: &timely::progress::frontier::MutableAntichain<Epoch>,
        activator: &timely::scheduling::Activator,
    ) {
        self.cut(frontier);
        if self.publish() {
            activator.activate_after(Duration::from_millis(20));
        }
        self.after(frontier.is_empty());
    }

    /// Publishes what completed checkpoints cover; `true` while something prepared waits.
    fn publish(&mut self) -> bool {
        let Some(handle) = self.cuts.handle() else {
            return false;
        };
        let completed = handle.completed();
        if completed > self.committed {
            if let Some(w) = self.writer.as_mut() {
                if let Err(e) = w.commit(completed) {
                    self.shared.fail(e);
                    self.writer = None;
                }
            }
            self.committed = completed;
        }
        self.cuts.next() - 1 > self.committed
    }

    fn write(&mut self, data: &mut Vec<(Timestamp, T)>) {
        let start = Instant::now();
        self.write_counted(data);
        self.cells.add_busy(start.elapsed().as_nanos() as u64);
    }

    /// Counts and writes, untimed (inside a timed step).
    fn write_counted(&mut self, data: &mut Vec<(Timestamp, T)>) {
        self.since_cut += data.len() as u64;
        self.records_in
            .fetch_add(data.len() as u64, Ordering::Relaxed);
        self.cells.count_in(data.len());
        self.write_inner(data);
    }

    fn write_inner(&mut self, data: &mut Vec<(Timestamp, T)>) {
        if let Some(w) = self.writer.as_mut() {
            self.scratch.extend(data.drain(..).map(|(_, x)| x));
            if let Err(e) = w.write_batch(&mut self.scratch) {
                self.shared.fail(e);
                self.writer = None;
            }
            self.scratch.clear();
        }
        data.clear();
    }

    /// Ticks the writer after a batch of work, or closes it when its input has ended.
    fn after(&mut self, input_ended: bool) {
        if let Some(w) = self.writer.as_mut() {
            if input_ended && self.cuts.handle().is_some() && self.since_cut > 0 {
                tracing::warn!(
                    sink = %self.name,
                    records = self.since_cut,
                    "records reached the sink after the final checkpoint's cut"
                );
            }
            let result = if input_ended {
                w.close()
            } else {
                w.tick(Instant::now())
            };
            if let Err(e) = result {
                self.shared.fail(e);
            }
            if input_ended || self.shared.aborted() {
                self.writer = None;
            }
        }
    }
}

/// A source as the worker loop sees it, with its record type hidden.
pub(crate) trait SourceDriver {
    /// Polls the reader for up to `budget` records and sends them at the current epoch.
    fn poll(&mut self, budget: usize, shared: &JobShared) -> SpateResult<(usize, SourceStatus)>;
    /// Emits a watermark if one is due.
    fn tick(&mut self, now: Instant);
    /// Moves the source's inputs to `epoch`.
    fn advance_to(&mut self, epoch: Epoch);
    /// The source has ended by itself: emits the final watermark, and closes its inputs
    /// (`close`) or keeps them open for a final checkpoint.
    fn finish(&mut self, close: bool);
    /// Stops reading for a clean stop with checkpoints: no final watermark, inputs kept open.
    fn stop(&mut self);
    /// Closes the source's inputs; the driver is done.
    fn close(&mut self);
    /// Whether the source reads no more (finished, stopped or closed).
    fn is_finished(&self) -> bool;
    /// The reader's split positions for checkpoint `c`, if it can replay: `(source name,
    /// positions)`.
    fn positions(&mut self, c: u64) -> Option<(String, Vec<spate_types::SplitPosition>)>;
    /// Checkpoint `c` (and every one before) completed everywhere: tells the reader.
    fn checkpoint_complete(&mut self, c: u64) -> SpateResult<()>;
    /// `(name, emitted, dropped, dead-lettered)` so far.
    fn stats(&self) -> (&str, u64, u64, u64);
    /// The source instance's live metric cells.
    fn cells(&self) -> &Arc<Cells>;
    /// Updates `pendingRecords` from the reader without polling it.
    fn refresh_pending(&self);
}

struct TypedDriver<T: spate_types::Data> {
    name: String,
    /// The source's state id: its positions are checkpointed under it.
    uid: String,
    reader: Box<dyn SourceReader<T>>,
    input: Option<InputHandleVec<Epoch, (Timestamp, T)>>,
    wm_input: Option<InputHandleVec<Epoch, WmMsg>>,
    /// Reads no more; the inputs may stay open for a final checkpoint.
    finished: bool,
    watermarks: Option<SourceWatermarks<T>>,
    marks: Vec<SplitMark>,
    stamped: Vec<(Timestamp, T)>,
    dead_letter_input: Option<InputHandleVec<Epoch, (Timestamp, DeadLetter)>>,
    /// Where the records shed here go, when the source has a shed sink.
    shed_input: Option<InputHandleVec<Epoch, (Timestamp, T)>>,
    buffer: Vec<T>,
    dead_letters: Vec<DeadLetter>,
    dropped: u64,
    emitted: u64,
    dead_lettered: u64,
    records_out: Arc<AtomicU64>,
    cells: Arc<Cells>,
    last_progress: (u64, u64),
    /// The positions of checkpoints not yet complete, oldest first.
    checkpointed: VecDeque<(u64, Vec<spate_types::SplitPosition>)>,
    /// Load shedding at this source: the fractions, a dropper, this node.
    shed: Option<(
        Arc<crate::shedding::ShedControl>,
        spate_elasticity::shedding::RandomDropper,
        usize,
    )>,
}

impl<T: spate_types::Data> TypedDriver<T> {
    /// Sets `pendingRecords`: the reader's backlog, else `total − done` of its `progress`
    /// (read once per poll by the caller).
    fn store_pending(&self, progress: Option<(u64, u64)>) {
        let pending = self.reader.backlog().or_else(|| {
            progress
                .filter(|&(_, total)| total > 0)
                .map(|(done, total)| total.saturating_sub(done))
        });
        if let Some(pending) = pending {
            self.cells.pending.store(pending, Ordering::Relaxed);
        }
    }
}

impl<T: spate_types::Data> SourceDriver for TypedDriver<T> {
    fn poll(&mut self, budget: usize, shared: &JobShared) -> SpateResult<(usize, SourceStatus)> {
        let Some(input) = self.input.as_mut() else {
            return Ok((0, SourceStatus::Finished));
        };
        let status = {
            let out =
                SourceOutput::new(&mut self.buffer, &mut self.dead_letters, &mut self.dropped);
            let mut out = if self.watermarks.is_some() {
                out.with_splits(&mut self.marks)
            } else {
                out
            };
            self.reader.poll(&mut out, budget)?
        };
        let n = self.buffer.len();
        match self.watermarks.as_mut() {
            Some(wms) => wms.assign(
                &mut self.buffer,
                &mut self.marks,
                &mut self.stamped,
                Instant::now(),
            ),
            None => self
                .stamped
                .extend(self.buffer.drain(..).map(|x| (NO_TIMESTAMP, x))),
        }
        if n > 0 {
            self.emitted += n as u64;
            self.records_out.fetch_add(n as u64, Ordering::Relaxed);
            // Load shedding drops here, after the timestamps (the watermarks count every
            // record read), and counts what it dropped.
            if let Some((control, dropper, node)) = self.shed.as_mut() {
                let fraction = control.fraction(*node);
                if fraction > 0.0 {
                    dropper.set_fraction(fraction);
                    match self.shed_input.as_mut() {
                        Some(side) => {
                            let (kept, mut shed): (Vec<_>, Vec<_>) =
                                self.stamped.drain(..).partition(|_| dropper.keep());
                            self.stamped = kept;
                            crate::metrics::add(&self.cells.shed, shed.len() as u64);
                            if !shed.is_empty() {
                                side.send_batch(&mut shed);
                            }
                        }
                        None => {
                            self.stamped.retain(|_| dropper.keep());
                            let shed = n - self.stamped.len();
                            crate::metrics::add(&self.cells.shed, shed as u64);
                        }
                    }
                }
            }
            self.cells.count_out(self.stamped.len());
            input.send_batch(&mut self.stamped);
            self.stamped.clear();
        }
        self.cells.dropped.store(self.dropped, Ordering::Relaxed);
        if !self.dead_letters.is_empty() {
            self.dead_lettered += self.dead_letters.len() as u64;
            self.cells
                .dead_lettered
                .store(self.dead_lettered, Ordering::Relaxed);
            match self.dead_letter_input.as_mut() {
                Some(dl) => {
                    let mut stamped: Vec<(Timestamp, DeadLetter)> = self
                        .dead_letters
                        .drain(..)
                        .map(|d| (NO_TIMESTAMP, d))
                        .collect();
                    dl.send_batch(&mut stamped)
                }
                None => {
                    return Err(SpateError::Internal(format!(
                        "source {} produced dead letters but has no dead-letter sink",
                        self.name
                    )))
                }
            }
            self.dead_letters.clear();
        }
        let progress = self.reader.progress();
        if let Some((done, total)) = progress {
            let (last_done, last_total) = self.last_progress;
            shared
                .progress
                .done
                .fetch_add(done.saturating_sub(last_done), Ordering::Relaxed);
            shared
                .progress
                .total
                .fetch_add(total.saturating_sub(last_total), Ordering::Relaxed);
            self.last_progress = (done.max(last_done), total.max(last_total));
        }
        self.store_pending(progress);
        Ok((n, status))
    }

    fn refresh_pending(&self) {
        self.store_pending(self.reader.progress());
    }

    fn tick(&mut self, now: Instant) {
        if let (Some(wms), Some(wm_input)) = (self.watermarks.as_mut(), self.wm_input.as_mut()) {
            if let Some(msg) = wms.tick(now) {
                if !msg.idle {
                    self.cells.output_wm.store(msg.wm, Ordering::Relaxed);
                }
                wm_input.send(msg);
            }
        }
    }

    fn finish(&mut self, close: bool) {
        if let Some(wm_input) = self.wm_input.as_mut() {
            self.cells.output_wm.store(MAX_WATERMARK, Ordering::Relaxed);
            wm_input.send(WmMsg {
                slot: 0,
                wm: MAX_WATERMARK,
                idle: false,
            });
        }
        self.finished = true;
        if close {
            self.close();
        }
    }

    fn stop(&mut self) {
        self.finished = true;
    }

    fn positions(&mut self, c: u64) -> Option<(String, Vec<spate_types::SplitPosition>)> {
        let positions = self.reader.snapshot()?;
        // Kept until the checkpoint completes (or a later one does), for the reader's
        // `checkpoint_complete`; as many as checkpoints in flight.
        self.checkpointed.push_back((c, positions.clone()));
        Some((self.uid.clone(), positions))
    }

    fn checkpoint_complete(&mut self, c: u64) -> SpateResult<()> {
        let mut latest = None;
        while self.checkpointed.front().is_some_and(|(at, _)| *at <= c) {
            latest = self.checkpointed.pop_front();
        }
        match latest {
            Some((_, positions)) => self.reader.checkpoint_complete(&positions),
            None => Ok(()),
        }
    }

    fn advance_to(&mut self, epoch: Epoch) {
        if let Some(input) = self.input.as_mut() {
            input.advance_to(epoch);
        }
        if let Some(wm) = self.wm_input.as_mut() {
            wm.advance_to(epoch);
        }
        if let Some(dl) = self.dead_letter_input.as_mut() {
            dl.advance_to(epoch);
        }
        if let Some(shed) = self.shed_input.as_mut() {
            shed.advance_to(epoch);
        }
    }

    fn close(&mut self) {
        self.input = None;
        self.wm_input = None;
        self.dead_letter_input = None;
        self.shed_input = None;
    }

    fn is_finished(&self) -> bool {
        self.finished || self.input.is_none()
    }

    fn stats(&self) -> (&str, u64, u64, u64) {
        (&self.name, self.emitted, self.dropped, self.dead_lettered)
    }

    fn cells(&self) -> &Arc<Cells> {
        &self.cells
    }
}

/// Steps the worker, or parks it for up to a millisecond when it has nothing to do; the time
/// not spent in Spate's operators counts as the worker's idle time.
fn step_or_park_timed(worker: &mut timely::worker::Worker, cells: &crate::metrics::WorkerCells) {
    let busy_before = cells.busy_ns.load(Ordering::Relaxed);
    let start = Instant::now();
    worker.step_or_park(Some(Duration::from_millis(1)));
    let spent = start.elapsed().as_nanos() as u64;
    let busy = cells
        .busy_ns
        .load(Ordering::Relaxed)
        .wrapping_sub(busy_before);
    add(&cells.idle_ns, spent.saturating_sub(busy));
}

/// Builds the plan on one worker and runs it to completion, failure or stop.
pub(crate) fn run_worker(
    worker: &mut timely::worker::Worker,
    plan: &Plan,
    job_name: &str,
    shared: Arc<JobShared>,
) {
    let probe = ProbeHandle::new();
    let totals_out: Rc<RefCell<Vec<(String, u64)>>> = Rc::new(RefCell::new(Vec::new()));
    let snapshots: SharedSnapshots = Rc::new(RefCell::new(WorkerSnapshots::default()));
    let inbox: Rc<RefCell<Vec<Report>>> = Rc::new(RefCell::new(Vec::new()));
    let dataflow_index = worker.next_dataflow_index();
    let seals: Seals = Rc::new(RefCell::new(VecDeque::new()));
    let worker_cells = shared.live.worker(worker.index());
    let (mut drivers, mut stats_input, control) = worker.dataflow_named(job_name, |scope| {
        let mut ctx = BuildCtx {
            scope,
            shared: Arc::clone(&shared),
            drivers: Vec::new(),
            probe: probe.clone(),
            snapshots: Rc::clone(&snapshots),
            uid: String::new(),
            job: job_name.to_owned(),
            chained: false,
            sides: Vec::new(),
            node: 0,
            skip_input_count: false,
            seals: Rc::clone(&seals),
        };
        let uids = plan.state_ids().expect("execute checks the uids first");
        let heads = plan.chain_heads();
        let mut side_ports = plan.side_ports();
        let mut streams: Vec<Option<ErasedStream>> = Vec::with_capacity(plan.nodes.len());
        for node in &plan.nodes {
            let inputs: Vec<&ErasedStream> = node
                .inputs
                .iter()
                .map(|&i| {
                    streams[i]
                        .as_ref()
                        .expect("plan inputs are streams, never sinks")
                })
                .collect();
            let id = streams.len();
            ctx.node = id;
            ctx.skip_input_count = false;
            ctx.uid.clone_from(&uids[id]);
            ctx.chained = heads[id] != id;
            ctx.sides = std::mem::take(&mut side_ports[id]);
            let out = (node.builder)(&mut ctx, &inputs, &node.name);
            streams.push(out);
        }
        for stream in streams.iter().flatten() {
            stream.build_pending(scope);
        }
        drop(streams);
        // The number of timely operators the plan's nodes built on this worker: operators of a
        // scope are numbered in the order they are made, from 1, so an empty marker operator
        // made now (it stops at once) is numbered one more than that.
        let marker = OperatorBuilder::new("spate.operators".to_owned(), scope);
        if scope.index() == 0 {
            shared
                .operators
                .store(marker.index() - 1, Ordering::Relaxed);
        }
        marker.build(|_| |_| {});
        // Source-side totals (records, drops, dead letters) travel to global worker 0 through
        // the dataflow itself, so they are exact over all processes.
        let mut stats_input = InputHandleVec::<Epoch, (String, u64)>::new();
        let totals = Rc::clone(&totals_out);
        stats_input.to_stream(scope).sink(
            Exchange::new(|_: &(String, u64)| 0u64),
            "spate.totals",
            move |(input, _frontier)| {
                input.for_each(|_cap, data| totals.borrow_mut().extend(data.drain(..)));
            },
        );
        // Checkpoint control: process reports to worker 0, completions from it to everyone.
        let control = shared.checkpoints.as_ref().map(|_| {
            let mut reports = InputHandleVec::<Epoch, Report>::new();
            let inbox = Rc::clone(&inbox);
            reports.to_stream(scope).sink(
                Exchange::new(|_: &Report| 0u64),
                "spate.checkpoint.reports",
                move |(input, _frontier)| {
                    input.for_each(|_cap, data| inbox.borrow_mut().extend(data.drain(..)));
                },
            );
            let mut announce = InputHandleVec::<Epoch, u64>::new();
            let seen = Rc::clone(&snapshots);
            announce.to_stream(scope).broadcast().sink(
                Pipeline,
                "spate.checkpoint.completions",
                move |(input, _frontier)| {
                    input.for_each(|_cap, data| {
                        for c in data.drain(..) {
                            note_completed(&seen, c);
                        }
                    });
                },
            );
            (reports, announce)
        });
        (ctx.drivers, Some(stats_input), control)
    });
    let mut checkpointer = match (control, shared.checkpoints.as_ref()) {
        (Some((reports, announce)), Some(rt)) => Some(WorkerCheckpointer::new(
            Arc::clone(rt),
            Rc::clone(&snapshots),
            worker.index(),
            worker.peers(),
            shared.config.processes,
            reports,
            Rc::clone(&inbox),
            announce,
        )),
        _ => None,
    };

    let cfg = &shared.config;
    let k = cfg.max_epochs_in_flight as usize;
    let mut epoch: Epoch = 0;
    // This worker's epochs that may still be incomplete somewhere downstream (flow control).
    let mut in_flight: VecDeque<Epoch> = VecDeque::from([0]);
    let clock = EpochClock::new(cfg.checkpoint_interval);
    let mut epoch_started = Instant::now();
    let mut emitted_in_epoch = 0usize;
    let mut stopping = false;
    // With checkpoints, finished sources keep their inputs open (and keep crossing boundaries)
    // until every worker's sources have finished and a checkpoint taken after the last of them
    // has completed everywhere: the final checkpoint, which sinks publish. A worker that left
    // earlier would take no part in the checkpoints the others still need.
    let mut final_checkpoint: Option<u64> = None;
    // Per source: whether it had more to give at its last poll (for backpressure).
    let mut wants: Vec<bool> = vec![true; drivers.len()];
    let mut last_iteration = Instant::now();

    // The latest completed checkpoint the sources were told of.
    let mut notified = 0;
    loop {
        if shared.aborted() {
            worker.drop_dataflow(dataflow_index);
            return;
        }
        if !stopping && shared.stop_requested() {
            // A clean stop: close every source, then drain like a bounded job.
            stopping = true;
            let drain = shared
                .observer
                .as_ref()
                .is_some_and(|o| o.drain_requested());
            for d in drivers.iter_mut() {
                if checkpointer.is_some() && drain {
                    // Stop with drain: the final watermark fires every window and timer
                    // before the final checkpoint.
                    if !d.is_finished() {
                        d.finish(false);
                    }
                } else if checkpointer.is_some() {
                    d.stop();
                } else {
                    d.close();
                }
            }
        }
        let frontier = probe.with_frontier(|f| f.first().copied());
        if let Some(f) = frontier {
            while in_flight.len() > 1 && in_flight.front().is_some_and(|&e| e < f) {
                in_flight.pop_front();
            }
        }
        let may_emit = in_flight.len() <= k;
        let mut has_more = false;
        let iteration = Instant::now();
        let held_back = iteration
            .saturating_duration_since(last_iteration)
            .as_nanos() as u64;
        last_iteration = iteration;
        worker_cells
            .epochs_in_flight
            .store(in_flight.len() as u64, Ordering::Relaxed);
        for (d, wants) in drivers.iter().zip(&wants) {
            // Backpressured: the source had more to give, but flow control holds it back.
            let held = !may_emit && *wants && !d.is_finished();
            let cells = d.cells();
            if held {
                add(&cells.backpressured_ns, held_back);
            }
            if !may_emit && !d.is_finished() {
                // What the source has waiting keeps growing while it is held back.
                d.refresh_pending();
            }
            if cells.backpressured.load(Ordering::Relaxed) != held {
                cells.backpressured.store(held, Ordering::Relaxed);
            }
        }
        if may_emit {
            for (d, wants) in drivers
                .iter_mut()
                .zip(wants.iter_mut())
                .filter(|(d, _)| !d.is_finished())
            {
                let budget = cfg
                    .epoch_max_records
                    .saturating_sub(emitted_in_epoch)
                    .clamp(1, cfg.poll_batch);
                let started = Instant::now();
                let polled = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    d.poll(budget, &shared)
                }))
                .unwrap_or_else(|payload| {
                    Err(crate::function::panicked(d.stats().0, payload.as_ref()))
                });
                d.cells().add_busy(started.elapsed().as_nanos() as u64);
                match polled {
                    Ok((n, status)) => {
                        emitted_in_epoch += n;
                        *wants = matches!(status, SourceStatus::More);
                        match status {
                            SourceStatus::More => has_more = true,
                            SourceStatus::Idle => {}
                            SourceStatus::Finished => d.finish(checkpointer.is_none()),
                        }
                    }
                    Err(e) => {
                        shared.fail(e);
                        worker.drop_dataflow(dataflow_index);
                        return;
                    }
                }
            }
        }
        if let Some(cp) = checkpointer.as_mut() {
            if let Err(e) = cp.step() {
                shared.fail(e);
                worker.drop_dataflow(dataflow_index);
                return;
            }
            let completed = snapshots.borrow().completed;
            if completed > notified {
                notified = completed;
                for d in drivers.iter_mut() {
                    if let Err(e) = d.checkpoint_complete(completed) {
                        shared.fail(e);
                        worker.drop_dataflow(dataflow_index);
                        return;
                    }
                }
            }
        }
        if drivers.iter().all(|d| d.is_finished()) {
            match (checkpointer.as_ref(), final_checkpoint) {
                (None, _) => break,
                (Some(cp), Some(_)) if cp.job_finished() => break,
                _ => {}
            }
        }
        let now = Instant::now();
        for d in drivers.iter_mut().filter(|d| !d.is_finished()) {
            d.tick(now);
        }
        let mut boundary_due = clock.boundary_due(epoch, now);
        if checkpointer.is_some()
            && final_checkpoint.is_none()
            && drivers.iter().all(|d| d.is_finished())
        {
            // Every source is done: cut a final checkpoint right away.
            let b = boundary(interval_of(epoch) + 1);
            final_checkpoint = Some(interval_of(b));
            if let Some(cp) = checkpointer.as_mut() {
                cp.sources_finished(interval_of(b));
            }
            boundary_due = Some(b);
        }
        // A worker that flow control holds back stays in its epoch (but for a checkpoint
        // boundary): it sent nothing since it was held, and each epoch it added would be one
        // more for the frontier to pass before it may send again. A worker that is ahead of
        // the others would so stay held for as long as they keep advancing.
        if boundary_due.is_some()
            || (may_emit
                && (emitted_in_epoch >= cfg.epoch_max_records
                    || now - epoch_started >= cfg.epoch_interval))
        {
            let next = match boundary_due {
                // A checkpoint boundary: every worker moves to it at about the same time.
                Some(b) => b,
                None if has_more => epoch + 1,
                // Nothing to give: move as far as flow control allows, so that this worker's
                // inputs never hold back the frontier that busy workers wait on; never past
                // the next checkpoint boundary, which only the clock crosses.
                None => (epoch + 1)
                    .max(frontier.map_or(epoch + 1, |f| f + k as u64 - 1))
                    .min(clock.next_boundary(epoch).saturating_sub(1))
                    .max(epoch + 1),
            };
            if checkpointer.is_some() {
                // Source positions at each boundary crossed: after every record sent so far.
                let mut s = snapshots.borrow_mut();
                for c in interval_of(epoch) + 1..=interval_of(next) {
                    let positions = drivers.iter_mut().filter_map(|d| d.positions(c)).collect();
                    s.sources.insert(c, positions);
                }
                s.crossed = s.crossed.max(interval_of(next));
            }
            for d in drivers.iter_mut() {
                d.advance_to(next);
            }
            if let Some(stats) = stats_input.as_mut() {
                stats.advance_to(next);
            }
            if let Some(cp) = checkpointer.as_mut() {
                cp.advance_to(next);
            }
            {
                let mut seals = seals.borrow_mut();
                seals.push_back((epoch, now));
                if seals.len() > SEALS_KEPT {
                    seals.pop_front();
                }
            }
            epoch = next;
            in_flight.push_back(next);
            emitted_in_epoch = 0;
            epoch_started = now;
        }
        if has_more && may_emit {
            worker.step();
        } else {
            step_or_park_timed(worker, &worker_cells);
        }
    }

    // All sources are done: report their totals, close the last input, and drain.
    if let Some(mut stats) = stats_input.take() {
        for d in &drivers {
            let (name, emitted, dropped, dead) = d.stats();
            stats.send((format!("{name}.numRecordsOut"), emitted));
            stats.send((format!("{name}.numRecordsDropped"), dropped));
            stats.send((format!("{name}.numRecordsDeadLettered"), dead));
        }
    }
    drop(drivers);
    if let Some(cp) = checkpointer.as_mut() {
        cp.finish();
    }
    while worker.has_dataflows() {
        if shared.aborted() {
            worker.drop_dataflow(dataflow_index);
            return;
        }
        if let Some(cp) = checkpointer.as_mut() {
            if let Err(e) = cp.step() {
                shared.fail(e);
                worker.drop_dataflow(dataflow_index);
                return;
            }
            if cp.done() {
                checkpointer = None;
            }
        }
        step_or_park_timed(worker, &worker_cells);
    }
    let mut totals = shared.totals.lock().unwrap_or_else(|p| p.into_inner());
    for (name, value) in totals_out.borrow_mut().drain(..) {
        *totals.entry(name).or_insert(0) += value;
    }
}
