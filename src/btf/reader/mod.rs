//! A pure-Rust reader of the raw BTF format (`include/uapi/linux/btf.h`), as found in
//! `/sys/kernel/btf/vmlinux`.
//!
//! Loading only validates the layout (header, sections, every type record and its trailing
//! data) and records where each type starts, so it is cheap even for the ~150k types of a
//! vmlinux; the function-name index is built on first use. All later reads are bounds-checked
//! and cycle-safe, so a malformed file can make answers wrong but never panics or loops.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};

use super::{FEATURES, Features, Field, FuncSig, KType, KernelTypes, Param, TypeId};

/// The functions the kernel generates for each tracepoint event class, with the
/// tracepoint's arguments by name after a `void *__data` (`DECLARE_EVENT_CLASS`).
const CLASS_FUNCS: [&str; 3] = ["__bpf_trace_", "trace_event_raw_event_", "perf_trace_"];

/// Where the running kernel exposes its own BTF.
pub const VMLINUX_PATH: &str = "/sys/kernel/btf/vmlinux";

const BTF_MAGIC: u16 = 0xeb9f;
const BTF_VERSION: u8 = 1;
/// Size of `struct btf_header` as of version 1; `hdr_len` may be larger.
const HEADER_LEN: usize = 24;
/// Size of `struct btf_type`.
const TYPE_LEN: usize = 12;

const KIND_INT: u32 = 1;
const KIND_PTR: u32 = 2;
const KIND_ARRAY: u32 = 3;
const KIND_STRUCT: u32 = 4;
const KIND_UNION: u32 = 5;
const KIND_ENUM: u32 = 6;
const KIND_FWD: u32 = 7;
const KIND_TYPEDEF: u32 = 8;
const KIND_VOLATILE: u32 = 9;
const KIND_CONST: u32 = 10;
const KIND_RESTRICT: u32 = 11;
const KIND_FUNC: u32 = 12;
const KIND_FUNC_PROTO: u32 = 13;
const KIND_VAR: u32 = 14;
const KIND_DATASEC: u32 = 15;
const KIND_FLOAT: u32 = 16;
const KIND_DECL_TAG: u32 = 17;
const KIND_TYPE_TAG: u32 = 18;
const KIND_ENUM64: u32 = 19;

const INT_SIGNED: u32 = 1 << 0;
const INT_CHAR: u32 = 1 << 1;
const INT_BOOL: u32 = 1 << 2;

/// How many typedefs/qualifiers/nested declarators we follow before giving up: real chains
/// are a handful long, so hitting this means a cycle in malformed BTF.
const MAX_CHAIN: usize = 64;
/// How deep `type_name` and the anonymous-member search recurse.
const MAX_DEPTH: u32 = 32;
/// How many types one `type_name` call may visit, and how many members one `field` or
/// `field_names` call may look at: keeps malformed BTF (say, a function prototype whose
/// parameters point back at it) from blowing up exponentially.
const NAME_BUDGET: u32 = 4096;
const MEMBER_BUDGET: u32 = 1 << 16;
/// A kernel's BTF is a few MiB (7.2's: 6 MiB); anything far bigger is not one.
pub const MAX_BTF_BYTES: u64 = 256 << 20;

#[derive(Debug, thiserror::Error)]
pub enum BtfError {
    #[error("cannot read {}: {error}", path.display())]
    Read {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("{} is not a regular file", path.display())]
    NotAFile { path: PathBuf },
    #[error("{} is {size} bytes, more than any kernel's BTF ({MAX_BTF_BYTES} at most)", path.display())]
    TooLarge { path: PathBuf, size: u64 },
    #[error("malformed BTF{}: {what}", in_path(path))]
    Malformed { path: Option<PathBuf>, what: String },
    #[error(
        "BTF{} is big-endian; only little-endian BTF is supported",
        in_path(path)
    )]
    BigEndian { path: Option<PathBuf> },
}

fn in_path(path: &Option<PathBuf>) -> String {
    match path {
        Some(p) => format!(" in {}", p.display()),
        None => String::new(),
    }
}

impl BtfError {
    fn with_path(self, p: &Path) -> BtfError {
        match self {
            BtfError::Malformed { what, .. } => BtfError::Malformed {
                path: Some(p.to_path_buf()),
                what,
            },
            BtfError::BigEndian { .. } => BtfError::BigEndian {
                path: Some(p.to_path_buf()),
            },
            e => e,
        }
    }
}

