//! Native expressions: `col("price") * 908 // 1000` and friends, compiled once from the tree
//! that `spate.expr` builds and evaluated in Rust per record, with no Python.
//!
//! The Python side sends each expression as nested tuples whose first item names the node:
//! `("col", "bid.price")`, `("lit", 908)`, `("bin", "*", l, r)`, `("cmp", "<", l, r)`,
//! `("and", l, r)`, `("or", l, r)`, `("not", x)`, `("neg", x)`, `("is_null", x)`,
//! `("call", name, [args])`, `("cast", type, x)`, `("row", [names], [exprs])` and
//! `("tuple", [exprs])`. String functions follow Python's `str` methods; `format_string`
//! is Python's printf-style `fmt % args`. Arithmetic follows Python's: `//` floors, `%` takes the divisor's
//! sign, `/` gives a float; `None` in an operand gives `None` (SQL's null).

use std::borrow::Cow;
use std::sync::Arc;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyList, PyTuple};
use smallvec::SmallVec;

use crate::record::{from_py, intern, Rec};

/// A compiled expression.
#[derive(Debug, Clone)]
pub enum Expr {
    /// A field path: each step a field name (of a row or `dict`) or a position.
    Col(Arc<str>, Vec<Step>),
    /// A constant.
    Lit(Rec),
    /// Arithmetic.
    Bin(BinOp, Box<Expr>, Box<Expr>),
    /// A comparison.
    Cmp(CmpOp, Box<Expr>, Box<Expr>),
    /// Logical and (Python's truthiness).
    And(Box<Expr>, Box<Expr>),
    /// Logical or.
    Or(Box<Expr>, Box<Expr>),
    /// Logical not.
    Not(Box<Expr>),
    /// Negation.
    Neg(Box<Expr>),
    /// Whether the value is `None`.
    IsNull(Box<Expr>),
    /// A built-in function.
    Call(Func, Vec<Expr>),
    /// A conversion.
    Cast(CastTo, Box<Expr>),
    /// A named row of expressions.
    Row(crate::record::Names, Vec<Expr>),
    /// A tuple of expressions.
    Tuple(Vec<Expr>),
}

/// One step of a field path.
#[derive(Debug, Clone)]
pub enum Step {
    /// A field by name.
    Name(String),
    /// An element by position.
    Index(i64),
}

/// Arithmetic operators.
#[derive(Debug, Clone, Copy)]
pub enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    FloorDiv,
    Mod,
}

/// Comparison operators.
#[derive(Debug, Clone, Copy)]
pub enum CmpOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

/// Built-in functions.
#[derive(Debug, Clone, Copy)]
pub enum Func {
    Lower,
    Upper,
    Strip,
    Split,
    Contains,
    StartsWith,
    EndsWith,
    Length,
    Concat,
    Abs,
    /// `to_timestamp(fmt)`: a date-time string to epoch milliseconds (UTC).
    ToTimestamp,
    /// `str(x)`.
    Str,
    /// `lpad(width, fill)`: padded on the left to `width` characters (as `str.rjust`).
    Lpad,
    /// `rpad(width, fill)`: padded on the right (as `str.ljust`).
    Rpad,
    /// `zfill(width)`: zeros on the left, after a sign (as `str.zfill`).
    Zfill,
    /// `replace(old, new)`: every `old` replaced (as `str.replace`).
    Replace,
    /// `format_string(fmt, args...)`: Python's `fmt % (args...)`.
    FormatString,
}

/// Conversion targets.
#[derive(Debug, Clone, Copy)]
pub enum CastTo {
    Int,
    Float,
    Str,
    Bool,
}

fn bad(msg: impl Into<String>) -> PyErr {
    PyValueError::new_err(msg.into())
}

