//! Content predicates over record attributes: the syntax tree, its evaluation, and its
//! disjunctive normal form.
//!
//! # Syntax
//!
//! SQL-like, keywords case-insensitive, strings in single quotes (`''` is a quote):
//!
//! ```text
//! filter := or
//! or     := and ("OR" and)*
//! and    := not ("AND" not)*
//! not    := "NOT" not | atom
//! atom   := "(" filter ")"
//!         | name ("=" | "!=" | "<>" | "<" | "<=" | ">" | ">=") literal
//!         | name ["NOT"] "IN" "(" literal ("," literal)* ")"
//!         | name ["NOT"] "BETWEEN" literal "AND" literal
//!         | name ["NOT"] ("PREFIX" | "SUFFIX" | "CONTAINS") string
//!         | "EXISTS" name | name "EXISTS"
//! literal := number | string | TRUE | FALSE
//! ```
//!
//! A name is `[A-Za-z_$][A-Za-z0-9_.$-]*` and not a keyword. The PADRES form
//! `[class,eq,'stock'],[price,>,100]` is a conjunction of `[name,op,value]` triples with the
//! operators `eq`, `neq`, `=`, `!=`, `<>`, `<`, `<=`, `>`, `>=`, `str-prefix`, `str-postfix`,
//! `str-contains` and `isPresent` (whose value is ignored); a bare word as the value is a
//! string. Booleans only compare with `=` and `!=`, and an `IN` list has values of one type.
//!
//! # Semantics: three-valued logic
//!
//! As in SQL and JMS message selectors, an atom is UNKNOWN when the record lacks the attribute,
//! when the value's type does not match the literal's (a string compared with a number), or
//! when the value is a float NaN. `NOT UNKNOWN` is UNKNOWN; `AND` and `OR` follow Kleene's
//! tables (`FALSE AND UNKNOWN` is FALSE, `TRUE OR UNKNOWN` is TRUE). A record matches only
//! when the predicate is TRUE, so UNKNOWN acts as false at the top: `price > 100` and
//! `NOT (price > 100)` both reject a record without `price`, and `price != 100` does too.
//! `EXISTS` is never UNKNOWN. Numbers compare across integers and floats by exact value.
//! Attributes that a predicate does not mention are ignored (PADRES).
//!
//! Kleene logic keeps De Morgan's laws and distributivity, so the [`Predicate`]'s DNF (an OR
//! of conjunctions of atoms, with negations pushed into the atoms) has the same truth value
//! as its syntax tree. A negated ordering is its complement (`NOT a < 5` is `a >= 5`: both are
//! UNKNOWN on the same records), which keeps it indexable by the counting matcher.

use std::cmp::Ordering;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::attrs::{AttrRef, Attributes, Num};

/// The most conjunctions a predicate may have in DNF. `(a OR b) AND (c OR d) AND …` doubles
/// with every factor, so this bounds both memory and matching work per subscription.
pub const MAX_CONJUNCTIONS: usize = 256;

/// The deepest nesting of parentheses and `NOT`s accepted, which bounds recursion.
pub const MAX_DEPTH: usize = 64;

/// Why a predicate was rejected.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PredicateError {
    /// The text does not parse.
    #[error("column {column}: {message}")]
    Syntax {
        /// 1-based, in characters.
        column: usize,
        /// What was expected and what was found.
        message: String,
    },
    /// The DNF has more than [`MAX_CONJUNCTIONS`] conjunctions.
    #[error(
        "the predicate has more than {MAX_CONJUNCTIONS} conjunctions once written as an OR of \
         ANDs; split it into several subscriptions"
    )]
    TooComplex,
}

/// A literal value in a predicate.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Literal {
    Num(Num),
    Str(Box<str>),
    Bool(bool),
}

/// A comparison; `!=` is a negated `Eq`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CmpOp {
    Eq,
    Lt,
    Le,
    Gt,
    Ge,
}

impl CmpOp {
    fn holds(self, o: Ordering) -> bool {
        match self {
            CmpOp::Eq => o.is_eq(),
            CmpOp::Lt => o.is_lt(),
            CmpOp::Le => o.is_le(),
            CmpOp::Gt => o.is_gt(),
            CmpOp::Ge => o.is_ge(),
        }
    }

