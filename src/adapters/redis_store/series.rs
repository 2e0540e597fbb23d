//! The Redis store's time series: one sorted set per series (`series:<name>`), each sample's
//! JSON scored by its minute (ms); a write replaces the minute's sample and trims the oldest, in
//! one transaction.

use gce_backend_jobs::model::{KEEP_SAMPLES, Sample, Series};
use gce_backend_jobs::ports::store::StoreError;
use redis::AsyncCommands;

use super::RedisStore;
use super::conn::{err, json};
use super::layout::Layout;

impl RedisStore {
    /// Records `sample` in `series` (replacing one of the same minute), keeping the newest `keep`.
    pub(super) async fn write_sample(&self, series: &Series, sample: &Sample) -> Result<(), StoreError> {
        let key = self.series_key(self.writing().await?, series);
        let at = sample.at.timestamp_millis();
        let _: () = redis::pipe()
            .atomic()
            .zrembyscore(&key, at, at)
            .zadd(&key, json(sample)?, at)
            .zremrangebyrank(&key, 0, -(KEEP_SAMPLES as isize) - 1)
            .query_async(&mut self.c())
            .await
            .map_err(err)?;
        Ok(())
    }

    /// The samples of `series`, oldest first; one that does not decode is left out.
    pub(super) async fn read_samples(&self, series: &Series) -> Result<Vec<Sample>, StoreError> {
        let key = self.series_key(self.layout().await?, series);
        let raw: Vec<String> = self.c().zrange(key, 0, -1).await.map_err(err)?;
        Ok(raw.iter().filter_map(|r| serde_json::from_str(r).ok()).collect())
    }

    /// The key of `series` in layout `l` (a Config's under its tag in layout 2).
    pub(super) fn series_key(&self, l: Layout, series: &Series) -> String {
        match series {
            Series::Config(p) => self.owned(l, p, "series:cfg"),
            Series::Queue(_) => self.k(&format!("series:{}", series.key())),
        }
    }
}
