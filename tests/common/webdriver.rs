//! A headless Chromium for browser tests: Debian's `chromedriver` on a free loopback port
//! (one per test binary, under the same watchdog as ZooKeeper, so it dies with the tests),
//! and a small W3C WebDriver client over reqwest that speaks to it.
//!
//! The client covers what the dashboard's tests do (open a page, run a script, find, click
//! and type into elements, take a screenshot); it needs no WebDriver crate, whose TLS stack
//! would be compiled for a connection that never leaves loopback.

use std::path::Path;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use base64::Engine;
use serde_json::{json, Value};

use super::zk::{free_port, Watched};

pub const CHROMIUM: &str = "/usr/bin/chromium";
pub const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
/// The key W3C WebDriver names an element reference by.
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

/// Keys, as WebDriver's "send keys" spells them.
pub const ENTER: &str = "\u{E007}";
pub const ESCAPE: &str = "\u{E00C}";

struct Driver {
    base: String,
    _process: Watched,
    _dir: tempfile::TempDir,
}

/// The test binary's chromedriver, started at the first call.
fn driver() -> &'static Driver {
    static DRIVER: OnceLock<Driver> = OnceLock::new();
    DRIVER.get_or_init(|| {
        for needed in [CHROMIUM, CHROMEDRIVER] {
            assert!(
                Path::new(needed).exists(),
                "{needed} is missing: the browser tests need Debian's `chromium` and \
                 `chromium-driver` (./scripts/install-test-deps installs them)"
            );
        }
        let port = free_port();
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("chromedriver.log");
        let process = Watched::spawn(&format!("{CHROMEDRIVER} --port={port}"), &log);
        let base = format!("http://127.0.0.1:{port}");
        let deadline = Instant::now() + Duration::from_secs(30);
        // Blocking: this runs once, before any session, from inside a test's runtime.
        let ready = || {
            std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
                && std::fs::read_to_string(&log).is_ok_and(|l| l.contains("started successfully"))
        };
        while !ready() {
            assert!(
                Instant::now() < deadline,
                "chromedriver did not start; its log: {}",
                std::fs::read_to_string(&log).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        Driver {
            base,
            _process: process,
            _dir: dir,
        }
    })
}

/// One browser session (one headless Chromium). Cloning shares the session.
#[derive(Clone)]
pub struct Browser {
    http: reqwest::Client,
    session: String,
}

impl Browser {
    /// Starts a headless Chromium with a window of `width` × `height` pixels.
    pub async fn open(width: u32, height: u32) -> Browser {
        let http = reqwest::Client::builder()
            .no_proxy()
            .timeout(Duration::from_secs(60))
            .build()
            .unwrap();
        let base = &driver().base;
        let capabilities = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": CHROMIUM,
                "args": [
                    "--headless=new",
                    "--no-sandbox",
                    "--disable-gpu",
                    "--disable-dev-shm-usage",
                    "--no-first-run",
                    "--no-default-browser-check",
                    "--disable-extensions",
                    format!("--window-size={width},{height}"),
                ],
            },
        }}});
        let answer = call(
            &http,
            "POST",
            &format!("{base}/session"),
            Some(capabilities),
        )
        .await;
        let id = answer["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no session from chromedriver: {answer}"));
        Browser {
            http,
            session: format!("{base}/session/{id}"),
        }
    }

    async fn command(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        call(&self.http, method, &format!("{}{path}", self.session), body).await
    }

    /// Ends the session, and with it the browser.
    pub async fn close(&self) {
        self.command("DELETE", "", None).await;
    }

    /// Opens a new tab, switches to it, and loads `url` there.
    pub async fn open_tab(&self, url: &str) {
        let tab = self
            .command("POST", "/window/new", Some(json!({"type": "tab"})))
            .await;
        self.switch_to(&tab["handle"]).await;
        self.goto(url).await;
    }

    /// The handle of the current tab.
    pub async fn tab(&self) -> Value {
        self.command("GET", "/window", None).await
    }

    /// Makes the tab `handle` the current one (and the one shown).
    pub async fn switch_to(&self, handle: &Value) {
        self.command("POST", "/window", Some(json!({"handle": handle})))
            .await;
    }

    pub async fn goto(&self, url: &str) {
        self.command("POST", "/url", Some(json!({"url": url})))
            .await;
    }

    /// Runs `body` (a function body: `return ...`) in the page with `args` as `arguments`.
    pub async fn script(&self, body: &str, args: Vec<Value>) -> Value {
        let request = json!({"script": body, "args": args});
        self.command("POST", "/execute/sync", Some(request)).await
    }

    /// Runs `body` until it returns something other than null or false, and returns that;
    /// panics with `what` after `within`.
    pub async fn wait_for(&self, within: Duration, what: &str, body: &str) -> Value {
        let deadline = Instant::now() + within;
        loop {
            let value = self.script(body, vec![]).await;
            if !(value.is_null() || value == Value::Bool(false)) {
                return value;
            }
            assert!(Instant::now() < deadline, "timed out waiting for: {what}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The trimmed text of the first element matching `css`, `None` when there is none.
    pub async fn text(&self, css: &str) -> Option<String> {
        let value = self
            .script(
                "const e = document.querySelector(arguments[0]); \
                 return e ? e.textContent.trim() : null;",
                vec![json!(css)],
            )
            .await;
        value.as_str().map(str::to_owned)
    }

    async fn element(&self, css: &str) -> String {
        let request = json!({"using": "css selector", "value": css});
        let found = self.command("POST", "/element", Some(request)).await;
        found[ELEMENT]
            .as_str()
            .unwrap_or_else(|| panic!("no element {css}: {found}"))
            .to_owned()
    }

    /// Clicks the element as a user would (WebDriver checks that it can be clicked).
    pub async fn click(&self, css: &str) {
        let id = self.element(css).await;
        let path = format!("/element/{id}/click");
        self.command("POST", &path, Some(json!({}))).await;
    }

    /// Types `text` into the element (keys such as [`ENTER`] included), focusing it first.
    pub async fn keys(&self, css: &str, text: &str) {
        let id = self.element(css).await;
        let path = format!("/element/{id}/value");
        self.command("POST", &path, Some(json!({"text": text})))
            .await;
    }

    /// Saves a PNG of the window at `path` (its folder made if need be).
    pub async fn screenshot(&self, path: &Path) {
        let encoded = self.command("GET", "/screenshot", None).await;
        let png = base64::engine::general_purpose::STANDARD
            .decode(encoded.as_str().expect("a screenshot is base64 text"))
            .unwrap();
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, png).unwrap();
    }
}

/// Sends one WebDriver command and returns its `value`; panics on a WebDriver error.
async fn call(http: &reqwest::Client, method: &str, url: &str, body: Option<Value>) -> Value {
    let mut request = http.request(method.parse().unwrap(), url);
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.expect("chromedriver answers");
    let status = response.status();
    let answer: Value = response.json().await.expect("chromedriver answers JSON");
    assert!(status.is_success(), "WebDriver {method} {url}: {answer}");
    answer["value"].clone()
}
