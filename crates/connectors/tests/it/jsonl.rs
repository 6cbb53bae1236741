//! The JSON-lines source against a naive reader of the same files.

use std::path::Path;
use std::sync::Arc;

use proptest::prelude::*;
use spate_connectors::files::{JsonLinesSource, LineDecoder, PrefixDecoder};
use spate_types::{BadRecordPolicy, Source, SourceContext, SpateError};

use crate::util::{drain, is_subsequence, read_all, read_ok};

/// A naive line: (file name, 1-based line number, text without `\r`).
type NaiveLine = (String, u64, Vec<u8>);

/// The oracle: split every file on `\n`, number lines from 1, strip one trailing `\r`, skip
/// blank lines.
fn naive_lines(files: &[(String, Vec<u8>)]) -> Vec<NaiveLine> {
    let mut lines = Vec::new();
    for (name, content) in files {
        if content.is_empty() {
            continue;
        }
        let body = content.strip_suffix(b"\n").unwrap_or(content);
        for (i, line) in body.split(|&b| b == b'\n').enumerate() {
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            lines.push((name.clone(), i as u64 + 1, line.to_vec()));
        }
    }
    lines
}

fn raw_decoder() -> LineDecoder<Vec<u8>> {
    Arc::new(|line: &[u8]| Ok(line.to_vec()))
}

fn rejecting_decoder() -> LineDecoder<Vec<u8>> {
    Arc::new(|line: &[u8]| Err(format!("rejected a line of {} bytes", line.len())))
}

fn line_strategy() -> impl Strategy<Value = Vec<u8>> {
    let byte = prop::sample::select(vec![b'a', b'b', b'{', b'}', b' ', b'\t', b'\r', 0xff, b'7']);
    prop_oneof![
        3 => prop::collection::vec(byte.clone(), 0..12),
        1 => Just(Vec::new()),
        1 => prop::collection::vec(byte, 100..3000),
    ]
}

fn file_strategy() -> impl Strategy<Value = Vec<u8>> {
    (prop::collection::vec(line_strategy(), 0..40), any::<bool>()).prop_map(join_lines)
}

/// The lines joined by `\n`, with one after the last when `trailing`.
fn join_lines((lines, trailing): (Vec<Vec<u8>>, bool)) -> Vec<u8> {
    let mut content = lines.join(&b'\n');
    if trailing && !lines.is_empty() {
        content.push(b'\n');
    }
    content
}

/// `part-0.jsonl`, `part-1.jsonl`, … with these contents in a new directory (see
/// [`write_files`]).
fn write_parts(contents: Vec<Vec<u8>>) -> (tempfile::TempDir, Vec<(String, Vec<u8>)>) {
    let dir = tempfile::tempdir().unwrap();
    let files: Vec<(String, Vec<u8>)> = contents
        .into_iter()
        .enumerate()
        .map(|(i, c)| (format!("part-{i}.jsonl"), c))
        .collect();
    write_files(dir.path(), &files);
    (dir, files)
}

