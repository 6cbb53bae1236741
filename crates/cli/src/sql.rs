//! `spate sql`: Flink SQL scripts and an interactive shell (Flink's SQL client, embedded mode).
//!
//! ```text
//! spate sql [-i init.sql]... [-f script.sql] [-D NAME=VALUE]... [--workers W] [--processes P]
//!           [--redirect TABLE=FILE]... [--checkpoint-dir D [--restore latest|PATH]]
//! ```
//!
//! With `-f`, the script runs statement by statement and the first error ends it with a
//! non-zero exit. Without it, a shell reads statements (ended by `;`, over several lines)
//! with history in `~/.spate_sql_history`; `QUIT;` or Ctrl-D leaves it. `${NAME}` in any
//! script is replaced by `-D NAME=VALUE` (as the Nexmark suite's scripts are written).

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use clap::Args;
use spate_dataflow::{JobConfig, LaunchCommand};
use spate_sql::{Outcome, Session};

/// `spate sql`'s arguments.
#[derive(Debug, Args)]
pub struct SqlArgs {
    /// Run this script (its statements, one after the other) and exit.
    #[arg(short = 'f', long = "file")]
    pub file: Option<PathBuf>,
    /// Run these scripts first (DDL shared by several scripts), in order.
    #[arg(short = 'i', long = "init")]
    pub init: Vec<PathBuf>,
    /// Replace `${NAME}` in the scripts with VALUE.
    #[arg(short = 'D', long = "define", value_name = "NAME=VALUE", value_parser = parse_pair)]
    pub define: Vec<(String, String)>,
    /// Worker threads per process (`SET 'parallelism.default'` overrides it).
    #[arg(long, default_value_t = 1)]
    pub workers: usize,
    /// Processes of each job (started and supervised on this machine).
    #[arg(long, default_value_t = 1)]
    pub processes: usize,
    /// Write what is inserted into TABLE to FILE instead of the table's connector: one JSON
    /// array per row (the format of `shared/nexmark`'s expected results).
    #[arg(long, value_name = "TABLE=FILE", value_parser = parse_pair)]
    pub redirect: Vec<(String, String)>,
    /// Discard what is inserted into TABLE, whatever its connector (for benchmarks).
    #[arg(long, value_name = "TABLE")]
    pub discard: Vec<String>,
    /// Take exactly-once checkpoints into this directory.
    #[arg(long)]
    pub checkpoint_dir: Option<String>,
    /// How often to checkpoint (`SET 'execution.checkpointing.interval'` overrides it).
    #[arg(long, default_value = "1s", value_parser = crate::util::parse_duration)]
    pub checkpoint_interval: std::time::Duration,
    /// Restart strategy after a failure (as `spate nexmark run`'s).
    #[arg(long, default_value = "exponential-delay")]
    pub restart_strategy: spate_dataflow::RestartStrategy,
    /// Start the (first) job from a checkpoint or savepoint: `latest` or a location.
    #[arg(long, requires = "checkpoint_dir")]
    pub restore: Option<String>,
    /// Print one JSON line per finished job (events read, wall time, events/s, rows, peak
    /// memory) on stdout, for `spate bench nexmark --front sql`.
    #[arg(long)]
    pub json: bool,
    /// In a process started by a job's supervisor: the job (0 for the script's first
    /// INSERT or SELECT) this process belongs to.
    #[arg(long, hide = true)]
    pub job_index: Option<usize>,
}

fn parse_pair(s: &str) -> std::result::Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_string(), v.to_string())),
        _ => Err(format!("`{s}`: expected NAME=VALUE")),
    }
}

