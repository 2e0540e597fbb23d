//! What a machine type is made of, as Compute Engine bills it: its family, vCPUs and memory;
//! predefined types by their published shape, custom types (`custom-4-16384`,
//! `n2-custom-4-16384`) by their name; and why something has no price.

/// Why something has no price.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unpriced: {0}")]
pub struct Unpriced(pub String);

/// A machine type's billed parts.
#[derive(Debug, Clone, PartialEq)]
pub struct Shape {
    /// Its family (`e2`, `n1`, `n2`, `n2d`, `c3`).
    pub family: String,
    /// vCPUs billed (a shared-core E2 bills a fraction).
    pub vcpus: f64,
    /// Memory in GiB.
    pub memory_gib: f64,
    /// A custom machine type.
    pub custom: bool,
}

/// GiB per vCPU of a family's predefined series; `None` for one not known here.
fn per_vcpu(family: &str, series: &str) -> Option<f64> {
    Some(match (family, series) {
        ("n1", "standard") => 3.75,
        ("n1", "highmem") => 6.5,
        ("n1", "highcpu") => 0.9,
        ("e2" | "n2" | "n2d" | "c3", "standard") => 4.0,
        ("e2" | "n2" | "n2d" | "c3", "highmem") => 8.0,
        ("e2" | "n2" | "n2d", "highcpu") => 1.0,
        ("c3", "highcpu") => 2.0,
        _ => return None,
    })
}

/// The shape of `machine_type`: a name, or a URL (or template) ending in one.
pub fn shape(machine_type: &str) -> Result<Shape, Unpriced> {
    let name = machine_type.rsplit('/').next().unwrap_or_default();
    let unknown = || Unpriced(format!("machine type {name:?} is not one this service knows how to price"));
    let made = |family: &str, vcpus: f64, memory_gib: f64, custom: bool| Shape {
        family: family.to_owned(),
        vcpus,
        memory_gib,
        custom,
    };
    // Shared-core E2: a fraction of a vCPU.
    match name {
        "e2-micro" => return Ok(made("e2", 0.25, 1.0, false)),
        "e2-small" => return Ok(made("e2", 0.5, 2.0, false)),
        "e2-medium" => return Ok(made("e2", 1.0, 4.0, false)),
        _ => {}
    }
    let parts: Vec<&str> = name.split('-').collect();
    match parts.as_slice() {
        // Custom: `custom-<vCPUs>-<MiB>` is N1's; `<family>-custom-<vCPUs>-<MiB>`.
        ["custom", cpus, mib] => custom("n1", cpus, mib).ok_or_else(unknown),
        [family, "custom", cpus, mib] => custom(family, cpus, mib).ok_or_else(unknown),
        [.., "ext"] => {
            Err(Unpriced(format!("machine type {name:?}: extended memory has SKUs of its own, not read")))
        }
        [family, series, n] => {
            let n: u32 = n.parse().map_err(|_| unknown())?;
            let gib = per_vcpu(family, series).ok_or_else(unknown)?;
            Ok(made(family, f64::from(n), f64::from(n) * gib, false))
        }
        _ => Err(unknown()),
    }
}

/// A custom machine type of `family`: `cpus` vCPUs and `mib` MiB of memory.
fn custom(family: &str, cpus: &str, mib: &str) -> Option<Shape> {
    let (cpus, mib): (u32, u32) = (cpus.parse().ok()?, mib.parse().ok()?);
    let known = matches!(family, "n1" | "e2" | "n2" | "n2d");
    (known && cpus > 0 && mib > 0).then(|| Shape {
        family: family.to_owned(),
        vcpus: f64::from(cpus),
        memory_gib: f64::from(mib) / 1024.0,
        custom: true,
    })
}
