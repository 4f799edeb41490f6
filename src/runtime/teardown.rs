//! Teardown: stop producing, deliver what was produced, then count (in this order the
//! counters and the events describe the same calls), and write what the run adds up:
//! the summaries, END's lines, the last interval or the aggregations.

use super::attach::Links;
use super::event_loop::{self, State, Traced};
use super::loaded::Loaded;
use super::shared::Copy;
use super::{Outcome, RuntimeError, Settings, memory, misses, publish, snapshot};
use crate::check::program::Program;
use crate::output::interval::IntervalStamp;
use libbpf_rs::MapCore;
use std::collections::HashSet;
use std::rc::Rc;

/// Ends the run `traced`: detaches `links` and the copies' links, drains the ring
/// buffer, reads the counters and writes the end.
pub(super) fn finish(
    program: &Program,
    settings: &Settings,
    loaded: &Loaded,
    mut links: Links,
    copies: &mut [Copy],
    traced: Traced,
) -> Result<Outcome, RuntimeError> {
    let in_flight = in_flight(program, loaded, settings.verbose);
    let Traced {
        ring,
        state,
        stacks,
        mut snapshots,
        intervals,
        started,
    } = traced;
    // Stop producing, deliver what was produced, then count: in this order the
    // counters and the events describe the same calls.
    let profiles = std::mem::take(&mut links.profiles);
    profiles.stop();
    drop(links);
    for c in copies.iter_mut() {
        c.link = None;
    }
    if let Some(r) = &ring {
        r.consume()
            .map_err(RuntimeError::libbpf("draining the ring buffer"))?;
    }
    drop(ring);
    let State {
        out,
        events,
        bad,
        io,
    } = Rc::try_unwrap(state)
        .map_err(|_| RuntimeError::Missing("the ring buffer's state, held past its end"))?
        .into_inner();
    if let Some(e) = io {
        return Err(RuntimeError::Output(e));
    }

    if settings.verbose {
        misses::report_per_program(loaded, copies, program);
    }
    let outcome = Outcome {
        summaries: publish::summaries(loaded, copies, &profiles, program, settings, &events)?,
        bad_records: bad,
        in_flight,
    };
    publish::to_exporters(
        loaded,
        copies,
        program,
        settings,
        &events,
        started,
        stacks.as_deref(),
    )?;
    // bpftrace's END: after the last event, before what the run adds up.
    for l in &program.end {
        out.user_line(&crate::output::printf::render_line(l))
            .map_err(RuntimeError::Output)?;
    }
    if settings.interval.is_some() {
        // The last, partial interval; then the summary, over the whole run.
        let stamp = IntervalStamp::now(intervals + 1);
        let results =
            snapshots.interval(loaded, copies, program, stamp, false, stacks.as_deref())?;
        event_loop::print_interval(out, stamp, &results)?;
        for s in &outcome.summaries {
            out.summary(s).map_err(RuntimeError::Output)?;
        }
    } else {
        for s in &outcome.summaries {
            out.summary(s).map_err(RuntimeError::Output)?;
        }
        for result in snapshot::whole_run(loaded, copies, program, stacks.as_deref())? {
            out.aggregation(&result).map_err(RuntimeError::Output)?;
        }
    }
    out.flush().map_err(RuntimeError::Output)?;
    Ok(outcome)
}

/// Task storage cannot be listed: only the hash map of kernels without it is counted.
fn in_flight(program: &Program, loaded: &Loaded, verbose: bool) -> Vec<(String, usize)> {
    let in_flight: Vec<(String, usize)> = program
        .sessions
        .iter()
        .filter_map(|s| {
            let names: HashSet<String> = (0..s.targets.len()).map(|t| s.calls_map(t)).collect();
            let maps: Vec<_> = loaded
                .maps()
                .filter(|m| {
                    names.contains(&*m.name().to_string_lossy())
                        && m.map_type() == libbpf_rs::MapType::Hash
                })
                .collect();
            (!maps.is_empty())
                .then(|| (s.label.clone(), maps.iter().map(|m| m.keys().count()).sum()))
        })
        .collect();
    if verbose {
        for (label, n) in &in_flight {
            crate::stderr_line!(
                "fslat: {label}: {n} entries left in the per-thread map at the end"
            );
        }
        for map in loaded.maps() {
            crate::stderr_line!("fslat: {}", memory::describe(map));
        }
    }
    in_flight
}
