//! A SQL session: the catalog, the settings, and how jobs run.
//!
//! [`Session::execute`] runs one statement. DDL changes the catalog; `INSERT INTO` and
//! `SELECT` build a job from their plan and run it to its end (Flink's
//! `table.dml-sync = true`: a script's inserts run one after the other), with the session's
//! [`JobConfig`] (workers, processes, checkpoints, restarts).
//!
//! With several processes, every process runs the same script: each re-plans the same
//! statements (planning is deterministic) and joins the job of the statement it was started
//! for ([`Session::only_job`], set from the launch command the session gives the
//! supervisor: [`Session::launch_for`]).

use std::path::PathBuf;
use std::sync::Arc;

use spate_dataflow::{JobConfig, LaunchCommand, StreamEnv};

use crate::catalog::Catalog;
use crate::exec::{self, Target};
use crate::parser::{Located, Statement};
use crate::plan::{self, Plan};
use crate::SqlError;

/// What a statement gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// A message for the user (`[INFO] Execute statement succeeded.`, a table listing).
    Info(String),
    /// A job ran to its end.
    Job(JobSummary),
    /// Nothing to say (a job statement this process does not run).
    Nothing,
}

/// What a finished `INSERT` or `SELECT` job did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobSummary {
    /// The job's name (`insert-into-<table>`, `select`).
    pub name: String,
    /// Its wall time.
    pub elapsed: std::time::Duration,
    /// Records read by its busiest scan (a table read twice, as by a self-join, counts once).
    pub read: u64,
    /// Rows (changes) written by its sink.
    pub written: u64,
    /// How long planning took (binding, typing, building the operators).
    pub planning: std::time::Duration,
}

impl std::fmt::Display for JobSummary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "[INFO] Job {} finished: {} rows in {:.3} s.",
            self.name,
            self.written,
            self.elapsed.as_secs_f64()
        )
    }
}

/// Builds a job's launch command for the other processes of the job of statement `n`.
pub type LaunchFor = Arc<dyn Fn(usize) -> LaunchCommand + Send + Sync>;

/// A catalog, settings and the configuration of the jobs its statements start.
pub struct Session {
    /// The tables, views and functions.
    pub catalog: Catalog,
    /// `SET 'key' = 'value'` settings, in the order they were set.
    pub settings: Vec<(String, String)>,
    /// The configuration every job starts from.
    pub config: JobConfig,
    /// Rows inserted into these tables go to these files instead (JSON-array lines).
    pub redirects: Vec<(String, PathBuf)>,
    /// Rows inserted into these tables are discarded, whatever their connector (benchmarks).
    pub discards: Vec<String>,
    /// In a process started for one job of a script: that job's number (0 for the first
    /// `INSERT`/`SELECT`); the others are skipped.
    pub only_job: Option<usize>,
    /// The launch command of the other processes for job `n`, when the job has several.
    pub launch_for: Option<LaunchFor>,
    jobs: usize,
}

impl Session {
    /// A session whose jobs start from `config`.
    pub fn new(config: JobConfig) -> Self {
        Session {
            catalog: Catalog::default(),
            settings: Vec::new(),
            config,
            redirects: Vec::new(),
            discards: Vec::new(),
            only_job: None,
            launch_for: None,
            jobs: 0,
        }
    }

    /// Runs a script's statements in order, stopping at the first error, which names the
    /// statement's line.
    pub fn execute_script(&mut self, text: &str) -> Result<Vec<Outcome>, SqlError> {
        let statements = crate::parser::parse_script(text)?;
        let mut out = Vec::with_capacity(statements.len());
        for s in &statements {
            out.push(self.execute(s)?);
        }
        Ok(out)
    }

    /// Runs one statement.
    pub fn execute(&mut self, located: &Located) -> Result<Outcome, SqlError> {
        self.run(&located.statement).map_err(|e| match e {
            // A message that says where it is needs no statement position.
            SqlError::Plan(m) if m.contains("(line ") => SqlError::Plan(m),
            SqlError::Plan(m) => SqlError::Plan(format!(
                "line {}, column {}: {m}",
                located.line, located.column
            )),
            other => other,
        })
    }