impl Expr {
    /// Compiles the tuple tree of `spate.expr`.
    pub fn compile(node: &Bound<'_, PyAny>) -> PyResult<Expr> {
        let t = node
            .cast::<PyTuple>()
            .map_err(|_| bad("an expression node must be a tuple"))?;
        let tag: String = t.get_item(0)?.extract()?;
        let arg = |i: usize| t.get_item(i);
        let sub =
            |i: usize| -> PyResult<Box<Expr>> { Ok(Box::new(Expr::compile(&t.get_item(i)?)?)) };
        let list = |i: usize| -> PyResult<Vec<Expr>> {
            let items = t.get_item(i)?;
            let items = items
                .cast::<PyList>()
                .map_err(|_| bad("expression arguments must be a list"))?;
            items.iter().map(|x| Expr::compile(&x)).collect()
        };
        Ok(match tag.as_str() {
            "col" => {
                let path: String = arg(1)?.extract()?;
                let steps = if path.is_empty() {
                    Vec::new()
                } else {
                    path.split('.')
                        .map(|s| match s.parse::<i64>() {
                            Ok(i) => Step::Index(i),
                            Err(_) => Step::Name(s.to_owned()),
                        })
                        .collect()
                };
                Expr::Col(Arc::from(path.as_str()), steps)
            }
            "item" => {
                let i: i64 = arg(1)?.extract()?;
                Expr::Col(Arc::from(format!("[{i}]").as_str()), vec![Step::Index(i)])
            }
            "lit" => Expr::Lit(from_py(&arg(1)?)?),
            "bin" => {
                let op: String = arg(1)?.extract()?;
                let op = match op.as_str() {
                    "+" => BinOp::Add,
                    "-" => BinOp::Sub,
                    "*" => BinOp::Mul,
                    "/" => BinOp::Div,
                    "//" => BinOp::FloorDiv,
                    "%" => BinOp::Mod,
                    o => return Err(bad(format!("unknown operator `{o}`"))),
                };
                Expr::Bin(op, sub(2)?, sub(3)?)
            }
            "cmp" => {
                let op: String = arg(1)?.extract()?;
                let op = match op.as_str() {
                    "==" => CmpOp::Eq,
                    "!=" => CmpOp::Ne,
                    "<" => CmpOp::Lt,
                    "<=" => CmpOp::Le,
                    ">" => CmpOp::Gt,
                    ">=" => CmpOp::Ge,
                    o => return Err(bad(format!("unknown comparison `{o}`"))),
                };
                Expr::Cmp(op, sub(2)?, sub(3)?)
            }
            "and" => Expr::And(sub(1)?, sub(2)?),
            "or" => Expr::Or(sub(1)?, sub(2)?),
            "not" => Expr::Not(sub(1)?),
            "neg" => Expr::Neg(sub(1)?),
            "is_null" => Expr::IsNull(sub(1)?),
            "call" => {
                let name: String = arg(1)?.extract()?;
                let f = match name.as_str() {
                    "lower" => Func::Lower,
                    "upper" => Func::Upper,
                    "strip" => Func::Strip,
                    "split" => Func::Split,
                    "contains" => Func::Contains,
                    "starts_with" => Func::StartsWith,
                    "ends_with" => Func::EndsWith,
                    "length" => Func::Length,
                    "concat" => Func::Concat,
                    "abs" => Func::Abs,
                    "to_timestamp" => Func::ToTimestamp,
                    "str" => Func::Str,
                    "lpad" => Func::Lpad,
                    "rpad" => Func::Rpad,
                    "zfill" => Func::Zfill,
                    "replace" => Func::Replace,
                    "format_string" => Func::FormatString,
                    f => return Err(bad(format!("unknown function `{f}`"))),
                };
                Expr::Call(f, list(2)?)
            }
            "cast" => {
                let to: String = arg(1)?.extract()?;
                let to = match to.as_str() {
                    "int" => CastTo::Int,
                    "float" => CastTo::Float,
                    "str" => CastTo::Str,
                    "bool" => CastTo::Bool,
                    o => return Err(bad(format!("cannot cast to `{o}`"))),
                };
                Expr::Cast(to, sub(2)?)
            }
            "row" => {
                let names: Vec<String> = arg(1)?.extract()?;
                let exprs = list(2)?;
                if names.len() != exprs.len() {
                    return Err(bad("a row expression needs one name per value"));
                }
                Expr::Row(intern(names), exprs)
            }
            "tuple" => Expr::Tuple(list(1)?),
            other => return Err(bad(format!("unknown expression node `{other}`"))),
        })
    }

