//! `ScoreTree`: the ordered half of a big sorted set — a counted B+tree of
//! `(score, member)` items.
//!
//! # Concept
//!
//! Items live in leaves, sorted by score and then by member bytes; leaves are linked both
//! ways so ranges are walked without going back up. Inner nodes hold, for each child, the
//! number of items below it, so finding the item of a given rank, or the rank of an
//! item, is one descent: O(log N) with a fan-out of 64. Nodes live in one arena vector
//! and refer to each other by index; freed slots are reused.
//!
//! A B+tree was chosen over Redis's skiplist for memory and locality: an item costs 32
//! bytes in a leaf, and a skiplist node needs links and a span per level besides. An
//! over-full leaf first hands items to a neighbour with room (as a B*-tree does), so
//! scattered insertions leave leaves about four fifths full; appends at either end of
//! the order (timestamps as scores) fill them completely. A million short members cost
//! about 104 (in order) to 111 (scattered) bytes each with the member dict, against
//! Redis 7.0's 109.
//!
//! # Invariants
//!
//! - Every leaf is at the same depth. Inner nodes have `keys.len() + 1 == children.len()
//!   == sizes.len()`, and `sizes[i]` is the number of items under `children[i]`.
//! - Items under `children[i]` are `< keys[i]`, and items under `children[i + 1]` are
//!   `>= keys[i]` (a separator need not be an item still present).
//! - Nodes other than the root and the nodes on the path to the first or last item hold
//!   at least a quarter of their capacity; the root is a leaf or has two children or more.
//! - `item_heap` and `sep_heap` are the heap held by the members of items and of
//!   separators.

use std::cmp::Ordering;

use crate::compact::CompactBytes;

const NIL: u32 = u32::MAX;
/// Items per leaf: one more makes 64 items of 32 bytes, an allocator size class.
const LEAF_MAX: usize = 63;
const LEAF_MIN: usize = LEAF_MAX / 4;
/// Children per inner node.
const INNER_MAX: usize = 64;
const INNER_MIN: usize = INNER_MAX / 4;

/// One element: a score and a member.
#[derive(Clone, Debug)]
pub struct Item {
    pub score: f64,
    pub member: CompactBytes,
}

impl Item {
    pub fn new(score: f64, member: &[u8]) -> Item {
        Item {
            score,
            member: CompactBytes::new(member),
        }
    }

    /// How this item orders against `(score, member)`: by score, then by member bytes.
    /// Scores are never NaN, and -0 equals 0 as in Redis.
    #[inline]
    pub fn cmp_key(&self, score: f64, member: &[u8]) -> Ordering {
        match self.score.partial_cmp(&score) {
            Some(Ordering::Equal) | None => self.member.as_bytes().cmp(member),
            Some(o) => o,
        }
    }

    #[inline]
    fn lt(&self, other: &Item) -> bool {
        self.cmp_key(other.score, &other.member) == Ordering::Less
    }
}

struct Leaf {
    items: Vec<Item>,
    prev: u32,
    next: u32,
}

struct Inner {
    keys: Vec<Item>,
    children: Vec<u32>,
    sizes: Vec<usize>,
}

enum Node {
    Leaf(Leaf),
    Inner(Inner),
    Free,
}

impl Node {
    /// Items in a leaf, children of an inner node.
    fn fill(&self) -> usize {
        match self {
            Node::Leaf(l) => l.items.len(),
            Node::Inner(n) => n.children.len(),
            Node::Free => 0,
        }
    }
}

/// Which end of the order an insertion grew, so splits can leave full nodes behind.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Skew {
    None,
    Left,
    Right,
}

struct Split {
    sep: Item,
    right: u32,
    skew: Skew,
}

/// How a removal finds its item.
#[derive(Clone, Copy)]
enum Find<'a> {
    Key(f64, &'a [u8]),
    Rank(usize),
}

/// A counted B+tree of items (see the module docs).
pub struct ScoreTree {
    nodes: Vec<Node>,
    free: Vec<u32>,
    root: u32,
    head: u32,
    tail: u32,
    len: usize,
    item_heap: usize,
    sep_heap: usize,
}

impl Default for ScoreTree {
    fn default() -> Self {
        ScoreTree::new()
    }
}

impl ScoreTree {
    pub fn new() -> ScoreTree {
        ScoreTree {
            nodes: Vec::new(),
            free: Vec::new(),
            root: NIL,
            head: NIL,
            tail: NIL,
            len: 0,
            item_heap: 0,
            sep_heap: 0,
        }
    }

    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn alloc(&mut self, node: Node) -> u32 {
        match self.free.pop() {
            Some(id) => {
                self.nodes[id as usize] = node;
                id
            }
            None => {
                self.nodes.push(node);
                (self.nodes.len() - 1) as u32
            }
        }
    }

