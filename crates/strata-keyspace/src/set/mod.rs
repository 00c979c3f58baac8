//! `Set`: a set value in one of Redis 7.0's two encodings.
//!
//! A set whose members are all integers in canonical form (what Redis's `string2ll`
//! accepts: no sign on zero, no leading zeros or '+', within i64) is an "intset": a
//! sorted array of i64 ([`IntSet`]). Adding any other member converts it at once to a
//! "hashtable" — a [`Dict`] of members — and so does growing past
//! `set-max-intset-entries`. The conversion is one-way, as in Redis.
//!
//! Members come in and out as bytes or as [`Elem`]s, which let integer members stay
//! integers between two intsets (SINTER of intsets never formats a number).
//!
//! # Invariants
//!
//! - `Table::member_bytes` is the sum of the members' heap allocations.

mod intset;

use std::fmt;

pub use intset::IntSet;

use crate::compact::CompactBytes;
use crate::dict::{Dict, DictEntry};
use crate::value::parse_canonical_i64;
use crate::{EncodingLimits, KeyHasher};

/// Redis caps intsets at 2^30 entries whatever the configuration says.
const INTSET_MAX_ENTRIES: u64 = 1 << 30;

/// SPOP builds a new set from the members that remain once it would pop more than
/// this many times their number (Redis's `SPOP_MOVE_STRATEGY_MUL`).
const SPOP_MOVE_STRATEGY_MUL: usize = 5;

/// A set member, borrowed: an integer of an intset or the bytes of a hashtable member.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Elem<'a> {
    Int(i64),
    Bytes(&'a [u8]),
}

impl Elem<'_> {
    /// Calls `f` with the member's bytes (integers are formatted on the stack).
    pub fn with_bytes<R>(self, f: impl FnOnce(&[u8]) -> R) -> R {
        match self {
            Elem::Int(n) => f(itoa::Buffer::new().format(n).as_bytes()),
            Elem::Bytes(b) => f(b),
        }
    }

    pub fn to_vec(self) -> Vec<u8> {
        self.with_bytes(<[u8]>::to_vec)
    }

    /// The member as an integer, if it is one in canonical form.
    pub fn as_int(self) -> Option<i64> {
        match self {
            Elem::Int(n) => Some(n),
            Elem::Bytes(b) => parse_canonical_i64(b),
        }
    }

    pub fn into_owned(self) -> OwnedElem {
        match self {
            Elem::Int(n) => OwnedElem::Int(n),
            Elem::Bytes(b) => OwnedElem::Bytes(CompactBytes::new(b)),
        }
    }
}

/// A set member, owned (see [`Elem`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OwnedElem {
    Int(i64),
    Bytes(CompactBytes),
}

impl OwnedElem {
    pub fn as_elem(&self) -> Elem<'_> {
        match self {
            OwnedElem::Int(n) => Elem::Int(*n),
            OwnedElem::Bytes(b) => Elem::Bytes(b),
        }
    }
}

/// A hashtable member.
struct Member(CompactBytes);

impl DictEntry for Member {
    #[inline]
    fn key(&self) -> &[u8] {
        &self.0
    }
}

struct Table {
    dict: Dict<Member, KeyHasher>,
    /// Bytes the members hold on the heap.
    member_bytes: usize,
}

impl Table {
    fn new() -> Table {
        Table {
            dict: Dict::with_hasher(KeyHasher::default()),
            member_bytes: 0,
        }
    }

    fn insert(&mut self, member: &[u8]) -> bool {
        let h = self.dict.hash(member);
        let (m, inserted, _) = self
            .dict
            .get_or_insert_with(h, member, || Member(CompactBytes::new(member)));
        if inserted {
            self.member_bytes += m.0.heap_size();
        }
        inserted
    }

    fn remove(&mut self, member: &[u8]) -> bool {
        let h = self.dict.hash(member);
        match self.dict.remove(h, member) {
            Some(m) => {
                self.member_bytes -= m.0.heap_size();
                true
            }
            None => false,
        }
    }

    fn contains(&self, member: &[u8]) -> bool {
        self.dict.contains(self.dict.hash(member), member)
    }
}

enum Repr {
    Ints(IntSet),
    Table(Box<Table>),
}

