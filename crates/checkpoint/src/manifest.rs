//! The manifest: what a checkpoint consists of, and its encoding on storage.
//!
//! On storage the manifest is one JSON object, readable with any JSON tool:
//!
//! ```json
//! {
//!   "format": "spate-checkpoint-manifest",
//!   "version": 1,
//!   "manifest_crc32c": 2905417045,
//!   "manifest": {
//!     "checkpoint_id": 7,
//!     "kind": "checkpoint",
//!     ...
//!   }
//! }
//! ```
//!
//! `manifest_crc32c` is the CRC-32C of the exact bytes of the `"manifest"` value as they stand in
//! the file, so a flipped byte anywhere in the manifest, source positions included, is caught,
//! not only one that breaks the JSON.

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

/// The file name of a manifest inside a checkpoint or savepoint directory.
pub const MANIFEST_FILE: &str = "_manifest.json";

/// The value of the envelope's `format` field.
const FORMAT: &str = "spate-checkpoint-manifest";

/// The manifest version this crate writes and reads.
pub const MANIFEST_VERSION: u32 = 1;

/// Whether a snapshot is a periodic checkpoint (owned by retention) or a savepoint (owned by the
/// user, never deleted by Spate).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CheckpointKind {
    /// A periodic checkpoint in `<root>/chk-<id>/`.
    Checkpoint,
    /// A savepoint in a location the user chose.
    Savepoint,
}

/// One state file of a checkpoint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileEntry {
    /// The file's name within its checkpoint directory, for example
    /// `worker-3/op-window-7/kg-0012.bin`.
    pub name: String,
    /// Its length in bytes.
    pub size_bytes: u64,
    /// The CRC-32C (Castagnoli) of its bytes.
    pub crc32c: u32,
    /// The checkpoint whose directory holds the file. Equal to the manifest's own id for a file
    /// written by this checkpoint; an earlier id for a file that an incremental checkpoint shares
    /// with an earlier one. Retention never deletes a file a retained manifest refers to.
    pub checkpoint_id: u64,
}

/// What a checkpoint consists of. Written last, atomically, once every file it lists is durable;
/// a checkpoint without a valid manifest does not exist as far as restore is concerned.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// The checkpoint's id; ids increase over the life of a job.
    pub checkpoint_id: u64,
    /// Checkpoint or savepoint.
    pub kind: CheckpointKind,
    /// The job's max parallelism (number of key groups). A restore with another value must be
    /// refused, since keys would land in other groups.
    pub max_parallelism: u32,
    /// The number of workers that wrote the checkpoint.
    pub workers: u32,
    /// When the checkpoint was begun, in milliseconds since the Unix epoch.
    pub created_unix_ms: u64,
    /// From begin to every file durable, in milliseconds.
    pub duration_ms: u64,
    /// The sum of the sizes of all files, shared ones included.
    pub total_size_bytes: u64,
    /// Every file of the checkpoint, sorted by name.
    pub files: Vec<FileEntry>,
    /// What the engine stored with the checkpoint: source positions (file offsets, generator
    /// sequence numbers), operator ids, anything else. Opaque to storage.
    pub metadata: serde_json::Value,
}

impl Manifest {
    /// The entry of the file `name`, if the checkpoint has one.
    pub fn file(&self, name: &str) -> Option<&FileEntry> {
        self.files
            .binary_search_by(|f| f.name.as_str().cmp(name))
            .ok()
            .map(|i| &self.files[i])
    }

    /// The bytes of the manifest file: the envelope with the manifest and its checksum.
    pub(crate) fn encode(&self) -> Vec<u8> {
        let body = serde_json::to_string_pretty(self)
            .expect("a manifest has string keys only, so it always serializes");
        // Indent the body under "manifest". Inside JSON strings a line break is escaped, so every
        // raw '\n' is formatting and indenting it changes no value.
        let body = body.replace('\n', "\n  ");
        let crc = crc32c::crc32c(body.as_bytes());
        format!(
            "{{\n  \"format\": \"{FORMAT}\",\n  \"version\": {MANIFEST_VERSION},\n  \"manifest_crc32c\": {crc},\n  \"manifest\": {body}\n}}\n"
        )
        .into_bytes()
    }

    /// Parses and checks the bytes of a manifest file. The error says what is wrong in a few
    /// words, for a warning or an error message.
    pub(crate) fn decode(bytes: &[u8]) -> Result<Manifest, String> {
        #[derive(Deserialize)]
        struct Envelope<'a> {
            format: String,
            version: u32,
            manifest_crc32c: u32,
            #[serde(borrow)]
            manifest: &'a RawValue,
        }
        let text = std::str::from_utf8(bytes).map_err(|e| format!("manifest is not UTF-8: {e}"))?;
        let envelope: Envelope<'_> =
            serde_json::from_str(text).map_err(|e| format!("manifest does not parse: {e}"))?;
        if envelope.format != FORMAT {
            return Err(format!(
                "not a Spate manifest (format {:?})",
                envelope.format
            ));
        }
        if envelope.version != MANIFEST_VERSION {
            return Err(format!(
                "manifest version {} is not supported (this build reads version {MANIFEST_VERSION}; a newer Spate wrote it?)",
                envelope.version
            ));
        }
        let body = envelope.manifest.get();
        let crc = crc32c::crc32c(body.as_bytes());
        if crc != envelope.manifest_crc32c {
            return Err(format!(
                "manifest checksum mismatch (crc32c {crc}, recorded {})",
                envelope.manifest_crc32c
            ));
        }
        let manifest: Manifest =
            serde_json::from_str(body).map_err(|e| format!("manifest does not parse: {e}"))?;
        manifest.check()?;
        Ok(manifest)
    }

    /// Internal consistency: sorted unique names, valid names, sizes adding up, no file owned by
    /// a later checkpoint.
    fn check(&self) -> Result<(), String> {
        let mut total = 0u64;
        for (i, f) in self.files.iter().enumerate() {
            validate_name(&f.name).map_err(|e| format!("manifest lists a bad file name: {e}"))?;
            if i > 0 && self.files[i - 1].name >= f.name {
                return Err(format!(
                    "manifest files are not sorted and unique at {:?}",
                    f.name
                ));
            }
            if f.checkpoint_id > self.checkpoint_id {
                return Err(format!(
                    "manifest file {:?} belongs to a later checkpoint {}",
                    f.name, f.checkpoint_id
                ));
            }
            if self.kind == CheckpointKind::Savepoint && f.checkpoint_id != self.checkpoint_id {
                return Err(format!(
                    "savepoint file {:?} refers to another checkpoint {}",
                    f.name, f.checkpoint_id
                ));
            }
            total = total.saturating_add(f.size_bytes);
        }
        if total != self.total_size_bytes {
            return Err(format!(
                "manifest sizes add up to {total} bytes, total says {}",
                self.total_size_bytes
            ));
        }
        Ok(())
    }
}