    fn release(&mut self, id: u32) -> Node {
        self.free.push(id);
        std::mem::replace(&mut self.nodes[id as usize], Node::Free)
    }

    fn take(&mut self, id: u32) -> Node {
        std::mem::replace(&mut self.nodes[id as usize], Node::Free)
    }

    fn put(&mut self, id: u32, node: Node) {
        self.nodes[id as usize] = node;
    }

    fn leaf(&self, id: u32) -> Option<&Leaf> {
        match self.nodes.get(id as usize) {
            Some(Node::Leaf(l)) => Some(l),
            _ => None,
        }
    }

    fn leaf_mut(&mut self, id: u32) -> Option<&mut Leaf> {
        match self.nodes.get_mut(id as usize) {
            Some(Node::Leaf(l)) => Some(l),
            _ => None,
        }
    }

    fn inner_mut(&mut self, id: u32) -> Option<&mut Inner> {
        match self.nodes.get_mut(id as usize) {
            Some(Node::Inner(n)) => Some(n),
            _ => None,
        }
    }

    /// Items under node `id`.
    fn size_of(&self, id: u32) -> usize {
        match &self.nodes[id as usize] {
            Node::Leaf(l) => l.items.len(),
            Node::Inner(n) => n.sizes.iter().sum(),
            Node::Free => 0,
        }
    }

    /// A copy of `item` to serve as a separator.
    fn separator(&mut self, item: &Item) -> Item {
        self.sep_heap += item.member.heap_size();
        item.clone()
    }

    fn drop_separator(&mut self, sep: Item) {
        self.sep_heap -= sep.member.heap_size();
    }

    /// Inserts an item; the caller guarantees that its member is not in the tree.
    pub fn insert(&mut self, score: f64, member: &[u8]) {
        let item = Item::new(score, member);
        self.item_heap += item.member.heap_size();
        self.len += 1;
        if self.root == NIL {
            let id = self.alloc(Node::Leaf(Leaf {
                items: vec![item],
                prev: NIL,
                next: NIL,
            }));
            self.root = id;
            self.head = id;
            self.tail = id;
            return;
        }
        if let Some(split) = self.insert_into(self.root, item) {
            let old = self.root;
            let sizes = vec![self.size_of(old), self.size_of(split.right)];
            self.root = self.alloc(Node::Inner(Inner {
                keys: vec![split.sep],
                children: vec![old, split.right],
                sizes,
            }));
        }
    }

    fn insert_into(&mut self, id: u32, item: Item) -> Option<Split> {
        let child = match &mut self.nodes[id as usize] {
            Node::Leaf(_) => {
                let pos = self.insert_into_leaf(id, item)?;
                return self.split_leaf(id, pos);
            }
            Node::Inner(n) => {
                let i = n.keys.partition_point(|k| !item.lt(k));
                n.sizes[i] += 1;
                (i, n.children[i])
            }
            Node::Free => return None,
        };
        let (i, child) = child;
        let split = if matches!(self.nodes[child as usize], Node::Leaf(_)) {
            let pos = self.insert_into_leaf(child, item)?;
            if self.spill(id, i) {
                return None;
            }
            self.split_leaf(child, pos)?
        } else {
            self.insert_into(child, item)?
        };
        let right_size = self.size_of(split.right);
        let n = self.inner_mut(id)?;
        n.sizes[i] -= right_size;
        n.keys.insert(i, split.sep);
        n.children.insert(i + 1, split.right);
        n.sizes.insert(i + 1, right_size);
        let count = n.children.len();
        if count <= INNER_MAX {
            return None;
        }
        let (at, skew) = match split.skew {
            Skew::Right if i + 1 == count - 1 => (INNER_MAX, Skew::Right),
            Skew::Left if i == 0 => (1, Skew::Left),
            _ => (count / 2, Skew::None),
        };
        let children = n.children.split_off(at);
        let sizes = n.sizes.split_off(at);
        let mut keys = n.keys.split_off(at - 1);
        let sep = keys.remove(0);
        let right = self.alloc(Node::Inner(Inner {
            keys,
            children,
            sizes,
        }));
        Some(Split { sep, right, skew })
    }

