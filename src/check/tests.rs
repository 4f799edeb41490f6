use super::program::*;
use crate::btf::Fixture;

fn session(script: &str) -> Session {
    let ast = crate::syntax::parse(script).expect("parses");
    let mut p = super::check(&ast, script, &Fixture::new()).expect("checks");
    p.sessions.remove(0)
}

fn event_names(s: &Session) -> Vec<&str> {
    let event = s.events.first().expect("emits");
    event.fields.iter().map(|f| f.name.as_str()).collect()
}

#[test]
fn default_emit_has_comm_tgid_pid_scalar_params_ret_latency() {
    let s = session("session vfs_read");
    assert_eq!(
        event_names(&s),
        ["comm", "tgid", "pid", "count", "ret", "latency"]
    );
    let s = session("session kfree");
    assert_eq!(
        event_names(&s),
        ["comm", "tgid", "pid", "latency"],
        "void: no ret"
    );
}

#[test]
fn event_layout_follows_c_alignment() {
    let s = session("session vfs_read { emit comm, tgid, count, latency }");
    let e = s.events.into_iter().next().expect("emits");
    let offsets: Vec<u32> = e.fields.iter().map(|f| f.offset).collect();
    assert_eq!(offsets, [4, 20, 24, 32]);
    assert_eq!(e.size, 40);
}

#[test]
fn several_sessions_on_one_function_get_numbered_labels() {
    let script = "session vfs_read\nsession vfs_write\nsession vfs_read";
    let ast = crate::syntax::parse(script).expect("parses");
    let p = super::check(&ast, script, &Fixture::new()).expect("checks");
    let labels: Vec<&str> = p.sessions.iter().map(|s| s.label.as_str()).collect();
    assert_eq!(labels, ["vfs_read#1", "vfs_write", "vfs_read#2"]);
}

#[test]
fn a_list_gets_one_target_per_function_with_each_parameters_slot() {
    let s = session("session vfs_read, vfs_write, vfs_read { emit func, count, ret }");
    assert!(s.several);
    assert_eq!(s.label, "vfs_read,vfs_write,vfs_read");
    let funcs: Vec<&str> = s.targets.iter().map(|t| t.func.as_str()).collect();
    assert_eq!(
        funcs,
        ["vfs_read", "vfs_write"],
        "each function once, in list order"
    );
    assert_eq!(event_names(&s), ["func", "count", "ret"]);
    let count = s
        .params
        .iter()
        .position(|p| p.name == "count")
        .expect("count is shared");
    assert!(
        s.targets
            .iter()
            .all(|t| t.slots[count] == 2 && t.ret_slot == 4)
    );
}

#[test]
fn func_is_a_string_as_long_as_the_longest_name() {
    let s = session("session vfs_read, do_sys_openat2 { count() by func }");
    let key = &s.aggregations[0].keys[0];
    assert_eq!(key.kind, FieldKind::Str { cap: 15 });
    let one = session("session vfs_read { emit func }");
    assert_eq!(event_names(&one), ["func"]);
    assert!(!one.several);
}

#[test]
fn positional_arguments_are_literals_typed_by_how_they_are_written() {
    let script = "session vfs_read where tgid == $1 and latency > $2 and comm == $3 and $# == 3";
    let ast = crate::syntax::parse(script).expect("parses");
    let opts = super::Options {
        args: vec!["1234".into(), "10ms".into(), "bash".into()],
        ..Default::default()
    };
    let p = super::check_with(&ast, script, &Fixture::new(), opts).expect("checks");
    let s = &p.sessions[0];
    let mut literals = Vec::new();
    for f in [&s.entry_filter, &s.return_filter].into_iter().flatten() {
        f.visit(&mut |e| match &e.kind {
            ExprKind::Int(n) => literals.push(format!("{n}:{}", e.ty.describe())),
            ExprKind::Str(b) => literals.push(String::from_utf8_lossy(b).into_owned()),
            _ => {}
        });
    }
    literals.sort();
    assert_eq!(
        literals,
        ["10000000:a duration", "1234:an integer (u64)", "bash"],
        "{s:?}"
    );
}

/// The integer constants of a session's return-phase filter.
fn return_literals(s: &Session) -> Vec<i128> {
    let mut literals = Vec::new();
    s.return_filter
        .as_ref()
        .expect("a filter at return")
        .visit(&mut |e| {
            if let ExprKind::Int(n) = e.kind {
                literals.push(n);
            }
        });
    literals
}

