use crate::btf::Fixture;
use crate::codegen::Mode;

fn c_of(script: &str, mode: Mode) -> String {
    match crate::compile(script, &Fixture::new(), mode) {
        Ok((_, c)) => c,
        Err(d) => panic!("{script}: {d:?}"),
    }
}

#[test]
fn slow_read_script_renders_one_fsession_program() {
    let c = c_of(
        "session vfs_read where tgid == 1234 and latency > 10ms { emit }",
        Mode::Fsession,
    );
    assert_eq!(c.matches("SEC(\"fsession/vfs_read\")").count(), 1);
    // The TGID test runs at entry; the latency test at return, after the counters.
    let entry = c.find("FSLAT_SESSION_IS_RETURN").expect("entry branch");
    let tgid = c.find("== (__u64)(1234ULL)").expect("tgid filter");
    let calls = c.find("fslat_c->calls").expect("calls counter");
    let latency = c.find("> (__u64)(10000000ULL)").expect("latency filter");
    assert!(entry < tgid && tgid < calls && calls < latency, "{c}");
}

/// A user-space session in each of its modes: the program's shape, and clang accepts it.
/// The file is tests/kernel/user's program, built here with DWARF: `greet(const char *name)`.
#[test]
fn user_sessions_render_and_compile_in_each_mode() {
    let dir = crate::elf::test_programs();
    let script = format!(
        "session {}:greet where ret > 1 {{ emit name, str(arg0, 4) as s, ret, latency, ustack; count() by func }}",
        dir.path().join("ufunc").display()
    );
    let clang = crate::build::find_clang(None).expect("clang");
    let compiler = crate::build::Compiler::new(clang, false).unwrap();
    for (mode, sections) in [
        (Mode::UprobeSession, &["SEC(\"uprobe.session\")"][..]),
        (
            Mode::UprobeMulti,
            &["SEC(\"uprobe.multi\")", "SEC(\"uretprobe.multi\")"][..],
        ),
        (Mode::Uprobe, &["SEC(\"uprobe\")", "SEC(\"uretprobe\")"][..]),
    ] {
        let opts = crate::check::Options {
            user_mode: Some(mode),
            ..Default::default()
        };
        let (program, c) = match crate::compile_with(&script, &Fixture::new(), Mode::Fsession, opts)
        {
            Ok(p) => p,
            Err(d) => panic!("{mode:?}: {d:?}"),
        };
        let user = program.sessions[0].user.as_ref().expect("a user session");
        assert_eq!(user.mode, mode);
        for s in sections {
            assert_eq!(c.matches(s).count(), 1, "{mode:?} {s}\n{c}");
        }
        // The arguments come from the registers at entry, saved for the return.
        assert!(c.contains("((struct fslat_regs *)ctx)->di"), "{c}");
        assert!(!c.contains("bpf_get_func_arg"), "{c}");
        if let Err(e) = compiler.compile(&c) {
            panic!("{mode:?}: {e}\n{c}");
        }
    }
}

/// A user-space session whose actions read a user string runs sleepable where the kernel
/// has sleepable uprobes, in each user mode; not without the feature, not when the string
/// lands in the per-CPU scratch map (a `where` comparison) or the session takes stacks.
#[test]
fn user_sessions_that_read_strings_sleep_where_they_safely_can() {
    use crate::btf::Features;
    let dir = crate::elf::test_programs();
    let file = dir.path().join("ufunc");
    let without = Features {
        sleepable_uprobe: false,
        ..Features::all()
    };
    let clang = crate::build::find_clang(None).expect("clang");
    let compiler = crate::build::Compiler::new(clang, false).unwrap();
    for (body, features, sleeps) in [
        ("{ emit str(arg0) as s }", Features::all(), true),
        ("{ emit name }", Features::all(), true),
        ("{ emit str(arg0) as s }", without, false),
        (
            "where str(arg0) == \"x\" { count() }",
            Features::all(),
            false,
        ),
        ("{ emit str(arg0) as s, ustack }", Features::all(), false),
        ("{ emit ret }", Features::all(), false),
    ] {
        let script = format!("session {}:greet {body}", file.display());
        for (mode, sections) in [
            (Mode::UprobeSession, &["uprobe.session"][..]),
            (Mode::UprobeMulti, &["uprobe.multi", "uretprobe.multi"][..]),
            (Mode::Uprobe, &["uprobe", "uretprobe"][..]),
        ] {
            let opts = crate::check::Options {
                user_mode: Some(mode),
                ..Default::default()
            };
            let kernel = Fixture::with_features(features);
            let (_, c) = crate::compile_with(&script, &kernel, Mode::Fsession, opts)
                .unwrap_or_else(|d| panic!("{body} {mode:?}: {d:?}"));
            let suffix = if sleeps { ".s" } else { "" };
            for s in sections {
                let sec = format!("SEC(\"{s}{suffix}\")");
                assert_eq!(c.matches(&sec).count(), 1, "{body} {mode:?} {sec}\n{c}");
            }
            let defined = c.contains("#define FSLAT_SLEEPABLE 1");
            assert_eq!(defined, sleeps, "{body} {mode:?}\n{c}");
            if sleeps && let Err(e) = compiler.compile(&c) {
                panic!("{body} {mode:?}: {e}\n{c}");
            }
        }
    }
}

