//! The regular (unbounded) join: both sides' rows kept per key, each arriving row meeting
//! the other side's rows (Flink's `StreamingJoinOperator` for inner joins), and rows that a
//! time bound proves can meet nothing more dropped.
//!
//! # Dropping rows that can meet nothing more
//!
//! Flink keeps every row of a regular join (unless a state TTL, which loses results, is
//! set). Spate drops a row only when no row the other side can still send could meet it,
//! so the results are Flink's, late rows included:
//!
//! * The join's condition bounds a column of the other side from above by a column of this
//!   side: `y <= x + c` (from `x BETWEEN y - c AND y`, `x >= y - c`, `y < x + c`, ...).
//! * The other side's column only grows with the watermark: every row it sends after the
//!   watermark `W` has `y >= W + k`. This holds for a window aggregate's `window_end`
//!   (`k = 2`: a window is emitted once the watermark reaches `end - 1`) and `window_time`
//!   (`k = 1`), passed through projections and filters.
//! * So once the join's watermark reaches `x + c - k + 1`, the row can be dropped; a row
//!   arriving after that meets the rows kept and is not kept itself. The rows are dropped by
//!   event-time timers rounded up to a multiple of that lifetime (so a key's rows go a
//!   batch at a time, not one timer each): a row is kept at most twice as long as needed.
//!
//! Nexmark's q7 joins every bid with the maximum price of the 10-second window that ends
//! within 10 seconds after it: a bid is dropped 10 to 20 seconds of event time after its
//! own, instead of being kept for the whole run.

use spate_dataflow::{KeyedCoProcessFunction, ProcessContext, TimeDomain, Timestamp};

use crate::expr::{ArithOp, CmpOp, Numeric, Scalar};
use crate::packed::JoinSide;
use crate::plan::{Node, Plan};
use crate::types::{Datum, SqlKey, SqlRow};

/// When a kept row of one side can meet nothing more: once the watermark reaches the value
/// of its column `col` plus `after`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Expiry {
    /// The time column, in the side's own row.
    pub col: usize,
    /// Added to the column's value.
    pub after: i64,
}

impl Expiry {
    fn of(&self, row: &[Datum]) -> Option<Timestamp> {
        match row.get(self.col) {
            Some(Datum::Timestamp(t)) => t.checked_add(self.after),
            _ => None,
        }
    }

    /// The time of the timer that drops a row expiring at `t`: `t` rounded up to a multiple
    /// of the row's lifetime (`after`, at least 1 ms, at most a minute), so that the rows of
    /// a key expire a batch per timer rather than one each. A row lives at most twice as
    /// long as it must.
    fn timer(&self, t: Timestamp) -> Timestamp {
        let every = self.after.clamp(1, 60_000);
        let rem = t.rem_euclid(every);
        if rem == 0 {
            t
        } else {
            t.saturating_add(every - rem)
        }
    }
}

/// The expiries of the left and right rows of a join of `left` and `right` on `residual`
/// (over the joined row: the left's columns, then the right's), when the condition and the
/// inputs prove them (see the [module docs](self)).
pub fn expiries(
    left: &Plan,
    right: &Plan,
    residual: Option<&Scalar>,
) -> (Option<Expiry>, Option<Expiry>) {
    let Some(residual) = residual else {
        return (None, None);
    };
    let width = left.scope.columns.len();
    let mut conjuncts = Vec::new();
    flatten_and(residual, &mut conjuncts);
    let (mut left_expiry, mut right_expiry): (Option<Expiry>, Option<Expiry>) = (None, None);
    // The earliest expiry each side's conditions prove is the one to use.
    let keep = |slot: &mut Option<Expiry>, e: Expiry| {
        if slot.is_none_or(|s| s.col == e.col && e.after < s.after) {
            *slot = Some(e);
        }
    };
    for c in conjuncts {
        // Each `a op b` as an upper bound `hi <= lo + d` on one column by another.
        let Scalar::Cmp(op, Numeric::Int, a, b) = c else {
            continue;
        };
        let (Some((ca, oa)), Some((cb, ob))) = (linear(a), linear(b)) else {
            continue;
        };
        // a + oa OP b + ob.
        let (hi, lo, d) = match op {
            // a + oa <= b + ob  ->  a <= b + (ob - oa)
            CmpOp::Le => (ca, cb, ob - oa),
            CmpOp::Lt => (ca, cb, ob - oa - 1),
            // a + oa >= b + ob  ->  b <= a + (oa - ob)
            CmpOp::Ge => (cb, ca, oa - ob),
            CmpOp::Gt => (cb, ca, oa - ob - 1),
            _ => continue,
        };
        // `hi <= lo + d`, with `hi` on one side and `lo` on the other: a row of `lo`'s side
        // expires once the other side can send no `hi` below `lo + d`.
        match (hi < width, lo < width) {
            (false, true) => {
                if let Some(k) = slack(right, hi - width) {
                    keep(
                        &mut left_expiry,
                        Expiry {
                            col: lo,
                            after: d - k + 1,
                        },
                    );
                }
            }
            (true, false) => {
                if let Some(k) = slack(left, hi) {
                    keep(
                        &mut right_expiry,
                        Expiry {
                            col: lo - width,
                            after: d - k + 1,
                        },
                    );
                }
            }
            _ => {}
        }
    }
    (left_expiry, right_expiry)
}

fn flatten_and<'a>(e: &'a Scalar, out: &mut Vec<&'a Scalar>) {
    match e {
        Scalar::And(a, b) => {
            flatten_and(a, out);
            flatten_and(b, out);
        }
        other => out.push(other),
    }
}

