//! Each session's programs as template data, by mode: one function's fsession or
//! fentry/fexit pair, a several-function session's one program and its tables, a span's
//! START and END programs, an `on` point's or a profile's one program. The entry and
//! return phases' C comes from `codegen/expr.rs`.

use super::INFLIGHT_ENTRIES;
use super::data::*;
use super::expr::{self, Phase, Scratch};
use super::layouts::field_member;
use super::shapes::{self, PROFILE_CTX, ProgShape, USER_CTX};
use crate::check::program::*;
use crate::check::resources::{self, Mode, ProgRole};

/// Each session's programs in `mode`.
pub(super) fn all(program: &Program, mode: Mode) -> Vec<SessionData> {
    program
        .sessions
        .iter()
        .flat_map(|s| {
            of_session(s, mode).into_iter().map(move |mut data| {
                if sleepable(program, s, &data) {
                    data.shape.sleepable();
                }
                guard_uprobes(program, s, &mut data);
                data
            })
        })
        .collect()
}

/// Whether a session's programs run sleepable, so that a user string not in memory is
/// faulted in and read rather than `<unread>`: on a kernel with sleepable uprobes, for a
/// session whose every program is a uprobe or USDT program (a user-space session or an
/// `on` user point; not a span, whose points may be kernel ones), that reads a string in
/// user memory, and that keeps nothing in per-CPU memory a sleep would leave open to
/// another task on its CPU (a scratch map; stacks and the scheduler's hooks, whose maps
/// a sleepable program may not use either).
fn sleepable(program: &Program, s: &Session, data: &SessionData) -> bool {
    let user_space =
        s.span.is_none() && !s.offcpu && s.profile.is_none() && (s.user.is_some() || s.at_usdt());
    program.features.sleepable_uprobe
        && user_space
        && data.reads_user_str
        && data.scratch == 0
        && !program.uses_kstack
        && !program.uses_ustack
        && !s.uses_sched()
}

/// Marks the session's uprobe programs (a user function's, a USDT point's; a span's
/// START or END at a USDT point) to run their body with preemption off where
/// `shapes::guard_preemption` says the kernel needs it.
fn guard_uprobes(program: &Program, s: &Session, data: &mut SessionData) {
    if !shapes::guard_preemption(&program.features, data.shape.sleepable) {
        return;
    }
    match (&s.span, &mut data.span) {
        (Some(points), Some(span)) => {
            for (start, point) in span.starts.iter_mut().zip(&points.starts) {
                start.preempt_off = point.point.usdt.is_some();
            }
            span.end_preempt_off = points.end.usdt.is_some();
        }
        _ => data.shape.preempt_off = s.user.is_some() || s.at_usdt(),
    }
}

/// A session's programs in `mode`, as template data.
fn of_session(s: &Session, mode: Mode) -> Vec<SessionData> {
    match mode.of_session(s) {
        _ if s.span.is_some() => vec![span_data(s)],
        _ if s.offcpu => vec![offcpu_data(s)],
        _ if s.on.is_some() || s.profile.is_some() => {
            (0..s.targets.len()).map(|t| on_data(s, t)).collect()
        }
        m if mode.shares_body(s) => vec![multi_session_data(s, m, true)],
        m @ (Mode::FsessionMulti
        | Mode::FexitMulti
        | Mode::UprobeSession
        | Mode::UprobeMulti
        | Mode::KprobeSession
        | Mode::KprobeEntry
        | Mode::KprobeReturn) => {
            vec![multi_session_data(s, m, false)]
        }
        m => s
            .targets
            .iter()
            .enumerate()
            .map(|t| session_data(s, t, m))
            .collect(),
    }
}

fn session_data(s: &Session, (t, target): (usize, &Target), mode: Mode) -> SessionData {
    let error_check = |ret: &mut Phase| match target.ret {
        Some(Scalar { signed: true, .. }) => Some(format!("{} < 0", ret.ret_value())),
        _ => None,
    };
    phases_data(s, target, t, mode, error_check, None)
}

