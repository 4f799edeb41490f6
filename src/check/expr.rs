//! Typing an expression: dispatch to names, members and operators, conditions, and the
//! one function call, `path()`.

use super::operators::int_const;
use super::program::*;
use super::{Checked, Checker, PATH_CAP, Reported, Scope};
use crate::btf::KType;
use crate::diag::{DiagKind, Diagnostic};
use crate::syntax::ast::{self, Span};

impl Checker<'_> {
    pub(super) fn condition(&mut self, scope: &Scope, e: &ast::Expr) -> Checked<Expr> {
        let c = self.expr(scope, e)?;
        match c.ty {
            Ty::Bool | Ty::Int(_) | Ty::Ptr { .. } => Ok(c),
            Ty::Stack(k) => Err(self.stack_operand(k, e.span.clone())),
            Ty::CgroupName(v) => Err(self.cgroup_name_operand(v, e.span.clone())),
            Ty::Formatted { radix, .. } => Err(self.formatted_operand(radix, e.span.clone())),
            ref t => Err(self.error(e.span.clone(), DiagKind::NotCondition { ty: t.describe() })),
        }
    }

    pub(super) fn expr(&mut self, scope: &Scope, e: &ast::Expr) -> Checked<Expr> {
        use ast::ExprKind as K;
        match &e.kind {
            K::Int(v) => Ok(int_const(i128::from(*v))),
            K::Duration(ns) => Ok(Expr {
                ty: Ty::Duration,
                kind: ExprKind::Int(i128::from(*ns)),
            }),
            K::Bool(b) => Ok(Expr {
                ty: Ty::Bool,
                kind: ExprKind::Bool(*b),
            }),
            K::Str(bytes) => Ok(Expr {
                ty: Ty::Str {
                    cap: bytes.len() as u32 + 1,
                },
                kind: ExprKind::Str(bytes.clone()),
            }),
            K::Name(name) => self.name(scope, name, e.span.clone()),
            K::Positional(n) => self.positional(*n, e.span.clone()),
            K::PositionalCount => self.positional_count(e.span.clone()),
            K::Call { func, args } => self.call(scope, func, args, e.span.clone()),
            K::Member { base, arrow, field } => self.member(scope, base, *arrow, field),
            K::Unary { op, expr } => self.unary(scope, *op, expr, e.span.clone()),
            K::Binary { op, lhs, rhs } => self.binary(scope, *op, lhs, rhs, e.span.clone()),
        }
    }

    fn call(
        &mut self,
        scope: &Scope,
        func: &ast::Ident,
        args: &[ast::Expr],
        span: Span,
    ) -> Checked<Expr> {
        if let Some(checked) = self.library_call(scope, func, args, span.clone()) {
            return checked;
        }
        if func.name != "path" {
            let d = Diagnostic::new(
                func.span.clone(),
                DiagKind::UnknownCall {
                    name: func.name.clone(),
                },
            )
            .hint(format!(
                "the functions are {} (`path(FILE)`: the path of a `struct file *`)",
                super::quote_list(super::CALLS)
            ))
            .hint(format!(
                "aggregations ({}) are statements in a `{{ }}` block",
                crate::aggregate::names().collect::<Vec<_>>().join(", ")
            ));
            return Err(self.error_with(d));
        }
        if args.len() != 1 {
            return Err(self.error(
                span,
                DiagKind::WrongArgCount {
                    func: "path".into(),
                    expected: 1,
                    found: args.len(),
                },
            ));
        }
        let arg = self.expr(scope, &args[0])?;
        let is_file = match &arg.ty {
            Ty::Ptr { pointee, .. } => matches!(
                self.types().resolve(*pointee),
                KType::Struct { ref name, union: false, .. } if name == "file"
            ),
            _ => false,
        };
        if !is_file {
            return Err(self.error(
                args[0].span.clone(),
                DiagKind::BadArgType {
                    func: "path".into(),
                    expected: "a `struct file *`",
                    found: arg.ty.describe(),
                },
            ));
        }
        if !self.types().features().bpf_loop {
            let info = crate::btf::Feature::BpfLoop.info();
            let d = Diagnostic::new(
                func.span.clone(),
                DiagKind::NeedsFeature {
                    what: "`path()`".into(),
                    feature: info.name,
                    since: info.since,
                    kernel: self.types().describe(),
                },
            )
            .hint(format!(
                "run the script on Linux {} or later, or leave out path()",
                info.since
            ));
            return Err(self.error_with(d));
        }
        Ok(Expr {
            ty: Ty::Str { cap: PATH_CAP },
            kind: ExprKind::Path(Box::new(arg)),
        })
    }

    /// A stack used as a value: it can only be emitted or be a key.
    pub(super) fn stack_operand(&mut self, kind: StackKind, span: Span) -> Reported {
        let d = Diagnostic::new(span, DiagKind::StackOperand { name: kind.name() })
            .hint(format!("write `emit {0}` or `count() by {0}`", kind.name()));
        self.error_with(d)
    }
}
