//! Compute Engine on the world: instances insert, delete, get, list, preempt; operations;
//! regions and quotas; an instance's identity-token claims.

use super::*;

impl World {
    pub(super) fn new_op(
        &mut self,
        project: &str,
        zone: &str,
        kind: &'static str,
        target: &str,
        target_id: u64,
        rid: Option<String>,
    ) -> String {
        let n = self.next();
        let hex: u64 = self.rng.random();
        let name = format!("operation-{n}-{hex:016x}");
        *self.ops_made.entry(kind).or_default() += 1;
        let config = crate::names::config_of(target);
        match self.by_config.get_mut(config) {
            Some(c) => *c.actions.entry(kind).or_default() += 1,
            None => {
                let mut c = ConfigUsage::default();
                c.actions.insert(kind, 1);
                self.by_config.insert(config.to_owned(), c);
            }
        }
        let op = Operation {
            id: self.rng.random::<u64>() >> 1,
            name: name.clone(),
            project: project.to_owned(),
            zone: zone.to_owned(),
            kind,
            target: target.to_owned(),
            target_id,
            status: OpStatus::Pending,
            insert_time: self.now_utc(),
            start_time: None,
            end_time: None,
            error: None,
            pending_error: None,
            request_id: rid.clone(),
        };
        self.operations.insert(name.clone(), op);
        self.counts.operation(None, Some(OpStatus::Pending), false);
        self.op_order.push_back(name.clone());
        if let Some(rid) = rid {
            self.request_ids.insert((project.to_owned(), zone.to_owned(), rid), name.clone());
        }
        while self.op_order.len() > self.cfg.max_operations {
            let old = self.op_order.pop_front().expect("non-empty");
            let Some(op) = self.operations.remove(&old) else { continue };
            self.counts.operation(Some(op.status), None, op.error.is_some());
            if let Some(rid) = op.request_id {
                self.request_ids.remove(&(op.project, op.zone, rid));
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
        let cpus = self.cfg.cpus_of(&machine_type);
        let region = region_of(zone).to_owned();
        let limits = self.faults.limits(project, &region, &self.cfg);
        let usage = self.usage.get(&(project.to_owned(), region.clone())).cloned().unwrap_or_default();
        let live = self.instances.len();
        let failure = if self.faults.stockout_zones.contains(zone) || live >= self.cfg.max_instances {
            Some(OpError {
                code: "ZONE_RESOURCE_POOL_EXHAUSTED".into(),
                message: format!(
                    "The zone 'projects/{project}/zones/{zone}' does not have enough resources available to fulfill the request.  Try a different zone, or try again later."
                ),
                http: 503,
            })
        } else if usage.cpus + cpus > limits.cpus {
            Some(quota_error("CPUS", limits.cpus, &region))
        } else if usage.instances + 1 > limits.instances {
            Some(quota_error("INSTANCES", limits.instances as f64, &region))
        } else {
            None
        };
        let id = self.rng.random::<u64>() >> 1;
        let total = Duration::from_millis(self.cfg.op_ms);
        let op = self.new_op(project, zone, "insert", &name, id, rid);
        self.run_op(&op, total);
        if let Some(err) = failure {
            self.operations.get_mut(&op).expect("just made").pending_error = Some(err);
            return Ok(op);
        }
        let inst = self.build_instance(id, machine_type, cpus, body);
        let never_boots = inst.never_boots;
        self.counts.instance(zone, &name, None, Some(counts::class(&inst)));
        self.instances.insert(key.clone(), inst);
        let u = self.usage.entry((project.to_owned(), region)).or_default();
        u.cpus += cpus;
        u.instances += 1;
        let provision = Duration::from_millis(self.cfg.provision_ms);
        self.at(provision, Ev::InstStatus { key: key.clone(), id, to: Status::Staging });
        if !never_boots {
            let boot = provision + Duration::from_millis(self.cfg.stage_ms);
            self.at(boot, Ev::InstStatus { key, id, to: Status::Running });
        }
        Ok(op)
    }

    fn audit_insert(&mut self, key: &InstanceKey, rid: Option<String>) {
        let ids = self.inserts.entry(key.clone()).or_default();
        if ids.is_empty() {
            self.insert_order.push_back(key.clone());
        }
        if ids.len() < KEEP_INSERT_IDS {
            ids.push(rid.unwrap_or_default());
        }
        while self.insert_order.len() > self.cfg.max_operations {
            let old = self.insert_order.pop_front().expect("non-empty");
            self.inserts.remove(&old);
        }
    }

    fn build_instance(&mut self, id: u64, machine_type: String, cpus: f64, body: &Value) -> Instance {
        let labels: BTreeMap<String, String> = body
            .get("labels")
            .and_then(Value::as_object)
            .map(|m| m.iter().map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_owned())).collect())
            .unwrap_or_default();
        let metadata: Vec<(String, Option<String>)> = body
            .pointer("/metadata/items")
            .and_then(Value::as_array)
            .map(|items| {
                items
                    .iter()
                    .map(|i| {
                        let k = i.get("key").and_then(Value::as_str).unwrap_or_default().to_owned();
                        (k, i.get("value").and_then(Value::as_str).map(str::to_owned))
                    })
                    .collect()
            })
            .unwrap_or_default();
        let swarming = metadata
            .iter()
            .find(|(k, _)| k == "swarming-server")
            .and_then(|(_, v)| v.as_deref())
            .map(server_key);
        let given: Vec<Value> = body
            .get("networkInterfaces")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_else(|| vec![json!({})]);
        let mut nics = Vec::new();
        for nic in given {
            let nat = nic
                .pointer("/accessConfigs/0")
                .map(|ac| ac.get("name").and_then(Value::as_str).unwrap_or("External NAT").to_owned())
                .map(|name| (name, self.random_ip(35)));
            nics.push(Nic {
                network: nic
                    .get("network")
                    .and_then(Value::as_str)
                    .unwrap_or("global/networks/default")
                    .to_owned(),
                subnetwork: nic.get("subnetwork").and_then(Value::as_str).map(str::to_owned),
                ip: self.random_ip(10),
                nat,
            });
        }
        let mut rest = body.clone();
        if let Some(obj) = rest.as_object_mut() {
            for k in [
                "name",
                "machineType",
                "labels",
                "metadata",
                "networkInterfaces",
                "id",
                "status",
                "selfLink",
                "zone",
            ] {
                obj.remove(k);
            }
        }
        let never_boots = self.chance(self.faults.never_boot_rate);
        let sched = &body["scheduling"];
        let spot = sched["provisioningModel"] == "SPOT" || sched["preemptible"] == true;
        let image =
            body["disks"][0]["initializeParams"]["sourceImage"].as_str().unwrap_or_default().to_owned();
        Instance {
            spot,
            image,
            id,
            status: Status::Provisioning,
            created: self.now_utc(),
            machine_type,
            cpus,
            labels,
            metadata,
            nics,
            rest: rest.to_string().into_boxed_str(),
            never_boots,
            swarming,
            deleting: false,
            counted: true,
            cpus_held: true,
            stopped: false,
            resuming: false,
        }
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
        filter: &crate::filter::Filter,
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
        self.operations.get(name).filter(|op| op.project == project && op.zone == zone).ok_or_else(|| {
            ApiError::new(
                404,
                "notFound",
                format!("The resource 'projects/{project}/zones/{zone}/operations/{name}' was not found"),
            )
        })
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
