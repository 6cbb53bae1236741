//! Where checkpoints live: an object store and a prefix in it.

use std::collections::HashMap;
use std::fmt;
use std::io;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use object_store::local::LocalFileSystem;
use object_store::memory::InMemory;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreScheme};
use spate_types::{SpateError, SpateResult};

use crate::config::CheckpointConfig;
use crate::error::Failure;

/// Stores registered under a URL scheme of their own.
fn registry() -> &'static Mutex<HashMap<String, StorageLocation>> {
    static STORES: OnceLock<Mutex<HashMap<String, StorageLocation>>> = OnceLock::new();
    STORES.get_or_init(Mutex::default)
}

fn registered(scheme: &str) -> Option<StorageLocation> {
    registry()
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .get(scheme)
        .cloned()
}

/// Makes `<scheme>://<prefix>` name `<prefix>` below `location` in every later
/// [`StorageLocation::parse`] of this process: a way to plug a custom [`ObjectStore`] (or a
/// [`FailingStore`](crate::faults::FailingStore) in tests) into a job's checkpoint directory
/// setting. A scheme registered again is replaced.
pub fn register_store(scheme: &str, location: StorageLocation) {
    registry()
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .insert(scheme.to_owned(), location);
}

/// An object store and a prefix in it: the root of a checkpoint directory, or a savepoint.
///
/// Made from a local directory (the default: `/data/ckpt`, `file:///data/ckpt`), `memory://`
/// (tests; each parse makes a new, empty store), `s3://bucket/prefix` (also S3-compatible
/// servers through the `aws_endpoint` option), `gs://bucket/prefix`, or
/// `az://container/prefix` / `abfss://…` (Azure), or from any [`ObjectStore`] with
/// [`StorageLocation::from_store`].
#[derive(Clone)]
pub struct StorageLocation {
    store: Arc<dyn ObjectStore>,
    root: Path,
    display: String,
}

impl StorageLocation {
    /// Parses a location: a directory path, or a `file://`, `memory://`, `s3://`, `gs://`,
    /// `az://` (or other Azure scheme) URL. A local directory is created if missing. Cloud
    /// credentials come from the environment and from `config.storage_options`.
    pub fn parse(location: &str, config: &CheckpointConfig) -> SpateResult<Self> {
        let location = location.trim();
        if location.is_empty() {
            return Err(SpateError::Config(
                "checkpoint location is empty (give a directory or a URL)".to_owned(),
            ));
        }
        if let Some((scheme, rest)) = location.split_once("://") {
            if let Some(base) = registered(scheme) {
                let rest = rest.trim_matches('/');
                return if rest.is_empty() {
                    Ok(base)
                } else {
                    base.child(rest)
                };
            }
        }
        if let Some(rest) = location.strip_prefix("memory:") {
            let prefix = rest.trim_matches('/');
            let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
            return Self::from_store(store, prefix, format!("memory:///{prefix}"));
        }
        if !(location.contains("://") || location.starts_with("file:")) {
            return Self::local(PathBuf::from(location), config.fsync);
        }
        let url = url::Url::parse(location).map_err(|e| {
            SpateError::Config(format!(
                "checkpoint location {location:?} is not a valid URL: {e}"
            ))
        })?;
        if url.scheme() == "file" {
            let dir = url.to_file_path().map_err(|()| {
                SpateError::Config(format!(
                    "checkpoint location {location:?} is not a local path"
                ))
            })?;
            return Self::local(dir, config.fsync);
        }
        Self::cloud(location, &url, &config.storage_options)
    }

    /// A location in an existing store under `prefix` (`""` for the store's root). `display` is
    /// how errors and logs name it, for example `"s3://bucket/ckpt"`.
    pub fn from_store(
        store: Arc<dyn ObjectStore>,
        prefix: &str,
        display: impl Into<String>,
    ) -> SpateResult<Self> {
        let root = Path::parse(prefix.trim_matches('/')).map_err(|e| {
            SpateError::Config(format!("checkpoint prefix {prefix:?} is not valid: {e}"))
        })?;
        Ok(StorageLocation {
            store,
            root,
            display: trim_display(&display.into()),
        })
    }

    /// The location `relative` below this one, in the same store: for example a savepoint
    /// directory beside the checkpoints.
    pub fn child(&self, relative: &str) -> SpateResult<Self> {
        crate::manifest::validate_name(relative).map_err(|e| {
            SpateError::Config(format!("location {relative:?} below {}: {e}", self.display))
        })?;
        Ok(StorageLocation {
            store: Arc::clone(&self.store),
            root: join(&self.root, relative),
            display: format!("{}/{relative}", self.display),
        })
    }

