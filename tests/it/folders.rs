//! Folders: whatever under a given folder cannot be searched (a folder it
//! may not read, a symlink loop, a dangling link) is an error naming it,
//! exit 2, and the modules that could be read are still reported.

use crate::support::run_hlomem as hlomem;
use std::path::{Path, PathBuf};
use std::process::Command;

const MODULE: &str = "samples/add_nodonate/dump/module_0000.jit_fn.cpu_after_optimizations.txt";
const MODULE_NAME: &str = "module_0000.jit_fn.cpu_after_optimizations.txt";

/// A fresh folder holding one readable module.
fn dump_folder(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("hlomem-folders-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(MODULE, dir.join(MODULE_NAME)).unwrap();
    dir
}

/// `check` and `analyze` on `dir`: exit 2, an error naming `culprit` with
/// `why`, and the readable module still checked and reported beside it.
fn assert_named_error(dir: &Path, culprit: &Path, why: &str) {
    let dir = dir.to_str().unwrap();
    let name = culprit.display().to_string();
    let (code, out, err) = hlomem(&["check", dir, "--budget", "16GiB"]);
    assert_eq!(code, Some(2), "{out}\n{err}");
    assert!(
        err.contains(&name) && err.contains(why),
        "check: no error naming {name} ({why}):\n{err}"
    );
    assert!(out.contains("1 module checked"), "{out}");
    let (code, out, err) = hlomem(&["analyze", "--format", "json", dir]);
    assert_eq!(code, Some(2), "{err}");
    let json: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(json["modules"].as_array().unwrap().len(), 1, "{out}");
    assert!(err.contains(&name) && err.contains(why), "analyze: {err}");
}

#[cfg(unix)]
#[test]
fn a_symlink_back_up_is_a_loop_error() {
    let dir = dump_folder("loop");
    let link = dir.join("again");
    std::os::unix::fs::symlink(&dir, &link).unwrap();
    assert_named_error(&dir, &link, "a loop");
    std::fs::remove_dir_all(&dir).ok();
}

#[cfg(unix)]
#[test]
fn links_that_point_at_each_other_are_a_loop_error() {
    let dir = dump_folder("ping-pong");
    let (a, b) = (dir.join("a"), dir.join("b"));
    std::os::unix::fs::symlink(&b, &a).unwrap();
    std::os::unix::fs::symlink(&a, &b).unwrap();
    assert_named_error(&dir, &a, "symbolic links");
    std::fs::remove_dir_all(&dir).ok();
}

#[cfg(unix)]
#[test]
fn a_dangling_symlink_is_an_error() {
    let dir = dump_folder("dangling");
    let link = dir.join("run_3");
    std::os::unix::fs::symlink(dir.join("gone"), &link).unwrap();
    assert_named_error(&dir, &link, "dangling symlink");
    std::fs::remove_dir_all(&dir).ok();
}

/// A folder linked twice (`latest` beside the run it names) is no loop: its
/// modules are read once and nothing is an error.
#[cfg(unix)]
#[test]
fn a_folder_linked_twice_is_read_once() {
    let dir = dump_folder("twice");
    let run = dir.join("run_1");
    std::fs::create_dir(&run).unwrap();
    std::fs::copy(MODULE, run.join(MODULE_NAME)).unwrap();
    std::os::unix::fs::symlink(&run, dir.join("latest")).unwrap();
    let (code, out, err) = hlomem(&["analyze", "--format", "json", dir.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{err}");
    let json: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(json["modules"].as_array().unwrap().len(), 2, "{out}");
    std::fs::remove_dir_all(&dir).ok();
}

/// Root reads folders whatever their mode: as root, the binary runs with
/// every capability dropped (`setpriv --bounding-set=-all`), so that mode
/// 000 stops it as it stops anyone else. `None` when that cannot be done.
#[cfg(unix)]
fn without_privileges(locked: &Path) -> Option<Vec<String>> {
    if std::fs::read_dir(locked).is_err() {
        return Some(Vec::new());
    }
    let probe = Command::new("setpriv")
        .args(["--bounding-set=-all", "ls"])
        .arg(locked)
        .output()
        .ok()?;
    // `ls` failing on the folder shows that the mode now holds.
    (!probe.status.success()).then(|| vec!["setpriv".into(), "--bounding-set=-all".into()])
}

#[cfg(unix)]
#[test]
fn unreadable_folders_are_errors() {
    use std::os::unix::fs::PermissionsExt;
    let dir = dump_folder("locked");
    let locked = dir.join("sub");
    std::fs::create_dir(&locked).unwrap();
    std::fs::copy(MODULE, locked.join(MODULE_NAME)).unwrap();
    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o000)).unwrap();
    let Some(prefix) = without_privileges(&locked) else {
        std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::remove_dir_all(&dir).ok();
        println!(
            "skipped: running as root, and setpriv cannot drop the capability to read any folder"
        );
        return;
    };
    // Inside a folder given: named, and the readable module still reported.
    let (code, out, err) = crate::support::run_hlomem_behind(
        &prefix,
        &["check", dir.to_str().unwrap(), "--budget", "16GiB"],
    );
    assert_eq!(code, Some(2), "{out}\n{err}");
    let name = locked.display().to_string();
    assert!(
        err.contains(&name) && err.contains("Permission denied"),
        "{err}"
    );
    assert!(out.contains("1 module checked"), "{out}");
    // Given directly: unreadable, not "holds no HLO module".
    let (code, _, err) =
        crate::support::run_hlomem_behind(&prefix, &["analyze", locked.to_str().unwrap()]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains(&name) && err.contains("Permission denied"),
        "{err}"
    );
    assert!(!err.contains("holds no HLO module"), "{err}");
    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::remove_dir_all(&dir).ok();
}
