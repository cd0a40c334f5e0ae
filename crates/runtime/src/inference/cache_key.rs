//! The prompt cache routing hint.
//!
//! Every request carries a `prompt_cache_key`, fixed for every turn of a task:
//! `<capsule-name>:<context-id>:<task-id>`, or `<capsule-name>:<task-id>` for a task with no
//! context id. A value longer than [`MAX_LEN`] characters (the limit the OpenAI APIs accept)
//! is shortened to its leading characters, then `:` and a 16-character hex suffix taken from
//! the sha256 of the whole value, so it stays unique per task and still opens with the
//! capsule's name. Compaction and a dropped continuation do not change it.

/// The longest key sent.
pub const MAX_LEN: usize = 64;

/// The key of one task.
pub fn prompt_cache_key(capsule_name: &str, context_id: Option<&str>, task_id: &str) -> String {
    let full = match context_id {
        Some(context_id) => format!("{capsule_name}:{context_id}:{task_id}"),
        None => format!("{capsule_name}:{task_id}"),
    };
    if full.chars().count() <= MAX_LEN {
        return full;
    }
    let digest = murmur_registry::sha256_hex(full.as_bytes());
    let suffix = &digest[..16];
    let keep = MAX_LEN - 1 - suffix.len();
    let head: String = full.chars().take(keep).collect();
    format!("{head}:{suffix}")
}

#[cfg(test)]
mod tests {
    use super::*;

    const CTX: &str = "ctx_0123456789abcdef01234567";
    const TSK: &str = "tsk_89abcdef0123456789abcdef";

    #[test]
    fn with_a_context_id_that_fits() {
        assert_eq!(
            prompt_cache_key("cr", Some(CTX), TSK),
            format!("cr:{CTX}:{TSK}")
        );
    }

    #[test]
    fn without_a_context_id() {
        assert_eq!(
            prompt_cache_key("reviewer", None, TSK),
            format!("reviewer:{TSK}")
        );
    }

    #[test]
    fn too_long_is_shortened_with_a_hex_suffix_and_keeps_the_name() {
        let key = prompt_cache_key("pull-request-reviewer", Some(CTX), TSK);
        assert_eq!(key.chars().count(), MAX_LEN);
        assert!(key.starts_with("pull-request-reviewer:ctx_"));
        let (_, suffix) = key.rsplit_once(':').unwrap();
        assert_eq!(suffix.len(), 16);
        assert!(suffix.chars().all(|c| c.is_ascii_hexdigit()));
        // Another task of the same capsule and context shares the prefix but not the key.
        let other = prompt_cache_key(
            "pull-request-reviewer",
            Some(CTX),
            "tsk_ffffffffffffffffffffffff",
        );
        assert_ne!(key, other);
        assert_eq!(key[..47], other[..47]);
    }
}
