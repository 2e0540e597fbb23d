//! What the service's settings let a Config name: the Swarming servers it may use
//! (`[swarming] servers`) and, per owner group, its tenant's prefixes, projects, service accounts
//! and VMs (`[tenants.<group>]`). Pure rules: the callers (import, the API's admission) give the
//! other Configs a tenant's sum is taken over.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::names::{prefixes_clash, valid_host};
use super::spec::Config;
use super::units::{ConfigError, err};

/// The tenant of Configs whose owner groups have none of their own.
pub const OPEN_TENANT: &str = "*";

/// Swarming servers Configs may name (`[swarming]`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SwarmingServers {
    /// Origins, `https://host` or `https://host:port` (the simulator's example server by
    /// default).
    pub servers: Vec<String>,
}

impl Default for SwarmingServers {
    fn default() -> Self {
        Self { servers: vec!["https://swarm.example.com".into()] }
    }
}

/// What the Configs of one tenant (an owner group) may use. Patterns are exact, or end in `*`
/// (anything starting with what comes before it); `*` alone allows anything. The default allows
/// nothing until listed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Tenant {
    /// Prefixes its Configs may take (its namespace), e.g. `team-a-*`.
    pub prefixes: Vec<String>,
    /// GCP projects its VMs may run in.
    pub projects: Vec<String>,
    /// Service account emails its VMs may run as (`default` is the project's default account).
    pub service_accounts: Vec<String>,
    /// Hostnames of the existing machines its static pools may list (`machines`).
    pub machines: Vec<String>,
    /// Most VMs its Configs may ask for together (each counted at its largest amount, weekly
    /// windows included); none: only the service's `max_amount` per Config.
    pub max_vms: Option<u32>,
    /// Most its Configs may spend in a calendar month (UTC), in USD: growth is held so the
    /// month's spend, and what the fleet costs per hour for the rest of it, stay within it.
    pub budget_per_month: Option<super::units::Usd>,
    /// Most its Configs may cost per hour together, in USD (running, suspended and disks, and
    /// the VMs being made): growth past it is held.
    pub max_cost_per_hour: Option<super::units::Usd>,
}

impl Tenant {
    /// A tenant that may use anything (the shipped settings' one tenant).
    pub fn open() -> Self {
        let any = vec!["*".to_owned()];
        Self {
            prefixes: any.clone(),
            projects: any.clone(),
            service_accounts: any.clone(),
            machines: any,
            ..Self::default()
        }
    }
}

/// The settings' trust: servers and tenants, checked at settings load ([`Trust::new`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Trust {
    servers: Vec<Origin>,
    tenants: BTreeMap<String, Tenant>,
}

impl Default for Trust {
    /// The simulator's example server and one open tenant (the embedded default, tests).
    fn default() -> Self {
        Self::new(&SwarmingServers::default(), &default_tenants()).expect("the default trust is valid")
    }
}

/// One open tenant: every Config may use anything (a single-team setup).
pub fn default_tenants() -> BTreeMap<String, Tenant> {
    BTreeMap::from([(OPEN_TENANT.to_owned(), Tenant::open())])
}

/// A Swarming server's origin: scheme, host and port (`None`: the scheme's default).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Origin {
    /// `http` or `https`.
    pub scheme: String,
    /// Lower-case DNS name or IPv4 address.
    pub host: String,
    /// A port other than the scheme's default.
    pub port: Option<u16>,
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}://{}", self.scheme, self.host)?;
        match self.port {
            Some(p) => write!(f, ":{p}"),
            None => Ok(()),
        }
    }
}

impl Origin {
    /// Parses a server URL that is an origin only: `http(s)://host[:port]` with at most a `/`
    /// after it. Userinfo, a path, a query, a fragment, escapes and anything outside a DNS name
    /// are refused, each with its reason.
    pub fn parse(url: &str) -> Result<Self, String> {
        let (scheme, rest) = match url.split_once("://") {
            Some((s @ ("https" | "http"), rest)) => (s, rest),
            _ => return Err("must be an https:// URL".into()),
        };
        let (authority, tail) = rest.split_at(rest.find(['/', '?', '#']).unwrap_or(rest.len()));
        if authority.contains('@') {
            return Err("must not carry a user or password (user@host)".into());
        }
        if !tail.is_empty() && tail != "/" {
            let what = match tail.trim_start_matches('/').chars().next() {
                Some('?') => "a query",
                Some('#') => "a fragment",
                _ => "a path",
            };
            return Err(format!("must be a server's origin (scheme://host[:port]): it has {what}"));
        }
        let (host, port) = match authority.rsplit_once(':') {
            Some((h, p)) => {
                let port = p
                    .parse::<u16>()
                    .ok()
                    .filter(|p| *p > 0)
                    .ok_or_else(|| format!("port {p:?} is not a number 1-65535"))?;
                (h, Some(port))
            }
            None => (authority, None),
        };
        if !valid_host(host) {
            return Err(format!(
                "host {:?} must be a lower-case DNS name (letters, digits, '-', '.')",
                host.chars().take(64).collect::<String>()
            ));
        }
        let default = if scheme == "https" { 443 } else { 80 };
        Ok(Origin { scheme: scheme.to_owned(), host: host.to_owned(), port: port.filter(|p| *p != default) })
    }
}

