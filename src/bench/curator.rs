//! Curator's `InterProcessMutex`, measured in the same run on the same ZooKeeper: the bench
//! drives `bench/curator/CuratorBench.java` (compiled by `scripts/bench`) as a child process,
//! one command a line on its stdin, one JSON line back on its stdout, so that Curator's
//! batches can be interleaved with lockwarden's and the floor's.

use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

use super::stats::server_counts;
use super::Row;

pub struct Curator {
    child: Child,
    stdin: ChildStdin,
    lines: Lines<BufReader<ChildStdout>>,
    /// ZooKeeper's connection string, to read its counters around the timed runs.
    zk: String,
}

impl Curator {
    /// Starts the driver (`java -cp CLASSPATH CuratorBench`) against ZooKeeper at `zk`.
    pub async fn start(classpath: &str, zk: &str) -> Result<Curator, String> {
        let mut child = Command::new("java")
            .args([
                "-Xms256m",
                "-Xmx1g",
                "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
                "-cp",
                classpath,
                "CuratorBench",
                "--connect",
                zk,
            ])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("starting java for Curator: {e}"))?;
        let stdin = child.stdin.take().ok_or("no stdin for Curator")?;
        let stdout = child.stdout.take().ok_or("no stdout for Curator")?;
        let mut curator = Curator {
            child,
            stdin,
            lines: BufReader::new(stdout).lines(),
            zk: zk.to_owned(),
        };
        let ready = curator.answer(Duration::from_secs(60)).await?;
        if ready["op"] != "ready" {
            return Err(format!("Curator's driver did not start: {ready}"));
        }
        Ok(curator)
    }

    async fn answer(&mut self, within: Duration) -> Result<Value, String> {
        let line = tokio::time::timeout(within, self.lines.next_line())
            .await
            .map_err(|_| format!("Curator's driver did not answer within {within:?}"))?
            .map_err(|e| e.to_string())?
            .ok_or("Curator's driver exited")?;
        let value: Value = serde_json::from_str(&line)
            .map_err(|e| format!("Curator's driver answered {line:?}: {e}"))?;
        if value["op"] == "error" {
            return Err(format!("Curator's driver failed: {}", value["message"]));
        }
        Ok(value)
    }

    async fn ask(&mut self, command: &str, within: Duration) -> Result<Value, String> {
        self.stdin
            .write_all(format!("{command}\n").as_bytes())
            .await
            .map_err(|e| format!("writing to Curator's driver: {e}"))?;
        self.stdin.flush().await.map_err(|e| e.to_string())?;
        self.answer(within).await
    }

    /// At least `cycles` uncontended cycles and at least `seconds` of them.
    pub async fn warmup(&mut self, cycles: usize, seconds: f64) -> Result<(), String> {
        let within = Duration::from_secs_f64(seconds + 120.0);
        self.ask(&format!("warmup {cycles} {seconds}"), within)
            .await
            .map(drop)
    }

    /// `cycles` sequential acquire+release cycles; the duration of each.
    pub async fn uncontended(&mut self, cycles: usize) -> Result<Vec<Duration>, String> {
        let answer = self
            .ask(&format!("uncontended {cycles}"), Duration::from_secs(120))
            .await?;
        answer["samples_ns"]
            .as_array()
            .ok_or_else(|| format!("no samples in {answer}"))?
            .iter()
            .map(|v| v.as_u64().map(Duration::from_nanos))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| "a sample that is not a count of nanoseconds".to_string())
    }

    /// `clients` loops on one lock (`contended`) or on their own, for `warm` + `seconds`.
    pub async fn timed(
        &mut self,
        contended: bool,
        clients: usize,
        warm: f64,
        seconds: f64,
    ) -> Result<Row, String> {
        let mode = if contended { "contended" } else { "parallel" };
        let within = Duration::from_secs_f64(warm + seconds + 180.0);
        let before = server_counts(&self.zk);
        let a = self
            .ask(&format!("timed {mode} {clients} {warm} {seconds}"), within)
            .await?;
        let after = server_counts(&self.zk);
        let number = |key: &str| a[key].as_f64().unwrap_or(f64::NAN);
        let (scenario, note) = if contended {
            (
                "curator: contended, one lock, acquire+release",
                format!(
                    "p50/p99: the wait in acquire(); grants per client {}–{}",
                    a["min_per_client"], a["max_per_client"]
                ),
            )
        } else {
            (
                "curator: parallel, own lock each, acquire+release",
                "p50/p99: acquire()".to_string(),
            )
        };
        Ok(Row {
            scenario: scenario.into(),
            clients,
            operations: number("operations") as usize,
            p50_us: number("p50_us"),
            p99_us: number("p99_us"),
            per_second: number("per_second"),
            // Per cycle of the whole run (warm-up and tail too); the clients' sessions are
            // opened and closed inside it, which adds 2 writes per client to the total.
            zk_writes_per_op: (after.writes - before.writes) / number("cycles"),
            zk_reads_per_op: (after.reads - before.reads) / number("cycles"),
            note,
        })
    }

    /// Asks the driver to close its sessions and exit.
    pub async fn quit(mut self) {
        let _ = self.stdin.write_all(b"quit\n").await;
        let _ = self.stdin.flush().await;
        if tokio::time::timeout(Duration::from_secs(10), self.child.wait())
            .await
            .is_err()
        {
            let _ = self.child.kill().await;
        }
    }
}
