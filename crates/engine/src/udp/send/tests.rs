//! The UDP sender over a fake socket: what it sends, when, with which sequence numbers, and
//! how the budget, acknowledgements and send errors hold or stop it. Most tests step the
//! sender in virtual time (`step(now)`), the last runs it on the real clock.

use std::collections::VecDeque;
use std::io;
use std::sync::Mutex;
use std::time::Instant;

use flowlab_spec::{Direction, Protocol, TestSpec};
use flowlab_sys::timestamping::TxStamp;
use flowlab_traffic::PacingMode;
use flowlab_wire::ProbeRepr;

use super::*;

const MS: u64 = 1_000_000;

/// A datagram socket that records what it is given and answers sends from a script.
#[derive(Default)]
struct FakeSocket {
    /// Datagrams taken, and when (real time, for the real-clock test).
    sent: Mutex<Vec<(Vec<u8>, Instant)>>,
    /// Answers of the next send calls, front first; once empty, every datagram is taken.
    script: Mutex<VecDeque<io::Result<usize>>>,
    /// Datagrams waiting to be read (acknowledgements).
    inbox: Mutex<VecDeque<Vec<u8>>>,
    gso: bool,
    /// Calls of `send_segments`, which a GSO train goes out with.
    gso_calls: Mutex<usize>,
}

impl FakeSocket {
    fn scripted(answers: impl IntoIterator<Item = io::Result<usize>>) -> FakeSocket {
        FakeSocket {
            script: Mutex::new(answers.into_iter().collect()),
            ..FakeSocket::default()
        }
    }

    /// Takes `frames` as the script says: how many.
    fn take(&self, frames: &[&[u8]]) -> io::Result<usize> {
        let taken = match self.script.lock().unwrap().pop_front() {
            Some(Ok(n)) => n.min(frames.len()),
            Some(Err(e)) => return Err(e),
            None => frames.len(),
        };
        let now = Instant::now();
        let mut sent = self.sent.lock().unwrap();
        sent.extend(frames[..taken].iter().map(|f| (f.to_vec(), now)));
        Ok(taken)
    }

    /// (session, sequence number, length) of every datagram taken.
    fn probes(&self) -> Vec<(u32, u64, usize)> {
        let sent = self.sent.lock().unwrap();
        sent.iter()
            .map(|(d, _)| {
                let p = ProbeRepr::parse(d).unwrap();
                (p.session, p.seq, d.len())
            })
            .collect()
    }

    fn seqs(&self) -> Vec<u64> {
        self.probes().iter().map(|p| p.1).collect()
    }
}

impl DatagramSend for FakeSocket {
    fn send_frames(&self, frames: &[&[u8]], _nowait: bool) -> io::Result<usize> {
        self.take(frames)
    }
    fn gso_supported(&self) -> bool {
        self.gso
    }
    fn send_segments(&self, buf: &[u8], segment: u16, _nowait: bool) -> io::Result<usize> {
        *self.gso_calls.lock().unwrap() += 1;
        let frames: Vec<&[u8]> = buf.chunks(usize::from(segment)).collect();
        self.take(&frames).map(|n| n * usize::from(segment))
    }
    fn kernel_timed(&self) -> bool {
        false
    }
    fn send_at(&self, frame: &[u8], _txtime_ns: u64, _nowait: bool) -> io::Result<usize> {
        self.take(&[frame]).map(|_| frame.len())
    }
    fn recv_nowait(&self, buf: &mut [u8]) -> io::Result<usize> {
        let datagram = self.inbox.lock().unwrap().pop_front();
        let datagram = datagram.ok_or(io::ErrorKind::WouldBlock)?;
        buf[..datagram.len()].copy_from_slice(&datagram);
        Ok(datagram.len())
    }
    fn tx_stamps(&self, _out: &mut Vec<TxStamp>) -> io::Result<()> {
        Ok(())
    }
}

/// 1000 B packets at 8 Mbit/s: one every millisecond.
fn spec(count: u64) -> TestSpec {
    TestSpec {
        protocol: Protocol::Udp,
        direction: Direction::Oneway,
        rate_bps: Some(8_000_000),
        size: 1000,
        duration_ns: None,
        count: Some(count),
        interval_ns: None,
        flows: 1,
        client_udp_ports: vec![5000],
        raw: None,
        busy_poll: false,
        packet_log: false,
        socket: Default::default(),
        traffic: None,
        seed: 1,
        authenticated_packets: false,
        echo_every: None,
        omit_ns: None,
        pacing: Default::default(),
        multicast: None,
    }
}

