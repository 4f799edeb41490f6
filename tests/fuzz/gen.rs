//! Inputs for the fuzz target: scripts generated from the grammar over a kernel's types
//! (functions, their parameters, struct fields followed with `->` and `.`), mostly well
//! typed so the code generator and clang see many accepted programs, sometimes not; and
//! byte-level mutants of such scripts and of the corpus. Every input is a pure function
//! of (seed, index), so a failure is reproduced from the two numbers alone.

use fslat::btf::{KType, KernelTypes, TypeId};

/// splitmix64: small, fast, and good enough to choose grammar productions.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64, index: u64) -> Rng {
        let mut r = Rng(seed ^ index.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        r.next();
        r
    }

    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// 0 .. n (n > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    /// True with probability 1/n.
    pub fn one_in(&mut self, n: usize) -> bool {
        self.below(n) == 0
    }

    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// What an expression evaluates to, as far as the generator tracks it.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Ty {
    Int,
    Bool,
    Duration,
    Str,
    Ptr,
}

/// A name usable in an expression of one function: a builtin, a parameter, a field path.
#[derive(Clone, Debug)]
struct Leaf {
    text: String,
    ty: Ty,
}

/// At most `limit` of a kernel's functions (spread over the sorted list), so a big BTF
/// does not make every input a different cold lookup; computed once per kernel.
pub fn functions(types: &dyn KernelTypes, limit: usize) -> Vec<String> {
    let all = types.function_names();
    let step = (all.len() / limit.max(1)).max(1);
    let mut functions: Vec<String> = all.iter().step_by(step).cloned().collect();
    // The functions people trace, whatever the spread picked.
    for f in [
        "vfs_read",
        "vfs_write",
        "do_sys_openat2",
        "vfs_open",
        "may_open_dev",
    ] {
        if all.iter().any(|a| a == f) && !functions.iter().any(|g| g == f) {
            functions.push(f.to_string());
        }
    }
    functions
}

/// A kernel's types and the functions the generator picks from.
pub struct Kernel<'k> {
    pub types: &'k dyn KernelTypes,
    pub functions: &'k [String],
}

const BUILTINS: &[(&str, Ty)] = &[
    ("tgid", Ty::Int),
    ("pid", Ty::Int),
    ("tid", Ty::Int),
    ("uid", Ty::Int),
    ("gid", Ty::Int),
    ("cpu", Ty::Int),
    ("cgroup", Ty::Int),
    ("ts", Ty::Int),
    ("comm", Ty::Str),
    ("func", Ty::Str),
    ("latency", Ty::Duration),
];

const WORDS: &[&str] = &[
    "session",
    "span",
    "->",
    "where",
    "emit",
    "as",
    "by",
    "and",
    "or",
    "not",
    "true",
    "false",
    "count",
    "hist",
    "sum",
    "min",
    "max",
    "avg",
    "percentiles",
    "path",
    "kstack",
    "ustack",
    "latency",
    "ret",
    "comm",
    "(",
    ")",
    "{",
    "}",
    ",",
    ";",
    "\n",
    "->",
    ".",
    "==",
    "!=",
    "<",
    "<=",
    ">",
    ">=",
    "+",
    "-",
    "*",
    "/",
    "%",
    "<<",
    ">>",
    "&",
    "|",
    "^",
    "~",
    "!",
    "&&",
    "||",
    "\"",
    "\\",
    "#",
    "//",
    "0x",
    "1ms",
    "18446744073709551616",
    "arg0",
    "arg99",
    "*",
    "?",
];

/// One generated script.
pub struct Gen<'a, 'k> {
    rng: &'a mut Rng,
    kernel: &'a Kernel<'k>,
    leaves: Vec<Leaf>,
    depth: usize,
}

impl<'a, 'k> Gen<'a, 'k> {
    pub fn script(rng: &'a mut Rng, kernel: &'a Kernel<'k>) -> String {
        let mut g = Gen {
            rng,
            kernel,
            leaves: Vec::new(),
            depth: 0,
        };
        let mut out = String::new();
        if g.rng.one_in(10) {
            out.push_str("#!/usr/bin/env fslat\n");
        }
        if g.rng.one_in(10) {
            out.push_str("on begin { printf(\"%s %-4d|%x\\n\", \"fslat\", 42, 255) }\n");
        }
        let sessions = 1 + g.rng.below(3);
        for _ in 0..sessions {
            if g.rng.one_in(8) {
                g.span(&mut out);
            } else {
                g.session(&mut out);
            }
            out.push_str(if g.rng.one_in(3) { ";\n" } else { "\n" });
        }
        out
    }

