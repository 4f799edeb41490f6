//! `--otlp`: where the settings come from (options over the environment, as the
//! OpenTelemetry specification orders it), retries, headers and https.

use super::otlp::{self, OtlpOptions, OtlpTarget, settings};
use super::server_tests::certs;
use super::*;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::time::{Duration, Instant};

fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
    move |name| {
        vars.iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.to_string())
    }
}

#[test]
fn otlp_settings_take_the_option_then_the_metrics_variable_then_the_generic_one() {
    let flag = OtlpOptions {
        url: Some(OtlpTarget::parse("http://flag:1").unwrap()),
        ..OtlpOptions::default()
    };
    let none = OtlpOptions::default();
    let both = [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://generic:2/base/"),
        ("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "https://metrics:3"),
    ];
    let url = |o: &OtlpOptions, vars: &[(&str, &str)]| {
        settings(o, env(vars))
            .unwrap()
            .map(|s| (s.target.url.clone(), s.source))
    };
    assert_eq!(
        url(&flag, &both),
        Some(("http://flag:1/v1/metrics".into(), "--otlp"))
    );
    // The metrics endpoint is used as it is: no path is the root path.
    assert_eq!(
        url(&none, &both),
        Some((
            "https://metrics:3/".into(),
            "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"
        ))
    );
    // The generic one gets the signal's path after its own.
    assert_eq!(
        url(&none, &both[..1]),
        Some((
            "http://generic:2/base/v1/metrics".into(),
            "OTEL_EXPORTER_OTLP_ENDPOINT"
        ))
    );
    assert_eq!(
        url(&none, &[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://g:4318")]),
        Some((
            "http://g:4318/v1/metrics".into(),
            "OTEL_EXPORTER_OTLP_ENDPOINT"
        ))
    );
    // Empty is unset; nothing named: no push.
    assert_eq!(
        url(&none, &[("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", " ")]),
        None
    );
    assert_eq!(url(&none, &[]), None);
    for (opts, vars, says) in [
        (
            &none,
            [("OTEL_EXPORTER_OTLP_ENDPOINT", "collector:4318")],
            "OTEL_EXPORTER_OTLP_ENDPOINT: `collector:4318` is not an http:// or https:// URL",
        ),
        (
            &flag,
            [("OTEL_EXPORTER_OTLP_HEADERS", "api-key")],
            "OTEL_EXPORTER_OTLP_HEADERS: `api-key` is not NAME=VALUE",
        ),
        (
            &flag,
            [("OTEL_EXPORTER_OTLP_CERTIFICATE", "/nonexistent/ca.pem")],
            "OTEL_EXPORTER_OTLP_CERTIFICATE: cannot read /nonexistent/ca.pem",
        ),
    ] {
        let e = settings(opts, env(&vars)).err().unwrap();
        assert!(e.starts_with(says), "{vars:?}: {e}");
    }
    let lonely = OtlpOptions {
        headers: vec![("a".into(), "b".into())],
        ..OtlpOptions::default()
    };
    assert!(
        settings(&lonely, env(&[]))
            .err()
            .unwrap()
            .contains("need --otlp URL")
    );
}

/// A receiver on 127.0.0.1 that answers each request with the next of `statuses`
/// (over TLS with `tls`), and hands back every request's header lines.
fn receiver(
    statuses: Vec<u16>,
    tls: Option<Arc<rustls::ServerConfig>>,
) -> (String, std::thread::JoinHandle<Vec<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let handle = std::thread::spawn(move || {
        let mut seen = Vec::new();
        for status in statuses {
            let (tcp, _) = listener.accept().unwrap();
            tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            let mut stream: Box<dyn ReadWrite> = match &tls {
                Some(config) => Box::new(rustls::StreamOwned::new(
                    rustls::ServerConnection::new(Arc::clone(config)).unwrap(),
                    tcp,
                )),
                None => Box::new(tcp),
            };
            let mut reader = BufReader::new(&mut stream);
            let mut lines = Vec::new();
            let mut length = 0;
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                let line = line.trim_end().to_string();
                if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    length = v.trim().parse().unwrap();
                }
                lines.push(line);
            }
            let mut body = vec![0u8; length];
            if lines.is_empty() || reader.read_exact(&mut body).is_err() {
                // A failed handshake or a client that gave up.
                seen.push(lines);
                continue;
            }
            drop(reader);
            let answer =
                format!("HTTP/1.1 {status} X\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
            let _ = stream.write_all(answer.as_bytes());
            let _ = stream.flush();
            seen.push(lines);
        }
        seen
    });
    (format!("127.0.0.1:{}", addr.port()), handle)
}

trait ReadWrite: Read + Write + Send {}
impl<T: Read + Write + Send> ReadWrite for T {}

fn snapshot() -> Snapshot {
    Snapshot::empty()
}

#[test]
fn a_push_retries_a_busy_receiver_and_sends_the_headers_every_time() {
    let (addr, handle) = receiver(vec![503, 429, 200], None);
    let opts = OtlpOptions {
        url: Some(OtlpTarget::parse(&format!("http://{addr}")).unwrap()),
        headers: vec![("X-Api-Key".into(), "from-the-option".into())],
        ca: None,
    };
    let vars = [
        (
            "OTEL_EXPORTER_OTLP_HEADERS",
            "x-api-key=generic,X-Team=a%20b",
        ),
        (
            "OTEL_EXPORTER_OTLP_METRICS_HEADERS",
            "X-Team=metrics%2Fteam",
        ),
    ];
    let s = settings(&opts, env(&vars)).unwrap().unwrap();
    let started = Instant::now();
    let (result, stopped) = otlp::push(&s, &snapshot(), Duration::from_secs(8), None);
    assert!(result.is_ok(), "{result:?}");
    assert_eq!(stopped, None);
    // Two waits: 0.5 s and 1 s, each with up to a quarter more.
    let took = started.elapsed();
    assert!(took >= Duration::from_millis(1500), "{took:?}");
    let seen = handle.join().unwrap();
    assert_eq!(seen.len(), 3);
    for lines in &seen {
        assert_eq!(lines[0], "POST /v1/metrics HTTP/1.1");
        let has = |h: &str| lines.iter().any(|l| l.eq_ignore_ascii_case(h));
        // The option replaces the variable's header of the same name; the metrics
        // variable replaces the generic one whole.
        assert!(has("x-api-key: from-the-option"), "{lines:?}");
        assert!(has("x-team: metrics/team"), "{lines:?}");
        assert!(has("content-type: application/x-protobuf"), "{lines:?}");
    }
}

#[test]
fn a_push_to_a_receiver_that_is_down_retries_within_its_budget_then_warns() {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let opts = OtlpOptions {
        url: Some(OtlpTarget::parse(&format!("http://127.0.0.1:{port}")).unwrap()),
        ..OtlpOptions::default()
    };
    let s = settings(&opts, env(&[])).unwrap().unwrap();
    let started = Instant::now();
    let (result, _) = otlp::push(&s, &snapshot(), Duration::from_secs(3), None);
    let took = started.elapsed();
    let e = result.unwrap_err();
    // Attempts at 0, ~0.5 and ~1.5 s; the next wait would pass the 3 s budget.
    assert!(took < Duration::from_secs(3), "{took:?}");
    let text = otlp::warning(&s.target, &e);
    assert!(
        text.starts_with(&format!(
            "fslat: warning: --otlp: pushing to http://127.0.0.1:{port}/v1/metrics failed 3 times, the last: "
        )),
        "{text}"
    );
}

#[test]
fn a_push_refused_with_400_is_not_retried() {
    let (addr, handle) = receiver(vec![400], None);
    let opts = OtlpOptions {
        url: Some(OtlpTarget::parse(&format!("http://{addr}/x")).unwrap()),
        ..OtlpOptions::default()
    };
    let s = settings(&opts, env(&[])).unwrap().unwrap();
    let (result, _) = otlp::push(&s, &snapshot(), Duration::from_secs(5), None);
    let text = otlp::warning(&s.target, &result.unwrap_err());
    assert_eq!(
        text,
        format!(
            "fslat: warning: --otlp: pushing to http://{addr}/x failed: the receiver answered 400 Bad Request"
        )
    );
    assert_eq!(handle.join().unwrap()[0][0], "POST /x HTTP/1.1");
}

#[test]
fn a_push_over_https_checks_the_receiver_against_the_ca_file() {
    let dir = certs();
    let web = WebConfig::parse(
        "tls_server_config:\n  cert_file: server.pem\n  key_file: server.key\n",
        dir.path(),
    )
    .unwrap();
    let tls = web.tls.clone();
    let (addr, handle) = receiver(vec![200], tls.clone());
    let opts = OtlpOptions {
        url: Some(OtlpTarget::parse(&format!("https://{addr}")).unwrap()),
        headers: vec![("Authorization".into(), "Bearer t0ken".into())],
        ca: Some(dir.path().join("ca.pem")),
    };
    let s = settings(&opts, env(&[])).unwrap().unwrap();
    let (result, _) = otlp::push(&s, &snapshot(), Duration::from_secs(5), None);
    assert!(result.is_ok(), "{result:?}");
    let seen = handle.join().unwrap();
    assert!(
        seen[0]
            .iter()
            .any(|l| l == "authorization: Bearer t0ken" || l == "Authorization: Bearer t0ken"),
        "{seen:?}"
    );
    // Another authority's CA: the handshake fails, and that is not retried.
    let other = OtlpOptions {
        ca: Some(dir.path().join("other-ca.pem")),
        ..opts
    };
    let (addr2, _refused) = receiver(vec![200], tls);
    let other = OtlpOptions {
        url: Some(OtlpTarget::parse(&format!("https://{addr2}")).unwrap()),
        ..other
    };
    let s = settings(&other, env(&[])).unwrap().unwrap();
    let (result, _) = otlp::push(&s, &snapshot(), Duration::from_secs(5), None);
    let text = otlp::warning(&s.target, &result.unwrap_err());
    assert!(
        text.contains(" failed: ") && text.to_lowercase().contains("certificate"),
        "{text}"
    );
}
