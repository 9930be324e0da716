//! The commands that look at locks or act on them by name: `status`, `list`, `watch`,
//! `release` and `force-release`: what each prints.

use std::time::Duration;

use lockwarden_client::{Client, Event, LeaseId, LockInfo};
use time::macros::format_description;
use time::{OffsetDateTime, UtcOffset};

use clap::Args;

use super::duration::show;
use super::{
    exit, exit_for, explain, ClientArgs, ForceReleaseArgs, ReleaseArgs, WatchArgs, NAME_HELP,
};

#[derive(Clone, Debug, Args)]
pub struct StatusArgs {
    #[arg(help = NAME_HELP)]
    pub name: String,
    /// Show the election NAME instead (its leader, term, value and candidates).
    #[arg(long, conflicts_with = "semaphore")]
    pub election: bool,
    /// Show the semaphore NAME instead (its holders out of its limit, and its queue).
    #[arg(long)]
    pub semaphore: bool,
    /// Print the service's JSON.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub client: ClientArgs,
}

#[derive(Clone, Debug, Args)]
pub struct ListArgs {
    /// Only locks whose names start with this.
    #[arg(long, default_value = "")]
    pub prefix: String,
    /// List elections instead.
    #[arg(long, conflicts_with = "semaphore")]
    pub election: bool,
    /// List semaphores instead.
    #[arg(long)]
    pub semaphore: bool,
    /// Print the locks as a JSON array.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub client: ClientArgs,
}

fn fail(what: &str, error: &lockwarden_client::Error) -> u8 {
    eprintln!("lockwarden: {what}: {}", explain(error));
    exit_for(error, exit::NOT_ACQUIRED)
}

fn or_dash(value: Option<String>) -> String {
    value
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| "-".into())
}

fn remaining(lock: &LockInfo) -> String {
    or_dash(lock.remaining_ms.map(|ms| show(Duration::from_millis(ms))))
}

pub(super) async fn status(args: StatusArgs, client: Client) -> u8 {
    let lock = match client.status(&args.name).await {
        Ok(lock) => lock,
        Err(error) => return fail(&args.name, &error),
    };
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&lock).unwrap_or_default()
        );
        return 0;
    }
    println!("name:          {}", lock.name);
    println!("state:         {}", lock.state);
    println!("owner:         {}", or_dash(lock.owner.clone()));
    println!(
        "fencing token: {}",
        or_dash(lock.fencing_token.map(|t| t.to_string()))
    );
    println!("remaining:     {}", remaining(&lock));
    if let Some(at) = &lock.takeover_at {
        println!("takeover at:   {at} (the lease has ended; nobody may take the lock before)");
    }
    println!("priority:      {}", lock.priority);
    println!("message:       {}", or_dash(Some(lock.message.clone())));
    println!("waiters:       {}", lock.waiters);
    if let Some(requestor) = &lock.requestor {
        println!(
            "requested by:  {} (priority {}), cleanup deadline {}",
            requestor.owner,
            requestor.priority,
            or_dash(requestor.cleanup_deadline.clone())
        );
    }
    0
}

pub(super) async fn list(args: ListArgs, client: Client) -> u8 {
    let prefix = args.prefix.as_str();
    let locks = every_page("locks", |cursor| {
        let client = client.clone();
        async move {
            let page = client.list(prefix, None, cursor.as_deref()).await?;
            Ok((page.locks, page.next_cursor))
        }
    })
    .await;
    let locks = match locks {
        Ok(locks) => locks,
        Err(code) => return code,
    };
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&locks).unwrap_or_default()
        );
        return 0;
    }
    let rows: Vec<[String; 6]> = locks
        .iter()
        .map(|lock| {
            [
                lock.name.clone(),
                lock.state.to_string(),
                or_dash(lock.owner.clone()),
                or_dash(lock.fencing_token.map(|t| t.to_string())),
                remaining(lock),
                lock.waiters.to_string(),
            ]
        })
        .collect();
    let header = ["NAME", "STATE", "OWNER", "TOKEN", "REMAINING", "WAITERS"].map(String::from);
    let mut widths = header.clone().map(|h| h.len());
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    for row in std::iter::once(&header).chain(&rows) {
        let cells: Vec<String> = row
            .iter()
            .zip(widths)
            .map(|(cell, width)| format!("{cell:<width$}"))
            .collect();
        println!("{}", cells.join("  ").trim_end());
    }
    0
}

