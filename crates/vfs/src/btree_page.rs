//! Parser of SQLite B-tree pages for the read-ahead of the main database file.
//!
//! When SQLite reads a page of the main database, the VFS can look at it to learn what SQLite
//! will read next: an interior page lists its children in key order (each cell's left child,
//! then the right-most pointer), and a page whose cells carry payload (table leaves, index
//! leaves and index interior pages) names the first page of every overflow chain together with
//! the number of pages that chain must have. For the row read-ahead of an index scan it also
//! reads the rowids an index leaf's entries name ([`index_leaf_rowids`]) and which child of a
//! table interior page holds a rowid ([`InteriorView::table_child_for`]). This module parses
//! exactly that and nothing else, following the SQLite file format
//! (<https://www.sqlite.org/fileformat2.html>) and the rules SQLite itself applies in
//! `src/btree.c`.
//!
//! # Every byte is untrusted
//!
//! The bytes come from a file that another process or a failing disk may have written. Every
//! function here returns `Err` for a malformed page: none panics, indexes out of bounds,
//! allocates, or does work beyond a fixed multiple of the page size. The bounds enforced:
//!
//! - the [`Geometry`] is one SQLite accepts: page size a power of two in 512..=65536, at most
//!   255 reserved bytes, usable size at least 480 (`lockBtree`);
//! - `page.len()` equals the page size, and the page number is in 1..=page count
//!   ([`interior_view`] and `page_kind`, which are not given the page count, only check that
//!   it is not 0);
//! - the page type byte is one of 0x02, 0x05, 0x0a, 0x0d (`decodeFlags`);
//! - the cell count is at most what fits: every cell takes a 2-byte pointer plus at least
//!   4 bytes of content between the end of the page header and the end of the usable area;
//! - the cell content area starts between the end of the cell pointer array and the end of the
//!   usable area, and the first freeblock (when there is one) lies inside the content area with
//!   room for its 4-byte header (`btreeComputeFreeSpace`); the freeblock list and the count of
//!   fragmented bytes are not walked further;
//! - every cell pointer lies in `[end of cell pointer array, usable size)`, and every cell's
//!   child pointer, varints, local payload and overflow page number lie inside the usable area,
//!   counting at least 4 bytes for every cell (`btreeCellSizeCheck`);
//! - every child page and every first overflow page is in 2..=page count and differs from the
//!   page itself (page 1 is always the root of `sqlite_schema`, so it is nobody's child);
//! - a payload size is at most `i32::MAX`, and its overflow chain needs no more pages than the
//!   database has besides page 1 and the page itself;
//! - output goes into a caller's `Vec`, cleared first and never grown past its capacity: a
//!   page with more results than fit is `Err(Malformed::Capacity)`, and on any `Err` the `Vec`
//!   is left empty. [`max_children`] is enough capacity for any valid page of a geometry.
//!
//! A page that passes is not proven well formed (cells may overlap, the freeblock list is not
//! followed, keys are not compared); it only holds nothing that makes the results unsafe to
//! use as prefetch hints.
//!
//! # Corpus
//!
//! `tests/corpus/btree_page/` holds hand-made malformed pages, each 512 bytes, parsed as page 2
//! of a 10-page database with no reserved bytes but where said (the error each must give in
//! parentheses):
//!
//! - `bad_type.bin`: type byte 0x07 (`PageType`);
//! - `cell_pointer_out_of_range.bin`: a table leaf's cell pointer at offset 512, past the usable
//!   area (`CellPointer`);
//! - `child_past_page_count.bin`: a table interior cell's child is page 11 (`ChildPage`);
//! - `child_is_self.bin`: a table interior page's right-most pointer is page 2, the page itself
//!   (`ChildPage`);
//! - `varint_runs_off.bin`: an index leaf cell at offset 508 whose payload-size varint has the
//!   high bit set in every byte up to the end of the page (`CellSize`);
//! - `cell_count_too_large.bin`: a table leaf claiming 200 cells where at most 84 fit
//!   (`CellCount`);
//! - `page_size_mismatch.bin`: a valid table leaf cut to 511 bytes (`Length`);
//! - `overflow_page_past_page_count.bin`: a table leaf cell's overflow chain starts at page 11
//!   (`OverflowPage`);
//! - `overflow_page_is_self.bin`: the chain starts at page 2, the page itself (`OverflowPage`);
//! - `payload_needs_more_pages_than_the_file.bin`: a cell claiming an 8 KiB payload, whose
//!   chain would need 16 overflow pages in a 10-page database (`PayloadSize`);
//! - `cells_in_reserved_bytes.bin`: a valid table interior page read with 32 reserved bytes,
//!   its cells lying in them (`ContentStart`).

/// Deepest B-tree SQLite handles (btreeInt.h `BTCURSOR_MAX_DEPTH`).
pub(crate) const MAX_DEPTH: usize = 20;
/// Bytes of the database header at the start of page 1.
const DATABASE_HEADER_BYTES: usize = 100;
/// The first 16 bytes of every SQLite database file.
const HEADER_MAGIC: &[u8; 16] = b"SQLite format 3\0";
/// Maximum embedded payload fraction, minimum embedded payload fraction and leaf payload
/// fraction (header offsets 21..24): SQLite refuses any other values.
const PAYLOAD_FRACTIONS: [u8; 3] = [64, 32, 32];
const MIN_PAGE_SIZE_BYTES: u32 = 512;
const MAX_PAGE_SIZE_BYTES: u32 = 65536;
const MIN_USABLE_BYTES: u32 = 480;
/// The reserved-bytes count is one byte of the database header.
const MAX_RESERVED_BYTES: u32 = 255;
const LEAF_HEADER_BYTES: usize = 8;
const INTERIOR_HEADER_BYTES: usize = 12;
const CELL_POINTER_BYTES: usize = 2;
/// SQLite never allocates less than 4 bytes for a cell (the size of a freeblock header).
const MIN_CELL_BYTES: usize = 4;
const PAGE_NUMBER_BYTES: usize = 4;
const MAX_VARINT_BYTES: usize = 9;
/// SQLite never writes a record longer than this (`SQLITE_MAX_LENGTH` is at most 2^31 - 1).
const MAX_PAYLOAD_BYTES: u64 = i32::MAX as u64;

/// Page size and usable size (page size minus the reserved bytes of the database header,
/// offset 20).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Geometry {
    pub(crate) page_size_bytes: u32,
    pub(crate) usable_bytes: u32,
}

impl Geometry {
    /// From the 100-byte database header (page 1's first bytes). `None` when `header` is
    /// shorter than 100 bytes, lacks the "SQLite format 3\0" magic, has payload fractions other
    /// than 64/32/32, or describes a geometry [`Geometry::new`] refuses. The page size is the
    /// big-endian u16 at offset 16 (1 means 65536), the reserved bytes the u8 at offset 20.
    pub(crate) fn from_header(header: &[u8]) -> Option<Geometry> {
        let header = header.get(..DATABASE_HEADER_BYTES)?;
        if header.get(..HEADER_MAGIC.len())? != HEADER_MAGIC {
            return None;
        }
        if header.get(21..24)? != PAYLOAD_FRACTIONS {
            return None;
        }
        let raw_page_size = u16::from_be_bytes([*header.get(16)?, *header.get(17)?]);
        let page_size_bytes = match raw_page_size {
            1 => MAX_PAGE_SIZE_BYTES,
            other => u32::from(other),
        };
        Geometry::new(page_size_bytes, u32::from(*header.get(20)?))
    }

    /// The geometry of pages of `page_size_bytes` with `reserved_bytes` unused at their end.
    /// `None` unless the page size is a power of two in 512..=65536, at most 255 bytes are
    /// reserved, and at least 480 usable bytes remain, the same rules SQLite applies.
    pub(crate) fn new(page_size_bytes: u32, reserved_bytes: u32) -> Option<Geometry> {
        let geometry = Geometry {
            page_size_bytes,
            usable_bytes: page_size_bytes.checked_sub(reserved_bytes)?,
        };
        geometry.is_valid().then_some(geometry)
    }

    /// The page number of a read of `len_bytes` at `offset` that is one whole page (the
    /// first page is 1); `None` for any other read, or for a page past 2^32 - 1. The page
    /// size is a power of two (`is_valid`): a mask and a shift, no division, since it is
    /// asked at every read read-ahead records or follows.
    #[inline]
    pub(crate) fn whole_page_at(self, offset: u64, len_bytes: usize) -> Option<u32> {
        let page_bytes = u64::from(self.page_size_bytes);
        debug_assert!(page_bytes.is_power_of_two(), "a geometry is valid");
        if len_bytes as u64 != page_bytes || offset & (page_bytes - 1) != 0 {
            return None;
        }
        u32::try_from((offset >> page_bytes.trailing_zeros()) + 1).ok()
    }

    /// Bytes reserved at the end of every page.
    pub(crate) fn reserved_bytes(self) -> u32 {
        self.page_size_bytes.saturating_sub(self.usable_bytes)
    }

    /// Whether this geometry is one [`Geometry::new`] would return. Every parsing function
    /// checks it first, so a geometry assembled by hand cannot lead to a division by zero or
    /// a slice past the page.
    fn is_valid(self) -> bool {
        self.page_size_bytes.is_power_of_two()
            && (MIN_PAGE_SIZE_BYTES..=MAX_PAGE_SIZE_BYTES).contains(&self.page_size_bytes)
            && self.usable_bytes <= self.page_size_bytes
            && self.reserved_bytes() <= MAX_RESERVED_BYTES
            && self.usable_bytes >= MIN_USABLE_BYTES
    }
}

/// The four kinds of B-tree page, named by the type byte of the page header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PageKind {
    /// Type 0x05: cells are a left child and an integer key.
    TableInterior,
    /// Type 0x02: cells are a left child and a key payload.
    IndexInterior,
    /// Type 0x0d: cells are a payload size, a rowid and the payload.
    TableLeaf,
    /// Type 0x0a: cells are a payload size and the payload.
    IndexLeaf,
}

impl PageKind {
    /// The kind a page-header type byte names, or `None` for any other byte.
    fn from_type_byte(type_byte: u8) -> Option<PageKind> {
        match type_byte {
            0x05 => Some(PageKind::TableInterior),
            0x02 => Some(PageKind::IndexInterior),
            0x0d => Some(PageKind::TableLeaf),
            0x0a => Some(PageKind::IndexLeaf),
            _ => None,
        }
    }

    /// True for the two interior kinds, whose cells start with a 4-byte child page number and
    /// whose header ends with the right-most child.
    pub(crate) fn is_interior(self) -> bool {
        matches!(self, PageKind::TableInterior | PageKind::IndexInterior)
    }

    /// True for the kinds whose cells carry payload, and so may spill to overflow pages.
    pub(crate) fn has_payload(self) -> bool {
        self != PageKind::TableInterior
    }

    /// Bytes of the B-tree page header: 12 for interior pages, 8 for leaves.
    fn header_bytes(self) -> usize {
        if self.is_interior() {
            INTERIOR_HEADER_BYTES
        } else {
            LEAF_HEADER_BYTES
        }
    }
}

/// What was wrong with a page, or with the call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Malformed {
    /// The geometry is not one [`Geometry::new`] accepts.
    Geometry,
    /// `page.len()` differs from the page size (for [`overflow_next`]: shorter than 4 bytes).
    Length,
    /// The page number is 0 or past the page count (for [`overflow_next`]: also 1).
    PageNumber,
    /// The page-header type byte is not 0x02, 0x05, 0x0a or 0x0d.
    PageType,
    /// More cells than fit between the page header and the end of the usable area.
    CellCount,
    /// The cell content area starts inside the cell pointer array or past the usable area.
    ContentStart,
    /// The first freeblock lies outside the cell content area.
    Freeblock,
    /// A cell pointer points into the header or cell pointer array, or past the usable area.
    CellPointer,
    /// A cell's child pointer, varints, local payload or overflow page number run past the
    /// usable area.
    CellSize,
    /// A child page (a cell's left child or the right-most pointer) is outside
    /// 2..=page count or is the page itself.
    ChildPage,
    /// A payload size above `i32::MAX`, or one whose overflow chain would need more pages than
    /// the database has.
    PayloadSize,
    /// An overflow page number is outside 2..=page count or is the page itself.
    OverflowPage,
    /// The page is well formed so far but has more results than the caller's `Vec` can hold
    /// without growing.
    Capacity,
}

/// One cell's overflow chain: its first page and the number of pages the chain must have
/// (from the payload size: `ceil((payload - local) / (usable - 4))`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct OverflowChain {
    pub(crate) first_page: u32,
    pub(crate) page_count: u32,
}

/// The kind of B-tree page `page` is (`page_number` 1 has its B-tree header at byte 100).
///
/// Checks the geometry, the page length, that `page_number` is not 0, the type byte and the
/// rest of the page header (cell count, content area start, first freeblock); it does not look
/// at the cells, so the page can still be refused by [`interior_children`] and
/// [`overflow_chains`]. Constant work.
///
/// Read-ahead checks headers through [`interior_view`]; only the tests call this.
#[cfg(test)]
pub(crate) fn page_kind(
    page: &[u8],
    page_number: u32,
    geometry: Geometry,
) -> Result<PageKind, Malformed> {
    parse_header(page, page_number, geometry).map(|header| header.kind)
}

/// The kind a page's type byte names, nothing else checked: a hint for telling SQLite's
/// reads apart (an index leaf, a table leaf), never a reason to follow the page. Constant
/// work.
pub(crate) fn kind_hint(page: &[u8], page_number: u32) -> Option<PageKind> {
    PageKind::from_type_byte(*page.get(header_offset(page_number))?)
}

