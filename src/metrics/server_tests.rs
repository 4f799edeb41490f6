//! The `--listen` server against clients that stall, and `--web-config`: TLS, client
//! certificates, basic authentication, and the file's errors.

use super::*;
use crate::check::counters;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::time::{Duration, Instant};

fn board() -> Arc<Board> {
    let board = Board::new();
    board.put(Snapshot {
        sessions: vec![super::tests::summary(&[
            (&counters::CALLS, 65),
            (&counters::MATCHED, 1),
            (&counters::ERRORS, 0),
            (&counters::DROPPED, 0),
            (&counters::EVENTS, 1),
            (&counters::UNPAIRED, 0),
        ])],
        ..Snapshot::empty()
    });
    board
}

const SCRAPE: &[u8] = b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n";

/// What a plain client gets for `request`.
fn plain(addr: SocketAddr, request: &[u8]) -> std::io::Result<String> {
    let mut s = TcpStream::connect(addr)?;
    s.set_read_timeout(Some(Duration::from_secs(20)))?;
    s.write_all(request)?;
    let mut out = Vec::new();
    s.read_to_end(&mut out)?;
    Ok(String::from_utf8_lossy(&out).into_owned())
}

#[test]
fn a_client_that_trickles_its_request_is_cut_at_the_request_deadline() {
    let server = Server::start("127.0.0.1:0".parse().unwrap(), board(), None).unwrap();
    let mut s = TcpStream::connect(server.addr).unwrap();
    let started = Instant::now();
    // One byte every 200 ms: each read succeeds, the request never ends.
    let mut closed = None;
    for b in b"GET /metrics HTTP/1.1\r\nX-Slow: ".iter().cycle().take(60) {
        if s.write_all(&[*b]).is_err() {
            closed = Some(started.elapsed());
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let closed = closed.expect("the server never closed the trickling connection");
    // Closed once the deadline (2 s) passed; the write that notices comes a little after.
    assert!(closed >= server::REQUEST_DEADLINE, "{closed:?}");
    assert!(closed < server::REQUEST_DEADLINE * 2, "{closed:?}");
}

#[test]
fn scrapes_are_answered_at_once_while_many_clients_trickle_or_stay_silent() {
    let server = Server::start("127.0.0.1:0".parse().unwrap(), board(), None).unwrap();
    let addr = server.addr;
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    // 24 clients that never send and 24 that send a byte every 100 ms, each
    // reconnecting as soon as the deadline closes it.
    let mut hostile = Vec::new();
    for i in 0..48 {
        let stop = Arc::clone(&stop);
        hostile.push(std::thread::spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                let Ok(mut s) = TcpStream::connect(addr) else {
                    continue;
                };
                while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                    if i % 2 == 1 && s.write_all(b"G").is_err() {
                        break;
                    }
                    let mut b = [0u8; 1];
                    s.set_read_timeout(Some(Duration::from_millis(100)))
                        .unwrap();
                    if matches!(s.read(&mut b), Ok(0)) {
                        break;
                    }
                }
            }
        }));
    }
    std::thread::sleep(Duration::from_millis(500));
    let mut slowest = Duration::ZERO;
    for _ in 0..10 {
        let started = Instant::now();
        let answer = plain(addr, SCRAPE).unwrap();
        slowest = slowest.max(started.elapsed());
        assert!(
            answer.contains("fslat_calls_total{session=\"vfs_read\"} 65\n"),
            "{answer}"
        );
        std::thread::sleep(Duration::from_millis(300));
    }
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    for h in hostile {
        h.join().unwrap();
    }
    assert!(slowest < Duration::from_secs(1), "{slowest:?}");
}

#[test]
fn more_held_connections_than_the_server_keeps_close_the_oldest_not_the_scrape() {
    let server = Server::start("127.0.0.1:0".parse().unwrap(), board(), None).unwrap();
    let held: Vec<TcpStream> = (0..server::MAX_CONNECTIONS + 40)
        .map(|_| TcpStream::connect(server.addr).unwrap())
        .collect();
    let started = Instant::now();
    let answer = plain(server.addr, SCRAPE).unwrap();
    assert!(
        answer.contains("fslat_calls_total{session=\"vfs_read\"} 65\n"),
        "{answer}"
    );
    assert!(started.elapsed() < Duration::from_secs(1));
    // The first ones were closed to make room; the newest are still open.
    let open = |mut s: &TcpStream| {
        s.set_read_timeout(Some(Duration::from_millis(300)))
            .unwrap();
        s.read(&mut [0u8; 1]).is_err()
    };
    assert!(!open(&held[0]));
    assert!(open(&held[held.len() - 1]));
}

