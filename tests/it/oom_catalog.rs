//! The catalog of out-of-memory phrasings (`tests/oom_catalog/`, one file per
//! phrasing, each naming the source that prints it): every phrasing is
//! recognized with its numbers exact, and so are its wrapped, escaped, quoted,
//! CRLF and multi-message variants.
//!
//! A file is `# phrasing:`, `# source:`, `# seen:`, `# expect: key=value ...`
//! lines, then the message. A value `N~` is a rounded size read as the nearest
//! byte N and marked approximate; `N` is exact.

use std::path::PathBuf;

use hlomem::oom::{self, Amount, OomMessage};

struct Entry {
    name: String,
    expect: Vec<(String, String)>,
    text: String,
}

fn catalog() -> Vec<Entry> {
    crate::support::text_files("tests/oom_catalog")
        .into_iter()
        .map(|path| {
            let content = std::fs::read_to_string(&path).unwrap();
            let name = path.file_stem().unwrap().to_string_lossy().into_owned();
            let mut expect = Vec::new();
            let mut text = String::new();
            let mut headers = ["# phrasing: ", "# source: ", "# seen: "].map(|_| false);
            for line in content.lines() {
                if let Some(rest) = line.strip_prefix("# expect: ") {
                    for pair in rest.split_whitespace() {
                        let (k, v) = pair.split_once('=').expect("key=value");
                        expect.push((k.to_string(), v.to_string()));
                    }
                } else if let Some(i) = ["# phrasing: ", "# source: ", "# seen: "]
                    .iter()
                    .position(|p| line.starts_with(p))
                {
                    headers[i] = true;
                } else {
                    text.push_str(line);
                    text.push('\n');
                }
            }
            assert!(headers.iter().all(|h| *h), "{name}: a header is missing");
            assert!(!expect.is_empty(), "{name}: no expectations");
            Entry { name, expect, text }
        })
        .collect()
}

fn amount(a: Option<Amount>) -> Option<String> {
    a.map(|a| format!("{}{}", a.bytes, if a.approximate { "~" } else { "" }))
}

/// What the message says for one expectation key, as the catalog writes it.
fn value(msg: &OomMessage, key: &str) -> Option<String> {
    let t = msg.tpu.clone().unwrap_or_default();
    let scoped = t.scoped;
    let warning = |pick: fn(&oom::model::Warning) -> Option<u64>| {
        msg.warnings.iter().find_map(pick).map(|b| b.to_string())
    };
    match key {
        "format" => Some(msg.format.name().to_string()),
        "requested" => amount(msg.requested),
        "host" => Some(msg.host.to_string()),
        "allocator" => msg.allocator.clone(),
        "device" => msg.device.clone(),
        "driver_error" => msg.driver_error.clone(),
        "not_a_failure" => Some(msg.not_a_failure.to_string()),
        "space" => t.memory_space,
        "used" => amount(t.used),
        "capacity" => amount(t.capacity),
        "exceeded_by" => amount(t.exceeded_by),
        "free" => amount(t.free),
        "reserved" => amount(t.reserved),
        "reservable" => amount(t.reservable),
        "largest_free" => amount(t.largest_free_region),
        "scoped_size" => amount(scoped.and_then(|s| s.size)),
        "scoped_limit" => amount(scoped.and_then(|s| s.limit)),
        "scoped_over" => amount(scoped.and_then(|s| s.exceeded_by)),
        "stack_instruction" => t.stack_instruction,
        "custom_kernel" => Some(t.custom_kernel.to_string()),
        "requires" => amount(t.requires),
        "available" => amount(t.available),
        "sparse_core" => amount(t.sparse_core),
        "total" => amount(msg.stats.total),
        "device_total" => amount(msg.device_total),
        "device_free" => amount(msg.device_free),
        "library" => msg.library.map(|l| l.name().to_string()),
        "library_status" => msg.library_status.clone(),
        // Written with `_` for its space (`GPU_0`): expectations split on spaces.
        "replica" => msg.replica.as_ref().map(|r| r.replace(' ', "_")),
        "unified" => Some(msg.unified.to_string()),
        "buffers" => Some(msg.peak_buffers.len().to_string()),
        "remat_limit" => warning(|w| match w {
            oom::model::Warning::Rematerialization { limit_bytes, .. } => *limit_bytes,
            _ => None,
        }),
        "remat_reached" => warning(|w| match w {
            oom::model::Warning::Rematerialization { reached_bytes, .. } => *reached_bytes,
            _ => None,
        }),
        "remat_original" => warning(|w| match w {
            oom::model::Warning::Rematerialization { original_bytes, .. } => *original_bytes,
            _ => None,
        }),
        "args_bytes" => warning(|w| match w {
            oom::model::Warning::ArgumentsExceedLimit { argument_bytes, .. } => *argument_bytes,
            _ => None,
        }),
        "args_limit" => warning(|w| match w {
            oom::model::Warning::ArgumentsExceedLimit { limit_bytes, .. } => *limit_bytes,
            _ => None,
        }),
        "problems" => {
            let kinds: Vec<String> = oom::checks::problems(msg)
                .iter()
                .map(|p| {
                    serde_json::to_value(p).unwrap()["kind"]
                        .as_str()
                        .unwrap()
                        .to_string()
                })
                .collect();
            Some(kinds.join(","))
        }
        other => panic!("unknown expectation key {other}"),
    }
}

