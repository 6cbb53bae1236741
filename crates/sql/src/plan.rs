//! Planning: a query's AST bound against the catalog into a tree of [`Plan`] nodes, each
//! with its output columns, its rowtime column (Flink's time attribute) and whether it is
//! append-only.
//!
//! A node is one of Spate's operators to be: a scan is a source with its watermark strategy,
//! a filter and a projection are chained `filter`/`map` calls ([`crate::exec`] builds them).
//! Views are inlined where they are named, as Flink's planner does.

use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;

use sqlparser::ast::{
    Distinct, DuplicateTreatment, Expr, FunctionArg, FunctionArgExpr, FunctionArguments,
    GroupByExpr, Query, Select, SelectItem, SelectItemQualifiedWildcardKind, SetExpr, SetOperator,
    SetQuantifier, TableFactor,
};

use crate::agg::{AggCall, AggFunc, SortKey};
use crate::catalog::{column_name, Catalog, Table};
use crate::expr::{self, Column, Scalar, Scope, Typed};
use crate::types::{Datum, SqlType};
use crate::SqlError;

/// A plan node and what it gives.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The operator.
    pub node: Node,
    /// The columns of its rows, with the names they are known by.
    pub scope: Scope,
    /// The position of the rowtime column (the records' event time), if the rows have one.
    pub rowtime: Option<usize>,
    /// Whether the rows are a changelog (`+I -U +U -D`) rather than inserts only.
    pub updating: bool,
    /// The positions of the `window_start` and `window_end` columns of the window the rows
    /// belong to (a window table function's, or a window aggregate's result), if they have
    /// them: a `GROUP BY` of both is a window aggregate of that window again.
    pub windows: Option<(usize, usize)>,
}

/// The operators of a plan.
#[derive(Debug, Clone)]
pub enum Node {
    /// Reads a table (its connector), with the table's watermark.
    Scan(Arc<Table>),
    /// Keeps the rows on which the predicate is `TRUE`.
    Filter(Box<Plan>, Scalar),
    /// Computes each output column from the input row.
    Project(Box<Plan>, Vec<Scalar>),
    /// An unbounded `GROUP BY`: per key (the values of the key expressions), the
    /// aggregates; the output is the keys, then the aggregates, as a changelog.
    Aggregate(Box<Plan>, Vec<Scalar>, Vec<AggCall>),
    /// `ROW_NUMBER() OVER (PARTITION BY keys ORDER BY ...)`: the input's columns and the
    /// row's rank; only the first `limit` rows of each partition (the top-N a `WHERE rank
    /// <= N` asks for), as a changelog.
    Rank(Box<Plan>, Rank),
    /// A `GROUP BY` with a group window (`TUMBLE`, `HOP` or `SESSION` of the rowtime):
    /// per key and window, the aggregates, once the watermark passes the window's end
    /// (inserts only). The output is the keys, the aggregates, then the window's start, end
    /// and rowtime (`end - 1 ms`).
    WindowAggregate(Box<Plan>, GroupWindow, Vec<Scalar>, Vec<AggCall>),
    /// An inner equi-join of two inputs: the left's columns, then the right's. Both sides'
    /// rows are kept (a regular join, as Flink's without state TTL); a row meets every
    /// row of the other side with equal keys on which the residual condition is `TRUE`.
    Join(Box<Plan>, Box<Plan>, JoinSpec),
    /// A window table function (`TABLE(TUMBLE(TABLE t, DESCRIPTOR(rowtime), size))`): the
    /// input's columns and `window_start`, `window_end`, `window_time`, a row per window
    /// the input row is in. An aggregate grouped by its window runs as a window aggregate
    /// of the input.
    WindowTvf(Box<Plan>, GroupWindow),
    /// `UNION ALL`: every row of every input, each input's columns of the union's types
    /// (a projection below casts a side whose types differ). The union is a changelog when
    /// an input is.
    Union(Vec<Plan>),
}

/// A join's keys and residual condition.
#[derive(Debug, Clone, Default)]
pub struct JoinSpec {
    /// The left keys, over the left's rows.
    pub left_keys: Vec<Scalar>,
    /// The right keys, over the right's rows.
    pub right_keys: Vec<Scalar>,
    /// The rest of the condition, over the joined row.
    pub residual: Option<Scalar>,
    /// The right side is a table joined `FOR SYSTEM_TIME AS OF` the left's processing time
    /// (Flink's lookup join): it is read whole when the job starts and each left row looks
    /// its matches up in it; no left row is kept.
    pub lookup: bool,
}

/// A group window, on the input's rowtime.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupWindow {
    /// `TUMBLE(rowtime, size)`.
    Tumble {
        /// Size in milliseconds.
        size: i64,
    },
    /// `HOP(rowtime, slide, size)`.
    Hop {
        /// Slide in milliseconds.
        slide: i64,
        /// Size in milliseconds.
        size: i64,
    },
    /// `CUMULATE(TABLE t, DESCRIPTOR(rowtime), step, size)`: windows from each multiple of
    /// `size`, growing by `step` up to `size`.
    Cumulate {
        /// Step in milliseconds.
        step: i64,
        /// The largest size in milliseconds, a multiple of the step.
        size: i64,
    },
    /// `SESSION(rowtime, gap)`.
    Session {
        /// Gap in milliseconds.
        gap: i64,
    },
    /// The window of the rows' own `window_start` and `window_end` columns (positions): a
    /// window aggregate over a window aggregate's results, grouped by their window again.
    Columns {
        /// The `window_start` column.
        start: usize,
        /// The `window_end` column.
        end: usize,
    },
}

/// A top-N's parameters.
#[derive(Debug, Clone)]
pub struct Rank {
    /// The partition keys.
    pub partition: Vec<Scalar>,
    /// The order within a partition.
    pub order: Vec<SortKey>,
    /// N, once a filter on the rank set it.
    pub limit: Option<usize>,
    /// Whether the order is the rowtime, descending (a deduplication keeping the last row).
    pub keep_last: bool,
}

impl Plan {
    /// The plans this node reads: none for a scan, two for a join (left, right).
    pub fn inputs(&self) -> Vec<&Plan> {
        match &self.node {
            Node::Scan(_) => vec![],
            Node::Filter(i, _)
            | Node::Project(i, _)
            | Node::Aggregate(i, ..)
            | Node::Rank(i, _)
            | Node::WindowAggregate(i, ..)
            | Node::WindowTvf(i, _) => vec![i],
            Node::Join(l, r, _) => vec![l, r],
            Node::Union(inputs) => inputs.iter().collect(),
        }
    }

    /// The output column types.
    pub fn types(&self) -> Vec<SqlType> {
        self.scope.columns.iter().map(|c| c.ty.clone()).collect()
    }

    /// The plan as indented text, one node a line (`EXPLAIN`).
    pub fn explain(&self) -> String {
        let mut out = String::new();
        self.explain_into(0, &mut out);
        out
    }

    fn explain_into(&self, depth: usize, out: &mut String) {
        use std::fmt::Write;
        let cols: Vec<String> = self
            .scope
            .columns
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let time = if Some(i) == self.rowtime {
                    " *ROWTIME*"
                } else {
                    ""
                };
                format!("{} {}{time}", c.name, c.ty)
            })
            .collect();
        let _ = write!(out, "{:indent$}", "", indent = depth * 2);
        match &self.node {
            Node::Scan(t) => {
                let _ = writeln!(
                    out,
                    "Scan {} connector={} [{}]",
                    t.name,
                    t.option("connector").unwrap_or("?"),
                    cols.join(", ")
                );
            }
            Node::Filter(input, p) => {
                let _ = writeln!(out, "Filter {p:?}");
                input.explain_into(depth + 1, out);
            }
            Node::Project(input, _) => {
                let _ = writeln!(out, "Project [{}]", cols.join(", "));
                input.explain_into(depth + 1, out);
            }
            Node::Rank(input, rank) => {
                let _ = writeln!(
                    out,
                    "Rank partition_keys={} order_keys={} limit={:?} changelog [{}]",
                    rank.partition.len(),
                    rank.order.len(),
                    rank.limit,
                    cols.join(", ")
                );
                input.explain_into(depth + 1, out);
            }
            Node::WindowTvf(input, window) => {
                let _ = writeln!(out, "WindowTableFunction {window:?} [{}]", cols.join(", "));
                input.explain_into(depth + 1, out);
            }
            Node::Join(left, right, spec) => {
                // Rows a time bound proves can meet nothing more: dropped once the watermark
                // reaches their column plus a constant (see `join`).
                let mut expiry = String::new();
                if !spec.lookup {
                    let (l, r) = crate::join::expiries(left, right, spec.residual.as_ref());
                    let width = left.scope.columns.len();
                    for (side, e, base) in [("left", l, 0), ("right", r, width)] {
                        if let Some(e) = e {
                            let name = &self.scope.columns[base + e.col].name;
                            let _ = write!(expiry, " {side}-expires=`{name}`{:+}ms", e.after);
                        }
                    }
                }
                let _ = writeln!(
                    out,
                    "Join keys={} residual={}{expiry} [{}]",
                    spec.left_keys.len(),
                    spec.residual.is_some(),
                    cols.join(", ")
                );
                left.explain_into(depth + 1, out);
                right.explain_into(depth + 1, out);
            }
            Node::Union(inputs) => {
                let changelog = if self.updating { " changelog" } else { "" };
                let _ = writeln!(out, "Union{changelog} [{}]", cols.join(", "));
                for input in inputs {
                    input.explain_into(depth + 1, out);
                }
            }
            Node::WindowAggregate(input, window, keys, calls) => {
                let funcs: Vec<String> = calls.iter().map(|c| format!("{:?}", c.func)).collect();
                let _ = writeln!(
                    out,
                    "WindowAggregate {window:?} keys={} aggs=[{}] [{}]",
                    keys.len(),
                    funcs.join(", "),
                    cols.join(", ")
                );
                input.explain_into(depth + 1, out);
            }
            Node::Aggregate(input, keys, calls) => {
                let funcs: Vec<String> = calls.iter().map(|c| format!("{:?}", c.func)).collect();
                let _ = writeln!(
                    out,
                    "GroupAggregate keys={} aggs=[{}] changelog [{}]",
                    keys.len(),
                    funcs.join(", "),
                    cols.join(", ")
                );
                input.explain_into(depth + 1, out);
            }
        }
    }
}

