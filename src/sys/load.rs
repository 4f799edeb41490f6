//! The system calls of the warm start's loader (`runtime::replay` says why and when):
//! what libbpf sent to the kernel for a loaded object, kept as a `Record`, and the same
//! maps and programs made again from it, with no BTF read.

use libbpf_rs::{AsRawLibbpf, MapCore, MapHandle, MapType};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::ffi::CString;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

/// Bumped when the record's meaning changes: an older record is not replayed.
pub const FORMAT: u32 = 2;

#[derive(Serialize, Deserialize)]
pub struct Record {
    format: u32,
    #[serde(with = "b64")]
    btf: Vec<u8>,
    maps: Vec<MapRecord>,
    progs: Vec<ProgRecord>,
}

#[derive(Serialize, Deserialize)]
struct MapRecord {
    name: String,
    map_type: u32,
    key_size: u32,
    value_size: u32,
    max_entries: u32,
    flags: u32,
    extra: u64,
    btf_key: u32,
    btf_value: u32,
    btf_vmlinux_value: u32,
    #[serde(with = "b64")]
    initial: Vec<u8>,
}

#[derive(Serialize, Deserialize)]
struct ProgRecord {
    name: String,
    prog_type: u32,
    attach_type: u32,
    attach_btf_id: u32,
    flags: u32,
    #[serde(with = "b64")]
    insns: Vec<u8>,
    /// (instruction, map): the ld_imm64 instructions whose immediate is a map descriptor.
    map_refs: Vec<(u32, u32)>,
    #[serde(with = "b64")]
    func_info: Vec<u8>,
    func_info_rec: u32,
    #[serde(with = "b64")]
    line_info: Vec<u8>,
    line_info_rec: u32,
    /// A copy of a shared body (runtime/shared.rs): the body's name and the function (its
    /// index in the session) the copy is for.
    copy_of: Option<(String, usize)>,
}

mod b64 {
    use base64::Engine;
    use base64::engine::general_purpose::STANDARD;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&STANDARD.encode(bytes))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let text = <&str>::deserialize(d)?;
        STANDARD.decode(text).map_err(serde::de::Error::custom)
    }
}

impl Record {
    /// Adds a copy of the body `body` loaded for function `target` (its instructions
    /// `insns`, the body's with that function's values; loaded with no func or line
    /// info, as runtime/shared.rs loads copies).
    pub fn add_copy(
        &mut self,
        body: &str,
        name: &str,
        target: usize,
        insns: &[libbpf_sys::bpf_insn],
        attach_btf_id: u32,
    ) -> Result<(), String> {
        let of = self
            .progs
            .iter()
            .find(|p| p.name == body && p.copy_of.is_none())
            .ok_or_else(|| format!("no body {body} in the record"))?;
        let copy = ProgRecord {
            name: name.to_string(),
            prog_type: of.prog_type,
            attach_type: of.attach_type,
            attach_btf_id,
            flags: of.flags,
            insns: insn_bytes(insns),
            map_refs: of.map_refs.clone(),
            func_info: Vec::new(),
            func_info_rec: of.func_info_rec,
            line_info: Vec::new(),
            line_info_rec: of.line_info_rec,
            copy_of: Some((body.to_string(), target)),
        };
        self.progs.push(copy);
        Ok(())
    }

    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }

    pub fn decode(bytes: &[u8]) -> Option<Record> {
        serde_json::from_slice::<Record>(bytes)
            .ok()
            .filter(|r| r.format == FORMAT)
    }
}

const LD_IMM64: u8 = (libbpf_sys::BPF_LD | libbpf_sys::BPF_IMM | libbpf_sys::BPF_DW) as u8;
const CALL: u8 = (libbpf_sys::BPF_JMP | libbpf_sys::BPF_CALL) as u8;

fn insn_bytes(insns: &[libbpf_sys::bpf_insn]) -> Vec<u8> {
    // SAFETY: bpf_insn is 8 plain bytes with no padding.
    unsafe { std::slice::from_raw_parts(insns.as_ptr().cast::<u8>(), std::mem::size_of_val(insns)) }
        .to_vec()
}

