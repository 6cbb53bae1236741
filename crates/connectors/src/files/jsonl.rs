//! The JSON-lines file source: one record per line, read in parallel byte-range splits.
//!
//! # Splits
//!
//! Every input file is cut into byte ranges of about [`JsonLinesSource::split_size`] bytes, and
//! the splits of all files are numbered in file-name order. They are dealt out to the workers
//! by their place in their file (every file's first split, then every file's second, ...,
//! round-robin), and each worker reads its own one after another in file and byte order: the
//! workers move through the input together, and `n` files on `n` workers are one file each.
//! A split `[start, end)` owns exactly the lines that *start*
//! in it, which is the standard Hadoop/Flink line splitting:
//!
//! * a split with `start > 0` begins after the first newline at or after `start` (the line it
//!   cuts into belongs to the previous split);
//! * it reads every line that starts at or before `end`, so its last line ends at the first
//!   newline at or after `end` (or at the end of the file).
//!
//! So each line is read by exactly one split, whatever the split size, even a split size of one
//! byte or a line longer than many splits.
//!
//! # Speed
//!
//! A reader reads large blocks (2 MiB by default, with positioned reads: `pread`) straight into
//! one reusable buffer, finds newlines with `memchr`, and hands the decoder a slice of that
//! buffer: no allocation and no copy per line. A line that crosses a block boundary is moved
//! to the front of the buffer (which grows if one line is larger than the buffer).
//!
//! Files are read, not memory-mapped: a mapped file that shrinks raises SIGBUS on the next
//! access to a lost page, which no error handling can catch, while a read simply returns
//! fewer bytes. Measured on the Nexmark JSON-lines benchmark, reading costs no more than
//! mapping did (see `BENCHMARKS.md`).
//!
//! # Line numbers
//!
//! Bad records are reported with their exact 1-based line number within their file, also in
//! splits that start mid-file. A split only knows the lines it read itself, so the number of
//! lines before it is counted (with a vectorized `memchr` count) when the first bad record of
//! that split needs it; readers with no bad record never pay for it, and a reader continues the
//! count from the end of its previous split of the same file, so each reader counts each file at
//! most once.
//!
//! # Decoding
//!
//! [`JsonLinesSource::new`] decodes each line into any serde type and
//! [`JsonLinesSource::with_schema`] into a [`Row`] of a declared schema, both with the general
//! decoders of [`super::json`] (fields in any order, unknown fields skipped without being
//! built); [`JsonLinesSource::with_decoder`] takes any other. [`JsonLinesSource::new`] also
//! sets [`decode_json_prefix`] as its [`JsonLinesSource::prefix_decoder`]: a fast path that
//! decodes a value straight from the read buffer, before the line's end is looked for.
//!
//! # Lines that are skipped or rejected
//!
//! A trailing `\r` is stripped (CRLF files). An empty or whitespace-only line is skipped
//! silently, under every policy: it holds no record, and files often end with one, so
//! failing on it would only make jobs brittle (it still counts for line numbers). Any line the
//! decoder rejects (invalid UTF-8, malformed JSON, a wrong type, a missing field) is a bad
//! record and follows the [`BadRecordPolicy`].
//!
//! # Checkpoints
//!
//! Each split is a checkpointed unit with a stable id: its number in the plan above (file
//! order, then byte order), which depends only on the files and the split size, never on the
//! number of workers. A reader's [`SourceReader::snapshot`] lists, for each split it has
//! started, the byte offset just after the last line it consumed and, when known, the number
//! of newlines before that offset (so that dead letters after a restore keep their exact line
//! numbers without a recount), or that it is finished; with the split's file name and start,
//! so that a restore onto changed input (a file added, removed or resized, another split size)
//! fails with a clear error instead of reading the wrong bytes. A restore on any number of
//! workers hands every new reader all positions; it keeps those of its own splits and resumes
//! each at its offset (a line start, so no partial line is skipped), finished splits are not
//! read again, and splits not listed start from their beginning. Nothing is read twice and
//! nothing is lost, provided the files and the split size stay the same.
//!
//! Each split also has its own watermark generator ([`SourceOutput::split`]), as in Flink's
//! split-aware file source. A reader's next split of the same file follows the one it reads
//! (later lines, later event times in a file in time order), but the first split of a further
//! file may start again from the earliest event time: the reader announces those splits as
//! pending when it starts ([`SourceOutput::split_pending`]), and each holds the watermark
//! until it is read, so none of its records is late for being read after another file. (A
//! worker that reads several files therefore buffers its windows until its last file starts;
//! a source of time-ordered shards, one file per worker, streams.)
//!
//! # Input that changes while it is read
//!
//! The input files must not change while the job reads them. A reader notices when one does:
//! it compares the file's size and modification time with those at listing and opening, after
//! every block it reads and when a split ends, and a file that ends before its listed size was
//! truncated. Either fails the job with an error that names the file; no record is made of
//! bytes that were not those of the file as it was listed.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use serde::de::DeserializeOwned;
use spate_types::{
    BadRecordPolicy, Row, Schema, Source, SourceContext, SourceOutput, SourceReader, SourceStatus,
    SpateError, SpateResult, SplitPosition,
};

use super::discover::{io_error, list_input_files, InputFile};
use super::json::{decode_json_prefix, RowBuilder, RowDecoder};
use crate::bad::{handle_bad_record, is_blank, strip_cr};

/// The default size of a split: 64 MiB, like Flink's and Hadoop's default block size.
pub const DEFAULT_SPLIT_SIZE: u64 = 64 << 20;

