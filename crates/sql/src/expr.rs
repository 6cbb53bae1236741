//! Scalar expressions: bound from `sqlparser`'s AST against a plan node's columns, typed with
//! Flink's rules, and evaluated per row.
//!
//! [`bind`] resolves names (`col`, `t.col`, `row_col.field`), types every node, applies
//! Flink's implicit conversions (an `INT` meets a `DECIMAL` as a `DECIMAL`, a `DECIMAL` meets
//! a `DOUBLE` as a `DOUBLE`) and prepares function calls once ([`crate::functions`]: constant
//! patterns compiled at planning). The result is a [`Scalar`] tree that [`Scalar::eval`]
//! walks per row, without lookups by name or type checks.
//!
//! NULL follows SQL's three-valued logic: an operator with a `NULL` operand gives `NULL`,
//! except `AND`/`OR` (`FALSE AND NULL` is `FALSE`), `IS [NOT] NULL`, `CASE` and `COALESCE`.
//! A `WHERE` keeps a row only when its predicate is `TRUE`.
//!
//! Arithmetic: integers as Java's (and so Flink's): `INT` in 32 and `BIGINT` in 64 bits,
//! wrapping around on overflow; DECIMALs exact (computed in 128 bits, kept in an `i64`
//! unscaled value: `NULL` past 18 digits, as Flink's decimal overflow); DOUBLEs as IEEE
//! floats. `/` of integers truncates toward zero. A division by zero gives `NULL`, where
//! Flink's job fails (a known difference).

use std::collections::HashMap;
use std::sync::Arc;

use sqlparser::ast::{
    BinaryOperator, CastKind, DateTimeField, Expr, FunctionArg, FunctionArgExpr, FunctionArguments,
    Ident, InTarget, UnaryOperator, Value,
};

use crate::functions::{self, Func, Prepared};
use crate::types::{parse_timestamp, Datum, SqlType};
use crate::SqlError;

/// A column of a plan node as names see it.
#[derive(Debug, Clone)]
pub struct Column {
    /// The table (or alias) it comes from, when it has one.
    pub qualifier: Option<String>,
    /// Its name.
    pub name: String,
    /// Its type.
    pub ty: SqlType,
}

/// The columns a plan node gives, which expressions over it may name.
#[derive(Debug, Clone, Default)]
pub struct Scope {
    /// The columns, in row order.
    pub columns: Vec<Column>,
    /// Expressions already computed into a column (grouping keys and aggregates, by their
    /// SQL text), which an expression over an aggregate's output names by its text.
    pub computed: HashMap<String, usize>,
}

impl Scope {
    /// A scope of `columns`.
    pub fn new(columns: Vec<Column>) -> Self {
        Scope {
            columns,
            computed: HashMap::new(),
        }
    }

    /// The position of the column `name` (qualified by `qualifier` if given), or an error if
    /// there is none or more than one.
    pub fn resolve(&self, qualifier: Option<&str>, name: &str) -> Result<Option<usize>, SqlError> {
        let mut found = None;
        for (i, c) in self.columns.iter().enumerate() {
            if c.name == name && (qualifier.is_none() || c.qualifier.as_deref() == qualifier) {
                if found.is_some() {
                    return Err(SqlError::plan(format!(
                        "the column `{name}` is ambiguous: qualify it with its table"
                    )));
                }
                found = Some(i);
            }
        }
        Ok(found)
    }
}

/// Arithmetic operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArithOp {
    /// `+`
    Add,
    /// `-`
    Sub,
    /// `*`
    Mul,
    /// `/`
    Div,
    /// `%`
    Rem,
}

/// Comparison operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CmpOp {
    /// `=`
    Eq,
    /// `<>`
    Ne,
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
}

impl CmpOp {
    /// Whether two values that compare as `ord` stand in this relation.
    #[inline]
    pub fn holds(self, ord: std::cmp::Ordering) -> bool {
        match self {
            CmpOp::Eq => ord.is_eq(),
            CmpOp::Ne => ord.is_ne(),
            CmpOp::Lt => ord.is_lt(),
            CmpOp::Le => ord.is_le(),
            CmpOp::Gt => ord.is_gt(),
            CmpOp::Ge => ord.is_ge(),
        }
    }
}

/// How the operands of an arithmetic or comparison node are taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Numeric {
    /// Both as integers (or both as timestamps, or a timestamp and an interval).
    Int,
    /// Both as DECIMALs, each scaled up to `scale` (by `10^(scale - its own)`), the result
    /// at `out` (for `*`: the sum of the operands' scales; for `/`: `out`).
    Decimal {
        /// The left operand's scale.
        left: u8,
        /// The right operand's scale.
        right: u8,
        /// The result's scale.
        out: u8,
    },
    /// Both as DOUBLEs (an integer or DECIMAL converted, with its scale).
    Double {
        /// The left operand's scale (0 for non-decimals).
        left: u8,
        /// The right operand's scale.
        right: u8,
    },
    /// Strings, booleans or anything else compared as themselves.
    Other,
}

/// A bound, typed expression.
#[derive(Debug, Clone)]
pub enum Scalar {
    /// A column of the input row.
    Col(usize),
    /// A field of a nested row.
    Field(Box<Scalar>, usize),
    /// A constant.
    Lit(Datum),
    /// Arithmetic.
    Arith(ArithOp, Numeric, Box<Scalar>, Box<Scalar>),
    /// A comparison.
    Cmp(CmpOp, Numeric, Box<Scalar>, Box<Scalar>),
    /// `AND`.
    And(Box<Scalar>, Box<Scalar>),
    /// `OR`.
    Or(Box<Scalar>, Box<Scalar>),
    /// `NOT`.
    Not(Box<Scalar>),
    /// Unary minus.
    Neg(Box<Scalar>),
    /// `IS NULL` (or `IS NOT NULL` when negated).
    IsNull(Box<Scalar>, bool),
    /// `CASE WHEN c THEN v ... ELSE e END`.
    Case(Vec<(Scalar, Scalar)>, Box<Scalar>),
    /// `x [NOT] IN (constants)`.
    InList(Box<Scalar>, Arc<[Datum]>, bool),
    /// A built-in function.
    Call(Arc<Prepared>, Vec<Scalar>),
    /// A conversion.
    Cast(Box<Scalar>, SqlType, SqlType),
    /// `PROCTIME()`: the wall clock when the row is computed (UTC milliseconds).
    ProcTime,
}

/// A bound expression and its type.
#[derive(Debug, Clone)]
pub struct Typed {
    /// The expression.
    pub expr: Scalar,
    /// Its type.
    pub ty: SqlType,
}

/// A [`Typed`] of `expr` and `ty`.
fn typed(expr: Scalar, ty: SqlType) -> Typed {
    Typed { expr, ty }
}

/// What a function name means to the binder: a built-in, or a user function registered with
/// `CREATE FUNCTION`.
pub trait Functions {
    /// The function called `name`, if any.
    fn function(&self, name: &str) -> Option<Func>;
}

