//! Calcs: a filter and a projection run as one step per row (Flink's `Calc`), with the
//! subexpressions they share computed once.
//!
//! Nexmark's q21 tests `REGEXP_EXTRACT(url, ...)` in its `WHERE` and returns it again in
//! its `SELECT`, and compares `lower(channel)` five times. A [`Calc`] finds each
//! subexpression that a row's filter and projection compute more than once (by its bound
//! form, so the same function of the same columns), computes it once into a slot appended
//! to the row, and reads the slot wherever the expression stood:
//!
//! ```text
//!   row ──slots the filter reads──▶ filter ──other shared slots──▶ projection ──▶ row'
//! ```
//!
//! Slots the filter reads are computed before it; slots only the projection reads, after
//! it, so that a row the filter drops costs none of them. A shared subexpression is
//! computed even where it stood in a branch the row would not have taken (a `CASE`'s later
//! branch, the right side of an `OR`): Spate's functions have no side effects and give
//! `NULL` where they cannot compute, so only the time of the call differs. `PROCTIME()`
//! is never shared (each call reads the clock).

use std::collections::HashMap;
use std::sync::Arc;

use crate::expr::Scalar;
use crate::types::{Datum, SqlRow};

/// A filter and a projection of one row, shared subexpressions computed once.
pub struct Calc {
    /// The input rows' width: slot `k` is column `width + k`.
    width: usize,
    /// Slots computed before the filter (in order: a slot may read earlier ones).
    before: Vec<Scalar>,
    /// The filter, over the row and its slots; `None` keeps every row.
    predicate: Option<Scalar>,
    /// Slots computed after the filter, for the projection.
    after: Vec<Scalar>,
    /// The projection, over the row and its slots; `None` passes the row on as it came.
    projection: Option<Projection>,
}

impl Calc {
    /// A calc over rows of `width` columns: `predicate` (if any), then `exprs` (if any).
    pub fn new(width: usize, predicate: Option<&Scalar>, exprs: Option<&[Scalar]>) -> Calc {
        let mut counts = HashMap::new();
        for e in predicate.into_iter().chain(exprs.into_iter().flatten()) {
            count(e, &mut counts);
        }
        let mut shared = Shared {
            width,
            counts,
            slots: HashMap::new(),
            exprs: Vec::new(),
        };
        let predicate = predicate.map(|p| shared.rewrite(p));
        let before = shared.exprs.len();
        let exprs: Option<Vec<Scalar>> =
            exprs.map(|es| es.iter().map(|e| shared.rewrite(e)).collect());
        let after = shared.exprs.split_off(before);
        Calc {
            width,
            before: shared.exprs,
            predicate,
            after,
            projection: exprs.as_deref().map(Projection::new),
        }
    }

    /// How many subexpressions are computed once for several uses.
    pub fn shared(&self) -> usize {
        self.before.len() + self.after.len()
    }

    /// The row out for `row`, or `None` when the filter drops it.
    #[inline]
    pub fn apply(&self, mut row: SqlRow) -> Option<SqlRow> {
        if self.shared() > 0 {
            // Slots go right after the row's own columns.
            row.resize(self.width, Datum::Null);
            row.reserve(self.shared());
            for e in &self.before {
                let v = e.eval(&row);
                row.push(v);
            }
        }
        if let Some(p) = &self.predicate {
            if !p.test(&row) {
                return None;
            }
        }
        for e in &self.after {
            let v = e.eval(&row);
            row.push(v);
        }
        Some(match &self.projection {
            Some(projection) => projection.apply(row),
            None => {
                if self.shared() > 0 {
                    row.truncate(self.width);
                }
                row
            }
        })
    }
}

/// Counts every subexpression worth sharing, by its bound form.
fn count(e: &Scalar, counts: &mut HashMap<String, usize>) {
    if worth_sharing(e) {
        *counts.entry(format!("{e:?}")).or_default() += 1;
    }
    for child in children(e) {
        count(child, counts);
    }
}

/// Whether computing `e` once and reading it back can save work: it calls something, and
/// it reads no clock.
fn worth_sharing(e: &Scalar) -> bool {
    let computes = !matches!(
        e,
        Scalar::Col(_)
            | Scalar::Lit(_)
            | Scalar::Field(..)
            | Scalar::ProcTime
            | Scalar::Not(_)
            | Scalar::IsNull(..)
    );
    computes && !reads_clock(e)
}

