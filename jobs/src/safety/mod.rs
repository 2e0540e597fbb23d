//! Safety: what holds work back so a mistake or an outage does not spread. An operator's pause and
//! a tenant's hold (`pause`), a Config's circuit breaker after failed VMs in a row (`breaker`; its
//! state on the Config record is `model::breaker_state`), and indexes and sums rebuilt when they
//! are found wrong (`heal`). Conditions logged once per change of state are `episodes`, below,
//! since the guarded ports log through it.

pub mod breaker;
pub mod heal;
pub mod pause;