/// Plans `query` over `catalog`.
pub fn plan_query(query: &Query, catalog: &Catalog) -> Result<Plan, SqlError> {
    let plan = Planner {
        catalog,
        depth: 0,
        ctes: Vec::new(),
    }
    .query(query)?;
    let mut uses = HashMap::new();
    count_subplans(&plan, &mut uses);
    Ok(narrow_joins(plan, &uses))
}

/// How many times each subplan (by its `Debug` text, as the builder shares them) occurs in
/// `plan`.
fn count_subplans(plan: &Plan, uses: &mut HashMap<String, usize>) {
    *uses.entry(format!("{:?}", plan.node)).or_default() += 1;
    for input in plan.inputs() {
        count_subplans(input, uses);
    }
}

/// `plan` with [`narrow_join`] applied to each projection over a join, the sides that
/// occur more than once in the plan (built once and shared) left whole.
fn narrow_joins(plan: Plan, uses: &HashMap<String, usize>) -> Plan {
    let Plan {
        node,
        scope,
        rowtime,
        updating,
        windows,
    } = plan;
    let go = |p: Box<Plan>| Box::new(narrow_joins(*p, uses));
    let node = match node {
        Node::Project(input, mut exprs) if matches!(input.node, Node::Join(..)) => {
            let join = narrow_joins(narrow_join(*input, &mut exprs, uses), uses);
            // Every column of the cut join, in order: no projection left to run.
            let width = join.scope.columns.len();
            if exprs.len() == width
                && exprs
                    .iter()
                    .enumerate()
                    .all(|(i, e)| matches!(e, Scalar::Col(j) if *j == i))
            {
                join.node
            } else {
                Node::Project(Box::new(join), exprs)
            }
        }
        Node::Scan(t) => Node::Scan(t),
        Node::Filter(i, p) => Node::Filter(go(i), p),
        Node::Project(i, e) => Node::Project(go(i), e),
        Node::Aggregate(i, k, c) => Node::Aggregate(go(i), k, c),
        Node::Rank(i, r) => Node::Rank(go(i), r),
        Node::WindowAggregate(i, w, k, c) => Node::WindowAggregate(go(i), w, k, c),
        Node::WindowTvf(i, w) => Node::WindowTvf(go(i), w),
        Node::Union(inputs) => {
            Node::Union(inputs.into_iter().map(|p| narrow_joins(p, uses)).collect())
        }
        Node::Join(l, r, spec) => Node::Join(go(l), go(r), spec),
    };
    Plan {
        node,
        scope,
        rowtime,
        updating,
        windows,
    }
}

struct Planner<'a> {
    catalog: &'a Catalog,
    /// How deep views are nested (a view that names itself is an error, not a stack overflow).
    depth: usize,
    /// The common table expressions (`WITH name AS (...)`) this query can name, innermost
    /// last: a later one hides an earlier one, or a table or view, of its name.
    ctes: Vec<(String, Rc<Query>)>,
}

