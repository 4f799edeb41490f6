//! `--otlp URL`: the same metrics pushed with OTLP over HTTP (protobuf), every interval
//! and once at the end, from a thread of its own.
//!
//! The messages are opentelemetry-proto's generated types, encoded with prost, and sent
//! with ureq (blocking, rustls with ring; http and https). The OpenTelemetry SDK cannot
//! carry these figures: its API has no asynchronous histogram and its `ResourceMetrics`
//! cannot be built outside the SDK, so the kernel's ready-made histograms could only be
//! replayed value by value; and its HTTP exporter wants an async client. A receiver that
//! is down or slow costs retries within the interval and a warning per failed push,
//! never an event: the tracing loop only publishes snapshots.
//!
//! Settings follow the OpenTelemetry exporter specification where it has them: the
//! endpoint, headers and CA certificate from `OTEL_EXPORTER_OTLP_*` variables, a
//! metrics-specific variable over the generic one, and fslat's options over both.

use super::{AggSeries, Board, PointValue, Snapshot, histograms, row_labels, scale};
use crate::aggregate::MetricKind;
use crate::check::counters;
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, InstrumentationScope, KeyValue, any_value};
use opentelemetry_proto::tonic::metrics::v1::{
    AggregationTemporality, Gauge, Histogram, HistogramDataPoint, Metric, NumberDataPoint,
    ResourceMetrics, ScopeMetrics, Sum, metric::Data, number_data_point,
};
use opentelemetry_proto::tonic::resource::v1::Resource;
use prost::Message;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, channel};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

/// One attempt waits at most this long, connecting included.
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(10);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// The final push, at the end of the run, retries for at most this long.
const FINAL_BUDGET: Duration = Duration::from_secs(5);
/// The first wait before a retry; it doubles up to `MAX_BACKOFF`.
const FIRST_BACKOFF: Duration = Duration::from_millis(500);
const MAX_BACKOFF: Duration = Duration::from_secs(8);

/// Where to push: `http[s]://HOST[:PORT][/PATH]`, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OtlpTarget {
    /// The URL fslat posts to.
    pub url: String,
    pub https: bool,
    /// `host:port`, with the scheme's port when none is given.
    pub authority: String,
    pub path: String,
}

impl OtlpTarget {
    /// `--otlp URL`: a URL without a path posts to `/v1/metrics`, the OTLP default.
    pub fn parse(url: &str) -> Result<OtlpTarget, String> {
        OtlpTarget::checked(url, "/v1/metrics")
    }

