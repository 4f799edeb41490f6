//! What a run reads once its object is in the kernel: the maps and programs by name,
//! whichever loader put them there (libbpf's, or `replay`'s from the warm start's record).

use libbpf_rs::{MapCore, MapHandle};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

pub struct Loaded {
    maps: Vec<MapHandle>,
    progs: Vec<(String, OwnedFd)>,
}

impl Loaded {
    pub fn new(maps: Vec<MapHandle>, progs: Vec<(String, OwnedFd)>) -> Loaded {
        Loaded { maps, progs }
    }

    /// The maps and loaded programs of `obj` (their descriptors duplicated).
    pub fn from_object(obj: &libbpf_rs::Object) -> std::io::Result<Loaded> {
        let maps = obj
            .maps()
            .filter(|m| crate::sys::bpf::map_made(m))
            .map(|m| MapHandle::try_from(&m).map_err(std::io::Error::other))
            .collect::<std::io::Result<_>>()?;
        let progs = obj
            .progs()
            .filter(|p| crate::sys::bpf::prog_loaded(p))
            .map(|p| {
                Ok((
                    p.name().to_string_lossy().into_owned(),
                    p.as_fd().try_clone_to_owned()?,
                ))
            })
            .collect::<std::io::Result<_>>()?;
        Ok(Loaded { maps, progs })
    }

    pub fn map(&self, name: &str) -> Option<&MapHandle> {
        self.maps
            .iter()
            .find(|m| m.name().to_string_lossy() == name)
    }

    /// A handle of its own on map `name`.
    pub fn handle(&self, name: &str) -> Result<Option<MapHandle>, libbpf_rs::Error> {
        self.map(name).map(MapHandle::try_from).transpose()
    }

    pub fn maps(&self) -> impl Iterator<Item = &MapHandle> {
        self.maps.iter()
    }

    pub fn progs(&self) -> impl Iterator<Item = (&str, BorrowedFd<'_>)> {
        self.progs.iter().map(|(n, fd)| (n.as_str(), fd.as_fd()))
    }
}
