//! Which webhook targets may be called. Loopback, private, link-local and other
//! non-public addresses are refused unless `--webhook-allow-private` is given; the check is
//! made on resolved addresses (at acquire, and again by the resolver that every delivery
//! connects through, so a DNS answer that changes cannot slip past it).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

use url::{Host, Url};

const LOOKUP_TIMEOUT: Duration = Duration::from_secs(2);

fn v4_forbidden(ip: Ipv4Addr) -> bool {
    let [a, b, ..] = ip.octets();
    ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local()
        || ip.is_unspecified()
        || ip.is_broadcast()
        || ip.is_multicast()
        || ip.is_documentation()
        || a == 0
        || (a == 100 && (64..128).contains(&b)) // shared address space (CGNAT)
        || (a == 198 && (b == 18 || b == 19)) // benchmarking
        || a >= 240 // reserved
}

fn v6_forbidden(ip: Ipv6Addr) -> bool {
    if let Some(v4) = ip.to_ipv4_mapped() {
        return v4_forbidden(v4);
    }
    let first = ip.segments()[0];
    ip.is_loopback()
        || ip.is_unspecified()
        || ip.is_multicast()
        || (first & 0xfe00) == 0xfc00 // unique local
        || (first & 0xffc0) == 0xfe80 // link-local
        || (first == 0x2001 && ip.segments()[1] == 0x0db8) // documentation
}

/// True for an address a webhook may not target without `--webhook-allow-private`.
pub fn forbidden(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4_forbidden(v4),
        IpAddr::V6(v6) => v6_forbidden(v6),
    }
}

/// Resolves `host:port`, refusing it if any address it resolves to is forbidden.
pub async fn resolve_allowed(
    host: &str,
    port: u16,
    allow_private: bool,
) -> Result<Vec<SocketAddr>, String> {
    let lookup = tokio::time::timeout(LOOKUP_TIMEOUT, tokio::net::lookup_host((host, port)))
        .await
        .map_err(|_| format!("resolving {host} timed out"))?
        .map_err(|e| format!("cannot resolve {host}: {e}"))?;
    let addresses: Vec<SocketAddr> = lookup.collect();
    if addresses.is_empty() {
        return Err(format!("{host} resolves to no address"));
    }
    if !allow_private {
        if let Some(bad) = addresses.iter().find(|a| forbidden(a.ip())) {
            return Err(format!(
                "{host} resolves to {}, a loopback, private or link-local address (allowed only with --webhook-allow-private)",
                bad.ip()
            ));
        }
    }
    Ok(addresses)
}

/// Checks a webhook URL's target, resolving its host name.
pub async fn check(url: &str, allow_private: bool) -> Result<(), String> {
    let url = Url::parse(url).map_err(|e| format!("notify_url is not a URL: {e}"))?;
    let port = url.port_or_known_default().unwrap_or(80);
    match url.host() {
        Some(Host::Ipv4(ip)) if !allow_private && v4_forbidden(ip) => {
            Err(format!("notify_url targets {ip}, a loopback, private or link-local address (allowed only with --webhook-allow-private)"))
        }
        Some(Host::Ipv6(ip)) if !allow_private && v6_forbidden(ip) => {
            Err(format!("notify_url targets {ip}, a loopback, private or link-local address (allowed only with --webhook-allow-private)"))
        }
        Some(Host::Ipv4(_)) | Some(Host::Ipv6(_)) => Ok(()),
        Some(Host::Domain(name)) => resolve_allowed(name, port, allow_private).await.map(|_| ()),
        None => Err("notify_url has no host".into()),
    }
}

/// The resolver deliveries connect through: it applies the same rule to every connection.
pub struct GuardedResolver {
    pub allow_private: bool,
}

impl reqwest::dns::Resolve for GuardedResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let allow_private = self.allow_private;
        let host = name.as_str().to_owned();
        Box::pin(async move {
            let addresses = resolve_allowed(&host, 0, allow_private)
                .await
                .map_err(|e| -> Box<dyn std::error::Error + Send + Sync> { e.into() })?;
            let addrs: reqwest::dns::Addrs = Box::new(addresses.into_iter());
            Ok(addrs)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn private_and_special_addresses_are_forbidden() {
        for bad in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "0.0.0.0",
            "100.64.0.1",
            "255.255.255.255",
            "::1",
            "::",
            "fe80::1",
            "fd00::1",
            "::ffff:10.0.0.1",
            "::ffff:127.0.0.1",
        ] {
            assert!(forbidden(bad.parse().unwrap()), "{bad}");
        }
        for good in [
            "93.184.216.34",
            "2606:2800:220:1:248:1893:25c8:1946",
            "8.8.8.8",
        ] {
            assert!(!forbidden(good.parse().unwrap()), "{good}");
        }
    }

    #[tokio::test]
    async fn literal_targets_are_refused_without_any_lookup() {
        for url in [
            "http://10.0.0.1/hook",
            "http://[::1]:9/x",
            "https://169.254.169.254/latest",
            "http://192.168.0.10/",
        ] {
            assert!(check(url, false).await.is_err(), "{url}");
            assert!(check(url, true).await.is_ok(), "{url}");
        }
        assert!(
            check("http://localhost:9/hook", false).await.is_err(),
            "localhost resolves to loopback"
        );
    }
}
