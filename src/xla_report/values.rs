//! The values part: `Total bytes used: N (...)` and the `Used values:` list,
//! whose length must be the number of values the allocations part placed.
//! Each used value is followed by its ` positions:`, ` uses:` and
//! ` from instruction:` lines; any other line is refused.
//!
//! Two quirks of older XLAs are read as written: before 2021-09 a value had
//! no ` from instruction:` line (the next `<id name>` follows its uses), and
//! jax 0.4.35's XLA ends a ` from instruction:` line without its line break,
//! so the next used value starts on the same line (`...}<1 Arg_0.1 @0>`).

use super::syntax::{cut_off, first_int, name_and_index, parse, reads_as, unreadable, Rule};
use super::{UsedValue, XlaReports};
use crate::error::Error;
use crate::source::SourceFile;

/// Where the part is: which lines may come next.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum Section {
    /// Before `Used values:`.
    #[default]
    Head,
    /// After a used value's `from instruction:` line (or `Used values:`).
    Done,
    /// After `<id name>`: ` positions:` comes next.
    Value,
    Positions,
    Uses,
}

/// The values part being read.
#[derive(Debug, Default)]
pub(super) struct Values {
    section: Section,
    /// Whether this report's values have a ` from instruction:` line, once
    /// the first value has shown it (XLA since 2021-09 writes one for each).
    from_instruction: Option<bool>,
}

impl Values {
    /// Reads one line of the part (its first line, `Total bytes used:` or
    /// `Used values:`, included).
    pub(super) fn line(
        &mut self,
        reports: &mut XlaReports,
        file: &SourceFile,
        offset: usize,
        line: &str,
    ) -> Result<(), Error> {
        use Section::*;
        let expected = match self.section {
            Head if line.starts_with("Total bytes used:") && reports.total_bytes_used.is_none() => {
                let pair = parse(file, Rule::total_bytes_used, offset, line)?;
                reports.total_bytes_used = first_int(pair);
                return Ok(());
            }
            Head if line == "Used values:" => {
                self.section = Done;
                return Ok(());
            }
            Head => "`Total bytes used:` or `Used values:`",
            Done if line.starts_with('<') => return self.start_value(reports, file, offset, line),
            Done => "a used value `<id name @color>`",
            Value if line == " positions:" => {
                self.section = Positions;
                return Ok(());
            }
            Value => "` positions:`",
            Positions if line == " uses:" => {
                self.section = Uses;
                return Ok(());
            }
            Positions => {
                let position = name_and_index(parse(file, Rule::position_line, offset, line)?);
                if let Some(value) = reports.used_values.last_mut() {
                    value.positions.push(position);
                }
                return Ok(());
            }
            Uses if line.starts_with(" from instruction:")
                && self.from_instruction != Some(false) =>
            {
                self.from_instruction = Some(true);
                let (instruction, next) = split_run_on(line);
                parse(file, Rule::from_instruction, offset, instruction)?;
                self.section = Done;
                if let Some(at) = next {
                    return self.start_value(reports, file, offset + at, &line[at..]);
                }
                return Ok(());
            }
            // A value without a `from instruction:` line (XLA before 2021-09).
            Uses if line.starts_with('<') && self.from_instruction != Some(true) => {
                self.from_instruction = Some(false);
                return self.start_value(reports, file, offset, line);
            }
            Uses => {
                parse(file, Rule::use_line, offset, line)?;
                return Ok(());
            }
        };
        Err(unreadable(file, offset, expected))
    }

    /// `<29 add.9{1} (phi) @0>`: a used value, its positions to come.
    fn start_value(
        &mut self,
        reports: &mut XlaReports,
        file: &SourceFile,
        offset: usize,
        text: &str,
    ) -> Result<(), Error> {
        let pair = parse(file, Rule::used_value, offset, text)?;
        let id = first_int(pair.clone()).unwrap_or(u64::MAX);
        let (name, index) = name_and_index(pair);
        reports.used_values.push(UsedValue {
            id,
            name,
            index,
            positions: Vec::new(),
        });
        self.section = Section::Value;
        Ok(())
    }

    /// The part ended at `end` (the end of its file, or the line that starts
    /// the live ranges): it must have its total, its last value whole, and as
    /// many values as the allocations placed.
    pub(super) fn finish(
        &self,
        reports: &XlaReports,
        file: &SourceFile,
        end: usize,
    ) -> Result<(), Error> {
        if reports.total_bytes_used.is_none() {
            return Err(cut_off(file, end, "no `Total bytes used:` line"));
        }
        if self.section == Section::Head {
            return Err(cut_off(file, end, "no `Used values:` list after the total"));
        }
        let whole = match self.section {
            Section::Head | Section::Done => true,
            // Without `from instruction:` lines, a value ends with its uses.
            Section::Uses => self.from_instruction == Some(false),
            Section::Value | Section::Positions => false,
        };
        if !whole {
            return Err(cut_off(
                file,
                end,
                "the last used value has no `from instruction:` line",
            ));
        }
        let placed: usize = reports.allocations.iter().map(|a| a.values.len()).sum();
        let used = reports.used_values.len();
        if !reports.allocations.is_empty() && used != placed {
            return Err(cut_off(
                file,
                end,
                &format!(
                    "it lists {used} used values where the buffer-assignment report places {placed}"
                ),
            ));
        }
        Ok(())
    }
}

/// A ` from instruction:` line and, when the next used value was written on
/// the same line (jax 0.4.35's XLA), where that value starts. The instruction
/// itself may hold `<` (`jit(<lambda>)`), so only a tail that reads whole as
/// a used value is one.
fn split_run_on(line: &str) -> (&str, Option<usize>) {
    if line.ends_with('>') {
        if let Some(at) = line.rfind('<').filter(|&at| at > 0) {
            if reads_as(Rule::used_value, &line[at..]) {
                return (&line[..at], Some(at));
            }
        }
    }
    (line, None)
}

#[cfg(test)]
mod tests {
    use super::split_run_on;

    #[test]
    fn a_used_value_run_on_is_split_off() {
        let line = r#" from instruction: %Arg_0.8 = f32[] parameter(0), metadata={op_name="jit(f)/jit(main)/while/body/reduce_sum"}<1 Arg_1.9 @0>"#;
        let (instruction, at) = split_run_on(line);
        assert_eq!(at.map(|at| &line[at..]), Some("<1 Arg_1.9 @0>"));
        assert!(instruction.ends_with("reduce_sum\"}"));
        // `<` inside the instruction is not a used value.
        let line = r#" from instruction: %add.3 = f32[4]{0} add(%p, %q), metadata={op_name="jit(<lambda>)/add"}"#;
        assert_eq!(split_run_on(line), (line, None));
        let line = " from instruction: %t = (f32[], s32[]) tuple(%a, %b)<43 tuple.1{} @0>";
        assert_eq!(
            split_run_on(line).1.map(|at| &line[at..]),
            Some("<43 tuple.1{} @0>")
        );
    }
}
