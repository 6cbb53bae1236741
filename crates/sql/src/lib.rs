//! Spate's streaming SQL: Flink SQL texts planned onto Spate's own DataStream operators.
//!
//! ```text
//!   script text ──parser──▶ statements ──catalog (DDL)──▶ tables, views, functions
//!                                 │
//!                   INSERT/SELECT ┴──plan (bind, type)──▶ Plan ──exec──▶ DataStream<SqlRow> ──▶ job
//! ```
//!
//! * [`parser`]: statements, parsed with `sqlparser` (queries) and Flink's DDL on its tokens.
//! * [`catalog`]: tables (columns, computed columns, watermark, connector options), views and
//!   functions.
//! * [`plan`]: a query bound against the catalog into operators, with types, names and the
//!   rowtime column.
//! * [`expr`]: scalar expressions, bound and typed with Flink's rules, evaluated per row.
//! * [`functions`]: Flink's built-in scalar functions (`DATE_FORMAT`, `REGEXP_EXTRACT`, ...).
//! * [`nexmark`]: the `nexmark` connector, the built-in generator as a table with
//!   nexmark-flink's options (the suite's `ddl_gen.sql` as written).
//! * `kafka` (with the `kafka` feature): the `kafka` connector, Flink's options and `json`
//!   format over Spate's Kafka source and sink.
//! * [`prune`]: projection push-down: the columns (and nested fields) of each table a plan
//!   reads, the only ones its scan decodes.
//! * [`calc`]: a filter and the projection over it as one step per row, their shared
//!   subexpressions computed once.
//! * [`exec`]: plans built as DataStream operators, a subplan named twice built once; the
//!   connectors' sources and sinks.
//! * [`join`]: the regular join, and the rows a time bound proves can meet nothing more
//!   dropped from it.
//! * [`packed`]: rows packed into bytes, for the rows a join keeps.
//! * [`types`]: SQL types and the [`Datum`]s of a [`SqlRow`]; [`format`]: rows as text.
//! * [`Session`]: a catalog, settings and the job configuration; runs statements.
//!
//! This crate is the only one that names `sqlparser`. It plans with its own binder rather
//! than DataFusion's logical layer: DataFusion's planner brings ~75 crates (Arrow among them)
//! whose build would take most of CI's budget on two cores, and Spate needs its own
//! streaming planner (time attributes, changelogs, windows) on top of it anyway.
//!
//! What a script can do today (every Nexmark query of the suite that Flink runs, as written):
//!
//! * DDL: `CREATE TABLE` with `ROW<...>` columns, computed columns, `WATERMARK FOR`, `PRIMARY
//!   KEY ... NOT ENFORCED` and `WITH` options; views; `CREATE FUNCTION` for the functions
//!   Spate implements; `ALTER TABLE ... SET | RESET` (options); `SET`, `RESET`, `SHOW`,
//!   `DESCRIBE`, `EXPLAIN`, `DROP`.
//! * Connectors: `filesystem` (JSON lines and CSV in; JSON lines out, one object per row as
//!   Flink's `json` format, as a rolling file sink), `kafka` (JSON, with Flink's options;
//!   exactly once through Kafka transactions), `nexmark` (the generator), `print`,
//!   `blackhole`.
//! * Queries: projections and filters with Flink's expressions and functions; `WITH`,
//!   `SELECT DISTINCT`, `UNION` and `UNION ALL`; unbounded `GROUP BY` with `COUNT`,
//!   `COUNT(DISTINCT)`, `SUM`, `MIN`, `MAX`, `AVG` and `FILTER` (a changelog; also over a
//!   changelog); group windows (`TUMBLE`, `HOP`, `SESSION`) and window table functions
//!   (those and `CUMULATE`), cascaded; `ROW_NUMBER()` top-N and deduplication; inner
//!   equi-joins of append-only inputs (rows a time bound proves unmatchable dropped); lookup
//!   joins (`FOR SYSTEM_TIME AS OF`) on tables that do not change.
//!
//! Not yet: outer joins, joins of changelogs, interval and window joins as such (a join on
//! the window columns is a regular join here, with the same rows), OVER
//! aggregations, `ORDER BY`, processing-time windows, the
//! `upsert-kafka` connector, and state TTL.

pub mod agg;
pub mod calc;
pub mod catalog;
pub mod exec;
pub mod expr;
pub mod format;
pub mod functions;
pub mod join;
#[cfg(feature = "kafka")]
pub mod kafka;
pub mod nexmark;
pub mod packed;
pub mod parser;
pub mod plan;
pub mod prune;
pub mod session;
pub mod types;

pub use session::{JobSummary, Outcome, QueryResult, Session};
pub use types::{Datum, SqlRow, SqlType};

/// An error of a SQL statement: one line naming the problem.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SqlError {
    /// The text does not parse (the message says where).
    #[error("SQL parse error: {0}")]
    Parse(String),
    /// The statement parses but cannot be planned (an unknown column, a type mismatch, an
    /// unsupported construct).
    #[error("{0}")]
    Plan(String),
    /// The job failed.
    #[error("the job failed: {0}")]
    Run(String),
}

impl SqlError {
    /// A planning error.
    pub fn plan(message: impl Into<String>) -> Self {
        SqlError::Plan(message.into())
    }

    /// A parse error from `sqlparser`.
    pub fn parse(e: sqlparser::parser::ParserError) -> Self {
        let text = match e {
            sqlparser::parser::ParserError::TokenizerError(s)
            | sqlparser::parser::ParserError::ParserError(s) => s,
            sqlparser::parser::ParserError::RecursionLimitExceeded => {
                "the statement is nested too deeply".into()
            }
        };
        SqlError::Parse(text)
    }

    /// The error with `what` in front (`what: message`).
    pub fn context(self, what: impl std::fmt::Display) -> Self {
        match self {
            SqlError::Parse(m) => SqlError::Parse(format!("{what}: {m}")),
            SqlError::Plan(m) => SqlError::Plan(format!("{what}: {m}")),
            SqlError::Run(m) => SqlError::Run(format!("{what}: {m}")),
        }
    }
}
