//! `flowlab test --stamp` (a STAMP session to any reflector) and `flowlab serve --stamp` (a
//! STAMP reflector beside the agent, or alone): flags in, one call to `flowlab_stamp`.

use std::io::Write;
use std::net::{IpAddr, SocketAddr};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::{anyhow, Context};
use flowlab_stamp::{Reflector, ReflectorStats, SessionOptions, SessionSender, StampAuth};
use flowlab_units::Rate;
use flowlab_wire::stamp::STAMP_PORT;

use crate::args::{ServeArgs, TestArgs};

/// Test packets a second when no --rate is given.
const DEFAULT_PACKETS_PER_SEC: u64 = 10;
/// Session length when neither --duration nor --count is given.
const DEFAULT_DURATION: Duration = Duration::from_secs(10);

fn auth_from(key_file: Option<&std::path::Path>) -> anyhow::Result<Option<StampAuth>> {
    let key = key_file.map(flowlab_control::load_key).transpose()?;
    Ok(key.as_deref().map(StampAuth::new))
}

/// The session the flags describe.
fn session_options(args: &TestArgs) -> anyhow::Result<SessionOptions> {
    let auth = auth_from(args.key_file.as_deref())?;
    let mode_len = match auth {
        Some(_) => flowlab_wire::stamp::AUTH_LEN,
        None => flowlab_wire::stamp::UNAUTH_LEN,
    };
    let size = args
        .size
        .map_or(Ok(mode_len), usize::try_from)
        .unwrap_or(usize::MAX);
    let ssid = flowlab_stamp::session::random_ssid();
    let sender = SessionSender::new(auth, ssid, size).map_err(|e| anyhow!("invalid test: {e}"))?;
    let rate_bps = match args.rate {
        None => size as u64 * 8 * DEFAULT_PACKETS_PER_SEC,
        Some(Rate::BitsPerSec(r)) => r,
        Some(Rate::Max) => {
            return Err(anyhow!(
                "invalid test: a STAMP session is paced: give --rate in bit/s"
            ))
        }
    };
    let reflector = flowlab_control::client::resolve_with_port(&args.target, STAMP_PORT)
        .map_err(|e| anyhow!("{e}"))?;
    Ok(SessionOptions {
        reflector,
        sender,
        rate_bps,
        count: args.count,
        duration: match (args.duration, args.count) {
            (None, None) => Some(DEFAULT_DURATION),
            (d, _) => d,
        },
        drain: args.drain,
    })
}

/// `flowlab test --stamp HOST[:PORT]`.
pub fn run_test(args: &TestArgs) -> anyhow::Result<ExitCode> {
    let options = session_options(args)?;
    flowlab_sys::signal::interrupt_flag();
    let result = flowlab_stamp::run_session(&options)?;
    let json = serde_json::to_string_pretty(&result)?;
    if let Some(path) = &args.output {
        std::fs::write(path, format!("{json}\n"))
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    let mut stdout = std::io::stdout().lock();
    if args.json {
        writeln!(stdout, "{json}")?;
    } else {
        write!(stdout, "{}", flowlab_stamp::render(&result))?;
    }
    stdout.flush()?;
    if let Some(e) = &result.error {
        eprintln!("flowlab: error: {e} (results above cover the session up to then)");
        return Ok(ExitCode::from(1));
    }
    if result.interrupted {
        eprintln!("flowlab: interrupted: results above cover the session up to then");
        return Ok(ExitCode::from(130));
    }
    Ok(ExitCode::SUCCESS)
}

/// `--stamp`'s `[ADDR:]PORT`; a bare port takes the agent's `--bind` address.
fn reflector_addr(spec: &str, bind: IpAddr) -> anyhow::Result<SocketAddr> {
    if let Ok(port) = spec.parse::<u16>() {
        return Ok(SocketAddr::new(bind, port));
    }
    spec.parse()
        .map_err(|_| anyhow!("invalid --stamp '{spec}': expected PORT, ADDR:PORT or [IPV6]:PORT"))
}

/// A reflector on its own thread.
pub struct ReflectorThread {
    stop: Arc<AtomicBool>,
    handle: JoinHandle<std::io::Result<ReflectorStats>>,
}

/// Starts the reflector `--stamp` asks for, if any, and says where and how it reflects.
pub fn start_reflector(
    args: &ServeArgs,
    key: Option<&[u8]>,
) -> anyhow::Result<Option<ReflectorThread>> {
    let Some(spec) = &args.stamp else {
        return Ok(None);
    };
    let socket = flowlab_stamp::bind_reflector(reflector_addr(spec, args.bind)?)?;
    let mut reflector = Reflector::new(key.map(StampAuth::new), args.stamp_max_pps);
    eprintln!(
        "flowlab STAMP reflector on UDP {}: {}, stateless; at most {} packets/s per source \
         (--stamp-max-pps), {} sources at once",
        socket.local_addr()?,
        flowlab_stamp::session::mode_name(reflector.mode()),
        args.stamp_max_pps,
        flowlab_stamp::reflector::MAX_SOURCES,
    );
    let stop = Arc::new(AtomicBool::new(false));
    let stop_flag = stop.clone();
    let handle = std::thread::Builder::new()
        .name("stamp-reflector".into())
        .spawn(move || {
            // Said when it happens: the agent beside it may run on for days.
            flowlab_stamp::serve_reflector(&socket, &mut reflector, &stop_flag)
                .inspect_err(|e| eprintln!("flowlab: error: STAMP reflector stopped: {e}"))?;
            Ok(reflector.stats())
        })?;
    Ok(Some(ReflectorThread { stop, handle }))
}

impl ReflectorThread {
    /// Stops the reflector (now, or with `wait`, at Ctrl-C) and says what it did.
    pub fn finish(self, wait: bool) -> anyhow::Result<ExitCode> {
        if !wait {
            self.stop.store(true, Ordering::Relaxed);
        }
        let stats = self
            .handle
            .join()
            .map_err(|_| anyhow!("the STAMP reflector thread panicked"))?
            .context("STAMP reflector")?;
        eprintln!(
            "flowlab STAMP reflector stopping: {} reflected; refused {} too short, {} failed the \
             HMAC, {} over a source's rate, {} past the sources cap",
            stats.reflected,
            stats.too_short,
            stats.bad_hmac,
            stats.rate_limited,
            stats.too_many_sources
        );
        Ok(ExitCode::SUCCESS)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reflector_addresses_as_people_type_them() {
        let any: IpAddr = "::".parse().unwrap();
        assert_eq!(
            reflector_addr("862", any).unwrap(),
            "[::]:862".parse().unwrap()
        );
        assert_eq!(
            reflector_addr("127.0.0.1:8620", any).unwrap(),
            "127.0.0.1:8620".parse().unwrap()
        );
        assert_eq!(
            reflector_addr("[::1]:9", any).unwrap(),
            "[::1]:9".parse().unwrap()
        );
        let e = reflector_addr("host:x", any).unwrap_err().to_string();
        assert_eq!(
            e,
            "invalid --stamp 'host:x': expected PORT, ADDR:PORT or [IPV6]:PORT"
        );
    }
}
