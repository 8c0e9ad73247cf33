//! Network address policy for fetching URLs on a user's behalf (server-side request forgery guard): which
//! resolved addresses a fetch may connect to. Every address a host name resolves to is classified, so a name
//! that resolves to an internal address (DNS rebinding) is refused like the address itself.
//!
//! Ranges: IANA IPv4 and IPv6 Special-Purpose Address Registries (RFC 6890 and its updates): RFC 1122
//! (this network, loopback), RFC 1918 (private), RFC 6598 (shared, carrier-grade NAT), RFC 3927 (IPv4
//! link-local), RFC 5737 and RFC 3849 (documentation), RFC 2544 (benchmarking), RFC 5771 (multicast),
//! RFC 1112 (reserved 240/4), RFC 4193 (unique-local), RFC 4291 (IPv6 loopback, link-local, multicast,
//! IPv4-mapped), RFC 6052 (NAT64), RFC 3056 (6to4), RFC 4380 (Teredo).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::Duration;

/// What kind of address an IP is, for the fetch policy. Only [`AddressClass::Global`] may be fetched without
/// an explicit allowance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddressClass {
    /// A public unicast address.
    Global,
    /// `0.0.0.0/8`, `::`.
    Unspecified,
    /// `127.0.0.0/8`, `::1`.
    Loopback,
    /// `10/8`, `172.16/12`, `192.168/16` (RFC 1918) and `100.64/10` (shared, RFC 6598).
    Private,
    /// `169.254/16` (cloud metadata services live here), `fe80::/10`.
    LinkLocal,
    /// `fc00::/7`.
    UniqueLocal,
    /// `224/4`, `ff00::/8`.
    Multicast,
    /// `255.255.255.255`.
    Broadcast,
    /// Documentation, benchmarking, protocol-assignment and reserved ranges, the deprecated IPv6 site-local
    /// and IPv4-compatible forms, Teredo and the discard prefix: not reachable public hosts.
    Reserved,
}

impl AddressClass {
    /// Whether a fetch may connect to it without an allowance.
    pub fn is_global(self) -> bool {
        self == AddressClass::Global
    }

    /// A short name for error messages (`loopback`, `private`, ...).
    pub fn name(self) -> &'static str {
        match self {
            AddressClass::Global => "global",
            AddressClass::Unspecified => "unspecified",
            AddressClass::Loopback => "loopback",
            AddressClass::Private => "private",
            AddressClass::LinkLocal => "link-local",
            AddressClass::UniqueLocal => "unique-local",
            AddressClass::Multicast => "multicast",
            AddressClass::Broadcast => "broadcast",
            AddressClass::Reserved => "reserved",
        }
    }
}

/// Classifies an IPv4 address.
pub fn classify_v4(ip: Ipv4Addr) -> AddressClass {
    let [a, b, c, _] = ip.octets();
    match (a, b, c) {
        (0, _, _) => AddressClass::Unspecified,
        (127, _, _) => AddressClass::Loopback,
        (10, _, _) => AddressClass::Private,
        (172, 16..=31, _) => AddressClass::Private,
        (192, 168, _) => AddressClass::Private,
        (100, 64..=127, _) => AddressClass::Private,
        (169, 254, _) => AddressClass::LinkLocal,
        (224..=239, _, _) => AddressClass::Multicast,
        (255, 255, 255) if ip == Ipv4Addr::BROADCAST => AddressClass::Broadcast,
        (240..=255, _, _) => AddressClass::Reserved,
        (192, 0, 0) | (192, 0, 2) | (198, 51, 100) | (203, 0, 113) | (198, 18..=19, _) => AddressClass::Reserved,
        _ => AddressClass::Global,
    }
}