    /// `default_path` when the URL has none.
    fn checked(url: &str, default_path: &str) -> Result<OtlpTarget, String> {
        let (https, rest) = match url.split_once("://") {
            Some(("http", rest)) => (false, rest),
            Some(("https", rest)) => (true, rest),
            _ => {
                return Err(format!(
                    "`{url}` is not an http:// or https:// URL (e.g. http://127.0.0.1:4318)"
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
        let default_port = if https { "443" } else { "80" };
        let (host, port) = match authority.rsplit_once(':') {
            Some((h, p)) if !h.ends_with(']') || h.starts_with('[') => {
                if h.contains(':') && !h.starts_with('[') {
                    return Err(format!(
                        "`{url}`: write an IPv6 address in brackets ([::1]:4318)"
                    ));
                }
                (h, p)
            }
            _ => (authority, default_port),
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
        if path.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(format!(
                "`{url}`: the path has spaces or control characters"
            ));
        }
        let path = match path {
            "" | "/" => default_path.to_string(),
            p => p.to_string(),
        };
        let scheme = if https { "https" } else { "http" };
        Ok(OtlpTarget {
            url: format!("{scheme}://{host}:{port}{path}"),
            https,
            authority: format!("{host}:{port}"),
            path,
        })
    }
}

/// What the command line says about OTLP; `settings` adds the environment.
#[derive(Debug, Clone, Default)]
pub struct OtlpOptions {
    pub url: Option<OtlpTarget>,
    pub headers: Vec<(String, String)>,
    pub ca: Option<PathBuf>,
}

/// `--otlp-header K=V`.
pub fn parse_header(s: &str) -> Result<(String, String), String> {
    let Some((k, v)) = s.split_once('=') else {
        return Err(format!("`{s}` is not NAME=VALUE"));
    };
    let k = k.trim();
    let token = |c: char| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c);
    if k.is_empty() || !k.chars().all(token) {
        return Err(format!("`{k}` is not a header name"));
    }
    if v.chars().any(|c| c.is_control()) {
        return Err(format!("the value of {k} has control characters"));
    }
    Ok((k.to_string(), v.trim().to_string()))
}

/// The resolved push settings: where, which headers, which roots.
pub struct Settings {
    pub target: OtlpTarget,
    /// What named the endpoint: `--otlp` or an environment variable.
    pub source: &'static str,
    headers: Vec<(String, String)>,
    agent: ureq::Agent,
}

const ENDPOINT: &str = "OTEL_EXPORTER_OTLP_ENDPOINT";
const METRICS_ENDPOINT: &str = "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT";
const HEADERS: &str = "OTEL_EXPORTER_OTLP_HEADERS";
const METRICS_HEADERS: &str = "OTEL_EXPORTER_OTLP_METRICS_HEADERS";
const CERTIFICATE: &str = "OTEL_EXPORTER_OTLP_CERTIFICATE";
const METRICS_CERTIFICATE: &str = "OTEL_EXPORTER_OTLP_METRICS_CERTIFICATE";

/// The settings from `opts` and the environment (`env`: a variable's value, an empty
/// one counting as unset, as the specification says), `None` when neither names an
/// endpoint. The endpoint is `--otlp`'s, else `OTEL_EXPORTER_OTLP_METRICS_ENDPOINT`
/// as it is, else `OTEL_EXPORTER_OTLP_ENDPOINT` with `v1/metrics` appended to its path.
/// Headers are `OTEL_EXPORTER_OTLP_METRICS_HEADERS`, else `OTEL_EXPORTER_OTLP_HEADERS`
/// (`k=v,k2=v2`, values percent-decoded), then each `--otlp-header` (replacing a header
/// of the same name). The CA is `--otlp-ca`, else the `..._CERTIFICATE` variables, else
/// the system's roots.
pub fn settings(
    opts: &OtlpOptions,
    env: impl Fn(&str) -> Option<String>,
) -> Result<Option<Settings>, String> {
    let env = |name: &str| env(name).filter(|v| !v.trim().is_empty());
    let (target, source) = if let Some(t) = &opts.url {
        (t.clone(), "--otlp")
    } else if let Some(url) = env(METRICS_ENDPOINT) {
        // Used as it is: no path means the root path.
        let t =
            OtlpTarget::checked(url.trim(), "/").map_err(|e| format!("{METRICS_ENDPOINT}: {e}"))?;
        (t, METRICS_ENDPOINT)
    } else if let Some(url) = env(ENDPOINT) {
        OtlpTarget::checked(url.trim(), "/").map_err(|e| format!("{ENDPOINT}: {e}"))?;
        // The base URL: the signal's path goes after its own.
        let full = format!("{}/v1/metrics", url.trim().trim_end_matches('/'));
        let t =
            OtlpTarget::checked(&full, "/v1/metrics").map_err(|e| format!("{ENDPOINT}: {e}"))?;
        (t, ENDPOINT)
    } else {
        if !opts.headers.is_empty() || opts.ca.is_some() {
            return Err(
                "--otlp-header and --otlp-ca need --otlp URL (or OTEL_EXPORTER_OTLP_ENDPOINT)"
                    .to_string(),
            );
        }
        return Ok(None);
    };
    let mut headers = match (env(METRICS_HEADERS), env(HEADERS)) {
        (Some(h), _) => env_headers(&h).map_err(|e| format!("{METRICS_HEADERS}: {e}"))?,
        (None, Some(h)) => env_headers(&h).map_err(|e| format!("{HEADERS}: {e}"))?,
        (None, None) => Vec::new(),
    };
    for (k, v) in &opts.headers {
        headers.retain(|(old, _)| !old.eq_ignore_ascii_case(k));
        headers.push((k.clone(), v.clone()));
    }
    let ca = match (&opts.ca, env(METRICS_CERTIFICATE), env(CERTIFICATE)) {
        (Some(p), _, _) => Some(("--otlp-ca", p.clone())),
        (None, Some(p), _) => Some((METRICS_CERTIFICATE, PathBuf::from(p))),
        (None, None, Some(p)) => Some((CERTIFICATE, PathBuf::from(p))),
        (None, None, None) => None,
    };
    let roots = match ca {
        Some((from, path)) => read_ca(&path).map_err(|e| format!("{from}: {e}"))?,
        None if target.https => system_roots()?,
        None => Vec::new(),
    };
    Ok(Some(Settings {
        target,
        source,
        headers,
        agent: agent(roots),
    }))
}

/// `k=v,k2=v2` as the specification writes headers in the environment (W3C baggage
/// without properties; values percent-encoded).
fn env_headers(text: &str) -> Result<Vec<(String, String)>, String> {
    let mut out = Vec::new();
    for item in text.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        let (k, v) = parse_header(item)?;
        let v = percent_decode(&v).ok_or_else(|| format!("the value of {k} has a bad %-escape"))?;
        if v.chars().any(|c| c.is_control()) {
            return Err(format!("the value of {k} has control characters"));
        }
        out.retain(|(old, _): &(String, String)| !old.eq_ignore_ascii_case(&k));
        out.push((k, v));
    }
    Ok(out)
}

fn percent_decode(s: &str) -> Option<String> {
    let mut out = Vec::with_capacity(s.len());
    let mut bytes = s.bytes();
    while let Some(b) = bytes.next() {
        if b == b'%' {
            let hex = [bytes.next()?, bytes.next()?];
            out.push(u8::from_str_radix(std::str::from_utf8(&hex).ok()?, 16).ok()?);
        } else {
            out.push(b);
        }
    }
    String::from_utf8(out).ok()
}

fn read_ca(path: &Path) -> Result<Vec<ureq::tls::Certificate<'static>>, String> {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;
    let pem = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let certs = CertificateDer::pem_slice_iter(&pem)
        .map(|c| c.map(|c| ureq::tls::Certificate::from_der(&c).to_owned()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("{}: not a PEM certificate ({e})", path.display()))?;
    if certs.is_empty() {
        return Err(format!("{}: no PEM certificate in it", path.display()));
    }
    Ok(certs)
}

fn system_roots() -> Result<Vec<ureq::tls::Certificate<'static>>, String> {
    let found = rustls_native_certs::load_native_certs();
    if found.certs.is_empty() {
        let why = found
            .errors
            .first()
            .map(|e| format!(" ({e})"))
            .unwrap_or_default();
        return Err(format!(
            "--otlp: https, and this system has no CA certificates{why}: install ca-certificates, or give the receiver's CA with --otlp-ca FILE"
        ));
    }
    Ok(found
        .certs
        .iter()
        .map(|c| ureq::tls::Certificate::from_der(c).to_owned())
        .collect())
}

fn agent(roots: Vec<ureq::tls::Certificate<'static>>) -> ureq::Agent {
    use ureq::tls::{RootCerts, TlsConfig, TlsProvider};
    let tls = TlsConfig::builder()
        .provider(TlsProvider::Rustls)
        .root_certs(RootCerts::Specific(Arc::new(roots)))
        .unversioned_rustls_crypto_provider(super::crypto_provider())
        .build();
    ureq::Agent::config_builder()
        .tls_config(tls)
        .http_status_as_error(false)
        .timeout_connect(Some(CONNECT_TIMEOUT))
        .max_redirects(0)
        .user_agent(format!("fslat/{}", env!("CARGO_PKG_VERSION")))
        .build()
        .into()
}

/// The push thread; `finish` makes the last push and waits for it, `abandon` ends it
/// without one.
pub struct Pusher {
    /// `true`: push the final figures, then end; `false`: end now.
    stop: Sender<bool>,
    thread: JoinHandle<()>,
}

impl Pusher {
    pub fn start(
        settings: Settings,
        every: Duration,
        board: Arc<Board>,
    ) -> std::io::Result<Pusher> {
        let (stop, stopped) = channel::<bool>();
        let thread = std::thread::Builder::new()
            .name("fslat-otlp".into())
            .spawn(move || {
                // The push thread parses the receiver's answers: no capabilities.
                if let Err(e) = crate::sys::drop_thread_capabilities() {
                    crate::stderr_line!(
                        "fslat: warning: --otlp: cannot drop the push thread's capabilities ({e}); not pushing"
                    );
                    return;
                }
                let mut last = false;
                while !last {
                    last = match stopped.recv_timeout(every) {
                        Err(RecvTimeoutError::Timeout) => false,
                        Ok(false) => return,
                        Ok(true) | Err(RecvTimeoutError::Disconnected) => true,
                    };
                    let budget = if last { FINAL_BUDGET } else { every };
                    let (result, stop_seen) =
                        push(&settings, &board.latest(), budget, Some(&stopped));
                    if let Err(e) = result
                        && stop_seen != Some(false)
                    {
                        crate::stderr_line!("{}", warning(&settings.target, &e));
                    }
                    // A stop during the retries: the final figures are pushed next, unless
                    // the run failed.
                    match stop_seen {
                        Some(false) => return,
                        Some(true) => {
                            last = true;
                            let (result, _) =
                                push(&settings, &board.latest(), FINAL_BUDGET, None);
                            if let Err(e) = result {
                                crate::stderr_line!("{}", warning(&settings.target, &e));
                            }
                        }
                        None => {}
                    }
                }
            })?;
        Ok(Pusher { stop, thread })
    }

