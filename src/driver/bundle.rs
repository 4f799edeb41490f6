//! `fslat build SCRIPT -o FILE` and `fslat FILE`: a script compiled once, for every kernel
//! profile fslat may meet, and run later where there is no clang (`crate::bundle` is the
//! file format).
//!
//! The profiles come from the two places that decide how fslat runs on a kernel: the
//! features of `btf::FEATURES` (in the order kernels gained them, each profile one more,
//! and multi-attach on top of fsession), and `resolve_mode`, asked for every `--mode`
//! choice on each profile. A mode or feature added there is in every bundle built after.

use super::{
    Error, ModeChoice, Options, check_options, compile_script, compiler, load_kernel_types,
    resolve_mode, run_object, traceability,
};
use crate::btf::{Btf, FEATURES, Features, FuncSig, KType, KernelTypes, TypeId};
use crate::bundle::{Bundle, Opened, Variant};
use crate::check::program::{Program, UsdtPoint};
use crate::codegen::Mode;
use clap::ValueEnum;
use std::rc::Rc;

/// The largest bundle `fslat FILE` reads (one holds a few objects of some KB each).
const MAX_BUNDLE_BYTES: u64 = 256 << 20;

/// A kernel's types with the features of one profile instead of its own (`fslat
/// build`); or, at a bundle's start, the running kernel's features with no types
/// (`running`).
struct Profile<'a> {
    kernel: &'a dyn KernelTypes,
    features: Features,
    multi: bool,
    /// The running kernel: its scheduler and its name are this machine's.
    running: bool,
}

impl KernelTypes for Profile<'_> {
    fn function(&self, name: &str) -> Option<FuncSig> {
        self.kernel.function(name)
    }
    fn function_names(&self) -> Vec<String> {
        self.kernel.function_names()
    }
    fn tracepoint(&self, name: &str) -> Option<FuncSig> {
        self.kernel.tracepoint(name)
    }
    fn tracepoint_names(&self) -> Vec<String> {
        self.kernel.tracepoint_names()
    }
    fn tracefs_events(&self) -> Option<Vec<(String, String)>> {
        self.kernel.tracefs_events()
    }
    fn resolve(&self, ty: TypeId) -> KType {
        self.kernel.resolve(ty)
    }
    fn type_name(&self, ty: TypeId) -> String {
        self.kernel.type_name(ty)
    }
    fn field(&self, ty: TypeId, name: &str) -> Option<crate::btf::Field> {
        self.kernel.field(ty, name)
    }
    fn field_names(&self, ty: TypeId) -> Vec<String> {
        self.kernel.field_names(ty)
    }
    fn has_fsession(&self) -> bool {
        self.features.fsession
    }
    fn has_fsession_multi(&self) -> bool {
        self.multi
    }
    fn features(&self) -> Features {
        self.features
    }
    fn preemption(&self) -> Option<crate::btf::preemption::Preemption> {
        self.running.then(crate::btf::preemption::running)
    }
    fn describe(&self) -> String {
        match self.running {
            true => crate::btf::this_kernel(),
            false => format!("a kernel with {}", feature_words(&self.features)),
        }
    }
}

/// The running kernel's types as a bundle's start has them: none. Its features and
/// multi-attach come from the names in its BTF (`Btf::vmlinux_features`, no parse of its
/// types); the bundle holds its checked programs, and libbpf finds the functions as it
/// loads (`check_functions` reads the whole BTF only when a load failed).
struct NoTypes;

impl KernelTypes for NoTypes {
    fn function(&self, _: &str) -> Option<FuncSig> {
        None
    }
    fn function_names(&self) -> Vec<String> {
        Vec::new()
    }
    fn resolve(&self, _: TypeId) -> KType {
        KType::Void
    }
    fn type_name(&self, _: TypeId) -> String {
        String::new()
    }
    fn field(&self, _: TypeId, _: &str) -> Option<crate::btf::Field> {
        None
    }
    fn field_names(&self, _: TypeId) -> Vec<String> {
        Vec::new()
    }
    fn has_fsession(&self) -> bool {
        false
    }
}

