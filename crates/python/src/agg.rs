//! Built-in aggregates (`spate.agg`): `count`, `sum`, `min`, `max`, `avg`, `first`, `last`,
//! `collect_list`, `arg_max` and `arg_min`, computed incrementally in Rust by the engine's
//! window operator (sliced, checkpointed, merged for sessions) with no Python per record.

use std::sync::Arc;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use serde::{Deserialize, Serialize};
use spate_dataflow::AggregateFunction;

use crate::expr::{order, Expr};
use crate::record::{intern, Names, Rec};

/// What an aggregate computes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AggKind {
    Count,
    Sum,
    Min,
    Max,
    Avg,
    First,
    Last,
    CollectList,
    ArgMax,
    ArgMin,
}

/// One aggregate of a window: its kind, the expression it reads and its output name.
#[derive(Debug, Clone)]
pub struct AggSpec {
    kind: AggKind,
    arg: Option<Arc<Expr>>,
    alias: String,
}

impl AggSpec {
    /// Reads `(kind, expression or None, alias)` from `spate.agg`.
    pub fn from_py(t: &Bound<'_, PyAny>) -> PyResult<Self> {
        let kind: String = t.get_item(0)?.extract()?;
        let kind = match kind.as_str() {
            "count" => AggKind::Count,
            "sum" => AggKind::Sum,
            "min" => AggKind::Min,
            "max" => AggKind::Max,
            "avg" => AggKind::Avg,
            "first" => AggKind::First,
            "last" => AggKind::Last,
            "collect_list" => AggKind::CollectList,
            "arg_max" => AggKind::ArgMax,
            "arg_min" => AggKind::ArgMin,
            other => {
                return Err(PyValueError::new_err(format!(
                    "unknown aggregate `{other}`"
                )))
            }
        };
        let arg = t.get_item(1)?;
        let arg = if arg.is_none() {
            None
        } else {
            Some(Arc::new(Expr::compile(&arg)?))
        };
        if arg.is_none() && kind != AggKind::Count {
            return Err(PyValueError::new_err("this aggregate needs a field"));
        }
        Ok(AggSpec {
            kind,
            arg,
            alias: t.get_item(2)?.extract()?,
        })
    }
}

/// One aggregate's accumulator: 16 bytes, so that one aggregate's accumulators sit inline in
/// its key's state (see [`Accs`]), with no allocation for `count`, `sum` or `avg`. A value that
/// is a whole record (`min`, `max`, `first`, `last`) or several (`collect_list`, `arg_max`) is
/// boxed.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum Acc {
    Count(u64),
    /// A sum before its first non-null value.
    SumEmpty,
    /// A sum of integers so far.
    SumInt(i64),
    /// A sum with a float in it so far.
    SumFloat(f64),
    /// The least or greatest value, the first or last value.
    One(Option<Box<Rec>>),
    /// The total and the number of values of an average.
    Avg(Box<(f64, u64)>),
    /// Boxed: it keeps the accumulator at 16 bytes.
    #[allow(clippy::box_collection)]
    List(Box<Vec<Rec>>),
    /// The extreme value and its record.
    Arg(Option<Box<(Rec, Rec)>>),
}

/// The accumulators of one window function's aggregates: inline when there is one (24
/// bytes, with a niche, so that a key's `Option<Accs>` costs nothing more).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum Accs {
    One(Acc),
    Many(Vec<Acc>),
}

impl Accs {
    fn as_slice(&self) -> &[Acc] {
        match self {
            Accs::One(a) => std::slice::from_ref(a),
            Accs::Many(v) => v,
        }
    }

    fn as_mut_slice(&mut self) -> &mut [Acc] {
        match self {
            Accs::One(a) => std::slice::from_mut(a),
            Accs::Many(v) => v,
        }
    }

    fn into_vec(self) -> Vec<Acc> {
        match self {
            Accs::One(a) => vec![a],
            Accs::Many(v) => v,
        }
    }
}

impl FromIterator<Acc> for Accs {
    fn from_iter<I: IntoIterator<Item = Acc>>(items: I) -> Self {
        let mut items = items.into_iter();
        match (items.next(), items.next()) {
            (Some(a), None) => Accs::One(a),
            (None, _) => Accs::Many(Vec::new()),
            (Some(a), Some(b)) => Accs::Many([a, b].into_iter().chain(items).collect()),
        }
    }
}

/// The aggregates of one window function.
#[derive(Debug, Clone)]
pub struct Aggregates {
    specs: Vec<AggSpec>,
}

