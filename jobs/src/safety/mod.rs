//! Safety: what holds work back so a mistake or an outage does not spread. Conditions logged
//! once per change (`episodes`), an operator's pause and a tenant's hold (`pause`), a Config's
//! circuit breaker after failed VMs in a row (`breaker`; its state on the Config record in
//! `breaker::state`), and indexes and sums rebuilt when they are found wrong (`heal`).

pub mod breaker;
pub mod episodes;
pub mod heal;
pub mod pause;
