//! The statements that update an aggregation for one call.

use super::*;

impl Phase<'_> {
    /// Statements that update aggregation `a` for this call.
    pub fn aggregate(&mut self, a: &Aggregation) -> Vec<String> {
        let name = self.temp();
        let value = self.temp();
        if a.per_cpu_array() {
            return self.aggregate_per_cpu(a, &name, &value);
        }
        // `key` is the key's address.
        let (key, mut out) = if a.key_size >= SCRATCH_FROM {
            let at = self.scratch(a.key_size);
            (
                name.clone(),
                vec![format!(
                    "struct fslat_agg_key_{} *{name} = (void *){at};",
                    a.id
                )],
            )
        } else {
            (
                format!("&{name}"),
                vec![format!("struct fslat_agg_key_{} {name};", a.id)],
            )
        };
        out.push(format!("__builtin_memset({key}, 0, sizeof(*{key}));"));
        // Declarations the keys and argument need land in `self.lines`, before the block.
        for (i, k) in a.keys.iter().enumerate() {
            let dst = format!("({key})->{}", crate::codegen::field_member(i));
            out.push(self.store(&k.expr, &dst, k.kind));
        }
        let spec = a.spec();
        let CValue { ty: vtype, start } = a.func.c_value(&spec);
        let x = match &a.arg {
            // Two maps take it (`c_after` too): evaluate it once.
            Some(arg) if a.func.per_cpu_max() => {
                let v = self.temp();
                out.push(format!("__s64 {v} = (__s64)({});", self.expr(arg)));
                v
            }
            Some(arg) => format!("(__s64)({})", self.expr(arg)),
            None => "0".into(),
        };
        let map = a.map();
        out.push(format!(
            "{vtype} *{value} = bpf_map_lookup_elem(&{map}, {key});"
        ));
        out.push(format!("if (!{value}) {{"));
        let init = match start {
            Start::Literal(init) => {
                out.push(format!("\t{vtype} fslat_init = {init};"));
                "&fslat_init".to_string()
            }
            Start::Global(zero) => format!("&{zero}"),
        };
        out.push(format!(
            "\tbpf_map_update_elem(&{map}, {key}, {init}, BPF_NOEXIST);"
        ));
        out.push(format!("\t{value} = bpf_map_lookup_elem(&{map}, {key});"));
        out.push("}".into());
        out.push(format!("if ({value})"));
        out.push(format!("\t{}", a.func.c_add(&spec, &value, &x)));
        out.push("else".into());
        out.push(format!("\t{}", counters::AGG_LOST.c_increment("fslat_c")));
        out.extend(a.func.c_after(&spec, &key, &value, &x));
        scope(out)
    }

    /// An aggregation without keys in a one-slot per-CPU array: the slot always exists.
    pub(super) fn aggregate_per_cpu(
        &mut self,
        a: &Aggregation,
        key: &str,
        value: &str,
    ) -> Vec<String> {
        let spec = a.spec();
        let vtype = a.func.c_value(&spec).ty;
        let x = match &a.arg {
            Some(arg) => format!("(__s64)({})", self.expr(arg)),
            None => "0".into(),
        };
        let map = a.map();
        scope(vec![
            format!("__u32 {key} = 0;"),
            format!("{vtype} *{value} = bpf_map_lookup_elem(&{map}, &{key});"),
            format!("if ({value})"),
            format!("\t{}", a.func.c_add(&spec, value, &x)),
            "else".into(),
            format!("\t{}", counters::AGG_LOST.c_increment("fslat_c")),
        ])
    }
}

/// `lines` in a block of their own: an aggregation's key and value names are per block.
fn scope(lines: Vec<String>) -> Vec<String> {
    let mut block = vec!["{".to_string()];
    block.extend(lines.into_iter().map(|l| format!("\t{l}")));
    block.push("}".into());
    block
}
