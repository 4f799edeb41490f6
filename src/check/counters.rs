//! A session's counters, in one table: the figures each session's summary line, JSON
//! record, Prometheus counter and OTLP sum show. Those the BPF program counts are the
//! fields of `struct fslat_counters`, which the program template renders from this table
//! (and checks with `_Static_assert`); the templates and codegen name a counter through it
//! (`{{@root.counter.NAME}}` in a template: an unknown name fails to render), and the
//! runtime reads each by its offset. `docs/architecture.md` has the recipe for a new one.

/// One figure of a session's summary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counter {
    /// The C field, the key in the text summary and the JSON record, and the metric
    /// `fslat_NAME_total`.
    pub name: &'static str,
    /// What it counts: the C field's comment, the metric's help and description.
    pub about: &'static str,
    pub source: Source,
    pub shown: Shown,
}

/// Who counts a figure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// A `__u64` of `struct fslat_counters`, per session and CPU, that the BPF program adds
    /// to where `counted_in` says; the runtime sums the CPUs.
    Bpf { counted_in: &'static str },
    /// Events the runtime decoded from the ring buffer.
    Events,
    /// How many functions a session of several traces.
    Functions,
    /// Calls the kernel skipped (runtime/misses.rs).
    Missed,
    /// Spans: starts left in the span's map at the end (counted after detaching).
    InFlight,
    /// Profiles: what the CPU clocks were due to sample, less what the program saw
    /// (`runtime/profile.rs`).
    ProfileLost,
}

/// Which sessions have a figure; the others show none (`None` in the summary).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shown {
    Always,
    /// Sessions with aggregations.
    WithAggregations,
    /// Sessions that capture stacks.
    WithStacks,
    /// Sessions of several functions; not a metric (a count of functions, not of calls).
    Several,
    /// Where the kernel counts it; the text and JSON summaries leave out 0.
    WhereCounted,
    /// Sessions, not spans or `on` points (a point is an entry: no return, no `ret`).
    Sessions,
    /// Spans only: their ledger.
    Spans,
    /// Spans and offcpu items: their map of what is in flight.
    SpansAndOffcpu,
    /// Offcpu items only.
    Offcpu,
    /// Sessions that read `oncpu` and its kin.
    WithSched,
    /// Profiles only.
    Profiles,
}

pub const CALLS: Counter = Counter {
    name: "calls",
    about: "Calls that passed the entry filter and returned (entered, for a session that runs at entry only).",
    source: Source::Bpf {
        counted_in: "return phase, every mode (templates/return_phase.bpf.c.hbs)",
    },
    shown: Shown::Sessions,
};
pub const MATCHED: Counter = Counter {
    name: "matched",
    about: "Calls that passed the whole predicate.",
    source: Source::Bpf {
        counted_in: "return phase, after the return filter",
    },
    shown: Shown::Always,
};
pub const ERRORS: Counter = Counter {
    name: "errors",
    about: "Calls that returned a negative value.",
    source: Source::Bpf {
        counted_in: "return phase, for a signed return value",
    },
    shown: Shown::Sessions,
};
pub const DROPPED: Counter = Counter {
    name: "dropped",
    about: "Events lost because the ring buffer was full.",
    source: Source::Bpf {
        counted_in: "return phase, when reserving the event fails",
    },
    shown: Shown::Always,
};
pub const EVENTS: Counter = Counter {
    name: "events",
    about: "Events decoded and written.",
    source: Source::Events,
    shown: Shown::Always,
};
pub const UNPAIRED: Counter = Counter {
    name: "unpaired",
    about: "fentry mode: entries not recorded because the per-thread map was full.",
    source: Source::Bpf {
        counted_in: "fentry mode's entry and exit (templates/fentry.bpf.c.hbs), and saving entry() values (templates/count_unpaired.bpf.c.hbs)",
    },
    shown: Shown::Sessions,
};
pub const AGG_LOST: Counter = Counter {
    name: "agg_lost",
    about: "Aggregation updates lost because an aggregation map was full.",
    source: Source::Bpf {
        counted_in: "an aggregation's update (codegen/expr.rs, aggregate/percentiles.rs)",
    },
    shown: Shown::WithAggregations,
};
pub const FUNCTIONS: Counter = Counter {
    name: "functions",
    about: "Functions the session traces.",
    source: Source::Functions,
    shown: Shown::Several,
};
pub const STACK_LOST: Counter = Counter {
    name: "stack_lost",
    about: "Stacks not recorded (the stack map was full or the walk failed).",
    source: Source::Bpf {
        counted_in: "kstack and ustack (fslat_kstackid, fslat_ustackid in bpf-runtime/fslat_stacks.bpf.h)",
    },
    shown: Shown::WithStacks,
};
pub const MISSED: Counter = Counter {
    name: "missed",
    about: "Calls the kernel skipped because the session's program was already running on that CPU (any process; Linux 5.12+).",
    source: Source::Missed,
    shown: Shown::WhereCounted,
};
pub const SCHED_LOST: Counter = Counter {
    name: "sched_lost",
    about: "Calls whose thread the scheduler hooks could not follow (the per-thread table was full): their oncpu is their latency.",
    source: Source::Bpf {
        counted_in: "a call's entry or a span's START (templates/sched_enter.bpf.c.hbs, templates/span.bpf.c.hbs)",
    },
    shown: Shown::WithSched,
};

