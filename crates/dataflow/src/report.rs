//! The view of a multi-process job: its processes report to the supervisor, which serves the
//! merged view and forwards control to them.
//!
//! The supervisor listens on a loopback port ([`Hub`]) and passes its address to every
//! process it starts (`SPATE_CONTROL_ADDR`, with the job's id in `SPATE_JOB_ID`). Each
//! process connects ([`report_to_supervisor`]) and sends, as JSON lines, its own snapshot
//! (its workers' subtasks, its workers, itself; process 0's also the checkpoints) with the
//! status of the operations it runs, once a second and when it ends. The supervisor sends
//! control lines back: cancel, stop with savepoint (to every process: each stops its
//! sources; process 0 writes the savepoint), savepoint (to process 0, which coordinates
//! checkpoints).
//!
//! The supervisor's [`SupervisorView`] merges the latest snapshot of each process with its own
//! job-scope record (state, restarts, exceptions): process 0 gives the checkpoints.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use spate_metrics::{ControlError, JobSnapshot, JobView, Operation, OperationId, OperationStatus};
use spate_types::{SpateError, SpateResult};

use crate::view::{Observer, StopRequest};

/// The environment variable with the supervisor's control address.
pub(crate) const ENV_CONTROL_ADDR: &str = "SPATE_CONTROL_ADDR";
/// The environment variable with the job's id, the same in every process.
pub(crate) const ENV_JOB_ID: &str = "SPATE_JOB_ID";

/// What a process sends the supervisor.
#[derive(Debug, Serialize, Deserialize)]
struct Report {
    process: usize,
    snapshot: JobSnapshot,
    operations: BTreeMap<OperationId, OperationStatus>,
}

/// What the supervisor sends a process.
#[derive(Debug, Clone, Serialize, Deserialize)]
enum Control {
    Cancel,
    Stop {
        target: String,
        drain: bool,
        operation: OperationId,
    },
    Savepoint {
        target: String,
        cancel_job: bool,
        operation: OperationId,
    },
}

/// The supervisor's end: the latest report of each process, and a line to each.
#[derive(Default)]
pub(crate) struct Hub {
    reports: Mutex<BTreeMap<usize, Report>>,
    writers: Mutex<BTreeMap<usize, TcpStream>>,
    /// Control sent before a process connected, sent when it does.
    pending: Mutex<Vec<Control>>,
    /// Processes whose connection has ended (after their last report).
    ended: Mutex<std::collections::BTreeSet<usize>>,
    address: String,
}

impl Hub {
    /// Listens on a free loopback port and accepts processes until the supervisor ends.
    pub(crate) fn start() -> SpateResult<Arc<Hub>> {
        let listener = TcpListener::bind("127.0.0.1:0")
            .map_err(|e| SpateError::io_context("cannot listen for the processes' metrics", e))?;
        let address = listener
            .local_addr()
            .map_err(|e| SpateError::io_context("cannot read the metrics port", e))?
            .to_string();
        let hub = Arc::new(Hub {
            address,
            ..Hub::default()
        });
        let weak = Arc::downgrade(&hub);
        let _ = std::thread::Builder::new()
            .name("spate-hub".into())
            .spawn(move || {
                for stream in listener.incoming() {
                    let Ok(stream) = stream else { continue };
                    let Some(hub) = weak.upgrade() else { return };
                    let _ = std::thread::Builder::new()
                        .name("spate-hub-reader".into())
                        .spawn(move || hub.read(stream));
                }
            });
        Ok(hub)
    }

    /// The address processes connect to.
    pub(crate) fn address(&self) -> &str {
        &self.address
    }

    fn read(self: Arc<Self>, stream: TcpStream) {
        let Ok(writer) = stream.try_clone() else {
            return;
        };
        let mut registered: Option<usize> = None;
        for line in BufReader::new(stream).lines() {
            let Ok(line) = line else { break };
            let Ok(report) = serde_json::from_str::<Report>(&line) else {
                continue;
            };
            if registered.is_none() {
                registered = Some(report.process);
                let process = report.process;
                // A restarted process reports anew.
                self.ended
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .remove(&process);
                if let Ok(w) = writer.try_clone() {
                    self.writers
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .insert(process, w);
                }
                let pending: Vec<Control> = self
                    .pending
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .clone();
                for c in pending {
                    if process == 0 || !matches!(c, Control::Savepoint { .. }) {
                        self.send_to(process, &c);
                    }
                }
            }
            self.reports
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(report.process, report);
        }
        if let Some(process) = registered {
            self.ended
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(process);
        }
    }

