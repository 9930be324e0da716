//! The dashboard's semaphores and elections (`/ui#/semaphores`, `/ui#/elections`) in a real
//! browser, against an instance on a real ZooKeeper, as tests/browser.rs drives the locks: a
//! semaphore shows its permits held out of its limit and each holder, and a permit released
//! through the API shows without a reload; an election shows its leader, value and term, and
//! "no leader" once the leader resigns, from its stream; a server without the semaphore
//! stream (its 404) is read once and refreshed on demand, with no retry loop; an admin force
//! releases one permit, then every permit; and no view makes a request while nothing
//! changes. Screenshots go to `target/ui-screenshots/`.

mod common;

use std::time::Duration;

use common::dashboard::{
    count_fetches, counts_down, fetches, screenshot_path, shows, stays_idle, with_browser, WAIT,
};
use common::Service;
use reqwest::StatusCode;
use serde_json::{json, Value};

/// Takes a permit of `name` (limit 3); returns the answer (lease id, fencing token).
async fn take_permit(svc: &Service, name: &str, owner: &str, message: &str) -> Value {
    let body = json!({"owner": owner, "limit": 3, "lease_ms": 120000, "message": message});
    let path = format!("/v1/semaphores/{}/acquire", common::encode(name));
    let (status, answer) = svc.post(&path, body).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    answer
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_semaphore_shows_its_permits_out_of_the_limit_and_each_holder_live() {
    let svc = Service::zk().await;
    let name = "ui-sem/workers";
    let first = take_permit(&svc, name, "worker-a", "batch 1").await;
    let second = take_permit(&svc, name, "worker-b", "batch 2").await;
    let base = svc.base.clone();
    with_browser(move |browser| async move {
        browser
            .goto(&format!("{base}/ui#/semaphores?prefix=ui-sem"))
            .await;
        let row = r#"#semaphores tr[data-name="ui-sem/workers"]"#;
        shows(&browser, &format!("{row} .c-permits"), "2/3").await;
        let holders = browser.text(&format!("{row} .c-holders")).await.unwrap();
        assert_eq!(holders, "worker-a, worker-b");
        assert_eq!(
            browser.text(&format!("{row} .c-waiters")).await.unwrap(),
            "0"
        );
        browser.screenshot(&screenshot_path("semaphores.png")).await;

        // Its own page, by its link (a new fragment: the same page).
        browser.click(&format!("{row} a")).await;
        shows(&browser, r#"[data-field="permits"]"#, "2/3").await;
        let rows = browser
            .wait_for(
                WAIT,
                "both holders are listed",
                "const rows = [...document.querySelectorAll('#holders tbody tr')]; \
                 return rows.length === 2 \
                     ? rows.map(r => [r.dataset.owner, r.dataset.token, \
                                      r.querySelector('.c-message').textContent]) \
                     : null;",
            )
            .await;
        let token = |answer: &Value| answer["fencing_token"].to_string();
        assert_eq!(
            rows,
            json!([
                ["worker-a", token(&first), "batch 1"],
                ["worker-b", token(&second), "batch 2"]
            ])
        );
        let left = counts_down(&browser, "#holders tbody tr .c-lease [data-countdown]").await;
        assert!((1..=120000).contains(&left), "{left} ms left of 120 s");
        assert_eq!(
            browser.text(r#"[data-field="waiters"]"#).await.unwrap(),
            "0"
        );
        browser
            .wait_for(
                WAIT,
                "the stream is live",
                "return document.getElementById('connection').dataset.state === 'live';",
            )
            .await;
        browser.screenshot(&screenshot_path("semaphore.png")).await;

        // A permit released through the API leaves the page, without a reload.
        browser
            .script("window.lwMark = 'same page'; return 1;", vec![])
            .await;
        let body = json!({"lease_id": first["lease_id"]});
        let (status, answer) = common::send(
            &common::http_client(),
            &base,
            "POST",
            "/v1/semaphores/ui-sem%2Fworkers/release",
            Some(body),
            None,
        )
        .await;
        assert_eq!(status, StatusCode::OK, "{answer}");
        shows(&browser, r#"[data-field="permits"]"#, "1/3").await;
        let owners = browser
            .script(
                "return [...document.querySelectorAll('#holders tbody tr')] \
                     .map(r => r.dataset.owner);",
                vec![],
            )
            .await;
        assert_eq!(owners, json!(["worker-b"]));
        let mark = browser.script("return window.lwMark;", vec![]).await;
        assert_eq!(mark, "same page", "the page was not reloaded");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_election_shows_its_leader_and_no_leader_once_the_leader_resigns() {
    let svc = Service::zk().await;
    let body = json!({"candidate": "db-1", "value": "10.0.0.7:5432", "lease_ms": 120000});
    let (status, won) = svc
        .post("/v1/elections/ui-elect%2Fprimary/campaign", body)
        .await;
    assert_eq!(status, StatusCode::OK, "{won}");
    let term = won["term"].to_string();
    let base = svc.base.clone();
    let http = svc.http.clone();
    with_browser(move |browser| async move {
        browser
            .goto(&format!("{base}/ui#/elections?prefix=ui-elect"))
            .await;
        let row = r#"#elections tr[data-name="ui-elect/primary"]"#;
        shows(&browser, &format!("{row} .c-leader"), "db-1").await;
        assert_eq!(
            browser.text(&format!("{row} .c-value")).await.unwrap(),
            "10.0.0.7:5432"
        );
        assert_eq!(browser.text(&format!("{row} .c-term")).await.unwrap(), term);
        counts_down(&browser, &format!("{row} .c-lease [data-countdown]")).await;
        browser.screenshot(&screenshot_path("elections.png")).await;

        browser.click(&format!("{row} a")).await;
        shows(&browser, r#"[data-field="leader"]"#, "db-1").await;
        assert_eq!(
            browser.text(r#"[data-field="value"]"#).await.unwrap(),
            "10.0.0.7:5432"
        );
        assert_eq!(browser.text(r#"[data-field="term"]"#).await.unwrap(), term);
        counts_down(&browser, r#"[data-field="lease"] [data-countdown]"#).await;
        browser
            .wait_for(
                WAIT,
                "the stream is live",
                "return document.getElementById('connection').dataset.state === 'live';",
            )
            .await;
        browser.screenshot(&screenshot_path("election.png")).await;

        // The leader resigns: the stream's `no_leader` shows, without a reload.
        browser
            .script("window.lwMark = 'same page'; return 1;", vec![])
            .await;
        let body = json!({"lease_id": won["lease_id"]});
        let path = "/v1/elections/ui-elect%2Fprimary/resign";
        let (status, answer) = common::send(&http, &base, "POST", path, Some(body), None).await;
        assert_eq!(status, StatusCode::OK, "{answer}");
        shows(&browser, r#"[data-field="leader"]"#, "no leader").await;
        assert_eq!(browser.text(r#"[data-field="term"]"#).await.unwrap(), "—");
        let latest = browser.text("#election-events li").await.unwrap();
        assert!(latest.contains("no leader"), "{latest}");
        let mark = browser.script("return window.lwMark;", vec![]).await;
        assert_eq!(mark, "same page", "the page was not reloaded");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_semaphore_stream_the_page_reads_once_and_refreshes_on_demand() {
    let svc = Service::zk().await;
    let name = "ui-sem-old/pool";
    take_permit(&svc, name, "worker-a", "").await;
    let base = svc.base.clone();
    let http = svc.http.clone();
    with_browser(move |browser| async move {
        browser.goto(&format!("{base}/ui")).await;
        // An older server: its semaphore streams are a 404, as for any unknown route.
        browser
            .script(
                "const real = window.fetch; window.lwStreams = 0; \
                 window.fetch = (path, init) => { \
                   if (/^\\/v1\\/semaphores\\/[^/]+\\/events/.test(String(path))) { \
                     lwStreams += 1; \
                     const body = {error: {code: 'not_found', message: 'no such route'}}; \
                     return Promise.resolve(new Response(JSON.stringify(body), \
                       {status: 404, headers: {'content-type': 'application/json'}})); } \
                   return real(path, init); }; \
                 location.hash = '#/semaphore/ui-sem-old%2Fpool'; return 1;",
                vec![],
            )
            .await;
        shows(&browser, r#"[data-field="permits"]"#, "1/3").await;
        let state = browser
            .wait_for(
                WAIT,
                "the page says it is not live",
                "const c = document.getElementById('connection').dataset.state; \
                 return c === 'unavailable' ? c : null;",
            )
            .await;
        assert_eq!(state, "unavailable");
        let shown = browser
            .script(
                "return [document.getElementById('semaphore-refresh').hidden, \
                         document.getElementById('semaphore-error').hidden];",
                vec![],
            )
            .await;
        assert_eq!(shown, json!([false, true]), "Refresh shows, no error does");

        let body = json!({"owner": "worker-b", "limit": 3, "lease_ms": 120000});
        let path = "/v1/semaphores/ui-sem-old%2Fpool/acquire";
        let (status, _) = common::send(&http, &base, "POST", path, Some(body), None).await;
        assert_eq!(status, StatusCode::OK);
        browser.click("#semaphore-refresh").await;
        shows(&browser, r#"[data-field="permits"]"#, "2/3").await;
        // Past the stream's first retry delays: it was asked for once, and not again.
        tokio::time::sleep(Duration::from_millis(1600)).await;
        let streams = browser.script("return window.lwStreams;", vec![]).await;
        assert_eq!(streams, 1, "the 404 is not retried");
        assert_eq!(
            browser.text(r#"[data-field="permits"]"#).await.unwrap(),
            "2/3"
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_semaphore_and_election_views_make_no_request_while_idle() {
    let svc = Service::zk().await;
    take_permit(&svc, "ui-idle/pool", "worker-a", "").await;
    let body = json!({"candidate": "db-1", "lease_ms": 120000});
    let (status, _) = svc
        .post("/v1/elections/ui-idle%2Flead/campaign", body)
        .await;
    assert_eq!(status, StatusCode::OK);
    let base = svc.base.clone();
    with_browser(move |browser| async move {
        browser.goto(&format!("{base}/ui")).await;
        count_fetches(&browser).await;
        let views = [
            (
                "#/semaphores?prefix=ui-idle",
                r#"#semaphores [data-name="ui-idle/pool"]"#,
            ),
            ("#/semaphore/ui-idle%2Fpool", "#holders tbody tr"),
            (
                "#/elections?prefix=ui-idle",
                r#"#elections [data-name="ui-idle/lead"]"#,
            ),
            ("#/election/ui-idle%2Flead", "#election-events li"),
        ];
        for (route, ready) in views {
            browser
                .script(&format!("location.hash = {route:?}; return 1;"), vec![])
                .await;
            browser
                .wait_for(
                    WAIT,
                    &format!("{route} is shown"),
                    &format!("return document.querySelector({ready:?}) !== null;"),
                )
                .await;
            stays_idle(&browser, route).await;
        }
        let asked = fetches(&browser).await;
        assert_eq!(asked.len(), 4, "one read or stream per view: {asked:?}");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_admin_force_releases_one_permit_then_every_permit() {
    const ADMIN: &str = "adm-kinds-secret";
    let svc = Service::zk_with(|args| args.admin_token = Some(ADMIN.into())).await;
    let name = "ui-sem-force/pool";
    take_permit(&svc, name, "stuck-a", "").await;
    let second = take_permit(&svc, name, "stuck-b", "").await;
    take_permit(&svc, name, "stuck-c", "").await;
    let base = svc.base.clone();
    with_browser(move |browser| async move {
        browser
            .goto(&format!("{base}/ui#/semaphore/ui-sem-force%2Fpool"))
            .await;
        shows(&browser, r#"[data-field="permits"]"#, "3/3").await;
        browser.keys("#token", ADMIN).await;
        browser.click("#token-form button[type=submit]").await;
        shows(&browser, r#"[data-field="permits"]"#, "3/3").await;

        // One permit, by its holder's button: the dialog names it.
        let token = second["fencing_token"].to_string();
        browser
            .click(&format!(r#"#holders button[data-token="{token}"]"#))
            .await;
        let asked = browser.text("#confirm-text").await.unwrap();
        assert!(
            asked.contains("stuck-b") && asked.contains(&token),
            "{asked}"
        );
        browser.click("#confirm-ok").await;
        shows(&browser, r#"[data-field="permits"]"#, "2/3").await;
        let result = browser.text("#semaphore-result").await.unwrap();
        assert!(result.contains("Force released 1 permit"), "{result}");
        let owners = browser
            .script(
                "return [...document.querySelectorAll('#holders tbody tr')] \
                     .map(r => r.dataset.owner);",
                vec![],
            )
            .await;
        assert_eq!(owners, json!(["stuck-a", "stuck-c"]));

        // Then every permit left.
        browser.click("#semaphore-release-all").await;
        browser.click("#confirm-ok").await;
        shows(&browser, "#holders-summary", "No permit is held.").await;
        let result = browser.text("#semaphore-result").await.unwrap();
        assert!(result.contains("Force released 2 permits"), "{result}");
    })
    .await;
}
