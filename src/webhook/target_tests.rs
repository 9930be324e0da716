//! The SSRF rule, range by range, and what a refusal says.

use super::*;

fn refused_here(ip: &str) -> bool {
    forbidden(ip.parse().unwrap())
}

/// Each refused range: addresses at (or near) both ends inside it, and public addresses
/// just outside it.
const V4_CASES: &[(&str, &[&str], &[&str])] = &[
    ("0.0.0.0/8", &["0.0.0.0", "0.255.255.255"], &["1.0.0.0"]),
    (
        "10.0.0.0/8",
        &["10.0.0.0", "10.255.255.255"],
        &["9.255.255.255", "11.0.0.0"],
    ),
    (
        "100.64.0.0/10",
        &["100.64.0.0", "100.127.255.255"],
        &["100.63.255.255", "100.128.0.0"],
    ),
    (
        "127.0.0.0/8",
        &["127.0.0.0", "127.255.255.255"],
        &["126.255.255.255", "128.0.0.0"],
    ),
    (
        "169.254.0.0/16",
        &["169.254.0.0", "169.254.169.254", "169.254.255.255"],
        &["169.253.255.255", "169.255.0.0"],
    ),
    (
        "172.16.0.0/12",
        &["172.16.0.0", "172.31.255.255"],
        &["172.15.255.255", "172.32.0.0"],
    ),
    (
        "192.0.0.0/24",
        &["192.0.0.0", "192.0.0.9", "192.0.0.170", "192.0.0.255"],
        &["191.255.255.255", "192.0.1.0"],
    ),
    (
        "192.0.2.0/24",
        &["192.0.2.0", "192.0.2.255"],
        &["192.0.1.255", "192.0.3.0"],
    ),
    (
        "192.88.99.0/24",
        &["192.88.99.0", "192.88.99.255"],
        &["192.88.98.255", "192.88.100.0"],
    ),
    (
        "192.168.0.0/16",
        &["192.168.0.0", "192.168.255.255"],
        &["192.167.255.255", "192.169.0.0"],
    ),
    (
        "198.18.0.0/15",
        &["198.18.0.0", "198.19.255.255"],
        &["198.17.255.255", "198.20.0.0"],
    ),
    (
        "198.51.100.0/24",
        &["198.51.100.0", "198.51.100.255"],
        &["198.51.99.255", "198.51.101.0"],
    ),
    (
        "203.0.113.0/24",
        &["203.0.113.0", "203.0.113.255"],
        &["203.0.112.255", "203.0.114.0"],
    ),
    (
        "224.0.0.0/4",
        &["224.0.0.0", "239.255.255.255"],
        &["223.255.255.255"],
    ),
    (
        "240.0.0.0/4",
        &["240.0.0.0", "255.255.255.254", "255.255.255.255"],
        &["223.255.255.255"],
    ),
    // Globally reachable special-purpose ranges are ordinary destinations.
    (
        "AS112, AMT",
        &[],
        &["192.31.196.1", "192.52.193.1", "192.175.48.1", "8.8.8.8"],
    ),
];

