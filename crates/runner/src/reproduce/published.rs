//! The seeds' published numbers (copied from /work/shared/seeds, cited by table or figure),
//! each with the scenario run that answers it. A scenario added for new physics slots in as
//! a `SCENARIOS` entry and rows whose `probe` names it.

use super::{Check, Figure, Metric, Probe, Published, Row, Scenario, Tolerance};

macro_rules! example {
    ($key:literal) => {
        Scenario {
            key: $key,
            text: include_str!(concat!("../../../../examples/sim/", $key, ".toml")),
        }
    };
}

/// Every scenario a row may run, by file name under examples/sim/.
pub const SCENARIOS: &[Scenario] = &[
    example!("aal5-maxima"),
    example!("tcp-190ms"),
    example!("ping-cell-loss"),
    example!("policing-cdvt"),
    example!("e1-aquila-atm"),
    example!("e1-aquila-ip"),
];

/// Host- and load-dependent figures: within 10 % of the published value.
const HOST: Check = Check::Within(Tolerance::Relative(0.10));
/// Loss ratios under emulated load: within 10 percentage points.
const LOAD: Check = Check::Within(Tolerance::Absolute(10.0));

const fn probe(
    scenario: &'static str,
    run: usize,
    name: &'static str,
    metric: Metric,
) -> Option<Probe> {
    Some(Probe {
        scenario,
        run,
        name,
        metric,
    })
}

const fn gap(
    seed: &'static str,
    item: &'static str,
    unit: &'static str,
    published: Published,
    why: &'static str,
) -> Row {
    Row {
        seed,
        item,
        unit,
        published,
        probe: None,
        check: Check::NotReproduced,
        explanation: why,
    }
}

const NO_END_SYSTEM: &str = "host-dependent: flowlab has no end-system model yet (adapter \
    shaping, per-packet host cost; issue 15, Build)";