const CTX: RunContext = RunContext {
    session: 42,
    send_cap_bps: None,
    return_cookie: None,
    packet_key: None,
    schedule_watch: None,
};

fn sender<'a>(
    socks: &'a [FakeSocket],
    spec: &TestSpec,
    ctx: &RunContext,
    budget: &'a SendBudget,
) -> Sender<'a, FakeSocket> {
    Sender::new(socks, 0, spec, ctx, budget, 0).unwrap()
}

#[test]
fn a_paced_flow_sends_each_packet_on_its_slot() {
    let socks = [FakeSocket::default()];
    let budget = SendBudget::new(None, 0);
    let mut s = sender(&socks, &spec(3), &CTX, &budget);
    assert!(matches!(s.step(0), Step::Sent));
    assert_eq!(socks[0].probes(), [(42, 0, 1000)]);
    assert!(matches!(s.step(1), Step::Idle { until_ns: MS }));
    assert!(matches!(s.step(MS - 1), Step::Idle { until_ns: MS }));
    assert_eq!(socks[0].seqs(), [0], "nothing before its slot");
    assert!(matches!(s.step(MS), Step::Sent));
    assert!(matches!(s.step(2 * MS + 500), Step::Sent));
    assert!(matches!(s.step(3 * MS), Step::Done));
    assert_eq!(socks[0].seqs(), [0, 1, 2]);
    let (meter, error) = s.finish();
    assert_eq!(error, None);
    assert_eq!(meter.report().packets_sent, 3);
}

#[test]
fn a_late_sender_sends_the_due_packets_as_one_train() {
    let socks = [FakeSocket::default()];
    let budget = SendBudget::new(None, 0);
    let mut s = sender(&socks, &spec(10), &CTX, &budget);
    assert!(matches!(s.step(3_500_000), Step::Sent));
    assert_eq!(socks[0].seqs(), [0, 1, 2, 3]);
    let (meter, _) = s.finish();
    assert_eq!(meter.report().batching.max_batch, 4);
}

#[test]
fn the_budget_holds_sending_to_the_cap() {
    // Max rate under an 8 Mbit/s cap: the 256 KiB burst (262 packets) leaves at once, then
    // the sender waits for tokens.
    let socks = [FakeSocket::default()];
    let budget = SendBudget::new(Some(8_000_000), 0);
    let max_rate = TestSpec {
        rate_bps: None,
        ..spec(10_000)
    };
    let mut s = sender(&socks, &max_rate, &CTX, &budget);
    while let Step::Sent = s.step(0) {
        if socks[0].seqs().len() > 262 {
            break;
        }
    }
    assert_eq!(socks[0].seqs().len(), 262);
    assert!(matches!(s.step(0), Step::Idle { until_ns: 856_000 }));
    assert!(matches!(s.step(856_000), Step::Sent));
    assert_eq!(socks[0].seqs(), (0..263).collect::<Vec<_>>());
}

#[test]
fn a_full_buffer_loses_paced_packets_without_using_their_numbers() {
    let socks = [FakeSocket::scripted([
        Err(io::ErrorKind::WouldBlock.into()),
    ])];
    let budget = SendBudget::new(None, 0);
    let mut s = sender(&socks, &spec(3), &CTX, &budget);
    s.step(0);
    assert!(socks[0].seqs().is_empty());
    s.step(MS);
    assert_eq!(
        socks[0].probes(),
        [(42, 0, 1000)],
        "the next slot, numbered 0"
    );
    let (meter, _) = s.finish();
    let report = meter.report();
    assert_eq!(report.lost_by_sender.send_buffer_full, 1);
}

const REVERSE: RunContext = RunContext {
    return_cookie: Some(7),
    ..CTX
};

fn acknowledged(cookie: u64) -> FakeSocket {
    let sock = FakeSocket::default();
    let ack = flowlab_wire::ack::emit_ack(cookie).to_vec();
    sock.inbox.lock().unwrap().push_back(ack);
    sock
}

