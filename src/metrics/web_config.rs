//! `--web-config FILE`: TLS, client certificates and basic authentication for `--listen`,
//! in the format of Prometheus's exporter-toolkit (`web-config.yml`, which node_exporter
//! and ebpf_exporter read with `--web.config.file`), so one file serves every exporter on
//! a node. Everything is read and checked when fslat starts, before anything is loaded.
//!
//! Taken: `tls_server_config` (`cert_file`/`cert`, `key_file`/`key`,
//! `client_ca_file`/`client_ca`, `client_auth_type`, `min_version`, `max_version`) and
//! `basic_auth_users` (bcrypt hashes). Any other key is refused by name rather than
//! ignored, since each of them tightens access in the exporters that take it.

use rustls::RootCertStore;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ServerConfig, WebPkiClientVerifier};
use serde::Deserialize;
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// The file's content, as exporter-toolkit names it.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    tls_server_config: Option<TlsFile>,
    #[serde(default)]
    basic_auth_users: BTreeMap<String, String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct TlsFile {
    cert: Option<String>,
    key: Option<String>,
    client_ca: Option<String>,
    cert_file: Option<PathBuf>,
    key_file: Option<PathBuf>,
    client_ca_file: Option<PathBuf>,
    client_auth_type: Option<String>,
    min_version: Option<String>,
    max_version: Option<String>,
}

/// A checked web configuration: what the server needs for every connection.
pub struct WebConfig {
    pub tls: Option<Arc<ServerConfig>>,
    /// user → bcrypt hash; empty: no authentication.
    users: BTreeMap<String, String>,
    /// SHA-256 of `user NUL password` for credentials already verified: bcrypt costs
    /// tens of milliseconds by design, and a scraper sends the same ones every time.
    /// Only successes are kept, so the set holds at most one entry per user and password.
    verified: Mutex<HashSet<[u8; 32]>>,
}

impl std::fmt::Debug for WebConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebConfig")
            .field("tls", &self.tls.is_some())
            .field("users", &self.users.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl WebConfig {
    /// Reads and checks `path`; relative file names in it are relative to its directory,
    /// as in exporter-toolkit. The error says what is wrong in a sentence (the caller
    /// names the file).
    pub fn load(path: &Path) -> Result<WebConfig, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read it: {e}"))?;
        let dir = path.parent().unwrap_or(Path::new("."));
        WebConfig::parse(&text, dir)
    }

    pub(super) fn parse(text: &str, dir: &Path) -> Result<WebConfig, String> {
        // An empty file (or one of comments) is YAML's null: no TLS, no users.
        let file: File = if text
            .lines()
            .all(|l| l.trim().is_empty() || l.trim_start().starts_with('#'))
        {
            File::default()
        } else {
            serde_yaml_ng::from_str(text).map_err(|e| e.to_string())?
        };
        for (user, hash) in &file.basic_auth_users {
            if user.contains(':') {
                return Err(format!(
                    "basic_auth_users: the user name {user:?} contains `:`, which basic authentication cannot carry"
                ));
            }
            hash.parse::<bcrypt::HashParts>().map_err(|_| {
                format!(
                    "basic_auth_users: the password of {user:?} is not a bcrypt hash (make one with `htpasswd -nBC 10 \"\" | tr -d ':\\n'`)"
                )
            })?;
        }
        let tls = file
            .tls_server_config
            .map(|t| tls_config(&t, dir))
            .transpose()?;
        Ok(WebConfig {
            tls,
            users: file.basic_auth_users,
            verified: Mutex::new(HashSet::new()),
        })
    }

    /// Whether a request with this `Authorization` header value may read the metrics.
    pub fn authorized(&self, authorization: Option<&[u8]>) -> bool {
        use base64::Engine;
        if self.users.is_empty() {
            return true;
        }
        let credentials = authorization
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| h.split_once(' '))
            .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("basic"))
            .and_then(|(_, b64)| {
                base64::engine::general_purpose::STANDARD
                    .decode(b64.trim())
                    .ok()
            })
            .and_then(|raw| String::from_utf8(raw).ok());
        let Some((user, password)) = credentials.as_deref().and_then(|c| c.split_once(':')) else {
            return false;
        };
        let key: [u8; 32] = Sha256::new()
            .chain_update(user)
            .chain_update([0])
            .chain_update(password)
            .finalize()
            .into();
        let cached = |set: &HashSet<[u8; 32]>| set.contains(&key);
        if self.verified.lock().is_ok_and(|s| cached(&s)) {
            return true;
        }
        // An unknown user costs the same bcrypt as a known one: the time of a refusal
        // does not tell which user names exist.
        let (hash, known) = match self.users.get(user) {
            Some(h) => (h, true),
            None => match self.users.values().next() {
                Some(h) => (h, false),
                None => return false,
            },
        };
        let ok = bcrypt::verify(password, hash).unwrap_or(false) && known;
        if ok && let Ok(mut set) = self.verified.lock() {
            set.insert(key);
        }
        ok
    }
}

/// exporter-toolkit's `client_auth_type` values (Go's `tls.ClientAuthType`).
enum ClientAuth {
    None,
    VerifyIfGiven,
    RequireAndVerify,
}

