//! The report reader on excerpts of real reports (long metadata shortened),
//! in each layout XLA has written, and on the ways one can be broken.

use super::{Layout, XlaReports};
use crate::error::Error;

/// jax 0.4.35's XLA (`versions/jax-0.4.35/own_add`, `a + b`): the one-file
/// layout, each ` from instruction:` line but the last running into the next
/// used value, peak values named without their shape index.
const JAX_0_4_35: &str = r#"BufferAssignment:
allocation 0: size 4194304, output shape is |f32[1024,1024]|, maybe-live-out:
 value: <0 add.3.clone @0> (size=4194304,offset=0): f32[1024,1024]{1,0}
allocation 1: size 4194304, parameter 0, shape |f32[1024,1024]| at ShapeIndex {}:
 value: <1 Arg_0.1 @0> (size=4194304,offset=0): f32[1024,1024]{1,0}
allocation 2: size 4194304, parameter 1, shape |f32[1024,1024]| at ShapeIndex {}:
 value: <2 Arg_1.2 @0> (size=4194304,offset=0): f32[1024,1024]{1,0}

Total bytes used: 12582912 (12.00MiB)

Used values:
<0 add.3.clone @0>
 positions:
  add.3.clone
  call
 uses:
 from instruction: %add.3.clone = f32[1024,1024]{1,0} add(f32[1024,1024]{1,0} %p, f32[1024,1024]{1,0} %p.1), metadata={op_name="jit(<lambda>)/jit(main)/add" source_line=347}, backend_config={"outer_dimension_partitions":["2"]}<1 Arg_0.1 @0>
 positions:
  Arg_0.1
  p
 uses:
  call, operand 0
  add.3.clone, operand 0
 from instruction: %Arg_0.1 = f32[1024,1024]{1,0} parameter(0), metadata={op_name="a"}<2 Arg_1.2 @0>
 positions:
  Arg_1.2
  p.1
 uses:
  call, operand 1
  add.3.clone, operand 1
 from instruction: %Arg_1.2 = f32[1024,1024]{1,0} parameter(1), metadata={op_name="b"}

HloLiveRange (max 6):
  InstructionSequence:
    0:Arg_0.1
    1:Arg_1.2
    2:p
    3:p.1
    4:add.3.clone
    5:call
  BufferLiveRange:
    add.3.clone{}:4-6
    Arg_0.1{}:0-6
    Arg_1.2{}:0-6
  Live ranges at 4 (peak):
    add.3.clone: 4194304 bytes
    Arg_0.1: 4194304 bytes
    Arg_1.2: 4194304 bytes
"#;

/// TensorFlow 2.21's XLA (`frontends/tf_add`): the one-file layout with
/// indexed peak values, running sums and the stack-trace breakdown.
const TENSORFLOW_2_21: &str = r#"BufferAssignment:
allocation 0: size 67108864, output shape is |f32[4096,4096]|, maybe-live-out:
 value: <5 wrapped_add @0> (size=67108864,offset=0): f32[4096,4096]{1,0}
allocation 1: size 67108864, parameter 0, shape |f32[4096,4096]| at ShapeIndex {}:
 value: <3 arg0.1 @0> (size=67108864,offset=0): f32[4096,4096]{1,0}
allocation 2: size 67108864, parameter 1, shape |f32[4096,4096]| at ShapeIndex {}:
 value: <4 arg1.1 @0> (size=67108864,offset=0): f32[4096,4096]{1,0}

Total bytes used: 201326592 (192.00MiB)

Used values:
<3 arg0.1 @0>
 positions:
  arg0.1
 uses:
  wrapped_add, operand 0
 from instruction: %arg0.1 = f32[4096,4096]{1,0} parameter(0), parameter_replication={false}, metadata={op_name="XLA_Args"}