/// Binds `expr` against `scope`.
pub fn bind(expr: &Expr, scope: &Scope, fns: &dyn Functions) -> Result<Typed, SqlError> {
    if !scope.computed.is_empty() {
        let text = match expr {
            // The window properties (`SESSION_START(...)`) are found whatever their case.
            Expr::Function(f) => format!("{}{}", f.name.to_string().to_ascii_uppercase(), f.args),
            _ => expr.to_string(),
        };
        if let Some(&i) = scope
            .computed
            .get(&expr.to_string())
            .or_else(|| scope.computed.get(&text))
        {
            return Ok(typed(Scalar::Col(i), scope.columns[i].ty.clone()));
        }
    }
    match expr {
        Expr::Identifier(ident) => column(scope, std::slice::from_ref(ident)),
        Expr::CompoundIdentifier(idents) => column(scope, idents),
        Expr::Nested(e) => bind(e, scope, fns),
        Expr::Value(v) => literal(&v.value),
        Expr::TypedString(ts) => {
            let text = match &ts.value.value {
                Value::SingleQuotedString(s) => s.clone(),
                other => other.to_string(),
            };
            match ts.data_type {
                sqlparser::ast::DataType::Timestamp(..) => match parse_timestamp(&text) {
                    Some(ms) => Ok(typed(Scalar::Lit(Datum::Timestamp(ms)), SqlType::Timestamp)),
                    None => Err(SqlError::plan(format!("`{text}` is not a timestamp"))),
                },
                _ => Err(unsupported(expr)),
            }
        }
        Expr::Interval(interval) => {
            let text = match interval.value.as_ref() {
                Expr::Value(v) => match &v.value {
                    Value::SingleQuotedString(s) => s.clone(),
                    Value::Number(n, _) => n.clone(),
                    _ => return Err(unsupported(expr)),
                },
                _ => return Err(unsupported(expr)),
            };
            let unit: i64 = match &interval.leading_field {
                Some(DateTimeField::Second) | Some(DateTimeField::Seconds) => 1000,
                Some(DateTimeField::Minute) | Some(DateTimeField::Minutes) => 60_000,
                Some(DateTimeField::Hour) | Some(DateTimeField::Hours) => 3_600_000,
                Some(DateTimeField::Day) | Some(DateTimeField::Days) => 86_400_000,
                None => 1,
                _ => return Err(unsupported(expr)),
            };
            let amount: f64 = text
                .trim()
                .parse()
                .map_err(|_| SqlError::plan(format!("`{text}` is not a number of an interval")))?;
            Ok(typed(
                Scalar::Lit(Datum::Int((amount * unit as f64).round() as i64)),
                SqlType::Interval,
            ))
        }
        Expr::UnaryOp { op, expr: inner } => {
            let x = bind(inner, scope, fns)?;
            match op {
                UnaryOperator::Not => {
                    expect_bool(&x, expr)?;
                    Ok(typed(Scalar::Not(Box::new(x.expr)), SqlType::Boolean))
                }
                UnaryOperator::Minus => {
                    if !x.ty.is_numeric() && x.ty != SqlType::Interval {
                        return Err(type_error(expr, "a number", &x.ty));
                    }
                    if let Scalar::Lit(d) = &x.expr {
                        let neg = match d {
                            Datum::Int(i) => Some(Datum::Int(i.wrapping_neg())),
                            Datum::Decimal(i) => i.checked_neg().map(Datum::Decimal),
                            Datum::Double(f) => Some(Datum::Double(-f)),
                            _ => None,
                        };
                        if let Some(neg) = neg {
                            return Ok(typed(Scalar::Lit(neg), x.ty));
                        }
                    }
                    let neg = Scalar::Neg(Box::new(x.expr));
                    // An INT wraps around in 32 bits.
                    if x.ty == SqlType::Int {
                        return Ok(typed(
                            Scalar::Cast(Box::new(neg), SqlType::BigInt, SqlType::Int),
                            x.ty,
                        ));
                    }
                    Ok(typed(neg, x.ty))
                }
                UnaryOperator::Plus => Ok(x),
                _ => Err(unsupported(expr)),
            }
        }
        Expr::BinaryOp { left, op, right } => {
            let l = bind(left, scope, fns)?;
            let r = bind(right, scope, fns)?;
            binary(expr, op, l, r)
        }
        Expr::IsNull(e) => {
            let x = bind(e, scope, fns)?;
            Ok(typed(
                Scalar::IsNull(Box::new(x.expr), false),
                SqlType::Boolean,
            ))
        }
        Expr::IsNotNull(e) => {
            let x = bind(e, scope, fns)?;
            Ok(typed(
                Scalar::IsNull(Box::new(x.expr), true),
                SqlType::Boolean,
            ))
        }
        Expr::Between {
            expr: e,
            negated,
            low,
            high,
        } => {
            let x = bind(e, scope, fns)?;
            let lo = bind(low, scope, fns)?;
            let hi = bind(high, scope, fns)?;
            let ge = compare(expr, CmpOp::Ge, x.clone(), lo)?;
            let le = compare(expr, CmpOp::Le, x, hi)?;
            let both = Scalar::And(Box::new(ge.expr), Box::new(le.expr));
            Ok(typed(
                if *negated {
                    Scalar::Not(Box::new(both))
                } else {
                    both
                },
                SqlType::Boolean,
            ))
        }
        Expr::In {
            expr: e,
            target: InTarget::List(list),
            negated,
            ..
        } => {
            let x = bind(e, scope, fns)?;
            let mut values = Vec::with_capacity(list.len());
            for item in list {
                let v = bind(item, scope, fns)?;
                let Scalar::Lit(d) = v.expr else {
                    return Err(SqlError::plan(format!(
                        "`{expr}`: IN takes a list of constants here"
                    )));
                };
                let d = match (&x.ty, &v.ty, d) {
                    (SqlType::Decimal(_, s), t, Datum::Int(i)) if t.is_integer() => {
                        match rescale(i, 0, *s) {
                            Some(d) => Datum::Decimal(d),
                            None => continue,
                        }
                    }
                    (SqlType::Double, t, Datum::Int(i)) if t.is_integer() => {
                        Datum::Double(i as f64)
                    }
                    (a, b, d) if comparable(a, b) => d,
                    (a, b, _) => {
                        return Err(SqlError::plan(format!(
                            "`{expr}`: cannot compare {a} with {b}"
                        )))
                    }
                };
                values.push(d);
            }
            Ok(typed(
                Scalar::InList(Box::new(x.expr), values.into(), *negated),
                SqlType::Boolean,
            ))
        }
        Expr::Case {
            operand,
            conditions,
            else_result,
            ..
        } => {
            let operand = operand.as_ref().map(|o| bind(o, scope, fns)).transpose()?;
            let mut branches = Vec::with_capacity(conditions.len());
            let mut ty = SqlType::Null;
            let mut results = Vec::new();
            for when in conditions {
                let cond = bind(&when.condition, scope, fns)?;
                let cond = match &operand {
                    Some(o) => compare(expr, CmpOp::Eq, o.clone(), cond)?,
                    None => {
                        expect_bool(&cond, &when.condition)?;
                        cond
                    }
                };
                let result = bind(&when.result, scope, fns)?;
                ty = common_type(&ty, &result.ty).ok_or_else(|| {
                    SqlError::plan(format!(
                        "`{expr}`: the branches of CASE have types {ty} and {}",
                        result.ty
                    ))
                })?;
                branches.push(cond.expr);
                results.push(result);
            }
            let otherwise = match else_result {
                Some(e) => {
                    let e = bind(e, scope, fns)?;
                    ty = common_type(&ty, &e.ty).ok_or_else(|| {
                        SqlError::plan(format!(
                            "`{expr}`: the branches of CASE have types {ty} and {}",
                            e.ty
                        ))
                    })?;
                    e
                }
                None => typed(Scalar::Lit(Datum::Null), SqlType::Null),
            };
            let branches = branches
                .into_iter()
                .zip(results)
                .map(|(c, r)| (c, coerce(r, &ty).expr))
                .collect();
            Ok(typed(
                Scalar::Case(branches, Box::new(coerce(otherwise, &ty).expr)),
                ty,
            ))
        }
        Expr::Cast {
            kind: CastKind::Cast | CastKind::TryCast | CastKind::SafeCast,
            expr: e,
            data_type,
            ..
        } => {
            let x = bind(e, scope, fns)?;
            let to = cast_type(data_type)?;
            cast(expr, x, to)
        }
        Expr::Function(f) => {
            let name = f.name.to_string();
            if f.over.is_some() || f.filter.is_some() {
                return Err(SqlError::plan(format!(
                    "`{expr}` is not allowed here (an aggregate or window function)"
                )));
            }
            if ["COUNT", "SUM", "MIN", "MAX", "AVG"]
                .iter()
                .any(|a| a.eq_ignore_ascii_case(&name))
            {
                return Err(SqlError::plan(format!(
                    "`{expr}`: an aggregate function is not allowed here (only in the select list and HAVING of a query with aggregates)"
                )));
            }
            if name.eq_ignore_ascii_case("PROCTIME") {
                return Ok(typed(Scalar::ProcTime, SqlType::Timestamp));
            }
            // IF(c, a, b) and NULLIF(a, b) are CASEs, as Flink defines them.
            if name.eq_ignore_ascii_case("IF") || name.eq_ignore_ascii_case("NULLIF") {
                let args: Vec<&Expr> = match &f.args {
                    FunctionArguments::List(list) => list
                        .args
                        .iter()
                        .map(|a| match a {
                            FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) => Ok(e),
                            _ => Err(unsupported(expr)),
                        })
                        .collect::<Result<_, _>>()?,
                    _ => Vec::new(),
                };
                let upper = name.to_ascii_uppercase();
                let (condition, result, otherwise) = match (upper.as_str(), args.as_slice()) {
                    ("IF", [c, a, b]) => ((*c).clone(), (*a).clone(), (*b).clone()),
                    ("NULLIF", [a, b]) => (
                        Expr::BinaryOp {
                            left: Box::new((*a).clone()),
                            op: sqlparser::ast::BinaryOperator::Eq,
                            right: Box::new((*b).clone()),
                        },
                        Expr::Value(sqlparser::ast::Value::Null.into()),
                        (*a).clone(),
                    ),
                    _ => {
                        let wanted = if upper == "IF" { 3 } else { 2 };
                        return Err(SqlError::plan(format!(
                            "{upper} takes {wanted} arguments, not {}",
                            args.len()
                        )));
                    }
                };
                let case = Expr::Case {
                    case_token: sqlparser::ast::helpers::attached_token::AttachedToken::empty(),
                    end_token: sqlparser::ast::helpers::attached_token::AttachedToken::empty(),
                    operand: None,
                    conditions: vec![sqlparser::ast::CaseWhen { condition, result }],
                    else_result: Some(Box::new(otherwise)),
                };
                return bind(&case, scope, fns);
            }
            let Some(func) = fns.function(&name) else {
                return Err(SqlError::plan(format!("no function named `{name}`")));
            };
            let args = match &f.args {
                FunctionArguments::None => Vec::new(),
                FunctionArguments::List(list) => list
                    .args
                    .iter()
                    .map(|a| match a {
                        FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) => bind(e, scope, fns),
                        _ => Err(unsupported(expr)),
                    })
                    .collect::<Result<Vec<_>, _>>()?,
                FunctionArguments::Subquery(_) => return Err(unsupported(expr)),
            };
            call(&name, func, args)
        }
        Expr::Substring {
            expr: e,
            substring_from,
            substring_for,
            ..
        } => {
            let mut args = vec![bind(e, scope, fns)?];
            if let Some(from) = substring_from {
                args.push(bind(from, scope, fns)?);
            }
            if let Some(len) = substring_for {
                args.push(bind(len, scope, fns)?);
            }
            call("SUBSTRING", Func::Substring, args)
        }
        Expr::Trim {
            expr: e,
            trim_where: None,
            trim_what: None,
            trim_characters: None,
        } => call("TRIM", Func::Trim, vec![bind(e, scope, fns)?]),
        Expr::Position { expr: needle, r#in } => call(
            "POSITION",
            Func::Position,
            vec![bind(needle, scope, fns)?, bind(r#in, scope, fns)?],
        ),
        Expr::Floor { expr: e, field } | Expr::Ceil { expr: e, field } => {
            use sqlparser::ast::{CeilFloorKind, DateTimeField};
            if !matches!(
                field,
                CeilFloorKind::DateTimeField(DateTimeField::NoDateTime)
            ) {
                return Err(unsupported(expr));
            }
            let (name, func) = match expr {
                Expr::Floor { .. } => ("FLOOR", Func::Floor),
                _ => ("CEIL", Func::Ceil),
            };
            call(name, func, vec![bind(e, scope, fns)?])
        }
        Expr::Like {
            negated,
            any: false,
            expr: e,
            pattern,
            escape_char,
        } => {
            let mut args = vec![bind(e, scope, fns)?, bind(pattern, scope, fns)?];
            if let Some(escape) = escape_char {
                args.push(bind(escape, scope, fns)?);
            }
            let like = call("LIKE", Func::Like, args)?;
            Ok(if *negated {
                typed(Scalar::Not(Box::new(like.expr)), like.ty)
            } else {
                like
            })
        }
        _ => Err(unsupported(expr)),
    }
}

