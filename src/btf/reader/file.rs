//! Reading a BTF file: the running kernel's, or one given with `--btf`; mapped when
//! the kernel allows it, else read, and only a regular file of a bounded size.

use super::*;

/// Where the running kernel exposes its own BTF.
pub const VMLINUX_PATH: &str = "/sys/kernel/btf/vmlinux";

/// A kernel's BTF is a few MiB (7.2's: 6 MiB); anything far bigger is not one.
pub const MAX_BTF_BYTES: u64 = 256 << 20;

/// The BTF bytes: read into memory, or mapped read-only from the file.
pub(super) enum Blob {
    Owned(Vec<u8>),
    Mapped(crate::sys::Mapping),
}

impl std::ops::Deref for Blob {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Blob::Owned(v) => v,
            Blob::Mapped(m) => m.bytes(),
        }
    }
}

impl Btf {
    /// The running kernel's BTF, from `/sys/kernel/btf/vmlinux`.
    pub fn vmlinux() -> Result<Btf, BtfError> {
        Btf::from_file(VMLINUX_PATH)
    }

    /// A raw BTF file (e.g. a copy of some kernel's `/sys/kernel/btf/vmlinux`).
    pub fn from_file(path: impl AsRef<Path>) -> Result<Btf, BtfError> {
        let path = path.as_ref();
        let data = read_blob(path)?;
        // The running kernel checked its own BTF's names when it booted (it refuses a
        // name that is not an identifier), and checking 100 000 types again is half of
        // fslat's start-up work in an emulated guest: only other files are checked.
        let kernel_checked = path == Path::new(VMLINUX_PATH);
        let mut btf = Btf::parse(data, kernel_checked).map_err(|e| e.with_path(path))?;
        btf.origin = Some(path.to_path_buf());
        Ok(btf)
    }
}

/// The bytes of the BTF file at `path`.
pub(super) fn read_blob(path: &Path) -> Result<Blob, BtfError> {
    let read_error = |error| BtfError::Read {
        path: path.to_path_buf(),
        error,
    };
    // sysfs hands out /sys/kernel/btf/vmlinux a page per read(2): 1 400 system calls,
    // which cost tens of milliseconds in an emulated guest. Kernels from 6.16 let it
    // be mapped instead; older ones (and any error) fall back to reading.
    // A FIFO would block and /dev/zero never end: only regular files of a bounded
    // size are read (sysfs's vmlinux is a regular file with its size).
    let meta = std::fs::metadata(path).map_err(read_error)?;
    if !meta.is_file() {
        return Err(BtfError::NotAFile {
            path: path.to_path_buf(),
        });
    }
    if meta.len() > MAX_BTF_BYTES {
        return Err(BtfError::TooLarge {
            path: path.to_path_buf(),
            size: meta.len(),
        });
    }
    let file = std::fs::File::open(path).map_err(read_error)?;
    Ok(match crate::sys::Mapping::new(&file) {
        Some(m) => Blob::Mapped(m),
        None => {
            let mut v = Vec::new();
            std::io::Read::read_to_end(&mut &file, &mut v).map_err(read_error)?;
            Blob::Owned(v)
        }
    })
}
