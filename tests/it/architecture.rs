//! ARCHITECTURE.md is the map a newcomer trusts, so two of its claims are
//! checked here: it names every source file, and the layer order it gives is
//! the one the code keeps (a module uses only modules above it).

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn architecture() -> String {
    fs::read_to_string(root().join("ARCHITECTURE.md")).expect("ARCHITECTURE.md is readable")
}

/// Every file below `dir`, as a path relative to the repository, `/`-separated.
fn files_under(dir: &str, keep: &dyn Fn(&Path) -> bool) -> Vec<String> {
    fn walk(path: &Path, out: &mut Vec<PathBuf>) {
        let mut entries: Vec<_> = fs::read_dir(path)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
            .map(|e| e.expect("a directory entry").path())
            .collect();
        entries.sort();
        for p in entries {
            if p.is_dir() {
                walk(&p, out);
            } else {
                out.push(p);
            }
        }
    }
    let mut found = Vec::new();
    walk(&root().join(dir), &mut found);
    found
        .into_iter()
        .filter(|p| keep(p))
        .map(|p| {
            let rel = p.strip_prefix(root()).expect("below the root");
            rel.components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect::<Vec<_>>()
                .join("/")
        })
        .collect()
}

/// The map's blocks: a list item with its continuation lines, or a paragraph.
/// A file counts as named in a block that spells its full path, or its path
/// below a folder the same block spells (`src/oom/` … `device.rs`), so that a
/// bullet can name siblings without repeating their folder.
fn blocks(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut current = String::new();
    for line in text.lines() {
        let starts_item = line.starts_with("- ") || line.starts_with("**") || line.is_empty();
        if starts_item && !current.is_empty() {
            out.push(std::mem::take(&mut current));
        }
        current.push_str(line);
        current.push('\n');
    }
    out.push(current);
    out
}

fn is_named(file: &str, blocks: &[String]) -> bool {
    let quoted = |s: &str| format!("`{s}");
    blocks.iter().any(|b| {
        if b.contains(&quoted(file)) {
            return true;
        }
        // Every folder above the file, from the nearest: `src/hlo/lower/`
        // then `src/hlo/`, with the rest of the path below it.
        let parts: Vec<&str> = file.split('/').collect();
        (1..parts.len()).rev().any(|cut| {
            let folder = parts[..cut].join("/") + "/";
            let rest = parts[cut..].join("/");
            b.contains(&folder) && b.contains(&quoted(&rest))
        })
    })
}

#[test]
fn architecture_names_every_source_file() {
    let map = blocks(&architecture());
    let mut files = files_under("src", &|_| true);
    files.extend(files_under("grammar", &|_| true));
    files.extend(files_under("python/hlomem", &|p| {
        p.extension().is_some_and(|e| e == "py")
    }));
    assert!(files.len() > 100, "the walk found the sources: {files:?}");
    let missing: Vec<&String> = files.iter().filter(|f| !is_named(f, &map)).collect();
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md does not name these files; add each to the code map \
         (its full path, or its name in a bullet that names its folder):\n{}",
        missing
            .iter()
            .map(|f| format!("  {f}"))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// The `## Layers` list, in order.
fn layers(text: &str) -> Vec<String> {
    let section = text
        .split("\n## Layers")
        .nth(1)
        .expect("ARCHITECTURE.md has a `## Layers` section");
    let section = section.split("\n## ").next().unwrap_or(section);
    section
        .lines()
        .filter_map(|line| {
            let (number, rest) = line.split_once(". ")?;
            number.trim().parse::<u32>().ok()?;
            Some(rest.trim().trim_matches('`').to_string())
        })
        .collect()
}

/// The top-level modules a Rust file's code (not its comments, not its tests)
/// names through `crate::`.
fn crate_uses(code: &str) -> BTreeSet<String> {
    let mut text = String::new();
    let mut lines = code.lines().peekable();
    while let Some(line) = lines.next() {
        let trimmed = line.trim_start();
        let test_module = lines
            .peek()
            .is_some_and(|next| next.trim_start().starts_with("mod "));
        if trimmed.starts_with("#[cfg(test)]") && test_module {
            // Tests may use anything: skip the module to its closing brace.
            let mut depth = 0i32;
            for inner in lines.by_ref() {
                depth += inner.matches('{').count() as i32 - inner.matches('}').count() as i32;
                if depth <= 0 && (inner.contains('}') || inner.trim_end().ends_with(';')) {
                    break;
                }
            }
            continue;
        }
        if trimmed.starts_with("//") {
            continue;
        }
        text.push_str(line);
        text.push('\n');
    }
    let mut uses = BTreeSet::new();
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect()
    };
    let mut rest = text.as_str();
    while let Some(at) = rest.find("crate::") {
        rest = &rest[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            // `crate::{a, b::{C, D}}`: the names at the group's own depth.
            let mut depth = 1;
            let mut expect_name = true;
            for (i, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' => {
                        depth -= 1;
                        if depth == 0 {
                            rest = &group[i..];
                            break;
                        }
                    }
                    ',' if depth == 1 => expect_name = true,
                    c if depth == 1 && expect_name && (c.is_ascii_alphabetic() || c == '_') => {
                        uses.insert(ident(&group[i..]));
                        expect_name = false;
                    }
                    _ => {}
                }
            }
        } else {
            uses.insert(ident(rest));
        }
    }
    uses
}

