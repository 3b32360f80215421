//! Request/response transactions, as netperf's RR and CRR tests run them: a client sends a
//! request, the server answers with a response of the size the request asks for, the client
//! waits a think time and sends the next. Sizes and think times are distributions, drawn from
//! a seeded generator: the same seed replays the same transactions. No clock, no sockets: the
//! engine times the transactions.

use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use crate::dist::{rng, Dist, Sampler};
use crate::TrafficError;

/// Largest request or response: a sane bound on what one transaction may ask the agent to
/// send (the TCP message maximum).
pub const MAX_MESSAGE_SIZE: u32 = 16 << 20;

/// A request/response workload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TransactionConfig {
    /// Request bytes, header included.
    pub request: Dist,
    /// Response bytes, header included.
    pub response: Dist,
    /// Nanoseconds between a response's arrival and the next request (0: back to back).
    pub think: Dist,
    /// Open a new connection for every transaction (netperf's TCP_CRR).
    pub connect_each: bool,
}

/// One transaction to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transaction {
    pub request_size: u32,
    pub response_size: u32,
    pub think_ns: u64,
}

/// A size distribution whose draws fit `1..=MAX_MESSAGE_SIZE` on average: its mean must.
fn check_size(name: &str, dist: &Dist) -> Result<(), TrafficError> {
    dist.validate()?;
    let what = match dist {
        Dist::Const { .. } => format!("{name} size"),
        _ => format!("mean {name} size"),
    };
    match dist.mean() {
        Some(mean) if !(1.0..=f64::from(MAX_MESSAGE_SIZE)).contains(&mean) => {
            Err(TrafficError::invalid(format!(
                "{what} {mean} B is outside 1 B..{MAX_MESSAGE_SIZE} B"
            )))
        }
        _ => Ok(()),
    }
}

impl TransactionConfig {
    pub fn validate(&self) -> Result<(), TrafficError> {
        check_size("request", &self.request)?;
        check_size("response", &self.response)?;
        self.think.validate()
    }
}

/// Random streams of one transaction source: each part draws from its own.
const REQUESTS: u64 = 1;
const RESPONSES: u64 = 2;
const THINKS: u64 = 3;

/// The transactions of one client stream, drawn lazily.
pub struct Transactions {
    request: Sampler,
    response: Sampler,
    think: Sampler,
    request_rng: ChaCha8Rng,
    response_rng: ChaCha8Rng,
    think_rng: ChaCha8Rng,
}

impl Transactions {
    pub fn new(config: &TransactionConfig, seed: u64) -> Result<Transactions, TrafficError> {
        config.validate()?;
        Ok(Transactions {
            request: Sampler::new(&config.request)?,
            response: Sampler::new(&config.response)?,
            think: Sampler::new(&config.think)?,
            request_rng: rng(seed, REQUESTS),
            response_rng: rng(seed, RESPONSES),
            think_rng: rng(seed, THINKS),
        })
    }

    /// The next transaction; sizes are clamped to `1..=max_size` (the transport's limit).
    pub fn next_transaction(&mut self, max_size: u32) -> Transaction {
        let max = max_size.clamp(1, MAX_MESSAGE_SIZE);
        Transaction {
            request_size: self.request.sample_size(&mut self.request_rng, max),
            response_size: self.response.sample_size(&mut self.response_rng, max),
            think_ns: self.think.sample_ns(&mut self.think_rng),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(response: Dist) -> TransactionConfig {
        TransactionConfig {
            request: Dist::Const { value: 64.0 },
            response,
            think: Dist::Exp { mean: 1e6 },
            connect_each: false,
        }
    }

    fn draw(config: &TransactionConfig, seed: u64, n: usize) -> Vec<Transaction> {
        let mut t = Transactions::new(config, seed).unwrap();
        (0..n)
            .map(|_| t.next_transaction(MAX_MESSAGE_SIZE))
            .collect()
    }

    #[test]
    fn a_seed_replays_the_same_transactions() {
        let c = config(Dist::Exp { mean: 2000.0 });
        let a = draw(&c, 5, 100);
        assert_eq!(a, draw(&c, 5, 100));
        assert_ne!(a, draw(&c, 6, 100));
        assert!(a.iter().all(|t| t.request_size == 64));
    }

    #[test]
    fn drawn_sizes_and_think_times_have_their_means() {
        let c = config(Dist::LogNormal {
            mean: 10_000.0,
            sd: 4_000.0,
        });
        let n = 100_000;
        let t = draw(&c, 1, n);
        let mean_response = t.iter().map(|t| f64::from(t.response_size)).sum::<f64>() / n as f64;
        let mean_think = t.iter().map(|t| t.think_ns as f64).sum::<f64>() / n as f64;
        assert!((mean_response - 10_000.0).abs() < 100.0, "{mean_response}");
        assert!((mean_think - 1e6).abs() < 1e4, "{mean_think}");
    }

    #[test]
    fn sizes_stay_within_the_transport_limit() {
        let c = config(Dist::Uniform {
            low: 60_000.0,
            high: 70_000.0,
        });
        let mut t = Transactions::new(&c, 3).unwrap();
        assert!((0..1000).all(|_| t.next_transaction(65_507).response_size <= 65_507));
    }

    #[test]
    fn sizes_out_of_range_are_refused() {
        for (response, want) in [
            (Dist::Const { value: 0.0 }, "response size 0 B is outside"),
            (
                Dist::Exp { mean: 20e6 },
                "mean response size 20000000 B is outside",
            ),
        ] {
            let e = config(response).validate().unwrap_err().to_string();
            assert!(e.contains(want), "{e}");
        }
    }
}
