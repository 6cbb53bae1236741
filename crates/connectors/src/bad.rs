//! Applying a [`BadRecordPolicy`] to one malformed record: the code every source shares.

use spate_types::{BadRecordPolicy, DeadLetter, SourceOutput, SpateError, SpateResult};

/// Collapses a reason to one line: error messages must fit one line of a log or terminal.
pub(crate) fn one_line(reason: &str) -> String {
    if reason.contains(['\n', '\r']) {
        reason
            .split(['\n', '\r'])
            .filter(|part| !part.trim().is_empty())
            .collect::<Vec<_>>()
            .join(" ")
    } else {
        reason.to_owned()
    }
}

/// Handles one malformed record under `policy`.
///
/// `Fail` returns [`SpateError::BadRecord`]; `Drop` counts it; `DeadLetter` routes it, with its
/// reason, origin, line and (lossily decoded) raw text, to the engine's dead-letter output.
pub(crate) fn handle_bad_record<T>(
    policy: &BadRecordPolicy,
    out: &mut SourceOutput<'_, T>,
    origin: &str,
    line: u64,
    reason: &str,
    raw: &[u8],
) -> SpateResult<()> {
    match policy {
        BadRecordPolicy::Fail => Err(SpateError::BadRecord {
            origin: origin.to_owned(),
            line,
            reason: one_line(reason),
        }),
        BadRecordPolicy::Drop => {
            out.dropped();
            Ok(())
        }
        BadRecordPolicy::DeadLetter(_) => {
            out.dead_letter(DeadLetter {
                reason: one_line(reason),
                source: origin.to_owned(),
                line,
                raw: String::from_utf8_lossy(raw).into_owned(),
            });
            Ok(())
        }
    }
}

/// Strips one trailing `\r` (a CRLF line ending) from a line.
#[inline]
pub(crate) fn strip_cr(line: &[u8]) -> &[u8] {
    match line.split_last() {
        Some((b'\r', rest)) => rest,
        _ => line,
    }
}

/// Whether a line holds only ASCII whitespace (or nothing). Costs O(1) for a typical JSON line,
/// which starts with `{`.
#[inline]
pub(crate) fn is_blank(line: &[u8]) -> bool {
    line.iter().all(u8::is_ascii_whitespace)
}

/// The sink for a source's dead letters under `policy`: one JSON-lines file at the policy's
/// path, written by global worker 0 (the engine routes every worker's dead letters there).
pub(crate) fn dead_letter_sink(
    policy: &BadRecordPolicy,
) -> Option<std::sync::Arc<dyn spate_types::Sink<DeadLetter>>> {
    match policy {
        BadRecordPolicy::DeadLetter(path) => {
            Some(std::sync::Arc::new(crate::files::SingleFileSink::<
                DeadLetter,
            >::new(path.clone())))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_joins_lines() {
        assert_eq!(one_line("a\nb\r\n\nc"), "a b c");
        assert_eq!(one_line("plain"), "plain");
    }

    #[test]
    fn policies() {
        let (mut recs, mut letters, mut dropped) = (Vec::<u32>::new(), Vec::new(), 0);
        let mut out = SourceOutput::new(&mut recs, &mut letters, &mut dropped);
        let err = handle_bad_record(
            &BadRecordPolicy::Fail,
            &mut out,
            "f.jsonl",
            7,
            "bad\nthing",
            b"x",
        )
        .unwrap_err();
        assert_eq!(err.to_string(), "bad record in f.jsonl line 7: bad thing");
        handle_bad_record(&BadRecordPolicy::Drop, &mut out, "f", 1, "r", b"x").unwrap();
        handle_bad_record(
            &BadRecordPolicy::DeadLetter("/d".into()),
            &mut out,
            "f",
            2,
            "r",
            b"\xffx",
        )
        .unwrap();
        assert_eq!(dropped, 1);
        assert_eq!(letters[0].raw, "\u{fffd}x");
        assert_eq!(letters[0].line, 2);
    }

    #[test]
    fn strips_and_blanks() {
        assert_eq!(strip_cr(b"ab\r"), b"ab");
        assert_eq!(strip_cr(b"ab"), b"ab");
        assert_eq!(strip_cr(b""), b"");
        assert!(is_blank(b" \t\r"));
        assert!(is_blank(b""));
        assert!(!is_blank(b" {"));
    }
}
