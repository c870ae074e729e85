//! Turns pasted text into the lines the grammar reads: line endings made
//! plain, messages escaped inside JSON logs or Python reprs (`\n` as two
//! characters) split back into lines, and messages wrapped by a terminal, a log
//! viewer or a person joined again.
//!
//! Joining needs to know what a message is, so the caller passes `reach`:
//! where the messages of a line start and end. A line is joined with the
//! following ones only when it mentions a message, they do not start log
//! records of their own, and in the joined text a message that starts on the
//! first line reads into the last: complete messages and unrelated lines are
//! not glued together.

/// Where the messages of a line start and end (byte offsets into the line).
pub type Reach<'a> = &'a dyn Fn(&str) -> Vec<(usize, usize)>;

/// The most lines, and characters, one message is joined from: a headline of
/// 300 characters wrapped at 13 columns takes 24 lines.
const MAX_JOINED: usize = 64;
const MAX_JOINED_CHARS: usize = 2000;
const MAX_JOINED_BEGUN: usize = 8;

/// How many characters joining may parse in one text, so that a log of many
/// thousand message-like lines stays linear; past it, lines are read as they are.
const JOIN_BUDGET: usize = 1_000_000;

/// Text at which a message can start; a line ending in the first letters of
/// one (`... RESOURCE_EXHAUSTED: Out`) may continue on the next line. These
/// are the string literals of the `anchor` rule of `grammar/oom.pest`, read
/// from the grammar when hlomem is compiled: the grammar is their one source.
pub const ANCHORS: &[&str] = &ANCHOR_LITERALS;

const OOM_GRAMMAR: &str = include_str!("../../grammar/oom.pest");
const ANCHOR_COUNT: usize = anchor_literals::<0>(OOM_GRAMMAR).1;
const ANCHOR_LITERALS: [&str; ANCHOR_COUNT] = anchor_literals::<ANCHOR_COUNT>(OOM_GRAMMAR).0;

/// The string literals of the grammar's `anchor` rule (`anchor = _{ "a" | "b" }`,
/// at the start of a line), as many as `N` holds, and how many there are. The rule may hold nothing but literals without escapes
/// joined by `|`; anything else stops the compilation, so that no anchor is
/// missed.
const fn anchor_literals<const N: usize>(grammar: &'static str) -> ([&'static str; N], usize) {
    let mut out = [""; N];
    let bytes = grammar.as_bytes();
    let head = b"\nanchor = _{";
    let mut at = 0;
    let mut found = false;
    while !found && at + head.len() <= bytes.len() {
        let mut k = 0;
        while k < head.len() && bytes[at + k] == head[k] {
            k += 1;
        }
        found = k == head.len();
        at += 1;
    }
    assert!(found, "grammar/oom.pest has no `anchor = _{{` rule");
    at += head.len() - 1;
    let mut count = 0;
    loop {
        assert!(
            at < bytes.len(),
            "grammar/oom.pest: the anchor rule is not closed"
        );
        match bytes[at] {
            b' ' | b'\n' | b'\r' | b'\t' | b'|' => at += 1,
            b'}' => break,
            b'"' => {
                let start = at + 1;
                at = start;
                while at < bytes.len() && bytes[at] != b'"' {
                    assert!(
                        bytes[at] != b'\\',
                        "grammar/oom.pest: an anchor with an escape"
                    );
                    at += 1;
                }
                assert!(
                    at < bytes.len(),
                    "grammar/oom.pest: an anchor is not closed"
                );
                if count < N {
                    let (_, tail) = bytes.split_at(start);
                    let (literal, _) = tail.split_at(at - start);
                    out[count] = match std::str::from_utf8(literal) {
                        Ok(text) => text,
                        Err(_) => panic!("grammar/oom.pest is not UTF-8"),
                    };
                }
                count += 1;
                at += 1;
            }
            _ => panic!(
                "grammar/oom.pest: the anchor rule may hold only string literals joined by |"
            ),
        }
    }
    (out, count)
}

/// The logical lines of `text`.
pub fn logical_lines(text: &str, reach: Reach) -> Vec<String> {
    // Trailing spaces stay until lines are joined: a wrap at a fixed column
    // keeps the space it broke at on the first line.
    let physical: Vec<String> = text.split(['\n', '\r']).flat_map(unescape_line).collect();
    join_wrapped(physical, reach)
        .into_iter()
        .map(|l| l.trim_end().to_string())
        .collect()
}

/// A line with escaped newlines (`...bytes.\nBufferAssignment OOM...` in a JSON
/// log, `\\n` in a repr of a repr) becomes the lines it stands for; quotes and
/// tabs escaped with it are unescaped too. Other lines are left alone: a
/// backslash in a path is not an escape.
fn unescape_line(line: &str) -> Vec<String> {
    if !line.contains("\\n") {
        return vec![line.to_string()];
    }
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        // Any run of backslashes is one level of escaping per backslash.
        while chars.peek() == Some(&'\\') {
            chars.next();
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some('r') => {}
            Some(other @ ('"' | '\'')) => out.push(other),
            Some(other) => {
                out.push('\\');
                out.push(other);
            }
            None => out.push('\\'),
        }
    }
    out.split('\n').map(str::to_string).collect()
}

