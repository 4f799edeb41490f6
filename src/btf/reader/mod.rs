//! A pure-Rust reader of the raw BTF format (`include/uapi/linux/btf.h`), as found in
//! `/sys/kernel/btf/vmlinux`.
//!
//! Loading only validates the layout (header, sections, every type record and its trailing
//! data) and records where each type starts, so it is cheap even for the ~150k types of a
//! vmlinux; the function-name index is built on first use. All later reads are bounds-checked
//! and cycle-safe, so a malformed file can make answers wrong but never panics or loops.
//!
//! One concern a file: `format` (the raw layout: header, kinds, records), `file` (reading
//! or mapping a BTF file), `index` (the function-name index), `features` (what a kernel
//! can do, from its enums), `host` (the running kernel's release, for messages), `names`
//! (the names fslat may write into C), `spell` (types as C declarations); this file
//! parses and answers `KernelTypes`.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};

use super::{FEATURES, FUNC, Features, Field, FuncSig, KType, KernelTypes, Param, TypeId};

/// The functions the kernel generates for each tracepoint event class, with the
/// tracepoint's arguments by name after a `void *__data` (`DECLARE_EVENT_CLASS`).
const CLASS_FUNCS: [&str; 3] = ["__bpf_trace_", "trace_event_raw_event_", "perf_trace_"];

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
    /// The running kernel's types with its loaded modules' (`modules`), read the first
    /// time a name or type id is not vmlinux's.
    modules: OnceLock<Option<Box<Btf>>>,
    /// In such a merged view: the first type id of each module, with its name, in order.
    module_starts: Vec<(TypeId, String)>,
}

impl std::fmt::Debug for Btf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Btf")
            .field("bytes", &self.data.len())
            .field("types", &self.type_count())
            .finish()
    }
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
            modules: OnceLock::new(),
            module_starts: Vec::new(),
        };
        if !names_checked {
            btf.check_names()?;
        }
        Ok(btf)
    }

    /// The first struct or union named `name` (forward declarations aside), e.g. for casts.
    /// Loaded modules' structs come after vmlinux's.
    pub fn struct_by_name(&self, name: &str) -> Option<TypeId> {
        (1..self.types.len() as TypeId)
            .find(|&id| {
                self.rec(id).is_some_and(|r| {
                    matches!(r.kind, KIND_STRUCT | KIND_UNION) && self.name(&r) == name
                })
            })
            .or_else(|| self.loaded_modules()?.struct_by_name(name))
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
}

impl KernelTypes for Btf {
    fn function(&self, name: &str) -> Option<FuncSig> {
        let Some(id) = self.function_id(name) else {
            return self.loaded_modules()?.function(name);
        };
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
        if let Some(all) = self.loaded_modules() {
            return all.function_names();
        }
        let mut names: Vec<&str> = self.func_ids().map(|(_, n)| n).collect();
        names.sort_unstable();
        names.dedup();
        names.into_iter().map(str::to_string).collect()
    }

    fn tracepoint_names(&self) -> Vec<String> {
        let mut names: Vec<&str> = (1..self.types.len() as TypeId)
            .filter_map(|id| {
                let r = self.rec(id)?;
                let name = (r.kind == KIND_TYPEDEF).then(|| self.name(&r))?;
                name.strip_prefix("btf_trace_")
            })
            .collect();
        names.sort_unstable();
        names.dedup();
        names.into_iter().map(str::to_string).collect()
    }

    fn tracefs_events(&self) -> Option<Vec<(String, String)>> {
        let running = self.origin.as_deref() == Some(Path::new(VMLINUX_PATH));
        running.then(host::tracefs_events).flatten()
    }

    fn resolve(&self, ty: TypeId) -> KType {
        if let Some(all) = self.beyond(ty) {
            return all.resolve(ty);
        }
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
        if let Some(all) = self.beyond(ty) {
            return all.type_name(ty);
        }
        let mut budget = NAME_BUDGET;
        self.decl(ty, String::new(), 0, &mut budget)
    }

    fn field(&self, ty: TypeId, name: &str) -> Option<Field> {
        if let Some(all) = self.beyond(ty) {
            return all.field(ty, name);
        }
        if name.is_empty() {
            return None;
        }
        let r = self.composite(ty)?;
        let mut budget = MEMBER_BUDGET;
        self.find_member(&r, name, 0, &mut budget)
    }

    fn field_names(&self, ty: TypeId) -> Vec<String> {
        if let Some(all) = self.beyond(ty) {
            return all.field_names(ty);
        }
        let mut out = Vec::new();
        if let Some(r) = self.composite(ty) {
            let mut budget = MEMBER_BUDGET;
            self.member_names(&r, &mut out, 0, &mut budget);
        }
        out
    }

    fn module_of(&self, function: &str) -> Option<String> {
        if self.function_id(function).is_some() && self.module_starts.is_empty() {
            return None;
        }
        let all = if self.module_starts.is_empty() {
            self.loaded_modules()?
        } else {
            self
        };
        all.module_holding(all.function_id(function)?)
            .map(str::to_string)
    }

    fn module(&self, name: &str) -> crate::btf::Module {
        if self.origin.as_deref() != Some(Path::new(VMLINUX_PATH)) {
            return crate::btf::Module::Unknown;
        }
        module_state(name)
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

mod features;
mod file;
mod format;
mod host;
mod index;
mod modules;
mod names;
mod spell;

use file::{Blob, read_blob};
pub use file::{MAX_BTF_BYTES, VMLINUX_PATH};
use format::*;
pub use host::this_kernel;
use index::*;
pub use modules::{BTF_DIR, module_state};
#[cfg(test)]
mod tests;
