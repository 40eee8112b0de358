//! The process's own series, with the standard `process_*` names Prometheus' client libraries
//! give them: resident and virtual memory, CPU seconds, open and allowed file descriptors,
//! threads and start time, read from `/proc/self` at each scrape.

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

/// Reads `/proc/self` at each scrape.
#[derive(Debug, Default)]
pub(crate) struct ProcessCollector;

/// The clock ticks a second `/proc` counts in (`USER_HZ`, 100 on Linux).
const TICKS: f64 = 100.0;

/// What `/proc/self` says of the process.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Reading {
    pub(crate) cpu_seconds: f64,
    pub(crate) resident_bytes: f64,
    pub(crate) virtual_bytes: f64,
    pub(crate) threads: f64,
    pub(crate) start_time_seconds: f64,
}

/// `/proc/<pid>/stat` (whose fields follow the command's closing parenthesis) and the
/// resident size of `/proc/<pid>/status` (`VmRSS`), with the machine's boot time (`btime` of
/// `/proc/stat`).
pub(crate) fn parse_stat(stat: &str, status: &str, boot_time: f64) -> Option<Reading> {
    let fields: Vec<&str> = stat.get(stat.rfind(')')? + 2..)?.split_whitespace().collect();
    // After the command: state is field 3 of stat(5), so field n is at index n - 3.
    let field = |n: usize| fields.get(n - 3).and_then(|value| value.parse::<f64>().ok());
    let resident_kib: f64 = status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|value| value.trim().trim_end_matches("kB").trim().parse().ok())?;
    Some(Reading {
        cpu_seconds: (field(14)? + field(15)?) / TICKS,
        threads: field(20)?,
        start_time_seconds: boot_time + field(22)? / TICKS,
        virtual_bytes: field(23)?,
        resident_bytes: resident_kib * 1024.0,
    })
}

fn boot_time() -> f64 {
    std::fs::read_to_string("/proc/stat")
        .ok()
        .and_then(|text| {
            text.lines()
                .find_map(|line| line.strip_prefix("btime ").and_then(|value| value.trim().parse().ok()))
        })
        .unwrap_or(0.0)
}

/// The soft limit on open files, from `/proc/self/limits`.
fn max_fds() -> Option<f64> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits.lines().find(|line| line.starts_with("Max open files"))?;
    line.split_whitespace().nth(3)?.parse().ok()
}

fn gauge(encoder: &mut DescriptorEncoder, name: &str, help: &str, value: f64) -> Result<(), std::fmt::Error> {
    let metric = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
    ConstGauge::new(value).encode(metric)
}

impl Collector for ProcessCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
        let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
        let Some(reading) = parse_stat(&stat, &status, boot_time()) else { return Ok(()) };
        let cpu = encoder.encode_descriptor(
            "process_cpu_seconds",
            "Total user and system CPU time spent in seconds",
            None,
            MetricType::Counter,
        )?;
        ConstCounter::new(reading.cpu_seconds).encode(cpu)?;
        gauge(
            &mut encoder,
            "process_resident_memory_bytes",
            "Resident memory size in bytes",
            reading.resident_bytes,
        )?;
        gauge(
            &mut encoder,
            "process_virtual_memory_bytes",
            "Virtual memory size in bytes",
            reading.virtual_bytes,
        )?;
        gauge(&mut encoder, "process_threads", "Number of OS threads in the process", reading.threads)?;
        gauge(
            &mut encoder,
            "process_start_time_seconds",
            "Start time of the process since unix epoch in seconds",
            reading.start_time_seconds,
        )?;
        let open = std::fs::read_dir("/proc/self/fd").map(|dir| dir.count()).unwrap_or(0);
        gauge(&mut encoder, "process_open_fds", "Number of open file descriptors", open as f64)?;
        if let Some(max) = max_fds() {
            gauge(&mut encoder, "process_max_fds", "Maximum number of open file descriptors", max)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::{Reading, parse_stat};

    #[test]
    fn a_stat_line_reads_with_a_command_holding_spaces_and_parentheses() {
        // pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt
        // utime stime cutime cstime priority nice num_threads itrealvalue starttime vsize rss
        let stat =
            "42 (kayra (x) y) S 1 42 42 0 -1 4194304 10 0 0 0 250 50 0 0 20 0 7 0 1000 123456789 2048 rest";
        let status = "Name:\tkayra\nVmRSS:\t    8192 kB\nThreads:\t7\n";
        let reading = parse_stat(stat, status, 1_700_000_000.0).unwrap();
        assert_eq!(
            reading,
            Reading {
                cpu_seconds: 3.0,
                resident_bytes: 8192.0 * 1024.0,
                virtual_bytes: 123_456_789.0,
                threads: 7.0,
                start_time_seconds: 1_700_000_010.0,
            }
        );
        assert_eq!(parse_stat("garbage", status, 0.0), None);
        assert_eq!(parse_stat(stat, "no size here", 0.0), None);
    }
}