/// An interior page whose header is checked (the geometry, length and header checks of
/// `page_kind`), for reading its children one at a time without parsing its cells: what
/// following SQLite's descent needs. Its children are hints for matching SQLite's reads, nothing more: they are not
/// checked against the page count, and a page must pass [`interior_children`] before any
/// child of it is asked for.
#[derive(Clone, Copy, Debug)]
pub(crate) struct InteriorView {
    header: PageHeader,
    usable_bytes: usize,
}

/// The [`InteriorView`] of `page`, or `None` when it is a leaf or its header is malformed.
/// Constant work.
pub(crate) fn interior_view(
    page: &[u8],
    page_number: u32,
    geometry: Geometry,
) -> Option<InteriorView> {
    let header = parse_header(page, page_number, geometry).ok()?;
    header.kind.is_interior().then_some(InteriorView {
        header,
        usable_bytes: geometry.usable_bytes as usize,
    })
}

impl InteriorView {
    /// Children the page names: one per cell, and the right-most.
    pub(crate) fn child_count(self) -> usize {
        self.header.cell_count + 1
    }

    /// The child at key-order `index` of `page` (the page the view was made from): cell
    /// `index`'s left child, or the right-most pointer at `index == cell count`. `None` past
    /// the children, or where the cell pointer or the child lies outside the usable area.
    /// Constant work.
    pub(crate) fn child(self, page: &[u8], index: usize) -> Option<u32> {
        let header = self.header;
        if index >= header.cell_count {
            return (index == header.cell_count).then_some(header.right_most);
        }
        let usable = page.get(..self.usable_bytes)?;
        let pointer = read_u16(usable, header.cell_array_start + CELL_POINTER_BYTES * index)?;
        let pointer = usize::from(pointer);
        if pointer < header.cell_array_end() {
            return None;
        }
        read_u32(usable, pointer)
    }

    /// The child of a table interior `page` whose subtree holds `rowid`: the left child of
    /// the first cell whose key is at least `rowid`, or the right-most pointer (btree.c
    /// `sqlite3BtreeTableMoveto`). A binary search over the cells, so on a page whose keys
    /// are out of order it is a wrong guess, never unsafe. `None` for an index interior
    /// page, or where a cell pointer, key or child lies outside the usable area.
    /// Logarithmic in the cell count.
    pub(crate) fn table_child_for(self, page: &[u8], rowid: i64) -> Option<u32> {
        let header = self.header;
        if header.kind != PageKind::TableInterior {
            return None;
        }
        let usable = page.get(..self.usable_bytes)?;
        let key = |index: usize| -> Option<i64> {
            let pointer = read_u16(usable, header.cell_array_start + CELL_POINTER_BYTES * index)?;
            let pointer = usize::from(pointer);
            if pointer < header.cell_array_end() {
                return None;
            }
            let key_at = pointer.checked_add(PAGE_NUMBER_BYTES)?;
            // The key is a varint read as a two's-complement i64.
            varint(usable.get(key_at..)?).map(|(key, _)| key as i64)
        };
        // The first cell whose key is >= rowid, in [low, high).
        let (mut low, mut high) = (0, header.cell_count);
        while low < high {
            let middle = low + (high - low) / 2;
            if key(middle)? < rowid {
                low = middle + 1;
            } else {
                high = middle;
            }
        }
        self.child(page, low)
    }

    /// The key-order index of the first child of `page` that is `child`. Linear in the
    /// cell count.
    pub(crate) fn position_of(self, page: &[u8], child: u32) -> Option<usize> {
        (0..self.child_count()).find(|&index| self.child(page, index) == Some(child))
    }
}

/// An interior page's children in key order: each cell's left child, then the right-most
/// pointer, written to `children`.
///
/// `children` is cleared first and never grown past its capacity: a page with more children
/// than `children.capacity()` is `Err(Malformed::Capacity)`; capacity [`max_children`] always
/// suffices. A leaf page is `Ok` with `children` empty. Every child is in 2..=`page_count` and
/// differs from `page_number`. The whole page is validated as described in the module
/// documentation, so this and [`overflow_chains`] accept exactly the same pages. On `Err`,
/// `children` is empty. Work is linear in the cell count, which is bounded by the page size.
pub(crate) fn interior_children(
    page: &[u8],
    page_number: u32,
    geometry: Geometry,
    page_count: u32,
    children: &mut Vec<u32>,
) -> Result<PageKind, Malformed> {
    children.clear();
    let result = collect_children(page, page_number, geometry, page_count, children);
    if result.is_err() {
        children.clear();
    }
    result
}

/// Overflow chains of a page's cells, in cell order, written to `chains`; cells whose payload
/// fits on the page contribute nothing.
///
/// Leaf pages of both kinds and index interior pages carry payload; a table interior page is
/// `Ok` with `chains` empty. `chains` is cleared first and never grown past its capacity (a
/// page with more spilling cells than `chains.capacity()` is `Err(Malformed::Capacity)`;
/// capacity [`max_children`] always suffices). Every `first_page` is in 2..=`page_count` and
/// differs from `page_number`; every chain's `page_count` is at least 1 and at most the number
/// of pages other than page 1 and `page_number`. The whole page is validated, as for
/// [`interior_children`]. On `Err`, `chains` is empty. Work is linear in the cell count.
///
/// Read-ahead follows chains from their pages' next pointers ([`overflow_next`]) instead of
/// parsing every leaf for them (which would cost a parse per leaf read even on cached
/// data), so only the tests call this: they check the parser's view of every cell against
/// SQLite's own (`dbstat`).
#[cfg(test)]
pub(crate) fn overflow_chains(
    page: &[u8],
    page_number: u32,
    geometry: Geometry,
    page_count: u32,
    chains: &mut Vec<OverflowChain>,
) -> Result<PageKind, Malformed> {
    chains.clear();
    let result = for_each_cell(
        page,
        page_number,
        geometry,
        page_count,
        |cell, _| match cell.overflow {
            Some(chain) => push_within_capacity(chains, chain),
            None => Ok(()),
        },
    )
    .map(|header| header.kind);
    if result.is_err() {
        chains.clear();
    }
    result
}

/// The page after overflow page `page_number` in its chain (the page's first 4 bytes,
/// big-endian); 0 ends the chain.
///
/// `Err(Length)` when `page` is shorter than 4 bytes, `Err(PageNumber)` when `page_number` is
/// not in 2..=`page_count` (page 1 is never an overflow page), and `Err(OverflowPage)` when the
/// next page is 1, past `page_count`, or `page_number` itself. Constant work.
pub(crate) fn overflow_next(
    page: &[u8],
    page_number: u32,
    page_count: u32,
) -> Result<u32, Malformed> {
    if !(2..=page_count).contains(&page_number) {
        return Err(Malformed::PageNumber);
    }
    let next = read_u32(page, 0).ok_or(Malformed::Length)?;
    if next == 0 {
        return Ok(0);
    }
    check_page_reference(next, page_number, page_count, Malformed::OverflowPage)
}

/// The rowids of an index leaf page's entries, in key order, written to `rowids`: what a
/// scan of an index that reads each entry's row will look up in the table next.
///
/// An index entry is a record whose last column is the rowid of its row (`sqlite3VdbeIdxRowid`).
/// An entry whose rowid cannot be read from the page is skipped: its payload spills to
/// overflow pages, its record header runs past its payload, or its last column is not an
/// integer (the entries of a `WITHOUT ROWID` table end with key columns, which may be
/// anything: a rowid read from them is a wrong guess, never unsafe). The page is validated
/// whole, as for [`interior_children`]; any kind other than an index leaf is
/// `Err(PageType)`. `rowids` is cleared first and never grown past its capacity
/// ([`max_cells_per_page`] suffices); on `Err` it is empty. Work is linear in the page size.
pub(crate) fn index_leaf_rowids(
    page: &[u8],
    page_number: u32,
    geometry: Geometry,
    page_count: u32,
    rowids: &mut Vec<i64>,
) -> Result<(), Malformed> {
    rowids.clear();
    let result = for_each_cell(page, page_number, geometry, page_count, |cell, bytes| {
        if cell.overflow.is_some() {
            return Ok(());
        }
        match bytes.get(cell.local_payload).and_then(record_last_integer) {
            Some(rowid) => push_within_capacity(rowids, rowid),
            None => Ok(()),
        }
    })
    .and_then(|header| match header.kind {
        PageKind::IndexLeaf => Ok(()),
        _ => Err(Malformed::PageType),
    });
    if result.is_err() {
        rowids.clear();
    }
    result
}

/// Most cells any page of this geometry can have: capacity that makes [`index_leaf_rowids`]
/// succeed on any valid page. 0 for a geometry [`Geometry::new`] refuses.
pub(crate) fn max_cells_per_page(geometry: Geometry) -> usize {
    if !geometry.is_valid() {
        return 0;
    }
    max_cells(geometry.usable_bytes as usize, LEAF_HEADER_BYTES)
}

/// The last column of the record `payload`, if it is an integer (serial types 1–6, 8, 9):
/// the rowid of an index entry. Its bytes end the record, so only the header is walked.
/// `None` when the header size or a serial type runs past the payload or the header, or
/// the value would. Work is linear in the header's length.
fn record_last_integer(payload: &[u8]) -> Option<i64> {
    let (header_bytes, mut at) = varint(payload)?;
    let header_bytes = usize::try_from(header_bytes).ok()?;
    if header_bytes > payload.len() || at >= header_bytes {
        return None;
    }
    let mut last = None;
    while at < header_bytes {
        let (serial_type, length) = varint(&payload[at..header_bytes])?;
        at += length;
        last = Some(serial_type);
    }
    let value_bytes = match last? {
        8 => return Some(0),
        9 => return Some(1),
        serial_type @ 1..=4 => serial_type as usize,
        5 => 6,
        6 => 8,
        _ => return None,
    };
    if value_bytes > payload.len() - header_bytes {
        return None;
    }
    let value = &payload[payload.len() - value_bytes..];
    // Big-endian two's complement of `value_bytes` bytes, sign-extended.
    let mut word = [if value[0] & 0x80 != 0 { 0xff } else { 0 }; 8];
    word[8 - value_bytes..].copy_from_slice(value);
    Some(i64::from_be_bytes(word))
}

/// The SQLite varint at the start of `bytes` and its length: up to 8 bytes of 7 bits each,
/// then a 9th byte of 8 bits. `None` when `bytes` ends first.
fn varint(bytes: &[u8]) -> Option<(u64, usize)> {
    // One byte: most keys, serial types and sizes.
    if let Some(&byte) = bytes.first() {
        if byte < 0x80 {
            return Some((u64::from(byte), 1));
        }
    }
    let mut value = 0u64;
    for (index, &byte) in bytes.iter().take(MAX_VARINT_BYTES).enumerate() {
        if index + 1 == MAX_VARINT_BYTES {
            return Some(((value << 8) | u64::from(byte), MAX_VARINT_BYTES));
        }
        value = (value << 7) | u64::from(byte & 0x7f);
        if byte < 0x80 {
            return Some((value, index + 1));
        }
    }
    None
}

/// Most children an interior page of this geometry can have: `Vec` capacity that makes
/// [`interior_children`] (and [`overflow_chains`], since no page has more cells than that)
/// succeed on any valid page. 0 for a geometry [`Geometry::new`] refuses.
pub(crate) fn max_children(geometry: Geometry) -> usize {
    if !geometry.is_valid() {
        return 0;
    }
    max_cells(geometry.usable_bytes as usize, INTERIOR_HEADER_BYTES) + 1
}

/// Cells that fit after a cell pointer array starting at `cell_array_start`: each needs a
/// 2-byte pointer and at least 4 bytes of content before the end of the usable area.
fn max_cells(usable_bytes: usize, cell_array_start: usize) -> usize {
    usable_bytes.saturating_sub(cell_array_start) / (CELL_POINTER_BYTES + MIN_CELL_BYTES)
}

/// The parsed and bounds-checked B-tree page header.
#[derive(Clone, Copy, Debug)]
struct PageHeader {
    kind: PageKind,
    cell_count: usize,
    /// Offset of the cell pointer array in the page.
    cell_array_start: usize,
    /// The right-most child of an interior page (not yet checked against the page count);
    /// 0 for leaves.
    right_most: u32,
}

impl PageHeader {
    /// First byte past the cell pointer array, where cell content may begin.
    fn cell_array_end(self) -> usize {
        self.cell_array_start + CELL_POINTER_BYTES * self.cell_count
    }
}

/// One parsed cell: its left child (interior pages) and overflow chain (spilling payloads).
#[derive(Clone, Debug)]
struct Cell {
    child: Option<u32>,
    /// Validated for every cell; read only by [`overflow_chains`], which the tests call.
    #[cfg_attr(not(test), allow(dead_code))]
    overflow: Option<OverflowChain>,
    /// Where the payload's local part lies in the cell's bytes (empty without payload).
    local_payload: std::ops::Range<usize>,
}

/// Where the B-tree page header starts: after the database header on page 1, else at 0.
fn header_offset(page_number: u32) -> usize {
    if page_number == 1 {
        DATABASE_HEADER_BYTES
    } else {
        0
    }
}

