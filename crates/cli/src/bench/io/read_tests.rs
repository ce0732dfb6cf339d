//! Tests of `bench io --reads`: option parsing and validation, the random offsets, the
//! page-cache eviction, exact accounting and correct data for every method and cache on
//! a small file, the summaries and exports, and cleanup on failure. No timing asserts.

use std::collections::HashSet;
use std::fs::File;
use std::io::Write;
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use clap::Parser;
use proptest::prelude::*;

use super::options::{IoArgs, ReadCache, ReadMethod, RingFlags, Strategy};
use super::read::{self, random_offsets, share, ReadCase, ReadOutcome, ReadPlan};
use super::read_output::{self, ReadRunRecord};
use super::ring::{RingFile, RingJob};
use crate::bench::common::pagecache::{drop_clean_pages, resident_pages};

#[derive(Parser)]
struct Wrapper {
    #[command(flatten)]
    args: IoArgs,
}

fn parse(extra: &[&str]) -> Result<IoArgs, clap::Error> {
    let mut argv = vec!["bench-io"];
    argv.extend_from_slice(extra);
    Wrapper::try_parse_from(argv).map(|w| w.args)
}

fn read_plan(extra: &[&str]) -> anyhow::Result<ReadPlan> {
    let args = parse(extra).map_err(|e| anyhow::anyhow!("{e}"))?;
    ReadPlan::from_args(&args)
}

fn files_in(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect()
}

fn ring_works() -> bool {
    match io_uring::IoUring::new(8) {
        Ok(_) => true,
        Err(error) => {
            eprintln!("io_uring unavailable here ({error}): io_uring cases skipped");
            false
        }
    }
}

fn direct_works(dir: &Path) -> bool {
    let probe = dir.join("odirect-probe");
    let works = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .custom_flags(libc::O_DIRECT)
        .open(&probe)
        .is_ok();
    let _ = std::fs::remove_file(&probe);
    if !works {
        eprintln!("no O_DIRECT in {}: direct cases skipped", dir.display());
    }
    works
}

/// The methods and caches this machine can run in `dir`, as flag values.
fn available(dir: &Path) -> (&'static str, &'static str) {
    let methods = if ring_works() {
        "io_uring,pread"
    } else {
        "pread"
    };
    let caches = if direct_works(dir) {
        "buffered,direct"
    } else {
        "buffered"
    };
    (methods, caches)
}

fn is_tmpfs(dir: &Path) -> bool {
    let c_dir = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: statfs is plain old data; zeroed is valid and the call fills it.
    let mut stat: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: c_dir is NUL-terminated, stat is a valid out pointer.
    let rc = unsafe { libc::statfs(c_dir.as_ptr(), &mut stat) };
    rc == 0 && stat.f_type == libc::TMPFS_MAGIC
}

#[test]
fn defaults_and_case_names() {
    let dir = tempfile::tempdir().unwrap();
    let plan = read_plan(&["--reads", "--dir", dir.path().to_str().unwrap()]).unwrap();
    assert_eq!(plan.size_bytes, 1 << 30);
    assert_eq!(plan.block_size_bytes, 4096);
    assert_eq!(plan.depths, vec![1, 4, 32, 128]);
    assert_eq!(plan.methods, vec![ReadMethod::IoUring, ReadMethod::Pread]);
    assert_eq!(plan.caches, vec![ReadCache::Buffered, ReadCache::Direct]);
    assert_eq!(plan.reads_per_run, 16384);
    assert_eq!(plan.base_depth(), 1);
    assert_eq!(plan.cases.len(), 4 * 2 * 2);
    assert_eq!(plan.cases[0].name(), "randread_io_uring_qd1_buffered");
    assert_eq!(plan.cases[7].name(), "randread_pread_qd128_buffered");
    assert_eq!(plan.cases[15].name(), "randread_pread_qd128_direct");
    assert_eq!(plan.cases[7].threads(), 128);
    let flagged = read_plan(&[
        "--reads",
        "--dir",
        dir.path().to_str().unwrap(),
        "--register-buffers",
        "--register-files",
        "--sqpoll",
    ])
    .unwrap();
    assert_eq!(
        flagged.cases[0].name(),
        "randread_io_uring_qd1_buffered_regbuf_regfile_sqpoll"
    );
    assert_eq!(flagged.cases[4].name(), "randread_pread_qd1_buffered");
    assert_eq!(plan.cases[3].threads(), 1);
    let mut backwards = plan.round_order(2);
    backwards.reverse();
    assert_eq!(plan.round_order(1), backwards);
}