fn reads_clock(e: &Scalar) -> bool {
    matches!(e, Scalar::ProcTime) || children(e).into_iter().any(reads_clock)
}

/// The subexpressions `e` reads directly.
fn children(e: &Scalar) -> Vec<&Scalar> {
    match e {
        Scalar::Col(_) | Scalar::Lit(_) | Scalar::ProcTime => vec![],
        Scalar::Field(x, _)
        | Scalar::Not(x)
        | Scalar::Neg(x)
        | Scalar::IsNull(x, _)
        | Scalar::Cast(x, ..)
        | Scalar::InList(x, ..) => vec![x],
        Scalar::Arith(_, _, a, b)
        | Scalar::Cmp(_, _, a, b)
        | Scalar::And(a, b)
        | Scalar::Or(a, b) => {
            vec![a, b]
        }
        Scalar::Case(branches, otherwise) => branches
            .iter()
            .flat_map(|(c, v)| [c, v])
            .chain(std::iter::once(&**otherwise))
            .collect(),
        Scalar::Call(_, args) => args.iter().collect(),
    }
}

/// The subexpressions chosen so far and the slots they were given.
struct Shared {
    width: usize,
    counts: HashMap<String, usize>,
    /// A shared subexpression's column.
    slots: HashMap<String, usize>,
    /// The slots' expressions, in slot order.
    exprs: Vec<Scalar>,
}

impl Shared {
    /// `e` with each subexpression that occurs more than once read from its slot (given one
    /// the first time it is met; its own shared parts first, so that it reads their slots).
    fn rewrite(&mut self, e: &Scalar) -> Scalar {
        let key = worth_sharing(e).then(|| format!("{e:?}"));
        if let Some(key) = key.filter(|k| self.counts.get(k).copied().unwrap_or(0) > 1) {
            if let Some(&slot) = self.slots.get(&key) {
                return Scalar::Col(slot);
            }
            let computed = self.rewrite_children(e);
            let slot = self.width + self.exprs.len();
            self.exprs.push(computed);
            self.slots.insert(key, slot);
            return Scalar::Col(slot);
        }
        self.rewrite_children(e)
    }

    fn rewrite_children(&mut self, e: &Scalar) -> Scalar {
        e.map_operands(&mut |x| self.rewrite(x))
    }
}

/// A projection that moves the input's values it passes on as they are (a column, or a
/// field of a nested row, named once), instead of cloning them, and computes the others
/// first.
pub struct Projection {
    outputs: Vec<Output>,
    /// The fields moved out of nested rows: per input column, its fields and the output
    /// slots they go to (a nested row is checked for other owners once, not per field).
    nested: Vec<(usize, Vec<(usize, usize)>)>,
}

/// How a [`Projection`] makes one output column.
enum Output {
    /// Moves this input column.
    Move(usize),
    /// A field of a nested row, moved by [`Projection::nested`].
    MoveField,
    /// Computes this expression.
    Compute(Scalar),
}

impl Projection {
    /// The projection computing `exprs`.
    pub fn new(exprs: &[Scalar]) -> Self {
        let mut whole = HashMap::<usize, usize>::new();
        let mut fields = HashMap::<(usize, usize), usize>::new();
        for e in exprs {
            match e {
                Scalar::Col(c) => *whole.entry(*c).or_default() += 1,
                Scalar::Field(inner, i) => {
                    if let Scalar::Col(c) = **inner {
                        *fields.entry((c, *i)).or_default() += 1;
                    }
                }
                _ => {}
            }
        }
        let fields_of = |c: usize| fields.keys().any(|&(f, _)| f == c);
        let mut nested: Vec<(usize, Vec<(usize, usize)>)> = Vec::new();
        let outputs = exprs
            .iter()
            .enumerate()
            .map(|(slot, e)| match e {
                Scalar::Col(c) if whole[c] == 1 && !fields_of(*c) => Output::Move(*c),
                Scalar::Field(inner, i) => match **inner {
                    Scalar::Col(c) if fields[&(c, *i)] == 1 && !whole.contains_key(&c) => {
                        match nested.iter_mut().find(|(col, _)| *col == c) {
                            Some((_, moves)) => moves.push((*i, slot)),
                            None => nested.push((c, vec![(*i, slot)])),
                        }
                        Output::MoveField
                    }
                    _ => Output::Compute(e.clone()),
                },
                e => Output::Compute(e.clone()),
            })
            .collect();
        Projection { outputs, nested }
    }

