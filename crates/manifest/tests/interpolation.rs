//! `${NAME}` interpolation: where values come from and what is left alone.

use crate::common;

use common::*;
use murmur_manifest::{CapsuleManifest, Loaded, Manifest, load};

const MANIFEST: &str = r#"name: reviewer
version: "1.0.0"
description: "costs $5; literal $${NOT_A_VAR}"
artifacts:
  - name: driver-anthropic
    version: "1.0.0"
    runtime: driver
    gateway: { endpoint: "${GATEWAY_URL}", api_key: "${ANTHROPIC_API_KEY}" }
inference:
  model: ${MODEL}
  driver: { artifact: driver-anthropic }
"#;

fn capsule(loaded: Loaded<Manifest>) -> CapsuleManifest {
    match loaded.manifest {
        Some(Manifest::Capsule(capsule)) => capsule,
        _ => panic!("did not load: {:#?}", loaded.diagnostics),
    }
}

fn env_with(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
    move |name| {
        pairs
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.to_string())
    }
}

#[test]
fn the_environment_wins_over_dotenv() {
    let written = write(MANIFEST);
    written.add(
        ".env",
        "MODEL=from-dotenv\nGATEWAY_URL=https://dotenv.example\n",
    );
    let env = env_with(&[("MODEL", "from-env")]);
    let capsule = capsule(load(&written.file, &env));
    let inference = capsule.inference.unwrap();
    assert_eq!(inference.model.as_deref(), Some("from-env"));
    // What the environment lacks comes from `.env`.
    assert_eq!(
        capsule.artifacts[0].gateway.as_ref().unwrap().endpoint,
        "https://dotenv.example"
    );
}

#[test]
fn dotenv_alone_fills_every_variable() {
    let written = write(MANIFEST);
    written.add(
        ".env",
        "MODEL=claude-haiku-4-5\nGATEWAY_URL=https://gw.example\n",
    );
    let capsule = capsule(written.load());
    assert_eq!(
        capsule.inference.unwrap().model.as_deref(),
        Some("claude-haiku-4-5")
    );
}

#[test]
fn dollar_dollar_brace_is_a_literal_and_other_dollars_stay() {
    let written = write(MANIFEST);
    let env = env_with(&[("MODEL", "m"), ("GATEWAY_URL", "https://gw.example")]);
    let capsule = capsule(load(&written.file, &env));
    assert_eq!(
        capsule.description.as_deref(),
        Some("costs $5; literal ${NOT_A_VAR}")
    );
}

#[test]
fn the_gateway_api_key_is_left_raw() {
    let written = write(MANIFEST);
    let env = env_with(&[
        ("MODEL", "m"),
        ("GATEWAY_URL", "https://gw.example"),
        ("ANTHROPIC_API_KEY", "sk-secret"),
    ]);
    let loaded = load(&written.file, &env);
    let capsule = capsule(loaded);
    let gateway = capsule.artifacts[0].gateway.as_ref().unwrap();
    assert_eq!(gateway.api_key.as_deref(), Some("${ANTHROPIC_API_KEY}"));
    assert_eq!(gateway.env_reference(), Some("ANTHROPIC_API_KEY"));
    // The secret is nowhere in the loaded manifest.
    assert!(!format!("{capsule:?}").contains("sk-secret"));
}

#[test]
fn an_unset_variable_fails_the_load_but_an_unset_api_key_does_not() {
    let written = write(MANIFEST);
    let env = env_with(&[("GATEWAY_URL", "https://gw.example")]);
    let loaded = load(&written.file, &env);
    assert!(loaded.manifest.is_none());
    assert_eq!(codes(&loaded), ["E-MAN-012"]);
    assert!(loaded.diagnostics[0].message.contains("MODEL"));
}

#[test]
fn keys_and_numbers_are_not_interpolated() {
    let text = "name: reviewer\nversion: \"1.0.0\"\ncomponent: x.wasm\nartifacts:\n  - { name: t, version: \"1.0.0\", runtime: tool, config: { \"${KEY}\": 1, n: 5 } }\n";
    let loaded = load_text(text);
    let capsule = capsule(loaded);
    let config = capsule.artifacts[0].config.as_ref().unwrap();
    assert_eq!(config["${KEY}"], 1);
    assert_eq!(config["n"], 5);
}
