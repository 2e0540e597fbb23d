//! `PriceSource` over the Cloud Billing Catalog API (v1 REST): every page of
//! `GET /v1/services/6F81-5844-456A/skus`, Compute Engine's SKUs in USD, at
//! `https://cloudbilling.googleapis.com` or at the simulator (which serves the same path).
//!
//! With Google credentials each page carries a Bearer token (`google_auth.rs`; the service passes
//! its Compute tokens, whose `cloud-platform` scope covers the Catalog); a token is sent over `https://` only, or to the simulator named as such
//! ([`Billing::simulator`]), never to another `http://` URL. Each page is bounded by a timeout,
//! the pages by a cap, and redirects are never followed.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use gce_backend_jobs::config::check_endpoint;
use gce_backend_jobs::ports::prices::{PriceError, PriceSource};
use gce_backend_jobs::prices::Sku;
use serde::Deserialize;
use serde_json::Value;

use super::google_auth::Tokens;

/// The Cloud Billing Catalog API.
pub const GOOGLE: &str = "https://cloudbilling.googleapis.com";
/// The Catalog's own read-only scope (the narrowest one it takes).
pub const BILLING_READONLY: &str = "https://www.googleapis.com/auth/cloud-billing.readonly";
/// Compute Engine's service id in the Catalog.
const SERVICE: &str = "6F81-5844-456A";
/// SKUs asked per page: the API's default and most.
const PAGE_SIZE: u32 = 5000;
/// Longest one page may take.
const PAGE_TIMEOUT: Duration = Duration::from_secs(60);
/// Most pages read (Compute Engine has some tens of thousands of SKUs: under 20 pages).
const MAX_PAGES: usize = 100;

/// A Cloud Billing Catalog client.
#[derive(Debug, Clone)]
pub struct Billing {
    http: reqwest::Client,
    base: String,
    tokens: Option<Arc<Tokens>>,
    page_size: u32,
    max_pages: usize,
}

/// One page of SKUs; each SKU decoded apart (one this build cannot read is left out).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Page {
    #[serde(default)]
    skus: Vec<Value>,
    #[serde(default)]
    next_page_token: String,
}

impl Billing {
    /// The Catalog at `base` (Google's: [`GOOGLE`]); `tokens` only with an `https://` base.
    pub fn new(base: &str, tokens: Option<Arc<Tokens>>) -> Result<Self, String> {
        if tokens.is_some() && !base.starts_with("https://") {
            return Err(format!("Cloud Billing Catalog at {base:?}: a token is sent over https:// only"));
        }
        Self::simulator(base, tokens)
    }

    /// The simulator's Catalog at `base` (`http://host:port`), tokens sent to it as it is.
    pub fn simulator(base: &str, tokens: Option<Arc<Tokens>>) -> Result<Self, String> {
        check_endpoint("Cloud Billing Catalog endpoint", base)?;
        super::install_crypto();
        let http = reqwest::Client::builder()
            .timeout(PAGE_TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            .gzip(true)
            .build()
            .map_err(|e| format!("http client: {e}"))?;
        let base = base.trim_end_matches('/').to_owned();
        Ok(Self { http, base, tokens, page_size: PAGE_SIZE, max_pages: MAX_PAGES })
    }

    /// The same client asking `size` SKUs a page and reading at most `pages` pages (tests).
    pub fn paged(self, size: u32, pages: usize) -> Self {
        Self { page_size: size, max_pages: pages, ..self }
    }

    /// One page, from `token` (empty: the first).
    async fn page(&self, token: &str) -> Result<Page, PriceError> {
        let url = format!("{}/v1/services/{SERVICE}/skus", self.base);
        let size = self.page_size.to_string();
        let mut query = vec![("pageSize", size.as_str()), ("currencyCode", "USD")];
        if !token.is_empty() {
            query.push(("pageToken", token));
        }
        let mut req = self.http.get(url).query(&query).header("accept", "application/json");
        if let Some(t) = &self.tokens {
            let token = t.token().await.map_err(|e| match e.transient {
                true => PriceError::Unreachable(e.to_string()),
                false => PriceError::Refused(e.to_string()),
            })?;
            req = req.bearer_auth(token);
        }
        let resp = req.send().await.map_err(|e| PriceError::Unreachable(sent(e)))?;
        let status = resp.status().as_u16();
        let text = resp.text().await.map_err(|e| PriceError::Unreachable(sent(e)))?;
        if status != 200 {
            return Err(refused(status, &text));
        }
        serde_json::from_str(&text).map_err(|e| PriceError::Malformed(format!("a page of SKUs: {e}")))
    }
}

/// A failed request in words (a timeout said as one).
fn sent(e: reqwest::Error) -> String {
    match e.is_timeout() {
        true => format!("no answer within {}s", PAGE_TIMEOUT.as_secs()),
        false => e.without_url().to_string(),
    }
}

/// The error of a non-200 answer: its status and Google's `error.status` and `error.message`.
fn refused(status: u16, text: &str) -> PriceError {
    let body: Value = serde_json::from_str(text).unwrap_or_default();
    let said = match (body["error"]["status"].as_str(), body["error"]["message"].as_str()) {
        (Some(s), Some(m)) => format!("{status} {s}: {m}"),
        _ => format!("{status}: {}", text.chars().take(200).collect::<String>()),
    };
    match status {
        401 | 403 => PriceError::Refused(said),
        408 | 429 | 500..=599 => PriceError::Unreachable(said),
        _ => PriceError::Malformed(said),
    }
}

#[async_trait]
impl PriceSource for Billing {
    async fn skus(&self) -> Result<Vec<Sku>, PriceError> {
        let (mut skus, mut token, mut skipped) = (Vec::new(), String::new(), 0usize);
        for _ in 0..self.max_pages {
            let page = self.page(&token).await?;
            for s in page.skus {
                match serde_json::from_value::<Sku>(s) {
                    Ok(s) => skus.push(s),
                    Err(_) => skipped += 1,
                }
            }
            if page.next_page_token.is_empty() {
                if skipped > 0 {
                    tracing::debug!(skipped, "Cloud Billing Catalog: SKUs not understood, left out");
                }
                return Ok(skus);
            }
            if page.next_page_token == token {
                return Err(PriceError::Malformed("a page names itself as the next".into()));
            }
            token = page.next_page_token;
        }
        Err(PriceError::Malformed(format!("more than {} pages of SKUs", self.max_pages)))
    }
}

#[cfg(test)]
mod tests;
