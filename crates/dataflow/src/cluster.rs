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
//! cleanly; on Linux a process also gets SIGTERM when the supervisor dies without forwarding
//! anything (a `kill -9`, or an interpreter's default SIGTERM action), so no process of a job
//! outlives its supervisor.

use std::net::TcpListener;
use std::process::{Child, Command};
use std::time::Duration;

use spate_types::{SpateError, SpateResult};

use crate::config::{
    JobConfig, LaunchCommand, RestartStrategy, ENV_ADDRESSES, ENV_PROCESSES, ENV_PROCESS_INDEX,
    ENV_RESTORE, ENV_SUPERVISED, ENV_WORKERS,
};
use crate::execute::RunningJob;

/// Runs the job's processes until they all succeed; with checkpoints, restarts the whole job
/// from its latest completed checkpoint when one dies, as the restart strategy allows.
/// Returns the number of restarts (`fullRestarts`).
pub(crate) fn supervise(
    config: &JobConfig,
    running: &RunningJob,
    observer: &crate::view::Observer,
    hub: &crate::report::Hub,
    env: &[(&str, String)],
) -> SpateResult<u64> {
    let mut restarts = 0u64;
    let mut backoff = Backoff::new(&config.restart_strategy);
    // The newest checkpoint id before this job began: a restart restores `latest` only once the
    // job has completed a checkpoint of its own; until then it restores what the first launch
    // restored (or nothing).
    let storage = match config.checkpoint_dir.as_deref() {
        Some(dir) => Some(spate_checkpoint::CheckpointStorage::open(
            dir,
            spate_checkpoint::CheckpointConfig::default(),
        )?),
        None => None,
    };
    let launch_base = match &storage {
        Some(s) => newest_complete(s)?,
        None => 0,
    };
    let mut restore = config.restore.clone();
    let mut layout = crate::view::Rescale {
        processes: config.processes,
        workers: config.workers,
    };
    loop {
        let started = std::time::Instant::now();
        observer.supervising();
        let run = run_once(config, layout, restore.as_deref(), running, observer, env)?;
        let failure = match run {
            None if !running.stop_requested() && observer.rescale_pending() => {
                // The processes stopped with a final checkpoint for a rescale: start them
                // again from it on the new count.
                layout = observer.take_rescale().expect("a rescale is pending");
                restore = Some("latest".to_owned());
                // Processes beyond the new count report no more.
                hub.keep_processes(layout.processes);
                observer.rescaling(layout);
                tracing::info!(
                    workers = layout.workers,
                    processes = layout.processes,
                    "autoscaler: restarting the processes on the new worker count"
                );
                continue;
            }
            None => return Ok(restarts),
            Some(failure) => failure,
        };
        let Some(storage) = &storage else {
            return Err(failure);
        };
        if running.stop_requested() || observer.canceled() {
            return Err(failure);
        }
        let Some(delay) = backoff.next(started.elapsed()) else {
            return Err(SpateError::Execution(format!(
                "{failure}; the restart strategy allows no more restarts after {restarts}"
            )));
        };
        observer.run_failed(&failure, true);
        restarts += 1;
        tracing::warn!(%failure, restart = restarts, ?delay, "restarting the job from its latest checkpoint");
        std::thread::sleep(delay);
        if newest_complete(storage)? > launch_base {
            restore = Some("latest".to_owned());
        }
    }
}

/// The id of the newest complete checkpoint in `storage` (0 for none).
pub(crate) fn newest_complete(storage: &spate_checkpoint::CheckpointStorage) -> SpateResult<u64> {
    Ok(storage
        .list()?
        .iter()
        .filter(|c| c.manifest.is_some())
        .map(|c| c.id)
        .max()
        .unwrap_or(0))
}

