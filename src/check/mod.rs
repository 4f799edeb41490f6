//! Stage 2: AST → checked program. Resolves names against the kernel's types, types every
//! expression, splits `where` into entry and return phases, and fixes each event schema.

mod functions;
mod names;
pub mod program;

pub use functions::{DEFAULT_MAX_FUNCTIONS, Options};

use crate::btf::{KType, KernelTypes, TypeId};
use crate::diag::{DiagKind, Diagnostic, closest};
use crate::syntax::ast::{self, AggFunc, BinOp, Span, UnOp};
use program::*;
use std::collections::{BTreeMap, HashMap};

/// Longest string fslat reads from kernel memory, NUL included.
pub const STRING_CAP: u32 = 64;
/// Longest `path()`, NUL included (FSLAT_PATH_CAP in fslat.bpf.h).
pub const PATH_CAP: u32 = 128;
const COMM_CAP: u32 = 16;
const MAX_KEYS: usize = 4;

const BUILTINS: &[(&str, Builtin)] = &[
    ("tgid", Builtin::Tgid),
    ("pid", Builtin::Pid),
    ("tid", Builtin::Pid),
    ("comm", Builtin::Comm),
    ("uid", Builtin::Uid),
    ("gid", Builtin::Gid),
    ("cpu", Builtin::Cpu),
    ("cgroup", Builtin::Cgroup),
    ("ts", Builtin::Ts),
    ("latency", Builtin::Latency),
    ("func", Builtin::Func),
    ("kstack", Builtin::Kstack),
    ("ustack", Builtin::Ustack),
];

/// Names a user may write besides parameters, for hints and completion.
pub fn builtin_names() -> impl Iterator<Item = &'static str> {
    BUILTINS.iter().map(|(n, _)| *n).chain(["ret"])
}

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
        uses_path: false,
        agg_names: names::Names::default(),
        opts,
        shared: Vec::new(),
        uses_kstack: false,
        uses_ustack: false,
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
        if let Some(checked) = cx.session(index, label, s) {
            sessions.push(checked);
        }
    }
    if !cx.diags.is_empty() {
        return Err(cx.diags);
    }
    std::mem::take(&mut cx.agg_names).settle(&mut sessions);
    let structs = cx.ordered_structs();
    Ok(Program {
        sessions,
        structs,
        uses_path: cx.uses_path,
        uses_kstack: cx.uses_kstack,
        uses_ustack: cx.uses_ustack,
        features: kernel.features(),
    })
}

