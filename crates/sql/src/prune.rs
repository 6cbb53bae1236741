//! Projection push-down: which columns of each scanned table a plan reads, down to the
//! fields of its nested rows, so that the scan decodes only those (Flink's
//! `SupportsProjectionPushDown`, which its JSON format implements).
//!
//! The needs flow from the plan's root (every output column is read) down to its scans:
//! each node asks of its input the columns its outputs, predicates, keys and aggregates
//! read. `bid.price` asks only field `price` of column `bid`; a column named whole asks all
//! of it. A table's rowtime column and what its computed columns and watermark read are
//! always read. A scan whose table is read more than once (two views of one table) reads
//! the union, and all its scans share it.

use std::collections::{BTreeSet, HashMap};

use crate::catalog::Table;
use crate::expr::Scalar;
use crate::plan::{GroupWindow, Node, Plan};

/// What is read of one column.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Read {
    /// Nothing.
    #[default]
    None,
    /// The whole value.
    All,
    /// These fields of a nested row (by position), each whole.
    Fields(BTreeSet<usize>),
}

impl Read {
    /// Adds what `other` reads.
    pub fn merge(&mut self, other: &Read) {
        match (&mut *self, other) {
            (_, Read::None) | (Read::All, _) => {}
            (Read::Fields(a), Read::Fields(b)) => a.extend(b),
            (me, other) => *me = other.clone(),
        }
    }

    /// Whether anything of the column is read.
    pub fn any(&self) -> bool {
        *self != Read::None
    }

    /// Whether field `i` of the (nested row) column is read.
    pub fn field(&self, i: usize) -> bool {
        match self {
            Read::None => false,
            Read::All => true,
            Read::Fields(f) => f.contains(&i),
        }
    }
}

/// Per table (by name): what the plan reads of each of its columns, computed ones included,
/// in declaration order.
pub type TableReads = HashMap<String, Vec<Read>>;

/// What `plan` reads of the tables it scans; all its output columns are read.
pub fn reads(plan: &Plan) -> TableReads {
    let mut tables = TableReads::new();
    let all = vec![Read::All; plan.scope.columns.len()];
    need(plan, &all, &mut tables);
    tables
}

/// What `table`'s scan decodes, given what the plan reads of it: per physical column, what
/// is read of it (the rowtime, the computed columns' and the watermark's inputs added).
pub fn physical_reads(table: &Table, read: Option<&Vec<Read>>) -> Vec<Read> {
    let mut columns: Vec<Read> = match read {
        Some(r) => r.clone(),
        // Not planned through `reads` (a direct build): everything.
        None => vec![Read::All; table.columns.len()],
    };
    columns.resize(table.columns.len(), Read::None);
    if let Some((rowtime, watermark)) = &table.watermark {
        columns[*rowtime] = Read::All;
        // The watermark's expression is over all the columns.
        expr(watermark, &mut columns);
    }
    let mut physical = Vec::new();
    for (column, read) in table.columns.iter().zip(&columns) {
        if column.computed.is_none() {
            physical.push(read.clone());
        }
    }
    // A computed column read reads its inputs, which are physical columns.
    for (column, read) in table.columns.iter().zip(&columns) {
        if let (Some(e), true) = (&column.computed, read.any()) {
            expr(e, &mut physical);
        }
    }
    physical
}

/// Records in `reads` (one per input column) what `e` reads.
fn expr(e: &Scalar, reads: &mut [Read]) {
    let mut mark = |c: usize, r: Read| {
        if let Some(slot) = reads.get_mut(c) {
            slot.merge(&r);
        }
    };
    match e {
        Scalar::Col(c) => mark(*c, Read::All),
        Scalar::Field(inner, i) if matches!(**inner, Scalar::Col(_)) => {
            if let Scalar::Col(c) = **inner {
                mark(c, Read::Fields(BTreeSet::from([*i])));
            }
        }
        e => e.for_each_operand(&mut |x| expr(x, reads)),
    }
}

