use super::*;
use crate::aggregate::AggFunc;
use crate::check::counters::{self, Counter};
use crate::output::Summary;
use std::borrow::Cow;

/// A session "vfs_read" in fsession mode with these figures (the others `None`).
pub(super) fn summary(figures: &[(&Counter, u64)]) -> Summary {
    let mut s = Summary {
        label: "vfs_read".into(),
        mode: "fsession",
        ..Summary::default()
    };
    for (c, v) in figures {
        s.set(c, Some(*v));
    }
    s
}

fn snapshot() -> Snapshot {
    let mut slots = vec![0u64; 66];
    // 3 values in [512, 1024) ns, 1 in [2^19, 2^20) ns.
    slots[11] = 3;
    slots[21] = 1;
    Snapshot {
        sessions: vec![summary(&[
            (&counters::CALLS, 65),
            (&counters::MATCHED, 1),
            (&counters::ERRORS, 0),
            (&counters::DROPPED, 2),
            (&counters::EVENTS, 3),
            (&counters::UNPAIRED, 0),
            (&counters::AGG_LOST, 4),
            (&counters::MISSED, 0),
        ])],
        aggregations: vec![
            AggSeries {
                interval: None,
                missed: 0,
                name: "reads".into(),
                session: "vfs_read".into(),
                title: "count() by comm".into(),
                func: AggFunc::named("count").expect("count"),
                duration: false,
                linear: None,
                key_names: vec!["comm".into()],
                unset: None,
                rows: vec![AggPoint {
                    keys: vec![Value::Str(Cow::Owned(b"a\"b\\c\nd".to_vec()))],
                    value: PointValue::Number(7),
                }],
            },
            AggSeries {
                interval: None,
                missed: 0,
                name: "lat".into(),
                session: "vfs_read".into(),
                title: "hist(latency)".into(),
                func: AggFunc::named("hist").expect("hist"),
                duration: true,
                linear: None,
                key_names: vec![],
                unset: None,
                rows: vec![AggPoint {
                    keys: vec![],
                    value: PointValue::Hist {
                        slots,
                        sum: 5_000_000,
                    },
                }],
            },
        ],
        ..Snapshot::empty()
    }
}

#[test]
fn prometheus_text_has_counters_escaped_labels_and_cumulative_buckets() {
    let text = encode(&snapshot());
    for line in [
        "# TYPE fslat_calls_total counter",
        "fslat_calls_total{session=\"vfs_read\"} 65",
        "fslat_dropped_total{session=\"vfs_read\"} 2",
        "fslat_events_total{session=\"vfs_read\"} 3",
        "fslat_agg_lost_total{session=\"vfs_read\"} 4",
        "fslat_missed_total{session=\"vfs_read\"} 0",
        "# TYPE fslat_aggregation_missed_total counter",
        "fslat_aggregation_missed_total{session=\"vfs_read\",aggregation=\"fslat_reads\"} 0",
        "fslat_aggregation_missed_total{session=\"vfs_read\",aggregation=\"fslat_lat\"} 0",
        "# TYPE fslat_reads_total counter",
        r#"fslat_reads_total{comm="a\"b\\c\nd"} 7"#,
        "# TYPE fslat_lat histogram",
        // A duration histogram's slots are whole microseconds: slot 11 is [512us, 1024us).
        "fslat_lat_bucket{le=\"9.99e-07\"} 0",
        "fslat_lat_bucket{le=\"0.000511999\"} 0",
        "fslat_lat_bucket{le=\"0.001023999\"} 3",
        "fslat_lat_bucket{le=\"0.524287999\"} 3",
        "fslat_lat_bucket{le=\"1.048575999\"} 4",
        "fslat_lat_bucket{le=\"+Inf\"} 4",
        "fslat_lat_sum 0.005",
        "fslat_lat_count 4",
    ] {
        assert!(
            text.lines().any(|l| l == line),
            "no line {line:?} in\n{text}"
        );
    }
    // Buckets stop at the highest slot in use.
    assert_eq!(text.matches("fslat_lat_bucket").count(), 22, "{text}");
}

