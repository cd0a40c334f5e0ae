//! One test per diagnostic code the manifest crate emits: the code, where it points, and what
//! its hint tells the user.

use crate::common;

use common::*;
use murmur_manifest::{
    ArtifactManifest, Loaded, Manifest, Severity, check_local_artifacts, load, load_capsule,
};

/// A capsule that loads without a single diagnostic; the tests below change one thing in it.
const VALID: &str = r#"name: reviewer
version: "1.0.0"
artifacts:
  - { name: driver-anthropic, version: "1.0.0", runtime: driver }
inference:
  model: claude-sonnet-4-5
  driver: { artifact: driver-anthropic }
"#;

#[test]
fn the_base_capsule_loads_cleanly() {
    let capsule = clean_capsule(VALID);
    assert_eq!(capsule.name, "reviewer");
    assert_eq!(capsule.inference.unwrap().max_turns, 10);
}

#[test]
fn e_man_001_unreadable_file() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope.yaml");
    let loaded = load(&missing, &no_env);
    let d = only(&loaded, "E-MAN-001");
    assert!(loaded.manifest.is_none());
    assert_eq!(d.file.as_deref(), Some(missing.as_path()));
    assert_eq!(d.line, None);
    assert_hint(&d, "check the path");
}

#[test]
fn e_man_002_yaml_syntax_error_at_the_parser_position() {
    let text = "name: reviewer\nversion: \"1.0.0\"\ninference: { model: [x, y }\n";
    let loaded = load_text(text);
    let d = only(&loaded, "E-MAN-002");
    assert!(d.message.starts_with("YAML syntax error"));
    assert_eq!(d.line, Some(3));
    assert_hint(&d, "indentation");
}

#[test]
fn e_man_002_more_than_one_document() {
    let text = format!("{VALID}---\nname: other\n");
    let loaded = load_text(&text);
    let d = only(&loaded, "E-MAN-002");
    assert!(d.message.contains("more than one YAML document"));
    assert_eq!(d.line, Some(position(&text, "name: other").0));
    assert_hint(&d, "`---`");
}

#[test]
fn e_man_003_float_where_a_string_is_expected_says_to_quote_it() {
    let text = VALID.replacen("version: \"1.0.0\"", "version: 1.10", 1);
    let loaded = load_text(&text);
    let d = only(&loaded, "E-MAN-003");
    assert_at(&d, &text, "1.10");
    assert!(d.message.contains("`version` should be a string"), "{d}");
    assert!(d.message.contains("the number `1.10`"), "{d}");
    assert_hint(&d, "version: \"1.10\"");
}

#[test]
fn e_man_003_top_level_not_a_mapping() {
    let loaded = load_text("- name: reviewer\n");
    let d = only(&loaded, "E-MAN-003");
    assert!(d.message.contains("not a mapping"));
    assert_eq!(d.line, Some(1));
    assert_hint(&d, "`key: value`");
}

#[test]
fn e_man_003_every_type_error_is_reported_at_its_own_line() {
    let text = r#"name: reviewer
version: "1.0.0"
artifacts:
  - { name: a, version: "1.0.0", runtime: tool, path: [x] }
  - { name: b, version: "1.0.0", runtime: tool, path: [y] }
  - { name: driver-anthropic, version: "1.0.0", runtime: driver }
inference:
  model: claude-sonnet-4-5
  driver: { artifact: driver-anthropic }
  max_turns: ten
"#;
    let loaded = load_text(text);
    assert_eq!(codes(&loaded), ["E-MAN-003", "E-MAN-003", "E-MAN-003"]);
    let lines: Vec<_> = loaded.diagnostics.iter().map(|d| d.line).collect();
    assert_eq!(lines, [Some(4), Some(5), Some(10)]);
    let turns = &loaded.diagnostics[2];
    assert!(
        turns
            .message
            .contains("`inference.max_turns` should be a whole number")
    );
    assert_hint(turns, "whole number");
}

#[test]
fn e_man_004_missing_name() {
    let text = VALID.replace("name: reviewer\n", "");
    let loaded = load_text(&text);
    let d = only(&loaded, "E-MAN-004");
    assert!(loaded.manifest.is_none());
    assert_eq!(d.line, Some(1), "placed at the top of the manifest");
    assert_hint(&d, "name:");
}

#[test]
fn e_man_004_empty_artifact_name() {
    let text = VALID.replace("{ name: driver-anthropic, version", "{ name: \"\", version");
    let loaded = load_text(&text);
    let d = only(&loaded, "E-MAN-004");
    assert!(d.message.contains("artifact entry 1"));
    assert_at(&d, &text, "\"\"");
}

#[test]
fn e_man_005_empty_version() {
    let text = VALID.replace("version: \"1.0.0\"\nartifacts", "version: \"\"\nartifacts");
    let loaded = load_text(&text);
    let d = only(&loaded, "E-MAN-005");
    assert_at(&d, &text, "\"\"\nartifacts");
    assert_hint(&d, "1.0.0");
}

#[test]
fn e_man_006_version_not_semver() {
    let text = VALID.replace(
        "version: \"1.0.0\"\nartifacts",
        "version: \"1.0\"\nartifacts",
    );
    let loaded = load_text(&text);
    let d = only(&loaded, "E-MAN-006");
    assert_at(&d, &text, "\"1.0\"");
    assert_hint(&d, "\"1.0.0\"");
}

#[test]
fn e_man_006_artifact_entry_version_not_semver() {
    let text = VALID.replace(
        "driver-anthropic, version: \"1.0.0\"",
        "driver-anthropic, version: \"latest\"",
    );
    let loaded = load_text(&text);
    let d = only(&loaded, "E-MAN-006");
    assert!(d.message.contains("artifact `driver-anthropic`"));
    assert_at(&d, &text, "\"latest\"");
}

#[test]
fn e_man_007_unknown_runtime_lists_the_five() {
    let text = VALID.replace("runtime: driver", "runtime: drivr");
    let loaded = load_text(&text);
    let d = only(&loaded, "E-MAN-007");
    assert_eq!(d.message, "unknown runtime `drivr`");
    assert_at(&d, &text, "drivr");
    assert_hint(&d, "tool, driver, hook, skill, capsule");
    assert_hint(&d, "did you mean `driver`?");
}

#[test]
fn e_man_007_an_artifact_is_not_a_capsule() {
    let written =
        write("name: t\nversion: \"0.1.0\"\nruntime: tool\ninput_schema: { type: object }\n");
    let loaded = load_capsule(&written.file, &no_env);
    let d = only(&loaded, "E-MAN-007");
    assert!(d.message.contains("artifact manifest"));
    assert_eq!(d.line, Some(3));
    assert_hint(&d, "runtime: capsule");
}

#[test]
fn e_man_008_primary_driver_not_declared() {
    let text = VALID.replace(
        "{ artifact: driver-anthropic }",
        "{ artifact: driver-openai }",
    );
    let loaded = load_text(&text);
    let d = only(&loaded, "E-MAN-008");
    assert_eq!(
        d.message,
        "`inference.driver.artifact` names `driver-openai`, which is not declared in `artifacts`"
    );
    assert_at(&d, &text, "driver-openai");
    assert_hint(&d, "use one of: driver-anthropic");
}

