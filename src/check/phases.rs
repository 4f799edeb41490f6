//! The phase split: which parts of a `where` are decided at entry and which at return.

use super::program::*;
use crate::syntax::ast::{BinOp, UnOp};

/// Splits a predicate into what can be decided at entry and what must wait for return.
///
/// Top-level `and` terms that use neither `latency` nor `ret` are decided at entry only.
/// A term that mixes phases (`tgid == 1 or latency > 1ms`) is evaluated whole at return,
/// and its entry-only part also filters at entry where that is sound (`tgid == 1 or
/// comm == "x"` inside a term with `latency` still lets entry drop calls that match
/// neither).
pub(super) fn split_phases(pred: Expr) -> (Option<Expr>, Option<Expr>) {
    let mut entry = Vec::new();
    let mut ret = Vec::new();
    for term in conjuncts(pred) {
        if term.at_return() {
            if let Some(approx) = entry_approximation(&term) {
                entry.push(approx);
            }
            ret.push(term);
        } else {
            entry.push(term);
        }
    }
    (conjoin(entry), conjoin(ret))
}

/// The condition `e` (negated when `negate`) with every `not` pushed down to the
/// comparisons (De Morgan), so `not (tgid == 1 or latency > 1ms)` becomes
/// `tgid != 1 and not (latency > 1ms)`... with its entry part decidable at entry.
pub(super) fn push_not(e: Expr, negate: bool) -> Expr {
    let bool_node = |op, lhs: Expr, rhs: Expr, signed| Expr {
        ty: Ty::Bool,
        kind: ExprKind::Binary {
            op,
            lhs: Box::new(lhs),
            rhs: Box::new(rhs),
            signed,
        },
    };
    match e.kind {
        ExprKind::Unary {
            op: UnOp::Not,
            expr,
        } if expr.ty == Ty::Bool => push_not(*expr, !negate),
        ExprKind::Binary {
            op: op @ (BinOp::And | BinOp::Or),
            lhs,
            rhs,
            signed,
        } => {
            let op = match (op, negate) {
                (BinOp::And, true) => BinOp::Or,
                (BinOp::Or, true) => BinOp::And,
                (op, _) => op,
            };
            bool_node(op, push_not(*lhs, negate), push_not(*rhs, negate), signed)
        }
        ExprKind::Binary {
            op,
            lhs,
            rhs,
            signed,
        } if negate && op.is_comparison() => {
            let inverse = match op {
                BinOp::Eq => BinOp::Ne,
                BinOp::Ne => BinOp::Eq,
                BinOp::Lt => BinOp::Ge,
                BinOp::Ge => BinOp::Lt,
                BinOp::Le => BinOp::Gt,
                _ => BinOp::Le,
            };
            bool_node(inverse, *lhs, *rhs, signed)
        }
        ExprKind::Bool(b) => Expr {
            ty: Ty::Bool,
            kind: ExprKind::Bool(b != negate),
        },
        kind if negate => Expr {
            ty: Ty::Bool,
            kind: ExprKind::Unary {
                op: UnOp::Not,
                expr: Box::new(Expr { ty: e.ty, kind }),
            },
        },
        kind => Expr { ty: e.ty, kind },
    }
}

fn conjuncts(e: Expr) -> Vec<Expr> {
    match e.kind {
        ExprKind::Binary {
            op: BinOp::And,
            lhs,
            rhs,
            ..
        } => {
            let mut v = conjuncts(*lhs);
            v.extend(conjuncts(*rhs));
            v
        }
        // A constant `true` filters nothing.
        ExprKind::Bool(true) => Vec::new(),
        _ => vec![e],
    }
}

fn conjoin(mut terms: Vec<Expr>) -> Option<Expr> {
    let first = if terms.is_empty() {
        return None;
    } else {
        terms.remove(0)
    };
    Some(terms.into_iter().fold(first, |acc, t| Expr {
        ty: Ty::Bool,
        kind: ExprKind::Binary {
            op: BinOp::And,
            lhs: Box::new(acc),
            rhs: Box::new(t),
            signed: false,
        },
    }))
}

/// A condition implied by `e` that entry can check, or `None` if entry can't rule
/// anything out.
fn entry_approximation(e: &Expr) -> Option<Expr> {
    if !e.at_return() {
        return Some(e.clone());
    }
    let ExprKind::Binary { op, lhs, rhs, .. } = &e.kind else {
        return None;
    };
    let (l, r) = (entry_approximation(lhs), entry_approximation(rhs));
    let join = |op, l: Expr, r: Expr| Expr {
        ty: Ty::Bool,
        kind: ExprKind::Binary {
            op,
            lhs: Box::new(l),
            rhs: Box::new(r),
            signed: false,
        },
    };
    match op {
        BinOp::And => match (l, r) {
            (Some(l), Some(r)) => Some(join(BinOp::And, l, r)),
            (one, None) | (None, one) => one,
        },
        BinOp::Or => Some(join(BinOp::Or, l?, r?)),
        _ => None,
    }
}
