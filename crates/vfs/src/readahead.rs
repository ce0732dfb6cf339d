//! B-tree read-ahead for a buffered main database: the pages SQLite will read next,
//! asked of the kernel before SQLite asks for them.
//!
//! SQLite reads one page at a time and waits for each, so on data that is not in the page
//! cache a scan runs at queue depth 1 while the device serves several times more reads
//! with many in flight. The file format says what comes next: an interior page lists its
//! children in key order, and a scan reads them in that order.
//!
//! **What it follows.** Every whole-page read SQLite makes of the database goes through
//! [`ReadAhead::after_read`]. Interior pages are kept as a path, root first, like SQLite's
//! cursor: each level remembers its page, the last child SQLite read and how far
//! read-ahead has gone. On the way down only a page's header is checked and its children
//! are read from its copy one at a time; a page is parsed whole (`btree_page`, which
//! trusts no byte) before any of its children is asked for. When SQLite reads
//! two children of one interior page in a row (child i, then i+1; or i, then i−1: a
//! descending scan, and `integrity_check`, which visits the right child first and then the
//! cells from the last), that page's children are being scanned, in that direction: the next ones, up to a window that doubles while the scan goes on, are
//! handed to the kernel in one batch ([`PageSource::prefetch`]: `POSIX_FADV_WILLNEED`,
//! one ring submission on the io_uring backend). An interior page entered while its parent
//! is being scanned inherits the scan: its first children go at once. Near the end of a
//! level, the next sibling interior page is prefetched too and, once the kernel has it,
//! read from the page cache without waiting (`PageSource::read_if_cached`) so its first
//! children join the window: the stream of reads does not stop at each parent boundary.
//!
//! **Two paths, and the rows of an index scan.** A new descent parks the path it leaves
//! (`ReadAhead::parked`) and a read found there makes it the followed path again, so a
//! query that alternates between an index and its table keeps both; an interior page that
//! is a child of some level cuts that path below the level instead of starting over. With
//! both, the table leaves an index scan will read for its rows are predicted from the index
//! leaves' rowids and, once the predictions match SQLite's reads, asked for too
//! (`rows.rs`).
//!
//! **What it never does.** A point lookup reads one child per level and starts nothing.
//! Read-ahead never changes a byte SQLite reads: it only warms the page cache, and SQLite's
//! own read still goes to the file, so a page prefetched before another process rewrote it
//! is simply read again, new. A page whose newest copy is in the WAL is read by SQLite from
//! the WAL and never reaches this code; prefetching its stale database copy costs one read.
//! A malformed page (any parse error) is neither followed nor prefetched from, and every
//! child must lie inside the file, so corrupt or hostile bytes cost at most one page's
//! parse.
//!
//! **Never slower on cached data.** A buffered database's read-ahead sleeps until one of
//! SQLite's sampled reads ([`ReadAhead::sample_this_read`]: one in [`READS_PER_SAMPLE`],
//! stretching to one in [`MAX_READS_PER_SAMPLE`] over a long run of cached reads) went to
//! the device (`file/rw.rs`): a whole page found missing from the page cache, which the
//! read asked alone first (`RWF_NOWAIT`), or a few header bytes that took a device read's
//! time while the thread's I/O accounting counted a device read. Asleep, a read costs the
//! check of a flag and a counter, and a hot read that was merely slow does not wake it.
//! A query's first reads are its descents, whose root and interior pages SQLite then
//! keeps in its own cache, so read-ahead must learn them even if it wakes a few reads
//! later: the offsets of the first [`READS_RECORDED_AFTER_FORGET`] reads after a lock
//! change are kept ([`Sample::Record`], a burst that backs off over runs of cached
//! transactions), and a wake replays them from the page cache before the read that woke
//! it ([`ReadAhead::after_read`]). Awake, the first [`READS_DEFERRED_AWAKE`] reads after
//! a lock change are recorded the same way and followed only if the transaction reads
//! more (replayed before its next read): a point lookup, a transaction of a few reads,
//! costs cold what it costs asleep, a store per read, and a scan is followed from its
//! ninth read on with everything before it known. It falls asleep
//! again after [`READS_TO_SLEEP`] reads with no sign of the device. Awake, before a batch,
//! the first pages it would ask for (up to [`BATCH_CACHE_CHECKS`]) are checked with
//! [`PageSource::is_cached`] (`cachestat(2)`, no I/O): when the kernel already has them
//! all, the batch is skipped; after
//! two such checks in a row nothing is checked or asked for during the next 8, 16, … up
//! to [`MAX_HOT_BACKOFF_READS`] page reads of the file, so a scan of cached data costs
//! one check per that many reads.
//!
//! **Bounds.** A file's pages asked for and not yet read are at most its window
//! ([`max_window_pages`]: [`MAX_WINDOW_BYTES`] or [`MAX_WINDOW_PAGES`]); every file of the
//! process together at most [`PROCESS_MAX_OUTSTANDING_BYTES`]. The path is at most
//! [`MAX_DEPTH`] levels (SQLite's own limit); each level's page copy and child list are
//! allocated once, at the capacity any valid page of the geometry needs, and reused.

mod rows;

use std::sync::atomic::{AtomicU64, Ordering};

use crate::btree_page::{self, Geometry, InteriorView, PageKind};

use rows::Rows;

/// Deepest B-tree SQLite handles.
pub(crate) use btree_page::MAX_DEPTH;
/// Most pages one file has asked for and not yet read.
pub(crate) const MAX_WINDOW_PAGES: usize = 128;
/// Most bytes one file has asked for and not yet read (bounds large page sizes).
pub(crate) const MAX_WINDOW_BYTES: usize = 1 << 20;
/// Pages of the first batch of a scan; each further batch doubles it up to the maximum.
pub(crate) use rows::FIRST_WINDOW_PAGES;
/// Most bytes all files of the process have asked for and not yet read.
pub(crate) const PROCESS_MAX_OUTSTANDING_BYTES: u64 = 32 << 20;
/// Most index leaves asked for ahead of an index scan whose rows are read ahead: each
/// names a page's worth of rows, and the window is theirs.
pub(crate) const ROWS_INDEX_WINDOW_PAGES: usize = 4;
/// Leading pages of a batch checked for being cached: only a batch whose first pages are
/// all cached is skipped. One page proves little: a read SQLite made of a page nobody
/// asked for starts the kernel's own read-ahead around it, which may hold the next page
/// of the scan and not the ones after.
pub(crate) const BATCH_CACHE_CHECKS: usize = 4;
/// Fewest first children of a next sibling asked for when it is peeked at: with less room
/// in the window, the peek waits until SQLite has read more (a sibling entered with only
/// its first child asked for makes SQLite wait for the second).
pub(crate) const PEEKED_CHILDREN_MIN: usize = 8;
/// Longest wait, in child reads, between two cache checks of a scan found cached.
pub(crate) const MAX_HOT_BACKOFF_READS: u32 = 64;

/// One of this many of SQLite's reads is sampled: asked of the page cache alone first
/// (`file/rw.rs`), to tell whether it reached the device. Asleep, the stretch between two
/// samples doubles after every [`CACHED_SAMPLES_BEFORE_STRETCH`] samples in a row that
/// found their pages cached, up to [`MAX_READS_PER_SAMPLE`]; a lock change or a read that
/// reached the device brings it back to this.
pub(crate) const READS_PER_SAMPLE: u32 = 8;
/// Longest stretch between two sampled reads (asleep, in a long run of cached reads: a
/// probe costs about 60 ns more than a `pread`, so at one read in 8 a hot
/// `integrity_check` paid about 1 % for it).
pub(crate) const MAX_READS_PER_SAMPLE: u32 = 64;
const _: () = assert!(MAX_READS_PER_SAMPLE.is_power_of_two() && READS_PER_SAMPLE.is_power_of_two());
/// Samples in a row finding their pages cached before the stretch between samples doubles.
pub(crate) const CACHED_SAMPLES_BEFORE_STRETCH: u32 = 32;
/// Asleep, every one of this many reads after the paths were forgotten is recorded (its
/// offset kept for a replay at a wake), at the lock changes a burst is due at
/// ([`MAX_FORGETS_BETWEEN_BURSTS`]): a descent or two and the first children read, past
/// the first sampled reads, which a page the kernel's own read-ahead brought in may leave
/// asleep.
pub(crate) const READS_RECORDED_AFTER_FORGET: u32 = 16;
/// Awake, this many reads after a lock change are recorded, not followed, and replayed
/// before the next read of the transaction, if it makes one: a point lookup's descent
/// (through an index and then its table, the levels SQLite's cache does not hold) ends
/// within it and costs nothing to follow, where following it cost a 4 KiB copy and a
/// header check per interior page. A scan's read-ahead starts this many reads later.
pub(crate) const READS_DEFERRED_AWAKE: u32 = 8;
const _: () = assert!(READS_DEFERRED_AWAKE as usize <= BURST_PAGES);
/// Asleep, a burst (its reads recorded) is due at every lock change until this many
/// bursts in a row saw no wake; from then on the lock changes from one burst to the next
/// double with each burst, up to [`MAX_FORGETS_BETWEEN_BURSTS`].
pub(crate) const QUIET_BURSTS_BEFORE_BACKOFF: u32 = 32;
/// Most lock changes from one burst to the next (a rollback-mode read
/// transaction makes two); a power of two, reached by doubling from one.
pub(crate) const MAX_FORGETS_BETWEEN_BURSTS: u32 = 16;
const _: () = assert!(MAX_FORGETS_BETWEEN_BURSTS.is_power_of_two());
/// Awake read-ahead falls asleep after this many reads with no sign of the device.
pub(crate) const READS_TO_SLEEP: u32 = 256;
/// A sampled read not asked of the page cache first (a few header bytes, or any where the
/// file system cannot read without waiting) may have gone to the device if
/// it took this long, and did if the thread's I/O accounting then counts a device read
/// (a test's stand-in `pread`, which reaches no device, is told by the duration alone): a
/// page-cache hit of one page takes a few microseconds, a device read at queue depth 1
/// tens (an NVMe drive's about ten).
pub(crate) const DEVICE_READ: std::time::Duration = std::time::Duration::from_micros(10);
/// A sampled read the page cache could not serve alone went to the device if reading it
/// took this long: a page-cache hit takes one or two microseconds, the fastest device read
/// several.
pub(crate) const DEVICE_READ_AFTER_MISS: std::time::Duration = std::time::Duration::from_micros(5);

/// What read-ahead asks of SQLite's read about to be made
/// ([`ReadAhead::sample_this_read`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Sample {
    /// Nothing: read as it is.
    No,
    /// One of the burst after a lock change, while asleep: its offset is kept
    /// ([`ReadAhead::record_burst_read`]), so that a wake later in the transaction can
    /// follow the descent it slept through. On cached data the burst is a short
    /// transaction's every read, so this costs a store: no clock, no probe (nor is a
    /// read of the burst sampled: a probe among a short transaction's few reads is a few
    /// percent of its time in a process that has made few).
    Record,
    /// Sampled: the read tells whether it reached the device (`file/rw.rs`: a whole
    /// page is asked of the page cache alone first, a few header bytes are timed).
    Spread,
}

#[cfg(test)]
impl Sample {
    /// Whether the read is sampled (tells whether it reached the device).
    pub(crate) fn is_sampled(self) -> bool {
        self == Sample::Spread
    }

    /// Whether the read's offset is kept for a replay.
    pub(crate) fn is_recorded(self) -> bool {
        self == Sample::Record
    }
}

/// Most offsets a burst keeps: its reads.
pub(crate) const BURST_PAGES: usize = READS_RECORDED_AFTER_FORGET as usize;

/// Bytes asked for and not yet read, summed over every file of the process.
static PROCESS_OUTSTANDING_BYTES: AtomicU64 = AtomicU64::new(0);

/// What read-ahead needs from the file; the VFS implements it over the database's
/// descriptor and engine, the tests over a model.
pub(crate) trait PageSource {
    /// Whether the kernel has `page_number` cached now; `None` when it cannot tell.
    fn is_cached(&mut self, page_number: u32, page_size_bytes: u32) -> Option<bool>;
    /// Copies page `page_number` into `buf` (one page) if, and only if, the kernel has it
    /// cached; never waits for the device.
    fn read_if_cached(&mut self, page_number: u32, buf: &mut [u8]) -> bool;
    /// Asks the kernel to start reading `pages` (scan order, no duplicates).
    fn prefetch(&mut self, pages: &[u32], page_size_bytes: u32);
    /// Pages in the file now.
    fn page_count(&mut self, page_size_bytes: u32) -> u32;
}

/// One interior page on the path.
struct Level {
    page_number: u32,
    /// The page's bytes, copied when SQLite read it (capacity: the page size, allocated
    /// once).
    page: Vec<u8>,
    /// Until the level is scanned, only the page's header is checked and its children are
    /// read from `page` one at a time (`Some`): a descent that reads one child per level,
    /// a point lookup, costs a header check and a copy per level. Before the first child is
    /// asked for, the whole page is parsed and checked into `children` (`None`).
    unparsed: Option<InteriorView>,
    /// The whole-page parse refused the page: it is followed, never scanned.
    malformed: bool,
    /// Children in key order, once parsed (capacity: any valid page's, allocated once).
    children: Vec<u32>,
    /// The scan runs from the last child to the first: a descending scan (`ORDER BY …
    /// DESC`), or `integrity_check`, which visits the right child first and then the cells
    /// from the last to the first. Positions below count in the scan's direction
    /// ([`Level::child_at`]).
    backward: bool,
    /// Position of the child SQLite read last.
    last_read: Option<usize>,
    /// The child SQLite read right after entering the level, its position not yet looked
    /// up ([`Level::resolve_pending`]). A descent reads one child per level and, in a
    /// point lookup, nothing after it before the lock change that forgets the path: the
    /// search through the child list is made only if a later read needs the position.
    /// Set only on a level with nothing read or asked for yet, so the read noted late
    /// leaves the level as it would have left it at once.
    pending: Option<u32>,
    /// Consecutive children read in order, ending at `last_read`.
    streak: u32,
    /// Entered while its parent was being scanned: its children are scanned from the first.
    inherited_scan: bool,
    /// The children at positions `..issued_until` were read or asked for.
    issued_until: usize,
    window_pages: usize,
    /// This level's next children after `last_read` (interior pages), read from the cache
    /// while the level below finished, and how many of each one's first children were
    /// asked for: they count as issued when SQLite enters it.
    peeked: Peeked,
}

/// Most siblings ahead of a scan whose first children are asked for.
pub(crate) const MAX_PEEKED_SIBLINGS: usize = 4;

/// Siblings read from the cache ahead of a scan, in key order, with the number of first
/// children asked for of each.
#[derive(Clone, Copy, Debug, Default)]
struct Peeked {
    entries: [(u32, usize); MAX_PEEKED_SIBLINGS],
    len: usize,
}

impl Peeked {
    fn total(&self) -> usize {
        self.entries[..self.len].iter().map(|&(_, n)| n).sum()
    }

    fn contains(&self, page_number: u32) -> bool {
        self.entries[..self.len]
            .iter()
            .any(|&(p, _)| p == page_number)
    }

    fn is_full(&self) -> bool {
        self.len == MAX_PEEKED_SIBLINGS
    }

    fn push(&mut self, page_number: u32, count: usize) {
        assert!(
            !self.is_full(),
            "a full list of peeked siblings is never pushed to"
        );
        self.entries[self.len] = (page_number, count);
        self.len += 1;
    }

    /// The count asked for of `page_number`'s children, which SQLite now enters; entries
    /// before it (siblings SQLite went past) are forgotten with it.
    fn take(&mut self, page_number: u32) -> Option<usize> {
        let at = self.entries[..self.len]
            .iter()
            .position(|&(p, _)| p == page_number)?;
        let count = self.entries[at].1;
        self.entries.copy_within(at + 1..self.len, 0);
        self.len -= at + 1;
        Some(count)
    }

    fn clear(&mut self) {
        self.len = 0;
    }
}

impl Level {
    fn new(geometry: Geometry) -> Level {
        Level {
            page_number: 0,
            page: Vec::with_capacity(geometry.page_size_bytes as usize),
            unparsed: None,
            malformed: false,
            children: Vec::with_capacity(btree_page::max_children(geometry)),
            backward: false,
            last_read: None,
            pending: None,
            streak: 0,
            inherited_scan: false,
            issued_until: 0,
            window_pages: FIRST_WINDOW_PAGES,
            peeked: Peeked::default(),
        }
    }