#[test]
fn e_man_008_primary_driver_declared_with_another_runtime() {
    let text = VALID.replace("runtime: driver", "runtime: tool");
    let loaded = load_text(&text);
    let d = only(&loaded, "E-MAN-008");
    assert!(
        d.message
            .contains("declared with `runtime: tool`, not `runtime: driver`"),
        "{d}"
    );
    assert_at(&d, &text, "driver-anthropic }");
    assert_hint(&d, "`runtime: driver`");
}

#[test]
fn e_man_009_alternate_names_undeclared_driver() {
    let text =
        format!("{VALID}  alternates:\n    - {{ name: fast, model: m, driver: driver-x }}\n");
    let loaded = load_text(&text);
    let d = only(&loaded, "E-MAN-009");
    assert_eq!(
        d.message,
        "alternate `fast` names driver `driver-x`, which is not declared in `artifacts`"
    );
    assert_at(&d, &text, "driver-x");
    assert_eq!(
        d.hint.as_deref(),
        Some(
            "declare `driver-x` under `artifacts:` with `runtime: driver`, or use one of: driver-anthropic"
        )
    );
    let rendered = d.to_string();
    assert!(rendered.contains(&format!(
        "murmur.yaml:{}:{}",
        d.line.unwrap(),
        d.column.unwrap()
    )));
}

#[test]
fn e_man_010_duplicate_and_reserved_alternate_names() {
    let text = format!(
        "{VALID}  alternates:\n    - {{ name: fast, model: a, driver: driver-anthropic }}\n    - {{ name: fast, model: b, driver: driver-anthropic }}\n    - {{ name: primary, model: c, driver: driver-anthropic }}\n"
    );
    let loaded = load_text(&text);
    assert_eq!(codes(&loaded), ["E-MAN-010", "E-MAN-010"]);
    let (dup, reserved) = (&loaded.diagnostics[0], &loaded.diagnostics[1]);
    assert_eq!(dup.message, "two alternates are named `fast`");
    assert_eq!(dup.line, Some(position(&text, "name: fast, model: b").0));
    assert!(reserved.message.contains("`primary`"));
    assert_at(reserved, &text, "primary");
    assert_hint(dup, "other than `primary`");
}

#[test]
fn e_man_011_alternates_under_process_transport() {
    let text = r#"name: reviewer
version: "1.0.0"
artifacts:
  - { name: driver-anthropic, version: "1.0.0", runtime: driver }
inference:
  transport: process
  command: claude
  alternates:
    - { name: fast, model: m, driver: driver-anthropic }
"#;
    let loaded = load_text(text);
    let d = only(&loaded, "E-MAN-011");
    assert_at(&d, text, "alternates:");
    assert_hint(&d, "transport: http");
}

#[test]
fn e_man_021_process_transport_without_a_command() {
    let text = "name: reviewer\nversion: \"1.0.0\"\ninference:\n  transport: process\n  model: m\n";
    let loaded = load_text(text);
    let d = only(&loaded, "E-MAN-021");
    assert!(d.message.contains("`command`"), "{d}");
    assert_hint(&d, "command: claude");
    assert_hint(&d, "command: codex");
}

#[test]
fn w_man_029_fields_the_transport_does_not_use() {
    // Under `transport: process`, the driver, the output cap, the ceiling and compaction are
    // inert: each is named, with why.
    let text = r#"name: reviewer
version: "1.0.0"
artifacts:
  - { name: driver-anthropic, version: "1.0.0", runtime: driver }
inference:
  transport: process
  command: claude
  model: claude-sonnet-4-5
  driver: { artifact: driver-anthropic }
  max_tokens: 100
  max_session_tokens: 1000
  compaction: { threshold: 0.5 }
"#;
    let loaded = load_text(text);
    let inert: Vec<_> = loaded
        .diagnostics
        .iter()
        .filter(|d| d.code == "W-MAN-029")
        .collect();
    assert_eq!(inert.len(), 4, "{:#?}", loaded.diagnostics);
    assert!(inert.iter().all(|d| d.severity() == Severity::Warning));
    let compaction = inert
        .iter()
        .find(|d| d.message.contains("`inference.compaction`"))
        .unwrap();
    assert!(
        compaction.message.contains("manages its own context"),
        "{compaction}"
    );
    assert!(loaded.manifest.is_some(), "warnings only");
    // Under `transport: http`, `command` and `timeout_seconds` are the inert ones.
    let text = VALID.replace(
        "  driver: { artifact: driver-anthropic }\n",
        "  driver: { artifact: driver-anthropic }\n  command: claude\n  timeout_seconds: 5\n",
    );
    let loaded = load_text(&text);
    let inert: Vec<_> = loaded
        .diagnostics
        .iter()
        .filter(|d| d.code == "W-MAN-029")
        .collect();
    assert_eq!(inert.len(), 2, "{:#?}", loaded.diagnostics);
    assert_hint(inert[0], "transport: process");
}

#[test]
fn e_man_012_unset_variable_names_it() {
    let text = VALID.replace("claude-sonnet-4-5", "${MODEL_NAME}");
    let loaded = load_text(&text);
    let d = only(&loaded, "E-MAN-012");
    assert!(
        d.message.contains("`${MODEL_NAME}` in `inference.model`"),
        "{d}"
    );
    assert_at(&d, &text, "${MODEL_NAME}");
    assert_hint(&d, "export MODEL_NAME");
    assert_hint(&d, ".env beside the manifest");
}

#[test]
fn w_man_013_unknown_key_suggests_the_closest() {
    let text = VALID.replace("  model: claude", "  modle: x\n  model: claude");
    let loaded = load_text(&text);
    let d = only(&loaded, "W-MAN-013");
    assert_eq!(d.severity(), Severity::Warning);
    assert_eq!(d.message, "unknown key `modle` in `inference`");
    assert_at(&d, &text, "modle");
    assert_hint(&d, "did you mean `model`?");
    assert!(
        loaded.manifest.is_some(),
        "a warning does not stop the load"
    );
}

#[test]
fn w_man_013_unknown_key_without_a_close_match_lists_the_known_ones() {
    let text = format!("{VALID}trace: {{ zzz: 1 }}\n");
    let loaded = load_text(&text);
    let d = only(&loaded, "W-MAN-013");
    assert_at(&d, &text, "zzz");
    assert_hint(&d, "include_tool_output");
}

#[test]
fn e_man_014_duplicate_artifact_name() {
    let text = VALID.replace(
        "runtime: driver }\n",
        "runtime: driver }\n  - { name: driver-anthropic, version: \"1.1.0\", runtime: driver }\n",
    );
    let loaded = load_text(&text);
    let d = only(&loaded, "E-MAN-014");
    assert!(d.message.contains("entries 1 and 2"));
    assert_at(&d, &text, "driver-anthropic, version: \"1.1.0\"");
    assert_hint(&d, "remove one entry");
}