/// Runs `spate sql`.
pub fn run(args: SqlArgs) -> Result<()> {
    let mut config = JobConfig::local(args.workers).with_processes(args.processes);
    if let Some(dir) = &args.checkpoint_dir {
        config.checkpoint_dir = Some(dir.clone());
        config.checkpoint_interval = Some(args.checkpoint_interval);
        config.restart_strategy = args.restart_strategy.clone();
        config.restore = args.restore.clone();
        config.supervise_single_process = true;
    }
    config.validate()?;
    let mut session = Session::new(config);
    session.redirects = args
        .redirect
        .iter()
        .map(|(t, f)| (t.clone(), PathBuf::from(f)))
        .collect();
    session.discards = args.discard.clone();
    session.only_job = args.job_index;
    // The other processes of a job run this command again, for that job only.
    let program = std::env::current_exe().context("cannot find this program")?;
    let base: Vec<std::ffi::OsString> = std::env::args_os()
        .skip(1)
        .collect::<Vec<_>>()
        .into_iter()
        .fold((Vec::new(), false), |(mut out, skip), a| {
            if skip {
                return (out, false);
            }
            if a == "--job-index" {
                return (out, true);
            }
            out.push(a);
            (out, false)
        })
        .0;
    session.launch_for = Some(Arc::new(move |job| {
        let mut args = base.clone();
        args.push("--job-index".into());
        args.push(job.to_string().into());
        LaunchCommand::new(program.clone(), args)
    }));
    let quiet = args.job_index.is_some();
    let report = Report {
        quiet,
        json: args.json,
        workers: args.workers * args.processes,
    };
    for init in &args.init {
        run_file(&mut session, init, &args.define, &report)?;
    }
    match &args.file {
        Some(file) => run_file(&mut session, file, &args.define, &report),
        None => shell(&mut session, &args.define),
    }
}

/// How a script's outcomes are shown.
struct Report {
    /// A process started for one job by its supervisor says nothing.
    quiet: bool,
    /// Jobs as JSON lines on stdout.
    json: bool,
    /// Workers in all.
    workers: usize,
}

fn run_file(
    session: &mut Session,
    path: &PathBuf,
    vars: &[(String, String)],
    report: &Report,
) -> Result<()> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read the script {}", path.display()))?;
    let text = spate_sql::parser::substitute(&text, vars)
        .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    let statements = spate_sql::parser::parse_script(&text)
        .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    for s in &statements {
        match session.execute(s) {
            Ok(_) if report.quiet => {}
            Ok(Outcome::Info(text)) if !text.is_empty() => eprintln!("{text}"),
            Ok(Outcome::Job(job)) if report.json => {
                let secs = job.elapsed.as_secs_f64();
                let eps = job.read as f64 / secs.max(1e-9);
                let line = serde_json::json!({
                    "bench": "nexmark",
                    "front": "sql",
                    "script": path.file_name().map(|n| n.to_string_lossy().into_owned()),
                    "job": job.name,
                    "events": job.read,
                    "workers": report.workers,
                    "wall_s": (secs * 1000.0).round() / 1000.0,
                    "events_per_s": eps.round(),
                    "events_per_s_per_worker": (eps / report.workers.max(1) as f64).round(),
                    "rows": job.written,
                    "planning_ms": (job.planning.as_secs_f64() * 1e4).round() / 10.0,
                    "peak_rss_mb": crate::util::peak_rss_mb().map(|r| (r * 10.0).round() / 10.0),
                });
                println!("{line}");
            }
            Ok(Outcome::Job(job)) => eprintln!("{job}"),
            Ok(_) => {}
            Err(e) => bail!("{}: {e}", path.display()),
        }
    }
    Ok(())
}

