//! The CSV file source, on the `csv` crate, decoding rows into `T` with serde.
//!
//! # One split per file
//!
//! Unlike JSON lines, a CSV file is not cut into byte ranges: a quoted field may hold a
//! newline, so a reader that starts in the middle of a file cannot tell whether a newline ends a
//! record or sits inside a quoted field (Flink's CSV format is not splittable for the same
//! reason). Every file is one split, and worker `w` of `n` reads files `i` with `i % n == w`;
//! for parallelism, give it a directory of several files.
//!
//! # Checkpoints
//!
//! A file's split id is its index in the listing (name order), which does not depend on the
//! number of workers. A reader's [`SourceReader::snapshot`] lists, for the file it is reading,
//! the `csv` position (byte offset, line and record number) just after the last record it
//! consumed, and its finished files, each with the file's name (a restore onto other files
//! fails with a clear error). A restore on any number of workers resumes each
//! file at its position (after reading its header again), skips finished files, and starts
//! files not listed from the beginning: nothing twice, nothing lost, and dead letters keep
//! their exact line numbers. Each file also has its own watermark generator; worker `w` of
//! `n` reads the files `i` with `i % n == w` one after another, and the files it has not
//! started hold its watermark ([`SourceOutput::split_pending`]), so no record is late for
//! being read after another file.
//!
//! # Bad records
//!
//! A record whose fields do not deserialize into `T` (a wrong type, a missing field), or whose
//! number of fields differs from the first record's (the header's, if any), is a bad record:
//! it follows the [`BadRecordPolicy`] with the line where it starts and its raw text, read back
//! from the file. Empty lines are skipped (the `csv` crate's behavior).

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::de::DeserializeOwned;
use spate_types::{
    BadRecordPolicy, DataType, Row, Schema, Source, SourceContext, SourceOutput, SourceReader,
    SourceStatus, SpateError, SpateResult, SplitPosition, Value,
};

use super::discover::{io_error, list_input_files, InputFile};
use crate::bad::handle_bad_record;

/// The buffer of each CSV reader: 1 MiB.
const CSV_BUFFER: usize = 1 << 20;

/// A source that reads CSV records from a file or from all visible files of a directory.
///
/// A directory is read as all its regular files, sorted by name, skipping names that start
/// with `.` or `_`. By default the first row of every file is a header whose names match the
/// fields of `T` (in any order); without headers, fields are matched by position.
///
/// ```no_run
/// # use spate_connectors::files::CsvSource;
/// #[derive(serde::Deserialize)]
/// struct Trip { id: u64, fare: f64 }
/// let trips = CsvSource::<Trip>::new("/data/trips").delimiter(b';');
/// ```
pub struct CsvSource<T> {
    path: PathBuf,
    has_headers: bool,
    delimiter: u8,
    policy: BadRecordPolicy,
    decoder: RecordDecoder<T>,
}

/// Decodes one CSV record, given the file's header row when it has one; an `Err(reason)`
/// makes it a bad record.
pub type RecordDecoder<T> =
    Arc<dyn Fn(&csv::ByteRecord, Option<&csv::ByteRecord>) -> Result<T, String> + Send + Sync>;

impl<T: DeserializeOwned + Send + 'static> CsvSource<T> {
    /// Reads `path` (a file or a directory) with a header row and `,` as the delimiter,
    /// deserializing each record into `T` with serde.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self::with_decoder(
            path,
            Arc::new(
                |record: &csv::ByteRecord, headers: Option<&csv::ByteRecord>| {
                    record
                        .deserialize::<T>(headers)
                        .map_err(|err| match err.kind() {
                            csv::ErrorKind::Deserialize { err, .. } => {
                                deserialize_reason(err, headers)
                            }
                            other => format!("{other:?}"),
                        })
                },
            ),
        )
    }
}