#[test]
fn e_man_015_unknown_closed_set_word() {
    let text = VALID.replace("  model: claude", "  transport: htp\n  model: claude");
    let loaded = load_text(&text);
    let d = only(&loaded, "E-MAN-015");
    assert_eq!(d.message, "unknown transport `htp`");
    assert_at(&d, &text, "htp");
    assert_hint(&d, "http, process");
}

#[test]
fn e_man_015_values_out_of_range() {
    let text = format!(
        "{VALID}  max_turns: 0\n  compaction: {{ threshold: 1.5 }}\ncontext: {{ seed_budget: -0.1 }}\nlifecycle: {{ task_acceptance: many }}\n"
    );
    let loaded = load_text(&text);
    // The unknown word is a shape problem; the ranges are checked in the same load.
    assert_eq!(codes(&loaded), ["E-MAN-015"; 4]);
    let d = loaded
        .diagnostics
        .iter()
        .find(|d| d.message.contains("many"))
        .unwrap();
    assert_at(d, &text, "many");
    assert_hint(d, "none, single, queue");
    let fixed = text.replace("many", "queue");
    let loaded = load_text(&fixed);
    assert_eq!(codes(&loaded), ["E-MAN-015", "E-MAN-015", "E-MAN-015"]);
    let threshold = loaded
        .diagnostics
        .iter()
        .find(|d| d.message.contains("threshold"))
        .unwrap();
    assert!(threshold.message.contains("(0, 1]"));
    assert_at(threshold, &fixed, "1.5");
    let turns = loaded
        .diagnostics
        .iter()
        .find(|d| d.message.contains("max_turns"))
        .unwrap();
    assert_at(turns, &fixed, "0\n");
    let budget = loaded
        .diagnostics
        .iter()
        .find(|d| d.message.contains("seed_budget"))
        .unwrap();
    assert_at(budget, &fixed, "-0.1");
}

#[test]
fn e_man_015_a_file_outside_the_manifests_directory() {
    for (field, value) in [
        ("component", "../../x.wasm"),
        ("component", "/tmp/x.wasm"),
        ("component", "a/../../x.wasm"),
        ("skill", "../notes.md"),
    ] {
        let runtime = if field == "skill" { "skill" } else { "tool" };
        let text = format!(
            "name: t\nversion: \"0.1.0\"\nruntime: {runtime}\ninput_schema: {{ type: object }}\n{field}: {value}\n"
        );
        let text = if runtime == "skill" {
            text.replace("input_schema: { type: object }\n", "")
        } else {
            text
        };
        let written = write(&text);
        let loaded = murmur_manifest::load_artifact(&written.file, &no_env);
        let d = loaded
            .diagnostics
            .iter()
            .find(|d| d.code == "E-MAN-015")
            .unwrap_or_else(|| panic!("{field}: {value}: {:?}", loaded.diagnostics));
        assert!(d.message.contains(&format!("`{field}`")), "{d}");
        assert!(d.message.contains("not a file inside"), "{d}");
        assert_at(d, &text, value);
        assert_hint(d, "relative to the directory");
        assert!(loaded.manifest.is_none());
    }
    // Plain relative names, `./` included, are fine.
    for value in ["component.wasm", "./out/tool.wasm"] {
        let text = format!(
            "name: t\nversion: \"0.1.0\"\nruntime: tool\ninput_schema: {{ type: object }}\ncomponent: {value}\n"
        );
        let written = write(&text);
        let loaded = murmur_manifest::load_artifact(&written.file, &no_env);
        assert!(
            codes(&loaded).is_empty(),
            "{value}: {:?}",
            loaded.diagnostics
        );
    }
}

const LOCAL: &str = r#"name: reviewer
version: "1.0.0"
artifacts:
  - { name: driver-anthropic, version: "1.0.0", runtime: driver }
  - { name: my-tool, version: "0.1.0", runtime: tool, path: ./tools/my-tool }
inference:
  model: claude-sonnet-4-5
  driver: { artifact: driver-anthropic }
"#;

fn local_check(written: &Written) -> Vec<(String, Loaded<ArtifactManifest>)> {
    let loaded = load_capsule(&written.file, &no_env);
    let capsule = loaded.manifest.expect("the capsule loads");
    check_local_artifacts(&capsule, &written.file, &no_env)
}

#[test]
fn e_man_016_local_path_missing() {
    let written = write(LOCAL);
    let found = local_check(&written);
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].0, "my-tool");
    let d = only(&found[0].1, "E-MAN-016");
    assert!(d.message.contains("does not exist"));
    assert_eq!(d.file.as_deref(), Some(written.file.as_path()));
    assert_at(&d, LOCAL, "./tools/my-tool");
    assert_hint(&d, "relative to the capsule manifest's directory");
}

#[test]
fn e_man_016_local_directory_without_manifest() {
    let written = write(LOCAL);
    written.add("tools/my-tool/component.wasm", "");
    let found = local_check(&written);
    let d = only(&found[0].1, "E-MAN-016");
    assert!(d.message.contains("holds no murmur.yaml"));
    assert_at(&d, LOCAL, "./tools/my-tool");
    assert_hint(&d, "murmur.yaml");
}

#[test]
fn e_man_017_local_artifact_disagrees_with_its_entry() {
    let written = write(LOCAL);
    let own = written.add(
        "tools/my-tool/murmur.yaml",
        "name: my-tool\nversion: \"0.1.0\"\nruntime: hook\nbinding: on-task-end\n",
    );
    let found = local_check(&written);
    let d = only(&found[0].1, "E-MAN-017");
    assert!(d.message.contains("declared with `runtime: tool`"), "{d}");
    assert!(d.message.contains("says `runtime: hook`"), "{d}");
    assert!(d.message.contains(&own.display().to_string()));
    assert_eq!(d.file.as_deref(), Some(written.file.as_path()));
    assert_at(&d, LOCAL, "tool, path");
    assert_hint(&d, "make the two agree");
    assert!(found[0].1.manifest.is_none());
}

#[test]
fn e_man_018_both_prompt_fields() {
    let text = format!("{VALID}  system_prompt: hi\n  system_prompt_file: prompt.md\n");
    let written = write(&text);
    written.add("prompt.md", "You review.");
    let loaded = written.load();
    let d = only(&loaded, "E-MAN-018");
    assert!(
        d.message
            .contains("both `system_prompt` and `system_prompt_file`")
    );
    assert_at(&d, &text, "prompt.md");
    assert_hint(&d, "keep one");
}

#[test]
fn e_man_018_driver_upstream_auth_without_key() {
    let text = "name: d\nversion: \"1.0.0\"\nruntime: driver\nupstream_auth:\n  header: x-api-key\n  value: \"Bearer\"\n";
    let loaded = load_text(text);
    let d = only(&loaded, "E-MAN-018");
    assert!(d.message.contains("without `{key}`"));
    assert_at(&d, text, "\"Bearer\"");
    assert_hint(&d, "Bearer {key}");
}