    fn run(&mut self, statement: &Statement) -> Result<Outcome, SqlError> {
        let ok = || Outcome::Info("[INFO] Execute statement succeeded.".into());
        match statement {
            Statement::CreateTable(def) => {
                self.catalog.create_table(def)?;
                Ok(ok())
            }
            Statement::CreateView { name, query } => {
                // A view must plan when it is created, as in Flink.
                plan::plan_query(query, &self.catalog)
                    .map_err(|e| e.context(format!("the view `{name}`")))?;
                self.catalog.create_view(name, query.clone())?;
                Ok(ok())
            }
            Statement::CreateFunction { name, class } => {
                self.catalog.create_function(name, class)?;
                Ok(ok())
            }
            Statement::AlterOptions {
                name,
                if_exists,
                set,
                reset,
            } => {
                if self.catalog.view(name).is_some() {
                    return Err(SqlError::plan(format!(
                        "ALTER TABLE {name}: `{name}` is a view, not a table"
                    )));
                }
                if !self.catalog.alter_options(name, set, reset) && !if_exists {
                    return Err(SqlError::plan(format!(
                        "ALTER TABLE {name}: there is no such table"
                    )));
                }
                Ok(ok())
            }
            Statement::Drop {
                kind,
                name,
                if_exists,
            } => {
                if !self.catalog.drop(kind, name) && !if_exists {
                    return Err(SqlError::plan(format!(
                        "DROP {kind} {name}: there is no such {}",
                        kind.to_ascii_lowercase()
                    )));
                }
                Ok(ok())
            }
            Statement::Set(None) => Ok(Outcome::Info(
                self.settings
                    .iter()
                    .map(|(k, v)| format!("'{k}' = '{v}'"))
                    .collect::<Vec<_>>()
                    .join("\n"),
            )),
            Statement::Set(Some((key, value))) => {
                self.set(key, value)?;
                Ok(Outcome::Info(
                    "[INFO] Session property has been set.".into(),
                ))
            }
            Statement::Reset(key) => {
                match key {
                    Some(k) => self.settings.retain(|(s, _)| s != k),
                    None => self.settings.clear(),
                }
                Ok(Outcome::Info(
                    "[INFO] Session property has been reset.".into(),
                ))
            }
            Statement::Show(what) => {
                let names = match what.as_str() {
                    "TABLES" => self.catalog.table_names(),
                    "VIEWS" => self.catalog.view_names(),
                    _ => self.catalog.function_names(),
                };
                Ok(Outcome::Info(names.join("\n")))
            }
            Statement::Describe(name) => {
                let plan = if let Some(t) = self.catalog.table(name) {
                    let mut lines = Vec::new();
                    for c in &t.columns {
                        let extra = match (&c.computed, &t.watermark) {
                            (Some(_), _) => " (computed)",
                            (None, Some((i, _))) if t.columns[*i].name == c.name => " *ROWTIME*",
                            _ => "",
                        };
                        lines.push(format!("{} {}{extra}", c.name, c.ty));
                    }
                    return Ok(Outcome::Info(lines.join("\n")));
                } else if let Some(v) = self.catalog.view(name) {
                    plan::plan_query(v, &self.catalog)?
                } else {
                    return Err(SqlError::plan(format!("no table or view named `{name}`")));
                };
                Ok(Outcome::Info(describe(&plan)))
            }
            Statement::Explain(query) => {
                let plan = plan::plan_query(query, &self.catalog)?;
                Ok(Outcome::Info(plan.explain()))
            }
            Statement::ExplainInsert(insert) => {
                let Statement::Insert {
                    table,
                    columns,
                    query,
                } = &**insert
                else {
                    return Err(SqlError::plan("EXPLAIN explains a query or an INSERT"));
                };
                let (plan, _) = self.plan_insert(table, columns, query)?;
                let fields: Vec<&str> =
                    plan.scope.columns.iter().map(|c| c.name.as_str()).collect();
                Ok(Outcome::Info(format!(
                    "Sink(table=[{table}], fields=[{}])\n{}",
                    fields.join(", "),
                    plan.explain()
                        .lines()
                        .map(|l| format!("  {l}\n"))
                        .collect::<String>()
                )))
            }
            Statement::Insert {
                table,
                columns,
                query,
            } => {
                let job = self.next_job();
                let planning = std::time::Instant::now();
                let (plan, target) = self.plan_insert(table, columns, query)?;
                let sink = match self.redirects.iter().find(|(t, _)| t == table) {
                    Some((_, path)) => Target::File(path.clone()),
                    None if self.discards.contains(table) => Target::Discard,
                    None => Target::Table(target),
                };
                if self.only_job.is_some_and(|j| j != job) {
                    return Ok(Outcome::Nothing);
                }
                self.run_job(job, &format!("insert-into-{table}"), &plan, &sink, planning)
            }
            Statement::Query(query) => {
                let job = self.next_job();
                let planning = std::time::Instant::now();
                let plan = plan::plan_query(query, &self.catalog)?;
                if self.only_job.is_some_and(|j| j != job) {
                    return Ok(Outcome::Nothing);
                }
                let sink =
                    Target::Print(plan.scope.columns.iter().map(|c| c.name.clone()).collect());
                self.run_job(job, "select", &plan, &sink, planning)
            }
        }
    }

