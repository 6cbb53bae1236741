//! Execution: a [`Plan`] built as Spate DataStream operators over [`SqlRow`]s.
//!
//! * A scan is a source that decodes each record straight into a row of the table's
//!   columns, computed columns included, in the source's own decoder; the table's
//!   `WATERMARK FOR` is the source's watermark strategy, so it runs per split (file range),
//!   as Flink's sources do. The rowtime column is each row's event timestamp.
//! * A projection, and the filter under it, is one [`Calc`] (a `flat_map`: the
//!   subexpressions they share computed once per row); a filter alone is `filter`. The
//!   engine chains them with the source into one operator.
//! * A sink writes the rows in the table's connector's format (`filesystem` and `kafka`: a
//!   JSON object per row, as Flink's `json` format).
//!
//! Operator names come from the plan (`scan.bid`, `filter`, `calc`, `project`) for the dashboard
//! and metrics; the engine derives each operator's uid from the job graph's structure, which
//! the same SQL text always gives the same way.

use std::collections::HashMap;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use spate_connectors::files::json::{RowBuilder, RowDecoder};
use spate_connectors::{
    CollectHandle, CollectSink, CsvSource, DiscardSink, FileSink, JsonLinesSource, SingleFileSink,
};
use spate_dataflow::{
    Change, CumulativeEventTimeWindows, DataStream, EventTimeSessionWindows, EventTimeTrigger,
    RowKind, SlidingEventTimeWindows, StreamEnv, TimeWindow, Timestamp, Trigger,
    TumblingEventTimeWindows, WatermarkGenerator, WatermarkStrategy, WindowAssigner, WindowBuf,
    WindowedStream,
};
use spate_types::{
    BadRecordPolicy, DataType, Field, Schema, Sink, SinkContext, SinkWriter, SpateError,
    SpateResult,
};

use crate::agg::{GroupAggregate, RankAggregate, Ranked, RetractAggregate, WindowAggregate};
use crate::calc::{Calc, Projection};
use crate::catalog::Table;
use crate::expr::Scalar;
use crate::format::{write_flink_json, write_json_row};
use crate::plan::{GroupWindow, JoinSpec, Node, Plan};
use crate::prune;
use crate::types::{Datum, SqlKey, SqlRow, SqlType};
use crate::SqlError;

/// A plan's rows as a stream: inserts only, or a changelog.
#[derive(Clone)]
pub enum Rows {
    /// Inserts only.
    Append(DataStream<SqlRow>),
    /// A changelog (`+I -U +U -D`).
    Changes(DataStream<Change<SqlRow>>),
}

/// Builds `plan`'s operators on `env`.
///
/// A subplan that occurs more than once (the same table scanned for two views, as
/// Nexmark's `bid` and `auction` both read `datagen`; q5's window aggregate on both sides of
/// its join) is built once and its stream fans out, as Flink's planner reuses sub-plans
/// (`table.optimizer.reuse-sub-plan-enabled`, on by default): a table is read and decoded
/// once per job, however many times the query names it.
pub fn build(env: &StreamEnv, plan: &Plan) -> Result<Rows, SqlError> {
    let mut uses = HashMap::new();
    count_uses(plan, &mut uses);
    Builder {
        env,
        built: HashMap::new(),
        uses,
        reads: prune::reads(plan),
    }
    .build(plan)
}

/// How many times each subplan (by its `Debug` text) is an input in `plan`, counted once
/// per distinct parent, as the builder builds them.
fn count_uses(plan: &Plan, uses: &mut HashMap<String, usize>) {
    for input in plan.inputs() {
        let n = uses.entry(format!("{:?}", input.node)).or_default();
        *n += 1;
        // A subplan's own inputs are built once, whatever number of parents it has.
        if *n == 1 {
            count_uses(input, uses);
        }
    }
}

/// Builds a plan's nodes, each distinct subplan once.
struct Builder<'a> {
    env: &'a StreamEnv,
    /// The streams built so far, by their subplan (its `Debug` text: the node with all its
    /// inputs, expressions and tables).
    built: HashMap<String, Rows>,
    /// How many parents each subplan has: a filter with one is fused with the projection
    /// over it.
    uses: HashMap<String, usize>,
    /// What the plan reads of each table: the rest is not decoded.
    reads: prune::TableReads,
}

