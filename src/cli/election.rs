//! The election commands: `elect` (campaign, then run CMD while leader), `leader` (who
//! leads) and `observe` (an election's events, a line each). Their flags are here; the
//! child process is run as `lock` runs it (`child`).

use std::io::Write;
use std::time::Duration;

use clap::Args;
use lockwarden_client::{Client, ElectionInfo, Error, Event, Leadership};

use super::lock::Signals;
use super::show::every_page;
use super::{
    child, default_owner, duration, exit, exit_for, explain, ClientArgs, OnCleanup, MAX_LEASE,
    MAX_WAIT,
};

/// The help of an election name argument.
const ELECTION_HELP: &str = "The election's name: one or more parts separated by '/', each \
    of [A-Za-z0-9._-] (such as jobs/scheduler)";

/// Campaign, then run a command while leader.
#[derive(Clone, Debug, Args)]
#[command(after_help = super::EXIT_CODES)]
pub struct ElectArgs {
    #[arg(help = ELECTION_HELP)]
    pub name: String,
    /// What the leader tells observers (an address, say); at most 4096 characters.
    #[arg(long, default_value = "")]
    pub value: String,
    /// Who campaigns, as observers see it [default: user@host:pid].
    #[arg(long)]
    pub candidate: Option<String>,
    /// The lease, at most 24h; renewed every third of it while leader.
    #[arg(
        long,
        default_value = "15s",
        value_parser = duration::within("--lease", Duration::from_millis(1), MAX_LEASE)
    )]
    pub lease: Duration,
    /// How long to wait to be elected, at most 5m [default: campaign again until elected].
    #[arg(long, short = 'w', value_parser = duration::within("--wait", Duration::ZERO, MAX_WAIT))]
    pub wait: Option<Duration>,
    /// A higher priority asks a lower leader to hand over.
    #[arg(long, default_value_t = 0)]
    pub priority: u32,
    /// How long this leader gets to hand over when a higher priority asks, at most 24h.
    #[arg(
        long,
        default_value = "30s",
        value_parser = duration::within("--cleanup", Duration::ZERO, MAX_LEASE)
    )]
    pub cleanup: Duration,
    /// Take over from a lower leader at the end of its cleanup window.
    #[arg(long)]
    pub forceful: bool,
    /// How long CMD gets between SIGTERM and SIGKILL [default: the rest of the cleanup
    /// window when a preferred candidate asks, 5s when leadership is lost].
    #[arg(long, value_parser = duration::parse)]
    pub grace: Option<Duration>,
    /// What to do when a candidate of higher priority asks to take over: stop CMD and
    /// resign (a graceful hand-over), or keep running until taken over.
    #[arg(long, value_enum, default_value = "term")]
    pub on_cleanup: OnCleanup,
    /// The exit code when not elected within --wait.
    #[arg(short = 'E', long, default_value_t = exit::NOT_ACQUIRED)]
    pub conflict_exit_code: u8,
    #[command(flatten)]
    pub client: ClientArgs,
    /// The command to run while leader, directly (not through a shell). Without it, the
    /// leadership is held until SIGINT or SIGTERM.
    #[arg(value_name = "CMD", trailing_var_arg = true)]
    pub command: Vec<String>,
}

#[derive(Clone, Debug, Args)]
pub struct LeaderArgs {
    #[arg(help = ELECTION_HELP)]
    pub name: String,
    /// Print the service's JSON (the Election).
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub client: ClientArgs,
}

#[derive(Clone, Debug, Args)]
pub struct ObserveArgs {
    #[arg(help = ELECTION_HELP)]
    pub name: String,
    /// Print each event's data as the service sent it, one JSON object a line.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub client: ClientArgs,
}

/// Campaigns until elected: with `--wait`, once; without it, each time for as long as the
/// service lets a call wait, again and again.
async fn campaign(args: &ElectArgs, client: &Client) -> Result<Leadership, Error> {
    loop {
        let attempt = client
            .election(&args.name)
            .candidate(args.candidate.clone().unwrap_or_else(default_owner))
            .value(&args.value)
            .lease(args.lease)
            .wait(args.wait.unwrap_or(MAX_WAIT))
            .priority(args.priority)
            .cleanup(args.cleanup)
            .forceful(args.forceful)
            .campaign()
            .await;
        match attempt {
            Err(error) if args.wait.is_none() && error.code() == Some("wait_timeout") => continue,
            other => return other,
        }
    }
}

pub(super) async fn elect(args: ElectArgs, client: Client) -> u8 {
    let mut signals = match Signals::install() {
        Ok(signals) => signals,
        Err(error) => {
            eprintln!("lockwarden: cannot catch signals: {error}");
            return exit::REFUSED;
        }
    };
    let leadership = tokio::select! {
        result = campaign(&args, &client) => match result {
            Ok(leadership) => leadership,
            Err(error) => {
                eprintln!("lockwarden: {}: {}", args.name, explain(&error));
                return exit_for(&error, args.conflict_exit_code);
            }
        },
        number = signals.recv() => return 128 + number as u8,
    };
    if !args.command.is_empty() {
        let running = child::Running {
            name: &args.name,
            command: &args.command,
            grace: args.grace,
            on_cleanup: args.on_cleanup,
        };
        return child::run(leadership, signals, running).await;
    }
    println!(
        "election={} term={} lease_id={}",
        leadership.name(),
        leadership.term(),
        leadership.lease_id()
    );
    let _ = std::io::stdout().flush();
    let cleanup = leadership.cleanup_requested();
    let code = tokio::select! {
        _ = signals.recv() => 0,
        reason = leadership.lost() => {
            eprintln!("lockwarden: lost {}: {reason}", args.name);
            return exit::LOST;
        }
        request = cleanup, if args.on_cleanup == OnCleanup::Term => {
            eprintln!(
                "lockwarden: {} (priority {}) asks to lead {}; resigning",
                request.requestor.owner, request.requestor.priority, args.name
            );
            exit::LOST
        }
    };
    if let Err(error) = leadership.resign().await {
        eprintln!("lockwarden: resigning {}: {error}", args.name);
    }
    code
}

