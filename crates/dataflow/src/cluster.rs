//! Local multi-process execution: launch P copies of this program and supervise them.
//!
//! A job configured with `processes > 1` runs as P processes that talk over timely's TCP
//! cluster mode. The process the user started becomes the *supervisor*: it picks a free
//! loopback port per process, starts P copies of its own executable with the same arguments
//! (telling each its index and the addresses through the environment), and waits.
//!
//! Timely cannot survive the loss of a process: its peers fail with it. So the supervisor
//! treats the job as one unit: when any process exits with an error, it kills the others and
//! reports the failure. (Restarting the whole job from its last checkpoint builds on this.)
//! Ctrl-C and SIGTERM sent to the supervisor are forwarded to every process, which then stop
//! cleanly.

use std::net::TcpListener;
use std::process::{Child, Command};
use std::sync::atomic::Ordering;
use std::time::Duration;

use spate_types::{SpateError, SpateResult};

use crate::config::{JobConfig, ENV_ADDRESSES, ENV_PROCESS_INDEX};

/// Starts the job's processes and waits for all of them.
pub(crate) fn supervise(config: &JobConfig) -> SpateResult<()> {
    let addresses =
        if config.addresses.is_empty() { free_local_addresses(config.processes)? } else { config.addresses.clone() };
    let exe = std::env::current_exe()
        .map_err(|e| SpateError::io_context("cannot find this program to start its processes", e))?;
    let args: Vec<_> = std::env::args_os().skip(1).collect();
    let mut children: Vec<Option<Child>> = Vec::with_capacity(config.processes);
    for index in 0..config.processes {
        let child = Command::new(&exe)
            .args(&args)
            .env(ENV_PROCESS_INDEX, index.to_string())
            .env(ENV_ADDRESSES, addresses.join(","))
            .spawn();
        match child {
            Ok(child) => children.push(Some(child)),
            Err(e) => {
                kill_all(&mut children);
                return Err(SpateError::io_context(format!("cannot start process {index}"), e));
            }
        }
    }
    tracing::info!(processes = config.processes, addresses = %addresses.join(","), "started processes");
    let mut forwarded_stop = false;
    loop {
        if !forwarded_stop && crate::execute::STOP_REQUESTED.load(Ordering::Relaxed) {
            forwarded_stop = true;
            signal_all(&children, libc::SIGTERM);
        }
        let mut running = 0;
        for index in 0..children.len() {
            let Some(child) = children[index].as_mut() else { continue };
            match child.try_wait() {
                Ok(None) => running += 1,
                Ok(Some(status)) if status.success() => children[index] = None,
                Ok(Some(status)) => {
                    children[index] = None;
                    kill_all(&mut children);
                    return Err(SpateError::Execution(format!(
                        "process {index} of {} exited with {status}; stopped the others",
                        config.processes
                    )));
                }
                Err(e) => {
                    kill_all(&mut children);
                    return Err(SpateError::io_context(format!("cannot wait for process {index}"), e));
                }
            }
        }
        if running == 0 {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `count` distinct free loopback addresses.
fn free_local_addresses(count: usize) -> SpateResult<Vec<String>> {
    // Hold all listeners until every port is chosen, so that no port is picked twice.
    let listeners = (0..count)
        .map(|_| TcpListener::bind("127.0.0.1:0"))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| SpateError::io_context("cannot find free local ports for the processes", e))?;
    listeners
        .iter()
        .map(|l| l.local_addr().map(|a| a.to_string()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| SpateError::io_context("cannot read a local port", e))
}

fn signal_all(children: &[Option<Child>], signal: libc::c_int) {
    for child in children.iter().flatten() {
        if let Ok(pid) = libc::pid_t::try_from(child.id()) {
            // SAFETY: kill(2) with a pid of our own live child has no memory effects.
            #[allow(unsafe_code)]
            unsafe {
                libc::kill(pid, signal);
            }
        }
    }
}

fn kill_all(children: &mut [Option<Child>]) {
    for child in children.iter_mut().flatten() {
        let _ = child.kill();
        let _ = child.wait();
    }
}
