//! `--listen`'s HTTP server: `GET /metrics`, over TLS and behind basic authentication when
//! `--web-config` asks for them.
//!
//! A scraper must be answered whatever other clients do, so every connection has its own
//! thread and a total deadline, not a timeout per read: its request head (with the TLS
//! handshake) must be complete within `REQUEST_DEADLINE` of its accept, and the whole
//! exchange within `CONNECTION_DEADLINE`; a client that trickles one byte a second runs
//! out of time like one that sends nothing. At most `MAX_CONNECTIONS` are open at once;
//! a new one closes the oldest, which is the one nearest its deadline and the likeliest
//! to be stalled, so connections held open cannot keep a fresh scrape from being served.
//! (A server crate was not taken: hyper needs an async runtime, tiny_http answers from a
//! fixed pool with per-read timeouts, the very starvation this avoids; serving one path
//! takes little code, and its request parser has a fuzz target, `tests/fuzz_http.rs`.)

use super::web_config::WebConfig;
use super::{Board, prometheus};
use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Connections open at once; one more closes the oldest.
pub const MAX_CONNECTIONS: usize = 128;
/// From accept to the end of the request head, TLS handshake included. A scraper sends
/// its request at once.
pub const REQUEST_DEADLINE: Duration = Duration::from_secs(2);
/// From accept to the end of the exchange: the answer must be taken by then.
pub const CONNECTION_DEADLINE: Duration = Duration::from_secs(10);
/// A request head longer than this is refused.
const MAX_REQUEST: usize = 8192;
/// How long a connection stays open after the answer for what the client still sends.
const LINGER: Duration = Duration::from_millis(500);
/// Each connection's thread: parsing, TLS and encoding need little.
const STACK: usize = 256 << 10;

/// A `/metrics` server, listening until it is dropped (the end of a run: the REPL's next
/// `:run` can bind the same port again).
pub struct Server {
    pub addr: SocketAddr,
    stop: Arc<AtomicBool>,
    open: Arc<Open>,
    accept: Option<std::thread::JoinHandle<()>>,
}

/// What every connection's thread reads.
struct Site {
    board: Arc<Board>,
    web: Option<Arc<WebConfig>>,
}

/// The open connections, oldest first, each with a handle to close it.
#[derive(Default)]
struct Open {
    next: Mutex<(u64, VecDeque<(u64, TcpStream)>)>,
}

impl Open {
    /// Registers `stream` (closing the oldest when full); its id for `done`.
    fn add(&self, stream: &TcpStream) -> Option<u64> {
        let handle = stream.try_clone().ok()?;
        let mut guard = self.next.lock().ok()?;
        let (next, open) = &mut *guard;
        while open.len() >= MAX_CONNECTIONS {
            if let Some((_, oldest)) = open.pop_front() {
                let _ = oldest.shutdown(Shutdown::Both);
            }
        }
        *next += 1;
        open.push_back((*next, handle));
        Some(*next)
    }

    fn done(&self, id: u64) {
        if let Ok(mut guard) = self.next.lock() {
            guard.1.retain(|(i, _)| *i != id);
        }
    }

    fn close_all(&self) {
        if let Ok(mut guard) = self.next.lock() {
            for (_, s) in guard.1.drain(..) {
                let _ = s.shutdown(Shutdown::Both);
            }
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop; it sees the flag and drops the listener.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        if let Some(t) = self.accept.take() {
            let _ = t.join();
        }
        self.open.close_all();
    }
}

impl Server {
    /// Binds `addr` now (so a port in use is an error before tracing) and serves
    /// `board`'s latest snapshot from background threads.
    pub fn start(
        addr: SocketAddr,
        board: Arc<Board>,
        web: Option<Arc<WebConfig>>,
    ) -> io::Result<Server> {
        let listener = TcpListener::bind(addr)?;
        let addr = listener.local_addr()?;
        let site = Arc::new(Site { board, web });
        let stop = Arc::new(AtomicBool::new(false));
        let open = Arc::new(Open::default());
        let accept = {
            let (stop, open) = (Arc::clone(&stop), Arc::clone(&open));
            std::thread::Builder::new()
                .name("fslat-listen".into())
                .spawn(move || accept(&listener, &site, &open, &stop))?
        };
        Ok(Server {
            addr,
            stop,
            open,
            accept: Some(accept),
        })
    }
}

fn accept(listener: &TcpListener, site: &Arc<Site>, open: &Arc<Open>, stop: &AtomicBool) {
    // This thread and the connection threads it starts read what anyone on the network
    // sends: they hold no capability at all, whatever the rest of fslat holds.
    if let Err(e) = crate::sys::drop_thread_capabilities() {
        crate::stderr_line!(
            "fslat: warning: --listen: cannot drop the server's capabilities ({e}); not serving"
        );
        return;
    }
    for stream in listener.incoming() {
        if stop.load(Ordering::SeqCst) {
            return;
        }
        let Ok(stream) = stream else { continue };
        let accepted = Instant::now();
        let Some(id) = open.add(&stream) else {
            continue;
        };
        let (site, open2) = (Arc::clone(site), Arc::clone(open));
        let spawned = std::thread::Builder::new()
            .name("fslat-metrics".into())
            .stack_size(STACK)
            .spawn(move || {
                // A client that fails or stalls only ends its own connection.
                let _ = connection(stream, accepted, &site);
                open2.done(id);
            });
        if spawned.is_err() {
            open.done(id);
        }
    }
}

/// A TCP stream whose reads and writes fail once `until` has passed, however the
/// client spaces its bytes.
struct Timed {
    tcp: TcpStream,
    until: Instant,
}

impl Timed {
    fn left(&self) -> io::Result<Duration> {
        let left = self.until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the connection's deadline passed",
            ));
        }
        Ok(left)
    }
}

