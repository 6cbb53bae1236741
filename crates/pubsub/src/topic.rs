//! Topic names and topic filters with hierarchical wildcards, in two dialects.
//!
//! | | [`Dialect::Mqtt`] (OASIS MQTT 3.1.1 / 5.0 §4.7) | [`Dialect::Nats`] |
//! |---|---|---|
//! | separator | `/` | `.` |
//! | one level | `+`, which matches an empty level too (`sport/+` matches `sport/`) | `*` |
//! | the rest | `#`, last only, zero or more levels: `sport/#` matches `sport` | `>`, last only, **one** or more: `foo.>` does not match `foo` |
//! | empty levels | are levels: `/finance` has two, and `+/+` matches it | invalid (`foo..bar`, a leading or trailing `.`) |
//! | `$` topics | not matched by a filter whose first level is a wildcard (`$SYS/x` is not matched by `#` or `+/x`) | ordinary |
//! | other | no NUL; at most 65 535 bytes | no whitespace |
//!
//! In both dialects a wildcard must occupy a whole level (`sport+` and `foo*` are invalid
//! filters) and topic names may not contain wildcard characters at all. Matching is
//! case-sensitive. [`filter_matches`] is the naive matcher, level by level; the
//! [`TopicTrie`](crate::TopicTrie) indexes many filters and must agree with it.

use std::fmt;

use serde::{Deserialize, Serialize};

/// The longest MQTT topic name or filter: a UTF-8 string with a 16-bit length prefix.
pub const MQTT_MAX_LEN: usize = 65_535;

/// Which wildcard syntax and rules a topic or filter follows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Dialect {
    /// MQTT: `/`, `+`, `#`, and the `$` rule.
    Mqtt,
    /// NATS: `.`, `*`, `>`.
    Nats,
}

impl Dialect {
    /// The level separator.
    pub const fn separator(self) -> char {
        match self {
            Dialect::Mqtt => '/',
            Dialect::Nats => '.',
        }
    }

    /// The wildcard that matches exactly one level.
    pub const fn single_wildcard(self) -> char {
        match self {
            Dialect::Mqtt => '+',
            Dialect::Nats => '*',
        }
    }

    /// The wildcard that matches the remaining levels (it may only be the last level).
    pub const fn multi_wildcard(self) -> char {
        match self {
            Dialect::Mqtt => '#',
            Dialect::Nats => '>',
        }
    }

    /// How many levels the multi-level wildcard needs at least: MQTT's `#` also matches the
    /// parent level (zero levels), NATS's `>` needs one.
    pub const fn multi_min_levels(self) -> usize {
        match self {
            Dialect::Mqtt => 0,
            Dialect::Nats => 1,
        }
    }

    /// Whether `topic` is one that filters starting with a wildcard must not match (MQTT's
    /// `$SYS` rule, §4.7.2).
    pub(crate) fn is_reserved(self, topic: &str) -> bool {
        self == Dialect::Mqtt && topic.starts_with('$')
    }
}

impl fmt::Display for Dialect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Dialect::Mqtt => "MQTT",
            Dialect::Nats => "NATS",
        })
    }
}

/// Why a topic name or a topic filter is invalid. `kind` is `topic` or `filter`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TopicError {
    /// The empty string.
    #[error("empty {dialect} {kind}: a {kind} needs at least one character")]
    Empty {
        /// The dialect checked against.
        dialect: Dialect,
        /// `topic` or `filter`.
        kind: &'static str,
    },
    /// Longer than MQTT allows.
    #[error("{dialect} {kind} is {len} bytes long, over the limit of {MQTT_MAX_LEN}")]
    TooLong {
        /// The dialect checked against.
        dialect: Dialect,
        /// `topic` or `filter`.
        kind: &'static str,
        /// The length in bytes.
        len: usize,
    },
    /// A character the dialect forbids (NUL in MQTT, whitespace in NATS).
    #[error(
        "{dialect} {kind} `{text}` contains {what} at byte {at}, which {dialect} does not allow"
    )]
    BadChar {
        /// The dialect checked against.
        dialect: Dialect,
        /// `topic` or `filter`.
        kind: &'static str,
        /// The offending topic or filter.
        text: String,
        /// A description of the character.
        what: &'static str,
        /// Its byte offset.
        at: usize,
    },
    /// An empty NATS token.
    #[error(
        "NATS {kind} `{text}` has an empty token at level {level}: look for `..` or a leading \
         or trailing `.`"
    )]
    EmptyToken {
        /// `topic` or `filter`.
        kind: &'static str,
        /// The offending topic or filter.
        text: String,
        /// The 1-based level.
        level: usize,
    },
    /// A wildcard sharing a level with other characters, as in `sport+`.
    #[error(
        "{dialect} filter `{text}`: `{wildcard}` must occupy a whole level, but level {level} \
         is `{found}`"
    )]
    PartialWildcard {
        /// The dialect checked against.
        dialect: Dialect,
        /// The offending filter.
        text: String,
        /// The wildcard character.
        wildcard: char,
        /// The 1-based level.
        level: usize,
        /// The level's text.
        found: String,
    },
    /// A multi-level wildcard before the last level, as in `sport/#/x`.
    #[error("{dialect} filter `{text}`: `{wildcard}` may only be the last level, but it is level {level}")]
    MultiNotLast {
        /// The dialect checked against.
        dialect: Dialect,
        /// The offending filter.
        text: String,
        /// The wildcard character.
        wildcard: char,
        /// The 1-based level.
        level: usize,
    },
    /// A wildcard character in a topic name (topics are published to, filters subscribe).
    #[error("{dialect} topic `{text}` contains the wildcard `{wildcard}`: topic names cannot contain wildcards")]
    WildcardInTopic {
        /// The dialect checked against.
        dialect: Dialect,
        /// The offending topic.
        text: String,
        /// The wildcard character.
        wildcard: char,
    },
    /// A filter of one dialect given to an index of the other.
    #[error("filter `{text}` is a {found} filter, but this index holds {expected} filters")]
    DialectMismatch {
        /// The offending filter.
        text: String,
        /// The filter's dialect.
        found: Dialect,
        /// The index's dialect.
        expected: Dialect,
    },
}