/// Whether a line may be the start of a wrapped message: it contains an
/// anchor, or ends with the first letters of one (a wrap can fall anywhere).
fn mentions_message(line: &str) -> bool {
    let line = line.trim_end();
    ANCHORS.iter().any(|anchor| {
        line.contains(anchor.trim_end()) || (1..anchor.len()).any(|k| line.ends_with(&anchor[..k]))
    })
}

/// Whether `line` holds an anchor, or ends with the first letters of one that
/// `next` goes on with (as is, or after the space a wrap dropped).
fn completes_anchor(line: &str, next: &str) -> bool {
    let line = line.trim_end();
    if ANCHORS.iter().any(|a| line.contains(a.trim_end())) {
        return true;
    }
    let goes_on = |rest: &str, head: &str| {
        let n = rest.len().min(head.len());
        n > 0 && rest.as_bytes()[..n] == head.as_bytes()[..n]
    };
    ANCHORS.iter().any(|a| {
        (1..a.len()).filter(|&k| a.is_char_boundary(k)).any(|k| {
            let rest = &a[k..];
            line.ends_with(&a[..k])
                && (goes_on(rest, next)
                    || rest
                        .strip_prefix(' ')
                        .is_some_and(|r| goes_on(r, next.trim_start())))
        })
    })
}

/// A line that starts a log record or a traceback, not the rest of a wrapped
/// one: `2024-06-24 17:01:13...`, `E0309 12:51:51...`, `Traceback ...`.
fn starts_record(line: &str) -> bool {
    let b = line.as_bytes();
    let digits =
        |r: std::ops::Range<usize>| b.len() >= r.end && b[r].iter().all(u8::is_ascii_digit);
    let date = digits(0..4) && b.get(4) == Some(&b'-') && digits(5..7);
    let glog = matches!(b.first(), Some(b'I' | b'W' | b'E' | b'F'))
        && digits(1..5)
        && b.get(5) == Some(&b' ');
    date || glog
        || ["Traceback", "During handling", "The above exception"]
            .iter()
            .any(|p| line.starts_with(p))
}

/// A `> ` quote marker that a wrapped continuation repeats.
fn strip_quote<'a>(line: &'a str, first: &str) -> &'a str {
    if first.trim_start().starts_with('>') {
        let t = line.trim_start();
        t.strip_prefix("> ")
            .or_else(|| t.strip_prefix('>'))
            .unwrap_or(line)
    } else {
        line
    }
}

/// The ways `lines` may have been one line: broken at a fixed column (join
/// as is: the break may fall mid-word or mid-number), broken at spaces by a
/// person (join with one space), or broken at a column by a terminal that
/// then dropped trailing spaces (lines of the full width join as is, shorter
/// ones lost a space).
fn joins(lines: &[&str]) -> [String; 3] {
    let width = lines[..lines.len() - 1]
        .iter()
        .map(|l| l.len())
        .max()
        .unwrap_or(0);
    let mut tight = String::new();
    let mut spaced = String::new();
    let mut by_width = String::new();
    for (i, l) in lines.iter().enumerate() {
        if i > 0 {
            // One space where the break was, however many were around it.
            spaced.truncate(spaced.trim_end().len());
            spaced.push(' ');
            if lines[i - 1].len() < width {
                by_width.truncate(by_width.trim_end().len());
                by_width.push(' ');
            }
        }
        let l = if i > 0 { l.trim_start() } else { l };
        spaced.push_str(l);
        tight.push_str(lines[i]);
        by_width.push_str(if i > 0 && lines[i - 1].len() < width {
            l
        } else {
            lines[i]
        });
    }
    [tight, spaced, by_width]
}

