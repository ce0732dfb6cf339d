//! A power-loss recorder for tests: attached to a `FaultPlan`, it records what the
//! kernel was handed for the files of one directory — every completed write (offset and
//! bytes), truncate and sync, in the order the engine performed them (below the
//! write-behind queue, so ring batches and linked syncs are seen as the kernel saw them),
//! and the directory's entry changes and fsyncs — and materialises the files as they could
//! be found after a power cut at any point of that history.
//!
//! # The model (what a crash state may contain)
//!
//! The history is a list of events, each at a position; a cut at position `c` means the
//! events before `c` happened and nothing after.
//!
//! * **File contents.** Per inode, everything before its last completed sync before `c`
//!   (`fsync`/`fdatasync` — treated alike — or a [`PowerLossLog::barrier`]) survives.
//!   Of the writes and truncates since (*pending ops*), **any subset** survives,
//!   independently of issue order (a later write may survive while an earlier one is
//!   lost). Surviving ops apply in issue order across batches; ops of one engine batch
//!   may apply in **any order** (the engine contract: ops of a batch are independent and
//!   may complete in any order, so two overlapping writes in one batch may land either
//!   way). **One** pending write may be **torn**: any subset of its 512-byte sectors
//!   (aligned to absolute file offsets) lands, the rest keep their older contents (never
//!   garbage: `SQLITE_IOCAP_POWERSAFE_OVERWRITE`, which the VFS declares, says bytes
//!   outside a written range are not disturbed).
//! * **File size.** A truncate is a pending op like a write: it survives or not as a unit,
//!   and shortens or zero-extends the file where it applies. A surviving write past the
//!   end extends the file (with zeros between). A **lost** write past the end may still
//!   have extended the size, the new bytes reading as zeros (the size reached the journal
//!   while the data did not — possible with delayed allocation); a crash state chooses
//!   this for all lost extending writes at once ([`CrashChoice::zero_extend`]).
//! * **Directory entries.** Creations and unlinks (seen by comparing the directory's
//!   listing with the last one before each engine batch, so they are placed exactly
//!   between the ops they happened between) are durable once a sync of the directory (or
//!   a barrier) completed after them. A file's own fsync does **not** make its entry
//!   durable (ext4 happens to, but POSIX does not promise it; SQLite syncs the directory
//!   itself). Renames are not modelled: SQLite renames nothing. Two models of the entry
//!   changes since the last directory sync ([`Metadata`]):
//!   * [`Metadata::Prefix`] (what the explorer uses): entry changes and pending truncates
//!     form one ordered *metadata stream*, of which a crash keeps a prefix — a later
//!     unlink, creation or size change never survives an earlier lost one, as with every
//!     journalling filesystem (ext4, XFS, btrfs commit metadata in order) — while data
//!     writes stay unordered as above. This is still worse than ext4, where any fsync
//!     commits all earlier metadata.
//!   * [`Metadata::PerName`]: each name independently in the state after any prefix of
//!     its own changes, truncates independent of entries. Stock SQLite is not safe
//!     under it: a VACUUM that shrinks a rollback-mode database truncates the file after
//!     unlinking the journal without a directory sync (pager.c `pager_end_transaction`),
//!     and a crash that keeps the truncate but undoes the unlink rolls back from a
//!     journal that lacks the truncated pages. Kept for that demonstration.
//! * Memory-mapped writes (the `-shm` WAL index) are not seen; a crash state should
//!   drop such files (SQLite rebuilds the WAL index from the WAL).
//!
//! The recorder never changes what the engine does, except for the test-only misorder
//! knob [`PowerLossLog::defer_syncs`], which exists to prove that the explorer catches a
//! wrong flush order.

use std::collections::{BTreeMap, HashMap};
use std::os::fd::RawFd;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use super::op::Op;

/// Sector granularity of a torn write.
pub const TORN_SECTOR_BYTES: u64 = 512;

/// The slot a `FaultPlan` keeps its recorder in (none unless a test attaches one).
#[derive(Default)]
pub(crate) struct Slot(Mutex<Option<Arc<PowerLossLog>>>);