impl Builder<'_> {
    fn build(&mut self, plan: &Plan) -> Result<Rows, SqlError> {
        let key = format!("{:?}", plan.node);
        if let Some(rows) = self.built.get(&key) {
            return Ok(rows.clone());
        }
        let rows = self.node(plan)?;
        self.built.insert(key, rows.clone());
        Ok(rows)
    }

    /// `calc` over the rows of `input`.
    fn calc(&mut self, input: &Plan, calc: Calc, name: &str) -> Result<Rows, SqlError> {
        let calc = Arc::new(calc);
        Ok(match self.build(input)? {
            Rows::Append(s) => {
                Rows::Append(s.flat_map(move |row: SqlRow| calc.apply(row)).name(name))
            }
            Rows::Changes(s) => Rows::Changes(
                s.flat_map(move |c: Change<SqlRow>| {
                    let kind = c.kind;
                    calc.apply(c.row).map(|row| Change { kind, row })
                })
                .name(name),
            ),
        })
    }

    fn node(&mut self, plan: &Plan) -> Result<Rows, SqlError> {
        let env = self.env;
        Ok(match &plan.node {
            Node::Scan(table) => Rows::Append(scan(env, table, self.reads.get(&table.name))?),
            Node::Filter(input, predicate) => {
                let calc = Calc::new(input.scope.columns.len(), Some(predicate), None);
                if calc.shared() > 0 {
                    return self.calc(input, calc, "filter");
                }
                let predicate = predicate.clone();
                match self.build(input)? {
                    Rows::Append(s) => Rows::Append(
                        s.filter(move |row: &SqlRow| predicate.test(row))
                            .name("filter"),
                    ),
                    Rows::Changes(s) => Rows::Changes(
                        s.filter(move |c: &Change<SqlRow>| predicate.test(&c.row))
                            .name("filter"),
                    ),
                }
            }
            Node::Project(input, exprs) => match &input.node {
                // Columns only this projection reads of a lookup join are taken as the join
                // makes its row: no joined row is built to be cut.
                Node::Join(left, right, spec)
                    if spec.lookup
                        && spec.residual.is_none()
                        && self.uses.get(&format!("{:?}", input.node)) == Some(&1)
                        && distinct_columns(exprs).is_some() =>
                {
                    let columns = distinct_columns(exprs).unwrap_or_default();
                    self.lookup_join(left, right, spec, Some(columns))?
                }
                // A filter only this projection reads runs with it, as one calc.
                Node::Filter(filtered, predicate)
                    if self.uses.get(&format!("{:?}", input.node)) == Some(&1) =>
                {
                    let width = filtered.scope.columns.len();
                    let calc = Calc::new(width, Some(predicate), Some(exprs));
                    self.calc(filtered, calc, "calc")?
                }
                _ => {
                    let width = input.scope.columns.len();
                    self.calc(input, Calc::new(width, None, Some(exprs)), "project")?
                }
            },
            Node::Rank(input, rank) => {
                let Rows::Append(s) = self.build(input)? else {
                    return Err(SqlError::plan(
                        "ROW_NUMBER over an updating (changelog) input is not supported yet",
                    ));
                };
                let Some(limit) = rank.limit else {
                    return Err(SqlError::plan(
                    "ROW_NUMBER() OVER (...) needs a filter on its rank (WHERE rank <= N): Spate runs it as a top-N",
                ));
                };
                let keys: Arc<[Scalar]> = rank.partition.clone().into();
                Rows::Changes(
                    s.key_by(move |row: &SqlRow| key_of(&keys, row))
                        .updating(RankAggregate {
                            order: rank.order.clone().into(),
                            limit,
                            ties_first: rank.keep_last && limit == 1,
                        })
                        .name(if rank.keep_last && limit == 1 {
                            "deduplicate"
                        } else {
                            "top-n"
                        })
                        .map(|c: Change<Ranked>| Change {
                            kind: c.kind,
                            row: c.row.into_row(),
                        })
                        .name("ranked-rows"),
                )
            }
            Node::WindowTvf(input, window) => {
                // Not under an aggregate: a row per window the row is in.
                let Rows::Append(s) = self.build(input)? else {
                    return Err(SqlError::plan(
                    "a window table function over an updating (changelog) input is not supported",
                ));
                };
                let ms = |v: i64| std::time::Duration::from_millis(v as u64);
                let assigner: Arc<dyn WindowAssigner<SqlRow, W = TimeWindow>> = match *window {
                    GroupWindow::Tumble { size } => {
                        Arc::new(TumblingEventTimeWindows::of(ms(size)))
                    }
                    GroupWindow::Hop { slide, size } => {
                        Arc::new(SlidingEventTimeWindows::of(ms(size), ms(slide)))
                    }
                    GroupWindow::Cumulate { step, size } => Arc::new(cumulative(step, size)?),
                    _ => {
                        return Err(SqlError::plan(
                        "a SESSION window table function must be aggregated (GROUP BY window_start, window_end)",
                    ))
                    }
                };
                let rowtime = input
                    .rowtime
                    .ok_or_else(|| SqlError::plan("a window needs a rowtime"))?;
                Rows::Append(
                    s.flat_map(move |row: SqlRow| {
                        let ts = row.get(rowtime).and_then(Datum::as_i64).unwrap_or(0);
                        let mut windows = WindowBuf::new();
                        assigner.assign_windows(&row, ts, 0, &mut windows);
                        let mut out = Vec::with_capacity(windows.len());
                        for w in windows {
                            let mut r = row.clone();
                            r.push(Datum::Timestamp(w.start));
                            r.push(Datum::Timestamp(w.end));
                            r.push(Datum::Timestamp(w.end - 1));
                            out.push(r);
                        }
                        out
                    })
                    .name("window-tvf"),
                )
            }
            Node::Join(left, right, spec) if spec.lookup => {
                self.lookup_join(left, right, spec, None)?
            }
            Node::Join(left, right, spec) => {
                let (Rows::Append(l), Rows::Append(r)) = (self.build(left)?, self.build(right)?)
                else {
                    return Err(SqlError::plan(
                        "a join of an updating (changelog) input is not supported yet",
                    ));
                };
                if spec.left_keys.is_empty() {
                    return Err(SqlError::plan(
                    "a join needs an equality between a column of each side (a cross join of streams would keep every row)",
                ));
                }
                let (lk, rk): (Arc<[Scalar]>, Arc<[Scalar]>) = (
                    spec.left_keys.clone().into(),
                    spec.right_keys.clone().into(),
                );
                // Rows that a time bound proves can meet nothing more are dropped.
                let (left_expiry, right_expiry) =
                    crate::join::expiries(left, right, spec.residual.as_ref());
                let joined = l
                    .key_by(move |row: &SqlRow| key_of(&lk, row))
                    .connect(&r.key_by(move |row: &SqlRow| key_of(&rk, row)))
                    .process(crate::join::RegularJoin {
                        residual: spec.residual.clone(),
                        left_expiry,
                        right_expiry,
                    })
                    .name("join");
                Rows::Append(joined)
            }
            Node::Union(inputs) => {
                let mut built = Vec::with_capacity(inputs.len());
                for input in inputs {
                    built.push(self.build(input)?);
                }
                if built.iter().all(|r| matches!(r, Rows::Append(_))) {
                    let streams: Vec<DataStream<SqlRow>> = built
                        .into_iter()
                        .filter_map(|r| match r {
                            Rows::Append(s) => Some(s),
                            Rows::Changes(_) => None,
                        })
                        .collect();
                    Rows::Append(streams[0].union(&streams[1..]).name("union"))
                } else {
                    // Inserts of an append-only input join the changelog as `+I`.
                    let streams: Vec<DataStream<Change<SqlRow>>> = built
                        .into_iter()
                        .map(|r| match r {
                            Rows::Changes(s) => s,
                            Rows::Append(s) => s
                                .map(|row: SqlRow| Change {
                                    kind: RowKind::Insert,
                                    row,
                                })
                                .name("as-changes"),
                        })
                        .collect();
                    Rows::Changes(streams[0].union(&streams[1..]).name("union"))
                }
            }
            Node::WindowAggregate(input, window, keys, calls) => {
                let Rows::Append(s) = self.build(input)? else {
                    return Err(SqlError::plan(
                        "a window aggregate over an updating (changelog) input is not supported",
                    ));
                };
                let keys: Arc<[Scalar]> = keys.clone().into();
                let keyed = s.key_by(move |row: &SqlRow| key_of(&keys, row));
                let agg = WindowAggregate {
                    calls: calls.clone().into(),
                };
                let ms = |v: i64| std::time::Duration::from_millis(v as u64);
                let out = match *window {
                    GroupWindow::Tumble { size } => {
                        window_rows(keyed.window(TumblingEventTimeWindows::of(ms(size))), agg)
                    }
                    GroupWindow::Hop { slide, size } => window_rows(
                        keyed.window(SlidingEventTimeWindows::of(ms(size), ms(slide))),
                        agg,
                    ),
                    GroupWindow::Cumulate { step, size } => {
                        window_rows(keyed.window(cumulative(step, size)?), agg)
                    }
                    GroupWindow::Session { gap } => window_rows(
                        keyed.window(EventTimeSessionWindows::with_gap(ms(gap))),
                        agg,
                    ),
                    GroupWindow::Columns { start, end } => {
                        window_rows(keyed.window(ColumnWindows { start, end }), agg)
                    }
                };
                Rows::Append(out.name("window-aggregate"))
            }
            Node::Aggregate(input, keys, calls) => {
                let keys: Arc<[Scalar]> = keys.clone().into();
                let s = match self.build(input)? {
                    Rows::Append(s) => s,
                    Rows::Changes(s) => {
                        return Ok(Rows::Changes(
                            s.key_by(move |c: &Change<SqlRow>| key_of(&keys, &c.row))
                                .updating(RetractAggregate {
                                    calls: calls.clone().into(),
                                })
                                .name("group-aggregate"),
                        ))
                    }
                };
                Rows::Changes(
                    s.key_by(move |row: &SqlRow| key_of(&keys, row))
                        .updating(GroupAggregate::new(calls.clone().into()))
                        .name("group-aggregate"),
                )
            }
        })
    }

    /// A lookup join (`FOR SYSTEM_TIME AS OF`): the right side, a table, is read whole now
    /// and each left row looks its matches up in it. With `columns` (positions in the
    /// joined row, each once, and no residual condition), only those columns are made.
    fn lookup_join(
        &mut self,
        left: &Plan,
        right: &Plan,
        spec: &JoinSpec,
        columns: Option<Vec<usize>>,
    ) -> Result<Rows, SqlError> {
        let Rows::Append(l) = self.build(left)? else {
            return Err(SqlError::plan(
                "a lookup join of an updating (changelog) input is not supported yet",
            ));
        };
        // The table, read now, by its keys (a NULL key matches nothing).
        let mut index: rustc_hash::FxHashMap<SqlRow, Vec<SqlRow>> = Default::default();
        for row in static_rows(right)? {
            let key: SqlRow = spec.right_keys.iter().map(|k| k.eval(&row)).collect();
            if !key.iter().any(Datum::is_null) {
                index.entry(key).or_default().push(row);
            }
        }
        let (index, keys, residual) = (
            Arc::new(index),
            spec.left_keys.clone(),
            spec.residual.clone(),
        );
        let width = left.scope.columns.len();
        Ok(Rows::Append(
            l.flat_map(move |row: SqlRow| {
                let key: smallvec::SmallVec<[Datum; 2]> =
                    keys.iter().map(|k| k.eval(&row)).collect();
                let matches = index.get(&key[..]).map_or(&[][..], Vec::as_slice);
                // A key mostly meets one row: the left row is moved into the last match's
                // output, not copied.
                let mut out = smallvec::SmallVec::<[SqlRow; 1]>::new();
                if let Some((last, rest)) = matches.split_last() {
                    match &columns {
                        Some(columns) => {
                            for other in rest {
                                out.push(take_columns(row.clone(), other, width, columns));
                            }
                            out.push(take_columns(row, last, width, columns));
                        }
                        None => {
                            for other in rest {
                                out.extend(joined(&row, other, residual.as_ref()));
                            }
                            out.extend(joined_owned(row, last, residual.as_ref()));
                        }
                    }
                }
                out
            })
            .name("lookup-join"),
        ))
    }
}

