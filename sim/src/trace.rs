//! Task traces: JSON lines `{"at_s": 12.5, "duration_s": 300, "dimensions": {"pool": "ci"}}`
//! (arrival seconds from the trace's start), their parser, and a pure, seeded generator of
//! realistic load: a diurnal rate (a busy day, a quiet night; the day may be compressed), bursts (a CI push: tens of tasks
//! within seconds), and durations drawn from a skewed (log-normal) distribution.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};

use crate::dims::{self, Dims};

/// One task of a trace.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceTask {
    /// Arrival, seconds from the trace's start.
    pub at_s: f64,
    /// How long it runs, seconds.
    pub duration_s: f64,
    /// What a bot must have.
    pub dimensions: Dims,
}

impl TraceTask {
    /// Its JSON line.
    pub fn json(&self) -> Value {
        json!({"at_s": self.at_s, "duration_s": self.duration_s, "dimensions": self.dimensions})
    }
}

/// Parses a trace: one JSON object a line (blank lines skipped); an error names the line.
pub fn parse(text: &str) -> Result<Vec<TraceTask>, String> {
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let at = |e: String| format!("line {}: {e}", n + 1);
        let v: Value = serde_json::from_str(line).map_err(|e| at(format!("not JSON: {e}")))?;
        let num = |k: &str| v.get(k).and_then(Value::as_f64).filter(|x| x.is_finite());
        let at_s =
            num("at_s").filter(|x| *x >= 0.0).ok_or_else(|| at("at_s: expected seconds >= 0".into()))?;
        let duration_s = num("duration_s")
            .filter(|x| *x > 0.0)
            .ok_or_else(|| at("duration_s: expected seconds > 0".into()))?;
        let d = v.get("dimensions").ok_or_else(|| at("dimensions: missing".into()))?;
        let dimensions = dims::parse(d, "dimensions").map_err(at)?;
        out.push(TraceTask { at_s, duration_s, dimensions });
    }
    Ok(out)
}

/// What to generate.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceParams {
    /// Seed: same parameters, same trace.
    pub seed: u64,
    /// Length, hours (the trace starts at midnight).
    pub hours: f64,
    /// Length of the trace's day, hours: 24 for a real day; less compresses the diurnal cycle
    /// (busy afternoon, quiet night) into that many hours, durations and bursts unchanged.
    pub day_hours: f64,
    /// Tasks, about.
    pub tasks: usize,
    /// Dimensions of every task.
    pub dimensions: Dims,
}

/// Share of tasks that come in bursts.
const BURST_SHARE: f64 = 0.3;
/// Tasks per burst: from, to.
const BURST_SIZE: (usize, usize) = (10, 60);
/// A burst's tasks arrive within this many seconds.
const BURST_SPREAD_S: f64 = 5.0;
/// Durations: median and the log-normal sigma; bounds.
const DURATION_MEDIAN_S: f64 = 120.0;
const DURATION_SIGMA: f64 = 1.0;
const DURATION_BOUNDS_S: (f64, f64) = (5.0, 4.0 * 3600.0);

/// The relative arrival rate at `t_s` seconds after midnight: 1 at 14:00, 0.1 at 02:00.
pub fn diurnal(t_s: f64) -> f64 {
    diurnal_in(t_s, 24.0)
}

/// The same over a day of `day_hours`: the hour of a 24-hour day is `t_s` scaled by
/// `24 / day_hours` (a day of 2 hours peaks at 70 minutes); a day not above 0 is a real one.
pub fn diurnal_in(t_s: f64, day_hours: f64) -> f64 {
    let scale = if day_hours > 0.0 && day_hours.is_finite() { 24.0 / day_hours } else { 1.0 };
    let h = (t_s * scale / 3600.0).rem_euclid(24.0);
    0.1 + 0.9 * (0.5 - 0.5 * (std::f64::consts::TAU * (h - 2.0) / 24.0).cos())
}

/// A trace of about `p.tasks` tasks over `p.hours`, sorted by arrival.
pub fn generate(p: &TraceParams) -> Vec<TraceTask> {
    let mut rng = StdRng::seed_from_u64(p.seed);
    let span = (p.hours * 3600.0).max(1.0);
    // An arrival time drawn with the diurnal rate (by thinning).
    let arrival = |rng: &mut StdRng| loop {
        let t = rng.random::<f64>() * span;
        if rng.random::<f64>() < diurnal_in(t, p.day_hours) {
            return t;
        }
    };
    let duration = |rng: &mut StdRng| {
        // Box–Muller: a standard normal from two uniforms.
        let (u1, u2) = (rng.random::<f64>().max(f64::MIN_POSITIVE), rng.random::<f64>());
        let z = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
        let d = DURATION_MEDIAN_S * (DURATION_SIGMA * z).exp();
        (d.clamp(DURATION_BOUNDS_S.0, DURATION_BOUNDS_S.1) * 10.0).round() / 10.0
    };
    let mut times = Vec::with_capacity(p.tasks);
    let bursty = (p.tasks as f64 * BURST_SHARE) as usize;
    while times.len() < bursty {
        let start = arrival(&mut rng);
        let size = rng.random_range(BURST_SIZE.0..=BURST_SIZE.1).min(bursty - times.len());
        for _ in 0..size {
            times.push((start + rng.random::<f64>() * BURST_SPREAD_S).min(span));
        }
    }
    while times.len() < p.tasks {
        times.push(arrival(&mut rng));
    }
    times.sort_by(f64::total_cmp);
    times
        .into_iter()
        .map(|t| TraceTask {
            at_s: (t * 1000.0).round() / 1000.0,
            duration_s: duration(&mut rng),
            dimensions: p.dimensions.clone(),
        })
        .collect()
}

/// `key=value,key=value` (a value may hold `a|b`) as dimensions.
pub fn parse_dimensions(s: &str) -> Result<Dims, String> {
    let mut m = serde_json::Map::new();
    for kv in s.split(',').filter(|x| !x.is_empty()) {
        let (k, v) = kv.split_once('=').ok_or_else(|| format!("{kv:?}: expected key=value"))?;
        m.insert(k.to_owned(), json!(v));
    }
    dims::parse(&Value::Object(m), "dimensions")
}