#[test]
fn label_names_are_valid_and_clear_of_le_and_session() {
    for (name, want) in [
        ("comm", "comm"),
        ("f_path.dentry", "f_path_dentry"),
        ("9lives", "_9lives"),
        ("__x", "_x"),
        ("le", "key_le"),
        ("session", "key_session"),
        ("", "_"),
    ] {
        assert_eq!(label_name(name), want, "{name}");
    }
}

#[test]
fn otlp_urls_are_http_or_https_with_a_host_and_a_port() {
    let t = OtlpTarget::parse("http://127.0.0.1:9090/api/v1/otlp/v1/metrics").unwrap();
    assert_eq!(t.authority, "127.0.0.1:9090");
    assert_eq!(t.path, "/api/v1/otlp/v1/metrics");
    let t = OtlpTarget::parse("http://collector:4318").unwrap();
    assert_eq!(
        (t.authority.as_str(), t.path.as_str()),
        ("collector:4318", "/v1/metrics")
    );
    let t = OtlpTarget::parse("http://[::1]:4318/").unwrap();
    assert_eq!(
        (t.authority.as_str(), t.path.as_str()),
        ("[::1]:4318", "/v1/metrics")
    );
    assert_eq!(
        OtlpTarget::parse("http://collector").unwrap().authority,
        "collector:80"
    );
    let t = OtlpTarget::parse("https://otlp.example").unwrap();
    assert_eq!(t.url, "https://otlp.example:443/v1/metrics");
    assert!(t.https);
    for (bad, says) in [
        ("ftp://x:4318", "not an http:// or https:// URL"),
        ("collector:4318", "not an http:// or https:// URL"),
        ("http://", "names no host"),
        ("http://x:0", "not a port"),
        ("http://x:99999", "not a port"),
        ("http://::1:4318", "brackets"),
    ] {
        let e = OtlpTarget::parse(bad).unwrap_err();
        assert!(e.contains(says), "{bad}: {e}");
    }
}

#[test]
fn otlp_request_carries_the_same_figures() {
    use opentelemetry_proto::tonic::metrics::v1::{metric::Data, number_data_point};
    let req = otlp::request(&snapshot());
    let metrics = &req.resource_metrics[0].scope_metrics[0].metrics;
    let find = |n: &str| metrics.iter().find(|m| m.name == n).unwrap();
    let Some(Data::Sum(calls)) = &find("fslat_calls").data else {
        panic!()
    };
    assert!(calls.is_monotonic);
    assert_eq!(
        calls.data_points[0].value,
        Some(number_data_point::Value::AsInt(65))
    );
    // Each aggregation carries its session's skipped calls, named by its metric.
    let Some(Data::Sum(marks)) = &find("fslat_aggregation_missed").data else {
        panic!()
    };
    let marked: Vec<String> = marks
        .data_points
        .iter()
        .map(|p| format!("{:?}", p.attributes[1].value))
        .collect();
    assert_eq!(marked.len(), 2);
    assert!(marked[0].contains("fslat_reads") && marked[1].contains("fslat_lat"));
    let Some(Data::Histogram(h)) = &find("fslat_lat").data else {
        panic!()
    };
    let p = &h.data_points[0];
    assert_eq!((p.count, p.sum), (4, Some(0.005)));
    assert_eq!(p.explicit_bounds.len(), 21);
    assert_eq!(p.explicit_bounds[10], 1_023_999.0 / 1e9);
    // Per bucket, not cumulative, plus the empty +Inf bucket.
    assert_eq!(p.bucket_counts.len(), 22);
    assert_eq!(
        (
            p.bucket_counts[10],
            p.bucket_counts[20],
            p.bucket_counts.iter().sum::<u64>()
        ),
        (3, 1, 4)
    );
}

