//! Projection push-down for JSON-lines sources of a declared row type: the fields a job's
//! native operations read are the only ones the source decodes (as the SQL front's scans,
//! and Flink's `SupportsProjectionPushDown`). Fields no operation reads are skipped as
//! unknown fields are (checked to be JSON, never built) and read as `None`.
//!
//! The reads are followed from the source through the operations that pass its records on
//! unchanged and read them with native expressions: `filter`, `key_by`, timestamp
//! assignment, `union`, `rebalance`, windows with built-in aggregates, and the `map` or
//! `flat_map` that makes new records of them. Anything else that sees the records (a Python
//! function, a sink, a positional field, the whole record) reads every field.
//! `x.is_null()` on a nested row reads whether it is there, not its fields.

use std::collections::HashMap;

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use spate_types::{DataType, Schema};

use crate::expr::{Expr, Step};

/// What a job reads of a source's records: field paths by name, each read whole, or only
/// for whether it is `None`.
#[derive(Debug, Default)]
pub struct Reads {
    whole: Vec<Vec<String>>,
    presence: Vec<Vec<String>>,
}

impl Reads {
    /// Adds what `e` reads; `false` when it reads the whole record or a field by position.
    fn expr(&mut self, e: &Expr) -> bool {
        match e {
            Expr::Col(_, steps) => match names(steps) {
                Some(path) if !path.is_empty() => {
                    self.whole.push(path);
                    true
                }
                _ => false,
            },
            Expr::IsNull(inner) => match &**inner {
                Expr::Col(_, steps) => match names(steps) {
                    Some(path) if !path.is_empty() => {
                        self.presence.push(path);
                        true
                    }
                    _ => false,
                },
                other => self.expr(other),
            },
            Expr::Lit(_) => true,
            Expr::Bin(_, a, b) | Expr::Cmp(_, a, b) | Expr::And(a, b) | Expr::Or(a, b) => {
                self.expr(a) && self.expr(b)
            }
            Expr::Not(a) | Expr::Neg(a) | Expr::Cast(_, a) => self.expr(a),
            Expr::Call(_, args) | Expr::Row(_, args) | Expr::Tuple(args) => {
                args.iter().all(|a| self.expr(a))
            }
        }
    }

    /// The decoder's choice of fields by index path (see `RowDecoder::projected`), or `None`
    /// when a path is not in `schema` (the operation then reports it as it runs).
    pub fn index_paths(&self, schema: &Schema) -> Option<Vec<(Vec<usize>, bool)>> {
        let index = |path: &[String]| -> Option<Vec<usize>> {
            let mut at = Vec::with_capacity(path.len());
            let mut schema = schema;
            for (i, name) in path.iter().enumerate() {
                let f = schema.index_of(name)?;
                at.push(f);
                match &schema.fields()[f].data_type {
                    DataType::Row(inner) => schema = inner,
                    // A path into a value that is not a row: the value is read whole.
                    _ if i + 1 < path.len() => return Some(at),
                    _ => {}
                }
            }
            Some(at)
        };
        let mut out = Vec::new();
        for p in &self.whole {
            out.push((index(p)?, true));
        }
        for p in &self.presence {
            out.push((index(p)?, false));
        }
        Some(out)
    }
}

/// Whether the decoder reads the field at index path `at`, given the paths read: a field on
/// the way to one, or inside one read whole.
pub fn reads(paths: &[(Vec<usize>, bool)], at: &[usize]) -> bool {
    paths
        .iter()
        .any(|(p, whole)| p.starts_with(at) || (*whole && at.starts_with(p)))
}

fn names(steps: &[Step]) -> Option<Vec<String>> {
    steps
        .iter()
        .map(|s| match s {
            Step::Name(n) if n != "*" => Some(n.clone()),
            _ => None,
        })
        .collect()
}

/// For each JSON-lines source node with a declared type in `nodes` (whose consumers, by
/// node id, are `consumers`), what the job reads of its records, when less than everything.
pub fn source_reads(
    nodes: &Bound<'_, PyList>,
    consumers: &HashMap<usize, Vec<usize>>,
) -> PyResult<HashMap<usize, Reads>> {
    let mut by_id: HashMap<usize, Bound<'_, PyDict>> = HashMap::new();
    for node in nodes.iter() {
        let node = node.cast_into::<PyDict>()?;
        let id: usize = node
            .get_item("id")?
            .map_or(Ok(usize::MAX), |v| v.extract())?;
        by_id.insert(id, node);
    }
    let mut out = HashMap::new();
    for (id, node) in &by_id {
        let op: String = node
            .get_item("op")?
            .map_or(Ok(String::new()), |v| v.extract())?;
        let typed = node.get_item("schema")?.is_some_and(|s| !s.is_none());
        if op != "jsonl" || !typed {
            continue;
        }
        let mut reads = Reads::default();
        if follow(*id, &by_id, consumers, &mut reads)? {
            out.insert(*id, reads);
        }
    }
    Ok(out)
}

/// Adds to `reads` what the consumers of node `id` read of its records; `false` when one
/// may read anything.
fn follow(
    id: usize,
    nodes: &HashMap<usize, Bound<'_, PyDict>>,
    consumers: &HashMap<usize, Vec<usize>>,
    reads: &mut Reads,
) -> PyResult<bool> {
    for c in consumers.get(&id).map(Vec::as_slice).unwrap_or_default() {
        let Some(node) = nodes.get(c) else {
            return Ok(false);
        };
        let op: String = node
            .get_item("op")?
            .map_or(Ok(String::new()), |v| v.extract())?;
        let native = |key: &str| -> PyResult<Option<Expr>> {
            match node.get_item(key)? {
                Some(e) if !e.is_none() => Ok(Some(Expr::compile(&e)?)),
                _ => Ok(None),
            }
        };
        let ok = match op.as_str() {
            // New records, made natively: they read what their expression reads.
            "map" | "flat_map" => match native("expr")? {
                Some(e) => reads.expr(&e),
                None => false,
            },
            // The records go on: what they read, and what reads them after.
            "filter" | "key_by" => match native("expr")? {
                Some(e) => reads.expr(&e) && follow(*c, nodes, consumers, reads)?,
                None => false,
            },
            "assign_timestamps" => {
                let assigned = match node.get_item("ts")? {
                    Some(t) => t.is_truthy()?,
                    None => false,
                };
                let assigner = match (assigned, native("expr")?) {
                    (false, _) => true,
                    (true, Some(e)) => reads.expr(&e),
                    (true, None) => false, // a Python assigner
                };
                assigner && follow(*c, nodes, consumers, reads)?
            }
            "union" | "rebalance" | "window" => follow(*c, nodes, consumers, reads)?,
            // Built-in aggregates read their fields; the window's rows are new records.
            "window_aggregate" => match node.get_item("aggs")? {
                Some(aggs) => {
                    let mut all = true;
                    for a in aggs.try_iter()? {
                        let arg = a?.get_item(1)?;
                        if !arg.is_none() {
                            all &= reads.expr(&Expr::compile(&arg)?);
                        }
                    }
                    all
                }
                None => false,
            },
            _ => false,
        };
        if !ok {
            return Ok(false);
        }
    }
    Ok(true)
}
