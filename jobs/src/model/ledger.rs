//! What VMs cost over time, metered from their records' own transitions: each VM record carries
//! its [`Metered`] (what it is billed as, `Vm::billed`, since when, at what rate); a write that
//! changes it closes the interval it ends and opens the next, as changes ([`Spend`]) to its
//! Config's ledger that the store applies in the same transaction as the write, so each interval
//! is counted exactly once however many processes write and restart. Pure rules: the store keeps
//! integers, [`ledger`] reads them back as hours and dollars per month and state at any instant,
//! O(open months).
//!
//! A Config's ledger holds, per calendar month (UTC) and state:
//! * closed intervals: `c/<YYYY-MM>/<state>/s` (VM-seconds) and `/u` (µUSD);
//! * open intervals, grouped by the month they began in: `o/<YYYY-MM>/<state>/n` (how many),
//!   `/t` (their starts, seconds into that month, summed), `/r` (their rates, µUSD per hour,
//!   summed) and `/rt` (each rate times its start, summed). What an open group has accrued by any
//!   instant is linear in these, so reading it never walks the VMs.

use std::collections::BTreeMap;

use chrono::{DateTime, Datelike, TimeZone, Utc};
use serde::{Deserialize, Serialize};

/// µUSD in a dollar.
pub const MICROS: f64 = 1_000_000.0;

/// What a VM's instance is billed as.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Billed {
    /// Running (booting, serving, being drained or deleted): its machine type and its disks.
    Running,
    /// Suspended: its saved memory and device state, and its disks.
    Suspended,
    /// Stopped: its disks.
    Stopped,
}

impl Billed {
    /// Every state, in order (the one list).
    pub const ALL: [Billed; 3] = [Billed::Running, Billed::Suspended, Billed::Stopped];

    /// Its name in the ledger, metrics and answers.
    pub fn as_str(self) -> &'static str {
        match self {
            Billed::Running => "running",
            Billed::Suspended => "suspended",
            Billed::Stopped => "stopped",
        }
    }

    fn parse(s: &str) -> Option<Billed> {
        Billed::ALL.into_iter().find(|b| b.as_str() == s)
    }
}

impl std::fmt::Display for Billed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a VM record is billed as since when: kept in the record, changed only with its state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Metered {
    /// What it is billed as.
    pub state: Billed,
    /// Since when (the write that found it so).
    pub since: DateTime<Utc>,
    /// µUSD per hour in this state, at the prices in force then (0: unpriced).
    pub rate: u64,
    /// Fields a newer build wrote that this one does not know: kept, and written back with it.
    #[serde(flatten)]
    #[schemars(skip)]
    pub unknown: crate::unknown::Unknown,
}

/// Changes to a Config's ledger (field → amount to add), made by one VM write.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Spend(pub BTreeMap<String, i64>);

impl Spend {
    /// True when it changes nothing.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    fn add(&mut self, field: String, by: i64) {
        if by == 0 {
            return;
        }
        let v = self.0.entry(field).or_insert(0);
        *v += by;
        if *v == 0 {
            self.0.retain(|_, v| *v != 0);
        }
    }

    /// The fields and amounts, in order.
    pub fn pairs(&self) -> impl Iterator<Item = (&str, i64)> {
        self.0.iter().map(|(k, v)| (k.as_str(), *v))
    }
}

/// `YYYY-MM` of `at`.
pub fn month_of(at: DateTime<Utc>) -> String {
    format!("{:04}-{:02}", at.year(), at.month())
}

/// The first instant of the month `at` is in.
pub fn month_start(at: DateTime<Utc>) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(at.year(), at.month(), 1, 0, 0, 0).single().unwrap_or(at)
}

/// The first instant of the month after the one `at` is in.
pub fn next_month(at: DateTime<Utc>) -> DateTime<Utc> {
    let (y, m) = if at.month() == 12 { (at.year() + 1, 1) } else { (at.year(), at.month() + 1) };
    Utc.with_ymd_and_hms(y, m, 1, 0, 0, 0).single().unwrap_or(at)
}

