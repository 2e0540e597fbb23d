//! Records: the one way VM and Config records are written and counted. Compare-and-set writes,
//! a VM record that does not decode quarantined (`writes`); the meter moved on with each VM
//! write, its Config's ledger changed in the same transaction (`meter`); a Config's counts from
//! the store's sums (`counts`). Everything above that changes a record goes through here.

pub mod counts;
pub mod meter;
pub mod writes;
