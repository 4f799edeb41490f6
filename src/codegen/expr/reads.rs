//! What a phase reads: `ret`, parameters, builtins, counters, the clock, and the
//! entry values it saves for the return.

use super::*;

impl Phase<'_> {
    pub fn ret_value(&mut self) -> String {
        let ty = match self.target.ret {
            Some(s) => c_int(u32::from(s.size), s.signed),
            None => "__u64",
        };
        if self.regs {
            let rax = register("ax");
            return self.declare("fslat_ret", || format!("{ty} fslat_ret = ({ty}){rax};"));
        }
        if self.multi || self.shared {
            let raw = self.ret_raw();
            return self.declare("fslat_ret", || format!("{ty} fslat_ret = ({ty}){raw};"));
        }
        let slot = self.target.ret_slot;
        self.declare("fslat_ret", || {
            format!("{ty} fslat_ret = ({ty})ctx[{slot}];")
        })
    }

    /// Multi-attach: the return register as a `__u64`, whatever the function returns.
    pub fn ret_raw(&mut self) -> String {
        if self.regs {
            let rax = register("ax");
            return self.declare("fslat_ret_raw", || format!("__u64 fslat_ret_raw = {rax};"));
        }
        if self.shared {
            let mark = resources::RET_MARK;
            return self.declare("fslat_ret_raw", || {
                format!("__u64 fslat_ret_raw = FSLAT_CTX_AT(ctx, {mark});")
            });
        }
        self.declare("fslat_ret_raw", || {
            "__u64 fslat_ret_raw = 0; bpf_get_func_ret(ctx, &fslat_ret_raw);".into()
        })
    }

    pub(super) fn param(&mut self, i: usize) -> String {
        let p = &self.session.params[i];
        let ty = match p.ty {
            Ty::Int(s) => c_int(u32::from(s.size), s.signed),
            Ty::Bool => "__u8",
            _ => "__u64",
        };
        let slot = self.target.slots[i];
        let name = format!("fslat_arg{i}");
        if self.usdt {
            // Cast to the note's size and sign by libbpf; 0 if it cannot be read.
            return self.declare(&name, || {
                format!(
                    "long {name}_raw = 0; bpf_usdt_arg((void *)ctx, {slot}, &{name}_raw); {ty} {name} = ({ty}){name}_raw;"
                )
            });
        }
        if self.regs {
            let reg = register(ARG_REGISTERS[slot.min(ARG_REGISTERS.len() - 1)]);
            return self.declare(&name, || format!("{ty} {name} = ({ty}){reg};"));
        }
        if self.shared {
            let mark = resources::param_mark(i);
            return self.declare(&name, || {
                format!("{ty} {name} = ({ty})FSLAT_CTX_AT(ctx, {mark});")
            });
        }
        if self.multi {
            let same = self.session.targets.iter().all(|t| t.slots[i] == slot);
            let n = if same {
                slot.to_string()
            } else {
                format!("{}[fslat_fn]", slot_table(self.session.index, i))
            };
            return self.declare(&name, || {
                format!(
                    "__u64 {name}_raw = 0; bpf_get_func_arg(ctx, {n}, &{name}_raw); {ty} {name} = ({ty}){name}_raw;"
                )
            });
        }
        self.declare(&name, || format!("{ty} {name} = ({ty})ctx[{slot}];"))
    }

    /// A builtin's C, from `check::builtins`.
    pub(super) fn builtin(&mut self, b: Builtin) -> String {
        match b.c {
            C::Expr(c) => self.spell(c, None),
            C::Stack(StackKind::Kernel) => {
                let c = self.counter(&counters::STACK_LOST);
                self.declare("fslat_kstack", || {
                    format!("__s64 fslat_kstack = fslat_kstackid(ctx, {c});")
                })
            }
            C::Stack(StackKind::User) => {
                let c = self.counter(&counters::STACK_LOST);
                // At a switch out interrupts are off: the frames are placed in their files
                // in user space, as the scheduler hooks' are (bpf-runtime/fslat_sched.bpf.h).
                let files = !self.session.offcpu;
                self.declare("fslat_ustack", || {
                    format!(
                        "__u64 fslat_ustack = fslat_ustackid_as(ctx, &{EVENTS_MAP}, {c}, {files});"
                    )
                })
            }
            C::Str { .. } => {
                unreachable!("comm and func are strings: strings go through string_ref or store")
            }
        }
    }

    /// A builtin's C with the values it names (see `check::builtins::C`) spelled for this
    /// phase and mode, in one pass (a function's name may hold braces); `buffer`, for a
    /// string's fill, the buffer it writes and its size.
    pub(super) fn spell(&mut self, c: &str, buffer: Option<(&str, u32)>) -> String {
        let mut out = String::new();
        let mut rest = c;
        while let Some(open) = rest.find('{') {
            out.push_str(&rest[..open]);
            let Some(close) = rest[open..].find('}').map(|n| open + n) else {
                break;
            };
            let name = &rest[open + 1..close];
            out.push_str(&self.value(name, buffer));
            rest = &rest[close + 1..];
        }
        out.push_str(rest);
        out
    }

    /// One value a builtin's C names by `{NAME}`.
    pub(super) fn value(&mut self, name: &str, buffer: Option<(&str, u32)>) -> String {
        let (dst, cap) = buffer.unwrap_or(("", 0));
        let per_function = self.multi || self.shared;
        match name {
            "pid_tgid" => self.pid_tgid(),
            "uid_gid" => self.uid_gid(),
            "start" => self.start(),
            "now" => self.now(),
            "sched" => self.sched(),
            "stack_lost" => self.counter(&counters::STACK_LOST),
            "func" if per_function => format!("fslat_funcs_{}[fslat_fn]", self.session.index),
            "func" => c_string(self.target.func.as_bytes()),
            "func_len" if per_function => cap.to_string(),
            "func_len" => (self.target.func.len() as u32 + 1).min(cap).to_string(),
            "dst" if buffer.is_some() => dst.to_string(),
            "cap" if buffer.is_some() => cap.to_string(),
            _ => unreachable!("check::builtins names no value `{name}`"),
        }
    }

    /// A pointer to one of the session's counters: the return phase has them
    /// (`fslat_c`); entry looks them up when it needs them (a user session's `ustack`,
    /// taken at entry), and the pointer may be NULL.
    pub(super) fn counter(&mut self, c: &Counter) -> String {
        let name = c.name;
        if self.at_return {
            return format!("&fslat_c->{name}");
        }
        let index = self.session.index;
        let ec = self.declare("fslat_ec", || {
            format!(
                "__u32 fslat_ek = {index}; struct fslat_counters *fslat_ec = bpf_map_lookup_elem(&{COUNTERS_MAP}, &fslat_ek);"
            )
        });
        format!("({ec} ? &{ec}->{name} : NULL)")
    }

    pub(super) fn pid_tgid(&mut self) -> String {
        self.declare("fslat_pid_tgid", || {
            "__u64 fslat_pid_tgid = bpf_get_current_pid_tgid();".into()
        })
    }

    pub(super) fn uid_gid(&mut self) -> String {
        self.declare("fslat_uid_gid", || {
            "__u64 fslat_uid_gid = bpf_get_current_uid_gid();".into()
        })
    }

    /// The clock now (in the return phase: the call's end). A span's END reads it in its
    /// template, as soon as it found the start, so `latency` leaves out its own work.
    pub(super) fn now(&mut self) -> String {
        if self.at_return && (self.session.span.is_some() || self.session.offcpu) {
            self.declared.insert("fslat_now".into());
            return "fslat_now".into();
        }
        self.declare("fslat_now", || {
            "__u64 fslat_now = bpf_ktime_get_ns();".into()
        })
    }

    /// Reads the entry time now (at entry), for what later lines save on its clock.
    pub fn entry_time(&mut self) {
        self.start();
    }

    /// The entry time: at return it is already known; at entry the clock is read here.
    pub(super) fn start(&mut self) -> String {
        if self.at_return {
            "fslat_start".into()
        } else {
            self.declare("fslat_start", || {
                "__u64 fslat_start = bpf_ktime_get_ns();".into()
            })
        }
    }

    /// The thread's scheduler totals (`oncpu`...), read together once, at the entry
    /// time at entry and at the clock at return: what is read at both ends on this clock
    /// adds up to `latency`.
    pub(super) fn sched(&mut self) -> String {
        if self.session.offcpu {
            // An offcpu stretch's `runq`, which its template computes at the switch in.
            return self.declare("fslat_sched_snap", || {
                "struct fslat_sched_snap fslat_sched_snap = { .v = { [FSLAT_SCHED_RUNQ] = fslat_runq } };".into()
            });
        }
        let clock = if self.at_return {
            self.now()
        } else {
            self.start()
        };
        self.declare("fslat_sched_snap", || {
            format!(
                "struct fslat_sched_snap fslat_sched_snap; fslat_sched_read(&fslat_sched_snap, {clock});"
            )
        })
    }

    /// Where `entry_values[i]` starts in `fslat_ev`.
    pub(super) fn saved_at(&self, i: usize) -> usize {
        self.saved_at[i]
    }

    /// A statement that saves `entry_values[i]` of the session into the `__u64`s of
    /// `words` (an lvalue array, `fslat_ev` or a map value's), at entry.
    pub fn save(&mut self, i: usize, words: &str) -> String {
        let session = self.session;
        self.save_value(i, &session.entry_values[i], words)
    }

    /// `save` of `v`, the value of `entry_values[i]` as a span's START computes it.
    pub fn save_value(&mut self, i: usize, v: &Expr, words: &str) -> String {
        let at = self.saved_at(i);
        match v.ty {
            Ty::Str { cap } => {
                let dst = format!("(*(char (*)[{cap}])&{words}[{at}])");
                self.fill_string(v, &dst, cap)
            }
            _ => {
                let x = self.expr(v);
                format!("{words}[{at}] = (__u64)({x});")
            }
        }
    }
}