    /// Inserts into a leaf; returns the position if the leaf is now over-full.
    fn insert_into_leaf(&mut self, id: u32, item: Item) -> Option<usize> {
        let leaf = self.leaf_mut(id)?;
        let pos = leaf.items.partition_point(|x| x.lt(&item));
        // Vectors grow by doubling up to LEAF_MAX + 1, a power of two: allocator size
        // classes, so the capacity counted is the memory used.
        leaf.items.insert(pos, item);
        (leaf.items.len() > LEAF_MAX).then_some(pos)
    }

    /// Moves items of the over-full leaf `children[i]` of `parent` to a sibling with
    /// room, B*-tree style, so that scattered insertions leave leaves fuller than
    /// splits alone would. Returns whether it did.
    fn spill(&mut self, parent: u32, i: usize) -> bool {
        let Node::Inner(p) = &self.nodes[parent as usize] else {
            return false;
        };
        let child = p.children[i];
        let left = (i > 0).then(|| p.children[i - 1]);
        let right = p.children.get(i + 1).copied();
        let has_room = |t: &ScoreTree, id: Option<u32>| {
            id.and_then(|id| t.leaf(id))
                .is_some_and(|l| l.items.len() < LEAF_MAX)
        };
        let (j, into_left) = if has_room(self, left) {
            (i - 1, true)
        } else if has_room(self, right) {
            (i, false)
        } else {
            return false;
        };
        let Node::Inner(mut p) = self.take(parent) else {
            return false;
        };
        let (l_id, r_id) = (p.children[j], p.children[j + 1]);
        let (Node::Leaf(mut l), Node::Leaf(mut r)) = (self.take(l_id), self.take(r_id)) else {
            self.put(parent, Node::Inner(p));
            return false;
        };
        let target = (l.items.len() + r.items.len()) / 2;
        if into_left {
            let k = target.saturating_sub(l.items.len()).max(1);
            l.items.extend(r.items.drain(..k));
        } else {
            let keep = (l.items.len() + r.items.len()) - target;
            let tail = l.items.split_off(keep.min(l.items.len() - 1));
            r.items.splice(0..0, tail);
        }
        let sep = self.separator(&r.items[0]);
        let old = std::mem::replace(&mut p.keys[j], sep);
        self.drop_separator(old);
        p.sizes[j] = l.items.len();
        p.sizes[j + 1] = r.items.len();
        debug_assert!(child == l_id || child == r_id);
        self.put(l_id, Node::Leaf(l));
        self.put(r_id, Node::Leaf(r));
        self.put(parent, Node::Inner(p));
        true
    }

    /// Splits an over-full leaf whose newest item went to `pos`.
    fn split_leaf(&mut self, id: u32, pos: usize) -> Option<Split> {
        let leaf = self.leaf_mut(id)?;
        let count = leaf.items.len();
        let (at, skew) = if pos == count - 1 && leaf.next == NIL {
            (LEAF_MAX, Skew::Right)
        } else if pos == 0 && leaf.prev == NIL {
            (1, Skew::Left)
        } else {
            (count / 2, Skew::None)
        };
        let items = leaf.items.split_off(at);
        let next = leaf.next;
        let sep = self.separator(&items[0]);
        let right = self.alloc(Node::Leaf(Leaf {
            items,
            prev: id,
            next,
        }));
        if let Some(l) = self.leaf_mut(id) {
            l.next = right;
        }
        match self.leaf_mut(next) {
            Some(n) => n.prev = right,
            None => self.tail = right,
        }
        Some(Split { sep, right, skew })
    }

    /// Removes the item `(score, member)`; false if it is not in the tree.
    pub fn remove(&mut self, score: f64, member: &[u8]) -> bool {
        self.remove_found(Find::Key(score, member)).is_some()
    }

    /// Removes and returns the item of rank `rank`.
    pub fn remove_rank(&mut self, rank: usize) -> Option<Item> {
        if rank >= self.len {
            return None;
        }
        self.remove_found(Find::Rank(rank))
    }

    fn remove_found(&mut self, find: Find) -> Option<Item> {
        if self.root == NIL {
            return None;
        }
        let item = self.remove_from(self.root, find)?;
        self.len -= 1;
        self.item_heap -= item.member.heap_size();
        // Shrink the tree from the top: an inner root with one child, or an empty leaf.
        loop {
            match &self.nodes[self.root as usize] {
                Node::Inner(n) if n.children.len() == 1 => {
                    let child = n.children[0];
                    self.release(self.root);
                    self.root = child;
                }
                Node::Leaf(l) if l.items.is_empty() => {
                    self.release(self.root);
                    self.root = NIL;
                    self.head = NIL;
                    self.tail = NIL;
                    break;
                }
                _ => break,
            }
        }
        Some(item)
    }