/// A prepared call of a built-in function.
pub fn call(name: &str, func: Func, args: Vec<Typed>) -> Result<Typed, SqlError> {
    let types: Vec<SqlType> = args.iter().map(|a| a.ty.clone()).collect();
    let constants: Vec<Option<Datum>> = args
        .iter()
        .map(|a| match &a.expr {
            Scalar::Lit(d) => Some(d.clone()),
            // A negative constant (`ROUND(x, -1)`) is a negation of one.
            Scalar::Neg(e) => match &**e {
                Scalar::Lit(Datum::Int(v)) => Some(Datum::Int(-v)),
                _ => None,
            },
            _ => None,
        })
        .collect();
    let ty = functions::result_type(func, &types, &constants).map_err(SqlError::plan)?;
    let prepared = functions::prepare(func, &types, &constants)
        .map_err(|e| SqlError::plan(format!("{name}: {e}")))?;
    Ok(typed(
        Scalar::Call(
            Arc::new(prepared),
            args.into_iter().map(|a| a.expr).collect(),
        ),
        ty,
    ))
}

fn unsupported(expr: &Expr) -> SqlError {
    SqlError::plan(format!("`{expr}` is not supported"))
}

fn type_error(expr: &Expr, wanted: &str, got: &SqlType) -> SqlError {
    SqlError::plan(format!("`{expr}` needs {wanted}, not {got}"))
}