impl Planner<'_> {
    fn query(&self, query: &Query) -> Result<Plan, SqlError> {
        if let Some(with) = &query.with {
            // Each common table expression is planned where it is named, as a view is, and
            // sees the ones before it.
            if with.recursive {
                return Err(SqlError::plan("WITH RECURSIVE is not supported"));
            }
            let mut inner = Planner {
                catalog: self.catalog,
                depth: self.depth,
                ctes: self.ctes.clone(),
            };
            for cte in &with.cte_tables {
                if !cte.alias.columns.is_empty() {
                    return Err(SqlError::plan(format!(
                        "`WITH {}` with column names is not supported yet: name the columns in its SELECT",
                        cte.alias
                    )));
                }
                inner
                    .ctes
                    .push((cte.alias.name.value.clone(), Rc::new((*cte.query).clone())));
            }
            let mut body = query.clone();
            body.with = None;
            return inner.query(&body);
        }
        if query.order_by.is_some() {
            return Err(SqlError::plan(
                "ORDER BY is not supported on streams (Flink sorts streams only by their rowtime)",
            ));
        }
        if query.limit_clause.is_some() || query.fetch.is_some() {
            return Err(SqlError::plan("LIMIT is not supported on streams"));
        }
        self.set_expr(&query.body)
    }

    fn set_expr(&self, body: &SetExpr) -> Result<Plan, SqlError> {
        match body {
            SetExpr::Select(select) => self.select(select),
            SetExpr::Query(q) => self.query(q),
            SetExpr::SetOperation {
                left,
                op: SetOperator::Union,
                set_quantifier: SetQuantifier::All,
                right,
            } => union(self.set_expr(left)?, self.set_expr(right)?),
            // As Flink plans it: the rows of both, then a GROUP BY of every column (a
            // changelog, each distinct row once).
            SetExpr::SetOperation {
                left,
                op: SetOperator::Union,
                set_quantifier: SetQuantifier::None | SetQuantifier::Distinct,
                right,
            } => Ok(distinct(union(
                self.set_expr(left)?,
                self.set_expr(right)?,
            )?)),
            SetExpr::SetOperation {
                op: SetOperator::Union,
                set_quantifier,
                ..
            } => Err(SqlError::plan(format!(
                "UNION {set_quantifier} is not supported (UNION and UNION ALL are)"
            ))),
            other => Err(SqlError::plan(format!("`{other}` is not supported yet"))),
        }
    }

    fn select(&self, select: &Select) -> Result<Plan, SqlError> {
        if select.from.is_empty() {
            return Err(SqlError::plan("a SELECT without FROM is not supported"));
        }
        // FROM a, b JOIN c ON ...: joins, left to right; the comma's cross joins take their
        // keys from the WHERE.
        let mut from: Option<Plan> = None;
        for item in &select.from {
            let mut plan = self.relation(&item.relation)?;
            for j in &item.joins {
                use sqlparser::ast::{JoinConstraint, JoinOperator};
                let right = self.relation(&j.relation)?;
                let on = match &j.join_operator {
                    JoinOperator::Join(JoinConstraint::On(e))
                    | JoinOperator::Inner(JoinConstraint::On(e)) => e,
                    other => {
                        return Err(SqlError::plan(format!(
                            "only inner joins with ON are supported yet, not `{other:?}`"
                        )))
                    }
                };
                plan = join(plan, right);
                if let Some(table) = lookup_of(&j.relation) {
                    lookup_join(&mut plan, &table)?;
                }
                let bound = expr::bind(on, &plan.scope, self.catalog)?;
                let (joined, rest) = join_condition(plan, bound.expr);
                plan = match rest {
                    Some(rest) => filter(joined, rest),
                    None => joined,
                };
            }
            from = Some(match from {
                None => plan,
                Some(left) => join(left, plan),
            });
        }
        let mut input = from.expect("FROM is not empty");
        if let Some(predicate) = &select.selection {
            let bound = expr::bind(predicate, &input.scope, self.catalog)?;
            limit_rank(&mut input, &bound.expr);
            if !matches!(bound.ty, SqlType::Boolean | SqlType::Null) {
                return Err(SqlError::plan(format!(
                    "WHERE needs a BOOLEAN condition, not {}: `{predicate}`",
                    bound.ty
                )));
            }
            let (joined, rest) = join_condition(input, bound.expr);
            input = match rest {
                Some(rest) => filter(joined, rest),
                None => joined,
            };
        }
        let mut keys = match &select.group_by {
            GroupByExpr::Expressions(e, _) => e.clone(),
            GroupByExpr::All(_) => return Err(SqlError::plan("GROUP BY ALL is not supported")),
        };
        let mut calls = Vec::new();
        for item in &select.projection {
            if let SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } = item {
                collect_aggregates(e, &mut calls);
            }
        }
        if let Some(h) = &select.having {
            collect_aggregates(h, &mut calls);
        }
        match &select.distinct {
            None | Some(Distinct::All) => {}
            // As Flink plans it: a GROUP BY of the selected expressions, without aggregates.
            Some(Distinct::Distinct) => {
                if !keys.is_empty() || !calls.is_empty() || select.having.is_some() {
                    return Err(SqlError::plan(
                        "SELECT DISTINCT with GROUP BY, aggregates or HAVING is not supported yet",
                    ));
                }
                for item in &select.projection {
                    match item {
                        SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => {
                            keys.push(e.clone())
                        }
                        other => {
                            return Err(SqlError::plan(format!(
                                "SELECT DISTINCT {other} is not supported yet: name the columns"
                            )))
                        }
                    }
                }
            }
            Some(other) => return Err(SqlError::plan(format!("`{other}` is not supported"))),
        }
        for item in &select.projection {
            if let SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } = item {
                if let Expr::Function(f) = e {
                    if f.name.to_string().eq_ignore_ascii_case("ROW_NUMBER") {
                        input = self.rank(input, f)?;
                    }
                }
            }
        }
        if !keys.is_empty() || !calls.is_empty() || select.having.is_some() {
            input = self.aggregate(input, &keys, &calls)?;
            if let Some(h) = &select.having {
                let bound = expr::bind(h, &input.scope, self.catalog)?;
                input = filter(input, bound.expr);
            }
        }
        self.project(input, &select.projection)
    }

    /// The select list over `input`.
    fn project(&self, input: Plan, items: &[SelectItem]) -> Result<Plan, SqlError> {
        let mut exprs: Vec<(String, Typed)> = Vec::new();
        for item in items {
            match item {
                SelectItem::UnnamedExpr(e) => {
                    let bound = expr::bind(e, &input.scope, self.catalog)?;
                    let name = column_name(e).unwrap_or_else(|| format!("EXPR${}", exprs.len()));
                    exprs.push((name, bound));
                }
                SelectItem::ExprWithAlias { expr: e, alias } => {
                    let bound = expr::bind(e, &input.scope, self.catalog)?;
                    exprs.push((alias.value.clone(), bound));
                }
                SelectItem::Wildcard(_) => {
                    // Not the columns an operator adds for the select list (a rank).
                    let hidden: Vec<usize> = input.scope.computed.values().copied().collect();
                    for (i, c) in input.scope.columns.iter().enumerate() {
                        if !hidden.contains(&i) || hidden.len() == input.scope.columns.len() {
                            exprs.push((c.name.clone(), whole(i, &c.ty)));
                        }
                    }
                }
                SelectItem::QualifiedWildcard(
                    SelectItemQualifiedWildcardKind::ObjectName(name),
                    _,
                ) => {
                    let q = name.to_string();
                    let q = q.trim_matches('`');
                    let before = exprs.len();
                    for (i, c) in input.scope.columns.iter().enumerate() {
                        if c.qualifier.as_deref() == Some(q) {
                            exprs.push((c.name.clone(), whole(i, &c.ty)));
                        }
                    }
                    if exprs.len() == before {
                        return Err(SqlError::plan(format!("`{q}.*`: no table `{q}` in FROM")));
                    }
                }
                other => return Err(SqlError::plan(format!("`{other}` is not supported"))),
            }
        }
        // A projection of a projection is one projection, when what it reads of the inner
        // one is columns, fields or constants (a view's columns, renamed).
        let input = match input.node {
            Node::Project(inner, inner_exprs)
                if exprs.iter().all(|(_, e)| {
                    let mut cols = Vec::new();
                    columns_of(&e.expr, &mut cols);
                    cols.iter().all(|&c| is_cheap(&inner_exprs[c]))
                }) =>
            {
                for (_, e) in &mut exprs {
                    e.expr = substitute(&e.expr, &inner_exprs);
                }
                *inner
            }
            node => Plan { node, ..input },
        };
        // The rowtime goes through a projection that keeps its column as it is.
        let rowtime = input.rowtime.and_then(|t| {
            exprs
                .iter()
                .position(|(_, e)| matches!(e.expr, Scalar::Col(i) if i == t))
        });
        // A projection that keeps every column in order is no operator.
        let identity = exprs.len() == input.scope.columns.len()
            && exprs.iter().enumerate().all(|(i, (name, e))| {
                matches!(e.expr, Scalar::Col(j) if j == i) && *name == input.scope.columns[i].name
            });
        let scope = Scope::new(
            exprs
                .iter()
                .map(|(name, e)| Column {
                    qualifier: None,
                    name: name.clone(),
                    ty: e.ty.clone(),
                })
                .collect(),
        );
        if identity {
            return Ok(Plan {
                scope,
                rowtime,
                ..input
            });
        }
        let updating = input.updating;
        // The window's columns go through when both are kept as they are.
        let position = |col: usize| {
            exprs
                .iter()
                .position(|(_, e)| matches!(e.expr, Scalar::Col(i) if i == col))
        };
        let windows = input
            .windows
            .and_then(|(s, e)| Some((position(s)?, position(e)?)));
        Ok(Plan {
            node: Node::Project(
                Box::new(input),
                exprs.into_iter().map(|(_, e)| e.expr).collect(),
            ),
            scope,
            rowtime,
            updating,
            windows,
        })
    }

    /// A `GROUP BY` of `keys` computing `calls` (the aggregate calls of the select list and
    /// `HAVING`) over `input`.
    fn aggregate(
        &self,
        input: Plan,
        keys: &[Expr],
        calls: &[sqlparser::ast::Function],
    ) -> Result<Plan, SqlError> {
        let mut columns = Vec::new();
        let mut computed = std::collections::HashMap::new();
        let mut key_exprs = Vec::with_capacity(keys.len());
        let mut window = None;
        // GROUP BY window_start, window_end (and other keys) of a window table function, or
        // of an earlier window aggregate's result: a window aggregate.
        if let Some((ws, we)) = input.windows {
            let bound: Vec<Option<usize>> = keys
                .iter()
                .map(|k| match expr::bind(k, &input.scope, self.catalog) {
                    Ok(Typed {
                        expr: Scalar::Col(c),
                        ..
                    }) => Some(c),
                    _ => None,
                })
                .collect();
            if bound.contains(&Some(ws)) && bound.contains(&Some(we)) {
                return self.window_aggregate(input, keys, &bound, calls, (ws, we));
            }
        }
        for (i, k) in keys.iter().enumerate() {
            if let Some(w) = self.group_window(k, &input)? {
                if window.is_some() {
                    return Err(SqlError::plan("a GROUP BY may have one group window"));
                }
                window = Some((w, k));
                continue;
            }
            let bound = expr::bind(k, &input.scope, self.catalog)?;
            let (qualifier, name) = match &bound.expr {
                Scalar::Col(c) => (
                    input.scope.columns[*c].qualifier.clone(),
                    input.scope.columns[*c].name.clone(),
                ),
                _ => (None, format!("EXPR${i}")),
            };
            computed.insert(k.to_string(), columns.len());
            columns.push(Column {
                qualifier,
                name,
                ty: bound.ty.clone(),
            });
            key_exprs.push(bound.expr);
        }
        let mut agg_calls: Vec<AggCall> = Vec::new();
        for f in calls {
            let text = Expr::Function(f.clone()).to_string();
            if computed.contains_key(&text) {
                continue;
            }
            let call = self.aggregate_call(f, &input.scope)?;
            computed.insert(text, columns.len());
            columns.push(Column {
                qualifier: None,
                name: format!("EXPR${}", columns.len()),
                ty: call.ty.clone(),
            });
            agg_calls.push(call);
        }
        if let Some((w, call)) = window {
            // The window's properties, by the names of the legacy group window functions.
            let Expr::Function(f) = call else {
                unreachable!("a group window is a call")
            };
            let name = f.name.to_string().to_ascii_uppercase();
            let args = f.args.to_string();
            let start = columns.len();
            for (i, prop) in ["START", "END", "ROWTIME"].iter().enumerate() {
                computed.insert(format!("{name}_{prop}{args}"), start + i);
                columns.push(Column {
                    qualifier: None,
                    name: format!("EXPR${}", start + i),
                    ty: SqlType::Timestamp,
                });
            }
            let mut scope = Scope::new(columns);
            scope.computed = computed;
            return Ok(Plan {
                node: Node::WindowAggregate(Box::new(input), w, key_exprs, agg_calls),
                scope,
                rowtime: Some(start + 2),
                updating: false,
                windows: Some((start, start + 1)),
            });
        }
        let mut scope = Scope::new(columns);
        scope.computed = computed;
        Ok(Plan {
            node: Node::Aggregate(Box::new(input), key_exprs, agg_calls),
            scope,
            rowtime: None,
            updating: true,
            windows: None,
        })
    }

    /// A `GROUP BY` of a window's `window_start` and `window_end` (positions `ws`, `we` in
    /// `input`) and other keys: over a window table function, the window aggregate of its
    /// input; over a window aggregate's result, one of the rows' own windows.
    fn window_aggregate(
        &self,
        input: Plan,
        keys: &[Expr],
        bound: &[Option<usize>],
        calls: &[sqlparser::ast::Function],
        (ws, we): (usize, usize),
    ) -> Result<Plan, SqlError> {
        let scope_in = input.scope.clone();
        // `window_time` (the rowtime after the window's start and end) may be grouped by
        // too, as Flink allows: it is a property of the window, as its start and end are.
        let wt = (input.rowtime == Some(ws + 2)).then_some(ws + 2);
        let (source, window, own) = match input.node {
            Node::WindowTvf(inner, window) => (*inner, window, false),
            node => {
                let plan = Plan { node, ..input };
                (plan, GroupWindow::Columns { start: ws, end: we }, true)
            }
        };
        // Over a table function, keys and arguments are bound over its rows (the input's
        // rows and the window's three columns after them) and run on the input's rows:
        // they may not read the window's columns.
        let n = source.scope.columns.len();
        let reads_window = |e: &Scalar| {
            let mut cols = Vec::new();
            columns_of(e, &mut cols);
            !own && cols.iter().any(|&c| c >= n)
        };
        let mut columns = Vec::new();
        let mut computed = std::collections::HashMap::new();
        let mut key_exprs = Vec::new();
        let mut props = Vec::new();
        for (k, b) in keys.iter().zip(bound) {
            if let Some(at) = [Some(ws), Some(we), wt]
                .iter()
                .position(|p| p.is_some() && p == b)
            {
                props.push((k.to_string(), at));
                continue;
            }
            let e = expr::bind(k, &scope_in, self.catalog)?;
            if reads_window(&e.expr) {
                return Err(SqlError::plan(format!(
                    "`{k}`: a window aggregate's key may not read window_time"
                )));
            }
            let (qualifier, name) = match &e.expr {
                Scalar::Col(c) => (
                    scope_in.columns[*c].qualifier.clone(),
                    scope_in.columns[*c].name.clone(),
                ),
                _ => (None, format!("EXPR${}", columns.len())),
            };
            computed.insert(k.to_string(), columns.len());
            columns.push(Column {
                qualifier,
                name,
                ty: e.ty.clone(),
            });
            key_exprs.push(e.expr);
        }
        let mut agg_calls = Vec::new();
        for f in calls {
            let text = Expr::Function(f.clone()).to_string();
            if computed.contains_key(&text) {
                continue;
            }
            let call = self.aggregate_call(f, &scope_in)?;
            if call.arg.as_ref().is_some_and(reads_window)
                || call.filter.as_ref().is_some_and(reads_window)
            {
                return Err(SqlError::plan(format!(
                    "`{text}`: an aggregate of a window may not read the window's columns"
                )));
            }
            computed.insert(text, columns.len());
            columns.push(Column {
                qualifier: None,
                name: format!("EXPR${}", columns.len()),
                ty: call.ty.clone(),
            });
            agg_calls.push(call);
        }
        let start = columns.len();
        for (i, name) in ["window_start", "window_end", "window_time"]
            .iter()
            .enumerate()
        {
            columns.push(Column {
                qualifier: None,
                name: name.to_string(),
                ty: SqlType::Timestamp,
            });
            computed.insert(name.to_string(), start + i);
        }
        for (text, at) in props {
            computed.insert(text, start + at);
        }
        let mut scope = Scope::new(columns);
        scope.computed = computed;
        Ok(Plan {
            node: Node::WindowAggregate(Box::new(source), window, key_exprs, agg_calls),
            scope,
            rowtime: Some(start + 2),
            updating: false,
            windows: Some((start, start + 1)),
        })
    }

    /// A window table function in FROM: `TUMBLE(TABLE t, DESCRIPTOR(c), size)`,
    /// `HOP(TABLE t, DESCRIPTOR(c), slide, size)`, `SESSION(TABLE t PARTITION BY k,
    /// DESCRIPTOR(c), gap)` (named arguments, `DATA => ...`, too).
    fn window_tvf(&self, call: &Expr) -> Result<Plan, SqlError> {
        let Expr::Function(f) = call else {
            return Err(SqlError::plan(format!("`{call}` in FROM is not supported")));
        };
        let name = f.name.to_string().to_ascii_uppercase();
        let FunctionArguments::List(list) = &f.args else {
            return Err(SqlError::plan(format!(
                "`{call}`: a window function takes arguments"
            )));
        };
        let args: Vec<&Expr> = list
            .args
            .iter()
            .filter_map(|a| match a {
                FunctionArg::Unnamed(FunctionArgExpr::Expr(e))
                | FunctionArg::Named {
                    arg: FunctionArgExpr::Expr(e),
                    ..
                } => Some(e),
                _ => None,
            })
            .collect();
        let table = match args.first() {
            Some(Expr::Function(t)) if t.name.to_string() == crate::parser::TABLE_ARGUMENT => t,
            _ => {
                return Err(SqlError::plan(format!(
                    "`{call}`: the first argument must be TABLE name"
                )))
            }
        };
        let FunctionArguments::List(targs) = &table.args else {
            return Err(SqlError::plan(format!("`{call}`: TABLE needs a name")));
        };
        let table_name = targs
            .args
            .first()
            .map(|a| a.to_string())
            .unwrap_or_default();
        let table_name = table_name.trim_matches('`').to_string();
        let partition = targs.args.len() > 1;
        let input = self.named_relation(&table_name, &table_name)?;
        let time = match args.get(1) {
            Some(Expr::Function(d)) if d.name.to_string().eq_ignore_ascii_case("DESCRIPTOR") => {
                match &d.args {
                    FunctionArguments::List(l) if l.args.len() == 1 => l.args[0].to_string(),
                    _ => String::new(),
                }
            }
            _ => String::new(),
        };
        let time = time.trim_matches('`').to_string();
        let Some(time_col) = input.scope.resolve(None, &time)? else {
            return Err(SqlError::plan(format!(
                "`{call}`: the second argument must be DESCRIPTOR(column) naming a column of {table_name}"
            )));
        };
        if input.rowtime != Some(time_col) {
            return Err(SqlError::plan(format!(
                "`{call}`: `{time}` is not the rowtime of {table_name} (its WATERMARK FOR column); processing-time windows are not supported yet"
            )));
        }
        if !["TUMBLE", "HOP", "CUMULATE", "SESSION"].contains(&name.as_str()) {
            return Err(SqlError::plan(format!(
                "the table function `{name}` is not supported (window functions: TUMBLE, HOP, CUMULATE, SESSION)"
            )));
        }
        let window = self.window_sizes(
            call,
            &name,
            &args[2..],
            &input.scope,
            "TUMBLE(TABLE t, DESCRIPTOR(c), size), HOP(..., slide, size), CUMULATE(..., step, size) or SESSION(..., gap)",
        )?;
        if partition && !matches!(window, GroupWindow::Session { .. }) {
            return Err(SqlError::plan(format!(
                "`{call}`: only SESSION takes PARTITION BY"
            )));
        }
        let mut scope = input.scope.clone();
        scope.computed.clear();
        let n = scope.columns.len();
        for name in ["window_start", "window_end", "window_time"] {
            scope.columns.push(Column {
                qualifier: None,
                name: name.to_string(),
                ty: SqlType::Timestamp,
            });
        }
        let updating = input.updating;
        Ok(Plan {
            node: Node::WindowTvf(Box::new(input), window),
            scope,
            rowtime: Some(n + 2),
            updating,
            windows: Some((n, n + 1)),
        })
    }

    /// The group window `k` is, if it is one: `TUMBLE(t, size)`, `HOP(t, slide, size)` or
    /// `SESSION(t, gap)`, with `t` the input's rowtime.
    fn group_window(&self, k: &Expr, input: &Plan) -> Result<Option<GroupWindow>, SqlError> {
        let Expr::Function(f) = k else {
            return Ok(None);
        };
        let name = f.name.to_string().to_ascii_uppercase();
        if !["TUMBLE", "HOP", "SESSION"].contains(&name.as_str()) {
            return Ok(None);
        }
        let FunctionArguments::List(list) = &f.args else {
            return Err(SqlError::plan(format!(
                "`{k}`: a group window takes arguments"
            )));
        };
        let args: Vec<&Expr> = list
            .args
            .iter()
            .filter_map(|a| match a {
                FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) => Some(e),
                _ => None,
            })
            .collect();
        let Some(time) = args.first() else {
            return Err(SqlError::plan(format!(
                "`{k}`: a group window needs its time column"
            )));
        };
        let time = expr::bind(time, &input.scope, self.catalog)?;
        if !matches!((&time.expr, input.rowtime), (Scalar::Col(c), Some(t)) if *c == t) {
            return Err(SqlError::plan(format!(
                "`{k}`: a group window needs the input's rowtime column (the one of its WATERMARK FOR); processing-time windows are not supported yet"
            )));
        }
        self.window_sizes(
            k,
            &name,
            &args[1..],
            &input.scope,
            "TUMBLE(t, size), HOP(t, slide, size) or SESSION(t, gap)",
        )
        .map(Some)
    }

    /// The window `name` (`TUMBLE`, `HOP` or `SESSION`) of `call` with the sizes `sizes`
    /// (constant INTERVALs over `scope`); `usage` says the call's right form in errors.
    fn window_sizes(
        &self,
        call: &Expr,
        name: &str,
        sizes: &[&Expr],
        scope: &Scope,
        usage: &str,
    ) -> Result<GroupWindow, SqlError> {
        let mut ms = Vec::new();
        for a in sizes {
            let bound = expr::bind(a, scope, self.catalog)?;
            match (bound.ty, bound.expr) {
                (SqlType::Interval, Scalar::Lit(Datum::Int(v))) if v > 0 => ms.push(v),
                _ => {
                    return Err(SqlError::plan(format!(
                        "`{call}`: `{a}` must be a positive constant INTERVAL"
                    )))
                }
            }
        }
        Ok(match (name, ms.as_slice()) {
            ("TUMBLE", [size]) => GroupWindow::Tumble { size: *size },
            ("HOP", [slide, size]) => GroupWindow::Hop {
                slide: *slide,
                size: *size,
            },
            ("SESSION", [gap]) => GroupWindow::Session { gap: *gap },
            ("CUMULATE", [step, size]) if size % step == 0 => GroupWindow::Cumulate {
                step: *step,
                size: *size,
            },
            ("CUMULATE", [_, _]) => {
                return Err(SqlError::plan(format!(
                    "`{call}`: CUMULATE's size must be a whole multiple of its step"
                )))
            }
            _ => return Err(SqlError::plan(format!("`{call}`: expected {usage}"))),
        })
    }

    /// A `ROW_NUMBER() OVER (...)` over `input`: the input's columns and the rank.
    fn rank(&self, input: Plan, f: &sqlparser::ast::Function) -> Result<Plan, SqlError> {
        let text = Expr::Function(f.clone()).to_string();
        let Some(sqlparser::ast::WindowType::WindowSpec(spec)) = &f.over else {
            return Err(SqlError::plan(format!(
                "`{text}` needs OVER (PARTITION BY ... ORDER BY ...)"
            )));
        };
        if input.updating {
            return Err(SqlError::plan(format!(
                "`{text}` over an updating (changelog) input is not supported yet"
            )));
        }
        if spec.window_frame.is_some() {
            return Err(SqlError::plan(format!(
                "`{text}`: ROW_NUMBER takes no window frame"
            )));
        }
        let mut partition = Vec::new();
        for p in &spec.partition_by {
            partition.push(expr::bind(p, &input.scope, self.catalog)?.expr);
        }
        if spec.order_by.is_empty() {
            return Err(SqlError::plan(format!("`{text}` needs an ORDER BY")));
        }
        let mut order = Vec::new();
        for o in &spec.order_by {
            let bound = expr::bind(&o.expr, &input.scope, self.catalog)?;
            let descending = matches!(o.options.sort, Some(sqlparser::ast::OrderBySort::Desc));
            let kind = match &bound.ty {
                SqlType::Double => crate::expr::Numeric::Double { left: 0, right: 0 },
                t if t.is_numeric() => crate::expr::Numeric::Decimal {
                    left: t.scale(),
                    right: t.scale(),
                    out: t.scale(),
                },
                SqlType::Timestamp => crate::expr::Numeric::Int,
                _ => crate::expr::Numeric::Other,
            };
            order.push((
                bound.expr,
                descending,
                o.options.nulls_first.unwrap_or(!descending),
                kind,
            ));
        }
        let keep_last = order.len() == 1
            && order[0].1
            && matches!((&order[0].0, input.rowtime), (Scalar::Col(c), Some(t)) if *c == t);
        let mut scope = input.scope.clone();
        scope.computed.insert(text, scope.columns.len());
        scope.columns.push(Column {
            qualifier: None,
            name: "EXPR$rank".into(),
            ty: SqlType::BigInt,
        });
        let rowtime = input.rowtime;
        Ok(Plan {
            node: Node::Rank(
                Box::new(input),
                Rank {
                    partition,
                    order: order
                        .into_iter()
                        .map(|(expr, descending, nulls_first, kind)| SortKey {
                            expr,
                            descending,
                            nulls_first,
                            kind,
                        })
                        .collect(),
                    limit: None,
                    keep_last,
                },
            ),
            scope,
            rowtime,
            updating: true,
            windows: None,
        })
    }

    fn aggregate_call(
        &self,
        f: &sqlparser::ast::Function,
        input: &Scope,
    ) -> Result<AggCall, SqlError> {
        let text = Expr::Function(f.clone()).to_string();
        let FunctionArguments::List(list) = &f.args else {
            return Err(SqlError::plan(format!(
                "`{text}`: an aggregate needs an argument"
            )));
        };
        let distinct = matches!(list.duplicate_treatment, Some(DuplicateTreatment::Distinct));
        let name = f.name.to_string();
        let func = AggFunc::lookup(&name, distinct)
            .ok_or_else(|| SqlError::plan(format!("`{text}` is not supported")))?;
        if f.over.is_some() {
            return Err(SqlError::plan(format!(
                "`{text}`: OVER windows are not supported yet"
            )));
        }
        let (func, arg) = match list.args.as_slice() {
            [FunctionArg::Unnamed(FunctionArgExpr::Wildcard)] if func == AggFunc::Count => {
                (AggFunc::CountStar, None)
            }
            [FunctionArg::Unnamed(FunctionArgExpr::Expr(e))] => {
                (func, Some(expr::bind(e, input, self.catalog)?))
            }
            _ => {
                return Err(SqlError::plan(format!(
                    "`{text}`: an aggregate takes one argument"
                )))
            }
        };
        let arg_type = arg.as_ref().map_or(SqlType::BigInt, |a| a.ty.clone());
        let ty = func
            .result_type(&arg_type)
            .map_err(|e| e.context(format!("`{text}`")))?;
        let filter = match &f.filter {
            Some(p) => {
                let bound = expr::bind(p, input, self.catalog)?;
                if bound.ty != SqlType::Boolean {
                    return Err(SqlError::plan(format!(
                        "`{text}`: FILTER needs a BOOLEAN condition, not {}",
                        bound.ty
                    )));
                }
                Some(bound.expr)
            }
            None => None,
        };
        Ok(AggCall {
            func,
            arg: arg.map(|a| a.expr),
            arg_type,
            filter,
            ty,
        })
    }

    /// `query`, the body of `what` (a view or a common table expression), planned one level
    /// deeper with `ctes` in sight: a name defined in terms of itself is an error, not a stack
    /// overflow.
    fn nested(
        &self,
        what: String,
        ctes: Vec<(String, Rc<Query>)>,
        query: &Query,
    ) -> Result<Plan, SqlError> {
        if self.depth > 32 {
            return Err(SqlError::plan(format!(
                "{what} is defined in terms of itself"
            )));
        }
        Planner {
            catalog: self.catalog,
            depth: self.depth + 1,
            ctes,
        }
        .query(query)
        .map_err(|e| e.context(what))
    }

    /// The table or view `name`, its columns qualified by `qualifier`.
    fn named_relation(&self, name: &str, qualifier: &str) -> Result<Plan, SqlError> {
        let cte = self.ctes.iter().rposition(|(n, _)| n == name);
        let mut plan = if let Some(at) = cte {
            // It sees the common table expressions before it, not itself.
            self.nested(
                format!("the common table expression `{name}`"),
                self.ctes[..at].to_vec(),
                &self.ctes[at].1,
            )?
        } else if let Some(table) = self.catalog.table(name) {
            Plan {
                scope: table.scope(name),
                rowtime: table.watermark.as_ref().map(|(i, _)| *i),
                node: Node::Scan(Arc::clone(table)),
                updating: false,
                windows: None,
            }
        } else if let Some(view) = self.catalog.view(name) {
            // A view sees the catalog only, not the query's common table expressions.
            self.nested(format!("the view `{name}`"), Vec::new(), view)?
        } else {
            return Err(SqlError::plan(format!("no table or view named `{name}`")));
        };
        requalify(&mut plan.scope, qualifier);
        Ok(plan)
    }

    /// A FROM item.
    fn relation(&self, factor: &TableFactor) -> Result<Plan, SqlError> {
        match factor {
            TableFactor::Table { alias, .. } if lookup_of(factor).is_some() => {
                let name = lookup_of(factor).unwrap_or_default();
                let qualifier = alias
                    .as_ref()
                    .map_or(name.clone(), |a| a.name.value.clone());
                self.named_relation(&name, &qualifier)
            }
            TableFactor::Table {
                name, alias, args, ..
            } => {
                if args.is_some() {
                    return Err(SqlError::plan(format!(
                        "the table function `{factor}` is not supported yet"
                    )));
                }
                let name = name
                    .0
                    .last()
                    .and_then(|p| p.as_ident())
                    .map(|i| i.value.clone())
                    .unwrap_or_default();
                let qualifier = alias
                    .as_ref()
                    .map_or(name.clone(), |a| a.name.value.clone());
                self.named_relation(&name, &qualifier)
            }
            TableFactor::Derived {
                subquery, alias, ..
            } => {
                let mut plan = self.query(subquery)?;
                match alias {
                    Some(a) => requalify(&mut plan.scope, &a.name.value),
                    None => {
                        for c in &mut plan.scope.columns {
                            c.qualifier = None;
                        }
                    }
                }
                Ok(plan)
            }
            TableFactor::TableFunction { expr: call, alias } => {
                let mut plan = self.window_tvf(call)?;
                if let Some(a) = alias {
                    requalify(&mut plan.scope, &a.name.value);
                }
                Ok(plan)
            }
            other => Err(SqlError::plan(format!(
                "`{other}` in FROM is not supported yet"
            ))),
        }
    }
}