    fn remove_from(&mut self, id: u32, find: Find) -> Option<Item> {
        let (i, child, sub) = match &mut self.nodes[id as usize] {
            Node::Leaf(l) => {
                let pos = match find {
                    Find::Key(s, m) => l.items.binary_search_by(|x| x.cmp_key(s, m)).ok()?,
                    Find::Rank(r) => r,
                };
                if pos >= l.items.len() {
                    return None;
                }
                return Some(l.items.remove(pos));
            }
            Node::Inner(n) => match find {
                Find::Key(s, m) => {
                    let i = n
                        .keys
                        .partition_point(|k| k.cmp_key(s, m) != Ordering::Greater);
                    (i, n.children[i], find)
                }
                Find::Rank(mut r) => {
                    let mut i = 0;
                    while i + 1 < n.sizes.len() && r >= n.sizes[i] {
                        r -= n.sizes[i];
                        i += 1;
                    }
                    (i, n.children[i], Find::Rank(r))
                }
            },
            Node::Free => return None,
        };
        let item = self.remove_from(child, sub)?;
        if let Some(n) = self.inner_mut(id) {
            n.sizes[i] -= 1;
        }
        self.rebalance(id, i);
        Some(item)
    }

    /// Restores the minimum fill of child `i` of `parent` by merging it with a sibling
    /// or moving items over from one.
    fn rebalance(&mut self, parent: u32, i: usize) {
        let Node::Inner(p) = &self.nodes[parent as usize] else {
            return;
        };
        let child = p.children[i];
        let min = match &self.nodes[child as usize] {
            Node::Leaf(_) => LEAF_MIN,
            _ => INNER_MIN,
        };
        if self.nodes[child as usize].fill() >= min || p.children.len() < 2 {
            return;
        }
        let j = if i > 0 { i - 1 } else { i };
        let (left, right) = (p.children[j], p.children[j + 1]);
        let Node::Inner(mut p) = self.take(parent) else {
            return;
        };
        let mut l = self.take(left);
        let mut r = self.take(right);
        let max = if min == LEAF_MIN { LEAF_MAX } else { INNER_MAX };
        if l.fill() + r.fill() <= max {
            let sep = p.keys.remove(j);
            p.children.remove(j + 1);
            let moved = p.sizes.remove(j + 1);
            p.sizes[j] += moved;
            match (&mut l, r) {
                (Node::Leaf(l), Node::Leaf(mut r)) => {
                    l.items.append(&mut r.items);
                    l.next = r.next;
                    self.drop_separator(sep);
                    match self.leaf_mut(r.next) {
                        Some(n) => n.prev = left,
                        None => self.tail = left,
                    }
                }
                (Node::Inner(l), Node::Inner(mut r)) => {
                    l.keys.push(sep);
                    l.keys.append(&mut r.keys);
                    l.children.append(&mut r.children);
                    l.sizes.append(&mut r.sizes);
                }
                _ => {}
            }
            self.release(right);
        } else {
            match (&mut l, &mut r) {
                (Node::Leaf(l), Node::Leaf(r)) => {
                    let target = (l.items.len() + r.items.len()) / 2;
                    if l.items.len() < target {
                        let k = target - l.items.len();
                        l.items.extend(r.items.drain(..k));
                    } else {
                        let tail = l.items.split_off(target);
                        r.items.splice(0..0, tail);
                    }
                    let sep = self.separator(&r.items[0]);
                    let old = std::mem::replace(&mut p.keys[j], sep);
                    self.drop_separator(old);
                    p.sizes[j] = l.items.len();
                    p.sizes[j + 1] = r.items.len();
                }
                (Node::Inner(l), Node::Inner(r)) => {
                    let target = (l.children.len() + r.children.len()) / 2;
                    // Rotate children through the parent's separator.
                    while l.children.len() < target {
                        let sep = std::mem::replace(&mut p.keys[j], r.keys.remove(0));
                        l.keys.push(sep);
                        l.children.push(r.children.remove(0));
                        l.sizes.push(r.sizes.remove(0));
                    }
                    while l.children.len() > target {
                        let (Some(key), Some(c), Some(s)) =
                            (l.keys.pop(), l.children.pop(), l.sizes.pop())
                        else {
                            break;
                        };
                        let sep = std::mem::replace(&mut p.keys[j], key);
                        r.keys.insert(0, sep);
                        r.children.insert(0, c);
                        r.sizes.insert(0, s);
                    }
                    p.sizes[j] = l.sizes.iter().sum();
                    p.sizes[j + 1] = r.sizes.iter().sum();
                }
                _ => {}
            }
            self.put(right, r);
        }
        self.put(left, l);
        self.put(parent, Node::Inner(p));
    }

