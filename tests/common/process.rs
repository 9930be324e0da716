//! The real `lockwarden` binary in a child process (`serve` on a free loopback port), for
//! tests that restart or crash an instance.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use super::{eventually, http_client, zk};

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

    /// Kills the process at once, as a crash would.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.kill();
    }
}
