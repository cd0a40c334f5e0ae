//! `unpack` takes any bytes: it returns `Ok` or `Err`, never panics, and on `Err` leaves
//! nothing behind, neither the destination nor a temporary directory beside it.

use std::io::Write;
use std::path::Path;

use murmur_manifest::Coded;
use murmur_registry::archive::{UnpackLimits, unpack};
use proptest::prelude::*;

/// Small limits, so generated archives reach them.
const LIMITS: UnpackLimits = UnpackLimits {
    max_entries: 6,
    max_file_bytes: 2048,
    max_total_bytes: 4096,
};

/// One tar member, its header fields as generated.
#[derive(Debug, Clone)]
struct Member {
    name: Vec<u8>,
    kind: u8,
    link: Vec<u8>,
    data: Vec<u8>,
    /// The size the header claims; `None` is the data's true size.
    claimed_size: Option<u64>,
    break_checksum: bool,
}

fn name() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        Just(b"murmur.yaml".to_vec()),
        Just(b"component.wasm".to_vec()),
        Just(b"../evil".to_vec()),
        Just(b"/etc/evil".to_vec()),
        Just(b"a/../../evil".to_vec()),
        Just(b"./".to_vec()),
        Just(b"dir/".to_vec()),
        Just(b"dir/file".to_vec()),
        "[a-z./]{0,12}".prop_map(String::into_bytes),
        prop::collection::vec(any::<u8>(), 0..24),
    ]
}

fn data() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..600),
        Just(b"15 path=../evil\n".to_vec()),
        Just(b"16 path=murmur.yaml\n".to_vec()),
        Just(b"12 size=999\n".to_vec()),
        Just(b"17 linkpath=/etc/x\n".to_vec()),
        Just(b"../evil\0".to_vec()),
        (0usize..4000).prop_map(|n| vec![0; n]),
    ]
}

fn member() -> impl Strategy<Value = Member> {
    (
        name(),
        prop::sample::select(&b"\x0001234567xgLKSV"[..]),
        prop::collection::vec(any::<u8>(), 0..16),
        data(),
        prop::option::weighted(
            0.2,
            prop_oneof![0u64..5000, Just(u64::MAX >> 1), Just(8u64 << 30)],
        ),
        prop::bool::weighted(0.05),
    )
        .prop_map(
            |(name, kind, link, data, claimed_size, break_checksum)| Member {
                name,
                kind,
                link,
                data,
                claimed_size,
                break_checksum,
            },
        )
}

fn tar_bytes(members: &[Member], end_blocks: usize) -> Vec<u8> {
    let mut bytes = Vec::new();
    for member in members {
        let mut header = tar::Header::new_gnu();
        let name = &member.name[..member.name.len().min(100)];
        header.as_old_mut().name[..name.len()].copy_from_slice(name);
        let link = &member.link[..member.link.len().min(100)];
        header.as_old_mut().linkname[..link.len()].copy_from_slice(link);
        header.set_entry_type(tar::EntryType::new(member.kind));
        header.set_size(member.claimed_size.unwrap_or(member.data.len() as u64));
        header.set_mode(0o644);
        header.set_cksum();
        if member.break_checksum {
            header.as_old_mut().cksum[0] ^= 1;
        }
        bytes.extend_from_slice(header.as_bytes());
        bytes.extend_from_slice(&member.data);
        bytes.resize(bytes.len().div_ceil(512) * 512, 0);
    }
    bytes.resize(bytes.len() + end_blocks * 512, 0);
    bytes
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    encoder.write_all(bytes).expect("writing to memory");
    encoder.finish().expect("writing to memory")
}

fn entries_of(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .expect("the parent directory reads")
        .map(|entry| {
            entry
                .expect("an entry reads")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect()
}

/// Unpacks `bytes` into a fresh directory and checks what is left there.
fn check(bytes: &[u8]) -> Result<(), TestCaseError> {
    let parent = tempfile::tempdir().expect("a temporary directory");
    let dest = parent.path().join("out");
    match unpack(bytes, &dest, &LIMITS) {
        Ok(unpacked) => {
            prop_assert!(dest.is_dir());
            prop_assert_eq!(entries_of(parent.path()), ["out"]);
            prop_assert!(unpacked.files.iter().any(|(path, _)| path == "murmur.yaml"));
        }
        Err(error) => {
            prop_assert!(!dest.exists(), "{}: dest exists", error);
            prop_assert!(
                entries_of(parent.path()).is_empty(),
                "{}: left files",
                error
            );
            prop_assert!(error.code().starts_with("E-REG-"), "{}", error);
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..2048), wrap in any::<bool>()) {
        check(&if wrap { gzip(&bytes) } else { bytes })?;
    }

    #[test]
    fn tar_like_bytes_never_panic(
        members in prop::collection::vec(member(), 0..8),
        end_blocks in 0usize..3,
        cut in prop::option::weighted(0.2, any::<prop::sample::Index>()),
        wrap in prop::bool::weighted(0.9),
    ) {
        let mut bytes = tar_bytes(&members, end_blocks);
        if let Some(cut) = cut {
            bytes.truncate(cut.index(bytes.len() + 1));
        }
        check(&if wrap { gzip(&bytes) } else { bytes })?;
    }

    #[test]
    fn archives_with_a_manifest_first_never_panic(
        members in prop::collection::vec(member(), 0..6),
    ) {
        let manifest = Member {
            name: b"murmur.yaml".to_vec(),
            kind: b'0',
            link: Vec::new(),
            data: b"name: t\n".to_vec(),
            claimed_size: None,
            break_checksum: false,
        };
        let all: Vec<Member> = std::iter::once(manifest).chain(members).collect();
        check(&gzip(&tar_bytes(&all, 2)))?;
    }
}