    /// The number of items for which `before` holds, where `before` is true for a
    /// prefix of the order and false after it (a lower bound's rank).
    pub fn count_before(&self, before: impl Fn(&Item) -> bool) -> usize {
        let mut rank = 0;
        let mut id = self.root;
        loop {
            match self.nodes.get(id as usize) {
                Some(Node::Inner(n)) => {
                    let i = n.keys.partition_point(&before);
                    rank += n.sizes[..i].iter().sum::<usize>();
                    id = n.children[i];
                }
                Some(Node::Leaf(l)) => return rank + l.items.partition_point(&before),
                _ => return rank,
            }
        }
    }

    /// The rank of `(score, member)`, if it is in the tree.
    pub fn rank(&self, score: f64, member: &[u8]) -> Option<usize> {
        let rank = self.count_before(|x| x.cmp_key(score, member) == Ordering::Less);
        let item = self.get(rank)?;
        (item.cmp_key(score, member) == Ordering::Equal).then_some(rank)
    }

    /// The leaf holding rank `rank`, and the offset in it.
    fn locate(&self, mut rank: usize) -> Option<(u32, usize)> {
        if rank >= self.len {
            return None;
        }
        let mut id = self.root;
        loop {
            match self.nodes.get(id as usize)? {
                Node::Inner(n) => {
                    let mut i = 0;
                    while i + 1 < n.sizes.len() && rank >= n.sizes[i] {
                        rank -= n.sizes[i];
                        i += 1;
                    }
                    id = n.children[i];
                }
                Node::Leaf(_) => return Some((id, rank)),
                Node::Free => return None,
            }
        }
    }

    /// The item of rank `rank`.
    pub fn get(&self, rank: usize) -> Option<&Item> {
        let (leaf, at) = self.locate(rank)?;
        self.leaf(leaf)?.items.get(at)
    }

