//! Base64 for file bytes: standard alphabet with padding out; standard or URL-safe, padded or
//! not, in (as ProtoJSON readers accept).

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Standard base64 with `=` padding.
pub(crate) fn encode(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for (index, shift) in [18u32, 12, 6, 0].into_iter().enumerate() {
            if index <= chunk.len() {
                out.push(char::from(ALPHABET[((n >> shift) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

fn sextet(byte: u8) -> Option<u32> {
    Some(match byte {
        b'A'..=b'Z' => byte - b'A',
        b'a'..=b'z' => byte - b'a' + 26,
        b'0'..=b'9' => byte - b'0' + 52,
        b'+' | b'-' => 62,
        b'/' | b'_' => 63,
        _ => return None,
    } as u32)
}

/// Decodes standard or URL-safe base64, with or without padding. `None` if it is not base64.
pub(crate) fn decode(text: &str) -> Option<Vec<u8>> {
    let trimmed = text.trim_end_matches('=');
    let padding = text.len() - trimmed.len();
    if padding > 2 || (padding > 0 && !text.len().is_multiple_of(4)) {
        return None;
    }
    let input = trimmed.as_bytes();
    if input.len() % 4 == 1 {
        return None;
    }
    let mut out = Vec::with_capacity(input.len() * 3 / 4);
    for chunk in input.chunks(4) {
        let mut n = 0u32;
        for (index, &byte) in chunk.iter().enumerate() {
            n |= sextet(byte)? << (18 - 6 * index as u32);
        }
        let produced = chunk.len() - 1;
        let bytes = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
        // Bits past the last whole byte must be zero, so that each byte string has one encoding.
        let spare = match produced {
            1 => n & 0xFFFF,
            2 => n & 0xFF,
            _ => 0,
        };
        if spare != 0 {
            return None;
        }
        out.extend_from_slice(&bytes[..produced]);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc4648_vectors_encode_and_decode() {
        for (plain, encoded) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(encode(plain.as_bytes()), encoded);
            assert_eq!(decode(encoded).unwrap(), plain.as_bytes());
            assert_eq!(
                decode(encoded.trim_end_matches('=')).unwrap(),
                plain.as_bytes()
            );
        }
    }

    #[test]
    fn url_safe_alphabet_is_accepted() {
        assert_eq!(decode("-_8").unwrap(), decode("+/8").unwrap());
    }

    #[test]
    fn garbage_is_refused() {
        for bad in [
            "Z", "Zg=", "Zg===", "Zh==", "a b c", "Zm9v!", "=", "Zg==Zg==",
        ] {
            assert_eq!(decode(bad), None, "{bad}");
        }
    }
}