impl Slot {
    /// The attached recorder, if any.
    pub(crate) fn active(&self) -> Option<Arc<PowerLossLog>> {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }
}

impl Slot {
    /// Starts recording, for power-loss crash states, what the engine hands the kernel for
    /// the files of `directory` (`FaultPlan::record_power_loss`). The directory should be
    /// empty or durable: files already there count as synced. Replaces an earlier
    /// recorder.
    pub(super) fn start(&self, directory: &Path) -> std::io::Result<Arc<PowerLossLog>> {
        let meta = std::fs::metadata(directory)?;
        let mut recorder = Recorder {
            directory: directory.to_path_buf(),
            directory_id: (meta.dev(), meta.ino()),
            events: Vec::new(),
            names: BTreeMap::new(),
            inodes: HashMap::new(),
            inode_names: Vec::new(),
            batch: 0,
            defer_suffix: None,
            deferred_now: Vec::new(),
            deferred_before: Vec::new(),
        };
        recorder.scan_directory();
        // Whatever exists already is durable: contents are not known to the log, so they
        // are read now as each inode's synced base.
        let mut bases = HashMap::new();
        for (name, &id) in &recorder.names {
            let bytes = std::fs::read(directory.join(name)).unwrap_or_default();
            bases.insert(id, bytes);
        }
        for (inode, bytes) in bases {
            if !bytes.is_empty() {
                recorder.events.push(Event::Write {
                    inode,
                    offset: 0,
                    data: bytes,
                    batch: 0,
                });
            }
        }
        recorder.events.push(Event::Barrier);
        let log = Arc::new(PowerLossLog(Mutex::new(recorder)));
        *self
            .0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(log.clone());
        Ok(log)
    }

    /// Stops recording (the log keeps what it has).
    pub(super) fn stop(&self) {
        *self
            .0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = None;
    }
}

/// One recorded event.
#[derive(Clone, Debug)]
pub enum Event {
    /// `name` now refers to the new, empty inode `inode`.
    Create { name: String, inode: usize },
    /// `name` was removed.
    Unlink { name: String },
    /// The directory's fsync completed.
    DirectorySync,
    /// A completed write (only the bytes the kernel accepted).
    Write {
        inode: usize,
        offset: u64,
        data: Vec<u8>,
        batch: u64,
    },
    /// A completed ftruncate.
    Truncate { inode: usize, len: u64, batch: u64 },
    /// A completed fsync/fdatasync of the inode: every write and truncate of it before
    /// this event is durable.
    Sync { inode: usize },
    /// Everything before is durable (files and directory): the start of recording, and
    /// [`PowerLossLog::barrier`].
    Barrier,
}

struct Recorder {
    directory: PathBuf,
    directory_id: (u64, u64),
    events: Vec<Event>,
    /// The directory's listing as last scanned: name → inode id.
    names: BTreeMap<String, usize>,
    /// (dev, ino) → inode id of the newest inode with that number.
    inodes: HashMap<(u64, u64), usize>,
    /// The name each inode id was created under.
    inode_names: Vec<String>,
    batch: u64,
    /// Misorder knob: syncs of files whose name ends with this are reported done at once
    /// but performed (and recorded) only after the next batch.
    defer_suffix: Option<String>,
    /// (index in the current batch, fd, inode) of syncs deferred in this batch.
    deferred_now: Vec<(usize, RawFd, usize)>,
    /// Syncs deferred by the previous batch, performed after the current one.
    deferred_before: Vec<(RawFd, usize)>,
}

fn file_id(fd: RawFd) -> Option<(u64, u64)> {
    // SAFETY: `stat` is plain old data; fstat fills it or fails without touching memory
    // beyond it.
    let mut stat: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `stat` is a valid, writable stat buffer for the duration of the call.
    if unsafe { libc::fstat(fd, &mut stat) } != 0 {
        return None;
    }
    Some((stat.st_dev, stat.st_ino))
}

enum Target {
    Directory,
    Inode(usize),
    Other,
}

