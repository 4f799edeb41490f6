//! A user-space file's functions as the checker sees kernel functions: `KernelTypes`
//! over its symbols and DWARF. A function with DWARF has its parameters by name with
//! their declared types; without, it has the six integer argument registers of the
//! x86-64 ABI (`arg0`..`arg5`, unsigned 64-bit) and a signed 64-bit return value.

use super::UserFunc;
use super::dwarf::{self, UType};
use crate::btf::{Features, Field, FuncSig, KType, KernelTypes, Param, TypeId};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Integer argument registers of the x86-64 System V ABI: rdi, rsi, rdx, rcx, r8, r9.
pub const ARG_REGISTERS: usize = 6;

const U64: TypeId = 1;
const S64: TypeId = 2;

/// The functions of one user-space file.
#[derive(Debug, Clone)]
pub struct UserTypes {
    path: PathBuf,
    functions: BTreeMap<String, UserFunc>,
    /// A C++ function's other name: its ELF symbol (mangled).
    aliases: BTreeMap<String, String>,
    features: Features,
    dwarf: dwarf::Types,
}

impl UserTypes {
    /// `functions` of the file at `path`; `features` are the kernel's.
    pub fn new(path: &Path, functions: Vec<UserFunc>, features: Features) -> UserTypes {
        let aliases = functions
            .iter()
            .filter(|f| f.symbol != f.name)
            .map(|f| (f.symbol.clone(), f.name.clone()))
            .collect();
        UserTypes {
            path: path.to_path_buf(),
            aliases,
            functions: functions.into_iter().map(|f| (f.name.clone(), f)).collect(),
            features,
            dwarf: dwarf::Types::default(),
        }
    }

    /// Reads the DWARF of `names` (the functions a session traces) from the file.
    pub fn read_dwarf(&mut self, names: &[String]) {
        // DWARF names a C++ function by its linkage name, the ELF symbol.
        let wanted: std::collections::HashSet<String> = names
            .iter()
            .map(|n| self.get(n).map_or(n.clone(), |f| f.symbol.clone()))
            .collect();
        if let Ok(data) = std::fs::read(&self.path) {
            self.dwarf = dwarf::read(&data, &wanted);
        }
    }

    /// Whether DWARF describes function `name` (its parameters have names and types).
    pub fn has_dwarf(&self, name: &str) -> bool {
        self.get(name)
            .is_some_and(|f| self.dwarf.functions.contains_key(&f.symbol))
    }

    /// Where member `name` of struct `ty` sits, looking through anonymous members.
    pub fn field_offset(&self, ty: TypeId, name: &str) -> Option<u32> {
        self.member(ty, name, 0).map(|(off, _)| off)
    }

    fn member(&self, ty: TypeId, name: &str, depth: u32) -> Option<(u32, &dwarf::Member)> {
        if depth > 8 {
            return None;
        }
        let UType::Struct { members, .. } = self.dwarf.get(self.strip(ty))? else {
            return None;
        };
        members.iter().find_map(|m| {
            if m.name == name {
                Some((m.offset, m))
            } else if m.name.is_empty() {
                self.member(m.ty, name, depth + 1)
                    .map(|(off, inner)| (m.offset + off, inner))
            } else {
                None
            }
        })
    }

    /// `ty` without typedefs and qualifiers.
    fn strip(&self, mut ty: TypeId) -> TypeId {
        for _ in 0..64 {
            match self.dwarf.get(ty) {
                Some(UType::Typedef { target, .. } | UType::Qualified(target)) => ty = *target,
                _ => break,
            }
        }
        ty
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The function `name` (or its ELF symbol), with its file offset.
    pub fn get(&self, name: &str) -> Option<&UserFunc> {
        self.functions
            .get(name)
            .or_else(|| self.functions.get(self.aliases.get(name)?))
    }
}

impl KernelTypes for UserTypes {
    fn function(&self, name: &str) -> Option<FuncSig> {
        let f = self.get(name)?;
        if let Some(d) = self.dwarf.functions.get(&f.symbol) {
            return Some(FuncSig {
                name: f.name.clone(),
                params: d
                    .params
                    .iter()
                    .map(|(name, ty)| Param {
                        name: name.clone(),
                        ty: *ty,
                    })
                    .collect(),
                ret: d.ret,
            });
        }
        Some(FuncSig {
            name: f.name.clone(),
            params: (0..ARG_REGISTERS)
                .map(|i| Param {
                    name: format!("arg{i}"),
                    ty: U64,
                })
                .collect(),
            ret: S64,
        })
    }

    fn function_names(&self) -> Vec<String> {
        self.functions.keys().cloned().collect()
    }