/// `"5.12"` as `(5, 12)`, for ordering the features by the kernel that brought them.
fn version(since: &str) -> (u32, u32) {
    let mut parts = since.split('.').map(|p| p.parse().unwrap_or(u32::MAX));
    (
        parts.next().unwrap_or(u32::MAX),
        parts.next().unwrap_or(u32::MAX),
    )
}

/// Every profile a bundle is built for: no feature (Linux 5.10), then each feature added
/// in the order kernels gained them, and multi-attach once fsession is there.
pub fn profiles() -> Vec<(Features, bool)> {
    let mut by_age: Vec<_> = FEATURES.iter().collect();
    by_age.sort_by_key(|i| version(i.since));
    let mut features = Features::default();
    let mut out = vec![(features, false)];
    for info in by_age {
        features.set(info.feature, true);
        out.push((features, false));
    }
    if features.fsession {
        out.push((features, true));
    }
    out
}

/// `fslat build`: checks `text` against the build machine's kernel types (or `--btf`),
/// then for every profile and every mode fslat may pick on it, the checked program and
/// its object; an object is compiled once however many profiles share its C.
pub fn build(name: &str, text: &str, out: &std::path::Path, opts: &Options) -> Result<(), Error> {
    let kernel = load_kernel_types(opts.btf.as_ref())?;
    let rule = Rc::new(traceability(opts));
    // The build machine's own profile first: its diagnostics are the script's.
    let mode = resolve_mode(ModeChoice::Auto, &kernel)?;
    // `$1`.. are read at run time, typed by the words given here (examples).
    let options = |kernel: &dyn KernelTypes| {
        check_options(opts, rule.clone(), kernel).map(|o| crate::check::Options {
            runtime_args: true,
            ..o
        })
    };
    let (program, _) = compile_script(name, text, &kernel, mode, options(&kernel)?)?;
    if let Some(s) = program.sessions.iter().find(|s| s.user.is_some()) {
        return Err(Error::BundleUserSession(s.label.clone()));
    }
    let compiler = compiler(opts)?;
    let mut variants: Vec<Variant> = Vec::new();
    let mut sources: Vec<String> = Vec::new();
    let mut objects = Vec::new();
    for (features, multi) in profiles() {
        let profile = Profile {
            kernel: &kernel,
            features,
            multi,
            running: false,
        };
        for &choice in ModeChoice::value_variants() {
            let Ok(mode) = resolve_mode(choice, &profile) else {
                continue;
            };
            if variants
                .iter()
                .any(|v| v.mode == mode && v.features == features && v.multi == multi)
            {
                continue;
            }
            let checked = options(&profile).map_err(|e| e.to_string()).and_then(|o| {
                crate::compile_with(text, &profile, mode, o).map_err(|diags| {
                    let source = crate::diag::Source { name, text };
                    crate::diag::render(&source, &diags, false)
                })
            });
            let (program, object) = match checked {
                Ok((program, c)) => {
                    let at = match sources.iter().position(|s| *s == c) {
                        Some(at) => at,
                        None => {
                            super::interrupted()?;
                            objects.push(compiler.compile(&c)?);
                            sources.push(c);
                            sources.len() - 1
                        }
                    };
                    (Ok(program), at)
                }
                Err(why) => (Err(why), 0),
            };
            variants.push(Variant {
                mode,
                features,
                multi,
                program,
                object,
            });
        }
    }
    let bundle = Bundle {
        name: name.to_string(),
        args: opts.script_args.clone(),
        variants,
        objects,
    };
    super::write_output(Some(&out.to_path_buf()), &bundle.encode())?;
    if opts.verbose {
        for v in &bundle.variants {
            crate::stderr_line!(
                "fslat: {}: {} with {}{}: {}",
                out.display(),
                v.mode.name(),
                feature_words(&v.features),
                if v.multi { ", multi-attach" } else { "" },
                match &v.program {
                    Ok(_) => format!("object {}", v.object),
                    Err(_) => "cannot run (the script needs more)".into(),
                }
            );
        }
    }
    Ok(())
}