/// The default size of each read from a file: 2 MiB.
pub const DEFAULT_BLOCK_SIZE: usize = 2 << 20;

/// After the prefix decoder misses lines in a row, at most this many lines are read the usual
/// way before it is tried again (so input it never takes costs little).
const PREFIX_MISS_LINES: u32 = 64;

/// How far ahead of the line being decoded by the prefix decoder the reader prefetches.
const PREFIX_PREFETCH: usize = 24 << 10;

/// How far ahead of the line being read the reader asks the CPU to prefetch (the buffer is
/// larger than the caches, and the kernel's copy into it leaves it cold).
const PREFETCH_DISTANCE: usize = 8 << 10;

/// How far past its end a split reads at first for its last line; a longer line doubles the
/// read each time.
const LOOKAHEAD: u64 = 4 << 10;

/// A line decoder: turns the bytes of one line (without its line ending) into a record, or
/// says in one line why it cannot.
pub type LineDecoder<T> = Arc<dyn Fn(&[u8]) -> Result<T, String> + Send + Sync>;

/// A fast path next to a [`LineDecoder`]: given bytes that start at a line start (and go on
/// past that line), it returns the record of that line and the length of its text, or `None`
/// to leave the line to the line decoder. See [`JsonLinesSource::prefix_decoder`].
pub type PrefixDecoder<T> = Arc<dyn Fn(&[u8]) -> Option<(T, usize)> + Send + Sync>;

/// Decodes one line as JSON into any serde type `T`: the decoder of [`JsonLinesSource::new`].
///
/// See the [`json` module](super::json) for how, and for what it accepts. The reason of an
/// error is one line, such as `invalid UTF-8: ...` or `missing field `price` at column 23`.
pub fn decode_json_line<T: DeserializeOwned>(line: &[u8]) -> Result<T, String> {
    super::json::decode(line)
}

/// A source that reads JSON lines from a file or from all visible files of a directory.
///
/// A directory is read as all its regular files, sorted by name, skipping names that start
/// with `.` or `_` (hidden, in-progress and marker files such as `_SUCCESS`); subdirectories
/// are not read. See the [module docs](self) for how files are split between workers, and
/// which lines are skipped.
///
/// ```no_run
/// # use spate_connectors::files::JsonLinesSource;
/// # use spate_types::BadRecordPolicy;
/// #[derive(serde::Deserialize)]
/// struct Bid { auction: u64, price: u64 }
/// let bids = JsonLinesSource::<Bid>::new("/data/bids").policy(BadRecordPolicy::Drop);
/// ```
pub struct JsonLinesSource<T> {
    path: PathBuf,
    decoder: LineDecoder<T>,
    prefix_decoder: Option<PrefixDecoder<T>>,
    policy: BadRecordPolicy,
    split_size: u64,
    block_size: usize,
}

impl<T: DeserializeOwned + Send + 'static> JsonLinesSource<T> {
    /// Reads `path` (a file or a directory), decoding each line as JSON into `T` with
    /// [`decode_json_line`]: fields in any order, unknown fields skipped without being built.
    ///
    /// Lines are first tried with [`decode_json_prefix`] as the
    /// [`prefix_decoder`](Self::prefix_decoder), which decodes each value straight from the
    /// read buffer without looking for the line's end first; it takes the same lines and
    /// gives the same records, and leaves any other line to [`decode_json_line`].
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self::with_decoder(path, Arc::new(decode_json_line::<T>)).prefix_decoder(Arc::new(
            // The prefix decoder's length stops before the `\n`.
            |text: &[u8]| decode_json_prefix::<T>(text).map(|(record, n)| (record, n - 1)),
        ))
    }
}

impl JsonLinesSource<Row> {
    /// Reads `path` (a file or a directory), decoding each line into a [`Row`] of `schema`:
    /// its declared fields only, in any order, with unknown fields skipped (see
    /// [`RowDecoder`]). A line that does not fit the schema is a bad record.
    ///
    /// ```no_run
    /// # use spate_connectors::files::JsonLinesSource;
    /// # use spate_types::{DataType, Field, Schema};
    /// let schema = Schema::new(vec![
    ///     Field::not_null("auction", DataType::Int64),
    ///     Field::not_null("price", DataType::Int64),
    ///     Field::new("dateTime", DataType::Timestamp),
    /// ]);
    /// let bids = JsonLinesSource::with_schema("/data/bids", &schema);
    /// ```
    pub fn with_schema(path: impl Into<PathBuf>, schema: &Schema) -> Self {
        let decoder = RowDecoder::new(schema);
        Self::with_decoder(path, Arc::new(move |line: &[u8]| decoder.decode(line)))
    }
}

impl<T: Send + 'static> JsonLinesSource<T> {
    /// Reads `path` (a file or a directory), decoding each line into a row of `schema` built
    /// by `B` (see [`RowBuilder`]): [`with_schema`](JsonLinesSource::with_schema)'s decoding
    /// (the same fields, checks and bad records) straight into a front's own record type.
    pub fn with_schema_as<B: RowBuilder<Value = T>>(
        path: impl Into<PathBuf>,
        schema: &Schema,
    ) -> Self {
        let decoder = RowDecoder::<B>::with_builder(schema);
        Self::with_decoder(path, Arc::new(move |line: &[u8]| decoder.decode_row(line)))
    }
}

