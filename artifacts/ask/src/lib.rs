//! `ask`: put a question to the person the agent works for, through
//! `murmur:task/task.request-input`, and hand back their answer.
//!
//! What it promises:
//! - **Input** `{question, choices?}` (see [`Args`]). A blank question, an empty `choices`, a
//!   blank or repeated choice, or one past the bounds ([`QUESTION_MAX`], [`CHOICES_MAX`],
//!   [`CHOICE_MAX`]) is a failed result naming the field, and no one is asked.
//! - **The prompt** is the question; with `choices`, followed by the choices numbered from 1
//!   and a line saying the person may answer with one of them or its number ([`prompt`]).
//! - **The answer** comes back as the result's data ([`judge`]): without `choices`, verbatim;
//!   with them, an answer equal to a choice (ignoring surrounding whitespace and letter case)
//!   or to its number comes back as that choice, spelled as offered; any other answer comes back
//!   verbatim after a first line marking it as not one of the choices. An empty answer is said
//!   to be empty. An answer past [`ANSWER_MAX`] bytes is cut, with a note.
//! - **Where no one can answer** (a plain `mur run` with nobody behind the task, no `--reply`
//!   left to `mur tool invoke`, a declined MCP elicitation, the input timeout), the host fails
//!   `request-input` at once, ending this call: the session hands the model an error result
//!   saying why. The call never waits for an answer that cannot come.
//! - **Metadata.** `state_effect: read` and a `resource_id` of `ask:` and an id of this call
//!   ([`call_resource_id`]): two asks never share it, so `mur trace` never counts asking the same
//!   question again as a redundant read (the person may answer otherwise), and asking changes
//!   no file, so it is no barrier to other reads either.

use murmur_guest::tool::{StateEffect, ToolInput, ToolResult};
use serde::Deserialize;

/// The longest question, in bytes.
pub const QUESTION_MAX: usize = 8 * 1024;
/// The most choices.
pub const CHOICES_MAX: usize = 50;
/// The longest choice, in bytes.
pub const CHOICE_MAX: usize = 500;
/// The most of an answer handed back, in bytes.
pub const ANSWER_MAX: usize = 64 * 1024;

/// The tool's input.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Args {
    /// What to ask.
    pub question: String,
    /// Answers to offer.
    #[serde(default)]
    pub choices: Option<Vec<String>>,
}

/// Why the input was refused: the message the model reads.
pub fn check(args: &Args) -> Result<(), String> {
    if args.question.trim().is_empty() {
        return Err("invalid input: `question` is empty; say what you want to know".into());
    }
    if args.question.len() > QUESTION_MAX {
        return Err(format!(
            "invalid input: `question` is {} bytes, more than {QUESTION_MAX}; ask something shorter",
            args.question.len()
        ));
    }
    let Some(choices) = &args.choices else {
        return Ok(());
    };
    if choices.is_empty() {
        return Err(
            "invalid input: `choices` is empty; leave it out to ask an open question".into(),
        );
    }
    if choices.len() > CHOICES_MAX {
        return Err(format!(
            "invalid input: `choices` has {} items, more than {CHOICES_MAX}",
            choices.len()
        ));
    }
    for (i, choice) in choices.iter().enumerate() {
        if choice.trim().is_empty() {
            return Err(format!("invalid input: `choices[{i}]` is empty"));
        }
        if choice.len() > CHOICE_MAX {
            return Err(format!(
                "invalid input: `choices[{i}]` is {} bytes, more than {CHOICE_MAX}",
                choice.len()
            ));
        }
        if let Some(j) = choices[..i]
            .iter()
            .position(|earlier| same(earlier, choice))
        {
            return Err(format!(
                "invalid input: `choices[{i}]` repeats `choices[{j}]` ({:?})",
                choice.trim()
            ));
        }
    }
    Ok(())
}

/// Whether two texts are the same answer: equal but for surrounding whitespace and case.
fn same(a: &str, b: &str) -> bool {
    a.trim().to_lowercase() == b.trim().to_lowercase()
}

/// What the person is shown.
pub fn prompt(args: &Args) -> String {
    let mut prompt = args.question.trim_end().to_string();
    if let Some(choices) = &args.choices {
        prompt.push_str("\n\nChoices:");
        for (i, choice) in choices.iter().enumerate() {
            prompt.push_str(&format!("\n{}. {}", i + 1, choice.trim()));
        }
        prompt.push_str("\n\nAnswer with one of the choices or its number, or in your own words.");
    }
    prompt
}

