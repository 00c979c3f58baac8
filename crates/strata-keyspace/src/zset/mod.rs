//! `ZSet`: a sorted set — unique members, each with a score, ordered by score and then
//! by member bytes — in Redis's two encodings.
//!
//! - "listpack": small sets live in one [`ForwardPack`] of member/score pairs kept in order
//!   (see [`listpack`]). Lookups and updates are linear walks.
//! - "skiplist": past `zset-max-listpack-entries` members, or once a member is longer
//!   than `zset-max-listpack-value`, the set converts (for good) to a [`Dict`] from
//!   member to score, for O(1) ZSCORE, beside an order-statistic tree of the items
//!   ([`tree::ScoreTree`]) for O(log N) insertion, removal, rank and range lookups.
//!   OBJECT ENCODING calls it "skiplist", as Redis does.
//!
//! Positions are ranks: 0 is the lowest item. Range lookups return the rank where a
//! range starts or ends, and callers walk from there with [`ZSet::iter_from`].
//!
//! # Invariants
//!
//! - No score is NaN.
//! - In the big encoding the dict and the tree hold the same (member, score) pairs.
//! - A listpack holds at most `zset-max-listpack-entries` pairs and no member longer
//!   than `zset-max-listpack-value` — as of its last insertion: the limits are
//!   configurable, and a set never converts back on its own, as in Redis.

pub mod listpack;
pub mod tree;

use std::cmp::Ordering;
use std::fmt;

use crate::EncodingLimits;
use crate::KeyHasher;
use crate::compact::CompactBytes;
use crate::dict::{Dict, DictEntry};
use crate::pack::ForwardPack;
use tree::{Item, ScoreTree};

/// A score interval, as ZRANGEBYSCORE's `min` and `max` give it (`(` makes a bound
/// exclusive).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ScoreRange {
    pub min: f64,
    pub max: f64,
    pub min_exclusive: bool,
    pub max_exclusive: bool,
}

impl ScoreRange {
    #[inline]
    pub fn gte_min(&self, score: f64) -> bool {
        if self.min_exclusive {
            score > self.min
        } else {
            score >= self.min
        }
    }

    #[inline]
    pub fn lte_max(&self, score: f64) -> bool {
        if self.max_exclusive {
            score < self.max
        } else {
            score <= self.max
        }
    }

    /// Whether no score can be in the range.
    pub fn is_empty(&self) -> bool {
        self.min > self.max || (self.min == self.max && (self.min_exclusive || self.max_exclusive))
    }
}

/// One end of a lexicographical range: `-`, `+`, `[member` or `(member`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LexBound {
    /// `-`: below every member.
    Min,
    /// `+`: above every member.
    Max,
    Inclusive(Vec<u8>),
    Exclusive(Vec<u8>),
}

impl LexBound {
    /// Redis's order of bound values: `-` below all strings, `+` above.
    fn cmp_value(&self, other: &LexBound) -> Ordering {
        fn rank(b: &LexBound) -> (u8, &[u8]) {
            match b {
                LexBound::Min => (0, &[]),
                LexBound::Inclusive(s) | LexBound::Exclusive(s) => (1, s),
                LexBound::Max => (2, &[]),
            }
        }
        rank(self).cmp(&rank(other))
    }

    fn is_exclusive(&self) -> bool {
        !matches!(self, LexBound::Inclusive(_))
    }
}

/// A member interval for the BYLEX commands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LexRange {
    pub min: LexBound,
    pub max: LexBound,
}

impl LexRange {
    #[inline]
    pub fn gte_min(&self, member: &[u8]) -> bool {
        match &self.min {
            LexBound::Min => true,
            LexBound::Max => false,
            LexBound::Inclusive(s) => member >= s.as_slice(),
            LexBound::Exclusive(s) => member > s.as_slice(),
        }
    }

