//! Running CMD under a held lock: its environment, forwarding SIGINT and SIGTERM to it,
//! stopping it (SIGTERM, then SIGKILL after a grace period) when the lock is lost or a
//! higher priority asks for it, releasing when it exits, and its exit status.

use std::os::unix::process::ExitStatusExt;
use std::time::{Duration, Instant};

use lockwarden_client::{CleanupRequest, Error, Leadership, LockGuard, LossReason};

use super::lock::Signals;
use super::{exit, LockArgs, OnCleanup};

/// What CMD runs under: a held lock, or a leadership.
pub(super) trait Held {
    /// CMD's environment.
    fn env(&self) -> Vec<(&'static str, String)>;
    fn lost(&self) -> impl std::future::Future<Output = LossReason> + Send + 'static;
    fn cleanup_requested(
        &self,
    ) -> impl std::future::Future<Output = CleanupRequest> + Send + 'static;
    fn loss(&self) -> Option<LossReason>;
    /// Releases the lock, or resigns.
    fn let_go(self) -> impl std::future::Future<Output = Result<(), Error>> + Send;
}

impl Held for LockGuard {
    fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("LOCKWARDEN_LOCK_NAME", self.name().to_owned()),
            ("LOCKWARDEN_LEASE_ID", self.lease_id().to_string()),
            ("LOCKWARDEN_FENCING_TOKEN", self.fencing_token().to_string()),
        ]
    }
    fn lost(&self) -> impl std::future::Future<Output = LossReason> + Send + 'static {
        LockGuard::lost(self)
    }
    fn cleanup_requested(
        &self,
    ) -> impl std::future::Future<Output = CleanupRequest> + Send + 'static {
        LockGuard::cleanup_requested(self)
    }
    fn loss(&self) -> Option<LossReason> {
        LockGuard::loss(self)
    }
    fn let_go(self) -> impl std::future::Future<Output = Result<(), Error>> + Send {
        self.release()
    }
}

impl Held for Leadership {
    fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("LOCKWARDEN_ELECTION", self.name().to_owned()),
            ("LOCKWARDEN_TERM", self.term().to_string()),
            ("LOCKWARDEN_LEASE_ID", self.lease_id().to_string()),
        ]
    }
    fn lost(&self) -> impl std::future::Future<Output = LossReason> + Send + 'static {
        Leadership::lost(self)
    }
    fn cleanup_requested(
        &self,
    ) -> impl std::future::Future<Output = CleanupRequest> + Send + 'static {
        Leadership::cleanup_requested(self)
    }
    fn loss(&self) -> Option<LossReason> {
        Leadership::loss(self)
    }
    fn let_go(self) -> impl std::future::Future<Output = Result<(), Error>> + Send {
        self.resign()
    }
}

/// How CMD is run: its words, and how it is stopped.
pub(super) struct Running<'a> {
    pub name: &'a str,
    pub command: &'a [String],
    pub grace: Option<Duration>,
    pub on_cleanup: OnCleanup,
}

impl<'a> From<&'a LockArgs> for Running<'a> {
    fn from(args: &'a LockArgs) -> Running<'a> {
        Running {
            name: &args.name,
            command: &args.command,
            grace: args.grace,
            on_cleanup: args.on_cleanup,
        }
    }
}

/// The grace after a loss when `--grace` is not given (Consul's choice): the lock may
/// already be someone else's, so CMD should not go on long.
const LOST_GRACE: Duration = Duration::from_secs(5);
/// The least grace CMD gets when asked to clean up: the window's end is judged on the
/// service's wall clock, which may be ahead of ours.
const MIN_CLEANUP_GRACE: Duration = Duration::from_secs(1);

fn send(pid: Option<u32>, signal: i32) {
    if let Some(pid) = pid.and_then(|p| i32::try_from(p).ok()) {
        // SAFETY: kill has no memory effects; a pid that has exited but not been waited
        // for is still ours (a zombie), so this cannot reach another process.
        unsafe {
            libc::kill(pid, signal);
        }
    }
}

fn earlier(current: Option<Instant>, candidate: Instant) -> Option<Instant> {
    Some(current.map_or(candidate, |at| at.min(candidate)))
}

pub(super) async fn run(guard: impl Held, mut signals: Signals, args: Running<'_>) -> u8 {
    let mut command = tokio::process::Command::new(&args.command[0]);
    command.args(&args.command[1..]).envs(guard.env());
    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(error) => {
            eprintln!("lockwarden: cannot run {:?}: {error}", args.command[0]);
            let _ = guard.let_go().await;
            return if error.kind() == std::io::ErrorKind::NotFound {
                exit::NOT_FOUND
            } else {
                exit::CANNOT_RUN
            };
        }
    };
    let pid = child.id();
    let lost = guard.lost();
    let cleanup = guard.cleanup_requested();
    tokio::pin!(lost, cleanup);
    let (mut lost_seen, mut cleanup_seen) = (false, false);
    let mut stopping = false;
    let mut kill_at: Option<Instant> = None;
    let status = loop {
        let kill_timer = async move {
            match kill_at {
                Some(at) => tokio::time::sleep_until(at.into()).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            status = child.wait() => break status,
            number = signals.recv() => send(pid, number),
            reason = &mut lost, if !lost_seen => {
                lost_seen = true;
                eprintln!("lockwarden: lost {}: {reason}; stopping the command", args.name);
                if !stopping {
                    stopping = true;
                    send(pid, libc::SIGTERM);
                }
                kill_at = earlier(kill_at, Instant::now() + args.grace.unwrap_or(LOST_GRACE));
            }
            request = &mut cleanup, if !cleanup_seen && args.on_cleanup == OnCleanup::Term => {
                cleanup_seen = true;
                eprintln!(
                    "lockwarden: {} (priority {}) asks for {}; stopping the command",
                    request.requestor.owner, request.requestor.priority, args.name
                );
                if !stopping {
                    stopping = true;
                    send(pid, libc::SIGTERM);
                    let window = request.remaining().map(|left| left.max(MIN_CLEANUP_GRACE));
                    let grace = args.grace.or(window).unwrap_or(LOST_GRACE);
                    kill_at = earlier(kill_at, Instant::now() + grace);
                }
            }
            () = kill_timer => {
                send(pid, libc::SIGKILL);
                kill_at = None;
            }
        }
    };
    if guard.loss().is_none() {
        if let Err(error) = guard.let_go().await {
            eprintln!("lockwarden: letting go of {}: {error}", args.name);
        }
    }
    if stopping {
        return exit::LOST;
    }
    match status {
        Ok(status) => match (status.code(), status.signal()) {
            (Some(code), _) => (code & 0xff) as u8,
            (None, Some(signal)) => 128u8.wrapping_add(signal as u8),
            (None, None) => exit::CANNOT_RUN,
        },
        Err(error) => {
            eprintln!("lockwarden: waiting for the command: {error}");
            exit::CANNOT_RUN
        }
    }
}
