//! The `flowlab` command on loopback: bad input, faults, protocol errors. No root needed.

mod common;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream, UdpSocket};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;

#[test]
fn bad_flags_are_one_clear_line() {
    let cases: &[(&[&str], &str)] = &[
        (&["test", "127.0.0.1", "--rate", "2Q"], "invalid rate '2Q'"),
        (
            &["test", "127.0.0.1", "--size", "0"],
            "below the 32-byte probe header",
        ),
        (
            &["test", "127.0.0.1", "--size", "70000"],
            "exceeds the UDP maximum of 65507 B",
        ),
        (
            &["test", "127.0.0.1", "--duration", "soon"],
            "invalid duration 'soon'",
        ),
        // The same checks as the agent's (one function): see tests/attacks.rs.
        (
            &["test", "127.0.0.1", "--interval", "1ms"],
            "invalid test: interval must be at least 10 ms",
        ),
        (
            &["test", "127.0.0.1", "--duration", "0s"],
            "invalid test: duration must be above 0 s",
        ),
        (
            &["test", "127.0.0.1", "--congestion", "a/b"],
            "invalid test: 'a/b' is not a congestion control name",
        ),
        (
            &["test", "no-such-host.invalid"],
            "cannot resolve host 'no-such-host.invalid'",
        ),
        (&["test", "127.0.0.1:notaport"], "invalid port 'notaport'"),
        (
            &["test", "127.0.0.1", "--key-file", "/nonexistent/key"],
            "cannot read key file /nonexistent/key",
        ),
        (
            &["test", "127.0.0.1", "--cpus", "3-1"],
            "invalid CPU list '3-1'",
        ),
        (
            &["test", "127.0.0.1", "--cpus", "4000"],
            "cannot run on CPUs 4000: no such CPU is online here",
        ),
        (
            &["serve", "--port", "0", "--cpus", "4000"],
            "cannot run on CPUs 4000",
        ),
    ];
    for (args, needle) in cases {
        let o = flowlab(args);
        assert_one_line_error(&o, needle);
    }
}

#[test]
fn connection_refused_is_one_line() {
    // A port that was just free: nothing listens there.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let o = flowlab(&["test", &format!("127.0.0.1:{port}"), "-d", "1s"]);
    assert_one_line_error(&o, "connection refused");
}

/// Issue 12: `--rate 1000T`-like rates ran and reported billions of packets "lost by sender".
#[test]
fn a_rate_far_beyond_the_path_is_refused_unless_forced() {
    let o = flowlab(&["test", "127.0.0.1:1", "--rate", "5T", "-d", "1s"]);
    assert_one_line_error(
        &o,
        "rate 5.00 Tbit/s is far beyond the path (lo has no link speed",
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    // Forced, it goes on to ask the agent (none listens on port 1).
    let o = flowlab(&[
        "test",
        "127.0.0.1:1",
        "--rate",
        "5T",
        "-d",
        "1s",
        "--force-rate",
    ]);
    assert_one_line_error(&o, "connection refused");
    // A sweep is refused before its first point for the one point beyond the path.
    let o = flowlab(&["sweep", "127.0.0.1:1", "--vary", "rate=1M,5T", "-d", "1s"]);
    assert_one_line_error(&o, "rate 5.00 Tbit/s is far beyond the path");
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
}

#[test]
fn port_in_use_is_one_line() {
    // Also on the default dual-stack address: the IPv4 fallback does not hide it.
    let taken = TcpListener::bind("[::]:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    let o = flowlab(&["serve", "--port", &port]);
    assert_one_line_error(&o, "Address already in use");

    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    let o = flowlab(&["serve", "--bind", "127.0.0.1", "--port", &port]);
    assert_one_line_error(&o, "cannot listen on 127.0.0.1");
}

#[test]
fn agent_of_another_protocol_version_is_named() {
    // A fake agent that answers the hello with version 99.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let fake = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let mut hello = [0u8; 16];
        s.read_exact(&mut hello).unwrap();
        let mut reply = *b"FLOWLAB\0\x00\x63\x00\x00\0\0\0\0";
        reply[9] = 99;
        s.write_all(&reply).unwrap();
    });
    let o = flowlab(&["test", &addr.to_string(), "-d", "1s"]);
    let ours = flowlab_wire::PROTOCOL_VERSION;
    assert_one_line_error(
        &o,
        &format!("speaks protocol version 99, this client speaks {ours}"),
    );
    fake.join().unwrap();
}