    #[inline]
    pub fn lte_max(&self, member: &[u8]) -> bool {
        match &self.max {
            LexBound::Max => true,
            LexBound::Min => false,
            LexBound::Inclusive(s) => member <= s.as_slice(),
            LexBound::Exclusive(s) => member < s.as_slice(),
        }
    }

    /// Whether no member can be in the range.
    pub fn is_empty(&self) -> bool {
        match self.min.cmp_value(&self.max) {
            Ordering::Greater => true,
            Ordering::Equal => self.min.is_exclusive() || self.max.is_exclusive(),
            Ordering::Less => false,
        }
    }
}

/// Options of one ZADD element (ZINCRBY is ZADD with `incr`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AddFlags {
    /// Only add new members.
    pub nx: bool,
    /// Only update existing members.
    pub xx: bool,
    /// Only update to a greater score.
    pub gt: bool,
    /// Only update to a lower score.
    pub lt: bool,
    /// Add the score to the current one.
    pub incr: bool,
}

/// What [`ZSet::add`] did.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Added {
    /// A new member with this score.
    New(f64),
    /// An existing member now has this (different) score.
    Updated(f64),
    /// The member already had this score.
    Same(f64),
    /// Nothing was done (NX, XX, GT or LT refused).
    Refused,
    /// The increment would make the score NaN; nothing was changed.
    NotANumber,
}

impl AddFlags {
    /// The score an existing member with score `current` is to get for `score`,
    /// or what [`ZSet::add`] answers without changing it.
    fn apply(self, current: f64, score: f64) -> Result<f64, Added> {
        if self.nx {
            return Err(Added::Refused);
        }
        let mut score = score;
        if self.incr {
            score += current;
            if score.is_nan() {
                return Err(Added::NotANumber);
            }
        }
        if (self.lt && score >= current) || (self.gt && score <= current) {
            return Err(Added::Refused);
        }
        if score == current {
            return Err(Added::Same(score));
        }
        Ok(score)
    }
}

/// A member→score entry of the big encoding's dict.
struct ScoreEntry {
    member: CompactBytes,
    score: f64,
}

impl DictEntry for ScoreEntry {
    #[inline]
    fn key(&self) -> &[u8] {
        &self.member
    }
}

/// The big encoding: a dict for lookups and a tree for order.
struct Big {
    dict: Dict<ScoreEntry, KeyHasher>,
    tree: ScoreTree,
}

impl Big {
    fn new() -> Big {
        Big {
            dict: Dict::with_hasher(KeyHasher::default()),
            tree: ScoreTree::new(),
        }
    }

    /// Builds both halves from items already in order.
    fn from_sorted(items: Vec<Item>) -> Big {
        let mut dict = Dict::with_hasher(KeyHasher::default());
        for item in &items {
            let h = dict.hash(&item.member);
            dict.insert(
                h,
                ScoreEntry {
                    member: item.member.clone(),
                    score: item.score,
                },
            );
        }
        Big {
            dict,
            tree: ScoreTree::from_sorted(items),
        }
    }

    fn score(&self, member: &[u8]) -> Option<f64> {
        self.dict
            .get(self.dict.hash(member), member)
            .map(|e| e.score)
    }

    fn insert(&mut self, score: f64, member: &[u8]) {
        let h = self.dict.hash(member);
        self.dict.insert(
            h,
            ScoreEntry {
                member: CompactBytes::new(member),
                score,
            },
        );
        self.tree.insert(score, member);
    }

    /// [`ZSet::add`] for this encoding: the member is hashed and looked up once,
    /// whether it is new or not.
    fn add(&mut self, score: f64, member: &[u8], flags: AddFlags) -> Added {
        let h = self.dict.hash(member);
        let current = if flags.xx {
            match self.dict.get_mut(h, member) {
                Some(e) => e,
                None => return Added::Refused,
            }
        } else {
            let (e, inserted, _) = self.dict.get_or_insert_with(h, member, || ScoreEntry {
                member: CompactBytes::new(member),
                score,
            });
            if inserted {
                self.tree.insert(score, member);
                return Added::New(score);
            }
            e
        };
        let old = current.score;
        match flags.apply(old, score) {
            Ok(score) => {
                current.score = score;
                self.tree.remove(old, member);
                self.tree.insert(score, member);
                Added::Updated(score)
            }
            Err(added) => added,
        }
    }

