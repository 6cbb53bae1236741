//! Parsing Flink SQL scripts: statements split and parsed with `sqlparser`, and Flink's DDL
//! (which no `sqlparser` dialect has) parsed here on `sqlparser`'s tokens.
//!
//! Queries (`SELECT`, the query of `INSERT INTO` and `CREATE VIEW`) are `sqlparser`'s
//! [`Query`] under its generic dialect, which takes Flink's backtick identifiers, `FILTER
//! (WHERE ...)` and `INTERVAL '4' SECOND`. Identifiers keep their case, as Flink's do.
//!
//! Flink's DDL is parsed by [`parse_script`]'s own routines on the same parser:
//!
//! ```sql
//! CREATE [TEMPORARY] TABLE [IF NOT EXISTS] name (
//!     col TYPE [NOT NULL], ...,               -- physical columns (TYPE may be ROW<...>)
//!     col AS expr, ...,                       -- computed columns
//!     WATERMARK FOR col AS expr,              -- the rowtime column and its watermark
//!     PRIMARY KEY (col, ...) NOT ENFORCED
//! ) [PARTITIONED BY (col, ...)] WITH ('key' = 'value', ...);
//! CREATE [TEMPORARY] VIEW name AS query;
//! CREATE [TEMPORARY [SYSTEM]] FUNCTION name AS 'class' [LANGUAGE JAVA|SCALA|PYTHON];
//! INSERT INTO name [(col, ...)] query;
//! SET ['key' = 'value'];  RESET ['key'];  SHOW TABLES|VIEWS|FUNCTIONS;  DESCRIBE name;
//! EXPLAIN query;  DROP TABLE|VIEW|FUNCTION [IF EXISTS] name;
//! ALTER TABLE [IF EXISTS] name SET ('key' = 'value', ...) | RESET ('key', ...);
//! ```
//!
//! Every statement keeps the line and column where it starts, for error messages.

use sqlparser::ast::{Expr, Ident, Query};
use sqlparser::dialect::GenericDialect;
use sqlparser::keywords::Keyword;
use sqlparser::parser::{Parser, ParserError};
use sqlparser::tokenizer::{Location, Token, TokenWithSpan, Tokenizer, Word};

use crate::types::SqlType;
use crate::SqlError;

/// One statement of a script, with where it starts.
#[derive(Debug, Clone)]
pub struct Located {
    /// The statement.
    pub statement: Statement,
    /// Its first line (1-based).
    pub line: u64,
    /// Its first column (1-based).
    pub column: u64,
}

/// A parsed statement.
#[derive(Debug, Clone)]
pub enum Statement {
    /// `CREATE TABLE`.
    CreateTable(Box<TableDef>),
    /// `CREATE VIEW name AS query`.
    CreateView {
        /// The view's name.
        name: String,
        /// Its query.
        query: Box<Query>,
    },
    /// `CREATE FUNCTION name AS 'class'`.
    CreateFunction {
        /// The function's name in SQL.
        name: String,
        /// The class (Java's, for Flink) that implements it.
        class: String,
    },
    /// `INSERT INTO table [(columns)] query`.
    Insert {
        /// The target table.
        table: String,
        /// The target columns, when listed.
        columns: Vec<String>,
        /// The rows.
        query: Box<Query>,
    },
    /// A `SELECT` (or any query) on its own.
    Query(Box<Query>),
    /// `EXPLAIN query`.
    Explain(Box<Query>),
    /// `EXPLAIN INSERT INTO ...`: the [`Statement::Insert`] it explains.
    ExplainInsert(Box<Statement>),
    /// `SET 'key' = 'value'`, or `SET` alone (list the settings).
    Set(Option<(String, String)>),
    /// `RESET ['key']`.
    Reset(Option<String>),
    /// `SHOW TABLES`, `SHOW VIEWS`, `SHOW FUNCTIONS`.
    Show(String),
    /// `DESCRIBE name`.
    Describe(String),
    /// `ALTER TABLE [IF EXISTS] name SET ('key' = 'value', ...)` or `... RESET ('key',
    /// ...)`: the table's `WITH` options changed (Flink's).
    AlterOptions {
        /// The table.
        name: String,
        /// Whether `IF EXISTS` was given.
        if_exists: bool,
        /// The options set.
        set: Vec<(String, String)>,
        /// The options removed.
        reset: Vec<String>,
    },
    /// `DROP TABLE|VIEW|FUNCTION [IF EXISTS] name`.
    Drop {
        /// `TABLE`, `VIEW` or `FUNCTION`.
        kind: String,
        /// The name.
        name: String,
        /// Whether `IF EXISTS` was given.
        if_exists: bool,
    },
}

