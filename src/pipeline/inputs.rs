//! Which files to analyze: dump folders are grouped into modules
//! (`module_NNNN.<name>.<stage>.txt`), and for each module the final
//! after-optimizations HLO is picked, or the before-optimizations one when
//! that is all there is (its numbers are then estimates: it is not scheduled).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// What standard input is called in messages and reports (`hlomem analyze -`).
pub const STDIN_NAME: &str = "<stdin>";

/// One module to analyze.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Input {
    pub path: PathBuf,
    /// `module_0000.jit_fn`, or the file name for files outside dump naming.
    pub key: String,
    /// Only a before-optimizations file was found.
    pub unoptimized: bool,
    /// Why this input cannot be read as a module (a folder without modules,
    /// a FIFO named like one): reported as its error, never read.
    pub unreadable: Option<String>,
    /// The module's bytes when the command line read them already (standard
    /// input, which can be read only once); `None`: the pipeline reads `path`.
    pub bytes: Option<Arc<[u8]>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Stage {
    Before,
    After,
}

/// A file XLA wrote beside an after-optimizations module, such as
/// `module_0000.jit_f.cl_1.target_arguments.txt` beside
/// `module_0000.jit_f.cl_1.after_optimizations.txt`, if it is there.
pub fn sibling(module: &Path, suffix: &str) -> Option<PathBuf> {
    let name = module.file_name()?.to_str()?;
    let head = name.strip_suffix("after_optimizations.txt")?;
    let path = module.with_file_name(format!("{head}{suffix}"));
    path.is_file().then_some(path)
}

/// The first file (by name) in `module`'s folder whose name ends with
/// `suffix`: one process dumps for one target, and a module recompiled later
/// (`module_0003`) has no `target_arguments.txt` of its own.
pub fn in_same_folder(module: &Path, suffix: &str) -> Option<PathBuf> {
    let folder = module.parent()?;
    let mut found: Vec<PathBuf> = std::fs::read_dir(folder)
        .ok()?
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.ends_with(suffix))
                && p.is_file()
        })
        .collect();
    found.sort();
    found.into_iter().next()
}

/// The module key and stage of a dump file name, or `None` for files that are
/// not HLO modules (XLA's reports, `.debug_options`, `.ll`, ...).
fn classify(name: &str) -> Option<(String, Stage)> {
    for (marker, stage) in [
        ("after_optimizations.txt", Stage::After),
        ("before_optimizations.txt", Stage::Before),
    ] {
        if let Some(head) = name.strip_suffix(marker) {
            // `module_0000.jit_fn.` (before), `module_0000.jit_fn.cpu_` or
            // `module_0000.jit_fn.sm_9.0_gpu_` (after): drop the backend prefix.
            let key = if let Some(k) = head.strip_suffix('.') {
                k
            } else if let Some(i) = head.find(".sm_") {
                &head[..i]
            } else {
                head.rsplit_once('.').map_or(head, |(k, _)| k)
            };
            return Some((key.to_string(), stage));
        }
    }
    for (marker, stage) in [(".after.hlo", Stage::After), (".before.hlo", Stage::Before)] {
        if let Some(key) = name.strip_suffix(marker) {
            return Some((key.to_string(), stage));
        }
    }
    None
}

/// Files found in folders (recursively, symlinks followed once) and files
/// given directly, as modules to analyze, in a stable order. A folder with
/// no HLO module in it is returned as itself, for the reader to report, and
/// so is anything under a folder that could not be searched (a folder it
/// may not read, a symlink loop, a dangling link).
pub fn collect(paths: &[PathBuf]) -> Vec<Input> {
    collect_with_stdin(paths, None)
}

/// [`collect`], where a path `-` is standard input, whose bytes the caller
/// read (`stdin`); without them `-` is a file of that name.
pub fn collect_with_stdin(paths: &[PathBuf], stdin: Option<Arc<[u8]>>) -> Vec<Input> {
    let mut out = Vec::new();
    // With several inputs, keys name the input they came from: two dumps of
    // one program have the same module names.
    let several = paths.len() > 1;
    for path in paths {
        if let (Some(bytes), true) = (&stdin, path.as_os_str() == "-") {
            out.push(from_stdin(bytes.clone()));
            continue;
        }
        let first = out.len();
        collect_one(path, &mut out);
        if several {
            for input in &mut out[first..] {
                if input.key != path.display().to_string() {
                    input.key = if path.is_dir() {
                        format!("{}/{}", path.display(), input.key)
                    } else {
                        path.display().to_string()
                    };
                }
            }
        }
    }
    // A file named twice (itself, and inside a folder also given) is
    // analyzed once, under the key it was first found with.
    let mut files = std::collections::HashSet::new();
    out.retain(|input| {
        input.bytes.is_some()
            || input.unreadable.is_some()
            || std::fs::canonicalize(&input.path).map_or(true, |file| files.insert(file))
    });
    out
}

