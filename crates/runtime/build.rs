//! Lays out the cl100k token table at build time, so no process ever builds it at start.
//!
//! From the cl100k rank file that `tiktoken-rs` ships, three little-endian files in `OUT_DIR`:
//! every token's bytes concatenated (`cl100k_bytes.bin`), where each token's bytes end
//! (`cl100k_ends.bin`, one `u32` per rank), and an open-addressing table from bytes to rank
//! (`cl100k_slots.bin`, one `u32` per slot: rank + 1, or 0 for an empty slot; linear probing
//! from `first_slot`), and the longest token's length (`cl100k_longest.rs`). The tokenizer
//! reads them in place, from the binary.

use std::path::Path;

include!("src/inference/cl100k_slot.rs");

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rerun-if-changed=src/inference/cl100k_slot.rs");
    let out = std::env::var("OUT_DIR").expect("cargo sets OUT_DIR");
    let out = Path::new(&out);
    let encoder = tiktoken_rs::cl100k_base().expect("the cl100k rank file of tiktoken-rs");
    let mut bytes = Vec::new();
    let mut ends = Vec::new();
    let mut slots = vec![0u32; SLOTS];
    let mut rank: u32 = 0;
    let mut longest = 0;
    // Regular tokens have ranks 0 to 100,255; rank 100,256 is unused, and the special tokens
    // after it are not counted by an ordinary encoding.
    while let Ok(token) = encoder.decode_bytes(&[rank]) {
        let mut slot = first_slot(&token);
        while slots[slot] != 0 {
            slot = (slot + 1) & (SLOTS - 1);
        }
        slots[slot] = rank + 1;
        longest = longest.max(token.len());
        bytes.extend_from_slice(&token);
        ends.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
        rank += 1;
    }
    assert_eq!(rank, 100_256, "cl100k has 100,256 regular tokens");
    let slot_bytes: Vec<u8> = slots.iter().flat_map(|slot| slot.to_le_bytes()).collect();
    std::fs::write(out.join("cl100k_bytes.bin"), bytes).expect("writing cl100k_bytes.bin");
    std::fs::write(out.join("cl100k_ends.bin"), ends).expect("writing cl100k_ends.bin");
    std::fs::write(out.join("cl100k_slots.bin"), slot_bytes).expect("writing cl100k_slots.bin");
    std::fs::write(
        out.join("cl100k_longest.rs"),
        format!(
            "/// The longest token's length in bytes.\nconst LONGEST_TOKEN: usize = {longest};\n"
        ),
    )
    .expect("writing cl100k_longest.rs");
}