#[test]
fn read_flags_are_validated_with_the_flag_and_remedy() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let err = |extra: &[&str]| {
        let mut argv = vec!["--reads", "--dir", d];
        argv.extend_from_slice(extra);
        read_plan(&argv)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default()
    };
    let e = err(&["--queue-depths", "0"]);
    assert!(e.contains("--queue-depths"), "{e}");
    let e = err(&["--queue-depths", "4,2000"]);
    assert!(e.contains("--queue-depths"), "{e}");
    let e = err(&["--read-methods", "mmap"]);
    assert!(e.contains("--read-methods"), "{e}");
    let e = err(&["--read-cache", "warm"]);
    assert!(e.contains("--read-cache"), "{e}");
    // Write-model options mean nothing here.
    for flag in [
        &["--threads", "4"][..],
        &["--direct"],
        &["--durability", "none"],
        &["--wal"],
    ] {
        let e = err(flag);
        assert!(e.contains(flag[0]) && e.contains("--reads"), "{e}");
    }
    // Read options need --reads.
    let e = read_plan(&["--dir", d, "--queue-depths", "4"])
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("--reads"), "{e}");
    let e = err(&["--size", "64KiB", "--reads-per-run", "17"]);
    assert!(
        e.contains("--reads-per-run") && e.contains("--size") && e.contains("16 blocks"),
        "{e}"
    );
    let e = err(&[
        "--size",
        "1MiB",
        "--reads-per-run",
        "8",
        "--queue-depths",
        "1,32",
    ]);
    assert!(e.contains("--reads-per-run") && e.contains("32"), "{e}");
    let e = err(&["--block-size", "1000"]);
    assert!(
        e.contains("--block-size") && e.contains("--read-cache direct"),
        "{e}"
    );
    assert!(read_plan(&[
        "--reads",
        "--dir",
        d,
        "--block-size",
        "1000",
        "--read-cache",
        "buffered"
    ])
    .is_ok());
    let e = err(&["--read-methods", "pread", "--register-buffers"]);
    assert!(
        e.contains("--read-methods") && e.contains("io_uring"),
        "{e}"
    );
    let e = err(&["--read-file", "/nonexistent/file"]);
    assert!(e.contains("--read-file"), "{e}");
    let e = err(&["--read-file", d]);
    assert!(
        e.contains("--read-file") && e.contains("regular file"),
        "{e}"
    );
    let e = err(&["--read-file", "/etc/hostname", "--size", "1MiB"]);
    assert!(e.contains("--read-file") && e.contains("--size"), "{e}");
    let e = err(&[
        "--queue-depths",
        "1024",
        "--block-size",
        "4MiB",
        "--size",
        "64GiB",
    ]);
    assert!(
        e.contains("--queue-depths") && e.contains("--block-size"),
        "{e}"
    );
}

