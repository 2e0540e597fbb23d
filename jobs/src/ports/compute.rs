//! The Compute Engine port, and the one place Compute errors are classified.

use std::collections::BTreeMap;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use crate::config::Attributes;

/// What kind of failure, decided once here (adapters pass raw status, reason and message).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// 404.
    NotFound,
    /// 409 `alreadyExists`.
    AlreadyExists,
    /// 429, or `rateLimitExceeded`: retry with backoff.
    RateLimited,
    /// 5xx, or no answer: retry with backoff.
    Transient,
    /// `QUOTA_EXCEEDED` (or a 403 quota reason): back off the (project, zone).
    Quota,
    /// `ZONE_RESOURCE_POOL_EXHAUSTED` and kin: back off the (project, zone).
    Stockout,
    /// Anything else: the request itself is wrong.
    Invalid,
    /// Not sent: the project's rate limit for this kind of call is used up for now
    /// ([`ComputeError::retry_after`] says when to look again; not a failure).
    Throttled,
}

impl Kind {
    /// Its name in metrics labels.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::NotFound => "not_found",
            Kind::AlreadyExists => "already_exists",
            Kind::RateLimited => "rate_limited",
            Kind::Transient => "transient",
            Kind::Quota => "quota",
            Kind::Stockout => "stockout",
            Kind::Invalid => "invalid",
            Kind::Throttled => "throttled",
        }
    }
}

/// A Compute Engine error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("compute {code}: {message}")]
pub struct ComputeError {
    /// Classification.
    pub kind: Kind,
    /// HTTP status or GCE error code.
    pub code: String,
    /// Message.
    pub message: String,
    /// For [`Kind::Throttled`]: when a token will be there.
    pub retry_after: Option<std::time::Duration>,
}

impl ComputeError {
    /// Classifies an HTTP error answer (`http`: status, `reason`: `errors[].reason`).
    pub fn from_http(http: Option<u16>, reason: &str, message: &str) -> Self {
        // A bulkInsert refused because no zone had room (503 `insufficientCapacity`).
        let stockout = reason == "insufficientCapacity";
        let rate = reason == "rateLimitExceeded"
            || reason == "userRateLimitExceeded"
            || message.contains("Rate Limit Exceeded");
        let kind = match http {
            _ if rate => Kind::RateLimited,
            _ if stockout => Kind::Stockout,
            Some(404) => Kind::NotFound,
            Some(409) => Kind::AlreadyExists,
            Some(429) => Kind::RateLimited,
            Some(403) if reason.contains("quota") || reason.contains("Quota") => Kind::Quota,
            // Our token was refused (expired on the way, or revoked): the next call carries a
            // fresh one. A token without Compute's scope is a 403, not retried.
            Some(401) => Kind::Transient,
            Some(s) if s >= 500 => Kind::Transient,
            None => Kind::Transient,
            _ => Kind::Invalid,
        };
        let code = http.map_or_else(|| "unavailable".into(), |s| s.to_string());
        Self { kind, code, message: message.to_owned(), retry_after: None }
    }

    /// An HTTP error answer, classified as [`ComputeError::from_http`] does; its message says
    /// the status and its reason phrase (`phrase`), Compute's message, and how many times in a
    /// row the call was answered so within this attempt (the client's own retries of it):
    /// `503 Service Unavailable: Internal error. (×4 within this attempt)`.
    pub fn answered(status: u16, phrase: &str, reason: &str, message: &str, times: u32) -> Self {
        let mut e = Self::from_http(Some(status), reason, message);
        let status = match phrase {
            "" => status.to_string(),
            p => format!("{status} {p}"),
        };
        e.message = format!("{status}: {message} (×{times} within this attempt)");
        e
    }

    /// `message` without the count [`ComputeError::answered`] ends it with (` (×4 within this
    /// attempt)`): the same fault met again, however many times the client retried it this time.
    pub fn without_count(message: &str) -> &str {
        match message.strip_suffix(" within this attempt)").and_then(|m| m.rfind(" (×").map(|i| (m, i))) {
            Some((m, i)) if m[i + " (×".len()..].chars().all(|c| c.is_ascii_digit()) => &message[..i],
            _ => message,
        }
    }

