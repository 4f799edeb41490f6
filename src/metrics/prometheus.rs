//! `--listen`: the Prometheus text exposition format at `/metrics`, from a small blocking
//! HTTP server. The encoding is prometheus-client's (name and label-value escaping,
//! `_total` on counters, cumulative `le` buckets); the server is a listener thread and a
//! fixed number of workers with socket timeouts, so a client that connects and never
//! reads holds one worker for a few seconds and never reaches the tracing loop.

use super::{AggSeries, Board, PointValue, Snapshot, histograms, row_labels, scale};
use crate::aggregate::MetricKind;
use crate::output::Summary;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::time::Duration;

pub use prometheus_client::encoding::prometheus_text::CONTENT_TYPE;

/// Connections served at once; more wait in a short queue, beyond it they are closed.
const WORKERS: usize = 4;
const QUEUE: usize = 16;
/// How long one client may take to send its request (a scraper sends it at once).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(2);
/// How long a client may stall while taking the answer.
const WRITE_TIMEOUT: Duration = Duration::from_secs(5);
/// A request head longer than this is refused.
const MAX_REQUEST: usize = 8192;
/// How long a connection stays open after the answer for what the client still sends.
const LINGER: Duration = Duration::from_millis(500);

/// The Prometheus text for a snapshot.
pub fn encode(snapshot: &Snapshot) -> String {
    #[derive(Debug)]
    struct Figures(Arc<Snapshot>);
    impl Collector for Figures {
        fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
            encode_snapshot(&self.0, &mut encoder)
        }
    }
    let mut registry = Registry::default();
    registry.register_collector(Box::new(Figures(Arc::new(snapshot.clone()))));
    let mut text = String::new();
    // Writing into a String cannot fail.
    let _ = prometheus_client::encoding::prometheus_text::encode(&mut text, &registry);
    text
}

type Labels = Vec<(String, String)>;

/// The per-session counters: (name without `_total`, help, the figure).
/// A session's figure, `None` where the session has none (agg_lost without aggregations).
pub(super) type Figure = fn(&Summary) -> Option<u64>;

pub(super) const SESSION_COUNTERS: [(&str, &str, Figure); 9] = [
    (
        "fslat_calls",
        "Calls that passed the entry filter and returned.",
        |s| Some(s.calls),
    ),
    (
        "fslat_matched",
        "Calls that passed the whole predicate.",
        |s| Some(s.matched),
    ),
    (
        "fslat_errors",
        "Calls that returned a negative value.",
        |s| Some(s.errors),
    ),
    (
        "fslat_dropped",
        "Events lost because the ring buffer was full.",
        |s| Some(s.dropped),
    ),
    ("fslat_events", "Events decoded and written.", |s| {
        Some(s.events)
    }),
    (
        "fslat_unpaired",
        "fentry mode: entries not recorded because the per-thread map was full.",
        |s| Some(s.unpaired),
    ),
    (
        "fslat_agg_lost",
        "Aggregation updates lost because an aggregation map was full.",
        |s| s.agg_lost,
    ),
    (
        "fslat_stack_lost",
        "Stacks not recorded (the stack map was full or the walk failed).",
        |s| s.stack_lost,
    ),
    (
        "fslat_missed",
        "Calls the kernel skipped because the session's program was already running on that CPU (any process; Linux 5.12+).",
        |s| s.missed,
    ),
];

fn encode_snapshot(s: &Snapshot, encoder: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
    for (name, help, figure) in SESSION_COUNTERS {
        let rows: Vec<(Labels, u64)> = s
            .sessions
            .iter()
            .filter_map(|x| Some((vec![("session".to_string(), x.label.clone())], figure(x)?)))
            .collect();
        if rows.is_empty() {
            continue;
        }
        let mut family = encoder.encode_descriptor(name, help, None, MetricType::Counter)?;
        for (labels, v) in &rows {
            family
                .encode_family(labels)?
                .encode_counter::<NoLabelSet, _, u64>(v, None)?;
        }
    }
    for a in &s.aggregations {
        encode_aggregation(a, encoder)?;
    }
    Ok(())
}

fn encode_aggregation(
    a: &AggSeries,
    encoder: &mut DescriptorEncoder,
) -> Result<(), std::fmt::Error> {
    let name = format!("fslat_{}", a.name.strip_suffix("_total").unwrap_or(&a.name));
    let unit = if a.duration { " (seconds)" } else { "" };
    let help = format!("{}: {}{unit}.", a.session, a.title);
    let kind = match a.func.metric() {
        MetricKind::Counter => MetricType::Counter,
        MetricKind::Gauge => MetricType::Gauge,
        MetricKind::Histogram => MetricType::Histogram,
    };
    let mut family = encoder.encode_descriptor(&name, &help, None, kind)?;
    let histograms = histograms(a);
    for (row, histogram) in a.rows.iter().zip(&histograms) {
        let labels = row_labels(a, row);
        let mut metric = family.encode_family(&labels)?;
        let n = match (histogram, &row.value) {
            (Some(h), _) => {
                metric.encode_histogram::<NoLabelSet>(h.sum, h.count, &h.buckets, None)?;
                continue;
            }
            (None, PointValue::Number(n)) => *n,
            (None, _) => continue,
        };
        match kind {
            MetricType::Counter if a.duration => {
                metric.encode_counter::<NoLabelSet, _, f64>(&scale(n as f64, true), None)?
            }
            MetricType::Counter => {
                metric.encode_counter::<NoLabelSet, _, u64>(&n.max(0).cast_unsigned(), None)?
            }
            _ if a.duration => metric.encode_gauge(&scale(n as f64, true))?,
            _ => metric.encode_gauge(&n)?,
        }
    }
    Ok(())
}