fn raw<T>(ptr: *const T, count: usize, size: usize) -> Vec<u8> {
    if ptr.is_null() || count == 0 {
        return Vec::new();
    }
    // SAFETY: libbpf's array of `count` records of `size` bytes, valid while the object is.
    unsafe { std::slice::from_raw_parts(ptr.cast::<u8>(), count * size) }.to_vec()
}

/// What libbpf sent to the kernel for `obj`, just loaded and not yet attached (so each
/// map still holds its initial data). `sized`: the maps this run sized, each with its size
/// in the object, which the record keeps (a later run sizes them as it asks).
pub fn record(obj: &libbpf_rs::Object, sized: &HashMap<String, u32>) -> Result<Record, String> {
    let ptr = obj.as_libbpf_object().as_ptr();
    // SAFETY: libbpf's own object, loaded; the BTF it returns lives as long as it.
    let btf_fd = unsafe {
        let btf = libbpf_sys::bpf_object__btf(ptr);
        if btf.is_null() {
            -1
        } else {
            libbpf_sys::btf__fd(btf)
        }
    };
    let btf = if btf_fd >= 0 {
        btf_bytes(btf_fd)?
    } else {
        Vec::new()
    };
    let mut maps = Vec::new();
    let mut fds: HashMap<i32, u32> = HashMap::new();
    for map in obj.maps() {
        let mptr = map.as_libbpf_object().as_ptr();
        // SAFETY: libbpf's own map, valid while `obj` is borrowed.
        let fd = unsafe { libbpf_sys::bpf_map__fd(mptr) };
        if fd < 0 {
            continue;
        }
        let (info, _) = info_of::<libbpf_sys::bpf_map_info>(fd)?;
        if matches!(
            info.type_,
            libbpf_sys::BPF_MAP_TYPE_ARRAY_OF_MAPS | libbpf_sys::BPF_MAP_TYPE_HASH_OF_MAPS
        ) {
            return Err("a map of maps".into());
        }
        // A global data section's map (.rodata, .bss, a constant pool...): its one value as
        // the kernel holds it now, before any program ran (libbpf keeps no copy of a map
        // that is not mmapable).
        // SAFETY: as above.
        let initial = if unsafe { libbpf_sys::bpf_map__is_internal(mptr) } {
            let mut value = vec![0u8; info.value_size as usize];
            let key = 0u32;
            // SAFETY: `value` holds the map's value size; the key is a u32, as an array's.
            let rc = unsafe {
                libbpf_sys::bpf_map_lookup_elem(
                    fd,
                    (&key as *const u32).cast(),
                    value.as_mut_ptr().cast(),
                )
            };
            if rc < 0 {
                return Err(format!("the data of map {:?}: errno {}", map.name(), -rc));
            }
            value
        } else {
            Vec::new()
        };
        fds.insert(fd, maps.len() as u32);
        let name = map.name().to_string_lossy().into_owned();
        maps.push(MapRecord {
            max_entries: sized.get(&name).copied().unwrap_or(info.max_entries),
            name,
            map_type: info.type_,
            key_size: info.key_size,
            value_size: info.value_size,
            flags: info.map_flags,
            extra: info.map_extra,
            btf_key: info.btf_key_type_id,
            btf_value: info.btf_value_type_id,
            btf_vmlinux_value: info.btf_vmlinux_value_type_id,
            initial,
        });
    }
    let mut progs = Vec::new();
    let mut vmlinux = None;
    for prog in obj.progs() {
        let pptr = prog.as_libbpf_object().as_ptr();
        // SAFETY: libbpf's own program, valid while `obj` is borrowed.
        let fd = unsafe { libbpf_sys::bpf_program__fd(pptr) };
        if fd < 0 {
            continue;
        }
        let (info, len) = info_of::<libbpf_sys::bpf_prog_info>(fd)?;
        // SAFETY: as above.
        let (prog_type, attach_type, flags) = unsafe {
            (
                libbpf_sys::bpf_program__type(pptr),
                libbpf_sys::bpf_program__expected_attach_type(pptr),
                libbpf_sys::bpf_program__flags(pptr),
            )
        };
        let kprobe_multi = prog_type == libbpf_sys::BPF_PROG_TYPE_KPROBE
            && (attach_type == libbpf_sys::BPF_TRACE_KPROBE_SESSION
                || attach_type == libbpf_sys::BPF_TRACE_KPROBE_MULTI);
        if prog_type != libbpf_sys::BPF_PROG_TYPE_TRACING && !kprobe_multi {
            return Err(format!(
                "program {:?} is neither a tracing program nor a kprobe_multi one",
                prog.name()
            ));
        }
        let mut attach_btf_id = 0;
        if prog_type == libbpf_sys::BPF_PROG_TYPE_TRACING {
            let end = std::mem::offset_of!(libbpf_sys::bpf_prog_info, attach_btf_id) + 4;
            if (len as usize) >= end && info.attach_btf_id != 0 {
                if info.attach_btf_obj_id != vmlinux_btf_id()? {
                    return Err("a program attached to a module's function".into());
                }
                attach_btf_id = info.attach_btf_id;
            } else {
                // Before Linux 6.0 the kernel does not say: the function's id in its BTF,
                // found as libbpf found it (the name after the section's `/`).
                // SAFETY: libbpf's own program; the name lives as long as it.
                let section = unsafe {
                    std::ffi::CStr::from_ptr(libbpf_sys::bpf_program__section_name(pptr))
                }
                .to_string_lossy()
                .into_owned();
                let func = section
                    .split_once('/')
                    .map(|(_, f)| f.to_string())
                    .ok_or_else(|| format!("section {section} names no function"))?;
                let btf = match &vmlinux {
                    Some(btf) => btf,
                    None => vmlinux.insert(super::bpf::VmlinuxBtf::load()?),
                };
                attach_btf_id = btf.function_ids(&[func])?[0];
            }
        }
        let insns = prog.insns();
        let mut map_refs = Vec::new();
        let mut i = 0;
        while i < insns.len() {
            let insn = &insns[i];
            let src = insn.src_reg() as u32;
            match insn.code {
                LD_IMM64 => {
                    match src {
                        libbpf_sys::BPF_PSEUDO_MAP_FD | libbpf_sys::BPF_PSEUDO_MAP_VALUE => {
                            let map = fds.get(&insn.imm).ok_or("a map libbpf did not make")?;
                            map_refs.push((i as u32, *map));
                        }
                        libbpf_sys::BPF_PSEUDO_BTF_ID
                            if insns.get(i + 1).is_some_and(|next| next.imm != 0) =>
                        {
                            return Err("a module's variable".into());
                        }
                        libbpf_sys::BPF_PSEUDO_MAP_IDX | libbpf_sys::BPF_PSEUDO_MAP_IDX_VALUE => {
                            return Err("a map by index".into());
                        }
                        _ => {}
                    }
                    i += 1;
                }
                CALL if src == libbpf_sys::BPF_PSEUDO_KFUNC_CALL && insn.off != 0 => {
                    return Err("a module's kfunc".into());
                }
                _ => {}
            }
            i += 1;
        }
        // SAFETY: as above; the arrays are libbpf's, `cnt` records each.
        let (func_info, line_info) = unsafe {
            (
                raw(
                    libbpf_sys::bpf_program__func_info(pptr),
                    libbpf_sys::bpf_program__func_info_cnt(pptr) as usize,
                    std::mem::size_of::<libbpf_sys::bpf_func_info>(),
                ),
                raw(
                    libbpf_sys::bpf_program__line_info(pptr),
                    libbpf_sys::bpf_program__line_info_cnt(pptr) as usize,
                    std::mem::size_of::<libbpf_sys::bpf_line_info>(),
                ),
            )
        };
        progs.push(ProgRecord {
            name: prog.name().to_string_lossy().into_owned(),
            prog_type,
            attach_type,
            attach_btf_id,
            flags,
            insns: insn_bytes(insns),
            map_refs,
            func_info,
            func_info_rec: std::mem::size_of::<libbpf_sys::bpf_func_info>() as u32,
            line_info,
            line_info_rec: std::mem::size_of::<libbpf_sys::bpf_line_info>() as u32,
            copy_of: None,
        });
    }
    Ok(Record {
        format: FORMAT,
        btf,
        maps,
        progs,
    })
}