/// The columns `exprs` name, if each is a column named once.
fn distinct_columns(exprs: &[Scalar]) -> Option<Vec<usize>> {
    let mut columns = Vec::with_capacity(exprs.len());
    for e in exprs {
        match e {
            Scalar::Col(c) if !columns.contains(c) => columns.push(*c),
            _ => return None,
        }
    }
    Some(columns)
}

/// `columns` (distinct positions) of the row `left` (`width` columns) joined with `right`:
/// the left's values moved, the right's cloned.
fn take_columns(mut left: SqlRow, right: &SqlRow, width: usize, columns: &[usize]) -> SqlRow {
    columns
        .iter()
        .map(|&c| match c.checked_sub(width) {
            None => left.get_mut(c).map(std::mem::take).unwrap_or_default(),
            Some(r) => right.get(r).cloned().unwrap_or_default(),
        })
        .collect()
}

/// The key of `row`: the values of `keys` on it.
fn key_of(keys: &[Scalar], row: &[Datum]) -> SqlKey {
    keys.iter().map(|k| k.eval(row)).collect()
}

/// [`joined`] of a left row that is not needed after.
pub(crate) fn joined_owned(
    mut left: SqlRow,
    right: &SqlRow,
    residual: Option<&Scalar>,
) -> Option<SqlRow> {
    left.extend(right.iter().cloned());
    residual.is_none_or(|p| p.test(&left)).then_some(left)
}

/// [`joined`] of a right row that is not needed after.
pub(crate) fn joined_to_owned(
    left: &SqlRow,
    right: SqlRow,
    residual: Option<&Scalar>,
) -> Option<SqlRow> {
    let mut row = Vec::with_capacity(left.len() + right.len());
    row.extend(left.iter().cloned());
    row.extend(right);
    residual.is_none_or(|p| p.test(&row)).then_some(row)
}

/// The row of `left` and `right` joined, if it meets the residual condition.
pub(crate) fn joined(left: &SqlRow, right: &SqlRow, residual: Option<&Scalar>) -> Option<SqlRow> {
    let mut row = Vec::with_capacity(left.len() + right.len());
    row.extend(left.iter().cloned());
    row.extend(right.iter().cloned());
    residual.is_none_or(|p| p.test(&row)).then_some(row)
}