/// A session of several functions as one program: parameters and `ret` through the
/// trampoline's helpers, `func` and what differs between functions from tables indexed by
/// the link's per-function cookie. `shared`: one body that fslat's loader loads once per
/// function (`Mode::shares_body`), the index and slots written into each copy.
fn multi_session_data(s: &Session, mode: Mode, shared: bool) -> SessionData {
    let count = s.targets.len();
    let func_cap = s
        .targets
        .iter()
        .map(|t| t.func.len() + 1)
        .max()
        .unwrap_or(1);
    let mut tables = vec![format!(
        "static const char fslat_funcs_{}[{count}][{func_cap}] {} = {{ {} }};",
        s.index,
        table_section(),
        s.targets
            .iter()
            .map(|t| expr::c_string(t.func.as_bytes()))
            .collect::<Vec<_>>()
            .join(", ")
    )];
    for i in (0..s.params.len()).filter(|_| !shared) {
        if let Some(values) = differing(s.targets.iter().map(|t| t.slots[i])) {
            tables.push(format!(
                "static const __u8 {}[{count}] {} = {{ {values} }};",
                expr::slot_table(s.index, i),
                table_section()
            ));
        }
    }
    // Whether a call failed depends on each function's return type when they differ.
    let uniform_ret = s.targets.iter().all(|t| t.ret == s.targets[0].ret);
    let kinds = s.targets.iter().map(|t| match t.ret {
        Some(Scalar { signed: true, size }) => size,
        _ => 0,
    });
    let kinds: Vec<String> = kinds.map(|k| k.to_string()).collect();
    if !uniform_ret {
        tables.push(format!(
            "static const __u8 fslat_retkind_{}[{count}] {} = {{ {} }};",
            s.index,
            table_section(),
            kinds.join(", ")
        ));
    }
    let index = s.index;
    let first = &s.targets[0];
    let error_check = move |ret: &mut Phase| {
        if uniform_ret {
            return match first.ret {
                Some(Scalar { signed: true, .. }) => Some(format!("{} < 0", ret.ret_value())),
                _ => None,
            };
        }
        let raw = ret.ret_raw();
        let kind = format!("fslat_retkind_{index}[fslat_fn]");
        Some(format!(
            "({kind} == 1 && (__s8){raw} < 0) || ({kind} == 2 && (__s16){raw} < 0) || ({kind} == 4 && (__s32){raw} < 0) || ({kind} == 8 && (__s64){raw} < 0)"
        ))
    };
    let multi = MultiData {
        count,
        single: count == 1,
        shared,
        link: match mode {
            _ if shared => "fslat's loader, a copy for each function",
            Mode::FsessionMulti => "fsession multi-attach",
            Mode::FexitMulti => "fexit multi-attach",
            Mode::UprobeSession => "a uprobe_multi link in session mode",
            Mode::KprobeSession => "a kprobe_multi link in session mode",
            Mode::KprobeEntry => "a kprobe_multi link",
            Mode::KprobeReturn => "a kprobe_multi link at return",
            _ => "a uprobe_multi link for each program",
        },
        tables,
        funcs: s.targets.iter().map(|t| t.func.clone()).collect(),
    };
    phases_data(s, first, 0, mode, error_check, Some(multi))
}

/// The attribute that keeps a function table in `resources::TABLES_SECTION`.
fn table_section() -> String {
    format!(
        "__attribute__((section(\"{}\")))",
        resources::TABLES_SECTION
    )
}

