//! A small hand-built kernel for checker and codegen tests: a few real Linux functions and the
//! structs they reach, with Linux's names and types (typedef chains, `__user` pointers, the
//! anonymous union in `struct qstr`, a bitfield in `struct sock`).
//!
//! The types are built as BTF records by a tiny builder, encoded as a raw BTF blob and read back
//! with [`Btf`], so type ids and every answer behave exactly as with a real kernel's BTF.
//! [`Fixture::bytes`] gives the blob, e.g. to write it to a file for `--btf FILE`.

use super::{Btf, FEATURES, Feature, Features, Field, FuncSig, KType, KernelTypes, TypeId};

/// A hand-built kernel: see the module documentation.
#[derive(Debug)]
pub struct Fixture {
    bytes: Vec<u8>,
    btf: Btf,
}

impl Default for Fixture {
    fn default() -> Self {
        Fixture::new()
    }
}

impl Fixture {
    /// A kernel that has every feature (fsession: `BPF_TRACE_FSESSION` in
    /// `enum bpf_attach_type`; the others in `enum bpf_func_id`).
    pub fn new() -> Fixture {
        Fixture::with_features(Features::all())
    }

    /// The same kernel without fsession (as Linux 6.x).
    pub fn without_fsession() -> Fixture {
        Fixture::with_features(Features {
            fsession: false,
            ..Features::all()
        })
    }

    /// The same kernel with just these features (`Features::default()`: as Linux 5.10).
    pub fn with_features(features: Features) -> Fixture {
        let bytes = kernel(features).encode();
        let btf = match Btf::from_bytes(bytes.clone()) {
            Ok(btf) => btf,
            Err(e) => unreachable!("the fixture's own BTF does not parse: {e}"),
        };
        Fixture { bytes, btf }
    }

    /// The fixture as a raw BTF blob, as `/sys/kernel/btf/vmlinux` would hold it.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The fixture read as BTF.
    pub fn btf(&self) -> &Btf {
        &self.btf
    }

    /// The struct or union named `name` (e.g. "file"), for tests that need a type id.
    pub fn struct_by_name(&self, name: &str) -> Option<TypeId> {
        self.btf.struct_by_name(name)
    }
}

impl KernelTypes for Fixture {
    fn function(&self, name: &str) -> Option<FuncSig> {
        self.btf.function(name)
    }
    fn function_names(&self) -> Vec<String> {
        self.btf.function_names()
    }
    fn resolve(&self, ty: TypeId) -> KType {
        self.btf.resolve(ty)
    }
    fn type_name(&self, ty: TypeId) -> String {
        self.btf.type_name(ty)
    }
    fn field(&self, ty: TypeId, name: &str) -> Option<Field> {
        self.btf.field(ty, name)
    }
    fn field_names(&self, ty: TypeId) -> Vec<String> {
        self.btf.field_names(ty)
    }
    fn has_fsession(&self) -> bool {
        self.btf.has_fsession()
    }
    fn features(&self) -> Features {
        self.btf.features()
    }
    fn describe(&self) -> String {
        "the test kernel".into()
    }
}

/// Every `enum bpf_attach_type` value up to, not including, `BPF_TRACE_FSESSION` (as in the
/// uapi `bpf.h`).
const BPF_ATTACH_TYPES: &[&str] = &[
    "BPF_CGROUP_INET_INGRESS",
    "BPF_CGROUP_INET_EGRESS",
    "BPF_CGROUP_INET_SOCK_CREATE",
    "BPF_CGROUP_SOCK_OPS",
    "BPF_SK_SKB_STREAM_PARSER",
    "BPF_SK_SKB_STREAM_VERDICT",
    "BPF_CGROUP_DEVICE",
    "BPF_SK_MSG_VERDICT",
    "BPF_CGROUP_INET4_BIND",
    "BPF_CGROUP_INET6_BIND",
    "BPF_CGROUP_INET4_CONNECT",
    "BPF_CGROUP_INET6_CONNECT",
    "BPF_CGROUP_INET4_POST_BIND",
    "BPF_CGROUP_INET6_POST_BIND",
    "BPF_CGROUP_UDP4_SENDMSG",
    "BPF_CGROUP_UDP6_SENDMSG",
    "BPF_LIRC_MODE2",
    "BPF_FLOW_DISSECTOR",
    "BPF_CGROUP_SYSCTL",
    "BPF_CGROUP_UDP4_RECVMSG",
    "BPF_CGROUP_UDP6_RECVMSG",
    "BPF_CGROUP_GETSOCKOPT",
    "BPF_CGROUP_SETSOCKOPT",
    "BPF_TRACE_RAW_TP",
    "BPF_TRACE_FENTRY",
    "BPF_TRACE_FEXIT",
    "BPF_MODIFY_RETURN",
    "BPF_LSM_MAC",
    "BPF_TRACE_ITER",
    "BPF_CGROUP_INET4_GETPEERNAME",
    "BPF_CGROUP_INET6_GETPEERNAME",
    "BPF_CGROUP_INET4_GETSOCKNAME",
    "BPF_CGROUP_INET6_GETSOCKNAME",
    "BPF_XDP_DEVMAP",
    "BPF_CGROUP_INET_SOCK_RELEASE",
    "BPF_XDP_CPUMAP",
    "BPF_SK_LOOKUP",
    "BPF_XDP",
    "BPF_SK_SKB_VERDICT",
    "BPF_SK_REUSEPORT_SELECT",
    "BPF_SK_REUSEPORT_SELECT_OR_MIGRATE",
    "BPF_PERF_EVENT",
    "BPF_TRACE_KPROBE_MULTI",
    "BPF_LSM_CGROUP",
    "BPF_STRUCT_OPS",
    "BPF_NETFILTER",
    "BPF_TCX_INGRESS",
    "BPF_TCX_EGRESS",
    "BPF_TRACE_UPROBE_MULTI",
    "BPF_CGROUP_UNIX_CONNECT",
    "BPF_CGROUP_UNIX_SENDMSG",
    "BPF_CGROUP_UNIX_RECVMSG",
    "BPF_CGROUP_UNIX_GETPEERNAME",
    "BPF_CGROUP_UNIX_GETSOCKNAME",
    "BPF_NETKIT_PRIMARY",
    "BPF_NETKIT_PEER",
    "BPF_TRACE_KPROBE_SESSION",
    "BPF_TRACE_UPROBE_SESSION",
];