/// A fresh certificate authority, a server and a client certificate (tests/make-certs).
pub(super) fn certs() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/make-certs");
    let out = std::process::Command::new(script)
        .arg(dir.path())
        .output()
        .expect("tests/make-certs runs (it needs openssl)");
    assert!(
        out.status.success(),
        "tests/make-certs: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    dir
}

fn web(dir: &Path, yaml: &str) -> Result<WebConfig, String> {
    let path = dir.join("web.yml");
    std::fs::write(&path, yaml).unwrap();
    WebConfig::load(&path)
}

/// A server on a free port with the web configuration `yaml` (files relative to `dir`).
fn serve(dir: &Path, yaml: &str) -> Server {
    let config = web(dir, yaml).unwrap();
    Server::start(
        "127.0.0.1:0".parse().unwrap(),
        board(),
        Some(Arc::new(config)),
    )
    .unwrap()
}

/// What a TLS client that trusts `ca.pem` (and shows `client`'s certificate) gets.
fn tls(
    addr: SocketAddr,
    dir: &Path,
    client: Option<&str>,
    request: &[u8],
) -> std::io::Result<String> {
    let provider = super::crypto_provider();
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_file_iter(dir.join("ca.pem")).unwrap() {
        roots.add(c.unwrap()).unwrap();
    }
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots);
    let config = match client {
        None => builder.with_no_client_auth(),
        Some(name) => builder
            .with_client_auth_cert(
                CertificateDer::pem_file_iter(dir.join(format!("{name}.pem")))
                    .unwrap()
                    .map(Result::unwrap)
                    .collect(),
                PrivateKeyDer::from_pem_file(dir.join(format!("{name}.key"))).unwrap(),
            )
            .unwrap(),
    };
    let name = ServerName::try_from("127.0.0.1").unwrap();
    let conn = rustls::ClientConnection::new(Arc::new(config), name).unwrap();
    let tcp = TcpStream::connect(addr)?;
    tcp.set_read_timeout(Some(Duration::from_secs(20)))?;
    let mut s = rustls::StreamOwned::new(conn, tcp);
    s.write_all(request)?;
    let mut out = Vec::new();
    s.read_to_end(&mut out)?;
    Ok(String::from_utf8_lossy(&out).into_owned())
}

fn basic(user: &str, password: &str) -> Vec<u8> {
    use base64::Engine;
    let token = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
    format!("GET /metrics HTTP/1.1\r\nHost: x\r\nAuthorization: Basic {token}\r\n\r\n").into_bytes()
}

#[test]
fn tls_with_basic_auth_serves_the_right_password_only() {
    let dir = certs();
    let hash = bcrypt::hash("s3cret", 4).unwrap();
    let server = serve(
        dir.path(),
        &format!(
            "tls_server_config:\n  cert_file: server.pem\n  key_file: server.key\nbasic_auth_users:\n  prometheus: {hash}\n"
        ),
    );
    let addr = server.addr;
    let ok = tls(addr, dir.path(), None, &basic("prometheus", "s3cret")).unwrap();
    assert!(ok.starts_with("HTTP/1.1 200 OK\r\n"), "{ok}");
    assert!(
        ok.contains("fslat_calls_total{session=\"vfs_read\"} 65\n"),
        "{ok}"
    );
    for request in [
        basic("prometheus", "wrong"),
        basic("nobody", "s3cret"),
        SCRAPE.to_vec(),
        b"GET /metrics HTTP/1.1\r\nAuthorization: Bearer s3cret\r\n\r\n".to_vec(),
    ] {
        let answer = tls(addr, dir.path(), None, &request).unwrap();
        assert!(
            answer.starts_with("HTTP/1.1 401 Unauthorized\r\n"),
            "{answer}"
        );
        assert!(
            answer.contains("\r\nWWW-Authenticate: Basic\r\n"),
            "{answer}"
        );
        assert!(!answer.contains("fslat_"), "{answer}");
    }
    // Plain HTTP to the TLS port: told so, at once, and nothing else.
    let started = Instant::now();
    let answer = plain(addr, SCRAPE).unwrap();
    assert_eq!(
        answer,
        "HTTP/1.0 400 Bad Request\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\nClient sent an HTTP request to an HTTPS server.\n"
    );
    assert!(started.elapsed() < Duration::from_secs(1));
}

#[test]
fn a_required_client_certificate_must_come_from_the_client_ca() {
    let dir = certs();
    let server = serve(
        dir.path(),
        "tls_server_config:\n  cert_file: server.pem\n  key_file: server.key\n  client_ca_file: ca.pem\n  client_auth_type: RequireAndVerifyClientCert\n",
    );
    let ok = tls(server.addr, dir.path(), Some("client"), SCRAPE).unwrap();
    assert!(
        ok.contains("fslat_calls_total{session=\"vfs_read\"} 65\n"),
        "{ok}"
    );
    for client in [None, Some("other-client")] {
        let refused = tls(server.addr, dir.path(), client, SCRAPE);
        assert!(
            refused.as_ref().is_ok_and(|a| !a.contains("fslat_")) || refused.is_err(),
            "{client:?}: {refused:?}"
        );
    }
}

