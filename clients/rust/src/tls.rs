//! HTTPS on the client side: the reqwest client a [`Client`](crate::Client) calls with, made
//! to trust a private CA when asked, and the failures that TLS itself causes (a certificate
//! that is not trusted, a peer that does not speak TLS), which no retry can mend.

use std::path::Path;
use std::time::Duration;

use crate::call::describe;
use crate::client::Client;
use crate::error::Error;

/// How long opening a connection (TCP and the TLS handshake) may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

impl Client {
    /// Trusts the CA certificates in `pem` (PEM text: one or more `BEGIN CERTIFICATE`
    /// blocks), and only them, for the service's certificate, as `curl --cacert` does.
    /// Replaces a client given to [`Client::http_client`]. An `Err` is `InvalidArgument`.
    ///
    /// ```no_run
    /// # fn run() -> Result<(), lockwarden_client::Error> {
    /// let client = lockwarden_client::Client::new("https://locks.internal:8443")
    ///     .ca_file("/etc/lockwarden/ca.pem")?
    ///     .token("secret");
    /// # Ok(())
    /// # }
    /// ```
    pub fn ca_pem(self, pem: impl AsRef<[u8]>) -> Result<Client, Error> {
        let roots = ca_certificates(pem.as_ref(), "the CA PEM")?;
        let http = http_client(Some(roots))?;
        Ok(self.http_client(http))
    }

    /// [`Client::ca_pem`] with the PEM read from the file at `path`.
    pub fn ca_file(self, path: impl AsRef<Path>) -> Result<Client, Error> {
        let path = path.as_ref();
        let pem = std::fs::read(path).map_err(|e| {
            Error::InvalidArgument(format!("cannot read the CA file {}: {e}", path.display()))
        })?;
        let roots = ca_certificates(&pem, &format!("the CA file {}", path.display()))?;
        let http = http_client(Some(roots))?;
        Ok(self.http_client(http))
    }
}

/// A failure to get an answer: `Tls` when TLS itself failed, else `Unreachable`.
pub(crate) fn transport(error: reqwest::Error) -> Error {
    if is_tls_failure(&error) {
        Error::Tls(describe(error))
    } else {
        Error::Unreachable(describe(error))
    }
}

/// The reqwest client: with `roots`, it trusts those CA certificates alone instead of the
/// built-in public roots.
pub(crate) fn http_client(
    roots: Option<Vec<reqwest::Certificate>>,
) -> Result<reqwest::Client, Error> {
    let mut builder = reqwest::Client::builder().connect_timeout(CONNECT_TIMEOUT);
    if let Some(roots) = roots {
        builder = builder.tls_built_in_root_certs(false);
        for root in roots {
            builder = builder.add_root_certificate(root);
        }
    }
    builder
        .build()
        .map_err(|e| Error::InvalidArgument(format!("the CA certificates: {}", describe(e))))
}

/// The CA certificates in `pem` (from `source`, which the errors name).
pub(crate) fn ca_certificates(
    pem: &[u8],
    source: &str,
) -> Result<Vec<reqwest::Certificate>, Error> {
    let roots = reqwest::Certificate::from_pem_bundle(pem)
        .map_err(|e| Error::InvalidArgument(format!("{source}: not valid PEM: {e}")))?;
    if roots.is_empty() {
        return Err(Error::InvalidArgument(format!(
            "{source}: no PEM certificate (-----BEGIN CERTIFICATE-----) in it"
        )));
    }
    Ok(roots)
}

/// Whether `error` came from TLS itself (rustls), somewhere in its chain of causes, rather
/// than from the network.
fn is_tls_failure(error: &reqwest::Error) -> bool {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(current) = cause {
        if current.is::<rustls::Error>() {
            return true;
        }
        // An io::Error's `source` skips the error it wraps (rustls' is wrapped in two).
        cause = match current.downcast_ref::<std::io::Error>() {
            Some(io) => io.get_ref().map(|inner| inner as _),
            None => current.source(),
        };
    }
    false
}
