//! Out-of-memory messages: find them in pasted text (`lines` undoes wrapping
//! and escaping, `parse` reads each line with `grammar/oom.pest`, `apply`
//! records what each part says), read the log around them (`context`: the
//! framework, the application, device markers, settings), explain each
//! (`explain`, with `device`, `situation`, `checks`, `verdict`, `failure`,
//! `readings`, `feasibility`, `advice` and its words), relate the messages of
//! one log (`relate`), and link one to a dump (`dump`).

pub mod advice;
mod advice_words;
mod apply;
pub mod checks;
pub mod context;
pub mod device;
pub mod dump;
pub mod explain;
pub mod failure;
pub mod feasibility;
mod lines;
mod measured;
pub mod model;
mod parse;
pub mod readings;
pub mod relate;
pub mod situation;
pub mod verdict;

pub use model::{Amount, OomFormat, OomMessage};
pub use parse::LOOKED_FOR;

/// Every out-of-memory message in `text`, in the order they appear. A log
/// with several gives several; the same error printed twice (a log line, then
/// the traceback) is one, and the same failure on two devices is two.
pub fn read_all(text: &str) -> Vec<OomMessage> {
    parse::parse_messages(text)
}

/// The messages of a text and what the text around them says.
#[derive(Debug, Clone)]
pub struct Log {
    pub messages: Vec<OomMessage>,
    pub context: context::LogContext,
}

/// Reads the messages of `text` and the log around them.
pub fn read_log(text: &str) -> Log {
    let (messages, lines) = parse::parse_log(text);
    Log {
        messages,
        context: context::LogContext::read(&lines),
    }
}

/// The message that leads: the first error (a headline such as `Out of
/// memory while trying to allocate`), else the first message of any kind
/// (warnings or allocator lines alone).
pub fn read(text: &str) -> Option<OomMessage> {
    let mut all = read_all(text);
    let lead = lead_index(&all)?;
    Some(all.swap_remove(lead))
}

/// Which of `messages` leads (see [`read`]).
pub fn lead_index(messages: &[OomMessage]) -> Option<usize> {
    messages
        .iter()
        .position(|m| m.is_error())
        .or(if messages.is_empty() { None } else { Some(0) })
}

/// Every message of `log` explained, in the order they appear; `dump` is
/// linked to the message at its index. Messages that are the same failure on
/// several devices are explained as one replicated program.
pub fn explain_log(log: &Log, dump: Option<(usize, dump::DumpLinks)>) -> Vec<explain::Explanation> {
    let mut dump = dump;
    let mut out: Vec<explain::Explanation> = log
        .messages
        .iter()
        .enumerate()
        .map(|(i, m)| {
            let links = match &dump {
                Some((at, _)) if *at == i => dump.take().map(|(_, d)| d),
                _ => None,
            };
            explain::explain_in(m, &log.context, links)
        })
        .collect();
    for group in relate::same_failure(&log.messages) {
        let on: Vec<String> = group
            .iter()
            .filter_map(|&i| log.messages[i].replica.clone())
            .collect();
        for &i in &group {
            out[i].situation.replicated = Some(situation::Replicated { on: on.clone() });
            out[i].readvise(&log.messages[i]);
        }
    }
    out
}

#[cfg(test)]
mod tests_frontends;