#[test]
fn minus_folds_a_constant_as_c_computes_it_on_64_bits() {
    for (expr, want) in [
        ("-(~0)", 1),
        ("-(~1081)", 1082),
        ("-18446744073709551615", 1),
        ("-(9223372036854775808)", i128::from(i64::MIN)),
        ("-5", -5),
        ("-(-5)", 5),
    ] {
        // `ret` (ssize_t) is signed, so it may be compared with a negative constant.
        let s = session(&format!("session vfs_read where ret == {expr}"));
        assert_eq!(return_literals(&s), [want], "{expr}");
    }
}

#[test]
fn arithmetic_on_constants_wraps_past_64_bits_as_c_computes_it() {
    for (expr, want) in [
        ("18446744073709551615 + 2", 1),
        ("0 - 18446744073709551615", 1),
        ("18446744073709551615 * 18446744073709551615", 1),
        ("4294967296 * 4294967296", 0),
        ("25 * ~2627", i128::from(25u64.wrapping_mul(!2627u64))),
        ("3 << 63", 1 << 63),
        ("1 - 5", -4),
        ("-5 * 2", -10),
    ] {
        let s = session(&format!("session vfs_read where ret == {expr}"));
        assert_eq!(return_literals(&s), [want], "{expr}");
    }
}

/// The fixture with N more tracepoints named `many_NNN`, each with `sched_wakeup`'s
/// prototype, and no tracefs: a kernel for the bounds of `on tp:GLOB`.
struct ManyTracepoints(Fixture, usize);

impl crate::btf::KernelTypes for ManyTracepoints {
    fn function(&self, name: &str) -> Option<crate::btf::FuncSig> {
        self.0.function(name)
    }
    fn function_names(&self) -> Vec<String> {
        self.0.function_names()
    }
    fn tracepoint(&self, name: &str) -> Option<crate::btf::FuncSig> {
        let mut sig = self.0.tracepoint("sched_wakeup")?;
        sig.name = name.strip_prefix("many_").map(|_| name.to_string())?;
        Some(sig)
    }
    fn tracepoint_names(&self) -> Vec<String> {
        (0..self.1).map(|i| format!("many_{i:03}")).collect()
    }
    fn resolve(&self, ty: crate::btf::TypeId) -> crate::btf::KType {
        self.0.resolve(ty)
    }
    fn type_name(&self, ty: crate::btf::TypeId) -> String {
        self.0.type_name(ty)
    }
    fn field(&self, ty: crate::btf::TypeId, name: &str) -> Option<crate::btf::Field> {
        self.0.field(ty, name)
    }
    fn field_names(&self, ty: crate::btf::TypeId) -> Vec<String> {
        self.0.field_names(ty)
    }
    fn has_fsession(&self) -> bool {
        true
    }
}

fn codes_with(script: &str, kernel: &dyn crate::btf::KernelTypes) -> Vec<&'static str> {
    let ast = crate::syntax::parse(script).expect("parses");
    match super::check(&ast, script, kernel) {
        Ok(_) => Vec::new(),
        Err(diags) => diags.iter().map(|d| d.kind.code()).collect(),
    }
}

#[test]
fn an_on_glob_takes_up_to_the_most_tracepoints_and_refuses_one_more() {
    let max = super::tracepoints::MAX_ON_TRACEPOINTS;
    let script = "on tp:many_* { count() by probe }";
    assert_eq!(
        codes_with(script, &ManyTracepoints(Fixture::new(), max)),
        [""; 0]
    );
    assert_eq!(
        codes_with(script, &ManyTracepoints(Fixture::new(), max + 1)),
        ["F0824"]
    );
}

#[test]
fn a_tracepoint_category_without_tracefs_is_refused_and_a_plain_glob_is_not() {
    let kernel = ManyTracepoints(Fixture::new(), 3);
    assert_eq!(
        codes_with("on tp:many:many_* { count() }", &kernel),
        ["F0825"]
    );
    assert_eq!(codes_with("on tp:many_* { count() }", &kernel), [""; 0]);
}

#[test]
fn an_on_of_several_tracepoints_has_one_target_each_with_its_arguments() {
    let s = session("on tp:sched:sched_wakeup*, tp:sched_wakeup { emit probe, p->pid }");
    let names: Vec<&str> = s.targets.iter().map(|t| t.func.as_str()).collect();
    assert_eq!(names, ["sched_wakeup", "sched_wakeup_new"], "each once");
    assert!(s.targets.iter().all(|t| t.args == 1));
    assert!(s.several);
}
