//! Stage 3: checked program → BPF C. Templates in `templates/` give the program its shape
//! (fsession, or the fentry/fexit fallback); this module renders expressions and fills
//! the templates' data.

mod ctypes;
mod data;
mod expr;
mod layouts;
mod sessions;
mod shapes;
mod templates;

use crate::check::counters;
use crate::check::program::*;
use crate::check::resources;
use crate::diag::{DiagKind, Diagnostic};
use data::*;
use std::collections::HashSet;

pub use crate::check::resources::Mode;

/// Calls in flight per session that fentry mode can remember.
pub const INFLIGHT_ENTRIES: u32 = 10240;
/// Distinct keys per aggregation.
pub const AGG_ENTRIES: u32 = 10240;
/// Distinct keys per `percentiles` (each key's histogram takes 15 KiB, allocated at load).
pub const PCT_ENTRIES: u32 = 1024;

/// The BPF C for `program` in `mode`. Codegen places strings and wide keys (the scratch
/// plan, `Phase::scratch`); a session whose phase needs more room than a BPF program has
/// is refused here, with its span, before clang.
pub fn generate(program: &Program, mode: Mode) -> Result<String, Vec<Diagnostic>> {
    let registers;
    let program = if mode == Mode::KprobeSession {
        registers = with_params_saved(program, mode);
        &registers
    } else {
        program
    };
    let data = program_data(program, mode);
    let too_big = over_scratch(program, &data);
    if !too_big.is_empty() {
        return Err(too_big);
    }
    Ok(templates::render(&data))
}

/// What the templates render for `program` in `mode`.
fn program_data(program: &Program, mode: Mode) -> ProgramData {
    let aggregations = || program.sessions.iter().flat_map(|s| &s.aggregations);
    ProgramData {
        version: env!("CARGO_PKG_VERSION"),
        mode: mode.of_program(program),
        session_kfuncs_ctx: program.features.fsession,
        uses_path: program.uses_path,
        uses_usdt: program.sessions.iter().any(Session::at_usdt),
        uses_kstack: program.uses_kstack,
        uses_ustack: program.uses_ustack,
        uses_sched: program.uses_sched,
        uses_offcpu: program.sessions.iter().any(|s| s.offcpu),
        wait_kstack: program.wait_kstack,
        wait_ustack: program.wait_ustack,
        no_stack: resources::NO_STACK,
        ring: program.uses_ustack || program.sessions.iter().any(|s| !s.events.is_empty()),
        ustack_files: layouts::ustack_files(program),
        ustack_copy: layouts::ustack_copy(program),
        ustack_walk: layouts::ustack_walk(program),
        atomics: program.features.atomics,
        task_storage: program.features.task_storage,
        bpf_loop: program.features.bpf_loop,
        agg_headers: layouts::unique(aggregations().filter_map(|a| a.func.header())),
        agg_structs: layouts::unique(
            aggregations().flat_map(|a| a.func.c_structs().iter().copied()),
        ),
        entry_values: program
            .sessions
            .iter()
            .map(|s| s.entry_layout().1)
            .max()
            .unwrap_or(0),
        session_count: program.sessions.len().max(1),
        maps: layouts::map_names(),
        settings: layouts::settings(),
        args: layouts::args(program),
        counters: layouts::counters(),
        counter: counters::in_bpf().map(|c| (c.name, c.name)).collect(),
        counters_size: counters::struct_size(),
        numbers: layouts::numbers(),
        announce: AnnounceData {
            id: resources::ANNOUNCE_ID,
            tgid_offset: resources::ANNOUNCE_TGID_OFFSET,
        },
        structs: layouts::structs(program),
        events: program
            .sessions
            .iter()
            .flat_map(|s| &s.events)
            .map(layouts::event_data)
            .collect(),
        aggregations: layouts::aggregation_maps(program),
        sessions: sessions::all(program, mode),
    }
}

/// A diagnostic for each session with a phase that needs more of the scratch map than
/// a per-CPU value holds, at the session's span.
fn over_scratch(program: &Program, data: &ProgramData) -> Vec<Diagnostic> {
    let mut refused = HashSet::new();
    data.sessions
        .iter()
        .filter_map(|d| {
            let (phase, bytes) = d.scratch_over?;
            let s = program.sessions.iter().find(|s| s.index == d.index)?;
            if !refused.insert(s.index) {
                return None;
            }
            let limit = resources::SCRATCH_BYTES;
            let kind = DiagKind::TooManyStrings {
                phase,
                bytes,
                limit,
            };
            Some(Diagnostic::new(s.at.clone(), kind))
        })
        .collect()
}

/// `program` with what each kprobe session's return phase reads of the arguments saved
/// at entry: at return the argument registers hold whatever the function left there.
fn with_params_saved(program: &Program, mode: Mode) -> Program {
    let mut p = program.clone();
    for s in &mut p.sessions {
        if s.user.is_none() && mode.of_session(s) == Mode::KprobeSession {
            crate::check::carry_params_to_return(s);
        }
    }
    p
}

pub use layouts::field_member;

#[cfg(test)]
mod tests;