/// The interactive shell.
fn shell(session: &mut Session, vars: &[(String, String)]) -> Result<()> {
    use rustyline::error::ReadlineError;
    let mut editor = rustyline::Editor::<SqlHelper, rustyline::history::DefaultHistory>::new()
        .context("cannot start the line editor")?;
    editor.set_helper(Some(SqlHelper {
        names: catalog_names(session),
    }));
    let history = std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".spate_sql_history"));
    if let Some(h) = &history {
        let _ = editor.load_history(h);
    }
    eprintln!("Spate SQL shell. End statements with `;`; `HELP;` lists them, `QUIT;` leaves.");
    let mut buffer = String::new();
    loop {
        let prompt = if buffer.is_empty() {
            "Spate SQL> "
        } else {
            "> "
        };
        let line = match editor.readline(prompt) {
            Ok(line) => line,
            Err(ReadlineError::Interrupted) => {
                buffer.clear();
                continue;
            }
            Err(ReadlineError::Eof) => break,
            Err(e) => return Err(e.into()),
        };
        buffer.push_str(&line);
        buffer.push('\n');
        if !line.trim_end().ends_with(';') {
            continue;
        }
        let text = std::mem::take(&mut buffer);
        let _ = editor.add_history_entry(text.trim());
        let command = text
            .trim()
            .trim_end_matches(';')
            .trim()
            .to_ascii_uppercase();
        match command.as_str() {
            "QUIT" | "EXIT" => break,
            "HELP" => {
                eprintln!("{HELP}");
                continue;
            }
            "CLEAR" => {
                eprint!("\x1b[2J\x1b[H");
                continue;
            }
            _ => {}
        }
        let result = spate_sql::parser::substitute(&text, vars)
            .and_then(|t| spate_sql::parser::parse_script(&t))
            .and_then(|statements| {
                for s in &statements {
                    match session.execute(s)? {
                        Outcome::Info(text) if !text.is_empty() => println!("{text}"),
                        Outcome::Job(job) => eprintln!("{job}"),
                        _ => {}
                    }
                }
                Ok(())
            });
        if let Err(e) = result {
            eprintln!("[ERROR] {e}");
        }
        if let Some(helper) = editor.helper_mut() {
            helper.names = catalog_names(session);
        }
    }
    if let Some(h) = &history {
        let _ = editor.save_history(h);
    }
    Ok(())
}

/// The words the shell completes besides the session's names.
const KEYWORDS: &[&str] = &[
    "ALTER",
    "AND",
    "AS",
    "ASC",
    "AVG",
    "BETWEEN",
    "BIGINT",
    "BOOLEAN",
    "BY",
    "CASE",
    "CAST",
    "COUNT",
    "CREATE",
    "CUMULATE",
    "DECIMAL",
    "DESC",
    "DESCRIBE",
    "DESCRIPTOR",
    "DISTINCT",
    "DOUBLE",
    "DROP",
    "ELSE",
    "END",
    "EXISTS",
    "EXPLAIN",
    "FALSE",
    "FILTER",
    "FOR",
    "FROM",
    "FUNCTION",
    "GROUP",
    "HAVING",
    "HOP",
    "IF",
    "IN",
    "INSERT",
    "INT",
    "INTERVAL",
    "INTO",
    "IS",
    "JOIN",
    "KEY",
    "LIKE",
    "MAX",
    "MIN",
    "NOT",
    "NULL",
    "ON",
    "OR",
    "OVER",
    "PARTITION",
    "PRIMARY",
    "RESET",
    "ROW",
    "ROW_NUMBER",
    "SECOND",
    "SELECT",
    "SESSION",
    "SET",
    "SHOW",
    "STRING",
    "SUM",
    "TABLE",
    "TABLES",
    "THEN",
    "TIMESTAMP",
    "TRUE",
    "TUMBLE",
    "UNION",
    "VARCHAR",
    "VIEW",
    "VIEWS",
    "WATERMARK",
    "WHEN",
    "WHERE",
    "WITH",
];

/// The tables, views, functions and columns of the session, for completion.
fn catalog_names(session: &Session) -> Vec<String> {
    let catalog = &session.catalog;
    let mut names = catalog.table_names();
    names.extend(catalog.view_names());
    names.extend(catalog.function_names());
    for table in catalog.table_names() {
        if let Some(t) = catalog.table(&table) {
            names.extend(t.columns.iter().map(|c| c.name.clone()));
        }
    }
    names.sort();
    names.dedup();
    names
}