/// How an answer stands against the choices.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Judged {
    /// No choices were offered: the answer as given.
    Open(String),
    /// The answer picked choice `index` (0-based); its text as offered.
    Picked { index: usize, choice: String },
    /// Choices were offered and the answer is none of them: as given.
    Other(String),
}

/// Weighs `answer` against the offered choices.
pub fn judge(args: &Args, answer: &str) -> Judged {
    let Some(choices) = &args.choices else {
        return Judged::Open(answer.to_string());
    };
    let picked = choices
        .iter()
        .position(|choice| same(choice, answer))
        .or_else(|| {
            let n: usize = answer.trim().trim_end_matches('.').parse().ok()?;
            (1..=choices.len()).contains(&n).then(|| n - 1)
        });
    match picked {
        Some(index) => Judged::Picked {
            index,
            choice: choices[index].trim().to_string(),
        },
        None => Judged::Other(answer.to_string()),
    }
}

/// The result handed back for `answer`.
pub fn answered(args: &Args, answer: &str) -> ToolResult {
    let (answer, cut) = bounded(answer);
    let empty = answer.trim().is_empty();
    let (data, summary) = match judge(args, answer) {
        Judged::Open(_) if empty => (
            "(the person answered with nothing)".to_string(),
            "answered with nothing".to_string(),
        ),
        Judged::Open(text) => (text, "answered".to_string()),
        Judged::Picked { index, choice } => {
            let summary = format!("picked choice {}: {}", index + 1, one_line(&choice));
            (choice, summary)
        }
        Judged::Other(text) => {
            let mark = if empty {
                "(the person answered with nothing, not one of the choices)".to_string()
            } else {
                format!("(the person's answer is not one of the choices; as given:)\n{text}")
            };
            (mark, "answered with none of the choices".to_string())
        }
    };
    let data = if cut {
        format!("{data}\n(the answer was cut at {ANSWER_MAX} bytes)")
    } else {
        data
    };
    ToolResult::passed(data)
        .summary(summary)
        .truncated(cut)
        .metadata("choice", choice_metadata(args, answer))
}

/// The `choice` metadata: the 1-based number of the choice picked, `none` when choices were
/// offered and none was picked, `open` when none were offered.
fn choice_metadata(args: &Args, answer: &str) -> String {
    match judge(args, answer) {
        Judged::Open(_) => "open".into(),
        Judged::Picked { index, .. } => (index + 1).to_string(),
        Judged::Other(_) => "none".into(),
    }
}

/// At most [`ANSWER_MAX`] bytes of `answer`, cut at a char boundary, and whether it was cut.
fn bounded(answer: &str) -> (&str, bool) {
    if answer.len() <= ANSWER_MAX {
        return (answer, false);
    }
    let mut end = ANSWER_MAX;
    while !answer.is_char_boundary(end) {
        end -= 1;
    }
    (&answer[..end], true)
}

fn one_line(text: &str) -> String {
    text.lines()
        .next()
        .unwrap_or_default()
        .chars()
        .take(200)
        .collect()
}

/// `ask:` and an id no other call has: the wall clock in nanoseconds and 32 random bits (the
/// standard library's hasher keys come from the host's randomness).
pub fn call_resource_id() -> String {
    use std::hash::BuildHasher;
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    let noise = std::hash::RandomState::new().hash_one(nanos) as u32;
    format!("ask:{nanos}-{noise:08x}")
}

/// The tool's whole answer to `input`, `ask` putting the prompt to the person.
pub fn run(input: &ToolInput, ask: impl FnOnce(&str) -> String) -> ToolResult {
    let resource = call_resource_id();
    let result = match input.json::<Args>() {
        Err(failed) => failed,
        Ok(args) => match check(&args) {
            Err(message) => ToolResult::failed(message),
            Ok(()) => answered(&args, &ask(&prompt(&args))),
        },
    };
    result.state_effect(StateEffect::Read).resource_id(resource)
}

/// The component's entrypoint (only in the Wasm build: a host build links the pure core for
/// tests).
#[cfg(target_family = "wasm")]
mod component {
    use murmur_guest::tool::{Tool, ToolInput, ToolResult};

    struct Ask;

    impl Tool for Ask {
        fn run(input: ToolInput) -> ToolResult {
            super::run(&input, murmur_guest::task::request_input)
        }
    }

    murmur_guest::export_tool!(Ask);
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn args(question: &str, choices: Option<&[&str]>) -> Args {
        Args {
            question: question.into(),
            choices: choices.map(|c| c.iter().map(|s| s.to_string()).collect()),
        }
    }