/// BPF_OBJ_GET_INFO_BY_FD of `fd` into a zeroed `T` (a map's or a program's info
/// struct): the info, and how many bytes of it this kernel filled.
fn info_of<T: Default>(fd: i32) -> Result<(T, u32), String> {
    let mut info = T::default();
    let mut len = std::mem::size_of::<T>() as u32;
    // SAFETY: `info` is `len` zeroed bytes with every pointer field null, so the kernel
    // writes only into it.
    let rc =
        unsafe { libbpf_sys::bpf_obj_get_info_by_fd(fd, (&mut info as *mut T).cast(), &mut len) };
    if rc < 0 {
        return Err(format!("information of a map or program: errno {}", -rc));
    }
    Ok((info, len))
}

/// The bytes of BTF object `fd` as the kernel holds it.
fn btf_bytes(fd: i32) -> Result<Vec<u8>, String> {
    let mut info = libbpf_sys::bpf_btf_info::default();
    let mut len = std::mem::size_of_val(&info) as u32;
    // SAFETY: a zeroed bpf_btf_info with no buffer: the kernel reports the size.
    let rc = unsafe { libbpf_sys::bpf_btf_get_info_by_fd(fd, &mut info, &mut len) };
    if rc < 0 {
        return Err(format!("BTF information: errno {}", -rc));
    }
    let mut bytes = vec![0u8; info.btf_size as usize];
    let mut info = libbpf_sys::bpf_btf_info {
        btf: bytes.as_mut_ptr() as u64,
        btf_size: bytes.len() as u32,
        ..Default::default()
    };
    let mut len = std::mem::size_of_val(&info) as u32;
    // SAFETY: `btf` points to `btf_size` writable bytes that outlive the call.
    let rc = unsafe { libbpf_sys::bpf_btf_get_info_by_fd(fd, &mut info, &mut len) };
    if rc < 0 {
        return Err(format!("BTF bytes: errno {}", -rc));
    }
    bytes.truncate(info.btf_size as usize);
    Ok(bytes)
}

