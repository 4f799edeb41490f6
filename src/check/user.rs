//! User-space sessions (`session FILE:FUNC`): the file's functions stand in for the
//! kernel's types while the session is checked, kernel-only names are refused, and what
//! the return phase reads of the entry (argument registers, the user stack) is saved at
//! entry, since a uretprobe sees neither.

use super::program::*;
use super::resources::Mode;
use super::{Checker, quote_list};
use crate::btf::{FuncSig, KernelTypes};
use crate::diag::{DiagKind, Diagnostic, closest};
use crate::elf::{self, UserTypes};
use crate::syntax::ast;
use crate::traceable::glob_match;
use std::rc::Rc;

impl Checker<'_> {
    /// The types names resolve against: the session's user-space file, or the kernel.
    pub(super) fn types(&self) -> &dyn KernelTypes {
        match &self.now.user {
            Some(u) => u.as_ref(),
            None => self.input.kernel,
        }
    }

    /// Reads the file of user-space session `s`, which then supplies the session's
    /// functions; `None` when a diagnostic was recorded.
    pub(super) fn open_user_file(&mut self, s: &ast::Session) -> Option<Rc<UserTypes>> {
        let file = s.file.as_ref()?;
        if !cfg!(target_arch = "x86_64") {
            self.error(file.span.clone(), DiagKind::UserNeedsX86);
            return None;
        }
        let why = match elf::find(&file.name, &self.input.opts.lookup) {
            Ok(Some(path)) => match elf::functions(&path) {
                Ok(funcs) => {
                    // DWARF for the functions the session names, and only those.
                    let named: Vec<String> = funcs
                        .iter()
                        .filter(|f| s.funcs.iter().any(|i| glob_match(&i.name, &f.name)))
                        .take(self.input.opts.max_functions + 1)
                        .map(|f| f.name.clone())
                        .collect();
                    let mut types = UserTypes::new(&path, funcs, self.input.kernel.features());
                    types.read_dwarf(&named);
                    return Some(Rc::new(types));
                }
                Err(e) => e,
            },
            Ok(None) => {
                self.error(file.span.clone(), DiagKind::NoMainExecutable);
                return None;
            }
            Err(elf::ElfError::NoLibrary { .. }) if is_tracepoint_prefix(&file.name) => {
                let name = s.funcs.first().map_or("NAME", |f| f.name.as_str());
                let point = format!("tp:{name}");
                let end = s.funcs.last().map_or(file.span.end, |f| f.span.end);
                let d = Diagnostic::new(
                    file.span.start..end,
                    DiagKind::SessionOfTracepoint { point: point.clone() },
                )
                .hint(format!(
                    "the time between two points is a span: `span {point}(KEY) -> tp:OTHER(KEY) {{ hist(latency) }}`"
                ));
                self.error_with(d);
                return None;
            }
            Err(e) => e,
        };
        self.error(
            file.span.clone(),
            DiagKind::UserFile {
                file: file.name.clone(),
                why: why.to_string(),
            },
        );
        None
    }

    /// How this kernel runs user-space sessions: as `--mode` says, else the best it has.
    pub(super) fn user_mode(&self) -> Mode {
        let f = self.input.kernel.features();
        match self.input.opts.user_mode {
            Some(m) => m,
            None if f.uprobe_session => Mode::UprobeSession,
            None if f.uprobe_multi => Mode::UprobeMulti,
            None => Mode::Uprobe,
        }
    }
}

/// A user-space function named exactly, or an error with the nearest names.
pub(super) fn function(
    types: &dyn KernelTypes,
    diags: &mut Vec<Diagnostic>,
    item: &ast::Ident,
) -> Option<FuncSig> {
    if let Some(f) = types.function(&item.name) {
        return Some(f);
    }
    let names = types.function_names();
    // An overloaded C++ function: each overload is named with its parameters.
    let overloads: Vec<&str> = names
        .iter()
        .map(String::as_str)
        .filter(|n| {
            n.strip_prefix(item.name.as_str())
                .is_some_and(|r| r.starts_with('('))
        })
        .collect();
    let near = if overloads.is_empty() {
        closest(&item.name, names.iter().map(String::as_str))
    } else {
        overloads
    };
    let mut d = Diagnostic::new(
        item.span.clone(),
        DiagKind::NoUserFunction {
            name: item.name.clone(),
            file: types.describe(),
        },
    );
    if near.iter().any(|n| n.contains('(')) {
        d = d.hint(format!(
            "`{}` is overloaded: name one in quotes (`\"{}\"`), or all with `{}*`",
            item.name, near[0], item.name
        ));
    } else if !near.is_empty() {
        d = d.hint(format!("did you mean {}?", quote_list(&near)));
    }
    d = d.hint(format!(
        "`fslat -l '{}:PATTERN*'` lists its functions",
        types.describe()
    ));
    diags.push(d);
    None
}

/// Makes what `session`'s return phase reads of the entry a saved entry value: the
/// argument registers (`arg0`, ...) and `ustack` (the stack as the function was called,
/// the function itself on top). A uretprobe runs after the function returned: its
/// registers are the caller's.
pub(super) fn carry_to_return(session: &mut Session) {
    carry(session, true);
}

/// The same for a kprobe session of kernel functions: its argument registers are the
/// callee's scratch at return. Its user stack is the same at entry and return (the task
/// is in the kernel), so it stays at return, where only matching calls take it.
pub fn carry_params_to_return(session: &mut Session) {
    carry(session, false);
}

fn carry(session: &mut Session, ustack: bool) {
    let mut saved = std::mem::take(&mut session.entry_values);
    let mut carry = |e: &mut Expr| carry_expr(e, &mut saved, ustack);
    if let Some(f) = &mut session.return_filter {
        carry(f);
    }
    for ev in &mut session.events {
        for f in &mut ev.fields {
            carry(&mut f.expr);
        }
        if let Some(g) = &mut ev.guard {
            carry(g);
        }
    }
    for a in &mut session.aggregations {
        if let Some(arg) = &mut a.arg {
            carry(arg);
        }
        if let Some(g) = &mut a.guard {
            carry(g);
        }
        for k in &mut a.keys {
            carry(&mut k.expr);
        }
    }
    session.entry_values = saved;
}

fn carry_expr(e: &mut Expr, saved: &mut Vec<Expr>, ustack: bool) {
    let from_entry = match e.kind {
        ExprKind::Param(_) => true,
        ExprKind::Builtin(b) if b == super::builtins::USTACK => ustack,
        _ => false,
    };
    if from_entry {
        let i = match saved.iter().position(|s| s == e) {
            Some(i) => i,
            None => {
                saved.push(e.clone());
                saved.len() - 1
            }
        };
        e.kind = ExprKind::Entry(i);
        return;
    }
    for c in e.children_mut() {
        carry_expr(c, saved, ustack);
    }
}

/// The words bpftrace and fslat put before a tracepoint's name (`tp:`, `tracepoint:`),
/// which after `session` read as a library's name.
fn is_tracepoint_prefix(file: &str) -> bool {
    matches!(
        file,
        "tp" | "t" | "tracepoint" | "rawtracepoint" | "rt" | "raw_tp"
    )
}