/// The directory name of checkpoint `id` under the checkpoint root.
pub(crate) fn checkpoint_dir_name(id: u64) -> String {
    format!("chk-{id}")
}

/// The id of a checkpoint directory name, if it is one (`chk-<id>`, no leading zeros).
pub(crate) fn parse_checkpoint_dir_name(name: &str) -> Option<u64> {
    let digits = name.strip_prefix("chk-")?;
    let id: u64 = digits.parse().ok()?;
    (id.to_string() == digits).then_some(id)
}

/// Checks a state file name: relative, `/`-separated segments of `[A-Za-z0-9._=+-]`, none empty,
/// `.` or `..`, the first not starting with `_` (reserved for the manifest). These names are
/// valid and identical on every object store and file system.
pub(crate) fn validate_name(name: &str) -> Result<(), String> {
    const MAX_LEN: usize = 1024;
    if name.is_empty() {
        return Err("empty file name".to_owned());
    }
    if name.len() > MAX_LEN {
        return Err(format!("file name longer than {MAX_LEN} bytes"));
    }
    if name.starts_with('_') {
        return Err(format!(
            "{name:?}: names starting with '_' are reserved for the manifest"
        ));
    }
    for segment in name.split('/') {
        if segment.is_empty() || segment == "." || segment == ".." {
            return Err(format!(
                "{name:?}: empty, '.' or '..' path segment (names are relative, '/'-separated)"
            ));
        }
        if let Some(c) = segment
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '=' | '+' | '-')))
        {
            return Err(format!(
                "{name:?}: character {c:?} not allowed (use A-Z a-z 0-9 . _ = + - and '/')"
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Manifest {
        Manifest {
            checkpoint_id: 7,
            kind: CheckpointKind::Checkpoint,
            max_parallelism: 128,
            workers: 4,
            created_unix_ms: 1_700_000_000_000,
            duration_ms: 12,
            total_size_bytes: 30,
            files: vec![
                FileEntry {
                    name: "worker-0/a.bin".into(),
                    size_bytes: 10,
                    crc32c: 1,
                    checkpoint_id: 5,
                },
                FileEntry {
                    name: "worker-1/b.bin".into(),
                    size_bytes: 20,
                    crc32c: 2,
                    checkpoint_id: 7,
                },
            ],
            metadata: serde_json::json!({"sources": {"nexmark": [1, 2, 3]}, "note": "line\nbreak"}),
        }
    }

    #[test]
    fn round_trip() {
        let m = sample();
        let bytes = m.encode();
        let back = Manifest::decode(&bytes).unwrap();
        assert_eq!(back, m);
        // The whole file is plain JSON.
        let v: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(v["manifest"]["checkpoint_id"], 7);
        assert_eq!(back.file("worker-1/b.bin").unwrap().size_bytes, 20);
        assert!(back.file("worker-9/x.bin").is_none());
    }

    #[test]
    fn every_flipped_byte_is_caught() {
        let bytes = sample().encode();
        for i in 0..bytes.len() {
            let mut damaged = bytes.clone();
            damaged[i] ^= 0x01;
            match Manifest::decode(&damaged) {
                Err(_) => {}
                // Flipping a bit of insignificant whitespace (space <-> '!' is not whitespace,
                // but '\n' <-> '\x0b' is not either) must not change the manifest.
                Ok(m) => assert_eq!(m, sample(), "byte {i} changed the manifest unnoticed"),
            }
        }
    }

    #[test]
    fn truncation_is_caught() {
        let bytes = sample().encode();
        for len in 0..bytes.len() - 2 {
            assert!(Manifest::decode(&bytes[..len]).is_err(), "length {len}");
        }
    }

    #[test]
    fn names() {
        assert!(validate_name("worker-3/op-window-7/kg-0012.bin").is_ok());
        for bad in [
            "",
            "/a",
            "a/",
            "a//b",
            "../a",
            "a/./b",
            "_manifest.json",
            "a b",
            "a#1",
            "é",
        ] {
            assert!(validate_name(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn dir_names() {
        assert_eq!(
            parse_checkpoint_dir_name(&checkpoint_dir_name(42)),
            Some(42)
        );
        assert_eq!(parse_checkpoint_dir_name("chk-007"), None);
        assert_eq!(parse_checkpoint_dir_name("chk-"), None);
        assert_eq!(parse_checkpoint_dir_name("savepoint-1"), None);
    }
}
