//! Google authentication as the simulator plays it with `--require-auth`: its metadata server
//! (the header it insists on, the scopes a token carries), its OAuth token endpoint for a key
//! file's assertion, and Compute and Swarming refusing a missing, foreign, expired or
//! under-scoped token as Google and LUCI do — also a self-signed JWT from the official auth
//! library, which Compute takes and Swarming does not.

use gce_backend_sim::SimConfig;
use gce_backend_sim::auth::{AuthSettings, CLOUD_PLATFORM, USERINFO_EMAIL};
use serde_json::{Value, json};

use crate::support::{SimHandle, quick, start};

async fn sim() -> SimHandle {
    let auth = AuthSettings { require_auth: true, token_ttl_s: 60, ..AuthSettings::default() };
    start(SimConfig { auth, ..quick() }).await
}

/// A metadata-server token with `scopes` (none: the default).
async fn mds_token(s: &SimHandle, scopes: Option<&str>) -> (u16, Value) {
    let mut req = s
        .http
        .get(format!("{}/computeMetadata/v1/instance/service-accounts/default/token", s.base))
        .header("Metadata-Flavor", "Google");
    if let Some(sc) = scopes {
        req = req.query(&[("scopes", sc)]);
    }
    let r = req.send().await.unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

/// `compute.zones.list` of `my-proj` with `authorization`: the status and the body.
async fn zones(s: &SimHandle, authorization: Option<&str>) -> (u16, Value) {
    let mut req = s.http.get(format!("{}/compute/v1/projects/my-proj/zones", s.base));
    if let Some(a) = authorization {
        req = req.header("authorization", a);
    }
    let r = req.send().await.unwrap();
    (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
}

/// ListBots on `swarm.example.com` with `authorization`: HTTP status, gRPC code, body.
async fn list_bots(s: &SimHandle, authorization: Option<&str>) -> (u16, String, String) {
    let mut req = s
        .http
        .post(format!("{}/swarming/swarm.example.com/prpc/swarming.v2.Bots/ListBots", s.base))
        .header("content-type", "application/json")
        .body("{}");
    if let Some(a) = authorization {
        req = req.header("authorization", a);
    }
    let r = req.send().await.unwrap();
    let code =
        r.headers().get("x-prpc-grpc-code").map(|v| v.to_str().unwrap().to_owned()).unwrap_or_default();
    (r.status().as_u16(), code, r.text().await.unwrap())
}

#[tokio::test]
async fn the_metadata_server_insists_on_its_header_and_gives_the_scopes_asked_for() {
    let s = sim().await;
    let bare = s
        .http
        .get(format!("{}/computeMetadata/v1/instance/service-accounts/default/token", s.base))
        .send()
        .await
        .unwrap();
    assert_eq!(bare.status().as_u16(), 403, "no Metadata-Flavor: Google");
    let (status, t) = mds_token(&s, None).await;
    assert_eq!(status, 200);
    assert_eq!((t["token_type"].as_str(), t["expires_in"].as_u64()), (Some("Bearer"), Some(60)));
    let (_, t2) = mds_token(&s, Some(USERINFO_EMAIL)).await;
    let report = s.admin_get("/sim/auth").await;
    let scopes: Vec<Value> =
        report["tokens"].as_array().unwrap().iter().map(|t| t["scopes"].clone()).collect();
    assert_eq!(scopes, vec![json!([CLOUD_PLATFORM]), json!([USERINFO_EMAIL])], "{report}");
    assert_ne!(t["access_token"], t2["access_token"]);
}

#[tokio::test]
async fn compute_and_swarming_refuse_what_google_and_luci_refuse() {
    let s = sim().await;
    let (_, platform) = mds_token(&s, None).await;
    let (_, email) = mds_token(&s, Some(USERINFO_EMAIL)).await;
    let bearer = |t: &Value| format!("Bearer {}", t["access_token"].as_str().unwrap());

    // Compute: none 401 CREDENTIALS_MISSING, foreign 401, under-scoped 403, current 200.
    let (status, body) = zones(&s, None).await;
    assert_eq!((status, body["error"]["status"].as_str()), (401, Some("UNAUTHENTICATED")), "{body}");
    assert_eq!(body["error"]["details"][0]["reason"], "CREDENTIALS_MISSING");
    assert_eq!(zones(&s, Some("Bearer ya29.forged")).await.0, 401);
    let (status, body) = zones(&s, Some(&bearer(&email))).await;
    assert_eq!(
        (status, body["error"]["details"][0]["reason"].as_str()),
        (403, Some("ACCESS_TOKEN_SCOPE_INSUFFICIENT"))
    );
    assert_eq!(zones(&s, Some(&bearer(&platform))).await.0, 200);

    // Swarming as LUCI: none is the anonymous identity (PERMISSION_DENIED); a token without
    // userinfo.email is UNAUTHENTICATED; one with it is taken.
    let (status, code, _) = list_bots(&s, None).await;
    assert_eq!((status, code.as_str()), (403, "7"));
    let (status, code, text) = list_bots(&s, Some(&bearer(&platform))).await;
    assert_eq!((status, code.as_str()), (401, "16"), "{text}");
    assert!(text.contains("bad access token"), "{text}");
    assert_eq!(list_bots(&s, Some(&bearer(&email))).await.1, "0");

    // An expired token: the clock moved past its hour.
    s.admin_post("/sim/clock", json!({"advance_ms": 61_000})).await;
    let (status, body) = zones(&s, Some(&bearer(&platform))).await;
    assert_eq!(status, 401, "{body}");
    let report = s.admin_get("/sim/auth").await;
    let compute = &report["standings"]["compute"];
    assert_eq!(
        (compute["missing"].as_u64(), compute["invalid"].as_u64(), compute["scope"].as_u64()),
        (Some(1), Some(1), Some(1)),
        "{report}"
    );
    assert_eq!((compute["current"].as_u64(), compute["expired"].as_u64()), (Some(1), Some(1)));
    let server = &report["servers"]["swarm.example.com"];
    assert_eq!((server["with_token"].as_u64(), server["without_token"].as_u64()), (Some(2), Some(1)));
}

#[tokio::test]
async fn a_key_files_assertion_buys_a_token_and_the_librarys_own_jwt_is_not_one_luci_takes() {
    let s = sim().await;
    let key = s.admin_get("/sim/auth/key-file").await;
    assert_eq!(key["token_uri"], format!("{}/oauth2/token", s.base));
    // The official library with the key file signs its own JWT (no token endpoint): Compute
    // takes it, Swarming (tokeninfo-checked) does not.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let headers = |scope: &str| {
        let creds = google_cloud_auth::credentials::service_account::Builder::new(key.clone())
            .with_access_specifier(
                google_cloud_auth::credentials::service_account::AccessSpecifier::from_scopes([scope]),
            )
            .build()
            .unwrap();
        async move {
            match creds.headers(http::Extensions::new()).await.unwrap() {
                google_cloud_auth::credentials::CacheableResource::New { data, .. } => {
                    data["authorization"].to_str().unwrap().to_owned()
                }
                google_cloud_auth::credentials::CacheableResource::NotModified => unreachable!(),
            }
        }
    };
    assert_eq!(zones(&s, Some(&headers(CLOUD_PLATFORM).await)).await.0, 200);
    let (status, code, _) = list_bots(&s, Some(&headers(USERINFO_EMAIL).await)).await;
    assert_eq!((status, code.as_str()), (401, "16"), "a self-signed JWT is no access token to LUCI");

    // The token endpoint refuses a grant it does not know, then a forged assertion.
    let post = |form: Vec<(&'static str, String)>| {
        let (http, url) = (s.http.clone(), key["token_uri"].as_str().unwrap().to_owned());
        async move {
            let r = http.post(url).form(&form).send().await.unwrap();
            (r.status().as_u16(), r.json::<Value>().await.unwrap())
        }
    };
    let (status, body) = post(vec![("grant_type", "client_credentials".into())]).await;
    assert_eq!((status, body["error"].as_str()), (400, Some("unsupported_grant_type")));
    let jwt_bearer = "urn:ietf:params:oauth:grant-type:jwt-bearer".to_owned();
    let forged = "eyJhbGciOiJSUzI1NiJ9.eyJpc3MiOiJ4In0.c2ln".to_owned();
    let (status, body) = post(vec![("grant_type", jwt_bearer), ("assertion", forged)]).await;
    assert_eq!((status, body["error"].as_str()), (400, Some("invalid_grant")), "{body}");
}
