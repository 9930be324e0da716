//! Which webhook targets may be called. This module owns the SSRF rule: loopback, private,
//! link-local, and every other special-purpose address that is not globally reachable
//! (IANA's IPv4 and IPv6 special-purpose registries; in IPv6, everything outside 2000::/3)
//! is refused unless `--webhook-allow-private` is given. Ranges that embed an IPv4 address
//! (IPv4-mapped, IPv4-compatible, NAT64, 6to4) are refused whole: judging the embedded
//! address would trust whatever translator sits on the path.
//!
//! The check is made on resolved addresses (at acquire, and again by the resolver that every
//! delivery connects through, so a DNS answer that changes cannot slip past it). Refusals
//! name only the host the caller sent, never a resolved address nor the resolver's error.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

use url::{Host, Url};

const LOOKUP_TIMEOUT: Duration = Duration::from_secs(2);

/// IPv4 ranges refused: those of IANA's IPv4 special-purpose registry that are not globally
/// reachable, plus multicast, limited broadcast and the reserved 240/4. 192.0.0.0/24 is
/// refused whole (its two anycast /32s are no webhook receivers). The registry's globally
/// reachable entries (AS112 192.31.196.0/24 and 192.175.48.0/24, AMT 192.52.193.0/24) are
/// ordinary destinations and stay allowed.
const V4_REFUSED: [(Ipv4Addr, u8); 15] = [
    (Ipv4Addr::new(0, 0, 0, 0), 8),       // "this network"
    (Ipv4Addr::new(10, 0, 0, 0), 8),      // private
    (Ipv4Addr::new(100, 64, 0, 0), 10),   // shared address space (CGNAT)
    (Ipv4Addr::new(127, 0, 0, 0), 8),     // loopback
    (Ipv4Addr::new(169, 254, 0, 0), 16),  // link-local (cloud metadata lives here)
    (Ipv4Addr::new(172, 16, 0, 0), 12),   // private
    (Ipv4Addr::new(192, 0, 0, 0), 24),    // IETF protocol assignments
    (Ipv4Addr::new(192, 0, 2, 0), 24),    // documentation (TEST-NET-1)
    (Ipv4Addr::new(192, 88, 99, 0), 24),  // deprecated 6to4 relay anycast
    (Ipv4Addr::new(192, 168, 0, 0), 16),  // private
    (Ipv4Addr::new(198, 18, 0, 0), 15),   // benchmarking
    (Ipv4Addr::new(198, 51, 100, 0), 24), // documentation (TEST-NET-2)
    (Ipv4Addr::new(203, 0, 113, 0), 24),  // documentation (TEST-NET-3)
    (Ipv4Addr::new(224, 0, 0, 0), 4),     // multicast
    (Ipv4Addr::new(240, 0, 0, 0), 4),     // reserved, and 255.255.255.255
];

/// Ranges refused inside 2000::/3, the only IPv6 space IANA allocates for global unicast
/// (everything outside it is refused by `v6_forbidden`: loopback, unspecified, IPv4-mapped,
/// IPv4-compatible, NAT64 64:ff9b::/96 and 64:ff9b:1::/48, discard-only 100::/64, unique
/// local, link-local, site-local and multicast all lie outside). Prefixes that embed an IPv4
/// address (6to4) are refused whole rather than judged by the embedded address.
const V6_REFUSED: [(Ipv6Addr, u8); 4] = [
    // IETF protocol assignments, whole: Teredo 2001::/32, benchmarking, ORCHID and
    // ORCHIDv2, DETs, and the anycast services (PCP, TURN, AMT, AS112), none a receiver.
    (Ipv6Addr::new(0x2001, 0, 0, 0, 0, 0, 0, 0), 23),
    (Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 0), 32), // documentation
    (Ipv6Addr::new(0x2002, 0, 0, 0, 0, 0, 0, 0), 16),     // 6to4
    (Ipv6Addr::new(0x3fff, 0, 0, 0, 0, 0, 0, 0), 20),     // documentation
];

fn v4_forbidden(ip: Ipv4Addr) -> bool {
    let ip = u32::from(ip);
    V4_REFUSED.iter().any(|&(net, len)| {
        let mask = u32::MAX.checked_shl(32 - u32::from(len)).unwrap_or(0);
        ip & mask == u32::from(net)
    })
}

fn v6_forbidden(ip: Ipv6Addr) -> bool {
    let ip = u128::from(ip);
    let in_prefix = |net: Ipv6Addr, len: u8| {
        let mask = u128::MAX.checked_shl(128 - u32::from(len)).unwrap_or(0);
        ip & mask == u128::from(net)
    };
    let global_unicast = in_prefix(Ipv6Addr::new(0x2000, 0, 0, 0, 0, 0, 0, 0), 3);
    !global_unicast || V6_REFUSED.iter().any(|&(net, len)| in_prefix(net, len))
}

/// True for an address a webhook may not target without `--webhook-allow-private`.
pub fn forbidden(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4_forbidden(v4),
        IpAddr::V6(v6) => v6_forbidden(v6),
    }
}

/// The refusal. It names only what the caller sent, never the address a name resolved to,
/// so that callers cannot use refusals to map the service's internal DNS.
fn refused(host: &str) -> String {
    format!(
        "notify_url host {host} is, or resolves to, a loopback, private or otherwise non-public \
         address (allowed only with --webhook-allow-private)"
    )
}

/// Resolves `host:port`, refusing it if any address it resolves to is forbidden. Errors
/// name the host only: neither resolved addresses nor the resolver's own error text (which
/// can describe the service's network) reach the caller.
pub async fn resolve_allowed(
    host: &str,
    port: u16,
    allow_private: bool,
) -> Result<Vec<SocketAddr>, String> {
    let cannot = || format!("notify_url host {host}: cannot resolve host");
    let addresses: Vec<SocketAddr> =
        tokio::time::timeout(LOOKUP_TIMEOUT, tokio::net::lookup_host((host, port)))
            .await
            .map_err(|_| cannot())?
            .map_err(|_| cannot())?
            .collect();
    if addresses.is_empty() {
        return Err(cannot());
    }
    if !allow_private && addresses.iter().any(|a| forbidden(a.ip())) {
        return Err(refused(host));
    }
    Ok(addresses)
}

/// Checks a webhook URL's target, resolving its host name.
pub async fn check(url: &str, allow_private: bool) -> Result<(), String> {
    let url = Url::parse(url).map_err(|e| format!("notify_url is not a URL: {e}"))?;
    let port = url.port_or_known_default().unwrap_or(80);
    let literal = match url.host() {
        Some(Host::Ipv4(ip)) => IpAddr::V4(ip),
        Some(Host::Ipv6(ip)) => IpAddr::V6(ip),
        Some(Host::Domain(name)) => {
            return resolve_allowed(name, port, allow_private).await.map(|_| ())
        }
        None => return Err("notify_url has no host".into()),
    };
    if !allow_private && forbidden(literal) {
        return Err(refused(url.host_str().unwrap_or_default()));
    }
    Ok(())
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
#[path = "target_tests.rs"]
mod tests;