/// Keys that are the message's numbers and kind: what must survive any
/// wrapping (a name or shape cut by a wrap at a fixed column is not rejoined).
fn numeric(key: &str) -> bool {
    !matches!(
        key,
        "stack_instruction"
            | "custom_kernel"
            | "allocator"
            | "device"
            | "driver_error"
            | "library_status"
            | "replica"
    )
}

/// Checks the leading message of `text` against the entry; `what` names the variant.
fn check(entry: &Entry, text: &str, what: &str, keys: fn(&str) -> bool) {
    let all = oom::read_all(text);
    let expected_count: usize = entry
        .expect
        .iter()
        .find(|(k, _)| k == "messages")
        .map_or(1, |(_, v)| v.parse().unwrap());
    assert_eq!(
        all.len(),
        expected_count,
        "{} ({what}): {} messages in\n{text}",
        entry.name,
        all.len()
    );
    let msg = oom::read(text).unwrap_or_else(|| panic!("{} ({what}): not recognized", entry.name));
    for (key, want) in entry
        .expect
        .iter()
        .filter(|(k, _)| k != "messages" && keys(k))
    {
        assert_eq!(
            value(&msg, key).as_deref(),
            Some(want.as_str()),
            "{} ({what}): {key} in\n{text}",
            entry.name
        );
    }
}

/// The first line that carries the message's headline.
fn headline(text: &str) -> usize {
    text.lines()
        .position(|l| {
            let l = l.to_lowercase();
            [
                "memory",
                "allocat",
                "byte size",
                "usage",
                "handle",
                "calloc",
            ]
            .iter()
            .any(|w| l.contains(w))
        })
        .expect("a headline")
}

fn replace_line(text: &str, index: usize, with: &str) -> String {
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    lines[index] = with.to_string();
    lines.join("\n") + "\n"
}

#[test]
fn every_phrasing_is_read_with_its_numbers() {
    let entries = catalog();
    assert!(entries.len() >= 30, "the catalog lost entries");
    for e in &entries {
        check(e, &e.text, "as printed", |_| true);
    }
}

#[test]
fn escaped_quoted_and_prefixed_variants_read_the_same() {
    for e in &catalog() {
        let crlf = e.text.replace('\n', "\r\n");
        check(e, &crlf, "CRLF", |_| true);
        let json = format!(
            "{{\"severity\": \"ERROR\", \"message\": {}}}\n",
            serde_json::to_string(&e.text).unwrap()
        );
        check(e, &json, "in a JSON log", |_| true);
        // A Python repr of the exception, and a repr of that repr.
        let repr = e
            .text
            .replace('\\', "\\\\")
            .replace('\n', "\\n")
            .replace('\'', "\\'");
        check(
            e,
            &format!("XlaRuntimeError('{repr}')\n"),
            "Python repr",
            |_| true,
        );
        let repr2 = repr.replace('\\', "\\\\");
        check(e, &format!("'{repr2}'\n"), "repr of a repr", |_| true);
        let quoted: String = e.text.lines().map(|l| format!("> {l}\n")).collect();
        check(e, &quoted, "quoted", |_| true);
        let prefixed: String = e
            .text
            .lines()
            .map(|l| format!("I0309 12:51:51.372677 140505975940928 run_docker.py:247] {l}\n"))
            .collect();
        check(e, &prefixed, "log prefix on every line", |_| true);
    }
}

#[test]
fn wrapped_at_any_column_reads_the_same() {
    for e in &catalog() {
        let at = headline(&e.text);
        let line = e.text.lines().nth(at).unwrap().to_string();
        // A terminal or log viewer: a hard break every `width` characters,
        // mid-word and mid-number.
        for width in [13, 17, 29, 40, 61, 80] {
            if line.len() <= width {
                continue;
            }
            let chars: Vec<char> = line.chars().collect();
            let wrapped: Vec<String> = chars.chunks(width).map(|c| c.iter().collect()).collect();
            let text = replace_line(&e.text, at, &wrapped.join("\n"));
            check(e, &text, &format!("wrapped at column {width}"), numeric);
        }
        // A person: one space of the headline becomes a line break, wherever it is.
        for (i, _) in line.match_indices(' ') {
            let text = replace_line(&e.text, at, &format!("{}\n{}", &line[..i], &line[i + 1..]));
            check(e, &text, &format!("broken at byte {i}"), numeric);
        }
    }
}