const V6_CASES: &[(&str, &[&str], &[&str])] = &[
    ("::/128, ::1/128", &["::", "::1"], &["2606:4700:4700::1111"]),
    (
        "IPv4-compatible ::/96",
        &["::0.0.0.2", "::8.8.8.8", "::255.255.255.255"],
        &["2606:4700:4700::1111"],
    ),
    (
        "IPv4-mapped ::ffff:0:0/96",
        &[
            "::ffff:0.0.0.0",
            "::ffff:8.8.8.8",
            "::ffff:10.0.0.1",
            "::ffff:255.255.255.255",
        ],
        &["2606:4700:4700::1111"],
    ),
    (
        "NAT64 64:ff9b::/96",
        &["64:ff9b::", "64:ff9b::8.8.8.8", "64:ff9b::ffff:ffff"],
        &["2001:200::"],
    ),
    (
        "local NAT64 64:ff9b:1::/48",
        &["64:ff9b:1::", "64:ff9b:1:ffff:ffff:ffff:ffff:ffff"],
        &["2001:200::"],
    ),
    (
        "discard-only 100::/64",
        &["100::", "100::ffff:ffff:ffff:ffff", "100:0:0:1::"],
        &["2001:200::"],
    ),
    (
        "unique local fc00::/7",
        &[
            "fc00::",
            "fd00::1",
            "fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
        ],
        &["2a00:1450:4001::1"],
    ),
    (
        "link-local fe80::/10",
        &[
            "fe80::",
            "fe80::1",
            "febf:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
        ],
        &["2a00:1450:4001::1"],
    ),
    (
        "site-local fec0::/10",
        &["fec0::", "feff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"],
        &["2a00:1450:4001::1"],
    ),
    (
        "multicast ff00::/8",
        &[
            "ff00::",
            "ff02::1",
            "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
        ],
        &["2a00:1450:4001::1"],
    ),
    (
        "outside 2000::/3",
        &[
            "1fff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
            "4000::",
            "5f00::1",
        ],
        &["2000::", "3ffe:ffff:ffff:ffff:ffff:ffff:ffff:ffff"],
    ),
    (
        "IETF assignments 2001::/23",
        &[
            "2001::",
            "2001:0:4136:e378:8000:63bf:3fff:fdd2",
            "2001:1::1",
            "2001:2::1",
            "2001:3::1",
            "2001:4:112::1",
            "2001:10::1",
            "2001:20::1",
            "2001:30::1",
            "2001:1ff:ffff:ffff:ffff:ffff:ffff:ffff",
        ],
        &["2001:200::", "2000:ffff:ffff:ffff:ffff:ffff:ffff:ffff"],
    ),
    (
        "documentation 2001:db8::/32",
        &["2001:db8::", "2001:db8:ffff:ffff:ffff:ffff:ffff:ffff"],
        &["2001:db7:ffff:ffff:ffff:ffff:ffff:ffff", "2001:db9::"],
    ),
    (
        "6to4 2002::/16",
        &[
            "2002::",
            "2002:c000:204::1",
            "2002:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
        ],
        &["2001:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "2003::1"],
    ),
    (
        "documentation 3fff::/20",
        &["3fff::", "3fff:fff:ffff:ffff:ffff:ffff:ffff:ffff"],
        &["3fff:1000::", "3ffe:ffff:ffff:ffff:ffff:ffff:ffff:ffff"],
    ),
    (
        "public",
        &[],
        &["2606:2800:220:1:248:1893:25c8:1946", "2620:4f:8000::1"],
    ),
];

#[test]
fn every_refused_range_is_refused_to_its_edges_and_no_further() {
    for (range, inside, outside) in V4_CASES.iter().chain(V6_CASES) {
        for ip in *inside {
            assert!(refused_here(ip), "{ip} is in {range}");
        }
        for ip in *outside {
            assert!(!refused_here(ip), "{ip} is outside {range}");
        }
    }
}

#[tokio::test]
async fn literal_targets_are_refused_without_any_lookup() {
    for url in [
        "http://10.0.0.1/hook",
        "http://[::1]:9/x",
        "https://169.254.169.254/latest",
        "http://192.168.0.10/",
        "http://[64:ff9b::a9fe:a9fe]/",
        "http://[2002:a9fe:a9fe::1]/",
        "http://[::ffff:169.254.169.254]/",
        "http://[fec0::1]/",
        "http://198.18.0.1/",
    ] {
        assert!(check(url, false).await.is_err(), "{url}");
        assert!(check(url, true).await.is_ok(), "{url}");
    }
}

#[tokio::test]
async fn a_refusal_names_the_callers_host_never_the_resolved_address() {
    let why = check("http://localhost:9/hook", false).await.unwrap_err();
    assert_eq!(why, refused("localhost"));
    assert!(!why.contains("127.0.0.1") && !why.contains("::1"), "{why}");
    let literal = check("http://127.0.0.2:9/hook", false).await.unwrap_err();
    assert_eq!(
        literal,
        refused("127.0.0.2"),
        "the same message for literals"
    );
    assert!(literal.contains("--webhook-allow-private"));
}
