//! `--otlp URL`: the same metrics pushed with OTLP over HTTP (protobuf), every interval
//! and once at the end, from a thread of its own.
//!
//! The messages are opentelemetry-proto's generated types, encoded with prost, and sent
//! with one blocking HTTP/1.1 POST over a `TcpStream` with timeouts. The OpenTelemetry
//! SDK cannot carry these figures: its API has no asynchronous histogram and its
//! `ResourceMetrics` cannot be built outside the SDK, so the kernel's ready-made
//! histograms could only be replayed value by value; and its HTTP exporter wants an async
//! client. A receiver that is down or slow costs a warning per failed push, never an
//! event: the tracing loop only publishes snapshots.

use super::{AggSeries, Board, PointValue, Snapshot, histograms, row_labels, scale};
use crate::aggregate::MetricKind;
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, InstrumentationScope, KeyValue, any_value};
use opentelemetry_proto::tonic::metrics::v1::{
    AggregationTemporality, Gauge, Histogram, HistogramDataPoint, Metric, NumberDataPoint,
    ResourceMetrics, ScopeMetrics, Sum, metric::Data, number_data_point,
};
use opentelemetry_proto::tonic::resource::v1::Resource;
use prost::Message;
use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::sync::mpsc::{Sender, channel};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime};

const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
const IO_TIMEOUT: Duration = Duration::from_secs(5);

/// Where to push: `http://HOST[:PORT][/PATH]`; no path means `/v1/metrics`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OtlpTarget {
    pub url: String,
    /// `host:port`, as given (resolved at each push).
    pub authority: String,
    pub path: String,
}

impl OtlpTarget {
    pub fn parse(url: &str) -> Result<OtlpTarget, String> {
        let rest = match url.split_once("://") {
            Some(("http", rest)) => rest,
            Some(("https", _)) => {
                return Err(format!(
                    "`{url}`: https is not supported; push to a local OpenTelemetry Collector over http:// and let it forward with TLS"
                ));
            }
            _ => {
                return Err(format!(
                    "`{url}` is not an http:// URL (e.g. http://127.0.0.1:4318)"
                ));
            }
        };
        let (authority, path) = match rest.find('/') {
            Some(i) => rest.split_at(i),
            None => (rest, ""),
        };
        if authority.is_empty() || authority.contains('@') {
            return Err(format!(
                "`{url}` names no host (e.g. http://127.0.0.1:4318)"
            ));
        }
        let (host, port) = match authority.rsplit_once(':') {
            Some((h, p)) if !h.ends_with(']') || h.starts_with('[') => {
                if h.contains(':') && !h.starts_with('[') {
                    return Err(format!(
                        "`{url}`: write an IPv6 address in brackets ([::1]:4318)"
                    ));
                }
                (h, p)
            }
            _ => (authority, "80"),
        };
        if host.is_empty() || host.chars().any(|c| c.is_whitespace()) {
            return Err(format!(
                "`{url}` names no host (e.g. http://127.0.0.1:4318)"
            ));
        }
        match port.parse::<u16>() {
            Ok(p) if p > 0 => {}
            _ => return Err(format!("`{url}`: `{port}` is not a port (1 .. 65535)")),
        }
        let path = match path {
            "" | "/" => "/v1/metrics".to_string(),
            p => p.to_string(),
        };
        Ok(OtlpTarget {
            url: url.to_string(),
            authority: format!("{host}:{port}"),
            path,
        })
    }
}

/// The push thread; `finish` makes the last push and waits for it.
pub struct Pusher {
    stop: Sender<()>,
    thread: JoinHandle<()>,
}

impl Pusher {
    pub fn start(
        target: OtlpTarget,
        every: Duration,
        board: Arc<Board>,
    ) -> std::io::Result<Pusher> {
        let (stop, stopped) = channel::<()>();
        let thread = std::thread::Builder::new()
            .name("fslat-otlp".into())
            .spawn(move || {
                loop {
                    let last = !matches!(
                        stopped.recv_timeout(every),
                        Err(std::sync::mpsc::RecvTimeoutError::Timeout)
                    );
                    if let Err(e) = push(&target, &board.latest(), IO_TIMEOUT) {
                        crate::stderr_line!("{}", warning(&target, &e));
                    }
                    if last {
                        return;
                    }
                }
            })?;
        Ok(Pusher { stop, thread })
    }

