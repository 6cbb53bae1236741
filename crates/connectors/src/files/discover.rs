//! Finding the input files of a file source: one file, or the visible regular files of a
//! directory, in name order.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use spate_types::{SpateError, SpateResult};

/// One input file, with its size when it was listed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct InputFile {
    /// The path, as given or joined onto the directory.
    pub path: PathBuf,
    /// The path as text, for error messages and dead letters.
    pub display: String,
    /// The size in bytes when listed.
    pub len: u64,
}

/// Wraps an I/O error with what was being done, so the message says what the user can check.
pub(crate) fn io_error(path: &Path, what: &str, err: io::Error) -> SpateError {
    SpateError::io(path, io::Error::new(err.kind(), format!("{what}: {err}")))
}

/// Whether a directory entry is hidden from file sources (Flink and Hadoop skip these too:
/// `.`-files are hidden or in progress, `_`-files are markers such as `_SUCCESS`).
pub(crate) fn is_hidden_name(name: &str) -> bool {
    name.starts_with('.') || name.starts_with('_')
}

/// Lists the input files of `path`: the file itself, or every regular file (following
/// symbolic links) directly inside the directory whose name does not start with `.` or `_`,
/// sorted by name. Subdirectories are not read.
pub(crate) fn list_input_files(path: &Path, kind: &str) -> SpateResult<Vec<InputFile>> {
    let meta = fs::metadata(path).map_err(|e| {
        io_error(
            path,
            &format!("cannot read the {kind} input (check that the path exists and is readable)"),
            e,
        )
    })?;
    if meta.is_file() {
        return Ok(vec![InputFile {
            path: path.to_path_buf(),
            display: path.display().to_string(),
            len: meta.len(),
        }]);
    }
    if !meta.is_dir() {
        return Err(SpateError::Config(format!(
            "{}: the {kind} input is neither a regular file nor a directory",
            path.display()
        )));
    }
    let list_err = |e| {
        io_error(
            path,
            &format!("cannot list the {kind} input directory (check its permissions)"),
            e,
        )
    };
    let mut files = Vec::new();
    for entry in fs::read_dir(path).map_err(list_err)? {
        let entry = entry.map_err(list_err)?;
        let name = entry.file_name();
        if is_hidden_name(&name.to_string_lossy()) {
            continue;
        }
        let file_path = entry.path();
        let meta = match fs::metadata(&file_path) {
            Ok(meta) => meta,
            // Vanished between listing and stat, or a dangling link: not an input file.
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => {
                return Err(io_error(
                    &file_path,
                    &format!("cannot read the {kind} input file"),
                    e,
                ))
            }
        };
        if meta.is_file() {
            files.push(InputFile {
                display: file_path.display().to_string(),
                path: file_path,
                len: meta.len(),
            });
        }
    }
    files.sort_by(|a, b| a.path.file_name().cmp(&b.path.file_name()));
    if files.is_empty() {
        tracing::warn!(dir = %path.display(), "the {kind} input directory holds no visible file");
    }
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_visible_files_sorted() {
        let dir = tempfile::tempdir().unwrap();
        for name in ["b.jsonl", "a.jsonl", ".hidden", "_SUCCESS", "c.txt"] {
            fs::write(dir.path().join(name), "x\n").unwrap();
        }
        fs::create_dir(dir.path().join("sub")).unwrap();
        let files = list_input_files(dir.path(), "JSON-lines").unwrap();
        let names: Vec<_> = files
            .iter()
            .map(|f| f.path.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["a.jsonl", "b.jsonl", "c.txt"]);
        assert!(files.iter().all(|f| f.len == 2));
    }

    #[test]
    fn missing_path_is_a_clear_error() {
        let err = list_input_files(Path::new("/no/such/input.jsonl"), "JSON-lines").unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.contains("/no/such/input.jsonl") && msg.contains("check that the path exists"),
            "{msg}"
        );
        assert!(matches!(err, SpateError::Io { .. }));
    }
}