impl Aggregates {
    pub fn new(specs: Vec<AggSpec>) -> Self {
        Aggregates { specs }
    }

    /// The output row's field names: the key's, the window's bounds, then the aliases.
    pub fn output_names(&self, key: &str) -> Names {
        let mut names = vec![
            key.to_owned(),
            "window_start".to_owned(),
            "window_end".to_owned(),
        ];
        names.extend(self.specs.iter().map(|s| s.alias.clone()));
        intern(names)
    }

    /// The names of a full partition's result rows: the key, then each aggregate's alias.
    pub fn output_names_without_window(&self, key: &str) -> Names {
        let mut names = vec![key.to_owned()];
        names.extend(self.specs.iter().map(|s| s.alias.clone()));
        intern(names)
    }

    /// The aggregate function over records whose value `value` extracts (a Python key
    /// selector pairs each record with its key).
    pub fn over(self, value: fn(&Rec) -> &Rec) -> Over {
        Over { aggs: self, value }
    }
}

/// [`Aggregates`] as the engine's [`AggregateFunction`].
#[derive(Clone)]
pub struct Over {
    aggs: Aggregates,
    value: fn(&Rec) -> &Rec,
}

fn eval(e: &Expr, r: &Rec) -> Rec {
    e.eval(r).unwrap_or_else(|m| std::panic::panic_any(m))
}

/// Adds `v` to a sum: integers wrap as `i64`s; a float makes the sum a float.
fn add_to_sum(sum: &mut Acc, v: &Rec) {
    let as_int;
    let v = match v {
        Rec::Bool(b) => {
            as_int = Rec::Int(i64::from(*b)); // as Python's `sum([True])` is `1`
            &as_int
        }
        v => v,
    };
    *sum = match (&*sum, v) {
        (Acc::SumEmpty, Rec::Int(y)) => Acc::SumInt(*y),
        (Acc::SumInt(x), Rec::Int(y)) => Acc::SumInt(x.wrapping_add(*y)),
        (Acc::SumEmpty, v) => Acc::SumFloat(v.as_f64().unwrap_or_else(|| not_a_number(v))),
        (Acc::SumInt(x), v) => {
            Acc::SumFloat(*x as f64 + v.as_f64().unwrap_or_else(|| not_a_number(v)))
        }
        (Acc::SumFloat(x), v) => Acc::SumFloat(x + v.as_f64().unwrap_or_else(|| not_a_number(v))),
        _ => unreachable!("a sum's accumulator"),
    }
}

fn not_a_number(v: &Rec) -> ! {
    std::panic::panic_any(format!("sum: {} is not a number", v.type_name()))
}

/// Sets a `min`/`max`/`last` accumulator, reusing its box.
fn set_one(cur: &mut Option<Box<Rec>>, v: Rec) {
    match cur {
        Some(b) => **b = v,
        None => *cur = Some(Box::new(v)),
    }
}

impl AggregateFunction<Rec> for Over {
    type Acc = Accs;
    type Out = Vec<Rec>;

    fn create_accumulator(&self) -> Accs {
        self.aggs
            .specs
            .iter()
            .map(|s| match s.kind {
                AggKind::Count => Acc::Count(0),
                AggKind::Sum => Acc::SumEmpty,
                AggKind::Avg => Acc::Avg(Box::new((0.0, 0))),
                AggKind::CollectList => Acc::List(Box::default()),
                AggKind::ArgMax | AggKind::ArgMin => Acc::Arg(None),
                _ => Acc::One(None),
            })
            .collect()
    }

