//! Every choice's output cap and context window, resolved once at launch: the manifest's
//! `inference.max_tokens` and `context.max_tokens` where it sets them, else the vendor's
//! documented numbers for a model the table knows, else [`DEFAULT`]. The two fields are
//! resolved independently, and each reports where it came from ([`LimitSource`]).
//!
//! How a model id finds its table entry ([`known`]):
//!
//! - Case does not matter: `GPT-4o` is `gpt-4o`.
//! - A provider prefix, everything up to the last `/`, is ignored: `anthropic/claude-sonnet-4-5`
//!   is `claude-sonnet-4-5`, `openai/gpt-5` is `gpt-5`.
//! - The id matches an entry when it is the entry, or the entry followed by `-` and a dated or
//!   versioned suffix: a date (`-20250929`, `-2024-08-06`, `-0613`) or `-latest`. So
//!   `claude-sonnet-4-5-20250929`, `gpt-4o-2024-08-06` and `claude-3-7-sonnet-latest` match;
//!   any other tail (`-mini`, `-preview`, `-pro`) names a different model, which the table
//!   knows only if it lists it.
//! - When several entries match, the longest wins: `gpt-4o-mini` never takes `gpt-4o`'s
//!   limits, `gpt-5-mini` never `gpt-5`'s.
//!
//! A model the table does not know gets [`DEFAULT`], a deliberately small cap and window.

use serde::Serialize;

/// The output cap and context window one model call is held to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ModelLimits {
    pub max_output_tokens: u32,
    pub context_window: u64,
}

/// Where a resolved limit came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LimitSource {
    Table,
    Manifest,
    Default,
}

/// A model's limits as resolved for one session, with where each came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ResolvedLimits {
    pub limits: ModelLimits,
    pub max_output_from: LimitSource,
    pub context_window_from: LimitSource,
}

/// Limits for a model the table does not know: 4096 output tokens, a 128,000-token window.
pub const DEFAULT: ModelLimits = limits(4096, 128_000);

const fn limits(max_output_tokens: u32, context_window: u64) -> ModelLimits {
    ModelLimits {
        max_output_tokens,
        context_window,
    }
}

/// Known models, lowercase, with their documented standard limits (no beta headers: the 1M
/// windows and 128K outputs some models offer behind a beta flag are not counted).
const TABLE: &[(&str, ModelLimits)] = &[
    // Anthropic.
    ("claude-opus-4-5", limits(64_000, 200_000)),
    ("claude-opus-4-1", limits(32_000, 200_000)),
    ("claude-opus-4-0", limits(32_000, 200_000)),
    ("claude-opus-4", limits(32_000, 200_000)),
    ("claude-sonnet-4-5", limits(64_000, 200_000)),
    ("claude-sonnet-4-0", limits(64_000, 200_000)),
    ("claude-sonnet-4", limits(64_000, 200_000)),
    ("claude-haiku-4-5", limits(64_000, 200_000)),
    ("claude-3-7-sonnet", limits(64_000, 200_000)),
    ("claude-3-5-haiku", limits(8_192, 200_000)),
    // Not re-checked against the vendor's page; 8192 since the July 2024 raise.
    ("claude-3-5-sonnet", limits(8_192, 200_000)),
    // OpenAI.
    ("gpt-5", limits(128_000, 400_000)),
    // Window checked; the output cap is the GPT-5 family's, not re-checked for mini.
    ("gpt-5-mini", limits(128_000, 400_000)),
    ("gpt-5-nano", limits(128_000, 400_000)),
    ("gpt-4.1", limits(32_768, 1_047_576)),
    ("gpt-4.1-mini", limits(32_768, 1_047_576)),
    ("gpt-4.1-nano", limits(32_768, 1_047_576)),
    ("gpt-4o", limits(16_384, 128_000)),
    // The first gpt-4o snapshot had a smaller output cap than the later ones (not re-checked).
    ("gpt-4o-2024-05-13", limits(4_096, 128_000)),
    ("gpt-4o-mini", limits(16_384, 128_000)),
    ("o3", limits(100_000, 200_000)),
    // Window checked; the output cap is not re-checked.
    ("o3-mini", limits(100_000, 200_000)),
    ("o4-mini", limits(100_000, 200_000)),
    ("o1", limits(100_000, 200_000)),
];

