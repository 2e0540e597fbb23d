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
        let mut line = Map::new();
        line.insert("time".into(), Value::String(time));
        line.insert("severity".into(), severity(meta.level()).into());
        line.insert("message".into(), message);
        line.insert("target".into(), meta.target().into());
        if let Some(span) = span {
            line.insert("span".into(), span.into());
        }
        let head = serde_json::to_string(&Value::Object(line)).map_err(|_| fmt::Error)?;
        let mut out = head.strip_suffix('}').unwrap_or(&head).to_owned();
        for (k, v) in fields {
            let key = if RESERVED.contains(&k.as_str()) { format!("field_{k}") } else { k };
            let (k, v) = (serde_json::to_string(&key), serde_json::to_string(&v));
            out.push(',');
            out.push_str(&k.map_err(|_| fmt::Error)?);
            out.push(':');
            out.push_str(&v.map_err(|_| fmt::Error)?);
        }
        writeln!(writer, "{out}}}")
    }
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
