//! What a front end asks of this crate: a session from what a person typed (the defaults of
//! what they left out), and a reflector on a thread of its own, with the lines that say what
//! it does and did.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use flowlab_traffic::PacingMode;
use flowlab_units::Rate;

use crate::net::{bind_reflector, serve_reflector, SessionOptions};
use crate::reflector::{Reflector, ReflectorStats, MAX_SOURCES};
use crate::session::{mode_name, random_ssid, SessionSender};
use crate::StampAuth;

/// Test packets a second when no rate is given.
pub const DEFAULT_PACKETS_PER_SEC: u64 = 10;
/// Session length when neither a duration nor a count is given.
pub const DEFAULT_DURATION: Duration = Duration::from_secs(10);

/// A session as asked for; `None` takes the default.
#[derive(Debug, Clone, Copy)]
pub struct SessionRequest<'a> {
    /// The pre-shared key: authenticated mode.
    pub key: Option<&'a [u8]>,
    /// Bytes of each test packet; default: the mode's STAMP packet.
    pub size: Option<u64>,
    /// Default: [`DEFAULT_PACKETS_PER_SEC`]; `max` is refused (a session is paced).
    pub rate: Option<Rate>,
    pub count: Option<u64>,
    /// Default: [`DEFAULT_DURATION`], unless a count is given.
    pub duration: Option<Duration>,
    /// How long to wait for replies after the last packet.
    pub drain: Duration,
    /// How the sender waits for each slot; default auto.
    pub pacing: Option<PacingMode>,
}

impl SessionRequest<'_> {
    /// The session to the reflector `resolve` finds, asked only once the rest is valid.
    /// Errors are one line; the request's own start with "invalid test".
    pub fn options(
        &self,
        resolve: impl FnOnce() -> Result<SocketAddr, String>,
    ) -> Result<SessionOptions, String> {
        let auth = self.key.map(StampAuth::new);
        let mode_len = match auth {
            Some(_) => flowlab_wire::stamp::AUTH_LEN,
            None => flowlab_wire::stamp::UNAUTH_LEN,
        };
        let size = self
            .size
            .map_or(Ok(mode_len), usize::try_from)
            .unwrap_or(usize::MAX);
        let sender = SessionSender::new(auth, random_ssid(), size)
            .map_err(|e| format!("invalid test: {e}"))?;
        let rate_bps = match self.rate {
            None => size as u64 * 8 * DEFAULT_PACKETS_PER_SEC,
            Some(Rate::BitsPerSec(r)) => r,
            Some(Rate::Max) => {
                return Err("invalid test: a STAMP session is paced: give --rate in bit/s".into())
            }
        };
        Ok(SessionOptions {
            reflector: resolve()?,
            sender,
            rate_bps,
            count: self.count,
            duration: match (self.duration, self.count) {
                (None, None) => Some(DEFAULT_DURATION),
                (d, _) => d,
            },
            drain: self.drain,
            pacing: self.pacing.unwrap_or_default(),
        })
    }
}

/// A reflector's address as people type it: `PORT` (on `bind`), `ADDR:PORT` or
/// `[IPV6]:PORT`.
pub fn reflector_addr(spec: &str, bind: IpAddr) -> Result<SocketAddr, String> {
    if let Ok(port) = spec.parse::<u16>() {
        return Ok(SocketAddr::new(bind, port));
    }
    spec.parse()
        .map_err(|_| format!("invalid --stamp '{spec}': expected PORT, ADDR:PORT or [IPV6]:PORT"))
}

/// A reflector on a thread of its own, until stopped or interrupted.
pub struct ReflectorThread {
    local: SocketAddr,
    banner: String,
    stop: Arc<AtomicBool>,
    handle: JoinHandle<io::Result<ReflectorStats>>,
}

impl ReflectorThread {
    /// Binds `addr` and reflects there (authenticated with `key`, at most `max_pps` packets a
    /// second per source). `on_error` hears at once why it stopped if it fails: the agent
    /// beside it may run on for days.
    pub fn spawn(
        addr: SocketAddr,
        key: Option<&[u8]>,
        max_pps: u32,
        on_error: impl FnOnce(&io::Error) + Send + 'static,
    ) -> io::Result<ReflectorThread> {
        let socket = bind_reflector(addr)?;
        let local = socket.local_addr()?;
        let mut reflector = Reflector::new(key.map(StampAuth::new), max_pps);
        let banner = format!(
            "flowlab STAMP reflector on UDP {local}: {}, stateless; at most {max_pps} packets/s \
             per source (--stamp-max-pps), {MAX_SOURCES} sources at once",
            mode_name(reflector.mode()),
        );
        let stop = Arc::new(AtomicBool::new(false));
        let stop_flag = stop.clone();
        let handle = std::thread::Builder::new()
            .name("stamp-reflector".into())
            .spawn(move || {
                serve_reflector(&socket, &mut reflector, &stop_flag).inspect_err(on_error)?;
                Ok(reflector.stats())
            })?;
        Ok(ReflectorThread {
            local,
            banner,
            stop,
            handle,
        })
    }

