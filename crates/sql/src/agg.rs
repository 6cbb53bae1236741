//! Aggregate functions: `COUNT`, `COUNT(DISTINCT)`, `SUM`, `MIN`, `MAX`, `AVG`, each with an
//! optional `FILTER (WHERE ...)`, and the unbounded `GROUP BY` that runs them on the
//! engine's changelog operator ([`spate_dataflow::Updating`]).
//!
//! Result types follow Flink's: `COUNT` is `BIGINT`; `SUM` keeps its argument's type
//! (`DECIMAL(38, s)` for decimals; a `SUM` of `INT`s wraps around as Java's `int`, as
//! Flink's; one of `BIGINT`s that overflows is `NULL`, where Flink's wraps around); `MIN`/`MAX` keep it; `AVG` of an integer type is that
//! type, truncated toward zero (`AVG(BIGINT)` is a `BIGINT`), of a `DECIMAL(p, s)` a
//! `DECIMAL(38, max(s, 6))`, of a `DOUBLE` a `DOUBLE`. `NULL` arguments are skipped; `SUM`,
//! `MIN`, `MAX` and `AVG` of no value are `NULL`, `COUNT` of none is 0.

use rustc_hash::{FxHashMap, FxHashSet};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use spate_dataflow::UpdatingAggregate;

use crate::expr::{compare_values, Numeric, Scalar};
use crate::types::{Datum, SqlKey, SqlRow, SqlType};
use crate::SqlError;

/// An aggregate function.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AggFunc {
    /// `COUNT(*)`.
    CountStar,
    /// `COUNT(x)`: the non-null values.
    Count,
    /// `COUNT(DISTINCT x)`.
    CountDistinct,
    /// `SUM(x)`.
    Sum,
    /// `MIN(x)`.
    Min,
    /// `MAX(x)`.
    Max,
    /// `AVG(x)`.
    Avg,
}

impl AggFunc {
    /// The aggregate called `name` (case-insensitive), if it is one.
    pub fn lookup(name: &str, distinct: bool) -> Option<AggFunc> {
        Some(match (name.to_ascii_uppercase().as_str(), distinct) {
            ("COUNT", false) => AggFunc::Count,
            ("COUNT", true) => AggFunc::CountDistinct,
            ("SUM", false) => AggFunc::Sum,
            ("MIN", _) => AggFunc::Min,
            ("MAX", _) => AggFunc::Max,
            ("AVG", false) => AggFunc::Avg,
            _ => return None,
        })
    }

    /// The result type for an argument of type `arg`.
    pub fn result_type(self, arg: &SqlType) -> Result<SqlType, SqlError> {
        let numeric = |what: &str| {
            if arg.is_numeric() {
                Ok(())
            } else {
                Err(SqlError::plan(format!("{what} needs a number, not {arg}")))
            }
        };
        Ok(match self {
            AggFunc::CountStar | AggFunc::Count | AggFunc::CountDistinct => SqlType::BigInt,
            AggFunc::Sum => {
                numeric("SUM")?;
                match arg {
                    SqlType::Decimal(_, s) => SqlType::Decimal(38, *s),
                    t => t.clone(),
                }
            }
            AggFunc::Min | AggFunc::Max => arg.clone(),
            AggFunc::Avg => {
                numeric("AVG")?;
                match arg {
                    SqlType::Decimal(_, s) => SqlType::Decimal(38, (*s).max(6)),
                    t => t.clone(),
                }
            }
        })
    }
}

/// One aggregate of a `GROUP BY`: its function, argument and filter, bound over the input.
#[derive(Debug, Clone)]
pub struct AggCall {
    /// The function.
    pub func: AggFunc,
    /// The argument (none for `COUNT(*)`).
    pub arg: Option<Scalar>,
    /// The argument's type.
    pub arg_type: SqlType,
    /// `FILTER (WHERE ...)`.
    pub filter: Option<Scalar>,
    /// The result's type.
    pub ty: SqlType,
}

