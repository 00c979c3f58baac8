//! `List`: Redis's list, a quicklist of bounded [`Pack`] nodes.
//!
//! A list is a sequence of nodes, each a [`Pack`] of consecutive elements. While the
//! whole list fits in one node it is that one pack and nothing else; past that it is a
//! deque of packs. Every node stays within the limit set by `list-max-listpack-size`
//! when the list was created (entries if positive, 4 to 64 KiB if -1 to -5, as in
//! Redis), so a change inside a node moves a bounded number of bytes, and element
//! counts per node (kept by each pack) let index operations skip whole nodes.
//!
//! - Pushes and pops at either end touch only the end node: O(1).
//! - Finding an index walks node counts from the nearer end, then at most one node.
//! - Inserting, replacing or removing one element changes one node, which is split in
//!   two if it outgrows the limit, or merged with a neighbour if both fit in one.
//! - Bulk removals (LREM, LTRIM, popping many) drop whole nodes when they can and
//!   rebuild only the nodes they touch, in one pass.
//!
//! Redis 7.0 reports every list as "quicklist", whatever its size, and so does strata.
//!
//! # Invariants
//!
//! - `len` is the sum of the nodes' lengths.
//! - No node is empty, except the single node of an empty list; a deque holds at least
//!   two nodes.
//! - A node with more than one element is within the limit; an element too large for
//!   any node has a node of its own.
//! - `node_bytes` is the sum of the nodes' heap sizes.

use std::collections::VecDeque;

use crate::pack::{self, Pack};

/// The most bytes a node limited by entry count may hold (Redis's
/// `SIZE_SAFETY_LIMIT`), so that a large count cannot make nodes huge.
const SAFETY_LIMIT: usize = 8192;

/// The largest entry count a node may be limited to (Redis's `FILL_MAX`).
const FILL_MAX: i64 = (1 << 15) - 1;

/// How big a node may grow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeLimit {
    /// At most this many elements (and at most 8 KiB of them, as Redis bounds a
    /// node whatever its count).
    Entries(u16),
    /// At most this many bytes of encoded elements.
    Bytes(u32),
}

impl NodeLimit {
    /// The limit that `list-max-listpack-size` sets: a positive value counts entries
    /// (at most 32767), -1 to -5 mean 4, 8, 16, 32 and 64 KiB, and smaller values are
    /// taken as -5, as Redis does.
    pub fn from_config(size: i64) -> NodeLimit {
        if size >= 0 {
            NodeLimit::Entries(size.min(FILL_MAX) as u16)
        } else {
            let level = size.max(-5).unsigned_abs() as u32;
            NodeLimit::Bytes(4096 << (level - 1))
        }
    }

    /// Whether a node of `count` elements and `bytes` encoded bytes is allowed.
    #[inline]
    fn allows(self, count: usize, bytes: usize) -> bool {
        count <= 1
            || match self {
                NodeLimit::Entries(n) => count <= n as usize && bytes <= SAFETY_LIMIT,
                NodeLimit::Bytes(b) => bytes <= b as usize,
            }
    }

    #[inline]
    fn allows_pack(self, p: &Pack) -> bool {
        self.allows(p.len(), p.bytes_len())
    }

    /// Whether `p` may take one more element of `len` bytes.
    #[inline]
    fn room_for(self, p: &Pack, len: usize) -> bool {
        self.allows(p.len() + 1, p.bytes_len() + <Pack>::encoded_len(len))
    }

    /// Whether `a` and `b` fit in one node.
    #[inline]
    fn fits_together(self, a: &Pack, b: &Pack) -> bool {
        self.allows(a.len() + b.len(), a.bytes_len() + b.bytes_len())
    }
}

impl Default for NodeLimit {
    /// Redis's default, `list-max-listpack-size -2` (8 KiB).
    fn default() -> Self {
        NodeLimit::from_config(-2)
    }
}

/// The nodes: one pack while the list fits in a node, a deque of packs after that.
enum Nodes {
    One(Pack),
    Many(VecDeque<Pack>),
}

impl Nodes {
    #[inline]
    fn count(&self) -> usize {
        match self {
            Nodes::One(_) => 1,
            Nodes::Many(d) => d.len(),
        }
    }

    #[inline]
    fn get(&self, i: usize) -> &Pack {
        match self {
            Nodes::One(p) => p,
            Nodes::Many(d) => &d[i],
        }
    }

