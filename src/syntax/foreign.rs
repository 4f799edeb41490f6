//! Where the parser stops on something a bpftrace user would write (`kprobe:`, `/pred/`,
//! `printf`, `@map = count()`, `'str'`, `1.5ms`, ...), say what it is and show the fslat
//! way, translated from the script's own text where that is simple.
//!
//! This runs only on a syntax error, on the raw text at the error's position: the grammar
//! stays fslat's own, and nothing here decides what a valid script means.

use super::Rule;
use crate::diag::{DiagKind, Diagnostic, closest};

/// A diagnostic for the bpftrace idiom (or mistyped keyword) at `pos`, if there is one.
pub fn explain(source: &str, pos: usize, expected: &[Rule]) -> Option<Diagnostic> {
    let pos = pos.min(source.len());
    let rest = &source[pos..];
    if let Some(d) = fractional_duration(source, pos) {
        return Some(d);
    }
    if let Some(d) = bad_value(source, pos) {
        return Some(d);
    }
    if let Some(d) = probe_in_item(source, pos) {
        return Some(d);
    }
    // `profile:hz:99`: fslat's own keyword `profile` parsed, then the parser stops at the
    // colon of bpftrace's probe.
    if rest.starts_with(':')
        && !rest.starts_with("::")
        && let Some(start) = source[..pos].strip_suffix("profile").map(str::len)
        && !source[..start].ends_with(|c: char| c.is_alphanumeric() || c == '_')
    {
        return probe_diag(source, start, "profile");
    }
    let word = ident_at(rest);
    let after_word = rest[word.len()..].trim_start();
    match rest.chars().next()? {
        '\'' => return Some(single_quotes(source, pos)),
        '/' if let Some(d) = relative_path(source, pos) => return Some(d),
        '/' if expected.contains(&Rule::kw_where) => return slash_filter(source, pos),
        '=' if !rest.starts_with("==") && !after_operator(source, pos) => {
            return Some(
                Diagnostic::new(pos..pos + 1, DiagKind::AssignAsComparison)
                    .hint(comparison_hint(source, pos)),
            );
        }
        '$' => return variable(source, pos),
        '@' => return Some(map(source, pos)),
        _ => {}
    }
    if word.is_empty() {
        return None;
    }
    let span = pos..pos + word.len();
    let probe = rest[word.len()..].starts_with(':') && !rest[word.len()..].starts_with("::");
    if probe || ((word == "BEGIN" || word == "END") && after_word.starts_with('{')) {
        return probe_diag(source, pos, word);
    }
    match word {
        "if" | "else" => {
            return Some(Diagnostic::new(span, DiagKind::ForeignIf).hint(
                "write `if COND { ACTIONS } else if COND { ACTIONS } else { ACTIONS }`: the braces are required, the parentheses are not",
            ));
        }
        "exit" if after_word.starts_with('(') => {
            return Some(
                Diagnostic::new(span, DiagKind::ForeignPrintf { name: word.into() }).hint(
                    "a run ends after `-d DURATION`, when the command of `-c` exits, or at Ctrl-C (SIGINT or SIGTERM), and then prints its aggregations and summary",
                ),
            );
        }
        "print" | "clear" | "zero" if after_word.starts_with('(') => {
            return Some(
                Diagnostic::new(span, DiagKind::ForeignPrintf { name: word.into() }).hint(
                    "fslat prints every aggregation at the end of a run, and with `-i DUR` prints and clears them every DUR",
                ),
            );
        }
        _ => {}
    }
    keyword_typo(source, pos, word, expected)
}

/// bpftrace's probe kinds that name no fslat point (`usdt:` does; `tp:` is fslat's own),
/// by the names a file could not have: the one-letter forms are left out.
fn is_probe_kind(word: &str) -> bool {
    matches!(
        word,
        "kprobe"
            | "kretprobe"
            | "fentry"
            | "fexit"
            | "kfunc"
            | "kretfunc"
            | "uprobe"
            | "uretprobe"
            | "tracepoint"
            | "rawtracepoint"
            | "interval"
            | "software"
            | "hardware"
            | "watchpoint"
    )
}

/// A bpftrace probe where fslat's item expects its point: `on uprobe:/bin/bash:readline`,
/// `on tracepoint:sched:sched_switch` stop the parser inside it (at `pos`).
fn probe_in_item(source: &str, pos: usize) -> Option<Diagnostic> {
    let start = source[..pos]
        .rfind(|c: char| c.is_whitespace() || c == ',')
        .map_or(0, |i| i + 1);
    let end = source[pos..]
        .find(|c: char| c.is_whitespace() || "{},".contains(c))
        .map_or(source.len(), |i| pos + i);
    let (kind, _) = source[start..end].split_once(':')?;
    let before = source[..start].trim_end();
    let in_item = ["on", "session", "span", "->", ","]
        .iter()
        .any(|w| before.ends_with(w));
    (is_probe_kind(kind) && in_item).then(|| point_diag(source, start, kind))
}

