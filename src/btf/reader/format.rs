//! The raw BTF format (`include/uapi/linux/btf.h`): the header, the kinds, a type
//! record and the length of what trails it.

use super::*;

pub(super) const BTF_MAGIC: u16 = 0xeb9f;
pub(super) const BTF_VERSION: u8 = 1;
/// Size of `struct btf_header` as of version 1; `hdr_len` may be larger.
pub(super) const HEADER_LEN: usize = 24;
/// Size of `struct btf_type`.
pub(super) const TYPE_LEN: usize = 12;

pub(super) const KIND_INT: u32 = 1;
pub(super) const KIND_PTR: u32 = 2;
pub(super) const KIND_ARRAY: u32 = 3;
pub(super) const KIND_STRUCT: u32 = 4;
pub(super) const KIND_UNION: u32 = 5;
pub(super) const KIND_ENUM: u32 = 6;
pub(super) const KIND_FWD: u32 = 7;
pub(super) const KIND_TYPEDEF: u32 = 8;
pub(super) const KIND_VOLATILE: u32 = 9;
pub(super) const KIND_CONST: u32 = 10;
pub(super) const KIND_RESTRICT: u32 = 11;
pub(super) const KIND_FUNC: u32 = 12;
pub(super) const KIND_FUNC_PROTO: u32 = 13;
pub(super) const KIND_VAR: u32 = 14;
pub(super) const KIND_DATASEC: u32 = 15;
pub(super) const KIND_FLOAT: u32 = 16;
pub(super) const KIND_DECL_TAG: u32 = 17;
pub(super) const KIND_TYPE_TAG: u32 = 18;
pub(super) const KIND_ENUM64: u32 = 19;

pub(super) const INT_SIGNED: u32 = 1 << 0;
pub(super) const INT_CHAR: u32 = 1 << 1;
pub(super) const INT_BOOL: u32 = 1 << 2;

/// One `struct btf_type`, decoded.
#[derive(Clone, Copy, Debug)]
pub(super) struct Rec {
    /// Offset of the record in `data`; trailing data starts at `off + TYPE_LEN`.
    pub(super) off: usize,
    pub(super) name_off: u32,
    pub(super) kind: u32,
    pub(super) vlen: usize,
    pub(super) kflag: bool,
    /// `size` or `type`, depending on the kind.
    pub(super) size_type: u32,
}

pub(super) fn trailing_len(kind: u32, vlen: usize) -> Option<usize> {
    Some(match kind {
        KIND_INT => 4,
        KIND_PTR | KIND_FWD | KIND_TYPEDEF | KIND_VOLATILE | KIND_CONST | KIND_RESTRICT
        | KIND_FUNC | KIND_FLOAT | KIND_TYPE_TAG => 0,
        KIND_ARRAY => 12,
        KIND_STRUCT | KIND_UNION => 12 * vlen,
        KIND_ENUM => 8 * vlen,
        KIND_FUNC_PROTO => 8 * vlen,
        KIND_VAR => 4,
        KIND_DATASEC => 12 * vlen,
        KIND_DECL_TAG => 4,
        KIND_ENUM64 => 12 * vlen,
        _ => return None,
    })
}

pub(super) fn read_u32(data: &[u8], off: usize) -> Option<u32> {
    let bytes = data.get(off..off.checked_add(4)?)?;
    Some(u32::from_le_bytes(<[u8; 4]>::try_from(bytes).ok()?))
}

/// A section's start and end offsets in a BTF blob.
pub(super) type Extent = (usize, usize);

/// The type and string sections of a raw BTF blob, after checking its header.
pub(super) fn sections(data: &[u8]) -> Result<(Extent, Extent), BtfError> {
    sections_of(data, false)
}

/// `sections`, for a base BTF or (`split`) one split on top of a base (a kernel
/// module's), whose string section need not start with a NUL.
pub(super) fn sections_of(data: &[u8], split: bool) -> Result<(Extent, Extent), BtfError> {
    if data.len() < HEADER_LEN {
        return Err(malformed(format!(
            "{} bytes is too short for a BTF header ({HEADER_LEN} bytes)",
            data.len()
        )));
    }
    let magic = u16::from_le_bytes([data[0], data[1]]);
    if magic == BTF_MAGIC.swap_bytes() {
        return Err(BtfError::BigEndian { path: None });
    }
    if magic != BTF_MAGIC {
        return Err(malformed(format!(
            "bad magic {magic:#06x} (expected {BTF_MAGIC:#06x}); not a BTF file"
        )));
    }
    if data[2] != BTF_VERSION {
        return Err(malformed(format!(
            "unsupported BTF version {} (expected {BTF_VERSION})",
            data[2]
        )));
    }
    let word = |i: usize| read_u32(data, 4 + 4 * i).unwrap_or(0) as usize;
    let (hdr_len, type_off, type_len, str_off, str_len) =
        (word(0), word(1), word(2), word(3), word(4));
    if hdr_len < HEADER_LEN || hdr_len > data.len() {
        return Err(malformed(format!(
            "header length {hdr_len} out of range (file is {} bytes)",
            data.len()
        )));
    }
    let section = |what: &str, off: usize, len: usize| {
        let start = hdr_len.checked_add(off);
        let end = start.and_then(|s| s.checked_add(len));
        match (start, end) {
            (Some(s), Some(e)) if e <= data.len() => Ok((s, e)),
            _ => Err(malformed(format!(
                "{what} section (offset {off}, length {len}) extends past the end of the \
                 {}-byte file",
                data.len()
            ))),
        }
    };
    let types = section("type", type_off, type_len)?;
    let (str_start, str_end) = section("string", str_off, str_len)?;
    if split && (str_len == 0 || data[str_end - 1] == 0) {
        return Ok((types, (str_start, str_end)));
    }
    if str_len == 0 || data[str_start] != 0 || data[str_end - 1] != 0 {
        return Err(malformed(
            "string section must start and end with a NUL byte",
        ));
    }
    Ok((types, (str_start, str_end)))
}
