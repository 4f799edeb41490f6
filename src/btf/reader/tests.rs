use super::*;

/// The host's BTF. These tests are about reading a real kernel's BTF, so a missing file
/// is a failure, not a skip.
fn host() -> Btf {
    match Btf::vmlinux() {
        Ok(btf) => btf,
        Err(e) => panic!("these tests read the host kernel's BTF: {e}"),
    }
}

fn host_bytes() -> Vec<u8> {
    std::fs::read(VMLINUX_PATH)
        .unwrap_or_else(|e| panic!("these tests read the host kernel's BTF {VMLINUX_PATH}: {e}"))
}

fn pointee(b: &Btf, ty: TypeId) -> (TypeId, bool) {
    match b.resolve(ty) {
        KType::Ptr { pointee, user } => (pointee, user),
        other => panic!("{} is not a pointer: {other:?}", b.type_name(ty)),
    }
}

fn field_ty(b: &Btf, ty: TypeId, name: &str) -> TypeId {
    match b.field(ty, name) {
        Some(f) => f.ty,
        None => panic!(
            "{} has no field {name}: {:?}",
            b.type_name(ty),
            b.field_names(ty)
        ),
    }
}

fn is_struct(k: KType, want: &str) -> bool {
    matches!(k, KType::Struct { ref name, union: false, .. } if name == want)
}

/// Whether the host BTF has `__user` type tags (kernels built with a pahole and clang
/// that support btf_type_tag).
fn host_has_user_tags(b: &Btf) -> bool {
    (1..b.type_count() as TypeId).any(|id| {
        b.rec(id)
            .is_some_and(|r| r.kind == KIND_TYPE_TAG && b.name(&r) == "user")
    })
}

#[test]
fn vfs_read_signature() {
    let b = host();
    let f = b.function("vfs_read").expect("vfs_read");
    let names: Vec<&str> = f.params.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["file", "buf", "count", "pos"]);
    let p = |i: usize| f.params[i].ty;

    assert_eq!(b.type_name(p(0)), "struct file *");
    let (file, user) = pointee(&b, p(0));
    assert!(!user);
    assert!(is_struct(b.resolve(file), "file"));

    assert_eq!(b.type_name(p(1)), "char *");
    let (ch, user) = pointee(&b, p(1));
    assert_eq!(
        user,
        host_has_user_tags(&b),
        "__user marking of vfs_read's buf"
    );
    assert!(matches!(
        b.resolve(ch),
        KType::Int {
            size: 1,
            char_like: true,
            bool_like: false,
            ..
        }
    ));

    assert_eq!(b.type_name(p(2)), "size_t");
    assert!(matches!(
        b.resolve(p(2)),
        KType::Int {
            size: 8,
            signed: false,
            char_like: false,
            bool_like: false
        }
    ));
    assert_eq!(b.type_name(p(3)), "loff_t *");
    let (loff, _) = pointee(&b, p(3));
    assert!(matches!(
        b.resolve(loff),
        KType::Int {
            size: 8,
            signed: true,
            ..
        }
    ));

    assert_eq!(b.type_name(f.ret), "ssize_t");
    assert!(matches!(
        b.resolve(f.ret),
        KType::Int {
            size: 8,
            signed: true,
            char_like: false,
            bool_like: false
        }
    ));
}

#[test]
fn vfs_write_buf_is_const() {
    let b = host();
    let f = b.function("vfs_write").expect("vfs_write");
    assert_eq!(b.type_name(f.params[1].ty), "const char *");
    let (_, user) = pointee(&b, f.params[1].ty);
    assert_eq!(user, host_has_user_tags(&b));
}

#[test]
fn file_path_dentry_qstr_chain() {
    let b = host();
    let f = b.function("vfs_read").expect("vfs_read");
    let (file, _) = pointee(&b, f.params[0].ty);

    // `struct path f_path` (recent kernels: `const struct path` in an anonymous union).
    let f_path = b.field(file, "f_path").expect("file.f_path");
    assert!(!f_path.bitfield);
    assert!(is_struct(b.resolve(f_path.ty), "path"));
    assert!(b.type_name(f_path.ty).ends_with("struct path"));

    let dentry = field_ty(&b, f_path.ty, "dentry");
    assert_eq!(b.type_name(dentry), "struct dentry *");
    let (dentry, _) = pointee(&b, dentry);
    assert!(is_struct(b.resolve(dentry), "dentry"));

    let d_name = field_ty(&b, dentry, "d_name");
    assert!(is_struct(b.resolve(d_name), "qstr"));
    assert!(b.type_name(d_name).ends_with("struct qstr"));

    // In an anonymous union/struct in recent kernels, directly in older ones.
    let name = b.field(d_name, "name").expect("qstr.name");
    assert_eq!(b.type_name(name.ty), "const unsigned char *");
    for (field, size) in [("hash", 4), ("len", 4), ("hash_len", 8)] {
        let f = b
            .field(d_name, field)
            .unwrap_or_else(|| panic!("qstr.{field}"));
        assert!(matches!(b.resolve(f.ty), KType::Int { size: s, signed: false, .. } if s == size));
    }
    let names = b.field_names(d_name);
    assert_eq!(names, ["hash", "len", "hash_len", "name"]);

    assert_eq!(b.type_name(field_ty(&b, file, "f_inode")), "struct inode *");
    assert_eq!(b.type_name(field_ty(&b, file, "f_pos")), "loff_t");
    assert_eq!(b.type_name(field_ty(&b, file, "private_data")), "void *");
    assert!(b.field(file, "no_such_field").is_none());
    assert!(b.field(file, "").is_none());
    assert!(
        b.field(f.params[0].ty, "f_path").is_none(),
        "a pointer has no fields"
    );
}

