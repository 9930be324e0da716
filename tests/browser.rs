//! The dashboard (`/ui`) in a real browser: headless Chromium driven over WebDriver, against
//! an instance on a real ZooKeeper. What the API does shows on the page without a reload;
//! a preemption shows its requestor and a cleanup deadline counting down; force release
//! works with the admin token and is refused, visibly, without it; a server with API tokens
//! shows nothing until one is typed in; a tab in the background lets its stream go and
//! catches up when shown; a lease that runs out while a page is open shows as expired, and
//! a page opened after it goes live. Screenshots go to `target/ui-screenshots/`.

mod common;

use std::time::{Duration, Instant};

use common::dashboard::{
    countdown_ms, counts_down, join_queue, screenshot_path, with_browser, with_browsers, WAIT,
};
use common::webdriver::{ENTER, ESCAPE};
use common::Service;
use reqwest::StatusCode;
use serde_json::{json, Value};

const ADMIN: &str = "adm-ui-secret";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_list_shows_a_lock_from_the_api_and_its_release_within_a_second() {
    let svc = Service::zk().await;
    let backup = svc
        .acquire(
            "ui-list/backup",
            json!({"owner": "alice", "lease_ms": 60000, "message": "nightly backup"}),
        )
        .await
        .1;
    svc.acquire(
        "ui-list/deploy",
        json!({"owner": "deploy-bot", "lease_ms": 600000, "message": "release 4.2"}),
    )
    .await;
    let _waiter = join_queue(
        &svc,
        "ui-list/deploy",
        json!({"owner": "ci-runner", "lease_ms": 60000, "waiting_ms": 60000}),
        |lock| lock["waiters"] == 1,
    )
    .await;
    // A third, preempted, so that the screenshot shows a requestor too.
    svc.acquire(
        "ui-list/primary",
        json!({"owner": "db-maintenance", "lease_ms": 900000, "cleanup_ms": 120000,
               "message": "vacuum"}),
    )
    .await;
    let _requestor = join_queue(
        &svc,
        "ui-list/primary",
        json!({"owner": "sre-oncall", "lease_ms": 60000, "priority": 10, "waiting_ms": 120000}),
        |lock| lock["requestor"]["owner"] == "sre-oncall",
    )
    .await;
    let base = svc.base.clone();
    with_browser(move |browser| async move {
        browser.goto(&format!("{base}/ui")).await;
        let row = r#"tr[data-lock="ui-list/backup"]"#;
        browser
            .wait_for(
                WAIT,
                "the lock taken through the API is listed",
                &format!(
                    "return document.querySelector('{row} .c-owner')?.textContent === 'alice';"
                ),
            )
            .await;
        let message = browser.text(&format!("{row} .c-message")).await;
        assert_eq!(message.as_deref(), Some("nightly backup"));
        assert!(countdown_ms(&browser, &format!("{row} [data-countdown]")).await <= 60000);
        // Read on its own once the snapshot is shown: the waiter shows.
        browser
            .wait_for(
                WAIT,
                "the queued caller is counted",
                r#"return document.querySelector('tr[data-lock="ui-list/deploy"] .c-waiters')
                       ?.textContent === '1';"#,
            )
            .await;
        browser
            .wait_for(
                WAIT,
                "the requestor of the third lock shows",
                r#"return document.querySelector('tr[data-lock="ui-list/primary"] .c-cleanup')
                       ?.textContent.endsWith(' s');"#,
            )
            .await;
        browser.screenshot(&screenshot_path("list.png")).await;

        // A mark that a reload would wipe.
        browser
            .script("window.lwMark = 'same page'; return 1;", vec![])
            .await;
        let lease = backup["lease_id"].as_str().unwrap();
        let http = common::http_client();
        let (status, _) = common::send(
            &http,
            &base,
            "POST",
            "/v1/locks/ui-list%2Fbackup/release",
            Some(json!({"lease_id": lease})),
            None,
        )
        .await;
        assert_eq!(status, StatusCode::OK);
        let released = Instant::now();
        browser
            .wait_for(
                Duration::from_secs(1),
                "the release shows within 1 s",
                &format!("return document.querySelector('{row}') === null;"),
            )
            .await;
        println!("release → gone from the page: {:?}", released.elapsed());
        let mark = browser.script("return window.lwMark;", vec![]).await;
        assert_eq!(mark, "same page", "the page was not reloaded");
        assert!(browser
            .text(r#"tr[data-lock="ui-list/deploy"]"#)
            .await
            .is_some());
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_that_runs_out_shows_expired_and_a_page_opened_after_goes_live() {
    let svc = Service::zk().await;
    let base = svc.base.clone();
    let http = svc.http.clone();
    with_browsers(2, move |browsers| async move {
        let (first, second) = (&browsers[0], &browsers[1]);
        first.goto(&format!("{base}/ui")).await;
        first
            .wait_for(
                WAIT,
                "the first page is live",
                "return document.getElementById('connection').dataset.state === 'live';",
            )
            .await;
        let body = json!({"owner": "short-job", "lease_ms": 800});
        let path = "/v1/locks/ui-exp%2Fshort/acquire";
        let (status, _) = common::send(&http, &base, "POST", path, Some(body), None).await;
        assert_eq!(status, StatusCode::OK);
        // Nobody touches the lock: the page hears the lease run out from its stream.
        first
            .wait_for(
                WAIT,
                "the lease that ran out shows as expired",
                r#"return document.querySelector('tr[data-lock="ui-exp/short"] .c-state')
                       ?.textContent === 'expired';"#,
            )
            .await;
        first.screenshot(&screenshot_path("expired.png")).await;
        // A page opened after the expiry (the lock's own page) opens its stream and goes
        // live, and so does a reload of the list.
        second
            .goto(&format!("{base}/ui#/lock/ui-exp%2Fshort"))
            .await;
        second
            .wait_for(
                Duration::from_secs(2),
                "a page opened after the expiry goes live",
                "return document.getElementById('connection').dataset.state === 'live';",
            )
            .await;
        second
            .wait_for(
                WAIT,
                "the lock's page shows it expired",
                "return document.body.textContent.includes('expired (last held by short-job)');",
            )
            .await;
        first.goto(&format!("{base}/ui#/?prefix=ui-exp")).await;
        first
            .wait_for(
                Duration::from_secs(2),
                "the list opened again goes live",
                "return document.getElementById('connection').dataset.state === 'live';",
            )
            .await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hidden_tab_lets_its_stream_go_and_catches_up_when_shown() {
    let svc = Service::zk().await;
    svc.must_acquire("ui-tab/first", "alice", 60000).await;
    let (base, http) = (svc.base.clone(), svc.http.clone());
    with_browser(move |browser| async move {
        browser.goto(&format!("{base}/ui")).await;
        browser
            .wait_for(
                WAIT,
                "the list is live",
                "return document.querySelector('tr[data-lock=\"ui-tab/first\"]') !== null;",
            )
            .await;
        // Every state the connection line goes through, from now on.
        browser
            .script(
                "const line = document.getElementById('connection'); window.lwStates = []; \
                 new MutationObserver(() => lwStates.push(line.dataset.state)) \
                     .observe(line, {attributes: true}); return 1;",
                vec![],
            )
            .await;
        let dashboard = browser.tab().await;
        browser.open_tab("about:blank").await;
        let body = json!({"owner": "bob", "lease_ms": 60000});
        let path = "/v1/locks/ui-tab%2Fsecond/acquire";
        let (status, _) = common::send(&http, &base, "POST", path, Some(body), None).await;
        assert_eq!(status, StatusCode::OK);
        browser.switch_to(&dashboard).await;
        browser
            .wait_for(
                WAIT,
                "the change made while hidden shows",
                "return document.querySelector('tr[data-lock=\"ui-tab/second\"]') !== null;",
            )
            .await;
        let states = browser.script("return window.lwStates;", vec![]).await;
        let states: Vec<&str> = states
            .as_array()
            .unwrap()
            .iter()
            .filter_map(Value::as_str)
            .collect();
        let paused = states.iter().position(|s| *s == "paused");
        assert!(
            paused.is_some(),
            "the hidden tab let its stream go: {states:?}"
        );
        assert!(states[paused.unwrap()..].contains(&"live"), "{states:?}");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_preemption_shows_the_requestor_and_a_cleanup_deadline_counting_down() {
    let svc = Service::zk().await;
    let (status, _) = svc
        .acquire(
            "ui-pre/db",
            json!({"owner": "batch-job", "lease_ms": 120000, "cleanup_ms": 30000,
                   "message": "reindex orders"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    // The second caller joins once the first is the requestor: otherwise it would outrank
    // the holder itself, and preempt.
    let _requestor = join_queue(
        &svc,
        "ui-pre/db",
        json!({"owner": "sre-oncall", "lease_ms": 60000, "priority": 5, "waiting_ms": 60000,
               "message": "fail over"}),
        |lock| lock["requestor"]["owner"] == "sre-oncall",
    )
    .await;
    let _queued = join_queue(
        &svc,
        "ui-pre/db",
        json!({"owner": "reporting", "lease_ms": 60000, "priority": 1, "waiting_ms": 60000,
               "message": "monthly report"}),
        |lock| lock["waiters"] == 2,
    )
    .await;
    let base = svc.base.clone();
    with_browser(move |browser| async move {
        browser.goto(&format!("{base}/ui#/lock/ui-pre%2Fdb")).await;
        browser
            .wait_for(
                WAIT,
                "the requestor shows",
                r#"return document.querySelector('[data-field="requestor"]')
                       ?.textContent.includes('sre-oncall');"#,
            )
            .await;
        let first = counts_down(&browser, r#"[data-field="cleanup"] [data-countdown]"#).await;
        assert!((1..=30000).contains(&first), "{first} ms left of 30 s");
        // The queue, in the order the lock will be handed on.
        let order = browser
            .wait_for(
                WAIT,
                "the queue lists both callers",
                "const rows = [...document.querySelectorAll('#queue tbody tr')]; \
                 return rows.length === 2 ? rows.map(r => r.dataset.owner) : null;",
            )
            .await;
        assert_eq!(order, json!(["sre-oncall", "reporting"]));
        let first_row = browser.text("#queue tbody tr").await.unwrap();
        assert!(first_row.contains("requestor"), "{first_row}");
        browser
            .wait_for(
                WAIT,
                "recent events show the snapshot",
                "return document.querySelector('#events li') !== null;",
            )
            .await;
        browser.screenshot(&screenshot_path("lock.png")).await;

        // The list shows the same, counting down too. (A new fragment: the same page.)
        browser.goto(&format!("{base}/ui#/?prefix=ui-pre")).await;
        let row = r#"tr[data-lock="ui-pre/db"]"#;
        browser
            .wait_for(
                WAIT,
                "the list shows the requestor",
                &format!(
                    "return document.querySelector('{row} .c-requestor')?.textContent \
                     === 'sre-oncall (priority 5)';"
                ),
            )
            .await;
        counts_down(&browser, &format!("{row} .c-cleanup [data-countdown]")).await;
        assert_eq!(
            browser.text(&format!("{row} .c-waiters")).await.unwrap(),
            "2"
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn force_release_works_with_the_admin_token_and_is_refused_without_it() {
    let svc = Service::zk_with(|args| args.admin_token = Some(ADMIN.into())).await;
    svc.must_acquire("ui-force/x", "stuck-job", 120000).await;
    let base = svc.base.clone();
    let http = svc.http.clone();
    with_browser(move |browser| async move {
        let held_by = |owner: &'static str| {
            let (http, base) = (http.clone(), base.clone());
            async move {
                let (_, lock) =
                    common::send(&http, &base, "GET", "/v1/locks/ui-force%2Fx", None, None).await;
                lock["owner"] == owner && lock["state"] == "held"
            }
        };
        browser.goto(&format!("{base}/ui#/lock/ui-force%2Fx")).await;
        browser
            .wait_for(
                WAIT,
                "the holder shows",
                r#"return document.querySelector('[data-field="owner"]')?.textContent
                       === 'stuck-job';"#,
            )
            .await;

        // By keyboard: Enter on the button opens the confirmation, with the focus on
        // Cancel; Escape closes it, and nothing is released.
        browser.keys("#force-release", ENTER).await;
        let focused = browser
            .wait_for(
                WAIT,
                "the confirmation opens",
                "const d = document.getElementById('confirm'); \
                 return d.open ? document.activeElement.id : null;",
            )
            .await;
        assert_eq!(focused, "confirm-cancel");
        browser.keys("#confirm-cancel", ESCAPE).await;
        browser
            .wait_for(
                WAIT,
                "Escape closes the confirmation",
                "return !document.getElementById('confirm').open;",
            )
            .await;
        assert!(held_by("stuck-job").await);

        // Without a token: refused, and the page says so.
        browser.click("#force-release").await;
        browser.click("#confirm-ok").await;
        let refusal = browser
            .wait_for(
                WAIT,
                "the refusal shows",
                "const r = document.getElementById('action-result'); \
                 return !r.hidden && r.classList.contains('refused') ? r.textContent : null;",
            )
            .await;
        let refusal = refusal.as_str().unwrap();
        assert!(
            refusal.contains("Refused") && refusal.contains("403 forbidden"),
            "{refusal}"
        );
        assert!(
            held_by("stuck-job").await,
            "the refused release changed nothing"
        );

        // With the admin token, typed into the page.
        browser.keys("#token", ADMIN).await;
        browser.click("#token-form button[type=submit]").await;
        let kept = browser
            .script(
                "return [sessionStorage.getItem('lockwarden.token'), location.href];",
                vec![],
            )
            .await;
        assert_eq!(kept[0], ADMIN, "the token is kept in sessionStorage");
        assert!(
            !kept[1].as_str().unwrap().contains(ADMIN),
            "never in the URL"
        );
        browser.click("#force-release").await;
        browser.click("#confirm-ok").await;
        let done = browser
            .wait_for(
                WAIT,
                "the force release is confirmed",
                "const r = document.getElementById('action-result'); \
                 return r.classList.contains('ok') ? r.textContent : null;",
            )
            .await;
        assert!(done.as_str().unwrap().contains("Force released"), "{done}");
        browser
            .wait_for(
                Duration::from_secs(1),
                "the page shows the lock free",
                r#"return document.querySelector('[data-field="state"]')?.textContent
                       === 'free';"#,
            )
            .await;
        assert!(!held_by("stuck-job").await);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_api_tokens_the_page_reads_nothing_until_a_token_is_typed_in() {
    let svc = Service::zk_with(|args| args.api_tokens = vec!["reader-token".into()]).await;
    let (status, _) = svc
        .send(
            "POST",
            "/v1/locks/ui-auth/acquire",
            Some(json!({"owner": "carol", "lease_ms": 60000})),
            Some("reader-token"),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let base = svc.base.clone();
    with_browser(move |browser| async move {
        browser.goto(&format!("{base}/ui")).await;
        let refused = browser
            .wait_for(
                WAIT,
                "the page says it needs a token",
                "const e = document.getElementById('list-error'); \
                 return e.hidden ? null : e.textContent;",
            )
            .await;
        assert!(
            refused.as_str().unwrap().contains("401 unauthorized"),
            "{refused}"
        );
        browser.keys("#token", "reader-token").await;
        browser.click("#token-form button[type=submit]").await;
        browser
            .wait_for(
                WAIT,
                "the lock is listed once the token is set",
                r#"return document.querySelector('tr[data-lock="ui-auth"] .c-owner')
                       ?.textContent === 'carol';"#,
            )
            .await;
    })
    .await;
}