    /// Whether the child read right after entering the level, a page of kind `kind`, may
    /// have its position looked up later ([`Level::pending`]): the level has nothing read
    /// or asked for, and the page is of the level's own tree type (a table page below a
    /// table interior page, an index page below an index one), so a read of another kind
    /// of tree (an index scan's first row lookup) is never taken for a child.
    fn may_defer(&self, kind: Option<PageKind>) -> bool {
        let same_tree = match btree_page::kind_hint(&self.page, self.page_number) {
            Some(PageKind::TableInterior) => {
                matches!(kind, Some(PageKind::TableInterior | PageKind::TableLeaf))
            }
            Some(PageKind::IndexInterior) => {
                matches!(kind, Some(PageKind::IndexInterior | PageKind::IndexLeaf))
            }
            _ => false,
        };
        same_tree
            && self.pending.is_none()
            && self.last_read.is_none()
            && !self.inherited_scan
            && self.issued_until == 0
            && self.peeked.len == 0
    }

    /// Notes the read of [`Level::pending`] at its position, looked up now; a page the
    /// level does not name (another tree's, read where SQLite had the child cached)
    /// leaves the level as if nothing was read.
    fn resolve_pending(&mut self) {
        let Some(child) = self.pending.take() else {
            return;
        };
        if let Some(position) = self.position_of(child) {
            self.note_read(Found::At(position));
        }
    }

    /// SQLite read the child `found` of this level.
    fn note_read(&mut self, found: Found) {
        self.resolve_pending();
        let index = match found {
            Found::At(position) => position,
            Found::Turn => {
                // The child read last is the first of a scan the other way; this read is
                // its second.
                self.face(!self.backward);
                self.streak = 1;
                self.last_read.expect("a turn is found beside a read child") + 1
            }
            Found::Pending => unreachable!("a pending child is noted when it is resolved"),
        };
        let in_order = match self.last_read {
            Some(last) => last + 1 == index,
            None => self.inherited_scan && index == 0,
        };
        if in_order {
            self.streak += 1;
        } else {
            // A jump: what was asked for ahead of the old position is no longer ahead.
            self.streak = 1;
            self.inherited_scan = false;
            self.issued_until = index + 1;
            self.window_pages = FIRST_WINDOW_PAGES;
            self.peeked.clear();
        }
        self.last_read = Some(index);
        self.issued_until = self.issued_until.max(index + 1);
    }

    /// Children asked for and not yet read.
    fn outstanding(&self) -> usize {
        let next = self.last_read.map_or(0, |i| i + 1);
        self.issued_until.saturating_sub(next) + self.peeked.total()
    }

    fn scanning(&self) -> bool {
        !self.malformed && (self.streak >= 2 || (self.inherited_scan && self.streak >= 1))
    }

    fn child_count(&self) -> usize {
        self.unparsed
            .map_or(self.children.len(), InteriorView::child_count)
    }

    /// The child at key-order `index`, if the page names one there.
    fn key_child(&self, index: usize) -> Option<u32> {
        match self.unparsed {
            Some(view) => view.child(&self.page, index),
            None => self.children.get(index).copied(),
        }
    }

    /// The key-order index of `child`.
    fn key_index_of(&self, child: u32) -> Option<usize> {
        match self.unparsed {
            Some(view) => view.position_of(&self.page, child),
            None => self.children.iter().position(|&c| c == child),
        }
    }

    /// The position of `child` in the scan's direction, if the page names it.
    fn position_of(&self, child: u32) -> Option<usize> {
        self.key_index_of(child).map(|index| self.key_index(index))
    }

    /// Turns the level to scan `backward` (or forward), keeping the child read last: what
    /// was asked for ahead of it the old way is no longer ahead.
    fn face(&mut self, backward: bool) {
        if self.backward == backward {
            return;
        }
        self.resolve_pending();
        let last_key_index = self.last_read.map(|position| self.key_index(position));
        self.backward = backward;
        self.last_read = last_key_index.map(|index| self.key_index(index));
        self.inherited_scan = false;
        self.issued_until = self.last_read.map_or(0, |position| position + 1);
        self.window_pages = FIRST_WINDOW_PAGES;
        self.peeked.clear();
    }

    /// The child at `position` in the scan's direction, if the page names one there.
    fn child(&self, position: usize) -> Option<u32> {
        if position >= self.child_count() {
            return None;
        }
        self.key_child(self.key_index(position))
    }

    /// The child at `position` (below the child count) in the scan's direction, of a parsed
    /// level: one that may be asked for.
    fn parsed_child(&self, position: usize) -> u32 {
        assert!(
            self.unparsed.is_none() && !self.malformed,
            "children of a page not parsed whole are never asked for"
        );
        self.children[self.key_index(position)]
    }

    /// The key-order index of `position` in the scan's direction, and the other way round
    /// (the map is its own inverse).
    fn key_index(&self, position: usize) -> usize {
        let count = self.child_count();
        assert!(position < count, "a position past the children");
        if self.backward {
            count - 1 - position
        } else {
            position
        }
    }
}

/// Where a read page lies on the path's level.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Found {
    /// At this position in the level's direction.
    At(usize),
    /// Beside the child read last, on the side the level's direction has already passed:
    /// the scan runs the other way.
    Turn,
    /// Read right after the level was entered, where its position is not looked up until
    /// needed ([`Level::pending`]).
    Pending,
}

/// What read-ahead reads and writes at each of SQLite's reads and lock changes while
/// asleep (the sampling pace, the burst and its record, the header bytes page 1 is
/// compared with), kept apart from the paths and batches it uses awake: on cached data a
/// short transaction's every read passes through here, and each cache line it touches
/// is one more a new process may have to fetch from memory. The counters and flags share
/// the first line with the record's first offsets; a short transaction's record ends in
/// the second.
#[repr(C, align(64))]
struct Watch {
    /// The header bytes `geometry` was read from ([`header_geometry_word`]): page 1 read
    /// again with the same bytes there cannot change it, and asleep it is not parsed again
    /// (SQLite reads page 1 at the start of most transactions).
    header_word: u64,
    /// The length of a whole-page read of the current geometry: what a read must be to be
    /// recorded (`u32::MAX`, which no read is, until the geometry is known). Kept beside
    /// the geometry so recording a read is a comparison and a store.
    whole_page_read_bytes: u32,
    /// Reads of the burst still to come since the paths were forgotten.
    burst_reads: u32,
    /// Offsets kept in `burst_offsets`.
    burst_len: u32,
    /// Reads to let pass unsampled before the next sampled one.
    reads_until_sample: u32,
    /// The stretch from one sampled read to the next: [`READS_PER_SAMPLE`], doubled up to
    /// [`MAX_READS_PER_SAMPLE`] while asleep samples keep finding their pages cached.
    reads_per_sample: u32,
    /// Samples taken asleep since the stretch last changed (each found its page cached:
    /// one that did not woke read-ahead, which resets the stretch).
    cached_samples: u32,
    /// Bursts granted since a read last went to the device, and the lock changes still to
    /// pass before the next burst (0 after a read went to the device). After
    /// [`QUIET_BURSTS_BEFORE_BACKOFF`] bursts the distance from one burst to the next
    /// doubles with each burst up to [`MAX_FORGETS_BETWEEN_BURSTS`], so a long run of
    /// transactions of cached data (point lookups, each its own transaction) stops paying
    /// a probe or a timed read per transaction.
    quiet_bursts: u32,
    forgets_until_burst: u32,
    /// Following the file's reads. A file whose reads can be told cached or not as SQLite
    /// makes them ([`ReadAhead::dormant`]) starts asleep and wakes at its first read the
    /// kernel did not have cached ([`ReadAhead::note_uncached_read`]); it falls asleep
    /// again when its cache checks keep finding the pages cached. Asleep, a read costs
    /// nothing but the check of this flag.
    awake: bool,
    /// Nothing was learnt since the paths were last forgotten: no read reached
    /// [`ReadAhead::after_read`] awake, the only place paths, rows, chains and outstanding
    /// counts change. Forgetting again is then the burst's bookkeeping alone: a transaction
    /// of a file whose read-ahead sleeps, or one that read nothing (a WAL-mode read
    /// served from the WAL or from SQLite's cache), takes and drops its locks for free.
    forgotten: bool,
    /// The read being made is one of the burst ([`Sample::Record`]): awake, it is
    /// followed at the replay before the transaction's next read, not now.
    in_burst: bool,
    /// The offsets of the whole pages SQLite read during the burst, in order,
    /// replayed at a wake (`replay_burst`); emptied at every lock change and geometry
    /// change.
    burst_offsets: [u64; BURST_PAGES],
}

const _: () = assert!(std::mem::offset_of!(Watch, burst_offsets) + 8 <= 64);

/// The read-ahead state of one open main database.
pub(crate) struct ReadAhead {
    /// What a read and a lock change touch asleep, packed (`Watch`).
    watch: Watch,
    geometry: Option<Geometry>,
    /// `levels[..depth]` is the path, root first; deeper entries keep their allocations.
    levels: Vec<Level>,
    depth: usize,
    /// The path before the last new descent, kept as it was: SQLite alternates between two
    /// trees when it scans an index and looks each row up in its table, and each path
    /// resumes where it was when SQLite comes back to it (`parked[..parked_depth]`).
    parked: Vec<Level>,
    parked_depth: usize,
    /// Row read-ahead of an index scan (`rows.rs`).
    rows: Rows,
    /// The batch being built (capacity: the largest window).
    batch: Vec<u32>,
    /// One page, for reading a sibling from the cache (or a recorded page, in a replay).
    peek_page: Vec<u8>,
    /// Bytes this file has asked for and not yet read (its share of the process total).
    outstanding_bytes: u64,
    /// Pages in the file when last asked (`PageSource::page_count`, one `fstat`): when a
    /// scan, an overflow chain or row read-ahead first needs it after the paths were
    /// forgotten (another connection may have made the file smaller or larger) or the
    /// page size changed ([`ReadAhead::known_page_count`]), and again where a child lies
    /// past it; 0 until then. A point lookup's descent never asks.
    page_count: u32,
    /// The last whole page SQLite read and the page its first 4 bytes name: the next page
    /// of its overflow chain, if it is an overflow page.
    chain_candidate: Option<(u32, u32)>,
    /// SQLite is reading an overflow chain: the last page it read, and whether the chain
    /// has run through consecutive pages so far.
    chain: Option<(u32, bool)>,
    /// Overflow pages asked for ahead of the chain: through this page number, and how
    /// many of them SQLite has not read yet.
    chain_asked_through: u32,
    chain_outstanding: usize,
    /// Whole-page reads to let pass before the next cache check, after a check found the
    /// pages cached, and the current length of that wait (doubling up to
    /// [`MAX_HOT_BACKOFF_READS`], reset by a check that finds them uncached).
    hot_wait_reads: u32,
    hot_backoff_reads: u32,
    /// Consecutive cache checks that found their page cached.
    cached_checks_in_row: u32,
    /// The read before this one pushed the deepest level of the path.
    deepest_just_entered: bool,
    /// Made by [`ReadAhead::dormant`]: SQLite's reads wake it, so it may sleep.
    wakes_on_misses: bool,
    /// Woken since the last read followed: the next read may be a child of the path past
    /// the next one (`locate`).
    just_woke: bool,
    /// Whole-page reads since the last sign of a read reaching the device (a sampled read
    /// the page cache did not have, or a cache check that found a page uncached).
    reads_since_uncached: u32,
}

impl Default for ReadAhead {
    fn default() -> Self {
        ReadAhead::new()
    }
}

/// Bytes 16..24 of the database header as one word: the page size, the file format
/// versions, the reserved bytes and the payload fractions, every byte
/// [`Geometry::from_header`] reads but the magic. 0 for a read shorter than that, as for
/// eight zero bytes: [`Geometry::from_header`] refuses both.
#[inline]
fn header_geometry_word(header: &[u8]) -> u64 {
    header
        .get(16..24)
        .and_then(|bytes| <[u8; 8]>::try_from(bytes).ok())
        .map_or(0, u64::from_ne_bytes)
}

/// The window limit for pages of `page_size_bytes`.
pub(crate) fn max_window_pages(page_size_bytes: u32) -> usize {
    (MAX_WINDOW_BYTES / page_size_bytes.max(1) as usize).clamp(2, MAX_WINDOW_PAGES)
}

impl ReadAhead {
    /// Read-ahead for a file whose reads tell whether the kernel had their pages cached:
    /// asleep until the first that did not.
    pub(crate) fn dormant() -> ReadAhead {
        let mut readahead = ReadAhead::new();
        readahead.watch.awake = false;
        readahead.wakes_on_misses = true;
        readahead
    }

    /// Whether SQLite's read about to be made should be sampled: one in
    /// [`READS_PER_SAMPLE`], the first included (asleep, one in 16, 32, … up to
    /// [`MAX_READS_PER_SAMPLE`] after each [`CACHED_SAMPLES_BEFORE_STRETCH`] samples that
    /// found their pages cached, until the next lock change or device read; a statement
    /// that turns from cached to cold data mid-way wakes read-ahead within that many
    /// reads); and, asleep, whether its offset should be recorded: each of the first
    /// [`READS_RECORDED_AFTER_FORGET`] after the paths were forgotten (a lock change: a
    /// transaction starts) when a burst is due. A query's first reads are its descents,
    /// the root and interior pages SQLite then keeps in its own cache: a wake replays
    /// them, or read-ahead could not follow the query (nor map an index scan's rows). A
    /// burst is due at every lock change at first and after any read that went to the
    /// device; after [`QUIET_BURSTS_BEFORE_BACKOFF`] bursts that saw no wake, at one lock
    /// change in 2, 4, … up to [`MAX_FORGETS_BETWEEN_BURSTS`]: after a long run of cached
    /// transactions, a query on cold data may wake read-ahead a few reads into its scan
    /// with nothing recorded, and it then follows the scan from its next interior page.
    #[inline]
    pub(crate) fn sample_this_read(&mut self) -> Sample {
        if self.watch.burst_reads > 0 {
            self.watch.burst_reads -= 1;
            self.watch.in_burst = true;
            return Sample::Record;
        }
        self.watch.in_burst = false;
        if self.watch.reads_until_sample > 0 {
            self.watch.reads_until_sample -= 1;
            return Sample::No;
        }
        self.sample_due()
    }

    /// After SQLite's read of `len_bytes` at `offset` that [`Sample::Record`] named: keeps
    /// its offset, if it was a whole page. A later wake in the same transaction replays
    /// the kept pages ([`ReadAhead::after_read`]), checking the offsets then: on cached
    /// data the burst is a short transaction's every read, so recording one is a
    /// comparison and a store.
    #[inline]
    pub(crate) fn record_burst_read(&mut self, offset: u64, len_bytes: usize) {
        let watch = &mut self.watch;
        if len_bytes == watch.whole_page_read_bytes as usize
            && (watch.burst_len as usize) < BURST_PAGES
        {
            watch.burst_offsets[watch.burst_len as usize] = offset;
            watch.burst_len += 1;
        }
    }

    /// `sample_this_read` when the stretch between samples has run out: this read is
    /// sampled, and the next stretch set.
    #[inline(never)]
    fn sample_due(&mut self) -> Sample {
        if !self.watch.awake {
            self.watch.cached_samples += 1;
            if self.watch.cached_samples == CACHED_SAMPLES_BEFORE_STRETCH
                && self.watch.reads_per_sample < MAX_READS_PER_SAMPLE
            {
                self.watch.reads_per_sample *= 2;
                self.watch.cached_samples = 0;
            }
        }
        assert!((READS_PER_SAMPLE..=MAX_READS_PER_SAMPLE).contains(&self.watch.reads_per_sample));
        self.watch.reads_until_sample = self.watch.reads_per_sample - 1;
        Sample::Spread
    }

    /// Samples one read in [`READS_PER_SAMPLE`] again (a lock change, a device read).
    #[inline]
    fn sample_closely(&mut self) {
        self.watch.reads_per_sample = READS_PER_SAMPLE;
        self.watch.cached_samples = 0;
        self.watch.reads_until_sample = self.watch.reads_until_sample.min(READS_PER_SAMPLE - 1);
    }

    /// SQLite's read just now found its page uncached (it went to the device): wake up.
    pub(crate) fn note_uncached_read(&mut self) {
        self.sample_closely();
        // A sampled read is none of the burst's; nor is one that did not ask
        // `sample_this_read` (a read through the ring or the O_DIRECT side), which is
        // followed at once.
        self.watch.in_burst = false;
        self.reads_since_uncached = 0;
        self.watch.quiet_bursts = 0;
        self.watch.forgets_until_burst = 0;
        if !self.watch.awake {
            self.watch.awake = true;
            self.just_woke = true;
            self.note_uncached();
        }
    }

    /// The database's page size, once page 1 was read.
    pub(crate) fn page_size_bytes(&self) -> Option<u32> {
        self.geometry.map(|geometry| geometry.page_size_bytes)
    }

    /// Whether it follows the file's reads now (not asleep).
    #[cfg(test)]
    pub(crate) fn is_awake(&self) -> bool {
        self.watch.awake
    }

