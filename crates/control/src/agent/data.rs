//! The agent's data sockets, one per flow: bound to its side of the control connection and
//! connected to (or accepting from) the control peer's address only; or, for a multicast
//! test, a receiving socket joined to the group.

use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::time::{Duration, Instant};

use flowlab_spec::{format_mac, MulticastGroup, Protocol, TestSpec};
use flowlab_sys::raw::RawSocket;
use socket2::{Domain, Socket, Type};

use super::checks::RawPath;
use super::config::SETUP_TIMEOUT;
use crate::native::{check_mtu, raw_error};

/// Socket options that do not apply to native frames.
fn raw_notes(spec: &TestSpec) -> Vec<String> {
    let o = &spec.socket;
    let ip_only = o.dscp.is_some() || o.mark.is_some() || o.kernel_pacing || o.tx_timestamps;
    ip_only
        .then(|| {
            "DSCP, marks, kernel pacing and transmit stamps apply to IP sockets, not native frames"
                .to_string()
        })
        .into_iter()
        .collect()
}

/// A multicast receiver's socket: bound to the group and its port (so it hears only that
/// group) and joined on the interface holding the control connection's address. Nothing is
/// ever sent on it.
fn join_group(m: &MulticastGroup, local_ip: IpAddr) -> Result<UdpSocket, String> {
    let at = SocketAddr::new(m.group, m.port);
    let failed = |e: std::io::Error| format!("cannot join the multicast group {at}: {e}");
    let socket = Socket::new(Domain::for_address(at), Type::DGRAM, None).map_err(failed)?;
    socket.set_reuse_address(true).map_err(failed)?;
    socket.bind(&at.into()).map_err(failed)?;
    match (m.group, local_ip.to_canonical()) {
        (IpAddr::V4(group), IpAddr::V4(local)) => socket.join_multicast_v4(&group, &local),
        (IpAddr::V6(group), local) => {
            let interface = flowlab_sys::raw::interface_with_address(local).map_err(failed)?;
            socket.join_multicast_v6(&group, interface.index)
        }
        (IpAddr::V4(_), IpAddr::V6(_)) => {
            return Err(format!("an IPv4 group ({at}) needs the client over IPv4"))
        }
    }
    .map_err(failed)?;
    Ok(socket.into())
}

/// The agent's data sockets, one per flow, before and after the client's side is known.
pub(super) enum DataSockets {
    Udp(Vec<UdpSocket>),
    /// Native frames: one socket on the interface, sending to the client's MAC address; this
    /// end's MAC address.
    Raw(Vec<RawSocket>, [u8; 6]),
    TcpListening(TcpListener, usize),
    Tcp(Vec<TcpStream>),
    /// CRR: a connection per transaction, accepted from the client's address only.
    TcpAcceptEach(TcpListener, IpAddr),
}

impl DataSockets {
    /// UDP: each bound and connected to the client's address only, so the kernel drops
    /// datagrams from anyone else and the agent can send nowhere else.
    pub(super) fn open(
        spec: &TestSpec,
        local_ip: IpAddr,
        peer_ip: IpAddr,
        raw: Option<RawPath>,
    ) -> Result<DataSockets, String> {
        let local = SocketAddr::new(local_ip, 0);
        match spec.protocol {
            Protocol::Udp if spec.multicast.is_some() => spec
                .multicast
                .as_ref()
                .map(|m| join_group(m, local_ip))
                .into_iter()
                .collect::<Result<Vec<_>, String>>()
                .map(DataSockets::Udp),
            Protocol::Udp => spec
                .client_udp_ports
                .iter()
                .map(|&port| {
                    let sock = UdpSocket::bind(local)
                        .map_err(|e| format!("cannot open a UDP data socket: {e}"))?;
                    sock.connect(SocketAddr::new(peer_ip, port))
                        .map_err(|e| format!("cannot connect a UDP data socket: {e}"))?;
                    Ok(sock)
                })
                .collect::<Result<Vec<_>, String>>()
                .map(DataSockets::Udp),
            Protocol::Tcp => {
                let connect_each = spec
                    .traffic
                    .as_ref()
                    .and_then(|t| t.transactions())
                    .is_some_and(|rr| rr.connect_each);
                TcpListener::bind(local)
                    .map(|l| match connect_each {
                        true => DataSockets::TcpAcceptEach(l, peer_ip),
                        false => DataSockets::TcpListening(l, spec.flows as usize),
                    })
                    .map_err(|e| format!("cannot open a TCP data socket: {e}"))
            }
            Protocol::Raw => {
                let interface = raw.ok_or("native frames need the path to the client")?;
                check_mtu(&interface.local, spec.size)?;
                RawSocket::open(&interface.local, interface.peer_mac)
                    .map(|s| DataSockets::Raw(vec![s], interface.local.mac))
                    .map_err(|e| raw_error(&interface.local.name, &e))
            }
            Protocol::Icmp => Err("ICMP echo needs no agent: the host's kernel answers".into()),
        }
    }

    /// This end's MAC address, for native frames.
    pub(super) fn mac(&self) -> Option<String> {
        match self {
            DataSockets::Raw(_, mac) => Some(format_mac(mac)),
            _ => None,
        }
    }

    /// The ports the client sends to: one per UDP flow; TCP flows all connect to one port.
    pub(super) fn ports(&self) -> Vec<u16> {
        let port = |a: std::io::Result<SocketAddr>| a.map(|a| a.port()).unwrap_or(0);
        match self {
            DataSockets::Udp(socks) => socks.iter().map(|s| port(s.local_addr())).collect(),
            DataSockets::Raw(..) => Vec::new(),
            DataSockets::TcpListening(l, _) | DataSockets::TcpAcceptEach(l, _) => {
                vec![port(l.local_addr())]
            }
            DataSockets::Tcp(streams) => streams.iter().map(|s| port(s.local_addr())).collect(),
        }
    }

    /// Applies the test's socket options; returns notes for the report.
    pub(super) fn configure(&self, spec: &TestSpec, sending: bool) -> Vec<String> {
        match self {
            DataSockets::Udp(socks) => flowlab_engine::configure_udp(socks, spec, sending),
            DataSockets::Raw(..) => raw_notes(spec),
            DataSockets::Tcp(streams) => flowlab_engine::configure_tcp(streams, spec, sending),
            DataSockets::TcpListening(..) | DataSockets::TcpAcceptEach(..) => Vec::new(),
        }
    }

    /// TCP: accepts the data connections, from the client's address only.
    pub(super) fn establish(self, peer_ip: IpAddr) -> Result<DataSockets, String> {
        let DataSockets::TcpListening(listener, flows) = self else {
            return Ok(self);
        };
        listener.set_nonblocking(true).map_err(|e| e.to_string())?;
        let deadline = Instant::now() + SETUP_TIMEOUT;
        let mut streams = Vec::with_capacity(flows);
        while streams.len() < flows {
            if Instant::now() >= deadline {
                return Err(format!(
                    "the client opened {} of {flows} TCP data connections",
                    streams.len()
                ));
            }
            match listener.accept() {
                Ok((stream, from)) if from.ip() == peer_ip => {
                    stream.set_nonblocking(false).map_err(|e| e.to_string())?;
                    streams.push(stream);
                }
                Ok(_) => {} // someone else: dropped
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    std::thread::sleep(Duration::from_millis(2));
                }
                Err(e) => return Err(format!("data connection failed: {e}")),
            }
        }
        Ok(DataSockets::Tcp(streams))
    }
}
