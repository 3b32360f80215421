//! Command-line flags, parsed into their low-level form; `test_cmd` and `serve` validate them.

use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};
use flowlab_spec::{parse_buffer, parse_duration_limit};
use flowlab_store::RunId;
use flowlab_units::{
    parse_bit_rate, parse_bytes, parse_count, parse_duration, parse_percent, parse_rate,
    parse_switch, CpuList, Rate, RateLimit,
};

#[derive(Parser, Debug)]
#[command(
    name = "flowlab",
    version,
    about = "A network performance laboratory: paced flows, what the network did to them, and experiments you can repeat.",
    arg_required_else_help = true
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run an agent that serves tests to clients.
    #[command(
        after_help = "Examples:\n  flowlab serve\n  flowlab serve --bind ::1 --port 9470 --max-rate 1G --max-duration 2m\n  flowlab serve --key-file /etc/flowlab.key\n  flowlab serve --stamp --stamp-only                 # a STAMP reflector on port 862"
    )]
    Serve(ServeArgs),
    /// Run one test against an agent.
    #[command(
        after_help = "Examples:\n  flowlab test 10.0.0.2 --rate 2M --size 500B --duration 10s\n  flowlab test [::1]:9470 --mode loopback --rate 64k --size 160B --count 1000\n  flowlab test host --tcp --rate max --duration 30s --interval 1s\n  flowlab test host --reverse --json > result.json\n  flowlab test host --rate 10M --packet-log packets.csv\n  flowlab test host --traffic rr:request=64,response=1k,think=0 --flows 4\n  flowlab test host --traffic crr:request=100,response=10k -d 5s\n  flowlab test host --preset aquila-flow2 -d 60s      # over TCP, conformance reported\n  flowlab test host --flows 1000 --rate 800k --cpus 0   # 1000 paced flows, client on CPU 0\n  sudo flowlab test host --flows 1000 --rate 800k --packet-socket   # as whole frames\n  flowlab test --stamp router1 --count 100 --json      # STAMP to any reflector"
    )]
    Test(Box<TestArgs>),
    /// Run a scenario (ATM switches, IP routers, links, flows) in the deterministic simulator.
    #[command(
        after_help = "Examples:\n  flowlab sim examples/sim/e1-aquila-ip.toml\n  flowlab sim examples/sim/tcp-190ms.toml --seed 7 --json\n  flowlab sim examples/sim/policing-cdvt.toml --duration 5s"
    )]
    Sim(crate::sim_cmd::SimArgs),
    /// Regenerate docs/reproductions.md: the seed papers' numbers beside simulated ones.
    Reproduce(crate::reproduce_cmd::ReproduceArgs),
    /// Run a test at every point of a parameter grid, repeated, and store the results.
    #[command(
        after_help = "Examples:\n  flowlab sweep 10.0.0.2 --rate 5M --vary size=100..8000:100 --vary proto=udp,tcp --repeat 3\n  flowlab sweep host --mode loopback --rate 2M --duration 2s --vary size=100,1000,8000 --until-ci 2% --shuffle\n  flowlab sweep host --vary rate=1M..10M:1M --resume 12"
    )]
    Sweep(Box<SweepArgs>),
    /// List the runs in the results database.
    History(crate::history_cmd::HistoryArgs),
    /// Show one stored run: parameters, environment and a table of its results.
    Show(crate::history_cmd::ShowArgs),
    /// Export one stored run as CSV (metrics) or JSON (everything).
    #[command(
        after_help = "Examples:\n  flowlab export 12 --csv -o run12.csv\n  flowlab export 12 --json > run12.json"
    )]
    Export(crate::history_cmd::ExportArgs),
    /// Compare stored runs flow by flow: throughput, loss and delay, with the differences.
    #[command(after_help = "Examples:\n  flowlab compare 12 13\n  flowlab compare 12 13 --json")]
    Compare(crate::history_cmd::CompareArgs),
    /// Plot a stored run as SVG or PNG.
    #[command(
        after_help = "Examples:\n  flowlab plot 12 --x size --y rtt,loss,cpu --by proto -o rtt.svg\n  flowlab plot 12 --kind timeseries --y throughput -o ts.svg\n  flowlab plot 12 --kind loss-index -o loss.png\n  flowlab plot 12 --kind cdf --log-x -o cdf.svg"
    )]
    Plot(crate::plot_cmd::PlotArgs),
    /// Write one self-contained HTML report of a stored run.
    #[command(after_help = "Examples:\n  flowlab report 12\n  flowlab report 12 -o sweep.html")]
    Report(crate::plot_cmd::ReportArgs),
    /// Run an experiment file: many flows across many hosts, in serial and parallel blocks,
    /// sweeps and searches (RFC 2544, offered load, burst size).
    #[command(
        after_help = "Examples:\n  flowlab lab up examples/lab/three-hosts.toml\n  flowlab lab exec h1 -- flowlab run examples/experiments/three-sources.toml --lab three\n  flowlab run exp.toml --json > exp.json"
    )]
    Run(crate::run_cmd::RunArgs),
    /// Build a local testbed of hosts as network namespaces from a TOML file.
    #[command(
        after_help = "Examples:\n  flowlab lab up examples/lab/three-hosts.toml\n  flowlab lab exec h1 -- ip route\n  flowlab lab status\n  flowlab lab down three"
    )]
    Lab(crate::lab_cmd::LabArgs),
    /// Check the path to an agent against seed 003's tuning check list, with what to change.
    #[command(after_help = "Examples:\n  flowlab doctor 10.0.0.2\n  flowlab doctor host --json")]
    Doctor(DoctorArgs),
    /// Start an agent on loopback and run a small version of the WS2NetTest tests against it.
    #[command(after_help = "Examples:\n  flowlab demo\n  flowlab demo --out demo.json")]
    Demo(DemoArgs),
    /// Print shell completions (bash, zsh or fish) to standard output (README.md: where to).
    Completions { shell: clap_complete::Shell },
    /// Print the manual page (roff) of flowlab, or of one of its commands (README.md: where to).
    Man { command: Option<String> },
}