#[test]
fn two_messages_in_one_log_are_each_read() {
    let entries = catalog();
    let single_errors: Vec<&Entry> = entries
        .iter()
        .filter(|e| {
            let all = oom::read_all(&e.text);
            all.len() == 1 && all[0].is_error()
        })
        .collect();
    for pair in single_errors.windows(2) {
        let (a, b) = (pair[0], pair[1]);
        let text = format!("{}\nsome other output\n{}", a.text, b.text);
        let all = oom::read_all(&text);
        assert_eq!(all.len(), 2, "{} + {}:\n{text}", a.name, b.name);
        let alone = |t: &str| serde_json::to_value(oom::read_all(t)).unwrap();
        assert_eq!(
            serde_json::to_value(&all[..1]).unwrap(),
            alone(&a.text),
            "{} + {}: the first lost or gained something",
            a.name,
            b.name
        );
        assert_eq!(
            serde_json::to_value(&all[1..]).unwrap(),
            alone(&b.text),
            "{} + {}: the second lost or gained something",
            a.name,
            b.name
        );
        // The first error leads.
        assert_eq!(
            serde_json::to_value(oom::read(&text)).unwrap(),
            alone(&a.text)[0],
            "{} + {}: the first does not lead",
            a.name,
            b.name
        );
    }
}

#[test]
fn the_same_error_printed_twice_is_one_message() {
    let e = catalog()
        .into_iter()
        .find(|e| e.name.ends_with("gpu_buffer_assignment"))
        .unwrap();
    // A log line with the whole message, then the traceback's one line.
    let first_line = e.text.lines().next().unwrap();
    let text = format!(
        "{}\nTraceback (most recent call last):\n{first_line}\n",
        e.text
    );
    check(&e, &text, "then its first line again", |_| true);
}

/// No advice contradicts what the message shows, for every phrasing and every sample.
#[test]
fn advice_never_contradicts_the_message() {
    use hlomem::oom::advice::Advice;
    use hlomem::oom::feasibility::Feasibility;
    use hlomem::oom::situation::Workload;
    let mut texts: Vec<(String, String)> =
        catalog().into_iter().map(|e| (e.name, e.text)).collect();
    for entry in
        std::fs::read_dir(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("samples/oom")).unwrap()
    {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|x| x == "txt") {
            texts.push((
                path.display().to_string(),
                std::fs::read_to_string(&path).unwrap(),
            ));
        }
    }
    for (name, text) in texts {
        let log = oom::read_log(&text);
        for (msg, e) in log.messages.iter().zip(oom::explain_log(&log, None)) {
            let kinds: Vec<&Advice> = e.advice.iter().map(|r| &r.advice).collect();
            let has = |f: fn(&Advice) -> bool| kinds.iter().any(|a| f(a));
            let t = msg.tpu.clone().unwrap_or_default();
            let on_chip =
                matches!(t.memory_space.as_deref(), Some("vmem" | "smem")) || t.scoped.is_some();
            if on_chip {
                assert!(
                    !has(|a| matches!(
                        a,
                        Advice::Shard { .. }
                            | Advice::SmallerBatch { .. }
                            | Advice::Rematerialize { .. }
                    )),
                    "{name}: device-wide advice for on-chip memory: {kinds:?}"
                );
            }
            if matches!(
                msg.format.name(),
                "tpu-runtime-reserve" | "tpu-runtime-allocate" | "gpu-driver"
            ) || msg.host
            {
                assert!(
                    !has(
                        |a| matches!(a, Advice::Shard { replicated_on } if replicated_on.is_empty())
                    ),
                    "{name}: sharding does not free run-time room: {kinds:?}"
                );
            }
            if msg.host {
                assert!(
                    !has(|a| matches!(
                        a,
                        Advice::Rematerialize { .. }
                            | Advice::PoolFraction { raise: true, .. }
                            | Advice::DonateMatchingInput { .. }
                    )),
                    "{name}: device advice for host memory: {kinds:?}"
                );
            }
            if !e.problems.is_empty()
                && matches!(
                    e.verdict,
                    hlomem::oom::verdict::Verdict::ShapeMistake { .. }
                )
            {
                assert!(
                    matches!(kinds.first(), Some(Advice::CheckShapes { .. })),
                    "{name}: a shape mistake must lead: {kinds:?}"
                );
                assert!(
                    !has(|a| matches!(a, Advice::SmallerBatch { .. } | Advice::Shard { .. })),
                    "{name}: advice computed from an impossible size: {kinds:?}"
                );
            }
            if matches!(e.situation.workload, Workload::Inference { .. }) {
                assert!(
                    !has(|a| matches!(a, Advice::Rematerialize { .. })),
                    "{name}: remat advice for a program that does not train: {kinds:?}"
                );
            }
            for a in &e.advice {
                assert!(
                    !a.advice.action(&e.situation).contains("PREALLOCATE=false"),
                    "{name}: preallocation offered as a fix"
                );
            }
            // Ranked: shape checks and bug reports, then what closes the gap,
            // then the rest; the dump last.
            let group = |r: &hlomem::oom::advice::Ranked| match (&r.advice, &r.feasibility) {
                (Advice::CheckShapes { .. } | Advice::ReportXlaBug, _) => 0,
                (_, Feasibility::Closes { .. }) => 1,
                (Advice::DumpTheProgram, _) => 3,
                _ => 2,
            };
            let groups: Vec<u8> = e.advice.iter().map(group).collect();
            let mut sorted = groups.clone();
            sorted.sort();
            assert_eq!(groups, sorted, "{name}: advice out of order: {kinds:?}");
        }
    }
}

