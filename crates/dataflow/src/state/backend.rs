//! State backends: where a keyed operator instance keeps the state of its keys.
//!
//! * **Memory** (the default): a hash table on the heap, as fast as it gets; a checkpoint
//!   serializes every key ("full snapshot").
//!
//! Both are reached through one call per record or timer, [`KeyedStates::with_state`]: it
//! hashes the key once, hands the function the state (`&mut Option<S>`, `None` for a key
//! without state) without taking its entry out of the table, stores the key only when a state
//! first appears (moving the caller's key in, no clone) and removes it only when the function
//! leaves `None`. The disk backend
//! marks a key dirty inside that call whenever it had or has a state, so an in-place change
//! cannot escape the next flush or incremental checkpoint.
//! * **Disk**: an embedded redb B-tree per worker and operator under a
//!   local directory, behind a bounded write-back cache of hot keys, for keyed state larger
//!   than memory. Checkpoints are **incremental**.
//!
//! # Disk layout
//!
//! A key is stored as `key group (u16, big-endian) ++ bincode(key)` and its state as
//! `bincode(state)`, so that the keys of a key-group range are one contiguous scan. A second
//! table records which keys changed since the latest *completed* checkpoint (with the
//! checkpoint whose cut first covers the change). Writes to redb are batched: the cache holds
//! up to `cache_keys` keys (second-chance eviction); a dirty key reaches the B-tree when it is
//! evicted or at a checkpoint. Commits are not synced (the directory is scratch space,
//! rebuilt from checkpoints after a failure); one commit in [`SYNC_EVERY`] is, so that redb
//! can reuse freed pages. Timers stay in memory.
//!
//! # Incremental checkpoints
//!
//! At checkpoint `c` the instance flushes its cache and writes one file of key-value records,
//! each with the key group first:
//!
//! * a **base**, every key, when there is no completed checkpoint to build on, or when the
//!   chain of the latest completed checkpoint `L` already has `full_every` deltas; or
//! * a **delta**: the keys changed (or deleted) since `L`, whose files (`base, delta, ...`)
//!   checkpoint `c` refers to instead of uploading them again.
//!
//! The instance's part of the checkpoint names the chain, in order, and carries the timers.
//! A restore (on any number of workers) reads every chain in order, later records overriding
//! earlier ones, and keeps the key groups it owns. A referenced file that is missing or
//! corrupt makes the checkpoint unusable (storage skips it) or the restore fail with the file
//! named.
//!
//! A delta builds only on checkpoints known to be complete everywhere, so a failed or
//! subsumed checkpoint (whose files storage deletes) is never referenced. Retention keeps every
//! file a retained checkpoint refers to.

use std::collections::{BTreeMap, HashMap};
use std::hash::{BuildHasher, Hash};
use std::marker::PhantomData;
use std::path::{Path, PathBuf};

use hashbrown::hash_table::{Entry, HashTable};
use redb::{
    Database, Durability, ReadableDatabase, ReadableTable, ReadableTableMetadata, TableDefinition,
};
use rustc_hash::FxBuildHasher;
use serde::de::DeserializeOwned;
use serde::Serialize;
use spate_types::keygroup::key_group;
use spate_types::{SpateError, SpateResult};

/// Key (key group ++ bincode(key)) → bincode(state).
const STATES: TableDefinition<&[u8], &[u8]> = TableDefinition::new("states");
/// Key → the local checkpoint whose cut first covers its latest change.
const CHANGES: TableDefinition<&[u8], u64> = TableDefinition::new("changes");

/// One commit in this many is synced, which lets redb reuse the pages freed since.
pub(crate) const SYNC_EVERY: u64 = 16;

/// The first bytes of a base or delta file.
const KV_MAGIC: &[u8; 8] = b"SPATEKV1";
/// The first bytes of an instance's part that names a chain of key-value files.
const CHAIN_MAGIC: &[u8; 8] = b"SPATECH1";

/// How a disk-backed instance is set up.
#[derive(Debug, Clone)]
pub(crate) struct DiskSetup {
    /// The redb file.
    pub(crate) path: PathBuf,
    /// Keys held in memory.
    pub(crate) cache_keys: usize,
    /// Deltas between full bases.
    pub(crate) full_every: u32,
    /// Checkpoints are taken (changes are tracked only then).
    pub(crate) checkpoints: bool,
    /// For key groups.
    pub(crate) max_parallelism: u32,
    /// For file names.
    pub(crate) operator: String,
    pub(crate) worker: usize,
}

/// The state of an operator instance's keys.
pub(crate) enum KeyedStates<K, S> {
    Memory(MemoryStates<K, S>),
    Disk(Box<DiskStates<K, S>>),
}

/// The hash of a key, for the tables of keyed state and timers (the same hasher everywhere,
/// and no per-process seed, so iteration orders are reproducible).
#[inline]
pub(crate) fn hash_key<K: Hash>(key: &K) -> u64 {
    FxBuildHasher.hash_one(key)
}

/// The memory backend: hash tables of keys and their states, [`PARTS`] of them, each key in
/// the one that bits of its hash pick (as Flink's heap backend keeps a table per key group).
/// A table that grows rehashes its own keys only, so the growth of a large state never holds
/// two copies of all of it at once, nor stalls the operator while it moves every key; and the
/// pass at the end of the input frees each table as it finishes with it.
///
/// An access hashes and probes once. A key's entry stays in its bucket while the function
/// runs: the entry is moved out to the function's `&mut Option<S>` and written back into the
/// same bucket (or the bucket is freed, when the function leaves `None`), with no rehash and
/// no probe (`replace_entry_with`). Keeping an `Option<S>` in every bucket instead would let
/// the function write the bucket itself, but would cost 8 bytes per key for states without a
/// spare niche (numbers, tuples of numbers: most rolling aggregates).
///
/// A key and state larger than [`BOXED_ABOVE`] bytes are boxed, and the buckets hold the
/// boxes ([`MemoryStates::Boxed`]). A table's buckets are between 7/16 and 7/8 full (it
/// doubles when they are full), and the empty ones cost as much as the full ones: a large
/// entry inline would cost up to twice its size per key, a box costs its size and an 8-byte
/// bucket. The price is a pointer to follow per access, and an allocation per new key.
pub(crate) enum MemoryStates<K, S> {
    Inline(Tables<(K, S)>),
    Boxed(Tables<Box<(K, Option<S>)>>),
}