impl Recorder {
    /// Brings the namespace up to date with the directory's listing, recording unlinks
    /// and creations since the last scan.
    fn scan_directory(&mut self) {
        let mut now: BTreeMap<String, (u64, u64)> = BTreeMap::new();
        if let Ok(entries) = std::fs::read_dir(&self.directory) {
            for entry in entries.flatten() {
                let Ok(meta) = entry.metadata() else { continue };
                if !meta.is_file() {
                    continue;
                }
                now.insert(
                    entry.file_name().to_string_lossy().into_owned(),
                    (meta.dev(), meta.ino()),
                );
            }
        }
        let gone: Vec<String> = self
            .names
            .iter()
            .filter(|(name, &id)| {
                now.get(*name)
                    .is_none_or(|key| self.inodes.get(key) != Some(&id))
            })
            .map(|(name, _)| name.clone())
            .collect();
        for name in gone {
            self.names.remove(&name);
            self.events.push(Event::Unlink { name });
        }
        for (name, key) in now {
            if self.names.contains_key(&name) {
                continue;
            }
            let inode = self.inode_names.len();
            self.inode_names.push(name.clone());
            self.inodes.insert(key, inode);
            self.names.insert(name.clone(), inode);
            self.events.push(Event::Create { name, inode });
        }
    }

    fn target(&self, fd: RawFd) -> Target {
        match file_id(fd) {
            Some(key) if key == self.directory_id => Target::Directory,
            Some(key) => self
                .inodes
                .get(&key)
                .map_or(Target::Other, |&inode| Target::Inode(inode)),
            None => Target::Other,
        }
    }

    fn record_sync(&mut self, fd: RawFd) {
        match self.target(fd) {
            Target::Directory => self.events.push(Event::DirectorySync),
            Target::Inode(inode) => self.events.push(Event::Sync { inode }),
            Target::Other => {}
        }
    }
}

/// What a `FaultPlan` recorded for power-loss crash states (see the module doc).
pub struct PowerLossLog(Mutex<Recorder>);

impl PowerLossLog {
    fn lock(&self) -> MutexGuard<'_, Recorder> {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The current position in the history (after bringing the directory's entries up to
    /// date): a cut at this position contains everything the engine did so far.
    pub fn mark(&self) -> usize {
        let mut recorder = self.lock();
        recorder.scan_directory();
        recorder.events.len()
    }

    /// Makes everything so far durable (`sync(2)`, recorded as a barrier): for the set-up
    /// of a test, whose crash points come later.
    pub fn barrier(&self) -> usize {
        let mut recorder = self.lock();
        recorder.scan_directory();
        // SAFETY: sync(2) takes no arguments and cannot fail.
        unsafe { libc::sync() };
        recorder.events.push(Event::Barrier);
        recorder.events.len()
    }

    /// Test-only misorder knob: from now on, a sync of a file whose name ends with
    /// `suffix` is reported complete at once but performed (and recorded) only after the
    /// engine's next batch — as a broken link or a sync racing its writes would. Used to
    /// prove that the crash-state explorer catches a wrong flush order.
    pub fn defer_syncs(&self, suffix: Option<&str>) {
        self.lock().defer_suffix = suffix.map(str::to_owned);
    }

    /// A copy of the history so far.
    pub fn history(&self) -> History {
        let mut recorder = self.lock();
        recorder.scan_directory();
        History {
            events: recorder.events.clone(),
            inode_names: recorder.inode_names.clone(),
        }
    }

    /// Whether op `index` of the batch about to run is a sync to defer (the misorder
    /// knob); if so the caller reports it complete without performing it.
    pub(crate) fn defers(&self, index: usize, op: &Op) -> bool {
        let mut recorder = self.lock();
        let Some(suffix) = recorder.defer_suffix.clone() else {
            return false;
        };
        let (Op::Sync { fd, .. } | Op::SyncAfterWrites { fd, .. }) = *op else {
            return false;
        };
        recorder.scan_directory();
        let Target::Inode(inode) = recorder.target(fd) else {
            return false;
        };
        if !recorder.inode_names[inode].ends_with(&suffix) {
            return false;
        }
        recorder.deferred_now.push((index, fd, inode));
        true
    }

