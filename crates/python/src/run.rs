//! `execute`: builds the job from its plan and runs it while the interpreter stays responsive.
//!
//! `StreamEnv` is not `Send`, so the job is built *and* run on a job thread: it attaches to
//! the interpreter to read the plan (the Python callables stay in the interpreter; the engine
//! holds handles to them), then runs detached. The calling thread waits detached too, waking
//! every 50 ms to attach and run Python's signal handlers. A Ctrl-C (`KeyboardInterrupt`)
//! asks the job to stop: the sources end, the job drains, the sinks flush, and `execute`
//! returns normally. The engine's own signal handler is not installed in an interpreter (it
//! would replace Python's), except in the processes a supervisor starts.
//!
//! The job's worker threads enter the interpreter only to run Python functions, once per
//! batch, and never while they hold an engine lock or wait on another worker.

use std::sync::atomic::Ordering;
use std::time::Duration;

use pyo3::create_exception;
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use spate_dataflow::{JobConfig, JobResult, RestartStrategy, Role};

use crate::plan::{Builder, FIRST_ERROR, PYTHON_CALLS};
use crate::record::{to_py, Rec};

create_exception!(
    _native,
    JobExecutionError,
    PyRuntimeError,
    "The job failed: the message names the operator and carries the Python traceback of a failing function (which is also the exception's `__cause__`)."
);

fn get_opt<'py, T>(d: &Bound<'py, PyDict>, key: &str) -> PyResult<Option<T>>
where
    T: for<'a> FromPyObject<'a, 'py>,
{
    match d.get_item(key)? {
        Some(v) if !v.is_none() => Ok(Some(v.extract().map_err(Into::into)?)),
        _ => Ok(None),
    }
}

/// The job's configuration from `StreamExecutionEnvironment`'s settings.
fn job_config(d: &Bound<'_, PyDict>) -> PyResult<JobConfig> {
    // Python's own SIGINT handler stays: `execute` turns a KeyboardInterrupt into a stop.
    let mut c = JobConfig {
        install_signal_handler: false,
        ..JobConfig::default()
    };
    if let Some(argv) = get_opt::<Vec<String>>(d, "launch")? {
        let (program, args) = argv
            .split_first()
            .ok_or_else(|| PyValueError::new_err("the launch command is empty"))?;
        c.launch = Some(spate_dataflow::LaunchCommand::new(program, args));
    }
    if let Some(p) = get_opt::<usize>(d, "processes")? {
        c.processes = p.max(1);
    }
    if let Some(w) = get_opt::<usize>(d, "workers")? {
        if w == 0 {
            return Err(PyValueError::new_err("the parallelism must be at least 1"));
        }
        c.workers = w;
    }
    if let Some(m) = get_opt::<u32>(d, "max_parallelism")? {
        c.max_parallelism = m;
    }
    if let Some(ms) = get_opt::<u64>(d, "checkpoint_interval_ms")? {
        c.checkpoint_interval = Some(Duration::from_millis(ms));
    }
    if let Some(dir) = get_opt::<String>(d, "checkpoint_dir")? {
        c.checkpoint_dir = Some(dir);
    }
    if let Some(r) = get_opt::<String>(d, "restore")? {
        c.restore = Some(r);
    }
    if let Some(a) = get_opt::<bool>(d, "allow_non_restored_state")? {
        c.allow_non_restored_state = a;
    }
    if let Some(s) = get_opt::<String>(d, "savepoint_dir")? {
        c.savepoint_dir = Some(s);
    }
    if let Some(ms) = get_opt::<u64>(d, "epoch_interval_ms")? {
        c.epoch_interval = Duration::from_millis(ms);
    }
    if let Some(ms) = get_opt::<u64>(d, "auto_watermark_interval_ms")? {
        c.auto_watermark_interval = Duration::from_millis(ms);
    }
    if let Some(r) = get_opt::<Bound<'_, PyDict>>(d, "restart")? {
        let kind: String = get_opt(&r, "kind")?.unwrap_or_default();
        c.restart_strategy = match kind.as_str() {
            "none" => RestartStrategy::None,
            "fixed_delay" => RestartStrategy::FixedDelay {
                attempts: get_opt(&r, "attempts")?.unwrap_or(3),
                delay: Duration::from_millis(get_opt(&r, "delay_ms")?.unwrap_or(1000)),
            },
            other => {
                return Err(PyValueError::new_err(format!(
                    "unknown restart strategy `{other}`"
                )))
            }
        };
    }
    if get_opt::<bool>(d, "rest")? == Some(false) {
        c.rest = None;
    }
    Ok(c)
}