    /// The object store.
    pub fn store(&self) -> &Arc<dyn ObjectStore> {
        &self.store
    }

    /// The prefix of this location within the store.
    pub fn prefix(&self) -> &Path {
        &self.root
    }

    /// The object `relative` below this location.
    pub(crate) fn path(&self, relative: &str) -> Path {
        join(&self.root, relative)
    }

    /// How messages name the object at `path` (a path inside this store).
    pub(crate) fn describe(&self, path: &Path) -> String {
        let full = path.as_ref();
        let Some(rel) = full
            .strip_prefix(self.root.as_ref())
            .map(|r| r.trim_start_matches('/'))
        else {
            // Beside the root: a file that a checkpoint shares with an earlier one.
            return match self.display.strip_suffix(self.root.as_ref()) {
                Some(base) if !self.root.as_ref().is_empty() => format!("{base}{full}"),
                _ => format!("{}/{full}", self.display),
            };
        };
        if rel.is_empty() {
            self.display.clone()
        } else {
            format!("{}/{rel}", self.display)
        }
    }

    fn local(dir: PathBuf, fsync: bool) -> SpateResult<Self> {
        std::fs::create_dir_all(&dir).map_err(|e| {
            SpateError::io(
                &dir,
                io::Error::new(e.kind(), format!("cannot create checkpoint directory: {e}")),
            )
        })?;
        // A checkpoint directory `<root>/chk-<id>` opens at its root, so that the files it
        // shares with earlier checkpoints (incremental) are reachable beside it.
        let (root, prefix) = match (
            dir.file_name().and_then(|n| n.to_str()),
            dir.parent().filter(|p| !p.as_os_str().is_empty()),
        ) {
            (Some(name), Some(parent))
                if crate::manifest::parse_checkpoint_dir_name(name).is_some() =>
            {
                (parent.to_path_buf(), name.to_owned())
            }
            _ => (dir.clone(), String::new()),
        };
        let fs = LocalFileSystem::new_with_prefix(&root)
            .map_err(|e| {
                SpateError::from(Failure::store(
                    "cannot open checkpoint directory",
                    root.display().to_string(),
                    &e,
                ))
            })?
            .with_fsync(fsync)
            // Deleting a checkpoint's files leaves no empty directories behind.
            .with_automatic_cleanup(true);
        let display = dir.display().to_string();
        Self::from_store(Arc::new(fs), &prefix, display)
    }

    #[cfg_attr(
        not(any(feature = "aws", feature = "gcp", feature = "azure")),
        allow(unused_variables, unreachable_code)
    )]
    fn cloud(location: &str, url: &url::Url, options: &[(String, String)]) -> SpateResult<Self> {
        let (scheme, path) = ObjectStoreScheme::parse(url)
            .map_err(|e| SpateError::Config(format!("checkpoint location {location:?}: {e}")))?;
        let prefix = Path::from_url_path(path)
            .map_err(|e| SpateError::Config(format!("checkpoint location {location:?}: {e}")))?;
        let store: Arc<dyn ObjectStore> = match scheme {
            #[cfg(feature = "aws")]
            ObjectStoreScheme::AmazonS3 => {
                let mut b = object_store::aws::AmazonS3Builder::from_env().with_url(url.as_str());
                for (key, value) in parse_options(location, options)? {
                    b = b.with_config(key, value);
                }
                Arc::new(b.build().map_err(|e| build_error(location, e))?)
            }
            #[cfg(feature = "gcp")]
            ObjectStoreScheme::GoogleCloudStorage => {
                let mut b = object_store::gcp::GoogleCloudStorageBuilder::from_env()
                    .with_url(url.as_str());
                for (key, value) in parse_options(location, options)? {
                    b = b.with_config(key, value);
                }
                Arc::new(b.build().map_err(|e| build_error(location, e))?)
            }
            #[cfg(feature = "azure")]
            ObjectStoreScheme::MicrosoftAzure => {
                let mut b =
                    object_store::azure::MicrosoftAzureBuilder::from_env().with_url(url.as_str());
                for (key, value) in parse_options(location, options)? {
                    b = b.with_config(key, value);
                }
                Arc::new(b.build().map_err(|e| build_error(location, e))?)
            }
            other => {
                return Err(SpateError::Config(format!(
                    "checkpoint location {location}: {other:?} storage is not available in this build \
                     (the features aws, gcp and azure of spate-checkpoint enable S3, GCS and Azure)"
                )))
            }
        };
        Ok(StorageLocation {
            store,
            root: prefix,
            display: trim_display(location),
        })
    }
}