fn get(addr: std::net::SocketAddr, path: &str) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    write!(s, "GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

#[test]
fn server_answers_metrics_and_404_while_clients_that_never_read_hang_on() {
    let board = Board::new();
    board.put(snapshot());
    let server = Server::start("127.0.0.1:0".parse().unwrap(), board, None).unwrap();
    // Stalled clients: they connect, send nothing, never read.
    let stalled: Vec<_> = (0..4)
        .map(|_| std::net::TcpStream::connect(server.addr).unwrap())
        .collect();
    let started = std::time::Instant::now();
    let answer = get(server.addr, "/metrics");
    assert!(answer.starts_with("HTTP/1.1 200 OK\r\n"), "{answer}");
    assert!(
        answer.contains("fslat_calls_total{session=\"vfs_read\"} 65\n"),
        "{answer}"
    );
    assert!(get(server.addr, "/").starts_with("HTTP/1.1 404 "));
    assert!(get(server.addr, "/metricsx").starts_with("HTTP/1.1 404 "));
    // Each connection has its own thread: the stalled ones delay nothing.
    assert!(started.elapsed() < std::time::Duration::from_secs(1));
    drop(stalled);
}

#[test]
fn a_request_head_is_judged_as_its_bytes_arrive() {
    use super::{Head, read_head};
    let request = |method, path| Head::Request {
        method,
        path,
        authorization: None,
    };
    let cases: &[(&[u8], Head)] = &[
        (b"", Head::Incomplete),
        (b"GE", Head::Incomplete),
        (b"GET /metr", Head::Incomplete),
        (b"GET /metrics HTTP/1.1\r", Head::Incomplete),
        (b"GET /metrics HTTP/1.1\r\nHost: x\r\n", Head::Incomplete),
        (
            b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n",
            request("GET", "/metrics"),
        ),
        // Bare LF line endings, as Go's net/http takes them.
        (b"GET /metrics HTTP/1.1\n\n", request("GET", "/metrics")),
        (
            b"GET /metrics HTTP/1.0\nHost: x\r\n\n",
            request("GET", "/metrics"),
        ),
        (
            b"HEAD /metrics?x=1 HTTP/1.1\r\n\r\n",
            request("HEAD", "/metrics"),
        ),
        (
            b"GET http://h:9/metrics HTTP/1.1\n\n",
            request("GET", "/metrics"),
        ),
        (b"BREW /metrics HTTP/1.1\n\n", request("BREW", "/metrics")),
        // What no request starts with is refused at once.
        (b"\x16\x03\x01\x02\x00", Head::Bad),
        (b" GET", Head::Bad),
        (b"G(T", Head::Bad),
        (b"GET /a\x01", Head::Bad),
        (b"GET /metrics HTTX", Head::Bad),
        (b"GET /metrics HTTP/2.0", Head::Bad),
        (b"GET /metrics HTTP/1.1 x", Head::Bad),
        (b"GARBAGE /\r\n\r\n", Head::Bad),
        (b"GET metrics HTTP/1.1\r\n\r\n", Head::Bad),
        (b"\r\n", Head::Bad),
    ];
    for (bytes, want) in cases {
        assert_eq!(read_head(bytes), *want, "{}", bytes.escape_ascii());
    }
}

/// What the server answers to `bytes`, and how long it took.
fn exchange(addr: std::net::SocketAddr, bytes: &[u8]) -> (String, std::time::Duration) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    let started = std::time::Instant::now();
    s.write_all(bytes).unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).unwrap();
    (
        String::from_utf8_lossy(&out).into_owned(),
        started.elapsed(),
    )
}

