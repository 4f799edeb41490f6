//! One program body for a session's several functions in fentry, fexit and fsession
//! modes (`Mode::shares_body`). The object holds each of the session's programs once,
//! written for its first function; what differs between functions is in marks in its
//! instructions (`check::resources::Mark`): the function's index in the session's tables
//! (`FSLAT_FN_INDEX()`, an `r = FN_MARK`) and the slots of the parameters and the return
//! value in the trampoline's argument area (`FSLAT_CTX_AT`, loads whose offset is the
//! mark). A tracing program is verified for one attach target, so each function needs a
//! program of its own: libbpf loads the body for the first function this kernel has,
//! with that function's values over the marks; this module loads a copy of the same
//! relocated instructions for each other function, with its values, and attaches it.
//! Neither clang nor the object grows with the functions, and a bundle's glob loads for
//! whichever of its functions the running kernel has.

use super::RuntimeError;
use super::errors;
use crate::check::program::{Program, Session};
use crate::check::resources::{FN_MARK, Mark, Prog, ProgRole};
use crate::sys::bpf;
use libbpf_rs::{OpenObject, ProgramMut};
use libbpf_sys::bpf_insn;
use std::collections::HashMap;
use std::os::fd::OwnedFd;

/// A program of the object that is a shared body: its session, the functions (target
/// indices) it runs for on this kernel, the first loaded by libbpf, and its marks, each
/// with the instruction as compiled (libbpf loads the first function's values over them,
/// so each copy starts again from these).
pub struct Body {
    pub session: usize,
    pub role: ProgRole,
    pub targets: Vec<usize>,
    pub marks: Vec<(usize, Mark)>,
    pub marked: Vec<bpf_insn>,
}

/// A copy of a shared body loaded for one more function, and its link (`None` once
/// detached; the program stays for the summary's `missed`).
pub struct Copy {
    pub name: String,
    pub prog: Prog,
    pub fd: OwnedFd,
    pub link: Option<OwnedFd>,
}

/// Relocates `open`'s programs (libbpf's `bpf_object__prepare`: maps made, CO-RE and
/// map references resolved, nothing loaded), finds each body's marks and writes its
/// first function's values over them.
pub fn prepare(
    open: &mut OpenObject,
    program: &Program,
    bodies: &mut HashMap<String, Body>,
) -> Result<(), RuntimeError> {
    bpf::prepare_object(open).map_err(|e| {
        errors::load_error(
            libbpf_rs::Error::from_raw_os_error(e.raw_os_error().unwrap_or(libc::EINVAL)),
            program,
        )
    })?;
    for mut prog in open.progs_mut() {
        let name = prog.name().to_string_lossy().into_owned();
        let Some(body) = bodies.get_mut(&name) else {
            continue;
        };
        let s = &program.sessions[body.session];
        body.marks = marks(prog.insns());
        body.marked = body.marks.iter().map(|&(i, _)| prog.insns()[i]).collect();
        let insns = patch(prog.insns(), &body.marks, s, body.targets[0])
            .map_err(|reason| copies_error(s, reason))?;
        bpf::set_insns(&mut prog, insns).map_err(|e| copies_error(s, e.to_string()))?;
    }
    Ok(())
}

fn copies_error(s: &Session, reason: String) -> RuntimeError {
    RuntimeError::Copies {
        session: s.label.clone(),
        reason,
    }
}

/// The BTF ids of the functions the bodies' copies are for (none needed: no BTF read).
pub fn btf_ids(
    program: &Program,
    bodies: &HashMap<String, Body>,
) -> Result<HashMap<String, u32>, RuntimeError> {
    let mut names: Vec<(usize, String)> = Vec::new();
    for body in bodies.values() {
        let s = &program.sessions[body.session];
        for &t in &body.targets[1..] {
            names.push((s.index, s.targets[t].func.clone()));
        }
    }
    let Some(first) = names.first().map(|n| n.0) else {
        return Ok(HashMap::new());
    };
    // A program and a link descriptor per copy: hundreds of functions pass the usual
    // soft limit of 1024 open files.
    crate::sys::raise_open_files_limit();
    let failed = |reason| copies_error(&program.sessions[first], reason);
    let btf = crate::sys::bpf::VmlinuxBtf::load().map_err(failed)?;
    names.sort();
    names.dedup();
    let funcs: Vec<String> = names.into_iter().map(|(_, f)| f).collect();
    let ids = btf.function_ids(&funcs).map_err(failed)?;
    Ok(funcs.into_iter().zip(ids).collect())
}

