//! Which kernel functions a session traces: its list of names and globs expanded against
//! the kernel (the same matching and traceability as `fslat -l`), and what names mean in a
//! session of several functions — a parameter, `argN` or `ret` only where every function
//! has it with the same type.

use super::program::{Param, Scalar, Target, Ty};
use super::{Checked, Checker, Input, Scope, SessionState, quote_list};
use crate::btf::{FuncSig, KType, KernelTypes};
use crate::cgroups::{Cgroup, LookupError};
use crate::diag::{DiagKind, Diagnostic, closest};
use crate::syntax::ast::{self, Span};
use crate::traceable::{Rule, glob_match, is_glob};
use std::collections::HashSet;
use std::rc::Rc;

/// Functions one session may trace unless `--max-functions` says otherwise.
pub const DEFAULT_MAX_FUNCTIONS: usize = 1000;

/// Functions a hint names before it says how many more there are.
const MAX_NAMED: usize = 4;

/// What the checker takes besides the script and the kernel's types.
#[derive(Clone)]
pub struct Options {
    /// More functions than this in one session is an error.
    pub max_functions: usize,
    /// What can be traced (`crate::traceable`); without it, BTF and the verifier's
    /// fixed lists decide (no ftrace list).
    pub traceable: Option<Rc<Rule>>,
    /// The script's command-line arguments, `$1` first.
    pub args: Vec<String>,
    /// `$1`.. and `$#` are read at run time (a bundle's program, `Program::args`), typed
    /// by the words in `args` where given (else integers), and compiled in only where
    /// the checker needs their value; otherwise each is the constant `args` gives.
    pub runtime_args: bool,
    /// Where user-space sessions find their files (-p, -c).
    pub lookup: crate::elf::Lookup,
    /// How user-space sessions run when `--mode` says (else the best the kernel has).
    pub user_mode: Option<super::resources::Mode>,
    /// Finds the cgroup a `cgroup == "PATH"` or `under("PATH")` names: the driver gives
    /// the host's hierarchy (`cgroups::lookup`); the checker reads no file system.
    pub cgroups: CgroupLookup,
    /// `--ustack-bytes`: `Program::ustack_bytes`.
    pub ustack_bytes: u32,
    /// `--ustack-walk`: `Program::ustack_walk`.
    pub ustack_walk: bool,
    /// `-v`: every session counts `errors`, also where nothing else needs the return
    /// (`Session::counts_errors`).
    pub count_errors: bool,
}

/// How the checker finds a cgroup by its path.
pub type CgroupLookup = fn(&str) -> Result<Cgroup, LookupError>;

/// Without a hierarchy (`fslat::compile`): a relative path is refused as on any host, and
/// an absolute one finds nothing.
fn no_cgroups(path: &str) -> Result<Cgroup, LookupError> {
    Err(if path.starts_with('/') {
        LookupError::NotMounted
    } else {
        LookupError::NotAbsolute
    })
}

/// A function a glob matched that cannot be traced, and why.
pub type Skipped = (String, String);

impl Default for Options {
    fn default() -> Self {
        Options {
            max_functions: DEFAULT_MAX_FUNCTIONS,
            traceable: None,
            args: Vec::new(),
            runtime_args: false,
            lookup: crate::elf::Lookup::default(),
            user_mode: None,
            cgroups: no_cgroups,
            ustack_bytes: crate::check::resources::UCOPY_DEFAULT,
            ustack_walk: false,
            count_errors: false,
        }
    }
}

/// Whether `session LIST` names several functions: a list, or any glob (however many
/// functions it matches).
pub fn is_several(s: &ast::Session) -> bool {
    s.funcs.len() > 1 || s.funcs.iter().any(|f| is_glob(&f.name))
}

