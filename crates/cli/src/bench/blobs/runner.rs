//! One benchmark case: write N files, read them back in write order and in random order,
//! each phase time-boxed, every read verified against the checksum of what was written.
//!
//! Only the storage work is timed (compression + upsert + commit; select + decompression).
//! Generating contents and verifying them happen outside the timer, so a slow generator
//! lowers the count of operations done, never the rates.

use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use serde::{Deserialize, Serialize};

use super::backend::BlobStore;
use super::codec::{Codec, Compression};
use super::workload::{checksum, read_order, ReadOrder, Workload};
use crate::bench::common::signals::check_interrupted;

/// Generated data held at once: bounds memory whatever the blob size and batch.
const CHUNK_BYTES: usize = 64 << 20;
/// Operations per timed chunk: bounds how late the deadline and SIGINT are noticed.
const CHUNK_OPS: u64 = 1024;

/// The limits of one phase: stop at `ops` operations or `max` measured time.
#[derive(Clone, Copy, Debug)]
pub struct Budget {
    pub ops: u64,
    pub max: Duration,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Phase {
    Write,
    ReadSeq,
    ReadRandom,
    Compress,
    Decompress,
}

impl Phase {
    pub fn name(self) -> &'static str {
        match self {
            Phase::Write => "write",
            Phase::ReadSeq => "read-seq",
            Phase::ReadRandom => "read-random",
            Phase::Compress => "compress",
            Phase::Decompress => "decompress",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StopReason {
    /// All planned operations were done.
    Ops,
    /// `--max-seconds` of measured time ran out first.
    Time,
}

impl StopReason {
    pub fn name(self) -> &'static str {
        match self {
            StopReason::Ops => "ops",
            StopReason::Time => "time",
        }
    }
}

/// What one phase did.
#[derive(Clone, Debug)]
pub struct PhaseResult {
    pub phase: Phase,
    pub ops_planned: u64,
    pub ops_done: u64,
    pub stopped_by: StopReason,
    /// Measured (timed) time only.
    pub elapsed: Duration,
    /// Uncompressed bytes written or read back.
    pub logical_bytes: u64,
    /// Bytes handed to / received from the store (compressed when compressing).
    pub stored_bytes: u64,
    /// Blobs whose checksum was checked and matched.
    pub verified: u64,
    /// Transactions committed (write phase).
    pub commits: Option<u64>,
}

/// Operations per second, `None` when nothing measurable was timed.
pub fn ops_per_second(ops: u64, elapsed: Duration) -> Option<f64> {
    let seconds = elapsed.as_secs_f64();
    (seconds > 0.0 && ops > 0).then(|| ops as f64 / seconds)
}

/// Decimal megabytes (10^6 B) per second, `None` when nothing measurable was timed.
pub fn megabytes_per_second(bytes: u64, elapsed: Duration) -> Option<f64> {
    let seconds = elapsed.as_secs_f64();
    (seconds > 0.0 && bytes > 0).then(|| bytes as f64 / 1e6 / seconds)
}

impl PhaseResult {
    pub fn ops_per_second(&self) -> Option<f64> {
        ops_per_second(self.ops_done, self.elapsed)
    }

    pub fn megabytes_per_second(&self) -> Option<f64> {
        megabytes_per_second(self.logical_bytes, self.elapsed)
    }

