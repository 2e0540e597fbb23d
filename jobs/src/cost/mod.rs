//! Cost: what VMs cost and what a tenant may spend. Compute Engine's SKUs as prices per hour
//! (`prices`), what each VM is billed as over time and its Config's ledger of it (`ledger`), and
//! the ledgers read per Config and tenant with the one budget rule and showback (`spend`).

pub mod ledger;
pub mod prices;
pub mod spend;