fn malformed(what: impl Into<String>) -> BtfError {
    BtfError::Malformed {
        path: None,
        what: what.into(),
    }
}

/// Kernel types read from a BTF blob.
pub struct Btf {
    data: Blob,
    /// Offset in `data` of each type's `struct btf_type`, indexed by type id. Entry 0 (`void`)
    /// is unused. Every record and its trailing data were checked to lie in the type section.
    types: Vec<u32>,
    /// The string section, `data[str_start..str_end]`; non-empty and NUL-terminated.
    str_start: usize,
    str_end: usize,
    /// Hash of a FUNC name -> the first FUNC id whose name has that hash (names are not
    /// stored: `function_id` checks the name of the id found). Built only once enough
    /// lookups were made that it pays off: a start-up needing a few functions does without.
    funcs: OnceLock<FuncIndex>,
    /// Lookups made by scanning so far.
    scans: AtomicU32,
    /// The kernel's features and whether it has multi-attach, found on first use (one
    /// pass over the enums).
    features: OnceLock<(Features, bool)>,
    /// Where the BTF came from, for messages; None for bytes in memory.
    origin: Option<PathBuf>,
}

type FuncIndex = HashMap<u64, TypeId, BuildHasherDefault<PreHashed>>;

/// Lookups done by scanning before building the function index. A scan costs about a
/// quarter of building the index (both well under a few ms for a full vmlinux).
const SCAN_LOOKUPS: u32 = 4;

/// Hash of a name for the function index (rustc's FxHash; the index keeps the hash, not
/// the name, and `function_id` checks the name it finds).
fn name_hash(name: &[u8]) -> u64 {
    let mut h = rustc_hash::FxHasher::default();
    h.write(name);
    h.finish()
}

/// Every offset at which `needle` occurs in `hay` (none for an empty needle). Occurrences
/// do not overlap: the needles here are a name and its NUL.
fn find_all(hay: &[u8], needle: &[u8]) -> Vec<usize> {
    if needle.is_empty() {
        return Vec::new();
    }
    memchr::memmem::find_iter(hay, needle).collect()
}

/// A `Hasher` for keys that already are good hashes.
#[derive(Default)]
struct PreHashed(u64);

impl Hasher for PreHashed {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8) | u64::from(b);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

impl std::fmt::Debug for Btf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Btf")
            .field("bytes", &self.data.len())
            .field("types", &self.type_count())
            .finish()
    }
}

/// One `struct btf_type`, decoded.
#[derive(Clone, Copy, Debug)]
struct Rec {
    /// Offset of the record in `data`; trailing data starts at `off + TYPE_LEN`.
    off: usize,
    name_off: u32,
    kind: u32,
    vlen: usize,
    kflag: bool,
    /// `size` or `type`, depending on the kind.
    size_type: u32,
}

fn trailing_len(kind: u32, vlen: usize) -> Option<usize> {
    Some(match kind {
        KIND_INT => 4,
        KIND_PTR | KIND_FWD | KIND_TYPEDEF | KIND_VOLATILE | KIND_CONST | KIND_RESTRICT
        | KIND_FUNC | KIND_FLOAT | KIND_TYPE_TAG => 0,
        KIND_ARRAY => 12,
        KIND_STRUCT | KIND_UNION => 12 * vlen,
        KIND_ENUM => 8 * vlen,
        KIND_FUNC_PROTO => 8 * vlen,
        KIND_VAR => 4,
        KIND_DATASEC => 12 * vlen,
        KIND_DECL_TAG => 4,
        KIND_ENUM64 => 12 * vlen,
        _ => return None,
    })
}

/// The BTF bytes: read into memory, or mapped read-only from the file.
enum Blob {
    Owned(Vec<u8>),
    Mapped(crate::sys::Mapping),
}

impl std::ops::Deref for Blob {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Blob::Owned(v) => v,
            Blob::Mapped(m) => m.bytes(),
        }
    }
}

fn read_u32(data: &[u8], off: usize) -> Option<u32> {
    let bytes = data.get(off..off.checked_add(4)?)?;
    Some(u32::from_le_bytes(<[u8; 4]>::try_from(bytes).ok()?))
}