    /// Classifies an operation that ended with `error.errors[0].code` (`http`:
    /// `httpErrorStatusCode`).
    pub fn from_operation(code: &str, http: Option<u16>, message: &str) -> Self {
        let kind = match code {
            "QUOTA_EXCEEDED" => Kind::Quota,
            "ZONE_RESOURCE_POOL_EXHAUSTED"
            | "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS"
            | "RESOURCE_EXHAUSTED" => Kind::Stockout,
            _ if message.contains("does not have enough resources available") => Kind::Stockout,
            _ if http.is_some_and(|h| h == 429 || h >= 500) => Kind::Transient,
            _ => Kind::Invalid,
        };
        Self { kind, code: code.to_owned(), message: message.to_owned(), retry_after: None }
    }

    /// A call not sent because the project's rate limit is used up; a token comes in `wait`.
    pub fn throttled(project: &str, class: &str, wait: std::time::Duration) -> Self {
        Self {
            kind: Kind::Throttled,
            code: "throttled".into(),
            message: format!("project {project}: {class} calls are rate-limited; next token in {wait:?}"),
            retry_after: Some(wait),
        }
    }
}

/// A zonal operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Operation {
    /// Operation name.
    pub name: String,
    /// DONE.
    pub done: bool,
    /// Set when it ended with an error.
    pub error: Option<ComputeError>,
}

/// What the service reads of an instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Instance {
    /// Name.
    pub name: String,
    /// Compute Engine's numeric id: new for every instance, even under a name used before.
    pub id: String,
    /// Creation time.
    pub created: DateTime<Utc>,
    /// selfLink.
    pub url: String,
    /// Labels.
    pub labels: BTreeMap<String, String>,
    /// First internal address.
    pub internal_ip: String,
    /// First external address.
    pub external_ip: String,
    /// PROVISIONING, STAGING, RUNNING, STOPPING, TERMINATED, SUSPENDED, …
    pub status: String,
}

impl Instance {
    /// What a VM keeps of its instance once made.
    pub fn placed(&self) -> crate::model::Placed {
        crate::model::Placed {
            unknown: Default::default(),
            url: self.url.clone(),
            instance_id: self.id.clone(),
            created: self.created,
            internal_ip: self.internal_ip.clone(),
            external_ip: self.external_ip.clone(),
        }
    }

    /// True when it is VM `vm_id` of `deployment` (the one test for "ours": adoption after a
    /// 409, a quarantined VM's instance, a registering instance): its labels name the deployment
    /// and the VM; or, made by a bulkInsert (which cannot label each instance on its own), they
    /// name the deployment and the VM's Config, and its name is one of the VM's hostnames.
    pub fn belongs_to(&self, vm_id: &str, deployment: &str) -> bool {
        use crate::config::labels;
        let label = |k: &str| self.labels.get(k).map(String::as_str);
        if label(labels::DEPLOYMENT) != Some(deployment) {
            return false;
        }
        match label(labels::VM) {
            Some(vm) => vm == vm_id,
            None => {
                let config = crate::naming::parse_id(vm_id).map(|(prefix, _)| prefix);
                config.is_some()
                    && label(labels::CONFIG) == config
                    && crate::naming::vm_id_of(&self.name) == Some(vm_id)
            }
        }
    }

    /// True when the instance cannot run its bot and will not by itself again: stopped,
    /// preempted, suspended (or on its way there).
    pub fn is_down(&self) -> bool {
        matches!(self.status.as_str(), "STOPPING" | "STOPPED" | "TERMINATED" | "SUSPENDING" | "SUSPENDED")
    }
}

/// An instance to create, in the service's terms; the adapter maps it to Compute's resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstanceSpec {
    /// Instance name (the VM's hostname).
    pub name: String,
    /// The template, its zone filled in.
    pub attributes: Attributes,
    /// Metadata items, resolved, with the Swarming server.
    pub metadata: Vec<(String, String)>,
    /// Labels: the template's and ours (deployment, Config, VM).
    pub labels: BTreeMap<String, String>,
}

/// Instances to create in one `instances.bulkInsert`: the same instance under several names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BulkSpec {
    /// What every instance is made from (its `name` is not used).
    pub instance: InstanceSpec,
    /// The instances' names (each VM's hostname), at least one.
    pub names: Vec<String>,
    /// An instance template of the project made from what it names (`None`: none to use): the
    /// bulk names it as its source and sends only what differs from it (the adapter sends the
    /// whole instance instead when a difference cannot be said as a patch).
    pub template: Option<TemplateSpec>,
}

/// A global instance template to create: its name, and the instance it makes (the spec's
/// `name` is not used; its labels are the template's, so a list can find ours).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TemplateSpec {
    /// Template name.
    pub name: String,
    /// Its description.
    pub description: String,
    /// The instance properties it holds.
    pub instance: InstanceSpec,
}