#[test]
fn the_server_answers_bad_requests_and_bare_line_feeds_at_once() {
    let board = Board::new();
    board.put(snapshot());
    let server = Server::start("127.0.0.1:0".parse().unwrap(), board, None).unwrap();
    // The request deadline is 2 s: every answer here comes well before it.
    let quick = std::time::Duration::from_secs(1);
    for (bytes, status) in [
        (&b"GET /metrics HTTP/1.1\n\n"[..], "200 OK"),
        (b"\x16\x03\x01\x00\xa5\x01\x00", "400 Bad Request"),
        (b"GARBAGE /\r\n\r\n", "400 Bad Request"),
        (b"BREW /metrics HTTP/1.1\r\n\r\n", "405 Method Not Allowed"),
        (b"BREW / HTTP/1.1\r\n\r\n", "404 Not Found"),
    ] {
        let (answer, took) = exchange(server.addr, bytes);
        assert!(
            answer.starts_with(&format!("HTTP/1.1 {status}\r\n")),
            "{}: {answer}",
            bytes.escape_ascii()
        );
        assert!(took < quick, "{}: {took:?}", bytes.escape_ascii());
    }
}

#[test]
fn a_dropped_server_frees_its_port() {
    let server = Server::start("127.0.0.1:0".parse().unwrap(), Board::new(), None).unwrap();
    let addr = server.addr;
    drop(server);
    let again = Server::start(addr, Board::new(), None).expect("the port is free again");
    assert!(get(again.addr, "/metrics").starts_with("HTTP/1.1 200 OK\r\n"));
}

/// A percentiles series over -5, 10, 100 and 1000, and a session with lost stacks.
fn percentiles_snapshot() -> Snapshot {
    use crate::aggregate::buckets::{PCT_SLOTS, pct_slot};
    let mut slots = vec![0u64; PCT_SLOTS];
    for v in [10, 100, 1000] {
        slots[pct_slot(v)] += 1;
    }
    let mut s = snapshot();
    s.sessions[0].set(&counters::STACK_LOST, Some(3));
    s.aggregations = vec![AggSeries {
        interval: None,
        missed: 0,
        name: "sizes".into(),
        session: "vfs_read".into(),
        title: "percentiles(count)".into(),
        func: AggFunc::named("percentiles").expect("percentiles"),
        duration: false,
        linear: None,
        key_names: vec![],
        unset: None,
        rows: vec![AggPoint {
            keys: vec![],
            value: PointValue::Pct {
                slots,
                negative: 1,
                sum: 1105,
            },
        }],
    }];
    s
}

#[test]
fn percentiles_export_as_a_histogram_four_buckets_a_power_of_two() {
    let text = encode(&percentiles_snapshot());
    for line in [
        "# TYPE fslat_sizes histogram",
        // [0, 32) exactly, with the negative value: -5 and 10.
        "fslat_sizes_bucket{le=\"31\"} 2",
        // 100 is in [96, 112): a quarter of [64, 128).
        "fslat_sizes_bucket{le=\"95\"} 2",
        "fslat_sizes_bucket{le=\"111\"} 3",
        // 1000 is in [896, 1024).
        "fslat_sizes_bucket{le=\"895\"} 3",
        "fslat_sizes_bucket{le=\"1023\"} 4",
        "fslat_sizes_bucket{le=\"+Inf\"} 4",
        "fslat_sizes_sum 1105.0",
        "fslat_sizes_count 4",
        "fslat_stack_lost_total{session=\"vfs_read\"} 3",
    ] {
        assert!(
            text.lines().any(|l| l == line),
            "no line {line:?} in\n{text}"
        );
    }
    // [0, 32), four buckets for each of [32, 64) .. [512, 1024), and +Inf.
    assert_eq!(
        text.matches("fslat_sizes_bucket").count(),
        1 + 4 * 5 + 1,
        "{text}"
    );
}

#[test]
fn a_session_without_stacks_exports_no_stack_lost() {
    assert!(!encode(&snapshot()).contains("fslat_stack_lost"));
}