struct Checker<'k> {
    kernel: &'k dyn KernelTypes,
    source: &'k str,
    diags: Vec<Diagnostic>,
    /// Struct declarations by C name, with the type ids they embed.
    structs: BTreeMap<String, (StructDecl, Vec<String>)>,
    struct_order: Vec<String>,
    next_agg: usize,
    uses_path: bool,
    agg_names: names::Names,
    opts: Options,
    /// A several-function session's parameters so far, with their slot in each function.
    shared: Vec<(Param, Vec<usize>)>,
    uses_kstack: bool,
    uses_ustack: bool,
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
        self.shared = if several {
            Self::common_params(&per_func)
        } else {
            per_func[0]
                .iter()
                .map(|p| (p.clone(), vec![p.slot]))
                .collect()
        };
        let params: Vec<Param> = self.shared.iter().map(|(p, _)| p.clone()).collect();
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
                Ok(e) => split_phases(push_not(e, false)),
                Err(Reported) => (None, None),
            },
            None => (None, None),
        };

        let default_actions = [ast::Action::Emit {
            items: Vec::new(),
            span: s.func.span.clone(),
        }];
        let actions = s.actions.as_deref().unwrap_or(&default_actions);
        let mut event = None;
        let mut aggregations = Vec::new();
        for a in actions {
            match a {
                ast::Action::Emit { items, span } => {
                    if event.is_some() {
                        self.error(span.clone(), DiagKind::TwoEmits);
                        continue;
                    }
                    event = self.emit(&scope, index, &label, items, ret.is_some()).ok();
                }
                ast::Action::Aggregate(agg) => {
                    if let Ok(a) = self.aggregation(&scope, &label, agg) {
                        aggregations.push(a);
                    }
                }
            }
        }
        let targets = self.targets(&funcs, &ret_slots);
        Some(Session {
            index,
            label,
            func: func.name.clone(),
            ret_slot: slot,
            params: self.shared.iter().map(|(p, _)| p.clone()).collect(),
            ret,
            entry_filter,
            return_filter,
            event,
            aggregations,
            targets,
            several,
            skipped,
        })
    }

    /// Why the kernel's trampolines cannot attach to `func`, if they cannot: they pass
    /// at most 12 argument registers and no struct returned by value.
    fn untraceable(&self, func: &crate::btf::FuncSig) -> Option<String> {
        if let KType::Struct { union, .. } = self.kernel.resolve(func.ret) {
            let what = if union { "a union" } else { "a struct" };
            return Some(format!("it returns {what} by value"));
        }
        let mut regs = 0;
        for p in &func.params {
            match self.kernel.resolve(p.ty) {
                KType::Struct { size, .. } if size > 16 => {
                    return Some(format!(
                        "its parameter `{}` is a struct of {size} bytes passed by value",
                        p.name
                    ));
                }
                KType::Struct { size, .. } => regs += (size as usize).div_ceil(8).max(1),
                _ => regs += 1,
            }
        }
        (regs > 12).then(|| format!("it takes {regs} argument registers (at most 12)"))
    }

    /// How a value of BTF type `ty` looks in a script, or `None` if fslat can't read it.
    fn value_type(&self, ty: TypeId) -> Option<Ty> {
        Some(match self.kernel.resolve(ty) {
            KType::Int {
                bool_like: true, ..
            } => Ty::Bool,
            KType::Int { size, signed, .. } | KType::Enum { size, signed } if size <= 8 => {
                Ty::Int(Scalar {
                    size: size as u8,
                    signed,
                })
            }
            KType::Ptr { pointee, .. } => {
                if self.is_char(pointee) {
                    Ty::Str { cap: STRING_CAP }
                } else {
                    Ty::Ptr {
                        pointee,
                        type_name: self.kernel.type_name(ty),
                    }
                }
            }
            KType::Struct { .. } => Ty::Record {
                ty,
                type_name: self.kernel.type_name(ty),
            },
            KType::Array { elem, len } if self.is_char(elem) => Ty::Str {
                cap: len.clamp(1, STRING_CAP),
            },
            _ => return None,
        })
    }

    fn is_char(&self, ty: TypeId) -> bool {
        matches!(
            self.kernel.resolve(ty),
            KType::Int {
                char_like: true,
                ..
            } | KType::Int { size: 1, .. }
        )
    }

    fn condition(&mut self, scope: &Scope, e: &ast::Expr) -> Checked<Expr> {
        let c = self.expr(scope, e)?;
        match c.ty {
            Ty::Bool | Ty::Int(_) | Ty::Ptr { .. } => Ok(c),
            Ty::Stack(k) => Err(self.stack_operand(k, e.span.clone())),
            ref t => Err(self.error(e.span.clone(), DiagKind::NotCondition { ty: t.describe() })),
        }
    }

    fn expr(&mut self, scope: &Scope, e: &ast::Expr) -> Checked<Expr> {
        use ast::ExprKind as K;
        match &e.kind {
            K::Int(v) => Ok(int_const(i128::from(*v))),
            K::Duration(ns) => Ok(Expr {
                ty: Ty::Duration,
                kind: ExprKind::Int(i128::from(*ns)),
            }),
            K::Bool(b) => Ok(Expr {
                ty: Ty::Bool,
                kind: ExprKind::Bool(*b),
            }),
            K::Str(bytes) => Ok(Expr {
                ty: Ty::Str {
                    cap: bytes.len() as u32 + 1,
                },
                kind: ExprKind::Str(bytes.clone()),
            }),
            K::Name(name) => self.name(scope, name, e.span.clone()),
            K::Call { func, args } => self.call(scope, func, args, e.span.clone()),
            K::Member { base, arrow, field } => self.member(scope, base, *arrow, field),
            K::Unary { op, expr } => self.unary(scope, *op, expr, e.span.clone()),
            K::Binary { op, lhs, rhs } => self.binary(scope, *op, lhs, rhs, e.span.clone()),
        }
    }

    fn name(&mut self, scope: &Scope, name: &str, span: Span) -> Checked<Expr> {
        if let Some((_, b)) = BUILTINS.iter().find(|(n, _)| *n == name) {
            let ty = match b {
                Builtin::Comm => Ty::Str { cap: COMM_CAP },
                Builtin::Func => Ty::Str {
                    cap: scope.func_cap,
                },
                Builtin::Latency => Ty::Duration,
                Builtin::Kstack => {
                    self.uses_kstack = true;
                    Ty::Stack(StackKind::Kernel)
                }
                Builtin::Ustack => {
                    self.uses_ustack = true;
                    Ty::Stack(StackKind::User)
                }
                Builtin::Cgroup | Builtin::Ts => Ty::Int(Scalar {
                    size: 8,
                    signed: false,
                }),
                _ => Ty::Int(Scalar {
                    size: 4,
                    signed: false,
                }),
            };
            return Ok(Expr {
                ty,
                kind: ExprKind::Builtin(*b),
            });
        }
        if name == "ret" {
            return self.ret(scope, span);
        }
        if scope.several {
            let index = self.shared_param(scope, name, span.clone())?;
            let raw = self.shared_param_type(scope, index);
            return self.param_value(index, raw, span);
        }
        let by_name = scope.params.iter().position(|p| p.name == name);
        let by_pos = name
            .strip_prefix("arg")
            .filter(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|n| n.parse::<usize>().ok());
        let index = match (by_name, by_pos) {
            (Some(i), _) => i,
            (None, Some(i)) if i < scope.params.len() => i,
            (None, Some(_)) => {
                return Err(self.error(
                    span,
                    DiagKind::ArgOutOfRange {
                        name: name.into(),
                        count: scope.params.len(),
                    },
                ));
            }
            (None, None) => {
                let mut names: Vec<String> = scope.params.iter().map(|p| p.name.clone()).collect();
                names.extend(builtin_names().map(String::from));
                let mut d = Diagnostic::new(span, DiagKind::UnknownName { name: name.into() });
                let near = closest(name, names.iter().map(String::as_str));
                if let Some(best) = near.first() {
                    d = d.hint(format!("did you mean `{best}`?"));
                }
                d = d.hint(format!(
                    "`{}` has parameters {}; fslat also knows {}",
                    scope.func.name,
                    if scope.params.is_empty() {
                        "(none)".into()
                    } else {
                        quote_list(
                            &names[..scope.params.len()]
                                .iter()
                                .map(String::as_str)
                                .collect::<Vec<_>>(),
                        )
                    },
                    quote_list(&builtin_names().collect::<Vec<_>>())
                ));
                return Err(self.error_with(d));
            }
        };
        let raw = scope.func.params[index].ty;
        self.param_value(index, raw, span)
    }

    /// Parameter `index` of the session, of BTF type `raw`, as a value.
    fn param_value(&mut self, index: usize, raw: TypeId, span: Span) -> Checked<Expr> {
        match self.value_type(raw) {
            Some(Ty::Str { cap }) => Ok(Expr {
                ty: Ty::Str { cap },
                kind: ExprKind::Deref(Box::new(Expr {
                    ty: Ty::Int(Scalar {
                        size: 8,
                        signed: false,
                    }),
                    kind: ExprKind::Param(index),
                })),
            }),
            Some(ty) => Ok(Expr {
                ty,
                kind: ExprKind::Param(index),
            }),
            None => Err(self.error(
                span,
                DiagKind::Unreadable {
                    ty: self.kernel.type_name(raw),
                },
            )),
        }
    }

    fn ret(&mut self, scope: &Scope, span: Span) -> Checked<Expr> {
        if scope.several {
            self.shared_ret(scope, span.clone())?;
        }
        let ret = scope.func.ret;
        if matches!(self.kernel.resolve(ret), KType::Void) {
            return Err(self.error(
                span,
                DiagKind::RetOfVoid {
                    func: scope.func.name.clone(),
                },
            ));
        }
        match self.value_type(ret) {
            // A `char *` return is a pointer into the kernel: read it as a string.
            Some(Ty::Str { cap }) => Ok(Expr {
                ty: Ty::Str { cap },
                kind: ExprKind::Deref(Box::new(Expr {
                    ty: Ty::Int(Scalar {
                        size: 8,
                        signed: false,
                    }),
                    kind: ExprKind::Ret,
                })),
            }),
            Some(ty) => Ok(Expr {
                ty,
                kind: ExprKind::Ret,
            }),
            None => Err(self.error(
                span,
                DiagKind::Unreadable {
                    ty: self.kernel.type_name(ret),
                },
            )),
        }
    }

    fn call(
        &mut self,
        scope: &Scope,
        func: &ast::Ident,
        args: &[ast::Expr],
        span: Span,
    ) -> Checked<Expr> {
        if func.name != "path" {
            let d = Diagnostic::new(
                func.span.clone(),
                DiagKind::UnknownCall {
                    name: func.name.clone(),
                },
            )
            .hint("the one function is `path(FILE)`, the path of a `struct file *`")
            .hint("aggregations (count, hist, percentiles, sum, min, max, avg) are statements in a `{ }` block");
            return Err(self.error_with(d));
        }
        if args.len() != 1 {
            return Err(self.error(
                span,
                DiagKind::WrongArgCount {
                    func: "path".into(),
                    expected: 1,
                    found: args.len(),
                },
            ));
        }
        let arg = self.expr(scope, &args[0])?;
        let is_file = match &arg.ty {
            Ty::Ptr { pointee, .. } => matches!(
                self.kernel.resolve(*pointee),
                KType::Struct { ref name, union: false, .. } if name == "file"
            ),
            _ => false,
        };
        if !is_file {
            return Err(self.error(
                args[0].span.clone(),
                DiagKind::BadArgType {
                    func: "path".into(),
                    expected: "a `struct file *`",
                    found: arg.ty.describe(),
                },
            ));
        }
        if !self.kernel.features().bpf_loop {
            let info = crate::btf::Feature::BpfLoop.info();
            let d = Diagnostic::new(
                func.span.clone(),
                DiagKind::NeedsFeature {
                    what: "`path()`".into(),
                    feature: info.name,
                    since: info.since,
                    kernel: self.kernel.describe(),
                },
            )
            .hint(format!(
                "run the script on Linux {} or later, or leave out path()",
                info.since
            ));
            return Err(self.error_with(d));
        }
        self.uses_path = true;
        Ok(Expr {
            ty: Ty::Str { cap: PATH_CAP },
            kind: ExprKind::Path(Box::new(arg)),
        })
    }

    fn member(
        &mut self,
        scope: &Scope,
        base: &ast::Expr,
        arrow: bool,
        field: &ast::Ident,
    ) -> Checked<Expr> {
        let b = self.expr(scope, base)?;
        // The struct whose member is read, and the read so far.
        let (struct_ty, root, root_name, mut path) = match (&b.ty, arrow) {
            (Ty::Ptr { pointee, .. }, true) => match b.kind {
                ExprKind::Read {
                    base,
                    root,
                    mut path,
                    ..
                } => {
                    path.push(Vec::new());
                    (*pointee, *base, root, path)
                }
                _ => (
                    *pointee,
                    b.clone(),
                    self.struct_c_name(*pointee),
                    vec![Vec::new()],
                ),
            },
            (Ty::Record { ty, type_name }, false) => match b.kind {
                ExprKind::Read {
                    base, root, path, ..
                } => (*ty, *base, root, path),
                _ => {
                    return Err(self.error(
                        base.span.clone(),
                        DiagKind::ByValueStruct {
                            ty: type_name.clone(),
                        },
                    ));
                }
            },
            (Ty::Ptr { type_name, .. }, false) => {
                let d = Diagnostic::new(
                    field.span.clone(),
                    DiagKind::DotOnPointer {
                        ty: type_name.clone(),
                    },
                )
                .hint(format!("write `->{}`", field.name));
                return Err(self.error_with(d));
            }
            (Ty::Record { type_name, .. }, true) => {
                let d = Diagnostic::new(
                    field.span.clone(),
                    DiagKind::ArrowOnValue {
                        ty: type_name.clone(),
                    },
                )
                .hint(format!("write `.{}`", field.name));
                return Err(self.error_with(d));
            }
            (Ty::Str { .. }, _) => {
                return Err(self.error(
                    base.span.clone(),
                    DiagKind::NotAStruct {
                        ty: "char *".into(),
                    },
                ));
            }
            (t, _) => {
                return Err(
                    self.error(base.span.clone(), DiagKind::NotAStruct { ty: t.describe() })
                );
            }
        };
        let KType::Struct { .. } = self.kernel.resolve(struct_ty) else {
            return Err(self.error(
                base.span.clone(),
                DiagKind::NotAStruct {
                    ty: self.kernel.type_name(struct_ty),
                },
            ));
        };
        let Some(f) = self.kernel.field(struct_ty, &field.name) else {
            let names = self.kernel.field_names(struct_ty);
            let mut d = Diagnostic::new(
                field.span.clone(),
                DiagKind::NoSuchField {
                    field: field.name.clone(),
                    ty: self.kernel.type_name(struct_ty),
                },
            );
            let near = closest(&field.name, names.iter().map(String::as_str));
            if let Some(best) = near.first() {
                d = d.hint(format!("did you mean `{best}`?"));
            }
            if !names.is_empty() && names.len() <= 40 {
                d = d.hint(format!("its fields are {}", names.join(", ")));
            }
            return Err(self.error_with(d));
        };
        if f.bitfield {
            return Err(self.error(
                field.span.clone(),
                DiagKind::Bitfield {
                    field: field.name.clone(),
                },
            ));
        }
        let Some(ty) = self.value_type(f.ty) else {
            return Err(self.error(
                field.span.clone(),
                DiagKind::Unreadable {
                    ty: self.kernel.type_name(f.ty),
                },
            ));
        };
        self.declare_member(struct_ty, &f.name, f.ty);
        let string = match (&ty, self.kernel.resolve(f.ty)) {
            (Ty::Str { .. }, KType::Array { .. }) => Some(StringSource::Array),
            (Ty::Str { .. }, _) => Some(StringSource::Pointer),
            _ => None,
        };
        path.last_mut()
            .expect("a read path has at least one group")
            .push(f.name.clone());
        Ok(Expr {
            ty,
            kind: ExprKind::Read {
                base: Box::new(root),
                root: root_name,
                path,
                string,
            },
        })
    }

    /// A stack used as a value: it can only be emitted or be a key.
    fn stack_operand(&mut self, kind: StackKind, span: Span) -> Reported {
        let d = Diagnostic::new(span, DiagKind::StackOperand { name: kind.name() })
            .hint(format!("write `emit {0}` or `count() by {0}`", kind.name()));
        self.error_with(d)
    }

    fn unary(&mut self, scope: &Scope, op: UnOp, inner: &ast::Expr, span: Span) -> Checked<Expr> {
        let e = self.expr(scope, inner)?;
        if let Ty::Stack(k) = e.ty {
            return Err(self.stack_operand(k, inner.span.clone()));
        }
        match (op, &e.ty) {
            (UnOp::Neg, Ty::Int(_)) => Ok(match e.kind {
                ExprKind::Int(v) => int_const(-v),
                _ => Expr {
                    ty: Ty::Int(Scalar {
                        size: 8,
                        signed: true,
                    }),
                    kind: ExprKind::Unary {
                        op,
                        expr: Box::new(e),
                    },
                },
            }),
            (UnOp::BitNot, Ty::Int(s)) => Ok(Expr {
                ty: Ty::Int(Scalar {
                    size: 8,
                    signed: s.signed,
                }),
                kind: ExprKind::Unary {
                    op,
                    expr: Box::new(e),
                },
            }),
            (UnOp::Not, Ty::Bool | Ty::Int(_) | Ty::Ptr { .. }) => Ok(Expr {
                ty: Ty::Bool,
                kind: ExprKind::Unary {
                    op,
                    expr: Box::new(e),
                },
            }),
            (_, t) => Err(self.error(
                span,
                DiagKind::Mismatch {
                    op: match op {
                        UnOp::Neg => "-",
                        UnOp::Not => "not",
                        UnOp::BitNot => "~",
                    },
                    lhs: t.describe(),
                    rhs: "nothing".into(),
                },
            )),
        }
    }

    fn binary(
        &mut self,
        scope: &Scope,
        op: BinOp,
        lhs: &ast::Expr,
        rhs: &ast::Expr,
        span: Span,
    ) -> Checked<Expr> {
        if op.is_logic() {
            let l = self.condition(scope, lhs);
            let r = self.condition(scope, rhs);
            let (l, r) = (l?, r?);
            return Ok(Expr {
                ty: Ty::Bool,
                kind: ExprKind::Binary {
                    op,
                    lhs: Box::new(l),
                    rhs: Box::new(r),
                    signed: false,
                },
            });
        }
        let l = self.expr(scope, lhs);
        let r = self.expr(scope, rhs);
        let (l, r) = (l?, r?);
        for (side, span) in [(&l, &lhs.span), (&r, &rhs.span)] {
            if let Ty::Stack(k) = side.ty {
                return Err(self.stack_operand(k, span.clone()));
            }
        }
        let mismatch = |l: &Expr, r: &Expr| DiagKind::Mismatch {
            op: op.symbol(),
            lhs: l.ty.describe(),
            rhs: r.ty.describe(),
        };
        let node = |ty: Ty, l: Expr, r: Expr, signed: bool| Expr {
            ty,
            kind: ExprKind::Binary {
                op,
                lhs: Box::new(l),
                rhs: Box::new(r),
                signed,
            },
        };
        match (&l.ty, &r.ty) {
            (Ty::Str { cap: a }, Ty::Str { cap: b }) => {
                if !matches!(op, BinOp::Eq | BinOp::Ne) {
                    return Err(self.error(span, DiagKind::StringOperator { op: op.symbol() }));
                }
                // A literal longer than what the other side can hold never matches.
                for (lit, other_cap, lit_span) in [(&l, *b, &lhs.span), (&r, *a, &rhs.span)] {
                    if let ExprKind::Str(bytes) = &lit.kind
                        && bytes.len() as u32 >= other_cap
                    {
                        return Err(self.error(
                            lit_span.clone(),
                            DiagKind::StringTooLong {
                                len: bytes.len(),
                                cap: other_cap,
                            },
                        ));
                    }
                }
                Ok(node(Ty::Bool, l, r, false))
            }
            (Ty::Str { .. }, _) | (_, Ty::Str { .. }) => Err(self.error(span, mismatch(&l, &r))),
            (Ty::Duration, Ty::Int(_)) | (Ty::Int(_), Ty::Duration)
                if op.is_comparison() || matches!(op, BinOp::Add | BinOp::Sub | BinOp::Rem) =>
            {
                let int_side = if matches!(l.ty, Ty::Int(_)) { &l } else { &r };
                let mut d = Diagnostic::new(span, DiagKind::DurationVsInteger);
                if let ExprKind::Int(v) = int_side.kind {
                    let dur_side = if matches!(l.ty, Ty::Int(_)) { rhs } else { lhs };
                    let dur_text = &self.source[dur_side.span.clone()];
                    let lit = duration_literal(v);
                    d = d.hint(if matches!(l.ty, Ty::Duration) {
                        format!("write `{dur_text} {} {lit}`", op.symbol())
                    } else {
                        format!("write `{lit} {} {dur_text}`", op.symbol())
                    });
                }
                d = d.hint("durations are written with a unit: 500ns, 250us, 10ms, 2s");
                Err(self.error_with(d))
            }
            (Ty::Duration, Ty::Duration) => {
                if op.is_comparison() {
                    Ok(node(Ty::Bool, l, r, false))
                } else {
                    match op {
                        BinOp::Add | BinOp::Sub | BinOp::Rem => {
                            if op == BinOp::Rem {
                                self.nonzero_divisor(&r, rhs)?;
                            }
                            Ok(fold(node(Ty::Duration, l, r, false)))
                        }
                        BinOp::Div => {
                            self.nonzero_divisor(&r, rhs)?;
                            // Folded, so `count / (1us / 1ms)` is seen to divide by 0.
                            Ok(fold(node(
                                Ty::Int(Scalar {
                                    size: 8,
                                    signed: false,
                                }),
                                l,
                                r,
                                false,
                            )))
                        }
                        _ => Err(self.error(span, mismatch(&l, &r))),
                    }
                }
            }
            (Ty::Duration, Ty::Int(_)) if matches!(op, BinOp::Mul | BinOp::Div) => {
                if op == BinOp::Div {
                    self.nonzero_divisor(&r, rhs)?;
                }
                Ok(fold(node(Ty::Duration, l, r, false)))
            }
            (Ty::Int(_), Ty::Duration) if op == BinOp::Mul => {
                Ok(fold(node(Ty::Duration, l, r, false)))
            }
            (Ty::Int(a), Ty::Int(b)) => {
                let (a, b) = (*a, *b);
                let lc = const_value(&l);
                let rc = const_value(&r);
                if op.is_comparison() {
                    self.signedness(op, &l, lc, &r, rc, span)?;
                    let signed = (a.signed && lc.is_none())
                        || (b.signed && rc.is_none())
                        || (lc.is_some() && rc.is_some());
                    return Ok(fold(node(Ty::Bool, l, r, signed)));
                }
                if matches!(op, BinOp::Div | BinOp::Rem) {
                    self.nonzero_divisor(&r, rhs)?;
                }
                if matches!(op, BinOp::Shl | BinOp::Shr)
                    && let Some(by) = rc.filter(|by| !(0..64).contains(by))
                {
                    return Err(self.error(rhs.span.clone(), DiagKind::ShiftOutOfRange { by }));
                }
                let signed = (a.signed && lc.is_none()) || (b.signed && rc.is_none());
                Ok(fold(node(
                    Ty::Int(Scalar { size: 8, signed }),
                    l,
                    r,
                    signed,
                )))
            }
            (Ty::Bool, Ty::Bool) if matches!(op, BinOp::Eq | BinOp::Ne) => {
                Ok(node(Ty::Bool, l, r, false))
            }
            (Ty::Ptr { .. }, Ty::Ptr { .. }) if matches!(op, BinOp::Eq | BinOp::Ne) => {
                Ok(node(Ty::Bool, l, r, false))
            }
            (Ty::Ptr { .. }, Ty::Int(_)) | (Ty::Int(_), Ty::Ptr { .. })
                if matches!(op, BinOp::Eq | BinOp::Ne)
                    && (const_value(&l).is_some() || const_value(&r).is_some()) =>
            {
                Ok(node(Ty::Bool, l, r, false))
            }
            _ => Err(self.error(span, mismatch(&l, &r))),
        }
    }

    fn nonzero_divisor(&mut self, r: &Expr, rhs: &ast::Expr) -> Checked<()> {
        if const_value(r) == Some(0) {
            return Err(self.error(rhs.span.clone(), DiagKind::DivisionByZero));
        }
        Ok(())
    }

    /// `ret < 0` on an unsigned type, or an unsigned value against a negative number.
    fn signedness(
        &mut self,
        op: BinOp,
        l: &Expr,
        lc: Option<i128>,
        r: &Expr,
        rc: Option<i128>,
        span: Span,
    ) -> Checked<()> {
        for (var, c, var_is_left) in [(l, rc, true), (r, lc, false)] {
            let (Ty::Int(s), Some(c)) = (&var.ty, c) else {
                continue;
            };
            if s.signed || const_value(var).is_some() {
                continue;
            }
            let ty = self.unsigned_name(var);
            if c < 0 {
                let d = Diagnostic::new(span, DiagKind::UnsignedVsNegative { ty }).hint(
                    "only signed values (such as `ret` of a function returning `ssize_t` or `int`) can be negative",
                );
                return Err(self.error_with(d));
            }
            if c == 0 {
                // Normalise to `var OP 0`.
                let op = if var_is_left { op } else { flip(op) };
                let always = match op {
                    BinOp::Lt => Some(false),
                    BinOp::Ge => Some(true),
                    _ => None,
                };
                if let Some(always) = always {
                    return Err(self.error(span, DiagKind::UnsignedTautology { ty, always }));
                }
            }
        }
        Ok(())
    }

    fn unsigned_name(&self, e: &Expr) -> String {
        match e.ty {
            Ty::Int(s) => format!("u{}", s.size * 8),
            _ => e.ty.describe(),
        }
    }

    fn emit(
        &mut self,
        scope: &Scope,
        index: usize,
        label: &str,
        items: &[ast::EmitItem],
        has_ret: bool,
    ) -> Checked<EventSchema> {
        let mut fields: Vec<(String, Span, Expr)> = Vec::new();
        if items.is_empty() {
            let builtin = |b: Builtin, ty: Ty| Expr {
                ty,
                kind: ExprKind::Builtin(b),
            };
            let u32t = Ty::Int(Scalar {
                size: 4,
                signed: false,
            });
            if scope.several {
                let cap = scope.func_cap;
                fields.push(("func".into(), 0..0, builtin(Builtin::Func, Ty::Str { cap })));
            }
            fields.push((
                "comm".into(),
                0..0,
                builtin(Builtin::Comm, Ty::Str { cap: COMM_CAP }),
            ));
            fields.push(("tgid".into(), 0..0, builtin(Builtin::Tgid, u32t.clone())));
            fields.push(("pid".into(), 0..0, builtin(Builtin::Pid, u32t)));
            let reserved = ["comm", "tgid", "pid", "ret", "latency", "func"];
            for (i, p) in scope.params.iter().enumerate() {
                if !matches!(p.ty, Ty::Int(_) | Ty::Bool) {
                    continue;
                }
                let taken = reserved.contains(&p.name.as_str())
                    || BUILTINS.iter().any(|(n, _)| *n == p.name);
                let name = if taken {
                    format!("arg{i}")
                } else {
                    p.name.clone()
                };
                fields.push((
                    name,
                    0..0,
                    Expr {
                        ty: p.ty.clone(),
                        kind: ExprKind::Param(i),
                    },
                ));
            }
            if has_ret {
                let ret = self.ret(scope, 0..0)?;
                // A pointer return is shown as a number, not followed.
                let ret = match ret.kind {
                    ExprKind::Deref(inner) => *inner,
                    _ => ret,
                };
                fields.push(("ret".into(), 0..0, ret));
            }
            fields.push((
                "latency".into(),
                0..0,
                builtin(Builtin::Latency, Ty::Duration),
            ));
        } else {
            let mut failed = false;
            for item in items {
                let Ok(e) = self.expr(scope, &item.expr) else {
                    failed = true;
                    continue;
                };
                let name = match (&item.alias, &item.expr.kind) {
                    (Some(a), _) => a.name.clone(),
                    (None, ast::ExprKind::Name(n)) => n.clone(),
                    (None, ast::ExprKind::Member { field, .. }) => field.name.clone(),
                    _ => {
                        self.error(item.expr.span.clone(), DiagKind::NeedsName);
                        failed = true;
                        continue;
                    }
                };
                let span = item
                    .alias
                    .as_ref()
                    .map_or(item.expr.span.clone(), |a| a.span.clone());
                if fields.iter().any(|(n, _, _)| *n == name) {
                    self.error(span, DiagKind::DuplicateField { name });
                    failed = true;
                    continue;
                }
                fields.push((name, span, e));
            }
            if failed {
                return Err(Reported);
            }
        }
        let mut kinds = Vec::new();
        for (_, span, e) in &fields {
            kinds.push(self.field_kind(e, span.clone())?);
        }
        let (offsets, size) = layout(&kinds, 4);
        Ok(EventSchema {
            id: index as u32,
            session: label.to_string(),
            fields: fields
                .into_iter()
                .zip(kinds)
                .zip(offsets)
                .map(|(((name, _, expr), kind), offset)| EventField {
                    name,
                    kind,
                    offset,
                    expr,
                })
                .collect(),
            size,
        })
    }

    fn field_kind(&mut self, e: &Expr, span: Span) -> Checked<FieldKind> {
        Ok(match &e.ty {
            Ty::Int(s) => FieldKind::Int(*s),
            Ty::Bool => FieldKind::Bool,
            Ty::Duration => FieldKind::Duration,
            Ty::Str { cap } => FieldKind::Str { cap: *cap },
            Ty::Ptr { .. } => FieldKind::Ptr,
            Ty::Stack(k) => FieldKind::Stack(*k),
            Ty::Record { type_name, .. } => {
                return Err(self.error(
                    span,
                    DiagKind::StructValue {
                        ty: type_name.clone(),
                    },
                ));
            }
        })
    }

    fn aggregation(
        &mut self,
        scope: &Scope,
        label: &str,
        a: &ast::Aggregate,
    ) -> Checked<Aggregation> {
        let name = a.func.name();
        let arg = match (a.func, &a.arg) {
            (AggFunc::Count, None) => None,
            (AggFunc::Count, Some(e)) => {
                return Err(self.error(
                    e.span.clone(),
                    DiagKind::WrongArgCount {
                        func: name.into(),
                        expected: 0,
                        found: 1,
                    },
                ));
            }
            (_, None) => {
                return Err(self.error(
                    a.span.clone(),
                    DiagKind::WrongArgCount {
                        func: name.into(),
                        expected: 1,
                        found: 0,
                    },
                ));
            }
            (_, Some(e)) => {
                let v = self.expr(scope, e)?;
                if !matches!(v.ty, Ty::Int(_) | Ty::Duration) {
                    return Err(self.error(
                        e.span.clone(),
                        DiagKind::BadArgType {
                            func: name.into(),
                            expected: "a number or a duration",
                            found: v.ty.describe(),
                        },
                    ));
                }
                Some(v)
            }
        };
        if a.by.len() > MAX_KEYS {
            return Err(self.error(a.by[MAX_KEYS].span.clone(), DiagKind::TooManyKeys));
        }
        let mut keys = Vec::new();
        let mut kinds = Vec::new();
        for k in &a.by {
            let e = self.expr(scope, k)?;
            let kind = match e.ty {
                Ty::Int(s) => FieldKind::Int(s),
                Ty::Bool => FieldKind::Bool,
                Ty::Str { cap } => FieldKind::Str { cap },
                Ty::Stack(s) => FieldKind::Stack(s),
                ref t => {
                    return Err(self.error(k.span.clone(), DiagKind::BadKey { ty: t.describe() }));
                }
            };
            let name = match &k.kind {
                ast::ExprKind::Name(n) => n.clone(),
                ast::ExprKind::Member { field, .. } => field.name.clone(),
                _ => self.source[k.span.clone()].to_string(),
            };
            kinds.push(kind);
            keys.push((name, e));
        }
        let (offsets, key_size) = if kinds.is_empty() {
            (Vec::new(), 8)
        } else {
            layout(&kinds, 0)
        };
        let id = self.next_agg;
        let name = match &a.name {
            Some(given) => {
                if !self.agg_names.give(&given.name) {
                    return Err(self.error(
                        given.span.clone(),
                        DiagKind::DuplicateAggName {
                            name: given.name.clone(),
                        },
                    ));
                }
                given.name.clone()
            }
            None => {
                let arg_text = a.arg.as_ref().map(|e| &self.source[e.span.clone()]);
                self.agg_names
                    .derive(id, names::derived(label, a.func, arg_text))
            }
        };
        self.next_agg += 1;
        Ok(Aggregation {
            name,
            id,
            func: a.func,
            duration: arg.as_ref().is_some_and(|e| e.ty == Ty::Duration),
            arg,
            keys: keys
                .into_iter()
                .zip(kinds)
                .zip(offsets)
                .map(|(((name, expr), kind), offset)| AggKey {
                    name,
                    kind,
                    offset,
                    expr,
                })
                .collect(),
            key_size,
            title: self.source[a.span.clone()]
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" "),
        })
    }

    /// Records that a script reads member `name` of struct `ty`, so codegen declares it.
    fn declare_member(&mut self, ty: TypeId, name: &str, member_ty: TypeId) {
        let c_name = self.struct_c_name(ty);
        let (decl, needs) = self.member_decl(member_ty);
        let entry = self.structs.entry(c_name.clone()).or_insert_with(|| {
            (
                StructDecl {
                    ty,
                    c_name: c_name.clone(),
                    members: Vec::new(),
                },
                Vec::new(),
            )
        });
        if !entry.0.members.iter().any(|m| m.name == name) {
            entry.0.members.push(MemberDecl {
                name: name.to_string(),
                decl,
            });
            entry.1.extend(needs);
        }
        if !self.struct_order.contains(&c_name) {
            self.struct_order.push(c_name);
        }
    }

    fn struct_c_name(&self, ty: TypeId) -> String {
        match self.kernel.resolve(ty) {
            KType::Struct { name, union, .. } => {
                let kw = if union { "union" } else { "struct" };
                if name.is_empty() {
                    format!("{kw} fslat_anon_{ty}")
                } else {
                    format!("{kw} {name}")
                }
            }
            _ => format!("struct fslat_anon_{ty}"),
        }
    }

    /// The member's C declaration, and the structs it embeds by value.
    fn member_decl(&mut self, ty: TypeId) -> (String, Vec<String>) {
        match self.kernel.resolve(ty) {
            KType::Int { size, signed, .. } | KType::Enum { size, signed } => {
                (format!("{} {{}}", c_int(size, signed)), Vec::new())
            }
            KType::Ptr { pointee, .. } => {
                let target = match self.kernel.resolve(pointee) {
                    KType::Struct { .. } => self.struct_c_name(pointee),
                    _ if self.is_char(pointee) => "char".into(),
                    _ => "void".into(),
                };
                (format!("{target} *{{}}"), Vec::new())
            }
            KType::Struct { .. } => {
                let name = self.struct_c_name(ty);
                // An embedded struct must be complete; declare it even if empty.
                if !self.structs.contains_key(&name) {
                    self.structs.insert(
                        name.clone(),
                        (
                            StructDecl {
                                ty,
                                c_name: name.clone(),
                                members: Vec::new(),
                            },
                            Vec::new(),
                        ),
                    );
                    self.struct_order.push(name.clone());
                }
                (format!("{name} {{}}"), vec![name])
            }
            KType::Array { elem, len } => {
                let e = if self.is_char(elem) { "char" } else { "__u8" };
                (format!("{e} {{}}[{len}]"), Vec::new())
            }
            _ => ("__u64 {}".into(), Vec::new()),
        }
    }

    /// Struct declarations, each after the ones it embeds.
    fn ordered_structs(&self) -> Vec<StructDecl> {
        fn visit(
            name: &str,
            all: &BTreeMap<String, (StructDecl, Vec<String>)>,
            done: &mut Vec<String>,
            out: &mut Vec<StructDecl>,
        ) {
            if done.iter().any(|d| d == name) {
                return;
            }
            done.push(name.to_string());
            if let Some((decl, needs)) = all.get(name) {
                for n in needs {
                    visit(n, all, done, out);
                }
                out.push(decl.clone());
            }
        }
        let mut done = Vec::new();
        let mut out = Vec::new();
        for name in &self.struct_order {
            visit(name, &self.structs, &mut done, &mut out);
        }
        out
    }
}