fn secs(a: DateTime<Utc>, b: DateTime<Utc>) -> i64 {
    (b - a).num_seconds().max(0)
}

/// The ledger changes of a VM whose meter goes from `old` to `new` at `at` (its deletion: `new`
/// none): `old`'s interval closed at `at`, split at month ends, and `new`'s opened. Nothing when
/// the meter is the same.
pub fn spend(old: Option<&Metered>, new: Option<&Metered>, at: DateTime<Utc>) -> Spend {
    let mut out = Spend::default();
    if old == new {
        return out;
    }
    if let Some(o) = old {
        let s = o.state.as_str();
        let m0 = month_start(o.since);
        let into = secs(m0, o.since);
        let group = format!("o/{}/{s}", month_of(o.since));
        out.add(format!("{group}/n"), -1);
        out.add(format!("{group}/t"), -into);
        out.add(format!("{group}/r"), -(o.rate as i64));
        out.add(format!("{group}/rt"), -(o.rate as i64).saturating_mul(into));
        let mut from = o.since;
        while from < at {
            let to = next_month(from).min(at);
            let span = secs(from, to);
            let m = month_of(from);
            out.add(format!("c/{m}/{s}/s"), span);
            out.add(format!("c/{m}/{s}/u"), ((o.rate as i128 * span as i128 + 1800) / 3600) as i64);
            from = to;
        }
    }
    if let Some(n) = new {
        let s = n.state.as_str();
        let into = secs(month_start(n.since), n.since);
        let group = format!("o/{}/{s}", month_of(n.since));
        out.add(format!("{group}/n"), 1);
        out.add(format!("{group}/t"), into);
        out.add(format!("{group}/r"), n.rate as i64);
        out.add(format!("{group}/rt"), (n.rate as i64).saturating_mul(into));
    }
    out
}

/// Hours and dollars accrued.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Accrued {
    /// VM-hours.
    pub hours: f64,
    /// USD.
    pub usd: f64,
}

impl std::ops::AddAssign for Accrued {
    fn add_assign(&mut self, o: Accrued) {
        self.hours += o.hours;
        self.usd += o.usd;
    }
}

/// A Config's ledger read at an instant.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Ledger {
    /// Per month (`YYYY-MM`) and state: what was accrued in it (to the instant read, in the
    /// current month).
    pub months: BTreeMap<String, BTreeMap<Billed, Accrued>>,
    /// VMs billed now, per state.
    pub vms: BTreeMap<Billed, i64>,
    /// USD per hour they cost now, per state.
    pub rate: BTreeMap<Billed, f64>,
}

impl Ledger {
    /// USD per hour of every VM billed now (none: 0, not the -0 of an empty sum).
    pub fn per_hour(&self) -> f64 {
        self.rate.values().sum::<f64>() + 0.0
    }

    /// What month `month` accrued in all, per state (none: zero).
    pub fn month(&self, month: &str) -> BTreeMap<Billed, Accrued> {
        self.months.get(month).cloned().unwrap_or_default()
    }

    /// USD accrued in month `month` (`YYYY-MM`), every state together.
    pub fn month_usd(&self, month: &str) -> f64 {
        self.months.get(month).map_or(0.0, |m| m.values().map(|a| a.usd).sum())
    }

    /// Everything accrued, per state.
    pub fn total(&self) -> BTreeMap<Billed, Accrued> {
        let mut out: BTreeMap<Billed, Accrued> = BTreeMap::new();
        for m in self.months.values() {
            for (b, a) in m {
                *out.entry(*b).or_default() += *a;
            }
        }
        out
    }

    /// Adds `o` (another Config's) to it.
    pub fn merge(&mut self, o: &Ledger) {
        for (m, states) in &o.months {
            let mine = self.months.entry(m.clone()).or_default();
            for (b, a) in states {
                *mine.entry(*b).or_default() += *a;
            }
        }
        for (b, n) in &o.vms {
            *self.vms.entry(*b).or_default() += n;
        }
        for (b, r) in &o.rate {
            *self.rate.entry(*b).or_default() += r;
        }
    }
}