    /// Pushes the board's latest snapshot (the run's final figures) and ends the thread.
    pub fn finish(self) {
        let _ = self.stop.send(true);
        let _ = self.thread.join();
    }

    /// Ends the thread without another push, at once (a push under way stops at its
    /// next wait): a run that failed has no final figures to send.
    pub fn abandon(self) {
        let _ = self.stop.send(false);
        let _ = self.thread.join();
    }
}

/// Why a push failed, after its retries.
#[derive(Debug)]
pub(super) struct PushError {
    why: String,
    attempts: u32,
}

impl std::fmt::Display for PushError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.attempts {
            1 => write!(f, "failed: {}", self.why),
            n => write!(f, "failed {n} times, the last: {}", self.why),
        }
    }
}

/// The line said on standard error for a failed push.
pub(super) fn warning(target: &OtlpTarget, e: &PushError) -> String {
    format!("fslat: warning: --otlp: pushing to {} {e}", target.url)
}

/// What one attempt came to.
enum Attempt {
    Done,
    /// Worth another try (no connection, a timeout, 429, 502, 503, 504), after the
    /// receiver's `Retry-After` if it gave one.
    Retry(String, Option<Duration>),
    Fail(String),
}

fn attempt(settings: &Settings, body: &[u8], wait: Duration) -> Attempt {
    let mut request = settings
        .agent
        .post(&settings.target.url)
        .config()
        .timeout_global(Some(wait))
        .build()
        .header("Content-Type", "application/x-protobuf");
    for (k, v) in &settings.headers {
        request = request.header(k, v);
    }
    match request.send(body) {
        Ok(answer) => {
            let status = answer.status();
            let retry_after = answer
                .headers()
                .get("retry-after")
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.trim().parse::<u64>().ok())
                .map(Duration::from_secs);
            let why = format!("the receiver answered {status}");
            match status.as_u16() {
                200..=299 => Attempt::Done,
                429 | 502 | 503 | 504 => Attempt::Retry(why, retry_after),
                _ => Attempt::Fail(why),
            }
        }
        // A certificate the CA does not vouch for: retrying will not change it.
        Err(ureq::Error::Io(e))
            if e.get_ref()
                .is_some_and(|inner| inner.downcast_ref::<rustls::Error>().is_some()) =>
        {
            Attempt::Fail(format!("TLS: {e}"))
        }
        Err(
            e @ (ureq::Error::Timeout(_)
            | ureq::Error::ConnectionFailed
            | ureq::Error::HostNotFound
            | ureq::Error::Io(_)),
        ) => {
            let why = match e {
                ureq::Error::Timeout(_) => format!("no answer within {:.1} s", wait.as_secs_f64()),
                e => e.to_string(),
            };
            Attempt::Retry(why, None)
        }
        Err(e) => Attempt::Fail(e.to_string()),
    }
}