/// `left UNION ALL right`, as Flink types it: the same number of columns, each of the two
/// sides' common type (a side of another type is cast by a projection), named as the left's
/// are; a rowtime where both sides have it.
fn union(left: Plan, right: Plan) -> Result<Plan, SqlError> {
    let (lt, rt) = (left.types(), right.types());
    if lt.len() != rt.len() {
        return Err(SqlError::plan(format!(
            "UNION needs as many columns on each side: {} on the left, {} on the right",
            lt.len(),
            rt.len()
        )));
    }
    let mut types = Vec::with_capacity(lt.len());
    for (i, (a, b)) in lt.iter().zip(&rt).enumerate() {
        let ty = expr::common_type(a, b).ok_or_else(|| {
            SqlError::plan(format!(
                "UNION: column {} (`{}`) is {a} on the left and {b} on the right",
                i + 1,
                left.scope.columns[i].name
            ))
        })?;
        types.push(ty);
    }
    // A side of other types is cast to the union's.
    let fit = |side: Plan| -> Plan {
        if side.types() == types {
            return side;
        }
        let exprs: Vec<Scalar> = side
            .types()
            .iter()
            .zip(&types)
            .enumerate()
            .map(|(i, (from, to))| expr::coerce(whole(i, from), to).expr)
            .collect();
        let mut scope = side.scope.clone();
        for (c, ty) in scope.columns.iter_mut().zip(&types) {
            c.ty = ty.clone();
        }
        Plan {
            rowtime: side.rowtime,
            updating: side.updating,
            windows: None,
            scope,
            node: Node::Project(Box::new(side), exprs),
        }
    };
    let rowtime = left.rowtime.filter(|r| right.rowtime == Some(*r));
    let mut scope = left.scope.clone();
    for (c, ty) in scope.columns.iter_mut().zip(&types) {
        c.qualifier = None;
        c.ty = ty.clone();
    }
    let updating = left.updating || right.updating;
    // A chain of unions is one union of all its inputs.
    let mut inputs = Vec::new();
    for side in [fit(left), fit(right)] {
        match side.node {
            Node::Union(more) => inputs.extend(more),
            node => inputs.push(Plan { node, ..side }),
        }
    }
    Ok(Plan {
        node: Node::Union(inputs),
        scope,
        rowtime,
        updating,
        windows: None,
    })
}

