//! Compute Engine on the world: instances insert, delete, get, list, preempt; operations; zones,
//! regions and quotas; and their JSON.

use super::*;

impl World {
    fn new_op(
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
        self.op_order.push_back(name.clone());
        if let Some(rid) = rid {
            self.request_ids.insert((project.to_owned(), zone.to_owned(), rid), name.clone());
        }
        while self.op_order.len() > self.cfg.max_operations {
            let old = self.op_order.pop_front().expect("non-empty");
            if let Some(op) = self.operations.remove(&old)
                && let Some(rid) = op.request_id
            {
                self.request_ids.remove(&(op.project, op.zone, rid));
            }
        }
        name
    }

    /// Schedules an operation's PENDING → RUNNING → DONE over `total`.
    fn run_op(&mut self, name: &str, total: Duration) {
        self.at(total / 2, Ev::OpStatus { op: name.to_owned(), to: OpStatus::Running });
        self.at(total, Ev::OpStatus { op: name.to_owned(), to: OpStatus::Done });
    }

    /// A requestId: a valid non-nil UUID, still inside its window.
    fn replay(&self, project: &str, zone: &str, rid: &Option<String>) -> Result<Option<String>, ApiError> {
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

    fn check_zone(&self, zone: &str) -> Result<(), ApiError> {
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
        Instance {
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
        inst.deleting = true;
        if inst.status != Status::Terminated {
            inst.status = Status::Stopping;
        }
        let server = inst.swarming.clone();
        let stop = Duration::from_millis(self.cfg.stop_ms);
        let total = stop * 2;
        let op = self.new_op(project, zone, "delete", name, id, rid);
        self.run_op(&op, total);
        if first {
            self.at(stop, Ev::InstStatus { key: key.clone(), id, to: Status::Terminated });
            self.at(total, Ev::InstGone { key, id });
            if let Some(server) = server {
                self.bot_loses_instance(server, name, id);
            }
        }
        Ok(op)
    }

    fn bot_loses_instance(&mut self, server: String, bot: &str, session: u64) {
        let after = Duration::from_millis(self.cfg.bot_death_ms);
        self.at(after, Ev::BotDeath { server, bot: bot.to_owned(), session, terminated: false });
    }

    /// Preempts a running instance: STOPPING, then TERMINATED (it stays); its bot dies.
    pub fn preempt(&mut self, project: &str, zone: &str, name: &str) -> Result<(), ApiError> {
        let key: InstanceKey = (project.to_owned(), zone.to_owned(), name.to_owned());
        let Some(inst) = self.instances.get_mut(&key) else { return Err(not_found(project, zone, name)) };
        if inst.deleting || inst.status == Status::Terminated {
            return Ok(());
        }
        inst.status = Status::Stopping;
        let (id, server) = (inst.id, inst.swarming.clone());
        self.at(Duration::from_millis(self.cfg.stop_ms), Ev::InstStatus { key, id, to: Status::Terminated });
        if let Some(server) = server {
            self.bot_loses_instance(server, name, id);
        }
        Ok(())
    }

    /// `instances.get`.
    pub fn get(&self, project: &str, zone: &str, name: &str) -> Result<Value, ApiError> {
        self.check_zone(zone)?;
        let key: InstanceKey = (project.to_owned(), zone.to_owned(), name.to_owned());
        self.instances
            .get(&key)
            .map(|i| self.instance_json(&key, i))
            .ok_or_else(|| not_found(project, zone, name))
    }

    /// `instances.list`: one page of instances matching `filter`, after `token`.
    pub fn list(
        &self,
        project: &str,
        zone: &str,
        filter: &crate::filter::Filter,
        max: usize,
        token: Option<&str>,
    ) -> Result<(Vec<Value>, Option<String>), ApiError> {
        self.check_zone(zone)?;
        let start: InstanceKey = (project.to_owned(), zone.to_owned(), token.unwrap_or_default().to_owned());
        let mut items = Vec::new();
        let mut next = None;
        let range = self.instances.range(start..).filter(|(k, _)| Some(k.2.as_str()) != token);
        for (k, i) in range.take_while(|(k, _)| k.0 == project && k.1 == zone) {
            if !filter.matches(&k.2, i) {
                continue;
            }
            if items.len() == max {
                next = items.last().and_then(|v: &Value| v["name"].as_str()).map(str::to_owned);
                break;
            }
            items.push(self.instance_json(k, i));
        }
        Ok((items, next))
    }

    fn instance_json(&self, key: &InstanceKey, i: &Instance) -> Value {
        let (project, zone, name) = key;
        let mut v: Value = serde_json::from_str(&i.rest).unwrap_or_else(|_| json!({}));
        let region = region_of(zone);
        let nics: Vec<Value> = i
            .nics
            .iter()
            .enumerate()
            .map(|(n, nic)| {
                let mut j = json!({
                    "kind": "compute#networkInterface",
                    "name": format!("nic{n}"),
                    "network": url(project, nic.network.trim_start_matches("global/")).replace(
                        &format!("projects/{project}/networks/"),
                        &format!("projects/{project}/global/networks/"),
                    ),
                    "networkIP": nic.ip,
                });
                if let Some(sub) = &nic.subnetwork {
                    j["subnetwork"] = json!(url(project, &format!("regions/{region}/subnetworks/{}", last(sub))));
                }
                if let Some((ac_name, ip)) = &nic.nat {
                    j["accessConfigs"] = json!([{
                        "kind": "compute#accessConfig", "type": "ONE_TO_ONE_NAT", "name": ac_name, "natIP": ip,
                        "networkTier": "PREMIUM"
                    }]);
                }
                j
            })
            .collect();
        let items: Vec<Value> = i
            .metadata
            .iter()
            .map(|(k, v)| match v {
                Some(v) => json!({"key": k, "value": v}),
                None => json!({"key": k}),
            })
            .collect();
        let obj = v.as_object_mut().expect("object");
        obj.insert("kind".into(), json!("compute#instance"));
        obj.insert("id".into(), json!(i.id.to_string()));
        obj.insert(
            "creationTimestamp".into(),
            json!(i.created.to_rfc3339_opts(SecondsFormat::Millis, false)),
        );
        obj.insert("name".into(), json!(name));
        obj.insert("zone".into(), json!(url(project, &format!("zones/{zone}"))));
        obj.insert(
            "machineType".into(),
            json!(url(project, &format!("zones/{zone}/machineTypes/{}", last(&i.machine_type)))),
        );
        obj.insert("status".into(), json!(i.status.name()));
        obj.insert("selfLink".into(), json!(url(project, &format!("zones/{zone}/instances/{name}"))));
        obj.insert("networkInterfaces".into(), json!(nics));
        obj.insert(
            "metadata".into(),
            json!({"kind": "compute#metadata", "fingerprint": "c2ltdWxhdG9y", "items": items}),
        );
        if !i.labels.is_empty() {
            obj.insert("labels".into(), json!(i.labels));
        }
        v
    }

    /// An operation's JSON.
    pub fn op_json(&self, name: &str) -> Option<Value> {
        let op = self.operations.get(name)?;
        let mut v = json!({
            "kind": "compute#operation",
            "id": op.id.to_string(),
            "name": op.name,
            "zone": url(&op.project, &format!("zones/{}", op.zone)),
            "operationType": op.kind,
            "targetLink": url(&op.project, &format!("zones/{}/instances/{}", op.zone, op.target)),
            "targetId": op.target_id.to_string(),
            "status": match op.status { OpStatus::Pending => "PENDING", OpStatus::Running => "RUNNING", OpStatus::Done => "DONE" },
            "user": "simulator@gce-backend",
            "progress": match op.status { OpStatus::Pending => 0, OpStatus::Running => 50, OpStatus::Done => 100 },
            "insertTime": op.insert_time.to_rfc3339_opts(SecondsFormat::Millis, false),
            "selfLink": url(&op.project, &format!("zones/{}/operations/{}", op.zone, op.name)),
        });
        if let Some(t) = op.start_time {
            v["startTime"] = json!(t.to_rfc3339_opts(SecondsFormat::Millis, false));
        }
        if let Some(t) = op.end_time {
            v["endTime"] = json!(t.to_rfc3339_opts(SecondsFormat::Millis, false));
        }
        if let Some(rid) = &op.request_id {
            v["clientOperationId"] = json!(rid);
        }
        if let Some(e) = &op.error {
            v["httpErrorStatusCode"] = json!(e.http);
            v["httpErrorMessage"] = json!(if e.http == 403 { "FORBIDDEN" } else { "SERVICE UNAVAILABLE" });
            v["error"] = json!({"errors": [{"code": e.code, "message": e.message}]});
        }
        Some(v)
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

    /// `zones.list` items.
    pub fn zones(&self, project: &str) -> Vec<Value> {
        self.cfg
            .zones
            .iter()
            .enumerate()
            .map(|(n, z)| {
                json!({
                    "kind": "compute#zone", "id": (2000 + n).to_string(), "name": z, "status": "UP",
                    "region": url(project, &format!("regions/{}", region_of(z))),
                    "selfLink": url(project, &format!("zones/{z}")),
                })
            })
            .collect()
    }

    /// `regions.list` items, with CPUS and INSTANCES quotas and their usage.
    pub fn regions(&self, project: &str) -> Vec<Value> {
        let regions: BTreeSet<&str> = self.cfg.zones.iter().map(|z| region_of(z)).collect();
        regions
            .into_iter()
            .enumerate()
            .map(|(n, r)| {
                let limits = self.faults.limits(project, r, &self.cfg);
                let usage = self.usage.get(&(project.to_owned(), r.to_owned())).cloned().unwrap_or_default();
                let zones: Vec<String> = self
                    .cfg
                    .zones
                    .iter()
                    .filter(|z| region_of(z) == r)
                    .map(|z| url(project, &format!("zones/{z}")))
                    .collect();
                json!({
                    "kind": "compute#region", "id": (1000 + n).to_string(), "name": r, "status": "UP",
                    "zones": zones, "selfLink": url(project, &format!("regions/{r}")),
                    "quotas": [
                        {"metric": "CPUS", "limit": limits.cpus, "usage": usage.cpus},
                        {"metric": "INSTANCES", "limit": limits.instances as f64, "usage": usage.instances as f64},
                    ],
                })
            })
            .collect()
    }
}