    fn remove(&mut self, member: &[u8]) -> bool {
        let h = self.dict.hash(member);
        match self.dict.remove(h, member) {
            Some(e) => self.tree.remove(e.score, member),
            None => false,
        }
    }

    fn forget(&mut self, member: &[u8]) {
        let h = self.dict.hash(member);
        self.dict.remove(h, member);
    }
}

enum Repr {
    Listpack(ForwardPack),
    Skiplist(Box<Big>),
}

/// A sorted set (see the module docs).
pub struct ZSet {
    repr: Repr,
}

impl ZSet {
    /// An empty set in the listpack encoding.
    pub fn new_listpack() -> ZSet {
        ZSet {
            repr: Repr::Listpack(ForwardPack::new()),
        }
    }

    /// An empty set in the big encoding.
    pub fn new_skiplist() -> ZSet {
        ZSet {
            repr: Repr::Skiplist(Box::new(Big::new())),
        }
    }

    /// The empty set ZADD creates for a missing key, given the first member's length:
    /// big at once when listpacks are disabled or that member is too long for one.
    pub fn for_first_member(member_len: usize, limits: &EncodingLimits) -> ZSet {
        if limits.zset_max_listpack_entries == 0
            || member_len as u64 > limits.zset_max_listpack_value
        {
            ZSet::new_skiplist()
        } else {
            ZSet::new_listpack()
        }
    }

    /// The empty set a range store (ZRANGESTORE) fills, given the number of items it
    /// will get if known.
    pub fn for_store(expected: Option<usize>, limits: &EncodingLimits) -> ZSet {
        match expected {
            Some(n) if n as u64 > limits.zset_max_listpack_entries => ZSet::new_skiplist(),
            _ => ZSet::new_listpack(),
        }
    }

    /// A set of the given pairs, in order by (score, member) and without duplicate
    /// members, as ZUNIONSTORE and friends store their result: a listpack if it is
    /// small enough, else the big encoding.
    pub fn from_sorted(pairs: Vec<(Vec<u8>, f64)>, limits: &EncodingLimits) -> ZSet {
        let longest = pairs.iter().map(|(m, _)| m.len()).max().unwrap_or(0);
        if pairs.len() as u64 <= limits.zset_max_listpack_entries
            && longest as u64 <= limits.zset_max_listpack_value
        {
            let mut pack = ForwardPack::new();
            for (m, s) in &pairs {
                listpack::push(&mut pack, *s, m);
            }
            return ZSet {
                repr: Repr::Listpack(pack),
            };
        }
        let items = pairs.iter().map(|(m, s)| Item::new(*s, m)).collect();
        ZSet {
            repr: Repr::Skiplist(Box::new(Big::from_sorted(items))),
        }
    }

    #[inline]
    pub fn len(&self) -> usize {
        match &self.repr {
            Repr::Listpack(p) => listpack::pairs(p),
            Repr::Skiplist(b) => b.tree.len(),
        }
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// OBJECT ENCODING's name for the encoding.
    pub fn encoding(&self) -> &'static str {
        match &self.repr {
            Repr::Listpack(_) => "listpack",
            Repr::Skiplist(_) => "skiplist",
        }
    }

    pub fn is_listpack(&self) -> bool {
        matches!(self.repr, Repr::Listpack(_))
    }

    /// Converts to the big encoding (no-op if already there).
    pub fn convert_to_skiplist(&mut self) {
        if let Repr::Listpack(p) = &self.repr {
            let items = listpack::iter_from(p, 0, false)
                .map(|(m, s)| Item::new(s, m))
                .collect();
            self.repr = Repr::Skiplist(Box::new(Big::from_sorted(items)));
        }
    }