/// Each distinct row of `input` once: a `GROUP BY` of all its columns, without aggregates.
fn distinct(input: Plan) -> Plan {
    let keys: Vec<Scalar> = (0..input.scope.columns.len()).map(Scalar::Col).collect();
    let mut scope = input.scope.clone();
    scope.computed.clear();
    Plan {
        node: Node::Aggregate(Box::new(input), keys, Vec::new()),
        scope,
        rowtime: None,
        updating: true,
        windows: None,
    }
}

/// Column `i` as an expression.
fn whole(i: usize, ty: &SqlType) -> Typed {
    Typed {
        expr: Scalar::Col(i),
        ty: ty.clone(),
    }
}

fn requalify(scope: &mut Scope, qualifier: &str) {
    for c in &mut scope.columns {
        c.qualifier = Some(qualifier.to_string());
    }
    scope.computed.clear();
}

/// The plan `input` made to fit a table's columns: the same number, each converted to the
/// column's type (`INSERT INTO` maps the query's columns to the table's by position, as
/// Flink does).
pub fn fit_to(input: Plan, table: &Table, columns: &[String]) -> Result<Plan, SqlError> {
    let targets: Vec<(String, SqlType)> = if columns.is_empty() {
        table
            .physical()
            .map(|c| (c.name.clone(), c.ty.clone()))
            .collect()
    } else {
        let mut targets = Vec::new();
        for name in columns {
            let Some(c) = table.physical().find(|c| &c.name == name) else {
                return Err(SqlError::plan(format!(
                    "INSERT INTO {}: the table has no column `{name}`",
                    table.name
                )));
            };
            targets.push((c.name.clone(), c.ty.clone()));
        }
        if targets.len() != table.physical().count() {
            return Err(SqlError::plan(format!(
                "INSERT INTO {}: a column list must name every column of the table (partial inserts are not supported)",
                table.name
            )));
        }
        targets
    };
    if targets.len() != input.scope.columns.len() {
        return Err(SqlError::plan(format!(
            "INSERT INTO {}: the query gives {} columns, the table has {}",
            table.name,
            input.scope.columns.len(),
            targets.len()
        )));
    }
    let mut exprs = Vec::with_capacity(targets.len());
    let mut changed = false;
    for (i, ((name, ty), col)) in targets.iter().zip(&input.scope.columns).enumerate() {
        let from = Typed {
            expr: Scalar::Col(i),
            ty: col.ty.clone(),
        };
        let fits = col.ty == *ty
            || col.ty == SqlType::Null
            || (col.ty.is_integer() && ty.is_integer())
            || (col.ty.is_numeric() && ty.is_numeric())
            || (*ty == SqlType::String && col.ty == SqlType::String);
        if !fits {
            return Err(SqlError::plan(format!(
                "INSERT INTO {}: the column `{name}` is {ty}, the query gives {} (`{}`)",
                table.name, col.ty, col.name
            )));
        }
        let converted = expr::coerce(from, ty);
        changed |= !matches!(converted.expr, Scalar::Col(_));
        exprs.push((name.clone(), converted));
    }
    let scope = Scope::new(
        exprs
            .iter()
            .map(|(name, e)| Column {
                qualifier: None,
                name: name.clone(),
                ty: e.ty.clone(),
            })
            .collect(),
    );
    if !changed {
        return Ok(Plan { scope, ..input });
    }
    let rowtime = input.rowtime;
    let updating = input.updating;
    Ok(Plan {
        node: Node::Project(
            Box::new(input),
            exprs.into_iter().map(|(_, e)| e.expr).collect(),
        ),
        scope,
        rowtime,
        updating,
        windows: None,
    })
}

