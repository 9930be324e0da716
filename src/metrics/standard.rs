//! The families Prometheus expects of every exporter: `lockwarden_build_info` (always 1,
//! labelled with the version) and, on Linux, the standard `process_*` families of the
//! official clients (CPU time, memory, file descriptors, threads, start time), read from
//! `/proc/self` at each scrape.
//!
//! Written here rather than taken from the `prometheus` crate's `process` feature, which
//! would add procfs and a second rustix to every clean build (about 14 s of CPU, measured)
//! for a handful of numbers from two files and a `getrlimit`.

use prometheus::{IntGaugeVec, Opts, Registry};

use super::register;

/// Registers the build-info family and, on Linux, the process families; the latter are
/// refreshed by [`Standard::update`] before each scrape.
pub(super) struct Standard {
    #[cfg(target_os = "linux")]
    process: linux::Process,
}

impl Standard {
    pub(super) fn register(registry: &Registry) -> Standard {
        let build = register(
            registry,
            IntGaugeVec::new(
                Opts::new(
                    "lockwarden_build_info",
                    "Always 1; the labels say which build of lockwarden this is.",
                ),
                &["version"],
            ),
        );
        build.with_label_values(&[env!("CARGO_PKG_VERSION")]).set(1);
        Standard {
            #[cfg(target_os = "linux")]
            process: linux::Process::register(registry),
        }
    }

    /// Reads the process's figures into its families (nothing off Linux).
    pub(super) fn update(&self) {
        #[cfg(target_os = "linux")]
        self.process.update();
    }
}

#[cfg(target_os = "linux")]
mod linux {
    use prometheus::{Counter, Gauge, IntGauge, Registry};

    use super::register;

    pub(super) struct Process {
        cpu: Counter,
        open_fds: IntGauge,
        max_fds: IntGauge,
        virtual_memory: IntGauge,
        resident_memory: IntGauge,
        threads: IntGauge,
        ticks_per_second: f64,
        page_size: f64,
    }

    /// The fields of `/proc/self/stat` used here, counted from the one after the command
    /// name (field 3, `state`, is 0): see proc(5).
    const UTIME: usize = 11;
    const STIME: usize = 12;
    const NUM_THREADS: usize = 17;
    const STARTTIME: usize = 19;
    const VSIZE: usize = 20;
    const RSS: usize = 21;

    /// The fields of `/proc/self/stat` after the command name, which may hold spaces and
    /// parentheses of its own (so the split is at the last `)`).
    pub(super) fn stat_fields(stat: &str) -> Vec<&str> {
        stat.rsplit_once(')')
            .map_or_else(Vec::new, |(_, rest)| rest.split_whitespace().collect())
    }

    fn stat_number(fields: &[&str], at: usize) -> Option<f64> {
        fields.get(at)?.parse().ok()
    }

    impl Process {
        pub(super) fn register(r: &Registry) -> Process {
            let gauge = |name: &str, help: &str| register(r, IntGauge::new(name, help));
            // SAFETY: sysconf only reads a configuration value.
            let (ticks, page) = unsafe {
                (
                    libc::sysconf(libc::_SC_CLK_TCK),
                    libc::sysconf(libc::_SC_PAGESIZE),
                )
            };
            let process = Process {
                cpu: register(
                    r,
                    Counter::new(
                        "process_cpu_seconds_total",
                        "Total user and system CPU time spent in seconds.",
                    ),
                ),
                open_fds: gauge("process_open_fds", "Number of open file descriptors."),
                max_fds: gauge(
                    "process_max_fds",
                    "Maximum number of open file descriptors.",
                ),
                virtual_memory: gauge(
                    "process_virtual_memory_bytes",
                    "Virtual memory size in bytes.",
                ),
                resident_memory: gauge(
                    "process_resident_memory_bytes",
                    "Resident memory size in bytes.",
                ),
                threads: gauge("process_threads", "Number of OS threads in the process."),
                ticks_per_second: if ticks > 0 { ticks as f64 } else { 100.0 },
                page_size: if page > 0 { page as f64 } else { 4096.0 },
            };
            let start = register(
                r,
                Gauge::new(
                    "process_start_time_seconds",
                    "Start time of the process since unix epoch in seconds.",
                ),
            );
            if let Some(started) = process.start_time() {
                start.set(started);
            }
            process.update();
            process
        }

