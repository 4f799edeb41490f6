//! Kernel modules' types. Each loaded module's BTF (`/sys/kernel/btf/MODULE`) is split
//! BTF on top of vmlinux's: its type ids go on from vmlinux's last, its string offsets
//! from the end of vmlinux's strings, and it refers to vmlinux's types by their ids.
//! `with_modules` lays vmlinux's types and every module's one after another in one id
//! space (each module past the first renumbered), so every `KernelTypes` answer reads
//! them as one kernel; vmlinux's ids stay what they are.

use super::*;

/// Where the running kernel lists its own BTF and each loaded module's.
pub const BTF_DIR: &str = "/sys/kernel/btf";

impl Btf {
    /// vmlinux's types (`self`) followed by those of each `(module, split BTF)`.
    pub fn with_modules(&self, modules: &[(String, Vec<u8>)]) -> Result<Btf, BtfError> {
        let ((type_start, type_end), (str_start, str_end)) = sections(&self.data)?;
        let mut types = self.data[type_start..type_end].to_vec();
        let mut strings = self.data[str_start..str_end].to_vec();
        let base_types = self.types.len() as TypeId;
        let base_strings = (str_end - str_start) as u32;
        let mut next = base_types;
        let mut starts = Vec::new();
        for (name, data) in modules {
            let shift = Shift {
                base_types,
                types: next - base_types,
                base_strings,
                strings: strings.len() as u32 - base_strings,
            };
            let count = append_split(&mut types, &mut strings, data, &shift)?;
            if count > 0 {
                starts.push((next, name.clone()));
            }
            next += count;
        }
        let mut merged = Vec::with_capacity(HEADER_LEN + types.len() + strings.len());
        let words = header(types.len(), strings.len());
        for w in words {
            merged.extend_from_slice(&w.to_le_bytes());
        }
        merged.extend_from_slice(&types);
        merged.extend_from_slice(&strings);
        let mut btf = Btf::parse(Blob::Owned(merged), true)?;
        btf.module_starts = starts;
        Ok(btf)
    }

    /// The module whose types hold `id` (`None`: vmlinux's).
    pub(super) fn module_holding(&self, id: TypeId) -> Option<&str> {
        let i = self
            .module_starts
            .partition_point(|(start, _)| *start <= id);
        i.checked_sub(1).map(|i| self.module_starts[i].1.as_str())
    }

    /// The running kernel's types with its loaded modules' after them, read on first use;
    /// `None` for another kernel's BTF file, or when no module has BTF.
    pub(super) fn loaded_modules(&self) -> Option<&Btf> {
        self.modules
            .get_or_init(|| {
                if self.origin.as_deref() != Some(Path::new(VMLINUX_PATH)) {
                    return None;
                }
                let modules = read_modules(Path::new(BTF_DIR));
                if modules.is_empty() {
                    return None;
                }
                self.with_modules(&modules).ok().map(Box::new)
            })
            .as_deref()
    }

    /// The merged view for a type id past vmlinux's.
    pub(super) fn beyond(&self, ty: TypeId) -> Option<&Btf> {
        if (ty as usize) < self.types.len() {
            return None;
        }
        self.loaded_modules()
    }
}

/// How one module's ids and string offsets move in the merged view.
struct Shift {
    base_types: TypeId,
    types: TypeId,
    base_strings: u32,
    strings: u32,
}

impl Shift {
    fn ty(&self, t: u32) -> u32 {
        if t >= self.base_types {
            t + self.types
        } else {
            t
        }
    }
    fn string(&self, s: u32) -> u32 {
        if s >= self.base_strings {
            s + self.strings
        } else {
            s
        }
    }
}

/// Appends the split BTF `data` to `types` and `strings`, renumbered by `shift`: the
/// number of types it held.
/// A BTF header's words (magic and version, its length, flags 0) for `types` bytes of
/// types followed by `strings` bytes of strings.
fn header(types: usize, strings: usize) -> [u32; 6] {
    [
        u32::from(BTF_MAGIC) | u32::from(BTF_VERSION) << 16,
        HEADER_LEN as u32,
        0,
        types as u32,
        types as u32,
        strings as u32,
    ]
}

fn append_split(
    types: &mut Vec<u8>,
    strings: &mut Vec<u8>,
    data: &[u8],
    shift: &Shift,
) -> Result<TypeId, BtfError> {
    let ((type_start, type_end), (str_start, str_end)) = sections_of(data, true)?;
    let mut pos = type_start;
    let mut count = 0;
    while pos < type_end {
        let word = |i: usize| read_u32(data, pos + 4 * i).unwrap_or(0);
        let info = word(1);
        let (kind, vlen) = ((info >> 24) & 0x1f, (info & 0xffff) as usize);
        let extra = trailing_len(kind, vlen)
            .ok_or_else(|| malformed(format!("module type of unknown kind {kind}")))?;
        let end = pos + TYPE_LEN + extra;
        if end > type_end {
            return Err(malformed("a module's type extends past its type section"));
        }
        let mut rec: Vec<u32> = (0..(end - pos) / 4).map(word).collect();
        renumber(&mut rec, kind, shift);
        for w in rec {
            types.extend_from_slice(&w.to_le_bytes());
        }
        pos = end;
        count += 1;
    }
    strings.extend_from_slice(&data[str_start..str_end]);
    Ok(count)
}

