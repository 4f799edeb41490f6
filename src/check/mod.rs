//! Stage 2: AST → checked program. Resolves names against the kernel's types, types every
//! expression, splits `where` into entry and return phases, and fixes each event schema.
//!
//! `session` below runs the passes over one session, each in its own file:
//! `functions` (which kernel functions it traces), `names` (builtins, parameters, `ret`),
//! `expr`, `members` and `operators` (typing expressions), `phases` (the entry/return
//! split), `actions` (events and aggregations, laid out), `agg_names` (naming them); then
//! over the checked sessions, `uses::of` (what the object provides for all of them).

mod actions;
mod agg_names;
pub mod builtins;
mod calls;
mod cgroups;
pub mod counters;
mod expr;
mod functions;
mod lhist;
mod members;
mod names;
mod offcpu;
mod on;
mod operators;
mod phases;
mod positional;
mod printf;
mod profile;
pub mod program;
pub mod resources;
mod spans;
mod usdt;
mod user;
mod uses;

pub use user::carry_params_to_return;

pub use builtins::builtin_names;
pub use calls::CALLS;
pub use functions::{DEFAULT_MAX_FUNCTIONS, Options};
pub use operators::duration_literal;
pub use printf::printf_format;

use crate::btf::KernelTypes;
use crate::diag::{DiagKind, Diagnostic};
use crate::syntax::ast::{self, Span};
use program::*;
use std::collections::{BTreeMap, HashMap};

/// Longest string fslat reads from kernel memory, NUL included.
pub const STRING_CAP: u32 = 64;
/// Longest `path()`, NUL included (FSLAT_PATH_CAP in fslat_path.bpf.h).
pub const PATH_CAP: u32 = 128;
const COMM_CAP: u32 = 16;
const MAX_KEYS: usize = 4;

pub fn check(
    script: &ast::Script,
    source: &str,
    kernel: &dyn KernelTypes,
) -> Result<Program, Vec<Diagnostic>> {
    check_with(script, source, kernel, Options::default())
}

pub fn check_with(
    script: &ast::Script,
    source: &str,
    kernel: &dyn KernelTypes,
    opts: Options,
) -> Result<Program, Vec<Diagnostic>> {
    let mut cx = Checker {
        kernel,
        source,
        diags: Vec::new(),
        structs: BTreeMap::new(),
        struct_order: Vec::new(),
        next_agg: 0,
        agg_names: agg_names::Names::default(),
        opts,
        args: BTreeMap::new(),
        now: SessionState::default(),
    };
    let lists: Vec<String> = script.sessions.iter().map(functions::list_label).collect();
    let mut per_func: HashMap<&str, usize> = HashMap::new();
    for l in &lists {
        *per_func.entry(l.as_str()).or_default() += 1;
    }
    let mut seen: HashMap<&str, usize> = HashMap::new();
    let mut sessions = Vec::new();
    for (index, (s, list)) in script.sessions.iter().zip(&lists).enumerate() {
        let n = seen.entry(list.as_str()).or_default();
        *n += 1;
        let label = if per_func[list.as_str()] > 1 {
            format!("{list}#{n}")
        } else {
            list.clone()
        };
        cx.now = SessionState::default();
        if let Some(checked) = cx.session(index, label, s) {
            sessions.push(checked);
        }
    }
    let lines = |cx: &mut Checker, actions: &[ast::Action]| {
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
    };
    cx.now = SessionState::default();
    let begin = lines(&mut cx, &script.begin);
    let end = lines(&mut cx, &script.end);
    if !cx.diags.is_empty() {
        return Err(cx.diags);
    }
    std::mem::take(&mut cx.agg_names).settle(&mut sessions);
    number_events(&mut sessions);
    let structs = cx.ordered_structs();
    let uses = uses::of(&sessions);
    Ok(Program {
        sessions,
        structs,
        uses_path: uses.path,
        uses_kstack: uses.kstack,
        uses_ustack: uses.ustack,
        uses_sched: uses.sched,
        wait_kstack: uses.wait_kstack,
        wait_ustack: uses.wait_ustack,
        ustack_bytes: if uses.ustack { cx.opts.ustack_bytes } else { 0 },
        features: kernel.features(),
        args: cx.args.into_values().collect(),
        begin,
        end,
    })
}

/// Gives each session's second and later events an id after the last session's (its
/// first keeps the session's index).
fn number_events(sessions: &mut [Session]) {
    let mut next = sessions.len() as u32;
    for s in sessions {
        for e in s.events.iter_mut().skip(1) {
            e.id = next;
            next += 1;
        }
    }
}

/// The checker: what it reads (the kernel's types, the script's text, the options), what
/// it builds for the whole program as it goes (diagnostics, struct declarations,
/// aggregation names, run-time arguments), and `now`, the state of the one session
/// being checked, fresh for each session.
struct Checker<'k> {
    kernel: &'k dyn KernelTypes,
    source: &'k str,
    opts: Options,
    diags: Vec<Diagnostic>,
    /// Struct declarations by name, with the structs they embed.
    structs: BTreeMap<StructName, (StructDecl, Vec<StructName>)>,
    struct_order: Vec<StructName>,
    next_agg: usize,
    agg_names: agg_names::Names,
    /// The run-time arguments used so far (`Options::runtime_args`), by number.
    args: BTreeMap<usize, ScriptArg>,
    now: SessionState,
}