/// `CUMULATE`'s windows (the planner checked that the size is a multiple of the step).
fn cumulative(step: i64, size: i64) -> Result<CumulativeEventTimeWindows, SqlError> {
    let ms = |v: i64| std::time::Duration::from_millis(v as u64);
    CumulativeEventTimeWindows::of(ms(step), ms(size)).ok_or_else(|| {
        SqlError::plan("CUMULATE's size must be a whole multiple of its step".to_string())
    })
}

/// The windows rows name themselves in their `window_start` and `window_end` columns (the
/// results of a window aggregate, grouped by their window again).
struct ColumnWindows {
    start: usize,
    end: usize,
}

impl WindowAssigner<SqlRow> for ColumnWindows {
    type W = TimeWindow;
    fn assign_windows(
        &self,
        row: &SqlRow,
        _: Timestamp,
        _: Timestamp,
        out: &mut WindowBuf<TimeWindow>,
    ) {
        if let (Some(Datum::Timestamp(s)), Some(Datum::Timestamp(e))) =
            (row.get(self.start), row.get(self.end))
        {
            out.push(TimeWindow::new(*s, *e));
        }
    }
    fn default_trigger(&self) -> Arc<dyn Trigger<SqlRow, TimeWindow>> {
        Arc::new(EventTimeTrigger)
    }
    fn is_event_time(&self) -> bool {
        true
    }
}

/// A window aggregate's rows: the key, the aggregates, the window's start, end and rowtime.
fn window_rows(
    windowed: WindowedStream<SqlKey, SqlRow, TimeWindow>,
    agg: WindowAggregate,
) -> DataStream<SqlRow> {
    windowed.aggregate_with(agg, |key: &SqlKey, w, values: SqlRow, out| {
        let mut row = Vec::with_capacity(key.len() + values.len() + 3);
        row.extend(key.iter().cloned());
        row.extend(values);
        row.push(Datum::Timestamp(w.window.start));
        row.push(Datum::Timestamp(w.window.end));
        row.push(Datum::Timestamp(w.window.end - 1));
        out.push(row);
    })
}

/// The types of a table's physical columns as a decoder's schema.
fn schema_of<'a>(
    columns: impl Iterator<Item = (&'a str, &'a SqlType)>,
) -> Result<Schema, SqlError> {
    let fields = columns
        .map(|(name, ty)| Ok(Field::new(name, data_type(ty)?)))
        .collect::<Result<Vec<_>, SqlError>>()?;
    Schema::try_new(fields).map_err(SqlError::plan)
}

fn data_type(ty: &SqlType) -> Result<DataType, SqlError> {
    Ok(match ty {
        SqlType::Boolean => DataType::Bool,
        SqlType::Int | SqlType::BigInt => DataType::Int64,
        SqlType::Double => DataType::Float64,
        SqlType::String => DataType::String,
        SqlType::Timestamp => DataType::Timestamp,
        SqlType::Decimal(precision, scale) => DataType::Decimal {
            precision: *precision,
            scale: *scale,
        },
        SqlType::Row(fields) => {
            DataType::Row(schema_of(fields.iter().map(|(n, t)| (n.as_str(), t)))?)
        }
        SqlType::Interval | SqlType::Null => {
            return Err(SqlError::plan(format!(
                "a JSON column cannot be read as {ty} yet"
            )))
        }
    })
}

/// Decodes JSON values straight into [`Datum`]s: the schema decoder's [`RowBuilder`].
struct Datums;

impl RowBuilder for Datums {
    type Value = Datum;
    type Shape = ();
    fn shape(_: &Schema) {}
    fn null() -> Datum {
        Datum::Null
    }
    fn is_null(value: &Datum) -> bool {
        value.is_null()
    }
    fn bool(b: bool) -> Datum {
        Datum::Bool(b)
    }
    fn int(i: i64) -> Datum {
        Datum::Int(i)
    }
    fn timestamp(ms: i64) -> Datum {
        Datum::Timestamp(ms)
    }
    fn float(f: f64) -> Datum {
        Datum::Double(f)
    }
    fn decimal(unscaled: i64, _scale: u8) -> Datum {
        // The column's scale is its type's.
        Datum::Decimal(unscaled)
    }
    fn string(s: String) -> Datum {
        Datum::Str(s.into())
    }
    fn str(s: &str) -> Datum {
        // One allocation, where a `String` first would make two.
        Datum::Str(s.into())
    }
    fn row(_: &(), values: Vec<Datum>) -> Datum {
        Datum::Row(values.into())
    }
    fn nested_row(_: &(), values: &mut [Datum]) -> Datum {
        // One allocation: the iterator's exact length lets the `Arc` collect in place.
        Datum::Row(values.iter_mut().map(std::mem::take).collect())
    }
}

/// A source over `table` with its watermark strategy.
fn scan(
    env: &StreamEnv,
    table: &Arc<Table>,
    reads: Option<&Vec<prune::Read>>,
) -> Result<DataStream<SqlRow>, SqlError> {
    let connector = table.connector()?;
    let stream = match connector {
        "filesystem" => {
            // Flink's legacy option names (`connector.path`, `format.type`) give URLs.
            let path = table_path(table)?;
            let format = table
                .option("format")
                .or_else(|| table.option("format.type"))
                .unwrap_or("json");
            if format == "csv" {
                return csv_scan(env, table, path);
            }
            if format != "json" {
                return Err(SqlError::plan(format!(
                    "the table `{}`: the filesystem source reads 'json' (JSON lines) or 'csv', not '{format}'",
                    table.name
                )));
            }
            let source =
                JsonLinesSource::<SqlRow>::with_decoder(PathBuf::from(path), json_rows(table, reads)?)
                    .policy(json_policy(table));
            env.from_source(source)
        }
        #[cfg(feature = "kafka")]
        "kafka" => {
            let rows = crate::kafka::scan(env, table, json_rows(table, reads)?, json_policy(table))?;
            return Ok(with_watermark(rows, table));
        }
        #[cfg(not(feature = "kafka"))]
        "kafka" => return Err(no_kafka(table)),
        "nexmark" => {
            let rows = crate::nexmark::scan(env, table, reads, row_maker(table))?;
            return Ok(with_watermark(rows, table));
        }
        other => {
            return Err(SqlError::plan(format!(
                "the table `{}`: the connector '{other}' cannot be read (sources: filesystem, kafka, nexmark)",
                table.name
            )))
        }
    }
    .name(&format!("scan.{}", table.name));
    Ok(with_watermark(stream, table))
}

