//! The one way fslat shows a diagnostic: headline with its code, `file:line:col`, the
//! line, a caret under the span, the hints.

use super::Diagnostic;
use std::fmt::Write as _;

/// Where the script came from, for `file:line:col`.
pub struct Source<'a> {
    pub name: &'a str,
    pub text: &'a str,
}

/// Renders diagnostics the one way fslat shows them:
///
/// ```text
/// error[F0401]: unknown name `latncy`
///  --> slow.fsl:1:37
///   |
/// 1 | session vfs_read where tgid == 1 and latncy > 10ms
///   |                                      ^^^^^^
///   = hint: did you mean `latency`?
/// ```
pub fn render(source: &Source, diags: &[Diagnostic], color: bool) -> String {
    let (red, blue, bold, reset) = if color {
        ("\x1b[1;31m", "\x1b[1;34m", "\x1b[1m", "\x1b[0m")
    } else {
        ("", "", "", "")
    };
    let mut out = String::new();
    for d in diags {
        let start = d.span.start.min(source.text.len());
        let end = d.span.end.clamp(start, source.text.len());
        let line_start = source.text[..start].rfind('\n').map_or(0, |i| i + 1);
        let line_end = source.text[start..]
            .find('\n')
            .map_or(source.text.len(), |i| start + i);
        let line_no = source.text[..start].matches('\n').count() + 1;
        let col = source.text[line_start..start].chars().count() + 1;
        let line = &source.text[line_start..line_end];
        let width = source.text[start..end.min(line_end)].chars().count().max(1);
        let gutter = line_no.to_string().len();
        let pad = " ".repeat(gutter);
        let _ = writeln!(
            out,
            "{red}error[{}]{reset}{bold}: {}{reset}",
            d.kind.code(),
            d.kind.message()
        );
        let _ = writeln!(out, "{pad}{blue}-->{reset} {}:{line_no}:{col}", source.name);
        let _ = writeln!(out, "{pad} {blue}|{reset}");
        let _ = writeln!(
            out,
            "{blue}{line_no}{reset} {blue}|{reset} {}",
            printable(line)
        );
        let _ = writeln!(
            out,
            "{pad} {blue}|{reset} {}{red}{}{reset}",
            " ".repeat(col - 1),
            "^".repeat(width)
        );
        for h in &d.hints {
            let _ = writeln!(out, "{pad} {blue}={reset} hint: {h}");
        }
    }
    out
}

/// Tabs and control characters would misplace the caret.
fn printable(line: &str) -> String {
    line.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diag::DiagKind;

    #[test]
    fn renders_caret_under_span() {
        let src = Source {
            name: "t.fsl",
            text: "session vfs_read where latncy > 1ms",
        };
        let d = Diagnostic::new(
            23..29,
            DiagKind::UnknownName {
                name: "latncy".into(),
            },
        )
        .hint("did you mean `latency`?");
        let text = render(&src, &[d], false);
        assert_eq!(
            text,
            "error[F0401]: unknown name `latncy`\n --> t.fsl:1:24\n  |\n1 | session vfs_read where latncy > 1ms\n  |                        ^^^^^^\n  = hint: did you mean `latency`?\n"
        );
    }
}
