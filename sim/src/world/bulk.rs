//! bulkInsert on the world: zonal (`instances.bulkInsert`) and regional
//! (`regionInstances.bulkInsert`). The body is checked (`crate::bulk`), then the zones allowed
//! (the region's, by `locationPolicy`) and the machine types by rank are tried for each instance
//! in the order its target shape gives; each instance is made as `instances.insert` makes one
//! (`make.rs`), with its own `insert` operation in the bulk's `operationGroupId`, or fails there
//! with the first refusal (stockout, quota) or RESOURCE_ALREADY_EXISTS for a name in use. When
//! nothing can be made anywhere the call itself is refused: 503 `insufficientCapacity` (all
//! stocked out) or 403 `quotaExceeded`. Fewer made than `minCount`: all of them are deleted
//! (ROLLING_BACK) and the operation ends with an error. The bulk operation is RUNNING at once and
//! DONE when its instances' operations are, with its outcome per zone.

use super::*;
use crate::bulk::{BulkRequest, Choice, Names, Shape};

/// Applies a JSON Merge Patch (RFC 7396): `patch`'s members replace `target`'s, `null` removes.
fn merge_patch(target: &mut Value, patch: &Value) {
    let Value::Object(members) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = json!({});
    }
    if let Value::Object(t) = target {
        for (k, v) in members {
            if v.is_null() {
                t.remove(k);
            } else {
                merge_patch(t.entry(k.clone()).or_insert(Value::Null), v);
            }
        }
    }
}

/// The insert body of instance `name` in `zone` with machine type choice `c`: the properties,
/// with its name, machine type, hostname, and the choice's disks and CPU platform.
fn instance_body(properties: &Value, name: &str, hostname: Option<&str>, zone: &str, c: &Choice) -> Value {
    let mut body = properties.clone();
    if let Value::Object(o) = &mut body {
        o.insert("name".into(), json!(name));
        o.insert("machineType".into(), json!(format!("zones/{zone}/machineTypes/{}", c.machine_type)));
        if let Some(h) = hostname {
            o.insert("hostname".into(), json!(h));
        }
        if let Some(d) = &c.disks {
            o.insert("disks".into(), d.clone());
        }
        if let Some(p) = &c.min_cpu_platform {
            o.insert("minCpuPlatform".into(), json!(p));
        }
    }
    body
}

fn invalid(message: String) -> ApiError {
    ApiError::new(400, "invalid", message)
}