fn line(id: Option<u64>, kind: &str, lock: &LockInfo) -> String {
    let mut text = format!(
        "{} {kind} {} state={}",
        or_dash(id.map(|id| id.to_string())),
        lock.name,
        lock.state
    );
    if let Some(owner) = &lock.owner {
        text.push_str(&format!(" owner={owner}"));
    }
    if let Some(token) = lock.fencing_token {
        text.push_str(&format!(" token={token}"));
    }
    if let Some(requestor) = &lock.requestor {
        text.push_str(&format!(" requestor={}", requestor.owner));
    }
    if lock.waiters > 0 {
        text.push_str(&format!(" waiters={}", lock.waiters));
    }
    if let Some(at) = &lock.takeover_at {
        text.push_str(&format!(" takeover_at={at}"));
    }
    text
}

/// When an event arrived, as each of its lines starts: RFC 3339, UTC, to the millisecond.
pub(super) fn arrival(at: OffsetDateTime) -> String {
    let format =
        format_description!("[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3]Z");
    at.to_offset(UtcOffset::UTC)
        .format(&format)
        .unwrap_or_default()
}

fn print(event: &Event, json: bool) {
    if json {
        println!("{}", event.data);
        return;
    }
    let at = arrival(OffsetDateTime::now_utc());
    match &event.lock {
        Some(lock) => println!("{at} {}", line(event.id, &event.kind, lock)),
        None if event.locks.is_empty() => println!(
            "{at} {} {} (no locks)",
            or_dash(event.id.map(|id| id.to_string())),
            event.kind
        ),
        None => {
            for lock in &event.locks {
                println!("{at} {}", line(event.id, &event.kind, lock));
            }
        }
    }
}

pub(super) async fn watch(args: WatchArgs, client: Client) -> u8 {
    let (mut watch, what) = match (&args.name, &args.prefix) {
        (Some(name), _) => (client.watch(name), name.clone()),
        (None, prefix) => {
            let prefix = prefix.clone().unwrap_or_default();
            (client.watch_prefix(&prefix), format!("prefix {prefix:?}"))
        }
    };
    loop {
        match watch.next().await {
            Ok(event) => print(&event, args.json),
            Err(error) => return fail(&format!("watching {what}"), &error),
        }
    }
}

pub(super) async fn release(args: ReleaseArgs, client: Client) -> u8 {
    let lease_id = LeaseId::new(args.lease_id);
    match client.release(&args.name, &lease_id).await {
        Ok(_) => {
            println!("released {}", args.name);
            0
        }
        Err(error) => fail(&args.name, &error),
    }
}

pub(super) async fn force_release(args: ForceReleaseArgs, client: Client) -> u8 {
    match client.force_release(&args.name).await {
        Ok(answer) if answer.already_free => {
            println!("{} was already free; nothing to release", args.name);
            0
        }
        Ok(_) => {
            println!("force-released {}", args.name);
            0
        }
        Err(error) => fail(&args.name, &error),
    }
}

/// Every page of a listing of `what`, following each page's cursor: `page` fetches the
/// page after a cursor, as its items and the next cursor. A failure is told on stderr and
/// returned as the exit code.
pub(super) async fn every_page<T, Fut>(
    what: &str,
    mut page: impl FnMut(Option<String>) -> Fut,
) -> Result<Vec<T>, u8>
where
    Fut: std::future::Future<Output = Result<(Vec<T>, Option<String>), lockwarden_client::Error>>,
{
    let mut all = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        match page(cursor.take()).await {
            Ok((items, next)) => {
                all.extend(items);
                cursor = next;
            }
            Err(error) => {
                eprintln!("lockwarden: listing {what}: {}", explain(&error));
                return Err(exit_for(&error, exit::NOT_ACQUIRED));
            }
        }
        if cursor.is_none() {
            return Ok(all);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_arrival_is_rfc3339_utc_to_the_millisecond() {
        let at = OffsetDateTime::from_unix_timestamp_nanos(1_700_000_000_123_456_789).unwrap();
        assert_eq!(arrival(at), "2023-11-14T22:13:20.123Z");
    }
}