pub const ROWS: &[Row] = &[
    // Seed 000, LEVERAGE: two PCs with 25.6 Mb/s ATM25 adapters and a workgroup switch.
    Row {
        seed: "000",
        item: "§6.1.2 Test 2: UDP maximum, 8000-byte packets over ATM25",
        unit: "Mb/s",
        published: Published::Value(21.0),
        probe: probe("aal5-maxima", 0, "udp-atm25", Metric::GoodputMbps),
        check: HOST,
        explanation: "flowlab gives the ATM25 line's AAL5 ceiling for 8000-byte \
            UDP payloads; the paper's Windows 95 PCs reached 93 % of it \
            (host cost not modelled)",
    },
    gap(
        "000",
        "§6.1.2 Test 2: native ATM maximum, 8000-byte packets",
        "Mb/s",
        Published::Value(22.2),
        "native AAL5 frames are not simulated (UDP only); the ceiling \
            for 8008-byte AAL5 frames is 22.7 Mb/s",
    ),
    gap(
        "000",
        "Figures 5, 6, 7, 9: round trip, loss and CPU against size at \
            2 Mb/s",
        "",
        Published::Text("curves only"),
        NO_END_SYSTEM,
    ),
    gap(
        "000",
        "Figure 8: CPU against throughput, 8000-byte packets",
        "",
        Published::Text("curves only"),
        "CPU is not simulated",
    ),
    gap(
        "000",
        "Figures 10, 11: loss and maximum throughput on a 2 Mb/s CBR \
            VC",
        "",
        Published::Text("curves only"),
        "no scenario yet of a policed 2 Mb/s CBR VC swept over \
            offered load and size; the paper gives the values only as \
            plots",
    ),
    gap(
        "000",
        "Table 2, Figures 12, 13: videoconference losses and \
            receive-buffer fill",
        "",
        Published::Text("0.42 % loss B→A"),
        "the receiver's socket buffer and application are not \
            simulated",
    ),
    // Seed 001, MAY: SBA-200 adapters on OC-3c, a 190 ms PVC via Canada shaped to its PCR.
    Row {
        seed: "001",
        item: "§3.3: IP maximum of Classical IP (9180-byte MTU) over OC-3c",
        unit: "Mb/s",
        published: Published::Value(135.1),
        probe: probe("aal5-maxima", 0, "clip-oc3", Metric::IpThroughputMbps),
        check: Check::Exact { decimals: 1 },
        explanation: "a link-rate figure: 149.76 Mb/s of cells, 192 cells per \
            9180-byte packet (LLC/SNAP, AAL5 trailer, padding)",
    },
    Row {
        seed: "001",
        item: "§3.4: standard TCP, 64 KiB window, 6 Mb/s PVC, 190 ms",
        unit: "Mb/s",
        published: Published::Value(2.2),
        probe: probe("tcp-190ms", 0, "wan-tcp", Metric::GoodputMbps),
        check: HOST,
        explanation: "flowlab reaches the window limit (64 KiB per 190 ms, the \
            paper's own 2.7 Mb/s estimate); Solaris 2.5 stayed below it",
    },
    Row {
        seed: "001",
        item: "Table 1: RFC 1323 TCP, 140000-byte buffer, 6 Mb/s PVC",
        unit: "Mb/s",
        published: Published::Value(5.04),
        probe: probe("tcp-190ms", 1, "wan-tcp", Metric::GoodputMbps),
        check: HOST,
        explanation: "window-limited at the bandwidth-delay product; the PCR \
            shaping to 6 Mb/s bounds both",
    },
    Row {
        seed: "001",
        item: "§3.4: RFC 1323 TCP, 1 MiB window, 6 Mb/s PVC (\"no \
            difference\")",
        unit: "Mb/s",
        published: Published::Value(5.04),
        probe: probe("tcp-190ms", 2, "wan-tcp", Metric::GoodputMbps),
        check: HOST,
        explanation: "limited by the 6 Mb/s PCR; the window no longer matters",
    },
    gap(
        "001",
        "Table 1: 50 Mb/s PVC, 1.5 MiB buffer, 1024-byte sends",
        "Mb/s",
        Published::Value(31.45),
        "no scenario: the Fore adapter's shaper (Figure 5) caps it \
            below the PCR, and flowlab has no end-system model yet",
    ),
    gap(
        "001",
        "Table 1: 25 Mb/s PVC, 1 MiB buffer, 1024-byte sends",
        "Mb/s",
        Published::Value(18.29),
        "no scenario: the Fore adapter's shaper (Figure 5) caps it \
            below the PCR, and flowlab has no end-system model yet",
    ),
    gap(
        "001",
        "Figure 3: TCP throughput dips every 8 KiB of message size",
        "",
        Published::Text("curves only"),
        "needs IP fragmentation and reassembly cost in the hosts \
            (issue 15, Build)",
    ),
    gap(
        "001",
        "Figures 4, 7, 8: CPU load of sender and receiver",
        "",
        Published::Text("curves only"),
        "CPU is not simulated",
    ),
    gap(
        "001",
        "§3.3: UDP, SPARCstation 10 to 20",
        "Mb/s",
        Published::Value(62.0),
        NO_END_SYSTEM,
    ),
    // Seed 002, BAGNet: pings through an OC-3c switch port loaded by recirculated cells.
    Row {
        seed: "002",
        item: "Table 1: ping loss, 64 bytes, loops in one direction",
        unit: "%",
        published: Published::Value(23.0),
        probe: probe("ping-cell-loss", 0, "ping64", Metric::LossPercent),
        check: LOAD,
        explanation: BAGNET,
    },
    gap(
        "002",
        "Table 1: ping loss, 128 bytes, loops in one direction",
        "%",
        Published::Value(50.0),
        "the scenario sends the six sizes the issue compares; 128 \
            bytes is not among them",
    ),
    Row {
        seed: "002",
        item: "Table 1: ping loss, 256 bytes, loops in one direction",
        unit: "%",
        published: Published::Value(51.0),
        probe: probe("ping-cell-loss", 0, "ping256", Metric::LossPercent),
        check: LOAD,
        explanation: BAGNET,
    },
    Row {
        seed: "002",
        item: "Table 1: ping loss, 512 bytes, loops in one direction",
        unit: "%",
        published: Published::Value(62.0),
        probe: probe("ping-cell-loss", 0, "ping512", Metric::LossPercent),
        check: LOAD,
        explanation: BAGNET,
    },
    Row {
        seed: "002",
        item: "Table 1: ping loss, 1024 bytes, loops in one direction",
        unit: "%",
        published: Published::Value(69.0),
        probe: probe("ping-cell-loss", 0, "ping1024", Metric::LossPercent),
        check: LOAD,
        explanation: BAGNET,
    },
    Row {
        seed: "002",
        item: "Table 1: ping loss, 2048 bytes, loops in one direction",
        unit: "%",
        published: Published::Value(75.0),
        probe: probe("ping-cell-loss", 0, "ping2048", Metric::LossPercent),
        check: LOAD,
        explanation: BAGNET_FRAGMENTED,
    },
    Row {
        seed: "002",
        item: "Table 1: ping loss, 4096 bytes, loops in one direction",
        unit: "%",
        published: Published::Value(93.0),
        probe: probe("ping-cell-loss", 0, "ping4096", Metric::LossPercent),
        check: LOAD,
        explanation: BAGNET_FRAGMENTED,
    },
    Row {
        seed: "002",
        item: "§3.2: cell loss at the loaded port, loops in one direction",
        unit: "%",
        published: Published::Value(1.2),
        probe: probe("ping-cell-loss", 0, "sw->ws2", Metric::PortCellLossPercent),
        check: Check::Within(Tolerance::Absolute(0.5)),
        explanation: "the per-cell Poisson background overloads the port more \
            often than the paper's ttcp loops; cell loss depends on the \
            load pattern",
    },
    gap(
        "002",
        "Table 1: ping loss, loops in both directions",
        "%",
        Published::Text("35 to 86 %"),
        "the scenario loads one direction; the scanned column has six \
            values for seven sizes",
    ),
    Row {
        seed: "002",
        item: "Table 2: cells per ping, 64 bytes",
        unit: "cells",
        published: Published::Value(3.0),
        probe: probe("aal5-maxima", 0, "ping64", Metric::CellsPerPacket),
        check: Check::Exact { decimals: 0 },
        explanation: CELLS,
    },
    Row {
        seed: "002",
        item: "Table 2: cells per ping, 256 bytes",
        unit: "cells",
        published: Published::Value(7.0),
        probe: probe("aal5-maxima", 0, "ping256", Metric::CellsPerPacket),
        check: Check::Exact { decimals: 0 },
        explanation: CELLS,
    },
    Row {
        seed: "002",
        item: "Table 2: cells per ping, 512 bytes",
        unit: "cells",
        published: Published::Value(12.0),
        probe: probe("aal5-maxima", 0, "ping512", Metric::CellsPerPacket),
        check: Check::Exact { decimals: 0 },
        explanation: CELLS,
    },
    Row {
        seed: "002",
        item: "Table 2: cells per ping, 1024 bytes",
        unit: "cells",
        published: Published::Value(23.0),
        probe: probe("aal5-maxima", 0, "ping1024", Metric::CellsPerPacket),
        check: Check::Exact { decimals: 0 },
        explanation: CELLS,
    },
    Row {
        seed: "002",
        item: "Table 2: cells per ping, 2048 bytes",
        unit: "cells",
        published: Published::Value(45.0),
        probe: probe("aal5-maxima", 0, "ping2048", Metric::CellsPerPacket),
        check: Check::Differs,
        explanation: "the paper's host fragmented the 2076 IP bytes at a 1500-byte \
            MTU (1500 + 596 bytes: 32 + 13 = 45 cells); the scenario keeps \
            one frame of 44 cells, as the simulator refuses pings above \
            the MTU until fragmentation is simulated (issue 15, Build)",
    },
    gap(
        "002",
        "Tables 3, 4: WAN pings and TCP under cell loss",
        "",
        Published::Text("1.1 % cell loss; 8.31 to 6.88 Mb/s"),
        "no scenario of the carrier's WAN path; TCP under bursty ttcp \
            background needs on/off background sources (issue 15, Build)",
    ),
    // Seed 003, AAI: OC-3c hosts, DS-3 WAN links, GCRA policing.
    Row {
        seed: "003",
        item: "Table 1: best host's receive maximum over OC-3c (DEC Alpha \
            3000/400)",
        unit: "Mb/s",
        published: Published::Value(134.1),
        probe: probe("aal5-maxima", 0, "clip-oc3", Metric::IpThroughputMbps),
        check: Check::Ceiling,
        explanation: "hosts differ; every published maximum stays under flowlab's \
            Classical IP ceiling over OC-3c",
    },
    gap(
        "003",
        "Figure 1: lossless, peak and full-load throughput of three \
            connections",
        "Mb/s",
        Published::Text("28, 29.5, 18.4"),
        "no scenario yet of the three AAI pairs sharing a DS-3",
    ),
    gap(
        "003",
        "Figure 2: aggregate throughput alone and competing",
        "Mb/s",
        Published::Text("73.84, 55.19"),
        "no scenario yet of the ten-host experiment",
    ),
    gap(
        "003",
        "Figure 4: switch buffer estimates from the burst-size knees",
        "",
        Published::Text("3.5 MB, 35 KB"),
        "no scenario yet of the ITTC-NRL path \
            (examples/experiments/burst-size.toml runs the search on a \
            lab)",
    ),
    Row {
        seed: "003",
        item: "Figure 5: TCP above the knee, CBR PCR 10 Mb/s, CDVT 10 ms",
        unit: "Mb/s",
        published: Published::Text("TCP working (values only in the plot)"),
        probe: probe("policing-cdvt", 7, "tcp", Metric::GoodputMbps),
        check: Check::NotReproduced,
        explanation: "the knee is right, but above it the simulated TCP sends \
            back-to-back segments that the policer drops and collapses; \
            the paper's hosts paced their cells (no end-system model \
            yet)",
    },
    gap(
        "003",
        "Figure 6: TCP against PCR at CDVT 10 ms",
        "",
        Published::Text("curves only"),
        NO_END_SYSTEM,
    ),
    // Seed 004, AQUILA: E1 bottleneck between two ATM switches. Table 4; run 0 of each
    // scenario has the 2 Mb/s background, run 1 has none.
    aquila(
        "Table 4, ATM core, with background: flow #1 max transfer delay",
        Published::Value(2.2),
        ATM,
        0,
        "flow1",
        Metric::MaxDelayMs,
        HOST,
        NO_LATENCY,
    ),
    aquila(
        "Table 4, ATM core, with background: flow #1 delay variation",
        Published::Value(0.91),
        ATM,
        0,
        "flow1",
        Metric::DelayVariationMs,
        HOST,
        NO_JITTER,
    ),
    aquila(
        "Table 4, ATM core, with background: flow #1 packet loss",
        Published::Value(0.0),
        ATM,
        0,
        "flow1",
        Metric::LossPercent,
        NO_LOSS,
        CBR_FIRST,
    ),
    aquila(
        "Table 4, ATM core, with background: flow #2 goodput",
        Published::Range(68.9, 73.5),
        ATM,
        0,
        "flow2",
        Metric::GoodputKbps,
        HOST,
        AQUILA_TCP,
    ),
    aquila(
        "Table 4, ATM core, with background: flow #3 goodput",
        Published::Range(76.8, 84.8),
        ATM,
        0,
        "flow3",
        Metric::GoodputKbps,
        HOST,
        AQUILA_TCP,
    ),
    aquila(
        "Table 4, ATM core, with background: flow #4 goodput",
        Published::Text("starved"),
        ATM,
        0,
        "flow4",
        Metric::GoodputKbps,
        Check::Starved,
        "the UBR background is tagged CLP=1 and dropped first, so flow #4's \
            shaped UBR cells still pass",
    ),
    aquila(
        "Table 4, ATM core, without background: flow #1 max transfer delay",
        Published::Value(2.12),
        ATM,
        1,
        "flow1",
        Metric::MaxDelayMs,
        HOST,
        NO_LATENCY,
    ),
    aquila(
        "Table 4, ATM core, without background: flow #1 delay variation",
        Published::Value(0.71),
        ATM,
        1,
        "flow1",
        Metric::DelayVariationMs,
        HOST,
        NO_JITTER,
    ),
    aquila(
        "Table 4, ATM core, without background: flow #1 packet loss",
        Published::Value(0.0),
        ATM,
        1,
        "flow1",
        Metric::LossPercent,
        NO_LOSS,
        CBR_FIRST,
    ),
    aquila(
        "Table 4, ATM core, without background: flow #2 goodput",
        Published::Range(69.7, 74.2),
        ATM,
        1,
        "flow2",
        Metric::GoodputKbps,
        HOST,
        AQUILA_TCP,
    ),
    aquila(
        "Table 4, ATM core, without background: flow #3 goodput",
        Published::Range(77.2, 85.4),
        ATM,
        1,
        "flow3",
        Metric::GoodputKbps,
        HOST,
        AQUILA_TCP,
    ),
    aquila(
        "Table 4, ATM core, without background: flow #4 goodput",
        Published::Range(74.9, 81.4),
        ATM,
        1,
        "flow4",
        Metric::GoodputKbps,
        HOST,
        AQUILA_TCP,
    ),
    aquila(
        "Table 4, IP core, with background: flow #1 max transfer delay",
        Published::Value(8.9),
        IP,
        0,
        "flow1",
        Metric::MaxDelayMs,
        HOST,
        RESIDUAL,
    ),
    aquila(
        "Table 4, IP core, with background: flow #1 delay variation",
        Published::Value(8.4),
        IP,
        0,
        "flow1",
        Metric::DelayVariationMs,
        HOST,
        RESIDUAL,
    ),
    aquila(
        "Table 4, IP core, with background: flow #1 packet loss",
        Published::Value(0.0),
        IP,
        0,
        "flow1",
        Metric::LossPercent,
        NO_LOSS,
        CBR_FIRST,
    ),
    aquila(
        "Table 4, IP core, with background: flow #2 goodput",
        Published::Range(65.4, 69.0),
        IP,
        0,
        "flow2",
        Metric::GoodputKbps,
        HOST,
        AQUILA_TCP,
    ),
    aquila(
        "Table 4, IP core, with background: flow #3 goodput",
        Published::Range(78.8, 81.3),
        IP,
        0,
        "flow3",
        Metric::GoodputKbps,
        HOST,
        AQUILA_TCP,
    ),
    aquila(
        "Table 4, IP core, with background: flow #4 goodput",
        Published::Text("starved"),
        IP,
        0,
        "flow4",
        Metric::GoodputKbps,
        Check::Starved,
        "STD shares the lowest WFQ weight with the 2 Mb/s background",
    ),
    aquila(
        "Table 4, IP core, without background: flow #1 max transfer delay",
        Published::Value(8.5),
        IP,
        1,
        "flow1",
        Metric::MaxDelayMs,
        HOST,
        RESIDUAL,
    ),
    aquila(
        "Table 4, IP core, without background: flow #1 delay variation",
        Published::Value(8.3),
        IP,
        1,
        "flow1",
        Metric::DelayVariationMs,
        HOST,
        RESIDUAL,
    ),
    aquila(
        "Table 4, IP core, without background: flow #1 packet loss",
        Published::Value(0.0),
        IP,
        1,
        "flow1",
        Metric::LossPercent,
        NO_LOSS,
        CBR_FIRST,
    ),
    aquila(
        "Table 4, IP core, without background: flow #2 goodput",
        Published::Range(67.2, 69.5),
        IP,
        1,
        "flow2",
        Metric::GoodputKbps,
        HOST,
        AQUILA_TCP,
    ),
    aquila(
        "Table 4, IP core, without background: flow #3 goodput",
        Published::Range(83.4, 86.3),
        IP,
        1,
        "flow3",
        Metric::GoodputKbps,
        HOST,
        AQUILA_TCP,
    ),
    aquila(
        "Table 4, IP core, without background: flow #4 goodput",
        Published::Range(76.6, 79.1),
        IP,
        1,
        "flow4",
        Metric::GoodputKbps,
        HOST,
        AQUILA_TCP,
    ),
];