pub const STARTED: Counter = Counter {
    name: "started",
    about: "Spans: STARTs that passed START's filter.",
    source: Source::Bpf {
        counted_in: "a span's START (templates/span.bpf.c.hbs)",
    },
    shown: Shown::Spans,
};
pub const COMPLETED: Counter = Counter {
    name: "completed",
    about: "Spans: ENDs that took their START's entry.",
    source: Source::Bpf {
        counted_in: "a span's END, once it took the entry (templates/span.bpf.c.hbs)",
    },
    shown: Shown::Spans,
};
pub const RESTARTED: Counter = Counter {
    name: "restarted",
    about: "Spans: STARTs for a key already in flight (the later one wins; spans keyed by pid nest instead).",
    source: Source::Bpf {
        counted_in: "a span's START (templates/span.bpf.c.hbs)",
    },
    shown: Shown::Spans,
};
pub const UNMATCHED: Counter = Counter {
    name: "unmatched",
    about: "Spans: ENDs that found no START.",
    source: Source::Bpf {
        counted_in: "a span's END (templates/span.bpf.c.hbs)",
    },
    shown: Shown::Spans,
};
pub const EVICTED: Counter = Counter {
    name: "evicted",
    about: "Spans: STARTs lost because the span's map was full (--max-in-flight), or nested deeper than 16 on one thread. Offcpu: stretches not followed because the map of threads off the CPU was full.",
    source: Source::Bpf {
        counted_in: "a span's START (templates/span.bpf.c.hbs), an offcpu switch out (templates/offcpu.bpf.c.hbs)",
    },
    shown: Shown::SpansAndOffcpu,
};
pub const IN_FLIGHT: Counter = Counter {
    name: "in_flight",
    about: "Spans: STARTs still waiting for their END. Offcpu: threads still off the CPU at the end (their stretch gives no event).",
    source: Source::InFlight,
    shown: Shown::SpansAndOffcpu,
};

pub const STR_UNREAD: Counter = Counter {
    name: "str_unread",
    about: "Strings that could not be read (a user page not in memory, a bad address): shown as <unread>.",
    source: Source::Bpf {
        counted_in: "a string read, str() or a char * field (codegen/expr.rs, bpf-runtime/fslat_str.bpf.h)",
    },
    shown: Shown::WhereCounted,
};

pub const STRETCHES: Counter = Counter {
    name: "stretches",
    about: "Offcpu: stretches off the CPU that passed the filter at the switch out and ended (the thread came back on a CPU).",
    source: Source::Bpf {
        counted_in: "an offcpu switch in (templates/return_phase.bpf.c.hbs)",
    },
    shown: Shown::Offcpu,
};
pub const SAMPLES: Counter = Counter {
    name: "samples",
    about: "Profiles: samples taken on every CPU, before -p, -c, --cgroup and `where`.",
    source: Source::Bpf {
        counted_in: "a profile's program, first (templates/on.bpf.c.hbs)",
    },
    shown: Shown::Profiles,
};
pub const LOST: Counter = Counter {
    name: "lost",
    about: "Profiles: samples the CPU clocks were due to take that never reached the program (the kernel throttled them, or a timer came a period late).",
    source: Source::ProfileLost,
    shown: Shown::Profiles,
};

/// Every counter, in the order the summaries show them.
pub const ALL: [Counter; 21] = [
    CALLS, MATCHED, ERRORS, DROPPED, EVENTS, UNPAIRED, AGG_LOST, FUNCTIONS, STACK_LOST, MISSED,
    SCHED_LOST, STARTED, COMPLETED, RESTARTED, UNMATCHED, EVICTED, IN_FLIGHT, STRETCHES, SAMPLES,
    LOST, STR_UNREAD,
];

impl Counter {
    /// Where this counter is in `ALL` (and in a summary's figures).
    pub fn position(&self) -> usize {
        ALL.iter()
            .position(|c| c.name == self.name)
            .expect("every counter is in ALL")
    }

    /// The C statement that adds one to it through `counters`, a `struct fslat_counters *`.
    pub fn c_increment(&self, counters: &str) -> String {
        format!("__sync_fetch_and_add(&{counters}->{}, 1);", self.name)
    }

    /// Whether the BPF program counts it (a field of `struct fslat_counters`).
    pub fn in_bpf(&self) -> bool {
        matches!(self.source, Source::Bpf { .. })
    }

    /// Exported to Prometheus and OTLP.
    pub fn is_metric(&self) -> bool {
        self.shown != Shown::Several
    }

    /// Its offset in `struct fslat_counters`: one `__u64` each, in `ALL`'s order.
    pub fn offset(&self) -> Option<usize> {
        self.in_bpf()
            .then(|| 8 * in_bpf().position(|c| c.name == self.name).unwrap_or(0))
    }
}

/// The fields of `struct fslat_counters`, in order.
pub fn in_bpf() -> impl Iterator<Item = &'static Counter> {
    ALL.iter().filter(|c| c.in_bpf())
}

/// The size of `struct fslat_counters`.
pub fn struct_size() -> usize {
    8 * in_bpf().count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counter_names_are_distinct_c_identifiers() {
        let mut seen = std::collections::HashSet::new();
        for c in ALL {
            assert!(seen.insert(c.name), "{} twice", c.name);
            assert!(c.name.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'));
        }
    }

    #[test]
    fn bpf_counters_are_consecutive_u64s() {
        let offsets: Vec<usize> = in_bpf().filter_map(|c| c.offset()).collect();
        assert_eq!(
            offsets,
            (0..offsets.len()).map(|i| 8 * i).collect::<Vec<_>>()
        );
        assert_eq!(struct_size(), 8 * 16);
        assert_eq!(EVENTS.offset(), None);
        assert_eq!(UNPAIRED.offset(), Some(32));
    }
}
