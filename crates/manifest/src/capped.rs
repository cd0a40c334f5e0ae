//! Reading a text file whose size someone else decides (a manifest, `murmur.lock`, the
//! credentials file): never more than a cap. A file over the cap is told as such from reading
//! one byte past it, never by reading it whole; the caller names its own limit and code.

use std::io::Read;
use std::path::Path;

/// What a capped read found.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Capped {
    /// The whole file, at most the cap, UTF-8.
    Text(String),
    /// The file holds more than the cap.
    TooLarge,
}

/// The text of `path`, if it holds at most `cap` bytes. An error of opening or reading is
/// returned as is (`NotFound` among them); bytes that are not UTF-8 are `InvalidData`.
pub(crate) fn read_text(path: &Path, cap: u64) -> std::io::Result<Capped> {
    let mut bytes = Vec::new();
    std::fs::File::open(path)?
        .take(cap.saturating_add(1))
        .read_to_end(&mut bytes)?;
    if bytes.len() as u64 > cap {
        return Ok(Capped::TooLarge);
    }
    String::from_utf8(bytes).map(Capped::Text).map_err(|_| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "stream did not contain valid UTF-8",
        )
    })
}

/// `bytes` in words: `8 MiB`, `512 KiB`, `100 bytes`.
pub(crate) fn size_words(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{} MiB", b >> 20),
        b if b >= 1 << 10 && b % (1 << 10) == 0 => format!("{} KiB", b >> 10),
        b => format!("{b} bytes"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_at_the_cap_is_read_and_one_byte_more_is_too_large() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        std::fs::write(&file, "abcd").unwrap();
        assert_eq!(read_text(&file, 4).unwrap(), Capped::Text("abcd".into()));
        assert_eq!(read_text(&file, 3).unwrap(), Capped::TooLarge);
        std::fs::write(&file, [0xff, 0xfe]).unwrap();
        assert_eq!(
            read_text(&file, 4).unwrap_err().kind(),
            std::io::ErrorKind::InvalidData
        );
        assert_eq!(
            read_text(&dir.path().join("none"), 4).unwrap_err().kind(),
            std::io::ErrorKind::NotFound
        );
        assert_eq!(size_words(8 << 20), "8 MiB");
        assert_eq!(size_words(512 << 10), "512 KiB");
        assert_eq!(size_words(100), "100 bytes");
    }
}
