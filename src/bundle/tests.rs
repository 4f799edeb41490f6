use super::*;

fn sample() -> Bundle {
    let (program, _) = crate::compile(
        "session vfs_read where latency > 1ms",
        &crate::btf::Fixture::new(),
        Mode::Fsession,
    )
    .expect("the fixture has vfs_read");
    Bundle {
        name: "slow.fsl".into(),
        args: vec!["10ms".into()],
        variants: vec![
            Variant {
                mode: Mode::Fsession,
                features: Features::all(),
                multi: false,
                program: Ok(program),
                object: 0,
            },
            Variant {
                mode: Mode::Fentry,
                features: Features::default(),
                multi: false,
                program: Err("path() needs bpf_loop".into()),
                object: 0,
            },
        ],
        objects: vec![b"\x7fELF object".to_vec()],
    }
}

#[test]
fn a_bundle_reads_back_as_written() {
    let b = sample();
    assert_eq!(Bundle::decode(&b.encode()), Ok(b));
}

#[test]
fn a_script_or_an_elf_file_is_not_a_bundle() {
    for bytes in [&b"session vfs_read"[..], b"\x7fELF", b"", b"FSLATBN"] {
        assert_eq!(Bundle::decode(bytes), Err(BundleError::NotABundle));
        assert!(!Bundle::is_bundle(bytes));
    }
}

#[test]
fn a_truncated_bundle_is_refused_by_its_checksum() {
    let bytes = sample().encode();
    for len in [
        bytes.len() - 1,
        bytes.len() - CHECKSUM_LEN - 1,
        60,
        FIXED_LEN + 5,
    ] {
        assert_eq!(
            Bundle::decode(&bytes[..len]),
            Err(BundleError::Checksum),
            "cut at {len}"
        );
    }
}

#[test]
fn an_altered_byte_anywhere_past_the_format_is_refused() {
    let bytes = sample().encode();
    for at in [
        FIXED_LEN - 1,
        FIXED_LEN + 10,
        bytes.len() / 2,
        bytes.len() - 40,
        bytes.len() - 1,
    ] {
        let mut b = bytes.clone();
        b[at] ^= 0x20;
        assert_eq!(Bundle::decode(&b), Err(BundleError::Checksum), "byte {at}");
    }
}

#[test]
fn another_format_is_refused_before_its_checksum() {
    let mut b = sample().encode();
    b[MAGIC.len()] = 1;
    assert_eq!(Bundle::decode(&b), Err(BundleError::Format { found: 1 }));
}

/// A header like this fslat's, sealed with a good checksum.
fn sealed(edit: impl FnOnce(&mut serde_json::Value)) -> Vec<u8> {
    let b = sample();
    let mut header = serde_json::json!({
        "fslat": VERSION,
        "arch": std::env::consts::ARCH,
        "args": b.args,
        "name": b.name,
        "variants": b.variants,
        "objects": [b.objects[0].len()],
    });
    edit(&mut header);
    seal(&serde_json::to_vec(&header).unwrap(), &b.objects)
}

#[test]
fn a_sealed_copy_of_the_sample_header_decodes() {
    assert_eq!(Bundle::decode(&sealed(|_| {})), Ok(sample()));
}

#[test]
fn another_fslat_version_is_refused() {
    let b = sealed(|h| h["fslat"] = "0.0.9".into());
    assert_eq!(
        Bundle::decode(&b),
        Err(BundleError::Version {
            found: "0.0.9".into()
        })
    );
    let message = BundleError::Version {
        found: "0.0.9".into(),
    }
    .to_string();
    assert!(message.contains("built by fslat 0.0.9"), "{message}");
}

#[test]
fn another_architecture_is_refused() {
    let b = sealed(|h| h["arch"] = "riscv64".into());
    assert_eq!(
        Bundle::decode(&b),
        Err(BundleError::Arch {
            found: "riscv64".into()
        })
    );
}

#[test]
fn object_lengths_must_cover_the_objects_exactly() {
    for lens in [
        serde_json::json!([1000]),
        serde_json::json!([3]),
        serde_json::json!([]),
    ] {
        let b = sealed(|h| h["objects"] = lens.clone());
        assert!(
            matches!(Bundle::decode(&b), Err(BundleError::Header(_))),
            "{lens}"
        );
    }
}

#[test]
fn a_variant_naming_a_missing_object_is_refused() {
    let b = sealed(|h| h["variants"][0]["object"] = 7.into());
    assert!(matches!(Bundle::decode(&b), Err(BundleError::Header(m)) if m.contains("object 7")));
}

#[test]
fn an_opened_bundle_decodes_each_profiles_program_when_asked() {
    let b = sample();
    let opened = Bundle::open(&b.encode()).expect("a good bundle");
    assert_eq!(opened.profiles.len(), b.variants.len());
    for (i, v) in b.variants.iter().enumerate() {
        assert_eq!(opened.profiles[i].mode, v.mode);
        assert_eq!(opened.program(i), Ok(v.program.clone()), "profile {i}");
    }
    assert_eq!(opened.object(0), Ok(&b.objects[0][..]));
    assert!(matches!(opened.program(9), Err(BundleError::Header(_))));
}