/// Launches the processes once; `Ok(None)` when all succeed, `Ok(Some(error))` when one fails
/// (the others are killed).
fn run_once(
    config: &JobConfig,
    layout: crate::view::Rescale,
    restore: Option<&str>,
    running: &RunningJob,
    observer: &crate::view::Observer,
    env: &[(&str, String)],
) -> SpateResult<Option<SpateError>> {
    let processes = layout.processes;
    let addresses = if config.addresses.is_empty() {
        free_local_addresses(processes)?
    } else {
        config.addresses.clone()
    };
    let launch = match &config.launch {
        Some(launch) => launch.clone(),
        None => LaunchCommand::current()?,
    };
    let mut children: Vec<Option<Child>> = Vec::with_capacity(processes);
    for index in 0..processes {
        let mut command = process_command(&launch, layout, index, &addresses, restore, env);
        match command.spawn() {
            Ok(child) => children.push(Some(child)),
            Err(e) => {
                kill_all(&mut children);
                return Err(SpateError::io_context(
                    format!("cannot start process {index}"),
                    e,
                ));
            }
        }
    }
    tracing::info!(processes, addresses = %addresses.join(","), "started processes");
    let mut forwarded_stop = false;
    loop {
        // A rescale stops the processes as a signal does: with a final checkpoint.
        if !forwarded_stop && (running.stop_requested() || observer.rescale_pending()) {
            forwarded_stop = true;
            signal_all(&children, libc::SIGTERM);
        }
        let mut running = 0;
        for index in 0..children.len() {
            let Some(child) = children[index].as_mut() else {
                continue;
            };
            match child.try_wait() {
                Ok(None) => running += 1,
                Ok(Some(status)) if status.success() => children[index] = None,
                Ok(Some(status)) => {
                    children[index] = None;
                    kill_all(&mut children);
                    return Ok(Some(SpateError::Execution(format!(
                        "process {index} of {processes} exited with {status}; stopped the others"
                    ))));
                }
                Err(e) => {
                    kill_all(&mut children);
                    return Err(SpateError::io_context(
                        format!("cannot wait for process {index}"),
                        e,
                    ));
                }
            }
        }
        if running == 0 {
            return Ok(None);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The command that starts process `index` of the job: the launch command, with the job's
/// place for the process in its environment.
fn process_command(
    launch: &LaunchCommand,
    layout: crate::view::Rescale,
    index: usize,
    addresses: &[String],
    restore: Option<&str>,
    env: &[(&str, String)],
) -> Command {
    let mut command = Command::new(&launch.program);
    command
        .args(&launch.args)
        .env(ENV_SUPERVISED, "1")
        .env(ENV_RESTORE, restore.unwrap_or("none"))
        .env(ENV_WORKERS, layout.workers.to_string())
        .env(ENV_PROCESSES, layout.processes.to_string());
    for (k, v) in env {
        command.env(k, v);
    }
    if layout.processes > 1 {
        command
            .env(ENV_PROCESS_INDEX, index.to_string())
            .env(ENV_ADDRESSES, addresses.join(","));
    }
    stop_with_the_supervisor(&mut command);
    command
}

/// Makes the child get SIGTERM (and stop as when the supervisor forwards one) when the
/// supervisor dies, however it dies: a `kill -9`, or a SIGTERM to an embedding interpreter
/// whose default action ends the process without forwarding anything. Otherwise the
/// processes of a job would run on, orphaned. Linux's parent-death signal is tied to the
/// thread that started the child, which is the supervising thread: it lives until every
/// child has exited.
#[cfg(target_os = "linux")]
fn stop_with_the_supervisor(command: &mut Command) {
    use std::os::unix::process::CommandExt;
    let supervisor = libc::pid_t::try_from(std::process::id()).unwrap_or(0);
    // SAFETY: the closure runs in the child between fork and exec, where only
    // async-signal-safe calls are allowed: it makes two system calls (prctl(2), getppid(2)),
    // allocates nothing and touches no lock.
    #[allow(unsafe_code)]
    unsafe {
        command.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // The supervisor may have died before the signal was armed.
            if libc::getppid() != supervisor {
                return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
            }
            Ok(())
        });
    }
}

#[cfg(not(target_os = "linux"))]
fn stop_with_the_supervisor(_: &mut Command) {}

/// The delays of a restart strategy.
pub(crate) struct Backoff {
    strategy: RestartStrategy,
    attempts: u32,
    current: Option<Duration>,
    failures: Vec<std::time::Instant>,
}

impl Backoff {
    pub(crate) fn new(strategy: &RestartStrategy) -> Self {
        Backoff {
            strategy: strategy.clone(),
            attempts: 0,
            current: None,
            failures: Vec::new(),
        }
    }

    /// The wait before the next restart after a run of `ran`, or `None` for no more restarts.
    pub(crate) fn next(&mut self, ran: Duration) -> Option<Duration> {
        self.attempts += 1;
        match &self.strategy {
            RestartStrategy::None => None,
            RestartStrategy::FixedDelay { attempts, delay } => {
                (self.attempts <= *attempts).then_some(*delay)
            }
            RestartStrategy::ExponentialDelay {
                initial,
                max,
                multiplier,
                reset_after,
            } => {
                let next = match self.current {
                    Some(d) if ran < *reset_after => d.mul_f64(*multiplier).min(*max),
                    _ => *initial,
                };
                self.current = Some(next);
                Some(next)
            }
            RestartStrategy::FailureRate {
                max_failures,
                interval,
                delay,
            } => {
                let now = std::time::Instant::now();
                self.failures.retain(|t| now.duration_since(*t) < *interval);
                self.failures.push(now);
                (self.failures.len() as u32 <= *max_failures).then_some(*delay)
            }
        }
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

/// How long a process waits for its peers to come up.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(60);

/// Connects this process to every other process of the job: process `i` connects to every
/// lower index and accepts every higher one, announcing its index first.
///
/// Spate does this itself instead of timely's `initialize_networking`, which prints progress
/// lines to stdout (a job's stdout is its output) and retries only once a second.
pub(crate) fn connect_peers(
    addresses: &[String],
    my_index: usize,
) -> SpateResult<Vec<Option<std::net::TcpStream>>> {
    use std::io::{Read, Write};
    use std::net::TcpStream;
    use std::time::Instant;

    let listener = TcpListener::bind(&addresses[my_index]).map_err(|e| {
        SpateError::io_context(
            format!(
                "process {my_index} cannot listen on {}",
                addresses[my_index]
            ),
            e,
        )
    })?;
    let deadline = Instant::now() + CONNECT_TIMEOUT;
    let lower: Vec<String> = addresses[..my_index].to_vec();
    let connector = std::thread::spawn(move || -> SpateResult<Vec<TcpStream>> {
        let mut streams = Vec::with_capacity(lower.len());
        for (index, address) in lower.iter().enumerate() {
            let stream = loop {
                match TcpStream::connect(address) {
                    Ok(stream) => break stream,
                    Err(e) if Instant::now() >= deadline => {
                        return Err(SpateError::io_context(
                            format!("process {my_index} cannot reach process {index} at {address}"),
                            e,
                        ))
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(20)),
                }
            };
            let mut stream = stream;
            let announce = (my_index as u64).to_be_bytes();
            stream
                .write_all(&announce)
                .and_then(|_| stream.set_nodelay(true))
                .map_err(|e| SpateError::io_context(format!("cannot greet process {index}"), e))?;
            streams.push(stream);
        }
        Ok(streams)
    });

    let mut higher: Vec<Option<TcpStream>> =
        (my_index + 1..addresses.len()).map(|_| None).collect();
    listener
        .set_nonblocking(true)
        .map_err(|e| SpateError::io_context("cannot configure the listener", e))?;
    while higher.iter().any(Option::is_none) {
        match listener.accept() {
            Ok((mut stream, _)) => {
                let accept_err = |e| SpateError::io_context("a peer process failed to greet", e);
                stream.set_nonblocking(false).map_err(accept_err)?;
                stream.set_nodelay(true).map_err(accept_err)?;
                let mut index = [0u8; 8];
                stream.read_exact(&mut index).map_err(accept_err)?;
                let index = u64::from_be_bytes(index) as usize;
                match index
                    .checked_sub(my_index + 1)
                    .and_then(|slot| higher.get_mut(slot))
                {
                    Some(slot) if slot.is_none() => *slot = Some(stream),
                    _ => {
                        return Err(SpateError::Execution(format!(
                            "unexpected peer index {index} connected to process {my_index}"
                        )))
                    }
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                if Instant::now() >= deadline {
                    return Err(SpateError::Execution(format!(
                        "process {my_index} waited {CONNECT_TIMEOUT:?} for its peers to connect"
                    )));
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(e) => return Err(SpateError::io_context("cannot accept a peer process", e)),
        }
    }
    let lower = connector
        .join()
        .map_err(|_| SpateError::Internal("the connecting thread panicked".into()))??;
    let mut sockets: Vec<Option<TcpStream>> = lower.into_iter().map(Some).collect();
    sockets.push(None);
    sockets.extend(higher);
    Ok(sockets)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn restart_strategies_give_flinks_delays() {
        let ms = Duration::from_millis;
        let mut b = Backoff::new(&RestartStrategy::None);
        assert_eq!(b.next(ms(1)), None);
        let mut b = Backoff::new(&RestartStrategy::FixedDelay {
            attempts: 2,
            delay: ms(5),
        });
        assert_eq!(
            (b.next(ms(1)), b.next(ms(1)), b.next(ms(1))),
            (Some(ms(5)), Some(ms(5)), None)
        );
        let mut b = Backoff::new(&RestartStrategy::ExponentialDelay {
            initial: ms(100),
            max: ms(300),
            multiplier: 2.0,
            reset_after: ms(1000),
        });
        let delays: Vec<_> = (0..4).map(|_| b.next(ms(10)).unwrap()).collect();
        assert_eq!(delays, [ms(100), ms(200), ms(300), ms(300)]);
        assert_eq!(
            b.next(ms(5000)),
            Some(ms(100)),
            "a long healthy run resets the backoff"
        );
        let mut b = Backoff::new(&RestartStrategy::FailureRate {
            max_failures: 2,
            interval: Duration::from_secs(60),
            delay: ms(1),
        });
        assert_eq!(
            (b.next(ms(1)), b.next(ms(1)), b.next(ms(1))),
            (Some(ms(1)), Some(ms(1)), None)
        );
        assert_eq!(
            "fixed-delay:3:10".parse::<RestartStrategy>().unwrap(),
            RestartStrategy::FixedDelay {
                attempts: 3,
                delay: ms(10)
            }
        );
        assert!("sometimes".parse::<RestartStrategy>().is_err());
    }
}
