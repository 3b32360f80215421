//! The check list itself (seed 003, Table 2): what an [`Examination`] means, as findings with
//! what to change. Pure: every rule is tested on made-up facts.

use flowlab_control::host_facts::{BufferLimits, HostFacts};
use flowlab_units::{format_bytes, format_duration_ns, format_rate};

use super::{Examination, Finding, Probe, Status};

/// The rate the bandwidth-delay product is taken at when neither end knows its link speed
/// (veth, loopback and many virtual NICs report none).
pub const DEFAULT_PATH_RATE_BPS: u64 = 10_000_000_000;
/// Load per CPU above which a host is too busy to time packets well.
const BUSY_LOAD_PER_CPU: f64 = 0.7;
/// A clock offset this far beyond both ends' error bounds means a clock is wrong.
const CLOCK_SLACK_NS: u64 = 1_000_000;

/// Which end a fact is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum End {
    Here,
    Agent,
}

impl End {
    fn name(self) -> &'static str {
        match self {
            End::Here => "here",
            End::Agent => "agent",
        }
    }
}

/// Every finding, in the check list's order.
pub fn diagnose(exam: &Examination) -> Vec<Finding> {
    let mut findings = buffer_findings(exam);
    findings.extend(mtu_findings(exam));
    for (end, facts) in exam.ends() {
        findings.extend(host_findings(end, facts));
    }
    for (end, facts) in exam.ends() {
        findings.push(route_finding(end, facts));
    }
    findings.extend(loss_findings(exam));
    findings.push(clock_finding(exam));
    findings
}

fn finding(check: &'static str, status: Status, found: String, change: Option<String>) -> Finding {
    Finding {
        check,
        status,
        found,
        change,
    }
}

/// The rate the path's BDP is taken at: the slower end's link speed, or the default.
pub fn path_rate_bps(exam: &Examination) -> u64 {
    exam.ends()
        .filter_map(|(_, f)| f.egress.as_ref()?.link_speed_bps)
        .min()
        .unwrap_or(DEFAULT_PATH_RATE_BPS)
}

/// The bandwidth-delay product in bytes at the path's rate over the least RTT.
pub fn bdp_bytes(exam: &Examination) -> Option<u64> {
    let rtt = exam.clock.as_ref()?.rtt_ns;
    Some((u128::from(path_rate_bps(exam)) * u128::from(rtt) / 8_000_000_000) as u64)
}

/// Socket buffers and TCP windows at both ends against twice the BDP (the kernel keeps
/// about half a TCP buffer for overhead).
fn buffer_findings(exam: &Examination) -> Vec<Finding> {
    let (Some(clock), Some(bdp)) = (&exam.clock, bdp_bytes(exam)) else {
        let found = "no round trip measured: the BDP is unknown".to_string();
        return vec![finding("buffers", Status::Note, found, None)];
    };
    let need = (2 * bdp).max(1).next_power_of_two();
    let mut findings = Vec::new();
    for (end, facts) in exam.ends() {
        findings.extend(short_buffers(end, &facts.buffers, need, bdp));
    }
    if findings.is_empty() {
        let found = format!(
            "RTT {}, BDP {} at {}: socket buffers and TCP windows hold 2×BDP at both ends",
            format_duration_ns(clock.rtt_ns as f64),
            format_bytes(bdp as f64),
            format_rate(path_rate_bps(exam) as f64)
        );
        findings.push(finding("buffers", Status::Ok, found, None));
    }
    findings
}

