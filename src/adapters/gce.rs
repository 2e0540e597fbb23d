//! `Compute` over the official google-cloud-compute-v1 client (real Compute Engine, or
//! `gce-backend sim` when an endpoint is given). Errors go to `ComputeError`'s classifiers; each
//! call is retried by the client under its own [`Retries`], which bounds the retries within the
//! guard's timeout and counts the answers, so an HTTP error comes back as itself.

use std::collections::BTreeMap;
use std::future::Future;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use gce_backend_jobs::ports::clock::Clock;
use gce_backend_jobs::ports::compute::{
    BulkSpec, Compute, ComputeError, Instance, InstanceSpec, Operation, Power, Quota, Template, TemplateSpec,
};
use google_cloud_compute_v1::client::{
    DiskTypes, InstanceTemplates, Instances, Regions, ZoneOperations, Zones,
};
use google_cloud_compute_v1::model;
use google_cloud_gax::error::Error;
use google_cloud_gax::error::rpc::StatusDetails;
use google_cloud_gax::options::RequestOptionsBuilder;

use super::gce_retries::{Answers, Retries};

/// The Compute Engine clients.
#[derive(Debug, Clone)]
pub struct Gce {
    instances: Instances,
    operations: ZoneOperations,
    zones: Zones,
    disk_types: DiskTypes,
    regions: Regions,
    templates: InstanceTemplates,
    /// The guard's timeout of a call: the client's retries of one end well within it.
    timeout: Duration,
}

/// A call that failed: the client's last error, and the HTTP error answers the call got.
struct Failed(Error, Option<Answers>);

impl Failed {
    /// The last answer's HTTP status, if it was one.
    fn status(&self) -> Option<u16> {
        self.0.http_status_code()
    }
}

/// The error of a failed call: an HTTP answer says its status, reason phrase and how many times
/// in a row it came; anything else (no connection) is classified without a status.
fn error(Failed(e, answers): Failed) -> ComputeError {
    let reason = e
        .status()
        .and_then(|s| {
            s.details.iter().find_map(|d| match d {
                StatusDetails::ErrorInfo(i) => Some(i.reason.clone()),
                _ => None,
            })
        })
        .unwrap_or_default();
    let message =
        e.status().map(|s| s.message.clone()).filter(|m| !m.is_empty()).unwrap_or_else(|| e.to_string());
    match e.http_status_code() {
        Some(status) => {
            let phrase = http::StatusCode::from_u16(status).ok().and_then(|s| s.canonical_reason());
            let times = answers.filter(|a| a.status == status).map_or(1, |a| a.times);
            ComputeError::answered(status, phrase.unwrap_or_default(), &reason, &message, times)
        }
        None => ComputeError::from_http(None, &reason, &message),
    }
}

fn operation(op: model::Operation) -> Operation {
    let done = op.status.as_ref().and_then(|s| s.name()) == Some("DONE");
    let first = op.error.as_ref().and_then(|e| e.errors.first());
    let error = (op.error.is_some() || op.http_error_status_code.is_some()).then(|| {
        let code = first.and_then(|e| e.code.clone()).unwrap_or_else(|| "OPERATION_FAILED".into());
        let message =
            first.and_then(|e| e.message.clone()).or(op.http_error_message.clone()).unwrap_or_default();
        ComputeError::from_operation(&code, op.http_error_status_code.map(|c| c as u16), &message)
    });
    Operation { name: op.name.unwrap_or_default(), done, error }
}

fn instance(i: model::Instance) -> Instance {
    let nic = i.network_interfaces.first();
    Instance {
        name: i.name.unwrap_or_default(),
        id: i.id.map(|id| id.to_string()).unwrap_or_default(),
        created: i
            .creation_timestamp
            .as_deref()
            .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
            // Compute always states it; the clock only stands in for a missing one.
            .map_or_else(|| super::SystemClock.now(), |t| t.with_timezone(&Utc)),
        url: i.self_link.unwrap_or_default(),
        labels: i.labels.into_iter().collect::<BTreeMap<_, _>>(),
        internal_ip: nic.and_then(|n| n.network_ip.clone()).unwrap_or_default(),
        external_ip: nic
            .and_then(|n| n.access_configs.first())
            .and_then(|a| a.nat_ip.clone())
            .unwrap_or_default(),
        status: i.status.as_ref().and_then(|s| s.name()).unwrap_or_default().to_owned(),
    }
}