#[test]
fn offsets_are_distinct_aligned_and_inside_the_file() {
    for (blocks, count, block) in [
        (16u64, 16usize, 4096u64),
        (1, 1, 4096),
        (262_144, 16_384, 4096),
        (1000, 999, 8192),
        (5, 0, 4096),
        (3, 2, 1000),
    ] {
        let offsets = random_offsets(42, blocks, count, block);
        assert_eq!(offsets.len(), count);
        let unique: HashSet<u64> = offsets.iter().copied().collect();
        assert_eq!(unique.len(), count, "repeated offset");
        for &offset in &offsets {
            assert_eq!(offset % block, 0, "unaligned {offset}");
            assert!(offset + block <= blocks * block, "{offset} past the file");
        }
    }
    // Seeded: the same seed gives the same reads, another seed others.
    assert_eq!(
        random_offsets(7, 10_000, 100, 4096),
        random_offsets(7, 10_000, 100, 4096)
    );
    assert_ne!(
        random_offsets(7, 10_000, 100, 4096),
        random_offsets(8, 10_000, 100, 4096)
    );
    // A full permutation is not the identity (the order is random too).
    let all = random_offsets(1, 64, 64, 1);
    assert_ne!(all, (0..64).collect::<Vec<u64>>());
}

proptest! {
    #[test]
    fn offsets_are_a_sample_without_repetition(
        seed in any::<u64>(),
        blocks in 1u64..5000,
        fraction in 0.0f64..=1.0,
        block_pages in 1u64..4,
    ) {
        let count = ((blocks as f64) * fraction) as usize;
        let block = block_pages * 4096;
        let offsets = random_offsets(seed, blocks, count, block);
        prop_assert_eq!(offsets.len(), count);
        let unique: HashSet<u64> = offsets.iter().copied().collect();
        prop_assert_eq!(unique.len(), count);
        prop_assert!(offsets.iter().all(|o| o % block == 0 && o / block < blocks));
    }
}

#[test]
fn every_round_reads_other_blocks_and_every_case_of_a_round_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let plan = read_plan(&[
        "--reads",
        "--dir",
        dir.path().to_str().unwrap(),
        "--size",
        "64MiB",
        "--reads-per-run",
        "1000",
    ])
    .unwrap();
    assert_eq!(plan.round_offsets(1), plan.round_offsets(1));
    assert_ne!(plan.round_offsets(1), plan.round_offsets(2));
    assert!(plan
        .round_offsets(3)
        .iter()
        .all(|o| o % 4096 == 0 && *o < 64 << 20));
}

#[test]
fn shares_cover_every_offset_once() {
    let offsets: Vec<u64> = (0..1000).collect();
    for threads in [1usize, 3, 4, 7, 128, 1000] {
        let mut seen = Vec::new();
        for index in 0..threads {
            let part = share(&offsets, index, threads);
            assert!(part.len() >= 1000 / threads && part.len() <= 1000 / threads + 1);
            seen.extend_from_slice(part);
        }
        assert_eq!(seen, offsets, "{threads} threads");
    }
}

/// Written, fsynced, read back: the pages are cached; evicted: none is.
#[test]
fn eviction_empties_the_page_cache() {
    let dir = tempfile::tempdir().unwrap();
    if is_tmpfs(dir.path()) {
        eprintln!("tmpfs keeps its pages: eviction not testable here");
        return;
    }
    let path = dir.path().join("cached");
    let mut file = File::create(&path).unwrap();
    file.write_all(&vec![7u8; 1 << 20]).unwrap();
    file.sync_all().unwrap();
    let reader = File::open(&path).unwrap();
    let mut sink = Vec::new();
    std::io::Read::read_to_end(&mut &reader, &mut sink).unwrap();
    assert!(resident_pages(&reader, 1 << 20).unwrap() > 0);
    drop_clean_pages(&reader).unwrap();
    assert_eq!(resident_pages(&reader, 1 << 20).unwrap(), 0);
    assert_eq!(resident_pages(&reader, 0).unwrap(), 0);
}

