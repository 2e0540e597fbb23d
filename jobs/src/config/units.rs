//! The units a Config is written in (durations, days, times of day, an amount and its weekly
//! windows) and the error a broken rule gives.

use std::fmt;

use chrono::{DateTime, Datelike, Duration as ChronoDuration, NaiveTime, TimeZone, Utc, Weekday};
use serde::{Deserialize, Deserializer, Serialize};

/// A validation error: the field and the rule it breaks.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {rule}")]
pub struct ConfigError {
    /// Path of the field, e.g. `linux.attributes.disk[0].type`.
    pub field: String,
    /// The rule.
    pub rule: String,
}

/// Every mistake found at once (in a Config file, or a Config), each naming its field (or its
/// file and line) and rule, in the order of the text; never empty.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", show(.0))]
pub struct ConfigErrors(Vec<ConfigError>);

impl ConfigErrors {
    /// `errors`, unless there is none.
    pub fn check(errors: Vec<ConfigError>) -> Result<(), ConfigErrors> {
        match errors.is_empty() {
            true => Ok(()),
            false => Err(ConfigErrors(errors)),
        }
    }

    /// Each mistake.
    pub fn all(&self) -> &[ConfigError] {
        &self.0
    }

    /// Each mistake, owned.
    pub fn into_vec(self) -> Vec<ConfigError> {
        self.0
    }
}

impl From<ConfigError> for ConfigErrors {
    fn from(e: ConfigError) -> Self {
        ConfigErrors(vec![e])
    }
}

/// One mistake as it is; several as a count, then one a line.
fn show(all: &[ConfigError]) -> String {
    match all {
        [one] => one.to_string(),
        _ => {
            let lines: Vec<String> = all.iter().map(|e| format!("  {e}")).collect();
            format!("{} mistakes:\n{}", all.len(), lines.join("\n"))
        }
    }
}

pub(super) fn err(field: impl Into<String>, rule: impl Into<String>) -> ConfigError {
    ConfigError { field: field.into(), rule: rule.into() }
}

/// A duration written `90s`, `15m`, `1h`, `30d`, `2mo` (30 days) or as whole seconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(into = "u64")]
pub struct Secs(pub u64);

impl From<Secs> for u64 {
    fn from(s: Secs) -> u64 {
        s.0
    }
}

impl Secs {
    /// Parses `<n>(s|m|h|d|mo)`; overflow clamps to the largest value.
    pub fn parse(s: &str) -> Result<Self, String> {
        let s = s.trim();
        let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
        let (n, unit) = s.split_at(split);
        let n: u64 =
            n.parse().map_err(|_| format!("{s:?} is not a duration like 90s, 15m, 1h, 30d or 2mo"))?;
        let mult = match unit {
            "s" | "" => 1,
            "m" => 60,
            "h" => 3600,
            "d" => 86_400,
            "mo" => 30 * 86_400,
            _ => return Err(format!("{s:?}: unit must be s, m, h, d or mo")),
        };
        Ok(Secs(n.saturating_mul(mult)))
    }

    /// As a chrono duration, at most [`Secs::LONGEST`] (so that a time plus it never overflows).
    pub fn chrono(self) -> ChronoDuration {
        ChronoDuration::seconds(self.0.min(Self::LONGEST.0) as i64)
    }

    /// The longest duration any arithmetic takes: 1 000 years (a stored record written before
    /// the bounds were checked may hold more).
    pub const LONGEST: Secs = Secs(1_000 * 365 * 86_400);
}

impl<'de> Deserialize<'de> for Secs {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            N(u64),
            S(String),
        }
        match Raw::deserialize(d)? {
            Raw::N(n) => Ok(Secs(n)),
            Raw::S(s) => Secs::parse(&s).map_err(serde::de::Error::custom),
        }
    }
}

impl schemars::JsonSchema for Secs {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Secs".into()
    }

    /// As read: whole seconds, or a string like `90s`, `15m`, `1h`, `30d`, `2mo` (written back as
    /// whole seconds).
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "A duration: whole seconds, or 90s, 15m, 1h, 30d, 2mo (30 days).",
            "anyOf": [
                {"type": "integer", "minimum": 0},
                {"type": "string", "pattern": "^\\s*[0-9]+(s|m|h|d|mo)?\\s*$"}
            ]
        })
    }
}

impl fmt::Display for Secs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}s", self.0)
    }
}

/// Day of the week, as in the proto (`MONDAY` … `SUNDAY`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
#[allow(missing_docs)]
pub enum Day {
    Monday,
    Tuesday,
    Wednesday,
    Thursday,
    Friday,
    Saturday,
    Sunday,
}

impl Day {
    /// Every day, Monday first.
    pub const ALL: [Day; 7] =
        [Day::Monday, Day::Tuesday, Day::Wednesday, Day::Thursday, Day::Friday, Day::Saturday, Day::Sunday];

    /// Its name as the proto (and a Config file) writes it: `MONDAY` … `SUNDAY`.
    pub fn name(self) -> &'static str {
        match self {
            Day::Monday => "MONDAY",
            Day::Tuesday => "TUESDAY",
            Day::Wednesday => "WEDNESDAY",
            Day::Thursday => "THURSDAY",
            Day::Friday => "FRIDAY",
            Day::Saturday => "SATURDAY",
            Day::Sunday => "SUNDAY",
        }
    }

    /// The day of a [`Day::name`].
    pub fn from_name(name: &str) -> Option<Day> {
        Day::ALL.into_iter().find(|d| d.name() == name)
    }

    fn weekday(self) -> Weekday {
        match self {
            Day::Monday => Weekday::Mon,
            Day::Tuesday => Weekday::Tue,
            Day::Wednesday => Weekday::Wed,
            Day::Thursday => Weekday::Thu,
            Day::Friday => Weekday::Fri,
            Day::Saturday => Weekday::Sat,
            Day::Sunday => Weekday::Sun,
        }
    }
}

