//! User frames the BPF program resolved when it captured them (kernels with
//! `bpf_find_vma`): each frame's file, by number, and its offset in that file, with the
//! files' paths. Nothing here reads the traced process, which may be gone.
//! The layout is `check::resources`' (`UFRAME_*`, `UFILE_*`), which the program asserts.

use crate::check::resources::{
    UFILE_PATH_AT, UFILE_PATH_CAP, UFRAME_DEPTH, UFRAME_OFFSET_AT, UFRAME_SIZE,
};
use libbpf_rs::{MapCore, MapFlags, MapHandle};
use std::cell::RefCell;
use std::collections::HashMap;

/// A frame's place: the file's number and the offset in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Place {
    pub file: u32,
    pub offset: u64,
}

pub struct Files {
    frames: MapHandle,
    files: MapHandle,
    /// File numbers to paths, read from the files map as numbers show up.
    paths: RefCell<HashMap<u32, String>>,
}

impl Files {
    pub fn new(frames: MapHandle, files: MapHandle) -> Self {
        Files {
            frames,
            files,
            paths: RefCell::new(HashMap::new()),
        }
    }

    /// The places of the stack under `key` (the packed ustack key), innermost first, one
    /// per address of the stack (`None`: the frame is in no file); `None` when the
    /// program did not resolve this stack (its map was full).
    pub fn places(&self, key: u64, depth: usize) -> Option<Vec<Option<Place>>> {
        let bytes = self
            .frames
            .lookup(&key.to_ne_bytes(), MapFlags::ANY)
            .ok()??;
        Some(parse_frames(&bytes).into_iter().take(depth).collect())
    }

    /// The path of file number `file`.
    pub fn path(&self, file: u32) -> Option<String> {
        if !self.paths.borrow().contains_key(&file) {
            self.refresh();
        }
        self.paths.borrow().get(&file).cloned()
    }

    fn refresh(&self) {
        let mut paths = self.paths.borrow_mut();
        for key in self.files.keys() {
            if let Ok(Some(value)) = self.files.lookup(&key, MapFlags::ANY)
                && let Some((number, path)) = parse_file(&value)
            {
                paths.insert(number, path);
            }
        }
    }
}

fn u32_at(bytes: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(bytes.get(at..at + 4)?.try_into().ok()?))
}

/// `struct fslat_uframes`: `UFRAME_DEPTH` frames of a file number (0: none) and an offset.
fn parse_frames(bytes: &[u8]) -> Vec<Option<Place>> {
    bytes
        .chunks_exact(UFRAME_SIZE)
        .take(UFRAME_DEPTH)
        .map(|f| {
            let file = u32_at(f, 0)?;
            let offset = u32_at(f, UFRAME_OFFSET_AT)?;
            (file != 0).then_some(Place {
                file,
                offset: u64::from(offset),
            })
        })
        .collect()
}

/// `struct fslat_ufile`: the number and the NUL-terminated path (cut ones, starting or
/// ending with `...`, too: they cannot be opened, and render as `[file]+0xOFF`).
fn parse_file(bytes: &[u8]) -> Option<(u32, String)> {
    let number = u32_at(bytes, 0)?;
    let path = bytes.get(UFILE_PATH_AT..(UFILE_PATH_AT + UFILE_PATH_CAP).min(bytes.len()))?;
    let end = path.iter().position(|&b| b == 0).unwrap_or(path.len());
    let path = String::from_utf8_lossy(&path[..end]).into_owned();
    (number != 0 && !path.is_empty()).then_some((number, path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_are_file_numbers_and_offsets_with_zero_for_no_file() {
        let mut bytes = vec![0u8; UFRAME_SIZE * UFRAME_DEPTH];
        bytes[0..4].copy_from_slice(&3u32.to_ne_bytes());
        bytes[4..8].copy_from_slice(&0x1169u32.to_ne_bytes());
        bytes[16..20].copy_from_slice(&1u32.to_ne_bytes());
        bytes[20..24].copy_from_slice(&0x2724au32.to_ne_bytes());
        let f = parse_frames(&bytes);
        assert_eq!(f.len(), UFRAME_DEPTH);
        assert_eq!(
            f[..3],
            [
                Some(Place {
                    file: 3,
                    offset: 0x1169
                }),
                None,
                Some(Place {
                    file: 1,
                    offset: 0x2724a
                })
            ]
        );
    }

    #[test]
    fn a_file_is_its_number_and_path() {
        let mut bytes = vec![0u8; UFILE_PATH_AT + UFILE_PATH_CAP];
        bytes[0..4].copy_from_slice(&2u32.to_ne_bytes());
        let p = b"/usr/lib/x86_64-linux-gnu/libc.so.6";
        bytes[UFILE_PATH_AT..UFILE_PATH_AT + p.len()].copy_from_slice(p);
        assert_eq!(
            parse_file(&bytes),
            Some((2, "/usr/lib/x86_64-linux-gnu/libc.so.6".to_string()))
        );
        bytes[0..4].copy_from_slice(&0u32.to_ne_bytes());
        assert_eq!(parse_file(&bytes), None);
    }
}
