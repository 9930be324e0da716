//! The real `lockwarden` binary in a child process (`serve` on a free loopback port), for
//! tests that restart or crash an instance. An instance that a test does not kill is
//! stopped with SIGTERM when dropped, and must exit within the drain timeout
//! ([`DRAIN_TIMEOUT`]); one that does not fails its test.

use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use super::{eventually, http_client, zk};

/// How long an instance may take to exit after SIGTERM (`http_server`'s drain timeout).
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);

/// The real `lockwarden` binary in a child process, for restarts and crashes.
pub struct Process {
    pub base: String,
    child: Child,
}

impl Process {
    pub async fn start(args: &[String]) -> Process {
        Self::start_logging(args, None).await
    }

    /// Starts the binary; with `log`, its stderr (at level info) goes to that file.
    pub async fn start_logging(args: &[String], log: Option<&std::path::Path>) -> Process {
        let port = zk::free_port();
        let mut command = Command::new(env!("CARGO_BIN_EXE_lockwarden"));
        command
            .arg("serve")
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .args(args)
            .stdin(Stdio::null());
        match log {
            Some(path) => command
                .env("RUST_LOG", "info")
                .stderr(std::fs::File::create(path).unwrap()),
            None => command.env("RUST_LOG", "warn"),
        };
        let child = command.spawn().expect("starting lockwarden");
        let base = format!("http://127.0.0.1:{port}");
        let http = http_client();
        eventually(
            Duration::from_secs(20),
            "lockwarden to answer /healthz",
            || {
                let url = format!("{base}/healthz");
                let http = http.clone();
                async move { http.get(url).send().await.is_ok() }
            },
        )
        .await;
        Process { base, child }
    }

    /// Sends `signal` (`libc::SIGHUP`, say) to the process.
    pub fn signal(&self, signal: libc::c_int) {
        // SAFETY: a plain signal to our own child, which has not been reaped yet.
        unsafe {
            libc::kill(self.child.id() as libc::pid_t, signal);
        }
    }

    /// Kills the process at once, as a crash would.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Sends SIGTERM and waits for the exit, up to [`DRAIN_TIMEOUT`]; `None` if it did not
    /// come by then (the process is then killed). An exited process answers at once.
    pub fn terminate(&mut self) -> Option<(ExitStatus, Duration)> {
        terminate(&mut self.child)
    }
}

/// Stops `child` as an operator would: SIGCONT (in case a test paused it), then SIGTERM, and
/// waits for the exit up to [`DRAIN_TIMEOUT`]; `None` if it did not come by then (the child
/// is then killed). An exited child answers at once.
pub fn terminate(child: &mut Child) -> Option<(ExitStatus, Duration)> {
    if let Ok(Some(status)) = child.try_wait() {
        return Some((status, Duration::ZERO));
    }
    let sent = Instant::now();
    let pid = child.id() as libc::pid_t;
    // SAFETY: plain signals to our own child, which has not been reaped yet.
    unsafe {
        libc::kill(pid, libc::SIGCONT);
        libc::kill(pid, libc::SIGTERM);
    }
    while sent.elapsed() < DRAIN_TIMEOUT {
        if let Ok(Some(status)) = child.try_wait() {
            return Some((status, sent.elapsed()));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    None
}

/// Fails the test (unless it is failing already) when an instance outlived SIGTERM.
pub fn must_have_stopped(stopped: Option<(ExitStatus, Duration)>) {
    if stopped.is_none() && !std::thread::panicking() {
        panic!("lockwarden did not exit within {DRAIN_TIMEOUT:?} of SIGTERM");
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        must_have_stopped(self.terminate());
    }
}
