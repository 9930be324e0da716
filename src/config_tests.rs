use super::*;

#[test]
fn the_defaults_are_valid_and_the_gc_delay_must_cover_every_write_window() {
    let mut args = ServeArgs::defaults();
    assert_eq!(args.check(), Ok(()));
    args.gc_delay_ms = 2 * args.store_timeout_ms + args.zk_session_timeout_ms * 3 / 2;
    assert!(args.check().is_err());
    args.gc_delay_ms += 1;
    assert_eq!(args.check(), Ok(()));
    args.lock_root = "relative".into();
    assert!(args.check().is_err());
}

#[test]
fn the_heads_grace_is_five_ms_by_default_and_at_most_ten_seconds() {
    let mut args = ServeArgs::defaults();
    assert_eq!(args.head_grace_ms, 5);
    args.head_grace_ms = 0;
    assert_eq!(args.check(), Ok(()), "0 turns it off");
    args.head_grace_ms = 10_000;
    assert_eq!(args.check(), Ok(()));
    args.head_grace_ms = 10_001;
    assert_eq!(
        args.check(),
        Err("--head-grace-ms must be at most 10000".into())
    );
}

/// The help of every command and flag, as `--help` shows it.
fn every_help(command: &mut clap::Command, path: &str, into: &mut Vec<(String, String)>) {
    into.push((path.to_owned(), command.render_long_help().to_string()));
    for sub in command.get_subcommands_mut() {
        let path = format!("{path} {}", sub.get_name());
        every_help(sub, &path, into);
    }
}

#[test]
fn every_help_text_stands_alone() {
    use clap::CommandFactory;
    let mut helps = Vec::new();
    every_help(&mut Cli::command(), "lockwarden", &mut helps);
    assert!(helps.len() > 8, "{helps:?}");
    for (command, help) in helps {
        for pointer in ["README", "DESIGN", "BENCHMARKS", "RELIABILITY", ".md"] {
            assert!(
                !help.contains(pointer),
                "`{command} --help` points at {pointer}, which a user with only the \
                 binary does not have:\n{help}"
            );
        }
    }
}

#[test]
fn an_empty_metrics_token_is_refused() {
    let mut args = ServeArgs::defaults();
    args.metrics_token = Some(" ".into());
    assert!(args.check().is_err());
    args.metrics_token = Some("m".into());
    assert_eq!(args.check(), Ok(()));
}

#[test]
fn request_threads_default_to_one_less_than_the_cpus_and_zero_is_refused() {
    assert!(ServeArgs::defaults().request_threads() >= 1);
    let parse = |n: &str| Cli::try_parse_from(["lockwarden", "serve", "--worker-threads", n]);
    assert!(parse("0").is_err());
    match parse("3").map(|cli| cli.command) {
        Ok(Command::Serve(args)) => assert_eq!(args.request_threads(), 3),
        _ => panic!("--worker-threads 3 parses"),
    }
}

#[test]
fn tls_takes_a_certificate_and_a_key_or_neither() {
    let parse = |flags: &[&str]| {
        let argv = ["lockwarden", "serve"].iter().chain(flags).copied();
        Cli::try_parse_from(argv.collect::<Vec<_>>())
    };
    for half in [["--tls-cert", "c.pem"], ["--tls-key", "k.pem"]] {
        let error = parse(&half).unwrap_err();
        assert_eq!(
            error.kind(),
            clap::error::ErrorKind::MissingRequiredArgument
        );
    }
    let both = parse(&["--tls-cert", "c.pem", "--tls-key", "k.pem"]).unwrap();
    let Command::Serve(args) = both.command else {
        panic!("serve parses as Serve")
    };
    assert_eq!(
        args.tls_cert.as_deref(),
        Some(std::path::Path::new("c.pem"))
    );
    assert!(ServeArgs::defaults().tls_cert.is_none());
}

#[test]
fn hints_are_turned_off_by_name_or_all_at_once() {
    use crate::service::{Hint, Hints};
    let parse = |flag: &str| match Cli::try_parse_from(["lockwarden", "serve", "--hints-off", flag])
    {
        Ok(Cli {
            command: Command::Serve(args),
        }) => Ok(args.hints_off),
        Ok(_) => unreachable!(),
        Err(e) => Err(e.kind()),
    };
    assert!(
        ServeArgs::defaults().hints_off.is_empty(),
        "all on by default"
    );
    let off = parse("record-cache,in-process").unwrap();
    let hints = Hints::without(&off);
    assert!(!hints.record_cache && hints.remembered_queue && !hints.in_process);
    assert!(Hint::GroupCommit.on(&off));
    let all = parse("all").unwrap();
    assert!(!Hint::SharedMultis.on(&all) && !Hints::without(&all).remembered_queue);
    assert!(parse("cache").is_err(), "an unknown hint is refused");
}

#[test]
fn the_election_root_may_not_hold_or_lie_under_the_other_roots() {
    let mut args = ServeArgs::defaults();
    assert_eq!(args.election_root, "/lockwarden/elections");
    for clash in [
        "/lockwarden/locks",
        "/lockwarden",
        "/lockwarden/state/e",
        "/lockwarden/locks/x",
    ] {
        args.election_root = clash.into();
        assert!(args.check().is_err(), "{clash}");
    }
    for fine in ["/lockwarden/locks2", "/elections", "/lockwarden/elections"] {
        args.election_root = fine.into();
        assert_eq!(args.check(), Ok(()), "{fine}");
    }
}

#[test]
fn the_semaphore_root_may_not_hold_or_lie_under_the_other_roots() {
    let mut args = ServeArgs::defaults();
    assert_eq!(args.semaphore_root, "/lockwarden/semaphores");
    for clash in [
        "/lockwarden/locks",
        "/lockwarden",
        "/lockwarden/state/s",
        "/lockwarden/elections",
        "/lockwarden/elections/records/x",
    ] {
        args.semaphore_root = clash.into();
        assert!(args.check().is_err(), "{clash}");
    }
    for fine in [
        "/lockwarden/semaphores2",
        "/semaphores",
        "/lockwarden/semaphores",
    ] {
        args.semaphore_root = fine.into();
        assert_eq!(args.check(), Ok(()), "{fine}");
    }
}