    /// The value at a field path of `r`.
    fn lookup<'a>(path: &str, steps: &[Step], r: &'a Rec) -> Result<&'a Rec, String> {
        const NONE: &Rec = &Rec::None;
        let mut cur = r;
        for s in steps {
            // A path through `None` (a missing nested row) is `None`, as in SQL.
            if matches!(cur, Rec::None) {
                return Ok(NONE);
            }
            let next = match s {
                Step::Name(n) => cur.field(n),
                Step::Index(i) => cur.item(*i),
            };
            cur = next
                .ok_or_else(|| format!("the record has no field `{path}` (it is {})", Short(r)))?;
        }
        Ok(cur)
    }

    /// Evaluates the expression, borrowing a field or a constant instead of cloning it.
    pub fn eval_ref<'a>(&'a self, r: &'a Rec) -> Result<std::borrow::Cow<'a, Rec>, String> {
        use std::borrow::Cow;
        Ok(match self {
            Expr::Col(path, steps) => Cow::Borrowed(Expr::lookup(path, steps, r)?),
            Expr::Lit(v) => Cow::Borrowed(v),
            other => Cow::Owned(other.eval(r)?),
        })
    }

    /// Evaluates the expression on one record.
    pub fn eval(&self, r: &Rec) -> Result<Rec, String> {
        Ok(match self {
            Expr::Col(path, steps) => Expr::lookup(path, steps, r)?.clone(),
            Expr::Lit(v) => v.clone(),
            Expr::Bin(op, a, b) => arith(*op, &*a.eval_ref(r)?, &*b.eval_ref(r)?)?,
            // Compared and tested where they are: a field is not cloned to be looked at.
            Expr::Cmp(op, a, b) => compare(*op, &*a.eval_ref(r)?, &*b.eval_ref(r)?)?,
            Expr::And(a, b) => {
                let x = a.eval(r)?;
                if x.truthy() {
                    b.eval(r)?
                } else {
                    x
                }
            }
            Expr::Or(a, b) => {
                let x = a.eval(r)?;
                if x.truthy() {
                    x
                } else {
                    b.eval(r)?
                }
            }
            Expr::Not(a) => Rec::Bool(!a.eval_ref(r)?.truthy()),
            Expr::Neg(a) => match a.eval(r)? {
                Rec::Int(i) => Rec::Int(i.checked_neg().ok_or("integer overflow")?),
                Rec::Float(f) => Rec::Float(-f),
                Rec::None => Rec::None,
                x => return Err(format!("cannot negate {}", x.type_name())),
            },
            Expr::IsNull(a) => Rec::Bool(matches!(*a.eval_ref(r)?, Rec::None)),
            Expr::Call(Func::FormatString, args) => {
                // Fields and constants are formatted where they are, not cloned first.
                let vals = args
                    .iter()
                    .map(|a| a.eval_ref(r))
                    .collect::<Result<SmallVec<[_; 8]>, _>>()?;
                match vals.first().map(|v| &**v) {
                    Some(Rec::None) => Rec::None,
                    Some(Rec::Str(fmt)) => Rec::Str(format_string(fmt, &vals[1..])?),
                    Some(other) => {
                        return Err(format!(
                            "format_string needs a str format, not {}",
                            other.type_name()
                        ))
                    }
                    None => return Err("format_string needs a format".into()),
                }
            }
            Expr::Call(Func::Concat, args) => {
                let mut out = String::new();
                for a in args {
                    match &*a.eval_ref(r)? {
                        Rec::Str(s) => out.push_str(s),
                        Rec::None => return Ok(Rec::None),
                        other => {
                            use std::fmt::Write;
                            let _ = write!(out, "{other}");
                        }
                    }
                }
                Rec::Str(out)
            }
            Expr::Call(f, args) => {
                // Fields and constants are read where they are, not cloned first.
                let vals = args
                    .iter()
                    .map(|a| a.eval_ref(r))
                    .collect::<Result<Args<'_>, _>>()?;
                call(*f, vals)?
            }
            Expr::Cast(to, a) => cast(*to, a.eval(r)?)?,
            Expr::Row(names, exprs) => Rec::Row(
                Some(Arc::clone(names)),
                exprs.iter().map(|e| e.eval(r)).collect::<Result<_, _>>()?,
            ),
            Expr::Tuple(exprs) => {
                Rec::Tuple(exprs.iter().map(|e| e.eval(r)).collect::<Result<_, _>>()?)
            }
        })
    }
}

/// A record shortened for an error message.
struct Short<'a>(&'a Rec);

impl std::fmt::Display for Short<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = crate::record::Repr(self.0).to_string();
        if s.len() > 80 {
            let cut = (0..=77).rev().find(|&i| s.is_char_boundary(i)).unwrap_or(0);
            write!(f, "{}...", &s[..cut])
        } else {
            f.write_str(&s)
        }
    }
}