#[test]
fn a_bad_web_config_is_refused_with_what_is_wrong() {
    let dir = certs();
    let d = dir.path();
    let head = "tls_server_config:\n  cert_file: server.pem\n  key_file: server.key\n";
    let cases: &[(String, &str)] = &[
        (
            "tls_server_config:\n  cert_file: server.pem\n".into(),
            "tls_server_config needs cert_file and key_file (or cert and key)",
        ),
        (
            "tls_server_config:\n  cert_file: server.pem\n  key_file: missing.key\n".into(),
            "tls_server_config: cannot read ",
        ),
        (
            "tls_server_config:\n  cert_file: server.key\n  key_file: server.key\n".into(),
            "no PEM certificate in it",
        ),
        (
            "tls_server_config:\n  cert_file: server.pem\n  key_file: client.key\n".into(),
            "server.pem and ",
        ),
        (
            format!("{head}  client_ca_file: ca.pem\n"),
            "client_ca_file is given without a client_auth_type",
        ),
        (
            format!("{head}  client_auth_type: RequireAndVerifyClientCert\n"),
            "verifying client certificates needs client_ca_file",
        ),
        (
            format!("{head}  client_auth_type: RequireAnyClientCert\n  client_ca_file: ca.pem\n"),
            "accepts certificates nobody verified",
        ),
        (
            format!("{head}  client_auth_type: Sometimes\n"),
            "client_auth_type \"Sometimes\" is not one of",
        ),
        (
            format!("{head}  min_version: TLS13\n  max_version: TLS12\n"),
            "min_version is above max_version",
        ),
        (
            format!("{head}  min_version: TLS10\n"),
            "fslat speaks TLS12 and TLS13 only",
        ),
        (
            format!("{head}  cipher_suites: [TLS_AES_128_GCM_SHA256]\n"),
            "unknown field `cipher_suites`",
        ),
        (
            "rate_limit:\n  burst: 2\n".into(),
            "unknown field `rate_limit`",
        ),
        (
            "basic_auth_users:\n  alice: plaintext\n".into(),
            "the password of \"alice\" is not a bcrypt hash",
        ),
        ("basic_auth_users: [alice\n".into(), "basic_auth_users: "),
    ];
    for (yaml, want) in cases {
        let e = web(d, yaml).expect_err(yaml);
        assert!(e.contains(want), "{yaml}\n  got: {e}\n  want: {want}");
    }
    let e = WebConfig::load(&d.join("absent.yml")).unwrap_err();
    assert!(e.starts_with("cannot read it: "), "{e}");
    // An empty file asks for nothing.
    let none = web(d, "# nothing yet\n").unwrap();
    assert!(none.tls.is_none() && none.authorized(None));
}

/// A capability set of a thread of this process, from `/proc/self/task/TID/status`.
fn capabilities(thread_name: &str, set: &str) -> Vec<u64> {
    let mut found = Vec::new();
    for task in std::fs::read_dir("/proc/self/task").unwrap() {
        let dir = task.unwrap().path();
        let comm = std::fs::read_to_string(dir.join("comm")).unwrap_or_default();
        if comm.trim() != thread_name {
            continue;
        }
        let status = std::fs::read_to_string(dir.join("status")).unwrap_or_default();
        let line = status
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{set}:")))
            .unwrap();
        found.push(u64::from_str_radix(line.trim(), 16).unwrap());
    }
    found
}

#[test]
fn the_threads_that_read_network_input_hold_no_capabilities() {
    let me = std::thread::current();
    let me = me.name().unwrap_or("").chars().take(15).collect::<String>();
    let server = Server::start("127.0.0.1:0".parse().unwrap(), board(), None).unwrap();
    // A connection held open keeps its thread alive to be looked at.
    let held = TcpStream::connect(server.addr).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    // The test runs as root (as fslat does): this thread holds capabilities, so the
    // server's threads having none is their own doing.
    assert!(
        capabilities(&me, "CapEff").iter().any(|&c| c != 0),
        "run the tests as root: this thread ({me}) has no capabilities to drop"
    );
    for thread in ["fslat-listen", "fslat-metrics"] {
        for set in ["CapEff", "CapPrm", "CapInh", "CapAmb"] {
            let caps = capabilities(thread, set);
            assert!(!caps.is_empty(), "no thread named {thread}");
            assert!(caps.iter().all(|&c| c == 0), "{thread} {set}: {caps:x?}");
        }
    }
    drop(held);
}
