//! The catalog: the tables, views and functions a session's statements define.
//!
//! Spate has one in-memory catalog per session, as Flink's default `default_catalog`.
//! Catalog and database prefixes of names (`default_catalog.default_database.t`) are
//! accepted and ignored. Names are case-sensitive, as Flink's.

use std::collections::BTreeMap;
use std::sync::Arc;

use sqlparser::ast::{Expr, Query};

use crate::expr::{self, Column, Functions, Scalar, Scope};
use crate::functions::{self, Func};
use crate::parser::{ColumnDef, TableDef};
use crate::types::SqlType;
use crate::SqlError;

/// A table: its columns, how they are read (the connector's options), and its time.
#[derive(Debug, Clone)]
pub struct Table {
    /// The table's name.
    pub name: String,
    /// Every column, in declaration order.
    pub columns: Vec<TableColumn>,
    /// The position (in `columns`) of the rowtime column, with the watermark expression
    /// bound over all columns.
    pub watermark: Option<(usize, Scalar)>,
    /// `PRIMARY KEY (...) NOT ENFORCED`.
    pub primary_key: Vec<String>,
    /// The `WITH` options.
    pub options: BTreeMap<String, String>,
}

/// One column of a [`Table`].
#[derive(Debug, Clone)]
pub struct TableColumn {
    /// Its name.
    pub name: String,
    /// Its type.
    pub ty: SqlType,
    /// `None` for a physical column; for a computed one, its expression over the physical
    /// columns (positions in the physical row).
    pub computed: Option<Scalar>,
}

impl Table {
    /// The physical columns: what the connector reads and writes.
    pub fn physical(&self) -> impl Iterator<Item = &TableColumn> {
        self.columns.iter().filter(|c| c.computed.is_none())
    }

    /// The connector option `key`.
    pub fn option(&self, key: &str) -> Option<&str> {
        self.options.get(key).map(String::as_str)
    }

    /// The connector (`'connector'`, or the legacy `'connector.type'`).
    pub fn connector(&self) -> Result<&str, SqlError> {
        self.option("connector")
            .or_else(|| self.option("connector.type"))
            .ok_or_else(|| {
                SqlError::plan(format!(
                    "the table `{}` has no 'connector' option",
                    self.name
                ))
            })
    }

    /// The table's columns as a scope whose qualifier is `qualifier`.
    pub fn scope(&self, qualifier: &str) -> Scope {
        Scope::new(
            self.columns
                .iter()
                .map(|c| Column {
                    qualifier: Some(qualifier.to_string()),
                    name: c.name.clone(),
                    ty: c.ty.clone(),
                })
                .collect(),
        )
    }
}

/// The session's tables, views and functions.
#[derive(Debug, Default)]
pub struct Catalog {
    tables: BTreeMap<String, Arc<Table>>,
    views: BTreeMap<String, Box<Query>>,
    functions: BTreeMap<String, Func>,
}

impl Functions for Catalog {
    fn function(&self, name: &str) -> Option<Func> {
        self.functions
            .get(name)
            .or_else(|| {
                self.functions
                    .iter()
                    .find(|(k, _)| k.eq_ignore_ascii_case(name))
                    .map(|(_, f)| f)
            })
            .copied()
            .or_else(|| functions::lookup(name))
    }
}