impl Read for Timed {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.tcp.set_read_timeout(Some(self.left()?))?;
        self.tcp.read(buf)
    }
}

impl Write for Timed {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.tcp.set_write_timeout(Some(self.left()?))?;
        self.tcp.write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.tcp.flush()
    }
}

/// A connection, plain or TLS, over a `Timed` stream.
trait Conn: Read + Write {
    fn timed(&mut self) -> &mut Timed;
    /// Ends the sending side cleanly (TLS: close_notify first).
    fn finish(&mut self) -> io::Result<()>;
}

impl Conn for Timed {
    fn timed(&mut self) -> &mut Timed {
        self
    }
    fn finish(&mut self) -> io::Result<()> {
        self.tcp.shutdown(Shutdown::Write)
    }
}

impl Conn for rustls::StreamOwned<rustls::ServerConnection, Timed> {
    fn timed(&mut self) -> &mut Timed {
        &mut self.sock
    }
    fn finish(&mut self) -> io::Result<()> {
        self.conn.send_close_notify();
        while self.conn.wants_write() {
            self.conn.write_tls(&mut self.sock)?;
        }
        self.sock.tcp.shutdown(Shutdown::Write)
    }
}

fn connection(tcp: TcpStream, accepted: Instant, site: &Site) -> io::Result<()> {
    let mut timed = Timed {
        tcp,
        until: accepted + REQUEST_DEADLINE,
    };
    let Some(tls) = site.web.as_ref().and_then(|w| w.tls.as_ref()) else {
        return exchange(&mut timed, accepted, site);
    };
    // A TLS connection starts with a handshake record (22); a plain HTTP request to
    // the TLS port gets a plain answer saying so, as Go's servers give, not silence.
    let mut first = [0u8; 1];
    timed.tcp.set_read_timeout(Some(timed.left()?))?;
    if timed.tcp.peek(&mut first)? == 1 && first[0] != 22 {
        if first[0].is_ascii_alphabetic() {
            let _ = timed.write_all(
                b"HTTP/1.0 400 Bad Request\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\nClient sent an HTTP request to an HTTPS server.\n",
            );
        }
        return timed.finish();
    }
    let conn = rustls::ServerConnection::new(Arc::clone(tls)).map_err(io::Error::other)?;
    let mut stream = rustls::StreamOwned::new(conn, timed);
    exchange(&mut stream, accepted, site)
}

fn exchange<C: Conn>(c: &mut C, accepted: Instant, site: &Site) -> io::Result<()> {
    let mut head = Vec::with_capacity(512);
    let mut buf = [0u8; 1024];
    let request = loop {
        match read_head(&head) {
            Head::Incomplete if head.len() > MAX_REQUEST => {
                break Err(("431 Request Header Fields Too Large", "request too large\n"));
            }
            Head::Incomplete => {}
            Head::Bad => break Err(("400 Bad Request", "not an HTTP/1 request\n")),
            Head::Request {
                method,
                path,
                authorization,
            } => break Ok((method, path, authorization)),
        }
        let n = c.read(&mut buf)?;
        if n == 0 {
            return Ok(());
        }
        head.extend_from_slice(&buf[..n]);
    };
    c.timed().until = accepted + CONNECTION_DEADLINE;
    let (status, content_type, body) = match request {
        Err((status, why)) => (status, "text/plain", why.as_bytes().to_vec()),
        Ok((_, _, authorization))
            if !site
                .web
                .as_ref()
                .is_none_or(|w| w.authorized(authorization)) =>
        {
            ("401 Unauthorized", "text/plain", b"Unauthorized\n".to_vec())
        }
        Ok((method @ ("GET" | "HEAD"), "/metrics", _)) => {
            let body = prometheus::encode(&site.board.latest());
            let body = if method == "HEAD" {
                Vec::new()
            } else {
                body.into_bytes()
            };
            ("200 OK", prometheus::CONTENT_TYPE, body)
        }
        Ok((_, "/metrics", _)) => (
            "405 Method Not Allowed",
            "text/plain",
            b"use GET\n".to_vec(),
        ),
        Ok(_) => (
            "404 Not Found",
            "text/plain",
            b"fslat serves /metrics only\n".to_vec(),
        ),
    };
    respond(c, status, content_type, &body)?;
    // Closing with unread bytes would reset the connection, and the client could lose
    // the answer: say we are done, then take what the client still sends, briefly.
    c.finish()?;
    let timed = c.timed();
    timed.until = timed.until.min(Instant::now() + LINGER);
    let mut left = MAX_REQUEST;
    while left > 0 {
        match timed.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => left = left.saturating_sub(n),
        }
    }
    Ok(())
}