    /// Stored ÷ uncompressed size (below 1 when compression gains).
    pub fn stored_ratio(&self) -> Option<f64> {
        (self.logical_bytes > 0).then(|| self.stored_bytes as f64 / self.logical_bytes as f64)
    }
}

/// How many operations fit in one chunk of generated data.
fn chunk_ops(size_bytes: usize) -> u64 {
    ((CHUNK_BYTES / size_bytes.max(1)) as u64).clamp(1, CHUNK_OPS)
}

/// Writes files `0..` with a commit every `batch` writes; returns the phase result and
/// the checksum of every file written (index = file index).
///
/// When the time runs out inside a batch, the open transaction is committed (timed) so
/// what was counted is durable; `commits` shows the actual number of transactions.
pub fn write_phase(
    store: &mut dyn BlobStore,
    codec: &mut Codec,
    workload: &Workload,
    batch: u64,
    budget: Budget,
    progress: &mut dyn FnMut(u64),
) -> anyhow::Result<(PhaseResult, Vec<u64>)> {
    let mut checksums = Vec::new();
    let (mut done, mut pending, mut commits) = (0u64, 0u64, 0u64);
    let (mut logical, mut stored_total) = (0u64, 0u64);
    let mut elapsed = Duration::ZERO;
    let stopped_by = loop {
        check_interrupted()?;
        if done >= budget.ops {
            break StopReason::Ops;
        }
        if elapsed >= budget.max {
            break StopReason::Time;
        }
        let n = (budget.ops - done)
            .min(batch - pending)
            .min(chunk_ops(workload.size_bytes));
        let chunk: Vec<(String, Vec<u8>)> = (done..done + n)
            .map(|i| (workload.key(i), workload.content(i)))
            .collect();
        checksums.extend(chunk.iter().map(|(_, content)| checksum(content)));

        let start = Instant::now();
        if pending == 0 {
            store.begin()?;
        }
        for (key, content) in &chunk {
            let stored = codec.compress(content)?;
            stored_total += stored.len() as u64;
            logical += content.len() as u64;
            store
                .put(key, &stored)
                .with_context(|| format!("writing {key}"))?;
        }
        pending += n;
        done += n;
        let time_up = elapsed + start.elapsed() >= budget.max;
        if pending == batch || done == budget.ops || time_up {
            store.commit()?;
            commits += 1;
            pending = 0;
        }
        elapsed += start.elapsed();
        progress(done);
    };
    // Everything counted must be there: catches a backend that drops writes.
    let count = store.count()?;
    if count != done {
        bail!("wrote {done} files but the store holds {count}");
    }
    let result = PhaseResult {
        phase: Phase::Write,
        ops_planned: budget.ops,
        ops_done: done,
        stopped_by,
        elapsed,
        logical_bytes: logical,
        stored_bytes: stored_total,
        verified: 0,
        commits: Some(commits),
    };
    Ok((result, checksums))
}

/// Reads back written files in `order` (at most `budget.ops` of them, each once) and
/// verifies each against its checksum; a wrong, missing or corrupt blob is an error.
pub fn read_phase(
    store: &mut dyn BlobStore,
    codec: &mut Codec,
    workload: &Workload,
    checksums: &[u64],
    order: ReadOrder,
    budget: Budget,
    progress: &mut dyn FnMut(u64),
) -> anyhow::Result<PhaseResult> {
    let mut indices = read_order(order, checksums.len() as u64, workload.seed);
    indices.truncate(budget.ops.min(indices.len() as u64) as usize);
    let planned = indices.len() as u64;
    let (mut done, mut logical, mut stored_total) = (0u64, 0u64, 0u64);
    let mut elapsed = Duration::ZERO;
    let mut read = Vec::new();
    let stopped_by = loop {
        check_interrupted()?;
        if done >= planned {
            break StopReason::Ops;
        }
        if elapsed >= budget.max {
            break StopReason::Time;
        }
        let n = (planned - done).min(chunk_ops(workload.size_bytes));
        let chunk = &indices[done as usize..(done + n) as usize];
        let keys: Vec<String> = chunk.iter().map(|&i| workload.key(i)).collect();

        read.clear();
        let start = Instant::now();
        for key in &keys {
            let stored = store
                .get(key)
                .with_context(|| format!("reading {key}"))?
                .with_context(|| format!("verification failed: {key} is missing"))?;
            stored_total += stored.len() as u64;
            let data = codec
                .decompress(stored)
                .with_context(|| format!("verification failed: {key}"))?;
            read.push(data);
        }
        elapsed += start.elapsed();

        for ((&index, key), data) in chunk.iter().zip(&keys).zip(&read) {
            let expected = checksums[index as usize];
            let actual = checksum(data);
            if actual != expected || data.len() != workload.size_bytes {
                bail!(
                    "verification failed: {key} read back {} bytes with checksum {actual:016x}, \
                     wrote {} bytes with checksum {expected:016x}",
                    data.len(),
                    workload.size_bytes
                );
            }
            logical += data.len() as u64;
        }
        done += n;
        progress(done);
    };
    Ok(PhaseResult {
        phase: if order == ReadOrder::Sequential {
            Phase::ReadSeq
        } else {
            Phase::ReadRandom
        },
        ops_planned: planned,
        ops_done: done,
        stopped_by,
        elapsed,
        logical_bytes: logical,
        stored_bytes: stored_total,
        verified: done,
        commits: None,
    })
}

/// The compressor on its own (EZFS's micro-benchmark): compress, then decompress, a pool
/// of distinct blobs round-robin with `mode` (`Zstd` one-shot or `ZstdReuse`).
/// Every output is verified by a round trip outside the timer.
pub fn compressor_phases(
    mode: Compression,
    level: i32,
    workload: &Workload,
    budget: Budget,
    progress: &mut dyn FnMut(u64),
) -> anyhow::Result<Vec<PhaseResult>> {
    // Distinct inputs, so zstd cannot benefit from compressing the same bytes again;
    // at most 64 MB of them.
    let pool_len = ((CHUNK_BYTES / workload.size_bytes.max(1)) as u64).clamp(1, 256);
    let inputs: Vec<Vec<u8>> = (0..pool_len).map(|i| workload.content(i)).collect();
    let sums: Vec<u64> = inputs.iter().map(|c| checksum(c)).collect();
    let mut reference = Codec::new(Compression::ZstdReuse, level)?;
    let compressed: Vec<Vec<u8>> = inputs
        .iter()
        .map(|c| reference.compress(c))
        .collect::<anyhow::Result<_>>()?;

    let mut results = Vec::new();
    for phase in [Phase::Compress, Phase::Decompress] {
        let mut codec = Codec::new(mode, level)?;
        let (mut done, mut logical, mut stored_total) = (0u64, 0u64, 0u64);
        let mut elapsed = Duration::ZERO;
        let mut outputs = Vec::new();
        let stopped_by = loop {
            check_interrupted()?;
            if done >= budget.ops {
                break StopReason::Ops;
            }
            if elapsed >= budget.max {
                break StopReason::Time;
            }
            let n = (budget.ops - done).min(chunk_ops(workload.size_bytes));
            outputs.clear();
            let start = Instant::now();
            for i in done..done + n {
                let slot = (i % pool_len) as usize;
                outputs.push(match phase {
                    Phase::Compress => codec.compress(&inputs[slot])?,
                    _ => codec.decompress(compressed[slot].clone())?,
                });
            }
            elapsed += start.elapsed();
            for (i, output) in (done..done + n).zip(outputs.drain(..)) {
                let slot = (i % pool_len) as usize;
                let original = match phase {
                    Phase::Compress => {
                        stored_total += output.len() as u64;
                        reference.decompress(output)?
                    }
                    _ => {
                        stored_total += compressed[slot].len() as u64;
                        output
                    }
                };
                if checksum(&original) != sums[slot] {
                    bail!(
                        "verification failed: {} round trip of blob {slot} changed it",
                        mode.name()
                    );
                }
                logical += original.len() as u64;
            }
            done += n;
            progress(done);
        };
        results.push(PhaseResult {
            phase,
            ops_planned: budget.ops,
            ops_done: done,
            stopped_by,
            elapsed,
            logical_bytes: logical,
            stored_bytes: stored_total,
            verified: done,
            commits: None,
        });
    }
    Ok(results)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::blobs::workload::ContentKind;
    use std::collections::HashMap;

    /// A store in a HashMap, so tests can corrupt what was written.
    #[derive(Default)]
    struct MapStore {
        files: HashMap<String, Vec<u8>>,
        commits: u64,
    }

    impl BlobStore for MapStore {
        fn begin(&mut self) -> anyhow::Result<()> {
            Ok(())
        }
        fn put(&mut self, key: &str, stored: &[u8]) -> anyhow::Result<()> {
            self.files.insert(key.to_string(), stored.to_vec());
            Ok(())
        }
        fn commit(&mut self) -> anyhow::Result<()> {
            self.commits += 1;
            Ok(())
        }
        fn get(&mut self, key: &str) -> anyhow::Result<Option<Vec<u8>>> {
            Ok(self.files.get(key).cloned())
        }
        fn count(&mut self) -> anyhow::Result<u64> {
            Ok(self.files.len() as u64)
        }
    }

    fn budget(ops: u64) -> Budget {
        // No timing assertions: an hour is never reached by these tiny phases.
        Budget {
            ops,
            max: Duration::from_secs(3600),
        }
    }

    fn workload() -> Workload {
        Workload {
            seed: 7,
            size_bytes: 500,
            content: ContentKind::Text,
        }
    }

    #[test]
    fn writes_commit_every_batch_and_reads_verify() {
        for mode in [Compression::None, Compression::Zstd, Compression::ZstdReuse] {
            let mut store = MapStore::default();
            let mut codec = Codec::new(mode, 3).unwrap();
            let (write, sums) = write_phase(
                &mut store,
                &mut codec,
                &workload(),
                100,
                budget(250),
                &mut |_| {},
            )
            .unwrap();
            assert_eq!((write.ops_done, write.stopped_by), (250, StopReason::Ops));
            assert_eq!(write.commits, Some(3)); // 100 + 100 + 50
            assert_eq!(store.commits, 3);
            assert_eq!(write.logical_bytes, 250 * 500);
            assert_eq!(sums.len(), 250);
            if mode != Compression::None {
                assert!(write.stored_bytes < write.logical_bytes);
            }
            for order in [ReadOrder::Sequential, ReadOrder::Random] {
                let read = read_phase(
                    &mut store,
                    &mut codec,
                    &workload(),
                    &sums,
                    order,
                    budget(1000),
                    &mut |_| {},
                )
                .unwrap();
                assert_eq!((read.ops_done, read.verified), (250, 250));
                assert_eq!(read.logical_bytes, write.logical_bytes);
                assert_eq!(read.stored_bytes, write.stored_bytes);
            }
        }
    }

    #[test]
    fn verification_catches_a_wrong_blob() {
        let mut store = MapStore::default();
        let mut codec = Codec::new(Compression::None, 3).unwrap();
        let w = workload();
        let (_, sums) =
            write_phase(&mut store, &mut codec, &w, 10, budget(20), &mut |_| {}).unwrap();
        // Another file's content under this name: right size, wrong bytes.
        let other = store.files[&w.key(4)].clone();
        store.files.insert(w.key(3), other);
        let error = read_phase(
            &mut store,
            &mut codec,
            &w,
            &sums,
            ReadOrder::Sequential,
            budget(20),
            &mut |_| {},
        )
        .unwrap_err();
        assert!(format!("{error:#}").contains(&w.key(3)), "{error:#}");

        // A missing file and a corrupt compressed frame are caught too.
        store.files.remove(&w.key(3));
        assert!(read_phase(
            &mut store,
            &mut codec,
            &w,
            &sums,
            ReadOrder::Random,
            budget(20),
            &mut |_| {}
        )
        .is_err());
        let mut zcodec = Codec::new(Compression::Zstd, 3).unwrap();
        let mut zstore = MapStore::default();
        let (_, sums) =
            write_phase(&mut zstore, &mut zcodec, &w, 10, budget(5), &mut |_| {}).unwrap();
        zstore.files.get_mut(&w.key(2)).unwrap()[20] ^= 0x55;
        assert!(read_phase(
            &mut zstore,
            &mut zcodec,
            &w,
            &sums,
            ReadOrder::Sequential,
            budget(5),
            &mut |_| {}
        )
        .is_err());
    }

    #[test]
    fn ops_budget_limits_reads() {
        let mut store = MapStore::default();
        let mut codec = Codec::new(Compression::None, 3).unwrap();
        let (_, sums) = write_phase(
            &mut store,
            &mut codec,
            &workload(),
            1,
            budget(30),
            &mut |_| {},
        )
        .unwrap();
        assert_eq!(store.commits, 30);
        let read = read_phase(
            &mut store,
            &mut codec,
            &workload(),
            &sums,
            ReadOrder::Random,
            budget(7),
            &mut |_| {},
        )
        .unwrap();
        assert_eq!((read.ops_planned, read.ops_done), (7, 7));
    }

    #[test]
    fn zero_time_budget_does_nothing_and_says_why() {
        let mut store = MapStore::default();
        let mut codec = Codec::new(Compression::None, 3).unwrap();
        let b = Budget {
            ops: 10,
            max: Duration::ZERO,
        };
        let (write, _) =
            write_phase(&mut store, &mut codec, &workload(), 1, b, &mut |_| {}).unwrap();
        assert_eq!((write.ops_done, write.stopped_by), (0, StopReason::Time));
        assert_eq!(write.ops_per_second(), None);
    }

    #[test]
    fn compressor_phases_verify_and_count() {
        for mode in [Compression::Zstd, Compression::ZstdReuse] {
            let results =
                compressor_phases(mode, 3, &workload(), budget(300), &mut |_| {}).unwrap();
            assert_eq!(results.len(), 2);
            for r in &results {
                assert_eq!((r.ops_done, r.verified), (300, 300));
                assert_eq!(r.logical_bytes, 300 * 500);
                assert!(r.stored_ratio().unwrap() < 1.0);
            }
        }
    }

    #[test]
    fn rates_are_ops_and_decimal_megabytes_per_second() {
        let half = Duration::from_millis(500);
        assert_eq!(ops_per_second(100, half), Some(200.0));
        assert_eq!(megabytes_per_second(3_000_000, half), Some(6.0));
        assert_eq!(ops_per_second(100, Duration::ZERO), None);
        assert_eq!(ops_per_second(0, half), None);
        assert_eq!(megabytes_per_second(0, half), None);
    }
}
