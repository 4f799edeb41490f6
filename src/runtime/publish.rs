//! Publishing: a run's figures as they stand (each session's summary, each aggregation's
//! rows), for the exporters (`--listen`, `--otlp`) while it runs and for its end.

use super::loaded::Loaded;
use super::shared::Copy;
use super::{RuntimeError, Settings, misses, present, snapshot};
use crate::check::counters::{self, Shown, Source};
use crate::check::program::{Aggregation, Program};
use crate::check::resources;
use crate::output::{Summary, figures};
use crate::stacks::StackTable;
use libbpf_rs::{MapCore, MapFlags};

/// Hands the exporters (`--listen`, `--otlp`), if any, the figures as they stand now.
#[allow(clippy::too_many_arguments)]
pub(super) fn to_exporters(
    obj: &Loaded,
    copies: &[Copy],
    program: &Program,
    settings: &Settings,
    events: &[u64],
    start: std::time::SystemTime,
    stacks: Option<&StackTable>,
) -> Result<(), RuntimeError> {
    if let Some(board) = &settings.metrics {
        board.publish(figures(
            obj, copies, program, settings, events, start, stacks,
        )?);
    }
    Ok(())
}

/// The figures `--listen` and `--otlp` export, as they stand now.
#[allow(clippy::too_many_arguments)]
pub(super) fn figures(
    obj: &Loaded,
    copies: &[Copy],
    program: &Program,
    settings: &Settings,
    events: &[u64],
    start: std::time::SystemTime,
    stacks: Option<&StackTable>,
) -> Result<figures::Figures, RuntimeError> {
    // Tag 0: the interval maxima of `percentiles` are not exported, only the run's.
    let all = snapshot::read_all(obj, program, 0)?;
    let aggregations = snapshot::aggregations(program)
        .zip(&all)
        .map(|((s, a), snap)| {
            let rows = snap.named_rows(a, stacks);
            // Read only while nothing is counted: what the exporters show until then.
            let unset = match a.keys.is_empty() && rows.is_empty() {
                true => unset(obj, a),
                false => None,
            };
            figures::AggFigures {
                unset,
                ..figures::AggFigures::of(&s.label, a, rows)
            }
        })
        .collect();
    Ok(figures::Figures {
        start,
        time: std::time::SystemTime::now(),
        // A profile's `lost` is read once its clocks have stopped: in the summary only.
        sessions: summaries(
            obj,
            copies,
            &super::profile::Profiles::default(),
            program,
            settings,
            events,
        )?,
        aggregations,
    })
}

/// The state of `a`'s value before any update: its map value, all zeros.
fn unset(obj: &Loaded, a: &Aggregation) -> Option<crate::aggregate::State> {
    let map = obj.map(&a.map())?;
    let zeros = vec![0u8; map.value_size() as usize];
    Some(a.func.decode(&a.spec(), &zeros, &[], 0))
}

/// Each session's counters, summed over CPUs, with its count of decoded `events`.
pub(super) fn summaries(
    obj: &Loaded,
    copies: &[Copy],
    profiles: &super::profile::Profiles,
    program: &Program,
    settings: &Settings,
    events: &[u64],
) -> Result<Vec<Summary>, RuntimeError> {
    let counters = obj
        .map(resources::COUNTERS_MAP)
        .ok_or(RuntimeError::Missing(resources::COUNTERS_MAP))?;
    let missed = misses::per_session(obj, copies, program);
    let mut out = Vec::new();
    for s in &program.sessions {
        let key = (s.index as u32).to_ne_bytes();
        let per_cpu = counters
            .lookup_percpu(&key, MapFlags::ANY)
            .map_err(RuntimeError::libbpf("reading the counters"))?
            .unwrap_or_default();
        let mut summary = Summary {
            label: s.label.clone(),
            mode: match (&s.span, &s.on) {
                _ if s.profile.is_some() => "perf_event",
                _ if s.offcpu => "tp_btf",
                (Some(_), _) => "span",
                (_, Some(p)) if p.tracepoint => "tp_btf",
                (_, Some(p)) if p.usdt.is_some() => "usdt",
                (_, Some(_)) if s.user.is_some() => "uprobe",
                (_, Some(_)) => "fentry",
                _ => settings.mode.of_session(s).name(),
            },
            ..Summary::default()
        };
        for c in &counters::ALL {
            let has = match c.shown {
                Shown::Always | Shown::WhereCounted => true,
                Shown::Sessions => {
                    s.span.is_none() && s.on.is_none() && s.profile.is_none() && !s.offcpu
                }
                Shown::Profiles => s.profile.is_some(),
                Shown::Spans => s.span.is_some(),
                Shown::SpansAndOffcpu => s.span.is_some() || s.offcpu,
                Shown::Offcpu => s.offcpu,
                Shown::WithAggregations => !s.aggregations.is_empty(),
                Shown::WithStacks => s.uses_stacks(),
                Shown::WithSched => s.uses_sched(),
                Shown::Several => s.several,
            };
            let value = match c.source {
                Source::Bpf { .. } => c
                    .offset()
                    .map(|at| per_cpu.iter().map(|cpu| u64_at(cpu, at / 8)).sum()),
                Source::Events => Some(events[s.index]),
                Source::Functions => Some(present(s, settings).0.len() as u64),
                Source::Missed => missed.get(s.index).copied().flatten(),
                Source::InFlight => obj.map(&s.calls_map(0)).map(|m| m.keys().count() as u64),
                Source::ProfileLost => {
                    let at = counters::SAMPLES.offset().unwrap_or(0) / 8;
                    let samples: Vec<u64> = per_cpu.iter().map(|cpu| u64_at(cpu, at)).collect();
                    profiles.lost(s.index, &samples)
                }
            };
            summary.set(c, value.filter(|_| has));
        }
        // At entry only the return value is not known: a signed one's `errors` cannot
        // be counted, and is said to be unknown rather than 0.
        if settings.mode.of_session(s).entry_only()
            && s.targets.iter().any(|t| t.ret.is_some_and(|r| r.signed))
        {
            summary.set_unknown(&counters::ERRORS);
        }
        out.push(summary);
    }
    Ok(out)
}

/// The `i`th native-endian u64 of a map value (0 past its end).
fn u64_at(bytes: &[u8], i: usize) -> u64 {
    bytes
        .get(i * 8..i * 8 + 8)
        .and_then(|b| b.try_into().ok())
        .map_or(0, u64::from_ne_bytes)
}
