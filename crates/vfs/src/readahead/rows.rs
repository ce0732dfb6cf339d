//! Row read-ahead: the table leaves an index scan will read next.
//!
//! A query that scans an index and reads each entry's row (`… FROM r WHERE a BETWEEN ? AND ?`
//! with columns outside the index, an index-ordered join) reads the index's leaves in order,
//! which the path follows, and for every entry the table leaf holding its row: a page
//! anywhere in the table, each read alone, at queue depth 1. The index leaf SQLite just read
//! names those rows, since every entry's record ends with its rowid
//! ([`btree_page::index_leaf_rowids`]), and the table's interior pages say which leaf holds
//! each rowid ([`btree_page::InteriorView::table_child_for`]): the leaves SQLite will read next are
//! known before it asks for them.
//!
//! **Where the table comes from.** Read-ahead keeps two paths (`ReadAhead::parked`): while
//! SQLite reads the index's leaves and looks rows up in the table, one path is the index's and
//! the other the table's, kept by the lookups' descents. The table path's root copy and the
//! interior pages below it map a rowid to its leaf. An interior page not on the path is read
//! from the page cache without waiting (the kernel has it once SQLite has read it on a
//! descent) into a bounded set of copies, found by a binary search on the page number;
//! one the kernel does not have leaves its rows unpredicted. Every interior page is parsed
//! whole once before a child of it is predicted, so a prediction is always a page inside
//! the file. Rows come in random order, so the copies must hold the whole level above the
//! leaves ([`INTERIOR_COPIES_BYTES`]): where they do not, most rows re-read and re-parse
//! one, and the parser takes much of the query's CPU time.
//!
//! **Across index leaves.** When the rows of the index leaf SQLite read last run out before
//! the window does, the index scan's next leaf (the next child of the index path's level
//! above its leaves, which the path's own scan asked for) is read from the page cache and
//! its rows follow in the predictions. SQLite's read of that leaf, with the same bytes,
//! carries them on; otherwise they are dropped. So SQLite does not wait for each index
//! leaf's first rows, which would otherwise be asked for only when it reads the leaf.
//!
//! **Dry run first.** Nothing is asked for until the predictions have matched SQLite's own
//! table-leaf reads [`VERIFY_HITS`] times within one index leaf, more often than they
//! missed. A scan of a covering index (no row reads) costs a copy of each index leaf; a
//! join whose rows live in another table, a `WITHOUT ROWID` table whose key happens to end in
//! an integer, or a table path left by an unrelated query costs a parse and a few lookups per
//! index leaf until [`FAILED_LEAVES_TO_STOP`] leaves in a row have matched nothing; then row
//! read-ahead stops until the paths are forgotten.
//!
//! **Bounds.** Predictions for two index leaves at a time (the one SQLite read and the
//! next), in buffers allocated once at the capacity of two pages' cells and a page; at
//! most [`INTERIOR_COPIES_BYTES`] of interior-page copies and one spare page; the
//! pages asked for count in the file's window and the process's budget like the path's.
//! Whatever the pages hold, one of SQLite's reads costs at most twice
//! [`COPIES_PER_MAPPING`] copies (and whole-page parses) of interior pages: a row that
//! needs more waits for the next read. A page that fails the parse is read into the spare,
//! so it replaces no held copy, and is not copied again until the paths are forgotten.

use crate::btree_page::{self, Geometry, MAX_DEPTH};

/// Pages of the first batch of a scan; each further batch doubles it up to the maximum.
pub(crate) const FIRST_WINDOW_PAGES: usize = 8;

/// The table's path: copies of its interior pages from the root down, as SQLite last
/// descended it.
pub(super) trait TablePath {
    fn depth(&self) -> usize;
    /// The page number and bytes of the page at `depth` (below [`TablePath::depth`]).
    fn page(&self, depth: usize) -> (u32, &[u8]);
}

/// Copies of pages the kernel has cached.
pub(super) trait CachedPages {
    /// Copies page `page_number` into `buf` (one page) if, and only if, the kernel has it
    /// cached; never waits for the device.
    fn read_if_cached(&mut self, page_number: u32, buf: &mut [u8]) -> bool;
}

/// Matches of SQLite's table-leaf reads within one index leaf before pages are asked for.
pub(crate) const VERIFY_HITS: u32 = 4;
/// Index leaves in a row whose predictions matched none of SQLite's reads before row
/// read-ahead stops.
pub(crate) const FAILED_LEAVES_TO_STOP: u32 = 2;
/// How far past SQLite's position a read is looked for among the predictions: the rows
/// SQLite finds in its own cache are skipped without a read.
pub(crate) const MATCH_SPAN: usize = 32;
/// Most bytes of table interior pages copied from the page cache for the mapping: room
/// for the level above the leaves of a rowid table of a few hundred MiB of 4 KiB pages
/// (one interior page per 200–400 leaves). Rows map to leaves in random order, so a table whose
/// interior pages do not fit re-reads and re-parses one for most rows (about 10 µs for a
/// 4 KiB page).
pub(crate) const INTERIOR_COPIES_BYTES: usize = 1 << 20;
/// Fewest and most copies, whatever the page size.
const MIN_INTERIOR_COPIES: usize = 4;
const MAX_INTERIOR_COPIES: usize = 256;
/// Most interior pages one mapping of rows copies from the page cache (each copy is parsed
/// whole): SQLite's read of a table leaf maps rows once to match it, and each read maps
/// them once more to fill the window, so a read costs at most twice this many copies
/// whatever the pages hold. A row whose mapping needs a copy past this waits for the next
/// read. A table whose interior pages the copies hold needs none after its first rows.
pub(crate) const COPIES_PER_MAPPING: usize = 8;