#[test]
fn agent_tells_an_old_client_its_version_and_keeps_serving() {
    let agent = loopback_agent(&[]);
    let mut s = TcpStream::connect(&agent.addr).unwrap();
    s.write_all(b"FLOWLAB\0\x00\x07\x00\x00\0\0\0\0").unwrap();
    let mut hello = [0u8; 16];
    s.read_exact(&mut hello).unwrap();
    assert_eq!(&hello[..8], b"FLOWLAB\0");
    assert_eq!(
        u16::from_be_bytes([hello[8], hello[9]]),
        flowlab_wire::PROTOCOL_VERSION
    );
    // Then it hangs up on the old client.
    let mut rest = Vec::new();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    assert_eq!(s.read_to_end(&mut rest).unwrap(), 0);
    let o = flowlab(&["test", &agent.addr, "-n", "20", "--rate", "1M", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
}

#[test]
fn garbage_on_the_control_port_and_stray_datagrams_do_not_disturb_other_clients() {
    let agent = loopback_agent(&[]);
    // Clients that send random bytes, or nothing, or a valid hello then a broken frame.
    let mut junk = Vec::new();
    for seed in 0..5u32 {
        let mut s = TcpStream::connect(&agent.addr).unwrap();
        let bytes: Vec<u8> = (0..200u32)
            .map(|i| (i.wrapping_mul(2654435761).wrapping_add(seed) >> 13) as u8)
            .collect();
        let _ = s.write_all(&bytes);
        junk.push(s);
    }
    let mut s = TcpStream::connect(&agent.addr).unwrap();
    s.write_all(&common::attacker::HELLO).unwrap();
    let _ = s.write_all(b"\x00\x00\x00\x05\x01{{{{");
    junk.push(s);
    // Random datagrams at the agent's ports, while a real test runs.
    let port: u16 = agent.addr.rsplit(':').next().unwrap().parse().unwrap();
    let stray = std::thread::spawn(move || {
        let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
        let end = Instant::now() + Duration::from_millis(800);
        let mut i = 0u16;
        while Instant::now() < end {
            for p in [port, port.wrapping_add(i % 50)] {
                let _ = sock.send_to(&[0xde, 0xad, 0xbe, 0xef, i as u8], ("127.0.0.1", p));
            }
            i = i.wrapping_add(1);
            std::thread::sleep(Duration::from_millis(1));
        }
    });
    let o = flowlab(&[
        "test",
        &agent.addr,
        "-d",
        "1s",
        "--rate",
        "2M",
        "--size",
        "500",
        "--json",
    ]);
    stray.join().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let v = json(&o);
    assert_eq!(f64_at(&v, "/summary/packets_lost"), 0.0);
    drop(junk);
    // The agent is still alive and serving.
    let o = flowlab(&["test", &agent.addr, "-n", "10", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
}

#[test]
fn limits_are_refused_with_the_reason() {
    let agent = loopback_agent(&["--max-rate", "1M", "--max-duration", "5s"]);
    let o = flowlab(&["test", &agent.addr, "--rate", "2M", "-d", "1s"]);
    assert_one_line_error(
        &o,
        "rate 2.00 Mbit/s exceeds the agent's limit of 1.00 Mbit/s (--max-rate)",
    );
    let o = flowlab(&["test", &agent.addr, "--rate", "100k", "-d", "10s"]);
    assert_one_line_error(
        &o,
        "duration 10.0 s exceeds the agent's limit of 5.0 s (--max-duration)",
    );
    // --rate max runs held to the limit, and says so.
    let o = flowlab(&["test", &agent.addr, "--tcp", "-d", "1s", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v = json(&o);
    let notes = v["agent"]["notes"].to_string();
    assert!(notes.contains("the agent's limit (--max-rate)"), "{notes}");
    assert!(f64_at(&v, "/summary/bytes_received") <= 125e3 + 262_144.0 + 256e3);
}

#[test]
fn key_is_required_and_checked() {
    let dir = std::env::temp_dir().join(format!("flowlab-key-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let key = dir.join("key");
    let wrong = dir.join("wrong");
    std::fs::write(&key, "correct horse battery staple\n").unwrap();
    std::fs::write(&wrong, "something else\n").unwrap();
    let agent = loopback_agent(&["--key-file", key.to_str().unwrap()]);
    let o = flowlab(&["test", &agent.addr, "-n", "10"]);
    assert_one_line_error(&o, "requires a pre-shared key");
    let o = flowlab(&[
        "test",
        &agent.addr,
        "-n",
        "10",
        "--key-file",
        wrong.to_str().unwrap(),
    ]);
    assert_one_line_error(&o, "authentication failed");
    let o = flowlab(&[
        "test",
        &agent.addr,
        "-n",
        "10",
        "--key-file",
        key.to_str().unwrap(),
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_every_slot_accounted(&json(&o), 10.0);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn agent_killed_mid_test_is_reported_within_3s_and_results_are_kept() {
    let mut agent = loopback_agent(&[]);
    let out = std::env::temp_dir().join(format!("flowlab-killed-{}.json", std::process::id()));
    let client = Command::new(FLOWLAB)
        .args([
            "test",
            &agent.addr,
            "-d",
            "20s",
            "--rate",
            "1M",
            "--json",
            "-o",
            out.to_str().unwrap(),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    agent.child.kill().unwrap();
    let killed_at = Instant::now();
    let o = client.wait_with_output().unwrap();
    let took = killed_at.elapsed();
    assert!(
        took < Duration::from_secs(3),
        "client took {took:?} to notice"
    );
    assert!(!o.status.success());
    assert!(stderr(&o).contains("agent lost"), "{}", stderr(&o));
    let v = json(&o);
    assert!(
        f64_at(&v, "/summary/packets_sent") > 50.0,
        "measured packets were lost: {v:#}"
    );
    let saved: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    assert_eq!(saved, v);
    let _ = std::fs::remove_file(out);
}

#[test]
fn ctrl_c_stops_cleanly_with_partial_results_as_valid_json() {
    let agent = loopback_agent(&[]);
    let client = Command::new(FLOWLAB)
        .args(["test", &agent.addr, "-d", "20s", "--rate", "1M", "--json"])
        .env("FLOWLAB_DB", test_db())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    let pid = client.id().to_string();
    assert!(Command::new("kill")
        .args(["-INT", &pid])
        .status()
        .unwrap()
        .success());
    let o = client.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(130), "{}", stderr(&o));
    let v = json(&o);
    assert_eq!(v["interrupted"], serde_json::Value::Bool(true));
    assert!(f64_at(&v, "/summary/packets_received") > 50.0);
    // The agent reported its side before the client ended.
    assert!(v["agent"].is_object(), "{v:#}");
}

#[test]
fn json_stream_is_one_object_per_line() {
    let agent = loopback_agent(&[]);
    let o = flowlab(&[
        "test",
        &agent.addr,
        "-d",
        "1s",
        "-i",
        "250ms",
        "--json-stream",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let lines: Vec<serde_json::Value> = String::from_utf8(o.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).expect("each line is JSON"))
        .collect();
    assert!(lines.len() >= 4, "{lines:?}");
    assert!(lines[..lines.len() - 1]
        .iter()
        .all(|l| l["type"] == "interval"));
    assert_eq!(lines.last().unwrap()["type"], "result");

    // Request/response intervals count transactions: together, every one of the test's.
    let o = flowlab(&[
        "test",
        &agent.addr,
        "--traffic",
        "rr:request=64,response=1k",
        "--flows",
        "2",
        "-d",
        "1s",
        "-i",
        "250ms",
        "--json-stream",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let lines: Vec<serde_json::Value> = String::from_utf8(o.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).expect("each line is JSON"))
        .collect();
    let (intervals, result) = lines.split_at(lines.len() - 1);
    assert!(intervals.len() >= 4, "{lines:?}");
    let in_intervals: f64 = intervals
        .iter()
        .map(|l| f64_at(&l["data"], "/packets"))
        .sum();
    let total = f64_at(&result[0]["data"], "/client/transactions/transactions");
    assert!(total > 0.0);
    assert_eq!(in_intervals, total, "{lines:?}");
}

#[test]
fn packet_log_has_a_row_per_packet() {
    let agent = loopback_agent(&[]);
    let path = std::env::temp_dir().join(format!("flowlab-packets-{}.csv", std::process::id()));
    let o = flowlab(&[
        "test",
        &agent.addr,
        "-n",
        "100",
        "--rate",
        "1M",
        "--size",
        "200",
        "--mode",
        "loopback",
        "--packet-log",
        path.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let csv = std::fs::read_to_string(&path).unwrap();
    let rows: Vec<&str> = csv.lines().collect();
    assert_eq!(rows[0], "flow,seq,size,sent_ns,received_ns,echoed_ns,lost");
    assert_eq!(rows.len(), 101);
    for (i, row) in rows[1..].iter().enumerate() {
        let f: Vec<&str> = row.split(',').collect();
        assert_eq!(f[0], "0");
        assert_eq!(f[1], i.to_string());
        assert_eq!(f[2], "200");
        let sent: u64 = f[3].parse().unwrap();
        let received: u64 = f[4].parse().unwrap();
        let echoed: u64 = f[5].parse().unwrap();
        assert!(sent <= echoed && echoed <= received, "{row}");
        assert_eq!(f[6], "0");
    }
    let _ = std::fs::remove_file(path);
}

#[test]
fn parallel_flows_each_keep_their_own_accounting() {
    let agent = loopback_agent(&[]);
    for args in [
        &["--udp", "--mode", "oneway"][..],
        &["--udp", "--reverse"],
        &["--udp", "--mode", "loopback"],
        &["--tcp", "--mode", "oneway"],
        &["--tcp", "--reverse"],
        &["--tcp", "--mode", "loopback"],
    ] {
        let mut all = vec![
            "test",
            agent.addr.as_str(),
            "--flows",
            "8",
            "--rate",
            "400k",
            "--size",
            "500",
            "-n",
            "40",
            "--json",
        ];
        all.extend_from_slice(args);
        let o = flowlab(&all);
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
        let v = json(&o);
        // A slot the sender woke too late for (a loaded machine) is skipped and counted.
        let sent = f64_at(&v, "/summary/packets_sent");
        assert_eq!(
            sent + f64_at(&v, "/summary/lost_by_sender"),
            320.0,
            "{args:?}"
        );
        // Most slots are kept even on a loaded machine; a broken sender keeps none.
        assert!(sent >= 200.0, "{args:?}: only {sent} sent");
        assert_eq!(f64_at(&v, "/summary/packets_received"), sent, "{args:?}");
        assert_eq!(f64_at(&v, "/summary/duplicates"), 0.0, "{args:?}");
        // Each end reports its process's peak memory: more than a binary's few pages.
        for end in ["/client", "/agent"] {
            let rss = f64_at(&v, &format!("{end}/cpu/process_max_rss_bytes"));
            assert!(rss > 1e6, "{args:?}: {end} peak memory {rss} B");
        }
        // Per-flow tables at the receiving end: 8 flows of 40 packets each.
        let receiving = if args.contains(&"--reverse") || args.contains(&"loopback") {
            "client"
        } else {
            "agent"
        };
        let flows = v[receiving]["receiver"]["flows"]
            .as_array()
            .unwrap_or_else(|| panic!("{args:?}: {v:#}"));
        assert_eq!(flows.len(), 8);
        // Each flow counts its own 40 (fewer only by slots its sender skipped).
        let unique: Vec<f64> = flows.iter().map(|f| f64_at(f, "/packets/unique")).collect();
        assert!(unique.iter().all(|&u| u <= 40.0), "{args:?}: {unique:?}");
        assert_eq!(unique.iter().sum::<f64>(), sent, "{args:?}: {unique:?}");
        if f64_at(&v, "/summary/lost_by_sender") == 0.0 {
            assert!(unique.iter().all(|&u| u == 40.0), "{args:?}: {unique:?}");
        }
    }
}

/// From 64 one-way flows the client sends from one shared socket: every agent socket hears
/// its flow from the one port, each flow with its own accounting.
#[test]
fn many_one_way_flows_share_one_client_socket() {
    let agent = loopback_agent(&[]);
    let o = flowlab(&[
        "test",
        &agent.addr,
        "--flows",
        "64",
        "--rate",
        "80k",
        "--size",
        "100",
        "-n",
        "10",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v = json(&o);
    let ports = v["spec"]["client_udp_ports"].as_array().unwrap();
    assert_eq!(ports.len(), 64);
    assert!(ports.iter().all(|p| *p == ports[0]), "one port: {ports:?}");
    let sent = f64_at(&v, "/summary/packets_sent");
    assert_eq!(sent + f64_at(&v, "/summary/lost_by_sender"), 640.0);
    assert!(sent >= 400.0, "only {sent} sent");
    assert_eq!(f64_at(&v, "/summary/packets_received"), sent);
    let flows = v["agent"]["receiver"]["flows"].as_array().unwrap();
    let unique: Vec<f64> = flows.iter().map(|f| f64_at(f, "/packets/unique")).collect();
    assert_eq!(unique.len(), 64);
    assert!(unique.iter().all(|&u| u <= 10.0), "{unique:?}");
    assert_eq!(unique.iter().sum::<f64>(), sent);
}

#[test]
fn every_mode_and_protocol_runs_on_ipv6_loopback_too() {
    let mut cmd = Command::new(FLOWLAB);
    cmd.args(["serve", "--bind", "::1", "--port", "0"]);
    let agent = start_agent(cmd);
    for proto in ["--udp", "--tcp"] {
        for mode in [
            &["--mode", "oneway"][..],
            &["--mode", "loopback"],
            &["--reverse"],
        ] {
            let mut args = vec![
                "test",
                agent.addr.as_str(),
                proto,
                "-n",
                "50",
                "--rate",
                "2M",
                "--size",
                "1000",
                "--json",
            ];
            args.extend_from_slice(mode);
            let o = flowlab(&args);
            assert!(o.status.success(), "{args:?}: {}", stderr(&o));
            let v = json(&o);
            assert_every_slot_accounted(&v, 50.0);
            assert!(v["agent_address"].as_str().unwrap().starts_with("[::1]"));
        }
    }
}

#[test]
fn transmit_timestamps_measure_every_paced_departure() {
    let agent = loopback_agent(&[]);
    let o = flowlab(&[
        "test",
        &agent.addr,
        "--rate",
        "4M",
        "--size",
        "1000",
        "-n",
        "200",
        "--tx-timestamps",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v = json(&o);
    let stamped = f64_at(&v, "/client/sender/departure_error/count");
    // Stamps can be dropped by the kernel under pressure, but not many on an idle loopback.
    assert!(stamped >= 190.0, "only {stamped} of 200 departures stamped");
    // A packet cannot leave before the application handed it over.
    assert!(
        f64_at(&v, "/client/sender/departure_error/p50_ns")
            >= f64_at(&v, "/client/sender/schedule_error/min_ns")
    );
    assert_eq!(
        v["client"]["sender"]["batching"]["gso"], false,
        "stamps are per datagram"
    );
}

/// Issue 12: RTT inside a load. At 2000 packets/s with every 10th echoed, about 200 echoes
/// a second come back, each with its round trip from departure and from its schedule; the
/// load itself still arrives whole at the agent.
#[test]
fn echo_every_measures_round_trips_inside_a_one_way_load() {
    let agent = loopback_agent(&[]);
    let o = flowlab(&[
        "test",
        &agent.addr,
        "--rate",
        "16M",
        "--size",
        "1000",
        "-d",
        "2s",
        "--echo-every",
        "10",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v = json(&o);
    let sent = f64_at(&v, "/summary/packets_sent");
    let echoed = f64_at(&v, "/summary/echoes/unique");
    let due = echoed + f64_at(&v, "/summary/echoes/lost");
    assert_eq!(
        due,
        (sent / 10.0).ceil(),
        "one echo due per 10 packets sent"
    );
    assert!(echoed >= due - 5.0, "{echoed} of {due} echoes came back");
    // Echoes are due per 10 slots of the schedule; a loaded machine may skip a few slots.
    let slots = sent + f64_at(&v, "/summary/lost_by_sender");
    let per_sec = slots / 10.0 / f64_at(&v, "/summary/duration_s");
    assert!((180.0..=220.0).contains(&per_sec), "{per_sec} echoes/s due");
    assert!(sent >= 0.99 * slots, "{sent} of {slots} slots sent");
    assert_eq!(f64_at(&v, "/agent/echo/packets_echoed"), due);
    assert_eq!(f64_at(&v, "/summary/packets_received"), sent);
    assert_eq!(f64_at(&v, "/summary/round_trip/count"), echoed);
    assert_eq!(
        f64_at(&v, "/summary/round_trip_from_schedule/count"),
        echoed
    );
    // Each echo's round trip from its schedule is the one from its departure plus its
    // lateness, which is never below minus the 4 µs train window.
    for stat in ["min_ns", "p50_ns", "max_ns"] {
        let departed = f64_at(&v, &format!("/summary/round_trip/{stat}"));
        let due = f64_at(&v, &format!("/summary/round_trip_from_schedule/{stat}"));
        assert!(
            departed > 0.0 && due >= departed - 5_000.0,
            "{stat}: {departed} vs {due}"
        );
    }
    assert!(v["intervals"].as_array().unwrap().is_empty());
}

#[test]
fn presets_and_traffic_models_run_with_one_flow_per_sub_flow() {
    let agent = loopback_agent(&[]);
    let o = flowlab(&[
        "test",
        &agent.addr,
        "--preset",
        "videoconf-1998",
        "-d",
        "3s",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v = json(&o);
    assert_eq!(f64_at(&v, "/spec/flows"), 2.0, "audio and video");
    let flows = v["agent"]["receiver"]["flows"]
        .as_array()
        .expect("per-flow table");
    let audio_bps = f64_at(&flows[0], "/bytes_received") * 8.0 / 3.0;
    assert!(
        (50e3..80e3).contains(&audio_bps),
        "audio at {audio_bps} bit/s, the paper's is 64 kbit/s"
    );
    let video_bps = f64_at(&flows[1], "/bytes_received") * 8.0 / 3.0;
    assert!(
        (0.5e6..1.5e6).contains(&video_bps),
        "video at {video_bps} bit/s"
    );
    // The same seed replays the same traffic: the same packet count.
    let again = json(&flowlab(&[
        "test",
        &agent.addr,
        "--preset",
        "videoconf-1998",
        "-d",
        "3s",
        "--json",
    ]));
    assert_eq!(
        f64_at(&again, "/summary/packets_sent") + f64_at(&again, "/summary/lost_by_sender"),
        f64_at(&v, "/summary/packets_sent") + f64_at(&v, "/summary/lost_by_sender"),
        "{:#} {:#}",
        again["client"]["sender"],
        v["client"]["sender"]
    );
    let o = flowlab(&[
        "test",
        &agent.addr,
        "--traffic",
        "poisson:pps=500,size=uniform:100..1000",
        "-d",
        "1s",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_one_line_error(
        &flowlab(&["test", &agent.addr, "--traffic", "pareto-gaps"]),
        "invalid traffic",
    );
    assert_one_line_error(
        &flowlab(&[
            "test",
            &agent.addr,
            "--tcp",
            "--mode",
            "loopback",
            "--preset",
            "voip-g711",
        ]),
        "a traffic model over TCP runs one-way or reverse",
    );
    // The AQUILA TCP flows go over TCP unless told otherwise, in length-framed messages.
    let o = flowlab(&[
        "test",
        &agent.addr,
        "--preset",
        "aquila-flow4",
        "-d",
        "1s",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v = json(&o);
    assert_eq!(v["spec"]["protocol"], "tcp");
    assert!(f64_at(&v, "/summary/packets_received") >= 8.0, "{v:#}");
    assert_eq!(
        f64_at(&v, "/summary/bytes_received"),
        f64_at(&v, "/summary/packets_received") * 1500.0,
        "each message is the model's 1500 bytes"
    );
}

#[test]
fn request_response_input_is_checked_in_one_line() {
    let agent = loopback_agent(&[]);
    let cases: &[(&[&str], &str)] = &[
        (
            &["--traffic", "rr:response=0"],
            "response size 0 B is outside",
        ),
        (
            &["--traffic", "rr:response=1G"],
            "response size 1000000000 B is outside",
        ),
        (
            &["--traffic", "rr:answer=1k"],
            "unknown option 'answer' for rr",
        ),
        (
            &["--traffic", "crr", "--proto", "udp"],
            "crr opens a TCP connection",
        ),
        (
            &["--traffic", "rr", "--reverse"],
            "--reverse and --mode loopback do not apply",
        ),
        (
            &["--traffic", "rr", "--rate", "1M"],
            "--rate does not apply",
        ),
        (
            &["--traffic", "rr", "--proto", "raw"],
            "rr runs over TCP or UDP",
        ),
        (
            &["--traffic", "rr:response=100k", "--proto", "udp"],
            "a UDP response is one datagram",
        ),
    ];
    for (extra, needle) in cases {
        let mut args = vec!["test", agent.addr.as_str(), "-d", "1s"];
        args.extend_from_slice(extra);
        assert_one_line_error(&flowlab(&args), needle);
    }
    // Under a limit, responses are held to it: 10k responses of 1 kB at 1 Mbit/s take
    // seconds, so a 1 s test answers at most about the limit's worth.
    let limited = loopback_agent(&["--max-rate", "1M"]);
    let o = flowlab(&[
        "test",
        &limited.addr,
        "--traffic",
        "rr:response=1k",
        "-d",
        "1s",
        "--json",
        "--no-store",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let bytes = f64_at(&json(&o), "/agent/responder/response_bytes");
    assert!(
        bytes <= 125e3 + 262_144.0 + 2e3,
        "{bytes} B of responses past 1 Mbit/s"
    );
    // A human report with units, and the run stored.
    let o = flowlab(&[
        "test",
        &agent.addr,
        "--traffic",
        "rr:response=2k",
        "-n",
        "50",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("transactions       50 in"), "{text}");
    assert!(text.contains("responses 100 kB"), "{text}");
    assert!(stderr(&o).contains("stored as run"), "{}", stderr(&o));
}

#[test]
fn sim_runs_a_scenario_deterministically_and_names_bad_lines() {
    let file = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/sim/e1-aquila-ip.toml"
    );
    let run = || flowlab(&["sim", file, "--duration", "2s", "--json"]);
    let (a, b) = (run(), run());
    assert!(a.status.success(), "{}", stderr(&a));
    assert_eq!(
        a.stdout, b.stdout,
        "same file and seed: bit-identical output"
    );
    assert!(json(&a)["schema_version"].is_number());
    let bad = std::env::temp_dir().join(format!("flowlab-bad-{}.toml", std::process::id()));
    std::fs::write(
        &bad,
        "[sim]\nduration = \"1s\"\n\n[[link]]\nfrom = \"a\"\nto = \"nowhere\"\nrate = \"1M\"\n",
    )
    .unwrap();
    let o = flowlab(&["sim", bad.to_str().unwrap()]);
    let err = stderr(&o);
    assert!(!o.status.success());
    assert!(err.contains(&format!("{}:", bad.display())), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    let _ = std::fs::remove_file(bad);
}

#[test]
fn a_sweep_interrupted_half_way_resumes_to_the_full_table_and_is_plotted() {
    let agent = loopback_agent(&[]);
    let db = std::env::temp_dir().join(format!("flowlab-sweep-{}.sqlite3", std::process::id()));
    let _ = std::fs::remove_file(&db);
    let sweep = |extra: &[&str]| {
        let mut cmd = Command::new(FLOWLAB);
        cmd.args([
            "sweep",
            &agent.addr,
            "--vary",
            "size=100,200,300,400,500,600",
            "-d",
            "500ms",
            "--rate",
            "1M",
        ])
        .args(["--db", db.to_str().unwrap()])
        .args(extra);
        cmd
    };
    let child = sweep(&[])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    assert!(Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap()
        .success());
    let interrupted = child.wait_with_output().unwrap();
    assert_eq!(
        interrupted.status.code(),
        Some(130),
        "{}",
        stderr(&interrupted)
    );
    let db_arg = ["--db", db.to_str().unwrap()];
    let export = || {
        let o = flowlab(&[&["export", "1", "--json"][..], &db_arg].concat());
        assert!(o.status.success(), "{}", stderr(&o));
        json(&o)
    };
    let points = |v: &serde_json::Value| v["points"].as_array().map_or(0, Vec::len);
    let kept = points(&export());
    assert!(
        (1..6).contains(&kept),
        "{kept} points kept after the interruption"
    );
    let resumed = sweep(&["--resume", "1"]).output().unwrap();
    assert!(resumed.status.success(), "{}", stderr(&resumed));
    assert_eq!(points(&export()), 6, "the resumed sweep has every point");
    let history = flowlab(&[&["history"][..], &db_arg].concat());
    assert!(String::from_utf8_lossy(&history.stdout).contains("sweep"));
    let svg = std::env::temp_dir().join(format!("flowlab-sweep-{}.svg", std::process::id()));
    let plot = |out: &std::path::Path| {
        flowlab(
            &[
                &[
                    "plot",
                    "1",
                    "--x",
                    "size",
                    "--y",
                    "loss,throughput",
                    "-o",
                    out.to_str().unwrap(),
                ][..],
                &db_arg,
            ]
            .concat(),
        )
    };
    assert!(plot(&svg).status.success());
    let first = std::fs::read(&svg).unwrap();
    assert!(first.starts_with(b"<svg"));
    assert!(plot(&svg).status.success());
    assert_eq!(
        std::fs::read(&svg).unwrap(),
        first,
        "re-plotting a stored run is identical"
    );
    let missing = flowlab(
        &[
            &[
                "plot",
                "1",
                "--x",
                "size",
                "--y",
                "no_such_metric",
                "-o",
                "/dev/null",
            ][..],
            &db_arg,
        ]
        .concat(),
    );
    assert!(!missing.status.success());
    assert!(
        stderr(&missing).contains("goodput"),
        "the error lists the metrics the run has: {}",
        stderr(&missing)
    );
    let html = std::env::temp_dir().join(format!("flowlab-sweep-{}.html", std::process::id()));
    assert!(
        flowlab(&[&["report", "1", "-o", html.to_str().unwrap()][..], &db_arg].concat())
            .status
            .success()
    );
    assert!(std::fs::read_to_string(&html).unwrap().contains("<svg"));
    for f in [&db, &svg, &html] {
        let _ = std::fs::remove_file(f);
    }
}

/// The CLI stays a thin layer over the libraries (ARCHITECTURE.md): at most 1,500 lines of
/// code before its unit tests.
#[test]
fn the_cli_stays_thin() {
    let src = concat!(env!("CARGO_MANIFEST_DIR"), "/src");
    let mut lines = 0;
    for entry in std::fs::read_dir(src).expect("crates/cli/src") {
        let text = std::fs::read_to_string(entry.expect("an entry").path()).expect("a file");
        lines += text
            .split("#[cfg(test)]")
            .next()
            .unwrap_or("")
            .lines()
            .count();
    }
    assert!(
        lines <= 1500,
        "crates/cli/src has {lines} lines before its tests"
    );
}

/// `--flows 4` as iperf3's `-P 4`: a line per flow and a SUM of them, within 80 columns, and
/// each flow's throughput, loss and delay in the JSON.
#[test]
fn four_flows_print_a_line_each_and_their_sum() {
    let agent = loopback_agent(&[]);
    let doc = std::env::temp_dir().join(format!("flowlab-4flows-{}.json", std::process::id()));
    let o = flowlab(&[
        "test",
        &agent.addr,
        "--flows",
        "4",
        "--rate",
        "2M",
        "-d",
        "1s",
        "-o",
        doc.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = String::from_utf8(o.stdout).unwrap();
    assert!(text.lines().all(|l| l.chars().count() <= 80), "{text}");
    let rows: Vec<Vec<&str>> = (text.lines())
        .filter(|l| l.trim_start().starts_with('['))
        .map(|l| l.split(']').nth(1).unwrap().split_whitespace().collect())
        .collect();
    assert_eq!(rows.len(), 5, "4 flows and SUM:\n{text}");
    let received = |row: &[&str]| row[0].parse::<u64>().unwrap();
    let flows_total: u64 = rows[..4].iter().map(|r| received(r)).sum();
    assert_eq!(received(&rows[4]), flows_total, "{text}");
    assert!(rows.iter().all(|r| r[4] == "Mbit/s"), "{text}");

    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&doc).unwrap()).unwrap();
    let _ = std::fs::remove_file(&doc);
    let flows = v["agent"]["receiver"]["flows"]
        .as_array()
        .expect("per-flow results");
    assert_eq!(flows.len(), 4);
    for f in flows {
        assert!((1.5e6..2.5e6).contains(&f64_at(f, "/goodput_bps")), "{f}");
        assert!(f64_at(f, "/loss_pct") >= 0.0 && f["mean_relative_delay_ns"].is_number());
    }
    let goodput: f64 = flows.iter().map(|f| f64_at(f, "/goodput_bps")).sum();
    let summary = f64_at(&v, "/summary/receiver_goodput_bps");
    assert!(
        (goodput / summary - 1.0).abs() < 0.05,
        "{goodput} vs {summary}"
    );
}