const ATM: &str = "e1-aquila-atm";
const IP: &str = "e1-aquila-ip";
/// Flow #1's loss: none published, none simulated.
const NO_LOSS: Check = Check::Within(Tolerance::Absolute(0.1));
const NO_LATENCY: &str = "no router or analyser latency is modelled, only cells on the links";
const NO_JITTER: &str = "shaped CBR cells meet no other CBR traffic, and no host or router \
    jitter is modelled";
const CBR_FIRST: &str = "flow #1 has strict priority at the bottleneck";
const RESIDUAL: &str = "the residual service of 1500-byte packets ahead in the router; router \
    processing is not modelled";

/// A row of seed 004's Table 4 (its unit follows from the metric).
#[allow(clippy::too_many_arguments)]
const fn aquila(
    item: &'static str,
    published: Published,
    scenario: &'static str,
    run: usize,
    flow: &'static str,
    metric: Metric,
    check: Check,
    explanation: &'static str,
) -> Row {
    let unit = match metric {
        Metric::MaxDelayMs | Metric::DelayVariationMs => "ms",
        Metric::LossPercent => "%",
        _ => "kbit/s",
    };
    Row {
        seed: "004",
        item,
        unit,
        published,
        probe: probe(scenario, run, flow, metric),
        check,
        explanation,
    }
}

