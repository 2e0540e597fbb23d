//! API rate quotas on the world (`--quota`, see `quota.rs`): every Compute call of a project is
//! counted in its group; within one synchronized minute of the simulator's clock (refilled at
//! the next whole minute, as Compute Engine does), a call past its group's limit, or a bulk insert
//! past the bulk limits (a second's, or operations running), is refused with 403
//! `rateLimitExceeded` before it does anything. Refusals are counted by method.

use super::*;
use crate::quota::{Group, is_bulk};

/// Compute Engine's name of a group's metric, in its refusals.
fn metric(group: Group) -> &'static str {
    match group {
        Group::Mutations => "Queries",
        Group::Reads => "Read requests",
        Group::Lists => "List requests",
        Group::Operations => "Operation read requests",
    }
}

impl World {
    /// Counts a call of `method` by `project` and takes it, or refuses it (403
    /// `rateLimitExceeded`) when it is over a rate quota. Calls outside Compute Engine are not
    /// counted.
    pub fn admit(&mut self, project: &str, method: &str) -> Result<(), ApiError> {
        let Some(group) = Group::of(method) else { return Ok(()) };
        match self.api.requests.get_mut(project) {
            Some(n) => n[group as usize] += 1,
            None => {
                let mut n = [0; 4];
                n[group as usize] = 1;
                self.api.requests.insert(project.to_owned(), n);
            }
        }
        let Some(limits) = self.cfg.quota.limits(project).copied() else { return Ok(()) };
        let ms = self.now_utc().timestamp_millis();
        let (minute, second) = (ms.div_euclid(60_000), ms.div_euclid(1000));
        let operations = &self.operations;
        let r = match self.rates.get_mut(project) {
            Some(r) => r,
            None => self.rates.entry(project.to_owned()).or_default(),
        };
        if r.minute != minute {
            r.minute = minute;
            r.used = [0; 4];
        }
        if r.second != second {
            r.second = second;
            r.bulk_this_second = 0;
        }
        let bulk = is_bulk(method);
        let limit = limits.per_minute(group);
        let refused = if limit > 0 && r.used[group as usize] >= limit {
            Some(format!(
                "Quota exceeded for quota metric '{m}' and limit '{m} per minute' of service 'compute.googleapis.com' for consumer 'project:{project}': {limit} a minute.",
                m = metric(group)
            ))
        } else if bulk && limits.bulk_per_second > 0 && r.bulk_this_second >= limits.bulk_per_second {
            Some(format!(
                "Rate Limit Exceeded: at most {} bulk insert requests a second per project.",
                limits.bulk_per_second
            ))
        } else if bulk && limits.bulk_running > 0 && {
            r.bulk_ops.retain(|op| operations.get(op).is_some_and(|op| op.status != OpStatus::Done));
            r.bulk_ops.len() as u64 >= limits.bulk_running
        } {
            Some(format!(
                "Rate Limit Exceeded: at most {} bulk insert operations running at once per project.",
                limits.bulk_running
            ))
        } else {
            None
        };
        if let Some(message) = refused {
            *self.api.rate_limited.entry(method.to_owned()).or_default() += 1;
            return Err(ApiError::new(403, "rateLimitExceeded", message));
        }
        r.used[group as usize] += 1;
        if bulk {
            r.bulk_this_second += 1;
        }
        Ok(())
    }

    /// Notes a bulk insert operation of `project` running (for the limit of those running).
    pub(super) fn bulk_running(&mut self, project: &str, op: &str) {
        let limited = self.cfg.quota.limits(project).is_some_and(|l| l.bulk_running > 0);
        if limited {
            self.rates.entry(project.to_owned()).or_default().bulk_ops.push(op.to_owned());
        }
    }

    /// Compute Engine calls counted: by project and group, and those refused by method.
    pub fn api_calls(&self) -> &ApiCalls {
        &self.api
    }
}

#[cfg(test)]
mod tests;
