use proptest::prelude::*;

use super::*;
use crate::models::Replay;
use crate::{Emission, EndCondition, PacedSchedule, PacerConfig};

const MS: u64 = 1_000_000;

fn policy() -> SendPolicy {
    SendPolicy {
        size: 1000,
        min_size: 32,
        max_size: 9000,
        drop_refused: true,
        ack_timeout_ns: None,
    }
}

fn config(schedule: Option<PacedSchedule>, count: Option<u64>, window: u64) -> PacerConfig {
    PacerConfig {
        schedule,
        end: EndCondition {
            until_ns: None,
            count,
        },
        train_window_ns: window,
        max_batch: 64,
        max_lateness_ns: 5 * MS,
    }
}

/// One flow of 1000 B packets 1 ms apart (8 Mbit/s) from `start`, `count` of them.
fn paced(start: u64, count: u64) -> (Pacer, u64) {
    let schedule = PacedSchedule::new(start, 8_000_000, 1000).unwrap();
    (Pacer::new(config(Some(schedule), Some(count), 0)), start)
}

fn core(flows: Vec<(Pacer, u64)>, policy: SendPolicy) -> SenderCore {
    SenderCore::new(flows, policy)
}

#[test]
fn each_packet_is_handed_out_on_its_slot_with_the_next_sequence_number() {
    let mut c = core(vec![paced(MS, 2)], policy());
    assert_eq!(c.poll(0), Poll::Wait { until_ns: MS });
    assert_eq!(c.poll(MS), Poll::Transmit { flow: 0 });
    assert_eq!(
        c.train(),
        &[Packet {
            seq: 0,
            size: 1000,
            due_ns: Some(MS)
        }]
    );
    assert_eq!(c.poll(MS), Poll::Transmit { flow: 0 }, "handed out again");
    assert_eq!(c.handle_sent(1), 0);
    assert_eq!(c.poll(MS + 1), Poll::Wait { until_ns: 2 * MS });
    assert_eq!(c.poll(2 * MS), Poll::Transmit { flow: 0 });
    assert_eq!(c.train()[0].seq, 1);
    c.handle_sent(1);
    assert_eq!(c.poll(3 * MS), Poll::Done);
    assert_eq!(c.error(), None);
}

/// Trains gathered across flows, reported taken, then partly refused by one send: the
/// refused packets' sequence numbers go to the flows' next packets.
#[test]
fn refused_packets_of_a_gathered_batch_give_back_their_sequence_numbers() {
    let mut c = core(vec![paced(0, 10), paced(0, 10)], policy());
    // 1.5 ms late: two packets of each flow are due.
    assert_eq!(c.poll(1_500_000), Poll::Transmit { flow: 0 });
    assert_eq!(c.handle_sent(2), 0);
    assert_eq!(c.poll(1_500_000), Poll::Transmit { flow: 1 });
    assert_eq!(c.handle_sent(2), 0);
    // The call took flow 0's two and the first of flow 1's.
    assert_eq!(c.handle_refused(1, 1), 1);
    assert_eq!(c.handle_refused(7, 1), 0, "no such flow");
    let next = |c: &mut SenderCore, flow| {
        assert_eq!(c.poll(2 * MS), Poll::Transmit { flow });
        let seq = c.train()[0].seq;
        c.handle_sent(1);
        seq
    };
    assert_eq!(next(&mut c, 0), 2);
    assert_eq!(next(&mut c, 1), 1, "the refused packet's number is reused");
}

#[test]
fn flows_are_served_in_order_of_their_deadlines() {
    let mut c = core(vec![paced(2 * MS, 1), paced(MS, 1)], policy());
    assert_eq!(c.poll(5 * MS), Poll::Transmit { flow: 1 });
    c.handle_sent(1);
    assert_eq!(c.poll(5 * MS), Poll::Transmit { flow: 0 });
    assert_eq!(c.train()[0].seq, 0, "sequence numbers are per flow");
}

#[test]
fn the_cap_trims_a_train_or_holds_its_flow() {
    let mut c = core(vec![paced(0, 10)], policy());
    // 3.5 ms late: four packets are due.
    assert_eq!(c.poll(3_500_000), Poll::Transmit { flow: 0 });
    assert_eq!(c.train().len(), 4);
    c.handle_budget(Ok(2));
    assert_eq!(c.train().len(), 2);
    assert_eq!(c.handle_sent(2), 0);
    // The two the cap held back are still due, with the next sequence numbers.
    assert_eq!(c.poll(3_500_000), Poll::Transmit { flow: 0 });
    assert_eq!(c.train().iter().map(|p| p.seq).collect::<Vec<_>>(), [2, 3]);
    c.handle_budget(Err(9 * MS));
    assert!(c.train().is_empty());
    assert_eq!(c.poll(4 * MS), Poll::Wait { until_ns: 9 * MS });
}