/// Moves the type ids and string offsets of one record (its words, header first).
fn renumber(rec: &mut [u32], kind: u32, shift: &Shift) {
    rec[0] = shift.string(rec[0]);
    if matches!(
        kind,
        KIND_PTR
            | KIND_TYPEDEF
            | KIND_VOLATILE
            | KIND_CONST
            | KIND_RESTRICT
            | KIND_FUNC
            | KIND_FUNC_PROTO
            | KIND_VAR
            | KIND_TYPE_TAG
            | KIND_DECL_TAG
    ) {
        rec[2] = shift.ty(rec[2]);
    }
    let tail = &mut rec[TYPE_LEN / 4..];
    // (words an entry, which hold a name, which a type)
    let (stride, name, ty): (usize, Option<usize>, &[usize]) = match kind {
        KIND_ARRAY => (3, None, &[0, 1]),
        KIND_STRUCT | KIND_UNION => (3, Some(0), &[1]),
        KIND_ENUM | KIND_FUNC_PROTO => (2, Some(0), if kind == KIND_ENUM { &[] } else { &[1] }),
        KIND_ENUM64 => (3, Some(0), &[]),
        KIND_DATASEC => (3, None, &[0]),
        _ => return,
    };
    for entry in tail.chunks_mut(stride) {
        if let Some(n) = name {
            entry[n] = shift.string(entry[n]);
        }
        for &t in ty {
            entry[t] = shift.ty(entry[t]);
        }
    }
}

/// Every loaded module's name and BTF in `dir`, by name; a module that cannot be read is
/// left out (it then has no functions, which the checker reports by name).
fn read_modules(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut modules: Vec<(String, Vec<u8>)> = entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            if name == "vmlinux" {
                return None;
            }
            let data = std::fs::read(e.path()).ok()?;
            Some((name, data))
        })
        .collect();
    modules.sort();
    modules
}

/// What the running kernel says of a module's name: loaded with BTF, loaded without,
/// one it has but has not loaded (its `modules.dep`), or none it knows.
pub fn module_state(name: &str) -> crate::btf::Module {
    use crate::btf::Module;
    let name = name.replace('-', "_");
    if name == "vmlinux" || Path::new(BTF_DIR).join(&name).exists() {
        return Module::Types;
    }
    if Path::new("/sys/module")
        .join(&name)
        .join("initstate")
        .exists()
    {
        return Module::NoTypes;
    }
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let dep = Path::new("/lib/modules")
        .join(release.trim())
        .join("modules.dep");
    let known = std::fs::read_to_string(dep).is_ok_and(|text| {
        text.lines().any(|line| {
            let file = line.split(':').next().unwrap_or("");
            let base = file.rsplit('/').next().unwrap_or("");
            base.split(".ko").next().map(|b| b.replace('-', "_")) == Some(name.clone())
        })
    });
    if known {
        Module::Unloaded
    } else {
        Module::Unknown
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::btf::Fixture;

    /// A module's split BTF on `base`: `struct STRUCT { int error; }` and
    /// `int FUNC(struct STRUCT *cmd)`, its ids and string offsets going on from base's.
    fn split(base: &Btf, strukt: &str, func: &str) -> Vec<u8> {
        let ((_, _), (s0, s1)) = sections(&base.data).expect("the fixture parses");
        let base_str = (s1 - s0) as u32;
        let first = base.types.len() as u32;
        let int = (1..first)
            .find(|&id| base.type_name(id) == "int")
            .expect("the fixture has int");
        let mut strings = vec![0u8];
        let mut name = |s: &str| {
            let off = base_str + strings.len() as u32;
            strings.extend_from_slice(s.as_bytes());
            strings.push(0);
            off
        };
        let (n_struct, n_error, n_cmd, n_func) =
            (name(strukt), name("error"), name("cmd"), name(func));
        let info = |kind: u32, vlen: u32| kind << 24 | vlen;
        let words = [
            n_struct,
            info(KIND_STRUCT, 1),
            4,
            n_error,
            int,
            0, // struct: first
            0,
            info(KIND_PTR, 0),
            first, // first + 1
            0,
            info(KIND_FUNC_PROTO, 1),
            int,
            n_cmd,
            first + 1, // first + 2
            n_func,
            info(KIND_FUNC, 0),
            first + 2, // first + 3
        ];
        let types: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        let mut out: Vec<u8> = super::header(types.len(), strings.len())
            .iter()
            .flat_map(|w| w.to_le_bytes())
            .collect();
        out.extend(types);
        out.extend(strings);
        out
    }

    #[test]
    fn two_modules_split_on_one_base_read_as_one_kernel() {
        let fixture = Fixture::new();
        let base = fixture.btf();
        let modules = [
            ("moda".to_string(), split(base, "a_cmd", "a_fn")),
            ("modb".to_string(), split(base, "b_cmd", "b_fn")),
        ];
        let all = base.with_modules(&modules).expect("the modules merge");
        for (func, strukt, module) in [("a_fn", "a_cmd", "moda"), ("b_fn", "b_cmd", "modb")] {
            let f = all.function(func).expect("the module's function is found");
            assert_eq!(all.type_name(f.params[0].ty), format!("struct {strukt} *"));
            assert_eq!(f.params[0].name, "cmd");
            let KType::Ptr { pointee, .. } = all.resolve(f.params[0].ty) else {
                panic!("cmd is a pointer")
            };
            let error = all.field(pointee, "error").expect("the member is found");
            assert!(matches!(
                all.resolve(error.ty),
                KType::Int {
                    size: 4,
                    signed: true,
                    ..
                }
            ));
            assert_eq!(all.module_of(func).as_deref(), Some(module));
        }
        assert_eq!(all.module_of("vfs_read"), None);
        let vfs_read = base.function("vfs_read").expect("the fixture has vfs_read");
        assert_eq!(all.function("vfs_read"), Some(vfs_read));
        assert_eq!(
            all.struct_by_name("b_cmd"),
            Some(base.types.len() as u32 + 4)
        );
    }
}