/// A set value.
pub struct Set {
    repr: Repr,
}

impl Default for Set {
    /// An empty intset, as Redis's `createIntsetObject` (the start of every *STORE
    /// result).
    fn default() -> Self {
        Set {
            repr: Repr::Ints(IntSet::new()),
        }
    }
}

impl Set {
    /// An empty intset.
    pub fn new() -> Set {
        Set::default()
    }

    /// An empty set in the encoding that can hold `first`, the member about to be
    /// added (Redis's `setTypeCreate`).
    pub fn for_member(first: &[u8]) -> Set {
        if parse_canonical_i64(first).is_some() {
            Set::new()
        } else {
            Set {
                repr: Repr::Table(Box::new(Table::new())),
            }
        }
    }

    /// Starts loading what a lookup of `member` will read (see
    /// [`Dict::prefetch_lookup`]); nothing for an intset.
    #[inline]
    pub fn prefetch_member(&self, member: &[u8], slot_arrived: bool) {
        if let Repr::Table(t) = &self.repr {
            t.dict.prefetch_lookup(t.dict.hash(member), slot_arrived);
        }
    }

    pub fn len(&self) -> usize {
        match &self.repr {
            Repr::Ints(s) => s.len(),
            Repr::Table(t) => t.dict.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Redis's name for the encoding (OBJECT ENCODING).
    pub fn encoding(&self) -> &'static str {
        match &self.repr {
            Repr::Ints(_) => "intset",
            Repr::Table(_) => "hashtable",
        }
    }

    /// Whether this is an intset (members in ascending order).
    pub fn is_intset(&self) -> bool {
        matches!(self.repr, Repr::Ints(_))
    }

    /// Bytes on the heap beyond the `Set` itself.
    pub fn heap_size(&self) -> usize {
        match &self.repr {
            Repr::Ints(s) => s.heap_size(),
            Repr::Table(t) => {
                std::mem::size_of::<Table>() + t.dict.allocated_bytes() + t.member_bytes
            }
        }
    }

    pub fn contains(&self, member: &[u8]) -> bool {
        self.contains_elem(Elem::Bytes(member))
    }

    pub fn contains_elem(&self, e: Elem) -> bool {
        match &self.repr {
            Repr::Ints(s) => e.as_int().is_some_and(|n| s.contains(n)),
            Repr::Table(t) => e.with_bytes(|b| t.contains(b)),
        }
    }

    /// Adds `member`; returns whether it was absent.
    pub fn insert(&mut self, member: &[u8], limits: &EncodingLimits) -> bool {
        self.insert_elem(Elem::Bytes(member), limits)
    }

    /// Adds a member, converting to a hashtable for a non-integer or past the intset
    /// size limit (Redis's `setTypeAdd`).
    pub fn insert_elem(&mut self, e: Elem, limits: &EncodingLimits) -> bool {
        match &mut self.repr {
            Repr::Ints(s) => match e.as_int() {
                Some(n) => {
                    if !s.insert(n) {
                        return false;
                    }
                    let max = limits.set_max_intset_entries.min(INTSET_MAX_ENTRIES);
                    if s.len() as u64 > max {
                        self.convert();
                    }
                    true
                }
                None => {
                    self.convert();
                    self.insert_elem(e, limits)
                }
            },
            Repr::Table(t) => e.with_bytes(|b| t.insert(b)),
        }
    }

    /// Removes `member`; returns whether it was present.
    pub fn remove(&mut self, member: &[u8]) -> bool {
        self.remove_elem(Elem::Bytes(member))
    }

    pub fn remove_elem(&mut self, e: Elem) -> bool {
        match &mut self.repr {
            Repr::Ints(s) => e.as_int().is_some_and(|n| s.remove(n)),
            Repr::Table(t) => e.with_bytes(|b| t.remove(b)),
        }
    }

    /// Every member: ascending for an intset, in table order otherwise.
    pub fn iter(&self) -> Box<dyn Iterator<Item = Elem<'_>> + '_> {
        match &self.repr {
            Repr::Ints(s) => Box::new(s.iter().map(Elem::Int)),
            Repr::Table(t) => Box::new(t.dict.iter().map(|m| Elem::Bytes(&m.0))),
        }
    }

    /// A member picked at random, given a random number.
    pub fn random(&self, r: u64) -> Option<Elem<'_>> {
        match &self.repr {
            Repr::Ints(s) => {
                if s.is_empty() {
                    return None;
                }
                s.get((r % s.len() as u64) as usize).map(Elem::Int)
            }
            Repr::Table(t) => t.dict.random(r).map(|m| Elem::Bytes(&m.0)),
        }
    }

