//! `Hash`: a hash value (field → value) in one of Redis's two encodings.
//!
//! A small hash is a "listpack": one [`Pack`] holding field, value, field, value... in
//! insertion order, searched linearly. It becomes a "hashtable" — a [`Dict`] of
//! field/value pairs — once it holds more than `hash-max-listpack-entries` fields or
//! is given a field or value longer than `hash-max-listpack-value` bytes. The
//! conversion is one-way, as in Redis, and happens at the same moments:
//!
//! - HSET, HMSET and HSETNX call [`Hash::fit`] with all their arguments before
//!   inserting anything (Redis's `hashTypeTryConversion`), so one long argument
//!   converts the hash even when its field already exists;
//! - [`Hash::insert`] converts before storing a long field or value (what HINCRBY and
//!   HINCRBYFLOAT rely on) and after the insert that goes past the entry limit.
//!
//! # Invariants
//!
//! - A packed hash holds an even number of elements and no field twice.
//! - `Table::pair_bytes` is the sum of the pairs' allocations.

use std::fmt;

use crate::dict::Dict;
use crate::pack::{Elements, ForwardPack as Pack, element_at};
use crate::pair::Pair;
use crate::{EncodingLimits, KeyHasher};

/// The most bytes Redis lets a listpack grow to before it must become a hashtable
/// (`LISTPACK_MAX_SAFETY_SIZE`).
const PACK_MAX_SAFE_BYTES: usize = 1 << 30;

/// A hash value.
#[derive(Default)]
pub struct Hash {
    repr: Repr,
}

enum Repr {
    /// Field, value, field, value... in insertion order ("listpack").
    Pack(Pack),
    /// Fields and values in a hash table ("hashtable").
    Table(Box<Table>),
}

impl Default for Repr {
    fn default() -> Self {
        Repr::Pack(Pack::new())
    }
}

struct Table {
    dict: Dict<Pair, KeyHasher>,
    /// Bytes allocated by the pairs.
    pair_bytes: usize,
}

impl Table {
    fn new() -> Table {
        Table {
            dict: Dict::with_hasher(KeyHasher::default()),
            pair_bytes: 0,
        }
    }

    /// Sets `field` to `value`; true if the field is new.
    fn insert(&mut self, field: &[u8], value: &[u8]) -> bool {
        let h = self.dict.hash(field);
        match self.dict.get_mut(h, field) {
            Some(old) => {
                self.pair_bytes -= old.heap_size();
                old.set_value(value);
                self.pair_bytes += old.heap_size();
                false
            }
            None => {
                let pair = Pair::new(field, value);
                self.pair_bytes += pair.heap_size();
                self.dict.insert(h, pair);
                true
            }
        }
    }
}

/// The index (in elements) of `field` in a packed hash.
fn pack_find(pack: &Pack, field: &[u8]) -> Option<usize> {
    pack_lookup(pack, field).ok()
}

/// The index (in elements) of `field` in a packed hash, or if it is absent the
/// number of fields: the same walk answers both (the pack keeps no count).
fn pack_lookup(pack: &Pack, field: &[u8]) -> Result<usize, usize> {
    let mut fields = 0;
    for f in pack.iter().step_by(2) {
        if f == field {
            return Ok(2 * fields);
        }
        fields += 1;
    }
    Err(fields)
}

/// Where `field` is in a packed hash's bytes: the offsets of its field, of its
/// value and just past the value; or, if it is absent, the number of fields (one
/// walk answers both).
pub(crate) fn find_packed_pair(data: &[u8], field: &[u8]) -> Result<[usize; 3], usize> {
    let (mut at, mut fields) = (0, 0);
    while at < data.len() {
        let (f, value_at) = element_at(data, at);
        let end = element_at(data, value_at).1;
        if f == field {
            return Ok([at, value_at, end]);
        }
        at = end;
        fields += 1;
    }
    Err(fields)
}

