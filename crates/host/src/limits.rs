//! Per-call limits: a wall-clock deadline and a memory ceiling.
//!
//! The deadline is enforced twice over: by epoch interruption while the component runs its own
//! code, and by a timer around the whole call so a component parked in a host call (a slow HTTP
//! response, say) is stopped too. The memory ceiling counts every linear memory and table of the
//! call's store together; a growth past it is refused, and the refusal is remembered so a trap
//! that follows it is reported as a memory limit rather than an ordinary trap.

use std::time::Duration;

/// The default wall-clock deadline of a tool or driver call.
pub const DEFAULT_DEADLINE: Duration = Duration::from_secs(600);
/// The default wall-clock deadline of a hook call.
pub const DEFAULT_HOOK_DEADLINE: Duration = Duration::from_secs(30);
/// The default memory ceiling of one call: 256 MiB.
pub const DEFAULT_MEMORY_BYTES: u64 = 256 * 1024 * 1024;

/// The limits one component call runs under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallLimits {
    pub deadline: Duration,
    pub memory_bytes: u64,
}

impl Default for CallLimits {
    fn default() -> Self {
        CallLimits {
            deadline: DEFAULT_DEADLINE,
            memory_bytes: DEFAULT_MEMORY_BYTES,
        }
    }
}

/// Bytes a table element is charged at (one pointer).
const TABLE_ELEMENT_BYTES: u64 = 8;

/// The `ResourceLimiter` of one call's store.
#[derive(Debug)]
pub(crate) struct MemoryLimiter {
    limit_bytes: u64,
    in_use_bytes: u64,
    /// The total the store asked for when a growth was refused.
    refused_at: Option<u64>,
}

impl MemoryLimiter {
    pub(crate) fn new(limit_bytes: u64) -> Self {
        MemoryLimiter {
            limit_bytes,
            in_use_bytes: 0,
            refused_at: None,
        }
    }

    /// The total the store asked for when the ceiling refused a growth, if it did.
    pub(crate) fn refused_at(&self) -> Option<u64> {
        self.refused_at
    }

    pub(crate) fn limit_bytes(&self) -> u64 {
        self.limit_bytes
    }

    fn grow(&mut self, current: u64, desired: u64) -> bool {
        let wanted = self
            .in_use_bytes
            .saturating_sub(current)
            .saturating_add(desired);
        if wanted > self.limit_bytes {
            self.refused_at = Some(wanted);
            false
        } else {
            self.in_use_bytes = wanted;
            true
        }
    }
}

impl wasmtime::ResourceLimiter for MemoryLimiter {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(self.grow(current as u64, desired as u64))
    }

    fn table_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(self.grow(
            current as u64 * TABLE_ELEMENT_BYTES,
            desired as u64 * TABLE_ELEMENT_BYTES,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasmtime::ResourceLimiter;

    #[test]
    fn growth_past_the_ceiling_is_refused_and_remembered() {
        let mut limiter = MemoryLimiter::new(1 << 20);
        assert!(limiter.memory_growing(0, 1 << 19, None).unwrap());
        assert!(limiter.memory_growing(1 << 19, 1 << 20, None).unwrap());
        assert_eq!(limiter.refused_at(), None);
        assert!(
            !limiter
                .memory_growing(1 << 20, (1 << 20) + 65536, None)
                .unwrap()
        );
        assert_eq!(limiter.refused_at(), Some((1 << 20) + 65536));
    }

    #[test]
    fn memories_and_tables_share_one_ceiling() {
        let mut limiter = MemoryLimiter::new(1000);
        assert!(limiter.memory_growing(0, 900, None).unwrap());
        // 13 table elements at 8 bytes push the store to 1004 bytes.
        assert!(!limiter.table_growing(0, 13, None).unwrap());
        assert!(limiter.table_growing(0, 12, None).unwrap());
    }
}
