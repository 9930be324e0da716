//! The crate's leadership: campaign, keep the lease by renewing, proclaim, lose it to a
//! preferred candidate, resign on drop, and observe.

use std::time::{Duration, Instant};

use crate::common::{eventually, Service};
use lockwarden_client::{Client, LossReason};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leadership_is_kept_proclaimed_observed_and_resigned() {
    let service = Service::zk().await;
    let client = Client::new(&service.base);
    let mut observer = client.observe("jobs/leader");
    assert_eq!(observer.next().await.unwrap().kind, "snapshot");
    let leader = client
        .election("jobs/leader")
        .candidate("node-1")
        .value("10.0.0.1:80")
        .lease(Duration::from_millis(900))
        .campaign()
        .await
        .unwrap();
    let elected = observer.next().await.unwrap();
    assert_eq!(elected.kind, "elected");
    let told = elected.election.unwrap().leader.unwrap();
    assert_eq!(
        (told.candidate.as_str(), told.term),
        ("node-1", Some(leader.term()))
    );
    // Renewed every third of its lease: still the leader after three leases.
    let until = Instant::now() + Duration::from_millis(2700);
    while Instant::now() < until {
        let now = client.leader("jobs/leader").await.unwrap();
        assert_eq!(now.leader.unwrap().term, Some(leader.term()));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let after = leader.proclaim("10.0.0.2:80").await.unwrap();
    assert_eq!(after.leader.unwrap().value, "10.0.0.2:80");
    let proclaimed = observer.next().await.unwrap();
    assert_eq!(proclaimed.kind, "proclaimed");
    let refused = client
        .election("jobs/leader")
        .candidate("node-2")
        .campaign()
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Some("leader_exists"));
    drop(leader);
    let gone = observer.next().await.unwrap();
    assert_eq!(gone.kind, "no_leader", "a dropped leadership resigns");
    assert!(client.leader("jobs/leader").await.unwrap().leader.is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_preferred_candidate_takes_over_and_the_leader_hears_of_it() {
    let service = Service::zk().await;
    let client = Client::new(&service.base);
    let leader = client
        .election("e")
        .candidate("old")
        .lease(Duration::from_secs(30))
        .campaign()
        .await
        .unwrap();
    let preferred = client
        .election("e")
        .candidate("new")
        .priority(5)
        .wait(Duration::from_secs(5))
        .campaign()
        .await
        .unwrap();
    assert!(preferred.term() > leader.term());
    let reason = tokio::time::timeout(Duration::from_secs(10), leader.lost())
        .await
        .expect("the old leader hears within 10 s");
    assert!(
        matches!(
            reason,
            LossReason::Superseded { .. } | LossReason::RenewalRefused { .. }
        ),
        "{reason:?}"
    );
    preferred.resign().await.unwrap();
    eventually(Duration::from_secs(10), "no leader", || async {
        client.leader("e").await.unwrap().leader.is_none()
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_with_a_cleanup_window_is_asked_and_hands_over_when_it_resigns() {
    let service = Service::zk().await;
    let client = Client::new(&service.base);
    let leader = client
        .election("g")
        .candidate("old")
        .cleanup(Duration::from_secs(30))
        .campaign()
        .await
        .unwrap();
    let asking = client.clone();
    let preferred = tokio::spawn(async move {
        asking
            .election("g")
            .candidate("new")
            .priority(5)
            .wait(Duration::from_secs(20))
            .campaign()
            .await
    });
    let request = tokio::time::timeout(Duration::from_secs(10), leader.cleanup_requested())
        .await
        .expect("the leader is asked within 10 s");
    assert_eq!(request.requestor.owner, "new");
    assert!(request.remaining().is_some());
    leader.resign().await.unwrap();
    let preferred = preferred.await.unwrap().unwrap();
    assert_eq!(
        client.leader("g").await.unwrap().leader.unwrap().term,
        Some(preferred.term())
    );
}