    /// The ordering that is TRUE exactly when `self` is FALSE (and UNKNOWN when it is).
    fn complement(self) -> Option<CmpOp> {
        match self {
            CmpOp::Eq => None,
            CmpOp::Lt => Some(CmpOp::Ge),
            CmpOp::Le => Some(CmpOp::Gt),
            CmpOp::Gt => Some(CmpOp::Le),
            CmpOp::Ge => Some(CmpOp::Lt),
        }
    }
}

/// A string test.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum StrOp {
    Prefix,
    Suffix,
    Contains,
}

/// What an atom checks of its attribute.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Test {
    Cmp(CmpOp, Literal),
    /// Non-empty, of one type, without duplicates.
    In(Vec<Literal>),
    Str(StrOp, Box<str>),
    Exists,
}

/// One attribute test, possibly negated.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Atom {
    pub(crate) attr: Box<str>,
    pub(crate) negated: bool,
    pub(crate) test: Test,
}

/// The order of a value and a literal, `None` if their types differ or the value is NaN.
fn compare(v: AttrRef<'_>, lit: &Literal) -> Option<Ordering> {
    match (v, lit) {
        (AttrRef::Str(a), Literal::Str(b)) => Some(a.cmp(b)),
        (AttrRef::Bool(a), Literal::Bool(b)) => Some(a.cmp(b)),
        (v, Literal::Num(n)) => v.num()?.cmp(*n),
        _ => None,
    }
}

impl Atom {
    /// The atom's truth on a value; `None` is UNKNOWN.
    pub(crate) fn truth(&self, v: Option<AttrRef<'_>>) -> Option<bool> {
        let t = match &self.test {
            Test::Exists => Some(v.is_some()),
            Test::Cmp(op, lit) => compare(v?, lit).map(|o| op.holds(o)),
            Test::In(list) => {
                let v = v?;
                let mut found = false;
                for lit in list {
                    // One type per list, so a mismatch (or NaN) is a mismatch for all.
                    if compare(v, lit)?.is_eq() {
                        found = true;
                        break;
                    }
                }
                Some(found)
            }
            Test::Str(op, pat) => match v? {
                AttrRef::Str(s) => Some(match op {
                    StrOp::Prefix => s.starts_with(&**pat),
                    StrOp::Suffix => s.ends_with(&**pat),
                    StrOp::Contains => s.contains(&**pat),
                }),
                _ => None,
            },
        };
        t.map(|b| b != self.negated)
    }

    /// The atom, negated if `negate`, with a negated ordering turned into its complement.
    fn normalized(&self, negate: bool) -> Atom {
        let mut a = self.clone();
        a.negated ^= negate;
        if let (true, Test::Cmp(op, _)) = (a.negated, &mut a.test) {
            if let Some(c) = op.complement() {
                *op = c;
                a.negated = false;
            }
        }
        a
    }
}

/// A predicate's syntax tree.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Expr {
    Atom(Atom),
    Not(Box<Expr>),
    And(Vec<Expr>),
    Or(Vec<Expr>),
}

impl Expr {
    /// Kleene evaluation; `None` is UNKNOWN.
    fn truth(&self, attrs: &dyn Attributes) -> Option<bool> {
        match self {
            Expr::Atom(a) => a.truth(attrs.get(&a.attr)),
            Expr::Not(e) => e.truth(attrs).map(|b| !b),
            Expr::And(es) => {
                let mut all = Some(true);
                for e in es {
                    match e.truth(attrs) {
                        Some(false) => return Some(false),
                        None => all = None,
                        Some(true) => {}
                    }
                }
                all
            }
            Expr::Or(es) => {
                let mut any = Some(false);
                for e in es {
                    match e.truth(attrs) {
                        Some(true) => return Some(true),
                        None => any = None,
                        Some(false) => {}
                    }
                }
                any
            }
        }
    }