/// Checks `text` as a topic name (`is_filter == false`) or a topic filter.
fn check(dialect: Dialect, text: &str, is_filter: bool) -> Result<(), TopicError> {
    let kind = if is_filter { "filter" } else { "topic" };
    if text.is_empty() {
        return Err(TopicError::Empty { dialect, kind });
    }
    if dialect == Dialect::Mqtt && text.len() > MQTT_MAX_LEN {
        return Err(TopicError::TooLong {
            dialect,
            kind,
            len: text.len(),
        });
    }
    let bad_char = |what, at| TopicError::BadChar {
        dialect,
        kind,
        text: text.to_owned(),
        what,
        at,
    };
    match dialect {
        Dialect::Mqtt => {
            if let Some(at) = text.find('\0') {
                return Err(bad_char("a NUL character", at));
            }
        }
        Dialect::Nats => {
            if let Some((at, _)) = text.char_indices().find(|(_, c)| c.is_whitespace()) {
                return Err(bad_char("whitespace", at));
            }
        }
    }
    let (single, multi) = (dialect.single_wildcard(), dialect.multi_wildcard());
    let count = text.split(dialect.separator()).count();
    for (i, level) in text.split(dialect.separator()).enumerate() {
        if dialect == Dialect::Nats && level.is_empty() {
            return Err(TopicError::EmptyToken {
                kind,
                text: text.to_owned(),
                level: i + 1,
            });
        }
        let Some(wildcard) = level.chars().find(|&c| c == single || c == multi) else {
            continue;
        };
        if !is_filter {
            return Err(TopicError::WildcardInTopic {
                dialect,
                text: text.to_owned(),
                wildcard,
            });
        }
        if level.len() != 1 {
            return Err(TopicError::PartialWildcard {
                dialect,
                text: text.to_owned(),
                wildcard,
                level: i + 1,
                found: level.to_owned(),
            });
        }
        if wildcard == multi && i + 1 != count {
            return Err(TopicError::MultiNotLast {
                dialect,
                text: text.to_owned(),
                wildcard,
                level: i + 1,
            });
        }
    }
    Ok(())
}

/// Checks that `topic` is a valid topic name (something published to) in `dialect`.
pub fn validate_topic(dialect: Dialect, topic: &str) -> Result<(), TopicError> {
    check(dialect, topic, false)
}

/// One level of a parsed filter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Level<'a> {
    /// A literal level, matched exactly (it may be empty in MQTT).
    Literal(&'a str),
    /// `+` or `*`: exactly one level.
    Single,
    /// `#` or `>`: the rest (always the last level).
    Multi,
}

/// A validated topic filter of one dialect.
///
/// Serialized as `{"dialect": "mqtt", "filter": "sport/#"}` and validated again when read.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "FilterRepr", into = "FilterRepr")]
pub struct TopicFilter {
    dialect: Dialect,
    text: Box<str>,
}

impl TopicFilter {
    /// Parses and validates a filter.
    pub fn parse(dialect: Dialect, filter: &str) -> Result<Self, TopicError> {
        check(dialect, filter, true)?;
        Ok(TopicFilter {
            dialect,
            text: filter.into(),
        })
    }

