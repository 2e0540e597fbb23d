//! Unit tests of the tokens: hashes, expiry, roles, owners, and reloads.

use super::*;

#[test]
fn tokens_are_kept_hashed_and_found_by_the_token() {
    let (token, entry) = new_token("alice", Role::Writer, vec!["infra".into()]);
    let text = toml::to_string(&TokenFile { token: vec![entry.clone()] }).unwrap();
    assert!(!text.contains(&token), "the file never holds the token");
    let tokens = Tokens::parse(&text, "tokens.toml").unwrap();
    assert_eq!(tokens.check(&token, at("2026-01-01T00:00:00Z")).map(|c| c.name.as_str()), Ok("alice"));
    assert_eq!(tokens.check("gbt_wrong", at("2026-01-01T00:00:00Z")), Err(Refusal::Unknown));
    let twice = format!("{text}\n{text}");
    assert!(Tokens::parse(&twice, "t").unwrap_err().contains("twice"));
    let bad = text.replace(&entry.sha256, "abc");
    assert!(Tokens::parse(&bad, "t").unwrap_err().contains("64 hex"));
    assert!(Tokens::parse("[[token]]\nname='x'\nsha256='00'\nrole='root'\n", "t").is_err());
    let anyone = text.replace("role = \"writer\"", "role = \"anyone\"");
    assert!(
        Tokens::parse(&anyone, "t").unwrap_err().contains("metrics, reader, writer or admin"),
        "{anyone}"
    );
}

fn at(s: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(s).unwrap().to_utc()
}

/// A tokens file entry for token `gbt_<name>`.
fn entry(name: &str, role: &str, extra: &str) -> String {
    format!(
        "[[token]]\nname = {name:?}\nsha256 = {:?}\nrole = {role:?}\n{extra}\n",
        hash(&format!("gbt_{name}"))
    )
}

#[test]
fn a_token_with_an_expiry_is_refused_from_then_on_by_name() {
    let quoted = entry("ci", "reader", "expires = \"2027-01-31T12:00:00+01:00\"");
    let native = entry("bot", "writer", "expires = 2027-01-31T11:00:00Z");
    let tokens = Tokens::parse(&format!("{quoted}{native}{}", entry("ops", "admin", "")), "t").unwrap();
    for (token, name) in [("gbt_ci", "ci"), ("gbt_bot", "bot")] {
        let before = tokens.check(token, at("2027-01-31T10:59:59Z"));
        assert_eq!(before.map(|c| c.name.as_str()), Ok(name));
        let refused = tokens.check(token, at("2027-01-31T11:00:00Z")).unwrap_err();
        assert_eq!(refused, Refusal::Expired { name: name.into(), at: at("2027-01-31T11:00:00Z") });
        let said = refused.to_string();
        assert_eq!(said, format!("token {name:?} expired at 2027-01-31T11:00:00Z"));
        assert!(!said.contains(token) && !said.contains(&hash(token)), "{said}");
    }
    assert!(tokens.check("gbt_ops", at("2999-01-01T00:00:00Z")).is_ok(), "no expiry: never");
    // Written back as the CLI writes it: a quoted RFC 3339 time.
    let file: TokenFile = toml::from_str(&native).unwrap();
    assert!(toml::to_string(&file).unwrap().contains("expires = \"2027-01-31T11:00:00Z\""));
    // A time without an offset, or not a time at all, is refused with the rule.
    for bad in ["expires = 2027-01-31T11:00:00", "expires = \"next year\"", "expires = 2027-01-31"] {
        let err = Tokens::parse(&entry("ci", "reader", bad), "tokens.toml").unwrap_err();
        assert!(err.starts_with("tokens.toml: line ") && err.contains("RFC 3339"), "{bad}: {err}");
    }
}