/// When a weekly schedule starts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct TimeOfDay {
    /// Day of the week.
    pub day: Day,
    /// `H:MM`, 24-hour.
    pub time: String,
    /// IANA time zone; empty means UTC.
    #[serde(default)]
    pub location: String,
    /// Fields a newer build wrote that this one does not know: kept, and written back with it.
    #[serde(flatten)]
    #[schemars(skip)]
    pub unknown: crate::unknown::Unknown,
}

/// A weekly window with its own bounds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct Schedule {
    /// Start of the window.
    pub start: TimeOfDay,
    /// Length of the window (non-zero, at most a week).
    pub length: Secs,
    /// Lower bound while the window is open.
    #[serde(default)]
    pub min: u32,
    /// Upper bound while the window is open.
    #[serde(default)]
    pub max: u32,
    /// Fields a newer build wrote that this one does not know: kept, and written back with it.
    #[serde(flatten)]
    #[schemars(skip)]
    pub unknown: crate::unknown::Unknown,
}

/// How many VMs: bounds and weekly windows.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct Amount {
    /// Lower bound (and the amount of a new pool).
    #[serde(default)]
    pub min: u32,
    /// Upper bound.
    #[serde(default)]
    pub max: u32,
    /// Weekly windows with other bounds; they must not overlap.
    #[serde(default)]
    pub change: Vec<Schedule>,
    /// Fields a newer build wrote that this one does not know: kept, and written back with it.
    #[serde(flatten)]
    #[schemars(skip)]
    pub unknown: crate::unknown::Unknown,
}

impl Schedule {
    pub(super) fn start_time(&self) -> Result<NaiveTime, String> {
        let (h, m) = self.start.time.split_once(':').ok_or("time must be H:MM")?;
        let (h, m): (u32, u32) = (h.parse().map_err(|_| "bad hour")?, m.parse().map_err(|_| "bad minute")?);
        if self.start.time.split_once(':').is_some_and(|(_, m)| m.len() != 2) {
            return Err("time must be H:MM".into());
        }
        NaiveTime::from_hms_opt(h, m, 0).ok_or_else(|| "hour must be 0-23 and minute 0-59".into())
    }

    pub(super) fn tz(&self) -> Result<chrono_tz::Tz, String> {
        if self.start.location.is_empty() {
            return Ok(chrono_tz::UTC);
        }
        self.start.location.parse().map_err(|_| format!("unknown IANA time zone {:?}", self.start.location))
    }

    /// The latest start at or before `now`.
    fn most_recent_start(&self, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let (tz, t) = (self.tz().ok()?, self.start_time().ok()?);
        let local = now.with_timezone(&tz).date_naive();
        (0..=7).find_map(|back| {
            let d = local - ChronoDuration::days(back);
            if d.weekday() != self.start.day.weekday() {
                return None;
            }
            let start = tz.from_local_datetime(&d.and_time(t)).earliest()?.with_timezone(&Utc);
            (start <= now).then_some(start)
        })
    }

    /// Start as minutes into a UTC reference week (Monday 00:00), for the overlap check.
    pub(super) fn week_minute(&self) -> Result<i64, String> {
        let (tz, t) = (self.tz()?, self.start_time()?);
        // A Monday in January: offsets of that week stand for the whole year.
        let monday = chrono::NaiveDate::from_ymd_opt(2024, 1, 1).expect("valid date");
        let day = monday + ChronoDuration::days(self.start.day.weekday().num_days_from_monday() as i64);
        let start = tz.from_local_datetime(&day.and_time(t)).earliest().ok_or("time does not exist")?;
        let utc_monday = Utc.from_utc_datetime(&monday.and_hms_opt(0, 0, 0).expect("valid"));
        Ok((start.with_timezone(&Utc) - utc_monday).num_minutes().rem_euclid(7 * 24 * 60))
    }
}

impl Amount {
    /// The amount for `proposed` at `now`: clamped to the open window's bounds, or to
    /// `[min, max]` outside every window.
    pub fn at(&self, proposed: u32, now: DateTime<Utc>) -> u32 {
        for s in &self.change {
            if let Some(start) = s.most_recent_start(now)
                && start.checked_add_signed(s.length.chrono()).is_some_and(|end| now < end)
            {
                return proposed.clamp(s.min, s.max.max(s.min));
            }
        }
        proposed.clamp(self.min, self.max.max(self.min))
    }

    /// The largest amount any window allows.
    pub fn ceiling(&self) -> u32 {
        self.change.iter().map(|s| s.max).chain([self.max]).max().unwrap_or(0)
    }
}

/// An amount of US dollars (a price per hour, a budget), finite: what the settings give is
/// checked so ([`Usd::check`]).
#[derive(
    Debug, Clone, Copy, Default, PartialEq, PartialOrd, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(transparent)]
pub struct Usd(pub f64);

// Amounts are finite: never NaN.
impl Eq for Usd {}

impl Usd {
    /// Why `self`, given as `field`, is not an amount a person may set: more than zero, finite,
    /// at most a billion dollars.
    pub fn check(self, field: &str) -> Result<Usd, String> {
        if self.0.is_finite() && self.0 > 0.0 && self.0 <= 1e9 {
            Ok(self)
        } else {
            Err(format!("{field}: {} is not an amount of dollars (more than 0, at most 1e9)", self.0))
        }
    }
}

impl fmt::Display for Usd {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0 >= 100.0 {
            write!(f, "${:.0}", self.0)
        } else if self.0 >= 0.1 {
            write!(f, "${:.2}", self.0)
        } else {
            write!(f, "${:.4}", self.0)
        }
    }
}