impl Catalog {
    /// Adds a table from its DDL.
    pub fn create_table(&mut self, def: &TableDef) -> Result<(), SqlError> {
        if self.exists(&def.name) {
            if def.if_not_exists {
                return Ok(());
            }
            return Err(SqlError::plan(format!(
                "a table or view named `{}` exists already",
                def.name
            )));
        }
        // Computed columns are expressions over the physical columns.
        let physical = Scope::new(
            def.columns
                .iter()
                .filter_map(|c| match c {
                    ColumnDef::Physical { name, ty, .. } => Some(Column {
                        qualifier: None,
                        name: name.clone(),
                        ty: ty.clone(),
                    }),
                    ColumnDef::Computed { .. } => None,
                })
                .collect(),
        );
        let mut columns = Vec::with_capacity(def.columns.len());
        for c in &def.columns {
            if columns.iter().any(|t: &TableColumn| t.name == c.name()) {
                return Err(SqlError::plan(format!(
                    "the table `{}` declares the column `{}` twice",
                    def.name,
                    c.name()
                )));
            }
            columns.push(match c {
                ColumnDef::Physical { name, ty, .. } => TableColumn {
                    name: name.clone(),
                    ty: ty.clone(),
                    computed: None,
                },
                ColumnDef::Computed { name, expr } => {
                    let bound = expr::bind(expr, &physical, self).map_err(|e| {
                        e.context(format!("the computed column `{name}` of `{}`", def.name))
                    })?;
                    TableColumn {
                        name: name.clone(),
                        ty: bound.ty,
                        computed: Some(bound.expr),
                    }
                }
            });
        }
        let mut table = Table {
            name: def.name.clone(),
            columns,
            watermark: None,
            primary_key: def.primary_key.clone(),
            options: def.options.iter().cloned().collect(),
        };
        for key in &def.primary_key {
            if !table.columns.iter().any(|c| &c.name == key) {
                return Err(SqlError::plan(format!(
                    "the primary key of `{}` names the column `{key}`, which it does not have",
                    def.name
                )));
            }
        }
        if let Some((column, wm)) = &def.watermark {
            let Some(pos) = table.columns.iter().position(|c| &c.name == column) else {
                return Err(SqlError::plan(format!(
                    "WATERMARK FOR `{column}`: the table `{}` has no such column",
                    def.name
                )));
            };
            if table.columns[pos].ty != SqlType::Timestamp {
                return Err(SqlError::plan(format!(
                    "WATERMARK FOR `{column}`: the rowtime column must be a TIMESTAMP(3), not {}",
                    table.columns[pos].ty
                )));
            }
            let bound = expr::bind(wm, &table.scope(&def.name), self)
                .map_err(|e| e.context(format!("the watermark of `{}`", def.name)))?;
            if bound.ty != SqlType::Timestamp {
                return Err(SqlError::plan(format!(
                    "the watermark of `{}` must be a TIMESTAMP(3), not {}",
                    def.name, bound.ty
                )));
            }
            table.watermark = Some((pos, bound.expr));
        }
        self.tables.insert(def.name.clone(), Arc::new(table));
        Ok(())
    }

    /// Adds a view.
    pub fn create_view(&mut self, name: &str, query: Box<Query>) -> Result<(), SqlError> {
        if self.exists(name) {
            return Err(SqlError::plan(format!(
                "a table or view named `{name}` exists already"
            )));
        }
        self.views.insert(name.to_string(), query);
        Ok(())
    }

    /// Adds a function implemented by `class` (a Java class name that Spate knows the
    /// built-in equivalent of, or a built-in function's name).
    pub fn create_function(&mut self, name: &str, class: &str) -> Result<(), SqlError> {
        let func = functions::java_class(class)
            .or_else(|| functions::lookup(class))
            .ok_or_else(|| {
                SqlError::plan(format!(
                    "CREATE FUNCTION {name}: Spate has no implementation of `{class}`"
                ))
            })?;
        self.functions.insert(name.to_string(), func);
        Ok(())
    }

    /// Removes a table, view or function; `Ok(false)` if there was none.
    pub fn drop(&mut self, kind: &str, name: &str) -> bool {
        match kind {
            "TABLE" => self.tables.remove(name).is_some(),
            "VIEW" => self.views.remove(name).is_some(),
            _ => self.functions.remove(name).is_some(),
        }
    }

    fn exists(&self, name: &str) -> bool {
        self.tables.contains_key(name) || self.views.contains_key(name)
    }

    /// Sets and removes options of the table `name` (`ALTER TABLE ... SET | RESET`); false
    /// when there is no such table.
    pub fn alter_options(
        &mut self,
        name: &str,
        set: &[(String, String)],
        reset: &[String],
    ) -> bool {
        let Some(table) = self.tables.get_mut(name) else {
            return false;
        };
        let table = Arc::make_mut(table);
        for key in reset {
            table.options.remove(key);
        }
        for (key, value) in set {
            table.options.insert(key.clone(), value.clone());
        }
        true
    }

    /// The table `name`.
    pub fn table(&self, name: &str) -> Option<&Arc<Table>> {
        self.tables.get(name)
    }

    /// The view `name`'s query.
    pub fn view(&self, name: &str) -> Option<&Query> {
        self.views.get(name).map(|q| &**q)
    }

    /// The tables' names.
    pub fn table_names(&self) -> Vec<String> {
        self.tables.keys().cloned().collect()
    }

    /// The views' names.
    pub fn view_names(&self) -> Vec<String> {
        self.views.keys().cloned().collect()
    }

    /// The user functions' names.
    pub fn function_names(&self) -> Vec<String> {
        self.functions.keys().cloned().collect()
    }
}

/// Whether `e` is a plain column reference (for deriving a result column's name).
pub fn column_name(e: &Expr) -> Option<String> {
    match e {
        Expr::Identifier(i) => Some(i.value.clone()),
        Expr::CompoundIdentifier(parts) => parts.last().map(|i| i.value.clone()),
        Expr::Nested(inner) => column_name(inner),
        _ => None,
    }
}
