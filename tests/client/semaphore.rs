//! The crate's semaphore guard: permits up to the limit, kept by renewing, lost to a
//! preemptor (which its holder hears of), and released on drop.

use std::time::{Duration, Instant};

use crate::common::{eventually, Service};
use lockwarden_client::{Client, LossReason};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn permits_are_kept_up_to_the_limit_and_released_on_drop() {
    let service = Service::zk().await;
    let client = Client::new(&service.base);
    let permit = |owner: &str| {
        client
            .semaphore("db/pool", 2)
            .owner(owner)
            .lease(Duration::from_millis(900))
            .acquire()
    };
    let first = permit("a").await.unwrap();
    let second = permit("b").await.unwrap();
    assert!(second.fencing_token() > first.fencing_token());
    let full = permit("c").await.unwrap_err();
    assert_eq!(full.code(), Some("semaphore_full"));
    // Renewed every third of its lease: both still held after three leases.
    let until = Instant::now() + Duration::from_millis(2700);
    while Instant::now() < until {
        let now = client.semaphore_info("db/pool").await.unwrap();
        assert_eq!((now.held, now.limit), (2, Some(2)));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(first.loss().is_none() && second.loss().is_none());
    let mismatch = client.semaphore("db/pool", 3).acquire().await.unwrap_err();
    assert_eq!(mismatch.code(), Some("limit_mismatch"));
    drop(first);
    eventually(
        Duration::from_secs(10),
        "a dropped permit is released",
        || async { client.semaphore_info("db/pool").await.unwrap().held == 1 },
    )
    .await;
    let third = permit("c").await.unwrap();
    let listed = client.semaphores("db", None, None).await.unwrap();
    assert_eq!(listed.semaphores[0].held, 2);
    third.release().await.unwrap();
    second.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_preempted_permit_is_told_and_lost() {
    let service = Service::zk().await;
    let client = Client::new(&service.base);
    let low = client
        .semaphore("p", 1)
        .owner("low")
        .cleanup(Duration::from_secs(30))
        .lease(Duration::from_millis(900))
        .acquire()
        .await
        .unwrap();
    let asking = high_asks(&client, "p");
    let asked = tokio::time::timeout(Duration::from_secs(10), low.cleanup_requested())
        .await
        .expect("the holder is asked to give way");
    assert_eq!(asked.requestor.owner, "high");
    let token = low.fencing_token();
    low.release().await.unwrap();
    let high = asking.await.unwrap().unwrap();
    assert!(high.fencing_token() > token);
    // A permit taken without cleanup is lost, and its guard says so.
    let taken = client
        .semaphore("q", 1)
        .owner("low")
        .lease(Duration::from_millis(900))
        .acquire()
        .await
        .unwrap();
    let _boss = client
        .semaphore("q", 1)
        .owner("boss")
        .priority(9)
        .wait(Duration::from_secs(10))
        .acquire()
        .await
        .unwrap();
    let lost = tokio::time::timeout(Duration::from_secs(10), taken.lost())
        .await
        .expect("the preempted permit is lost");
    assert!(
        matches!(
            lost,
            LossReason::RenewalRefused { .. } | LossReason::Superseded { .. }
        ),
        "{lost:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_semaphore_s_stream_names_each_permit() {
    let service = Service::zk().await;
    let client = Client::new(&service.base);
    let mut watch = client.watch_semaphore("jobs");
    let snapshot = watch.next().await.unwrap();
    assert_eq!(snapshot.kind, "snapshot");
    assert_eq!(snapshot.semaphore.unwrap().held, 0);
    let permit = client
        .semaphore("jobs", 4)
        .owner("a")
        .acquire()
        .await
        .unwrap();
    let acquired = watch.next().await.unwrap();
    assert_eq!(acquired.kind, "acquired");
    assert_eq!(acquired.fencing_token, Some(permit.fencing_token().0));
    assert_eq!(acquired.semaphore.unwrap().limit, Some(4));
}

/// With a minute's lease the next renewal is 20 s away: the guard hears a preemptor's
/// request, and then the loss of its permit, from the semaphore's stream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guard_hears_of_its_permit_from_the_stream() {
    let service = Service::zk_with(|args| args.admin_token = Some("root".into())).await;
    let client = Client::new(&service.base);
    let low = client
        .semaphore("long", 1)
        .owner("low")
        .cleanup(Duration::from_secs(30))
        .lease(Duration::from_secs(60))
        .acquire()
        .await
        .unwrap();
    let asking = high_asks(&client, "long");
    let asked = tokio::time::timeout(Duration::from_secs(10), low.cleanup_requested())
        .await
        .expect("the stream tells the holder it is asked to give way");
    assert_eq!(asked.requestor.owner, "high");
    let (status, _) = service
        .send(
            "DELETE",
            &format!(
                "/v1/semaphores/long?fencing_token={}",
                low.fencing_token().0
            ),
            None,
            Some("root"),
        )
        .await;
    assert_eq!(status, reqwest::StatusCode::OK);
    tokio::time::timeout(Duration::from_secs(10), low.lost())
        .await
        .expect("the stream tells the holder its permit is gone");
    asking.await.unwrap().unwrap();
}

/// A caller "high" of priority 5 asks for a permit of `name` (1 permit), waiting up to 30 s.
fn high_asks(
    client: &Client,
    name: &'static str,
) -> tokio::task::JoinHandle<Result<lockwarden_client::LockGuard, lockwarden_client::Error>> {
    let client = client.clone();
    tokio::spawn(async move {
        client
            .semaphore(name, 1)
            .owner("high")
            .priority(5)
            .wait(Duration::from_secs(30))
            .acquire()
            .await
    })
}
