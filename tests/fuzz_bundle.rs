//! The fuzz target of the bundle loader (`fslat::bundle::Bundle::decode`, which reads a
//! file that came from elsewhere): bundles of real checked programs, with bytes flipped,
//! inserted, deleted or cut off, and with their header altered and sealed again with a
//! good checksum, to reach the parser behind it.
//!
//! Properties: nothing panics; a file changed past its magic and format without being
//! sealed again is refused (the checksum); a sealed one either is refused or decodes to a
//! bundle that encodes and decodes to itself; the unchanged file decodes to its bundle.
//!
//!     cargo test --release --test fuzz_bundle                       # 3000 inputs
//!     FSLAT_FUZZ_INPUTS=100000 cargo test --release --test fuzz_bundle
//!
//! `FSLAT_FUZZ_SEED` (default 28) picks another series; a failure names its input.

#[allow(dead_code)]
#[path = "fuzz/gen.rs"]
mod generator;

use fslat::btf::{Features, Fixture};
use fslat::bundle::{Bundle, BundleError, Variant, seal};
use fslat::codegen::Mode;
use generator::Rng;
use std::process::ExitCode;

const SCRIPTS: [&str; 3] = [
    "session vfs_read where latency > 1ms { emit comm, count, ret }",
    "session vfs_read, vfs_write { count() by func; hist(latency) }",
    "session vfs_read where ret < 0 { emit; max(count) by comm }",
];

fn bundles() -> Vec<Bundle> {
    let kernel = Fixture::new();
    SCRIPTS
        .iter()
        .map(|text| {
            let (program, c) =
                fslat::compile(text, &kernel, Mode::Fentry).expect("the fixture has these");
            Bundle {
                name: "fuzz.fsl".into(),
                args: vec![],
                variants: vec![
                    Variant {
                        mode: Mode::Fentry,
                        features: Features::default(),
                        multi: false,
                        program: Ok(program),
                        object: 0,
                    },
                    Variant {
                        mode: Mode::Fsession,
                        features: Features::all(),
                        multi: false,
                        program: Err("not here".into()),
                        object: 0,
                    },
                ],
                // The loader never reads an object; C bytes stand in for one.
                objects: vec![c.into_bytes()],
            }
        })
        .collect()
}

fn mutate_bytes(r: &mut Rng, mut bytes: Vec<u8>) -> Vec<u8> {
    for _ in 0..1 + r.below(4) {
        let at = r.below(bytes.len() + 1);
        match r.below(4) {
            0 if at < bytes.len() => bytes[at] ^= 1 << r.below(8),
            1 => bytes.insert(at, r.next() as u8),
            2 if at < bytes.len() => {
                bytes.remove(at);
            }
            _ => bytes.truncate(at),
        }
    }
    bytes
}

/// The header's JSON and the objects of `b`'s file.
fn parts(b: &Bundle) -> (Vec<u8>, Vec<Vec<u8>>) {
    let file = b.encode();
    let len = u32::from_le_bytes(file[12..16].try_into().expect("4 bytes")) as usize;
    (file[16..16 + len].to_vec(), b.objects.clone())
}

fn check(n: u64, r: &mut Rng, base: &Bundle) -> Result<&'static str, String> {
    let file = base.encode();
    match r.below(3) {
        0 => {
            let bytes = mutate_bytes(r, file.clone());
            let got = Bundle::decode(&bytes);
            if bytes == file {
                return match got {
                    Ok(b) if b == *base => Ok("unchanged"),
                    other => Err(format!("the unchanged file gave {other:?}")),
                };
            }
            match got {
                Ok(_) => Err("a changed file was accepted".into()),
                Err(
                    BundleError::Checksum | BundleError::NotABundle | BundleError::Format { .. },
                ) => Ok("refused"),
                Err(e) => Err(format!(
                    "a changed file was refused for {e:?}, not its checksum"
                )),
            }
        }
        1 => {
            let (json, objects) = parts(base);
            let json = generator::mutate(r, &json);
            sealed_property(n, &seal(&json, &objects))
        }
        _ => {
            // The objects' lengths and count changed under a good checksum.
            let (json, mut objects) = parts(base);
            match r.below(3) {
                0 => objects.push(vec![0; r.below(9)]),
                1 => objects.clear(),
                _ => {
                    let keep = r.below(objects[0].len() + 1);
                    objects[0].truncate(keep);
                }
            }
            sealed_property(n, &seal(&json, &objects))
        }
    }
}

fn sealed_property(n: u64, bytes: &[u8]) -> Result<&'static str, String> {
    match Bundle::decode(bytes) {
        Err(BundleError::Checksum) => Err(format!("input {n}: a sealed file failed its checksum")),
        Err(_) => Ok("refused"),
        Ok(b) => match Bundle::decode(&b.encode()) {
            Ok(again) if again == b => Ok("accepted"),
            other => Err(format!("a decoded bundle does not read back: {other:?}")),
        },
    }
}

fn main() -> ExitCode {
    if std::env::args().any(|a| a == "--list") {
        println!("fuzz_bundle: test");
        return ExitCode::SUCCESS;
    }
    let (inputs, seed) = match (
        generator::env_u64("FSLAT_FUZZ_INPUTS", 3_000),
        generator::env_u64("FSLAT_FUZZ_SEED", 28),
    ) {
        (Ok(i), Ok(s)) => (i, s),
        (Err(e), _) | (_, Err(e)) => {
            println!("fuzz_bundle: {e}");
            return ExitCode::FAILURE;
        }
    };
    let started = std::time::Instant::now();
    let bases = bundles();
    let mut tally = std::collections::BTreeMap::new();
    let mut failed = 0;
    for n in 0..inputs {
        let mut r = Rng::new(seed, n);
        let base = r.pick(&bases);
        match check(n, &mut r, base) {
            Ok(what) => *tally.entry(what).or_insert(0u64) += 1,
            Err(why) => {
                println!("fuzz_bundle: input {n}: {why}");
                failed += 1;
                if failed >= 10 {
                    break;
                }
            }
        }
    }
    println!(
        "fuzz_bundle: {inputs} inputs (seed {seed}) in {:.1} s: {tally:?}",
        started.elapsed().as_secs_f64()
    );
    println!("{} passed, {failed} failed", u64::from(failed == 0));
    if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
