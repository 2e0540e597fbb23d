//! How an instance is made, for `instances.insert` and `bulkInsert` alike: why a zone cannot
//! take it now (stockouts, region quotas), the instance built from an insert body, its insert
//! operation and boot, and the insert audit.

use super::*;

impl World {
    /// Why `zone` cannot take an instance of `machine_type` for `project` now: a stockout (of the
    /// zone, of that machine type in it, or the simulator's `max_instances`) or a region quota
    /// (CPUS, INSTANCES).
    pub(super) fn refusal(&self, project: &str, zone: &str, machine_type: &str) -> Option<OpError> {
        let cpus = self.cfg.cpus_of(machine_type);
        let region = region_of(zone);
        let limits = self.faults.limits(project, region, &self.cfg);
        let usage = self.usage.get(&(project.to_owned(), region.to_owned())).cloned().unwrap_or_default();
        if self.faults.stocked_out(zone, machine_type) || self.instances.len() >= self.cfg.max_instances {
            Some(OpError {
                code: "ZONE_RESOURCE_POOL_EXHAUSTED".into(),
                message: format!(
                    "The zone 'projects/{project}/zones/{zone}' does not have enough resources available to fulfill the request.  Try a different zone, or try again later."
                ),
                http: 503,
            })
        } else if usage.cpus + cpus > limits.cpus {
            Some(quota_error("CPUS", limits.cpus, region))
        } else if usage.instances + 1 > limits.instances {
            Some(quota_error("INSTANCES", limits.instances as f64, region))
        } else {
            None
        }
    }

    /// Makes the instance `key` of `machine_type` from `body` (an insert body: labels, metadata,
    /// network interfaces, scheduling, disks, ...) and its `insert` operation (with `rid`, in
    /// `group`), which it boots as every insert; or, on a `failure`, only the operation, which
    /// ends with it. Returns the operation's name.
    pub(super) fn make(
        &mut self,
        key: InstanceKey,
        machine_type: String,
        body: &Value,
        rid: Option<String>,
        group: Option<&str>,
        failure: Option<OpError>,
    ) -> String {
        let id = self.rng.random::<u64>() >> 1;
        let (project, zone, name) = (key.0.clone(), key.1.clone(), key.2.clone());
        let mut op = self.fresh_op(&project, Scope::Zone, &zone, "insert", &name);
        op.target_id = id;
        op.request_id = rid;
        op.group = group.map(str::to_owned);
        op.pending_error = failure;
        let failed = op.pending_error.is_some();
        let op = self.add_op(op);
        self.run_op(&op, Duration::from_millis(self.cfg.op_ms));
        if failed {
            return op;
        }
        let cpus = self.cfg.cpus_of(&machine_type);
        let inst = self.build_instance(id, machine_type, cpus, body);
        let never_boots = inst.never_boots;
        self.counts.instance(&zone, &name, None, Some(counts::class(&inst)));
        self.instances.insert(key.clone(), inst);
        let u = self.usage.entry((project, region_of(&zone).to_owned())).or_default();
        u.cpus += cpus;
        u.instances += 1;
        let provision = Duration::from_millis(self.cfg.provision_ms);
        self.at(provision, Ev::InstStatus { key: key.clone(), id, to: Status::Staging });
        if !never_boots {
            let boot = provision + Duration::from_millis(self.cfg.stage_ms);
            self.at(boot, Ev::InstStatus { key, id, to: Status::Running });
        }
        op
    }

    pub(super) fn audit_insert(&mut self, key: &InstanceKey, rid: Option<String>) {
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
}