impl<T> JsonLinesSource<T> {
    /// Reads `path` (a file or a directory), decoding each line with `decoder` (for example a
    /// hand-written parser that is faster than `serde_json`).
    ///
    /// The decoder gets the bytes of a line without its `\n` or `\r\n`, never an empty or
    /// whitespace-only line; an `Err(reason)` makes the line a bad record.
    pub fn with_decoder(path: impl Into<PathBuf>, decoder: LineDecoder<T>) -> Self {
        JsonLinesSource {
            path: path.into(),
            decoder,
            prefix_decoder: None,
            policy: BadRecordPolicy::default(),
            split_size: DEFAULT_SPLIT_SIZE,
            block_size: DEFAULT_BLOCK_SIZE,
        }
    }

    /// Adds a fast path: the reader hands `decoder` the bytes from a line's start to the end
    /// of the data at hand, without looking for the line's end or checking its UTF-8 first.
    /// When it returns `(record, n)` with `n > 0` and byte `n` is the line's `\n`, the record
    /// is the line's; otherwise (`None`, a `\r\n` line end, or anything else after `n`) the
    /// line goes to the line decoder as usual, with the bad-record policy. So `decoder` must
    /// only return records that the line decoder returns for the same line (it never sees
    /// blank lines: return `None` for them; nor bytes that are not UTF-8: check those it
    /// reads), and need not look past the line's end (for JSON: a control character in a
    /// string, such as a line end, rejects the string).
    pub fn prefix_decoder(mut self, decoder: PrefixDecoder<T>) -> Self {
        self.prefix_decoder = Some(decoder);
        self
    }

    /// Sets what happens to lines the decoder rejects (default: fail the job).
    pub fn policy(mut self, policy: BadRecordPolicy) -> Self {
        self.policy = policy;
        self
    }

    /// Sets the size of the byte-range splits that workers read in parallel (default 64 MiB).
    /// A size of zero is taken as one byte.
    pub fn split_size(mut self, bytes: u64) -> Self {
        self.split_size = bytes.max(1);
        self
    }

    /// Sets the size of each read from a file (default 2 MiB). A size of zero is taken as one
    /// byte; the buffer grows by itself when one line does not fit.
    pub fn block_size(mut self, bytes: usize) -> Self {
        self.block_size = bytes.max(1);
        self
    }

    /// The file or directory this source reads.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl<T: Send + 'static> Source<T> for JsonLinesSource<T> {
    fn name(&self) -> String {
        format!("jsonl:{}", self.path.display())
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
        let files = list_input_files(&self.path, "JSON-lines")?;
        let all = plan_splits(&files, self.split_size);
        let splits: Vec<Planned> = deal(&all, ctx)
            .into_iter()
            .map(|i| Planned {
                id: i as u64,
                split: all[i],
                resume: None,
            })
            .collect();
        let total_bytes = splits.iter().map(|p| p.split.len()).sum();
        Ok(Box::new(JsonLinesReader {
            decoder: Arc::clone(&self.decoder),
            prefix_decoder: self.prefix_decoder.clone(),
            prefix_misses: 0,
            prefix_backoff: 1,
            policy: self.policy.clone(),
            files,
            splits,
            next_split: 0,
            announced: false,
            finished: Vec::new(),
            cursor: None,
            spare_buf: Vec::new(),
            block_size: self.block_size,
            index: LineIndex::default(),
            base_lines: None,
            done_bytes: 0,
            total_bytes,
        }))
    }
}

/// A byte range `[start, end)` of one input file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Split {
    /// The index of the file in the listing.
    pub file: usize,
    /// The first byte of the range.
    pub start: u64,
    /// One past the last byte of the range.
    pub end: u64,
}

impl Split {
    fn len(&self) -> u64 {
        self.end - self.start
    }
}

/// One of a reader's splits: its stable id (its number in the plan of all splits) and, after a
/// restore, where to resume it.
#[derive(Debug, Clone, Copy)]
struct Planned {
    id: u64,
    split: Split,
    resume: Option<Resume>,
}

/// Where a restored split goes on: a line start, and the newlines before it if known.
#[derive(Debug, Clone, Copy)]
struct Resume {
    offset: u64,
    line: Option<u64>,
}

/// The splits (indexes into `all`, planned by [`plan_splits`]) that the worker of `ctx` reads,
/// in the order it reads them: the splits are dealt out round-robin by their place in their
/// file (every file's first split, then every file's second, ...), and each worker reads its
/// own in file and byte order. So the workers move through the files together: one file on
/// `n` workers is read `n` consecutive splits at a time, and `n` files of about one size on
/// `n` workers are one file per worker, each read from its start to its end (a worker's
/// splits of one file are always in byte order, hence in event-time order in a file in time
/// order; only a further file can start earlier, see the reader's `poll`).
fn deal(all: &[Split], ctx: &SourceContext) -> Vec<usize> {
    let mut place = Vec::with_capacity(all.len());
    for (i, split) in all.iter().enumerate() {
        let nth = match i.checked_sub(1).map(|p| &all[p]) {
            Some(prev) if prev.file == split.file => place.last().map_or(0, |&(n, _, _)| n + 1),
            _ => 0,
        };
        place.push((nth, split.file, i));
    }
    place.sort_unstable();
    let mut mine: Vec<usize> = ctx.my_partitions(place.len()).map(|j| place[j].2).collect();
    mine.sort_unstable();
    mine
}