/// The row read-ahead state of one file (see the module documentation).
pub(super) struct Rows {
    /// The index leaf SQLite read last (capacity: a page, allocated at its first use),
    /// parsed into `rowids` at the first table-leaf read after it.
    index_page: Vec<u8>,
    index_page_number: u32,
    parsed: bool,
    /// Its entries' rowids in key order, then the next index leaf's, and how many were
    /// mapped into `leaves` (capacity: two pages' cells).
    rowids: Vec<i64>,
    mapped: usize,
    /// The table leaves of `rowids[..mapped]`, a leaf repeated by consecutive rows once.
    leaves: Vec<u32>,
    /// `leaves[..consumed]` were read by SQLite or passed over.
    consumed: usize,
    /// `leaves[..issued_until]` were asked for (or read).
    issued_until: usize,
    pub(super) window_pages: usize,
    /// SQLite's table-leaf reads since the index leaf that the predictions named, and not.
    hits: u32,
    misses: u32,
    verified: bool,
    failed_leaves: u32,
    stopped: bool,
    /// The level of the index's path whose children are the index leaves.
    pub(super) index_depth: usize,
    /// The index leaf after `index_page` in the scan, read from the page cache when the
    /// predictions of `index_page` ran short of the window (capacity: a page, allocated at
    /// its first use); 0: none. Its rowids follow in `rowids` from `next_rowids_start`,
    /// and its leaves in `leaves` from `next_leaves_start` once the first is mapped, so
    /// the rows after an index leaf's last are asked for before SQLite reads the next
    /// index leaf. When SQLite reads that page and finds the same bytes, its predictions
    /// carry on ([`Rows::enter_index_leaf`]).
    next_index_page: Vec<u8>,
    next_index_page_number: u32,
    next_rowids_start: usize,
    next_leaves_start: Option<usize>,
    /// Scratch for the next index leaf's rowids (capacity: a page's cells).
    next_rowids: Vec<i64>,
    /// Table interior pages copied from the page cache and parsed whole: the page number
    /// of each copy (0: empty).
    copy_pages: Vec<u32>,
    copies: Vec<Vec<u8>>,
    /// The copies held, as (page number, index in `copies`) sorted by page number: a
    /// lookup is a binary search (capacity: [`MAX_INTERIOR_COPIES`], allocated with the
    /// first copy).
    copy_index: Vec<(u32, usize)>,
    next_copy: usize,
    /// The page a copy is read into before it takes a copy's place (capacity: a page,
    /// allocated at its first use): a page that turns out not to be a table interior page
    /// leaves every copy held.
    spare_copy: Vec<u8>,
    /// Copies the mapping under way may still make ([`COPIES_PER_MAPPING`]).
    copies_left: usize,
    /// A table interior page the kernel did not have: not asked again until SQLite reads
    /// one.
    missing_interior: u32,
    /// A page copied from the page cache that failed the whole-page parse as a table
    /// interior page: not copied again until the paths are forgotten.
    refused_interior: u32,
    /// A page of the table path that failed the whole-page parse: not parsed again until
    /// the paths are forgotten.
    refused_path_page: u32,
    /// Pages of the table path parsed whole, by depth.
    validated: [u32; MAX_DEPTH],
    /// Scratch for whole-page parses (capacity: any interior page's children).
    children: Vec<u32>,
    /// Table leaves asked for or read during the scan: rows share leaves, and the kernel
    /// has those already (`Seen`).
    seen: Seen,
}

/// Whether `page` passes the whole-page parse as a table interior page (`children`:
/// scratch of any interior page's capacity): only then is a child of it predicted.
fn parses_as_table_interior(
    page: &[u8],
    page_number: u32,
    geometry: Geometry,
    page_count: u32,
    children: &mut Vec<u32>,
) -> bool {
    btree_page::interior_children(page, page_number, geometry, page_count, children)
        == Ok(btree_page::PageKind::TableInterior)
}

/// Most bits of [`Seen`]: 1 MiB, two bits per page of a 16 GiB database of 4 KiB pages.
const MAX_SEEN_BITS: usize = 1 << 23;

/// Bits of [`Seen`] remembered one by one since its last clear: up to this many set, a
/// clear unsets them alone instead of zeroing the whole map.
const SEEN_CLEARED_ONE_BY_ONE: usize = 32;

/// Pages asked for or read, a bit per page number modulo its size: a power of two at
/// least twice the file's page count when first used (at most [`MAX_SEEN_BITS`]), so the
/// half-full clear below never comes while each page has a bit of its own. In a larger
/// file two pages may share a bit, and a page never asked for may pass as seen: one
/// prefetch missed. Cleared when half its bits are set, so it never fills up, and at every
/// lock change (`Rows::forget`): a transaction of point lookups sets a bit or two, so the
/// first bits set are remembered and a clear of few unsets just those; zeroing the map
/// (1 MiB for a database of 32 GiB) at every transaction would cost more than its reads.
struct Seen {
    bits: Vec<u64>,
    set_count: usize,
    /// The first bits set since the last clear, and how many were set in all (past the
    /// array's length, a clear zeroes the map).
    first_set: [u32; SEEN_CLEARED_ONE_BY_ONE],
    sets_since_clear: usize,
}

impl Seen {
    fn new() -> Seen {
        Seen {
            bits: Vec::new(),
            set_count: 0,
            first_set: [0; SEEN_CLEARED_ONE_BY_ONE],
            sets_since_clear: 0,
        }
    }

    /// Marks `page_number`; whether it was marked before.
    fn test_and_set(&mut self, page_number: u32) -> bool {
        let Some((word, mask)) = self.bit_of(page_number) else {
            return false;
        };
        if self.bits[word] & mask != 0 {
            return true;
        }
        if self.set_count >= self.bits.len() * 64 / 2 {
            self.clear();
        }
        self.bits[word] |= mask;
        self.set_count += 1;
        if let Some(slot) = self.first_set.get_mut(self.sets_since_clear) {
            *slot = page_number;
        }
        self.sets_since_clear += 1;
        false
    }

