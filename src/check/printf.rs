//! `printf(FORMAT, ARGS...)`: the format parsed once, here, and each conversion checked
//! against its argument's type. The event's fields are the arguments; the decoder
//! (`output::printf`) applies the format to them.

use super::operators::int_const;
use super::program::*;
use super::{Checked, Checker, Reported, Scope};
use crate::diag::DiagKind;
use crate::syntax::ast::{self, Span};

/// More arguments than this is an error (bpftrace's own limit is lower).
pub const MAX_PRINTF_ARGS: usize = 32;

/// A conversion as found in the format's bytes.
#[derive(Debug, PartialEq)]
pub enum Parsed {
    Text(Vec<u8>),
    Conv(ConvSpec),
}

/// What is wrong with a format, and the conversion's text.
#[derive(Debug, PartialEq)]
pub enum FormatError {
    /// `%q`, `%*d`, `%n`: the conversion as written.
    Unknown(String),
    /// A `%` (with flags, width...) and nothing after it.
    TrailingPercent,
}

/// Splits a format into text and conversions, as C's printf reads it.
pub fn parse_format(bytes: &[u8]) -> Result<Vec<Parsed>, FormatError> {
    let mut out = Vec::new();
    let mut text = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != b'%' {
            text.push(bytes[i]);
            i += 1;
            continue;
        }
        if bytes.get(i + 1) == Some(&b'%') {
            text.push(b'%');
            i += 2;
            continue;
        }
        let start = i;
        i += 1;
        let mut spec = ConvSpec {
            left: false,
            zero: false,
            plus: false,
            space: false,
            alt: false,
            width: None,
            precision: None,
            conv: 0,
        };
        while let Some(&c) = bytes.get(i) {
            match c {
                b'-' => spec.left = true,
                b'0' => spec.zero = true,
                b'+' => spec.plus = true,
                b' ' => spec.space = true,
                b'#' => spec.alt = true,
                _ => break,
            }
            i += 1;
        }
        let number = |i: &mut usize| {
            let from = *i;
            while bytes.get(*i).is_some_and(u8::is_ascii_digit) {
                *i += 1;
            }
            // A width past 4 digits is surely a mistake; it would only make huge lines.
            std::str::from_utf8(&bytes[from..*i])
                .ok()
                .and_then(|s| s.parse::<u32>().ok())
                .filter(|n| *n <= 1000)
        };
        if bytes.get(i).is_some_and(u8::is_ascii_digit) {
            spec.width = number(&mut i);
            if spec.width.is_none() {
                return Err(unknown(bytes, start, i));
            }
        }
        if bytes.get(i) == Some(&b'.') {
            i += 1;
            spec.precision = Some(number(&mut i).ok_or_else(|| unknown(bytes, start, i))?);
        }
        while let Some(b'l' | b'h' | b'z' | b'j') = bytes.get(i) {
            i += 1;
        }
        match bytes.get(i) {
            None => return Err(FormatError::TrailingPercent),
            Some(&c @ (b'd' | b'i' | b'u' | b'x' | b'X' | b'o' | b's' | b'c' | b'p')) => {
                spec.conv = c;
                i += 1;
            }
            Some(_) => return Err(unknown(bytes, start, i + 1)),
        }
        if !text.is_empty() {
            out.push(Parsed::Text(std::mem::take(&mut text)));
        }
        out.push(Parsed::Conv(spec));
    }
    if !text.is_empty() {
        out.push(Parsed::Text(text));
    }
    Ok(out)
}

/// A format's pieces, each conversion taking the next field; `None` if the format is
/// wrong (for a format whose arguments are known otherwise: `on begin`, tests).
pub fn printf_format(bytes: &[u8]) -> Option<Vec<Piece>> {
    let mut field = 0;
    let pieces = parse_format(bytes).ok()?;
    Some(
        pieces
            .into_iter()
            .map(|p| match p {
                Parsed::Text(t) => Piece::Text(t),
                Parsed::Conv(spec) => {
                    field += 1;
                    Piece::Conv {
                        spec,
                        field: field - 1,
                    }
                }
            })
            .collect(),
    )
}

fn unknown(bytes: &[u8], start: usize, end: usize) -> FormatError {
    let end = end.min(bytes.len());
    // Up to the end of a UTF-8 character, so the message quotes whole characters.
    let text = String::from_utf8_lossy(&bytes[start..end]).into_owned();
    FormatError::Unknown(text)
}

/// Where each `%` that starts a conversion is in the literal as written (`raw`, quotes
/// included), with the conversion's length: diagnostics point at the conversion itself.
fn raw_conversions(raw: &str) -> Vec<(usize, usize)> {
    let b = raw.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'\\' => i += 2,
            b'%' if b.get(i + 1) == Some(&b'%') => i += 2,
            b'%' => {
                let start = i;
                i += 1;
                while i < b.len() && b"-0+ #.123456789lhzj".contains(&b[i]) {
                    i += 1;
                }
                if i < b.len() && b[i] != b'"' {
                    i += 1;
                }
                out.push((start, i - start));
            }
            _ => i += 1,
        }
    }
    out
}

