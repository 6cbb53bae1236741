//! The predicate parser: a lexer and a recursive-descent parser for the SQL-like and the
//! PADRES syntax (documented in [`crate::predicate`]). Errors carry a 1-based column.

use crate::attrs::Num;
use crate::predicate::{Atom, CmpOp, Expr, Literal, PredicateError, StrOp, Test, MAX_DEPTH};

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Name(String),
    Num(Num),
    Str(String),
    /// A comparison: the operator and whether it is negated (`!=`, `<>`).
    Cmp(CmpOp, bool),
    LParen,
    RParen,
    LBracket,
    RBracket,
    Comma,
    End,
}

impl Tok {
    fn describe(&self) -> String {
        match self {
            Tok::Name(n) => format!("`{n}`"),
            Tok::Num(Num::Int(i)) => format!("`{i}`"),
            Tok::Num(Num::Float(f)) => format!("`{f}`"),
            Tok::Str(s) => format!("'{s}'"),
            Tok::Cmp(..) => "a comparison operator".into(),
            Tok::LParen => "`(`".into(),
            Tok::RParen => "`)`".into(),
            Tok::LBracket => "`[`".into(),
            Tok::RBracket => "`]`".into(),
            Tok::Comma => "`,`".into(),
            Tok::End => "the end of the predicate".into(),
        }
    }
}

const KEYWORDS: &[&str] = &[
    "AND", "OR", "NOT", "IN", "BETWEEN", "PREFIX", "SUFFIX", "CONTAINS", "EXISTS", "TRUE", "FALSE",
];

fn syntax(column: usize, message: impl Into<String>) -> PredicateError {
    PredicateError::Syntax {
        column,
        message: message.into(),
    }
}

/// Splits `text` into tokens, each with its 1-based column; the last is [`Tok::End`].
fn lex(text: &str) -> Result<Vec<(Tok, usize)>, PredicateError> {
    let chars: Vec<char> = text.chars().collect();
    let mut toks = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let col = i + 1;
        let at = |j: usize| chars.get(j).copied();
        let (tok, len) = match c {
            _ if c.is_whitespace() => {
                i += 1;
                continue;
            }
            '(' => (Tok::LParen, 1),
            ')' => (Tok::RParen, 1),
            '[' => (Tok::LBracket, 1),
            ']' => (Tok::RBracket, 1),
            ',' => (Tok::Comma, 1),
            '=' => (Tok::Cmp(CmpOp::Eq, false), 1),
            '!' if at(i + 1) == Some('=') => (Tok::Cmp(CmpOp::Eq, true), 2),
            '<' if at(i + 1) == Some('>') => (Tok::Cmp(CmpOp::Eq, true), 2),
            '<' if at(i + 1) == Some('=') => (Tok::Cmp(CmpOp::Le, false), 2),
            '<' => (Tok::Cmp(CmpOp::Lt, false), 1),
            '>' if at(i + 1) == Some('=') => (Tok::Cmp(CmpOp::Ge, false), 2),
            '>' => (Tok::Cmp(CmpOp::Gt, false), 1),
            '\'' => {
                let mut s = String::new();
                let mut j = i + 1;
                loop {
                    match at(j) {
                        None => {
                            return Err(syntax(
                                col,
                                "unterminated string: a closing `'` is missing",
                            ))
                        }
                        Some('\'') if at(j + 1) == Some('\'') => {
                            s.push('\'');
                            j += 2;
                        }
                        Some('\'') => break,
                        Some(ch) => {
                            s.push(ch);
                            j += 1;
                        }
                    }
                }
                (Tok::Str(s), j + 1 - i)
            }
            '"' => return Err(syntax(col, "strings use single quotes: 'like this'")),
            '-' | '0'..='9' => {
                let mut j = i + usize::from(c == '-');
                let digits = |j: &mut usize| {
                    let start = *j;
                    while at(*j).is_some_and(|d| d.is_ascii_digit()) {
                        *j += 1;
                    }
                    *j > start
                };
                if !digits(&mut j) {
                    return Err(syntax(col, "expected a digit after `-`"));
                }
                let mut float = false;
                if at(j) == Some('.') {
                    j += 1;
                    float = true;
                    if !digits(&mut j) {
                        return Err(syntax(j + 1, "expected a digit after the decimal point"));
                    }
                }
                if matches!(at(j), Some('e' | 'E')) {
                    j += 1;
                    float = true;
                    if matches!(at(j), Some('+' | '-')) {
                        j += 1;
                    }
                    if !digits(&mut j) {
                        return Err(syntax(j + 1, "expected a digit in the exponent"));
                    }
                }
                let s: String = chars[i..j].iter().collect();
                let int = if float { None } else { s.parse::<i64>().ok() };
                let num = match int {
                    Some(v) => Num::Int(v),
                    None => match s.parse::<f64>() {
                        Ok(f) if f.is_finite() => Num::Float(f),
                        _ => return Err(syntax(col, format!("number `{s}` is out of range"))),
                    },
                };
                (Tok::Num(num), j - i)
            }
            _ if c.is_ascii_alphabetic() || c == '_' || c == '$' => {
                let mut j = i + 1;
                while at(j).is_some_and(|d| {
                    d.is_ascii_alphanumeric() || matches!(d, '_' | '.' | '$' | '-')
                }) {
                    j += 1;
                }
                (Tok::Name(chars[i..j].iter().collect()), j - i)
            }
            _ => return Err(syntax(col, format!("unexpected character `{c}`"))),
        };
        toks.push((tok, col));
        i += len;
    }
    toks.push((Tok::End, chars.len() + 1));
    Ok(toks)
}

