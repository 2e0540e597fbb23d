//! Unit tests of `server/tokens.rs`.

use super::*;

#[test]
fn init_makes_the_file_once_with_an_admin_token_that_it_accepts_and_never_touches_it_again() {
    let dir = std::env::temp_dir().join(format!("gce-backend-tokens-init-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("tokens.toml");
    init(&path).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    let token = std::fs::read_to_string(admin_token_path(&path)).unwrap();
    let tokens = crate::api::auth::Tokens::parse(&text, "t").unwrap();
    let caller = tokens
        .check(token.trim(), chrono::DateTime::UNIX_EPOCH)
        .expect("the token written beside the file is accepted");
    assert_eq!(caller.role, crate::api::auth::Role::Admin);
    // A second start keeps the file as it is (an operator's edits stay).
    std::fs::write(&path, "# edited\n").unwrap();
    init(&path).unwrap();
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "# edited\n");
    let _ = std::fs::remove_dir_all(&dir);
}
