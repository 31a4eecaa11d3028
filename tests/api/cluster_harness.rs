//! A Redis Cluster of the test's own: three masters with one replica each, `redis-server`
//! children on free loopback ports (their cluster bus on port + 10000), their files in a
//! temporary directory, joined by `redis-cli --cluster create`. Every child is killed and
//! reaped, and the directory removed, when the cluster is dropped (also when a test fails).

use oversell::testing::nemesis::cluster::{parse_nodes, Node};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// Nodes of a test cluster: three masters, three replicas.
const NODES: usize = 6;

pub struct TestCluster {
    children: Vec<Child>,
    pub ports: Vec<u16>,
    dir: tempfile::TempDir,
}

/// A loopback port that is free, with its cluster bus port (+10000) free too.
fn free_port_pair() -> u16 {
    for _ in 0..200 {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        if port < 55_535 && std::net::TcpListener::bind(("127.0.0.1", port + 10_000)).is_ok() {
            return port;
        }
    }
    panic!("no free loopback port with a free cluster bus port");
}

impl TestCluster {
    /// Starts the six nodes, creates the cluster and waits until every node says
    /// `cluster_state:ok` and every replica's link to its master is up.
    pub async fn start() -> TestCluster {
        let dir = tempfile::tempdir().unwrap();
        let mut cluster = TestCluster {
            children: Vec::new(),
            ports: Vec::new(),
            dir,
        };
        for _ in 0..NODES {
            cluster.start_node().await;
        }
        let nodes: Vec<String> = cluster
            .ports
            .iter()
            .map(|p| format!("127.0.0.1:{p}"))
            .collect();
        let out = tokio::process::Command::new("redis-cli")
            .args(["--cluster", "create"])
            .args(&nodes)
            .args(["--cluster-replicas", "1", "--cluster-yes"])
            .stdin(Stdio::null())
            .output()
            .await
            .expect("redis-cli is installed (Debian: redis-tools)");
        assert!(
            out.status.success(),
            "redis-cli --cluster create failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        for &port in &cluster.ports {
            cluster
                .wait_for(port, "CLUSTER INFO", |r| r.contains("cluster_state:ok"))
                .await;
            // Every node sees the same shape: three masters serving slots, three replicas.
            cluster
                .wait_for(port, "CLUSTER NODES", |r| {
                    let nodes = parse_nodes(r);
                    let masters = nodes
                        .iter()
                        .filter(|n| n.master && !n.slots.is_empty() && !n.failing)
                        .count();
                    let replicas = nodes
                        .iter()
                        .filter(|n| !n.master && n.master_id.is_some() && !n.failing)
                        .count();
                    masters == NODES / 2 && replicas == NODES / 2
                })
                .await;
        }
        for replica in cluster.nodes().await.iter().filter(|n| !n.master) {
            let port: u16 = replica.addr.rsplit_once(':').unwrap().1.parse().unwrap();
            cluster
                .wait_for(port, "INFO replication", |r| {
                    r.contains("master_link_status:up")
                })
                .await;
        }
        cluster
    }

    /// Starts one node on a free port and waits for its `PONG`. A port found free can be taken
    /// by another test before the node binds it (the node then exits): it is started again on
    /// another port, a few times.
    async fn start_node(&mut self) {
        for _ in 0..5 {
            let port = free_port_pair();
            let d = self.dir.path();
            let mut child = Command::new("redis-server")
                .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
                .args(["--cluster-enabled", "yes", "--cluster-node-timeout", "3000"])
                .arg("--cluster-config-file")
                .arg(d.join(format!("nodes-{port}.conf")))
                .arg("--dir")
                .arg(d)
                .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
                .args(["--logfile", &format!("redis-{port}.log")])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("redis-server is installed (Debian: redis-server)");
            for _ in 0..200 {
                if matches!(self.query(port, "PING").await.as_deref(), Ok("PONG")) {
                    self.children.push(child);
                    self.ports.push(port);
                    return;
                }
                if child.try_wait().ok().flatten().is_some() {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        panic!(
            "no cluster node would start (logs in {})",
            self.dir.path().display()
        );
    }

    /// Polls `command` on the node at `port` until `ok` holds for its answer (10 s).
    async fn wait_for(&self, port: u16, command: &str, ok: impl Fn(&str) -> bool) {
        let mut last = String::new();
        for _ in 0..200 {
            match self.query(port, command).await {
                Ok(r) if ok(&r) => return,
                Ok(r) => last = r,
                Err(e) => last = e.to_string(),
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!(
            "node 127.0.0.1:{port} never answered {command} as expected (logs in {}): {last}",
            self.dir.path().display()
        );
    }

    /// One command on one node (not through the cluster), its answer as text.
    pub async fn query(&self, port: u16, command: &str) -> redis::RedisResult<String> {
        let mut conn = redis::Client::open(format!("redis://127.0.0.1:{port}"))?
            .get_multiplexed_async_connection()
            .await?;
        let mut cmd = redis::Cmd::new();
        for part in command.split_whitespace() {
            cmd.arg(part);
        }
        let v: redis::Value = cmd.query_async(&mut conn).await?;
        Ok(match v {
            redis::Value::SimpleString(s) => s,
            redis::Value::Okay => "OK".into(),
            v => redis::from_redis_value::<String>(v.clone()).unwrap_or_else(|_| format!("{v:?}")),
        })
    }

    /// `CLUSTER NODES` as one node sees it.
    pub async fn nodes(&self) -> Vec<Node> {
        let text = self.query(self.ports[0], "CLUSTER NODES").await.unwrap();
        parse_nodes(&text)
    }

    /// The cluster's URL: every node a seed.
    pub fn url(&self) -> String {
        let nodes: Vec<String> = self
            .ports
            .iter()
            .map(|p| format!("127.0.0.1:{p}"))
            .collect();
        format!("redis+cluster://{}", nodes.join(","))
    }

    /// The port of the node at `addr` (`host:port`).
    pub fn port_of(addr: &str) -> u16 {
        addr.rsplit_once(':').unwrap().1.parse().unwrap()
    }

    /// Keys on every master (DBSIZE summed).
    pub async fn keys_on_masters(&self) -> u64 {
        let mut n = 0;
        for m in self.nodes().await.iter().filter(|n| n.master) {
            let size = self.query(Self::port_of(&m.addr), "DBSIZE").await.unwrap();
            n += size
                .parse::<u64>()
                .unwrap_or_else(|_| panic!("DBSIZE: {size}"));
        }
        n
    }
}

impl Drop for TestCluster {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}