/// The session's label: its list as written, without the spaces (`libc:malloc,free`
/// for user-space functions).
pub fn list_label(s: &ast::Session) -> String {
    // A USDT point without its file: `usdt:NAME`, `usdt:PROVIDER:NAME`.
    let point = |name: &ast::Ident, tracepoint: bool, usdt: &Option<ast::Usdt>| match usdt {
        Some(u) => match &u.provider {
            Some(p) => format!("usdt:{}:{}", p.name, name.name),
            None => format!("usdt:{}", name.name),
        },
        None => format!("{}{}", if tracepoint { "tp:" } else { "" }, name.name),
    };
    if let Some(ends) = &s.ends {
        let point = |p: &ast::SpanPoint| point(&p.name, p.tracepoint, &p.usdt);
        let starts: Vec<String> = ends.starts.iter().map(point).collect();
        return format!("{}->{}", starts.join(","), point(&ends.end));
    }
    if let Some(on) = &s.on {
        if let Some(file) = &s.file {
            return format!("{}:{}", file.name, on.name.name);
        }
        // Several tracepoints: each as written, its category too (`tp:sched:sched*`).
        let points: Vec<String> = std::iter::once(on)
            .chain(&on.more)
            .map(|p| match &p.category {
                Some(c) => format!("tp:{}:{}", c.name, p.name.name),
                None => point(&p.name, p.tracepoint, &p.usdt),
            })
            .collect();
        return points.join(",");
    }
    let list = s
        .funcs
        .iter()
        .map(|f| f.name.as_str())
        .collect::<Vec<_>>()
        .join(",");
    match &s.file {
        Some(file) => format!("{}:{list}", file.name),
        None => list,
    }
}

/// What the functions pass reads: the types a session's names resolve against (its
/// user-space file's, or the kernel's), whether they are a file's, and the options.
pub(super) struct Lookup<'a> {
    pub types: &'a dyn KernelTypes,
    pub user: bool,
    pub opts: &'a Options,
    /// `MODULE:FUNC`: only that module's functions (`vmlinux`: only the kernel's own).
    pub module: Option<&'a str>,
}

impl<'a> Lookup<'a> {
    /// The lookup of the session being checked (`SessionState::user`, else the kernel).
    pub(super) fn of(input: &'a Input, now: &'a SessionState) -> Self {
        Lookup {
            types: match &now.user {
                Some(u) => u.as_ref(),
                None => input.kernel,
            },
            user: now.user.is_some(),
            opts: &input.opts,
            module: now.module.as_deref(),
        }
    }
}

/// What can be traced: the driver's rule, or BTF's alone (`Options::traceable`).
fn rule(opts: &Options) -> Rc<Rule> {
    match &opts.traceable {
        Some(rule) => Rc::clone(rule),
        None => Rc::new(Rule::btf_only()),
    }
}

/// The functions `s` names, in order, each once; and the glob matches skipped as
/// untraceable, with why. `None` when a diagnostic was recorded.
pub(super) fn resolve(
    at: &Lookup,
    diags: &mut Vec<Diagnostic>,
    s: &ast::Session,
) -> Option<(Vec<FuncSig>, Vec<Skipped>)> {
    let mut funcs: Vec<FuncSig> = Vec::new();
    let mut skipped = Vec::new();
    let mut seen = HashSet::new();
    let mut failed = false;
    for item in &s.funcs {
        if !is_glob(&item.name) {
            match exact(at, diags, item) {
                Some(f) if seen.insert(f.name.clone()) => funcs.push(f),
                Some(_) => {}
                None => failed = true,
            }
            continue;
        }
        let rule = rule(at.opts);
        let mut found = 0;
        let mut untraceable = Vec::new();
        for name in at.types.function_names() {
            if !glob_match(&item.name, &name) || !in_module(at, &name) {
                continue;
            }
            let Some(f) = at.types.function(&name) else {
                continue;
            };
            if let Some(why) = (!at.user).then(|| rule.why_not(at.types, &f)).flatten() {
                untraceable.push((name, why.to_string()));
                continue;
            }
            found += 1;
            if seen.insert(name) {
                funcs.push(f);
            }
        }
        if found == 0 && at.user {
            let file = s.file.as_ref().map_or("", |f| f.name.as_str());
            let d = Diagnostic::new(
                item.span.clone(),
                DiagKind::NoUserFunctionMatches {
                    pattern: item.name.clone(),
                    file: at.types.describe(),
                },
            )
            .hint(format!(
                "`fslat -l '{file}:{}'` lists the functions a pattern matches",
                item.name
            ));
            diags.push(d);
            failed = true;
        } else if found == 0 {
            let mut d = Diagnostic::new(
                item.span.clone(),
                DiagKind::NoFunctionMatches {
                    pattern: item.name.clone(),
                },
            );
            if !untraceable.is_empty() {
                let names: Vec<&str> = untraceable
                    .iter()
                    .take(3)
                    .map(|(n, _)| n.as_str())
                    .collect();
                d = d.hint(format!(
                    "{} function(s) match but cannot be traced ({}{})",
                    untraceable.len(),
                    quote_list(&names),
                    if untraceable.len() > 3 { ", ..." } else { "" }
                ));
            }
            d = d.hint(format!(
                "`fslat -l '{}'` lists the functions a pattern matches",
                item.name
            ));
            diags.push(d);
            failed = true;
        }
        skipped.extend(untraceable);
    }
    if failed {
        return None;
    }
    if funcs.len() > at.opts.max_functions {
        let span = s.func.span.start..s.funcs.last().map_or(s.func.span.end, |f| f.span.end);
        let d = Diagnostic::new(
            span,
            DiagKind::TooManyFunctions {
                count: funcs.len(),
                max: at.opts.max_functions,
            },
        )
        .hint("narrow the pattern, or raise the limit with --max-functions N");
        diags.push(d);
        return None;
    }
    Some((funcs, skipped))
}

