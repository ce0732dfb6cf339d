//! `bench cold --database FILE`: a database the user gives instead of the built one. It is
//! described from its header alone (no connection, so nothing can write to it before a
//! target opens it read-only): its journal mode, page size, pages and free pages.

use std::io::Read;
use std::path::Path;

use anyhow::{bail, Context, Result};

use super::database::Database;
use crate::bench::common::database::companion;
use crate::bench::common::settings::JournalMode;

/// The database header's first 16 bytes (fileformat2.html, "The Database Header").
const MAGIC: &[u8; 16] = b"SQLite format 3\0";
/// Bytes of the header this module reads.
const HEADER_BYTES: usize = 100;

/// The first 100 bytes of `path`, checked to be a SQLite database's header.
fn header(path: &Path) -> Result<[u8; HEADER_BYTES]> {
    let mut file = std::fs::File::open(path).with_context(|| {
        format!(
            "--database {}: cannot open it; give an existing SQLite database file",
            path.display()
        )
    })?;
    let mut header = [0u8; HEADER_BYTES];
    let read = file
        .read(&mut header)
        .with_context(|| format!("--database {}: cannot read it", path.display()))?;
    if read < HEADER_BYTES || &header[..16] != MAGIC {
        bail!(
            "--database {}: not a SQLite database (no SQLite header in its first 100 bytes)",
            path.display()
        );
    }
    Ok(header)
}

/// The journal mode `path` is in: WAL when its header's read and write versions are 2
/// (fileformat2.html), a rollback journal (`delete`) otherwise.
pub fn journal_mode(path: &Path) -> Result<JournalMode> {
    Ok(journal_of(&header(path)?))
}

fn journal_of(header: &[u8; HEADER_BYTES]) -> JournalMode {
    if header[18] == 2 && header[19] == 2 {
        JournalMode::Wal
    } else {
        JournalMode::Delete
    }
}

/// `path` as a [`Database`] of bench cold: its pages, free pages and page size, from its
/// header and size.
pub fn describe(path: &Path) -> Result<Database> {
    let header = header(path)?;
    let page_size = match u16::from_be_bytes([header[16], header[17]]) {
        1 => 65536,
        size => u32::from(size),
    };
    if !(512..=65536).contains(&page_size) || !page_size.is_power_of_two() {
        bail!(
            "--database {}: its header gives page size {page_size}, which SQLite never writes",
            path.display()
        );
    }
    let bytes = std::fs::metadata(path)
        .with_context(|| format!("--database {}: cannot read its size", path.display()))?
        .len();
    let free_pages = u32::from_be_bytes([header[36], header[37], header[38], header[39]]);
    Ok(Database {
        path: path.to_path_buf(),
        journal: journal_of(&header),
        rows: 0,
        pages: bytes / u64::from(page_size),
        free_pages: u64::from(free_pages),
        page_size,
        origin: "given".to_string(),
    })
}

/// Bytes in `path`'s WAL file (0 when it has none).
pub fn wal_bytes(path: &Path) -> u64 {
    std::fs::metadata(companion(path, "-wal")).map_or(0, |m| m.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn database(dir: &Path, journal: &str) -> std::path::PathBuf {
        let path = dir.join(format!("{journal}.db"));
        let connection = rusqlite::Connection::open(&path).unwrap();
        connection
            .execute_batch(&format!(
                "PRAGMA page_size=8192; PRAGMA journal_mode={journal};
                 CREATE TABLE t(x); INSERT INTO t VALUES (randomblob(20000)); DELETE FROM t;"
            ))
            .unwrap();
        drop(connection);
        path
    }

    #[test]
    fn the_header_gives_journal_mode_and_geometry() {
        let dir = tempfile::tempdir().unwrap();
        for (journal, expected) in [("delete", JournalMode::Delete), ("wal", JournalMode::Wal)] {
            let path = database(dir.path(), journal);
            assert_eq!(journal_mode(&path).unwrap(), expected);
            let described = describe(&path).unwrap();
            assert_eq!(described.journal, expected);
            assert_eq!(described.page_size, 8192);
            if expected == JournalMode::Delete {
                // The deleted row's overflow pages went to the free list.
                assert!(described.free_pages > 0, "{journal}");
                assert_eq!(
                    described.pages,
                    std::fs::metadata(&path).unwrap().len() / 8192
                );
            }
        }
    }

    #[test]
    fn what_is_no_database_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing.db");
        let message = format!("{:#}", journal_mode(&missing).unwrap_err());
        assert!(
            message.contains("--database") && message.contains("missing.db"),
            "{message}"
        );
        let text = dir.path().join("notes.txt");
        std::fs::write(
            &text,
            "not a database, but long enough to have a hundred bytes: ".repeat(3),
        )
        .unwrap();
        let message = format!("{:#}", describe(&text).unwrap_err());
        assert!(message.contains("not a SQLite database"), "{message}");
    }
}
