//! What a kernel can do, from its BTF: each feature is an enum value's name or a
//! function's (`btf::FEATURES`), found by walking the types or, cheaper, by the names alone.

use super::*;

impl Btf {
    /// The running kernel's features and multi-attach (`has_fsession_multi`) without
    /// parsing its types: each is an enum value's name (`FEATURES`), and a kernel's BTF
    /// names nothing else so, so finding the names in the string section decides what
    /// `features` decides by walking the enums, at a fraction of the cost (a bundle's
    /// start needs nothing else of the kernel's BTF: it holds its checked programs).
    pub fn vmlinux_features() -> Result<(Features, bool), BtfError> {
        let path = Path::new(VMLINUX_PATH);
        let data = read_blob(path)?;
        Btf::features_by_names(&data).map_err(|e| e.with_path(path))
    }

    /// `vmlinux_features` of a raw BTF blob.
    pub fn features_by_names(data: &[u8]) -> Result<(Features, bool), BtfError> {
        let (_, (str_start, str_end)) = sections(data)?;
        let strings = &data[str_start..str_end];
        // Every name is NUL-terminated and the section starts with one: "\0NAME\0" is
        // exactly the name NAME.
        let named = |v: &str| {
            let needle = [b"\0", v.as_bytes(), b"\0"].concat();
            memchr::memmem::find(strings, &needle).is_some()
        };
        Ok(features_and_multi(|_, value| named(value)))
    }
}

/// The features and multi-attach of a kernel, by `has(enum, value)`: whether its BTF has
/// that enum value.
fn features_and_multi(has: impl Fn(&str, &str) -> bool) -> (Features, bool) {
    let multi = has("bpf_attach_type", "BPF_TRACE_FSESSION_MULTI")
        && has("bpf_link_type", "BPF_LINK_TYPE_TRACING_MULTI");
    (Features::from_btf(&has), multi)
}

impl Btf {
    /// Every value name of the enums named in `enums`, in one pass over the types.
    fn enum_values(&self, enums: &[&str]) -> Vec<(String, String)> {
        let mut out = Vec::new();
        for id in 1..self.types.len() as TypeId {
            let Some(r) = self.rec(id) else { continue };
            let stride = match r.kind {
                KIND_ENUM => 8,
                KIND_ENUM64 => 12,
                _ => continue,
            };
            let name = self.name(&r);
            if !enums.contains(&name) {
                continue;
            }
            for i in 0..r.vlen {
                let [name_off] = self.entry::<1>(&r, stride, i);
                out.push((name.to_string(), self.str_at(name_off).to_string()));
            }
        }
        out
    }

    /// `features` and `has_fsession_multi` from one pass over the enums (a bundle's start
    /// asks both before anything else).
    pub(super) fn features_and_multi(&self) -> (Features, bool) {
        *self.features.get_or_init(|| {
            let mut enums: Vec<&str> = FEATURES.iter().map(|i| i.btf_enum).collect();
            enums.push("bpf_link_type");
            let values = self.enum_values(&enums);
            features_and_multi(|e, v| match e {
                FUNC => self.scan_function(v).is_some(),
                _ => values.iter().any(|(en, va)| en == e && va == v),
            })
        })
    }

    #[cfg(test)]
    pub(super) fn enum_has(&self, enum_name: &str, value_name: &str) -> bool {
        (1..self.types.len() as TypeId).any(|id| {
            let Some(r) = self.rec(id) else { return false };
            let stride = match r.kind {
                KIND_ENUM => 8,
                KIND_ENUM64 => 12,
                _ => return false,
            };
            self.name(&r) == enum_name
                && (0..r.vlen).any(|i| {
                    let [name_off] = self.entry::<1>(&r, stride, i);
                    self.str_at(name_off) == value_name
                })
        })
    }
}