    /// Where it reflects.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// The line that says where and how it reflects.
    pub fn banner(&self) -> &str {
        &self.banner
    }

    /// Stops the reflector (now, or with `wait`, when the process is interrupted) and returns
    /// what it did.
    pub fn finish(self, wait: bool) -> Result<ReflectorStats, String> {
        if !wait {
            self.stop.store(true, Ordering::Relaxed);
        }
        self.handle
            .join()
            .map_err(|_| "the STAMP reflector thread panicked".to_string())?
            .map_err(|e| format!("STAMP reflector: {e}"))
    }
}

/// The line that says what a stopping reflector did.
pub fn stopping_line(stats: &ReflectorStats) -> String {
    format!(
        "flowlab STAMP reflector stopping: {} reflected; refused {} too short, {} failed the \
         HMAC, {} over a source's rate, {} past the sources cap",
        stats.reflected,
        stats.too_short,
        stats.bad_hmac,
        stats.rate_limited,
        stats.too_many_sources
    )
}

#[cfg(test)]
mod tests {
    use std::net::UdpSocket;

    use super::*;

    fn request() -> SessionRequest<'static> {
        SessionRequest {
            key: None,
            size: None,
            rate: None,
            count: None,
            duration: None,
            drain: Duration::from_millis(500),
            pacing: None,
        }
    }

    fn loopback() -> Result<SocketAddr, String> {
        Ok("127.0.0.1:862".parse().unwrap())
    }

    #[test]
    fn a_session_takes_the_modes_packet_ten_a_second_for_ten_seconds() {
        let o = request().options(loopback).unwrap();
        let len = flowlab_wire::stamp::UNAUTH_LEN;
        assert_eq!(o.sender.packet_len(), len);
        assert_eq!(o.rate_bps, len as u64 * 8 * 10);
        assert_eq!((o.count, o.duration), (None, Some(DEFAULT_DURATION)));
        assert_eq!(o.pacing, PacingMode::Auto);
        let key = [7u8; 32];
        let auth = SessionRequest {
            key: Some(&key),
            count: Some(5),
            rate: Some(Rate::BitsPerSec(64_000)),
            pacing: Some(PacingMode::Efficient),
            ..request()
        };
        let o = auth.options(loopback).unwrap();
        assert_eq!(o.sender.packet_len(), flowlab_wire::stamp::AUTH_LEN);
        assert_eq!(o.pacing, PacingMode::Efficient);
        assert_eq!((o.rate_bps, o.count, o.duration), (64_000, Some(5), None));
    }

    #[test]
    fn a_bad_request_is_refused_before_the_reflector_is_looked_up() {
        let never = || -> Result<SocketAddr, String> { panic!("resolved") };
        let max = SessionRequest {
            rate: Some(Rate::Max),
            ..request()
        };
        assert_eq!(
            max.options(never).unwrap_err(),
            "invalid test: a STAMP session is paced: give --rate in bit/s"
        );
        let tiny = SessionRequest {
            size: Some(10),
            ..request()
        };
        assert!(tiny
            .options(never)
            .unwrap_err()
            .starts_with("invalid test: "));
        let unresolved = request().options(|| Err("cannot resolve host 'x'".into()));
        assert_eq!(unresolved.unwrap_err(), "cannot resolve host 'x'");
    }

    #[test]
    fn reflector_addresses_as_people_type_them() {
        let any: IpAddr = "::".parse().unwrap();
        let addr = |s| reflector_addr(s, any);
        assert_eq!(addr("862").unwrap(), "[::]:862".parse().unwrap());
        assert_eq!(
            addr("127.0.0.1:8620").unwrap(),
            "127.0.0.1:8620".parse().unwrap()
        );
        assert_eq!(addr("[::1]:9").unwrap(), "[::1]:9".parse().unwrap());
        assert_eq!(
            addr("host:x").unwrap_err(),
            "invalid --stamp 'host:x': expected PORT, ADDR:PORT or [IPV6]:PORT"
        );
    }

    #[test]
    fn a_reflector_thread_reflects_until_stopped_and_counts() {
        let r = ReflectorThread::spawn("127.0.0.1:0".parse().unwrap(), None, 100, |_| {}).unwrap();
        assert!(r
            .banner()
            .contains("unauthenticated, stateless; at most 100 packets/s"));
        let client = UdpSocket::bind("127.0.0.1:0").unwrap();
        client
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        let request = [0u8; flowlab_wire::stamp::UNAUTH_LEN];
        // The short one first: once the reply comes, both were handled.
        client.send_to(&request[..10], r.local_addr()).unwrap();
        client.send_to(&request, r.local_addr()).unwrap();
        let mut reply = [0u8; 128];
        assert_eq!(client.recv(&mut reply).unwrap(), request.len());
        let stats = r.finish(false).unwrap();
        assert_eq!((stats.reflected, stats.too_short), (1, 1));
        assert!(stopping_line(&stats).contains(": 1 reflected; refused 1 too short, 0 failed"));
    }
}
