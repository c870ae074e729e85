//! The HTML report and the SVG chart: structure, numbers equal to the JSON
//! report's, self-contained, and a real browser renders it without errors.

use std::path::{Path, PathBuf};
use std::process::Command;

use hlomem::units::human_bytes;

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

/// The first peak label's bytes and text.
fn peak_label(html: &str) -> (u64, String) {
    let label = &html[html
        .find("<text class=\"peak-label\"")
        .expect("a peak label")..];
    let label = &label[..label.find("</text>").unwrap()];
    let bytes = label.split("data-bytes=\"").nth(1).unwrap();
    let bytes = bytes[..bytes.find('"').unwrap()].parse().unwrap();
    (bytes, label[label.find('>').unwrap() + 1..].to_string())
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
        assert_eq!(
            peak_label(&html),
            (peak, format!("peak {}", human_bytes(peak))),
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
    assert_eq!(peak_label(&html), (24000000, "peak 22.89MiB".into()));
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

/// `--budget` draws a line labelled with the budget in XLA's size format:
/// on the plot when it is at most twice the peak (the axis then reaches
/// it), above the plot when further up; analyze's other formats ignore it
/// and say so.
#[test]
fn budget_line_on_the_chart() {
    let sample = "samples/flax_gpt_train/dump"; // live peak 14.79MiB
    for (budget, bytes, line, label) in [
        ("12MiB", 12u64 << 20, true, ">budget 12.00MiB</text>"),
        ("16MiB", 16 << 20, true, ">budget 16.00MiB</text>"),
        (
            "16GiB",
            16 << 30,
            false,
            ">budget 16.00GiB (above this scale)</text>",
        ),
    ] {
        let (code, html) = hlomem(&["analyze", sample, "--format", "html", "--budget", budget]);
        assert_eq!(code, Some(0));
        assert!(
            html.contains("class=\"budget-label\"") && html.contains(label),
            "{budget}"
        );
        assert!(
            html.contains(&format!("data-bytes=\"{bytes}\"")),
            "{budget}"
        );
        assert_eq!(html.contains("<line class=\"budget\""), line, "{budget}");
        // The bytes axis reaches a budget above the peak (at most twice it).
        assert_eq!(
            html.contains(">16.00MiB</text>"),
            budget == "16MiB",
            "{budget}"
        );
    }
    let (_, plain) = hlomem(&["analyze", sample, "--format", "html"]);
    assert!(!plain.contains("budget-label") && !plain.contains("class=\"budget\""));
    let out = std::env::temp_dir().join(format!("hlomem-budget-{}.svg", std::process::id()));
    let (code, _) = hlomem(&[
        "analyze",
        sample,
        "--budget",
        "16GiB",
        "--svg",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(0));
    let svg = std::fs::read_to_string(&out).unwrap();
    std::fs::remove_file(&out).ok();
    assert!(svg.contains(">budget 16.00GiB (above this scale)</text>"));
    let (code, _, err) = crate::support::run_hlomem(&["analyze", sample, "--budget", "16"]);
    assert_eq!(code, Some(2));
    assert!(
        err.contains("--budget") && err.contains("did you mean 16GiB"),
        "{err}"
    );
    let (code, _, err) = crate::support::run_hlomem(&["analyze", sample, "--budget", "16GiB"]);
    assert_eq!(code, Some(0));
    assert!(
        err.contains("drawn on the HTML and SVG charts only"),
        "{err}"
    );
}

/// Headless Chromium (Debian's package; `.ci/run` installs it), or `None`
/// off CI on a machine without it.
fn chromium() -> Option<&'static str> {
    let found = ["chromium", "chromium-browser", "google-chrome"]
        .into_iter()
        .find(|c| {
            Command::new("which")
                .arg(c)
                .output()
                .is_ok_and(|o| o.status.success())
        });
    if found.is_none() {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must have chromium (.ci/run installs it)"
        );
        eprintln!("skipped: no chromium on this machine");
    }
    found
}

/// Where the screenshots go, kept after the run: `target/tmp/html-screenshots/`.
fn screenshots() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("html-screenshots");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The test's script, which measures the page in the browser (`html_check.js`).
const CHECK: &str = include_str!("html_check.js");
/// What Jupyter and VS Code impose on an HTML output (`notebook.css`).
const NOTEBOOK_CSS: &str = include_str!("notebook.css");

struct Browser {
    bin: &'static str,
    dir: PathBuf,
}

impl Browser {
    fn new(name: &str) -> Option<Browser> {
        let bin = chromium()?;
        let dir = std::env::temp_dir().join(format!("hlomem-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        Some(Browser { bin, dir })
    }

    /// Writes `html` with the test's script before `</body>`.
    fn page(&self, name: &str, html: &str) -> PathBuf {
        let at = html.rfind("</body>").expect("a whole page");
        let page = self.dir.join(name);
        let with = format!("{}<script>{CHECK}</script>{}", &html[..at], &html[at..]);
        std::fs::write(&page, with).unwrap();
        page
    }

    fn run(&self, page: &Path, width: u32, mode: &str, what: &str) -> std::process::Output {
        Command::new(self.bin)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--force-device-scale-factor=1",
            ])
            .arg(format!("--window-size={width},900"))
            .arg(format!(
                "--user-data-dir={}",
                self.dir.join("profile").display()
            ))
            .arg(what)
            .arg(format!("file://{}#{mode}", page.display()))
            .output()
            .unwrap()
    }

    /// What the test's script found (`mode`: `check`), the window `width` wide.
    fn measure(&self, page: &Path, width: u32, mode: &str) -> serde_json::Value {
        let dom = self.run(page, width, mode, "--dump-dom");
        let dom = String::from_utf8_lossy(&dom.stdout);
        assert!(
            mode == "static" || dom.contains("data-ready=\"1\""),
            "the report's script did not finish:\n{}",
            &dom[..dom.len().min(500)]
        );
        let json = dom
            .split("<pre id=\"hlomem-test\" hidden=\"\">")
            .nth(1)
            .and_then(|rest| rest.split("</pre>").next())
            .expect("the test's script wrote its result");
        let json = json
            .replace("&lt;", "<")
            .replace("&gt;", ">")
            .replace("&amp;", "&");
        serde_json::from_str(&json).expect("JSON")
    }

    /// A screenshot, 900 high, into [`screenshots`]; its path is printed.
    fn screenshot(&self, page: &Path, width: u32, mode: &str, name: &str) -> PathBuf {
        let shot = screenshots().join(name);
        std::fs::remove_file(&shot).ok();
        self.run(
            page,
            width,
            mode,
            &format!("--screenshot={}", shot.display()),
        );
        let size = std::fs::metadata(&shot).map(|m| m.len()).unwrap_or(0);
        assert!(size > 10_000, "{}: empty screenshot", shot.display());
        println!("screenshot: {}", shot.display());
        shot
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        std::fs::remove_dir_all(&self.dir).ok();
    }
}

/// No problem the test's script found, after it measured enough labels.
fn assert_clean(result: &serde_json::Value, what: &str) {
    let problems = result["problems"].as_array().unwrap();
    assert!(
        problems.is_empty(),
        "{what}: {} problems, the first:\n{}",
        problems.len(),
        problems
            .iter()
            .take(12)
            .map(|p| p.as_str().unwrap_or_default())
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert!(result["states"].as_u64().unwrap() > 20, "{what}: {result}");
    assert!(result["texts"].as_u64().unwrap() > 500, "{what}: {result}");
}

/// The report of every sample, with a budget that is below some modules'
/// peak, above others' and far above the smallest (three places for its
/// label), in a real browser at 1400x900 and 800 wide: no two labels of
/// any chart overlap or leave it, in every module, as drawn and after
/// zooming, panning and resetting (html_check.js drives them with the
/// events a user's wheel and mouse make); without the report's script,
/// every module is shown, as drawn. Screenshots of both widths and of a
/// zoomed chart go to target/tmp/html-screenshots/.
#[test]
fn a_browser_shows_every_chart_without_overlapping_labels() {
    let Some(browser) = Browser::new("browser") else {
        return;
    };
    let html = browser.dir.join("report.html");
    let (code, _) = hlomem(&[
        "analyze",
        "samples",
        "--budget",
        "4MiB",
        "--html",
        html.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(0));
    let html = std::fs::read_to_string(&html).unwrap();
    // The budget's line on peaks above it, the axis reaching it on peaks
    // up to half of it, above the plot on the smallest.
    assert!(html.contains("class=\"budget\"") && html.contains("(above this scale)"));
    assert!(html.contains(">4.00MiB</text>"));
    let page = browser.page("report.html", &html);
    for width in [1400, 800] {
        let result = browser.measure(&page, width, "check");
        assert_clean(&result, &format!("{width} wide"));
        assert_eq!(result["ready"], 1);
        browser.screenshot(&page, width, "", &format!("report-{width}.png"));
    }
    // Without the report's script (JavaScript off, or a notebook that does
    // not run it): every module shown, the charts as drawn, no controls
    // that would do nothing.
    let at = html
        .find("<script>(function () {")
        .expect("the report's script");
    let end = at + html[at..].find("</script>").unwrap() + "</script>".len();
    let stripped = browser.page("static.html", &format!("{}{}", &html[..at], &html[end..]));
    let result = browser.measure(&stripped, 800, "static");
    assert!(
        result["problems"].as_array().unwrap().is_empty(),
        "{result}"
    );
    let sections = result["sections"].as_u64().unwrap();
    assert!(sections > 10, "{result}");
    assert_eq!(result["visibleCharts"].as_u64(), Some(sections), "{result}");
    assert_eq!(result["zoombars"], 0);
    let zoomed = browser.measure(&page, 1400, "zoom");
    assert!(
        zoomed["problems"].as_array().unwrap().is_empty(),
        "{zoomed}"
    );
    assert!(!zoomed["shown"].as_str().unwrap().is_empty(), "{zoomed}");
    browser.screenshot(&page, 1400, "zoom", "report-zoomed-1400.png");
}

/// Two reports as a notebook shows them (`_repr_html_`: the page's body) in
/// outputs styled as JupyterLab, the classic notebook and VS Code style
/// them (notebook.css: cells right-aligned, wrapped, padded, rows striped):
/// every element of the report has the computed style it has on the
/// command's page, the notebook's own table beside it keeps the notebook's
/// style, both reports run their script with ids of their own, and no
/// chart label overlaps another. Screenshots at 1400 and 800 wide.
#[test]
fn a_notebook_shows_the_report_as_the_page_does() {
    let Some(browser) = Browser::new("notebook") else {
        return;
    };
    let (code, first) = hlomem(&["analyze", "samples", "--format", "html", "--budget", "4MiB"]);
    assert_eq!(code, Some(0));
    let (code, second) = hlomem(&["analyze", "samples/flax_gpt_train/dump", "--format", "html"]);
    assert_eq!(code, Some(0));
    let body = |page: &str| {
        let start = page.find("<body>").unwrap() + "<body>".len();
        page[start..page.rfind("</body>").unwrap()]
            .trim()
            .to_string()
    };
    let output = |prompt: u32, html: &str| {
        format!(
            "<div class=\"jp-Cell jp-CodeCell\"><div class=\"jp-OutputArea\"><div class=\"jp-OutputArea-child\">\
             <div class=\"jp-OutputPrompt\">[{prompt}]:</div>\
             <div class=\"jp-RenderedHTMLCommon jp-RenderedHTML jp-OutputArea-output rendered_html\" \
             data-mime-type=\"text/html\">{html}</div></div></div></div>"
        )
    };
    let notebook = format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><style>{NOTEBOOK_CSS}</style></head>\
         <body><div class=\"jp-Notebook\">{}{}{}</div></body></html>",
        output(
            1,
            "<table class=\"outside\"><tr><td>a notebook's own table</td><td>1.0</td></tr>\
             <tr><td>its cells right-aligned</td><td>22.5</td></tr></table>"
        ),
        output(2, &body(&first)),
        output(3, &body(&second)),
    );
    let standalone = browser.page("page.html", &first);
    let page = browser.page("notebook.html", &notebook);
    let expected = browser.measure(&standalone, 1400, "check");
    assert_clean(&expected, "the page");
    for width in [1400, 800] {
        let result = browser.measure(&page, width, "check");
        assert_clean(&result, &format!("the notebook, {width} wide"));
        assert_eq!(result["ready"], 2, "both reports ran their script");
        assert_eq!(result["duplicateIds"], serde_json::json!([]));
        assert_eq!(
            result["outsideAlign"], "right",
            "the report's CSS left the notebook's table alone"
        );
        browser.screenshot(&page, width, "", &format!("notebook-{width}.png"));
        if width == 1400 {
            let (want, got) = (
                expected["signature"].as_array().unwrap(),
                result["signature"].as_array().unwrap(),
            );
            assert_eq!(want.len(), got.len());
            let differ: Vec<String> = want
                .iter()
                .zip(got)
                .filter(|(w, g)| w != g)
                .map(|(w, g)| format!("page:     {w}\nnotebook: {g}"))
                .collect();
            assert!(
                differ.is_empty(),
                "{} elements styled otherwise in the notebook, the first:\n{}",
                differ.len(),
                differ
                    .iter()
                    .take(6)
                    .cloned()
                    .collect::<Vec<_>>()
                    .join("\n")
            );
        }
    }
}
