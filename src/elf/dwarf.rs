//! A user-space file's DWARF (`-g`): the parameters of its functions by name with their
//! declared types, and the structs they point to with each member's offset, as bpftrace
//! reads them. Only the functions a session names are looked up, and only the types
//! their parameters reach.
//!
//! The file is input fslat does not trust: gimli checks every read, a type chain is
//! followed at most `MAX_DEPTH` deep (a hostile file can make it loop), and counts are
//! capped, so a damaged file gives fewer types, never a crash or a hang.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};

use gimli::{AttributeValue, EndianSlice, LittleEndian, UnitOffset};
use object::{Object, ObjectSection};

/// Index into `Types::types`, plus `FIRST_ID` (ids below are `types.rs`'s own).
pub type TypeId = u32;

/// The first id a DWARF type gets (0 is void; 1 and 2 are the ABI's registers).
pub const FIRST_ID: TypeId = 16;

/// Deepest type chain followed (typedef of pointer of const of ...).
const MAX_DEPTH: u32 = 64;
/// Most types read from one file; the rest read as `Other`.
const MAX_TYPES: usize = 100_000;
/// Most members of one struct kept.
const MAX_MEMBERS: usize = 4096;

#[derive(Debug, Clone, PartialEq)]
pub enum UType {
    Void,
    Int {
        name: String,
        size: u32,
        signed: bool,
        char_like: bool,
        bool_like: bool,
    },
    /// Floats and what fslat does not read; not passed in an integer register.
    Other(String),
    Ptr(TypeId),
    Typedef {
        name: String,
        target: TypeId,
    },
    /// const, volatile, restrict, _Atomic.
    Qualified(TypeId),
    Struct {
        name: String,
        size: u32,
        union: bool,
        members: Vec<Member>,
    },
    Enum {
        name: String,
        size: u32,
        signed: bool,
    },
    Array {
        elem: TypeId,
        len: u32,
    },
    FuncProto,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Member {
    /// Empty for an anonymous struct or union member.
    pub name: String,
    pub offset: u32,
    pub ty: TypeId,
    pub bitfield: bool,
}

/// A function as DWARF declares it.
#[derive(Debug, Clone, PartialEq)]
pub struct Function {
    pub params: Vec<(String, TypeId)>,
    /// 0: void.
    pub ret: TypeId,
}

/// What DWARF says of some functions of one file.
#[derive(Debug, Clone, Default)]
pub struct Types {
    pub types: Vec<UType>,
    pub functions: HashMap<String, Function>,
}

impl Types {
    pub fn get(&self, id: TypeId) -> Option<&UType> {
        id.checked_sub(FIRST_ID)
            .and_then(|i| self.types.get(i as usize))
    }
}

type Slice<'a> = EndianSlice<'a, LittleEndian>;

/// The DWARF of the functions `wanted` in the ELF image `data`; empty when the file has
/// none (or it cannot be read).
pub fn read(data: &[u8], wanted: &HashSet<String>) -> Types {
    let mut out = Types::default();
    if wanted.is_empty() {
        return out;
    }
    let Ok(file) = object::File::parse(data) else {
        return out;
    };
    let sections = |id: gimli::SectionId| -> Result<Cow<'_, [u8]>, gimli::Error> {
        Ok(match file.section_by_name(id.name()) {
            // Compressed sections (gcc -gz) are not read: no DWARF.
            Some(s)
                if s.compressed_file_range()
                    .is_ok_and(|r| r.format == object::CompressionFormat::None) =>
            {
                s.data().map(Cow::Borrowed).unwrap_or(Cow::Borrowed(&[]))
            }
            _ => Cow::Borrowed(&[]),
        })
    };
    let Ok(owned) = gimli::DwarfSections::load(sections) else {
        return out;
    };
    let dwarf = owned.borrow(|s| EndianSlice::new(s, LittleEndian));
    let mut reader = Reader {
        dwarf: &dwarf,
        out: &mut out,
        memo: HashMap::new(),
    };
    let mut units = dwarf.units();
    while let Ok(Some(header)) = units.next() {
        let Ok(unit) = dwarf.unit(header) else {
            continue;
        };
        reader.functions_of(&unit, wanted);
        if reader.out.functions.len() == wanted.len() {
            break;
        }
    }
    out
}

struct Reader<'d, 'a> {
    dwarf: &'d gimli::Dwarf<Slice<'a>>,
    out: &'d mut Types,
    /// Types already read, by their unit's offset and theirs.
    memo: HashMap<(usize, usize), TypeId>,
}

