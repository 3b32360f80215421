//! The rows a seed's lab answers (`flowlab reproduce --emulated`): each lab of examples/lab
//! with the experiment of examples/experiments run on it, and which flow (or link direction)
//! of that run answers which row. Both files are embedded, so the command runs anywhere.

use super::{Metric, Tolerance};

/// One lab brought up and one experiment run on it, from inside host `controller`.
pub struct LabRun {
    /// Short (the lab comes up as `rp<key>`, a name of at most 12 characters).
    pub key: &'static str,
    /// File names under examples/lab and examples/experiments.
    pub lab_file: &'static str,
    pub lab: &'static str,
    pub experiment_file: &'static str,
    pub experiment: &'static str,
    pub controller: &'static str,
    /// What the experiment runs, for the document.
    pub trials: &'static str,
}

/// Where a row's emulated value comes from: flow (or `FROM>TO` link direction) `name` of
/// lab run `run`, read as `metric`. `tolerance`: how far from the simulated value the lab
/// is expected to land (its hosts, unlike the scenario's, cost time per packet and share
/// this machine's cores), or `None` where the lab's traffic is not the scenario's.
#[derive(Clone, Copy, Debug)]
pub struct EmulatedProbe {
    pub item: &'static str,
    pub run: &'static str,
    pub name: &'static str,
    pub metric: Metric,
    pub tolerance: Option<Tolerance>,
}

macro_rules! lab_run {
    ($key:literal, $lab:literal, $experiment:literal, $controller:literal, $trials:literal) => {
        LabRun {
            key: $key,
            lab_file: concat!($lab, ".toml"),
            lab: include_str!(concat!("../../../../examples/lab/", $lab, ".toml")),
            experiment_file: concat!($experiment, ".toml"),
            experiment: include_str!(concat!(
                "../../../../examples/experiments/",
                $experiment,
                ".toml"
            )),
            controller: $controller,
            trials: $trials,
        }
    };
}

pub const LAB_RUNS: &[LabRun] = &[
    lab_run!(
        "atl",
        "transatlantic",
        "reproduce-001",
        "ulm",
        "3 TCP trials of 10 s, one after the other, the three run 3 times"
    ),
    lab_run!(
        "bag",
        "bagnet-loop",
        "reproduce-002",
        "ws1",
        "7 probe flows and 2 loads together, 10 s"
    ),
    lab_run!(
        "aatm",
        "aquila-atm",
        "reproduce-004",
        "a",
        "10 s beside a 1.4 Mbit/s background, then 10 s alone"
    ),
    lab_run!(
        "aip",
        "aquila-ip",
        "reproduce-004",
        "a",
        "10 s beside a 1.4 Mbit/s background, then 10 s alone"
    ),
];

const fn probe(
    item: &'static str,
    run: &'static str,
    name: &'static str,
    metric: Metric,
    tolerance: Option<Tolerance>,
) -> EmulatedProbe {
    EmulatedProbe {
        item,
        run,
        name,
        metric,
        tolerance,
    }
}

/// TCP goodput: Linux's CUBIC against the model's Reno, 10 s against 30 s of slow start.
const TCP: Option<Tolerance> = Some(Tolerance::Relative(0.15));
/// The lab's loads (Poisson datagrams from two hosts) are not the scenario's re-circulated
/// bursts: the loss grows with size in both, at other levels.
const PING: Option<Tolerance> = None;
/// The premium flow's delays are a maximum and a peak-to-peak of 53-byte datagrams on an
/// E1: milliseconds the lab's hosts and emulator lose on a busy machine are of their size.
/// The lab's ATM port gives each VC a share of its buffer, where the scenario shares one
/// buffer and tags the background CLP = 1 against a threshold (docs/emulation.md).
const PREMIUM: Option<Tolerance> = None;

macro_rules! ping {
    ($bytes:literal) => {
        probe(
            concat!(
                "Table 1: ping loss, ",
                $bytes,
                " bytes, loops in one direction"
            ),
            "bag",
            concat!("ping", $bytes),
            Metric::LossPercent,
            PING,
        )
    };
}

/// The premium flow's three rows of Table 4 in one core, with or without the background.
macro_rules! premium {
    ($core:literal, $run:literal, $with:literal, $flow:literal) => {
        [
            probe(
                concat!(
                    "Table 4, ",
                    $core,
                    " core, ",
                    $with,
                    ": flow #1 max transfer delay"
                ),
                $run,
                $flow,
                Metric::MaxDelayMs,
                PREMIUM,
            ),
            probe(
                concat!(
                    "Table 4, ",
                    $core,
                    " core, ",
                    $with,
                    ": flow #1 delay variation"
                ),
                $run,
                $flow,
                Metric::DelayVariationMs,
                PREMIUM,
            ),
            probe(
                concat!(
                    "Table 4, ",
                    $core,
                    " core, ",
                    $with,
                    ": flow #1 packet loss"
                ),
                $run,
                $flow,
                Metric::LossPercent,
                PREMIUM,
            ),
        ]
    };
}

const TCP_ROWS: [EmulatedProbe; 3] = [
    // Linux doubles the buffer asked for and advertises a share of it that is not the
    // model's exact 64 KiB window: the lab's window-limited rate is its own.
    probe(
        "§3.4: standard TCP, 64 KiB window, 6 Mb/s PVC, 190 ms",
        "atl",
        "tcp-64KiB",
        Metric::GoodputMbps,
        None,
    ),
    probe(
        "Table 1: RFC 1323 TCP, 140000-byte buffer, 6 Mb/s PVC",
        "atl",
        "tcp-140000",
        Metric::GoodputMbps,
        TCP,
    ),
    probe(
        super::published::ONE_MIB,
        "atl",
        "tcp-1MiB",
        Metric::GoodputMbps,
        TCP,
    ),
];

const PING_ROWS: [EmulatedProbe; 8] = [
    ping!(64),
    ping!(128),
    ping!(256),
    ping!(512),
    ping!(1024),
    ping!(2048),
    ping!(4096),
    probe(
        "§3.2: cell loss at the loaded port, loops in one direction",
        "bag",
        "r>ws2",
        Metric::PortCellLossPercent,
        PING,
    ),
];

const AQUILA_ROWS: [[EmulatedProbe; 3]; 4] = [
    premium!("ATM", "aatm", "with background", "flow1-bg"),
    premium!("ATM", "aatm", "without background", "flow1"),
    premium!("IP", "aip", "with background", "flow1-bg"),
    premium!("IP", "aip", "without background", "flow1"),
];

/// Every row a lab answers.
pub fn emulated_probes() -> impl Iterator<Item = &'static EmulatedProbe> {
    TCP_ROWS
        .iter()
        .chain(PING_ROWS.iter())
        .chain(AQUILA_ROWS.iter().flatten())
}

impl EmulatedProbe {
    /// Whether the lab's value lands within the probe's tolerance of the simulated one
    /// (`None` without a tolerance).
    pub fn agrees(&self, emulated: f64, simulated: f64) -> Option<bool> {
        let slack = super::slack(self.tolerance?, simulated);
        Some((emulated - simulated).abs() <= slack)
    }
}
