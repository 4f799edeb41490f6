//! Spans: `span START(KEY) [where C1], ... -> END(KEY) [where C2] { actions }`. STARTs and
//! END are a kernel function's entry, a BTF tracepoint or a USDT probe. A span is checked
//! as a session of END whose "entry" is its STARTs: each START's names are checked in its
//! scope (its key, its `where` and every `start.NAME`, saved with the start time as
//! `entry()` values are), END's in END's. The session's parameters are END's then each
//! START's, so one `Param(i)` names any of them.

use super::program::*;
use super::{Checked, Checker, Scope, phases};
use crate::btf::FuncSig;
use crate::diag::{DiagKind, Diagnostic};
use crate::syntax::ast;

/// A span's START while its END is checked: what `start.NAME` reads there.
pub(super) struct Start {
    func: FuncSig,
    params: Vec<Param>,
    /// Where START's parameters begin in the session's parameters.
    offset: usize,
}

impl Checker<'_> {
    pub(super) fn span_session(
        &mut self,
        index: usize,
        label: String,
        s: &ast::Session,
    ) -> Option<Session> {
        let ends = s.ends.as_ref()?;
        let start_sigs: Vec<Option<(FuncSig, Option<UsdtPoint>)>> =
            ends.starts.iter().map(|p| self.span_point(p)).collect();
        let end_sig = self.span_point(&ends.end);
        let (start_sigs, start_usdts): (Vec<FuncSig>, Vec<Option<UsdtPoint>>) = start_sigs
            .into_iter()
            .collect::<Option<Vec<_>>>()?
            .into_iter()
            .unzip();
        let (end_sig, end_usdt) = end_sig?;
        self.now.in_span = true;
        let (end_params, _) = self.params_of(&end_sig);
        let (starts, checked) = self.span_starts(&start_sigs, &ends.starts, end_params.len());

        // END: its key, its `where` (split at the start's lookup) and the actions.
        self.now.span_start = Some(starts);
        let end_scope = Scope {
            func: &end_sig,
            params: &end_params,
            funcs: std::slice::from_ref(&end_sig),
            per_func: std::slice::from_ref(&end_params),
            several: false,
            func_cap: end_sig.name.len() as u32 + 1,
        };
        self.now.shared = end_params
            .iter()
            .map(|p| (p.clone(), vec![p.slot]))
            .collect();
        let end_key = self.span_key(&end_scope, &ends.end.key, 0);
        self.now.span_by_thread = by_thread(&end_key) && checked.iter().all(|(k, _)| by_thread(k));
        let (entry_filter, return_filter) = match &s.predicate {
            Some(p) => match self.condition(&end_scope, p) {
                Ok(e) => phases::split(e),
                Err(_) => (None, None),
            },
            None => (None, None),
        };
        let (events, aggregations) = self.actions(&end_scope, index, &label, s, false);
        let starts = self.now.span_start.take().unwrap_or_default();
        self.now.in_span = false;
        self.now.span_by_thread = false;

        let end_key = end_key.ok()?;
        let mut keyed = Vec::new();
        for (key, filter) in checked {
            keyed.push((key.ok()?, filter.ok()?));
        }
        for ((key, _), written) in keyed.iter().zip(&ends.starts) {
            if !same_key_type(&key.ty, &end_key.ty) {
                self.span_key_mismatch(ends, written, key, &end_key);
                return None;
            }
        }
        let mut params = end_params.clone();
        for start in &starts {
            params.extend(start.params.iter().cloned());
        }
        let target = Target::new(
            end_sig.name.clone(),
            params.iter().map(|p| p.slot).collect(),
        );
        let entry_values = std::mem::take(&mut self.now.entry_values);
        let starts = self.span_start_points(
            keyed,
            &ends.starts,
            (&start_sigs, start_usdts),
            &entry_values,
        );
        Some(Session {
            params,
            entry_filter,
            return_filter,
            events,
            aggregations,
            entry_values,
            span: Some(SpanPoints {
                starts,
                end: point(&ends.end, &end_sig, end_usdt),
                end_key,
            }),
            ..Session::new(
                index,
                s.span.clone(),
                label,
                end_sig.name.clone(),
                vec![target],
            )
        })
    }

    /// Each START: its key and its `where`, in its own names, all known at that point.
    /// Its parameters follow END's (`first` of them) and the earlier STARTs' in the
    /// session's.
    #[allow(clippy::type_complexity)]
    fn span_starts(
        &mut self,
        sigs: &[FuncSig],
        written: &[ast::SpanPoint],
        first: usize,
    ) -> (Vec<Start>, Vec<(Checked<Expr>, Checked<Option<Expr>>)>) {
        let mut starts = Vec::new();
        let mut checked = Vec::new();
        let mut offset = first;
        for (sig, written) in sigs.iter().zip(written) {
            let (params, _) = self.params_of(sig);
            let scope = Scope {
                func: sig,
                params: &params,
                funcs: std::slice::from_ref(sig),
                per_func: std::slice::from_ref(&params),
                several: false,
                func_cap: sig.name.len() as u32 + 1,
            };
            let key = self.span_key(&scope, &written.key, offset);
            let filter = match &written.predicate {
                Some(p) => self
                    .condition(&scope, p)
                    .and_then(|c| self.at_start(c, p, offset))
                    .map(Some),
                None => Ok(None),
            };
            checked.push((key, filter));
            starts.push(Start {
                func: sig.clone(),
                params: params.clone(),
                offset,
            });
            offset += params.len();
        }
        (starts, checked)
    }

    /// The checked STARTs, each with what it saves: the first START's values are
    /// `entry_values`, the others' those computed in their names.
    fn span_start_points(
        &mut self,
        keyed: Vec<(Expr, Option<Expr>)>,
        written: &[ast::SpanPoint],
        (sigs, usdts): (&[FuncSig], Vec<Option<UsdtPoint>>),
        entry_values: &[Expr],
    ) -> Vec<SpanStart> {
        let at_others = std::mem::take(&mut self.now.entry_at_others);
        keyed
            .into_iter()
            .zip(written.iter().zip(sigs).zip(usdts))
            .enumerate()
            .map(|(k, ((key, filter), ((written, sig), usdt)))| SpanStart {
                point: point(written, sig, usdt),
                key,
                filter,
                values: match k {
                    0 => entry_values.to_vec(),
                    _ => at_others.iter().map(|o| o[k - 1].clone()).collect(),
                },
            })
            .collect()
    }

    /// A START's key and END's are of different types: the error.
    fn span_key_mismatch(
        &mut self,
        ends: &ast::SpanEnds,
        start: &ast::SpanPoint,
        start_key: &Expr,
        end_key: &Expr,
    ) {
        let d = Diagnostic::new(
            ends.end.key.span.clone(),
            DiagKind::SpanKeyMismatch {
                start: start_key.ty.describe(),
                end: end_key.ty.describe(),
            },
        )
        .hint(format!(
            "START's key is `{}`: pick keys of one type at every point (a pid, a pointer to the same struct)",
            self.input.source.get(start.key.span.clone()).unwrap_or("?")
        ));
        self.error_with(d);
    }

    /// START's or END's function, tracepoint or USDT probe, by exact name.
    fn span_point(&mut self, p: &ast::SpanPoint) -> Option<(FuncSig, Option<UsdtPoint>)> {
        self.point(&p.name, p.tracepoint, p.usdt.as_ref())
    }

    /// A kernel function's entry (by exact name), a BTF tracepoint or a USDT probe (with
    /// what the runtime attaches): a span's end or an `on` point.
    pub(super) fn point(
        &mut self,
        name: &ast::Ident,
        tracepoint: bool,
        usdt: Option<&ast::Usdt>,
    ) -> Option<(FuncSig, Option<UsdtPoint>)> {
        if let Some(at) = usdt {
            return self
                .usdt_point(name, at)
                .map(|(sig, point)| (sig, Some(point)));
        }
        self.kernel_point(name, tracepoint).map(|sig| (sig, None))
    }

    pub(super) fn kernel_point(&mut self, name: &ast::Ident, tracepoint: bool) -> Option<FuncSig> {
        if !tracepoint {
            let at = super::functions::Lookup::of(self.input, &self.now);
            return super::functions::exact(&at, &mut self.whole.diags, name).map(|mut f| {
                // A span point is the function's entry: it has no `ret`.
                f.ret = 0;
                f
            });
        }
        let found = self.types().tracepoint(&name.name);
        if found.is_none() {
            self.unknown_tracepoint(name);
        }
        found
    }

    /// A key: an integer or a pointer, checked in `scope`, its parameters moved by `offset`.
    fn span_key(&mut self, scope: &Scope, key: &ast::Expr, offset: usize) -> Checked<Expr> {
        let k = self.expr(scope, key)?;
        if !matches!(k.ty, Ty::Int(_) | Ty::Ptr { .. }) {
            return Err(self.error(
                key.span.clone(),
                DiagKind::SpanKeyType {
                    ty: k.ty.describe(),
                },
            ));
        }
        self.at_start(k, key, offset)
    }

    /// `e`, a value of START (or END's key): refused if it needs a later point; its
    /// parameters moved by `offset`.
    fn at_start(&mut self, mut e: Expr, written: &ast::Expr, offset: usize) -> Checked<Expr> {
        if e.at_return() || uses_stack(&e) {
            return Err(self.error(written.span.clone(), DiagKind::SpanStartAtReturn));
        }
        shift_params(&mut e, offset);
        Ok(e)
    }

    /// `start.NAME` in END: NAME evaluated at START and carried with the start time; in a
    /// span of several STARTs, at each of them, of one type.
    /// `None` when the checker is not in a span's END (then `start` is an ordinary name).
    pub(super) fn start_value(&mut self, field: &ast::Ident) -> Option<Checked<Expr>> {
        let starts = self.now.span_start.take()?;
        let written = ast::Expr {
            kind: ast::ExprKind::Name(field.name.clone()),
            span: field.span.clone(),
        };
        let mut values = Vec::new();
        for start in &starts {
            let scope = Scope {
                func: &start.func,
                params: &start.params,
                funcs: std::slice::from_ref(&start.func),
                per_func: std::slice::from_ref(&start.params),
                several: false,
                func_cap: start.func.name.len() as u32 + 1,
            };
            let value = self
                .expr(&scope, &written)
                .and_then(|v| self.at_start(v, &written, start.offset));
            match value {
                Ok(v) => values.push(v),
                Err(e) => {
                    self.now.span_start = Some(starts);
                    return Some(Err(e));
                }
            }
        }
        let value = self.saved_at_start(values, &written, &starts);
        self.now.span_start = Some(starts);
        Some(value)
    }

    fn saved_at_start(
        &mut self,
        mut values: Vec<Expr>,
        written: &ast::Expr,
        starts: &[Start],
    ) -> Checked<Expr> {
        let v = values.remove(0);
        if !savable(&v.ty) {
            return Err(self.error(
                written.span.clone(),
                DiagKind::SpanStartValue {
                    ty: v.ty.describe(),
                },
            ));
        }
        if let Some((k, other)) = values.iter().enumerate().find(|(_, o)| o.ty != v.ty) {
            return Err(self.error(
                written.span.clone(),
                DiagKind::SpanStartsDiffer {
                    first: format!("{} at `{}`", v.ty.describe(), starts[0].func.name),
                    other: format!("{} at `{}`", other.ty.describe(), starts[k + 1].func.name),
                },
            ));
        }
        self.save_at_starts(v, values, written.span.clone())
    }

    /// `entry()` in a span: its values are START's, written `start.NAME`.
    pub(super) fn entry_in_span(&mut self, span: ast::Span) -> Option<super::Reported> {
        self.now
            .span_start
            .is_some()
            .then(|| self.error(span, DiagKind::EntryInSpan))
    }
}