fn role_name(r: &Role) -> &'static str {
    match r {
        Role::Single => "single",
        Role::Leader => "leader",
        Role::Follower => "follower",
        Role::Supervisor => "supervisor",
    }
}

/// Runs the job that `plan` describes and returns its result as a `dict`.
#[pyfunction]
pub fn execute<'py>(
    py: Python<'py>,
    plan: Bound<'py, PyList>,
    config: Bound<'py, PyDict>,
    job_name: String,
) -> PyResult<Bound<'py, PyDict>> {
    let cfg = job_config(&config)?;
    PYTHON_CALLS.store(0, Ordering::Relaxed);
    FIRST_ERROR.lock().unwrap_or_else(|p| p.into_inner()).take();
    let plan = plan.unbind();
    let (stop_tx, stop_rx) = std::sync::mpsc::channel();
    type Outcome = PyResult<spate_types::SpateResult<(JobResult, Vec<(usize, Vec<Rec>)>)>>;
    let job = std::thread::Builder::new()
        .name("spate-job".into())
        .spawn(move || -> Outcome {
            let (env, collected) = Python::attach(|py| -> PyResult<_> {
                let nodes = plan.bind(py);
                let mut b = Builder::new(py, cfg, nodes)?;
                for node in nodes.iter() {
                    b.node(&node.cast_into::<PyDict>()?)?;
                }
                Ok(b.finish())
            })?;
            let _ = stop_tx.send(env.stop_handle());
            Ok(env.execute(&job_name).map(|r| {
                let collected = collected
                    .into_iter()
                    .map(|(id, h)| (id, h.take()))
                    .collect();
                (r, collected)
            }))
        })
        .map_err(|e| PyRuntimeError::new_err(format!("cannot start the job thread: {e}")))?;
    let mut stop = None;
    let mut interrupted = false;
    while !job.is_finished() {
        py.detach(|| std::thread::sleep(Duration::from_millis(20)));
        if stop.is_none() {
            stop = stop_rx.try_recv().ok();
        }
        if let Err(e) = py.check_signals() {
            if e.is_instance_of::<pyo3::exceptions::PyKeyboardInterrupt>(py) && !interrupted {
                interrupted = true;
                // The job in this process, and the processes of a supervised job.
                spate_dataflow::request_stop();
                if let Some(s) = &stop {
                    s.stop();
                }
            } else if !e.is_instance_of::<pyo3::exceptions::PyKeyboardInterrupt>(py) {
                return Err(e);
            }
        }
        if interrupted {
            if let (None, Ok(s)) = (&stop, stop_rx.try_recv()) {
                s.stop();
                stop = Some(s);
            }
        }
    }
    let outcome = py
        .detach(|| job.join())
        .map_err(|_| PyRuntimeError::new_err("the job thread panicked"))?;
    let (result, collected) = match outcome? {
        Ok(r) => r,
        Err(e) => {
            let err = JobExecutionError::new_err(e.to_string());
            if let Some(cause) = FIRST_ERROR.lock().unwrap_or_else(|p| p.into_inner()).take() {
                err.set_cause(py, Some(cause));
            }
            return Err(err);
        }
    };
    let d = PyDict::new(py);
    d.set_item("role", role_name(&result.role))?;
    d.set_item("elapsed_ms", result.elapsed.as_secs_f64() * 1000.0)?;
    d.set_item("totals", result.totals.clone())?;
    d.set_item("metrics", result.metrics.clone())?;
    d.set_item("canceled", result.canceled)?;
    d.set_item("stopped", interrupted)?;
    d.set_item("python_calls", PYTHON_CALLS.load(Ordering::Relaxed))?;
    let names: Vec<String> = result
        .snapshot
        .as_ref()
        .map(|s| s.operators.iter().map(|o| o.name.clone()).collect())
        .unwrap_or_default();
    d.set_item("operators", names)?;
    let out = PyDict::new(py);
    for (id, recs) in collected {
        let items = recs
            .iter()
            .map(|r| to_py(py, r))
            .collect::<PyResult<Vec<_>>>()?;
        out.set_item(id, PyList::new(py, items)?)?;
    }
    d.set_item("collected", out)?;
    Ok(d)
}