fn write_files(dir: &Path, files: &[(String, Vec<u8>)]) {
    for (name, content) in files {
        std::fs::write(dir.join(name), content).unwrap();
    }
    // Never read: hidden and marker files.
    std::fs::write(dir.join(".hidden.jsonl"), "hidden\n").unwrap();
    std::fs::write(dir.join("_SUCCESS"), "marker\n").unwrap();
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    /// Every line is read exactly once, by splits that keep file order, with its exact line
    /// number, for any split size, block size and worker count.
    #[test]
    fn splitting_reads_every_line_once(
        contents in prop::collection::vec(file_strategy(), 1..4),
        split_size in prop_oneof![1u64..64, 1u64..5000],
        block_size in prop_oneof![1usize..64, Just(1 << 20)],
        workers in 1usize..6,
        max_records in 1usize..50,
    ) {
        let (dir, files) = write_parts(contents);
        let expected = naive_lines(&files);

        // Good records: the union is the naive list; each worker's records keep file order.
        let source = JsonLinesSource::with_decoder(dir.path(), raw_decoder())
            .split_size(split_size)
            .block_size(block_size);
        let all = read_all(&source, workers, max_records);
        let naive_texts: Vec<Vec<u8>> = expected.iter().map(|(_, _, t)| t.clone()).collect();
        let mut union = Vec::new();
        for drained in &all {
            prop_assert!(drained.error.is_none());
            prop_assert!(is_subsequence(&drained.records, &naive_texts));
            union.extend(drained.records.iter().cloned());
        }
        let mut sorted_expected = naive_texts.clone();
        sorted_expected.sort();
        union.sort();
        prop_assert_eq!(union, sorted_expected);

        // Every line rejected: one dead letter per line, with its file, exact number and text.
        let source = JsonLinesSource::with_decoder(dir.path(), rejecting_decoder())
            .split_size(split_size)
            .block_size(block_size)
            .policy(BadRecordPolicy::DeadLetter("/dev/null".into()));
        let mut letters: Vec<NaiveLine> = Vec::new();
        let mut total_progress = 0;
        for drained in read_all(&source, workers, max_records) {
            prop_assert!(drained.error.is_none());
            prop_assert!(drained.records.is_empty());
            for letter in drained.dead {
                let name = Path::new(&letter.source).file_name().unwrap().to_string_lossy().into_owned();
                prop_assert!(letter.reason.starts_with("rejected a line of "));
                letters.push((name, letter.line, letter.raw.into_bytes()));
            }
        }
        let mut expected_letters: Vec<NaiveLine> = expected
            .iter()
            .map(|(f, l, t)| (f.clone(), *l, String::from_utf8_lossy(t).into_owned().into_bytes()))
            .collect();
        expected_letters.sort();
        letters.sort();
        prop_assert_eq!(letters, expected_letters);

        // Progress covers every byte of every split exactly once.
        for worker_index in 0..workers {
            let mut reader = source.create_reader(&SourceContext { worker_index, workers }).unwrap();
            let drained = drain(reader.as_mut(), max_records);
            prop_assert!(drained.error.is_none());
            let (done, total) = reader.progress().unwrap();
            prop_assert_eq!(done, total);
            total_progress += total;
        }
        let bytes: u64 = files.iter().map(|(_, c)| c.len() as u64).sum();
        prop_assert_eq!(total_progress, bytes);
    }
}

/// Under `Fail`, the error names the file and the exact line, whichever split holds it.
#[test]
fn fail_names_the_exact_line_in_any_split() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.jsonl");
    let mut content = String::new();
    for i in 1..=2000u64 {
        if i == 1777 {
            content.push_str("{\"id\": oops}\n");
        } else if i % 10 == 0 {
            content.push('\n');
        } else {
            content.push_str(&format!("{{\"id\":{i}}}\n"));
        }
    }
    std::fs::write(&path, &content).unwrap();
    #[derive(serde::Deserialize)]
    struct Rec {
        #[allow(dead_code)]
        id: u64,
    }
    for (split_size, workers) in [(1 << 20, 1), (100, 3), (997, 4), (7, 5)] {
        let source = JsonLinesSource::<Rec>::new(&path).split_size(split_size);
        let errors: Vec<SpateError> = read_all(&source, workers, 64)
            .into_iter()
            .filter_map(|d| d.error)
            .collect();
        assert_eq!(errors.len(), 1, "split size {split_size}");
        let msg = errors[0].to_string();
        let expected = format!(
            "bad record in {} line 1777: expected value at column 8",
            path.display()
        );
        assert_eq!(msg, expected);
        assert!(matches!(
            errors[0],
            SpateError::BadRecord { line: 1777, .. }
        ));
    }
}

#[derive(Debug, Clone, PartialEq, serde::Deserialize)]
struct Rec {
    id: u64,
    name: String,
}

