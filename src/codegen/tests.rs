use crate::btf::Fixture;
use crate::codegen::Mode;

fn c_of(script: &str, mode: Mode) -> String {
    match crate::compile(script, &Fixture::new(), mode) {
        Ok((_, c)) => c,
        Err(d) => panic!("{script}: {d:?}"),
    }
}

#[test]
fn dump_examples() {
    let c = c_of(
        "session vfs_read where tgid == 1234 and latency > 10ms { emit }",
        Mode::Fsession,
    );
    println!("{c}");
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
