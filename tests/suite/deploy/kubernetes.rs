//! `deploy/kubernetes/`: the Deployment's flags and variables are real, its secrets come
//! from the Secret, its probes are real routes that answer, and its Service and
//! PodDisruptionBudget select its pods.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Duration;

use reqwest::StatusCode;
use serde::Deserialize;
use serde_yaml::Value;

use super::{exits_within, help, read, repo, text, SECRET_ENV};
use crate::common::Service;

/// Every document of every YAML file in `dir`, with its file's name.
fn manifests(dir: &str) -> Vec<(String, Value)> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(repo(dir))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    let mut found = Vec::new();
    for path in files {
        let text = std::fs::read_to_string(&path).unwrap();
        let file = path.file_name().unwrap().to_string_lossy().into_owned();
        for document in serde_yaml::Deserializer::from_str(&text) {
            let value = Value::deserialize(document).unwrap_or_else(|e| panic!("{file}: {e}"));
            if !value.is_null() {
                found.push((file.clone(), value));
            }
        }
    }
    found
}

/// Whether every label of `selector` is among `labels`.
fn selects(selector: &Value, labels: &Value) -> bool {
    let selector = selector.as_mapping().expect("a selector");
    !selector.is_empty() && selector.iter().all(|(k, v)| labels.get(k) == Some(v))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_kubernetes_manifests_use_real_flags_secrets_from_a_secret_and_real_probes() {
    let documents = manifests("deploy/kubernetes");
    let of_kind = |kind: &str| -> Vec<&Value> {
        let found = documents
            .iter()
            .filter(|(_, d)| d["kind"].as_str() == Some(kind));
        found.map(|(_, d)| d).collect()
    };
    let [deployment] = of_kind("Deployment")[..] else {
        panic!("one Deployment")
    };
    let [service] = of_kind("Service")[..] else {
        panic!("one Service")
    };
    let [budget] = of_kind("PodDisruptionBudget")[..] else {
        panic!("one PodDisruptionBudget")
    };
    let [secret] = of_kind("Secret")[..] else {
        panic!("one Secret (the example)")
    };
    let serve = help("serve");

    let spec = &deployment["spec"];
    let replicas = spec["replicas"].as_u64().unwrap();
    assert!((2..=3).contains(&replicas), "{replicas} replicas");
    let pod_labels = &spec["template"]["metadata"]["labels"];
    assert!(selects(&spec["selector"]["matchLabels"], pod_labels));
    assert!(selects(&service["spec"]["selector"], pod_labels));
    assert!(selects(
        &budget["spec"]["selector"]["matchLabels"],
        pod_labels
    ));

    let pod = &spec["template"]["spec"];
    let [container] = &pod["containers"].as_sequence().unwrap()[..] else {
        panic!("one container")
    };
    let args: Vec<&str> = container["args"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(text)
        .collect();
    assert_eq!(args[0], "serve", "the image's entrypoint is lockwarden");
    let flags: Vec<&str> = args
        .iter()
        .copied()
        .filter(|a| a.starts_with("--"))
        .collect();
    assert!(flags.len() >= 5, "{flags:?}");
    for flag in &flags {
        serve.check_flag(flag, "args");
        let secret = SECRET_ENV
            .iter()
            .any(|(_, f)| flag.split('=').next() == Some(f));
        assert!(!secret, "{flag} belongs in the Secret, not args");
    }
    let flag_value = |flag: &str| {
        let at = args.iter().position(|a| *a == flag)?;
        args.get(at + 1).copied()
    };

    let secret_keys: BTreeSet<&str> = secret["stringData"]
        .as_mapping()
        .unwrap()
        .keys()
        .map(text)
        .collect();
    let env = container["env"].as_sequence().unwrap();
    for variable in env {
        let name = text(&variable["name"]);
        if !name.starts_with("LOCKWARDEN_") {
            continue;
        }
        serve.check_env(name, "env");
        let reference = &variable["valueFrom"]["secretKeyRef"];
        if SECRET_ENV.iter().any(|(s, _)| *s == name) {
            assert!(reference.is_mapping(), "{name} comes from a Secret");
        }
        if reference.is_mapping() {
            assert_eq!(reference["name"], secret["metadata"]["name"], "{name}");
            let optional = reference["optional"].as_bool() == Some(true);
            let key = text(&reference["key"]);
            assert!(
                optional || secret_keys.contains(key),
                "{name}: the Secret has no {key}"
            );
        }
    }

    let ports = container["ports"].as_sequence().unwrap();
    let [port] = &ports[..] else {
        panic!("one port")
    };
    let number = port["containerPort"].as_u64().unwrap();
    let listen = flag_value("--listen").expect("--listen in args");
    assert!(listen.ends_with(&format!(":{number}")), "{listen}");
    let target = &service["spec"]["ports"][0]["targetPort"];
    assert!(*target == port["name"] || target.as_u64() == Some(number));

    let store_timeout: u64 = flag_value("--store-timeout-ms").map_or(2_000, |v| v.parse().unwrap());
    let svc = Service::memory().await;
    for (probe, expected) in [("readinessProbe", "/readyz"), ("livenessProbe", "/healthz")] {
        let get = &container[probe]["httpGet"];
        let path = text(&get["path"]);
        assert_eq!(
            path, expected,
            "{probe}: readiness follows ZooKeeper, liveness does not"
        );
        assert!(get["port"] == port["name"] || get["port"].as_u64() == Some(number));
        let timeout = container[probe]["timeoutSeconds"].as_u64().unwrap();
        assert!(
            timeout * 1000 > store_timeout,
            "{probe} outwaits the store timeout"
        );
        assert!(lockwarden::api::ROUTES.contains(&("get", path)), "{path}");
        assert_eq!(svc.get(path).await.0, StatusCode::OK, "GET {path}");
    }

    let pre_stop = container["lifecycle"]["preStop"]["exec"]["command"]
        .as_sequence()
        .map_or(0, |command| match &command[..] {
            [sleep, seconds] if text(sleep) == "sleep" => text(seconds).parse().unwrap(),
            other => panic!("preStop {other:?}"),
        });
    let grace = pod["terminationGracePeriodSeconds"].as_u64().unwrap();
    assert!(
        Duration::from_secs(grace) > Duration::from_secs(pre_stop) + exits_within(),
        "terminationGracePeriodSeconds {grace} covers the preStop pause and the drain"
    );

    let kustomization = read("deploy/kubernetes/kustomization.yaml");
    let kustomization: Value = serde_yaml::from_str(&kustomization).unwrap();
    for resource in kustomization["resources"].as_sequence().unwrap() {
        let file = text(resource);
        assert!(repo("deploy/kubernetes").join(file).is_file(), "{file}");
        assert_ne!(
            file, "secret.example.yaml",
            "the example Secret is not applied"
        );
    }
}
