//! A small hand-built kernel for checker and codegen tests: a few real Linux functions and the
//! structs they reach, with Linux's names and types (typedef chains, `__user` pointers, the
//! anonymous union in `struct qstr`, a bitfield in `struct sock`).
//!
//! The types are built as BTF records by a tiny builder, encoded as a raw BTF blob and read back
//! with [`Btf`], so type ids and every answer behave exactly as with a real kernel's BTF.
//! [`Fixture::bytes`] gives the blob, e.g. to write it to a file for `--btf FILE`.

use super::{Btf, Field, FuncSig, KType, KernelTypes, TypeId};

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
    /// A kernel that has fsession (`BPF_TRACE_FSESSION` in `enum bpf_attach_type`).
    pub fn new() -> Fixture {
        Fixture::build(true)
    }

    /// The same kernel without fsession.
    pub fn without_fsession() -> Fixture {
        Fixture::build(false)
    }

    fn build(fsession: bool) -> Fixture {
        let bytes = kernel(fsession).encode();
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
fn kernel(fsession: bool) -> Builder {
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
    if fsession {
        attach_types.push(("BPF_TRACE_FSESSION", attach_types.len() as i64));
    }
    attach_types.push(("__MAX_BPF_ATTACH_TYPE", attach_types.len() as i64));
    b.enum_("bpf_attach_type", 4, false, &attach_types);

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