/// The id of the kernel's own BTF object (the one named `vmlinux`).
fn vmlinux_btf_id() -> Result<u32, String> {
    let mut id = 0u32;
    loop {
        // SAFETY: plain id iteration.
        let rc = unsafe { libbpf_sys::bpf_btf_get_next_id(id, &mut id) };
        if rc < 0 {
            return Err("the kernel's BTF object was not found".into());
        }
        // SAFETY: a new descriptor that nothing else owns (or an error).
        let fd = unsafe { libbpf_sys::bpf_btf_get_fd_by_id(id) };
        if fd < 0 {
            continue;
        }
        // SAFETY: as above.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let mut name = [0u8; 64];
        let mut info = libbpf_sys::bpf_btf_info {
            name: name.as_mut_ptr() as u64,
            name_len: name.len() as u32,
            ..Default::default()
        };
        let mut len = std::mem::size_of_val(&info) as u32;
        // SAFETY: `name` is `name_len` writable bytes that outlive the call.
        let rc = unsafe { libbpf_sys::bpf_btf_get_info_by_fd(fd.as_raw_fd(), &mut info, &mut len) };
        if rc == 0 && info.kernel_btf != 0 && name.starts_with(b"vmlinux\0") {
            return Ok(id);
        }
    }
}

/// What `make` made: the maps, and the programs.
pub struct Made {
    pub maps: Vec<MapHandle>,
    pub progs: Vec<MadeProg>,
}