/// The file, its good records, and its bad lines (line, reason, raw).
type Mixed = (
    std::path::PathBuf,
    Vec<Rec>,
    Vec<(u64, &'static str, Vec<u8>)>,
);

/// Good lines, and one bad line of each kind, with the reason each should give.
fn mixed_file(dir: &Path) -> Mixed {
    let huge_name = "x".repeat(3 << 20);
    let lines: Vec<Vec<u8>> = vec![
        br#"{"id":1,"name":"a"}"#.to_vec(),
        br#"{"id":2,"name":"#.to_vec(),
        b"{\"id\":3,\"name\":\"\xff\"}".to_vec(),
        br#"{"id":"four","name":"d"}"#.to_vec(),
        br#"{"id":5}"#.to_vec(),
        b"".to_vec(),
        format!(r#"{{"id":7,"name":"{huge_name}"}}"#).into_bytes(),
        b"{\"id\":8,\"name\":\"h\"}\r".to_vec(),
        format!(r#"{{"id":9,"name":"{huge_name}""#).into_bytes(),
        b"   \t".to_vec(),
        br#"{"id":11,"name":"k"} trailing"#.to_vec(),
        br#"{"id":12,"name":"l"}"#.to_vec(),
    ];
    let path = dir.join("mixed.jsonl");
    std::fs::write(&path, lines.join(&b'\n')).unwrap();
    let good = vec![
        Rec {
            id: 1,
            name: "a".into(),
        },
        Rec {
            id: 7,
            name: huge_name.clone(),
        },
        Rec {
            id: 8,
            name: "h".into(),
        },
        Rec {
            id: 12,
            name: "l".into(),
        },
    ];
    let bad = vec![
        (2, "EOF while parsing a value", lines[1].clone()),
        (3, "invalid UTF-8", lines[2].clone()),
        (
            4,
            "invalid type: string \"four\", expected u64",
            lines[3].clone(),
        ),
        (5, "missing field `name`", lines[4].clone()),
        (9, "EOF while parsing an object", lines[8].clone()),
        (11, "trailing characters", lines[10].clone()),
    ];
    (path, good, bad)
}

#[test]
fn fail_policy_stops_at_the_first_bad_line() {
    let dir = tempfile::tempdir().unwrap();
    let (path, good, _) = mixed_file(dir.path());
    let drained = read_all(&JsonLinesSource::<Rec>::new(&path), 1, 1000).remove(0);
    assert_eq!(drained.records, good[..1]);
    let err = drained.error.expect("a bad record");
    assert_eq!(
        err.to_string(),
        format!(
            "bad record in {} line 2: EOF while parsing a value at column 15",
            path.display()
        )
    );
}

#[test]
fn drop_policy_keeps_good_records_and_counts_bad_ones() {
    let dir = tempfile::tempdir().unwrap();
    let (path, good, bad) = mixed_file(dir.path());
    for (split_size, workers) in [(64 << 20, 1), (7, 3), (4096, 4), (1 << 20, 2)] {
        let source = JsonLinesSource::<Rec>::new(&path)
            .policy(BadRecordPolicy::Drop)
            .split_size(split_size);
        let all = read_all(&source, workers, 2);
        let mut records: Vec<Rec> = all.iter().flat_map(|d| d.records.iter().cloned()).collect();
        records.sort_by_key(|r| r.id);
        assert_eq!(records, good);
        assert_eq!(all.iter().map(|d| d.dropped).sum::<u64>(), bad.len() as u64);
        assert!(all.iter().all(|d| d.error.is_none() && d.dead.is_empty()));
    }
}

#[test]
fn dead_letter_policy_routes_each_bad_line() {
    let dir = tempfile::tempdir().unwrap();
    let (path, good, bad) = mixed_file(dir.path());
    for (split_size, workers) in [(64 << 20, 1), (7, 3), (4096, 4), (1 << 20, 2)] {
        let source = JsonLinesSource::<Rec>::new(&path)
            .policy(BadRecordPolicy::DeadLetter(dir.path().join("dead.jsonl")))
            .split_size(split_size);
        let all = read_all(&source, workers, 3);
        let mut records: Vec<Rec> = all.iter().flat_map(|d| d.records.iter().cloned()).collect();
        records.sort_by_key(|r| r.id);
        assert_eq!(records, good);
        let mut letters: Vec<_> = all.iter().flat_map(|d| d.dead.iter().cloned()).collect();
        letters.sort_by_key(|l| l.line);
        assert_eq!(letters.len(), bad.len());
        for (letter, (line, reason, raw)) in letters.iter().zip(&bad) {
            assert_eq!(letter.line, *line);
            assert_eq!(letter.source, path.display().to_string());
            assert!(
                letter.reason.starts_with(reason),
                "line {line}: {}",
                letter.reason
            );
            assert!(!letter.reason.contains('\n'));
            assert_eq!(letter.raw, String::from_utf8_lossy(raw));
        }
        assert!(all.iter().all(|d| d.error.is_none() && d.dropped == 0));
    }
}

#[test]
fn crlf_and_value_records() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v.jsonl");
    std::fs::write(&path, "{\"a\":1}\r\n\r\n[true,null]\r\n").unwrap();
    let drained = read_ok(&JsonLinesSource::<spate_types::Value>::new(&path));
    let texts: Vec<String> = drained.records.iter().map(|v| v.to_string()).collect();
    assert_eq!(texts, ["{\"a\":1}", "[true,null]"]);
}

#[test]
fn missing_path_fails_at_create_reader() {
    let source = JsonLinesSource::<Rec>::new("/definitely/not/here.jsonl");
    let err = source
        .create_reader(&SourceContext {
            worker_index: 0,
            workers: 1,
        })
        .err()
        .expect("an error");
    let msg = err.to_string();
    assert!(matches!(err, SpateError::Io { .. }));
    assert!(
        msg.starts_with("/definitely/not/here.jsonl: cannot read the JSON-lines input"),
        "{msg}"
    );
    assert_eq!(source.name(), "jsonl:/definitely/not/here.jsonl");
    assert!(source.is_bounded());
}

#[test]
fn empty_directory_and_empty_file_finish_at_once() {
    let dir = tempfile::tempdir().unwrap();
    assert!(read_ok(&JsonLinesSource::<Rec>::new(dir.path()))
        .records
        .is_empty());
    std::fs::write(dir.path().join("empty.jsonl"), "").unwrap();
    assert!(read_ok(&JsonLinesSource::<Rec>::new(dir.path()))
        .records
        .is_empty());
}

/// A prefix decoder for the fast path: the longest run of `a`, `b`, `7`, `{` and `}` at the
/// start of the text (the line decoder then must give the same record for a line that is
/// exactly that run, which [`raw_decoder`] does).
fn run_prefix_decoder() -> PrefixDecoder<Vec<u8>> {
    Arc::new(|text: &[u8]| {
        let n = text
            .iter()
            .take_while(|b| matches!(b, b'a' | b'b' | b'7' | b'{' | b'}'))
            .count();
        Some((text[..n].to_vec(), n))
    })
}

/// Files of which most lines are for the fast path, so that fast runs, misses and slow lines
/// alternate.
fn mostly_fast_file_strategy() -> impl Strategy<Value = Vec<u8>> {
    let fast_byte = prop::sample::select(vec![b'a', b'b', b'{', b'}', b'7']);
    let line = prop_oneof![
        3 => prop::collection::vec(fast_byte.clone(), 1..12),
        1 => prop::collection::vec(fast_byte, 100..3000),
        2 => line_strategy(),
    ];
    (prop::collection::vec(line, 0..60), any::<bool>()).prop_map(join_lines)
}

/// Whether the fast path takes a whole line.
fn prefix_takes(line: &[u8]) -> bool {
    !line.is_empty()
        && line
            .iter()
            .all(|b| matches!(b, b'a' | b'b' | b'7' | b'{' | b'}'))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    /// With a prefix decoder, the records are exactly those of the line decoder alone, and
    /// the lines it leaves (with `\r`, blanks, bytes that are not UTF-8, or other bytes) go
    /// to the line decoder with their exact line numbers, for any split, block and batch.
    #[test]
    fn prefix_decoder_reads_the_same_lines(
        contents in prop::collection::vec(mostly_fast_file_strategy(), 1..4),
        split_size in prop_oneof![1u64..64, 1u64..5000, Just(1u64 << 20)],
        block_size in prop_oneof![1usize..64, Just(1 << 20)],
        workers in 1usize..4,
        max_records in 1usize..50,
    ) {
        let (dir, files) = write_parts(contents);
        let expected = naive_lines(&files);

        let source = JsonLinesSource::with_decoder(dir.path(), raw_decoder())
            .prefix_decoder(run_prefix_decoder())
            .split_size(split_size)
            .block_size(block_size);
        let naive_texts: Vec<Vec<u8>> = expected.iter().map(|(_, _, t)| t.clone()).collect();
        let mut union = Vec::new();
        for drained in read_all(&source, workers, max_records) {
            prop_assert!(drained.error.is_none());
            prop_assert!(is_subsequence(&drained.records, &naive_texts));
            union.extend(drained.records);
        }
        let mut sorted_expected = naive_texts;
        sorted_expected.sort();
        union.sort();
        prop_assert_eq!(union, sorted_expected);

        // The line decoder rejects everything: each line is either a record of the fast path
        // (and one it takes) or a dead letter with its number and text; every line it does
        // not take is a dead letter, also after runs of fast lines.
        let source = JsonLinesSource::with_decoder(dir.path(), rejecting_decoder())
            .prefix_decoder(run_prefix_decoder())
            .split_size(split_size)
            .block_size(block_size)
            .policy(BadRecordPolicy::DeadLetter("/dev/null".into()));
        let mut letters: Vec<NaiveLine> = Vec::new();
        let mut fast = Vec::new();
        for drained in read_all(&source, workers, max_records) {
            prop_assert!(drained.error.is_none());
            fast.extend(drained.records);
            for letter in drained.dead {
                let name = Path::new(&letter.source).file_name().unwrap().to_string_lossy().into_owned();
                letters.push((name, letter.line, letter.raw.into_bytes()));
            }
        }
        let mut left: Vec<NaiveLine> = expected
            .into_iter()
            .map(|(f, l, t)| (f, l, String::from_utf8_lossy(&t).into_owned().into_bytes()))
            .collect();
        for letter in &letters {
            let at = left.iter().position(|line| line == letter);
            prop_assert!(at.is_some(), "a dead letter that is no line: {:?}", letter);
            left.remove(at.unwrap());
        }
        // What is left was read by the fast path.
        let mut left: Vec<Vec<u8>> = left.into_iter().map(|(_, _, t)| t).collect();
        left.sort();
        fast.sort();
        prop_assert!(fast.iter().all(|record| prefix_takes(record)));
        prop_assert_eq!(fast, left);
    }
}

/// The fast path over large splits read in many blocks: with a prefix decoder, the same
/// records as with the line decoder alone, in the same order for each worker, across block and
/// split boundaries.
#[test]
fn prefix_decoder_over_large_splits() {
    let dir = tempfile::tempdir().unwrap();
    let mut content = Vec::new();
    for i in 0..60_000u32 {
        let len = (i * 7919 % 200) as usize + 1;
        content.extend((0..len).map(|k| [b'a', b'b', b'{', b'}', b'7'][(i as usize + k) % 5]));
        match i % 997 {
            // Lines the fast path leaves: a `\r\n` end, a blank line, a byte that is not UTF-8.
            1 => content.extend_from_slice(b"\r\n"),
            2 => content.extend_from_slice(b"\n\n"),
            3 => content.extend_from_slice(b"\xff\n"),
            _ => content.push(b'\n'),
        }
    }
    assert!(content.len() > 3 << 20);
    std::fs::write(dir.path().join("big.jsonl"), &content).unwrap();
    for (split_size, workers) in [(1 << 20, 1), ((1 << 20) + 12_345, 3), (64 << 20, 2)] {
        let plain = JsonLinesSource::with_decoder(dir.path(), raw_decoder()).split_size(split_size);
        let fast = JsonLinesSource::with_decoder(dir.path(), raw_decoder())
            .split_size(split_size)
            .prefix_decoder(run_prefix_decoder());
        let (plain, fast) = (
            read_all(&plain, workers, 4096),
            read_all(&fast, workers, 4096),
        );
        for (p, f) in plain.iter().zip(&fast) {
            assert!(p.error.is_none() && f.error.is_none());
            assert!(p.records == f.records, "split size {split_size}");
        }
        let lines: usize = fast.iter().map(|d| d.records.len()).sum();
        assert_eq!(lines, 60_000);
    }
}

/// A file of `lines` JSON lines of about 40 bytes, with `tag` in each.
fn numbered_lines(lines: u64, tag: &str) -> String {
    (0..lines)
        .map(|i| format!("{{\"id\":{i},\"tag\":\"{tag}-{:06}\"}}\n", i % 1_000_000))
        .collect()
}

/// A reader over `path` in blocks of 64 KiB, polled once for 100 records.
fn reader_after_one_poll(
    path: &Path,
) -> (Box<dyn spate_types::SourceReader<Vec<u8>>>, Vec<Vec<u8>>) {
    let source = JsonLinesSource::with_decoder(path, raw_decoder()).block_size(64 << 10);
    let mut reader = source
        .create_reader(&SourceContext {
            worker_index: 0,
            workers: 1,
        })
        .unwrap();
    let (mut records, mut dead, mut dropped) = (Vec::new(), Vec::new(), 0);
    let mut out = spate_types::SourceOutput::new(&mut records, &mut dead, &mut dropped);
    reader.poll(&mut out, 100).unwrap();
    assert_eq!(records.len(), 100);
    (reader, records)
}

#[test]
fn a_file_truncated_while_it_is_read_fails_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("shrinks.jsonl");
    let content = numbered_lines(50_000, "a");
    std::fs::write(&path, &content).unwrap();
    let (mut reader, first) = reader_after_one_poll(&path);
    // Cut the file in the middle of its second block, in the middle of a line.
    let file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    file.set_len(100_003).unwrap();
    drop(file);
    let drained = drain(reader.as_mut(), 1000);
    let err = drained.error.expect("the reader fails").to_string();
    assert!(err.contains(&path.display().to_string()), "{err}");
    assert!(err.contains("truncated while it was read"), "{err}");
    // Whatever came before the error are whole lines of the file as it was.
    let expected: Vec<&[u8]> = content.lines().map(str::as_bytes).collect();
    let got: Vec<Vec<u8>> = first.into_iter().chain(drained.records).collect();
    assert!(got.len() < expected.len());
    assert!(got.iter().zip(&expected).all(|(g, e)| g == e));
}

#[test]
fn a_file_rewritten_while_it_is_read_fails_naming_it() {
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rewritten.jsonl");
    std::fs::write(&path, numbered_lines(50_000, "a")).unwrap();
    let (mut reader, _) = reader_after_one_poll(&path);
    // The same size, other bytes: only the modification time tells. Set it explicitly, as a
    // coarse clock could give the rewrite the time of the first write.
    let mut file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    file.write_all(numbered_lines(50_000, "b").as_bytes())
        .unwrap();
    file.set_modified(std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1))
        .unwrap();
    drop(file);
    let drained = drain(reader.as_mut(), 1000);
    let err = drained.error.expect("the reader fails").to_string();
    assert!(err.contains(&path.display().to_string()), "{err}");
    assert!(err.contains("changed while it was read"), "{err}");
    // No record holds bytes of the rewrite.
    assert!(drained
        .records
        .iter()
        .all(|r| !r.windows(3).any(|w| w == b"\"b-")));
}