    /// Runs `sql` (DDL statements, then one query: a `SELECT`, or an `INSERT INTO` whose
    /// rows are taken instead of written) in this process and returns the query's columns
    /// and its rows as changes, in the order the sink saw them. For tests and programs that
    /// embed Spate's SQL.
    pub fn query(&mut self, sql: &str) -> Result<QueryResult, SqlError> {
        let statements = crate::parser::parse_script(sql)?;
        let Some((last, ddl)) = statements.split_last() else {
            return Err(SqlError::plan("no statement to run"));
        };
        for s in ddl {
            self.execute(s)?;
        }
        let at = |e: SqlError| match e {
            SqlError::Plan(m) => {
                SqlError::Plan(format!("line {}, column {}: {m}", last.line, last.column))
            }
            other => other,
        };
        let plan = match &last.statement {
            Statement::Query(q) => plan::plan_query(q, &self.catalog).map_err(at)?,
            Statement::Insert {
                table,
                columns,
                query,
            } => {
                let target = self
                    .catalog
                    .table(table)
                    .cloned()
                    .ok_or_else(|| at(SqlError::plan(format!("no table named `{table}`"))))?;
                let plan = plan::plan_query(query, &self.catalog).map_err(at)?;
                plan::fit_to(plan, &target, columns).map_err(at)?
            }
            _ => {
                return Err(SqlError::plan(
                    "the last statement must be a SELECT or INSERT",
                ))
            }
        };
        let handle = spate_connectors::CollectHandle::new();
        let mut config = self.config.clone();
        config.processes = 1;
        config
            .validate()
            .map_err(|e| SqlError::plan(e.to_string()))?;
        let env = StreamEnv::new(config);
        let rows = exec::build(&env, &plan)?;
        exec::sink(rows, plan.types(), &Target::Collect(handle.clone()))?;
        env.execute("query")
            .map_err(|e| SqlError::Run(e.to_string()))?;
        Ok(QueryResult {
            columns: plan
                .scope
                .columns
                .iter()
                .map(|c| (c.name.clone(), c.ty.clone()))
                .collect(),
            changes: handle.take(),
        })
    }

    /// The plan of `INSERT INTO table [(columns)] query`, fitted to the table, and the table.
    fn plan_insert(
        &self,
        table: &str,
        columns: &[String],
        query: &sqlparser::ast::Query,
    ) -> Result<(Plan, Arc<crate::catalog::Table>), SqlError> {
        let target = self.catalog.table(table).cloned().ok_or_else(|| {
            SqlError::plan(format!("INSERT INTO {table}: no table named `{table}`"))
        })?;
        let plan = plan::fit_to(plan::plan_query(query, &self.catalog)?, &target, columns)?;
        Ok((plan, target))
    }

    fn next_job(&mut self) -> usize {
        self.jobs += 1;
        self.jobs - 1
    }