impl World {
    /// A bulkInsert of `project` in a zone (`Scope::Zone`) or a region (`Scope::Region`);
    /// returns its operation's name.
    pub fn bulk_insert(
        &mut self,
        project: &str,
        scope: Scope,
        location: &str,
        rid: Option<String>,
        body: &Value,
    ) -> Result<String, ApiError> {
        let zones = match scope {
            Scope::Zone => {
                self.check_zone(location)?;
                vec![location.to_owned()]
            }
            _ => self.region_zones(location)?,
        };
        if let Some(op) = self.replay(project, location, &rid)? {
            return Ok(op);
        }
        let req = BulkRequest::parse(body).map_err(invalid)?;
        let zones = match scope {
            Scope::Zone => zones,
            _ => allowed_zones(location, zones, &req)?,
        };
        let mut properties = match &req.template {
            Some(t) => self.template(project, t)?.properties.clone(),
            None => json!({}),
        };
        merge_patch(&mut properties, &req.properties);
        let choices = if req.choices.is_empty() {
            let given = properties.get("machineType").and_then(Value::as_str).unwrap_or_default();
            let machine_type = given.rsplit('/').next().unwrap_or(given);
            if !valid_name(machine_type) {
                let msg = "Required field 'resource.instanceProperties.machineType' not specified";
                return Err(invalid(msg.into()));
            }
            let c =
                Choice { rank: 0, machine_type: machine_type.into(), disks: None, min_cpu_platform: None };
            vec![c]
        } else {
            req.choices.clone()
        };
        let names = self.bulk_names(project, &zones, &req)?;
        let in_use = |w: &Self, name: &str| {
            zones.iter().find(|z| w.instances.contains_key(&key_of(project, z, name))).cloned()
        };
        if names.iter().any(|(n, _)| in_use(self, n).is_none()) {
            self.capacity_anywhere(project, &zones, &choices)?;
        }
        let group = uuid::Builder::from_random_bytes(self.rng.random()).into_uuid().to_string();
        let single = match req.policy.shape {
            Shape::AnySingleZone => Some(self.single_zone(project, &zones, &choices, &req)),
            _ => None,
        };
        let mut outcome = BulkOutcome::default();
        let mut made: Vec<InstanceKey> = Vec::new();
        let mut failure: Option<OpError> = None;
        for (name, hostname) in &names {
            if let Some(zone) = in_use(self, name) {
                let msg =
                    format!("The resource 'projects/{project}/zones/{zone}/instances/{name}' already exists");
                let err = OpError { code: "RESOURCE_ALREADY_EXISTS".into(), message: msg, http: 409 };
                failure.get_or_insert_with(|| err.clone());
                let zone_outcome = outcome.zones.entry(zone.clone()).or_default();
                zone_outcome.target += 1;
                zone_outcome.failed += 1;
                self.make(
                    key_of(project, &zone, name),
                    choices[0].machine_type.clone(),
                    &json!({}),
                    None,
                    Some(&group),
                    Some(err),
                );
                continue;
            }
            let order = self.order(&zones, &choices, single.as_deref(), &outcome, &req);
            let mut refused = None;
            let chosen = order.iter().find(|(z, c)| match self.refusal(project, z, &c.machine_type) {
                None => true,
                Some(e) => {
                    refused.get_or_insert(e);
                    false
                }
            });
            let key;
            match chosen {
                Some((zone, c)) => {
                    key = key_of(project, zone, name);
                    let body = instance_body(&properties, name, hostname.as_deref(), zone, c);
                    self.audit_insert(&key, rid.clone());
                    self.make(key.clone(), c.machine_type.clone(), &body, None, Some(&group), None);
                    made.push(key.clone());
                }
                None => {
                    let zone = order.first().map_or_else(
                        || single.clone().unwrap_or_else(|| zones[0].clone()),
                        |(z, _)| z.clone(),
                    );
                    key = key_of(project, &zone, name);
                    let err = refused.unwrap_or_else(|| OpError {
                        code: "CONDITION_NOT_MET".into(),
                        message: "Every allowed zone holds its locationPolicy maxCount.".into(),
                        http: 400,
                    });
                    failure.get_or_insert_with(|| err.clone());
                    self.audit_insert(&key, rid.clone());
                    self.make(
                        key.clone(),
                        choices[0].machine_type.clone(),
                        &json!({}),
                        None,
                        Some(&group),
                        Some(err),
                    );
                }
            }
            let zone_outcome = outcome.zones.entry(key.1.clone()).or_default();
            zone_outcome.target += 1;
            if chosen.is_some() {
                zone_outcome.created += 1;
            } else {
                zone_outcome.failed += 1;
            }
        }
        let first = names.first().map(|(n, _)| n.clone()).unwrap_or_default();
        let mut op = self.fresh_op(project, scope, location, "bulkInsert", &first);
        op.status = OpStatus::Running;
        op.start_time = Some(self.now_utc());
        op.request_id = rid;
        op.group = Some(group);
        let mut total = Duration::from_millis(self.cfg.op_ms);
        if (made.len() as u64) < req.min_count {
            for key in &made {
                let _ = self.delete(&key.0, &key.1, &key.2, None); // just made: it is there
                outcome.zones.entry(key.1.clone()).or_default().deleted += 1;
            }
            outcome.rolled_back = true;
            total = total.max(Duration::from_millis(self.cfg.stop_ms) * 2);
            let why = failure.unwrap_or_else(|| OpError {
                code: "CONDITION_NOT_MET".into(),
                message: String::new(),
                http: 400,
            });
            let message = format!(
                "minCount {} not met: {} of {} instances made, and deleted again. {}",
                req.min_count,
                made.len(),
                req.count,
                why.message
            );
            op.pending_error = Some(OpError { message, ..why });
        }
        op.bulk = Some(Box::new(outcome));
        let name = self.add_op(op);
        self.at(total, Ev::OpStatus { op: name.clone(), to: OpStatus::Done });
        self.bulk_running(project, &name);
        Ok(name)
    }

    /// The served zones of `region`, in configuration order.
    fn region_zones(&self, region: &str) -> Result<Vec<String>, ApiError> {
        let zones: Vec<String> = self.cfg.zones.iter().filter(|z| region_of(z) == region).cloned().collect();
        if zones.is_empty() {
            return Err(invalid(format!("Invalid value for field 'region': '{region}'. Unknown region.")));
        }
        Ok(zones)
    }

    /// The names to make: a pattern's, numbered after the largest of its names in use in
    /// `zones`, or those listed.
    fn bulk_names(
        &self,
        project: &str,
        zones: &[String],
        req: &BulkRequest,
    ) -> Result<Vec<(String, Option<String>)>, ApiError> {
        let (prefix, width, suffix) = match &req.names {
            Names::Listed(names) => return Ok(names.clone()),
            Names::Pattern { prefix, width, suffix } => (prefix, *width, suffix),
        };
        let mut largest = 0u64;
        for z in zones {
            let from = key_of(project, z, prefix);
            for (k, _) in self
                .instances
                .range(from..)
                .take_while(|(k, _)| k.0 == project && &k.1 == z && k.2.starts_with(prefix.as_str()))
            {
                let digits = k.2[prefix.len()..]
                    .strip_suffix(suffix.as_str())
                    .filter(|d| d.len() == width && d.bytes().all(|b| b.is_ascii_digit()));
                if let Some(n) = digits.and_then(|d| d.parse::<u64>().ok()) {
                    largest = largest.max(n);
                }
            }
        }
        let last = largest + req.count;
        if last > 10u64.pow(width as u32) - 1 {
            let msg = format!(
                "Invalid value for field 'resource.namePattern': '{prefix}{}{suffix}'. Too few names are left after {largest} for count {}.",
                "#".repeat(width),
                req.count
            );
            return Err(invalid(msg));
        }
        Ok((largest + 1..=last).map(|n| (Names::numbered(prefix, width, suffix, n), None)).collect())
    }