    /// Records a batch the engine performed: `results[i]` is op i's result.
    pub(crate) fn record_batch(&self, ops: &[Op], results: &[i32]) {
        let mut recorder = self.lock();
        recorder.scan_directory();
        recorder.batch += 1;
        let batch = recorder.batch;
        let deferred_now = std::mem::take(&mut recorder.deferred_now);
        let deferred = |index: usize| deferred_now.iter().any(|(i, _, _)| *i == index);
        // Plain syncs first: a sync not linked to the batch's writes is not ordered after
        // them (ops of a batch are independent), so it covers only what came before.
        for (index, op) in ops.iter().enumerate() {
            if let Op::Sync { fd, .. } = *op {
                if results[index] >= 0 && !deferred(index) {
                    recorder.record_sync(fd);
                }
            }
        }
        for (index, op) in ops.iter().enumerate() {
            let result = results[index];
            if result < 0 || deferred(index) {
                continue;
            }
            match *op {
                Op::Write { fd, buf, offset } => {
                    if let Target::Inode(inode) = recorder.target(fd) {
                        // `result` bytes of it were written (a replaced `pwrite` may claim
                        // more than it was given: the buffer is all there is).
                        let data = buf[..(result as usize).min(buf.len())].to_vec();
                        recorder.events.push(Event::Write {
                            inode,
                            offset,
                            data,
                            batch,
                        });
                    }
                }
                Op::Truncate { fd, len } => {
                    if let Target::Inode(inode) = recorder.target(fd) {
                        recorder.events.push(Event::Truncate { inode, len, batch });
                    }
                }
                // A linked sync runs after the writes before it in the batch.
                Op::SyncAfterWrites { fd, .. } => recorder.record_sync(fd),
                Op::Sync { .. } | Op::Read { .. } | Op::Prefetch { .. } => {}
            }
        }
        // The misorder knob: syncs deferred by the previous batch run now, after this
        // batch's writes.
        for (fd, inode) in std::mem::take(&mut recorder.deferred_before) {
            // SAFETY: fsync on a descriptor number; if it was closed meanwhile the call
            // fails with EBADF and changes nothing.
            unsafe { libc::fsync(fd) };
            recorder.events.push(Event::Sync { inode });
        }
        recorder.deferred_before = deferred_now
            .into_iter()
            .map(|(_, fd, inode)| (fd, inode))
            .collect();
    }
}

/// A recorded history: the events and the name each inode was created under.
#[derive(Clone, Debug)]
pub struct History {
    pub events: Vec<Event>,
    pub inode_names: Vec<String>,
}

/// One pending op of a [`Cut`]: a write or truncate issued after its inode's last sync.
#[derive(Clone, Debug)]
pub struct PendingOp {
    pub inode: usize,
    /// The engine batch it was performed in (ops of one batch are unordered).
    pub batch: u64,
    /// 512-byte sectors a write covers (0 for a truncate): a torn write keeps a subset.
    pub sectors: usize,
    /// Position in the history.
    pub position: usize,
}

/// The durable part and the pending ops of every file, at one cut.
#[derive(Clone, Debug)]
pub struct Cut {
    pub position: usize,
    /// Per name: the inode (or absence) it may show, `choices[0]` being the durable
    /// directory entry and each later one the state after one more change since.
    pub names: Vec<(String, Vec<Option<usize>>)>,
    /// Per inode referenced by some name choice: the durable contents.
    bases: HashMap<usize, Vec<u8>>,
    /// Pending ops of those inodes, in issue order.
    pub pending: Vec<PendingOp>,
    /// The metadata stream since the last directory sync, in order: entry changes
    /// (`Entry(index into names, state)`) and pending truncates (`Truncate(index into
    /// pending)`); [`Metadata::Prefix`] keeps a prefix of it.
    pub metadata: Vec<MetadataOp>,
    events: Arc<Vec<Event>>,
}