/// The limits of one end below `need` bytes, each with its sysctl.
fn short_buffers(end: End, limits: &BufferLimits, need: u64, bdp: u64) -> Vec<Finding> {
    let third = |t: Option<[u64; 3]>| t.map(|[_, _, max]| max);
    let keys = [
        ("net.core.rmem_max", limits.rmem_max, need.to_string()),
        ("net.core.wmem_max", limits.wmem_max, need.to_string()),
        (
            "net.ipv4.tcp_rmem",
            third(limits.tcp_rmem),
            triple(limits.tcp_rmem, need),
        ),
        (
            "net.ipv4.tcp_wmem",
            third(limits.tcp_wmem),
            triple(limits.tcp_wmem, need),
        ),
    ];
    let mut findings: Vec<Finding> = keys
        .into_iter()
        .filter_map(|(key, value, set)| Some((key, value.filter(|&v| v < need)?, set)))
        .map(|(key, value, set)| {
            let found = format!(
                "{}: {key} allows {}, below 2×BDP ({} for a BDP of {})",
                end.name(),
                format_bytes(value as f64),
                format_bytes(need as f64),
                format_bytes(bdp as f64)
            );
            let change = format!("sysctl -w {key}=\"{set}\" ({})", end.name());
            finding("buffers", Status::Warn, found, Some(change))
        })
        .collect();
    if limits.window_scaling == Some(false) && need > 65_535 {
        let found = format!(
            "{}: TCP window scaling is off: windows stop at 64 KiB",
            end.name()
        );
        let change = format!("sysctl -w net.ipv4.tcp_window_scaling=1 ({})", end.name());
        findings.push(finding("buffers", Status::Warn, found, Some(change)));
    }
    findings
}

/// A `tcp_rmem`-style value with its maximum raised to `max`.
fn triple(current: Option<[u64; 3]>, max: u64) -> String {
    let [min, default, _] = current.unwrap_or([4096, 131_072, 0]);
    format!("{min} {default} {max}")
}

/// The two ends' MTUs, and whether packets as large as this end's MTU cross the path.
fn mtu_findings(exam: &Examination) -> Vec<Finding> {
    let mtu = |f: &HostFacts| f.egress.as_ref().and_then(|e| e.mtu);
    let (here, agent) = (mtu(&exam.local), mtu(&exam.remote));
    let mut findings = Vec::new();
    if let (Some(h), Some(a)) = (here, agent) {
        let small = h.min(a);
        let found = format!("MTU {h} here, {a} at the agent");
        if h == a {
            let found = format!(
                "{found}: UDP payloads up to {} B go unfragmented",
                h.saturating_sub(exam.udp_headers)
            );
            findings.push(finding("mtu", Status::Ok, found, None));
        } else {
            let found = format!(
                "{found}: packets above {small} B are fragmented, or lost where fragments are not made"
            );
            let change = format!(
                "set both ends' MTU to {small} (ip link set dev IF mtu {small}), or keep --size at most {} B",
                small.saturating_sub(exam.udp_headers)
            );
            findings.push(finding("mtu", Status::Warn, found, Some(change)));
        }
    }
    if let Some(probe) = &exam.mtu_probe {
        findings.push(mtu_probe_finding(probe, exam.udp_headers));
    }
    findings
}

fn mtu_probe_finding(probe: &Probe, headers: u32) -> Finding {
    let wire = probe.size + headers;
    match (&probe.error, probe.received) {
        (Some(e), _) => finding(
            "mtu",
            Status::Warn,
            format!("{wire} B probe failed: {e}"),
            None,
        ),
        (None, 0) => {
            let found = format!(
                "none of {} echoed packets of {wire} B crossed the path: its MTU is below this end's",
                probe.sent
            );
            let change = "find the hop with the smaller MTU (tracepath AGENT) and match it".into();
            finding("mtu", Status::Warn, found, Some(change))
        }
        (None, received) => {
            let found = format!(
                "{received} of {} packets of {wire} B crossed both ways",
                probe.sent
            );
            finding("mtu", Status::Ok, found, None)
        }
    }
}

/// Load and CPU frequency scaling of one end.
fn host_findings(end: End, facts: &HostFacts) -> Vec<Finding> {
    let who = end.name();
    let mut findings = Vec::new();
    if let Some(load) = facts.load_1m {
        let per_cpu = load / f64::from(facts.cpus);
        let found = format!("{who}: load {load:.2} on {} CPUs", facts.cpus);
        findings.push(if per_cpu > BUSY_LOAD_PER_CPU {
            let change = "run on an idle host, or give flowlab its own CPUs (--cpus)".to_string();
            finding("load", Status::Warn, format!("{found}: busy"), Some(change))
        } else {
            finding("load", Status::Ok, found, None)
        });
    }
    let scaling: Vec<&str> = facts
        .governors
        .iter()
        .map(String::as_str)
        .filter(|g| *g != "performance")
        .collect();
    findings.push(match (facts.governors.is_empty(), scaling.is_empty()) {
        (true, _) => finding(
            "cpufreq",
            Status::Ok,
            format!("{who}: no CPU frequency scaling exposed"),
            None,
        ),
        (false, true) => finding(
            "cpufreq",
            Status::Ok,
            format!("{who}: governor performance"),
            None,
        ),
        (false, false) => {
            let found = format!(
                "{who}: CPU frequency scaling ({}): timing varies with load",
                scaling.join(", ")
            );
            let change = format!("cpupower frequency-set -g performance ({who})");
            finding("cpufreq", Status::Warn, found, Some(change))
        }
    });
    findings
}