    /// Unmarks `page_number` (it was not asked for after all).
    fn unset(&mut self, page_number: u32) {
        let Some((word, mask)) = self.bit_of(page_number) else {
            return;
        };
        if self.bits[word] & mask != 0 {
            self.bits[word] &= !mask;
            self.set_count -= 1;
        }
    }

    /// The word and mask of `page_number`'s bit; `None` before the bits are allocated.
    fn bit_of(&self, page_number: u32) -> Option<(usize, u64)> {
        let bit_count = self.bits.len() * 64;
        if bit_count == 0 {
            return None;
        }
        // A power of two: the mask is the modulo.
        let bit = page_number as usize & (bit_count - 1);
        Some((bit / 64, 1u64 << (bit % 64)))
    }

    /// Unsets every bit: one by one when few were set since the last clear (a bit
    /// `unset` since is simply unset again), else by zeroing the map.
    fn clear(&mut self) {
        match self.first_set.get(..self.sets_since_clear) {
            Some(pages) => {
                for &page_number in pages {
                    if let Some((word, mask)) = self.bit_of(page_number) {
                        self.bits[word] &= !mask;
                    }
                }
            }
            None => self.bits.fill(0),
        }
        self.set_count = 0;
        self.sets_since_clear = 0;
    }

    /// Allocates the bits for a file of `page_count` pages, once.
    fn allocate(&mut self, page_count: u32) {
        if self.bits.is_empty() {
            let bit_count = (2 * page_count as usize)
                .next_power_of_two()
                .clamp(64, MAX_SEEN_BITS);
            self.bits = vec![0; bit_count / 64];
        }
    }
}

impl Rows {
    pub(super) fn new() -> Rows {
        Rows {
            index_page: Vec::new(),
            index_page_number: 0,
            parsed: false,
            rowids: Vec::new(),
            mapped: 0,
            leaves: Vec::new(),
            consumed: 0,
            issued_until: 0,
            window_pages: FIRST_WINDOW_PAGES,
            hits: 0,
            misses: 0,
            verified: false,
            failed_leaves: 0,
            stopped: false,
            index_depth: 0,
            next_index_page: Vec::new(),
            next_index_page_number: 0,
            next_rowids_start: 0,
            next_leaves_start: None,
            next_rowids: Vec::new(),
            copy_pages: Vec::new(),
            copies: Vec::new(),
            copy_index: Vec::new(),
            next_copy: 0,
            spare_copy: Vec::new(),
            copies_left: 0,
            missing_interior: 0,
            refused_interior: 0,
            refused_path_page: 0,
            validated: [0; MAX_DEPTH],
            children: Vec::new(),
            seen: Seen::new(),
        }
    }

    /// Forgets everything learnt of the file's pages (another connection may have changed
    /// them); the buffers stay.
    pub(super) fn forget(&mut self) {
        self.drop_predictions();
        self.index_page_number = 0;
        self.verified = false;
        self.failed_leaves = 0;
        self.stopped = false;
        self.window_pages = FIRST_WINDOW_PAGES;
        self.copy_pages.fill(0);
        self.copy_index.clear();
        self.missing_interior = 0;
        self.refused_interior = 0;
        self.refused_path_page = 0;
        self.validated = [0; MAX_DEPTH];
        self.seen.clear();
    }

    fn drop_predictions(&mut self) {
        self.parsed = false;
        self.rowids.clear();
        self.mapped = 0;
        self.leaves.clear();
        self.consumed = 0;
        self.issued_until = 0;
        self.hits = 0;
        self.misses = 0;
        self.next_index_page_number = 0;
        self.next_rowids_start = 0;
        self.next_leaves_start = None;
    }

    /// SQLite read the index leaf the predictions had read ahead: they carry on from its
    /// first row, and the previous leaf's are dropped (those asked for and not read no
    /// longer count as outstanding, as at any other index leaf).
    fn continue_into_next_leaf(&mut self) {
        assert!(self.next_index_page_number != 0);
        assert!(self.mapped >= self.next_rowids_start);
        let leaves_start = self.next_leaves_start.unwrap_or(self.leaves.len());
        self.rowids.drain(..self.next_rowids_start);
        self.mapped -= self.next_rowids_start;
        self.leaves.drain(..leaves_start);
        self.consumed = self.consumed.saturating_sub(leaves_start);
        self.issued_until = self.issued_until.saturating_sub(leaves_start);
        self.hits = 0;
        self.misses = 0;
        self.next_index_page_number = 0;
        self.next_rowids_start = 0;
        self.next_leaves_start = None;
    }

    /// Nothing asked for is counted any longer (read-ahead fell asleep): the predictions
    /// stay, to be matched when it wakes.
    pub(super) fn drop_outstanding(&mut self) {
        self.issued_until = self.consumed;
    }

    /// Whether row read-ahead gave up on the scan (its predictions matched nothing).
    #[cfg(test)]
    pub(super) fn stopped(&self) -> bool {
        self.stopped
    }

    /// Whether a table leaf SQLite reads is matched against predictions
    /// ([`Rows::note_table_leaf`], which then needs the file's page count): an index
    /// leaf's rows are being followed.
    pub(super) fn is_tracking(&self) -> bool {
        !self.stopped && self.index_page_number != 0
    }

    /// Whether pages may be asked for: the predictions have matched SQLite's reads.
    pub(super) fn verified(&self) -> bool {
        self.verified && !self.stopped
    }

    /// Pages asked for and not yet read or passed.
    pub(super) fn outstanding(&self) -> usize {
        self.issued_until.saturating_sub(self.consumed)
    }

