//! Stage 1: script text → AST. The grammar is `grammar/fslat.pest`.

pub mod ast;
pub(crate) mod foreign;

use crate::diag::{DiagKind, Diagnostic};
use ast::*;
use pest::Parser;
use pest::iterators::{Pair, Pairs};
use pest::pratt_parser::{Assoc, Op, PrattParser};
use std::sync::LazyLock;

#[derive(pest_derive::Parser)]
#[grammar = "../grammar/fslat.pest"]
struct Grammar;

/// Parses a whole script. Errors come back as diagnostics pointing into `source`.
pub fn parse(source: &str) -> Result<Script, Vec<Diagnostic>> {
    if let Some(d) = too_complex(source) {
        return Err(vec![d]);
    }
    pest::set_error_detail(true);
    let mut pairs =
        Grammar::parse(Rule::script, source).map_err(|e| vec![parse_error(e, source)])?;
    let script = pairs
        .next()
        .expect("the grammar's script rule always yields one pair");
    let mut errors: Vec<Diagnostic> = script
        .clone()
        .into_inner()
        .flatten()
        .filter(|p| p.as_rule() == Rule::user_file)
        .filter_map(|p| foreign::probe_as_file(source, span(&p)))
        .collect();
    let mut sessions = Vec::new();
    let (mut begin, mut end) = (Vec::new(), Vec::new());
    for pair in script.into_inner() {
        match pair.as_rule() {
            Rule::session => sessions.push(session(pair, &mut errors)),
            Rule::span => sessions.push(span_item(pair, &mut errors)),
            Rule::on_begin_end => {
                let mut inner = pair.into_inner().filter(|p| p.as_rule() != Rule::kw_on);
                let which = inner.next().expect("begin or end");
                let actions = block(inner.next().expect("a block"), &mut errors);
                match which.as_rule() {
                    Rule::kw_begin => begin.extend(actions),
                    _ => end.extend(actions),
                }
            }
            Rule::on => sessions.push(on_item(pair, &mut errors)),
            Rule::profile => sessions.push(profile_item(pair, &mut errors)),
            Rule::offcpu => sessions.push(offcpu_item(pair, &mut errors)),
            _ => {}
        }
    }
    if sessions.is_empty() && errors.is_empty() {
        errors.push(Diagnostic::new(
            source.len()..source.len(),
            DiagKind::EmptyScript,
        ));
    }
    if errors.is_empty() {
        Ok(Script {
            sessions,
            begin,
            end,
        })
    } else {
        Err(errors)
    }
}

fn span(pair: &Pair<Rule>) -> Span {
    let s = pair.as_span();
    s.start()..s.end()
}

fn ident(pair: Pair<Rule>) -> Ident {
    Ident {
        name: pair.as_str().to_string(),
        span: span(&pair),
    }
}

fn session(pair: Pair<Rule>, errors: &mut Vec<Diagnostic>) -> Session {
    let whole = span(&pair);
    let mut funcs = Vec::new();
    let mut file: Option<Ident> = None;
    let mut predicate = None;
    let mut actions = None;
    for p in pair.into_inner() {
        match p.as_rule() {
            Rule::func_name => funcs.push(ident(p)),
            Rule::user_func => {
                let whole = span(&p);
                let mut this_file = Ident {
                    name: String::new(),
                    span: whole.start..whole.start,
                };
                for part in p.into_inner() {
                    match part.as_rule() {
                        Rule::user_file => this_file = ident(part),
                        Rule::user_quoted => {
                            let mut name = ident(part);
                            name.name = name.name.trim_matches('"').to_string();
                            funcs.push(name);
                        }
                        _ => funcs.push(ident(part)),
                    }
                }
                match &file {
                    None if funcs.len() > 1 => {
                        errors.push(Diagnostic::new(whole, DiagKind::KernelAndUserFunctions))
                    }
                    None => file = Some(this_file),
                    Some(first) if first.name != this_file.name => errors.push(Diagnostic::new(
                        whole,
                        DiagKind::TwoUserFiles {
                            first: first.name.clone(),
                            other: this_file.name.clone(),
                        },
                    )),
                    Some(_) => {}
                }
            }
            Rule::pred => predicate = Some(expr(p, errors)),
            Rule::block => actions = Some(block(p, errors)),
            _ => {}
        }
    }
    Session {
        func: funcs
            .first()
            .cloned()
            .expect("the grammar requires a function name"),
        funcs,
        file,
        predicate,
        actions,
        span: whole,
        ends: None,
        on: None,
        profile: None,
        offcpu: false,
    }
}