    /// Forgets the processes from index `processes` on: a rescale to fewer processes ended
    /// them, so their last reports are no part of the job any more.
    pub(crate) fn keep_processes(&self, processes: usize) {
        self.reports
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|p, _| *p < processes);
        self.writers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|p, _| *p < processes);
        self.ended
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|p| *p < processes);
    }

    /// Waits (at most `limit`) until every process that connected has sent its last report.
    pub(crate) fn wait_for_last_reports(&self, limit: Duration) {
        let start = std::time::Instant::now();
        while start.elapsed() < limit {
            let connected = self.writers.lock().unwrap_or_else(|p| p.into_inner()).len();
            let ended = self.ended.lock().unwrap_or_else(|p| p.into_inner()).len();
            if ended >= connected {
                return;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    fn send_to(&self, process: usize, control: &Control) {
        let Ok(mut line) = serde_json::to_string(control) else {
            return;
        };
        line.push('\n');
        let mut writers = self.writers.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(w) = writers.get_mut(&process) {
            let _ = w.write_all(line.as_bytes());
        }
    }

    /// Sends `control` to every process (and to those that connect later).
    fn broadcast(&self, control: Control) {
        let processes: Vec<usize> = self
            .writers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .keys()
            .copied()
            .collect();
        for p in processes {
            if p == 0 || !matches!(control, Control::Savepoint { .. }) {
                self.send_to(p, &control);
            }
        }
        self.pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(control);
    }

    /// The latest snapshots of the processes, and the operations they know.
    fn merged(&self) -> (Option<JobSnapshot>, BTreeMap<OperationId, OperationStatus>) {
        let reports = self.reports.lock().unwrap_or_else(|p| p.into_inner());
        let mut ops: BTreeMap<OperationId, OperationStatus> = BTreeMap::new();
        let mut merged: Option<JobSnapshot> = None;
        for report in reports.values() {
            for (id, status) in &report.operations {
                let keep = match ops.get(id) {
                    None | Some(OperationStatus::InProgress) => true,
                    Some(_) => false,
                };
                if keep {
                    ops.insert(id.clone(), status.clone());
                }
            }
            match merged.as_mut() {
                None => merged = Some(report.snapshot.clone()),
                Some(m) => m.merge(report.snapshot.clone()),
            }
        }
        (merged, ops)
    }
}

/// The supervisor's view of a multi-process job.
pub(crate) struct SupervisorView {
    pub(crate) observer: Arc<Observer>,
    pub(crate) hub: Arc<Hub>,
}

impl JobView for SupervisorView {
    fn snapshot(&self) -> JobSnapshot {
        let mut own = self.observer.job_snapshot();
        let (merged, _) = self.hub.merged();
        own.processes.clear();
        if let Some(m) = merged {
            own.subtasks = m.subtasks;
            own.workers = m.workers;
            own.processes = m.processes;
            // Process 0 coordinates checkpoints; restarts and exceptions are the supervisor's.
            own.checkpoints = m.checkpoints;
            // Load shedding runs in the processes (process 0's model is shown); the
            // autoscaler in the supervisor.
            own.shedding = m.shedding;
            for (k, v) in m.metrics {
                if k.contains("heckpoint") || k.contains("Restore") {
                    own.metrics.insert(k, v);
                }
            }
        }
        own
    }

    fn cancel(&self) -> Result<(), ControlError> {
        self.observer.cancel()?;
        self.hub.broadcast(Control::Cancel);
        Ok(())
    }

    fn trigger(&self, operation: Operation) -> Result<OperationId, ControlError> {
        let (id, location) = self.observer.remote_operation(&operation)?;
        match operation {
            Operation::Savepoint { cancel_job, .. } => self.hub.broadcast(Control::Savepoint {
                target: location,
                cancel_job,
                operation: id.clone(),
            }),
            Operation::Stop { drain, .. } => self.hub.broadcast(Control::Stop {
                target: location,
                drain,
                operation: id.clone(),
            }),
        }
        Ok(id)
    }

    fn operation(&self, id: &str) -> Option<OperationStatus> {
        let (_, ops) = self.hub.merged();
        match ops.get(id) {
            Some(s) if *s != OperationStatus::InProgress => Some(s.clone()),
            _ => self.observer.operation(id),
        }
    }
}

/// In a process that a supervisor started: connects to it, reports this process's snapshot
/// once a second (and at the end, see [`Reporter::final_report`]) and obeys its control.
pub(crate) fn report_to_supervisor(observer: &Arc<Observer>, process: usize) -> Option<Reporter> {
    let address = std::env::var(ENV_CONTROL_ADDR).ok()?;
    let stream = TcpStream::connect(&address).ok()?;
    let reader = stream.try_clone().ok()?;
    let reporter = Reporter {
        stream: Arc::new(Mutex::new(stream)),
        observer: Arc::downgrade(observer),
        process,
        done: Arc::new(AtomicBool::new(false)),
    };
    reporter.send();
    let periodic = reporter.clone();
    let _ = std::thread::Builder::new()
        .name("spate-reporter".into())
        .spawn(move || {
            while !periodic.done.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(500));
                if periodic.done.load(Ordering::Relaxed) {
                    return;
                }
                if !periodic.send() {
                    return;
                }
            }
        });
    let weak = Arc::downgrade(observer);
    let _ = std::thread::Builder::new()
        .name("spate-control".into())
        .spawn(move || {
            for line in BufReader::new(reader).lines() {
                let Ok(line) = line else { return };
                let Ok(control) = serde_json::from_str::<Control>(&line) else {
                    continue;
                };
                let Some(o) = weak.upgrade() else { return };
                match control {
                    Control::Cancel => {
                        let _ = o.cancel();
                    }
                    Control::Stop {
                        target,
                        drain,
                        operation,
                    } => o.stop_as(
                        StopRequest {
                            target,
                            drain,
                            operation,
                        },
                        process == 0,
                    ),
                    Control::Savepoint {
                        target,
                        cancel_job,
                        operation,
                    } => o.savepoint_as(&operation, target, cancel_job),
                }
            }
        });
    Some(reporter)
}

