//! The pass over one session: which functions it traces and their parameters, its `where`
//! typed and split into phases, its actions made events and aggregations. The driver
//! (`check_with`) calls `check` for each session and `user_lines` for the `on begin` and
//! `on end` lines; each makes its own `SessionState`.

use super::program::*;
use super::{
    Checked, Checker, Input, Reported, Scope, SessionState, Whole, functions, phases, user,
};
use crate::diag::DiagKind;
use crate::syntax::ast;
use std::collections::HashMap;

/// Each session's label: its list as written (`functions::list_label`), with `#N` after
/// it when several sessions share one.
pub(super) fn labels(sessions: &[ast::Session]) -> Vec<String> {
    let lists: Vec<String> = sessions.iter().map(functions::list_label).collect();
    let mut per_func: HashMap<&str, usize> = HashMap::new();
    for l in &lists {
        *per_func.entry(l.as_str()).or_default() += 1;
    }
    let mut seen: HashMap<&str, usize> = HashMap::new();
    lists
        .iter()
        .map(|list| {
            let n = seen.entry(list.as_str()).or_default();
            *n += 1;
            if per_func[list.as_str()] > 1 {
                format!("{list}#{n}")
            } else {
                list.clone()
            }
        })
        .collect()
}

/// Session `s`, checked: `None` when a diagnostic was recorded in `whole`.
pub(super) fn check(
    input: &Input,
    whole: &mut Whole,
    index: usize,
    label: String,
    s: &ast::Session,
) -> Option<Session> {
    let mut cx = Checker {
        input,
        whole,
        now: SessionState::default(),
    };
    cx.session(index, label, s)
}

/// The `printf` lines of `on begin` or `on end` (fslat prints them); any other action
/// there is an error recorded in `whole`.
pub(super) fn user_lines(
    input: &Input,
    whole: &mut Whole,
    actions: &[ast::Action],
) -> Vec<UserLine> {
    let mut cx = Checker {
        input,
        whole,
        now: SessionState::default(),
    };
    let mut out = Vec::new();
    for a in actions {
        let span = match a {
            ast::Action::Printf { args, span } => {
                if let Ok(l) = cx.user_line(args, span) {
                    out.push(l);
                }
                continue;
            }
            ast::Action::Emit { span, .. } => span,
            ast::Action::Aggregate(agg) => &agg.span,
            ast::Action::Let { name, .. } => &name.span,
            ast::Action::If { cond, .. } => &cond.span,
        };
        cx.error(span.clone(), DiagKind::UserLineAction);
    }
    out
}

/// What a session's action blocks make, as they are checked.
struct Actions<'l> {
    index: usize,
    label: &'l str,
    has_ret: bool,
    events: Vec<EventSchema>,
    aggregations: Vec<Aggregation>,
}

impl Checker<'_> {
    /// The signature of an item without parameters (a profile, offcpu), named as the
    /// item.
    pub(super) fn bare_item(&mut self, s: &ast::Session) -> crate::btf::FuncSig {
        crate::btf::FuncSig {
            name: s.func.name.clone(),
            params: Vec::new(),
            ret: 0,
        }
    }
}