    /// Removes `count` members picked at random (all of them if there are fewer) and
    /// returns them; `rng` gives random numbers.
    ///
    /// When few members would remain, those are picked instead and become a new set
    /// (SPOP's third strategy in Redis), built like any new set: a hashtable left with
    /// a few integers is an intset again, as in Redis.
    pub fn pop_random(
        &mut self,
        count: usize,
        rng: impl FnMut() -> u64,
        limits: &EncodingLimits,
    ) -> Vec<OwnedElem> {
        let count = count.min(self.len());
        let remaining = self.len() - count;
        if remaining == 0 || remaining * SPOP_MOVE_STRATEGY_MUL > count {
            return self.take_random(count, rng);
        }
        let kept = self.take_random(remaining, rng);
        let mut rest = Set::new();
        for e in &kept {
            rest.insert_elem(e.as_elem(), limits);
        }
        let popped = std::mem::replace(self, rest);
        popped.iter().map(Elem::into_owned).collect()
    }

    /// Removes `count` members picked at random, one at a time (all of them if there
    /// are fewer), and returns them.
    fn take_random(&mut self, count: usize, mut rng: impl FnMut() -> u64) -> Vec<OwnedElem> {
        let count = count.min(self.len());
        match &mut self.repr {
            Repr::Ints(s) => {
                // Choose the positions to remove by a partial shuffle of all of them,
                // then rebuild the array once.
                let mut positions: Vec<usize> = (0..s.len()).collect();
                for i in 0..count {
                    let j = i + (rng() % (positions.len() - i) as u64) as usize;
                    positions.swap(i, j);
                }
                let mut chosen = vec![false; s.len()];
                let mut popped = Vec::with_capacity(count);
                for &p in &positions[..count] {
                    chosen[p] = true;
                    if let Some(n) = s.get(p) {
                        popped.push(OwnedElem::Int(n));
                    }
                }
                let mut index = 0;
                s.retain(|_| {
                    let keep = !chosen[index];
                    index += 1;
                    keep
                });
                popped
            }
            Repr::Table(t) => {
                let mut popped = Vec::with_capacity(count);
                for _ in 0..count {
                    let Some(m) = t.dict.random_uniform(&mut rng) else {
                        break;
                    };
                    let member = m.0.clone();
                    t.remove(&member);
                    popped.push(OwnedElem::Bytes(member));
                }
                popped
            }
        }
    }

    /// One step of SSCAN: calls `f` for some members and returns the next cursor (0
    /// when done). An intset is returned whole, with cursor 0, as Redis does.
    pub fn scan(&self, cursor: u64, mut f: impl FnMut(Elem)) -> u64 {
        match &self.repr {
            Repr::Ints(s) => {
                s.iter().for_each(|n| f(Elem::Int(n)));
                0
            }
            Repr::Table(t) => t.dict.scan(cursor, |m| f(Elem::Bytes(&m.0))),
        }
    }

    /// Turns an intset into a hashtable.
    fn convert(&mut self) {
        let Repr::Ints(s) = &self.repr else { return };
        let mut table = Box::new(Table::new());
        for n in s.iter() {
            table.insert(itoa::Buffer::new().format(n).as_bytes());
        }
        self.repr = Repr::Table(table);
    }
}

impl Clone for Set {
    /// A copy in the same encoding (COPY keeps it, as Redis does).
    fn clone(&self) -> Set {
        match &self.repr {
            Repr::Ints(s) => Set {
                repr: Repr::Ints(s.clone()),
            },
            Repr::Table(t) => {
                let mut table = Box::new(Table::new());
                for m in t.dict.iter() {
                    table.insert(&m.0);
                }
                Set {
                    repr: Repr::Table(table),
                }
            }
        }
    }
}