#[test]
fn e_man_018_driver_upstream_auth_bad_header() {
    let text = "name: d\nversion: \"1.0.0\"\nruntime: driver\nupstream_auth: { header: \"x api key\", value: \"{key}\" }\n";
    let loaded = load_text(text);
    let d = only(&loaded, "E-MAN-018");
    assert!(d.message.contains("not an HTTP header name"));
    assert_at(&d, text, "\"x api key\"");
    assert_hint(&d, "x-api-key");
}

#[test]
fn w_man_019_tool_without_input_schema() {
    let text = "name: read-file\nversion: \"0.1.0\"\nruntime: tool\n";
    let loaded = load_text(text);
    let d = only(&loaded, "W-MAN-019");
    assert_eq!(d.line, Some(1));
    assert_hint(&d, "input_schema:");
    assert!(loaded.manifest.is_some());
}

#[test]
fn e_man_020_duplicate_key() {
    let text = format!("{VALID}name: again\n");
    let loaded = load_text(&text);
    let d = only(&loaded, "E-MAN-020");
    assert_at(&d, &text, "name: again");
    assert_hint(&d, "keep one");
}

#[test]
fn e_man_021_missing_required_field() {
    let text = format!("{VALID}  alternates:\n    - {{ name: fast, model: m }}\n");
    let loaded = load_text(&text);
    let d = only(&loaded, "E-MAN-021");
    assert_eq!(
        d.message,
        "`inference.alternates[0]` is missing the required field `driver`"
    );
    assert_at(&d, &text, "{ name: fast");
    assert_hint(&d, "add `driver:`");
}

#[test]
fn e_man_021_a_misspelled_required_key_is_named_in_the_hint() {
    let text = format!(
        "{VALID}  alternates:\n    - {{ name: fast, model: m, drivr: driver-anthropic }}\n"
    );
    let loaded = load_text(&text);
    let d = only(&loaded, "E-MAN-021");
    assert_hint(&d, "is `drivr` meant to be `driver`?");
    let typo = only(&loaded, "W-MAN-013");
    assert_eq!(
        typo.message,
        "unknown key `drivr` in `inference.alternates[0]`"
    );
    assert_at(&typo, &text, "drivr");
}

#[test]
fn e_man_021_http_inference_without_model() {
    let text = VALID.replace("  model: claude-sonnet-4-5\n", "");
    let loaded = load_text(&text);
    let d = only(&loaded, "E-MAN-021");
    assert!(d.message.contains("no `model`"));
    assert_eq!(d.line, Some(position(&text, "inference:").0));
    assert_hint(&d, "model:");
}

#[test]
fn e_man_022_malformed_reference() {
    let text = VALID.replace("claude-sonnet-4-5", "\"${MODEL\"");
    let loaded = load_text(&text);
    let d = only(&loaded, "E-MAN-022");
    assert!(d.message.contains("never closed"));
    assert_at(&d, &text, "\"${MODEL\"");
    assert_hint(&d, "$${");
}

#[test]
fn e_man_023_prompt_file_missing() {
    let text = format!("{VALID}  system_prompt_file: prompts/review.md\n");
    let loaded = load_text(&text);
    let d = only(&loaded, "E-MAN-023");
    assert!(d.message.contains("review.md"));
    assert_at(&d, &text, "prompts/review.md");
    assert_hint(&d, "relative to the manifest's directory");
}

#[test]
fn e_man_023_skill_file_missing() {
    let written = write("name: style\nversion: \"0.1.0\"\nruntime: skill\n");
    let loaded = written.load();
    let d = only(&loaded, "E-MAN-023");
    assert!(d.message.contains("skill.md"));
    assert_hint(&d, "skill.md");
    written.add("skill.md", "Write plainly.");
    assert!(written.load().diagnostics.is_empty());
}

#[test]
fn e_man_024_gateway_endpoint_not_a_url() {
    let text = VALID.replace(
        "runtime: driver }",
        "runtime: driver, gateway: { endpoint: api.anthropic.com } }",
    );
    let loaded = load_text(&text);
    let d = only(&loaded, "E-MAN-024");
    assert!(d.message.contains("`artifacts[0].gateway.endpoint`"));
    assert_at(&d, &text, "api.anthropic.com");
    assert_hint(&d, "https://");
}

#[test]
fn w_man_025_unparsable_dotenv() {
    let text = VALID.replace("claude-sonnet-4-5", "${MODEL}");
    let written = write(&text);
    written.add(".env", "MODEL=claude\nthis line is not an assignment\n");
    let loaded = written.load();
    let d = only(&loaded, "W-MAN-025");
    assert_eq!(
        d.file.as_deref(),
        Some(written.dir.path().join(".env").as_path())
    );
    assert_hint(&d, "NAME=value");
    // The variable before the bad line still counts.
    assert!(loaded.manifest.is_some(), "{:#?}", loaded.diagnostics);
}

#[test]
fn w_man_026_field_of_another_runtime() {
    let text = "name: d\nversion: \"1.0.0\"\nruntime: driver\ninput_schema: { type: object }\n";
    let loaded = load_text(text);
    let d = only(&loaded, "W-MAN-026");
    assert!(d.message.contains("only applies to `runtime: tool`"));
    assert_at(&d, text, "input_schema:");
    assert_hint(&d, "remove `input_schema:`");
}

#[test]
fn e_man_027_manifest_over_the_size_limit() {
    let mut text = VALID.to_string();
    while text.len() as u64 <= murmur_manifest::load::MANIFEST_MAX_BYTES {
        text.push_str("# padding the manifest out past the limit\n");
    }
    let written = write(&text);
    let loaded = written.load();
    let d = only(&loaded, "E-MAN-027");
    assert_eq!(loaded.diagnostics.len(), 1, "{:#?}", loaded.diagnostics);
    assert!(loaded.manifest.is_none());
    assert!(d.message.contains("larger than 1 MiB"));
    assert_eq!(d.file.as_deref(), Some(written.file.as_path()));
    assert_eq!(d.line, None);
    assert_hint(&d, "under 1 MiB (1048576 bytes)");
    // The same text given already read is not held to the limit.
    assert!(load_text(&text).diagnostics.is_empty());
}

#[test]
fn e_cap_001_malformed_network_entry() {
    let text = format!(
        "{VALID}capabilities:\n  network:\n    allow:\n      - https://api.anthropic.com\n      - \"ftp://files.example.com\"\n"
    );
    let loaded = load_text(&text);
    let d = only(&loaded, "E-CAP-001");
    assert!(d.message.contains("scheme `ftp`"));
    assert_at(&d, &text, "\"ftp://");
    assert_hint(&d, "host:port");
}