/// Parses and checks the page header: geometry, page length, `page_number != 0`, type byte,
/// cell count, content area start and first freeblock. On `Ok`, the cell pointer array lies
/// inside the usable area and `cell_count` is at most [`max_cells`] for the page.
fn parse_header(
    page: &[u8],
    page_number: u32,
    geometry: Geometry,
) -> Result<PageHeader, Malformed> {
    if !geometry.is_valid() {
        return Err(Malformed::Geometry);
    }
    if page.len() != geometry.page_size_bytes as usize {
        return Err(Malformed::Length);
    }
    if page_number == 0 {
        return Err(Malformed::PageNumber);
    }
    let usable_bytes = geometry.usable_bytes as usize;
    let start = header_offset(page_number);
    let type_byte = *page.get(start).ok_or(Malformed::Length)?;
    let kind = PageKind::from_type_byte(type_byte).ok_or(Malformed::PageType)?;
    let first_freeblock = usize::from(read_u16(page, start + 1).ok_or(Malformed::Length)?);
    let cell_count = usize::from(read_u16(page, start + 3).ok_or(Malformed::Length)?);
    let raw_content_start = read_u16(page, start + 5).ok_or(Malformed::Length)?;
    let right_most = if kind.is_interior() {
        read_u32(page, start + 8).ok_or(Malformed::Length)?
    } else {
        0
    };
    let header = PageHeader {
        kind,
        cell_count,
        cell_array_start: start + kind.header_bytes(),
        right_most,
    };
    if cell_count > max_cells(usable_bytes, header.cell_array_start) {
        return Err(Malformed::CellCount);
    }
    // A stored 0 means 65536, the only content start a u16 cannot hold.
    let content_start = match raw_content_start {
        0 => MAX_PAGE_SIZE_BYTES as usize,
        other => usize::from(other),
    };
    if !(header.cell_array_end()..=usable_bytes).contains(&content_start) {
        return Err(Malformed::ContentStart);
    }
    let last_freeblock_start = usable_bytes.saturating_sub(MIN_CELL_BYTES);
    if first_freeblock != 0 && !(content_start..=last_freeblock_start).contains(&first_freeblock) {
        return Err(Malformed::Freeblock);
    }
    Ok(header)
}

/// Parses and checks the whole page, calling `visit` with every cell in cell-pointer order
/// (key order), and stops at the first `Err` of either. Checks everything [`parse_header`]
/// does, that `page_number <= page_count`, the right-most child, and every cell.
fn for_each_cell(
    page: &[u8],
    page_number: u32,
    geometry: Geometry,
    page_count: u32,
    mut visit: impl FnMut(Cell, &[u8]) -> Result<(), Malformed>,
) -> Result<PageHeader, Malformed> {
    let header = parse_header(page, page_number, geometry)?;
    if page_number > page_count {
        return Err(Malformed::PageNumber);
    }
    if header.kind.is_interior() {
        check_page_reference(
            header.right_most,
            page_number,
            page_count,
            Malformed::ChildPage,
        )?;
    }
    let usable = page
        .get(..geometry.usable_bytes as usize)
        .ok_or(Malformed::Length)?;
    let cell_array_end = header.cell_array_end();
    let limits = LocalLimits::new(header.kind, geometry);
    let context = CellContext {
        kind: header.kind,
        limits,
        page_number,
        page_count,
    };
    for index in 0..header.cell_count {
        let pointer_at = header.cell_array_start + CELL_POINTER_BYTES * index;
        let pointer = usize::from(read_u16(usable, pointer_at).ok_or(Malformed::CellCount)?);
        if pointer < cell_array_end {
            return Err(Malformed::CellPointer);
        }
        let cell_bytes = usable.get(pointer..).ok_or(Malformed::CellPointer)?;
        if cell_bytes.is_empty() {
            return Err(Malformed::CellPointer);
        }
        visit(parse_cell(cell_bytes, context)?, cell_bytes)?;
    }
    Ok(header)
}

/// What [`parse_cell`] needs to know about the page a cell is on.
#[derive(Clone, Copy, Debug)]
struct CellContext {
    kind: PageKind,
    limits: LocalLimits,
    page_number: u32,
    page_count: u32,
}

impl CellContext {
    /// Most pages an overflow chain starting on this page can have: its pages are distinct
    /// and none is page 1 or this page.
    fn overflow_pages_possible(self) -> u32 {
        let other_than_this = u32::from(self.page_number != 1);
        self.page_count.saturating_sub(1 + other_than_this)
    }
}

/// Parses one cell from `bytes`, which run from the cell's first byte to the end of the usable
/// area. On `Ok`, the child and the first overflow page are valid page references and every
/// byte the cell occupies (at least 4) lies within `bytes`.
fn parse_cell(bytes: &[u8], context: CellContext) -> Result<Cell, Malformed> {
    let mut at = 0;
    let child = if context.kind.is_interior() {
        let child = read_u32(bytes, 0).ok_or(Malformed::CellSize)?;
        check_page_reference(
            child,
            context.page_number,
            context.page_count,
            Malformed::ChildPage,
        )?;
        at += PAGE_NUMBER_BYTES;
        Some(child)
    } else {
        None
    };
    let mut overflow = None;
    let mut local_payload = 0..0;
    if context.kind.has_payload() {
        let (payload_bytes, size_bytes) = payload_size_varint(tail(bytes, at)?)?;
        at += size_bytes;
        if context.kind == PageKind::TableLeaf {
            at += varint_len(tail(bytes, at)?)?;
        }
        if payload_bytes > MAX_PAYLOAD_BYTES {
            return Err(Malformed::PayloadSize);
        }
        let local_bytes = context.limits.local_bytes(payload_bytes);
        let chain_pages = (payload_bytes - local_bytes).div_ceil(context.limits.overflow_bytes);
        if chain_pages > u64::from(context.overflow_pages_possible()) {
            return Err(Malformed::PayloadSize);
        }
        let local_bytes = usize::try_from(local_bytes).map_err(|_| Malformed::CellSize)?;
        local_payload = at..at.saturating_add(local_bytes);
        at += local_bytes;
        if chain_pages > 0 {
            let first_page = read_u32(bytes, at).ok_or(Malformed::CellSize)?;
            at += PAGE_NUMBER_BYTES;
            check_page_reference(
                first_page,
                context.page_number,
                context.page_count,
                Malformed::OverflowPage,
            )?;
            let page_count = u32::try_from(chain_pages).map_err(|_| Malformed::PayloadSize)?;
            overflow = Some(OverflowChain {
                first_page,
                page_count,
            });
        }
    } else {
        at += varint_len(tail(bytes, at)?)?;
    }
    if at.max(MIN_CELL_BYTES) > bytes.len() {
        return Err(Malformed::CellSize);
    }
    Ok(Cell {
        child,
        overflow,
        local_payload,
    })
}

/// How much of a payload a page of one kind keeps locally (btree.c `btreePayloadToLocal`).
#[derive(Clone, Copy, Debug)]
struct LocalLimits {
    max_local_bytes: u64,
    min_local_bytes: u64,
    /// Payload bytes per overflow page: the usable size minus the next-page pointer.
    overflow_bytes: u64,
}

impl LocalLimits {
    /// The limits for `kind` pages of a valid `geometry`: table leaves keep up to
    /// `usable - 35` bytes, index pages up to `(usable - 12) * 64 / 255 - 23`, and a spilling
    /// payload keeps at least `(usable - 12) * 32 / 255 - 23` (`lockBtree`, `decodeFlags`).
    /// Table interior pages have no payload; they get the table leaf limits, as in SQLite.
    fn new(kind: PageKind, geometry: Geometry) -> LocalLimits {
        let usable = u64::from(geometry.usable_bytes);
        debug_assert!(
            usable >= u64::from(MIN_USABLE_BYTES),
            "geometry is validated first"
        );
        let min_local_bytes = (usable - 12) * 32 / 255 - 23;
        let max_local_bytes = match kind {
            PageKind::TableLeaf | PageKind::TableInterior => usable - 35,
            PageKind::IndexLeaf | PageKind::IndexInterior => (usable - 12) * 64 / 255 - 23,
        };
        LocalLimits {
            max_local_bytes,
            min_local_bytes,
            overflow_bytes: usable - PAGE_NUMBER_BYTES as u64,
        }
    }

    /// Bytes of a `payload_bytes` payload stored in the cell itself; the rest spills. A payload
    /// up to the maximum stays whole; a larger one keeps `min + (payload - min) % (usable - 4)`
    /// bytes if that is at most the maximum, else the minimum, so that the last overflow page
    /// is as full as possible. The result is at most `payload_bytes` and at most the maximum.
    fn local_bytes(self, payload_bytes: u64) -> u64 {
        if payload_bytes <= self.max_local_bytes {
            return payload_bytes;
        }
        let surplus_bytes =
            self.min_local_bytes + (payload_bytes - self.min_local_bytes) % self.overflow_bytes;
        if surplus_bytes <= self.max_local_bytes {
            surplus_bytes
        } else {
            self.min_local_bytes
        }
    }
}

/// `page_reference` itself when it names a page another page may point to: in
/// 2..=`page_count` and not `page_number`; else `Err(error)`.
fn check_page_reference(
    page_reference: u32,
    page_number: u32,
    page_count: u32,
    error: Malformed,
) -> Result<u32, Malformed> {
    if (2..=page_count).contains(&page_reference) && page_reference != page_number {
        Ok(page_reference)
    } else {
        Err(error)
    }
}

/// Fills `children` from an interior page; see [`interior_children`].
fn collect_children(
    page: &[u8],
    page_number: u32,
    geometry: Geometry,
    page_count: u32,
    children: &mut Vec<u32>,
) -> Result<PageKind, Malformed> {
    let header = for_each_cell(
        page,
        page_number,
        geometry,
        page_count,
        |cell, _| match cell.child {
            Some(child) => push_within_capacity(children, child),
            None => Ok(()),
        },
    )?;
    if header.kind.is_interior() {
        push_within_capacity(children, header.right_most)?;
    }
    Ok(header.kind)
}

/// Appends `value` unless `out` is full: never reallocates.
fn push_within_capacity<T>(out: &mut Vec<T>, value: T) -> Result<(), Malformed> {
    if out.len() >= out.capacity() {
        return Err(Malformed::Capacity);
    }
    out.push(value);
    Ok(())
}

/// `bytes[at..]`, or `Err(CellSize)` when `at` is past the end.
fn tail(bytes: &[u8], at: usize) -> Result<&[u8], Malformed> {
    bytes.get(at..).ok_or(Malformed::CellSize)
}

/// The byte length (1..=9) of the SQLite varint at the start of `bytes`: it ends at the first
/// byte below 0x80, or after the 9th byte. `Err(CellSize)` when `bytes` ends first.
fn varint_len(bytes: &[u8]) -> Result<usize, Malformed> {
    varint(bytes)
        .map(|(_, length)| length)
        .ok_or(Malformed::CellSize)
}

/// The payload size at the start of `bytes` and its length in bytes, decoded as SQLite's cell
/// parsers decode it (`btreeParseCellPtr`, `btreeParseCellPtrIndex`): up to 9 bytes with 7
/// value bits from each, the 9th byte included. This differs from a general varint, whose 9th
/// byte gives 8 bits, only for 9-byte encodings, which no payload SQLite writes needs. The
/// value is below 2^63. `Err(CellSize)` when `bytes` ends before the varint does.
fn payload_size_varint(bytes: &[u8]) -> Result<(u64, usize), Malformed> {
    let mut value = 0u64;
    for (index, &byte) in bytes.iter().take(MAX_VARINT_BYTES).enumerate() {
        value = (value << 7) | u64::from(byte & 0x7f);
        if byte < 0x80 || index + 1 == MAX_VARINT_BYTES {
            return Ok((value, index + 1));
        }
    }
    Err(Malformed::CellSize)
}

/// The big-endian u16 at `bytes[at..at + 2]`, or `None` past the end.
fn read_u16(bytes: &[u8], at: usize) -> Option<u16> {
    let end = at.checked_add(2)?;
    let field: [u8; 2] = bytes.get(at..end)?.try_into().ok()?;
    Some(u16::from_be_bytes(field))
}

/// The big-endian u32 at `bytes[at..at + 4]`, or `None` past the end.
fn read_u32(bytes: &[u8], at: usize) -> Option<u32> {
    let end = at.checked_add(4)?;
    let field: [u8; 4] = bytes.get(at..end)?.try_into().ok()?;
    Some(u32::from_be_bytes(field))
}