fn arith(op: BinOp, a: &Rec, b: &Rec) -> Result<Rec, String> {
    use Rec::{Float, Int};
    let overflow = || "integer overflow".to_string();
    Ok(match (op, a, b) {
        (_, Rec::None, _) | (_, _, Rec::None) => Rec::None,
        (BinOp::Add, Rec::Str(x), Rec::Str(y)) => Rec::Str(format!("{x}{y}")),
        (BinOp::Add, Int(x), Int(y)) => Int(x.checked_add(*y).ok_or_else(overflow)?),
        (BinOp::Sub, Int(x), Int(y)) => Int(x.checked_sub(*y).ok_or_else(overflow)?),
        (BinOp::Mul, Int(x), Int(y)) => Int(x.checked_mul(*y).ok_or_else(overflow)?),
        (BinOp::FloorDiv | BinOp::Mod, Int(_), Int(0)) => {
            return Err("integer division or modulo by zero".into())
        }
        (BinOp::FloorDiv, Int(x), Int(y)) => Int(x.div_euclid(*y)
            - if (x.rem_euclid(*y) != 0) && (*y < 0) {
                1
            } else {
                0
            }),
        (BinOp::Mod, Int(x), Int(y)) => {
            let m = x.rem_euclid(*y);
            Int(if m != 0 && *y < 0 { m + y } else { m })
        }
        _ => {
            let (x, y) = match (a.as_f64(), b.as_f64()) {
                (Some(x), Some(y)) if !matches!(a, Rec::Bool(_)) || !matches!(b, Rec::Bool(_)) => {
                    (x, y)
                }
                _ => {
                    return Err(format!(
                        "cannot apply `{}` to {} and {}",
                        op_name(op),
                        a.type_name(),
                        b.type_name()
                    ))
                }
            };
            match op {
                BinOp::Add => Float(x + y),
                BinOp::Sub => Float(x - y),
                BinOp::Mul => Float(x * y),
                BinOp::Div if y == 0.0 => return Err("division by zero".into()),
                BinOp::Div => Float(x / y),
                BinOp::FloorDiv if y == 0.0 => return Err("float floor division by zero".into()),
                BinOp::FloorDiv => Float((x / y).floor()),
                BinOp::Mod if y == 0.0 => return Err("float modulo by zero".into()),
                BinOp::Mod => Float(x - y * (x / y).floor()),
            }
        }
    })
}

fn op_name(op: BinOp) -> &'static str {
    match op {
        BinOp::Add => "+",
        BinOp::Sub => "-",
        BinOp::Mul => "*",
        BinOp::Div => "/",
        BinOp::FloorDiv => "//",
        BinOp::Mod => "%",
    }
}

/// Orders two records as Python orders them (numbers together, strings, sequences), or
/// `None` when Python would raise.
pub fn order(a: &Rec, b: &Rec) -> Option<std::cmp::Ordering> {
    match (a, b) {
        (Rec::Int(x), Rec::Int(y)) => Some(x.cmp(y)),
        (Rec::Str(x), Rec::Str(y)) => Some(x.cmp(y)),
        (Rec::Bytes(x), Rec::Bytes(y)) => Some(x.cmp(y)),
        (Rec::List(x), Rec::List(y)) | (Rec::Tuple(x), Rec::Tuple(y)) => {
            for (p, q) in x.iter().zip(y) {
                match order(p, q)? {
                    std::cmp::Ordering::Equal => continue,
                    o => return Some(o),
                }
            }
            Some(x.len().cmp(&y.len()))
        }
        _ => match (a.as_f64(), b.as_f64()) {
            (Some(x), Some(y)) => x.partial_cmp(&y),
            _ => None,
        },
    }
}

