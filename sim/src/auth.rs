//! Google's authentication as the simulator plays it, as facts: its settings (whether Compute and
//! Swarming refuse a call without a current token, how long a token lives), the scopes each API
//! takes, and why a call is refused. The tokens themselves are the world's (`world::accounts`);
//! the metadata server, the OAuth token endpoint and the check on each call are `google.rs`'s.

use serde::{Deserialize, Serialize};

/// `https://www.googleapis.com/auth/cloud-platform`: what Compute Engine takes (or [`COMPUTE`]).
pub const CLOUD_PLATFORM: &str = "https://www.googleapis.com/auth/cloud-platform";
/// `https://www.googleapis.com/auth/compute`: Compute Engine's own scope.
pub const COMPUTE: &str = "https://www.googleapis.com/auth/compute";
/// `https://www.googleapis.com/auth/cloud-billing`: the Cloud Billing API's scope.
pub const CLOUD_BILLING: &str = "https://www.googleapis.com/auth/cloud-billing";
/// `https://www.googleapis.com/auth/cloud-billing.readonly`: the Cloud Billing API's read scope
/// (the Catalog API takes it, [`CLOUD_BILLING`] or [`CLOUD_PLATFORM`]).
pub const CLOUD_BILLING_READONLY: &str = "https://www.googleapis.com/auth/cloud-billing.readonly";
/// `https://www.googleapis.com/auth/userinfo.email`: the one scope LUCI's servers (Swarming)
/// require of an OAuth access token (luci-go `server/auth/oauth.go`, `GoogleOAuth2Method`).
pub const USERINFO_EMAIL: &str = "https://www.googleapis.com/auth/userinfo.email";
/// The service account's email, as its tokens and key file name it.
pub const ACCOUNT_EMAIL: &str = "gce-backend@sim-project.iam.gserviceaccount.com";
/// The scopes of a metadata-server token asked for without `scopes`: those of a VM (or node
/// pool) made with the recommended `cloud-platform` scope only.
pub const DEFAULT_SCOPES: &[&str] = &[CLOUD_PLATFORM];

/// Authentication settings (flags of `gce-backend sim`; `POST /sim/auth` changes them).
#[derive(Debug, Clone, PartialEq, Eq, clap::Args, Serialize, Deserialize)]
pub struct AuthSettings {
    /// Compute Engine and Swarming refuse a call without a current token the simulator issued
    /// (from its metadata server or its OAuth token endpoint) carrying the API's scope, as Google
    /// and LUCI answer: Compute 401 UNAUTHENTICATED (403 for a missing scope), Swarming
    /// UNAUTHENTICATED (code 16) for a bad token and PERMISSION_DENIED (code 7) for none.
    /// Without it every call is taken, with or without a token (they are counted either way).
    #[arg(long)]
    #[serde(default)]
    pub require_auth: bool,
    /// How long a token the simulator issues lives, in seconds (Google's: 3600).
    #[arg(long, default_value_t = 3600, value_parser = clap::value_parser!(u64).range(5..=86_400))]
    #[serde(default = "default_ttl")]
    pub token_ttl_s: u64,
    /// Swarming servers (hosts) that take calls without a token even with `--require-auth` (a
    /// development server listed as `http://`).
    #[arg(long = "anonymous-swarming", value_name = "HOST")]
    #[serde(default)]
    pub anonymous_swarming: Vec<String>,
}

fn default_ttl() -> u64 {
    3600
}

impl Default for AuthSettings {
    fn default() -> Self {
        Self { require_auth: false, token_ttl_s: default_ttl(), anonymous_swarming: Vec::new() }
    }
}

/// The API a call is to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Api {
    /// Compute Engine v1 REST.
    Compute,
    /// Swarming v2 pRPC.
    Swarming,
    /// The Cloud Billing Catalog API (v1 REST).
    Billing,
}

impl Api {
    /// Whether a token with `scopes` may call this API.
    pub fn takes(self, scopes: &[String]) -> bool {
        let has = |s: &str| scopes.iter().any(|x| x == s);
        match self {
            Api::Compute => has(CLOUD_PLATFORM) || has(COMPUTE),
            Api::Swarming => has(USERINFO_EMAIL),
            Api::Billing => has(CLOUD_PLATFORM) || has(CLOUD_BILLING) || has(CLOUD_BILLING_READONLY),
        }
    }
}

/// How a call stood with respect to its token (counted per API).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Standing {
    /// A current token of the simulator's with the API's scope.
    Current,
    /// No `Authorization` header.
    Missing,
    /// A header that is not `Bearer <token>`, or a token the simulator never issued.
    Invalid,
    /// A token of the simulator's that has expired.
    Expired,
    /// A current token without the API's scope.
    Scope,
}