impl Btf {
    /// The running kernel's BTF, from `/sys/kernel/btf/vmlinux`.
    pub fn vmlinux() -> Result<Btf, BtfError> {
        Btf::from_file(VMLINUX_PATH)
    }

    /// A raw BTF file (e.g. a copy of some kernel's `/sys/kernel/btf/vmlinux`).
    pub fn from_file(path: impl AsRef<Path>) -> Result<Btf, BtfError> {
        let path = path.as_ref();
        let data = read_blob(path)?;
        // The running kernel checked its own BTF's names when it booted (it refuses a
        // name that is not an identifier), and checking 100 000 types again is half of
        // fslat's start-up work in an emulated guest: only other files are checked.
        let kernel_checked = path == Path::new(VMLINUX_PATH);
        let mut btf = Btf::parse(data, kernel_checked).map_err(|e| e.with_path(path))?;
        btf.origin = Some(path.to_path_buf());
        Ok(btf)
    }

    /// The running kernel's features and multi-attach (`has_fsession_multi`) without
    /// parsing its types: each is an enum value's name (`FEATURES`), and a kernel's BTF
    /// names nothing else so, so finding the names in the string section decides what
    /// `features` decides by walking the enums, at a fraction of the cost (a bundle's
    /// start needs nothing else of the kernel's BTF: it holds its checked programs).
    pub fn vmlinux_features() -> Result<(Features, bool), BtfError> {
        let path = Path::new(VMLINUX_PATH);
        let data = read_blob(path)?;
        Btf::features_by_names(&data).map_err(|e| e.with_path(path))
    }

    /// `vmlinux_features` of a raw BTF blob.
    pub fn features_by_names(data: &[u8]) -> Result<(Features, bool), BtfError> {
        let (_, (str_start, str_end)) = sections(data)?;
        let strings = &data[str_start..str_end];
        // Every name is NUL-terminated and the section starts with one: "\0NAME\0" is
        // exactly the name NAME.
        let named = |v: &str| {
            let needle = [b"\0", v.as_bytes(), b"\0"].concat();
            memchr::memmem::find(strings, &needle).is_some()
        };
        Ok(features_and_multi(|_, value| named(value)))
    }
}

/// The features and multi-attach of a kernel, by `has(enum, value)`: whether its BTF has
/// that enum value.
fn features_and_multi(has: impl Fn(&str, &str) -> bool) -> (Features, bool) {
    let multi = has("bpf_attach_type", "BPF_TRACE_FSESSION_MULTI")
        && has("bpf_link_type", "BPF_LINK_TYPE_TRACING_MULTI");
    (Features::from_btf(&has), multi)
}

/// The bytes of the BTF file at `path`.
fn read_blob(path: &Path) -> Result<Blob, BtfError> {
    let read_error = |error| BtfError::Read {
        path: path.to_path_buf(),
        error,
    };
    // sysfs hands out /sys/kernel/btf/vmlinux a page per read(2): 1 400 system calls,
    // which cost tens of milliseconds in an emulated guest. Kernels from 6.16 let it
    // be mapped instead; older ones (and any error) fall back to reading.
    // A FIFO would block and /dev/zero never end: only regular files of a bounded
    // size are read (sysfs's vmlinux is a regular file with its size).
    let meta = std::fs::metadata(path).map_err(read_error)?;
    if !meta.is_file() {
        return Err(BtfError::NotAFile {
            path: path.to_path_buf(),
        });
    }
    if meta.len() > MAX_BTF_BYTES {
        return Err(BtfError::TooLarge {
            path: path.to_path_buf(),
            size: meta.len(),
        });
    }
    let file = std::fs::File::open(path).map_err(read_error)?;
    Ok(match crate::sys::Mapping::new(&file) {
        Some(m) => Blob::Mapped(m),
        None => {
            let mut v = Vec::new();
            std::io::Read::read_to_end(&mut &file, &mut v).map_err(read_error)?;
            Blob::Owned(v)
        }
    })
}

/// A section's start and end offsets in a BTF blob.
type Extent = (usize, usize);