/// The same after a parse that took the probe's kind for a file (`on kprobe:vfs_read`
/// reads as the function `vfs_read` of a program `kprobe`): the `user_file` at `at`.
pub fn probe_as_file(source: &str, at: std::ops::Range<usize>) -> Option<Diagnostic> {
    let kind = source.get(at.clone())?;
    let followed = source[at.end..].starts_with(':');
    (is_probe_kind(kind) && followed).then(|| point_diag(source, at.start, kind))
}

/// A bpftrace probe written as an fslat item's point, at `start`: the point fslat
/// takes there, the rest of the item as the user wrote it.
fn point_diag(source: &str, start: usize, kind: &str) -> Diagnostic {
    let len = source[start..]
        .find(|c: char| c.is_whitespace() || "{},".contains(c))
        .unwrap_or(source.len() - start);
    let probe = &source[start..start + len];
    let spec = probe.split_once(':').map_or("", |(_, s)| s);
    let item = source[..start].split_whitespace().next_back().unwrap_or("");
    let point = match kind {
        "tracepoint" | "rawtracepoint" => match spec.split_once(':') {
            Some((_, name)) if !name.contains(['*', '?']) => Some(format!("tp:{name}")),
            _ if !spec.is_empty() => Some(format!("tp:{spec}")),
            _ => None,
        },
        _ if !spec.is_empty()
            && !matches!(kind, "interval" | "software" | "hardware" | "watchpoint") =>
        {
            Some(spec.to_string())
        }
        _ => None,
    };
    let returns = matches!(kind, "kretprobe" | "kretfunc" | "fexit" | "uretprobe");
    let hint = match point {
        Some(p) if returns && item == "on" => format!(
            "`on` acts at the entry; the return is a session's: write `session {p}` (`ret`, `latency`)"
        ),
        Some(p) => format!("write `{p}` here"),
        None => {
            "fslat's points are functions (`FUNC`, `FILE:FUNC`), `tp:NAME` and `usdt:FILE:NAME`"
                .into()
        }
    };
    Diagnostic::new(
        start..start + len,
        DiagKind::ForeignProbe {
            probe: kind.to_string(),
        },
    )
    .hint(hint)
}

