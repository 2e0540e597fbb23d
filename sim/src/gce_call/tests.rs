//! Unit tests of `gce_call.rs`: the error body of a body the schema refuses.

use serde_json::json;

use super::*;
use crate::schema::check;

#[test]
fn the_error_body_of_an_unknown_field_is_google_s() {
    let r = check(Body::Instance, &json!({"serviceAcounts": []})).unwrap_err();
    let msg =
        "Invalid JSON payload received. Unknown name \"serviceAcounts\" at 'resource': Cannot find field.";
    assert_eq!(
        refusal_body(&r),
        json!({"error": {"code": 400, "message": msg,
            "errors": [{"message": msg, "domain": "global", "reason": "invalid"}],
            "status": "INVALID_ARGUMENT",
            "details": [{"@type": "type.googleapis.com/google.rpc.BadRequest",
                         "fieldViolations": [{"field": "resource", "description": msg}]}]}})
    );
}
