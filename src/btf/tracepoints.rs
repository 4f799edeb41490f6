//! The argument names of common tracepoints, from the kernel sources' `TP_PROTO`, for
//! kernels whose BTF does not name them: a `btf_trace_NAME` prototype has no names, and
//! Linux 5.10's BTF has none of the event-class functions that do (`__bpf_trace_*` are
//! `notrace`, and its pahole encoded only functions ftrace can attach to). A kernel's own
//! names always come first; these are used only where its BTF has none, and only for the
//! number of arguments the kernel's prototype has (prototypes changed between versions:
//! `block_rq_issue` lost its `q` in 5.11, `sched_switch` gained `prev_state` in 5.18).

/// Tracepoint, then each prototype it has had (argument names in order).
const TABLE: &[(&str, &[&[&str]])] = &[
    ("sched_wakeup", &[&["p"]]),
    ("sched_wakeup_new", &[&["p"]]),
    ("sched_waking", &[&["p"]]),
    (
        "sched_switch",
        &[
            &["preempt", "prev", "next"],
            &["preempt", "prev", "next", "prev_state"],
        ],
    ),
    ("sched_migrate_task", &[&["p", "dest_cpu"]]),
    ("sched_process_free", &[&["p"]]),
    ("sched_process_exit", &[&["p"], &["p", "group_dead"]]),
    ("sched_wait_task", &[&["p"]]),
    ("sched_process_fork", &[&["parent", "child"]]),
    ("sched_process_exec", &[&["p", "old_pid", "bprm"]]),
    ("sched_process_hang", &[&["p"]]),
    ("sched_stat_wait", &[&["tsk", "delay"]]),
    ("sched_stat_sleep", &[&["tsk", "delay"]]),
    ("sched_stat_iowait", &[&["tsk", "delay"]]),
    ("sched_stat_blocked", &[&["tsk", "delay"]]),
    (
        "sched_stat_runtime",
        &[&["tsk", "runtime"], &["tsk", "runtime", "vruntime"]],
    ),
    ("task_newtask", &[&["task", "clone_flags"]]),
    ("task_rename", &[&["task", "comm"]]),
    ("block_rq_issue", &[&["rq"], &["q", "rq"]]),
    ("block_rq_insert", &[&["rq"], &["q", "rq"]]),
    ("block_rq_merge", &[&["rq"], &["q", "rq"]]),
    ("block_rq_requeue", &[&["rq"], &["q", "rq"]]),
    ("block_rq_complete", &[&["rq", "error", "nr_bytes"]]),
    ("block_rq_error", &[&["rq", "error", "nr_bytes"]]),
    ("block_bio_queue", &[&["bio"], &["q", "bio"]]),
    ("block_bio_complete", &[&["q", "bio"]]),
    ("sys_enter", &[&["regs", "id"]]),
    ("sys_exit", &[&["regs", "ret"]]),
    ("irq_handler_entry", &[&["irq", "action"]]),
    ("irq_handler_exit", &[&["irq", "action", "ret"]]),
    ("softirq_entry", &[&["vec_nr"]]),
    ("softirq_exit", &[&["vec_nr"]]),
    ("softirq_raise", &[&["vec_nr"]]),
    ("tcp_retransmit_skb", &[&["sk", "skb"]]),
    ("tcp_probe", &[&["sk", "skb"]]),
    ("tcp_rcv_space_adjust", &[&["sk"]]),
    ("inet_sock_set_state", &[&["sk", "oldstate", "newstate"]]),
    ("cpu_frequency", &[&["frequency", "cpu_id"]]),
];

/// Arguments a tracepoint gained in a later kernel, read on older ones from the struct
/// they copy: tracepoint, argument, the parameter it comes from, and that struct's fields
/// (the first the kernel has). `sched_switch`'s `prev_state` (Linux 5.18) is
/// `prev->__state` (5.14), before that `prev->state`: the same raw value.
const DERIVED: &[(&str, &str, &str, &[&str])] =
    &[("sched_switch", "prev_state", "prev", &["__state", "state"])];

/// Where tracepoint `name`'s argument `arg` comes from on a kernel whose prototype lacks it.
pub fn derived(name: &str, arg: &str) -> Option<(&'static str, &'static [&'static str])> {
    DERIVED
        .iter()
        .find(|(n, a, _, _)| *n == name && *a == arg)
        .map(|(_, _, param, fields)| (*param, *fields))
}

/// The argument names of tracepoint `name` with `args` arguments, if the table has them.
pub fn arg_names(name: &str, args: usize) -> Option<Vec<String>> {
    TABLE
        .iter()
        .filter(|(n, _)| *n == name)
        .flat_map(|(_, protos)| protos.iter())
        .find(|p| p.len() == args)
        .map(|p| p.iter().map(|s| s.to_string()).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_kernels_prototype_by_its_length() {
        assert_eq!(arg_names("block_rq_issue", 2).unwrap(), ["q", "rq"]);
        assert_eq!(arg_names("block_rq_issue", 1).unwrap(), ["rq"]);
        assert_eq!(
            arg_names("sched_switch", 3).unwrap(),
            ["preempt", "prev", "next"]
        );
        assert_eq!(arg_names("sched_switch", 5), None);
        assert_eq!(arg_names("no_such_tracepoint", 1), None);
    }
}