/// Each uprobe program (a user function's at entry or return, a USDT point's, a span's
/// START or END there) runs its body with preemption off on a kernel with per-CPU
/// program stacks (6.13+: `uprobe_session`), one `bpf_preempt_disable()` each; a
/// sleepable one and a kernel-side one never do, nor any program on an older kernel, which
/// may lack the kfuncs. `{U}` is tests/kernel/user's ufunc, `{S}` its sdt.
#[test]
fn uprobe_programs_run_with_preemption_off_where_their_stack_is_per_cpu() {
    use crate::btf::Features;
    use Mode::{UprobeMulti, UprobeSession};
    let dir = crate::elf::test_programs();
    let older = Features {
        uprobe_session: false,
        ..Features::all()
    };
    let clang = crate::build::find_clang(None).expect("clang");
    let compiler = crate::build::Compiler::new(clang, false).unwrap();
    for (script, user_mode, guarded) in [
        ("on {U}:add { count() by arg0 }", None, 1),
        ("on usdt:{S}:fslat:name { count() by arg1 }", None, 1),
        ("on {U}:greet { emit str(arg0) as s }", None, 0),
        (
            "span usdt:{S}:fslat:enter(pid) -> usdt:{S}:fslat:leave(pid) { count() }",
            None,
            2,
        ),
        (
            "span usdt:{S}:fslat:enter(pid) -> vfs_read(pid) { count() }",
            None,
            1,
        ),
        (
            "span vfs_write(pid) -> usdt:{S}:fslat:leave(pid) { hist(latency) }",
            None,
            1,
        ),
        ("span vfs_write(pid) -> vfs_read(pid) { count() }", None, 0),
        (
            "session {U}:add { hist(latency) by arg0 }",
            Some(Mode::Uprobe),
            2,
        ),
        (
            "session {U}:add { hist(latency) by arg0 }",
            Some(UprobeMulti),
            2,
        ),
        (
            "session {U}:add { hist(latency) by arg0 }",
            Some(UprobeSession),
            1,
        ),
        (
            "session {U}:greet { emit str(arg0) as s }",
            Some(UprobeSession),
            0,
        ),
        ("on vfs_read { count() }", None, 0),
        ("profile 99hz { count() by ustack }", None, 0),
    ] {
        let script = script
            .replace("{U}", &dir.path().join("ufunc").display().to_string())
            .replace("{S}", &dir.path().join("sdt").display().to_string());
        for (features, want) in [(Features::all(), guarded), (older, 0)] {
            if user_mode == Some(UprobeSession) && !features.uprobe_session {
                continue;
            }
            let opts = crate::check::Options {
                user_mode,
                ..Default::default()
            };
            let kernel = Fixture::with_features(features);
            let (_, c) = crate::compile_with(&script, &kernel, Mode::Fsession, opts)
                .unwrap_or_else(|d| panic!("{script}: {d:?}"));
            let calls = c.matches("\tbpf_preempt_disable();").count();
            assert_eq!(calls, want, "{script} {user_mode:?} {features:?}\n{c}");
            if want > 0
                && let Err(e) = compiler.compile(&c)
            {
                panic!("{script} {user_mode:?}: {e}\n{c}");
            }
        }
    }
}

#[test]
fn compiles_with_clang() {
    let clang = crate::build::find_clang(None).expect("clang");
    let compiler = crate::build::Compiler::new(clang, false).unwrap();
    for mode in [Mode::Fsession, Mode::Fentry] {
        let c = c_of(
            "session vfs_read where tgid == 1234 and comm == \"py\" and latency > 10ms { emit comm, file->f_path.dentry->d_name.name as name, file->f_path.dentry->d_iname as iname, ret, latency; count() by comm; hist(latency) }",
            mode,
        );
        if let Err(e) = compiler.compile(&c) {
            panic!("{e}\n{c}");
        }
    }
}