/// The field/value pairs of a packed hash's bytes, in order.
fn pack_pairs(data: &[u8]) -> impl Iterator<Item = (&[u8], &[u8])> {
    let mut it = Elements::new(data);
    std::iter::from_fn(move || Some((it.next()?, it.next()?)))
}

/// A hash borrowed where it lies: a [`Hash`](struct@Hash), or a packed hash's bytes inside the
/// key's entry (see `entry::Entry`). Every reader of a hash is here; `Hash`'s own
/// readers go through [`Hash::as_ref`].
#[derive(Clone, Copy)]
pub struct HashRef<'a> {
    repr: ReprRef<'a>,
}

#[derive(Clone, Copy)]
enum ReprRef<'a> {
    /// A packed hash's bytes, and whether they are an allocation of their own (a
    /// `Hash`'s pack) rather than part of the entry.
    Pack {
        data: &'a [u8],
        own: bool,
    },
    Table(&'a Table),
}

impl<'a> HashRef<'a> {
    /// A packed hash held in `data` (bytes [`Hash::packed_bytes`] gave), inside an
    /// allocation that is not the hash's own.
    pub(crate) fn packed_in_place(data: &'a [u8]) -> HashRef<'a> {
        HashRef {
            repr: ReprRef::Pack { data, own: false },
        }
    }

    /// Starts loading what a lookup of `field` will read (see
    /// [`Dict::prefetch_lookup`]); nothing for a packed hash.
    #[inline]
    pub fn prefetch_field(self, field: &[u8], slot_arrived: bool) {
        if let ReprRef::Table(t) = self.repr {
            t.dict.prefetch_lookup(t.dict.hash(field), slot_arrived);
        }
    }

    /// Number of fields.
    pub fn len(self) -> usize {
        match self.repr {
            ReprRef::Pack { data, .. } => Elements::new(data).count() / 2,
            ReprRef::Table(t) => t.dict.len(),
        }
    }

    pub fn is_empty(self) -> bool {
        match self.repr {
            ReprRef::Pack { data, .. } => data.is_empty(),
            ReprRef::Table(t) => t.dict.len() == 0,
        }
    }

    /// Redis's name for the encoding (OBJECT ENCODING).
    pub fn encoding(self) -> &'static str {
        match self.repr {
            ReprRef::Pack { .. } => "listpack",
            ReprRef::Table(_) => "hashtable",
        }
    }

    /// Whether the hash is packed (fields in insertion order).
    pub fn is_packed(self) -> bool {
        matches!(self.repr, ReprRef::Pack { .. })
    }

    /// A packed hash's bytes, wherever they are held (0 for a hashtable).
    pub fn packed_len(self) -> usize {
        match self.repr {
            ReprRef::Pack { data, .. } => data.len(),
            ReprRef::Table(_) => 0,
        }
    }

    /// Bytes on the heap beyond the `Hash` (none for bytes held in an entry).
    pub fn heap_size(self) -> usize {
        match self.repr {
            ReprRef::Pack { data, own } => {
                if own {
                    data.len()
                } else {
                    0
                }
            }
            ReprRef::Table(t) => {
                std::mem::size_of::<Table>() + t.dict.allocated_bytes() + t.pair_bytes
            }
        }
    }