impl Checker<'_> {
    pub(super) fn printf(
        &mut self,
        scope: &Scope,
        index: usize,
        label: &str,
        args: &[ast::Expr],
        span: &Span,
    ) -> Checked<EventSchema> {
        let (pieces, fields) =
            self.format_and_values(args, span, &mut |cx, arg| cx.expr(scope, arg))?;
        let mut schema = self.event_schema(index, label, fields)?;
        schema.format = Some(Format { pieces });
        Ok(schema)
    }

    /// `on begin` / `on end`'s `printf`: of constants and `$1`.. only, printed by fslat.
    pub(super) fn user_line(&mut self, args: &[ast::Expr], span: &Span) -> Checked<UserLine> {
        let (pieces, fields) = self.format_and_values(args, span, &mut |cx, arg| {
            let value = match &arg.kind {
                ast::ExprKind::Positional(n) => cx.positional(*n, arg.span.clone())?,
                ast::ExprKind::PositionalCount => cx.positional_count(arg.span.clone())?,
                ast::ExprKind::Int(v) => int_const(i128::from(*v)),
                ast::ExprKind::Duration(ns) => Expr {
                    ty: Ty::Duration,
                    kind: ExprKind::Int(i128::from(*ns)),
                },
                ast::ExprKind::Str(b) => Expr {
                    ty: Ty::Str {
                        cap: b.len() as u32 + 1,
                    },
                    kind: ExprKind::Str(b.clone()),
                },
                ast::ExprKind::Bool(b) => Expr {
                    ty: Ty::Bool,
                    kind: ExprKind::Bool(*b),
                },
                _ => return Err(cx.error(arg.span.clone(), DiagKind::UserLineValue)),
            };
            match value.kind {
                ExprKind::Int(_) | ExprKind::Str(_) | ExprKind::Bool(_) => Ok(value),
                _ => Err(cx.error(arg.span.clone(), DiagKind::UserLineValue)),
            }
        })?;
        Ok(UserLine {
            pieces,
            values: fields.into_iter().map(|(_, _, e)| e).collect(),
        })
    }

    /// A `printf`'s format, checked against its arguments, each evaluated by `eval`.
    #[allow(clippy::type_complexity)]
    fn format_and_values(
        &mut self,
        args: &[ast::Expr],
        span: &Span,
        eval: &mut dyn FnMut(&mut Self, &ast::Expr) -> Checked<Expr>,
    ) -> Checked<(Vec<Piece>, Vec<(String, Span, Expr)>)> {
        let Some((format, args)) = args.split_first() else {
            return Err(self.error(span.clone(), DiagKind::PrintfNoFormat));
        };
        let ast::ExprKind::Str(bytes) = &format.kind else {
            return Err(self.error(format.span.clone(), DiagKind::PrintfNoFormat));
        };
        let (fspan, source) = (format.span.clone(), self.input.source);
        let raw = raw_conversions(&source[fspan.clone()]);
        let conv_span = |k: usize, convs: usize| match raw.get(k) {
            Some(&(at, len)) if raw.len() == convs => fspan.start + at..fspan.start + at + len,
            _ => fspan.clone(),
        };
        let parsed = match parse_format(bytes) {
            Ok(p) => p,
            Err(FormatError::TrailingPercent) => {
                let at = raw.last().map_or(fspan.clone(), |&(a, l)| {
                    fspan.start + a..fspan.start + a + l
                });
                return Err(self.error(at, DiagKind::FormatTrailingPercent));
            }
            Err(FormatError::Unknown(conv)) => {
                let at = raw
                    .iter()
                    .find(|&&(a, l)| source[fspan.start + a..].starts_with(&conv) && l > 0)
                    .map_or(fspan.clone(), |&(a, _)| {
                        fspan.start + a..fspan.start + a + conv.len()
                    });
                return Err(self.error(at, DiagKind::FormatUnknown { conv }));
            }
        };
        if args.len() > MAX_PRINTF_ARGS {
            return Err(self.error(
                args[MAX_PRINTF_ARGS].span.clone(),
                DiagKind::PrintfTooManyArgs {
                    limit: MAX_PRINTF_ARGS,
                },
            ));
        }
        let convs = parsed
            .iter()
            .filter(|p| matches!(p, Parsed::Conv(_)))
            .count();
        if convs > args.len() {
            return Err(self.error(
                conv_span(args.len(), convs),
                DiagKind::FormatTooFewArgs {
                    conversions: convs,
                    given: args.len(),
                },
            ));
        }
        if convs < args.len() {
            return Err(self.error(
                args[convs].span.clone(),
                DiagKind::FormatTooManyArgs {
                    conversions: convs,
                    given: args.len(),
                },
            ));
        }
        let mut fields: Vec<(String, Span, Expr)> = Vec::new();
        let mut pieces = Vec::new();
        let mut failed = false;
        let mut k = 0;
        for p in parsed {
            let spec = match p {
                Parsed::Text(t) => {
                    pieces.push(Piece::Text(t));
                    continue;
                }
                Parsed::Conv(spec) => spec,
            };
            let arg = &args[k];
            k += 1;
            let Ok(e) = eval(self, arg) else {
                failed = true;
                continue;
            };
            if let Err(expected) = accepts(spec.conv, &e.ty) {
                let conv = source[conv_span(k - 1, convs)].to_string();
                let mut d = crate::diag::Diagnostic::new(
                    arg.span.clone(),
                    DiagKind::FormatArgType {
                        conv: if conv.starts_with('%') {
                            conv
                        } else {
                            format!("%{}", spec.conv as char)
                        },
                        expected,
                        found: e.ty.describe(),
                    },
                );
                if e.ty == Ty::Duration {
                    d = d.hint("print a duration with `%s` (`50ms`), or as a number in a unit: `latency / 1us` with `%d`");
                } else if matches!(e.ty, Ty::Int(_)) && spec.conv == b's' {
                    d = d.hint("print an integer with `%d`, `%u` or `%x`");
                }
                self.error_with(d);
                failed = true;
                continue;
            }
            let name = self.printf_field_name(arg, &e, k - 1, &fields);
            pieces.push(Piece::Conv {
                spec,
                field: fields.len(),
            });
            fields.push((name, arg.span.clone(), e));
        }
        if failed {
            return Err(Reported);
        }
        Ok((pieces, fields))
    }

    /// The field's name in JSON: the argument's own name (`comm`, `f_flags`) when it has
    /// one not taken yet, else `argN` by its position among the arguments.
    fn printf_field_name(
        &self,
        arg: &ast::Expr,
        e: &Expr,
        position: usize,
        fields: &[(String, Span, Expr)],
    ) -> String {
        let taken = |n: &str, dur: bool| {
            let json = json_name(n, dur);
            fields
                .iter()
                .any(|(m, _, f)| json_name(m, f.ty == Ty::Duration) == json)
        };
        let dur = e.ty == Ty::Duration;
        let own = match &arg.kind {
            ast::ExprKind::Name(n) => Some(n.clone()),
            ast::ExprKind::Member { field, .. } => Some(field.name.clone()),
            _ => None,
        };
        if let Some(n) = own.filter(|n| !taken(n, dur)) {
            return n;
        }
        let mut name = format!("arg{position}");
        while taken(&name, dur) {
            name.push('_');
        }
        name
    }
}