    /// SQLite read index leaf `page_number` (`data`), a child of the index path's level
    /// `index_depth`: the rows it names are the next ones looked up. Judges the
    /// predictions of the leaf before it.
    pub(super) fn enter_index_leaf(&mut self, data: &[u8], page_number: u32, index_depth: usize) {
        if self.stopped {
            return;
        }
        if self.mapped > 0 {
            if self.hits == 0 {
                self.verified = false;
                self.failed_leaves += 1;
                self.stopped = self.failed_leaves >= FAILED_LEAVES_TO_STOP;
            } else {
                self.failed_leaves = 0;
            }
        }
        let read_ahead = self.next_index_page_number == page_number
            && page_number != 0
            && self.next_index_page[..] == *data;
        if read_ahead {
            self.continue_into_next_leaf();
            // The same bytes: the buffers trade places instead of a copy.
            std::mem::swap(&mut self.index_page, &mut self.next_index_page);
        } else {
            self.drop_predictions();
            if self.index_page.capacity() < data.len() {
                // Once per file and page size.
                self.index_page = Vec::with_capacity(data.len());
            }
            self.index_page.clear();
            self.index_page.extend_from_slice(data);
        }
        self.index_page_number = page_number;
        self.index_depth = index_depth;
    }

    /// SQLite read a table interior page: one the kernel did not have may be there now.
    pub(super) fn note_table_interior(&mut self) {
        self.missing_interior = 0;
    }

    /// SQLite read table leaf `page_number`: matched against the predictions.
    pub(super) fn note_table_leaf(
        &mut self,
        page_number: u32,
        table: &(impl TablePath + ?Sized),
        geometry: Geometry,
        page_count: u32,
        source: &mut impl CachedPages,
    ) {
        if !self.is_tracking() {
            return;
        }
        self.seen.allocate(page_count);
        self.seen.test_and_set(page_number);
        self.copies_left = COPIES_PER_MAPPING;
        self.map_through(
            self.consumed + MATCH_SPAN,
            table,
            geometry,
            page_count,
            source,
        );
        let span_end = self.leaves.len().min(self.consumed + MATCH_SPAN);
        match self.leaves[self.consumed.min(span_end)..span_end]
            .iter()
            .position(|&leaf| leaf == page_number)
        {
            Some(offset) => {
                self.consumed += offset + 1;
                self.issued_until = self.issued_until.max(self.consumed);
                self.hits += 1;
                if self.hits >= VERIFY_HITS && self.hits > self.misses {
                    self.verified = true;
                }
            }
            None => self.misses += 1,
        }
    }