/// A `kafka` table in a build without Kafka (spate-sql's `kafka` feature; the `spate`
/// binary has it).
#[cfg(not(feature = "kafka"))]
fn no_kafka(table: &Table) -> SqlError {
    SqlError::plan(format!(
        "the table `{}`: this build has no Kafka connector (spate-sql's `kafka` feature)",
        table.name
    ))
}

/// A JSON value (one line, one message) of `table` as its row: only the columns and nested
/// fields the plan reads (`reads`) are decoded, the others skipped unbuilt; computed columns
/// are evaluated.
pub(crate) type JsonRows = Arc<dyn Fn(&[u8]) -> Result<SqlRow, String> + Send + Sync>;

fn json_rows(table: &Table, reads: Option<&Vec<prune::Read>>) -> Result<JsonRows, SqlError> {
    let schema = schema_of(table.physical().map(|c| (c.name.as_str(), &c.ty)))?;
    let physical = prune::physical_reads(table, reads);
    let decoder = RowDecoder::<Datums>::projected(&schema, &|at: &[usize]| match (
        physical.get(at[0]),
        at.len(),
    ) {
        (None, _) => true,
        (Some(read), 1) => read.any(),
        (Some(read), _) => read.field(at[1]),
    })
    .spare(table.columns.len() - physical.len());
    let make = row_maker(table);
    Ok(Arc::new(move |value: &[u8]| {
        decoder.decode_fields(value).map(&make)
    }))
}

/// Flink's `json.ignore-parse-errors`: a value that does not decode is dropped (counted)
/// rather than failing the job.
fn json_policy(table: &Table) -> BadRecordPolicy {
    match table.option("json.ignore-parse-errors") {
        Some("true") => BadRecordPolicy::Drop,
        _ => BadRecordPolicy::Fail,
    }
}

/// The table's `WATERMARK FOR` on its source's stream (so per split), or the stream as it is.
fn with_watermark(stream: DataStream<SqlRow>, table: &Table) -> DataStream<SqlRow> {
    match &table.watermark {
        Some((rowtime, watermark)) => {
            let rowtime = *rowtime;
            let watermark = watermark.clone();
            let of_rowtime = rises_with(&watermark, rowtime);
            stream.assign_timestamps_and_watermarks(
                WatermarkStrategy::for_generator(move || SqlWatermark {
                    expr: watermark.clone(),
                    rowtime: of_rowtime.then_some(rowtime),
                    current: None,
                    max_rowtime: None,
                })
                .with_timestamp_assigner(move |row: &SqlRow, _| {
                    match row.get(rowtime) {
                        Some(Datum::Timestamp(ms)) => *ms,
                        _ => spate_dataflow::time::NO_TIMESTAMP,
                    }
                }),
            )
        }
        None => stream,
    }
}

/// A CSV filesystem table (Flink's `csv` format: no header, `,` between fields, or
/// `'csv.field-delimiter'`): each field parsed as its column's type in the source's decoder,
/// an empty field `NULL` (but for strings), computed columns evaluated there too.
fn csv_scan(
    env: &StreamEnv,
    table: &Arc<Table>,
    path: &str,
) -> Result<DataStream<SqlRow>, SqlError> {
    let (delimiter, policy, decode) = csv_format(table)?;
    let decoder =
        Arc::new(move |record: &csv::ByteRecord, _: Option<&csv::ByteRecord>| decode(record));
    let source = CsvSource::<SqlRow>::with_decoder(PathBuf::from(path), decoder)
        .has_headers(false)
        .delimiter(delimiter)
        .policy(policy);
    let stream = env
        .from_source(source)
        .name(&format!("scan.{}", table.name));
    Ok(with_watermark(stream, table))
}

/// A CSV table's record decoder, with the delimiter and the bad-record policy of its
/// options.
type CsvFormat = (
    u8,
    BadRecordPolicy,
    Box<dyn Fn(&csv::ByteRecord) -> Result<SqlRow, String> + Send + Sync>,
);

fn csv_format(table: &Table) -> Result<CsvFormat, SqlError> {
    let types: Vec<SqlType> = table.physical().map(|c| c.ty.clone()).collect();
    let names: Vec<String> = table.physical().map(|c| c.name.clone()).collect();
    for (name, ty) in names.iter().zip(&types) {
        if matches!(ty, SqlType::Row(_)) {
            return Err(SqlError::plan(format!(
                "the table `{}`: CSV cannot hold the nested row `{name}`",
                table.name
            )));
        }
    }
    let delimiter = match table.option("csv.field-delimiter") {
        None => b',',
        Some(d) if d.len() == 1 => d.as_bytes()[0],
        Some(d) => {
            return Err(SqlError::plan(format!(
                "the table `{}`: 'csv.field-delimiter' must be one character, not '{d}'",
                table.name
            )))
        }
    };
    let make = row_maker(table);
    let policy = match table.option("csv.ignore-parse-errors") {
        Some("true") => BadRecordPolicy::Drop,
        _ => BadRecordPolicy::Fail,
    };
    let decode = move |record: &csv::ByteRecord| {
        if record.len() != types.len() {
            return Err(format!(
                "{} fields, the table has {} columns",
                record.len(),
                types.len()
            ));
        }
        let mut values = Vec::with_capacity(types.len());
        for ((field, ty), name) in record.iter().zip(&types).zip(&names) {
            let text = std::str::from_utf8(field)
                .map_err(|_| format!("the field `{name}` is not UTF-8"))?;
            let value = if text.is_empty() && *ty != SqlType::String {
                Datum::Null
            } else {
                let v = crate::expr::cast_value(Datum::str(text), &SqlType::String, ty);
                if v.is_null() {
                    return Err(format!("the field `{name}`: `{text}` is not a {ty}"));
                }
                v
            };
            values.push(value);
        }
        Ok(make(values))
    };
    Ok((delimiter, policy, Box::new(decode)))
}