fn feature_words(f: &Features) -> String {
    let names: Vec<&str> = FEATURES
        .iter()
        .filter(|i| f.has(i.feature))
        .map(|i| i.name)
        .collect();
    if names.is_empty() {
        "none of fslat's optional features".into()
    } else {
        names.join(", ")
    }
}

/// Reads the bundle at `path`; `None` when the file is not one (a script).
pub fn open(path: &std::path::Path) -> Result<Option<Opened>, Error> {
    use std::io::Read;
    let read_error = |source| Error::ReadScript {
        path: path.display().to_string(),
        source,
    };
    let mut file = super::open_interruptible(path).map_err(read_error)?;
    let mut start = [0u8; crate::bundle::MAGIC.len()];
    let n = file.read(&mut start).map_err(read_error)?;
    if !Bundle::is_bundle(&start[..n]) {
        return Ok(None);
    }
    let mut bytes = start[..n].to_vec();
    file.take(MAX_BUNDLE_BYTES)
        .read_to_end(&mut bytes)
        .map_err(read_error)?;
    Bundle::open(&bytes).map(Some).map_err(|why| Error::Bundle {
        path: path.display().to_string(),
        why,
    })
}

/// The profile of `bundle` (its index) for this kernel in `mode`: the one built for the
/// most of the features the kernel has.
fn choose(bundle: &Opened, mode: Mode, kernel: &dyn KernelTypes) -> Option<usize> {
    let have = kernel.features();
    let (at, _) = bundle
        .profiles
        .iter()
        .enumerate()
        .filter(|(_, v)| v.mode == mode && (!v.multi || kernel.has_fsession_multi()))
        .filter(|(_, v)| {
            FEATURES
                .iter()
                .all(|i| !v.features.has(i.feature) || have.has(i.feature))
        })
        .max_by_key(|(_, v)| {
            let n = FEATURES
                .iter()
                .filter(|i| v.features.has(i.feature))
                .count();
            (n, v.multi)
        })?;
    Some(at)
}

/// `fslat FILE` for a bundle: the variant for this kernel, run as a script would be; no
/// clang.
pub fn run(path: &std::path::Path, bundle: &Opened, opts: &Options) -> Result<(), Error> {
    super::interrupted()?;
    if let Some(pid) = opts.pid {
        super::target::check_process(pid)?;
    }
    // The running kernel's features are all a start needs of its BTF (another kernel's,
    // from --btf, is read whole).
    let kernel: Box<dyn KernelTypes> = match &opts.btf {
        Some(file) => Box::new(load_kernel_types(Some(file))?),
        None => {
            let (features, multi) = Btf::vmlinux_features().map_err(Error::Btf)?;
            Box::new(Profile {
                kernel: &NoTypes,
                features,
                multi,
                running: true,
            })
        }
    };
    let kernel = kernel.as_ref();
    let mode = resolve_mode(opts.mode, kernel)?;
    let at = choose(bundle, mode, kernel).ok_or_else(|| Error::BundleNoVariant {
        path: path.display().to_string(),
        mode: mode.name(),
        kernel: kernel.describe(),
    })?;
    let damaged = |why| Error::Bundle {
        path: path.display().to_string(),
        why,
    };
    // Only the chosen profile's program is decoded.
    let program = bundle
        .program(at)
        .map_err(damaged)?
        .map_err(|why| Error::BundleCannotRun {
            path: path.display().to_string(),
            kernel: kernel.describe(),
            why,
        })?;
    let object = bundle.object(at).map_err(damaged)?;
    // The kernel (libbpf) finds the functions as it loads: a function it lacks fails the
    // load, and only then are the names looked up, for a message that names the one
    // missing (a lookup per function would cost every start a pass over the BTF).
    // A glob or list matched on the build machine: the functions this kernel lacks are
    // left out (with a warning), the rest traced.
    let result = run_object(&program, object, mode, opts, &[], None);
    if let Err(Error::Runtime(_)) = &result {
        // The whole BTF only now: a start that loads never parses it.
        let absent = absent_functions(&program, &load_kernel_types(opts.btf.as_ref())?)?;
        if !absent.is_empty() {
            return run_object(&program, object, mode, opts, &absent, None);
        }
    }
    result
}