fn template(t: model::InstanceTemplate) -> Template {
    let labels = t.properties.map(|p| p.labels.into_iter().collect()).unwrap_or_default();
    Template { name: t.name.unwrap_or_default(), labels }
}

impl Gce {
    /// Clients for `endpoint` (none: Compute Engine's own) with `tokens` (none: anonymous, as the
    /// simulator takes calls without `--require-auth`).
    pub async fn connect(
        endpoint: Option<&str>,
        tokens: Option<std::sync::Arc<super::google_auth::Tokens>>,
    ) -> Result<Self, String> {
        super::install_crypto();
        let credentials: google_cloud_auth::credentials::Credentials = match tokens {
            Some(t) => super::google_auth::Bearer(t).into(),
            None => google_cloud_auth::credentials::anonymous::Builder::new().build(),
        };
        macro_rules! client {
            ($t:ty) => {{
                let mut b = <$t>::builder().with_credentials(credentials.clone());
                if let Some(e) = endpoint {
                    b = b.with_endpoint(e);
                }
                b.build().await.map_err(|e| format!("{}: {e}", stringify!($t)))?
            }};
        }
        Ok(Self {
            instances: client!(Instances),
            operations: client!(ZoneOperations),
            zones: client!(Zones),
            disk_types: client!(DiskTypes),
            regions: client!(Regions),
            templates: client!(InstanceTemplates),
            timeout: Duration::from_secs(
                gce_backend_jobs::ports::guard::Isolation::default().compute_timeout.0,
            ),
        })
    }

    /// These clients behind a guard that cuts a call after `timeout` (`[isolation]
    /// compute_timeout`; without it, the default): their retries of a call end well within it.
    pub fn within(self, timeout: Duration) -> Self {
        Self { timeout, ..self }
    }

    /// Sends `call` (`send` sends it) under its own [`Retries`].
    async fn send<B, T, F>(&self, call: B, send: impl FnOnce(B) -> F) -> Result<T, Failed>
    where
        B: RequestOptionsBuilder,
        F: Future<Output = Result<T, Error>>,
    {
        let retries = Retries::new(self.timeout);
        let call = call.with_retry_policy(retries.clone()).with_backoff_policy(retries.clone());
        send(call).await.map_err(|e| Failed(e, retries.answers()))
    }
}

/// Every value that goes into a request's path is one plain segment (`[a-z0-9._:-]`, no `.` or
/// `..`): the client puts it in the path as it is, so `a%2Fb` would reach Compute as `a/b`.
/// Configs are checked at admission; this guards records written before, or by hand.
fn segments(values: &[&str]) -> Result<(), ComputeError> {
    for v in values {
        let plain = !v.is_empty()
            && v.len() <= 128
            && *v != "."
            && *v != ".."
            && v.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"._:-".contains(&b));
        if !plain {
            let shown: String = v.chars().take(64).collect();
            return Err(ComputeError::from_http(
                Some(400),
                "invalid",
                &format!("{shown:?} is not a resource name"),
            ));
        }
    }
    Ok(())
}

#[async_trait]
impl Compute for Gce {
    async fn insert(
        &self,
        project: &str,
        zone: &str,
        request_id: &str,
        spec: &InstanceSpec,
    ) -> Result<Operation, ComputeError> {
        segments(&[project, zone])?;
        let body: model::Instance = serde_json::from_value(super::gce_resource::resource(spec))
            .map_err(|e| ComputeError::from_http(Some(400), "invalid", &format!("instance body: {e}")))?;
        let call = self
            .instances
            .insert()
            .set_project(project)
            .set_zone(zone)
            .set_request_id(request_id)
            .set_body(body);
        Ok(operation(self.send(call, |c| c.send()).await.map_err(error)?))
    }

