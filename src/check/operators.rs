//! Unary and binary operators: their types, the mistakes fslat refuses (a duration against
//! a bare number, an unsigned value against a negative one), and folding constants.

use super::program::*;
use super::{Checked, Checker, Scope};
use crate::diag::{DiagKind, Diagnostic};
use crate::syntax::ast::{self, BinOp, Span, UnOp};

impl Checker<'_> {
    pub(super) fn unary(
        &mut self,
        scope: &Scope,
        op: UnOp,
        inner: &ast::Expr,
        span: Span,
    ) -> Checked<Expr> {
        let e = self.expr(scope, inner)?;
        if let Ty::Stack(k) = e.ty {
            return Err(self.stack_operand(k, inner.span.clone()));
        }
        if let Ty::Formatted { radix, .. } = e.ty {
            return Err(self.formatted_operand(radix, inner.span.clone()));
        }
        if let Ty::CgroupName(v) = e.ty {
            return Err(self.cgroup_name_operand(v, inner.span.clone()));
        }
        match (op, &e.ty) {
            (UnOp::Neg, Ty::Int(_)) => Ok(match e.kind {
                // As C computes it on 64 bits: minus a constant above i64's range is
                // unsigned, and wraps (`-(~0)` is 1).
                ExprKind::Int(v) if -v < i128::from(i64::MIN) => {
                    int_const(i128::from((v as u64).wrapping_neg()))
                }
                ExprKind::Int(v) => int_const(-v),
                _ => Expr {
                    ty: Ty::Int(Scalar {
                        size: 8,
                        signed: true,
                    }),
                    kind: ExprKind::Unary {
                        op,
                        expr: Box::new(e),
                    },
                },
            }),
            // Folded as C computes it on 64 bits, so `x << (23 + ~5)` sees its width.
            (UnOp::BitNot, Ty::Int(_)) if let ExprKind::Int(v) = e.kind => {
                Ok(int_const(i128::from(!(v as u64))))
            }
            (UnOp::BitNot, Ty::Int(s)) => Ok(Expr {
                ty: Ty::Int(Scalar {
                    size: 8,
                    signed: s.signed,
                }),
                kind: ExprKind::Unary {
                    op,
                    expr: Box::new(e),
                },
            }),
            (UnOp::Not, Ty::Bool | Ty::Int(_) | Ty::Ptr { .. }) => Ok(Expr {
                ty: Ty::Bool,
                kind: ExprKind::Unary {
                    op,
                    expr: Box::new(e),
                },
            }),
            (UnOp::Neg, Ty::Duration) => {
                let d = Diagnostic::new(span, DiagKind::NegativeDuration).hint(
                    "compare the other way round (`latency < 5ms`), or subtract from a duration (`latency - 5ms`)",
                );
                Err(self.error_with(d))
            }
            (_, t) => Err(self.error(
                span,
                DiagKind::Mismatch {
                    op: match op {
                        UnOp::Neg => "-",
                        UnOp::Not => "not",
                        UnOp::BitNot => "~",
                    },
                    lhs: t.describe(),
                    rhs: "nothing".into(),
                },
            )),
        }
    }

    pub(super) fn binary(
        &mut self,
        scope: &Scope,
        op: BinOp,
        lhs: &ast::Expr,
        rhs: &ast::Expr,
        span: Span,
    ) -> Checked<Expr> {
        if op.is_logic() {
            let l = self.condition(scope, lhs);
            let r = self.condition(scope, rhs);
            return Ok(Expr::logic(op, l?, r?));
        }
        let l = self.expr(scope, lhs);
        let r = self.expr(scope, rhs);
        let (l, r) = (l?, r?);
        for (side, span) in [(&l, &lhs.span), (&r, &rhs.span)] {
            if let Ty::Stack(k) = side.ty {
                return Err(self.stack_operand(k, span.clone()));
            }
            if let Ty::Formatted { radix, .. } = side.ty {
                return Err(self.formatted_operand(radix, span.clone()));
            }
            if let Ty::CgroupName(v) = side.ty {
                return Err(self.cgroup_name_operand(v, span.clone()));
            }
        }
        let (l, r) = self.cgroup_path_operands(scope, op, l, r, lhs, rhs)?;
        match (&l.ty, &r.ty) {
            (Ty::Str { cap: a }, Ty::Str { cap: b }) => {
                let (a, b) = (*a, *b);
                self.strings(scope, op, l, r, (a, b), (lhs, rhs), span)
            }
            (Ty::Str { .. }, _) | (_, Ty::Str { .. }) => {
                let mut d = Diagnostic::new(span, mismatch(op, &l, &r));
                if let Some(hint) = self.untyped_arg_hint(&l, &r, "a string") {
                    d = d.hint(hint);
                }
                Err(self.error_with(d))
            }
            (Ty::Duration, Ty::Int(_)) | (Ty::Int(_), Ty::Duration)
                if op.is_comparison() || matches!(op, BinOp::Add | BinOp::Sub | BinOp::Rem) =>
            {
                Err(self.duration_vs_integer(op, &l, &r, (lhs, rhs), span))
            }
            (Ty::Duration, Ty::Duration) => self.durations(op, l, r, rhs, span),
            (Ty::Duration, Ty::Int(_)) if matches!(op, BinOp::Mul | BinOp::Div) => {
                if op == BinOp::Div {
                    self.nonzero_divisor(&r, rhs)?;
                    self.not_a_unit_conversion(&r, lhs, span.clone())?;
                }
                Ok(fold(node(op, Ty::Duration, l, r, false)))
            }
            (Ty::Int(_), Ty::Duration) if op == BinOp::Mul => {
                Ok(fold(node(op, Ty::Duration, l, r, false)))
            }
            (Ty::Int(a), Ty::Int(b)) => {
                let (a, b) = (*a, *b);
                let lc = const_value(&l);
                let rc = const_value(&r);
                if op.is_comparison() {
                    self.signedness(op, &l, lc, &r, rc, span)?;
                    let signed = (a.signed && lc.is_none())
                        || (b.signed && rc.is_none())
                        || (lc.is_some() && rc.is_some());
                    return Ok(fold(node(op, Ty::Bool, l, r, signed)));
                }
                if matches!(op, BinOp::Div | BinOp::Rem) {
                    self.nonzero_divisor(&r, rhs)?;
                }
                if matches!(op, BinOp::Shl | BinOp::Shr)
                    && let Some(by) = rc.filter(|by| !(0..64).contains(by))
                {
                    return Err(self.error(rhs.span.clone(), DiagKind::ShiftOutOfRange { by }));
                }
                let signed = (a.signed && lc.is_none()) || (b.signed && rc.is_none());
                Ok(fold(node(
                    op,
                    Ty::Int(Scalar { size: 8, signed }),
                    l,
                    r,
                    signed,
                )))
            }
            (Ty::Bool, Ty::Bool) if matches!(op, BinOp::Eq | BinOp::Ne) => {
                Ok(node(op, Ty::Bool, l, r, false))
            }
            (Ty::Ptr { .. }, Ty::Ptr { .. }) if matches!(op, BinOp::Eq | BinOp::Ne) => {
                Ok(node(op, Ty::Bool, l, r, false))
            }
            (Ty::Ptr { .. }, Ty::Int(_)) | (Ty::Int(_), Ty::Ptr { .. })
                if matches!(op, BinOp::Eq | BinOp::Ne)
                    && (const_value(&l).is_some() || const_value(&r).is_some()) =>
            {
                Ok(node(op, Ty::Bool, l, r, false))
            }
            _ => Err(self.error(span, mismatch(op, &l, &r))),
        }
    }

    /// `l op r` of two strings (`==`, `!=`): `(a, b)` their caps.
    #[allow(clippy::too_many_arguments)]
    fn strings(
        &mut self,
        scope: &Scope,
        op: BinOp,
        l: Expr,
        r: Expr,
        (a, b): (u32, u32),
        (lhs, rhs): (&ast::Expr, &ast::Expr),
        span: Span,
    ) -> Checked<Expr> {
        if !matches!(op, BinOp::Eq | BinOp::Ne) {
            return Err(self.error(span, DiagKind::StringOperator { op: op.symbol() }));
        }
        // `func` is one of the session's functions, and nothing else.
        for (lit, other, lit_span) in [(&l, &r, &lhs.span), (&r, &l, &rhs.span)] {
            if let (ExprKind::Str(bytes), ExprKind::Builtin(b)) = (&lit.kind, &other.kind)
                && *b == super::builtins::FUNC
            {
                self.traced_function(scope, bytes, lit_span.clone())?;
            }
        }
        // A literal longer than what the other side can hold never matches.
        for (lit, other_cap, lit_span) in [(&l, b, &lhs.span), (&r, a, &rhs.span)] {
            if let ExprKind::Str(bytes) = &lit.kind
                && bytes.len() as u32 >= other_cap
            {
                return Err(self.error(
                    lit_span.clone(),
                    DiagKind::StringTooLong {
                        len: bytes.len(),
                        cap: other_cap,
                    },
                ));
            }
        }
        Ok(node(op, Ty::Bool, l, r, false))
    }

    /// A duration and an integer where only two durations go: the error, with the
    /// literal written as a duration when the integer is one.
    fn duration_vs_integer(
        &mut self,
        op: BinOp,
        l: &Expr,
        r: &Expr,
        (lhs, rhs): (&ast::Expr, &ast::Expr),
        span: Span,
    ) -> super::Reported {
        let int_side = if matches!(l.ty, Ty::Int(_)) { l } else { r };
        let mut d = Diagnostic::new(span, DiagKind::DurationVsInteger);
        if let ExprKind::Int(v) = int_side.kind {
            let dur_side = if matches!(l.ty, Ty::Int(_)) { rhs } else { lhs };
            let dur_text = &self.input.source[dur_side.span.clone()];
            let lit = duration_literal(v);
            d = d.hint(if matches!(l.ty, Ty::Duration) {
                format!("write `{dur_text} {} {lit}`", op.symbol())
            } else {
                format!("write `{lit} {} {dur_text}`", op.symbol())
            });
        }
        d = d.hint("durations are written with a unit: 500ns, 250us, 10ms, 2s");
        if let Some(hint) = self.untyped_arg_hint(l, r, "a duration") {
            d = d.hint(hint);
        }
        self.error_with(d)
    }

    /// `l op r` of two durations.
    fn durations(
        &mut self,
        op: BinOp,
        l: Expr,
        r: Expr,
        rhs: &ast::Expr,
        span: Span,
    ) -> Checked<Expr> {
        if op.is_comparison() {
            Ok(node(op, Ty::Bool, l, r, false))
        } else {
            match op {
                BinOp::Add | BinOp::Sub | BinOp::Rem => {
                    if op == BinOp::Rem {
                        self.nonzero_divisor(&r, rhs)?;
                    }
                    Ok(fold(node(op, Ty::Duration, l, r, false)))
                }
                BinOp::Div => {
                    self.nonzero_divisor(&r, rhs)?;
                    // Folded, so `count / (1us / 1ms)` is seen to divide by 0.
                    Ok(fold(node(
                        op,
                        Ty::Int(Scalar {
                            size: 8,
                            signed: false,
                        }),
                        l,
                        r,
                        false,
                    )))
                }
                _ => Err(self.error(span, mismatch(op, &l, &r))),
            }
        }
    }

    /// For a bundle's `$n` that `fslat build` was given no word for (so an integer) where
    /// `wanted` would fit: how to give one.
    fn untyped_arg_hint(&self, l: &Expr, r: &Expr, wanted: &str) -> Option<String> {
        let n = [l, r].into_iter().find_map(|e| match e.kind {
            ExprKind::Arg(n) if n > self.input.opts.args.len() => Some(n),
            _ => None,
        })?;
        Some(format!(
            "a bundle's `${n}` is an integer unless `fslat build` is given an example of it: give {wanted} as its ARG{n} (`fslat build SCRIPT.fsl ARG1 ... -o FILE`)"
        ))
    }

    fn nonzero_divisor(&mut self, r: &Expr, rhs: &ast::Expr) -> Checked<()> {
        if const_value(r) == Some(0) {
            return Err(self.error(rhs.span.clone(), DiagKind::DivisionByZero));
        }
        Ok(())
    }

    /// `latency / 1000`: the bpftrace habit for microseconds, which in fslat is still a
    /// duration (a thousandth of the latency, drawn and printed as one). Refused with the
    /// fslat way: `latency / 1us` is the number of microseconds, `latency` alone is shown
    /// in its own unit.
    fn not_a_unit_conversion(&mut self, r: &Expr, lhs: &ast::Expr, span: Span) -> Checked<()> {
        let unit = match const_value(r) {
            Some(1_000) => "us",
            Some(1_000_000) => "ms",
            Some(1_000_000_000) => "s",
            _ => return Ok(()),
        };
        let by = const_value(r).unwrap_or_default();
        let text = &self.input.source[lhs.span.clone()];
        let d = Diagnostic::new(span, DiagKind::DurationByUnitNumber { by })
            .hint(format!(
                "for a number of {}, write `{text} / 1{unit}`",
                match unit {
                    "us" => "microseconds",
                    "ms" => "milliseconds",
                    _ => "seconds",
                }
            ))
            .hint("a duration alone (`hist(latency)`, `emit latency`) is already shown in ns, us, ms or s as fits");
        Err(self.error_with(d))
    }

    /// `ret < 0` on an unsigned type, or an unsigned value against a negative number.
    fn signedness(
        &mut self,
        op: BinOp,
        l: &Expr,
        lc: Option<i128>,
        r: &Expr,
        rc: Option<i128>,
        span: Span,
    ) -> Checked<()> {
        for (var, c, var_is_left) in [(l, rc, true), (r, lc, false)] {
            let (Ty::Int(s), Some(c)) = (&var.ty, c) else {
                continue;
            };
            if s.signed || const_value(var).is_some() {
                continue;
            }
            let ty = self.unsigned_name(var);
            if c < 0 {
                let d = Diagnostic::new(span, DiagKind::UnsignedVsNegative { ty }).hint(
                    "only signed values (such as `ret` of a function returning `ssize_t` or `int`) can be negative",
                );
                return Err(self.error_with(d));
            }
            if c == 0 {
                // Normalise to `var OP 0`.
                let op = if var_is_left { op } else { flip(op) };
                let always = match op {
                    BinOp::Lt => Some(false),
                    BinOp::Ge => Some(true),
                    _ => None,
                };
                if let Some(always) = always {
                    return Err(self.error(span, DiagKind::UnsignedTautology { ty, always }));
                }
            }
            // `count > 18446744073709551615`, `u8_field == 300`: past the type's largest.
            let max = (1i128 << (8 * u32::from(s.size).min(8))) - 1;
            let op = if var_is_left { op } else { flip(op) };
            let always = match op {
                BinOp::Gt if c >= max => Some(false),
                BinOp::Le if c >= max => Some(true),
                BinOp::Ge | BinOp::Eq if c > max => Some(false),
                BinOp::Lt | BinOp::Ne if c > max => Some(true),
                _ => None,
            };
            if let Some(always) = always {
                return Err(self.error(
                    span,
                    DiagKind::PastTheLargest {
                        ty,
                        always,
                        max: max as u64,
                    },
                ));
            }
        }
        Ok(())
    }

    fn unsigned_name(&self, e: &Expr) -> String {
        match e.ty {
            Ty::Int(s) => format!("u{}", s.size * 8),
            _ => e.ty.describe(),
        }
    }
}

