//! The tracepoints of `on tp:A, tp:B` and `on tp:CATEGORY:GLOB` (bpftrace's
//! `tracepoint:sched:sched*`): each point a name or a glob over the kernel's BTF
//! tracepoints, the category matched against tracefs (BTF does not carry it). Each
//! tracepoint is one program at the point; `func` (and `probe`) is its name.

use super::program::*;
use super::{Checker, Scope};
use crate::btf::FuncSig;
use crate::diag::{DiagKind, Diagnostic};
use crate::syntax::ast;
use crate::traceable::{glob_match, is_glob};

/// The most tracepoints one `on` may name: each is a program of its own, loaded and
/// attached one by one (`tp:*` would be about two thousand).
pub const MAX_ON_TRACEPOINTS: usize = 128;

/// The hint for a system call's own tracepoints, which are tracefs events without BTF.
const SYSCALL_HINT: &str = "a system call's `sys_enter_NAME`/`sys_exit_NAME` tracepoints have no BTF: use the raw `tp:sys_enter` (`where id == N`) or the system call's function (`on __x64_sys_NAME`; `fslat -l '*sys_NAME'`)";

impl Checker<'_> {
    /// `on` of several tracepoints (`on::is_several`): one session of them, as a session of
    /// several functions is: a parameter is read where every tracepoint has it, `func`
    /// and `probe` are the tracepoint's name; one program each.
    pub(super) fn on_several(
        &mut self,
        index: usize,
        label: String,
        s: &ast::Session,
    ) -> Option<Session> {
        let funcs = self.on_tracepoints(s.on.as_ref()?)?;
        let per_func: Vec<Vec<Param>> = funcs.iter().map(|f| self.params_of(f).0).collect();
        self.now.shared = Self::common_params(&per_func);
        let params: Vec<Param> = self.now.shared.iter().map(|(p, _)| p.clone()).collect();
        let scope = Scope {
            func: &funcs[0],
            params: &params,
            funcs: &funcs,
            per_func: &per_func,
            several: true,
            func_cap: funcs.iter().map(|f| f.name.len() as u32 + 1).max()?,
        };
        let body = self.point_body(&scope, index, &label, s);
        let mut targets = self.targets(&funcs, &vec![0; funcs.len()]);
        for (t, f) in targets.iter_mut().zip(&funcs) {
            t.args = f.params.len();
        }
        Some(body.into_session(Session {
            params: self.now.shared.iter().map(|(p, _)| p.clone()).collect(),
            several: true,
            on: Some(SpanPoint {
                name: funcs[0].name.clone(),
                tracepoint: true,
                args: funcs[0].params.len(),
                usdt: None,
            }),
            ..Session::new(index, s.span.clone(), label, funcs[0].name.clone(), targets)
        }))
    }

    /// The tracepoints `on`'s points name, in the order written, each once.
    pub(super) fn on_tracepoints(&mut self, on: &ast::OnPoint) -> Option<Vec<FuncSig>> {
        let points: Vec<&ast::OnPoint> = std::iter::once(on).chain(&on.more).collect();
        if let Some(p) = points.iter().find(|p| !p.tracepoint) {
            let d = Diagnostic::new(
                p.name.span.clone(),
                DiagKind::OnListNotTracepoint {
                    name: p.name.name.clone(),
                },
            )
            .hint("several kernel functions are a `session A, B` (or one `on` each)");
            self.error_with(d);
            return None;
        }
        let all = self.types().tracepoint_names();
        let mut names: Vec<String> = Vec::new();
        for p in points {
            for name in self.point_matches(p, &all)? {
                if !names.contains(&name) {
                    names.push(name);
                }
            }
        }
        if names.len() > MAX_ON_TRACEPOINTS {
            let at = on.name.span.start..on.more.last().unwrap_or(on).name.span.end;
            self.error(
                at,
                DiagKind::TooManyTracepoints {
                    count: names.len(),
                    max: MAX_ON_TRACEPOINTS,
                },
            );
            return None;
        }
        names.iter().map(|n| self.types().tracepoint(n)).collect()
    }

    /// The BTF tracepoints one point matches (`all`: every one, sorted); an error when
    /// none does.
    fn point_matches(&mut self, p: &ast::OnPoint, all: &[String]) -> Option<Vec<String>> {
        let glob = &p.name.name;
        let (written, candidates) = match &p.category {
            None if !is_glob(glob) => {
                // One exact name: the error of a single `tp:NAME`.
                return self.kernel_point(&p.name, true).map(|s| vec![s.name]);
            }
            None => (
                glob.clone(),
                all.iter()
                    .filter(|n| glob_match(glob, n))
                    .cloned()
                    .collect(),
            ),
            Some(category) => {
                let Some(events) = self.types().tracefs_events() else {
                    let d = Diagnostic::new(
                        category.span.clone(),
                        DiagKind::TracefsUnreadable {
                            category: category.name.clone(),
                        },
                    )
                    .hint(format!(
                        "tracepoint names are unique without their category: write `tp:{glob}`"
                    ));
                    self.error_with(d);
                    return None;
                };
                let found: Vec<String> = events
                    .into_iter()
                    .filter(|(c, n)| glob_match(&category.name, c) && glob_match(glob, n))
                    .map(|(_, n)| n)
                    .collect();
                (format!("{}:{glob}", category.name), found)
            }
        };
        let (btf, other): (Vec<String>, Vec<String>) = candidates
            .into_iter()
            .partition(|n| all.binary_search(n).is_ok());
        if btf.is_empty() {
            let span = match &p.category {
                Some(c) => c.span.start..p.name.span.end,
                None => p.name.span.clone(),
            };
            let mut d = Diagnostic::new(span, DiagKind::NoTracepointMatches { pattern: written });
            d = match other.first() {
                Some(n) if n.starts_with("sys_e") => d.hint(SYSCALL_HINT),
                Some(n) => d.hint(format!(
                    "`{n}` is a tracefs event without BTF (no `btf_trace_{n}`)"
                )),
                None => d.hint("`ls /sys/kernel/tracing/events/*/` names the kernel's tracepoints; BTF ones have a `btf_trace_NAME` type"),
            };
            self.error_with(d);
            return None;
        }
        Some(btf)
    }

    /// A `tp:NAME` that is not a BTF tracepoint: a system call's gets its own hint.
    pub(super) fn unknown_tracepoint(&mut self, name: &ast::Ident) {
        let hint = if name.name.starts_with("sys_enter_") || name.name.starts_with("sys_exit_") {
            SYSCALL_HINT
        } else {
            "`ls /sys/kernel/tracing/events/*/` names the kernel's tracepoints; BTF ones have a `btf_trace_NAME` type"
        };
        let d = Diagnostic::new(
            name.span.clone(),
            DiagKind::UnknownTracepoint {
                name: name.name.clone(),
            },
        )
        .hint(hint);
        self.error_with(d);
    }
}
