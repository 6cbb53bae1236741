//! The CSV source: headers, delimiters, policies with exact lines and raw text.

use spate_connectors::files::CsvSource;
use spate_types::{BadRecordPolicy, Source, SourceContext, SpateError};

use crate::util::{read_all, read_ok};

#[derive(Debug, Clone, PartialEq, serde::Deserialize)]
struct Row {
    id: u64,
    name: String,
    score: f64,
}

fn row(id: u64, name: &str, score: f64) -> Row {
    Row {
        id,
        name: name.into(),
        score,
    }
}

#[test]
fn headers_match_fields_in_any_order() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rows.csv");
    std::fs::write(&path, "score,id,name\n1.5,1,a\n2.5,2,\"b, with comma\"\r\n").unwrap();
    let drained = read_ok(&CsvSource::<Row>::new(&path));
    assert_eq!(
        drained.records,
        [row(1, "a", 1.5), row(2, "b, with comma", 2.5)]
    );
}

#[test]
fn without_headers_fields_go_by_position() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rows.csv");
    std::fs::write(&path, "1;a;1.5\n2;b;2.5").unwrap();
    let source = CsvSource::<(u64, String, f64)>::new(&path)
        .has_headers(false)
        .delimiter(b';');
    let drained = read_ok(&source);
    assert_eq!(
        drained.records,
        [(1, "a".to_string(), 1.5), (2, "b".to_string(), 2.5)]
    );
    // With the default header, the first row is taken as the header.
    let drained = read_ok(&CsvSource::<(u64, String, f64)>::new(&path).delimiter(b';'));
    assert_eq!(drained.records, [(2, "b".to_string(), 2.5)]);
}

/// The file, its good records, and its bad lines (line, reason, raw).
type Mixed = (
    std::path::PathBuf,
    Vec<Row>,
    Vec<(u64, &'static str, &'static str)>,
);

/// A file with good and bad records; the bad ones with their line, reason and raw text.
fn mixed(dir: &std::path::Path) -> Mixed {
    let path = dir.join("mixed.csv");
    let text: &[u8] = b"id,name,score\n\
1,a,1.5\n\
2,b,notanumber\n\
3,c\n\
4,\"multi\nline\",2.0\n\
x,d,3.0\n\
5,e,4.0\n\
\n\
6,f,5.0\r\n\
7,g\xff,1.0\n\
8,h,2.0,extra\n\
9,i,-1";
    std::fs::write(&path, text).unwrap();
    let good = vec![
        row(1, "a", 1.5),
        row(4, "multi\nline", 2.0),
        row(5, "e", 4.0),
        row(6, "f", 5.0),
        row(9, "i", -1.0),
    ];
    let bad = vec![
        (
            3,
            "field 3 (`score`): invalid float literal",
            "2,b,notanumber",
        ),
        (
            4,
            "found a record with 2 fields, but the first record has 3",
            "3,c",
        ),
        (
            7,
            "field 1 (`id`): invalid digit found in string",
            "x,d,3.0",
        ),
        (
            11,
            "field 2 (`name`): invalid utf-8 sequence of 1 bytes from index 1",
            "7,g\u{fffd},1.0",
        ),
        (
            12,
            "found a record with 4 fields, but the first record has 3",
            "8,h,2.0,extra",
        ),
    ];
    (path, good, bad)
}

#[test]
fn fail_policy_names_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let (path, good, _) = mixed(dir.path());
    let drained = read_all(&CsvSource::<Row>::new(&path), 1, 100).remove(0);
    assert_eq!(drained.records, good[..1]);
    let err = drained.error.expect("a bad record");
    assert!(matches!(err, SpateError::BadRecord { line: 3, .. }));
    assert_eq!(
        err.to_string(),
        format!(
            "bad record in {} line 3: field 3 (`score`): invalid float literal",
            path.display()
        )
    );
}

#[test]
fn drop_policy_counts() {
    let dir = tempfile::tempdir().unwrap();
    let (path, good, bad) = mixed(dir.path());
    let drained = read_all(
        &CsvSource::<Row>::new(&path).policy(BadRecordPolicy::Drop),
        1,
        2,
    )
    .remove(0);
    assert!(drained.error.is_none());
    assert_eq!(drained.records, good);
    assert_eq!(drained.dropped, bad.len() as u64);
}

#[test]
fn dead_letter_policy_has_lines_reasons_and_raw_text() {
    let dir = tempfile::tempdir().unwrap();
    let (path, good, bad) = mixed(dir.path());
    let source =
        CsvSource::<Row>::new(&path).policy(BadRecordPolicy::DeadLetter("dead.jsonl".into()));
    let drained = read_all(&source, 1, 3).remove(0);
    assert!(drained.error.is_none());
    assert_eq!(drained.records, good);
    let got: Vec<(u64, String, String)> = drained
        .dead
        .iter()
        .map(|l| (l.line, l.reason.clone(), l.raw.clone()))
        .collect();
    let want: Vec<(u64, String, String)> = bad
        .iter()
        .map(|(l, r, raw)| (*l, r.to_string(), raw.to_string()))
        .collect();
    assert_eq!(got, want);
    assert!(drained
        .dead
        .iter()
        .all(|l| l.source == path.display().to_string()));
}

