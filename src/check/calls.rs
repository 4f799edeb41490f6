//! The functions a script may call besides `path()`: formatting (`hex`, `oct`), byte order
//! (`ntohs`, `ntohl`), `str(ptr, len)`, `entry(EXPR)`, a value saved at entry, and
//! `under(PATH)` (in `check/cgroups.rs`).

use super::program::*;
use super::{Checked, Checker, Reported, STRING_CAP, Scope};
use crate::btf::KType;
use crate::diag::{DiagKind, Diagnostic};
use crate::syntax::ast::{self, Span};

/// Most `entry()` values one session saves.
pub const MAX_ENTRY_VALUES: usize = 8;
/// Most bytes they take together per call in flight (a scalar 8, a string its capacity
/// rounded up to 8): they are copied to the BPF stack at return.
pub const MAX_ENTRY_BYTES: usize = 128;

/// Every function a script can call, for messages and completion.
pub const CALLS: &[&str] = &[
    "path", "str", "hex", "oct", "ntohs", "ntohl", "entry", "under",
];

impl Checker<'_> {
    /// `func(args)` if `func` is one of this file's functions.
    pub(super) fn library_call(
        &mut self,
        scope: &Scope,
        func: &ast::Ident,
        args: &[ast::Expr],
        span: Span,
    ) -> Option<Checked<Expr>> {
        let name = func.name.as_str();
        let arity = match name {
            "hex" | "oct" | "ntohs" | "ntohl" | "entry" | "under" => 1..=1,
            "str" => 1..=2,
            _ => return None,
        };
        if !arity.contains(&args.len()) {
            let mut d = Diagnostic::new(
                span,
                DiagKind::WrongArgCount {
                    func: name.into(),
                    expected: *arity.end(),
                    found: args.len(),
                },
            );
            if name == "str" {
                d = d.hint("`str(PTR)` reads up to 63 bytes; `str(PTR, LEN)` at most LEN");
            }
            return Some(Err(self.error_with(d)));
        }
        Some(match name {
            "hex" => self.formatted(scope, &args[0], Radix::Hex),
            "oct" => self.formatted(scope, &args[0], Radix::Oct),
            "ntohs" => self.swap(scope, &args[0], 16),
            "ntohl" => self.swap(scope, &args[0], 32),
            "str" => self.read_str(scope, &args[0], args.get(1)),
            "under" => self.under(&args[0]),
            _ => self.entry(scope, &args[0]),
        })
    }

    fn integer_arg(&mut self, scope: &Scope, func: &str, e: &ast::Expr) -> Checked<(Expr, Scalar)> {
        let v = self.expr(scope, e)?;
        match v.ty {
            Ty::Int(s) => Ok((v, s)),
            ref t => Err(self.error(
                e.span.clone(),
                DiagKind::BadArgType {
                    func: func.into(),
                    expected: "an integer",
                    found: t.describe(),
                },
            )),
        }
    }

    /// `hex(x)`, `oct(x)`: the same value, typed so the writers show it in that base.
    fn formatted(&mut self, scope: &Scope, e: &ast::Expr, radix: Radix) -> Checked<Expr> {
        let (v, scalar) = self.integer_arg(scope, radix.name(), e)?;
        Ok(Expr {
            ty: Ty::Formatted { scalar, radix },
            kind: v.kind,
        })
    }

    /// `hex(x)` or `oct(x)` used as a value.
    pub(super) fn formatted_operand(&mut self, radix: Radix, span: Span) -> Reported {
        let d = Diagnostic::new(span, DiagKind::FormattedOperand { func: radix.name() })
            .hint(format!(
                "use the value itself (`x == 0x10` whatever the base), and `{}(x)` in `emit` or `by`",
                radix.name()
            ));
        self.error_with(d)
    }

    /// `ntohs(x)`, `ntohl(x)`: the low 16 or 32 bits of x, bytes swapped (BPF runs
    /// little-endian on the machines fslat supports).
    fn swap(&mut self, scope: &Scope, e: &ast::Expr, bits: u8) -> Checked<Expr> {
        let func = if bits == 16 { "ntohs" } else { "ntohl" };
        let (v, _) = self.integer_arg(scope, func, e)?;
        Ok(Expr {
            ty: Ty::Int(Scalar {
                size: bits / 8,
                signed: false,
            }),
            kind: ExprKind::Swap {
                bits,
                expr: Box::new(v),
            },
        })
    }

    /// `str(ptr[, len])`: a string read from the address `ptr` (a `char *`, any pointer
    /// or a 64-bit integer), at most `len` bytes.
    fn read_str(
        &mut self,
        scope: &Scope,
        ptr: &ast::Expr,
        len: Option<&ast::Expr>,
    ) -> Checked<Expr> {
        let p = self.expr(scope, ptr)?;
        // Every address of a user-space session is in the traced process.
        let user_pointer = self.is_user_pointer(scope, &p);
        let user = self.now.user.is_some() || user_pointer;
        // A 64-bit word of user space is an address whatever its sign, as bpftrace's
        // `str(arg0)`/`str(retval)` take it: a USDT argument (gcc marks some pointers
        // signed) or a value of a user function without DWARF, whose parameters and
        // return are `s64` (`str(ret)` of bash's `readline`).
        let user_word = user && matches!(p.ty, Ty::Int(Scalar { size: 8, .. }));
        let address = match p.kind {
            // A `char *` parameter or return value, which fslat reads as a string.
            ExprKind::Deref(inner) => *inner,
            // A `char *` member read as a string: the pointer itself.
            ExprKind::Read {
                base,
                root,
                path,
                string: Some(StringSource::Pointer),
                hops,
            } => Expr {
                ty: Ty::Int(Scalar {
                    size: 8,
                    signed: false,
                }),
                kind: ExprKind::Read {
                    base,
                    root,
                    path,
                    string: None,
                    hops,
                },
            },
            kind if user_word
                || matches!(
                    p.ty,
                    Ty::Ptr { .. }
                        | Ty::Int(Scalar {
                            size: 8,
                            signed: false
                        })
                ) =>
            {
                Expr { ty: p.ty, kind }
            }
            _ => {
                return Err(self.error(
                    ptr.span.clone(),
                    DiagKind::BadArgType {
                        func: "str".into(),
                        expected: "a pointer (`char *`, any pointer, or a u64 address)",
                        found: p.ty.describe(),
                    },
                ));
            }
        };
        let len = match len {
            None => None,
            Some(l) => Some(Box::new(self.integer_arg(scope, "str", l)?.0)),
        };
        Ok(Expr {
            ty: Ty::Str { cap: STRING_CAP },
            kind: ExprKind::ReadStr {
                ptr: Box::new(address),
                len,
                user,
            },
        })
    }

    /// Whether BTF marks the parameter `p` reads as a `__user` pointer.
    fn is_user_pointer(&self, scope: &Scope, p: &Expr) -> bool {
        let param = match &p.kind {
            ExprKind::Param(i) => *i,
            ExprKind::Deref(inner) => match inner.kind {
                ExprKind::Param(i) => i,
                _ => return false,
            },
            _ => return false,
        };
        scope.per_func.iter().zip(scope.funcs).all(|(params, f)| {
            let name = &scope.params[param].name;
            params
                .iter()
                .position(|q| &q.name == name)
                .is_some_and(|j| {
                    super::usdt::usdt_scalar(f.params[j].ty).is_some()
                        || matches!(
                            self.types().resolve(f.params[j].ty),
                            KType::Ptr { user: true, .. }
                        )
                })
        })
    }

    /// `entry(EXPR)`: EXPR evaluated at entry and saved with the call, read at return.
    fn entry(&mut self, scope: &Scope, e: &ast::Expr) -> Checked<Expr> {
        if let Some(r) = self.entry_in_span(e.span.clone()) {
            return Err(r);
        }
        if self.now.at_point {
            return Err(self.error(e.span.clone(), DiagKind::EntryAtPoint));
        }
        let v = self.expr(scope, e)?;
        if v.at_return() {
            let d = Diagnostic::new(e.span.clone(), DiagKind::EntryOfReturnValue)
                .hint("`ret`, `latency`, `kstack`, `ustack` and `entry()` itself are known only at return");
            return Err(self.error_with(d));
        }
        if !savable(&v.ty) {
            return Err(self.error(
                e.span.clone(),
                DiagKind::BadArgType {
                    func: "entry".into(),
                    expected: "an integer, boolean, duration, pointer or string",
                    found: v.ty.describe(),
                },
            ));
        }
        self.save_entry_value(v, e.span.clone())
    }

    /// `v`, evaluated at entry (a span's START) and saved for return (END). In a span of
    /// several STARTs, the others compute it the same way (a builtin, not a parameter).
    pub(super) fn save_entry_value(&mut self, v: Expr, span: Span) -> Checked<Expr> {
        let others = self
            .now
            .span_start
            .as_ref()
            .map_or(0, |s| s.len().saturating_sub(1));
        let at_others = vec![v.clone(); others];
        self.save_at_starts(v, at_others, span)
    }

    /// `v` as the first START computes it, `at_others` as each other START does.
    pub(super) fn save_at_starts(
        &mut self,
        v: Expr,
        at_others: Vec<Expr>,
        span: Span,
    ) -> Checked<Expr> {
        let words: usize = self
            .now
            .entry_values
            .iter()
            .map(|s| saved_words(&s.ty))
            .sum();
        let same =
            |i: usize| self.now.entry_values[i] == v && self.now.entry_at_others[i] == at_others;
        let index = match (0..self.now.entry_values.len()).find(|&i| same(i)) {
            Some(i) => i,
            None if self.now.entry_values.len() >= MAX_ENTRY_VALUES
                || (words + saved_words(&v.ty)) * 8 > MAX_ENTRY_BYTES =>
            {
                return Err(self.error(
                    span,
                    DiagKind::TooManyEntryValues {
                        max: MAX_ENTRY_VALUES,
                        bytes: MAX_ENTRY_BYTES,
                    },
                ));
            }
            None => {
                self.now.entry_values.push(v.clone());
                self.now.entry_at_others.push(at_others);
                self.now.entry_values.len() - 1
            }
        };
        Ok(Expr {
            ty: v.ty,
            kind: ExprKind::Entry(index),
        })
    }
}
