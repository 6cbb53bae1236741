//! The life of an output file: in progress (hidden, being written), then finished (renamed to
//! its final name, visible to readers).
//!
//! The transition is split in two steps, [`InProgressPart::close`] (flush and close: the file is
//! complete but still hidden, a *pending* part) and [`PendingPart::commit`] (the atomic rename),
//! so that exactly-once output can later keep pending parts until a checkpoint completes,
//! like Flink's two-phase-commit file sink.

use std::fs::{self, File};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use spate_types::SpateResult;

use super::discover::io_error;

/// An output file being written under a hidden name.
pub(crate) struct InProgressPart {
    inprogress: PathBuf,
    final_path: PathBuf,
    writer: BufWriter<File>,
    /// Bytes written so far.
    pub size: u64,
    /// When the part was opened.
    pub created: Instant,
    /// When a record was last written.
    pub last_write: Instant,
}

impl InProgressPart {
    /// Creates (or truncates) the hidden file `inprogress`, which becomes `final_path` when
    /// committed.
    pub fn create(
        inprogress: PathBuf,
        final_path: PathBuf,
        buffer: usize,
        now: Instant,
    ) -> SpateResult<Self> {
        let file = File::create(&inprogress).map_err(|e| {
            io_error(
                &inprogress,
                "cannot create an output file (check the directory's permissions and free space)",
                e,
            )
        })?;
        Ok(InProgressPart {
            inprogress,
            final_path,
            writer: BufWriter::with_capacity(buffer, file),
            size: 0,
            created: now,
            last_write: now,
        })
    }

    /// Appends encoded rows.
    pub fn write(&mut self, bytes: &[u8], now: Instant) -> SpateResult<()> {
        self.writer
            .write_all(bytes)
            .map_err(|e| self.write_error(e))?;
        self.size += bytes.len() as u64;
        self.last_write = now;
        Ok(())
    }

    fn write_error(&self, e: std::io::Error) -> spate_types::SpateError {
        io_error(
            &self.inprogress,
            "cannot write an output file (is the disk full?)",
            e,
        )
    }

    /// Flushes and closes the file: it is complete, but still hidden.
    pub fn close(mut self) -> SpateResult<PendingPart> {
        self.writer.flush().map_err(|e| self.write_error(e))?;
        Ok(PendingPart {
            inprogress: self.inprogress,
            final_path: self.final_path,
        })
    }

    /// The final name of this part.
    #[cfg(test)]
    pub fn final_path(&self) -> &Path {
        &self.final_path
    }
}

/// A complete output file waiting to be made visible.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct PendingPart {
    inprogress: PathBuf,
    final_path: PathBuf,
}

impl PendingPart {
    /// Publishes the part after a restore: renames it unless that already happened.
    pub fn recommit(&self) -> SpateResult<()> {
        // Every restored writer tries every part; whichever renames first wins.
        if fs::rename(&self.inprogress, &self.final_path).is_err() && !self.final_path.exists() {
            return Err(spate_types::SpateError::Job(format!(
                "file sink: a checkpoint's pending part {} is gone (was the output directory \
                 changed?)",
                self.inprogress.display()
            )));
        }
        Ok(())
    }

    /// Atomically renames the file to its final name (replacing a file of that name).
    pub fn commit(self) -> SpateResult<PathBuf> {
        fs::rename(&self.inprogress, &self.final_path).map_err(|e| {
            io_error(
                &self.final_path,
                "cannot move a finished output file to its final name",
                e,
            )
        })?;
        Ok(self.final_path)
    }
}

/// Creates `dir` and its parents if needed.
pub(crate) fn ensure_dir(dir: &Path) -> SpateResult<()> {
    if dir.as_os_str().is_empty() {
        return Ok(());
    }
    fs::create_dir_all(dir).map_err(|e| {
        io_error(
            dir,
            "cannot create the output directory (check its parent's permissions)",
            e,
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hidden_until_committed() {
        let dir = tempfile::tempdir().unwrap();
        let hidden = dir.path().join(".x.inprogress");
        let visible = dir.path().join("x");
        let mut part =
            InProgressPart::create(hidden.clone(), visible.clone(), 4, Instant::now()).unwrap();
        assert_eq!(part.final_path(), visible);
        part.write(b"hello\n", Instant::now()).unwrap();
        assert_eq!(part.size, 6);
        assert!(hidden.exists() && !visible.exists());
        let pending = part.close().unwrap();
        assert_eq!(fs::read(&hidden).unwrap(), b"hello\n");
        assert!(!visible.exists());
        assert_eq!(pending.commit().unwrap(), visible);
        assert!(!hidden.exists());
        assert_eq!(fs::read(&visible).unwrap(), b"hello\n");
    }
}