/// `kprobe:vfs_read`, `tracepoint:syscalls:sys_enter_read`, `BEGIN`, ... at `pos`.
fn probe_diag(source: &str, pos: usize, kind: &str) -> Option<Diagnostic> {
    let rest = &source[pos..];
    // The probe list runs to a `/` after white space (a filter; a uprobe's path has
    // slashes too), a `{` or the end of the line.
    let list_len = rest
        .char_indices()
        .find(|&(i, c)| {
            c == '{' || c == '\n' || (c == '/' && rest[..i].ends_with(char::is_whitespace))
        })
        .map_or(rest.len(), |(i, _)| i);
    let list = rest[..list_len].trim_end();
    let span = pos..pos + list.len();
    let after = rest[list_len..].trim_start();
    let (predicate, after) = match after.strip_prefix('/') {
        Some(p) => match p.find('/') {
            Some(end) => (Some(p[..end].trim()), p[end + 1..].trim_start()),
            None => (None, after),
        },
        None => (None, after),
    };
    let body = after
        .strip_prefix('{')
        .and_then(|b| matching_close(b, '{', '}').map(|end| &b[..end]));
    let diag = |hints: Vec<String>| {
        let mut d = Diagnostic::new(
            span.clone(),
            DiagKind::ForeignProbe {
                probe: kind.to_string(),
            },
        );
        d.hints = hints;
        Some(d)
    };
    // bpftrace's `uprobe:FILE:FUNC` is fslat's `FILE:FUNC`, and its `kfunc:MODULE:FUNC`
    // (a kernel module's function) fslat's `MODULE:FUNC`.
    let after_kind = |spec: &str| {
        spec.split_once(':')
            .map_or(String::new(), |(_, f)| f.trim().to_string())
    };
    let func_of = |spec: &str| spec.rsplit(':').next().unwrap_or("").trim().to_string();
    match kind {
        "kprobe" | "k" | "kretprobe" | "kr" | "fentry" | "f" | "fexit" | "fr" | "kfunc"
        | "kretfunc" | "uprobe" | "uretprobe" | "u" | "ur" => {
            let funcs: Vec<String> = list
                .split(',')
                .map(after_kind)
                .collect();
            if funcs.iter().any(String::is_empty) {
                return diag(vec!["write `session FUNC { ... }`".into()]);
            }
            // One function's entry (kernel or user space) is an `on` point; a list or a
            // glob, a return are a session's.
            let at_entry = matches!(kind, "kprobe" | "k" | "fentry" | "f" | "kfunc" | "uprobe" | "u")
                && funcs.len() == 1
                && !funcs[0].contains(['*', '?']);
            let item = if at_entry { "on" } else { "session" };
            let mut text = format!("{item} {}", funcs.join(", "));
            if let Some(p) = predicate {
                text.push_str(&format!(" where {}", translate_expr(p)));
            }
            let block = body.and_then(translate_block);
            match &block {
                Some(b) if b.is_empty() => {}
                Some(b) => text.push_str(&format!(" {{ {b} }}")),
                None => text.push_str(" { count() by comm }"),
            }
            let mut hints = vec![format!(
                "write `{text}`{}",
                if block.is_some() {
                    ""
                } else {
                    " (or `emit`, `hist(latency)`, ...: see `fslat --help`)"
                }
            )];
            let uses = |w: &str| {
                predicate.is_some_and(|p| has_word(p, w)) || body.is_some_and(|b| has_word(b, w))
            };
            if uses("nsecs") && !at_entry {
                hints.push(
                    "there is no start time to keep: `latency` is the time from the call's entry to its return"
                        .into(),
                );
            }
            if (uses("pid") || uses("tid")) && (has_word(&text, "tgid") || has_word(&text, "pid")) {
                hints.push(PID_NOTE.into());
            }
            diag(hints)
        }
        "tracepoint" | "t" | "rawtracepoint" | "rt" => {
            let event = func_of(list.split(',').next().unwrap_or(""));
            let event = event
                .strip_prefix("sys_enter_")
                .or_else(|| event.strip_prefix("sys_exit_"))
                .unwrap_or(&event);
            let syscall = list.contains("syscalls:") || list.contains("sys_enter_") || list.contains("sys_exit_");
            if !syscall {
                let block = body
                    .and_then(translate_block)
                    .filter(|b| !b.is_empty())
                    .map_or(" { count() by comm }".to_string(), |b| format!(" {{ {b} }}"));
                // `tracepoint:CATEGORY:NAME` is `tp:CATEGORY:NAME`, a list a list.
                let points: Vec<String> = list
                    .split(',')
                    .map(|spec| {
                        let spec = spec.trim();
                        let rest = spec.split_once(':').map_or(spec, |(_, rest)| rest);
                        // The category only narrows a glob: a name is unique without it.
                        match rest.split_once(':') {
                            Some((_, name)) if !name.contains(['*', '?']) => format!("tp:{name}"),
                            _ => format!("tp:{rest}"),
                        }
                    })
                    .collect();
                return diag(vec![format!("write `on {}{block}`", points.join(", "))]);
            }
            let known = match event {
                "read" => Some("vfs_read"),
                "write" => Some("vfs_write"),
                "open" | "openat" | "openat2" => Some("do_sys_openat2"),
                _ => None,
            };
            // A system call's own tracepoints are not BTF tracepoints: the raw
            // `tp:sys_enter` / `tp:sys_exit` (its number is `arg1`), or the function.
            let mut hint = format!(
                "trace the kernel function behind it instead: `fslat -l '*{event}*'` lists candidates"
            );
            if let Some(f) = known {
                hint.push_str(&format!(" (for {event}(2): `session {f}`)"));
            }
            hint.push_str("; every system call's entry is `on tp:sys_enter` (its number is `arg1`)");
            diag(vec![hint])
        }
        "BEGIN" | "END" => {
            let which = if kind == "BEGIN" { "begin" } else { "end" };
            let block = body.and_then(translate_block).filter(|b| b.starts_with("printf("));
            diag(vec![match block {
                Some(b) => format!("write `on {which} {{ {b} }}`"),
                None => format!(
                    "write `on {which} {{ printf(...) }}` (constants and `$1`.. only); aggregations print at the end by themselves"
                ),
            }])
        }
        "usdt" | "U" => {
            // bpftrace's `usdt:FILE:[PROVIDER:]NAME` is fslat's `on usdt:...` as written.
            let point = list.split(',').next().unwrap_or("").trim();
            let point = point.split_once(':').map_or("", |(_, p)| p);
            let block = body
                .and_then(translate_block)
                .filter(|b| !b.is_empty())
                .map_or(" { count() }".to_string(), |b| format!(" {{ {b} }}"));
            diag(vec![if point.is_empty() {
                "write `on usdt:FILE:NAME { ... }`; `fslat -l 'usdt:FILE'` lists a file's probes".into()
            } else {
                format!("write `on usdt:{point}{block}`; `fslat -l 'usdt:FILE'` lists a file's probes")
            }])
        }
        "profile" | "p" => {
            // bpftrace's `profile:hz:99` (or `:s:`, `:ms:`, `:us:` a period) is fslat's
            // `profile 99hz` (or `profile 10ms`).
            let mut parts = list.split(',').next().unwrap_or("").split(':').skip(1);
            let rate = match (parts.next().map(str::trim), parts.next().map(str::trim)) {
                (Some("hz"), Some(n)) if n.parse::<u64>().is_ok() => format!("{n}hz"),
                (Some(u @ ("s" | "ms" | "us")), Some(n)) if n.parse::<u64>().is_ok() => {
                    format!("{n}{u}")
                }
                _ => "99hz".into(),
            };
            let filter = predicate.map_or(String::new(), |p| format!(" where {}", translate_expr(p)));
            let block = body
                .and_then(translate_block)
                .filter(|b| !b.is_empty())
                .map_or(" { count() by ustack, kstack }".to_string(), |b| format!(" {{ {b} }}"));
            let mut hints = vec![format!(
                "write `profile {rate}{filter}{block}`; `--flamegraph FILE.svg` draws its stacks"
            )];
            if predicate.is_some_and(|p| has_word(p, "pid") || has_word(p, "tid")) {
                hints.push(PID_NOTE.into());
            }
            diag(hints)
        }
        "interval" | "i" | "software" | "s" | "hardware" | "h" | "watchpoint" | "w" | "iter"
        | "kfunc_multi" => diag(vec![
            "fslat traces functions (`session FUNC`, `on FUNC`) and samples the CPUs (`profile 99hz`); `-i DUR` prints and clears the aggregations every DUR".into(),
        ]),
        _ => None,
    }
}

