//! What a storage case needs from a backend (SQLite through a VFS in store.rs, DuckDB in
//! duck.rs): the same operations on the same `files` table.

/// The operations a benchmark case needs from a storage backend.
pub trait BlobStore {
    fn begin(&mut self) -> anyhow::Result<()>;
    /// Write (insert or replace) one file; part of the open transaction.
    fn put(&mut self, key: &str, stored: &[u8]) -> anyhow::Result<()>;
    fn commit(&mut self) -> anyhow::Result<()>;
    /// The stored bytes of one file, `None` if it does not exist.
    fn get(&mut self, key: &str) -> anyhow::Result<Option<Vec<u8>>>;
    /// Number of files stored.
    fn count(&mut self) -> anyhow::Result<u64>;
    /// Between the write and the read phases (not timed): brings the store to one layout
    /// whatever the write phase's time box left behind. Default: nothing to do.
    fn settle(&mut self) -> anyhow::Result<()> {
        Ok(())
    }
}