#[test]
fn a_reverse_sender_sends_nothing_unacknowledged() {
    let budget = SendBudget::new(None, 0);
    for socks in [[FakeSocket::default()], [acknowledged(8)]] {
        let mut s = sender(&socks, &spec(3), &REVERSE, &budget);
        assert!(matches!(s.step(0), Step::Done));
        assert!(socks[0].sent.lock().unwrap().is_empty());
        let (_, error) = s.finish();
        assert_eq!(
            error.as_deref(),
            Some("flow 0: the client's data port never acknowledged: nothing sent to it")
        );
    }
}

#[test]
fn a_reverse_sender_stops_when_acknowledgements_stop() {
    let socks = [acknowledged(7)];
    let budget = SendBudget::new(None, 0);
    let mut s = sender(&socks, &spec(10_000), &REVERSE, &budget);
    assert!(matches!(s.step(0), Step::Sent));
    assert!(matches!(s.step(900 * MS), Step::Sent));
    assert!(matches!(s.step(1_001 * MS), Step::Done));
    let (_, error) = s.finish();
    assert!(error.unwrap().contains("stopped acknowledging"));
}

#[test]
fn an_unreachable_port_stops_only_a_reverse_sender() {
    let refused = || Err(io::ErrorKind::ConnectionRefused.into());
    let budget = SendBudget::new(None, 0);
    let socks = [FakeSocket::scripted([refused()])];
    socks[0]
        .inbox
        .lock()
        .unwrap()
        .push_back(flowlab_wire::ack::emit_ack(7).to_vec());
    let mut s = sender(&socks, &spec(3), &REVERSE, &budget);
    s.step(0);
    assert!(matches!(s.step(MS), Step::Done));
    let (meter, error) = s.finish();
    assert!(error.unwrap().contains("unreachable (ICMP)"));
    assert_eq!(meter.report().lost_by_sender.send_errors, 1);

    let socks = [FakeSocket::scripted([refused()])];
    let mut s = sender(&socks, &spec(3), &CTX, &budget);
    s.step(0);
    assert!(matches!(s.step(MS), Step::Sent));
    assert_eq!(socks[0].seqs(), [0], "the next packet goes out");
    let (meter, error) = s.finish();
    assert_eq!(error, None);
    assert_eq!(meter.report().lost_by_sender.send_errors, 1);
}

#[test]
fn any_other_send_error_ends_sending() {
    let socks = [FakeSocket::scripted([Err(io::Error::other("boom"))])];
    let budget = SendBudget::new(None, 0);
    let mut s = sender(&socks, &spec(3), &CTX, &budget);
    s.step(0);
    assert!(matches!(s.step(MS), Step::Done));
    assert_eq!(s.finish().1.as_deref(), Some("send failed: boom"));
}

#[test]
fn a_train_falls_back_from_gso_when_the_path_refuses_it() {
    let socks = [FakeSocket {
        gso: true,
        ..FakeSocket::scripted([Err(io::ErrorKind::InvalidInput.into())])
    }];
    let budget = SendBudget::new(None, 0);
    let mut s = sender(&socks, &spec(10), &CTX, &budget);
    s.step(3_500_000);
    s.step(4_500_000);
    assert_eq!(*socks[0].gso_calls.lock().unwrap(), 1, "GSO tried once");
    assert_eq!(socks[0].seqs(), [0, 1, 2, 3, 4]);
    let (meter, _) = s.finish();
    assert!(!meter.report().batching.gso);
}

#[test]
fn on_the_real_clock_packets_leave_on_schedule() {
    let socks = [FakeSocket::default()];
    let stop = AtomicBool::new(false);
    let started = Instant::now();
    let out = udp_send(&socks, &spec(5), &CTX, &stop);
    assert_eq!(out.error, None);
    assert_eq!(out.report.packets_sent, 5);
    assert_eq!(socks[0].seqs(), [0, 1, 2, 3, 4]);
    let sent = socks[0].sent.lock().unwrap();
    // Packet k is due k ms after the sender started, and never leaves earlier (less the
    // train window).
    for (k, (_, at)) in sent.iter().enumerate() {
        let after = at.duration_since(started).as_nanos() as u64;
        assert!(
            after + crate::TRAIN_WINDOW_NS >= k as u64 * MS,
            "packet {k} at {after} ns"
        );
    }
    assert!(started.elapsed().as_nanos() as u64 >= 4 * MS);
}

