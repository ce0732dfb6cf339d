//! Compression of blobs before they are stored: none, zstd one-shot, zstd with reused
//! contexts.
//!
//! EZFS compared `zstd.compress()` (a new context per call) with cached compressor
//! objects; here "zstd" allocates a context per blob and "zstd-reuse" keeps one
//! compressor and one decompressor for the whole case.

use anyhow::{anyhow, Context};
use clap::ValueEnum;
use serde::{Deserialize, Serialize};

#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, ValueEnum, Serialize, Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum Compression {
    /// Store the bytes as they are.
    None,
    /// zstd one-shot: a fresh context for every blob (`zstd::bulk::compress`).
    Zstd,
    /// zstd with one compression and one decompression context reused for every blob.
    ZstdReuse,
}

impl Compression {
    pub fn name(self) -> &'static str {
        match self {
            Compression::None => "none",
            Compression::Zstd => "zstd",
            Compression::ZstdReuse => "zstd-reuse",
        }
    }
}

/// One case's compressor state.
pub struct Codec {
    mode: Compression,
    level: i32,
    compressor: Option<zstd::bulk::Compressor<'static>>,
    decompressor: Option<zstd::bulk::Decompressor<'static>>,
}

impl Codec {
    pub fn new(mode: Compression, level: i32) -> anyhow::Result<Codec> {
        let (compressor, decompressor) = if mode == Compression::ZstdReuse {
            (
                Some(zstd::bulk::Compressor::new(level).with_context(|| {
                    format!("creating a zstd compressor at --zstd-level {level}")
                })?),
                Some(zstd::bulk::Decompressor::new().context("creating a zstd decompressor")?),
            )
        } else {
            (None, None)
        };
        Ok(Codec {
            mode,
            level,
            compressor,
            decompressor,
        })
    }

    /// The bytes to store for `data`. `None` copies so every mode pays for one output
    /// buffer, as the zstd modes do.
    pub fn compress(&mut self, data: &[u8]) -> anyhow::Result<Vec<u8>> {
        match self.mode {
            Compression::None => Ok(data.to_vec()),
            Compression::Zstd => {
                zstd::bulk::compress(data, self.level).context("zstd one-shot compression failed")
            }
            Compression::ZstdReuse => self
                .compressor
                .as_mut()
                .expect("ZstdReuse codecs are built with a compressor")
                .compress(data)
                .context("zstd compression failed"),
        }
    }

    /// The original bytes of a stored blob.
    pub fn decompress(&mut self, stored: Vec<u8>) -> anyhow::Result<Vec<u8>> {
        match self.mode {
            Compression::None => Ok(stored),
            Compression::Zstd | Compression::ZstdReuse => {
                // bulk::compress records the content size in the frame header; a blob
                // without it was not written by this benchmark.
                let capacity = zstd::bulk::Decompressor::upper_bound(&stored).ok_or_else(|| {
                    anyhow!("stored blob is not a zstd frame with a recorded content size")
                })?;
                match self.decompressor.as_mut() {
                    Some(decompressor) => decompressor.decompress(&stored, capacity),
                    None => zstd::bulk::decompress(&stored, capacity),
                }
                .context("zstd decompression failed (corrupt blob?)")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::blobs::workload::{ContentKind, Workload};

    #[test]
    fn every_mode_round_trips() {
        for content in [ContentKind::Text, ContentKind::Random] {
            for size in [16usize, 64, 300_000] {
                let blob = Workload {
                    seed: 1,
                    size_bytes: size,
                    content,
                }
                .content(5);
                for mode in [Compression::None, Compression::Zstd, Compression::ZstdReuse] {
                    let mut codec = Codec::new(mode, 3).unwrap();
                    // Twice, so the reused contexts are exercised after their first use.
                    for _ in 0..2 {
                        let stored = codec.compress(&blob).unwrap();
                        assert_eq!(codec.decompress(stored).unwrap(), blob, "{mode:?} {size}");
                    }
                }
            }
        }
    }

    #[test]
    fn text_compresses_and_random_does_not() {
        let mut codec = Codec::new(Compression::Zstd, 3).unwrap();
        let text = Workload {
            seed: 1,
            size_bytes: 300_000,
            content: ContentKind::Text,
        }
        .content(0);
        let random = Workload {
            seed: 1,
            size_bytes: 300_000,
            content: ContentKind::Random,
        }
        .content(0);
        assert!(codec.compress(&text).unwrap().len() < text.len() / 2);
        assert!(codec.compress(&random).unwrap().len() >= random.len());
    }

    #[test]
    fn corrupt_frames_are_errors_not_panics() {
        let mut codec = Codec::new(Compression::ZstdReuse, 3).unwrap();
        assert!(codec.decompress(b"not zstd".to_vec()).is_err());
        let mut stored = codec.compress(&[7u8; 1000]).unwrap();
        let last = stored.len() - 3;
        stored[last] ^= 0xFF;
        stored.truncate(stored.len() - 1);
        assert!(codec.decompress(stored).is_err());
    }
}