pub(super) fn int_const(v: i128) -> Expr {
    Expr {
        ty: Ty::Int(Scalar {
            size: 8,
            signed: v < 0,
        }),
        kind: ExprKind::Int(v),
    }
}

fn const_value(e: &Expr) -> Option<i128> {
    match e.kind {
        ExprKind::Int(v) => Some(v),
        _ => None,
    }
}

/// Folds arithmetic on two constants, so `10ms * 2` is a constant and `x < -1` sees `-1`.
fn fold(e: Expr) -> Expr {
    let ExprKind::Binary { op, lhs, rhs, .. } = &e.kind else {
        return e;
    };
    let (Some(a), Some(b)) = (const_value(lhs), const_value(rhs)) else {
        return e;
    };
    let v = match op {
        BinOp::Add => a.checked_add(b),
        BinOp::Sub => a.checked_sub(b),
        BinOp::Mul => a.checked_mul(b),
        BinOp::Div => a.checked_div(b),
        BinOp::Rem => a.checked_rem(b),
        BinOp::BitAnd => Some(a & b),
        BinOp::BitOr => Some(a | b),
        BinOp::BitXor => Some(a ^ b),
        BinOp::Shl => u32::try_from(b).ok().filter(|s| *s < 64).map(|s| a << s),
        BinOp::Shr => u32::try_from(b).ok().filter(|s| *s < 64).map(|s| a >> s),
        _ => {
            let r = match op {
                BinOp::Eq => a == b,
                BinOp::Ne => a != b,
                BinOp::Lt => a < b,
                BinOp::Le => a <= b,
                BinOp::Gt => a > b,
                _ => a >= b,
            };
            return Expr {
                ty: Ty::Bool,
                kind: ExprKind::Bool(r),
            };
        }
    };
    // Past the range of a 64-bit value, arithmetic wraps as the C computes it (on __u64),
    // so a folded shift width of `25 * ~2627` is seen, and checked, as what clang sees.
    let in_range = |v: i128| v >= i128::from(i64::MIN) && v <= i128::from(u64::MAX);
    let (x, y) = (a as u64, b as u64);
    let v = match (op, v) {
        (_, Some(v)) if in_range(v) => Some(v),
        (BinOp::Add, _) => Some(i128::from(x.wrapping_add(y))),
        (BinOp::Sub, _) => Some(i128::from(x.wrapping_sub(y))),
        (BinOp::Mul, _) => Some(i128::from(x.wrapping_mul(y))),
        (BinOp::Shl, Some(_)) => Some(i128::from(x << (y & 63))),
        (_, v) => v,
    };
    match v {
        Some(v) if in_range(v) => Expr {
            ty: if e.ty == Ty::Duration {
                Ty::Duration
            } else {
                int_const(v).ty
            },
            kind: ExprKind::Int(v),
        },
        _ => e,
    }
}