fn expect_bool(x: &Typed, expr: &Expr) -> Result<(), SqlError> {
    match x.ty {
        SqlType::Boolean | SqlType::Null => Ok(()),
        ref t => Err(type_error(expr, "a BOOLEAN", t)),
    }
}

/// The column (or nested field) `idents` names.
fn column(scope: &Scope, idents: &[Ident]) -> Result<Typed, SqlError> {
    let names: Vec<&str> = idents.iter().map(|i| i.value.as_str()).collect();
    let full = names.join(".");
    // `t.col.field...` or `col.field...`: the longest reading that resolves.
    let mut start = None;
    if names.len() >= 2 {
        if let Some(i) = scope.resolve(Some(names[0]), names[1])? {
            start = Some((i, 2));
        }
    }
    if start.is_none() {
        if let Some(i) = scope.resolve(None, names[0])? {
            start = Some((i, 1));
        }
    }
    let Some((index, used)) = start else {
        let at = idents[0].span.start;
        return Err(SqlError::plan(if at.line > 0 {
            format!(
                "no column named `{full}` (line {}, column {})",
                at.line, at.column
            )
        } else {
            format!("no column named `{full}`")
        }));
    };
    let mut expr = Scalar::Col(index);
    let mut ty = scope.columns[index].ty.clone();
    for field in &names[used..] {
        let SqlType::Row(fields) = &ty else {
            return Err(SqlError::plan(format!(
                "`{full}`: {ty} has no field `{field}`"
            )));
        };
        let Some(pos) = fields.iter().position(|(n, _)| n == field) else {
            return Err(SqlError::plan(format!(
                "`{full}`: the row has no field `{field}`"
            )));
        };
        let next = fields[pos].1.clone();
        expr = Scalar::Field(Box::new(expr), pos);
        ty = next;
    }
    Ok(typed(expr, ty))
}

fn literal(v: &Value) -> Result<Typed, SqlError> {
    Ok(match v {
        Value::Number(n, _) => number(n)?,
        Value::SingleQuotedString(s) | Value::DoubleQuotedString(s) => {
            typed(Scalar::Lit(Datum::str(s)), SqlType::String)
        }
        Value::Boolean(b) => typed(Scalar::Lit(Datum::Bool(*b)), SqlType::Boolean),
        Value::Null => typed(Scalar::Lit(Datum::Null), SqlType::Null),
        other => {
            return Err(SqlError::plan(format!(
                "the literal {other} is not supported"
            )))
        }
    })
}

/// A numeric literal: `INT` if it fits 32 bits, else `BIGINT`; with a point, an exact
/// `DECIMAL` (`0.908` is `DECIMAL(4, 3)` in Flink... its digits and scale here); with an
/// exponent, a `DOUBLE`.
fn number(n: &str) -> Result<Typed, SqlError> {
    let bad = || SqlError::plan(format!("the number {n} is out of range"));
    if n.contains(['e', 'E']) {
        let f: f64 = n.parse().map_err(|_| bad())?;
        return Ok(typed(Scalar::Lit(Datum::Double(f)), SqlType::Double));
    }
    if let Some((int, frac)) = n.split_once('.') {
        let digits = format!("{int}{frac}");
        let unscaled: i64 = if digits.is_empty() {
            0
        } else {
            digits.parse().map_err(|_| bad())?
        };
        let scale = frac.len() as u8;
        let precision = (digits.trim_start_matches('0').len() as u8)
            .max(scale)
            .max(1);
        return Ok(typed(
            Scalar::Lit(Datum::Decimal(unscaled)),
            SqlType::Decimal(precision, scale),
        ));
    }
    let i: i64 = n.parse().map_err(|_| bad())?;
    let ty = if i32::try_from(i).is_ok() {
        SqlType::Int
    } else {
        SqlType::BigInt
    };
    Ok(typed(Scalar::Lit(Datum::Int(i)), ty))
}

/// `v` (an unscaled value at scale `from`) at scale `to ≥ from`, or `None` on overflow.
pub fn rescale(v: i64, from: u8, to: u8) -> Option<i64> {
    if v == 0 {
        return Some(0);
    }
    10i64
        .checked_pow(u32::from(to.saturating_sub(from)))
        .and_then(|p| v.checked_mul(p))
}

/// `v` at scale `from` taken to scale `to`: exact when `to >= from`, else rounded half away
/// from zero (Flink's `HALF_UP`); `None` when it does not fit.
fn round_scale(v: i128, from: u8, to: u8) -> Option<i128> {
    if to >= from {
        return if v == 0 {
            Some(0)
        } else {
            10i128
                .checked_pow(u32::from(to - from))
                .and_then(|p| v.checked_mul(p))
        };
    }
    let Some(p) = 10i128.checked_pow(u32::from(from - to)) else {
        return Some(0);
    };
    let (q, r) = (v / p, v % p);
    Some(if 2 * r.abs() >= p { q + v.signum() } else { q })
}

/// The precision and scale of a numeric type as a DECIMAL.
fn as_decimal(t: &SqlType) -> (u8, u8) {
    match t {
        SqlType::Int => (10, 0),
        SqlType::BigInt => (19, 0),
        SqlType::Decimal(p, s) => (*p, *s),
        _ => (38, 0),
    }
}

/// Whether values of types `a` and `b` can be compared.
fn comparable(a: &SqlType, b: &SqlType) -> bool {
    a == b
        || (a.is_numeric() && b.is_numeric())
        || *a == SqlType::Null
        || *b == SqlType::Null
        || matches!(
            (a, b),
            (SqlType::Timestamp, SqlType::String) | (SqlType::String, SqlType::Timestamp)
        )
}

/// The type both `a` and `b` convert to (CASE branches, COALESCE).
pub fn common_type(a: &SqlType, b: &SqlType) -> Option<SqlType> {
    use SqlType::*;
    Some(match (a, b) {
        (Null, t) | (t, Null) => t.clone(),
        (a, b) if a == b => a.clone(),
        (Int, BigInt) | (BigInt, Int) => BigInt,
        (Double, t) | (t, Double) if t.is_numeric() => Double,
        (a, b) if a.is_numeric() && b.is_numeric() => {
            let (pa, sa) = as_decimal(a);
            let (pb, sb) = as_decimal(b);
            let s = sa.max(sb);
            Decimal(((pa - sa).max(pb - sb) + s).min(38), s)
        }
        _ => return None,
    })
}