/// Keys of one type: integers of one size and signedness, or pointers to one type.
fn same_key_type(a: &Ty, b: &Ty) -> bool {
    match (a, b) {
        (Ty::Int(x), Ty::Int(y)) => x == y,
        (Ty::Ptr { type_name: x, .. }, Ty::Ptr { type_name: y, .. }) => x == y,
        _ => false,
    }
}

/// A point as the checked program names it, with its prototype's arguments.
fn point(p: &ast::SpanPoint, sig: &FuncSig, usdt: Option<UsdtPoint>) -> SpanPoint {
    SpanPoint {
        name: p.name.name.clone(),
        tracepoint: p.tracepoint,
        args: sig.params.len(),
        usdt,
    }
}

/// Whether a span's key is the thread (`pid`): START and END then meet on one thread.
fn by_thread(k: &Checked<Expr>) -> bool {
    matches!(
        k,
        Ok(Expr {
            kind: ExprKind::Builtin(b),
            ..
        }) if *b == super::builtins::PID
    )
}

fn uses_stack(e: &Expr) -> bool {
    matches!(e.kind, ExprKind::Builtin(b) if matches!(b.c, super::builtins::C::Stack(_))
        || matches!(b.ty, super::builtins::BuiltinTy::WaitStack(_)))
        || e.clone().children_mut().into_iter().any(|c| uses_stack(c))
}

/// Moves every `Param(i)` of `e` to `Param(i + offset)`.
fn shift_params(e: &mut Expr, offset: usize) {
    if let ExprKind::Param(i) = &mut e.kind {
        *i += offset;
    }
    for c in e.children_mut() {
        shift_params(c, offset);
    }
}
