//! The production material stays true to the code: `deploy/alerts.yml` passes `promtool
//! check rules` and names only series (and label values) that a real instance exports; the
//! systemd unit and the Kubernetes manifests use only flags and variables that `lockwarden
//! serve --help` lists, keep secrets off the command line, give the service its drain time
//! and probe real routes; `docs/operations.md` names only real flags, alerts and files.
//! promtool is required (as in `metrics.rs`); `systemd-analyze` is used where it exists.

mod alerts;
mod kubernetes;
mod promql;
mod systemd;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use lockwarden::http_server::DRAIN_TIMEOUT;
use serde_yaml::Value;

/// How long after SIGTERM the process is gone: the drain, then the second `main` gives
/// background tasks (`SHUTDOWN_TIMEOUT` in src/main.rs).
fn exits_within() -> Duration {
    DRAIN_TIMEOUT + Duration::from_secs(1)
}

/// Variables that carry secrets: never a flag, always from a file or a Secret.
const SECRET_ENV: [(&str, &str); 6] = [
    ("LOCKWARDEN_ZK_AUTH", "--zk-auth"),
    ("LOCKWARDEN_RECORD_SECRET", "--record-secret"),
    ("LOCKWARDEN_API_TOKEN", "--api-token"),
    ("LOCKWARDEN_ADMIN_TOKEN", "--admin-token"),
    ("LOCKWARDEN_METRICS_TOKEN", "--metrics-token"),
    ("LOCKWARDEN_WEBHOOK_SECRET", "--webhook-secret"),
];

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

fn read(path: &str) -> String {
    std::fs::read_to_string(repo(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// A YAML string.
fn text(value: &Value) -> &str {
    value
        .as_str()
        .unwrap_or_else(|| panic!("a string: {value:?}"))
}

/// The flags and environment variables that `lockwarden <command> --help` lists.
struct Help {
    flags: BTreeSet<String>,
    env: BTreeSet<String>,
}

fn help(command: &str) -> Help {
    let output = Command::new(env!("CARGO_BIN_EXE_lockwarden"))
        .args([command, "--help"])
        .output()
        .unwrap();
    assert!(output.status.success(), "{command} --help");
    let text = String::from_utf8(output.stdout).unwrap();
    let flags = text
        .lines()
        .map(str::trim_start)
        .filter(|line| line.starts_with('-'))
        .flat_map(|line| line.split_whitespace())
        .map(|word| word.trim_end_matches(','))
        .filter(|word| word.starts_with("--"))
        .map(str::to_owned)
        .collect();
    let env = text
        .split("[env: ")
        .skip(1)
        .map(|rest| rest.split(['=', ']']).next().unwrap().to_owned())
        .collect();
    Help { flags, env }
}

impl Help {
    fn check_flag(&self, flag: &str, in_what: &str) {
        let flag = flag.split('=').next().unwrap();
        assert!(self.flags.contains(flag), "{in_what}: {flag} is not a flag");
    }

    fn check_env(&self, name: &str, in_what: &str) {
        assert!(self.env.contains(name), "{in_what}: {name} is not read");
    }
}

/// The text of inline code spans (between single backticks) outside code blocks.
fn inline_code(markdown: &str) -> Vec<String> {
    let mut prose = String::new();
    let mut in_block = false;
    for line in markdown.lines() {
        if line.trim_start().starts_with("```") {
            in_block = !in_block;
        } else if !in_block {
            prose.push_str(line);
            prose.push(' ');
        }
    }
    prose
        .split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_owned)
        .collect()
}

#[test]
fn operations_md_names_real_flags_alerts_and_files() {
    let doc = read("docs/operations.md");
    let (serve, lock) = (help("serve"), help("lock"));
    let mut flags = 0;
    for span in inline_code(&doc) {
        for word in span.split_whitespace() {
            let word = word.split('=').next().unwrap();
            if word.starts_with("--") {
                flags += 1;
                let known = serve.flags.contains(word) || lock.flags.contains(word);
                assert!(known, "{word} is not a flag");
            }
            if word.starts_with("LOCKWARDEN_") && !word.contains('<') {
                let known = serve.env.contains(word);
                assert!(known, "{word} is not read");
            }
        }
    }
    assert!(flags > 20, "{flags} flags checked");

    let alerts: BTreeSet<String> = alerts::alert_rules().into_iter().map(|(a, _)| a).collect();
    let named: BTreeSet<String> = doc
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|word| word.starts_with("Lockwarden") && word.len() > "Lockwarden".len())
        .map(str::to_owned)
        .collect();
    assert_eq!(
        named, alerts,
        "the alerts it names are the rules of alerts.yml"
    );

    for link in doc.split("](").skip(1) {
        let target = link.split(')').next().unwrap();
        if target.starts_with("http") || target.starts_with('#') {
            continue;
        }
        let path = target.split('#').next().unwrap();
        assert!(repo("docs").join(path).exists(), "a link to {target}");
    }
    assert!(read("README.md").contains("](docs/operations.md)"));
}
