//! A session's actions: the event an `emit` sends, with its fields laid out, and each
//! aggregation with its key layout and name.

use super::builtins;
use super::program::*;
use super::{COMM_CAP, Checked, Checker, MAX_KEYS, Reported, Scope, agg_names};
use crate::aggregate::Args;
use crate::diag::{DiagKind, Diagnostic};
use crate::syntax::ast::{self, Span};

/// An aggregation's keys, by name, and their kinds.
type Keys = (Vec<(String, Expr)>, Vec<FieldKind>);

impl Checker<'_> {
    pub(super) fn emit(
        &mut self,
        scope: &Scope,
        index: usize,
        label: &str,
        items: &[ast::EmitItem],
        has_ret: bool,
    ) -> Checked<EventSchema> {
        let fields = if items.is_empty() {
            self.default_fields(scope, has_ret)?
        } else {
            self.named_fields(scope, items)?
        };
        self.event_schema(index, label, fields)
    }

    /// A bare `emit`'s fields: the function's name (of several), the task, the scalar
    /// and input-string parameters, `ret`, `latency`.
    fn default_fields(
        &mut self,
        scope: &Scope,
        has_ret: bool,
    ) -> Checked<Vec<(String, Span, Expr)>> {
        let mut fields: Vec<(String, Span, Expr)> = Vec::new();
        let builtin = |b: Builtin, ty: Ty| Expr {
            ty,
            kind: ExprKind::Builtin(b),
        };
        let u32t = Ty::Int(Scalar {
            size: 4,
            signed: false,
        });
        if scope.several {
            let cap = scope.func_cap;
            fields.push((
                "func".into(),
                0..0,
                builtin(builtins::FUNC, Ty::Str { cap }),
            ));
        }
        fields.push((
            "comm".into(),
            0..0,
            builtin(builtins::COMM, Ty::Str { cap: COMM_CAP }),
        ));
        fields.push(("tgid".into(), 0..0, builtin(builtins::TGID, u32t.clone())));
        fields.push(("pid".into(), 0..0, builtin(builtins::PID, u32t)));
        let reserved = ["comm", "tgid", "pid", "ret", "latency", "func"];
        for (i, p) in scope.params.iter().enumerate() {
            // A `const char *` is a string the caller passes in (`do_sys_openat2`'s
            // `filename`); a `char *` is a buffer the function fills.
            let input_string = matches!(p.ty, Ty::Str { .. }) && p.type_name.starts_with("const ");
            if !matches!(p.ty, Ty::Int(_) | Ty::Bool) && !input_string {
                continue;
            }
            let taken = reserved.contains(&p.name.as_str()) || Builtin::named(&p.name).is_some();
            let name = if taken {
                format!("arg{i}")
            } else {
                p.name.clone()
            };
            let value = Expr {
                ty: p.ty.clone(),
                kind: ExprKind::Param(i),
            };
            let value = if input_string {
                Expr {
                    ty: p.ty.clone(),
                    kind: ExprKind::Deref(Box::new(Expr {
                        ty: Ty::Int(Scalar {
                            size: 8,
                            signed: false,
                        }),
                        kind: ExprKind::Param(i),
                    })),
                }
            } else {
                value
            };
            fields.push((name, 0..0, value));
        }
        if has_ret {
            let ret = self.ret(scope, 0..0)?;
            // A pointer return is shown as a number, not followed.
            let ret = match ret.kind {
                ExprKind::Deref(inner) => *inner,
                _ => ret,
            };
            fields.push(("ret".into(), 0..0, ret));
        }
        if !self.now.at_point || self.now.in_offcpu {
            fields.push((
                "latency".into(),
                0..0,
                builtin(builtins::LATENCY, Ty::Duration),
            ));
        }
        if self.now.in_offcpu {
            let runq = Builtin::named("runq").expect("runq is a builtin");
            fields.push(("runq".into(), 0..0, builtin(runq, Ty::Duration)));
        }
        // An offcpu item's task is the one that left: read as it leaves.
        fields
            .into_iter()
            .map(|(name, at, v)| Ok((name, at, self.offcpu_saved(v, 0..0)?)))
            .collect()
    }

    /// `emit EXPR [as NAME], ...`'s fields, each named once (and once in JSON).
    fn named_fields(
        &mut self,
        scope: &Scope,
        items: &[ast::EmitItem],
    ) -> Checked<Vec<(String, Span, Expr)>> {
        let mut fields: Vec<(String, Span, Expr)> = Vec::new();
        let mut failed = false;
        for item in items {
            let Ok(e) = self.expr(scope, &item.expr) else {
                failed = true;
                continue;
            };
            let name = match (&item.alias, &item.expr.kind) {
                (Some(a), _) => a.name.clone(),
                (None, ast::ExprKind::Name(n)) => n.clone(),
                (None, ast::ExprKind::Member { field, .. }) => field.name.clone(),
                _ => {
                    self.error(item.expr.span.clone(), DiagKind::NeedsName);
                    failed = true;
                    continue;
                }
            };
            let span = item
                .alias
                .as_ref()
                .map_or(item.expr.span.clone(), |a| a.span.clone());
            if fields.iter().any(|(n, _, _)| *n == name) {
                self.error(span, DiagKind::DuplicateField { name });
                failed = true;
                continue;
            }
            let json = json_name(&name, e.ty == Ty::Duration);
            if let Some((other, _, _)) = fields
                .iter()
                .find(|(n, _, f)| json_name(n, f.ty == Ty::Duration) == json)
            {
                let other = other.clone();
                self.error(span, DiagKind::JsonNameClash { name, other, json });
                failed = true;
                continue;
            }
            fields.push((name, span, e));
        }
        if failed {
            return Err(Reported);
        }
        Ok(fields)
    }

    /// Lays out an event of these fields (name, span for errors, value).
    pub(super) fn event_schema(
        &mut self,
        index: usize,
        label: &str,
        fields: Vec<(String, Span, Expr)>,
    ) -> Checked<EventSchema> {
        let mut kinds = Vec::new();
        for (_, span, e) in &fields {
            kinds.push(self.field_kind(e, span.clone())?);
        }
        let (offsets, size) = layout(&kinds, 4);
        Ok(EventSchema {
            id: index as u32,
            item: index as u32,
            session: label.to_string(),
            fields: fields
                .into_iter()
                .zip(kinds)
                .zip(offsets)
                .map(|(((name, _, expr), kind), offset)| EventField {
                    name,
                    kind,
                    offset,
                    expr,
                })
                .collect(),
            size,
            format: None,
            guard: None,
        })
    }

    fn field_kind(&mut self, e: &Expr, span: Span) -> Checked<FieldKind> {
        Ok(match &e.ty {
            Ty::Int(s) => FieldKind::Int(*s),
            Ty::Bool => FieldKind::Bool,
            Ty::Duration => FieldKind::Duration,
            Ty::Str { cap } => FieldKind::Str { cap: *cap },
            Ty::Ptr { .. } => FieldKind::Ptr,
            Ty::Stack(k) => FieldKind::Stack(*k),
            Ty::CgroupName(v) => FieldKind::CgroupName(*v),
            Ty::Formatted { scalar, radix } => FieldKind::Formatted(*scalar, *radix),
            Ty::Record { type_name, .. } => {
                return Err(self.error(
                    span,
                    DiagKind::StructValue {
                        ty: type_name.clone(),
                    },
                ));
            }
        })
    }

    pub(super) fn aggregation(
        &mut self,
        scope: &Scope,
        label: &str,
        a: &ast::Aggregate,
    ) -> Checked<Aggregation> {
        let takes = a.func.args();
        let arg = self.agg_arg(scope, a)?;
        if a.by.len() > MAX_KEYS {
            return Err(self.error(a.by[MAX_KEYS].span.clone(), DiagKind::TooManyKeys));
        }
        let linear = match takes {
            Args::ValueAndRange => Some(self.linear(scope, a, arg.as_ref())?),
            Args::None | Args::Value => None,
        };
        let (keys, kinds) = self.agg_keys(scope, a)?;
        let (offsets, key_size) = if kinds.is_empty() {
            (Vec::new(), 8)
        } else {
            layout(&kinds, 0)
        };
        let id = self.whole.next_agg;
        let name = match &a.name {
            Some(given) => {
                if !self.whole.agg_names.give(&given.name) {
                    return Err(self.error(
                        given.span.clone(),
                        DiagKind::DuplicateAggName {
                            name: given.name.clone(),
                        },
                    ));
                }
                given.name.clone()
            }
            None => {
                let arg_text = a.arg.as_ref().map(|e| &self.input.source[e.span.clone()]);
                self.whole
                    .agg_names
                    .derive(id, agg_names::derived(label, a.func, arg_text))
            }
        };
        self.whole.next_agg += 1;
        Ok(Aggregation {
            name,
            id,
            func: a.func,
            duration: arg.as_ref().is_some_and(|e| e.ty == Ty::Duration),
            arg,
            linear,
            keys: keys
                .into_iter()
                .zip(kinds)
                .zip(offsets)
                .map(|(((name, expr), kind), offset)| AggKey {
                    name,
                    kind,
                    offset,
                    expr,
                })
                .collect(),
            key_size,
            title: self.input.source[a.span.clone()]
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" "),
            guard: None,
        })
    }

    /// An aggregation's value argument, checked against what it takes.
    fn agg_arg(&mut self, scope: &Scope, a: &ast::Aggregate) -> Checked<Option<Expr>> {
        let name = a.func.name();
        let takes = a.func.args();
        let wanted = takes.more();
        if a.more_args.len() != wanted {
            let given = usize::from(a.arg.is_some()) + a.more_args.len();
            let span = match a.more_args.get(wanted) {
                Some(extra) => extra.span.clone(),
                None => a.span.clone(),
            };
            return Err(self.error(
                span,
                DiagKind::WrongArgCount {
                    func: name.into(),
                    expected: wanted + 1,
                    found: given,
                },
            ));
        }
        Ok(match (takes, &a.arg) {
            (Args::None, None) => None,
            (Args::None, Some(e)) => {
                return Err(self.error(
                    e.span.clone(),
                    DiagKind::WrongArgCount {
                        func: name.into(),
                        expected: 0,
                        found: 1,
                    },
                ));
            }
            (_, None) => {
                return Err(self.error(
                    a.span.clone(),
                    DiagKind::WrongArgCount {
                        func: name.into(),
                        expected: 1,
                        found: 0,
                    },
                ));
            }
            (_, Some(e)) => {
                let v = self.expr(scope, e)?;
                if !matches!(v.ty, Ty::Int(_) | Ty::Duration) {
                    return Err(self.error(
                        e.span.clone(),
                        DiagKind::BadArgType {
                            func: name.into(),
                            expected: "a number or a duration",
                            found: v.ty.describe(),
                        },
                    ));
                }
                Some(v)
            }
        })
    }

    /// An aggregation's keys, each named once, with their kinds.
    fn agg_keys(&mut self, scope: &Scope, a: &ast::Aggregate) -> Checked<Keys> {
        let mut keys: Vec<(String, Expr)> = Vec::new();
        let mut kinds = Vec::new();
        for (k, alias) in a.by.iter().zip(&a.key_names) {
            let e = self.expr(scope, k)?;
            let kind = match e.ty {
                Ty::Int(s) => FieldKind::Int(s),
                Ty::Bool => FieldKind::Bool,
                Ty::Str { cap } => FieldKind::Str { cap },
                Ty::Stack(s) => FieldKind::Stack(s),
                Ty::CgroupName(v) => FieldKind::CgroupName(v),
                Ty::Formatted { scalar, radix } => FieldKind::Formatted(scalar, radix),
                ref t => {
                    return Err(self.error(k.span.clone(), DiagKind::BadKey { ty: t.describe() }));
                }
            };
            let (name, span) = match (alias, &k.kind) {
                (Some(a), _) => (a.name.clone(), a.span.clone()),
                (None, ast::ExprKind::Name(n)) => (n.clone(), k.span.clone()),
                (None, ast::ExprKind::Member { field, .. }) => (field.name.clone(), k.span.clone()),
                _ => return Err(self.error(k.span.clone(), DiagKind::KeyNeedsName)),
            };
            if keys.iter().any(|(n, _)| *n == name) {
                let mut d = Diagnostic::new(span, DiagKind::DuplicateKey { name });
                if let (true, Some(agg)) = (a.name_after_key, &a.name) {
                    d = d.hint(format!(
                        "one `as` after the last key names the aggregation (`{0}`); to name the key too, write `as KEY as {0}`",
                        agg.name
                    ));
                } else {
                    d = d.hint("name one of them with `as NAME`");
                }
                return Err(self.error_with(d));
            }
            kinds.push(kind);
            keys.push((name, e));
        }
        Ok((keys, kinds))
    }
}