<4 arg1.1 @0>
 positions:
  arg1.1
 uses:
  wrapped_add, operand 1
 from instruction: %arg1.1 = f32[4096,4096]{1,0} parameter(1), parameter_replication={false}, metadata={op_name="XLA_Args"}
<5 wrapped_add @0>
 positions:
  wrapped_add
 uses:
 from instruction: %wrapped_add = f32[4096,4096]{1,0} fusion(%arg0.1, %arg1.1), kind=kLoop, calls=%wrapped_add_computation, metadata={op_type="AddV2" op_name="add"}, backend_config={"outer_dimension_partitions":["2"]}


HloLiveRange (max 3):
  InstructionSequence:
    0:arg0.1
    1:arg1.1
    2:wrapped_add
  BufferLiveRange:
    arg0.1{}:0-3
    arg1.1{}:0-3
    wrapped_add{}:2-3
  Live ranges at 2 (peak):
    arg0.1{}: 67108864 bytes (cumulative: 67108864 bytes)
    arg1.1{}: 67108864 bytes (cumulative: 134217728 bytes)
    wrapped_add{}: 67108864 bytes (cumulative: 201326592 bytes)
  Stack trace breakdown for peak usage: 201 326 592 bytes
    a_inference_add_18.1 (100.0%, total: 201 326 592 bytes, current: 0 bytes, remaining: 201 326 592 bytes)
      ├── XLA_Args (66.7%, total: 134 217 728 bytes, current: 134 217 728 bytes, remaining: 67 108 864 bytes)
      └── add (33.3%, total: 67 108 864 bytes, current: 67 108 864 bytes, remaining: 0 bytes)
"#;

/// jax 0.10.2's XLA (`corpus/cases/f1_add_f64_42994_nodonate`): the three
/// files of the split layout.
const SPLIT_ALLOCATIONS: &str = r#"BufferAssignment:
allocation 0: size 14787872288, output shape is |f64[42994,42994]|, maybe-live-out:
 value: <5 wrapped_add @0> (size=14787872288,offset=0): f64[42994,42994]{1,0}
allocation 1: size 14787872288, parameter 0, shape |f64[42994,42994]| at ShapeIndex {}:
 value: <3 a.1 @0> (size=14787872288,offset=0): f64[42994,42994]{1,0}
allocation 2: size 14787872288, parameter 1, shape |f64[42994,42994]| at ShapeIndex {}:
 value: <4 b.1 @0> (size=14787872288,offset=0): f64[42994,42994]{1,0}
"#;

const SPLIT_VALUES: &str = r#"
Total bytes used: 44363616864 (41.32GiB)

Used values:
<3 a.1 @0>
 positions:
  a.1
 uses:
  wrapped_add, operand 0
 from instruction: %a.1 = f64[42994,42994]{1,0} parameter(0), metadata={op_name="a"}
<4 b.1 @0>
 positions:
  b.1
 uses:
  wrapped_add, operand 1
 from instruction: %b.1 = f64[42994,42994]{1,0} parameter(1), metadata={op_name="b"}
<5 wrapped_add @0>
 positions:
  wrapped_add
 uses:
  (none)
 from instruction: %wrapped_add = f64[42994,42994]{1,0} fusion(%a.1, %b.1), kind=kLoop, calls=%wrapped_add_computation, metadata={op_name="jit(fn)/add" stack_frame_id=3}, backend_config={"outer_dimension_partitions":["2"]}
"#;

