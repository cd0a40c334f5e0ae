// The slot hash of the cl100k token table: shared by the build script that lays the table out
// and by the tokenizer that reads it (`include!`d by both), so the two cannot disagree.

/// Slots in the table: a power of two, a little over twice the number of tokens.
const SLOTS: usize = 1 << 18;

/// The first slot to probe for a token's bytes (FNV-1a, folded to the table's size).
fn first_slot(bytes: &[u8]) -> usize {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in bytes {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    ((hash ^ (hash >> 32)) as usize) & (SLOTS - 1)
}