    pub fn get(self, field: &[u8]) -> Option<&'a [u8]> {
        match self.repr {
            ReprRef::Pack { data, .. } => {
                pack_pairs(data).find(|(f, _)| *f == field).map(|(_, v)| v)
            }
            ReprRef::Table(t) => t.dict.get(t.dict.hash(field), field).map(Pair::value),
        }
    }

    pub fn contains(self, field: &[u8]) -> bool {
        match self.repr {
            ReprRef::Pack { data, .. } => pack_pairs(data).any(|(f, _)| f == field),
            ReprRef::Table(t) => t.dict.contains(t.dict.hash(field), field),
        }
    }

    /// Every field and value: in insertion order when packed, in table order otherwise.
    pub fn iter(self) -> Box<dyn Iterator<Item = (&'a [u8], &'a [u8])> + 'a> {
        match self.repr {
            ReprRef::Pack { data, .. } => Box::new(pack_pairs(data)),
            ReprRef::Table(t) => Box::new(t.dict.iter().map(|e| (e.field(), e.value()))),
        }
    }

    /// Calls `f` with `count` pairs picked at random, with replacement; `rng` gives
    /// random numbers.
    pub fn random_pairs(
        self,
        count: usize,
        mut rng: impl FnMut() -> u64,
        mut f: impl FnMut(&[u8], &[u8]),
    ) {
        match self.repr {
            ReprRef::Pack { data, .. } => {
                let pairs: Vec<(&[u8], &[u8])> = pack_pairs(data).collect();
                if pairs.is_empty() {
                    return;
                }
                for _ in 0..count {
                    let (field, value) = pairs[(rng() % pairs.len() as u64) as usize];
                    f(field, value);
                }
            }
            ReprRef::Table(t) => {
                for _ in 0..count {
                    match t.dict.random_uniform(&mut rng) {
                        Some(pair) => f(pair.field(), pair.value()),
                        None => return,
                    }
                }
            }
        }
    }

    /// A pair picked at random, given a random number.
    pub fn random(self, r: u64) -> Option<(&'a [u8], &'a [u8])> {
        match self.repr {
            ReprRef::Pack { data, .. } => {
                let n = self.len() as u64;
                if n == 0 {
                    return None;
                }
                pack_pairs(data).nth((r % n) as usize)
            }
            ReprRef::Table(t) => t.dict.random(r).map(|e| (e.field(), e.value())),
        }
    }

    /// One step of HSCAN: calls `f` for some pairs and returns the next cursor (0 when
    /// done). A packed hash is returned whole, with cursor 0, as Redis does.
    pub fn scan(self, cursor: u64, mut f: impl FnMut(&[u8], &[u8])) -> u64 {
        match self.repr {
            ReprRef::Pack { data, .. } => {
                for (field, value) in pack_pairs(data) {
                    f(field, value);
                }
                0
            }
            ReprRef::Table(t) => t.dict.scan(cursor, |e| f(e.field(), e.value())),
        }
    }

    /// An owned copy in the same encoding (COPY keeps it, as Redis does).
    pub fn to_owned(self) -> Hash {
        match self.repr {
            ReprRef::Pack { data, .. } => Hash {
                repr: Repr::Pack(Pack::from_bytes(data)),
            },
            ReprRef::Table(t) => {
                let mut table = Box::new(Table::new());
                for e in t.dict.iter() {
                    table.insert(e.field(), e.value());
                }
                Hash {
                    repr: Repr::Table(table),
                }
            }
        }
    }
}

impl fmt::Debug for HashRef<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Hash({}) ", self.encoding())?;
        f.debug_map()
            .entries(
                self.iter()
                    .map(|(k, v)| (String::from_utf8_lossy(k), String::from_utf8_lossy(v))),
            )
            .finish()
    }
}

impl Hash {
    /// An empty hash, packed.
    pub fn new() -> Hash {
        Hash::default()
    }