/// What the word before `pos` in `line` completes to: keywords (in the word's case) and
/// `names` that start with it, and where the word starts.
fn completions(line: &str, pos: usize, names: &[String]) -> (usize, Vec<String>) {
    let before = line.get(..pos).unwrap_or(line);
    let start = before
        .char_indices()
        .rev()
        .find(|(_, c)| !(c.is_alphanumeric() || *c == '_'))
        .map_or(0, |(i, c)| i + c.len_utf8());
    let word = &before[start..];
    if word.is_empty() {
        return (pos, Vec::new());
    }
    let lower = word.to_lowercase();
    let upper = word.to_uppercase();
    let lowercase_word = word == lower;
    let mut out: Vec<String> = KEYWORDS
        .iter()
        .filter(|k| k.starts_with(&upper))
        .map(|k| {
            if lowercase_word {
                k.to_lowercase()
            } else {
                (*k).to_owned()
            }
        })
        .collect();
    out.extend(
        names
            .iter()
            .filter(|n| n.to_lowercase().starts_with(&lower))
            .cloned(),
    );
    out.sort();
    out.dedup();
    (start, out)
}

/// The shell's line-editor helper: completion with Tab.
struct SqlHelper {
    names: Vec<String>,
}

impl rustyline::completion::Completer for SqlHelper {
    type Candidate = String;
    fn complete(
        &self,
        line: &str,
        pos: usize,
        _: &rustyline::Context<'_>,
    ) -> rustyline::Result<(usize, Vec<String>)> {
        Ok(completions(line, pos, &self.names))
    }
}

impl rustyline::hint::Hinter for SqlHelper {
    type Hint = String;
}
impl rustyline::highlight::Highlighter for SqlHelper {}
impl rustyline::validate::Validator for SqlHelper {}
impl rustyline::Helper for SqlHelper {}

const HELP: &str = "\
CREATE [TEMPORARY] TABLE t (col TYPE, c AS expr, WATERMARK FOR c AS c - INTERVAL '4' SECOND) WITH ('connector' = ...);
CREATE VIEW v AS SELECT ...;      CREATE FUNCTION f AS 'class';
SELECT ...;                       runs the query and prints its rows (+I[...])
INSERT INTO t SELECT ...;         runs a job into t and waits for its end
EXPLAIN SELECT|INSERT ...;        DESCRIBE t;    SHOW TABLES|VIEWS|FUNCTIONS;
ALTER TABLE t SET ('key' = 'value', ...);  ALTER TABLE t RESET ('key', ...);
SET 'key' = 'value';  SET;  RESET ['key'];    DROP TABLE|VIEW|FUNCTION [IF EXISTS] name;
HELP;  CLEAR;  QUIT;
Connectors: filesystem (json, csv), kafka (json), nexmark, print, blackhole.";

#[cfg(test)]
mod tests {
    use super::*;

    /// Tab completes keywords in the case of the word typed, and the session's names, from
    /// the start of the word under the cursor.
    #[test]
    fn tab_completes_keywords_and_the_sessions_names() {
        let names = ["bid".to_owned(), "bidder".to_owned(), "datagen".to_owned()];
        assert_eq!(
            completions("SELECT * FR", 11, &names),
            (9, vec!["FROM".to_owned()])
        );
        assert_eq!(
            completions("sel", 3, &names),
            (0, vec!["select".to_owned()])
        );
        assert_eq!(
            completions("SELECT a FROM bi WHERE x", 16, &names),
            (14, ["bid", "bidder", "bigint"].map(String::from).to_vec())
        );
        assert_eq!(
            completions("SELECT datä", 11, &names).0,
            7,
            "a word of non-ASCII letters starts after the space"
        );
        assert_eq!(completions("SELECT ", 7, &names), (7, Vec::<String>::new()));
        let mut session = Session::new(JobConfig::default());
        session
            .execute_script(
                "CREATE TABLE orders (order_id BIGINT) WITH ('connector' = 'blackhole');",
            )
            .unwrap();
        let names = catalog_names(&session);
        assert!(names.contains(&"orders".to_owned()) && names.contains(&"order_id".to_owned()));
        assert_eq!(
            completions("SELECT ord", 10, &names).1,
            vec!["order_id".to_owned(), "orders".to_owned()]
        );
    }
}