/// A span, as a session of its END point (whose `where` is the session's predicate).
fn span_item(pair: Pair<Rule>, errors: &mut Vec<Diagnostic>) -> Session {
    let whole = span(&pair);
    let mut points = Vec::new();
    let mut actions = None;
    for p in pair.into_inner() {
        match p.as_rule() {
            Rule::span_point => points.push(span_point(p, errors)),
            Rule::block => actions = Some(block(p, errors)),
            _ => {}
        }
    }
    let Some(end) = points.pop() else {
        unreachable!("the grammar gives a span an end")
    };
    Session {
        func: end.name.clone(),
        funcs: vec![end.name.clone()],
        file: None,
        predicate: end.predicate.clone(),
        actions,
        span: whole,
        ends: Some(SpanEnds {
            starts: points,
            end,
        }),
        on: None,
        profile: None,
        offcpu: false,
    }
}

/// `on POINT [where C] { actions }`, as a session of the point.
fn on_item(pair: Pair<Rule>, errors: &mut Vec<Diagnostic>) -> Session {
    let whole = span(&pair);
    let mut points = Vec::new();
    let mut file = None;
    let mut predicate = None;
    let mut actions = None;
    let kernel = |name, tracepoint| OnPoint {
        name,
        tracepoint,
        category: None,
        usdt: None,
        more: Vec::new(),
    };
    for p in pair.into_inner() {
        match p.as_rule() {
            Rule::on_tp => {
                // `tp:NAME` or `tp:CATEGORY:NAME`.
                let mut parts: Vec<Ident> = p.into_inner().map(ident).collect();
                let name = parts.pop().expect("tp: has a name");
                points.push(OnPoint {
                    category: parts.pop(),
                    ..kernel(name, true)
                });
            }
            Rule::usdt_point => {
                let (name, usdt) = usdt_point(p);
                points.push(OnPoint {
                    usdt,
                    ..kernel(name, false)
                });
            }
            Rule::span_func => points.push(kernel(ident(p), false)),
            Rule::on_user => {
                let whole = span(&p);
                // `:FUNC`: the main executable of -p or -c, as after `session`.
                let mut this_file = Ident {
                    name: String::new(),
                    span: whole.start..whole.start,
                };
                for part in p.into_inner() {
                    match part.as_rule() {
                        Rule::user_file => this_file = ident(part),
                        Rule::user_quoted => {
                            let mut name = ident(part);
                            name.name = name.name.trim_matches('"').to_string();
                            points.push(kernel(name, false));
                        }
                        _ => points.push(kernel(ident(part), false)),
                    }
                }
                file = Some(this_file);
            }
            Rule::pred => predicate = Some(expr(p, errors)),
            Rule::block => actions = Some(block(p, errors)),
            _ => {}
        }
    }
    let mut points = points.into_iter();
    let mut point = points.next().expect("the grammar gives `on` a point");
    point.more = points.collect();
    let funcs = std::iter::once(&point)
        .chain(&point.more)
        .map(|p| p.name.clone())
        .collect();
    Session {
        func: point.name.clone(),
        funcs,
        file,
        predicate,
        actions,
        span: whole,
        ends: None,
        on: Some(point),
        profile: None,
        offcpu: false,
    }
}

/// `profile RATE [where C] { actions }`, as a session named `profile`.
fn profile_item(pair: Pair<Rule>, errors: &mut Vec<Diagnostic>) -> Session {
    let whole = span(&pair);
    let mut name = None;
    let mut rate = ProfileRate {
        rate: Rate::Hertz(0),
        span: whole.clone(),
    };
    let mut predicate = None;
    let mut actions = None;
    for p in pair.into_inner() {
        match p.as_rule() {
            Rule::kw_profile => name = Some(ident(p)),
            Rule::hertz => {
                let text = p.as_str();
                rate.span = span(&p);
                match parse_int(&text[..text.len() - 2]) {
                    Some(hz) => rate.rate = Rate::Hertz(hz),
                    None => errors.push(Diagnostic::new(span(&p), DiagKind::IntegerTooLarge)),
                }
            }
            Rule::duration => {
                rate.span = span(&p);
                match parse_duration(p.as_str()) {
                    Some(ns) => rate.rate = Rate::Period(ns),
                    None => errors.push(Diagnostic::new(span(&p), DiagKind::DurationTooLarge)),
                }
            }
            Rule::pred => predicate = Some(expr(p, errors)),
            Rule::block => actions = Some(block(p, errors)),
            _ => {}
        }
    }
    let name = name.expect("the grammar starts a profile with `profile`");
    Session {
        profile: Some(rate),
        ..named_item(name, predicate, actions, whole)
    }
}