    #[inline]
    fn get_mut(&mut self, i: usize) -> &mut Pack {
        match self {
            Nodes::One(p) => p,
            Nodes::Many(d) => &mut d[i],
        }
    }

    fn insert(&mut self, i: usize, node: Pack) {
        match self {
            Nodes::One(p) => {
                let mut d = VecDeque::with_capacity(4);
                d.push_back(std::mem::take(p));
                d.insert(i, node);
                *self = Nodes::Many(d);
            }
            Nodes::Many(d) => d.insert(i, node),
        }
    }

    /// Removes node `i` (a single node is emptied instead).
    fn remove(&mut self, i: usize) -> Pack {
        match self {
            Nodes::One(p) => std::mem::take(p),
            Nodes::Many(d) => {
                let node = d.remove(i).unwrap_or_default();
                if d.len() == 1 {
                    let last = d.pop_front().unwrap_or_default();
                    *self = Nodes::One(last);
                }
                node
            }
        }
    }

    /// Bytes of the deque's own allocation.
    fn table_bytes(&self) -> usize {
        match self {
            Nodes::One(_) => 0,
            Nodes::Many(d) => d.capacity() * std::mem::size_of::<Pack>(),
        }
    }
}

/// A Redis list.
pub struct List {
    nodes: Nodes,
    len: usize,
    node_bytes: usize,
    limit: NodeLimit,
}

impl List {
    /// An empty list whose nodes stay within `limit`.
    pub fn new(limit: NodeLimit) -> List {
        List {
            nodes: Nodes::One(Pack::new()),
            len: 0,
            node_bytes: 0,
            limit,
        }
    }

    /// A list of `items`, front to back.
    pub fn from_items<B: AsRef<[u8]>>(
        limit: NodeLimit,
        items: impl IntoIterator<Item = B>,
    ) -> List {
        let mut list = List::new(limit);
        for item in items {
            list.push_back(item.as_ref());
        }
        list
    }

    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn limit(&self) -> NodeLimit {
        self.limit
    }

    /// Number of nodes (1 for an empty list).
    pub fn node_count(&self) -> usize {
        self.nodes.count()
    }

    /// Bytes on the heap: the nodes and, for a long list, the table of nodes.
    pub fn heap_size(&self) -> usize {
        self.node_bytes + self.nodes.table_bytes()
    }

    /// Runs `f` on node `i`, keeping the memory accounting exact.
    #[inline]
    fn edit<R>(&mut self, i: usize, f: impl FnOnce(&mut Pack) -> R) -> R {
        let node = self.nodes.get_mut(i);
        let before = node.heap_size();
        let r = f(node);
        self.node_bytes = self.node_bytes - before + node.heap_size();
        r
    }

    fn insert_node(&mut self, i: usize, node: Pack) {
        self.node_bytes += node.heap_size();
        self.nodes.insert(i, node);
    }

    fn remove_node(&mut self, i: usize) -> Pack {
        let node = self.nodes.remove(i);
        self.node_bytes -= node.heap_size();
        node
    }

    pub fn push_back(&mut self, value: &[u8]) {
        let last = self.nodes.count() - 1;
        if self.limit.room_for(self.nodes.get(last), value.len()) {
            self.edit(last, |p| p.push_back(value));
        } else {
            // The tail node keeps free room for pushes (see `Pack::push_back_parts`);
            // it is no longer the tail.
            self.edit(last, Pack::trim);
            self.insert_node(last + 1, Pack::from_iter([value]));
        }
        self.len += 1;
    }

    pub fn push_front(&mut self, value: &[u8]) {
        if self.limit.room_for(self.nodes.get(0), value.len()) {
            self.edit(0, |p| p.push_front(value));
        } else {
            // The head node keeps free room for pushes (see `Pack::push_front`);
            // it is no longer the head.
            self.edit(0, Pack::trim);
            self.insert_node(0, Pack::from_iter([value]));
        }
        self.len += 1;
    }

    pub fn pop_front(&mut self) -> Option<Vec<u8>> {
        let value = self.edit(0, Pack::pop_front)?;
        self.len -= 1;
        if self.nodes.get(0).is_empty() && self.nodes.count() > 1 {
            self.remove_node(0);
        }
        Some(value)
    }