    pub(crate) fn new() -> ReadAhead {
        ReadAhead {
            watch: Watch {
                header_word: 0,
                whole_page_read_bytes: u32::MAX,
                burst_reads: 0,
                burst_len: 0,
                reads_until_sample: 0,
                reads_per_sample: READS_PER_SAMPLE,
                cached_samples: 0,
                quiet_bursts: 0,
                forgets_until_burst: 0,
                awake: true,
                forgotten: false,
                in_burst: false,
                burst_offsets: [0; BURST_PAGES],
            },
            geometry: None,
            levels: Vec::new(),
            depth: 0,
            parked: Vec::new(),
            parked_depth: 0,
            rows: Rows::new(),
            batch: Vec::new(),
            peek_page: Vec::new(),
            outstanding_bytes: 0,
            page_count: 0,
            chain_candidate: None,
            chain: None,
            chain_asked_through: 0,
            chain_outstanding: 0,
            hot_wait_reads: 0,
            hot_backoff_reads: 0,
            cached_checks_in_row: 0,
            deepest_just_entered: false,
            wakes_on_misses: false,
            just_woke: false,
            reads_since_uncached: 0,
        }
    }

    /// Forgets the paths and the page count: called where another connection may have
    /// changed the file (lock changes), so no stale child list drives a batch and no page
    /// past the file's new end passes for one inside it; and arms the burst when one is
    /// due. Asleep with nothing learnt since the last lock change (the usual case on
    /// cached data) it touches nothing but the first line of [`Watch`]. One copy, out of
    /// line: the database lock, its release and the WAL read mark all call it, and a new
    /// process's short transaction would fetch each inlined copy's code from memory.
    ///
    /// A burst that has not begun (no read since it was armed at an earlier lock change)
    /// stands for this lock change too, uncounted: a WAL-mode read transaction takes and
    /// drops both the database's lock and a read mark, and one that reads nothing (all
    /// of it in SQLite's own cache) is no quiet burst.
    #[inline(never)]
    pub(crate) fn forget(&mut self) {
        self.sample_closely();
        let watch = &mut self.watch;
        watch.burst_len = 0;
        if watch.awake {
            // Awake, the data was cold a moment ago: the transaction's first reads are
            // followed only if it makes more (`READS_DEFERRED_AWAKE`); asleep again, a
            // burst at every lock change until bursts find it cached (`note_uncached_read`
            // cleared the count).
            watch.burst_reads = READS_DEFERRED_AWAKE;
        } else if watch.forgotten && watch.burst_reads == READS_RECORDED_AFTER_FORGET {
            return;
        } else if watch.forgets_until_burst == 0 {
            // The bursts before this one found their reads cached (one that did not woke
            // read-ahead, which resets the count).
            watch.burst_reads = READS_RECORDED_AFTER_FORGET;
            watch.quiet_bursts = watch.quiet_bursts.saturating_add(1);
            let doublings = watch
                .quiet_bursts
                .saturating_sub(QUIET_BURSTS_BEFORE_BACKOFF)
                .min(MAX_FORGETS_BETWEEN_BURSTS.ilog2());
            watch.forgets_until_burst = (1 << doublings) - 1;
        } else {
            watch.burst_reads = 0;
            watch.forgets_until_burst -= 1;
        }
        if self.watch.forgotten {
            debug_assert!(
                self.depth == 0
                    && self.parked_depth == 0
                    && self.chain_candidate.is_none()
                    && self.chain.is_none()
                    && self.outstanding_bytes == 0
                    && self.page_count == 0,
                "a forgotten state that learnt something"
            );
        } else {
            self.forget_paths();
        }
    }

    /// `forget` of what was learnt since the last lock change.
    #[cold]
    fn forget_paths(&mut self) {
        self.depth = 0;
        self.parked_depth = 0;
        self.page_count = 0;
        self.rows.forget();
        self.chain_candidate = None;
        self.end_chain();
        self.sync_outstanding();
        assert_eq!(self.outstanding_bytes, 0, "forgotten pages still counted");
        self.watch.forgotten = true;
    }

    /// Whether [`ReadAhead::after_read`] can do anything with `data`, read at `offset`:
    /// follow the page while awake, or learn the geometry from page 1 when its header
    /// bytes differ from those it was learnt from. Inline, so an asleep file's read skips
    /// building the call's arguments.
    #[inline]
    pub(crate) fn follows_read_at(&self, offset: u64, data: &[u8]) -> bool {
        if self.watch.awake && !self.watch.in_burst {
            offset == 0 || self.geometry.is_some()
        } else {
            offset == 0 && header_geometry_word(data) != self.watch.header_word
        }
    }

    /// After SQLite read `data` at `offset` of the database (a successful, whole read):
    /// learns from it, and asks `source` for the pages a scan will read next.
    pub(crate) fn after_read(&mut self, data: &[u8], offset: u64, source: &mut impl PageSource) {
        if offset == 0 {
            if let Some(geometry) = Geometry::from_header(data) {
                self.set_geometry(geometry);
                self.watch.header_word = header_geometry_word(data);
            }
        }
        let Some(geometry) = self.geometry else {
            return;
        };
        if !self.watch.awake || self.watch.in_burst {
            // Asleep, or a read of the burst: recorded, followed at a replay if any.
            return;
        }
        if self.watch.burst_len > 0 {
            self.replay_burst(geometry, source);
            if !self.watch.awake {
                return;
            }
        }
        self.follow(data, offset, geometry, source, false);
    }

    /// Just woken in a transaction whose first reads it slept through, or awake in one that
    /// read past the reads it defers ([`READS_DEFERRED_AWAKE`]): follows the whole pages
    /// the burst recorded, read again from the page cache (SQLite read them a moment ago;
    /// one that is gone is skipped), as SQLite read them, so the descents they made and
    /// the children read since are known before the read being followed: its scan is
    /// seen at once, and an index scan's table path, whose interior pages SQLite reads
    /// once and then keeps, is learnt. Nothing is asked for while replaying: what comes
    /// after those pages was read already, cached, and a batch of it would only teach the
    /// cache checks that the scan's data is cached.
    #[cold]
    fn replay_burst(&mut self, geometry: Geometry, source: &mut impl PageSource) {
        let recorded = self.watch.burst_offsets;
        let count = std::mem::take(&mut self.watch.burst_len) as usize;
        let page_bytes = geometry.page_size_bytes as usize;
        // The sibling page's buffer is free: a replay asks for nothing, so it never reaches
        // into a next sibling (`reach_into_next_sibling`, `top_up`'s), its only user.
        let mut page = std::mem::take(&mut self.peek_page);
        assert_eq!(
            page.len(),
            page_bytes,
            "the page buffer follows the geometry"
        );
        for &offset in &recorded[..count] {
            if !self.watch.awake {
                break;
            }
            let Some(page_number) = geometry.whole_page_at(offset, page_bytes) else {
                continue;
            };
            if source.read_if_cached(page_number, &mut page) {
                self.follow(&page, offset, geometry, source, true);
            }
        }
        self.peek_page = page;
    }

    /// `after_read` of a read made awake: follows it and, unless `replaying` an earlier
    /// read (`replay_burst`), asks for what comes next.
    fn follow(
        &mut self,
        data: &[u8],
        offset: u64,
        geometry: Geometry,
        source: &mut impl PageSource,
        replaying: bool,
    ) {
        // Awake, the read may change what `forget` clears. (`set_geometry` above leaves
        // the state as a forget does.)
        self.watch.forgotten = false;
        self.reads_since_uncached += 1;
        if self.wakes_on_misses && self.reads_since_uncached > READS_TO_SLEEP {
            // Nothing it asked about, and no read it sampled, went to the device for a
            // while: the data is cached (or being read by a scan read-ahead keeps ahead
            // of, whose batches would have found uncached pages).
            self.fall_asleep();
            return;
        }
        let Some(page_number) = geometry.whole_page_at(offset, data.len()) else {
            return;
        };
        self.batch.clear();
        self.hot_wait_reads = self.hot_wait_reads.saturating_sub(1);
        if !replaying {
            self.follow_overflow_chain(data, page_number, geometry, source);
        }
        // Checked once per read: `None` for a leaf or a page whose header is malformed.
        let view = btree_page::interior_view(data, page_number, geometry);
        let kind = btree_page::kind_hint(data, page_number);
        let located = self.locate(page_number, view.is_some(), kind);
        self.deepest_just_entered = false;
        match located {
            Some((level, found)) => {
                self.note_child_read(level, found);
                self.depth = level + 1;
                // An index leaf names rows only if some table path can map them (not during
                // a scan of a `WITHOUT ROWID` table, whose leaves are index leaves too).
                if kind == Some(PageKind::IndexLeaf)
                    && !table_path(
                        &self.levels[..self.depth],
                        &self.parked[..self.parked_depth],
                    )
                    .is_empty()
                {
                    self.rows.enter_index_leaf(data, page_number, level);
                }
                self.push_if_interior(view, data, page_number, geometry);
                // While row read-ahead feeds an index scan its table's leaves, SQLite's
                // lookups are not a scan of the table, whatever two in a row look like.
                let rows_table = self.rows.verified() && is_table_path(&self.levels[..self.depth]);
                if !rows_table && !replaying {
                    // The deepest scanning level first: its pages are the ones read next.
                    for level in (0..self.depth).rev() {
                        self.top_up(level, geometry, source);
                    }
                }
            }
            None => {
                // On neither path: a new descent starts here (or a leaf of a tree whose
                // interior pages SQLite already had, which read-ahead cannot follow). The
                // path it leaves is parked.
                if view.is_some() {
                    if self.depth > 0 {
                        self.swap_paths();
                    }
                    self.depth = 0;
                    self.push_if_interior(view, data, page_number, geometry);
                }
            }
        }
        match kind {
            Some(PageKind::TableLeaf) if self.rows.is_tracking() => {
                let page_count = self.known_page_count(geometry, source);
                let table = table_path(
                    &self.levels[..self.depth],
                    &self.parked[..self.parked_depth],
                );
                self.rows
                    .note_table_leaf(page_number, table, geometry, page_count, source);
            }
            Some(PageKind::TableInterior) => self.rows.note_table_interior(),
            _ => {}
        }
        if !replaying {
            self.top_up_rows(geometry, source);
            self.just_woke = false;
        }
        if !self.batch.is_empty() {
            source.prefetch(&self.batch, geometry.page_size_bytes);
        }
        self.sync_outstanding();
    }

    fn set_geometry(&mut self, geometry: Geometry) {
        if self.geometry == Some(geometry) {
            return;
        }
        self.geometry = Some(geometry);
        self.watch.whole_page_read_bytes = geometry.page_size_bytes;
        // Offsets recorded in pages of the old size.
        self.watch.burst_len = 0;
        self.depth = 0;
        self.parked_depth = 0;
        // Counted in pages of the old size.
        self.page_count = 0;
        // Child lists sized for the old page size are dropped, not grown per read.
        self.levels.clear();
        self.parked.clear();
        self.rows = Rows::new();
        let window = max_window_pages(geometry.page_size_bytes);
        self.batch = Vec::with_capacity(window + 1);
        self.peek_page = vec![0u8; geometry.page_size_bytes as usize];
    }

    /// Overflow chains: every page of a chain names the next in its first 4 bytes, so a
    /// chain is known only one page ahead. When SQLite reads the page the previous page
    /// named, it is reading a chain: the page this one names is asked for at once and,
    /// while the chain has run through consecutive pages, the next window of consecutive
    /// pages too (a guess, bounded by the window, that the chain goes on the same way).
    /// A chain that loops or names pages outside the file is simply not followed further:
    /// SQLite reports the corruption.
    fn follow_overflow_chain(
        &mut self,
        data: &[u8],
        page_number: u32,
        geometry: Geometry,
        source: &mut impl PageSource,
    ) {
        let in_chain = matches!(self.chain_candidate, Some((_, next)) if next == page_number);
        let contiguous = match (self.chain_candidate, self.chain) {
            (Some((previous, _)), Some((last, contiguous))) if in_chain && last == previous => {
                contiguous && page_number == previous.wrapping_add(1)
            }
            (Some((previous, _)), _) if in_chain => page_number == previous.wrapping_add(1),
            _ => false,
        };
        // Any page number may be the next: checked against the file once the chain is
        // followed (the count costs an fstat, which a read that is no overflow page must
        // not pay).
        let next = btree_page::overflow_next(data, page_number, u32::MAX).unwrap_or(0);
        self.chain_candidate = (next != 0).then_some((page_number, next));
        if !in_chain {
            self.end_chain();
            return;
        }
        if self.chain.is_none() {
            // A new chain: nothing of it was asked for yet.
            self.chain_asked_through = 0;
            self.chain_outstanding = 0;
        } else if page_number <= self.chain_asked_through {
            self.chain_outstanding = self.chain_outstanding.saturating_sub(1);
        }
        self.chain = Some((page_number, contiguous));
        if next == 0 {
            return;
        }
        let max_window = max_window_pages(geometry.page_size_bytes);
        let wanted = if contiguous && next == page_number.wrapping_add(1) {
            max_window.min(FIRST_WINDOW_PAGES * 2) as u32
        } else {
            1
        };
        // A next page past the end of the file leaves `last` below `first`: nothing asked.
        let last = next
            .saturating_add(wanted - 1)
            .min(self.known_page_count(geometry, source));
        let first = if contiguous && self.chain_asked_through >= next {
            self.chain_asked_through.saturating_add(1)
        } else {
            next
        };
        if first > last
            || self.hot_wait_reads > 0
            || self.outstanding_pages() + self.batch.len() >= max_window
        {
            return;
        }
        let budget = self.process_budget_pages(geometry) as u32;
        if budget == 0 {
            return;
        }
        if source.is_cached(first, geometry.page_size_bytes) == Some(true) {
            self.note_cached();
            return;
        }
        self.note_uncached();
        let last = last.min(first.saturating_add(budget - 1));
        for page in first..=last {
            self.batch.push(page);
        }
        self.chain_outstanding += (last - first + 1) as usize;
        self.chain_asked_through = last;
    }

    /// Pages in the file: the count asked for since the paths were last forgotten, or
    /// asked for now (one `fstat`).
    fn known_page_count(&mut self, geometry: Geometry, source: &mut impl PageSource) -> u32 {
        if self.page_count == 0 {
            self.page_count = source.page_count(geometry.page_size_bytes);
        }
        self.page_count
    }

    /// SQLite left the chain it was reading (or the file's state is forgotten).
    fn end_chain(&mut self) {
        self.chain = None;
        self.chain_asked_through = 0;
        self.chain_outstanding = 0;
    }

    /// Where `page_number` is on the paths: the level that has it as a child, and where.
    /// The followed path is asked first, then the parked one, which becomes the followed
    /// path if it has the page ([`find`]). An interior page found on neither is
    /// looked for among all the children of both (a re-descent from a level, such as a row
    /// lookup that needs another interior page below the table's root): the path is then
    /// cut below that level. An index leaf is looked for among the children of both
    /// deepest levels. Anything else starts a new path.
    fn locate(
        &mut self,
        page_number: u32,
        interior: bool,
        kind: Option<PageKind>,
    ) -> Option<(usize, Found)> {
        let just_entered = self.deepest_just_entered;
        let found = self.on_either_path(|path, followed| {
            find(path, followed && just_entered, page_number, kind)
        });
        if let Some((depth, Found::Pending)) = found {
            // Taken for the deepest level's child unsearched: unless it is what the parked
            // path reads next (SQLite back on the tree it left, where it had the new
            // level's child cached).
            if let Some(parked) = next_or_behind(&self.parked[..self.parked_depth], page_number) {
                self.levels[depth].pending = None;
                self.swap_paths();
                return Some(parked);
            }
        }
        if found.is_some() {
            return found;
        }
        if interior {
            return self.on_either_path(|path, _| {
                path.iter().enumerate().rev().find_map(|(depth, level)| {
                    Some((depth, Found::At(level.position_of(page_number)?)))
                })
            });
        }
        if kind == Some(PageKind::IndexLeaf)
            || (self.just_woke && kind == Some(PageKind::TableLeaf))
        {
            // Read-ahead slept while SQLite went on (or SQLite jumped), and row read-ahead
            // needs the index leaves it reads: the deepest levels are searched whole.
            // Linear in their child counts; index leaves are a small part of an index
            // scan's reads. So is the read that woke read-ahead: SQLite went on along the
            // path a replay (`replay_burst`) or the time before sleeping left, past the
            // last child it knows of.
            return self.on_either_path(|path, _| {
                let deepest = path.len().checked_sub(1)?;
                Some((deepest, Found::At(path[deepest].position_of(page_number)?)))
            });
        }
        None
    }

    /// `search` over the followed path (`true`), then over the parked one, which becomes
    /// the followed path if it has the answer.
    fn on_either_path(
        &mut self,
        search: impl Fn(&mut [Level], bool) -> Option<(usize, Found)>,
    ) -> Option<(usize, Found)> {
        if let Some(found) = search(&mut self.levels[..self.depth], true) {
            return Some(found);
        }
        let found = search(&mut self.parked[..self.parked_depth], false)?;
        self.swap_paths();
        Some(found)
    }

    /// The parked path becomes the followed one, and the other way round.
    fn swap_paths(&mut self) {
        std::mem::swap(&mut self.levels, &mut self.parked);
        std::mem::swap(&mut self.depth, &mut self.parked_depth);
    }

