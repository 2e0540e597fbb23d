//! Unit tests of `world/machines.rs`.

use super::*;

#[test]
fn a_machines_bot_connects_restarts_after_termination_and_stays_down_when_killed() {
    let now = Instant::now();
    let mut w = World::new(SimConfig::default(), now);
    let step = Duration::from_millis(w.cfg.bot_connect_ms + 1);
    assert!(!w.add_machine("https://s", "bad host"));
    assert!(w.add_machine("https://s", "mac-1"));
    w.advance(now + step);
    let first = w.bot("s", "mac-1").expect("connected").bot.session;
    // Terminated (no task running in the default config: at once), then back.
    w.terminate_bot("s", "mac-1");
    w.advance(now + step);
    assert!(w.bot("s", "mac-1").unwrap().bot.dead_at.is_some(), "terminated");
    w.advance(now + step * 3);
    let b = w.bot("s", "mac-1").unwrap().bot;
    assert!(b.dead_at.is_none() && b.session != first, "a new session");
    // Deleted while running: it polls again and comes back.
    assert!(w.delete_bot("s", "mac-1"));
    w.advance(now + step * 5);
    assert!(!w.bot("s", "mac-1").unwrap().bot.deleted);
    // Killed: down until added again.
    assert!(w.kill_bot("s", "mac-1"));
    w.advance(now + step * 7);
    assert!(w.bot("s", "mac-1").unwrap().bot.dead_at.is_some());
    w.add_machine("https://s", "mac-1");
    w.advance(now + step * 9);
    assert!(w.bot("s", "mac-1").unwrap().bot.dead_at.is_none());
}