    pub fn pop_back(&mut self) -> Option<Vec<u8>> {
        let last = self.nodes.count() - 1;
        let value = self.edit(last, Pack::pop_back)?;
        self.len -= 1;
        if self.nodes.get(last).is_empty() && last > 0 {
            self.remove_node(last);
        }
        Some(value)
    }

    pub fn front(&self) -> Option<&[u8]> {
        self.nodes.get(0).first()
    }

    pub fn back(&self) -> Option<&[u8]> {
        self.nodes.get(self.nodes.count() - 1).last()
    }

    /// The node holding element `index` (< len) and the element's place in it,
    /// counting nodes from the nearer end.
    fn locate(&self, index: usize) -> (usize, usize) {
        let count = self.nodes.count();
        if index < self.len / 2 {
            let mut rest = index;
            for i in 0..count {
                let n = self.nodes.get(i).len();
                if rest < n {
                    return (i, rest);
                }
                rest -= n;
            }
        } else {
            let mut rest = self.len.saturating_sub(index + 1);
            for i in (0..count).rev() {
                let n = self.nodes.get(i).len();
                if rest < n {
                    return (i, n - 1 - rest);
                }
                rest -= n;
            }
        }
        (count - 1, self.nodes.get(count - 1).len().saturating_sub(1))
    }

    /// Element `index`, counted from the front.
    pub fn get(&self, index: usize) -> Option<&[u8]> {
        if index >= self.len {
            return None;
        }
        let (i, at) = self.locate(index);
        self.nodes.get(i).get(at)
    }

    /// Replaces element `index`; false if there is none.
    pub fn set(&mut self, index: usize, value: &[u8]) -> bool {
        if index >= self.len {
            return false;
        }
        let (i, at) = self.locate(index);
        self.edit(i, |p| p.replace(at, value));
        self.fix_node(i);
        true
    }

    /// Inserts `value` so that it becomes element `index` (`len` or more appends).
    pub fn insert(&mut self, index: usize, value: &[u8]) {
        if index >= self.len {
            self.push_back(value);
            return;
        }
        let (i, at) = self.locate(index);
        self.len += 1;
        if at == 0 && i > 0 && self.limit.room_for(self.nodes.get(i - 1), value.len()) {
            self.edit(i - 1, |p| p.push_back(value));
            return;
        }
        self.edit(i, |p| p.insert(at, value));
        self.fix_node(i);
    }

    /// Removes element `index`, returning it.
    pub fn remove(&mut self, index: usize) -> Option<Vec<u8>> {
        if index >= self.len {
            return None;
        }
        let (i, at) = self.locate(index);
        let value = self.edit(i, |p| p.remove(at))?;
        self.len -= 1;
        self.fix_node(i);
        Some(value)
    }

    /// Restores the invariants around node `i` after a change inside it: removes it if
    /// empty, splits it if too big, or merges it with a neighbour when both fit in one.
    fn fix_node(&mut self, i: usize) {
        let node = self.nodes.get(i);
        if node.is_empty() {
            if self.nodes.count() > 1 {
                self.remove_node(i);
            }
        } else if !self.limit.allows_pack(node) {
            self.split_node(i);
        } else {
            if i + 1 < self.nodes.count() && self.limit.fits_together(node, self.nodes.get(i + 1)) {
                self.merge_next(i);
            }
            if i > 0
                && self
                    .limit
                    .fits_together(self.nodes.get(i - 1), self.nodes.get(i))
            {
                self.merge_next(i - 1);
            }
        }
    }

    /// Splits node `i` near the middle of its bytes, again and again, until every
    /// part is within the limit; an element too big for any node ends up alone.
    fn split_node(&mut self, i: usize) {
        let node = self.nodes.get(i);
        if self.limit.allows_pack(node) {
            return;
        }
        let total = node.bytes_len();
        let mut prefix = 0;
        let mut cut = node.len() - 1;
        for (k, e) in node.iter().enumerate() {
            prefix += <Pack>::encoded_len(e.len());
            if prefix * 2 >= total {
                cut = k + 1;
                break;
            }
        }
        let cut = cut.clamp(1, node.len() - 1);
        let tail = self.edit(i, |p| p.split_off(cut));
        self.insert_node(i + 1, tail);
        self.split_node(i + 1);
        self.split_node(i);
    }

    /// Appends node `i + 1` to node `i`.
    fn merge_next(&mut self, i: usize) {
        let next = self.remove_node(i + 1);
        self.edit(i, |p| p.append(&next));
    }