    async fn bulk_insert(
        &self,
        project: &str,
        zone: &str,
        request_id: &str,
        spec: &BulkSpec,
    ) -> Result<Operation, ComputeError> {
        segments(&[project, zone])?;
        let body: model::BulkInsertInstanceResource = serde_json::from_value(super::gce_resource::bulk(spec))
            .map_err(|e| ComputeError::from_http(Some(400), "invalid", &format!("bulk body: {e}")))?;
        let call = self
            .instances
            .bulk_insert()
            .set_project(project)
            .set_zone(zone)
            .set_request_id(request_id)
            .set_body(body);
        Ok(operation(self.send(call, |c| c.send()).await.map_err(error)?))
    }

    async fn operation(
        &self,
        project: &str,
        zone: &str,
        op: &str,
    ) -> Result<Option<Operation>, ComputeError> {
        segments(&[project, zone, op])?;
        let call = self.operations.get().set_project(project).set_zone(zone).set_operation(op);
        match self.send(call, |c| c.send()).await {
            Ok(op) => Ok(Some(operation(op))),
            Err(e) if e.status() == Some(404) => Ok(None),
            Err(e) => Err(error(e)),
        }
    }

    async fn get(&self, project: &str, zone: &str, name: &str) -> Result<Option<Instance>, ComputeError> {
        segments(&[project, zone, name])?;
        let call = self.instances.get().set_project(project).set_zone(zone).set_instance(name);
        match self.send(call, |c| c.send()).await {
            Ok(i) => Ok(Some(instance(i))),
            Err(e) if e.status() == Some(404) => Ok(None),
            Err(e) => Err(error(e)),
        }
    }

    async fn delete(
        &self,
        project: &str,
        zone: &str,
        name: &str,
        request_id: &str,
    ) -> Result<Option<Operation>, ComputeError> {
        segments(&[project, zone, name])?;
        let call = self
            .instances
            .delete()
            .set_project(project)
            .set_zone(zone)
            .set_instance(name)
            .set_request_id(request_id);
        match self.send(call, |c| c.send()).await {
            Ok(op) => Ok(Some(operation(op))),
            Err(e) if e.status() == Some(404) => Ok(None),
            Err(e) => Err(error(e)),
        }
    }

    async fn power(
        &self,
        project: &str,
        zone: &str,
        name: &str,
        power: Power,
        request_id: &str,
    ) -> Result<Option<Operation>, ComputeError> {
        segments(&[project, zone, name])?;
        // Each method has its own builder type; the same four fields on each.
        macro_rules! send {
            ($call:expr) => {{
                let call =
                    $call.set_project(project).set_zone(zone).set_instance(name).set_request_id(request_id);
                self.send(call, |c| c.send()).await
            }};
        }
        let i = &self.instances;
        let sent = match power {
            Power::Suspend => send!(i.suspend()),
            Power::Resume => send!(i.resume()),
            Power::Stop => send!(i.stop()),
            Power::Start => send!(i.start()),
        };
        match sent {
            Ok(op) => Ok(Some(operation(op))),
            Err(e) if e.status() == Some(404) => Ok(None),
            Err(e) => Err(error(e)),
        }
    }

    async fn list(
        &self,
        project: &str,
        zone: &str,
        filter: &str,
        page: Option<String>,
    ) -> Result<(Vec<Instance>, Option<String>), ComputeError> {
        segments(&[project, zone])?;
        let mut call = self.instances.list().set_project(project).set_zone(zone).set_filter(filter);
        if let Some(p) = page {
            call = call.set_page_token(p);
        }
        let list = self.send(call, |c| c.send()).await.map_err(error)?;
        let next = list.next_page_token.filter(|t| !t.is_empty());
        Ok((list.items.into_iter().map(instance).collect(), next))
    }