fn compare(op: CmpOp, a: &Rec, b: &Rec) -> Result<Rec, String> {
    if matches!(a, Rec::None) || matches!(b, Rec::None) {
        return Ok(match op {
            CmpOp::Eq => Rec::Bool(matches!((a, b), (Rec::None, Rec::None))),
            CmpOp::Ne => Rec::Bool(!matches!((a, b), (Rec::None, Rec::None))),
            _ => Rec::None,
        });
    }
    let numeric_eq = || match (a.as_f64(), b.as_f64()) {
        (Some(x), Some(y)) => x == y,
        _ => a == b,
    };
    Ok(Rec::Bool(match op {
        CmpOp::Eq => numeric_eq(),
        CmpOp::Ne => !numeric_eq(),
        _ => {
            let o = order(a, b).ok_or_else(|| {
                format!("cannot compare {} with {}", a.type_name(), b.type_name())
            })?;
            match op {
                CmpOp::Lt => o.is_lt(),
                CmpOp::Le => o.is_le(),
                CmpOp::Gt => o.is_gt(),
                CmpOp::Ge => o.is_ge(),
                CmpOp::Eq | CmpOp::Ne => unreachable!("handled above"),
            }
        }
    }))
}

/// The arguments of a function call: borrowed fields and constants, computed values.
type Args<'a> = SmallVec<[Cow<'a, Rec>; 4]>;

fn string<'a>(f: &str, v: &'a Rec) -> Result<&'a str, String> {
    match v {
        Rec::Str(s) => Ok(s),
        other => Err(format!("{f} needs a str, not {}", other.type_name())),
    }
}

fn call(f: Func, mut args: Args<'_>) -> Result<Rec, String> {
    if args.first().is_some_and(|a| matches!(**a, Rec::None)) {
        return Ok(Rec::None);
    }
    let arg = |args: &mut Args<'_>, i: usize| -> Rec { std::mem::take(&mut args[i]).into_owned() };
    Ok(match f {
        Func::Lower => Rec::Str(string("lower", &args[0])?.to_lowercase()),
        Func::Upper => Rec::Str(string("upper", &args[0])?.to_uppercase()),
        Func::Strip => Rec::Str(string("strip", &args[0])?.trim().to_owned()),
        Func::Split => {
            let s = string("split", &args[0])?;
            let parts =
                |it: &mut dyn Iterator<Item = &str>| it.map(|p| Rec::Str(p.to_owned())).collect();
            match args.get(1).map(|a| &**a) {
                // One ASCII character: a byte search (memchr), not a substring search.
                Some(Rec::Str(sep)) if sep.len() == 1 => {
                    Rec::List(parts(&mut s.split(char::from(sep.as_bytes()[0]))))
                }
                Some(Rec::Str(sep)) if !sep.is_empty() => {
                    Rec::List(parts(&mut s.split(sep.as_str())))
                }
                Some(Rec::Str(_)) => return Err("split: empty separator".into()),
                _ => Rec::List(
                    s.split_whitespace()
                        .map(|p| Rec::Str(p.to_owned()))
                        .collect(),
                ),
            }
        }
        Func::Contains => {
            let s = string("contains", &args[0])?;
            Rec::Bool(s.contains(string("contains", &args[1])?))
        }
        Func::StartsWith => {
            let s = string("starts_with", &args[0])?;
            Rec::Bool(s.starts_with(string("starts_with", &args[1])?))
        }
        Func::EndsWith => {
            let s = string("ends_with", &args[0])?;
            Rec::Bool(s.ends_with(string("ends_with", &args[1])?))
        }
        Func::Length => match &*args[0] {
            Rec::Str(s) => Rec::Int(s.chars().count() as i64),
            Rec::List(v) | Rec::Tuple(v) | Rec::Row(_, v) => Rec::Int(v.len() as i64),
            Rec::Dict(v) => Rec::Int(v.len() as i64),
            Rec::Bytes(b) => Rec::Int(b.len() as i64),
            other => return Err(format!("length of {}", other.type_name())),
        },
        Func::Concat => {
            let mut out = String::new();
            for a in &args {
                match &**a {
                    Rec::Str(s) => out.push_str(s),
                    Rec::None => return Ok(Rec::None),
                    other => out.push_str(&other.to_string()),
                }
            }
            Rec::Str(out)
        }
        Func::Abs => match arg(&mut args, 0) {
            Rec::Int(i) => Rec::Int(i.checked_abs().ok_or("integer overflow")?),
            Rec::Float(x) => Rec::Float(x.abs()),
            other => return Err(format!("abs of {}", other.type_name())),
        },
        Func::ToTimestamp => {
            let s = string("to_timestamp", &args[0])?;
            let fmt = match args.get(1).map(|a| &**a) {
                Some(Rec::Str(f)) => Some(f.as_str()),
                _ => None,
            };
            Rec::Int(parse_timestamp(s, fmt)?)
        }
        Func::Str => Rec::Str(arg(&mut args, 0).to_string()),
        Func::Lpad | Func::Rpad => {
            let name = if matches!(f, Func::Lpad) {
                "lpad"
            } else {
                "rpad"
            };
            let s = string(name, &args[0])?;
            let width = int_arg(name, args.get(1).map(|a| &**a))?;
            let fill = match args.get(2) {
                None => " ",
                Some(v) => string(name, v)?,
            };
            Rec::Str(pad(s, width, fill, matches!(f, Func::Lpad))?)
        }
        Func::Zfill => {
            let s = string("zfill", &args[0])?;
            let width = int_arg("zfill", args.get(1).map(|a| &**a))?;
            let n = s.chars().count();
            if width <= n as i64 {
                Rec::Str(s.to_owned())
            } else {
                let zeros = "0".repeat(width as usize - n);
                Rec::Str(match s.strip_prefix(['+', '-']) {
                    Some(rest) => format!("{}{zeros}{rest}", &s[..1]),
                    None => format!("{zeros}{s}"),
                })
            }
        }
        Func::Replace => {
            let s = string("replace", &args[0])?;
            let old = string("replace", args.get(1).map_or(&Rec::None, |a| &**a))?;
            let new = string("replace", args.get(2).map_or(&Rec::None, |a| &**a))?;
            Rec::Str(if old.is_empty() {
                // Python inserts `new` between the characters and at both ends.
                let mut out = new.to_owned();
                for c in s.chars() {
                    out.push(c);
                    out.push_str(new);
                }
                out
            } else {
                s.replace(old, new)
            })
        }
        Func::FormatString => {
            let fmt = string("format_string", &args[0])?;
            Rec::Str(format_string(fmt, &args[1..])?)
        }
    })
}