/// Coordinated omission: a sender 3 ms behind its schedule sends the due packets at once.
/// Their echoes' round trip from departure is the path's 100 µs; from the schedule it adds
/// each packet's lateness, 3 ms for the first, next to nothing for the one due now (beyond
/// the time the sender took to set up).
#[test]
fn a_late_sender_shows_its_lateness_in_the_round_trip_from_schedule() {
    use crate::udp::{record_datagram, Incoming, TrainScratch};
    use flowlab_results::meter::ReceiverMeter;
    let socks = [FakeSocket::default()];
    let budget = SendBudget::new(None, 0);
    let start = clock::monotonic_ns() - 3 * MS;
    let mut s = Sender::new(&socks, 0, &spec(4), &CTX, &budget, start).unwrap();
    s.remember_schedule(1);
    // Setting up may itself take a while on a loaded machine: the last packet, due at
    // `start` + 3 ms, is as late as the step.
    let stepped = clock::monotonic_ns();
    assert!(matches!(s.step(stepped), Step::Sent));
    let late = (stepped - start - 3 * MS) as f64;
    assert_eq!(
        socks[0].seqs(),
        [0, 1, 2, 3],
        "the late packets leave as one train"
    );
    let mut meter = ReceiverMeter::new(1, true, false);
    let from = Incoming {
        session: CTX.session,
        auth: None,
        book: s.book.as_ref(),
        header: flowlab_spec::DatagramHeader::Flowlab,
    };
    for (datagram, _) in socks[0].sent.lock().unwrap().iter() {
        let mut echo = datagram.clone();
        let mut header = flowlab_wire::ProbeHeader::new_checked(&mut echo[..]).unwrap();
        let sent_ns = header.sent_ns();
        header.set_echo(sent_ns + 50_000);
        let meta = udp::RecvMeta {
            len: echo.len(),
            kernel_rx_ns: Some(sent_ns + 100_000),
            ..udp::RecvMeta::default()
        };
        record_datagram(
            &mut meter,
            0,
            &from,
            &echo,
            meta,
            &mut TrainScratch::default(),
        );
    }
    let report = meter.report(None);
    let rtt = report.round_trip.unwrap();
    assert_eq!(
        (rtt.count, rtt.min_ns, rtt.max_ns),
        (4, 100_000.0, 100_000.0)
    );
    let due = report.round_trip_from_schedule.unwrap();
    assert_eq!(due.count, 4);
    assert!(due.max_ns >= 3_100_000.0 + late, "{due:?}, {late} ns late");
    assert!(due.max_ns < 4_100_000.0 + late, "{due:?}, {late} ns late");
    let on_time = (due.min_ns - late - rtt.min_ns).abs();
    assert!(
        on_time < 1_000_000.0,
        "the packet due now: {due:?}, {late} ns late"
    );
}

/// Three flows of one unconnected socket, each to its own receiver.
fn shared_flows(sock: &std::net::UdpSocket) -> (Vec<std::net::UdpSocket>, TestSpec) {
    let receivers: Vec<_> = (0..3)
        .map(|_| std::net::UdpSocket::bind("127.0.0.1:0").unwrap())
        .collect();
    for r in &receivers {
        r.set_nonblocking(true).unwrap();
    }
    sock.set_nonblocking(true).unwrap();
    let spec = TestSpec {
        flows: 3,
        client_udp_ports: vec![5000; 3],
        ..spec(4)
    };
    (receivers, spec)
}

/// (flow's receiver, sequence number) of every datagram waiting at the receivers.
fn arrived(receivers: &[std::net::UdpSocket]) -> Vec<(usize, u64)> {
    let mut buf = [0u8; 2000];
    let mut out = Vec::new();
    for (i, r) in receivers.iter().enumerate() {
        while let Ok(n) = r.recv(&mut buf) {
            out.push((i, ProbeRepr::parse(&buf[..n]).unwrap().seq));
        }
    }
    out
}

/// A sender of [`shared_flows`] under `pacing`, each flow to its own local receiver, handed to
/// `run` with the receivers.
fn on_shared_sender<R>(
    pacing: PacingMode,
    run: impl FnOnce(Sender<'_, crate::udp::SharedFlow<'_>>, &[std::net::UdpSocket]) -> R,
) -> R {
    let sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let (receivers, spec) = shared_flows(&sock);
    let spec = TestSpec { pacing, ..spec };
    let peers: Vec<_> = receivers.iter().map(|r| r.local_addr().unwrap()).collect();
    let flows = crate::udp::SharedFlow::all(&sock, &peers, None);
    let budget = SendBudget::new(None, 0);
    let s = Sender::new(&flows, 0, &spec, &CTX, &budget, 0).unwrap();
    run(s, &receivers)
}

