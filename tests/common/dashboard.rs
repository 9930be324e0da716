//! What the dashboard's browser tests share (tests/browser.rs, tests/browser_kinds.rs): one
//! browser at a time, closed even when a test panics; callers that wait on a lock in the
//! background; reading a countdown or a text off the page; and counting the page's requests.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::Value;
use tokio::task::JoinHandle;

use super::webdriver::Browser;
use super::{encode, Service};

pub const WAIT: Duration = Duration::from_secs(10);

/// One browser at a time: the machine is small, and a test's timings should be its own.
static TURN: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

pub fn screenshot_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("target/ui-screenshots")
        .join(name)
}

/// Runs `test` with a fresh browser, and closes the browser even when the test panics.
pub async fn with_browser<F, Fut>(test: F)
where
    F: FnOnce(Browser) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    with_browsers(1, |mut browsers| test(browsers.remove(0))).await;
}

/// Runs `test` with `count` fresh browsers (one session, one Chromium each), and closes
/// them all even when the test panics.
pub async fn with_browsers<F, Fut>(count: usize, test: F)
where
    F: FnOnce(Vec<Browser>) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let _turn = TURN.lock().await;
    let mut browsers = Vec::with_capacity(count);
    for _ in 0..count {
        // Tall enough for a lock's page, queue included, in one screenshot.
        browsers.push(Browser::open(1280, 1100).await);
    }
    let outcome = tokio::spawn(test(browsers.clone())).await;
    for browser in browsers {
        browser.close().await;
    }
    if let Err(failure) = outcome {
        std::panic::resume_unwind(failure.into_panic());
    }
}

/// An acquire that waits (in the lock's queue, or as a preemptor), run in the background.
pub fn waiting_acquire(svc: &Service, name: &str, body: Value) -> JoinHandle<StatusCode> {
    let request = svc
        .http
        .post(format!("{}/v1/locks/{}/acquire", svc.base, encode(name)))
        .json(&body);
    tokio::spawn(async move { request.send().await.map(|r| r.status()).unwrap_or_default() })
}

/// Starts an acquire that waits on `name`; returns once the lock's info passes `joined`.
pub async fn join_queue(
    svc: &Service,
    name: &str,
    body: Value,
    joined: impl Fn(&Value) -> bool,
) -> JoinHandle<StatusCode> {
    let call = waiting_acquire(svc, name, body);
    super::eventually(WAIT, &format!("a caller waits for {name}"), || async {
        joined(&svc.info(name).await)
    })
    .await;
    call
}

/// Reads the countdown, then reads it again until it shows less (within 5 s); returns the
/// first value read.
pub async fn counts_down(browser: &Browser, css: &str) -> i64 {
    let first = countdown_ms(browser, css).await;
    let deadline = Instant::now() + Duration::from_secs(5);
    while countdown_ms(browser, css).await >= first {
        assert!(Instant::now() < deadline, "{css} did not count down");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    first
}

/// The countdown's value on screen, in milliseconds.
pub async fn countdown_ms(browser: &Browser, css: &str) -> i64 {
    let script = format!(
        "const e = document.querySelector({css:?}); return e ? Number(e.dataset.ms) : null;"
    );
    let value = browser.wait_for(WAIT, css, &script).await;
    value.as_i64().unwrap()
}

/// Waits until the page has `text` at `css`.
pub async fn shows(browser: &Browser, css: &str, text: &str) {
    let script =
        format!("return document.querySelector({css:?})?.textContent.trim() === {text:?};");
    browser
        .wait_for(WAIT, &format!("{css} shows {text:?}"), &script)
        .await;
}

/// Counts the page's calls to `fetch` from now on, in `window.lwFetches` (their paths).
pub async fn count_fetches(browser: &Browser) {
    browser
        .script(
            "if (!window.lwFetches) { const real = window.fetch; window.lwFetches = []; \
               window.fetch = (path, init) => { lwFetches.push(String(path)); \
                                                return real(path, init); }; } \
             return 1;",
            vec![],
        )
        .await;
}

/// The paths the page fetched since [`count_fetches`].
pub async fn fetches(browser: &Browser) -> Vec<String> {
    let paths = browser.script("return window.lwFetches;", vec![]).await;
    serde_json::from_value(paths).unwrap()
}

/// Asserts that the page makes no request over a second while nothing changes.
pub async fn stays_idle(browser: &Browser, view: &str) {
    let before = fetches(browser).await.len();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let after = fetches(browser).await;
    assert_eq!(
        after.len(),
        before,
        "{view} made requests while idle: {after:?}"
    );
}