impl<'a> Reader<'_, 'a> {
    fn name(
        &self,
        unit: &gimli::Unit<Slice<'a>>,
        e: &gimli::DebuggingInformationEntry<Slice<'a>>,
    ) -> String {
        e.attr_value(gimli::DW_AT_name)
            .and_then(|v| self.dwarf.attr_string(unit, v).ok())
            .and_then(|s| s.to_string().ok().map(str::to_owned))
            .unwrap_or_default()
    }

    /// A C++ function's linkage name (its ELF symbol), if `e` has one.
    fn linkage_name(
        &self,
        unit: &gimli::Unit<Slice<'a>>,
        e: &gimli::DebuggingInformationEntry<Slice<'a>>,
    ) -> Option<String> {
        e.attr_value(gimli::DW_AT_linkage_name)
            .or_else(|| e.attr_value(gimli::DW_AT_MIPS_linkage_name))
            .and_then(|v| self.dwarf.attr_string(unit, v).ok())
            .and_then(|s| s.to_string().ok().map(str::to_owned))
    }

    fn functions_of(&mut self, unit: &gimli::Unit<Slice<'a>>, wanted: &HashSet<String>) {
        let mut cursor = unit.entries();
        // The function being read, its depth and what it has so far.
        let mut current: Option<(String, isize, Function)> = None;
        while let Ok(Some(e)) = cursor.next_dfs() {
            let depth = e.depth();
            if current.as_ref().is_some_and(|(_, d, _)| depth <= *d) {
                let (name, _, f) = current.take().expect("checked");
                self.out.functions.entry(name).or_insert(f);
            }
            let e = e.clone();
            match e.tag() {
                gimli::DW_TAG_subprogram => {
                    let declaration = e.attr_value(gimli::DW_AT_declaration).is_some();
                    if declaration {
                        continue;
                    }
                    // A C++ method defined outside its class points to its declaration,
                    // which has its linkage name and return type.
                    let spec = e
                        .attr_value(gimli::DW_AT_specification)
                        .and_then(|v| match v {
                            AttributeValue::UnitRef(off) => unit.entry(off).ok(),
                            _ => None,
                        });
                    let name = self
                        .linkage_name(unit, &e)
                        .or_else(|| spec.as_ref().and_then(|d| self.linkage_name(unit, d)))
                        .unwrap_or_else(|| self.name(unit, &e));
                    if !wanted.contains(&name) || self.out.functions.contains_key(&name) {
                        continue;
                    }
                    let ret = match &spec {
                        Some(d) if e.attr_value(gimli::DW_AT_type).is_none() => {
                            self.type_of(unit, d, 0)
                        }
                        _ => self.type_of(unit, &e, 0),
                    };
                    current = Some((
                        name,
                        depth,
                        Function {
                            params: Vec::new(),
                            ret,
                        },
                    ));
                }
                gimli::DW_TAG_formal_parameter => {
                    let Some((_, d, _)) = &current else { continue };
                    if depth != d + 1 {
                        continue;
                    }
                    let name = self.name(unit, &e);
                    let ty = self.type_of(unit, &e, 0);
                    if let Some((_, _, f)) = &mut current {
                        f.params.push((name, ty));
                    }
                }
                _ => {}
            }
        }
        if let Some((name, _, f)) = current {
            self.out.functions.entry(name).or_insert(f);
        }
    }

    /// The type `e`'s DW_AT_type names (void when it has none).
    fn type_of(
        &mut self,
        unit: &gimli::Unit<Slice<'a>>,
        e: &gimli::DebuggingInformationEntry<Slice<'a>>,
        depth: u32,
    ) -> TypeId {
        match e.attr_value(gimli::DW_AT_type) {
            Some(AttributeValue::UnitRef(off)) => self.type_at(unit, off, depth + 1),
            Some(_) => self.push(UType::Other("?".into())),
            None => 0,
        }
    }

    fn push(&mut self, t: UType) -> TypeId {
        self.out.types.push(t);
        FIRST_ID + self.out.types.len() as TypeId - 1
    }

    fn type_at(&mut self, unit: &gimli::Unit<Slice<'a>>, off: UnitOffset, depth: u32) -> TypeId {
        let key = (unit_key(unit), off.0);
        if let Some(id) = self.memo.get(&key) {
            return *id;
        }
        if depth > MAX_DEPTH || self.out.types.len() >= MAX_TYPES {
            return self.push(UType::Other("?".into()));
        }
        let Ok(e) = unit.entry(off) else {
            return self.push(UType::Other("?".into()));
        };
        // Reserved first, so a struct that points to itself finds its own id.
        let id = self.push(UType::Void);
        self.memo.insert(key, id);
        let name = self.name(unit, &e);
        let size = e
            .attr_value(gimli::DW_AT_byte_size)
            .and_then(|v| v.udata_value())
            .map_or(0, |s| s.min(u64::from(u32::MAX)) as u32);
        let t = match e.tag() {
            gimli::DW_TAG_base_type => {
                let enc = match e.attr_value(gimli::DW_AT_encoding) {
                    Some(AttributeValue::Encoding(enc)) => enc,
                    _ => gimli::DW_ATE_unsigned,
                };
                match enc {
                    gimli::DW_ATE_signed
                    | gimli::DW_ATE_signed_char
                    | gimli::DW_ATE_unsigned
                    | gimli::DW_ATE_unsigned_char
                    | gimli::DW_ATE_boolean
                    | gimli::DW_ATE_UTF
                        if matches!(size, 1 | 2 | 4 | 8 | 16) =>
                    {
                        UType::Int {
                            name,
                            size,
                            signed: matches!(enc, gimli::DW_ATE_signed | gimli::DW_ATE_signed_char),
                            char_like: matches!(
                                enc,
                                gimli::DW_ATE_signed_char | gimli::DW_ATE_unsigned_char
                            ),
                            bool_like: enc == gimli::DW_ATE_boolean,
                        }
                    }
                    _ => UType::Other(name),
                }
            }
            gimli::DW_TAG_pointer_type | gimli::DW_TAG_reference_type => {
                UType::Ptr(self.type_of(unit, &e, depth))
            }
            gimli::DW_TAG_typedef => UType::Typedef {
                name,
                target: self.type_of(unit, &e, depth),
            },
            gimli::DW_TAG_const_type
            | gimli::DW_TAG_volatile_type
            | gimli::DW_TAG_restrict_type
            | gimli::DW_TAG_atomic_type => UType::Qualified(self.type_of(unit, &e, depth)),
            gimli::DW_TAG_structure_type | gimli::DW_TAG_union_type | gimli::DW_TAG_class_type => {
                UType::Struct {
                    name,
                    size,
                    union: e.tag() == gimli::DW_TAG_union_type,
                    members: self.members(unit, off, depth),
                }
            }
            gimli::DW_TAG_enumeration_type => {
                let base = self.type_of(unit, &e, depth);
                let signed = matches!(self.out.get(base), Some(UType::Int { signed: true, .. }));
                UType::Enum {
                    name,
                    size: if size == 0 { 4 } else { size },
                    signed,
                }
            }
            gimli::DW_TAG_array_type => UType::Array {
                elem: self.type_of(unit, &e, depth),
                len: self.array_len(unit, off),
            },
            gimli::DW_TAG_subroutine_type => UType::FuncProto,
            _ => UType::Other(name),
        };
        self.out.types[(id - FIRST_ID) as usize] = t;
        id
    }

    fn members(
        &mut self,
        unit: &gimli::Unit<Slice<'a>>,
        off: UnitOffset,
        depth: u32,
    ) -> Vec<Member> {
        let mut members = Vec::new();
        let Ok(mut tree) = unit.entries_tree(Some(off)) else {
            return members;
        };
        let Ok(root) = tree.root() else {
            return members;
        };
        let mut children = root.children();
        let mut found = Vec::new();
        while let Ok(Some(child)) = children.next() {
            let e = child.entry();
            if e.tag() == gimli::DW_TAG_member && found.len() < MAX_MEMBERS {
                found.push(e.clone());
            }
        }
        for e in found {
            let offset = match e.attr_value(gimli::DW_AT_data_member_location) {
                Some(v) => v.udata_value().unwrap_or(0),
                None => 0,
            };
            let bitfield = e.attr_value(gimli::DW_AT_bit_size).is_some()
                || e.attr_value(gimli::DW_AT_data_bit_offset).is_some();
            members.push(Member {
                name: self.name(unit, &e),
                offset: offset.min(u64::from(u32::MAX)) as u32,
                ty: self.type_of(unit, &e, depth),
                bitfield,
            });
        }
        members
    }

    fn array_len(&mut self, unit: &gimli::Unit<Slice<'a>>, off: UnitOffset) -> u32 {
        let Ok(mut tree) = unit.entries_tree(Some(off)) else {
            return 0;
        };
        let Ok(root) = tree.root() else {
            return 0;
        };
        let mut children = root.children();
        while let Ok(Some(child)) = children.next() {
            let e = child.entry();
            if e.tag() != gimli::DW_TAG_subrange_type {
                continue;
            }
            if let Some(n) = e
                .attr_value(gimli::DW_AT_count)
                .and_then(|v| v.udata_value())
            {
                return n.min(u64::from(u32::MAX)) as u32;
            }
            if let Some(n) = e
                .attr_value(gimli::DW_AT_upper_bound)
                .and_then(|v| v.udata_value())
            {
                return n.saturating_add(1).min(u64::from(u32::MAX)) as u32;
            }
            return 0;
        }
        0
    }
}

fn unit_key(unit: &gimli::Unit<Slice<'_>>) -> usize {
    unit.header.offset().0
}
