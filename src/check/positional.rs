//! `$1`, `$2`, ... and `$#`: the script's command-line arguments (`fslat script.fsl 1234
//! 10ms`), each typed by how it is written, as a literal in the script would be.

use super::operators::int_const;
use super::program::*;
use super::{Checked, Checker};
use crate::diag::{DiagKind, Diagnostic};
use crate::syntax::ast::Span;
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
        let given = self.opts.args.len();
        match n.checked_sub(1).and_then(|i| self.opts.args.get(i)) {
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
    pub(super) fn positional_count(&self) -> Expr {
        int_const(self.opts.args.len() as i128)
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