/// The running state of one aggregate of one group.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum Acc {
    /// A count.
    Count(i64),
    /// The distinct values seen (hashed with FxHash, as the engine's keyed state is).
    Distinct(FxHashSet<Datum>),
    /// The distinct values of several `COUNT(DISTINCT x) FILTER (...)` of one argument,
    /// each with a bit per aggregate whose filter a row of that value passed, and each
    /// aggregate's count (Flink shares one distinct view per argument so).
    SharedDistinct(FxHashMap<Datum, u64>, Vec<i64>),
    /// A sum of integers or unscaled decimals (`None` before the first value, or after an
    /// overflow, which makes the result `NULL`).
    SumInt(Option<i64>, bool),
    /// A sum of doubles.
    SumDouble(Option<f64>),
    /// The least or greatest value so far.
    Extreme(Option<Datum>),
    /// A sum and a count, for `AVG` (the sum in `i128` so that it cannot overflow).
    Avg(i128, f64, i64),
}

impl AggCall {
    fn create(&self) -> Acc {
        match self.func {
            AggFunc::CountStar | AggFunc::Count => Acc::Count(0),
            AggFunc::CountDistinct => Acc::Distinct(FxHashSet::default()),
            AggFunc::Sum if self.arg_type == SqlType::Double => Acc::SumDouble(None),
            AggFunc::Sum => Acc::SumInt(None, false),
            AggFunc::Min | AggFunc::Max => Acc::Extreme(None),
            AggFunc::Avg => Acc::Avg(0, 0.0, 0),
        }
    }

    /// What `row` gives the aggregate: its argument's value (`NULL` for `COUNT(*)`), or
    /// `None` when the row does not count (the filter is not `TRUE`, or the argument is
    /// `NULL`).
    fn input(&self, row: &[Datum]) -> Option<Datum> {
        if self.filter.as_ref().is_some_and(|f| !f.test(row)) {
            return None;
        }
        match &self.arg {
            Some(a) => Some(a.eval(row)).filter(|v| !v.is_null()),
            None => Some(Datum::Null),
        }
    }

    fn add(&self, acc: &mut Acc, row: &[Datum]) {
        let Some(value) = self.input(row) else {
            return;
        };
        match acc {
            Acc::Count(n) => *n += 1,
            Acc::Distinct(set) => {
                set.insert(value);
            }
            // Added by its `GroupAggregate`, for all its aggregates at once.
            Acc::SharedDistinct(..) => {}
            Acc::SumInt(sum, overflow) => {
                if let Some(v) = value.as_i64() {
                    match sum {
                        None if !*overflow => *sum = Some(v),
                        Some(s) => match s.checked_add(v) {
                            Some(t) => *s = t,
                            None => {
                                *sum = None;
                                *overflow = true;
                            }
                        },
                        None => {}
                    }
                }
            }
            Acc::SumDouble(sum) => {
                if let Datum::Double(v) = value {
                    *sum = Some(sum.unwrap_or(0.0) + v);
                }
            }
            Acc::Extreme(best) => {
                let better = match best {
                    None => true,
                    Some(b) => {
                        let kind = match &self.arg_type {
                            t if t.is_numeric() => Numeric::Decimal {
                                left: t.scale(),
                                right: t.scale(),
                                out: t.scale(),
                            },
                            SqlType::Timestamp => Numeric::Int,
                            _ => Numeric::Other,
                        };
                        let kind = if self.arg_type == SqlType::Double {
                            Numeric::Double { left: 0, right: 0 }
                        } else {
                            kind
                        };
                        match compare_values(kind, &value, b) {
                            Some(o) if self.func == AggFunc::Min => o.is_lt(),
                            Some(o) => o.is_gt(),
                            None => false,
                        }
                    }
                };
                if better {
                    *best = Some(value);
                }
            }
            Acc::Avg(sum, fsum, n) => {
                match value {
                    Datum::Double(f) => *fsum += f,
                    v => *sum += i128::from(v.as_i64().unwrap_or(0)),
                }
                *n += 1;
            }
        }
    }

