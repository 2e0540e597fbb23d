//! The state every process shares, read from the store when the API's process is scraped: the
//! fleet per Config (states that partition its VMs, the amount asked for, flags), pauses,
//! backoffs and breakers, ranks of machine types, Spot failovers, rate-limit buckets, queue
//! depths and the queues' counters; and what the fleet costs (`spend`).

mod spend;

use std::sync::{Arc, Mutex};

use gce_backend_jobs::Ctx;
use gce_backend_jobs::model::{ConfigStatus, Counts};
use gce_backend_queues::Counts as QueueCounts;
use gce_backend_queues::metrics::Labels;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

/// The states of `fleet_vms`, each VM in exactly one (the counts nest: VMs ⊇ created ⊇ running
/// ⊇ connected, and created ⊇ parked, which running leaves out), so they sum to the Config's VMs.
pub(super) fn partition(n: &Counts) -> [(&'static str, u32); 5] {
    [
        ("creating", n.vms.saturating_sub(n.created)),
        ("down", n.created.saturating_sub(n.running).saturating_sub(n.parked)),
        ("warm", n.parked.min(n.created.saturating_sub(n.running))),
        ("booting", n.running.saturating_sub(n.connected)),
        ("connected", n.connected),
    ]
}

/// The shared state as last read, encoded on each scrape.
#[derive(Debug, Default)]
pub(super) struct Shared {
    pub(super) configs: Vec<ConfigStatus>,
    pub(super) rate_limits: Vec<gce_backend_jobs::ports::buckets::Level>,
    pub(super) queues: Vec<(String, QueueCounts)>,
    pub(super) paused_all: bool,
    pub(super) costs: spend::Costs,
}

/// Encodes [`Shared`]; refreshed by [`super::Metrics::render`] just before.
#[derive(Debug, Default)]
pub(super) struct SharedCollector(pub(super) Arc<Mutex<Shared>>);

fn gauge(d: &mut DescriptorEncoder<'_>, name: &str, help: &str, rows: &[(Labels, i64)]) -> std::fmt::Result {
    let mut m = d.encode_descriptor(name, help, None, MetricType::Gauge)?;
    for (labels, v) in rows {
        ConstGauge::new(*v).encode(m.encode_family(labels)?)?;
    }
    Ok(())
}

fn counter(
    d: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    rows: &[(Labels, u64)],
) -> std::fmt::Result {
    let mut m = d.encode_descriptor(name, help, None, MetricType::Counter)?;
    for (labels, v) in rows {
        ConstCounter::new(*v).encode(m.encode_family(labels)?)?;
    }
    Ok(())
}

impl Collector for SharedCollector {
    fn encode(&self, mut d: DescriptorEncoder<'_>) -> std::fmt::Result {
        let s = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let l = |pairs: &[(&'static str, &str)]| -> Labels {
            pairs.iter().map(|(k, v)| (*k, (*v).to_owned())).collect()
        };
        let (mut vms, mut amount, mut flagged) = (Vec::new(), Vec::new(), Vec::new());
        let mut paused = Vec::new();
        let mut backoff = Vec::new();
        let mut zone_backoff = Vec::new();
        let mut zone_vms = Vec::new();
        let mut breaker = Vec::new();
        let mut dead = Vec::new();
        let (mut demand, mut held) = (Vec::new(), Vec::new());
        let (mut spot_active, mut spot_failovers, mut spot_events) = (Vec::new(), Vec::new(), Vec::new());
        let (mut rank_vms, mut rank_backoff, mut rank_placed) = (Vec::new(), Vec::new(), Vec::new());
        for c in &s.configs {
            let config = [("config", c.prefix.as_str())];
            for (state, v) in partition(&c.counts) {
                vms.push((l(&[config[0], ("state", state)]), i64::from(v)));
            }
            amount.push((l(&config), i64::from(c.counts.configured)));
            let n = &c.counts;
            for (flag, v) in [("draining", n.draining), ("unhealthy", n.unhealthy), ("bot_dead", n.dead)] {
                flagged.push((l(&[config[0], ("flag", flag)]), i64::from(v)));
            }
            paused.push((l(&[("config", &c.prefix)]), i64::from(c.pause_in_force.is_some())));
            backoff.push((l(&[("config", &c.prefix)]), i64::from(c.backoff.is_some())));
            breaker.push((l(&[("config", &c.prefix)]), i64::from(c.breaker.is_some())));
            for z in &c.zones {
                zone_backoff
                    .push((l(&[("config", &c.prefix), ("zone", &z.zone)]), i64::from(z.backoff.is_some())));
                for (state, v) in [("vms", z.vms), ("connected", z.connected), ("draining", z.draining)] {
                    zone_vms.push((
                        l(&[("config", &c.prefix), ("zone", &z.zone), ("state", state)]),
                        i64::from(v),
                    ));
                }
            }
            dead.push((l(&[("config", &c.prefix)]), c.dead_tasks));
            for r in &c.ranks {
                let rank = r.rank.to_string();
                let of = [
                    ("config", c.prefix.as_str()),
                    ("rank", rank.as_str()),
                    ("machine_type", &r.machine_type),
                ];
                for (state, v) in [("vms", r.vms), ("connected", r.connected)] {
                    rank_vms.push((l(&[of[0], of[1], of[2], ("state", state)]), i64::from(v)));
                }
                rank_backoff.push((l(&of), r.backoffs.len() as i64));
                rank_placed.push((l(&of), r.placed));
            }
            if let Some(sp) = &c.spot {
                spot_active.push((l(&[("config", &c.prefix)]), i64::from(sp.failover.is_some())));
                spot_failovers.push((l(&[("config", &c.prefix)]), sp.failovers_total));
                for (kind, v) in [("preempted", sp.preempted_total), ("refused", sp.refused_total)] {
                    spot_events.push((l(&[("config", &c.prefix), ("kind", kind)]), v));
                }
            }
            if let Some(r) = &c.demand {
                for (what, v) in
                    [("pending", r.pending), ("busy", r.busy), ("idle", r.idle), ("target", r.target)]
                {
                    demand.push((l(&[("config", &c.prefix), ("what", what)]), i64::from(v)));
                }
                held.push((l(&[("config", &c.prefix)]), i64::from(r.held.is_some())));
            }
        }
        gauge(
            &mut d,
            "fleet_vms",
            "VMs per Config by state, each VM in one: creating (no instance yet), down (instance stopped, preempted or gone), warm (kept suspended or stopped by its warm pool, or waking), booting (instance up, no healthy bot connected), connected; they sum to the Config's VMs",
            &vms,
        )?;
        gauge(&mut d, "fleet_amount", "The amount of VMs a Config asks for", &amount)?;
        gauge(
            &mut d,
            "fleet_vms_flagged",
            "VMs per Config with a flag, whatever their state (flags overlap): draining, unhealthy (being replaced), bot_dead",
            &flagged,
        )?;
        gauge(
            &mut d,
            "config_paused",
            "1 while a Config is paused (by itself or by the global pause)",
            &paused,
        )?;
        gauge(
            &mut d,
            "config_backoff",
            "1 while a Config's creations back off (quota, stockout, refusals)",
            &backoff,
        )?;
        gauge(
            &mut d,
            "config_breaker_open",
            "1 while a Config's circuit breaker is open (VMs failed in a row: only canaries are made)",
            &breaker,
        )?;
        gauge(
            &mut d,
            "zone_backoff",
            "1 while a zone of a multi-zone Config backs off (its new VMs go to the other zones)",
            &zone_backoff,
        )?;
        gauge(
            &mut d,
            "zone_vms",
            "VMs of a multi-zone Config per zone: vms, connected, draining",
            &zone_vms,
        )?;
        gauge(
            &mut d,
            "rank_vms",
            "VMs of a Config with fallback machine types per rank (0: attributes.machine_type, then each fallback): vms, connected",
            &rank_vms,
        )?;
        gauge(
            &mut d,
            "rank_backoff",
            "Zones where a rank's machine type backs off (quota, stockout): its new VMs there go to the next rank",
            &rank_backoff,
        )?;
        counter(
            &mut d,
            "rank_placements",
            "VMs placed on each rank of a Config's machine types, ever",
            &rank_placed,
        )?;
        gauge(
            &mut d,
            "demand_tasks",
            "A demand-driven Config's last reading: pending tasks counted for it, its bots busy and idle, and the amount that follows (target, before the amount's bounds)",
            &demand,
        )?;
        gauge(
            &mut d,
            "demand_held",
            "1 while a demand-driven Config's work cannot be read from Swarming (its target is held, never shrunk)",
            &held,
        )?;
        gauge(
            &mut d,
            "spot_failover_active",
            "1 while a Spot pool is failed over: the VMs it makes are standard until its cooldown ends",
            &spot_active,
        )?;
        counter(
            &mut d,
            "spot_failovers",
            "Failovers of a Spot pool to standard VMs, ever (more than spot_failover.more_than preemptions and refusals within its window)",
            &spot_failovers,
        )?;
        counter(
            &mut d,
            "spot_events",
            "A Spot pool's events counted toward a failover, ever: preempted (an instance found down or gone), refused (a Spot insert refused for capacity or quota)",
            &spot_events,
        )?;
        let mut m = d.encode_descriptor(
            "config_dead_tasks",
            "Tasks of a Config that went to a dead set, ever (retries and purges do not lower it)",
            None,
            MetricType::Counter,
        )?;
        for (labels, v) in &dead {
            ConstCounter::new(*v).encode(m.encode_family(labels)?)?;
        }
        gauge(
            &mut d,
            "paused_all",
            "1 while every Config is paused",
            &[(Vec::new(), i64::from(s.paused_all))],
        )?;
        let mut saturated = Vec::new();
        let mut m = d.encode_descriptor(
            "rate_limit_waits",
            "Compute calls that found their project's bucket empty (they waited or were sent back), across every process",
            None,
            MetricType::Counter,
        )?;
        for b in &s.rate_limits {
            let labels = l(&[("project", &b.project), ("class", &b.class)]);
            ConstCounter::new(b.waits).encode(m.encode_family(&labels)?)?;
            saturated.push((labels, i64::from(b.saturated)));
        }
        let mut m = d.encode_descriptor(
            "rate_limit_rate",
            "Compute calls per second a project's bucket allows now (halved after rateLimitExceeded, growing back)",
            None,
            MetricType::Gauge,
        )?;
        for b in &s.rate_limits {
            let labels = l(&[("project", &b.project), ("class", &b.class)]);
            ConstGauge::new(b.rate).encode(m.encode_family(&labels)?)?;
        }
        gauge(
            &mut d,
            "rate_limit_saturated",
            "1 while calls found the bucket empty within the last minute",
            &saturated,
        )?;
        let mut depth = Vec::new();
        for (q, c) in &s.queues {
            for (state, v) in
                [("pending", c.pending), ("delayed", c.delayed), ("running", c.running), ("dead", c.dead)]
            {
                depth.push((l(&[("queue", q), ("state", state)]), v as i64));
            }
        }
        gauge(&mut d, "queue_tasks", "Tasks per queue by state, across every process", &depth)?;
        let mut m = d.encode_descriptor(
            "queue_events",
            "Queue events across every process: pushed, done, failed (to the dead set), retried, expired (leases)",
            None,
            MetricType::Counter,
        )?;
        for (q, c) in &s.queues {
            for (event, v) in [
                ("pushed", c.pushed),
                ("done", c.done),
                ("failed", c.failed),
                ("retried", c.retried),
                ("expired", c.expired),
            ] {
                ConstCounter::new(v).encode(m.encode_family(&l(&[("queue", q), ("event", event)]))?)?;
            }
        }
        spend::encode(&mut d, &s.costs)
    }
}

/// The shared state now; what cannot be read is left out (and logged), never fatal.
pub(super) async fn read(ctx: &Ctx) -> Shared {
    let grace = ctx.settings.timing.config_delete_grace.chrono();
    // Live counts: the store's per-Config sums, O(1) per Config.
    let report = gce_backend_jobs::fleet::status::report(
        &*ctx.ports.store,
        &*ctx.ports.buckets,
        &[],
        ctx.now(),
        grace,
        true,
        &ctx.settings.trust,
    )
    .await;
    let (configs, paused_all, rate_limits) = match report {
        Ok(r) => (r.configs, r.paused.is_some(), r.rate_limits),
        Err(e) => {
            tracing::warn!(error = %e, "metrics: cannot read the Configs' status");
            (Vec::new(), false, Vec::new())
        }
    };
    let mut queues = Vec::new();
    for name in gce_backend_jobs::tasks::QUEUES {
        match ctx.queues.get(name).counts().await {
            Ok(c) => queues.push(((*name).to_owned(), c)),
            Err(e) => tracing::warn!(queue = name, error = %e, "metrics: cannot read the queue's counts"),
        }
    }
    let costs = spend::read(ctx).await.unwrap_or_else(|e| {
        tracing::warn!(error = %e, "metrics: cannot read the Configs' spend");
        spend::Costs::default()
    });
    Shared { configs, rate_limits, queues, paused_all, costs }
}

#[cfg(test)]
mod tests;
