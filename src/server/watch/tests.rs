//! Unit tests of `server/watch.rs`: the configs directory's watch sees a change in a folder under
//! it (a file a Config's metadata reads), one made after the watch began too; the tokens file's
//! watch stays on its own directory.

use super::*;

/// A fresh directory with a `metadata` folder holding `startup.sh`.
fn dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("gce-backend-watch-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("metadata")).unwrap();
    std::fs::write(dir.join("metadata/startup.sh"), "v1").unwrap();
    dir
}

/// True when `bursts` reports a burst within `within`.
async fn burst(bursts: &mut Bursts, within: Duration) -> bool {
    matches!(tokio::time::timeout(within, bursts.next()).await, Ok(Some(())))
}

#[tokio::test]
async fn a_file_changed_in_a_folder_of_the_configs_directory_is_a_burst() {
    let dir = dir("recursive");
    let mut bursts = Bursts::new(&dir, RecursiveMode::Recursive, "test", "none").expect("watch");
    std::fs::write(dir.join("metadata/startup.sh"), "v2").unwrap();
    assert!(burst(&mut bursts, Duration::from_secs(10)).await, "a change in metadata/");
    // A folder made after the watch began is watched too: its file changing later is seen.
    std::fs::create_dir_all(dir.join("scripts/linux")).unwrap();
    assert!(burst(&mut bursts, Duration::from_secs(10)).await, "the new folder");
    tokio::time::sleep(Duration::from_millis(200)).await;
    std::fs::write(dir.join("scripts/linux/boot.sh"), "v1").unwrap();
    assert!(burst(&mut bursts, Duration::from_secs(10)).await, "a file in the new folder");
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn the_tokens_file_s_watch_sees_its_own_directory_only() {
    let dir = dir("flat");
    let mut bursts = Bursts::new(&dir, RecursiveMode::NonRecursive, "test", "none").expect("watch");
    std::fs::write(dir.join("metadata/startup.sh"), "v2").unwrap();
    assert!(!burst(&mut bursts, Duration::from_millis(500)).await, "a folder's file is not its own");
    std::fs::write(dir.join("tokens.toml"), "").unwrap();
    assert!(burst(&mut bursts, Duration::from_secs(10)).await, "a file of its own");
    let _ = std::fs::remove_dir_all(&dir);
}
