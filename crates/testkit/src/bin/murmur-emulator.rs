//! `murmur-emulator`: a fake LLM provider (Anthropic Messages, OpenAI Chat Completions, OpenAI
//! Responses) on 127.0.0.1, answering from a YAML script. See `murmur_testkit::emulator`.
//!
//! Prints `listening on http://127.0.0.1:PORT` as its first line and serves until killed.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use murmur_testkit::emulator::{Emulator, Script};

/// A fake LLM provider on 127.0.0.1 that speaks the real wire formats, driven by a script.
#[derive(Parser)]
#[command(name = "murmur-emulator", version)]
struct Args {
    /// The YAML script to answer from.
    #[arg(long)]
    script: PathBuf,
    /// The port to listen on (default: one the OS assigns).
    #[arg(long, default_value_t = 0)]
    port: u16,
    /// Append each request received to this file as one JSON line.
    #[arg(long)]
    record: Option<PathBuf>,
    /// The credential requests must carry (overrides the script's `api_key`).
    #[arg(long)]
    api_key: Option<String>,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let script = match Script::from_file(&args.script) {
        Ok(script) => script,
        Err(error) => {
            eprintln!("murmur-emulator: {error}");
            return ExitCode::from(2);
        }
    };
    let mut builder = Emulator::builder(script).port(args.port);
    if let Some(path) = args.record {
        builder = builder.record_to(path);
    }
    if let Some(key) = args.api_key {
        builder = builder.api_key(key);
    }
    let emulator = match builder.start() {
        Ok(emulator) => emulator,
        Err(error) => {
            eprintln!("murmur-emulator: cannot start: {error}");
            return ExitCode::FAILURE;
        }
    };
    let mut stdout = std::io::stdout();
    let _ = writeln!(stdout, "listening on {}", emulator.url());
    let _ = stdout.flush();
    loop {
        std::thread::park();
    }
}