    /// Applies a setting Spate knows (Flink's keys); others are kept and listed, as the SQL
    /// client does, but change nothing.
    fn set(&mut self, key: &str, value: &str) -> Result<(), SqlError> {
        let bad = |what: &str| SqlError::plan(format!("SET '{key}' = '{value}': {what}"));
        match key {
            "parallelism.default" => {
                let n: usize = value.parse().map_err(|_| bad("expected a whole number"))?;
                if n == 0 {
                    return Err(bad("the parallelism must be at least 1"));
                }
                self.config.workers = n;
            }
            "execution.checkpointing.interval" => {
                let d = parse_duration(value)
                    .ok_or_else(|| bad("expected a duration such as 1s or 500ms"))?;
                self.config.checkpoint_interval = Some(d);
            }
            _ => {}
        }
        self.settings.retain(|(k, _)| k != key);
        self.settings.push((key.to_string(), value.to_string()));
        Ok(())
    }

    fn run_job(
        &self,
        job: usize,
        name: &str,
        plan: &Plan,
        sink: &Target,
        planning: std::time::Instant,
    ) -> Result<Outcome, SqlError> {
        let mut config = self.config.clone();
        if config.processes > 1 {
            if let Some(launch) = &self.launch_for {
                config.launch = Some(launch(job));
            }
        }
        config
            .validate()
            .map_err(|e| SqlError::plan(e.to_string()))?;
        let env = StreamEnv::new(config);
        let rows = exec::build(&env, plan)?;
        exec::sink(rows, plan.types(), sink)?;
        let planning = planning.elapsed();
        let result = env
            .execute(name)
            .map_err(|e| SqlError::Run(e.to_string()))?;
        if !result.is_reporter() {
            return Ok(Outcome::Nothing);
        }
        let of = |prefix: &'static str, suffix: &'static str| -> Vec<u64> {
            result
                .metrics
                .iter()
                .filter(|(k, _)| k.starts_with(prefix) && k.ends_with(suffix))
                .map(|(_, v)| *v)
                .collect()
        };
        Ok(Outcome::Job(JobSummary {
            name: name.to_string(),
            elapsed: result.elapsed,
            read: of("scan.", ".numRecordsOut").into_iter().max().unwrap_or(0),
            written: of("sink", ".numRecordsIn").into_iter().sum(),
            planning,
        }))
    }
}

/// What [`Session::query`] gives.
#[derive(Debug, Clone)]
pub struct QueryResult {
    /// The result's columns: names and types.
    pub columns: Vec<(String, crate::SqlType)>,
    /// The rows, as changes (`+I` only for an append-only result).
    pub changes: Vec<spate_dataflow::Change<crate::SqlRow>>,
}

impl QueryResult {
    /// The final rows: the changelog applied (each `+I`/`+U` adds its row, each `-U`/`-D`
    /// takes one copy away), as text lines (JSON arrays), sorted.
    pub fn final_rows(&self) -> Vec<String> {
        let types: Vec<crate::SqlType> = self.columns.iter().map(|(_, t)| t.clone()).collect();
        let mut bag: std::collections::HashMap<String, i64> = std::collections::HashMap::new();
        for c in &self.changes {
            let mut line = Vec::new();
            crate::format::write_json_row(&c.row, &types, &mut line);
            let line = String::from_utf8_lossy(&line).into_owned();
            *bag.entry(line).or_default() += if c.kind.is_addition() { 1 } else { -1 };
        }
        let mut rows: Vec<String> = bag
            .into_iter()
            .flat_map(|(row, n)| std::iter::repeat_n(row, n.max(0) as usize))
            .collect();
        rows.sort();
        rows
    }
}

/// A plan's columns, one a line, as `DESCRIBE` shows them.
fn describe(plan: &Plan) -> String {
    plan.scope
        .columns
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let time = if Some(i) == plan.rowtime {
                " *ROWTIME*"
            } else {
                ""
            };
            format!("{} {}{time}", c.name, c.ty)
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// `500ms`, `1s`, `1 s`, `2min`, `1h`, or a number of milliseconds.
pub fn parse_duration(text: &str) -> Option<std::time::Duration> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (n, unit) = t.split_at(split);
    let n: u64 = n.parse().ok()?;
    let ms = match unit.trim() {
        "" | "ms" => n,
        "s" | "sec" | "second" | "seconds" => n.checked_mul(1000)?,
        "min" | "minute" | "minutes" => n.checked_mul(60_000)?,
        "h" | "hour" | "hours" => n.checked_mul(3_600_000)?,
        _ => return None,
    };
    Some(std::time::Duration::from_millis(ms))
}
