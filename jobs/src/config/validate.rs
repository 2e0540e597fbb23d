//! Config validation: every rule of one Config, and the rules across Configs.

use super::names::{bounds, valid_gce_name, valid_project};
use super::names::{days, resource_path, valid_email, valid_label};
use super::policy::*;
use super::spec::*;
use super::units::*;

/// The metadata key the service sets on every instance: the Config's `swarming`.
pub const SWARMING_SERVER_KEY: &str = "swarming-server";

impl Config {
    /// Checks the service's limits (settings `[limits]`).
    pub fn check_limits(&self, limits: &super::settings::Limits) -> Result<(), ConfigError> {
        let ceiling = self.most_vms();
        if ceiling > limits.max_amount {
            let (field, warm) = self.most_vms_field();
            return Err(err(
                format!("{}.{field}", self.prefix),
                format!(
                    "asks for up to {ceiling} VMs{warm}, above the service's max_amount {} (settings [limits])",
                    limits.max_amount
                ),
            ));
        }
        Ok(())
    }

    /// Checks every rule of one Config; the error names the field (the first of
    /// [`Config::problems`]).
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.problems().into_iter().next().map_or(Ok(()), Err)
    }

    /// Every rule of one Config it breaks, each naming its field (empty: valid).
    pub fn problems(&self) -> Vec<ConfigError> {
        let mut out = Vec::new();
        if self.prefix.is_empty() {
            out.push(err("prefix", "is required"));
        } else if !valid_gce_name(&self.prefix) {
            out.push(err(format!("{}.prefix", self.prefix), "must match [a-z]([-a-z0-9]*[a-z0-9])?"));
        }
        let p = if self.prefix.is_empty() { "<unnamed>" } else { &self.prefix };
        let f = |field: &str| format!("{p}.{field}");
        let u = &self.update;
        if u.mode == UpdateMode::Rolling && u.max_surge == 0 && u.max_unavailable == 0 {
            out.push(err(f("update"), "a rolling update needs max_surge or max_unavailable above 0"));
        }
        if self.is_static() {
            super::providers::static_problems(self, &f, &mut out);
        } else {
            self.check_amount(&f, &mut out);
            self.check_attributes(&f, &mut out);
        }
        self.check_ranks(&f, &mut out);
        if let Some(why) =
            (!self.provider.is_empty()).then(|| super::providers::id_problem(&self.provider)).flatten()
        {
            out.push(err(f("provider"), why));
        }
        if self.lifetime.0 == 0 && !self.is_static() {
            out.push(err(f("lifetime"), "is required and must be non-zero"));
        }
        self.check_bounds(&f, &mut out);
        if let Some(d) = &self.demand {
            self.check_demand(d, &f, &mut out);
        }
        if let Some(w) = &self.warm {
            self.check_warm(w, &f, &mut out);
        }
        if let Some(s) = &self.spot_failover {
            self.check_spot_failover(s, &f, &mut out);
        }
        if self.swarming.is_empty() {
            out.push(err(f("swarming"), "is required"));
        } else if let Err(e) = super::trust::Origin::parse(&self.swarming) {
            out.push(err(f("swarming"), e));
        }
        out
    }

    /// Every duration and count within its documented range ([`bounds`]), so no later sum or
    /// conversion can overflow.
    fn check_bounds(&self, f: &dyn Fn(&str) -> String, out: &mut Vec<ConfigError>) {
        let durations = [
            ("lifetime", self.lifetime, bounds::LIFETIME),
            ("timeout", self.timeout, bounds::TIMEOUT),
            ("breaker.within", self.breaker.within, bounds::BREAKER_WAIT),
            ("breaker.canary_after", self.breaker.canary_after, bounds::BREAKER_WAIT),
        ];
        for (field, value, max) in durations {
            if value > max {
                out.push(err(f(field), format!("{value} is above the most allowed, {max} ({})", days(max))));
            }
        }
        let counts = [
            ("breaker.after", self.breaker.after, bounds::BREAKER_AFTER),
            ("update.max_surge", self.update.max_surge, bounds::SURGE),
            ("update.max_unavailable", self.update.max_unavailable, bounds::SURGE),
        ];
        for (field, value, max) in counts {
            if value > max {
                out.push(err(f(field), format!("{value}; at most {max}")));
            }
        }
    }

    /// The rules of a demand-driven pool (`demand`): dimensions Swarming accepts (demand.md
    /// §1.4: key `[a-zA-Z-_.][0-9a-zA-Z-_.]*` of at most 64, value at most 256 bytes), `pool` among
    /// them, one value per key, and an amount that lets it make VMs.
    fn check_demand(&self, d: &Demand, f: &dyn Fn(&str) -> String, out: &mut Vec<ConfigError>) {
        if self.is_static() {
            out.push(err(f("demand"), "a static pool lists its machines: it cannot follow demand"));
            return;
        }
        if !d.dimensions.contains_key("pool") {
            out.push(err(f("demand.dimensions"), "needs `pool`: every Swarming task names its pool"));
        }
        if d.dimensions.len() > MAX_DIMENSIONS {
            out.push(err(
                f("demand.dimensions"),
                format!("{}; at most {MAX_DIMENSIONS}", d.dimensions.len()),
            ));
        }
        let key_ok = |k: &str| {
            let mut c = k.chars();
            k.len() <= 64
                && c.next().is_some_and(|c| c.is_ascii_alphabetic() || "-_.".contains(c))
                && c.all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        };
        for (k, v) in &d.dimensions {
            if !key_ok(k) {
                out.push(err(
                    f("demand.dimensions"),
                    format!("{k:?} is not a dimension key ([a-zA-Z-_.][0-9a-zA-Z-_.]*, at most 64)"),
                ));
            } else if v.is_empty() || v.len() > 256 || v.contains('|') || v.trim() != v {
                out.push(err(
                    f(&format!("demand.dimensions.{k}")),
                    "must be one value of 1 to 256 bytes, without `|` or surrounding spaces (a bot has one value per key)",
                ));
            }
        }
        if !(1..=64).contains(&d.per_bot) {
            out.push(err(f("demand.per_bot"), format!("{}; must be 1 to 64", d.per_bot)));
        }
        if d.min_idle > bounds::SURGE {
            out.push(err(f("demand.min_idle"), format!("{}; at most {}", d.min_idle, bounds::SURGE)));
        }
        if d.idle_timeout > bounds::TIMEOUT {
            out.push(err(f("demand.idle_timeout"), format!("{}; at most a day", d.idle_timeout)));
        }
        if self.amount.ceiling() == 0 {
            out.push(err(f("amount.max"), "is 0: a demand-driven pool grows only up to amount.max"));
        }
    }

    /// The rules of a warm pool (`warm`): a pool whose machines are made, within the bounds, and
    /// (for `suspended`) instances Compute Engine can suspend (demand.md §3.3): no Confidential
    /// VM, no Local SSD, no machine type with GPUs attached (`a2`, `a3`, `a4`, `g2`, `g4`), none of
    /// the memory-optimized families (`m1`-`m4`, `x4`), whose memory is above what a suspend saves.
    fn check_warm(&self, w: &Warm, f: &dyn Fn(&str) -> String, out: &mut Vec<ConfigError>) {
        if self.is_static() {
            out.push(err(f("warm"), "a static pool lists its machines: it keeps none warm"));
            return;
        }
        for (field, n) in [("warm.suspended", w.suspended), ("warm.stopped", w.stopped)] {
            if n > bounds::SURGE {
                out.push(err(f(field), format!("{n}; at most {}", bounds::SURGE)));
            }
        }
        if w.suspended == 0 {
            return;
        }
        let a = &self.attributes;
        let family = a.machine_type.rsplit('/').next().unwrap_or("").split('-').next().unwrap_or("");
        let why = if a.enable_confidential_compute {
            Some("a Confidential VM cannot be suspended".to_owned())
        } else if a.disk.iter().any(|d| d.kind.contains("local-ssd")) {
            Some("an instance with Local SSD cannot be suspended with its data".to_owned())
        } else if ["a2", "a3", "a4", "g2", "g4"].contains(&family) {
            Some(format!("machine type family {family} has GPUs attached: it cannot be suspended"))
        } else if ["m1", "m2", "m3", "m4", "x4"].contains(&family) {
            Some(format!("machine type family {family} has more memory than a suspend keeps"))
        } else {
            None
        };
        if let Some(why) = why {
            out.push(err(f("warm.suspended"), format!("{why}; use warm.stopped instead")));
        }
    }

    /// The rules of a Spot pool's failover (`spot_failover`): a pool of Spot or preemptible
    /// instances, a window and a cooldown within their bounds, a count within its own.
    fn check_spot_failover(&self, s: &SpotFailover, f: &dyn Fn(&str) -> String, out: &mut Vec<ConfigError>) {
        if self.is_static() {
            out.push(err(f("spot_failover"), "a static pool lists its machines: it makes no Spot VMs"));
            return;
        }
        if !self.attributes.preemptible() {
            out.push(err(
                f("spot_failover"),
                "is for a Spot pool: set attributes.provisioning_model: SPOT (or attributes.preemptible: true), or remove it",
            ));
        }
        if s.more_than > bounds::SPOT_EVENTS {
            out.push(err(
                f("spot_failover.more_than"),
                format!("{}; at most {}", s.more_than, bounds::SPOT_EVENTS),
            ));
        }
        for (field, value, max) in [
            ("spot_failover.within", s.within, bounds::SPOT_WITHIN),
            ("spot_failover.cooldown", s.cooldown, bounds::SPOT_COOLDOWN),
        ] {
            if value.0 == 0 {
                out.push(err(f(field), "must be non-zero"));
            } else if value > max {
                out.push(err(f(field), format!("{value} is above the most allowed, {max} ({})", days(max))));
            }
        }
    }

    /// The rules of an amount (a pool whose machines are made).
    fn check_amount(&self, f: &dyn Fn(&str) -> String, out: &mut Vec<ConfigError>) {
        let a = &self.amount;
        if a.min > a.max {
            out.push(err(f("amount"), format!("min {} is above max {}", a.min, a.max)));
        }
        let mut windows = Vec::new();
        for (i, s) in a.change.iter().enumerate() {
            let field = f(&format!("amount.change[{i}]"));
            let (time, tz) = (s.start_time(), s.tz());
            if let Err(e) = &time {
                out.push(err(format!("{field}.start.time"), e));
            }
            if let Err(e) = &tz {
                out.push(err(format!("{field}.start.location"), e));
            }
            if s.length.0 == 0 || s.length.0 > 7 * 86_400 {
                out.push(err(format!("{field}.length"), "must be non-zero and at most 7d"));
            }
            if s.min > s.max {
                out.push(err(&field, format!("min {} is above max {}", s.min, s.max)));
            }
            if time.is_err() || tz.is_err() {
                continue;
            }
            match s.week_minute() {
                Ok(start) => windows.push((i, start, start + (s.length.0 / 60) as i64)),
                Err(e) => out.push(err(format!("{field}.start"), e)),
            }
        }
        let week = 7 * 24 * 60;
        for (n, &(i, s1, e1)) in windows.iter().enumerate() {
            for &(j, s2, e2) in &windows[n + 1..] {
                // Half-open intervals on a circle: compare with the other shifted by a week.
                let overlaps = |(s1, e1): (i64, i64), (s2, e2): (i64, i64)| s1 < e2 && s2 < e1;
                if [-week, 0, week].iter().any(|&k| overlaps((s1, e1), (s2 + k, e2 + k))) {
                    out.push(err(f(&format!("amount.change[{j}]")), format!("overlaps amount.change[{i}]")));
                }
            }
        }
        // Every hostname <prefix>-<index>-<4 chars> must be a valid instance name.
        let longest = self.prefix.len() + 1 + index_digits(self.most_indexes().max(1)) + 5;
        if longest > 63 {
            out.push(err(
                f("prefix"),
                format!(
                    "hostnames <prefix>-<index>-xxxx would be {longest} characters; instance names have at most 63"
                ),
            ));
        }
    }

    fn check_attributes(&self, f: &dyn Fn(&str) -> String, out: &mut Vec<ConfigError>) {
        let v = &self.attributes;
        if v.disk.is_empty() {
            out.push(err(f("attributes.disk"), "at least one disk is required"));
        }
        for (i, d) in v.disk.iter().enumerate() {
            let field = f(&format!("attributes.disk[{i}]"));
            let kind = d.kind.rsplit('/').next().unwrap_or_default();
            if !d.kind.is_empty() {
                let parts: Vec<&str> = d.kind.split('/').collect();
                if parts.len() != 4 || parts[0] != "zones" || parts[2] != "diskTypes" || parts[3].is_empty() {
                    out.push(err(format!("{field}.type"), "must be empty or zones/<zone>/diskTypes/<type>"));
                }
            }
            if matches!(kind, "pd-standard" | "pd-ssd") {
                if !d.interface.is_empty() && d.interface != "SCSI" {
                    out.push(err(format!("{field}.interface"), format!("{kind} requires SCSI")));
                }
                let image_ok = d.image.starts_with("global/images/")
                    || (d.image.starts_with("projects/") && d.image.contains("/global/images/"));
                if !image_ok {
                    out.push(err(
                        format!("{field}.image"),
                        "must be global/images/X or projects/P/global/images/X",
                    ));
                }
            }
            if kind == "local-ssd" && !d.image.is_empty() {
                out.push(err(format!("{field}.image"), "a local-ssd disk may not have an image"));
            }
            if (d.provisioned_iops.is_some() || d.provisioned_throughput.is_some())
                && !kind.starts_with("hyperdisk")
            {
                out.push(err(&field, "provisioned_iops/throughput are for hyperdisk types only"));
            }
            if !d.interface.is_empty() && d.interface != "SCSI" && d.interface != "NVME" {
                out.push(err(format!("{field}.interface"), "must be SCSI or NVME"));
            }
        }
        if v.machine_type.is_empty() {
            out.push(err(f("attributes.machine_type"), "is required"));
        }
        let mut paths = vec![("attributes.machine_type".to_owned(), &v.machine_type)];
        for (i, d) in v.disk.iter().enumerate() {
            paths.push((format!("attributes.disk[{i}].image"), &d.image));
            paths.push((format!("attributes.disk[{i}].type"), &d.kind));
            if d.size > bounds::DISK_GB {
                out.push(err(
                    f(&format!("attributes.disk[{i}].size")),
                    format!("{} GB; at most {}", d.size, bounds::DISK_GB),
                ));
            }
        }
        for (i, n) in v.network_interface.iter().enumerate() {
            paths.push((format!("attributes.network_interface[{i}].network"), &n.network));
            paths.push((format!("attributes.network_interface[{i}].subnetwork"), &n.subnetwork));
        }
        for (field, value) in paths {
            if let Err(why) = resource_path(value) {
                out.push(err(f(&field), why));
            }
        }
        for (i, sa) in v.service_account.iter().enumerate() {
            let field = f(&format!("attributes.service_account[{i}]"));
            if sa.email != "default" && !valid_email(&sa.email) {
                out.push(err(format!("{field}.email"), "must be default or an account's email address"));
            }
            for (j, scope) in sa.scope.iter().enumerate() {
                let ok = scope.strip_prefix("https://www.googleapis.com/auth/").is_some_and(|s| {
                    !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
                });
                if !ok {
                    out.push(err(
                        format!("{field}.scope[{j}]"),
                        "must be https://www.googleapis.com/auth/<scope>",
                    ));
                }
            }
        }
        for (i, t) in v.tag.iter().enumerate() {
            if !valid_gce_name(t) {
                out.push(err(
                    f(&format!("attributes.tag[{i}]")),
                    "must match [a-z]([-a-z0-9]*[a-z0-9])?, at most 63",
                ));
            }
        }
        if v.metadata.len() > MAX_METADATA_ITEMS {
            out.push(err(
                f("attributes.metadata"),
                format!("{} items; at most {MAX_METADATA_ITEMS}", v.metadata.len()),
            ));
        }
        let bytes: usize = v
            .metadata
            .iter()
            .map(|m| m.from_text.as_ref().or(m.from_file.as_ref()).map_or(0, String::len))
            .sum();
        if bytes > MAX_METADATA_BYTES {
            out.push(err(
                f("attributes.metadata"),
                format!("{bytes} bytes in all; Compute Engine allows {MAX_METADATA_BYTES}"),
            ));
        }
        for (i, m) in v.metadata.iter().enumerate() {
            let field = f(&format!("attributes.metadata[{i}]"));
            if m.pair().is_some_and(|(_, value)| value.len() > MAX_METADATA_VALUE) {
                out.push(err(&field, format!("value above {MAX_METADATA_VALUE} bytes")));
            }
            match (&m.from_text, &m.from_file) {
                (Some(s), None) | (None, Some(s)) if s.contains(':') => {
                    let key = s.split_once(':').map_or("", |(k, _)| k);
                    let ok = !key.is_empty()
                        && key.len() <= 128
                        && key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
                    if !ok {
                        out.push(err(&field, "the key must be 1-128 characters of [A-Za-z0-9_-]"));
                    } else if key == SWARMING_SERVER_KEY {
                        out.push(err(&field, format!("{key} is set by the service (from swarming)")));
                    }
                }
                (Some(_), None) | (None, Some(_)) => {
                    out.push(err(&field, "must be key:value (from_file: key:path)"));
                }
                _ => out.push(err(&field, "exactly one of from_text or from_file")),
            }
        }
        if v.network_interface.is_empty() {
            out.push(err(f("attributes.network_interface"), "at least one network interface is required"));
        }
        if v.project.is_empty() {
            out.push(err(f("attributes.project"), "is required"));
        } else if !valid_project(&v.project) {
            out.push(err(
                f("attributes.project"),
                format!(
                    "{:?} is not a GCP project id: 6-30 characters of [a-z0-9-] starting with a letter, optionally after a domain (example.com:my-project)",
                    v.project.chars().take(64).collect::<String>()
                ),
            ));
        }
        self.check_placement(f, out);
        for (k, val) in &v.label {
            if !valid_label(k, true) || !valid_label(val, false) || k.starts_with("gce-backend") {
                out.push(err(
                    f(&format!("attributes.label.{k}")),
                    "keys and values are [a-z0-9_-] (keys start with a letter), at most 63; gce-backend* keys are reserved",
                ));
            }
        }
        if !matches!(v.provisioning_model.as_str(), "" | "STANDARD" | "SPOT") {
            out.push(err(f("attributes.provisioning_model"), "must be STANDARD or SPOT"));
        } else if v.preemptible && v.provisioning_model == "SPOT" {
            out.push(err(f("attributes.preemptible"), "a SPOT instance is preemptible already: remove it"));
        }
        if !v.instance_termination_action.is_empty() {
            if !matches!(v.instance_termination_action.as_str(), "STOP" | "DELETE") {
                out.push(err(f("attributes.instance_termination_action"), "must be STOP or DELETE"));
            } else if !v.preemptible() {
                out.push(err(
                    f("attributes.instance_termination_action"),
                    "is for SPOT or preemptible instances",
                ));
            }
        }
        if let Some(s) = &v.scheduling {
            for (i, a) in s.node_affinity.iter().enumerate() {
                if a.operator != "IN" && a.operator != "NOT_IN" {
                    out.push(err(
                        f(&format!("attributes.scheduling.node_affinity[{i}].operator")),
                        "must be IN or NOT_IN",
                    ));
                }
            }
        }
    }
}

/// Validates a set of Configs together: each one, and no prefix a prefix of another.
pub fn validate_all(configs: &[Config]) -> Result<(), ConfigError> {
    for c in configs {
        c.validate()?;
    }
    check_prefixes(configs)
}

/// The rule across Configs: no prefix is a prefix of another (nor equal to it).
pub fn check_prefixes(configs: &[Config]) -> Result<(), ConfigError> {
    let mut prefixes: Vec<&str> = configs.iter().map(|c| c.prefix.as_str()).collect();
    prefixes.sort();
    for w in prefixes.windows(2) {
        if w[1].starts_with(w[0]) {
            return Err(err(format!("{}.prefix", w[1]), format!("{:?} is a prefix of it (or equal)", w[0])));
        }
    }
    Ok(())
}