#[test]
fn bitfields_in_struct_sock() {
    let b = host();
    let sock = b.struct_by_name("sock").expect("struct sock");
    let kern = b.field(sock, "sk_kern_sock").expect("sock.sk_kern_sock");
    assert!(kern.bitfield);
    let proto = b.field(sock, "sk_protocol").expect("sock.sk_protocol");
    assert!(!proto.bitfield);
}

#[test]
fn other_functions() {
    let b = host();
    let open = b.function("do_sys_openat2").expect("do_sys_openat2");
    let names: Vec<&str> = open.params.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["dfd", "filename", "how"]);
    assert_eq!(b.type_name(open.params[1].ty), "const char *");
    assert_eq!(b.type_name(open.params[2].ty), "struct open_how *");

    let kfree = b.function("kfree").expect("kfree");
    assert_eq!(kfree.ret, 0);
    assert_eq!(b.resolve(kfree.ret), KType::Void);
    assert_eq!(b.type_name(kfree.ret), "void");
    assert_eq!(b.type_name(kfree.params[0].ty), "const void *");
    let (v, _) = pointee(&b, kfree.params[0].ty);
    assert_eq!(b.resolve(v), KType::Void);

    let may = b.function("may_open_dev").expect("may_open_dev");
    assert!(matches!(
        b.resolve(may.ret),
        KType::Int {
            size: 1,
            bool_like: true,
            ..
        }
    ));

    // Variadic: the trailing unnamed void parameter is dropped.
    let printk = b.function("_printk").expect("_printk");
    assert_eq!(printk.params.len(), 1);
    assert_eq!(printk.params[0].name, "fmt");

    assert!(b.function("no_such_function_anywhere").is_none());
    assert!(b.function("").is_none());
    // A name that only exists as a suffix of other strings, or as a non-function.
    assert!(b.function("task_struct").is_none());
}

#[test]
fn attach_types_are_read_from_the_kernel_enum() {
    // True of every kernel fslat runs on, whatever this host is: fentry (5.5) is there, a
    // name the kernel never had is not, and fsession is what the enum says.
    let b = host();
    assert!(b.enum_has("bpf_attach_type", "BPF_TRACE_FENTRY"));
    assert!(b.enum_has("bpf_attach_type", "BPF_TRACE_FEXIT"));
    assert!(!b.enum_has("bpf_attach_type", "BPF_TRACE_NO_SUCH_TYPE"));
    assert!(!b.enum_has("no_such_enum", "BPF_TRACE_FENTRY"));
    assert_eq!(
        b.has_fsession(),
        b.enum_has("bpf_attach_type", "BPF_TRACE_FSESSION")
    );
}

#[test]
fn function_names_and_lookups_agree() {
    let b = host();
    let names = b.function_names();
    assert!(names.len() > 10_000, "{} functions", names.len());
    assert!(
        names.windows(2).all(|w| w[0] < w[1]),
        "sorted and deduplicated"
    );
    assert!(names.binary_search(&"vfs_read".to_string()).is_ok());
    // The first few lookups scan, the rest use the index: both give the first FUNC.
    let mut first: HashMap<&str, TypeId> = HashMap::new();
    for (id, name) in b.func_ids() {
        first.entry(name).or_insert(id);
    }
    assert_eq!(first.len(), names.len());
    for name in &names {
        assert_eq!(b.function_id(name), Some(first[name.as_str()]), "{name}");
    }
    // Scanning is slower (a pass over the strings each): a sample.
    for name in names.iter().step_by(names.len() / 20) {
        assert_eq!(b.scan_function(name), Some(first[name.as_str()]), "{name}");
    }
    assert!(b.funcs.get().is_some());
    assert!(b.function("vfs_read").is_some());
    assert!(b.function("no_such_function_anywhere").is_none());
}