/// The type and string sections of a raw BTF blob, after checking its header.
fn sections(data: &[u8]) -> Result<(Extent, Extent), BtfError> {
    if data.len() < HEADER_LEN {
        return Err(malformed(format!(
            "{} bytes is too short for a BTF header ({HEADER_LEN} bytes)",
            data.len()
        )));
    }
    let magic = u16::from_le_bytes([data[0], data[1]]);
    if magic == BTF_MAGIC.swap_bytes() {
        return Err(BtfError::BigEndian { path: None });
    }
    if magic != BTF_MAGIC {
        return Err(malformed(format!(
            "bad magic {magic:#06x} (expected {BTF_MAGIC:#06x}); not a BTF file"
        )));
    }
    if data[2] != BTF_VERSION {
        return Err(malformed(format!(
            "unsupported BTF version {} (expected {BTF_VERSION})",
            data[2]
        )));
    }
    let word = |i: usize| read_u32(data, 4 + 4 * i).unwrap_or(0) as usize;
    let (hdr_len, type_off, type_len, str_off, str_len) =
        (word(0), word(1), word(2), word(3), word(4));
    if hdr_len < HEADER_LEN || hdr_len > data.len() {
        return Err(malformed(format!(
            "header length {hdr_len} out of range (file is {} bytes)",
            data.len()
        )));
    }
    let section = |what: &str, off: usize, len: usize| {
        let start = hdr_len.checked_add(off);
        let end = start.and_then(|s| s.checked_add(len));
        match (start, end) {
            (Some(s), Some(e)) if e <= data.len() => Ok((s, e)),
            _ => Err(malformed(format!(
                "{what} section (offset {off}, length {len}) extends past the end of the \
                 {}-byte file",
                data.len()
            ))),
        }
    };
    let types = section("type", type_off, type_len)?;
    let (str_start, str_end) = section("string", str_off, str_len)?;
    if str_len == 0 || data[str_start] != 0 || data[str_end - 1] != 0 {
        return Err(malformed(
            "string section must start and end with a NUL byte",
        ));
    }
    Ok((types, (str_start, str_end)))
}

impl Btf {
    /// A raw BTF blob.
    pub fn from_bytes(data: Vec<u8>) -> Result<Btf, BtfError> {
        Btf::parse(Blob::Owned(data), false)
    }

    /// `names_checked`: the kernel already refused names that are not identifiers.
    fn parse(data: Blob, names_checked: bool) -> Result<Btf, BtfError> {
        let ((type_start, type_end), (str_start, str_end)) = sections(&data)?;
        let type_len = type_end - type_start;

        let mut types = Vec::with_capacity(type_len / 20 + 1);
        types.push(0u32); // id 0: void
        let mut pos = type_start;
        while pos < type_end {
            let id = types.len();
            if type_end - pos < TYPE_LEN {
                return Err(malformed(format!(
                    "type {id} at offset {pos} is cut off by the end of the type section"
                )));
            }
            let info = read_u32(&data, pos + 4).unwrap_or(0);
            let kind = (info >> 24) & 0x1f;
            let vlen = (info & 0xffff) as usize;
            let Some(extra) = trailing_len(kind, vlen) else {
                return Err(malformed(format!("type {id} has unknown kind {kind}")));
            };
            let next = pos + TYPE_LEN + extra;
            if next > type_end {
                return Err(malformed(format!(
                    "type {id} (kind {kind}, vlen {vlen}) at offset {pos} extends past the end \
                     of the type section"
                )));
            }
            let Ok(pos32) = u32::try_from(pos) else {
                return Err(malformed("type section beyond 4 GiB"));
            };
            types.push(pos32);
            pos = next;
        }

        let btf = Btf {
            data,
            types,
            str_start,
            str_end,
            funcs: OnceLock::new(),
            scans: AtomicU32::new(0),
            features: OnceLock::new(),
            origin: None,
        };
        if !names_checked {
            btf.check_names()?;
        }
        Ok(btf)
    }

    /// The first struct or union named `name` (forward declarations aside), e.g. for casts.
    pub fn struct_by_name(&self, name: &str) -> Option<TypeId> {
        (1..self.types.len() as TypeId).find(|&id| {
            self.rec(id).is_some_and(|r| {
                matches!(r.kind, KIND_STRUCT | KIND_UNION) && self.name(&r) == name
            })
        })
    }

    /// Number of type ids, including 0 (`void`).
    pub fn type_count(&self) -> usize {
        self.types.len()
    }

    fn u32_at(&self, off: usize) -> u32 {
        read_u32(&self.data, off).unwrap_or(0)
    }

