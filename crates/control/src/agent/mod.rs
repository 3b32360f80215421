//! The agent: accepts control connections, runs each test in its own session thread, and
//! sends test traffic only to the address of the client that asked.
//!
//! `config`: what it allows; `session`: a connection's life; `checks`: a request's checks;
//! `data`: the data sockets towards the client; `roles`: the engine roles it runs; `relay`:
//! what it does for a controller.

mod checks;
mod config;
mod data;
mod relay;
mod roles;
mod session;

use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::admission::{self, Admission};
use session::{agent_hello, Session};

pub use checks::check_request;
pub use config::{
    AgentConfig, AgentStats, Limits, DEFAULT_MAX_RATE_BPS, HANDSHAKE_TIMEOUT, START_TIMEOUT,
};

/// Serves until `stop` is raised. Each control connection gets its own thread; logs go to
/// `log` (one line each).
pub fn serve(
    listener: TcpListener,
    config: AgentConfig,
    stats: Arc<AgentStats>,
    stop: &AtomicBool,
    log: Arc<dyn Fn(String) + Send + Sync>,
) -> std::io::Result<()> {
    listener.set_nonblocking(true)?;
    let config = Arc::new(config);
    let next_session = Arc::new(AtomicU32::new(rand::random::<u32>() | 1));
    let admission = Admission::new(config.connections);
    while !stop.load(Ordering::Relaxed) && !flowlab_sys::signal::is_interrupted() {
        match listener.accept() {
            Ok((stream, peer)) => {
                let ticket = match admission.admit(peer.ip()) {
                    Ok(ticket) => ticket,
                    Err(reason) => {
                        stats.turned_away.fetch_add(1, Ordering::Relaxed);
                        log(format!("{peer}: turned away: {reason}"));
                        admission::turn_away(stream, agent_hello(&config), reason);
                        continue;
                    }
                };
                let _ = stream.set_nonblocking(false);
                stats.sessions.fetch_add(1, Ordering::Relaxed);
                let (config, stats, log, next) = (
                    config.clone(),
                    stats.clone(),
                    log.clone(),
                    next_session.clone(),
                );
                std::thread::spawn(move || {
                    let session = Session {
                        peer,
                        id: next.fetch_add(1, Ordering::Relaxed),
                        config: &config,
                        stats: &stats,
                        log: &*log,
                    };
                    if let Err(e) = session.run(stream, ticket) {
                        log(format!("{peer}: {e}"));
                    }
                });
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => log(format!("accept failed: {e}")),
        }
    }
    Ok(())
}

/// An agent serving on 127.0.0.1 from a thread of this process (the demo, tests).
pub struct LocalAgent {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<std::io::Result<()>>>,
}

impl LocalAgent {
    /// Starts a quiet agent with the default configuration on an ephemeral loopback port.
    pub fn start() -> std::io::Result<LocalAgent> {
        let listener = TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, 0))?;
        let addr = listener.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let quiet: Arc<dyn Fn(String) + Send + Sync> = Arc::new(|_| {});
                serve(
                    listener,
                    AgentConfig::default(),
                    Arc::new(AgentStats::default()),
                    &stop,
                    quiet,
                )
            })
        };
        Ok(LocalAgent {
            addr,
            stop,
            thread: Some(thread),
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops serving and waits for the agent; its result is the accept loop's.
    pub fn stop(mut self) -> std::io::Result<()> {
        self.stop.store(true, Ordering::Relaxed);
        match self.thread.take().map(std::thread::JoinHandle::join) {
            Some(Ok(result)) => result,
            Some(Err(_)) => Err(std::io::Error::other("the agent thread failed")),
            None => Ok(()),
        }
    }
}

impl Drop for LocalAgent {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