const SPLIT_LIVE_RANGE: &str = r#"HloLiveRange (max 3):
  InstructionSequence:
    0:a.1
    1:b.1
    2:wrapped_add
  BufferLiveRange:
    a.1{}:0-3
    b.1{}:0-3
    wrapped_add{}:2-3
  Live ranges at 2 (peak):
    a.1{}: 14787872288 bytes (cumulative: 14787872288 bytes)
    b.1{}: 14787872288 bytes (cumulative: 29575744576 bytes)
    wrapped_add{}: 14787872288 bytes (cumulative: 44363616864 bytes)
  Stack trace breakdown for peak usage: 44 363 616 864 bytes
    main.1 (100.0%, total: 44 363 616 864 bytes, current: 0 bytes, remaining: 44 363 616 864 bytes)
      ├── a (33.3%, total: 14 787 872 288 bytes, current: 14 787 872 288 bytes, remaining: 29 575 744 576 bytes)
      ├── b (33.3%, total: 14 787 872 288 bytes, current: 14 787 872 288 bytes, remaining: 14 787 872 288 bytes)
      └── jit(fn)/add (33.3%, total: 14 787 872 288 bytes, current: 14 787 872 288 bytes, remaining: 0 bytes)
"#;

fn one_file(text: &str) -> Result<XlaReports, Error> {
    XlaReports::from_texts(text, "", "")
}

/// The error's `line:column` in its file, and its message.
fn where_and_what(error: Error) -> ((usize, usize), String) {
    let (_, line, column) = error.location().expect("an error at a place in the report");
    ((line, column), error.to_string())
}

/// Line `n` (1-based) of `text` replaced by `new`, or removed.
fn with_line(text: &str, n: usize, new: Option<&str>) -> String {
    let mut lines: Vec<&str> = text.lines().collect();
    match new {
        Some(line) => lines[n - 1] = line,
        None => {
            lines.remove(n - 1);
        }
    }
    lines.join("\n") + "\n"
}

#[test]
fn jax_0_4_35_one_file_with_run_on_values() {
    let reports = one_file(JAX_0_4_35).unwrap();
    assert_eq!(reports.layout, Layout::OneFile);
    assert_eq!(reports.total_bytes_used, Some(12_582_912));
    assert_eq!(reports.allocations.len(), 3);
    assert_eq!(reports.allocations[1].parameter, Some(0));
    assert!(reports.allocations[0].maybe_live_out);
    let used: Vec<(u64, &str)> = reports
        .used_values
        .iter()
        .map(|v| (v.id, v.name.as_str()))
        .collect();
    assert_eq!(
        used,
        [(0, "add.3.clone"), (1, "Arg_0.1"), (2, "Arg_1.2")],
        "each value run into the line before is read"
    );
    assert_eq!(
        reports.used_values[1].positions,
        [("Arg_0.1".to_string(), vec![]), ("p".to_string(), vec![])]
    );
    let lr = reports
        .live_ranges
        .expect("the live ranges, in the same file");
    assert_eq!(lr.max_time, 6);
    assert_eq!(lr.sequence.len(), 6);
    assert_eq!(lr.ranges[0], ("add.3.clone".to_string(), vec![], 4, 6));
    assert_eq!(lr.peak_time, Some(4));
    assert_eq!(lr.peak_values.len(), 3);
    assert!(lr
        .peak_values
        .iter()
        .all(|p| !p.indexed && p.cumulative.is_none()));
}

#[test]
fn tensorflow_one_file_with_breakdown() {
    let reports = one_file(TENSORFLOW_2_21).unwrap();
    assert_eq!(reports.layout, Layout::OneFile);
    assert_eq!(reports.total_bytes_used, Some(201_326_592));
    assert_eq!(reports.used_values.len(), 3);
    let lr = reports.live_ranges.unwrap();
    assert_eq!(lr.breakdown_total, Some(201_326_592));
    assert!(lr.peak_values.iter().all(|p| p.indexed));
    assert_eq!(lr.peak_values[2].cumulative, Some(201_326_592));
}

#[test]
fn split_layout_in_three_files() {
    let reports =
        XlaReports::from_texts(SPLIT_ALLOCATIONS, SPLIT_VALUES, SPLIT_LIVE_RANGE).unwrap();
    assert_eq!(reports.layout, Layout::Split);
    assert_eq!(reports.total_bytes_used, Some(44_363_616_864));
    assert_eq!(reports.allocations.len(), 3);
    assert_eq!(reports.used_values.len(), 3);
    assert_eq!(
        reports.live_ranges.unwrap().breakdown_total,
        Some(44_363_616_864)
    );
    // The live ranges alone, or the values and live ranges, are read too.
    assert!(XlaReports::from_texts("", "", SPLIT_LIVE_RANGE).is_ok());
    assert!(XlaReports::from_texts("", SPLIT_VALUES, SPLIT_LIVE_RANGE).is_ok());
}

