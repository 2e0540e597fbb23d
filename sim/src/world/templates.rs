//! Global instance templates on the world (`instanceTemplates` insert, get, delete, list), the
//! minimum a bulkInsert's `sourceInstanceTemplate` needs: a name, a description and the
//! `properties` (an `InstanceProperties` object, kept as given). Insert and delete take effect at
//! once and answer a global operation that runs `op_ms`; a requestId is replayed as for instances.

use super::*;

/// Where global operations are (their `location`).
const GLOBAL: &str = "global";

fn template_not_found(project: &str, name: &str) -> ApiError {
    ApiError::new(
        404,
        "notFound",
        format!("The resource 'projects/{project}/global/instanceTemplates/{name}' was not found"),
    )
}

impl World {
    /// A global operation of `kind` on template `name`, running `op_ms`.
    fn template_op(
        &mut self,
        project: &str,
        kind: &'static str,
        name: &str,
        id: u64,
        rid: Option<String>,
    ) -> String {
        let mut op = self.fresh_op(project, Scope::Global, GLOBAL, kind, name);
        op.target_id = id;
        op.request_id = rid;
        let op = self.add_op(op);
        self.run_op(&op, Duration::from_millis(self.cfg.op_ms));
        op
    }

    /// `instanceTemplates.insert`; returns the operation's name.
    pub fn insert_template(
        &mut self,
        project: &str,
        rid: Option<String>,
        body: &Value,
    ) -> Result<String, ApiError> {
        if let Some(op) = self.replay(project, GLOBAL, &rid)? {
            return Ok(op);
        }
        let name = body.get("name").and_then(Value::as_str).unwrap_or_default().to_owned();
        if !valid_name(&name) {
            let msg =
                format!("Invalid value for field 'resource.name': '{name}'. Must be a valid resource name.");
            return Err(ApiError::new(400, "invalid", msg));
        }
        let Some(properties) = body.get("properties").filter(|p| p.is_object()).cloned() else {
            return Err(ApiError::new(400, "required", "Required field 'resource.properties' not specified"));
        };
        let key: TemplateKey = (project.to_owned(), name.clone());
        if self.templates.contains_key(&key) {
            let msg =
                format!("The resource 'projects/{project}/global/instanceTemplates/{name}' already exists");
            return Err(ApiError::new(409, "alreadyExists", msg));
        }
        let id = self.rng.random::<u64>() >> 1;
        let description = body.get("description").and_then(Value::as_str).map(str::to_owned);
        let t = Template { id, created: self.now_utc(), description, properties };
        self.templates.insert(key, t);
        Ok(self.template_op(project, "insert", &name, id, rid))
    }

    /// `instanceTemplates.get`.
    pub fn template(&self, project: &str, name: &str) -> Result<&Template, ApiError> {
        self.templates
            .get(&(project.to_owned(), name.to_owned()))
            .ok_or_else(|| template_not_found(project, name))
    }

    /// `instanceTemplates.delete`; returns the operation's name.
    pub fn delete_template(
        &mut self,
        project: &str,
        name: &str,
        rid: Option<String>,
    ) -> Result<String, ApiError> {
        if let Some(op) = self.replay(project, GLOBAL, &rid)? {
            return Ok(op);
        }
        let t = self.templates.remove(&(project.to_owned(), name.to_owned()));
        let t = t.ok_or_else(|| template_not_found(project, name))?;
        Ok(self.template_op(project, "delete", name, t.id, rid))
    }

    /// `instanceTemplates.list`: every template of `project`, by name.
    pub fn templates(&self, project: &str) -> Vec<(&str, &Template)> {
        let from: TemplateKey = (project.to_owned(), String::new());
        self.templates
            .range(from..)
            .take_while(|(k, _)| k.0 == project)
            .map(|(k, t)| (k.1.as_str(), t))
            .collect()
    }
}
