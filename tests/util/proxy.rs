//! [`TcpProxy`]: a tiny TCP forwarder a test can cut and restore, to put a
//! connection loss between squall and a server, slow the server's replies
//! down, and see what the client sent.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

/// What the client-to-server threads look for ([`TcpProxy::watch`]).
#[derive(Debug, Default)]
struct Watch {
    pattern: Mutex<Vec<u8>>,
    seen: AtomicUsize,
}

impl Watch {
    /// Counts the pattern's occurrences in `chunk`, with the end of the
    /// previous chunk (`carry`) in front, so one split across two reads counts.
    fn scan(&self, carry: &mut Vec<u8>, chunk: &[u8]) {
        let pattern = self.pattern.lock().expect("proxy lock").clone();
        if pattern.is_empty() {
            return;
        }
        carry.extend_from_slice(chunk);
        let hits = carry.windows(pattern.len()).filter(|w| *w == pattern.as_slice()).count();
        self.seen.fetch_add(hits, Ordering::SeqCst);
        let keep = (pattern.len() - 1).min(carry.len());
        carry.drain(..carry.len() - keep);
    }
}

/// Forwards connections from a loopback port to `upstream`, one thread per
/// direction. [`TcpProxy::cut`] closes every connection and refuses new ones
/// (they are accepted and closed at once) until [`TcpProxy::restore`].
/// [`TcpProxy::delay_replies`] holds every chunk the server sends for a
/// while before passing it on (in order): a slow broker.
/// [`TcpProxy::watch`] counts a byte pattern in what clients send.
#[derive(Debug)]
pub struct TcpProxy {
    addr: SocketAddr,
    up: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
    open: Arc<Mutex<Vec<TcpStream>>>,
    delay_ms: Arc<AtomicU64>,
    watch: Arc<Watch>,
}

/// Copies `from` to `to` until either side closes; every chunk goes out
/// `delay_ms` after it was read. A second thread writes, so reading goes on
/// while chunks wait: the delay adds latency, it does not cut the rate.
fn forward_delayed(mut from: TcpStream, to: TcpStream, delay_ms: Arc<AtomicU64>) {
    let (tx, rx) = mpsc::channel::<(Instant, Vec<u8>)>();
    let writer_to = to.try_clone().expect("clone");
    let writer = std::thread::spawn(move || {
        let mut to = writer_to;
        for (due, chunk) in rx {
            let now = Instant::now();
            if due > now {
                std::thread::sleep(due - now);
            }
            if to.write_all(&chunk).is_err() {
                break;
            }
        }
        let _ = to.shutdown(Shutdown::Both);
    });
    let mut buf = [0u8; 16384];
    loop {
        match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                let due = Instant::now() + Duration::from_millis(delay_ms.load(Ordering::SeqCst));
                if tx.send((due, buf[..n].to_vec())).is_err() {
                    break;
                }
            }
        }
    }
    drop(tx);
    let _ = writer.join();
    let _ = to.shutdown(Shutdown::Both);
    let _ = from.shutdown(Shutdown::Both);
}

impl TcpProxy {
    /// Starts forwarding `127.0.0.1:<random port>` to `upstream`.
    pub fn start(upstream: &str) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
        let addr = listener.local_addr().expect("a bound listener has an address");
        listener.set_nonblocking(true).expect("non-blocking listener");
        let up = Arc::new(AtomicBool::new(true));
        let stop = Arc::new(AtomicBool::new(false));
        let open: Arc<Mutex<Vec<TcpStream>>> = Arc::default();
        let upstream: SocketAddr = upstream.parse().expect("upstream is an address");
        let delay_ms = Arc::new(AtomicU64::new(0));
        let watch = Arc::new(Watch::default());
        let (up2, stop2, open2) = (Arc::clone(&up), Arc::clone(&stop), Arc::clone(&open));
        let (delay2, watch2) = (Arc::clone(&delay_ms), Arc::clone(&watch));
        std::thread::spawn(move || {
            while !stop2.load(Ordering::SeqCst) {
                let client = match listener.accept() {
                    Ok((s, _)) => s,
                    Err(_) => {
                        std::thread::sleep(Duration::from_millis(10));
                        continue;
                    }
                };
                let _ = client.set_nonblocking(false);
                if !up2.load(Ordering::SeqCst) {
                    let _ = client.shutdown(Shutdown::Both);
                    continue;
                }
                let Ok(server) = TcpStream::connect(upstream) else {
                    let _ = client.shutdown(Shutdown::Both);
                    continue;
                };
                let _ = client.set_nodelay(true);
                let _ = server.set_nodelay(true);
                {
                    let mut open = open2.lock().expect("proxy lock");
                    open.push(client.try_clone().expect("clone a socket"));
                    open.push(server.try_clone().expect("clone a socket"));
                }
                // Client to server: watched, never delayed.
                let (mut from, mut to) =
                    (client.try_clone().expect("clone"), server.try_clone().expect("clone"));
                let watch = Arc::clone(&watch2);
                std::thread::spawn(move || {
                    let mut buf = [0u8; 16384];
                    let mut carry = Vec::new();
                    loop {
                        match from.read(&mut buf) {
                            Ok(0) | Err(_) => break,
                            Ok(n) => {
                                watch.scan(&mut carry, &buf[..n]);
                                if to.write_all(&buf[..n]).is_err() {
                                    break;
                                }
                            }
                        }
                    }
                    let _ = to.shutdown(Shutdown::Both);
                    let _ = from.shutdown(Shutdown::Both);
                });
                // Server to client: the replies, delayed when asked.
                let delay = Arc::clone(&delay2);
                std::thread::spawn(move || forward_delayed(server, client, delay));
            }
        });
        Self { addr, up, stop, open, delay_ms, watch }
    }

    /// The proxy's loopback address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `nats://127.0.0.1:<port>` of the proxy.
    pub fn url(&self) -> String {
        format!("nats://{}", self.addr)
    }

    /// Closes every forwarded connection and refuses new ones.
    pub fn cut(&self) {
        self.up.store(false, Ordering::SeqCst);
        for s in self.open.lock().expect("proxy lock").drain(..) {
            let _ = s.shutdown(Shutdown::Both);
        }
    }

    /// Holds every chunk the server sends for `delay` before passing it on
    /// (`Duration::ZERO`: at once again). Applies to what is read from now on.
    pub fn delay_replies(&self, delay: Duration) {
        self.delay_ms.store(delay.as_millis() as u64, Ordering::SeqCst);
    }

    /// Counts `pattern` in what clients send from now on ([`TcpProxy::seen`]).
    pub fn watch(&self, pattern: &[u8]) {
        *self.watch.pattern.lock().expect("proxy lock") = pattern.to_vec();
        self.watch.seen.store(0, Ordering::SeqCst);
    }

    /// How often the watched pattern was sent since [`TcpProxy::watch`].
    pub fn seen(&self) -> usize {
        self.watch.seen.load(Ordering::SeqCst)
    }

    /// Forwards new connections again.
    pub fn restore(&self) {
        self.up.store(true, Ordering::SeqCst);
    }
}

impl Drop for TcpProxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        self.cut();
    }
}
