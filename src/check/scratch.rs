//! Room for a session's strings and keys. The generated program reads each distinct string
//! it compares once per phase, into a small stack budget or the program's per-CPU scratch
//! map, and builds keys of `SCRATCH_FROM` bytes or more there too (`check::resources`
//! holds the policy's numbers, which `codegen::expr` places values by). A per-CPU map
//! value holds at most 32 KiB: a session that needs more is refused here, before clang,
//! rather than failing to load.

use super::program::*;
use crate::syntax::ast::BinOp;
use std::collections::HashSet;

pub use super::resources::SCRATCH_BYTES;
use super::resources::SCRATCH_FROM;

/// `(phase, bytes)` when a phase of `s` needs more than SCRATCH_BYTES.
pub(super) fn too_big(s: &Session) -> Option<(&'static str, u32)> {
    let mut entry = Phase::default();
    if let Some(f) = &s.entry_filter {
        entry.walk(f);
    }
    let mut ret = Phase::default();
    if let Some(f) = &s.return_filter {
        ret.walk(f);
    }
    for f in s.event.iter().flat_map(|e| &e.fields) {
        ret.walk(&f.expr);
    }
    for a in &s.aggregations {
        if a.key_size >= SCRATCH_FROM {
            ret.bytes += a.key_size.div_ceil(8) * 8;
        }
        for k in &a.keys {
            ret.walk(&k.expr);
        }
        if let Some(arg) = &a.arg {
            ret.walk(arg);
        }
    }
    [("at entry", entry.bytes), ("at return", ret.bytes)]
        .into_iter()
        .find(|(_, b)| *b > SCRATCH_BYTES)
}

/// The distinct strings one phase compares, and their bytes (8-aligned, as allocated).
#[derive(Default)]
struct Phase {
    seen: HashSet<String>,
    bytes: u32,
}

impl Phase {
    fn walk(&mut self, e: &Expr) {
        match &e.kind {
            ExprKind::Binary { op, lhs, rhs, .. } => {
                if matches!(op, BinOp::Eq | BinOp::Ne) {
                    for side in [lhs, rhs] {
                        self.string(side);
                    }
                }
                self.walk(lhs);
                self.walk(rhs);
            }
            ExprKind::Unary { expr, .. } | ExprKind::Deref(expr) | ExprKind::Path(expr) => {
                self.walk(expr)
            }
            ExprKind::Read { base, .. } => self.walk(base),
            _ => {}
        }
    }

    fn string(&mut self, e: &Expr) {
        let Ty::Str { cap } = e.ty else { return };
        if matches!(e.kind, ExprKind::Str(_) | ExprKind::Builtin(Builtin::Func)) {
            return;
        }
        if self.seen.insert(format!("{:?}", e.kind)) {
            self.bytes = self.bytes.saturating_add(cap.div_ceil(8) * 8);
        }
    }
}