/// An item that traces no function (a profile, offcpu) as a session named by its
/// keyword.
fn named_item(
    name: Ident,
    predicate: Option<Expr>,
    actions: Option<Vec<Action>>,
    whole: Span,
) -> Session {
    Session {
        func: name.clone(),
        funcs: vec![name],
        file: None,
        predicate,
        actions,
        span: whole,
        ends: None,
        on: None,
        profile: None,
        offcpu: false,
    }
}

/// `offcpu [where C] { actions }`, as a session named `offcpu`.
fn offcpu_item(pair: Pair<Rule>, errors: &mut Vec<Diagnostic>) -> Session {
    let whole = span(&pair);
    let mut name = None;
    let mut predicate = None;
    let mut actions = None;
    for p in pair.into_inner() {
        match p.as_rule() {
            Rule::kw_offcpu => name = Some(ident(p)),
            Rule::pred => predicate = Some(expr(p, errors)),
            Rule::block => actions = Some(block(p, errors)),
            _ => {}
        }
    }
    let name = name.expect("the grammar starts an offcpu item with `offcpu`");
    Session {
        offcpu: true,
        ..named_item(name, predicate, actions, whole)
    }
}

/// `usdt:FILE:[PROVIDER:]NAME`: the probe's NAME, and where it is.
fn usdt_point(pair: Pair<Rule>) -> (Ident, Option<Usdt>) {
    let whole = span(&pair);
    let mut file = Ident {
        name: String::new(),
        span: whole.start + 5..whole.start + 5,
    };
    let mut names = Vec::new();
    for part in pair.into_inner() {
        match part.as_rule() {
            Rule::user_file => file = ident(part),
            _ => names.push(ident(part)),
        }
    }
    let name = names.pop().expect("the grammar gives a USDT point a name");
    let provider = names.pop();
    (name, Some(Usdt { file, provider }))
}

fn span_point(pair: Pair<Rule>, errors: &mut Vec<Diagnostic>) -> SpanPoint {
    let mut inner = pair.into_inner();
    let head = inner.next().expect("a span point starts with its name");
    let tracepoint = head.as_rule() == Rule::tracepoint;
    let (name, usdt) = if head.as_rule() == Rule::usdt_point {
        usdt_point(head)
    } else if tracepoint {
        (
            ident(head.into_inner().next().expect("tp: has a name")),
            None,
        )
    } else {
        (ident(head), None)
    };
    let key = expr(inner.next().expect("a span point has a key"), errors);
    let predicate = inner
        .find(|p| p.as_rule() == Rule::pred)
        .map(|p| expr(p, errors));
    SpanPoint {
        name,
        tracepoint,
        usdt,
        key,
        predicate,
    }
}

fn block(pair: Pair<Rule>, errors: &mut Vec<Diagnostic>) -> Vec<Action> {
    let mut actions = Vec::new();
    for p in pair.into_inner() {
        match p.as_rule() {
            Rule::emit => {
                let sp = span(&p);
                let items = p
                    .into_inner()
                    .filter(|i| i.as_rule() == Rule::emit_item)
                    .map(|item| {
                        let mut inner = item.into_inner();
                        let e = expr(inner.next().expect("emit item has an expression"), errors);
                        let alias = inner.find(|p| p.as_rule() == Rule::ident).map(ident);
                        EmitItem { expr: e, alias }
                    })
                    .collect();
                actions.push(Action::Emit { items, span: sp });
            }
            Rule::aggregation => actions.push(Action::Aggregate(aggregation(p, errors))),
            Rule::if_stmt => actions.push(if_stmt(p, errors)),
            Rule::let_stmt => {
                let mut inner = p.into_inner().filter(|i| i.as_rule() != Rule::kw_let);
                let name = ident(inner.next().expect("a let has a name"));
                let value = expr(inner.next().expect("a let has a value"), errors);
                actions.push(Action::Let { name, value });
            }
            Rule::printf => {
                let sp = span(&p);
                let args = p
                    .into_inner()
                    .filter(|a| a.as_rule() == Rule::pred)
                    .map(|a| expr(a, errors))
                    .collect();
                actions.push(Action::Printf { args, span: sp });
            }
            _ => {}
        }
    }
    actions
}

