//! A 3-node ZooKeeper ensemble on loopback for fault-injection tests: it owns the three
//! `QuorumPeerMain` JVMs (Debian's jars, each under the watchdog of `zk.rs`), their ports,
//! data directories and configs, and the delay proxies of a lagging node.
//!
//! Nodes are named by their ZooKeeper ids, 1 to 3. Only the JVMs started here are ever
//! signalled (kill, pause, resume), and only while they are still our watchdogs' children.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::proxy::{Mode, Proxy};
use super::zk::{classpath_logging, four_letter, free_port, Watched};

/// How many nodes an ensemble has.
pub const NODES: usize = 3;

#[derive(Clone, Debug, Default)]
pub struct EnsembleOptions {
    /// `(id, delay)`: node `id` reaches its peers' quorum and election ports only through
    /// proxies that forward each chunk `delay` late (both ways), so it learns of every
    /// write that much after the others.
    pub lagging: Option<(usize, Duration)>,
}

enum Run {
    Running(Watched),
    Paused(Watched),
    Stopped,
}

struct Node {
    id: usize,
    client: u16,
    quorum: u16,
    election: u16,
    dir: PathBuf,
    run: Mutex<Run>,
}

pub struct Ensemble {
    nodes: Vec<Node>,
    lag_proxies: Vec<Proxy>,
    _dir: tempfile::TempDir,
}

impl Ensemble {
    /// Starts three nodes and waits (up to 60 s) until they serve as one quorum.
    pub async fn start(options: EnsembleOptions) -> Ensemble {
        let dir = tempfile::tempdir().unwrap();
        let nodes: Vec<Node> = (1..=NODES)
            .map(|id| Node {
                id,
                client: free_port(),
                quorum: free_port(),
                election: free_port(),
                dir: dir.path().join(format!("node{id}")),
                run: Mutex::new(Run::Stopped),
            })
            .collect();
        let mut lag_proxies = Vec::new();
        for node in &nodes {
            let mut peers: Vec<(usize, u16, u16)> =
                nodes.iter().map(|n| (n.id, n.quorum, n.election)).collect();
            if let Some((lagging, delay)) = options.lagging {
                assert!((1..=NODES).contains(&lagging), "no node {lagging}");
                if lagging == node.id {
                    for peer in peers.iter_mut().filter(|p| p.0 != node.id) {
                        let quorum = Proxy::start(local(peer.1));
                        let election = Proxy::start(local(peer.2));
                        quorum.set_mode(Mode::Delay(delay));
                        election.set_mode(Mode::Delay(delay));
                        peer.1 = quorum.addr().port();
                        peer.2 = election.addr().port();
                        lag_proxies.extend([quorum, election]);
                    }
                }
            }
            write_config(node, &peers);
        }
        let ensemble = Ensemble {
            nodes,
            lag_proxies,
            _dir: dir,
        };
        for node in &ensemble.nodes {
            *node.run.lock().unwrap() = Run::Running(launch(node));
        }
        ensemble.wait_serving(Duration::from_secs(60)).await;
        ensemble
    }

    fn node(&self, id: usize) -> &Node {
        assert!(
            (1..=NODES).contains(&id),
            "nodes are 1 to {NODES}, not {id}"
        );
        &self.nodes[id - 1]
    }

