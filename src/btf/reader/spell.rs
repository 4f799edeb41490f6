//! Spelling BTF types as C declarations (`struct file *`, `char [16]`, function
//! pointers), as the checker's type names and the generated C need them.

use super::*;

impl Btf {
    /// C declaration of `id` around the declarator `inner` (e.g. `*`, `[4]`, a name).
    pub(super) fn decl(&self, id: TypeId, inner: String, depth: u32, budget: &mut u32) -> String {
        fn join(base: &str, inner: &str) -> String {
            if inner.is_empty() {
                base.to_string()
            } else if inner.starts_with('[') {
                format!("{base}{inner}")
            } else {
                format!("{base} {inner}")
            }
        }
        fn paren(inner: String) -> String {
            if inner.starts_with('*') {
                format!("({inner})")
            } else {
                inner
            }
        }
        if depth > MAX_DEPTH || *budget == 0 {
            return join("...", &inner);
        }
        *budget -= 1;
        if id == 0 {
            return join("void", &inner);
        }
        let Some(r) = self.rec(id) else {
            return join(&format!("<bad type {id}>"), &inner);
        };
        let named = |prefix: &str| {
            let n = self.name(&r);
            match (prefix, n.is_empty()) {
                ("", true) => "?".to_string(),
                ("", false) => n.to_string(),
                (p, true) => format!("{p} {{...}}"),
                (p, false) => format!("{p} {n}"),
            }
        };
        match r.kind {
            KIND_INT | KIND_FLOAT | KIND_TYPEDEF => join(&named(""), &inner),
            KIND_STRUCT => join(&named("struct"), &inner),
            KIND_UNION => join(&named("union"), &inner),
            KIND_ENUM | KIND_ENUM64 => join(&named("enum"), &inner),
            KIND_FWD => join(&named(if r.kflag { "union" } else { "struct" }), &inner),
            KIND_PTR => self.decl(r.size_type, format!("*{inner}"), depth + 1, budget),
            KIND_TYPE_TAG => self.decl(r.size_type, inner, depth + 1, budget),
            KIND_CONST | KIND_VOLATILE | KIND_RESTRICT => {
                let q = match r.kind {
                    KIND_CONST => "const",
                    KIND_VOLATILE => "volatile",
                    _ => "restrict",
                };
                let target_is_ptr = self
                    .strip_tags(r.size_type)
                    .is_some_and(|t| t.kind == KIND_PTR);
                if target_is_ptr {
                    // `char *const p`: the qualifier goes after the `*`.
                    let inner = if inner.is_empty() {
                        q.to_string()
                    } else {
                        format!("{q} {inner}")
                    };
                    self.decl(r.size_type, inner, depth + 1, budget)
                } else {
                    format!("{q} {}", self.decl(r.size_type, inner, depth + 1, budget))
                }
            }
            KIND_ARRAY => {
                let [elem, _, len] = self.entry::<3>(&r, 12, 0);
                self.decl(elem, format!("{}[{len}]", paren(inner)), depth + 1, budget)
            }
            KIND_FUNC_PROTO => {
                let mut params = Vec::with_capacity(r.vlen);
                for i in 0..r.vlen {
                    let [_, ty] = self.entry::<2>(&r, 8, i);
                    if ty == 0 && i + 1 == r.vlen {
                        params.push("...".to_string());
                    } else {
                        params.push(self.decl(ty, String::new(), depth + 1, budget));
                    }
                }
                let params = if params.is_empty() {
                    "void".to_string()
                } else {
                    params.join(", ")
                };
                self.decl(
                    r.size_type,
                    format!("{}({params})", paren(inner)),
                    depth + 1,
                    budget,
                )
            }
            KIND_FUNC | KIND_VAR => {
                let n = self.name(&r).to_string();
                self.decl(
                    r.size_type,
                    join(&n, &inner).trim().to_string(),
                    depth + 1,
                    budget,
                )
            }
            _ => join(&named(""), &inner),
        }
    }
}