#[derive(Args, Debug)]
pub struct ServeArgs {
    /// Address to listen on; the default `::` takes IPv6 and IPv4.
    #[arg(long, short = 'B', default_value = "::")]
    pub bind: IpAddr,
    /// Control port.
    #[arg(long, short, default_value_t = flowlab_control::DEFAULT_PORT)]
    pub port: u16,
    /// Run in the background, detached from the terminal, after the port is open (like
    /// iperf3 -D); output goes to --logfile, else nowhere. Under systemd, run without it
    /// (contrib/flowlab.service).
    #[arg(long, short = 'D')]
    pub daemon: bool,
    /// Write the agent's process id to this file (removed when it stops).
    #[arg(long, short = 'I')]
    pub pidfile: Option<PathBuf>,
    /// Append everything the agent prints to this file instead of the terminal.
    #[arg(long)]
    pub logfile: Option<PathBuf>,
    /// Longest test a client may ask for (10s, 2m, 1h, or 'unlimited': 7 days).
    #[arg(long, default_value = "5m", value_parser = parse_duration_limit)]
    pub max_duration: Duration,
    /// Most bit/s of one test, all its flows together (1G, 500M, or 'unlimited'). Faster asks
    /// are refused, traffic models by their peak; '--rate max' tests run up to it, and the
    /// agent holds its own sending to it.
    #[arg(long, default_value = "10G")]
    pub max_rate: RateLimit,
    /// Most tests running at once.
    #[arg(long, default_value_t = 16)]
    pub max_tests: usize,
    /// Most parallel flows in one test.
    #[arg(long, default_value_t = 1024)]
    pub max_flows: usize,
    /// Most control connections in setup at once (connected, test not started); more are
    /// turned away at once.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u64).range(1..))]
    pub max_connections: u64,
    /// Most control connections in setup from one address (IPv6: one /64).
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u64).range(1..))]
    pub max_connections_per_source: u64,
    /// Require clients to prove they hold this pre-shared key; the agent proves it too, and
    /// every control frame after it is authenticated.
    #[arg(long)]
    pub key_file: Option<PathBuf>,
    /// Let a controller (`flowlab run`) have this agent run tests towards other agents. Off by
    /// default: it makes this host send to addresses the controller names.
    #[arg(long)]
    pub allow_relay: bool,
    /// Run the agent on these CPUs only (0, 0,2, 1-3), like iperf3 -A.
    #[arg(long, short = 'A', alias = "affinity")]
    pub cpus: Option<CpuList>,
    /// Log nothing but errors.
    #[arg(long, short)]
    pub quiet: bool,
    /// Also reflect STAMP test packets (RFC 8762; TWAMP-light) on UDP [ADDR:]PORT (port 862
    /// when only --stamp is given, --bind's address when no ADDR): stateless, authenticated
    /// mode with --key-file.
    #[arg(long, value_name = "[ADDR:]PORT", num_args = 0..=1, default_missing_value = "862")]
    pub stamp: Option<String>,
    /// Serve Prometheus metrics (tests served and refused, active tests, bytes, the last 32
    /// tests' summaries) at http://ADDR:PORT/metrics; without it nothing listens for them.
    #[arg(long, value_name = "ADDR:PORT")]
    pub metrics: Option<std::net::SocketAddr>,
    /// Also answer iperf3 clients, beside the agent, on [ADDR:]PORT (5201), with its limits.
    #[arg(long, value_name = "[ADDR:]PORT", num_args = 0..=1, default_missing_value = "5201")]
    pub iperf3: Option<String>,
    /// Run the STAMP reflector alone, without the agent.
    #[arg(long, requires = "stamp")]
    pub stamp_only: bool,
    /// Most STAMP packets a second reflected to one source (an IPv6 /64 is one source).
    #[arg(long, default_value_t = flowlab_stamp::reflector::DEFAULT_MAX_PPS,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub stamp_max_pps: u32,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