/// The rows of a lookup join's side: its filesystem table read whole now, then the side's
/// filters and projections.
fn static_rows(plan: &Plan) -> Result<Vec<SqlRow>, SqlError> {
    match &plan.node {
        Node::Scan(table) => read_table(table),
        Node::Filter(input, predicate) => Ok(static_rows(input)?
            .into_iter()
            .filter(|row| predicate.test(row))
            .collect()),
        Node::Project(input, exprs) => {
            let projection = Projection::new(exprs);
            Ok(static_rows(input)?
                .into_iter()
                .map(|row| projection.apply(row))
                .collect())
        }
        _ => Err(SqlError::plan(
            "a lookup join's table can only be filtered and projected",
        )),
    }
}

/// The path a filesystem table reads (Flink's legacy `connector.path` URLs too).
fn table_path(table: &Table) -> Result<&str, SqlError> {
    let path = table
        .option("path")
        .or_else(|| table.option("connector.path"))
        .ok_or_else(|| {
            SqlError::plan(format!(
                "the filesystem table `{}` has no 'path'",
                table.name
            ))
        })?;
    Ok(path.strip_prefix("file://").unwrap_or(path))
}

/// Every row of a filesystem table (a file, or the files of a folder in name order).
fn read_table(table: &Table) -> Result<Vec<SqlRow>, SqlError> {
    let path = PathBuf::from(table_path(table)?);
    let failed = |what: &dyn std::fmt::Display| {
        SqlError::plan(format!("the lookup table `{}`: {what}", table.name))
    };
    let files: Vec<PathBuf> = if path.is_dir() {
        let mut files: Vec<PathBuf> = std::fs::read_dir(&path)
            .map_err(|e| failed(&format_args!("{}: {e}", path.display())))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.is_file())
            .collect();
        files.sort();
        files
    } else {
        vec![path]
    };
    let format = table
        .option("format")
        .or_else(|| table.option("format.type"))
        .unwrap_or("json");
    let at = |file: &std::path::Path, line: usize, why: &str| {
        failed(&format_args!("{}, line {line}: {why}", file.display()))
    };
    let mut rows = Vec::new();
    match format {
        "csv" => {
            let (delimiter, policy, decode) = csv_format(table)?;
            for file in &files {
                let mut reader = csv::ReaderBuilder::new()
                    .has_headers(false)
                    .delimiter(delimiter)
                    .from_path(file)
                    .map_err(|e| failed(&format_args!("{}: {e}", file.display())))?;
                for (i, record) in reader.byte_records().enumerate() {
                    let record = record.map_err(|e| at(file, i + 1, &e.to_string()))?;
                    match decode(&record) {
                        Ok(row) => rows.push(row),
                        Err(_) if policy == BadRecordPolicy::Drop => {}
                        Err(why) => return Err(at(file, i + 1, &why)),
                    }
                }
            }
        }
        "json" => {
            let schema = schema_of(table.physical().map(|c| (c.name.as_str(), &c.ty)))?;
            let decoder = RowDecoder::<Datums>::with_builder(&schema);
            let make = row_maker(table);
            let drop = table.option("json.ignore-parse-errors") == Some("true");
            for file in &files {
                let text = std::fs::read(file)
                    .map_err(|e| failed(&format_args!("{}: {e}", file.display())))?;
                for (i, line) in text.split(|&b| b == b'\n').enumerate() {
                    let line = line.strip_suffix(b"\r").unwrap_or(line);
                    if line.iter().all(u8::is_ascii_whitespace) {
                        continue;
                    }
                    match decoder.decode_fields(line) {
                        Ok(values) => rows.push(make(values)),
                        Err(_) if drop => {}
                        Err(why) => return Err(at(file, i + 1, &why)),
                    }
                }
            }
        }
        other => {
            return Err(failed(&format_args!(
                "the filesystem connector reads 'json' or 'csv', not '{other}'"
            )))
        }
    }
    Ok(rows)
}

/// Turns a decoded physical row into the table's full row (computed columns evaluated).
fn row_maker(table: &Table) -> impl Fn(Vec<Datum>) -> SqlRow + Send + Sync + 'static {
    let computed: Vec<Option<Scalar>> = table.columns.iter().map(|c| c.computed.clone()).collect();
    let physical_count = computed.iter().filter(|c| c.is_none()).count();
    // Computed columns after all the physical ones (as Nexmark's `dateTime`): appended to
    // the decoded row itself.
    let trailing = computed[..physical_count].iter().all(Option::is_none);
    let exprs: Vec<Scalar> = computed.iter().flatten().cloned().collect();
    move |mut physical: Vec<Datum>| {
        if exprs.is_empty() {
            return physical;
        }
        physical.resize(physical_count, Datum::Null);
        if trailing {
            physical.reserve_exact(exprs.len());
            for e in &exprs {
                let v = e.eval(&physical[..physical_count]);
                physical.push(v);
            }
            return physical;
        }
        let values: Vec<Datum> = exprs.iter().map(|e| e.eval(&physical)).collect();
        let (mut physical, mut values) = (physical.into_iter(), values.into_iter());
        computed
            .iter()
            .map(|c| {
                match c {
                    None => physical.next(),
                    Some(_) => values.next(),
                }
                .unwrap_or_default()
            })
            .collect()
    }
}

/// Flink SQL's watermark: the largest value the `WATERMARK FOR ... AS expr` expression has
/// taken on the rows seen so far (Flink's `WatermarkAssignerOperator`: no `- 1 ms`, unlike
/// the DataStream API's bounded out-of-orderness).
///
/// When the expression is the rowtime, or the rowtime plus or minus a constant (`rowtime -
/// INTERVAL '4' SECOND`, nearly every table), its largest value is its value at the largest
/// rowtime: a row costs a comparison, and the expression is computed when a watermark is
/// emitted.
struct SqlWatermark {
    expr: Scalar,
    /// The rowtime column, when the expression rises with it and reads nothing else.
    rowtime: Option<usize>,
    current: Option<Timestamp>,
    /// The largest rowtime seen, with `rowtime`.
    max_rowtime: Option<Timestamp>,
}

/// Whether `expr` is the column `rowtime`, or it plus or minus a constant.
fn rises_with(expr: &Scalar, rowtime: usize) -> bool {
    use crate::expr::ArithOp;
    match expr {
        Scalar::Col(c) => *c == rowtime,
        Scalar::Arith(ArithOp::Add | ArithOp::Sub, _, a, b) => {
            matches!(**a, Scalar::Col(c) if c == rowtime) && matches!(**b, Scalar::Lit(_))
        }
        _ => false,
    }
}