/// A sender woken late finds every flow due: their packets leave in one sendmmsg, each to
/// its flow's peer with the flow's own sequence numbers, each departure metered.
#[test]
fn flows_of_a_shared_socket_due_at_once_leave_in_one_call() {
    let (meter, error) = on_shared_sender(PacingMode::Auto, |mut s, receivers| {
        // 2.2 ms in: slots 0..=2 of flow 0, 0..=1 of flows 1 and 2 (staggered by 1/3 ms).
        assert!(matches!(s.step(2_200_000), Step::Sent));
        std::thread::sleep(std::time::Duration::from_millis(20));
        let mut got = arrived(receivers);
        got.sort_unstable();
        assert_eq!(
            got,
            [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (2, 0), (2, 1)]
        );
        assert!(matches!(s.step(2_200_000), Step::Idle { .. }));
        s.finish()
    });
    assert_eq!(error, None);
    let report = meter.report();
    assert_eq!(report.packets_sent, 7);
    assert_eq!(
        (report.batching.syscalls, report.batching.max_batch),
        (1, 7)
    );
    assert_eq!(report.schedule_error.as_ref().map(|e| e.count), Some(7));
}

/// A send the kernel refuses for good (no route from an IPv4 socket to an IPv6 peer) ends
/// the sender with the error, every gathered packet counted as a send error.
#[test]
fn a_shared_send_that_fails_ends_sending() {
    let sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let (_receivers, spec) = shared_flows(&sock);
    let peers = vec!["[::1]:9".parse().unwrap(); 3];
    let flows = crate::udp::SharedFlow::all(&sock, &peers, None);
    let budget = SendBudget::new(None, 0);
    let mut s = Sender::new(&flows, 0, &spec, &CTX, &budget, 0).unwrap();
    s.step(2_200_000);
    assert!(matches!(s.step(2_200_000), Step::Done));
    let (meter, error) = s.finish();
    assert!(error.is_some_and(|e| e.starts_with("send failed")));
    let report = meter.report();
    assert_eq!(
        (report.packets_sent, report.lost_by_sender.send_errors),
        (0, 7)
    );
}

/// A shared send also takes the packets due within half the pacing mode's group window,
/// early by at most that half: none under precise pacing.
#[test]
fn a_shared_send_takes_what_is_due_within_half_the_group_window() {
    let sent_at_2_285_ms = |pacing: PacingMode| {
        on_shared_sender(pacing, |mut s, receivers| {
            assert!(matches!(s.step(2_285_000), Step::Sent));
            std::thread::sleep(std::time::Duration::from_millis(20));
            let mut got = arrived(receivers);
            got.sort_unstable();
            let report = s.finish().0.report();
            assert_eq!(report.batching.syscalls, 1);
            got
        })
    };
    let on_time = [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (2, 0), (2, 1)];
    assert_eq!(sent_at_2_285_ms(PacingMode::Precise), on_time);
    // Flow 1's third slot, due at 2.333 ms, is 48 µs ahead: within efficient's half window
    // (80 µs), not within auto's (20 µs, and the pacer's 4 µs train window).
    assert_eq!(sent_at_2_285_ms(PacingMode::Auto), on_time);
    let mut early = on_time.to_vec();
    early.insert(5, (1, 2));
    assert_eq!(sent_at_2_285_ms(PacingMode::Efficient), early);
}

/// A shared sender's next send is due half a window after the earliest deadline, so the
/// window is centred on it; precise pacing waits for the deadline itself.
#[test]
fn a_shared_sender_waits_until_the_middle_of_the_group_window() {
    let next_send = |pacing: PacingMode| {
        on_shared_sender(pacing, |mut s, _| {
            assert!(matches!(s.step(2_200_000), Step::Sent));
            match s.step(2_200_000) {
                Step::Idle { until_ns } => until_ns,
                _ => panic!("nothing more is due at 2.2 ms"),
            }
        })
    };
    // Flow 1's third slot, 1/3 ms after flow 0's, is the next deadline.
    let deadline = next_send(PacingMode::Precise);
    assert_eq!(deadline / 1000, 2_333);
    assert_eq!(next_send(PacingMode::Auto), deadline + 20_000);
    assert_eq!(next_send(PacingMode::Efficient), deadline + 80_000);
}
