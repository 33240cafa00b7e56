//! The connector's I/O thread: the only thread that talks to the broker.
//!
//! [`IoThread::spawn`] starts it with a handshake: the body reports once
//! whether it connected ([`Handshake::ready`]), and `open` waits for that
//! report ([`IoThread::wait_ready`]) for at most its own budget, so a
//! broker that cannot be reached fails `open` promptly with the reason.
//! [`IoThread::join_within`] waits for the thread to end for at most the
//! close budget the connector declared; a thread that does not end in
//! time is left behind (it holds no lock the host needs) and `close`
//! returns, so the host's shutdown is never held up by a broker.

use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Duration;

/// What the body reports once: it connected, or why not.
type Ready = Result<(), NotReady>;

/// Why the I/O thread is not ready: `open` fails with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotReady {
    /// The body could not connect: its message.
    Failed(String),
    /// The body did not report within the budget.
    Timeout {
        /// The thread's name.
        name: String,
        /// The budget.
        within: Duration,
    },
    /// The body ended without reporting.
    Ended {
        /// The thread's name.
        name: String,
    },
}

impl std::fmt::Display for NotReady {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Failed(message) => f.write_str(message),
            Self::Timeout { name, within } => write!(f, "{name} did not connect within {within:?}"),
            Self::Ended { name } => write!(f, "{name} ended before it connected"),
        }
    }
}

impl std::error::Error for NotReady {}

/// The body's end of the start handshake.
#[derive(Debug)]
pub struct Handshake(mpsc::Sender<Ready>);

impl Handshake {
    /// Reports that the thread connected (`Ok`) or could not (`Err`: its
    /// text is the message `open` fails with, [`NotReady::Failed`]).
    pub fn ready<E: std::fmt::Display>(self, outcome: Result<(), E>) {
        let _ = self.0.send(outcome.map_err(|e| NotReady::Failed(e.to_string())));
    }

    /// Reports that the thread connected: `ready(Ok(()))`.
    pub fn connected(self) {
        let _ = self.0.send(Ok(()));
    }
}

/// Sends `()` when dropped: the body ended, by returning or by a panic.
struct Done(mpsc::Sender<()>);

impl Drop for Done {
    fn drop(&mut self) {
        let _ = self.0.send(());
    }
}

/// A running I/O thread (module doc).
#[derive(Debug)]
pub struct IoThread {
    name: String,
    thread: Option<JoinHandle<()>>,
    ready: Option<mpsc::Receiver<Ready>>,
    done: mpsc::Receiver<()>,
}

impl IoThread {
    /// Starts `body` on a thread named `name`.
    ///
    /// # Errors
    /// The operating system refused the thread.
    pub fn spawn(
        name: impl Into<String>,
        body: impl FnOnce(Handshake) + Send + 'static,
    ) -> std::io::Result<Self> {
        let name = name.into();
        let (ready_tx, ready_rx) = mpsc::channel();
        let (done_tx, done_rx) = mpsc::channel();
        let thread = std::thread::Builder::new().name(name.clone()).spawn(move || {
            let _done = Done(done_tx);
            body(Handshake(ready_tx));
        })?;
        Ok(Self { name, thread: Some(thread), ready: Some(ready_rx), done: done_rx })
    }

    /// Waits at most `within` for the body's handshake.
    ///
    /// # Errors
    /// The body's error, or that it ended or took longer without saying.
    pub fn wait_ready(&mut self, within: Duration) -> Result<(), NotReady> {
        let Some(ready) = self.ready.take() else { return Ok(()) };
        let name = self.name.clone();
        match ready.recv_timeout(within) {
            Ok(outcome) => outcome,
            Err(mpsc::RecvTimeoutError::Timeout) => Err(NotReady::Timeout { name, within }),
            Err(mpsc::RecvTimeoutError::Disconnected) => Err(NotReady::Ended { name }),
        }
    }

    /// Waits at most `budget` for the thread to end, then joins it. False
    /// when it did not end in time (it is left to finish on its own).
    pub fn join_within(&mut self, budget: Duration) -> bool {
        match self.done.recv_timeout(budget) {
            Ok(()) | Err(mpsc::RecvTimeoutError::Disconnected) => {
                if let Some(t) = self.thread.take() {
                    let _ = t.join();
                }
                true
            }
            Err(mpsc::RecvTimeoutError::Timeout) => false,
        }
    }

    /// True when the body has ended.
    pub fn is_finished(&self) -> bool {
        self.thread.as_ref().is_none_or(JoinHandle::is_finished)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_handshake_reports_and_the_join_is_bounded() {
        let (go_tx, go_rx) = mpsc::channel::<()>();
        let mut io = IoThread::spawn("test-io", move |hs| {
            hs.connected();
            let _ = go_rx.recv();
        })
        .unwrap();
        assert_eq!(io.wait_ready(Duration::from_secs(5)), Ok(()));
        assert!(!io.join_within(Duration::from_millis(1)), "still running");
        go_tx.send(()).unwrap();
        assert!(io.join_within(Duration::from_secs(5)));
        assert!(io.is_finished());

        let mut failing = IoThread::spawn("test-io", |hs| hs.ready(Err("refused"))).unwrap();
        let refused = failing.wait_ready(Duration::from_secs(5));
        assert_eq!(refused, Err(NotReady::Failed("refused".into())));
        let mut silent = IoThread::spawn("test-io", |_| {}).unwrap();
        let ended = silent.wait_ready(Duration::from_secs(5)).unwrap_err().to_string();
        assert!(ended.contains("ended before"), "{ended}");
        let mut panics = IoThread::spawn("test-io", |_| panic!("boom")).unwrap();
        assert!(panics.join_within(Duration::from_secs(5)), "a panic ends it too");
    }
}