fn int_arg(f: &str, v: Option<&Rec>) -> Result<i64, String> {
    match v {
        Some(Rec::Int(i)) => Ok(*i),
        Some(other) => Err(format!("{f} needs an int width, not {}", other.type_name())),
        None => Err(format!("{f} needs a width")),
    }
}

/// `s` padded to `width` characters with `fill` (repeated, as SQL's LPAD/RPAD; a single
/// character as Python's `rjust`/`ljust`); a longer `s` is kept whole.
fn pad(s: &str, width: i64, fill: &str, left: bool) -> Result<String, String> {
    if fill.is_empty() {
        return Err("the fill of a pad must not be empty".into());
    }
    let n = s.chars().count() as i64;
    if width <= n {
        return Ok(s.to_owned());
    }
    let padding: String = fill.chars().cycle().take((width - n) as usize).collect();
    Ok(if left {
        padding + s
    } else {
        s.to_owned() + &padding
    })
}

/// Python's printf-style `fmt % args` for the conversions `s r d i f F e E g G x X o c %`
/// with the flags `-+ 0#`, a width and a precision (no `*` and no mapping keys).
pub fn format_string<A: std::ops::Deref<Target = Rec>>(
    fmt: &str,
    args: &[A],
) -> Result<String, String> {
    let mut out = String::with_capacity(fmt.len() + 16 * args.len());
    let mut next = args.iter();
    let mut chars = fmt.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let (mut minus, mut plus, mut space, mut zero, mut alt) =
            (false, false, false, false, false);
        while let Some(&f) = chars.peek() {
            match f {
                '-' => minus = true,
                '+' => plus = true,
                ' ' => space = true,
                '0' => zero = true,
                '#' => alt = true,
                _ => break,
            }
            chars.next();
        }
        let mut width = 0usize;
        while let Some(d) = chars.peek().and_then(|c| c.to_digit(10)) {
            width = width * 10 + d as usize;
            chars.next();
        }
        let mut prec = None;
        if chars.peek() == Some(&'.') {
            chars.next();
            let mut p = 0usize;
            while let Some(d) = chars.peek().and_then(|c| c.to_digit(10)) {
                p = p * 10 + d as usize;
                chars.next();
            }
            prec = Some(p);
        }
        let conv = chars
            .next()
            .ok_or("format_string: incomplete format (a `%` at the end)")?;
        if conv == '%' {
            out.push('%');
            continue;
        }
        let v: &Rec = next
            .next()
            .ok_or("format_string: not enough arguments for format string")?;
        let plain = !(minus || plus || space || zero || alt) && width == 0 && prec.is_none();
        match (conv, v) {
            // The common cases, without building the piece first.
            ('s', Rec::Str(s)) if plain => {
                out.push_str(s);
                continue;
            }
            ('d' | 'i', Rec::Int(i)) if plain => {
                use std::fmt::Write;
                let _ = write!(out, "{i}");
                continue;
            }
            _ => {}
        }
        let numeric = !matches!(conv, 's' | 'r' | 'a' | 'c');
        let (sign, body) = match conv {
            's' => {
                let s = v.to_string();
                ("", prec.map_or(s.clone(), |p| s.chars().take(p).collect()))
            }
            'r' | 'a' => {
                let s = crate::record::Repr(v).to_string();
                ("", prec.map_or(s.clone(), |p| s.chars().take(p).collect()))
            }
            'c' => match v {
                Rec::Int(i) => (
                    "",
                    char::from_u32(u32::try_from(*i).map_err(|_| "%c arg not in range")?)
                        .ok_or("%c arg not in range")?
                        .to_string(),
                ),
                Rec::Str(s) if s.chars().count() == 1 => ("", s.clone()),
                _ => return Err("format_string: %c requires an int or a char".into()),
            },
            'd' | 'i' | 'x' | 'X' | 'o' => {
                let i = match v {
                    Rec::Int(i) => *i as i128,
                    Rec::Bool(b) => i128::from(*b),
                    Rec::Float(x) if x.is_finite() && matches!(conv, 'd' | 'i') => {
                        x.trunc() as i128
                    }
                    other => {
                        return Err(format!(
                            "format_string: %{conv} format: a real number is required, not {}",
                            other.type_name()
                        ))
                    }
                };
                let sign = if i < 0 {
                    "-"
                } else if plus {
                    "+"
                } else if space {
                    " "
                } else {
                    ""
                };
                let a = i.unsigned_abs();
                let mut digits = match conv {
                    'x' => format!("{a:x}"),
                    'X' => format!("{a:X}"),
                    'o' => format!("{a:o}"),
                    _ => a.to_string(),
                };
                if let Some(p) = prec {
                    if digits.len() < p {
                        digits = "0".repeat(p - digits.len()) + &digits;
                    }
                }
                if alt {
                    digits = match conv {
                        'x' => format!("0x{digits}"),
                        'X' => format!("0X{digits}"),
                        'o' => format!("0o{digits}"),
                        _ => digits,
                    };
                }
                (sign, digits)
            }
            'f' | 'F' | 'e' | 'E' | 'g' | 'G' => {
                let x = v
                    .as_f64()
                    .filter(|_| !matches!(v, Rec::Str(_)))
                    .ok_or_else(|| {
                        format!(
                            "format_string: %{conv} format: a real number is required, not {}",
                            v.type_name()
                        )
                    })?;
                let sign = if x.is_sign_negative() && !x.is_nan() {
                    "-"
                } else if plus {
                    "+"
                } else if space {
                    " "
                } else {
                    ""
                };
                let a = x.abs();
                let p = prec.unwrap_or(6);
                let body = if a.is_infinite() {
                    if conv.is_ascii_uppercase() {
                        "INF"
                    } else {
                        "inf"
                    }
                    .to_owned()
                } else if a.is_nan() {
                    if conv.is_ascii_uppercase() {
                        "NAN"
                    } else {
                        "nan"
                    }
                    .to_owned()
                } else {
                    let body = match conv {
                        'f' | 'F' => format!("{a:.p$}"),
                        'e' | 'E' => exp_form(a, p, conv == 'E'),
                        _ => general_form(a, p, conv == 'G', alt),
                    };
                    if alt && !body.contains('.') {
                        // `#` keeps the decimal point, as in `'%#.0f' % 2.0 == '2.'`.
                        match body.find(['e', 'E']) {
                            Some(i) => format!("{}.{}", &body[..i], &body[i..]),
                            None => body + ".",
                        }
                    } else {
                        body
                    }
                };
                (sign, body)
            }
            other => {
                return Err(format!(
                    "format_string: unsupported format character '{other}'"
                ))
            }
        };
        let len = sign.len() + body.chars().count();
        if len >= width {
            out.push_str(sign);
            out.push_str(&body);
        } else if minus {
            out.push_str(sign);
            out.push_str(&body);
            out.extend(std::iter::repeat_n(' ', width - len));
        } else if zero && numeric {
            out.push_str(sign);
            let (pre, rest) = match body.get(..2) {
                Some(p @ ("0x" | "0X" | "0o")) => (p, &body[2..]),
                _ => ("", body.as_str()),
            };
            out.push_str(pre);
            out.extend(std::iter::repeat_n('0', width - len));
            out.push_str(rest);
        } else {
            out.extend(std::iter::repeat_n(' ', width - len));
            out.push_str(sign);
            out.push_str(&body);
        }
    }
    if next.next().is_some() {
        return Err("format_string: not all arguments converted during string formatting".into());
    }
    Ok(out)
}

