//! Spate's compiled scalar expressions against an oracle: random expression trees over a
//! small row, bound with the crate's binder ([`spate_sql::expr::bind`]) and evaluated
//! ([`Scalar::eval`](spate_sql::expr::Scalar::eval)) on random rows, must give what a naive
//! tree-walking interpreter written here from SQL's rules gives: the same value, and (in a
//! property of its own) the same type.
//!
//! The row is `a BIGINT, b BIGINT, s STRING, f BOOLEAN, g BOOLEAN`, with NULLs, `i64`
//! edge values and zeros. Expressions use integer and DECIMAL literals, `+ - * / %`, unary
//! minus, comparisons, `AND`/`OR`/`NOT`, `IS [NOT] NULL`, searched `CASE`, `COALESCE`,
//! `||` and typed NULLs (`CAST(NULL AS BIGINT)`), rendered as SQL text and parsed with
//! `sqlparser` (the crate's own parser has no bare expressions).
//!
//! The oracle's rules, independent of Spate's code:
//!
//! * NULL propagates through operators; `AND`/`OR`/`NOT` are three-valued; `CASE` takes the
//!   first branch whose condition is TRUE; `COALESCE` the first non-NULL argument; both
//!   convert the value to the branches' common type.
//! * Integers: computed exactly (in `i128`), then wrapped around to their type's width (the
//!   low 64 bits for a `BIGINT`, 32 for an `INT`), as Java's and so Flink's arithmetic. `/`
//!   truncates toward zero, `%` has the sign of the dividend, a division by zero is NULL
//!   (where Flink's job fails: a known difference, see `expr.rs`).
//! * DECIMALs: exact, on an unscaled `i64` (NULL past it, as `types.rs` documents), with
//!   Flink's result types (`LogicalTypeMerging`: `+ -`: scale `max(s1, s2)`, precision
//!   `max(p1 - s1, p2 - s2) + s + 1`; `*`: `p1 + p2`, `s1 + s2`; `/`: scale
//!   `max(6, s1 + p2 + 1)`, precision `p1 - s1 + s2 + s`; `%`: `min(p1 - s1, p2 - s2) + s`,
//!   `max(s1, s2)`; past 38 digits the precision is 38 and the scale
//!   `max(38 - integer digits, min(s, 6))`), the exact result rounded half up to the result
//!   scale. An `INT` is a `DECIMAL(10, 0)` there, a `BIGINT` a `DECIMAL(19, 0)`.
//! * Types as Flink's: an integer literal is an `INT` if it fits 32 bits, else a `BIGINT`;
//!   `INT op INT` is an `INT`, with a `BIGINT` a `BIGINT`, except `%`, whose integer type is
//!   its right operand's (Calcite's `%`); a decimal literal's precision is its digits.
//!
//! On a mismatch proptest shrinks the case and prints the SQL text and the row; the message
//! names the smallest subexpression that mismatches on that row first (proptest's shrinking
//! does not replace a tree by one of its subtrees). Where Spate's type differs from Flink's
//! (the type property's failure), the value properties compare numbers by value.

use std::cmp::Ordering;

use proptest::prelude::*;
use proptest::strategy::Union;
use proptest::test_runner::FileFailurePersistence;
use spate_sql::calc::Calc;
use spate_sql::catalog::Catalog;
use spate_sql::expr::{bind, Column, Scope};
use spate_sql::{Datum, SqlType};
use sqlparser::dialect::GenericDialect;
use sqlparser::parser::Parser;

// ---- Expressions and their SQL text ------------------------------------------------------

/// An oracle type (Flink's logical types of the generated expressions).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum T {
    Int,
    BigInt,
    Dec(u8, u8),
    Bool,
    Str,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Add,
    Sub,
    Mul,
    Div,
    Rem,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cmp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