    /// Removes the first `n` elements.
    pub fn drain_front(&mut self, n: usize) {
        let mut n = n.min(self.len);
        self.len -= n;
        while n > 0 {
            let first = self.nodes.get(0).len();
            if n >= first && self.nodes.count() > 1 {
                self.remove_node(0);
                n -= first;
            } else {
                self.edit(0, |p| p.remove_range(0, n));
                n = 0;
            }
        }
    }

    /// Removes the last `n` elements.
    pub fn drain_back(&mut self, n: usize) {
        let mut n = n.min(self.len);
        self.len -= n;
        while n > 0 {
            let last = self.nodes.count() - 1;
            let len = self.nodes.get(last).len();
            if n >= len && last > 0 {
                self.remove_node(last);
                n -= len;
            } else {
                self.edit(last, |p| p.remove_range(len - n, n));
                n = 0;
            }
        }
    }

    /// Removes `front` elements from the front and `back` from the back (LTRIM).
    pub fn trim(&mut self, front: usize, back: usize) {
        self.drain_front(front);
        self.drain_back(back);
        if self.nodes.count() > 1 {
            self.fix_node(0);
        }
        let last = self.nodes.count() - 1;
        if last > 0 {
            self.fix_node(last);
        }
    }

    /// Removes elements equal to `value`: all of them if `limit` is 0, else the first
    /// `limit` found from the front, or from the back if `from_back`. Returns how many
    /// were removed.
    pub fn remove_matching(&mut self, value: &[u8], limit: usize, from_back: bool) -> usize {
        let count = self.nodes.count();
        let mut removed = 0;
        let mut touched: Option<(usize, usize)> = None;
        for step in 0..count {
            if limit != 0 && removed == limit {
                break;
            }
            let i = if from_back { count - 1 - step } else { step };
            let matches = self.nodes.get(i).iter().filter(|e| *e == value).count();
            if matches == 0 {
                continue;
            }
            let take = if limit == 0 {
                matches
            } else {
                matches.min(limit - removed)
            };
            // From the back, the matches to remove in this node are its last ones.
            let skip = if from_back { matches - take } else { 0 };
            self.edit(i, |p| {
                let mut seen = 0;
                p.retain(|e| {
                    if e != value {
                        return true;
                    }
                    seen += 1;
                    seen <= skip || seen > skip + take
                })
            });
            removed += take;
            touched = Some(match touched {
                None => (i, i),
                Some((lo, hi)) => (lo.min(i), hi.max(i)),
            });
        }
        self.len -= removed;
        match touched {
            Some((lo, hi)) if lo == hi => self.fix_node(lo),
            Some((lo, hi)) => self.compact(lo, hi),
            None => {}
        }
        removed
    }

    /// Rebuilds nodes `lo..=hi` and their neighbours in one pass: drops empty nodes
    /// and merges consecutive nodes that fit in one.
    fn compact(&mut self, lo: usize, hi: usize) {
        let limit = self.limit;
        let Nodes::Many(d) = &mut self.nodes else {
            return;
        };
        let lo = lo.saturating_sub(1);
        let hi = (hi + 1).min(d.len() - 1);
        let tail = d.split_off(hi + 1);
        let mut before = 0;
        let mut after = 0;
        let mut acc: Option<Pack> = None;
        for node in d.drain(lo..).collect::<Vec<_>>() {
            before += node.heap_size();
            if node.is_empty() {
                continue;
            }
            match &mut acc {
                Some(a) if limit.fits_together(a, &node) => a.append(&node),
                _ => {
                    if let Some(done) = acc.replace(node) {
                        after += done.heap_size();
                        d.push_back(done);
                    }
                }
            }
        }
        if let Some(done) = acc {
            after += done.heap_size();
            d.push_back(done);
        }
        d.extend(tail);
        self.node_bytes = self.node_bytes - before + after;
        match d.len() {
            0 => self.nodes = Nodes::One(Pack::new()),
            1 => {
                let only = d.pop_front().unwrap_or_default();
                self.nodes = Nodes::One(only);
            }
            _ => {}
        }
    }

