//! A real ZooKeeper server for tests: Debian's jars, a free loopback port, its own data dir.
//!
//! The JVM runs under a small shell watchdog that reads our end of a pipe: when the test
//! process exits (however it exits), the pipe closes and the watchdog kills the JVM.
//! `Watched` (that watchdog) and `classpath` are shared with the ensemble in `ensemble.rs`.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

const JARS: &str = "/usr/share/java";

pub struct ZkServer {
    pub port: u16,
    dir: tempfile::TempDir,
    running: Mutex<Option<Watched>>,
}

/// A free loopback port for a server that binds it later. It is picked below the kernel's
/// ephemeral range, so that no outgoing connection (nor any `bind` to port 0) can take it in
/// the meantime, and this process never hands it out twice.
pub fn free_port() -> u16 {
    static GIVEN: Mutex<Vec<u16>> = Mutex::new(Vec::new());
    let ephemeral = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|range| range.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(32768);
    let mut given = GIVEN.lock().unwrap();
    if ephemeral > 4096 {
        let range = ephemeral.saturating_sub(12_000).max(2048)..ephemeral;
        for _ in 0..1000 {
            let port = fastrand::u16(range.clone());
            if !given.contains(&port) && TcpListener::bind(("127.0.0.1", port)).is_ok() {
                given.push(port);
                return port;
            }
        }
    }
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

/// The classpath of Debian's ZooKeeper jars (with an slf4j binding when one is installed).
pub fn classpath() -> String {
    classpath_with(&["slf4j-nop.jar", "slf4j-simple.jar"])
}

/// The same, preferring the binding that logs (at info, to stderr).
pub fn classpath_logging() -> String {
    classpath_with(&["slf4j-simple.jar", "slf4j-nop.jar"])
}

fn classpath_with(bindings: &[&str]) -> String {
    let zk = Path::new(JARS).join("zookeeper.jar");
    assert!(
        zk.exists(),
        "ZooKeeper is not installed ({} is missing): run ./scripts/test, which installs it",
        zk.display()
    );
    let binding = bindings
        .iter()
        .map(|jar| Path::new(JARS).join(jar))
        .find(|jar| jar.exists());
    let mut jars: Vec<PathBuf> = vec![
        zk,
        Path::new(JARS).join("zookeeper-jute.jar"),
        Path::new(JARS).join("slf4j-api.jar"),
    ];
    jars.extend(binding);
    jars.iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(":")
}

/// Sends a four-letter command and returns the answer ("" if nobody answers).
pub fn four_letter(port: u16, command: &str) -> String {
    let Ok(mut stream) =
        TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), Duration::from_millis(500))
    else {
        return String::new();
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    let _ = stream.write_all(command.as_bytes());
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    answer
}

/// The state letter of process `pid` in /proc ('R', 'S', 'T' when stopped, ...).
pub fn process_state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // After the command name (in parentheses) come the state, then the parent's pid.
    stat.rsplit_once(')')?
        .1
        .split_whitespace()
        .next()?
        .chars()
        .next()
}

/// Waits (up to 10 s) until process `pid` is stopped (`stopped`) or no longer stopped.
pub fn wait_stopped(pid: u32, stopped: bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while (process_state(pid) == Some('T')) != stopped {
        assert!(Instant::now() < deadline, "pid {pid} did not (un)stop");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A command (a JVM) run under the shell watchdog: it runs while our end of the watchdog's
/// stdin is open, and is killed with SIGKILL when that closes, by `stop` or by our exit.
pub struct Watched {
    watchdog: Child,
    stdin: Option<ChildStdin>,
    _stdout: ChildStdout,
    pid: u32,
}

impl Watched {
    /// Starts `command` (a shell command line) with its output appended to `log`.
    pub fn spawn(command: &str, log: &Path) -> Watched {
        let script = format!(
            "{command} >>{} 2>&1 & pid=$!; echo $pid; read -r _; kill -9 $pid; wait $pid",
            log.display()
        );
        let mut watchdog = Command::new("bash")
            .args(["-c", &script])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("starting the watchdog");
        let stdin = watchdog.stdin.take().unwrap();
        let mut stdout = BufReader::new(watchdog.stdout.take().unwrap());
        let mut line = String::new();
        stdout
            .read_line(&mut line)
            .expect("the watchdog tells its child's pid");
        let pid = line.trim().parse().expect("a pid from the watchdog");
        Watched {
            watchdog,
            stdin: Some(stdin),
            _stdout: stdout.into_inner(),
            pid,
        }
    }

    /// The pid of the watched command (not of the watchdog).
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Sends `signal` (a name such as "STOP" or "CONT") to the watched command, only if that
    /// pid is still our watchdog's child (so a recycled pid is never signalled).
    pub fn signal(&self, signal: &str) {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.pid)).unwrap_or_default();
        let parent = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|ppid| ppid.parse::<u32>().ok());
        assert_eq!(
            parent,
            Some(self.watchdog.id()),
            "pid {} is no longer ours; not sending SIG{signal}",
            self.pid
        );
        let status = Command::new("kill")
            .args([format!("-{signal}"), self.pid.to_string()])
            .status()
            .expect("running kill");
        assert!(status.success(), "kill -{signal} {} failed", self.pid);
        match signal {
            "STOP" => wait_stopped(self.pid, true),
            "CONT" => wait_stopped(self.pid, false),
            _ => {}
        }
    }

    /// Kills the watched command (SIGKILL, from the watchdog) and waits for the watchdog.
    pub fn stop(mut self) {
        drop(self.stdin.take());
        let _ = self.watchdog.wait();
    }
}