/// `if COND { ... } [else if ... | else { ... }]`.
fn if_stmt(pair: Pair<Rule>, errors: &mut Vec<Diagnostic>) -> Action {
    let mut cond = None;
    let mut then = None;
    let mut otherwise = None;
    for p in pair.into_inner() {
        match p.as_rule() {
            Rule::pred => cond = Some(expr(p, errors)),
            Rule::block if then.is_none() => then = Some(block(p, errors)),
            Rule::block => otherwise = Some(block(p, errors)),
            Rule::if_stmt => otherwise = Some(vec![if_stmt(p, errors)]),
            _ => {}
        }
    }
    Action::If {
        cond: cond.expect("an if has a condition"),
        then: then.expect("an if has a block"),
        otherwise,
    }
}

fn aggregation(pair: Pair<Rule>, errors: &mut Vec<Diagnostic>) -> Aggregate {
    let whole = span(&pair);
    let text = pair.as_str();
    let mut inner = pair.into_inner();
    let f = inner.next().expect("aggregation starts with its function");
    // The grammar's names are the registry's (aggregate's tests check it).
    let func = AggFunc::named(f.as_str()).expect("the grammar parses registered names only");
    let mut args = Vec::new();
    let mut by = Vec::new();
    let mut key_names = Vec::new();
    let mut name = None;
    let mut name_after_key = false;
    let mut end = whole.end;
    for p in inner {
        match p.as_rule() {
            Rule::pred => args.push(expr(p, errors)),
            Rule::by_clause => {
                for k in p.into_inner().filter(|k| k.as_rule() == Rule::by_key) {
                    let mut inner = k.into_inner();
                    by.push(expr(inner.next().expect("a key has an expression"), errors));
                    key_names.push(inner.find(|p| p.as_rule() == Rule::ident).map(ident));
                }
            }
            Rule::agg_name => {
                end = whole.start + text[..span(&p).start - whole.start].trim_end().len();
                name = p
                    .into_inner()
                    .find(|i| i.as_rule() == Rule::ident)
                    .map(ident);
            }
            _ => {}
        }
    }
    // `by comm as read_latency` names the aggregation (LANGUAGE.md): one `as` after a last
    // key that is a plain name or field is the aggregation's name, not the key's.
    if name.is_none()
        && let (Some(last), Some(Some(_))) = (by.last(), key_names.last())
        && matches!(last.kind, ExprKind::Name(_) | ExprKind::Member { .. })
    {
        let given = key_names.pop().flatten();
        key_names.push(None);
        if let Some(g) = &given {
            let before = text[..g.span.start - whole.start].trim_end();
            let before = before.strip_suffix("as").unwrap_or(before).trim_end();
            end = whole.start + before.len();
        }
        name_after_key = given.is_some();
        name = given;
    }
    let mut args = args.into_iter();
    Aggregate {
        func,
        func_span: span(&f),
        arg: args.next(),
        more_args: args.collect(),
        by,
        key_names,
        name,
        name_after_key,
        span: whole.start..end,
    }
}