/// The split files one after another are the one-file layout.
#[test]
fn the_split_files_joined_are_one_file() {
    let joined = format!("{SPLIT_ALLOCATIONS}{SPLIT_VALUES}\n\n{SPLIT_LIVE_RANGE}");
    let one = one_file(&joined).unwrap();
    let split = XlaReports::from_texts(SPLIT_ALLOCATIONS, SPLIT_VALUES, SPLIT_LIVE_RANGE).unwrap();
    assert_eq!(one.layout, Layout::OneFile);
    assert_eq!(one.used_values, split.used_values);
    assert_eq!(one.total_bytes_used, split.total_bytes_used);
    let (a, b) = (one.live_ranges.unwrap(), split.live_ranges.unwrap());
    assert_eq!((a.ranges, a.peak_values), (b.ranges, b.peak_values));
}

/// Before 2021-09 a used value had no ` from instruction:` line (made from
/// the 0.4.35 excerpt by removing them, as XLA's `HloValue::ToString` of the
/// time wrote it).
#[test]
fn values_without_from_instruction_lines() {
    let text: String = JAX_0_4_35
        .lines()
        .flat_map(|line| match line.split_once(" from instruction: ") {
            Some((_, rest)) => rest
                .rfind('<')
                .filter(|_| rest.ends_with('>'))
                .map(|at| rest[at..].to_string()),
            None => Some(line.to_string()),
        })
        .collect::<Vec<_>>()
        .join("\n");
    let reports = one_file(&text).unwrap();
    assert_eq!(reports.used_values.len(), 3);
    assert!(reports.live_ranges.is_some());
    // Once one value has it, every value must: value 1 without it.
    let mixed = with_line(JAX_0_4_35, 24, Some("<2 Arg_1.2 @0>"));
    let ((line, _), what) = where_and_what(one_file(&mixed).unwrap_err());
    assert!(what.contains("a use"), "{what}");
    assert_eq!(line, 24);
    // The last value without it.
    let cut = with_line(JAX_0_4_35, 31, None);
    let ((line, _), what) = where_and_what(one_file(&cut).unwrap_err());
    assert!(what.contains("no `from instruction:` line"), "{what}");
    assert_eq!(line, 32, "where the live ranges start: {what}");
}

