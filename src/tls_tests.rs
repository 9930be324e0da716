use super::*;

/// A self-signed certificate and its key, as PEM.
fn pair() -> (String, String) {
    let made = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
    (made.cert.pem(), made.signing_key.serialize_pem())
}

/// `acceptor` on files with these contents; its error.
fn error_for(cert: &str, key: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let (cert_path, key_path) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
    std::fs::write(&cert_path, cert).unwrap();
    std::fs::write(&key_path, key).unwrap();
    match acceptor(&cert_path, &key_path) {
        Ok(_) => panic!("{cert:?} and {key:?} were taken"),
        Err(error) => error.replace(&dir.path().display().to_string(), "DIR"),
    }
}

#[test]
fn a_matching_pair_makes_an_acceptor() {
    let (cert, key) = pair();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("cert.pem"), cert).unwrap();
    std::fs::write(dir.path().join("key.pem"), key).unwrap();
    acceptor(&dir.path().join("cert.pem"), &dir.path().join("key.pem")).unwrap();
}

#[test]
fn a_missing_file_is_named_with_its_flag() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nowhere.pem");
    let error = acceptor(&missing, &missing).err().unwrap();
    assert!(error.starts_with("cannot read --tls-cert "), "{error}");
    assert!(error.contains("nowhere.pem"), "{error}");
}

#[test]
fn files_without_the_right_pem_say_what_is_missing() {
    let (cert, key) = pair();
    assert_eq!(
        error_for("", &key),
        "--tls-cert DIR/cert.pem: no PEM certificate (-----BEGIN CERTIFICATE-----) in it"
    );
    let no_key = error_for(&cert, &cert);
    assert!(
        no_key.starts_with("--tls-key DIR/key.pem: no PEM private key"),
        "{no_key}"
    );
    let cut = &cert[..cert.len() / 2];
    let bad = error_for(cut, &key);
    assert!(
        bad.starts_with("--tls-cert DIR/cert.pem: not valid PEM"),
        "{bad}"
    );
    let garbage = "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n";
    let bad = error_for(&cert, garbage);
    assert!(
        bad.starts_with("--tls-key DIR/key.pem: not a usable private key"),
        "{bad}"
    );
}

#[test]
fn a_key_of_another_certificate_is_refused() {
    let (cert, _) = pair();
    let (_, other_key) = pair();
    let error = error_for(&cert, &other_key);
    assert!(error.contains("do not make a usable pair"), "{error}");
    assert!(
        error.contains("the private key is not the certificate's"),
        "{error}"
    );
}