/// The egress interface and its qdiscs: drops, and whether the kernel can pace.
fn route_finding(end: End, facts: &HostFacts) -> Finding {
    let who = end.name();
    let Some(egress) = &facts.egress else {
        return finding(
            "route",
            Status::Note,
            format!("{who}: no route to the other end found"),
            None,
        );
    };
    let kinds = match egress.qdiscs.is_empty() {
        true => "no qdisc".to_string(),
        false => format!("qdisc {}", egress.qdiscs.join(", ")),
    };
    let found = format!("{who}: out of {}, {kinds}", egress.interface);
    match egress.qdisc_drops.filter(|&d| d > 0) {
        Some(drops) => {
            let found = format!("{found}, which dropped {drops} packets");
            let change = format!(
                "tc -s qdisc show dev {} ({who}): a shaper or a short queue drops this path's packets",
                egress.interface
            );
            finding("qdisc", Status::Warn, found, Some(change))
        }
        None if egress.paces => finding("qdisc", Status::Ok, format!("{found}: can pace"), None),
        None => {
            let found = format!("{found}: cannot pace UDP (--kernel-pacing needs fq)");
            let change = format!("tc qdisc replace dev {} root fq ({who})", egress.interface);
            finding("qdisc", Status::Note, found, Some(change))
        }
    }
}

/// Loss of the idle-rate test and where it happened.
fn loss_findings(exam: &Examination) -> Vec<Finding> {
    let Some(idle) = &exam.idle else {
        return Vec::new();
    };
    if let Some(e) = &idle.error {
        return vec![finding(
            "loss",
            Status::Warn,
            format!("idle-rate test failed: {e}"),
            None,
        )];
    }
    let mut findings = Vec::new();
    let found = format!(
        "{} of {} packets lost at an idle {} both ways",
        idle.sent.saturating_sub(idle.received),
        idle.sent,
        format_rate(idle.rate_bps as f64)
    );
    findings.push(if idle.received < idle.sent {
        let change =
            "find the drop: a shaper (tc -s qdisc), a full NIC ring (ethtool -S), a lossy link"
                .into();
        finding("loss", Status::Warn, found, Some(change))
    } else {
        finding("loss", Status::Ok, found, None)
    });
    if let Some(drops) = idle.socket_drops.filter(|&d| d > 0) {
        let found =
            format!("{drops} packets overflowed a receiving socket's buffer at an idle rate");
        let change = "raise net.core.rmem_default and rmem_max, or --recv-buffer".to_string();
        findings.push(finding(
            "socket-overflow",
            Status::Warn,
            found,
            Some(change),
        ));
    }
    findings
}

/// Clock sync between the ends: both disciplined, and the measured offset within bounds.
fn clock_finding(exam: &Examination) -> Finding {
    let Some(clock) = &exam.clock else {
        return finding(
            "clock",
            Status::Note,
            "no clock probe answered".into(),
            None,
        );
    };
    let offset = format!(
        "offset {} ± {}",
        format_duration_ns(clock.offset_ns as f64),
        format_duration_ns(clock.bound_ns as f64)
    );
    let unsynced: Vec<&str> = exam
        .ends()
        .filter(|(_, f)| f.clock_synchronized == Some(false))
        .map(|(end, _)| end.name())
        .collect();
    if !unsynced.is_empty() {
        let found = format!(
            "{offset}; not synchronised: {}: one-way delays are no better than the offset bound",
            unsynced.join(", ")
        );
        let change = "run chrony or ptp4l at both ends".to_string();
        return finding("clock", Status::Warn, found, Some(change));
    }
    let errors: u64 = exam.ends().filter_map(|(_, f)| f.clock_max_error_ns).sum();
    if clock.offset_ns.unsigned_abs() > clock.bound_ns + errors + CLOCK_SLACK_NS {
        let found = format!("{offset}: beyond both clocks' error bounds");
        let change = "check both ends' time sources (chronyc sources)".to_string();
        return finding("clock", Status::Warn, found, Some(change));
    }
    finding(
        "clock",
        Status::Ok,
        format!("{offset}: one-way delays good to the bound"),
        None,
    )
}

