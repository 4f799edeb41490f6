//! A bundle: a script compiled once for every kernel fslat may run it on, so that a node
//! with no clang can run it (`fslat build SCRIPT -o FILE`, then `fslat FILE`). It holds,
//! for each kernel profile (a mode and the features it was built for), the checked program
//! and the BPF object, objects shared between profiles whose C is the same.
//!
//! The file, all integers little-endian:
//!
//! ```text
//! "FSLATBND"  u32 format  u32 header length  header (JSON)  objects  CRC-32 of all before
//! ```
//!
//! Nothing in a bundle is trusted before its checks pass, in this order: the magic, the
//! format, the checksum (a truncated or altered file), the fslat version and the
//! architecture it was built for (`tests/fuzz_bundle.rs` feeds `decode` corrupted files).

use crate::btf::Features;
use crate::check::program::Program;
use crate::codegen::Mode;
use serde::{Deserialize, Serialize};

/// The first bytes of every bundle.
pub const MAGIC: &[u8; 8] = b"FSLATBND";
/// The layout of the file and of its header; a change to either bumps it.
pub const FORMAT: u32 = 2;
/// The fslat that built a bundle must be the one that runs it: the checked program's
/// serialized shape and the runtime's contract with the objects are fslat's own.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
/// The checksum finds damage (a truncated or altered copy), not tampering: CRC-32, which
/// a bundle's start computes over the whole file in a fraction of SHA-256's time.
pub const CHECKSUM_LEN: usize = 4;
const FIXED_LEN: usize = MAGIC.len() + 4 + 4;

/// One way to run the script: on a kernel in `mode` with at least `features` (and
/// multi-attach when `multi`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Variant {
    pub mode: Mode,
    pub features: Features,
    pub multi: bool,
    /// The checked program for this profile, or why the script cannot run on it.
    pub program: Result<Program, String>,
    /// Index into the bundle's objects (unused when `program` is an error).
    pub object: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Header {
    fslat: String,
    arch: String,
    /// The words `fslat build` was given for `$1`..: examples that type the arguments a
    /// run gives (and values where the program compiles them in).
    args: Vec<String>,
    /// The script's name, for messages.
    name: String,
    variants: Vec<Variant>,
    /// Each object's length, in the order they follow the header.
    objects: Vec<usize>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Bundle {
    pub name: String,
    pub args: Vec<String>,
    pub variants: Vec<Variant>,
    pub objects: Vec<Vec<u8>>,
}

/// One profile of an opened bundle: a mode and the features it was built for, and its
/// object.
#[derive(Debug, Clone, PartialEq)]
pub struct Profile {
    pub mode: Mode,
    pub features: Features,
    pub multi: bool,
    /// Index into the bundle's objects (unused when the program is an error).
    pub object: usize,
}

/// A bundle read for a run (`Bundle::open`): its profiles, and their checked programs
/// still JSON.
#[derive(Debug, Clone, PartialEq)]
pub struct Opened {
    pub name: String,
    pub args: Vec<String>,
    pub profiles: Vec<Profile>,
    /// Each profile's `Variant::program`, as JSON.
    programs: Vec<String>,
    pub objects: Vec<Vec<u8>>,
}

impl Opened {
    /// The checked program of `profiles[i]`, or why the script cannot run on it.
    pub fn program(&self, i: usize) -> Result<Result<Program, String>, BundleError> {
        let json = self
            .programs
            .get(i)
            .ok_or_else(|| BundleError::Header(format!("no profile {i}")))?;
        serde_json::from_str(json).map_err(|e| BundleError::Header(e.to_string()))
    }

    /// The object of `profiles[i]`.
    pub fn object(&self, i: usize) -> Result<&[u8], BundleError> {
        let p = &self.profiles[i];
        self.objects
            .get(p.object)
            .map(Vec::as_slice)
            .ok_or_else(|| {
                BundleError::Header(format!(
                    "the {} variant names object {}, and there are {}",
                    p.mode.name(),
                    p.object,
                    self.objects.len()
                ))
            })
    }
}

/// Why a file is not a bundle this fslat can run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BundleError {
    #[error("it is not an fslat bundle (bundles are written by `fslat build SCRIPT -o FILE`)")]
    NotABundle,
    #[error(
        "it is a bundle of format {found}, and this fslat reads format {FORMAT}: rebuild it with this fslat (`fslat build SCRIPT -o FILE`)"
    )]
    Format { found: u32 },
    #[error(
        "it is truncated or altered (its checksum does not match): copy it again, or rebuild it with `fslat build SCRIPT -o FILE`"
    )]
    Checksum,
    #[error("its header cannot be read ({0}); rebuild it with `fslat build SCRIPT -o FILE`")]
    Header(String),
    #[error(
        "it was built by fslat {found}, and this is fslat {VERSION}: rebuild it with this fslat, or run it with fslat {found}"
    )]
    Version { found: String },
    #[error(
        "it was built for {found}, and this machine is {}: build it with an fslat for {} (its BPF objects and the layouts the runtime reads are per architecture)",
        std::env::consts::ARCH,
        std::env::consts::ARCH
    )]
    Arch { found: String },
}

impl Bundle {
    /// The file's bytes.
    pub fn encode(&self) -> Vec<u8> {
        let header = Header {
            fslat: VERSION.into(),
            arch: std::env::consts::ARCH.into(),
            args: self.args.clone(),
            name: self.name.clone(),
            variants: self.variants.clone(),
            objects: self.objects.iter().map(Vec::len).collect(),
        };
        let json = serde_json::to_vec(&header).expect("a bundle header serializes");
        seal(&json, &self.objects)
    }

