//! `profile RATE [where C] { actions }`: a sample of what each CPU runs, RATE times a
//! second (bpftrace's `profile:hz:N`, BCC's `profile`). It is checked as an `on` point
//! without parameters: every name is read at the sample (the builtins, `idle`, the
//! stacks), none of a call's (`latency`, `ret`, ...).

use super::program::*;
use super::{Checker, Scope};
use crate::diag::DiagKind;
use crate::syntax::ast;

/// The kernel's CPU clock samples at most every 10us (`perf_swevent_init_hrtimer`
/// raises a shorter period to that); a faster rate would quietly be this one.
pub const MIN_PERIOD_NS: u64 = 10_000;

impl Checker<'_> {
    pub(super) fn profile_session(
        &mut self,
        index: usize,
        label: String,
        s: &ast::Session,
    ) -> Option<Session> {
        let written = s.profile.as_ref()?;
        let rate = match written.rate {
            ast::Rate::Hertz(hz) => Rate::Hertz(hz),
            ast::Rate::Period(ns) => Rate::Period(ns),
        };
        let fits = match rate {
            Rate::Hertz(hz) => (1..=1_000_000_000 / MIN_PERIOD_NS).contains(&hz),
            Rate::Period(ns) => ns >= MIN_PERIOD_NS,
        };
        if !fits {
            self.error(
                written.span.clone(),
                DiagKind::ProfileRate {
                    rate: rate.to_string(),
                },
            );
            return None;
        }
        let sig = self.bare_item(s);
        let scope = Scope::bare(&sig);
        let body = self.point_body(&scope, index, &label, s);
        let target = Target::new(sig.name.clone(), Vec::new());
        Some(body.into_session(Session {
            profile: Some(rate),
            ..Session::new(index, s.span.clone(), label, sig.name, vec![target])
        }))
    }
}