    fn session(&mut self, out: &mut String) {
        let first = self.rng.pick(self.kernel.functions).clone();
        let mut names = vec![first.clone()];
        if self.rng.one_in(6) {
            names.push(self.rng.pick(self.kernel.functions).clone());
        }
        if self.rng.one_in(12) {
            // A glob from the function's prefix: `vfs_*`.
            let cut = first.find('_').map_or(first.len(), |i| i + 1);
            names = vec![format!("{}*", &first[..cut])];
        }
        // Parameters are shared by every function of a session only by luck: builtins then.
        self.leaves = if names.len() > 1 || names[0].contains('*') {
            self.leaves_of("")
        } else {
            self.leaves_of(&first)
        };
        out.push_str("session ");
        out.push_str(&names.join(if self.rng.one_in(2) { ", " } else { "," }));
        if self.rng.below(4) != 0 {
            out.push_str(if self.rng.one_in(5) {
                "\n  where "
            } else {
                " where "
            });
            let e = self.expr(Ty::Bool);
            out.push_str(&e);
        }
        if self.rng.one_in(5) {
            return;
        }
        out.push_str(" {");
        let actions = self.rng.below(4);
        for i in 0..actions {
            out.push_str(if i == 0 { " " } else { self.sep() });
            let a = self.action(i < 2);
            out.push_str(&a);
        }
        out.push_str(" }");
    }

    /// `span A(KEY) [where ...] -> B(KEY) [where ...] { ... }` over two functions, keyed
    /// by a builtin both ends have; conditions and actions from the builtins (a START
    /// condition may name `latency`, which the checker refuses there).
    fn span(&mut self, out: &mut String) {
        let start = self.rng.pick(self.kernel.functions).clone();
        let end = self.rng.pick(self.kernel.functions).clone();
        self.leaves = self.leaves_of("");
        let key = *self.rng.pick(&["pid", "tgid", "cpu", "uid"]);
        out.push_str(&format!("span {start}({key})"));
        if self.rng.one_in(3) {
            out.push_str(" where ");
            let e = self.expr(Ty::Bool);
            out.push_str(&e);
        }
        out.push_str(&format!(" -> {end}({key})"));
        if self.rng.one_in(3) {
            out.push_str(" where ");
            let e = self.expr(Ty::Bool);
            out.push_str(&e);
        }
        out.push_str(" {");
        let actions = 1 + self.rng.below(3);
        for i in 0..actions {
            out.push_str(if i == 0 { " " } else { self.sep() });
            let a = self.action(i < 2);
            out.push_str(&a);
        }
        out.push_str(" }");
    }