#[test]
fn what_the_socket_refuses_is_lost_when_paced_and_resent_otherwise() {
    let mut c = core(vec![paced(0, 10)], policy());
    c.poll(2_500_000);
    assert_eq!(c.train().len(), 3);
    assert_eq!(
        c.handle_sent(1),
        2,
        "two refused, lost to keep the schedule"
    );
    assert_eq!(c.poll(3 * MS), Poll::Transmit { flow: 0 });
    assert_eq!(c.train()[0].seq, 1, "lost packets take no sequence number");
    assert_eq!(c.train()[0].due_ns, Some(3 * MS));

    let max_rate = Pacer::new(config(None, Some(10), 0));
    let mut c = core(
        vec![(max_rate, 0)],
        SendPolicy {
            drop_refused: false,
            ..policy()
        },
    );
    c.poll(0);
    assert_eq!(c.train().len(), 10);
    assert_eq!(c.handle_sent(4), 0);
    c.poll(1);
    assert_eq!(c.train().len(), 6, "the refused six are sent later");
    assert_eq!(c.train()[0].seq, 4);
}

#[test]
fn a_model_names_each_size_within_the_bounds() {
    let list = [(0, 10), (0, 500), (0, 70_000)]
        .map(|(at_ns, size)| Emission { at_ns, size })
        .to_vec();
    let pacer = Pacer::from_source(
        Box::new(Replay::new(list).unwrap()),
        0,
        config(None, None, 0),
    );
    let mut c = core(vec![(pacer, 0)], policy());
    c.poll(0);
    let sizes: Vec<u32> = c.train().iter().map(|p| p.size).collect();
    assert_eq!(sizes, [32, 500, 9000]);
}

fn acked() -> SendPolicy {
    SendPolicy {
        ack_timeout_ns: Some(1_000 * MS),
        ..policy()
    }
}

#[test]
fn a_flow_never_acknowledged_sends_nothing() {
    let mut c = core(vec![paced(0, 10)], acked());
    assert_eq!(c.poll(0), Poll::Done);
    assert_eq!(
        c.error(),
        Some("flow 0: the client's data port never acknowledged: nothing sent to it")
    );
}

#[test]
fn acknowledgements_keep_a_flow_going_until_they_stop() {
    let mut c = core(vec![paced(0, 10_000)], acked());
    c.handle_ack(0, 0);
    assert_eq!(c.poll(0), Poll::Transmit { flow: 0 });
    c.handle_sent(1);
    c.handle_ack(0, 900 * MS);
    assert_eq!(c.poll(900 * MS), Poll::Transmit { flow: 0 });
    c.handle_sent(1);
    assert_eq!(c.poll(1_900 * MS), Poll::Transmit { flow: 0 });
    c.handle_sent(1);
    assert_eq!(c.poll(1_900 * MS + 1), Poll::Done);
    assert_eq!(
        c.error(),
        Some("flow 0: the client stopped acknowledging for 1.0 s: stopped sending")
    );
}

#[test]
fn an_unreachable_port_stops_an_acknowledged_sender_only() {
    let mut c = core(vec![paced(0, 10)], acked());
    c.handle_ack(0, 0);
    c.poll(0);
    c.handle_unreachable();
    assert_eq!(c.poll(MS), Poll::Done);
    assert!(c.error().unwrap().contains("unreachable (ICMP)"));

    let mut c = core(vec![paced(0, 3)], policy());
    c.poll(0);
    c.handle_unreachable();
    assert_eq!(c.poll(MS), Poll::Transmit { flow: 0 });
    assert_eq!(c.train()[0].due_ns, Some(MS), "the lost slot is passed");
    assert_eq!(c.train()[0].seq, 0);
}

#[test]
fn a_stop_or_a_failure_ends_sending() {
    let mut c = core(vec![paced(0, 10)], policy());
    c.poll(0);
    c.handle_stop();
    assert!(c.train().is_empty());
    assert_eq!(c.poll(MS), Poll::Done);
    assert_eq!(c.error(), None);

    let mut c = core(vec![paced(0, 10)], policy());
    c.poll(0);
    c.handle_failure("send failed: boom".into());
    assert_eq!(c.poll(MS), Poll::Done);
    assert_eq!(c.error(), Some("send failed: boom"));
}

#[test]
fn an_unlimited_looking_cap_admits_a_train_that_fits() {
    let mut cap = SendCap::new(80_000_000_000, 0);
    assert_eq!(cap.admit(0, 64, |_| 1000), Ok(64));
}

#[test]
fn a_cap_holds_the_long_run_rate() {
    // 8 Mbit/s = 1 MB/s: over 10 s of asking for 1000 B packets back to back, about
    // 10 MB leave (plus the 256 KiB burst), never more.
    let mut cap = SendCap::new(8_000_000, 0);
    let (mut now, mut sent) = (0u64, 0u64);
    while now < 10_000_000_000 {
        match cap.admit(now, 64, |_| 1000) {
            Ok(n) => {
                sent += n as u64 * 1000;
                now += 10_000;
            }
            Err(until) => now = until,
        }
    }
    let most = 10_000_000 + MIN_BURST_BYTES + 1000;
    assert!(sent <= most && sent > 9_900_000, "sent {sent} B");
}