    /// Pushes the board's latest snapshot (the run's final figures) and ends the thread.
    pub fn finish(self) {
        let _ = self.stop.send(());
        let _ = self.thread.join();
    }
}

/// Why a push failed.
#[derive(Debug)]
pub(super) enum PushError {
    /// The receiver took longer than the timeout to accept, take or answer the push.
    TimedOut {
        after: Duration,
        doing: &'static str,
    },
    Failed(String),
}

impl std::fmt::Display for PushError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PushError::TimedOut { after, doing } => write!(f, "timed out after {after:?} {doing}"),
            PushError::Failed(why) => write!(f, "failed: {why}"),
        }
    }
}

/// The line said on standard error for a failed push.
pub(super) fn warning(target: &OtlpTarget, e: &PushError) -> String {
    format!("fslat: warning: --otlp: pushing to {} {e}", target.url)
}

/// An I/O error in words: a timeout says how long it waited, not `EAGAIN`'s
/// "Resource temporarily unavailable".
fn io_error(after: Duration, doing: &'static str) -> impl Fn(std::io::Error) -> PushError {
    move |e| match e.kind() {
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => {
            PushError::TimedOut { after, doing }
        }
        _ => PushError::Failed(e.to_string()),
    }
}

/// One push of `snapshot`, each step (connecting, sending, the answer) waiting at most
/// `wait`.
pub(super) fn push(
    target: &OtlpTarget,
    snapshot: &Snapshot,
    wait: Duration,
) -> Result<(), PushError> {
    let body = request(snapshot).encode_to_vec();
    let addr = target
        .authority
        .to_socket_addrs()
        .map_err(|e| PushError::Failed(format!("cannot resolve {}: {e}", target.authority)))?
        .next()
        .ok_or_else(|| PushError::Failed(format!("{} resolves to no address", target.authority)))?;
    let mut stream = TcpStream::connect_timeout(&addr, wait.min(CONNECT_TIMEOUT))
        .map_err(io_error(wait.min(CONNECT_TIMEOUT), "connecting"))?;
    let failed = |e: std::io::Error| PushError::Failed(e.to_string());
    stream.set_read_timeout(Some(wait)).map_err(failed)?;
    stream.set_write_timeout(Some(wait)).map_err(failed)?;
    let head = format!(
        "POST {} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/x-protobuf\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        target.path,
        target.authority,
        body.len()
    );
    stream
        .write_all(head.as_bytes())
        .and_then(|()| stream.write_all(&body))
        .map_err(io_error(wait, "sending"))?;
    let mut answer = Vec::new();
    // Only the status line matters; a receiver that keeps the connection open is cut
    // off by the read timeout or by having sent enough.
    let mut buf = [0u8; 4096];
    while !answer.windows(2).any(|w| w == b"\r\n") && answer.len() < 64 * 1024 {
        match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => answer.extend_from_slice(&buf[..n]),
            Err(e) => return Err(io_error(wait, "waiting for an answer")(e)),
        }
    }
    let status_line =
        String::from_utf8_lossy(answer.split(|&b| b == b'\r').next().unwrap_or(&[])).into_owned();
    match status_line.split(' ').nth(1) {
        Some(code) if code.starts_with('2') => Ok(()),
        Some(_) => Err(PushError::Failed(format!(
            "the receiver answered `{status_line}`"
        ))),
        None => Err(PushError::Failed("the receiver sent no HTTP answer".into())),
    }
}

fn nanos(t: SystemTime) -> u64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

fn text(key: &str, value: &str) -> KeyValue {
    KeyValue {
        key: key.to_string(),
        value: Some(AnyValue {
            value: Some(any_value::Value::StringValue(value.to_string())),
        }),
        ..Default::default()
    }
}