pub fn c_int(size: u32, signed: bool) -> &'static str {
    match (size, signed) {
        (1, false) => "__u8",
        (1, true) => "__s8",
        (2, false) => "__u16",
        (2, true) => "__s16",
        (4, false) => "__u32",
        (4, true) => "__s32",
        (_, false) => "__u64",
        (_, true) => "__s64",
    }
}

fn int_const(v: i128) -> Expr {
    Expr {
        ty: Ty::Int(Scalar {
            size: 8,
            signed: v < 0,
        }),
        kind: ExprKind::Int(v),
    }
}

fn const_value(e: &Expr) -> Option<i128> {
    match e.kind {
        ExprKind::Int(v) => Some(v),
        _ => None,
    }
}

/// Folds arithmetic on two constants, so `10ms * 2` is a constant and `x < -1` sees `-1`.
fn fold(e: Expr) -> Expr {
    let ExprKind::Binary { op, lhs, rhs, .. } = &e.kind else {
        return e;
    };
    let (Some(a), Some(b)) = (const_value(lhs), const_value(rhs)) else {
        return e;
    };
    let v = match op {
        BinOp::Add => a.checked_add(b),
        BinOp::Sub => a.checked_sub(b),
        BinOp::Mul => a.checked_mul(b),
        BinOp::Div => a.checked_div(b),
        BinOp::Rem => a.checked_rem(b),
        BinOp::BitAnd => Some(a & b),
        BinOp::BitOr => Some(a | b),
        BinOp::BitXor => Some(a ^ b),
        BinOp::Shl => u32::try_from(b).ok().filter(|s| *s < 64).map(|s| a << s),
        BinOp::Shr => u32::try_from(b).ok().filter(|s| *s < 64).map(|s| a >> s),
        _ => {
            let r = match op {
                BinOp::Eq => a == b,
                BinOp::Ne => a != b,
                BinOp::Lt => a < b,
                BinOp::Le => a <= b,
                BinOp::Gt => a > b,
                _ => a >= b,
            };
            return Expr {
                ty: Ty::Bool,
                kind: ExprKind::Bool(r),
            };
        }
    };
    match v {
        Some(v) if v >= i128::from(i64::MIN) && v <= i128::from(u64::MAX) => Expr {
            ty: if e.ty == Ty::Duration {
                Ty::Duration
            } else {
                int_const(v).ty
            },
            kind: ExprKind::Int(v),
        },
        _ => e,
    }
}

