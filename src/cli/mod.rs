//! The client side of the `lockwarden` binary: `lock` (run a command under a lock),
//! `status`, `list`, `watch`, `release` and `force-release`, all built on the
//! `lockwarden-client` crate. This module owns the flags, the exit codes and the wiring;
//! `lock` and `child` own running a command under a lock, `show` the other commands, `owner`
//! the default owner.

mod child;
pub mod duration;
mod election;
mod lock;
mod owner;
mod semaphore;
mod show;
pub use show::{ListArgs, StatusArgs};

use std::time::Duration;

use clap::{Args, Subcommand, ValueEnum};
use lockwarden_client::{Client, Error};

pub use owner::{default_owner, user_of_uid};

/// Exit codes. A command run under `lockwarden lock` passes its own status through, so
/// the fixed codes are ones that commands rarely use (the sysexits values).
pub mod exit {
    /// The lock was not acquired (held, or the wait ran out); `-E` picks another.
    pub const NOT_ACQUIRED: u8 = 1;
    /// A usage error (clap's code).
    pub const USAGE: u8 = 2;
    /// The service refused the request (invalid input, a missing or wrong token).
    pub const REFUSED: u8 = 65;
    /// The service could not be reached, or stayed unavailable (503).
    pub const UNREACHABLE: u8 = 69;
    /// The lock was lost, or handed to a higher priority, while the command ran; the
    /// command was told to stop.
    pub const LOST: u8 = 75;
    /// The command was found but could not be run.
    pub const CANNOT_RUN: u8 = 126;
    /// The command was not found.
    pub const NOT_FOUND: u8 = 127;
}

/// The exit-code table, for `--help`.
pub const EXIT_CODES: &str = "\
Exit codes:
  CMD's status  CMD ran while the lock was held (128+N when signal N killed it)
  1             the lock was not acquired (held, or --wait ran out); -E picks another
  2             usage error
  65            the service refused the request (bad input, missing or wrong token)
  69            the service could not be reached (over https: its certificate was
                not trusted) or stayed unavailable
  75            the lock was lost or handed to a higher priority while CMD ran;
                CMD was sent SIGTERM, then SIGKILL after the grace period
  126, 127      CMD could not be run, or was not found
  128+N         interrupted by signal N before the lock was acquired";

/// The help of a lock name argument (`<NAME>`).
const NAME_HELP: &str = "The lock's name: one or more parts separated by '/', each of \
    [A-Za-z0-9._-] (such as jobs/nightly)";

/// The longest lease and cleanup window, and the longest wait, that the service takes
/// (unless its `--max-lease-ms` or `--max-waiting-ms` says less).
const MAX_LEASE: Duration = Duration::from_millis(crate::model::DEFAULT_MAX_LEASE_MS);
const MAX_WAIT: Duration = Duration::from_millis(crate::model::DEFAULT_MAX_WAITING_MS);

/// Where the service is and how to authenticate; every client command takes these.
#[derive(Clone, Debug, Args)]
pub struct ClientArgs {
    /// The service's URL: http://host:port or https://host:port.
    #[arg(
        long,
        env = "LOCKWARDEN_ADDR",
        default_value = "http://127.0.0.1:8080",
        value_parser = service_url
    )]
    pub addr: String,
    /// The bearer token (the admin token for force-release).
    #[arg(long, env = "LOCKWARDEN_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// Trust the CA certificates in this PEM file, and only them, for an https:// service
    /// (one whose certificate a private CA signed). Without it, the public CAs are trusted.
    #[arg(long, env = "LOCKWARDEN_CA_FILE", value_name = "PATH")]
    pub ca_file: Option<std::path::PathBuf>,
    /// How long to keep retrying while the service is unreachable or answers 503/429.
    #[arg(long, default_value = "10s", value_parser = duration::parse)]
    pub retry_for: Duration,
}