    fn sep(&mut self) -> &'static str {
        const SEPARATORS: [&str; 3] = ["; ", "\n    ", " ;\n"];
        SEPARATORS[self.rng.below(SEPARATORS.len())]
    }

    /// One action; `may_emit` lets it be (or hold) an `emit` or `printf`. A session may
    /// send several events: its first two actions may, which keeps the programs small.
    fn action(&mut self, may_emit: bool) -> String {
        // bpftrace habits: `let`, `if`/`else` (nested now and then), `printf`.
        if self.depth < 3 && self.rng.one_in(8) {
            self.depth += 1;
            let cond = self.expr(Ty::Bool);
            let then = self.action(may_emit);
            let mut s = format!("if {cond} {{ {then} }}");
            if self.rng.one_in(2) {
                let other = self.action(may_emit);
                s.push_str(&format!(" else {{ {other} }}"));
            }
            self.depth -= 1;
            return s;
        }
        if self.rng.one_in(10) {
            let value = self.expr(Ty::Int);
            let rest = self.action(may_emit);
            let sep = self.sep();
            return format!("let l{} = {value}{sep}{rest}", self.rng.below(100));
        }
        if may_emit && self.rng.one_in(6) {
            let n = self.rng.below(4);
            let mut format = String::new();
            let mut args = Vec::new();
            for _ in 0..n {
                let ty = *self
                    .rng
                    .pick(&[Ty::Int, Ty::Str, Ty::Duration, Ty::Bool, Ty::Ptr]);
                let conv = match ty {
                    Ty::Int => *self
                        .rng
                        .pick(&["%d", "%u", "%-6d", "%08x", "%lu", "%c", "%o"]),
                    Ty::Str => *self.rng.pick(&["%s", "%-16s", "%.3s", "%10.2s"]),
                    Ty::Ptr => "%p",
                    Ty::Bool => *self.rng.pick(&["%d", "%s"]),
                    _ => "%s",
                };
                format.push_str(conv);
                format.push(' ');
                args.push(self.expr(ty));
            }
            format.push_str("100%%\\n");
            let mut s = format!("printf(\"{format}\"");
            for a in args {
                s.push_str(", ");
                s.push_str(&a);
            }
            s.push(')');
            return s;
        }
        if may_emit && self.rng.one_in(3) {
            if self.rng.one_in(4) {
                return "emit".into();
            }
            let n = 1 + self.rng.below(4);
            let mut items = Vec::new();
            for i in 0..n {
                let ty = *self
                    .rng
                    .pick(&[Ty::Int, Ty::Str, Ty::Duration, Ty::Bool, Ty::Ptr]);
                let e = self.expr(ty);
                let plain = e.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
                if !plain || self.rng.one_in(4) {
                    items.push(format!("{e} as f{i}"));
                } else {
                    items.push(e);
                }
            }
            if self.rng.one_in(8) {
                items.push(self.rng.pick(&["kstack", "ustack"]).to_string());
            }
            return format!("emit {}", items.join(", "));
        }
        let agg = *self
            .rng
            .pick(&["count", "hist", "sum", "min", "max", "avg", "percentiles"]);
        let arg = if agg == "count" {
            String::new()
        } else {
            let ty = if self.rng.one_in(2) {
                Ty::Duration
            } else {
                Ty::Int
            };
            self.expr(ty)
        };
        let mut s = format!("{agg}({arg})");
        if self.rng.one_in(2) {
            let n = 1 + self.rng.below(3);
            let keys: Vec<String> = (0..n)
                .map(|_| {
                    if self.rng.one_in(10) {
                        self.rng.pick(&["kstack", "ustack"]).to_string()
                    } else {
                        let ty = *self.rng.pick(&[Ty::Int, Ty::Str, Ty::Bool]);
                        self.expr(ty)
                    }
                })
                .collect();
            s.push_str(" by ");
            s.push_str(&keys.join(", "));
        }
        if self.rng.one_in(4) {
            s.push_str(&format!(" as a{}", self.rng.below(1000)));
        }
        s
    }

    /// An expression of type `ty`; now and then of another type, to reach the checker's
    /// type errors.
    fn expr(&mut self, want: Ty) -> String {
        let ty = if self.rng.one_in(80) {
            *self
                .rng
                .pick(&[Ty::Int, Ty::Str, Ty::Duration, Ty::Bool, Ty::Ptr])
        } else {
            want
        };
        self.depth += 1;
        let deep = self.depth > 4;
        let s = match ty {
            Ty::Bool => self.bool_expr(deep),
            Ty::Int => self.int_expr(deep),
            Ty::Duration => self.duration_expr(deep),
            Ty::Str => self.str_expr(),
            Ty::Ptr => self.leaf(Ty::Ptr).unwrap_or_else(|| "0".into()),
        };
        self.depth -= 1;
        s
    }

    fn bool_expr(&mut self, deep: bool) -> String {
        match if deep {
            self.rng.below(3)
        } else {
            self.rng.below(8)
        } {
            0 => {
                let op = *self.rng.pick(&["==", "!=", "<", "<=", ">", ">="]);
                let a = self.expr(Ty::Int);
                let b = self.int_literal();
                format!("{a} {op} {b}")
            }
            1 => {
                let op = *self.rng.pick(&["==", "!="]);
                let a = self.str_expr();
                let b = self.string_literal();
                format!("{a} {op} {b}")
            }
            2 => {
                let op = *self.rng.pick(&[">", ">=", "<", "<="]);
                let a = self.duration_expr(true);
                let b = self.duration_literal();
                format!("{a} {op} {b}")
            }
            3 => format!(
                "{} {}",
                self.rng.pick(&["not", "!", "not "]),
                self.paren(Ty::Bool)
            ),
            4 | 5 => {
                let op = *self.rng.pick(&["and", "or", "&&", "||"]);
                format!("{} {op} {}", self.expr(Ty::Bool), self.expr(Ty::Bool))
            }
            6 => self.paren(Ty::Bool),
            _ => {
                let op = *self.rng.pick(&["==", "!=", "<", ">"]);
                format!("{} {op} {}", self.expr(Ty::Int), self.expr(Ty::Int))
            }
        }
    }

    fn int_expr(&mut self, deep: bool) -> String {
        match if deep {
            self.rng.below(2)
        } else {
            self.rng.below(7)
        } {
            0 => self.leaf(Ty::Int).unwrap_or_else(|| self.int_literal()),
            1 => self.int_literal(),
            2 | 3 => {
                let op = *self
                    .rng
                    .pick(&["+", "-", "*", "/", "%", "&", "|", "^", "<<", ">>"]);
                let b = if matches!(op, "<<" | ">>") {
                    self.rng.below(70).to_string()
                } else {
                    self.expr(Ty::Int)
                };
                format!("{} {op} {b}", self.expr(Ty::Int))
            }
            4 => format!("{}{}", self.rng.pick(&["-", "~"]), self.paren(Ty::Int)),
            5 => format!("{} / {}", self.expr(Ty::Duration), self.duration_literal()),
            _ => self.paren(Ty::Int),
        }
    }

    fn duration_expr(&mut self, deep: bool) -> String {
        match if deep {
            self.rng.below(2)
        } else {
            self.rng.below(5)
        } {
            0 => "latency".into(),
            1 => self.duration_literal(),
            2 => {
                let op = *self.rng.pick(&["+", "-", "%"]);
                format!(
                    "{} {op} {}",
                    self.expr(Ty::Duration),
                    self.expr(Ty::Duration)
                )
            }
            3 => format!("{} * {}", self.expr(Ty::Duration), self.int_literal()),
            _ => self.paren(Ty::Duration),
        }
    }

    fn str_expr(&mut self) -> String {
        match self.rng.below(6) {
            0 => "comm".into(),
            1 => "func".into(),
            2 if self.leaves.iter().any(|l| l.text == "file") || self.rng.one_in(20) => {
                "path(file)".into()
            }
            _ => self.leaf(Ty::Str).unwrap_or_else(|| "comm".into()),
        }
    }

    fn paren(&mut self, ty: Ty) -> String {
        format!("({})", self.expr(ty))
    }

    fn leaf(&mut self, ty: Ty) -> Option<String> {
        let fits: Vec<&Leaf> = self.leaves.iter().filter(|l| l.ty == ty).collect();
        if fits.is_empty() {
            return None;
        }
        Some(self.rng.pick(&fits).text.clone())
    }

    fn int_literal(&mut self) -> String {
        match self.rng.below(8) {
            0 => "0".into(),
            1 => format!("{:#x}", self.rng.next() >> self.rng.below(64)),
            2 => "1_000_000".into(),
            3 => (self.rng.next() >> self.rng.below(64)).to_string(),
            4 if self.rng.one_in(10) => "-1".into(),
            _ => (1 + self.rng.below(4096)).to_string(),
        }
    }

    fn duration_literal(&mut self) -> String {
        let unit = *self.rng.pick(&["ns", "us", "ms", "s"]);
        format!("{}{unit}", self.rng.below(2000))
    }

    fn string_literal(&mut self) -> String {
        let mut s = String::from("\"");
        let n = match self.rng.below(100) {
            0 => 16 + self.rng.below(2000),
            _ => self.rng.below(12),
        };
        for _ in 0..n {
            match self.rng.below(20) {
                0 => s.push_str("\\\""),
                1 => s.push_str("\\\\"),
                2 => s.push_str("\\n"),
                3 => s.push_str(&format!("\\x{:02x}", 1 + self.rng.below(255))),
                4 => s.push('é'),
                5 => s.push_str("%s"),
                6 => s.push_str("*/"),
                _ => s.push((b'a' + self.rng.below(26) as u8) as char),
            }
        }
        s.push('"');
        s
    }

    /// Builtins, parameters (by name and position), `ret`, and field paths up to three
    /// steps from pointer parameters.
    fn leaves_of(&mut self, function: &str) -> Vec<Leaf> {
        let mut leaves: Vec<Leaf> = BUILTINS
            .iter()
            .map(|(n, ty)| Leaf {
                text: n.to_string(),
                ty: *ty,
            })
            .collect();
        let types = self.kernel.types;
        let Some(sig) = types.function(function) else {
            return leaves;
        };
        if sig.ret != 0
            && let Some(ty) = self.value_ty(sig.ret)
        {
            leaves.push(Leaf {
                text: "ret".into(),
                ty,
            });
        }
        for (i, p) in sig.params.iter().enumerate() {
            let Some(ty) = self.value_ty(p.ty) else {
                continue;
            };
            for name in [p.name.clone(), format!("arg{i}")] {
                if name.is_empty() {
                    continue;
                }
                leaves.push(Leaf {
                    text: name.clone(),
                    ty,
                });
                if ty == Ty::Ptr {
                    for _ in 0..4 {
                        if let Some(path) = self.field_path(&name, p.ty) {
                            leaves.push(path);
                        }
                    }
                }
            }
        }
        leaves
    }

    /// `base->a.b->c` followed from a pointer to a struct, ending at a readable field.
    fn field_path(&mut self, base: &str, ptr: TypeId) -> Option<Leaf> {
        let types = self.kernel.types;
        let mut text = base.to_string();
        let mut ty = ptr;
        for step in 0..3 {
            let target = match types.resolve(ty) {
                KType::Ptr { pointee, .. } => (pointee, "->"),
                KType::Struct { .. } => (ty, "."),
                _ => return None,
            };
            if !matches!(types.resolve(target.0), KType::Struct { .. }) {
                return None;
            }
            let names = types.field_names(target.0);
            if names.is_empty() {
                return None;
            }
            let name = self.rng.pick(&names).clone();
            let field = types.field(target.0, &name)?;
            text.push_str(target.1);
            text.push_str(&name);
            ty = field.ty;
            match self.value_ty(ty) {
                Some(Ty::Ptr) if step < 2 && !self.rng.one_in(3) => continue,
                Some(Ty::Ptr) => {}
                Some(t) => {
                    return Some(Leaf { text, ty: t });
                }
                None if matches!(types.resolve(ty), KType::Struct { .. }) && step < 2 => {
                    continue;
                }
                None => return None,
            }
            return Some(Leaf { text, ty: Ty::Ptr });
        }
        None
    }

    fn value_ty(&self, ty: TypeId) -> Option<Ty> {
        let types = self.kernel.types;
        match types.resolve(ty) {
            KType::Int {
                bool_like: true, ..
            } => Some(Ty::Bool),
            KType::Int { size, .. } if size <= 8 => Some(Ty::Int),
            KType::Enum { .. } => Some(Ty::Int),
            KType::Ptr { pointee, .. } => match types.resolve(pointee) {
                KType::Int {
                    char_like: true, ..
                } => Some(Ty::Str),
                _ => Some(Ty::Ptr),
            },
            KType::Array { elem, .. } => match types.resolve(elem) {
                KType::Int {
                    char_like: true, ..
                } => Some(Ty::Str),
                _ => None,
            },
            _ => None,
        }
    }
}

