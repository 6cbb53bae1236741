//! Bad input is data: the per-source policy for malformed records.

use std::path::PathBuf;
use std::str::FromStr;

use crate::SpateError;

/// What a source does with a record it cannot parse or convert.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum BadRecordPolicy {
    /// Fail the job with one line naming the origin, line and reason (the default).
    #[default]
    Fail,
    /// Drop the record and count it; the count is reported when the job ends.
    Drop,
    /// Write the record, with its reason and origin, as a JSON line to this path, and go on.
    DeadLetter(PathBuf),
}

impl FromStr for BadRecordPolicy {
    type Err = SpateError;

    /// Parses `fail`, `drop` or `dead-letter=PATH`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "fail" => Ok(BadRecordPolicy::Fail),
            "drop" => Ok(BadRecordPolicy::Drop),
            _ => match s.strip_prefix("dead-letter=") {
                Some(path) if !path.is_empty() => Ok(BadRecordPolicy::DeadLetter(path.into())),
                _ => Err(SpateError::Config(format!(
                    "bad-record policy `{s}`: expected `fail`, `drop` or `dead-letter=PATH`"
                ))),
            },
        }
    }
}

/// A malformed record, with why it was rejected and where it came from.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct DeadLetter {
    /// Why the record was rejected.
    pub reason: String,
    /// The file, socket or `stdin` it came from.
    pub source: String,
    /// The 1-based line number within `source`.
    pub line: u64,
    /// The raw text of the record (lossily decoded if it was not UTF-8).
    pub raw: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_policies() {
        assert_eq!(
            "fail".parse::<BadRecordPolicy>().unwrap(),
            BadRecordPolicy::Fail
        );
        assert_eq!(
            "drop".parse::<BadRecordPolicy>().unwrap(),
            BadRecordPolicy::Drop
        );
        assert_eq!(
            "dead-letter=/tmp/x".parse::<BadRecordPolicy>().unwrap(),
            BadRecordPolicy::DeadLetter("/tmp/x".into())
        );
        let err = "skip".parse::<BadRecordPolicy>().unwrap_err().to_string();
        assert!(
            err.contains("skip") && err.contains("dead-letter=PATH"),
            "{err}"
        );
        assert!("dead-letter=".parse::<BadRecordPolicy>().is_err());
    }
}