#[cfg(test)]
mod tests {
    use flowlab_control::host_facts::EgressFacts;

    use super::*;
    use crate::doctor::ClockCheck;

    fn host() -> HostFacts {
        HostFacts {
            buffers: BufferLimits {
                rmem_max: Some(8 << 20),
                wmem_max: Some(8 << 20),
                tcp_rmem: Some([4096, 131_072, 8 << 20]),
                tcp_wmem: Some([4096, 16_384, 8 << 20]),
                window_scaling: Some(true),
            },
            cpus: 4,
            load_1m: Some(0.5),
            governors: vec!["performance".into()],
            clock_synchronized: Some(true),
            clock_max_error_ns: Some(100_000),
            egress: Some(EgressFacts {
                interface: "eth0".into(),
                mtu: Some(1500),
                link_speed_bps: Some(1_000_000_000),
                qdiscs: vec!["fq".into()],
                qdisc_drops: Some(0),
                paces: true,
            }),
            udp_rcvbuf_errors: Some(0),
        }
    }

    fn probe(sent: u64, received: u64) -> Probe {
        Probe {
            size: 1472,
            rate_bps: 1_000_000,
            sent,
            received,
            socket_drops: Some(0),
            error: None,
        }
    }

    /// A sound path: 1 ms RTT at 1 Gbit/s.
    fn exam() -> Examination {
        Examination {
            target: "agent".into(),
            local: host(),
            remote: host(),
            clock: Some(ClockCheck {
                rtt_ns: 1_000_000,
                offset_ns: 20_000,
                bound_ns: 500_000,
            }),
            idle: Some(probe(400, 400)),
            mtu_probe: Some(probe(10, 10)),
            udp_headers: 28,
        }
    }

    /// The findings that warn, as (check, found).
    fn warnings(exam: &Examination) -> Vec<(&'static str, String)> {
        diagnose(exam)
            .into_iter()
            .filter(|f| f.status == Status::Warn)
            .map(|f| (f.check, f.found))
            .collect()
    }

    /// The text fits in 80 columns, each finding and its change carried on under itself.
    #[test]
    fn the_text_fits_in_80_columns() {
        let mut exam = exam();
        exam.local.load_1m = Some(6.29);
        exam.local.clock_synchronized = Some(false);
        let findings = diagnose(&exam);
        let text = crate::doctor::render(&crate::doctor::Diagnosis {
            examination: exam,
            findings,
        });
        for line in text.lines() {
            assert!(line.chars().count() <= 80, "{line}\n{text}");
        }
        assert!(
            text.contains("\nWARN  load            here: load 6.29"),
            "{text}"
        );
        assert!(
            text.contains("\n                      change: run on an idle host"),
            "{text}"
        );
    }

    #[test]
    fn a_sound_path_warns_of_nothing() {
        assert_eq!(bdp_bytes(&exam()), Some(125_000));
        assert_eq!(warnings(&exam()), []);
        let checks: Vec<&str> = diagnose(&exam()).iter().map(|f| f.check).collect();
        assert_eq!(
            checks,
            [
                "buffers", "mtu", "mtu", "load", "cpufreq", "load", "cpufreq", "qdisc", "qdisc",
                "loss", "clock"
            ]
        );
    }

