//! The sqllogictest files under `tests/slt/` (`**/*.slt`), each run on a fresh
//! [`spate_sql::Session`] (`JobConfig::local(1)`; a file may `SET 'parallelism.default'`).
//!
//! The files' expected values follow Flink SQL's documented semantics, not Spate's output.
//!
//! # How a record runs
//!
//! * Every `__DIR__` in a record's SQL is replaced with the absolute path of `tests/slt/data/`
//!   first: tables read their rows from JSON-lines files there, as
//!   `CREATE TABLE t (...) WITH ('connector' = 'filesystem', 'path' = '__DIR__/t.jsonl',
//!   'format' = 'json')` (there is no `values` connector).
//! * A record whose last statement is a query (`SELECT ...`) runs through
//!   [`Session::query`] (the statements before it through the same session first), and its
//!   rows are the query's final rows ([`spate_sql::QueryResult::final_rows`]: the changelog
//!   applied). `DESCRIBE`, `SHOW`, `EXPLAIN` (of a query or an `INSERT`) and a bare `SET`
//!   give their message's lines as rows of one column. Anything else runs through [`Session::execute_script`] and gives no
//!   rows. `statement error <regex>` / `query error <regex>` match the error's one line
//!   (`SqlError`'s text, such as `line 1, column 1: no table or view named `t``).
//!
//! # How values are rendered
//!
//! Each row is its JSON array ([`spate_sql::format`]) split into its values:
//!
//! | value | text |
//! |---|---|
//! | `NULL` | `NULL` |
//! | a string | the string, without quotes; the empty string as `(empty)` |
//! | `BOOLEAN` | `true` / `false` |
//! | `INT`, `BIGINT` | the number |
//! | `DOUBLE` | the shortest text that reads back as the same double: `2.0`, `0.25`, `1e-7` |
//! | `DECIMAL(p, s)` | exactly `s` decimals: `908.000` |
//! | `TIMESTAMP(3)` | `2024-01-01 10:30:00.000` |
//! | `ROW<...>` | its JSON array: `["Ann","Oslo"]` |
//!
//! The columns' types are checked (sqllogictest's strict column validator) with these
//! letters: `I` for `INT`/`BIGINT`, `R` for `DOUBLE`, `D` for `DECIMAL`, `T` for `STRING`,
//! `B` for `BOOLEAN`, `P` for `TIMESTAMP(3)`, `?` for anything else (`ROW`, a bare `NULL`);
//! the lines of `DESCRIBE`/`SHOW` are `T`.
//!
//! Spate's rows come sorted as JSON text and streams have no order, so every query of more
//! than one row says `rowsort`.
//!
//! Unlike sqllogictest's own runner, a file does not stop at its first failing record: every
//! record runs, and the test fails with all the failures of the file.

use std::path::{Path, PathBuf};

use spate_dataflow::JobConfig;
use spate_sql::parser::{parse_script, Statement};
use spate_sql::{Outcome, Session, SqlError, SqlType};
use sqllogictest::harness::{Arguments, Failed, Trial};
use sqllogictest::{ColumnType, DBOutput, Record, Runner, DB};

/// The types of result columns, as the `query` line's letters.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Column {
    /// `I`: `INT`, `BIGINT`.
    Integer,
    /// `R`: `DOUBLE`.
    Double,
    /// `D`: `DECIMAL(p, s)`.
    Decimal,
    /// `T`: `STRING`.
    Text,
    /// `B`: `BOOLEAN`.
    Boolean,
    /// `P`: `TIMESTAMP(3)`.
    Timestamp,
    /// `?`: anything else.
    Any,
}

impl ColumnType for Column {
    fn from_char(value: char) -> Option<Self> {
        Some(match value {
            'I' => Column::Integer,
            'R' => Column::Double,
            'D' => Column::Decimal,
            'T' => Column::Text,
            'B' => Column::Boolean,
            'P' => Column::Timestamp,
            '?' => Column::Any,
            _ => return None,
        })
    }

    fn to_char(&self) -> char {
        match self {
            Column::Integer => 'I',
            Column::Double => 'R',
            Column::Decimal => 'D',
            Column::Text => 'T',
            Column::Boolean => 'B',
            Column::Timestamp => 'P',
            Column::Any => '?',
        }
    }
}