/// `x` converted to `ty` (a common type it was found to have with others).
pub fn coerce(x: Typed, ty: &SqlType) -> Typed {
    if &x.ty == ty || x.ty == SqlType::Null {
        return typed(x.expr, ty.clone());
    }
    match (&x.ty, ty) {
        (SqlType::Int, SqlType::BigInt) | (SqlType::BigInt, SqlType::Int) => {
            typed(x.expr, ty.clone())
        }
        _ => {
            let from = x.ty.clone();
            typed(Scalar::Cast(Box::new(x.expr), from, ty.clone()), ty.clone())
        }
    }
}

fn numeric_kind(a: &SqlType, b: &SqlType) -> Numeric {
    use SqlType::*;
    match (a, b) {
        (Double, _) | (_, Double) => Numeric::Double {
            left: a.scale(),
            right: b.scale(),
        },
        (Decimal(..), _) | (_, Decimal(..)) => Numeric::Decimal {
            left: a.scale(),
            right: b.scale(),
            out: a.scale().max(b.scale()),
        },
        _ => Numeric::Int,
    }
}

fn compare(expr: &Expr, op: CmpOp, l: Typed, r: Typed) -> Result<Typed, SqlError> {
    if !comparable(&l.ty, &r.ty) {
        return Err(SqlError::plan(format!(
            "`{expr}`: cannot compare {} with {}",
            l.ty, r.ty
        )));
    }
    // A timestamp compared with a string literal: the literal as a timestamp.
    let (l, r) = match (&l.ty, &r.ty) {
        (SqlType::Timestamp, SqlType::String) => {
            let r = cast(expr, r, SqlType::Timestamp)?;
            (l, r)
        }
        (SqlType::String, SqlType::Timestamp) => (cast(expr, l, SqlType::Timestamp)?, r),
        _ => (l, r),
    };
    let kind = if l.ty.is_numeric() && r.ty.is_numeric() {
        numeric_kind(&l.ty, &r.ty)
    } else if l.ty == SqlType::Timestamp {
        Numeric::Int
    } else {
        Numeric::Other
    };
    Ok(typed(
        Scalar::Cmp(op, kind, Box::new(l.expr), Box::new(r.expr)),
        SqlType::Boolean,
    ))
}

fn binary(expr: &Expr, op: &BinaryOperator, l: Typed, r: Typed) -> Result<Typed, SqlError> {
    let cmp = match op {
        BinaryOperator::Eq => Some(CmpOp::Eq),
        BinaryOperator::NotEq => Some(CmpOp::Ne),
        BinaryOperator::Lt => Some(CmpOp::Lt),
        BinaryOperator::LtEq => Some(CmpOp::Le),
        BinaryOperator::Gt => Some(CmpOp::Gt),
        BinaryOperator::GtEq => Some(CmpOp::Ge),
        _ => None,
    };
    if let Some(op) = cmp {
        return compare(expr, op, l, r);
    }
    match op {
        BinaryOperator::And | BinaryOperator::Or => {
            expect_bool(&l, expr)?;
            expect_bool(&r, expr)?;
            let (a, b) = (Box::new(l.expr), Box::new(r.expr));
            Ok(typed(
                if *op == BinaryOperator::And {
                    Scalar::And(a, b)
                } else {
                    Scalar::Or(a, b)
                },
                SqlType::Boolean,
            ))
        }
        BinaryOperator::StringConcat => call("CONCAT", Func::Concat, vec![l, r]),
        BinaryOperator::Plus
        | BinaryOperator::Minus
        | BinaryOperator::Multiply
        | BinaryOperator::Divide
        | BinaryOperator::Modulo => {
            let aop = match op {
                BinaryOperator::Plus => ArithOp::Add,
                BinaryOperator::Minus => ArithOp::Sub,
                BinaryOperator::Multiply => ArithOp::Mul,
                BinaryOperator::Divide => ArithOp::Div,
                _ => ArithOp::Rem,
            };
            arith(expr, aop, l, r)
        }
        _ => Err(unsupported(expr)),
    }
}

fn arith(expr: &Expr, op: ArithOp, l: Typed, r: Typed) -> Result<Typed, SqlError> {
    use SqlType::*;
    // Timestamps and intervals.
    match (&l.ty, &r.ty, op) {
        (Timestamp, Interval, ArithOp::Add | ArithOp::Sub)
        | (Interval, Timestamp, ArithOp::Add) => {
            return Ok(typed(
                Scalar::Arith(op, Numeric::Int, Box::new(l.expr), Box::new(r.expr)),
                Timestamp,
            ))
        }
        (Interval, Interval, ArithOp::Add | ArithOp::Sub) => {
            return Ok(typed(
                Scalar::Arith(op, Numeric::Int, Box::new(l.expr), Box::new(r.expr)),
                Interval,
            ))
        }
        _ => {}
    }
    let l_ty = if l.ty == Null {
        r.ty.clone()
    } else {
        l.ty.clone()
    };
    let r_ty = if r.ty == Null {
        l_ty.clone()
    } else {
        r.ty.clone()
    };
    if !l_ty.is_numeric() || !r_ty.is_numeric() {
        return Err(SqlError::plan(format!(
            "`{expr}`: arithmetic needs numbers, not {} and {}",
            l.ty, r.ty
        )));
    }
    let kind = numeric_kind(&l_ty, &r_ty);
    let (kind, ty) = match kind {
        Numeric::Double { .. } => (kind, Double),
        Numeric::Int => (
            kind,
            // Flink types `%` as its divisor; other operators as the wider operand.
            if op == ArithOp::Rem {
                r_ty.clone()
            } else if l_ty == BigInt || r_ty == BigInt {
                BigInt
            } else {
                Int
            },
        ),
        Numeric::Decimal { left, right, .. } => {
            let (p1, s1) = as_decimal(&l_ty);
            let (p2, s2) = as_decimal(&r_ty);
            // Flink's (Calcite's) result types of decimal arithmetic.
            let (p, s) = match op {
                ArithOp::Add | ArithOp::Sub => {
                    let s = s1.max(s2);
                    ((p1 - s1).max(p2 - s2) + s + 1, s)
                }
                ArithOp::Mul => (p1 + p2, s1 + s2),
                ArithOp::Div => {
                    let s = 6u8.max(s1 + p2 + 1);
                    (p1 - s1 + s2 + s, s)
                }
                ArithOp::Rem => {
                    let s = s1.max(s2);
                    ((p1 - s1).min(p2 - s2) + s, s)
                }
            };
            let (p, s) = if p > 38 {
                // Keep the integer digits, as Flink does, with at least 6 decimals.
                let s = s.min(s.saturating_sub(p - 38).max(6.min(s)));
                (38, s)
            } else {
                (p, s)
            };
            (
                Numeric::Decimal {
                    left,
                    right,
                    out: s,
                },
                Decimal(p, s),
            )
        }
        Numeric::Other => unreachable!("numeric_kind never gives Other"),
    };
    let node = Scalar::Arith(op, kind, Box::new(l.expr), Box::new(r.expr));
    // An INT result is checked to fit 32 bits.
    let node = if ty == Int {
        Scalar::Cast(Box::new(node), BigInt, Int)
    } else {
        node
    };
    Ok(typed(node, ty))
}

