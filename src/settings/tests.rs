//! Unit tests of `settings.rs`.

use super::*;

#[test]
fn schedules_are_intervals_or_cron_expressions() {
    assert_eq!(schedule("60s").unwrap(), ("0 * * * * *".into(), 60));
    assert_eq!(schedule("2s").unwrap(), ("*/2 * * * * *".into(), 2));
    assert_eq!(schedule("15m").unwrap(), ("0 */15 * * * *".into(), 900));
    assert_eq!(schedule("1h").unwrap().1, 3600);
    assert!(schedule("7s").is_err() && schedule("0s").is_err() && schedule("soon").is_err());
}

#[test]
fn the_shipped_settings_file_is_valid_and_unknown_keys_are_refused() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("config/service.toml");
    Settings::load(Some(&path)).unwrap();
    assert!(toml::from_str::<Settings>("bogus = 1").is_err());
    let bad: Settings = toml::from_str("[cron]\nimport_configs = \"7s\"").unwrap();
    assert!(bad.validate().unwrap_err().contains("cron.import_configs"));
    let bad: Settings = toml::from_str("deployment = \"Prod Fleet\"").unwrap();
    assert!(bad.validate().unwrap_err().contains("deployment"));
}

#[test]
fn providers_are_declared_by_id_and_type() {
    let two: Settings =
        toml::from_str("[providers.east]\ntype = \"gce\"\n[providers.gce]\ntype = \"gce\"").unwrap();
    two.validate().unwrap();
    assert_eq!(two.providers.len(), 2);
    let e = toml::from_str::<Settings>("[providers.aws]\ntype = \"ec2\"").unwrap_err().to_string();
    assert!(e.contains("unknown variant `ec2`") && e.contains("gce"), "{e}");
    let e = toml::from_str::<Settings>("[providers.gce]\nkind = \"gce\"").unwrap_err().to_string();
    assert!(e.contains("kind"), "{e}");
    let bad: Settings = toml::from_str("[providers.East]\ntype = \"gce\"").unwrap();
    assert!(bad.validate().unwrap_err().contains("providers.East"));
}

#[test]
fn servers_and_tenants_are_checked_at_load() {
    let s: Settings = toml::from_str("[swarming]\nservers = [\"https://s.example.com/path\"]").unwrap();
    assert!(s.validate().unwrap_err().contains("swarming.servers[0]"));
    let s: Settings =
        toml::from_str("[tenants.a]\nprefixes = [\"web*\"]\n[tenants.b]\nprefixes = [\"web-b-*\"]").unwrap();
    assert!(s.validate().unwrap_err().contains("overlap"));
    assert!(toml::from_str::<Settings>("[tenants.a]\nprefix = [\"a-*\"]").is_err(), "unknown key");
    // Left out: the example server and one open tenant.
    let t = Settings::default().trust().unwrap();
    assert!(t.server("https://swarm.example.com").is_ok());
    assert!(t.server("https://chromium-swarm.appspot.com").is_err());
}

#[test]
fn the_shipped_http_table_states_the_defaults() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("config/service.toml");
    assert_eq!(Settings::load(Some(&path)).unwrap().http, Http::default());
}

#[test]
fn the_http_settings_are_checked_and_name_the_key() {
    Http::default().validate().unwrap();
    let err = |h: Http| h.validate().unwrap_err();
    assert!(
        err(Http { header_read_timeout: Secs(0), ..Http::default() }).starts_with("http.header_read_timeout")
    );
    let bad = Http { register_per_address: Rate { rate: -1.0, burst: 1 }, ..Http::default() };
    assert!(err(bad).starts_with("http.register_per_address"));
    assert!(err(Http { max_connections: 0, ..Http::default() }).starts_with("http.max_connections"));
    let bad = Http { max_connections_per_address: 65_537, ..Http::default() };
    assert!(err(bad).starts_with("http.max_connections_per_address"));
    Http { max_connections_per_address: 0, ..Http::default() }.validate().unwrap();
    // A connection idle for as long as a call may take is not cut off under it.
    for short in [0, 1, 30] {
        let e = err(Http { idle_timeout: Secs(short), ..Http::default() });
        assert!(e.starts_with("http.idle_timeout") && e.contains("31 s"), "{e}");
    }
    Http { idle_timeout: Secs(31), ..Http::default() }.validate().unwrap();
    assert!(err(Http { idle_timeout: Secs(3601), ..Http::default() }).starts_with("http.idle_timeout"));
    let e = toml::from_str::<Settings>("[http]\nidle_timeout = \"30s\"").unwrap().validate().unwrap_err();
    assert!(e.starts_with("http.idle_timeout"), "{e}");
}

#[test]
fn a_partial_cron_table_keeps_the_other_jobs() {
    let path = std::env::temp_dir().join(format!("gce-backend-settings-{}.toml", std::process::id()));
    std::fs::write(&path, "[cron]\naudit_instances = \"5m\"\n").unwrap();
    let s = Settings::load(Some(&path)).unwrap();
    let _ = std::fs::remove_file(&path);
    assert_eq!(s.cron["audit_instances"], "5m");
    assert_eq!(s.cron["manage_bots"], "60s");
    assert_eq!(s.cron.len(), gce_backend_jobs::cron::names().count());
}

#[test]
fn the_stop_grace_is_20_s_below_an_orchestrators_30_s_and_at_most_10_minutes() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("config/service.toml");
    assert_eq!(Settings::load(Some(&path)).unwrap().stop_grace, Settings::default().stop_grace);
    // The whole stop (the grace, then the hand-back) ends within an orchestrator's default 30 s.
    let whole = std::time::Duration::from_secs(Settings::default().stop_grace.0)
        + gce_backend_queues::backend::stop::HAND_BACK_LIMIT;
    assert!(whole < std::time::Duration::from_secs(30), "{whole:?}");
    let s: Settings = toml::from_str("stop_grace = \"1s\"").unwrap();
    assert_eq!(s.stop_grace, Secs(1));
    s.validate().unwrap();
    let e = toml::from_str::<Settings>("stop_grace = \"11m\"").unwrap().validate().unwrap_err();
    assert!(e.starts_with("stop_grace"), "{e}");
}