/// For the tests of read-ahead and its row read-ahead: a page of `page_bytes` and type
/// `type_byte` holding `cells` (each cell's bytes, key order), an interior page's
/// right-most pointer last.
#[cfg(test)]
pub(crate) fn page_with_cells(
    page_bytes: usize,
    type_byte: u8,
    cells: &[Vec<u8>],
    right_most: Option<u32>,
) -> Vec<u8> {
    let mut page = vec![0u8; page_bytes];
    let header = if right_most.is_some() { 12 } else { 8 };
    page[0] = type_byte;
    page[3..5].copy_from_slice(&(cells.len() as u16).to_be_bytes());
    if let Some(right_most) = right_most {
        page[8..12].copy_from_slice(&right_most.to_be_bytes());
    }
    let mut content = page_bytes;
    for (index, cell) in cells.iter().enumerate() {
        content -= cell.len().max(4);
        page[content..content + cell.len()].copy_from_slice(cell);
        let pointer = header + 2 * index;
        page[pointer..pointer + 2].copy_from_slice(&(content as u16).to_be_bytes());
    }
    assert!(content >= header + 2 * cells.len(), "the cells fit");
    // 65,536 is written as 0, as SQLite writes it.
    page[5..7].copy_from_slice(&((content % 65_536) as u16).to_be_bytes());
    page
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use proptest::test_runner::FileFailurePersistence;
    use std::collections::{BTreeMap, HashMap, HashSet};
    use std::path::PathBuf;

    const PAGE_SIZES_BYTES: [u32; 8] = [512, 1024, 2048, 4096, 8192, 16384, 32768, 65536];

    fn geometry(page_size_bytes: u32, reserved_bytes: u32) -> Geometry {
        Geometry::new(page_size_bytes, reserved_bytes).expect("a valid test geometry")
    }

    /// SplitMix64: a tiny deterministic generator for test pages.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        }

        /// Uniform-ish in 0..bound (bound > 0).
        fn below(&mut self, bound: u64) -> u64 {
            self.next() % bound
        }

        /// Uniform-ish in low..=high.
        fn between(&mut self, low: u64, high: u64) -> u64 {
            low + self.below(high - low + 1)
        }
    }

    /// The canonical SQLite encoding of `value`: 7 bits a byte, big-endian, except that a
    /// 9-byte encoding's last byte carries 8 bits.
    fn encode_varint(value: u64) -> Vec<u8> {
        if value >> 56 != 0 {
            let mut out = vec![0u8; 9];
            out[8] = value as u8;
            let mut rest = value >> 8;
            for byte in out[..8].iter_mut().rev() {
                *byte = 0x80 | (rest & 0x7f) as u8;
                rest >>= 7;
            }
            return out;
        }
        let mut out = Vec::new();
        let mut rest = value;
        loop {
            out.push((rest & 0x7f) as u8);
            rest >>= 7;
            if rest == 0 {
                break;
            }
        }
        out.reverse();
        let last = out.len() - 1;
        for byte in &mut out[..last] {
            *byte |= 0x80;
        }
        out
    }

    fn type_byte(kind: PageKind) -> u8 {
        match kind {
            PageKind::TableInterior => 0x05,
            PageKind::IndexInterior => 0x02,
            PageKind::TableLeaf => 0x0d,
            PageKind::IndexLeaf => 0x0a,
        }
    }

    fn database_header(geometry: Geometry) -> [u8; 100] {
        let mut header = [0u8; 100];
        header[..16].copy_from_slice(HEADER_MAGIC);
        let raw_page_size = if geometry.page_size_bytes == 65536 {
            1
        } else {
            geometry.page_size_bytes as u16
        };
        header[16..18].copy_from_slice(&raw_page_size.to_be_bytes());
        header[18] = 1;
        header[19] = 1;
        header[20] = geometry.reserved_bytes() as u8;
        header[21..24].copy_from_slice(&PAYLOAD_FRACTIONS);
        header
    }

    /// Local payload bytes as the file format document states the rule (fileformat2,
    /// "Cell Payload Overflow Pages"), written out independently of `LocalLimits`.
    fn spec_local_bytes(kind: PageKind, usable: u64, payload: u64) -> u64 {
        let x = if kind == PageKind::TableLeaf {
            usable - 35
        } else {
            ((usable - 12) * 64 / 255) - 23
        };
        let m = ((usable - 12) * 32 / 255) - 23;
        let k = m + ((payload - m.min(payload)) % (usable - 4));
        if payload <= x {
            payload
        } else if k <= x {
            k
        } else {
            m
        }
    }

    /// A cell to encode: `child` on interior pages, `key` as the table interior key or the
    /// table leaf rowid, and a payload of `payload_bytes` spilling to `overflow_first`.
    #[derive(Clone, Copy, Debug)]
    struct TestCell {
        child: u32,
        key: u64,
        payload_bytes: u64,
        overflow_first: u32,
    }

    /// The cell's bytes and the overflow chain the parser must report for it.
    fn encode_cell(
        kind: PageKind,
        geometry: Geometry,
        cell: TestCell,
    ) -> (Vec<u8>, Option<OverflowChain>) {
        let mut out = Vec::new();
        if kind.is_interior() {
            out.extend_from_slice(&cell.child.to_be_bytes());
        }
        if kind == PageKind::TableInterior {
            out.extend(encode_varint(cell.key));
            return (out, None);
        }
        out.extend(encode_varint(cell.payload_bytes));
        if kind == PageKind::TableLeaf {
            out.extend(encode_varint(cell.key));
        }
        let usable = u64::from(geometry.usable_bytes);
        let local = spec_local_bytes(kind, usable, cell.payload_bytes);
        out.extend((0..local).map(|i| (i % 251) as u8));
        if local == cell.payload_bytes {
            return (out, None);
        }
        out.extend_from_slice(&cell.overflow_first.to_be_bytes());
        let chain = OverflowChain {
            first_page: cell.overflow_first,
            page_count: (cell.payload_bytes - local).div_ceil(usable - 4) as u32,
        };
        (out, Some(chain))
    }

    /// A page holding `cells` (in key order), packed from the end of the usable area down,
    /// with a well-formed header; page 1 also gets a database header.
    fn build_page(
        geometry: Geometry,
        page_number: u32,
        kind: PageKind,
        cells: &[Vec<u8>],
        right_most: u32,
    ) -> Vec<u8> {
        let mut page = vec![0u8; geometry.page_size_bytes as usize];
        let start = header_offset(page_number);
        if page_number == 1 {
            page[..100].copy_from_slice(&database_header(geometry));
        }
        page[start] = type_byte(kind);
        page[start + 3..start + 5].copy_from_slice(&(cells.len() as u16).to_be_bytes());
        if kind.is_interior() {
            page[start + 8..start + 12].copy_from_slice(&right_most.to_be_bytes());
        }
        let cell_array_start = start + kind.header_bytes();
        let mut top = geometry.usable_bytes as usize;
        for (index, cell) in cells.iter().enumerate() {
            top -= cell.len().max(MIN_CELL_BYTES);
            page[top..top + cell.len()].copy_from_slice(cell);
            let at = cell_array_start + 2 * index;
            page[at..at + 2].copy_from_slice(&(top as u16).to_be_bytes());
        }
        assert!(
            cell_array_start + 2 * cells.len() <= top,
            "test cells overflow the page"
        );
        page[start + 5..start + 7].copy_from_slice(&(top as u16).to_be_bytes());
        page
    }

    /// What [`parse_all`] reports: the result of `page_kind`, then those of `interior_children`
    /// and `overflow_chains` with their output.
    type Parsed = (
        Result<PageKind, Malformed>,
        Result<Vec<u32>, Malformed>,
        Result<Vec<OverflowChain>, Malformed>,
    );

    /// Everything the parser reports for a page, with capacity `max_children`.
    fn parse_all(page: &[u8], page_number: u32, geometry: Geometry, page_count: u32) -> Parsed {
        let mut children = Vec::with_capacity(max_children(geometry));
        let mut chains = Vec::with_capacity(max_children(geometry));
        let children_result =
            interior_children(page, page_number, geometry, page_count, &mut children)
                .map(|_| children);
        let chains_result =
            overflow_chains(page, page_number, geometry, page_count, &mut chains).map(|_| chains);
        (
            page_kind(page, page_number, geometry),
            children_result,
            chains_result,
        )
    }

    /// The error every function that looks at the cells gives for `page`.
    fn cells_error(
        page: &[u8],
        page_number: u32,
        geometry: Geometry,
        page_count: u32,
    ) -> Malformed {
        let (_, children, chains) = parse_all(page, page_number, geometry, page_count);
        let error = children.expect_err("the page must be refused");
        assert_eq!(chains.err(), Some(error));
        error
    }

    #[test]
    fn geometry_from_header_accepts_what_sqlite_accepts() {
        for page_size in PAGE_SIZES_BYTES {
            for reserved in [0, 1, 32] {
                let expected = geometry(page_size, reserved);
                let header = database_header(expected);
                assert_eq!(Geometry::from_header(&header), Some(expected));
                assert_eq!(expected.usable_bytes, page_size - reserved);
                // Longer input (the whole page) is fine.
                let mut page = header.to_vec();
                page.resize(page_size as usize, 0);
                assert_eq!(Geometry::from_header(&page), Some(expected));
            }
        }
        let max_reserved = geometry(65536, 255);
        assert_eq!(
            Geometry::from_header(&database_header(max_reserved)),
            Some(max_reserved)
        );
        let tightest = geometry(512, 32);
        assert_eq!(tightest.usable_bytes, 480);
        assert_eq!(
            Geometry::from_header(&database_header(tightest)),
            Some(tightest)
        );
    }

    #[test]
    fn geometry_from_header_refuses_malformed_headers() {
        let good = database_header(geometry(4096, 0));
        assert_eq!(Geometry::from_header(&good[..99]), None);
        assert_eq!(Geometry::from_header(&[]), None);
        let mut bad_magic = good;
        bad_magic[15] = b'x';
        assert_eq!(Geometry::from_header(&bad_magic), None);
        let mut bad_fractions = good;
        bad_fractions[22] = 33;
        assert_eq!(Geometry::from_header(&bad_fractions), None);
        for raw in [0u16, 2, 256, 257, 1000, 3000, 4095, 4097, 65535, 0x0101] {
            let mut header = good;
            header[16..18].copy_from_slice(&raw.to_be_bytes());
            assert_eq!(Geometry::from_header(&header), None, "raw page size {raw}");
        }
        let mut too_much_reserved = database_header(geometry(512, 0));
        too_much_reserved[20] = 33;
        assert_eq!(Geometry::from_header(&too_much_reserved), None);
        assert_eq!(Geometry::new(512, 33), None);
        assert_eq!(Geometry::new(65536, 256), None);
        assert_eq!(Geometry::new(256, 0), None);
        assert_eq!(Geometry::new(131072, 0), None);
        assert_eq!(Geometry::new(0, 0), None);
        assert_eq!(Geometry::new(4096, 5000), None);
    }

    #[test]
    fn local_limits_match_known_values() {
        // (usable, table leaf max, index max, min) computed by hand from btree.c's formulas.
        for (usable, table_max, index_max, min) in [
            (480u32, 445u64, 94u64, 35u64),
            (512, 477, 102, 39),
            (4096, 4061, 1002, 489),
            (65536, 65501, 16422, 8199),
        ] {
            let page_size = usable.next_power_of_two();
            let geometry = geometry(page_size, page_size - usable);
            let table = LocalLimits::new(PageKind::TableLeaf, geometry);
            let index = LocalLimits::new(PageKind::IndexLeaf, geometry);
            assert_eq!(table.max_local_bytes, table_max);
            assert_eq!(table.min_local_bytes, min);
            assert_eq!(index.max_local_bytes, index_max);
            assert_eq!(index.min_local_bytes, min);
            assert_eq!(
                LocalLimits::new(PageKind::IndexInterior, geometry).max_local_bytes,
                index_max
            );
        }
        let limits = LocalLimits::new(PageKind::TableLeaf, geometry(4096, 0));
        assert_eq!(limits.local_bytes(4061), 4061);
        // 489 + (5000 - 489) % 4092 = 908 fits under the maximum.
        assert_eq!(limits.local_bytes(5000), 908);
        // 489 + (4062 - 489) % 4092 = 4062 exceeds the maximum: only the minimum stays.
        assert_eq!(limits.local_bytes(4062), 489);
        // 489 + (4581 - 489) % 4092 = 489 exactly.
        assert_eq!(limits.local_bytes(4581), 489);
        let index = LocalLimits::new(PageKind::IndexLeaf, geometry(4096, 0));
        assert_eq!(index.local_bytes(1002), 1002);
        // 489 + (1003 - 489) % 4092 = 1003 exceeds the index maximum 1002.
        assert_eq!(index.local_bytes(1003), 489);
        for usable in [480u64, 512, 1000, 4096, 4064, 65536, 65281] {
            let page_size = (usable as u32).next_power_of_two();
            let geometry = geometry(page_size, page_size - usable as u32);
            for kind in [
                PageKind::TableLeaf,
                PageKind::IndexLeaf,
                PageKind::IndexInterior,
            ] {
                let limits = LocalLimits::new(kind, geometry);
                for payload in (0..3 * usable).chain([u64::from(i32::MAX as u32)]) {
                    assert_eq!(
                        limits.local_bytes(payload),
                        spec_local_bytes(kind, usable, payload),
                        "{kind:?} usable {usable} payload {payload}"
                    );
                }
            }
        }
    }

    #[test]
    fn varints_decode_like_sqlite() {
        for value in [
            0u64,
            1,
            127,
            128,
            16383,
            16384,
            1 << 31,
            (1 << 56) - 1,
            1 << 56,
            u64::MAX,
        ] {
            let encoded = encode_varint(value);
            assert_eq!(varint_len(&encoded), Ok(encoded.len()), "{value}");
            let mut padded = encoded.clone();
            padded.push(0xff);
            assert_eq!(varint_len(&padded), Ok(encoded.len()));
            if encoded.len() < 9 {
                assert_eq!(payload_size_varint(&encoded), Ok((value, encoded.len())));
            }
        }
        assert_eq!(varint_len(&[0x80; 9]), Ok(9));
        assert_eq!(varint_len(&[0x80; 8]), Err(Malformed::CellSize));
        assert_eq!(varint_len(&[]), Err(Malformed::CellSize));
        // The payload size takes 7 bits from a 9th byte, as btreeParseCellPtr does.
        let mut nine = [0x80u8; 9];
        nine[8] = 0x85;
        assert_eq!(payload_size_varint(&nine), Ok((5, 9)));
        assert_eq!(payload_size_varint(&[0xff; 9]), Ok(((1 << 63) - 1, 9)));
        assert_eq!(payload_size_varint(&[0x81]), Err(Malformed::CellSize));
    }

    /// Cells of every payload class for `kind`: small, exactly at the local maximum, just
    /// past it, and spilling over many pages.
    fn sample_cells(kind: PageKind, geometry: Geometry) -> Vec<TestCell> {
        let limits = LocalLimits::new(kind, geometry);
        let usable = u64::from(geometry.usable_bytes);
        let payloads = [
            0,
            3,
            limits.max_local_bytes,
            limits.max_local_bytes + 1,
            usable * 3 + 17,
            2 * usable,
        ];
        payloads
            .iter()
            .enumerate()
            .map(|(index, &payload_bytes)| TestCell {
                child: 3 + index as u32,
                key: [0, 1, 127, 128, u64::MAX, 1 << 40][index],
                payload_bytes,
                overflow_first: 100 + index as u32,
            })
            .collect()
    }

    #[test]
    fn every_kind_round_trips_for_every_geometry() {
        let kinds = [
            PageKind::TableInterior,
            PageKind::IndexInterior,
            PageKind::TableLeaf,
            PageKind::IndexLeaf,
        ];
        for (page_size, reserved) in [
            (512, 0),
            (512, 32),
            (4096, 0),
            (4096, 32),
            (65536, 0),
            (65536, 32),
        ] {
            let geometry = geometry(page_size, reserved);
            for kind in kinds {
                for page_number in [1, 2, 500] {
                    let page_count = 1000;
                    let mut cells = Vec::new();
                    let mut expected_children = Vec::new();
                    let mut expected_chains = Vec::new();
                    for cell in sample_cells(kind, geometry) {
                        let (bytes, chain) = encode_cell(kind, geometry, cell);
                        let used: usize = cells.iter().map(|c: &Vec<u8>| c.len().max(4) + 2).sum();
                        if used + bytes.len() + 2 + 112 > geometry.usable_bytes as usize {
                            continue;
                        }
                        cells.push(bytes);
                        expected_children.push(cell.child);
                        expected_chains.extend(chain);
                    }
                    assert!(!cells.is_empty());
                    let right_most = 999;
                    let page = build_page(geometry, page_number, kind, &cells, right_most);
                    let (found_kind, children, chains) =
                        parse_all(&page, page_number, geometry, page_count);
                    assert_eq!(found_kind, Ok(kind));
                    if kind.is_interior() {
                        expected_children.push(right_most);
                    } else {
                        expected_children.clear();
                    }
                    if !kind.has_payload() {
                        expected_chains.clear();
                    }
                    let context = format!("{kind:?} page {page_number} {geometry:?}");
                    assert_eq!(children, Ok(expected_children), "{context}");
                    assert_eq!(chains, Ok(expected_chains.clone()), "{context}");
                    if kind.has_payload() && page_size > 512 {
                        assert!(expected_chains.len() >= 2, "{context}");
                    }
                }
            }
        }
    }

    #[test]
    fn empty_pages_are_accepted() {
        for (page_size, reserved) in [(512, 0), (4096, 32), (65536, 0), (65536, 32)] {
            let geometry = geometry(page_size, reserved);
            for page_number in [1, 2] {
                let leaf = build_page(geometry, page_number, PageKind::TableLeaf, &[], 0);
                let (kind, children, chains) = parse_all(&leaf, page_number, geometry, 3);
                assert_eq!(kind, Ok(PageKind::TableLeaf));
                assert_eq!(children, Ok(vec![]));
                assert_eq!(chains, Ok(vec![]));
                // An interior page with no cells still has its right-most child.
                let interior = build_page(geometry, page_number, PageKind::TableInterior, &[], 3);
                let (kind, children, _) = parse_all(&interior, page_number, geometry, 3);
                assert_eq!(kind, Ok(PageKind::TableInterior));
                assert_eq!(children, Ok(vec![3]));
            }
        }
    }

    #[test]
    fn page_one_has_its_header_after_the_database_header() {
        let geometry = geometry(4096, 0);
        let cells: Vec<Vec<u8>> = (0..5)
            .map(|i| {
                let cell = TestCell {
                    child: 10 + i,
                    key: u64::from(i),
                    payload_bytes: 0,
                    overflow_first: 0,
                };
                encode_cell(PageKind::TableInterior, geometry, cell).0
            })
            .collect();
        let page = build_page(geometry, 1, PageKind::TableInterior, &cells, 20);
        assert_eq!(page_kind(&page, 1, geometry), Ok(PageKind::TableInterior));
        let (_, children, _) = parse_all(&page, 1, geometry, 30);
        assert_eq!(children, Ok(vec![10, 11, 12, 13, 14, 20]));
        // Read as any other page, byte 0 is the 'S' of the magic.
        assert_eq!(page_kind(&page, 2, geometry), Err(Malformed::PageType));
        // A page other than 1 that starts with a B-tree header is not read at byte 100.
        let page_two = build_page(geometry, 2, PageKind::TableInterior, &cells, 20);
        assert_eq!(page_kind(&page_two, 1, geometry), Err(Malformed::PageType));
    }

    #[test]
    fn payload_size_with_nine_byte_varint_decodes_like_sqlite() {
        let geometry = geometry(512, 0);
        // Index leaf cell: payload size 5 written in 9 bytes (7 bits from the 9th byte).
        let mut cell = vec![0x80u8; 8];
        cell.push(0x05);
        cell.extend([1, 2, 3, 4, 5]);
        let page = build_page(geometry, 2, PageKind::IndexLeaf, &[cell], 0);
        let (kind, _, chains) = parse_all(&page, 2, geometry, 3);
        assert_eq!(kind, Ok(PageKind::IndexLeaf));
        assert_eq!(chains, Ok(vec![]));
        // With its high bit set the 9th byte still gives 7 bits: 0x85 & 0x7f = 5.
        let mut cell = vec![0x80u8; 8];
        cell.push(0x85);
        cell.extend([1, 2, 3, 4, 5]);
        let page = build_page(geometry, 2, PageKind::IndexLeaf, &[cell.clone()], 0);
        assert_eq!(parse_all(&page, 2, geometry, 3).2, Ok(vec![]));
        // Dropping the local payload makes the cell run past the usable area.
        let short = build_page(geometry, 2, PageKind::IndexLeaf, &[cell[..9].to_vec()], 0);
        let mut moved = short.clone();
        moved[8..10].copy_from_slice(&(512u16 - 9).to_be_bytes());
        moved[5..7].copy_from_slice(&(512u16 - 9).to_be_bytes());
        assert_eq!(cells_error(&moved, 2, geometry, 3), Malformed::CellSize);
    }

    #[test]
    fn cell_count_bound_is_exact() {
        let geometry = geometry(512, 0);
        // Index leaf cells of 4 bytes: 84 of them (plus pointers) fill 504 bytes exactly.
        let cell = encode_cell(
            PageKind::IndexLeaf,
            geometry,
            TestCell {
                child: 0,
                key: 0,
                payload_bytes: 3,
                overflow_first: 0,
            },
        )
        .0;
        assert_eq!(cell.len(), 4);
        let full = build_page(geometry, 2, PageKind::IndexLeaf, &vec![cell.clone(); 84], 0);
        assert_eq!(parse_all(&full, 2, geometry, 3).2, Ok(vec![]));
        let mut one_more = full.clone();
        one_more[3..5].copy_from_slice(&85u16.to_be_bytes());
        assert_eq!(page_kind(&one_more, 2, geometry), Err(Malformed::CellCount));
        // Minimal table interior cells: as many as fit give fewer children than max_children.
        let interior_cell = encode_cell(
            PageKind::TableInterior,
            geometry,
            TestCell {
                child: 2,
                key: 1,
                payload_bytes: 0,
                overflow_first: 0,
            },
        )
        .0;
        let fitting = (512 - 12) / (interior_cell.len() + 2);
        let page = build_page(
            geometry,
            3,
            PageKind::TableInterior,
            &vec![interior_cell; fitting],
            4,
        );
        let mut children = Vec::with_capacity(max_children(geometry));
        let capacity = children.capacity();
        assert_eq!(
            interior_children(&page, 3, geometry, 4, &mut children),
            Ok(PageKind::TableInterior)
        );
        assert_eq!(children.len(), fitting + 1);
        assert!(children.len() <= max_children(geometry));
        assert_eq!(children.capacity(), capacity);
        assert_eq!(max_children(geometry), (512 - 12) / 6 + 1);
        assert_eq!(
            max_children(Geometry {
                page_size_bytes: 100,
                usable_bytes: 100
            }),
            0
        );
    }

    #[test]
    fn capacity_is_never_exceeded() {
        let geometry = geometry(4096, 0);
        let kind = PageKind::IndexInterior;
        // Payloads of 1003 bytes keep 489 locally and spill 514 bytes to one page.
        let cells: Vec<Vec<u8>> = (0..7)
            .map(|i| {
                let cell = TestCell {
                    child: 10 + i,
                    key: 0,
                    payload_bytes: 1003,
                    overflow_first: 30 + i,
                };
                encode_cell(kind, geometry, cell).0
            })
            .collect();
        let page = build_page(geometry, 2, kind, &cells, 9);
        for capacity in 0..=8 {
            let mut children = Vec::with_capacity(capacity);
            let before = children.capacity();
            let result = interior_children(&page, 2, geometry, 100, &mut children);
            assert_eq!(children.capacity(), before);
            if before >= 8 {
                assert_eq!(result, Ok(kind));
                assert_eq!(children, [10, 11, 12, 13, 14, 15, 16, 9]);
            } else {
                assert_eq!(result, Err(Malformed::Capacity));
                assert!(children.is_empty());
            }
            let mut chains = Vec::with_capacity(capacity);
            let before = chains.capacity();
            let result = overflow_chains(&page, 2, geometry, 100, &mut chains);
            assert_eq!(chains.capacity(), before);
            if before >= 7 {
                assert_eq!(result, Ok(kind));
                assert_eq!(chains.len(), 7);
                assert_eq!(
                    chains[3],
                    OverflowChain {
                        first_page: 33,
                        page_count: 1
                    }
                );
            } else {
                assert_eq!(result, Err(Malformed::Capacity));
                assert!(chains.is_empty());
            }
        }
        // Stale contents are cleared.
        let mut children = Vec::with_capacity(64);
        children.extend([1, 2, 3]);
        let leaf = build_page(geometry, 2, PageKind::TableLeaf, &[], 0);
        assert_eq!(
            interior_children(&leaf, 2, geometry, 3, &mut children),
            Ok(PageKind::TableLeaf)
        );
        assert!(children.is_empty());
    }

    /// A valid table interior page 2 of 512 bytes with 3 cells, children 3, 4, 5, right-most 6.
    fn small_interior() -> (Geometry, Vec<u8>) {
        let geometry = geometry(512, 0);
        let cells: Vec<Vec<u8>> = (0..3)
            .map(|i| {
                let cell = TestCell {
                    child: 3 + i,
                    key: 1000 * u64::from(i),
                    payload_bytes: 0,
                    overflow_first: 0,
                };
                encode_cell(PageKind::TableInterior, geometry, cell).0
            })
            .collect();
        (
            geometry,
            build_page(geometry, 2, PageKind::TableInterior, &cells, 6),
        )
    }

    /// A valid table leaf page 2 of 512 bytes with one spilling cell (overflow page 7).
    fn small_leaf() -> (Geometry, Vec<u8>) {
        let geometry = geometry(512, 0);
        let cell = TestCell {
            child: 0,
            key: 42,
            payload_bytes: 1000,
            overflow_first: 7,
        };
        let (bytes, chain) = encode_cell(PageKind::TableLeaf, geometry, cell);
        assert_eq!(
            chain,
            Some(OverflowChain {
                first_page: 7,
                page_count: 2
            })
        );
        (
            geometry,
            build_page(geometry, 2, PageKind::TableLeaf, &[bytes], 0),
        )
    }

    #[test]
    fn targeted_corruptions_give_their_errors() {
        let (geometry, interior) = small_interior();
        assert_eq!(
            parse_all(&interior, 2, geometry, 10).1,
            Ok(vec![3, 4, 5, 6])
        );
        let cell_at = |page: &[u8], index: usize| {
            usize::from(u16::from_be_bytes([
                page[12 + 2 * index],
                page[13 + 2 * index],
            ]))
        };

        let mut page = interior.clone();
        page[0] = 0x07;
        assert_eq!(page_kind(&page, 2, geometry), Err(Malformed::PageType));
        assert_eq!(cells_error(&page, 2, geometry, 10), Malformed::PageType);

        assert_eq!(
            page_kind(&interior[..511], 2, geometry),
            Err(Malformed::Length)
        );
        let mut longer = interior.clone();
        longer.push(0);
        assert_eq!(cells_error(&longer, 2, geometry, 10), Malformed::Length);

        let bad_geometry = Geometry {
            page_size_bytes: 512,
            usable_bytes: 0,
        };
        assert_eq!(
            page_kind(&interior, 2, bad_geometry),
            Err(Malformed::Geometry)
        );
        assert_eq!(
            cells_error(&interior, 2, bad_geometry, 10),
            Malformed::Geometry
        );

        assert_eq!(
            page_kind(&interior, 0, geometry),
            Err(Malformed::PageNumber)
        );
        assert_eq!(
            cells_error(&interior, 2, geometry, 1),
            Malformed::PageNumber
        );

        let mut page = interior.clone();
        page[3..5].copy_from_slice(&84u16.to_be_bytes());
        assert_eq!(page_kind(&page, 2, geometry), Err(Malformed::CellCount));

        let mut page = interior.clone();
        page[5..7].copy_from_slice(&17u16.to_be_bytes());
        assert_eq!(page_kind(&page, 2, geometry), Err(Malformed::ContentStart));
        page[5..7].copy_from_slice(&0u16.to_be_bytes());
        assert_eq!(page_kind(&page, 2, geometry), Err(Malformed::ContentStart));

        let mut page = interior.clone();
        page[1..3].copy_from_slice(&20u16.to_be_bytes());
        assert_eq!(page_kind(&page, 2, geometry), Err(Malformed::Freeblock));
        page[1..3].copy_from_slice(&509u16.to_be_bytes());
        assert_eq!(page_kind(&page, 2, geometry), Err(Malformed::Freeblock));
        page[1..3].copy_from_slice(&508u16.to_be_bytes());
        assert_eq!(parse_all(&page, 2, geometry, 10).1, Ok(vec![3, 4, 5, 6]));

        for pointer in [0u16, 17, 512, 0xffff] {
            let mut page = interior.clone();
            page[14..16].copy_from_slice(&pointer.to_be_bytes());
            assert_eq!(
                cells_error(&page, 2, geometry, 10),
                Malformed::CellPointer,
                "{pointer}"
            );
        }
        // A cell pointer at the last usable byte leaves no room for an interior cell.
        let mut page = interior.clone();
        page[14..16].copy_from_slice(&511u16.to_be_bytes());
        assert_eq!(cells_error(&page, 2, geometry, 10), Malformed::CellSize);

        for child in [0u32, 1, 2, 11, u32::MAX] {
            let mut page = interior.clone();
            let at = cell_at(&page, 1);
            page[at..at + 4].copy_from_slice(&child.to_be_bytes());
            assert_eq!(
                cells_error(&page, 2, geometry, 10),
                Malformed::ChildPage,
                "{child}"
            );
            let mut page = interior.clone();
            page[8..12].copy_from_slice(&child.to_be_bytes());
            assert_eq!(
                cells_error(&page, 2, geometry, 10),
                Malformed::ChildPage,
                "{child}"
            );
        }

        let (geometry, leaf) = small_leaf();
        assert_eq!(
            parse_all(&leaf, 2, geometry, 10).2,
            Ok(vec![OverflowChain {
                first_page: 7,
                page_count: 2
            }])
        );
        let leaf_cell = usize::from(u16::from_be_bytes([leaf[8], leaf[9]]));
        let local = spec_local_bytes(PageKind::TableLeaf, 512, 1000) as usize;
        let overflow_at = leaf_cell + 2 + 1 + local;
        for first in [0u32, 1, 2, 11] {
            let mut page = leaf.clone();
            page[overflow_at..overflow_at + 4].copy_from_slice(&first.to_be_bytes());
            assert_eq!(
                cells_error(&page, 2, geometry, 10),
                Malformed::OverflowPage,
                "{first}"
            );
        }
        // The chain needs 2 pages besides pages 1 and 2: 3 pages cannot hold it.
        assert_eq!(cells_error(&leaf, 2, geometry, 2), Malformed::PayloadSize);
        assert_eq!(cells_error(&leaf, 2, geometry, 3), Malformed::PayloadSize);
        assert_eq!(
            parse_all(&leaf, 2, geometry, 4).2,
            Err(Malformed::OverflowPage)
        );
        let mut page = leaf.clone();
        page[overflow_at..overflow_at + 4].copy_from_slice(&3u32.to_be_bytes());
        assert_eq!(cells_error(&page, 2, geometry, 3), Malformed::PayloadSize);
        assert_eq!(
            parse_all(&page, 2, geometry, 4).2,
            Ok(vec![OverflowChain {
                first_page: 3,
                page_count: 2
            }])
        );

        // Payload sizes past i32::MAX.
        let mut page = leaf.clone();
        page[leaf_cell..leaf_cell + 5].copy_from_slice(&[0x88, 0x80, 0x80, 0x80, 0x00]);
        assert_eq!(cells_error(&page, 2, geometry, 10), Malformed::PayloadSize);
        // A huge payload whose chain is longer than the database.
        let mut page = leaf.clone();
        page[leaf_cell..leaf_cell + 5].copy_from_slice(&[0x87, 0xff, 0xff, 0xff, 0x7f]);
        assert_eq!(cells_error(&page, 2, geometry, 10), Malformed::PayloadSize);
        // The local payload running past the usable area.
        let mut page = leaf.clone();
        page[leaf_cell..leaf_cell + 2].copy_from_slice(&[0x83, 0x5d]);
        assert_eq!(cells_error(&page, 2, geometry, 10), Malformed::CellSize);
    }

    #[test]
    fn overflow_next_checks_the_next_page() {
        let mut page = vec![0u8; 512];
        assert_eq!(overflow_next(&page, 5, 10), Ok(0));
        page[..4].copy_from_slice(&9u32.to_be_bytes());
        assert_eq!(overflow_next(&page, 5, 10), Ok(9));
        assert_eq!(overflow_next(&page[..4], 5, 10), Ok(9));
        assert_eq!(overflow_next(&page[..3], 5, 10), Err(Malformed::Length));
        assert_eq!(overflow_next(&page, 9, 10), Err(Malformed::OverflowPage));
        assert_eq!(overflow_next(&page, 5, 8), Err(Malformed::OverflowPage));
        assert_eq!(overflow_next(&page, 1, 10), Err(Malformed::PageNumber));
        assert_eq!(overflow_next(&page, 0, 10), Err(Malformed::PageNumber));
        assert_eq!(overflow_next(&page, 11, 10), Err(Malformed::PageNumber));
        page[..4].copy_from_slice(&1u32.to_be_bytes());
        assert_eq!(overflow_next(&page, 5, 10), Err(Malformed::OverflowPage));
        page[..4].copy_from_slice(&u32::MAX.to_be_bytes());
        assert_eq!(overflow_next(&page, 5, 10), Err(Malformed::OverflowPage));
    }

    // ---- The corpus of malformed pages ----

    const CORPUS_PAGE_COUNT: u32 = 10;

    /// The corpus (see the module documentation): file name, bytes, the geometry it is read
    /// with, expected error. All are parsed as page 2 of a 10-page database with 512-byte
    /// pages (with no reserved bytes but where the entry says otherwise). `write_corpus`
    /// writes these bytes to the files; `corpus_pages_are_refused` checks the files still
    /// hold them and are refused as expected.
    fn corpus_pages() -> Vec<(&'static str, Vec<u8>, Geometry, Malformed)> {
        let (geometry, interior) = small_interior();
        let (_, leaf) = small_leaf();
        let mut bad_type = interior.clone();
        bad_type[0] = 0x07;
        let mut pointer_out = leaf.clone();
        pointer_out[8..10].copy_from_slice(&512u16.to_be_bytes());
        let mut child_past = interior.clone();
        let first_cell = usize::from(u16::from_be_bytes([interior[12], interior[13]]));
        child_past[first_cell..first_cell + 4].copy_from_slice(&11u32.to_be_bytes());
        let mut child_self = interior.clone();
        child_self[8..12].copy_from_slice(&2u32.to_be_bytes());
        let mut varint_off = build_page(geometry, 2, PageKind::IndexLeaf, &[vec![0xff; 4]], 0);
        assert_eq!(u16::from_be_bytes([varint_off[8], varint_off[9]]), 508);
        let mut count_large = leaf.clone();
        count_large[3..5].copy_from_slice(&200u16.to_be_bytes());
        let size_mismatch = leaf[..511].to_vec();
        varint_off[508..512].copy_from_slice(&[0xff; 4]);
        // The leaf's one cell ends the page: its overflow page number is the last 4 bytes.
        let overflow_at = 512 - 4;
        assert_eq!(leaf[overflow_at..], 7u32.to_be_bytes());
        let mut overflow_past = leaf.clone();
        overflow_past[overflow_at..].copy_from_slice(&(CORPUS_PAGE_COUNT + 1).to_be_bytes());
        let mut overflow_self = leaf.clone();
        overflow_self[overflow_at..].copy_from_slice(&2u32.to_be_bytes());
        // A payload whose chain would need more pages than the file has: the cell's
        // payload-size varint (where its pointer points) made 8192 bytes, 16 overflow pages.
        let cell = usize::from(u16::from_be_bytes([leaf[8], leaf[9]]));
        let mut payload_large = leaf.clone();
        assert_eq!(
            payload_large[cell..cell + 2],
            [0x87, 0x68],
            "1000 as a varint"
        );
        payload_large[cell..cell + 2].copy_from_slice(&[0xc0, 0x00]);
        // Valid without reserved bytes; with 32 of them its cell content starts past the
        // usable area.
        let reserved = geometry_with_reserved(32);
        vec![
            ("bad_type.bin", bad_type, geometry, Malformed::PageType),
            (
                "cell_pointer_out_of_range.bin",
                pointer_out,
                geometry,
                Malformed::CellPointer,
            ),
            (
                "child_past_page_count.bin",
                child_past,
                geometry,
                Malformed::ChildPage,
            ),
            (
                "child_is_self.bin",
                child_self,
                geometry,
                Malformed::ChildPage,
            ),
            (
                "varint_runs_off.bin",
                varint_off,
                geometry,
                Malformed::CellSize,
            ),
            (
                "cell_count_too_large.bin",
                count_large,
                geometry,
                Malformed::CellCount,
            ),
            (
                "page_size_mismatch.bin",
                size_mismatch,
                geometry,
                Malformed::Length,
            ),
            (
                "overflow_page_past_page_count.bin",
                overflow_past,
                geometry,
                Malformed::OverflowPage,
            ),
            (
                "overflow_page_is_self.bin",
                overflow_self,
                geometry,
                Malformed::OverflowPage,
            ),
            (
                "payload_needs_more_pages_than_the_file.bin",
                payload_large,
                geometry,
                Malformed::PayloadSize,
            ),
            (
                "cells_in_reserved_bytes.bin",
                interior,
                reserved,
                Malformed::ContentStart,
            ),
        ]
    }

    /// 512-byte pages with `reserved_bytes` at the end of each.
    fn geometry_with_reserved(reserved_bytes: u32) -> Geometry {
        geometry(512, reserved_bytes)
    }

    fn corpus_dir() -> PathBuf {
        PathBuf::from(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/corpus/btree_page"
        ))
    }

    /// Rewrites the corpus files from `corpus_pages`: `cargo test -- --ignored write_corpus`.
    #[test]
    #[ignore = "writes the corpus files"]
    fn write_corpus() {
        std::fs::create_dir_all(corpus_dir()).unwrap();
        for (name, bytes, _, _) in corpus_pages() {
            std::fs::write(corpus_dir().join(name), bytes).unwrap();
        }
    }

    #[test]
    fn corpus_pages_are_refused() {
        let expected = corpus_pages();
        let mut on_disk: Vec<String> = std::fs::read_dir(corpus_dir())
            .expect("the corpus directory")
            .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        on_disk.sort();
        let mut names: Vec<String> = expected
            .iter()
            .map(|(name, _, _, _)| name.to_string())
            .collect();
        names.sort();
        assert_eq!(
            on_disk, names,
            "corpus files and the table in this module differ"
        );
        for (name, built, geometry, error) in expected {
            let bytes = std::fs::read(corpus_dir().join(name)).unwrap();
            assert_eq!(bytes, built, "{name} differs from its recipe");
            assert_eq!(
                cells_error(&bytes, 2, geometry, CORPUS_PAGE_COUNT),
                error,
                "{name}"
            );
            assert_safe(&bytes, 2, geometry, CORPUS_PAGE_COUNT);
        }
    }

    // ---- Property tests ----

    /// Calls every function on `page` and checks what must hold for any input: no output
    /// past capacity, no reallocation, every reported page in range, the functions agreeing.
    fn assert_safe(page: &[u8], page_number: u32, geometry: Geometry, page_count: u32) {
        let capacity = max_children(geometry);
        let mut children = Vec::with_capacity(capacity);
        let mut chains = Vec::with_capacity(capacity);
        let children_capacity = children.capacity();
        let chains_capacity = chains.capacity();
        let kind = page_kind(page, page_number, geometry);
        let children_result =
            interior_children(page, page_number, geometry, page_count, &mut children);
        let chains_result = overflow_chains(page, page_number, geometry, page_count, &mut chains);
        assert_eq!(children.capacity(), children_capacity);
        assert_eq!(chains.capacity(), chains_capacity);
        assert_ne!(children_result, Err(Malformed::Capacity));
        assert_ne!(chains_result, Err(Malformed::Capacity));
        assert_eq!(children_result, chains_result);
        match children_result {
            Ok(found) => {
                assert_eq!(kind, Ok(found));
                for &child in &children {
                    assert!((2..=page_count).contains(&child) && child != page_number);
                }
                assert_eq!(found.is_interior(), !children.is_empty());
                for chain in &chains {
                    assert!((2..=page_count).contains(&chain.first_page));
                    assert_ne!(chain.first_page, page_number);
                    assert!(chain.page_count >= 1 && chain.page_count < page_count);
                }
                if !found.has_payload() {
                    assert!(chains.is_empty());
                }
                // A smaller buffer gets the same answer or Capacity, and is never grown.
                let small = children.len() / 2;
                let mut few = Vec::with_capacity(small);
                let few_capacity = few.capacity();
                let result = interior_children(page, page_number, geometry, page_count, &mut few);
                assert_eq!(few.capacity(), few_capacity);
                if children.len() <= few_capacity {
                    assert_eq!((result, &few), (Ok(found), &children));
                } else {
                    assert_eq!(result, Err(Malformed::Capacity));
                    assert!(few.is_empty());
                }
            }
            Err(_) => {
                assert!(children.is_empty());
                assert!(chains.is_empty());
            }
        }
        if kind.is_err() {
            assert!(children_result.is_err());
        }
        // The view reads any page without harm, exists exactly for well-headed interior
        // pages, and names the children a full parse finds.
        let view = interior_view(page, page_number, geometry);
        assert_eq!(
            view.is_some(),
            matches!(kind, Ok(PageKind::TableInterior | PageKind::IndexInterior))
        );
        if let Some(view) = view {
            let count = view.child_count();
            for index in [0, 1, 2, count / 2, count - 1, count, count + 1] {
                let child = view.child(page, index);
                assert!(index < count || child.is_none());
                if let Some(child) = child {
                    let first = view.position_of(page, child).expect("a child it named");
                    assert!(first <= index);
                }
            }
            if children_result.is_ok() {
                assert_eq!(view.child_count(), children.len());
                for (index, &child) in children.iter().enumerate() {
                    assert_eq!(view.child(page, index), Some(child));
                }
            }
        }
        // Rowids come only from index leaves the full parse accepts, within capacity.
        let mut rowids = Vec::with_capacity(max_cells_per_page(geometry));
        let rowids_capacity = rowids.capacity();
        let rowids_result = index_leaf_rowids(page, page_number, geometry, page_count, &mut rowids);
        assert_eq!(rowids.capacity(), rowids_capacity);
        match rowids_result {
            Ok(()) => assert_eq!(children_result, Ok(PageKind::IndexLeaf)),
            Err(_) => assert!(rowids.is_empty()),
        }
        if let (Some(view), Ok(PageKind::TableInterior)) = (view, children_result) {
            for rowid in [i64::MIN, -1, 0, 1, 1000, i64::MAX] {
                if let Some(child) = view.table_child_for(page, rowid) {
                    assert!(children.contains(&child));
                }
            }
        }
        if page.len() >= 4 {
            if let Ok(next) = overflow_next(page, page_number, page_count) {
                assert!(next == 0 || ((2..=page_count).contains(&next) && next != page_number));
            }
        }
    }

    /// A valid page generated from `seed`, with what the parser must report for it.
    struct GeneratedPage {
        geometry: Geometry,
        page_number: u32,
        page_count: u32,
        kind: PageKind,
        page: Vec<u8>,
        children: Vec<u32>,
        chains: Vec<OverflowChain>,
        cell_offsets: Vec<usize>,
    }

    fn generate_geometry(rng: &mut Rng) -> Geometry {
        let page_size = PAGE_SIZES_BYTES[rng.below(PAGE_SIZES_BYTES.len() as u64) as usize];
        let max_reserved = u64::from((page_size - MIN_USABLE_BYTES).min(MAX_RESERVED_BYTES));
        let reserved = match rng.below(3) {
            0 => 0,
            1 => max_reserved,
            _ => rng.below(max_reserved + 1),
        };
        geometry(page_size, reserved as u32)
    }

    fn generate_page(seed: u64) -> GeneratedPage {
        let mut rng = Rng(seed);
        let geometry = generate_geometry(&mut rng);
        let page_number = if rng.below(4) == 0 {
            1
        } else {
            rng.between(2, 5000) as u32
        };
        let page_count = page_number + rng.between(3000, 5_000_000) as u32;
        let kind = [
            PageKind::TableInterior,
            PageKind::IndexInterior,
            PageKind::TableLeaf,
            PageKind::IndexLeaf,
        ][rng.below(4) as usize];
        let usable = u64::from(geometry.usable_bytes);
        let limits = LocalLimits::new(kind, geometry);
        let max_payload = match rng.below(4) {
            0 => 4,
            1 => limits.max_local_bytes + 2,
            2 => 3 * usable,
            _ => 1_000_000,
        };
        let wanted_cells = match rng.below(3) {
            0 => rng.below(8),
            1 => rng.below(64),
            _ => u64::MAX,
        };
        let page_reference = |rng: &mut Rng| loop {
            let candidate = rng.between(2, u64::from(page_count)) as u32;
            if candidate != page_number {
                break candidate;
            }
        };
        let start = header_offset(page_number);
        let mut cells = Vec::new();
        let mut children = Vec::new();
        let mut chains = Vec::new();
        let mut used = start + kind.header_bytes();
        while (cells.len() as u64) < wanted_cells {
            let cell = TestCell {
                child: page_reference(&mut rng),
                key: match rng.below(3) {
                    0 => rng.below(128),
                    1 => rng.next(),
                    _ => rng.below(1 << 20),
                },
                payload_bytes: rng.below(max_payload + 1),
                overflow_first: page_reference(&mut rng),
            };
            let (bytes, chain) = encode_cell(kind, geometry, cell);
            let needed = bytes.len().max(MIN_CELL_BYTES) + CELL_POINTER_BYTES;
            if used + needed > geometry.usable_bytes as usize {
                break;
            }
            used += needed;
            cells.push(bytes);
            children.push(cell.child);
            chains.extend(chain);
        }
        let right_most = page_reference(&mut rng);
        if kind.is_interior() {
            children.push(right_most);
        } else {
            children.clear();
        }
        let page = build_page(geometry, page_number, kind, &cells, right_most);
        let cell_array_start = start + kind.header_bytes();
        let cell_offsets = (0..cells.len())
            .map(|i| {
                let at = cell_array_start + 2 * i;
                usize::from(u16::from_be_bytes([page[at], page[at + 1]]))
            })
            .collect();
        GeneratedPage {
            geometry,
            page_number,
            page_count,
            kind,
            page,
            children,
            chains,
            cell_offsets,
        }
    }

    /// One byte change: where (`region`, `position`) and how (`mode`, `value`).
    fn mutate(generated: &mut GeneratedPage, region: u8, position: u32, mode: u8, value: u8) {
        let start = header_offset(generated.page_number);
        let header_bytes = generated.kind.header_bytes();
        let cells = generated.cell_offsets.len();
        let position = position as usize;
        let at = match region % 4 {
            1 if cells > 0 => start + header_bytes + position % (2 * cells),
            2 if cells > 0 => generated.cell_offsets[position % cells] + (position / cells) % 16,
            3 => position % generated.page.len(),
            _ => start + position % header_bytes,
        };
        let Some(byte) = generated.page.get_mut(at) else {
            return;
        };
        *byte = match mode % 6 {
            0 => *byte ^ value.max(1),
            1 => value,
            2 => 0x00,
            3 => 0xff,
            4 => 0x80,
            _ => byte.wrapping_add(1),
        };
    }

    fn proptest_config() -> ProptestConfig {
        ProptestConfig {
            cases: 2000,
            failure_persistence: Some(Box::new(FileFailurePersistence::SourceParallel(
                "proptest-regressions",
            ))),
            ..ProptestConfig::default()
        }
    }

    proptest! {
        #![proptest_config(proptest_config())]

        /// Arbitrary bytes of every page size, some with a plausible header laid on top so the
        /// cells get parsed too.
        #[test]
        fn arbitrary_bytes_never_break_the_parser(
            seed in any::<u64>(),
            shape in 0u8..4,
            page_number in 1u32..6,
            extra_pages in 0u32..100_000,
        ) {
            let mut rng = Rng(seed);
            let geometry = generate_geometry(&mut rng);
            let mut page: Vec<u8> =
                (0..geometry.page_size_bytes).map(|_| rng.next() as u8).collect();
            let page_count = page_number + extra_pages;
            let start = header_offset(page_number);
            if shape >= 1 {
                let kind = [
                    PageKind::TableInterior,
                    PageKind::IndexInterior,
                    PageKind::TableLeaf,
                    PageKind::IndexLeaf,
                ][rng.below(4) as usize];
                page[start] = type_byte(kind);
                let cells = rng.below(100) as u16;
                page[start + 3..start + 5].copy_from_slice(&cells.to_be_bytes());
                page[start + 1..start + 3].copy_from_slice(&0u16.to_be_bytes());
                let cell_array_start = start + kind.header_bytes();
                let content = (cell_array_start + 2 * usize::from(cells)) as u16;
                page[start + 5..start + 7].copy_from_slice(&content.to_be_bytes());
                if shape >= 2 {
                    for i in 0..usize::from(cells) {
                        let last = u64::from(geometry.usable_bytes) - 1;
                        let pointer = rng.between(u64::from(content), last) as u16;
                        let at = cell_array_start + 2 * i;
                        page[at..at + 2].copy_from_slice(&pointer.to_be_bytes());
                    }
                }
                if shape >= 3 {
                    // Page numbers near the valid range at 4-byte steps through the cell
                    // content, so that child and overflow checks pass now and then.
                    for chunk in page[usize::from(content)..].chunks_mut(4) {
                        if chunk.len() == 4 && rng.below(2) == 0 {
                            let reference = rng.between(0, u64::from(page_count) + 2) as u32;
                            chunk.copy_from_slice(&reference.to_be_bytes());
                        }
                    }
                }
            }
            assert_safe(&page, page_number, geometry, page_count);
            assert_safe(&page, page_number, geometry, 1);
            assert_safe(&page[..page.len() - 1], page_number, geometry, page_count);
        }

        /// Valid pages parse to exactly what was written; with a few bytes changed in the
        /// header, the cell pointers, or the cells (child pointers, varints, overflow
        /// pointers), they never break the parser.
        #[test]
        fn mutated_valid_pages_never_break_the_parser(
            seed in any::<u64>(),
            mutations in proptest::collection::vec(
                (any::<u8>(), any::<u32>(), any::<u8>(), any::<u8>()),
                0..6,
            ),
        ) {
            let mut generated = generate_page(seed);
            let (kind, children, chains) = parse_all(
                &generated.page,
                generated.page_number,
                generated.geometry,
                generated.page_count,
            );
            prop_assert_eq!(kind, Ok(generated.kind));
            prop_assert_eq!(children, Ok(generated.children.clone()));
            prop_assert_eq!(chains, Ok(generated.chains.clone()));
            for (region, position, mode, value) in mutations {
                mutate(&mut generated, region, position, mode, value);
            }
            assert_safe(
                &generated.page,
                generated.page_number,
                generated.geometry,
                generated.page_count,
            );
        }
    }

    // ---- Real databases ----

    /// One row of `dbstat`: page number, page type and cell count, keyed by path.
    struct StatRow {
        page_number: u32,
        page_type: String,
        cell_count: usize,
    }

    /// Walks every b-tree of the database at `path` from its root page with
    /// `interior_children`, follows every overflow chain with `overflow_next`, and checks the
    /// pages, their order and their paths against SQLite's own `dbstat`. Returns the number
    /// of b-tree pages, overflow pages, and overflow chains starting on index interior pages.
    fn check_database(
        connection: &rusqlite::Connection,
        path: &std::path::Path,
    ) -> (usize, usize, usize) {
        let bytes = std::fs::read(path).unwrap();
        let geometry = Geometry::from_header(&bytes).expect("a valid database header");
        let page_size = geometry.page_size_bytes as usize;
        assert_eq!(bytes.len() % page_size, 0);
        let page_count = (bytes.len() / page_size) as u32;
        let header_page_count = u32::from_be_bytes(bytes[28..32].try_into().unwrap());
        assert_eq!(page_count, header_page_count);
        let sqlite_page_count: u32 = connection
            .query_row("PRAGMA page_count", [], |row| row.get(0))
            .unwrap();
        assert_eq!(page_count, sqlite_page_count);
        let page = |number: u32| {
            let start = (number as usize - 1) * page_size;
            &bytes[start..start + page_size]
        };

        // dbstat, per b-tree name: path -> row.
        let mut stat: HashMap<String, HashMap<String, StatRow>> = HashMap::new();
        let mut statement = connection
            .prepare("SELECT name, path, pageno, pagetype, ncell FROM dbstat")
            .unwrap();
        let rows = statement
            .query_map([], |row| {
                Ok((
                    row.get::<_, String>(0)?,
                    row.get::<_, String>(1)?,
                    StatRow {
                        page_number: row.get(2)?,
                        page_type: row.get(3)?,
                        cell_count: row.get::<_, u32>(4)? as usize,
                    },
                ))
            })
            .unwrap();
        let mut stat_rows = 0;
        for row in rows {
            let (name, path, row) = row.unwrap();
            stat.entry(name).or_default().insert(path, row);
            stat_rows += 1;
        }

        let mut roots: Vec<(String, u32)> = vec![("sqlite_schema".to_string(), 1)];
        let mut statement = connection
            .prepare("SELECT name, rootpage FROM sqlite_schema WHERE rootpage > 0")
            .unwrap();
        roots.extend(
            statement
                .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))
                .unwrap()
                .map(Result::unwrap),
        );
        assert_eq!(roots.len(), stat.len(), "every b-tree appears in dbstat");

        let mut seen = HashSet::new();
        let mut btree_pages = 0;
        let mut overflow_pages = 0;
        let mut interior_chains = 0;
        let mut children = Vec::with_capacity(max_children(geometry));
        let mut chains = Vec::with_capacity(max_children(geometry));
        for (name, root) in &roots {
            let stat = &stat[name];
            let mut matched = 0;
            let mut stack = vec![(*root, "/".to_string())];
            while let Some((number, path)) = stack.pop() {
                assert!(seen.insert(number), "page {number} reached twice");
                btree_pages += 1;
                let row = stat
                    .get(&path)
                    .unwrap_or_else(|| panic!("{name}: no dbstat row at {path}"));
                assert_eq!(row.page_number, number, "{name} {path}");
                matched += 1;
                let kind = page_kind(page(number), number, geometry).unwrap();
                let cells = {
                    let start = header_offset(number);
                    usize::from(u16::from_be_bytes([
                        page(number)[start + 3],
                        page(number)[start + 4],
                    ]))
                };
                assert_eq!(cells, row.cell_count, "{name} {path}");
                let found =
                    interior_children(page(number), number, geometry, page_count, &mut children)
                        .unwrap();
                assert_eq!(found, kind);
                if kind.is_interior() {
                    assert_eq!(row.page_type, "internal");
                    assert_eq!(children.len(), cells + 1);
                    let view = interior_view(page(number), number, geometry).unwrap();
                    assert_eq!(view.child_count(), children.len());
                    for (index, &child) in children.iter().enumerate() {
                        assert_eq!(view.child(page(number), index), Some(child));
                    }
                    for (index, &child) in children.iter().enumerate().rev() {
                        stack.push((child, format!("{path}{index:03x}/")));
                    }
                } else {
                    assert_eq!(row.page_type, "leaf");
                    assert!(children.is_empty());
                }

                // Overflow chains of this page, against dbstat's "<path><cell>+<index>" rows.
                let mut expected: BTreeMap<u64, BTreeMap<u64, u32>> = BTreeMap::new();
                for (other, row) in stat {
                    let Some(rest) = other.strip_prefix(path.as_str()) else {
                        continue;
                    };
                    let Some((cell, index)) = rest.split_once('+') else {
                        continue;
                    };
                    if cell.contains('/') {
                        continue;
                    }
                    assert_eq!(row.page_type, "overflow");
                    let cell = u64::from_str_radix(cell, 16).unwrap();
                    let index = u64::from_str_radix(index, 16).unwrap();
                    expected
                        .entry(cell)
                        .or_default()
                        .insert(index, row.page_number);
                    matched += 1;
                }
                overflow_chains(page(number), number, geometry, page_count, &mut chains).unwrap();
                if kind == PageKind::IndexInterior {
                    interior_chains += chains.len();
                }
                assert_eq!(chains.len(), expected.len(), "{name} {path}");
                for (chain, expected) in chains.iter().zip(expected.values()) {
                    let mut walked = Vec::new();
                    let mut current = chain.first_page;
                    while current != 0 {
                        assert!(walked.len() < chain.page_count as usize, "chain too long");
                        assert!(seen.insert(current), "page {current} reached twice");
                        walked.push(current);
                        current = overflow_next(page(current), current, page_count).unwrap();
                    }
                    assert_eq!(walked.len(), chain.page_count as usize);
                    assert_eq!(walked, expected.values().copied().collect::<Vec<_>>());
                    overflow_pages += walked.len();
                }
            }
            assert_eq!(
                matched,
                stat.len(),
                "{name}: dbstat has pages the walk missed"
            );
        }
        assert_eq!(btree_pages + overflow_pages, stat_rows);
        let freelist: u32 = connection
            .query_row("PRAGMA freelist_count", [], |row| row.get(0))
            .unwrap();
        assert_eq!(seen.len() + freelist as usize, page_count as usize);
        (btree_pages, overflow_pages, interior_chains)
    }

    /// A database of `page_size_bytes` with a rowid table, an index on text, and a WITHOUT
    /// ROWID table with text keys, holding rows whose blobs and keys spill to overflow
    /// pages, with some rows deleted again.
    fn build_database(
        page_size_bytes: u32,
        rows: u64,
        scale: u64,
    ) -> (tempfile::TempDir, std::path::PathBuf) {
        let directory = tempfile::tempdir().unwrap();
        let path = directory.path().join("test.db");
        let connection = rusqlite::Connection::open(&path).unwrap();
        connection
            .execute_batch(&format!(
                "PRAGMA page_size = {page_size_bytes};
                 PRAGMA journal_mode = DELETE;
                 CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT, body BLOB);
                 CREATE INDEX t_name ON t(name);
                 CREATE TABLE w(k TEXT PRIMARY KEY, v BLOB) WITHOUT ROWID;"
            ))
            .unwrap();
        connection.execute_batch("BEGIN").unwrap();
        let mut rng = Rng(u64::from(page_size_bytes));
        {
            let mut insert_t = connection
                .prepare("INSERT INTO t(id, name, body) VALUES (?1, ?2, ?3)")
                .unwrap();
            let mut insert_w = connection
                .prepare("INSERT INTO w(k, v) VALUES (?1, ?2)")
                .unwrap();
            for id in 0..rows {
                let name_bytes = match rng.below(10) {
                    0 => rng.below(scale / 2),
                    _ => rng.below(40),
                } as usize;
                let name: String = format!("{id:08}-{}", "n".repeat(name_bytes));
                let body_bytes = match rng.below(5) {
                    0 => rng.below(scale * 2),
                    _ => rng.below(scale / 8),
                } as usize;
                let body: Vec<u8> = (0..body_bytes).map(|i| (i as u64 ^ id) as u8).collect();
                insert_t
                    .execute(rusqlite::params![id as i64 * 3, name, body])
                    .unwrap();
                let key_bytes = match rng.below(4) {
                    0 => rng.below(scale / 2),
                    _ => rng.below(30),
                } as usize;
                let key = format!("{:08}-{}", rng.below(1 << 30), "k".repeat(key_bytes));
                let value: Vec<u8> = vec![id as u8; rng.below(scale / 16) as usize];
                insert_w.execute(rusqlite::params![key, value]).unwrap();
            }
        }
        connection.execute_batch("COMMIT").unwrap();
        connection
            .execute_batch("DELETE FROM t WHERE id % 7 = 0; DELETE FROM w WHERE length(k) % 5 = 0;")
            .unwrap();
        drop(connection);
        (directory, path)
    }

    fn check_built_database(page_size_bytes: u32, rows: u64, scale: u64) {
        let (_directory, path) = build_database(page_size_bytes, rows, scale);
        let connection = rusqlite::Connection::open(&path).unwrap();
        let has_dbstat: bool = connection
            .query_row(
                "SELECT count(*) > 0 FROM pragma_module_list WHERE name = 'dbstat'",
                [],
                |row| row.get(0),
            )
            .unwrap();
        assert!(has_dbstat, "the bundled SQLite has dbstat");
        let (btree_pages, overflow_pages, interior_chains) = check_database(&connection, &path);
        // The data is large enough for interior pages and overflow chains everywhere.
        assert!(btree_pages > 20, "{btree_pages}");
        assert!(overflow_pages > 20, "{overflow_pages}");
        assert!(interior_chains > 0, "no index interior cell spills");
        let depth: u32 = connection
            .query_row(
                "SELECT max(length(path) - length(replace(path, '/', ''))) FROM dbstat",
                [],
                |row| row.get(0),
            )
            .unwrap();
        assert!(depth >= 3, "trees of depth {depth}");
        // Most index entries keep their record on the page (some names spill).
        let rowids = check_rows(&connection, &path);
        let count: i64 = connection
            .query_row("SELECT count(*) FROM t", [], |row| row.get(0))
            .unwrap();
        assert!(
            rowids * 2 > count as usize,
            "{rowids} of {count} rowids read from index leaves"
        );
    }

    #[test]
    fn the_rowid_is_the_last_integer_column_of_a_record() {
        // Header of 3 bytes: text of 1 byte (serial type 15), then a 2-byte integer.
        assert_eq!(
            record_last_integer(&[3, 15, 2, b'a', 0x01, 0x02]),
            Some(0x0102)
        );
        // Negative, sign-extended from 3 bytes.
        assert_eq!(record_last_integer(&[2, 3, 0xff, 0xff, 0xfe]), Some(-2));
        // 6 and 8 bytes.
        assert_eq!(
            record_last_integer(&[2, 5, 0, 0, 0, 0, 1, 0]),
            Some(256),
            "serial type 5 is 6 bytes"
        );
        assert_eq!(
            record_last_integer(&[2, 6, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]),
            Some(i64::MAX)
        );
        // The constants 0 and 1.
        assert_eq!(record_last_integer(&[2, 8]), Some(0));
        assert_eq!(record_last_integer(&[2, 9]), Some(1));
        // Not an integer: a float, text, NULL.
        assert_eq!(record_last_integer(&[2, 7, 0, 0, 0, 0, 0, 0, 0, 0]), None);
        assert_eq!(record_last_integer(&[2, 15, b'a']), None);
        assert_eq!(record_last_integer(&[2, 0]), None);
        // A header past the payload, a value past the payload, an empty header, nothing.
        assert_eq!(record_last_integer(&[9, 1, 1]), None);
        assert_eq!(record_last_integer(&[2, 4, 0, 0]), None);
        assert_eq!(record_last_integer(&[1]), None);
        assert_eq!(record_last_integer(&[]), None);
        // A serial-type varint that runs to the header's end.
        assert_eq!(record_last_integer(&[3, 0x81, 0x81, 0]), None);
    }

    #[test]
    fn varints_read_as_sqlite_writes_them() {
        assert_eq!(varint(&[0x7f]), Some((0x7f, 1)));
        assert_eq!(varint(&[0x81, 0x00]), Some((0x80, 2)));
        assert_eq!(varint(&[0xff; 9]), Some((u64::MAX, 9)));
        assert_eq!(varint(&[0x80, 0x80]), None);
    }

    /// The rowids of a table leaf page's cells (test-only: read-ahead never parses them).
    fn table_leaf_rowids(page: &[u8], page_number: u32, geometry: Geometry) -> Vec<i64> {
        let header = parse_header(page, page_number, geometry).unwrap();
        assert_eq!(header.kind, PageKind::TableLeaf);
        (0..header.cell_count)
            .map(|index| {
                let at = header.cell_array_start + CELL_POINTER_BYTES * index;
                let cell = usize::from(read_u16(page, at).unwrap());
                let (_, size_bytes) = varint(&page[cell..]).unwrap();
                varint(&page[cell + size_bytes..]).unwrap().0 as i64
            })
            .collect()
    }

    /// Row read-ahead's view of table `t` and its index `t_name`: every row of `t` is found
    /// in its leaf by descending with `table_child_for`, and the rowids `index_leaf_rowids`
    /// reads from `t_name`'s leaves, in the tree's order, are rows of `t` in the index's
    /// order. Returns the number of rowids read from index leaves.
    fn check_rows(connection: &rusqlite::Connection, path: &std::path::Path) -> usize {
        let bytes = std::fs::read(path).unwrap();
        let geometry = Geometry::from_header(&bytes).unwrap();
        let page_size = geometry.page_size_bytes as usize;
        let page_count = (bytes.len() / page_size) as u32;
        let page = |number: u32| {
            let start = (number as usize - 1) * page_size;
            &bytes[start..start + page_size]
        };
        let root = |name: &str| -> u32 {
            connection
                .query_row(
                    "SELECT rootpage FROM sqlite_schema WHERE name = ?1",
                    [name],
                    |row| row.get(0),
                )
                .unwrap()
        };
        // Leaves of a tree, left to right, with the interior pages above them.
        let leaves = |root: u32| -> Vec<u32> {
            let mut children = Vec::with_capacity(max_children(geometry));
            let mut leaves = Vec::new();
            let mut stack = vec![root];
            while let Some(number) = stack.pop() {
                interior_children(page(number), number, geometry, page_count, &mut children)
                    .unwrap();
                if children.is_empty() {
                    leaves.push(number);
                }
                stack.extend(children.iter().rev());
            }
            leaves
        };
        let table_root = root("t");
        let mut table_rows = 0;
        for leaf in leaves(table_root) {
            for rowid in table_leaf_rowids(page(leaf), leaf, geometry) {
                let mut at = table_root;
                while let Some(view) = interior_view(page(at), at, geometry) {
                    at = view.table_child_for(page(at), rowid).unwrap();
                }
                assert_eq!(at, leaf, "row {rowid} is found in its leaf");
                table_rows += 1;
            }
        }
        let count: i64 = connection
            .query_row("SELECT count(*) FROM t", [], |row| row.get(0))
            .unwrap();
        assert_eq!(table_rows, count as usize);
        // The index's order, every entry's rowid.
        let in_index_order: Vec<i64> = connection
            .prepare("SELECT rowid FROM t INDEXED BY t_name ORDER BY name, rowid")
            .unwrap()
            .query_map([], |row| row.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        let mut rowids = Vec::with_capacity(max_cells_per_page(geometry));
        let mut from_leaves = Vec::new();
        for leaf in leaves(root("t_name")) {
            index_leaf_rowids(page(leaf), leaf, geometry, page_count, &mut rowids).unwrap();
            from_leaves.extend_from_slice(&rowids);
        }
        let mut remaining = in_index_order.iter();
        for rowid in &from_leaves {
            assert!(
                remaining.any(|r| r == rowid),
                "rowid {rowid} out of the index's order"
            );
        }
        from_leaves.len()
    }

    #[test]
    fn real_database_with_512_byte_pages() {
        check_built_database(512, 3000, 2400);
    }

    #[test]
    fn real_database_with_4096_byte_pages() {
        check_built_database(4096, 3000, 12_000);
    }

    #[test]
    fn real_database_with_65536_byte_pages() {
        check_built_database(65536, 600, 100_000);
    }
}