/// The type a `CAST(x AS type)` names.
fn cast_type(t: &sqlparser::ast::DataType) -> Result<SqlType, SqlError> {
    // Re-parse the type's text with Flink's type grammar (the parser's own).
    let dialect = sqlparser::dialect::GenericDialect {};
    let text = t.to_string();
    let mut parser = sqlparser::parser::Parser::new(&dialect)
        .try_with_sql(&text)
        .map_err(SqlError::parse)?;
    crate::parser::data_type(&mut parser).map_err(SqlError::parse)
}

/// `CAST(x AS to)`.
pub fn cast(expr: &Expr, x: Typed, to: SqlType) -> Result<Typed, SqlError> {
    use SqlType::*;
    let ok = matches!(
        (&x.ty, &to),
        (Null, _)
            | (String, _)
            | (_, String)
            | (Boolean, Boolean)
            | (Timestamp, Timestamp)
            | (Timestamp, BigInt)
    ) || (x.ty.is_numeric() && to.is_numeric());
    if !ok {
        return Err(SqlError::plan(format!(
            "`{expr}`: cannot cast {} to {to}",
            x.ty
        )));
    }
    if let (Scalar::Lit(d), String, Timestamp) = (&x.expr, &x.ty, &to) {
        return match d.as_str().and_then(parse_timestamp) {
            Some(ms) => Ok(typed(Scalar::Lit(Datum::Timestamp(ms)), Timestamp)),
            None => Err(SqlError::plan(format!("`{expr}`: not a timestamp"))),
        };
    }
    Ok(coerce(x, &to))
}

impl Scalar {
    /// Evaluates the expression on one row.
    pub fn eval(&self, row: &[Datum]) -> Datum {
        match self {
            Scalar::Col(i) => row.get(*i).cloned().unwrap_or(Datum::Null),
            Scalar::Field(inner, i) => match inner.borrow(row) {
                // A field of a column's row: read in place, without cloning the row.
                Some(Datum::Row(r)) => r.get(*i).cloned().unwrap_or(Datum::Null),
                Some(_) => Datum::Null,
                None => match inner.eval(row) {
                    Datum::Row(r) => r.get(*i).cloned().unwrap_or(Datum::Null),
                    _ => Datum::Null,
                },
            },
            Scalar::Lit(d) => d.clone(),
            Scalar::Arith(op, kind, l, r) => {
                let (a, b) = (l.operand(row), r.operand(row));
                arith_eval(*op, *kind, &a, &b)
            }
            Scalar::Cmp(op, kind, l, r) => {
                let (a, b) = (l.operand(row), r.operand(row));
                match compare_values(*kind, &a, &b) {
                    None => Datum::Null,
                    Some(ord) => Datum::Bool(op.holds(ord)),
                }
            }
            Scalar::And(l, r) => match l.eval(row) {
                Datum::Bool(false) => Datum::Bool(false),
                a => match (a, r.eval(row)) {
                    (_, Datum::Bool(false)) => Datum::Bool(false),
                    (Datum::Bool(true), Datum::Bool(true)) => Datum::Bool(true),
                    _ => Datum::Null,
                },
            },
            Scalar::Or(l, r) => match l.eval(row) {
                Datum::Bool(true) => Datum::Bool(true),
                a => match (a, r.eval(row)) {
                    (_, Datum::Bool(true)) => Datum::Bool(true),
                    (Datum::Bool(false), Datum::Bool(false)) => Datum::Bool(false),
                    _ => Datum::Null,
                },
            },
            Scalar::Not(x) => match x.eval(row) {
                Datum::Bool(b) => Datum::Bool(!b),
                _ => Datum::Null,
            },
            Scalar::Neg(x) => match x.eval(row) {
                Datum::Int(i) => Datum::Int(i.wrapping_neg()),
                Datum::Decimal(i) => i.checked_neg().map_or(Datum::Null, Datum::Decimal),
                Datum::Double(f) => Datum::Double(-f),
                _ => Datum::Null,
            },
            Scalar::IsNull(x, negated) => Datum::Bool(x.operand(row).is_null() != *negated),
            Scalar::Case(branches, otherwise) => {
                for (cond, value) in branches {
                    if cond.test(row) {
                        return value.eval(row);
                    }
                }
                otherwise.eval(row)
            }
            Scalar::InList(x, list, negated) => {
                let v = x.operand(row);
                if v.is_null() {
                    return Datum::Null;
                }
                if list.contains(&*v) {
                    Datum::Bool(!negated)
                } else if list.iter().any(Datum::is_null) {
                    Datum::Null
                } else {
                    Datum::Bool(*negated)
                }
            }
            Scalar::Call(f, args) => {
                // Arguments that stand in the row or the plan (columns, fields, constants)
                // are passed where they are; others are computed first.
                let mut refs: smallvec::SmallVec<[&Datum; 4]> = smallvec::SmallVec::new();
                for a in args {
                    match a.in_place(row) {
                        Some(d) => refs.push(d),
                        None => break,
                    }
                }
                if refs.len() == args.len() {
                    return f.call(&refs);
                }
                let values: smallvec::SmallVec<[std::borrow::Cow<'_, Datum>; 4]> =
                    args.iter().map(|a| a.operand(row)).collect();
                let values: smallvec::SmallVec<[&Datum; 4]> = values.iter().map(|v| &**v).collect();
                f.call(&values)
            }
            Scalar::Cast(x, from, to) => cast_value(x.eval(row), from, to),
            Scalar::ProcTime => Datum::Timestamp(
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_millis() as i64),
            ),
        }
    }

