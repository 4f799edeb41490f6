//! USDT points (`usdt:FILE:NAME`, `usdt:FILE:PROVIDER:NAME`): a probe of a file's SDT
//! notes, as an `on` point or a span's end. Its arguments are `arg0`..`argN`, typed by
//! the note (size and sign); they have no file's types behind them, so their type ids are
//! a range of their own (`usdt_type`), which the checker reads without asking the
//! kernel's or a file's types.

use super::program::{Scalar, UsdtPoint};
use super::{Checker, quote_list};
use crate::btf::{FuncSig, Param, TypeId};
use crate::diag::{DiagKind, Diagnostic, closest};
use crate::elf::{self, sdt};
use crate::syntax::ast;

/// The first type id of a USDT argument: above any BTF or DWARF id fslat reads.
const USDT_TYPES: TypeId = 0xFFFF_FF00;

/// The type id of a USDT argument of `size` bytes.
fn usdt_type(size: u8, signed: bool) -> TypeId {
    USDT_TYPES + u32::from(size) * 2 + u32::from(signed)
}

/// The integer a USDT argument's type id stands for.
pub(super) fn usdt_scalar(ty: TypeId) -> Option<Scalar> {
    let code = ty.checked_sub(USDT_TYPES)?;
    let size = (code / 2) as u8;
    matches!(size, 1 | 2 | 4 | 8).then_some(Scalar {
        size,
        signed: code % 2 == 1,
    })
}

impl Checker<'_> {
    /// The probe `usdt:FILE:[PROVIDER:]NAME` names: its arguments as a signature (named
    /// `PROVIDER:NAME`), and what the runtime attaches; `None` when a diagnostic was
    /// recorded.
    pub(super) fn usdt_point(
        &mut self,
        name: &ast::Ident,
        at: &ast::Usdt,
    ) -> Option<(FuncSig, UsdtPoint)> {
        let file = &at.file;
        let (shown, probes) = self.usdt_file(file)?;
        let provider = at.provider.as_ref().map(|p| p.name.as_str());
        let found: Vec<&sdt::Probe> = probes
            .iter()
            .filter(|p| p.name == name.name && provider.is_none_or(|w| p.provider == w))
            .collect();
        let Some(first) = found.first() else {
            self.unknown_usdt(name, at, &shown, &probes);
            return None;
        };
        let mut providers: Vec<&str> = found.iter().map(|p| p.provider.as_str()).collect();
        providers.dedup();
        if providers.len() > 1 {
            let d = Diagnostic::new(
                name.span.clone(),
                DiagKind::UsdtAmbiguous {
                    name: name.name.clone(),
                    providers: quote_list(&providers),
                },
            )
            .hint(format!(
                "name the provider: `usdt:{}:{}:{}`",
                file.name, providers[0], name.name
            ));
            self.error_with(d);
            return None;
        }
        let probe = format!("{}:{}", first.provider, first.name);
        // libbpf attaches every site of the probe, and refuses them all if one argument
        // of one site cannot be read.
        for site in &found {
            if let Some((index, a)) = site
                .args
                .iter()
                .enumerate()
                .find(|(_, a)| a.at == sdt::Location::Other)
            {
                self.error(
                    name.span.clone(),
                    DiagKind::UsdtUnreadableArg {
                        probe,
                        index,
                        spec: a.spec.clone(),
                    },
                );
                return None;
            }
        }
        // The kernel refuses (EINVAL) a uprobe whose `ref_ctr_offset` is not 2-byte aligned,
        // after the run's other points may have attached: refused here, before any.
        if let Some(offset) = found
            .iter()
            .find_map(|p| p.semaphore.filter(|o| o % 2 != 0))
        {
            let d = Diagnostic::new(
                name.span.clone(),
                DiagKind::UsdtSemaphore {
                    probe: probe.clone(),
                    offset,
                },
            )
            .hint("the program's SDT note is damaged, or was not made by sys/sdt.h: rebuild it");
            self.error_with(d);
            return None;
        }
        let sig = FuncSig {
            name: probe,
            params: first
                .args
                .iter()
                .enumerate()
                .map(|(i, a)| Param {
                    name: format!("arg{i}"),
                    ty: usdt_type(a.size, a.signed),
                })
                .collect(),
            ret: 0,
        };
        let point = UsdtPoint {
            path: shown,
            provider: first.provider.clone(),
            name: first.name.clone(),
        };
        Some((sig, point))
    }

    /// A USDT point's file that could not be found or read: recorded, `None`.
    fn unreadable_file<T>(&mut self, file: &ast::Ident, why: String) -> Option<T> {
        let kind = DiagKind::UserFile {
            file: file.name.clone(),
            why,
        };
        self.error(file.span.clone(), kind);
        None
    }

    /// The file of a USDT point and its probes: `None` (a diagnostic recorded) when it
    /// cannot be found or read, or has no SDT notes.
    fn usdt_file(&mut self, file: &ast::Ident) -> Option<(String, Vec<sdt::Probe>)> {
        if !cfg!(target_arch = "x86_64") {
            self.error(file.span.clone(), DiagKind::UserNeedsX86);
            return None;
        }
        let path = match elf::find(&file.name, &self.input.opts.lookup) {
            Ok(Some(path)) => path,
            Ok(None) => {
                self.error(file.span.clone(), DiagKind::NoMainExecutable);
                return None;
            }
            Err(e) => return self.unreadable_file(file, e.to_string()),
        };
        let shown = path.display().to_string();
        let probes = match sdt::probes(&path) {
            Ok(p) => p,
            Err(e) => return self.unreadable_file(file, e.to_string()),
        };
        if probes.is_empty() {
            let d = Diagnostic::new(file.span.clone(), DiagKind::NoSdtNotes { file: shown })
                .hint("USDT probes come from `sys/sdt.h`'s DTRACE_PROBE/STAP_PROBE macros (PostgreSQL, python3, libstdc++ have them); `session FILE:FUNC` traces a function of the file");
            self.error_with(d);
            return None;
        }
        Some((shown, probes))
    }

    /// A probe the file does not have: the nearest names, and the file's providers.
    fn unknown_usdt(
        &mut self,
        name: &ast::Ident,
        at: &ast::Usdt,
        shown: &str,
        probes: &[sdt::Probe],
    ) {
        let provider = at.provider.as_ref().map(|p| p.name.as_str());
        let written = match provider {
            Some(p) => format!("{p}:{}", name.name),
            None => name.name.clone(),
        };
        let at_span = match &at.provider {
            Some(p) => p.span.start..name.span.end,
            None => name.span.clone(),
        };
        let mut names: Vec<String> = probes
            .iter()
            .filter(|p| provider.is_none_or(|w| p.provider == w))
            .map(|p| p.name.clone())
            .collect();
        names.sort();
        names.dedup();
        let near = closest(&name.name, names.iter().map(String::as_str));
        let mut d = Diagnostic::new(
            at_span,
            DiagKind::UnknownUsdt {
                probe: written,
                file: shown.to_string(),
            },
        );
        if !near.is_empty() {
            d = d.hint(format!("did you mean {}?", quote_list(&near)));
        }
        let providers = sdt::providers(probes);
        let providers: Vec<&str> = providers.iter().map(String::as_str).collect();
        d = d.hint(format!(
            "its providers: {}; `fslat -l 'usdt:{shown}'` lists its probes",
            quote_list(&providers)
        ));
        self.error_with(d);
    }
}