/// A function named exactly: unknown and untraceable names are errors.
pub(super) fn exact(
    at: &Lookup,
    diags: &mut Vec<Diagnostic>,
    item: &ast::Ident,
) -> Option<FuncSig> {
    if at.user {
        return super::user::function(at.types, diags, item);
    }
    let Some(func) = at.types.function(&item.name) else {
        let names = at.types.function_names();
        let mut d = Diagnostic::new(
            item.span.clone(),
            DiagKind::UnknownFunction {
                name: item.name.clone(),
            },
        );
        let near = closest(&item.name, names.iter().map(String::as_str));
        if !near.is_empty() {
            d = d.hint(format!("did you mean {}?", quote_list(&near)));
        }
        d = d.hint("`fslat -l 'PATTERN*'` lists the functions this kernel can trace");
        diags.push(d);
        return None;
    };
    if let Some(module) = at.module.filter(|_| !in_module(at, &func.name)) {
        diags.push(
            Diagnostic::new(
                item.span.clone(),
                DiagKind::NotInModule {
                    name: func.name.clone(),
                    module: module.to_string(),
                },
            )
            .hint(format!(
                "`fslat -l '{module}:*'` lists the module's functions"
            )),
        );
        return None;
    }
    if let Some(reason) = rule(at.opts).why_not_named(at.types, &func) {
        diags.push(Diagnostic::new(
            item.span.clone(),
            DiagKind::Untraceable {
                func: func.name.clone(),
                reason: reason.to_string(),
            },
        ));
        return None;
    }
    Some(func)
}

/// Whether `name` is a function of the session's module, when it names one.
fn in_module(at: &Lookup, name: &str) -> bool {
    match at.module {
        None => true,
        Some("vmlinux") => at.types.module_of(name).is_none(),
        Some(m) => at.types.module_of(name).as_deref() == Some(m),
    }
}

