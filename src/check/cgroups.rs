//! Cgroups in conditions: `cgroup == "PATH"` and `under("PATH")`, with PATH resolved to
//! its id (and depth) when the script is checked; and the cgroup-name builtins
//! (`cgroup_path`, `unit`, `container`, `pod`) refused as values.

use super::program::*;
use super::{Checked, Checker, Reported, Scope};
use crate::cgroups::{self, CgroupView};
use crate::diag::{DiagKind, Diagnostic};
use crate::syntax::ast::{self, BinOp, Span};

impl Checker<'_> {
    /// A cgroup name used as a value: it can only be emitted or be a key.
    pub(super) fn cgroup_name_operand(&mut self, view: CgroupView, span: Span) -> Reported {
        let d = Diagnostic::new(span, DiagKind::CgroupNameOperand { name: view.name() }).hint(
            "to choose cgroups, write `cgroup == \"/system.slice/a.service\"` or `under(\"/kubepods.slice\")`",
        );
        self.error_with(d)
    }

    /// The cgroup at `path`, or the error at `span`.
    fn cgroup_at(&mut self, path: &[u8], span: Span) -> Checked<cgroups::Cgroup> {
        let text = String::from_utf8_lossy(path).into_owned();
        (self.input.opts.cgroups)(&text).map_err(|e| {
            let d = Diagnostic::new(
                span,
                DiagKind::CgroupNotFound {
                    path: text,
                    why: e.to_string(),
                },
            )
            .hint("`fslat --cgroups` lists the cgroups that have a unit, container or pod name");
            self.error_with(d)
        })
    }

    /// `cgroup == "PATH"` (or `!=`): the string becomes PATH's cgroup id.
    pub(super) fn cgroup_path_operands(
        &mut self,
        scope: &Scope,
        op: BinOp,
        l: Expr,
        r: Expr,
        lhs: &ast::Expr,
        rhs: &ast::Expr,
    ) -> Checked<(Expr, Expr)> {
        if !matches!(op, BinOp::Eq | BinOp::Ne) {
            return Ok((l, r));
        }
        let cgroup = ExprKind::Builtin(super::builtins::CGROUP);
        // A bundle's `$1` as the path: the path is resolved now, so its value is compiled in.
        let path_arg = |e: &Expr| matches!((&e.kind, &e.ty), (ExprKind::Arg(_), Ty::Str { .. }));
        let (l, r) = match (&l.kind, &r.kind) {
            (k, _) if *k == cgroup && path_arg(&r) => {
                (l, self.compiled_in(scope, rhs, "a cgroup path")?)
            }
            (_, k) if *k == cgroup && path_arg(&l) => {
                (self.compiled_in(scope, lhs, "a cgroup path")?, r)
            }
            _ => (l, r),
        };
        let id = |c: cgroups::Cgroup| Expr {
            ty: Ty::Int(Scalar {
                size: 8,
                signed: false,
            }),
            kind: ExprKind::Int(i128::from(c.id)),
        };
        match (&l.kind, &r.kind) {
            (k, ExprKind::Str(path)) if *k == cgroup => {
                let c = self.cgroup_at(path, rhs.span.clone())?;
                Ok((l, id(c)))
            }
            (ExprKind::Str(path), k) if *k == cgroup => {
                let c = self.cgroup_at(path, lhs.span.clone())?;
                Ok((id(c), r))
            }
            _ => Ok((l, r)),
        }
    }

    /// `under("PATH")`: whether the task's cgroup is PATH or below it.
    pub(super) fn under(&mut self, e: &ast::Expr) -> Checked<Expr> {
        let ast::ExprKind::Str(path) = &e.kind else {
            return Err(self.error(
                e.span.clone(),
                DiagKind::BadArgType {
                    func: "under".into(),
                    expected: "a cgroup path in quotes",
                    found: "an expression".into(),
                },
            ));
        };
        let c = self.cgroup_at(path, e.span.clone())?;
        Ok(Expr {
            ty: Ty::Bool,
            kind: ExprKind::UnderCgroup {
                id: c.id,
                level: c.level,
            },
        })
    }
}