#[test]
fn each_module_uses_only_the_layers_above_it() {
    let order = layers(&architecture());
    assert!(order.len() > 10, "the layer list was read: {order:?}");
    let position = |m: &str| order.iter().position(|l| l == m);
    let mut top_level: Vec<String> = fs::read_dir(root().join("src"))
        .expect("src/ is readable")
        .map(|e| e.expect("an entry").path())
        .filter_map(|p| {
            let name = p.file_stem()?.to_string_lossy().into_owned();
            (p.is_dir() || p.extension().is_some_and(|e| e == "rs")).then_some(name)
        })
        .filter(|n| n != "lib" && n != "main")
        .collect();
    top_level.sort();
    let unlisted: Vec<&String> = top_level.iter().filter(|m| position(m).is_none()).collect();
    assert!(
        unlisted.is_empty(),
        "top-level modules missing from ARCHITECTURE.md's `## Layers`: {unlisted:?}"
    );
    let mut wrong = Vec::new();
    for module in &top_level {
        let here = position(module).expect("listed");
        let file = root().join("src").join(format!("{module}.rs"));
        let files: Vec<String> = if file.exists() {
            vec![format!("src/{module}.rs")]
        } else {
            files_under(&format!("src/{module}"), &|p| {
                let stem = p.file_stem().map(|s| s.to_string_lossy().into_owned());
                p.extension().is_some_and(|e| e == "rs")
                    && !stem.is_some_and(|s| s.starts_with("tests"))
            })
        };
        for path in files {
            let code = fs::read_to_string(root().join(&path)).expect("readable");
            for used in crate_uses(&code) {
                match position(&used) {
                    Some(p) if p > here => wrong.push(format!(
                        "{path} uses crate::{used}, which ARCHITECTURE.md lists below {module}"
                    )),
                    _ => {}
                }
            }
        }
    }
    assert!(wrong.is_empty(), "layering broken:\n{}", wrong.join("\n"));
}

#[test]
fn crate_uses_reads_groups_and_skips_comments_and_tests() {
    let code = "use crate::{analysis, hlo::{Module, Shape}, units};\n\
                // crate::render is only mentioned\n\
                fn f() { crate::source::x(); }\n\
                #[cfg(test)]\nmod tests {\n    use crate::cli;\n}\n\
                fn g() -> crate::error::Error { todo!() }\n";
    let uses: Vec<String> = crate_uses(code).into_iter().collect();
    assert_eq!(uses, ["analysis", "error", "hlo", "source", "units"]);
}