/// What the service reads of an instance template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template {
    /// Name.
    pub name: String,
    /// The labels its instances get (`properties.labels`): ours name the deployment, the Config
    /// and its revision.
    pub labels: BTreeMap<String, String>,
}

/// Quota of one region.
#[derive(Debug, Clone, PartialEq)]
pub struct Quota {
    /// Region.
    pub region: String,
    /// Metric (CPUS, INSTANCES, …).
    pub metric: String,
    /// Limit.
    pub limit: f64,
    /// Usage.
    pub usage: f64,
}

/// A change of an instance's power: park it warm, or wake it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Power {
    /// `instances.suspend`.
    Suspend,
    /// `instances.resume`.
    Resume,
    /// `instances.stop`.
    Stop,
    /// `instances.start`.
    Start,
}

impl Power {
    /// The method's name (`suspend`, …).
    pub fn verb(self) -> &'static str {
        match self {
            Power::Suspend => "suspend",
            Power::Resume => "resume",
            Power::Stop => "stop",
            Power::Start => "start",
        }
    }
}

/// Compute Engine.
#[async_trait]
pub trait Compute: Send + Sync + std::fmt::Debug {
    /// instances.insert with a requestId.
    async fn insert(
        &self,
        project: &str,
        zone: &str,
        request_id: &str,
        spec: &InstanceSpec,
    ) -> Result<Operation, ComputeError>;
    /// instances.bulkInsert of `spec.names` in one zone with a requestId, at least one of them
    /// made (`minCount` 1). Compute counts it as one call; its operation is followed with
    /// [`Compute::operation`], and what it made is found by the spec's labels.
    async fn bulk_insert(
        &self,
        project: &str,
        zone: &str,
        request_id: &str,
        spec: &BulkSpec,
    ) -> Result<Operation, ComputeError>;
    /// zoneOperations.get: where an operation is now (it never blocks: a pending operation is
    /// looked at again later, holding no worker); `None` when Compute no longer knows it.
    async fn operation(
        &self,
        project: &str,
        zone: &str,
        operation: &str,
    ) -> Result<Option<Operation>, ComputeError>;
    /// instances.get; `None` when it does not exist.
    async fn get(&self, project: &str, zone: &str, name: &str) -> Result<Option<Instance>, ComputeError>;
    /// instances.delete with a requestId; `None` when it does not exist.
    async fn delete(
        &self,
        project: &str,
        zone: &str,
        name: &str,
        request_id: &str,
    ) -> Result<Option<Operation>, ComputeError>;
    /// instances.suspend, resume, stop or start with a requestId; `None` when it does not exist.
    async fn power(
        &self,
        project: &str,
        zone: &str,
        name: &str,
        power: Power,
        request_id: &str,
    ) -> Result<Option<Operation>, ComputeError>;
    /// One page of instances.list with `filter`.
    async fn list(
        &self,
        project: &str,
        zone: &str,
        filter: &str,
        page: Option<String>,
    ) -> Result<(Vec<Instance>, Option<String>), ComputeError>;
    /// instanceTemplates.insert (global) with a requestId; its operation is followed with
    /// [`Compute::global_operation`].
    async fn insert_template(
        &self,
        project: &str,
        request_id: &str,
        spec: &TemplateSpec,
    ) -> Result<Operation, ComputeError>;
    /// instanceTemplates.get; `None` when it does not exist.
    async fn template(&self, project: &str, name: &str) -> Result<Option<Template>, ComputeError>;
    /// instanceTemplates.delete with a requestId; `None` when it does not exist.
    async fn delete_template(
        &self,
        project: &str,
        name: &str,
        request_id: &str,
    ) -> Result<Option<Operation>, ComputeError>;
    /// One page of instanceTemplates.list with `filter` (callers check the labels again: not
    /// every server filters).
    async fn templates(
        &self,
        project: &str,
        filter: &str,
        page: Option<String>,
    ) -> Result<(Vec<Template>, Option<String>), ComputeError>;
    /// globalOperations.get; `None` when Compute no longer knows it.
    async fn global_operation(
        &self,
        project: &str,
        operation: &str,
    ) -> Result<Option<Operation>, ComputeError>;
    /// zones.list names.
    async fn zones(&self, project: &str) -> Result<Vec<String>, ComputeError>;
    /// diskTypes.list names of a zone (`pd-ssd`, …).
    async fn disk_types(&self, project: &str, zone: &str) -> Result<Vec<String>, ComputeError>;
    /// regions.list quotas.
    async fn quotas(&self, project: &str) -> Result<Vec<Quota>, ComputeError>;
}

#[cfg(test)]
mod tests;
