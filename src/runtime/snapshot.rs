//! Aggregations as read from their kernel maps. The kernel maps are never cleared: a
//! snapshot is cumulative since the start of the run, and one `-i` interval is the
//! difference of two successive snapshots, so every update lands in exactly one interval
//! and the intervals add up to the run. Counts, sums, histogram and percentile buckets
//! difference exactly. Two things cannot be differenced:
//! - `percentiles`' max: the kernel keeps, per CPU, the max of the current interval
//!   tagged with its generation (`resources::INTERVAL_MAP`, which user space bumps before each
//!   read), next to the max over the run; an update racing with that read is made to
//!   agree with the interval's counts (`State::since`);
//! - `min()` and `max()`: with `-i` they are over the run so far (docs/language.md).
//!
//! The metrics exporter reads the cumulative snapshots (`output::figures`).

use super::RuntimeError;
use crate::aggregate::State;
use crate::check::program::{Aggregation, FieldKind, Program};
use crate::check::resources::INTERVAL_MAP;
use crate::output::interval::IntervalStamp;
use crate::output::{AggResult, AggRow, Value, read_value};
use crate::stacks::StackTable;
use libbpf_rs::{MapCore, MapFlags};
use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, HashMap};

/// One aggregation's rows, by the key's bytes as the kernel stores them.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct AggSnapshot {
    pub rows: BTreeMap<Vec<u8>, State>,
}

impl AggSnapshot {
    /// Reads `map`, the map of `a` (and for `percentiles`, `max_map`, its per-CPU maxima).
    /// `tag` is the generation + 1 of the interval that just ended (fslat_pct.bpf.h).
    pub fn read(
        map: &libbpf_rs::MapHandle,
        max_map: Option<&libbpf_rs::MapHandle>,
        a: &Aggregation,
        tag: u64,
    ) -> Result<Self, RuntimeError> {
        let mut rows = BTreeMap::new();
        if a.per_cpu_array() {
            // One slot, a value per CPU: their states added up; no row until counted.
            let key = 0u32.to_ne_bytes();
            let cpus = map
                .lookup_percpu(&key, MapFlags::ANY)
                .map_err(RuntimeError::libbpf("reading an aggregation"))?
                .unwrap_or_default();
            let mut states = cpus.iter().map(|v| a.func.decode(&a.spec(), v, &[], tag));
            if let Some(mut total) = states.next() {
                states.for_each(|s| total.merge(&s));
                if !total.is_empty() {
                    rows.insert(key.to_vec(), total);
                }
            }
            return Ok(AggSnapshot { rows });
        }
        for key in map.keys() {
            let Some(v) = map
                .lookup(&key, MapFlags::ANY)
                .map_err(RuntimeError::libbpf("reading an aggregation"))?
            else {
                continue;
            };
            let cpus = match max_map {
                Some(max_map) => max_map
                    .lookup_percpu(&key, MapFlags::ANY)
                    .map_err(RuntimeError::libbpf("reading an aggregation"))?
                    .unwrap_or_default(),
                None => Vec::new(),
            };
            let raw = a.func.decode(&a.spec(), &v, &cpus, tag);
            rows.insert(key, raw);
        }
        Ok(AggSnapshot { rows })
    }

    /// The interval from `earlier` to `self`: keys with no update in it are left out.
    pub fn since(&self, earlier: &AggSnapshot) -> AggSnapshot {
        AggSnapshot {
            rows: self
                .rows
                .iter()
                .map(|(k, now)| (k.clone(), now.since(earlier.rows.get(k))))
                .filter(|(_, r)| !r.is_empty())
                .collect(),
        }
    }

    /// The rows as the writers print them, smallest first (as bpftrace prints maps).
    pub fn result(
        &self,
        a: &Aggregation,
        session: &str,
        interval: Option<IntervalStamp>,
        stacks: Option<&StackTable>,
    ) -> AggResult {
        let mut rows: Vec<AggRow> = self
            .named_rows(a, stacks)
            .into_iter()
            .map(|(keys, raw)| AggRow {
                keys,
                value: a.func.show(&raw),
            })
            .collect();
        // Biggest last; keys break ties so output is stable.
        rows.sort_by(|x, y| {
            x.value
                .rank()
                .cmp(&y.value.rank())
                .then_with(|| format!("{:?}", x.keys).cmp(&format!("{:?}", y.keys)))
        });
        AggResult {
            interval,
            ..AggResult::of(session, a, rows)
        }
    }
}