impl From<&SqlType> for Column {
    fn from(t: &SqlType) -> Self {
        match t {
            SqlType::Int | SqlType::BigInt => Column::Integer,
            SqlType::Double => Column::Double,
            SqlType::Decimal(..) => Column::Decimal,
            SqlType::String => Column::Text,
            SqlType::Boolean => Column::Boolean,
            SqlType::Timestamp => Column::Timestamp,
            _ => Column::Any,
        }
    }
}

/// A session that runs a file's records.
struct SpateDb {
    session: Session,
    /// The absolute path of `tests/slt/data`, for `__DIR__`.
    data_dir: String,
}

impl SpateDb {
    fn new() -> Self {
        SpateDb {
            session: Session::new(JobConfig::local(1)),
            data_dir: data_dir().display().to_string(),
        }
    }
}

/// The directory of the tables' data files.
fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/slt/data")
}

/// One JSON value of a result row as the `.slt` files write it (see the module docs).
fn render(value: &serde_json::Value) -> String {
    match value {
        serde_json::Value::Null => "NULL".into(),
        serde_json::Value::String(s) if s.is_empty() => "(empty)".into(),
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

impl DB for SpateDb {
    type Error = SqlError;
    type ColumnType = Column;

    fn run(&mut self, sql: &str) -> Result<DBOutput<Column>, SqlError> {
        let sql = sql.replace("__DIR__", &self.data_dir);
        let statements = parse_script(&sql)?;
        match statements.last().map(|s| &s.statement) {
            Some(Statement::Query(_)) => {
                let result = self.session.query(&sql)?;
                let types = result.columns.iter().map(|(_, t)| t.into()).collect();
                let rows = result
                    .final_rows()
                    .iter()
                    .map(|line| {
                        let values: Vec<serde_json::Value> = serde_json::from_str(line)
                            .unwrap_or_else(|e| {
                                panic!("a result row is not a JSON array: {e}: {line}")
                            });
                        values.iter().map(render).collect()
                    })
                    .collect();
                Ok(DBOutput::Rows { types, rows })
            }
            Some(
                Statement::Describe(_)
                | Statement::Show(_)
                | Statement::Explain(_)
                | Statement::ExplainInsert(_)
                | Statement::Set(None),
            ) => {
                let outcomes = self.session.execute_script(&sql)?;
                let text = match outcomes.last() {
                    Some(Outcome::Info(text)) => text.clone(),
                    _ => String::new(),
                };
                Ok(DBOutput::Rows {
                    types: vec![Column::Text],
                    rows: text
                        .lines()
                        .filter(|l| !l.is_empty())
                        .map(|l| vec![l.to_string()])
                        .collect(),
                })
            }
            _ => {
                self.session.execute_script(&sql)?;
                Ok(DBOutput::StatementComplete(0))
            }
        }
    }

    fn engine_name(&self) -> &str {
        "spate"
    }
}

/// Runs every record of `path`, and fails with all the records that failed.
fn run_file(path: &Path) -> Result<(), Failed> {
    let records = sqllogictest::parse_file::<Column>(path).map_err(|e| e.to_string())?;
    let mut runner = Runner::new(|| async { Ok(SpateDb::new()) });
    runner.with_column_validator(sqllogictest::strict_column_validator);
    let mut failures = Vec::new();
    for record in records {
        if let Record::Halt { .. } = record {
            break;
        }
        if let Err(e) = runner.run(record) {
            failures.push(e.display(false).to_string());
        }
    }
    runner.shutdown();
    if failures.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{} failing record(s):\n\n{}",
            failures.len(),
            failures.join("\n")
        )
        .into())
    }
}

/// The `.slt` files under `dir`, recursively, in name order.
fn slt_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
        .map(|e| e.expect("a directory entry").path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            slt_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "slt") {
            out.push(path);
        }
    }
}

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/slt");
    let mut files = Vec::new();
    slt_files(&root, &mut files);
    assert!(!files.is_empty(), "no .slt file under {}", root.display());
    let trials = files
        .into_iter()
        .map(|path| {
            let name = path
                .strip_prefix(&root)
                .unwrap_or(&path)
                .display()
                .to_string();
            Trial::test(name, move || run_file(&path))
        })
        .collect();
    sqllogictest::harness::run(&Arguments::from_args(), trials).exit();
}