impl CsvSource<Row> {
    /// Reads `path` (a file or a directory) into [`Row`]s of `schema`: with a header row
    /// (the default), each field is the column of its name, in any order, and columns not in
    /// the schema are skipped; without one, the fields are the columns in order. A missing
    /// or empty column is [`Value::Null`] when its field is nullable (an empty column of a
    /// string field is `""`); otherwise, and for a column that does not parse as its
    /// field's type, the record is a bad record. Booleans are `true` / `false` in any case,
    /// timestamps `YYYY-MM-DD HH:MM:SS[.fff]` or epoch milliseconds. A schema with a nested
    /// row is refused: CSV has no nesting.
    pub fn with_schema(path: impl Into<PathBuf>, schema: &Schema) -> SpateResult<Self> {
        let fields: Vec<(String, DataType, bool)> = schema
            .fields()
            .iter()
            .map(|f| match f.data_type {
                DataType::Row(_) => Err(SpateError::Config(format!(
                    "CSV cannot hold the nested row `{}`: a CSV schema has flat fields only",
                    f.name
                ))),
                ref t => Ok((f.name.clone(), t.clone(), f.nullable)),
            })
            .collect::<SpateResult<_>>()?;
        Ok(Self::with_decoder(
            path,
            Arc::new(
                move |record: &csv::ByteRecord, headers: Option<&csv::ByteRecord>| {
                    decode_row(&fields, record, headers)
                },
            ),
        ))
    }
}

/// One record as a row of `fields` (see [`CsvSource::with_schema`]).
fn decode_row(
    fields: &[(String, DataType, bool)],
    record: &csv::ByteRecord,
    headers: Option<&csv::ByteRecord>,
) -> Result<Row, String> {
    let mut values = Vec::with_capacity(fields.len());
    for (i, (name, data_type, nullable)) in fields.iter().enumerate() {
        let column = match headers {
            Some(h) => h.iter().position(|c| c == name.as_bytes()),
            None => Some(i),
        };
        let text = column.and_then(|c| record.get(c));
        let text = match text {
            Some(t) => {
                std::str::from_utf8(t).map_err(|_| format!("field `{name}` is not UTF-8"))?
            }
            None if *nullable => {
                values.push(Value::Null);
                continue;
            }
            None => return Err(format!("missing field `{name}`")),
        };
        if text.is_empty() && *data_type != DataType::String {
            if *nullable {
                values.push(Value::Null);
                continue;
            }
            return Err(format!("field `{name}` is empty but not nullable"));
        }
        let bad = |what: &str| format!("field `{name}`: {text:?} is not {what}");
        let value = match data_type {
            DataType::Bool => match text.to_ascii_lowercase().as_str() {
                "true" => Value::Bool(true),
                "false" => Value::Bool(false),
                _ => return Err(bad("a boolean (true or false)")),
            },
            DataType::Int64 => Value::Int(text.trim().parse().map_err(|_| bad("an integer"))?),
            DataType::Float64 => Value::Float(text.trim().parse().map_err(|_| bad("a number"))?),
            DataType::String => Value::Str(text.to_owned()),
            DataType::Timestamp => Value::Int(match text.trim().parse::<i64>() {
                Ok(ms) => ms,
                Err(_) => crate::files::json::parse_timestamp_ms(text.trim())
                    .ok_or_else(|| bad("a timestamp (YYYY-MM-DD HH:MM:SS.mmm or epoch ms)"))?,
            }),
            DataType::Decimal { precision, scale } => {
                match crate::files::json::parse_decimal(text, *precision, *scale) {
                    Ok(Some(unscaled)) => {
                        Value::Float(unscaled as f64 / 10f64.powi(i32::from(*scale)))
                    }
                    Ok(None) if *nullable => Value::Null,
                    Ok(None) => return Err(bad("a decimal of its column's precision")),
                    Err(_) => return Err(bad("a decimal number")),
                }
            }
            DataType::Row(_) => unreachable!("refused by with_schema"),
        };
        values.push(value);
    }
    Ok(Row(values))
}