/// The fslat way to say a bpftrace built-in that fslat does not know by that name.
pub fn name_hint(name: &str) -> Option<&'static str> {
    Some(match name {
        "retval" => "bpftrace's `retval` is `ret` in fslat",
        "nsecs" => {
            "bpftrace's `nsecs` is `ts` (the time of entry) in fslat; the time a call took is `latency`"
        }
        "elapsed" => "the time a call took is `latency`",
        "args" => "parameters are plain names in fslat: `count`, not `args->count`",
        "curtask" => "fslat reads fields through the function's pointer parameters, not `curtask`",
        "username" => "fslat has `uid`, not `username`",
        _ => return None,
    })
}

/// bpftrace's `pid` is the process (fslat's `tgid`), its `tid` the thread.
const PID_NOTE: &str = "bpftrace's `pid` is fslat's `tgid` and its `tid` fslat's `pid`: fslat uses the kernel's names (`pid` is the thread)";

/// `session vfs_read /pid == 123/ { ... }`.
fn slash_filter(source: &str, pos: usize) -> Option<Diagnostic> {
    let inner = &source[pos + 1..];
    let end = inner
        .find(['/', '\n', '{'])
        .filter(|&e| inner[e..].starts_with('/'));
    let (span, pred) = match end {
        Some(e) => (pos..pos + e + 2, inner[..e].trim()),
        None => (pos..pos + 1, ""),
    };
    let mut d = Diagnostic::new(span, DiagKind::ForeignFilter);
    d = if pred.is_empty() {
        d.hint("write `where CONDITION` after the function name")
    } else {
        d.hint(format!("write `where {}`", translate_expr(pred)))
    };
    if has_word(pred, "pid") || has_word(pred, "tid") {
        d = d.hint(PID_NOTE);
    }
    Some(d)
}

/// `session bin/app:main`, `on usdt:build/app:probe`: a `/` right after a word that begins
/// a file's place (after white space or `usdt:`) is a relative path, not a filter.
fn relative_path(source: &str, pos: usize) -> Option<Diagnostic> {
    let path_char = |c: char| c.is_ascii_alphanumeric() || "_.-+".contains(c);
    // Path characters are ASCII: the one before them ends where the path starts.
    let start = source[..pos]
        .char_indices()
        .rfind(|&(_, c)| !path_char(c))
        .map_or(0, |(i, c)| i + c.len_utf8());
    let before = &source[..start];
    if start == pos || !(before.ends_with(char::is_whitespace) || before.ends_with("usdt:")) {
        return None;
    }
    let len = source[start..]
        .find(|c: char| c == ':' || c.is_whitespace() || "{},".contains(c))
        .unwrap_or(source.len() - start);
    let path = &source[start..start + len];
    Some(
        Diagnostic::new(
            start..start + len,
            DiagKind::RelativePath { path: path.into() },
        )
        .hint(format!("write `./{path}`")),
    )
}

/// `$x = ...` (or `$x` read).
fn variable(source: &str, pos: usize) -> Option<Diagnostic> {
    let name = ident_at(&source[pos + 1..]);
    // `$1` is a positional parameter, not a variable.
    if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
        return None;
    }
    let span = pos..pos + 1 + name.len();
    Some(
        Diagnostic::new(
            span,
            DiagKind::ForeignVariable {
                name: name.to_string(),
            },
        )
        .hint(variable_hint(&source[pos..], name)),
    )
}

/// `$x = EXPR` → `let x = EXPR`; a read of `$x` → `x`.
fn variable_hint(rest: &str, name: &str) -> String {
    let after = rest[1 + name.len()..].trim_start();
    match after.strip_prefix('=').filter(|a| !a.starts_with('=')) {
        Some(value) => {
            let end = value.find([';', '\n', '}']).unwrap_or(value.len());
            let value = translate_expr(&value[..end]);
            let value = if value.is_empty() {
                "EXPR".into()
            } else {
                value
            };
            format!("write `let {name} = {value}`, and `{name}` where it is used")
        }
        None => format!("a `let` name has no `$`: write `let {name} = EXPR` once, then `{name}`"),
    }
}

