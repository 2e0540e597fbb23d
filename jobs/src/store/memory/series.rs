//! The in-memory store's time series: per series, its samples by minute, the newest kept.

use super::state::State;
use crate::model::{KEEP_SAMPLES, Sample, Series};

impl State {
    /// Records `sample` (replacing one of the same minute) and keeps the newest [`KEEP_SAMPLES`].
    pub(super) fn put_sample(&mut self, series: &Series, sample: &Sample) {
        let list = self.series.entry(series.key()).or_default();
        list.insert(sample.at, sample.clone());
        while list.len() > KEEP_SAMPLES {
            list.pop_first();
        }
    }

    /// The samples of `series`, oldest first.
    pub(super) fn samples(&self, series: &Series) -> Vec<Sample> {
        self.series.get(&series.key()).map(|l| l.values().cloned().collect()).unwrap_or_default()
    }
}
