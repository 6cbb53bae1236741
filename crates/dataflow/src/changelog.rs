//! Changelog streams: an aggregate whose result rows change as records arrive, emitted as
//! Flink's retract stream (`+I`, `-U`, `+U`, `-D`).
//!
//! This is Flink's updating (unbounded `GROUP BY`) aggregation, and what its `ROW_NUMBER`
//! top-N and deduplication emit: each key keeps an accumulator ([`UpdatingAggregate::Acc`])
//! whose result is zero or more rows ([`UpdatingAggregate::results`]). When a key's result
//! changes, the rows that left it are retracted and the new ones emitted:
//!
//! ```text
//!   record ──▶ key's acc += record, mark the key dirty (timer at the record's time)
//!   watermark passes the timer ──▶ new rows = results(acc)
//!                                  old rows not in new: -U (or -D when no row replaces them)
//!                                  new rows not in old: +I the first time, +U after that
//! ```
//!
//! Changes are emitted once per watermark step per key, as Flink's mini-batch aggregation
//! does: a key updated by many records between two watermarks emits one change, and a
//! bounded input (whose end is the final watermark) ends with the final result. Rows that
//! did not change are not emitted again.
//!
//! [`Updating`] is the operator, a [`KeyedProcessFunction`]: use it with
//! [`KeyedStream::process`] or [`KeyedStream::updating`]. It needs event timestamps upstream
//! (`assign_timestamps_and_watermarks`); records are never late for it (a record behind the
//! watermark is counted at the next step).

use std::hash::Hash;

use spate_types::Data;

use crate::keyed::KeyedStream;
use crate::process::{KeyedProcessFunction, ProcessContext, TimeDomain};
use crate::stream::DataStream;
use crate::time::Timestamp;

/// How a changelog row changes the result (Flink's `RowKind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum RowKind {
    /// A new row (`+I`).
    Insert,
    /// The old value of an updated row (`-U`).
    UpdateBefore,
    /// The new value of an updated row (`+U`).
    UpdateAfter,
    /// A row removed (`-D`).
    Delete,
}

impl RowKind {
    /// The short form: `+I`, `-U`, `+U` or `-D` (Flink's `RowKind.shortString`).
    pub fn short_string(self) -> &'static str {
        match self {
            RowKind::Insert => "+I",
            RowKind::UpdateBefore => "-U",
            RowKind::UpdateAfter => "+U",
            RowKind::Delete => "-D",
        }
    }

    /// Whether the change adds its row to the result (`+I`, `+U`) rather than retracting it.
    pub fn is_addition(self) -> bool {
        matches!(self, RowKind::Insert | RowKind::UpdateAfter)
    }
}

/// One change of an updating result: a row and how it changes the result.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct Change<R> {
    /// How the row changes the result.
    pub kind: RowKind,
    /// The row.
    pub row: R,
}

/// A per-key aggregate whose result rows change as records arrive (the function of
/// [`Updating`]).
///
/// ```
/// use spate_dataflow::changelog::UpdatingAggregate;
///
/// /// The number of records per key, as one row `(key, count)`.
/// struct CountPerKey;
///
/// impl UpdatingAggregate<u32, u32> for CountPerKey {
///     type Acc = u64;
///     type Out = (u32, u64);
///     fn create(&self) -> u64 {
///         0
///     }
///     fn add(&self, acc: &mut u64, _value: u32) {
///         *acc += 1;
///     }
///     fn results(&self, key: &u32, acc: &u64, out: &mut Vec<(u32, u64)>) {
///         out.push((*key, *acc));
///     }
/// }
/// ```
pub trait UpdatingAggregate<K, T>: Send + Sync + 'static {
    /// The accumulator of one key (checkpointed, so it serializes).
    type Acc: serde::Serialize + serde::de::DeserializeOwned + 'static;
    /// A result row; rows are compared to find what changed.
    type Out: Data + PartialEq;
    /// A fresh accumulator.
    fn create(&self) -> Self::Acc;
    /// Adds one record.
    fn add(&self, acc: &mut Self::Acc, value: T);
    /// Appends the key's current result rows to `out` (none, one, or several, as a top-N).
    fn results(&self, key: &K, acc: &Self::Acc, out: &mut Vec<Self::Out>);
}

/// One key's state in [`Updating`]: its accumulator, the rows last emitted for it, and
/// whether it changed since.
#[derive(serde::Serialize, serde::Deserialize)]
#[serde(bound(serialize = "A: serde::Serialize, R: serde::Serialize"))]
#[serde(bound(deserialize = "A: serde::de::DeserializeOwned, R: serde::de::DeserializeOwned"))]
pub struct UpdatingState<A, R> {
    acc: A,
    emitted: Vec<R>,
    dirty: bool,
}

/// Runs an [`UpdatingAggregate`] as a changelog (see the [module docs](self)): a key that
/// changed registers an event-time timer at its record's time, and when the watermark passes
/// it, the rows that left the key's result are retracted (`-U`, or `-D` when nothing
/// replaces them) and the new ones emitted (`+I` the first time, then `+U`).
pub struct Updating<A>(pub A);