/// What the bytes received so far make of a request head.
#[derive(Debug, PartialEq, Eq)]
pub enum Head<'a> {
    /// A request could still start this way: read on.
    Incomplete,
    /// No HTTP/1 request starts this way: answer 400 now, as Go's net/http does.
    Bad,
    /// The whole head, up to its empty line; the target's path without its query, and
    /// the value of its (first) `Authorization` header.
    Request {
        method: &'a str,
        path: &'a str,
        authorization: Option<&'a [u8]>,
    },
}

/// Reads `METHOD TARGET HTTP/1.x`, header lines, and an empty line; lines end with CRLF
/// or a bare LF (as Go's net/http and most servers accept). Judged on every read, so
/// bytes that cannot begin a request are refused at once, not after the deadline.
pub fn read_head(bytes: &[u8]) -> Head<'_> {
    let line_end = bytes.iter().position(|&b| b == b'\n');
    let line = &bytes[..line_end.unwrap_or(bytes.len())];
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let mut parts = line.splitn(3, |&b| b == b' ');
    let method = parts.next().unwrap_or_default();
    let target = parts.next();
    let version = parts.next();
    let token = |b: &u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(b);
    let visible = |b: &u8| b.is_ascii_graphic();
    let complete = line_end.is_some();
    let prefix_ok = method.iter().all(token)
        && (!method.is_empty() || !complete && target.is_none())
        && target.is_none_or(|t| t.iter().all(visible))
        && version.is_none_or(|v| b"HTTP/1.0".starts_with(v) || b"HTTP/1.1".starts_with(v));
    if !prefix_ok {
        return Head::Bad;
    }
    let Some(line_end) = line_end else {
        return Head::Incomplete;
    };
    let (Some(target), Some(version)) = (target, version) else {
        return Head::Bad;
    };
    if !matches!(version, b"HTTP/1.0" | b"HTTP/1.1") {
        return Head::Bad;
    }
    let path = match target.strip_prefix(b"http://") {
        // The absolute form a proxy would send: the path after the authority.
        Some(rest) => rest
            .iter()
            .position(|&b| b == b'/')
            .map_or(&b"/"[..], |i| &rest[i..]),
        None if target.starts_with(b"/") => target,
        None => return Head::Bad,
    };
    let path = path.split(|&b| b == b'?').next().unwrap_or_default();
    // The head ends at its first empty line.
    let mut rest = &bytes[line_end + 1..];
    let mut authorization = None;
    loop {
        let Some(end) = rest.iter().position(|&b| b == b'\n') else {
            return Head::Incomplete;
        };
        let field = &rest[..end];
        let field = field.strip_suffix(b"\r").unwrap_or(field);
        if field.is_empty() {
            break;
        }
        if let Some((name, value)) = field.split_at_checked(14)
            && name.eq_ignore_ascii_case(b"authorization:")
            && authorization.is_none()
        {
            authorization = Some(value.trim_ascii());
        }
        rest = &rest[end + 1..];
    }
    // Token and visible bytes are ASCII.
    match (std::str::from_utf8(method), std::str::from_utf8(path)) {
        (Ok(method), Ok(path)) => Head::Request {
            method,
            path,
            authorization,
        },
        _ => Head::Bad,
    }
}

fn respond(c: &mut impl Write, status: &str, content_type: &str, body: &[u8]) -> io::Result<()> {
    let challenge = if status.starts_with("401") {
        "WWW-Authenticate: Basic\r\n"
    } else {
        ""
    };
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n{challenge}Connection: close\r\n\r\n",
        body.len()
    );
    // One write: with TLS, one record for a small answer.
    let mut all = head.into_bytes();
    all.extend_from_slice(body);
    c.write_all(&all)?;
    c.flush()
}
