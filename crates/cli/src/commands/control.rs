//! `mur control show|set|secret|forget … [URL] [--token-file PATH] [--json]`: read and change a
//! served capsule's settings, and inject and forget its secrets, through its control plane
//! (docs/cli.md, `mur control`).
//!
//! - Which capsule: without URL, the one running capsule whose token file is in
//!   `$MURMUR_HOME/control/` (none or several is an error listing what was found); with URL,
//!   the one serving it. `--token-file` names the token file instead.
//! - `show`: the settings in force, the driver choices (an arrow on the one in force, and
//!   whether each may be switched to now), then the secrets (injected or not).
//! - `set SETTING VALUE`: VALUE is JSON when it parses as JSON (`8192` is a number), else a
//!   string (`fast`). Prints the settings in force after it.
//! - `secret NAME`: the value is read from stdin, one trailing newline dropped; it is never
//!   taken from the command line, where other users and shell histories see it.
//! - `forget NAME`: the secret no longer has a value.
//! - `--json`: the control plane's JSON answer.
//! - Exit: 0 done; 1 the control plane refused (`E-CTL-003`, its reason and message); 2 bad
//!   input (arguments, several capsules and no URL, an unusable token file, an unreadable secret
//!   value); 3 no control plane reachable, or the token refused (`E-CTL-004`).

use std::io::{IsTerminal, Read};
use std::path::PathBuf;

use murmur_door::control_client::{ControlError, Controller};
use serde_json::{Value, json};

use crate::environment::murmur_home;
use crate::exit::Exit;
use crate::render;

#[derive(clap::Subcommand)]
pub enum ControlCommand {
    /// Show the settings in force, the driver choices and the secrets.
    Show {
        #[command(flatten)]
        target: Target,
    },
    /// Change a setting: `inference.driver` (a choice name) or `inference.max_tokens`.
    Set {
        /// The setting's name.
        setting: String,
        /// Its new value: JSON when it parses as JSON (`8192`), else a string (`fast`).
        #[arg(allow_hyphen_values = true)]
        value: String,
        #[command(flatten)]
        target: Target,
    },
    /// Inject a `control.secrets` credential; its value is read from stdin.
    Secret {
        /// The secret's name, as `control.secrets` lists it.
        name: String,
        #[command(flatten)]
        target: Target,
    },
    /// Forget an injected secret.
    Forget {
        /// The secret's name.
        name: String,
        #[command(flatten)]
        target: Target,
    },
}

/// Which capsule, and how to print.
#[derive(clap::Args)]
pub struct Target {
    /// The served capsule's URL (`http://127.0.0.1:PORT/`). Default: the one running capsule
    /// with a token file in `$MURMUR_HOME/control/`.
    url: Option<String>,
    /// The token file to use, instead of looking one up.
    #[arg(long = "token-file")]
    token_file: Option<PathBuf>,
    /// Print the control plane's JSON answer.
    #[arg(long)]
    json: bool,
}

pub fn run(command: ControlCommand) -> Exit {
    let target = match &command {
        ControlCommand::Show { target }
        | ControlCommand::Set { target, .. }
        | ControlCommand::Secret { target, .. }
        | ControlCommand::Forget { target, .. } => target,
    };
    let json = target.json;
    let controller = match Controller::locate(
        &murmur_home().join("control"),
        target.url.as_deref(),
        target.token_file.as_deref(),
    ) {
        Ok(controller) => controller,
        Err(error) => return failed(json, &error),
    };
    // The secret is read before anything is sent, so a bad value sends nothing.
    let secret = match &command {
        ControlCommand::Secret { name, .. } => match read_secret(name) {
            Ok(value) => Some(value),
            Err(message) => {
                return render::failure(
                    json,
                    "E-CTL-003",
                    &message,
                    "pipe the value in: `printf %s \"$KEY\" | mur control secret NAME`",
                    Exit::BadInput,
                );
            }
        },
        _ => None,
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            return failed(
                json,
                &ControlError::Unreachable {
                    url: controller.url.to_string(),
                    detail: format!("the async runtime could not start: {error}"),
                },
            );
        }
    };
    let answer = runtime.block_on(async {
        match &command {
            ControlCommand::Show { .. } => controller.show().await,
            ControlCommand::Set { setting, value, .. } => {
                controller.set(setting, &setting_value(value)).await
            }
            ControlCommand::Secret { name, .. } => {
                controller
                    .inject(name, secret.as_deref().unwrap_or_default())
                    .await
            }
            ControlCommand::Forget { name, .. } => controller.forget(name).await,
        }
    });
    let answer = match answer {
        Ok(answer) => answer,
        Err(error) => return failed(json, &error),
    };
    if json {
        println!("{}", render::json(&answer));
        return Exit::Ok;
    }
    match &command {
        ControlCommand::Show { .. } => print_show(&answer),
        ControlCommand::Set { .. } => print_settings(&answer["settings"]),
        ControlCommand::Secret { name, .. } => println!("{name}: injected"),
        ControlCommand::Forget { name, .. } => println!("{name}: forgotten"),
    }
    Exit::Ok
}

/// A setting's value as given on the command line: JSON when it parses, else the text.
fn setting_value(given: &str) -> Value {
    serde_json::from_str(given).unwrap_or_else(|_| Value::String(given.to_string()))
}