    fn note_child_read(&mut self, depth: usize, found: Found) {
        if found != Found::Pending {
            self.levels[depth].note_read(found);
        }
    }

    /// If `data` (page `page_number`) is an interior page with a well-formed header (`view`,
    /// from `btree_page::interior_view`), puts it at the end of the path, its cells unparsed
    /// ([`Level::unparsed`]).
    fn push_if_interior(
        &mut self,
        view: Option<InteriorView>,
        data: &[u8],
        page_number: u32,
        geometry: Geometry,
    ) {
        if self.depth >= MAX_DEPTH {
            return;
        }
        let Some(view) = view else {
            return;
        };
        if self.levels.len() == self.depth {
            self.levels.push(Level::new(geometry));
        }
        let parent_scanning = self.depth > 0 && self.levels[self.depth - 1].scanning();
        let peeked = match self.depth {
            0 => None,
            depth => self.levels[depth - 1].peeked.take(page_number),
        };
        let inherited_window = if parent_scanning {
            // The window the scan had reached: its parent's, or this depth's previous page
            // (the sibling the scan just left), whichever grew more.
            self.levels[self.depth - 1]
                .window_pages
                .max(self.levels[self.depth].window_pages)
        } else {
            FIRST_WINDOW_PAGES
        };
        // A subtree is scanned the way its parent is.
        let backward = self.depth > 0 && self.levels[self.depth - 1].backward;
        let level = &mut self.levels[self.depth];
        assert_eq!(
            data.len(),
            level.page.capacity(),
            "a page with a valid header is one page long"
        );
        level.page.clear();
        level.page.extend_from_slice(data);
        level.unparsed = Some(view);
        level.malformed = false;
        level.children.clear();
        level.page_number = page_number;
        level.backward = backward;
        level.last_read = None;
        level.pending = None;
        level.streak = 0;
        level.inherited_scan = parent_scanning;
        level.issued_until = peeked.map_or(0, |n| n.min(level.child_count()));
        level.window_pages = inherited_window;
        level.peeked.clear();
        self.depth += 1;
        self.deepest_just_entered = true;
    }

    /// Parses and checks level `depth`'s whole page before any of its children is asked
    /// for; false when the page is refused (the level is then never scanned).
    fn parse_level(
        &mut self,
        depth: usize,
        geometry: Geometry,
        source: &mut impl PageSource,
    ) -> bool {
        let level = &self.levels[depth];
        if level.unparsed.is_none() || level.malformed {
            return !level.malformed;
        }
        // The count read last ([`ReadAhead::known_page_count`]); read again (one fstat) only
        // when a child lies past it.
        let page_count = self.known_page_count(geometry, source);
        let level = &mut self.levels[depth];
        let mut parsed = btree_page::interior_children(
            &level.page,
            level.page_number,
            geometry,
            page_count,
            &mut level.children,
        );
        if matches!(
            parsed,
            Err(btree_page::Malformed::ChildPage | btree_page::Malformed::PageNumber)
        ) {
            // The file may have grown since the count was read (another writer).
            self.page_count = source.page_count(geometry.page_size_bytes);
            parsed = btree_page::interior_children(
                &level.page,
                level.page_number,
                geometry,
                self.page_count,
                &mut level.children,
            );
        }
        let interior = matches!(
            parsed,
            Ok(PageKind::TableInterior | PageKind::IndexInterior)
        );
        if interior {
            // The same bytes the header check passed: as many children.
            assert_eq!(
                Some(level.children.len()),
                level.unparsed.map(InteriorView::child_count)
            );
            level.unparsed = None;
        } else {
            level.malformed = true;
        }
        interior
    }

    /// Adds to the batch what level `depth`'s scan needs to keep its window full.
    fn top_up(&mut self, depth: usize, geometry: Geometry, source: &mut impl PageSource) {
        let max_window = max_window_pages(geometry.page_size_bytes);
        let room = max_window.saturating_sub(self.outstanding_pages() + self.batch.len());
        if !self.levels[depth].scanning() || room == 0 || !self.parse_level(depth, geometry, source)
        {
            return;
        }
        let level = &self.levels[depth];
        let next = level.last_read.map_or(0, |i| i + 1);
        let ahead = level.outstanding();
        let mut window = level.window_pages.min(max_window);
        if self.rows.verified() && depth == self.rows.index_depth {
            // An index leaf names a page's worth of rows: the window is theirs.
            window = window.min(ROWS_INDEX_WINDOW_PAGES);
        }
        // Refill in batches: when half the window has been read.
        if ahead > window / 2 {
            return;
        }
        let until = (next + window).min(level.children.len());
        let from = level.issued_until.max(next);
        if self.hot_wait_reads > 0 {
            return;
        }
        let budget = self.process_budget_pages(geometry).min(room);
        if from < until && budget > 0 {
            let level = &self.levels[depth];
            let children = (from..until).map(|position| level.parsed_child(position));
            if leading_cached(source, children, geometry.page_size_bytes)
                == (until - from).min(BATCH_CACHE_CHECKS)
            {
                self.note_cached();
                return;
            }
            self.note_uncached();
            let until = until.min(from + budget);
            let level = &mut self.levels[depth];
            for position in from..until {
                let child = level.parsed_child(position);
                if !self.batch.contains(&child) {
                    self.batch.push(child);
                }
            }
            level.issued_until = until;
            level.window_pages = (level.window_pages * 2).min(max_window);
        }
        // The end of this level is inside the window: the next sibling, and its first
        // children once the kernel has it.
        let level = &self.levels[depth];
        if depth > 0 && !self.levels[depth - 1].scanning() {
            // The parent has shown no direction yet: its next child is the one on the side
            // this level's scan runs to.
            let backward = level.backward;
            self.levels[depth - 1].face(backward);
        }
        let level = &self.levels[depth];
        if depth > 0
            && level.issued_until == level.children.len()
            && self.hot_backoff_reads == 0
            && !self.levels[depth - 1].peeked.is_full()
        {
            let room_left = window
                .min(max_window)
                .saturating_sub(self.outstanding_pages() + self.batch.len());
            self.reach_into_next_sibling(depth, room_left, geometry, source);
        }
    }

    /// Level `depth`'s window reaches its last child: the parent's next children (interior
    /// pages like this level's, up to [`MAX_PEEKED_SIBLINGS`] ahead) are asked for and,
    /// once the kernel has them, read from the cache so their first children share the
    /// `room` left in the window.
    fn reach_into_next_sibling(
        &mut self,
        depth: usize,
        mut room: usize,
        geometry: Geometry,
        source: &mut impl PageSource,
    ) {
        self.levels[depth - 1].resolve_pending();
        let Some(last) = self.levels[depth - 1].last_read else {
            return;
        };
        if !self.parse_level(depth - 1, geometry, source) {
            return;
        }
        for index in last + 1..=last + MAX_PEEKED_SIBLINGS {
            let parent = &self.levels[depth - 1];
            if index >= parent.child_count() {
                return;
            }
            let sibling = parent.parsed_child(index);
            if parent.peeked.contains(sibling) {
                continue;
            }
            let max_window = max_window_pages(geometry.page_size_bytes);
            room = room.min(max_window.saturating_sub(self.outstanding_pages() + self.batch.len()));
            if room == 0 {
                return;
            }
            let parent = &self.levels[depth - 1];
            if parent.issued_until <= index {
                self.levels[depth - 1].issued_until = index + 1;
                if source.is_cached(sibling, geometry.page_size_bytes) != Some(true) {
                    // Its children can be found only once it has arrived.
                    if self.batch.len() < self.batch.capacity() && !self.batch.contains(&sibling) {
                        self.batch.push(sibling);
                    }
                    return;
                }
            }
            let max_window = max_window_pages(geometry.page_size_bytes);
            room = room.min(max_window.saturating_sub(self.outstanding_pages() + self.batch.len()));
            if room < PEEKED_CHILDREN_MIN
                || self.levels[depth - 1].peeked.is_full()
                || !source.read_if_cached(sibling, &mut self.peek_page)
            {
                return;
            }
            // Parsed into the deepest unused level's list: no allocation.
            if self.levels.len() == self.depth {
                self.levels.push(Level::new(geometry));
            }
            let page_count = self.known_page_count(geometry, source);
            let spare = &mut self.levels[self.depth].children;
            let parsed = btree_page::interior_children(
                &self.peek_page,
                sibling,
                geometry,
                page_count,
                spare,
            );
            if !matches!(
                parsed,
                Ok(PageKind::TableInterior | PageKind::IndexInterior)
            ) || self.levels[self.depth].children.is_empty()
            {
                return;
            }
            // The sibling will be scanned the way its parent is (`push_if_interior`).
            let backward = self.levels[depth - 1].backward;
            let spare = &mut self.levels[self.depth];
            spare.unparsed = None;
            spare.malformed = false;
            spare.backward = backward;
            let first = spare.parsed_child(0);
            if source.is_cached(first, geometry.page_size_bytes) == Some(true) {
                self.note_cached();
                return;
            }
            let count = room
                .min(self.batch.capacity() - self.batch.len())
                .min(self.process_budget_pages(geometry))
                .min(self.levels[self.depth].children.len());
            for position in 0..count {
                let child = self.levels[self.depth].parsed_child(position);
                if !self.batch.contains(&child) {
                    self.batch.push(child);
                }
            }
            self.levels[depth - 1].peeked.push(sibling, count);
            room -= count;
        }
    }

    /// Adds to the batch the table leaves an index scan will read next, once row
    /// read-ahead's predictions have matched SQLite's reads (`rows.rs`). Leading predicted
    /// leaves the kernel has are passed over; a batch whose first [`BATCH_CACHE_CHECKS`]
    /// are all cached is one cache check that found its page cached.
    fn top_up_rows(&mut self, geometry: Geometry, source: &mut impl PageSource) {
        // Pages the paths' scans ask for in this batch are not asked for again.
        self.rows.note_asked(&self.batch);
        if !self.rows.verified() || self.hot_wait_reads > 0 {
            return;
        }
        let max_window = max_window_pages(geometry.page_size_bytes);
        let room = max_window.saturating_sub(self.outstanding_pages() + self.batch.len());
        let most = self.process_budget_pages(geometry).min(room);
        if most == 0 {
            return;
        }
        let page_count = self.known_page_count(geometry, source);
        let table = table_path(
            &self.levels[..self.depth],
            &self.parked[..self.parked_depth],
        );
        let next_index_leaf = self.next_index_leaf();
        let start = self.batch.len();
        let issued_before = self.rows.next_batch(
            max_window,
            most,
            next_index_leaf,
            table,
            geometry,
            page_count,
            source,
            &mut self.batch,
        );
        // Rows share leaves, and some were read before the scan's were tracked: a leaf the
        // kernel has is passed over. Only a batch whose first pages are all cached counts
        // as data that is.
        let added = self.batch.len() - start;
        let cached = leading_cached(
            source,
            self.batch[start..].iter().copied(),
            geometry.page_size_bytes,
        );
        if added > 0 && cached == added.min(BATCH_CACHE_CHECKS) {
            self.rows.unissue(issued_before, &self.batch[start..]);
            self.batch.truncate(start);
            self.note_cached();
            return;
        }
        self.batch.drain(start..start + cached);
        if self.batch.len() > start {
            self.note_uncached();
        }
    }

    /// The index leaf an index scan reads after the one row read-ahead predicts from: the
    /// next child, in the scan's direction, of the index path's level above its leaves,
    /// once that level is parsed whole. `None` at the level's last child (the next leaf
    /// is another parent's).
    fn next_index_leaf(&self) -> Option<u32> {
        let followed = &self.levels[..self.depth];
        let parked = &self.parked[..self.parked_depth];
        let index_path = if is_table_path(followed) {
            parked
        } else if is_table_path(parked) {
            followed
        } else {
            return None;
        };
        let level = index_path.get(self.rows.index_depth)?;
        if level.unparsed.is_some() || level.malformed {
            return None;
        }
        let next = level.last_read? + 1;
        (next < level.children.len()).then(|| level.parsed_child(next))
    }

    /// A cache check found the page it asked about cached. One such page proves little
    /// (the kernel's own read-ahead around a page it read may have brought it in); two
    /// checks in a row that find their pages cached mean the data is: from then on, wait
    /// longer and longer before the next check.
    fn note_cached(&mut self) {
        self.cached_checks_in_row += 1;
        if self.cached_checks_in_row < 2 {
            return;
        }
        if self.hot_backoff_reads == MAX_HOT_BACKOFF_READS && self.wakes_on_misses {
            // Cached for long: sleep until SQLite's reads reach the device again.
            self.fall_asleep();
            return;
        }
        self.hot_backoff_reads =
            (self.hot_backoff_reads * 2).clamp(FIRST_WINDOW_PAGES as u32, MAX_HOT_BACKOFF_READS);
        self.hot_wait_reads = self.hot_backoff_reads;
    }

    /// Stops following reads until SQLite's reads reach the device again. The paths stay:
    /// only another connection can make them wrong, and lock changes forget them. Kept,
    /// they let row read-ahead resume after waking, when SQLite's own cache holds the
    /// table's interior pages and no descent would show them again. What was asked for is
    /// no longer counted: nothing follows it while asleep.
    fn fall_asleep(&mut self) {
        self.watch.awake = false;
        self.watch.burst_len = 0;
        for level in self.levels.iter_mut().chain(self.parked.iter_mut()) {
            level.issued_until = level.last_read.map_or(0, |i| i + 1);
            level.peeked.clear();
        }
        self.rows.drop_outstanding();
        self.end_chain();
        self.sync_outstanding();
    }

    /// A cache check found its page uncached: the data is cold, check at every batch.
    fn note_uncached(&mut self) {
        self.reads_since_uncached = 0;
        self.cached_checks_in_row = 0;
        self.hot_backoff_reads = 0;
    }

    /// Pages of the path asked for and not yet read.
    fn outstanding_pages(&self) -> usize {
        let chain = self.chain_outstanding;
        chain
            + self.rows.outstanding()
            + self.levels[..self.depth]
                .iter()
                .chain(&self.parked[..self.parked_depth])
                .map(Level::outstanding)
                .sum::<usize>()
    }

    /// Pages this file may still ask for under the process-wide bound.
    fn process_budget_pages(&self, geometry: Geometry) -> usize {
        let page_bytes = geometry.page_size_bytes as u64;
        let pending = self.batch.len() as u64 * page_bytes;
        let others = PROCESS_OUTSTANDING_BYTES
            .load(Ordering::Relaxed)
            .saturating_sub(self.outstanding_bytes);
        let used = others + self.outstanding_bytes + pending;
        (PROCESS_MAX_OUTSTANDING_BYTES.saturating_sub(used) / page_bytes) as usize
    }

    /// Brings this file's share of the process total up to date.
    fn sync_outstanding(&mut self) {
        let page_bytes = self.geometry.map_or(0, |g| g.page_size_bytes as u64);
        let now = self.outstanding_pages() as u64 * page_bytes;
        if now == self.outstanding_bytes {
            return;
        }
        if now > self.outstanding_bytes {
            PROCESS_OUTSTANDING_BYTES.fetch_add(now - self.outstanding_bytes, Ordering::Relaxed);
        } else {
            PROCESS_OUTSTANDING_BYTES.fetch_sub(self.outstanding_bytes - now, Ordering::Relaxed);
        }
        self.outstanding_bytes = now;
    }
}

/// Where `page_number` is on `path`: the level that has it as a child, and where. Each
/// level is asked for its next child in its direction, which is what a scan reads, and for
/// the child on the other side of the last one read (the scan turns); the deepest level is
/// searched whole only when SQLite entered it with the read before (`just_entered`: a
/// descent picks any child of the page it just read). So a run of random reads (lookups,
/// `integrity_check`'s cross-checks) costs a few comparisons per read, and a descent one
/// pass over one child list.
///
/// The read right after a descent entered the deepest level, of a page of the level's tree
/// type (`kind` is the read page's) and found on no other level, is taken as its child
/// without the pass ([`Found::Pending`], [`Level::pending`]): the pass is made when a later
/// read asks the level, which a point lookup's descent, forgotten at the lock change that
/// ends it, never does.
fn find(
    path: &mut [Level],
    just_entered: bool,
    page_number: u32,
    kind: Option<PageKind>,
) -> Option<(usize, Found)> {
    let deepest = path.len().checked_sub(1)?;
    // Levels whose read is pending are asked once it is looked up, below.
    if let Some(found) = next_or_behind(path, page_number) {
        return Some(found);
    }
    if just_entered {
        let level = &mut path[deepest];
        if level.may_defer(kind) {
            level.pending = Some(page_number);
            return Some((deepest, Found::Pending));
        }
        if let Some(position) = level.position_of(page_number) {
            return Some((deepest, Found::At(position)));
        }
    }
    if path.iter().all(|level| level.pending.is_none()) {
        return None;
    }
    for level in path.iter_mut() {
        level.resolve_pending();
    }
    next_or_behind(path, page_number)
}