/// The known limits of `model`, if the table knows it.
pub fn known(model: &str) -> Option<ModelLimits> {
    let id = model
        .rsplit_once('/')
        .map_or(model, |(_, id)| id)
        .to_ascii_lowercase();
    TABLE
        .iter()
        .filter(|(entry, _)| matches(&id, entry))
        .max_by_key(|(entry, _)| entry.len())
        .map(|&(_, limits)| limits)
}

/// `model`'s limits: the manifest's `inference.max_tokens` (`max_tokens`) and
/// `context.max_tokens` (`context_window`) when set, else the table's, else the defaults
/// ([`DEFAULT`]).
pub fn resolve(
    model: &str,
    max_tokens: Option<u32>,
    context_window: Option<u64>,
) -> ResolvedLimits {
    let table = known(model);
    let (max_output_tokens, max_output_from) = pick(
        max_tokens,
        table.map(|t| t.max_output_tokens),
        DEFAULT.max_output_tokens,
    );
    let (context_window, context_window_from) = pick(
        context_window,
        table.map(|t| t.context_window),
        DEFAULT.context_window,
    );
    ResolvedLimits {
        limits: limits(max_output_tokens, context_window),
        max_output_from,
        context_window_from,
    }
}

fn pick<T>(manifest: Option<T>, table: Option<T>, default: T) -> (T, LimitSource) {
    manifest
        .map(|value| (value, LimitSource::Manifest))
        .or_else(|| table.map(|value| (value, LimitSource::Table)))
        .unwrap_or((default, LimitSource::Default))
}

/// Whether the lowercase, prefix-free `id` is `entry`, or `entry` plus a dated or versioned
/// suffix.
fn matches(id: &str, entry: &str) -> bool {
    id.strip_prefix(entry)
        .is_some_and(|rest| rest.is_empty() || rest.strip_prefix('-').is_some_and(is_version))
}