/// One element of [`Cut::metadata`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MetadataOp {
    Entry(usize, Option<usize>),
    Truncate(usize),
}

/// Which directory-entry changes and truncates survive (see the module doc).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Metadata {
    /// The first `n` ops of [`Cut::metadata`] (all when `n` is larger).
    Prefix(usize),
    /// Per entry of [`Cut::names`], the index of the entry state chosen; truncates
    /// survive as [`CrashChoice::survives`] says.
    PerName(Vec<usize>),
}

impl Default for Metadata {
    fn default() -> Self {
        Metadata::Prefix(usize::MAX)
    }
}

/// How one crash state is drawn from a [`Cut`].
#[derive(Clone, Debug, Default)]
pub struct CrashChoice {
    /// Which entry changes (and, with [`Metadata::Prefix`], truncates) survive.
    pub metadata: Metadata,
    /// Per entry of [`Cut::pending`], whether it survives (for a truncate, only under
    /// [`Metadata::PerName`]).
    pub survives: Vec<bool>,
    /// The order surviving ops apply in, as indices into [`Cut::pending`]; `None` is
    /// issue order. Must keep ops of different batches in issue order.
    pub order: Option<Vec<usize>>,
    /// A torn write: its index in [`Cut::pending`] and which of its sectors land.
    pub torn: Option<(usize, Vec<bool>)>,
    /// Lost writes past the end of the file leave the size extended, reading zeros.
    pub zero_extend: bool,
}

impl History {
    pub fn len(&self) -> usize {
        self.events.len()
    }

    pub fn is_empty(&self) -> bool {
        self.events.is_empty()
    }

    /// Positions of the syncs (file, directory, barrier) in the history.
    pub fn sync_positions(&self) -> Vec<usize> {
        self.events
            .iter()
            .enumerate()
            .filter(|(_, event)| {
                matches!(
                    event,
                    Event::Sync { .. } | Event::DirectorySync | Event::Barrier
                )
            })
            .map(|(position, _)| position)
            .collect()
    }

    /// Whether the event at `position` is a directory sync or a barrier.
    pub fn is_directory_sync(&self, position: usize) -> bool {
        matches!(
            self.events.get(position),
            Some(Event::DirectorySync | Event::Barrier)
        )
    }

    /// Positions of completed syncs of inodes created under a name ending with `suffix`.
    pub fn file_sync_positions(&self, suffix: &str) -> Vec<usize> {
        self.events
            .iter()
            .enumerate()
            .filter(|(_, event)| {
                matches!(event, Event::Sync { inode } if self.inode_names[*inode].ends_with(suffix))
            })
            .map(|(position, _)| position)
            .collect()
    }