#[test]
fn e_cap_002_limit_zero_or_negative() {
    let text =
        format!("{VALID}capabilities:\n  limits: {{ memory_bytes: 0, deadline_seconds: -5 }}\n");
    let loaded = load_text(&text);
    assert_eq!(codes(&loaded), ["E-CAP-002", "E-CAP-002"]);
    assert_at(&loaded.diagnostics[0], &text, "0,");
    assert_at(&loaded.diagnostics[1], &text, "-5 }");
    assert_hint(&loaded.diagnostics[0], "above 0");
}

#[test]
fn w_cap_003_read_only_path_missing() {
    let text = format!("{VALID}capabilities:\n  filesystem: {{ read_only: [ ./docs ] }}\n");
    let written = write(&text);
    let loaded = written.load();
    let d = only(&loaded, "W-CAP-003");
    assert_at(&d, &text, "./docs");
    assert_hint(&d, "relative to the manifest's directory");
    std::fs::create_dir(written.dir.path().join("docs")).unwrap();
    let loaded = written.load();
    assert!(loaded.diagnostics.is_empty());
    let Some(Manifest::Capsule(capsule)) = loaded.manifest else {
        panic!()
    };
    let path = &capsule.capabilities.filesystem.read_only[0];
    assert_eq!(path.raw, std::path::Path::new("./docs"));
    assert_eq!(path.resolved, written.dir.path().join("./docs"));
}

#[test]
fn e_cap_004_empty_shell_entry() {
    let text = format!("{VALID}capabilities:\n  shell: {{ allow: [ git, \" \" ] }}\n");
    let loaded = load_text(&text);
    let d = only(&loaded, "E-CAP-004");
    assert_at(&d, &text, "\" \"");
    assert_hint(&d, "one binary");
}

#[test]
fn e_cap_005_env_name_owned_by_the_runtime() {
    let text =
        format!("{VALID}capabilities:\n  env: {{ allow: [ LANG, MURMUR_SESSION_ID, \"A=B\" ] }}\n");
    let loaded = load_text(&text);
    assert_eq!(codes(&loaded), ["E-CAP-005", "E-CAP-005"]);
    assert!(loaded.diagnostics[0].message.contains("MURMUR_"));
    assert_at(&loaded.diagnostics[0], &text, "MURMUR_SESSION_ID");
    assert!(loaded.diagnostics[1].message.contains("`=`"));
    assert_hint(&loaded.diagnostics[0], "always set by the runtime");
}

/// `VALID` with a hook entry carrying `capabilities`, under a capsule allowing `allow`.
fn hook_capabilities(capabilities: &str, allow: &str) -> String {
    VALID.replace(
        "inference:\n",
        &format!(
            "  - {{ name: watcher, version: \"0.1.0\", runtime: hook, capabilities: {capabilities} }}\ncapabilities:\n  network: {{ allow: [ {allow} ] }}\ninference:\n"
        ),
    )
}

#[test]
fn e_cap_009_entry_network_wider_than_the_capsule() {
    let text = hook_capabilities(
        "{ network: { allow: [ \"https://api.example.com\", \"http://evil.example:8080\" ] } }",
        "\"https://api.example.com\"",
    );
    let loaded = load_text(&text);
    let d = only(&loaded, "E-CAP-009");
    assert!(d.message.contains("artifact `watcher`"), "{}", d.message);
    assert!(
        d.message.contains("`http://evil.example:8080`"),
        "{}",
        d.message
    );
    assert_at(&d, &text, "\"http://evil.example:8080\"");
    assert_hint(&d, "only narrow the capsule's grants");
    // Within the capsule's allowlist: no diagnostic.
    let within = hook_capabilities(
        "{ network: { allow: [ \"https://api.example.com\" ] } }",
        "api.example.com",
    );
    assert!(load_text(&within).diagnostics.is_empty());
}

#[test]
fn e_cap_010_entry_filesystem_path_out_of_the_workdir() {
    for (path, problem) in [
        ("/etc", "is absolute"),
        ("logs/../../x", "climbs with `..`"),
        ("\"\"", "is empty"),
    ] {
        let text = hook_capabilities(
            &format!("{{ filesystem: {{ scope: read, path: {path} }} }}"),
            "api.example.com",
        );
        let loaded = load_text(&text);
        let d = only(&loaded, "E-CAP-010");
        assert!(d.message.contains("artifact `watcher`"), "{}", d.message);
        assert!(d.message.contains(problem), "{}", d.message);
        assert_at(&d, &text, &format!("{path} }}"));
        assert_hint(&d, "relative to the workdir");
    }
    let within = hook_capabilities(
        "{ filesystem: { scope: write, path: logs/hooks } }",
        "api.example.com",
    );
    assert!(load_text(&within).diagnostics.is_empty());
}

#[test]
fn e_hook_001_policy_the_binding_cannot_honor() {
    let text = "name: gate\nversion: \"0.1.0\"\nruntime: hook\nbinding: on-stage\ncommit_policy: reopen-task\n";
    let loaded = load_text(text);
    let d = only(&loaded, "E-HOOK-001");
    assert_eq!(
        d.message,
        "hook `gate` declares `commit_policy: reopen-task` on `binding: on-stage`, which honors only `write-manifests`"
    );
    assert_at(&d, text, "reopen-task");
    assert_hint(&d, "on-task-end");
}

#[test]
fn e_hook_002_async_with_a_committing_policy() {
    let text = "name: gate\nversion: \"0.1.0\"\nruntime: hook\nbinding: on-tool-call\nexecution_mode: async\ncommit_policy: deny\n";
    let loaded = load_text(text);
    let d = only(&loaded, "E-HOOK-002");
    assert_at(&d, text, "deny");
    assert_hint(&d, "commit_policy: none");
}

#[test]
fn e_hook_003_async_on_stage() {
    let text =
        "name: gate\nversion: \"0.1.0\"\nruntime: hook\nbinding: on-stage\nexecution_mode: async\n";
    let loaded = load_text(text);
    let d = only(&loaded, "E-HOOK-003");
    assert_at(&d, text, "async");
    assert_hint(&d, "remove `execution_mode: async`");
}

#[test]
fn e_hook_004_unknown_binding_lists_the_valid_ones() {
    let text = "name: gate\nversion: \"0.1.0\"\nruntime: hook\nbinding: on-task-finish\n";
    let loaded = load_text(text);
    let d = only(&loaded, "E-HOOK-004");
    assert_eq!(d.message, "unknown binding `on-task-finish`");
    assert_at(&d, text, "on-task-finish");
    assert_hint(&d, "on-stage, on-session-start, on-task-start");
}

#[test]
fn e_ctl_001_agent_setting_not_grantable() {
    let text = format!("{VALID}control:\n  agent_settings: [ inference.max_tokens ]\n");
    let loaded = load_text(&text);
    let d = only(&loaded, "E-CTL-001");
    assert_at(&d, &text, "inference.max_tokens");
    assert_hint(&d, "only be given `inference.driver`");
    let unknown = format!("{VALID}control:\n  settings: [ inference.model ]\n");
    let loaded = load_text(&unknown);
    let d = only(&loaded, "E-CTL-001");
    assert_eq!(d.message, "unknown control setting `inference.model`");
    assert_at(&d, &unknown, "inference.model");
}