/// Loads and attaches a copy of the loaded body `prog` for each of its functions after
/// the first (each added to the warm start's load `record`, if one is made).
pub fn load_copies(
    prog: &ProgramMut,
    name: &str,
    body: &Body,
    program: &Program,
    ids: &HashMap<String, u32>,
    mut record: Option<&mut crate::sys::load::Record>,
) -> Result<Vec<Copy>, RuntimeError> {
    let s = &program.sessions[body.session];
    let attach_type = bpf::expected_attach_type(prog);
    // The loaded instructions, with the marked ones as compiled again.
    let mut insns = prog.insns().to_vec();
    for (&(i, _), original) in body.marks.iter().zip(&body.marked) {
        match insns.get_mut(i) {
            Some(insn) => *insn = *original,
            None => return Err(copies_error(s, format!("mark {i} past the loaded program"))),
        }
    }
    let mut out = Vec::new();
    for &t in &body.targets[1..] {
        let func = &s.targets[t].func;
        let code = patch(&insns, &body.marks, s, t).map_err(|reason| copies_error(s, reason))?;
        let id = *ids
            .get(func)
            .ok_or_else(|| copies_error(s, format!("`{func}` has no BTF id")))?;
        let fd = bpf::load_tracing(name, &code, attach_type, id)
            .map_err(|f| errors::copy_load_error(f.errno, name, func, &f.log, program))?;
        let copy_name = format!("{name} ({func})");
        if let Some(r) = record.as_deref_mut()
            && let Err(why) = r.add_copy(name, &copy_name, t, &code, id)
        {
            return Err(copies_error(s, why));
        }
        let link =
            bpf::link_tracing(&fd, attach_type).map_err(|e| errors::copy_attach_error(e, func))?;
        out.push(Copy {
            name: copy_name,
            prog: Prog {
                role: body.role,
                session: s.index,
                target: t,
            },
            fd,
            link: Some(link),
        });
    }
    Ok(out)
}

const MOV_IMM: u8 = (libbpf_sys::BPF_ALU64 | libbpf_sys::BPF_MOV | libbpf_sys::BPF_K) as u8;

/// The marks of a shared body: each instruction that holds one, by index.
pub fn marks(insns: &[bpf_insn]) -> Vec<(usize, Mark)> {
    const LOAD_DW: u8 = (libbpf_sys::BPF_LDX | libbpf_sys::BPF_MEM | libbpf_sys::BPF_DW) as u8;
    const LD_IMM64: u8 = (libbpf_sys::BPF_LD | libbpf_sys::BPF_IMM | libbpf_sys::BPF_DW) as u8;
    let mut out = Vec::new();
    let mut i = 0;
    while i < insns.len() {
        let insn = &insns[i];
        match insn.code {
            MOV_IMM if insn.imm == FN_MARK => out.push((i, Mark::Fn)),
            LOAD_DW => out.extend(Mark::of_offset(insn.off).map(|m| (i, m))),
            // Its second half is data, not an instruction.
            LD_IMM64 => i += 1,
            _ => {}
        }
        i += 1;
    }
    out
}