    /// The value of a column or of a field of one, borrowed from `row`; `None` for other
    /// expressions (and for a field of a NULL).
    pub fn borrow<'a>(&self, row: &'a [Datum]) -> Option<&'a Datum> {
        match self {
            Scalar::Col(i) => row.get(*i),
            Scalar::Field(inner, i) => match inner.borrow(row)? {
                Datum::Row(r) => r.get(*i),
                _ => None,
            },
            _ => None,
        }
    }

    /// Calls `f` on each of the expression's direct operands.
    pub fn for_each_operand(&self, f: &mut dyn FnMut(&Scalar)) {
        match self {
            Scalar::Col(_) | Scalar::Lit(_) | Scalar::ProcTime => {}
            Scalar::Field(x, _)
            | Scalar::Not(x)
            | Scalar::Neg(x)
            | Scalar::IsNull(x, _)
            | Scalar::Cast(x, ..)
            | Scalar::InList(x, ..) => f(x),
            Scalar::Arith(_, _, a, b)
            | Scalar::Cmp(_, _, a, b)
            | Scalar::And(a, b)
            | Scalar::Or(a, b) => {
                f(a);
                f(b);
            }
            Scalar::Case(branches, otherwise) => {
                for (c, v) in branches {
                    f(c);
                    f(v);
                }
                f(otherwise);
            }
            Scalar::Call(_, args) => args.iter().for_each(f),
        }
    }

    /// The expression with each direct operand replaced by `f` of it, in order (a leaf is
    /// cloned).
    pub fn map_operands(&self, f: &mut dyn FnMut(&Scalar) -> Scalar) -> Scalar {
        let mut s = |x: &Scalar| Box::new(f(x));
        match self {
            Scalar::Col(_) | Scalar::Lit(_) | Scalar::ProcTime => self.clone(),
            Scalar::Field(x, i) => Scalar::Field(s(x), *i),
            Scalar::Not(x) => Scalar::Not(s(x)),
            Scalar::Neg(x) => Scalar::Neg(s(x)),
            Scalar::IsNull(x, n) => Scalar::IsNull(s(x), *n),
            Scalar::Cast(x, a, b) => Scalar::Cast(s(x), a.clone(), b.clone()),
            Scalar::InList(x, l, n) => Scalar::InList(s(x), l.clone(), *n),
            Scalar::Arith(op, k, a, b) => {
                let a = s(a);
                Scalar::Arith(*op, *k, a, s(b))
            }
            Scalar::Cmp(op, k, a, b) => {
                let a = s(a);
                Scalar::Cmp(*op, *k, a, s(b))
            }
            Scalar::And(a, b) => {
                let a = s(a);
                Scalar::And(a, s(b))
            }
            Scalar::Or(a, b) => {
                let a = s(a);
                Scalar::Or(a, s(b))
            }
            Scalar::Case(branches, otherwise) => {
                let branches = branches.iter().map(|(c, v)| (f(c), f(v))).collect();
                Scalar::Case(branches, Box::new(f(otherwise)))
            }
            Scalar::Call(func, args) => Scalar::Call(func.clone(), args.iter().map(f).collect()),
        }
    }

    /// The value on `row` of an operand of another expression: borrowed where it stands (a
    /// column, a nested field, a constant), computed otherwise. The operator reads it
    /// without a clone.
    #[inline]
    fn operand<'a>(&'a self, row: &'a [Datum]) -> std::borrow::Cow<'a, Datum> {
        use std::borrow::Cow;
        match self {
            Scalar::Lit(d) => Cow::Borrowed(d),
            Scalar::Col(_) | Scalar::Field(..) => match self.borrow(row) {
                Some(d) => Cow::Borrowed(d),
                None => Cow::Owned(self.eval(row)),
            },
            other => Cow::Owned(other.eval(row)),
        }
    }

    /// The value of a constant, or of a column or a field of one, borrowed where it stands;
    /// `None` for other expressions (and for a field of a NULL).
    #[inline]
    fn in_place<'a>(&'a self, row: &'a [Datum]) -> Option<&'a Datum> {
        match self {
            Scalar::Lit(d) => Some(d),
            e => e.borrow(row),
        }
    }

    /// Whether the expression is `TRUE` on `row` (a `WHERE`'s test: `NULL` is not).
    ///
    /// `a AND b` is `TRUE` exactly when both are, and `a OR b` when either is, so these
    /// test their sides without making three-valued results; a comparison of values that
    /// stand in the row compares them in place.
    pub fn test(&self, row: &[Datum]) -> bool {
        match self {
            Scalar::And(a, b) => a.test(row) && b.test(row),
            Scalar::Or(a, b) => a.test(row) || b.test(row),
            Scalar::Cmp(op, kind, l, r) => match (l.in_place(row), r.in_place(row)) {
                (Some(a), Some(b)) => compare_values(*kind, a, b).is_some_and(|ord| op.holds(ord)),
                _ => matches!(self.eval(row), Datum::Bool(true)),
            },
            _ => matches!(self.eval(row), Datum::Bool(true)),
        }
    }
}

fn to_f64(d: &Datum, scale: u8) -> Option<f64> {
    match d {
        Datum::Int(i) => Some(*i as f64),
        Datum::Decimal(i) => Some(*i as f64 / 10f64.powi(i32::from(scale))),
        Datum::Double(f) => Some(*f),
        _ => None,
    }
}

fn arith_eval(op: ArithOp, kind: Numeric, a: &Datum, b: &Datum) -> Datum {
    if a.is_null() || b.is_null() {
        return Datum::Null;
    }
    match kind {
        Numeric::Int => {
            let (Some(x), Some(y)) = (a.as_i64(), b.as_i64()) else {
                return Datum::Null;
            };
            let v = match op {
                // Java's (and so Flink's) integer arithmetic: wrapping.
                ArithOp::Add => Some(x.wrapping_add(y)),
                ArithOp::Sub => Some(x.wrapping_sub(y)),
                ArithOp::Mul => Some(x.wrapping_mul(y)),
                ArithOp::Div if y == 0 => None,
                ArithOp::Div => Some(x.wrapping_div(y)),
                // Java's `%`: i64::MIN % -1 is 0.
                ArithOp::Rem if y == -1 => Some(0),
                ArithOp::Rem => x.checked_rem(y),
            };
            match (v, a) {
                (Some(v), Datum::Timestamp(_)) => Datum::Timestamp(v),
                (Some(v), _) if matches!(b, Datum::Timestamp(_)) => Datum::Timestamp(v),
                (Some(v), _) => Datum::Int(v),
                (None, _) => Datum::Null,
            }
        }
        Numeric::Double { left, right } => {
            let (Some(x), Some(y)) = (to_f64(a, left), to_f64(b, right)) else {
                return Datum::Null;
            };
            Datum::Double(match op {
                ArithOp::Add => x + y,
                ArithOp::Sub => x - y,
                ArithOp::Mul => x * y,
                ArithOp::Div => x / y,
                ArithOp::Rem => x % y,
            })
        }
        Numeric::Decimal { left, right, out } => {
            let (Some(x), Some(y)) = (a.as_i64(), b.as_i64()) else {
                return Datum::Null;
            };
            let (x, y) = (i128::from(x), i128::from(y));
            // The exact result at its own scale (in 128 bits: the operands have at most 19
            // digits), then rounded to the result type's scale.
            let exact = match op {
                ArithOp::Mul => x.checked_mul(y).map(|v| (v, left + right)),
                ArithOp::Add | ArithOp::Sub | ArithOp::Rem => {
                    let s = left.max(right);
                    match (round_scale(x, left, s), round_scale(y, right, s)) {
                        (Some(x), Some(y)) => match op {
                            ArithOp::Add => x.checked_add(y),
                            ArithOp::Sub => x.checked_sub(y),
                            _ => x.checked_rem(y),
                        }
                        .map(|v| (v, s)),
                        // A divisor too large to scale is larger than the dividend: the
                        // remainder is the dividend.
                        (Some(x), None) if op == ArithOp::Rem => Some((x, s)),
                        // A dividend too large to scale: its remainder, a digit at a time
                        // ((r * 10) % y keeps r below |y|).
                        (None, Some(y)) if op == ArithOp::Rem && y != 0 => {
                            let mut r = x % y;
                            let mut ok = true;
                            for _ in 0..s.saturating_sub(left) {
                                match r.checked_mul(10) {
                                    Some(t) => r = t % y,
                                    None => {
                                        ok = false;
                                        break;
                                    }
                                }
                            }
                            ok.then_some((r, s))
                        }
                        _ => None,
                    }
                }
                ArithOp::Div => {
                    // x / 10^left ÷ y / 10^right at scale `out`, rounded half up.
                    if y == 0 {
                        None
                    } else {
                        let shift = i32::from(out) + i32::from(right) - i32::from(left);
                        let (num, den) = if shift >= 0 {
                            (
                                10i128
                                    .checked_pow(shift as u32)
                                    .and_then(|p| x.checked_mul(p)),
                                Some(y),
                            )
                        } else {
                            (
                                Some(x),
                                10i128
                                    .checked_pow((-shift) as u32)
                                    .and_then(|p| y.checked_mul(p)),
                            )
                        };
                        match (num, den) {
                            (Some(n), Some(d)) => {
                                let (q, r) = (n / d, n % d);
                                let q = if 2 * r.abs() >= d.abs() {
                                    q + if (n < 0) != (d < 0) { -1 } else { 1 }
                                } else {
                                    q
                                };
                                Some((q, out))
                            }
                            // A divisor too large to scale: the quotient rounds to zero.
                            (Some(_), None) => Some((0, out)),
                            _ => None,
                        }
                    }
                }
            };
            exact
                .and_then(|(v, scale)| round_scale(v, scale, out))
                .and_then(|v| i64::try_from(v).ok())
                .map_or(Datum::Null, Datum::Decimal)
        }
        Numeric::Other => Datum::Null,
    }
}

