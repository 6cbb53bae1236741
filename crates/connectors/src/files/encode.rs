//! Row encoders of the file sinks: how one record becomes one line of a file.

use std::io::{self, Write};
use std::sync::{Arc, Mutex, MutexGuard};

use serde::Serialize;

/// A custom line encoder: appends one record's line to the buffer. The sink ends the line with
/// `\n` unless the encoder already did (so both conventions work).
pub type LineEncoder<T> = Arc<dyn Fn(&T, &mut Vec<u8>) + Send + Sync>;

/// One writer's encoder; stateful, because a CSV part file starts with its own header row.
pub(crate) trait RowEncoder<T>: Send {
    /// Called when a new file (part) starts.
    fn begin_file(&mut self) {}

    /// Appends one record's row, with its `\n`, to `out`; on error `out` is left unchanged.
    fn encode(&mut self, record: &T, out: &mut Vec<u8>) -> Result<(), String>;
}

/// Makes one [`RowEncoder`] per writer.
pub(crate) type EncoderFactory<T> = Arc<dyn Fn() -> Box<dyn RowEncoder<T>> + Send + Sync>;

/// JSON lines with `serde_json`.
struct JsonRows;

impl<T: Serialize> RowEncoder<T> for JsonRows {
    fn encode(&mut self, record: &T, out: &mut Vec<u8>) -> Result<(), String> {
        let start = out.len();
        match serde_json::to_writer(&mut *out, record) {
            Ok(()) => {
                out.push(b'\n');
                Ok(())
            }
            Err(e) => {
                out.truncate(start);
                Err(e.to_string())
            }
        }
    }
}

/// The factory of JSON-lines encoders.
pub(crate) fn json_rows<T: Serialize + 'static>() -> EncoderFactory<T> {
    Arc::new(|| Box::new(JsonRows))
}

/// The options of the CSV row format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CsvOptions {
    /// Whether every file starts with a header row (the field names of `T`).
    pub header: bool,
    /// The field delimiter.
    pub delimiter: u8,
}

impl Default for CsvOptions {
    fn default() -> Self {
        CsvOptions {
            header: true,
            delimiter: b',',
        }
    }
}

/// A byte buffer shared between a CSV writer (which owns its output) and its encoder.
#[derive(Clone, Default)]
struct SharedBuf(Arc<Mutex<Vec<u8>>>);

impl SharedBuf {
    fn lock(&self) -> MutexGuard<'_, Vec<u8>> {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl Write for SharedBuf {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.lock().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// CSV rows with the `csv` crate's serde support; a new header row for every file.
struct CsvRows {
    options: CsvOptions,
    writer: Option<csv::Writer<SharedBuf>>,
    bytes: SharedBuf,
    /// Whether a row of the current file was written (so its header is out).
    wrote_row: bool,
}

impl CsvRows {
    fn new_writer(&self, header: bool) -> csv::Writer<SharedBuf> {
        csv::WriterBuilder::new()
            .has_headers(header)
            .delimiter(self.options.delimiter)
            .terminator(csv::Terminator::Any(b'\n'))
            .buffer_capacity(4096)
            .from_writer(self.bytes.clone())
    }
}

impl<T: Serialize> RowEncoder<T> for CsvRows {
    fn begin_file(&mut self) {
        self.writer = Some(self.new_writer(self.options.header));
        self.bytes.lock().clear();
        self.wrote_row = false;
    }

    fn encode(&mut self, record: &T, out: &mut Vec<u8>) -> Result<(), String> {
        if self.writer.is_none() {
            self.writer = Some(self.new_writer(self.options.header));
        }
        let Some(writer) = self.writer.as_mut() else {
            return Err("the CSV writer is missing".to_owned());
        };
        let result = writer
            .serialize(record)
            .and_then(|()| writer.flush().map_err(csv::Error::from));
        let mut bytes = self.bytes.lock();
        match result {
            Ok(()) => {
                out.append(&mut bytes);
                drop(bytes);
                self.wrote_row = true;
                Ok(())
            }
            Err(e) => {
                drop(bytes);
                // The writer may hold half a row: start over, with a header only if this file
                // has none yet. (Dropping the old writer flushes its rest into `bytes`.)
                let header = self.options.header && !self.wrote_row;
                self.writer = Some(self.new_writer(header));
                self.bytes.lock().clear();
                Err(e.to_string())
            }
        }
    }
}

/// The factory of CSV encoders.
pub(crate) fn csv_rows<T: Serialize + 'static>(options: CsvOptions) -> EncoderFactory<T> {
    Arc::new(move || {
        Box::new(CsvRows {
            options,
            writer: None,
            bytes: SharedBuf::default(),
            wrote_row: false,
        })
    })
}