    /// The DNF of `self`, or of `NOT self` if `negate`.
    fn dnf(&self, negate: bool) -> Result<Vec<Vec<Atom>>, PredicateError> {
        match self {
            Expr::Atom(a) => Ok(vec![vec![a.normalized(negate)]]),
            Expr::Not(e) => e.dnf(!negate),
            Expr::And(es) | Expr::Or(es) => {
                if matches!(self, Expr::And(_)) != negate {
                    let mut acc: Vec<Vec<Atom>> = vec![Vec::new()];
                    for e in es {
                        let d = e.dnf(negate)?;
                        if acc.len().saturating_mul(d.len()) > MAX_CONJUNCTIONS {
                            return Err(PredicateError::TooComplex);
                        }
                        acc = acc
                            .iter()
                            .flat_map(|a| {
                                d.iter().map(move |b| a.iter().chain(b).cloned().collect())
                            })
                            .collect();
                    }
                    Ok(acc)
                } else {
                    let mut acc = Vec::new();
                    for e in es {
                        acc.extend(e.dnf(negate)?);
                        if acc.len() > MAX_CONJUNCTIONS {
                            return Err(PredicateError::TooComplex);
                        }
                    }
                    Ok(acc)
                }
            }
        }
    }
}

/// A parsed content predicate, kept with its text (which is how it is serialized).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Predicate {
    text: Box<str>,
    expr: Expr,
    dnf: Vec<Vec<Atom>>,
}

impl Predicate {
    /// Parses a predicate in the SQL-like or the PADRES syntax (see the module docs).
    pub fn parse(text: &str) -> Result<Self, PredicateError> {
        let expr = crate::parse::parse(text)?;
        let dnf = expr.dnf(false)?;
        Ok(Predicate {
            text: text.into(),
            expr,
            dnf,
        })
    }

    /// The text it was parsed from.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The three-valued truth of the predicate on a record: `None` is UNKNOWN.
    pub fn truth<A: Attributes + ?Sized>(&self, attrs: &A) -> Option<bool> {
        self.expr.truth(&attrs)
    }

    /// Whether the record matches, that is the predicate is TRUE on it. This evaluates the
    /// syntax tree directly: the reference that [`Matcher`](crate::Matcher) is tested against.
    pub fn matches<A: Attributes + ?Sized>(&self, attrs: &A) -> bool {
        self.truth(attrs) == Some(true)
    }

    /// How many conjunctions its DNF has.
    pub fn conjunctions(&self) -> usize {
        self.dnf.len()
    }

    pub(crate) fn dnf(&self) -> &[Vec<Atom>] {
        &self.dnf
    }
}

impl fmt::Display for Predicate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl FromStr for Predicate {
    type Err = PredicateError;
    fn from_str(s: &str) -> Result<Self, PredicateError> {
        Predicate::parse(s)
    }
}

impl TryFrom<String> for Predicate {
    type Error = PredicateError;
    fn try_from(s: String) -> Result<Self, PredicateError> {
        Predicate::parse(&s)
    }
}