static PRATT: LazyLock<PrattParser<Rule>> = LazyLock::new(|| {
    // Lowest precedence first, as in C.
    PrattParser::new()
        .op(Op::infix(Rule::or, Assoc::Left))
        .op(Op::infix(Rule::and, Assoc::Left))
        .op(Op::infix(Rule::bit_or, Assoc::Left))
        .op(Op::infix(Rule::bit_xor, Assoc::Left))
        .op(Op::infix(Rule::bit_and, Assoc::Left))
        .op(Op::infix(Rule::eq, Assoc::Left) | Op::infix(Rule::ne, Assoc::Left))
        .op(Op::infix(Rule::lt, Assoc::Left)
            | Op::infix(Rule::le, Assoc::Left)
            | Op::infix(Rule::gt, Assoc::Left)
            | Op::infix(Rule::ge, Assoc::Left))
        .op(Op::infix(Rule::shl, Assoc::Left) | Op::infix(Rule::shr, Assoc::Left))
        .op(Op::infix(Rule::add, Assoc::Left) | Op::infix(Rule::sub, Assoc::Left))
        .op(Op::infix(Rule::mul, Assoc::Left)
            | Op::infix(Rule::div, Assoc::Left)
            | Op::infix(Rule::rem, Assoc::Left))
        .op(Op::prefix(Rule::neg) | Op::prefix(Rule::not) | Op::prefix(Rule::bit_not))
});

/// `pred` and `expr` pairs: a flat run of prefixes, operands and infix operators.
fn expr(pair: Pair<Rule>, errors: &mut Vec<Diagnostic>) -> Expr {
    pratt(pair.into_inner(), errors)
}

fn pratt(pairs: Pairs<Rule>, errors: &mut Vec<Diagnostic>) -> Expr {
    // The closures below all need `errors`; a RefCell lets them share it.
    let errors = std::cell::RefCell::new(errors);
    PRATT
        .map_primary(|p| postfix(p, &mut errors.borrow_mut()))
        .map_prefix(|op, e| {
            let uop = match op.as_rule() {
                Rule::neg => UnOp::Neg,
                Rule::not => UnOp::Not,
                _ => UnOp::BitNot,
            };
            Expr {
                span: op.as_span().start()..e.span.end,
                kind: ExprKind::Unary {
                    op: uop,
                    expr: Box::new(e),
                },
            }
        })
        .map_infix(|lhs, op, rhs| {
            let bop = match op.as_rule() {
                Rule::or => BinOp::Or,
                Rule::and => BinOp::And,
                Rule::bit_or => BinOp::BitOr,
                Rule::bit_xor => BinOp::BitXor,
                Rule::bit_and => BinOp::BitAnd,
                Rule::eq => BinOp::Eq,
                Rule::ne => BinOp::Ne,
                Rule::lt => BinOp::Lt,
                Rule::le => BinOp::Le,
                Rule::gt => BinOp::Gt,
                Rule::ge => BinOp::Ge,
                Rule::shl => BinOp::Shl,
                Rule::shr => BinOp::Shr,
                Rule::add => BinOp::Add,
                Rule::sub => BinOp::Sub,
                Rule::mul => BinOp::Mul,
                Rule::div => BinOp::Div,
                _ => BinOp::Rem,
            };
            Expr {
                span: lhs.span.start..rhs.span.end,
                kind: ExprKind::Binary {
                    op: bop,
                    lhs: Box::new(lhs),
                    rhs: Box::new(rhs),
                },
            }
        })
        .parse(pairs)
}

fn postfix(pair: Pair<Rule>, errors: &mut Vec<Diagnostic>) -> Expr {
    let mut inner = pair.into_inner();
    let mut e = primary(
        inner.next().expect("postfix_expr starts with a primary"),
        errors,
    );
    for m in inner {
        let arrow = m.as_str().starts_with("->");
        let end = m.as_span().end();
        let field = ident(m.into_inner().next().expect("member has a name"));
        e = Expr {
            span: e.span.start..end,
            kind: ExprKind::Member {
                base: Box::new(e),
                arrow,
                field,
            },
        };
    }
    e
}

fn primary(pair: Pair<Rule>, errors: &mut Vec<Diagnostic>) -> Expr {
    let sp = span(&pair);
    let text = pair.as_str();
    let kind = match pair.as_rule() {
        Rule::integer => match parse_int(text) {
            Some(v) => ExprKind::Int(v),
            None => {
                errors.push(Diagnostic::new(sp.clone(), DiagKind::IntegerTooLarge));
                ExprKind::Int(0)
            }
        },
        Rule::duration => match parse_duration(text) {
            Some(v) => ExprKind::Duration(v),
            None => {
                errors.push(Diagnostic::new(sp.clone(), DiagKind::DurationTooLarge));
                ExprKind::Duration(0)
            }
        },
        Rule::boolean => ExprKind::Bool(text == "true"),
        Rule::string => {
            let body = pair.into_inner().next().expect("string has a body");
            ExprKind::Str(string_literal(body, errors))
        }
        Rule::ident => ExprKind::Name(text.to_string()),
        Rule::positional => match &text[1..] {
            "#" => ExprKind::PositionalCount,
            n => match n.parse() {
                Ok(n) => ExprKind::Positional(n),
                Err(_) => {
                    errors.push(Diagnostic::new(sp.clone(), DiagKind::IntegerTooLarge));
                    ExprKind::Positional(0)
                }
            },
        },
        Rule::call => {
            let mut inner = pair.into_inner();
            let func = ident(inner.next().expect("call has a name"));
            let args = inner.map(|a| expr(a, errors)).collect();
            ExprKind::Call { func, args }
        }
        Rule::pred | Rule::expr => return expr(pair, errors),
        r => unreachable!("primary cannot be {r:?}"),
    };
    Expr { kind, span: sp }
}