#[test]
fn a_several_function_session_is_one_multi_attach_program_that_compiles() {
    let script = "session vfs_read, vfs_write, do_sys_openat2, kfree where func != \"kfree\" { emit func, latency; count() by func }\nsession vfs_read, vfs_write where count > 1 { emit count }\nsession vfs_read";
    let c = c_of(script, Mode::FsessionMulti);
    assert_eq!(c.matches("SEC(\"fslat.multi\")").count(), 2, "{c}");
    assert_eq!(c.matches("SEC(\"fsession/vfs_read\")").count(), 1, "{c}");
    assert!(c.contains("static const char fslat_funcs_0[4][15] __attribute__((section(\".rodata\"))) = { \"vfs_read\", \"vfs_write\", \"do_sys_openat2\", \"kfree\" };"), "{c}");
    // Return types differ (ssize_t, long, void): whether a call failed is per function.
    assert!(
        c.contains("static const __u8 fslat_retkind_0[4] __attribute__((section(\".rodata\"))) = { 8, 8, 8, 0 };"),
        "{c}"
    );
    assert!(
        c.contains("bpf_get_func_arg(ctx, 2, &fslat_arg1_raw)"),
        "{c}"
    );
    let clang = crate::build::find_clang(None).expect("clang");
    let compiler = crate::build::Compiler::new(clang, false).unwrap();
    if let Err(e) = compiler.compile(&c) {
        panic!("{e}\n{c}");
    }
}

#[test]
fn a_cgroup_name_key_is_the_cgroup_id_in_the_kernel() {
    // `by unit` is named in user space: its C is `by cgroup`'s but for the title comment.
    let code = |key: &str| {
        c_of(
            &format!("session vfs_read {{ count() by {key} }}"),
            Mode::Fsession,
        )
        .replace(&format!("// count() by {key}"), "")
    };
    assert_eq!(code("unit"), code("cgroup"));
    assert_eq!(code("pod"), code("cgroup"));
}

/// Aggregations without keys that start from zeros live in a one-slot per-CPU array (no
/// insert); `min`, `max`, `percentiles` and keyed ones stay in hash maps.
#[test]
fn keyless_zero_start_aggregations_are_per_cpu_arrays() {
    let c = c_of(
        "session vfs_read { count(); sum(count); avg(count); stats(count); hist(count); lhist(count, 0, 10, 1); min(count); max(count); percentiles(count); count() by comm }",
        Mode::Fsession,
    );
    let map_type = |id: usize| {
        let end = c
            .find(&format!("}} fslat_agg_{id} SEC(\".maps\")"))
            .unwrap_or_else(|| panic!("map {id}: {c}"));
        let start = c[..end].rfind("__uint(type, ").expect("map type");
        c[start..end].lines().next().unwrap().to_string()
    };
    for id in 0..6 {
        assert!(
            map_type(id).contains("PERCPU_ARRAY"),
            "{id}: {}",
            map_type(id)
        );
    }
    for id in 6..10 {
        assert!(
            map_type(id).contains("BPF_MAP_TYPE_HASH"),
            "{id}: {}",
            map_type(id)
        );
    }
    // The per-CPU ones are never inserted into.
    for id in 0..6 {
        assert!(
            !c.contains(&format!("bpf_map_update_elem(&fslat_agg_{id},")),
            "{id}"
        );
    }
}

/// kprobe-session mode: one `kprobe.session` program per session, for one function or
/// several (the link's cookie picks the function); parameters from the argument
/// registers at entry, those the return reads saved on the task's stack of calls in flight
/// under the call's cookie address (no hash map), `ret` from the return register, and no
/// trampoline helper. clang accepts it.
#[test]
fn kprobe_sessions_read_registers_and_compile() {
    let script = "session vfs_read where count > 0 { emit count, ret, latency; count() by count }\nsession vfs_read, vfs_write where func != \"vfs_write\" { emit func, ret; count() by func }\nsession vfs_read { count() }";
    let c = c_of(script, Mode::KprobeSession);
    assert_eq!(c.matches("SEC(\"kprobe.session\")").count(), 1, "{c}");
    // `count()` needs neither end: one kprobe_multi program at entry; the second session
    // reads nothing of the entry but `ret`: one kretprobe_multi program at return.
    assert_eq!(c.matches("SEC(\"kprobe.multi\")").count(), 1, "{c}");
    assert_eq!(c.matches("SEC(\"kretprobe.multi\")").count(), 1, "{c}");
    // `count` is the third argument: rdx, read at entry only.
    assert_eq!(
        c.matches("__u64 fslat_arg2 = (__u64)((struct fslat_regs *)ctx)->dx;")
            .count(),
        1,
        "{c}"
    );
    assert!(
        c.contains("fslat_enter(&fslat_calls_0, fslat_cookie,"),
        "{c}"
    );
    assert!(
        c.contains("fslat_leave(&fslat_calls_0, fslat_cookie,"),
        "{c}"
    );
    assert!(!c.contains("fslat_entry_0"), "{c}");
    assert!(c.contains("((__u64)fslat_ev[0])"), "{c}");
    assert!(c.contains("(__s64)((struct fslat_regs *)ctx)->ax"), "{c}");
    assert!(
        !c.contains("bpf_get_func_arg") && !c.contains("bpf_get_func_ret"),
        "{c}"
    );
    assert!(!c.contains("ctx["), "{c}");
    // Sessions that need nothing from the entry stay kprobes (an fexit trampoline would
    // skip calls).
    assert!(!c.contains("SEC(\"fexit"), "{c}");
    let clang = crate::build::find_clang(None).expect("clang");
    let compiler = crate::build::Compiler::new(clang, false).unwrap();
    if let Err(e) = compiler.compile(&c) {
        panic!("{e}\n{c}");
    }
}