impl Checker<'_> {
    fn session(&mut self, index: usize, label: String, s: &ast::Session) -> Option<Session> {
        if s.ends.is_some() {
            return self.span_session(index, label, s);
        }
        if s.on.is_some() {
            return self.on_session(index, label, s);
        }
        if s.profile.is_some() {
            return self.profile_session(index, label, s);
        }
        if s.offcpu {
            return self.offcpu_session(index, label, s);
        }
        self.now.module = self.kernel_module(s)?;
        if s.file.is_some() && self.now.module.is_none() {
            self.now.user = Some(self.open_user_file(s)?);
        }
        let mut checked = self.session_of_functions(index, label, s)?;
        if let Some(types) = self.now.user.take() {
            checked.user = Some(UserSession {
                path: types.path().display().to_string(),
                mode: self.user_mode(),
            });
            user::carry_to_return(&mut checked);
        }
        Some(checked)
    }

    fn session_of_functions(
        &mut self,
        index: usize,
        label: String,
        s: &ast::Session,
    ) -> Option<Session> {
        let several = functions::is_several(s);
        let at = functions::Lookup::of(self.input, &self.now);
        let (funcs, skipped) = functions::resolve(&at, &mut self.whole.diags, s)?;
        let func = funcs[0].clone();
        let mut per_func = Vec::new();
        let mut ret_slots = Vec::new();
        for f in &funcs {
            let (params, ret_slot) = self.params_of(f);
            per_func.push(params);
            ret_slots.push(ret_slot);
        }
        self.now.shared = if several {
            Self::common_params(&per_func)
        } else {
            per_func[0]
                .iter()
                .map(|p| (p.clone(), vec![p.slot]))
                .collect()
        };
        let params: Vec<Param> = self.now.shared.iter().map(|(p, _)| p.clone()).collect();
        let slot = ret_slots[0];
        let ret = if several && !self.has_shared_ret(&funcs) {
            None
        } else {
            self.ret_scalar(&func)
        };
        let func_cap = funcs
            .iter()
            .map(|f| f.name.len() as u32 + 1)
            .max()
            .unwrap_or(1);
        let scope = Scope {
            func: &func,
            params: &params,
            funcs: &funcs,
            per_func: &per_func,
            several,
            func_cap,
        };

        let (entry_filter, return_filter) = match &s.predicate {
            Some(p) => match self.condition(&scope, p) {
                Ok(e) => phases::split(e),
                Err(Reported) => (None, None),
            },
            None => (None, None),
        };

        let (events, aggregations) = self.actions(&scope, index, &label, s, ret.is_some());
        let targets = self.targets(&funcs, &ret_slots);
        Some(Session {
            ret_slot: slot,
            params: self.now.shared.iter().map(|(p, _)| p.clone()).collect(),
            ret,
            entry_filter,
            return_filter,
            events,
            aggregations,
            entry_values: std::mem::take(&mut self.now.entry_values),
            several,
            skipped,
            counts_errors: self.input.opts.count_errors,
            ..Session::new(index, s.span.clone(), label, func.name.clone(), targets)
        })
    }

    /// A session's actions (`{ emit }` when it has no block): its event and aggregations.
    pub(super) fn actions(
        &mut self,
        scope: &Scope,
        index: usize,
        label: &str,
        s: &ast::Session,
        has_ret: bool,
    ) -> (Vec<EventSchema>, Vec<Aggregation>) {
        let default_actions = [ast::Action::Emit {
            items: Vec::new(),
            span: s.func.span.clone(),
        }];
        let actions = s.actions.as_deref().unwrap_or(&default_actions);
        let mut out = Actions {
            index,
            label,
            has_ret,
            events: Vec::new(),
            aggregations: Vec::new(),
        };
        self.block(scope, actions, None, &mut out);
        self.now.lets.clear();
        (out.events, out.aggregations)
    }

    /// The actions of one block, under `guard` (the `if` conditions around it, as one
    /// condition); its `let`s end with it.
    fn block(
        &mut self,
        scope: &Scope,
        actions: &[ast::Action],
        guard: Option<&Expr>,
        out: &mut Actions,
    ) {
        let lets = self.now.lets.len();
        for a in actions {
            match a {
                ast::Action::Emit { items, .. } => {
                    let event = self.emit(scope, out.index, out.label, items, out.has_ret);
                    out.events.extend(event.ok().map(|e| EventSchema {
                        guard: guard.cloned(),
                        ..e
                    }));
                }
                ast::Action::Aggregate(agg) => {
                    if let Ok(a) = self.aggregation(scope, out.label, agg) {
                        out.aggregations.push(Aggregation {
                            guard: guard.cloned(),
                            ..a
                        });
                    }
                }
                ast::Action::Let { name, value } => {
                    if let Ok(v) = self.let_value(scope, name, value) {
                        self.now.lets.push((name.name.clone(), v));
                    }
                }
                ast::Action::Printf { args, span } => {
                    let event = self.printf(scope, out.index, out.label, args, span);
                    out.events.extend(event.ok().map(|e| EventSchema {
                        guard: guard.cloned(),
                        ..e
                    }));
                }
                ast::Action::If {
                    cond,
                    then,
                    otherwise,
                } => {
                    let Ok(c) = self.condition(scope, cond) else {
                        continue;
                    };
                    let not_c = Expr {
                        ty: Ty::Bool,
                        kind: ExprKind::Unary {
                            op: UnOp::Not,
                            expr: Box::new(c.clone()),
                        },
                    };
                    let under = |c: Expr| match guard {
                        Some(g) => Expr::logic(BinOp::And, g.clone(), c),
                        None => c,
                    };
                    self.block(scope, then, Some(&under(c)), out);
                    if let Some(otherwise) = otherwise {
                        self.block(scope, otherwise, Some(&under(not_c)), out);
                    }
                }
            }
        }
        self.now.lets.truncate(lets);
    }

    /// A `let`'s value, unless its name would hide another (bpftrace keeps variables apart
    /// by `$`; in fslat a name is one thing in a block).
    fn let_value(&mut self, scope: &Scope, name: &ast::Ident, value: &ast::Expr) -> Checked<Expr> {
        let n = name.name.as_str();
        let what = if Builtin::named(n).is_some() || matches!(n, "ret" | "start") {
            Some("a builtin")
        } else if scope.params.iter().any(|p| p.name == n)
            || n.strip_prefix("arg")
                .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
        {
            Some("a parameter")
        } else if self.now.lets.iter().any(|(l, _)| l == n) {
            Some("an earlier `let`")
        } else {
            None
        };
        if let Some(what) = what {
            return Err(self.error(
                name.span.clone(),
                DiagKind::LetShadows {
                    name: n.into(),
                    what,
                },
            ));
        }
        self.expr(scope, value)
    }
}