/// The functions of several-function sessions (globs, lists) that the running kernel
/// lacks, as (session, target), each session's said in a warning; an error when a
/// session would trace nothing, or when a one-function session's function or a span's
/// end is missing.
fn absent_functions(
    program: &Program,
    kernel: &dyn KernelTypes,
) -> Result<Vec<(usize, usize)>, Error> {
    check_functions(program, kernel)?;
    let mut absent = Vec::new();
    for s in program
        .sessions
        .iter()
        .filter(|s| s.several && s.span.is_none())
    {
        // An `on` of several tracepoints: each one here, with the arguments it had.
        let tracepoints = s.on.as_ref().is_some_and(|p| p.tracepoint);
        let here = |t: &crate::check::program::Target| match tracepoints {
            true => kernel.tracepoint(&t.func).map(|sig| sig.params.len()),
            false => kernel.function(&t.func).map(|_| t.args),
        };
        if let Some((t, n)) = s
            .targets
            .iter()
            .find_map(|t| here(t).filter(|&n| n != t.args).map(|n| (t, n)))
        {
            return Err(Error::BundleTracepointArgs {
                session: s.label.clone(),
                name: format!("tp:{}", t.func),
                built: t.args,
                here: n,
                kernel: kernel.describe(),
            });
        }
        let missing: Vec<(usize, &str)> = s
            .targets
            .iter()
            .enumerate()
            .filter(|(_, t)| here(t).is_none())
            .map(|(i, t)| (i, t.func.as_str()))
            .collect();
        if missing.is_empty() {
            continue;
        }
        if missing.len() == s.targets.len() {
            return Err(Error::BundleMissingFunction {
                session: s.label.clone(),
                func: format!(
                    "{} {}",
                    if tracepoints {
                        "tracepoint"
                    } else {
                        "function"
                    },
                    missing[0].1
                ),
                kernel: kernel.describe(),
            });
        }
        const NAMED: usize = 5;
        let names: Vec<&str> = missing.iter().take(NAMED).map(|m| m.1).collect();
        let more = match missing.len().saturating_sub(NAMED) {
            0 => String::new(),
            n => format!(" and {n} more"),
        };
        crate::stderr_line!(
            "fslat: warning: session {}: {} of its {} functions are not in {}, traced without them: {}{more}",
            s.label,
            missing.len(),
            s.targets.len(),
            kernel.describe(),
            names.join(", ")
        );
        absent.extend(missing.iter().map(|m| (s.index, m.0)));
    }
    Ok(absent)
}

