//! The names fslat may write into generated C: BTF from `--btf` is anyone's file, and a
//! struct, member or type name goes into the C as it is. The kernel's BTF verifier accepts
//! only identifiers for these (`btf_name_valid_identifier`), so a kernel's BTF always
//! passes; fslat holds every file to C's rule, `[A-Za-z_][A-Za-z0-9_]*`.

use super::*;

/// `name` is a C identifier.
fn identifier(name: &str) -> bool {
    let mut bytes = name.bytes();
    bytes
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// An integer or float type's name: identifiers joined by single spaces
/// (`long unsigned int`).
fn base_type_name(name: &str) -> bool {
    name.split(' ').all(identifier)
}

fn kind_name(kind: u32) -> &'static str {
    match kind {
        KIND_INT => "integer type",
        KIND_STRUCT => "struct",
        KIND_UNION => "union",
        KIND_ENUM | KIND_ENUM64 => "enum",
        KIND_FWD => "forward declaration",
        KIND_TYPEDEF => "typedef",
        KIND_FUNC => "function",
        KIND_FUNC_PROTO => "function prototype",
        KIND_FLOAT => "float type",
        _ => "type",
    }
}

impl Btf {
    /// Refuses BTF with a name that is not a C identifier where C needs one.
    pub(super) fn check_names(&self) -> Result<(), BtfError> {
        for id in 1..self.types.len() as TypeId {
            let Some(r) = self.rec(id) else { continue };
            let bad = |what: String, name: &str| {
                Err(malformed(format!(
                    "{what} is named {name:?}, which is not a C identifier (the kernel \
                     accepts only identifiers in BTF; this file did not come from a kernel)"
                )))
            };
            let name = self.name(&r);
            let ok = match r.kind {
                KIND_INT | KIND_FLOAT => base_type_name(name),
                // Anonymous structs, unions and enums have no name.
                KIND_STRUCT | KIND_UNION | KIND_ENUM | KIND_ENUM64 => {
                    name.is_empty() || identifier(name)
                }
                KIND_FWD | KIND_TYPEDEF | KIND_FUNC => identifier(name),
                _ => true,
            };
            if !ok {
                return bad(format!("type {id} ({})", kind_name(r.kind)), name);
            }
            // Members and parameters, (name offset, ...) records; enum values never reach
            // the C.
            let stride = match r.kind {
                KIND_STRUCT | KIND_UNION => 12,
                KIND_FUNC_PROTO => 8,
                _ => continue,
            };
            for i in 0..r.vlen {
                let [off] = self.entry::<1>(&r, stride, i);
                let part = self.str_at(off);
                if !(part.is_empty() || identifier(part)) {
                    let what = match r.kind {
                        KIND_FUNC_PROTO => "parameter",
                        _ => "member",
                    };
                    return bad(
                        format!("{what} {i} of type {id} ({})", kind_name(r.kind)),
                        part,
                    );
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::{base_type_name, identifier};

    #[test]
    fn identifiers_are_cs() {
        for ok in ["file", "_x", "__u64", "a1_b2", "Z"] {
            assert!(identifier(ok), "{ok}");
        }
        for bad in ["", "1a", "a-b", "a b", "x\n#include <x>", "a.b", "é", "a;"] {
            assert!(!identifier(bad), "{bad:?}");
        }
        assert!(base_type_name("long long unsigned int"));
        assert!(base_type_name("_Bool"));
        assert!(!base_type_name("int; #define x"));
        assert!(!base_type_name("int  x"));
        assert!(!base_type_name(""));
    }
}