    /// The items from rank `rank` to the end (`rev == false`) or to the start.
    pub fn iter_from(&self, rank: usize, rev: bool) -> Iter<'_> {
        let (leaf, pos) = self.locate(rank).unwrap_or((NIL, 0));
        let remaining = if leaf == NIL {
            0
        } else if rev {
            rank + 1
        } else {
            self.len - rank
        };
        Iter {
            tree: self,
            leaf,
            pos,
            remaining,
            rev,
        }
    }

    /// Removes `count` items from rank `start` on, calling `removed` with each.
    pub fn remove_range(&mut self, start: usize, count: usize, mut removed: impl FnMut(Item)) {
        let count = count.min(self.len.saturating_sub(start));
        if count == 0 {
            return;
        }
        if count.saturating_mul(4) < self.len {
            for _ in 0..count {
                if let Some(item) = self.remove_rank(start) {
                    removed(item);
                }
            }
            return;
        }
        // A big share of the tree goes: rebuilding from what stays is linear.
        let all = self.drain();
        let mut kept = Vec::with_capacity(all.len() - count);
        for (i, item) in all.into_iter().enumerate() {
            if i >= start && i < start + count {
                removed(item);
            } else {
                kept.push(item);
            }
        }
        *self = ScoreTree::from_sorted(kept);
    }

    /// Empties the tree, returning its items in order.
    pub fn drain(&mut self) -> Vec<Item> {
        let mut out = Vec::with_capacity(self.len);
        let mut id = self.head;
        while let Some(leaf) = self.leaf_mut(id) {
            out.append(&mut leaf.items);
            id = leaf.next;
        }
        *self = ScoreTree::new();
        out
    }

    /// A tree of items already in order, built bottom-up in linear time.
    pub fn from_sorted(items: Vec<Item>) -> ScoreTree {
        let mut tree = ScoreTree::new();
        let n = items.len();
        if n == 0 {
            return tree;
        }
        tree.len = n;
        tree.item_heap = items.iter().map(|i| i.member.heap_size()).sum();
        // Level 0: leaves, spread evenly so that none is under-full.
        let mut level: Vec<(u32, usize, Item)> = Vec::new();
        let mut items = items.into_iter();
        let mut prev = NIL;
        for chunk in even_chunks(n, LEAF_MAX) {
            let leaf_items: Vec<Item> = items.by_ref().take(chunk).collect();
            let first = tree.separator(&leaf_items[0]);
            let id = tree.alloc(Node::Leaf(Leaf {
                items: leaf_items,
                prev,
                next: NIL,
            }));
            if let Some(p) = tree.leaf_mut(prev) {
                p.next = id;
            } else {
                tree.head = id;
            }
            prev = id;
            level.push((id, chunk, first));
        }
        tree.tail = prev;
        while level.len() > 1 {
            let mut next_level = Vec::new();
            let mut nodes = level.into_iter();
            let count = nodes.len();
            for chunk in even_chunks(count, INNER_MAX) {
                let group: Vec<(u32, usize, Item)> = nodes.by_ref().take(chunk).collect();
                let mut keys = Vec::with_capacity(chunk - 1);
                let mut children = Vec::with_capacity(chunk);
                let mut sizes = Vec::with_capacity(chunk);
                let mut first = None;
                for (k, (id, size, lowest)) in group.into_iter().enumerate() {
                    if k == 0 {
                        first = Some(lowest);
                    } else {
                        keys.push(lowest);
                    }
                    children.push(id);
                    sizes.push(size);
                }
                let size = sizes.iter().sum();
                let id = tree.alloc(Node::Inner(Inner {
                    keys,
                    children,
                    sizes,
                }));
                if let Some(first) = first {
                    next_level.push((id, size, first));
                }
            }
            level = next_level;
        }
        if let Some((root, _, first)) = level.pop() {
            tree.root = root;
            tree.drop_separator(first);
        }
        tree
    }

    /// Bytes held on the heap: the arena, the nodes' vectors and the members.
    pub fn heap_size(&self) -> usize {
        let nodes: usize = self
            .nodes
            .iter()
            .map(|n| match n {
                Node::Leaf(l) => l.items.capacity() * std::mem::size_of::<Item>(),
                Node::Inner(n) => {
                    n.keys.capacity() * std::mem::size_of::<Item>()
                        + n.children.capacity() * std::mem::size_of::<u32>()
                        + n.sizes.capacity() * std::mem::size_of::<usize>()
                }
                Node::Free => 0,
            })
            .sum();
        self.nodes.capacity() * std::mem::size_of::<Node>()
            + self.free.capacity() * std::mem::size_of::<u32>()
            + nodes
            + self.item_heap
            + self.sep_heap
    }

    /// Heap held by the items' members alone.
    pub fn item_heap(&self) -> usize {
        self.item_heap
    }

    /// Checks every invariant of the module docs (tests only).
    #[cfg(test)]
    pub(crate) fn check(&self) {
        if self.root == NIL {
            assert_eq!(self.len, 0);
            assert_eq!(self.head, NIL);
            return;
        }
        let (mut items, mut seps) = (0, 0);
        let (size, _) = self.check_node(self.root, None, None, true, &mut items, &mut seps);
        assert_eq!(size, self.len);
        // The leaf chain visits every item in order, both ways.
        let fwd: Vec<&Item> = self.iter_from(0, false).collect();
        assert_eq!(fwd.len(), self.len);
        for w in fwd.windows(2) {
            assert!(w[0].lt(w[1]));
        }
        let mut back: Vec<&Item> = self.iter_from(self.len - 1, true).collect();
        back.reverse();
        assert_eq!(back.len(), self.len);
        for (a, b) in fwd.iter().zip(&back) {
            assert!(std::ptr::eq(*a, *b));
        }
        let mut n = 0;
        let mut id = self.tail;
        while let Some(l) = self.leaf(id) {
            n += l.items.len();
            id = l.prev;
        }
        assert_eq!(n, self.len);
        assert_eq!(items, self.item_heap);
        assert_eq!(seps, self.sep_heap);
    }

    #[cfg(test)]
    fn check_node(
        &self,
        id: u32,
        low: Option<&Item>,
        high: Option<&Item>,
        is_root: bool,
        items: &mut usize,
        seps: &mut usize,
    ) -> (usize, usize) {
        let in_bounds = |x: &Item| low.is_none_or(|l| !x.lt(l)) && high.is_none_or(|h| x.lt(h));
        match &self.nodes[id as usize] {
            Node::Leaf(l) => {
                assert!(!l.items.is_empty() || is_root);
                assert!(l.items.len() <= LEAF_MAX);
                for x in &l.items {
                    assert!(in_bounds(x));
                    *items += x.member.heap_size();
                }
                (l.items.len(), 0)
            }
            Node::Inner(n) => {
                assert_eq!(n.keys.len() + 1, n.children.len());
                assert_eq!(n.children.len(), n.sizes.len());
                assert!(n.children.len() <= INNER_MAX);
                assert!(n.children.len() >= 2 || !is_root);
                let mut total = 0;
                let mut depth = None;
                for (i, &c) in n.children.iter().enumerate() {
                    let lo = if i == 0 { low } else { Some(&n.keys[i - 1]) };
                    let hi = if i == n.keys.len() {
                        high
                    } else {
                        Some(&n.keys[i])
                    };
                    let (size, d) = self.check_node(c, lo, hi, false, items, seps);
                    assert_eq!(size, n.sizes[i]);
                    assert!(depth.is_none_or(|x| x == d), "leaves at different depths");
                    depth = Some(d);
                    total += size;
                }
                for k in &n.keys {
                    *seps += k.member.heap_size();
                }
                (total, depth.unwrap_or(0) + 1)
            }
            Node::Free => panic!("free node reachable"),
        }
    }
}