/// `@x = count()`, `@[comm] = count()`, `@bytes[comm] = sum(count)`, ...
fn map(source: &str, pos: usize) -> Diagnostic {
    let rest = &source[pos..];
    let line = &rest[..rest.find(['\n', ';', '}']).unwrap_or(rest.len())];
    let name_len = ident_at(&rest[1..]).len();
    let span = pos..pos + 1 + name_len;
    let d = Diagnostic::new(span, DiagKind::ForeignMap);
    match translate_statement(line) {
        Some(t) => d.hint(format!("write `{t}`")),
        None => d.hint(
            "write the aggregation as an action: `count() by comm`, `hist(latency) by comm as read_latency`, `sum(count)`",
        ),
    }
}

/// `comm == 'bash'`: the quoted text up to the closing quote on the line.
fn single_quotes(source: &str, pos: usize) -> Diagnostic {
    let rest = &source[pos + 1..];
    let line = &rest[..rest.find('\n').unwrap_or(rest.len())];
    match line.find('\'') {
        Some(end) => Diagnostic::new(pos..pos + end + 2, DiagKind::SingleQuotes)
            .hint(format!("write `\"{}\"`", &line[..end])),
        None => Diagnostic::new(pos..pos + 1, DiagKind::SingleQuotes),
    }
}

/// `latency > 1.5ms`: the parser stops at or just after the `.`.
fn fractional_duration(source: &str, pos: usize) -> Option<Diagnostic> {
    let is_part = |c: char| c.is_ascii_alphanumeric() || c == '.' || c == '_';
    let start = source[..pos]
        .char_indices()
        .rfind(|&(_, c)| !is_part(c))
        .map_or(0, |(i, c)| i + c.len_utf8());
    let end = source[pos..]
        .find(|c: char| !is_part(c))
        .map_or(source.len(), |i| pos + i);
    let token = &source[start..end];
    let (int, frac) = token.split_once('.')?;
    let digits = frac.find(|c: char| !c.is_ascii_digit())?;
    let (frac, unit) = frac.split_at(digits);
    let scale: u128 = match unit {
        "ns" => 1,
        "us" => 1_000,
        "ms" => 1_000_000,
        "s" => 1_000_000_000,
        _ => return None,
    };
    if int.is_empty() || !int.bytes().all(|b| b.is_ascii_digit()) || frac.is_empty() {
        return None;
    }
    let d = Diagnostic::new(
        start..end,
        DiagKind::FractionalDuration {
            text: token.to_string(),
        },
    );
    // Whole nanoseconds: int.frac × scale, exactly, if it is an integer.
    let places = u32::try_from(frac.len()).ok().filter(|&p| p <= 18)?;
    let numerator: u128 = format!("{int}{frac}").parse().ok()?;
    let denominator = 10u128.pow(places);
    let ns = numerator.checked_mul(scale)?;
    if !ns.is_multiple_of(denominator) {
        return Some(d.hint("durations are whole nanoseconds at the finest (`ns`)"));
    }
    let ns = ns / denominator;
    let (n, unit) = [
        (1_000_000_000, "s"),
        (1_000_000, "ms"),
        (1_000, "us"),
        (1, "ns"),
    ]
    .into_iter()
    .find(|(per, _)| ns.is_multiple_of(*per))
    .map(|(per, u)| (ns / per, u))
    .unwrap_or((ns, "ns"));
    Some(d.hint(format!("write `{n}{unit}`")))
}

/// A value the parser cannot read, said as `-d` says it: a control character, a string
/// left open, `10 ms`, `10xs`.
fn bad_value(source: &str, pos: usize) -> Option<Diagnostic> {
    const UNITS: [&str; 4] = ["ns", "us", "ms", "s"];
    let rest = &source[pos..];
    let c = rest.chars().next()?;
    if c.is_control() && !c.is_whitespace() {
        return Some(Diagnostic::new(
            pos..pos + c.len_utf8(),
            DiagKind::ControlCharacter { code: c.into() },
        ));
    }
    if c == '"' {
        let line_end = rest.find('\n').unwrap_or(rest.len());
        // A `"` that no other `"` closes on its line (an escaped one does not).
        let mut escaped = false;
        let closed = rest[1..line_end].chars().any(|c| {
            let end = c == '"' && !escaped;
            escaped = c == '\\' && !escaped;
            end
        });
        if !closed {
            return Some(
                Diagnostic::new(pos..pos + line_end, DiagKind::UnterminatedString)
                    .hint("close it with `\"` before the end of the line; a `\"` inside a string is written `\\\"`"),
            );
        }
    }
    // `10 ms`: the parser stops at the unit.
    let unit_here = ident_at(rest);
    let before = source[..pos].trim_end_matches([' ', '\t']);
    let number = before
        .rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .map_or(0, |i| i + 1);
    if UNITS.contains(&unit_here)
        && before.len() < pos
        && !before[number..].is_empty()
        && before[number..]
            .bytes()
            .all(|b| b.is_ascii_digit() || b == b'_')
    {
        let end = pos + unit_here.len();
        return Some(
            Diagnostic::new(
                number..end,
                DiagKind::SpaceInDuration {
                    text: source[number..end].to_string(),
                },
            )
            .hint(format!("write `{}{unit_here}`", &before[number..])),
        );
    }
    // The number just before `pos` (or at it), then what follows it.
    let start = source[..pos]
        .char_indices()
        .rfind(|&(_, c)| !(c.is_ascii_alphanumeric() || c == '_'))
        .map_or(0, |(i, c)| i + c.len_utf8());
    let word_end = source[start..]
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .map_or(source.len(), |i| start + i);
    let word = &source[start..word_end];
    let digits = word
        .find(|c: char| !(c.is_ascii_digit() || c == '_'))
        .unwrap_or(word.len());
    if digits == 0 || !word.starts_with(|c: char| c.is_ascii_digit()) || word.starts_with("0x") {
        return None;
    }
    let unit = &word[digits..];
    if unit.is_empty() || UNITS.contains(&unit) {
        return None;
    }
    let d = Diagnostic::new(
        start + digits..word_end,
        DiagKind::UnknownUnit {
            unit: unit.to_string(),
        },
    );
    Some(match closest(unit, UNITS.iter().copied()).first() {
        Some(u) => d.hint(format!("did you mean `{}{u}`?", &word[..digits])),
        None => d.hint("a duration is a whole number and a unit: `10ms`, `250us`, `2s`"),
    })
}

