//! How the checked program's types are spelled in C: integers, kernel structs and the
//! members fslat declares for CO-RE.

use crate::check::program::{MemberDecl, MemberType, Pointee, StructName};

pub fn c_int(size: u32, signed: bool) -> &'static str {
    match (size, signed) {
        (1, false) => "__u8",
        (1, true) => "__s8",
        (2, false) => "__u16",
        (2, true) => "__s16",
        (4, false) => "__u32",
        (4, true) => "__s32",
        (_, false) => "__u64",
        (_, true) => "__s64",
    }
}

/// `struct file`, `union foo`, or `struct fslat_anon_ID` for a type without a name.
pub fn struct_name(s: &StructName) -> String {
    let keyword = |union| if union { "union" } else { "struct" };
    match s {
        StructName::Named { union, name } => format!("{} {name}", keyword(*union)),
        StructName::Anonymous { union, ty } => format!("{} fslat_anon_{ty}", keyword(*union)),
    }
}

/// The member's C declaration: `__u32 flags`, `struct path f_path`, `char name[16]`. An
/// enum member is an anonymous enum of the member's size (CO-RE matches an anonymous
/// enum with any enum, never with an integer), its one constant named `constant`, which
/// must be unique in the program.
pub fn member_decl(m: &MemberDecl, constant: &str) -> String {
    let name = &m.name;
    match &m.ty {
        MemberType::Int { size, signed } => format!("{} {name}", c_int(*size, *signed)),
        MemberType::Enum { size, signed } => {
            // The one value that gives clang's enum that size and sign.
            let (packed, value) = match (size, signed) {
                (1, false) => (" __attribute__((packed))", "0"),
                (1, true) => (" __attribute__((packed))", "-1"),
                (2, false) => (" __attribute__((packed))", "0x100"),
                (2, true) => (" __attribute__((packed))", "-0x100"),
                (8, false) => ("", "0xffffffffffffffffULL"),
                (8, true) => ("", "-0x7fffffffffffffffLL"),
                (_, false) => ("", "0"),
                (_, true) => ("", "-1"),
            };
            format!("enum{packed} {{ {constant} = {value} }} {name}")
        }
        MemberType::Ptr(pointee) => {
            let target = match pointee {
                Pointee::Struct(s) => struct_name(s),
                Pointee::Char => "char".into(),
                Pointee::Void => "void".into(),
            };
            format!("{target} *{name}")
        }
        MemberType::Struct(s) => format!("{} {name}", struct_name(s)),
        MemberType::Array { chars, len } => {
            let elem = if *chars { "char" } else { "__u8" };
            format!("{elem} {name}[{len}]")
        }
        MemberType::Other => format!("__u64 {name}"),
    }
}
