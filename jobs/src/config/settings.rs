//! The reconcile logic's settings (service settings `[timing]` and `[limits]`).

use serde::{Deserialize, Serialize};

use super::units::Secs;

/// Timings of the reconcile logic (all overridable in the service settings file).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Timing {
    /// How soon a handler looks again at work in progress (a pending operation, a bot not yet
    /// connected, a bot terminating).
    pub watch: Secs,
    /// A bot whose first connection predates its instance by more than this is a previous
    /// incarnation's, and a drained VM whose bot never connected is destroyed after this.
    pub bot_grace: Secs,
    /// Age past which a bot observation from the ListBots walk is not trusted (GetBot instead).
    pub observation_ttl: Secs,
    /// TerminateBot is not sent again for the same bot within this.
    pub terminate_again_after: Secs,
    /// A leaked instance is deleted if still leaked this long after it was first seen.
    pub leak_grace: Secs,
    /// A bot named like ours with no VM is deleted if still there this long after first seen.
    pub stale_bot_grace: Secs,
    /// First backoff of a (project, zone) after a quota or stockout error; doubles per failure.
    pub backoff_base: Secs,
    /// Longest backoff.
    pub backoff_cap: Secs,
    /// Longest wait between two looks at a pending Compute operation: the first look comes
    /// 0.25 s after it was sent, each next one twice as late, up to this.
    pub operation_poll: Secs,
    /// A Config whose file is gone is deleted (and its VMs drained) this long after the file was
    /// first found missing, unless it comes back.
    pub config_delete_grace: Secs,
    /// Every VM's `manage_bot` runs at least once this long (the `manage_bots` sweep, spread
    /// evenly), besides the runs its changes, its deadline and its timeout bring.
    pub sweep: Secs,
    /// The tasks of a scanning cron job (`inspect_instances`, `audit_instances`,
    /// `inspect_swarming`, `report_quota`) are spread over this much time after its tick, so
    /// the scans of many projects, zones and servers do not all call at once (0: no spread).
    pub fan_out_jitter: Secs,
    /// A Config's first VM waiting for an instance waits at most this long for more before the
    /// VMs waiting are sent (in bulk when there are `[limits] bulk_min` or more), unless no more
    /// are coming or a full bulk (`bulk_max`) is there.
    pub bulk_gather: Secs,
}

impl Default for Timing {
    fn default() -> Self {
        Self {
            watch: Secs(10),
            bot_grace: Secs(600),
            observation_ttl: Secs(90),
            terminate_again_after: Secs(3600),
            leak_grace: Secs(900),
            stale_bot_grace: Secs(3600),
            backoff_base: Secs(30),
            backoff_cap: Secs(1800),
            operation_poll: Secs(5),
            config_delete_grace: Secs(900),
            sweep: Secs(4 * 3600),
            fan_out_jitter: Secs(5),
            bulk_gather: Secs(10),
        }
    }
}

/// Guard rails against operator mistakes and floods (settings `[limits]`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Limits {
    /// The largest amount a Config may ask for (its `max`, and the `max` of each window); above
    /// it the file is invalid and nothing is applied.
    pub max_amount: u32,
    /// VM records one `expand_config` run makes; it re-queues itself for the rest, so each batch
    /// re-reads the Config.
    pub expand_batch: u32,
    /// VMs of one Config waiting for their instance at once; expansion pauses above it.
    pub creating_per_config: u32,
    /// Entries of the audit trail kept per Config (and in the global list); older ones are
    /// dropped as new ones come.
    pub audit_keep: u32,
    /// The fewest VMs of a Config (one zone, one revision) waiting at once that are sent in one
    /// `instances.bulkInsert` (one call against the project's rate quota); fewer go one insert each.
    pub bulk_min: u32,
    /// The most VMs one bulkInsert makes (Compute takes up to 5 000).
    pub bulk_max: u32,
    /// The most bulk inserts running at once per project (Compute refuses an 11th with
    /// `rateLimitExceeded`).
    pub bulk_running: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_amount: 10_000,
            expand_batch: 500,
            creating_per_config: 1_000,
            audit_keep: 200,
            bulk_min: 10,
            bulk_max: 1_000,
            bulk_running: 10,
        }
    }
}

impl Limits {
    /// Checks the values.
    pub fn validate(&self) -> Result<(), String> {
        if self.max_amount == 0
            || self.expand_batch == 0
            || self.creating_per_config == 0
            || self.audit_keep == 0
        {
            return Err(
                "limits: max_amount, expand_batch, creating_per_config and audit_keep must be positive"
                    .into(),
            );
        }
        if self.bulk_min < 2
            || self.bulk_max < self.bulk_min
            || self.bulk_max > 5_000
            || self.bulk_running == 0
        {
            return Err(
                "limits: bulk_min must be at least 2, bulk_max from bulk_min to 5000, bulk_running positive"
                    .into(),
            );
        }
        Ok(())
    }
}