#[test]
fn e_ctl_002_bad_secret_name() {
    let text = format!("{VALID}control:\n  secrets: [ ANTHROPIC_API_KEY, \"\" ]\n");
    let loaded = load_text(&text);
    let d = only(&loaded, "E-CTL-002");
    assert_at(&d, &text, "\"\"");
    assert_hint(&d, "ANTHROPIC_API_KEY");
}

#[test]
fn a_door_with_principals_and_peers_loads_with_references_kept() {
    let text = format!(
        "{VALID}capabilities:\n  network: {{ allow: [ \"http://127.0.0.1:9000\" ] }}\ndoor:\n  auth:\n    - {{ principal: ops, bearer: \"${{OPS_TOKEN}}\" }}\n    - {{ principal: ci@build, api_key: \"${{CI_KEY}}\", header: X-Team-Key, trust: peer }}\n  output_modes: [ text/plain, application/json ]\npeers:\n  - {{ url: \"http://127.0.0.1:9000\", bearer: \"${{PEER_TOKEN}}\" }}\n"
    );
    let dir = tempfile::tempdir().unwrap();
    // Set in the environment, yet kept as written: secrets are resolved at staging only.
    let env = |name: &str| (name == "OPS_TOKEN").then(|| "s3cret".to_string());
    let loaded = murmur_manifest::load_str(&text, &dir.path().join("murmur.yaml"), &env);
    assert!(loaded.diagnostics.is_empty(), "{:#?}", loaded.diagnostics);
    let Some(Manifest::Capsule(capsule)) = loaded.manifest else {
        panic!("a capsule")
    };
    assert_eq!(capsule.door.auth[0].bearer.as_deref(), Some("${OPS_TOKEN}"));
    assert_eq!(
        capsule.door.auth[1].presented(),
        Some(murmur_manifest::door::Presented::ApiKey {
            header: "X-Team-Key".into(),
            credential: "CI_KEY".into()
        })
    );
    assert_eq!(
        capsule.door.auth[1].trust,
        murmur_manifest::door::PrincipalTrust::Peer
    );
    assert_eq!(capsule.door.input_modes, ["text/plain"]);
    assert_eq!(
        capsule.peers[0].presented().unwrap().credential(),
        "PEER_TOKEN"
    );
}

#[test]
fn e_a2a_007_malformed_door_principals() {
    let text = format!(
        "{VALID}door:\n  auth:\n    - {{ principal: \"no spaces\", bearer: \"${{A}}\" }}\n    - {{ principal: twice, bearer: \"${{B}}\" }}\n    - {{ principal: twice, api_key: \"${{C}}\" }}\n    - {{ principal: none }}\n    - {{ principal: both, bearer: \"${{D}}\", api_key: \"${{E}}\" }}\n    - {{ principal: hdr, api_key: \"${{F}}\", header: Authorization }}\n    - {{ principal: bad-hdr, api_key: \"${{G}}\", header: \"X Key\" }}\n    - {{ principal: bearer-hdr, bearer: \"${{H}}\", header: X-Key }}\n"
    );
    let loaded = load_text(&text);
    assert_eq!(
        codes(&loaded),
        ["E-A2A-007"; 7],
        "{:#?}",
        loaded.diagnostics
    );
    let messages: Vec<&str> = loaded
        .diagnostics
        .iter()
        .map(|d| d.message.as_str())
        .collect();
    assert!(
        messages[0].contains("not a principal's name"),
        "{messages:?}"
    );
    assert!(messages[1].contains("declared twice"), "{messages:?}");
    assert!(messages[2].contains("has no credential"), "{messages:?}");
    assert!(
        messages[3].contains("both `bearer` and `api_key`"),
        "{messages:?}"
    );
    assert!(
        messages[4].contains("gives its own meaning"),
        "{messages:?}"
    );
    assert!(
        messages[5].contains("not an HTTP header name"),
        "{messages:?}"
    );
    assert!(
        messages[6].contains("only an `api_key` uses"),
        "{messages:?}"
    );
    assert_at(&loaded.diagnostics[0], &text, "\"no spaces\"");
    assert_hint(&loaded.diagnostics[2], "bearer: \"${TOKEN}\"");
}

#[test]
fn e_a2a_007_a_principal_name_may_not_start_with_a_dot() {
    // A principal's name names its directory of a served session's workspace: `.`, `..` and
    // hidden names would be the workspace itself, its parent, or Murmur's scratch.
    let text = format!(
        "{VALID}door:\n  auth:\n    - {{ principal: \".\", bearer: \"${{A}}\" }}\n    - {{ principal: \"..\", bearer: \"${{B}}\" }}\n    - {{ principal: .murmur, bearer: \"${{C}}\" }}\n    - {{ principal: ops.team, bearer: \"${{D}}\" }}\n"
    );
    let loaded = load_text(&text);
    assert_eq!(
        codes(&loaded),
        ["E-A2A-007"; 3],
        "{:#?}",
        loaded.diagnostics
    );
    for (diagnostic, name) in loaded
        .diagnostics
        .iter()
        .zip(["\".\"", "\"..\"", ".murmur"])
    {
        assert!(
            diagnostic.message.contains("not a principal's name"),
            "{diagnostic:?}"
        );
        assert_at(diagnostic, &text, name);
    }
}

#[test]
fn e_man_022_a_literal_door_secret_is_refused() {
    let text = format!("{VALID}door:\n  auth:\n    - {{ principal: ops, bearer: hunter2 }}\n");
    let loaded = load_text(&text);
    let d = only(&loaded, "E-MAN-022");
    assert_at(&d, &text, "hunter2");
    assert_hint(&d, "a secret never sits in the manifest");
}

#[test]
fn e_a2a_008_door_modes_are_media_types_the_door_keeps_to() {
    let text = format!(
        "{VALID}door:\n  input_modes: [ text/plain, image/png, \"text/*\" ]\n  output_modes: [ application/json ]\n"
    );
    let loaded = load_text(&text);
    assert_eq!(
        codes(&loaded),
        ["E-A2A-008"; 3],
        "{:#?}",
        loaded.diagnostics
    );
    assert_at(&loaded.diagnostics[0], &text, "image/png");
    assert_hint(&loaded.diagnostics[0], "text types");
    assert_at(&loaded.diagnostics[1], &text, "\"text/*\"");
    assert!(
        loaded.diagnostics[2]
            .message
            .contains("leaves out `text/plain`")
    );
}