/// Every run is preceded by exactly one eviction of the test file, and every run reads
/// exactly its blocks: reads, bytes and the data itself (--verify), for every method
/// and cache this machine has; the test file is gone afterwards.
#[test]
fn evicts_before_every_run_and_accounts_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let (methods, caches) = available(dir.path());
    let plan = read_plan(&[
        "--reads",
        "--dir",
        d,
        "--size",
        "1MiB",
        "--reads-per-run",
        "200",
        "--queue-depths",
        "1,4,32",
        "--read-methods",
        methods,
        "--read-cache",
        caches,
        "--rounds",
        "2",
        "--verify",
    ])
    .unwrap();
    read::preflight(&plan).unwrap();
    let mut events: Vec<String> = Vec::new();
    let events_cell = std::cell::RefCell::new(&mut events);
    let mut evict = |file: &File| {
        events_cell.borrow_mut().push("evict".into());
        drop_clean_pages(file)
    };
    let mut records = Vec::new();
    read::execute(&plan, &mut evict, &mut |round, case, outcome| {
        events_cell.borrow_mut().push(case.name());
        assert_eq!(outcome.reads, 200, "{}", case.name());
        assert_eq!(outcome.bytes, 200 * 4096, "{}", case.name());
        assert_eq!(outcome.file_pages, 256);
        assert_eq!(outcome.verified, Some(true));
        records.push(ReadRunRecord::new(&plan, round, case, outcome));
    })
    .unwrap();
    let runs = plan.cases.len() * 2;
    assert_eq!(events.len(), 2 * runs);
    for pair in events.chunks(2) {
        assert_eq!(pair[0], "evict", "{events:?}");
        assert!(pair[1].starts_with("randread_"), "{events:?}");
    }
    assert_eq!(records.len(), runs);
    for record in &records {
        assert_eq!(record.reads, 200);
        assert_eq!(record.bytes, 200 * 4096);
        assert!((record.iops * record.seconds - 200.0).abs() < 1e-6);
        assert!((record.bytes_per_sec * record.seconds - 819_200.0).abs() < 1e-3);
    }
    assert!(
        files_in(dir.path()).is_empty(),
        "{:?}",
        files_in(dir.path())
    );
}

/// `--read-file` reads the file as it is, empties its cache, and leaves it in place.
#[test]
fn an_existing_file_is_read_and_kept() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fio-file");
    std::fs::write(&path, vec![1u8; (256 << 10) + 100]).unwrap();
    let plan = read_plan(&[
        "--reads",
        "--dir",
        dir.path().to_str().unwrap(),
        "--read-file",
        path.to_str().unwrap(),
        "--read-methods",
        available(dir.path()).0,
        "--read-cache",
        "buffered",
        "--queue-depths",
        "1,8",
        "--reads-per-run",
        "64",
        "--rounds",
        "1",
    ])
    .unwrap();
    assert_eq!(plan.size_bytes, (256 << 10) + 100);
    assert_eq!(plan.blocks(), 64);
    let mut evictions = 0;
    let mut runs = 0;
    read::execute(
        &plan,
        &mut |file| {
            evictions += 1;
            drop_clean_pages(file)
        },
        &mut |_, _, outcome| {
            runs += 1;
            assert_eq!((outcome.reads, outcome.bytes), (64, 64 * 4096));
        },
    )
    .unwrap();
    assert_eq!((evictions, runs), (plan.cases.len(), plan.cases.len()));
    assert_eq!(files_in(dir.path()), vec!["fio-file".to_string()]);
}

/// A read that fails mid-run (an injected EIO) stops the run with the method and the
/// offset, and removes the test file, for both methods.
#[test]
fn failing_read_removes_the_test_file() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let mut methods = vec!["pread"];
    if ring_works() {
        methods.push("io_uring");
    }
    for method in methods {
        let mut plan = read_plan(&[
            "--reads",
            "--dir",
            d,
            "--size",
            "1MiB",
            "--reads-per-run",
            "256",
            "--queue-depths",
            "4",
            "--read-methods",
            method,
            "--read-cache",
            "buffered",
        ])
        .unwrap();
        let victim = plan.round_offsets(1)[100];
        plan.inject_failure_at = Some(victim);
        let error = read::execute(&plan, &mut drop_clean_pages, &mut |_, _, _| {})
            .unwrap_err()
            .to_string();
        assert!(
            error.contains(&format!("offset {victim}")) && error.contains("EIO"),
            "{error}"
        );
        assert!(error.contains(&plan.cases[0].name()), "{error}");
        assert!(
            files_in(dir.path()).is_empty(),
            "left behind after {method}: {:?}",
            files_in(dir.path())
        );
    }
}