struct Parser {
    toks: Vec<(Tok, usize)>,
    pos: usize,
    depth: usize,
}

/// Parses a predicate's text into its syntax tree.
pub(crate) fn parse(text: &str) -> Result<Expr, PredicateError> {
    let mut p = Parser {
        toks: lex(text)?,
        pos: 0,
        depth: 0,
    };
    if p.peek() == &Tok::LBracket {
        return p.padres();
    }
    if p.peek() == &Tok::End {
        return Err(p.error("a predicate"));
    }
    let e = p.or()?;
    if p.peek() != &Tok::End {
        return Err(p.error("AND, OR or the end of the predicate"));
    }
    Ok(e)
}

impl Parser {
    fn peek(&self) -> &Tok {
        &self.toks[self.pos].0
    }

    fn column(&self) -> usize {
        self.toks[self.pos].1
    }

    fn next(&mut self) -> Tok {
        let t = self.toks[self.pos].0.clone();
        if self.pos + 1 < self.toks.len() {
            self.pos += 1;
        }
        t
    }

    fn error(&self, expected: &str) -> PredicateError {
        syntax(
            self.column(),
            format!("expected {expected}, found {}", self.peek().describe()),
        )
    }

    fn expect(&mut self, tok: Tok, expected: &str) -> Result<(), PredicateError> {
        if self.peek() == &tok {
            self.next();
            Ok(())
        } else {
            Err(self.error(expected))
        }
    }

    fn is_keyword(&self, kw: &str) -> bool {
        matches!(self.peek(), Tok::Name(n) if n.eq_ignore_ascii_case(kw))
    }

    fn keyword(&mut self, kw: &str) -> bool {
        let found = self.is_keyword(kw);
        if found {
            self.next();
        }
        found
    }