/// `col + offset` when `e` is a column plus or minus constants (timestamps and intervals are
/// milliseconds).
fn linear(e: &Scalar) -> Option<(usize, i64)> {
    match e {
        Scalar::Col(c) => Some((*c, 0)),
        Scalar::Arith(op @ (ArithOp::Add | ArithOp::Sub), Numeric::Int, a, b) => {
            let Scalar::Lit(Datum::Int(d)) = &**b else {
                return None;
            };
            let (c, o) = linear(a)?;
            match op {
                ArithOp::Add => o.checked_add(*d).map(|o| (c, o)),
                _ => o.checked_sub(*d).map(|o| (c, o)),
            }
        }
        _ => None,
    }
}

/// `k` such that every row `plan` emits after the watermark `W` has a value of at least
/// `W + k` in column `col`, when it is known.
fn slack(plan: &Plan, col: usize) -> Option<i64> {
    match &plan.node {
        Node::Filter(input, _) => slack(input, col),
        Node::Project(input, exprs) => {
            let (c, offset) = linear(exprs.get(col)?)?;
            slack(input, c)?.checked_add(offset)
        }
        Node::WindowAggregate(..) => {
            let (_, end) = plan.windows?;
            if col == end {
                Some(2)
            } else if Some(col) == plan.rowtime {
                Some(1)
            } else {
                None
            }
        }
        _ => None,
    }
}

/// Both sides' rows for a key, with the latest expiry of each side's rows: a timer at or
/// after it drops the whole side without reading its rows.
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct Sides {
    lefts: JoinSide,
    rights: JoinSide,
    /// The latest expiry among the left rows (`None` while no row with an expiry is kept).
    left_until: Option<Timestamp>,
    /// The latest expiry among the right rows.
    right_until: Option<Timestamp>,
}

impl Sides {
    fn is_empty(&self) -> bool {
        self.lefts.is_empty() && self.rights.is_empty()
    }
}

/// Drops the rows of `side` that expire by `now`: all of them, unread, when `now` is at or
/// after their latest expiry `until`.
fn expire(
    side: &mut JoinSide,
    until: &mut Option<Timestamp>,
    expiry: Option<Expiry>,
    now: Timestamp,
) {
    let Some(expiry) = expiry else {
        return;
    };
    if until.is_some_and(|u| u <= now) {
        *side = JoinSide::default();
        *until = None;
    } else if !side.is_empty() {
        side.retain(|row| expiry.of(row).is_none_or(|t| t > now));
    }
}

/// An inner regular join, the arriving row moved into its last match's output.
pub struct RegularJoin {
    /// The condition over the joined row, beyond the keys.
    pub residual: Option<Scalar>,
    /// When a left row can meet nothing more.
    pub left_expiry: Option<Expiry>,
    /// When a right row can meet nothing more.
    pub right_expiry: Option<Expiry>,
}

impl RegularJoin {
    /// Whether to keep an arriving row of a side whose rows expire as `expiry` says, and
    /// when it expires (its timer registered).
    fn keeps(
        expiry: Option<Expiry>,
        row: &[Datum],
        ctx: &mut ProcessContext<'_, SqlKey, Sides, SqlRow>,
    ) -> (bool, Option<Timestamp>) {
        let Some(expiry) = expiry else {
            return (true, None);
        };
        match expiry.of(row) {
            Some(t) if t <= ctx.current_watermark() => (false, None),
            Some(t) => {
                ctx.register_event_time_timer(expiry.timer(t));
                (true, Some(t))
            }
            // A NULL time meets nothing through the bound; it is kept, as Flink keeps it.
            None => (true, Some(Timestamp::MAX)),
        }
    }
}

impl KeyedCoProcessFunction<SqlKey, SqlRow, SqlRow, SqlRow> for RegularJoin {
    type State = Sides;

    fn process_element1(&self, row: SqlRow, ctx: &mut ProcessContext<'_, SqlKey, Sides, SqlRow>) {
        let (keep, until) = Self::keeps(self.left_expiry, &row, ctx);
        let residual = self.residual.as_ref();
        ctx.emit_with(|_, st, out| {
            let sides = st.get_or_insert_with(Default::default);
            if keep {
                sides.lefts.push(&row);
                sides.left_until = sides.left_until.max(until);
            }
            if let Some((last, rest)) = sides.rights.meet().split_last() {
                for other in rest {
                    out.extend(crate::exec::joined(&row, other, residual));
                }
                out.extend(crate::exec::joined_owned(row, last, residual));
            }
            if sides.is_empty() {
                *st = None;
            }
        });
    }

    fn process_element2(&self, row: SqlRow, ctx: &mut ProcessContext<'_, SqlKey, Sides, SqlRow>) {
        let (keep, until) = Self::keeps(self.right_expiry, &row, ctx);
        let residual = self.residual.as_ref();
        ctx.emit_with(|_, st, out| {
            let sides = st.get_or_insert_with(Default::default);
            if keep {
                sides.rights.push(&row);
                sides.right_until = sides.right_until.max(until);
            }
            if let Some((last, rest)) = sides.lefts.meet().split_last() {
                for other in rest {
                    out.extend(crate::exec::joined(other, &row, residual));
                }
                out.extend(crate::exec::joined_to_owned(last, row, residual));
            }
            if sides.is_empty() {
                *st = None;
            }
        });
    }

    fn on_timer(
        &self,
        now: Timestamp,
        _: TimeDomain,
        ctx: &mut ProcessContext<'_, SqlKey, Sides, SqlRow>,
    ) {
        let state = ctx.state();
        let Some(sides) = state else {
            return;
        };
        expire(
            &mut sides.lefts,
            &mut sides.left_until,
            self.left_expiry,
            now,
        );
        expire(
            &mut sides.rights,
            &mut sides.right_until,
            self.right_expiry,
            now,
        );
        if sides.is_empty() {
            *state = None;
        }
    }
}
