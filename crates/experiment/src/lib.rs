//! flowlab experiments, sans-IO: an experiment file (TOML) validated with line-numbered
//! errors and expanded into ordered [`Step`]s of ready-to-send [`flowlab_spec::TestSpec`]s;
//! clock offset estimation between hosts; a trial's totals over its flows; and the RFC 2544 and ATM Forum searches as state
//! machines fed with trial results. Nothing here opens a socket or reads a clock: the
//! controller (`flowlab run`) does the I/O and passes time and results in.

pub mod clock;
pub mod file;
pub mod limits;
pub mod plan;
pub mod search;
pub mod trial;

pub use clock::{one_way_valid, ClockError, ClockEstimator, ClockFit, ClockOffset, ClockSample};
pub use file::{
    load, Block, BlockKind, Experiment, ExperimentError, Flow, Host, Item, SearchKind, SearchSpec,
    SweepPoint, DEFAULT_AGENT_PORT,
};
pub use plan::{plan, trial_step, ResolvedFlow, SearchMachine, Step};
pub use search::{
    frame_level_metrics, knee_estimate, BackToBack, BackToBackResult, BufferEstimate, BurstPoint,
    BurstSize, FrameLevelMetrics, LoadPoint, LossVsLoad, OfferedLoad, Rfc2544Throughput,
    SearchError, ThroughputFlag, ThroughputResult, Trial, Verification, RFC2544_TRIAL_NS,
    TRIAL_DRAIN_NS,
};
pub use trial::{trial_totals, TrialFlow, TrialTotals};
