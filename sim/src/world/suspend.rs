//! Suspend and resume, stop and start on the world, their bots, and the billing they change.
//! suspend: RUNNING → SUSPENDING → SUSPENDED after `suspend_ms`; resume: SUSPENDED → STAGING →
//! RUNNING after `resume_ms`, and the same bot is back at once; stop: RUNNING or SUSPENDED →
//! STOPPING → TERMINATED after `stop_ms`; start: TERMINATED → PROVISIONING → STAGING → RUNNING
//! after the boot times, and its bot connects anew. A suspended or stopped instance keeps its
//! instance quota and releases its CPUs. Seconds spent billed as running, suspended and stopped
//! are summed at each step of the clock from the counts by status (no scan).

use super::*;

fn unsupported(what: &str) -> ApiError {
    ApiError::new(400, "unsupportedOperation", format!("UNSUPPORTED_OPERATION: {what}"))
}

impl World {
    /// Seconds billed so far, by class (see [`Billing`]).
    pub fn billing(&self) -> Billing {
        self.billing
    }

    /// Operations made, by kind (`insert`, `delete`, `suspend`, `resume`, `stop`, `start`).
    pub fn operations_made(&self) -> &BTreeMap<&'static str, u64> {
        &self.ops_made
    }

    /// Seconds billed and operations made per Config (the instance name's prefix, see
    /// [`crate::names::config_of`]), for every Config that had an instance or an operation.
    pub fn usage_by_config(&self) -> &BTreeMap<String, ConfigUsage> {
        &self.by_config
    }

    /// The live (not deleting) instance `name` for an action, or why not.
    fn for_action(&mut self, project: &str, zone: &str, name: &str) -> Result<InstanceKey, ApiError> {
        self.check_zone(zone)?;
        let key: InstanceKey = (project.to_owned(), zone.to_owned(), name.to_owned());
        match self.instances.get(&key) {
            None => Err(not_found(project, zone, name)),
            Some(i) if i.deleting => Err(ApiError::new(
                400,
                "resourceNotReady",
                format!("The resource 'projects/{project}/zones/{zone}/instances/{name}' is not ready"),
            )),
            Some(_) => Ok(key),
        }
    }

    /// Sets the status of the instance at `key` now, counted.
    fn set_status(&mut self, key: &InstanceKey, to: Status) {
        let Some(inst) = self.instances.get_mut(key) else { return };
        let before = counts::class(inst);
        inst.status = to;
        self.counts.instance(&key.1, &key.2, Some(before), Some(counts::class(inst)));
    }

    /// Makes an operation for an action on `key` (running over `op_ms`).
    fn action_op(&mut self, key: &InstanceKey, kind: &'static str, rid: Option<String>) -> String {
        let id = self.instances.get(key).map(|i| i.id).unwrap_or_default();
        let op = self.new_op(&key.0, &key.1, kind, &key.2, id, rid);
        self.run_op(&op, Duration::from_millis(self.cfg.op_ms));
        op
    }

    /// `instances.suspend`: only a RUNNING instance.
    pub fn suspend(
        &mut self,
        project: &str,
        zone: &str,
        name: &str,
        rid: Option<String>,
    ) -> Result<String, ApiError> {
        if let Some(op) = self.replay(project, zone, &rid)? {
            return Ok(op);
        }
        let key = self.for_action(project, zone, name)?;
        match self.instances[&key].status {
            Status::Running => {}
            Status::Suspended | Status::Suspending => {
                return Err(unsupported("You cannot suspend an already suspended instance."));
            }
            _ => return Err(unsupported("You cannot suspend an instance that is stopped or terminated.")),
        }
        self.set_status(&key, Status::Suspending);
        self.instance_silences(&key);
        let id = self.instances[&key].id;
        self.at(
            Duration::from_millis(self.cfg.suspend_ms),
            Ev::InstStatus { key: key.clone(), id, to: Status::Suspended },
        );
        Ok(self.action_op(&key, "suspend", rid))
    }

    /// `instances.resume`: only a SUSPENDED instance.
    pub fn resume(
        &mut self,
        project: &str,
        zone: &str,
        name: &str,
        rid: Option<String>,
    ) -> Result<String, ApiError> {
        if let Some(op) = self.replay(project, zone, &rid)? {
            return Ok(op);
        }
        let key = self.for_action(project, zone, name)?;
        if self.instances[&key].status != Status::Suspended {
            return Err(unsupported("You can only resume a suspended instance."));
        }
        self.set_status(&key, Status::Staging);
        self.hold_cpus(&key);
        let inst = self.instances.get_mut(&key).expect("checked");
        inst.resuming = true;
        let id = inst.id;
        self.at(
            Duration::from_millis(self.cfg.resume_ms),
            Ev::InstStatus { key: key.clone(), id, to: Status::Running },
        );
        Ok(self.action_op(&key, "resume", rid))
    }

    /// `instances.stop`: a RUNNING or SUSPENDED instance (TERMINATED: nothing to do).
    pub fn stop(
        &mut self,
        project: &str,
        zone: &str,
        name: &str,
        rid: Option<String>,
    ) -> Result<String, ApiError> {
        if let Some(op) = self.replay(project, zone, &rid)? {
            return Ok(op);
        }
        let key = self.for_action(project, zone, name)?;
        let status = self.instances[&key].status;
        match status {
            Status::Running | Status::Suspended => {
                self.set_status(&key, Status::Stopping);
                if status == Status::Running {
                    self.instance_silences(&key);
                }
                let inst = self.instances.get_mut(&key).expect("checked");
                inst.stopped = true;
                inst.resuming = false;
                let id = inst.id;
                let after = Duration::from_millis(self.cfg.stop_ms);
                self.at(after, Ev::InstStatus { key: key.clone(), id, to: Status::Terminated });
            }
            Status::Terminated => {}
            _ => return Err(unsupported("You cannot stop an instance that is not running or suspended.")),
        }
        Ok(self.action_op(&key, "stop", rid))
    }

    /// `instances.start`: a TERMINATED instance boots again; its bot connects anew.
    pub fn start(
        &mut self,
        project: &str,
        zone: &str,
        name: &str,
        rid: Option<String>,
    ) -> Result<String, ApiError> {
        if let Some(op) = self.replay(project, zone, &rid)? {
            return Ok(op);
        }
        let key = self.for_action(project, zone, name)?;
        match self.instances[&key].status {
            Status::Terminated => {}
            Status::Running | Status::Staging | Status::Provisioning => {}
            _ => return Err(unsupported("You cannot start an instance that is stopping or suspended.")),
        }
        if self.instances[&key].status == Status::Terminated {
            self.set_status(&key, Status::Provisioning);
            self.hold_cpus(&key);
            let inst = self.instances.get_mut(&key).expect("checked");
            inst.stopped = false;
            if !inst.counted {
                // A preempted instance released its whole quota.
                inst.counted = true;
                let u = self.usage.entry((key.0.clone(), region_of(&key.1).to_owned())).or_default();
                u.instances += 1;
            }
            let id = self.instances[&key].id;
            let provision = Duration::from_millis(self.cfg.provision_ms);
            let boot = provision + Duration::from_millis(self.cfg.stage_ms);
            self.at(provision, Ev::InstStatus { key: key.clone(), id, to: Status::Staging });
            self.at(boot, Ev::InstStatus { key: key.clone(), id, to: Status::Running });
        }
        Ok(self.action_op(&key, "start", rid))
    }

    /// Counts the CPUs of the instance at `key` in its region's usage again.
    fn hold_cpus(&mut self, key: &InstanceKey) {
        let Some(inst) = self.instances.get_mut(key).filter(|i| !i.cpus_held) else { return };
        inst.cpus_held = true;
        let cpus = inst.cpus;
        self.usage.entry((key.0.clone(), region_of(&key.1).to_owned())).or_default().cpus += cpus;
    }

    /// The instance at `key` reached `status` (after the change): quota follows. SUSPENDED and a
    /// stop's TERMINATED release its CPUs only; another TERMINATED (preempted, deleted) releases
    /// its whole quota.
    pub(super) fn quota_follows(&mut self, key: &InstanceKey, status: Status) {
        let Some(inst) = self.instances.get_mut(key) else { return };
        let region = (key.0.clone(), region_of(&key.1).to_owned());
        let keeps =
            status == Status::Suspended || (status == Status::Terminated && inst.stopped && !inst.deleting);
        if (keeps || status == Status::Terminated) && inst.cpus_held {
            inst.cpus_held = false;
            let cpus = inst.cpus;
            self.usage.entry(region.clone()).or_default().cpus -= cpus;
        }
        let Some(inst) = self.instances.get_mut(key) else { return };
        if status == Status::Terminated && !keeps && inst.counted {
            inst.counted = false;
            self.usage.entry(region).or_default().instances -= 1;
        }
    }

    /// The bot of the instance at `key` goes silent now (its instance stops running): its task
    /// ends BOT_DIED, its last contact is frozen, and it is dead after `bot_death_ms` unless it
    /// is back first (a resume).
    pub(super) fn instance_silences(&mut self, key: &InstanceKey) {
        let Some(inst) = self.instances.get(key) else { return };
        let Some(server) = inst.swarming.clone() else { return };
        let session = inst.id;
        let name = &key.2;
        let now = self.now_utc();
        let silence = self.next();
        let Some(b) = self.bots.get_mut(&server).and_then(|m| m.get_mut(name)) else { return };
        if b.session != session || b.dead_at.is_some() || b.silent_at.is_some() {
            return;
        }
        b.silent_at = Some(now);
        b.silence = silence;
        self.bot_stops_working(&server, name);
        let after = Duration::from_millis(self.cfg.bot_death_ms);
        self.at(after, Ev::BotSilentDeath { server, bot: name.clone(), session, silence });
    }

    /// A silent bot's death, if it is still in that silence.
    pub(super) fn silent_death(&mut self, server: String, bot: String, session: u64, silence: u64) {
        let live = self.bots.get(&server).and_then(|m| m.get(&bot));
        if live.is_some_and(|b| b.session == session && b.silence == silence && b.silent_at.is_some()) {
            self.apply(Ev::BotDeath { server, bot, session, terminated: false });
        }
    }

    /// The instance at `key` runs again after a resume: its bot is back at once (same record,
    /// dead cleared, an event) and takes work; with no bot record, it connects as after a boot.
    pub(super) fn bot_resumes(&mut self, key: &InstanceKey) {
        let Some(inst) = self.instances.get(key) else { return };
        let Some(server) = inst.swarming.clone() else { return };
        let session = inst.id;
        let now = self.now_utc();
        let name = key.2.clone();
        let Some(b) =
            self.bots.get_mut(&server).and_then(|m| m.get_mut(&name)).filter(|b| b.session == session)
        else {
            self.at(
                Duration::from_millis(self.cfg.bot_connect_ms),
                Ev::BotConnect { server, key: key.clone(), session },
            );
            return;
        };
        if b.deleted || b.termination_task_id.is_some() {
            return; // deleted or terminated: its bot process is gone for good
        }
        let before = BotState::of(b);
        b.silent_at = None;
        b.silence = 0;
        b.dead_at = None;
        push_event(b, now, "bot_connected", "resumed".into());
        self.counts.bot(Some(before), Some(BotState::of(b)));
        self.bot_idle(&server, &name);
    }
}