impl ClientArgs {
    /// The client these flags describe; `Err` is the exit code, once the reason is printed
    /// (an unreadable or unusable `--ca-file`).
    pub fn client(&self) -> Result<Client, u8> {
        let mut client = Client::new(&self.addr).retry_for(self.retry_for);
        if let Some(path) = &self.ca_file {
            client = client.ca_file(path).map_err(|error| {
                eprintln!("lockwarden: --ca-file: {error}");
                exit::USAGE
            })?;
        }
        Ok(match &self.token {
            Some(token) => client.token(token),
            None => client,
        })
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum OnCleanup {
    /// Stop CMD (SIGTERM, then SIGKILL when the cleanup window ends) and let go.
    Term,
    /// Keep running; the lock may then be revoked when the cleanup window ends.
    Ignore,
}

/// Run a command while holding a lock.
#[derive(Clone, Debug, Args)]
#[command(after_help = EXIT_CODES)]
pub struct LockArgs {
    #[arg(help = NAME_HELP)]
    pub name: String,
    /// Hold one of N permits (1 to 128) of the semaphore NAME instead (`consul lock -n`);
    /// the semaphore NAME is not the lock NAME.
    #[arg(short = 'n', long = "limit", value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..=128))]
    pub limit: Option<u32>,
    /// The lease, at most 24h; renewed every third of it while CMD runs.
    #[arg(
        long,
        default_value = "30s",
        value_parser = duration::within("--lease", Duration::from_millis(1), MAX_LEASE)
    )]
    pub lease: Duration,
    /// How long to wait in the lock's queue when it is held, at most 5m (0s: do not wait).
    #[arg(
        long,
        short = 'w',
        default_value = "10s",
        value_parser = duration::within("--wait", Duration::ZERO, MAX_WAIT)
    )]
    pub wait: Duration,
    /// A higher priority asks a lower holder to clean up and hand over.
    #[arg(long, default_value_t = 0)]
    pub priority: u32,
    /// How long this holder gets to clean up when a higher priority asks, at most 24h.
    #[arg(
        long,
        default_value = "30s",
        value_parser = duration::within("--cleanup", Duration::ZERO, MAX_LEASE)
    )]
    pub cleanup: Duration,
    /// Take the lock from a lower priority without waiting for its cleanup.
    #[arg(long)]
    pub forceful: bool,
    /// What the lock is held for, as others see it.
    #[arg(long, default_value = "")]
    pub message: String,
    /// Who holds the lock, as others see it [default: user@host:pid].
    #[arg(long)]
    pub owner: Option<String>,
    /// How long CMD gets between SIGTERM and SIGKILL [default: the rest of the cleanup
    /// window when asked to clean up, 5s when the lock is lost].
    #[arg(long, value_parser = duration::parse)]
    pub grace: Option<Duration>,
    /// What to do when a higher priority asks for the lock.
    #[arg(long, value_enum, default_value = "term")]
    pub on_cleanup: OnCleanup,
    /// The exit code when the lock is not acquired.
    #[arg(short = 'E', long, default_value_t = exit::NOT_ACQUIRED)]
    pub conflict_exit_code: u8,
    #[command(flatten)]
    pub client: ClientArgs,
    /// The command to run under the lock, directly (not through a shell). Without it,
    /// the lock is held until SIGINT or SIGTERM.
    #[arg(value_name = "CMD", trailing_var_arg = true)]
    pub command: Vec<String>,
}

#[derive(Clone, Debug, Args)]
#[command(group = clap::ArgGroup::new("what").required(true).args(["name", "prefix"]))]
pub struct WatchArgs {
    #[arg(help = NAME_HELP)]
    pub name: Option<String>,
    /// Watch every lock whose name starts with this instead.
    #[arg(long)]
    pub prefix: Option<String>,
    /// Watch the election NAME instead (as `observe`).
    #[arg(long, conflicts_with = "prefix")]
    pub election: bool,
    /// Watch the semaphore NAME instead: one line per event, naming its permit's token.
    #[arg(long, conflicts_with_all = ["prefix", "election"])]
    pub semaphore: bool,
    /// Print each event's data, as the service sent it: one JSON object a line, with no
    /// time in front.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub client: ClientArgs,
}

#[derive(Clone, Debug, Args)]
pub struct ReleaseArgs {
    #[arg(help = NAME_HELP)]
    pub name: String,
    /// The lease to release (what `lockwarden lock` printed).
    #[arg(long)]
    pub lease_id: String,
    #[command(flatten)]
    pub client: ClientArgs,
}

#[derive(Clone, Debug, Args)]
pub struct ForceReleaseArgs {
    #[arg(help = NAME_HELP)]
    pub name: String,
    #[command(flatten)]
    pub client: ClientArgs,
}