    fn resolve(&self, ty: TypeId) -> KType {
        match ty {
            0 => return KType::Void,
            U64 | S64 => {
                return KType::Int {
                    size: 8,
                    signed: ty == S64,
                    char_like: false,
                    bool_like: false,
                };
            }
            _ => {}
        }
        match self.dwarf.get(self.strip(ty)) {
            Some(UType::Void) => KType::Void,
            Some(UType::Int {
                size,
                signed,
                char_like,
                bool_like,
                ..
            }) => KType::Int {
                size: *size,
                signed: *signed,
                char_like: *char_like,
                bool_like: *bool_like,
            },
            Some(UType::Enum { size, signed, .. }) => KType::Enum {
                size: *size,
                signed: *signed,
            },
            // Every pointer of a user-space session is a user address.
            Some(UType::Ptr(p)) => KType::Ptr {
                pointee: *p,
                user: true,
            },
            Some(UType::Struct {
                name, size, union, ..
            }) => KType::Struct {
                name: name.clone(),
                size: *size,
                union: *union,
            },
            Some(UType::Array { elem, len }) => KType::Array {
                elem: *elem,
                len: *len,
            },
            Some(UType::FuncProto) => KType::FuncProto,
            _ => KType::Other,
        }
    }

    fn type_name(&self, ty: TypeId) -> String {
        match ty {
            0 => return "void".into(),
            U64 => return "unsigned long".into(),
            S64 => return "long".into(),
            _ => {}
        }
        let Some(t) = self.dwarf.get(ty) else {
            return "?".into();
        };
        match t {
            UType::Void => "void".into(),
            UType::Int { name, .. } | UType::Other(name) => name.clone(),
            UType::Typedef { name, .. } => name.clone(),
            UType::Ptr(p) => {
                let inner = self.type_name(*p);
                if inner.ends_with('*') {
                    format!("{inner}*")
                } else {
                    format!("{inner} *")
                }
            }
            UType::Qualified(t) => self.type_name(*t),
            UType::Struct { name, union, .. } => format!(
                "{} {}",
                if *union { "union" } else { "struct" },
                if name.is_empty() { "(anonymous)" } else { name }
            ),
            UType::Enum { name, .. } => format!("enum {name}"),
            UType::Array { elem, len } => format!("{}[{len}]", self.type_name(*elem)),
            UType::FuncProto => "function".into(),
        }
    }

    fn field(&self, ty: TypeId, name: &str) -> Option<Field> {
        self.member(ty, name, 0).map(|(_, m)| Field {
            name: name.to_string(),
            ty: m.ty,
            bitfield: m.bitfield,
        })
    }

    fn field_names(&self, ty: TypeId) -> Vec<String> {
        match self.dwarf.get(self.strip(ty)) {
            Some(UType::Struct { members, .. }) => members
                .iter()
                .filter(|m| !m.name.is_empty())
                .map(|m| m.name.clone())
                .collect(),
            _ => Vec::new(),
        }
    }

    fn has_fsession(&self) -> bool {
        self.features.fsession
    }

    fn features(&self) -> Features {
        self.features
    }

    fn describe(&self) -> String {
        self.path.display().to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// tests/kernel/user's program, built with DWARF in a new directory.
    fn ufunc() -> (tempfile::TempDir, PathBuf) {
        let dir = super::super::test_programs();
        let exe = dir.path().join("ufunc");
        (dir, exe)
    }

    #[test]
    fn dwarf_names_parameters_with_their_types_and_member_offsets() {
        let (_dir, exe) = ufunc();
        let funcs = super::super::functions(&exe).unwrap();
        let mut t = UserTypes::new(&exe, funcs, Features::default());
        t.read_dwarf(&["norm".into(), "greet".into(), "add".into(), "main".into()]);
        let norm = t.function("norm").unwrap();
        assert_eq!(norm.params.len(), 1);
        assert_eq!(norm.params[0].name, "p");
        assert_eq!(t.type_name(norm.params[0].ty), "struct point *");
        let KType::Ptr { pointee, user } = t.resolve(norm.params[0].ty) else {
            panic!("a pointer");
        };
        assert!(user);
        assert_eq!(t.field_offset(pointee, "x"), Some(0));
        assert_eq!(t.field_offset(pointee, "y"), Some(8));
        assert_eq!(t.field_names(pointee), vec!["x", "y"]);
        let greet = t.function("greet").unwrap();
        assert_eq!(greet.params[0].name, "name");
        let KType::Ptr { pointee, .. } = t.resolve(greet.params[0].ty) else {
            panic!("a pointer");
        };
        assert!(matches!(t.resolve(pointee), KType::Int { size: 1, .. }));
        let add = t.function("add").unwrap();
        let names: Vec<&str> = add.params.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["a", "b"]);
        assert!(matches!(
            t.resolve(add.ret),
            KType::Int {
                size: 8,
                signed: true,
                ..
            }
        ));
        // Not asked for: the ABI's registers.
        let depth = t.function("depth").unwrap();
        assert!(!t.has_dwarf("depth"));
        assert_eq!(depth.params.len(), ARG_REGISTERS);
        assert_eq!(depth.params[0].name, "arg0");
    }
}
