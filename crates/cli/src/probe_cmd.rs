//! `sqlite-uring probe [--dir DIR]`.

use std::path::Path;

/// Prints what io_uring offers here and, with `dir`, what it does on that directory's
/// filesystem and how the VFS routes a database there.
pub fn run(dir: Option<&Path>) -> anyhow::Result<()> {
    let report = sqlite_uring::probe();
    println!("kernel: {}", report.kernel_release);
    match &report.unavailable_reason {
        None => println!("io_uring: available"),
        Some(why) => println!("io_uring: UNAVAILABLE: {why}"),
    }
    for (name, present) in &report.features {
        println!(
            "  feature {name:<24} {}",
            if *present { "yes" } else { "no" }
        );
    }
    for (name, supported) in &report.opcodes {
        println!(
            "  opcode  {name:<24} {}",
            if *supported { "yes" } else { "no" }
        );
    }
    if !report.available() {
        anyhow::bail!("io_uring is unavailable here; see the reason above");
    }
    let Some(dir) = dir else {
        return Ok(());
    };
    if !dir.is_dir() {
        anyhow::bail!(
            "--dir {}: not a directory; give a directory on the filesystem to probe",
            dir.display()
        );
    }
    let fs = sqlite_uring::probe_filesystem(dir).map_err(|error| {
        anyhow::anyhow!(
            "--dir {}: {error}; give a writable directory",
            dir.display()
        )
    })?;
    let placement = &fs.placement;
    println!("directory: {}", dir.display());
    println!("  filesystem               {}", fs.filesystem);
    println!(
        "  ring writes and fsyncs (inline = completed by the submitting thread, no io-wq worker):"
    );
    for (what, completion) in [
        ("buffered append", placement.buffered_append),
        ("  (mtime current)", placement.buffered_append_current_times),
        ("buffered overwrite", placement.buffered_overwrite),
        ("O_DIRECT append", placement.direct_append),
        ("O_DIRECT overwrite", placement.direct_overwrite),
        ("fsync", placement.fsync),
    ] {
        println!("    {what:<22} {}", completion.describe());
    }
    println!(
        "  buffered ring writes run inline: {}",
        if placement.buffered_append.is_inline() && placement.buffered_overwrite.is_inline() {
            "yes"
        } else {
            "no"
        }
    );
    println!(
        "  default routing of a database here: {{{}}}",
        fs.default_routing
    );
    Ok(())
}
