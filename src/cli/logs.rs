//! The JSON log line (`--log-format json`): one flat object per line, in the shape log pipelines
//! read (Cloud Logging among them): `time` (RFC 3339, UTC), `severity` (DEBUG, INFO, WARNING,
//! ERROR), `message`, `target`, `span` (the innermost span's name), then the fields of the
//! enclosing spans (outermost first, an inner one's value winning) and the event's own fields.

use std::fmt;

use serde_json::{Map, Value};
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::time::{FormatTime, SystemTime};
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields, FormattedFields};
use tracing_subscriber::registry::LookupSpan;

/// The keys every line has; a field of the same name is written as `field_<name>`.
const RESERVED: [&str; 5] = ["time", "severity", "message", "target", "span"];

/// Cloud Logging's name for `level` (TRACE is DEBUG there).
pub(crate) fn severity(level: &Level) -> &'static str {
    match *level {
        Level::ERROR => "ERROR",
        Level::WARN => "WARNING",
        Level::INFO => "INFO",
        Level::DEBUG | Level::TRACE => "DEBUG",
    }
}

/// Formats each event as one flat JSON object. Span fields must be recorded as JSON
/// (`.fmt_fields(JsonFields::new())`), which this reads back.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct FlatJson;

impl<S, N> FormatEvent<S, N> for FlatJson
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let meta = event.metadata();
        let mut time = String::new();
        SystemTime.format_time(&mut Writer::new(&mut time))?;
        let mut fields = Map::new();
        let mut span = None;
        if let Some(scope) = ctx.event_scope() {
            for s in scope.from_root() {
                span = Some(s.name());
                let ext = s.extensions();
                let Some(f) = ext.get::<FormattedFields<N>>() else { continue };
                if let Ok(Value::Object(m)) = serde_json::from_str::<Value>(&f.fields) {
                    fields.extend(m);
                }
            }
        }
        event.record(&mut Fields(&mut fields));
        let message = fields.remove("message").unwrap_or(Value::String(String::new()));
        let head = Head { time, severity: severity(meta.level()), message, target: meta.target(), span };
        let line = flat(&head, fields).map_err(|_| fmt::Error)?;
        writeln!(writer, "{}", String::from_utf8_lossy(&line))
    }
}

/// The keys every line starts with, in order (`span` only inside one).
struct Head<'a> {
    time: String,
    severity: &'static str,
    message: Value,
    target: &'a str,
    span: Option<&'a str>,
}

/// One line's JSON object: `head`'s keys in order, then `fields` (a reserved name written as
/// `field_<name>`).
fn flat(head: &Head<'_>, fields: Map<String, Value>) -> Result<Vec<u8>, serde_json::Error> {
    use serde::ser::{SerializeMap, Serializer};
    let mut out = Vec::new();
    let mut ser = serde_json::Serializer::new(&mut out);
    let mut map = ser.serialize_map(None)?;
    map.serialize_entry("time", &head.time)?;
    map.serialize_entry("severity", head.severity)?;
    map.serialize_entry("message", &head.message)?;
    map.serialize_entry("target", head.target)?;
    if let Some(span) = head.span {
        map.serialize_entry("span", span)?;
    }
    for (k, v) in &fields {
        if RESERVED.contains(&k.as_str()) {
            map.serialize_entry(&format!("field_{k}"), v)?;
        } else {
            map.serialize_entry(k, v)?;
        }
    }
    map.end()?;
    Ok(out)
}

/// Collects an event's fields as JSON values.
struct Fields<'a>(&'a mut Map<String, Value>);

impl Visit for Fields<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.into());
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.0.insert(field.name().to_owned(), value.into());
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.0.insert(field.name().to_owned(), value.into());
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.0.insert(field.name().to_owned(), value.into());
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.0.insert(field.name().to_owned(), value.into());
    }
    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.0.insert(field.name().to_owned(), value.to_string().into());
    }
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}").into());
    }
}

#[cfg(test)]
mod tests;