/// Sets the limit of a top-N under `input` from a `WHERE` over it that bounds its rank
/// (`rank <= N`, `rank < N`, `rank = 1`, alone or in a conjunction).
fn limit_rank(input: &mut Plan, predicate: &Scalar) {
    use crate::expr::CmpOp;
    // The rank's column in `input`'s rows, through projections that pass it on.
    fn rank_of(plan: &mut Plan, col: usize) -> Option<&mut Rank> {
        match &mut plan.node {
            Node::Rank(_, rank) if col + 1 == plan.scope.columns.len() => Some(rank),
            Node::Project(inner, exprs) => match exprs.get(col) {
                Some(Scalar::Col(c)) => {
                    let c = *c;
                    rank_of(inner, c)
                }
                _ => None,
            },
            Node::Filter(inner, _) => rank_of(inner, col),
            _ => None,
        }
    }
    match predicate {
        Scalar::And(a, b) => {
            limit_rank(input, a);
            limit_rank(input, b);
        }
        Scalar::Cmp(op, _, l, r) => {
            let (Scalar::Col(c), Scalar::Lit(Datum::Int(n))) = (&**l, &**r) else {
                return;
            };
            let n = match op {
                CmpOp::Le => *n,
                CmpOp::Lt => *n - 1,
                CmpOp::Eq if *n == 1 => 1,
                _ => return,
            };
            if let (Some(rank), Ok(n)) = (rank_of(input, *c), usize::try_from(n)) {
                rank.limit = Some(rank.limit.map_or(n, |m| m.min(n)));
            }
        }
        _ => {}
    }
}

/// The cross join of `left` and `right`, whose keys a condition sets ([`join_condition`]).
/// The table name of `__lookup__(name)` (a table joined `FOR SYSTEM_TIME AS OF`).
fn lookup_of(factor: &TableFactor) -> Option<String> {
    let TableFactor::Table {
        name,
        args: Some(args),
        ..
    } = factor
    else {
        return None;
    };
    if name.to_string() != crate::parser::LOOKUP_TABLE {
        return None;
    }
    match args.args.as_slice() {
        [sqlparser::ast::FunctionArg::Unnamed(sqlparser::ast::FunctionArgExpr::Expr(
            Expr::Identifier(table),
        ))] => Some(table.value.clone()),
        _ => None,
    }
}