    pub fn score(&self, member: &[u8]) -> Option<f64> {
        match &self.repr {
            Repr::Listpack(p) => listpack::find(p, member).map(|(_, s)| s),
            Repr::Skiplist(b) => b.score(member),
        }
    }

    pub fn contains(&self, member: &[u8]) -> bool {
        self.score(member).is_some()
    }

    /// Adds or updates one member as ZADD does (Redis's `zsetAdd`), converting to the
    /// big encoding first when a new member would break the listpack limits.
    pub fn add(
        &mut self,
        score: f64,
        member: &[u8],
        flags: AddFlags,
        limits: &EncodingLimits,
    ) -> Added {
        if score.is_nan() {
            return Added::NotANumber;
        }
        let p = match &mut self.repr {
            Repr::Skiplist(b) => return b.add(score, member, flags),
            Repr::Listpack(p) => p,
        };
        match listpack::find(p, member) {
            Some((i, current)) => {
                let score = match flags.apply(current, score) {
                    Ok(score) => score,
                    Err(added) => return added,
                };
                listpack::remove(p, i, 1);
                listpack::insert(p, score, member);
                Added::Updated(score)
            }
            None if flags.xx => Added::Refused,
            None => {
                if let Repr::Listpack(p) = &self.repr
                    && (listpack::pairs(p) as u64 + 1 > limits.zset_max_listpack_entries
                        || member.len() as u64 > limits.zset_max_listpack_value)
                {
                    self.convert_to_skiplist();
                }
                match &mut self.repr {
                    Repr::Listpack(p) => listpack::insert(p, score, member),
                    Repr::Skiplist(b) => b.insert(score, member),
                }
                Added::New(score)
            }
        }
    }

    /// Removes a member; false if it was absent.
    pub fn remove(&mut self, member: &[u8]) -> bool {
        match &mut self.repr {
            Repr::Listpack(p) => match listpack::find(p, member) {
                Some((i, _)) => {
                    listpack::remove(p, i, 1);
                    true
                }
                None => false,
            },
            Repr::Skiplist(b) => b.remove(member),
        }
    }

    /// The rank of a member (0 for the lowest) and its score.
    pub fn rank(&self, member: &[u8]) -> Option<(usize, f64)> {
        match &self.repr {
            Repr::Listpack(p) => listpack::find(p, member),
            Repr::Skiplist(b) => {
                let score = b.score(member)?;
                b.tree.rank(score, member).map(|r| (r, score))
            }
        }
    }

    /// The item of rank `rank`.
    pub fn get(&self, rank: usize) -> Option<(&[u8], f64)> {
        self.iter_from(rank, false).next()
    }

