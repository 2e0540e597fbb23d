//! The dashboard: a page of plain HTML, JavaScript and CSS embedded in the binary (no build
//! step), served at `ROOT/ui/` without a token (the page asks for one and calls the API with it),
//! and the API's `whoami` method, which tells the page what the caller may do.

use axum::Extension;
use axum::Router;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;

use super::auth::Caller;
use super::io::{Out, ok};
use super::state::Api;
use super::types::WhoAmI;

/// The page.
const INDEX: &str = include_str!("ui/index.html");
/// Its script: routing, polling, sign-in and actions.
const APP: &str = include_str!("ui/app.js");
/// The script's views (the Configs, one Config, the queues), loaded before it.
const VIEWS: &str = include_str!("ui/views.js");
/// The script's helpers (API calls, formatting, DOM updates).
const LIB: &str = include_str!("ui/lib.js");
/// The search box over the Configs and VMs.
const FILTER: &str = include_str!("ui/filter.js");
/// The charts: sparklines of the last hour.
const CHARTS: &str = include_str!("ui/charts.js");
/// The costs: each Config's, and the spend chart per tenant, from the API's `spend`.
const SPEND: &str = include_str!("ui/spend.js");
/// The controls: pause, resume, amount, recycle.
const CONTROLS: &str = include_str!("ui/controls.js");
/// Its style.
const STYLE: &str = include_str!("ui/style.css");

/// What the page may load and call: itself and the API (same origin), nothing else.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
                   connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// One embedded file with its content type, never cached stale (`no-cache`: revalidated each
/// time, so a new binary's page is picked up at once).
fn asset(content_type: &'static str, body: &'static str) -> Response {
    let mut res = body.into_response();
    let h = res.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    h.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
    h.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    res
}

/// The dashboard's routes: `/` and `/ui` lead to `/ui/`, which serves the page and its files.
/// Relative redirects keep working behind a proxy that serves the root URL under a path.
pub(super) fn routes() -> Router<Api> {
    Router::new()
        .route("/", get(|| async { Redirect::to("ui/") }))
        .route("/ui", get(|| async { Redirect::to("ui/") }))
        .route("/ui/", get(|| async { asset("text/html; charset=utf-8", INDEX) }))
        .route("/ui/index.html", get(|| async { asset("text/html; charset=utf-8", INDEX) }))
        .route("/ui/app.js", get(|| async { asset("text/javascript; charset=utf-8", APP) }))
        .route("/ui/views.js", get(|| async { asset("text/javascript; charset=utf-8", VIEWS) }))
        .route("/ui/lib.js", get(|| async { asset("text/javascript; charset=utf-8", LIB) }))
        .route("/ui/filter.js", get(|| async { asset("text/javascript; charset=utf-8", FILTER) }))
        .route("/ui/charts.js", get(|| async { asset("text/javascript; charset=utf-8", CHARTS) }))
        .route("/ui/spend.js", get(|| async { asset("text/javascript; charset=utf-8", SPEND) }))
        .route("/ui/controls.js", get(|| async { asset("text/javascript; charset=utf-8", CONTROLS) }))
        .route("/ui/style.css", get(|| async { asset("text/css; charset=utf-8", STYLE) }))
}

/// `whoami`: the caller's token name, role and groups, and what the role lets it do.
pub(super) async fn whoami(Extension(caller): Extension<Caller>) -> Out<WhoAmI> {
    let may = caller.role.into();
    ok(WhoAmI { name: caller.name, role: caller.role, groups: caller.groups, may })
}

#[cfg(test)]
mod tests;
