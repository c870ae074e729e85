//! Lists of lists stored in two arrays (compressed rows): the dataflow's
//! per-instruction values and per-value positions and uses. A training step
//! has tens of thousands of each list, mostly of one or two items: an
//! allocation apiece cost more than the items.

/// List `k` is `items[starts[k]..starts[k + 1]]`.
#[derive(Debug, Clone)]
pub struct Lists<T> {
    starts: Vec<usize>,
    items: Vec<T>,
}

impl<T> Default for Lists<T> {
    fn default() -> Self {
        Lists {
            starts: vec![0],
            items: Vec::new(),
        }
    }
}

impl<T> Lists<T> {
    pub fn with_capacity(lists: usize, items: usize) -> Lists<T> {
        let mut starts = Vec::with_capacity(lists + 1);
        starts.push(0);
        Lists {
            starts,
            items: Vec::with_capacity(items),
        }
    }

    /// Appends the next list: lists are numbered in the order pushed.
    pub fn push(&mut self, list: impl IntoIterator<Item = T>) {
        self.items.extend(list);
        self.starts.push(self.items.len());
    }

    /// List `k`; empty past the last list.
    pub fn get(&self, k: usize) -> &[T] {
        match (self.starts.get(k), self.starts.get(k + 1)) {
            (Some(&a), Some(&b)) => &self.items[a..b],
            _ => &[],
        }
    }

    pub fn len(&self) -> usize {
        self.starts.len() - 1
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn iter(&self) -> impl Iterator<Item = &[T]> {
        self.starts.windows(2).map(|w| &self.items[w[0]..w[1]])
    }

    /// `count` lists from (list, item) pairs, each list's items in the order
    /// they come (a counting sort: two passes, no per-list allocation).
    pub fn grouped(count: usize, pairs: Vec<(usize, T)>) -> Lists<T> {
        let mut starts = vec![0usize; count + 1];
        for &(k, _) in &pairs {
            starts[k + 1] += 1;
        }
        for k in 0..count {
            starts[k + 1] += starts[k];
        }
        let mut next = starts.clone();
        let mut slots: Vec<Option<T>> = std::iter::repeat_with(|| None).take(pairs.len()).collect();
        for (k, item) in pairs {
            slots[next[k]] = Some(item);
            next[k] += 1;
        }
        Lists {
            starts,
            items: slots
                .into_iter()
                .map(|s| s.expect("every slot is filled"))
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Lists;

    #[test]
    fn pushed_and_grouped_lists_read_back() {
        let mut pushed = Lists::with_capacity(3, 4);
        pushed.push([1, 2]);
        pushed.push([]);
        pushed.push([3]);
        assert_eq!(pushed.len(), 3);
        assert_eq!(pushed.get(0), &[1, 2]);
        assert!(pushed.get(1).is_empty());
        assert_eq!(pushed.get(2), &[3]);
        assert!(pushed.get(3).is_empty(), "past the end");
        assert_eq!(pushed.iter().map(<[_]>::len).collect::<Vec<_>>(), [2, 0, 1]);

        let grouped = Lists::grouped(4, vec![(2, 'a'), (0, 'b'), (2, 'c'), (3, 'd')]);
        assert_eq!(grouped.get(0), &['b']);
        assert!(grouped.get(1).is_empty());
        assert_eq!(grouped.get(2), &['a', 'c'], "in the order they came");
        assert_eq!(grouped.get(3), &['d']);
        assert!(Lists::<u8>::default().is_empty());
    }
}