/// Entries of this size or less sit in the buckets themselves; larger ones are boxed.
const BOXED_ABOVE: usize = 48;

/// The memory backend's number of tables.
const PARTS: usize = 64;

/// The table of a key's hash: bits that a table's probing does not use (it takes the low
/// bits for the bucket and the top seven for the tag it compares).
#[inline]
fn part(hash: u64) -> usize {
    (hash >> 40) as usize % PARTS
}

impl<K, S> Default for MemoryStates<K, S> {
    fn default() -> Self {
        if std::mem::size_of::<(K, S)>() > BOXED_ABOVE {
            MemoryStates::Boxed(Tables::default())
        } else {
            MemoryStates::Inline(Tables::default())
        }
    }
}

impl<K: Hash + Eq, S> MemoryStates<K, S> {
    /// Runs `f` on the state of `key`; see [`KeyedStates::with_state`].
    #[inline]
    pub(crate) fn with_state<R>(&mut self, key: K, f: impl FnOnce(&K, &mut Option<S>) -> R) -> R {
        match self {
            MemoryStates::Inline(t) => t.with_state(key, f),
            MemoryStates::Boxed(t) => t.with_state(key, f),
        }
    }

    /// Sets the state of `key` (a restore).
    pub(crate) fn insert(&mut self, key: K, state: S) {
        self.with_state(key, |_, s| *s = Some(state))
    }

    /// Deletes the state of `key` (a restored deletion).
    pub(crate) fn remove(&mut self, key: &K) {
        match self {
            MemoryStates::Inline(t) => t.remove(key),
            MemoryStates::Boxed(t) => t.remove(key),
        }
    }

    /// Every key and its state, in no particular order.
    pub(crate) fn iter(&self) -> Box<dyn Iterator<Item = (&K, &S)> + '_> {
        match self {
            MemoryStates::Inline(t) => Box::new(t.iter()),
            MemoryStates::Boxed(t) => Box::new(t.iter()),
        }
    }

    /// The number of keys with state.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        match self {
            MemoryStates::Inline(t) => t.parts.iter().map(HashTable::len).sum(),
            MemoryStates::Boxed(t) => t.parts.iter().map(HashTable::len).sum(),
        }
    }
}

/// What a bucket holds: a key and its state, inline or boxed.
pub(crate) trait Bucket<K, S>: Sized {
    fn new(key: K, state: S) -> Self;
    fn key(&self) -> &K;
    /// The key and its state (always set in a table).
    fn get(&self) -> Option<(&K, &S)>;
    /// Runs `f` on the state; gives back the slot unless `f` left no state.
    fn update<R>(self, f: impl FnOnce(&K, &mut Option<S>) -> R) -> (R, Option<Self>);
    fn into_pair(self) -> Option<(K, S)>;
}

impl<K, S> Bucket<K, S> for (K, S) {
    #[inline]
    fn new(key: K, state: S) -> Self {
        (key, state)
    }

    #[inline]
    fn key(&self) -> &K {
        &self.0
    }

    fn get(&self) -> Option<(&K, &S)> {
        Some((&self.0, &self.1))
    }

    #[inline]
    fn update<R>(self, f: impl FnOnce(&K, &mut Option<S>) -> R) -> (R, Option<Self>) {
        let (k, s) = self;
        let mut state = Some(s);
        let r = f(&k, &mut state);
        (r, state.map(|s| (k, s)))
    }

    fn into_pair(self) -> Option<(K, S)> {
        Some(self)
    }
}

impl<K, S> Bucket<K, S> for Box<(K, Option<S>)> {
    #[inline]
    fn new(key: K, state: S) -> Self {
        Box::new((key, Some(state)))
    }

    #[inline]
    fn key(&self) -> &K {
        &self.0
    }

    fn get(&self) -> Option<(&K, &S)> {
        self.1.as_ref().map(|s| (&self.0, s))
    }

    /// In place: the box is kept, not reallocated.
    #[inline]
    fn update<R>(mut self, f: impl FnOnce(&K, &mut Option<S>) -> R) -> (R, Option<Self>) {
        let (k, s) = &mut *self;
        let r = f(k, s);
        let keep = s.is_some();
        (r, keep.then_some(self))
    }

    fn into_pair(self) -> Option<(K, S)> {
        let (k, s) = *self;
        s.map(|s| (k, s))
    }
}

/// The [`PARTS`] tables of a memory backend.
pub(crate) struct Tables<E> {
    parts: Box<[HashTable<E>]>,
}

impl<E> Default for Tables<E> {
    fn default() -> Self {
        Tables {
            parts: (0..PARTS).map(|_| HashTable::new()).collect(),
        }
    }
}

impl<E> Tables<E> {
    #[inline]
    fn with_state<K: Hash + Eq, S, R>(
        &mut self,
        key: K,
        f: impl FnOnce(&K, &mut Option<S>) -> R,
    ) -> R
    where
        E: Bucket<K, S>,
    {
        let hash = hash_key(&key);
        match self.parts[part(hash)].entry(hash, |e| *e.key() == key, |e| hash_key(e.key())) {
            Entry::Occupied(entry) => {
                let mut result = None;
                entry.replace_entry_with(|e| {
                    let (r, kept) = e.update(f);
                    result = Some(r);
                    kept
                });
                result.expect("the function ran")
            }
            Entry::Vacant(entry) => {
                let mut state = None;
                let r = f(&key, &mut state);
                if let Some(s) = state {
                    entry.insert(E::new(key, s));
                }
                r
            }
        }
    }

