//! Stage 3: checked program → BPF C. Templates in `templates/` give the program its shape
//! (fsession, or the fentry/fexit fallback); this module renders expressions and fills
//! the templates' data.

mod expr;

use crate::check::c_int;
use crate::check::program::*;
use crate::syntax::ast::AggFunc;
use expr::Phase;
use handlebars::Handlebars;
use serde::Serialize;
use std::sync::LazyLock;

/// How sessions attach.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
pub enum Mode {
    /// One program at entry and return (Linux 7.0+).
    Fsession,
    /// An fentry and an fexit program sharing a per-thread map.
    Fentry,
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::Fsession => "fsession",
            Mode::Fentry => "fentry",
        }
    }
}

/// Calls in flight per session that fentry mode can remember.
pub const INFLIGHT_ENTRIES: u32 = 10240;
/// Distinct keys per aggregation.
pub const AGG_ENTRIES: u32 = 10240;

static TEMPLATES: LazyLock<Handlebars<'static>> = LazyLock::new(|| {
    let mut hb = Handlebars::new();
    hb.set_strict_mode(true);
    hb.register_escape_fn(handlebars::no_escape);
    for (name, text) in [
        ("program", include_str!("../../templates/program.bpf.c.hbs")),
        (
            "fsession",
            include_str!("../../templates/fsession.bpf.c.hbs"),
        ),
        ("fentry", include_str!("../../templates/fentry.bpf.c.hbs")),
        (
            "entry_filter",
            include_str!("../../templates/entry_filter.bpf.c.hbs"),
        ),
        (
            "return_phase",
            include_str!("../../templates/return_phase.bpf.c.hbs"),
        ),
        (
            "aggregation_map",
            include_str!("../../templates/aggregation_map.bpf.c.hbs"),
        ),
    ] {
        hb.register_template_string(name, text)
            .expect("fslat's own templates are valid handlebars");
    }
    hb
});

#[derive(Serialize)]
struct ProgramData {
    version: &'static str,
    mode: &'static str,
    fsession: bool,
    uses_path: bool,
    session_count: usize,
    structs: Vec<StructData>,
    events: Vec<EventData>,
    aggregations: Vec<AggMapData>,
    sessions: Vec<SessionData>,
}

#[derive(Serialize)]
struct StructData {
    c_name: String,
    members: Vec<String>,
}

#[derive(Serialize)]
struct EventData {
    id: u32,
    label: String,
    size: u32,
    fields: Vec<FieldData>,
}

#[derive(Serialize)]
struct FieldData {
    name: String,
    member: String,
    decl: String,
    offset: u32,
}

#[derive(Serialize)]
struct AggMapData {
    id: usize,
    title: String,
    key_fields: Vec<String>,
    key_size: u32,
    value_type: &'static str,
    entries: u32,
}

#[derive(Serialize)]
struct SessionData {
    index: usize,
    /// Names this program and its maps: the session index, then `_T` for target T of a
    /// several-function session.
    prog: String,
    label: String,
    func: String,
    inflight: u32,
    entry_time_early: bool,
    entry_lines: Vec<String>,
    entry_filter: Option<String>,
    return_lines: Vec<String>,
    error_check: Option<String>,
    return_filter: Option<String>,
    action_lines: Vec<String>,
    event: Option<Vec<String>>,
    aggregation_lines: Vec<String>,
}

/// The BPF C for `program` in `mode`.
pub fn generate(program: &Program, mode: Mode) -> String {
    let data = ProgramData {
        version: env!("CARGO_PKG_VERSION"),
        mode: mode.name(),
        fsession: mode == Mode::Fsession,
        uses_path: program.uses_path,
        session_count: program.sessions.len().max(1),
        structs: program
            .structs
            .iter()
            .map(|s| StructData {
                c_name: s.c_name.clone(),
                members: s
                    .members
                    .iter()
                    .map(|m| m.decl.replace("{}", &m.name))
                    .collect(),
            })
            .collect(),
        events: program
            .sessions
            .iter()
            .filter_map(|s| s.event.as_ref())
            .map(event_data)
            .collect(),
        aggregations: program
            .sessions
            .iter()
            .flat_map(|s| &s.aggregations)
            .map(agg_map_data)
            .collect(),
        sessions: program
            .sessions
            .iter()
            .flat_map(|s| {
                s.targets
                    .iter()
                    .enumerate()
                    .map(move |t| session_data(s, t))
            })
            .collect(),
    };
    TEMPLATES
        .render("program", &data)
        .expect("the template data always has every field the templates use")
}

pub fn field_member(i: usize) -> String {
    format!("f{i}")
}

fn field_decl(kind: FieldKind, member: &str) -> String {
    match kind {
        FieldKind::Int(s) => format!("{} {member}", c_int(u32::from(s.size), s.signed)),
        FieldKind::Bool => format!("__u8 {member}"),
        FieldKind::Duration | FieldKind::Ptr => format!("__u64 {member}"),
        FieldKind::Str { cap } => format!("char {member}[{cap}]"),
    }
}

fn event_data(e: &EventSchema) -> EventData {
    EventData {
        id: e.id,
        label: e.session.clone(),
        size: e.size,
        fields: e
            .fields
            .iter()
            .enumerate()
            .map(|(i, f)| FieldData {
                name: f.name.clone(),
                member: field_member(i),
                decl: field_decl(f.kind, &field_member(i)),
                offset: f.offset,
            })
            .collect(),
    }
}

fn agg_map_data(a: &Aggregation) -> AggMapData {
    AggMapData {
        id: a.id,
        title: a.title.replace("*/", "* /"),
        key_fields: if a.keys.is_empty() {
            vec!["__u32 none".into()]
        } else {
            a.keys
                .iter()
                .enumerate()
                .map(|(i, k)| field_decl(k.kind, &field_member(i)))
                .collect()
        },
        key_size: a.key_size,
        value_type: if a.func == AggFunc::Hist {
            "struct fslat_hist"
        } else {
            "struct fslat_stat"
        },
        entries: AGG_ENTRIES,
    }
}

fn session_data(s: &Session, (t, target): (usize, &Target)) -> SessionData {
    let mut entry = Phase::entry(s, target);
    let entry_filter = s.entry_filter.as_ref().map(|f| entry.expr(f));
    let entry_time_early = entry.uses_start();

    let mut ret = Phase::ret(s, target);
    let error_check = match target.ret {
        Some(Scalar { signed: true, .. }) => Some(format!("{} < 0", ret.ret_value())),
        _ => None,
    };
    let return_filter = s.return_filter.as_ref().map(|f| ret.expr(f));
    let return_lines = ret.take_lines();

    // What only matching calls need is computed after the filter.
    let event = s.event.as_ref().map(|e| {
        e.fields
            .iter()
            .enumerate()
            .map(|(i, f)| ret.store(&f.expr, &format!("fslat_e->{}", field_member(i)), f.kind))
            .collect::<Vec<_>>()
    });
    let mut aggregation_lines = Vec::new();
    for a in &s.aggregations {
        aggregation_lines.extend(ret.aggregate(a));
    }
    let action_lines = ret.take_lines();

    SessionData {
        index: s.index,
        prog: if s.several {
            format!("{}_{t}", s.index)
        } else {
            s.index.to_string()
        },
        label: s.label.clone(),
        func: target.func.clone(),
        inflight: INFLIGHT_ENTRIES,
        entry_time_early,
        entry_lines: entry.take_lines(),
        entry_filter,
        return_lines,
        error_check,
        return_filter,
        action_lines,
        event,
        aggregation_lines,
    }
}

#[cfg(test)]
mod tests;
