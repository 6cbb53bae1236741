//! What a program that embeds Spate (the Python API) needs from `execute`: a launch command
//! for the processes of a multi-process job, and a way to keep its own SIGINT handler.
//!
//! A test binary of its own: whether the process catches SIGINT is process-wide state.

use std::ffi::OsString;
use std::path::Path;

use spate_dataflow::{JobConfig, LaunchCommand, Role, StreamEnv};
use spate_types::{Source, SourceContext, SourceOutput, SourceReader, SourceStatus, SpateResult};

/// The numbers 1..=10, read by worker 0.
struct Numbers;

impl Source<u64> for Numbers {
    fn name(&self) -> String {
        "numbers".into()
    }
    fn is_bounded(&self) -> bool {
        true
    }
    fn create_reader(&self, ctx: &SourceContext) -> SpateResult<Box<dyn SourceReader<u64>>> {
        struct R(Vec<u64>);
        impl SourceReader<u64> for R {
            fn poll(
                &mut self,
                out: &mut SourceOutput<'_, u64>,
                _max: usize,
            ) -> SpateResult<SourceStatus> {
                self.0.drain(..).for_each(|x| out.push(x));
                Ok(SourceStatus::Finished)
            }
        }
        let first = ctx.worker_index == 0;
        Ok(Box::new(R(if first { (1..=10).collect() } else { vec![] })))
    }
}

/// A configuration that serves no REST API and installs no signal handler.
fn embedded() -> JobConfig {
    JobConfig {
        rest: None,
        install_signal_handler: false,
        ..JobConfig::default()
    }
}

/// Whether this process catches SIGINT (the `SigCgt` mask of /proc/self/status).
fn catches_sigint() -> bool {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let mask = status
        .lines()
        .find_map(|l| l.strip_prefix("SigCgt:"))
        .expect("/proc/self/status has SigCgt");
    let mask = u64::from_str_radix(mask.trim(), 16).unwrap();
    (mask & (1 << (libc::SIGINT - 1))) != 0
}

#[test]
fn an_embedding_keeps_its_sigint_handler_until_a_job_installs_spates() {
    let env = StreamEnv::new(embedded());
    let _stream = env.from_source(Numbers).map(|x| x * 10);
    env.execute("embedded").unwrap();
    assert!(
        !catches_sigint(),
        "install_signal_handler: false installed one"
    );

    let env = StreamEnv::new(JobConfig {
        rest: None,
        ..JobConfig::default()
    });
    let _stream = env.from_source(Numbers).map(|x| x * 10);
    env.execute("default").unwrap();
    assert!(
        catches_sigint(),
        "the default configuration installs the handler"
    );
}

#[test]
fn a_supervisor_starts_its_processes_with_the_launch_command() {
    let dir = tempfile::tempdir().unwrap();
    // Each "process" writes down the place the supervisor gave it, and exits.
    let script = r#"echo "$SPATE_SUPERVISED $SPATE_ADDRESSES" > "$0/$SPATE_PROCESS_INDEX""#;
    let args: Vec<OsString> = vec!["-c".into(), script.into(), dir.path().into()];
    let env = StreamEnv::new(JobConfig {
        processes: 2,
        launch: Some(LaunchCommand::new("sh", args)),
        ..embedded()
    });
    let _stream = env.from_source(Numbers).map(|x| x * 10);
    let result = env.execute("launched").unwrap();
    assert_eq!(result.role, Role::Supervisor);
    let read = |p: &Path| std::fs::read_to_string(p).unwrap();
    let (first, second) = (read(&dir.path().join("0")), read(&dir.path().join("1")));
    assert!(first.starts_with("1 127.0.0.1:"), "process 0 saw {first:?}");
    assert_eq!(first, second, "both processes get the same addresses");
}