    fn result(&self, acc: &Acc) -> Datum {
        match acc {
            Acc::Count(n) => Datum::Int(*n),
            Acc::Distinct(set) => Datum::Int(set.len() as i64),
            Acc::SharedDistinct(_, counts) => Datum::Int(counts.first().copied().unwrap_or(0)),
            Acc::SumInt(sum, _) => match (sum, &self.ty) {
                (Some(s), SqlType::Decimal(..)) => Datum::Decimal(*s),
                // SUM(INT) is an INT, which wraps around as Java's (Flink 2.3's sum of 1 and
                // 2147483647 is -2147483648).
                (Some(s), SqlType::Int) => Datum::Int(i64::from(*s as i32)),
                (Some(s), _) => Datum::Int(*s),
                (None, _) => Datum::Null,
            },
            Acc::SumDouble(sum) => sum.map_or(Datum::Null, Datum::Double),
            Acc::Extreme(best) => best.clone().unwrap_or(Datum::Null),
            Acc::Avg(sum, fsum, n) => {
                if *n == 0 {
                    return Datum::Null;
                }
                match (&self.arg_type, &self.ty) {
                    (SqlType::Double, _) => Datum::Double(fsum / *n as f64),
                    (SqlType::Decimal(_, s), SqlType::Decimal(_, t)) => {
                        // The mean at scale t, rounded half up.
                        let scaled = sum * 10i128.pow(u32::from(t - s));
                        let n = i128::from(*n);
                        let q = scaled / n;
                        let r = scaled % n;
                        let q = if 2 * r.abs() >= n {
                            q + scaled.signum()
                        } else {
                            q
                        };
                        i64::try_from(q).map_or(Datum::Null, Datum::Decimal)
                    }
                    // Integers: truncated toward zero, as Flink's AVG of BIGINT.
                    _ => i64::try_from(sum / i128::from(*n)).map_or(Datum::Null, Datum::Int),
                }
            }
        }
    }
}

/// The aggregates of one `GROUP BY`, as the engine's updating aggregate: per group key, one
/// accumulator per aggregate; the result row is the key's values, then the aggregates'.
///
/// The `COUNT(DISTINCT x)`s of one argument `x` (with different `FILTER`s, as Nexmark q15's
/// and q16's) share one set of values, kept by the first of them, with a bit per aggregate:
/// a row adds its value once, not once per aggregate.
pub struct GroupAggregate {
    calls: Arc<[AggCall]>,
    /// Per aggregate: `Some((owner, bit))` for a `COUNT(DISTINCT)`: the aggregate whose
    /// accumulator holds the shared set, and this aggregate's bit in it.
    shared: Vec<Option<(usize, u32)>>,
    /// Per owner of a shared set: its aggregates and their bits.
    members: Vec<Vec<(usize, u32)>>,
}

impl GroupAggregate {
    /// The aggregates `calls` of one `GROUP BY`.
    pub fn new(calls: Arc<[AggCall]>) -> Self {
        let mut shared = vec![None; calls.len()];
        let mut members: Vec<Vec<(usize, u32)>> = vec![Vec::new(); calls.len()];
        let mut owners: Vec<(String, usize)> = Vec::new();
        for (i, call) in calls.iter().enumerate() {
            if call.func != AggFunc::CountDistinct {
                continue;
            }
            let arg = format!("{:?}", call.arg);
            let owner = match owners
                .iter()
                .find(|(a, o)| *a == arg && members[*o].len() < 64)
            {
                Some(&(_, o)) => o,
                None => {
                    owners.push((arg, i));
                    i
                }
            };
            let bit = members[owner].len() as u32;
            members[owner].push((i, bit));
            shared[i] = Some((owner, bit));
        }
        GroupAggregate {
            calls,
            shared,
            members,
        }
    }
}

