//! The scripted Compute Engine of handler unit tests: instances and templates by name, queued
//! answers per call, and a log of calls.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Mutex;

use async_trait::async_trait;
use chrono::{TimeZone, Utc};

use super::lock;
use crate::ports::compute::{
    BulkSpec, Compute, ComputeError, Instance, InstanceSpec, Operation, Power, Quota, Template, TemplateSpec,
};

/// A scripted Compute Engine: instances by name, queued answers for insert and delete, and a log
/// of calls.
#[derive(Debug, Default)]
pub struct FakeCompute {
    /// Instances by name.
    pub instances: Mutex<BTreeMap<String, Instance>>,
    /// Next answers to insert (empty: DONE, and the instance exists).
    pub inserts: Mutex<VecDeque<Result<Operation, ComputeError>>>,
    /// Next answers to delete (empty: DONE, and the instance is gone).
    pub deletes: Mutex<VecDeque<Result<Option<Operation>, ComputeError>>>,
    /// Next answers to suspend, resume, stop and start (empty: DONE, and the status follows).
    pub powers: Mutex<VecDeque<Result<Option<Operation>, ComputeError>>>,
    /// Next answers to zoneOperations.get (empty: DONE without error).
    pub operations: Mutex<VecDeque<Result<Option<Operation>, ComputeError>>>,
    /// Calls as `method name request_id`.
    pub calls: Mutex<Vec<String>>,
    /// Zones of every project (empty: `z` and `us-central1-b`).
    pub zones: Mutex<Vec<String>>,
    /// When set, zones.list and diskTypes.list fail with it.
    pub catalog_fail: Mutex<Option<ComputeError>>,
    /// Instance templates by name, as inserted.
    pub templates: Mutex<BTreeMap<String, TemplateSpec>>,
    /// Next answers to instanceTemplates.insert and delete, in call order (empty, or `Ok(None)`
    /// for an insert: DONE, and it exists or is gone).
    pub template_calls: Mutex<VecDeque<Result<Option<Operation>, ComputeError>>>,
    /// Next answers to globalOperations.get (empty: DONE without error).
    pub global_operations: Mutex<VecDeque<Result<Option<Operation>, ComputeError>>>,
}

impl FakeCompute {
    /// The calls so far.
    pub fn calls(&self) -> Vec<String> {
        lock(&self.calls).clone()
    }

    /// An instance as the fake creates it.
    pub fn instance(name: &str, labels: &[(&str, &str)]) -> Instance {
        Instance {
            name: name.to_owned(),
            id: format!("{}", name.len() * 1000 + name.bytes().map(usize::from).sum::<usize>()),
            created: Utc.with_ymd_and_hms(2026, 11, 21, 10, 0, 0).unwrap(),
            url: format!("https://compute/projects/p/zones/z/instances/{name}"),
            labels: labels.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect(),
            internal_ip: "10.0.0.1".into(),
            external_ip: "35.0.0.1".into(),
            status: "RUNNING".into(),
        }
    }
}

fn done(name: &str) -> Operation {
    Operation { name: format!("op-{name}"), done: true, error: None }
}

#[async_trait]
impl Compute for FakeCompute {
    async fn insert(
        &self,
        _p: &str,
        _z: &str,
        rid: &str,
        spec: &InstanceSpec,
    ) -> Result<Operation, ComputeError> {
        let name = spec.name.clone();
        lock(&self.calls).push(format!("insert {name} {rid}"));
        if let Some(answer) = lock(&self.inserts).pop_front() {
            return answer;
        }
        let refs: Vec<(&str, &str)> = spec.labels.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        lock(&self.instances).entry(name.clone()).or_insert_with(|| Self::instance(&name, &refs));
        Ok(done(&name))
    }

    /// Makes every name not taken yet (an answer queued in `inserts` comes first), each with the
    /// spec's labels; the operation is `op-bulk-<first name>`.
    async fn bulk_insert(
        &self,
        _p: &str,
        _z: &str,
        rid: &str,
        spec: &BulkSpec,
    ) -> Result<Operation, ComputeError> {
        let from = spec.template.as_ref().map(|t| format!(" from {}", t.name)).unwrap_or_default();
        lock(&self.calls).push(format!("bulk_insert {} {rid}{from}", spec.names.join(",")));
        if let Some(answer) = lock(&self.inserts).pop_front() {
            return answer;
        }
        if let Some(t) = spec.template.as_ref().filter(|t| !lock(&self.templates).contains_key(&t.name)) {
            let message =
                format!("The resource 'projects/{_p}/global/instanceTemplates/{}' was not found", t.name);
            return Err(ComputeError::from_http(Some(404), "notFound", &message));
        }
        let labels = &spec.instance.labels;
        let refs: Vec<(&str, &str)> = labels.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let mut instances = lock(&self.instances);
        for name in &spec.names {
            instances.entry(name.clone()).or_insert_with(|| Self::instance(name, &refs));
        }
        let first = spec.names.first().cloned().unwrap_or_default();
        Ok(Operation { name: format!("op-bulk-{first}"), done: true, error: None })
    }

    async fn operation(&self, _p: &str, _z: &str, op: &str) -> Result<Option<Operation>, ComputeError> {
        lock(&self.calls).push(format!("operation {op}"));
        match lock(&self.operations).pop_front() {
            Some(answer) => answer,
            None => Ok(Some(Operation { name: op.to_owned(), done: true, error: None })),
        }
    }

    async fn get(&self, _p: &str, _z: &str, name: &str) -> Result<Option<Instance>, ComputeError> {
        lock(&self.calls).push(format!("get {name}"));
        Ok(lock(&self.instances).get(name).cloned())
    }