/// A byte-level mutant of `base`: bytes flipped, inserted, deleted, duplicated, spliced
/// with grammar words. It may not be UTF-8; the caller decides what to do with that.
pub fn mutate(rng: &mut Rng, base: &[u8]) -> Vec<u8> {
    let mut v = base.to_vec();
    let rounds = 1 + rng.below(8);
    for _ in 0..rounds {
        let at = if v.is_empty() {
            0
        } else {
            rng.below(v.len() + 1)
        };
        match rng.below(7) {
            0 if !v.is_empty() => {
                let i = at.min(v.len() - 1);
                v[i] ^= 1 << rng.below(8);
            }
            1 => v.insert(at, rng.below(256) as u8),
            2 if !v.is_empty() => {
                let end = (at + 1 + rng.below(16)).min(v.len());
                v.drain(at.min(end)..end);
            }
            3 if !v.is_empty() => {
                let start = rng.below(v.len());
                let end = (start + 1 + rng.below(32)).min(v.len());
                let piece = v[start..end].to_vec();
                let times = if rng.one_in(8) { 50 } else { 1 };
                for _ in 0..times {
                    v.splice(at..at, piece.iter().copied());
                }
            }
            4 if !v.is_empty() => {
                let i = at.min(v.len() - 1);
                v[i] = *rng.pick(b"(){}\"\\\n;,.-><=!&|*/%+#0x19azAZ_ \t");
            }
            _ => {
                let w = rng.pick(WORDS).as_bytes();
                v.splice(at..at, w.iter().copied());
            }
        }
    }
    v
}

/// A whole number from the environment (`_` allowed between digits), or `default`.
pub fn env_u64(name: &str, default: u64) -> Result<u64, String> {
    std::env::var(name).map_or(Ok(default), |v| {
        v.trim()
            .replace('_', "")
            .parse()
            .map_err(|_| format!("{name}={v:?} is not a whole number"))
    })
}