impl PartialEq for Set {
    /// Same members, whatever the encodings.
    fn eq(&self, other: &Set) -> bool {
        self.len() == other.len() && self.iter().all(|e| other.contains_elem(e))
    }
}

impl fmt::Debug for Set {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Set({}) ", self.encoding())?;
        f.debug_set()
            .entries(
                self.iter()
                    .map(|e| String::from_utf8_lossy(&e.to_vec()).into_owned()),
            )
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    fn limits(max: u64) -> EncodingLimits {
        EncodingLimits {
            set_max_intset_entries: max,
            ..EncodingLimits::default()
        }
    }

    #[test]
    fn a_set_is_two_words() {
        // Boxed in a `Value`, a set is then a 16-byte allocation.
        assert_eq!(std::mem::size_of::<Set>(), 16);
    }

    #[test]
    fn first_member_picks_the_encoding() {
        assert_eq!(Set::for_member(b"12").encoding(), "intset");
        assert_eq!(Set::for_member(b"012").encoding(), "hashtable");
        assert_eq!(Set::for_member(b"-0").encoding(), "hashtable");
        assert_eq!(Set::for_member(b"abc").encoding(), "hashtable");
    }

    #[test]
    fn converts_on_a_string_or_past_the_limit() {
        let l = limits(3);
        let mut s = Set::new();
        for m in ["3", "1", "2", "2"] {
            s.insert(m.as_bytes(), &l);
        }
        assert_eq!(s.encoding(), "intset");
        let members: Vec<Vec<u8>> = s.iter().map(Elem::to_vec).collect();
        assert_eq!(members, [b"1".to_vec(), b"2".to_vec(), b"3".to_vec()]);
        assert!(s.contains(b"2") && !s.contains(b"02") && !s.contains(b"x"));
        assert!(s.insert(b"4", &l));
        assert_eq!(s.encoding(), "hashtable");
        assert!(s.contains(b"4") && s.contains(b"1"));

        let mut s = Set::new();
        s.insert(b"1", &l);
        assert!(s.insert(b"a", &l));
        assert_eq!(s.encoding(), "hashtable");
        assert!(s.remove(b"a"));
        assert_eq!(s.encoding(), "hashtable", "conversions are one-way");
        assert!(s.contains_elem(Elem::Int(1)));
    }

    #[test]
    fn pops_distinct_members() {
        let l = limits(512);
        for members in [vec!["1", "2", "3", "4", "5"], vec!["a", "b", "c", "d", "e"]] {
            let mut s = Set::new();
            for m in &members {
                s.insert(m.as_bytes(), &l);
            }
            let mut x = 7u64;
            let mut rng = || {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
                x >> 11
            };
            let popped = s.pop_random(3, &mut rng, &l);
            assert_eq!(popped.len(), 3);
            assert_eq!(s.len(), 2);
            let mut all: BTreeSet<Vec<u8>> = popped.iter().map(|e| e.as_elem().to_vec()).collect();
            assert_eq!(all.len(), 3);
            all.extend(s.iter().map(Elem::to_vec));
            assert_eq!(all.len(), 5);
            assert_eq!(s.pop_random(10, &mut rng, &l).len(), 2);
            assert!(s.is_empty());
        }
    }

    #[test]
    fn popping_most_members_rebuilds_the_rest() {
        let l = limits(512);
        let mut s = Set::new();
        for m in ["a", "1", "2", "3", "4", "5", "6", "7", "8", "9", "10"] {
            s.insert(m.as_bytes(), &l);
        }
        assert_eq!(s.encoding(), "hashtable");
        // Keep the one member that is an integer: popping ten of eleven keeps one.
        let mut tries = 0u64;
        loop {
            let mut t = s.clone();
            let mut x = tries;
            let popped = t.pop_random(
                10,
                || {
                    x = x
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    x >> 7
                },
                &l,
            );
            assert_eq!((popped.len(), t.len()), (10, 1));
            let left_int = t.iter().all(|e| e.as_int().is_some());
            assert_eq!(t.encoding() == "intset", left_int);
            if left_int {
                break;
            }
            tries += 1;
        }
        // Popping fewer keeps the set as it is.
        let popped = s.pop_random(3, || 12345, &l);
        assert_eq!((popped.len(), s.encoding()), (3, "hashtable"));
    }