/// `candidate=C term=T value=V`, or `None` while nobody leads.
fn leader_line(election: &ElectionInfo) -> Option<String> {
    let leader = election.leader.as_ref()?;
    let term = leader.term.map(|t| t.to_string()).unwrap_or_default();
    Some(format!(
        "candidate={} term={term} value={}",
        leader.candidate, leader.value
    ))
}

/// The election `name`; `Err` is the exit code, once the reason is printed.
async fn fetch(client: &Client, name: &str) -> Result<ElectionInfo, u8> {
    client.leader(name).await.map_err(|error| {
        eprintln!("lockwarden: {name}: {}", explain(&error));
        exit_for(&error, exit::NOT_ACQUIRED)
    })
}

/// `status NAME --election`: the election, a field a line (or its JSON).
pub(super) async fn status(args: super::StatusArgs, client: Client) -> u8 {
    let election = match fetch(&client, &args.name).await {
        Ok(election) => election,
        Err(code) => return code,
    };
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&election).unwrap_or_default()
        );
        return 0;
    }
    let leader = election.leader.as_ref();
    let field = |f: &dyn Fn(&lockwarden_client::Leader) -> String| leader.map_or("-".into(), f);
    println!("name:          {}", election.name);
    println!("leader:        {}", field(&|l| l.candidate.clone()));
    println!(
        "term:          {}",
        field(&|l| l.term.map(|t| t.to_string()).unwrap_or_default())
    );
    println!("value:         {}", field(&|l| l.value.clone()));
    let left = |l: &lockwarden_client::Leader| l.remaining_ms.map(|ms| format!("{ms} ms"));
    println!("remaining:     {}", field(&|l| left(l).unwrap_or_default()));
    println!("candidates:    {}", election.candidates);
    if let Some(requestor) = &election.requestor {
        println!(
            "requested by:  {} (priority {})",
            requestor.owner, requestor.priority
        );
    }
    0
}

/// `list --election`: every election under the prefix, a line each (or a JSON array).
pub(super) async fn list(args: super::ListArgs, client: Client) -> u8 {
    let prefix = args.prefix.as_str();
    let elections = every_page("elections", |cursor| {
        let client = client.clone();
        async move {
            let page = client.elections(prefix, None, cursor.as_deref()).await?;
            Ok((page.elections, page.next_cursor))
        }
    })
    .await;
    let elections = match elections {
        Ok(elections) => elections,
        Err(code) => return code,
    };
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&elections).unwrap_or_default()
        );
        return 0;
    }
    for election in &elections {
        let said = leader_line(election).unwrap_or_else(|| "no leader".into());
        println!(
            "{} {said} candidates={}",
            election.name, election.candidates
        );
    }
    0
}

pub(super) async fn leader(args: LeaderArgs, client: Client) -> u8 {
    let election = match fetch(&client, &args.name).await {
        Ok(election) => election,
        Err(code) => return code,
    };
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&election).unwrap_or_default()
        );
    }
    match leader_line(&election) {
        Some(line) if !args.json => println!("{line}"),
        Some(_) => {}
        None if !args.json => eprintln!("lockwarden: {} has no leader", args.name),
        None => {}
    }
    if election.leader.is_some() {
        0
    } else {
        exit::NOT_ACQUIRED
    }
}

/// One line of `observe`: the event's id and type, then its leader (or `no leader`).
fn event_line(event: &Event) -> String {
    let id = event.id.map(|id| id.to_string()).unwrap_or("-".into());
    let said = event
        .election
        .as_ref()
        .and_then(leader_line)
        .unwrap_or_else(|| "no leader".into());
    format!("{id} {} {said}", event.kind)
}

/// `watch NAME --election`: as `observe NAME`.
pub(super) async fn watch(args: super::WatchArgs, client: Client) -> u8 {
    let Some(name) = args.name else {
        eprintln!("lockwarden: watch --election needs the election's NAME");
        return exit::USAGE;
    };
    let client_args = args.client;
    observe(
        ObserveArgs {
            name,
            json: args.json,
            client: client_args,
        },
        client,
    )
    .await
}

pub(super) async fn observe(args: ObserveArgs, client: Client) -> u8 {
    let mut watch = client.observe(&args.name);
    loop {
        match watch.next().await {
            Ok(event) if args.json => println!("{}", event.data),
            Ok(event) => println!("{}", event_line(&event)),
            Err(error) => {
                eprintln!("lockwarden: {}: {}", args.name, explain(&error));
                return exit_for(&error, exit::NOT_ACQUIRED);
            }
        }
        let _ = std::io::stdout().flush();
    }
}
