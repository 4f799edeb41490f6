//! `lhist(expr, min, max, step)`: a linear histogram's bounds, constants checked as
//! bpftrace checks them.

use super::program::*;
use super::{Checked, Checker, Scope};
use crate::aggregate::Linear;
use crate::diag::DiagKind;
use crate::syntax::ast;

/// Most buckets between min and max (bpftrace's limit too).
pub const MAX_LHIST_BUCKETS: u64 = 1000;

impl Checker<'_> {
    /// The buckets of `a`, an `lhist` whose first argument checked as `arg`: min, max and
    /// step are constants of the argument's kind (durations for a duration).
    pub(super) fn linear(
        &mut self,
        scope: &Scope,
        a: &ast::Aggregate,
        arg: Option<&Expr>,
    ) -> Checked<Linear> {
        let duration = arg.is_some_and(|e| e.ty == Ty::Duration);
        let mut bounds = [0u64; 3];
        for ((what, e), bound) in ["min", "max", "step"]
            .into_iter()
            .zip(&a.more_args)
            .zip(&mut bounds)
        {
            let v = self.compiled_in(scope, e, "lhist's bounds")?;
            let value = match (&v.kind, &v.ty) {
                (ExprKind::Int(n), Ty::Duration) if duration => Some(*n),
                // Zero is zero in every unit: `lhist(latency, 0, 100us, 10us)`, as a
                // bpftrace user writes it.
                (ExprKind::Int(0), Ty::Int(_)) => Some(0),
                (ExprKind::Int(n), Ty::Int(_)) if !duration => Some(*n),
                _ => None,
            };
            let kind = if duration { "a duration" } else { "an integer" };
            let Some(n) = value else {
                return Err(self.error(
                    e.span.clone(),
                    DiagKind::BadLhist {
                        reason: format!("{what} must be a constant, {kind} like the value"),
                    },
                ));
            };
            *bound = match u64::try_from(n) {
                Ok(n) if n <= i64::MAX as u64 => n,
                _ => {
                    return Err(self.error(
                        e.span.clone(),
                        DiagKind::BadLhist {
                            reason: format!("{what} must be at least 0 and below 2^63"),
                        },
                    ));
                }
            };
        }
        let [min, max, step] = bounds;
        let reason = if step == 0 {
            Some("step must be more than 0".to_string())
        } else if max <= min {
            Some("min must be less than max".to_string())
        } else if max - min < step {
            Some("step is larger than the range from min to max".to_string())
        } else if (max - min) / step > MAX_LHIST_BUCKETS {
            Some(format!(
                "{} buckets from min to max; at most {MAX_LHIST_BUCKETS}: use a larger step",
                (max - min) / step
            ))
        } else {
            None
        };
        if let Some(reason) = reason {
            let span = a.more_args[0].span.start..a.more_args[2].span.end;
            return Err(self.error(span, DiagKind::BadLhist { reason }));
        }
        Ok(Linear { min, max, step })
    }
}