pub(crate) fn parse_int(text: &str) -> Option<u64> {
    let clean: String = text.chars().filter(|&c| c != '_').collect();
    match clean
        .strip_prefix("0x")
        .or_else(|| clean.strip_prefix("0X"))
    {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => clean.parse().ok(),
    }
}

pub(crate) fn parse_duration(text: &str) -> Option<u64> {
    let split = text.find(|c: char| c.is_ascii_alphabetic())?;
    let (num, unit) = text.split_at(split);
    let n = parse_int(num)?;
    let scale: u64 = match unit {
        "ns" => 1,
        "us" => 1_000,
        "ms" => 1_000_000,
        _ => 1_000_000_000,
    };
    n.checked_mul(scale)
}

/// The most bytes a string literal may hold: clang copies a literal into an event or key
/// with one store per 8 bytes and refuses more than 128 stores ("memcpy not supported").
pub const MAX_STRING_LITERAL: usize = 1000;

fn string_literal(body: Pair<Rule>, errors: &mut Vec<Diagnostic>) -> Vec<u8> {
    let span = body.as_span();
    let bytes = unescape(body.as_str(), span.start(), errors);
    if bytes.len() > MAX_STRING_LITERAL {
        // At its opening quote: the whole literal would be a very long caret.
        errors.push(Diagnostic::new(
            span.start().saturating_sub(1)..span.start(),
            DiagKind::StringLiteralTooLong {
                len: bytes.len(),
                max: MAX_STRING_LITERAL,
            },
        ));
    }
    bytes
}

fn unescape(body: &str, offset: usize, errors: &mut Vec<Diagnostic>) -> Vec<u8> {
    let bytes = body.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == 0 {
            errors.push(Diagnostic::new(
                offset + i..offset + i + 1,
                DiagKind::NulInString,
            ));
            i += 1;
            continue;
        }
        if bytes[i] != b'\\' {
            out.push(bytes[i]);
            i += 1;
            continue;
        }
        let esc = bytes.get(i + 1).copied();
        match esc {
            Some(b'"') => out.push(b'"'),
            Some(b'\\') => out.push(b'\\'),
            Some(b'n') => out.push(b'\n'),
            Some(b't') => out.push(b'\t'),
            Some(b'x') => {
                let hex = body
                    .get(i + 2..i + 4)
                    .and_then(|h| u8::from_str_radix(h, 16).ok());
                match hex {
                    Some(v) if v != 0 => {
                        out.push(v);
                        i += 4;
                        continue;
                    }
                    Some(_) => errors.push(Diagnostic::new(
                        offset + i..offset + i + 4,
                        DiagKind::NulInString,
                    )),
                    None => errors.push(Diagnostic::new(
                        offset + i..offset + (i + 2).min(bytes.len()),
                        DiagKind::BadEscape("\\x".into()),
                    )),
                }
                i += 4;
                continue;
            }
            _ => {
                let len = body[i + 1..].chars().next().map_or(0, char::len_utf8);
                errors.push(Diagnostic::new(
                    offset + i..offset + i + 1 + len,
                    DiagKind::BadEscape(body[i..i + 1 + len].to_string()),
                ));
                i += 1 + len;
                continue;
            }
        }
        i += 2;
    }
    out
}

