//! `status --semaphore`, `list --semaphore` and `watch --semaphore`: a semaphore's holders
//! out of its limit, and its events. (`lock NAME -n N` holds a permit: see `lock`.)

use std::io::Write;

use lockwarden_client::{Client, Event, SemaphoreInfo};
use time::OffsetDateTime;

use super::show::{arrival, every_page};
use super::{exit, exit_for, explain, ListArgs, StatusArgs, WatchArgs};

/// One line of a semaphore: `NAME held=H/L waiters=W`, then its holders.
fn line(semaphore: &SemaphoreInfo) -> String {
    let limit = semaphore.limit.map_or("-".into(), |l| l.to_string());
    let holders: Vec<String> = semaphore
        .holders
        .iter()
        .map(|p| {
            let token = p.fencing_token.map(|t| t.to_string()).unwrap_or_default();
            format!("{}:{token}", p.owner)
        })
        .collect();
    format!(
        "{} held={}/{limit} waiters={} holders={}",
        semaphore.name,
        semaphore.held,
        semaphore.waiters,
        holders.join(",")
    )
}

pub(super) async fn status(args: StatusArgs, client: Client) -> u8 {
    let semaphore = match client.semaphore_info(&args.name).await {
        Ok(semaphore) => semaphore,
        Err(error) => {
            eprintln!("lockwarden: {}: {}", args.name, explain(&error));
            return exit_for(&error, exit::NOT_ACQUIRED);
        }
    };
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&semaphore).unwrap_or_default()
        );
        return 0;
    }
    let limit = semaphore.limit.map_or("-".into(), |l| l.to_string());
    println!("name:          {}", semaphore.name);
    println!("held:          {} of {limit}", semaphore.held);
    for permit in &semaphore.holders {
        let token = permit
            .fencing_token
            .map(|t| t.to_string())
            .unwrap_or_default();
        let left = permit
            .remaining_ms
            .map_or("-".into(), |ms| format!("{ms} ms"));
        println!(
            "holder:        {} (token {token}, priority {}, {left} left)",
            permit.owner, permit.priority
        );
    }
    println!("waiters:       {}", semaphore.waiters);
    if let Some(requestor) = &semaphore.requestor {
        println!(
            "requested by:  {} (priority {})",
            requestor.owner, requestor.priority
        );
    }
    0
}

pub(super) async fn list(args: ListArgs, client: Client) -> u8 {
    let prefix = args.prefix.as_str();
    let semaphores = every_page("semaphores", |cursor| {
        let client = client.clone();
        async move {
            let page = client.semaphores(prefix, None, cursor.as_deref()).await?;
            Ok((page.semaphores, page.next_cursor))
        }
    })
    .await;
    let semaphores = match semaphores {
        Ok(semaphores) => semaphores,
        Err(code) => return code,
    };
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&semaphores).unwrap_or_default()
        );
        return 0;
    }
    for semaphore in &semaphores {
        println!("{}", line(semaphore));
    }
    0
}

/// `watch NAME --semaphore`: one line per event, `TIME ID TYPE token=T NAME held=H/L ...`
/// (`token` is the permit the event is about), or its data with `--json`, until the stream
/// fails.
pub(super) async fn watch(args: WatchArgs, client: Client) -> u8 {
    let Some(name) = args.name else {
        eprintln!("lockwarden: watch --semaphore needs the semaphore's NAME");
        return exit::USAGE;
    };
    let mut watch = client.watch_semaphore(&name);
    loop {
        match watch.next().await {
            Ok(event) if args.json => println!("{}", event.data),
            Ok(event) => println!("{}", event_line(&event)),
            Err(error) => {
                eprintln!("lockwarden: watching {name}: {}", explain(&error));
                return exit_for(&error, exit::NOT_ACQUIRED);
            }
        }
        let _ = std::io::stdout().flush();
    }
}

fn event_line(event: &Event) -> String {
    let at = arrival(OffsetDateTime::now_utc());
    let id = event.id.map_or("-".into(), |id| id.to_string());
    let token = event.fencing_token.map_or("-".into(), |t| t.to_string());
    let semaphore = event.semaphore.as_ref().map_or("-".into(), line);
    format!("{at} {id} {} token={token} {semaphore}", event.kind)
}
