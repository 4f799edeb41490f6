//! `on POINT [where C] { actions }`: an event at one point, a kernel function's entry, a
//! BTF tracepoint, a USDT probe or a user function's entry, without a latency (bpftrace's
//! `kprobe:`/`fentry:`, `tracepoint:`, `usdt:` and `uprobe:` probes). It is checked as a
//! session of the point whose every name is read there: the point's parameters and the
//! builtins, not a call's return (`ret`, `latency`, ...).

use super::program::*;
use super::resources::Mode;
use super::{Checker, Scope, phases};
use crate::diag::{DiagKind, Diagnostic};
use crate::syntax::ast;
use crate::traceable::is_glob;

/// Whether `on` names several points, or tracepoints by a glob or a category: the
/// several-tracepoint form (check/tracepoints.rs).
pub fn is_several(on: &ast::OnPoint) -> bool {
    !on.more.is_empty() || (on.tracepoint && (on.category.is_some() || is_glob(&on.name.name)))
}

impl Checker<'_> {
    pub(super) fn on_session(
        &mut self,
        index: usize,
        label: String,
        s: &ast::Session,
    ) -> Option<Session> {
        let on = s.on.as_ref()?;
        if is_several(on) {
            return self.on_several(index, label, s);
        }
        self.now.module = self.kernel_module(s)?;
        let (sig, usdt) = if s.file.is_some() && self.now.module.is_none() {
            // A user function's entry: its file's DWARF names the arguments, as for
            // `session FILE:FUNC`; the uprobe reads them from the registers.
            self.now.user = Some(self.open_user_file(s)?);
            let types = super::functions::Lookup::of(self.input, &self.now).types;
            let mut sig = super::user::function(types, &mut self.whole.diags, &on.name)?;
            sig.ret = 0;
            (sig, None)
        } else {
            self.point(&on.name, on.tracepoint, on.usdt.as_ref())?
        };
        let (params, _) = self.params_of(&sig);
        self.now.shared = params.iter().map(|p| (p.clone(), vec![p.slot])).collect();
        let scope = Scope {
            func: &sig,
            params: &params,
            funcs: std::slice::from_ref(&sig),
            per_func: std::slice::from_ref(&params),
            several: false,
            func_cap: sig.name.len() as u32 + 1,
        };
        let body = self.point_body(&scope, index, &label, s);
        let user = self.now.user.take();
        let target = Target {
            offset: user
                .as_ref()
                .and_then(|u| u.get(&sig.name))
                .map(|f| f.offset),
            ..Target::new(sig.name.clone(), params.iter().map(|p| p.slot).collect())
        };
        Some(body.into_session(Session {
            params,
            // One classic uprobe at the entry, on every kernel: a point has no return.
            user: user.map(|u| UserSession {
                path: u.path().display().to_string(),
                mode: Mode::Uprobe,
            }),
            on: Some(SpanPoint {
                name: on.name.name.clone(),
                tracepoint: on.tracepoint,
                args: sig.params.len(),
                usdt,
            }),
            ..Session::new(index, s.span.clone(), label, sig.name, vec![target])
        }))
    }

    /// The `where` and the actions at a point with no return (an `on` point, a profile's
    /// sample): every name is known there, and what the split leaves for "return" (a
    /// stack) runs in the same program, after the rest of the filter.
    pub(super) fn point_body(
        &mut self,
        scope: &Scope,
        index: usize,
        label: &str,
        s: &ast::Session,
    ) -> PointBody {
        self.now.at_point = true;
        let filter = s
            .predicate
            .as_ref()
            .and_then(|p| self.condition(scope, p).ok());
        let (events, aggregations) = self.actions(scope, index, label, s, false);
        self.now.at_point = false;
        let (entry_filter, return_filter) = match filter {
            Some(f) => phases::split(f),
            None => (None, None),
        };
        PointBody {
            entry_filter,
            return_filter,
            events,
            aggregations,
        }
    }

    /// A name of a call's return (`latency`, `oncpu`, ...) at an `on` point: refused.
    pub(super) fn at_point_only(&mut self, name: &str, span: ast::Span) -> super::Reported {
        let d = Diagnostic::new(span, DiagKind::AtPointOnly { name: name.into() }).hint(
            "a call's latency is a `session FUNC`'s; the time between two points is a `span START(KEY) -> END(KEY)`'s",
        );
        self.error_with(d)
    }
}

/// What `point_body` checked: a point's filter, split, and its actions.
pub(super) struct PointBody {
    pub entry_filter: Option<Expr>,
    pub return_filter: Option<Expr>,
    pub events: Vec<EventSchema>,
    pub aggregations: Vec<Aggregation>,
}

impl PointBody {
    /// `session` with this filter and these actions.
    pub(super) fn into_session(self, session: Session) -> Session {
        Session {
            entry_filter: self.entry_filter,
            return_filter: self.return_filter,
            events: self.events,
            aggregations: self.aggregations,
            ..session
        }
    }
}
