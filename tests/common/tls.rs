//! A private CA made at test time (rcgen), and a server certificate it signed for 127.0.0.1
//! and localhost: the PEM files in a temporary directory, `serve` flags that use them, and
//! an HTTPS client and a service that trust the CA.

use std::path::PathBuf;

use lockwarden::config::ServeArgs;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};

use super::Service;

pub struct TestCa {
    /// The CA's certificate, as PEM.
    pub ca_pem: String,
    /// The same, as a file.
    pub ca_file: PathBuf,
    /// The server's certificate (signed by the CA), and its private key.
    pub cert_file: PathBuf,
    pub key_file: PathBuf,
    _dir: tempfile::TempDir,
}

impl TestCa {
    pub fn new() -> TestCa {
        let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        ca.distinguished_name
            .push(DnType::CommonName, "lockwarden test CA");
        let ca_key = KeyPair::generate().unwrap();
        let ca_pem = ca.self_signed(&ca_key).unwrap().pem();
        let issuer = Issuer::new(ca, ca_key);

        let names = vec!["127.0.0.1".to_owned(), "localhost".to_owned()];
        let mut server = CertificateParams::new(names).unwrap();
        server.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let server_key = KeyPair::generate().unwrap();
        let server_cert = server.signed_by(&server_key, &issuer).unwrap();

        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, text: &str| {
            let path = dir.path().join(name);
            std::fs::write(&path, text).unwrap();
            path
        };
        TestCa {
            ca_file: write("ca.pem", &ca_pem),
            cert_file: write("server.pem", &server_cert.pem()),
            key_file: write("server-key.pem", &server_key.serialize_pem()),
            ca_pem,
            _dir: dir,
        }
    }

    /// `--tls-cert` and `--tls-key` with the server's files.
    pub fn serve_flags(&self) -> Vec<String> {
        let path = |p: &PathBuf| p.display().to_string();
        vec![
            "--tls-cert".into(),
            path(&self.cert_file),
            "--tls-key".into(),
            path(&self.key_file),
        ]
    }

    /// An HTTPS client that trusts this CA alone.
    pub fn http_client(&self) -> reqwest::Client {
        let ca = reqwest::Certificate::from_pem(self.ca_pem.as_bytes()).unwrap();
        reqwest::Client::builder()
            .no_proxy()
            .tls_built_in_root_certs(false)
            .add_root_certificate(ca)
            .timeout(std::time::Duration::from_secs(30))
            .build()
            .unwrap()
    }

    /// An instance serving HTTPS with `args` and the server's certificate; its `http`
    /// trusts the CA.
    pub async fn service(&self, mut args: ServeArgs) -> Service {
        args.tls_cert = Some(self.cert_file.clone());
        args.tls_key = Some(self.key_file.clone());
        let mut service = Service::start(args).await;
        service.http = self.http_client();
        service
    }
}