    /// Appends to `batch` the predictions to ask for now, if verified: up to the window
    /// past SQLite's position, refilled when half of it was read, at most `most`, less the
    /// leaves asked for or read lately. Marks them asked for, and returns the mark before,
    /// for [`Rows::unissue`]. When the index leaf's rows run out before the window does,
    /// the rows of `next_index_leaf` (the index scan's next leaf) follow if the kernel has
    /// that page.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn next_batch(
        &mut self,
        max_window: usize,
        most: usize,
        next_index_leaf: Option<u32>,
        table: &(impl TablePath + ?Sized),
        geometry: Geometry,
        page_count: u32,
        source: &mut impl CachedPages,
        batch: &mut Vec<u32>,
    ) -> usize {
        let issued_before = self.issued_until;
        if !self.verified() || self.index_page_number == 0 {
            return issued_before;
        }
        let window = self.window_pages.min(max_window);
        if self.outstanding() > window / 2 {
            return issued_before;
        }
        self.copies_left = COPIES_PER_MAPPING;
        self.map_through(self.consumed + window, table, geometry, page_count, source);
        if self.leaves.len() < self.consumed + window
            && self.read_next_index_leaf(next_index_leaf, geometry, page_count, source)
        {
            self.map_through(self.consumed + window, table, geometry, page_count, source);
        }
        let from = self.issued_until.max(self.consumed);
        let end = self
            .leaves
            .len()
            .min(self.consumed + window)
            .min(from + most);
        if from >= end {
            return issued_before;
        }
        self.seen.allocate(page_count);
        for at in from..end {
            let leaf = self.leaves[at];
            if !self.seen.test_and_set(leaf) {
                batch.push(leaf);
            }
        }
        self.issued_until = end;
        self.window_pages = (self.window_pages * 2).min(max_window);
        issued_before
    }

    /// Appends the rowids of index leaf `next` (read from the page cache, never waiting)
    /// to those of the current one, once all of these are mapped. False if there is no
    /// next leaf, it was read already, the kernel does not have it, or it does not parse
    /// as an index leaf.
    fn read_next_index_leaf(
        &mut self,
        next: Option<u32>,
        geometry: Geometry,
        page_count: u32,
        source: &mut impl CachedPages,
    ) -> bool {
        let Some(page_number) = next else {
            return false;
        };
        if self.next_index_page_number != 0
            || !self.parsed
            || self.mapped < self.rowids.len()
            || page_number == self.index_page_number
        {
            return false;
        }
        let page_bytes = geometry.page_size_bytes as usize;
        if self.next_index_page.len() != page_bytes {
            // Once per file and page size.
            self.next_index_page = vec![0; page_bytes];
        }
        if !source.read_if_cached(page_number, &mut self.next_index_page)
            || btree_page::index_leaf_rowids(
                &self.next_index_page,
                page_number,
                geometry,
                page_count,
                &mut self.next_rowids,
            )
            .is_err()
        {
            return false;
        }
        // Room for two pages' cells; a page size changed since the buffers were made may
        // leave less.
        if self.rowids.len() + self.next_rowids.len() > self.rowids.capacity() {
            return false;
        }
        self.next_rowids_start = self.rowids.len();
        self.rowids.extend_from_slice(&self.next_rowids);
        self.next_index_page_number = page_number;
        self.next_leaves_start = None;
        true
    }

    /// `pages` were asked for by other means (the paths' scans): they count as seen.
    pub(super) fn note_asked(&mut self, pages: &[u32]) {
        if self.seen.bits.is_empty() {
            return;
        }
        for &page in pages {
            self.seen.test_and_set(page);
        }
    }

    /// Takes back the last batch, `pages`: the kernel had its first pages. `issued_before`
    /// is what [`Rows::next_batch`] returned.
    pub(super) fn unissue(&mut self, issued_before: usize, pages: &[u32]) {
        self.issued_until = issued_before.max(self.consumed);
        for &page in pages {
            self.seen.unset(page);
        }
    }

    /// Maps rowids until `count` leaves are predicted, the index leaf's rowids run out, or
    /// a row needs a copy of an interior page past the mapping's [`COPIES_PER_MAPPING`].
    fn map_through(
        &mut self,
        count: usize,
        table: &(impl TablePath + ?Sized),
        geometry: Geometry,
        page_count: u32,
        source: &mut impl CachedPages,
    ) {
        if !self.parsed {
            self.parsed = true;
            if self.rowids.capacity() == 0 {
                // Once per file: any page's cells fit.
                let cells = btree_page::max_cells_per_page(geometry);
                self.rowids = Vec::with_capacity(2 * cells);
                self.next_rowids = Vec::with_capacity(cells);
                self.leaves = Vec::with_capacity(2 * cells);
                self.children = Vec::with_capacity(btree_page::max_children(geometry));
            }
            if self.index_page.len() != geometry.page_size_bytes as usize
                || btree_page::index_leaf_rowids(
                    &self.index_page,
                    self.index_page_number,
                    geometry,
                    page_count,
                    &mut self.rowids,
                )
                .is_err()
            {
                self.rowids.clear();
            }
        }
        if table.depth() == 0 || !self.validate_path(table, geometry, page_count) {
            return;
        }
        while self.leaves.len() < count && self.mapped < self.rowids.len() {
            if self.next_index_page_number != 0 && self.mapped == self.next_rowids_start {
                self.next_leaves_start = Some(self.leaves.len());
            }
            let rowid = self.rowids[self.mapped];
            let Ok(leaf) = self.leaf_of(rowid, table, geometry, page_count, source) else {
                // The row is mapped at a later read.
                break;
            };
            self.mapped += 1;
            let Some(leaf) = leaf else {
                continue;
            };
            // The next index leaf's first leaf is its own, even if the same page.
            let first_of_next = self.next_leaves_start == Some(self.leaves.len());
            if first_of_next || self.leaves.last() != Some(&leaf) {
                self.leaves.push(leaf);
            }
        }
    }

    /// Parses the table path's pages whole, once each: a child of a page is predicted only
    /// if the page passes. A page that fails is not parsed again until the paths are
    /// forgotten.
    fn validate_path(
        &mut self,
        table: &(impl TablePath + ?Sized),
        geometry: Geometry,
        page_count: u32,
    ) -> bool {
        for depth in 0..table.depth() {
            let (page_number, page) = table.page(depth);
            if self.validated[depth] == page_number {
                continue;
            }
            if page_number == self.refused_path_page
                || !parses_as_table_interior(
                    page,
                    page_number,
                    geometry,
                    page_count,
                    &mut self.children,
                )
            {
                self.refused_path_page = page_number;
                return false;
            }
            self.validated[depth] = page_number;
        }
        true
    }

    /// The table leaf holding `rowid`: down the table path's root and interior pages, the
    /// path's own copies where it has them, else copies read from the page cache. `None`
    /// when the pages do not say; `Err` when it needs a copy the mapping may no longer
    /// make.
    fn leaf_of(
        &mut self,
        rowid: i64,
        table: &(impl TablePath + ?Sized),
        geometry: Geometry,
        page_count: u32,
        source: &mut impl CachedPages,
    ) -> Result<Option<u32>, OutOfCopies> {
        let depth_count = table.depth();
        let (mut page_number, _) = table.page(0);
        let mut copy: Option<usize> = None;
        for depth in 0..depth_count {
            let page: &[u8] = match copy {
                None => table.page(depth).1,
                Some(index) => &self.copies[index],
            };
            let Some(child) = btree_page::interior_view(page, page_number, geometry)
                .and_then(|view| view.table_child_for(page, rowid))
            else {
                return Ok(None);
            };
            // The path's pages were parsed whole by page number: SQLite may have read one
            // again since, with other bytes (a writer ignoring locks, a disk returning other
            // data), whose children nothing checked.
            if !(2..=page_count).contains(&child) || child == page_number {
                return Ok(None);
            }
            if depth + 1 == depth_count {
                return Ok(Some(child));
            }
            copy = if table.page(depth + 1).0 == child {
                None
            } else {
                match self.interior_copy(child, geometry, page_count, source)? {
                    Some(index) => Some(index),
                    None => return Ok(None),
                }
            };
            page_number = child;
        }
        Ok(None)
    }

    /// The index of the copy of `page_number`, if one is held.
    fn find_copy(&self, page_number: u32) -> Option<usize> {
        let at = self
            .copy_index
            .binary_search_by_key(&page_number, |&(page, _)| page)
            .ok()?;
        Some(self.copy_index[at].1)
    }

    /// Records that copy `index` holds `page_number`.
    fn index_copy(&mut self, page_number: u32, index: usize) {
        assert_eq!(self.copy_pages[index], page_number);
        let Err(at) = self
            .copy_index
            .binary_search_by_key(&page_number, |&(page, _)| page)
        else {
            panic!("page {page_number} is copied once");
        };
        assert!(self.copy_index.len() < self.copy_index.capacity());
        self.copy_index.insert(at, (page_number, index));
    }

    /// Empties copy `index` and takes it out of the index.
    fn unindex_copy(&mut self, index: usize) {
        let page_number = std::mem::replace(&mut self.copy_pages[index], 0);
        if page_number == 0 {
            return;
        }
        let at = self
            .copy_index
            .binary_search_by_key(&page_number, |&(page, _)| page)
            .expect("a held copy is in the index");
        self.copy_index.remove(at);
    }

    /// The index of a parsed copy of table interior page `page_number`, read from the page
    /// cache if it is not held yet; `None` if the kernel does not have it or it is not a
    /// well-formed table interior page (then no held copy was replaced); `Err` if it is not
    /// held and the mapping may make no more copies.
    fn interior_copy(
        &mut self,
        page_number: u32,
        geometry: Geometry,
        page_count: u32,
        source: &mut impl CachedPages,
    ) -> Result<Option<usize>, OutOfCopies> {
        if let Some(index) = self.find_copy(page_number) {
            return Ok(Some(index));
        }
        if page_number == self.missing_interior || page_number == self.refused_interior {
            return Ok(None);
        }
        self.copies_left = self.copies_left.checked_sub(1).ok_or(OutOfCopies)?;
        let page_bytes = geometry.page_size_bytes as usize;
        if self.spare_copy.len() != page_bytes {
            // Once per file and page size, and once per copy while the copies grow to
            // their most (the spare takes the new copy's place).
            self.spare_copy = vec![0; page_bytes];
        }
        if !source.read_if_cached(page_number, &mut self.spare_copy) {
            self.missing_interior = page_number;
            return Ok(None);
        }
        if !parses_as_table_interior(
            &self.spare_copy,
            page_number,
            geometry,
            page_count,
            &mut self.children,
        ) {
            self.refused_interior = page_number;
            return Ok(None);
        }
        let most =
            (INTERIOR_COPIES_BYTES / page_bytes).clamp(MIN_INTERIOR_COPIES, MAX_INTERIOR_COPIES);
        let index = if self.copies.len() < most {
            if self.copy_index.capacity() == 0 {
                self.copy_index = Vec::with_capacity(MAX_INTERIOR_COPIES);
            }
            self.copies.push(Vec::new());
            self.copy_pages.push(0);
            self.copies.len() - 1
        } else {
            self.next_copy = (self.next_copy + 1) % self.copies.len();
            self.unindex_copy(self.next_copy);
            self.next_copy
        };
        // The spare becomes the copy, and the page it replaces the spare.
        std::mem::swap(&mut self.copies[index], &mut self.spare_copy);
        self.copy_pages[index] = page_number;
        self.index_copy(page_number, index);
        Ok(Some(index))
    }
}