    fn remove<K: Hash + Eq, S>(&mut self, key: &K)
    where
        E: Bucket<K, S>,
    {
        let hash = hash_key(key);
        if let Ok(entry) = self.parts[part(hash)].find_entry(hash, |e| e.key() == key) {
            entry.remove();
        }
    }

    fn iter<'a, K: 'a, S: 'a>(&'a self) -> impl Iterator<Item = (&'a K, &'a S)>
    where
        E: Bucket<K, S>,
    {
        self.parts.iter().flatten().filter_map(Bucket::get)
    }
}

/// The memory backend's keys and states, handed over table by table (see
/// [`KeyedStates::start_drain`]); a table is freed once its last key is.
pub(crate) enum MemoryDrain<K, S> {
    Inline(TablesDrain<(K, S)>),
    Boxed(TablesDrain<Box<(K, Option<S>)>>),
}

impl<K, S> MemoryDrain<K, S> {
    fn new(states: MemoryStates<K, S>) -> Self {
        match states {
            MemoryStates::Inline(t) => MemoryDrain::Inline(TablesDrain::new(t)),
            MemoryStates::Boxed(t) => MemoryDrain::Boxed(TablesDrain::new(t)),
        }
    }

    /// Whether keys are left.
    fn any_left(&self) -> bool {
        match self {
            MemoryDrain::Inline(d) => d.any_left(),
            MemoryDrain::Boxed(d) => d.any_left(),
        }
    }
}

impl<K, S> Iterator for MemoryDrain<K, S> {
    type Item = (K, S);

    fn next(&mut self) -> Option<(K, S)> {
        match self {
            MemoryDrain::Inline(d) => d.next_pair(),
            MemoryDrain::Boxed(d) => d.next_pair(),
        }
    }
}

/// The entries of [`Tables`], table by table.
pub(crate) struct TablesDrain<E> {
    tables: std::vec::IntoIter<HashTable<E>>,
    current: hashbrown::hash_table::IntoIter<E>,
}

impl<E> TablesDrain<E> {
    fn new(tables: Tables<E>) -> Self {
        TablesDrain {
            tables: tables.parts.into_vec().into_iter(),
            current: HashTable::new().into_iter(),
        }
    }

    fn any_left(&self) -> bool {
        self.current.len() > 0 || self.tables.as_slice().iter().any(|t| !t.is_empty())
    }

    fn next_pair<K, S>(&mut self) -> Option<(K, S)>
    where
        E: Bucket<K, S>,
    {
        loop {
            if let Some(pair) = self.current.next().and_then(Bucket::into_pair) {
                return Some(pair);
            }
            if self.current.len() == 0 {
                self.current = self.tables.next()?.into_iter();
            }
        }
    }
}

/// The files of an instance's incremental snapshot beside its part.
#[derive(Debug, Default)]
pub(crate) struct PartFiles {
    /// Files written by this checkpoint: `(name, bytes)`.
    pub(crate) new: Vec<(String, Vec<u8>)>,
    /// Files of earlier checkpoints of this run that this one refers to.
    pub(crate) shared: Vec<ChainFile>,
}

/// A key-value file of a chain, as a later checkpoint refers to it.
#[derive(Debug, Clone)]
pub(crate) struct ChainFile {
    /// The local checkpoint that wrote it.
    pub(crate) c: u64,
    /// Its name within that checkpoint.
    pub(crate) name: String,
    /// Its length.
    pub(crate) size: u64,
    /// Its CRC-32C.
    pub(crate) crc32c: u32,
}

impl ChainFile {
    fn new(c: u64, name: String, bytes: &[u8]) -> Self {
        ChainFile {
            c,
            name,
            size: bytes.len() as u64,
            crc32c: crc32c::crc32c(bytes),
        }
    }
}

/// An instance's checkpoint part when its state is a chain of key-value files.
#[derive(serde::Serialize, serde::Deserialize)]
pub(crate) struct ChainPart<T> {
    /// The files, base first, by name within the checkpoint.
    pub(crate) chain: Vec<String>,
    /// The timers (kept in memory, snapshotted in full).
    pub(crate) timers: T,
}

impl<K, S> KeyedStates<K, S>
where
    K: Hash + Eq + Clone + Serialize + DeserializeOwned,
    S: Serialize + DeserializeOwned,
{
    /// Runs `f` with `key` and its state in place: `None` if the key has none; `f` may set,
    /// change or clear it (`None` deletes the key's state). The key is hashed once; it is
    /// stored (moved in) only when a state first appears.
    ///
    /// The only error is the disk backend's failing to read or write its B-tree; `f` has not
    /// run then.
    #[inline]
    pub(crate) fn with_state<R>(
        &mut self,
        key: K,
        f: impl FnOnce(&K, &mut Option<S>) -> R,
    ) -> SpateResult<R> {
        match self {
            KeyedStates::Memory(map) => Ok(map.with_state(key, f)),
            KeyedStates::Disk(disk) => disk.with_state(key, f),
        }
    }

    /// Starts a pass over every key with state that hands each state over
    /// ([`drain_some`](Self::drain_some)). The memory backend takes its tables whole, so keys
    /// that get state during the pass are not in it; the disk backend reads its keys first.
    pub(crate) fn start_drain(&mut self) -> SpateResult<Drain<K, S>> {
        Ok(match self {
            KeyedStates::Memory(map) => Drain::Memory(MemoryDrain::new(std::mem::take(map))),
            KeyedStates::Disk(disk) => Drain::Disk(disk.keys()?.into_iter()),
        })
    }

    /// Runs `f` on up to `n` more keys of `drain`, handing each state over: what `f` leaves
    /// in it is kept (as by [`with_state`](Self::with_state)). The memory backend frees
    /// each key's entry as it goes. Returns whether keys remain.
    pub(crate) fn drain_some(
        &mut self,
        drain: &mut Drain<K, S>,
        n: usize,
        mut f: impl FnMut(&K, &mut Option<S>),
    ) -> SpateResult<bool> {
        match (self, drain) {
            (KeyedStates::Memory(map), Drain::Memory(entries)) => {
                for (key, state) in entries.by_ref().take(n) {
                    let mut state = Some(state);
                    f(&key, &mut state);
                    if let Some(state) = state {
                        map.insert(key, state);
                    }
                }
                Ok(entries.any_left())
            }
            (KeyedStates::Disk(disk), Drain::Disk(keys)) => {
                for key in keys.by_ref().take(n) {
                    disk.with_state(key, &mut f)?;
                }
                Ok(keys.len() > 0)
            }
            _ => Err(SpateError::Internal(
                "a pass over the keys of one state backend met another".into(),
            )),
        }
    }
}

