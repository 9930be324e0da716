use clap::Parser;

use super::*;

/// The client commands as `lockwarden` parses them (`config::Command` flattens them).
#[derive(Debug, clap::Parser)]
struct Cli {
    #[command(subcommand)]
    command: ClientCommand,
}

fn parse(args: &[&str]) -> Result<ClientCommand, clap::Error> {
    let cli = Cli::try_parse_from(std::iter::once("lockwarden").chain(args.iter().copied()))?;
    Ok(cli.command)
}

#[test]
fn the_command_follows_the_name_with_or_without_a_double_dash() {
    for args in [
        &["lock", "a/b", "--lease", "2s", "--", "sh", "-c", "exit 7"][..],
        &["lock", "a/b", "--lease", "2s", "sh", "-c", "exit 7"][..],
    ] {
        let Ok(ClientCommand::Lock(lock)) = parse(args) else {
            panic!("{args:?}");
        };
        assert_eq!(lock.command, ["sh", "-c", "exit 7"]);
        assert_eq!(lock.lease, Duration::from_secs(2));
        assert_eq!(lock.wait, Duration::from_secs(10));
        assert_eq!(lock.conflict_exit_code, exit::NOT_ACQUIRED);
        assert_eq!(lock.on_cleanup, OnCleanup::Term);
    }
    let Ok(ClientCommand::Lock(lock)) = parse(&["lock", "a"]) else {
        panic!("no command");
    };
    assert!(lock.command.is_empty());
}

#[test]
fn watch_takes_a_name_or_a_prefix() {
    assert!(parse(&["watch", "a"]).is_ok());
    assert!(parse(&["watch", "--prefix", "jobs/"]).is_ok());
    assert!(parse(&["watch"]).is_err());
    assert!(parse(&["watch", "a", "--prefix", "b"]).is_err());
}

#[test]
fn every_lock_name_argument_says_how_a_name_is_made() {
    use clap::CommandFactory;
    let command = Cli::command();
    let mut named = 0;
    for sub in command.get_subcommands() {
        let Some(name) = sub.get_arguments().find(|a| a.get_id() == "name") else {
            continue;
        };
        named += 1;
        let help = name.get_help().map(ToString::to_string).unwrap_or_default();
        assert!(
            help.contains("separated by '/'"),
            "{} <NAME>: {help:?}",
            sub.get_name()
        );
    }
    assert_eq!(
        named, 8,
        "lock, status, watch, release, force-release, elect, leader, observe"
    );
}

#[test]
fn an_addr_must_be_an_http_or_https_url() {
    for bad in [
        "127.0.0.1:18080",
        "localhost:8080",
        "ftp://127.0.0.1:21",
        "http://",
        "http://127.0.0.1:8080/?x=1",
        "",
    ] {
        let error = parse(&["status", "a", "--addr", bad]).expect_err(bad);
        assert_eq!(
            error.kind(),
            clap::error::ErrorKind::ValueValidation,
            "{bad}"
        );
        assert_eq!(error.exit_code(), i32::from(exit::USAGE), "{bad}");
        assert!(
            error
                .to_string()
                .contains("http://host:port or https://host:port"),
            "{bad}: {error}"
        );
    }
    for good in [
        "http://127.0.0.1:18080",
        "https://locks.example.com",
        "http://[::1]:8080/",
    ] {
        let Ok(ClientCommand::Status(status)) = parse(&["status", "a", "--addr", good]) else {
            panic!("{good}");
        };
        assert_eq!(status.client.addr, good);
    }
}

#[test]
fn lease_wait_and_cleanup_are_refused_beyond_their_limits_in_the_users_units() {
    for (args, message) in [
        (
            &["lock", "a", "--lease", "48h"][..],
            "--lease must be at most 24h",
        ),
        (
            &["lock", "a", "--lease", "0s"][..],
            "--lease must be at least 1ms",
        ),
        (
            &["lock", "a", "--wait", "10m"][..],
            "--wait must be at most 5m",
        ),
        (
            &["lock", "a", "--cleanup", "25h"][..],
            "--cleanup must be at most 24h",
        ),
    ] {
        let error = parse(args).expect_err(message);
        assert_eq!(error.exit_code(), i32::from(exit::USAGE), "{args:?}");
        assert!(error.to_string().contains(message), "{args:?}: {error}");
    }
    let Ok(ClientCommand::Lock(lock)) = parse(&["lock", "a", "--lease", "24h", "-w", "5m"]) else {
        panic!("the limits themselves are taken");
    };
    assert_eq!(lock.lease, MAX_LEASE);
    assert_eq!(lock.wait, MAX_WAIT);
}

#[test]
fn without_user_the_owner_is_the_uids_name_from_the_user_database() {
    // `id -un` asks the same database; without an entry for the uid it fails, and the
    // uid in digits is the owner.
    let id = std::process::Command::new("id")
        .arg("-un")
        .output()
        .unwrap();
    let expected = if id.status.success() {
        String::from_utf8(id.stdout).unwrap().trim().to_owned()
    } else {
        // SAFETY: getuid has no preconditions.
        unsafe { libc::getuid() }.to_string()
    };
    assert_eq!(user_of_uid(), expected);
}

#[test]
fn the_default_owner_is_user_at_host_colon_pid() {
    let owner = default_owner();
    assert!(
        owner.ends_with(&format!(":{}", std::process::id())),
        "{owner}"
    );
    assert!(owner.contains('@'), "{owner}");
}