#[test]
fn the_metrics_role_grants_metrics_only_and_admin_grants_everything() {
    use Role::*;
    let grants =
        |r: Role| [Metrics, Reader, Writer, Admin].into_iter().filter(|n| r.grants(*n)).collect::<Vec<_>>();
    assert_eq!(grants(Metrics), [Metrics]);
    assert_eq!(grants(Reader), [Reader]);
    assert_eq!(grants(Writer), [Reader, Writer]);
    assert_eq!(grants(Admin), [Metrics, Reader, Writer, Admin]);
    assert!([Metrics, Reader, Writer, Admin].iter().all(|r| r.grants(Anyone)));
    let scraper = Caller { name: "prom".into(), role: Metrics, groups: vec!["infra".into()] };
    assert!(!scraper.may_read(&Config::default()), "not even a Config without owner");
    assert!(!scraper.may_read(&Config { owner: vec!["infra".into()], ..Config::default() }));
    assert!(Tokens::parse(&entry("prom", "metrics", ""), "t").is_ok());
}

#[test]
fn a_reload_swaps_the_whole_set_and_names_what_changed_and_a_bad_file_changes_nothing() {
    let now = at("2027-01-01T00:00:00Z");
    let first = [entry("a", "reader", ""), entry("b", "writer", ""), entry("c", "admin", "")].concat();
    let live = LiveTokens::from(Tokens::parse(&first, "t").unwrap());
    let held = live.current();
    // b removed, c made a reader, d added; a as it was.
    let second = [entry("a", "reader", ""), entry("c", "reader", ""), entry("d", "metrics", "")].concat();
    let changes = live.reload(&second, "tokens.toml").unwrap();
    let names = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    assert_eq!(changes, Changes { added: names(&["d"]), removed: names(&["b"]), changed: names(&["c"]) });
    let now_set = live.current();
    assert_eq!(now_set.check("gbt_b", now), Err(Refusal::Unknown));
    assert_eq!(now_set.check("gbt_c", now).unwrap().role, Role::Reader);
    assert_eq!(now_set.check("gbt_d", now).unwrap().role, Role::Metrics);
    assert!(held.check("gbt_b", now).is_ok(), "a call under way keeps the set it started with");
    // An expiry added counts as a change; the same text again changes nothing.
    let expiring = [
        entry("a", "reader", "expires = 2027-06-01T00:00:00Z"),
        entry("c", "reader", ""),
        entry("d", "metrics", ""),
    ]
    .concat();
    assert_eq!(live.reload(&expiring, "t").unwrap().changed, names(&["a"]));
    assert_eq!(live.reload(&expiring, "t").unwrap(), Changes::default());
    // A broken file: the error names the file, the line and the rule, never a hash; the set
    // in force stays.
    let broken =
        format!("{expiring}[[token]]\nname = \"e\"\nsha256 = \"{}\"\nrole = \"root\"\n", hash("gbt_e"));
    let unterminated = format!("{expiring}[[token]]\nname = \"e\"\nsha256 = \"{}\n", hash("gbt_e"));
    let short =
        format!("{expiring}{}", entry("e", "reader", "").replace(&hash("gbt_e"), &hash("gbt_e")[..40]));
    for (text, line) in [(&broken, "line 19"), (&unterminated, "line 18"), (&short, "")] {
        let err = live.reload(text, "/etc/gce/tokens.toml").unwrap_err();
        assert!(err.starts_with("/etc/gce/tokens.toml: ") && err.contains(line), "{err}");
        assert!(!err.contains(&hash("gbt_e")[..40]), "no hash in {err}");
    }
    assert!(live.current().check("gbt_a", now).is_ok() && live.current().check("gbt_e", now).is_err());
}

#[test]
fn owners_decide_who_reads_and_writes_a_config() {
    let mut c = Config { owner: vec!["infra".into()], ..Config::default() };
    let who =
        |role, g: &[&str]| Caller { name: "x".into(), role, groups: g.iter().map(|s| (*s).into()).collect() };
    assert!(who(Role::Reader, &["infra"]).may_read(&c));
    assert!(!who(Role::Reader, &["web"]).may_read(&c));
    assert!(!who(Role::Reader, &["infra"]).may_write(&c));
    assert!(who(Role::Writer, &["infra"]).may_write(&c));
    assert!(!who(Role::Writer, &["web"]).may_write(&c));
    assert!(who(Role::Admin, &[]).may_write(&c));
    c.owner.clear();
    assert!(who(Role::Reader, &[]).may_read(&c));
    assert!(!who(Role::Writer, &["infra"]).may_write(&c), "no owner: admins only");
}