/// A pass over every key with state, under way (see [`KeyedStates::start_drain`]).
pub(crate) enum Drain<K, S> {
    Memory(MemoryDrain<K, S>),
    Disk(std::vec::IntoIter<K>),
}

/// The disk backend of one operator instance.
pub(crate) struct DiskStates<K, S> {
    db: Database,
    setup: DiskSetup,
    cache: HashMap<K, Slot<S>, FxBuildHasher>,
    commits: u64,
    /// The local checkpoint the next cut is (changes flushed now are first covered by it).
    next_cut: u64,
    /// The chain each checkpoint taken was written with, base first.
    chains: BTreeMap<u64, Vec<ChainFile>>,
    scratch: Vec<u8>,
    /// The key group of a key (the stable hash, or the key itself for operators keyed by
    /// key group).
    group: fn(&K, u32) -> u32,
    _state: PhantomData<fn() -> S>,
}

/// A cached key.
struct Slot<S> {
    /// `None` when the key has no state (a cached absence).
    state: Option<S>,
    /// Differs from the B-tree.
    dirty: bool,
    /// Used since the eviction pass last saw it.
    hot: bool,
}

fn db_err(what: &str, path: &Path, e: impl std::fmt::Display) -> SpateError {
    SpateError::Internal(format!(
        "state backend {}: cannot {what}: {e}",
        path.display()
    ))
}

/// The stored form of a key: its key group (big-endian, so groups sort in order), then bincode.
pub(crate) fn encode_key<K: Hash + Serialize>(
    key: &K,
    group: fn(&K, u32) -> u32,
    max_parallelism: u32,
    out: &mut Vec<u8>,
) -> SpateResult<()> {
    out.clear();
    out.extend_from_slice(&(group(key, max_parallelism) as u16).to_be_bytes());
    bincode::serialize_into(&mut *out, key)
        .map_err(|e| SpateError::Internal(format!("cannot serialize a key: {e}")))
}

/// The key group of a stored key.
pub(crate) fn stored_key_group(key: &[u8]) -> u32 {
    u32::from(u16::from_be_bytes([key[0], key[1]]))
}

