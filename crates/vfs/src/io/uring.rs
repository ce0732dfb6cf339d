pub(crate) fn probe_report() -> crate::ProbeReport {
    crate::ProbeReport { kernel_release: String::new(), unavailable_reason: Some("not yet".into()), features: vec![], opcodes: vec![] }
}
