//! The HTML report and the SVG chart: structure, numbers equal to the JSON
//! report's, self-contained, and a real browser renders it without errors.

use std::process::Command;

fn hlomem(args: &[&str]) -> (Option<i32>, String) {
    let (code, out, _) = crate::support::run_hlomem(args);
    (code, out)
}

/// The `d` attribute of the first `<path class="{class}"`.
fn path_d<'a>(html: &'a str, class: &str) -> &'a str {
    let prefix = format!("<path class=\"{class}\" d=\"");
    let start = html.find(&prefix).expect(class) + prefix.len();
    &html[start..start + html[start..].find('"').unwrap()]
}

#[test]
fn chart_has_one_point_per_schedule_position_and_the_peak_of_the_json() {
    for sample in [
        "samples/add_nodonate/dump",
        "samples/mlp_train_donate/dump",
        "samples/while_loop/dump",
    ] {
        let (code, html) = hlomem(&["analyze", sample, "--format", "html"]);
        assert_eq!(code, Some(0));
        let (_, json) = hlomem(&["analyze", sample, "--format", "json"]);
        let json: serde_json::Value = serde_json::from_str(&json).unwrap();
        let m = &json["modules"][0];
        let buckets = m["timeline"]["buckets"].as_array().unwrap();
        // Small modules: one bucket per schedule position.
        assert_eq!(
            buckets.len() as u64,
            m["timeline"]["length"].as_u64().unwrap(),
            "{sample}"
        );
        let points = path_d(&html, "total").matches(['M', 'L']).count();
        assert_eq!(points, buckets.len(), "{sample}: one point per bucket");
        let peak = m["memory"]["live_peak_bytes"].as_u64().unwrap();
        assert!(
            html.contains(&format!("class=\"peak-label\" data-bytes=\"{peak}\"")),
            "{sample}"
        );
        let max = buckets
            .iter()
            .map(|b| b["total"].as_u64().unwrap())
            .max()
            .unwrap();
        assert_eq!(max, peak, "{sample}: the curve's maximum is the live peak");
        // Self-contained: nothing fetched.
        assert!(
            !html.contains("src=\"http") && !html.contains("<link") && !html.contains("@import")
        );
    }
    // For the motivating sample the peak is everything the module needs.
    let (_, html) = hlomem(&["analyze", "samples/add_nodonate/dump", "--format", "html"]);
    assert!(
        html.contains("class=\"peak-label\" data-bytes=\"24000000\"")
            && html.contains(">peak 22.89MiB</text>")
    );
}

/// The grouped view: per breakdown, segments whose widths are the groups'
/// shares (adding up to the whole bar), each naming its group on hover and
/// linking to the group's row; the first group is the JSON's largest.
#[test]
fn grouped_view_names_each_group_and_links_to_it() {
    let sample = "samples/flax_gpt_train/dump";
    let (code, html) = hlomem(&["analyze", sample, "--format", "html"]);
    assert_eq!(code, Some(0));
    assert!(html.len() < 2_000_000, "{} bytes", html.len());
    let (_, json) = hlomem(&["analyze", sample, "--format", "json"]);
    let json: serde_json::Value = serde_json::from_str(&json).unwrap();
    let top = &json["modules"][0]["peak"]["by_source"][0];
    for kind in ["src", "scope", "role"] {
        let mut widths = 0.0;
        let mut segments = 0;
        for seg in html.split("<a class=\"seg\" ").skip(1) {
            let Some(href) = seg.strip_prefix(&format!("href=\"#m0-{kind}-")) else {
                continue;
            };
            let id = &href[..href.find('"').unwrap()];
            assert!(
                html.contains(&format!("<tr id=\"m0-{kind}-{id}\">")),
                "{kind}-{id} has a row"
            );
            let width = &seg[seg.find("width:").unwrap() + 6..];
            widths += width[..width.find('%').unwrap()].parse::<f64>().unwrap();
            assert!(seg.contains("title=\""), "{kind}: hover names the group");
            segments += 1;
        }
        assert!(segments > 0, "{kind}");
        assert!(widths <= 100.01, "{kind}: {widths}");
    }
    let first = html.split("href=\"#m0-src-0\"").nth(1).unwrap();
    let title = &first[first.find("title=\"").unwrap() + 7..];
    let title = &title[..title.find('"').unwrap()];
    let line = top["source"].as_str().unwrap().rsplit('/').next().unwrap();
    assert!(title.contains(line), "{title} names {line}");
    // Both axes are labelled with units.
    assert!(html.contains("class=\"ytick\"") && html.contains("class=\"xtick\""));
    assert!(html.contains("bytes live in device memory, over the execution steps"));
}