/// Reading past the end of the file is an error with the offset, not a short count.
#[test]
fn reads_past_the_end_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("short");
    std::fs::write(&path, vec![0u8; 4096]).unwrap();
    let file = File::open(&path).unwrap();
    let mut buf = vec![0u8; 4096];
    let error = super::engine::read_exact_at(file.as_raw_fd(), &mut buf, 4096).unwrap_err();
    assert_eq!(error.kind(), std::io::ErrorKind::UnexpectedEof);
    if !ring_works() {
        return;
    }
    let mut ring = RingFile::new(
        file.as_raw_fd(),
        2,
        Strategy::Refill,
        4096,
        RingFlags::default(),
        None,
    )
    .unwrap();
    let job = RingJob {
        method_name: "ring",
        strategy: Strategy::Refill,
        seed: 0,
        inject_failure_at: None,
    };
    let error = ring
        .read_offsets(&[0, 8192], 4096, &job, |_, _| Ok(()))
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("offset 8192") && error.contains("end of the file"),
        "{error}"
    );
    // The ring stays usable: what it reads is counted exactly.
    let tally = ring
        .read_offsets(&[0, 0, 0], 4096, &job, |_, _| Ok(()))
        .unwrap();
    assert_eq!((tally.reads, tally.bytes), (3, 3 * 4096));
}

fn record(plan: &ReadPlan, case: ReadCase, round: u32, seconds: f64) -> ReadRunRecord {
    let reads = u64::from(plan.reads_per_run);
    ReadRunRecord::new(
        plan,
        round,
        case,
        &ReadOutcome {
            elapsed_s: seconds,
            reads,
            bytes: reads * plan.block_size_bytes,
            file_pages: plan.size_bytes / 4096,
            ..Default::default()
        },
    )
}