    fn nest(&mut self) -> Result<(), PredicateError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(syntax(
                self.column(),
                format!("nesting deeper than {MAX_DEPTH} levels"),
            ));
        }
        Ok(())
    }

    fn or(&mut self) -> Result<Expr, PredicateError> {
        let mut es = vec![self.and()?];
        while self.keyword("OR") {
            es.push(self.and()?);
        }
        Ok(if es.len() == 1 {
            es.remove(0)
        } else {
            Expr::Or(es)
        })
    }

    fn and(&mut self) -> Result<Expr, PredicateError> {
        let mut es = vec![self.not()?];
        while self.keyword("AND") {
            es.push(self.not()?);
        }
        Ok(if es.len() == 1 {
            es.remove(0)
        } else {
            Expr::And(es)
        })
    }

    fn not(&mut self) -> Result<Expr, PredicateError> {
        if self.keyword("NOT") {
            self.nest()?;
            let e = self.not()?;
            self.depth -= 1;
            return Ok(Expr::Not(Box::new(e)));
        }
        self.atom()
    }

    fn name(&mut self, expected: &str) -> Result<String, PredicateError> {
        match self.peek() {
            Tok::Name(n) if !KEYWORDS.iter().any(|k| n.eq_ignore_ascii_case(k)) => {
                let n = n.clone();
                self.next();
                Ok(n)
            }
            _ => Err(self.error(expected)),
        }
    }

    fn atom(&mut self) -> Result<Expr, PredicateError> {
        if self.peek() == &Tok::LParen {
            self.next();
            self.nest()?;
            let e = self.or()?;
            self.expect(Tok::RParen, "`)`, AND or OR")?;
            self.depth -= 1;
            return Ok(e);
        }
        if self.keyword("EXISTS") {
            let attr = self.name("an attribute name after EXISTS")?;
            return Ok(atom(attr, false, Test::Exists));
        }
        let attr = self.name("an attribute name, NOT, EXISTS or `(`")?;
        if let Tok::Cmp(op, negated) = *self.peek() {
            self.next();
            let col = self.column();
            let lit = self.literal()?;
            if matches!(lit, Literal::Bool(_)) && op != CmpOp::Eq {
                return Err(syntax(col, "booleans only compare with = and !="));
            }
            return Ok(atom(attr, negated, Test::Cmp(op, lit)));
        }
        if self.keyword("EXISTS") {
            return Ok(atom(attr, false, Test::Exists));
        }
        let negated = self.keyword("NOT");
        let test = if self.keyword("IN") {
            self.in_list()?
        } else if self.keyword("BETWEEN") {
            let (lo_col, lo) = (self.column(), self.literal()?);
            if !self.keyword("AND") {
                return Err(self.error("AND between the bounds of BETWEEN"));
            }
            let (hi_col, hi) = (self.column(), self.literal()?);
            for (col, lit) in [(lo_col, &lo), (hi_col, &hi)] {
                if matches!(lit, Literal::Bool(_)) {
                    return Err(syntax(
                        col,
                        "BETWEEN needs numbers or strings, not booleans",
                    ));
                }
            }
            if std::mem::discriminant(&lo) != std::mem::discriminant(&hi) {
                return Err(syntax(
                    hi_col,
                    "the bounds of BETWEEN must have the same type",
                ));
            }
            let range = Expr::And(vec![
                atom(attr.clone(), false, Test::Cmp(CmpOp::Ge, lo)),
                atom(attr, false, Test::Cmp(CmpOp::Le, hi)),
            ]);
            return Ok(if negated {
                Expr::Not(Box::new(range))
            } else {
                range
            });
        } else if let Some(op) = self.str_op() {
            Test::Str(op, self.string()?.into())
        } else if negated {
            return Err(self.error("IN, BETWEEN, PREFIX, SUFFIX or CONTAINS after NOT"));
        } else {
            return Err(self.error(&format!(
                "a comparison (=, !=, <, <=, >, >=), IN, BETWEEN, PREFIX, SUFFIX, CONTAINS or \
                 EXISTS after `{attr}`"
            )));
        };
        Ok(atom(attr, negated, test))
    }

    fn str_op(&mut self) -> Option<StrOp> {
        [
            ("PREFIX", StrOp::Prefix),
            ("SUFFIX", StrOp::Suffix),
            ("CONTAINS", StrOp::Contains),
        ]
        .into_iter()
        .find(|(kw, _)| self.keyword(kw))
        .map(|(_, op)| op)
    }

    fn string(&mut self) -> Result<String, PredicateError> {
        match self.peek() {
            Tok::Str(s) => {
                let s = s.clone();
                self.next();
                Ok(s)
            }
            _ => Err(self.error("a 'string'")),
        }
    }

    fn literal(&mut self) -> Result<Literal, PredicateError> {
        let lit = match self.peek() {
            Tok::Num(n) => Literal::Num(*n),
            Tok::Str(s) => Literal::Str(s.as_str().into()),
            _ if self.is_keyword("TRUE") => Literal::Bool(true),
            _ if self.is_keyword("FALSE") => Literal::Bool(false),
            _ => return Err(self.error("a value (a number, a 'string', TRUE or FALSE)")),
        };
        self.next();
        Ok(lit)
    }

    fn in_list(&mut self) -> Result<Test, PredicateError> {
        self.expect(Tok::LParen, "`(` after IN")?;
        let mut list: Vec<Literal> = Vec::new();
        loop {
            let col = self.column();
            let lit = self.literal()?;
            if list
                .first()
                .is_some_and(|first| std::mem::discriminant(first) != std::mem::discriminant(&lit))
            {
                return Err(syntax(
                    col,
                    "the values of an IN list must have the same type",
                ));
            }
            let duplicate = list.iter().any(|l| match (l, &lit) {
                (Literal::Num(a), Literal::Num(b)) => a.key() == b.key(),
                _ => *l == lit,
            });
            if !duplicate {
                list.push(lit);
            }
            if self.peek() == &Tok::Comma {
                self.next();
            } else {
                self.expect(Tok::RParen, "`,` or `)` in the IN list")?;
                return Ok(Test::In(list));
            }
        }
    }

    /// `[name,op,value]` triples separated by commas: their conjunction.
    fn padres(&mut self) -> Result<Expr, PredicateError> {
        let mut es = Vec::new();
        loop {
            self.expect(Tok::LBracket, "`[`")?;
            let attr = self.name("an attribute name")?;
            self.expect(Tok::Comma, "`,` after the attribute name")?;
            let op_col = self.column();
            let op = match self.next() {
                Tok::Cmp(op, negated) => PadresOp::Cmp(op, negated),
                Tok::Name(n) => match n.to_ascii_lowercase().as_str() {
                    "eq" => PadresOp::Cmp(CmpOp::Eq, false),
                    "neq" => PadresOp::Cmp(CmpOp::Eq, true),
                    "str-prefix" => PadresOp::Str(StrOp::Prefix),
                    "str-postfix" => PadresOp::Str(StrOp::Suffix),
                    "str-contains" => PadresOp::Str(StrOp::Contains),
                    "ispresent" => PadresOp::Present,
                    _ => return Err(syntax(op_col, format!("unknown PADRES operator `{n}`"))),
                },
                t => {
                    return Err(syntax(
                        op_col,
                        format!("expected an operator, found {}", t.describe()),
                    ))
                }
            };
            self.expect(Tok::Comma, "`,` after the operator")?;
            let val_col = self.column();
            let lit = match self.peek() {
                Tok::Name(n)
                    if !n.eq_ignore_ascii_case("true") && !n.eq_ignore_ascii_case("false") =>
                {
                    let s = Literal::Str(n.as_str().into());
                    self.next();
                    s
                }
                _ => self.literal()?,
            };
            let (negated, test) = match (op, lit) {
                (PadresOp::Cmp(op, _), Literal::Bool(_)) if op != CmpOp::Eq => {
                    return Err(syntax(val_col, "booleans only compare with = and !="));
                }
                (PadresOp::Cmp(op, negated), lit) => (negated, Test::Cmp(op, lit)),
                (PadresOp::Str(op), Literal::Str(s)) => (false, Test::Str(op, s)),
                (PadresOp::Str(_), _) => {
                    return Err(syntax(val_col, "a string operator needs a 'string'"))
                }
                (PadresOp::Present, _) => (false, Test::Exists),
            };
            es.push(atom(attr, negated, test));
            self.expect(Tok::RBracket, "`]`")?;
            match self.next() {
                Tok::Comma => continue,
                Tok::End => break,
                t => {
                    let col = self.toks[self.pos.saturating_sub(1)].1;
                    return Err(syntax(
                        col,
                        format!("expected `,` or the end, found {}", t.describe()),
                    ));
                }
            }
        }
        Ok(if es.len() == 1 {
            es.remove(0)
        } else {
            Expr::And(es)
        })
    }
}