impl UpdatingAggregate<SqlKey, SqlRow> for GroupAggregate {
    type Acc = Vec<Acc>;
    type Out = SqlRow;
    fn create(&self) -> Vec<Acc> {
        self.calls
            .iter()
            .enumerate()
            .map(|(i, call)| match self.shared[i] {
                Some((owner, _)) if owner == i => {
                    Acc::SharedDistinct(FxHashMap::default(), vec![0; self.members[i].len()])
                }
                // Counted in the owner's accumulator.
                Some(_) => Acc::Count(0),
                None => call.create(),
            })
            .collect()
    }
    fn add(&self, acc: &mut Vec<Acc>, row: SqlRow) {
        for (i, (call, a)) in self.calls.iter().zip(acc.iter_mut()).enumerate() {
            match (self.shared[i], a) {
                (Some((owner, _)), Acc::SharedDistinct(values, counts)) if owner == i => {
                    let mut bits = 0u64;
                    for &(member, bit) in &self.members[i] {
                        let filter = &self.calls[member].filter;
                        if filter.as_ref().is_none_or(|f| f.test(&row)) {
                            bits |= 1 << bit;
                        }
                    }
                    if bits == 0 {
                        continue;
                    }
                    let value = match &call.arg {
                        Some(arg) => arg.eval(&row),
                        None => continue,
                    };
                    if value.is_null() {
                        continue;
                    }
                    let seen = values.entry(value).or_insert(0);
                    let mut new = bits & !*seen;
                    *seen |= bits;
                    while new != 0 {
                        counts[new.trailing_zeros() as usize] += 1;
                        new &= new - 1;
                    }
                }
                (Some(_), _) => {}
                (None, a) => call.add(a, &row),
            }
        }
    }
    fn results(&self, key: &SqlKey, acc: &Vec<Acc>, out: &mut Vec<SqlRow>) {
        let mut row = Vec::with_capacity(key.len() + acc.len());
        row.extend(key.iter().cloned());
        row.extend(
            self.calls
                .iter()
                .enumerate()
                .map(|(i, c)| match self.shared[i] {
                    Some((owner, bit)) => match &acc[owner] {
                        Acc::SharedDistinct(_, counts) => Datum::Int(counts[bit as usize]),
                        _ => Datum::Null,
                    },
                    None => c.result(&acc[i]),
                }),
        );
        out.push(row);
    }
}

/// One key of a `ROW_NUMBER() OVER (... ORDER BY ...)`: its expression, direction and how
/// its values compare.
#[derive(Debug, Clone)]
pub struct SortKey {
    /// The expression.
    pub expr: Scalar,
    /// `DESC`.
    pub descending: bool,
    /// `NULLS FIRST` (Flink's default: first when ascending, last when descending).
    pub nulls_first: bool,
    /// How values compare.
    pub kind: Numeric,
}

/// Flink's top-N (`ROW_NUMBER() OVER (PARTITION BY ... ORDER BY ...)` filtered by
/// `rank <= N`), and its deduplication (N = 1 ordered by the rowtime), as the engine's
/// updating aggregate: per partition key, the best N rows in order; the result rows are
/// those rows with their rank appended.
///
/// Rows that tie keep their arrival order (the first to arrive ranks first), except in a
/// deduplication that keeps the last row (`ORDER BY rowtime DESC`, N = 1), where a row
/// replaces an earlier one of the same time, as Flink's `RowTimeDeduplicateFunction`.
pub struct RankAggregate {
    /// The order.
    pub order: Arc<[SortKey]>,
    /// N.
    pub limit: usize,
    /// Whether a new row goes before the rows it ties with.
    pub ties_first: bool,
}

impl RankAggregate {
    fn cmp(&self, a: &[Datum], b: &[Datum]) -> std::cmp::Ordering {
        use std::cmp::Ordering;
        for k in self.order.iter() {
            let (x, y) = (k.expr.eval(a), k.expr.eval(b));
            let o = match (x.is_null(), y.is_null()) {
                (true, true) => Ordering::Equal,
                (true, false) => {
                    if k.nulls_first {
                        Ordering::Less
                    } else {
                        Ordering::Greater
                    }
                }
                (false, true) => {
                    if k.nulls_first {
                        Ordering::Greater
                    } else {
                        Ordering::Less
                    }
                }
                (false, false) => {
                    let o = compare_values(k.kind, &x, &y).unwrap_or(Ordering::Equal);
                    if k.descending {
                        o.reverse()
                    } else {
                        o
                    }
                }
            };
            if o != Ordering::Equal {
                return o;
            }
        }
        Ordering::Equal
    }
}

/// A top-N result row: a kept row and its rank, sharing the row with the top-N's
/// accumulator (a partition's rows are kept once, however many times they were emitted);
/// [`Ranked::into_row`] makes the output row.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Ranked {
    row: Arc<[Datum]>,
    rank: i64,
}

impl PartialEq for Ranked {
    fn eq(&self, other: &Self) -> bool {
        self.rank == other.rank && (Arc::ptr_eq(&self.row, &other.row) || self.row == other.row)
    }
}

impl Ranked {
    /// The row with its rank appended.
    pub fn into_row(self) -> SqlRow {
        let mut row = Vec::with_capacity(self.row.len() + 1);
        row.extend(self.row.iter().cloned());
        row.push(Datum::Int(self.rank));
        row
    }
}