/// A `CREATE TABLE` statement.
#[derive(Debug, Clone)]
pub struct TableDef {
    /// The table's name.
    pub name: String,
    /// Its columns, physical and computed, in declaration order.
    pub columns: Vec<ColumnDef>,
    /// `WATERMARK FOR column AS expr`.
    pub watermark: Option<(String, Expr)>,
    /// `PRIMARY KEY (...) NOT ENFORCED`.
    pub primary_key: Vec<String>,
    /// `PARTITIONED BY (...)`.
    pub partitioned_by: Vec<String>,
    /// The `WITH` options, in order.
    pub options: Vec<(String, String)>,
    /// `IF NOT EXISTS`.
    pub if_not_exists: bool,
}

/// One column of a [`TableDef`].
#[derive(Debug, Clone)]
pub enum ColumnDef {
    /// A column read from the connector.
    Physical {
        /// Its name.
        name: String,
        /// Its type.
        ty: SqlType,
        /// Whether it was declared `NOT NULL`.
        not_null: bool,
    },
    /// `name AS expr`: computed from the physical columns.
    Computed {
        /// Its name.
        name: String,
        /// The expression.
        expr: Box<Expr>,
    },
}

impl ColumnDef {
    /// The column's name.
    pub fn name(&self) -> &str {
        match self {
            ColumnDef::Physical { name, .. } | ColumnDef::Computed { name, .. } => name,
        }
    }
}

