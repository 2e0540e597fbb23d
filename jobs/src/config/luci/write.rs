//! Configs written back as LUCI's `vms.cfg` text proto (what [`parse_vms`](super::parse_vms)
//! reads): for `configs convert --to cfg` and the round-trip tests. A Config using a field LUCI's
//! schema lacks is refused, naming the field.

use super::super::attributes::Attributes;
use super::super::spec::Config;
use super::super::textproto::quote;
use super::super::units::{ConfigError, Secs};

/// An indented text proto being written.
struct Out {
    text: String,
    depth: usize,
}

impl Out {
    fn line(&mut self, s: &str) {
        self.text.push_str(&"  ".repeat(self.depth));
        self.text.push_str(s);
        self.text.push('\n');
    }

    fn open(&mut self, name: &str) {
        self.line(&format!("{name} {{"));
        self.depth += 1;
    }

    fn close(&mut self) {
        self.depth -= 1;
        self.line("}");
    }

    fn str(&mut self, name: &str, v: &str) {
        if !v.is_empty() {
            self.line(&format!("{name}: {}", quote(v)));
        }
    }

    fn raw(&mut self, name: &str, v: impl std::fmt::Display) {
        self.line(&format!("{name}: {v}"));
    }

    /// An enum value: as a name when it is one, else quoted (validation refuses it then).
    fn enumv(&mut self, name: &str, v: &str) {
        let ident = v.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
            && v.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        match ident {
            true => self.raw(name, v),
            false => self.raw(name, quote(v)),
        }
    }

    fn flag(&mut self, name: &str, v: bool) {
        if v {
            self.raw(name, "true");
        }
    }

    fn period(&mut self, name: &str, v: Secs) {
        if v.0 != 0 {
            self.line(&format!("{name} {{ seconds: {} }}", v.0));
        }
    }
}

/// The fields of a Config LUCI's schema has no place for, by name, when set.
fn not_in_luci(c: &Config) -> Option<&'static str> {
    let a = &c.attributes;
    [
        (!c.zones.is_empty(), "zones"),
        (!c.region.is_empty(), "region"),
        (!c.fallback_machine_types.is_empty(), "fallback_machine_types"),
        (!c.provider.is_empty(), "provider"),
        (c.machines.is_some(), "machines"),
        (c.breaker != Default::default(), "breaker"),
        (c.update != Default::default(), "update"),
        (c.spot_failover.is_some(), "spot_failover"),
        (!a.provisioning_model.is_empty(), "attributes.provisioning_model"),
        (a.preemptible, "attributes.preemptible"),
        (!a.instance_termination_action.is_empty(), "attributes.instance_termination_action"),
    ]
    .into_iter()
    .find_map(|(set, name)| set.then_some(name))
}

/// The `vms.cfg` text of `configs`, one `vms` block each.
pub fn to_text_proto(configs: &[Config]) -> Result<String, ConfigError> {
    let mut o = Out { text: String::new(), depth: 0 };
    for c in configs {
        if let Some(field) = not_in_luci(c) {
            let rule = "LUCI's vms.cfg has no such field: keep this Config in YAML".to_owned();
            return Err(ConfigError { field: format!("{}.{field}", c.prefix), rule });
        }
        o.open("vms");
        o.str("prefix", &c.prefix);
        amount(&mut o, c);
        attributes(&mut o, &c.attributes);
        o.period("lifetime", c.lifetime);
        o.period("timeout", c.timeout);
        o.str("swarming", &c.swarming);
        for g in &c.owner {
            o.str("owner", g);
        }
        o.close();
    }
    Ok(o.text)
}

fn amount(o: &mut Out, c: &Config) {
    let a = &c.amount;
    if *a == Default::default() {
        return;
    }
    o.open("amount");
    o.raw("min", a.min);
    o.raw("max", a.max);
    for s in &a.change {
        o.open("change");
        o.open("start");
        o.raw("day", s.start.day.name());
        o.str("time", &s.start.time);
        o.str("location", &s.start.location);
        o.close();
        o.period("length", s.length);
        o.raw("min", s.min);
        o.raw("max", s.max);
        o.close();
    }
    o.close();
}

fn attributes(o: &mut Out, a: &Attributes) {
    if *a == Attributes::default() {
        return;
    }
    o.open("attributes");
    o.str("project", &a.project);
    o.str("zone", &a.zone);
    o.str("machine_type", &a.machine_type);
    o.str("min_cpu_platform", &a.min_cpu_platform);
    for d in &a.disk {
        o.open("disk");
        o.str("image", &d.image);
        if d.size != 0 {
            o.raw("size", d.size);
        }
        o.str("type", &d.kind);
        if !d.interface.is_empty() {
            o.enumv("interface", &d.interface);
        }
        if let Some(n) = d.provisioned_iops {
            o.raw("provisioned_iops", n);
        }
        if let Some(n) = d.provisioned_throughput {
            o.raw("provisioned_throughput", n);
        }
        o.close();
    }
    for m in &a.metadata {
        o.open("metadata");
        if let Some(s) = &m.from_text {
            o.raw("from_text", quote(s));
        }
        if let Some(s) = &m.from_file {
            o.raw("from_file", quote(s));
        }
        o.close();
    }
    for n in &a.network_interface {
        o.open("network_interface");
        o.str("network", &n.network);
        o.str("subnetwork", &n.subnetwork);
        if !n.stack_type.is_empty() {
            o.enumv("stack_type", &n.stack_type);
        }
        for ac in &n.access_config {
            o.open("access_config");
            o.enumv("type", if ac.kind.is_empty() { "ONE_TO_ONE_NAT" } else { &ac.kind });
            o.close();
        }
        o.close();
    }
    for s in &a.service_account {
        o.open("service_account");
        o.raw("email", quote(&s.email));
        for sc in &s.scope {
            o.str("scope", sc);
        }
        o.close();
    }
    for t in &a.tag {
        o.str("tag", t);
    }
    if let Some(s) = &a.scheduling {
        o.open("scheduling");
        for n in &s.node_affinity {
            o.open("node_affinity");
            o.raw("key", quote(&n.key));
            o.enumv("operator", &n.operator);
            for v in &n.values {
                o.raw("values", quote(v));
            }
            o.close();
        }
        o.close();
    }
    for (k, v) in &a.label {
        o.line(&format!("label {{ key: {} value: {} }}", quote(k), quote(v)));
    }
    o.flag("disable_integrity_monitoring", a.disable_integrity_monitoring);
    o.flag("enable_secure_boot", a.enable_secure_boot);
    o.flag("disable_vtpm", a.disable_vtpm);
    o.flag("enable_confidential_compute", a.enable_confidential_compute);
    o.flag("terminate_on_maintenance", a.terminate_on_maintenance);
    o.close();
}
