//! Which address an order comes from, for the gateway's per-IP limits: the TCP peer, or, only
//! when the peer is a trusted proxy (`--trusted-proxy`), the client its `X-Forwarded-For`
//! names.
//!
//! The header is read from the right: each proxy appends the address it got the request from,
//! so the rightmost address that is not one of our proxies is the client; anything to its left
//! was written by that client and may be forged. Without trusted proxies the header is never
//! read (the default, and the purchase path's cheapest).

use axum::http::HeaderMap;
use ipnet::IpNet;
use std::net::{IpAddr, SocketAddr};

/// The proxies whose `X-Forwarded-For` is believed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TrustedProxies(Vec<IpNet>);

impl TrustedProxies {
    /// These networks (a single address is a /32 or /128).
    pub fn new(nets: Vec<IpNet>) -> Self {
        TrustedProxies(nets)
    }

    /// Parses `--trusted-proxy`: an address (`127.0.0.1`, `::1`) or a network (`10.0.0.0/8`).
    pub fn parse(s: &str) -> Result<IpNet, String> {
        let s = s.trim();
        s.parse::<IpNet>()
            .or_else(|_| s.parse::<IpAddr>().map(IpNet::from))
            .map_err(|_| format!("{s:?} is neither an IP address nor a network like 10.0.0.0/8"))
    }

    /// The networks.
    pub fn nets(&self) -> &[IpNet] {
        &self.0
    }

    /// Whether `ip` is one of the trusted proxies.
    pub fn trusts(&self, ip: IpAddr) -> bool {
        let ip = ip.to_canonical();
        self.0.iter().any(|n| n.contains(&ip))
    }

    /// The client's address: the peer's, unless the peer is trusted and `X-Forwarded-For`
    /// names one (then the rightmost address that is not a trusted proxy; an entry that is not
    /// an address ends the walk at the last good one).
    pub fn client_ip(&self, headers: &HeaderMap, peer: Option<SocketAddr>) -> String {
        let Some(peer) = peer.map(|p| p.ip().to_canonical()) else {
            return String::new();
        };
        if self.0.is_empty() || !self.trusts(peer) {
            return text(peer);
        }
        let hops: Vec<&str> = headers
            .get_all("x-forwarded-for")
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .collect();
        let mut client = peer;
        for hop in hops.iter().rev() {
            let Some(ip) = parse_hop(hop) else { break };
            client = ip;
            if !self.trusts(ip) {
                break;
            }
        }
        text(client)
    }
}

/// An address as text, as `Display` writes it: an IPv4 address by hand, since the formatter's
/// way (padding support, a stack buffer, then a copy) was ~1 % of the shop's CPU per order.
fn text(ip: IpAddr) -> String {
    let IpAddr::V4(v4) = ip else {
        return ip.to_string();
    };
    let mut s = String::with_capacity(15);
    for (i, octet) in v4.octets().into_iter().enumerate() {
        if i > 0 {
            s.push('.');
        }
        if octet >= 100 {
            s.push(char::from(b'0' + octet / 100));
        }
        if octet >= 10 {
            s.push(char::from(b'0' + octet / 10 % 10));
        }
        s.push(char::from(b'0' + octet % 10));
    }
    s
}

/// One `X-Forwarded-For` entry: an address, possibly with a port (`1.2.3.4:80`, `[::1]:80`).
fn parse_hop(hop: &str) -> Option<IpAddr> {
    let hop = hop.trim();
    hop.parse::<IpAddr>()
        .ok()
        .or_else(|| hop.parse::<SocketAddr>().ok().map(|s| s.ip()))
        .map(|ip| ip.to_canonical())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_is_written_as_display_writes_it() {
        for ip in [
            "0.0.0.0",
            "127.0.0.1",
            "10.100.9.255",
            "192.168.10.99",
            "1.20.100.200",
            "::1",
            "2001:db8::8a2e:370:7334",
        ] {
            let ip: IpAddr = ip.parse().unwrap();
            assert_eq!(text(ip), ip.to_string());
        }
        for n in [0u32, 1, 9, 10, 99, 100, 255, 256, 0x0a0b0c0d, u32::MAX] {
            let ip = IpAddr::V4(std::net::Ipv4Addr::from(n));
            assert_eq!(text(ip), ip.to_string());
        }
    }

    fn proxies(nets: &[&str]) -> TrustedProxies {
        TrustedProxies::new(
            nets.iter()
                .map(|n| TrustedProxies::parse(n).unwrap())
                .collect(),
        )
    }

    fn headers(xff: &[&str]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for v in xff {
            h.append("x-forwarded-for", v.parse().unwrap());
        }
        h
    }

    fn peer(ip: &str) -> Option<SocketAddr> {
        Some(SocketAddr::new(ip.parse().unwrap(), 40000))
    }

    #[test]
    fn without_trusted_proxies_the_header_is_ignored() {
        let none = TrustedProxies::default();
        assert_eq!(
            none.client_ip(&headers(&["1.2.3.4"]), peer("127.0.0.1")),
            "127.0.0.1"
        );
    }

    #[test]
    fn an_untrusted_peer_cannot_name_another_address() {
        let p = proxies(&["10.0.0.1"]);
        assert_eq!(
            p.client_ip(&headers(&["1.2.3.4"]), peer("192.0.2.7")),
            "192.0.2.7"
        );
    }

    #[test]
    fn the_rightmost_untrusted_hop_is_the_client() {
        let p = proxies(&["10.0.0.0/8", "127.0.0.1"]);
        // The client forged "6.6.6.6"; our proxies appended 203.0.113.5 then 10.1.1.1.
        let h = headers(&["6.6.6.6, 203.0.113.5", "10.1.1.1"]);
        assert_eq!(p.client_ip(&h, peer("127.0.0.1")), "203.0.113.5");
        // Only proxies in the chain: the leftmost is the best there is.
        assert_eq!(
            p.client_ip(&headers(&["10.2.2.2"]), peer("127.0.0.1")),
            "10.2.2.2"
        );
        // Garbage stops the walk at the last address we can stand behind.
        assert_eq!(
            p.client_ip(&headers(&["1.1.1.1, junk"]), peer("127.0.0.1")),
            "127.0.0.1"
        );
        assert_eq!(
            p.client_ip(&headers(&["[2001:db8::1]:443"]), peer("127.0.0.1")),
            "2001:db8::1"
        );
    }

    #[test]
    fn addresses_and_networks_parse_and_mapped_peers_match() {
        assert!(TrustedProxies::parse("::1").is_ok());
        assert!(TrustedProxies::parse("10.0.0.0/8").is_ok());
        assert!(TrustedProxies::parse("localhost").is_err());
        let p = proxies(&["127.0.0.1"]);
        assert!(p.trusts("::ffff:127.0.0.1".parse().unwrap()));
    }
}