    /// The crash states possible at `position` (events before it happened).
    pub fn cut(&self, position: usize) -> Cut {
        let position = position.min(self.events.len());
        let events = &self.events[..position];
        let last_directory_sync = events
            .iter()
            .rposition(|e| matches!(e, Event::DirectorySync | Event::Barrier))
            .unwrap_or(0);
        let mut last_sync: HashMap<usize, usize> = HashMap::new();
        for (at, event) in events.iter().enumerate() {
            match event {
                Event::Sync { inode } => {
                    last_sync.insert(*inode, at);
                }
                Event::Barrier => {
                    for inode in 0..self.inode_names.len() {
                        last_sync.insert(inode, at);
                    }
                }
                _ => {}
            }
        }
        // Names: the durable entry, then every change since the last directory sync.
        let mut durable: BTreeMap<String, Option<usize>> = BTreeMap::new();
        let mut changes: BTreeMap<String, Vec<Option<usize>>> = BTreeMap::new();
        let mut entry_changes: Vec<(usize, String, Option<usize>)> = Vec::new();
        for (at, event) in events.iter().enumerate() {
            let (name, state) = match event {
                Event::Create { name, inode } => (name, Some(*inode)),
                Event::Unlink { name } => (name, None),
                _ => continue,
            };
            if at < last_directory_sync {
                durable.insert(name.clone(), state);
            } else {
                changes.entry(name.clone()).or_default().push(state);
                entry_changes.push((at, name.clone(), state));
            }
        }
        let mut all: BTreeMap<String, Vec<Option<usize>>> = BTreeMap::new();
        for (name, state) in &durable {
            all.insert(name.clone(), vec![*state]);
        }
        for (name, list) in changes {
            all.entry(name).or_insert_with(|| vec![None]).extend(list);
        }
        let names: Vec<(String, Vec<Option<usize>>)> = all
            .into_iter()
            .filter(|(_, choices)| choices.iter().any(Option::is_some))
            .collect();
        let referenced: Vec<usize> = names
            .iter()
            .flat_map(|(_, choices)| choices.iter().flatten().copied())
            .collect();
        let mut bases: HashMap<usize, Vec<u8>> = referenced
            .iter()
            .map(|&inode| (inode, Vec::new()))
            .collect();
        let mut pending = Vec::new();
        for (at, event) in events.iter().enumerate() {
            let (inode, batch, sectors) = match event {
                Event::Write {
                    inode,
                    offset,
                    data,
                    batch,
                } => {
                    let first = offset / TORN_SECTOR_BYTES;
                    let end = (offset + data.len() as u64).div_ceil(TORN_SECTOR_BYTES);
                    (*inode, *batch, (end - first) as usize)
                }
                Event::Truncate { inode, batch, .. } => (*inode, *batch, 0),
                _ => continue,
            };
            let Some(base) = bases.get_mut(&inode) else {
                continue;
            };
            if last_sync.get(&inode).is_some_and(|&synced| at < synced) {
                apply(base, event, None);
            } else {
                pending.push(PendingOp {
                    inode,
                    batch,
                    sectors,
                    position: at,
                });
            }
        }
        let mut stream: Vec<(usize, MetadataOp)> = entry_changes
            .into_iter()
            .filter_map(|(at, name, state)| {
                let index = names.iter().position(|(n, _)| *n == name)?;
                Some((at, MetadataOp::Entry(index, state)))
            })
            .collect();
        for (index, op) in pending.iter().enumerate() {
            if op.sectors == 0 {
                stream.push((op.position, MetadataOp::Truncate(index)));
            }
        }
        stream.sort_by_key(|(at, _)| *at);
        let metadata = stream.into_iter().map(|(_, op)| op).collect();
        Cut {
            position,
            names,
            bases,
            pending,
            metadata,
            events: Arc::new(self.events[..position].to_vec()),
        }
    }
}

/// Applies a write or truncate to `file`; `sectors` keeps only those sectors of a write.
fn apply(file: &mut Vec<u8>, event: &Event, sectors: Option<&[bool]>) {
    match event {
        Event::Write { offset, data, .. } => {
            let offset = *offset as usize;
            let first_sector = offset / TORN_SECTOR_BYTES as usize;
            let sector = TORN_SECTOR_BYTES as usize;
            let mut start = 0usize;
            while start < data.len() {
                let absolute = offset + start;
                let index = absolute / sector - first_sector;
                let end = ((absolute / sector + 1) * sector - offset).min(data.len());
                if sectors.is_none_or(|keep| keep.get(index).copied().unwrap_or(false)) {
                    if file.len() < offset + end {
                        file.resize(offset + end, 0);
                    }
                    file[absolute..offset + end].copy_from_slice(&data[start..end]);
                }
                start = end;
            }
        }
        Event::Truncate { len, .. } => file.resize(*len as usize, 0),
        _ => {}
    }
}

impl Cut {
    /// How many states [`Metadata::Prefix`] choices and subsets of pending writes make
    /// (saturating), for deciding whether to enumerate exhaustively.
    pub fn simple_state_count(&self) -> u64 {
        let writes = self.pending.iter().filter(|op| op.sectors > 0).count();
        let shift = writes.min(63) as u32;
        (self.metadata.len() as u64 + 1).saturating_mul(1u64 << shift)
    }

