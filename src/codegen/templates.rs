//! The template registry: fslat's handlebars templates by name, compiled when a program
//! first needs one, and the one render of a program's data.

use super::data::ProgramData;
use handlebars::Handlebars;
use std::sync::LazyLock;

/// fslat's templates: (name, text). `program` is the whole object; the others are its
/// partials (`{{> NAME}}`). Its first part is three templates, not one, because the
/// compilation's cost grows with the square of a template's length (a line and column
/// for each element, counted from the start of its text).
pub(super) const TEMPLATE_TEXTS: &[(&str, &str)] = &[
    ("program", include_str!("../../templates/program.bpf.c.hbs")),
    ("layouts", include_str!("../../templates/layouts.bpf.c.hbs")),
    (
        "declarations",
        include_str!("../../templates/declarations.bpf.c.hbs"),
    ),
    (
        "fsession",
        include_str!("../../templates/fsession.bpf.c.hbs"),
    ),
    ("fentry", include_str!("../../templates/fentry.bpf.c.hbs")),
    (
        "program_head",
        include_str!("../../templates/program_head.bpf.c.hbs"),
    ),
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
    (
        "fsession_multi",
        include_str!("../../templates/fsession_multi.bpf.c.hbs"),
    ),
    ("fexit", include_str!("../../templates/fexit.bpf.c.hbs")),
    (
        "entry_values",
        include_str!("../../templates/entry_values.bpf.c.hbs"),
    ),
    (
        "entry_values_map",
        include_str!("../../templates/entry_values_map.bpf.c.hbs"),
    ),
    (
        "entry_values_session",
        include_str!("../../templates/entry_values_session.bpf.c.hbs"),
    ),
    (
        "entry_values_return",
        include_str!("../../templates/entry_values_return.bpf.c.hbs"),
    ),
    (
        "sched_enter",
        include_str!("../../templates/sched_enter.bpf.c.hbs"),
    ),
    (
        "count_unpaired",
        include_str!("../../templates/count_unpaired.bpf.c.hbs"),
    ),
    ("span", include_str!("../../templates/span.bpf.c.hbs")),
    ("on", include_str!("../../templates/on.bpf.c.hbs")),
    ("offcpu", include_str!("../../templates/offcpu.bpf.c.hbs")),
];

/// The templates compiled so far. Compiling one is costly (handlebars' pest grammar, and
/// a line and column computed from the start of the text for every element: about 87
/// million instructions for all of them, most of a cold start's front end), so each is
/// compiled the first time a program needs it (`render`).
static TEMPLATES: LazyLock<std::sync::Mutex<Handlebars<'static>>> = LazyLock::new(|| {
    let mut hb = Handlebars::new();
    hb.set_strict_mode(true);
    hb.register_escape_fn(handlebars::no_escape);
    std::sync::Mutex::new(hb)
});

/// `program` rendered from `data`, with the templates it uses compiled first: the
/// partials each session's shape picks (as `program`'s `{{#if span}}...{{else}}` chain
/// does) and, from their text, the partials those include.
pub(super) fn render(data: &ProgramData) -> String {
    let mut wanted = vec!["program"];
    if !data.aggregations.is_empty() {
        wanted.push("aggregation_map");
    }
    for s in &data.sessions {
        wanted.push(if s.span.is_some() {
            "span"
        } else if s.offcpu {
            "offcpu"
        } else if s.on || s.profile {
            "on"
        } else if s.exit_only {
            "fexit"
        } else if s.shape.pair.is_some() {
            "fentry"
        } else if s.multi.is_some() {
            "fsession_multi"
        } else {
            "fsession"
        });
    }
    let mut hb = TEMPLATES.lock().unwrap_or_else(|e| e.into_inner());
    while let Some(name) = wanted.pop() {
        if hb.has_template(name) {
            continue;
        }
        let (_, text) = TEMPLATE_TEXTS
            .iter()
            .find(|(n, _)| *n == name)
            .expect("templates include only fslat's own templates");
        hb.register_template_string(name, text)
            .expect("fslat's own templates are valid handlebars");
        wanted.extend(partials_of(text).filter(|p| !SHAPES.contains(p)));
    }
    hb.render("program", data)
        .expect("the template data always has every field the templates use")
}

/// The partials `program` picks by the data (`render`), not by its text alone.
const SHAPES: [&str; 8] = [
    "aggregation_map",
    "span",
    "offcpu",
    "on",
    "fexit",
    "fentry",
    "fsession_multi",
    "fsession",
];

/// The partials a template's text includes (`{{> NAME ...}}`).
pub(super) fn partials_of(text: &str) -> impl Iterator<Item = &str> {
    text.split("{{>").skip(1).filter_map(|rest| {
        rest.split(|c: char| c.is_whitespace() || c == '}')
            .find(|w| !w.is_empty())
    })
}