/// Every function the bundle's one-function sessions attach to, and every point of its
/// spans, are in the running kernel; its tracepoints have the arguments they had at build.
fn check_functions(program: &Program, kernel: &dyn KernelTypes) -> Result<(), Error> {
    for s in program.sessions.iter().filter(|s| !s.several) {
        // A span's target is its END, which may be a tracepoint.
        let span_points = s
            .span
            .iter()
            .flat_map(|p| p.starts.iter().map(|s| &s.point).chain([&p.end]));
        for point in s.on.iter().chain(span_points) {
            if let Some(usdt) = &point.usdt {
                check_usdt(&s.label, usdt, point.args)?;
            }
        }
        // A USDT point is no kernel function: its probe was checked above.
        let names: Vec<(&str, bool, usize)> = match (&s.span, &s.on) {
            (Some(span), _) => span
                .starts
                .iter()
                .map(|p| &p.point)
                .chain([&span.end])
                .filter(|p| p.usdt.is_none())
                .map(|p| (p.name.as_str(), p.tracepoint, p.args))
                .collect(),
            (_, Some(on)) if on.usdt.is_some() => Vec::new(),
            (_, Some(on)) => vec![(&on.name, on.tracepoint, on.args)],
            // A profile samples the CPUs: no function.
            _ if s.profile.is_some() => Vec::new(),
            // An offcpu item is at the scheduler's tracepoints, in every kernel fslat runs on.
            _ if s.offcpu => Vec::new(),
            _ => s
                .targets
                .iter()
                .map(|t| (t.func.as_str(), false, 0))
                .collect(),
        };
        for (name, tracepoint, built) in names {
            let found = match tracepoint {
                true => kernel.tracepoint(name).map(|sig| sig.params.len()),
                false => kernel.function(name).map(|_| built),
            };
            if let Some(here) = found.filter(|&here| here != built) {
                return Err(Error::BundleTracepointArgs {
                    session: s.label.clone(),
                    name: format!("tp:{name}"),
                    built,
                    here,
                    kernel: kernel.describe(),
                });
            }
            let found = found.is_some();
            if !found {
                return Err(Error::BundleMissingFunction {
                    session: s.label.clone(),
                    func: format!(
                        "{} {name}",
                        if tracepoint { "tracepoint" } else { "function" }
                    ),
                    kernel: kernel.describe(),
                });
            }
        }
    }
    Ok(())
}

/// A bundle's USDT point: the file it was built with is here and has the probe, with the
/// arguments the program was typed by (their count: libbpf reads each where this file's
/// note says). The program attaches to the file by the build machine's path.
fn check_usdt(session: &str, point: &UsdtPoint, args: usize) -> Result<(), Error> {
    let refuse = |why: String| Error::BundleUsdtProbe {
        session: session.into(),
        probe: format!("{}:{}", point.provider, point.name),
        path: point.path.clone(),
        why,
    };
    let probes = crate::elf::sdt::probes(std::path::Path::new(&point.path))
        .map_err(|e| refuse(e.to_string()))?;
    let sites: Vec<_> = probes
        .iter()
        .filter(|p| p.provider == point.provider && p.name == point.name)
        .collect();
    let Some(first) = sites.first() else {
        return Err(refuse("the file has no such probe".into()));
    };
    if first.args.len() != args {
        return Err(refuse(format!(
            "it has {} arguments here, {args} where the bundle was built",
            first.args.len()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A bundle's USDT point whose file is gone, or has no SDT notes, is refused at load
    /// naming the probe and the file.
    #[test]
    fn a_usdt_point_whose_file_lacks_the_probe_is_refused() {
        let point = |path: &str| UsdtPoint {
            path: path.into(),
            provider: "fslat".into(),
            name: "args".into(),
        };
        let gone = check_usdt("usdt:args", &point("/nonexistent/fslat-sdt"), 8)
            .unwrap_err()
            .to_string();
        assert!(
            gone.starts_with(
                "session usdt:args: USDT probe fslat:args of /nonexistent/fslat-sdt: "
            ),
            "{gone}"
        );
        assert!(
            gone.contains("a bundle attaches to the probes of the file it was built with"),
            "{gone}"
        );
        let exe = std::env::current_exe().unwrap().display().to_string();
        let plain = check_usdt("usdt:args", &point(&exe), 8)
            .unwrap_err()
            .to_string();
        assert!(plain.contains(": the file has no such probe; "), "{plain}");
    }

    #[test]
    fn profiles_start_with_no_feature_and_add_one_at_a_time_in_kernel_order() {
        let p = profiles();
        assert_eq!(p[0], (Features::default(), false));
        // 5.11 task storage, 5.12 atomics, 5.17 bpf_loop, 6.6, 6.13, 7.0 fsession.
        assert!(p[1].0.task_storage && !p[1].0.atomics);
        assert!(p[2].0.atomics && !p[2].0.bpf_loop);
        assert!(p[3].0.bpf_loop && !p[3].0.fsession);
        assert_eq!(p.len(), FEATURES.len() + 2);
        assert_eq!(p[p.len() - 1], (Features::all(), true));
        assert_eq!(p[p.len() - 2], (Features::all(), false));
    }
}