/// Cuts every file into splits of `split_size` bytes (the last one of a file may be shorter);
/// empty files get no split.
pub(crate) fn plan_splits(files: &[InputFile], split_size: u64) -> Vec<Split> {
    let size = split_size.max(1);
    let mut splits = Vec::new();
    for (file, input) in files.iter().enumerate() {
        let mut start = 0;
        while start < input.len {
            let end = start.saturating_add(size).min(input.len);
            splits.push(Split { file, start, end });
            start = end;
        }
    }
    splits
}

/// Reads the lines of one split out of large blocks.
struct SplitCursor {
    file: File,
    split: Split,
    /// The read buffer.
    buf: Vec<u8>,
    /// The file's size and modification time when it was listed and opened (regular files
    /// only): any other size or time later means that it changed while it was read.
    identity: Option<FileIdentity>,
    /// Start of the unread data in `buf`.
    head: usize,
    /// End of the valid data in `buf`.
    len: usize,
    /// Bytes after `head` known to hold no newline (so a long line is scanned once).
    scanned: usize,
    /// How far into the data the CPU was asked to prefetch.
    prefetched: usize,
    /// The file offset of `buf[head]`.
    head_pos: u64,
    /// The file offset where the split's first line starts.
    begin: u64,
    /// Lines returned so far.
    lines: u64,
    /// Newlines consumed since `begin`.
    newlines: u64,
    eof: bool,
    done: bool,
}

impl SplitCursor {
    /// Opens `split` of `input`, skipping to its first line (or, with `resume_at`, at that
    /// offset, which must be a line start inside the split or its end), to be read with
    /// positioned reads of `block_size` bytes into `buf`.
    fn open(
        input: &InputFile,
        split: Split,
        mut buf: Vec<u8>,
        block_size: usize,
        resume_at: Option<u64>,
    ) -> io::Result<Self> {
        let file = File::open(&input.path)?;
        let meta = file.metadata()?;
        let identity = if meta.is_file() {
            if meta.len() != input.len {
                return Err(changed(format!(
                    "was {} bytes when the job listed it and is {} bytes now",
                    input.len,
                    meta.len()
                )));
            }
            Some(FileIdentity {
                len: input.len,
                modified: meta.modified().ok(),
            })
        } else {
            None
        };
        // A restored split resumes at a line start: nothing to skip.
        let from = resume_at.unwrap_or(split.start);
        if buf.len() < block_size {
            buf.resize(block_size, 0);
        }
        let mut cursor = SplitCursor {
            file,
            split,
            buf,
            identity,
            head: 0,
            len: 0,
            scanned: 0,
            prefetched: 0,
            head_pos: from,
            begin: from,
            lines: 0,
            newlines: 0,
            eof: false,
            done: false,
        };
        if resume_at.is_none() && split.start > 0 {
            cursor.skip_partial_line()?;
        }
        cursor.begin = cursor.head_pos;
        Ok(cursor)
    }

    /// Skips past the first newline at or after the split's start: the line it ends belongs to
    /// the previous split. If there is no newline before the split's end, no line starts in
    /// the split, and it is done without reading further (so that tiny splits inside a huge
    /// line cost only their own bytes).
    fn skip_partial_line(&mut self) -> io::Result<()> {
        loop {
            if let Some(i) = memchr::memchr(b'\n', &self.data()[self.head..self.len]) {
                self.head += i + 1;
                self.head_pos += (i + 1) as u64;
                if self.head_pos > self.split.end {
                    self.done = true;
                }
                return Ok(());
            }
            self.head_pos += (self.len - self.head) as u64;
            self.head = 0;
            self.len = 0;
            if self.head_pos >= self.split.end || !self.fill(false)? {
                self.done = true;
                return Ok(());
            }
        }
    }

