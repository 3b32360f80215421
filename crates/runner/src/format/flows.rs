//! One line per flow of a multi-flow test and a `SUM` line, as iperf3's `-P` prints them.

use std::fmt::Write as _;

use flowlab_control::TestResult;
use flowlab_results::{FlowReceiverSummary, ReceiverReport};
use flowlab_spec::Direction;
use flowlab_units::{format_duration_ns, format_rate};

/// The receiver of the test's load: the agent's one-way, the client's otherwise.
fn load_receiver(r: &TestResult) -> Option<&ReceiverReport> {
    let side = match r.spec.direction {
        Direction::Oneway => r.agent.as_ref(),
        Direction::Reverse | Direction::Loopback => r.client.as_ref(),
    };
    side?.receiver.as_ref()
}

/// All flows as one: packets and goodput summed, loss over every packet due, delay weighted
/// by packets, jitter the mean over flows that received (as the summary's).
pub fn flows_total(flows: &[FlowReceiverSummary]) -> FlowReceiverSummary {
    let mut sum = FlowReceiverSummary {
        flow: 0,
        packets: Default::default(),
        bytes_received: 0,
        duration_ns: 0,
        goodput_bps: 0.0,
        loss_pct: 0.0,
        jitter_ns: 0.0,
        mean_relative_delay_ns: 0.0,
    };
    let mut weighted_delay = 0.0;
    let mut active = 0u32;
    for f in flows {
        let (p, s) = (&f.packets, &mut sum.packets);
        s.received += p.received;
        s.unique += p.unique;
        s.lost += p.lost;
        s.reordered += p.reordered;
        s.duplicates += p.duplicates;
        sum.bytes_received += f.bytes_received;
        sum.duration_ns = sum.duration_ns.max(f.duration_ns);
        sum.goodput_bps += f.goodput_bps;
        weighted_delay += f.mean_relative_delay_ns * p.unique as f64;
        if p.unique > 0 {
            sum.jitter_ns += f.jitter_ns;
            active += 1;
        }
    }
    let s = &sum.packets;
    if s.unique > 0 {
        sum.mean_relative_delay_ns = weighted_delay / s.unique as f64;
        sum.jitter_ns /= f64::from(active);
    }
    sum.loss_pct = flowlab_results::meter::loss_pct(s);
    sum
}

fn flow_line(label: &str, f: &FlowReceiverSummary) -> String {
    format!(
        "  {label:<5}  {:>9}  {:>7}  {:>7.3}%  {:>12}  {:>10}  {:>10}",
        f.packets.unique,
        f.packets.lost,
        f.loss_pct,
        format_rate(f.goodput_bps),
        format_duration_ns(f.mean_relative_delay_ns),
        format_duration_ns(f.jitter_ns)
    )
}

/// The per-flow table of a test with more than one flow; empty otherwise.
pub fn render_flows(r: &TestResult, out: &mut String) {
    let Some(flows) = load_receiver(r).map(|rx| &rx.flows).filter(|f| f.len() > 1) else {
        return;
    };
    let _ = writeln!(
        out,
        "  {:<5}  {:>9}  {:>7}  {:>8}  {:>12}  {:>10}  {:>10}",
        "flow", "received", "lost", "loss", "goodput", "delay mean", "jitter"
    );
    for f in flows {
        let _ = writeln!(out, "{}", flow_line(&format!("[{:>3}]", f.flow), f));
    }
    let _ = writeln!(out, "{}", flow_line("[SUM]", &flows_total(flows)));
}

#[cfg(test)]
mod tests {
    use super::*;
    use flowlab_results::meter::{Arrived, ReceiverMeter};
    use flowlab_results::{Role, SideReport};
    use flowlab_spec::{Protocol, TestSpec};

    /// Four flows of 100 packets, 10 µs apart; flow `i` loses `i` of them and arrives `i` µs
    /// later than flow 0.
    fn four_flows() -> TestResult {
        let mut meter = ReceiverMeter::new(4, false, false);
        for flow in 0..4u64 {
            for seq in flow..100 {
                let sent_ns = seq * 10_000;
                meter.on_packet(
                    flow as usize,
                    Arrived {
                        seq,
                        size: 1200,
                        sent_ns,
                        echoed_ns: None,
                        arrival_ns: sent_ns + 50_000 + flow * 1_000,
                        kernel_stamp: true,
                    },
                );
            }
        }
        let mut spec = TestSpec::new(Protocol::Udp, Direction::Oneway);
        spec.flows = 4;
        let agent = SideReport {
            receiver: Some(meter.report(Some(&[100; 4]))),
            ..SideReport::new(Role::Receiver, "agent".into())
        };
        let origin = flowlab_control::Origin {
            target: "a".into(),
            agent_address: "127.0.0.1:9470".into(),
            ipv6: false,
            started_at_ns: 0,
        };
        TestResult::new(spec, origin, None, Some(agent))
    }

    #[test]
    fn one_line_per_flow_and_their_sum() {
        let result = four_flows();
        let text = crate::format::render(&result);
        let lines: Vec<&str> = text.lines().collect();
        let head = lines
            .iter()
            .position(|l| l.trim_start().starts_with("flow "));
        let head = head.unwrap_or_else(|| panic!("no flow table in\n{text}"));
        let table = &lines[head..head + 6];
        assert!(table[1].trim_start().starts_with("[  0]"), "{text}");
        assert!(table[4].trim_start().starts_with("[  3]"), "{text}");
        assert!(table[5].trim_start().starts_with("[SUM]"), "{text}");
        assert!(table.iter().all(|l| l.chars().count() <= 80), "{text}");
        // Flow 3 lost its first 3 packets of 100; all flows 6 of 400.
        assert!(table[4].contains("  3.000%"), "{}", table[4]);
        assert!(table[5].contains("  1.500%"), "{}", table[5]);
        assert!(table[5].contains(" 394 "), "{}", table[5]);

        let flows = &result
            .agent
            .as_ref()
            .unwrap()
            .receiver
            .as_ref()
            .unwrap()
            .flows;
        let sum = flows_total(flows);
        let each: f64 = flows.iter().map(|f| f.goodput_bps).sum();
        assert_eq!(sum.goodput_bps, each);
        assert!(table[5].contains(&format_rate(each)), "{}", table[5]);
        // Flow 3 is 3 µs behind flow 0; weighted by packets the flows average 1.48 µs.
        assert_eq!(flows[3].mean_relative_delay_ns, 3_000.0);
        let weighted = (100.0 * 0.0 + 99.0 * 1e3 + 98.0 * 2e3 + 97.0 * 3e3) / 394.0;
        assert!((sum.mean_relative_delay_ns - weighted).abs() < 1e-6);
    }

    #[test]
    fn a_single_flow_has_no_flow_table() {
        let mut result = four_flows();
        let rx = result.agent.as_mut().unwrap().receiver.as_mut().unwrap();
        rx.flows.clear();
        let mut out = String::new();
        render_flows(&result, &mut out);
        assert_eq!(out, "");
    }

    /// The per-flow figures are in the result document, as the schema names them.
    #[test]
    fn per_flow_figures_are_in_the_json() {
        let json = serde_json::to_value(four_flows()).unwrap();
        let flow = &json["agent"]["receiver"]["flows"][2];
        assert_eq!(flow["flow"], 2);
        assert_eq!(flow["loss_pct"], 2.0);
        assert!(flow["goodput_bps"].as_f64().unwrap() > 900e6, "{flow}");
        assert_eq!(flow["mean_relative_delay_ns"], 2000.0);
    }
}
