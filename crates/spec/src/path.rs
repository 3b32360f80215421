//! A test's rate against the path it leaves by: a rate far beyond what the egress interface
//! can carry measures nothing but the sender's own queue (issue 12: `--rate 1000T` ran and
//! reported 104 billion packets "lost by sender"), so it is refused unless forced.

use flowlab_units::format_rate;

use crate::{refuse, SpecError, TestSpec};

/// Highest rate of one flow on an interface without a link speed (loopback, veth): the
/// kernel moves their packets as fast as a core copies them, and no core copies more.
pub const CEILING_WITHOUT_LINK_SPEED_BPS: u64 = 100_000_000_000;

/// A test may offer up to this many times its interface's link speed in all (an overload
/// test offers more than the link carries); beyond, only the sender's queue is measured.
pub const MAX_OVER_LINK_SPEED: u64 = 2;

/// The interface a test leaves by, and its link speed where the kernel knows one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EgressPath {
    pub interface: String,
    pub link_speed_bps: Option<u64>,
}

impl TestSpec {
    /// Refuses a constant rate far beyond `path`: above [`MAX_OVER_LINK_SPEED`] times its
    /// link speed for all flows together, or above [`CEILING_WITHOUT_LINK_SPEED_BPS`] per
    /// flow where the interface has no speed. `--rate max` and traffic models pass (they are
    /// held to the agent's `--max-rate` instead).
    pub fn check_rate_on(&self, path: &EgressPath) -> Result<(), SpecError> {
        let Some(rate) = self.rate_bps else {
            return Ok(());
        };
        let total = rate.saturating_mul(u64::from(self.flows));
        let (asked, limit, why) = match path.link_speed_bps {
            Some(speed) => (
                total,
                speed.saturating_mul(MAX_OVER_LINK_SPEED),
                format!(
                    "{} links at {}; at most {MAX_OVER_LINK_SPEED}x that is offered",
                    path.interface,
                    format_rate(speed as f64)
                ),
            ),
            None => (
                rate,
                CEILING_WITHOUT_LINK_SPEED_BPS,
                format!(
                    "{} has no link speed; at most {} per flow is offered there",
                    path.interface,
                    format_rate(CEILING_WITHOUT_LINK_SPEED_BPS as f64)
                ),
            ),
        };
        if asked <= limit {
            return Ok(());
        }
        let flows = match self.flows {
            1 => String::new(),
            n => format!(" ({n} flows)"),
        };
        refuse(format!(
            "rate {}{flows} is far beyond the path ({why}): check the unit, or pass --force-rate",
            format_rate(asked as f64),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Direction, Protocol};

    fn spec(rate: Option<u64>, flows: u32) -> TestSpec {
        TestSpec {
            rate_bps: rate,
            flows,
            ..TestSpec::new(Protocol::Udp, Direction::Oneway)
        }
    }

    fn path(interface: &str, speed: Option<u64>) -> EgressPath {
        EgressPath {
            interface: interface.into(),
            link_speed_bps: speed,
        }
    }

    #[test]
    fn a_rate_far_beyond_the_link_speed_is_refused() {
        let eth = path("eth0", Some(1_000_000_000));
        assert_eq!(spec(Some(2_000_000_000), 1).check_rate_on(&eth), Ok(()));
        let e = spec(Some(2_000_000_001), 1)
            .check_rate_on(&eth)
            .unwrap_err();
        assert_eq!(
            e.0,
            "rate 2.00 Gbit/s is far beyond the path (eth0 links at 1.00 Gbit/s; at most 2x \
             that is offered): check the unit, or pass --force-rate"
        );
        // Flows add up against a link.
        let e = spec(Some(30_000_000), 100).check_rate_on(&eth).unwrap_err();
        assert!(e.0.starts_with("rate 3.00 Gbit/s (100 flows)"), "{e}");
    }

    #[test]
    fn without_a_link_speed_each_flow_is_held_to_the_ceiling() {
        let lo = path("lo", None);
        assert_eq!(spec(Some(100_000_000_000), 4).check_rate_on(&lo), Ok(()));
        let e = spec(Some(5_000_000_000_000), 1)
            .check_rate_on(&lo)
            .unwrap_err();
        assert!(e.0.contains("lo has no link speed"), "{e}");
        assert!(!e.0.contains('\n'));
        assert_eq!(spec(None, 1).check_rate_on(&lo), Ok(()), "max rate passes");
    }
}
