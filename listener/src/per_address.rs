//! Connections open per client, capped: [`client`], the address a client is limited by, and
//! the count of its connections open ([`PerAddress`]), each held until its [`Held`] is dropped.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv6Addr};
use std::sync::{Arc, Mutex};

/// The address a client is limited by (connections here, request rates in the service): its
/// IPv4 address (an IPv4-mapped IPv6 one as IPv4), or its IPv6 /64 (one host's share).
pub fn client(addr: IpAddr) -> IpAddr {
    match addr.to_canonical() {
        IpAddr::V6(v6) => IpAddr::V6(Ipv6Addr::from(v6.to_bits() & !u128::from(u64::MAX))),
        v4 => v4,
    }
}

/// Connections open per client ([`client`]), capped (0: no cap). Holds an entry only while
/// that client has a connection open, so it is no larger than the connections served.
#[derive(Clone)]
pub(crate) struct PerAddress {
    cap: usize,
    open: Arc<Mutex<HashMap<IpAddr, usize>>>,
}

impl PerAddress {
    pub(crate) fn new(cap: usize) -> Self {
        PerAddress { cap, open: Arc::default() }
    }

    /// One more connection from `ip`, held until the [`Held`] is dropped; `None` when `ip`'s
    /// client has `cap` open already.
    pub(crate) fn open(&self, ip: IpAddr) -> Option<Held> {
        if self.cap == 0 {
            return Some(Held(None));
        }
        let key = client(ip);
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        let n = open.entry(key).or_insert(0);
        if *n >= self.cap {
            return None;
        }
        *n += 1;
        Some(Held(Some((self.clone(), key))))
    }
}

/// A connection counted against its client's cap, until dropped.
pub(crate) struct Held(Option<(PerAddress, IpAddr)>);

impl Drop for Held {
    fn drop(&mut self) {
        if let Some((per, key)) = self.0.take() {
            let mut open = per.open.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(n) = open.get_mut(&key) {
                *n -= 1;
                if *n == 0 {
                    open.remove(&key);
                }
            }
        }
    }
}