impl<T: Send + 'static> CsvSource<T> {
    /// Reads `path` (a file or a directory), decoding each record with `decoder`.
    pub fn with_decoder(path: impl Into<PathBuf>, decoder: RecordDecoder<T>) -> Self {
        CsvSource {
            path: path.into(),
            has_headers: true,
            delimiter: b',',
            policy: BadRecordPolicy::default(),
            decoder,
        }
    }

    /// Sets whether the first row of every file is a header (default `true`).
    pub fn has_headers(mut self, yes: bool) -> Self {
        self.has_headers = yes;
        self
    }

    /// Sets the field delimiter (default `b','`).
    pub fn delimiter(mut self, delimiter: u8) -> Self {
        self.delimiter = delimiter;
        self
    }

    /// Sets what happens to records that cannot be decoded (default: fail the job).
    pub fn policy(mut self, policy: BadRecordPolicy) -> Self {
        self.policy = policy;
        self
    }

    /// The file or directory this source reads.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl<T: Send + 'static> Source<T> for CsvSource<T> {
    fn name(&self) -> String {
        format!("csv:{}", self.path.display())
    }

    fn is_bounded(&self) -> bool {
        true
    }

    fn dead_letter_sink(
        &self,
    ) -> Option<std::sync::Arc<dyn spate_types::Sink<spate_types::DeadLetter>>> {
        crate::bad::dead_letter_sink(&self.policy)
    }

    fn create_reader(&self, ctx: &SourceContext) -> SpateResult<Box<dyn SourceReader<T>>> {
        let all = list_input_files(&self.path, "CSV")?;
        let ids: Vec<u64> = ctx.my_partitions(all.len()).map(|i| i as u64).collect();
        let files: Vec<InputFile> = ids.iter().map(|&i| all[i as usize].clone()).collect();
        let total_bytes = files.iter().map(|f| f.len).sum();
        Ok(Box::new(CsvReader {
            resume: vec![None; files.len()],
            ids,
            finished: Vec::new(),
            files,
            next_file: 0,
            announced: false,
            current: None,
            has_headers: self.has_headers,
            delimiter: self.delimiter,
            policy: self.policy.clone(),
            record: csv::ByteRecord::new(),
            done_bytes: 0,
            total_bytes,
            decoder: Arc::clone(&self.decoder),
        }))
    }
}

/// The file a [`CsvReader`] is reading.
struct OpenCsv {
    file: usize,
    reader: csv::Reader<File>,
    headers: Option<csv::ByteRecord>,
}

/// One worker's reader of a [`CsvSource`].
struct CsvReader<T> {
    files: Vec<InputFile>,
    /// The stable split id of each file: its index in the listing of all files.
    ids: Vec<u64>,
    /// After a restore: where each file goes on (`None`: from its beginning).
    resume: Vec<Option<csv::Position>>,
    /// The files this reader (or, before a restore, an earlier run) finished: id and name.
    finished: Vec<(u64, String)>,
    next_file: usize,
    /// Whether the files after the first were announced as pending splits.
    announced: bool,
    current: Option<OpenCsv>,
    has_headers: bool,
    delimiter: u8,
    policy: BadRecordPolicy,
    record: csv::ByteRecord,
    done_bytes: u64,
    total_bytes: u64,
    decoder: RecordDecoder<T>,
}

impl<T> CsvReader<T> {
    fn open(&self, file: usize) -> SpateResult<OpenCsv> {
        let path = &self.files[file].path;
        let handle =
            File::open(path).map_err(|e| io_error(path, "cannot read the CSV input file", e))?;
        let mut reader = csv::ReaderBuilder::new()
            .has_headers(self.has_headers)
            .delimiter(self.delimiter)
            .buffer_capacity(CSV_BUFFER)
            .from_reader(handle);
        let headers = if self.has_headers {
            Some(
                reader
                    .byte_headers()
                    .map_err(|e| csv_io_error(path, e))?
                    .clone(),
            )
        } else {
            None
        };
        if let Some(pos) = self.resume[file].clone() {
            reader.seek(pos).map_err(|e| csv_io_error(path, e))?;
        }
        Ok(OpenCsv {
            file,
            reader,
            headers,
        })
    }
}

/// A CSV error that is not about one record (an I/O error).
fn csv_io_error(path: &Path, err: csv::Error) -> spate_types::SpateError {
    match err.into_kind() {
        csv::ErrorKind::Io(e) => io_error(path, "cannot read the CSV input file", e),
        other => spate_types::SpateError::Internal(format!(
            "{}: unexpected CSV error: {other:?}",
            path.display()
        )),
    }
}