/// The deepest level of `path` whose next child in its direction, or whose child behind
/// the one read last, is `page_number`; levels with a pending read are passed over.
fn next_or_behind(path: &[Level], page_number: u32) -> Option<(usize, Found)> {
    for (depth, level) in path.iter().enumerate().rev() {
        if level.pending.is_some() {
            continue;
        }
        let next = level.last_read.map_or(0, |i| i + 1);
        if level.child(next) == Some(page_number) {
            return Some((depth, Found::At(next)));
        }
        if let Some(last) = level.last_read {
            let index = level.key_index(last);
            let behind = if level.backward {
                index.checked_add(1)
            } else {
                index.checked_sub(1)
            };
            if behind.and_then(|i| level.key_child(i)) == Some(page_number) {
                return Some((depth, Found::Turn));
            }
        }
    }
    None
}

/// A path as row read-ahead reads it: its pages' copies, root first.
impl rows::TablePath for [Level] {
    fn depth(&self) -> usize {
        self.len()
    }

    fn page(&self, depth: usize) -> (u32, &[u8]) {
        let level = &self[depth];
        (level.page_number, &level.page)
    }
}

/// What row read-ahead needs of the file: copies of pages the kernel has.
impl<S: PageSource> rows::CachedPages for S {
    fn read_if_cached(&mut self, page_number: u32, buf: &mut [u8]) -> bool {
        PageSource::read_if_cached(self, page_number, buf)
    }
}

/// Whether `path`'s root is a table interior page.
fn is_table_path(path: &[Level]) -> bool {
    path.first().is_some_and(|root| {
        btree_page::kind_hint(&root.page, root.page_number) == Some(PageKind::TableInterior)
    })
}

/// How many of the first [`BATCH_CACHE_CHECKS`] of `pages` the kernel has cached, counted
/// from the first until one is missing (one check on cold data).
fn leading_cached(
    source: &mut impl PageSource,
    pages: impl IntoIterator<Item = u32>,
    page_size_bytes: u32,
) -> usize {
    pages
        .into_iter()
        .take(BATCH_CACHE_CHECKS)
        .take_while(|&page| source.is_cached(page, page_size_bytes) == Some(true))
        .count()
}

/// Of the followed and the parked path, the one whose root is a table interior page: the
/// table an index scan looks its rows up in (empty if neither).
fn table_path<'a>(followed: &'a [Level], parked: &'a [Level]) -> &'a [Level] {
    if is_table_path(followed) {
        followed
    } else if is_table_path(parked) {
        parked
    } else {
        &[]
    }
}