/// Makes the join `plan` (of `relation`, joined `FOR SYSTEM_TIME AS OF`) a lookup join.
fn lookup_join(plan: &mut Plan, relation: &str) -> Result<(), SqlError> {
    let Node::Join(_, right, spec) = &mut plan.node else {
        return Ok(());
    };
    match &right.node {
        Node::Scan(table) if table.watermark.is_some() => Err(SqlError::plan(format!(
            "`{relation}`: a temporal join on event time (a versioned table, with a WATERMARK) is not supported yet; a lookup join reads a table without one"
        ))),
        Node::Scan(table) if table.connector()? == "filesystem" => {
            spec.lookup = true;
            Ok(())
        }
        Node::Scan(table) => Err(SqlError::plan(format!(
            "`{relation}`: a lookup join reads a 'filesystem' table, not '{}'",
            table.connector()?
        ))),
        _ => Err(SqlError::plan(format!(
            "`{relation}`: FOR SYSTEM_TIME AS OF needs a table, not a view"
        ))),
    }
}

fn join(left: Plan, right: Plan) -> Plan {
    let mut columns = left.scope.columns.clone();
    columns.extend(right.scope.columns.iter().cloned());
    Plan {
        scope: Scope::new(columns),
        rowtime: None,
        updating: left.updating || right.updating,
        windows: None,
        node: Node::Join(Box::new(left), Box::new(right), JoinSpec::default()),
    }
}

/// Projection push-down through a join (Flink's `ProjectJoinTransposeRule`): `join`, a join
/// whose rows only `exprs` (over them) read, with each side cut to the columns `exprs`, the
/// residual condition and that side's keys read; `exprs` are rewritten to the cut rows.
/// A side cut this way keeps less in a regular join's state, and computes less (a
/// `PROCTIME()` column no one reads is not computed). The side of a lookup join that is
/// the table is left whole, and so is a side that occurs more than once in the plan
/// (`uses`): it is built once for all its uses, and cutting one use would build it twice.
fn narrow_join(join: Plan, exprs: &mut [Scalar], uses: &HashMap<String, usize>) -> Plan {
    let Node::Join(left, right, mut spec) = join.node else {
        return join;
    };
    let (lw, rw) = (left.scope.columns.len(), right.scope.columns.len());
    let mut read = vec![false; lw + rw];
    let mark = |e: &Scalar, offset: usize, read: &mut [bool]| {
        let mut cols = Vec::new();
        columns_of(e, &mut cols);
        for c in cols {
            if let Some(r) = read.get_mut(c + offset) {
                *r = true;
            }
        }
    };
    for e in exprs.iter().chain(&spec.residual) {
        mark(e, 0, &mut read);
    }
    for k in &spec.left_keys {
        mark(k, 0, &mut read);
    }
    for k in &spec.right_keys {
        mark(k, lw, &mut read);
    }
    let shared = |side: &Plan| uses.get(&format!("{:?}", side.node)).copied().unwrap_or(0) > 1;
    if shared(&left) {
        read[..lw].iter_mut().for_each(|r| *r = true);
    }
    if spec.lookup || shared(&right) {
        read[lw..].iter_mut().for_each(|r| *r = true);
    }
    if read.iter().all(|&r| r) {
        return Plan {
            node: Node::Join(left, right, spec),
            ..join
        };
    }
    // The new position of each column kept, over the joined row.
    let mut position = vec![None; lw + rw];
    let mut next = 0;
    for (c, &r) in read.iter().enumerate() {
        if r {
            position[c] = Some(next);
            next += 1;
        }
    }
    let new_lw = read[..lw].iter().filter(|&&r| r).count();
    let left = keep_columns(*left, &read[..lw]);
    let right = keep_columns(*right, &read[lw..]);
    let at = |c: usize| Scalar::Col(position[c].expect("a column read is kept"));
    for e in exprs.iter_mut() {
        *e = map_columns(e, &at);
    }
    spec.residual = spec.residual.map(|r| map_columns(&r, &at));
    spec.left_keys = spec.left_keys.iter().map(|k| map_columns(k, &at)).collect();
    spec.right_keys = spec
        .right_keys
        .iter()
        .map(|k| {
            map_columns(k, &|c| {
                Scalar::Col(position[c + lw].expect("a key is kept") - new_lw)
            })
        })
        .collect();
    let mut plan = self::join(left, right);
    if let Node::Join(_, _, s) = &mut plan.node {
        *s = spec;
    }
    plan
}

/// `plan`'s rows with only the columns marked in `keep` (all of them: `plan` as it is).
fn keep_columns(plan: Plan, keep: &[bool]) -> Plan {
    if keep.iter().all(|&k| k) {
        return plan;
    }
    let kept: Vec<usize> = (0..keep.len()).filter(|&c| keep[c]).collect();
    let new_of = |c: usize| kept.iter().position(|&k| k == c);
    let scope = Scope::new(
        kept.iter()
            .map(|&c| plan.scope.columns[c].clone())
            .collect(),
    );
    let rowtime = plan.rowtime.and_then(new_of);
    let windows = plan
        .windows
        .and_then(|(s, e)| Some((new_of(s)?, new_of(e)?)));
    let updating = plan.updating;
    let node = match plan.node {
        // A projection below computes only the columns kept.
        Node::Project(input, exprs) => {
            Node::Project(input, kept.iter().map(|&c| exprs[c].clone()).collect())
        }
        node => Node::Project(
            Box::new(Plan { node, ..plan }),
            kept.iter().map(|&c| Scalar::Col(c)).collect(),
        ),
    };
    Plan {
        node,
        scope,
        rowtime,
        updating,
        windows,
    }
}

/// The columns `e` reads.
fn columns_of(e: &Scalar, out: &mut Vec<usize>) {
    match e {
        Scalar::Col(i) => out.push(*i),
        e => e.for_each_operand(&mut |x| columns_of(x, out)),
    }
}

/// Whether `e` is as cheap to compute twice as to read: a column, a field of one, a constant.
fn is_cheap(e: &Scalar) -> bool {
    match e {
        Scalar::Col(_) | Scalar::Lit(_) => true,
        Scalar::Field(inner, _) => is_cheap(inner),
        _ => false,
    }
}

/// `e` over the rows `inner` computes from its input: each column `i` replaced by
/// `inner[i]`.
fn substitute(e: &Scalar, inner: &[Scalar]) -> Scalar {
    map_columns(e, &|i| inner[i].clone())
}

/// `e` with every column position moved down by `by`.
fn shift(e: &Scalar, by: usize) -> Scalar {
    map_columns(e, &|i| Scalar::Col(i - by))
}

/// `e` with each column `i` replaced by `f(i)`.
fn map_columns(e: &Scalar, f: &dyn Fn(usize) -> Scalar) -> Scalar {
    match e {
        Scalar::Col(i) => f(*i),
        e => e.map_operands(&mut |x| map_columns(x, f)),
    }
}

fn conjuncts(e: Scalar, out: &mut Vec<Scalar>) {
    match e {
        Scalar::And(a, b) => {
            conjuncts(*a, out);
            conjuncts(*b, out);
        }
        other => out.push(other),
    }
}

/// Puts what of `predicate` (over `plan`'s rows) a join at the top of `plan` can take into
/// it: equalities between a left and a right expression become keys, conditions on one side
/// only go below the join (so that neither side keeps rows the condition drops), and the
/// rest becomes the join's residual condition. When `plan` is no join, the predicate is
/// returned with it, to be applied as a filter.
fn join_condition(plan: Plan, predicate: Scalar) -> (Plan, Option<Scalar>) {
    let Plan {
        node,
        scope,
        rowtime,
        updating,
        windows,
    } = plan;
    let (mut left, mut right, mut spec) = match node {
        Node::Join(l, r, spec) => (l, r, spec),
        node => {
            let plan = Plan {
                node,
                scope,
                rowtime,
                updating,
                windows,
            };
            return (plan, Some(predicate));
        }
    };
    let n = left.scope.columns.len();
    let mut parts = Vec::new();
    conjuncts(predicate, &mut parts);
    for part in parts {
        let mut cols = Vec::new();
        columns_of(&part, &mut cols);
        let side = |cols: &[usize]| -> (bool, bool) {
            (
                !cols.is_empty() && cols.iter().all(|&c| c < n),
                !cols.is_empty() && cols.iter().all(|&c| c >= n),
            )
        };
        if let Scalar::Cmp(crate::expr::CmpOp::Eq, kind, a, b) = &part {
            let (mut ca, mut cb) = (Vec::new(), Vec::new());
            columns_of(a, &mut ca);
            columns_of(b, &mut cb);
            let ((a_left, a_right), (b_left, b_right)) = (side(&ca), side(&cb));
            // Keys hash as datums: both sides must give the same datum for equal values
            // (integers with integers, strings with strings), not a decimal and a double.
            if matches!(
                kind,
                crate::expr::Numeric::Int | crate::expr::Numeric::Other
            ) {
                if a_left && b_right {
                    spec.left_keys.push((**a).clone());
                    spec.right_keys.push(shift(b, n));
                    continue;
                }
                if a_right && b_left {
                    spec.left_keys.push((**b).clone());
                    spec.right_keys.push(shift(a, n));
                    continue;
                }
            }
        }
        match side(&cols) {
            (true, _) => left = Box::new(filter(*left, part)),
            (_, true) => right = Box::new(filter(*right, shift(&part, n))),
            _ => {
                spec.residual = Some(match spec.residual.take() {
                    Some(r) => Scalar::And(Box::new(r), Box::new(part)),
                    None => part,
                })
            }
        }
    }
    let plan = Plan {
        node: Node::Join(left, right, spec),
        scope,
        rowtime,
        updating,
        windows: None,
    };
    (plan, None)
}