/// A module read from standard input: named `<stdin>` as its file and key.
fn from_stdin(bytes: Arc<[u8]>) -> Input {
    Input {
        path: PathBuf::from(STDIN_NAME),
        key: STDIN_NAME.to_string(),
        unoptimized: false,
        unreadable: None,
        bytes: Some(bytes),
    }
}

/// The inputs of one path given on the command line.
fn collect_one(path: &Path, out: &mut Vec<Input>) {
    if !path.is_dir() {
        let key = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let key = classify(&key).map_or(key, |(k, _)| k);
        let unoptimized = path.to_string_lossy().ends_with("before_optimizations.txt");
        // A file named directly is read whatever it is: `<(cat f)` is a pipe.
        out.push(Input {
            path: path.to_path_buf(),
            key,
            unoptimized,
            unreadable: None,
            bytes: None,
        });
        return;
    }
    let mut found = Walk::default();
    walk(path, 0, &mut found);
    let Walk {
        files, problems, ..
    } = found;
    // key → (stage, path): the latest stage wins.
    let mut modules: BTreeMap<String, (Stage, PathBuf)> = BTreeMap::new();
    let mut not_regular = Vec::new();
    for (file, kind) in files {
        // A name that is not UTF-8 is still a module; its key shows U+FFFD.
        let Some(name) = file.file_name().map(|n| n.to_string_lossy()) else {
            continue;
        };
        let Some((key, stage)) = classify(&name) else {
            continue;
        };
        if let Some(kind) = kind {
            not_regular.push(Input {
                unreadable: Some(format!(
                    "{} is named like an HLO module but is {kind}, not a regular file: skipped",
                    file.display()
                )),
                path: file,
                key,
                unoptimized: false,
                bytes: None,
            });
            continue;
        }
        let key = match file.parent().and_then(|p| p.strip_prefix(path).ok()) {
            Some(sub) if !sub.as_os_str().is_empty() => format!("{}/{key}", sub.display()),
            _ => key,
        };
        match modules.get(&key) {
            Some((s, _)) if *s >= stage => {}
            _ => {
                modules.insert(key, (stage, file));
            }
        }
    }
    if modules.is_empty() && not_regular.is_empty() && problems.is_empty() {
        out.push(Input {
            path: path.to_path_buf(),
            key: path.display().to_string(),
            unoptimized: false,
            unreadable: Some(format!(
                "{} holds no HLO module: hlomem reads `*after_optimizations.txt` (or \
                 `*before_optimizations.txt`, `*.after.hlo`) files, which \
                 XLA_FLAGS=\"--xla_dump_to={} --xla_dump_hlo_as_text\" writes",
                path.display(),
                path.display()
            )),
            bytes: None,
        });
    }
    for (key, (stage, file)) in modules {
        out.push(Input {
            path: file,
            key,
            unoptimized: stage == Stage::Before,
            unreadable: None,
            bytes: None,
        });
    }
    out.extend(not_regular);
    out.extend(
        problems
            .into_iter()
            .map(|(at, reason)| problem(path, at, reason)),
    );
}

/// An input for something under the folder `root` that could not be
/// searched: an error naming it, beside the modules that could.
fn problem(root: &Path, at: PathBuf, reason: String) -> Input {
    let key = match at.strip_prefix(root) {
        Ok(sub) if !sub.as_os_str().is_empty() => sub.display().to_string(),
        _ => at.display().to_string(),
    };
    Input {
        unreadable: Some(format!("{} {reason}", at.display())),
        path: at,
        key,
        unoptimized: false,
        bytes: None,
    }
}

/// How deep folders are searched; dumps are one or two levels.
const MAX_DEPTH: usize = 8;

/// What a path that is neither a folder nor a regular file is, for messages.
fn special_kind(file_type: std::fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if file_type.is_fifo() {
            return "a FIFO";
        }
        if file_type.is_socket() {
            return "a socket";
        }
        if file_type.is_block_device() || file_type.is_char_device() {
            return "a device";
        }
    }
    let _ = file_type;
    "not a regular file"
}

