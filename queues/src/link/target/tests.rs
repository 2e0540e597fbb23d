//! What `--redis` URLs parse to, what they are refused for, and that no message shows a password.

use super::*;

fn host(h: &str, port: u16) -> Host {
    Host { host: h.into(), port }
}

#[test]
fn each_mode_parses_with_its_defaults() {
    let t = Target::parse("redis://127.0.0.1:6380/2").unwrap();
    assert_eq!(
        (t.mode, t.tls, t.db, t.password),
        (Mode::Single(host("127.0.0.1", 6380)), false, 2, Password::None)
    );

    let t = Target::parse("rediss://svc:p%40ss@10.0.0.3?ca_file=/etc/redis/ca.pem").unwrap();
    assert_eq!(t.mode, Mode::Single(host("10.0.0.3", 6379)));
    assert_eq!((t.tls, t.user.as_deref()), (true, Some("svc")));
    assert_eq!(t.password, Password::Inline("p@ss".into()));
    assert_eq!(t.ca_file, Some(PathBuf::from("/etc/redis/ca.pem")));

    let t = Target::parse("redis+sentinel://s1,s2:26380,[::1]/mymaster/1").unwrap();
    let sentinels = vec![host("s1", 26379), host("s2", 26380), host("::1", 26379)];
    assert_eq!(t.mode, Mode::Sentinel { sentinels, master: "mymaster".into() });
    assert_eq!((t.db, t.replicas), (1, 1), "behind sentinels, a replica acknowledges operator writes");
    assert_eq!(Target::parse("redis+sentinel://s/m?replicas=0").unwrap().replicas, 0);
    assert_eq!(Target::parse("rediss://h?replicas=2").unwrap().replicas, 2);

    let t = Target::parse("rediss+cluster://10.0.0.1,10.0.0.2:6380?auth=iam&ca_file=/ca.pem").unwrap();
    assert_eq!(t.mode, Mode::Cluster(vec![host("10.0.0.1", 6379), host("10.0.0.2", 6380)]));
    assert_eq!(t.password, Password::Iam);

    let t = Target::parse("redis://app@h?password_file=/run/secrets/redis").unwrap();
    assert_eq!(t.password, Password::File("/run/secrets/redis".into()));
}

#[test]
fn mistakes_are_refused_with_what_is_wrong() {
    for (url, says) in [
        ("http://h:6379", "unknown scheme \"http\""),
        ("h:6379", "expected redis://"),
        ("redis://h1,h2", "2 hosts given"),
        ("redis+sentinel://s1,s2", "names the master"),
        ("redis+cluster://n1/3", "only database 0"),
        ("redis://h:0", "port \"0\""),
        ("redis://h:65536", "port \"65536\""),
        ("redis://h/x", "database \"x\""),
        ("redis://h/0/extra", "unexpected path segment"),
        ("redis://h?tls=1", "unknown option \"tls\""),
        ("redis://h?ca_file=/ca.pem", "ca_file is for TLS"),
        ("redis://h?auth=iam", "auth=iam needs TLS"),
        ("rediss://h?auth=oauth", "the only value is iam"),
        ("rediss://u:pw@h?auth=iam", "takes no other password"),
        ("redis://u:pw@h?password_file=/f", "two passwords"),
        ("redis://h?password_file=", "needs a value"),
        ("redis://:pw@h%zz", "not a host"),
        ("redis://", "a host is missing"),
        ("redis://h?replicas=-1", "0 to 16"),
        ("redis://h?replicas=99", "0 to 16"),
    ] {
        let err = Target::parse(url).expect_err(url);
        assert!(err.contains(says), "{url}: {err}");
        assert!(!err.contains("pw"), "{url}: the password shows in {err}");
    }
}

#[test]
fn the_redacted_url_keeps_everything_but_the_password() {
    let t = Target::parse("rediss://svc:hunter2@10.0.0.3:6378/1?ca_file=/ca.pem").unwrap();
    assert_eq!(t.redacted(), "rediss://svc:***@10.0.0.3:6378/1?ca_file=/ca.pem");
    assert!(!format!("{t:?}").contains("hunter2"));
    let t = Target::parse("redis+sentinel://:hunter2@s1,s2/m").unwrap();
    assert_eq!(t.redacted(), "redis+sentinel://:***@s1:26379,s2:26379/m");
    // What it prints parses back to the same target (the password aside).
    let t = Target::parse("rediss+cluster://u@n1,n2:7000?ca_file=/c&auth=iam&replicas=1").unwrap();
    assert_eq!(Target::parse(&t.redacted()).unwrap(), t);
    assert_eq!(crate::link::redact("redis:/u:hunter2@h"), "***@h");
    assert_eq!(crate::link::redact("rediss://u:hunter2@h:1/0"), "rediss://***@h:1/0");
}
