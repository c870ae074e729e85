//! The JSON contract: the schemas in `schema/` are the ones the report types
//! generate (regenerate with `HLOMEM_UPDATE_SCHEMA=1 cargo test schema`), and
//! every JSON document hlomem writes validates against its schema: the JSON
//! snapshots of `analyze`, and `check`, `diff` and `explain` on the samples.

use std::path::Path;

use hlomem::schema::Document;

use crate::support::{root, run_hlomem as hlomem};

fn schema_file(document: Document) -> std::path::PathBuf {
    root()
        .join("schema")
        .join(format!("{}.schema.json", document.name()))
}

#[test]
fn committed_schemas_are_the_generated_ones() {
    for document in Document::ALL {
        let generated = serde_json::to_string_pretty(&document.schema()).unwrap() + "\n";
        let path = schema_file(document);
        if std::env::var_os("HLOMEM_UPDATE_SCHEMA").is_some() {
            std::fs::write(&path, &generated).unwrap();
        }
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            committed == generated,
            "{} is out of date: HLOMEM_UPDATE_SCHEMA=1 cargo test schema, and raise \
             SCHEMA_VERSION if a field was removed or changed meaning",
            path.display()
        );
    }
}

fn validator(document: Document) -> jsonschema::Validator {
    let schema: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(schema_file(document)).unwrap()).unwrap();
    jsonschema::validator_for(&schema).expect("a valid JSON Schema")
}

fn assert_valid(validator: &jsonschema::Validator, json: &str, what: &str) {
    let value: serde_json::Value =
        serde_json::from_str(json).unwrap_or_else(|e| panic!("{what}: not JSON: {e}"));
    let errors: Vec<String> = validator
        .iter_errors(&value)
        .take(5)
        .map(|e| format!("{} at {}", e, e.instance_path))
        .collect();
    assert!(errors.is_empty(), "{what}:\n{}", errors.join("\n"));
    assert_eq!(
        value["schema_version"],
        hlomem::schema::SCHEMA_VERSION,
        "{what}"
    );
}

/// The body of an insta snapshot file (after its `---` header).
fn snapshot_body(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap();
    text.splitn(3, "---\n")
        .nth(2)
        .unwrap_or_default()
        .to_string()
}

#[test]
fn analyze_json_snapshots_validate() {
    let validator = validator(Document::Analyze);
    let mut checked = 0;
    for entry in std::fs::read_dir(root().join("snapshots"))
        .unwrap()
        .flatten()
    {
        let name = entry.file_name().to_string_lossy().into_owned();
        if (name.starts_with("analyze_json@") && name.ends_with(".snap"))
            || name == "analyze_folder_json.snap"
        {
            assert_valid(&validator, &snapshot_body(&entry.path()), &name);
            checked += 1;
        }
    }
    assert!(checked >= 20, "only {checked} JSON snapshots");
}

#[test]
fn check_diff_and_explain_json_validate() {
    let (_, out, err) = hlomem(&[
        "check",
        "samples",
        "--budget",
        "1MiB",
        "--fail-on",
        "HM001",
        "--format",
        "json",
    ]);
    assert_valid(&validator(Document::Check), &out, &format!("check: {err}"));
    let (_, out, err) = hlomem(&[
        "diff",
        "samples/add_donate0/dump",
        "samples/add_nodonate/dump",
        "--fail-over",
        "1MiB",
        "--format",
        "json",
    ]);
    assert_valid(&validator(Document::Diff), &out, &format!("diff: {err}"));
    let (_, out, err) = hlomem(&["targets", "--format", "json"]);
    assert_valid(
        &validator(Document::Targets),
        &out,
        &format!("targets: {err}"),
    );
    let explain = validator(Document::Explain);
    let mut checked = 0;
    for entry in std::fs::read_dir(root().join("samples/oom"))
        .unwrap()
        .flatten()
    {
        let path = entry.path();
        if path.extension().is_some_and(|e| e == "txt") {
            let (code, out, err) = hlomem(&["explain", path.to_str().unwrap(), "--format", "json"]);
            if code == Some(0) {
                assert_valid(&explain, &out, &format!("{}: {err}", path.display()));
                checked += 1;
            }
        }
    }
    assert!(checked >= 5, "only {checked} explanations");
}