    /// Every node's client address, as a connect string.
    pub fn connect_string(&self) -> String {
        let ids = 1..=NODES;
        ids.map(|id| self.client_connect(id))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Node `id`'s client address alone, as a connect string.
    pub fn client_connect(&self, id: usize) -> String {
        format!("127.0.0.1:{}", self.node(id).client)
    }

    /// Node `id`'s client address (to put a proxy in front of it).
    pub fn client_addr(&self, id: usize) -> SocketAddr {
        local(self.node(id).client)
    }

    /// The delay proxies of the lagging node (its peers' quorum and election ports).
    pub fn lag_proxies(&self) -> &[Proxy] {
        &self.lag_proxies
    }

    /// Node `id`'s log file.
    pub fn log_path(&self, id: usize) -> PathBuf {
        self.node(id).dir.join("zk.log")
    }

    /// The last `lines` lines of every node's log, for failure messages.
    pub fn log_tails(&self, lines: usize) -> String {
        let mut tails = String::new();
        for id in 1..=NODES {
            let log = std::fs::read_to_string(self.log_path(id)).unwrap_or_default();
            let all: Vec<&str> = log.lines().collect();
            let tail = all[all.len().saturating_sub(lines)..].join("\n");
            tails.push_str(&format!("--- node {id} ---\n{tail}\n"));
        }
        tails
    }

    /// Node `id`'s role as `srvr` tells it ("leader", "follower"), or None when it does not
    /// answer or does not serve.
    pub async fn mode(&self, id: usize) -> Option<String> {
        let port = self.node(id).client;
        tokio::task::spawn_blocking(move || mode_of(port))
            .await
            .unwrap()
    }

    /// Every node's role, asked in parallel (index 0 is node 1).
    pub async fn modes(&self) -> Vec<Option<String>> {
        let asks: Vec<_> = self
            .nodes
            .iter()
            .map(|n| {
                let port = n.client;
                tokio::task::spawn_blocking(move || mode_of(port))
            })
            .collect();
        let mut modes = Vec::new();
        for ask in asks {
            modes.push(ask.await.unwrap());
        }
        modes
    }

    /// One of node `id`'s `mntr` counters (None when it does not answer or lacks it).
    pub async fn mntr(&self, id: usize, key: &str) -> Option<i64> {
        let port = self.node(id).client;
        let key = format!("{key}\t");
        let answer = tokio::task::spawn_blocking(move || four_letter(port, "mntr"));
        let answer = answer.await.unwrap();
        answer
            .lines()
            .find_map(|line| line.strip_prefix(&key)?.trim().parse().ok())
    }

    /// The id of the node that answers as leader, if one does.
    pub async fn leader(&self) -> Option<usize> {
        let modes = self.modes().await;
        (1..=NODES).find(|id| modes[id - 1].as_deref() == Some("leader"))
    }

    /// Waits until a quorum serves: one leader, and every running (not killed, not paused)
    /// node answers as leader or follower. Panics after `within`.
    pub async fn wait_serving(&self, within: Duration) {
        let deadline = Instant::now() + within;
        loop {
            let modes = self.modes().await;
            let running: Vec<usize> = (1..=NODES).filter(|id| self.is_running(*id)).collect();
            let leaders = running
                .iter()
                .filter(|id| modes[*id - 1].as_deref() == Some("leader"))
                .count();
            let serving = running
                .iter()
                .all(|id| matches!(modes[id - 1].as_deref(), Some("leader") | Some("follower")));
            if leaders == 1 && serving && running.len() * 2 > NODES {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the ensemble did not serve within {within:?}: modes {modes:?}\n{}",
                self.log_tails(40)
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Whether node `id` was started and is neither killed nor paused.
    pub fn is_running(&self, id: usize) -> bool {
        matches!(*self.node(id).run.lock().unwrap(), Run::Running(_))
    }

    /// Node `id`'s JVM pid while it runs or is paused.
    pub fn pid(&self, id: usize) -> Option<u32> {
        match &*self.node(id).run.lock().unwrap() {
            Run::Running(w) | Run::Paused(w) => Some(w.pid()),
            Run::Stopped => None,
        }
    }

    /// Kills node `id`'s JVM with SIGKILL (as a crash would) and waits until it is gone.
    pub fn kill(&self, id: usize) {
        let previous = std::mem::replace(&mut *self.node(id).run.lock().unwrap(), Run::Stopped);
        if let Run::Running(watched) | Run::Paused(watched) = previous {
            watched.stop();
        }
    }

    /// Starts node `id` again (killing it first if it runs), with the same ports, config and
    /// data, and waits (up to 60 s) until it serves as leader or follower.
    pub async fn restart(&self, id: usize) {
        self.kill(id);
        let node = self.node(id);
        *node.run.lock().unwrap() = Run::Running(launch(node));
        let deadline = Instant::now() + Duration::from_secs(60);
        while !matches!(self.mode(id).await.as_deref(), Some("leader" | "follower")) {
            assert!(
                Instant::now() < deadline,
                "node {id} did not rejoin\n{}",
                self.log_tails(40)
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Makes sure node `id` is a follower (a lagging node must follow: a leader has nobody
    /// to lag behind), restarting it while it leads, up to three times.
    pub async fn make_follower(&self, id: usize) {
        for _ in 0..3 {
            if self.leader().await != Some(id) {
                break;
            }
            self.restart(id).await;
            self.wait_serving(Duration::from_secs(60)).await;
        }
        assert_ne!(self.leader().await, Some(id), "node {id} still leads");
    }

    /// Stops node `id`'s JVM with SIGSTOP and waits until it is stopped (its sockets stay
    /// open; it answers nothing).
    pub fn pause(&self, id: usize) {
        let mut run = self.node(id).run.lock().unwrap();
        let Run::Running(watched) = std::mem::replace(&mut *run, Run::Stopped) else {
            panic!("node {id} is not running");
        };
        watched.signal("STOP");
        *run = Run::Paused(watched);
    }

    /// Continues a paused node with SIGCONT.
    pub fn resume(&self, id: usize) {
        let mut run = self.node(id).run.lock().unwrap();
        let Run::Paused(watched) = std::mem::replace(&mut *run, Run::Stopped) else {
            panic!("node {id} is not paused");
        };
        watched.signal("CONT");
        *run = Run::Running(watched);
    }
}

fn local(port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], port))
}

fn mode_of(port: u16) -> Option<String> {
    let answer = four_letter(port, "srvr");
    let mode = answer.lines().find_map(|l| l.strip_prefix("Mode:"))?;
    Some(mode.trim().to_owned())
}

/// Writes `node`'s zoo.cfg and myid; `peers` are (id, quorum port, election port) as this
/// node should dial them.
fn write_config(node: &Node, peers: &[(usize, u16, u16)]) {
    std::fs::create_dir_all(node.dir.join("data")).unwrap();
    std::fs::write(node.dir.join("data/myid"), format!("{}\n", node.id)).unwrap();
    let mut config = format!(
        "tickTime=500\ninitLimit=20\nsyncLimit=10\ndataDir={}/data\nclientPort={}\n\
         clientPortAddress=127.0.0.1\nmaxClientCnxns=0\nadmin.enableServer=false\n\
         4lw.commands.whitelist=*\nstandaloneEnabled=false\nreconfigEnabled=false\n\
         extendedTypesEnabled=true\nminSessionTimeout=2000\n",
        node.dir.display(),
        node.client
    );
    for (id, quorum, election) in peers {
        config.push_str(&format!("server.{id}=127.0.0.1:{quorum}:{election}\n"));
    }
    std::fs::write(node.dir.join("zoo.cfg"), config).unwrap();
}

fn launch(node: &Node) -> Watched {
    let java = format!(
        "java -Xmx192m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Dzookeeper.forceSync=no \
         -Dznode.container.checkIntervalMs=1000 -Dorg.slf4j.simpleLogger.showDateTime=true \
         -Dorg.slf4j.simpleLogger.dateTimeFormat=HH:mm:ss.SSS -cp {} \
         org.apache.zookeeper.server.quorum.QuorumPeerMain {}",
        classpath_logging(),
        node.dir.join("zoo.cfg").display()
    );
    Watched::spawn(&java, &node.dir.join("zk.log"))
}