/// `insns` with function `t` of `s`'s values written over `marks`.
pub fn patch(
    insns: &[bpf_insn],
    marks: &[(usize, Mark)],
    s: &Session,
    t: usize,
) -> Result<Vec<bpf_insn>, String> {
    let target = s
        .targets
        .get(t)
        .ok_or_else(|| format!("the session has no function {t}"))?;
    let offset = |slot: usize| {
        i16::try_from(slot * 8).map_err(|_| format!("slot {slot} of `{}`", target.func))
    };
    let mut out = insns.to_vec();
    for &(at, mark) in marks {
        let insn = out
            .get_mut(at)
            .ok_or_else(|| format!("mark at instruction {at} past the program's end"))?;
        match mark {
            Mark::Fn => insn.imm = t as i32,
            // A void function has no return value to read: the load becomes `r = 0`
            // (a program reading past its arguments is refused), which is what the
            // tables make of it (`errors` counts no call of a function returning void).
            Mark::Ret if target.ret.is_none() => {
                insn.code = MOV_IMM;
                insn.set_src_reg(0);
                insn.off = 0;
                insn.imm = 0;
            }
            Mark::Ret => insn.off = offset(target.ret_slot)?,
            Mark::Param(p) => {
                let slot = target
                    .slots
                    .get(p)
                    .ok_or_else(|| format!("`{}` has no parameter {p}", target.func))?;
                insn.off = offset(*slot)?;
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::resources::{RET_MARK, param_mark};

    fn insn(code: u32, off: i16, imm: i32) -> bpf_insn {
        bpf_insn {
            code: code as u8,
            off,
            imm,
            ..Default::default()
        }
    }

    #[test]
    fn finds_the_marks_and_nothing_else() {
        let mov = libbpf_sys::BPF_ALU64 | libbpf_sys::BPF_MOV | libbpf_sys::BPF_K;
        let load = libbpf_sys::BPF_LDX | libbpf_sys::BPF_MEM | libbpf_sys::BPF_DW;
        let ld64 = libbpf_sys::BPF_LD | libbpf_sys::BPF_IMM | libbpf_sys::BPF_DW;
        let insns = [
            insn(mov, 0, FN_MARK),
            insn(load, 8, 0),
            insn(load, param_mark(2), 0),
            // An ld_imm64's second half looks like anything: here like a mark.
            insn(ld64, 0, 0),
            insn(load, RET_MARK, 0),
            insn(load, RET_MARK, 0),
            insn(mov, 0, 7),
        ];
        assert_eq!(
            marks(&insns),
            vec![(0, Mark::Fn), (2, Mark::Param(2)), (5, Mark::Ret)]
        );
    }

    /// The object clang makes of `c`, opened by libbpf (nothing loaded).
    fn opened(c: &str) -> libbpf_rs::OpenObject {
        let clang = crate::build::find_clang(None).expect("clang");
        let compiler = crate::build::Compiler::new(clang, false).unwrap();
        let object = compiler.compile(c).unwrap_or_else(|e| panic!("{e}\n{c}"));
        libbpf_rs::ObjectBuilder::default()
            .open_memory(&object)
            .expect("libbpf opens it")
    }

    #[test]
    fn the_body_marks_match_the_header() {
        let header = include_str!("../../bpf-runtime/fslat.bpf.h");
        assert!(header.contains(&format!("#define FSLAT_FN_MARK {FN_MARK:#x} ")));
    }

    /// A session of several functions in fentry mode is one entry and one exit program
    /// in the object, and each holds the marks the loader writes each function's values
    /// over: the index, the parameter the filter reads, and (at return) the return value.
    #[test]
    fn a_several_function_session_is_one_pair_with_its_marks() {
        use crate::check::resources::Mode;
        let script = "session vfs_read, vfs_write, ksys_read where func != \"vfs_write\" and count > 1 { count() by func; emit ret, latency }";
        let (program, c) = crate::compile(script, &crate::btf::Fixture::new(), Mode::Fentry)
            .unwrap_or_else(|d| panic!("{d:?}"));
        assert!(Mode::Fentry.shares_body(&program.sessions[0]));
        assert_eq!(c.matches("SEC(\"fentry/").count(), 1, "{c}");
        assert_eq!(c.matches("SEC(\"fexit/").count(), 1, "{c}");
        let open = opened(&c);
        let mut found = std::collections::BTreeMap::new();
        for prog in open.progs() {
            let name = prog.name().to_string_lossy().into_owned();
            let mut kinds: Vec<Mark> = marks(prog.insns()).into_iter().map(|m| m.1).collect();
            kinds.sort_by_key(|m| format!("{m:?}"));
            kinds.dedup();
            found.insert(name, kinds);
        }
        let s = &program.sessions[0];
        let count = s.params.iter().position(|p| p.name == "count").unwrap();
        assert_eq!(
            found.get("fslat_entry_0_0"),
            Some(&vec![Mark::Fn, Mark::Param(count)]),
            "{found:?}"
        );
        assert_eq!(
            found.get("fslat_exit_0_0"),
            Some(&vec![Mark::Fn, Mark::Ret]),
            "{found:?}"
        );
        // Each function's values: ksys_read's `ret` slot differs from vfs_read's.
        let progs: Vec<_> = open.progs().collect();
        let exit = progs
            .iter()
            .find(|p| p.name() == "fslat_exit_0_0")
            .expect("the exit program");
        let at = marks(exit.insns());
        for t in 0..3 {
            let code = patch(exit.insns(), &at, s, t).expect("patched");
            for &(i, m) in &at {
                match m {
                    Mark::Fn => assert_eq!(code[i].imm, t as i32),
                    Mark::Ret => assert_eq!(code[i].off as usize, s.targets[t].ret_slot * 8),
                    Mark::Param(p) => assert_eq!(code[i].off as usize, s.targets[t].slots[p] * 8),
                }
            }
        }
    }

    /// A void function's return value is not read: its copy loads 0 instead, with the
    /// fields a `r = imm` must leave zero cleared.
    #[test]
    fn a_void_function_reads_no_return_value() {
        use crate::check::resources::Mode;
        let (program, c) = crate::compile(
            "session vfs_read, kfree { count() by func }",
            &crate::btf::Fixture::new(),
            Mode::Fentry,
        )
        .unwrap_or_else(|d| panic!("{d:?}"));
        let open = opened(&c);
        let prog = open.progs().next().expect("one program");
        let at = marks(prog.insns());
        let s = &program.sessions[0];
        let kfree = s.targets.iter().position(|t| t.func == "kfree").unwrap();
        let code = patch(prog.insns(), &at, s, kfree).expect("patched");
        let rets: Vec<_> = at.iter().filter(|m| m.1 == Mark::Ret).collect();
        assert!(!rets.is_empty(), "{c}");
        for &&(i, _) in &rets {
            let insn = &code[i];
            assert_eq!(insn.code, MOV_IMM);
            assert_eq!((insn.src_reg(), insn.off, insn.imm), (0, 0, 0));
            assert_eq!(insn.dst_reg(), prog.insns()[i].dst_reg());
        }
    }
}
