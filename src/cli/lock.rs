//! `lockwarden lock`: takes the lock, then runs CMD under it (see `child`) or, without
//! CMD, holds it until SIGINT or SIGTERM.

use std::io::Write;

use lockwarden_client::{Client, LockGuard};
use tokio::signal::unix::{signal, Signal, SignalKind};

use super::{child, default_owner, exit, exit_for, explain, LockArgs, OnCleanup};

/// SIGINT and SIGTERM, caught from before the acquire so that neither kills us while
/// we hold a lock we could release.
pub(super) struct Signals {
    interrupt: Signal,
    terminate: Signal,
}

impl Signals {
    pub fn install() -> std::io::Result<Signals> {
        Ok(Signals {
            interrupt: signal(SignalKind::interrupt())?,
            terminate: signal(SignalKind::terminate())?,
        })
    }

    /// The next signal's number.
    pub async fn recv(&mut self) -> i32 {
        tokio::select! {
            _ = self.interrupt.recv() => libc::SIGINT,
            _ = self.terminate.recv() => libc::SIGTERM,
        }
    }
}

pub(super) async fn run(args: LockArgs, client: Client) -> u8 {
    let mut signals = match Signals::install() {
        Ok(signals) => signals,
        Err(error) => {
            eprintln!("lockwarden: cannot catch signals: {error}");
            return exit::REFUSED;
        }
    };
    let request = match args.limit {
        Some(limit) => client.semaphore(&args.name, limit),
        None => client.lock(&args.name),
    };
    let request = request
        .lease(args.lease)
        .wait(args.wait)
        .priority(args.priority)
        .cleanup(args.cleanup)
        .forceful(args.forceful)
        .message(&args.message)
        .owner(args.owner.clone().unwrap_or_else(default_owner));
    let guard = tokio::select! {
        result = request.acquire() => match result {
            Ok(guard) => guard,
            Err(error) => {
                eprintln!("lockwarden: {}: {}", args.name, explain(&error));
                return exit_for(&error, args.conflict_exit_code);
            }
        },
        number = signals.recv() => return 128 + number as u8,
    };
    if args.command.is_empty() {
        hold(guard, signals, &args).await
    } else {
        child::run(guard, signals, (&args).into()).await
    }
}

/// Holds the lock until a signal (exit 0 after releasing) or its loss.
async fn hold(guard: LockGuard, mut signals: Signals, args: &LockArgs) -> u8 {
    println!(
        "{}={} lease_id={} fencing_token={}",
        if args.limit.is_some() {
            "semaphore"
        } else {
            "lock"
        },
        guard.name(),
        guard.lease_id(),
        guard.fencing_token()
    );
    let _ = std::io::stdout().flush();
    let lost = guard.lost();
    let cleanup = guard.cleanup_requested();
    let code = tokio::select! {
        _ = signals.recv() => 0,
        reason = lost => {
            eprintln!("lockwarden: lost {}: {reason}", args.name);
            return exit::LOST;
        }
        request = cleanup, if args.on_cleanup == OnCleanup::Term => {
            eprintln!(
                "lockwarden: {} (priority {}) asks for {}; letting go",
                request.requestor.owner, request.requestor.priority, args.name
            );
            exit::LOST
        }
    };
    if let Err(error) = guard.release().await {
        eprintln!("lockwarden: releasing {}: {error}", args.name);
    }
    code
}
