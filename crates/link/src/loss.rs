//! Loss processes, decided one unit (a frame, or an ATM cell) at a time: independent
//! random loss, or the Gilbert-Elliott two-state chain that netem's `loss gemodel` offers
//! for bursts.

use rand_chacha::ChaCha8Rng;

use crate::unit_f64;

/// How units are lost.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum LossModel {
    /// Nothing is lost.
    #[default]
    None,
    /// Each unit is lost with probability `p`, independently.
    Random { p: f64 },
    /// Gilbert-Elliott: a good and a bad state; `p` is P(good → bad) and `r` P(bad → good)
    /// per unit; a unit is lost with `loss_good` in the good state and `loss_bad` in the bad
    /// one. Gilbert's model is `loss_good = 0, loss_bad = 1`: bursts of mean length `1/r`,
    /// a loss ratio of `p / (p + r)`. netem's `gemodel p r 1-h 1-k`, transitions first.
    GilbertElliott {
        p: f64,
        r: f64,
        loss_good: f64,
        loss_bad: f64,
    },
}

impl LossModel {
    /// The long-run fraction of units lost.
    pub fn mean_loss(&self) -> f64 {
        match *self {
            LossModel::None => 0.0,
            LossModel::Random { p } => p,
            LossModel::GilbertElliott {
                p,
                r,
                loss_good,
                loss_bad,
            } => {
                if p + r == 0.0 {
                    return loss_good;
                }
                (r * loss_good + p * loss_bad) / (p + r)
            }
        }
    }
}

/// A loss model with its state (the Gilbert-Elliott chain's current state).
#[derive(Debug, Clone)]
pub struct LossProcess {
    model: LossModel,
    bad: bool,
}

impl LossProcess {
    pub fn new(model: LossModel) -> LossProcess {
        LossProcess { model, bad: false }
    }

    /// Whether the next unit is lost.
    pub fn lose(&mut self, rng: &mut ChaCha8Rng) -> bool {
        match self.model {
            LossModel::None => false,
            LossModel::Random { p } => unit_f64(rng) < p,
            LossModel::GilbertElliott {
                p,
                r,
                loss_good,
                loss_bad,
            } => {
                // As netem: the state moves first, the unit is lost with the old state's odds.
                let (flip, loss) = if self.bad {
                    (r, loss_bad)
                } else {
                    (p, loss_good)
                };
                if unit_f64(rng) < flip {
                    self.bad = !self.bad;
                }
                unit_f64(rng) < loss
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(model: LossModel, n: usize) -> Vec<bool> {
        let mut rng = crate::stage_rng(7, 0);
        let mut l = LossProcess::new(model);
        (0..n).map(|_| l.lose(&mut rng)).collect()
    }

    fn ratio(v: &[bool]) -> f64 {
        v.iter().filter(|&&x| x).count() as f64 / v.len() as f64
    }

    /// Mean length of runs of consecutive losses.
    fn mean_burst(v: &[bool]) -> f64 {
        let (mut bursts, mut lost, mut prev) = (0, 0, false);
        for &x in v {
            if x {
                lost += 1;
                if !prev {
                    bursts += 1;
                }
            }
            prev = x;
        }
        lost as f64 / bursts.max(1) as f64
    }

    #[test]
    fn none_and_certain_loss_are_exact() {
        assert!(run(LossModel::None, 1000).iter().all(|&x| !x));
        assert!(run(LossModel::Random { p: 1.0 }, 1000).iter().all(|&x| x));
        assert!(run(LossModel::Random { p: 0.0 }, 1000).iter().all(|&x| !x));
    }

    #[test]
    fn random_loss_has_its_ratio_and_no_bursts() {
        let v = run(LossModel::Random { p: 0.05 }, 400_000);
        assert!((ratio(&v) - 0.05).abs() < 0.002, "{}", ratio(&v));
        // Independent losses: runs average 1/(1-p).
        assert!((mean_burst(&v) - 1.0 / 0.95).abs() < 0.02);
    }

    #[test]
    fn gilbert_bursts_have_mean_length_one_over_r() {
        let model = LossModel::GilbertElliott {
            p: 0.01,
            r: 0.25,
            loss_good: 0.0,
            loss_bad: 1.0,
        };
        let v = run(model, 1_000_000);
        let want = 0.01 / 0.26;
        assert!((model.mean_loss() - want).abs() < 1e-12);
        assert!((ratio(&v) - want).abs() < 0.003, "{}", ratio(&v));
        assert!((mean_burst(&v) - 4.0).abs() < 0.2, "{}", mean_burst(&v));
    }

    #[test]
    fn elliott_loss_in_both_states_matches_the_stationary_mix() {
        let model = LossModel::GilbertElliott {
            p: 0.05,
            r: 0.2,
            loss_good: 0.01,
            loss_bad: 0.5,
        };
        let v = run(model, 1_000_000);
        assert!((ratio(&v) - model.mean_loss()).abs() < 0.004);
    }
}