    fn rec(&self, id: TypeId) -> Option<Rec> {
        if id == 0 {
            return None;
        }
        let off = *self.types.get(id as usize)? as usize;
        let info = self.u32_at(off + 4);
        Some(Rec {
            off,
            name_off: self.u32_at(off),
            kind: (info >> 24) & 0x1f,
            vlen: (info & 0xffff) as usize,
            kflag: info >> 31 != 0,
            size_type: self.u32_at(off + 8),
        })
    }

    /// The `i`-th `n`-word entry of a record's trailing data, as words.
    fn entry<const N: usize>(&self, r: &Rec, stride: usize, i: usize) -> [u32; N] {
        let base = r.off + TYPE_LEN + stride * i;
        std::array::from_fn(|k| self.u32_at(base + 4 * k))
    }

    /// The string at `off` in the string section; "?" if `off` is out of range or not UTF-8.
    fn str_at(&self, off: u32) -> &str {
        let start = self.str_start.saturating_add(off as usize);
        if start >= self.str_end {
            return "?";
        }
        let tail = &self.data[start..self.str_end];
        // The section ends with a NUL, so there always is one.
        let len = tail.iter().position(|&b| b == 0).unwrap_or(tail.len());
        std::str::from_utf8(&tail[..len]).unwrap_or("?")
    }

    fn name(&self, r: &Rec) -> &str {
        self.str_at(r.name_off)
    }

    fn func_index(&self) -> &FuncIndex {
        self.funcs.get_or_init(|| {
            let mut funcs = FuncIndex::with_capacity_and_hasher(
                self.types.len() / 2,
                BuildHasherDefault::default(),
            );
            for (id, name) in self.func_ids() {
                funcs.entry(name_hash(name.as_bytes())).or_insert(id);
            }
            funcs
        })
    }

    /// Builds the function-name index now (e.g. before many `function` calls).
    pub fn index_functions(&self) {
        self.func_index();
    }

    /// The BTF id of the first FUNC named `name`: what the kernel wants as the attach
    /// target of a tracing program.
    pub fn function_id(&self, name: &str) -> Option<TypeId> {
        if self.funcs.get().is_none() && self.scans.fetch_add(1, Ordering::Relaxed) < SCAN_LOOKUPS {
            return self.scan_function(name);
        }
        let &id = self.func_index().get(&name_hash(name.as_bytes()))?;
        if self.rec(id).is_some_and(|r| self.name(&r) == name) {
            return Some(id);
        }
        // Two names with the same 64-bit hash: astronomically rare, but stay correct.
        self.scan_function(name)
    }

    /// The first FUNC named `name`, without the index: finds where `name` occurs in the
    /// string section, then the first FUNC whose name is at one of those offsets.
    fn scan_function(&self, name: &str) -> Option<TypeId> {
        let strings = &self.data[self.str_start..self.str_end];
        let mut needle = Vec::with_capacity(name.len() + 1);
        needle.extend_from_slice(name.as_bytes());
        needle.push(0);
        let offsets = find_all(strings, &needle);
        if offsets.is_empty() {
            return None;
        }
        (1..self.types.len() as TypeId).find(|&id| {
            let off = self.types[id as usize] as usize;
            (self.u32_at(off + 4) >> 24) & 0x1f == KIND_FUNC
                && offsets.contains(&(self.u32_at(off) as usize))
        })
    }

    /// Every FUNC, in id order, with its name.
    fn func_ids(&self) -> impl Iterator<Item = (TypeId, &str)> {
        (1..self.types.len() as TypeId).filter_map(|id| {
            let r = self.rec(id)?;
            (r.kind == KIND_FUNC).then(|| (id, self.name(&r)))
        })
    }