    /// The hash, borrowed (every reader is [`HashRef`]'s).
    #[inline]
    pub fn as_ref(&self) -> HashRef<'_> {
        HashRef {
            repr: match &self.repr {
                Repr::Pack(p) => ReprRef::Pack {
                    data: p.as_bytes(),
                    own: true,
                },
                Repr::Table(t) => ReprRef::Table(t),
            },
        }
    }

    /// A packed hash's bytes, which [`Hash::from_packed_bytes`] takes back; `None`
    /// for a hashtable.
    pub(crate) fn packed_bytes(&self) -> Option<&[u8]> {
        match &self.repr {
            Repr::Pack(p) => Some(p.as_bytes()),
            Repr::Table(_) => None,
        }
    }

    /// The packed hash whose bytes are `data` (from [`Hash::packed_bytes`]).
    pub(crate) fn from_packed_bytes(data: &[u8]) -> Hash {
        Hash {
            repr: Repr::Pack(Pack::from_bytes(data)),
        }
    }

    /// Number of fields.
    pub fn len(&self) -> usize {
        self.as_ref().len()
    }

    pub fn is_empty(&self) -> bool {
        self.as_ref().is_empty()
    }

    /// Redis's name for the encoding (OBJECT ENCODING).
    pub fn encoding(&self) -> &'static str {
        self.as_ref().encoding()
    }

    /// Whether the hash is packed (fields in insertion order).
    pub fn is_packed(&self) -> bool {
        matches!(self.repr, Repr::Pack(_))
    }

    /// Bytes on the heap beyond the `Hash` itself.
    pub fn heap_size(&self) -> usize {
        self.as_ref().heap_size()
    }

    pub fn get(&self, field: &[u8]) -> Option<&[u8]> {
        self.as_ref().get(field)
    }

    pub fn contains(&self, field: &[u8]) -> bool {
        self.as_ref().contains(field)
    }

    /// Converts a packed hash to a hashtable if any of `args` (the fields and values
    /// about to be set) is too long for a listpack, or all of them would make it too
    /// big — Redis's `hashTypeTryConversion`.
    pub fn fit<'a>(&mut self, args: impl IntoIterator<Item = &'a [u8]>, limits: &EncodingLimits) {
        let Repr::Pack(p) = &mut self.repr else {
            return;
        };
        let mut sum = 0usize;
        for arg in args {
            if arg.len() as u64 > limits.hash_max_listpack_value {
                self.convert();
                return;
            }
            sum += arg.len();
        }
        if p.bytes_len().saturating_add(sum) > PACK_MAX_SAFE_BYTES {
            self.convert();
        }
    }

    /// Sets `field` to `value`; returns true if the field is new. Converts the hash
    /// first if either is too long for a listpack, and after the insert if it has too
    /// many fields.
    pub fn insert(&mut self, field: &[u8], value: &[u8], limits: &EncodingLimits) -> bool {
        let max_value = limits.hash_max_listpack_value;
        if self.is_packed() && (field.len() as u64 > max_value || value.len() as u64 > max_value) {
            self.convert();
        }
        match &mut self.repr {
            Repr::Pack(p) => {
                // As Redis, an update converts too when the limit was lowered since.
                let (new, fields) = match pack_lookup(p, field) {
                    Ok(i) => {
                        p.replace(i + 1, value);
                        (false, p.len() / 2)
                    }
                    Err(fields) => {
                        p.push_back(field);
                        p.push_back(value);
                        (true, fields + 1)
                    }
                };
                if fields as u64 > limits.hash_max_listpack_entries {
                    self.convert();
                }
                new
            }
            Repr::Table(t) => t.insert(field, value),
        }
    }

    /// Removes `field`; returns whether it was there.
    pub fn remove(&mut self, field: &[u8]) -> bool {
        match &mut self.repr {
            Repr::Pack(p) => match pack_find(p, field) {
                Some(i) => {
                    p.remove_range(i, 2);
                    true
                }
                None => false,
            },
            Repr::Table(t) => {
                let h = t.dict.hash(field);
                match t.dict.remove(h, field) {
                    Some(pair) => {
                        t.pair_bytes -= pair.heap_size();
                        true
                    }
                    None => false,
                }
            }
        }
    }

    /// Every field and value: in insertion order when packed, in table order otherwise.
    pub fn iter(&self) -> Box<dyn Iterator<Item = (&[u8], &[u8])> + '_> {
        self.as_ref().iter()
    }

    /// One step of HSCAN (see [`HashRef::scan`]).
    pub fn scan(&self, cursor: u64, f: impl FnMut(&[u8], &[u8])) -> u64 {
        self.as_ref().scan(cursor, f)
    }

    /// Turns a packed hash into a hashtable.
    fn convert(&mut self) {
        let Repr::Pack(p) = &self.repr else { return };
        let mut table = Box::new(Table::new());
        for (field, value) in pack_pairs(p.as_bytes()) {
            table.insert(field, value);
        }
        self.repr = Repr::Table(table);
    }
}