/// Splits `n` items into the fewest chunks of at most `max`, of nearly equal sizes.
fn even_chunks(n: usize, max: usize) -> impl Iterator<Item = usize> {
    let chunks = n.div_ceil(max).max(1);
    let (base, extra) = (n / chunks, n % chunks);
    (0..chunks).map(move |k| base + usize::from(k < extra))
}

/// Items in order from a starting rank, forwards or backwards.
pub struct Iter<'a> {
    tree: &'a ScoreTree,
    leaf: u32,
    pos: usize,
    remaining: usize,
    rev: bool,
}

impl<'a> Iterator for Iter<'a> {
    type Item = &'a Item;

    #[inline]
    fn next(&mut self) -> Option<&'a Item> {
        if self.remaining == 0 {
            return None;
        }
        let leaf = self.tree.leaf(self.leaf)?;
        let item = leaf.items.get(self.pos)?;
        self.remaining -= 1;
        if self.rev {
            if self.pos == 0 {
                self.leaf = leaf.prev;
                self.pos = self
                    .tree
                    .leaf(leaf.prev)
                    .map_or(0, |l| l.items.len().saturating_sub(1));
            } else {
                self.pos -= 1;
            }
        } else if self.pos + 1 == leaf.items.len() {
            self.leaf = leaf.next;
            self.pos = 0;
        } else {
            self.pos += 1;
        }
        Some(item)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.remaining, Some(self.remaining))
    }
}

