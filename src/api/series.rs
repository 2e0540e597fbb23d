//! The dashboard's charts: a Config's last hour (`configSeries`) and every queue's
//! (`queueSeries`), from the samples `sample_series` keeps in the Store, one a minute; a
//! queue's counters become what happened between two samples.

use axum::Extension;
use axum::extract::{Path, State};
use gce_backend_jobs::cron::sample_series::{config as cfg_value, queue as queue_value};
use gce_backend_jobs::model::{Sample, Series};
use gce_backend_jobs::tasks::QUEUES;

use super::auth::Caller;
use super::configs::readable;
use super::error::ApiError;
use super::io::{Out, ok};
use super::state::Api;
use super::types::{ConfigPoint, ConfigSeries, QueuePoint, QueueSeries, QueueSeriesList};

/// The samples of `series` of the last hour, oldest first.
async fn last_hour(api: &Api, series: &Series) -> Result<Vec<Sample>, ApiError> {
    let since = api.ctx.now() - chrono::Duration::hours(1);
    let all = api.ctx.ports.store.samples(series).await?;
    Ok(all.into_iter().filter(|s| s.at > since).collect())
}

/// `configSeries`.
pub(super) async fn config(
    State(api): State<Api>,
    Extension(caller): Extension<Caller>,
    Path(prefix): Path<String>,
) -> Out<ConfigSeries> {
    readable(&api, &caller, &prefix).await?;
    let points = last_hour(&api, &Series::Config(prefix.clone()))
        .await?
        .into_iter()
        .map(|s| ConfigPoint {
            at: s.at,
            created: s.get(cfg_value::CREATED),
            connected: s.get(cfg_value::CONNECTED),
            amount: s.get(cfg_value::AMOUNT),
        })
        .collect();
    ok(ConfigSeries { prefix, points })
}

/// A queue's points: each but the first sample, with its counters' growth since the one
/// before (none when a counter went back: the queue's counters were reset).
fn queue_points(samples: &[Sample]) -> Vec<QueuePoint> {
    samples
        .windows(2)
        .map(|w| {
            let grew = |k: &str| w[1].get(k).saturating_sub(w[0].get(k));
            QueuePoint {
                at: w[1].at,
                retries: grew(queue_value::RETRIED),
                failures: grew(queue_value::FAILED),
                waiting: w[1].get(queue_value::WAITING),
            }
        })
        .collect()
}

/// `queueSeries`.
pub(super) async fn queues(State(api): State<Api>) -> Out<QueueSeriesList> {
    let mut queues = Vec::with_capacity(QUEUES.len());
    for name in QUEUES {
        let samples = last_hour(&api, &Series::Queue((*name).to_owned())).await?;
        queues.push(QueueSeries { name: (*name).to_owned(), points: queue_points(&samples) });
    }
    ok(QueueSeriesList { queues })
}

#[cfg(test)]
mod tests;