    /// Moves the unread bytes to the front of the buffer (growing it if they fill it) and reads
    /// more: up to the split's end and, with `beyond_end`, some bytes beyond for its last line
    /// (at least [`LOOKAHEAD`], and at least as much as is buffered, so a long line is read in
    /// doubling steps); at most what the buffer holds. Returns `false` at the end of the file.
    fn fill(&mut self, beyond_end: bool) -> io::Result<bool> {
        if self.head > 0 {
            self.buf.copy_within(self.head..self.len, 0);
            self.len -= self.head;
            self.head = 0;
        }
        self.prefetched = 0;
        if self.len == self.buf.len() {
            let bigger = (self.buf.len().max(1)).saturating_mul(2);
            self.buf.resize(bigger, 0);
        }
        let read_pos = self.head_pos + self.len as u64;
        let beyond = if beyond_end {
            LOOKAHEAD.max(self.len as u64)
        } else {
            0
        };
        let wanted = self
            .split
            .end
            .saturating_sub(read_pos)
            .saturating_add(beyond)
            .max(1);
        let room = self.buf.len() - self.len;
        let take = usize::try_from(wanted).map_or(room, |w| w.min(room));
        loop {
            match self
                .file
                .read_at(&mut self.buf[self.len..self.len + take], read_pos)
            {
                Ok(0) => {
                    if let Some(id) = &self.identity {
                        if read_pos < id.len {
                            return Err(truncated(id.len, read_pos));
                        }
                    }
                    self.check_unchanged()?;
                    self.eof = true;
                    return Ok(false);
                }
                Ok(n) => {
                    // The bytes just read are the file's as it was listed only if it has not
                    // changed since: checked after the read, so a change during it shows.
                    self.check_unchanged()?;
                    self.len += n;
                    return Ok(true);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
    }

    /// Fails when the file's size or modification time is not what it was when the job
    /// listed and opened it.
    fn check_unchanged(&self) -> io::Result<()> {
        let Some(id) = &self.identity else {
            return Ok(());
        };
        let meta = self.file.metadata()?;
        if meta.len() < id.len {
            return Err(truncated(id.len, meta.len()));
        }
        if meta.len() != id.len {
            return Err(changed(format!(
                "grew from {} to {} bytes",
                id.len,
                meta.len()
            )));
        }
        if meta.modified().ok() != id.modified {
            return Err(changed(
                "was rewritten (its modification time changed)".into(),
            ));
        }
        Ok(())
    }

    /// The bytes of the buffer.
    #[inline(always)]
    fn data(&self) -> &[u8] {
        &self.buf
    }

    /// The next line of the split, without its `\n`, with its 1-based number within the split,
    /// or `None` when the split is done.
    #[inline]
    fn next_line(&mut self) -> io::Result<Option<(u64, &[u8])>> {
        loop {
            if self.done {
                return Ok(None);
            }
            if self.head_pos > self.split.end {
                // This line starts after the split: the next split reads it.
                self.done = true;
                return Ok(None);
            }
            let from = self.head + self.scanned;
            if let Some(i) = memchr::memchr(b'\n', &self.data()[from..self.len]) {
                let start = self.head;
                let end = from + i;
                // Ask for the bytes a few lines ahead, as many as this line has: the buffer
                // is larger than the caches, and the hardware prefetcher stops at each page.
                let from = self.prefetched.max(start + PREFETCH_DISTANCE);
                self.prefetched = prefetch_range(self.data(), from, end + 1 + PREFETCH_DISTANCE);
                self.head = end + 1;
                self.head_pos += (end + 1 - start) as u64;
                self.scanned = 0;
                self.lines += 1;
                self.newlines += 1;
                return Ok(Some((self.lines, &self.data()[start..end])));
            }
            if self.eof {
                self.done = true;
                if self.head < self.len {
                    // The last line of the file, without a newline.
                    let start = self.head;
                    self.head_pos += (self.len - start) as u64;
                    self.head = self.len;
                    self.lines += 1;
                    return Ok(Some((self.lines, &self.data()[start..self.len])));
                }
                return Ok(None);
            }
            self.scanned = self.len - self.head;
            self.fill(true)?;
        }
    }

    /// Decodes up to `max` whole lines with `decode` (see [`JsonLinesSource::prefix_decoder`])
    /// from the data already at hand, pushing their records to `out`; returns how many. Stops
    /// at the first line `decode` does not take (then with `true`), at the split's end, and
    /// at the end of the data (a line cut by it is left to [`Self::next_line`]).
    fn decode_prefixed<T>(
        &mut self,
        decode: &PrefixDecoder<T>,
        out: &mut SourceOutput<'_, T>,
        max: usize,
    ) -> (usize, bool) {
        if self.done {
            return (0, false);
        }
        let data = self.data();
        let (start, len) = (self.head, self.len);
        let mut at = start;
        let mut ahead = self.prefetched.max(start + PREFIX_PREFETCH);
        let mut decoded = 0;
        let mut missed = false;
        while decoded < max && self.head_pos + ((at - start) as u64) <= self.split.end {
            let text = &data[at..len];
            // A blank line is never a record; anything but a line end after the record
            // leaves the line to the line decoder.
            match decode(text) {
                Some((record, n)) if n > 0 && text.get(n) == Some(&b'\n') => {
                    at += n + 1;
                    out.push(record);
                    decoded += 1;
                }
                // A line cut by the end of the data is no miss: the line reader joins it.
                _ => {
                    missed = memchr::memchr(b'\n', text).is_some();
                    break;
                }
            }
            ahead = prefetch_range(data, ahead, at + PREFIX_PREFETCH);
        }
        self.prefetched = ahead;
        self.head = at;
        self.head_pos += (at - start) as u64;
        self.scanned = 0;
        let lines = decoded as u64;
        self.lines += lines;
        self.newlines += lines;
        (decoded, missed)
    }

    /// Bytes of the split consumed so far.
    fn consumed(&self) -> u64 {
        self.head_pos
            .saturating_sub(self.split.start)
            .min(self.split.len())
    }
}

/// A file's size and modification time, to notice that it changed while it was read.
#[derive(Debug, Clone, Copy)]
struct FileIdentity {
    len: u64,
    modified: Option<SystemTime>,
}

/// The error of a file that got shorter while it was read.
fn truncated(listed: u64, now: u64) -> io::Error {
    io::Error::new(
        io::ErrorKind::UnexpectedEof,
        format!(
            "the file was truncated while it was read (from {listed} to {now} bytes); input files must not change during a job"
        ),
    )
}

/// The error of a file that changed in another way while it was read.
fn changed(how: String) -> io::Error {
    io::Error::other(format!(
        "the file changed while it was read: it {how}; input files must not change during a job"
    ))
}

/// Prefetches the cache lines of `data[from..upto]` (cut at its end), 64 bytes apart, and
/// returns where the next call should start.
#[inline(always)]
fn prefetch_range(data: &[u8], from: usize, upto: usize) -> usize {
    let upto = upto.min(data.len());
    let mut at = from;
    while at < upto {
        prefetch(data, at);
        at += 64;
    }
    at
}

/// Asks the CPU to load the cache line that holds `data[at]` (nothing if `at` is out of
/// range, or on other architectures than x86_64).
#[inline(always)]
#[allow(unsafe_code)]
fn prefetch(data: &[u8], at: usize) {
    #[cfg(target_arch = "x86_64")]
    if at < data.len() {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        // SAFETY: SSE is part of the x86_64 baseline, and a prefetch only hints the cache: it
        // never faults and changes no memory; the address is inside `data` anyway.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(data.as_ptr().add(at).cast()) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (data, at);
}

/// A known point of one file: `newlines` newlines lie before byte `offset`.
#[derive(Debug, Default)]
struct LineIndex {
    file: usize,
    offset: u64,
    newlines: u64,
}

impl LineIndex {
    /// The number of newlines in `[0, offset)` of file `file`, counted from the last known
    /// point of that file when it lies before `offset`.
    fn newlines_before(
        &mut self,
        files: &[InputFile],
        file: usize,
        offset: u64,
    ) -> SpateResult<u64> {
        let (mut pos, mut count) = if self.file == file && self.offset <= offset {
            (self.offset, self.newlines)
        } else {
            (0, 0)
        };
        if pos < offset {
            let path = &files[file].path;
            let err = |e| io_error(path, "cannot read the JSON-lines input file", e);
            let mut handle = File::open(path).map_err(err)?;
            handle.seek(SeekFrom::Start(pos)).map_err(err)?;
            let mut buf = vec![0u8; 1 << 20];
            while pos < offset {
                let want = usize::try_from(offset - pos)
                    .unwrap_or(usize::MAX)
                    .min(buf.len());
                let n = match handle.read(&mut buf[..want]) {
                    Ok(0) => {
                        return Err(SpateError::io(
                            path,
                            io::Error::new(
                                io::ErrorKind::UnexpectedEof,
                                "the JSON-lines input file shrank while it was read (input files must not change during a job)",
                            ),
                        ))
                    }
                    Ok(n) => n,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => return Err(err(e)),
                };
                count += memchr::memchr_iter(b'\n', &buf[..n]).count() as u64;
                pos += n as u64;
            }
        }
        *self = LineIndex {
            file,
            offset,
            newlines: count,
        };
        Ok(count)
    }
}

/// One worker's reader of a [`JsonLinesSource`].
struct JsonLinesReader<T> {
    decoder: LineDecoder<T>,
    prefix_decoder: Option<PrefixDecoder<T>>,
    /// Lines left to read with the line decoder after the prefix decoder missed one.
    prefix_misses: u32,
    /// The lines to read the usual way after the next miss.
    prefix_backoff: u32,
    policy: BadRecordPolicy,
    files: Vec<InputFile>,
    /// This reader's splits, in file and offset order.
    splits: Vec<Planned>,
    next_split: usize,
    /// Whether the first split of each further file was announced as pending.
    announced: bool,
    /// The splits this reader (or, before a restore, an earlier run) finished.
    finished: Vec<Planned>,
    cursor: Option<SplitCursor>,
    /// The buffer of the last finished split, reused by the next one.
    spare_buf: Vec<u8>,
    block_size: usize,
    index: LineIndex,
    /// Lines before the current split's first line, once counted.
    base_lines: Option<u64>,
    done_bytes: u64,
    total_bytes: u64,
}

impl<T> SourceReader<T> for JsonLinesReader<T> {
    fn poll(
        &mut self,
        out: &mut SourceOutput<'_, T>,
        max_records: usize,
    ) -> SpateResult<SourceStatus> {
        let budget = max_records.max(1);
        let mut lines = 0usize;
        let mut produced = false;
        loop {
            if lines >= budget {
                return Ok(SourceStatus::More);
            }
            let Some(cursor) = self.cursor.as_mut() else {
                if !self.announced {
                    // Splits are read one after another. The next split of the same file
                    // holds later lines (later event times, in a file in time order), but a
                    // further file starts again from anywhere: its first split holds the
                    // watermark until it starts, or its records would all be late.
                    self.announced = true;
                    let later = self.splits.get(self.next_split..).unwrap_or_default();
                    for pair in later.windows(2) {
                        if pair[1].split.file != pair[0].split.file {
                            out.split_pending(split_mark(pair[1].id));
                        }
                    }
                }
                let Some(&planned) = self.splits.get(self.next_split) else {
                    return Ok(if produced {
                        SourceStatus::More
                    } else {
                        SourceStatus::Finished
                    });
                };
                self.next_split += 1;
                let split = planned.split;
                let input = &self.files[split.file];
                let buf = std::mem::take(&mut self.spare_buf);
                let resume_at = planned.resume.map(|r| r.offset);
                let cursor = SplitCursor::open(input, split, buf, self.block_size, resume_at)
                    .map_err(|e| {
                        io_error(&input.path, "cannot read the JSON-lines input file", e)
                    })?;
                self.cursor = Some(cursor);
                self.base_lines = planned.resume.and_then(|r| r.line);
                // Each split has its own watermark generator.
                out.split(split_mark(planned.id));
                continue;
            };
            let (split, begin) = (cursor.split, cursor.begin);
            if let Some(prefix) = &self.prefix_decoder {
                if self.prefix_misses == 0 {
                    let (decoded, missed) = cursor.decode_prefixed(prefix, out, budget - lines);
                    if decoded > 0 {
                        lines += decoded;
                        produced = true;
                        self.prefix_backoff = 1;
                        continue;
                    }
                    if missed {
                        // Its next line is not for the fast path: some lines the usual way,
                        // twice as many after each miss in a row.
                        self.prefix_misses = self.prefix_backoff;
                        self.prefix_backoff = (self.prefix_backoff * 2).min(PREFIX_MISS_LINES);
                    }
                } else {
                    self.prefix_misses -= 1;
                }
            }
            let (number, line) = match cursor.next_line() {
                Ok(Some(line)) => line,
                Ok(None) => {
                    // The split's records came from the file as it was listed only if it is
                    // still that file now.
                    cursor.check_unchanged().map_err(|e| {
                        io_error(
                            &self.files[split.file].path,
                            "cannot read the JSON-lines input file",
                            e,
                        )
                    })?;
                    if let Some(base) = self.base_lines {
                        self.index = LineIndex {
                            file: split.file,
                            offset: cursor.head_pos,
                            newlines: base + cursor.newlines,
                        };
                    }
                    self.done_bytes += split.len();
                    if let Some(done) = self.cursor.take() {
                        self.spare_buf = done.buf;
                    }
                    let planned = self.splits[self.next_split - 1];
                    self.finished.push(planned);
                    out.split_finished(split_mark(planned.id));
                    continue;
                }
                Err(e) => {
                    return Err(io_error(
                        &self.files[split.file].path,
                        "cannot read the JSON-lines input file",
                        e,
                    ))
                }
            };
            lines += 1;
            let line = strip_cr(line);
            if is_blank(line) {
                continue;
            }
            produced = true;
            match (self.decoder)(line) {
                Ok(record) => out.push(record),
                Err(reason) => {
                    let base = match self.base_lines {
                        Some(base) => base,
                        None => {
                            let base =
                                self.index.newlines_before(&self.files, split.file, begin)?;
                            self.base_lines = Some(base);
                            base
                        }
                    };
                    let origin = &self.files[split.file].display;
                    handle_bad_record(&self.policy, out, origin, base + number, &reason, line)?;
                }
            }
        }
    }

    fn progress(&self) -> Option<(u64, u64)> {
        let current = self.cursor.as_ref().map_or(0, SplitCursor::consumed);
        Some((self.done_bytes + current, self.total_bytes))
    }

    /// Every split this reader has started: its file's name and start (to refuse a restore
    /// onto changed input), and the offset after its last consumed line with the newlines
    /// before it (when counted), or a `null` offset when it is finished. Restored splits not
    /// opened yet keep their restored position; splits not started are not listed.
    fn snapshot(&self) -> Option<Vec<SplitPosition>> {
        let mut positions: Vec<SplitPosition> = self
            .finished
            .iter()
            .map(|planned| self.position(planned, None))
            .collect();
        if let Some(cursor) = &self.cursor {
            let planned = &self.splits[self.next_split - 1];
            let line = self.base_lines.map(|base| base + cursor.newlines);
            positions.push(self.position(planned, Some((cursor.head_pos, line))));
        }
        for planned in &self.splits[self.next_split..] {
            if let Some(resume) = planned.resume {
                positions.push(self.position(planned, Some((resume.offset, resume.line))));
            }
        }
        Some(positions)
    }

    fn restore(&mut self, positions: &[SplitPosition]) -> SpateResult<()> {
        let mut kept = Vec::with_capacity(self.splits.len());
        for mut planned in std::mem::take(&mut self.splits) {
            let Some(p) = positions.iter().find(|p| p.split == planned.id) else {
                kept.push(planned);
                continue;
            };
            let file = &self.files[planned.split.file];
            let bad = |why: &str| {
                SpateError::Config(format!(
                    "checkpoint: JSON-lines split {} ({}) {why}; the input files must not change between a checkpoint and its restore",
                    planned.id, file.display
                ))
            };
            if p.position["file"].as_str() != Some(&file_name(&file.path))
                || p.position["start"].as_u64() != Some(planned.split.start)
            {
                return Err(bad(&format!(
                    "was {} at byte {} in the checkpoint",
                    p.position["file"], p.position["start"]
                )));
            }
            if p.position["offset"].is_null() {
                self.done_bytes += planned.split.len();
                self.finished.push(planned);
                continue;
            }
            let offset = p.position["offset"]
                .as_u64()
                .filter(|&o| o >= planned.split.start && o <= file.len)
                .ok_or_else(|| bad(&format!("has a bad position {}", p.position)))?;
            planned.resume = Some(Resume {
                offset,
                line: p.position["line"].as_u64(),
            });
            self.done_bytes += offset
                .saturating_sub(planned.split.start)
                .min(planned.split.len());
            kept.push(planned);
        }
        self.splits = kept;
        self.next_split = 0;
        self.announced = false;
        Ok(())
    }
}

impl<T> JsonLinesReader<T> {
    /// The checkpoint position of `planned`: at `(offset, newlines before it)`, or finished.
    fn position(&self, planned: &Planned, at: Option<(u64, Option<u64>)>) -> SplitPosition {
        SplitPosition {
            split: planned.id,
            position: serde_json::json!({
                "file": file_name(&self.files[planned.split.file].path),
                "start": planned.split.start,
                "offset": at.map(|(offset, _)| offset),
                "line": at.and_then(|(_, line)| line),
            }),
        }
    }
}

/// The name of an input file, without its directory (so a moved input still restores).
fn file_name(path: &Path) -> String {
    path.file_name().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    )
}

/// The id of a split as a watermark split mark (ids beyond `u32` share marks, which only
/// merges their watermark generators).
fn split_mark(id: u64) -> u32 {
    id as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(path: &Path) -> Vec<InputFile> {
        let len = std::fs::metadata(path).unwrap().len();
        vec![InputFile {
            path: path.to_path_buf(),
            display: path.display().to_string(),
            len,
        }]
    }

    /// Every line of every split, as (split, line text).
    fn read_splits(path: &Path, split_size: u64, block: usize) -> Vec<Vec<Vec<u8>>> {
        let files = input(path);
        plan_splits(&files, split_size)
            .into_iter()
            .map(|split| {
                let mut cursor =
                    SplitCursor::open(&files[0], split, Vec::new(), block, None).unwrap();
                let mut lines = Vec::new();
                while let Some((_, line)) = cursor.next_line().unwrap() {
                    lines.push(line.to_vec());
                }
                lines
            })
            .collect()
    }

    #[test]
    fn deals_splits_by_their_place_in_their_file() {
        let split = |file, start| Split {
            file,
            start,
            end: start + 10,
        };
        let dealt = |all: &[Split], workers| -> Vec<Vec<usize>> {
            (0..workers)
                .map(|worker_index| {
                    deal(
                        all,
                        &SourceContext {
                            worker_index,
                            workers,
                        },
                    )
                })
                .collect()
        };
        // One file: consecutive splits on consecutive workers, as before.
        let one: Vec<Split> = (0..5).map(|i| split(0, i * 10)).collect();
        assert_eq!(dealt(&one, 2), vec![vec![0, 2, 4], vec![1, 3]]);
        // Two files of two splits on two workers: one file each.
        let two = [split(0, 0), split(0, 10), split(1, 0), split(1, 10)];
        assert_eq!(dealt(&two, 2), vec![vec![0, 1], vec![2, 3]]);
        // Three files on two workers: the first splits of the three files go round first;
        // each worker reads its splits in file and byte order.
        let three = [
            split(0, 0),
            split(0, 10),
            split(1, 0),
            split(2, 0),
            split(2, 10),
        ];
        assert_eq!(dealt(&three, 2), vec![vec![0, 3, 4], vec![1, 2]]);
    }

    #[test]
    fn plans_splits_per_file() {
        let files = vec![
            InputFile {
                path: "a".into(),
                display: "a".into(),
                len: 10,
            },
            InputFile {
                path: "b".into(),
                display: "b".into(),
                len: 0,
            },
            InputFile {
                path: "c".into(),
                display: "c".into(),
                len: 4,
            },
        ];
        let splits = plan_splits(&files, 4);
        assert_eq!(
            splits,
            vec![
                Split {
                    file: 0,
                    start: 0,
                    end: 4
                },
                Split {
                    file: 0,
                    start: 4,
                    end: 8
                },
                Split {
                    file: 0,
                    start: 8,
                    end: 10
                },
                Split {
                    file: 2,
                    start: 0,
                    end: 4
                },
            ]
        );
    }

    #[test]
    fn each_line_is_read_once_at_any_split_size() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.jsonl");
        let text = "ab\n\ncdef\nghijklmnop\nq\nrs";
        std::fs::write(&path, text).unwrap();
        let expected: Vec<Vec<u8>> = text.split('\n').map(|l| l.as_bytes().to_vec()).collect();
        for split_size in 1..=30 {
            for block in [1, 2, 3, 7, 64] {
                let all: Vec<Vec<u8>> = read_splits(&path, split_size, block)
                    .into_iter()
                    .flatten()
                    .collect();
                assert_eq!(all, expected, "split size {split_size}, block {block}");
            }
        }
    }

    #[test]
    fn blocks_cross_long_lines() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.jsonl");
        // Lines of many lengths, one of them longer than several blocks, and no final newline.
        let mut text = Vec::new();
        for i in 0..40_000u32 {
            let len = if i == 20_000 {
                300_000
            } else {
                (i * 7 % 61) as usize
            };
            text.extend(std::iter::repeat_n(b'a' + (i % 26) as u8, len));
            text.push(b'\n');
        }
        text.extend_from_slice(b"last");
        std::fs::write(&path, &text).unwrap();
        let expected: Vec<Vec<u8>> = text.split(|&b| b == b'\n').map(<[u8]>::to_vec).collect();
        for split_size in [999, 65_536, 100_003, 1 << 30] {
            for block in [1, 4096, 70_000, 1 << 20] {
                let all: Vec<Vec<u8>> = read_splits(&path, split_size, block)
                    .into_iter()
                    .flatten()
                    .collect();
                assert!(all == expected, "split size {split_size}, block {block}");
            }
        }
    }

    #[test]
    fn counts_newlines_from_the_last_known_point() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.jsonl");
        std::fs::write(&path, "a\nb\nc\nd\n").unwrap();
        let files = input(&path);
        let mut index = LineIndex::default();
        assert_eq!(index.newlines_before(&files, 0, 4).unwrap(), 2);
        assert_eq!(index.newlines_before(&files, 0, 8).unwrap(), 4);
        assert_eq!(index.newlines_before(&files, 0, 2).unwrap(), 1);
        assert!(index.newlines_before(&files, 0, 100).is_err());
    }

    #[test]
    fn json_reasons_are_short() {
        #[derive(Debug, serde::Deserialize)]
        #[allow(dead_code)]
        struct Rec {
            id: u64,
        }
        let err = decode_json_line::<Rec>(br#"{"id":"x"}"#).unwrap_err();
        assert!(
            err.starts_with("invalid type: string \"x\", expected u64 at column"),
            "{err}"
        );
        let err = decode_json_line::<Rec>(b"{}").unwrap_err();
        assert_eq!(err, "missing field `id` at column 2");
        let err = decode_json_line::<Rec>(b"{\"id\":\xff}").unwrap_err();
        assert!(err.starts_with("invalid UTF-8"), "{err}");
    }
}