/// kprobe-session mode, a session that needs neither the return nor the entry time
/// (`count()`, `sum(count) by comm`): one `kprobe.multi` program at entry for all its
/// functions, parameters from their registers there, no session cookie, no call stack,
/// and no `errors` (the return value is not known at entry). A session that reads `ret`,
/// a field through a pointer or `latency`, or one run with `-v` (`counts_errors`), stays
/// a session. clang accepts it.
#[test]
fn kprobe_entry_only_where_nothing_needs_the_return() {
    let mode = Mode::KprobeSession;
    let entry_only = [
        "session vfs_read { count() }",
        "session vfs_read where comm == \"x\" { sum(count) by comm }",
        "session vfs_read, vfs_write { count() by func, comm }",
        "session vfs_read { emit comm, count }",
    ];
    for script in entry_only {
        let c = c_of(script, mode);
        assert_eq!(
            c.matches("SEC(\"kprobe.multi\")").count(),
            1,
            "{script}\n{c}"
        );
        assert!(!c.contains("kprobe.session"), "{script}\n{c}");
        assert!(!c.contains("fslat_cookie"), "{script}\n{c}");
        assert!(!c.contains("->errors"), "{script}\n{c}");
        assert!(!c.contains("fslat_enter("), "{script}\n{c}");
        let program = crate::compile(script, &Fixture::new(), mode).unwrap().0;
        assert_eq!(mode.of_session(&program.sessions[0]), Mode::KprobeEntry);
        assert_eq!(mode.of_session(&program.sessions[0]).name(), "kprobe");
    }
    let c = c_of(entry_only[1], mode);
    assert!(
        c.contains("__u64 fslat_arg2 = (__u64)((struct fslat_regs *)ctx)->dx;"),
        "{c}"
    );
    let sessions = [
        "session vfs_read where count > 0 { count() by ret }",
        "session vfs_read { count() by comm; hist(latency) }",
        "session vfs_read { sum(file->f_pos) }",
    ];
    for script in sessions {
        let c = c_of(script, mode);
        assert_eq!(
            c.matches("SEC(\"kprobe.session\")").count(),
            1,
            "{script}\n{c}"
        );
        assert!(!c.contains("kprobe.multi"), "{script}\n{c}");
    }
    let opts = crate::check::Options {
        count_errors: true,
        ..Default::default()
    };
    let (program, c) = crate::compile_with(entry_only[0], &Fixture::new(), mode, opts).unwrap();
    // `-v` needs the return for `errors` alone: a kretprobe (nothing needs the entry).
    assert_eq!(mode.of_session(&program.sessions[0]), Mode::KprobeReturn);
    assert!(c.contains("->errors"), "{c}");
    // The same sessions elsewhere are untouched: fexit on the trampolines.
    let program = crate::compile(entry_only[0], &Fixture::new(), Mode::Fentry)
        .unwrap()
        .0;
    assert_eq!(Mode::Fentry.of_session(&program.sessions[0]), Mode::Fexit);
    let clang = crate::build::find_clang(None).expect("clang");
    let compiler = crate::build::Compiler::new(clang, false).unwrap();
    let all = entry_only.join("\n");
    let c = c_of(&all, mode);
    if let Err(e) = compiler.compile(&c) {
        panic!("{e}\n{c}");
    }
}