/// A log of many thousand allocator lines without timestamps (each one could
/// be the start of a wrapped message) is read in linear time.
#[test]
fn many_message_lines_stay_linear() {
    let line = "Allocator (GPU_0_bfc) ran out of memory trying to allocate 16.00MiB with freed_by_count=0. \
                The caller indicates that this is not a failure, but may mean that there could be performance \
                gains if more memory were available.\n";
    let text = line.repeat(5_000)
        + "RESOURCE_EXHAUSTED: Out of memory while trying to allocate 1024 bytes.\n";
    let start = std::time::Instant::now();
    let all = oom::read_all(&text);
    assert!(start.elapsed().as_secs() < 30, "{:?}", start.elapsed());
    // The allocator lines are one warning; the error after them is its own message... or
    // joins them as their preamble: either way the error leads.
    assert_eq!(
        oom::read(&text).unwrap().requested,
        Some(Amount::exact(1024))
    );
    assert!(!all.is_empty());
}

/// The wraps seen in real pastes, as the issue lists them.
#[test]
fn wraps_seen_in_real_pastes() {
    let read = |t: &str| oom::read(t).unwrap_or_else(|| panic!("not recognized:\n{t}"));
    let m = read("XlaRuntimeError: RESOURCE_EXHAUSTED: Out \n of memory while trying to allocate 14787872288 bytes.\n");
    assert_eq!(m.requested, Some(Amount::exact(14_787_872_288)));
    let m =
        read("RESOURCE_EXHAUSTED: Out of memory while trying to allocate 147\n87872288 bytes.\n");
    assert_eq!(m.requested, Some(Amount::exact(14_787_872_288)));
    let m = read("XLA:TPU compile permanent error. Ran out of memory in memory space\nhbm. Used 21.95G of 15.48G hbm. Exceeded hbm capacity by 6.47G.\n");
    let t = m.tpu.unwrap();
    assert_eq!(t.memory_space.as_deref(), Some("hbm"));
    assert_eq!(t.exceeded_by, Amount::parse_human("6.47G"));
    // A BFC allocator line on its own is the allocator's, not a TPU table row.
    let m = read("Allocator (GPU_0_bfc) ran out of memory trying to allocate 9.54GiB (rounded to 10240000000)requested by op\n");
    assert_eq!(m.format.name(), "gpu-bfc-allocator");
    assert_eq!(m.requested, Some(Amount::exact(10_240_000_000)));
}

/// An error printed once short and once with its numbers is one message, read
/// with the numbers (the short one must not lead with nothing to say).
#[test]
fn a_short_copy_of_an_error_joins_the_full_one() {
    let text = "E0101 00:00:00.0 1 tpu.cc:1] Ran out of memory in memory space hbm.\n\
                Traceback (most recent call last):\n\
                jax.errors.JaxRuntimeError: RESOURCE_EXHAUSTED: Ran out of memory in memory space hbm. Used 21.95G of 15.48G hbm.\n";
    let all = oom::read_all(text);
    assert_eq!(all.len(), 1, "{all:?}");
    assert_eq!(
        all[0].tpu.as_ref().unwrap().used,
        Amount::parse_human("21.95G")
    );
}
