//! `$1`, `$2`, ... and `$#`: the script's command-line arguments (`fslat script.fsl 1234
//! 10ms`), each typed by how it is written, as a literal in the script would be.
//!
//! A script run compiles them in as constants. A bundle's program reads them at run time
//! (`Options::runtime_args`, `ExprKind::Arg`), except where the checker needs a value to
//! compile the program (`Checker::compiled_in`): there the word given to `fslat build`
//! is compiled in, and the argument is fixed (`ScriptArg::fixed`).

use super::operators::int_const;
use super::program::*;
use super::{Checked, Checker, STRING_CAP, Scope};
use crate::diag::{DiagKind, Diagnostic};
use crate::syntax::ast::{self, Span};
use crate::syntax::{parse_duration, parse_int};

/// What a command-line argument is as a value: an integer (`1234`, `-1`, `0x10`), a
/// duration (`10ms`), else a string.
pub fn argument_value(arg: &str) -> Expr {
    let (negative, digits) = match arg.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, arg),
    };
    let numeric = digits.starts_with(|c: char| c.is_ascii_digit());
    if numeric && let Some(n) = parse_int(digits) {
        let n = i128::from(n);
        return int_const(if negative { -n } else { n });
    }
    if numeric
        && !negative
        && digits.ends_with(|c: char| c.is_ascii_alphabetic())
        && let Some(ns) = parse_duration(digits).filter(|_| is_duration(digits))
    {
        return Expr {
            ty: Ty::Duration,
            kind: ExprKind::Int(i128::from(ns)),
        };
    }
    Expr {
        ty: Ty::Str {
            cap: arg.len() as u32 + 1,
        },
        kind: ExprKind::Str(arg.as_bytes().to_vec()),
    }
}

/// What a run-time argument is, by the word given when the program is checked: a string
/// holds at least `STRING_CAP - 1` bytes (more when the word is longer).
pub fn arg_kind(word: &str) -> ArgKind {
    match argument_value(word).ty {
        Ty::Duration => ArgKind::Duration,
        Ty::Str { .. } => ArgKind::Str {
            cap: STRING_CAP.max((word.len() as u32 + 1).div_ceil(8) * 8),
        },
        _ => ArgKind::Int,
    }
}

/// `ARG1 ARG2 ARG3` for 3; past a few, the first two and the last (`$4000000000` must not
/// spell out four billion words).
fn args_up_to(n: usize) -> String {
    if n <= 6 {
        (1..=n)
            .map(|i| format!("ARG{i}"))
            .collect::<Vec<_>>()
            .join(" ")
    } else {
        format!("ARG1 ARG2 ... ARG{n}")
    }
}

/// Digits (and `_`) then one of the script's duration units.
fn is_duration(text: &str) -> bool {
    let split = text.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(0);
    let (num, unit) = text.split_at(split);
    matches!(unit, "ns" | "us" | "ms" | "s") && num.bytes().all(|b| b.is_ascii_digit() || b == b'_')
}

impl Checker<'_> {
    /// `$n` (`n` from 1).
    pub(super) fn positional(&mut self, n: usize, span: Span) -> Checked<Expr> {
        let given = self.input.opts.args.len();
        if n > 0 && self.input.opts.runtime_args {
            return self.runtime_arg(n, span);
        }
        match n.checked_sub(1).and_then(|i| self.input.opts.args.get(i)) {
            Some(arg) => Ok(argument_value(arg)),
            None if n == 0 => Err(self.error(span, DiagKind::PositionalZero)),
            None => {
                let d =
                    Diagnostic::new(span, DiagKind::MissingPositional { n, given }).hint(format!(
                        "give it after the script: `fslat SCRIPT.fsl {}`",
                        args_up_to(n)
                    ));
                Err(self.error_with(d))
            }
        }
    }

    /// `$#`.
    pub(super) fn positional_count(&mut self, span: Span) -> Checked<Expr> {
        if self.input.opts.runtime_args {
            return self.runtime_arg(0, span);
        }
        Ok(int_const(self.input.opts.args.len() as i128))
    }

    /// `$n` (`$#` for 0) read at run time; where its value is compiled in, the word given
    /// now, and the argument fixed.
    fn runtime_arg(&mut self, n: usize, span: Span) -> Checked<Expr> {
        let word = match n {
            0 => Some(self.input.opts.args.len().to_string()),
            n => self.input.opts.args.get(n - 1).cloned(),
        };
        let kind = match n {
            0 => ArgKind::Int,
            _ => word.as_deref().map_or(ArgKind::Int, arg_kind),
        };
        self.whole.args.entry(n).or_insert(ScriptArg {
            n,
            kind,
            fixed: None,
        });
        let Some(by) = self.now.fixing.clone() else {
            return Ok(Expr {
                ty: kind.ty(),
                kind: ExprKind::Arg(n),
            });
        };
        let Some(word) = word else {
            let d = Diagnostic::new(span, DiagKind::PositionalAtBuild { n, by }).hint(format!(
                "give it after the script: `fslat build SCRIPT.fsl {} -o FILE`; the bundle then runs with that value only",
                args_up_to(n)
            ));
            return Err(self.error_with(d));
        };
        if let Some(arg) = self.whole.args.get_mut(&n) {
            arg.fixed.get_or_insert(FixedArg {
                word: word.clone(),
                by,
            });
        }
        Ok(argument_value(&word))
    }

    /// `e` where its value is compiled in (`by` says what needs it: `lhist's bounds`): a
    /// bundle's `$n` in it are the words `fslat build` was given, and fixed.
    pub(super) fn compiled_in(&mut self, scope: &Scope, e: &ast::Expr, by: &str) -> Checked<Expr> {
        let before = self.now.fixing.replace(by.to_string());
        let checked = self.expr(scope, e);
        self.now.fixing = before;
        checked
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hint_for_a_missing_argument_names_at_most_a_few() {
        assert_eq!(args_up_to(1), "ARG1");
        assert_eq!(args_up_to(6), "ARG1 ARG2 ARG3 ARG4 ARG5 ARG6");
        assert_eq!(args_up_to(7), "ARG1 ARG2 ... ARG7");
        assert_eq!(args_up_to(4_000_000_000), "ARG1 ARG2 ... ARG4000000000");
    }

    #[test]
    fn arguments_are_typed_by_how_they_are_written() {
        assert_eq!(argument_value("1234"), int_const(1234));
        assert_eq!(argument_value("-1"), int_const(-1));
        assert_eq!(argument_value("0x10"), int_const(16));
        assert_eq!(
            argument_value("10ms"),
            Expr {
                ty: Ty::Duration,
                kind: ExprKind::Int(10_000_000)
            }
        );
        for s in ["bash", "10 ms", "1.5ms", "10x", "-", ""] {
            assert_eq!(
                argument_value(s).kind,
                ExprKind::Str(s.as_bytes().to_vec()),
                "{s}"
            );
        }
    }
}