#[test]
fn otlp_percentiles_have_the_same_buckets() {
    use opentelemetry_proto::tonic::metrics::v1::metric::Data;
    let req = otlp::request(&percentiles_snapshot());
    let metrics = &req.resource_metrics[0].scope_metrics[0].metrics;
    let m = metrics.iter().find(|m| m.name == "fslat_sizes").unwrap();
    let Some(Data::Histogram(h)) = &m.data else {
        panic!("{m:?}")
    };
    let p = &h.data_points[0];
    assert_eq!((p.count, p.sum), (4, Some(1105.0)));
    assert_eq!(p.explicit_bounds.len(), 21);
    assert_eq!(p.explicit_bounds[0], 31.0);
    assert_eq!(p.explicit_bounds[20], 1023.0);
    assert_eq!(p.bucket_counts.len(), 22);
    assert_eq!(p.bucket_counts.iter().sum::<u64>(), 4);
    assert!(metrics.iter().any(|m| m.name == "fslat_stack_lost"));
}

#[test]
fn an_lhist_exports_its_linear_buckets_with_the_ones_below_and_above() {
    let l = crate::aggregate::Linear {
        min: 10,
        max: 40,
        step: 10,
    };
    // Below 10: 1; [10, 20): 2; [30, 40): 1; from 40 up: 3.
    let snap = Snapshot {
        aggregations: vec![AggSeries {
            interval: None,
            missed: 0,
            name: "sizes".into(),
            session: "vfs_write".into(),
            title: "lhist(count, 10, 40, 10)".into(),
            func: AggFunc::named("lhist").expect("lhist"),
            duration: false,
            linear: Some(l),
            key_names: vec![],
            unset: None,
            rows: vec![AggPoint {
                keys: vec![],
                value: PointValue::Hist {
                    slots: vec![1, 2, 0, 1, 3],
                    sum: 300,
                },
            }],
        }],
        ..Snapshot::empty()
    };
    let text = encode(&snap);
    for line in [
        "# TYPE fslat_sizes histogram",
        "fslat_sizes_bucket{le=\"9\"} 1",
        "fslat_sizes_bucket{le=\"19\"} 3",
        "fslat_sizes_bucket{le=\"29\"} 3",
        "fslat_sizes_bucket{le=\"39\"} 4",
        "fslat_sizes_bucket{le=\"+Inf\"} 7",
        "fslat_sizes_sum 300.0",
        "fslat_sizes_count 7",
    ] {
        assert!(
            text.lines().any(|l| l == line),
            "no line {line:?} in\n{text}"
        );
    }
    assert_eq!(text.matches("fslat_sizes_bucket").count(), 5, "{text}");
}

#[test]
fn stats_export_a_count_and_a_sum() {
    let snap = Snapshot {
        aggregations: vec![AggSeries {
            interval: None,
            missed: 0,
            name: "write_time".into(),
            session: "vfs_write".into(),
            title: "stats(latency) by comm".into(),
            func: AggFunc::named("stats").expect("stats"),
            duration: true,
            linear: None,
            key_names: vec!["comm".into()],
            unset: None,
            rows: vec![AggPoint {
                keys: vec![Value::Str(Cow::Borrowed(b"dd"))],
                value: PointValue::Summary {
                    count: 3,
                    sum: 60_000_000,
                },
            }],
        }],
        ..Snapshot::empty()
    };
    let text = encode(&snap);
    for line in [
        "# TYPE fslat_write_time histogram",
        "fslat_write_time_bucket{comm=\"dd\",le=\"+Inf\"} 3",
        "fslat_write_time_sum{comm=\"dd\"} 0.06",
        "fslat_write_time_count{comm=\"dd\"} 3",
    ] {
        assert!(
            text.lines().any(|l| l == line),
            "no line {line:?} in\n{text}"
        );
    }
    use opentelemetry_proto::tonic::metrics::v1::metric::Data;
    let req = otlp::request(&snap);
    let m = &req.resource_metrics[0].scope_metrics[0].metrics[0];
    let Some(Data::Histogram(h)) = &m.data else {
        panic!("{m:?}")
    };
    let p = &h.data_points[0];
    assert_eq!((p.count, p.sum), (3, Some(0.06)));
    assert_eq!(p.bucket_counts, [3]);
    assert!(p.explicit_bounds.is_empty());
}
