//! What a host's settings allow a test (`flowlab doctor`): socket buffer and TCP window limits
//! from sysctl, load, CPU frequency governors, interface MTUs and UDP receive-buffer errors,
//! each read from /proc or /sys. Values are `None` where the file is missing or unreadable
//! (a container may hide them); the parsers are separate so tests feed them text.

use std::fs;

/// Socket buffer and TCP window limits of this network namespace (most `net.core` buffer
/// keys and the `net.ipv4.tcp_*` ones are per namespace on current kernels).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SocketLimits {
    /// `net.core.rmem_max`: the largest SO_RCVBUF a process may set.
    pub rmem_max: Option<u64>,
    /// `net.core.wmem_max`: the largest SO_SNDBUF a process may set.
    pub wmem_max: Option<u64>,
    /// `net.ipv4.tcp_rmem`: min, default and max of TCP's receive buffer autotuning.
    pub tcp_rmem: Option<[u64; 3]>,
    /// `net.ipv4.tcp_wmem`: the same for sending.
    pub tcp_wmem: Option<[u64; 3]>,
    /// `net.ipv4.tcp_window_scaling`: without it a TCP window stops at 64 KiB.
    pub window_scaling: Option<bool>,
}

/// Reads a sysctl by its dotted name (`net.core.rmem_max`), trimmed.
pub fn sysctl(name: &str) -> Option<String> {
    if name.contains('/') || name.contains("..") {
        return None;
    }
    let path = format!("/proc/sys/{}", name.replace('.', "/"));
    fs::read_to_string(path).ok().map(|s| s.trim().to_string())
}

/// This namespace's socket limits.
pub fn socket_limits() -> SocketLimits {
    let number = |name| sysctl(name).and_then(|s| s.parse().ok());
    let triple = |name| sysctl(name).and_then(|s| parse_triple(&s));
    SocketLimits {
        rmem_max: number("net.core.rmem_max"),
        wmem_max: number("net.core.wmem_max"),
        tcp_rmem: triple("net.ipv4.tcp_rmem"),
        tcp_wmem: triple("net.ipv4.tcp_wmem"),
        window_scaling: number("net.ipv4.tcp_window_scaling").map(|v: u64| v != 0),
    }
}

/// Three whitespace-separated numbers, as `tcp_rmem` holds them.
pub fn parse_triple(text: &str) -> Option<[u64; 3]> {
    let mut it = text.split_whitespace().map(|w| w.parse::<u64>().ok());
    let triple = [it.next()??, it.next()??, it.next()??];
    it.next().is_none().then_some(triple)
}

/// The one-minute load average (`/proc/loadavg`).
pub fn load_average() -> Option<f64> {
    parse_loadavg(&fs::read_to_string("/proc/loadavg").ok()?)
}

/// The first field of `/proc/loadavg`.
pub fn parse_loadavg(text: &str) -> Option<f64> {
    let load: f64 = text.split_whitespace().next()?.parse().ok()?;
    (load.is_finite() && load >= 0.0).then_some(load)
}

/// The distinct CPU frequency governors of the online CPUs, sorted; empty where the host
/// exposes no cpufreq (many virtual machines).
pub fn cpufreq_governors() -> Vec<String> {
    let mut governors: Vec<String> = fs::read_dir("/sys/devices/system/cpu")
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("cpu"))
        .filter_map(|e| fs::read_to_string(e.path().join("cpufreq/scaling_governor")).ok())
        .map(|g| g.trim().to_string())
        .filter(|g| !g.is_empty())
        .collect();
    governors.sort();
    governors.dedup();
    governors
}

/// An interface's MTU (`/sys/class/net/IF/mtu`).
pub fn interface_mtu(interface: &str) -> Option<u32> {
    if interface.contains('/') || interface.starts_with('.') {
        return None;
    }
    let text = fs::read_to_string(format!("/sys/class/net/{interface}/mtu")).ok()?;
    text.trim().parse().ok()
}

/// UDP datagrams dropped since boot because a receiving socket's buffer was full
/// (`RcvbufErrors` in `/proc/net/snmp`, this namespace's count).
pub fn udp_receive_buffer_errors() -> Option<u64> {
    parse_snmp(
        &fs::read_to_string("/proc/net/snmp").ok()?,
        "Udp",
        "RcvbufErrors",
    )
}

/// A counter of `/proc/net/snmp`: a line of names after `PROTO:`, then one of values.
pub fn parse_snmp(text: &str, proto: &str, counter: &str) -> Option<u64> {
    let prefix = format!("{proto}:");
    let mut lines = text.lines().filter(|l| l.starts_with(&prefix));
    let names = lines.next()?.split_whitespace().skip(1);
    let values = lines.next()?.split_whitespace().skip(1);
    names
        .zip(values)
        .find(|(name, _)| *name == counter)
        .and_then(|(_, value)| value.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn triples_are_three_numbers() {
        assert_eq!(
            parse_triple("4096\t131072\t6291456\n"),
            Some([4096, 131072, 6291456])
        );
        assert_eq!(parse_triple("4096 131072"), None);
        assert_eq!(parse_triple("1 2 3 4"), None);
        assert_eq!(parse_triple("1 x 3"), None);
    }

    #[test]
    fn loadavg_is_its_first_field() {
        assert_eq!(parse_loadavg("2.11 2.28 1.61 5/114 12996\n"), Some(2.11));
        assert_eq!(parse_loadavg("nan 1 1"), None);
        assert_eq!(parse_loadavg(""), None);
    }

    #[test]
    fn snmp_counters_by_name() {
        let text = "Ip: Forwarding DefaultTTL\nIp: 1 64\n\
                    Udp: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors\n\
                    Udp: 20457255 1045078 905099 22286293 905098\n\
                    UdpLite: InDatagrams RcvbufErrors\nUdpLite: 0 7\n";
        assert_eq!(parse_snmp(text, "Udp", "RcvbufErrors"), Some(905098));
        assert_eq!(parse_snmp(text, "UdpLite", "RcvbufErrors"), Some(7));
        assert_eq!(parse_snmp(text, "Udp", "MemErrors"), None);
        assert_eq!(parse_snmp(text, "Tcp", "InSegs"), None);
    }

    #[test]
    fn this_host_reads() {
        let limits = socket_limits();
        if let Some([min, default, max]) = limits.tcp_rmem {
            assert!(min <= default && default <= max);
        }
        assert_eq!(interface_mtu("lo").map(|m| m >= 1280), Some(true));
        assert_eq!(sysctl("net/../../etc/passwd"), None);
        assert!(udp_receive_buffer_errors().is_some());
    }
}
