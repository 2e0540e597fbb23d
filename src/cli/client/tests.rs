//! Unit tests of `cli/client.rs`: a root URL with the API's path in it, and what a 401 says.

use super::*;

fn unauthorized() -> CallError {
    CallError::Api {
        status: 401,
        code: "unauthenticated".into(),
        message: "a bearer token is required".into(),
        fields: String::new(),
        request_id: "r1".into(),
    }
}

#[test]
fn a_root_url_with_the_apis_path_is_refused_naming_the_root_to_give() {
    let e = Client::new("http://127.0.0.1:8080/api/gce-backend/v1", None).unwrap_err();
    let CallError::Usage(m) = e else { panic!("a usage error") };
    assert!(m.contains("includes the API's path") && m.contains("\"http://127.0.0.1:8080\""), "{m}");
    assert!(Client::new("http://127.0.0.1:8080/", None).is_ok());
}

#[test]
fn a_401_says_to_set_the_token_or_that_the_one_sent_was_refused() {
    let none = Client::new("http://127.0.0.1:8080", None).unwrap().explain(unauthorized()).to_string();
    assert!(none.starts_with("401 unauthenticated: a bearer token is required; no token was sent"), "{none}");
    assert!(none.contains("GCE_BACKEND_TOKEN") && none.contains("`gce-backend token`"), "{none}");
    let sent =
        Client::new("http://127.0.0.1:8080", Some("t".into())).unwrap().explain(unauthorized()).to_string();
    assert!(sent.contains("the token in GCE_BACKEND_TOKEN was refused"), "{sent}");
    let other = match unauthorized() {
        CallError::Api { code, message, fields, request_id, .. } => {
            CallError::Api { status: 403, code, message, fields, request_id }
        }
        e => e,
    };
    let shown = Client::new("http://127.0.0.1:8080", None).unwrap().explain(other).to_string();
    assert!(!shown.contains("GCE_BACKEND_TOKEN"), "only a 401: {shown}");
}
