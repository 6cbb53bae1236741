//! `spate`: run, benchmark and generate Nexmark jobs; launch and supervise local processes.
//!
//! ```text
//! spate nexmark gen --events N [--seed S] [--rate R] --out FILE
//! spate nexmark run --query q0 [--events N | --input FILE] [--workers W] [--processes P]
//! spate sql [-i init.sql] [-f script.sql] [-D NAME=VALUE] [--workers W] [--processes P]
//! spate bench nexmark [--queries q0,q1,q2,q3] [--events N | --input FILE] [--workers W]
//! spate bench backpressure [--sink-rate R] [--seconds S]
//! ```
//!
//! Errors are one line on stderr and a non-zero exit code; a closed stdout pipe is a clean exit.

mod bench;
mod bench_elastic;
mod elastic;
mod nexmark;
mod remote;
mod rest;
mod sql;
mod util;

use clap::{Parser, Subcommand};

/// mimalloc: records are small and short-lived, and glibc's allocator showed up at a quarter
/// of the profile of generator-fed queries. Its version 2 (the workspace's `v2` feature): on
/// the 10M-event JSON-lines file it made q1 3% faster and lowered peak memory against version
/// 3 (q7 77 → 43 MB, q8 99 → 66 MB, q5 59 → 50 MB).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Spate: a distributed stream processing engine.
#[derive(Debug, Parser)]
#[command(name = "spate", version, about, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
#[allow(clippy::large_enum_variant)] // parsed once per run
enum Command {
    /// Nexmark: generate events or run a query.
    #[command(subcommand)]
    Nexmark(nexmark::NexmarkCommand),
    /// Run Flink SQL scripts (`-f`), or an interactive SQL shell.
    Sql(sql::SqlArgs),
    /// Benchmarks with machine-readable results, one JSON line each.
    #[command(subcommand)]
    Bench(bench::BenchCommand),
    /// List the running jobs of this machine.
    List(remote::Access),
    /// Show a running job: its state, vertices with their rates, and checkpoints.
    Info(remote::JobArg),
    /// Trigger a savepoint of a running job and wait for it.
    Savepoint(remote::SavepointArgs),
    /// Stop a running job with a final savepoint (Flink's stop-with-savepoint).
    Stop(remote::StopArgs),
    /// Cancel a running job, without a savepoint.
    Cancel(remote::JobArg),
    /// Print a running job's metrics, or the named ones.
    Metrics(remote::MetricsArgs),
}

fn main() {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            use clap::error::ErrorKind;
            if matches!(
                e.kind(),
                ErrorKind::DisplayHelp
                    | ErrorKind::DisplayVersion
                    | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
            ) {
                let _ = e.print();
                std::process::exit(0);
            }
            // One line that names the problem, instead of clap's multi-line usage block.
            let text = e.to_string();
            let first = text
                .lines()
                .next()
                .unwrap_or("invalid arguments")
                .trim_start_matches("error: ");
            eprintln!("error: {first} (see `spate --help`)");
            std::process::exit(2);
        }
    };
    util::init_logging();
    let result = match cli.command {
        Command::Nexmark(cmd) => nexmark::run(cmd),
        Command::Sql(args) => sql::run(args),
        Command::Bench(cmd) => bench::run(cmd),
        Command::List(access) => remote::list(&access),
        Command::Info(job) => remote::info(&job),
        Command::Savepoint(args) => remote::savepoint(&args),
        Command::Stop(args) => remote::stop(&args),
        Command::Cancel(job) => remote::cancel(&job),
        Command::Metrics(args) => remote::metrics(&args),
    };
    if let Err(e) = result {
        if util::is_broken_pipe(&e) {
            std::process::exit(0);
        }
        eprintln!("error: {e:#}");
        std::process::exit(1);
    }
}
