//! Fields another build wrote that this one does not know: kept as read and written back whole.
//!
//! Builds one release apart share the store during a rolling upgrade and after a rollback. Every
//! stored struct carries an [`Unknown`] (`#[serde(flatten)]`): what a newer build added is read
//! into it, left alone and written again with the record, so an older build neither refuses the
//! record nor drops what the newer one stored. What a person types is read [`strictly`]: there an
//! unknown field is an error naming it (a typo in a file or an API body is a mistake, not a
//! field from the future).
//!
//! A test build (debug assertions, or feature `future-fields`) started with
//! `GCE_BACKEND_FUTURE_FIELDS=1` plays the newer build: [`stored`] encodings (records and
//! payloads on their way to the store or a queue) carry [`FUTURE_FIELD`] in every struct.

use std::cell::Cell;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

/// The field a test build started with `GCE_BACKEND_FUTURE_FIELDS=1` adds to every struct it
/// stores, as the next build would add one.
pub const FUTURE_FIELD: &str = "future_field";

/// The environment variable that turns the future field on in a test build.
pub const FUTURE_FIELDS_ENV: &str = "GCE_BACKEND_FUTURE_FIELDS";

thread_local! {
    static STRICT: Cell<bool> = const { Cell::new(false) };
    static STORING: Cell<bool> = const { Cell::new(false) };
}

static FUTURE: AtomicBool = AtomicBool::new(false);

/// Fields of a stored struct this build does not know, in the order of their names.
///
/// Two values that differ only in fields this build does not know are equal as far as it can
/// tell: `PartialEq` holds always, so a record another build wrote compares equal to the one a
/// Config asks for (no rolling update, no rewrite for what this build cannot judge).
#[derive(Debug, Clone, Default)]
pub struct Unknown(BTreeMap<String, Value>);

impl Unknown {
    /// True when the record held no field this build does not know.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// One unknown field, by name.
    pub fn get(&self, name: &str) -> Option<&Value> {
        self.0.get(name)
    }

    /// Takes the unknown field `name` out (a field an older build wrote that this one reads
    /// under another name).
    pub fn remove(&mut self, name: &str) -> Option<Value> {
        self.0.remove(name)
    }
}

impl PartialEq for Unknown {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for Unknown {}

impl Serialize for Unknown {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if future_on() && STORING.with(Cell::get) && !self.0.contains_key(FUTURE_FIELD) {
            let mut with = self.0.clone();
            with.insert(FUTURE_FIELD.to_owned(), future_value());
            return with.serialize(s);
        }
        self.0.serialize(s)
    }
}

impl<'de> Deserialize<'de> for Unknown {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let fields = BTreeMap::<String, Value>::deserialize(d)?;
        if STRICT.with(Cell::get)
            && let Some(name) = fields.keys().next()
        {
            return Err(serde::de::Error::custom(format!("unknown field `{name}`")));
        }
        Ok(Unknown(fields))
    }
}

impl schemars::JsonSchema for Unknown {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Unknown".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({ "type": "object" })
    }
}

/// The name an unknown-field error of [`strictly`] gives (`unknown field `x``), if `message` is
/// one: `config::mistakes` names its path with it.
pub fn unknown_field_named(message: &str) -> Option<&str> {
    let rest = message.strip_prefix("unknown field `")?;
    rest.split_once('`').map(|(name, _)| name)
}

/// Sets a thread-local flag to `on` for the length of `f`, putting back what it was.
fn with_flag<T>(flag: &'static std::thread::LocalKey<Cell<bool>>, on: bool, f: impl FnOnce() -> T) -> T {
    struct Restore(&'static std::thread::LocalKey<Cell<bool>>, bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            self.0.with(|c| c.set(self.1));
        }
    }
    let _restore = Restore(flag, flag.with(|c| c.replace(on)));
    f()
}

/// Runs `f`, a decode of what a person typed (a file, an API body), with unknown fields refused
/// at every level: `unknown field `amout``.
pub fn strictly<T>(f: impl FnOnce() -> T) -> T {
    with_flag(&STRICT, true, f)
}

/// Runs `f`, the encoding of a record or payload on its way to the store or a queue (where a
/// test build adds [`FUTURE_FIELD`]).
pub fn stored<T>(f: impl FnOnce() -> T) -> T {
    with_flag(&STORING, true, f)
}

/// True when `v` is its type's default and holds no unknown field at any level: the
/// `skip_serializing_if` of a stored struct field, which must not drop what another build
/// stored in it (`PartialEq` cannot tell: unknown fields compare equal).
pub fn is_default<T: Default + Serialize>(v: &T) -> bool {
    let plain = |v: &T| with_flag(&STORING, false, || serde_json::to_value(v).ok());
    plain(v) == plain(&T::default())
}

/// A payload as it goes onto a queue: itself, plus [`FUTURE_FIELD`] at its top when a test build
/// plays the newer build (payloads are flat: ids only).
#[derive(Debug)]
pub struct Wire<'a, T>(pub &'a T);

impl<T: Serialize> Serialize for Wire<'_, T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if !future_on() {
            return self.0.serialize(s);
        }
        let mut v = serde_json::to_value(self.0).map_err(serde::ser::Error::custom)?;
        if let Value::Object(m) = &mut v {
            m.entry(FUTURE_FIELD).or_insert_with(future_value);
        }
        v.serialize(s)
    }
}

/// What [`FUTURE_FIELD`] holds: nested, so a build that keeps only flat values is caught.
fn future_value() -> Value {
    serde_json::json!({ "added_by": "a newer build", "nested": { "kept": true, "n": 1 } })
}

/// Whether this process plays the newer build.
fn future_on() -> bool {
    FUTURE.load(Ordering::Relaxed)
}

/// Turns the future field on or off for the whole process (tests, and [`future_from_env`]).
/// Honoured only by test builds; a release build never writes it.
pub fn set_future(on: bool) {
    if cfg!(any(debug_assertions, feature = "future-fields")) {
        FUTURE.store(on, Ordering::Relaxed);
    }
}

/// Reads [`FUTURE_FIELDS_ENV`] once at start: `1` turns the future field on in a test build.
pub fn future_from_env() {
    if std::env::var(FUTURE_FIELDS_ENV).is_ok_and(|v| v == "1") {
        set_future(true);
    }
}

#[cfg(test)]
mod tests;
