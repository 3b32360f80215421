//! The agents' clocks during a real experiment: probed before anything runs, then re-probed
//! every few seconds on the same control connections for as long as the experiment lasts, so
//! that the fit follows each clock's drift (issue 12: the 16 first probes fell into one window
//! and were never refreshed).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use flowlab_control::controller::ClockProbe;
use flowlab_experiment::{ClockEstimator, ClockSample};

use crate::outcome::Clocks;

/// Exchanges with each agent before the experiment.
const FIRST_PROBES: usize = 16;
/// Exchanges of each re-probe; the least round trip of them is kept.
const REPROBES: usize = 4;

type Estimators = Arc<Mutex<BTreeMap<String, ClockEstimator>>>;

/// Re-probes every agent's clock in the background until dropped.
pub struct ClockWatch {
    estimators: Estimators,
    stop: Option<mpsc::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl ClockWatch {
    /// Connects to every agent (checking it answers and speaks our version), takes the first
    /// probes, and re-probes each every `period`: the fit keeps the least round trip of each
    /// period.
    pub fn start(
        agents: &BTreeSet<&String>,
        key: Option<&[u8]>,
        period: Duration,
    ) -> anyhow::Result<ClockWatch> {
        let first = |agent: &String| -> anyhow::Result<(ClockProbe, ClockEstimator)> {
            let fail = |e| anyhow::anyhow!("agent {agent}: {e}");
            let mut probe = ClockProbe::connect(agent, key).map_err(fail)?;
            let mut estimator = ClockEstimator::new(period.as_nanos() as u64);
            add(&mut estimator, probe.exchange(FIRST_PROBES).map_err(fail)?);
            Ok((probe, estimator))
        };
        // Every agent at once: a fleet's hundred agents one after another would wait for
        // each one's 16 round trips in turn.
        let started: Vec<_> = std::thread::scope(|scope| {
            let threads: Vec<_> = agents
                .iter()
                .map(|&agent| scope.spawn(move || first(agent)))
                .collect();
            threads
                .into_iter()
                .map(|t| {
                    t.join()
                        .unwrap_or_else(|_| Err(anyhow::anyhow!("a clock probe failed")))
                })
                .collect()
        });
        let mut probes = Vec::new();
        let mut estimators = BTreeMap::new();
        for (&agent, started) in agents.iter().zip(started) {
            let (probe, estimator) = started?;
            estimators.insert(agent.clone(), estimator);
            probes.push((agent.clone(), probe));
        }
        let estimators = Arc::new(Mutex::new(estimators));
        let (stop, stopped) = mpsc::channel();
        let shared = Arc::clone(&estimators);
        let thread = std::thread::spawn(move || reprobe(probes, &shared, &stopped, period));
        Ok(ClockWatch {
            estimators,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// Every agent's clock as fitted so far.
    pub fn clocks(&self) -> Clocks {
        let estimators = self
            .estimators
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        estimators
            .iter()
            .filter_map(|(agent, e)| Some((agent.clone(), e.fit()?.offset())))
            .collect()
    }
}

impl Drop for ClockWatch {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Feeds exchanges to an estimator; an inconsistent one (a clock stepped mid-probe) is left
/// out.
fn add(estimator: &mut ClockEstimator, exchanges: Vec<(u64, u64, u64, u64)>) {
    for (t1, t2, t3, t4) in exchanges {
        let _ = estimator.add(ClockSample { t1, t2, t3, t4 });
    }
}

/// Re-probes until `stopped` says so (its sender dropped). An agent that stops answering is
/// left with the fit it has: its bound widens with the time since its last probe.
fn reprobe(
    mut probes: Vec<(String, ClockProbe)>,
    estimators: &Mutex<BTreeMap<String, ClockEstimator>>,
    stopped: &mpsc::Receiver<()>,
    period: Duration,
) {
    while let Err(RecvTimeoutError::Timeout) = stopped.recv_timeout(period) {
        probes.retain_mut(|(agent, probe)| match probe.exchange(REPROBES) {
            Ok(exchanges) => {
                let mut estimators = estimators.lock().unwrap_or_else(PoisonError::into_inner);
                if let Some(e) = estimators.get_mut(agent) {
                    add(e, exchanges);
                }
                true
            }
            Err(_) => false,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 12: a clock against itself (an agent on this host) drifts by ~0 ppm, within the
    /// bound the re-probed fit reports, and its offset is ~0 within its bound.
    #[test]
    fn one_clock_re_probed_on_loopback_has_no_drift_within_the_bound() {
        let agent = flowlab_control::LocalAgent::start().expect("agent on 127.0.0.1");
        let addr = agent.addr().to_string();
        let watch =
            ClockWatch::start(&BTreeSet::from([&addr]), None, Duration::from_millis(200)).unwrap();
        std::thread::sleep(Duration::from_millis(2500));
        let clock = watch.clocks()[&addr];
        drop(watch);
        assert!(clock.probes >= 8, "re-probed: {clock:?}");
        let (ppm, bound) = (clock.drift_ppm.unwrap(), clock.drift_bound_ppm.unwrap());
        assert!(ppm.abs() <= bound, "drift {ppm} ± {bound} ppm");
        assert!(bound < 5000.0, "a 2.5 s span bounds the drift: {bound} ppm");
        let (offset, offset_bound) = clock.at(flowlab_sys::clock::realtime_ns());
        assert!(
            offset.unsigned_abs() <= offset_bound,
            "offset {offset} ± {offset_bound} ns"
        );
    }
}
