//! What a listener allows its clients: the timeouts and connection caps ([`Limits`]) and their
//! ranges.

/// What a listener allows its clients (flags of `gce-backend sim`; the service's `[http]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::Args)]
pub struct Limits {
    /// A request's head must arrive within this (ms) of the connection waiting for it (opened,
    /// or its previous answer sent), else the connection is closed: an idle keep-alive
    /// connection is closed after it too.
    #[arg(long, default_value_t = Limits::DEFAULT.header_read_timeout_ms)]
    pub header_read_timeout_ms: u64,
    /// A connection on which no byte moves either way for this long (ms) is closed.
    #[arg(long, default_value_t = Limits::DEFAULT.idle_timeout_ms)]
    pub idle_timeout_ms: u64,
    /// Connections served at once; more wait unaccepted until one closes.
    #[arg(long, default_value_t = Limits::DEFAULT.max_connections)]
    pub max_connections: usize,
    /// Connections served at once from one client address (an IPv6 address by its /64); one
    /// more is closed at once. 0: no cap (the simulator's default: its clients are the
    /// service's processes, usually all on one address).
    #[arg(long, default_value_t = Limits::DEFAULT.max_connections_per_address)]
    pub max_connections_per_address: usize,
}

impl Limits {
    /// 10 s for a request's head, 60 s without a byte moving, 1 024 connections, no cap per
    /// address (the service's `[http]` sets one).
    pub const DEFAULT: Limits = Limits {
        header_read_timeout_ms: 10_000,
        idle_timeout_ms: 60_000,
        max_connections: 1024,
        max_connections_per_address: 0,
    };

    /// Checks the ranges: timeouts of 1 ms to 10 minutes (head) or 1 hour (idle), 1 to 65 536
    /// connections, 0 (no cap) to 65 536 per address. The message names the field.
    pub fn validate(&self) -> Result<(), String> {
        if !(1..=600_000).contains(&self.header_read_timeout_ms) {
            return Err("header_read_timeout: must be from 1 ms to 10 minutes".into());
        }
        if !(1..=3_600_000).contains(&self.idle_timeout_ms) {
            return Err("idle_timeout: must be from 1 ms to 1 hour".into());
        }
        if !(1..=65_536).contains(&self.max_connections) {
            return Err("max_connections: must be from 1 to 65536".into());
        }
        if self.max_connections_per_address > 65_536 {
            return Err("max_connections_per_address: must be from 0 (no cap) to 65536".into());
        }
        Ok(())
    }
}

impl Default for Limits {
    fn default() -> Self {
        Self::DEFAULT
    }
}