/// The snapshot as one OTLP export request, metric names as `--listen` shows them
/// (Prometheus's OTLP receiver adds `_total` to monotonic sums, as the text format does).
pub fn request(s: &Snapshot) -> ExportMetricsServiceRequest {
    let (start, time) = (nanos(s.start), nanos(s.time));
    let point = |attributes: Vec<KeyValue>, value: number_data_point::Value| NumberDataPoint {
        attributes,
        start_time_unix_nano: start,
        time_unix_nano: time,
        value: Some(value),
        ..Default::default()
    };
    let cumulative = AggregationTemporality::Cumulative as i32;
    let mut metrics = Vec::new();
    for (name, help, figure) in super::prometheus::SESSION_COUNTERS {
        let data_points: Vec<NumberDataPoint> = s
            .sessions
            .iter()
            .filter_map(|x| {
                let v = figure(x)?;
                Some(point(
                    vec![text("session", &x.label)],
                    number_data_point::Value::AsInt(v as i64),
                ))
            })
            .collect();
        if data_points.is_empty() {
            continue;
        }
        metrics.push(Metric {
            name: name.to_string(),
            description: help.to_string(),
            data: Some(Data::Sum(Sum {
                data_points,
                aggregation_temporality: cumulative,
                is_monotonic: true,
            })),
            ..Default::default()
        });
    }
    for a in &s.aggregations {
        metrics.push(aggregation(a, start, time, &point));
    }
    let resource = Resource {
        attributes: vec![text("service.name", "fslat")],
        ..Default::default()
    };
    ExportMetricsServiceRequest {
        resource_metrics: vec![ResourceMetrics {
            resource: Some(resource),
            scope_metrics: vec![ScopeMetrics {
                scope: Some(InstrumentationScope {
                    name: "fslat".into(),
                    version: env!("CARGO_PKG_VERSION").into(),
                    ..Default::default()
                }),
                metrics,
                ..Default::default()
            }],
            ..Default::default()
        }],
    }
}

fn aggregation(
    a: &AggSeries,
    start: u64,
    time: u64,
    point: &dyn Fn(Vec<KeyValue>, number_data_point::Value) -> NumberDataPoint,
) -> Metric {
    let attributes = |row| {
        row_labels(a, row)
            .iter()
            .map(|(k, v)| text(k, v))
            .collect::<Vec<_>>()
    };
    let number = |n: i64| {
        if a.duration {
            number_data_point::Value::AsDouble(scale(n as f64, true))
        } else {
            number_data_point::Value::AsInt(n)
        }
    };
    let numbers = || {
        a.rows
            .iter()
            .filter_map(|r| match r.value {
                PointValue::Number(n) => Some(point(attributes(r), number(n))),
                PointValue::Hist { .. } | PointValue::Pct { .. } | PointValue::Summary { .. } => {
                    None
                }
            })
            .collect::<Vec<_>>()
    };
    let cumulative = AggregationTemporality::Cumulative as i32;
    let data = match a.func.metric() {
        MetricKind::Counter => Data::Sum(Sum {
            data_points: numbers(),
            aggregation_temporality: cumulative,
            is_monotonic: true,
        }),
        MetricKind::Gauge => Data::Gauge(Gauge {
            data_points: numbers(),
        }),
        MetricKind::Histogram => Data::Histogram(Histogram {
            data_points: a
                .rows
                .iter()
                .zip(histograms(a))
                .filter_map(|(r, h)| {
                    let h = h?;
                    let mut bucket_counts: Vec<u64> = h.buckets.iter().map(|b| b.1).collect();
                    // The +Inf bucket: what no bound holds (an lhist's values above its
                    // range; nothing for the others, whose every bucket has a bound).
                    bucket_counts.push(h.count - bucket_counts.iter().sum::<u64>());
                    Some(HistogramDataPoint {
                        attributes: attributes(r),
                        start_time_unix_nano: start,
                        time_unix_nano: time,
                        count: h.count,
                        sum: Some(h.sum),
                        bucket_counts,
                        explicit_bounds: h.buckets.iter().map(|b| b.0).collect(),
                        ..Default::default()
                    })
                })
                .collect(),
            aggregation_temporality: cumulative,
        }),
    };
    Metric {
        name: format!("fslat_{}", a.name.strip_suffix("_total").unwrap_or(&a.name)),
        description: format!("{}: {}", a.session, a.title),
        data: Some(data),
        ..Default::default()
    }
}