/// A word where a keyword belongs, close to one the parser would have taken.
fn keyword_typo(source: &str, pos: usize, word: &str, expected: &[Rule]) -> Option<Diagnostic> {
    let mut keywords: Vec<&str> = Vec::new();
    let item_start = source[..pos].trim().is_empty()
        || expected.contains(&Rule::session)
        || expected.contains(&Rule::kw_session);
    if item_start {
        keywords.push("session");
    }
    if expected.contains(&Rule::kw_where) {
        keywords.push("where");
    }
    if expected.contains(&Rule::emit) || expected.contains(&Rule::kw_emit) {
        keywords.push("emit");
    }
    if expected.contains(&Rule::aggregation) || expected.contains(&Rule::agg_func) {
        keywords.extend(crate::aggregate::names());
    }
    if expected.contains(&Rule::by_clause) || expected.contains(&Rule::kw_by) {
        keywords.push("by");
    }
    let span = pos..pos + word.len();
    let close = if word.len() >= 3 {
        closest(word, keywords.iter().copied())
    } else {
        Vec::new()
    };
    match close.first() {
        Some(k) => Some(
            Diagnostic::new(
                span,
                DiagKind::UnknownKeyword {
                    word: word.to_string(),
                },
            )
            .hint(format!("did you mean `{k}`?")),
        ),
        None if item_start && source[..pos].trim().is_empty() => Some(
            Diagnostic::new(
                span,
                DiagKind::NotASession {
                    word: word.to_string(),
                },
            )
            .hint(format!(
                "to trace the kernel function `{word}`, write `session {word}`"
            )),
        ),
        None => None,
    }
}

/// `=` right after another operator character is part of `==`, `<=`, ... (or `===`).
fn after_operator(source: &str, pos: usize) -> bool {
    source[..pos]
        .chars()
        .next_back()
        .is_some_and(|c| "=!<>".contains(c))
}

fn comparison_hint(source: &str, pos: usize) -> String {
    let line_start = source[..pos].rfind('\n').map_or(0, |i| i + 1);
    let before = source[line_start..pos].trim_end();
    let lhs_start = before
        .rfind(|c: char| c.is_whitespace() || c == '(')
        .map_or(0, |i| i + 1);
    let lhs = &before[lhs_start..];
    let rest = source[pos + 1..].trim_start();
    let rhs = match rest.strip_prefix('"') {
        Some(s) => s.find('"').map(|e| &rest[..e + 2]),
        None => Some(ident_at(rest)).filter(|w| !w.is_empty()),
    };
    match (lhs.is_empty(), rhs) {
        (false, Some(rhs)) => format!("write `{lhs} == {rhs}`"),
        _ => "write `==` to compare".into(),
    }
}

/// The identifier (letters, digits, `_`) at the start of `text`, possibly empty.
fn ident_at(text: &str) -> &str {
    let len = text
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(text.len());
    &text[..len]
}

fn has_word(text: &str, word: &str) -> bool {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .any(|w| w == word)
}

/// `text`'s characters with their offsets, each with whether it is code (outside a
/// string literal, the quotes included in the string).
fn code_chars(text: &str) -> impl Iterator<Item = (usize, char, bool)> + '_ {
    let (mut in_string, mut escaped) = (false, false);
    text.char_indices().map(move |(i, c)| {
        let code = !in_string && c != '"';
        match c {
            _ if in_string && escaped => escaped = false,
            '\\' if in_string => escaped = true,
            '"' => in_string = !in_string,
            _ => {}
        }
        (i, c, code)
    })
}

