//! `deploy/lockwarden.service`: its flags and variables are real, its secrets come from its
//! EnvironmentFile, it waits for the drain, and `systemd-analyze` accepts it.

use std::process::Command;
use std::time::Duration;

use super::{exits_within, help, read, SECRET_ENV};

/// A duration as systemd writes one here: `20s`, or seconds alone.
fn systemd_seconds(value: &str) -> Duration {
    let seconds = value.strip_suffix('s').unwrap_or(value);
    Duration::from_secs(seconds.parse().expect("whole seconds"))
}

#[test]
fn the_systemd_unit_uses_real_flags_keeps_secrets_in_a_file_and_waits_for_the_drain() {
    let unit = read("deploy/lockwarden.service");
    let serve = help("serve");
    let entries: Vec<(&str, &str)> = unit
        .lines()
        .map(str::trim)
        .filter(|line| !line.starts_with('#') && !line.starts_with('['))
        .filter_map(|line| line.split_once('='))
        .collect();
    let values = |key: &str| -> Vec<&str> {
        let found = entries.iter().filter(|(k, _)| *k == key);
        found.map(|(_, v)| *v).collect()
    };

    let exec = values("ExecStart");
    assert_eq!(exec.len(), 1, "{exec:?}");
    let words: Vec<&str> = exec[0].split_whitespace().collect();
    assert!(
        words[0].ends_with("/lockwarden") && words[1] == "serve",
        "{words:?}"
    );
    for flag in words.iter().filter(|w| w.starts_with("--")) {
        serve.check_flag(flag, "ExecStart");
        let secret = SECRET_ENV
            .iter()
            .any(|(_, f)| flag.split('=').next() == Some(f));
        assert!(
            !secret,
            "{flag} belongs in the EnvironmentFile, not ExecStart"
        );
    }
    for assignment in values("Environment")
        .iter()
        .flat_map(|v| v.split_whitespace())
    {
        let name = assignment.split('=').next().unwrap();
        if name.starts_with("LOCKWARDEN_") {
            serve.check_env(name, "Environment=");
        }
    }
    assert_eq!(
        values("EnvironmentFile"),
        ["/etc/lockwarden/lockwarden.env"]
    );
    let template = read("deploy/lockwarden.env.example");
    let names: Vec<&str> = template
        .lines()
        .map(|line| line.trim().trim_start_matches('#'))
        .filter_map(|line| line.split_once('=').map(|(name, _)| name))
        .filter(|name| name.starts_with("LOCKWARDEN_"))
        .collect();
    assert!(names.len() >= 6, "{names:?}");
    for name in &names {
        serve.check_env(name, "lockwarden.env.example");
    }
    for (secret, _) in SECRET_ENV {
        assert!(names.contains(&secret), "the template offers {secret}");
    }

    for (key, value) in [
        ("NoNewPrivileges", "yes"),
        ("ProtectSystem", "strict"),
        ("ProtectHome", "yes"),
        ("PrivateTmp", "yes"),
        ("CapabilityBoundingSet", ""),
        ("Restart", "on-failure"),
        ("KillSignal", "SIGTERM"),
    ] {
        assert_eq!(values(key), [value], "{key}");
    }
    assert!(
        values("DynamicUser") == ["yes"] || !values("User").is_empty(),
        "runs as a user of its own"
    );
    let stop = systemd_seconds(values("TimeoutStopSec")[0]);
    assert!(
        stop > exits_within(),
        "TimeoutStopSec={stop:?} leaves the drain ({:?}) its time",
        exits_within()
    );

    systemd_analyze(&unit);
}

/// `systemd-analyze verify` (no complaint about the unit) and `security` (exposure at most
/// 2.0, "OK"), on a copy that runs the binary under test; skipped without systemd-analyze.
fn systemd_analyze(unit: &str) {
    if Command::new("systemd-analyze")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!("note: systemd-analyze is not installed; the unit was not verified");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("lockwarden.service");
    let binary = env!("CARGO_BIN_EXE_lockwarden");
    std::fs::write(&path, unit.replace("/usr/local/bin/lockwarden", binary)).unwrap();
    let verify = Command::new("systemd-analyze")
        .arg("verify")
        .arg(&path)
        .output()
        .unwrap();
    let printed = String::from_utf8_lossy(&verify.stdout).into_owned()
        + &String::from_utf8_lossy(&verify.stderr);
    let about_the_unit: Vec<&str> = printed
        .lines()
        .filter(|line| line.contains("lockwarden.service"))
        .collect();
    assert!(
        verify.status.success() && about_the_unit.is_empty(),
        "systemd-analyze verify:\n{printed}"
    );
    let security = Command::new("systemd-analyze")
        .args(["security", "--offline=true", "--threshold=20"])
        .arg(&path)
        .output()
        .unwrap();
    let printed = String::from_utf8_lossy(&security.stdout).into_owned()
        + &String::from_utf8_lossy(&security.stderr);
    if printed.contains("unrecognized option") {
        eprintln!("note: this systemd-analyze has no offline security check");
        return;
    }
    assert!(security.status.success(), "{printed}");
}