#[test]
fn a_directory_is_one_split_per_file() {
    let dir = tempfile::tempdir().unwrap();
    for i in 0..5 {
        let mut text = String::from("id,name,score\n");
        for j in 0..10 {
            text.push_str(&format!("{},n{i},{j}.5\n", i * 10 + j));
        }
        std::fs::write(dir.path().join(format!("f{i}.csv")), text).unwrap();
    }
    std::fs::write(dir.path().join("_SUCCESS"), "").unwrap();
    for workers in [1, 2, 3, 7] {
        let all = read_all(&CsvSource::<Row>::new(dir.path()), workers, 4);
        let mut ids: Vec<u64> = Vec::new();
        for (w, drained) in all.iter().enumerate() {
            assert!(drained.error.is_none());
            // Worker w reads whole files i with i % workers == w, in order.
            let expected: Vec<u64> = (0..5)
                .filter(|i| i % workers == w)
                .flat_map(|i| i as u64 * 10..i as u64 * 10 + 10)
                .collect();
            let got: Vec<u64> = drained.records.iter().map(|r| r.id).collect();
            assert_eq!(got, expected);
            ids.extend(got);
        }
        ids.sort();
        assert_eq!(ids, (0..50).collect::<Vec<_>>());
    }
}

#[test]
fn missing_path_and_progress() {
    let source = CsvSource::<Row>::new("/no/such.csv");
    let msg = source
        .create_reader(&SourceContext {
            worker_index: 0,
            workers: 1,
        })
        .err()
        .unwrap()
        .to_string();
    assert!(
        msg.starts_with("/no/such.csv: cannot read the CSV input"),
        "{msg}"
    );

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.csv");
    std::fs::write(&path, "id,name,score\n1,a,1\n").unwrap();
    let source = CsvSource::<Row>::new(&path);
    let mut reader = source
        .create_reader(&SourceContext {
            worker_index: 0,
            workers: 1,
        })
        .unwrap();
    assert_eq!(reader.progress(), Some((0, 20)));
    crate::util::drain(reader.as_mut(), 10);
    assert_eq!(reader.progress(), Some((20, 20)));
}

/// `CsvSource::with_schema`: columns by header name (in any order, extra ones skipped) or
/// by position, typed per field, nulls for missing or empty nullable columns, and a bad
/// record with its reason for everything else; a nested row is refused.
#[test]
fn a_declared_schema_types_the_columns() {
    use spate_types::{DataType, Field, Row as SRow, Schema, Value};
    let schema = Schema::new(vec![
        Field::not_null("id", DataType::Int64),
        Field::new("price", DataType::Float64),
        Field::new("ok", DataType::Bool),
        Field::new("name", DataType::String),
        Field::new("at", DataType::Timestamp),
    ]);
    let dir = tempfile::tempdir().unwrap();
    let with_header = dir.path().join("h.csv");
    std::fs::write(
        &with_header,
        "name,extra,id,ok,price,at\n\
         ann,x,1,TRUE,2.5,1970-01-01 00:00:01.500\n\
         ,y,2,false,,3000\n\
         bob,z,x3,true,1,5\n\
         cid,z,,true,1,5\n\
         dan,z,4,maybe,1,5\n",
    )
    .unwrap();
    let drained = read_all(
        &CsvSource::with_schema(&with_header, &schema)
            .unwrap()
            .policy(BadRecordPolicy::Drop),
        1,
        100,
    )
    .remove(0);
    assert!(drained.error.is_none());
    let s = |v: &str| Value::Str(v.into());
    assert_eq!(
        drained.records,
        vec![
            SRow(vec![
                Value::Int(1),
                Value::Float(2.5),
                Value::Bool(true),
                s("ann"),
                Value::Int(1500)
            ]),
            SRow(vec![
                Value::Int(2),
                Value::Null,
                Value::Bool(false),
                s(""),
                Value::Int(3000)
            ]),
        ]
    );
    assert_eq!(
        drained.dropped, 3,
        "x3, an empty id and maybe are bad records"
    );

    // The reasons name the field.
    let failed = read_all(
        &CsvSource::with_schema(&with_header, &schema).unwrap(),
        1,
        100,
    )
    .remove(0)
    .error
    .expect("the default policy fails the job")
    .to_string();
    assert!(
        failed.contains("field `id`: \"x3\" is not an integer"),
        "{failed}"
    );

    // Without a header: by position; empty columns are null (a string's is "").
    let positional = dir.path().join("p.csv");
    std::fs::write(&positional, "7,1.25,false,eve,10\n8,,,,\n").unwrap();
    let rows = read_ok(
        &CsvSource::with_schema(&positional, &schema)
            .unwrap()
            .has_headers(false),
    )
    .records;
    assert_eq!(
        rows,
        vec![
            SRow(vec![
                Value::Int(7),
                Value::Float(1.25),
                Value::Bool(false),
                s("eve"),
                Value::Int(10)
            ]),
            SRow(vec![
                Value::Int(8),
                Value::Null,
                Value::Null,
                s(""),
                Value::Null
            ]),
        ]
    );

    let nested = Schema::new(vec![Field::new("r", DataType::Row(schema.clone()))]);
    let err = CsvSource::with_schema(&positional, &nested)
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("nested row `r`"), "{err}");
}