#[test]
fn summaries_ratios_and_exports() {
    let dir = tempfile::tempdir().unwrap();
    let plan = read_plan(&[
        "--reads",
        "--dir",
        dir.path().to_str().unwrap(),
        "--size",
        "64MiB",
        "--reads-per-run",
        "1000",
        "--queue-depths",
        "1,4",
        "--read-methods",
        "io_uring",
        "--read-cache",
        "direct",
    ])
    .unwrap();
    let (qd1, qd4) = (plan.cases[0], plan.cases[1]);
    // QD 1: 1000 and 500 IOPS; QD 4: 4000 and 2000 IOPS.
    let records = vec![
        record(&plan, qd1, 1, 1.0),
        record(&plan, qd4, 1, 0.25),
        record(&plan, qd4, 2, 0.5),
        record(&plan, qd1, 2, 2.0),
    ];
    assert_eq!(
        records[0].csv_row(),
        "randread_io_uring_qd1_direct,1.000000,4096000"
    );
    assert_eq!(records[1].iops, 4000.0);
    assert!((records[1].mib_per_sec - 4000.0 * 4096.0 / 1048576.0).abs() < 1e-9);

    let summaries = read_output::summarize(&plan, &records);
    assert_eq!(summaries.len(), 2);
    assert_eq!(summaries[0].iops.mean, 750.0);
    assert_eq!(summaries[1].iops.mean, 3000.0);
    assert_eq!(summaries[0].iops_ratio.unwrap().ratio, 1.0);
    assert_eq!(summaries[0].iops_ratio.unwrap().error, None);
    let ratio = summaries[1].iops_ratio.unwrap();
    assert!((ratio.ratio - 4.0).abs() < 1e-12);
    assert!(ratio.error.unwrap() > 0.0);
    assert_eq!(summaries[1].baseline, "randread_io_uring_qd1_direct");
    assert_eq!(summaries[1].time_s.runs, 2);

    let table = read_output::summary_table(&plan, &summaries, crate::report::table::Output::Piped);
    crate::report::table::assert_fits_piped(&table);
    assert!(table.contains("× QD1"), "{table}");
    assert!(table.contains("3.0k ± 1.4k"), "{table}");
    assert!(table.contains("750 ± 354"), "{table}");

    let notes = read_output::notes(&plan, &summaries);
    assert!(
        notes.iter().any(|n| n.contains("O_DIRECT reads bypass")),
        "{notes:?}"
    );
    assert!(notes.iter().any(|n| n.contains("× QD1")), "{notes:?}");

    let csv_path = dir.path().join("reads.csv");
    crate::report::export::export_csv(&csv_path, &records).unwrap();
    let csv = std::fs::read_to_string(&csv_path).unwrap();
    assert!(csv.starts_with(
        "method,seconds,bytes_per_sec,round,read_method,cache,queue_depth,threads,reads,bytes,"
    ));
    assert!(csv.contains(
        "randread_io_uring_qd4_direct,0.25,16384000.0,1,io_uring,direct,4,1,1000,4096000,"
    ));
    let json = serde_json::to_value(&summaries[1]).unwrap();
    assert_eq!(json["iops"]["mean"], 3000.0);
    assert_eq!(json["iops_ratio"]["ratio"], 4.0);
    assert_eq!(json["base_depth"], 1);
    assert_eq!(json["cache"], "direct");

    let chart = read_output::iops_chart(&plan, &summaries);
    assert_eq!(chart.categories, vec!["QD 1", "QD 4"]);
    assert_eq!(chart.series.len(), 1);
    assert_eq!(chart.series[0].values, vec![Some(750.0), Some(3000.0)]);
}

/// Without QD 1 the ratios are against the smallest depth, and the column says so.
#[test]
fn the_ratio_column_names_its_base_depth() {
    let dir = tempfile::tempdir().unwrap();
    let plan = read_plan(&[
        "--reads",
        "--dir",
        dir.path().to_str().unwrap(),
        "--queue-depths",
        "32,4",
    ])
    .unwrap();
    assert_eq!(plan.base_depth(), 4);
    assert_eq!(read_output::headers(4)[5], "× QD4");
}

/// The output says whether buffered runs started cold, from what mincore found.
#[test]
fn notes_say_whether_buffered_reads_were_cold() {
    let dir = tempfile::tempdir().unwrap();
    let plan = read_plan(&[
        "--reads",
        "--dir",
        dir.path().to_str().unwrap(),
        "--size",
        "4MiB",
        "--reads-per-run",
        "100",
        "--queue-depths",
        "1",
        "--read-methods",
        "pread",
        "--read-cache",
        "buffered",
    ])
    .unwrap();
    let case = plan.cases[0];
    let mut cold = record(&plan, case, 1, 1.0);
    let summaries = read_output::summarize(&plan, std::slice::from_ref(&cold));
    let notes = read_output::notes(&plan, &summaries);
    assert!(
        notes.iter().any(|n| n.starts_with("cold reads")
            && n.contains("POSIX_FADV_DONTNEED")
            && n.contains("0 of its 1024 pages")),
        "{notes:?}"
    );
    cold.resident_pages = 7;
    let summaries = read_output::summarize(&plan, &[cold]);
    assert_eq!(summaries[0].resident_pages_max, 7);
    let notes = read_output::notes(&plan, &summaries);
    assert!(
        notes
            .iter()
            .any(|n| n.starts_with("NOT fully cold") && n.contains("7 of the file's 1024")),
        "{notes:?}"
    );
}