pub enum Proto {
    Udp,
    Tcp,
    /// Native link-layer frames (AF_PACKET).
    Raw,
    /// ICMP echo to any host (no agent): --size is the echo's data, as ping's -s.
    Icmp,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
pub enum Iperf2Peer {
    Sender,
    Receivers,
}

impl From<Iperf2Peer> for flowlab_runner::multicast::Iperf2Peer {
    fn from(peer: Iperf2Peer) -> Self {
        match peer {
            Iperf2Peer::Sender => Self::Sender,
            Iperf2Peer::Receivers => Self::Receivers,
        }
    }
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
pub enum Mode {
    /// Client sends, agent receives.
    Oneway,
    /// Agent echoes every packet back: round-trip delay.
    Loopback,
}

#[derive(Args, Debug)]
#[command(group(clap::ArgGroup::new("flowlab").multiple(true).conflicts_with("stamp")))]
pub struct TestArgs {
    /// The agent: HOST, HOST:PORT, [IPV6]:PORT.
    pub target: String,
    /// The agent's control port, when the target names none (default 9470).
    #[arg(long, short)]
    pub port: Option<u16>,
    /// Only the target's IPv4 addresses.
    #[arg(long, short = '4', alias = "version4", conflicts_with = "ipv6")]
    pub ipv4: bool,
    /// Only the target's IPv6 addresses.
    #[arg(long, short = '6', alias = "version6")]
    pub ipv6: bool,
    /// This end's address for the control connection and the data sockets.
    #[arg(long, short = 'B', group = "flowlab")]
    pub bind: Option<IpAddr>,
    /// This end's data port (UDP and TCP; flow i on port + i), like iperf3's --cport.
    #[arg(long, group = "flowlab")]
    pub cport: Option<u16>,
    /// Send UDP datagrams (default).
    #[arg(long, short, conflicts_with_all = ["tcp", "proto"], group = "flowlab")]
    pub udp: bool,
    /// Send TCP messages of --size bytes.
    #[arg(long, conflicts_with = "proto", group = "flowlab")]
    pub tcp: bool,
    /// udp, tcp, raw: native link-layer frames with flowlab's EtherType (no IP, no UDP),
    /// on the interface of the control connection (needs root), or icmp: echo requests to
    /// any host, one a second unless --rate (docs/icmp.md).
    #[arg(long, value_enum, group = "flowlab")]
    pub proto: Option<Proto>,
    /// Send one UDP flow to the multicast group TARGET (GROUP or GROUP:PORT, port 5001)
    /// that every agent of --agents joins and receives (docs/multicast.md).
    #[arg(long, group = "flowlab")]
    pub multicast: bool,
    /// --multicast with iperf2 (Debian's iperf) at one end, in its datagrams: `sender`
    /// (iperf -c GROUP -u sends, the agents receive for --duration) or `receivers`
    /// (iperf -s -u -B GROUP receives, with the agents if any; --bind picks the interface).
    #[arg(long, value_enum, requires = "multicast")]
    pub iperf2: Option<Iperf2Peer>,
    /// --multicast: the receiving agents, HOST[:PORT],...
    #[arg(long, value_delimiter = ',', requires = "multicast")]
    pub agents: Vec<String>,
    /// --multicast: TTL (IPv4) or hop limit (IPv6) of the group's packets.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u8).range(1..))]
    pub ttl: u8,
    /// --proto icmp: set don't-fragment; requests above the path MTU are refused, not
    /// fragmented (ping's -M do).
    #[arg(long, group = "flowlab")]
    pub dont_fragment: bool,
    /// --proto raw: this end's interface, if not the one holding the control connection.
    #[arg(long, group = "flowlab")]
    pub interface: Option<String>,
    /// --proto raw: the agent's interface; the agent refuses any but the one its route to
    /// this client takes (the default).
    #[arg(long, group = "flowlab")]
    pub agent_interface: Option<String>,
    /// Offered rate in bit/s (2M, 500k, 1.5G) or 'max'. Default: 1M for UDP, max for TCP.
    #[arg(long, short, visible_short_alias = 'b', alias = "bitrate", value_parser = parse_rate)]
    pub rate: Option<Rate>,
    /// Send a --rate far beyond the path's link speed (2x it; 100G a flow on lo and veth).
    #[arg(long)]
    pub force_rate: bool,
    /// Bytes per packet (UDP payload or TCP write), 32-byte probe header included.
    /// Default: 1200B for UDP, 256kB for TCP.
    #[arg(long, short, visible_short_alias = 'l', alias = "length", value_parser = parse_bytes)]
    pub size: Option<u64>,
    /// How long to send (10s, 2m). Default 10s unless --count is given.
    #[arg(long, short, visible_short_alias = 't', alias = "time", value_parser = parse_duration)]
    pub duration: Option<Duration>,
    /// How many packets to send (1000, 10k); with rr or crr, transactions per flow.
    #[arg(long, short = 'n', value_parser = parse_count)]
    pub count: Option<u64>,
    /// oneway: client to agent; loopback: agent echoes each packet for round-trip delay.
    #[arg(long, value_enum, default_value = "oneway", group = "flowlab")]
    pub mode: Mode,
    /// Agent sends, client receives.
    #[arg(long, short = 'R', conflicts_with = "mode", group = "flowlab")]
    pub reverse: bool,
    /// A traffic model instead of the constant rate, e.g. poisson:pps=1000,size=exp:500
    /// or onoff:on=exp:1s,off=exp:1.35s,rate=64k,size=160 or video:fps=25,size=normal:4000,1500
    /// or trace:FILE (time size lines, or a pcap); add +contract:pr=100k,sr=100k,bs=10k to
    /// shape it to a token-bucket contract (the result reports conformance). Over UDP each
    /// packet is a datagram; over TCP (--proto tcp) each is a message carrying its length.
    /// Request/response (netperf RR): rr:request=64,response=1k,think=0 (sizes and think time
    /// take distributions, e.g. response=exp:10k, think=exp:5ms); crr:... opens a connection
    /// per transaction (netperf CRR). rr and crr run over TCP unless --proto udp (rr only);
    /// --flows N runs N concurrent transaction streams; --duration or --count (transactions
    /// per flow) ends them.
    #[arg(long, conflicts_with = "preset", group = "flowlab")]
    pub traffic: Option<String>,
    /// A named traffic mix: videoconf-1998, videoconf-modern, voip-g711, email-burst,
    /// bulk-contract, aquila-flow1..4, aquila-background, aquila-mix. Each sub-flow gets its
    /// own flow (own ports). The TCP applications (email-burst, bulk-contract, aquila-flow2..4)
    /// run over TCP unless --proto udp; the others over UDP. A test has one protocol, so
    /// aquila-mix runs all five sub-flows over UDP (or TCP with --proto tcp); for the paper's
    /// mix run aquila-flow1 and aquila-background over UDP beside aquila-flow2..4 over TCP.
    #[arg(long, group = "flowlab")]
    pub preset: Option<String>,
    /// Seed of random traffic models: the same seed replays the same traffic.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Parallel flows, each on its own sockets (own ports); --rate applies to each flow. From
    /// 64 paced one-way UDP flows the client sends them all from one port, many per system
    /// call (each still to its own agent port).
    #[arg(long, short = 'P', alias = "parallel", default_value_t = 1, group = "flowlab",
          value_parser = clap::value_parser!(u32).range(1..=65535))]
    pub flows: u32,
    /// Busy-poll the receiving sockets: lowest latency, one core spinning (for latency tests).
    #[arg(long, group = "flowlab")]
    pub busy_poll: bool,
    /// RTT under the flow's own load: the agent echoes every Nth packet of a one-way UDP
    /// test back to this client (1..=1000000), which reports their round trips.
    #[arg(long, value_name = "N", value_parser = parse_count, group = "flowlab")]
    pub echo_every: Option<u64>,
    /// Run the client on these CPUs only (0, 0,2, 1-3), like iperf3 -A: keeps the sender off
    /// the agent's core on a shared host. Pin the agent with `flowlab serve --cpus`.
    #[arg(long, short = 'A', alias = "affinity", group = "flowlab")]
    pub cpus: Option<CpuList>,
    /// Socket send buffer size at both ends (SO_SNDBUF), e.g. 4MiB.
    #[arg(long, value_parser = parse_buffer, group = "flowlab")]
    pub send_buffer: Option<u32>,
    /// Socket receive buffer size at both ends (SO_RCVBUF), e.g. 256KiB.
    #[arg(long, value_parser = parse_buffer, group = "flowlab")]
    pub recv_buffer: Option<u32>,
    /// Also let the kernel pace at --rate (SO_MAX_PACING_RATE; UDP only under the fq qdisc).
    #[arg(long, group = "flowlab")]
    pub kernel_pacing: bool,
    /// How senders wait for deadlines: precise (spin, any CPU), efficient (1 % of a core)
    /// or auto (5 %, the default). STAMP sessions too. 64 or more flows sharing a socket
    /// send what is due within 20 µs (auto) or 50 µs (efficient) in one call.
    #[arg(long, value_name = "MODE")]
    pub pacing: Option<flowlab_traffic::PacingMode>,
    /// TCP: send with MSG_ZEROCOPY.
    #[arg(long, short = 'Z', group = "flowlab")]
    pub zerocopy: bool,
    /// UDP: kernel transmit timestamps (software; hardware where the NIC has them), to
    /// measure when packets really left ("departure error" beside the schedule error).
    #[arg(long, group = "flowlab")]
    pub tx_timestamps: bool,
    /// Paced one-way UDP: send the datagrams as whole frames through a packet socket (needs
    /// CAP_NET_RAW), past the kernel's UDP and IP send path, which costs most of a paced
    /// datagram's CPU; the interface's qdisc still applies. Frames go to the next hop's MAC
    /// address as the kernel's tables give it when the test starts.
    #[arg(long, group = "flowlab")]
    pub packet_socket: bool,
    /// DiffServ code point of the test packets: ef, af11..af43, cs0..cs7, be, or 0..63.
    #[arg(long, value_parser = flowlab_qos::classify::parse_dscp, group = "flowlab")]
    pub dscp: Option<u8>,
    /// Socket priority of the test packets on their host (SO_PRIORITY).
    #[arg(long, group = "flowlab")]
    pub priority: Option<u32>,
    /// Firewall/routing mark of the test packets (SO_MARK; needs CAP_NET_ADMIN).
    #[arg(long, group = "flowlab")]
    pub mark: Option<u32>,
    /// TCP_NODELAY at the sender: on or off (default: on for paced flows, off at max rate).
    #[arg(long, value_name = "on|off", value_parser = parse_switch, group = "flowlab")]
    pub nodelay: Option<bool>,
    /// TCP maximum segment size (TCP_MAXSEG).
    #[arg(long, short = 'M', alias = "set-mss", value_parser = parse_buffer, group = "flowlab")]
    pub mss: Option<u32>,
    /// TCP: the largest window the receiver advertises (TCP_WINDOW_CLAMP, held through the
    /// test: Linux resets it as data arrives), e.g. 64KiB; the window a paper states.
    #[arg(long, value_parser = parse_buffer, group = "flowlab")]
    pub window_clamp: Option<u32>,
    /// The receiving application reads at most this rate (a slow reader, e.g. 1M): its socket
    /// buffer fills, delay rises by the buffer's worth, then the buffer drops packets. UDP.
    #[arg(long, value_parser = parse_bit_rate, group = "flowlab")]
    pub read_rate: Option<u64>,
    /// TCP congestion control (cubic, reno, bbr, ... as the kernel has them).
    #[arg(long, short = 'C', group = "flowlab")]
    pub congestion: Option<String>,
    /// Warm-up left out of the results (2s): what is sent in it is not measured. Unlike
    /// iperf3's -O, it is part of --duration.
    #[arg(long, short = 'O', value_parser = parse_duration, group = "flowlab")]
    pub omit: Option<Duration>,
    /// Print live figures every interval (1s, 500ms).
    #[arg(long, short, value_parser = parse_duration, group = "flowlab")]
    pub interval: Option<Duration>,
    /// A live view in the terminal: throughput, loss and delay percentiles every --interval
    /// (1s unless given), with small plots; plain lines where stdout is not a terminal.
    #[arg(long, conflicts_with_all = ["json", "json_stream"], group = "flowlab")]
    pub live: bool,
    /// Print the result as one JSON document.
    #[arg(long, short = 'J', conflicts_with = "json_stream")]
    pub json: bool,
    /// Print one JSON object per line: each interval, then the result.
    #[arg(long, group = "flowlab")]
    pub json_stream: bool,
    /// Write one CSV row per packet to this file.
    #[arg(long, group = "flowlab")]
    pub packet_log: Option<PathBuf>,
    /// Also write the result JSON to this file.
    #[arg(long, short)]
    pub output: Option<PathBuf>,
    /// Prefix every line of the text result with this, and store it with the run.
    #[arg(long, short = 'T')]
    pub title: Option<String>,
    /// Append everything the test prints to this file instead of the terminal.
    #[arg(long)]
    pub logfile: Option<PathBuf>,
    /// Pre-shared key, when the agent requires one.
    #[arg(long)]
    pub key_file: Option<PathBuf>,
    /// Tag every test packet with the session's key (TWAMP's authenticated mode; UDP at a
    /// constant rate, --key-file at both ends): forged or altered packets are dropped.
    #[arg(long, requires = "key_file")]
    pub auth_packets: bool,
    /// The results database, a file or postgres:// URL (default: $FLOWLAB_DB or XDG data dir).
    #[arg(long, group = "flowlab")]
    pub db: Option<PathBuf>,
    /// Do not store this test in the results database.
    #[arg(long)]
    pub no_store: bool,
    /// How long to wait for packets still in flight after the last one is sent.
    #[arg(long, default_value = "500ms", value_parser = parse_duration)]
    pub drain: Duration,
    /// A STAMP session (RFC 8762; TWAMP-light) to the reflector at the target (HOST[:PORT],
    /// port 862 by default) instead of a flowlab test: packets of --size bytes (44 B, or 112 B
    /// authenticated with --key-file) at --rate (default 10 packets/s) for --duration or
    /// --count; reports two-way delay, one-way delays (valid with synchronised clocks) and loss.
    #[arg(long)]
    pub stamp: bool,
    /// Run against an iperf3 server (iperf3 -s) at the target, HOST[:PORT] (port 5201).
    #[arg(long, conflicts_with_all = ["stamp", "mode", "traffic", "preset", "key_file"])]
    pub iperf3: bool,
}