fn flip(op: BinOp) -> BinOp {
    match op {
        BinOp::Lt => BinOp::Gt,
        BinOp::Gt => BinOp::Lt,
        BinOp::Le => BinOp::Ge,
        BinOp::Ge => BinOp::Le,
        o => o,
    }
}

/// `10000` → `10us`: the largest unit that divides the number of nanoseconds.
pub fn duration_literal(ns: i128) -> String {
    for (unit, scale) in [("s", 1_000_000_000), ("ms", 1_000_000), ("us", 1_000)] {
        if ns != 0 && ns % scale == 0 {
            return format!("{}{unit}", ns / scale);
        }
    }
    format!("{ns}ns")
}

/// `l op r`, of type `ty`, done signed or not in C.
fn node(op: BinOp, ty: Ty, l: Expr, r: Expr, signed: bool) -> Expr {
    Expr {
        ty,
        kind: ExprKind::Binary {
            op,
            lhs: Box::new(l),
            rhs: Box::new(r),
            signed,
        },
    }
}

/// The error of an operator between types it does not take.
fn mismatch(op: BinOp, l: &Expr, r: &Expr) -> DiagKind {
    DiagKind::Mismatch {
        op: op.symbol(),
        lhs: l.ty.describe(),
        rhs: r.ty.describe(),
    }
}