impl ExactSizeIterator for Iter<'_> {}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    /// The reference: a BTreeMap keyed by (score bits made orderable, member).
    #[derive(Default)]
    struct Model(BTreeMap<(OrdF64, Vec<u8>), ()>);

    #[derive(Clone, Copy, PartialEq, Debug)]
    struct OrdF64(f64);
    impl Eq for OrdF64 {}
    impl PartialOrd for OrdF64 {
        fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
            Some(self.cmp(other))
        }
    }
    impl Ord for OrdF64 {
        fn cmp(&self, other: &Self) -> Ordering {
            self.0.partial_cmp(&other.0).unwrap_or(Ordering::Equal)
        }
    }

    impl Model {
        fn items(&self) -> Vec<(f64, Vec<u8>)> {
            self.0.keys().map(|(s, m)| (s.0, m.clone())).collect()
        }
    }

    fn items(t: &ScoreTree) -> Vec<(f64, Vec<u8>)> {
        t.iter_from(0, false)
            .map(|i| (i.score, i.member.to_vec()))
            .collect()
    }

    #[test]
    fn sequential_inserts_fill_leaves() {
        let mut t = ScoreTree::new();
        for i in 0..10_000 {
            t.insert(i as f64, format!("m{i}").as_bytes());
        }
        t.check();
        let leaves = t
            .nodes
            .iter()
            .filter(|n| matches!(n, Node::Leaf(_)))
            .count();
        assert!(leaves <= 10_000 / LEAF_MAX + 2, "{leaves} leaves");
        for i in (0..10_000).rev() {
            t.insert(-(i as f64) - 1.0, format!("n{i}").as_bytes());
        }
        t.check();
        assert_eq!(t.len(), 20_000);
        assert_eq!(t.get(0).map(|i| i.score), Some(-10_000.0));
        assert_eq!(t.rank(5.0, b"m5"), Some(10_005));
        assert_eq!(t.rank(5.0, b"m6"), None);
    }

    #[test]
    fn removal_shrinks_to_nothing() {
        let mut t = ScoreTree::new();
        for i in 0..5000u32 {
            t.insert((i % 97) as f64, &i.to_be_bytes());
        }
        t.check();
        for i in (0..5000u32).step_by(2) {
            assert!(t.remove((i % 97) as f64, &i.to_be_bytes()));
        }
        t.check();
        for i in (1..5000u32).step_by(2) {
            assert!(t.remove((i % 97) as f64, &i.to_be_bytes()));
            if i % 512 == 1 {
                t.check();
            }
        }
        assert!(t.is_empty());
        t.check();
        assert_eq!(t.free.len(), t.nodes.len());
    }

    #[test]
    fn bulk_build_and_range_removal() {
        for n in [0usize, 1, 63, 64, 65, 129, 4096, 4097, 70_000] {
            let items: Vec<Item> = (0..n)
                .map(|i| Item::new(i as f64, format!("{i:08}").as_bytes()))
                .collect();
            let mut t = ScoreTree::from_sorted(items);
            t.check();
            assert_eq!(t.len(), n);
            let mut gone = 0;
            t.remove_range(n / 3, n / 2, |_| gone += 1);
            assert_eq!(gone, n / 2);
            t.check();
            t.remove_range(0, 3, |_| gone += 1);
            t.check();
        }
    }

    #[derive(Debug, Clone)]
    enum Op {
        Insert(i8, u16),
        Remove(i8, u16),
        RemoveRank(u16),
        RemoveRange(u16, u16),
        Rebuild,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            6 => (any::<i8>(), 0..600u16).prop_map(|(s, m)| Op::Insert(s, m)),
            3 => (any::<i8>(), 0..600u16).prop_map(|(s, m)| Op::Remove(s, m)),
            1 => (0..700u16).prop_map(Op::RemoveRank),
            1 => (0..700u16, 0..200u16).prop_map(|(a, b)| Op::RemoveRange(a, b)),
            1 => Just(Op::Rebuild),
        ]
    }

    fn member(m: u16) -> Vec<u8> {
        // Some members are long enough to live on the heap.
        if m.is_multiple_of(7) {
            format!("a-long-member-name-that-is-not-inline-{m}").into_bytes()
        } else {
            format!("m{m}").into_bytes()
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]
        #[test]
        fn behaves_like_a_btreemap(ops in proptest::collection::vec(op(), 1..2500)) {
            let mut t = ScoreTree::new();
            let mut m = Model::default();
            // Members are unique in a sorted set: remember each member's score.
            let mut scores: BTreeMap<Vec<u8>, f64> = BTreeMap::new();
            for op in ops {
                match op {
                    Op::Insert(s, k) => {
                        let mem = member(k);
                        let s = f64::from(s / 8);
                        if let Some(old) = scores.insert(mem.clone(), s) {
                            prop_assert!(t.remove(old, &mem));
                            m.0.remove(&(OrdF64(old), mem.clone()));
                        }
                        t.insert(s, &mem);
                        m.0.insert((OrdF64(s), mem), ());
                    }
                    Op::Remove(s, k) => {
                        let mem = member(k);
                        let s = f64::from(s / 8);
                        let present = m.0.remove(&(OrdF64(s), mem.clone())).is_some();
                        if present { scores.remove(&mem); }
                        prop_assert_eq!(t.remove(s, &mem), present);
                    }
                    Op::RemoveRank(r) => {
                        let r = r as usize;
                        let want = m.0.keys().nth(r).cloned();
                        let got = t.remove_rank(r).map(|i| (OrdF64(i.score), i.member.to_vec()));
                        prop_assert_eq!(&got, &want);
                        if let Some(k) = want { scores.remove(&k.1); m.0.remove(&k); }
                    }
                    Op::RemoveRange(a, n) => {
                        let want: Vec<_> = m.0.keys().skip(a as usize).take(n as usize).cloned().collect();
                        let mut got = Vec::new();
                        t.remove_range(a as usize, n as usize, |i| got.push((OrdF64(i.score), i.member.to_vec())));
                        prop_assert_eq!(&got, &want);
                        for k in want { scores.remove(&k.1); m.0.remove(&k); }
                    }
                    Op::Rebuild => {
                        let all = t.drain();
                        t = ScoreTree::from_sorted(all);
                    }
                }
                prop_assert_eq!(t.len(), m.0.len());
            }
            t.check();
            let want = m.items();
            prop_assert_eq!(items(&t), want.clone());
            for (r, (s, mem)) in want.iter().enumerate() {
                prop_assert_eq!(t.rank(*s, mem), Some(r));
                prop_assert_eq!(t.get(r).map(|i| i.member.to_vec()), Some(mem.clone()));
                let below = t.count_before(|x| x.score < *s);
                prop_assert_eq!(below, want.iter().filter(|(x, _)| x < s).count());
            }
            if !want.is_empty() {
                let back: Vec<_> = t.iter_from(want.len() - 1, true).map(|i| i.member.to_vec()).collect();
                let mut exp: Vec<_> = want.iter().map(|(_, m)| m.clone()).collect();
                exp.reverse();
                prop_assert_eq!(back, exp);
            }
        }
    }
}