#[derive(Args, Debug)]
pub struct DoctorArgs {
    /// The agent: HOST, HOST:PORT, [IPV6]:PORT.
    pub target: String,
    /// Print what was measured and the findings as one JSON document.
    #[arg(long)]
    pub json: bool,
    /// Pre-shared key, when the agent requires one.
    #[arg(long)]
    pub key_file: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct DemoArgs {
    /// Where to write all results as JSON (default: flowlab-demo.json in the current directory).
    #[arg(long, default_value = "flowlab-demo.json")]
    pub out: PathBuf,
    /// Where to write the HTML report.
    #[arg(long, default_value = "flowlab-demo.html")]
    pub report: PathBuf,
    /// The results database, a file or postgres:// URL (default: $FLOWLAB_DB or XDG data dir).
    #[arg(long)]
    pub db: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct SweepArgs {
    /// The agent: HOST, HOST:PORT, [IPV6]:PORT.
    pub target: String,
    /// A parameter and its values: size=100..8000:100, proto=udp,tcp, rate=1M,2M,5M,
    /// mode=oneway,loopback,reverse, duration=1s,2s, count=..., flows=1..4:1, or any other
    /// test parameter by its flag name (congestion=cubic,bbr, dscp=ef,af41, nodelay=on,off,
    /// pacing=precise,efficient,auto);
    /// what a point does not set follows it as on the command line. Repeat for a grid.
    #[arg(long, value_name = "NAME=VALUES", required = true)]
    pub vary: Vec<String>,
    /// Repetitions of every point.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub repeat: u32,
    /// Repeat each point until the 95 % confidence interval of --ci-metric is within this much
    /// of its mean (2%, 0.5%), at least twice and at most --max-repeat times.
    #[arg(long, value_parser = parse_percent, conflicts_with = "repeat")]
    pub until_ci: Option<f64>,
    /// Most repetitions with --until-ci.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(2..=10_000))]
    pub max_repeat: u32,
    /// Metric whose interval --until-ci watches (rtt, loss, throughput, or a metric name).
    #[arg(long, default_value = "rtt")]
    pub ci_metric: String,
    /// Run the points in random order (seeded by --seed), so slow drifts do not masquerade as
    /// effects of the swept parameter.
    #[arg(long)]
    pub shuffle: bool,
    /// Seed of --shuffle.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Continue an interrupted sweep: run only the points run RUN lacks (same flags needed).
    #[arg(long, value_name = "RUN")]
    pub resume: Option<RunId>,
    /// The results database, a file or postgres:// URL (default: $FLOWLAB_DB or XDG data dir).
    #[arg(long)]
    pub db: Option<PathBuf>,
    /// Metrics in the final table.
    #[arg(long, value_delimiter = ',', default_value = "rtt,loss,cpu,throughput")]
    pub show: Vec<String>,
    /// No progress bar.
    #[arg(long, short)]
    pub quiet: bool,
    /// Store every packet's fate in the database (for delay and loss plots).
    #[arg(long)]
    pub packet_log: bool,
    /// Send TCP messages (as `flowlab test --tcp`).
    #[arg(long, conflicts_with = "udp")]
    pub tcp: bool,
    /// Send UDP datagrams (default).
    #[arg(long, short)]
    pub udp: bool,
    /// Offered rate (2M, max).
    #[arg(long, short, visible_short_alias = 'b')]
    pub rate: Option<String>,
    /// Run points whose rate is far beyond the path's link speed (as `flowlab test`).
    #[arg(long)]
    pub force_rate: bool,
    /// Bytes per packet.
    #[arg(long, short, visible_short_alias = 'l')]
    pub size: Option<String>,
    /// How long each test sends (default 10s unless --count).
    #[arg(long, short, visible_short_alias = 't')]
    pub duration: Option<String>,
    /// Packets per test.
    #[arg(long, short = 'n')]
    pub count: Option<String>,
    /// oneway or loopback.
    #[arg(long)]
    pub mode: Option<String>,
    /// Agent sends, client receives.
    #[arg(long, short = 'R')]
    pub reverse: bool,
    /// Parallel flows.
    #[arg(long, short = 'P')]
    pub flows: Option<String>,
    /// Live intervals inside each test (for time-series plots).
    #[arg(long, short)]
    pub interval: Option<String>,
    /// Pre-shared key, when the agent requires one.
    #[arg(long)]
    pub key_file: Option<PathBuf>,
    /// Wait for packets in flight after the last one is sent.
    #[arg(long)]
    pub drain: Option<String>,
    /// How senders wait for deadlines, at every point: precise, efficient or auto (as
    /// `flowlab test --pacing`).
    #[arg(long, value_name = "MODE")]
    pub pacing: Option<String>,
}