    #[test]
    fn a_million_members() {
        let l = limits(512);
        let mut s = Set::new();
        for i in 0..1_000_000u32 {
            s.insert(format!("member:{i}").as_bytes(), &l);
        }
        assert_eq!(s.len(), 1_000_000);
        let mut x = 1u64;
        let mut rng = || {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            x >> 11
        };
        // Popping most of a big set one member at a time shrinks its table while it
        // is being popped: each pick must stay cheap.
        assert_eq!(s.pop_random(800_000, &mut rng, &l).len(), 800_000);
        assert_eq!(s.len(), 200_000);
        assert_eq!(s.pop_random(190_000, &mut rng, &l).len(), 190_000);
        assert_eq!(s.len(), 10_000);
        assert!(s.heap_size() < 2_000_000, "{}", s.heap_size());
    }

    fn member() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            4 => (-30i64..30).prop_map(|n| n.to_string().into_bytes()),
            1 => any::<i64>().prop_map(|n| n.to_string().into_bytes()),
            1 => prop_oneof![Just(b"007".to_vec()), Just(b"-0".to_vec()), Just(b"+1".to_vec())],
            1 => "[a-e]{1,3}".prop_map(String::into_bytes),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]
        #[test]
        fn behaves_like_a_set(
            ops in proptest::collection::vec((any::<u8>(), member()), 1..200),
            max in 0u64..40,
        ) {
            let l = limits(max);
            let mut s = Set::new();
            let mut m: BTreeSet<Vec<u8>> = BTreeSet::new();
            for (kind, member) in ops {
                let was_intset = s.is_intset();
                let mut rebuilt = false;
                match kind % 5 {
                    0..=2 => {
                        prop_assert_eq!(s.insert(&member, &l), m.insert(member.clone()));
                        if was_intset {
                            let all_ints = m.iter().all(|x| parse_canonical_i64(x).is_some());
                            prop_assert_eq!(s.is_intset(), all_ints && m.len() as u64 <= max);
                        }
                    }
                    3 => prop_assert_eq!(s.remove(&member), m.remove(&member)),
                    _ => {
                        let mut x = kind as u64;
                        let n = (kind / 5) as usize % 8;
                        let size = m.len();
                        let popped = s.pop_random(n, || { x = x.wrapping_mul(31).wrapping_add(7); x }, &l);
                        prop_assert_eq!(popped.len(), size.min(n));
                        for p in popped {
                            prop_assert!(m.remove(&p.as_elem().to_vec()));
                        }
                        rebuilt = !m.is_empty() && m.len() * SPOP_MOVE_STRATEGY_MUL <= size - m.len();
                        if rebuilt {
                            // What remains is a new set, encoded afresh.
                            let all_ints = m.iter().all(|x| parse_canonical_i64(x).is_some());
                            prop_assert_eq!(s.is_intset(), all_ints && m.len() as u64 <= max);
                        }
                    }
                }
                prop_assert!(was_intset || !s.is_intset() || rebuilt, "conversions are one-way");
                prop_assert_eq!(s.len(), m.len());
                prop_assert_eq!(s.contains(&member), m.contains(&member));
                let all: Vec<Vec<u8>> = s.iter().map(Elem::to_vec).collect();
                let as_set: BTreeSet<Vec<u8>> = all.iter().cloned().collect();
                prop_assert_eq!(all.len(), as_set.len());
                prop_assert_eq!(&as_set, &m);
                if s.is_intset() {
                    let ints: Vec<i64> = s.iter().filter_map(Elem::as_int).collect();
                    prop_assert!(ints.windows(2).all(|w| w[0] < w[1]), "ascending");
                }
                let copy = s.clone();
                prop_assert_eq!(copy.encoding(), s.encoding());
                prop_assert_eq!(&copy, &s);
                let mut scanned = BTreeSet::new();
                let mut cursor = 0;
                loop {
                    cursor = s.scan(cursor, |e| { scanned.insert(e.to_vec()); });
                    if cursor == 0 { break; }
                }
                prop_assert_eq!(&scanned, &m);
                if let Some(e) = s.random(99) {
                    prop_assert!(m.contains(&e.to_vec()));
                }
            }
        }
    }
}