/// `Some("a, b, ...")` when the values are not all the same.
fn differing(values: impl Iterator<Item = usize>) -> Option<String> {
    let v: Vec<usize> = values.collect();
    v.iter().any(|x| *x != v[0]).then(|| {
        v.iter()
            .map(usize::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    })
}

fn phases_data(
    s: &Session,
    target: &Target,
    t: usize,
    mode: Mode,
    error_check: impl FnOnce(&mut Phase) -> Option<String>,
    multi_data: Option<MultiData>,
) -> SessionData {
    let shared = multi_data.as_ref().is_some_and(|m| m.shared);
    let multi = multi_data.is_some() && !shared;
    let shape = ProgShape::of(mode, &target.func);
    let entry_only = mode.entry_only();
    let exit_only = entry_only || mode.return_only();
    let fsession = shape.pair.is_none() && !exit_only;
    let role = if multi {
        ProgRole::Multi
    } else if exit_only {
        ProgRole::Exit
    } else {
        ProgRole::Session
    };
    let scratch_map = s.scratch_map(role, t);
    let scratch = |reject| Scratch {
        map: scratch_map.clone(),
        reject,
        used: 0,
    };
    // A call given up at a session program's entry must leave the cookie saying so.
    let reject = if fsession { "*fslat_cookie = 0; " } else { "" };
    // A user function's `on` point is one uprobe shaped as fexit's program.
    let regs = mode.reads_registers() || s.user.is_some();
    let mut entry = Phase::new(s, target, false, multi, regs, scratch(reject)).sharing(shared);
    let mut ret = Phase::new(s, target, true, multi, regs, scratch("")).sharing(shared);
    // At return only, the entry filter is the return phase's first lines: what it reads
    // (`pid_tgid`, a parameter) is then read once for the whole program.
    let filter_phase = if exit_only { &mut ret } else { &mut entry };
    let entry_filter = s.entry_filter.as_ref().map(|f| filter_phase.expr(f));
    let entry_lines = filter_phase.take_lines();
    let entry_values = (s.span.is_none() && !s.entry_values.is_empty()).then(|| EntryValuesData {
        saves: saves(&mut entry, s, "fslat_ev"),
    });
    let entry_time_early = entry.uses_start();

    // At entry there is no return value to count `errors` by.
    let error_check = (!entry_only).then(|| error_check(&mut ret)).flatten();
    let return_filter = s.return_filter.as_ref().map(|f| ret.expr(f));
    let return_lines = ret.take_lines();

    // What only matching calls need is computed after the filter.
    // An `if` around an event or an aggregation is one condition (the checker flattened
    // nested `if`s into it): one level of branching in the C, however deep the script
    // nests, which keeps the verifier's paths few.
    let events = s
        .events
        .iter()
        .map(|e| EventCode {
            id: e.id,
            stores: e
                .fields
                .iter()
                .enumerate()
                .map(|(i, f)| ret.store(&f.expr, &format!("fslat_e->{}", field_member(i)), f.kind))
                .collect(),
            guard: e.guard.as_ref().map(|g| ret.expr(g)),
        })
        .collect();
    let mut aggregation_lines = Vec::new();
    for a in &s.aggregations {
        let lines = ret.aggregate(a);
        match &a.guard {
            Some(g) => {
                let cond = ret.expr(g);
                aggregation_lines.push(format!("if ({cond}) {{"));
                aggregation_lines.extend(lines.into_iter().map(|l| format!("\t{l}")));
                aggregation_lines.push("}".into());
            }
            None => aggregation_lines.extend(lines),
        }
    }
    let action_lines = ret.take_lines();

    SessionData {
        index: s.index,
        prog: s.prog_name(role, t),
        entry_prog: s.prog_name(ProgRole::Entry, t),
        exit_prog: s.prog_name(ProgRole::Exit, t),
        calls_map: s.calls_map(t),
        entry_values_map: s.entry_values_map(role, t),
        calls_stack: mode == Mode::KprobeSession,
        label: s.label.clone(),
        func: target.func.clone(),
        inflight: INFLIGHT_ENTRIES,
        entry_time_early,
        untimed: !s.reads_entry_time(),
        entry_lines,
        entry_filter,
        entry_values,
        return_lines,
        error_check,
        return_filter,
        action_lines,
        events,
        aggregation_lines,
        multi: multi_data,
        exit_only,
        entry_only,
        return_probe: mode == Mode::KprobeReturn,
        scratch_map,
        scratch: entry.scratch_used().max(ret.scratch_used()),
        scratch_over: over_scratch([("at entry", &entry), ("at return", &ret)]),
        shape,
        span: None,
        on: false,
        profile: false,
        offcpu: false,
        reads_now: ret.reads_now(),
        sched: s.uses_sched(),
        reads_user_str: entry.reads_user_str() || ret.reads_user_str(),
    }
}

/// The first of `phases` that needs more of the scratch map than `SCRATCH_BYTES`.
fn over_scratch<const N: usize>(
    phases: [(&'static str, &Phase); N],
) -> Option<(&'static str, u32)> {
    phases
        .into_iter()
        .map(|(name, p)| (name, p.scratch_used()))
        .find(|(_, bytes)| *bytes > resources::SCRATCH_BYTES)
}

/// The statements that save the session's entry values into `words` in `phase`, each
/// after the lines it needs.
fn saves(phase: &mut Phase, s: &Session, words: &str) -> Vec<String> {
    let mut out = Vec::new();
    for i in 0..s.entry_values.len() {
        let save = phase.save(i, words);
        out.extend(phase.take_lines());
        out.push(save);
    }
    out
}

/// A span: END's program is fentry mode's exit with END's filter first; each START's
/// program is built here, in its own phase (its names are that START's).
fn span_data(s: &Session) -> SessionData {
    let points = s.span.as_ref().expect("span_data is called for spans");
    let target = &s.targets[0];
    let mut data = phases_data(s, target, 0, Mode::Fentry, |_| None, None);
    let scratch = |reject| Scratch {
        map: data.scratch_map.clone(),
        reject,
        used: 0,
    };
    let mut starts = Vec::new();
    let mut scratch_used = 0;
    let mut scratch_over = None;
    for (k, point) in points.starts.iter().enumerate() {
        let mut start = Phase::new(s, target, false, false, false, scratch(""))
            .at_usdt(point.point.usdt.is_some());
        let filter = point.filter.as_ref().map(|f| start.expr(f));
        let key = start.expr(&point.key);
        if s.uses_sched() {
            // The scheduler's totals saved below are read at the start time: read it first.
            start.entry_time();
        }
        let lines = start.take_lines();
        let mut values = Vec::new();
        for (i, v) in point.values.iter().enumerate() {
            let save = start.save_value(i, v, "fslat_v.ev");
            values.extend(start.take_lines());
            values.push(save);
        }
        scratch_used = scratch_used.max(start.scratch_used());
        scratch_over = scratch_over.or(over_scratch([("at START", &start)]));
        starts.push(StartData {
            prog: s.span_start_prog(k),
            section: point.point.section(),
            lines,
            filter,
            key,
            values,
            time_early: start.uses_start(),
            preempt_off: false,
        });
    }
    let mut end = Phase::new(s, target, false, false, false, scratch(""));
    let end_key = end.expr(&points.end_key);
    data.scratch = data.scratch.max(scratch_used).max(end.scratch_used());
    data.scratch_over = data
        .scratch_over
        .or(scratch_over)
        .or(over_scratch([("at END", &end)]));
    data.span = Some(SpanData {
        starts,
        end_section: points.end.section(),
        values: s.entry_layout().1,
        end_lines: end.take_lines(),
        end_key,
        depth_map: points.nests().then(|| s.span_depth_map()),
        depth: SPAN_DEPTH,
        end_preempt_off: false,
    });
    data
}

/// An offcpu item: fentry mode's two phases, the entry's at the switch out (a function
/// the switch program calls for the thread leaving), the return's at the switch in.
fn offcpu_data(s: &Session) -> SessionData {
    let mut data = phases_data(s, &s.targets[0], 0, Mode::Fentry, |_| None, None);
    data.offcpu = true;
    data
}

/// An `on` point: fexit mode's one program (the filter, then the actions), attached at
/// the point instead of a return; `ts` is the point's time. Several tracepoints are a
/// program each (`t`: the target's index).
fn on_data(s: &Session, t: usize) -> SessionData {
    let target = &s.targets[t];
    let mut data = phases_data(s, target, t, Mode::Fexit, |_| None, None);
    match &s.on {
        Some(_) if s.user.is_some() => {
            // A user function's entry: a classic uprobe, attached by the runtime.
            data.shape.section = "uprobe".into();
            data.shape.ctx_decl = USER_CTX;
        }
        Some(point) => {
            data.shape.section = SpanPoint {
                name: target.func.clone(),
                ..point.clone()
            }
            .section()
        }
        None => {
            // A profile: libbpf does not attach a perf event program, the runtime opens
            // the perf events. The program reads nothing of its context itself.
            data.shape.section = resources::PROFILE_SECTION.into();
            data.shape.ctx_decl = PROFILE_CTX;
            data.profile = true;
        }
    }
    data.entry_time_early = s.needs_entry();
    data.on = true;
    data
}