/// A `/metrics` server, listening until it is dropped (the end of a run: the REPL's next
/// `:run` can bind the same port again).
pub struct Server {
    pub addr: SocketAddr,
    stop: Arc<AtomicBool>,
    accept: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop; it sees the flag and drops the listener.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        if let Some(t) = self.accept.take() {
            let _ = t.join();
        }
    }
}

impl Server {
    /// Binds `addr` now (so a port in use is an error before tracing) and serves
    /// `board`'s latest snapshot from background threads.
    pub fn start(addr: SocketAddr, board: Arc<Board>) -> std::io::Result<Server> {
        let listener = TcpListener::bind(addr)?;
        let addr = listener.local_addr()?;
        let (queue, jobs) = sync_channel::<TcpStream>(QUEUE);
        let jobs = Arc::new(std::sync::Mutex::new(jobs));
        for _ in 0..WORKERS {
            let jobs = Arc::clone(&jobs);
            let board = Arc::clone(&board);
            std::thread::Builder::new()
                .name("fslat-metrics".into())
                .spawn(move || serve(&jobs, &board))?;
        }
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = Arc::clone(&stop);
        let accept = std::thread::Builder::new()
            .name("fslat-listen".into())
            .spawn(move || accept(&listener, &queue, &stopped))?;
        Ok(Server {
            addr,
            stop,
            accept: Some(accept),
        })
    }
}

fn accept(listener: &TcpListener, queue: &SyncSender<TcpStream>, stop: &AtomicBool) {
    for stream in listener.incoming() {
        if stop.load(Ordering::SeqCst) {
            return;
        }
        let Ok(stream) = stream else { continue };
        match queue.try_send(stream) {
            Ok(()) => {}
            // Every worker busy and the queue full: closing is the answer.
            Err(TrySendError::Full(s)) => drop(s),
            Err(TrySendError::Disconnected(_)) => return,
        }
    }
}

fn serve(jobs: &std::sync::Mutex<Receiver<TcpStream>>, board: &Board) {
    loop {
        let next = match jobs.lock() {
            Ok(rx) => rx.recv(),
            Err(_) => return,
        };
        let Ok(stream) = next else { return };
        // A client that fails or stalls only ends its own connection.
        let _ = answer(stream, board);
    }
}

fn answer(mut stream: TcpStream, board: &Board) -> std::io::Result<()> {
    stream.set_read_timeout(Some(REQUEST_TIMEOUT))?;
    stream.set_write_timeout(Some(WRITE_TIMEOUT))?;
    let mut head = Vec::with_capacity(512);
    let mut buf = [0u8; 1024];
    let request = loop {
        match read_head(&head) {
            Head::Incomplete if head.len() > MAX_REQUEST => {
                break Err(("431 Request Header Fields Too Large", "request too large\n"));
            }
            Head::Incomplete => {}
            Head::Bad => break Err(("400 Bad Request", "not an HTTP/1 request\n")),
            Head::Request { method, path } => break Ok((method, path)),
        }
        let n = stream.read(&mut buf)?;
        if n == 0 {
            return Ok(());
        }
        head.extend_from_slice(&buf[..n]);
    };
    let (status, content_type, body) = match request {
        Err((status, why)) => (status, "text/plain", why.as_bytes().to_vec()),
        Ok((method @ ("GET" | "HEAD"), "/metrics")) => {
            let body = encode(&board.latest());
            let body = if method == "HEAD" {
                Vec::new()
            } else {
                body.into_bytes()
            };
            ("200 OK", CONTENT_TYPE, body)
        }
        Ok((_, "/metrics")) => (
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
    respond(&mut stream, status, content_type, &body)?;
    // Closing with unread bytes would reset the connection, and the client could lose
    // the answer: say we are done, then take what the client still sends, briefly.
    stream.shutdown(std::net::Shutdown::Write)?;
    stream.set_read_timeout(Some(LINGER))?;
    let mut left = MAX_REQUEST;
    while left > 0 {
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => left = left.saturating_sub(n),
        }
    }
    Ok(())
}

/// What the bytes received so far make of a request head.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Head<'a> {
    /// A request could still start this way: read on.
    Incomplete,
    /// No HTTP/1 request starts this way: answer 400 now, as Go's net/http does.
    Bad,
    /// The whole head, up to its empty line; the target's path without its query.
    Request { method: &'a str, path: &'a str },
}

/// Reads `METHOD TARGET HTTP/1.x`, header lines, and an empty line; lines end with CRLF
/// or a bare LF (as Go's net/http and most servers accept). Judged on every read, so
/// bytes that cannot begin a request are refused at once, not after the timeout.
pub(super) fn read_head(bytes: &[u8]) -> Head<'_> {
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
    loop {
        let Some(end) = rest.iter().position(|&b| b == b'\n') else {
            return Head::Incomplete;
        };
        if rest[..end].is_empty() || rest[..end] == *b"\r" {
            break;
        }
        rest = &rest[end + 1..];
    }
    // Token and visible bytes are ASCII.
    match (std::str::from_utf8(method), std::str::from_utf8(path)) {
        (Ok(method), Ok(path)) => Head::Request { method, path },
        _ => Head::Bad,
    }
}

fn respond(
    stream: &mut TcpStream,
    status: &str,
    content_type: &str,
    body: &[u8],
) -> std::io::Result<()> {
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes())?;
    stream.write_all(body)?;
    stream.flush()
}