#[test]
fn every_host_type_resolves_and_has_a_name() {
    let b = host();
    for id in 0..b.type_count() as TypeId + 2 {
        let _ = b.resolve(id);
        let name = b.type_name(id);
        assert!(!name.is_empty(), "type {id}");
        if let Some(r) = b.composite(id) {
            let _ = b.field_names(id);
            let _ = b.find_member(&r, "x", 0, &mut { MEMBER_BUDGET });
        }
    }
}

#[test]
fn a_fifo_or_device_is_refused_without_reading_it() {
    for path in ["/dev/zero", "/dev/null"] {
        let e = Btf::from_file(path).unwrap_err();
        assert!(matches!(e, BtfError::NotAFile { .. }), "{path}: {e}");
    }
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo");
    crate::sys::mkfifo(&fifo, 0o600).unwrap();
    let e = Btf::from_file(&fifo).unwrap_err();
    assert!(matches!(e, BtfError::NotAFile { .. }), "{e}");
}

#[test]
fn errors_say_what_is_wrong() {
    let e = Btf::from_file("/nonexistent/vmlinux").unwrap_err();
    let msg = e.to_string();
    assert!(matches!(e, BtfError::Read { .. }));
    assert!(msg.contains("/nonexistent/vmlinux"), "{msg}");
    assert!(msg.contains("No such file"), "{msg}");

    let e = Btf::from_bytes(b"ELF".to_vec()).unwrap_err();
    assert!(e.to_string().contains("too short"), "{e}");
    let e = Btf::from_bytes(vec![0x7f; 64]).unwrap_err();
    assert!(e.to_string().contains("bad magic"), "{e}");

    let mut data = host_bytes();
    data[2] = 2;
    let e = Btf::from_bytes(data.clone()).unwrap_err();
    assert!(e.to_string().contains("version 2"), "{e}");
    data[2] = 1;
    data.swap(0, 1);
    let e = Btf::from_bytes(data.clone()).unwrap_err();
    assert!(matches!(e, BtfError::BigEndian { .. }), "{e}");
    data.swap(0, 1);
    let n = data.len();
    let e = Btf::from_bytes(data[..n - 1].to_vec()).unwrap_err();
    assert!(e.to_string().contains("string section"), "{e}");

    let path = std::env::temp_dir().join(format!("fslat-btf-test-{}", std::process::id()));
    std::fs::write(&path, &data[..n / 2]).expect("write temp file");
    let e = Btf::from_file(&path).unwrap_err();
    let _ = std::fs::remove_file(&path);
    let msg = e.to_string();
    assert!(msg.starts_with("malformed BTF in "), "{msg}");
    assert!(msg.contains(&path.display().to_string()), "{msg}");
}

/// Uses every query on `b`; must not panic or hang whatever `b` holds.
fn exercise(b: &Btf) {
    for name in ["vfs_read", "do_sys_openat2", "kfree"] {
        if let Some(f) = b.function(name) {
            for ty in f.params.iter().map(|p| p.ty).chain([f.ret]) {
                let _ = b.type_name(ty);
                if let KType::Ptr { pointee, .. } = b.resolve(ty) {
                    let _ = b.type_name(pointee);
                    for n in b.field_names(pointee) {
                        if let Some(f) = b.field(pointee, &n) {
                            let _ = b.type_name(f.ty);
                        }
                    }
                }
            }
        }
    }
    let _ = b.has_fsession();
}

/// A small deterministic PRNG (xorshift64*).
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

#[test]
fn corrupt_host_btf_never_panics() {
    let data = host_bytes();
    let n = data.len();
    let mut rng = Rng(0x5eed_f00d_1234_5678);
    // Truncations: every length through the header, then spread over the file.
    let cuts = (0..64).chain((0..48).map(|_| rng.below(n)));
    for cut in cuts {
        if let Ok(b) = Btf::from_bytes(data[..cut].to_vec()) {
            exercise(&b);
        }
    }
    // Corruptions: random bytes, biased to the header and the first types, which the
    // queries above read.
    let type_start = 24;
    for round in 0..64 {
        let mut d = data.clone();
        for _ in 0..1 + round % 8 {
            let at = match round % 3 {
                0 => rng.below(64),
                1 => type_start + rng.below(64 * 1024),
                _ => rng.below(n),
            };
            d[at] = rng.next() as u8;
        }
        if let Ok(b) = Btf::from_bytes(d) {
            exercise(&b);
        }
    }
}

#[test]
fn find_all_finds_every_occurrence() {
    let hay = b"\0abc\0xabc\0abcabc\0ab";
    assert_eq!(find_all(hay, b"abc\0"), [1, 6, 13]);
    assert_eq!(find_all(hay, b"ab"), [1, 6, 10, 13, 17]);
    assert_eq!(find_all(hay, b"b\0"), Vec::<usize>::new());
    assert_eq!(find_all(hay, b""), Vec::<usize>::new());
    let long: Vec<u8> = (0..100u8).collect();
    for i in 0..100 {
        assert_eq!(find_all(&long, &long[i..]), [i]);
    }
}
