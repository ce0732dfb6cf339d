//! `sqlite-uring probe`.

pub fn run() -> anyhow::Result<()> {
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
    if report.available() {
        Ok(())
    } else {
        anyhow::bail!("io_uring is unavailable here; see the reason above")
    }
}