/// The secret's value from stdin: one trailing newline (`\n` or `\r\n`) dropped.
fn read_secret(name: &str) -> Result<String, String> {
    let mut stdin = std::io::stdin();
    let mut text = String::new();
    if stdin.is_terminal() {
        eprint!("value of {name} (it shows as you type; pipe it in to hide it): ");
        stdin
            .read_line(&mut text)
            .map_err(|error| format!("the secret cannot be read from stdin: {error}"))?;
    } else {
        stdin
            .read_to_string(&mut text)
            .map_err(|error| format!("the secret cannot be read from stdin: {error}"))?;
    }
    if let Some(rest) = text.strip_suffix('\n') {
        text.truncate(rest.strip_suffix('\r').unwrap_or(rest).len());
    }
    if text.is_empty() {
        return Err(format!("no value for {name} arrived on stdin"));
    }
    Ok(text)
}

fn print_settings(settings: &Value) {
    let rows: Vec<Vec<String>> = settings
        .as_object()
        .into_iter()
        .flatten()
        .map(|(name, value)| vec![render::line(name).into_owned(), shown(value)])
        .collect();
    for line in table(&rows) {
        println!("{line}");
    }
}

fn print_show(answer: &Value) {
    println!("settings");
    let settings = &answer["settings"];
    let rows: Vec<Vec<String>> = settings
        .as_object()
        .into_iter()
        .flatten()
        .map(|(name, value)| vec![format!("  {}", render::line(name)), shown(value)])
        .collect();
    for line in table(&rows) {
        println!("{line}");
    }
    let controllable = names(&answer["controllable"]);
    println!(
        "  (a controller may set: {})",
        if controllable.is_empty() {
            "nothing".to_string()
        } else {
            controllable.join(", ")
        }
    );

    println!("\nchoices");
    let in_force = settings["inference.driver"].as_str().unwrap_or_default();
    let mut rows = vec![vec![
        "    NAME".to_string(),
        "DRIVER".to_string(),
        "MODEL".to_string(),
        "AVAILABLE".to_string(),
    ]];
    for choice in answer["choices"].as_array().into_iter().flatten() {
        let name = choice["name"].as_str().unwrap_or_default();
        let marker = if name == in_force { '→' } else { ' ' };
        rows.push(vec![
            format!("  {marker} {}", render::line(name)),
            shown(&choice["driver"]),
            shown(&choice["model"]),
            yes_no(&choice["available"]),
        ]);
    }
    for line in table(&rows) {
        println!("{line}");
    }

    println!("\nsecrets");
    let secrets = answer["secrets"].as_array().cloned().unwrap_or_default();
    if secrets.is_empty() {
        println!("  (none: the capsule's control.secrets is empty)");
    } else {
        let mut rows = vec![vec!["  NAME".to_string(), "INJECTED".to_string()]];
        for secret in &secrets {
            rows.push(vec![
                format!("  {}", shown(&secret["name"])),
                yes_no(&secret["injected"]),
            ]);
        }
        for line in table(&rows) {
            println!("{line}");
        }
    }
}

/// A value as text: a string without its quotes. The control plane said it: its control
/// characters are shown escaped ([`render::line`]).
fn shown(value: &Value) -> String {
    match value {
        Value::String(text) => render::line(text).into_owned(),
        other => render::json_line(other),
    }
}

fn yes_no(value: &Value) -> String {
    if value.as_bool() == Some(true) {
        "yes"
    } else {
        "no"
    }
    .to_string()
}

fn names(value: &Value) -> Vec<String> {
    value.as_array().into_iter().flatten().map(shown).collect()
}

/// Rows as lines of columns two spaces apart, each column as wide as its widest cell.
fn table(rows: &[Vec<String>]) -> Vec<String> {
    let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..columns)
        .map(|i| {
            rows.iter()
                .filter_map(|row| row.get(i))
                .map(|cell| cell.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    rows.iter()
        .map(|row| {
            let mut line = String::new();
            for (i, cell) in row.iter().enumerate() {
                if i > 0 {
                    line.push_str("  ");
                }
                line.push_str(cell);
                if i + 1 < row.len() {
                    let pad = widths[i] - cell.chars().count();
                    line.push_str(&" ".repeat(pad));
                }
            }
            line.trim_end().to_string()
        })
        .collect()
}

/// A failed control call: told as every coded error is, and with `--json` a refusal also
/// carries the control plane's `status` and `reason`.
fn failed(json: bool, error: &ControlError) -> Exit {
    let exit = match error {
        ControlError::Refused { .. } => Exit::Failed,
        ControlError::Ambiguous(_) | ControlError::BadUrl(_) | ControlError::BadTokenFile(_) => {
            Exit::BadInput
        }
        ControlError::NotFound(_)
        | ControlError::Unreachable { .. }
        | ControlError::Unauthorized { .. }
        | ControlError::Invalid { .. } => Exit::Stopped,
    };
    render::coded_human(error);
    if json {
        let mut shown = render::coded_json(error);
        if let (ControlError::Refused { status, reason, .. }, Value::Object(shown)) =
            (error, &mut shown)
        {
            shown.insert("status".into(), json!(status));
            shown.insert("reason".into(), json!(reason));
        }
        println!("{}", render::json(&json!({ "error": shown })));
    }
    exit
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_is_json_when_it_parses_else_text() {
        assert_eq!(setting_value("8192"), json!(8192));
        assert_eq!(setting_value("fast"), json!("fast"));
        assert_eq!(setting_value("\"fast\""), json!("fast"));
        assert_eq!(setting_value("true"), json!(true));
        assert_eq!(setting_value("lots of"), json!("lots of"));
    }

    #[test]
    fn a_table_pads_every_column_but_the_last() {
        let rows = vec![
            vec!["a".to_string(), "bbb".to_string(), "c".to_string()],
            vec!["aaa".to_string(), "b".to_string(), "cc".to_string()],
        ];
        assert_eq!(table(&rows), vec!["a    bbb  c", "aaa  b    cc"]);
    }
}