/// `latest`, or a date: `YYYYMMDD`, `YYYY-MM-DD` or `MMDD`.
fn is_version(suffix: &str) -> bool {
    let digits = |part: &str, len: usize| {
        part.len() == len && part.bytes().all(|byte| byte.is_ascii_digit())
    };
    match suffix.split('-').collect::<Vec<_>>()[..] {
        ["latest"] => true,
        [date] => digits(date, 8) || digits(date, 4),
        [year, month, day] => digits(year, 4) && digits(month, 2) && digits(day, 2),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(model: &str) -> ModelLimits {
        known(model).unwrap_or_else(|| panic!("{model} is not in the table"))
    }

    #[test]
    fn an_exact_id_takes_its_entry() {
        assert_eq!(table("claude-sonnet-4-5"), limits(64_000, 200_000));
        assert_eq!(table("claude-opus-4-1"), limits(32_000, 200_000));
        assert_eq!(table("gpt-5"), limits(128_000, 400_000));
        assert_eq!(table("gpt-4.1"), limits(32_768, 1_047_576));
        assert_eq!(table("gpt-4o"), limits(16_384, 128_000));
        assert_eq!(table("o3"), limits(100_000, 200_000));
    }

    #[test]
    fn a_dated_or_versioned_suffix_keeps_the_entry() {
        assert_eq!(
            table("claude-sonnet-4-5-20250929"),
            table("claude-sonnet-4-5")
        );
        assert_eq!(table("gpt-4o-2024-08-06"), table("gpt-4o"));
        assert_eq!(
            table("claude-3-7-sonnet-latest"),
            table("claude-3-7-sonnet")
        );
        assert_eq!(table("claude-opus-4-1-20250805"), table("claude-opus-4-1"));
        assert_eq!(table("claude-sonnet-4-20250514"), table("claude-sonnet-4"));
        assert_eq!(table("o3-mini-2025-01-31"), table("o3-mini"));
    }

    #[test]
    fn any_other_tail_is_a_different_model() {
        assert_eq!(known("o1-preview"), None);
        assert_eq!(known("o1-mini"), None);
        assert_eq!(known("gpt-5-chat-latest"), None);
        assert_eq!(known("gpt-4o-"), None);
        assert_eq!(known("gpt-4o-202408"), None);
        assert_eq!(known("gpt-4ox"), None);
    }

    #[test]
    fn a_provider_prefix_is_ignored() {
        assert_eq!(
            table("anthropic/claude-sonnet-4-5"),
            table("claude-sonnet-4-5")
        );
        assert_eq!(table("openai/gpt-5"), table("gpt-5"));
        assert_eq!(table("openai/gpt-4o-mini-2024-07-18"), table("gpt-4o-mini"));
        assert_eq!(known("openai/"), None);
    }

    #[test]
    fn the_longest_entry_wins() {
        assert_eq!(table("gpt-4o-mini"), limits(16_384, 128_000));
        assert_eq!(table("gpt-4o-mini-2024-07-18"), table("gpt-4o-mini"));
        assert_eq!(table("gpt-5-mini"), limits(128_000, 400_000));
        assert_eq!(table("gpt-5-mini-2025-08-07"), table("gpt-5-mini"));
        assert_eq!(table("gpt-4.1-nano"), limits(32_768, 1_047_576));
        // `gpt-4o-2024-05-13` is both `gpt-4o` plus a date and an entry of its own.
        assert_eq!(table("gpt-4o-2024-05-13"), limits(4_096, 128_000));
        assert_eq!(table("openai/GPT-4o-2024-05-13"), limits(4_096, 128_000));
        assert_eq!(table("gpt-4o-2024-08-06"), limits(16_384, 128_000));
    }

    #[test]
    fn matching_ignores_case() {
        assert_eq!(table("Claude-Sonnet-4-5"), table("claude-sonnet-4-5"));
        assert_eq!(table("OpenAI/GPT-4o-Mini"), table("gpt-4o-mini"));
        assert_eq!(
            table("claude-3-7-sonnet-LATEST"),
            table("claude-3-7-sonnet")
        );
    }

    #[test]
    fn an_unknown_model_gets_the_defaults() {
        assert_eq!(known("llama-3.1-8b"), None);
        assert_eq!(
            resolve("llama-3.1-8b", None, None),
            ResolvedLimits {
                limits: DEFAULT,
                max_output_from: LimitSource::Default,
                context_window_from: LimitSource::Default,
            }
        );
        assert_eq!(DEFAULT, limits(4096, 128_000));
    }

    #[test]
    fn a_known_model_takes_the_table() {
        assert_eq!(
            resolve("anthropic/claude-sonnet-4-5-20250929", None, None),
            ResolvedLimits {
                limits: limits(64_000, 200_000),
                max_output_from: LimitSource::Table,
                context_window_from: LimitSource::Table,
            }
        );
    }

    #[test]
    fn the_manifest_overrides_each_field_independently() {
        assert_eq!(
            resolve("gpt-5", Some(8192), None),
            ResolvedLimits {
                limits: limits(8192, 400_000),
                max_output_from: LimitSource::Manifest,
                context_window_from: LimitSource::Table,
            }
        );
        assert_eq!(
            resolve("gpt-5", None, Some(100_000)),
            ResolvedLimits {
                limits: limits(128_000, 100_000),
                max_output_from: LimitSource::Table,
                context_window_from: LimitSource::Manifest,
            }
        );
        assert_eq!(
            resolve("gpt-5", Some(8192), Some(100_000)),
            ResolvedLimits {
                limits: limits(8192, 100_000),
                max_output_from: LimitSource::Manifest,
                context_window_from: LimitSource::Manifest,
            }
        );
        assert_eq!(
            resolve("llama-3.1-8b", Some(2048), None),
            ResolvedLimits {
                limits: limits(2048, DEFAULT.context_window),
                max_output_from: LimitSource::Manifest,
                context_window_from: LimitSource::Default,
            }
        );
        assert_eq!(
            resolve("llama-3.1-8b", None, Some(32_768)),
            ResolvedLimits {
                limits: limits(DEFAULT.max_output_tokens, 32_768),
                max_output_from: LimitSource::Default,
                context_window_from: LimitSource::Manifest,
            }
        );
    }

    #[test]
    fn every_entry_is_sane() {
        for &(entry, limits) in TABLE {
            assert!(limits.max_output_tokens > 0, "{entry}");
            assert!(limits.context_window > 0, "{entry}");
            assert!(
                u64::from(limits.max_output_tokens) <= limits.context_window,
                "{entry}"
            );
            assert_eq!(entry, entry.to_ascii_lowercase(), "{entry}");
            assert_eq!(known(entry), Some(limits), "{entry}");
            assert_eq!(
                TABLE.iter().filter(|(other, _)| *other == entry).count(),
                1,
                "{entry} is listed twice"
            );
        }
    }

    #[test]
    fn sources_serialize_in_snake_case() {
        let resolved = resolve("gpt-5", Some(1), None);
        assert_eq!(
            serde_json::to_value(resolved).unwrap(),
            serde_json::json!({
                "limits": { "max_output_tokens": 1, "context_window": 400_000 },
                "max_output_from": "manifest",
                "context_window_from": "table",
            })
        );
    }
}