impl Drop for ReadAhead {
    fn drop(&mut self) {
        self.forget();
        debug_assert_eq!(self.outstanding_bytes, 0, "a closed file still counted");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::btree_page::page_with_cells;
    use std::collections::{BTreeMap, BTreeSet};

    const PAGE_BYTES: u32 = 4096;

    /// A table interior page naming `children` (the last is the right-most pointer).
    fn interior(children: &[u32]) -> Vec<u8> {
        let mut page = vec![0u8; PAGE_BYTES as usize];
        let cells = children.len() - 1;
        page[0] = 0x05;
        page[3..5].copy_from_slice(&(cells as u16).to_be_bytes());
        page[8..12].copy_from_slice(&children[cells].to_be_bytes());
        let mut content = PAGE_BYTES as usize;
        for (index, &child) in children[..cells].iter().enumerate() {
            content -= 5;
            page[content..content + 4].copy_from_slice(&child.to_be_bytes());
            page[content + 4] = (index % 100) as u8; // the key, a 1-byte varint
            let pointer = 12 + 2 * index;
            page[pointer..pointer + 2].copy_from_slice(&(content as u16).to_be_bytes());
        }
        page[5..7].copy_from_slice(&(content as u16).to_be_bytes());
        page
    }

    fn leaf() -> Vec<u8> {
        let mut page = vec![0u8; PAGE_BYTES as usize];
        page[0] = 0x0d;
        page[5..7].copy_from_slice(&(PAGE_BYTES as u16).to_be_bytes());
        page
    }

    /// Page 1: the database header and an empty leaf.
    fn header_page() -> Vec<u8> {
        let mut page = vec![0u8; PAGE_BYTES as usize];
        page[..16].copy_from_slice(b"SQLite format 3\0");
        page[16..18].copy_from_slice(&(PAGE_BYTES as u16).to_be_bytes());
        page[18] = 1;
        page[19] = 1;
        page[21] = 64;
        page[22] = 32;
        page[23] = 32;
        page[100] = 0x0d;
        page
    }

    /// [`header_page`] whose header claims pages of `page_size_bytes` (another
    /// connection's `VACUUM` changed the page size).
    fn header_page_claiming(page_size_bytes: u16) -> Vec<u8> {
        let mut page = header_page();
        page[16..18].copy_from_slice(&page_size_bytes.to_be_bytes());
        page
    }

    /// A file in memory: which pages the kernel has, and what read-ahead asked for.
    struct Model {
        pages: BTreeMap<u32, Vec<u8>>,
        cached: BTreeSet<u32>,
        prefetched: Vec<u32>,
        page_count: u32,
        peeks: u32,
        /// SQLite's reads a prefetched page takes to arrive (0: at once), and the pages
        /// on their way with the read count they arrive at.
        latency_reads: usize,
        arriving: Vec<(u32, usize)>,
        reads: usize,
        /// The page size of each `page_count` call (one `fstat` each).
        page_counts_asked: Vec<u32>,
    }

    impl Model {
        fn new(page_count: u32) -> Model {
            Model {
                pages: BTreeMap::new(),
                cached: BTreeSet::new(),
                prefetched: Vec::new(),
                page_count,
                peeks: 0,
                latency_reads: 0,
                arriving: Vec::new(),
                reads: 0,
                page_counts_asked: Vec::new(),
            }
        }

        fn page(&self, number: u32) -> Vec<u8> {
            self.pages.get(&number).cloned().unwrap_or_else(leaf)
        }

        /// An overflow chain through `chain`'s pages in order, its last naming no next.
        fn insert_overflow_chain(&mut self, chain: &[u32]) {
            for pair in chain.windows(2) {
                self.pages.insert(pair[0], overflow(pair[1]));
            }
            self.pages.insert(*chain.last().unwrap(), overflow(0));
        }
    }

    impl PageSource for Model {
        fn is_cached(&mut self, page_number: u32, _: u32) -> Option<bool> {
            Some(self.cached.contains(&page_number))
        }
        fn read_if_cached(&mut self, page_number: u32, buf: &mut [u8]) -> bool {
            self.peeks += 1;
            if !self.cached.contains(&page_number) {
                return false;
            }
            buf.copy_from_slice(&self.page(page_number));
            true
        }
        fn prefetch(&mut self, pages: &[u32], page_size_bytes: u32) {
            assert_eq!(page_size_bytes, PAGE_BYTES);
            for &page in pages {
                assert!(
                    (1..=self.page_count).contains(&page),
                    "page {page} asked for"
                );
                if self.latency_reads == 0 {
                    self.cached.insert(page);
                } else {
                    self.arriving.push((page, self.reads + self.latency_reads));
                }
            }
            self.prefetched.extend_from_slice(pages);
        }
        fn page_count(&mut self, page_size_bytes: u32) -> u32 {
            self.page_counts_asked.push(page_size_bytes);
            self.page_count
        }
    }

    /// SQLite's read of `page`: it becomes cached (the read brought it in).
    fn read(readahead: &mut ReadAhead, model: &mut Model, page: u32) {
        let data = serve(model, page);
        readahead.after_read(&data, u64::from(page - 1) * u64::from(PAGE_BYTES), model);
    }

    /// SQLite's read of `page` from the model: prefetches due by now arrive, and the page
    /// is cached from then on.
    fn serve(model: &mut Model, page: u32) -> Vec<u8> {
        model.reads += 1;
        let now = model.reads;
        let cached = &mut model.cached;
        model.arriving.retain(|&(arriving, at)| {
            if at <= now {
                cached.insert(arriving);
            }
            at > now
        });
        model.cached.insert(page);
        model.page(page)
    }

    /// A new read-ahead that has seen page 1, the root (page 2) and then `pages`.
    fn descended(model: &mut Model, pages: &[u32]) -> ReadAhead {
        let mut readahead = ReadAhead::new();
        for &page in [1, 2].iter().chain(pages) {
            read(&mut readahead, model, page);
        }
        readahead
    }

    /// A root (page 2) over `parents` interior pages of `fanout` leaves each, with the
    /// pages numbered in a scattered order; returns the model and the leaves in key order
    /// grouped by parent.
    fn two_level_tree(parents: u32, fanout: u32) -> (Model, Vec<u32>, Vec<Vec<u32>>) {
        let total = 2 + parents + parents * fanout;
        let mut model = Model::new(total);
        model.pages.insert(1, header_page());
        // Scatter: page numbers by a multiplicative permutation of 3..=total.
        let span = total - 2;
        let scatter = |i: u32| 3 + (i * 7919) % span;
        let parent_pages: Vec<u32> = (0..parents).map(scatter).collect();
        let mut leaves = Vec::new();
        for (p, &parent) in parent_pages.iter().enumerate() {
            let own: Vec<u32> = (0..fanout)
                .map(|l| scatter(parents + p as u32 * fanout + l))
                .collect();
            model.pages.insert(parent, interior(&own));
            leaves.push(own);
        }
        model.pages.insert(2, interior(&parent_pages));
        (model, parent_pages, leaves)
    }

    /// Scans a two-level tree in key order, or from the last key to the first (the order of
    /// `integrity_check` and `ORDER BY … DESC`), and checks that only the reads that show
    /// the scan wait: the first parent's first two leaves and the second parent (before
    /// the root's scan is recognised); that the window holds; and that read-ahead asks for
    /// pages of the tree only, each once.
    fn scan_reads_ahead(backward: bool) {
        let (mut model, parents, leaves) = two_level_tree(20, 40);
        let mut readahead = ReadAhead::new();
        read(&mut readahead, &mut model, 1);
        read(&mut readahead, &mut model, 2);
        let ordered = |pages: Vec<u32>| -> Vec<u32> {
            if backward {
                pages.into_iter().rev().collect()
            } else {
                pages
            }
        };
        let mut missed = 0;
        for (position, parent) in ordered((0..parents.len() as u32).collect())
            .into_iter()
            .enumerate()
        {
            let parent = parent as usize;
            if !model.cached.contains(&parents[parent]) {
                missed += 1;
            }
            read(&mut readahead, &mut model, parents[parent]);
            for leaf in ordered(leaves[parent].clone()) {
                if !model.cached.contains(&leaf) {
                    missed += 1;
                }
                read(&mut readahead, &mut model, leaf);
                assert!(
                    readahead.outstanding_pages() <= max_window_pages(PAGE_BYTES),
                    "parent {position}: {:?}",
                    readahead.levels[..readahead.depth]
                        .iter()
                        .map(|l| (
                            l.last_read,
                            l.issued_until,
                            l.peeked.total(),
                            l.child_count()
                        ))
                        .collect::<Vec<_>>()
                );
            }
        }
        assert!(missed <= 4, "{missed} reads found their page uncached");
        let asked: BTreeSet<u32> = model.prefetched.iter().copied().collect();
        assert_eq!(
            asked.len(),
            model.prefetched.len(),
            "a page asked for twice"
        );
        let tree: BTreeSet<u32> = parents
            .iter()
            .chain(leaves.iter().flatten())
            .copied()
            .collect();
        assert!(asked.is_subset(&tree));
    }

    /// Root (page 2) → `grandparents` → `parents` each → `leaves` each, numbered in a
    /// scattered order; returns the model, SQLite's reads of a full scan in key order, and
    /// the leaves of each grandparent's first parent.
    fn three_level_scan(
        grandparents: u32,
        parents: u32,
        leaves: u32,
    ) -> (Model, Vec<u32>, BTreeSet<u32>) {
        let interior_count = grandparents + grandparents * parents;
        let total = 2 + interior_count + grandparents * parents * leaves;
        let mut model = Model::new(total);
        model.pages.insert(1, header_page());
        let span = total - 2;
        let mut next = 0;
        let mut scatter = || {
            next += 1;
            3 + ((next - 1) * 7919) % span
        };
        let mut reads = vec![1, 2];
        let mut first_parents_leaves = BTreeSet::new();
        let mut root_children = Vec::new();
        for _ in 0..grandparents {
            let grandparent = scatter();
            root_children.push(grandparent);
            reads.push(grandparent);
            let mut own_parents = Vec::new();
            for _ in 0..parents {
                let parent = scatter();
                own_parents.push(parent);
                reads.push(parent);
                let own: Vec<u32> = (0..leaves).map(|_| scatter()).collect();
                if own_parents.len() == 1 {
                    first_parents_leaves.extend(own.iter().copied());
                }
                reads.extend_from_slice(&own);
                model.pages.insert(parent, interior(&own));
            }
            model.pages.insert(grandparent, interior(&own_parents));
        }
        model.pages.insert(2, interior(&root_children));
        (model, reads, first_parents_leaves)
    }

    #[test]
    fn a_scan_of_small_interior_pages_keeps_its_window_and_asks_for_each_sibling_early() {
        // 15 leaves per parent and 16 parents per grandparent (a WITHOUT ROWID table of
        // long keys): the window spans several parents, and must neither shrink back to
        // the grandparent's at each parent nor leave a parent entered with only its first
        // leaf asked for (a peek made when the window had room for one child).
        let (mut model, reads, first_parents_leaves) = three_level_scan(8, 16, 15);
        let leaves: BTreeSet<u32> = reads
            .iter()
            .copied()
            .filter(|page| model.page(*page)[0] == 0x0d && *page != 1)
            .collect();
        let mut readahead = ReadAhead::new();
        let mut asked_at: BTreeMap<u32, usize> = BTreeMap::new();
        let mut late = 0;
        let mut waited = 0;
        // A device read takes as long as 8 of SQLite's reads of cached pages.
        model.latency_reads = 8;
        let mut most_outstanding = 0;
        for (number, &page) in reads.iter().enumerate() {
            // Past the first grandparent, every leaf is asked for a few reads ahead, but
            // those of a grandparent's first parent: the scan does not reach two levels
            // ahead, and asks for them once SQLite has entered that parent.
            if number > reads.len() / 8
                && leaves.contains(&page)
                && !first_parents_leaves.contains(&page)
            {
                let lead = asked_at.get(&page).map_or(0, |&at| number - at);
                late += usize::from(lead < 4);
                waited += usize::from(!model.cached.contains(&page));
            }
            read(&mut readahead, &mut model, page);
            for &asked in &model.prefetched {
                asked_at.entry(asked).or_insert(number + 1);
            }
            most_outstanding = most_outstanding.max(readahead.outstanding_pages());
        }
        let max_window = max_window_pages(PAGE_BYTES);
        assert!(
            most_outstanding * 2 > max_window,
            "the window reached {most_outstanding} pages of {max_window}"
        );
        assert!(
            late == 0,
            "{late} of {} leaves asked for less than 4 reads ahead",
            leaves.len()
        );
        assert!(
            waited * 200 <= leaves.len(),
            "SQLite waited for {waited} of {} leaves",
            leaves.len()
        );
    }

    #[test]
    fn a_scan_asks_for_leaves_before_sqlite_reads_them_and_stays_in_its_window() {
        scan_reads_ahead(false);
    }

    #[test]
    fn a_descending_scan_is_followed_too() {
        scan_reads_ahead(true);
    }

    #[test]
    fn a_scan_that_turns_is_followed_the_new_way() {
        // Forward through the first parent's leaves, then back the way it came.
        let (mut model, parents, leaves) = two_level_tree(1, 400);
        let mut readahead = ReadAhead::new();
        read(&mut readahead, &mut model, 1);
        read(&mut readahead, &mut model, 2);
        read(&mut readahead, &mut model, parents[0]);
        let own = &leaves[0];
        for &leaf in &own[..200] {
            read(&mut readahead, &mut model, leaf);
        }
        // Pages asked for ahead of the forward scan stay cached; evict them, as a kernel
        // under memory pressure might, so the backward scan's needs show.
        model.cached.retain(|page| !own[..200].contains(page));
        model.prefetched.clear();
        let mut missed = 0;
        for &leaf in own[..199].iter().rev() {
            if !model.cached.contains(&leaf) {
                missed += 1;
            }
            read(&mut readahead, &mut model, leaf);
        }
        assert!(missed <= 1, "{missed} reads found their page uncached");
        assert!(model
            .prefetched
            .iter()
            .all(|page| own[..198].contains(page)));
    }

    #[test]
    fn point_lookups_ask_for_nothing() {
        let (mut model, parents, leaves) = two_level_tree(20, 40);
        let mut readahead = ReadAhead::new();
        read(&mut readahead, &mut model, 1);
        for i in 0..200usize {
            let p = (i * 13) % parents.len();
            let l = (i * 29) % leaves[p].len();
            read(&mut readahead, &mut model, 2);
            read(&mut readahead, &mut model, parents[p]);
            read(&mut readahead, &mut model, leaves[p][l]);
            // A descent checks headers only: no page was parsed whole.
            assert!(readahead.levels[..readahead.depth]
                .iter()
                .all(|level| level.unparsed.is_some()));
        }
        assert_eq!(model.prefetched, Vec::<u32>::new());
    }

    #[test]
    fn a_scan_of_cached_pages_asks_for_nothing_and_checks_rarely() {
        let (mut model, parents, leaves) = two_level_tree(10, 200);
        model.cached = (1..=model.page_count).collect();
        let mut readahead = ReadAhead::new();
        read(&mut readahead, &mut model, 1);
        read(&mut readahead, &mut model, 2);
        for (parent, own) in parents.iter().zip(&leaves) {
            read(&mut readahead, &mut model, *parent);
            for &leaf in own {
                read(&mut readahead, &mut model, leaf);
            }
        }
        assert!(model.prefetched.is_empty());
        assert_eq!(model.peeks, 0);
    }

    #[test]
    fn a_scan_through_pages_the_kernel_read_around_others_keeps_asking_for_the_rest() {
        // Every other leaf is cached, as the kernel's own read-ahead around the pages
        // SQLite read by itself may leave them: a batch's first page being cached says
        // little about the pages after it.
        let (mut model, parents, leaves) = two_level_tree(4, 200);
        let scan: Vec<u32> = leaves.iter().flatten().copied().collect();
        for leaf in scan.iter().step_by(2) {
            model.cached.insert(*leaf);
        }
        let mut readahead = ReadAhead::new();
        read(&mut readahead, &mut model, 1);
        read(&mut readahead, &mut model, 2);
        let (mut uncached_reads, mut asked_before) = (0, 0);
        for (parent, own) in parents.iter().zip(&leaves) {
            read(&mut readahead, &mut model, *parent);
            for (position, &leaf) in own.iter().enumerate() {
                let uncached = scan.iter().position(|&page| page == leaf).unwrap() % 2 == 1;
                // Past the first parent's first leaves, which start the scan.
                if uncached && (*parent != parents[0] || position >= 8) {
                    uncached_reads += 1;
                    asked_before += u32::from(model.cached.contains(&leaf));
                }
                read(&mut readahead, &mut model, leaf);
            }
        }
        assert!(uncached_reads > 350);
        assert!(
            asked_before * 100 >= uncached_reads * 98,
            "{asked_before} of {uncached_reads} uncached leaves asked for before SQLite read them"
        );
    }

    #[test]
    fn malformed_interior_pages_start_nothing() {
        let (mut model, parents, leaves) = two_level_tree(4, 50);
        // The first parent names a child past the end of the file.
        let mut bad = interior(&leaves[0]);
        bad[8..12].copy_from_slice(&(model.page_count + 1).to_be_bytes());
        model.pages.insert(parents[0], bad);
        let mut readahead = ReadAhead::new();
        read(&mut readahead, &mut model, 1);
        read(&mut readahead, &mut model, 2);
        read(&mut readahead, &mut model, parents[0]);
        for &leaf in &leaves[0] {
            read(&mut readahead, &mut model, leaf);
        }
        assert!(
            model.prefetched.iter().all(|p| !leaves[0].contains(p)),
            "children of a malformed page were asked for"
        );
    }

    /// An overflow page naming `next`.
    fn overflow(next: u32) -> Vec<u8> {
        let mut page = vec![0xabu8; PAGE_BYTES as usize];
        page[..4].copy_from_slice(&next.to_be_bytes());
        page
    }

    #[test]
    fn an_overflow_chain_is_followed_ahead_of_sqlite() {
        let mut model = Model::new(400);
        model.pages.insert(1, header_page());
        // A scattered chain, then a consecutive one.
        let scattered = [50u32, 17, 300, 122, 7, 99];
        let consecutive: Vec<u32> = (200..260).collect();
        for chain in [&scattered[..], &consecutive[..]] {
            model.insert_overflow_chain(chain);
        }
        let mut readahead = ReadAhead::new();
        read(&mut readahead, &mut model, 1);
        let mut missed = Vec::new();
        for &page in scattered.iter().chain(&consecutive) {
            if !model.cached.contains(&page) {
                missed.push(page);
            }
            read(&mut readahead, &mut model, page);
        }
        // Each chain's first two pages are read before the chain is recognised.
        assert_eq!(missed, vec![50, 17, 200, 201]);
        // Never past the file, never a page twice, never far past the consecutive chain.
        let asked: BTreeSet<u32> = model.prefetched.iter().copied().collect();
        assert_eq!(asked.len(), model.prefetched.len());
        // The consecutive chain's guess runs at most one window past its end.
        let guessed_past_end = 260..=(259 + FIRST_WINDOW_PAGES as u32 * 2);
        assert!(
            asked.iter().all(|p| scattered.contains(p)
                || consecutive.contains(p)
                || guessed_past_end.contains(p)),
            "{asked:?}"
        );
    }

    #[test]
    fn an_overflow_chain_is_never_followed_past_the_end_of_the_file() {
        let mut model = Model::new(400);
        model.pages.insert(1, header_page());
        // A chain whose second page names a page past the end (a corrupt page, or one a
        // writer has since cut off), then one that runs to the last page.
        model.insert_overflow_chain(&[50, 17]);
        model.pages.insert(17, overflow(1000));
        let last: Vec<u32> = (395..=400).collect();
        model.insert_overflow_chain(&last);
        let mut readahead = ReadAhead::new();
        read(&mut readahead, &mut model, 1);
        for &page in [50, 17].iter().chain(&last) {
            read(&mut readahead, &mut model, page);
        }
        assert!(model.prefetched.contains(&397), "{:?}", model.prefetched);
        assert!(
            model.prefetched.iter().all(|page| (2..=400).contains(page)),
            "{:?}",
            model.prefetched
        );
        assert_eq!(
            model.page_counts_asked,
            [PAGE_BYTES],
            "asked once the chain was followed"
        );
    }

    #[test]
    fn an_overflow_chain_below_a_path_is_followed_too() {
        // SQLite reads a root and a parent, then a leaf's overflow chain: the chain's
        // pages are not children of the path, and read-ahead must still ask for them.
        let (mut model, parents, leaves) = two_level_tree(2, 5);
        model.page_count = 400;
        let chain: Vec<u32> = (300..340).collect();
        model.insert_overflow_chain(&chain);
        let mut readahead = ReadAhead::new();
        read(&mut readahead, &mut model, 1);
        read(&mut readahead, &mut model, 2);
        read(&mut readahead, &mut model, parents[0]);
        read(&mut readahead, &mut model, leaves[0][0]);
        let mut missed = 0;
        for &page in &chain {
            if !model.cached.contains(&page) {
                missed += 1;
            }
            read(&mut readahead, &mut model, page);
        }
        assert_eq!(missed, 2, "only the chain's first two pages wait");
        readahead.forget();
        assert_eq!(readahead.outstanding_pages(), 0);
    }

    #[test]
    fn a_file_made_smaller_since_the_last_lock_change_has_nothing_past_its_end_asked_for() {
        let (mut model, parents, leaves) = two_level_tree(20, 40);
        let mut readahead = descended(&mut model, &[parents[0]]);
        for &leaf in &leaves[0][..3] {
            read(&mut readahead, &mut model, leaf);
        }
        assert!(!model.prefetched.is_empty(), "the scan asked for leaves");
        readahead.forget();
        // Another connection made the file smaller, and the pages SQLite reads next name
        // pages past its new end (the model's prefetch refuses any).
        model.page_count = 300;
        assert!(leaves[1][3..].iter().any(|&leaf| leaf > 300));
        read(&mut readahead, &mut model, 2);
        read(&mut readahead, &mut model, parents[1]);
        for &leaf in &leaves[1] {
            read(&mut readahead, &mut model, leaf);
        }
    }

    #[test]
    fn a_file_grown_since_the_last_lock_change_has_its_new_pages_followed() {
        let mut model = Model::new(100);
        model.pages.insert(1, header_page());
        let chain: Vec<u32> = (150..190).collect();
        model.insert_overflow_chain(&chain);
        let mut readahead = ReadAhead::new();
        read(&mut readahead, &mut model, 1);
        readahead.forget();
        // Another connection appended the chain.
        model.page_count = 200;
        for &page in &chain {
            read(&mut readahead, &mut model, page);
        }
        assert!(
            chain[2..]
                .iter()
                .all(|page| model.prefetched.contains(page)),
            "{:?}",
            model.prefetched
        );
    }

    #[test]
    fn the_page_count_is_read_once_per_transaction_only_when_a_scan_needs_it() {
        let (mut model, parents, leaves) = two_level_tree(4, 40);
        let mut readahead = ReadAhead::dormant();
        for _ in 0..5 {
            for &page in &[1, 2, parents[0], leaves[0][0], leaves[0][1]] {
                read(&mut readahead, &mut model, page);
            }
            readahead.forget();
        }
        assert!(model.page_counts_asked.is_empty(), "asleep, no fstat");
        readahead.note_uncached_read();
        for transaction in 1..=3 {
            // A point lookup's descent needs no count.
            for &page in &[2, parents[transaction], leaves[transaction][0]] {
                read(&mut readahead, &mut model, page);
            }
            assert_eq!(model.page_counts_asked.len(), transaction - 1);
            // The second child in order is a scan: its children are checked against it.
            read(&mut readahead, &mut model, leaves[transaction][1]);
            read(&mut readahead, &mut model, leaves[transaction][2]);
            assert_eq!(model.page_counts_asked.len(), transaction);
            readahead.forget();
            // A lock change with nothing read since the last reads nothing either.
            readahead.forget();
        }
    }

    #[test]
    fn a_new_page_size_has_the_page_count_read_again() {
        let (mut model, parents, leaves) = two_level_tree(4, 40);
        let mut readahead = ReadAhead::new();
        for page in [1, 2, parents[0], leaves[0][0], leaves[0][1]] {
            read(&mut readahead, &mut model, page);
        }
        assert_eq!(model.page_counts_asked, [PAGE_BYTES]);
        assert_ne!(readahead.page_count, 0);
        // Another connection changed the page size (`VACUUM`): page 1 says so.
        let mut header = header_page_claiming(2 * PAGE_BYTES as u16);
        header.resize(2 * PAGE_BYTES as usize, 0);
        readahead.after_read(&header, 0, &mut model);
        assert_eq!(
            readahead.page_count, 0,
            "a count in pages of the old size is asked for again when next needed"
        );
        assert_eq!(
            model.page_counts_asked,
            [PAGE_BYTES],
            "page 1 alone needs none"
        );
    }

    #[test]
    fn a_point_lookups_descent_looks_up_no_position() {
        let (mut model, parents, leaves) = two_level_tree(20, 40);
        let mut readahead = descended(&mut model, &[parents[7], leaves[7][13]]);
        let path: Vec<_> = readahead.levels[..readahead.depth]
            .iter()
            .map(|level| (level.page_number, level.pending, level.last_read))
            .collect();
        assert_eq!(
            path,
            [
                (2, Some(parents[7]), None),
                (parents[7], Some(leaves[7][13]), None)
            ]
        );
        assert!(model.prefetched.is_empty());
        readahead.forget();
        assert_eq!(readahead.depth, 0);
    }

    #[test]
    fn a_scan_from_the_middle_of_a_level_looks_up_where_it_started_at_its_second_read() {
        let (mut model, parents, leaves) = two_level_tree(20, 40);
        let mut readahead = descended(&mut model, &[parents[7]]);
        for &leaf in &leaves[7][13..16] {
            read(&mut readahead, &mut model, leaf);
        }
        let level = &readahead.levels[1];
        assert_eq!(
            (level.pending, level.last_read, level.streak),
            (None, Some(15), 3)
        );
        // The root's pending child was looked up too, when the scan asked it.
        assert_eq!(readahead.levels[0].last_read, Some(7));
        assert_eq!(readahead.levels[0].pending, None);
        assert!(
            model.prefetched.contains(&leaves[7][16]),
            "{:?}",
            model.prefetched
        );
        assert!(!model.prefetched.contains(&leaves[7][12]));
    }

    #[test]
    fn a_read_that_is_not_the_new_levels_child_is_not_kept_as_one() {
        let (mut model, parents, leaves) = two_level_tree(20, 40);
        // An index page below a table interior page is never taken for its child.
        let index_page = 2 + 20 + 20 * 40 + 1;
        model.page_count = index_page;
        model.pages.insert(index_page, index_leaf(&[1, 2, 3]));
        let readahead = descended(&mut model, &[index_page]);
        assert_eq!(readahead.levels[0].pending, None);
        // A table page is, until a later read needs its position: a grandchild (SQLite had
        // the parent cached) turns out to be no child, and the level is as if unread.
        let mut readahead = descended(&mut model, &[leaves[3][5]]);
        assert_eq!(readahead.levels[0].pending, Some(leaves[3][5]));
        read(&mut readahead, &mut model, parents[4]);
        assert_eq!(readahead.levels[0].pending, None);
        assert_eq!(readahead.levels[0].last_read, Some(4));
        assert_eq!(readahead.levels[0].streak, 1);
        assert_eq!(readahead.levels[1].page_number, parents[4]);
    }

    #[test]
    fn a_lock_change_mid_scan_forgets_it_and_the_next_scan_starts_afresh() {
        let (mut model, parents, leaves) = two_level_tree(4, 40);
        let mut readahead = descended(&mut model, &[parents[0]]);
        for &leaf in &leaves[0][..3] {
            read(&mut readahead, &mut model, leaf);
        }
        assert!(
            readahead.outstanding_pages() > 0,
            "the scan asked for leaves"
        );
        readahead.forget();
        assert!(readahead.watch.forgotten);
        assert_eq!(readahead.outstanding_pages(), 0);
        // Its share of the process total is given back.
        assert_eq!(readahead.outstanding_bytes, 0);
        // Lock changes with no read between them: nothing left to clear.
        readahead.forget();
        readahead.forget();
        assert!(readahead.watch.forgotten);
        assert_eq!(readahead.depth, 0);
        // The next transaction's scan of another parent is followed from its descent.
        let asked_before = model.prefetched.len();
        read(&mut readahead, &mut model, 2);
        assert!(!readahead.watch.forgotten);
        read(&mut readahead, &mut model, parents[2]);
        for &leaf in &leaves[2][..3] {
            read(&mut readahead, &mut model, leaf);
        }
        assert!(
            model.prefetched.len() > asked_before,
            "the new scan asked for leaves"
        );
        readahead.forget();
        assert_eq!(readahead.outstanding_pages(), 0);
    }

    #[test]
    fn a_looping_overflow_chain_costs_constant_work_per_read() {
        let mut model = Model::new(100);
        model.pages.insert(1, header_page());
        model.pages.insert(10, overflow(11));
        model.pages.insert(11, overflow(10));
        let mut readahead = ReadAhead::new();
        read(&mut readahead, &mut model, 1);
        for i in 0..1000 {
            read(&mut readahead, &mut model, 10 + i % 2);
        }
        assert!(model.prefetched.len() <= 2);
    }

    /// A SQLite varint.
    fn varint(value: u64) -> Vec<u8> {
        let mut groups = vec![(value & 0x7f) as u8];
        let mut rest = value >> 7;
        while rest > 0 {
            groups.push((rest & 0x7f) as u8 | 0x80);
            rest >>= 7;
        }
        groups.reverse();
        groups
    }

    /// A table interior page: `children[i]` holds the rowids up to `keys[i]`, the last child
    /// the rest.
    fn table_interior(children: &[u32], keys: &[i64]) -> Vec<u8> {
        let cells: Vec<Vec<u8>> = children[..children.len() - 1]
            .iter()
            .zip(keys)
            .map(|(child, &key)| {
                let mut cell = child.to_be_bytes().to_vec();
                cell.extend(varint(key as u64));
                cell
            })
            .collect();
        page_with_cells(PAGE_BYTES as usize, 0x05, &cells, children.last().copied())
    }

    /// An index entry's record: a 1-byte key, then the rowid as a 4-byte integer.
    fn index_record(key: u8, rowid: i64) -> Vec<u8> {
        let mut record = vec![3, 1, 4, key];
        record.extend((rowid as i32).to_be_bytes());
        record
    }

    /// An index leaf of entries naming `rowids`.
    fn index_leaf(rowids: &[i64]) -> Vec<u8> {
        let cells: Vec<Vec<u8>> = rowids
            .iter()
            .map(|&rowid| {
                let record = index_record(7, rowid);
                let mut cell = varint(record.len() as u64);
                cell.extend(record);
                cell
            })
            .collect();
        page_with_cells(PAGE_BYTES as usize, 0x0a, &cells, None)
    }

    /// An index interior page over `children`, its entries' rowids `separators`.
    fn index_interior(children: &[u32], separators: &[i64]) -> Vec<u8> {
        let cells: Vec<Vec<u8>> = children[..children.len() - 1]
            .iter()
            .zip(separators)
            .map(|(child, &rowid)| {
                let record = index_record(7, rowid);
                let mut cell = child.to_be_bytes().to_vec();
                cell.extend(varint(record.len() as u64));
                cell.extend(record);
                cell
            })
            .collect();
        page_with_cells(PAGE_BYTES as usize, 0x02, &cells, children.last().copied())
    }

    /// A table and an index on it, with their pages interleaved in the file.
    struct IndexedTable {
        model: Model,
        table_root: u32,
        /// The table's interior pages below the root, and each one's leaves.
        table_parents: Vec<u32>,
        /// The table leaf of every rowid (rowids 1..).
        leaf_of_row: BTreeMap<i64, u32>,
        index_root: u32,
        index_leaves: Vec<u32>,
        /// Rowids in the index's order, by index leaf.
        index_rows: Vec<Vec<i64>>,
    }

    impl IndexedTable {
        /// The table interior page whose child `leaf` is.
        fn parent_of(&self, leaf: u32) -> u32 {
            self.table_parents
                .iter()
                .copied()
                .find(|&parent| {
                    let page = self.model.page(parent);
                    let view = btree_page::interior_view(&page, parent, GEOMETRY).unwrap();
                    (0..view.child_count()).any(|i| view.child(&page, i) == Some(leaf))
                })
                .unwrap()
        }
    }

    /// A table of `parents * fanout` leaves of `rows_per_leaf` rows, rowids 1.., under a
    /// root (page 2) and `parents` interior pages; an index whose `index_leaves` leaves hold
    /// every row once, in an order unrelated to the rowids (`rowid_offset` shifts the
    /// rowids the index names: an index of another table).
    fn indexed_table(
        parents: u32,
        fanout: u32,
        rows_per_leaf: u32,
        index_leaves: u32,
        rowid_offset: i64,
    ) -> IndexedTable {
        let table_leaves = parents * fanout;
        let total = 3 + parents + table_leaves + index_leaves;
        let mut model = Model::new(total);
        model.pages.insert(1, header_page());
        let span = total - 3;
        let scatter = |i: u32| 4 + (i * 7919) % span;
        let table_root = 2;
        let index_root = 3;
        let table_parents: Vec<u32> = (0..parents).map(scatter).collect();
        let mut leaf_of_row = BTreeMap::new();
        let mut parent_keys = Vec::new();
        for (p, &parent) in table_parents.iter().enumerate() {
            let leaves: Vec<u32> = (0..fanout)
                .map(|l| scatter(parents + p as u32 * fanout + l))
                .collect();
            let mut keys = Vec::new();
            for (l, &leaf) in leaves.iter().enumerate() {
                let first = i64::from((p as u32 * fanout + l as u32) * rows_per_leaf) + 1;
                for rowid in first..first + i64::from(rows_per_leaf) {
                    leaf_of_row.insert(rowid, leaf);
                }
                keys.push(first + i64::from(rows_per_leaf) - 1);
            }
            parent_keys.push(*keys.last().unwrap());
            model.pages.insert(parent, table_interior(&leaves, &keys));
        }
        model
            .pages
            .insert(table_root, table_interior(&table_parents, &parent_keys));
        // The index's order: a permutation of the rowids.
        let rows = i64::from(table_leaves * rows_per_leaf);
        let mut order: Vec<i64> = (1..=rows).collect();
        let mut state = 0x9e37_79b9_u64;
        for i in (1..order.len()).rev() {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            order.swap(i, (state >> 33) as usize % (i + 1));
        }
        let leaves: Vec<u32> = (0..index_leaves)
            .map(|i| scatter(parents + table_leaves + i))
            .collect();
        let per_leaf = order.len().div_ceil(index_leaves as usize);
        let index_rows: Vec<Vec<i64>> = order
            .chunks(per_leaf)
            .map(|chunk| chunk.iter().map(|rowid| rowid + rowid_offset).collect())
            .collect();
        for (leaf, rowids) in leaves.iter().zip(&index_rows) {
            model.pages.insert(*leaf, index_leaf(rowids));
        }
        let separators: Vec<i64> = index_rows.iter().map(|rowids| rowids[0]).collect();
        model
            .pages
            .insert(index_root, index_interior(&leaves, &separators[1..]));
        IndexedTable {
            model,
            table_root,
            table_parents,
            leaf_of_row,
            index_root,
            index_leaves: leaves,
            index_rows,
        }
    }

    /// SQLite's own page cache: the last `capacity` pages it used. A page found there is not
    /// read from the file.
    struct PagerCache {
        pages: std::collections::VecDeque<u32>,
        capacity: usize,
    }

    impl PagerCache {
        fn new(capacity: usize) -> PagerCache {
            PagerCache {
                pages: std::collections::VecDeque::new(),
                capacity,
            }
        }

        /// Whether SQLite must read `page` from the file.
        fn miss(&mut self, page: u32) -> bool {
            if let Some(at) = self.pages.iter().position(|&p| p == page) {
                self.pages.remove(at);
                self.pages.push_back(page);
                return false;
            }
            if self.pages.len() == self.capacity {
                self.pages.pop_front();
            }
            self.pages.push_back(page);
            true
        }
    }

    /// Table-leaf reads SQLite made and, of them, those whose page was asked for before
    /// (arrived, where the model has a device latency); the same for the first
    /// [`FIRST_ROWS`] table-leaf reads after each index leaf.
    #[derive(Debug, Default)]
    struct RowReads {
        table_leaf_reads: u32,
        prefetched_before: u32,
        first_rows_reads: u32,
        first_rows_prefetched: u32,
    }

    /// Table-leaf reads after an index leaf that [`RowReads`] counts apart.
    const FIRST_ROWS: u32 = 4;

    /// SQLite's scan of `table`'s index, in order, looking each entry's row up in the
    /// table (`with_rows`), or not (a covering index). Counts from the fourth index leaf on:
    /// the table is first descended for the first leaf's rows, and the second leaf's rows verify
    /// the predictions.
    fn index_scan(
        table: &mut IndexedTable,
        readahead: &mut ReadAhead,
        with_rows: bool,
    ) -> RowReads {
        let mut pager = PagerCache::new(40);
        let mut counts = RowReads::default();
        let mut access = |model: &mut Model, readahead: &mut ReadAhead, page: u32| {
            if pager.miss(page) {
                let was_cached = model.cached.contains(&page);
                read(readahead, model, page);
                return Some(was_cached);
            }
            None
        };
        access(&mut table.model, readahead, 1);
        access(&mut table.model, readahead, table.index_root);
        for (number, leaf) in table.index_leaves.clone().into_iter().enumerate() {
            access(&mut table.model, readahead, leaf);
            if !with_rows {
                continue;
            }
            let mut leaf_reads = 0;
            for rowid in table.index_rows[number].clone() {
                let Some(&row_leaf) = table.leaf_of_row.get(&rowid) else {
                    continue;
                };
                access(&mut table.model, readahead, table.table_root);
                let parent = table.parent_of(row_leaf);
                access(&mut table.model, readahead, parent);
                let before = access(&mut table.model, readahead, row_leaf);
                if number >= 3 {
                    if let Some(was_cached) = before {
                        counts.table_leaf_reads += 1;
                        counts.prefetched_before += u32::from(was_cached);
                        if leaf_reads < FIRST_ROWS {
                            counts.first_rows_reads += 1;
                            counts.first_rows_prefetched += u32::from(was_cached);
                        }
                        leaf_reads += 1;
                    }
                }
                assert!(readahead.outstanding_pages() <= max_window_pages(PAGE_BYTES));
            }
        }
        counts
    }

    const GEOMETRY: Geometry = Geometry {
        page_size_bytes: PAGE_BYTES,
        usable_bytes: PAGE_BYTES,
    };

    #[test]
    fn an_index_scan_that_reads_its_rows_has_them_asked_for_ahead() {
        let mut table = indexed_table(8, 60, 4, 12, 0);
        let mut readahead = ReadAhead::new();
        let counts = index_scan(&mut table, &mut readahead, true);
        assert!(counts.table_leaf_reads > 1000, "{counts:?}");
        // Each index leaf's first rows go out with the leaf's read.
        assert!(
            counts.prefetched_before * 100 >= counts.table_leaf_reads * 98,
            "{counts:?}"
        );
        // Only the tree's pages, and no table leaf twice in one batch.
        let tree: BTreeSet<u32> = (2..=table.model.page_count).collect();
        assert!(model_prefetched_subset(&table.model, &tree));
    }

    #[test]
    fn an_index_leaf_s_first_rows_are_asked_for_before_sqlite_reads_that_leaf() {
        let mut table = indexed_table(8, 60, 4, 12, 0);
        // A device that takes 8 of SQLite's reads to deliver a page: a row asked for when
        // its index leaf is read arrives too late for the leaf's first row lookups.
        table.model.latency_reads = 8;
        let mut readahead = ReadAhead::new();
        let counts = index_scan(&mut table, &mut readahead, true);
        assert!(counts.first_rows_reads >= 8 * FIRST_ROWS, "{counts:?}");
        // The rows of the next index leaf follow the current leaf's in the window: the
        // scan's next leaf is read from the page cache, before SQLite reads it.
        assert!(
            counts.first_rows_prefetched * 100 >= counts.first_rows_reads * 95,
            "{counts:?}"
        );
        assert!(
            counts.prefetched_before * 100 >= counts.table_leaf_reads * 98,
            "{counts:?}"
        );
    }

    fn model_prefetched_subset(model: &Model, pages: &BTreeSet<u32>) -> bool {
        model.prefetched.iter().all(|page| pages.contains(page))
    }

    #[test]
    fn row_readahead_resumes_after_sleeping_through_index_leaves() {
        // SQLite's cache keeps the table's interior pages: after the first lookups no
        // descent shows them again, so the table path must survive read-ahead's sleep.
        // One row per leaf: no leaf is cached by an earlier row's read.
        let mut table = indexed_table(8, 60, 1, 12, 0);
        let mut readahead = ReadAhead::dormant();
        readahead.note_uncached_read();
        let mut pager = PagerCache::new(1000);
        let mut access = |model: &mut Model, readahead: &mut ReadAhead, page: u32| {
            if pager.miss(page) {
                read(readahead, model, page);
            }
        };
        access(&mut table.model, &mut readahead, 1);
        access(&mut table.model, &mut readahead, table.index_root);
        let mut after_waking = Vec::new();
        for (number, leaf) in table.index_leaves.clone().into_iter().enumerate() {
            if number == 4 {
                readahead.fall_asleep();
            }
            if number == 7 {
                readahead.note_uncached_read();
            }
            access(&mut table.model, &mut readahead, leaf);
            for rowid in table.index_rows[number].clone() {
                let row_leaf = table.leaf_of_row[&rowid];
                let parent = table.parent_of(row_leaf);
                access(&mut table.model, &mut readahead, table.table_root);
                access(&mut table.model, &mut readahead, parent);
                if number >= 8 {
                    after_waking.push(table.model.cached.contains(&row_leaf));
                }
                access(&mut table.model, &mut readahead, row_leaf);
            }
        }
        let prefetched = after_waking.iter().filter(|&&p| p).count();
        assert!(
            prefetched * 100 >= after_waking.len() * 95,
            "{prefetched} of {} rows prefetched after waking",
            after_waking.len()
        );
    }

    #[test]
    fn a_forgotten_dormant_readahead_samples_its_next_reads() {
        let mut readahead = ReadAhead::dormant();
        assert_eq!(readahead.page_size_bytes(), None);
        readahead.after_read(&header_page(), 0, &mut Model::new(16));
        assert_eq!(readahead.page_size_bytes(), Some(PAGE_BYTES));
        for _ in 0..READS_PER_SAMPLE {
            readahead.sample_this_read();
        }
        readahead.forget();
        // The burst's reads are all recorded, none sampled.
        for _ in 0..READS_RECORDED_AFTER_FORGET {
            assert_eq!(readahead.sample_this_read(), Sample::Record);
        }
        let after: Vec<Sample> = (0..READS_PER_SAMPLE * 4)
            .map(|_| readahead.sample_this_read())
            .collect();
        assert!(
            !after.iter().any(|sample| sample.is_recorded()),
            "{after:?}"
        );
        let sampled = after.iter().filter(|sample| sample.is_sampled()).count();
        assert_eq!(sampled, 4, "then one read in {READS_PER_SAMPLE}");
    }

    #[test]
    fn a_long_run_of_cached_reads_is_sampled_ever_more_rarely_until_a_lock_change_or_a_device_read()
    {
        let mut readahead = ReadAhead::dormant();
        readahead.after_read(&header_page(), 0, &mut Model::new(16));
        // The gaps between the sampled reads of `reads` reads in a row, all cached.
        let gaps = |readahead: &mut ReadAhead, reads: u32| -> Vec<u32> {
            let sampled: Vec<u32> = (0..reads)
                .filter(|_| readahead.sample_this_read().is_sampled())
                .collect();
            sampled.windows(2).map(|pair| pair[1] - pair[0]).collect()
        };
        let stretch = CACHED_SAMPLES_BEFORE_STRETCH as usize;
        let run = gaps(&mut readahead, 20_000);
        let mut expected = READS_PER_SAMPLE;
        let mut at = 0;
        while expected < MAX_READS_PER_SAMPLE {
            assert!(
                run[at..at + stretch - 1].iter().all(|&gap| gap == expected),
                "{expected} reads apart: {:?}",
                &run[at..at + stretch]
            );
            at += stretch;
            expected *= 2;
        }
        assert!(run[at..].iter().all(|&gap| gap == MAX_READS_PER_SAMPLE));
        assert!(
            run.len() - at > 200,
            "most of the run at the longest stretch"
        );
        // A lock change samples closely again (its burst's reads are recorded, not
        // sampled: the stretch is one read in READS_PER_SAMPLE from the first).
        readahead.forget();
        let after_forget = gaps(&mut readahead, 400);
        assert!(
            after_forget[..stretch - 1]
                .iter()
                .all(|&gap| gap == READS_PER_SAMPLE),
            "{after_forget:?}"
        );
        // So does a read that reached the device, which wakes read-ahead (awake, the
        // stretch stays one read in READS_PER_SAMPLE).
        gaps(&mut readahead, 20_000);
        readahead.note_uncached_read();
        assert!(readahead.is_awake());
        let awake = gaps(&mut readahead, 8 * READS_PER_SAMPLE);
        assert!(
            awake.iter().all(|&gap| gap == READS_PER_SAMPLE),
            "{awake:?}"
        );
    }

    /// Reads recorded, and reads sampled, among the first `reads` after each of
    /// `transactions` lock changes.
    fn sampled_per_transaction(
        readahead: &mut ReadAhead,
        transactions: u32,
        reads: u32,
    ) -> (Vec<u32>, Vec<u32>) {
        (0..transactions)
            .map(|_| {
                readahead.forget();
                let samples: Vec<Sample> =
                    (0..reads).map(|_| readahead.sample_this_read()).collect();
                let count = |f: fn(Sample) -> bool| samples.iter().filter(|&&x| f(x)).count();
                (
                    count(Sample::is_recorded) as u32,
                    count(Sample::is_sampled) as u32,
                )
            })
            .unzip()
    }

    #[test]
    fn bursts_back_off_by_transactions_however_many_lock_changes_each_makes() {
        // A rollback-mode read transaction takes and drops the database lock; a WAL-mode
        // one also takes and drops a read mark. A burst no read began stands for the lock
        // changes that follow, so each pattern backs off after the same transactions.
        let quiet = QUIET_BURSTS_BEFORE_BACKOFF as usize;
        for (before, after) in [(1, 0), (1, 1), (2, 2), (3, 1)] {
            let mut readahead = ReadAhead::dormant();
            readahead.after_read(&header_page(), 0, &mut Model::new(16));
            let recorded: Vec<usize> = (0..200)
                .map(|_| {
                    (0..before).for_each(|_| readahead.forget());
                    let recorded = (0..3)
                        .filter(|_| readahead.sample_this_read().is_recorded())
                        .count();
                    (0..after).for_each(|_| readahead.forget());
                    recorded
                })
                .collect();
            let bursts: Vec<usize> = (0..recorded.len()).filter(|&t| recorded[t] == 3).collect();
            assert_eq!(
                bursts[..=quiet],
                (0..=quiet).collect::<Vec<_>>(),
                "{before} + {after} lock changes: {recorded:?}"
            );
            let last_gaps: Vec<usize> = bursts
                .windows(2)
                .map(|p| p[1] - p[0])
                .rev()
                .take(3)
                .collect();
            assert!(
                last_gaps
                    .iter()
                    .all(|&gap| gap > 1 && gap <= MAX_FORGETS_BETWEEN_BURSTS as usize),
                "{before} + {after} lock changes: {bursts:?}"
            );
        }
    }

    #[test]
    fn page_one_is_parsed_again_asleep_only_when_its_header_bytes_change() {
        let mut readahead = ReadAhead::dormant();
        let header = header_page();
        assert!(
            readahead.follows_read_at(0, &header),
            "the geometry is unknown"
        );
        readahead.after_read(&header, 0, &mut Model::new(16));
        assert_eq!(readahead.page_size_bytes(), Some(PAGE_BYTES));
        // Asleep, page 1 again (whole, or SQLite's 100-byte header read) with the same
        // bytes has nothing to teach, nor has any other page.
        assert!(!readahead.follows_read_at(0, &header));
        assert!(!readahead.follows_read_at(0, &header[..100]));
        assert!(!readahead.follows_read_at(u64::from(PAGE_BYTES), &header));
        // Another connection's VACUUM changed the page size: parsed again.
        let vacuumed = header_page_claiming(8192);
        assert!(readahead.follows_read_at(0, &vacuumed));
        readahead.after_read(&vacuumed, 0, &mut Model::new(16));
        assert_eq!(readahead.page_size_bytes(), Some(8192));
        assert!(!readahead.follows_read_at(0, &vacuumed));
        assert!(readahead.follows_read_at(0, &header));
        // Bytes that are no header teach nothing, checked or not.
        let mut garbage = header.clone();
        garbage[21] = 0;
        assert!(readahead.follows_read_at(0, &garbage));
        readahead.after_read(&garbage, 0, &mut Model::new(16));
        assert_eq!(readahead.page_size_bytes(), Some(8192));
        // Awake, page 1 is a B-tree page like any other: followed.
        readahead.note_uncached_read();
        assert!(readahead.follows_read_at(0, &vacuumed));
    }

    #[test]
    fn the_burst_records_whole_pages_of_the_current_page_size_only() {
        let mut readahead = ReadAhead::dormant();
        let page = u64::from(PAGE_BYTES);
        let whole = PAGE_BYTES as usize;
        // Before page 1 was read, no length is a whole page.
        readahead.record_burst_read(page, whole);
        assert_eq!(readahead.watch.burst_len, 0);
        readahead.after_read(&header_page(), 0, &mut Model::new(16));
        readahead.forget();
        readahead.record_burst_read(0, 100);
        readahead.record_burst_read(24, 16);
        readahead.record_burst_read(page, whole);
        readahead.record_burst_read(2 * page, whole);
        assert_eq!(readahead.watch.burst_len, 2);
        assert_eq!(readahead.watch.burst_offsets[..2], [page, 2 * page]);
        // Never more than the record holds.
        (0..2 * BURST_PAGES as u64).for_each(|n| readahead.record_burst_read(n * page, whole));
        assert_eq!(readahead.watch.burst_len as usize, BURST_PAGES);
        // Offsets in pages of another size mean nothing once the page size changed.
        let vacuumed = header_page_claiming(8192);
        readahead.after_read(&vacuumed, 0, &mut Model::new(16));
        assert_eq!(readahead.watch.burst_len, 0);
        readahead.record_burst_read(page, whole);
        assert_eq!(readahead.watch.burst_len, 0);
        readahead.record_burst_read(8192, 8192);
        assert_eq!(readahead.watch.burst_len, 1);
    }

    #[test]
    fn bursts_of_samples_back_off_over_cached_transactions_and_return_after_a_device_read() {
        let mut readahead = ReadAhead::dormant();
        readahead.after_read(&header_page(), 0, &mut Model::new(16));
        // Lock changes each followed by 3 reads, all cached: a burst at each of the first
        // QUIET_BURSTS_BEFORE_BACKOFF + 1, then 2, 4 and 8 lock changes apart, then every
        // MAX_FORGETS_BETWEEN_BURSTS.
        let (sampled, probed) = sampled_per_transaction(&mut readahead, 200, 3);
        let bursts: Vec<usize> = (0..sampled.len()).filter(|&t| sampled[t] == 3).collect();
        let quiet = QUIET_BURSTS_BEFORE_BACKOFF as usize;
        assert_eq!(
            bursts[..=quiet],
            (0..=quiet).collect::<Vec<_>>(),
            "{sampled:?}"
        );
        let gaps: Vec<usize> = bursts[quiet..].windows(2).map(|p| p[1] - p[0]).collect();
        assert_eq!(&gaps[..4], &[2, 4, 8, 16], "{bursts:?}");
        assert!(
            gaps.iter()
                .all(|&gap| gap <= MAX_FORGETS_BETWEEN_BURSTS as usize),
            "{gaps:?}"
        );
        assert_eq!(gaps.last(), Some(&(MAX_FORGETS_BETWEEN_BURSTS as usize)));
        // Bursts or not, one read in READS_PER_SAMPLE is sampled.
        let between: u32 = probed[100..124].iter().sum();
        assert_eq!(between, 24 * 3 / READS_PER_SAMPLE);
        // A read that went to the device wakes it; asleep again, a burst at every lock
        // change until bursts find the data cached again.
        readahead.note_uncached_read();
        assert!(readahead.is_awake());
        readahead.fall_asleep();
        assert_eq!(
            &sampled_per_transaction(&mut readahead, 4, 3).0[..2],
            &[3, 3]
        );
    }

    #[test]
    fn readahead_woken_in_the_middle_of_a_scan_follows_it_from_the_next_interior_page() {
        // The root and the first parent were read while it slept (no burst was due).
        let (mut model, parents, leaves) = two_level_tree(6, 40);
        let mut readahead = ReadAhead::dormant();
        for page in [1, 2, parents[0]]
            .into_iter()
            .chain(leaves[0][..20].iter().copied())
        {
            read(&mut readahead, &mut model, page);
        }
        assert!(model.prefetched.is_empty());
        readahead.note_uncached_read();
        for &leaf in &leaves[0][20..] {
            read(&mut readahead, &mut model, leaf);
        }
        // From the next parent on, each parent's leaves are asked for ahead: only the
        // parent and the two leaves that show the scan wait.
        for (parent, own) in parents[1..].iter().zip(&leaves[1..]) {
            let mut missed = u32::from(!model.cached.contains(parent));
            read(&mut readahead, &mut model, *parent);
            for &leaf in own {
                missed += u32::from(!model.cached.contains(&leaf));
                read(&mut readahead, &mut model, leaf);
            }
            assert!(missed <= 3, "{missed} of {} reads missed", own.len() + 1);
        }
    }

    /// SQLite's read of `page` as `file/rw.rs` makes it: sampled or recorded as read-ahead
    /// says, then followed.
    fn read_as_sqlite(readahead: &mut ReadAhead, model: &mut Model, page: u32) {
        let offset = u64::from(page - 1) * u64::from(PAGE_BYTES);
        if readahead.sample_this_read().is_recorded() {
            readahead.record_burst_read(offset, PAGE_BYTES as usize);
        }
        let data = serve(model, page);
        if readahead.follows_read_at(offset, &data) {
            readahead.after_read(&data, offset, model);
        }
    }

    /// A read-ahead woken by a device read, its transaction ended, and the tree it reads.
    fn awake_after_a_lock_change() -> (ReadAhead, Model, Vec<u32>, Vec<Vec<u32>>) {
        let (mut model, parents, leaves) = two_level_tree(6, 40);
        let mut readahead = ReadAhead::dormant();
        read_as_sqlite(&mut readahead, &mut model, 1);
        readahead.note_uncached_read();
        readahead.forget();
        assert!(readahead.is_awake());
        (readahead, model, parents, leaves)
    }

    #[test]
    fn awake_a_transaction_of_few_reads_is_recorded_and_never_followed() {
        let (mut readahead, mut model, parents, leaves) = awake_after_a_lock_change();
        for lookup in 0..4 {
            // Root, parent, leaf: a point lookup.
            for page in [2, parents[lookup], leaves[lookup][lookup * 3]] {
                read_as_sqlite(&mut readahead, &mut model, page);
            }
            assert_eq!(readahead.depth, 0, "no path followed");
            assert!(readahead.watch.forgotten, "nothing learnt");
            readahead.forget();
        }
        assert!(readahead.is_awake());
        assert!(model.prefetched.is_empty(), "{:?}", model.prefetched);
        assert!(model.page_counts_asked.is_empty(), "no fstat");
        assert_eq!(model.peeks, 0, "nothing read again from the page cache");
    }

    #[test]
    fn awake_a_scan_is_followed_from_the_read_after_the_deferred_ones_its_start_replayed() {
        let (mut readahead, mut model, parents, leaves) = awake_after_a_lock_change();
        let deferred = READS_DEFERRED_AWAKE as usize;
        // Root, parent and the first leaves: recorded only.
        let first: Vec<u32> = [2, parents[0]]
            .into_iter()
            .chain(leaves[0][..deferred - 2].iter().copied())
            .collect();
        for &page in &first {
            read_as_sqlite(&mut readahead, &mut model, page);
        }
        assert!(model.prefetched.is_empty());
        // The next read replays them and sees the scan: the window ahead of it is asked for.
        let next = deferred - 2;
        read_as_sqlite(&mut readahead, &mut model, leaves[0][next]);
        let ahead = &leaves[0][next + 1..next + 1 + FIRST_WINDOW_PAGES];
        assert!(
            ahead.iter().all(|page| model.prefetched.contains(page)),
            "{:?} lacks some of {ahead:?}",
            model.prefetched
        );
        assert!(model.prefetched.iter().all(|page| leaves[0].contains(page)));
        // A transaction ending inside the deferred reads leaves nothing to the next.
        readahead.forget();
        assert_eq!(readahead.watch.burst_len, 0);
    }

    #[test]
    fn a_wake_follows_the_descent_the_burst_recorded_in_its_transaction_only() {
        // A transaction descends root, parent and two leaves asleep (the burst records
        // them), and the third leaf's read wakes read-ahead.
        let run = |lock_change_before_wake: bool| {
            let (mut model, parents, leaves) = two_level_tree(6, 40);
            let mut readahead = ReadAhead::dormant();
            read(&mut readahead, &mut model, 1);
            readahead.forget();
            for page in [2, parents[0], leaves[0][0], leaves[0][1]] {
                read_as_sqlite(&mut readahead, &mut model, page);
            }
            assert!(!readahead.is_awake() && model.prefetched.is_empty());
            if lock_change_before_wake {
                readahead.forget();
            }
            readahead.note_uncached_read();
            read(&mut readahead, &mut model, leaves[0][2]);
            (model.prefetched, leaves[0].clone())
        };
        // The descent is replayed: the scan of the parent's leaves is known at once (from
        // the replayed leaves on, the one being read included).
        let (prefetched, leaves) = run(false);
        let ahead = &leaves[3..3 + FIRST_WINDOW_PAGES];
        assert!(
            ahead.iter().all(|page| prefetched.contains(page)),
            "{prefetched:?} lacks some of {ahead:?}"
        );
        assert!(prefetched.iter().all(|page| leaves[2..].contains(page)));
        // A record does not outlive its transaction: woken after another lock change, the
        // leaf alone shows no scan.
        let (prefetched, _) = run(true);
        assert!(prefetched.is_empty(), "{prefetched:?}");
    }

    #[test]
    fn a_wake_after_the_record_ended_takes_up_the_scan_where_sqlite_is() {
        // The burst recorded the descent and the first leaves; SQLite read on unrecorded
        // (the data cached), and a later leaf's read wakes read-ahead.
        let (mut model, parents, leaves) = two_level_tree(6, 40);
        let mut readahead = ReadAhead::dormant();
        read(&mut readahead, &mut model, 1);
        readahead.forget();
        for &page in [2, parents[0]].iter().chain(&leaves[0][..20]) {
            read_as_sqlite(&mut readahead, &mut model, page);
        }
        assert!(readahead.watch.burst_len < 22, "the record ended");
        assert!(model.prefetched.is_empty());
        readahead.note_uncached_read();
        read(&mut readahead, &mut model, leaves[0][20]);
        read(&mut readahead, &mut model, leaves[0][21]);
        let ahead = &leaves[0][22..22 + FIRST_WINDOW_PAGES];
        assert!(
            ahead.iter().all(|page| model.prefetched.contains(page)),
            "{:?} lacks some of {ahead:?}",
            model.prefetched
        );
    }

    #[test]
    fn an_index_scan_of_cached_pages_asks_for_nothing() {
        let mut table = indexed_table(8, 60, 4, 12, 0);
        table.model.cached = (1..=table.model.page_count).collect();
        let mut readahead = ReadAhead::new();
        index_scan(&mut table, &mut readahead, true);
        assert_eq!(table.model.prefetched, Vec::<u32>::new());
    }

    #[test]
    fn a_covering_index_scan_asks_for_no_table_leaf() {
        let mut table = indexed_table(8, 60, 4, 12, 0);
        let mut readahead = ReadAhead::new();
        // A lookup first, so a table path is there to map rows with.
        read(&mut readahead, &mut table.model, 1);
        read(&mut readahead, &mut table.model, table.table_root);
        read(&mut readahead, &mut table.model, table.table_parents[0]);
        index_scan(&mut table, &mut readahead, false);
        let table_leaves: BTreeSet<u32> = table.leaf_of_row.values().copied().collect();
        assert!(
            table
                .model
                .prefetched
                .iter()
                .all(|page| !table_leaves.contains(page)),
            "a table leaf was asked for"
        );
    }

    #[test]
    fn rows_of_another_table_are_never_asked_for() {
        // The index names rowids past the table's: every prediction is the last leaf.
        let mut table = indexed_table(8, 60, 4, 12, 1 << 20);
        let mut readahead = ReadAhead::new();
        read(&mut readahead, &mut table.model, 1);
        read(&mut readahead, &mut table.model, table.table_root);
        read(&mut readahead, &mut table.model, table.table_parents[0]);
        // SQLite reads other rows of the table for each entry (a join on another key), in
        // no order a scan would follow.
        let mut pager = PagerCache::new(40);
        let leaves: Vec<u32> = table.leaf_of_row.values().copied().collect();
        let mut rows = (0..leaves.len()).map(|i| leaves[(i * 7919) % leaves.len()]);
        read(&mut readahead, &mut table.model, table.index_root);
        let peeks_before_scan = table.model.peeks;
        for (number, leaf) in table.index_leaves.clone().into_iter().enumerate() {
            if pager.miss(leaf) {
                read(&mut readahead, &mut table.model, leaf);
            }
            for _ in 0..table.index_rows[number].len() {
                let row_leaf = rows.next().unwrap();
                if pager.miss(row_leaf) {
                    read(&mut readahead, &mut table.model, row_leaf);
                }
            }
        }
        // Every prediction is the table's last leaf: never asked for.
        let last_leaf = *table.leaf_of_row.values().last().unwrap();
        assert!(!table.model.prefetched.contains(&last_leaf));
        assert!(
            readahead.rows.stopped(),
            "row read-ahead went on predicting"
        );
        // It gave up: no interior page copies after the first leaves.
        assert!(
            table.model.peeks - peeks_before_scan < 40,
            "{}",
            table.model.peeks
        );
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(300))]