    /// The elements, front to back (and back to front with `.rev()`).
    pub fn iter(&self) -> Iter<'_> {
        let count = self.nodes.count();
        Iter {
            list: self,
            front: None,
            back: None,
            next_node: 0,
            end_node: count,
            remaining: self.len,
        }
    }

    /// The elements from index `start` on, front to back.
    pub fn iter_from(&self, start: usize) -> Iter<'_> {
        if start == 0 {
            return self.iter();
        }
        if start >= self.len {
            return Iter {
                remaining: 0,
                ..self.iter()
            };
        }
        let (i, at) = self.locate(start);
        let mut first = self.nodes.get(i).iter();
        if at > 0 {
            first.nth(at - 1);
        }
        Iter {
            list: self,
            front: Some(first),
            back: None,
            next_node: i + 1,
            end_node: self.nodes.count(),
            remaining: self.len - start,
        }
    }

    /// The number of elements in each node, front to back.
    pub fn node_lens(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.nodes.count()).map(|i| self.nodes.get(i).len())
    }

    /// Checks the invariants (see the module docs), panicking on a violation.
    #[cfg(test)]
    fn check(&self) {
        let count = self.nodes.count();
        let lens: usize = self.node_lens().sum();
        assert_eq!(lens, self.len, "len");
        if let Nodes::Many(d) = &self.nodes {
            assert!(d.len() >= 2, "a deque of one node");
        }
        let mut bytes = 0;
        for i in 0..count {
            let node = self.nodes.get(i);
            assert!(!node.is_empty() || self.len == 0, "empty node {i}");
            assert!(self.limit.allows_pack(node), "node {i} over the limit");
            bytes += node.heap_size();
        }
        assert_eq!(bytes, self.node_bytes, "node bytes");
    }
}

impl Default for List {
    fn default() -> Self {
        List::new(NodeLimit::default())
    }
}

impl Clone for List {
    fn clone(&self) -> Self {
        let nodes = match &self.nodes {
            Nodes::One(p) => Nodes::One(p.clone()),
            Nodes::Many(d) => Nodes::Many(d.clone()),
        };
        let node_bytes = (0..nodes.count()).map(|i| nodes.get(i).heap_size()).sum();
        List {
            nodes,
            len: self.len,
            node_bytes,
            limit: self.limit,
        }
    }
}

impl PartialEq for List {
    fn eq(&self, other: &List) -> bool {
        self.len == other.len && self.iter().eq(other.iter())
    }
}

impl Eq for List {}

impl std::fmt::Debug for List {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.iter().map(String::from_utf8_lossy))
            .finish()
    }
}

impl<'a> IntoIterator for &'a List {
    type Item = &'a [u8];
    type IntoIter = Iter<'a>;
    fn into_iter(self) -> Iter<'a> {
        self.iter()
    }
}

/// Iterator over a [`List`]'s elements, node after node.
pub struct Iter<'a> {
    list: &'a List,
    /// The node being read from the front, and the one from the back.
    front: Option<pack::Iter<'a>>,
    back: Option<pack::Iter<'a>>,
    /// Nodes not opened yet from either end: `next_node..end_node`.
    next_node: usize,
    end_node: usize,
    remaining: usize,
}

impl<'a> Iterator for Iter<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        if self.remaining == 0 {
            return None;
        }
        loop {
            if let Some(e) = self.front.as_mut().and_then(Iterator::next) {
                self.remaining -= 1;
                return Some(e);
            }
            if self.next_node < self.end_node {
                self.front = Some(self.list.nodes.get(self.next_node).iter());
                self.next_node += 1;
                continue;
            }
            let e = self.back.as_mut().and_then(Iterator::next);
            if e.is_some() {
                self.remaining -= 1;
            }
            return e;
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.remaining, Some(self.remaining))
    }
}

impl DoubleEndedIterator for Iter<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        if self.remaining == 0 {
            return None;
        }
        loop {
            if let Some(e) = self.back.as_mut().and_then(DoubleEndedIterator::next_back) {
                self.remaining -= 1;
                return Some(e);
            }
            if self.next_node < self.end_node {
                self.end_node -= 1;
                self.back = Some(self.list.nodes.get(self.end_node).iter());
                continue;
            }
            let e = self.front.as_mut().and_then(DoubleEndedIterator::next_back);
            if e.is_some() {
                self.remaining -= 1;
            }
            return e;
        }
    }
}

