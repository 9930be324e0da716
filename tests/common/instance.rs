//! A `lockwarden serve` child process for fault-injection tests: it owns the process, its
//! listen port (kept across restarts), its flags, its log file and, optionally, a wall clock
//! shifted under libfaketime (the monotonic clock stays real). It can be killed (SIGKILL),
//! restarted, paused (SIGSTOP) and resumed (SIGCONT). Dropping it stops it with SIGTERM,
//! which it must obey within its drain timeout (see `process::terminate`).

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::Value;

use super::zk::{free_port, wait_stopped};
use super::{http_client, send};

/// Flags for an instance on `connect` under `root`, with short timeouts; `extra` flags
/// replace the defaults of the same name.
pub fn flags(connect: &str, root: &str, extra: &[&str]) -> Vec<String> {
    let defaults: Vec<String> = [
        "--zk",
        connect,
        "--lock-root",
        &format!("{root}/locks"),
        "--state-root",
        &format!("{root}/state"),
        "--election-root",
        &format!("{root}/elections"),
        "--semaphore-root",
        &format!("{root}/semaphores"),
        "--store-timeout-ms",
        "500",
        "--zk-session-timeout-ms",
        "4000",
        "--gc-delay-ms",
        "7100",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let mut flags = Vec::new();
    for pair in defaults.chunks(2) {
        if !extra.contains(&pair[0].as_str()) {
            flags.extend_from_slice(pair);
        }
    }
    flags.extend(extra.iter().map(|s| s.to_string()));
    flags
}

/// Where Debian's `libfaketime` package puts the library, by architecture.
const FAKETIME_LIBRARIES: [&str; 3] = [
    "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1",
    "/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1",
    "/usr/lib/faketime/libfaketime.so.1",
];

/// The installed libfaketime; panics with what to install when there is none.
pub fn faketime_library() -> PathBuf {
    FAKETIME_LIBRARIES
        .iter()
        .map(PathBuf::from)
        .find(|path| path.exists())
        .expect("libfaketime is not installed: run ./scripts/test, which installs `faketime`")
}

/// libfaketime's `FAKETIME` for a wall clock `offset_ms` ahead (negative: behind).
pub fn faketime_spec(offset_ms: i64) -> String {
    let sign = if offset_ms < 0 { '-' } else { '+' };
    let ms = offset_ms.unsigned_abs();
    format!("{sign}{}.{:03}", ms / 1000, ms % 1000)
}

#[derive(Clone, Debug, Default)]
pub struct InstanceOptions {
    /// Flags after `serve --listen 127.0.0.1:PORT`.
    pub flags: Vec<String>,
    /// Where stderr goes (appended, across restarts), at `RUST_LOG=info`; else `warn` to
    /// the test's stderr.
    pub log: Option<PathBuf>,
    /// Shifts the process's wall clock by this many milliseconds (libfaketime).
    pub clock_offset_ms: Option<i64>,
}

impl InstanceOptions {
    pub fn new(flags: &[String]) -> InstanceOptions {
        InstanceOptions {
            flags: flags.to_vec(),
            ..InstanceOptions::default()
        }
    }

    pub fn log(mut self, path: impl Into<PathBuf>) -> InstanceOptions {
        self.log = Some(path.into());
        self
    }

    pub fn clock_offset_ms(mut self, offset_ms: i64) -> InstanceOptions {
        self.clock_offset_ms = Some(offset_ms);
        self
    }
}

pub struct Instance {
    options: InstanceOptions,
    port: u16,
    base: String,
    child: Option<Child>,
    http: reqwest::Client,
}

impl Instance {
    /// Starts the binary on a free port and waits until it answers /healthz.
    pub async fn start(options: InstanceOptions) -> Instance {
        let port = free_port();
        let mut instance = Instance {
            options,
            port,
            base: format!("http://127.0.0.1:{port}"),
            child: None,
            http: http_client(),
        };
        instance.launch().await;
        instance
    }

    /// `http://127.0.0.1:PORT`.
    pub fn base(&self) -> &str {
        &self.base
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn options(&self) -> &InstanceOptions {
        &self.options
    }

    /// The process id while it runs (or is paused).
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Kills the process with SIGKILL, as a crash would, and reaps it.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Kills the process (if it runs) and starts it again on the same port with the same
    /// flags; waits until it answers /healthz.
    pub async fn restart(&mut self) {
        self.kill();
        self.launch().await;
    }

    /// Stops the process with SIGSTOP (and waits until it is stopped): its port stays open,
    /// it answers nothing.
    pub fn pause(&self) {
        self.signal("STOP");
    }

    /// Continues a paused process with SIGCONT.
    pub fn resume(&self) {
        self.signal("CONT");
    }

    pub async fn send(
        &self,
        method: &str,
        path: &str,
        body: Option<Value>,
        token: Option<&str>,
    ) -> (StatusCode, Value) {
        send(&self.http, &self.base, method, path, body, token).await
    }

    pub async fn post(&self, path: &str, body: Value) -> (StatusCode, Value) {
        self.send("POST", path, Some(body), None).await
    }

    pub async fn get(&self, path: &str) -> (StatusCode, Value) {
        self.send("GET", path, None, None).await
    }

    /// The instance's `/metrics`, in Prometheus' text format.
    pub async fn metrics(&self) -> String {
        let answer = self.http.get(format!("{}/metrics", self.base)).send();
        answer.await.unwrap().text().await.unwrap()
    }

    fn signal(&self, signal: &str) {
        // The child is not reaped until `kill`, so its pid cannot have been reused.
        let pid = self.pid().expect("the instance is not running");
        let status = Command::new("kill")
            .args([format!("-{signal}"), pid.to_string()])
            .status()
            .expect("running kill");
        assert!(status.success(), "kill -{signal} {pid} failed");
        wait_stopped(pid, signal == "STOP");
    }

    async fn launch(&mut self) {
        let mut command = Command::new(env!("CARGO_BIN_EXE_lockwarden"));
        command
            .arg("serve")
            .args(["--listen", &format!("127.0.0.1:{}", self.port)])
            .args(&self.options.flags)
            .stdin(Stdio::null());
        match &self.options.log {
            Some(path) => {
                let file = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(path)
                    .expect("opening the instance's log");
                command.env("RUST_LOG", "info").stderr(file)
            }
            None => command.env("RUST_LOG", "warn"),
        };
        if let Some(offset_ms) = self.options.clock_offset_ms {
            command
                .env("LD_PRELOAD", faketime_library())
                .env("FAKETIME", faketime_spec(offset_ms))
                .env("FAKETIME_DONT_FAKE_MONOTONIC", "1")
                .env("FAKETIME_NO_CACHE", "1");
        }
        self.child = Some(command.spawn().expect("starting lockwarden"));
        let deadline = Instant::now() + Duration::from_secs(20);
        let url = format!("{}/healthz", self.base);
        loop {
            let answer = self.http.get(&url).timeout(Duration::from_secs(2)).send();
            if answer.await.is_ok() {
                return;
            }
            if let Some(status) = self.child.as_mut().unwrap().try_wait().unwrap() {
                self.child = None;
                panic!("lockwarden exited before answering /healthz: {status}");
            }
            assert!(
                Instant::now() < deadline,
                "lockwarden did not answer /healthz within 20 s"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            super::process::must_have_stopped(super::process::terminate(&mut child));
        }
    }
}