/// A tenant's limit per hour now, and what sets it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Limit {
    /// USD per hour its Configs may cost together now.
    pub per_hour: crate::config::Usd,
    /// What sets it: `max_cost_per_hour $5.00`, or `budget_per_month $1000 ($400 spent, 300 h
    /// left)`.
    pub by: String,
}

/// What a tenant's budget does to a Config's growth.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Hold {
    /// The tenant.
    pub tenant: String,
    /// What its Configs cost per hour now, the VMs being made included.
    pub cost_per_hour: crate::config::Usd,
    /// Its limit.
    pub limit: Limit,
    /// What one more VM of the Config costs per hour (none: it cannot be priced, so none is
    /// made under a budget).
    pub per_vm: Option<crate::config::Usd>,
    /// How many more VMs it may make now.
    pub room: u64,
}

impl Hold {
    /// How it reads on status: `held by budget: tenant team-a costs $4.80/h of its $5.00/h
    /// (max_cost_per_hour $5.00); a VM costs $0.20/h`.
    pub fn said(&self) -> String {
        let vm = match self.per_vm {
            Some(p) => format!("a VM costs {p}/h"),
            None => "its VMs cannot be priced".to_owned(),
        };
        format!(
            "held by budget: tenant {} costs {}/h of its {}/h ({}); {vm}",
            self.tenant, self.cost_per_hour, self.limit.per_hour, self.limit.by
        )
    }
}

fn month_key(m: &str) -> Option<DateTime<Utc>> {
    let (y, mo) = m.split_once('-')?;
    Utc.with_ymd_and_hms(y.parse().ok()?, mo.parse().ok()?, 1, 0, 0, 0).single()
}

/// Reads a Config's ledger `fields` (as the store keeps them) at `now`. A field of no known shape
/// (another build's) is left out.
pub fn ledger(fields: &BTreeMap<String, i64>, now: DateTime<Utc>) -> Ledger {
    let mut out = Ledger::default();
    // (month, state) → [n, t, r, rt] of the open group.
    let mut open: BTreeMap<(String, Billed), [i64; 4]> = BTreeMap::new();
    for (k, v) in fields {
        let parts: Vec<&str> = k.split('/').collect();
        let [kind, m, s, what] = parts[..] else { continue };
        let (Some(b), Some(_)) = (Billed::parse(s), month_key(m)) else { continue };
        match (kind, what) {
            ("c", "s") => {
                out.months.entry(m.to_owned()).or_default().entry(b).or_default().hours += *v as f64 / 3600.0
            }
            ("c", "u") => {
                out.months.entry(m.to_owned()).or_default().entry(b).or_default().usd += *v as f64 / MICROS
            }
            ("o", w) => {
                let i = match w {
                    "n" => 0,
                    "t" => 1,
                    "r" => 2,
                    "rt" => 3,
                    _ => continue,
                };
                open.entry((m.to_owned(), b)).or_default()[i] = *v;
            }
            _ => {}
        }
    }
    for ((m, b), [n, t, r, rt]) in open {
        let Some(start) = month_key(&m) else { continue };
        *out.vms.entry(b).or_default() += n;
        *out.rate.entry(b).or_default() += r as f64 / MICROS;
        let mut from = start;
        while from < now {
            let to = next_month(from).min(now);
            let span = secs(from, to) as i128;
            let (s, u) = if from == start {
                (n as i128 * span - t as i128, r as i128 * span - rt as i128)
            } else {
                (n as i128 * span, r as i128 * span)
            };
            let a = out.months.entry(month_of(from)).or_default().entry(b).or_default();
            a.hours += s.max(0) as f64 / 3600.0;
            a.usd += u.max(0) as f64 / 3600.0 / MICROS;
            from = to;
        }
    }
    out
}

#[cfg(test)]
mod tests;
