//! Who may say what when: the server's and the client's sides of the control connection.
//! Each takes what arrived and says what to send or do next; bytes out of turn are errors.

use crate::frame::{encode_json, server_error, Cookie, State, COOKIE_SIZE};
use crate::params::{Params, ParamsLimits, Refusal, TestPlan};
use crate::results::{Results, ResultsError};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProtocolError {
    #[error("iperf3 peer sent {got:?} while {phase}")]
    OutOfTurn { got: State, phase: &'static str },
    #[error("iperf3 stream with another test's cookie")]
    WrongCookie,
    #[error(transparent)]
    Frame(#[from] crate::FrameError),
    #[error(transparent)]
    Results(#[from] ResultsError),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ServerPhase {
    Params,
    Streams { connected: u64 },
    Running,
    Results,
    Display,
    Done,
}

impl ServerPhase {
    fn name(self) -> &'static str {
        match self {
            ServerPhase::Params => "exchanging parameters",
            ServerPhase::Streams { .. } => "creating streams",
            ServerPhase::Running => "running",
            ServerPhase::Results => "exchanging results",
            ServerPhase::Display => "displaying results",
            ServerPhase::Done => "done",
        }
    }
}

/// A server's test, from the client's cookie to its IPERF_DONE.
#[derive(Debug, Clone)]
pub struct ServerMachine {
    cookie: Cookie,
    phase: ServerPhase,
    plan: Option<TestPlan>,
}

/// What the client's state byte means for the server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerEvent {
    /// TEST_END: stop the streams, send these bytes (EXCHANGE_RESULTS), read its results.
    TestEnd(Vec<u8>),
    /// IPERF_DONE after DISPLAY_RESULTS: the test is over.
    Done,
    /// CLIENT_TERMINATE (the client was interrupted): stop without results.
    Terminated,
}

impl ServerMachine {
    /// A control connection's first 37 bytes; what to answer (PARAM_EXCHANGE).
    pub fn start(cookie: &[u8; COOKIE_SIZE]) -> Result<(ServerMachine, [u8; 1]), ProtocolError> {
        let machine = ServerMachine {
            cookie: Cookie::parse(cookie)?,
            phase: ServerPhase::Params,
            plan: None,
        };
        Ok((machine, [State::ParamExchange.byte()]))
    }

    /// The parameter document: the plan and CREATE_STREAMS, or the refusal and its
    /// SERVER_ERROR bytes.
    pub fn on_params(
        &mut self,
        document: &[u8],
        limits: &ParamsLimits,
    ) -> Result<(TestPlan, [u8; 1]), (Refusal, [u8; 9])> {
        let plan = match self.phase {
            ServerPhase::Params => Params::parse(document).and_then(|p| p.check(limits)),
            _ => Err(Refusal {
                i_errno: crate::params::errno::RECV_PARAMS,
                message: "parameters out of turn".to_string(),
            }),
        };
        match plan {
            Ok(plan) => {
                self.plan = Some(plan);
                self.phase = ServerPhase::Streams { connected: 0 };
                Ok((plan, [State::CreateStreams.byte()]))
            }
            Err(refusal) => {
                self.phase = ServerPhase::Done;
                let bytes = server_error(refusal.i_errno, 0);
                Err((refusal, bytes))
            }
        }
    }

    /// Whether a TCP stream's cookie is this test's.
    pub fn owns(&self, cookie: &[u8; COOKIE_SIZE]) -> bool {
        cookie == self.cookie.bytes()
    }

    /// One more stream connected (a TCP connection with the cookie, or a UDP connect
    /// datagram); with the last, TEST_START and TEST_RUNNING to send. Streams beyond the
    /// plan's are refused.
    pub fn on_stream(&mut self) -> Result<Option<[u8; 2]>, ProtocolError> {
        let (ServerPhase::Streams { connected }, Some(plan)) = (self.phase, self.plan) else {
            return Err(ProtocolError::WrongCookie);
        };
        let connected = connected + 1;
        if connected < plan.streams {
            self.phase = ServerPhase::Streams { connected };
            return Ok(None);
        }
        self.phase = ServerPhase::Running;
        Ok(Some([State::TestStart.byte(), State::TestRunning.byte()]))
    }

    /// A state byte from the client.
    pub fn on_client_state(&mut self, byte: u8) -> Result<ServerEvent, ProtocolError> {
        let got = State::from_byte(byte)?;
        match (got, self.phase) {
            (State::TestEnd, ServerPhase::Running) => {
                self.phase = ServerPhase::Results;
                Ok(ServerEvent::TestEnd(vec![State::ExchangeResults.byte()]))
            }
            (State::IperfDone, ServerPhase::Display) | (State::ClientTerminate, _) => {
                let terminated = got == State::ClientTerminate;
                self.phase = ServerPhase::Done;
                Ok(match terminated {
                    true => ServerEvent::Terminated,
                    false => ServerEvent::Done,
                })
            }
            _ => Err(ProtocolError::OutOfTurn {
                got,
                phase: self.phase.name(),
            }),
        }
    }

    /// The client's results (checked against the plan's streams); what to send: the
    /// server's results and DISPLAY_RESULTS.
    pub fn on_client_results(
        &mut self,
        document: &[u8],
        ours: &Results,
    ) -> Result<(Results, Vec<u8>), ProtocolError> {
        let streams = self.plan.map_or(0, |p| p.streams as usize);
        if self.phase != ServerPhase::Results {
            let phase = self.phase.name();
            return Err(ProtocolError::OutOfTurn {
                got: State::ExchangeResults,
                phase,
            });
        }
        let theirs = Results::parse(document, streams)?;
        let mut bytes = encode_json(&ours.to_json());
        bytes.push(State::DisplayResults.byte());
        self.phase = ServerPhase::Display;
        Ok((theirs, bytes))
    }
}

/// What the server's state byte asks of a client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientAction {
    SendParams,
    ConnectStreams,
    /// TEST_START: nothing yet.
    Wait,
    /// TEST_RUNNING: run the test, then send TEST_END.
    Run,
    /// EXCHANGE_RESULTS: send ours, read the server's.
    ExchangeResults,
    /// DISPLAY_RESULTS: send IPERF_DONE; the test is over.
    Finish,
    /// SERVER_ERROR: read its two codes.
    ReadServerError,
}