/// The client commands, flattened into the binary's `Command`.
#[derive(Clone, Debug, Subcommand)]
pub enum ClientCommand {
    /// Run CMD while holding a lock (or hold it until interrupted).
    Lock(LockArgs),
    /// Show one lock.
    Status(StatusArgs),
    /// List held and expired locks.
    List(ListArgs),
    /// Print a lock's events (or those of every lock under a prefix), one line each,
    /// starting with the time it arrived (RFC 3339, UTC).
    Watch(WatchArgs),
    /// Release a lease by its id.
    Release(ReleaseArgs),
    /// Release a lock whoever holds it (needs the admin token).
    ForceRelease(ForceReleaseArgs),
    /// Campaign in an election, then run CMD while leader (or lead until interrupted).
    Elect(election::ElectArgs),
    /// Print an election's leader (exit 1 when nobody leads).
    Leader(election::LeaderArgs),
    /// Print an election's events, one line each: snapshot, elected, proclaimed, no_leader.
    Observe(election::ObserveArgs),
}

/// Runs a client command; returns the exit code.
pub async fn run(command: ClientCommand) -> u8 {
    let client = match command.client_args().client() {
        Ok(client) => client,
        Err(code) => return code,
    };
    match command {
        ClientCommand::Lock(args) => lock::run(args, client).await,
        ClientCommand::Status(args) if args.election => election::status(args, client).await,
        ClientCommand::Status(args) if args.semaphore => semaphore::status(args, client).await,
        ClientCommand::Status(args) => show::status(args, client).await,
        ClientCommand::List(args) if args.election => election::list(args, client).await,
        ClientCommand::List(args) if args.semaphore => semaphore::list(args, client).await,
        ClientCommand::List(args) => show::list(args, client).await,
        ClientCommand::Watch(args) if args.election => election::watch(args, client).await,
        ClientCommand::Watch(args) if args.semaphore => semaphore::watch(args, client).await,
        ClientCommand::Watch(args) => show::watch(args, client).await,
        ClientCommand::Release(args) => show::release(args, client).await,
        ClientCommand::ForceRelease(args) => show::force_release(args, client).await,
        ClientCommand::Elect(args) => election::elect(args, client).await,
        ClientCommand::Leader(args) => election::leader(args, client).await,
        ClientCommand::Observe(args) => election::observe(args, client).await,
    }
}

impl ClientCommand {
    fn client_args(&self) -> &ClientArgs {
        match self {
            ClientCommand::Lock(args) => &args.client,
            ClientCommand::Status(args) => &args.client,
            ClientCommand::List(args) => &args.client,
            ClientCommand::Watch(args) => &args.client,
            ClientCommand::Release(args) => &args.client,
            ClientCommand::ForceRelease(args) => &args.client,
            ClientCommand::Elect(args) => &args.client,
            ClientCommand::Leader(args) => &args.client,
            ClientCommand::Observe(args) => &args.client,
        }
    }
}

/// The exit code for a failed call.
pub fn exit_for(error: &Error, not_acquired: u8) -> u8 {
    match error {
        Error::NotAcquired { .. } => not_acquired,
        Error::Refused { status: 409, .. } => exit::NOT_ACQUIRED,
        Error::Unreachable(_) | Error::Unavailable { .. } | Error::Tls(_) => exit::UNREACHABLE,
        Error::Refused { .. } | Error::InvalidArgument(_) | Error::Protocol(_) => exit::REFUSED,
    }
}

/// A failed call, as the user reads it: with what to do when TLS failed.
pub fn explain(error: &Error) -> String {
    match error {
        Error::Tls(_) => format!(
            "{error} (a service whose certificate a private CA signed needs that CA's \
             certificate in --ca-file or LOCKWARDEN_CA_FILE)"
        ),
        _ => error.to_string(),
    }
}

/// The `--addr` of a client command: an http or https URL with a host. Anything else is
/// refused at once (a usage error) rather than retried, and no scheme is guessed.
fn service_url(text: &str) -> Result<String, String> {
    const FORM: &str = "expected http://host:port or https://host:port";
    let url =
        url::Url::parse(text).map_err(|_| format!("{FORM}, such as http://127.0.0.1:8080"))?;
    let http = matches!(url.scheme(), "http" | "https");
    if !http || url.host_str().is_none_or(str::is_empty) {
        return Err(format!("{FORM}, such as http://127.0.0.1:8080"));
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(format!("{FORM}, without a query or fragment"));
    }
    Ok(text.to_owned())
}

#[cfg(test)]
#[path = "cli_tests.rs"]
mod tests;
