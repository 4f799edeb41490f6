//! `offcpu [where C] { actions }`: an event each time a thread comes back on a CPU, for
//! the stretch it spent off it (BCC's `offcputime`, Inspektor Gadget's `profile_offcpu`).
//!
//! The scheduler's switch hook runs as the thread *leaving*: that is where the stretch
//! starts and where the thread's own names are true (its stacks, `comm`, `tgid`,
//! `cgroup`...). So the item is checked as a call whose entry is the switch out and whose
//! return is the switch back in: the `where` terms without `latency` or `runq` decide at
//! the switch out (before any stack is read), and every other name the actions use is
//! read there and saved with the stretch (an entry value), since the switch in runs as
//! another thread. `latency` (the stretch) and `runq` (its runnable part) are the
//! return's.

use super::program::*;
use super::{Checked, Checker, Scope};
use crate::diag::{DiagKind, Diagnostic, Span};
use crate::syntax::ast;

/// The names of an offcpu stretch known only when the thread comes back.
const AT_SWITCH_IN: [&str; 2] = ["latency", "runq"];

impl Checker<'_> {
    pub(super) fn offcpu_session(
        &mut self,
        index: usize,
        label: String,
        s: &ast::Session,
    ) -> Option<Session> {
        let sig = self.bare_item(s);
        let scope = Scope::bare(&sig);
        self.now.in_offcpu = true;
        self.now.at_point = true;
        let filter = s
            .predicate
            .as_ref()
            .and_then(|p| self.condition(&scope, p).ok());
        self.now.offcpu_saving = true;
        let (events, aggregations) = self.actions(&scope, index, &label, s, false);
        self.now.offcpu_saving = false;
        self.now.at_point = false;
        self.now.in_offcpu = false;
        let (entry_filter, return_filter) = match filter {
            Some(f) => super::phases::split(f),
            None => (None, None),
        };
        if let Some(f) = &return_filter {
            let mut mixed = false;
            f.visit(&mut |x| {
                mixed |= matches!(x.kind, ExprKind::Builtin(b) if !AT_SWITCH_IN.contains(&b.name()))
            });
            if mixed {
                let at = s
                    .predicate
                    .as_ref()
                    .map_or(s.span.clone(), |p| p.span.clone());
                let d = Diagnostic::new(at, DiagKind::OffcpuMixedWhere).hint(
                    "join the terms on `latency` or `runq` to the others with `and`: `where comm == \"x\" and latency > 1ms`",
                );
                self.error_with(d);
                return None;
            }
        }
        let target = Target::new(sig.name.clone(), Vec::new());
        Some(Session {
            entry_filter,
            return_filter,
            events,
            aggregations,
            entry_values: std::mem::take(&mut self.now.entry_values),
            offcpu: true,
            ..Session::new(index, s.span.clone(), label, sig.name, vec![target])
        })
    }

    /// A builtin named in an offcpu item: `latency` and `runq` are the stretch's (read at
    /// the switch in); the thread's other names, in the actions, are read at the switch
    /// out and saved. `None`: the name is checked as anywhere else.
    pub(super) fn offcpu_name(
        &mut self,
        scope: &Scope,
        def: Builtin,
        name: &str,
        span: Span,
    ) -> Option<Checked<Expr>> {
        if !self.now.in_offcpu {
            return None;
        }
        if AT_SWITCH_IN.contains(&def.name()) {
            return Some(Ok(Expr {
                ty: Ty::Duration,
                kind: ExprKind::Builtin(def),
            }));
        }
        if !self.now.offcpu_saving {
            return None;
        }
        self.now.offcpu_saving = false;
        let read = self.name(scope, name, span.clone());
        self.now.offcpu_saving = true;
        Some(read.and_then(|v| self.offcpu_saved(v, span)))
    }

    /// `v`, a thread's name read at the switch out, as the switch in reads it back.
    pub(super) fn offcpu_saved(&mut self, v: Expr, span: Span) -> Checked<Expr> {
        if !self.now.offcpu_saving
            || matches!(v.kind, ExprKind::Builtin(b) if AT_SWITCH_IN.contains(&b.name()))
        {
            return Ok(v);
        }
        self.save_entry_value(v, span)
    }
}
