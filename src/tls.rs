//! HTTPS: the server's TLS configuration from `--tls-cert` and `--tls-key` (PEM files), with
//! rustls on the ring provider (the one reqwest's rustls already builds). Each error names
//! the flag and the file, so that a bad or unreadable file stops start-up with a clear line.
//!
//! The handshake itself runs in the connection loop ([`crate::http_server`]), under the same
//! read timeout and connection cap as a request's headers.

use std::path::Path;
use std::sync::Arc;

use rustls_pki_types::pem::{self, PemObject};
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::rustls::{self, crypto::ring, ServerConfig};
use tokio_rustls::TlsAcceptor;

/// The acceptor for the certificate chain in `cert` and the private key in `key`.
pub fn acceptor(cert: &Path, key: &Path) -> Result<TlsAcceptor, String> {
    let chain = certificates(cert)?;
    let key_der = private_key(key)?;
    let provider = Arc::new(ring::default_provider());
    provider
        .key_provider
        .load_private_key(key_der.clone_key())
        .map_err(|e| format!("--tls-key {}: not a usable private key: {e}", key.display()))?;
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS: {e}"))?
        .with_no_client_auth()
        .with_single_cert(chain, key_der)
        .map_err(|e| {
            format!(
                "--tls-cert {} and --tls-key {} do not make a usable pair: {}",
                cert.display(),
                key.display(),
                describe(&e)
            )
        })?;
    // The service speaks HTTP/1.1 only; say so to clients that offer h2.
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// The certificates in the PEM file at `path`, the server's own first.
fn certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let text = read(path, "--tls-cert")?;
    let chain = CertificateDer::pem_slice_iter(&text)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("--tls-cert {}: not valid PEM: {e}", path.display()))?;
    if chain.is_empty() {
        return Err(format!(
            "--tls-cert {}: no PEM certificate (-----BEGIN CERTIFICATE-----) in it",
            path.display()
        ));
    }
    Ok(chain)
}

/// The first private key in the PEM file at `path` (PKCS#8, PKCS#1 or SEC1).
fn private_key(path: &Path) -> Result<PrivateKeyDer<'static>, String> {
    let text = read(path, "--tls-key")?;
    PrivateKeyDer::from_pem_slice(&text).map_err(|e| match e {
        pem::Error::NoItemsFound => format!(
            "--tls-key {}: no PEM private key (-----BEGIN PRIVATE KEY-----, or an RSA or EC \
             one) in it",
            path.display()
        ),
        e => format!("--tls-key {}: not valid PEM: {e}", path.display()),
    })
}

fn read(path: &Path, flag: &str) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|e| format!("cannot read {flag} {}: {e}", path.display()))
}

/// rustls' own words, with a plainer one for the pair that does not match.
fn describe(error: &rustls::Error) -> String {
    match error {
        rustls::Error::InconsistentKeys(_) => {
            "the private key is not the certificate's (the first certificate in the file)".into()
        }
        other => other.to_string(),
    }
}

#[cfg(test)]
#[path = "tls_tests.rs"]
mod tests;
