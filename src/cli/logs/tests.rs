//! A JSON log line is one flat object with Cloud Logging's keys, its spans' fields and its own.

use std::io::Write;
use std::sync::{Arc, Mutex};

use serde_json::Value;
use tracing_subscriber::fmt::format::JsonFields;

use super::FlatJson;

/// What the subscriber writes.
#[derive(Clone, Default)]
struct Buf(Arc<Mutex<Vec<u8>>>);

impl Write for Buf {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The lines `f` logs, parsed.
fn lines(f: impl FnOnce()) -> Vec<Value> {
    let buf = Buf::default();
    let out = buf.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .event_format(FlatJson)
        .fmt_fields(JsonFields::new())
        .with_writer(move || out.clone())
        .finish();
    tracing::subscriber::with_default(subscriber, f);
    let text = String::from_utf8(buf.0.lock().unwrap().clone()).unwrap();
    text.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}"))).collect()
}

#[test]
fn a_line_has_time_severity_message_and_its_spans_and_own_fields_flat() {
    let got = lines(|| {
        let outer = tracing::error_span!("task", queue = "create_instance", attempt = 2);
        let _o = outer.enter();
        let inner = tracing::info_span!("call", attempt = 3);
        let _i = inner.enter();
        tracing::warn!(vm = "linux-0", ok = false, secs = 1.5, time = "mine", "instance {} created", 1);
    });
    assert_eq!(got.len(), 1);
    let v = &got[0];
    assert_eq!(v["severity"], "WARNING");
    assert_eq!(v["message"], "instance 1 created");
    assert_eq!(v["span"], "call", "the innermost span");
    assert_eq!(v["queue"], "create_instance");
    assert_eq!(v["attempt"], 3, "the inner span's value wins");
    assert_eq!(
        (&v["vm"], &v["ok"], &v["secs"]),
        (&Value::from("linux-0"), &Value::from(false), &Value::from(1.5))
    );
    assert_eq!(v["field_time"], "mine", "a field never hides a key every line has");
    let time = v["time"].as_str().unwrap();
    assert!(chrono::DateTime::parse_from_rfc3339(time).is_ok(), "{time}");
    assert!(v.get("fields").is_none() && v.get("level").is_none(), "{v}");
}

#[test]
fn each_level_has_its_cloud_logging_severity() {
    let got = lines(|| {
        tracing::error!("e");
        tracing::warn!("w");
        tracing::info!("i");
        tracing::debug!("d");
        tracing::trace!("t");
    });
    let severities: Vec<&str> = got.iter().map(|v| v["severity"].as_str().unwrap()).collect();
    assert_eq!(severities, ["ERROR", "WARNING", "INFO", "DEBUG", "DEBUG"]);
    assert!(got.iter().all(|v| v.get("span").is_none()), "no span, no key");
}