impl Drop for Watched {
    fn drop(&mut self) {
        if self.stdin.take().is_some() {
            let _ = self.watchdog.wait();
        }
    }
}

impl ZkServer {
    pub fn start() -> ZkServer {
        let server = ZkServer {
            port: free_port(),
            dir: tempfile::tempdir().unwrap(),
            running: Mutex::new(None),
        };
        let config = format!(
            "tickTime=1000\ninitLimit=10\nsyncLimit=5\ndataDir={}/data\nclientPort={}\nclientPortAddress=127.0.0.1\n\
             maxClientCnxns=0\nadmin.enableServer=false\n4lw.commands.whitelist=*\nextendedTypesEnabled=true\n\
             minSessionTimeout=2000\n",
            server.dir.path().display(),
            server.port
        );
        std::fs::create_dir_all(server.dir.path().join("data")).unwrap();
        std::fs::write(server.dir.path().join("zoo.cfg"), config).unwrap();
        server.launch();
        server
    }

    pub fn connect_string(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    fn launch(&self) {
        let java = format!(
            "java -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Dzookeeper.forceSync=no \
             -Dznode.container.checkIntervalMs=500 -cp {} org.apache.zookeeper.server.ZooKeeperServerMain {}/zoo.cfg",
            classpath(),
            self.dir.path().display()
        );
        let watched = Watched::spawn(&java, &self.dir.path().join("zk.log"));
        *self.running.lock().unwrap() = Some(watched);
        let deadline = Instant::now() + Duration::from_secs(60);
        while !four_letter(self.port, "srvr").contains("Mode: standalone") {
            assert!(
                Instant::now() < deadline,
                "ZooKeeper did not start; see {}/zk.log",
                self.dir.path().display()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Kills the server (as a crash would) and waits until its port is closed.
    pub fn stop(&self) {
        if let Some(watched) = self.running.lock().unwrap().take() {
            watched.stop();
        }
        let deadline = Instant::now() + Duration::from_secs(20);
        while TcpStream::connect(("127.0.0.1", self.port)).is_ok() {
            assert!(Instant::now() < deadline, "ZooKeeper did not stop");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Starts the server again on the same port and data directory.
    pub fn restart(&self) {
        self.launch();
    }

    /// The server's `mntr` counters as (name, value) pairs.
    pub fn mntr(&self, key: &str) -> Option<i64> {
        four_letter(self.port, "mntr")
            .lines()
            .find_map(|line| line.strip_prefix(key)?.trim().parse().ok())
    }
}

impl Drop for ZkServer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// One server shared by every test in a test binary.
pub fn shared() -> &'static ZkServer {
    static SHARED: OnceLock<ZkServer> = OnceLock::new();
    SHARED.get_or_init(ZkServer::start)
}

/// A ZooKeeper store of lockwarden at `connect`, under a root of its own, with `metrics`.
pub fn store_at(
    connect: String,
    metrics: &lockwarden::metrics::Metrics,
    writes_in_flight: usize,
) -> lockwarden::store::zk::ZkStore {
    use lockwarden::store::zk::{access::ZkAccess, ZkConfig, ZkStore};
    let root = super::unique_root();
    ZkStore::new(ZkConfig {
        connect,
        lock_root: format!("{root}/locks"),
        state_root: format!("{root}/state"),
        session_timeout: Duration::from_secs(10),
        access: ZkAccess::open(),
        sealer: lockwarden::seal::Sealer::new(None),
        metrics: metrics.zookeeper(),
        writes_in_flight,
    })
}