/// What a walk of a folder found: files (each with `Some(kind)` when it is
/// not a regular file: reading a FIFO would wait forever), and paths that
/// could not be searched, with why. A module may be behind any of those, so
/// each is reported as an error rather than skipped.
#[derive(Default)]
struct Walk {
    files: Vec<(PathBuf, Option<&'static str>)>,
    problems: Vec<(PathBuf, String)>,
    /// Every real folder read, so a folder linked twice is read once.
    seen: std::collections::HashSet<PathBuf>,
    /// The real folders from the given one down to the current one: a link
    /// back to one of them is a loop.
    ancestors: Vec<PathBuf>,
}

/// Collects what is under `dir` into `walk`.
fn walk(dir: &Path, depth: usize, walk_state: &mut Walk) {
    let real = match dir.canonicalize() {
        Ok(real) => real,
        Err(e) => return walk_state.problems.push((dir.to_path_buf(), io_reason(&e))),
    };
    if let Some(ancestor) = walk_state.ancestors.iter().find(|a| **a == real) {
        let reason = format!(
            "is a symlink back to {}, a folder above it: a loop, not searched",
            ancestor.display()
        );
        return walk_state.problems.push((dir.to_path_buf(), reason));
    }
    // Reached before through another link: its files are listed already.
    if !walk_state.seen.insert(real.clone()) {
        return;
    }
    if depth > MAX_DEPTH {
        let reason = format!("is more than {MAX_DEPTH} folders deep: not searched");
        return walk_state.problems.push((dir.to_path_buf(), reason));
    }
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) => return walk_state.problems.push((dir.to_path_buf(), io_reason(&e))),
    };
    let mut paths = Vec::new();
    for entry in entries {
        match entry {
            Ok(entry) => paths.push(entry.path()),
            Err(e) => walk_state.problems.push((dir.to_path_buf(), io_reason(&e))),
        }
    }
    paths.sort();
    walk_state.ancestors.push(real);
    for path in paths {
        visit(path, depth, walk_state);
    }
    walk_state.ancestors.pop();
}

/// One entry of a folder: followed if a link, searched if a folder, listed
/// if a file, and a problem if it cannot be looked at.
fn visit(path: PathBuf, depth: usize, walk_state: &mut Walk) {
    // Follows symlinks: a linked module file or folder is read.
    match std::fs::metadata(&path) {
        Ok(metadata) if metadata.is_dir() => walk(&path, depth + 1, walk_state),
        Ok(metadata) if metadata.is_file() => walk_state.files.push((path, None)),
        Ok(metadata) => {
            let kind = special_kind(metadata.file_type());
            walk_state.files.push((path, Some(kind)));
        }
        Err(e) => {
            let reason = link_reason(&path, &e);
            walk_state.problems.push((path, reason));
        }
    }
}

/// Why `path`, whose target could not be looked at (`error`), was not read:
/// a dangling link names what it points to.
fn link_reason(path: &Path, error: &std::io::Error) -> String {
    let is_link = std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink());
    if !is_link {
        return io_reason(error);
    }
    let target = std::fs::read_link(path).map_or_else(|_| "?".into(), |t| t.display().to_string());
    if error.kind() == std::io::ErrorKind::NotFound {
        format!("is a dangling symlink (to {target}, which does not exist): not searched")
    } else {
        format!("is a symlink to {target} that cannot be followed ({error}): not searched")
    }
}

/// An I/O error as the end of "PATH ...".
fn io_reason(error: &std::io::Error) -> String {
    format!("cannot be read: {error}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dump_names_give_module_and_stage() {
        assert_eq!(
            classify("module_0000.jit_fn.cpu_after_optimizations.txt"),
            Some(("module_0000.jit_fn".into(), Stage::After))
        );
        assert_eq!(
            classify("module_0012.jit_step.sm_9.0_gpu_after_optimizations.txt"),
            Some(("module_0012.jit_step".into(), Stage::After))
        );
        assert_eq!(
            classify("module_0000.jit_fn.before_optimizations.txt"),
            Some(("module_0000.jit_fn".into(), Stage::Before))
        );
        assert_eq!(
            classify("attention.after.hlo"),
            Some(("attention".into(), Stage::After))
        );
        assert_eq!(
            classify("module_0000.jit_fn.cpu_after_optimizations-buffer-assignment.txt"),
            None
        );
        assert_eq!(classify("module_0000.jit_fn.debug_options"), None);
    }
}