/// True when `value` fits `pattern` (exact, `prefix*`, or `*`).
pub fn fits(pattern: &str, value: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(lit) => value.starts_with(lit),
        None => pattern == value,
    }
}

/// True when a Config of prefix `prefix` could clash with a prefix `pattern` allows: it lies in
/// the namespace, or the namespace's prefixes would be prefixes of it (or it of them).
fn overlaps(pattern: &str, prefix: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(lit) => prefix.starts_with(lit) || lit.starts_with(prefix),
        None => pattern == prefix || prefixes_clash(pattern, prefix),
    }
}

/// The patterns of two tenants' namespaces that overlap, if any (`*` excepted: the open tenant
/// takes what no other namespace holds).
fn namespaces_overlap(a: &str, b: &str) -> bool {
    let (la, lb) = (a.trim_end_matches('*'), b.trim_end_matches('*'));
    match (a.ends_with('*'), b.ends_with('*')) {
        (true, true) => la.starts_with(lb) || lb.starts_with(la),
        (true, false) => overlaps(a, b),
        (false, true) => overlaps(b, a),
        (false, false) => a == b || prefixes_clash(a, b),
    }
}

/// Google's public image projects: an image from one of them is no other team's.
pub const PUBLIC_IMAGE_PROJECTS: &[&str] = &[
    "centos-cloud",
    "cos-cloud",
    "debian-cloud",
    "fedora-coreos-cloud",
    "opensuse-cloud",
    "rhel-cloud",
    "rhel-sap-cloud",
    "rocky-linux-cloud",
    "suse-cloud",
    "suse-sap-cloud",
    "ubuntu-os-cloud",
    "ubuntu-os-pro-cloud",
    "windows-cloud",
    "windows-sql-cloud",
];

/// The resource paths of a Config's instance template, by field.
fn resources(c: &Config) -> Vec<(String, &str)> {
    let a = &c.attributes;
    let mut out = vec![("attributes.machine_type".to_owned(), a.machine_type.as_str())];
    for (i, t) in c.fallback_machine_types.iter().enumerate() {
        out.push((format!("fallback_machine_types[{i}]"), t));
    }
    for (i, d) in a.disk.iter().enumerate() {
        out.push((format!("attributes.disk[{i}].image"), &d.image));
        out.push((format!("attributes.disk[{i}].type"), &d.kind));
    }
    for (i, n) in a.network_interface.iter().enumerate() {
        out.push((format!("attributes.network_interface[{i}].network"), &n.network));
        out.push((format!("attributes.network_interface[{i}].subnetwork"), &n.subnetwork));
    }
    out
}

/// The project a resource path names (`…projects/<p>/…`), if it names one (a path without one
/// is in the VM's own project).
fn referenced_project(path: &str) -> Option<&str> {
    let mut segments = path.split('/');
    segments.find(|s| *s == "projects")?;
    segments.next().filter(|p| !p.is_empty())
}