/// A generated expression.
#[derive(Debug, Clone)]
enum E {
    /// A column of the row: 0 `a`, 1 `b`, 2 `s`, 3 `f`, 4 `g`.
    Col(usize),
    Int(i64),
    Dec(&'static str),
    Str(&'static str),
    Bool(bool),
    /// `CAST(NULL AS type)`.
    Null(T),
    Neg(Box<E>),
    Arith(Op, Box<E>, Box<E>),
    Cmp(Cmp, Box<E>, Box<E>),
    And(Box<E>, Box<E>),
    Or(Box<E>, Box<E>),
    Not(Box<E>),
    /// `x IS NULL`, or `x IS NOT NULL` when `true`.
    IsNull(Box<E>, bool),
    Case(Vec<(E, E)>, Option<Box<E>>),
    Coalesce(Vec<E>),
    Concat(Box<E>, Box<E>),
}

const COLUMNS: [(&str, T); 5] = [
    ("a", T::BigInt),
    ("b", T::BigInt),
    ("s", T::Str),
    ("f", T::Bool),
    ("g", T::Bool),
];

fn type_sql(t: T) -> String {
    match t {
        T::Int => "INT".into(),
        T::BigInt => "BIGINT".into(),
        T::Dec(p, s) => format!("DECIMAL({p}, {s})"),
        T::Bool => "BOOLEAN".into(),
        T::Str => "STRING".into(),
    }
}

impl E {
    /// The expression as SQL text, every operation in parentheses.
    fn sql(&self) -> String {
        match self {
            E::Col(i) => COLUMNS[*i].0.into(),
            E::Int(v) if *v < 0 => format!("(-{})", v.unsigned_abs()),
            E::Int(v) => v.to_string(),
            E::Dec(text) => (*text).into(),
            E::Str(s) => format!("'{}'", s.replace('\'', "''")),
            E::Bool(b) => if *b { "TRUE" } else { "FALSE" }.into(),
            E::Null(t) => format!("CAST(NULL AS {})", type_sql(*t)),
            E::Neg(x) => format!("(-{})", x.sql()),
            E::Arith(op, l, r) => {
                let op = match op {
                    Op::Add => "+",
                    Op::Sub => "-",
                    Op::Mul => "*",
                    Op::Div => "/",
                    Op::Rem => "%",
                };
                format!("({} {op} {})", l.sql(), r.sql())
            }
            E::Cmp(op, l, r) => {
                let op = match op {
                    Cmp::Eq => "=",
                    Cmp::Ne => "<>",
                    Cmp::Lt => "<",
                    Cmp::Le => "<=",
                    Cmp::Gt => ">",
                    Cmp::Ge => ">=",
                };
                format!("({} {op} {})", l.sql(), r.sql())
            }
            E::And(l, r) => format!("({} AND {})", l.sql(), r.sql()),
            E::Or(l, r) => format!("({} OR {})", l.sql(), r.sql()),
            E::Not(x) => format!("(NOT {})", x.sql()),
            E::IsNull(x, negated) => format!(
                "({} IS {}NULL)",
                x.sql(),
                if *negated { "NOT " } else { "" }
            ),
            E::Case(branches, otherwise) => {
                let mut out = String::from("CASE");
                for (c, v) in branches {
                    out.push_str(&format!(" WHEN {} THEN {}", c.sql(), v.sql()));
                }
                if let Some(e) = otherwise {
                    out.push_str(&format!(" ELSE {}", e.sql()));
                }
                out.push_str(" END");
                out
            }
            E::Coalesce(args) => format!(
                "COALESCE({})",
                args.iter().map(E::sql).collect::<Vec<_>>().join(", ")
            ),
            E::Concat(l, r) => format!("({} || {})", l.sql(), r.sql()),
        }
    }
}

// ---- The oracle: types -------------------------------------------------------------------

/// A numeric type as a DECIMAL's precision and scale.
fn as_decimal(t: T) -> (u8, u8) {
    match t {
        T::Int => (10, 0),
        T::BigInt => (19, 0),
        T::Dec(p, s) => (p, s),
        other => panic!("{other:?} is not numeric"),
    }
}

fn is_integer(t: T) -> bool {
    matches!(t, T::Int | T::BigInt)
}

/// Flink's `LogicalTypeMerging.adjustPrecisionScale`.
fn adjust(p: i32, s: i32) -> T {
    if p <= 38 {
        return T::Dec(p as u8, s as u8);
    }
    let digits = p - s;
    let scale = (38 - digits).max(s.min(6));
    T::Dec(38, scale as u8)
}

/// A decimal literal's type: its digits (without leading zeros) and its decimals.
fn literal_type(text: &str) -> T {
    let (int, frac) = text.split_once('.').expect("a decimal literal has a point");
    let digits = format!("{int}{frac}");
    let significant = digits.trim_start_matches('0').len();
    let scale = frac.len();
    T::Dec(significant.max(scale).max(1) as u8, scale as u8)
}

/// The type two branches (of CASE, COALESCE) meet in.
fn common(a: T, b: T) -> T {
    match (a, b) {
        (x, y) if x == y => x,
        (T::Int, T::BigInt) | (T::BigInt, T::Int) => T::BigInt,
        (x, y) => {
            let (px, sx) = as_decimal(x);
            let (py, sy) = as_decimal(y);
            let s = sx.max(sy);
            T::Dec(((px - sx).max(py - sy) + s).min(38), s)
        }
    }
}

fn arith_type(op: Op, l: T, r: T) -> T {
    if is_integer(l) && is_integer(r) {
        return match op {
            // Calcite's `%`: the type of the divisor.
            Op::Rem => r,
            _ if l == T::BigInt || r == T::BigInt => T::BigInt,
            _ => T::Int,
        };
    }
    let (p1, s1) = as_decimal(l);
    let (p2, s2) = as_decimal(r);
    let (p1, s1, p2, s2) = (i32::from(p1), i32::from(s1), i32::from(p2), i32::from(s2));
    match op {
        Op::Add | Op::Sub => {
            let s = s1.max(s2);
            adjust((p1 - s1).max(p2 - s2) + s + 1, s)
        }
        Op::Mul => adjust(p1 + p2, s1 + s2),
        Op::Div => {
            let s = 6.max(s1 + p2 + 1);
            adjust(p1 - s1 + s2 + s, s)
        }
        Op::Rem => {
            let s = s1.max(s2);
            adjust((p1 - s1).min(p2 - s2) + s, s)
        }
    }
}

/// The oracle's type of `e`.
fn type_of(e: &E) -> T {
    match e {
        E::Col(i) => COLUMNS[*i].1,
        E::Int(v) if i32::try_from(*v).is_ok() => T::Int,
        E::Int(_) => T::BigInt,
        E::Dec(text) => literal_type(text),
        E::Str(_) | E::Concat(..) => T::Str,
        E::Bool(_) | E::Cmp(..) | E::And(..) | E::Or(..) | E::Not(_) | E::IsNull(..) => T::Bool,
        E::Null(t) => *t,
        E::Neg(x) => type_of(x),
        E::Arith(op, l, r) => arith_type(*op, type_of(l), type_of(r)),
        E::Case(branches, otherwise) => {
            let mut t = type_of(&branches[0].1);
            for (_, v) in &branches[1..] {
                t = common(t, type_of(v));
            }
            if let Some(e) = otherwise {
                t = common(t, type_of(e));
            }
            t
        }
        E::Coalesce(args) => args[1..]
            .iter()
            .fold(type_of(&args[0]), |t, a| common(t, type_of(a))),
    }
}

fn sql_type(t: T) -> SqlType {
    match t {
        T::Int => SqlType::Int,
        T::BigInt => SqlType::BigInt,
        T::Dec(p, s) => SqlType::Decimal(p, s),
        T::Bool => SqlType::Boolean,
        T::Str => SqlType::String,
    }
}

// ---- The oracle: values ------------------------------------------------------------------

/// An oracle value: a number is its unscaled value and its scale (0 for integers).
#[derive(Debug, Clone, PartialEq)]
enum V {
    Null,
    Num(i128, u8),
    Bool(bool),
    Str(String),
}

/// The row: `a`, `b`, `s`, `f`, `g`.
#[derive(Debug, Clone)]
struct Row {
    a: Option<i64>,
    b: Option<i64>,
    s: Option<&'static str>,
    f: Option<bool>,
    g: Option<bool>,
}

impl Row {
    fn datums(&self) -> Vec<Datum> {
        vec![
            self.a.map_or(Datum::Null, Datum::Int),
            self.b.map_or(Datum::Null, Datum::Int),
            self.s.map_or(Datum::Null, Datum::str),
            self.f.map_or(Datum::Null, Datum::Bool),
            self.g.map_or(Datum::Null, Datum::Bool),
        ]
    }
}

fn pow10(n: u32) -> Option<i128> {
    10i128.checked_pow(n)
}

/// `v`, a value at scale `from`, at scale `to`: exact when `to >= from` (`None` past
/// `i128`), else rounded half up (away from zero on a tie).
fn rescale(v: i128, from: u8, to: u8) -> Option<i128> {
    if to >= from {
        return pow10(u32::from(to - from)).and_then(|p| v.checked_mul(p));
    }
    match pow10(u32::from(from - to)) {
        Some(p) => Some(div_half_up(v, p)),
        // 10^39 or more: |v| < 2^127 is less than half of it.
        None => Some(0),
    }
}

/// `n / d` rounded half up (ties away from zero).
fn div_half_up(n: i128, d: i128) -> i128 {
    let q = n / d;
    let r = n % d;
    if r.unsigned_abs() * 2 >= d.unsigned_abs() {
        q + if (n < 0) == (d < 0) { 1 } else { -1 }
    } else {
        q
    }
}

/// `v` as a value of type `t`: an integer wrapped to its width; a DECIMAL NULL unless it
/// fits an `i64` (and its precision).
fn fit(v: V, t: T) -> V {
    match (v, t) {
        (V::Num(x, s), T::Int | T::BigInt) => {
            assert_eq!(s, 0, "an integer-typed value has scale 0");
            // Java's integer arithmetic wraps around: the exact result's low 32 or 64 bits.
            if t == T::Int {
                V::Num(i128::from(x as i32), 0)
            } else {
                V::Num(i128::from(x as i64), 0)
            }
        }
        (V::Num(x, s), T::Dec(p, scale)) => {
            let Some(x) = rescale(x, s, scale) else {
                return V::Null;
            };
            let within = pow10(u32::from(p)).is_none_or(|limit| x.abs() < limit);
            if i64::try_from(x).is_ok() && within {
                V::Num(x, scale)
            } else {
                V::Null
            }
        }
        (v, _) => v,
    }
}

/// Exact `x / 10^sx` vs `y / 10^sy`, both unscaled values that fit an `i64`.
fn compare_numbers(x: i128, sx: u8, y: i128, sy: u8) -> Ordering {
    match sx.cmp(&sy) {
        Ordering::Equal => x.cmp(&y),
        Ordering::Less => match rescale(x, sx, sy) {
            Some(x) => x.cmp(&y),
            // Past 2^127: larger in magnitude than any i64, so its sign decides.
            None => x.cmp(&0),
        },
        Ordering::Greater => compare_numbers(y, sy, x, sx).reverse(),
    }
}

/// `base^exp mod m` (`m > 0`, below 2^63).
fn pow_mod(base: u128, mut exp: u32, m: u128) -> u128 {
    let mut result = 1 % m;
    let mut b = base % m;
    while exp > 0 {
        if exp & 1 == 1 {
            result = result * b % m;
        }
        b = b * b % m;
        exp >>= 1;
    }
    result
}

/// The remainder (sign of the dividend) of `x / 10^sx` by `y / 10^sy`, at scale
/// `max(sx, sy)`; `y != 0`.
fn remainder(x: i128, sx: u8, y: i128, sy: u8) -> i128 {
    let m = sx.max(sy);
    if sx < m {
        // x * 10^k rem y, also when x * 10^k is past i128.
        let k = u32::from(m - sx);
        let modulus = y.unsigned_abs();
        let r = x.unsigned_abs() % modulus * pow_mod(10, k, modulus) % modulus;
        let r = r as i128;
        if x < 0 {
            -r
        } else {
            r
        }
    } else if sy < m {
        match rescale(y, sy, m) {
            Some(y) => x % y,
            // |y| past 2^127 is more than |x|.
            None => x,
        }
    } else {
        x % y
    }
}

fn arith(op: Op, l: V, r: V, out: T) -> V {
    let (V::Num(x, sx), V::Num(y, sy)) = (l, r) else {
        return V::Null;
    };
    let T::Dec(_, s) = out else {
        // Integers, exact in i128 (the operands fit i64).
        return V::Num(
            match op {
                Op::Add => x + y,
                Op::Sub => x - y,
                Op::Mul => x * y,
                Op::Div if y == 0 => return V::Null,
                Op::Div => x / y,
                Op::Rem if y == 0 => return V::Null,
                Op::Rem => x % y,
            },
            0,
        );
    };
    let exact = match op {
        Op::Add | Op::Sub => {
            let m = sx.max(sy);
            // One operand is rescaled; past i128 the result is past i64 too.
            let (Some(x), Some(y)) = (rescale(x, sx, m), rescale(y, sy, m)) else {
                return V::Null;
            };
            let v = if op == Op::Add { x + y } else { x - y };
            rescale(v, m, s)
        }
        Op::Mul => rescale(x * y, sx + sy, s),
        Op::Div => {
            if y == 0 {
                return V::Null;
            }
            // (x / 10^sx) / (y / 10^sy) * 10^s = x * 10^(s + sy - sx) / y.
            let shift = i32::from(s) + i32::from(sy) - i32::from(sx);
            if shift >= 0 {
                // Past i128, the quotient is past i64 (|y| < 2^63).
                pow10(shift as u32)
                    .and_then(|p| x.checked_mul(p))
                    .map(|n| div_half_up(n, y))
            } else {
                match pow10((-shift) as u32).and_then(|p| y.checked_mul(p)) {
                    Some(d) => Some(div_half_up(x, d)),
                    // A divisor past 2^127 is more than twice |x|.
                    None => Some(0),
                }
            }
        }
        Op::Rem => {
            if y == 0 {
                return V::Null;
            }
            rescale(remainder(x, sx, y, sy), sx.max(sy), s)
        }
    };
    exact.map_or(V::Null, |v| V::Num(v, s))
}

fn compare(op: Cmp, l: &V, r: &V) -> V {
    let ord = match (l, r) {
        (V::Num(x, sx), V::Num(y, sy)) => compare_numbers(*x, *sx, *y, *sy),
        (V::Str(x), V::Str(y)) => x.cmp(y),
        (V::Bool(x), V::Bool(y)) => x.cmp(y),
        _ => return V::Null,
    };
    V::Bool(match op {
        Cmp::Eq => ord.is_eq(),
        Cmp::Ne => ord.is_ne(),
        Cmp::Lt => ord.is_lt(),
        Cmp::Le => ord.is_le(),
        Cmp::Gt => ord.is_gt(),
        Cmp::Ge => ord.is_ge(),
    })
}

/// The oracle's value of `e` on `row`.
fn eval(e: &E, row: &Row) -> V {
    let t = type_of(e);
    let v = match e {
        E::Col(0) => row.a.map_or(V::Null, |v| V::Num(v.into(), 0)),
        E::Col(1) => row.b.map_or(V::Null, |v| V::Num(v.into(), 0)),
        E::Col(2) => row.s.map_or(V::Null, |s| V::Str(s.into())),
        E::Col(3) => row.f.map_or(V::Null, V::Bool),
        E::Col(_) => row.g.map_or(V::Null, V::Bool),
        E::Int(v) => V::Num((*v).into(), 0),
        E::Dec(text) => {
            let (int, frac) = text.split_once('.').expect("a decimal literal has a point");
            V::Num(
                format!("{int}{frac}").parse().expect("digits"),
                frac.len() as u8,
            )
        }
        E::Str(s) => V::Str((*s).into()),
        E::Bool(b) => V::Bool(*b),
        E::Null(_) => V::Null,
        E::Neg(x) => match eval(x, row) {
            V::Num(v, s) => V::Num(-v, s),
            _ => V::Null,
        },
        E::Arith(op, l, r) => arith(*op, eval(l, row), eval(r, row), t),
        E::Cmp(op, l, r) => compare(*op, &eval(l, row), &eval(r, row)),
        E::And(l, r) => match (eval(l, row), eval(r, row)) {
            (V::Bool(false), _) | (_, V::Bool(false)) => V::Bool(false),
            (V::Bool(true), V::Bool(true)) => V::Bool(true),
            _ => V::Null,
        },
        E::Or(l, r) => match (eval(l, row), eval(r, row)) {
            (V::Bool(true), _) | (_, V::Bool(true)) => V::Bool(true),
            (V::Bool(false), V::Bool(false)) => V::Bool(false),
            _ => V::Null,
        },
        E::Not(x) => match eval(x, row) {
            V::Bool(b) => V::Bool(!b),
            _ => V::Null,
        },
        E::IsNull(x, negated) => V::Bool((eval(x, row) == V::Null) != *negated),
        E::Case(branches, otherwise) => branches
            .iter()
            .find(|(c, _)| eval(c, row) == V::Bool(true))
            .map(|(_, v)| fit(eval(v, row), t))
            .or_else(|| otherwise.as_ref().map(|e| fit(eval(e, row), t)))
            .unwrap_or(V::Null),
        E::Coalesce(args) => args
            .iter()
            .map(|a| eval(a, row))
            .find(|v| *v != V::Null)
            .map_or(V::Null, |v| fit(v, t)),
        E::Concat(l, r) => match (eval(l, row), eval(r, row)) {
            (V::Str(x), V::Str(y)) => V::Str(x + &y),
            _ => V::Null,
        },
    };
    fit(v, t)
}

/// The oracle's value as the datum Spate should give.
fn datum(v: V, t: T) -> Datum {
    match (v, t) {
        (V::Null, _) => Datum::Null,
        (V::Num(x, _), T::Dec(..)) => Datum::Decimal(x as i64),
        (V::Num(x, _), _) => Datum::Int(x as i64),
        (V::Bool(b), _) => Datum::Bool(b),
        (V::Str(s), _) => Datum::str(&s),
    }
}

// ---- Spate -------------------------------------------------------------------------------

/// `text` bound over the row's columns: its compiled expression and type.
fn compile(text: &str) -> Result<spate_sql::expr::Typed, String> {
    let expr = Parser::new(&GenericDialect {})
        .try_with_sql(text)
        .and_then(|mut p| p.parse_expr())
        .map_err(|e| format!("does not parse: {e}"))?;
    let scope = Scope::new(
        COLUMNS
            .iter()
            .map(|(name, t)| Column {
                qualifier: None,
                name: (*name).into(),
                ty: sql_type(*t),
            })
            .collect(),
    );
    bind(&expr, &scope, &Catalog::default()).map_err(|e| format!("does not bind: {e}"))
}

// ---- Generators --------------------------------------------------------------------------

/// Which kinds of expressions to generate.
#[derive(Clone, Copy)]
struct Kinds {
    decimals: bool,
    strings: bool,
}

/// Strategies of numeric, boolean and string expressions.
#[derive(Clone)]
struct Gens {
    num: BoxedStrategy<E>,
    boolean: BoxedStrategy<E>,
    string: BoxedStrategy<E>,
}

fn union(options: Vec<(u32, BoxedStrategy<E>)>) -> BoxedStrategy<E> {
    Union::new_weighted(options).boxed()
}

fn leaves(k: Kinds) -> Gens {
    let ints = prop_oneof![
        4 => -9i64..=9,
        1 => prop::sample::select(vec![
            i64::MAX,
            -i64::MAX,
            2_147_483_647,
            2_147_483_648,
            1000,
            100_000,
        ]),
    ]
    .prop_map(E::Int);
    let mut num = vec![
        (3, Just(E::Col(0)).boxed()),
        (3, Just(E::Col(1)).boxed()),
        (3, ints.boxed()),
        (1, Just(E::Null(T::BigInt)).boxed()),
    ];
    if k.decimals {
        num.push((
            3,
            prop::sample::select(vec![
                "0.5", "1.25", "0.908", "2.0", "10.00", "0.001", "123.456", "7.5",
            ])
            .prop_map(E::Dec)
            .boxed(),
        ));
        num.push((1, Just(E::Null(T::Dec(5, 2))).boxed()));
    }
    let boolean = prop_oneof![
        3 => Just(E::Col(3)),
        3 => Just(E::Col(4)),
        1 => any::<bool>().prop_map(E::Bool),
        1 => Just(E::Null(T::Bool)),
    ]
    .boxed();
    let string = prop_oneof![
        3 => Just(E::Col(2)),
        2 => prop::sample::select(vec!["", "a", "abc", "B", "é"]).prop_map(E::Str),
        1 => Just(E::Null(T::Str)),
    ]
    .boxed();
    Gens {
        num: union(num),
        boolean,
        string,
    }
}

fn op() -> impl Strategy<Value = Op> {
    prop::sample::select(vec![Op::Add, Op::Sub, Op::Mul, Op::Div, Op::Rem])
}

fn cmp() -> impl Strategy<Value = Cmp> {
    prop::sample::select(vec![Cmp::Eq, Cmp::Ne, Cmp::Lt, Cmp::Le, Cmp::Gt, Cmp::Ge])
}

/// `CASE` over `values`, with conditions from `conditions`.
fn case(conditions: BoxedStrategy<E>, values: BoxedStrategy<E>) -> BoxedStrategy<E> {
    (
        prop::collection::vec((conditions, values.clone()), 1..=2),
        prop::option::of(values),
    )
        .prop_map(|(branches, otherwise)| E::Case(branches, otherwise.map(Box::new)))
        .boxed()
}

fn coalesce(values: BoxedStrategy<E>) -> BoxedStrategy<E> {
    prop::collection::vec(values, 2..=3)
        .prop_map(E::Coalesce)
        .boxed()
}

/// One level of expressions over the level below.
fn level(k: Kinds, below: &Gens) -> Gens {
    let leaf = leaves(k);
    let (n, b, s) = (&below.num, &below.boolean, &below.string);
    let bx = Box::new;
    let num = union(vec![
        (2, leaf.num),
        (1, n.clone().prop_map(move |x| E::Neg(bx(x))).boxed()),
        (
            7,
            (op(), n.clone(), n.clone())
                .prop_map(move |(o, l, r)| E::Arith(o, bx(l), bx(r)))
                .boxed(),
        ),
        (2, case(b.clone(), n.clone())),
        (1, coalesce(n.clone())),
    ]);
    let mut boolean = vec![
        (2, leaf.boolean),
        (
            4,
            (cmp(), n.clone(), n.clone())
                .prop_map(move |(o, l, r)| E::Cmp(o, bx(l), bx(r)))
                .boxed(),
        ),
        (
            1,
            (cmp(), b.clone(), b.clone())
                .prop_map(move |(o, l, r)| E::Cmp(o, bx(l), bx(r)))
                .boxed(),
        ),
        (
            2,
            (b.clone(), b.clone())
                .prop_map(move |(l, r)| E::And(bx(l), bx(r)))
                .boxed(),
        ),
        (
            2,
            (b.clone(), b.clone())
                .prop_map(move |(l, r)| E::Or(bx(l), bx(r)))
                .boxed(),
        ),
        (1, b.clone().prop_map(move |x| E::Not(bx(x))).boxed()),
        (
            2,
            (prop_oneof![n.clone(), b.clone(), s.clone()], any::<bool>())
                .prop_map(move |(x, negated)| E::IsNull(bx(x), negated))
                .boxed(),
        ),
        (1, case(b.clone(), b.clone())),
        (1, coalesce(b.clone())),
    ];
    let mut string = vec![(2, leaf.string)];
    if k.strings {
        boolean.push((
            2,
            (cmp(), s.clone(), s.clone())
                .prop_map(move |(o, l, r)| E::Cmp(o, bx(l), bx(r)))
                .boxed(),
        ));
        string.push((
            2,
            (s.clone(), s.clone())
                .prop_map(move |(l, r)| E::Concat(bx(l), bx(r)))
                .boxed(),
        ));
        string.push((1, case(b.clone(), s.clone())));
        string.push((1, coalesce(s.clone())));
    }
    Gens {
        num,
        boolean: union(boolean),
        string: union(string),
    }
}

/// Expressions of at most `depth` levels of operators.
fn gens(k: Kinds, depth: usize) -> Gens {
    let mut g = leaves(k);
    for _ in 0..depth {
        g = level(k, &g);
    }
    g
}

/// Any expression of `k` (numeric, boolean or, with strings, string).
fn expression(k: Kinds, depth: usize) -> BoxedStrategy<E> {
    let g = gens(k, depth);
    if k.strings {
        prop_oneof![3 => g.num, 2 => g.boolean, 1 => g.string].boxed()
    } else {
        prop_oneof![3 => g.num, 1 => g.boolean].boxed()
    }
}

fn int_value() -> impl Strategy<Value = Option<i64>> {
    prop_oneof![
        1 => Just(None),
        2 => prop::sample::select(vec![
            i64::MIN,
            i64::MIN + 1,
            i64::MAX,
            i64::MAX - 1,
            -1,
            0,
            1,
            2,
            1000,
            -1000,
            3_037_000_500,
            1 << 40,
        ])
        .prop_map(Some),
        3 => (-20i64..=20).prop_map(Some),
        1 => any::<i64>().prop_map(Some),
    ]
}

fn row() -> impl Strategy<Value = Row> {
    (
        int_value(),
        int_value(),
        prop::option::of(prop::sample::select(vec!["", "a", "abc", "B", "é"])),
        prop::option::of(any::<bool>()),
        prop::option::of(any::<bool>()),
    )
        .prop_map(|(a, b, s, f, g)| Row { a, b, s, f, g })
}

// ---- The properties ----------------------------------------------------------------------

impl E {
    /// The expression's subexpressions, itself included.
    fn subtrees(&self) -> Vec<&E> {
        let mut out = vec![self];
        let children: Vec<&E> = match self {
            E::Neg(x) | E::Not(x) | E::IsNull(x, _) => vec![x],
            E::Arith(_, l, r) | E::Cmp(_, l, r) | E::And(l, r) | E::Or(l, r) | E::Concat(l, r) => {
                vec![l, r]
            }
            E::Case(branches, otherwise) => branches
                .iter()
                .flat_map(|(c, v)| [c, v])
                .chain(otherwise.as_deref())
                .collect(),
            E::Coalesce(args) => args.iter().collect(),
            _ => Vec::new(),
        };
        for c in children {
            out.extend(c.subtrees());
        }
        out
    }
}

/// A numeric datum of type `t` as its value in lowest terms: (unscaled, scale) with no
/// trailing zero.
fn number(d: &Datum, t: &SqlType) -> Option<(i128, u8)> {
    let (mut v, mut s) = match d {
        Datum::Int(i) => (i128::from(*i), 0),
        Datum::Decimal(i) => (i128::from(*i), t.scale()),
        _ => return None,
    };
    while s > 0 && v % 10 == 0 {
        v /= 10;
        s -= 1;
    }
    Some((v, s))
}

/// Why Spate's value of `e` on `row` is not the oracle's, if it is not.
fn value_mismatch(e: &E, row: &Row) -> Option<String> {
    let text = e.sql();
    let compiled = match compile(&text) {
        Ok(c) => c,
        Err(m) => return Some(format!("`{text}` {m}")),
    };
    let expected = datum(eval(e, row), type_of(e));
    let actual = compiled.expr.eval(&row.datums());
    // A condition's test (a WHERE's, a CASE branch's) is TRUE exactly where the value is.
    if type_of(e) == T::Bool {
        let tested = compiled.expr.test(&row.datums());
        if tested != (expected == Datum::Bool(true)) {
            return Some(format!(
                "`{text}` on {row:?}: its test gives {tested}, the oracle's value {expected:?}"
            ));
        }
    }
    // Where the types differ (the type property's business), numbers are compared as numbers.
    let same = actual == expected
        || (compiled.ty != sql_type(type_of(e))
            && number(&actual, &compiled.ty).is_some()
            && number(&actual, &compiled.ty) == number(&expected, &sql_type(type_of(e))));
    (!same).then(|| {
        format!(
            "`{text}` (type {}) on {row:?}: Spate gives {actual:?}, the oracle {expected:?}",
            compiled.ty
        )
    })
}

/// Spate's value of `e` on `row` is the oracle's. A mismatch names the smallest
/// subexpression that mismatches on the row (proptest's shrinking cannot take a tree's
/// subtree for the tree), and the whole expression.
fn same_value(e: &E, row: &Row) -> Result<(), TestCaseError> {
    let Some(whole) = value_mismatch(e, row) else {
        return Ok(());
    };
    let mut parts = e.subtrees();
    parts.sort_by_key(|p| p.subtrees().len());
    let smallest = parts
        .into_iter()
        .find_map(|p| value_mismatch(p, row))
        .unwrap_or_else(|| whole.clone());
    Err(TestCaseError::fail(format!(
        "{smallest}\n(in the whole case {whole})"
    )))
}

/// Why Spate's type of `e` is not Flink's, if it is not.
fn type_mismatch(e: &E) -> Option<String> {
    let text = e.sql();
    let flink = sql_type(type_of(e));
    match compile(&text) {
        Err(m) => Some(format!("`{text}` {m}")),
        Ok(c) if c.ty != flink => Some(format!("`{text}`: Spate types it {}, Flink {flink}", c.ty)),
        Ok(_) => None,
    }
}

/// Spate's type of `e` is Flink's; a mismatch names the smallest subexpression that has it.
fn same_type(e: &E) -> Result<(), TestCaseError> {
    let Some(whole) = type_mismatch(e) else {
        return Ok(());
    };
    let mut parts = e.subtrees();
    parts.sort_by_key(|p| p.subtrees().len());
    let smallest = parts.into_iter().find_map(type_mismatch).unwrap_or(whole);
    Err(TestCaseError::fail(smallest))
}

/// A calc of `b`, `e` and one of `e`'s subexpressions, in which each occurs several times,
/// against Spate's evaluation of each expression alone.
fn same_calc(e: &E, b: &E, pick: prop::sample::Index, row: &Row) -> Result<(), TestCaseError> {
    let subtrees = e.subtrees();
    let sub = subtrees[pick.index(subtrees.len())];
    let (e, b, sub) = (e.sql(), b.sql(), sub.sql());
    let texts = [
        format!("({b}) OR (({b}) AND ({e}) IS NULL)"),
        e.clone(),
        format!("CASE WHEN {b} THEN {e} ELSE {e} END"),
        sub,
        format!("({e}) IS NULL"),
    ];
    let mut bound = Vec::new();
    for text in &texts {
        match compile(text) {
            Ok(c) => bound.push(c.expr),
            // Not every combination types (a CASE of mixed branches, say): nothing to test.
            Err(_) => return Ok(()),
        }
    }
    let (predicate, exprs) = bound.split_first().expect("five");
    let calc = Calc::new(COLUMNS.len(), Some(predicate), Some(exprs));
    let datums = row.datums();
    let expected = (predicate.eval(&datums) == Datum::Bool(true))
        .then(|| exprs.iter().map(|x| x.eval(&datums)).collect::<Vec<_>>());
    let actual = calc.apply(datums);
    prop_assert_eq!(&actual, &expected, "calc of {:?} on {:?}", texts, row);
    Ok(())
}

const INTEGERS: Kinds = Kinds {
    decimals: false,
    strings: false,
};
const DECIMALS: Kinds = Kinds {
    decimals: true,
    strings: false,
};
const ALL: Kinds = Kinds {
    decimals: true,
    strings: true,
};

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 1000,
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/proptest-regressions/expr_props.txt"
        )))),
        ..ProptestConfig::default()
    })]

    /// Integer arithmetic, comparisons and logic.
    #[test]
    fn integer_expressions_agree(e in expression(INTEGERS, 4), row in row()) {
        same_value(&e, &row)?;
    }

    /// DECIMAL literals mixed with the integer columns.
    #[test]
    fn decimal_expressions_agree(e in expression(DECIMALS, 3), row in row()) {
        same_value(&e, &row)?;
    }

    /// Everything, strings too.
    #[test]
    fn all_expressions_agree(e in expression(ALL, 4), row in row()) {
        same_value(&e, &row)?;
    }

    /// A calc (a filter and a projection, their shared subexpressions computed once into
    /// slots) gives what evaluating its predicate and each expression on its own gives.
    #[test]
    fn calcs_agree(
        e in expression(ALL, 3),
        b in gens(ALL, 2).boolean,
        pick in any::<prop::sample::Index>(),
        row in row(),
    ) {
        same_calc(&e, &b, pick, &row)?;
    }

    /// The type Spate derives is Flink's.
    #[test]
    fn types_agree(e in expression(ALL, 3)) {
        same_type(&e)?;
    }
}