    /// The output row for `row`.
    pub fn apply(&self, mut row: SqlRow) -> SqlRow {
        let mut out: SqlRow = self
            .outputs
            .iter()
            .map(|o| match o {
                Output::Compute(e) => e.eval(&row),
                _ => Datum::Null,
            })
            .collect();
        for (slot, o) in out.iter_mut().zip(&self.outputs) {
            if let Output::Move(c) = *o {
                if let Some(v) = row.get_mut(c) {
                    *slot = std::mem::take(v);
                }
            }
        }
        for (c, moves) in &self.nested {
            if let Some(Datum::Row(nested)) = row.get_mut(*c) {
                match Arc::get_mut(nested) {
                    Some(values) => {
                        for &(i, slot) in moves {
                            if let Some(v) = values.get_mut(i) {
                                out[slot] = std::mem::take(v);
                            }
                        }
                    }
                    // Shared with another row: cloned.
                    None => {
                        for &(i, slot) in moves {
                            if let Some(v) = nested.get(i) {
                                out[slot] = v.clone();
                            }
                        }
                    }
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use sqlparser::dialect::GenericDialect;
    use sqlparser::parser::Parser;

    use super::*;
    use crate::catalog::Catalog;
    use crate::expr::{bind, Column, Scope};
    use crate::types::SqlType;

    fn bound(text: &str) -> Scalar {
        let expr = Parser::new(&GenericDialect {})
            .try_with_sql(text)
            .and_then(|mut p| p.parse_expr())
            .expect("parses");
        let scope = Scope::new(
            ["channel", "url"]
                .iter()
                .map(|name| Column {
                    qualifier: None,
                    name: (*name).into(),
                    ty: SqlType::String,
                })
                .collect(),
        );
        bind(&expr, &scope, &Catalog::default())
            .expect("binds")
            .expr
    }

    fn row(channel: &str, url: &str) -> SqlRow {
        vec![Datum::Str(channel.into()), Datum::Str(url.into())]
    }

    /// q21's filter and projection: the regular expression and `lower(channel)` are
    /// computed once each, the regular expression before the filter (which reads it), and
    /// the rows are those of evaluating every expression on its own.
    #[test]
    fn q21_computes_its_shared_calls_once() {
        let re = "REGEXP_EXTRACT(url, '(&|^)channel_id=([^&]*)', 2)";
        let predicate = bound(&format!(
            "{re} IS NOT NULL OR lower(channel) IN ('apple', 'google', 'facebook', 'baidu')"
        ));
        let exprs = [
            bound("channel"),
            bound(&format!(
                "CASE WHEN lower(channel) = 'apple' THEN '0' WHEN lower(channel) = 'google' \
                 THEN '1' WHEN lower(channel) = 'facebook' THEN '2' \
                 WHEN lower(channel) = 'baidu' THEN '3' ELSE {re} END"
            )),
        ];
        let calc = Calc::new(2, Some(&predicate), Some(&exprs));
        assert_eq!((calc.before.len(), calc.after.len()), (2, 0));
        for r in [
            row("Apple", "https://x/?channel_id=9"),
            row("channel-7", "https://x/?a=1&channel_id=77&b=2"),
            row("channel-8", "https://x/?a=1"),
            row("Baidu", "https://x/"),
        ] {
            let keep = predicate.eval(&r) == Datum::Bool(true);
            let expected = keep.then(|| exprs.iter().map(|e| e.eval(&r)).collect::<SqlRow>());
            assert_eq!(calc.apply(r), expected);
        }
    }

    /// A subexpression only the projection shares is computed after the filter, and
    /// `PROCTIME()` is never shared.
    #[test]
    fn projection_only_slots_come_after_the_filter() {
        let predicate = bound("channel <> 'x'");
        let exprs = [
            bound("upper(url)"),
            bound("upper(url) || 'a'"),
            bound("CAST(PROCTIME() AS STRING)"),
            bound("CAST(PROCTIME() AS STRING)"),
        ];
        let calc = Calc::new(2, Some(&predicate), Some(&exprs));
        assert_eq!((calc.before.len(), calc.after.len()), (0, 1));
        assert_eq!(calc.apply(row("x", "u")), None);
        let out = calc.apply(row("y", "u")).expect("kept");
        assert_eq!(out[..2], [Datum::Str("U".into()), Datum::Str("Ua".into())]);
    }
}