impl Checker<'_> {
    /// The kernel module `FILE` names in `FILE:FUNC` (`vmlinux` too), which the session's
    /// functions are then in: `Some(None)` when FILE is a user-space file (a path, or a
    /// name no module of this kernel has); `None` when a diagnostic was recorded.
    pub(super) fn kernel_module(&mut self, s: &ast::Session) -> Option<Option<String>> {
        let Some(file) = &s.file else {
            return Some(None);
        };
        let name = &file.name;
        if name.is_empty() || name.contains(['/', '.']) {
            return Some(None);
        }
        let kind = match self.input.kernel.module(name) {
            crate::btf::Module::Types => return Some(Some(name.replace('-', "_"))),
            crate::btf::Module::Unknown => return Some(None),
            crate::btf::Module::NoTypes => DiagKind::ModuleWithoutTypes {
                module: name.clone(),
            },
            crate::btf::Module::Unloaded => DiagKind::ModuleNotLoaded {
                module: name.clone(),
            },
        };
        self.error(file.span.clone(), kind);
        None
    }

    /// A string compared with `func` must name one of the session's functions, or the
    /// comparison could never hold (`!=`: never fail).
    pub(super) fn traced_function(
        &mut self,
        scope: &Scope,
        name: &[u8],
        span: Span,
    ) -> Checked<()> {
        if scope.funcs.iter().any(|f| f.name.as_bytes() == name) {
            return Ok(());
        }
        let name = String::from_utf8_lossy(name).into_owned();
        let traced: Vec<&str> = scope.funcs.iter().map(|f| f.name.as_str()).collect();
        let near = closest(&name, traced.iter().copied());
        let hint = if !near.is_empty() {
            format!("did you mean {}?", quote_list(&near))
        } else if traced.len() <= MAX_NAMED {
            format!("the session traces {}", quote_list(&traced))
        } else {
            format!(
                "the session traces {} and {} more",
                quote_list(&traced[..MAX_NAMED]),
                traced.len() - MAX_NAMED
            )
        };
        let d = Diagnostic::new(span, DiagKind::NotTracedHere { name }).hint(hint);
        Err(self.error_with(d))
    }

    /// The parameters of `func` with their context slots, and the slot `ret` follows.
    pub(super) fn params_of(&self, func: &FuncSig) -> (Vec<Param>, usize) {
        let mut slot = 0;
        let params = func
            .params
            .iter()
            .enumerate()
            .map(|(i, p)| match super::usdt::usdt_scalar(p.ty) {
                // A USDT argument: read by its index, whatever its size.
                Some(scalar) => Param {
                    slot: i,
                    name: p.name.clone(),
                    type_name: format!(
                        "{}{}",
                        if scalar.signed { "s" } else { "u" },
                        scalar.size * 8
                    ),
                    ty: Ty::Int(scalar),
                },
                None => Param {
                    slot: {
                        let at = slot;
                        // The trampoline passes a struct of up to 16 bytes in two registers. A
                        // user function's floats go in vector registers and its bigger
                        // structs on the stack: they take no integer register.
                        let user = self.now.user.is_some();
                        slot += match self.types().resolve(p.ty) {
                            KType::Struct { size, .. } if user && size > 16 => 0,
                            KType::Struct { size, .. } => (size as usize).div_ceil(8).max(1),
                            KType::Other if user => 0,
                            _ => 1,
                        };
                        at
                    },
                    name: if p.name.is_empty() {
                        format!("arg{i}")
                    } else {
                        p.name.clone()
                    },
                    type_name: self.types().type_name(p.ty),
                    ty: self.value_type(p.ty).unwrap_or(Ty::Int(Scalar {
                        size: 8,
                        signed: false,
                    })),
                },
            })
            .collect();
        (params, slot)
    }

    /// How `ret` of `func` is carried: `None` for void.
    pub(super) fn ret_scalar(&self, func: &FuncSig) -> Option<Scalar> {
        match self.types().resolve(func.ret) {
            KType::Void => None,
            KType::Int { size, signed, .. } | KType::Enum { size, signed } if size <= 8 => {
                Some(Scalar {
                    size: size as u8,
                    signed,
                })
            }
            // Pointers and anything else are carried as 64-bit unsigned.
            _ => Some(Scalar {
                size: 8,
                signed: false,
            }),
        }
    }

    /// The parameters every function of a several-function session has, by name, with
    /// the same type: what its default `emit` shows.
    pub(super) fn common_params(per_func: &[Vec<Param>]) -> Vec<(Param, Vec<usize>)> {
        let Some((first, rest)) = per_func.split_first() else {
            return Vec::new();
        };
        first
            .iter()
            .filter_map(|p| {
                let mut slots = vec![p.slot];
                for params in rest {
                    let q = params
                        .iter()
                        .find(|q| q.name == p.name && q.type_name == p.type_name)?;
                    slots.push(q.slot);
                }
                Some((p.clone(), slots))
            })
            .collect()
    }

    /// In a several-function session: the parameter `name` (or `argN`) as the session's
    /// parameter index, added to the shared list if new. An error names a function
    /// that lacks it or has it with another type.
    pub(super) fn shared_param(&mut self, scope: &Scope, name: &str, span: Span) -> Checked<usize> {
        if let Some(i) = self.now.shared.iter().position(|(p, _)| p.name == name) {
            return Ok(i);
        }
        let by_pos = name
            .strip_prefix("arg")
            .filter(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|n| n.parse::<usize>().ok());
        let mut found: Vec<(&FuncSig, &Param, usize)> = Vec::new();
        for (f, params) in scope.funcs.iter().zip(scope.per_func) {
            let at = params
                .iter()
                .position(|p| p.name == name)
                .or(by_pos.filter(|i| *i < params.len()));
            match at {
                Some(i) => found.push((f, &params[i], i)),
                None => {
                    let other = found.first().map(|(g, _, _)| g.name.clone());
                    let d = Diagnostic::new(
                        span,
                        DiagKind::NotInEveryFunction {
                            name: name.into(),
                            func: f.name.clone(),
                            other: other.or_else(|| {
                                scope
                                    .funcs
                                    .iter()
                                    .zip(scope.per_func)
                                    .find(|(_, ps)| ps.iter().any(|p| p.name == name))
                                    .map(|(g, _)| g.name.clone())
                            }),
                        },
                    );
                    return Err(self.error_with(several_hints(d, name, scope)));
                }
            }
        }
        let (first_func, first, _) = found[0];
        if let Some((f, p, _)) = found
            .iter()
            .find(|(_, p, _)| p.type_name != first.type_name)
        {
            let d = Diagnostic::new(
                span,
                DiagKind::OtherTypeInFunction {
                    name: name.into(),
                    func: f.name.clone(),
                    ty: p.type_name.clone(),
                    first_func: first_func.name.clone(),
                    first_ty: first.type_name.clone(),
                },
            );
            return Err(self.error_with(several_hints(d, name, scope)));
        }
        let param = Param {
            name: name.to_string(),
            ..first.clone()
        };
        let slots = found.iter().map(|(_, p, _)| p.slot).collect();
        self.now.shared.push((param, slots));
        Ok(self.now.shared.len() - 1)
    }

    /// In a several-function session: the BTF type of parameter `i` (the first
    /// function's; every function has the same).
    pub(super) fn shared_param_type(&self, scope: &Scope, i: usize) -> crate::btf::TypeId {
        let name = &self.now.shared[i].0.name;
        let params = &scope.per_func[0];
        let at = params.iter().position(|p| &p.name == name).or_else(|| {
            name.strip_prefix("arg")
                .and_then(|n| n.parse::<usize>().ok())
        });
        at.and_then(|a| scope.funcs[0].params.get(a))
            .map_or(0, |p| p.ty)
    }

    /// In a several-function session: `ret` is there when every function returns the
    /// same non-void type.
    pub(super) fn shared_ret(&mut self, scope: &Scope, span: Span) -> Checked<()> {
        let first = &scope.funcs[0];
        let first_ty = self.types().type_name(first.ret);
        for f in scope.funcs {
            if matches!(self.types().resolve(f.ret), KType::Void) {
                let d = Diagnostic::new(
                    span,
                    DiagKind::RetOfVoid {
                        func: f.name.clone(),
                    },
                );
                return Err(self.error_with(several_hints(d, "ret", scope)));
            }
            let ty = self.types().type_name(f.ret);
            if ty != first_ty {
                let d = Diagnostic::new(
                    span,
                    DiagKind::OtherTypeInFunction {
                        name: "ret".into(),
                        func: f.name.clone(),
                        ty,
                        first_func: first.name.clone(),
                        first_ty,
                    },
                );
                return Err(self.error_with(several_hints(d, "ret", scope)));
            }
        }
        Ok(())
    }

    /// Whether every function returns the same non-void type (the default event shows
    /// `ret` then).
    pub(super) fn has_shared_ret(&self, funcs: &[FuncSig]) -> bool {
        let first = self.types().type_name(funcs[0].ret);
        funcs.iter().all(|f| {
            !matches!(self.types().resolve(f.ret), KType::Void)
                && self.types().type_name(f.ret) == first
        })
    }

    /// The session's targets: per function, where each shared parameter sits.
    pub(super) fn targets(&self, funcs: &[FuncSig], ret_slots: &[usize]) -> Vec<Target> {
        funcs
            .iter()
            .zip(ret_slots)
            .enumerate()
            .map(|(t, (f, ret_slot))| Target {
                func: f.name.clone(),
                slots: self.now.shared.iter().map(|(_, slots)| slots[t]).collect(),
                ret_slot: *ret_slot,
                ret: self.ret_scalar(f),
                offset: self
                    .now
                    .user
                    .as_ref()
                    .and_then(|u| u.get(&f.name))
                    .map(|u| u.offset),
                args: 0,
            })
            .collect()
    }
}

fn several_hints(d: Diagnostic, name: &str, scope: &Scope) -> Diagnostic {
    let n = scope.funcs.len();
    if name == "ret" || name.starts_with("arg") {
        d.hint(format!(
            "narrow the pattern or the list: the session has {n} functions"
        ))
    } else {
        d.hint("name it by position (`argN`) if it sits at the same place in every function")
            .hint(format!(
                "or narrow the pattern or the list: the session has {n} functions"
            ))
    }
}
