//! Config files the service does not follow as written, as the API lists them: a file not
//! applied (why, since when) and a file gone whose Config's deletion is held.

use serde_json::Value;

use super::cells::{s, short, table, when};

/// Whether a file entry (the API's `FileError`) is a held deletion.
fn held(f: &Value) -> bool {
    f["kind"] == "deletion_held"
}

/// A Config's state with what its file entries add (`active, deletion held`).
pub(super) fn state(e: &Value) -> String {
    let state = s(&e["status"]["state"]);
    match e["files"].as_array().into_iter().flatten().any(held) {
        true => format!("{state}, deletion held"),
        false => state,
    }
}

/// A Config's file entries, a line each, for `configs get`.
pub(super) fn lines(e: &Value) -> String {
    e["files"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|f| match held(f) {
            true => format!("  file gone since {}: {}\n", when(&f["since"]), s(&f["message"])),
            false => format!(
                "  file {} not applied since {}: {}\n",
                s(&f["path"]),
                when(&f["since"]),
                s(&f["message"])
            ),
        })
        .collect()
}

/// The section under `configs list`: every file entry the caller may read, or nothing.
pub(super) fn section(files: &Value) -> String {
    let rows: Vec<Vec<String>> = files
        .as_array()
        .into_iter()
        .flatten()
        .map(|f| {
            let what = if held(f) { "deletion held" } else { "not applied" };
            vec![
                s(&f["path"]),
                s(&f["prefix"]),
                what.to_owned(),
                when(&f["since"]),
                short(&s(&f["message"]), 100),
            ]
        })
        .collect();
    match rows.is_empty() {
        true => String::new(),
        false => format!(
            "\nConfig files not followed ({}):\n{}",
            rows.len(),
            table(&["FILE", "PREFIX", "PROBLEM", "SINCE", "WHY"], rows)
        ),
    }
}
