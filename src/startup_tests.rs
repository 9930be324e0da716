use super::*;
use crate::config::{Cli, Command};
use clap::Parser;

/// `lockwarden serve` with `flags`.
fn serve(flags: &[&str]) -> ServeArgs {
    let argv = ["lockwarden", "serve"].iter().chain(flags);
    match Cli::try_parse_from(argv).expect("the flags parse").command {
        Command::Serve(args) => args,
        _ => unreachable!("serve parses as Serve"),
    }
}

const ZK: [&str; 2] = ["--zk", "zk1:2181"];
const TOKEN: [&str; 2] = ["--api-token", "t0ken"];
const AUTH: [&str; 2] = ["--zk-auth", "digest:lockwarden:pw"];
const SECRET: [&str; 2] = ["--record-secret", "s3cret"];

fn with(parts: &[&[&str]]) -> ServeArgs {
    serve(&parts.concat())
}

#[test]
fn a_closed_configuration_gives_none() {
    assert_eq!(openings(&with(&[&ZK, &TOKEN, &AUTH, &SECRET])), []);
    assert_eq!(
        warnings(&with(&[&ZK, &TOKEN, &AUTH, &SECRET])),
        [] as [String; 0]
    );
}

#[test]
fn the_defaults_in_memory_on_loopback_give_none() {
    assert_eq!(openings(&serve(&[])), []);
    assert_eq!(openings(&serve(&["--listen", "[::1]:8080"])), []);
    assert_eq!(
        openings(&serve(&["--listen", "[::ffff:127.0.0.1]:8080"])),
        []
    );
}

#[test]
fn zookeeper_with_nothing_else_is_open_in_three_ways() {
    assert_eq!(
        openings(&with(&[&ZK])),
        [
            Opening::NoApiToken,
            Opening::OpenZnodes,
            Opening::BuiltInRecordSecret
        ]
    );
}

#[test]
fn no_api_token_warns_on_zookeeper_or_beyond_loopback() {
    let no_token = |args: &ServeArgs| openings(args).contains(&Opening::NoApiToken);
    assert!(no_token(&with(&[&ZK, &AUTH, &SECRET])));
    assert!(no_token(&serve(&["--listen", "0.0.0.0:8080"])));
    assert!(no_token(&serve(&["--listen", "10.1.2.3:8080"])));
    assert!(!no_token(&serve(&[])), "in memory on loopback");
    assert!(!no_token(&with(&[&ZK, &TOKEN])));
    assert!(!no_token(&with(&[&["--listen", "0.0.0.0:8080"], &TOKEN])));
    assert!(!no_token(&with(&[
        &ZK,
        &["--token-file", "/etc/tokens.toml"]
    ])));
    assert!(
        !no_token(&serve(&["--admin-token", "adm1n"])),
        "an admin token alone opens nothing more on loopback in memory"
    );
    assert!(
        no_token(&with(&[&ZK, &["--admin-token", "adm1n"]])),
        "an admin token alone leaves /v1 open"
    );
}

#[test]
fn the_built_in_record_secret_warns_on_zookeeper_only() {
    let built_in = |args: &ServeArgs| openings(args).contains(&Opening::BuiltInRecordSecret);
    assert!(built_in(&with(&[&ZK, &TOKEN, &AUTH])));
    assert!(!built_in(&with(&[&ZK, &SECRET])));
    assert!(
        !built_in(&serve(&["--listen", "0.0.0.0:8080"])),
        "in memory"
    );
}

#[test]
fn zookeeper_without_zk_auth_warns_of_open_znodes() {
    let open = |args: &ServeArgs| openings(args).contains(&Opening::OpenZnodes);
    assert!(open(&with(&[&ZK, &TOKEN, &SECRET])));
    assert!(!open(&with(&[&ZK, &AUTH])));
    assert!(!open(&serve(&["--listen", "0.0.0.0:8080"])), "in memory");
}

#[test]
fn a_listen_address_beyond_loopback_warns_of_plain_http() {
    for listen in [
        "0.0.0.0:8080",
        "[::]:8080",
        "192.168.1.5:80",
        "[2001:db8::1]:8080",
    ] {
        let args = with(&[&["--listen", listen], &TOKEN]);
        assert_eq!(
            openings(&args),
            [Opening::PlainHttp(listen.parse().unwrap())],
            "{listen}"
        );
    }
    let closed_but_public = with(&[&["--listen", "0.0.0.0:8080"], &ZK, &TOKEN, &AUTH, &SECRET]);
    assert_eq!(
        openings(&closed_but_public),
        [Opening::PlainHttp("0.0.0.0:8080".parse().unwrap())]
    );
}

#[test]
fn tls_closes_plain_http_beyond_loopback() {
    let tls = ["--tls-cert", "cert.pem", "--tls-key", "key.pem"];
    for listen in ["0.0.0.0:8080", "[::]:8080", "192.168.1.5:443"] {
        let args = with(&[&["--listen", listen], &TOKEN, &tls]);
        assert_eq!(openings(&args), [], "{listen}");
    }
    let no_token = with(&[&["--listen", "0.0.0.0:8080"], &tls]);
    assert_eq!(
        openings(&no_token),
        [Opening::NoApiToken],
        "TLS does not stand for a token"
    );
}

#[test]
fn each_warning_is_one_line_naming_the_flag_that_closes_it() {
    let everything = with(&[&["--listen", "0.0.0.0:8080"], &ZK]);
    let warnings = warnings(&everything);
    assert_eq!(warnings.len(), 4, "{warnings:#?}");
    for (warning, flag) in warnings.iter().zip([
        "--listen on 127.0.0.1",
        "set --api-token",
        "set --zk-auth",
        "set --record-secret",
    ]) {
        assert!(!warning.contains('\n'), "{warning}");
        assert!(warning.contains(flag), "{warning:?} names {flag}");
    }
    assert!(warnings[0].contains("0.0.0.0:8080") && warnings[0].contains("TLS"));
    assert!(
        warnings[0].contains("--tls-cert and --tls-key"),
        "{}",
        warnings[0]
    );
}