/// How deep parentheses may nest, and how many operators a script may hold: every later
/// stage walks expressions recursively, so these bound the stack it needs (documented in
/// docs/language.md). A generated filter of thousands of `or` terms stays well inside.
pub const MAX_NESTING: usize = 1000;
pub const MAX_OPERATORS: usize = 10_000;
/// How deep `{ }` blocks may nest: a session's block and 15 `if`s inside it.
pub const MAX_BLOCKS: usize = 16;

/// A diagnostic when `source` nests parentheses deeper than MAX_NESTING or holds more
/// than MAX_OPERATORS operators; checked on the raw text (strings and comments skipped)
/// before the parser recurses into it.
fn too_complex(source: &str) -> Option<Diagnostic> {
    let bytes = source.as_bytes();
    let (mut depth, mut operators, mut i) = (0usize, 0usize, 0usize);
    let mut blocks = 0usize;
    let mut word_start = true;
    while i < bytes.len() {
        let b = bytes[i];
        match b {
            b'"' => {
                i += 1;
                while i < bytes.len() && bytes[i] != b'"' && bytes[i] != b'\n' {
                    i += if bytes[i] == b'\\' { 2 } else { 1 };
                }
            }
            b'#' => {
                while i < bytes.len() && bytes[i] != b'\n' {
                    i += 1;
                }
            }
            b'/' if bytes.get(i + 1) == Some(&b'/') => {
                while i < bytes.len() && bytes[i] != b'\n' {
                    i += 1;
                }
            }
            b'(' => {
                depth += 1;
                if depth > MAX_NESTING {
                    return Some(Diagnostic::new(
                        i..i + 1,
                        DiagKind::TooDeep { limit: MAX_NESTING },
                    ));
                }
            }
            b')' => depth = depth.saturating_sub(1),
            b'{' => {
                blocks += 1;
                if blocks > MAX_BLOCKS {
                    return Some(Diagnostic::new(
                        i..i + 1,
                        DiagKind::BlocksTooDeep { limit: MAX_BLOCKS },
                    ));
                }
            }
            b'}' => blocks = blocks.saturating_sub(1),
            // A run such as `==` or `<<` is one operator.
            b'+' | b'-' | b'*' | b'/' | b'%' | b'&' | b'|' | b'^' | b'<' | b'>' | b'=' | b'!'
            | b'~' => {
                let prev = i.checked_sub(1).map(|p| bytes[p]);
                if !prev.is_some_and(|p| b"&|<>=!".contains(&p) && b"&|<>=".contains(&b)) {
                    operators += 1;
                }
            }
            b'a' | b'o' | b'n' if word_start => {
                let rest = &source[i..];
                let word = rest
                    .split(|c: char| !c.is_ascii_alphanumeric() && c != '_')
                    .next()
                    .unwrap_or("");
                if matches!(word, "and" | "or" | "not") {
                    operators += 1;
                }
            }
            _ => {}
        }
        if operators > MAX_OPERATORS {
            return Some(Diagnostic::new(
                i..i + 1,
                DiagKind::TooManyOperators {
                    limit: MAX_OPERATORS,
                },
            ));
        }
        word_start = !(b.is_ascii_alphanumeric() || b == b'_');
        i += 1;
    }
    None
}

/// Turns pest's error into words a user can act on.
fn parse_error(e: pest::error::Error<Rule>, source: &str) -> Diagnostic {
    use pest::error::{ErrorVariant, InputLocation};
    let pos = match e.location {
        InputLocation::Pos(p) => p,
        InputLocation::Span((s, _)) => s,
    };
    let positives = match &e.variant {
        ErrorVariant::ParsingError { positives, .. } => positives.as_slice(),
        ErrorVariant::CustomError { .. } => &[],
    };
    if let Some(d) = foreign::explain(source, pos, positives) {
        return d;
    }
    let expected = match &e.variant {
        ErrorVariant::ParsingError { positives, .. } => {
            let mut words: Vec<&'static str> =
                positives.iter().filter_map(|r| describe(*r)).collect();
            // Closing brackets are literals, which pest does not list: name the one that
            // would close what is open here.
            match innermost_open(&source[..pos.min(source.len())]) {
                Some('{') => words.push("`}`"),
                Some('(') => words.push("`)`"),
                _ => {}
            }
            words.sort();
            words.dedup();
            words
        }
        ErrorVariant::CustomError { .. } => Vec::new(),
    };
    Diagnostic::new(pos..pos, DiagKind::Syntax { expected })
}