/// Lines from a caller's closure.
struct CustomRows<T>(LineEncoder<T>);

impl<T> RowEncoder<T> for CustomRows<T> {
    fn encode(&mut self, record: &T, out: &mut Vec<u8>) -> Result<(), String> {
        let start = out.len();
        (self.0)(record, out);
        if out[start..].last() != Some(&b'\n') {
            out.push(b'\n');
        }
        Ok(())
    }
}

/// The factory of encoders that call `encoder`.
pub(crate) fn custom_rows<T: 'static>(encoder: LineEncoder<T>) -> EncoderFactory<T> {
    Arc::new(move || Box::new(CustomRows(Arc::clone(&encoder))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Serialize)]
    struct Row {
        id: u32,
        name: &'static str,
    }

    #[test]
    fn json_rows_are_lines() {
        let mut enc = json_rows::<Row>()();
        let mut out = Vec::new();
        enc.encode(&Row { id: 1, name: "a" }, &mut out).unwrap();
        assert_eq!(out, b"{\"id\":1,\"name\":\"a\"}\n");
    }

    #[test]
    fn csv_rows_have_one_header_per_file() {
        let mut enc = csv_rows::<Row>(CsvOptions::default())();
        let mut out = Vec::new();
        enc.begin_file();
        enc.encode(&Row { id: 1, name: "a,b" }, &mut out).unwrap();
        enc.encode(&Row { id: 2, name: "c" }, &mut out).unwrap();
        enc.begin_file();
        enc.encode(&Row { id: 3, name: "d" }, &mut out).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "id,name\n1,\"a,b\"\n2,c\nid,name\n3,d\n"
        );
        let mut enc = csv_rows::<Row>(CsvOptions {
            header: false,
            delimiter: b';',
        })();
        let mut out = Vec::new();
        enc.encode(&Row { id: 1, name: "a" }, &mut out).unwrap();
        assert_eq!(out, b"1;a\n");
    }

    #[test]
    fn csv_errors_leave_output_unchanged() {
        #[derive(Serialize)]
        struct Nested {
            inner: std::collections::BTreeMap<String, u32>,
        }
        let mut enc = csv_rows::<Nested>(CsvOptions::default())();
        let mut out = b"keep".to_vec();
        let mut map = std::collections::BTreeMap::new();
        map.insert("a".to_string(), 1);
        assert!(enc.encode(&Nested { inner: map }, &mut out).is_err());
        assert_eq!(out, b"keep");

        #[derive(Serialize)]
        struct Maybe {
            a: u32,
            b: Option<std::collections::BTreeMap<String, u32>>,
        }
        let mut enc = csv_rows::<Maybe>(CsvOptions::default())();
        let mut out = Vec::new();
        enc.begin_file();
        let mut map = std::collections::BTreeMap::new();
        map.insert("x".to_string(), 1);
        assert!(enc.encode(&Maybe { a: 1, b: Some(map) }, &mut out).is_err());
        enc.encode(&Maybe { a: 2, b: None }, &mut out).unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), "a,b\n2,\n");
    }

    #[test]
    fn custom_rows_add_the_newline() {
        let mut enc = custom_rows::<u32>(Arc::new(|n, out| {
            out.extend_from_slice(n.to_string().as_bytes())
        }))();
        let mut out = Vec::new();
        enc.encode(&7, &mut out).unwrap();
        assert_eq!(out, b"7\n");
        enc.encode(&8, &mut out).unwrap();
        assert_eq!(out, b"7\n8\n");
        // An encoder that ends its lines itself gets no second newline.
        let mut enc = custom_rows::<u32>(Arc::new(|n, out| {
            out.extend_from_slice(format!("{n}\n").as_bytes())
        }))();
        let mut out = b"x\n".to_vec();
        enc.encode(&7, &mut out).unwrap();
        assert_eq!(out, b"x\n7\n");
        // An empty line is still a line.
        let mut enc = custom_rows::<u32>(Arc::new(|_, _| {}))();
        enc.encode(&7, &mut out).unwrap();
        assert_eq!(out, b"x\n7\n\n");
    }
}