impl UpdatingAggregate<SqlKey, SqlRow> for RankAggregate {
    type Acc = Vec<Arc<[Datum]>>;
    type Out = Ranked;
    fn create(&self) -> Vec<Arc<[Datum]>> {
        Vec::new()
    }
    fn add(&self, acc: &mut Vec<Arc<[Datum]>>, row: SqlRow) {
        let at = if self.ties_first {
            acc.partition_point(|r| self.cmp(r, &row).is_lt())
        } else {
            acc.partition_point(|r| self.cmp(r, &row).is_le())
        };
        if at < self.limit {
            acc.insert(at, row.into());
            acc.truncate(self.limit);
        }
    }
    fn results(&self, _key: &SqlKey, acc: &Vec<Arc<[Datum]>>, out: &mut Vec<Ranked>) {
        out.extend(acc.iter().enumerate().map(|(i, row)| Ranked {
            row: row.clone(),
            rank: i as i64 + 1,
        }));
    }
}

impl AggCall {
    /// Combines two accumulators of this call (merging sessions, combining slices).
    fn merge(&self, a: Acc, b: Acc) -> Acc {
        match (a, b) {
            (Acc::Count(x), Acc::Count(y)) => Acc::Count(x + y),
            (Acc::Distinct(mut x), Acc::Distinct(y)) => {
                x.extend(y);
                Acc::Distinct(x)
            }
            (Acc::SumInt(x, ox), Acc::SumInt(y, oy)) => {
                if ox || oy {
                    return Acc::SumInt(None, true);
                }
                match (x, y) {
                    (Some(x), Some(y)) => match x.checked_add(y) {
                        Some(s) => Acc::SumInt(Some(s), false),
                        None => Acc::SumInt(None, true),
                    },
                    (x, y) => Acc::SumInt(x.or(y), false),
                }
            }
            (Acc::SumDouble(x), Acc::SumDouble(y)) => Acc::SumDouble(match (x, y) {
                (Some(x), Some(y)) => Some(x + y),
                (x, y) => x.or(y),
            }),
            (Acc::Extreme(x), Acc::Extreme(y)) => {
                let mut acc = Acc::Extreme(x);
                if let Some(v) = y {
                    // Adding `v` as a value keeps the better one.
                    let call = AggCall {
                        filter: None,
                        arg: Some(Scalar::Col(0)),
                        ..self.clone()
                    };
                    call.add(&mut acc, std::slice::from_ref(&v));
                }
                acc
            }
            (Acc::Avg(s1, f1, n1), Acc::Avg(s2, f2, n2)) => Acc::Avg(s1 + s2, f1 + f2, n1 + n2),
            (a, _) => a,
        }
    }
}

/// The aggregates of a window `GROUP BY`, as the engine's window [`AggregateFunction`]: one
/// accumulator per aggregate; the result is the aggregates' values.
///
/// [`AggregateFunction`]: spate_dataflow::AggregateFunction
pub struct WindowAggregate {
    /// The aggregates.
    pub calls: Arc<[AggCall]>,
}

impl spate_dataflow::AggregateFunction<SqlRow> for WindowAggregate {
    type Acc = Vec<Acc>;
    type Out = SqlRow;
    fn create_accumulator(&self) -> Vec<Acc> {
        self.calls.iter().map(AggCall::create).collect()
    }
    fn add(&self, row: &SqlRow, acc: &mut Vec<Acc>) {
        for (call, a) in self.calls.iter().zip(acc.iter_mut()) {
            call.add(a, row);
        }
    }
    fn get_result(&self, acc: &Vec<Acc>) -> SqlRow {
        self.calls
            .iter()
            .zip(acc)
            .map(|(c, a)| c.result(a))
            .collect()
    }
    fn merge(&self, a: Vec<Acc>, b: Vec<Acc>) -> Vec<Acc> {
        self.calls
            .iter()
            .zip(a.into_iter().zip(b))
            .map(|(c, (x, y))| c.merge(x, y))
            .collect()
    }
}

/// The running state of one aggregate of one group whose input is a changelog: what it
/// needs to take a row back (`-U`, `-D`) as well as to add one.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum RetractAcc {
    /// A count.
    Count(i64),
    /// How many times each value is in the group (`COUNT(DISTINCT)`, `MIN`, `MAX`).
    Values(Vec<(Datum, i64)>),
    /// A sum of integers or unscaled decimals (in `i128`), of doubles, and how many values.
    Sum(i128, f64, i64),
}

