//! DuckDB as a `bench blobs` backend (EZFS compared it with SQLite): the same table and
//! statements through the `duckdb` crate. Compiled only with the `duckdb` feature
//! (bundled DuckDB) or `duckdb-system` (an installed libduckdb).

use std::path::Path;

use anyhow::Context;
use duckdb::{Connection, OptionalExt};

use super::backend::BlobStore;

pub struct DuckStore {
    conn: Connection,
}

impl DuckStore {
    /// Opens a database file, or an in-memory database for `None`.
    pub fn open(path: Option<&Path>) -> anyhow::Result<DuckStore> {
        let conn = match path {
            Some(path) => Connection::open(path)
                .with_context(|| format!("opening DuckDB database {}", path.display()))?,
            None => Connection::open_in_memory().context("opening a DuckDB in-memory database")?,
        };
        conn.execute_batch("CREATE TABLE IF NOT EXISTS files(file TEXT PRIMARY KEY, content BLOB)")
            .context("creating table files in DuckDB")?;
        Ok(DuckStore { conn })
    }
}

impl BlobStore for DuckStore {
    fn begin(&mut self) -> anyhow::Result<()> {
        self.conn.execute_batch("BEGIN TRANSACTION")?;
        Ok(())
    }

    fn put(&mut self, key: &str, stored: &[u8]) -> anyhow::Result<()> {
        self.conn
            .prepare_cached(
                "INSERT INTO files(file, content) VALUES (?, ?) \
                 ON CONFLICT(file) DO UPDATE SET content = excluded.content",
            )?
            .execute(duckdb::params![key, stored])?;
        Ok(())
    }

    fn commit(&mut self) -> anyhow::Result<()> {
        self.conn.execute_batch("COMMIT")?;
        Ok(())
    }

    fn get(&mut self, key: &str) -> anyhow::Result<Option<Vec<u8>>> {
        Ok(self
            .conn
            .prepare_cached("SELECT content FROM files WHERE file = ?")?
            .query_row([key], |row| row.get::<_, Vec<u8>>(0))
            .optional()?)
    }

    fn count(&mut self) -> anyhow::Result<u64> {
        let count: i64 = self
            .conn
            .query_row("SELECT count(*) FROM files", [], |r| r.get(0))?;
        Ok(count as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs only in builds with DuckDB (`--features duckdb` or `duckdb-system`).
    #[test]
    fn duckdb_store_round_trips_in_memory_and_on_disk() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("blobs.duckdb");
        for target in [None, Some(path.as_path())] {
            let mut store = DuckStore::open(target).unwrap();
            store.begin().unwrap();
            store.put("a", b"one").unwrap();
            store.put("b", &[0u8, 255, 7]).unwrap();
            store.put("a", b"uno").unwrap();
            store.commit().unwrap();
            assert_eq!(store.get("a").unwrap().as_deref(), Some(&b"uno"[..]));
            assert_eq!(store.get("b").unwrap().as_deref(), Some(&[0u8, 255, 7][..]));
            assert_eq!(store.get("zzz").unwrap(), None);
            assert_eq!(store.count().unwrap(), 2);
        }
    }
}
