//! Hosts of a test's own on this machine: Linux network namespaces, each with its own address
//! on a bridge and its own temporary directory. The bridge's address, in the machine's own
//! namespace, is where the test serves its shop: the only address the hosts can reach besides
//! each other, and no packet leaves the machine.
//!
//! Only root can make them. Where they cannot be made (not root, no `ip`, no permission) a
//! test using them skips loudly, and fails under CI (env CI set), like `managed::installed`.
//! Everything is named by the test process (`oversell-t-ns-<host>-<pid>-<secs>-<random>-<i>`,
//! interfaces `ovsb`/`ovsh` + the random part), removed when the [`Hosts`] is dropped (a test
//! that fails too), and what a killed run left is swept by a later one.

use oversell::testing::services::leftovers;
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::process::Command;

/// The start of every namespace the tests make.
const NETNS: &str = "oversell-t-ns-";

/// One host: a network namespace with one address, and a directory of its own.
pub struct Host {
    pub netns: String,
    pub addr: Ipv4Addr,
    pub dir: tempfile::TempDir,
}

impl Host {
    /// `program args...` run on this host (`ip netns exec`, which execs it: killing the child
    /// kills the program).
    pub fn command(&self, program: &str) -> tokio::process::Command {
        let mut c = tokio::process::Command::new(ip_binary().expect("ip was found"));
        c.args(["netns", "exec", &self.netns, program])
            .current_dir(self.dir.path())
            .kill_on_drop(true);
        c
    }
}

/// N hosts on one bridge; removed when dropped.
pub struct Hosts {
    /// The bridge's address in the machine's namespace (where the test serves the shop).
    pub gateway: Ipv4Addr,
    /// The hosts' network, `a.b.c.0/24`.
    pub subnet: String,
    pub hosts: Vec<Host>,
    bridge: Option<String>,
    /// Namespaces and host-side veths made so far (removed on drop, in reverse).
    netns_made: Vec<String>,
    links_made: Vec<String>,
}

impl Drop for Hosts {
    fn drop(&mut self) {
        // Deleting a namespace deletes the veth end inside it, and with it its peer.
        for ns in self.netns_made.drain(..).rev() {
            let _ = ip(&["netns", "del", &ns]);
        }
        for link in self.links_made.drain(..).rev() {
            let _ = ip(&["link", "del", &link]);
        }
        if let Some(b) = self.bridge.take() {
            let _ = ip(&["link", "del", &b]);
        }
    }
}

/// The `ip` binary, on PATH or in the usual sbin folders.
fn ip_binary() -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin".into(), "/sbin".into(), "/usr/bin".into()])
        .map(|d| d.join("ip"))
        .find(|p| p.is_file())
}

