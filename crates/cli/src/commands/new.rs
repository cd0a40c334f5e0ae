//! `mur new tool|driver|hook NAME [--lang rust|python|js] [--dir PATH] [--json]`: a new
//! artifact from a template ([`murmur_registry::template`]): manifest, sources, `build:`, the
//! helper library of its language, `wit/`, and a test input. Prints what was written and the
//! next commands; nothing is written when the name or the directory is refused.

use std::path::PathBuf;

use clap::{Args, ValueEnum};
use murmur_registry::template::{self, Kind, Lang};
use serde_json::json;

use crate::exit::Exit;
use crate::render;

#[derive(Clone, Copy, ValueEnum)]
pub enum KindArg {
    Tool,
    Driver,
    Hook,
}

#[derive(Clone, Copy, ValueEnum)]
pub enum LangArg {
    Rust,
    Python,
    Js,
}

#[derive(Args)]
pub struct NewArgs {
    /// What to make.
    kind: KindArg,
    /// The artifact's name: words of lowercase letters and digits, each starting with a letter,
    /// joined by hyphens (`read-notes`).
    name: String,
    /// The language of its sources (Python builds with componentize-py, JavaScript with
    /// componentize-js, Rust with cargo for wasm32-wasip2).
    #[arg(long, value_enum, default_value = "rust")]
    lang: LangArg,
    /// Where to write it (a new or empty directory). Default: `./NAME`.
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Print what was written as JSON.
    #[arg(long)]
    json: bool,
}

pub fn run(args: NewArgs) -> Exit {
    let kind = match args.kind {
        KindArg::Tool => Kind::Tool,
        KindArg::Driver => Kind::Driver,
        KindArg::Hook => Kind::Hook,
    };
    let (lang, lang_name, builder) = match args.lang {
        LangArg::Rust => (
            Lang::Rust,
            "rust",
            "cargo and the wasm32-wasip2 target (`rustup target add wasm32-wasip2`)",
        ),
        LangArg::Python => (
            Lang::Python,
            "python",
            "componentize-py on PATH (`pip install componentize-py`)",
        ),
        LangArg::Js => (
            Lang::Js,
            "js",
            "componentize-js on PATH (`npm install @bytecodealliance/componentize-js`)",
        ),
    };
    let kind_name = match kind {
        Kind::Tool => "tool",
        Kind::Driver => "driver",
        Kind::Hook => "hook",
    };
    let dir = args.dir.unwrap_or_else(|| PathBuf::from(&args.name));
    let files = match template::create(kind, lang, &args.name, &dir) {
        Ok(files) => files,
        Err(diagnostic) => {
            let hint = diagnostic.hint.clone().unwrap_or_default();
            return render::failure(
                args.json,
                diagnostic.code,
                &diagnostic.message,
                &hint,
                Exit::BadInput,
            );
        }
    };
    if args.json {
        println!(
            "{}",
            render::json(
                &json!({"kind": kind_name, "lang": lang_name, "name": args.name, "dir": dir, "files": files})
            )
        );
        return Exit::Ok;
    }
    println!(
        "created {kind_name} `{}` ({lang_name}) in {}",
        args.name,
        dir.display()
    );
    for file in files.iter().filter(|f| !f.starts_with("wit")) {
        println!("  {}", file.display());
    }
    println!(
        "  wit/world.wit (its own world, including Murmur's `{kind_name}` world) and wit/deps/"
    );
    println!("next (needs {builder}):");
    println!("  mur build --no-pack {}", dir.display());
    if kind == Kind::Hook {
        println!("  then declare it in a capsule's `artifacts:` with `runtime: hook` and `path:`");
    } else {
        println!(
            "  mur tool invoke {} --input - < {}",
            dir.display(),
            dir.join("input.json").display()
        );
    }
    Exit::Ok
}