impl<K, S> DiskStates<K, S>
where
    K: Hash + Eq + Clone + Serialize + DeserializeOwned,
    S: Serialize + DeserializeOwned,
{
    /// Stores keys under `group` instead of their stable hash's key group.
    pub(crate) fn with_group(mut self, group: fn(&K, u32) -> u32) -> Self {
        self.group = group;
        self
    }

    /// Creates the instance's database (a new, empty file).
    pub(crate) fn open(setup: DiskSetup) -> SpateResult<Self> {
        if let Some(parent) = setup.path.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|e| db_err("create its directory", parent, e))?;
        }
        // A file left by an earlier run is stale: state comes from checkpoints.
        match std::fs::remove_file(&setup.path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(db_err("remove a stale file", &setup.path, e)),
        }
        let db = Database::builder()
            .set_cache_size(16 << 20)
            .create(&setup.path)
            .map_err(|e| db_err("create the database", &setup.path, e))?;
        let mut me = DiskStates {
            db,
            cache: HashMap::with_capacity_and_hasher(setup.cache_keys.min(1 << 20), FxBuildHasher),
            setup,
            commits: 0,
            next_cut: 1,
            chains: BTreeMap::new(),
            group: key_group::<K>,
            scratch: Vec::new(),
            _state: PhantomData,
        };
        me.write(|tx, _| {
            tx.open_table(STATES)?;
            tx.open_table(CHANGES)?;
            Ok(())
        })?;
        Ok(me)
    }

    fn path(&self) -> &Path {
        &self.setup.path
    }

    /// Runs `f` in a write transaction and commits it (synced one time in [`SYNC_EVERY`]).
    fn write<R>(
        &mut self,
        f: impl FnOnce(&redb::WriteTransaction, &mut Vec<u8>) -> Result<R, redb::Error>,
    ) -> SpateResult<R> {
        self.commits += 1;
        let durability = if self.commits % SYNC_EVERY == 0 {
            Durability::Immediate
        } else {
            Durability::None
        };
        let path = self.setup.path.clone();
        let mut tx = self
            .db
            .begin_write()
            .map_err(|e| db_err("begin a write", &path, e))?;
        tx.set_durability(durability)
            .map_err(|e| db_err("set durability", &path, e))?;
        let r = f(&tx, &mut self.scratch).map_err(|e| db_err("write", &path, e))?;
        tx.commit().map_err(|e| db_err("commit", &path, e))?;
        Ok(r)
    }

    /// Runs `f` on the cached state of `key` in place, loading it on a miss (the only time
    /// the key is stored). The key becomes dirty whenever it had or has a state: `f` may have
    /// changed it in place, and that change must reach the B-tree (and the next delta). A key
    /// that had none and still has none stays as it was.
    fn with_state<R>(&mut self, key: K, f: impl FnOnce(&K, &mut Option<S>) -> R) -> SpateResult<R> {
        if let Some(slot) = self.cache.get_mut(&key) {
            slot.hot = true;
            let had = slot.state.is_some();
            let r = f(&key, &mut slot.state);
            slot.dirty |= had || slot.state.is_some();
            return Ok(r);
        }
        let mut state = self.load(&key)?;
        let had = state.is_some();
        let r = f(&key, &mut state);
        let dirty = had || state.is_some();
        self.cache.insert(
            key,
            Slot {
                state,
                dirty,
                hot: true,
            },
        );
        self.evict_if_full()?;
        Ok(r)
    }

    fn evict_if_full(&mut self) -> SpateResult<()> {
        if self.cache.len() > self.setup.cache_keys.max(1) {
            self.evict()?;
        }
        Ok(())
    }

    /// Reads a key from the B-tree.
    fn load(&mut self, key: &K) -> SpateResult<Option<S>> {
        encode_key(
            key,
            self.group,
            self.setup.max_parallelism,
            &mut self.scratch,
        )?;
        let path = &self.setup.path;
        let tx = self
            .db
            .begin_read()
            .map_err(|e| db_err("begin a read", path, e))?;
        let table = tx
            .open_table(STATES)
            .map_err(|e| db_err("open its table", path, e))?;
        let got = table
            .get(self.scratch.as_slice())
            .map_err(|e| db_err("read", path, e))?;
        match got {
            None => Ok(None),
            Some(v) => bincode::deserialize(v.value())
                .map(Some)
                .map_err(|e| db_err("decode a state", path, e)),
        }
    }

    /// Shrinks the cache to three quarters of its capacity: keys not used since the last pass
    /// go first (second chance); dirty ones are written in one transaction.
    fn evict(&mut self) -> SpateResult<()> {
        let target = self.setup.cache_keys.max(1) * 3 / 4;
        let mut excess = self.cache.len().saturating_sub(target);
        let mut out: Vec<(K, Option<S>)> = Vec::new();
        for pass in 0..2 {
            if excess == 0 {
                break;
            }
            self.cache.retain(|k, slot| {
                if excess == 0 {
                    return true;
                }
                if slot.hot && pass == 0 {
                    slot.hot = false;
                    return true;
                }
                excess -= 1;
                if slot.dirty {
                    out.push((k.clone(), slot.state.take()));
                }
                false
            });
        }
        self.flush(out.iter().map(|(k, s)| (k, s.as_ref())))
    }

    /// Writes states to the B-tree (and records them as changed).
    fn flush<'a>(
        &mut self,
        entries: impl Iterator<Item = (&'a K, Option<&'a S>)>,
    ) -> SpateResult<()>
    where
        K: 'a,
        S: 'a,
    {
        let maxp = self.setup.max_parallelism;
        let group = self.group;
        let track = self.setup.checkpoints;
        let cut = self.next_cut;
        let mut value = Vec::new();
        let mut failed: Option<SpateError> = None;
        self.write(|tx, key| {
            let mut states = tx.open_table(STATES)?;
            let mut changes = tx.open_table(CHANGES)?;
            for (k, s) in entries {
                if let Err(e) = encode_key(k, group, maxp, key) {
                    failed = Some(e);
                    break;
                }
                match s {
                    Some(s) => {
                        value.clear();
                        if let Err(e) = bincode::serialize_into(&mut value, s) {
                            failed = Some(SpateError::Internal(format!(
                                "cannot serialize a state: {e}"
                            )));
                            break;
                        }
                        states.insert(key.as_slice(), value.as_slice())?;
                    }
                    None => {
                        states.remove(key.as_slice())?;
                    }
                }
                if track {
                    changes.insert(key.as_slice(), cut)?;
                }
            }
            Ok(())
        })?;
        match failed {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Writes every dirty cached key to the B-tree; they stay cached, clean.
    fn flush_all(&mut self) -> SpateResult<()> {
        let mut cache = std::mem::take(&mut self.cache);
        let result = self.flush(
            cache
                .iter()
                .filter(|(_, slot)| slot.dirty)
                .map(|(k, slot)| (k, slot.state.as_ref())),
        );
        for slot in cache.values_mut() {
            slot.dirty = false;
        }
        self.cache = cache;
        result
    }

    /// Checkpoint `c`: flushes, then writes a base or a delta over the chain of `completed`
    /// (the latest checkpoint complete everywhere). Returns the chain (file names in order)
    /// and the files to upload or refer to.
    pub(crate) fn checkpoint(
        &mut self,
        c: u64,
        completed: u64,
    ) -> SpateResult<(Vec<String>, PartFiles)> {
        self.flush_all()?;
        self.next_cut = c + 1;
        // The newest completed checkpoint this instance wrote a chain for.
        let base_on = self
            .chains
            .range(..=completed)
            .next_back()
            .map(|(l, chain)| (*l, chain.clone()));
        if let Some((l, _)) = &base_on {
            let l = *l;
            // Older chains are never built on again; changes up to `l` are in its chain.
            self.chains = self.chains.split_off(&l);
            self.write(|tx, _| {
                let mut changes = tx.open_table(CHANGES)?;
                changes.retain(|_, cut| cut > l)?;
                Ok(())
            })?;
        }
        let prefix = format!(
            "op/{}/w{}-c{c}",
            crate::checkpoint::snapshot::sanitize(&self.setup.operator),
            self.setup.worker
        );
        let mut files = PartFiles::default();
        let chain: Vec<ChainFile> = match base_on {
            Some((_, chain)) if chain.len() <= self.setup.full_every as usize => {
                let name = format!("{prefix}.delta");
                let bytes = self.delta()?;
                let file = ChainFile::new(c, name.clone(), &bytes);
                files.new.push((name, bytes));
                files.shared = chain.clone();
                let mut chain = chain;
                chain.push(file);
                chain
            }
            _ => {
                let name = format!("{prefix}.base");
                let bytes = self.base()?;
                let file = ChainFile::new(c, name.clone(), &bytes);
                files.new.push((name, bytes));
                vec![file]
            }
        };
        let names = chain.iter().map(|f| f.name.clone()).collect();
        self.chains.insert(c, chain);
        Ok((names, files))
    }

    /// Every key and state, in key order.
    fn base(&self) -> SpateResult<Vec<u8>> {
        let path = self.path();
        let tx = self
            .db
            .begin_read()
            .map_err(|e| db_err("begin a read", path, e))?;
        let table = tx
            .open_table(STATES)
            .map_err(|e| db_err("open its table", path, e))?;
        let mut out = Vec::with_capacity(64 + table.len().unwrap_or(0) as usize * 32);
        out.extend_from_slice(KV_MAGIC);
        for entry in table
            .range::<&[u8]>(..)
            .map_err(|e| db_err("scan", path, e))?
        {
            let (k, v) = entry.map_err(|e| db_err("scan", path, e))?;
            push_record(&mut out, k.value(), Some(v.value()));
        }
        Ok(out)
    }

    /// The keys changed since the last completed checkpoint, with their states or deletions.
    fn delta(&self) -> SpateResult<Vec<u8>> {
        let path = self.path();
        let tx = self
            .db
            .begin_read()
            .map_err(|e| db_err("begin a read", path, e))?;
        let states = tx
            .open_table(STATES)
            .map_err(|e| db_err("open its table", path, e))?;
        let changes = tx
            .open_table(CHANGES)
            .map_err(|e| db_err("open its table", path, e))?;
        let mut out = Vec::new();
        out.extend_from_slice(KV_MAGIC);
        for entry in changes
            .range::<&[u8]>(..)
            .map_err(|e| db_err("scan", path, e))?
        {
            let (k, _) = entry.map_err(|e| db_err("scan", path, e))?;
            let v = states.get(k.value()).map_err(|e| db_err("read", path, e))?;
            push_record(&mut out, k.value(), v.as_ref().map(|v| v.value()));
        }
        Ok(out)
    }

    /// Applies restored records (key group already filtered) to the B-tree; the cache is empty
    /// during restore.
    pub(crate) fn apply_restored<'a>(
        &mut self,
        records: impl Iterator<Item = (&'a [u8], Option<&'a [u8]>)>,
    ) -> SpateResult<()> {
        self.write(|tx, _| {
            let mut states = tx.open_table(STATES)?;
            for (k, v) in records {
                match v {
                    Some(v) => {
                        states.insert(k, v)?;
                    }
                    None => {
                        states.remove(k)?;
                    }
                }
            }
            Ok(())
        })
    }

    /// Stores a restored key's state (from a full, in-memory snapshot).
    pub(crate) fn restore_state(&mut self, key: K, state: S) -> SpateResult<()> {
        let slot = Slot {
            state: Some(state),
            dirty: true,
            hot: true,
        };
        self.cache.insert(key, slot);
        self.evict_if_full()
    }

    /// Every key with state (flushes first), in the order of the B-tree.
    pub(crate) fn keys(&mut self) -> SpateResult<Vec<K>> {
        self.read(|table, path| {
            let mut keys = Vec::new();
            for entry in table.iter().map_err(|e| db_err("read", path, e))? {
                let (k, _) = entry.map_err(|e| db_err("read", path, e))?;
                let key = bincode::deserialize(&k.value()[2..])
                    .map_err(|e| db_err("decode a key", path, e))?;
                keys.push(key);
            }
            Ok(keys)
        })
    }

    /// Runs `f` on the B-tree's table of states, once every cached change is in it.
    fn read<R>(
        &mut self,
        f: impl FnOnce(&redb::ReadOnlyTable<&'static [u8], &'static [u8]>, &Path) -> SpateResult<R>,
    ) -> SpateResult<R> {
        self.flush_all()?;
        let path = self.path();
        let tx = self
            .db
            .begin_read()
            .map_err(|e| db_err("begin a read", path, e))?;
        let table = tx
            .open_table(STATES)
            .map_err(|e| db_err("open its table", path, e))?;
        f(&table, path)
    }

    /// The number of keys with state (flushes first). For tests and metrics.
    #[cfg(test)]
    pub(crate) fn len(&mut self) -> SpateResult<u64> {
        self.read(|table, path| table.len().map_err(|e| db_err("count", path, e)))
    }
}