    #[test]
    fn buffers_below_twice_the_bdp_are_named_with_their_sysctl() {
        let mut e = exam();
        e.remote.buffers.rmem_max = Some(4096);
        e.remote.buffers.window_scaling = Some(false);
        let findings = diagnose(&e);
        let short: Vec<&Finding> = findings
            .iter()
            .filter(|f| f.status == Status::Warn)
            .collect();
        assert_eq!(short.len(), 2, "{short:?}");
        assert!(
            short[0]
                .found
                .starts_with("agent: net.core.rmem_max allows 4"),
            "{}",
            short[0].found
        );
        assert_eq!(
            short[0].change.as_deref(),
            Some("sysctl -w net.core.rmem_max=\"262144\" (agent)")
        );
        assert_eq!(
            short[1].found,
            "agent: TCP window scaling is off: windows stop at 64 KiB"
        );
        e.local.buffers.tcp_rmem = Some([4096, 87_380, 65_536]);
        let local = diagnose(&e)
            .into_iter()
            .find(|f| f.found.starts_with("here"))
            .unwrap();
        assert_eq!(
            local.change.as_deref(),
            Some("sysctl -w net.ipv4.tcp_rmem=\"4096 87380 262144\" (here)")
        );
    }

    #[test]
    fn the_bdp_rate_is_the_slower_link_or_the_default() {
        let mut e = exam();
        e.remote.egress.as_mut().unwrap().link_speed_bps = Some(100_000_000);
        assert_eq!(path_rate_bps(&e), 100_000_000);
        for end in [&mut e.local, &mut e.remote] {
            end.egress.as_mut().unwrap().link_speed_bps = None;
        }
        assert_eq!(path_rate_bps(&e), DEFAULT_PATH_RATE_BPS);
        e.clock = None;
        assert_eq!(diagnose(&e)[0].status, Status::Note);
    }

    #[test]
    fn a_smaller_mtu_and_a_black_hole_are_flagged() {
        let mut e = exam();
        e.remote.egress.as_mut().unwrap().mtu = Some(1280);
        e.mtu_probe = Some(probe(10, 0));
        let w = warnings(&e);
        assert_eq!(w.len(), 2, "{w:?}");
        assert_eq!(w[0].1, "MTU 1500 here, 1280 at the agent: packets above 1280 B are fragmented, or lost where fragments are not made");
        assert_eq!(
            w[1].1,
            "none of 10 echoed packets of 1500 B crossed the path: its MTU is below this end's"
        );
    }

    #[test]
    fn busy_hosts_and_frequency_scaling_are_flagged_at_their_end() {
        let mut e = exam();
        e.local.load_1m = Some(3.5);
        e.remote.governors = vec!["performance".into(), "powersave".into()];
        let w = warnings(&e);
        assert_eq!(
            w,
            [
                ("load", "here: load 3.50 on 4 CPUs: busy".to_string()),
                (
                    "cpufreq",
                    "agent: CPU frequency scaling (powersave): timing varies with load".to_string()
                ),
            ]
        );
    }

    #[test]
    fn qdisc_drops_loss_and_socket_overflow_are_flagged() {
        let mut e = exam();
        let egress = e.remote.egress.as_mut().unwrap();
        (egress.qdiscs, egress.qdisc_drops, egress.paces) = (vec!["tbf".into()], Some(37), false);
        e.idle = Some(Probe {
            socket_drops: Some(3),
            ..probe(400, 360)
        });
        let checks: Vec<&str> = warnings(&e).iter().map(|w| w.0).collect();
        assert_eq!(checks, ["qdisc", "loss", "socket-overflow"]);
        let found = warnings(&e).remove(0).1;
        assert_eq!(
            found,
            "agent: out of eth0, qdisc tbf, which dropped 37 packets"
        );
        e.remote.egress.as_mut().unwrap().qdisc_drops = Some(0);
        let note = diagnose(&e)
            .into_iter()
            .find(|f| f.status == Status::Note)
            .unwrap();
        assert_eq!(
            note.change.as_deref(),
            Some("tc qdisc replace dev eth0 root fq (agent)")
        );
    }

    #[test]
    fn unsynchronised_or_disagreeing_clocks_are_flagged() {
        let mut e = exam();
        e.remote.clock_synchronized = Some(false);
        let w = warnings(&e);
        assert_eq!(w.len(), 1);
        assert!(w[0].1.contains("not synchronised: agent"), "{}", w[0].1);
        e.remote.clock_synchronized = Some(true);
        e.clock.as_mut().unwrap().offset_ns = -5_000_000;
        assert!(warnings(&e)[0]
            .1
            .ends_with("beyond both clocks' error bounds"));
    }
}