        /// Whatever SQLite reads, and whatever the pages hold, read-ahead asks only for
        /// pages inside the file, never more than its window, copies a bounded number of
        /// pages per read, and does not panic.
        #[test]
        fn any_reads_of_any_bytes_stay_in_bounds(
            reads in proptest::collection::vec((1u32..400, proptest::prelude::any::<u8>()), 1..300),
            garbage in proptest::collection::vec(proptest::prelude::any::<u8>(), 64),
            indexed in proptest::prelude::any::<bool>(),
        ) {
            let (mut model, _, _) = if indexed {
                (indexed_table(4, 20, 4, 6, 0).model, Vec::new(), Vec::new())
            } else {
                two_level_tree(8, 40)
            };
            // Some pages get corrupted bytes at a spot chosen by the case.
            for (i, chunk) in garbage.chunks(8).enumerate() {
                let page = 3 + (u32::from(chunk[0]) % (model.page_count - 2));
                let mut bytes = model.page(page);
                let at = 8 + (usize::from(chunk[1]) * 13 + i) % 200;
                bytes[at..at + 6].copy_from_slice(&chunk[2..8]);
                model.pages.insert(page, bytes);
            }
            let mut readahead = ReadAhead::new();
            read(&mut readahead, &mut model, 1);
            for (page, evict) in reads {
                let page = 1 + page % model.page_count;
                if evict % 5 == 0 {
                    model.cached.clear();
                }
                let before = model.prefetched.len();
                let peeks_before = model.peeks;
                read(&mut readahead, &mut model, page);
                proptest::prop_assert!(model.prefetched.len() - before <= max_window_pages(PAGE_BYTES) + 1);
                // Pages copied from the page cache: two mappings of rows and the next index
                // leaf, and the next siblings of each level.
                proptest::prop_assert!(
                    model.peeks - peeks_before
                        <= 2 * rows::COPIES_PER_MAPPING as u32 + 1 + (MAX_PEEKED_SIBLINGS * MAX_DEPTH) as u32
                );
                proptest::prop_assert!(readahead.outstanding_pages() <= max_window_pages(PAGE_BYTES) + 1);
            }
        }
    }
}