    #[test]
    fn the_prompt_lists_the_choices_numbered() {
        assert_eq!(prompt(&args("Which color?\n", None)), "Which color?");
        assert_eq!(
            prompt(&args("Which color?", Some(&["red", " blue "]))),
            "Which color?\n\nChoices:\n1. red\n2. blue\n\nAnswer with one of the choices or its \
             number, or in your own words."
        );
    }

    #[test]
    fn an_answer_is_a_choice_by_text_or_number_else_marked() {
        let a = args("Which?", Some(&["Red", "Blue"]));
        let picked = |index, choice: &str| Judged::Picked {
            index,
            choice: choice.into(),
        };
        assert_eq!(judge(&a, " blue\n"), picked(1, "Blue"));
        assert_eq!(judge(&a, "1"), picked(0, "Red"));
        assert_eq!(judge(&a, "2."), picked(1, "Blue"));
        assert_eq!(judge(&a, "3"), Judged::Other("3".into()));
        assert_eq!(judge(&a, "green"), Judged::Other("green".into()));
        // A choice that reads as a number is taken by its text first.
        let numbers = args("How many?", Some(&["2", "1"]));
        assert_eq!(judge(&numbers, "1"), picked(1, "1"));

        let other = answered(&a, "green, please");
        assert_eq!(
            other.data.as_deref(),
            Some("(the person's answer is not one of the choices; as given:)\ngreen, please")
        );
        assert_eq!(other.metadata_value("choice"), Some("none"));
        let chosen = answered(&a, "blue");
        assert_eq!(chosen.data.as_deref(), Some("Blue"));
        assert_eq!(chosen.summary.as_deref(), Some("picked choice 2: Blue"));
        assert_eq!(chosen.metadata_value("choice"), Some("2"));
        let open = answered(&args("Why?", None), "  because \n");
        assert_eq!(open.data.as_deref(), Some("  because \n"));
        assert_eq!(open.metadata_value("choice"), Some("open"));
        assert_eq!(
            answered(&args("Why?", None), "").data.as_deref(),
            Some("(the person answered with nothing)")
        );
    }

    #[test]
    fn bad_input_is_named_and_no_one_is_asked() {
        let refused = |input: &str| {
            let result = run(&ToolInput::new(input), |_| panic!("asked"));
            assert_eq!(result.status, murmur_guest::tool::Status::Failed);
            assert_eq!(result.metadata_value("state_effect"), Some("read"));
            result.data.unwrap()
        };
        assert!(refused(r#"{"question":"  "}"#).contains("`question` is empty"));
        assert!(refused(r#"{"question":"?","choices":[]}"#).contains("`choices` is empty"));
        assert!(refused(r#"{"question":"?","choices":["a"," "]}"#).contains("`choices[1]`"));
        assert!(
            refused(r#"{"question":"?","choices":["Yes","yes "]}"#)
                .contains("`choices[1]` repeats `choices[0]`")
        );
        assert!(refused(r#"{"prompt":"?"}"#).contains("unknown field `prompt`"));
        let long = format!(r#"{{"question":"{}"}}"#, "x".repeat(QUESTION_MAX + 1));
        assert!(refused(&long).contains("more than 8192"));
    }

    #[test]
    fn each_call_is_a_resource_of_its_own() {
        let asked = |_: &str| "yes".to_string();
        let one = run(&ToolInput::new(r#"{"question":"ok?"}"#), asked);
        let two = run(&ToolInput::new(r#"{"question":"ok?"}"#), asked);
        let id = |r: &ToolResult| r.metadata_value("resource_id").unwrap().to_string();
        assert!(id(&one).starts_with("ask:"), "{}", id(&one));
        assert_ne!(id(&one), id(&two));
        assert_eq!(one.data.as_deref(), Some("yes"));
    }

    #[test]
    fn a_long_answer_is_cut_with_a_note() {
        let long = "é".repeat(ANSWER_MAX);
        let result = answered(&args("?", None), &long);
        assert!(result.truncated);
        let data = result.data.unwrap();
        assert!(data.ends_with(&format!("(the answer was cut at {ANSWER_MAX} bytes)")));
        assert!(data.len() <= ANSWER_MAX + 64);
    }

    proptest! {
        #[test]
        fn any_input_and_answer_give_a_result(
            question in "\\PC{0,64}",
            choices in proptest::option::of(proptest::collection::vec("\\PC{0,12}", 0..6)),
            answer in "\\PC{0,40}",
        ) {
            let input = serde_json::json!({"question": question, "choices": choices}).to_string();
            let result = run(&ToolInput::new(input), |_| answer.clone());
            prop_assert!(result.data.is_some());
            prop_assert_eq!(result.metadata_value("state_effect"), Some("read"));
        }
    }
}
