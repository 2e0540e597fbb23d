//! What every handler shares: [`Api`], the state the router hands them (the service's context,
//! the API's URLs, its tokens, `/metrics`, the listener's `[http]` settings and rates, and the
//! summary of refused registrations).

use std::sync::Arc;

use gce_backend_jobs::Ctx;

use super::auth::LiveTokens;
use super::listen;
use super::summary;
use super::urls::{SERVICE, Urls, VERSION};
use crate::metrics::Metrics;
use crate::settings::Http;

/// What handlers share.
#[derive(Clone)]
pub struct Api {
    /// The service's context (store, queues, clock, settings).
    pub ctx: Ctx,
    /// Where the API says it lives.
    pub urls: Urls,
    /// The tokens it accepts (the router's role checks read them).
    pub(super) tokens: LiveTokens,
    /// `/metrics`: this process's, and the shared state read from the store.
    pub metrics: Arc<Metrics>,
    /// What its listener allows a client (`[http]`), and the rates it enforces.
    pub(super) http: Http,
    /// The rates themselves (the router's `limit` layer enforces them).
    pub(super) throttle: Arc<listen::Throttle>,
    /// Registrations refused, logged by reason once a minute.
    pub(super) refusals: Arc<summary::Summary>,
}

impl Api {
    /// The API over `ctx`, stating URLs under `root`, accepting `tokens` (a fixed set, or
    /// [`LiveTokens`] that a reload swaps).
    pub fn new(ctx: Ctx, root: &str, tokens: impl Into<LiveTokens>) -> Self {
        let metrics = Arc::new(Metrics::new(ctx.clone(), true));
        let tokens = tokens.into();
        let http = Http::default();
        let throttle = Arc::new(Self::throttle(&http, &ctx, &tokens, &metrics));
        let refusals = summary::Summary::new("registration refused");
        Api { ctx, urls: Urls::new(root), tokens, metrics, http, throttle, refusals }
    }

    /// The same API with the `[http]` settings `http` (the default ones otherwise).
    pub fn with_http(mut self, http: &Http) -> Self {
        self.throttle = Arc::new(Self::throttle(http, &self.ctx, &self.tokens, &self.metrics));
        self.http = http.clone();
        self
    }

    /// The API listener's rates: a bucket per valid token of `tokens`, on the context's clock.
    fn throttle(http: &Http, ctx: &Ctx, tokens: &LiveTokens, metrics: &Metrics) -> listen::Throttle {
        let register = format!("/api/{SERVICE}/{VERSION}/register");
        let (tokens, clock) = (Some(tokens.clone()), ctx.ports.clock.clone());
        listen::Throttle::new("api", http, Some(register), tokens, clock, metrics.throttled())
    }
}