/// The offset of the `close` that ends what is open at the start of `text` (just after
/// its `open`), strings skipped.
fn matching_close(text: &str, open: char, close: char) -> Option<usize> {
    let mut depth = 0usize;
    for (i, c, code) in code_chars(text) {
        match c {
            _ if !code => {}
            c if c == open => depth += 1,
            c if c == close && depth == 0 => return Some(i),
            c if c == close => depth -= 1,
            _ => {}
        }
    }
    None
}

/// Splits `text` at `sep` where no bracket is open and not inside a string.
fn split_top(text: &str, seps: &[char]) -> Vec<String> {
    let mut parts = vec![String::new()];
    let mut depth = 0i32;
    for (_, c, code) in code_chars(text) {
        match c {
            _ if !code => {}
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' => depth -= 1,
            c if depth == 0 && seps.contains(&c) => {
                parts.push(String::new());
                continue;
            }
            _ => {}
        }
        if let Some(last) = parts.last_mut() {
            last.push(c);
        }
    }
    parts
        .into_iter()
        .map(|p| p.trim().to_string())
        .filter(|p| !p.is_empty())
        .collect()
}

/// The arguments of the call whose `(` starts `text` (after white space).
fn call_args(text: &str) -> Option<Vec<String>> {
    let inner = text.trim_start().strip_prefix('(')?;
    let end = matching_close(inner, '(', ')')?;
    Some(split_top(&inner[..end], &[',']))
}

/// A bpftrace block's statements as fslat actions, if every one has a plain counterpart.
fn translate_block(body: &str) -> Option<String> {
    let actions: Vec<String> = split_top(body, &[';', '\n'])
        .iter()
        .map(|s| translate_statement(s))
        .collect::<Option<_>>()?;
    Some(actions.join("; "))
}

/// `@name[k1, k2] = agg(args)` → `agg(args) by k1, k2 as name`; `printf(..)` keeps its
/// format with its arguments translated; `$x = e` → `let x = e`.
fn translate_statement(stmt: &str) -> Option<String> {
    let stmt = stmt.trim().trim_end_matches(';').trim_end();
    if let Some(rest) = stmt.strip_prefix("printf") {
        let args: Vec<String> = call_args(rest)?.iter().map(|a| translate_expr(a)).collect();
        return Some(format!("printf({})", args.join(", ")));
    }
    if let Some(rest) = stmt.strip_prefix('$') {
        let name = ident_at(rest);
        let value = rest[name.len()..].trim_start().strip_prefix('=')?;
        if name.is_empty()
            || name.starts_with(|c: char| c.is_ascii_digit())
            || value.starts_with('=')
        {
            return None;
        }
        return Some(format!("let {name} = {}", translate_expr(value)));
    }
    let rest = stmt.strip_prefix('@')?;
    let name = ident_at(rest);
    let rest = rest[name.len()..].trim_start();
    let (keys, rest) = match rest.strip_prefix('[') {
        Some(k) => {
            let end = matching_close(k, '[', ']')?;
            (split_top(&k[..end], &[',']), k[end + 1..].trim_start())
        }
        None => (Vec::new(), rest),
    };
    let rest = rest.strip_prefix('=')?.trim_start();
    let func = ident_at(rest);
    if !crate::aggregate::ALL
        .iter()
        .any(|a| a.in_bpftrace() && a.name() == func)
    {
        return None;
    }
    let args = call_args(&rest[func.len()..])?;
    let close = rest.rfind(')')?;
    if !rest[close + 1..].trim().is_empty() {
        return None;
    }
    // `hist(nsecs - @start[tid])` is the latency bpftrace scripts compute by hand.
    let args: Vec<String> = args
        .iter()
        .map(|a| {
            if has_word(a, "nsecs") {
                "latency".into()
            } else {
                translate_expr(a)
            }
        })
        .collect();
    let keys: Vec<String> = keys.iter().map(|k| translate_expr(k)).collect();
    if args.iter().chain(&keys).any(|a| a.contains(['@', '$'])) {
        return None;
    }
    let mut text = format!("{func}({})", args.join(", "));
    if !keys.is_empty() {
        text.push_str(&format!(" by {}", keys.join(", ")));
    }
    if !name.is_empty() {
        text.push_str(&format!(" as {name}"));
    }
    Some(text)
}