/// Runs `ip args...`; its stderr when it fails.
fn ip(args: &[&str]) -> Result<String, String> {
    let exe = ip_binary().ok_or("no `ip` (iproute2) on this machine")?;
    let out = Command::new(exe)
        .args(args)
        .output()
        .map_err(|e| format!("ip {}: {e}", args.join(" ")))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Skips loudly (or, under CI, fails) when namespaces cannot be made here.
fn unavailable(why: &str) -> Option<Hosts> {
    let ci = std::env::var_os("CI").is_some_and(|v| !v.is_empty());
    assert!(
        !ci,
        "CI is set and this machine cannot make network namespaces ({why}): the separate-host \
         shard test would pass without testing (run the tests as root with iproute2 installed)"
    );
    eprintln!("\n*** SKIPPED separate hosts (network namespaces): {why} ***\n");
    None
}

/// The random part of a namespace name made by [`Hosts::make`] (its interfaces' suffix).
fn random_part(netns: &str) -> Option<&str> {
    netns.strip_prefix(NETNS)?.split('-').nth(3)
}

/// Deletes the namespaces (and bridges) a killed earlier run of this host left.
fn sweep_stale() {
    let Ok(list) = ip(&["netns", "list"]) else {
        return;
    };
    for name in list.lines().filter_map(|l| l.split_whitespace().next()) {
        if !leftovers::owner_of(name, NETNS, '-').is_some_and(|o| o.is_stale()) {
            continue;
        }
        let _ = ip(&["netns", "del", name]);
        if let Some(r) = random_part(name) {
            let _ = ip(&["link", "del", &format!("ovsb{}", &r[..7])]);
        }
    }
}

/// A /24 of 10.0.0.0/8 that no address or route of this machine touches.
fn free_subnet() -> [u8; 3] {
    let used = format!(
        "{}{}",
        ip(&["-4", "-o", "addr"]).unwrap_or_default(),
        ip(&["-4", "route"]).unwrap_or_default()
    );
    for _ in 0..64 {
        let net = [10, rand::random_range(100..=250), rand::random::<u8>()];
        let start = format!("{}.{}.{}.", net[0], net[1], net[2]);
        if !used.contains(&start) && !used.contains(&format!("{}.{}.0.0/16", net[0], net[1])) {
            return net;
        }
    }
    panic!("no free /24 in 10.100-250.x.0 on this machine:\n{used}");
}

impl Hosts {
    /// `n` hosts on a fresh bridge, or `None` (after a loud SKIPPED line) where namespaces
    /// cannot be made and CI is not set.
    pub fn make(n: usize) -> Option<Hosts> {
        if ip_binary().is_none() {
            return unavailable("no `ip` (iproute2) found");
        }
        if !nix::unistd::geteuid().is_root() {
            return unavailable("not root");
        }
        sweep_stale();
        let name = leftovers::owned_name(NETNS, '-');
        let id = random_part(&name).expect("an owned name")[..7].to_string();
        let net = free_subnet();
        let at = |host: u8| Ipv4Addr::new(net[0], net[1], net[2], host);
        let mut hosts = Hosts {
            gateway: at(1),
            subnet: format!("{}/24", at(0)),
            hosts: Vec::new(),
            bridge: None,
            netns_made: Vec::new(),
            links_made: Vec::new(),
        };
        // The first namespace tells whether this machine lets us make them at all.
        let first = format!("{name}-0");
        if let Err(e) = ip(&["netns", "add", &first]) {
            return unavailable(&e);
        }
        hosts.netns_made.push(first);
        let run = |args: &[&str]| ip(args).unwrap_or_else(|e| panic!("{e}"));
        let bridge = format!("ovsb{id}");
        run(&["link", "add", "name", &bridge, "type", "bridge"]);
        hosts.bridge = Some(bridge.clone());
        run(&[
            "addr",
            "add",
            &format!("{}/24", hosts.gateway),
            "dev",
            &bridge,
        ]);
        run(&["link", "set", &bridge, "up"]);
        for i in 0..n {
            let netns = format!("{name}-{i}");
            if i > 0 {
                run(&["netns", "add", &netns]);
                hosts.netns_made.push(netns.clone());
            }
            let (outside, inside) = (format!("ovsh{id}{i}"), format!("ovsn{id}{i}"));
            run(&[
                "link", "add", &outside, "type", "veth", "peer", "name", &inside,
            ]);
            hosts.links_made.push(outside.clone());
            run(&["link", "set", &outside, "master", &bridge, "up"]);
            run(&["link", "set", &inside, "netns", &netns]);
            let addr = at(10 + i as u8);
            let cidr = format!("{addr}/24");
            run(&["-n", &netns, "link", "set", &inside, "name", "eth0"]);
            run(&["-n", &netns, "addr", "add", &cidr, "dev", "eth0"]);
            run(&["-n", &netns, "link", "set", "eth0", "up"]);
            run(&["-n", &netns, "link", "set", "lo", "up"]);
            hosts.hosts.push(Host {
                netns,
                addr,
                dir: tempfile::tempdir().unwrap(),
            });
        }
        Some(hosts)
    }
}

/// Whether `host` can open a TCP connection to `addr` (bash's /dev/tcp, bounded by timeout).
fn connects(host: &Host, addr: std::net::SocketAddr) -> bool {
    let script = format!("exec 3<>/dev/tcp/{}/{}", addr.ip(), addr.port());
    Command::new(ip_binary().unwrap())
        .args([
            "netns",
            "exec",
            &host.netns,
            "timeout",
            "5",
            "bash",
            "-c",
            &script,
        ])
        .stderr(std::process::Stdio::null())
        .status()
        .unwrap()
        .success()
}

/// A host reaches the bridge's address, not the machine's loopback; a dropped
/// [`Hosts`] leaves nothing of its namespaces, veths or bridge.
#[test]
fn hosts_are_made_with_their_own_addresses_and_removed_when_dropped() {
    let Some(hosts) = Hosts::make(2) else { return };
    let on_gateway = std::net::TcpListener::bind((hosts.gateway, 0)).unwrap();
    let on_loopback = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    assert!(connects(&hosts.hosts[0], on_gateway.local_addr().unwrap()));
    assert!(!connects(
        &hosts.hosts[0],
        on_loopback.local_addr().unwrap()
    ));
    let names: Vec<String> = hosts.hosts.iter().map(|h| h.netns.clone()).collect();
    let bridge = hosts.bridge.clone().unwrap();
    let listed = ip(&["netns", "list"]).unwrap();
    for (h, name) in hosts.hosts.iter().zip(&names) {
        assert!(listed.contains(name.as_str()), "{listed}");
        let addrs = ip(&["-n", name, "-4", "-o", "addr"]).unwrap();
        assert!(addrs.contains(&format!("{}/24", h.addr)), "{addrs}");
        // Its own host: only its loopback and its one address, not the machine's.
        assert_eq!(addrs.lines().count(), 2, "{addrs}");
    }
    assert_ne!(hosts.hosts[0].addr, hosts.hosts[1].addr);
    assert_ne!(hosts.hosts[0].dir.path(), hosts.hosts[1].dir.path());
    drop(hosts);
    let listed = ip(&["netns", "list"]).unwrap();
    for name in &names {
        assert!(!listed.contains(name.as_str()), "{name} left: {listed}");
    }
    let links = ip(&["-o", "link"]).unwrap();
    assert!(!links.contains(&bridge), "{bridge} left: {links}");
    assert!(!links.contains(&bridge.replace("ovsb", "ovsh")), "{links}");
}