/// The client's expectations: each server state in order.
#[derive(Debug, Clone, Default)]
pub struct ClientMachine {
    next: usize,
}

const CLIENT_SEQUENCE: [(State, ClientAction); 6] = [
    (State::ParamExchange, ClientAction::SendParams),
    (State::CreateStreams, ClientAction::ConnectStreams),
    (State::TestStart, ClientAction::Wait),
    (State::TestRunning, ClientAction::Run),
    (State::ExchangeResults, ClientAction::ExchangeResults),
    (State::DisplayResults, ClientAction::Finish),
];

/// Why a server stopped a client's test, in words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ServerStop {
    #[error("the iperf3 server is busy running a test (ACCESS_DENIED)")]
    Busy,
    #[error("the iperf3 server ended the test (SERVER_TERMINATE)")]
    Terminated,
    #[error(transparent)]
    Protocol(#[from] ProtocolError),
}

impl ClientMachine {
    pub fn on_server_state(&mut self, byte: u8) -> Result<ClientAction, ServerStop> {
        let got = State::from_byte(byte).map_err(ProtocolError::from)?;
        match got {
            State::AccessDenied => return Err(ServerStop::Busy),
            State::ServerTerminate => return Err(ServerStop::Terminated),
            State::ServerError => return Ok(ClientAction::ReadServerError),
            _ => {}
        }
        match CLIENT_SEQUENCE.get(self.next) {
            Some((expected, action)) if *expected == got => {
                self.next += 1;
                Ok(*action)
            }
            _ => Err(ProtocolError::OutOfTurn {
                got,
                phase: "waiting for the server",
            }
            .into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::COOKIE_CHARS;
    use crate::params::errno;

    const LIMITS: ParamsLimits = ParamsLimits {
        max_duration_s: 60,
        max_rate_bps: None,
        max_streams: 4,
        min_tcp_block: 1,
    };

    fn cookie() -> [u8; COOKIE_SIZE] {
        *Cookie::from_entropy([7; 36]).bytes()
    }

    #[test]
    fn a_server_test_runs_in_iperf3s_order() {
        let (mut server, answer) = ServerMachine::start(&cookie()).unwrap();
        assert_eq!(answer, [9]);
        let (plan, answer) = server
            .on_params(br#"{"tcp":true,"parallel":2}"#, &LIMITS)
            .unwrap();
        assert_eq!((plan.streams, answer), (2, [10]));
        assert!(server.owns(&cookie()));
        assert!(!server.owns(&[COOKIE_CHARS[0]; COOKIE_SIZE]));
        assert_eq!(server.on_stream(), Ok(None));
        assert_eq!(server.on_stream(), Ok(Some([1, 2])));
        assert!(
            server.on_stream().is_err(),
            "a third stream of a two-stream test"
        );
        assert_eq!(
            server.on_client_state(4),
            Ok(ServerEvent::TestEnd(vec![13]))
        );
        let ours = Results::default();
        let theirs = br#"{"cpu_util_total":1,"cpu_util_user":1,"cpu_util_system":0,"sender_has_retransmits":0,"streams":[]}"#;
        assert!(
            server.on_client_results(theirs, &ours).is_err(),
            "no streams for two"
        );
        let mut server = ServerMachine {
            phase: ServerPhase::Results,
            plan: None,
            ..server
        };
        let (_, sent) = server.on_client_results(theirs, &ours).unwrap();
        assert_eq!(sent.last(), Some(&14));
        assert_eq!(&sent[4..sent.len() - 1], ours.to_json().as_bytes());
        assert_eq!(server.on_client_state(16), Ok(ServerEvent::Done));
    }

    #[test]
    fn a_server_refuses_out_of_turn_and_bad_parameters() {
        let (mut server, _) = ServerMachine::start(&cookie()).unwrap();
        let early = server.on_client_state(4).unwrap_err();
        assert_eq!(
            early.to_string(),
            "iperf3 peer sent TestEnd while exchanging parameters"
        );
        let (refusal, bytes) = server
            .on_params(br#"{"tcp":true,"time":61}"#, &LIMITS)
            .unwrap_err();
        assert_eq!(
            (refusal.i_errno, bytes),
            (errno::DURATION, server_error(5, 0))
        );
        assert_eq!(server.on_client_state(12), Ok(ServerEvent::Terminated));
        assert!(ServerMachine::start(&[0; COOKIE_SIZE]).is_err());
    }

    #[test]
    fn a_client_follows_the_servers_states() {
        let mut client = ClientMachine::default();
        let actions: Vec<_> = [9, 10, 1, 2, 13, 14]
            .iter()
            .map(|&b| client.on_server_state(b).unwrap())
            .collect();
        assert_eq!(actions.len(), 6);
        assert_eq!(actions[3], ClientAction::Run);
        let mut client = ClientMachine::default();
        assert_eq!(client.on_server_state(0xff), Err(ServerStop::Busy));
        assert_eq!(
            client.on_server_state(0xfe),
            Ok(ClientAction::ReadServerError)
        );
        assert!(
            client.on_server_state(10).is_err(),
            "CREATE_STREAMS before PARAM_EXCHANGE"
        );
    }
}
