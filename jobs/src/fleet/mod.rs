//! Fleet: how VM records change, each change written once. The compare-and-set writes and
//! quarantine (`writes`), the meter moved on with each VM write (`meter`), a Config's counts
//! (`counts`), what operators see of it (`status`; the stored view in `status::view`), a VM's
//! shared steps (`lifecycle`), rolling updates (`rollout`; the mark on the Config record in
//! `rollout::state`) and a new VM record made and handed to its provider (`making`).

pub mod counts;
pub mod lifecycle;
pub mod making;
pub mod meter;
pub mod rollout;
pub mod status;
pub mod writes;