/// The text report of a real training step fits a screen or two, and the
/// groups come before the findings.
#[test]
fn text_report_of_a_training_step_is_short() {
    let (code, text) = hlomem(&["analyze", "samples/flax_gpt_train/dump"]);
    assert_eq!(code, Some(0));
    assert!(
        text.lines().count() <= 150,
        "{} lines",
        text.lines().count()
    );
    let groups = text.find("what holds the live peak").unwrap();
    assert!(groups < text.find("findings (").unwrap());
    // One finding per argument, not per leaf: the 75 arrays of `opt_state` are one HM001.
    assert_eq!(
        text.matches("argument `opt_state` is not donated").count(),
        1
    );
    let (_, verbose) = hlomem(&["analyze", "samples/flax_gpt_train/dump", "--verbose"]);
    assert!(verbose.lines().count() > text.lines().count() + 200);
}

#[test]
fn svg_chart_alone() {
    let out = std::env::temp_dir().join(format!("hlomem-chart-{}.svg", std::process::id()));
    let (code, _) = hlomem(&[
        "analyze",
        "samples/mlp_train_donate/dump",
        "--svg",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(0));
    let svg = std::fs::read_to_string(&out).unwrap();
    std::fs::remove_file(&out).ok();
    assert!(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
    assert!(svg.contains("class=\"total\"") && svg.contains("class=\"peak-label\""));
}

/// Headless Chromium (Debian's package; `.ci/run` installs it) opens the page,
/// its script runs to the end (it marks the body `data-ready`), and a
/// screenshot is taken.
#[test]
fn a_browser_renders_the_report() {
    let Some(chromium) = ["chromium", "chromium-browser", "google-chrome"]
        .into_iter()
        .find(|c| {
            Command::new("which")
                .arg(c)
                .output()
                .is_ok_and(|o| o.status.success())
        })
    else {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must have chromium (.ci/run installs it)"
        );
        eprintln!("skipped: no chromium on this machine");
        return;
    };
    let dir = std::env::temp_dir().join(format!("hlomem-browser-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let page = dir.join("report.html");
    let (code, _) = hlomem(&["analyze", "samples", "--html", page.to_str().unwrap()]);
    assert_eq!(code, Some(0));
    let args = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--window-size=1200,1000",
    ];
    let profile = format!("--user-data-dir={}", dir.join("profile").display());
    let url = format!("file://{}", page.display());
    let dom = Command::new(chromium)
        .args(args)
        .arg(&profile)
        .arg("--dump-dom")
        .arg(&url)
        .output()
        .unwrap();
    let dom = String::from_utf8_lossy(&dom.stdout);
    assert!(
        dom.contains("data-ready=\"1\""),
        "the page's script did not finish:\n{}",
        &dom[..dom.len().min(500)]
    );
    assert!(dom.contains("class=\"peak-label\""));
    // The grouped view at the peak is in the rendered page too.
    assert!(dom.contains("class=\"stack\"") && dom.contains("class=\"seg\""));
    let shot = dir.join("shot.png");
    let status = Command::new(chromium)
        .args(args)
        .arg(&profile)
        .arg(format!("--screenshot={}", shot.display()))
        .arg(&url)
        .output()
        .unwrap();
    assert!(status.status.success() || shot.exists());
    assert!(
        std::fs::metadata(&shot).map(|m| m.len()).unwrap_or(0) > 10_000,
        "empty screenshot"
    );
    std::fs::remove_dir_all(&dir).ok();
}