/// Why a record did not deserialize, in one line, naming the column when there is a header.
fn deserialize_reason(err: &csv::DeserializeError, headers: Option<&csv::ByteRecord>) -> String {
    match err.field() {
        Some(field) => {
            let name = usize::try_from(field)
                .ok()
                .and_then(|i| headers.and_then(|h| h.get(i)))
                .map(|name| format!(" (`{}`)", String::from_utf8_lossy(name)));
            format!(
                "field {}{}: {}",
                field + 1,
                name.unwrap_or_default(),
                err.kind()
            )
        }
        None => err.kind().to_string(),
    }
}

/// Reads back the raw text of a record that spans `[start, end)` of `path`, and the line it
/// starts on, given the line `line` of `start`. The range may begin with the end of the
/// previous line and with empty lines (which the CSV reader skips), and ends with the
/// record's line ending: all are trimmed.
fn raw_record(path: &Path, start: u64, end: u64, line: u64) -> (u64, Vec<u8>) {
    let read = || -> std::io::Result<Vec<u8>> {
        let mut file = File::open(path)?;
        file.seek(SeekFrom::Start(start))?;
        let mut raw = Vec::new();
        file.take(end.saturating_sub(start)).read_to_end(&mut raw)?;
        Ok(raw)
    };
    let Ok(raw) = read() else {
        return (line, Vec::new());
    };
    let lead = raw
        .iter()
        .take_while(|b| matches!(b, b'\r' | b'\n'))
        .count();
    let newlines = raw[..lead].iter().filter(|&&b| b == b'\n').count() as u64;
    let mut text = &raw[lead..];
    while let Some((b'\r' | b'\n', rest)) = text.split_last() {
        text = rest;
    }
    (line + newlines, text.to_vec())
}

impl<T> SourceReader<T> for CsvReader<T> {
    fn poll(
        &mut self,
        out: &mut SourceOutput<'_, T>,
        max_records: usize,
    ) -> SpateResult<SourceStatus> {
        let budget = max_records.max(1);
        let mut produced = false;
        let mut rows = 0usize;
        loop {
            if rows >= budget {
                return Ok(SourceStatus::More);
            }
            let Some(open) = self.current.as_mut() else {
                if self.next_file == self.files.len() {
                    return Ok(if produced {
                        SourceStatus::More
                    } else {
                        SourceStatus::Finished
                    });
                }
                if !self.announced {
                    // Files are read one after another, and each may start again from any
                    // event time: the later ones hold the watermark until they start, or
                    // their records would all be late.
                    self.announced = true;
                    for &id in self.ids.get(self.next_file + 1..).unwrap_or_default() {
                        out.split_pending(id as u32);
                    }
                }
                let open = self.open(self.next_file)?;
                // Each file is a split with its own watermark generator.
                out.split(self.ids[self.next_file] as u32);
                self.next_file += 1;
                self.current = Some(open);
                continue;
            };
            let input = &self.files[open.file];
            let result = open.reader.read_byte_record(&mut self.record);
            let start = self
                .record
                .position()
                .cloned()
                .unwrap_or_else(|| open.reader.position().clone());
            let reason = match result {
                Ok(true) => match (self.decoder)(&self.record, open.headers.as_ref()) {
                    Ok(record) => {
                        rows += 1;
                        produced = true;
                        out.push(record);
                        continue;
                    }
                    Err(reason) => reason,
                },
                Ok(false) => {
                    self.done_bytes += input.len;
                    let id = self.ids[open.file];
                    self.finished.push((id, file_name(&input.path)));
                    out.split_finished(id as u32);
                    self.current = None;
                    continue;
                }
                Err(err) => match err.kind() {
                    csv::ErrorKind::UnequalLengths {
                        expected_len, len, ..
                    } => format!(
                        "found a record with {len} fields, but the first record has {expected_len}"
                    ),
                    csv::ErrorKind::Utf8 { err, .. } => format!("invalid UTF-8: {err}"),
                    _ => return Err(csv_io_error(&input.path, err)),
                },
            };
            rows += 1;
            produced = true;
            let end = open.reader.position().byte();
            let (line, raw) = raw_record(&input.path, start.byte(), end, start.line());
            handle_bad_record(&self.policy, out, &input.display, line, &reason, &raw)?;
        }
    }

