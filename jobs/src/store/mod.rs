//! Store adapters that need nothing outside this crate.

pub mod memory;