/// What checking one session keeps while it runs: the values it saves at entry, its
/// parameters, and which kind of item is being checked. `check_with` starts each session
/// (and the BEGIN and END lines) from `SessionState::default()`, so nothing of one
/// session reaches the next.
#[derive(Default)]
struct SessionState {
    /// A several-function session's parameters so far, with their slot in each function.
    shared: Vec<(Param, Vec<usize>)>,
    /// Checking a span whose ends are both keyed by `pid`: one thread's stretch.
    span_by_thread: bool,
    /// The session's `entry()` values so far.
    entry_values: Vec<Expr>,
    /// For each of `entry_values`, the same value at a span's other STARTs (see
    /// `SpanStart::values`); empty lists elsewhere.
    entry_at_others: Vec<Vec<Expr>>,
    /// The session's user-space file, when it traces user-space functions.
    user: Option<std::rc::Rc<crate::elf::UserTypes>>,
    /// While a span's END is checked: its STARTs, for `start.NAME`.
    span_start: Option<Vec<spans::Start>>,
    /// While a span is checked: its points are entries, without `ret`.
    in_span: bool,
    /// While an `on` item is checked: names of a call's return are refused.
    at_point: bool,
    /// While an `offcpu` item is checked: `latency` and `runq` are the stretch's.
    in_offcpu: bool,
    /// While an `offcpu` item's actions are checked: its other names are read at the
    /// switch out and saved (`offcpu::saved_name`).
    offcpu_saving: bool,
    /// While an expression whose value is compiled in is checked: what needs it (its
    /// run-time arguments take the words given now, and are fixed).
    fixing: Option<String>,
    /// The `let` names of the action block being checked, with their values.
    lets: Vec<(String, Expr)>,
}

/// The one function of an item without parameters has none.
static NO_PARAMS: [Vec<Param>; 1] = [Vec::new()];

impl<'a> Scope<'a> {
    /// The names of an item whose "function" has no parameters (a profile, offcpu):
    /// the builtins only.
    fn bare(func: &'a crate::btf::FuncSig) -> Self {
        Scope {
            func,
            params: &[],
            funcs: std::slice::from_ref(func),
            per_func: &NO_PARAMS,
            several: false,
            func_cap: func.name.len() as u32 + 1,
        }
    }
}

impl Checker<'_> {
    /// The signature of an item without parameters (a profile, offcpu), named as the
    /// item.
    fn bare_item(&mut self, s: &ast::Session) -> crate::btf::FuncSig {
        crate::btf::FuncSig {
            name: s.func.name.clone(),
            params: Vec::new(),
            ret: 0,
        }
    }
}

/// What names mean inside one session.
struct Scope<'a> {
    func: &'a crate::btf::FuncSig,
    params: &'a [Param],
    /// Every function of the session (`func` is the first).
    funcs: &'a [crate::btf::FuncSig],
    /// Each function's own parameters.
    per_func: &'a [Vec<Param>],
    /// Written as a list or a glob: names resolve against every function.
    several: bool,
    /// Room for `func`'s value: the longest name and its NUL.
    func_cap: u32,
}

/// What a session's action blocks make, as they are checked.
struct Actions<'l> {
    index: usize,
    label: &'l str,
    has_ret: bool,
    events: Vec<EventSchema>,
    aggregations: Vec<Aggregation>,
}

/// Marks a failed check whose diagnostic is already recorded.
struct Reported;

type Checked<T> = Result<T, Reported>;

impl<'k> Checker<'k> {
    fn error(&mut self, span: Span, kind: DiagKind) -> Reported {
        self.diags.push(Diagnostic::new(span, kind));
        Reported
    }

    fn error_with(&mut self, d: Diagnostic) -> Reported {
        self.diags.push(d);
        Reported
    }

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
        if s.file.is_some() {
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
        let (funcs, skipped) = self.functions(s)?;
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
            index,
            at: s.span.clone(),
            label,
            func: func.name.clone(),
            ret_slot: slot,
            params: self.now.shared.iter().map(|(p, _)| p.clone()).collect(),
            ret,
            entry_filter,
            return_filter,
            events,
            aggregations,
            entry_values: std::mem::take(&mut self.now.entry_values),
            targets,
            several,
            skipped,
            user: None,
            span: None,
            on: None,
            profile: None,
            offcpu: false,
            counts_errors: self.opts.count_errors,
        })
    }

    /// A session's actions (`{ emit }` when it has no block): its event and aggregations.
    fn actions(
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
        let what = if builtins::Builtin::named(n).is_some() || matches!(n, "ret" | "start") {
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

fn quote_list(names: &[&str]) -> String {
    names
        .iter()
        .map(|n| format!("`{n}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests;