    /// The names of a tracepoint's arguments: the `btf_trace_NAME` prototype has none, but
    /// the functions the kernel generates for its event class do (`CLASS_FUNCS`). The class is
    /// `NAME` itself, or among the classes with these argument types the one whose name
    /// shares the longest start with `NAME` (`sched_wakeup` → `sched_wakeup_template`).
    /// A kernel whose BTF has no class functions (5.10) takes them from the kernel
    /// sources' prototypes (`btf::tracepoints`). Empty when none fits (the arguments are
    /// then `argN`).
    fn tracepoint_arg_names(&self, name: &str, types: &[TypeId]) -> Vec<String> {
        let names_if_fits = |func: TypeId| -> Option<Vec<String>> {
            let proto = self.rec(self.rec(func)?.size_type)?;
            if proto.kind != KIND_FUNC_PROTO || proto.vlen != types.len() + 1 {
                return None;
            }
            (1..proto.vlen)
                .map(|i| {
                    let [name_off, ty] = self.entry::<2>(&proto, 8, i);
                    (ty == types[i - 1]).then(|| self.str_at(name_off).to_string())
                })
                .collect()
        };
        for prefix in CLASS_FUNCS {
            if let Some(names) = self
                .function_id(&format!("{prefix}{name}"))
                .and_then(names_if_fits)
            {
                return names;
            }
        }
        let shared = |class: &str| {
            class
                .bytes()
                .zip(name.bytes())
                .take_while(|(a, b)| a == b)
                .count()
        };
        self.func_ids()
            .filter_map(|(id, f)| {
                let class = CLASS_FUNCS.iter().find_map(|p| f.strip_prefix(p))?;
                Some((shared(class), names_if_fits(id)?))
            })
            .max_by_key(|(n, _)| *n)
            .map(|(_, names)| names)
            .or_else(|| super::tracepoints::arg_names(name, types.len()))
            .unwrap_or_default()
    }

    /// Follows typedefs, qualifiers and type tags from `id`: the id reached
    /// (0 for `void`), or `None` for a dangling id or a cycle.
    fn strip(&self, mut id: TypeId) -> Option<TypeId> {
        for _ in 0..MAX_CHAIN {
            if id == 0 {
                return Some(0);
            }
            let r = self.rec(id)?;
            match r.kind {
                KIND_TYPEDEF | KIND_CONST | KIND_VOLATILE | KIND_RESTRICT | KIND_TYPE_TAG => {
                    id = r.size_type
                }
                _ => return Some(id),
            }
        }
        None
    }

    /// Whether a `user` type tag appears among the qualifiers, type tags and typedefs from `id`.
    fn user_tagged(&self, mut id: TypeId) -> bool {
        for _ in 0..MAX_CHAIN {
            let Some(r) = self.rec(id) else { return false };
            match r.kind {
                KIND_TYPE_TAG if self.name(&r) == "user" => return true,
                KIND_TYPE_TAG | KIND_CONST | KIND_VOLATILE | KIND_RESTRICT | KIND_TYPEDEF => {
                    id = r.size_type
                }
                _ => return false,
            }
        }
        false
    }

    /// `ty` resolved to a STRUCT or UNION record.
    fn composite(&self, ty: TypeId) -> Option<Rec> {
        let r = self.rec(self.strip(ty)?)?;
        matches!(r.kind, KIND_STRUCT | KIND_UNION).then_some(r)
    }

    fn is_bitfield(&self, parent: &Rec, member_type: TypeId, offset: u32) -> bool {
        if parent.kflag {
            return offset >> 24 != 0;
        }
        // Without kind_flag, old encoders described bitfields with odd-sized INTs.
        match self.strip(member_type).and_then(|id| self.rec(id)) {
            Some(r) if r.kind == KIND_INT => {
                let enc = self.u32_at(r.off + TYPE_LEN);
                let bits = enc & 0xff;
                let bit_off = (enc >> 16) & 0xff;
                bit_off != 0 || bits != r.size_type.saturating_mul(8)
            }
            _ => false,
        }
    }

    fn find_member(&self, parent: &Rec, name: &str, depth: u32, budget: &mut u32) -> Option<Field> {
        if depth > MAX_DEPTH || *budget < parent.vlen as u32 {
            return None;
        }
        *budget -= parent.vlen as u32;
        for i in 0..parent.vlen {
            let [name_off, ty, offset] = self.entry::<3>(parent, 12, i);
            let mname = self.str_at(name_off);
            if mname == name {
                return Some(Field {
                    name: name.to_string(),
                    ty,
                    bitfield: self.is_bitfield(parent, ty, offset),
                });
            }
            if mname.is_empty()
                && let Some(inner) = self.composite(ty)
                && let Some(f) = self.find_member(&inner, name, depth + 1, budget)
            {
                return Some(f);
            }
        }
        None
    }