/// Replaces `${NAME}` in `text` with `vars`' value of `NAME` (as the Nexmark suite's scripts
/// are written), or says which variable is not defined.
pub fn substitute(text: &str, vars: &[(String, String)]) -> Result<String, SqlError> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("${") {
        out.push_str(&rest[..at]);
        let after = &rest[at + 2..];
        let Some(end) = after.find('}') else {
            out.push_str(&rest[at..]);
            rest = "";
            break;
        };
        let name = &after[..end];
        match vars.iter().rev().find(|(k, _)| k == name) {
            Some((_, v)) => out.push_str(v),
            None => {
                let line = text[..text.len() - rest.len() + at].matches('\n').count() + 1;
                return Err(SqlError::plan(format!(
                    "line {line}: the variable ${{{name}}} is not defined (define it with --define {name}=VALUE)"
                )));
            }
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// Parses a script of `;`-separated statements.
pub fn parse_script(text: &str) -> Result<Vec<Located>, SqlError> {
    let dialect = GenericDialect {};
    let tokens = Tokenizer::new(&dialect, text)
        .tokenize_with_location()
        .map_err(|e| SqlError::Parse(e.to_string()))?;
    let mut parser = Parser::new(&dialect).with_tokens_with_locations(table_arguments(tokens));
    let mut out = Vec::new();
    loop {
        while parser.consume_token(&Token::SemiColon) {}
        let start = parser.peek_token();
        if start.token == Token::EOF {
            break;
        }
        let Location { line, column } = start.span.start;
        let statement = statement(&mut parser).map_err(SqlError::parse)?;
        out.push(Located {
            statement,
            line,
            column,
        });
        let next = parser.peek_token();
        if next.token != Token::EOF && next.token != Token::SemiColon {
            return Err(SqlError::parse(ParserError::ParserError(format!(
                "expected `;` after the statement, found {} at Line: {}, Column: {}",
                next.token, next.span.start.line, next.span.start.column
            ))));
        }
    }
    Ok(out)
}

/// The name of the call that a table argument (`TABLE name [PARTITION BY cols]`) of a
/// table function becomes: `__table__(name[, col...])`.
pub const TABLE_ARGUMENT: &str = "__table__";

/// What a table joined `FOR SYSTEM_TIME AS OF ...` becomes: `__lookup__(name)`.
pub const LOOKUP_TABLE: &str = "__lookup__";

/// Rewrites the table arguments of window table functions, `TUMBLE(TABLE bid, ...)` and
/// `SESSION(TABLE bid PARTITION BY bidder, ...)`, which no `sqlparser` dialect parses, into
/// calls `__table__(bid)` and `__table__(bid, bidder)` that the planner reads back; tokens
/// keep their places, so errors point into the original text.
fn table_arguments(tokens: Vec<TokenWithSpan>) -> Vec<TokenWithSpan> {
    let significant = |t: &TokenWithSpan| !matches!(t.token, Token::Whitespace(_));
    let is_word =
        |t: &TokenWithSpan, k: Keyword| matches!(&t.token, Token::Word(w) if w.keyword == k);
    let word = |value: &str, span| TokenWithSpan {
        token: Token::Word(Word {
            value: value.to_string(),
            quote_style: None,
            keyword: Keyword::NoKeyword,
        }),
        span,
    };
    let mut out: Vec<TokenWithSpan> = Vec::with_capacity(tokens.len());
    let mut i = 0;
    while i < tokens.len() {
        let t = &tokens[i];
        let after_open = out
            .iter()
            .rev()
            .find(|t| significant(t))
            .is_some_and(|p| matches!(p.token, Token::LParen | Token::Comma));
        // The next significant tokens after `i`.
        let next: Vec<usize> = (i + 1..tokens.len())
            .filter(|&j| significant(&tokens[j]))
            .take(3)
            .collect();
        let name_follows = next
            .first()
            .is_some_and(|&j| matches!(tokens[j].token, Token::Word(_)))
            && next
                .get(1)
                .is_none_or(|&j| !matches!(tokens[j].token, Token::LParen | Token::Period));
        // `t FOR SYSTEM_TIME AS OF expr` after a join (Flink's lookup and temporal joins):
        // the clause, up to the alias or ON, is dropped and the table becomes
        // `__lookup__(t)`, which the planner plans as a lookup join's table.
        let word_at = |j: Option<&usize>, w: &str| {
            j.is_some_and(
                |&j| matches!(&tokens[j].token, Token::Word(x) if x.value.eq_ignore_ascii_case(w)),
            )
        };
        if is_word(t, Keyword::FOR)
            && word_at(next.first(), "SYSTEM_TIME")
            && word_at(next.get(1), "AS")
            && word_at(next.get(2), "OF")
        {
            // The table's name, the last word before the clause.
            while out.last().is_some_and(|t| !significant(t)) {
                out.pop();
            }
            if let Some(name) = out.pop_if(|t| matches!(t.token, Token::Word(_))) {
                let span = name.span;
                out.push(word(LOOKUP_TABLE, span));
                out.push(TokenWithSpan {
                    token: Token::LParen,
                    span,
                });
                out.push(name);
                out.push(TokenWithSpan {
                    token: Token::RParen,
                    span,
                });
                out.push(TokenWithSpan {
                    token: Token::Whitespace(sqlparser::tokenizer::Whitespace::Space),
                    span,
                });
            }
            let mut j = next[2] + 1;
            let mut depth = 0i32;
            while j < tokens.len() {
                match &tokens[j].token {
                    Token::LParen => depth += 1,
                    Token::RParen if depth == 0 => break,
                    Token::RParen => depth -= 1,
                    Token::SemiColon => break,
                    Token::Word(w)
                        if depth == 0
                            && matches!(
                                w.keyword,
                                Keyword::AS
                                    | Keyword::ON
                                    | Keyword::JOIN
                                    | Keyword::INNER
                                    | Keyword::LEFT
                                    | Keyword::WHERE
                                    | Keyword::USING
                            ) =>
                    {
                        break
                    }
                    _ => {}
                }
                j += 1;
            }
            i = j;
            continue;
        }
        if is_word(t, Keyword::TABLE) && after_open && name_follows {
            let span = t.span;
            out.push(word(TABLE_ARGUMENT, span));
            out.push(TokenWithSpan {
                token: Token::LParen,
                span,
            });
            let name = next[0];
            out.push(tokens[name].clone());
            i = name + 1;
            // PARTITION BY a, b  or  PARTITION BY (a, b)
            let sig = |from: usize| (from..tokens.len()).find(|&j| significant(&tokens[j]));
            if let (Some(p), Some(b)) = (sig(i), sig(i).and_then(|p| sig(p + 1))) {
                if is_word(&tokens[p], Keyword::PARTITION) && is_word(&tokens[b], Keyword::BY) {
                    i = b + 1;
                    let parenthesized = sig(i).is_some_and(|j| tokens[j].token == Token::LParen);
                    if parenthesized {
                        i = sig(i).unwrap_or(i) + 1;
                    }
                    while let Some(col) = sig(i) {
                        if !matches!(tokens[col].token, Token::Word(_)) {
                            break;
                        }
                        out.push(TokenWithSpan {
                            token: Token::Comma,
                            span,
                        });
                        out.push(tokens[col].clone());
                        i = col + 1;
                        let Some(c) = sig(i) else { break };
                        if tokens[c].token == Token::RParen && parenthesized {
                            i = c + 1;
                            break;
                        }
                        if tokens[c].token != Token::Comma {
                            break;
                        }
                        // Another key, or the function's next argument?
                        let Some(w) = sig(c + 1) else { break };
                        let key = matches!(tokens[w].token, Token::Word(ref x) if x.keyword != Keyword::INTERVAL)
                            && sig(w + 1).is_some_and(|e| {
                                matches!(tokens[e].token, Token::Comma | Token::RParen)
                            });
                        if !key && !parenthesized {
                            break;
                        }
                        i = c + 1;
                    }
                }
            }
            out.push(TokenWithSpan {
                token: Token::RParen,
                span,
            });
            continue;
        }
        out.push(t.clone());
        i += 1;
    }
    out
}

fn err<T>(parser: &Parser<'_>, what: &str) -> Result<T, ParserError> {
    let t = parser.peek_token();
    Err(ParserError::ParserError(format!(
        "expected {what}, found {} at Line: {}, Column: {}",
        t.token, t.span.start.line, t.span.start.column
    )))
}

/// Whether the next token is the (unreserved) word `word`, consuming it if so.
fn word(parser: &mut Parser<'_>, word: &str) -> bool {
    match &parser.peek_token().token {
        Token::Word(w) if w.quote_style.is_none() && w.value.eq_ignore_ascii_case(word) => {
            parser.next_token();
            true
        }
        _ => false,
    }
}

fn statement(parser: &mut Parser<'_>) -> Result<Statement, ParserError> {
    if parser.parse_keyword(Keyword::CREATE) {
        let _ = parser.parse_keyword(Keyword::TEMPORARY);
        let _ = parser.parse_keyword(Keyword::SYSTEM);
        if parser.parse_keyword(Keyword::TABLE) {
            return create_table(parser).map(|d| Statement::CreateTable(Box::new(d)));
        }
        if parser.parse_keyword(Keyword::VIEW) {
            let name = name(parser)?;
            parser.expect_keyword(Keyword::AS)?;
            let query = parser.parse_query()?;
            return Ok(Statement::CreateView { name, query });
        }
        if parser.parse_keyword(Keyword::FUNCTION) {
            let _ = parser.parse_keywords(&[Keyword::IF, Keyword::NOT, Keyword::EXISTS]);
            let name = name(parser)?;
            parser.expect_keyword(Keyword::AS)?;
            let class = parser.parse_literal_string()?;
            if parser.parse_keyword(Keyword::LANGUAGE) {
                parser.next_token();
            }
            return Ok(Statement::CreateFunction { name, class });
        }
        return err(parser, "TABLE, VIEW or FUNCTION after CREATE");
    }
    if parser.parse_keyword(Keyword::INSERT) {
        return parse_insert(parser);
    }
    if parser.parse_keyword(Keyword::EXPLAIN) {
        // `EXPLAIN PLAN FOR` and Flink's `EXPLAIN [ESTIMATED_COST, ...]` details are accepted.
        let _ = parser.parse_keywords(&[Keyword::PLAN, Keyword::FOR]);
        if parser.parse_keyword(Keyword::INSERT) {
            // As Flink's: the plan of the query, fitted to the table it goes into.
            return Ok(Statement::ExplainInsert(Box::new(parse_insert(parser)?)));
        }
        return Ok(Statement::Explain(parser.parse_query()?));
    }
    if parser.parse_keyword(Keyword::SET) {
        if matches!(parser.peek_token().token, Token::SemiColon | Token::EOF) {
            return Ok(Statement::Set(None));
        }
        let key = setting_key(parser)?;
        parser.expect_token(&Token::Eq)?;
        let value = match parser.next_token().token {
            Token::SingleQuotedString(s) | Token::DoubleQuotedString(s) => s,
            Token::Number(n, _) => n,
            Token::Word(w) => w.value,
            _ => {
                parser.prev_token();
                return err(parser, "a value after `=`");
            }
        };
        return Ok(Statement::Set(Some((key, value))));
    }
    if parser.parse_keyword(Keyword::RESET) {
        if matches!(parser.peek_token().token, Token::SemiColon | Token::EOF) {
            return Ok(Statement::Reset(None));
        }
        return Ok(Statement::Reset(Some(setting_key(parser)?)));
    }
    if parser.parse_keyword(Keyword::SHOW) {
        let what = match parser.next_token().token {
            Token::Word(w) => w.value.to_ascii_uppercase(),
            _ => String::new(),
        };
        if !["TABLES", "VIEWS", "FUNCTIONS"].contains(&what.as_str()) {
            parser.prev_token();
            return err(parser, "TABLES, VIEWS or FUNCTIONS after SHOW");
        }
        return Ok(Statement::Show(what));
    }
    if parser.parse_keyword(Keyword::DESCRIBE) || parser.parse_keyword(Keyword::DESC) {
        return Ok(Statement::Describe(name(parser)?));
    }
    if parser.parse_keywords(&[Keyword::ALTER, Keyword::TABLE]) {
        let if_exists = parser.parse_keywords(&[Keyword::IF, Keyword::EXISTS]);
        let name = name(parser)?;
        let (mut set, mut reset) = (Vec::new(), Vec::new());
        if parser.parse_keyword(Keyword::SET) {
            set = options(parser)?;
        } else if parser.parse_keyword(Keyword::RESET) {
            parser.expect_token(&Token::LParen)?;
            reset = parser.parse_comma_separated(|p| p.parse_literal_string())?;
            parser.expect_token(&Token::RParen)?;
        } else {
            return err(
                parser,
                "SET ('key' = 'value', ...) or RESET ('key', ...) after ALTER TABLE name",
            );
        }
        return Ok(Statement::AlterOptions {
            name,
            if_exists,
            set,
            reset,
        });
    }
    if parser.parse_keyword(Keyword::DROP) {
        let _ = parser.parse_keyword(Keyword::TEMPORARY);
        let kind =
            match parser.parse_one_of_keywords(&[Keyword::TABLE, Keyword::VIEW, Keyword::FUNCTION])
            {
                Some(Keyword::TABLE) => "TABLE",
                Some(Keyword::VIEW) => "VIEW",
                Some(_) => "FUNCTION",
                None => return err(parser, "TABLE, VIEW or FUNCTION after DROP"),
            };
        let if_exists = parser.parse_keywords(&[Keyword::IF, Keyword::EXISTS]);
        return Ok(Statement::Drop {
            kind: kind.into(),
            name: name(parser)?,
            if_exists,
        });
    }
    match &parser.peek_token().token {
        Token::Word(w)
            if matches!(w.keyword, Keyword::SELECT | Keyword::WITH | Keyword::VALUES) =>
        {
            Ok(Statement::Query(parser.parse_query()?))
        }
        Token::LParen => Ok(Statement::Query(parser.parse_query()?)),
        _ => err(
            parser,
            "a statement (CREATE, INSERT, SELECT, EXPLAIN, SET, RESET, SHOW, DESCRIBE, ALTER or DROP)",
        ),
    }
}

/// The rest of `INSERT INTO table [(columns)] query`, after `INSERT`.
fn parse_insert(parser: &mut Parser<'_>) -> Result<Statement, ParserError> {
    if !parser.parse_keyword(Keyword::INTO) {
        parser.expect_keyword(Keyword::OVERWRITE)?;
    }
    let table = name(parser)?;
    let mut columns = Vec::new();
    // `(` starts a column list unless it starts the query (`INSERT INTO t (SELECT ...)`).
    if parser.peek_token().token == Token::LParen
        && !matches!(&parser.peek_nth_token(1).token, Token::Word(w) if w.keyword == Keyword::SELECT || w.keyword == Keyword::WITH)
    {
        parser.expect_token(&Token::LParen)?;
        columns = parser.parse_comma_separated(|p| p.parse_identifier().map(|i| i.value))?;
        parser.expect_token(&Token::RParen)?;
    }
    let query = parser.parse_query()?;
    Ok(Statement::Insert {
        table,
        columns,
        query,
    })
}

/// A setting's key: `'a.b'` or an unquoted dotted name.
fn setting_key(parser: &mut Parser<'_>) -> Result<String, ParserError> {
    match parser.next_token().token {
        Token::SingleQuotedString(s) | Token::DoubleQuotedString(s) => Ok(s),
        Token::Word(w) => {
            let mut key = w.value;
            while parser.consume_token(&Token::Period) {
                key.push('.');
                key.push_str(&parser.parse_identifier()?.value);
            }
            Ok(key)
        }
        _ => {
            parser.prev_token();
            err(parser, "a setting's key")
        }
    }
}

/// A (possibly qualified) object name; the last part is the name (catalog and database
/// prefixes are accepted and ignored: Spate has one catalog).
fn name(parser: &mut Parser<'_>) -> Result<String, ParserError> {
    let name = parser.parse_object_name(false)?;
    Ok(name
        .0
        .last()
        .and_then(|p| p.as_ident())
        .map(|i: &Ident| i.value.clone())
        .unwrap_or_default())
}

fn create_table(parser: &mut Parser<'_>) -> Result<TableDef, ParserError> {
    let if_not_exists = parser.parse_keywords(&[Keyword::IF, Keyword::NOT, Keyword::EXISTS]);
    let name = name(parser)?;
    let mut def = TableDef {
        name,
        columns: Vec::new(),
        watermark: None,
        primary_key: Vec::new(),
        partitioned_by: Vec::new(),
        options: Vec::new(),
        if_not_exists,
    };
    parser.expect_token(&Token::LParen)?;
    loop {
        if word(parser, "WATERMARK") {
            parser.expect_keyword(Keyword::FOR)?;
            let column = parser.parse_identifier()?.value;
            parser.expect_keyword(Keyword::AS)?;
            def.watermark = Some((column, parser.parse_expr()?));
        } else if parser.parse_keywords(&[Keyword::PRIMARY, Keyword::KEY]) {
            def.primary_key = paren_names(parser)?;
            parser.expect_keywords(&[Keyword::NOT, Keyword::ENFORCED])?;
        } else if parser.parse_keyword(Keyword::CONSTRAINT) {
            parser.parse_identifier()?;
            parser.expect_keywords(&[Keyword::PRIMARY, Keyword::KEY])?;
            def.primary_key = paren_names(parser)?;
            parser.expect_keywords(&[Keyword::NOT, Keyword::ENFORCED])?;
        } else {
            let column = parser.parse_identifier()?.value;
            if parser.parse_keyword(Keyword::AS) {
                def.columns.push(ColumnDef::Computed {
                    name: column,
                    expr: Box::new(parser.parse_expr()?),
                });
            } else {
                let ty = data_type(parser)?;
                let not_null = parser.parse_keywords(&[Keyword::NOT, Keyword::NULL]);
                if !not_null {
                    let _ = parser.parse_keyword(Keyword::NULL);
                }
                if parser.parse_keyword(Keyword::METADATA) {
                    return err(parser, "a column without METADATA (not supported yet)");
                }
                if parser.parse_keywords(&[Keyword::PRIMARY, Keyword::KEY]) {
                    parser.expect_keywords(&[Keyword::NOT, Keyword::ENFORCED])?;
                    def.primary_key = vec![column.clone()];
                }
                def.columns.push(ColumnDef::Physical {
                    name: column,
                    ty,
                    not_null,
                });
            }
        }
        if parser.consume_token(&Token::Comma) {
            continue;
        }
        parser.expect_token(&Token::RParen)?;
        break;
    }
    if parser.parse_keyword(Keyword::COMMENT) {
        parser.parse_literal_string()?;
    }
    if parser.parse_keywords(&[Keyword::PARTITIONED, Keyword::BY]) {
        def.partitioned_by = paren_names(parser)?;
    }
    if parser.parse_keyword(Keyword::WITH) {
        def.options = options(parser)?;
    }
    Ok(def)
}

/// `('key' = 'value', ...)`, in order.
fn options(parser: &mut Parser<'_>) -> Result<Vec<(String, String)>, ParserError> {
    let mut options = Vec::new();
    parser.expect_token(&Token::LParen)?;
    if !parser.consume_token(&Token::RParen) {
        loop {
            let key = parser.parse_literal_string()?;
            parser.expect_token(&Token::Eq)?;
            let value = parser.parse_literal_string()?;
            options.push((key, value));
            if !parser.consume_token(&Token::Comma) {
                break;
            }
        }
        parser.expect_token(&Token::RParen)?;
    }
    Ok(options)
}

fn paren_names(parser: &mut Parser<'_>) -> Result<Vec<String>, ParserError> {
    parser.expect_token(&Token::LParen)?;
    let names = parser.parse_comma_separated(|p| p.parse_identifier().map(|i| i.value))?;
    parser.expect_token(&Token::RParen)?;
    Ok(names)
}

/// Flink's data types: `BOOLEAN`, `TINYINT`/`SMALLINT`/`INT`/`INTEGER`, `BIGINT`,
/// `FLOAT`/`DOUBLE [PRECISION]`, `DECIMAL[(p[, s])]`/`NUMERIC`/`DEC`,
/// `CHAR`/`VARCHAR[(n)]`/`STRING`, `TIMESTAMP[(p)] [WITHOUT TIME ZONE]`/`TIMESTAMP_LTZ`, and
/// `ROW<name type, ...>` (or `ROW(...)`).
pub(crate) fn data_type(parser: &mut Parser<'_>) -> Result<SqlType, ParserError> {
    let mut pending = 0;
    data_type_in(parser, &mut pending)
}

/// [`data_type`], where `pending` counts the `>` of a `>>` that an inner ROW consumed for
/// its enclosing one.
fn data_type_in(parser: &mut Parser<'_>, pending: &mut u32) -> Result<SqlType, ParserError> {
    let token = parser.next_token();
    let Token::Word(Word { value, .. }) = &token.token else {
        parser.prev_token();
        return err(parser, "a data type");
    };
    let upper = value.to_ascii_uppercase();
    let ty = match upper.as_str() {
        "BOOLEAN" | "BOOL" => SqlType::Boolean,
        "TINYINT" | "SMALLINT" | "INT" | "INTEGER" => SqlType::Int,
        "BIGINT" => SqlType::BigInt,
        "FLOAT" | "REAL" => SqlType::Double,
        "DOUBLE" => {
            let _ = parser.parse_keyword(Keyword::PRECISION);
            SqlType::Double
        }
        "DECIMAL" | "NUMERIC" | "DEC" => {
            let (p, s) = match type_args(parser)?.as_slice() {
                [] => (10, 0),
                [p] => (*p, 0),
                [p, s] => (*p, *s),
                _ => return err(parser, "DECIMAL(precision, scale)"),
            };
            if !(1..=38).contains(&p) || s > p {
                return Err(ParserError::ParserError(format!(
                    "DECIMAL({p}, {s}): the precision must be 1 to 38 and the scale at most the precision"
                )));
            }
            SqlType::Decimal(p as u8, s as u8)
        }
        "CHAR" | "VARCHAR" | "STRING" | "TEXT" => {
            type_args(parser)?;
            SqlType::String
        }
        "TIMESTAMP" | "TIMESTAMP_LTZ" => {
            type_args(parser)?;
            if parser.parse_keyword(Keyword::WITHOUT) {
                parser.expect_keywords(&[Keyword::TIME, Keyword::ZONE])?;
            }
            SqlType::Timestamp
        }
        "ROW" => {
            let close = if parser.consume_token(&Token::Lt) {
                Token::Gt
            } else {
                parser.expect_token(&Token::LParen)?;
                Token::RParen
            };
            let mut fields = Vec::new();
            loop {
                let field = parser.parse_identifier()?.value;
                let ty = data_type_in(parser, pending)?;
                let _ = parser.parse_keywords(&[Keyword::NOT, Keyword::NULL]);
                fields.push((field, ty));
                if *pending > 0 || !parser.consume_token(&Token::Comma) {
                    break;
                }
            }
            if close == Token::Gt {
                // `ROW<a ROW<b INT>>` ends in `>>`, one token: the inner ROW takes it and
                // leaves one `>` pending for the outer one.
                if *pending > 0 {
                    *pending -= 1;
                } else {
                    match parser.next_token().token {
                        Token::Gt => {}
                        Token::ShiftRight => *pending += 1,
                        _ => {
                            parser.prev_token();
                            return err(parser, "`>` to end the ROW type");
                        }
                    }
                }
            } else {
                parser.expect_token(&Token::RParen)?;
            }
            SqlType::Row(fields)
        }
        other => {
            return Err(ParserError::ParserError(format!(
                "unknown or unsupported data type {other} at Line: {}, Column: {}",
                token.span.start.line, token.span.start.column
            )))
        }
    };
    Ok(ty)
}

/// `(n[, m])` after a type name, if present.
fn type_args(parser: &mut Parser<'_>) -> Result<Vec<u64>, ParserError> {
    if !parser.consume_token(&Token::LParen) {
        return Ok(Vec::new());
    }
    let args = parser.parse_comma_separated(|p| match p.next_token().token {
        Token::Number(n, _) => n
            .parse::<u64>()
            .map_err(|_| ParserError::ParserError(format!("expected a whole number, found {n}"))),
        t => Err(ParserError::ParserError(format!(
            "expected a whole number, found {t}"
        ))),
    })?;
    parser.expect_token(&Token::RParen)?;
    Ok(args)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_nexmark_source_ddl() {
        let text = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../../shared/nexmark/flink-sql/ddl_gen.sql"
        ))
        .unwrap();
        let script = parse_script(&text).unwrap();
        let Statement::CreateTable(def) = &script[0].statement else {
            panic!("not a table: {:?}", script[0]);
        };
        assert_eq!(def.name, "datagen");
        let names: Vec<&str> = def.columns.iter().map(ColumnDef::name).collect();
        assert_eq!(
            names,
            ["event_type", "person", "auction", "bid", "dateTime"]
        );
        let ColumnDef::Physical {
            ty: SqlType::Row(bid),
            ..
        } = &def.columns[3]
        else {
            panic!("bid is not a row");
        };
        assert_eq!(bid[5], ("dateTime".to_string(), SqlType::Timestamp));
        assert!(matches!(def.columns[4], ColumnDef::Computed { .. }));
        assert_eq!(def.watermark.as_ref().unwrap().0, "dateTime");
        assert_eq!(def.options[0], ("connector".into(), "nexmark".into()));
        assert_eq!((script[0].line, script[0].column), (1, 1));
    }

    #[test]
    fn nested_rows_may_close_with_one_token() {
        let script =
            parse_script("CREATE TABLE t (a ROW<b ROW<c INT>>, d BIGINT) WITH ()").unwrap();
        let Statement::CreateTable(def) = &script[0].statement else {
            panic!()
        };
        assert_eq!(def.columns.len(), 2);
    }

    #[test]
    fn variables_are_substituted_or_named() {
        let vars = vec![("T".to_string(), "datagen".to_string())];
        assert_eq!(substitute("FROM ${T} x", &vars).unwrap(), "FROM datagen x");
        let e = substitute("a\nFROM ${U}", &vars).unwrap_err();
        assert_eq!(
            e.to_string(),
            "line 2: the variable ${U} is not defined (define it with --define U=VALUE)"
        );
    }

    #[test]
    fn statements_and_errors_say_where() {
        let script = parse_script("SET 'a.b' = '1';\n\n  INSERT INTO t SELECT 1;").unwrap();
        assert_eq!((script[1].line, script[1].column), (3, 3));
        let e = parse_script("SELECT 1;\nCREATE TABLE t (a FOO)").unwrap_err();
        assert!(
            e.to_string()
                .contains("unknown or unsupported data type FOO at Line: 2"),
            "{e}"
        );
        let e = parse_script("SELEC 1").unwrap_err();
        assert!(e.to_string().contains("Line: 1, Column: 1"), "{e}");
    }
}