    fn add(&self, record: &Rec, acc: &mut Accs) {
        let r = (self.value)(record);
        for (s, a) in self.aggs.specs.iter().zip(acc.as_mut_slice()) {
            let v = s.arg.as_ref().map(|e| eval(e, r));
            if matches!(v, Some(Rec::None)) && s.kind != AggKind::CollectList {
                continue; // SQL's aggregates skip nulls
            }
            match (s.kind, a) {
                (AggKind::Count, Acc::Count(n)) => *n += 1,
                (AggKind::Sum, a) => add_to_sum(a, &v.unwrap_or_default()),
                (AggKind::Avg, Acc::Avg(avg)) => {
                    let v = v.unwrap_or_default();
                    avg.0 += v.as_f64().unwrap_or_else(|| {
                        std::panic::panic_any(format!("avg: {} is not a number", v.type_name()))
                    });
                    avg.1 += 1;
                }
                (AggKind::Min | AggKind::Max, Acc::One(cur)) => {
                    let v = v.unwrap_or_default();
                    let better = match cur.as_deref() {
                        None => true,
                        Some(c) => {
                            let o = order(&v, c).unwrap_or_else(|| {
                                std::panic::panic_any(format!(
                                    "{}: cannot compare {} with {}",
                                    s.alias,
                                    v.type_name(),
                                    c.type_name()
                                ))
                            });
                            if s.kind == AggKind::Min {
                                o.is_lt()
                            } else {
                                o.is_gt()
                            }
                        }
                    };
                    if better {
                        set_one(cur, v);
                    }
                }
                (AggKind::First, Acc::One(cur)) => {
                    if cur.is_none() {
                        *cur = v.map(Box::new);
                    }
                }
                (AggKind::Last, Acc::One(cur)) => set_one(cur, v.unwrap_or_default()),
                (AggKind::CollectList, Acc::List(items)) => items.push(v.unwrap_or_default()),
                (AggKind::ArgMax | AggKind::ArgMin, Acc::Arg(cur)) => {
                    let v = v.unwrap_or_default();
                    let better = match cur.as_ref() {
                        None => true,
                        Some(c) => order(&v, &c.0).is_some_and(|o| {
                            if s.kind == AggKind::ArgMin {
                                o.is_lt()
                            } else {
                                o.is_gt()
                            }
                        }),
                    };
                    if better {
                        *cur = Some(Box::new((v, r.clone())));
                    }
                }
                _ => unreachable!("accumulators follow their specs"),
            }
        }
    }

    fn get_result(&self, acc: &Accs) -> Vec<Rec> {
        acc.as_slice()
            .iter()
            .map(|a| match a {
                Acc::Count(n) => Rec::Int(*n as i64),
                Acc::SumEmpty => Rec::None,
                Acc::SumInt(i) => Rec::Int(*i),
                Acc::SumFloat(f) => Rec::Float(*f),
                Acc::One(v) => v.as_deref().cloned().unwrap_or_default(),
                Acc::Avg(avg) if avg.1 == 0 => Rec::None,
                Acc::Avg(avg) => Rec::Float(avg.0 / avg.1 as f64),
                Acc::List(items) => Rec::List(items.to_vec()),
                Acc::Arg(x) => x.as_ref().map(|b| b.1.clone()).unwrap_or_default(),
            })
            .collect()
    }

    fn merge(&self, a: Accs, b: Accs) -> Accs {
        a.into_vec()
            .into_iter()
            .zip(b.into_vec())
            .zip(&self.aggs.specs)
            .map(|((x, y), s)| match (x, y) {
                (Acc::Count(p), Acc::Count(q)) => Acc::Count(p + q),
                (mut p @ (Acc::SumEmpty | Acc::SumInt(_) | Acc::SumFloat(_)), q) => {
                    match q {
                        Acc::SumInt(i) => add_to_sum(&mut p, &Rec::Int(i)),
                        Acc::SumFloat(f) => add_to_sum(&mut p, &Rec::Float(f)),
                        _ => {}
                    }
                    p
                }
                (Acc::Avg(mut p), Acc::Avg(q)) => {
                    p.0 += q.0;
                    p.1 += q.1;
                    Acc::Avg(p)
                }
                (Acc::List(mut p), Acc::List(q)) => {
                    p.extend(*q);
                    Acc::List(p)
                }
                (Acc::One(p), Acc::One(q)) => Acc::One(match (p, q) {
                    (Some(p), Some(q)) => Some(match s.kind {
                        AggKind::First => p,
                        AggKind::Last => q,
                        AggKind::Min if order(&q, &p).is_some_and(|o| o.is_lt()) => q,
                        AggKind::Max if order(&q, &p).is_some_and(|o| o.is_gt()) => q,
                        _ => p,
                    }),
                    (p, q) => p.or(q),
                }),
                (Acc::Arg(p), Acc::Arg(q)) => Acc::Arg(match (p, q) {
                    (Some(p), Some(q)) => {
                        let take_q = order(&q.0, &p.0).is_some_and(|o| {
                            if s.kind == AggKind::ArgMin {
                                o.is_lt()
                            } else {
                                o.is_gt()
                            }
                        });
                        Some(if take_q { q } else { p })
                    }
                    (p, q) => p.or(q),
                }),
                (x, _) => x,
            })
            .collect()
    }
}