/// Pushes `snapshot`, retrying with exponential backoff (and some jitter) while
/// `budget` lasts; a message on `stop` ends the waiting. Returns the message when one
/// did (`Pusher::stop`'s meaning).
pub(super) fn push(
    settings: &Settings,
    snapshot: &Snapshot,
    budget: Duration,
    stop: Option<&Receiver<bool>>,
) -> (Result<(), PushError>, Option<bool>) {
    let body = request(snapshot).encode_to_vec();
    let end = Instant::now() + budget;
    let mut backoff = FIRST_BACKOFF;
    let mut attempts = 0;
    loop {
        attempts += 1;
        let left = end
            .saturating_duration_since(Instant::now())
            .max(Duration::from_millis(100));
        let (why, after) = match attempt(settings, &body, left.min(ATTEMPT_TIMEOUT)) {
            Attempt::Done => return (Ok(()), None),
            Attempt::Fail(why) => return (Err(PushError { why, attempts }), None),
            Attempt::Retry(why, after) => (why, after),
        };
        // Up to a quarter more, so that many agents do not retry in step.
        let jitter = backoff.mul_f64(
            f64::from(
                SystemTime::now()
                    .duration_since(SystemTime::UNIX_EPOCH)
                    .map_or(0, |d| d.subsec_nanos() % 1000),
            ) / 4000.0,
        );
        let wait = after.unwrap_or(backoff + jitter);
        if Instant::now() + wait >= end {
            return (Err(PushError { why, attempts }), None);
        }
        let stopped = match stop {
            Some(rx) => match rx.recv_timeout(wait) {
                Err(RecvTimeoutError::Timeout) => None,
                Ok(push_final) => Some(push_final),
                Err(RecvTimeoutError::Disconnected) => Some(true),
            },
            None => {
                std::thread::sleep(wait);
                None
            }
        };
        if stopped.is_some() {
            return (Err(PushError { why, attempts }), stopped);
        }
        backoff = (backoff * 2).min(MAX_BACKOFF);
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
    for c in counters::ALL.iter().filter(|c| c.is_metric()) {
        let data_points: Vec<NumberDataPoint> = s
            .sessions
            .iter()
            .filter_map(|x| {
                let v = x.get(c)?;
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
            name: format!("fslat_{}", c.name),
            description: c.about.to_string(),
            data: Some(Data::Sum(Sum {
                data_points,
                aggregation_temporality: cumulative,
                is_monotonic: true,
            })),
            ..Default::default()
        });
    }
    let marks = s.aggregation_misses();
    if !marks.is_empty() {
        let (name, help) = super::AGGREGATION_MISSED;
        metrics.push(Metric {
            name: name.to_string(),
            description: help.to_string(),
            data: Some(Data::Sum(Sum {
                data_points: marks
                    .iter()
                    .map(|(labels, v)| {
                        let attributes = labels.iter().map(|(k, v)| text(k, v)).collect();
                        point(attributes, number_data_point::Value::AsInt(*v as i64))
                    })
                    .collect(),
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
        name: a.metric_name(),
        description: format!("{}: {}", a.session, a.title),
        data: Some(data),
        ..Default::default()
    }
}