    /// Refuses the call when no zone can take any of the machine types: 503
    /// `insufficientCapacity` when every refusal is a stockout, else 403 `quotaExceeded`.
    fn capacity_anywhere(&self, project: &str, zones: &[String], choices: &[Choice]) -> Result<(), ApiError> {
        let mut quota = None;
        for z in zones {
            for c in choices {
                match self.refusal(project, z, &c.machine_type) {
                    None => return Ok(()),
                    Some(e) if e.code == "QUOTA_EXCEEDED" => quota = quota.or(Some(e)),
                    Some(_) => {}
                }
            }
        }
        Err(match quota {
            Some(e) => ApiError::new(403, "quotaExceeded", e.message),
            None => ApiError::new(
                503,
                "insufficientCapacity",
                format!(
                    "The zones {} do not have enough resources available to fulfill the request. Try a different zone, or try again later.",
                    zones.join(", ")
                ),
            ),
        })
    }

    /// The zone of an ANY_SINGLE_ZONE bulk: the first that can take the best-ranked machine
    /// type (by rank, then zone order); the first zone when none can.
    fn single_zone(&self, project: &str, zones: &[String], choices: &[Choice], req: &BulkRequest) -> String {
        for c in choices {
            for z in zones {
                let capped = req.policy.max_count.get(z) == Some(&0);
                if !capped && self.refusal(project, z, &c.machine_type).is_none() {
                    return z.clone();
                }
            }
        }
        zones[0].clone()
    }

    /// The (zone, machine type) pairs to try for the next instance, best first: in the single
    /// zone by rank (ANY_SINGLE_ZONE); by rank then zone order (ANY); by the zones holding
    /// fewest of the bulk's instances so far, then rank (BALANCED). Zones at their `maxCount`
    /// are left out.
    fn order<'c>(
        &self,
        zones: &[String],
        choices: &'c [Choice],
        single: Option<&str>,
        outcome: &BulkOutcome,
        req: &BulkRequest,
    ) -> Vec<(String, &'c Choice)> {
        let made = |z: &str| outcome.zones.get(z).map_or(0, |o| o.created as u64);
        let open = |z: &&String| req.policy.max_count.get(z.as_str()).is_none_or(|max| made(z) < *max);
        let zones: Vec<&String> = match single {
            Some(s) => zones.iter().filter(|z| z.as_str() == s).filter(open).collect(),
            None => zones.iter().filter(open).collect(),
        };
        match req.policy.shape {
            Shape::Balanced => {
                let mut by_load = zones;
                by_load.sort_by_key(|z| made(z)); // stable: zone order among equals
                by_load.into_iter().flat_map(|z| choices.iter().map(move |c| (z.clone(), c))).collect()
            }
            _ => choices.iter().flat_map(|c| zones.iter().map(move |z| ((*z).clone(), c))).collect(),
        }
    }
}

/// `(project, zone, name)`.
fn key_of(project: &str, zone: &str, name: &str) -> InstanceKey {
    (project.to_owned(), zone.to_owned(), name.to_owned())
}

/// The zones of `region` a regional bulk may use: `zones[]` when given (each in the region),
/// without those DENY'd, and only those ALLOW'd when any is.
fn allowed_zones(region: &str, served: Vec<String>, req: &BulkRequest) -> Result<Vec<String>, ApiError> {
    let p = &req.policy;
    let named = p.zones.iter().flatten().chain(&p.allow).chain(&p.deny).chain(p.max_count.keys());
    for z in named {
        if !served.contains(z) {
            return Err(invalid(format!(
                "Invalid value for field 'resource.locationPolicy': 'zones/{z}'. It is not a zone of region '{region}'."
            )));
        }
    }
    let zones: Vec<String> = served
        .into_iter()
        .filter(|z| p.zones.as_ref().is_none_or(|named| named.contains(z)))
        .filter(|z| !p.deny.contains(z))
        .filter(|z| p.allow.is_empty() || p.allow.contains(z))
        .collect();
    if zones.is_empty() {
        let msg = format!(
            "Invalid value for field 'resource.locationPolicy': no zone of region '{region}' is allowed."
        );
        return Err(invalid(msg));
    }
    Ok(zones)
}

#[cfg(test)]
mod tests;