#[test]
fn e_cap_008_and_e_a2a_007_peers_are_allowed_and_distinct() {
    let text = format!(
        "{VALID}capabilities:\n  network: {{ allow: [ \"http://127.0.0.1:9000\" ] }}\npeers:\n  - {{ url: \"http://127.0.0.1:9000\", bearer: \"${{A}}\" }}\n  - {{ url: \"http://127.0.0.1:9000/other\", bearer: \"${{B}}\" }}\n  - {{ url: \"http://127.0.0.1:9999\", bearer: \"${{C}}\" }}\n"
    );
    let loaded = load_text(&text);
    assert_eq!(
        codes(&loaded),
        ["E-A2A-007", "E-CAP-008"],
        "{:#?}",
        loaded.diagnostics
    );
    assert!(loaded.diagnostics[0].message.contains("same origin"));
    assert_at(&loaded.diagnostics[1], &text, "\"http://127.0.0.1:9999\"");
    assert_hint(&loaded.diagnostics[1], "http://127.0.0.1:9999");
}

/// A capsule allowed to reach two loopback peers, with `peers` as given.
fn with_peers(peers: &str) -> String {
    format!(
        "{VALID}capabilities:\n  network: {{ allow: [ \"http://127.0.0.1:9000\", \"http://127.0.0.1:9001\" ] }}\npeers:\n{peers}"
    )
}

#[test]
fn a_named_peer_with_a_description_loads() {
    let text = with_peers(
        "  - { url: \"http://127.0.0.1:9000\", name: researcher-2, description: \"Finds papers.\", bearer: \"${A}\" }\n",
    );
    let loaded = load_text(&text);
    assert!(loaded.diagnostics.is_empty(), "{:#?}", loaded.diagnostics);
    let Some(Manifest::Capsule(capsule)) = loaded.manifest else {
        panic!("a capsule")
    };
    assert_eq!(capsule.peers[0].name.as_deref(), Some("researcher-2"));
    assert_eq!(
        capsule.peers[0].description.as_deref(),
        Some("Finds papers.")
    );
}

#[test]
fn e_a2a_025_a_peer_name_that_cannot_name_a_tool() {
    let long = "a".repeat(60);
    for bad in [
        "Researcher",
        "1st",
        "re_search",
        "-x",
        "\"\"",
        long.as_str(),
    ] {
        let text = with_peers(&format!(
            "  - {{ url: \"http://127.0.0.1:9000\", name: {bad}, bearer: \"${{A}}\" }}\n"
        ));
        let loaded = load_text(&text);
        let d = only(&loaded, "E-A2A-025");
        assert_eq!(
            codes(&loaded),
            ["E-A2A-025"],
            "{bad}: {:#?}",
            loaded.diagnostics
        );
        assert!(d.message.contains("not a peer's name"), "{d}");
        assert_at(&d, &text, bad);
        assert_hint(&d, "1 to 59 lowercase letters");
    }
    // 59 characters is the most: `ask-<name>` is then 63.
    let text = with_peers(&format!(
        "  - {{ url: \"http://127.0.0.1:9000\", name: {}, bearer: \"${{A}}\" }}\n",
        "a".repeat(59)
    ));
    assert!(load_text(&text).diagnostics.is_empty());
}

#[test]
fn e_a2a_025_two_peers_of_one_name() {
    let text = with_peers(
        "  - { url: \"http://127.0.0.1:9000\", name: scout, bearer: \"${A}\" }\n  - { url: \"http://127.0.0.1:9001\", name: scout, bearer: \"${B}\" }\n",
    );
    let loaded = load_text(&text);
    let d = only(&loaded, "E-A2A-025");
    assert!(d.message.contains("given twice"), "{d}");
    assert!(d.message.contains("ask-scout"), "{d}");
    // The second entry's name.
    let second = text.rfind("name: scout").unwrap() + "name: ".len();
    let line = text[..second].matches('\n').count() + 1;
    assert_eq!(d.line, Some(line), "{d}");
}

#[test]
fn e_a2a_025_a_description_too_long_empty_or_without_a_name() {
    let long = "d".repeat(2_001);
    let text = with_peers(&format!(
        "  - {{ url: \"http://127.0.0.1:9000\", name: a, description: {long}, bearer: \"${{A}}\" }}\n  - {{ url: \"http://127.0.0.1:9001\", name: b, description: \" \", bearer: \"${{B}}\" }}\n"
    ));
    let loaded = load_text(&text);
    assert_eq!(
        codes(&loaded),
        ["E-A2A-025"; 2],
        "{:#?}",
        loaded.diagnostics
    );
    assert!(loaded.diagnostics[0].message.contains("2001 characters"));
    assert_at(&loaded.diagnostics[0], &text, &long);
    assert!(loaded.diagnostics[1].message.contains("is empty"));
    assert_at(&loaded.diagnostics[1], &text, "\" \"");

    let text = with_peers(
        "  - { url: \"http://127.0.0.1:9000\", description: \"Finds papers.\", bearer: \"${A}\" }\n",
    );
    let loaded = load_text(&text);
    let d = only(&loaded, "E-A2A-025");
    assert!(d.message.contains("no `name`"), "{d}");
    assert_at(&d, &text, "\"Finds papers.\"");
    assert_hint(&d, "add `name:`");
}

#[test]
fn e_a2a_026_a_peers_tool_has_a_declared_tools_name() {
    let text = with_peers(
        "  - { url: \"http://127.0.0.1:9000\", name: researcher, bearer: \"${A}\" }\n  - { url: \"http://127.0.0.1:9001\", name: style, bearer: \"${B}\" }\n",
    )
    .replacen(
        "artifacts:\n",
        "artifacts:\n  - { name: ask-researcher, version: \"1.0.0\", runtime: tool }\n  - { name: ask-style, version: \"1.0.0\", runtime: skill }\n",
        1,
    );
    let loaded = load_text(&text);
    assert_eq!(
        codes(&loaded),
        ["E-A2A-026"; 2],
        "{:#?}",
        loaded.diagnostics
    );
    let d = &loaded.diagnostics[0];
    assert!(
        d.message.contains("`ask-researcher`") && d.message.contains("tool `ask-researcher`"),
        "{d}"
    );
    assert_at(d, &text, "researcher, bearer");
    assert_hint(d, "rename the peer");
    assert!(loaded.diagnostics[1].message.contains("skill `ask-style`"));
    assert_at(&loaded.diagnostics[1], &text, "style, bearer");
}

#[test]
fn door_a2a_versions_default_to_both_and_take_one_written_as_a_number() {
    let both = clean_capsule(VALID);
    assert_eq!(both.door.a2a_versions, ["0.3", "1.0"]);
    assert!(both.door.serves("0.3") && both.door.serves("1.0"));
    let one = clean_capsule(&format!("{VALID}door:\n  a2a_versions: [ 1.0 ]\n"));
    assert_eq!(one.door.a2a_versions, ["1.0"]);
    assert!(one.door.serves("1.0") && !one.door.serves("0.3"));
    let quoted = clean_capsule(&format!("{VALID}door: {{ a2a_versions: [ \"0.3\" ] }}\n"));
    assert!(quoted.door.serves("0.3") && !quoted.door.serves("1.0"));
}

