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

/// One aggregate's accumulator.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum Acc {
    Count(u64),
    /// The sum so far (`None` before the first non-null value).
    Sum(Option<Rec>),
    /// The least or greatest value, the first or last value.
    One(Option<Rec>),
    Avg(f64, u64),
    List(Vec<Rec>),
    /// The extreme value and its record (boxed: an accumulator stays small, 48 bytes, for the
    /// common aggregates, as it is kept per key and window).
    Arg(Option<Box<(Rec, Rec)>>),
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

fn add_numbers(a: Rec, b: &Rec) -> Rec {
    match (&a, b) {
        (Rec::Int(x), Rec::Int(y)) => Rec::Int(x.wrapping_add(*y)),
        _ => match (a.as_f64(), b.as_f64()) {
            (Some(x), Some(y)) => Rec::Float(x + y),
            _ => std::panic::panic_any(format!(
                "sum: {} and {} are not numbers",
                a.type_name(),
                b.type_name()
            )),
        },
    }
}

impl AggregateFunction<Rec> for Over {
    type Acc = Vec<Acc>;
    type Out = Vec<Rec>;

    fn create_accumulator(&self) -> Vec<Acc> {
        self.aggs
            .specs
            .iter()
            .map(|s| match s.kind {
                AggKind::Count => Acc::Count(0),
                AggKind::Sum => Acc::Sum(None),
                AggKind::Avg => Acc::Avg(0.0, 0),
                AggKind::CollectList => Acc::List(Vec::new()),
                AggKind::ArgMax | AggKind::ArgMin => Acc::Arg(None),
                _ => Acc::One(None),
            })
            .collect()
    }

    fn add(&self, record: &Rec, acc: &mut Vec<Acc>) {
        let r = (self.value)(record);
        for (s, a) in self.aggs.specs.iter().zip(acc.iter_mut()) {
            let v = s.arg.as_ref().map(|e| eval(e, r));
            if matches!(v, Some(Rec::None)) && s.kind != AggKind::CollectList {
                continue; // SQL's aggregates skip nulls
            }
            match (s.kind, a) {
                (AggKind::Count, Acc::Count(n)) => *n += 1,
                (AggKind::Sum, Acc::Sum(sum)) => {
                    let v = v.unwrap_or_default();
                    *sum = Some(match sum.take() {
                        None => v,
                        Some(x) => add_numbers(x, &v),
                    })
                }
                (AggKind::Avg, Acc::Avg(total, n)) => {
                    let v = v.unwrap_or_default();
                    *total += v.as_f64().unwrap_or_else(|| {
                        std::panic::panic_any(format!("avg: {} is not a number", v.type_name()))
                    });
                    *n += 1;
                }
                (AggKind::Min | AggKind::Max, Acc::One(cur)) => {
                    let v = v.unwrap_or_default();
                    let better = match cur.as_ref() {
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
                        *cur = Some(v);
                    }
                }
                (AggKind::First, Acc::One(cur)) => {
                    if cur.is_none() {
                        *cur = v;
                    }
                }
                (AggKind::Last, Acc::One(cur)) => *cur = v,
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

    fn get_result(&self, acc: &Vec<Acc>) -> Vec<Rec> {
        acc.iter()
            .map(|a| match a {
                Acc::Count(n) => Rec::Int(*n as i64),
                Acc::Sum(s) | Acc::One(s) => s.clone().unwrap_or_default(),
                Acc::Avg(_, 0) => Rec::None,
                Acc::Avg(t, n) => Rec::Float(t / *n as f64),
                Acc::List(items) => Rec::List(items.clone()),
                Acc::Arg(x) => x.as_ref().map(|b| b.1.clone()).unwrap_or_default(),
            })
            .collect()
    }

    fn merge(&self, a: Vec<Acc>, b: Vec<Acc>) -> Vec<Acc> {
        a.into_iter()
            .zip(b)
            .zip(&self.aggs.specs)
            .map(|((x, y), s)| match (x, y) {
                (Acc::Count(p), Acc::Count(q)) => Acc::Count(p + q),
                (Acc::Sum(p), Acc::Sum(q)) => Acc::Sum(match (p, q) {
                    (Some(p), Some(q)) => Some(add_numbers(p, &q)),
                    (p, q) => p.or(q),
                }),
                (Acc::Avg(t, n), Acc::Avg(u, m)) => Acc::Avg(t + u, n + m),
                (Acc::List(mut p), Acc::List(q)) => {
                    p.extend(q);
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
