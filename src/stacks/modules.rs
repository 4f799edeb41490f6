//! Where a kernel address is: the kernel image's text, a module (from `/proc/modules`:
//! blazesym names kernel symbols but not their module), or neither, which is code the BPF
//! JIT made (programs, trampolines).

pub struct Modules {
    /// (start, end, name), from the module's load address and size.
    ranges: Vec<(u64, u64, String)>,
    /// `_stext` .. `_etext`.
    text: std::ops::Range<u64>,
}

impl Modules {
    pub fn read() -> Self {
        let mut m = Self::parse(&std::fs::read_to_string("/proc/modules").unwrap_or_default());
        m.text =
            kernel_text(&std::fs::read_to_string(crate::kallsyms::KALLSYMS).unwrap_or_default());
        m
    }

    /// Whether `addr` is in neither the kernel image's text nor a module: JIT code.
    pub fn is_jit(&self, addr: u64) -> bool {
        !self.text.contains(&addr)
            && !self.ranges.iter().any(|(s, e, _)| (*s..*e).contains(&addr))
            && !self.text.is_empty()
    }

    /// Lines such as `ext4 1056768 1 - Live 0xffffffffc0a00000`.
    fn parse(text: &str) -> Self {
        let ranges = text
            .lines()
            .filter_map(|line| {
                let w: Vec<&str> = line.split_whitespace().collect();
                let size: u64 = w.get(1)?.parse().ok()?;
                let start = u64::from_str_radix(w.get(5)?.strip_prefix("0x")?, 16).ok()?;
                (start != 0).then(|| (start, start + size, w[0].to_string()))
            })
            .collect();
        Modules { ranges, text: 0..0 }
    }

    /// The module holding `addr`, or `kernel` for the kernel image (and anything else).
    pub fn module_of(&self, addr: u64) -> &str {
        self.ranges
            .iter()
            .find(|(start, end, _)| (*start..*end).contains(&addr))
            .map_or("kernel", |(_, _, name)| name.as_str())
    }
}

/// The kernel image's text, from the `_stext` and `_etext` lines of `/proc/kallsyms`
/// (empty when they are missing or hidden).
fn kernel_text(kallsyms: &str) -> std::ops::Range<u64> {
    let mut start = 0;
    let mut end = 0;
    for sym in crate::kallsyms::symbols(kallsyms) {
        let slot = match sym.name {
            "_stext" => &mut start,
            "_etext" => &mut end,
            _ => continue,
        };
        *slot = sym.addr;
        if start != 0 && end != 0 {
            break;
        }
    }
    start..end
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_inside_a_module_names_it() {
        let m = Modules::parse(
            "ext4 4096 1 - Live 0xffffffffc0a00000\nfuse 8192 0 - Live 0xffffffffc0b00000 (E)\nhidden 10 0 - Live 0x0000000000000000\n",
        );
        assert_eq!(m.module_of(0xffffffffc0a00010), "ext4");
        assert_eq!(m.module_of(0xffffffffc0b01fff), "fuse");
        assert_eq!(m.module_of(0xffffffffc0b02000), "kernel");
        assert_eq!(m.module_of(0xffffffff81000000), "kernel");
    }

    #[test]
    fn code_outside_the_kernel_text_and_the_modules_is_jit_code() {
        let mut m = Modules::parse("virtio_pci 4096 1 - Live 0xffffffffc0a00000\n");
        m.text = kernel_text(
            "ffffffff81000000 T _stext\nffffffff81000010 T vfs_read\nffffffff82000000 T _etext\n",
        );
        assert_eq!(m.text, 0xffffffff81000000..0xffffffff82000000);
        assert!(!m.is_jit(0xffffffff81000015));
        assert!(!m.is_jit(0xffffffffc0a00100));
        assert!(m.is_jit(0xffffffffc0a01100));
    }
}