/// kprobe-session mode, a session that needs the return but nothing of the entry (no
/// parameter, no entry time, no `entry()`): one `kretprobe.multi` program at return for
/// all its functions, `ret` from its register, `errors` counted, no session cookie and
/// no call stack. One that reads a parameter stays a session (a kretprobe has only the
/// return register). clang accepts it.
#[test]
fn kretprobe_where_nothing_needs_the_entry() {
    let mode = Mode::KprobeSession;
    let return_only = [
        "session vfs_read where ret < 0 { count() }",
        "session vfs_read, vfs_write where comm == \"x\" { count() by func, ret }",
        "session vfs_read { count() by kstack }",
    ];
    for script in return_only {
        let c = c_of(script, mode);
        assert_eq!(
            c.matches("SEC(\"kretprobe.multi\")").count(),
            1,
            "{script}\n{c}"
        );
        assert!(!c.contains("kprobe.session"), "{script}\n{c}");
        assert!(!c.contains("fslat_cookie"), "{script}\n{c}");
        assert!(!c.contains("fslat_enter("), "{script}\n{c}");
        assert!(c.contains("->errors"), "{script}\n{c}");
        assert!(
            c.contains("((struct fslat_regs *)ctx)->ax"),
            "{script}\n{c}"
        );
        let program = crate::compile(script, &Fixture::new(), mode).unwrap().0;
        assert_eq!(mode.of_session(&program.sessions[0]), Mode::KprobeReturn);
        assert_eq!(mode.of_session(&program.sessions[0]).name(), "kretprobe");
    }
    for script in [
        "session vfs_read where count > 0 { count() by ret }",
        "session vfs_read where ret < 0 { hist(latency) }",
    ] {
        let program = crate::compile(script, &Fixture::new(), mode).unwrap().0;
        assert_eq!(mode.of_session(&program.sessions[0]), Mode::KprobeSession);
    }
    // Elsewhere the same sessions run on an fexit trampoline.
    let program = crate::compile(return_only[0], &Fixture::new(), Mode::Fentry)
        .unwrap()
        .0;
    assert_eq!(Mode::Fentry.of_session(&program.sessions[0]), Mode::Fexit);
    let clang = crate::build::find_clang(None).expect("clang");
    let compiler = crate::build::Compiler::new(clang, false).unwrap();
    let c = c_of(&return_only.join("\n"), mode);
    if let Err(e) = compiler.compile(&c) {
        panic!("{e}\n{c}");
    }
}

/// Templates are compiled when a program first needs them: every partial a template
/// includes is one of fslat's, found by name in its text.
#[test]
fn every_partial_a_template_includes_is_a_known_template() {
    let names: Vec<&str> = super::templates::TEMPLATE_TEXTS
        .iter()
        .map(|(n, _)| *n)
        .collect();
    let mut included = 0;
    for (name, text) in super::templates::TEMPLATE_TEXTS {
        for partial in super::templates::partials_of(text) {
            assert!(
                names.contains(&partial),
                "{name} includes unknown {partial}"
            );
            included += 1;
        }
    }
    assert!(
        included >= 20,
        "partials_of found only {included} inclusions"
    );
    assert_eq!(
        super::templates::partials_of("a {{> entry_filter reject=\"\"}} b {{>return_phase}}")
            .collect::<Vec<_>>(),
        ["entry_filter", "return_phase"]
    );
}

/// An enum member is declared as an enum (CO-RE refuses an integer for a kernel enum),
/// and clang gives it the member's BTF size and sign: one row per size and sign.
#[test]
fn enum_members_keep_their_size_and_sign() {
    use crate::check::program::{MemberDecl, MemberType};
    let clang = crate::build::find_clang(None).expect("clang");
    let compiler = crate::build::Compiler::new(clang, false).unwrap();
    let mut c = String::from("typedef unsigned int __u32;\n");
    for (i, (size, signed)) in [
        (1, false),
        (1, true),
        (2, false),
        (2, true),
        (4, false),
        (4, true),
        (8, false),
        (8, true),
    ]
    .into_iter()
    .enumerate()
    {
        let m = MemberDecl {
            name: "reason".into(),
            ty: MemberType::Enum { size, signed },
        };
        let decl = super::ctypes::member_decl(&m, &format!("fslat_enum_{i}_reason"));
        assert!(decl.starts_with("enum"), "{decl}");
        c.push_str(&format!(
            "struct t{i} {{ {decl}; }};\n\
             _Static_assert(sizeof(((struct t{i} *)0)->reason) == {size}, \"size {i}\");\n\
             _Static_assert((((__typeof__(((struct t{i} *)0)->reason))-1) < 0) == {}, \"sign {i}\");\n",
            signed as u8
        ));
    }
    c.push_str("__u32 fslat_enum_test_used;\n");
    if let Err(e) = compiler.compile(&c) {
        panic!("{e}\n{c}");
    }
}
