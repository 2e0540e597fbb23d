//! Placement: where a new VM goes and on what. The zones and machine types that failed to create
//! lately (`backoff`), which of a Config's ranked machine types a VM gets and when it is tried
//! again on another (`ranks`; the ranks as a Config writes them are `config::ranks`), which zone
//! of a multi-zone Config (`zones`), and a Spot pool's failover to standard VMs (`spot`; its
//! state on the Config record is `model::spot_state`). What Compute Engine offers a project is
//! `catalog`, below, since `Env` holds it.

pub mod backoff;
pub mod ranks;
pub mod spot;
pub mod zones;