fn join_wrapped(lines: Vec<String>, reach: Reach) -> Vec<String> {
    let mut out = Vec::with_capacity(lines.len());
    let mut budget = JOIN_BUDGET;
    let mut i = 0;
    while i < lines.len() {
        let mut current = lines[i].clone();
        let first = i;
        i += 1;
        'grow: while i < lines.len() && budget > 0 && mentions_message(&current) {
            // A line whose message has begun needs a few more lines at most
            // (an optional tail such as `The caller indicates that this is
            // not a failure` wrapped at a narrow column); one whose message
            // has not begun (a wrapped anchor, numbers still to come) may
            // need many.
            let begun = !reach(&current).is_empty();
            let depth = if begun { MAX_JOINED_BEGUN } else { MAX_JOINED };
            // The fewest following lines that the message reads into.
            let mut group: Vec<&str> = vec![current.as_str()];
            let mut chars = current.len();
            for k in 0..depth.min(lines.len() - i) {
                budget = budget.saturating_sub(3 * (chars + lines[i + k].len()));
                let next = strip_quote(&lines[i + k], &lines[first]);
                chars += next.len();
                // Closing quotes and brackets (`"}` after a JSON log's message)
                // are the end of what held the message, not more of it.
                if !next.chars().any(char::is_alphanumeric)
                    || starts_record(next)
                    || chars > MAX_JOINED_CHARS
                {
                    break 'grow;
                }
                // A line ending in the first letters of an anchor goes on only
                // if the next line completes the anchor.
                if k == 0 && !completes_anchor(&current, next) {
                    break 'grow;
                }
                group.push(next);
                // Where the last joined line starts, in the shortest join.
                let before: usize = group[..group.len() - 1].iter().map(|l| l.len()).sum();
                let first_len = group[0].len();
                let best = joins(&group)
                    .into_iter()
                    .filter_map(|text| {
                        let end = reach(&text)
                            .into_iter()
                            .filter(|&(start, _)| start < first_len)
                            .map(|(_, end)| end)
                            .max()?;
                        Some((end, text))
                    })
                    .filter(|(end, _)| *end > before)
                    .max_by_key(|(end, text)| {
                        (
                            *end as isize - text.len() as isize,
                            std::cmp::Reverse(text.len()),
                        )
                    });
                if let Some((_, text)) = best {
                    current = text;
                    i += k + 1;
                    continue 'grow;
                }
            }
            break;
        }
        out.push(current);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaped_newlines_become_lines() {
        let l = unescape_line(
            r#"{"msg": "Out of memory.\nBufferAssignment stats:\n\tparameter: \"x\""}"#,
        );
        assert_eq!(l.len(), 3);
        assert_eq!(l[1], "BufferAssignment stats:");
        assert_eq!(l[2], "\tparameter: \"x\"\"}");
        // A repr of a repr doubles the backslash.
        assert_eq!(unescape_line(r"a\\nb").len(), 2);
        // A Windows path without `\n` is left alone.
        assert_eq!(unescape_line(r"C:\temp\x"), vec![r"C:\temp\x".to_string()]);
    }

    /// pest's own reading of the grammar: [`ANCHORS`] are the `anchor` rule's
    /// literals in order, every message the grammar finds anywhere in a line
    /// opens with one of them, and each opens one, so a message added
    /// without its anchor (or an anchor left after its message went) fails.
    #[test]
    fn anchors_are_the_openings_of_the_grammar_s_messages() {
        use pest_meta::ast::Expr;
        let pairs = pest_meta::parser::parse(pest_meta::parser::Rule::grammar_rules, OOM_GRAMMAR)
            .expect("grammar/oom.pest parses");
        let rules = pest_meta::parser::consume_rules(pairs).expect("grammar/oom.pest is valid");
        let rule = |name: &str| -> &Expr {
            let found = rules.iter().find(|r| r.name == name);
            &found.unwrap_or_else(|| panic!("no rule {name}")).expr
        };
        fn choices(e: &Expr) -> Vec<&Expr> {
            match e {
                Expr::Choice(a, b) => [choices(a), choices(b)].concat(),
                e => vec![e],
            }
        }
        // The literals an expression can start with, and whether it can match nothing.
        fn openings<'e>(e: &'e Expr, rule: &dyn Fn(&str) -> &'e Expr) -> (Vec<String>, bool) {
            match e {
                Expr::Str(s) | Expr::Insens(s) => (vec![s.clone()], false),
                Expr::Ident(name) => openings(rule(name), rule),
                Expr::Seq(a, b) => match openings(a, rule) {
                    (mut first, true) => {
                        let (then, empty) = openings(b, rule);
                        first.extend(then);
                        (first, empty)
                    }
                    first => first,
                },
                Expr::Choice(a, b) => {
                    let ((mut x, xe), (y, ye)) = (openings(a, rule), openings(b, rule));
                    x.extend(y);
                    (x, xe || ye)
                }
                Expr::Opt(a) | Expr::Rep(a) => (openings(a, rule).0, true),
                Expr::RepOnce(a) => openings(a, rule),
                other => panic!("a message opens with {other:?}, not text"),
            }
        }
        let anchors: Vec<&str> = choices(rule("anchor"))
            .into_iter()
            .map(|e| match e {
                Expr::Str(s) => s.as_str(),
                other => panic!("the anchor rule holds {other:?}"),
            })
            .collect();
        assert_eq!(anchors, ANCHORS);
        let mut opened = vec![false; ANCHORS.len()];
        for message in choices(rule("message")) {
            let (texts, empty) = openings(message, &rule);
            assert!(!empty, "{message:?} can match nothing");
            for text in texts {
                let anchor = ANCHORS.iter().position(|a| text.starts_with(a));
                let Some(k) = anchor else {
                    panic!("{message:?} opens with {text:?}, which no anchor starts")
                };
                opened[k] = true;
            }
        }
        for (anchor, opened) in ANCHORS.iter().zip(opened) {
            assert!(opened, "the anchor {anchor:?} opens no message");
        }
    }

    #[test]
    fn partial_anchor_at_the_end_of_a_line() {
        assert!(mentions_message("RESOURCE_EXHAUSTED: Out"));
        assert!(mentions_message("XlaRuntimeError: Ran out of mem"));
        assert!(!mentions_message("nothing to see"));
    }
}