    fn member_names(&self, parent: &Rec, out: &mut Vec<String>, depth: u32, budget: &mut u32) {
        if depth > MAX_DEPTH || *budget < parent.vlen as u32 {
            return;
        }
        *budget -= parent.vlen as u32;
        for i in 0..parent.vlen {
            let [name_off, ty, _] = self.entry::<3>(parent, 12, i);
            let mname = self.str_at(name_off);
            if !mname.is_empty() {
                out.push(mname.to_string());
            } else if let Some(inner) = self.composite(ty) {
                self.member_names(&inner, out, depth + 1, budget);
            }
        }
    }

    fn strip_tags(&self, mut id: TypeId) -> Option<Rec> {
        for _ in 0..MAX_CHAIN {
            let r = self.rec(id)?;
            if r.kind != KIND_TYPE_TAG {
                return Some(r);
            }
            id = r.size_type;
        }
        None
    }

    /// Every value name of the enums named in `enums`, in one pass over the types.
    fn enum_values(&self, enums: &[&str]) -> Vec<(String, String)> {
        let mut out = Vec::new();
        for id in 1..self.types.len() as TypeId {
            let Some(r) = self.rec(id) else { continue };
            let stride = match r.kind {
                KIND_ENUM => 8,
                KIND_ENUM64 => 12,
                _ => continue,
            };
            let name = self.name(&r);
            if !enums.contains(&name) {
                continue;
            }
            for i in 0..r.vlen {
                let [name_off] = self.entry::<1>(&r, stride, i);
                out.push((name.to_string(), self.str_at(name_off).to_string()));
            }
        }
        out
    }

    /// `features` and `has_fsession_multi` from one pass over the enums (a bundle's start
    /// asks both before anything else).
    fn features_and_multi(&self) -> (Features, bool) {
        *self.features.get_or_init(|| {
            let mut enums: Vec<&str> = FEATURES.iter().map(|i| i.btf_enum).collect();
            enums.push("bpf_link_type");
            let values = self.enum_values(&enums);
            features_and_multi(|e, v| values.iter().any(|(en, va)| en == e && va == v))
        })
    }

    #[cfg(test)]
    fn enum_has(&self, enum_name: &str, value_name: &str) -> bool {
        (1..self.types.len() as TypeId).any(|id| {
            let Some(r) = self.rec(id) else { return false };
            let stride = match r.kind {
                KIND_ENUM => 8,
                KIND_ENUM64 => 12,
                _ => return false,
            };
            self.name(&r) == enum_name
                && (0..r.vlen).any(|i| {
                    let [name_off] = self.entry::<1>(&r, stride, i);
                    self.str_at(name_off) == value_name
                })
        })
    }
}

impl KernelTypes for Btf {
    fn function(&self, name: &str) -> Option<FuncSig> {
        let id = self.function_id(name)?;
        let func = self.rec(id)?;
        let proto = self.rec(func.size_type)?;
        if proto.kind != KIND_FUNC_PROTO {
            return None;
        }
        let mut params = Vec::with_capacity(proto.vlen);
        for i in 0..proto.vlen {
            let [name_off, ty] = self.entry::<2>(&proto, 8, i);
            let pname = self.str_at(name_off);
            if ty == 0 && pname.is_empty() && i + 1 == proto.vlen {
                break; // variadic `...`
            }
            params.push(Param {
                name: pname.to_string(),
                ty,
            });
        }
        Some(FuncSig {
            name: name.to_string(),
            params,
            ret: proto.size_type,
        })
    }

    fn tracepoint(&self, name: &str) -> Option<FuncSig> {
        let typedef = format!("btf_trace_{name}");
        let strings = &self.data[self.str_start..self.str_end];
        let mut needle = Vec::with_capacity(typedef.len() + 1);
        needle.extend_from_slice(typedef.as_bytes());
        needle.push(0);
        let offsets = find_all(strings, &needle);
        let id = (1..self.types.len() as TypeId).find(|&id| {
            self.rec(id)
                .is_some_and(|r| r.kind == KIND_TYPEDEF && offsets.contains(&(r.name_off as usize)))
        })?;
        let ptr = self.rec(self.rec(id)?.size_type)?;
        if ptr.kind != KIND_PTR {
            return None;
        }
        let proto = self.rec(ptr.size_type)?;
        if proto.kind != KIND_FUNC_PROTO || proto.vlen == 0 {
            return None;
        }
        let types: Vec<TypeId> = (1..proto.vlen)
            .map(|i| self.entry::<2>(&proto, 8, i)[1])
            .collect();
        let names = self.tracepoint_arg_names(name, &types);
        let params = types
            .iter()
            .enumerate()
            .map(|(i, &ty)| Param {
                name: names.get(i).cloned().unwrap_or_default(),
                ty,
            })
            .collect();
        Some(FuncSig {
            name: name.to_string(),
            params,
            ret: 0,
        })
    }