const BAGNET: &str = "load-dependent: the background is per-cell Poisson, not the paper's bursty \
    ttcp; loss grows with cells per ping as published, but more steeply";
const BAGNET_FRAGMENTED: &str = "load-dependent as the smaller pings, and the paper's pings \
    above 1500 bytes were IP fragments where the scenario sends one AAL5 frame (fragmentation \
    is not simulated yet)";
const CELLS: &str = "an encapsulation figure: ping data + 8 (ICMP) + 20 (IP) bytes, LLC/SNAP and \
    the AAL5 trailer, padded to 48-byte cell payloads";
const AQUILA_TCP: &str = "the simulated sources are held to exactly 100 kbit/s (ATM: shaped \
    cells; IP: a 100 kbit/s access link), the paper's hosts less regularly; the token-bucket \
    meters are not in scenarios yet";

/// The figures drawn as plots: published points over flowlab's curve.
pub const FIGURES: &[Figure] = &[
    Figure {
        seed: "002",
        file: "002-ping-loss",
        title: "Seed 002, Table 1: ping loss against size (one direction loaded)",
        x_label: "ping data bytes",
        y_label: "packets lost (%)",
        points: &[
            (64.0, "Table 1: ping loss, 64 bytes, loops in one direction"),
            (
                128.0,
                "Table 1: ping loss, 128 bytes, loops in one direction",
            ),
            (
                256.0,
                "Table 1: ping loss, 256 bytes, loops in one direction",
            ),
            (
                512.0,
                "Table 1: ping loss, 512 bytes, loops in one direction",
            ),
            (
                1024.0,
                "Table 1: ping loss, 1024 bytes, loops in one direction",
            ),
            (
                2048.0,
                "Table 1: ping loss, 2048 bytes, loops in one direction",
            ),
            (
                4096.0,
                "Table 1: ping loss, 4096 bytes, loops in one direction",
            ),
        ],
        sweep: None,
    },
    Figure {
        seed: "001",
        file: "001-tcp-window",
        title: "Seed 001, §3.4 and Table 1: TCP over 190 ms against window (6 Mb/s PVC)",
        x_label: "window (kB)",
        y_label: "throughput (Mb/s)",
        points: &[
            (
                65.5,
                "§3.4: standard TCP, 64 KiB window, 6 Mb/s PVC, 190 ms",
            ),
            (
                140.0,
                "Table 1: RFC 1323 TCP, 140000-byte buffer, 6 Mb/s PVC",
            ),
            (
                1048.6,
                "§3.4: RFC 1323 TCP, 1 MiB window, 6 Mb/s PVC (\"no difference\")",
            ),
        ],
        sweep: None,
    },
    Figure {
        seed: "003",
        file: "003-tcp-cdvt",
        title: "Seed 003, Figure 5: TCP against CDVT, CBR PCR 10 Mb/s (published as a curve only)",
        x_label: "CDVT (ms)",
        y_label: "TCP goodput (Mb/s)",
        points: &[],
        sweep: Some((
            Probe {
                scenario: "policing-cdvt",
                run: 0,
                name: "tcp",
                metric: Metric::GoodputMbps,
            },
            &[0.0, 0.1, 0.5, 1.0, 2.0, 5.0, 8.0, 10.0, 20.0, 50.0],
        )),
    },
];
