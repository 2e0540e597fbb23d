//! Compute Engine on the world: instances insert, delete, get, list, preempt; operations;
//! regions and quotas; an instance's identity-token claims.

use super::*;

impl World {
    /// Makes and records a zonal operation on `target` (see [`World::add_op`]).
    pub(super) fn new_op(
        &mut self,
        project: &str,
        zone: &str,
        kind: &'static str,
        target: &str,
        target_id: u64,
        rid: Option<String>,
    ) -> String {
        let mut op = self.fresh_op(project, Scope::Zone, zone, kind, target);
        op.target_id = target_id;
        op.request_id = rid;
        self.add_op(op)
    }

    /// A new PENDING operation, not yet recorded: no requestId, group, nor target id.
    pub(super) fn fresh_op(
        &mut self,
        project: &str,
        scope: Scope,
        location: &str,
        kind: &'static str,
        target: &str,
    ) -> Operation {
        let n = self.next();
        let hex: u64 = self.rng.random();
        Operation {
            id: self.rng.random::<u64>() >> 1,
            name: format!("operation-{n}-{hex:016x}"),
            project: project.to_owned(),
            scope,
            location: location.to_owned(),
            kind,
            target: target.to_owned(),
            target_id: 0,
            status: OpStatus::Pending,
            insert_time: self.now_utc(),
            start_time: None,
            end_time: None,
            error: None,
            pending_error: None,
            request_id: None,
            group: None,
            bulk: None,
        }
    }

    /// Records `op`: counts it (by kind, overall and per Config) and its requestId; forgets the
    /// oldest operations beyond `max_operations`. Returns its name.
    pub(super) fn add_op(&mut self, op: Operation) -> String {
        let name = op.name.clone();
        *self.ops_made.entry(op.kind).or_default() += 1;
        let config = crate::names::config_of(&op.target);
        match self.by_config.get_mut(config) {
            Some(c) => *c.actions.entry(op.kind).or_default() += 1,
            None => {
                let mut c = ConfigUsage::default();
                c.actions.insert(op.kind, 1);
                self.by_config.insert(config.to_owned(), c);
            }
        }
        if let Some(rid) = &op.request_id {
            self.request_ids.insert((op.project.clone(), op.location.clone(), rid.clone()), name.clone());
        }
        self.counts.operation(None, Some(op.status), false);
        self.operations.insert(name.clone(), op);
        self.op_order.push_back(name.clone());
        while self.op_order.len() > self.cfg.max_operations {
            let old = self.op_order.pop_front().expect("non-empty");
            let Some(op) = self.operations.remove(&old) else { continue };
            self.counts.operation(Some(op.status), None, op.error.is_some());
            if let Some(rid) = op.request_id {
                self.request_ids.remove(&(op.project, op.location, rid));
            }
        }
        name
    }

    /// Schedules an operation's PENDING → RUNNING → DONE over `total`.
    pub(super) fn run_op(&mut self, name: &str, total: Duration) {
        self.at(total / 2, Ev::OpStatus { op: name.to_owned(), to: OpStatus::Running });
        self.at(total, Ev::OpStatus { op: name.to_owned(), to: OpStatus::Done });
    }

    /// A requestId: a valid non-nil UUID, still inside its window.
    pub(super) fn replay(
        &self,
        project: &str,
        zone: &str,
        rid: &Option<String>,
    ) -> Result<Option<String>, ApiError> {
        let Some(rid) = rid else { return Ok(None) };
        match uuid::Uuid::parse_str(rid) {
            Ok(u) if !u.is_nil() => {}
            _ => {
                return Err(ApiError::new(
                    400,
                    "invalid",
                    format!("Invalid value for field 'requestId': '{rid}'."),
                ));
            }
        }
        let name = self.request_ids.get(&(project.to_owned(), zone.to_owned(), rid.clone()));
        let window = chrono::Duration::seconds(self.cfg.request_id_window_s as i64);
        Ok(name
            .and_then(|n| self.operations.get(n))
            .filter(|op| op.insert_time + window > self.now_utc())
            .map(|op| op.name.clone()))
    }

