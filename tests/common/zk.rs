//! A real ZooKeeper server for tests: Debian's jars, a free loopback port, its own data dir.
//!
//! The JVM runs under a small shell watchdog that reads our end of a pipe: when the test
//! process exits (however it exits), the pipe closes and the watchdog kills the JVM.

#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

const JARS: &str = "/usr/share/java";

pub struct ZkServer {
    pub port: u16,
    dir: tempfile::TempDir,
    running: Mutex<Option<(Child, ChildStdin)>>,
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn classpath() -> String {
    let zk = Path::new(JARS).join("zookeeper.jar");
    assert!(
        zk.exists(),
        "ZooKeeper is not installed ({} is missing): run ./scripts/test, which installs it",
        zk.display()
    );
    let binding = ["slf4j-nop.jar", "slf4j-simple.jar"]
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
        let watchdog = format!(
            "{java} >>{}/zk.log 2>&1 & pid=$!; read -r _; kill -9 $pid; wait $pid",
            self.dir.path().display()
        );
        let mut child = Command::new("bash")
            .args(["-c", &watchdog])
            .stdin(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("starting the ZooKeeper watchdog");
        let stdin = child.stdin.take().unwrap();
        *self.running.lock().unwrap() = Some((child, stdin));
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
        if let Some((mut child, stdin)) = self.running.lock().unwrap().take() {
            drop(stdin);
            let _ = child.wait();
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