/// A stored key and its state, or `None` for a deletion.
pub(crate) type Record<'a> = (&'a [u8], Option<&'a [u8]>);

/// Reads a file of the restored checkpoint by name.
pub(crate) type FileReader = Box<dyn Fn(&str) -> SpateResult<bytes::Bytes>>;

/// Appends one record: `u32 key length, key, 1 + u32 value length + value | 0`.
fn push_record(out: &mut Vec<u8>, key: &[u8], value: Option<&[u8]>) {
    out.extend_from_slice(&(key.len() as u32).to_le_bytes());
    out.extend_from_slice(key);
    match value {
        Some(v) => {
            out.push(1);
            out.extend_from_slice(&(v.len() as u32).to_le_bytes());
            out.extend_from_slice(v);
        }
        None => out.push(0),
    }
}

/// The records of a base or delta file; `file` names it in errors.
pub(crate) fn read_records<'a>(bytes: &'a [u8], file: &str) -> SpateResult<Vec<Record<'a>>> {
    let corrupt =
        |why: &str| SpateError::Job(format!("checkpoint state file {file} is corrupt: {why}"));
    let rest = bytes
        .strip_prefix(KV_MAGIC.as_slice())
        .ok_or_else(|| corrupt("not a key-value file"))?;
    let mut out = Vec::new();
    let mut at = 0usize;
    let take = |at: &mut usize, n: usize| -> SpateResult<&'a [u8]> {
        let end = at.checked_add(n).filter(|&e| e <= rest.len());
        match end {
            Some(end) => {
                let s = &rest[*at..end];
                *at = end;
                Ok(s)
            }
            None => Err(corrupt("truncated")),
        }
    };
    while at < rest.len() {
        let klen = u32::from_le_bytes(take(&mut at, 4)?.try_into().expect("4 bytes")) as usize;
        let key = take(&mut at, klen)?;
        if key.len() < 2 {
            return Err(corrupt("a key without its key group"));
        }
        let value = match take(&mut at, 1)?[0] {
            0 => None,
            1 => {
                let vlen =
                    u32::from_le_bytes(take(&mut at, 4)?.try_into().expect("4 bytes")) as usize;
                Some(take(&mut at, vlen)?)
            }
            _ => return Err(corrupt("bad record tag")),
        };
        out.push((key, value));
    }
    Ok(out)
}

