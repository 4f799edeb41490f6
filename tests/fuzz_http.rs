//! The fuzz target of `--listen`'s request parser (`fslat::metrics::read_head`, which
//! reads bytes straight from the network): random bytes, and mutants of well-formed
//! requests (bytes flipped, inserted, deleted, spliced, line endings mixed).
//!
//! Properties, for every input and every prefix of it (the server judges the head on
//! every read): nothing panics; once a prefix is `Bad` or a `Request`, every longer
//! prefix says the same (a verdict never changes as more bytes arrive); a `Request`'s
//! method is a token, its path starts with `/` and holds no `?` or control byte; and a
//! well-formed request parses to exactly the method, path and `Authorization` it was
//! built from.
//!
//!     cargo test --release --test fuzz_http                        # 20000 inputs
//!     FSLAT_FUZZ_INPUTS=2000000 cargo test --release --test fuzz_http
//!
//! `FSLAT_FUZZ_SEED` (default 18) picks another series; a failure names its input's
//! number and bytes.

#[allow(dead_code)]
#[path = "fuzz/gen.rs"]
mod generator;

use fslat::metrics::{Head, read_head};
use generator::Rng;
use std::process::ExitCode;

const METHODS: [&str; 6] = ["GET", "HEAD", "POST", "BREW", "get", "M-SEARCH"];
const PATHS: [&str; 6] = [
    "/metrics",
    "/",
    "/metrics?x=1&y",
    "/a/b",
    "http://h:9/metrics",
    "http://h",
];

/// A well-formed request: its bytes, and what it must parse to.
fn request(r: &mut Rng) -> (Vec<u8>, String, String, Option<String>) {
    let method = r.pick(&METHODS).to_string();
    let target = r.pick(&PATHS).to_string();
    let path = target
        .strip_prefix("http://")
        .map_or(target.as_str(), |rest| {
            rest.find('/').map_or("/", |i| &rest[i..])
        })
        .split('?')
        .next()
        .unwrap_or_default()
        .to_string();
    let eol = |r: &mut Rng| if r.one_in(3) { "\n" } else { "\r\n" };
    let mut text = format!("{method} {target} HTTP/1.{}{}", r.below(2), eol(r));
    let mut authorization = None;
    for _ in 0..r.below(4) {
        let value = format!("v{}", r.below(1000));
        match r.below(3) {
            0 if authorization.is_none() => {
                let name = r.pick(&["Authorization", "authorization", "AUTHORIZATION"]);
                text += &format!("{name}: Basic {value}  {}", eol(r));
                authorization = Some(format!("Basic {value}"));
            }
            _ => text += &format!("X-{}: {value}{}", r.below(9), eol(r)),
        }
    }
    text += eol(r);
    (text.into_bytes(), method, path, authorization)
}

fn mutate(r: &mut Rng, mut bytes: Vec<u8>) -> Vec<u8> {
    for _ in 0..1 + r.below(4) {
        let at = r.below(bytes.len() + 1);
        match r.below(5) {
            0 if at < bytes.len() => bytes[at] = r.next() as u8,
            1 => bytes.insert(at, *r.pick(b" \r\n:?/\x00\x7fHT")),
            2 if at < bytes.len() => {
                bytes.remove(at);
            }
            3 => {
                let (extra, ..) = request(r);
                let from = r.below(extra.len());
                bytes.splice(at..at, extra[from..].iter().copied());
            }
            _ => bytes.truncate(at),
        }
    }
    bytes
}

/// Checks every prefix of `bytes`; the first broken property, if any.
fn check(bytes: &[u8]) -> Result<(), String> {
    let mut verdict: Option<Head> = None;
    for end in 0..=bytes.len() {
        let head = read_head(&bytes[..end]);
        if let Head::Request { method, path, .. } = &head {
            let token = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
            if method.is_empty() || !method.bytes().all(token) {
                return Err(format!("method {method:?} is not a token"));
            }
            if !path.starts_with('/')
                || path.contains('?')
                || path.bytes().any(|b| !b.is_ascii_graphic())
            {
                return Err(format!("path {path:?}"));
            }
        }
        match (&verdict, &head) {
            (None, Head::Incomplete) => {}
            (None, _) => verdict = Some(head),
            (Some(v), h) if v == h => {}
            (Some(v), h) => {
                return Err(format!("{v:?} at a shorter prefix, {h:?} at {end} bytes"));
            }
        }
    }
    Ok(())
}

fn main() -> ExitCode {
    if std::env::args().any(|a| a == "--list") {
        println!("fuzz_http: test");
        return ExitCode::SUCCESS;
    }
    let (inputs, seed) = match (
        generator::env_u64("FSLAT_FUZZ_INPUTS", 20_000),
        generator::env_u64("FSLAT_FUZZ_SEED", 18),
    ) {
        (Ok(i), Ok(s)) => (i, s),
        (Err(e), _) | (_, Err(e)) => {
            println!("fuzz_http: {e}");
            return ExitCode::FAILURE;
        }
    };
    let started = std::time::Instant::now();
    let (mut requests, mut bad) = (0u64, 0u64);
    let mut failed = 0;
    for n in 0..inputs {
        let mut r = Rng::new(seed, n);
        let bytes = match r.below(4) {
            0 => (0..r.below(64)).map(|_| r.next() as u8).collect(),
            1 => {
                let (bytes, method, path, authorization) = request(&mut r);
                let want = Head::Request {
                    method: &method,
                    path: &path,
                    authorization: authorization.as_deref().map(str::as_bytes),
                };
                if read_head(&bytes) != want {
                    println!(
                        "fuzz_http: input {n}: {:?} parsed to {:?}, want {want:?}",
                        bytes.escape_ascii().to_string(),
                        read_head(&bytes)
                    );
                    failed += 1;
                }
                bytes
            }
            _ => {
                let (bytes, ..) = request(&mut r);
                mutate(&mut r, bytes)
            }
        };
        match read_head(&bytes) {
            Head::Request { .. } => requests += 1,
            Head::Bad => bad += 1,
            Head::Incomplete => {}
        }
        if let Err(why) = check(&bytes) {
            println!(
                "fuzz_http: input {n} ({:?}): {why}",
                bytes.escape_ascii().to_string()
            );
            failed += 1;
        }
        if failed >= 10 {
            break;
        }
    }
    println!(
        "fuzz_http: {inputs} inputs (seed {seed}) in {:.1} s: {requests} requests, {bad} refused, {} incomplete",
        started.elapsed().as_secs_f64(),
        inputs - requests - bad
    );
    println!("{} passed, {failed} failed", u64::from(failed == 0));
    if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