    pub(super) fn check_zone(&self, zone: &str) -> Result<(), ApiError> {
        if self.cfg.zones.iter().any(|z| z == zone) {
            Ok(())
        } else {
            Err(ApiError::new(
                400,
                "invalid",
                format!("Invalid value for field 'zone': '{zone}'. Unknown zone."),
            ))
        }
    }

    /// `instances.insert`; returns the operation's name.
    pub fn insert(
        &mut self,
        project: &str,
        zone: &str,
        rid: Option<String>,
        body: &Value,
    ) -> Result<String, ApiError> {
        self.check_zone(zone)?;
        if let Some(op) = self.replay(project, zone, &rid)? {
            return Ok(op);
        }
        let name = body.get("name").and_then(Value::as_str).unwrap_or_default().to_owned();
        if !valid_name(&name) {
            let msg = format!(
                "Invalid value for field 'resource.name': '{name}'. Must be a match of regex '(?:[a-z](?:[-a-z0-9]{{0,61}}[a-z0-9])?)'"
            );
            return Err(ApiError::new(400, "invalid", msg));
        }
        let machine_type = body.get("machineType").and_then(Value::as_str).unwrap_or_default().to_owned();
        if machine_type.is_empty() {
            return Err(ApiError::new(
                400,
                "required",
                "Required field 'resource.machineType' not specified",
            ));
        }
        let key: InstanceKey = (project.to_owned(), zone.to_owned(), name.clone());
        if self.instances.contains_key(&key) {
            let msg =
                format!("The resource 'projects/{project}/zones/{zone}/instances/{name}' already exists");
            return Err(ApiError::new(409, "alreadyExists", msg));
        }
        self.audit_insert(&key, rid.clone());
        let failure = self.refusal(project, zone, &machine_type);
        Ok(self.make(key, machine_type, body, rid, None, failure))
    }

    /// `instances.delete`; returns the operation's name.
    pub fn delete(
        &mut self,
        project: &str,
        zone: &str,
        name: &str,
        rid: Option<String>,
    ) -> Result<String, ApiError> {
        self.check_zone(zone)?;
        if let Some(op) = self.replay(project, zone, &rid)? {
            return Ok(op);
        }
        let key: InstanceKey = (project.to_owned(), zone.to_owned(), name.to_owned());
        let Some(inst) = self.instances.get_mut(&key) else {
            return Err(not_found(project, zone, name));
        };
        let id = inst.id;
        let first = !inst.deleting;
        let before = counts::class(inst);
        inst.deleting = true;
        if inst.status != Status::Terminated {
            inst.status = Status::Stopping;
        }
        self.counts.instance(zone, name, Some(before), Some(counts::class(inst)));
        inst.resuming = false;
        let stop = Duration::from_millis(self.cfg.stop_ms);
        let total = stop * 2;
        let op = self.new_op(project, zone, "delete", name, id, rid);
        self.run_op(&op, total);
        if first {
            self.at(stop, Ev::InstStatus { key: key.clone(), id, to: Status::Terminated });
            self.at(total, Ev::InstGone { key: key.clone(), id });
            self.instance_silences(&key);
        }
        Ok(op)
    }

    /// Preempts a running instance: STOPPING, then TERMINATED (it stays); its bot dies.
    pub fn preempt(&mut self, project: &str, zone: &str, name: &str) -> Result<(), ApiError> {
        let key: InstanceKey = (project.to_owned(), zone.to_owned(), name.to_owned());
        let Some(inst) = self.instances.get_mut(&key) else { return Err(not_found(project, zone, name)) };
        if inst.deleting || inst.status == Status::Terminated {
            return Ok(());
        }
        let before = counts::class(inst);
        inst.status = Status::Stopping;
        self.counts.instance(zone, name, Some(before), Some(counts::class(inst)));
        let id = inst.id;
        self.at(
            Duration::from_millis(self.cfg.stop_ms),
            Ev::InstStatus { key: key.clone(), id, to: Status::Terminated },
        );
        self.instance_silences(&key);
        Ok(())
    }