    async fn delete(
        &self,
        _p: &str,
        _z: &str,
        name: &str,
        rid: &str,
    ) -> Result<Option<Operation>, ComputeError> {
        lock(&self.calls).push(format!("delete {name} {rid}"));
        if let Some(answer) = lock(&self.deletes).pop_front() {
            return answer;
        }
        Ok(lock(&self.instances).remove(name).map(|_| done(name)))
    }

    async fn power(
        &self,
        _p: &str,
        _z: &str,
        name: &str,
        power: Power,
        rid: &str,
    ) -> Result<Option<Operation>, ComputeError> {
        lock(&self.calls).push(format!("{} {name} {rid}", power.verb()));
        if let Some(answer) = lock(&self.powers).pop_front() {
            return answer;
        }
        let status = match power {
            Power::Suspend => "SUSPENDED",
            Power::Stop => "TERMINATED",
            Power::Resume | Power::Start => "RUNNING",
        };
        Ok(lock(&self.instances).get_mut(name).map(|i| {
            i.status = status.into();
            done(name)
        }))
    }

    async fn list(
        &self,
        _p: &str,
        _z: &str,
        filter: &str,
        _page: Option<String>,
    ) -> Result<(Vec<Instance>, Option<String>), ComputeError> {
        lock(&self.calls).push("list".into());
        // Honours `labels.K = "V"` and `status != "S"` clauses (all must hold).
        let clauses: Vec<(String, bool, String)> = filter
            .split(['(', ')'])
            .filter_map(|c| {
                let (k, ne, v) = match c.split_once("!=") {
                    Some((k, v)) => (k, true, v),
                    None => c.split_once('=').map(|(k, v)| (k, false, v))?,
                };
                Some((k.trim().to_owned(), ne, v.trim().trim_matches('"').to_owned()))
            })
            .collect();
        let keep = |i: &Instance| {
            clauses.iter().all(|(k, ne, v)| {
                let got = match k.strip_prefix("labels.") {
                    Some(l) => i.labels.get(l).cloned().unwrap_or_default(),
                    None if k == "status" => i.status.clone(),
                    None => return true,
                };
                (got == *v) != *ne
            })
        };
        Ok((lock(&self.instances).values().filter(|i| keep(i)).cloned().collect(), None))
    }

    async fn insert_template(
        &self,
        _p: &str,
        rid: &str,
        spec: &TemplateSpec,
    ) -> Result<Operation, ComputeError> {
        lock(&self.calls).push(format!("insert_template {} {rid}", spec.name));
        // A queued `Ok(None)` stands for the default answer.
        if let Some(answer) = lock(&self.template_calls).pop_front().filter(|a| !matches!(a, Ok(None))) {
            return answer.map(|op| op.unwrap_or_else(|| done(&spec.name)));
        }
        lock(&self.templates).entry(spec.name.clone()).or_insert_with(|| spec.clone());
        Ok(done(&spec.name))
    }

    async fn template(&self, _p: &str, name: &str) -> Result<Option<Template>, ComputeError> {
        lock(&self.calls).push(format!("template {name}"));
        let t = lock(&self.templates).get(name).cloned();
        Ok(t.map(|t| Template { name: t.name, labels: t.instance.labels }))
    }

    async fn delete_template(
        &self,
        _p: &str,
        name: &str,
        rid: &str,
    ) -> Result<Option<Operation>, ComputeError> {
        lock(&self.calls).push(format!("delete_template {name} {rid}"));
        if let Some(answer) = lock(&self.template_calls).pop_front() {
            return answer;
        }
        Ok(lock(&self.templates).remove(name).map(|_| done(name)))
    }

    /// Every template (the filter is not read: callers check the labels).
    async fn templates(
        &self,
        _p: &str,
        _filter: &str,
        _page: Option<String>,
    ) -> Result<(Vec<Template>, Option<String>), ComputeError> {
        lock(&self.calls).push("templates".into());
        if let Some(e) = lock(&self.catalog_fail).clone() {
            return Err(e);
        }
        let all = lock(&self.templates)
            .values()
            .map(|t| Template { name: t.name.clone(), labels: t.instance.labels.clone() })
            .collect();
        Ok((all, None))
    }

    async fn global_operation(&self, _p: &str, op: &str) -> Result<Option<Operation>, ComputeError> {
        lock(&self.calls).push(format!("global_operation {op}"));
        match lock(&self.global_operations).pop_front() {
            Some(answer) => answer,
            None => Ok(Some(Operation { name: op.to_owned(), done: true, error: None })),
        }
    }

    async fn zones(&self, _p: &str) -> Result<Vec<String>, ComputeError> {
        lock(&self.calls).push("zones".into());
        if let Some(e) = lock(&self.catalog_fail).clone() {
            return Err(e);
        }
        let zones = lock(&self.zones).clone();
        Ok(if zones.is_empty() { vec!["z".into(), "us-central1-b".into()] } else { zones })
    }

    async fn disk_types(&self, _p: &str, _z: &str) -> Result<Vec<String>, ComputeError> {
        lock(&self.calls).push("disk_types".into());
        if let Some(e) = lock(&self.catalog_fail).clone() {
            return Err(e);
        }
        Ok(["pd-standard", "pd-balanced", "pd-ssd", "local-ssd"].map(String::from).to_vec())
    }

    async fn quotas(&self, _p: &str) -> Result<Vec<Quota>, ComputeError> {
        Ok(Vec::new())
    }
}