pub struct MadeProg {
    pub name: String,
    pub fd: OwnedFd,
    pub attach_type: u32,
    /// A shared body's copy: the body's name and the copy's function.
    pub copy_of: Option<(String, usize)>,
}

/// Maps and programs made from `rec`, none attached: each map sized by `size` (`None`:
/// as recorded) and its initial data passed through `initial` before it is written.
pub fn make(
    rec: &Record,
    size: impl Fn(&str) -> Option<u32>,
    initial: impl Fn(&str, &mut [u8]) -> Result<(), String>,
) -> Result<Made, String> {
    let btf = match rec.btf.is_empty() {
        true => None,
        false => {
            // SAFETY: the bytes are valid for the call; the kernel copies them.
            let fd = unsafe {
                libbpf_sys::bpf_btf_load(
                    rec.btf.as_ptr().cast(),
                    rec.btf.len() as _,
                    std::ptr::null_mut(),
                )
            };
            if fd < 0 {
                return Err(format!("the object's BTF: errno {}", -fd));
            }
            // SAFETY: a new descriptor that nothing else owns.
            Some(unsafe { OwnedFd::from_raw_fd(fd) })
        }
    };
    let btf_fd = btf.as_ref().map_or(0, |b| b.as_raw_fd());
    let mut maps = Vec::new();
    for m in &rec.maps {
        let with_btf = m.btf_key != 0 || m.btf_value != 0 || m.btf_vmlinux_value != 0;
        let opts = libbpf_sys::bpf_map_create_opts {
            sz: std::mem::size_of::<libbpf_sys::bpf_map_create_opts>() as _,
            btf_fd: if with_btf { btf_fd as u32 } else { 0 },
            btf_key_type_id: m.btf_key,
            btf_value_type_id: m.btf_value,
            btf_vmlinux_value_type_id: m.btf_vmlinux_value,
            map_flags: m.flags,
            map_extra: m.extra,
            ..Default::default()
        };
        let entries = size(&m.name).unwrap_or(m.max_entries);
        let map = MapHandle::create(
            MapType::from(m.map_type),
            Some(&m.name),
            m.key_size,
            m.value_size,
            entries,
            &opts,
        )
        .map_err(|e| format!("map {}: {e}", m.name))?;
        if !m.initial.is_empty() {
            let mut data = m.initial.clone();
            initial(&m.name, &mut data)?;
            map.update(&0u32.to_ne_bytes(), &data, libbpf_rs::MapFlags::ANY)
                .map_err(|e| format!("map {}: {e}", m.name))?;
            if m.flags & libbpf_sys::BPF_F_RDONLY_PROG != 0 {
                map.freeze().map_err(|e| format!("map {}: {e}", m.name))?;
            }
        }
        maps.push(map);
    }
    let mut progs = Vec::new();
    for p in &rec.progs {
        let mut insns: Vec<libbpf_sys::bpf_insn> = p
            .insns
            .chunks_exact(8)
            .map(|c| {
                let b: [u8; 8] = c.try_into().unwrap_or_default();
                // SAFETY: bpf_insn is 8 plain bytes; any bit pattern is one.
                unsafe { std::mem::transmute::<[u8; 8], libbpf_sys::bpf_insn>(b) }
            })
            .collect();
        for &(at, map) in &p.map_refs {
            let fd = maps
                .get(map as usize)
                .ok_or("a map past the record's")?
                .as_fd()
                .as_raw_fd();
            insns
                .get_mut(at as usize)
                .ok_or("an instruction past the program")?
                .imm = fd;
        }
        // The kernel keeps 15 characters of a name, and refuses any but letters, digits,
        // `_` and `.`: a copy goes by its body's name, as runtime/shared.rs loads it.
        let kernel_name: String = p
            .copy_of
            .as_ref()
            .map_or(&p.name, |(body, _)| body)
            .chars()
            .filter(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '.')
            .take(15)
            .collect();
        let name = CString::new(kernel_name).unwrap_or_default();
        let with_btf = btf.is_some() && !p.func_info.is_empty();
        let mut opts = libbpf_sys::bpf_prog_load_opts {
            sz: std::mem::size_of::<libbpf_sys::bpf_prog_load_opts>() as _,
            expected_attach_type: p.attach_type,
            attach_btf_id: p.attach_btf_id,
            prog_flags: p.flags,
            prog_btf_fd: if with_btf { btf_fd as u32 } else { 0 },
            func_info: if with_btf {
                p.func_info.as_ptr().cast()
            } else {
                std::ptr::null()
            },
            func_info_cnt: if with_btf {
                (p.func_info.len() as u32) / p.func_info_rec.max(1)
            } else {
                0
            },
            func_info_rec_size: if with_btf { p.func_info_rec } else { 0 },
            line_info: if with_btf && !p.line_info.is_empty() {
                p.line_info.as_ptr().cast()
            } else {
                std::ptr::null()
            },
            line_info_cnt: if with_btf {
                (p.line_info.len() as u32) / p.line_info_rec.max(1)
            } else {
                0
            },
            line_info_rec_size: if with_btf && !p.line_info.is_empty() {
                p.line_info_rec
            } else {
                0
            },
            ..Default::default()
        };
        // SAFETY: every pointer is valid for the call; the kernel copies what it reads.
        let fd = unsafe {
            libbpf_sys::bpf_prog_load(
                p.prog_type,
                name.as_ptr(),
                c"GPL".as_ptr(),
                insns.as_ptr(),
                insns.len() as _,
                &mut opts,
            )
        };
        if fd < 0 {
            return Err(format!("program {}: errno {}", p.name, -fd));
        }
        progs.push(MadeProg {
            name: p.name.clone(),
            // SAFETY: a new descriptor that nothing else owns.
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
            attach_type: p.attach_type,
            copy_of: p.copy_of.clone(),
        });
    }
    Ok(Made { maps, progs })
}