    /// MQTT shorthand for [`TopicFilter::parse`].
    pub fn mqtt(filter: &str) -> Result<Self, TopicError> {
        Self::parse(Dialect::Mqtt, filter)
    }

    /// NATS shorthand for [`TopicFilter::parse`].
    pub fn nats(filter: &str) -> Result<Self, TopicError> {
        Self::parse(Dialect::Nats, filter)
    }

    /// The filter's dialect.
    pub fn dialect(&self) -> Dialect {
        self.dialect
    }

    /// The filter's text.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The filter's levels, in order.
    pub fn levels(&self) -> impl Iterator<Item = Level<'_>> + '_ {
        let (single, multi) = (
            self.dialect.single_wildcard(),
            self.dialect.multi_wildcard(),
        );
        self.text.split(self.dialect.separator()).map(move |level| {
            let mut chars = level.chars();
            match (chars.next(), chars.next()) {
                (Some(c), None) if c == single => Level::Single,
                (Some(c), None) if c == multi => Level::Multi,
                _ => Level::Literal(level),
            }
        })
    }

    /// Whether the filter's first level is a wildcard (so it skips reserved `$` topics).
    pub(crate) fn starts_with_wildcard(&self) -> bool {
        !matches!(self.levels().next(), Some(Level::Literal(_)))
    }

    /// Whether `topic` matches; see [`filter_matches`].
    pub fn matches(&self, topic: &str) -> bool {
        filter_matches(self, topic)
    }
}

impl fmt::Display for TopicFilter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

#[derive(Serialize, Deserialize)]
struct FilterRepr {
    dialect: Dialect,
    filter: String,
}

impl TryFrom<FilterRepr> for TopicFilter {
    type Error = TopicError;
    fn try_from(r: FilterRepr) -> Result<Self, TopicError> {
        TopicFilter::parse(r.dialect, &r.filter)
    }
}

impl From<TopicFilter> for FilterRepr {
    fn from(f: TopicFilter) -> Self {
        FilterRepr {
            dialect: f.dialect,
            filter: f.text.into(),
        }
    }
}