        /// The process's start: the boot time plus the start's ticks since boot.
        fn start_time(&self) -> Option<f64> {
            let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
            let since_boot = stat_number(&stat_fields(&stat), STARTTIME)?;
            let boot: f64 = std::fs::read_to_string("/proc/stat")
                .ok()?
                .lines()
                .find_map(|line| line.strip_prefix("btime "))?
                .trim()
                .parse()
                .ok()?;
            Some(boot + since_boot / self.ticks_per_second)
        }

        /// Reads `/proc/self/stat`, counts `/proc/self/fd` and asks for the descriptor
        /// limit. A figure that cannot be read keeps its last value.
        pub(super) fn update(&self) {
            if let Ok(stat) = std::fs::read_to_string("/proc/self/stat") {
                let fields = stat_fields(&stat);
                let number = |at| stat_number(&fields, at);
                if let (Some(user), Some(system)) = (number(UTIME), number(STIME)) {
                    let total = (user + system) / self.ticks_per_second;
                    let more = total - self.cpu.get();
                    if more > 0.0 {
                        self.cpu.inc_by(more);
                    }
                }
                let set = |gauge: &IntGauge, value: Option<f64>, scale: f64| {
                    if let Some(value) = value {
                        gauge.set((value * scale) as i64);
                    }
                };
                set(&self.threads, number(NUM_THREADS), 1.0);
                set(&self.virtual_memory, number(VSIZE), 1.0);
                set(&self.resident_memory, number(RSS), self.page_size);
            }
            if let Ok(entries) = std::fs::read_dir("/proc/self/fd") {
                // Less the descriptor of the listing itself.
                let open = entries.count().saturating_sub(1);
                self.open_fds.set(open as i64);
            }
            let mut limit = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            // SAFETY: getrlimit writes into the struct it is given.
            if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } == 0 {
                self.max_fds
                    .set(i64::try_from(limit.rlim_cur).unwrap_or(i64::MAX));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Format, Metrics};

    #[test]
    fn build_info_is_one_with_the_version() {
        let text = Metrics::new().render(Format::Classic);
        let line = format!(
            "lockwarden_build_info{{version=\"{}\"}} 1\n",
            env!("CARGO_PKG_VERSION")
        );
        assert!(text.contains(&line), "{text}");
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn process_families_read_this_process() {
        let metrics = Metrics::new();
        let text = metrics.render(Format::Classic);
        let value = |name: &str| -> f64 {
            let prefix = format!("{name} ");
            text.lines()
                .find_map(|line| line.strip_prefix(&prefix))
                .unwrap_or_else(|| panic!("{name} in\n{text}"))
                .parse()
                .unwrap()
        };
        assert!(value("process_open_fds") >= 3.0);
        assert!(value("process_max_fds") >= value("process_open_fds"));
        assert!(value("process_resident_memory_bytes") > 1e5);
        assert!(value("process_virtual_memory_bytes") >= value("process_resident_memory_bytes"));
        assert!(value("process_threads") >= 1.0);
        assert!(value("process_cpu_seconds_total") >= 0.0);
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        let started = value("process_start_time_seconds");
        assert!(
            started > now - 86_400.0 * 30.0 && started <= now + 1.0,
            "{started} vs {now}"
        );
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_command_name_with_spaces_and_parentheses_does_not_shift_the_fields() {
        let stat = "42 (a (b) c) S 1 42 42 0 -1 4194304 9 0 0 0 7 3 0 0 20 0 5 0 1234 5678 90";
        let fields = super::linux::stat_fields(stat);
        assert_eq!(fields[0], "S");
        assert_eq!(fields[11], "7", "utime");
        assert_eq!(fields[12], "3", "stime");
        assert_eq!(fields[17], "5", "num_threads");
        assert_eq!(fields[19], "1234", "starttime");
        assert_eq!(fields[21], "90", "rss");
    }
}