/// A row's mapping needs a copy of an interior page, and the mapping made its
/// [`COPIES_PER_MAPPING`].
struct OutOfCopies;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::btree_page::page_with_cells;

    const PAGE_BYTES: usize = 4096;

    /// The page cache of a file whose every page is a cached table interior page of one
    /// cell (child `page + 100_000` below key 10, right-most child `page + 200_000`), but
    /// `not_interior`, an index interior page.
    #[derive(Default)]
    struct InteriorPages {
        reads: u32,
        not_interior: u32,
    }

    impl CachedPages for InteriorPages {
        fn read_if_cached(&mut self, page_number: u32, buf: &mut [u8]) -> bool {
            self.reads += 1;
            buf.fill(0);
            let cell_at = PAGE_BYTES - 5;
            buf[0] = if page_number == self.not_interior {
                0x02
            } else {
                0x05
            };
            buf[3..5].copy_from_slice(&1u16.to_be_bytes());
            buf[5..7].copy_from_slice(&(cell_at as u16).to_be_bytes());
            buf[8..12].copy_from_slice(&(page_number + 200_000).to_be_bytes());
            buf[12..14].copy_from_slice(&(cell_at as u16).to_be_bytes());
            buf[cell_at..cell_at + 4].copy_from_slice(&(page_number + 100_000).to_be_bytes());
            buf[cell_at + 4] = 10;
            true
        }
    }

    #[test]
    fn interior_copies_are_found_by_page_number_and_replaced_one_at_a_time() {
        let geometry = Geometry::new(PAGE_BYTES as u32, 0).unwrap();
        let page_count = 1_000_000;
        let most = INTERIOR_COPIES_BYTES / PAGE_BYTES;
        assert_eq!(most, MAX_INTERIOR_COPIES);
        let mut rows = Rows::new();
        // As the first mapping of rows allocates it.
        rows.children = Vec::with_capacity(btree_page::max_children(geometry));
        // No mapping's bound on copies here.
        rows.copies_left = usize::MAX;
        let mut cache = InteriorPages::default();
        // Pages in a scattered order; each is read from the page cache once.
        let pages: Vec<u32> = (0..most as u32).map(|i| 3 + (i * 7919) % 5003).collect();
        for &page in &pages {
            let index = rows.interior_copy(page, geometry, page_count, &mut cache);
            assert!(matches!(index, Ok(Some(_))), "page {page} copied");
        }
        assert_eq!(cache.reads, most as u32);
        for &page in pages.iter().rev() {
            let Ok(Some(index)) = rows.interior_copy(page, geometry, page_count, &mut cache) else {
                panic!("page {page} held");
            };
            let view = btree_page::interior_view(&rows.copies[index], page, geometry).unwrap();
            assert_eq!(
                view.table_child_for(&rows.copies[index], 5),
                Some(page + 100_000)
            );
        }
        assert_eq!(cache.reads, most as u32, "all held: none read again");
        // One more page takes one copy's place; the page it held is read again when
        // asked for, and every other is still found.
        assert!(matches!(
            rows.interior_copy(6000, geometry, page_count, &mut cache),
            Ok(Some(_))
        ));
        let reads = cache.reads;
        let replaced: Vec<u32> = pages
            .iter()
            .copied()
            .filter(|&page| rows.find_copy(page).is_none())
            .collect();
        assert_eq!(replaced.len(), 1);
        for &page in &pages {
            assert!(matches!(
                rows.interior_copy(page, geometry, page_count, &mut cache),
                Ok(Some(_))
            ));
        }
        assert!(cache.reads > reads);
        assert!(rows.copy_index.windows(2).all(|pair| pair[0].0 < pair[1].0));
        for &(page, index) in &rows.copy_index {
            assert_eq!(rows.copy_pages[index], page);
        }
        // A lock change forgets them all.
        rows.forget();
        assert!(pages.iter().all(|&page| rows.find_copy(page).is_none()));
    }

    fn all_clear(seen: &Seen) -> bool {
        seen.bits.iter().all(|&word| word == 0)
    }

    #[test]
    fn a_clear_after_few_pages_unsets_each_of_them() {
        let mut seen = Seen::new();
        // Twice 25,000 pages, rounded up: a 65,536-bit map.
        seen.allocate(25_000);
        for page in [7, 70_000, 3] {
            assert!(!seen.test_and_set(page));
        }
        // 70,000 and 4,464 share a bit of the 65,536-bit map, as do 65,543 and 7.
        assert!(seen.test_and_set(4_464));
        assert!(seen.test_and_set(65_543));
        seen.unset(3);
        seen.clear();
        assert!(all_clear(&seen));
        assert_eq!(seen.set_count, 0);
        assert!(!seen.test_and_set(7), "cleared pages are unseen again");
    }

    #[test]
    fn a_clear_after_few_pages_touches_only_their_words() {
        let mut seen = Seen::new();
        seen.allocate(50_000);
        seen.test_and_set(100);
        // A word no set since the clear touched (written behind the map's back here) is
        // left as it is: the clear did not zero the map.
        seen.bits[500] = 1;
        seen.clear();
        assert_eq!(seen.bits[100 / 64], 0);
        assert_eq!(seen.bits[500], 1);
    }

    #[test]
    fn a_clear_after_many_pages_zeroes_the_map() {
        let mut seen = Seen::new();
        seen.allocate(50_000);
        let many = SEEN_CLEARED_ONE_BY_ONE as u32 + 10;
        for page in 1..=many {
            assert!(!seen.test_and_set(page * 97));
        }
        seen.clear();
        assert!(all_clear(&seen));
        for page in 1..=many {
            assert!(
                !seen.test_and_set(page * 97),
                "page {} was left seen",
                page * 97
            );
        }
    }

    #[test]
    fn a_map_half_full_is_cleared_and_stays_consistent() {
        let mut seen = Seen::new();
        // The smallest map: 64 bits, cleared when 32 are set.
        seen.allocate(10);
        for page in 0..32 {
            assert!(!seen.test_and_set(page));
        }
        assert!(!seen.test_and_set(40), "the 33rd set clears the map first");
        assert_eq!(seen.set_count, 1);
        assert!(!seen.test_and_set(0), "cleared by the half-full rule");
        seen.clear();
        assert!(all_clear(&seen));
    }

    /// A table path of `pages` (page number and bytes), root first.
    struct Path(Vec<(u32, Vec<u8>)>);

    impl TablePath for Path {
        fn depth(&self) -> usize {
            self.0.len()
        }

        fn page(&self, depth: usize) -> (u32, &[u8]) {
            (self.0[depth].0, &self.0[depth].1)
        }
    }

    /// A table interior page of `page_bytes` with `cells` (left child, a 1-byte key) and
    /// right-most child `right_most`.
    fn table_interior(page_bytes: usize, cells: &[(u32, u8)], right_most: u32) -> Vec<u8> {
        assert!(
            cells.iter().all(|&(_, key)| key < 0x80),
            "one-byte varint keys"
        );
        let cells: Vec<Vec<u8>> = cells
            .iter()
            .map(|&(child, key)| [child.to_be_bytes().as_slice(), &[key]].concat())
            .collect();
        page_with_cells(page_bytes, 0x05, &cells, Some(right_most))
    }

    /// An index leaf of `page_bytes` holding as many entries as fit, each the smallest
    /// record ending in an integer (`[3, 2, 1, rowid]`), the rowids `rowid_of(entry)`.
    fn full_index_leaf(page_bytes: usize, rowid_of: impl Fn(usize) -> u8) -> Vec<u8> {
        let cells: Vec<Vec<u8>> = (0..(page_bytes - 8) / 6)
            .map(|entry| vec![3, 2, 1, rowid_of(entry)])
            .collect();
        page_with_cells(page_bytes, 0x0a, &cells, None)
    }

    /// A page cache that has every page, each holding what `page_of` makes of its number,
    /// and counts the copies taken.
    struct PagesOf<F> {
        page_of: F,
        reads: u32,
    }

    impl<F: Fn(u32, &mut [u8])> CachedPages for PagesOf<F> {
        fn read_if_cached(&mut self, page_number: u32, buf: &mut [u8]) -> bool {
            self.reads += 1;
            (self.page_of)(page_number, buf);
            true
        }
    }

    #[test]
    fn a_cached_page_that_is_not_a_table_interior_page_is_copied_once_not_per_row() {
        for page_bytes in [4096, 65_536] {
            let geometry = Geometry::new(page_bytes as u32, 0).unwrap();
            // Root 2: rowids up to 0 below page 3, the rest below page 4, which the page
            // cache holds as an index leaf. Page 3: leaves 6 and 7.
            let path = Path(vec![
                (2, table_interior(page_bytes, &[(3, 0)], 4)),
                (3, table_interior(page_bytes, &[(6, 0)], 7)),
            ]);
            let index_leaf = full_index_leaf(page_bytes, |entry| 1 + (entry % 100) as u8);
            let mut cache = PagesOf {
                page_of: |_: u32, buf: &mut [u8]| {
                    buf.copy_from_slice(&full_index_leaf(buf.len(), |_| 1));
                },
                reads: 0,
            };
            let mut rows = Rows::new();
            rows.enter_index_leaf(&index_leaf, 5, 0);
            rows.note_table_leaf(6, &path, geometry, 100, &mut cache);
            assert_eq!(cache.reads, 1, "page size {page_bytes}");
            // Nor again at SQLite's next reads.
            rows.note_table_leaf(7, &path, geometry, 100, &mut cache);
            let mut batch = Vec::new();
            rows.next_batch(16, 16, None, &path, geometry, 100, &mut cache, &mut batch);
            assert_eq!(cache.reads, 1, "page size {page_bytes}");
        }
    }

    #[test]
    fn a_read_copies_a_bounded_number_of_interior_pages_whatever_they_name() {
        let page_bytes = 65_536;
        let geometry = Geometry::new(page_bytes as u32, 0).unwrap();
        // Root 2 sends rowid k to page 10 + k (k < 40): more interior pages than the
        // copies hold, each a well-formed table interior page naming leaf 6 for every
        // rowid. Rows cycle through them, so none is held when it comes round again, and
        // no row adds a leaf.
        let spread = 40u8;
        let cells: Vec<(u32, u8)> = (0..spread).map(|k| (10 + u32::from(k), k)).collect();
        let path = Path(vec![
            (2, table_interior(page_bytes, &cells, 9)),
            (3, table_interior(page_bytes, &[(6, 100)], 7)),
        ]);
        let index_leaf = full_index_leaf(page_bytes, |entry| (entry % usize::from(spread)) as u8);
        let mut cache = PagesOf {
            page_of: |_: u32, buf: &mut [u8]| {
                buf.copy_from_slice(&table_interior(buf.len(), &[(6, 100)], 8));
            },
            reads: 0,
        };
        assert!(usize::from(spread) > INTERIOR_COPIES_BYTES / page_bytes);
        let mut rows = Rows::new();
        rows.enter_index_leaf(&index_leaf, 5, 0);
        let mut batch = Vec::new();
        for read in 0..4 {
            let before = cache.reads;
            rows.note_table_leaf(6, &path, geometry, 100, &mut cache);
            rows.next_batch(16, 16, None, &path, geometry, 100, &mut cache, &mut batch);
            let copies = (cache.reads - before) as usize;
            assert!(
                copies <= 2 * COPIES_PER_MAPPING,
                "read {read}: {copies} copies"
            );
        }
    }

    #[test]
    fn a_copy_that_fails_to_parse_replaces_no_held_copy_and_is_not_copied_again() {
        let geometry = Geometry::new(PAGE_BYTES as u32, 0).unwrap();
        let page_count = 1_000_000;
        let mut rows = Rows::new();
        rows.children = Vec::with_capacity(btree_page::max_children(geometry));
        rows.copies_left = usize::MAX;
        let refused = 2;
        let mut cache = InteriorPages {
            not_interior: refused,
            ..InteriorPages::default()
        };
        // Every copy held.
        let pages: Vec<u32> = (3..3 + MAX_INTERIOR_COPIES as u32).collect();
        for &page in &pages {
            assert!(matches!(
                rows.interior_copy(page, geometry, page_count, &mut cache),
                Ok(Some(_))
            ));
        }
        let reads = cache.reads;
        for _ in 0..3 {
            assert!(matches!(
                rows.interior_copy(refused, geometry, page_count, &mut cache),
                Ok(None)
            ));
        }
        assert_eq!(cache.reads, reads + 1, "the refused page copied once");
        assert!(pages.iter().all(|&page| rows.find_copy(page).is_some()));
        // Until the paths are forgotten.
        rows.forget();
        assert!(matches!(
            rows.interior_copy(refused, geometry, page_count, &mut cache),
            Ok(None)
        ));
        assert_eq!(cache.reads, reads + 2);
    }

    /// A page cache that has every page as a table interior page naming leaves 6 and 7,
    /// and checks that it is asked only for pages inside a file of `page_count` pages.
    struct PagesInside {
        page_count: u32,
    }

    impl CachedPages for PagesInside {
        fn read_if_cached(&mut self, page_number: u32, buf: &mut [u8]) -> bool {
            assert!(
                (2..=self.page_count).contains(&page_number),
                "page {page_number} copied"
            );
            buf.copy_from_slice(&table_interior(buf.len(), &[(6, 0)], 7));
            true
        }
    }

    #[test]
    fn a_path_page_read_again_with_new_bytes_has_no_child_outside_the_file_used() {
        let geometry = Geometry::new(PAGE_BYTES as u32, 0).unwrap();
        let page_count = 100;
        let page = |cells: &[(u32, u8)], right_most| table_interior(PAGE_BYTES, cells, right_most);
        // SQLite reads the path's pages again, with no lock change between, and finds new
        // bytes (a writer that ignores locks, a disk returning other data): page 3's
        // right-most child is 0; the root's child below 120 is 0; the root's right-most
        // child lies past the file.
        for (root, page_3) in [
            (page(&[(3, 120)], 4), page(&[(6, 0)], 0)),
            (page(&[(0, 120)], 4), page(&[(6, 0)], 7)),
            (page(&[(6, 0)], 101), page(&[(6, 0)], 7)),
        ] {
            // Root 2: rowids up to 120 below page 3, the rest below page 4. Page 3: leaves
            // 6 and 7.
            let mut path = Path(vec![(2, page(&[(3, 120)], 4)), (3, page(&[(6, 0)], 7))]);
            let mut cache = PagesInside { page_count };
            let mut rows = Rows::new();
            let first_leaf = full_index_leaf(PAGE_BYTES, |entry| 1 + (entry % 100) as u8);
            rows.enter_index_leaf(&first_leaf, 5, 0);
            rows.note_table_leaf(7, &path, geometry, page_count, &mut cache);
            assert_eq!(rows.leaves, [7]);
            path.0[0].1 = root;
            path.0[1].1 = page_3;
            let next_leaf = full_index_leaf(PAGE_BYTES, |entry| 1 + (entry % 90) as u8);
            rows.enter_index_leaf(&next_leaf, 8, 0);
            rows.note_table_leaf(7, &path, geometry, page_count, &mut cache);
            assert!(
                rows.leaves
                    .iter()
                    .all(|leaf| (2..=page_count).contains(leaf)),
                "{:?}",
                rows.leaves
            );
        }
    }
}