    async fn insert_template(
        &self,
        project: &str,
        request_id: &str,
        spec: &TemplateSpec,
    ) -> Result<Operation, ComputeError> {
        segments(&[project])?;
        let body: model::InstanceTemplate = serde_json::from_value(super::gce_resource::template(spec))
            .map_err(|e| ComputeError::from_http(Some(400), "invalid", &format!("template body: {e}")))?;
        let call = self.templates.insert().set_project(project).set_request_id(request_id).set_body(body);
        Ok(operation(self.send(call, |c| c.send()).await.map_err(error)?))
    }

    async fn template(&self, project: &str, name: &str) -> Result<Option<Template>, ComputeError> {
        segments(&[project, name])?;
        let call = self.templates.get().set_project(project).set_instance_template(name);
        match self.send(call, |c| c.send()).await {
            Ok(t) => Ok(Some(template(t))),
            Err(e) if e.status() == Some(404) => Ok(None),
            Err(e) => Err(error(e)),
        }
    }

    async fn delete_template(
        &self,
        project: &str,
        name: &str,
        request_id: &str,
    ) -> Result<Option<Operation>, ComputeError> {
        segments(&[project, name])?;
        let call = self
            .templates
            .delete()
            .set_project(project)
            .set_instance_template(name)
            .set_request_id(request_id);
        match self.send(call, |c| c.send()).await {
            Ok(op) => Ok(Some(operation(op))),
            Err(e) if e.status() == Some(404) => Ok(None),
            Err(e) => Err(error(e)),
        }
    }

    async fn templates(
        &self,
        project: &str,
        filter: &str,
        page: Option<String>,
    ) -> Result<(Vec<Template>, Option<String>), ComputeError> {
        segments(&[project])?;
        let mut call = self.templates.list().set_project(project).set_filter(filter);
        if let Some(p) = page {
            call = call.set_page_token(p);
        }
        let list = self.send(call, |c| c.send()).await.map_err(error)?;
        let next = list.next_page_token.filter(|t| !t.is_empty());
        Ok((list.items.into_iter().map(template).collect(), next))
    }

    async fn global_operation(&self, project: &str, op: &str) -> Result<Option<Operation>, ComputeError> {
        segments(&[project, op])?;
        let call = self.templates.get_operation().set_project(project).set_operation(op);
        match self.send(call, |c| c.send()).await {
            Ok(op) => Ok(Some(operation(op))),
            Err(e) if e.status() == Some(404) => Ok(None),
            Err(e) => Err(error(e)),
        }
    }

    async fn zones(&self, project: &str) -> Result<Vec<String>, ComputeError> {
        segments(&[project])?;
        let list = self.send(self.zones.list().set_project(project), |c| c.send()).await.map_err(error)?;
        Ok(list.items.into_iter().filter_map(|z| z.name).collect())
    }

    async fn disk_types(&self, project: &str, zone: &str) -> Result<Vec<String>, ComputeError> {
        segments(&[project, zone])?;
        let mut names = Vec::new();
        let mut page: Option<String> = None;
        loop {
            let mut call = self.disk_types.list().set_project(project).set_zone(zone);
            if let Some(p) = page.take() {
                call = call.set_page_token(p);
            }
            let list = self.send(call, |c| c.send()).await.map_err(error)?;
            names.extend(list.items.into_iter().filter_map(|d| d.name));
            match list.next_page_token.filter(|t| !t.is_empty()) {
                Some(p) => page = Some(p),
                None => return Ok(names),
            }
        }
    }

    async fn quotas(&self, project: &str) -> Result<Vec<Quota>, ComputeError> {
        segments(&[project])?;
        let list = self.send(self.regions.list().set_project(project), |c| c.send()).await.map_err(error)?;
        Ok(list
            .items
            .into_iter()
            .flat_map(|r| {
                let region = r.name.unwrap_or_default();
                r.quotas.into_iter().map(move |q| Quota {
                    region: region.clone(),
                    metric: q.metric.as_ref().and_then(|m| m.name()).unwrap_or_default().to_owned(),
                    limit: q.limit.unwrap_or_default(),
                    usage: q.usage.unwrap_or_default(),
                })
            })
            .collect())
    }
}

#[cfg(test)]
mod tests;