impl From<Predicate> for String {
    fn from(p: Predicate) -> String {
        p.text.into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn truth(p: &str, rec: serde_json::Value) -> Option<bool> {
        Predicate::parse(p).unwrap().truth(&rec)
    }

    /// The golden example of the seeds: PADRES and SQL forms agree.
    #[test]
    fn padres_golden() {
        let padres = Predicate::parse("[class,eq,accident],[severity,>,2]").unwrap();
        let sql = Predicate::parse("class = 'accident' AND severity > 2").unwrap();
        assert_eq!(padres.dnf(), sql.dnf());
        let stock = Predicate::parse("[class,eq,'stock'],[price,>,100]").unwrap();
        assert!(stock.matches(&json!({"class": "stock", "price": 120, "symbol": "IBM"})));
        assert!(!stock.matches(&json!({"class": "stock", "price": 100})));
        assert!(!stock.matches(&json!({"class": "bond", "price": 120})));
        assert!(!stock.matches(&json!({"class": "stock"})));
        for (r, want) in [
            (
                json!({"class": "accident", "severity": 3, "road": "A1"}),
                true,
            ),
            (json!({"class": "accident", "severity": 2}), false),
            (json!({"class": "accident"}), false),
            (json!({"class": "fire", "severity": 5}), false),
        ] {
            assert_eq!(padres.matches(&r), want, "{r}");
            assert_eq!(sql.matches(&r), want, "{r}");
        }
    }

    #[test]
    fn three_valued_logic() {
        let none = json!({});
        assert_eq!(truth("price > 100", none.clone()), None);
        assert_eq!(truth("NOT price > 100", none.clone()), None);
        assert_eq!(truth("NOT NOT price > 100", none.clone()), None);
        assert_eq!(truth("price != 100", none.clone()), None);
        assert_eq!(
            truth("price > 100 OR EXISTS x", json!({"x": 1})),
            Some(true)
        );
        assert_eq!(truth("price > 100 AND EXISTS x", json!({})), Some(false));
        assert_eq!(truth("price > 100 AND NOT EXISTS x", json!({})), None);
        assert_eq!(truth("NOT EXISTS price", none.clone()), Some(true));
        assert_eq!(truth("price EXISTS", json!({"price": null})), Some(false));
        // Mismatched types are UNKNOWN, in both directions.
        assert_eq!(truth("price > 100", json!({"price": "cheap"})), None);
        assert_eq!(truth("price = 'x'", json!({"price": 1})), None);
        assert_eq!(truth("flag = true", json!({"flag": 1})), None);
        assert_eq!(truth("name PREFIX 'a'", json!({"name": 1})), None);
        assert_eq!(truth("x IN (1, 2)", json!({"x": "1"})), None);
        assert_eq!(truth("x NOT IN (1, 2)", json!({"x": 3})), Some(true));
        assert_eq!(truth("x NOT IN (1, 2)", json!({})), None);
        // Across integers and floats.
        assert_eq!(truth("x = 5", json!({"x": 5.0})), Some(true));
        assert_eq!(truth("x IN (5.0, 7)", json!({"x": 5})), Some(true));
        assert_eq!(truth("x < 5.5", json!({"x": 5})), Some(true));
        assert_eq!(truth("x BETWEEN 1 AND 3", json!({"x": 3})), Some(true));
        assert_eq!(truth("x NOT BETWEEN 1 AND 3", json!({"x": 4})), Some(true));
        assert_eq!(truth("x NOT BETWEEN 1 AND 3", json!({})), None);
        // Strings.
        assert_eq!(truth("s PREFIX 'ab'", json!({"s": "abc"})), Some(true));
        assert_eq!(
            truth("s SUFFIX 'bc' AND s CONTAINS 'b'", json!({"s": "abc"})),
            Some(true)
        );
        assert_eq!(truth("s NOT PREFIX 'b'", json!({"s": "abc"})), Some(true));
        assert_eq!(truth("s < 'b'", json!({"s": "abc"})), Some(true));
        assert_eq!(truth("s = 'it''s'", json!({"s": "it's"})), Some(true));
    }

    #[test]
    fn nan_is_unknown() {
        let rec: &[(&str, crate::AttrValue)] = &[("x", f64::NAN.into())];
        for p in ["x = 1", "x != 1", "x < 1", "NOT x < 1", "x IN (1)"] {
            assert_eq!(Predicate::parse(p).unwrap().truth(rec), None, "{p}");
        }
        assert_eq!(Predicate::parse("EXISTS x").unwrap().truth(rec), Some(true));
    }

    #[test]
    fn dnf_normalization() {
        let p = Predicate::parse("NOT (a < 5 OR b = 'x') AND (c = 1 OR d = 2)").unwrap();
        assert_eq!(p.conjunctions(), 2);
        let c0 = &p.dnf()[0];
        assert_eq!(c0.len(), 3);
        assert!(matches!(c0[0].test, Test::Cmp(CmpOp::Ge, _)) && !c0[0].negated);
        assert!(matches!(c0[1].test, Test::Cmp(CmpOp::Eq, _)) && c0[1].negated);
        let blowup = (0..9)
            .map(|i| format!("(a{i} = 1 OR b{i} = 2)"))
            .collect::<Vec<_>>()
            .join(" AND ");
        assert_eq!(
            Predicate::parse(&blowup).unwrap_err(),
            PredicateError::TooComplex
        );
        let ok = (0..8)
            .map(|i| format!("(a{i} = 1 OR b{i} = 2)"))
            .collect::<Vec<_>>()
            .join(" AND ");
        assert_eq!(Predicate::parse(&ok).unwrap().conjunctions(), 256);
    }

    #[test]
    fn serde_is_the_text() {
        let p = Predicate::parse("price > 100").unwrap();
        assert_eq!(serde_json::to_string(&p).unwrap(), r#""price > 100""#);
        assert_eq!(
            serde_json::from_str::<Predicate>(r#""price > 100""#).unwrap(),
            p
        );
        let err = serde_json::from_str::<Predicate>(r#""price >""#)
            .unwrap_err()
            .to_string();
        assert!(err.contains("column 8"), "{err}");
    }
}