/// The chain named by an instance's part, if the part is one (else it is a full snapshot).
pub(crate) fn decode_chain_part<T: DeserializeOwned>(
    part: &[u8],
) -> Option<Result<ChainPart<T>, bincode::Error>> {
    part.strip_prefix(CHAIN_MAGIC.as_slice())
        .map(bincode::deserialize)
}

/// An instance's part that names a chain.
pub(crate) fn encode_chain_part<T: Serialize>(part: &ChainPart<T>) -> SpateResult<Vec<u8>> {
    let mut out = CHAIN_MAGIC.to_vec();
    bincode::serialize_into(&mut out, part)
        .map_err(|e| SpateError::Internal(format!("cannot serialize timers: {e}")))?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn disk(dir: &Path, cache_keys: usize, full_every: u32) -> DiskStates<u64, String> {
        DiskStates::open(DiskSetup {
            path: dir.join("op.redb"),
            cache_keys,
            full_every,
            checkpoints: true,
            max_parallelism: 128,
            operator: "op".into(),
            worker: 0,
        })
        .unwrap()
    }

    fn set(d: &mut DiskStates<u64, String>, k: u64, v: Option<String>) {
        d.with_state(k, |_, s| *s = v).unwrap();
    }

    fn get(d: &mut DiskStates<u64, String>, k: u64) -> Option<String> {
        d.with_state(k, |_, s| s.clone()).unwrap()
    }

    /// Applies a chain of files, as a restore does.
    fn replay(files: &BTreeMap<String, Vec<u8>>, chain: &[String]) -> BTreeMap<u64, String> {
        let mut out = BTreeMap::new();
        for name in chain {
            for (k, v) in read_records(&files[name], name).unwrap() {
                let key: u64 = bincode::deserialize(&k[2..]).unwrap();
                match v {
                    Some(v) => {
                        out.insert(key, bincode::deserialize(v).unwrap());
                    }
                    None => {
                        out.remove(&key);
                    }
                }
            }
        }
        out
    }

    #[test]
    fn state_larger_than_the_cache_is_exact() {
        let tmp = tempfile::tempdir().unwrap();
        let mut d = disk(tmp.path(), 16, 3);
        let mut oracle: BTreeMap<u64, String> = BTreeMap::new();
        for i in 0..5_000u64 {
            let k = (i * 7919) % 1_000;
            let expected = oracle.get(&k).cloned();
            d.with_state(k, |_, s| {
                assert_eq!(*s, expected, "key {k} at step {i}");
                if i % 11 == 0 {
                    *s = None;
                } else if i % 3 == 0 {
                    // Changed in place.
                    s.get_or_insert_with(String::new)
                        .push_str(&(i % 10).to_string());
                } else {
                    *s = Some(format!("{}{}", s.take().unwrap_or_default(), i % 10));
                }
            })
            .unwrap();
            if i % 11 == 0 {
                oracle.remove(&k);
            } else {
                oracle.entry(k).or_default().push_str(&(i % 10).to_string());
            }
            assert!(d.cache.len() <= 16);
        }
        assert_eq!(d.len().unwrap(), oracle.len() as u64);
        for (k, v) in &oracle {
            assert_eq!(get(&mut d, *k).as_ref(), Some(v));
        }
    }

    #[test]
    fn a_state_changed_in_place_reaches_the_next_delta() {
        let tmp = tempfile::tempdir().unwrap();
        let mut d = disk(tmp.path(), 1_000, 10);
        let mut files = BTreeMap::new();
        for k in 0..10u64 {
            set(&mut d, k, Some("a".into()));
        }
        let (c1, p) = d.checkpoint(1, 0).unwrap();
        files.extend(p.new);
        // Read only: not a change (the key stays clean, the delta stays empty of it)...
        assert_eq!(get(&mut d, 20), None);
        // ...but a state mutated through the reference is.
        d.with_state(3, |_, s| s.as_mut().unwrap().push('b'))
            .unwrap();
        let (c2, p) = d.checkpoint(2, 1).unwrap();
        assert_eq!(c2[0], c1[0]);
        files.extend(p.new);
        let delta = read_records(&files[&c2[1]], &c2[1]).unwrap();
        assert_eq!(delta.len(), 1, "only key 3 changed");
        let restored = replay(&files, &c2);
        assert_eq!(restored[&3], "ab");
        assert_eq!(restored.len(), 10);
    }

    #[test]
    fn the_memory_backend_keeps_only_keys_with_state() {
        keeps_only_keys_with_state(MemoryStates::<u64, u64>::default(), |n| n);
        // A large state is boxed; the same operations give the same states.
        keeps_only_keys_with_state(MemoryStates::<u64, [u64; 8]>::default(), |n| [n; 8]);
    }

    fn keeps_only_keys_with_state<S: Copy + PartialEq + std::fmt::Debug>(
        mut m: MemoryStates<u64, S>,
        state: fn(u64) -> S,
    ) {
        let boxed = std::mem::size_of::<(u64, S)>() > BOXED_ABOVE;
        assert_eq!(matches!(m, MemoryStates::Boxed(_)), boxed);
        let mut counts = std::collections::HashMap::new();
        for i in 0..10_000u64 {
            m.with_state(i % 100, |k, s| {
                assert_eq!(*k, i % 100);
                let n = counts.entry(*k).or_insert(0);
                assert_eq!(s.is_some(), *n > 0, "key {k}");
                *n += 1;
                *s = Some(state(*n));
                if *n == 7 {
                    *n = 0;
                    *s = None;
                }
            });
        }
        // A look that leaves no state stores nothing.
        m.with_state(5_000, |_, s| assert!(s.is_none()));
        assert_eq!(m.len(), 100);
        for k in 0..100u64 {
            // 100 records per key, the count restarting after each 7th.
            let got = m.with_state(k, |_, s| *s);
            assert_eq!(got, Some(state(100 % 7)), "key {k}");
        }
        m.remove(&3);
        m.insert(4, state(40));
        assert_eq!(m.with_state(3, |_, s| *s), None);
        assert_eq!(m.with_state(4, |_, s| *s), Some(state(40)));
        assert_eq!(m.iter().count(), 99);
        // The pass at the end hands every key over once.
        let mut seen: Vec<(u64, S)> = MemoryDrain::new(m).collect();
        seen.sort_by_key(|(k, _)| *k);
        let expected: Vec<(u64, S)> = (0..100)
            .filter(|k| *k != 3)
            .map(|k| (k, state(if k == 4 { 40 } else { 100 % 7 })))
            .collect();
        assert_eq!(seen, expected);
    }

    #[test]
    fn a_chain_of_deltas_restores_what_a_full_snapshot_does() {
        let tmp = tempfile::tempdir().unwrap();
        let mut d = disk(tmp.path(), 64, 3);
        let mut files = BTreeMap::new();
        let keep = |files: &mut BTreeMap<String, Vec<u8>>, p: PartFiles| {
            for (n, b) in p.new {
                files.insert(n, b);
            }
            p.shared.into_iter().map(|f| f.name).collect::<Vec<_>>()
        };
        for k in 0..2_000u64 {
            set(&mut d, k, Some(format!("v{k}")));
        }
        let (chain, p) = d.checkpoint(1, 0).unwrap();
        assert!(chain[0].ends_with(".base"), "{chain:?}");
        assert!(keep(&mut files, p).is_empty());
        let base_size = files[&chain[0]].len();
        let mut last = chain;
        for c in 2..=4u64 {
            // A few keys change, one is deleted, one is new.
            for k in [c, c * 10, 3_000 + c] {
                set(&mut d, k, Some(format!("c{c}")));
            }
            set(&mut d, 100 + c, None);
            let (chain, p) = d.checkpoint(c, c - 1).unwrap();
            let shared = keep(&mut files, p);
            assert_eq!(
                chain.len(),
                c as usize,
                "base and {} deltas: {chain:?}",
                c - 1
            );
            assert_eq!(shared, last, "refers to the previous chain");
            let delta = &files[chain.last().unwrap()];
            assert!(
                delta.len() * 20 < base_size,
                "a delta of 4 keys ({} bytes) is far smaller than the base ({base_size})",
                delta.len()
            );
            last = chain;
        }
        // The chain is now at its limit of 3 deltas: the next checkpoint is a base.
        set(&mut d, 7, Some("last".into()));
        let (full, p) = d.checkpoint(5, 4).unwrap();
        assert!(keep(&mut files, p).is_empty());
        assert_eq!(full.len(), 1);
        assert!(full[0].ends_with(".base"));
        // Restoring base + deltas equals restoring the full snapshot, less the last change.
        let mut via_chain = replay(&files, &last);
        assert_eq!(via_chain.get(&7).map(String::as_str), Some("v7"));
        via_chain.insert(7, "last".into());
        assert_eq!(via_chain, replay(&files, &full));
        assert_eq!(via_chain.len(), 2_000 - 3 + 3);
    }

    #[test]
    fn a_delta_builds_on_the_latest_completed_checkpoint_only() {
        let tmp = tempfile::tempdir().unwrap();
        let mut d = disk(tmp.path(), 64, 10);
        let mut files = BTreeMap::new();
        for k in 0..100u64 {
            set(&mut d, k, Some("a".into()));
        }
        let (c1, p) = d.checkpoint(1, 0).unwrap();
        files.extend(p.new);
        set(&mut d, 1, Some("b".into()));
        // Checkpoint 2 never completes (its files are gone): 3 builds on 1, and carries the
        // change made before 2 as well.
        let (_c2, _lost) = d.checkpoint(2, 1).unwrap();
        set(&mut d, 2, Some("c".into()));
        let (c3, p) = d.checkpoint(3, 1).unwrap();
        assert_eq!(
            p.shared.iter().map(|f| &f.name).collect::<Vec<_>>(),
            vec![&c1[0]]
        );
        files.extend(p.new);
        let restored = replay(&files, &c3);
        assert_eq!(restored[&1], "b");
        assert_eq!(restored[&2], "c");
        assert_eq!(restored.len(), 100);
    }

    #[test]
    fn damaged_files_are_refused() {
        let mut bytes = KV_MAGIC.to_vec();
        push_record(&mut bytes, &[0, 1, 7], Some(b"xyz"));
        assert_eq!(read_records(&bytes, "f").unwrap().len(), 1);
        for len in KV_MAGIC.len() + 1..bytes.len() {
            let e = read_records(&bytes[..len], "f").unwrap_err().to_string();
            assert!(e.contains("f is corrupt"), "{e}");
        }
        assert!(read_records(b"garbage!", "f").is_err());
    }
}