/// Whether `topic` matches `filter`, by walking both level by level (the reference the trie
/// is tested against). An invalid topic name in the filter's dialect matches nothing.
pub fn filter_matches(filter: &TopicFilter, topic: &str) -> bool {
    let dialect = filter.dialect;
    if validate_topic(dialect, topic).is_err()
        || (dialect.is_reserved(topic) && filter.starts_with_wildcard())
    {
        return false;
    }
    let mut levels = topic.split(dialect.separator());
    for level in filter.levels() {
        match level {
            Level::Multi => return levels.count() >= dialect.multi_min_levels(),
            Level::Single => {
                if levels.next().is_none() {
                    return false;
                }
            }
            Level::Literal(lit) => {
                if levels.next() != Some(lit) {
                    return false;
                }
            }
        }
    }
    levels.next().is_none()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mqtt(filter: &str, topic: &str) -> bool {
        TopicFilter::mqtt(filter).unwrap().matches(topic)
    }

    fn nats(filter: &str, topic: &str) -> bool {
        TopicFilter::nats(filter).unwrap().matches(topic)
    }

    /// The examples of MQTT 3.1.1 §4.7.1.2, §4.7.1.3 and §4.7.2.
    #[test]
    fn mqtt_spec_examples() {
        let f = "sport/tennis/player1/#";
        assert!(mqtt(f, "sport/tennis/player1"));
        assert!(mqtt(f, "sport/tennis/player1/ranking"));
        assert!(mqtt(f, "sport/tennis/player1/score/wimbledon"));
        assert!(!mqtt(f, "sport/tennis/player2"));
        assert!(mqtt("sport/#", "sport"));
        assert!(mqtt("#", "sport/tennis"));
        assert!(mqtt("sport/tennis/#", "sport/tennis"));
        assert!(mqtt("sport/tennis/+", "sport/tennis/player1"));
        assert!(mqtt("sport/tennis/+", "sport/tennis/player2"));
        assert!(!mqtt("sport/tennis/+", "sport/tennis/player1/ranking"));
        assert!(!mqtt("sport/+", "sport"));
        assert!(mqtt("sport/+", "sport/"));
        assert!(mqtt("+/+", "/finance"));
        assert!(mqtt("/+", "/finance"));
        assert!(!mqtt("+", "/finance"));
        assert!(mqtt("+/tennis/#", "sport/tennis/player1"));
        // Case-sensitive, and levels are compared whole.
        assert!(!mqtt("sport/tennis", "Sport/tennis"));
        assert!(!mqtt("sport/ten", "sport/tennis"));
        // The `$` rule.
        assert!(!mqtt("#", "$SYS/broker/load"));
        assert!(!mqtt("+/monitor/Clients", "$SYS/monitor/Clients"));
        assert!(mqtt("$SYS/#", "$SYS/monitor/Clients"));
        assert!(mqtt("$SYS/monitor/+", "$SYS/monitor/Clients"));
        assert!(mqtt("$SYS", "$SYS"));
        assert!(mqtt("#", "a/$SYS"));
        assert!(mqtt("+/$SYS", "a/$SYS"));
    }

    #[test]
    fn mqtt_validation() {
        for ok in [
            "#",
            "+",
            "/",
            "//",
            "+/+",
            "sport/#",
            "/+",
            "sport/+/player1",
            "$SYS/#",
            "a b",
        ] {
            assert!(TopicFilter::mqtt(ok).is_ok(), "{ok}");
        }
        let err = |f: &str| TopicFilter::mqtt(f).unwrap_err().to_string();
        assert_eq!(
            err("sport+"),
            "MQTT filter `sport+`: `+` must occupy a whole level, but level 1 is `sport+`"
        );
        assert_eq!(
            err("sport/#/x"),
            "MQTT filter `sport/#/x`: `#` may only be the last level, but it is level 2"
        );
        assert_eq!(
            err(""),
            "empty MQTT filter: a filter needs at least one character"
        );
        assert!(matches!(
            TopicFilter::mqtt("sport/tennis#"),
            Err(TopicError::PartialWildcard { .. })
        ));
        assert!(matches!(
            TopicFilter::mqtt("a\0b"),
            Err(TopicError::BadChar { at: 1, .. })
        ));
        assert!(matches!(
            TopicFilter::mqtt(&"a".repeat(65_536)),
            Err(TopicError::TooLong { .. })
        ));
        assert!(validate_topic(Dialect::Mqtt, "/").is_ok());
        assert_eq!(
            validate_topic(Dialect::Mqtt, "sport/+")
                .unwrap_err()
                .to_string(),
            "MQTT topic `sport/+` contains the wildcard `+`: topic names cannot contain wildcards"
        );
        assert!(validate_topic(Dialect::Mqtt, "").is_err());
        // Invalid topics match nothing, not even `#`.
        assert!(!mqtt("#", "a/#"));
        assert!(!mqtt("#", ""));
    }

    #[test]
    fn nats_examples() {
        assert!(nats("foo.*.bar", "foo.x.bar"));
        assert!(!nats("foo.*.bar", "foo.bar"));
        assert!(!nats("foo.*.bar", "foo.x.y.bar"));
        assert!(nats("foo.>", "foo.bar"));
        assert!(nats("foo.>", "foo.bar.baz"));
        assert!(!nats("foo.>", "foo"));
        assert!(nats(">", "foo"));
        assert!(nats("*", "foo"));
        assert!(!nats("*", "foo.bar"));
        assert!(nats("*.>", "foo.bar"));
        assert!(!nats("*.>", "foo"));
        // No `$` rule.
        assert!(nats(">", "$JS.API.INFO"));
        assert!(nats("*.API.>", "$JS.API.INFO"));
    }

    #[test]
    fn nats_validation() {
        let err = |f: &str| TopicFilter::nats(f).unwrap_err();
        for bad in ["foo..bar", ".foo", "foo.", "."] {
            assert!(matches!(err(bad), TopicError::EmptyToken { .. }), "{bad}");
        }
        assert!(matches!(err("foo*"), TopicError::PartialWildcard { .. }));
        assert!(matches!(err("foo.>.bar"), TopicError::MultiNotLast { .. }));
        assert!(matches!(
            err("foo bar"),
            TopicError::BadChar {
                what: "whitespace",
                at: 3,
                ..
            }
        ));
        assert!(matches!(err(""), TopicError::Empty { .. }));
        assert_eq!(
            err("foo..bar").to_string(),
            "NATS filter `foo..bar` has an empty token at level 2: look for `..` or a leading or \
             trailing `.`"
        );
        assert!(validate_topic(Dialect::Nats, "foo.*").is_err());
        assert!(validate_topic(Dialect::Nats, "foo/bar+#").is_ok());
        assert!(!nats(">", "foo..bar"));
    }

    #[test]
    fn serde_round_trip() {
        let f = TopicFilter::mqtt("sport/+/x").unwrap();
        let json = serde_json::to_string(&f).unwrap();
        assert_eq!(json, r#"{"dialect":"mqtt","filter":"sport/+/x"}"#);
        assert_eq!(serde_json::from_str::<TopicFilter>(&json).unwrap(), f);
        assert!(
            serde_json::from_str::<TopicFilter>(r#"{"dialect":"nats","filter":"a..b"}"#).is_err()
        );
    }
}