    /// Every (member, score), lowest first.
    pub fn iter(&self) -> Iter<'_> {
        self.iter_from(0, false)
    }

    /// The items from rank `rank` towards the highest, or with `rev` towards the lowest.
    pub fn iter_from(&self, rank: usize, rev: bool) -> Iter<'_> {
        match &self.repr {
            Repr::Listpack(p) => Iter::Pack(listpack::iter_from(p, rank, rev)),
            Repr::Skiplist(b) => Iter::Tree(b.tree.iter_from(rank, rev)),
        }
    }

    /// The number of items ordered before the first one for which `inside` holds,
    /// assuming it holds for a suffix of the order.
    fn count_outside(&self, inside: impl Fn(&[u8], f64) -> bool) -> usize {
        match &self.repr {
            Repr::Listpack(p) => listpack::iter_from(p, 0, false)
                .position(|(m, s)| inside(m, s))
                .unwrap_or(listpack::pairs(p)),
            Repr::Skiplist(b) => b.tree.count_before(|i| !inside(&i.member, i.score)),
        }
    }

    /// The lowest and highest items.
    fn ends(&self) -> Option<(Pair<'_>, Pair<'_>)> {
        let first = self.get(0)?;
        let last = self.iter_from(self.len() - 1, true).next()?;
        Some((first, last))
    }

    /// The rank of the lowest item in `range` (Redis's `zslFirstInRange`).
    pub fn first_in_score_range(&self, range: &ScoreRange) -> Option<usize> {
        let ((_, first), (_, last)) = self.ends()?;
        if range.is_empty() || !range.gte_min(last) || !range.lte_max(first) {
            return None;
        }
        let rank = self.count_outside(|_, s| range.gte_min(s));
        let (_, s) = self.get(rank)?;
        range.lte_max(s).then_some(rank)
    }

    /// The rank of the highest item in `range` (Redis's `zslLastInRange`).
    pub fn last_in_score_range(&self, range: &ScoreRange) -> Option<usize> {
        let ((_, first), (_, last)) = self.ends()?;
        if range.is_empty() || !range.gte_min(last) || !range.lte_max(first) {
            return None;
        }
        let rank = self
            .count_outside(|_, s| !range.lte_max(s))
            .checked_sub(1)?;
        let (_, s) = self.get(rank)?;
        range.gte_min(s).then_some(rank)
    }

    fn lex_range_overlaps(&self, range: &LexRange) -> bool {
        match self.ends() {
            Some(((first, _), (last, _))) => {
                !range.is_empty() && range.gte_min(last) && range.lte_max(first)
            }
            None => false,
        }
    }

    /// The rank where a BYLEX walk upwards starts (Redis's `zslFirstInLexRange`). The
    /// BYLEX commands expect every score to be equal; otherwise a listpack gives what
    /// Redis's listpack gives, and the big encoding some consistent answer.
    pub fn first_in_lex_range(&self, range: &LexRange) -> Option<usize> {
        if !self.lex_range_overlaps(range) {
            return None;
        }
        let rank = self.count_outside(|m, _| range.gte_min(m));
        let (m, _) = self.get(rank)?;
        range.lte_max(m).then_some(rank)
    }

    /// The rank where a BYLEX walk downwards starts (Redis's `zslLastInLexRange`).
    pub fn last_in_lex_range(&self, range: &LexRange) -> Option<usize> {
        if !self.lex_range_overlaps(range) {
            return None;
        }
        let rank = match &self.repr {
            Repr::Listpack(p) => {
                let last = listpack::pairs(p).checked_sub(1)?;
                let from_end =
                    listpack::iter_from(p, last, true).position(|(m, _)| range.lte_max(m))?;
                last - from_end
            }
            Repr::Skiplist(b) => b
                .tree
                .count_before(|i| range.lte_max(&i.member))
                .checked_sub(1)?,
        };
        let (m, _) = self.get(rank)?;
        range.gte_min(m).then_some(rank)
    }

    /// ZLEXCOUNT: the listpack counts from the first item in range while items stay
    /// below the maximum, the big encoding subtracts ranks, as in Redis.
    pub fn lex_count(&self, range: &LexRange) -> usize {
        let Some(first) = self.first_in_lex_range(range) else {
            return 0;
        };
        match &self.repr {
            Repr::Listpack(_) => self
                .iter_from(first, false)
                .take_while(|(m, _)| range.lte_max(m))
                .count(),
            Repr::Skiplist(_) => self
                .last_in_lex_range(range)
                .map_or(0, |last| (last + 1).saturating_sub(first)),
        }
    }

    /// Removes `count` items from rank `start` on; returns how many went.
    pub fn remove_ranks(&mut self, start: usize, count: usize) -> usize {
        let count = count.min(self.len().saturating_sub(start));
        match &mut self.repr {
            Repr::Listpack(p) => listpack::remove(p, start, count),
            Repr::Skiplist(b) => {
                let Big { dict, tree } = &mut **b;
                tree.remove_range(start, count, |item| {
                    let h = dict.hash(&item.member);
                    dict.remove(h, &item.member);
                });
            }
        }
        count
    }

    /// Removes and returns the lowest (or, with `max`, the highest) item.
    pub fn pop(&mut self, max: bool) -> Option<(Vec<u8>, f64)> {
        let len = self.len();
        if len == 0 {
            return None;
        }
        let rank = if max { len - 1 } else { 0 };
        match &mut self.repr {
            Repr::Listpack(p) => {
                let (m, s) = listpack::iter_from(p, rank, false).next()?;
                let out = (m.to_vec(), s);
                listpack::remove(p, rank, 1);
                Some(out)
            }
            Repr::Skiplist(b) => {
                let item = b.tree.remove_rank(rank)?;
                b.forget(&item.member);
                Some((item.member.into_vec(), item.score))
            }
        }
    }

    /// One step of ZSCAN: calls `f` with the items of the buckets `cursor` names and
    /// returns the next cursor. A listpack is returned whole, with cursor 0.
    pub fn scan(&self, cursor: u64, mut f: impl FnMut(&[u8], f64)) -> u64 {
        match &self.repr {
            Repr::Listpack(p) => {
                for (m, s) in listpack::iter_from(p, 0, false) {
                    f(m, s);
                }
                0
            }
            Repr::Skiplist(b) => b.dict.scan(cursor, |e| f(&e.member, e.score)),
        }
    }

    /// Bytes held on the heap, including each encoding's overhead.
    /// [`ZSet::heap_size`] without the tree's nodes: O(1), a lower bound.
    pub fn heap_size_quick(&self) -> usize {
        match &self.repr {
            Repr::Listpack(p) => p.heap_size(),
            Repr::Skiplist(b) => {
                std::mem::size_of::<Big>() + b.dict.allocated_bytes() + b.tree.item_heap()
            }
        }
    }

    pub fn heap_size(&self) -> usize {
        match &self.repr {
            Repr::Listpack(p) => p.heap_size(),
            Repr::Skiplist(b) => {
                // The dict's members are copies of the tree's items' members.
                std::mem::size_of::<Big>()
                    + b.dict.allocated_bytes()
                    + b.tree.item_heap()
                    + b.tree.heap_size()
            }
        }
    }
}

