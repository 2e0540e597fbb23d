//! Static machines: hosts that exist outside Compute Engine (a lab's Macs, bare metal), each
//! running a Swarming bot under its hostname. Their bot connects when the machine is added,
//! and, as a bot service would, starts again `bot_connect_ms` after it was terminated or
//! deleted while running; a bot killed (`/sim/kill-bot`) stays down until the machine is added
//! again.

use super::*;
use crate::names::{server_key, valid_hostname};

/// Zone the bots of static machines report.
const ZONE: &str = "static";

impl World {
    /// Adds machine `hostname` with a bot for `server` (a URL); its bot connects after
    /// `bot_connect_ms`. A machine already added whose bot is down is started again. Returns
    /// false for a hostname that is not a valid one.
    pub fn add_machine(&mut self, server: &str, hostname: &str) -> bool {
        if !valid_hostname(hostname) {
            return false;
        }
        let key = (server_key(server), hostname.to_owned());
        let up = self.bots.get(&key.0).and_then(|m| m.get(hostname)).is_some_and(|b| b.dead_at.is_none());
        if !(up && self.machines.contains_key(&key)) {
            self.machines.insert(key.clone(), 0);
            let after = Duration::from_millis(self.cfg.bot_connect_ms);
            self.at(after, Ev::MachineBot { server: key.0, hostname: key.1 });
        }
        true
    }

    /// A listed machine's bot connects, in a new session.
    pub(super) fn connect_machine_bot(&mut self, server: String, hostname: String) {
        let key = (server, hostname);
        if !self.machines.contains_key(&key) {
            return;
        }
        if self.bots.get(&key.0).and_then(|m| m.get(&key.1)).is_some_and(|b| b.dead_at.is_none()) {
            return; // already up
        }
        let session = (1 << 62) | self.next();
        self.machines.insert(key.clone(), session);
        let ip = self.random_ip(10);
        self.put_bot(key.0, key.1, session, ip, ZONE.to_owned());
    }

    /// The bot of session `session` stopped (terminated, or deleted while running): if it was a
    /// listed machine's, its bot service starts it again.
    pub(super) fn machine_bot_gone(&mut self, server: &str, bot: &str, session: u64) {
        let key = (server.to_owned(), bot.to_owned());
        if self.machines.get(&key) == Some(&session) {
            let after = Duration::from_millis(self.cfg.bot_connect_ms);
            self.at(after, Ev::MachineBot { server: key.0, hostname: key.1 });
        }
    }
}

#[cfg(test)]
mod tests;