/// A kprobe_multi link for `prog` on the functions `symbols`: in session mode when
/// `attach_type` is `BPF_TRACE_KPROBE_SESSION`, for `BPF_TRACE_KPROBE_MULTI` at entry, or
/// at return when `at` is `KprobeAt::Return` (`BPF_F_KPROBE_MULTI_RETURN`).
pub fn attach_kprobes(
    prog: BorrowedFd,
    attach_type: u32,
    symbols: &[String],
    cookies: &[u64],
    at: super::bpf::KprobeAt,
) -> std::io::Result<OwnedFd> {
    let names: Vec<CString> = symbols
        .iter()
        .map(|s| CString::new(s.as_str()).map_err(|_| std::io::ErrorKind::InvalidInput.into()))
        .collect::<std::io::Result<_>>()?;
    let ptrs: Vec<*const std::os::raw::c_char> = names.iter().map(|n| n.as_ptr()).collect();
    let mut opts = libbpf_sys::bpf_link_create_opts {
        sz: std::mem::size_of::<libbpf_sys::bpf_link_create_opts>() as _,
        ..Default::default()
    };
    opts.__bindgen_anon_1.kprobe_multi.syms = ptrs.as_ptr().cast_mut();
    opts.__bindgen_anon_1.kprobe_multi.cookies = cookies.as_ptr();
    opts.__bindgen_anon_1.kprobe_multi.cnt = symbols.len() as u32;
    if at == super::bpf::KprobeAt::Return {
        opts.__bindgen_anon_1.kprobe_multi.flags = libbpf_sys::BPF_F_KPROBE_MULTI_RETURN;
    }
    // SAFETY: a loaded program; the arrays outlive the call, which only reads them.
    let fd = unsafe { libbpf_sys::bpf_link_create(prog.as_raw_fd(), 0, attach_type, &opts) };
    if fd < 0 {
        return Err(std::io::Error::from_raw_os_error(-fd));
    }
    // SAFETY: a new descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}