    fn function_names(&self) -> Vec<String> {
        let mut names: Vec<&str> = self.func_ids().map(|(_, n)| n).collect();
        names.sort_unstable();
        names.dedup();
        names.into_iter().map(str::to_string).collect()
    }

    fn resolve(&self, ty: TypeId) -> KType {
        let r = match self.strip(ty) {
            Some(0) => return KType::Void,
            Some(id) => match self.rec(id) {
                Some(r) => r,
                None => return KType::Other,
            },
            None => return KType::Other,
        };
        match r.kind {
            KIND_INT => {
                let enc = (self.u32_at(r.off + TYPE_LEN) >> 24) & 0x0f;
                let name = self.name(&r);
                let size = r.size_type;
                KType::Int {
                    size,
                    signed: enc & INT_SIGNED != 0,
                    char_like: enc & INT_CHAR != 0
                        || (size == 1 && matches!(name, "char" | "signed char" | "unsigned char")),
                    bool_like: enc & INT_BOOL != 0 || name == "_Bool",
                }
            }
            KIND_ENUM | KIND_ENUM64 => KType::Enum {
                size: r.size_type,
                signed: r.kflag,
            },
            KIND_PTR => KType::Ptr {
                pointee: r.size_type,
                user: self.user_tagged(r.size_type),
            },
            KIND_STRUCT | KIND_UNION => KType::Struct {
                name: self.name(&r).to_string(),
                size: r.size_type,
                union: r.kind == KIND_UNION,
            },
            KIND_FWD => KType::Struct {
                name: self.name(&r).to_string(),
                size: 0,
                union: r.kflag,
            },
            KIND_ARRAY => {
                let [elem, _, len] = self.entry::<3>(&r, 12, 0);
                KType::Array { elem, len }
            }
            KIND_FUNC_PROTO => KType::FuncProto,
            _ => KType::Other,
        }
    }

    fn type_name(&self, ty: TypeId) -> String {
        let mut budget = NAME_BUDGET;
        self.decl(ty, String::new(), 0, &mut budget)
    }

    fn field(&self, ty: TypeId, name: &str) -> Option<Field> {
        if name.is_empty() {
            return None;
        }
        let r = self.composite(ty)?;
        let mut budget = MEMBER_BUDGET;
        self.find_member(&r, name, 0, &mut budget)
    }

    fn field_names(&self, ty: TypeId) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(r) = self.composite(ty) {
            let mut budget = MEMBER_BUDGET;
            self.member_names(&r, &mut out, 0, &mut budget);
        }
        out
    }

    fn has_fsession(&self) -> bool {
        self.features().fsession
    }

    fn has_fsession_multi(&self) -> bool {
        self.features_and_multi().1
    }

    fn features(&self) -> Features {
        self.features_and_multi().0
    }

    fn preemption(&self) -> Option<crate::btf::preemption::Preemption> {
        self.origin
            .as_deref()
            .is_some_and(|p| p == Path::new(VMLINUX_PATH))
            .then(crate::btf::preemption::running)
    }

    fn describe(&self) -> String {
        match &self.origin {
            Some(p) if p == Path::new(VMLINUX_PATH) => this_kernel(),
            Some(p) => format!("the kernel described by {}", p.display()),
            None => "this kernel".into(),
        }
    }
}

/// The running kernel, for messages: "this kernel (Linux 6.1.0-57-cloud-amd64)".
pub fn this_kernel() -> String {
    match kernel_release() {
        Some(r) => format!("this kernel (Linux {r})"),
        None => "this kernel".into(),
    }
}

/// The running kernel's release, as `uname -r` prints it.
pub fn kernel_release() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

mod names;
mod spell;
#[cfg(test)]
mod tests;