/// Keeps the rows of `input` on which `predicate` is `TRUE`.
///
/// As Flink's optimizer does (`FilterProjectTransposeRule`, and calcs merged), a filter
/// goes below a projection whose columns it reads are cheap (columns, fields, constants:
/// a view's), so that the projection only computes the rows kept, and two filters in a
/// row are one.
fn filter(input: Plan, predicate: Scalar) -> Plan {
    let mut read = Vec::new();
    columns_of(&predicate, &mut read);
    match input.node {
        Node::Project(inner, exprs)
            if read.iter().all(|&c| exprs.get(c).is_some_and(is_cheap))
                && !reads_proctime(&predicate) =>
        {
            let pushed = substitute(&predicate, &exprs);
            Plan {
                node: Node::Project(Box::new(filter(*inner, pushed)), exprs),
                ..input
            }
        }
        Node::Filter(inner, first) => Plan {
            node: Node::Filter(inner, Scalar::And(Box::new(first), Box::new(predicate))),
            ..input
        },
        node => filter_node(Plan { node, ..input }, predicate),
    }
}

/// Whether `e` reads the wall clock (`PROCTIME()`), which must be read where it stands.
fn reads_proctime(e: &Scalar) -> bool {
    let mut found = matches!(e, Scalar::ProcTime);
    e.for_each_operand(&mut |x| found |= reads_proctime(x));
    found
}

/// A filter node of `predicate` over `input`, as it is.
fn filter_node(input: Plan, predicate: Scalar) -> Plan {
    Plan {
        scope: input.scope.clone(),
        rowtime: input.rowtime,
        updating: input.updating,
        windows: input.windows,
        node: Node::Filter(Box::new(input), predicate),
    }
}

/// Whether `name` is an aggregate function's.
fn is_aggregate(name: &str) -> bool {
    ["COUNT", "SUM", "MIN", "MAX", "AVG"]
        .iter()
        .any(|a| a.eq_ignore_ascii_case(name))
}

/// Appends the aggregate calls in `e` (not looking into them: aggregates do not nest).
fn collect_aggregates(e: &Expr, out: &mut Vec<sqlparser::ast::Function>) {
    match e {
        Expr::Function(f) if f.over.is_none() && is_aggregate(&f.name.to_string()) => {
            out.push(f.clone());
        }
        Expr::Function(f) => {
            if let FunctionArguments::List(list) = &f.args {
                for a in &list.args {
                    if let FunctionArg::Unnamed(FunctionArgExpr::Expr(x)) = a {
                        collect_aggregates(x, out);
                    }
                }
            }
        }
        Expr::BinaryOp { left, right, .. } => {
            collect_aggregates(left, out);
            collect_aggregates(right, out);
        }
        Expr::UnaryOp { expr, .. }
        | Expr::Nested(expr)
        | Expr::IsNull(expr)
        | Expr::IsNotNull(expr)
        | Expr::Cast { expr, .. }
        | Expr::In { expr, .. } => collect_aggregates(expr, out),
        Expr::Between {
            expr, low, high, ..
        } => {
            for x in [expr, low, high] {
                collect_aggregates(x, out);
            }
        }
        Expr::Case {
            operand,
            conditions,
            else_result,
            ..
        } => {
            if let Some(o) = operand {
                collect_aggregates(o, out);
            }
            for c in conditions {
                collect_aggregates(&c.condition, out);
                collect_aggregates(&c.result, out);
            }
            if let Some(e) = else_result {
                collect_aggregates(e, out);
            }
        }
        _ => {}
    }
}

/// The table's physical columns as `Column`s (the rows a sink writes).
pub fn physical_columns(table: &Table) -> Vec<Column> {
    table
        .physical()
        .map(|c| Column {
            qualifier: None,
            name: c.name.clone(),
            ty: c.ty.clone(),
        })
        .collect()
}

/// An expression tree's text for messages.
pub fn expr_text(e: &Expr) -> String {
    e.to_string()
}

/// Runs a script's DDL into a catalog and plans its query (`SELECT ...`), for tests.
#[cfg(test)]
pub(crate) fn plan_script(text: &str) -> (crate::catalog::Catalog, Plan) {
    use crate::parser::{parse_script, Statement};
    let mut catalog = crate::catalog::Catalog::default();
    let mut plan = None;
    for s in parse_script(text).unwrap() {
        match s.statement {
            Statement::CreateTable(def) => catalog.create_table(&def).unwrap(),
            Statement::CreateView { name, query } => catalog.create_view(&name, query).unwrap(),
            Statement::Query(q) => plan = Some(plan_query(&q, &catalog).unwrap()),
            other => panic!("not DDL or a query: {other:?}"),
        }
    }
    (catalog, plan.expect("a query"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_filter_goes_below_a_views_projection_and_merges_with_its_filter() {
        let (_, plan) = plan_script(
            "CREATE TABLE t (k INT, r ROW<a BIGINT, b VARCHAR>) WITH ('connector' = 'filesystem', 'path' = 'x');
             CREATE VIEW v AS SELECT r.a AS a, r.b AS b FROM t WHERE k = 2;
             SELECT a FROM v WHERE a > 10;",
        );
        // One projection (the view's and the query's fused) over one filter of both
        // conditions, over the scan.
        let Node::Project(filtered, _) = &plan.node else {
            panic!("{}", plan.explain())
        };
        let Node::Filter(scan, Scalar::And(..)) = &filtered.node else {
            panic!("{}", plan.explain())
        };
        assert!(matches!(scan.node, Node::Scan(_)), "{}", plan.explain());
    }

    /// A join under a projection keeps, of each side, only the columns the projection, the
    /// residual and the keys read: the view's unread columns and its `PROCTIME()` are cut
    /// from the side's projection, and the projection above reads the cut row.
    #[test]
    fn a_join_keeps_only_the_columns_read_above_it() {
        let (_, plan) = plan_script(
            "CREATE TABLE t (k BIGINT, a BIGINT, s VARCHAR, u VARCHAR, ts TIMESTAMP(3)) WITH ('connector' = 'filesystem', 'path' = 'x');
             CREATE TABLE d (id BIGINT, name VARCHAR, extra VARCHAR) WITH ('connector' = 'filesystem', 'path' = 'y');
             CREATE VIEW v AS SELECT k, a, s, u, ts, PROCTIME() AS p FROM t;
             SELECT v.a, d.name FROM v JOIN d ON v.k = d.id WHERE v.a > d.id;",
        );
        let Node::Project(join, exprs) = &plan.node else {
            panic!("{}", plan.explain())
        };
        let Node::Join(left, right, spec) = &join.node else {
            panic!("{}", plan.explain())
        };
        let names = |p: &Plan| {
            p.scope
                .columns
                .iter()
                .map(|c| c.name.clone())
                .collect::<Vec<_>>()
        };
        assert_eq!(names(left), ["k", "a"], "{}", plan.explain());
        assert_eq!(names(right), ["id", "name"], "{}", plan.explain());
        // The left side's projection computes no PROCTIME().
        let Node::Project(_, left_exprs) = &left.node else {
            panic!("{}", plan.explain())
        };
        assert!(
            left_exprs.iter().all(|e| !reads_proctime(e)),
            "{}",
            plan.explain()
        );
        // The keys, the residual and the projection read the cut rows.
        assert!(
            matches!(spec.left_keys[..], [Scalar::Col(0)]),
            "{}",
            plan.explain()
        );
        assert!(
            matches!(spec.right_keys[..], [Scalar::Col(0)]),
            "{}",
            plan.explain()
        );
        assert!(
            matches!(exprs[..], [Scalar::Col(1), Scalar::Col(3)]),
            "{}",
            plan.explain()
        );
        let residual = format!("{:?}", spec.residual);
        assert!(
            residual.contains("Col(1)") && residual.contains("Col(2)"),
            "{residual}"
        );
    }

    /// A join's side that the plan also reads elsewhere (a view on both sides of a join, as
    /// q7's `bid`) is built once for both, so it is not cut for one of them.
    #[test]
    fn a_join_side_the_plan_shares_is_not_cut() {
        let (_, plan) = plan_script(
            "CREATE TABLE t (k BIGINT, a BIGINT, s VARCHAR) WITH ('connector' = 'filesystem', 'path' = 'x');
             CREATE VIEW v AS SELECT k, a, s FROM t WHERE k > 0;
             SELECT v.a FROM v JOIN (SELECT MAX(a) AS m FROM v GROUP BY k) g ON v.a = g.m;",
        );
        let Node::Project(join, _) = &plan.node else {
            panic!("{}", plan.explain())
        };
        let Node::Join(left, _, _) = &join.node else {
            panic!("{}", plan.explain())
        };
        assert_eq!(left.scope.columns.len(), 3, "{}", plan.explain());
    }
}