impl ExactSizeIterator for Iter<'_> {}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::VecDeque;

    fn items(l: &List) -> Vec<Vec<u8>> {
        l.iter().map(<[u8]>::to_vec).collect()
    }

    #[test]
    fn limits_from_config() {
        assert_eq!(NodeLimit::from_config(-1), NodeLimit::Bytes(4096));
        assert_eq!(NodeLimit::from_config(-2), NodeLimit::Bytes(8192));
        assert_eq!(NodeLimit::from_config(-5), NodeLimit::Bytes(65536));
        assert_eq!(NodeLimit::from_config(-100), NodeLimit::Bytes(65536));
        assert_eq!(
            NodeLimit::from_config(i32::MIN as i64),
            NodeLimit::Bytes(65536)
        );
        assert_eq!(NodeLimit::from_config(128), NodeLimit::Entries(128));
        assert_eq!(NodeLimit::from_config(1 << 20), NodeLimit::Entries(32767));
        assert_eq!(NodeLimit::from_config(0), NodeLimit::Entries(0));
    }

    #[test]
    fn small_lists_are_one_node() {
        let mut l = List::default();
        for i in 0..100 {
            l.push_back(format!("e{i}").as_bytes());
        }
        assert_eq!(l.node_count(), 1);
        assert!(matches!(l.nodes, Nodes::One(_)));
        l.check();
        for i in 0..2000 {
            l.push_front(format!("e{i}").as_bytes());
        }
        assert!(l.node_count() > 1);
        l.check();
        l.drain_back(2050);
        assert_eq!(l.node_count(), 1);
        assert!(matches!(l.nodes, Nodes::One(_)));
        l.check();
    }

    #[test]
    fn huge_elements_get_their_own_node() {
        let mut l = List::new(NodeLimit::from_config(-1));
        let big = vec![b'x'; 10_000];
        l.push_back(b"a");
        l.push_back(&big);
        l.push_back(b"b");
        l.check();
        assert_eq!(l.node_lens().collect::<Vec<_>>(), [1, 1, 1]);
        l.insert(1, b"c");
        l.insert(2, &big);
        l.set(0, &big);
        l.check();
        assert_eq!(l.len(), 5);
        assert_eq!(l.get(3), Some(&big[..]));
        // Replacing a big element by a small one lets its node merge again.
        l.set(0, b"z");
        l.set(2, b"y");
        l.set(3, b"w");
        l.check();
        assert_eq!(l.node_count(), 1);
        assert_eq!(
            items(&l),
            [
                b"z".to_vec(),
                b"c".to_vec(),
                b"y".to_vec(),
                b"w".to_vec(),
                b"b".to_vec()
            ]
        );
    }

    #[test]
    fn entry_limits_and_the_safety_limit() {
        let mut l = List::new(NodeLimit::from_config(4));
        for i in 0..10u8 {
            l.push_back(&[i]);
        }
        assert_eq!(l.node_lens().collect::<Vec<_>>(), [4, 4, 2]);
        let mut l = List::new(NodeLimit::from_config(1000));
        for _ in 0..100 {
            l.push_back(&[b'x'; 500]);
        }
        l.check();
        assert!(l.node_lens().all(|n| n <= 16));
        let mut l = List::new(NodeLimit::from_config(0));
        for i in 0..5u8 {
            l.push_front(&[i]);
        }
        assert_eq!(l.node_count(), 5);
        l.check();
    }

    /// Pushes 10,000 elements at one end, then pops 150 from it: only the node at
    /// that end keeps room (at most one push and `ROOM_MAX`, after pops at most the
    /// size of its elements), and the elements stay in order.
    fn room_only_at_the_end_pushed(front: bool) {
        let element = |i: usize| format!("element:{i}").into_bytes();
        let mut l = List::default();
        for i in 0..10_000 {
            if front {
                l.push_front(&element(i));
            } else {
                l.push_back(&element(i));
            }
        }
        l.check();
        assert!(l.node_count() > 10);
        let end = if front { 0 } else { l.node_count() - 1 };
        for i in 0..l.node_count() {
            let node = l.nodes.get(i);
            if i == end {
                assert!(node.heap_size() - node.bytes_len() <= pack::ROOM_MAX + 16);
            } else {
                assert_eq!(node.heap_size(), node.bytes_len(), "node {i}");
            }
        }
        for i in (0..10_000).rev().take(150) {
            let popped = if front { l.pop_front() } else { l.pop_back() };
            assert_eq!(popped, Some(element(i)));
            let node = l.nodes.get(if front { 0 } else { l.node_count() - 1 });
            assert!(
                node.heap_size() - node.bytes_len() <= node.bytes_len().max(pack::ROOM_MAX + 16)
            );
        }
        l.check();
        let mut want: Vec<Vec<u8>> = (0..10_000 - 150).map(element).collect();
        if front {
            want.reverse();
        }
        assert_eq!(l.iter().map(<[u8]>::to_vec).collect::<Vec<_>>(), want);
    }

    #[test]
    fn only_the_tail_node_keeps_room_for_pushes() {
        room_only_at_the_end_pushed(false);
    }

    #[test]
    fn only_the_head_node_keeps_room_for_pushes() {
        room_only_at_the_end_pushed(true);
    }

    #[test]
    fn a_small_list_holds_no_spare_capacity() {
        let mut l = List::default();
        for i in 0..20 {
            l.push_back(format!("element:{i}").as_bytes());
            l.push_front(format!("element:{i}").as_bytes());
        }
        let node = l.nodes.get(0);
        assert_eq!(node.heap_size(), node.bytes_len());
    }

    #[test]
    fn repeated_middle_inserts_stay_balanced() {
        let mut l = List::new(NodeLimit::from_config(8));
        for i in 0..100u8 {
            l.push_back(&[i]);
        }
        for i in 0..1000u32 {
            l.insert(50, &i.to_le_bytes());
            l.check();
        }
        // Halving splits keep nodes at least a quarter full on average.
        assert!(l.node_count() <= 1100 / 2, "{} nodes", l.node_count());
    }

    #[test]
    fn bulk_removal_merges_nodes() {
        let mut l = List::new(NodeLimit::from_config(16));
        for i in 0..10_000u32 {
            l.push_back(if i % 10 == 0 { b"keep" } else { b"drop" });
        }
        assert_eq!(l.remove_matching(b"drop", 0, false), 9000);
        l.check();
        assert_eq!(l.len(), 1000);
        assert!(l.node_count() <= 1000 / 16 + 1, "{} nodes", l.node_count());
    }

    #[test]
    fn a_million_elements() {
        let mut l = List::default();
        for i in 0..1_000_000u32 {
            l.push_back(itoa::Buffer::new().format(i).as_bytes());
        }
        assert_eq!(l.get(999_999), Some(&b"999999"[..]));
        assert_eq!(l.get(500_000), Some(&b"500000"[..]));
        assert_eq!(l.iter_from(999_998).count(), 2);
        assert_eq!(l.remove_matching(b"123456", 0, true), 1);
        l.trim(1000, 1000);
        assert_eq!(l.len(), 997_999);
        assert_eq!(l.front(), Some(&b"1000"[..]));
        l.check();
    }

    #[derive(Debug, Clone)]
    enum Op {
        PushBack(Vec<u8>),
        PushFront(Vec<u8>),
        PopBack,
        PopFront,
        Insert(usize, Vec<u8>),
        Remove(usize),
        Set(usize, Vec<u8>),
        DrainFront(usize),
        DrainBack(usize),
        Trim(usize, usize),
        RemoveMatching(Vec<u8>, usize, bool),
        IterFrom(usize),
        Get(usize),
    }

    fn bytes() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            8 => proptest::collection::vec(b'a'..b'd', 0..3),
            2 => proptest::collection::vec(any::<u8>(), 0..40),
            1 => proptest::collection::vec(any::<u8>(), 100..700),
        ]
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => bytes().prop_map(Op::PushBack),
            4 => bytes().prop_map(Op::PushFront),
            2 => Just(Op::PopBack),
            2 => Just(Op::PopFront),
            3 => (0..80usize, bytes()).prop_map(|(i, b)| Op::Insert(i, b)),
            2 => (0..80usize).prop_map(Op::Remove),
            2 => (0..80usize, bytes()).prop_map(|(i, b)| Op::Set(i, b)),
            1 => (0..20usize).prop_map(Op::DrainFront),
            1 => (0..20usize).prop_map(Op::DrainBack),
            1 => (0..10usize, 0..10usize).prop_map(|(a, b)| Op::Trim(a, b)),
            1 => (bytes(), 0..4usize, any::<bool>()).prop_map(|(b, n, r)| Op::RemoveMatching(b, n, r)),
            1 => (0..80usize).prop_map(Op::IterFrom),
            1 => (0..80usize).prop_map(Op::Get),
        ]
    }

    fn limit() -> impl Strategy<Value = NodeLimit> {
        prop_oneof![
            (0i64..6).prop_map(NodeLimit::from_config),
            Just(NodeLimit::Bytes(64)),
            Just(NodeLimit::Bytes(300)),
            Just(NodeLimit::from_config(-1)),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]
        #[test]
        fn behaves_like_a_deque(limit in limit(), ops in proptest::collection::vec(op(), 1..150)) {
            let mut l = List::new(limit);
            let mut m: VecDeque<Vec<u8>> = VecDeque::new();
            for op in ops {
                match op {
                    Op::PushBack(b) => { l.push_back(&b); m.push_back(b); }
                    Op::PushFront(b) => { l.push_front(&b); m.push_front(b); }
                    Op::PopBack => prop_assert_eq!(l.pop_back(), m.pop_back()),
                    Op::PopFront => prop_assert_eq!(l.pop_front(), m.pop_front()),
                    Op::Insert(i, b) => {
                        l.insert(i, &b);
                        m.insert(i.min(m.len()), b);
                    }
                    Op::Remove(i) => prop_assert_eq!(l.remove(i), m.remove(i)),
                    Op::Set(i, b) => {
                        let ok = i < m.len();
                        prop_assert_eq!(l.set(i, &b), ok);
                        if ok { m[i] = b; }
                    }
                    Op::DrainFront(n) => {
                        l.drain_front(n);
                        m.drain(..n.min(m.len()));
                    }
                    Op::DrainBack(n) => {
                        l.drain_back(n);
                        let keep = m.len().saturating_sub(n);
                        m.truncate(keep);
                    }
                    Op::Trim(a, b) => {
                        l.trim(a, b);
                        m.drain(..a.min(m.len()));
                        let keep = m.len().saturating_sub(b);
                        m.truncate(keep);
                    }
                    Op::RemoveMatching(v, n, from_back) => {
                        let mut want = 0;
                        let idx: Vec<usize> = if from_back {
                            (0..m.len()).rev().collect()
                        } else {
                            (0..m.len()).collect()
                        };
                        let mut gone = vec![false; m.len()];
                        for i in idx {
                            if (n == 0 || want < n) && m[i] == v {
                                gone[i] = true;
                                want += 1;
                            }
                        }
                        let mut k = 0;
                        m.retain(|_| { k += 1; !gone[k - 1] });
                        prop_assert_eq!(l.remove_matching(&v, n, from_back), want);
                    }
                    Op::IterFrom(i) => {
                        let got: Vec<&[u8]> = l.iter_from(i).collect();
                        let want: Vec<&[u8]> = m.iter().skip(i).map(Vec::as_slice).collect();
                        prop_assert_eq!(got, want);
                        prop_assert_eq!(l.iter_from(i).len(), m.len().saturating_sub(i));
                    }
                    Op::Get(i) => prop_assert_eq!(l.get(i), m.get(i).map(Vec::as_slice)),
                }
                l.check();
                prop_assert_eq!(l.len(), m.len());
                let want: Vec<&[u8]> = m.iter().map(Vec::as_slice).collect();
                let fwd: Vec<&[u8]> = l.iter().collect();
                prop_assert_eq!(&fwd, &want);
                let mut rev: Vec<&[u8]> = l.iter().rev().collect();
                rev.reverse();
                prop_assert_eq!(&rev, &want);
                prop_assert_eq!(l.front(), m.front().map(Vec::as_slice));
                prop_assert_eq!(l.back(), m.back().map(Vec::as_slice));
            }
            let copy = l.clone();
            copy.check();
            prop_assert_eq!(&copy, &l);
        }

        #[test]
        fn iterators_meet_in_the_middle(limit in limit(), n in 0usize..60, take in 0usize..70) {
            let l = List::from_items(limit, (0..n).map(|i| (i as u32).to_le_bytes()));
            let mut it = l.iter();
            let mut seen = Vec::new();
            for k in 0..take {
                let e = if k % 3 == 0 { it.next_back() } else { it.next() };
                if let Some(e) = e { seen.push(e.to_vec()); }
                prop_assert_eq!(it.len(), n - seen.len());
            }
            seen.extend(it.map(<[u8]>::to_vec));
            seen.sort();
            let mut want: Vec<Vec<u8>> = (0..n).map(|i| (i as u32).to_le_bytes().to_vec()).collect();
            want.sort();
            prop_assert_eq!(seen, want);
        }
    }
}