impl AggSnapshot {
    /// The rows by their keys' values. Keys are unique in the map, but neither cgroup ids
    /// nor stack ids are what is shown: rows that show the same (two cgroups with no pod,
    /// two stack ids whose frames render as one text) are merged.
    pub fn named_rows(
        &self,
        a: &Aggregation,
        stacks: Option<&StackTable>,
    ) -> Vec<(Vec<Value<'static>>, State)> {
        let by_name = a
            .keys
            .iter()
            .any(|k| matches!(k.kind, FieldKind::CgroupName(_) | FieldKind::Stack(_)));
        let rows = self
            .rows
            .iter()
            .map(|(key, raw)| (key_values(a, key, stacks), raw));
        match by_name {
            true => merge_shown(rows),
            false => rows.map(|(k, raw)| (k, raw.clone())).collect(),
        }
    }
}

/// Rows whose keys show the same merged into one (in first-seen order): values compare as
/// printed, so a stack compares by its text (`output::stack_text`), not its
/// addresses; a merged row keeps the first row's keys.
fn merge_shown<'r>(
    rows: impl Iterator<Item = (Vec<Value<'static>>, &'r State)>,
) -> Vec<(Vec<Value<'static>>, State)> {
    let shown = |keys: &[Value]| -> Vec<String> {
        keys.iter()
            .map(|v| match v {
                Value::Stack(s) => crate::output::stack_text(s),
                v => format!("{v:?}"),
            })
            .collect()
    };
    let mut index: HashMap<Vec<String>, usize> = HashMap::new();
    let mut out: Vec<(Vec<Value<'static>>, State)> = Vec::new();
    for (keys, raw) in rows {
        match index.entry(shown(&keys)) {
            Entry::Occupied(e) => out[*e.get()].1.merge(raw),
            Entry::Vacant(e) => {
                e.insert(out.len());
                out.push((keys, raw.clone()));
            }
        }
    }
    out
}

/// Every aggregation's latest cumulative snapshot, in program order, and the interval
/// generation the kernel tags `percentiles`' interval max with.
#[derive(Debug, Default)]
pub struct Snapshots {
    cumulative: Vec<AggSnapshot>,
    generation: u64,
    /// Each session's skipped calls at the previous read.
    missed: Vec<u64>,
}

impl Snapshots {
    /// The latest cumulative snapshots, one per aggregation in program order (empty ones
    /// before the first read).
    pub fn cumulative(&self) -> &[AggSnapshot] {
        &self.cumulative
    }

    /// Ends the current interval: moves the kernel to the next generation, reads every
    /// aggregation, and returns each one's rows over the interval (keys with no update
    /// left out). `bump` is false at the end of the run, when nothing updates any more.
    pub fn interval(
        &mut self,
        obj: &super::Loaded,
        copies: &[super::Copy],
        program: &Program,
        stamp: IntervalStamp,
        bump: bool,
        stacks: Option<&StackTable>,
    ) -> Result<Vec<AggResult>, RuntimeError> {
        let tag = self.generation + 1;
        if bump {
            self.generation += 1;
            if let Some(map) = obj.map(INTERVAL_MAP) {
                map.update(
                    &0u32.to_ne_bytes(),
                    &self.generation.to_ne_bytes(),
                    MapFlags::ANY,
                )
                .map_err(RuntimeError::libbpf("starting the next interval"))?;
            }
        }
        let now = read_all(obj, program, tag)?;
        let missed = missed_per_session(obj, copies, program);
        let mut out = Vec::new();
        for (i, (s, a)) in aggregations(program).enumerate() {
            let before = self.cumulative.get(i).cloned().unwrap_or_default();
            let mut result = now[i]
                .since(&before)
                .result(a, &s.label, Some(stamp), stacks);
            let earlier = self.missed.get(s.index).copied().unwrap_or(0);
            result.missed = missed[s.index].saturating_sub(earlier);
            out.push(result);
        }
        self.cumulative = now;
        self.missed = missed;
        Ok(out)
    }
}

pub(super) fn aggregations(
    program: &Program,
) -> impl Iterator<Item = (&crate::check::program::Session, &Aggregation)> {
    program
        .sessions
        .iter()
        .flat_map(|s| s.aggregations.iter().map(move |a| (s, a)))
}

/// Reads every aggregation of `program` from `obj`, in program order.
pub fn read_all(
    obj: &super::Loaded,
    program: &Program,
    tag: u64,
) -> Result<Vec<AggSnapshot>, RuntimeError> {
    aggregations(program)
        .map(|(_, a)| {
            let find = |name: &str| obj.map(name);
            let map = find(&a.map()).ok_or(RuntimeError::Missing("an aggregation map"))?;
            let max_map = match a.max_map() {
                Some(name) => {
                    Some(find(&name).ok_or(RuntimeError::Missing("a percentiles max map"))?)
                }
                None => None,
            };
            AggSnapshot::read(map, max_map, a, tag)
        })
        .collect()
}

/// Every aggregation over the whole run (the print without `-i`).
pub fn whole_run(
    obj: &super::Loaded,
    copies: &[super::Copy],
    program: &Program,
    stacks: Option<&StackTable>,
) -> Result<Vec<AggResult>, RuntimeError> {
    let all = read_all(obj, program, 1)?;
    let missed = missed_per_session(obj, copies, program);
    Ok(aggregations(program)
        .zip(&all)
        .map(|((s, a), snap)| AggResult {
            missed: missed[s.index],
            ..snap.result(a, &s.label, None, stacks)
        })
        .collect())
}

/// Each session's skipped calls so far (0 where the kernel does not count them).
fn missed_per_session(obj: &super::Loaded, copies: &[super::Copy], program: &Program) -> Vec<u64> {
    super::misses::per_session(obj, copies, program)
        .into_iter()
        .map(|n| n.unwrap_or(0))
        .collect()
}

/// An aggregation key's values from the key's bytes, stacks symbolized when a table is
/// given.
pub fn key_values(a: &Aggregation, key: &[u8], stacks: Option<&StackTable>) -> Vec<Value<'static>> {
    a.keys
        .iter()
        .map(|k| {
            let at = k.offset as usize;
            let size = k.kind.size() as usize;
            let v = read_value(key.get(at..at + size).unwrap_or(&[]), k.kind);
            match (k.kind, v, stacks) {
                (FieldKind::Stack(kind), Value::Unsigned(raw), Some(t)) => {
                    Value::Stack(t.stack(kind, raw))
                }
                (_, v, _) => v.into_owned(),
            }
        })
        .collect()
}