/// A process's connection to its supervisor.
#[derive(Clone)]
pub(crate) struct Reporter {
    stream: Arc<Mutex<TcpStream>>,
    observer: Weak<Observer>,
    process: usize,
    done: Arc<AtomicBool>,
}

impl Reporter {
    /// Sends this process's snapshot; `false` once the supervisor is gone.
    fn send(&self) -> bool {
        let Some(o) = self.observer.upgrade() else {
            return false;
        };
        let report = Report {
            process: self.process,
            snapshot: o.job_snapshot(),
            operations: o.operations(),
        };
        let Ok(mut line) = serde_json::to_string(&report) else {
            return true;
        };
        line.push('\n');
        let mut stream = self.stream.lock().unwrap_or_else(|p| p.into_inner());
        stream.write_all(line.as_bytes()).is_ok()
    }

    /// Sends the last snapshot, once the job has ended in this process.
    pub(crate) fn final_report(&self) {
        self.done.store(true, Ordering::Relaxed);
        self.send();
        let stream = self.stream.lock().unwrap_or_else(|p| p.into_inner());
        let _ = stream.shutdown(std::net::Shutdown::Write);
    }
}

/// The view's operations of a supervisor: stop and savepoint targets are checked there, once.
impl Observer {
    /// Checks and registers an operation that the processes carry out; its id and target.
    pub(crate) fn remote_operation(
        &self,
        operation: &Operation,
    ) -> Result<(OperationId, String), ControlError> {
        let (target, is_stop) = match operation {
            Operation::Savepoint { target, .. } => (target, false),
            Operation::Stop { target, .. } => (target, true),
        };
        let location = self.check_target(target.as_deref())?;
        self.check_running()?;
        if is_stop {
            self.stop_flag().store(true, Ordering::SeqCst);
        }
        Ok((self.new_operation(), location))
    }
}