/// Orders two non-null values of comparable types; `None` when either is `NULL`.
pub fn compare_values(kind: Numeric, a: &Datum, b: &Datum) -> Option<std::cmp::Ordering> {
    if a.is_null() || b.is_null() {
        return None;
    }
    match kind {
        Numeric::Int => Some(a.as_i64()?.cmp(&b.as_i64()?)),
        Numeric::Decimal { left, right, .. } => {
            let s = left.max(right);
            let (a, b) = (i128::from(a.as_i64()?), i128::from(b.as_i64()?));
            match (round_scale(a, left, s), round_scale(b, right, s)) {
                (Some(x), Some(y)) => Some(x.cmp(&y)),
                // Too large to scale: larger in magnitude than anything the other side holds.
                (None, _) => Some(if a > 0 {
                    std::cmp::Ordering::Greater
                } else {
                    std::cmp::Ordering::Less
                }),
                (_, None) => Some(if b > 0 {
                    std::cmp::Ordering::Less
                } else {
                    std::cmp::Ordering::Greater
                }),
            }
        }
        Numeric::Double { left, right } => to_f64(a, left)?.partial_cmp(&to_f64(b, right)?),
        Numeric::Other => match (a, b) {
            (Datum::Str(x), Datum::Str(y)) => Some(x.cmp(y)),
            (Datum::Bool(x), Datum::Bool(y)) => Some(x.cmp(y)),
            (x, y) if x == y => Some(std::cmp::Ordering::Equal),
            _ => None,
        },
    }
}

/// Converts a value of type `from` to `to` (`NULL` when it does not convert). A `DECIMAL(p, s)`
/// result with more than `p` digits is `NULL`, as Flink's casts give (`CAST(1234 AS
/// DECIMAL(3, 0))`, `CAST(12.345 AS DECIMAL(3, 2))`).
pub fn cast_value(v: Datum, from: &SqlType, to: &SqlType) -> Datum {
    match (convert(v, from, to), to) {
        (Datum::Decimal(d), SqlType::Decimal(p, _)) if !fits_precision(d, *p) => Datum::Null,
        (d, _) => d,
    }
}

/// Whether an unscaled DECIMAL value has at most `precision` digits.
fn fits_precision(unscaled: i64, precision: u8) -> bool {
    match 10i64.checked_pow(u32::from(precision)) {
        Some(limit) => unscaled.unsigned_abs() < limit.unsigned_abs(),
        // 19 digits or more: any i64.
        None => true,
    }
}

/// [`cast_value`] before the precision check.
fn convert(v: Datum, from: &SqlType, to: &SqlType) -> Datum {
    use SqlType::*;
    if v.is_null() {
        return v;
    }
    match (from, to, v) {
        (String, t, Datum::Str(s)) if *t != String => parse_text(&s, t),
        (_, String, d) => {
            let mut out = std::string::String::new();
            crate::format::write_text(&d, from, &mut out);
            Datum::Str(out.into())
        }
        (Decimal(_, s), Decimal(_, t), Datum::Decimal(i)) => {
            if t >= s {
                rescale(i, *s, *t).map_or(Datum::Null, Datum::Decimal)
            } else {
                // Round half up, as Flink's decimal casts.
                let p = 10i64.pow(u32::from(s - t));
                let q = i / p;
                let r = i % p;
                Datum::Decimal(if 2 * r.abs() >= p { q + i.signum() } else { q })
            }
        }
        (f, Decimal(_, t), Datum::Int(i)) if f.is_integer() => {
            rescale(i, 0, *t).map_or(Datum::Null, Datum::Decimal)
        }
        (Decimal(_, s), t, Datum::Decimal(i)) if t.is_integer() => {
            Datum::Int(i / 10i64.pow(u32::from(*s)))
        }
        (f, Double, d) => to_f64(&d, f.scale()).map_or(Datum::Null, Datum::Double),
        (Double, t, Datum::Double(f)) if t.is_integer() => {
            if f.is_finite() && f.abs() < 9.2e18 {
                Datum::Int(f.trunc() as i64)
            } else {
                Datum::Null
            }
        }
        (Double, Decimal(_, t), Datum::Double(f)) => {
            let scaled = (f * 10f64.powi(i32::from(*t))).round();
            if scaled.is_finite() && scaled.abs() < 9.2e18 {
                Datum::Decimal(scaled as i64)
            } else {
                Datum::Null
            }
        }
        // To INT, as Java's `(int)`: the low 32 bits (INT arithmetic wraps around so).
        (_, Int, Datum::Int(i)) => Datum::Int(i64::from(i as i32)),
        (a, b, d) if a.is_integer() && b.is_integer() => d,
        (Timestamp, BigInt, Datum::Timestamp(ms)) => Datum::Int(ms.div_euclid(1000)),
        (_, _, d) if from == to => d,
        _ => Datum::Null,
    }
}

/// A string converted to `to`, as `CAST(s AS to)` (`NULL` if it does not parse).
fn parse_text(s: &str, to: &SqlType) -> Datum {
    let s = s.trim();
    match to {
        SqlType::Int | SqlType::BigInt => s.parse().map_or(Datum::Null, Datum::Int),
        SqlType::Double => s.parse().map_or(Datum::Null, Datum::Double),
        SqlType::Boolean => match s.to_ascii_lowercase().as_str() {
            "true" => Datum::Bool(true),
            "false" => Datum::Bool(false),
            _ => Datum::Null,
        },
        SqlType::Timestamp => parse_timestamp(s).map_or(Datum::Null, Datum::Timestamp),
        SqlType::Decimal(..) => match number(s) {
            Ok(Typed {
                expr: Scalar::Lit(d),
                ty,
            }) => cast_value(d, &ty, to),
            _ => Datum::Null,
        },
        _ => Datum::Null,
    }
}