fn tls_config(t: &TlsFile, dir: &Path) -> Result<Arc<ServerConfig>, String> {
    let pem = |inline: &Option<String>, file: &Option<PathBuf>, what: &str| match (inline, file) {
        (Some(_), Some(_)) => Err(format!(
            "tls_server_config: give {what} or {what}_file, not both"
        )),
        (Some(text), None) => Ok(Some((text.as_bytes().to_vec(), what.to_string()))),
        (None, Some(f)) => {
            let f = dir.join(f);
            std::fs::read(&f)
                .map(|b| Some((b, f.display().to_string())))
                .map_err(|e| format!("tls_server_config: cannot read {}: {e}", f.display()))
        }
        (None, None) => Ok(None),
    };
    let (Some((cert_pem, cert_name)), Some((key_pem, key_name))) = (
        pem(&t.cert, &t.cert_file, "cert")?,
        pem(&t.key, &t.key_file, "key")?,
    ) else {
        return Err("tls_server_config needs cert_file and key_file (or cert and key)".to_string());
    };
    let certs = CertificateDer::pem_slice_iter(&cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("{cert_name}: not a PEM certificate ({e})"))?;
    if certs.is_empty() {
        return Err(format!("{cert_name}: no PEM certificate in it"));
    }
    let key = PrivateKeyDer::from_pem_slice(&key_pem)
        .map_err(|e| format!("{key_name}: not a PEM private key ({e})"))?;

    let auth = match t.client_auth_type.as_deref().unwrap_or("NoClientCert") {
        "NoClientCert" => ClientAuth::None,
        "VerifyClientCertIfGiven" => ClientAuth::VerifyIfGiven,
        "RequireAndVerifyClientCert" => ClientAuth::RequireAndVerify,
        other @ ("RequestClientCert" | "RequireAnyClientCert") => {
            return Err(format!(
                "tls_server_config: client_auth_type {other} accepts certificates nobody verified; fslat takes VerifyClientCertIfGiven or RequireAndVerifyClientCert (with client_ca_file)"
            ));
        }
        other => {
            return Err(format!(
                "tls_server_config: client_auth_type {other:?} is not one of NoClientCert, VerifyClientCertIfGiven, RequireAndVerifyClientCert"
            ));
        }
    };
    let ca = pem(&t.client_ca, &t.client_ca_file, "client_ca")?;
    let versions = versions(t.min_version.as_deref(), t.max_version.as_deref())?;
    let provider = super::crypto_provider();
    let builder = ServerConfig::builder_with_provider(Arc::clone(&provider))
        .with_protocol_versions(&versions)
        .map_err(|e| format!("tls_server_config: {e}"))?;
    let builder = match (auth, ca) {
        (ClientAuth::None, None) => builder.with_no_client_auth(),
        (ClientAuth::None, Some(_)) => {
            return Err("tls_server_config: client_ca_file is given without a client_auth_type (RequireAndVerifyClientCert or VerifyClientCertIfGiven)".to_string());
        }
        (_, None) => {
            return Err(
                "tls_server_config: verifying client certificates needs client_ca_file".to_string(),
            );
        }
        (auth, Some((ca_pem, ca_name))) => {
            let mut roots = RootCertStore::empty();
            for c in CertificateDer::pem_slice_iter(&ca_pem) {
                let c = c.map_err(|e| format!("{ca_name}: not a PEM certificate ({e})"))?;
                roots
                    .add(c)
                    .map_err(|e| format!("{ca_name}: not a usable CA certificate ({e})"))?;
            }
            if roots.is_empty() {
                return Err(format!("{ca_name}: no PEM certificate in it"));
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
            let verifier = match auth {
                ClientAuth::VerifyIfGiven => verifier.allow_unauthenticated(),
                _ => verifier,
            };
            builder
                .with_client_cert_verifier(verifier.build().map_err(|e| format!("{ca_name}: {e}"))?)
        }
    };
    let config = builder
        .with_single_cert(certs, key)
        .map_err(|e| format!("{cert_name} and {key_name}: {e}"))?;
    Ok(Arc::new(config))
}

fn versions(
    min: Option<&str>,
    max: Option<&str>,
) -> Result<Vec<&'static rustls::SupportedProtocolVersion>, String> {
    let rank = |v: &str, which: &str| match v {
        "TLS12" => Ok(0),
        "TLS13" => Ok(1),
        "TLS10" | "TLS11" => Err(format!(
            "tls_server_config: {which} {v}: fslat speaks TLS12 and TLS13 only"
        )),
        _ => Err(format!(
            "tls_server_config: {which} {v:?} is not TLS12 or TLS13"
        )),
    };
    let lo = min.map_or(Ok(0), |v| rank(v, "min_version"))?;
    let hi = max.map_or(Ok(1), |v| rank(v, "max_version"))?;
    if lo > hi {
        return Err("tls_server_config: min_version is above max_version".to_string());
    }
    Ok([&rustls::version::TLS12, &rustls::version::TLS13][lo..=hi].to_vec())
}