impl Clone for ZSet {
    fn clone(&self) -> ZSet {
        match &self.repr {
            Repr::Listpack(p) => ZSet {
                repr: Repr::Listpack(p.clone()),
            },
            Repr::Skiplist(b) => {
                let items = b.tree.iter_from(0, false).cloned().collect();
                ZSet {
                    repr: Repr::Skiplist(Box::new(Big::from_sorted(items))),
                }
            }
        }
    }
}

impl PartialEq for ZSet {
    fn eq(&self, other: &ZSet) -> bool {
        self.len() == other.len()
            && self
                .iter()
                .zip(other.iter())
                .all(|((a, x), (b, y))| a == b && x.to_bits() == y.to_bits())
    }
}

impl fmt::Debug for ZSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map()
            .entries(self.iter().map(|(m, s)| (String::from_utf8_lossy(m), s)))
            .finish()
    }
}

/// A member and its score.
pub type Pair<'a> = (&'a [u8], f64);

/// Items of a [`ZSet`] from some rank, in one direction.
pub enum Iter<'a> {
    Pack(listpack::Pairs<'a>),
    Tree(tree::Iter<'a>),
}

impl<'a> Iterator for Iter<'a> {
    type Item = (&'a [u8], f64);

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        match self {
            Iter::Pack(it) => it.next(),
            Iter::Tree(it) => it.next().map(|i| (i.member.as_bytes(), i.score)),
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        match self {
            Iter::Pack(it) => it.size_hint(),
            Iter::Tree(it) => it.size_hint(),
        }
    }
}

impl ExactSizeIterator for Iter<'_> {}

#[cfg(test)]
mod tests;
