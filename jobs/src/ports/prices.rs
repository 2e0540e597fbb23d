//! Where Compute Engine's SKUs come from: the Cloud Billing Catalog API
//! (`services/6F81-5844-456A/skus`, every page), as a port; the adapter is the root crate's
//! (`adapters/billing.rs`), and [`FixedPrices`] answers what tests set.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;

use crate::prices::Sku;

/// Why the SKUs could not be listed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PriceError {
    /// The API could not be reached, timed out or failed (5xx, 429): worth trying again later.
    #[error("Cloud Billing Catalog unreachable: {0}")]
    Unreachable(String),
    /// The API refused the credentials (401, 403: no token, a wrong scope, no permission).
    #[error("Cloud Billing Catalog refused the call: {0}")]
    Refused(String),
    /// An answer that is not the API's (it does not decode, a page loops, too many pages).
    #[error("Cloud Billing Catalog answer not understood: {0}")]
    Malformed(String),
}

/// Compute Engine's SKUs.
#[async_trait]
pub trait PriceSource: Send + Sync + std::fmt::Debug {
    /// Every SKU of Compute Engine, all pages read.
    async fn skus(&self) -> Result<Vec<Sku>, PriceError>;
}

/// SKUs (or an error) that change only when told, with the calls counted (tests).
#[derive(Debug)]
pub struct FixedPrices {
    answer: Mutex<Result<Vec<Sku>, PriceError>>,
    calls: AtomicUsize,
}

impl Default for FixedPrices {
    /// The embedded snapshot's SKUs.
    fn default() -> Self {
        let skus = crate::prices::book::PriceBook::snapshot().map(|b| b.skus).unwrap_or_default();
        Self { answer: Mutex::new(Ok(skus)), calls: AtomicUsize::new(0) }
    }
}

impl FixedPrices {
    /// Answers `answer` from now on.
    pub fn set(&self, answer: Result<Vec<Sku>, PriceError>) {
        *self.answer.lock().unwrap_or_else(|e| e.into_inner()) = answer;
    }

    /// How many times it was asked.
    pub fn calls(&self) -> usize {
        self.calls.load(Ordering::Relaxed)
    }
}

#[async_trait]
impl PriceSource for FixedPrices {
    async fn skus(&self) -> Result<Vec<Sku>, PriceError> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        self.answer.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}