fn flip(op: BinOp) -> BinOp {
    match op {
        BinOp::Lt => BinOp::Gt,
        BinOp::Gt => BinOp::Lt,
        BinOp::Le => BinOp::Ge,
        BinOp::Ge => BinOp::Le,
        o => o,
    }
}

/// `10000` → `10us`: the largest unit that divides the number of nanoseconds.
pub fn duration_literal(ns: i128) -> String {
    for (unit, scale) in [("s", 1_000_000_000), ("ms", 1_000_000), ("us", 1_000)] {
        if ns != 0 && ns % scale == 0 {
            return format!("{}{unit}", ns / scale);
        }
    }
    format!("{ns}ns")
}

fn quote_list(names: &[&str]) -> String {
    names
        .iter()
        .map(|n| format!("`{n}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Splits a predicate into what can be decided at entry and what must wait for return.
///
/// Top-level `and` terms that use neither `latency` nor `ret` are decided at entry only.
/// A term that mixes phases (`tgid == 1 or latency > 1ms`) is evaluated whole at return,
/// and its entry-only part also filters at entry where that is sound (`tgid == 1 or
/// comm == "x"` inside a term with `latency` still lets entry drop calls that match
/// neither).
fn split_phases(pred: Expr) -> (Option<Expr>, Option<Expr>) {
    let mut entry = Vec::new();
    let mut ret = Vec::new();
    for term in conjuncts(pred) {
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
    let join = |op, l: Expr, r: Expr| Expr {
        ty: Ty::Bool,
        kind: ExprKind::Binary {
            op,
            lhs: Box::new(l),
            rhs: Box::new(r),
            signed: false,
        },
    };
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
mod tests;