/// Adds to `tables` what `plan` reads of its scans when `needed` (one per output column)
/// is read of its output.
fn need(plan: &Plan, needed: &[Read], tables: &mut TableReads) {
    let width = |p: &Plan| p.scope.columns.len();
    match &plan.node {
        Node::Scan(table) => {
            let reads = tables
                .entry(table.name.clone())
                .or_insert_with(|| vec![Read::None; table.columns.len()]);
            for (r, n) in reads.iter_mut().zip(needed) {
                r.merge(n);
            }
        }
        Node::Filter(input, predicate) => {
            let mut reads = needed.to_vec();
            reads.resize(width(input), Read::None);
            expr(predicate, &mut reads);
            need(input, &reads, tables);
        }
        Node::Project(input, exprs) => {
            let mut reads = vec![Read::None; width(input)];
            for (e, n) in exprs.iter().zip(needed) {
                match (e, n) {
                    (_, Read::None) => {}
                    // A column passed on is read as much as its output is.
                    (Scalar::Col(c), n) => {
                        if let Some(r) = reads.get_mut(*c) {
                            r.merge(n);
                        }
                    }
                    (e, _) => expr(e, &mut reads),
                }
            }
            need(input, &reads, tables);
        }
        Node::Aggregate(input, keys, calls) | Node::WindowAggregate(input, _, keys, calls) => {
            let mut reads = vec![Read::None; width(input)];
            for k in keys {
                expr(k, &mut reads);
            }
            for c in calls {
                for e in c.arg.iter().chain(&c.filter) {
                    expr(e, &mut reads);
                }
            }
            if let Node::WindowAggregate(_, window, _, _) = &plan.node {
                if let Some(t) = input.rowtime {
                    reads[t] = Read::All;
                }
                if let GroupWindow::Columns { start, end } = window {
                    for c in [*start, *end] {
                        if let Some(r) = reads.get_mut(c) {
                            *r = Read::All;
                        }
                    }
                }
            }
            need(input, &reads, tables);
        }
        Node::Rank(input, rank) => {
            let mut reads = needed.to_vec();
            reads.resize(width(input), Read::None);
            for e in rank
                .partition
                .iter()
                .chain(rank.order.iter().map(|k| &k.expr))
            {
                expr(e, &mut reads);
            }
            need(input, &reads, tables);
        }
        Node::WindowTvf(input, _) => {
            let mut reads = needed.to_vec();
            reads.resize(width(input), Read::None);
            if let Some(t) = input.rowtime {
                reads[t] = Read::All;
            }
            need(input, &reads, tables);
        }
        Node::Union(inputs) => {
            for input in inputs {
                let mut reads = needed.to_vec();
                reads.resize(width(input), Read::None);
                if let Some(t) = input.rowtime {
                    reads[t] = Read::All;
                }
                need(input, &reads, tables);
            }
        }
        Node::Join(left, right, spec) => {
            let (lw, rw) = (width(left), width(right));
            let mut joined = needed.to_vec();
            joined.resize(lw + rw, Read::None);
            if let Some(r) = &spec.residual {
                expr(r, &mut joined);
            }
            let mut lefts = joined[..lw].to_vec();
            let mut rights = joined[lw..].to_vec();
            for k in &spec.left_keys {
                expr(k, &mut lefts);
            }
            for k in &spec.right_keys {
                expr(k, &mut rights);
            }
            need(left, &lefts, tables);
            need(right, &rights, tables);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reads of `query` over table `t` and its view `v` (the shape of Nexmark's
    /// `datagen` and `bid`), and what `t`'s scan decodes.
    fn reads_of(query: &str) -> (Vec<Read>, Vec<Read>) {
        let ddl = "CREATE TABLE t (
                k INT,
                r ROW<a BIGINT, b VARCHAR, ts TIMESTAMP(3)>,
                s ROW<c BIGINT, ts TIMESTAMP(3)>,
                ts AS CASE WHEN k = 0 THEN s.ts ELSE r.ts END,
                WATERMARK FOR ts AS ts - INTERVAL '1' SECOND
            ) WITH ('connector' = 'filesystem', 'path' = 'x');
            CREATE VIEW v AS SELECT r.a, r.b, ts FROM t WHERE k = 2;";
        let (catalog, plan) = crate::plan::plan_script(&format!("{ddl}\n{query};"));
        let mut tables = reads(&plan);
        let t = tables.remove("t").unwrap();
        let physical = physical_reads(catalog.table("t").unwrap(), Some(&t));
        (t, physical)
    }

    fn fields(f: &[usize]) -> Read {
        Read::Fields(f.iter().copied().collect())
    }

    #[test]
    fn a_view_reads_only_the_nested_fields_its_query_names() {
        let (t, physical) = reads_of("SELECT a FROM v");
        assert_eq!(t, vec![Read::All, fields(&[0]), Read::None, Read::None]);
        // The rowtime is always read, and with it the fields its expression reads.
        assert_eq!(physical, vec![Read::All, fields(&[0, 2]), fields(&[1])]);
    }

    #[test]
    fn two_reads_of_one_table_read_the_union_and_a_whole_column_reads_all() {
        let (t, physical) =
            reads_of("SELECT v.b, t.s FROM v JOIN t ON v.a = t.k WHERE t.r.ts IS NOT NULL");
        assert_eq!(t[1], fields(&[0, 1, 2]));
        assert_eq!(t[2], Read::All);
        assert_eq!(physical, vec![Read::All, fields(&[0, 1, 2]), Read::All]);
    }

    #[test]
    fn aggregates_read_their_keys_arguments_and_filters() {
        let (t, _) =
            reads_of("SELECT k, COUNT(*) FILTER (WHERE r.b = 'x'), MAX(s.c) FROM t GROUP BY k");
        assert_eq!(t, vec![Read::All, fields(&[1]), fields(&[0]), Read::None]);
    }
}