impl Clone for Hash {
    /// A copy in the same encoding (COPY keeps it, as Redis does).
    fn clone(&self) -> Hash {
        self.as_ref().to_owned()
    }
}

impl PartialEq for Hash {
    /// Same fields with the same values, whatever the encodings and orders.
    fn eq(&self, other: &Hash) -> bool {
        self.len() == other.len() && self.iter().all(|(f, v)| other.get(f) == Some(v))
    }
}

impl fmt::Debug for Hash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.as_ref().fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pack::varint_len;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    fn limits(entries: u64, value: u64) -> EncodingLimits {
        EncodingLimits {
            hash_max_listpack_entries: entries,
            hash_max_listpack_value: value,
            ..EncodingLimits::default()
        }
    }

    #[test]
    fn a_value_of_the_same_length_is_written_over_the_old_one() {
        let mut t = Table::new();
        assert!(t.insert(b"field", b"one"));
        let h = t.dict.hash(b"field");
        let at = |t: &Table| t.dict.get(h, b"field").map(|p| p.value().as_ptr());
        let before = at(&t);
        assert!(!t.insert(b"field", b"two"));
        assert_eq!(at(&t), before, "the same allocation");
        assert_eq!(t.dict.get(h, b"field").map(Pair::value), Some(&b"two"[..]));
        assert!(!t.insert(b"field", b"three"));
        assert_eq!(
            t.dict.get(h, b"field").map(Pair::value),
            Some(&b"three"[..])
        );
        assert_eq!(t.pair_bytes, 2 + 5 + 5);
    }

    #[test]
    fn converts_past_the_entry_limit() {
        let l = limits(4, 64);
        let mut h = Hash::new();
        for i in 0..4 {
            assert!(h.insert(format!("f{i}").as_bytes(), b"v", &l));
        }
        assert_eq!(h.encoding(), "listpack");
        assert!(!h.insert(b"f0", b"new", &l));
        assert_eq!(h.encoding(), "listpack");
        assert!(h.insert(b"f4", b"v", &l));
        assert_eq!(h.encoding(), "hashtable");
        assert_eq!(h.len(), 5);
        assert_eq!(h.get(b"f0"), Some(&b"new"[..]));
        // One-way: removing fields keeps the hashtable.
        for i in 0..5 {
            assert!(h.remove(format!("f{i}").as_bytes()));
        }
        assert!(h.is_empty());
        assert_eq!(h.encoding(), "hashtable");
    }

    #[test]
    fn converts_for_long_strings() {
        let l = limits(512, 8);
        let mut h = Hash::new();
        h.insert(b"a", b"12345678", &l);
        assert_eq!(h.encoding(), "listpack");
        h.insert(b"a", b"123456789", &l);
        assert_eq!(h.encoding(), "hashtable");
        let mut h = Hash::new();
        h.insert(b"a", b"1", &l);
        h.fit([&b"a"[..], b"way too long"], &l);
        assert_eq!(h.encoding(), "hashtable");
        assert_eq!(h.get(b"a"), Some(&b"1"[..]));
        let mut h = Hash::new();
        h.insert(b"longer field", b"1", &l);
        assert_eq!(h.encoding(), "hashtable");
    }

    #[test]
    fn packed_order_is_insertion_order() {
        let l = EncodingLimits::default();
        let mut h = Hash::new();
        for f in ["c", "a", "b"] {
            h.insert(f.as_bytes(), b"1", &l);
        }
        h.insert(b"a", b"2", &l);
        h.remove(b"c");
        h.insert(b"c", b"3", &l);
        let fields: Vec<&[u8]> = h.iter().map(|(f, _)| f).collect();
        assert_eq!(fields, [&b"a"[..], b"b", b"c"]);
        let mut seen = Vec::new();
        assert_eq!(h.scan(0, |f, v| seen.push((f.to_vec(), v.to_vec()))), 0);
        assert_eq!(seen.len(), 3);
    }

    #[derive(Debug, Clone)]
    enum Op {
        Insert(u8, Vec<u8>),
        Remove(u8),
        Fit(usize),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            5 => (any::<u8>(), proptest::collection::vec(any::<u8>(), 0..12))
                .prop_map(|(f, v)| Op::Insert(f % 64, v)),
            3 => any::<u8>().prop_map(|f| Op::Remove(f % 64)),
            1 => (0..16usize).prop_map(Op::Fit),
        ]
    }

    fn field(f: u8) -> Vec<u8> {
        // Some fields are long enough to force a conversion under small limits.
        if f % 16 == 15 {
            vec![f; 12]
        } else {
            format!("f{f}").into_bytes()
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]
        #[test]
        fn behaves_like_a_map(
            ops in proptest::collection::vec(op(), 1..300),
            entries in 0u64..40,
            value in 0u64..16,
        ) {
            let l = limits(entries, value);
            let mut h = Hash::new();
            let mut m: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
            // Insertion order of the model, for packed hashes.
            let mut order: Vec<Vec<u8>> = Vec::new();
            for op in ops {
                let was_packed = h.is_packed();
                match op {
                    Op::Insert(f, v) => {
                        let f = field(f);
                        let new = h.insert(&f, &v, &l);
                        prop_assert_eq!(new, m.insert(f.clone(), v.clone()).is_none());
                        if new { order.push(f.clone()); }
                        let too_long = f.len() as u64 > value || v.len() as u64 > value;
                        if was_packed {
                            let want = !too_long && m.len() as u64 <= entries;
                            prop_assert_eq!(h.is_packed(), want);
                        }
                    }
                    Op::Remove(f) => {
                        let f = field(f);
                        prop_assert_eq!(h.remove(&f), m.remove(&f).is_some());
                        order.retain(|o| o != &f);
                    }
                    Op::Fit(n) => {
                        let arg = vec![b'x'; n];
                        h.fit([&arg[..]], &l);
                        if was_packed {
                            prop_assert_eq!(h.is_packed(), n as u64 <= value);
                        }
                    }
                }
                prop_assert!(was_packed || !h.is_packed(), "conversions are one-way");
                prop_assert_eq!(h.len(), m.len());
                for (f, v) in &m {
                    prop_assert_eq!(h.get(f), Some(&v[..]));
                }
                let all: BTreeMap<Vec<u8>, Vec<u8>> =
                    h.iter().map(|(f, v)| (f.to_vec(), v.to_vec())).collect();
                prop_assert_eq!(&all, &m);
                if let Repr::Table(t) = &h.repr {
                    let want: usize =
                        m.iter().map(|(f, v)| varint_len(f.len()) + varint_len(v.len()) + f.len() + v.len()).sum();
                    prop_assert_eq!(t.pair_bytes, want);
                }
                if h.is_packed() {
                    let fields: Vec<Vec<u8>> = h.iter().map(|(f, _)| f.to_vec()).collect();
                    prop_assert_eq!(&fields, &order);
                }
                let copy = h.clone();
                prop_assert_eq!(copy.encoding(), h.encoding());
                prop_assert_eq!(&copy, &h);
                let mut scanned = BTreeMap::new();
                let mut cursor = 0;
                loop {
                    cursor = h.scan(cursor, |f, v| { scanned.insert(f.to_vec(), v.to_vec()); });
                    if cursor == 0 { break; }
                }
                prop_assert_eq!(&scanned, &m);
                if let Some((f, v)) = h.as_ref().random(12345) {
                    prop_assert_eq!(m.get(f).map(Vec::as_slice), Some(v));
                }
            }
        }
    }
}