impl<K, T, A> KeyedProcessFunction<K, T, Change<A::Out>> for Updating<A>
where
    K: Hash + Eq + Clone + 'static,
    A: UpdatingAggregate<K, T>,
{
    type State = UpdatingState<A::Acc, A::Out>;

    fn process_element(
        &self,
        value: T,
        ctx: &mut ProcessContext<'_, K, Self::State, Change<A::Out>>,
    ) {
        let at = ctx
            .timestamp()
            .max(ctx.current_watermark().saturating_add(1));
        let st = ctx.state().get_or_insert_with(|| UpdatingState {
            acc: self.0.create(),
            emitted: Vec::new(),
            dirty: false,
        });
        self.0.add(&mut st.acc, value);
        if !st.dirty {
            st.dirty = true;
            ctx.register_event_time_timer(at);
        }
    }

    fn on_timer(
        &self,
        _timestamp: Timestamp,
        _domain: TimeDomain,
        ctx: &mut ProcessContext<'_, K, Self::State, Change<A::Out>>,
    ) {
        let key = ctx.key();
        let Some(st) = ctx.state().as_mut() else {
            return;
        };
        st.dirty = false;
        let mut rows = Vec::new();
        self.0.results(key, &st.acc, &mut rows);
        let old = std::mem::take(&mut st.emitted);
        let changes = diff(old, &rows);
        st.emitted = rows;
        for change in changes {
            ctx.collect(change);
        }
    }
}

/// The changes from the rows `old` to the rows `new`: a multiset difference of small lists,
/// retractions first.
fn diff<R: Clone + PartialEq>(old: Vec<R>, new: &[R]) -> Vec<Change<R>> {
    let mut kept = vec![false; new.len()];
    let mut removed = Vec::new();
    for row in old {
        match (0..new.len()).find(|&i| !kept[i] && new[i] == row) {
            Some(i) => kept[i] = true,
            None => removed.push(row),
        }
    }
    let had_rows = kept.iter().any(|&k| k) || !removed.is_empty();
    let retract = if new.is_empty() {
        RowKind::Delete
    } else {
        RowKind::UpdateBefore
    };
    let add = if had_rows {
        RowKind::UpdateAfter
    } else {
        RowKind::Insert
    };
    let mut changes: Vec<Change<R>> = removed
        .into_iter()
        .map(|row| Change { kind: retract, row })
        .collect();
    changes.extend(
        new.iter()
            .zip(&kept)
            .filter(|(_, &kept)| !kept)
            .map(|(row, _)| Change {
                kind: add,
                row: row.clone(),
            }),
    );
    changes
}

impl<K: Data + Hash + Eq, T: Data> KeyedStream<K, T> {
    /// Aggregates each key with `agg` into an updating result, emitted as a changelog
    /// ([`Updating`]; Flink's unbounded `GROUP BY`).
    pub fn updating<A: UpdatingAggregate<K, T>>(&self, agg: A) -> DataStream<Change<A::Out>> {
        self.process(Updating(agg)).name_default("updating")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds<R: Clone>(changes: &[Change<R>]) -> Vec<(&'static str, R)> {
        changes
            .iter()
            .map(|c| (c.kind.short_string(), c.row.clone()))
            .collect()
    }

    #[test]
    fn a_first_result_is_inserted() {
        assert_eq!(kinds(&diff(vec![], &[1, 2])), [("+I", 1), ("+I", 2)]);
    }

    #[test]
    fn a_changed_row_is_retracted_then_updated() {
        assert_eq!(kinds(&diff(vec![1], &[2])), [("-U", 1), ("+U", 2)]);
    }

    #[test]
    fn unchanged_rows_are_not_emitted() {
        assert!(diff(vec![1, 2], &[2, 1]).is_empty());
        // A top-N that gains a row keeps the others.
        assert_eq!(kinds(&diff(vec![5, 3], &[5, 4, 3])), [("+U", 4)]);
    }

    #[test]
    fn an_emptied_result_is_deleted() {
        assert_eq!(kinds(&diff(vec![1, 2], &[])), [("-D", 1), ("-D", 2)]);
    }

    #[test]
    fn duplicates_count_as_a_multiset() {
        assert_eq!(kinds(&diff(vec![7, 7], &[7])), [("-U", 7)]);
        assert_eq!(kinds(&diff(vec![7], &[7, 7])), [("+U", 7)]);
    }

    /// Replaying a changelog (adding `+I`/`+U` rows, removing `-U`/`-D` rows) gives the last
    /// result, for any sequence of results.
    #[test]
    fn replaying_the_changes_gives_the_result() {
        let results: [&[i32]; 6] = [&[3], &[3, 1], &[4, 3, 1], &[], &[2, 2], &[2]];
        let mut emitted: Vec<i32> = Vec::new();
        let mut table: Vec<i32> = Vec::new();
        for rows in results {
            for c in diff(std::mem::take(&mut emitted), rows) {
                if c.kind.is_addition() {
                    table.push(c.row);
                } else {
                    let at = table
                        .iter()
                        .position(|r| *r == c.row)
                        .expect("retracted row");
                    table.swap_remove(at);
                }
            }
            emitted = rows.to_vec();
            let (mut got, mut want) = (table.clone(), rows.to_vec());
            got.sort_unstable();
            want.sort_unstable();
            assert_eq!(got, want);
        }
    }
}
