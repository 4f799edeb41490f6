//! Strings in a phase: buffers filled once per phase, comparisons, reads through
//! pointers (kernel or user memory), and stores into an event.

use super::*;

impl Phase<'_> {
    /// A `const char *` to the string `e`: a literal, or a buffer filled here.
    pub(super) fn string_ref(&mut self, e: &Expr) -> String {
        if let ExprKind::Str(bytes) = &e.kind {
            return c_string(bytes);
        }
        if let ExprKind::Builtin(b) = e.kind
            && let C::Str { at: Some(at), .. } = b.c
        {
            return self.spell(at, None);
        }
        let Ty::Str { cap } = e.ty else {
            unreachable!("string_ref takes strings")
        };
        if let ExprKind::Entry(i) = e.kind {
            return format!("((const char *)&fslat_ev[{}])", self.saved_at(i));
        }
        if let ExprKind::Arg(n) = e.kind {
            return format!("fslat_arg_str(fslat_args.{})", resources::arg_field(n));
        }
        let what = format!("{:?}", e.kind);
        if let Some(buf) = self.strings.get(&what) {
            return buf.clone();
        }
        let buf = self.temp();
        let on_stack = cap < SCRATCH_FROM && self.stack_strings + cap <= STACK_STRINGS;
        let name = if !on_stack {
            let at = self.scratch(cap);
            self.lines
                .push(format!("char (*{buf})[{cap}] = (void *){at};"));
            format!("(*{buf})")
        } else {
            self.stack_strings += cap;
            self.lines.push(format!("char {buf}[{cap}];"));
            buf
        };
        let fill = self.fill_string(e, &name, cap);
        self.lines.push(fill);
        self.strings.insert(what, name.clone());
        name
    }

    /// A statement that writes string `e` into `dst` (`cap` bytes).
    pub(super) fn fill_string(&mut self, e: &Expr, dst: &str, cap: u32) -> String {
        let fill = self.fill_string_unordered(e, dst, cap);
        match fill.starts_with("__builtin_memcpy(") {
            // clang 14 drops the stores before a memcpy from a constant table at a
            // constant index (a one-function session's `fslat_funcs_N[fslat_fn]`, with
            // `fslat_fn` 0): an event's id and the fields before the copy went out
            // unwritten. The barrier costs no instruction; clang 19 needs none.
            true => format!("asm volatile(\"\" ::: \"memory\"); {fill}"),
            false => fill,
        }
    }

    /// `read`, a string read that returns 1 when it failed, as a statement that counts
    /// the failure in the session's `str_unread`.
    pub(super) fn counted(&self, read: String) -> String {
        let count = counters::STR_UNREAD.c_increment("fslat_u");
        format!(
            "if ({read}) {{ __u32 fslat_uk = {}; struct fslat_counters *fslat_u = bpf_map_lookup_elem(&{}, &fslat_uk); if (fslat_u) {count} }}",
            self.session.index,
            resources::COUNTERS_MAP
        )
    }

    pub(super) fn fill_string_unordered(&mut self, e: &Expr, dst: &str, cap: u32) -> String {
        match &e.kind {
            ExprKind::Builtin(b) => match b.c {
                C::Str { fill, .. } => self.spell(fill, Some((dst, cap))),
                _ => unreachable!("fill_string takes strings"),
            },
            ExprKind::Entry(i) => {
                format!(
                    "__builtin_memcpy({dst}, &fslat_ev[{}], {cap});",
                    self.saved_at(*i)
                )
            }
            ExprKind::Arg(n) => {
                let len = match e.ty {
                    Ty::Str { cap: have } => have.min(cap),
                    _ => cap,
                };
                format!(
                    "__builtin_memcpy({dst}, fslat_arg_str(fslat_args.{}), {len});",
                    resources::arg_field(*n)
                )
            }
            ExprKind::Str(bytes) => {
                let n = (bytes.len() + 1).min(cap as usize);
                format!("__builtin_memcpy({dst}, {}, {n});", c_string(bytes))
            }
            ExprKind::Deref(ptr) => {
                let p = self.expr(ptr);
                self.reads_user_str = true;
                self.counted(format!(
                    "fslat_read_str({dst}, {cap}, (const void *){p}, FSLAT_SLEEPABLE)"
                ))
            }
            ExprKind::Path(file) => {
                let f = self.expr(file);
                format!("fslat_path({dst}, (const void *){f});")
            }
            ExprKind::ReadStr { ptr, len, user } => {
                let p = self.expr(ptr);
                let n = match len {
                    Some(l) => format!("(__u64)({})", self.expr(l)),
                    None => cap.to_string(),
                };
                self.reads_user_str = true;
                self.counted(format!(
                    "fslat_read_strn({dst}, {cap}, (const void *){p}, {n}, {user}, FSLAT_SLEEPABLE)"
                ))
            }
            ExprKind::Read {
                base,
                hops: Some(hops),
                string,
                ..
            } => {
                let addr = self.user_address(base, hops);
                self.reads_user_str = true;
                match string {
                    Some(StringSource::Array) => self.counted(format!(
                        "fslat_read_strn({dst}, {cap}, (const void *){addr}, {cap}, true, FSLAT_SLEEPABLE)"
                    )),
                    _ => self.counted(format!(
                        "fslat_read_strn({dst}, {cap}, (const void *)fslat_user_ptr({addr}), {cap}, true, FSLAT_SLEEPABLE)"
                    )),
                }
            }
            ExprKind::Read {
                base,
                root,
                path,
                string,
                hops: None,
            } => {
                let base = self.pointer(base, root);
                match string {
                    // `&dst` so the macro's sizeof sees the whole array.
                    Some(StringSource::Array) => {
                        format!("BPF_CORE_READ_STR_INTO(&{dst}, {base}, {});", groups(path))
                    }
                    _ => {
                        self.reads_user_str = true;
                        self.counted(format!(
                            "fslat_read_str({dst}, {cap}, (const void *)BPF_CORE_READ({base}, {}), FSLAT_SLEEPABLE)",
                            groups(path)
                        ))
                    }
                }
            }
            _ => unreachable!("only these expressions have string type"),
        }
    }

    /// The user address a user-space session's read ends at: `base + hops[0]`, then
    /// through each pointer read there (`fslat_user_ptr`) plus the next hop.
    pub(super) fn user_address(&mut self, base: &Expr, hops: &[u32]) -> String {
        let mut addr = format!("(__u64)({})", self.expr(base));
        for (i, h) in hops.iter().enumerate() {
            addr = if i == 0 {
                format!("({addr} + {h})")
            } else {
                format!("(fslat_user_ptr({addr}) + {h})")
            };
        }
        addr
    }

    /// `base` as a typed pointer for CO-RE reads.
    pub(super) fn pointer(&mut self, base: &Expr, root: &StructName) -> String {
        let p = self.expr(base);
        format!("(({} *){p})", struct_name(root))
    }

    /// A statement that stores `e` into the lvalue `dst` of kind `kind`.
    pub fn store(&mut self, e: &Expr, dst: &str, kind: FieldKind) -> String {
        match kind {
            FieldKind::Str { cap } => self.fill_string(e, dst, cap),
            FieldKind::Bool => format!("{dst} = !!({});", self.expr(e)),
            _ => format!("{dst} = {};", self.expr(e)),
        }
    }
}