/// Whether conversion `conv` prints a value of type `ty`; if not, what it prints.
fn accepts(conv: u8, ty: &Ty) -> Result<(), &'static str> {
    let ok = match conv {
        b'd' | b'i' | b'u' | b'x' | b'X' | b'o' => matches!(ty, Ty::Int(_) | Ty::Bool),
        b'c' => matches!(ty, Ty::Int(_)),
        b'p' => matches!(ty, Ty::Ptr { .. } | Ty::Int(_)),
        _ => matches!(
            ty,
            Ty::Str { .. }
                | Ty::Stack(_)
                | Ty::CgroupName(_)
                | Ty::Duration
                | Ty::Formatted { .. }
                | Ty::Bool
        ),
    };
    if ok {
        return Ok(());
    }
    Err(match conv {
        b'c' => "an integer (a character code)",
        b'p' => "a pointer or an integer",
        b's' => "a string (or a stack, a cgroup name, a duration, `hex()`)",
        _ => "an integer",
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conv(c: u8) -> ConvSpec {
        ConvSpec {
            left: false,
            zero: false,
            plus: false,
            space: false,
            alt: false,
            width: None,
            precision: None,
            conv: c,
        }
    }

    #[test]
    fn formats_split_into_text_and_conversions() {
        let p = parse_format(b"pid %-6d %08x %.10s %llu 100%%\n").unwrap();
        let mut pid = conv(b'd');
        pid.left = true;
        pid.width = Some(6);
        let mut hex = conv(b'x');
        hex.zero = true;
        hex.width = Some(8);
        let mut s = conv(b's');
        s.precision = Some(10);
        assert_eq!(
            p,
            vec![
                Parsed::Text(b"pid ".to_vec()),
                Parsed::Conv(pid),
                Parsed::Text(b" ".to_vec()),
                Parsed::Conv(hex),
                Parsed::Text(b" ".to_vec()),
                Parsed::Conv(s),
                Parsed::Text(b" ".to_vec()),
                Parsed::Conv(conv(b'u')),
                Parsed::Text(b" 100%\n".to_vec()),
            ]
        );
    }

    #[test]
    fn bad_conversions_are_named() {
        assert_eq!(
            parse_format(b"a %q b"),
            Err(FormatError::Unknown("%q".into()))
        );
        assert_eq!(parse_format(b"%*d"), Err(FormatError::Unknown("%*".into())));
        assert_eq!(parse_format(b"50%"), Err(FormatError::TrailingPercent));
        assert_eq!(parse_format(b"%-08l"), Err(FormatError::TrailingPercent));
        assert_eq!(
            parse_format(b"%99999d"),
            Err(FormatError::Unknown("%99999".into()))
        );
    }

    #[test]
    fn raw_conversions_point_into_the_literal() {
        assert_eq!(
            raw_conversions(r#""\"%s\" %%  %-6lu\n""#),
            vec![(3, 2), (12, 5)]
        );
    }
}