/// A PADRES operator.
enum PadresOp {
    Cmp(CmpOp, bool),
    Str(StrOp),
    Present,
}

fn atom(attr: String, negated: bool, test: Test) -> Expr {
    Expr::Atom(Atom {
        attr: attr.into(),
        negated,
        test,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(text: &str) -> String {
        parse(text).unwrap_err().to_string()
    }

    #[test]
    fn accepts() {
        for ok in [
            "price > 100",
            "price>=100.5 and class = 'stock'",
            "NOT (a = 1 OR b <> 'x') AND c != -3",
            "x IN (1, 2, 3) OR y NOT IN ('a')",
            "EXISTS a AND b EXISTS",
            "s PREFIX 'ab' OR s NOT SUFFIX 'z' OR s CONTAINS ''",
            "t = TRUE AND u != false",
            "x BETWEEN 1 AND 5 AND y NOT BETWEEN 'a' AND 'c'",
            "quote.price < 1e3",
            "[class,eq,'stock'],[price,>,100]",
            "[a,neq,1],[b,str-prefix,'x'],[c,isPresent,0],[d,<=,-2.5],[e,eq,true]",
        ] {
            assert!(parse(ok).is_ok(), "{ok}: {:?}", parse(ok));
        }
    }

    #[test]
    fn errors_name_the_column() {
        assert_eq!(err("price >"), "column 8: expected a value (a number, a 'string', TRUE or FALSE), found the end of the predicate");
        assert_eq!(err("price > 100 AND"), "column 16: expected an attribute name, NOT, EXISTS or `(`, found the end of the predicate");
        assert_eq!(
            err("a = 'x"),
            "column 5: unterminated string: a closing `'` is missing"
        );
        assert_eq!(
            err("a = \"x\""),
            "column 5: strings use single quotes: 'like this'"
        );
        assert_eq!(
            err("(a = 1"),
            "column 7: expected `)`, AND or OR, found the end of the predicate"
        );
        assert_eq!(
            err("a = 1 b = 2"),
            "column 7: expected AND, OR or the end of the predicate, found `b`"
        );
        assert_eq!(
            err("a IN (1, 'x')"),
            "column 10: the values of an IN list must have the same type"
        );
        assert_eq!(
            err("a < true"),
            "column 5: booleans only compare with = and !="
        );
        assert_eq!(err("a ~ 1"), "column 3: unexpected character `~`");
        assert_eq!(err("a 1"), "column 3: expected a comparison (=, !=, <, <=, >, >=), IN, BETWEEN, PREFIX, SUFFIX, CONTAINS or EXISTS after `a`, found `1`");
        assert_eq!(
            err("AND = 1"),
            "column 1: expected an attribute name, NOT, EXISTS or `(`, found `AND`"
        );
        assert_eq!(
            err(""),
            "column 1: expected a predicate, found the end of the predicate"
        );
        assert_eq!(err("a = 1e999"), "column 5: number `1e999` is out of range");
        assert_eq!(
            err("[a,like,1]"),
            "column 4: unknown PADRES operator `like`"
        );
        assert_eq!(
            err("[a,eq,1] [b,eq,2]"),
            "column 10: expected `,` or the end, found `[`"
        );
        assert!(err(&"(".repeat(100)).contains("nesting deeper than 64 levels"));
        assert!(err(&"NOT ".repeat(100)).contains("nesting deeper than 64 levels"));
    }

    #[test]
    fn in_lists_drop_duplicates() {
        let Ok(Expr::Atom(a)) = parse("x IN (1, 1.0, 2, 1)") else {
            panic!()
        };
        assert_eq!(
            a.test,
            Test::In(vec![Literal::Num(Num::Int(1)), Literal::Num(Num::Int(2))])
        );
    }
}