/// The fixture kernel. Integer names are DWARF's, as pahole writes them into vmlinux BTF.
fn kernel(features: Features) -> Builder {
    use Member::{Bits, F};
    let mut b = Builder::default();

    // Base types.
    let int = b.int("int", 4, INT_SIGNED);
    let uint = b.int("unsigned int", 4, 0);
    let long = b.int("long int", 8, INT_SIGNED);
    let ulong = b.int("long unsigned int", 8, 0);
    let llong = b.int("long long int", 8, INT_SIGNED);
    let ullong = b.int("long long unsigned int", 8, 0);
    let short = b.int("short int", 2, INT_SIGNED);
    let ushort = b.int("short unsigned int", 2, 0);
    // The kernel builds with -funsigned-char, and pahole does not set BTF_INT_CHAR.
    let char_ = b.int("char", 1, 0);
    let uchar = b.int("unsigned char", 1, 0);
    let bool_ = b.int("_Bool", 1, INT_BOOL);

    // Typedefs, with the kernel's chains.
    let kernel_long = b.typedef("__kernel_long_t", long);
    let kernel_ulong = b.typedef("__kernel_ulong_t", ulong);
    let kernel_size = b.typedef("__kernel_size_t", kernel_ulong);
    let kernel_ssize = b.typedef("__kernel_ssize_t", kernel_long);
    let size_t = b.typedef("size_t", kernel_size);
    let ssize_t = b.typedef("ssize_t", kernel_ssize);
    let kernel_loff = b.typedef("__kernel_loff_t", llong);
    let loff_t = b.typedef("loff_t", kernel_loff);
    let kernel_pid = b.typedef("__kernel_pid_t", int);
    b.typedef("pid_t", kernel_pid);
    let u8_ = b.typedef("__u8", uchar);
    let u8_ = b.typedef("u8", u8_);
    let u16_ = b.typedef("__u16", ushort);
    let u16_ = b.typedef("u16", u16_);
    let u32_ = b.typedef("__u32", uint);
    let u32_ = b.typedef("u32", u32_);
    let kernel_u64 = b.typedef("__u64", ullong);
    let u64_ = b.typedef("u64", kernel_u64);
    let umode_t = b.typedef("umode_t", ushort);
    let fmode_t = b.typedef("fmode_t", uint);
    let poll_t = b.typedef("__poll_t", uint);
    let bool_t = b.typedef("bool", bool_);

    // Pointers to base types.
    let void_ptr = b.ptr(0);
    let const_void = b.const_(0);
    let const_void_ptr = b.ptr(const_void);
    let user_char = b.type_tag("user", char_);
    let user_char_ptr = b.ptr(user_char);
    let const_char = b.const_(char_);
    let user_const_char = b.type_tag("user", const_char);
    let user_const_char_ptr = b.ptr(user_const_char);
    let const_char_ptr = b.ptr(const_char);
    let const_uchar = b.const_(uchar);
    let const_uchar_ptr = b.ptr(const_uchar);
    let loff_ptr = b.ptr(loff_t);

    // Structs that are only pointed to.
    let file_operations = b.fwd("file_operations");
    let const_fops = b.const_(file_operations);
    let const_fops_ptr = b.ptr(const_fops);
    let super_block = b.fwd("super_block");
    let super_block_ptr = b.ptr(super_block);
    let wait_queue_head = b.fwd("wait_queue_head");
    let wait_queue_head_t = b.typedef("wait_queue_head_t", wait_queue_head);
    let wait_queue_head_ptr = b.ptr(wait_queue_head_t);
    let proto_ops = b.fwd("proto_ops");
    let const_proto_ops = b.const_(proto_ops);
    let const_proto_ops_ptr = b.ptr(const_proto_ops);

    // Declared first: these structs point at each other.
    let file = b.declare();
    let file_ptr = b.ptr(file);
    let dentry = b.declare();
    let dentry_ptr = b.ptr(dentry);
    let inode = b.declare();
    let inode_ptr = b.ptr(inode);
    let sock = b.declare();
    let sock_ptr = b.ptr(sock);
    let socket = b.declare();
    let socket_ptr = b.ptr(socket);
    let poll_table_struct = b.declare();
    let poll_table_struct_ptr = b.ptr(poll_table_struct);

    // struct qstr { union { struct { u32 hash; u32 len; }; u64 hash_len; }; const unsigned char *name; }
    let hash_len_struct = b.struct_("", &[F("hash", u32_), F("len", u32_)]);
    let hash_len_union = b.union_("", &[F("", hash_len_struct), F("hash_len", u64_)]);
    let qstr = b.struct_("qstr", &[F("", hash_len_union), F("name", const_uchar_ptr)]);

    let vfsmount = b.struct_(
        "vfsmount",
        &[
            F("mnt_root", dentry_ptr),
            F("mnt_sb", super_block_ptr),
            F("mnt_flags", int),
        ],
    );
    let vfsmount_ptr = b.ptr(vfsmount);
    let path = b.struct_("path", &[F("mnt", vfsmount_ptr), F("dentry", dentry_ptr)]);
    let const_path = b.const_(path);
    let const_path_ptr = b.ptr(const_path);

    let iname = b.array(uchar, 40);
    b.define_struct(
        dentry,
        "dentry",
        &[
            F("d_flags", uint),
            F("d_parent", dentry_ptr),
            F("d_name", qstr),
            F("d_inode", inode_ptr),
            F("d_iname", iname),
        ],
    );
    b.define_struct(
        inode,
        "inode",
        &[F("i_mode", umode_t), F("i_ino", ulong), F("i_size", loff_t)],
    );
    b.define_struct(
        file,
        "file",
        &[
            F("f_mode", fmode_t),
            F("f_op", const_fops_ptr),
            F("private_data", void_ptr),
            F("f_inode", inode_ptr),
            F("f_flags", uint),
            F("f_path", path),
            F("f_pos", loff_t),
        ],
    );
    let open_how = b.struct_(
        "open_how",
        &[
            F("flags", kernel_u64),
            F("mode", kernel_u64),
            F("resolve", kernel_u64),
        ],
    );
    let open_how_ptr = b.ptr(open_how);

    b.define_struct(
        sock,
        "sock",
        &[
            Bits("sk_padding", uint, 1),
            Bits("sk_kern_sock", uint, 1),
            Bits("sk_no_check_tx", uint, 1),
            Bits("sk_no_check_rx", uint, 1),
            F("sk_userlocks", u8_),
            F("sk_type", u16_),
            F("sk_protocol", u16_),
        ],
    );
    let socket_state_enum = b.enum_(
        "",
        4,
        false,
        &[
            ("SS_FREE", 0),
            ("SS_UNCONNECTED", 1),
            ("SS_CONNECTING", 2),
            ("SS_CONNECTED", 3),
            ("SS_DISCONNECTING", 4),
        ],
    );
    let socket_state = b.typedef("socket_state", socket_state_enum);
    b.define_struct(
        socket,
        "socket",
        &[
            F("state", socket_state),
            F("type", short),
            F("flags", ulong),
            F("file", file_ptr),
            F("sk", sock_ptr),
            F("ops", const_proto_ops_ptr),
        ],
    );

    // typedef void (*poll_queue_proc)(struct file *, wait_queue_head_t *, struct poll_table_struct *);
    let qproc = b.func_proto(
        0,
        &[
            ("", file_ptr),
            ("", wait_queue_head_ptr),
            ("", poll_table_struct_ptr),
        ],
    );
    let qproc_ptr = b.ptr(qproc);
    let poll_queue_proc = b.typedef("poll_queue_proc", qproc_ptr);
    b.define_struct(
        poll_table_struct,
        "poll_table_struct",
        &[F("_qproc", poll_queue_proc), F("_key", poll_t)],
    );
    let poll_table = b.typedef("poll_table", poll_table_struct);
    let poll_table_ptr = b.ptr(poll_table);

    let mut attach_types: Vec<(&'static str, i64)> = BPF_ATTACH_TYPES
        .iter()
        .enumerate()
        .map(|(i, &n)| (n, i as i64))
        .collect();
    if features.fsession {
        attach_types.push(("BPF_TRACE_FSESSION", attach_types.len() as i64));
    }
    attach_types.push(("__MAX_BPF_ATTACH_TYPE", attach_types.len() as i64));
    b.enum_("bpf_attach_type", 4, false, &attach_types);
    // The helpers that show the other features; the values are made up.
    let mut func_ids: Vec<(&'static str, i64)> = vec![("BPF_FUNC_unspec", 0)];
    for i in FEATURES.iter().filter(|i| i.feature != Feature::Fsession) {
        if features.has(i.feature) {
            func_ids.push((i.btf_value, func_ids.len() as i64));
        }
    }
    b.enum_("bpf_func_id", 4, false, &func_ids);

    // The functions, in no particular order (as in vmlinux).
    b.func(
        "vfs_write",
        ssize_t,
        &[
            ("file", file_ptr),
            ("buf", user_const_char_ptr),
            ("count", size_t),
            ("pos", loff_ptr),
        ],
    );
    b.func(
        "vfs_read",
        ssize_t,
        &[
            ("file", file_ptr),
            ("buf", user_char_ptr),
            ("count", size_t),
            ("pos", loff_ptr),
        ],
    );
    b.func(
        "do_sys_openat2",
        long,
        &[
            ("dfd", int),
            ("filename", user_const_char_ptr),
            ("how", open_how_ptr),
        ],
    );
    b.func("kfree", 0, &[("objp", const_void_ptr)]);
    b.func("security_file_open", int, &[("file", file_ptr)]);
    b.func(
        "tcp_poll",
        poll_t,
        &[
            ("file", file_ptr),
            ("sock", socket_ptr),
            ("wait", poll_table_ptr),
        ],
    );
    b.func("may_open_dev", bool_t, &[("path", const_path_ptr)]);
    // Variadic: BTF ends the parameters with an unnamed `void` one.
    b.func("_printk", int, &[("fmt", const_char_ptr), ("", 0)]);
    b.func("ktime_get_mono_fast_ns", u64_, &[]);
    b
}

const INT_SIGNED: u32 = 1;
const INT_BOOL: u32 = 4;

/// One member of a struct or union being built.
enum Member {
    /// A plain member.
    F(&'static str, TypeId),
    /// A bitfield member of the given width in bits.
    Bits(&'static str, TypeId, u32),
}

struct BuiltMember {
    name: &'static str,
    ty: TypeId,
    bit_offset: u32,
    bits: u32,
}

/// A BTF type record being built; ids are positions in `Builder::types` plus one.
enum Entry {
    /// Declared, not yet defined.
    Declared,
    Int {
        name: &'static str,
        size: u32,
        encoding: u32,
    },
    Ptr(TypeId),
    Array {
        elem: TypeId,
        len: u32,
    },
    Composite {
        name: &'static str,
        union: bool,
        size: u32,
        align: u32,
        members: Vec<BuiltMember>,
    },
    Enum {
        name: &'static str,
        size: u32,
        signed: bool,
        values: Vec<(&'static str, i64)>,
    },
    Fwd(&'static str),
    Typedef(&'static str, TypeId),
    Const(TypeId),
    TypeTag(&'static str, TypeId),
    Func(&'static str, TypeId),
    FuncProto {
        ret: TypeId,
        params: Vec<(&'static str, TypeId)>,
    },
    /// Any record, spelled out (for tests of kinds the fixture does not use).
    #[cfg_attr(not(test), allow(dead_code))]
    Raw {
        name: &'static str,
        kind: u32,
        vlen: usize,
        kflag: bool,
        size_type: u32,
        extra: Vec<u32>,
    },
}

/// Builds BTF type records and encodes them as a raw BTF blob. Only for constant fixture
/// data: misuse (an undefined declared type, a forward reference in a layout) panics.
#[derive(Default)]
struct Builder {
    types: Vec<Entry>,
}

impl Builder {
    fn add(&mut self, e: Entry) -> TypeId {
        self.types.push(e);
        self.types.len() as TypeId
    }

    fn entry(&self, id: TypeId) -> &Entry {
        &self.types[id as usize - 1]
    }

    fn int(&mut self, name: &'static str, size: u32, encoding: u32) -> TypeId {
        self.add(Entry::Int {
            name,
            size,
            encoding,
        })
    }
    fn ptr(&mut self, ty: TypeId) -> TypeId {
        self.add(Entry::Ptr(ty))
    }
    fn const_(&mut self, ty: TypeId) -> TypeId {
        self.add(Entry::Const(ty))
    }
    fn type_tag(&mut self, name: &'static str, ty: TypeId) -> TypeId {
        self.add(Entry::TypeTag(name, ty))
    }
    fn typedef(&mut self, name: &'static str, ty: TypeId) -> TypeId {
        self.add(Entry::Typedef(name, ty))
    }
    fn array(&mut self, elem: TypeId, len: u32) -> TypeId {
        self.add(Entry::Array { elem, len })
    }
    fn fwd(&mut self, name: &'static str) -> TypeId {
        self.add(Entry::Fwd(name))
    }
    fn enum_(
        &mut self,
        name: &'static str,
        size: u32,
        signed: bool,
        values: &[(&'static str, i64)],
    ) -> TypeId {
        self.add(Entry::Enum {
            name,
            size,
            signed,
            values: values.to_vec(),
        })
    }
    fn func_proto(&mut self, ret: TypeId, params: &[(&'static str, TypeId)]) -> TypeId {
        self.add(Entry::FuncProto {
            ret,
            params: params.to_vec(),
        })
    }
    /// A FUNC with its FUNC_PROTO; returns the FUNC.
    fn func(
        &mut self,
        name: &'static str,
        ret: TypeId,
        params: &[(&'static str, TypeId)],
    ) -> TypeId {
        let proto = self.func_proto(ret, params);
        self.add(Entry::Func(name, proto))
    }
    /// A type id to define later (for structs that point at each other).
    fn declare(&mut self) -> TypeId {
        self.add(Entry::Declared)
    }
    fn struct_(&mut self, name: &'static str, members: &[Member]) -> TypeId {
        let id = self.declare();
        self.define(id, name, false, members);
        id
    }
    fn union_(&mut self, name: &'static str, members: &[Member]) -> TypeId {
        let id = self.declare();
        self.define(id, name, true, members);
        id
    }
    fn define_struct(&mut self, id: TypeId, name: &'static str, members: &[Member]) {
        self.define(id, name, false, members);
    }

    /// Lays the members out as a C compiler on x86_64 would, and defines `id`.
    fn define(&mut self, id: TypeId, name: &'static str, union: bool, members: &[Member]) {
        let mut built = Vec::with_capacity(members.len());
        let (mut bit, mut size_bits, mut align) = (0u32, 0u32, 1u32);
        for m in members {
            let (mname, ty, bits) = match *m {
                Member::F(n, t) => (n, t, 0),
                Member::Bits(n, t, w) => (n, t, w),
            };
            let (size, a) = self.size_align(ty);
            align = align.max(a);
            let start = if union {
                0
            } else if bits == 0 {
                bit.next_multiple_of(a * 8)
            } else {
                // A bitfield may not straddle a unit of its type.
                let unit = size * 8;
                if bit / unit == (bit + bits - 1) / unit {
                    bit
                } else {
                    bit.next_multiple_of(unit)
                }
            };
            let end = start + if bits == 0 { size * 8 } else { bits };
            size_bits = size_bits.max(end);
            bit = end;
            built.push(BuiltMember {
                name: mname,
                ty,
                bit_offset: start,
                bits,
            });
        }
        let size = size_bits.div_ceil(8).next_multiple_of(align);
        self.types[id as usize - 1] = Entry::Composite {
            name,
            union,
            size,
            align,
            members: built,
        };
    }

    fn size_align(&self, ty: TypeId) -> (u32, u32) {
        if ty == 0 {
            return (0, 1);
        }
        match self.entry(ty) {
            Entry::Int { size, .. } | Entry::Enum { size, .. } => (*size, *size),
            Entry::Ptr(_) => (8, 8),
            Entry::Array { elem, len } => {
                let (s, a) = self.size_align(*elem);
                (s * len, a)
            }
            Entry::Composite { size, align, .. } => (*size, *align),
            Entry::Typedef(_, t) | Entry::Const(t) | Entry::TypeTag(_, t) => self.size_align(*t),
            Entry::Fwd(_) | Entry::Func(..) | Entry::FuncProto { .. } | Entry::Raw { .. } => (0, 1),
            Entry::Declared => panic!("type {ty} used by value before it is defined"),
        }
    }

    /// The raw BTF blob: header, type section, string section.
    fn encode(&self) -> Vec<u8> {
        let mut strings = Strings::default();
        let mut t = Vec::new();
        fn put(t: &mut Vec<u8>, words: &[u32]) {
            for w in words {
                t.extend_from_slice(&w.to_le_bytes());
            }
        }
        let info = |kind: u32, vlen: usize, kflag: bool| -> u32 {
            (u32::from(kflag) << 31) | (kind << 24) | vlen as u32
        };
        let int_id = self
            .types
            .iter()
            .position(|e| matches!(e, Entry::Int { name: "int", .. }))
            .map_or(0, |i| i as u32 + 1);
        for e in &self.types {
            match e {
                Entry::Declared => panic!("a declared type was never defined"),
                Entry::Int {
                    name,
                    size,
                    encoding,
                } => put(
                    &mut t,
                    &[
                        strings.add(name),
                        info(1, 0, false),
                        *size,
                        (encoding << 24) | (size * 8),
                    ],
                ),
                Entry::Ptr(ty) => put(&mut t, &[0, info(2, 0, false), *ty]),
                Entry::Array { elem, len } => {
                    put(&mut t, &[0, info(3, 0, false), 0, *elem, int_id, *len])
                }
                Entry::Composite {
                    name,
                    union,
                    size,
                    members,
                    ..
                } => {
                    let kflag = members.iter().any(|m| m.bits != 0);
                    let kind = if *union { 5 } else { 4 };
                    put(
                        &mut t,
                        &[strings.add(name), info(kind, members.len(), kflag), *size],
                    );
                    for m in members {
                        let offset = if kflag {
                            (m.bits << 24) | m.bit_offset
                        } else {
                            m.bit_offset
                        };
                        put(&mut t, &[strings.add(m.name), m.ty, offset]);
                    }
                }
                Entry::Enum {
                    name,
                    size,
                    signed,
                    values,
                } => {
                    put(
                        &mut t,
                        &[strings.add(name), info(6, values.len(), *signed), *size],
                    );
                    for (n, v) in values {
                        put(&mut t, &[strings.add(n), *v as u32]);
                    }
                }
                Entry::Fwd(name) => put(&mut t, &[strings.add(name), info(7, 0, false), 0]),
                Entry::Typedef(name, ty) => {
                    put(&mut t, &[strings.add(name), info(8, 0, false), *ty])
                }
                Entry::Const(ty) => put(&mut t, &[0, info(10, 0, false), *ty]),
                Entry::Func(name, proto) => {
                    // vlen 1: BTF_FUNC_GLOBAL linkage.
                    put(&mut t, &[strings.add(name), info(12, 1, false), *proto])
                }
                Entry::FuncProto { ret, params } => {
                    put(&mut t, &[0, info(13, params.len(), false), *ret]);
                    for (n, ty) in params {
                        put(&mut t, &[strings.add(n), *ty]);
                    }
                }
                Entry::TypeTag(name, ty) => {
                    put(&mut t, &[strings.add(name), info(18, 0, false), *ty])
                }
                Entry::Raw {
                    name,
                    kind,
                    vlen,
                    kflag,
                    size_type,
                    extra,
                } => {
                    put(
                        &mut t,
                        &[strings.add(name), info(*kind, *vlen, *kflag), *size_type],
                    );
                    put(&mut t, extra);
                }
            }
        }
        let s = strings.bytes;
        let mut out = Vec::with_capacity(24 + t.len() + s.len());
        out.extend_from_slice(&0xeb9fu16.to_le_bytes());
        out.push(1); // version
        out.push(0); // flags
        for w in [24, 0, t.len() as u32, t.len() as u32, s.len() as u32] {
            out.extend_from_slice(&w.to_le_bytes());
        }
        out.extend_from_slice(&t);
        out.extend_from_slice(&s);
        out
    }
}

/// A deduplicated BTF string section.
struct Strings {
    bytes: Vec<u8>,
    offsets: std::collections::HashMap<&'static str, u32>,
}

impl Default for Strings {
    fn default() -> Self {
        let mut offsets = std::collections::HashMap::new();
        offsets.insert("", 0);
        Strings {
            bytes: vec![0],
            offsets,
        }
    }
}

impl Strings {
    fn add(&mut self, s: &'static str) -> u32 {
        *self.offsets.entry(s).or_insert_with(|| {
            let off = self.bytes.len() as u32;
            self.bytes.extend_from_slice(s.as_bytes());
            self.bytes.push(0);
            off
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pointee(k: &impl KernelTypes, ty: TypeId) -> (TypeId, bool) {
        match k.resolve(ty) {
            KType::Ptr { pointee, user } => (pointee, user),
            other => panic!("{} is not a pointer: {other:?}", k.type_name(ty)),
        }
    }

    /// The first type whose C spelling is `name` (for typedefs no function uses).
    fn named(k: &Fixture, name: &str) -> TypeId {
        (1..k.btf.type_count() as TypeId)
            .find(|&id| k.type_name(id) == name)
            .unwrap_or_else(|| panic!("no type {name}"))
    }

    fn sig(k: &Fixture, name: &str) -> Vec<(String, String)> {
        let f = k
            .function(name)
            .unwrap_or_else(|| panic!("no function {name}"));
        std::iter::once((String::new(), k.type_name(f.ret)))
            .chain(f.params.iter().map(|p| (p.name.clone(), k.type_name(p.ty))))
            .collect()
    }

    fn pairs(v: &[(&str, &str)]) -> Vec<(String, String)> {
        v.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    const INT8U: KType = KType::Int {
        size: 8,
        signed: false,
        char_like: false,
        bool_like: false,
    };
    const INT8S: KType = KType::Int {
        size: 8,
        signed: true,
        char_like: false,
        bool_like: false,
    };

    #[test]
    fn signatures_are_spelled_like_linux() {
        let k = Fixture::new();
        let cases: &[(&str, &[(&str, &str)])] = &[
            (
                "vfs_read",
                &[
                    ("", "ssize_t"),
                    ("file", "struct file *"),
                    ("buf", "char *"),
                    ("count", "size_t"),
                    ("pos", "loff_t *"),
                ],
            ),
            (
                "vfs_write",
                &[
                    ("", "ssize_t"),
                    ("file", "struct file *"),
                    ("buf", "const char *"),
                    ("count", "size_t"),
                    ("pos", "loff_t *"),
                ],
            ),
            (
                "do_sys_openat2",
                &[
                    ("", "long int"),
                    ("dfd", "int"),
                    ("filename", "const char *"),
                    ("how", "struct open_how *"),
                ],
            ),
            ("kfree", &[("", "void"), ("objp", "const void *")]),
            (
                "security_file_open",
                &[("", "int"), ("file", "struct file *")],
            ),
            (
                "tcp_poll",
                &[
                    ("", "__poll_t"),
                    ("file", "struct file *"),
                    ("sock", "struct socket *"),
                    ("wait", "poll_table *"),
                ],
            ),
            (
                "may_open_dev",
                &[("", "bool"), ("path", "const struct path *")],
            ),
            ("_printk", &[("", "int"), ("fmt", "const char *")]),
            ("ktime_get_mono_fast_ns", &[("", "u64")]),
        ];
        for (name, want) in cases {
            assert_eq!(sig(&k, name), pairs(want), "{name}");
        }
        assert!(k.function("vfs_readv").is_none());
        assert!(k.function("file").is_none(), "a struct is not a function");
    }

    #[test]
    fn function_names_are_sorted() {
        let k = Fixture::new();
        assert_eq!(
            k.function_names(),
            [
                "_printk",
                "do_sys_openat2",
                "kfree",
                "ktime_get_mono_fast_ns",
                "may_open_dev",
                "security_file_open",
                "tcp_poll",
                "vfs_read",
                "vfs_write",
            ]
        );
    }

    #[test]
    fn resolve_follows_typedef_chains() {
        let k = Fixture::new();
        let read = k.function("vfs_read").unwrap();
        assert_eq!(k.resolve(read.ret), INT8S);
        assert_eq!(k.resolve(read.params[2].ty), INT8U);
        let (loff, user) = pointee(&k, read.params[3].ty);
        assert!(!user);
        assert_eq!(k.type_name(loff), "loff_t");
        assert_eq!(k.resolve(loff), INT8S);
        let (ch, user) = pointee(&k, read.params[1].ty);
        assert!(user, "char __user *buf");
        assert_eq!(
            k.resolve(ch),
            KType::Int {
                size: 1,
                signed: false,
                char_like: true,
                bool_like: false
            }
        );
        let write = k.function("vfs_write").unwrap();
        let (cch, user) = pointee(&k, write.params[1].ty);
        assert!(user, "const char __user *buf");
        assert_eq!(k.resolve(cch), k.resolve(ch));
        let (file, user) = pointee(&k, read.params[0].ty);
        assert!(!user);
        assert!(
            matches!(k.resolve(file), KType::Struct { ref name, union: false, .. } if name == "file")
        );

        for (name, want) in [
            ("size_t", INT8U),
            ("ssize_t", INT8S),
            ("loff_t", INT8S),
            ("u64", INT8U),
            ("__kernel_size_t", INT8U),
            (
                "umode_t",
                KType::Int {
                    size: 2,
                    signed: false,
                    char_like: false,
                    bool_like: false,
                },
            ),
            (
                "pid_t",
                KType::Int {
                    size: 4,
                    signed: true,
                    char_like: false,
                    bool_like: false,
                },
            ),
            (
                "u8",
                KType::Int {
                    size: 1,
                    signed: false,
                    char_like: true,
                    bool_like: false,
                },
            ),
            (
                "bool",
                KType::Int {
                    size: 1,
                    signed: false,
                    char_like: false,
                    bool_like: true,
                },
            ),
        ] {
            assert_eq!(k.resolve(named(&k, name)), want, "{name}");
        }
        let poll_table = named(&k, "poll_table");
        assert!(
            matches!(k.resolve(poll_table), KType::Struct { ref name, size: 16, .. } if name == "poll_table_struct")
        );

        let kfree = k.function("kfree").unwrap();
        assert_eq!(k.resolve(kfree.ret), KType::Void);
        let (v, user) = pointee(&k, kfree.params[0].ty);
        assert!(!user);
        assert_eq!(k.resolve(v), KType::Void);
        assert_eq!(k.type_name(v), "const void");
        assert_eq!(k.resolve(0), KType::Void);
        assert_eq!(k.type_name(0), "void");
        assert_eq!(k.resolve(100_000), KType::Other);

        let tcp = k.function("tcp_poll").unwrap();
        assert_eq!(
            k.resolve(tcp.ret),
            KType::Int {
                size: 4,
                signed: false,
                char_like: false,
                bool_like: false
            }
        );
    }

    #[test]
    fn fields_through_anonymous_union_in_qstr() {
        let k = Fixture::new();
        let f = k.function("vfs_read").unwrap();
        let (file, _) = pointee(&k, f.params[0].ty);
        let f_path = k.field(file, "f_path").unwrap();
        assert_eq!(k.type_name(f_path.ty), "struct path");
        let dentry = k.field(f_path.ty, "dentry").unwrap();
        assert_eq!(k.type_name(dentry.ty), "struct dentry *");
        let (dentry, _) = pointee(&k, dentry.ty);
        let d_name = k.field(dentry, "d_name").unwrap();
        assert_eq!(k.type_name(d_name.ty), "struct qstr");
        let qstr = d_name.ty;

        assert_eq!(k.field_names(qstr), ["hash", "len", "hash_len", "name"]);
        let want = [
            ("hash", "u32"),
            ("len", "u32"),
            ("hash_len", "u64"),
            ("name", "const unsigned char *"),
        ];
        for (name, ty) in want {
            let f = k.field(qstr, name).unwrap_or_else(|| panic!("qstr.{name}"));
            assert_eq!(f.name, name);
            assert_eq!(k.type_name(f.ty), ty, "qstr.{name}");
            assert!(!f.bitfield);
        }
        assert!(k.field(qstr, "").is_none());
        assert!(k.field(qstr, "nope").is_none());
        // The anonymous union itself.
        let union = k
            .btf
            .struct_by_name("qstr")
            .and_then(|q| {
                (1..q)
                    .rev()
                    .find(|&id| matches!(k.resolve(id), KType::Struct { union: true, .. }))
            })
            .unwrap();
        assert_eq!(k.type_name(union), "union {...}");
        assert_eq!(k.field_names(union), ["hash", "len", "hash_len"]);

        let name = k.field(qstr, "name").unwrap();
        let (uc, user) = pointee(&k, name.ty);
        assert!(!user);
        assert!(matches!(
            k.resolve(uc),
            KType::Int {
                size: 1,
                char_like: true,
                ..
            }
        ));

        let d_iname = k.field(dentry, "d_iname").unwrap();
        assert_eq!(k.type_name(d_iname.ty), "unsigned char[40]");
        let KType::Array { elem, len: 40 } = k.resolve(d_iname.ty) else {
            panic!("d_iname")
        };
        assert_eq!(k.type_name(elem), "unsigned char");
        assert_eq!(
            k.field_names(dentry),
            ["d_flags", "d_parent", "d_name", "d_inode", "d_iname"]
        );
        // A pointer is not a struct: `field` wants the pointee.
        assert!(k.field(f.params[0].ty, "f_path").is_none());
        assert!(k.field_names(f.params[0].ty).is_empty());
    }

    #[test]
    fn struct_members() {
        let k = Fixture::new();
        let file = k.struct_by_name("file").unwrap();
        let cases = [
            ("f_mode", "fmode_t"),
            ("f_op", "const struct file_operations *"),
            ("private_data", "void *"),
            ("f_inode", "struct inode *"),
            ("f_flags", "unsigned int"),
            ("f_path", "struct path"),
            ("f_pos", "loff_t"),
        ];
        for (name, ty) in cases {
            assert_eq!(
                k.type_name(k.field(file, name).unwrap().ty),
                ty,
                "file.{name}"
            );
        }
        let (fops, _) = pointee(&k, k.field(file, "f_op").unwrap().ty);
        assert_eq!(
            k.resolve(fops),
            KType::Struct {
                name: "file_operations".into(),
                size: 0,
                union: false
            }
        );
        assert!(k.field_names(fops).is_empty());

        let inode = k.struct_by_name("inode").unwrap();
        assert_eq!(k.field_names(inode), ["i_mode", "i_ino", "i_size"]);
        assert_eq!(k.type_name(k.field(inode, "i_mode").unwrap().ty), "umode_t");
        assert_eq!(
            k.type_name(k.field(inode, "i_ino").unwrap().ty),
            "long unsigned int"
        );

        let open_how = k.struct_by_name("open_how").unwrap();
        assert_eq!(k.field_names(open_how), ["flags", "mode", "resolve"]);
        assert!(matches!(
            k.resolve(open_how),
            KType::Struct { size: 24, .. }
        ));

        let sock = k.struct_by_name("sock").unwrap();
        assert!(k.field(sock, "sk_padding").unwrap().bitfield);
        assert!(k.field(sock, "sk_no_check_rx").unwrap().bitfield);
        assert!(!k.field(sock, "sk_userlocks").unwrap().bitfield);
        assert!(!k.field(sock, "sk_protocol").unwrap().bitfield);

        let socket = k.struct_by_name("socket").unwrap();
        let state = k.field(socket, "state").unwrap();
        assert_eq!(k.type_name(state.ty), "socket_state");
        assert_eq!(
            k.resolve(state.ty),
            KType::Enum {
                size: 4,
                signed: false
            }
        );
        assert_eq!(
            k.type_name(k.field(socket, "sk").unwrap().ty),
            "struct sock *"
        );
        assert_eq!(
            k.type_name(k.field(socket, "ops").unwrap().ty),
            "const struct proto_ops *"
        );

        let pt = k.struct_by_name("poll_table_struct").unwrap();
        let qproc = k.field(pt, "_qproc").unwrap().ty;
        assert_eq!(k.type_name(qproc), "poll_queue_proc");
        let (proto, _) = pointee(&k, qproc);
        assert_eq!(k.resolve(proto), KType::FuncProto);
        assert_eq!(
            k.type_name(named(&k, "poll_queue_proc").min(qproc)),
            "poll_queue_proc"
        );
        let KType::Ptr { .. } = k.resolve(qproc) else {
            panic!()
        };

        let vfsmount = k.struct_by_name("vfsmount").unwrap();
        assert_eq!(k.field_names(vfsmount), ["mnt_root", "mnt_sb", "mnt_flags"]);
    }

    #[test]
    fn fsession_variants() {
        assert!(Fixture::new().has_fsession());
        assert!(!Fixture::without_fsession().has_fsession());
        assert!(Fixture::default().has_fsession());
    }

    #[test]
    fn bytes_read_back_as_btf() {
        let k = Fixture::new();
        assert_eq!(&k.bytes()[..2], &[0x9f, 0xeb]);
        let b = Btf::from_bytes(k.bytes().to_vec()).unwrap();
        assert_eq!(b.function("vfs_read"), k.function("vfs_read"));
        assert!(b.has_fsession());
    }

    /// Builds a kernel from `f` and returns it with the id `f` returns.
    fn build(f: impl FnOnce(&mut Builder) -> TypeId) -> (Btf, TypeId) {
        let mut b = Builder::default();
        let id = f(&mut b);
        (Btf::from_bytes(b.encode()).unwrap(), id)
    }

    fn raw(b: &mut Builder, kind: u32, name: &'static str, size_type: u32) -> TypeId {
        b.add(Entry::Raw {
            name,
            kind,
            vlen: 0,
            kflag: false,
            size_type,
            extra: vec![],
        })
    }

    #[test]
    fn declarator_spellings() {
        type Make = Box<dyn Fn(&mut Builder) -> TypeId>;
        let cases: Vec<(&str, Make)> = vec![
            (
                "char *[4]",
                Box::new(|b| {
                    let c = b.int("char", 1, 0);
                    let p = b.ptr(c);
                    b.array(p, 4)
                }),
            ),
            (
                "char (*)[4]",
                Box::new(|b| {
                    let c = b.int("char", 1, 0);
                    let a = b.array(c, 4);
                    b.ptr(a)
                }),
            ),
            (
                "int[2][3]",
                Box::new(|b| {
                    let i = b.int("int", 4, INT_SIGNED);
                    let inner = b.array(i, 3);
                    b.array(inner, 2)
                }),
            ),
            (
                "char *const",
                Box::new(|b| {
                    let c = b.int("char", 1, 0);
                    let p = b.ptr(c);
                    b.const_(p)
                }),
            ),
            (
                "const char *const *",
                Box::new(|b| {
                    let c = b.int("char", 1, 0);
                    let cc = b.const_(c);
                    let p = b.ptr(cc);
                    let cp = b.const_(p);
                    b.ptr(cp)
                }),
            ),
            (
                "int *(*)(void)",
                Box::new(|b| {
                    let i = b.int("int", 4, INT_SIGNED);
                    let p = b.ptr(i);
                    let f = b.func_proto(p, &[]);
                    b.ptr(f)
                }),
            ),
            (
                "void (*)(int, ...)",
                Box::new(|b| {
                    let i = b.int("int", 4, INT_SIGNED);
                    let f = b.func_proto(0, &[("a", i), ("", 0)]);
                    b.ptr(f)
                }),
            ),
            (
                "int (*[2])(void)",
                Box::new(|b| {
                    let i = b.int("int", 4, INT_SIGNED);
                    let f = b.func_proto(i, &[]);
                    let p = b.ptr(f);
                    b.array(p, 2)
                }),
            ),
            (
                "volatile int *",
                Box::new(|b| {
                    let i = b.int("int", 4, INT_SIGNED);
                    let v = raw(b, 9, "", i);
                    b.ptr(v)
                }),
            ),
            (
                "char *restrict",
                Box::new(|b| {
                    let c = b.int("char", 1, 0);
                    let p = b.ptr(c);
                    raw(b, 11, "", p)
                }),
            ),
            (
                "union u *",
                Box::new(|b| {
                    let u = b.add(Entry::Raw {
                        name: "u",
                        kind: 7,
                        vlen: 0,
                        kflag: true,
                        size_type: 0,
                        extra: vec![],
                    });
                    b.ptr(u)
                }),
            ),
            ("enum e", Box::new(|b| b.enum_("e", 4, true, &[("A", -1)]))),
            ("double", Box::new(|b| raw(b, 16, "double", 8))),
        ];
        for (want, f) in cases {
            let (btf, id) = build(f);
            assert_eq!(btf.type_name(id), want);
        }
    }

    #[test]
    fn resolve_kinds() {
        let (b, id) = build(|b| b.enum_("e", 4, true, &[("A", -1)]));
        assert_eq!(
            b.resolve(id),
            KType::Enum {
                size: 4,
                signed: true
            }
        );
        let (b, id) = build(|b| {
            b.add(Entry::Raw {
                name: "e64",
                kind: 19,
                vlen: 1,
                kflag: false,
                size_type: 8,
                extra: vec![0, 1, 2],
            })
        });
        assert_eq!(
            b.resolve(id),
            KType::Enum {
                size: 8,
                signed: false
            }
        );
        assert_eq!(b.type_name(id), "enum e64");
        let (b, id) = build(|b| {
            b.add(Entry::Raw {
                name: "u",
                kind: 7,
                vlen: 0,
                kflag: true,
                size_type: 0,
                extra: vec![],
            })
        });
        assert_eq!(
            b.resolve(id),
            KType::Struct {
                name: "u".into(),
                size: 0,
                union: true
            }
        );
        let (b, id) = build(|b| raw(b, 16, "double", 8));
        assert_eq!(b.resolve(id), KType::Other);
        let (b, id) = build(|b| {
            let c = b.int("signed char", 1, INT_SIGNED);
            let tag = b.type_tag("percpu", c);
            let v = raw(b, 9, "", tag);
            let user = b.type_tag("user", v);
            let td = b.typedef("t", user);
            b.ptr(td)
        });
        assert_eq!(b.type_name(id), "t *");
        let KType::Ptr {
            pointee,
            user: true,
        } = b.resolve(id)
        else {
            panic!("{:?}", b.resolve(id))
        };
        assert_eq!(
            b.resolve(pointee),
            KType::Int {
                size: 1,
                signed: true,
                char_like: true,
                bool_like: false
            }
        );
        // Explicit BTF_INT_CHAR encoding, and a pointer with a non-user tag.
        let (b, id) = build(|b| {
            let c = b.int("weird", 1, 2);
            let tag = b.type_tag("rcu", c);
            b.ptr(tag)
        });
        let KType::Ptr {
            pointee,
            user: false,
        } = b.resolve(id)
        else {
            panic!()
        };
        assert!(matches!(
            b.resolve(pointee),
            KType::Int {
                char_like: true,
                ..
            }
        ));
    }

    #[test]
    fn first_of_duplicate_functions_wins() {
        let (b, _) = build(|b| {
            let i = b.int("int", 4, INT_SIGNED);
            let l = b.int("long int", 8, INT_SIGNED);
            b.func("dup", i, &[("a", i)]);
            b.func("dup", l, &[("b", l)]);
            b.func("other", 0, &[]);
            0
        });
        let f = b.function("dup").unwrap();
        assert_eq!(b.type_name(f.ret), "int");
        assert_eq!(f.params[0].name, "a");
        assert_eq!(b.function_names(), ["dup", "other"]);
        // Past the scanning lookups, the index must agree.
        for _ in 0..10 {
            assert_eq!(b.function("dup").unwrap(), f);
            assert_eq!(b.function("other").unwrap().params, []);
            assert!(b.function("none").is_none());
        }
    }

    #[test]
    fn old_style_bitfields_are_bitfields() {
        // Without kind_flag, old encoders gave bitfields their own INT with the bit width.
        let (b, s) = build(|b| {
            let bits3 = b.add(Entry::Raw {
                name: "unsigned int",
                kind: 1,
                vlen: 0,
                kflag: false,
                size_type: 4,
                extra: vec![3],
            });
            let full = b.int("unsigned int", 4, 0);
            let member = |name, ty, bit_offset| BuiltMember {
                name,
                ty,
                bit_offset,
                bits: 0,
            };
            b.add(Entry::Composite {
                name: "s",
                union: false,
                size: 8,
                align: 4,
                members: vec![member("a", bits3, 0), member("b", full, 32)],
            })
        });
        assert_eq!(b.field_names(s), ["a", "b"]);
        assert!(b.field(s, "a").unwrap().bitfield);
        assert!(!b.field(s, "b").unwrap().bitfield);
    }

    #[test]
    fn cycles_terminate() {
        // typedef a -> typedef b -> typedef a, and a prototype whose parameters point back at it.
        let (b, a) = build(|b| {
            let a = b.declare();
            let bb = b.typedef("b", a);
            b.types[a as usize - 1] = Entry::Typedef("a", bb);
            a
        });
        assert_eq!(b.resolve(a), KType::Other);
        assert_eq!(b.type_name(a), "a");
        let (b, p) = build(|b| {
            let p = b.declare();
            let proto = b.func_proto(p, &[("x", p), ("y", p), ("z", p)]);
            b.types[p as usize - 1] = Entry::Ptr(proto);
            p
        });
        assert_eq!(
            b.resolve(p),
            KType::Ptr {
                pointee: p + 1,
                user: false
            }
        );
        let name = b.type_name(p);
        assert!(name.len() < 1 << 20, "{} bytes", name.len());
        // A struct whose anonymous member is itself.
        let (b, s) = build(|b| {
            let s = b.declare();
            b.types[s as usize - 1] = Entry::Raw {
                name: "s",
                kind: 4,
                vlen: 2,
                kflag: false,
                size_type: 8,
                extra: vec![0, s, 0, 0, s, 0],
            };
            s
        });
        assert!(b.field_names(s).is_empty());
        assert!(b.field(s, "x").is_none());
    }

    /// Every truncation and many corruptions of the fixture's blob: errors or answers, but
    /// never a panic or a hang.
    #[test]
    fn corrupt_fixture_never_panics() {
        let data = Fixture::new().bytes().to_vec();
        let use_all = |b: &Btf| {
            for id in 0..b.type_count() as TypeId + 2 {
                let _ = b.resolve(id);
                let _ = b.type_name(id);
                for n in b.field_names(id) {
                    let _ = b.field(id, &n);
                }
            }
            for n in b.function_names() {
                let _ = b.function(&n);
            }
            let _ = b.function("vfs_read");
            let _ = b.has_fsession();
        };
        for cut in 0..data.len() {
            if let Ok(b) = Btf::from_bytes(data[..cut].to_vec()) {
                use_all(&b);
            }
        }
        for at in 0..data.len() {
            // Two values everywhere, three more at every 16th byte (debug builds are slow).
            let more = if at % 16 == 0 { 5 } else { 2 };
            let values = [0xff, data[at] ^ 0x01, 0x00, 0x80, data[at].wrapping_add(1)];
            for &v in &values[..more] {
                let mut d = data.clone();
                d[at] = v;
                if let Ok(b) = Btf::from_bytes(d) {
                    use_all(&b);
                }
            }
        }
    }
}