/// Classifies an IPv6 address; addresses that embed an IPv4 address (IPv4-mapped `::ffff:a.b.c.d`, NAT64
/// `64:ff9b::/96`, 6to4 `2002::/16`) are classified by the embedded address.
pub fn classify_v6(ip: Ipv6Addr) -> AddressClass {
    let s = ip.segments();
    if ip.is_unspecified() {
        return AddressClass::Unspecified;
    }
    if ip.is_loopback() {
        return AddressClass::Loopback;
    }
    if let Some(v4) = ip.to_ipv4_mapped() {
        return classify_v4(v4);
    }
    let embedded = |hi: u16, lo: u16| Ipv4Addr::new((hi >> 8) as u8, hi as u8, (lo >> 8) as u8, lo as u8);
    match s[0] {
        0x0064 if s[1] == 0xff9b && s[2..6] == [0, 0, 0, 0] => classify_v4(embedded(s[6], s[7])),
        0x2002 => classify_v4(embedded(s[1], s[2])),
        // IPv4-compatible (::a.b.c.d, deprecated) and other addresses in ::/96.
        0 if s[1..6] == [0, 0, 0, 0, 0] => AddressClass::Reserved,
        0x0100 if s[1..4] == [0, 0, 0] => AddressClass::Reserved,
        0x2001 if s[1] == 0 || s[1] == 0x0db8 => AddressClass::Reserved,
        x if x & 0xfe00 == 0xfc00 => AddressClass::UniqueLocal,
        x if x & 0xffc0 == 0xfe80 => AddressClass::LinkLocal,
        x if x & 0xffc0 == 0xfec0 => AddressClass::Reserved,
        x if x & 0xff00 == 0xff00 => AddressClass::Multicast,
        _ => AddressClass::Global,
    }
}

/// Classifies an address.
pub fn classify(ip: IpAddr) -> AddressClass {
    match ip {
        IpAddr::V4(v4) => classify_v4(v4),
        IpAddr::V6(v6) => classify_v6(v6),
    }
}

/// What a fetch may do (`StoreConfig::url_policy`).
#[derive(Debug, Clone)]
pub struct UrlPolicy {
    /// Hosts (names or IP literals, compared without case and without IPv6 brackets) that may resolve to
    /// non-public addresses (`--allow-url-host`). Empty by default: only public addresses are fetched.
    pub allow_hosts: Vec<String>,
    /// Time to establish each connection (default 10 s).
    pub connect_timeout: Duration,
    /// Time for the whole fetch, redirects and body included (default 30 s).
    pub total_timeout: Duration,
    /// Largest body accepted, bytes (default 64 MiB, the document cap).
    pub max_bytes: u64,
    /// Redirects followed (default 5); one more is refused.
    pub max_redirects: u32,
}

impl Default for UrlPolicy {
    fn default() -> Self {
        UrlPolicy {
            allow_hosts: Vec::new(),
            connect_timeout: Duration::from_secs(10),
            total_timeout: Duration::from_secs(30),
            max_bytes: crate::model::MAX_SOURCE_BYTES as u64,
            max_redirects: 5,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use AddressClass::*;

    #[test]
    fn literal_addresses_are_classified() {
        for (ip, want) in [
            ("8.8.8.8", Global),
            ("1.1.1.1", Global),
            ("93.184.216.34", Global),
            ("0.0.0.0", Unspecified),
            ("0.1.2.3", Unspecified),
            ("127.0.0.1", Loopback),
            ("127.1.2.3", Loopback),
            ("10.0.0.1", Private),
            ("172.16.0.1", Private),
            ("172.31.255.255", Private),
            ("172.32.0.1", Global),
            ("192.168.1.1", Private),
            ("100.64.0.1", Private),
            ("100.128.0.1", Global),
            ("169.254.169.254", LinkLocal),
            ("224.0.0.1", Multicast),
            ("239.255.255.250", Multicast),
            ("255.255.255.255", Broadcast),
            ("240.0.0.1", Reserved),
            ("192.0.2.10", Reserved),
            ("198.51.100.7", Reserved),
            ("203.0.113.9", Reserved),
            ("198.18.0.1", Reserved),
            ("192.0.0.8", Reserved),
            ("::", Unspecified),
            ("::1", Loopback),
            ("fd00::1", UniqueLocal),
            ("fc00::1", UniqueLocal),
            ("fe80::1", LinkLocal),
            ("febf::1", LinkLocal),
            ("fec0::1", Reserved),
            ("ff02::1", Multicast),
            ("::ffff:10.0.0.1", Private),
            ("::ffff:127.0.0.1", Loopback),
            ("::ffff:169.254.169.254", LinkLocal),
            ("::ffff:8.8.8.8", Global),
            ("::127.0.0.1", Reserved),
            ("64:ff9b::10.0.0.1", Private),
            ("64:ff9b::8.8.8.8", Global),
            ("2002:7f00:1::1", Loopback),
            ("2002:0808:0808::1", Global),
            ("2001::1", Reserved),
            ("2001:db8::1", Reserved),
            ("100::1", Reserved),
            ("2606:4700:4700::1111", Global),
            ("2a00:1450:4001:80b::200e", Global),
        ] {
            let addr: IpAddr = ip.parse().unwrap();
            assert_eq!(classify(addr), want, "{ip}");
            assert_eq!(classify(addr).is_global(), want == Global, "{ip}");
        }
    }
}