    /// Reads a bundle whole (every profile's program), refusing anything but an intact
    /// one built by this fslat for this architecture.
    pub fn decode(bytes: &[u8]) -> Result<Bundle, BundleError> {
        let opened = Bundle::open(bytes)?;
        let mut variants = Vec::with_capacity(opened.profiles.len());
        for (i, p) in opened.profiles.iter().enumerate() {
            let program = opened.program(i)?;
            if program.is_ok() && p.object >= opened.objects.len() {
                return Err(BundleError::Header(format!(
                    "the {} variant names object {}, and there are {}",
                    p.mode.name(),
                    p.object,
                    opened.objects.len()
                )));
            }
            variants.push(Variant {
                mode: p.mode,
                features: p.features,
                multi: p.multi,
                program,
                object: p.object,
            });
        }
        Ok(Bundle {
            name: opened.name,
            args: opened.args,
            variants,
            objects: opened.objects,
        })
    }

    /// Reads a bundle for a run: its checks pass and its header is read, and each
    /// profile's checked program stays JSON until `Opened::program` reads the one chosen
    /// (a start decodes one program, not every profile's).
    pub fn open(bytes: &[u8]) -> Result<Opened, BundleError> {
        if bytes.len() < MAGIC.len() || &bytes[..MAGIC.len()] != MAGIC {
            return Err(BundleError::NotABundle);
        }
        if bytes.len() < FIXED_LEN + CHECKSUM_LEN {
            return Err(BundleError::Checksum);
        }
        let format = u32_at(bytes, MAGIC.len());
        if format != FORMAT {
            return Err(BundleError::Format { found: format });
        }
        let (body, sum) = bytes.split_at(bytes.len() - CHECKSUM_LEN);
        if crc32fast::hash(body).to_le_bytes() != sum {
            return Err(BundleError::Checksum);
        }
        let header_len = u32_at(bytes, MAGIC.len() + 4) as usize;
        let rest = &body[FIXED_LEN..];
        if header_len > rest.len() {
            return Err(BundleError::Header("the header runs past the end".into()));
        }
        let (json, mut blob) = rest.split_at(header_len);
        #[derive(Deserialize)]
        struct RawVariant<'a> {
            mode: Mode,
            features: Features,
            multi: bool,
            #[serde(borrow)]
            program: &'a serde_json::value::RawValue,
            object: usize,
        }
        #[derive(Deserialize)]
        struct RawHeader<'a> {
            fslat: String,
            arch: String,
            args: Vec<String>,
            name: String,
            #[serde(borrow)]
            variants: Vec<RawVariant<'a>>,
            objects: Vec<usize>,
        }
        // The version and the architecture first: another version's header may not parse.
        #[derive(Deserialize)]
        struct Origin {
            fslat: String,
            arch: String,
        }
        let origin = |header: &[u8]| -> Result<(), BundleError> {
            let origin: Origin =
                serde_json::from_slice(header).map_err(|e| BundleError::Header(e.to_string()))?;
            if origin.fslat != VERSION {
                return Err(BundleError::Version {
                    found: origin.fslat,
                });
            }
            if origin.arch != std::env::consts::ARCH {
                return Err(BundleError::Arch { found: origin.arch });
            }
            Ok(())
        };
        let header: RawHeader = match serde_json::from_slice(json) {
            Ok(h) => h,
            Err(e) => {
                origin(json)?;
                return Err(BundleError::Header(e.to_string()));
            }
        };
        if header.fslat != VERSION || header.arch != std::env::consts::ARCH {
            origin(json)?;
        }
        let mut objects = Vec::with_capacity(header.objects.len().min(64));
        for &len in &header.objects {
            if len > blob.len() {
                return Err(BundleError::Header("an object runs past the end".into()));
            }
            let (object, after) = blob.split_at(len);
            objects.push(object.to_vec());
            blob = after;
        }
        if !blob.is_empty() {
            return Err(BundleError::Header("bytes follow the last object".into()));
        }
        let (profiles, programs) = header
            .variants
            .into_iter()
            .map(|v| {
                let profile = Profile {
                    mode: v.mode,
                    features: v.features,
                    multi: v.multi,
                    object: v.object,
                };
                (profile, v.program.get().to_string())
            })
            .unzip();
        Ok(Opened {
            name: header.name,
            args: header.args,
            profiles,
            programs,
            objects,
        })
    }

    /// Whether `bytes` start like a bundle (the command line's test for `fslat FILE`).
    pub fn is_bundle(start: &[u8]) -> bool {
        start.starts_with(MAGIC)
    }
}

/// The file for a header (its JSON) and `objects`, with its checksum. The fuzz target
/// also seals altered headers with it, to reach past the checksum.
#[doc(hidden)]
pub fn seal(json: &[u8], objects: &[Vec<u8>]) -> Vec<u8> {
    let mut out = Vec::with_capacity(FIXED_LEN + json.len() + CHECKSUM_LEN);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&FORMAT.to_le_bytes());
    out.extend_from_slice(&(json.len() as u32).to_le_bytes());
    out.extend_from_slice(json);
    for o in objects {
        out.extend_from_slice(o);
    }
    let sum = crc32fast::hash(&out);
    out.extend_from_slice(&sum.to_le_bytes());
    out
}

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    let mut b = [0u8; 4];
    b.copy_from_slice(&bytes[at..at + 4]);
    u32::from_le_bytes(b)
}

#[cfg(test)]
mod tests;
