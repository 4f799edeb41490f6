//! The phase split: which parts of a `where` are decided at entry and which at return.

use super::program::*;
use crate::syntax::ast::{BinOp, UnOp};

/// Splits a typed `where` condition into what entry decides and what must wait for
/// return: `(entry, return)`, either `None` when it filters nothing.
///
/// `not` is first pushed down to the comparisons. Top-level `and` terms that use
/// neither `latency` nor `ret` are decided at entry only. A term that mixes phases
/// (`tgid == 1 or latency > 1ms`) is evaluated whole at return, and its entry-only part
/// also filters at entry where that is sound (`tgid == 1 or comm == "x"` inside a term
/// with `latency` still lets entry drop calls that match neither).
pub(super) fn split(condition: Expr) -> (Option<Expr>, Option<Expr>) {
    let mut entry = Vec::new();
    let mut ret = Vec::new();
    for term in conjuncts(push_not(condition, false)) {
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
fn push_not(e: Expr, negate: bool) -> Expr {
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
    let join = Expr::logic;
    match op {
        BinOp::And => match (l, r) {
            (Some(l), Some(r)) => Some(join(BinOp::And, l, r)),
            (one, None) | (None, one) => one,
        },
        BinOp::Or => Some(join(BinOp::Or, l?, r?)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::btf::Fixture;

    /// `condition` as the checker types it in a session of `vfs_read`; emitted as a value,
    /// so the checker hands it over whole rather than split.
    fn typed(condition: &str) -> Expr {
        let script = format!("session vfs_read {{ emit ({condition}) as c }}");
        let ast = crate::syntax::parse(&script).expect("parses");
        let mut program = crate::check::check(&ast, &script, &Fixture::new()).expect("checks");
        let event = program.sessions.remove(0).events.remove(0);
        event.fields.into_iter().next().expect("one field").expr
    }

    /// A predicate in the script's own notation, every operation parenthesised.
    fn show(e: &Expr) -> String {
        match &e.kind {
            ExprKind::Int(v) if e.ty == Ty::Duration => crate::check::duration_literal(*v),
            ExprKind::Int(v) => v.to_string(),
            ExprKind::Bool(b) => b.to_string(),
            ExprKind::Str(s) => format!("{:?}", String::from_utf8_lossy(s)),
            ExprKind::Builtin(b) => format!("{b:?}").to_lowercase(),
            ExprKind::Param(i) => format!("arg{i}"),
            ExprKind::Ret => "ret".into(),
            ExprKind::Unary {
                op: UnOp::Not,
                expr,
            } => format!("(not {})", show(expr)),
            ExprKind::Unary { op, expr } => format!("{op:?}({})", show(expr)),
            ExprKind::Binary { op, lhs, rhs, .. } => {
                format!("({} {} {})", show(lhs), op.symbol(), show(rhs))
            }
            other => format!("{other:?}"),
        }
    }

    #[test]
    fn entry_decides_what_needs_neither_latency_nor_ret_and_return_the_rest() {
        // (condition, entry predicate, return predicate)
        let cases = [
            ("true", None, None),
            ("tgid == 1", Some("(tgid == 1)"), None),
            ("latency > 1ms", None, Some("(latency > 1ms)")),
            (
                "tgid == 1 and latency > 1ms",
                Some("(tgid == 1)"),
                Some("(latency > 1ms)"),
            ),
            (
                "tgid == 1 and comm == \"x\" and ret < 0",
                Some("((tgid == 1) and (comm == \"x\"))"),
                Some("(ret < 0)"),
            ),
            ("true and tgid == 1", Some("(tgid == 1)"), None),
            // A mixed term: entry cannot rule out a call that might match at return.
            (
                "tgid == 1 or latency > 1ms",
                None,
                Some("((tgid == 1) or (latency > 1ms))"),
            ),
            // ... unless every alternative has an entry part.
            (
                "(tgid == 1 and latency > 1ms) or comm == \"x\"",
                Some("((tgid == 1) or (comm == \"x\"))"),
                Some("(((tgid == 1) and (latency > 1ms)) or (comm == \"x\"))"),
            ),
            (
                "(tgid == 1 and latency > 1ms) or (pid == 2 and ret > 0)",
                Some("((tgid == 1) or (pid == 2))"),
                Some("(((tgid == 1) and (latency > 1ms)) or ((pid == 2) and (ret > 0)))"),
            ),
            // `not` is pushed down to the comparisons first (De Morgan).
            (
                "not (tgid == 1 or latency > 1ms)",
                Some("(tgid != 1)"),
                Some("(latency <= 1ms)"),
            ),
            (
                "not (tgid == 1 and comm == \"x\")",
                Some("((tgid != 1) or (comm != \"x\"))"),
                None,
            ),
            ("not not (tgid < 5)", Some("(tgid < 5)"), None),
            (
                "not (ret >= 0 or tgid > 7)",
                Some("(tgid <= 7)"),
                Some("(ret < 0)"),
            ),
            ("not count", Some("(not arg2)"), None),
        ];
        for (condition, entry, ret) in cases {
            let (e, r) = split(typed(condition));
            assert_eq!(
                e.as_ref().map(show).as_deref(),
                entry,
                "entry of {condition}"
            );
            assert_eq!(
                r.as_ref().map(show).as_deref(),
                ret,
                "return of {condition}"
            );
            assert!(!e.is_some_and(|e| e.at_return()), "{condition}");
        }
    }
}
