//! How the messages of one log relate: the same failure on several devices
//! (each runs the whole program, replicated: sharding divides it), which a
//! log shows as one message per replica or device.

use super::model::OomMessage;

/// Groups of messages (indices into `messages`, two or more each) that are
/// the same failure on different replicas or devices: the same kind of
/// message asking for the same bytes, each naming its own replica.
pub fn same_failure(messages: &[OomMessage]) -> Vec<Vec<usize>> {
    let mut groups: Vec<Vec<usize>> = Vec::new();
    for (i, m) in messages.iter().enumerate() {
        if m.replica.is_none() || m.requested.is_none() {
            continue;
        }
        let same = |j: &usize| {
            let o = &messages[*j];
            o.format == m.format && o.requested == m.requested && o.replica != m.replica
        };
        match groups.iter_mut().find(|g| g.iter().all(same)) {
            Some(g) => g.push(i),
            None => groups.push(vec![i]),
        }
    }
    groups.retain(|g| g.len() > 1);
    groups
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::oom::read_all;

    #[test]
    fn the_same_allocation_on_two_replicas_is_one_failure_twice() {
        let text = "E1 1.0 x.cc:1] Execution of replica 0 failed: RESOURCE_EXHAUSTED: Out of memory while trying to allocate 1024 bytes.\n\
                    E1 1.0 x.cc:1] Execution of replica 1 failed: RESOURCE_EXHAUSTED: Out of memory while trying to allocate 1024 bytes.\n";
        let all = read_all(text);
        assert_eq!(all.len(), 2, "{all:?}");
        assert_eq!(same_failure(&all), vec![vec![0, 1]]);
    }
}