impl Trust {
    /// Checks the settings' servers and tenants: every server an origin, every pattern well
    /// formed, and no two tenants' namespaces overlapping.
    pub fn new(swarming: &SwarmingServers, tenants: &BTreeMap<String, Tenant>) -> Result<Self, String> {
        let mut servers = Vec::new();
        for (i, s) in swarming.servers.iter().enumerate() {
            servers.push(Origin::parse(s).map_err(|e| format!("swarming.servers[{i}] {s:?}: {e}"))?);
        }
        for (name, t) in tenants {
            let valid_name = name == OPEN_TENANT
                || (!name.is_empty()
                    && name.len() <= 128
                    && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.@".contains(&b)));
            if !valid_name {
                return Err(format!(
                    "tenants.{name}: a tenant is named by an owner group ([A-Za-z0-9-_.@]) or \"*\""
                ));
            }
            for p in &t.prefixes {
                let lit = p.strip_suffix('*').unwrap_or(p);
                let ok = lit.is_empty()
                    || (lit.as_bytes()[0].is_ascii_lowercase()
                        && lit.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-'));
                if !ok || lit.contains('*') {
                    return Err(format!(
                        "tenants.{name}.prefixes: {p:?} must be a prefix ([a-z][-a-z0-9]*), optionally ending in *"
                    ));
                }
            }
            for (field, v) in
                [("budget_per_month", t.budget_per_month), ("max_cost_per_hour", t.max_cost_per_hour)]
            {
                if let Some(v) = v {
                    v.check(&format!("tenants.{name}.{field}"))?;
                }
            }
            let lists = [
                ("projects", &t.projects),
                ("service_accounts", &t.service_accounts),
                ("machines", &t.machines),
            ];
            for (field, list) in lists {
                if let Some(p) = list.iter().find(|p| p.is_empty() || p.trim_end_matches('*').contains('*')) {
                    return Err(format!("tenants.{name}.{field}: {p:?}: exact, or ending in *"));
                }
            }
        }
        let named: Vec<(&String, &String)> = tenants
            .iter()
            .filter(|(n, _)| n.as_str() != OPEN_TENANT)
            .flat_map(|(n, t)| t.prefixes.iter().filter(|p| p.as_str() != "*").map(move |p| (n, p)))
            .collect();
        for (i, (na, pa)) in named.iter().enumerate() {
            if let Some((nb, pb)) =
                named[i + 1..].iter().find(|(nb, pb)| nb != na && namespaces_overlap(pa, pb))
            {
                return Err(format!(
                    "tenants.{na}.prefixes {pa:?} and tenants.{nb}.prefixes {pb:?} overlap: a prefix belongs to one tenant"
                ));
            }
        }
        Ok(Self { servers, tenants: tenants.clone() })
    }

    /// The listed origin of a server URL, or why it may not be called.
    pub fn server(&self, url: &str) -> Result<&Origin, String> {
        let origin = Origin::parse(url.trim())?;
        self.servers.iter().find(|s| **s == origin).ok_or_else(|| {
            let listed: Vec<String> = self.servers.iter().map(Origin::to_string).collect();
            format!(
                "server {origin} is not listed in the settings ([swarming] servers: {})",
                listed.join(", ")
            )
        })
    }

    /// Every tenant, by name.
    pub fn tenants(&self) -> impl Iterator<Item = (&str, &Tenant)> {
        self.tenants.iter().map(|(n, t)| (n.as_str(), t))
    }

    /// The tenant `name` (none: not in the settings).
    pub fn tenant(&self, name: &str) -> Option<&Tenant> {
        self.tenants.get(name)
    }

    /// The tenant a Config of prefix `prefix` belongs to when only its prefix is known (a
    /// deleted Config's spend): the one whose namespace holds it (`*` aside), else the open one.
    pub fn tenant_of_prefix(&self, prefix: &str) -> &str {
        self.tenants
            .iter()
            .find(|(n, t)| {
                n.as_str() != OPEN_TENANT && t.prefixes.iter().any(|p| p != "*" && fits(p, prefix))
            })
            .map_or(OPEN_TENANT, |(n, _)| n.as_str())
    }

    /// The tenant a Config belongs to: the one its owner groups name, else the open one.
    pub fn tenant_of<'a>(&'a self, c: &Config) -> Result<(&'a str, &'a Tenant), String> {
        let (named, none): (BTreeSet<&str>, BTreeSet<&str>) = c
            .owner
            .iter()
            .map(String::as_str)
            .partition(|g| *g != OPEN_TENANT && self.tenants.contains_key(*g));
        let name = match named.len() {
            0 => OPEN_TENANT,
            // A group of no tenant beside a tenant's would let its writers into that tenant's box.
            1 if !none.is_empty() => {
                let (t, rest) = (named.first().copied().unwrap_or_default(), Vec::from_iter(none));
                return Err(format!(
                    "owner groups {} have no tenant beside tenant {t}'s: a Config's owners are of one tenant",
                    rest.join(", ")
                ));
            }
            1 => named.into_iter().next().unwrap_or(OPEN_TENANT),
            _ => {
                let list: Vec<&str> = named.into_iter().collect();
                return Err(format!(
                    "owner groups of {} tenants ({}): a Config belongs to one tenant",
                    list.len(),
                    list.join(", ")
                ));
            }
        };
        match self.tenants.get_key_value(name) {
            Some((n, t)) => Ok((n.as_str(), t)),
            None => Err(format!(
                "no tenant in the settings for owners {:?} ([tenants.<group>] for one of them, or [tenants.\"*\"])",
                c.owner
            )),
        }
    }

    /// Why tenant `name` may not list the static machine `host`, if it may not: it fits none of
    /// the tenant's `machines`, or lies in another tenant's namespace (their bots would be
    /// terminated and deleted).
    fn not_its_machine(&self, host: &str, name: &str, tenant: &Tenant) -> Option<String> {
        if !tenant.machines.iter().any(|pat| fits(pat, host)) {
            return Some(format!("tenant {name} may not list it (machines: {})", tenant.machines.join(", ")));
        }
        self.tenants.iter().filter(|(n, _)| n.as_str() != name).find_map(|(other, t)| {
            let pat = t.prefixes.iter().find(|pat| pat.as_str() != "*" && fits(pat, host))?;
            Some(format!("lies in tenant {other}'s namespace {pat}"))
        })
    }

    /// Every rule of the settings `c` breaks, each naming its field: its Swarming server is
    /// listed, and its tenant allows its prefix (and no other tenant's namespace holds it), its
    /// project, its service accounts and its VMs together with `others` (the stored Configs; the
    /// one of the same prefix is left out).
    pub fn problems<'c>(&self, c: &Config, others: impl IntoIterator<Item = &'c Config>) -> Vec<ConfigError> {
        let others: Vec<&Config> = others.into_iter().filter(|o| o.prefix != c.prefix).collect();
        let p = &c.prefix;
        let f = |field: &str| format!("{p}.{field}");
        let mut out = Vec::new();
        if let Err(e) = self.server(&c.swarming) {
            out.push(err(f("swarming"), e));
        }
        let (name, tenant) = match self.tenant_of(c) {
            Ok(t) => t,
            Err(e) => {
                out.push(err(f("owner"), e));
                return out;
            }
        };
        let others_namespace =
            self.tenants.iter().filter(|(n, _)| n.as_str() != name).find_map(|(other, t)| {
                t.prefixes.iter().find(|pat| pat.as_str() != "*" && overlaps(pat, p)).map(|pat| (other, pat))
            });
        if !tenant.prefixes.iter().any(|pat| fits(pat, p)) {
            out.push(err(
                f("prefix"),
                format!("is outside tenant {name}'s namespace ({})", tenant.prefixes.join(", ")),
            ));
        } else if let Some((other, pat)) = others_namespace {
            out.push(err(
                f("prefix"),
                format!("lies in (or would block) tenant {other}'s namespace {pat}: pick a prefix of tenant {name}'s"),
            ));
        }
        for (i, h) in c.machines.iter().flatten().enumerate() {
            if let Some(why) = self.not_its_machine(h, name, tenant) {
                out.push(err(f(&format!("machines[{i}]")), format!("{h}: {why}")));
            }
        }
        if !c.is_static() {
            let project = &c.attributes.project;
            if !project.is_empty() && !tenant.projects.iter().any(|pat| fits(pat, project)) {
                out.push(err(
                    f("attributes.project"),
                    format!(
                        "tenant {name} may not use project {project} (allowed: {})",
                        tenant.projects.join(", ")
                    ),
                ));
            }
            // The resources a VM is made from: in the tenant's projects (an image may also come
            // from a public image project): no other team's network, image or machine type.
            for (field, path) in resources(c) {
                let image = field.ends_with(".image");
                let allowed = |p: &str| {
                    tenant.projects.iter().any(|pat| fits(pat, p))
                        || (image && PUBLIC_IMAGE_PROJECTS.contains(&p))
                };
                let theirs = referenced_project(path).filter(|p| !allowed(p));
                if let Some(p) = theirs {
                    out.push(err(f(&field), format!("names project {p}, which tenant {name} may not use")));
                }
            }
            for (i, sa) in c.attributes.service_account.iter().enumerate() {
                if !tenant.service_accounts.iter().any(|pat| fits(pat, &sa.email)) {
                    out.push(err(
                        f(&format!("attributes.service_account[{i}].email")),
                        format!(
                            "tenant {name} may not run VMs as {} (allowed: {})",
                            sa.email,
                            tenant.service_accounts.join(", ")
                        ),
                    ));
                }
            }
        }
        if let Some(max) = tenant.max_vms {
            let mine = c.most_vms();
            let theirs: u64 = others
                .iter()
                .filter(|o| self.tenant_of(o).is_ok_and(|(n, _)| n == name))
                .map(|o| u64::from(o.most_vms()))
                .sum();
            if theirs + u64::from(mine) > u64::from(max) {
                let (field, warm) = c.most_vms_field();
                out.push(err(
                    f(field),
                    format!(
                        "asks for up to {mine} VMs{warm}; tenant {name}'s other Configs ask for up to {theirs} and its max_vms is {max}"
                    ),
                ));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests;