/// `a` (finite, non-negative) as `d.ddde+XX` with `p` decimals, as C's `%e`.
fn exp_form(a: f64, p: usize, upper: bool) -> String {
    let s = format!("{a:.p$e}");
    let (mant, exp) = s.split_once('e').unwrap_or((&s, "0"));
    let e: i32 = exp.parse().unwrap_or(0);
    let sign = if e < 0 { '-' } else { '+' };
    let e = e.unsigned_abs();
    let marker = if upper { 'E' } else { 'e' };
    format!("{mant}{marker}{sign}{e:02}")
}

/// `a` as C's `%g`: `p` significant digits, exponent form outside `1e-4 <= a < 10^p`,
/// trailing zeros dropped unless `alt`.
fn general_form(a: f64, p: usize, upper: bool, alt: bool) -> String {
    let p = p.max(1);
    if a == 0.0 {
        return if alt {
            format!("{:.*}", p - 1, 0.0)
        } else {
            "0".to_owned()
        };
    }
    let e_form = exp_form(a, p - 1, upper);
    let exp: i32 = e_form
        .rsplit(['e', 'E'])
        .next()
        .and_then(|x| x.parse().ok())
        .unwrap_or(0);
    let trim = |s: String| -> String {
        if alt || !s.contains('.') {
            s
        } else {
            s.trim_end_matches('0').trim_end_matches('.').to_owned()
        }
    };
    if exp < -4 || exp >= p as i32 {
        let (mant, rest) = e_form.split_at(e_form.find(['e', 'E']).unwrap_or(e_form.len()));
        format!("{}{rest}", trim(mant.to_owned()))
    } else {
        let decimals = (p as i32 - 1 - exp).max(0) as usize;
        trim(format!("{a:.decimals$}"))
    }
}