    /// `instances.get`.
    pub fn get(&self, project: &str, zone: &str, name: &str) -> Result<InstanceEntry<'_>, ApiError> {
        self.check_zone(zone)?;
        let key: InstanceKey = (project.to_owned(), zone.to_owned(), name.to_owned());
        self.instances.get_key_value(&key).ok_or_else(|| not_found(project, zone, name))
    }

    /// `instances.list`: one page of instances matching `filter`, after `token`, and the token of
    /// the next page.
    pub fn list(
        &self,
        project: &str,
        zone: &str,
        filter: &crate::world::filter::Filter,
        max: usize,
        token: Option<&str>,
    ) -> Result<(Vec<InstanceEntry<'_>>, Option<String>), ApiError> {
        self.check_zone(zone)?;
        let start: InstanceKey = (project.to_owned(), zone.to_owned(), token.unwrap_or_default().to_owned());
        let mut items: Vec<InstanceEntry<'_>> = Vec::new();
        let mut next = None;
        let range = self.instances.range(start..).filter(|(k, _)| Some(k.2.as_str()) != token);
        for (k, i) in range.take_while(|(k, _)| k.0 == project && k.1 == zone) {
            if !filter.matches(&k.2, i) {
                continue;
            }
            if items.len() == max {
                next = items.last().map(|(k, _)| k.2.clone());
                break;
            }
            items.push((k, i));
        }
        Ok((items, next))
    }

    /// The operation `name` of `project`/`zone`.
    pub fn operation(&self, project: &str, zone: &str, name: &str) -> Result<&Operation, ApiError> {
        self.operation_in(project, Scope::Zone, zone, name)
    }

    /// The operation `name` of `project` in `location` (a zone, a region, or `global`).
    pub fn operation_in(
        &self,
        project: &str,
        scope: Scope,
        location: &str,
        name: &str,
    ) -> Result<&Operation, ApiError> {
        let found = self.operations.get(name);
        found.filter(|op| op.project == project && op.scope == scope && op.location == location).ok_or_else(
            || {
                let path = match scope {
                    Scope::Zone => format!("zones/{location}"),
                    Scope::Region => format!("regions/{location}"),
                    Scope::Global => "global".to_owned(),
                };
                let msg = format!("The resource 'projects/{project}/{path}/operations/{name}' was not found");
                ApiError::new(404, "notFound", msg)
            },
        )
    }

    /// The regions of the served zones, by name, with `project`'s CPUS and INSTANCES quotas and
    /// their usage.
    pub fn regions(&self, project: &str) -> Vec<Region<'_>> {
        let regions: BTreeSet<&str> = self.cfg.zones.iter().map(|z| region_of(z)).collect();
        regions
            .into_iter()
            .map(|name| Region {
                name,
                zones: self.cfg.zones.iter().map(String::as_str).filter(|z| region_of(z) == name).collect(),
                limits: self.faults.limits(project, name, &self.cfg),
                usage: self.usage.get(&(project.to_owned(), name.to_owned())).cloned().unwrap_or_default(),
            })
            .collect()
    }

    /// The `format=full` identity-token claims of instance `name` for `audience`, issued now
    /// (what the metadata server would sign for it); none when no such instance lives.
    pub fn claims(&self, project: &str, zone: &str, name: &str, audience: &str) -> Option<serde_json::Value> {
        let key = (project.to_owned(), zone.to_owned(), name.to_owned());
        let i = self.instances.get(&key).filter(|i| !i.deleting)?;
        let now = self.now_utc().timestamp();
        Some(json!({
            "iss": "https://accounts.google.com", "aud": audience, "azp": "1", "sub": i.id.to_string(),
            "iat": now, "exp": now + 3600,
            "google": {"compute_engine": {
                "instance_id": i.id.to_string(), "instance_name": name, "zone": zone,
                "project_id": project, "project_number": 1, "instance_creation_timestamp": i.created.timestamp(),
            }},
        }))
    }
}
