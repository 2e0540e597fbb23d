//! Unit tests of `adapters/google_auth.rs` against the simulator's metadata server: tokens of
//! the scope asked for, kept until due, and a metadata server that stops answering.

use super::*;

async fn sim() -> (String, gce_backend_sim::Sim) {
    let (addr, sim) = gce_backend_sim::spawn(gce_backend_sim::SimConfig::default()).await.unwrap();
    (addr.to_string(), sim)
}

#[tokio::test]
async fn a_token_of_the_scope_asked_for_is_kept_until_it_is_due() {
    let (host, sim) = sim().await;
    let tokens = Adc::metadata(&host).unwrap().tokens(&[USERINFO_EMAIL]).unwrap();
    let first = tokens.token().await.unwrap();
    assert_eq!(tokens.token().await.unwrap(), first, "kept: an hour's token is not due yet");
    let issued = sim.with(|w| w.accounts.reports(|_| 0));
    assert_eq!(issued.len(), 1, "one fetch");
    assert_eq!(issued[0].scopes, vec![USERINFO_EMAIL.to_owned()]);
}

#[tokio::test]
async fn a_metadata_server_that_stops_answering_fails_the_fetch_and_later_calls_at_once() {
    let (host, sim) = sim().await;
    sim.with(|w| w.accounts.metadata_down = true);
    let adc = Adc::metadata(&host).unwrap();
    let (tokens, other_scope) =
        (adc.tokens(&[CLOUD_PLATFORM]).unwrap(), adc.tokens(&[USERINFO_EMAIL]).unwrap());
    let e = tokens.token().await.unwrap_err();
    assert!(e.transient && e.message.contains("no answer within 5s"), "{e}");
    assert!(adc.failing.load(Ordering::Relaxed), "the outage is marked, for every scope (said once)");
    // Within the wait after a failure no fetch is made: the same error again, the wait not
    // doubled (a second failed fetch would have doubled it).
    let again = tokens.token().await.unwrap_err();
    assert_eq!(again.message, e.message);
    assert_eq!(tokens.state.lock().await.retry.as_ref().map(|r| r.1), Some(FIRST_WAIT));
    sim.with(|w| w.accounts.metadata_down = false);
    tokio::time::sleep(FIRST_WAIT).await;
    assert!(tokens.token().await.is_ok());
    assert!(!adc.failing.load(Ordering::Relaxed), "recovered");
    assert!(other_scope.token().await.is_ok());
}
