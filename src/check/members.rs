//! Member reads (`f->f_path.dentry`) checked against the kernel's structs, and the struct
//! declarations codegen writes from them for CO-RE: only the members a script reads.

use super::program::*;
use super::{Checked, Checker, Scope};
use crate::btf::{KType, TypeId};
use crate::diag::{DiagKind, Diagnostic, closest};
use crate::syntax::ast;
use std::collections::BTreeMap;

impl Checker<'_> {
    pub(super) fn member(
        &mut self,
        scope: &Scope,
        base: &ast::Expr,
        arrow: bool,
        field: &ast::Ident,
    ) -> Checked<Expr> {
        if !arrow
            && matches!(&base.kind, ast::ExprKind::Name(n) if n == "start")
            && let Some(v) = self.start_value(field)
        {
            return v;
        }
        let b = self.expr(scope, base)?;
        let (struct_ty, root, root_name, mut path, mut hops) =
            self.read_so_far(b, base, arrow, field)?;
        let KType::Struct { .. } = self.types().resolve(struct_ty) else {
            return Err(self.error(
                base.span.clone(),
                DiagKind::NotAStruct {
                    ty: self.types().type_name(struct_ty),
                },
            ));
        };
        let Some(f) = self.types().field(struct_ty, &field.name) else {
            return Err(self.no_such_field(struct_ty, field));
        };
        if f.bitfield {
            return Err(self.error(
                field.span.clone(),
                DiagKind::Bitfield {
                    field: field.name.clone(),
                },
            ));
        }
        let Some(ty) = self.value_type(f.ty) else {
            return Err(self.error(
                field.span.clone(),
                DiagKind::Unreadable {
                    ty: self.types().type_name(f.ty),
                },
            ));
        };
        let user_offset = self
            .now
            .user
            .as_ref()
            .map(|u| u.field_offset(struct_ty, &f.name).unwrap_or(0));
        match (user_offset, hops.last_mut()) {
            (Some(off), Some(last)) => *last += off,
            // Kernel structs are read with CO-RE: codegen declares what is read.
            _ => self.declare_member(struct_ty, &f.name, f.ty),
        }
        let string = match (&ty, self.types().resolve(f.ty)) {
            (Ty::Str { .. }, KType::Array { .. }) => Some(StringSource::Array),
            (Ty::Str { .. }, _) => Some(StringSource::Pointer),
            _ => None,
        };
        path.last_mut()
            .expect("a read path has at least one group")
            .push(f.name.clone());
        Ok(Expr {
            ty,
            kind: ExprKind::Read {
                base: Box::new(root),
                root: root_name,
                path,
                string,
                hops: user_offset.map(|_| hops),
            },
        })
    }

    /// The struct whose member `field` is read from `b` (`base` checked), and the read so
    /// far: its base, its root struct, its path and (a user-space session's) offsets.
    #[allow(clippy::type_complexity)]
    fn read_so_far(
        &mut self,
        b: Expr,
        base: &ast::Expr,
        arrow: bool,
        field: &ast::Ident,
    ) -> Checked<(TypeId, Expr, StructName, Vec<Vec<String>>, Vec<u32>)> {
        Ok(match (&b.ty, arrow) {
            (Ty::Ptr { pointee, .. }, true) => match b.kind {
                ExprKind::Read {
                    base,
                    root,
                    mut path,
                    hops,
                    ..
                } => {
                    path.push(Vec::new());
                    let mut hops = hops.unwrap_or_default();
                    hops.push(0);
                    (*pointee, *base, root, path, hops)
                }
                _ => (
                    *pointee,
                    b.clone(),
                    self.struct_name(*pointee),
                    vec![Vec::new()],
                    vec![0],
                ),
            },
            (Ty::Record { ty, type_name }, false) => match b.kind {
                ExprKind::Read {
                    base,
                    root,
                    path,
                    hops,
                    ..
                } => (*ty, *base, root, path, hops.unwrap_or_default()),
                _ => {
                    return Err(self.error(
                        base.span.clone(),
                        DiagKind::ByValueStruct {
                            ty: type_name.clone(),
                        },
                    ));
                }
            },
            (Ty::Ptr { type_name, .. }, false) => {
                let d = Diagnostic::new(
                    field.span.clone(),
                    DiagKind::DotOnPointer {
                        ty: type_name.clone(),
                    },
                )
                .hint(format!("write `->{}`", field.name));
                return Err(self.error_with(d));
            }
            (Ty::Record { type_name, .. }, true) => {
                let d = Diagnostic::new(
                    field.span.clone(),
                    DiagKind::ArrowOnValue {
                        ty: type_name.clone(),
                    },
                )
                .hint(format!("write `.{}`", field.name));
                return Err(self.error_with(d));
            }
            (Ty::Str { .. }, _) => {
                return Err(self.error(
                    base.span.clone(),
                    DiagKind::NotAStruct {
                        ty: "char *".into(),
                    },
                ));
            }
            (t, _) => {
                return Err(
                    self.error(base.span.clone(), DiagKind::NotAStruct { ty: t.describe() })
                );
            }
        })
    }

    /// No member `field` in struct `struct_ty`: the error, with the nearest names.
    fn no_such_field(&mut self, struct_ty: TypeId, field: &ast::Ident) -> super::Reported {
        let names = self.types().field_names(struct_ty);
        let mut d = Diagnostic::new(
            field.span.clone(),
            DiagKind::NoSuchField {
                field: field.name.clone(),
                ty: self.types().type_name(struct_ty),
            },
        );
        let near = closest(&field.name, names.iter().map(String::as_str));
        if let Some(best) = near.first() {
            d = d.hint(format!("did you mean `{best}`?"));
        }
        if !names.is_empty() && names.len() <= 40 {
            d = d.hint(format!("its fields are {}", names.join(", ")));
        }
        self.error_with(d)
    }

    /// Records that a script reads member `name` of struct `ty`, so codegen declares it.
    fn declare_member(&mut self, ty: TypeId, name: &str, member_ty: TypeId) {
        let struct_name = self.struct_name(ty);
        let (member, needs) = self.member_type(member_ty);
        let entry = self
            .whole
            .structs
            .entry(struct_name.clone())
            .or_insert_with(|| {
                (
                    StructDecl {
                        ty,
                        name: struct_name.clone(),
                        members: Vec::new(),
                    },
                    Vec::new(),
                )
            });
        if !entry.0.members.iter().any(|m| m.name == name) {
            entry.0.members.push(MemberDecl {
                name: name.to_string(),
                ty: member,
            });
            entry.1.extend(needs);
        }
        if !self.whole.struct_order.contains(&struct_name) {
            self.whole.struct_order.push(struct_name);
        }
    }

    fn struct_name(&self, ty: TypeId) -> StructName {
        match self.types().resolve(ty) {
            KType::Struct { name, union, .. } if name.is_empty() => {
                StructName::Anonymous { union, ty }
            }
            KType::Struct { name, union, .. } => StructName::Named { union, name },
            _ => StructName::Anonymous { union: false, ty },
        }
    }

    /// What the member holds, and the structs it embeds by value.
    fn member_type(&mut self, ty: TypeId) -> (MemberType, Vec<StructName>) {
        match self.types().resolve(ty) {
            KType::Int { size, signed, .. } => (MemberType::Int { size, signed }, Vec::new()),
            KType::Enum { size, signed } => (MemberType::Enum { size, signed }, Vec::new()),
            KType::Ptr { pointee, .. } => {
                let target = match self.types().resolve(pointee) {
                    KType::Struct { .. } => Pointee::Struct(self.struct_name(pointee)),
                    _ if self.is_char(pointee) => Pointee::Char,
                    _ => Pointee::Void,
                };
                (MemberType::Ptr(target), Vec::new())
            }
            KType::Struct { .. } => {
                let name = self.struct_name(ty);
                // An embedded struct must be complete; declare it even if empty.
                if !self.whole.structs.contains_key(&name) {
                    self.whole.structs.insert(
                        name.clone(),
                        (
                            StructDecl {
                                ty,
                                name: name.clone(),
                                members: Vec::new(),
                            },
                            Vec::new(),
                        ),
                    );
                    self.whole.struct_order.push(name.clone());
                }
                (MemberType::Struct(name.clone()), vec![name])
            }
            KType::Array { elem, len } => (
                MemberType::Array {
                    chars: self.is_char(elem),
                    len,
                },
                Vec::new(),
            ),
            _ => (MemberType::Other, Vec::new()),
        }
    }
}

/// Struct declarations (`Whole::structs`), each after the ones it embeds, in the order
/// they were first used.
pub(super) fn ordered_structs(
    structs: &BTreeMap<StructName, (StructDecl, Vec<StructName>)>,
    order: &[StructName],
) -> Vec<StructDecl> {
    fn visit(
        name: &StructName,
        all: &BTreeMap<StructName, (StructDecl, Vec<StructName>)>,
        done: &mut Vec<StructName>,
        out: &mut Vec<StructDecl>,
    ) {
        if done.iter().any(|d| d == name) {
            return;
        }
        done.push(name.clone());
        if let Some((decl, needs)) = all.get(name) {
            for n in needs {
                visit(n, all, done, out);
            }
            out.push(decl.clone());
        }
    }
    let mut done = Vec::new();
    let mut out = Vec::new();
    for name in order {
        visit(name, structs, &mut done, &mut out);
    }
    out
}