impl WatermarkGenerator<SqlRow> for SqlWatermark {
    fn on_event(&mut self, row: &SqlRow, _timestamp: Timestamp) {
        match self.rowtime {
            Some(c) => {
                if let Some(Datum::Timestamp(t)) = row.get(c) {
                    self.max_rowtime = Some(self.max_rowtime.map_or(*t, |m| m.max(*t)));
                }
            }
            None => {
                if let Datum::Timestamp(w) = self.expr.eval(row) {
                    self.current = Some(self.current.map_or(w, |c| c.max(w)));
                }
            }
        }
    }
    fn on_periodic_emit(&mut self) -> Option<Timestamp> {
        if let (Some(c), Some(t)) = (self.rowtime, self.max_rowtime.take()) {
            let mut row = vec![Datum::Null; c + 1];
            row[c] = Datum::Timestamp(t);
            if let Datum::Timestamp(w) = self.expr.eval(&row) {
                self.current = Some(self.current.map_or(w, |cur| cur.max(w)));
            }
        }
        self.current
    }
}

/// Where an `INSERT INTO`'s rows go.
#[derive(Clone)]
pub enum Target {
    /// The table's own connector.
    Table(Arc<Table>),
    /// A file of JSON-array lines (`--redirect table=PATH`), whatever the table's connector:
    /// one file, written by worker 0.
    File(PathBuf),
    /// Standard output, as the SQL client's changelog result mode (`+I[v1, v2]`): the
    /// result of a `SELECT`. Holds the column names.
    Print(Vec<String>),
    /// Nowhere (`--discard table`).
    Discard,
    /// Memory, for [`crate::Session::query`] (tests, embedding): every change, in one
    /// process.
    Collect(CollectHandle<Change<SqlRow>>),
}

/// Attaches the sink of `target` to `rows` (of `types`). A changelog is written with each
/// row's kind in front (`+I\t[...]` in files, `-U[...]` when printed).
pub fn sink(rows: Rows, types: Vec<SqlType>, target: &Target) -> Result<(), SqlError> {
    let types: Arc<[SqlType]> = types.into();
    let rows: DataStream<Change<SqlRow>> = match rows {
        Rows::Append(s) => {
            // Appends are written without a kind; one code path for both.
            s.map(|row| Change {
                kind: RowKind::Insert,
                row,
            })
            .name("rows")
        }
        Rows::Changes(s) => {
            if let Target::Table(t) = target {
                let connector = t.connector()?;
                if connector == "filesystem" || connector == "kafka" {
                    return Err(SqlError::plan(format!(
                        "the table `{}`: the {connector} sink takes inserts only, and this query's result updates (Flink: \"doesn't support consuming update changes\")",
                        t.name
                    )));
                }
            }
            s
        }
    };
    let encoder = {
        let types = Arc::clone(&types);
        Arc::new(move |c: &Change<SqlRow>, out: &mut Vec<u8>| {
            if c.kind != RowKind::Insert {
                out.extend_from_slice(c.kind.short_string().as_bytes());
                out.push(b'\t');
            }
            write_json_row(&c.row, &types, out);
            out.push(b'\n');
        })
    };
    match target {
        Target::File(path) => {
            rows.sink_to_single(SingleFileSink::with_encoder(path.clone(), encoder))
                .name("sink");
        }
        Target::Print(_) => {
            rows.sink_to(PrintSink { types }).name("sink.print");
        }
        Target::Discard => {
            rows.sink_to(DiscardSink::new()).name("sink.discard");
        }
        Target::Collect(handle) => {
            rows.sink_to(CollectSink::with_handle(handle))
                .name("sink.collect");
        }
        Target::Table(table) => match table.connector()? {
            "blackhole" => {
                rows.sink_to(DiscardSink::new()).name(&format!("sink.{}", table.name));
            }
            "print" => {
                rows.sink_to(PrintSink { types }).name(&format!("sink.{}", table.name));
            }
            "filesystem" => {
                let path = table.option("path").ok_or_else(|| {
                    SqlError::plan(format!("the filesystem table `{}` has no 'path'", table.name))
                })?;
                let format = table.option("format").unwrap_or("json");
                if format != "json" {
                    return Err(SqlError::plan(format!(
                        "the table `{}`: the filesystem sink writes 'json' for now, not '{format}'",
                        table.name
                    )));
                }
                // Flink's `json` format: one object per row, named by the table's columns.
                let columns: Vec<(String, SqlType)> = table
                    .physical()
                    .map(|c| (c.name.clone(), c.ty.clone()))
                    .collect();
                let all: Vec<usize> = (0..columns.len()).collect();
                let objects = Arc::new(move |c: &Change<SqlRow>, out: &mut Vec<u8>| {
                    write_flink_json(&c.row, &columns, &all, out);
                    out.push(b'\n');
                });
                rows.sink_to(FileSink::with_encoder(PathBuf::from(path), "json", objects))
                    .name(&format!("sink.{}", table.name));
            }
            #[cfg(not(feature = "kafka"))]
            "kafka" => return Err(no_kafka(table)),
            #[cfg(feature = "kafka")]
            "kafka" => {
                let columns = table
                    .physical()
                    .map(|c| (c.name.clone(), c.ty.clone()))
                    .collect();
                let sink = crate::kafka::sink(table, columns)?;
                rows.map(|c: Change<SqlRow>| c.row)
                    .name("rows")
                    .sink_to(sink)
                    .name(&format!("sink.{}", table.name));
            }
            other => {
                return Err(SqlError::plan(format!(
                    "the table `{}`: the connector '{other}' cannot be written (sinks: blackhole, print, filesystem, kafka)",
                    table.name
                )))
            }
        },
    }
    Ok(())
}

/// Flink's `print` connector: each row as `+I[v1, v2, ...]` on standard output (prefixed
/// with `<worker>> ` when several workers print, as Flink's subtask prefix).
struct PrintSink {
    types: Arc<[SqlType]>,
}