/// A bpftrace expression in fslat's names: `pid` → `tgid`, `tid` → `pid`, `retval` →
/// `ret`, `args->count` and `args.count` → `count`, `probe` → `func`, `'x'` → `"x"`.
fn translate_expr(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text.trim();
    while let Some(c) = rest.chars().next() {
        if c == '"' || c == '\'' {
            // An unclosed quote takes the rest of the text (which may end inside a
            // character of several bytes: only the quote's own byte is cut).
            let body = &rest[1..];
            let (inner, after) = match body.find(c) {
                Some(e) => (&body[..e], &body[e + 1..]),
                None => (body, ""),
            };
            out.push('"');
            out.push_str(inner);
            out.push('"');
            rest = after;
            continue;
        }
        // A bpftrace variable `$x` is fslat's `let` name `x`; `$1` stays.
        if c == '$' && rest[1..].starts_with(|d: char| d.is_ascii_alphabetic() || d == '_') {
            rest = &rest[1..];
            continue;
        }
        let word = ident_at(rest);
        if word.is_empty() || c.is_ascii_digit() {
            let len = if word.is_empty() {
                c.len_utf8()
            } else {
                word.len()
            };
            out.push_str(&rest[..len]);
            rest = &rest[len..];
            continue;
        }
        let after = &rest[word.len()..];
        if word == "args"
            && let Some(a) = after.strip_prefix("->").or_else(|| after.strip_prefix('.'))
        {
            rest = a;
            continue;
        }
        out.push_str(match word {
            "pid" => "tgid",
            "tid" => "pid",
            "retval" => "ret",
            w => w,
        });
        rest = after;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn translates_bpftrace_names_to_fslat_names() {
        assert_eq!(
            translate_expr("pid == 123 && tid != 4 && args->count > 'x'"),
            "tgid == 123 && pid != 4 && count > \"x\""
        );
        assert_eq!(translate_expr("retval < 0"), "ret < 0");
    }

    #[test]
    fn translates_map_aggregations_and_printf() {
        assert_eq!(
            translate_statement("@[comm] = count();").as_deref(),
            Some("count() by comm")
        );
        assert_eq!(
            translate_statement("@bytes[comm, pid] = sum(args.count)").as_deref(),
            Some("sum(count) by comm, tgid as bytes")
        );
        assert_eq!(
            translate_statement(r#"printf("%s %d\n", comm, pid)"#).as_deref(),
            Some(r#"printf("%s %d\n", comm, tgid)"#)
        );
        assert_eq!(translate_statement("@start[tid] = nsecs"), None);
        assert_eq!(translate_statement("@x = count() + 1"), None);
    }

    /// The script a probe's hint shows is one fslat runs.
    #[test]
    fn the_session_a_bpftrace_probe_hint_shows_compiles() {
        let kernel = crate::btf::Fixture::new();
        for script in [
            "kprobe:vfs_read { @[comm] = count(); }",
            "kretprobe:vfs_read /retval < 0/ { @errors[comm, pid] = count(); }",
            "kretfunc:vfs_read { @ns = hist(nsecs - @start[tid]); }",
            r#"fentry:vfs_read /comm == 'bash'/ { printf("%s %d\n", comm, args->count); }"#,
            "kprobe:vfs_read, kprobe:vfs_write { @bytes[probe] = sum(arg2); }",
            "kprobe:vfs_read /pid == 1 && tid != 2/ { @[tid] = max(args.count) }",
        ] {
            let diags = crate::syntax::parse(script).expect_err(script);
            let hint = &diags[0].hints[0];
            let fixed = hint
                .strip_prefix("write `")
                .and_then(|h| h.strip_suffix('`'))
                .unwrap_or_else(|| panic!("{script}: {hint}"));
            if let Err(d) = crate::compile(fixed, &kernel, crate::codegen::Mode::Fsession) {
                panic!("{script} → {fixed}: {d:?}");
            }
        }
    }

    /// Whatever the text and wherever the parser stopped, no panic.
    #[test]
    fn explains_any_position_of_odd_text_without_panicking() {
        let texts = [
            "kprobe:é { @é[ü] = count(é); } /é/ 'é 1.5é é.5ms $é @ = ==",
            "session vfs_read /pid == 1 { printf(\"%d\", ",
            "\u{feff}ßession ẞ:x 'unterminated\n@[ = count(",
            "kprobe: /x/ { @x[ = hist( } kretprobe:,, BEGIN{",
            "on uprobe:é:/ü { exit( } session tracepoint:é:, span kprobe:->kretprobe: on interval:",
            "1.ms 1.5 .5ms 99999999999999999999.999999999999999999999s 3402823669209384634633746074317.1s $ $1 = ",
        ];
        let rules = [Rule::kw_where, Rule::session, Rule::emit, Rule::aggregation];
        for text in texts {
            for (pos, _) in text.char_indices().chain([(text.len(), ' ')]) {
                let _ = explain(text, pos, &rules);
                let _ = explain(text, pos, &[]);
            }
            let _ = crate::syntax::parse(text);
        }
    }

    #[test]
    fn fractional_durations_become_whole_ones() {
        let hint = |s: &str| {
            let pos = s.find('.').expect("a dot") + 1;
            fractional_duration(s, pos).map(|d| d.hints.join("|"))
        };
        assert_eq!(hint("x > 1.5ms").as_deref(), Some("write `1500us`"));
        assert_eq!(hint("x > 0.25s").as_deref(), Some("write `250ms`"));
        assert_eq!(hint("x > 2.0us").as_deref(), Some("write `2us`"));
        assert_eq!(
            hint("x > 1.5ns").as_deref(),
            Some("durations are whole nanoseconds at the finest (`ns`)")
        );
        assert_eq!(hint("x > a.b"), None);
    }
}
