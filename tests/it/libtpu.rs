//! The libtpu release that compiled a TPU module, which its HBM figure may
//! depend on: the same program printed the same text under libtpu 0.0.42 and
//! 0.0.52, and XLA's buffer assignment gave 616,960 and 633,344 bytes of HBM
//! (`tests/tpu_libtpu_release/README.md`). hlomem reads the release from the
//! text, the dump's flag file or `--libtpu`, and where none says, gives both
//! figures, "about".

use std::path::{Path, PathBuf};

use hlomem::chip::TpuVersion;

/// XLA's HBM (default space) figure under each release.
const HBM_0_0_42: u64 = 616_960;
const HBM_0_0_52: u64 = 633_344;

fn module(release: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(format!(
        "tests/tpu_libtpu_release/module_libtpu_{release}.txt"
    ))
}

/// The module of `release` with every `backend_config` removed: a text that
/// shows neither release's way of writing them.
fn without_backend_configs(release: &str) -> String {
    let text = std::fs::read_to_string(module(release)).unwrap();
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        out.push_str(match line.find(", backend_config={") {
            Some(at) => &line[..at],
            None => line,
        });
        out.push('\n');
    }
    assert!(!out.contains("backend_config"));
    out
}

/// HBM's (bytes, exact), and the JSON estimates' kinds, of `path` analyzed as v4.
fn hbm(path: &Path, libtpu: Option<bool>) -> (u64, bool, Vec<String>) {
    let options = hlomem::AnalyzeOptions {
        tpu_version: Some(TpuVersion::V4),
        libtpu,
        ..Default::default()
    };
    let report = hlomem::analyze_paths(&[path.to_path_buf()], options);
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    let memory = &report.modules[0].memory;
    let space = memory.by_space.iter().find(|s| s.color == 0).unwrap();
    let json = serde_json::to_value(memory).unwrap();
    let kinds = json["device_estimates"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|e| e["kind"].as_str().unwrap().to_string())
                .collect()
        })
        .unwrap_or_default();
    (space.bytes, space.exact, kinds)
}

/// Each release's text, read alone, gives that release's figure, exact: the
/// order of its backend configs' keys tells which compiled it.
#[test]
fn each_release_is_read_from_the_text() {
    assert_eq!(hbm(&module("0.0.42"), None), (HBM_0_0_42, true, vec![]));
    assert_eq!(hbm(&module("0.0.52"), None), (HBM_0_0_52, true, vec![]));
}

/// A text that does not show its release: 0.0.42's figure, "about", with
/// 0.0.52's beside it in the estimate; naming the release makes it exact.
#[test]
fn an_unshown_release_gives_both_figures_about() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("module.after_optimizations.txt");
    std::fs::write(&path, without_backend_configs("0.0.52")).unwrap();

    let (bytes, exact, kinds) = hbm(&path, None);
    assert_eq!((bytes, exact), (HBM_0_0_42, false));
    assert_eq!(kinds, vec!["libtpu-assumed".to_string()]);
    let report = hlomem::analyze_paths(
        std::slice::from_ref(&path),
        hlomem::AnalyzeOptions {
            tpu_version: Some(TpuVersion::V4),
            ..Default::default()
        },
    );
    let other = serde_json::to_value(&report.modules[0].memory).unwrap()["device_estimates"][0]
        ["other_figures"]["device_bytes"]
        .as_u64();
    assert_eq!(other, Some(HBM_0_0_52));

    assert_eq!(hbm(&path, Some(true)), (HBM_0_0_52, true, vec![]));
    assert_eq!(hbm(&path, Some(false)), (HBM_0_0_42, true, vec![]));
}

/// In a dump folder, the flag file names the release: 0.0.52 lists a flag
/// 0.0.42 does not have.
#[test]
fn a_dump_folder_names_the_release_in_its_flag_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("module_0000.jit_f.after_optimizations.txt");
    std::fs::write(&path, without_backend_configs("0.0.52")).unwrap();
    let flags = dir.path().join("module_0000.jit_f.flagfile");
    std::fs::write(
        &flags,
        "--xla_tpu_disable_live_out=auto\n--xla_tpu_reuse_aliased_entry_params_for_temp=auto\n",
    )
    .unwrap();
    assert_eq!(hbm(&path, None), (HBM_0_0_52, true, vec![]));
    // 0.0.42's flag file lists its flags without that one.
    std::fs::write(&flags, "--xla_tpu_disable_live_out=auto\n").unwrap();
    assert_eq!(hbm(&path, None), (HBM_0_0_42, true, vec![]));
}

/// The command line: `--libtpu` as `pip show libtpu` prints it; the text
/// report gives both figures while the release is not known; what is not a
/// version is refused (exit 2).
#[test]
fn the_command_line_names_the_release() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("module.after_optimizations.txt");
    std::fs::write(&path, without_backend_configs("0.0.42")).unwrap();
    let file = path.to_str().unwrap();
    let (code, out, _) = crate::support::run_hlomem(&["analyze", file, "--tpu", "v4"]);
    assert_eq!(code, Some(0));
    assert!(
        out.contains("82,432 B with libtpu 0.0.42, 98,816 B with 0.0.52 (--libtpu sets it)"),
        "{out}"
    );
    let (code, out, _) =
        crate::support::run_hlomem(&["analyze", file, "--tpu", "v4", "--libtpu", "0.0.52"]);
    assert_eq!(code, Some(0));
    assert!(!out.contains("libtpu"), "{out}");
    let (code, _, err) = crate::support::run_hlomem(&["analyze", file, "--libtpu", "latest"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("is not a libtpu version"), "{err}");
}

/// Releases whose rules hlomem knows; another reads as not named.
#[test]
fn versions_as_pip_prints_them() {
    use hlomem::chip::libtpu_rules;
    assert_eq!(libtpu_rules("0.0.42.1"), Ok(Some(false)));
    assert_eq!(libtpu_rules("0.0.42"), Ok(Some(false)));
    assert_eq!(libtpu_rules("0.0.52"), Ok(Some(true)));
    assert_eq!(libtpu_rules("0.0.47"), Ok(None));
    assert_eq!(libtpu_rules("0.0.52.dev20251201+nightly"), Ok(None));
    assert!(libtpu_rules("0.0").is_err());
    assert!(libtpu_rules("nightly").is_err());
}