    fn progress(&self) -> Option<(u64, u64)> {
        let current = self.current.as_ref().map_or(0, |open| {
            open.reader.position().byte().min(self.files[open.file].len)
        });
        Some((self.done_bytes + current, self.total_bytes))
    }

    /// Every file this reader has started, by name: the `csv` position after its last
    /// consumed record, or a `null` byte when it is finished. Restored files not opened yet
    /// keep their restored position; files not started are not listed.
    fn snapshot(&self) -> Option<Vec<SplitPosition>> {
        let mut positions: Vec<SplitPosition> = self
            .finished
            .iter()
            .map(|(id, name)| csv_position(*id, name, None))
            .collect();
        if let Some(open) = &self.current {
            let name = file_name(&self.files[open.file].path);
            let pos = open.reader.position();
            positions.push(csv_position(self.ids[open.file], &name, Some(pos)));
        }
        for i in self.next_file..self.files.len() {
            if let Some(pos) = &self.resume[i] {
                let name = file_name(&self.files[i].path);
                positions.push(csv_position(self.ids[i], &name, Some(pos)));
            }
        }
        Some(positions)
    }

    fn restore(&mut self, positions: &[SplitPosition]) -> SpateResult<()> {
        let mut keep = Vec::with_capacity(self.files.len());
        for (i, &id) in self.ids.iter().enumerate() {
            let Some(p) = positions.iter().find(|p| p.split == id) else {
                keep.push((i, None));
                continue;
            };
            let file = &self.files[i];
            let name = file_name(&file.path);
            let bad = |why: String| {
                SpateError::Config(format!(
                    "checkpoint: CSV file {} {why}; the input files must not change between a checkpoint and its restore",
                    file.display
                ))
            };
            if p.position["file"].as_str() != Some(&name) {
                return Err(bad(format!("was {} in the checkpoint", p.position["file"])));
            }
            if p.position["byte"].is_null() {
                self.done_bytes += file.len;
                self.finished.push((id, name));
                continue;
            }
            let field = |name: &str| p.position[name].as_u64();
            let (Some(byte), Some(line), Some(record)) =
                (field("byte"), field("line"), field("record"))
            else {
                return Err(bad(format!("has a bad position {}", p.position)));
            };
            if byte > file.len {
                return Err(bad(format!(
                    "is shorter than its checkpointed position {byte}"
                )));
            }
            let mut pos = csv::Position::new();
            pos.set_byte(byte).set_line(line).set_record(record);
            self.done_bytes += byte;
            keep.push((i, Some(pos)));
        }
        self.files = keep.iter().map(|(i, _)| self.files[*i].clone()).collect();
        self.ids = keep.iter().map(|(i, _)| self.ids[*i]).collect();
        self.resume = keep.into_iter().map(|(_, pos)| pos).collect();
        self.next_file = 0;
        self.announced = false;
        Ok(())
    }
}

/// The checkpoint position of file `id` named `name`: at `pos`, or finished.
fn csv_position(id: u64, name: &str, pos: Option<&csv::Position>) -> SplitPosition {
    SplitPosition {
        split: id,
        position: serde_json::json!({
            "file": name,
            "byte": pos.map(csv::Position::byte),
            "line": pos.map(csv::Position::line),
            "record": pos.map(csv::Position::record),
        }),
    }
}

/// The name of an input file, without its directory (so a moved input still restores).
fn file_name(path: &Path) -> String {
    path.file_name().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_record_trims_and_counts_lines() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.csv");
        std::fs::write(&path, "a,b\r\n\r\n1,2\r\n\"x\ny\",3\n").unwrap();
        // The csv crate reports the second record at byte 4 (the `\n` of the header's CRLF).
        assert_eq!(raw_record(&path, 4, 11, 1), (3, b"1,2".to_vec()));
        assert_eq!(raw_record(&path, 11, 20, 3), (4, b"\"x\ny\",3".to_vec()));
        assert_eq!(
            raw_record(&dir.path().join("gone"), 0, 5, 9),
            (9, Vec::new())
        );
    }
}