impl Sink<Change<SqlRow>> for PrintSink {
    fn name(&self) -> String {
        "print".into()
    }
    fn create_writer(&self, ctx: &SinkContext) -> SpateResult<Box<dyn SinkWriter<Change<SqlRow>>>> {
        Ok(Box::new(PrintWriter {
            types: Arc::clone(&self.types),
            prefix: if ctx.workers > 1 {
                format!("{}> ", ctx.worker_index + 1)
            } else {
                String::new()
            },
            buf: String::new(),
        }))
    }
}

struct PrintWriter {
    types: Arc<[SqlType]>,
    prefix: String,
    buf: String,
}

impl SinkWriter<Change<SqlRow>> for PrintWriter {
    fn write_batch(&mut self, records: &mut Vec<Change<SqlRow>>) -> SpateResult<()> {
        for Change { kind, row } in records.drain(..) {
            self.buf.push_str(&self.prefix);
            self.buf.push_str(kind.short_string());
            self.buf.push('[');
            for (i, (d, t)) in row.iter().zip(self.types.iter()).enumerate() {
                if i > 0 {
                    self.buf.push_str(", ");
                }
                crate::format::write_print(d, t, &mut self.buf);
            }
            self.buf.push_str("]\n");
        }
        if self.buf.len() > 64 << 10 {
            self.flush()?;
        }
        Ok(())
    }
    fn tick(&mut self, _now: std::time::Instant) -> SpateResult<()> {
        self.flush()
    }
    fn close(&mut self) -> SpateResult<()> {
        self.flush()
    }
}

impl PrintWriter {
    fn flush(&mut self) -> SpateResult<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let mut out = std::io::stdout().lock();
        let result = out
            .write_all(self.buf.as_bytes())
            .and_then(|()| out.flush());
        self.buf.clear();
        match result {
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
            Err(e) => Err(SpateError::io_context("cannot print to stdout", e)),
            Ok(()) => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use spate_dataflow::plan::NodeKind;
    use spate_dataflow::JobConfig;

    /// A watermark of the rowtime minus a constant, kept as the largest rowtime, gives the
    /// watermarks of the expression evaluated on every row; so does one that reads another
    /// column (always evaluated).
    #[test]
    fn a_rowtime_watermark_is_computed_when_emitted() {
        use sqlparser::dialect::GenericDialect;
        use sqlparser::parser::Parser;
        let scope = crate::expr::Scope::new(
            [("x", SqlType::BigInt), ("ts", SqlType::Timestamp)]
                .into_iter()
                .map(|(name, ty)| crate::expr::Column {
                    qualifier: None,
                    name: name.into(),
                    ty,
                })
                .collect(),
        );
        let bound = |text: &str| {
            let e = Parser::new(&GenericDialect {})
                .try_with_sql(text)
                .and_then(|mut p| p.parse_expr())
                .expect("parses");
            crate::expr::bind(&e, &scope, &crate::catalog::Catalog::default())
                .expect("binds")
                .expr
        };
        let mut seed = 11u64;
        let rows: Vec<SqlRow> = (0..500)
            .map(|i| {
                seed = seed
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let ts = match seed >> 60 {
                    0 => Datum::Null,
                    _ => Datum::Timestamp(i * 10 - (seed >> 40) as i64 % 3000),
                };
                vec![Datum::Int((seed >> 20) as i64 % 5000), ts]
            })
            .collect();
        for (text, shortcut) in [
            ("ts - INTERVAL '4' SECOND", true),
            ("ts", true),
            ("ts + INTERVAL '1' SECOND", true),
            (
                "CASE WHEN x > 2500 THEN ts ELSE ts - INTERVAL '2' SECOND END",
                false,
            ),
        ] {
            let expr = bound(text);
            assert_eq!(rises_with(&expr, 1), shortcut, "{text}");
            let mut fast = SqlWatermark {
                expr: expr.clone(),
                rowtime: shortcut.then_some(1),
                current: None,
                max_rowtime: None,
            };
            let mut slow = SqlWatermark {
                expr,
                rowtime: None,
                current: None,
                max_rowtime: None,
            };
            for (i, row) in rows.iter().enumerate() {
                fast.on_event(row, 0);
                slow.on_event(row, 0);
                if i % 37 == 0 {
                    assert_eq!(fast.on_periodic_emit(), slow.on_periodic_emit(), "{text}");
                }
            }
            assert_eq!(fast.on_periodic_emit(), slow.on_periodic_emit(), "{text}");
            assert!(slow.current.is_some());
        }
    }

    /// The engine's plan of `query` over a table `t` and two views of it.
    fn engine_plan(query: &str) -> spate_dataflow::plan::Plan {
        let ddl = "CREATE TABLE t (k INT, v BIGINT, ts TIMESTAMP(3),
                WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
                WITH ('connector' = 'filesystem', 'path' = 'x.jsonl');
            CREATE VIEW a AS SELECT v, ts FROM t WHERE k = 1;
            CREATE VIEW b AS SELECT v, ts FROM t WHERE k = 2;";
        let (_, plan) = crate::plan::plan_script(&format!("{ddl}\n{query};"));
        let env = StreamEnv::new(JobConfig::local(1));
        build(&env, &plan).unwrap();
        env.plan()
    }

    fn count(
        plan: &spate_dataflow::plan::Plan,
        f: impl Fn(&spate_dataflow::plan::Node) -> bool,
    ) -> usize {
        plan.nodes.iter().filter(|n| f(n)).count()
    }

    #[test]
    fn a_table_named_by_two_views_is_read_once() {
        let plan = engine_plan("SELECT a.v, b.v FROM a JOIN b ON a.v = b.v");
        assert_eq!(count(&plan, |n| n.kind == NodeKind::Source), 1);
    }

    #[test]
    fn an_aggregate_on_both_sides_of_a_join_is_computed_once() {
        // q5's shape: the same window aggregate on both sides.
        let w = "SELECT v, COUNT(*) AS n, window_start AS s FROM TABLE(TUMBLE(TABLE a, DESCRIPTOR(ts), INTERVAL '1' SECOND)) GROUP BY v, window_start, window_end";
        let plan = engine_plan(&format!(
            "SELECT x.v FROM ({w}) x JOIN ({w}) y ON x.s = y.s"
        ));
        assert_eq!(count(&plan, |n| n.kind == NodeKind::Source), 1);
        assert_eq!(count(&plan, |n| n.name.starts_with("window-aggregate")), 1);
    }
}