/// What a virtual-time driver saw: (flow, packet, sent at).
type Sent = Vec<(usize, Packet, u64)>;

/// Drives `core` in virtual time as a simulator would: wakes `late(k)` ns after each wait,
/// asks the cap, lets the socket take `take(k)` of each train, and lets `gap(k)` ns pass
/// after each send. Returns what was sent and the bytes the cap admitted by each time.
fn drive(
    mut core: SenderCore,
    mut cap: Option<SendCap>,
    choices: &[u8],
) -> (Sent, Vec<(u64, u64)>) {
    let pick = |k: usize| u64::from(choices[k % choices.len()]);
    let (mut now, mut k, mut sent, mut admitted) = (0u64, 0usize, Vec::new(), Vec::new());
    let mut total = 0u64;
    for _ in 0..100_000 {
        k += 1;
        match core.poll(now) {
            Poll::Done => return (sent, admitted),
            Poll::Wait { until_ns } => now = until_ns + pick(k) * 10_000,
            Poll::Transmit { flow } => {
                if let Some(cap) = &mut cap {
                    let train = core.train();
                    core.handle_budget(cap.admit(now, train.len(), |j| train[j].size));
                }
                let train = core.train().to_vec();
                if train.is_empty() {
                    continue;
                }
                total += train.iter().map(|p| u64::from(p.size)).sum::<u64>();
                admitted.push((now, total));
                let taken = (pick(k) as usize % (train.len() + 1)).max(usize::from(k % 3 == 0));
                sent.extend(train[..taken].iter().map(|&p| (flow, p, now)));
                core.handle_sent(taken);
                now += pick(k + 1) * 100;
            }
        }
    }
    panic!("the core never finished");
}

fn flows_of(kinds: &[(u64, u32, bool)], window: u64, count: u64) -> Vec<(Pacer, u64)> {
    kinds
        .iter()
        .enumerate()
        .map(|(i, &(rate, size, modelled))| {
            let start = i as u64 * 7_000;
            let config = PacerConfig {
                train_window_ns: window,
                ..config(None, Some(count), window)
            };
            let pacer = match modelled {
                true => {
                    // Irregular gaps, some of them 0 (packets due together).
                    let list = (0..count)
                        .scan(0u64, |at_ns, j| {
                            *at_ns += j * 7_919 % 40_000 * (j % 3);
                            Some(Emission {
                                at_ns: *at_ns,
                                size: size / 2 + (j as u32 * 37) % size,
                            })
                        })
                        .collect();
                    Pacer::from_source(Box::new(Replay::new(list).unwrap()), start, config)
                }
                false => Pacer::new(PacerConfig {
                    schedule: Some(PacedSchedule::new(start, rate, size).unwrap()),
                    ..config
                }),
            };
            (pacer, start)
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn in_virtual_time_the_core_keeps_its_promises(
        kinds in prop::collection::vec(
            (1_000_000u64..2_000_000_000, 64u32..1500, any::<bool>()),
            1..4,
        ),
        window in 0u64..50_000,
        count in 1u64..300,
        cap_bps in prop::option::of(1_000_000u64..500_000_000),
        drop_refused in any::<bool>(),
        choices in prop::collection::vec(any::<u8>(), 1..32),
    ) {
        let policy = SendPolicy {
            size: 1000,
            min_size: 32,
            max_size: 1500,
            drop_refused,
            ack_timeout_ns: None,
        };
        let core = SenderCore::new(flows_of(&kinds, window, count), policy);
        let (sent, admitted) = drive(core, cap_bps.map(|r| SendCap::new(r, 0)), &choices);
        // Never before due: the head of a train leaves at or after its slot, the packets
        // riding with it at most the train window early.
        for (_, p, at) in &sent {
            let due = p.due_ns.unwrap_or(0);
            prop_assert!(at + window >= due, "sent at {at}, due {due}");
        }
        // Never beyond the cap: by any time, at most a burst plus the rate's worth.
        if let Some(rate) = cap_bps {
            let burst = u64::from(SendCap::burst_bytes(rate));
            for &(at, bytes) in &admitted {
                let earned = (u128::from(at) * u128::from(rate) / 8_000_000_000) as u64;
                let allowed = burst + earned + 1;
                prop_assert!(bytes <= allowed, "{bytes} B by {at} ns, the cap allows {allowed}");
            }
        }
        // Dense sequence numbers per flow, in order.
        for flow in 0..kinds.len() {
            let seqs: Vec<u64> =
                sent.iter().filter(|s| s.0 == flow).map(|s| s.1.seq).collect();
            let dense: Vec<u64> = (0..seqs.len() as u64).collect();
            prop_assert_eq!(seqs, dense);
        }
    }
}