    /// The files of one crash state: `(name, contents)` for every name present.
    pub fn materialize(&self, choice: &CrashChoice) -> Vec<(String, Vec<u8>)> {
        let mut survives = choice.survives.clone();
        survives.resize(self.pending.len(), true);
        let picks: Vec<Option<usize>> = match &choice.metadata {
            Metadata::Prefix(kept) => {
                let mut picks: Vec<Option<usize>> =
                    self.names.iter().map(|(_, choices)| choices[0]).collect();
                for (at, op) in self.metadata.iter().enumerate() {
                    match *op {
                        MetadataOp::Entry(index, state) if at < *kept => picks[index] = state,
                        MetadataOp::Truncate(index) => survives[index] = at < *kept,
                        MetadataOp::Entry(..) => {}
                    }
                }
                picks
            }
            Metadata::PerName(chosen) => self
                .names
                .iter()
                .enumerate()
                .map(|(index, (_, choices))| {
                    let pick = chosen.get(index).copied().unwrap_or(choices.len() - 1);
                    choices[pick.min(choices.len() - 1)]
                })
                .collect(),
        };
        let mut files = Vec::new();
        for ((name, _), pick) in self.names.iter().zip(picks) {
            let Some(inode) = pick else { continue };
            files.push((name.clone(), self.contents(inode, choice, &survives)));
        }
        files
    }

