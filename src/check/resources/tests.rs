use super::*;

#[test]
fn the_empty_stack_id_is_the_one_the_bpf_side_gives() {
    let header = include_str!("../../../bpf-runtime/fslat_stacks.bpf.h");
    assert!(header.contains(&format!("#define FSLAT_EMPTY_STACK {EMPTY_STACK}\n")));
}

#[test]
fn the_stack_maps_size_is_the_one_the_bpf_side_gives() {
    let header = include_str!("../../../bpf-runtime/fslat_stacks.bpf.h");
    assert!(header.contains(&format!("#define FSLAT_STACK_ENTRIES {STACK_ENTRIES}\n")));
}

#[test]
fn programs_are_found_by_the_names_codegen_gives_them() {
    let script = "session vfs_read\nsession vfs_read, vfs_write";
    let ast = crate::syntax::parse(script).expect("parses");
    let p = crate::check::check(&ast, script, &crate::btf::Fixture::new()).expect("checks");
    let (one, several) = (&p.sessions[0], &p.sessions[1]);
    let cases = [
        (
            one.prog_name(ProgRole::Session, 0),
            "fslat_session_0",
            ProgRole::Session,
            0,
            0,
        ),
        (
            one.prog_name(ProgRole::Exit, 0),
            "fslat_exit_0",
            ProgRole::Exit,
            0,
            0,
        ),
        (
            several.prog_name(ProgRole::Entry, 1),
            "fslat_entry_1_1",
            ProgRole::Entry,
            1,
            1,
        ),
        (
            several.prog_name(ProgRole::Multi, 0),
            "fslat_multi_1",
            ProgRole::Multi,
            1,
            0,
        ),
    ];
    let progs = p.progs();
    for (name, expected, role, session, target) in cases {
        assert_eq!(name, expected);
        let prog = Prog {
            role,
            session,
            target,
        };
        assert_eq!(progs.get(&name), Some(&prog), "{name}");
    }
    assert_eq!(progs.get("fslat_session_2"), None);
    assert_eq!(progs.get("fslat_session_1"), None, "one of several has _T");
    assert_eq!(several.calls_map(1), "fslat_calls_1_1");
}

/// A bundle's program for `script` checked with `build` as the words `fslat build`
/// was given.
fn bundle_program(script: &str, build: &[&str]) -> Program {
    let ast = crate::syntax::parse(script).expect("parses");
    let opts = super::super::Options {
        args: build.iter().map(|w| w.to_string()).collect(),
        runtime_args: true,
        ..Default::default()
    };
    super::super::check_with(&ast, script, &crate::btf::Fixture::new(), opts).expect("checks")
}

#[test]
fn a_bundles_arguments_lie_integers_first_then_strings_each_written_as_given() {
    let p = bundle_program(
        "session vfs_read where comm == $3 and count == $1 and latency > $2 and $# > 2",
        &["7", "1ms", "bash"],
    );
    let layout: Vec<(String, usize, usize)> = p
        .arg_fields()
        .iter()
        .map(|f| (f.decl(), f.offset, f.size))
        .collect();
    assert_eq!(
        layout,
        [
            ("__s64 count".to_string(), 0, 8),
            ("__s64 a1".to_string(), 8, 8),
            ("__u64 a2".to_string(), 16, 8),
            ("char a3[64]".to_string(), 24, 64),
        ]
    );
    assert_eq!(p.args_size(), 88);
    let words = |w: &[&str]| w.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let image = p
        .args_image(&words(&["-5", "250us", "python3", "extra"]))
        .expect("fits");
    let mut want = Vec::new();
    want.extend(4i64.to_ne_bytes());
    want.extend((-5i64).to_ne_bytes());
    want.extend(250_000u64.to_ne_bytes());
    want.extend(b"python3");
    want.resize(88, 0);
    assert_eq!(image, want);
    // Another kind than the build's word, a string too long, one missing.
    assert!(matches!(
        p.args_image(&words(&["x", "1ms", "bash"])),
        Err(ArgError::Kind { ref name, .. }) if name == "$1"
    ));
    assert!(matches!(
        p.args_image(&words(&["1", "5", "bash"])),
        Err(ArgError::Kind { ref name, .. }) if name == "$2"
    ));
    let long = "x".repeat(64);
    assert!(matches!(
        p.args_image(&words(&["1", "1ms", &long])),
        Err(ArgError::TooLong {
            max: 63,
            len: 64,
            ..
        })
    ));
    assert_eq!(
        p.args_image(&words(&["1"])),
        Err(ArgError::Missing { n: 2, given: 1 })
    );
}

#[test]
fn a_bundles_argument_compiled_in_is_fixed_at_the_build_value() {
    let p = bundle_program(
        "session vfs_read where count == $1 { lhist(count, 0, $1 * 10, 1) }",
        &["0x10"],
    );
    let words = |w: &str| vec![w.to_string()];
    assert!(p.args_image(&words("16")).is_ok(), "the same value");
    assert!(p.args_image(&words("0x10")).is_ok());
    assert_eq!(
        p.args_image(&words("17")),
        Err(ArgError::Fixed {
            name: "$1".into(),
            built: "0x10".into(),
            by: "lhist's bounds".into(),
            word: "17".into(),
        })
    );
    // A script's arguments are constants: the program takes none at run time.
    let ast = crate::syntax::parse("session vfs_read where count == $1").expect("parses");
    let opts = super::super::Options {
        args: vec!["3".into()],
        ..Default::default()
    };
    let script = super::super::check_with(
        &ast,
        "session vfs_read where count == $1",
        &crate::btf::Fixture::new(),
        opts,
    )
    .expect("checks");
    assert!(script.args.is_empty());
    assert_eq!(script.args_image(&[]), Ok(Vec::new()));
}
