//! The dashboard's files as served, without a browser: the page and each asset with its
//! content type, a strict Content-Security-Policy and `nosniff`; no inline script; an unknown
//! asset is the API's JSON 404. (tests/browser.rs drives the page itself.)

use crate::common;

use common::Service;
use reqwest::StatusCode;
use serde_json::Value;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_and_its_assets_are_served_with_a_strict_policy() {
    let svc = Service::memory().await;
    let get = |path: &str| svc.http.get(format!("{}{path}", svc.base)).send();
    let page = get("/ui").await.unwrap();
    assert_eq!(page.status(), StatusCode::OK);
    assert_eq!(page.headers()["content-type"], "text/html; charset=utf-8");
    let policy = page.headers()["content-security-policy"].to_str().unwrap();
    assert!(policy.contains("script-src 'self'") && !policy.contains("unsafe"));
    assert!(policy.contains("frame-ancestors 'none'"));
    let html = page.text().await.unwrap();
    for script in html.split("<script").skip(1) {
        assert!(script.contains("src=\"/ui/"), "no inline script: {script}");
    }
    for (asset, content_type, _) in lockwarden::api::ui::ASSETS {
        let response = get(&format!("/ui/{asset}")).await.unwrap();
        assert_eq!(response.status(), StatusCode::OK, "{asset}");
        assert_eq!(response.headers()["content-type"], content_type, "{asset}");
        assert_eq!(response.headers()["x-content-type-options"], "nosniff");
        assert!(response.headers().contains_key("content-security-policy"));
    }
    let missing = get("/ui/nope.js").await.unwrap();
    assert_eq!(missing.status(), StatusCode::NOT_FOUND);
    let body: Value = missing.json().await.unwrap();
    assert_eq!(body["error"]["code"], "not_found");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_root_and_ui_with_a_slash_lead_a_browser_to_the_dashboard() {
    let svc = Service::memory().await;
    let no_redirects = reqwest::Client::builder()
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    for path in ["/", "/ui/"] {
        let response = no_redirects
            .get(format!("{}{path}", svc.base))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::PERMANENT_REDIRECT, "{path}");
        assert_eq!(response.headers()["location"], "/ui", "{path}");
        // A browser follows it to the page.
        let followed = svc
            .http
            .get(format!("{}{path}", svc.base))
            .send()
            .await
            .unwrap();
        assert_eq!(followed.status(), StatusCode::OK, "{path}");
        assert_eq!(
            followed.headers()["content-type"],
            "text/html; charset=utf-8"
        );
    }
}