#[test]
fn e_a2a_031_a2a_versions_empty_unknown_or_twice() {
    let text = format!("{VALID}door:\n  a2a_versions: []\n");
    let loaded = load_text(&text);
    let d = only(&loaded, "E-A2A-031");
    assert_at(&d, &text, "a2a_versions");
    assert!(d.message.contains("is empty"), "{d}");
    assert_hint(&d, "remove the key");

    let text = format!("{VALID}door:\n  a2a_versions:\n    - \"1.0\"\n    - \"2.0\"\n    - 1.0\n");
    let loaded = load_text(&text);
    assert_eq!(
        codes(&loaded),
        ["E-A2A-031"; 2],
        "{:#?}",
        loaded.diagnostics
    );
    let unknown = &loaded.diagnostics[0];
    assert_at(unknown, &text, "\"2.0\"");
    assert!(unknown.message.contains("`2.0`"), "{unknown}");
    assert_hint(unknown, "`\"0.3\"` or `\"1.0\"`");
    let twice = &loaded.diagnostics[1];
    assert_eq!(twice.line, Some(position(&text, "- 1.0").0));
    assert!(twice.message.contains("lists `1.0` twice"), "{twice}");
}

#[test]
fn e_a2a_032_conversations_max_bytes_below_one_mebibyte() {
    let text = format!("{VALID}door:\n  conversations_max_bytes: 4096\n");
    let loaded = load_text(&text);
    let d = only(&loaded, "E-A2A-032");
    assert_at(&d, &text, "4096");
    assert!(d.message.contains("is 4096"), "{d}");
    assert_hint(&d, "at least 1048576");
    // 1 MiB is taken, and absent is the default.
    let kept = clean_capsule(&format!(
        "{VALID}door: {{ conversations_max_bytes: 1048576 }}\n"
    ));
    assert_eq!(kept.door.conversations_max_bytes, Some(1 << 20));
    assert_eq!(clean_capsule(VALID).door.conversations_max_bytes, None);
}

/// A capsule written for another Murmur runtime: its gateway beside the model, its port under
/// `network`, its queue by depth alone.
const OTHER_RUNTIME: &str = r#"name: reviewer
version: "1.0.0"
artifacts:
  - { name: driver-anthropic, version: "1.0.0", runtime: driver }
inference:
  model: claude-sonnet-4-5
  driver: { artifact: driver-anthropic }
  endpoint: https://api.anthropic.com
  api_key: "${ANTHROPIC_API_KEY}"
network:
  internal_port: 8080
lifecycle:
  queue_depth: 8
"#;

#[test]
fn w_man_032_another_runtimes_capsule_spellings_are_read_as_this_ones() {
    let loaded = load_text(OTHER_RUNTIME);
    assert_eq!(
        codes(&loaded),
        ["W-MAN-032"; 4],
        "{:#?}",
        loaded.diagnostics
    );
    for (d, at, read_as) in [
        (
            &loaded.diagnostics[0],
            "endpoint:",
            "artifacts[0].gateway.endpoint",
        ),
        (
            &loaded.diagnostics[1],
            "api_key:",
            "artifacts[0].gateway.api_key",
        ),
        (&loaded.diagnostics[2], "8080", "door.port"),
        (
            &loaded.diagnostics[3],
            "queue_depth: 8",
            "task_acceptance: queue",
        ),
    ] {
        assert_eq!(d.line, Some(position(OTHER_RUNTIME, at).0), "{d}");
        assert!(d.message.contains(read_as), "{d}");
        assert!(d.hint.is_some(), "{d}");
    }
    let Some(Manifest::Capsule(capsule)) = loaded.manifest else {
        panic!("not a capsule")
    };
    let gateway = capsule.artifacts[0].gateway.as_ref().expect("a gateway");
    assert_eq!(gateway.endpoint, "https://api.anthropic.com");
    // Still a reference, resolved at staging like any gateway key: never interpolated.
    assert_eq!(gateway.env_reference(), Some("ANTHROPIC_API_KEY"));
    assert_eq!(capsule.door.port, Some(8080));
    assert_eq!(
        capsule.lifecycle.task_acceptance,
        murmur_manifest::capsule::TaskAcceptance::Queue
    );
    assert_eq!(capsule.lifecycle.queue_depth, Some(8));
}

#[test]
fn a_mapped_key_is_reported_at_the_line_it_was_written() {
    let text = OTHER_RUNTIME.replace("https://api.anthropic.com", "api.anthropic.com");
    let loaded = load_text(&text);
    let d = only(&loaded, "E-MAN-024");
    assert_eq!(d.line, Some(position(&text, "endpoint:").0), "{d}");
}

#[test]
fn e_man_018_another_runtimes_key_beside_this_ones() {
    let text = OTHER_RUNTIME
        .replace(
            "runtime: driver }",
            "runtime: driver, gateway: { endpoint: \"https://gw.example\" } }",
        )
        .replace("lifecycle:", "door: { port: 9090 }\nlifecycle:");
    let loaded = load_text(&text);
    let errors: Vec<_> = loaded.diagnostics.iter().filter(|d| d.is_error()).collect();
    assert_eq!(errors.len(), 3, "{:#?}", loaded.diagnostics);
    assert!(errors.iter().all(|d| d.code == "E-MAN-018"));
    assert!(loaded.manifest.is_none());
    let endpoint = errors[0];
    assert_eq!(endpoint.line, Some(position(&text, "endpoint: https").0));
    assert!(
        endpoint.message.contains("`inference.endpoint`")
            && endpoint.message.contains("`artifacts[0].gateway`"),
        "{endpoint}"
    );
    assert!(errors[1].message.contains("`inference.api_key`"));
    let port = errors[2];
    assert_eq!(port.line, Some(position(&text, "internal_port").0));
    assert!(
        port.message.contains("`network.internal_port`") && port.message.contains("`door.port`"),
        "{port}"
    );
    assert_hint(port, "remove `network.internal_port`");
}

#[test]
fn e_man_021_an_api_key_of_another_runtime_with_nowhere_to_send_it() {
    let text = OTHER_RUNTIME.replace("  endpoint: https://api.anthropic.com\n", "");
    let loaded = load_text(&text);
    let d = only(&loaded, "E-MAN-021");
    assert_at(&d, &text, "\"${ANTHROPIC_API_KEY}\"");
    assert_hint(&d, "inference.endpoint");
}

#[test]
fn lifecycle_queue_depth_is_a_bound_of_a_queue() {
    let text = format!("{VALID}lifecycle: {{ task_acceptance: queue, queue_depth: 0 }}\n");
    let loaded = load_text(&text);
    let d = only(&loaded, "E-MAN-015");
    assert_at(&d, &text, "0 }");
    let text = format!("{VALID}lifecycle: {{ task_acceptance: single, queue_depth: 4 }}\n");
    let loaded = load_text(&text);
    let d = only(&loaded, "E-MAN-018");
    assert_at(&d, &text, "4 }");
    assert_hint(&d, "task_acceptance: queue");
    let text = format!("{VALID}lifecycle: {{ task_acceptance: queue, queue_depth: 4 }}\n");
    let loaded = load_text(&text);
    assert!(loaded.diagnostics.is_empty(), "{:#?}", loaded.diagnostics);
}