    fn contents(&self, inode: usize, choice: &CrashChoice, survives: &[bool]) -> Vec<u8> {
        let mut file = self.bases.get(&inode).cloned().unwrap_or_default();
        let identity: Vec<usize> = (0..self.pending.len()).collect();
        let order = choice.order.as_deref().unwrap_or(&identity);
        let mut extended_to = 0u64;
        for &index in order {
            let op = &self.pending[index];
            if op.inode != inode {
                continue;
            }
            let event = &self.events[op.position];
            let torn = choice
                .torn
                .as_ref()
                .filter(|(torn, _)| *torn == index)
                .map(|(_, sectors)| sectors.as_slice());
            if survives[index] {
                apply(&mut file, event, torn);
            } else if let Event::Write { offset, data, .. } = event {
                extended_to = extended_to.max(offset + data.len() as u64);
            } else if let Event::Truncate { .. } = event {
                // A lost truncate leaves the size as it was.
            }
        }
        if choice.zero_extend && extended_to > file.len() as u64 {
            file.resize(extended_to as usize, 0);
        }
        file
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(inode: usize, offset: u64, data: &[u8], batch: u64) -> Event {
        Event::Write {
            inode,
            offset,
            data: data.to_vec(),
            batch,
        }
    }

    fn history(events: Vec<Event>, names: &[&str]) -> History {
        History {
            events,
            inode_names: names.iter().map(|n| n.to_string()).collect(),
        }
    }

    fn file(files: &[(String, Vec<u8>)], name: &str) -> Option<Vec<u8>> {
        files
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, b)| b.clone())
    }

    fn created(name: &str, inode: usize) -> Event {
        Event::Create {
            name: name.into(),
            inode,
        }
    }

    #[test]
    fn synced_writes_survive_and_pending_ones_are_chosen() {
        let h = history(
            vec![
                created("a", 0),
                Event::DirectorySync,
                write(0, 0, &[1; 1024], 1),
                Event::Sync { inode: 0 },
                write(0, 0, &[2; 512], 2),
                write(0, 1024, &[3; 512], 2),
            ],
            &["a"],
        );
        let cut = h.cut(h.len());
        assert_eq!(cut.pending.len(), 2);
        let none = CrashChoice {
            survives: vec![false, false],
            ..CrashChoice::default()
        };
        assert_eq!(file(&cut.materialize(&none), "a").unwrap(), vec![1; 1024]);
        // The later write without the earlier one.
        let later = CrashChoice {
            survives: vec![false, true],
            ..CrashChoice::default()
        };
        let bytes = file(&cut.materialize(&later), "a").unwrap();
        assert_eq!(bytes.len(), 1536);
        assert_eq!(&bytes[..1024], &[1; 1024][..]);
        assert_eq!(&bytes[1024..], &[3; 512][..]);
        // A lost append may leave zeros behind a longer size.
        let zeros = CrashChoice {
            survives: vec![true, false],
            zero_extend: true,
            ..CrashChoice::default()
        };
        let bytes = file(&cut.materialize(&zeros), "a").unwrap();
        assert_eq!(&bytes[..512], &[2; 512][..]);
        assert_eq!(&bytes[1024..], &[0; 512][..]);
        // Before the sync, the first write is pending too.
        assert_eq!(h.cut(3).pending.len(), 1);
    }

    #[test]
    fn a_torn_write_keeps_a_subset_of_its_sectors() {
        let h = history(
            vec![
                created("a", 0),
                write(0, 0, &[1; 2048], 1),
                Event::Barrier,
                // Starts mid-sector: sectors are aligned to the file, not the write.
                write(0, 256, &[9; 1024], 2),
            ],
            &["a"],
        );
        let cut = h.cut(h.len());
        assert_eq!(cut.pending[0].sectors, 3);
        let torn = CrashChoice {
            torn: Some((0, vec![false, true, false])),
            ..CrashChoice::default()
        };
        let bytes = file(&cut.materialize(&torn), "a").unwrap();
        assert_eq!(&bytes[256..512], &[1; 256][..]);
        assert_eq!(&bytes[512..1024], &[9; 512][..]);
        assert_eq!(&bytes[1024..1280], &[1; 256][..]);
    }

    #[test]
    fn ops_of_one_batch_apply_in_any_order() {
        let h = history(
            vec![
                created("a", 0),
                Event::Barrier,
                write(0, 0, &[1; 512], 7),
                write(0, 0, &[2; 512], 7),
            ],
            &["a"],
        );
        let cut = h.cut(h.len());
        let issue = file(&cut.materialize(&CrashChoice::default()), "a").unwrap();
        assert_eq!(issue, vec![2; 512]);
        let swapped = CrashChoice {
            order: Some(vec![1, 0]),
            ..CrashChoice::default()
        };
        assert_eq!(file(&cut.materialize(&swapped), "a").unwrap(), vec![1; 512]);
    }

    #[test]
    fn entries_and_truncates_survive_as_a_prefix_of_the_metadata_stream() {
        let h = history(
            vec![
                created("db", 0),
                created("db-journal", 1),
                write(0, 0, &[5; 4096], 1),
                write(1, 0, &[6; 512], 1),
                Event::Barrier,
                Event::Unlink {
                    name: "db-journal".into(),
                },
                Event::Truncate {
                    inode: 0,
                    len: 1024,
                    batch: 2,
                },
                created("db-wal", 2),
            ],
            &["db", "db-journal", "db-wal"],
        );
        let cut = h.cut(h.len());
        assert_eq!(cut.metadata.len(), 3);
        let state = |kept| {
            cut.materialize(&CrashChoice {
                metadata: Metadata::Prefix(kept),
                ..CrashChoice::default()
            })
        };
        // Nothing kept: the journal is back and the database is whole.
        let none = state(0);
        assert_eq!(file(&none, "db-journal").unwrap(), vec![6; 512]);
        assert_eq!(file(&none, "db").unwrap().len(), 4096);
        assert!(file(&none, "db-wal").is_none());
        // The unlink without the later truncate.
        let one = state(1);
        assert!(file(&one, "db-journal").is_none());
        assert_eq!(file(&one, "db").unwrap().len(), 4096);
        // Everything.
        let all = state(3);
        assert_eq!(file(&all, "db").unwrap().len(), 1024);
        assert_eq!(file(&all, "db-wal").unwrap(), Vec::<u8>::new());
        // Per name, the truncate may survive while the unlink is undone.
        let per_name = cut.materialize(&CrashChoice {
            metadata: Metadata::PerName(vec![0, 0, 0]),
            ..CrashChoice::default()
        });
        assert_eq!(file(&per_name, "db").unwrap().len(), 1024);
        assert!(file(&per_name, "db-journal").is_some());
    }
}
