//! A user-space file's functions as the checker sees kernel functions: `KernelTypes`
//! over its symbols. Without debug information a function has the six integer argument
//! registers of the x86-64 ABI (`arg0`..`arg5`, unsigned 64-bit) and a signed 64-bit
//! return value.

use super::UserFunc;
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
    features: Features,
}

impl UserTypes {
    /// `functions` of the file at `path`; `features` are the kernel's.
    pub fn new(path: &Path, functions: Vec<UserFunc>, features: Features) -> UserTypes {
        UserTypes {
            path: path.to_path_buf(),
            functions: functions.into_iter().map(|f| (f.name.clone(), f)).collect(),
            features,
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The function `name`, with its file offset.
    pub fn get(&self, name: &str) -> Option<&UserFunc> {
        self.functions.get(name)
    }
}

impl KernelTypes for UserTypes {
    fn function(&self, name: &str) -> Option<FuncSig> {
        self.functions.get(name).map(|f| FuncSig {
            name: f.name.clone(),
            params: (0..ARG_REGISTERS)
                .map(|_| Param {
                    name: String::new(),
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
            U64 | S64 => KType::Int {
                size: 8,
                signed: ty == S64,
                char_like: false,
                bool_like: false,
            },
            _ => KType::Other,
        }
    }

    fn type_name(&self, ty: TypeId) -> String {
        match ty {
            U64 => "unsigned long".into(),
            S64 => "long".into(),
            _ => "?".into(),
        }
    }

    fn field(&self, _ty: TypeId, _name: &str) -> Option<Field> {
        None
    }

    fn field_names(&self, _ty: TypeId) -> Vec<String> {
        Vec::new()
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