impl AggCall {
    fn create_retract(&self) -> RetractAcc {
        match self.func {
            AggFunc::CountStar | AggFunc::Count => RetractAcc::Count(0),
            AggFunc::CountDistinct | AggFunc::Min | AggFunc::Max => RetractAcc::Values(Vec::new()),
            AggFunc::Sum | AggFunc::Avg => RetractAcc::Sum(0, 0.0, 0),
        }
    }

    /// Adds (`sign` 1) or takes back (`sign` -1) one row.
    fn apply(&self, acc: &mut RetractAcc, row: &[Datum], sign: i64) {
        let Some(value) = self.input(row) else {
            return;
        };
        match acc {
            RetractAcc::Count(n) => *n += sign,
            RetractAcc::Values(values) => match values.iter().position(|(v, _)| *v == value) {
                Some(i) => {
                    values[i].1 += sign;
                    if values[i].1 == 0 {
                        values.swap_remove(i);
                    }
                }
                None => values.push((value, sign)),
            },
            RetractAcc::Sum(sum, fsum, n) => {
                match value {
                    Datum::Double(f) => *fsum += f * sign as f64,
                    v => *sum += i128::from(v.as_i64().unwrap_or(0)) * i128::from(sign),
                }
                *n += sign;
            }
        }
    }

    fn retract_result(&self, acc: &RetractAcc) -> Datum {
        match acc {
            RetractAcc::Count(n) => Datum::Int(*n),
            RetractAcc::Values(values) => match self.func {
                AggFunc::CountDistinct => {
                    Datum::Int(values.iter().filter(|(_, n)| *n > 0).count() as i64)
                }
                _ => {
                    let mut best = Acc::Extreme(None);
                    let call = AggCall {
                        filter: None,
                        arg: Some(Scalar::Col(0)),
                        ..self.clone()
                    };
                    for (v, n) in values {
                        if *n > 0 {
                            call.add(&mut best, std::slice::from_ref(v));
                        }
                    }
                    call.result(&best)
                }
            },
            RetractAcc::Sum(sum, fsum, n) => {
                if *n <= 0 {
                    return Datum::Null;
                }
                if self.func == AggFunc::Sum {
                    return match &self.ty {
                        SqlType::Double => Datum::Double(*fsum),
                        SqlType::Decimal(..) => {
                            i64::try_from(*sum).map_or(Datum::Null, Datum::Decimal)
                        }
                        SqlType::Int => Datum::Int(i64::from(*sum as i32)),
                        _ => i64::try_from(*sum).map_or(Datum::Null, Datum::Int),
                    };
                }
                self.result(&Acc::Avg(*sum, *fsum, *n))
            }
        }
    }
}

/// The aggregates of a `GROUP BY` over a changelog (an aggregate of an updating result, as
/// Nexmark q4's average of maxima): rows are added by `+I`/`+U` and taken back by
/// `-U`/`-D`; a group whose rows are all taken back has no result row (`-D`).
pub struct RetractAggregate {
    /// The aggregates.
    pub calls: Arc<[AggCall]>,
}

impl UpdatingAggregate<SqlKey, spate_dataflow::Change<SqlRow>> for RetractAggregate {
    /// The group's number of rows, and the aggregates' states.
    type Acc = (i64, Vec<RetractAcc>);
    type Out = SqlRow;
    fn create(&self) -> Self::Acc {
        (0, self.calls.iter().map(AggCall::create_retract).collect())
    }
    fn add(&self, acc: &mut Self::Acc, change: spate_dataflow::Change<SqlRow>) {
        let sign = if change.kind.is_addition() { 1 } else { -1 };
        acc.0 += sign;
        for (call, a) in self.calls.iter().zip(acc.1.iter_mut()) {
            call.apply(a, &change.row, sign);
        }
    }
    fn results(&self, key: &SqlKey, acc: &Self::Acc, out: &mut Vec<SqlRow>) {
        if acc.0 <= 0 {
            return;
        }
        let mut row = Vec::with_capacity(key.len() + acc.1.len());
        row.extend(key.iter().cloned());
        row.extend(
            self.calls
                .iter()
                .zip(&acc.1)
                .map(|(c, a)| c.retract_result(a)),
        );
        out.push(row);
    }
}
