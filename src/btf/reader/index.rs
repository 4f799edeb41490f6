//! The function-name index: a lookup scans the string section until a few lookups were
//! made, then an index of name hashes is built once.

use super::*;

pub(super) type FuncIndex = HashMap<u64, TypeId, BuildHasherDefault<PreHashed>>;

/// Lookups done by scanning before building the function index. A scan costs about a
/// quarter of building the index (both well under a few ms for a full vmlinux).
pub(super) const SCAN_LOOKUPS: u32 = 4;

/// Hash of a name for the function index (rustc's FxHash; the index keeps the hash, not
/// the name, and `function_id` checks the name it finds).
pub(super) fn name_hash(name: &[u8]) -> u64 {
    let mut h = rustc_hash::FxHasher::default();
    h.write(name);
    h.finish()
}

/// Every offset at which `needle` occurs in `hay` (none for an empty needle). Occurrences
/// do not overlap: the needles here are a name and its NUL.
pub(super) fn find_all(hay: &[u8], needle: &[u8]) -> Vec<usize> {
    if needle.is_empty() {
        return Vec::new();
    }
    memchr::memmem::find_iter(hay, needle).collect()
}

/// A `Hasher` for keys that already are good hashes.
#[derive(Default)]
pub(super) struct PreHashed(u64);

impl Hasher for PreHashed {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8) | u64::from(b);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

impl Btf {
    fn func_index(&self) -> &FuncIndex {
        self.funcs.get_or_init(|| {
            let mut funcs = FuncIndex::with_capacity_and_hasher(
                self.types.len() / 2,
                BuildHasherDefault::default(),
            );
            for (id, name) in self.func_ids() {
                funcs.entry(name_hash(name.as_bytes())).or_insert(id);
            }
            funcs
        })
    }

    /// Builds the function-name index now (e.g. before many `function` calls).
    pub fn index_functions(&self) {
        self.func_index();
    }

    /// The BTF id of the first FUNC named `name`: what the kernel wants as the attach
    /// target of a tracing program.
    pub fn function_id(&self, name: &str) -> Option<TypeId> {
        if self.funcs.get().is_none() && self.scans.fetch_add(1, Ordering::Relaxed) < SCAN_LOOKUPS {
            return self.scan_function(name);
        }
        let &id = self.func_index().get(&name_hash(name.as_bytes()))?;
        if self.rec(id).is_some_and(|r| self.name(&r) == name) {
            return Some(id);
        }
        // Two names with the same 64-bit hash: astronomically rare, but stay correct.
        self.scan_function(name)
    }

    /// The first FUNC named `name`, without the index: finds where `name` occurs in the
    /// string section, then the first FUNC whose name is at one of those offsets.
    pub(super) fn scan_function(&self, name: &str) -> Option<TypeId> {
        let strings = &self.data[self.str_start..self.str_end];
        let mut needle = Vec::with_capacity(name.len() + 1);
        needle.extend_from_slice(name.as_bytes());
        needle.push(0);
        let offsets = find_all(strings, &needle);
        if offsets.is_empty() {
            return None;
        }
        (1..self.types.len() as TypeId).find(|&id| {
            let off = self.types[id as usize] as usize;
            (self.u32_at(off + 4) >> 24) & 0x1f == KIND_FUNC
                && offsets.contains(&(self.u32_at(off) as usize))
        })
    }

    /// Every FUNC, in id order, with its name.
    pub(super) fn func_ids(&self) -> impl Iterator<Item = (TypeId, &str)> {
        (1..self.types.len() as TypeId).filter_map(|id| {
            let r = self.rec(id)?;
            (r.kind == KIND_FUNC).then(|| (id, self.name(&r)))
        })
    }
}
