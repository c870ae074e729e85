//! The Python package's build settings (`pyproject.toml`): its version is the
//! crate's, and the wheel carries the binary. The package itself is tested by
//! `tests/python` (pytest, against the installed wheel; `.ci/run` runs it).

use crate::support::root;

/// The lines of a TOML table (`[project]`), up to the next table.
fn table<'a>(text: &'a str, name: &str) -> Vec<&'a str> {
    let header = format!("[{name}]");
    text.lines()
        .skip_while(|line| line.trim() != header)
        .skip(1)
        .take_while(|line| !line.trim_start().starts_with('['))
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .collect()
}

#[test]
fn the_python_package_takes_the_crates_version() {
    let pyproject = std::fs::read_to_string(root().join("pyproject.toml")).unwrap();
    let project = table(&pyproject, "project");
    assert!(
        project.contains(&r#"dynamic = ["version"]"#),
        "the version must come from Cargo.toml (maturin): {project:?}"
    );
    assert!(
        !project.iter().any(|line| line.starts_with("version")),
        "a second version number would drift from Cargo.toml's"
    );
    assert!(project.contains(&r#"name = "hlomem""#));
    let maturin = table(&pyproject, "tool.maturin");
    assert!(maturin.contains(&r#"bindings = "bin""#), "{maturin:?}");
    assert!(
        maturin.contains(&r#"python-source = "python""#),
        "{maturin:?}"
    );
    // Typed: the marker ships in the package.
    assert!(root().join("python/hlomem/py.typed").is_file());
    assert!(root().join("python/hlomem/__init__.py").is_file());
}