#[test]
fn a_file_that_changed_after_it_was_listed_fails_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("grown.jsonl");
    std::fs::write(&path, numbered_lines(10, "a")).unwrap();
    let source = JsonLinesSource::with_decoder(&path, raw_decoder());
    let mut reader = source
        .create_reader(&SourceContext {
            worker_index: 0,
            workers: 1,
        })
        .unwrap();
    std::fs::write(&path, numbered_lines(20, "a")).unwrap();
    let err = drain(reader.as_mut(), 1000)
        .error
        .expect("the reader fails")
        .to_string();
    assert!(err.contains(&path.display().to_string()), "{err}");
    assert!(
        err.contains("was 260 bytes when the job listed it"),
        "{err}"
    );
}

/// Lines for [`Rec`] files: good ones in several layouts, and bad ones of every kind the
/// prefix path must leave to the line decoder (a value going on past its line, CRLF, blanks,
/// trailing bytes, invalid UTF-8, wrong types).
fn rec_line_strategy() -> impl Strategy<Value = Vec<u8>> {
    prop::sample::select(vec![
        &br#"{"id":1,"name":"a"}"#[..],
        br#" { "name" : "b\u00e9" , "extra":[1,{"x":null}], "id" : 2 } "#,
        br#"{"name":"c\"q","id":3,"more":"\ud800"}"#,
        b"{\"id\":4,\"name\":\"d\"}\r",
        b"{\"id\":5,\r\"name\":\"e\"}",
        b"{\"id\":6,",
        b"\"name\":\"f\"}",
        b"",
        b"  \t",
        br#"{"id":8,"name":"h"} x"#,
        b"{\"id\":9,\"name\":\"\xff\"}",
        br#"{"id":"ten","name":"j"}"#,
        br#"{"id":11}"#,
        br#"{"id":12,"name":"l","id":12}"#,
        br#"{"id":13,"name":"m"}{"id":13,"name":"m"}"#,
        br#"{"id":14,"name":"\ud800"}"#,
        b"{\"id\":15,\"name\":\"\xc3\xa9\"}",
    ])
    .prop_map(<[u8]>::to_vec)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// `JsonLinesSource::<T>::new` (whose serde decoder runs on the prefix path) gives the
    /// records and the bad records, with their exact line numbers and reasons, of decoding
    /// each line alone with `decode_json_line`, for any split and block size.
    #[test]
    fn serde_sources_keep_exact_line_numbers(
        lines in prop::collection::vec(rec_line_strategy(), 1..40),
        trailing in any::<bool>(),
        split_size in prop_oneof![1u64..64, 1u64..2000, Just(1u64 << 20)],
        block_size in prop_oneof![1usize..64, Just(1 << 20)],
        workers in 1usize..4,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("recs.jsonl");
        let mut text = lines.join(&b'\n');
        if trailing {
            text.push(b'\n');
        }
        std::fs::write(&path, &text).unwrap();
        // The oracle: each line alone.
        let mut good = Vec::new();
        let mut bad = Vec::new();
        for (i, line) in text.split(|&b| b == b'\n').enumerate() {
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            match spate_connectors::files::decode_json_line::<Rec>(line) {
                Ok(record) => good.push(record),
                Err(reason) => bad.push((i as u64 + 1, reason)),
            }
        }
        let source = JsonLinesSource::<Rec>::new(&path)
            .policy(BadRecordPolicy::DeadLetter("/dev/null".into()))
            .split_size(split_size)
            .block_size(block_size);
        let mut records = Vec::new();
        let mut letters = Vec::new();
        for drained in read_all(&source, workers, 7) {
            prop_assert!(drained.error.is_none());
            records.extend(drained.records);
            letters.extend(drained.dead.into_iter().map(|l| (l.line, l.reason)));
        }
        records.sort_by_key(|r| (r.id, r.name.clone()));
        good.sort_by_key(|r| (r.id, r.name.clone()));
        letters.sort();
        prop_assert_eq!(records, good);
        prop_assert_eq!(letters, bad);
    }
}
