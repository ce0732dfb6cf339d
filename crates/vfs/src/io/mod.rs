pub(crate) mod uring;
#[cfg(feature = "fault-injection")]
pub(crate) mod fault;
