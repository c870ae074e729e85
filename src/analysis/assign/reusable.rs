//! The allocations a buffer may join at all, in the order `assign` tries
//! them: newest first.
//!
//! Each buffer of a training step meets hundreds to thousands of them, and
//! 99% are refused by one test: a value of the allocation lives through a
//! bucket of time in which the buffer has a step (`Screen::surely_overlaps`,
//! its covered buckets). So the covered buckets are also kept transposed:
//! for each block of 64 allocations and each bucket, a word with a bit for
//! each of the 64 that live through it. A buffer ORs the words of the buckets
//! it touches (a few dozen loads per 64 allocations) and tests in full only
//! the allocations left, in the same order as before.

use rustc_hash::FxHashMap as HashMap;

use crate::analysis::interference::{Mask, Screen, BUCKETS};

#[derive(Default)]
pub(super) struct Reusable {
    ids: Vec<usize>,
    /// Each allocation's color and [`Screen`], side by side in scan order:
    /// reading its `Allocation` and `Occupancy` instead cost a cache miss each.
    screens: Vec<(u64, Screen)>,
    /// Where each allocation is in `ids`.
    position: HashMap<usize, usize>,
    /// Per block of 64 allocations (by position), per bucket: which of the
    /// 64 have a value living through the bucket.
    through: Vec<[u64; BUCKETS]>,
}

impl Reusable {
    pub(super) fn push(&mut self, a: usize, color: u64, screen: Screen) {
        let k = self.ids.len();
        self.position.insert(a, k);
        self.ids.push(a);
        self.screens.push((color, screen));
        if k.is_multiple_of(64) {
            self.through.push([0; BUCKETS]);
        }
        self.mark(k, screen.covered());
    }

    /// After a buffer joined allocation `a`: its covered buckets only grow.
    pub(super) fn refresh(&mut self, a: usize, screen: Screen) {
        if let Some(&k) = self.position.get(&a) {
            self.screens[k].1 = screen;
            self.mark(k, screen.covered());
        }
    }

    fn mark(&mut self, k: usize, covered: Mask) {
        let block = &mut self.through[k / 64];
        for bucket in covered.buckets() {
            block[bucket] |= 1 << (k % 64);
        }
    }

    /// The newest allocation that `accept`s (given its id, color and screen),
    /// among those with no value living through a bucket in `touched`.
    pub(super) fn find_newest(
        &self,
        touched: Mask,
        mut accept: impl FnMut(usize, u64, &Screen) -> bool,
    ) -> Option<usize> {
        let touched: Vec<usize> = touched.buckets().collect();
        for (b, block) in self.through.iter().enumerate().rev() {
            let in_use = match self.ids.len() - 64 * b {
                n if n >= 64 => u64::MAX,
                n => (1 << n) - 1,
            };
            let refused = touched.iter().fold(0, |words, &t| words | block[t]);
            let mut left = in_use & !refused;
            while left != 0 {
                let bit = 63 - left.leading_zeros() as usize;
                left &= !(1 << bit);
                let k = 64 * b + bit;
                let (color, screen) = &self.screens[k];
                if accept(self.ids[k], *color, screen) {
                    return Some(self.ids[k]);
                }
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::interference::Buckets;
    use crate::analysis::liveness::LiveRange;

    /// `find_newest` returns what a plain newest-first scan with the full
    /// test returns, over more than one block and with allocations refreshed.
    #[test]
    fn the_index_finds_what_a_plain_scan_finds() {
        let buckets = Buckets::new(1000);
        let mut reusable = Reusable::default();
        let mut seed = 12345u64;
        let mut next = |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        let range = |start: u64, len: u64| LiveRange {
            start: start as u32,
            end: (start + len).min(999) as u32,
        };
        let mut plain: Vec<(usize, Screen)> = Vec::new();
        for a in 0..300 {
            let mut screen = Screen::default();
            screen.record(buckets, range(next(1000), next(400)));
            reusable.push(a, 0, screen);
            plain.push((a, screen));
            if a % 7 == 0 {
                // A buffer joins an older allocation.
                let old = next(a as u64 + 1) as usize;
                plain[old].1.record(buckets, range(next(1000), next(200)));
                reusable.refresh(old, plain[old].1);
            }
            for _ in 0..20 {
                let r = range(next(1000), next(50));
                let touched = buckets.touched(r);
                let fits = |screen: &Screen| !screen.surely_overlaps(r, touched);
                let want = plain.iter().rev().find(|(_, s)| fits(s)).map(|(a, _)| *a);
                let got = reusable.find_newest(touched, |_, _, s| fits(s));
                assert_eq!(got, want, "after {a} allocations, range {r:?}");
            }
        }
    }
}
