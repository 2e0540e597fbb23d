//! The OpenAPI document as a real validator reads it: `openapi-spec-validator` (the one
//! `scripts/test` installs) over the document the API serves, and a document with a broken
//! reference refused by the same validator, so a pass means something.

use serde_json::{Value, json};

/// The validator: `$GCE_BACKEND_OPENAPI_VALIDATOR`, else `openapi-spec-validator` on the PATH.
fn validator() -> String {
    let name =
        std::env::var("GCE_BACKEND_OPENAPI_VALIDATOR").unwrap_or_else(|_| "openapi-spec-validator".into());
    let found = std::process::Command::new(&name).arg("--version").output().is_ok_and(|o| o.status.success());
    assert!(found, "{name} not found: scripts/test installs it (pip, pinned in scripts/requirements.txt)");
    name
}

/// Runs the validator over `doc`; its exit status and what it printed.
fn validate(doc: &Value) -> (bool, String) {
    let dir = crate::support::temp_dir();
    let file = dir.join("openapi.json");
    std::fs::write(&file, serde_json::to_vec_pretty(doc).unwrap()).unwrap();
    let out = std::process::Command::new(validator()).arg(&file).output().unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.success(), text)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_served_openapi_document_passes_a_real_validator() {
    let env =
        crate::support::Env::start(crate::support::Backend::Memory, crate::support::sim_config(), &[], false)
            .await;
    let root = super::serve(env.ctx.clone()).await;
    let doc: Value =
        reqwest::get(format!("{root}/api/gce-backend/v1/openapi.json")).await.unwrap().json().await.unwrap();
    let (ok, text) = validate(&doc);
    assert!(ok, "openapi.json: {text}");
    // The same validator refuses a document whose answer points at a schema it lacks.
    let mut broken = doc.clone();
    let op = broken["paths"]["/configs"]["get"].as_object_mut().unwrap();
    op["responses"]["200"]["content"]["application/json"]["schema"] =
        json!({"$ref": "#/components/schemas/Nope"});
    let (ok, text) = validate(&broken);
    assert!(!ok, "a dangling reference passed: {text}");
}
