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
        let (shown, caret_col, width) = window(line, col - 1, width);
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
            printable(&shown)
        );
        let _ = writeln!(
            out,
            "{pad} {blue}|{reset} {}{red}{}{reset}",
            " ".repeat(caret_col),
            "^".repeat(width)
        );
        for h in &d.hints {
            let _ = writeln!(out, "{pad} {blue}={reset} hint: {h}");
        }
    }
    out
}

/// The most characters of a line shown; a longer one (a generated filter of thousands of
/// terms, a deeply nested expression) is cut to this many around the span, with `...`
/// where it was cut.
const MAX_SHOWN: usize = 100;
/// How much of a cut line comes before the span's start.
const BEFORE_SPAN: usize = 40;

/// What of `line` to show for a span at character `col` of `width` characters: the
/// text, the caret's column in it and its width.
fn window(line: &str, col: usize, width: usize) -> (String, usize, usize) {
    let chars: Vec<char> = line.chars().collect();
    if chars.len() <= MAX_SHOWN {
        return (line.to_string(), col, width);
    }
    let from = col
        .saturating_sub(BEFORE_SPAN)
        .min(chars.len().saturating_sub(MAX_SHOWN));
    let to = (from + MAX_SHOWN).min(chars.len());
    let mut shown = String::new();
    let mut caret = col - from;
    if from > 0 {
        shown.push_str("...");
        caret += 3;
    }
    shown.extend(&chars[from..to]);
    if to < chars.len() {
        shown.push_str("...");
    }
    (shown, caret, width.min(to.saturating_sub(col)).max(1))
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

    #[test]
    fn a_long_line_is_cut_to_a_window_around_the_span() {
        let terms: Vec<String> = (0..3000).map(|i| format!("tgid == {i}")).collect();
        let text = format!(
            "session vfs_read where {} or latncy > 1",
            terms.join(" or ")
        );
        let at = text.find("latncy").unwrap();
        let d = Diagnostic::new(
            at..at + 6,
            DiagKind::UnknownName {
                name: "latncy".into(),
            },
        );
        let src = Source {
            name: "t.fsl",
            text: &text,
        };
        let shown = render(&src, &[d], false);
        let lines: Vec<&str> = shown.lines().collect();
        assert!(shown.len() < 400, "{shown}");
        assert_eq!(
            lines[3],
            "1 | ...= 2994 or tgid == 2995 or tgid == 2996 or tgid == 2997 or tgid == 2998 or tgid == 2999 or latncy > 1",
            "{shown}"
        );
        let caret = lines[4].find('^').unwrap();
        assert_eq!(&lines[3][caret..caret + 6], "latncy", "{shown}");
        assert_eq!(lines[4].trim_end().len(), caret + 6, "{shown}");
    }

    #[test]
    fn a_long_span_in_a_long_line_is_cut_with_it() {
        let text = format!("session vfs_read where {}", "(".repeat(5000));
        let d = Diagnostic::new(23..5023, DiagKind::Syntax { expected: vec![] });
        let src = Source {
            name: "t.fsl",
            text: &text,
        };
        let shown = render(&src, &[d], false);
        let lines: Vec<&str> = shown.lines().collect();
        assert_eq!(
            lines[3].chars().count(),
            "1 | ".len() + MAX_SHOWN + 3,
            "{shown}"
        );
        assert!(lines[3].ends_with("(..."), "{shown}");
        assert_eq!(
            lines[4],
            format!("  | {}{}", " ".repeat(23), "^".repeat(77))
        );
    }
}