/// Each broken report is refused at the line and column that is wrong.
#[test]
fn broken_one_file_reports_are_refused_where_they_break() {
    let lines: Vec<&str> = JAX_0_4_35.lines().collect();
    // The values after the live ranges.
    let reordered = [&lines[..8], &lines[32..], &lines[8..32]]
        .concat()
        .join("\n");
    let values_at = reordered
        .lines()
        .position(|l| l.starts_with("Total"))
        .unwrap()
        + 1;
    // Value 2 left out: the run-on that starts it and its seven lines.
    let without_2 = [&lines[..24], &lines[31..]].concat().join("\n").replacen(
        "metadata={op_name=\"a\"}<2 Arg_1.2 @0>",
        "metadata={op_name=\"a\"}",
        1,
    );
    let cases: Vec<(&str, String, (usize, usize), &str)> = vec![
        (
            "a stray line among the positions",
            with_line(JAX_0_4_35, 20, Some("garbage")),
            (20, 1),
            "a position",
        ),
        (
            "a stray line among the uses",
            with_line(JAX_0_4_35, 22, Some("  call operand 0")),
            (22, 3),
            "a use",
        ),
        (
            "a run-on value that is not one",
            JAX_0_4_35.replacen("}<1 Arg_0.1 @0>", "}<1 Arg_0.1 @0", 1),
            (18, 1),
            "a used value",
        ),
        (
            "a run-on value broken inside",
            JAX_0_4_35.replacen("}<2 Arg_1.2 @0>", "}<2 Arg_1.2 @0 @0>", 1),
            (25, 1),
            "a used value",
        ),
        (
            "the used values after the live ranges",
            reordered,
            (values_at, 1),
            "XLA writes the used values",
        ),
        (
            "the used values twice",
            format!("{JAX_0_4_35}\nTotal bytes used: 12582912 (12.00MiB)\n"),
            (50, 1),
            "twice",
        ),
        (
            "the allocations twice",
            format!("{JAX_0_4_35}BufferAssignment:\n"),
            (49, 1),
            "twice",
        ),
        (
            "a used value missing",
            without_2,
            (26, 1),
            "lists 2 used values where the buffer-assignment report places 3",
        ),
        (
            "a schedule position skipped",
            with_line(JAX_0_4_35, 37, None),
            (37, 1),
            "the next position",
        ),
        (
            "no total",
            with_line(JAX_0_4_35, 9, Some("Totl bytes used: 12582912 (12.00MiB)")),
            (9, 1),
            "an `allocation N:` or `value:` line",
        ),
    ];
    for (name, text, at, words) in cases {
        let error = one_file(&text).expect_err(name);
        let (place, what) = where_and_what(error);
        assert!(what.contains(words), "{name}: {what}");
        assert_eq!(place, at, "{name}: {what}");
    }
}

#[test]
fn broken_layouts_are_refused() {
    // A one-file report with a values file beside it holds the values twice.
    let error = XlaReports::from_texts(JAX_0_4_35, SPLIT_VALUES, "").unwrap_err();
    let ((line, _), what) = where_and_what(error);
    assert!(what.contains("twice"), "{what}");
    assert_eq!(line, 2);
    // Split allocations with nothing after them: the total is missing.
    let error = XlaReports::from_texts(SPLIT_ALLOCATIONS, "", SPLIT_LIVE_RANGE).unwrap_err();
    assert!(
        error.to_string().contains("no `Total bytes used:`"),
        "{error}"
    );
    // A values file that starts with the live ranges.
    let error = XlaReports::from_texts(SPLIT_ALLOCATIONS, SPLIT_LIVE_RANGE, "").unwrap_err();
    let ((line, column), what) = where_and_what(error);
    assert!(
        what.contains("`Total bytes used:` or `Used values:`"),
        "{what}"
    );
    assert_eq!((line, column), (1, 1));
    // A live-range file that goes on with anything but its own part.
    let error = XlaReports::from_texts(
        SPLIT_ALLOCATIONS,
        SPLIT_VALUES,
        &format!("{SPLIT_LIVE_RANGE}Total bytes used: 1 (1B)\n"),
    )
    .unwrap_err();
    assert!(error.to_string().contains("twice"), "{error}");
}

/// However a report is cut, reading it ends in a report or an error, never
/// a panic; cut inside the allocations or the used values it is an error.
#[test]
fn every_cut_is_read_or_refused() {
    for text in [JAX_0_4_35, TENSORFLOW_2_21] {
        let values_end = text.find("HloLiveRange").unwrap();
        // The instruction of the last used value is any text: cut short, it
        // still reads as one.
        let last = text[..values_end].rfind(" from instruction: ").unwrap();
        let free_text = last + text[last..].find(" = ").unwrap() + 3;
        for (end, _) in text.char_indices().skip(1) {
            let result = one_file(&text[..end]);
            // A cut among the blank lines before the live ranges leaves a
            // whole report without them.
            if end < free_text && !text[end..values_end].trim().is_empty() {
                assert!(result.is_err(), "cut at {end} was read: {:?}", &text[..end]);
            }
        }
    }
}
