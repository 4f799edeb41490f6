//! What a name means in a session: a builtin (`tgid`, `latency`, ...), a parameter by name
//! or as `argN`, or `ret`; and how a BTF type looks as a script value.

use super::builtins::{BuiltinTy, builtin_names};
use super::program::*;
use super::{COMM_CAP, Checked, Checker, STRING_CAP, Scope, quote_list};
use crate::btf::{KType, TypeId};
use crate::diag::{DiagKind, Diagnostic, closest};
use crate::syntax::ast::{self, Span};

impl Checker<'_> {
    /// How a value of BTF type `ty` looks in a script, or `None` if fslat can't read it.
    pub(super) fn value_type(&self, ty: TypeId) -> Option<Ty> {
        if let Some(scalar) = super::usdt::usdt_scalar(ty) {
            return Some(Ty::Int(scalar));
        }
        Some(match self.types().resolve(ty) {
            KType::Int {
                bool_like: true, ..
            } => Ty::Bool,
            KType::Int { size, signed, .. } | KType::Enum { size, signed } if size <= 8 => {
                Ty::Int(Scalar {
                    size: size as u8,
                    signed,
                })
            }
            KType::Ptr { pointee, .. } => {
                if self.is_char(pointee) {
                    Ty::Str { cap: STRING_CAP }
                } else {
                    Ty::Ptr {
                        pointee,
                        type_name: self.types().type_name(ty),
                    }
                }
            }
            KType::Struct { .. } => Ty::Record {
                ty,
                type_name: self.types().type_name(ty),
            },
            KType::Array { elem, len } if self.is_char(elem) => Ty::Str {
                cap: len.clamp(1, STRING_CAP),
            },
            _ => return None,
        })
    }

    /// A tracepoint argument this kernel's prototype lacks, as the field it copies
    /// (`prev_state` of `sched_switch` before 5.18: `prev->state`), written as the script
    /// would write it.
    fn derived_arg(&self, scope: &Scope, name: &str, span: &Span) -> Option<ast::Expr> {
        let (param, fields) = crate::btf::derived_tracepoint_arg(&scope.func.name, name)?;
        let p = scope.func.params.iter().find(|p| p.name == param)?;
        let KType::Ptr { pointee, .. } = self.types().resolve(p.ty) else {
            return None;
        };
        let field = fields
            .iter()
            .find(|f| self.types().field(pointee, f).is_some())?;
        let at = |kind| ast::Expr {
            kind,
            span: span.clone(),
        };
        Some(at(ast::ExprKind::Member {
            base: Box::new(at(ast::ExprKind::Name(param.into()))),
            arrow: true,
            field: ast::Ident {
                name: field.to_string(),
                span: span.clone(),
            },
        }))
    }

    pub(super) fn is_char(&self, ty: TypeId) -> bool {
        matches!(
            self.types().resolve(ty),
            KType::Int {
                char_like: true,
                ..
            } | KType::Int { size: 1, .. }
        )
    }

    pub(super) fn name(&mut self, scope: &Scope, name: &str, span: Span) -> Checked<Expr> {
        if let Some((_, value)) = self.now.lets.iter().rev().find(|(n, _)| n == name) {
            return Ok(value.clone());
        }
        if let Some(def) = Builtin::named(name) {
            if let Some(read) = self.offcpu_name(scope, def, name, span.clone()) {
                return read;
            }
            if self.now.at_point && def.at_return && !matches!(def.ty, BuiltinTy::Stack(_)) {
                return Err(self.at_point_only(name, span));
            }
            let ty = match def.ty {
                BuiltinTy::Comm => Ty::Str { cap: COMM_CAP },
                BuiltinTy::FuncName => Ty::Str {
                    cap: scope.func_cap,
                },
                BuiltinTy::Duration => Ty::Duration,
                BuiltinTy::Bool => Ty::Bool,
                BuiltinTy::Stack(StackKind::Kernel) if self.now.user.is_some() => {
                    return Err(self.error(span, DiagKind::KernelOnlyName { name: name.into() }));
                }
                BuiltinTy::Stack(kind) => Ty::Stack(kind),
                BuiltinTy::WaitStack(kind) => return self.wait_stack(def, kind, name, span),
                BuiltinTy::CgroupName(v) => Ty::CgroupName(v),
                BuiltinTy::U64 => Ty::Int(Scalar {
                    size: 8,
                    signed: false,
                }),
                BuiltinTy::U32 => Ty::Int(Scalar {
                    size: 4,
                    signed: false,
                }),
            };
            let value = Expr {
                ty,
                kind: ExprKind::Builtin(def),
            };
            if def.reads_sched() {
                return self.sched_share(value, name, span);
            }
            return Ok(value);
        }
        if name == "ret" {
            return self.ret(scope, span);
        }
        if scope.several {
            let index = self.shared_param(scope, name, span.clone())?;
            let raw = self.shared_param_type(scope, index);
            return self.param_value(index, raw, span);
        }
        let by_name = scope.params.iter().position(|p| p.name == name);
        let by_pos = name
            .strip_prefix("arg")
            .filter(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|n| n.parse::<usize>().ok());
        let index = match (by_name, by_pos) {
            (Some(i), _) => i,
            (None, Some(i)) if i < scope.params.len() => i,
            (None, Some(_)) => return Err(self.arg_out_of_range(scope, name, span)),
            (None, None) => {
                if let Some(e) = self.derived_arg(scope, name, &span) {
                    return self.expr(scope, &e);
                }
                let mut names: Vec<String> = scope.params.iter().map(|p| p.name.clone()).collect();
                names.extend(builtin_names().map(String::from));
                let mut d = Diagnostic::new(span, DiagKind::UnknownName { name: name.into() });
                if self
                    .now
                    .user
                    .as_ref()
                    .is_some_and(|u| !u.has_dwarf(&scope.func.name))
                {
                    d = d.hint(format!(
                        "`{}` has no DWARF (its file was built without -g): its arguments are `arg0`..`arg5`",
                        scope.func.name
                    ));
                }
                let near = closest(name, names.iter().map(String::as_str));
                if let Some(hint) = crate::syntax::foreign::name_hint(name) {
                    d = d.hint(hint);
                } else if let Some(best) = near.first() {
                    d = d.hint(format!("did you mean `{best}`?"));
                }
                // The parameters are this function's own and few; the builtins are the
                // same everywhere and many, so the hint says where they are listed.
                d = d.hint(format!(
                    "`{}` has parameters {}; `fslat --help` lists the builtin names",
                    scope.func.name,
                    if scope.params.is_empty() {
                        "(none)".into()
                    } else {
                        quote_list(
                            &names[..scope.params.len()]
                                .iter()
                                .map(String::as_str)
                                .collect::<Vec<_>>(),
                        )
                    },
                ));
                return Err(self.error_with(d));
            }
        };
        let raw = scope.func.params[index].ty;
        if self.now.user.is_some() {
            self.in_register(scope, index, raw, span.clone())?;
        }
        self.param_value(index, raw, span)
    }

    /// `argN` past the point's arguments.
    fn arg_out_of_range(&mut self, scope: &Scope, name: &str, span: Span) -> super::Reported {
        let mut d = Diagnostic::new(
            span,
            DiagKind::ArgOutOfRange {
                name: name.into(),
                count: scope.params.len(),
            },
        );
        // A USDT probe's name is `PROVIDER:NAME`; no kernel function's has a colon.
        if scope.func.name.contains(':') && self.now.user.is_none() {
            d = d.hint(format!(
                "USDT probe `{}` has {} argument(s), `arg0`..: its note says so (`fslat -l 'usdt:FILE:NAME'` lists them)",
                scope.func.name,
                scope.params.len()
            ));
        }
        self.error_with(d)
    }

    /// `oncpu` and the other scheduler figures: the thread's running total at return
    /// minus the same total saved at entry, so that each call, nested or not, has its own.
    /// A span has them only when both its ends are one thread's (keyed by `pid`).
    fn sched_share(&mut self, total: Expr, name: &str, span: Span) -> Checked<Expr> {
        if self.now.in_span && !self.now.span_by_thread {
            let d = Diagnostic::new(span, DiagKind::SchedInSpan { name: name.into() }).hint(
                "key the span by the thread at both ends, `(pid)`, to follow one thread's time",
            );
            return Err(self.error_with(d));
        }
        let at_entry = self.save_entry_value(total.clone(), span)?;
        Ok(Expr {
            ty: total.ty.clone(),
            kind: ExprKind::Binary {
                op: BinOp::Sub,
                lhs: Box::new(total),
                rhs: Box::new(at_entry),
                signed: false,
            },
        })
    }

    /// `wait_kstack`, `wait_ustack`: the stacks the scheduler hooks took when the call's
    /// thread left the CPU for its longest stretch. One thread's, as `oncpu` is; a
    /// kernel stack is meaningful in a user function's session too (where it slept).
    fn wait_stack(
        &mut self,
        def: Builtin,
        kind: StackKind,
        name: &str,
        span: Span,
    ) -> Checked<Expr> {
        if self.now.in_span && !self.now.span_by_thread {
            let d = Diagnostic::new(span, DiagKind::SchedInSpan { name: name.into() }).hint(
                "key the span by the thread at both ends, `(pid)`, to follow one thread's time",
            );
            return Err(self.error_with(d));
        }
        Ok(Expr {
            ty: Ty::Stack(kind),
            kind: ExprKind::Builtin(def),
        })
    }

    /// A user function's parameter is read from its argument register: refused when it
    /// has none (the seventh integer and later, floats, structs over 16 bytes).
    fn in_register(&mut self, scope: &Scope, index: usize, raw: TypeId, span: Span) -> Checked<()> {
        let slot = scope.params[index].slot;
        let kind = self.types().resolve(raw);
        let passed = match kind {
            KType::Other => Some("in a vector register"),
            KType::Struct { size, .. } if size > 16 => Some("on the stack"),
            _ if slot >= crate::elf::ARG_REGISTERS => Some("on the stack"),
            _ => None,
        };
        match passed {
            Some(how) => Err(self.error(
                span,
                DiagKind::NotInRegister {
                    name: scope.params[index].name.clone(),
                    how,
                },
            )),
            None => Ok(()),
        }
    }

    /// Parameter `index` of the session, of BTF type `raw`, as a value.
    fn param_value(&mut self, index: usize, raw: TypeId, span: Span) -> Checked<Expr> {
        self.value_of(raw, ExprKind::Param(index), span)
    }

    /// `kind` (a parameter or `ret`) of BTF type `raw`, as a value: a `char *` is a
    /// pointer into the kernel, read as a string.
    fn value_of(&mut self, raw: TypeId, kind: ExprKind, span: Span) -> Checked<Expr> {
        match self.value_type(raw) {
            Some(Ty::Str { cap }) => Ok(Expr {
                ty: Ty::Str { cap },
                kind: ExprKind::Deref(Box::new(Expr {
                    ty: Ty::Int(Scalar {
                        size: 8,
                        signed: false,
                    }),
                    kind,
                })),
            }),
            Some(ty) => Ok(Expr { ty, kind }),
            None => Err(self.error(
                span,
                DiagKind::Unreadable {
                    ty: self.types().type_name(raw),
                },
            )),
        }
    }

    pub(super) fn ret(&mut self, scope: &Scope, span: Span) -> Checked<Expr> {
        if self.now.at_point {
            return Err(self.at_point_only("ret", span));
        }
        if self.now.in_span {
            return Err(self.error(span, DiagKind::RetInSpan));
        }
        if scope.several {
            self.shared_ret(scope, span.clone())?;
        }
        let ret = scope.func.ret;
        if matches!(self.types().resolve(ret), KType::Void) {
            return Err(self.error(
                span,
                DiagKind::RetOfVoid {
                    func: scope.func.name.clone(),
                },
            ));
        }
        self.value_of(ret, ExprKind::Ret, span)
    }
}