/// The storage options as a builder's configuration keys; an unknown key is an error rather than
/// a silently ignored setting.
#[cfg(any(feature = "aws", feature = "gcp", feature = "azure"))]
fn parse_options<K: std::str::FromStr>(
    location: &str,
    options: &[(String, String)],
) -> SpateResult<Vec<(K, String)>> {
    options
        .iter()
        .map(|(k, v)| {
            let key = k.to_ascii_lowercase().parse().map_err(|_| {
                SpateError::Config(format!(
                    "checkpoint storage option {k:?} is not known for {location}"
                ))
            })?;
            Ok((key, v.clone()))
        })
        .collect()
}

#[cfg(any(feature = "aws", feature = "gcp", feature = "azure"))]
fn build_error(location: &str, e: object_store::Error) -> SpateError {
    SpateError::Config(format!(
        "checkpoint location {location}: {}",
        crate::error::one_line(&e.to_string())
    ))
}

impl fmt::Display for StorageLocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.display)
    }
}

impl fmt::Debug for StorageLocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StorageLocation")
            .field("location", &self.display)
            .field("store", &self.store.to_string())
            .finish()
    }
}

/// A location's name without trailing slashes, so that `describe` can append `/name`; a bare
/// scheme keeps its `//` (`memory:///` is shown as `memory://`).
fn trim_display(display: &str) -> String {
    let trimmed = display.trim_end_matches('/');
    if trimmed.ends_with(':') {
        format!("{trimmed}//")
    } else {
        trimmed.to_owned()
    }
}

/// `base/relative`, where `relative` is a validated `/`-separated name.
pub(crate) fn join(base: &Path, relative: &str) -> Path {
    relative
        .split('/')
        .fold(base.clone(), |path, segment| path.join(segment))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_and_child() {
        let loc = StorageLocation::parse("memory://", &CheckpointConfig::default()).unwrap();
        assert_eq!(loc.to_string(), "memory://");
        let sp = loc.child("savepoints/sp-1").unwrap();
        assert_eq!(sp.prefix().as_ref(), "savepoints/sp-1");
        assert_eq!(
            sp.describe(&sp.path("chk-1/worker-0/a.bin")),
            "memory:///savepoints/sp-1/chk-1/worker-0/a.bin"
        );
        assert!(loc.child("../x").is_err());
    }

    #[test]
    fn local_directory_is_created() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("a/b");
        let loc =
            StorageLocation::parse(dir.to_str().unwrap(), &CheckpointConfig::default()).unwrap();
        assert!(dir.is_dir());
        assert_eq!(
            loc.describe(&loc.path("chk-3/x.bin")),
            format!("{}/chk-3/x.bin", dir.display())
        );
        let url = format!("file://{}", dir.display());
        StorageLocation::parse(&url, &CheckpointConfig::default()).unwrap();
    }

    #[test]
    fn bad_locations_are_config_errors() {
        let cfg = CheckpointConfig::default();
        assert!(StorageLocation::parse("", &cfg).is_err());
        let err = StorageLocation::parse("ftp://host/x", &cfg).unwrap_err();
        assert!(matches!(err, SpateError::Config(_)), "{err}");
    }

    #[cfg(feature = "aws")]
    #[test]
    fn s3_location_with_options() {
        let cfg = CheckpointConfig {
            storage_options: vec![
                ("aws_endpoint".into(), "http://127.0.0.1:9".into()),
                ("aws_allow_http".into(), "true".into()),
                ("aws_access_key_id".into(), "k".into()),
                ("aws_secret_access_key".into(), "s".into()),
                ("aws_region".into(), "us-east-1".into()),
            ],
            ..CheckpointConfig::default()
        };
        let loc = StorageLocation::parse("s3://bucket/ckpt/job-1", &cfg).unwrap();
        assert_eq!(loc.prefix().as_ref(), "ckpt/job-1");
        let bad = CheckpointConfig {
            storage_options: vec![("no_such_option".into(), "x".into())],
            ..CheckpointConfig::default()
        };
        let err = StorageLocation::parse("s3://bucket/ckpt", &bad).unwrap_err();
        assert!(err.to_string().contains("no_such_option"), "{err}");
    }
}
