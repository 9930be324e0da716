//! The checks of `serve`'s flags that clap cannot make: each message names its flag.
//!
//! Keeps I13's bound (DESIGN.md, "Invariants"): `--gc-delay-ms` above every write window.

use super::{ServeArgs, MAX_WAITERS_PER_LOCK};

fn valid_znode_path(flag: &str, path: &str) -> Result<(), String> {
    let parts: Vec<&str> = path.split('/').collect();
    let ok = path.starts_with('/')
        && path.len() > 1
        && !path.ends_with('/')
        && parts[1..]
            .iter()
            .all(|p| !p.is_empty() && *p != "." && *p != ".." && *p != "zookeeper");
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{flag} must be an absolute znode path such as /lockwarden/locks, got {path:?}"
        ))
    }
}

impl ServeArgs {
    /// Checks what clap cannot; the message names the flag.
    pub fn check(&self) -> Result<(), String> {
        valid_znode_path("--lock-root", &self.lock_root)?;
        valid_znode_path("--state-root", &self.state_root)?;
        valid_znode_path("--election-root", &self.election_root)?;
        valid_znode_path("--semaphore-root", &self.semaphore_root)?;
        if self.lock_root == self.state_root {
            return Err("--lock-root and --state-root must differ".into());
        }
        let nested = |a: &str, b: &str| a == b || b.starts_with(&format!("{a}/"));
        for (flag, root) in [
            ("--lock-root", &self.lock_root),
            ("--state-root", &self.state_root),
        ] {
            if nested(root, &self.election_root) || nested(&self.election_root, root) {
                return Err(format!(
                    "--election-root and {flag} may not hold one another"
                ));
            }
        }
        for (flag, root) in [
            ("--lock-root", &self.lock_root),
            ("--state-root", &self.state_root),
            ("--election-root", &self.election_root),
        ] {
            if nested(root, &self.semaphore_root) || nested(&self.semaphore_root, root) {
                return Err(format!(
                    "--semaphore-root and {flag} may not hold one another"
                ));
            }
        }
        if self.max_lease_ms == 0 {
            return Err("--max-lease-ms must be at least 1".into());
        }
        if self.store_timeout_ms == 0 {
            return Err("--store-timeout-ms must be at least 1".into());
        }
        if !(1..=MAX_WAITERS_PER_LOCK).contains(&self.max_waiters_per_lock) {
            return Err(format!(
                "--max-waiters-per-lock must be between 1 and {MAX_WAITERS_PER_LOCK}"
            ));
        }
        if self.zk_writes_in_flight > 1_024 {
            return Err("--zk-writes-in-flight must be at most 1024".into());
        }
        if self.join_window_ms > 1_000 {
            return Err("--join-window-ms must be at most 1000".into());
        }
        if self.head_grace_ms > 10_000 {
            return Err("--head-grace-ms must be at most 10000".into());
        }
        if self.max_waiting_calls == 0 || self.max_connections == 0 {
            return Err("--max-waiting-calls and --max-connections must be at least 1".into());
        }
        if self.event_heartbeat_ms == 0 {
            return Err("--event-heartbeat-ms must be at least 1".into());
        }
        if self.request_read_timeout_ms == 0 {
            return Err("--request-read-timeout-ms must be at least 1".into());
        }
        if self.gc_sweep_interval_ms == 0 {
            return Err("--gc-sweep-interval-ms must be at least 1".into());
        }
        if self.max_clock_skew_ms > self.max_lease_ms {
            return Err("--max-clock-skew-ms may not exceed --max-lease-ms".into());
        }
        // The longest a write may take to land after the read it was planned on: a cached
        // read (up to one request timeout old), the request's own timeout, and a request that
        // the ZooKeeper client queued across a reconnect (up to 1.5 session timeouts).
        let write_window = 2 * self.store_timeout_ms + self.zk_session_timeout_ms * 3 / 2;
        if self.gc_delay_ms <= write_window {
            return Err(format!(
                "--gc-delay-ms must be more than 2 x --store-timeout-ms + 1.5 x --zk-session-timeout-ms ({write_window})"
            ));
        }
        if self
            .api_tokens
            .iter()
            .chain(&self.admin_token)
            .chain(&self.record_secret)
            .chain(&self.metrics_token)
            .any(|t| t.trim().is_empty())
        {
            return Err("tokens may not be empty".into());
        }
        Ok(())
    }
}