/// Learns the paths of the cgroups in `program`'s cgroup-name keys (`by unit`, ...) now,
/// while they exist: a cgroup counted and then removed before the print keeps its name.
/// Reads only the keys, and walks the hierarchy only for an id not seen before.
pub fn remember_cgroups(obj: &super::Loaded, program: &Program) {
    for (_, a) in aggregations(program) {
        let offsets: Vec<usize> = a
            .keys
            .iter()
            .filter(|k| matches!(k.kind, FieldKind::CgroupName(_)))
            .map(|k| k.offset as usize)
            .collect();
        if offsets.is_empty() {
            continue;
        }
        let Some(map) = obj.map(&a.map()) else {
            continue;
        };
        let ids: Vec<u64> = map
            .keys()
            .flat_map(|key| {
                offsets
                    .iter()
                    .filter_map(|&at| key.get(at..at + 8)?.try_into().ok())
                    .map(u64::from_ne_bytes)
                    .collect::<Vec<_>>()
            })
            .collect();
        crate::cgroups::remember(&ids);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aggregate::values::Stat;
    use crate::btf::Fixture;
    use crate::check::resources::Mode;

    fn aggregation(script: &str) -> Aggregation {
        let (mut p, _) = crate::compile(script, &Fixture::new(), Mode::Fsession).expect("compiles");
        p.sessions.remove(0).aggregations.remove(0)
    }

    fn count(n: u64) -> State {
        State::Stat(Stat {
            count: n,
            sum: 0,
            min: 0,
            max: 0,
        })
    }

    // No cgroup has these ids (they are above any inode number the hierarchy hands out).
    const GONE: [u64; 2] = [u64::MAX, u64::MAX - 1];

    fn gone_cgroups_counted(a: u64, b: u64) -> AggSnapshot {
        let mut snap = AggSnapshot::default();
        snap.rows.insert(GONE[0].to_ne_bytes().to_vec(), count(a));
        snap.rows.insert(GONE[1].to_ne_bytes().to_vec(), count(b));
        snap
    }

    #[test]
    fn rows_of_cgroups_showing_one_name_are_one_row_and_one_series() {
        let a = aggregation("session vfs_read { count() by unit as reads }");
        let snap = gone_cgroups_counted(3, 5);
        let points = snap.named_rows(&a, None);
        assert_eq!(points.len(), 1);
        assert_eq!(
            a.func.point(&points[0].1),
            crate::aggregate::PointValue::Number(8)
        );
        assert_eq!(crate::metrics::label_value(&points[0].0[0]), "");
        let rows = snap.result(&a, "vfs_read", None, None).rows;
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].value, crate::aggregate::AggValue::Number(8));
    }

    #[test]
    fn a_cgroup_never_seen_is_shown_by_its_id_and_keys_without_names_never_merge() {
        let a = aggregation("session vfs_read { count() by cgroup_path }");
        let snap = gone_cgroups_counted(3, 5);
        let labels: Vec<String> = snap
            .named_rows(&a, None)
            .iter()
            .map(|p| crate::metrics::label_value(&p.0[0]))
            .collect();
        assert_eq!(
            labels,
            [format!("cgroup:{}", GONE[1]), format!("cgroup:{}", GONE[0])]
        );
        let by_id = aggregation("session vfs_read { count() by cgroup }");
        assert_eq!(snap.named_rows(&by_id, None).len(), 2);
    }

    fn user_stack(frames: &[(u64, &str)]) -> Value<'static> {
        use crate::check::program::StackKind;
        use crate::stacks::{Frame, Stack};
        Value::Stack(std::sync::Arc::new(Stack {
            kind: StackKind::User,
            frames: frames
                .iter()
                .map(|&(addr, name)| Frame {
                    addr,
                    symbol: Some(name.to_string()),
                    module: None,
                    file_offset: None,
                })
                .collect(),
            lost: false,
        }))
    }

    #[test]
    fn rows_of_stacks_showing_one_text_are_one_row() {
        // Three calls of one method through `syscall()`: three return addresses in
        // `main`, one text; another stack stays its own row.
        let same = |at| {
            user_stack(&[
                (0x1000, "__libc_start_call_main"),
                (at, "main"),
                (0x9000, "syscall"),
            ])
        };
        let other = user_stack(&[(0x1000, "__libc_start_call_main"), (0x2000, "other")]);
        let (c1, c2, c3, c4) = (count(1), count(2), count(4), count(8));
        let rows = vec![
            (vec![same(0x2010)], &c1),
            (vec![other], &c2),
            (vec![same(0x2020)], &c3),
            (vec![same(0x2030)], &c4),
        ];
        let merged = merge_shown(rows.into_iter());
        let got: Vec<(String, u64)> = merged
            .iter()
            .map(|(k, s)| match (&k[0], s) {
                (Value::Stack(st), State::Stat(st_)) => (crate::output::stack_text(st), st_.count),
                _ => panic!("a stack key and a count"),
            })
            .collect();
        assert_eq!(
            got,
            [
                ("__libc_start_call_main;main;syscall".to_string(), 13),
                ("__libc_start_call_main;other".to_string(), 2)
            ]
        );
    }
}