fn cast(to: CastTo, v: Rec) -> Result<Rec, String> {
    if matches!(v, Rec::None) {
        return Ok(Rec::None);
    }
    Ok(match (to, v) {
        (CastTo::Int, Rec::Int(i)) => Rec::Int(i),
        (CastTo::Int, Rec::Float(f)) if f.is_finite() => Rec::Int(f.trunc() as i64),
        (CastTo::Int, Rec::Bool(b)) => Rec::Int(i64::from(b)),
        (CastTo::Int, Rec::Str(s)) => Rec::Int(
            s.trim()
                .parse()
                .map_err(|_| format!("invalid literal for int(): '{s}'"))?,
        ),
        (CastTo::Float, Rec::Str(s)) => Rec::Float(
            s.trim()
                .parse()
                .map_err(|_| format!("could not convert string to float: '{s}'"))?,
        ),
        (CastTo::Float, v) => Rec::Float(
            v.as_f64()
                .ok_or_else(|| format!("cannot convert {} to float", v.type_name()))?,
        ),
        (CastTo::Str, v) => Rec::Str(v.to_string()),
        (CastTo::Bool, v) => Rec::Bool(v.truthy()),
        (CastTo::Int, v) => return Err(format!("cannot convert {} to int", v.type_name())),
    })
}

/// Parses a date-time into epoch milliseconds, UTC: Flink's `yyyy-MM-dd HH:mm:ss[.SSS]` (a
/// `T` also separates), or a plain integer of milliseconds. `fmt` is accepted for PyFlink's
/// signature; only these layouts are read.
pub fn parse_timestamp(s: &str, fmt: Option<&str>) -> Result<i64, String> {
    let _ = fmt;
    let t = s.trim();
    t.parse::<i64>()
        .ok()
        .or_else(|| spate_connectors::files::json::parse_timestamp_ms(t))
        .ok_or_else(|| format!("cannot read `{s}` as a timestamp (yyyy-MM-dd HH:mm:ss[.SSS])"))
}
