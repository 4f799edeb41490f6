//! The kernel's types, as the checker needs them: functions with their parameters, struct
//! fields, and whether the kernel has fsession. `Btf` reads them from a BTF file (normally
//! `/sys/kernel/btf/vmlinux`); `Fixture` is a small hand-built kernel for tests.

mod features;
mod fixture;
pub mod preemption;
mod reader;
mod tracepoints;
pub use tracepoints::derived as derived_tracepoint_arg;

pub use features::{FEATURES, FUNC, Feature, FeatureInfo, Features};
pub use fixture::Fixture;
pub use reader::{BTF_DIR, Btf, BtfError, VMLINUX_PATH, module_state, this_kernel};

/// What a kernel says of a module's name (`KernelTypes::module`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Module {
    /// Loaded, with BTF (or `vmlinux`): its functions can be traced.
    Types,
    /// Loaded, but the kernel has no BTF for it (built without
    /// `CONFIG_DEBUG_INFO_BTF_MODULES`, as Linux 5.10 in Debian).
    NoTypes,
    /// A module of this kernel that is not loaded.
    Unloaded,
    /// No module of this kernel: not a module's name.
    Unknown,
}

/// A BTF type id. 0 is `void`.
pub type TypeId = u32;

/// A type with typedefs, `const`, `volatile`, `restrict` and type tags stripped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KType {
    Void,
    /// Integers, `char` and `_Bool`. `size` in bytes (1, 2, 4, 8, 16).
    Int {
        size: u32,
        signed: bool,
        char_like: bool,
        bool_like: bool,
    },
    Enum {
        size: u32,
        signed: bool,
    },
    /// `user` is true when BTF marks the pointer `__user` (type tag "user").
    Ptr {
        pointee: TypeId,
        user: bool,
    },
    /// A struct or union (`union` tells which); `name` is empty for anonymous ones.
    Struct {
        name: String,
        size: u32,
        union: bool,
    },
    Array {
        elem: TypeId,
        len: u32,
    },
    /// A function prototype (what a function pointer points to).
    FuncProto,
    /// Floats and anything else fslat cannot read.
    Other,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Param {
    pub name: String,
    pub ty: TypeId,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FuncSig {
    pub name: String,
    pub params: Vec<Param>,
    /// 0 for `void`.
    pub ret: TypeId,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Field {
    pub name: String,
    pub ty: TypeId,
    /// Bitfields cannot be read with a plain CO-RE read.
    pub bitfield: bool,
}

/// Everything the checker and codegen ask of the kernel's types.
pub trait KernelTypes {
    /// A traceable function (BTF `FUNC`) by exact name.
    fn function(&self, name: &str) -> Option<FuncSig>;
    /// Every function name, sorted, for suggestions, completion and `--list`.
    fn function_names(&self) -> Vec<String>;
    /// A BTF tracepoint (`tp_btf`) by name: its arguments, from the prototype of the
    /// `btf_trace_NAME` typedef without the first (`void *`) one; `ret` is 0.
    fn tracepoint(&self, _name: &str) -> Option<FuncSig> {
        None
    }
    /// Every BTF tracepoint's name (each `btf_trace_NAME`), sorted: what a glob matches.
    fn tracepoint_names(&self) -> Vec<String> {
        Vec::new()
    }
    /// The running kernel's tracefs events as (category, name), from
    /// `/sys/kernel/tracing/events/CATEGORY/NAME`: BTF does not carry a tracepoint's
    /// category. `None` when these are not the running kernel's types or tracefs cannot
    /// be read.
    fn tracefs_events(&self) -> Option<Vec<(String, String)>> {
        None
    }
    /// The type behind `ty`, typedefs and qualifiers stripped.
    fn resolve(&self, ty: TypeId) -> KType;
    /// How C spells the type, typedef names kept: `struct file *`, `size_t`, `loff_t *`.
    fn type_name(&self, ty: TypeId) -> String;
    /// A named member of the struct or union `ty` (after `resolve`), looking through anonymous
    /// struct and union members the way C does.
    fn field(&self, ty: TypeId, name: &str) -> Option<Field>;
    /// Names reachable with `field` from `ty`, in declaration order, for hints.
    fn field_names(&self, ty: TypeId) -> Vec<String>;
    /// The loaded module whose BTF holds `function` (`None`: vmlinux's, or none).
    fn module_of(&self, _function: &str) -> Option<String> {
        None
    }
    /// What this kernel says of the module `name`.
    fn module(&self, _name: &str) -> Module {
        Module::Unknown
    }
    /// Whether this kernel knows fsession programs (`BPF_TRACE_FSESSION` in
    /// `enum bpf_attach_type`).
    fn has_fsession(&self) -> bool;
    /// Whether one fsession program can attach to many functions through one link
    /// (Linux 7.2: `BPF_TRACE_FSESSION_MULTI` and `BPF_LINK_TYPE_TRACING_MULTI`).
    fn has_fsession_multi(&self) -> bool {
        false
    }
    /// What this kernel's BPF can do (decided from its BTF, see `features`).
    fn features(&self) -> Features {
        Features::all()
    }
    /// How the kernel these types describe preempts kernel code (`None`: not known, as
    /// for another kernel's BTF file): whether its BPF trampolines skip calls.
    fn preemption(&self) -> Option<preemption::Preemption> {
        None
    }
    /// The kernel these types describe, for messages: "Linux 6.1.0-57-cloud-amd64", or the
    /// BTF file given with --btf.
    fn describe(&self) -> String {
        "this kernel".into()
    }
}
