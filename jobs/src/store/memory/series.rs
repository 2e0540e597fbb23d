//! The in-memory store's time series: per series, its samples by minute, the newest kept.

use super::State;
use crate::model::{Sample, Series};

impl State {
    /// Records `sample` (replacing one of the same minute) and keeps the newest `keep`.
    pub(super) fn put_sample(&mut self, series: &Series, sample: &Sample, keep: usize) {
        let list = self.series.entry(series.key()).or_default();
        list.insert(sample.at, sample.clone());
        while list.len() > keep {
            list.pop_first();
        }
    }

    /// The samples of `series`, oldest first.
    pub(super) fn samples(&self, series: &Series) -> Vec<Sample> {
        self.series.get(&series.key()).map(|l| l.values().cloned().collect()).unwrap_or_default()
    }
}