/// The innermost `{` or `(` still open at the end of `text`, strings and comments aside.
fn innermost_open(text: &str) -> Option<char> {
    let mut stack = Vec::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' => {
                while let Some(c) = chars.next() {
                    match c {
                        '\\' => {
                            chars.next();
                        }
                        '"' | '\n' => break,
                        _ => {}
                    }
                }
            }
            '#' => while chars.next_if(|&c| c != '\n').is_some() {},
            '/' if chars.peek() == Some(&'/') => while chars.next_if(|&c| c != '\n').is_some() {},
            '{' | '(' => stack.push(c),
            '}' | ')' => {
                stack.pop();
            }
            _ => {}
        }
    }
    stack.pop()
}

/// "an aggregation (count, hist, ...)", every name of the registry.
fn an_aggregation() -> &'static str {
    static TEXT: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    TEXT.get_or_init(|| {
        let names: Vec<&str> = crate::aggregate::names().collect();
        format!("an aggregation ({})", names.join(", "))
    })
}

fn describe(rule: Rule) -> Option<&'static str> {
    Some(match rule {
        Rule::session | Rule::kw_session => "`session`",
        Rule::on | Rule::kw_on => "`on`",
        Rule::profile | Rule::kw_profile => "`profile`",
        Rule::offcpu | Rule::kw_offcpu => "`offcpu`",
        Rule::hertz => "a rate (`99hz`)",
        Rule::func_name => "a kernel function name",
        Rule::user_func | Rule::user_file | Rule::user_sym | Rule::user_quoted => {
            "a user-space function (`FILE:FUNC`)"
        }
        Rule::kw_where => "`where`",
        Rule::block => "`{`",
        Rule::emit | Rule::kw_emit => "`emit`",
        Rule::aggregation | Rule::agg_func => an_aggregation(),
        Rule::emit_item | Rule::expr | Rule::pred | Rule::postfix_expr => "an expression",
        Rule::ident => "a name",
        Rule::integer => "a number",
        Rule::duration => "a duration",
        Rule::string => "a string",
        Rule::call => "a function call",
        Rule::by_clause | Rule::kw_by => "`by`",
        Rule::kw_as => "`as`",
        Rule::member => "`->` or `.`",
        Rule::or
        | Rule::and
        | Rule::bit_or
        | Rule::bit_xor
        | Rule::bit_and
        | Rule::eq
        | Rule::ne
        | Rule::le
        | Rule::ge
        | Rule::shl
        | Rule::shr
        | Rule::lt
        | Rule::gt
        | Rule::add
        | Rule::sub
        | Rule::mul
        | Rule::div
        | Rule::rem => "an operator",
        Rule::EOI => "the end of the script",
        _ => return None,
    })
}

#[cfg(test)]
mod limits {
    use super::*;

    fn refusal(source: &str) -> DiagKind {
        let mut diags = parse(source).expect_err("refused");
        assert_eq!(diags.len(), 1);
        diags.remove(0).kind
    }

    #[test]
    fn parentheses_deeper_than_the_limit_are_refused_before_parsing() {
        let deep = format!(
            "session vfs_read where {}tgid == 1{}",
            "(".repeat(MAX_NESTING + 1),
            ")".repeat(MAX_NESTING + 1)
        );
        assert!(matches!(refusal(&deep), DiagKind::TooDeep { .. }));
    }

    #[test]
    fn more_operators_than_the_limit_are_refused_before_parsing() {
        let many = format!(
            "session vfs_read where {}tgid == 1",
            "not ".repeat(MAX_OPERATORS + 1)
        );
        assert!(matches!(refusal(&many), DiagKind::TooManyOperators { .. }));
    }

    #[test]
    fn operators_inside_strings_and_comments_do_not_count() {
        let text = format!(
            "# {}\nsession vfs_read where comm == \"{}\"",
            "(".repeat(MAX_NESTING + 1),
            "+".repeat(MAX_OPERATORS + 1)
        );
        // Refused for the long string, not for nesting or operators.
        match parse(&text) {
            Ok(_) => {}
            Err(d) => assert!(
                d.iter().all(|d| !matches!(
                    d.kind,
                    DiagKind::TooDeep { .. } | DiagKind::TooManyOperators { .. }
                )),
                "{d:?}"
            ),
        }
    }
}
