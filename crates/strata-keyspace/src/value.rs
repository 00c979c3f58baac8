//! Values: what a key holds, with Redis's encodings.

use std::fmt;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use crate::compact::INLINE_CAPACITY;
use crate::hash::{Hash, HashRef};
use crate::list::List;
use crate::set::Set;
use crate::zset::ZSet;

/// Strings longer than this are "raw" even when created whole, as in Redis.
pub const EMBSTR_LIMIT: usize = 44;

/// Values whose free effort exceeds this are freed in the background when lazy freeing
/// applies (Redis's `LAZYFREE_THRESHOLD`).
pub const LAZYFREE_THRESHOLD: usize = 64;

/// Integers below this (and not negative) are shared between keys in Redis, which
/// reports them as referenced `i32::MAX` times.
pub const SHARED_INTEGERS: i64 = 10_000;

/// Up to [`INLINE_CAPACITY`] bytes held in place, without an allocation.
#[derive(Clone, Copy)]
pub struct Inline {
    len: u8,
    data: [u8; INLINE_CAPACITY],
}

impl Inline {
    /// The bytes, if they fit.
    fn new(bytes: &[u8]) -> Option<Inline> {
        let mut data = [0; INLINE_CAPACITY];
        data.get_mut(..bytes.len())?.copy_from_slice(bytes);
        Some(Inline {
            len: bytes.len() as u8,
            data,
        })
    }

    #[inline]
    fn as_bytes(&self) -> &[u8] {
        &self.data[..self.len as usize]
    }
}

impl PartialEq for Inline {
    fn eq(&self, other: &Self) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}
impl Eq for Inline {}

impl fmt::Debug for Inline {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", String::from_utf8_lossy(self.as_bytes()))
    }
}

/// A string value in one of Redis's three encodings.
///
/// A string in flight (an entry holds its strings packed: see [`crate::entry`]).
/// The encoding and where the bytes live (in place up to [`INLINE_CAPACITY`] bytes,
/// else in one exact-size allocation) share one discriminant, so a string takes 24
/// bytes and [`Value`] as much.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Str {
    /// An integer whose decimal form is the value ("int"), stored as Redis stores a
    /// new one: shared between keys when below [`SHARED_INTEGERS`].
    Int(i64),
    /// An integer ("int") that one key holds alone whatever its value: what COPY makes
    /// of an integer, since Redis duplicates the object rather than share it.
    OwnInt(i64),
    /// A short string created whole and never modified in place ("embstr").
    Emb(Inline),
    /// A longer "embstr" (up to [`EMBSTR_LIMIT`] bytes).
    EmbHeap(Box<[u8]>),
    /// A short string modified in place (APPEND, SETRANGE): "raw".
    Raw(Inline),
    /// A string modified in place or long ("raw").
    RawHeap(Box<[u8]>),
}

impl Str {
    /// The value as Redis would store a string created whole: integers in canonical
    /// form as "int", short strings "embstr", the rest "raw".
    pub fn new(bytes: &[u8]) -> Str {
        match parse_canonical_i64(bytes) {
            Some(n) => Str::Int(n),
            None => Str::plain(bytes),
        }
    }

    /// A string stored as given, never converted to "int" (what Redis does with the
    /// result of INCRBYFLOAT).
    pub fn plain(bytes: &[u8]) -> Str {
        match Inline::new(bytes) {
            Some(inline) => Str::Emb(inline),
            None if bytes.len() <= EMBSTR_LIMIT => Str::EmbHeap(bytes.into()),
            None => Str::RawHeap(bytes.into()),
        }
    }

    /// A string modified in place: always "raw".
    pub fn raw(bytes: Vec<u8>) -> Str {
        match Inline::new(&bytes) {
            Some(inline) => Str::Raw(inline),
            None => Str::RawHeap(bytes.into_boxed_slice()),
        }
    }

    /// The string borrowed as a [`StrRef`], whose readers these are.
    #[inline]
    pub fn as_ref(&self) -> StrRef<'_> {
        match self {
            Str::Int(n) => StrRef::Int(*n),
            Str::OwnInt(n) => StrRef::OwnInt(*n),
            Str::Emb(b) => StrRef::Emb(b.as_bytes()),
            Str::EmbHeap(b) => StrRef::Emb(b),
            Str::Raw(b) => StrRef::Raw(b.as_bytes()),
            Str::RawHeap(b) => StrRef::Raw(b),
        }
    }

    /// The bytes of a string that is not an integer.
    #[inline]
    pub fn as_bytes(&self) -> Option<&[u8]> {
        self.as_ref().as_bytes()
    }

    /// Calls `f` with the value's bytes (integers are formatted on the stack).
    #[inline]
    pub fn with_bytes<R>(&self, f: impl FnOnce(&[u8]) -> R) -> R {
        self.as_ref().with_bytes(f)
    }

    pub fn to_vec(&self) -> Vec<u8> {
        self.as_ref().to_vec()
    }

    /// The bytes, reusing the heap allocation when there is one.
    pub fn into_vec(self) -> Vec<u8> {
        match self {
            Str::EmbHeap(b) | Str::RawHeap(b) => b.into_vec(),
            other => other.to_vec(),
        }
    }

    pub fn len(&self) -> usize {
        self.as_ref().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn encoding(&self) -> &'static str {
        self.as_ref().encoding()
    }

    /// The integer, for either integer encoding.
    pub fn as_int(&self) -> Option<i64> {
        self.as_ref().as_int()
    }

    /// How many references Redis would report for this value (OBJECT REFCOUNT).
    pub fn refcount(&self) -> i64 {
        self.as_ref().refcount()
    }

    /// The copy COPY stores: the same bytes and encoding, held by one key alone.
    pub fn duplicate(&self) -> Str {
        match self {
            Str::Int(n) => Str::OwnInt(*n),
            other => other.clone(),
        }
    }

    /// Bytes on the heap beyond the entry itself.
    pub fn heap_size(&self) -> usize {
        match self {
            Str::EmbHeap(b) | Str::RawHeap(b) => b.len(),
            _ => 0,
        }
    }
}

/// A string value as a key's entry holds it: its encoding and its bytes (or its
/// integer), borrowed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StrRef<'a> {
    /// An "int" shared between keys when below [`SHARED_INTEGERS`] (see [`Str::Int`]).
    Int(i64),
    /// An "int" held by one key alone (see [`Str::OwnInt`]).
    OwnInt(i64),
    /// "embstr".
    Emb(&'a [u8]),
    /// "raw".
    Raw(&'a [u8]),
}

impl<'a> StrRef<'a> {
    /// The value as Redis would store a string created whole (see [`Str::new`]).
    #[inline]
    pub fn new(bytes: &'a [u8]) -> StrRef<'a> {
        match parse_canonical_i64(bytes) {
            Some(n) => StrRef::Int(n),
            None if bytes.len() <= EMBSTR_LIMIT => StrRef::Emb(bytes),
            None => StrRef::Raw(bytes),
        }
    }

    /// The bytes of a string that is not an integer.
    #[inline]
    pub fn as_bytes(self) -> Option<&'a [u8]> {
        match self {
            StrRef::Int(_) | StrRef::OwnInt(_) => None,
            StrRef::Emb(b) | StrRef::Raw(b) => Some(b),
        }
    }

    /// Calls `f` with the value's bytes (integers are formatted on the stack).
    #[inline]
    pub fn with_bytes<R>(self, f: impl FnOnce(&[u8]) -> R) -> R {
        match self {
            StrRef::Int(n) | StrRef::OwnInt(n) => f(itoa::Buffer::new().format(n).as_bytes()),
            StrRef::Emb(b) | StrRef::Raw(b) => f(b),
        }
    }

    pub fn to_vec(self) -> Vec<u8> {
        self.with_bytes(<[u8]>::to_vec)
    }

    pub fn len(self) -> usize {
        match self {
            StrRef::Int(n) | StrRef::OwnInt(n) => itoa::Buffer::new().format(n).len(),
            StrRef::Emb(b) | StrRef::Raw(b) => b.len(),
        }
    }

    pub fn is_empty(self) -> bool {
        self.len() == 0
    }

    pub fn encoding(self) -> &'static str {
        match self {
            StrRef::Int(_) | StrRef::OwnInt(_) => "int",
            StrRef::Emb(_) => "embstr",
            StrRef::Raw(_) => "raw",
        }
    }

    /// The integer, for either integer encoding.
    #[inline]
    pub fn as_int(self) -> Option<i64> {
        match self {
            StrRef::Int(n) | StrRef::OwnInt(n) => Some(n),
            _ => None,
        }
    }

    /// How many references Redis would report for this value (OBJECT REFCOUNT).
    pub fn refcount(self) -> i64 {
        match self {
            StrRef::Int(n) if (0..SHARED_INTEGERS).contains(&n) => i32::MAX as i64,
            _ => 1,
        }
    }

    /// An owned copy with the same encoding.
    pub fn to_owned(self) -> Str {
        match self {
            StrRef::Int(n) => Str::Int(n),
            StrRef::OwnInt(n) => Str::OwnInt(n),
            StrRef::Emb(b) => match Inline::new(b) {
                Some(inline) => Str::Emb(inline),
                None => Str::EmbHeap(b.into()),
            },
            StrRef::Raw(b) => match Inline::new(b) {
                Some(inline) => Str::Raw(inline),
                None => Str::RawHeap(b.into()),
            },
        }
    }

    /// The copy COPY stores (see [`Str::duplicate`]).
    pub fn duplicate(self) -> Str {
        match self {
            StrRef::Int(n) => Str::OwnInt(n),
            other => other.to_owned(),
        }
    }

    /// Whether `maxmemory-policy tiered` may move it out of memory: long enough that
    /// the placeholder left in its place saves memory (see [`crate::ValueRef::is_tierable`]).
    pub fn is_tierable(self) -> bool {
        self.as_bytes().is_some_and(|b| b.len() > INLINE_CAPACITY)
    }
}

/// What a key holds, borrowed as its entry holds it: a string's encoding and
/// bytes, or a collection's (or placeholder's) handle.
#[derive(Clone, Copy, Debug)]
pub enum ValueRef<'a> {
    Str(StrRef<'a>),
    List(&'a List),
    ZSet(&'a ZSet),
    Hash(HashRef<'a>),
    Set(&'a Set),
    Cold(&'a Cold),
}

impl<'a> From<&'a Value> for ValueRef<'a> {
    #[inline]
    fn from(value: &'a Value) -> ValueRef<'a> {
        match value {
            Value::Str(s) => ValueRef::Str(s.as_ref()),
            Value::List(l) => ValueRef::List(l),
            Value::ZSet(z) => ValueRef::ZSet(z),
            Value::Hash(h) => ValueRef::Hash(h.as_ref()),
            Value::Set(s) => ValueRef::Set(s),
            Value::Cold(c) => ValueRef::Cold(c),
        }
    }
}

impl<'a> ValueRef<'a> {
    pub fn value_type(self) -> ValueType {
        match self {
            ValueRef::Str(_) | ValueRef::Cold(_) => ValueType::String,
            ValueRef::List(_) => ValueType::List,
            ValueRef::ZSet(_) => ValueType::ZSet,
            ValueRef::Hash(_) => ValueType::Hash,
            ValueRef::Set(_) => ValueType::Set,
        }
    }

    pub fn encoding(self) -> &'static str {
        match self {
            ValueRef::Str(s) => s.encoding(),
            // What the string would be back in memory.
            ValueRef::Cold(c) if c.len() <= EMBSTR_LIMIT => "embstr",
            ValueRef::Cold(_) => "raw",
            // Redis 7.0 keeps every list in a quicklist, however short.
            ValueRef::List(_) => "quicklist",
            ValueRef::ZSet(z) => z.encoding(),
            ValueRef::Hash(h) => h.encoding(),
            ValueRef::Set(s) => s.encoding(),
        }
    }

    /// How much work freeing the value takes, as Redis's `lazyfreeGetFreeEffort`
    /// counts it: the nodes of a list, the elements of a hashtable or skiplist, and 1
    /// for a string or a compact encoding (a single allocation).
    pub fn free_effort(self) -> usize {
        match self {
            ValueRef::Str(_) | ValueRef::Cold(_) => 1,
            ValueRef::List(l) => l.node_count(),
            ValueRef::ZSet(z) if !z.is_listpack() => z.len(),
            ValueRef::Hash(h) if !h.is_packed() => h.len(),
            ValueRef::Set(s) if !s.is_intset() => s.len(),
            ValueRef::ZSet(_) | ValueRef::Hash(_) | ValueRef::Set(_) => 1,
        }
    }

    /// Whether dropping the value is worth handing to another thread when lazy freeing
    /// is on: its free effort exceeds [`LAZYFREE_THRESHOLD`].
    pub fn free_lazily(self) -> bool {
        self.free_effort() > LAZYFREE_THRESHOLD
    }

    /// The copy COPY stores (see [`Str::duplicate`]).
    pub fn duplicate(self) -> Value {
        match self {
            ValueRef::Str(s) => Value::Str(s.duplicate()),
            other => other.to_value(),
        }
    }

    /// An owned copy with the same encodings.
    pub fn to_value(self) -> Value {
        match self {
            ValueRef::Str(s) => Value::Str(s.to_owned()),
            ValueRef::List(l) => Value::List(Box::new(l.clone())),
            ValueRef::ZSet(z) => Value::ZSet(z.clone()),
            ValueRef::Hash(h) => Value::Hash(h.to_owned()),
            ValueRef::Set(s) => Value::Set(s.clone()),
            ValueRef::Cold(c) => Value::Cold(c.clone()),
        }
    }

    /// Whether this is a placeholder for a value in the store.
    #[inline]
    pub fn is_cold(self) -> bool {
        matches!(self, ValueRef::Cold(_))
    }

    /// Whether `maxmemory-policy tiered` may move this value out of memory: a string
    /// long enough that the placeholder left in its place saves memory.
    pub fn is_tierable(self) -> bool {
        match self {
            ValueRef::Str(s) => s.is_tierable(),
            _ => false,
        }
    }

    /// The string, if this is a string value held in memory.
    #[inline]
    pub fn as_str(self) -> Option<StrRef<'a>> {
        match self {
            ValueRef::Str(s) => Some(s),
            _ => None,
        }
    }

    /// The list, if this is a list value.
    pub fn as_list(self) -> Option<&'a List> {
        match self {
            ValueRef::List(l) => Some(l),
            _ => None,
        }
    }

    /// The hash, if this is a hash value.
    pub fn as_hash(self) -> Option<HashRef<'a>> {
        match self {
            ValueRef::Hash(h) => Some(h),
            _ => None,
        }
    }

    /// The set, if this is a set value.
    pub fn as_set(self) -> Option<&'a Set> {
        match self {
            ValueRef::Set(s) => Some(s),
            _ => None,
        }
    }

    /// The sorted set, if this is a sorted set value.
    pub fn as_zset(self) -> Option<&'a ZSet> {
        match self {
            ValueRef::ZSet(z) => Some(z),
            _ => None,
        }
    }

    /// The placeholder, if the value is out of memory.
    pub fn as_cold(self) -> Option<&'a Cold> {
        match self {
            ValueRef::Cold(c) => Some(c),
            _ => None,
        }
    }

    /// Bytes on the heap beyond the entry itself (a string's are in its entry).
    pub fn heap_size(self) -> usize {
        match self {
            ValueRef::Str(_) | ValueRef::Cold(_) => 0,
            ValueRef::List(l) => std::mem::size_of::<List>() + l.heap_size(),
            ValueRef::ZSet(z) => z.heap_size(),
            ValueRef::Hash(h) => h.heap_size(),
            ValueRef::Set(s) => s.heap_size(),
        }
    }

    /// The bytes the value holds wherever they are (in its entry or beside it), in
    /// O(1), for a decision per command: a string's length, a packed hash's pack,
    /// else [`ValueRef::heap_size`] but for a big sorted set's tree nodes, which are
    /// not counted (summing them walks the tree).
    pub fn size_quick(self) -> usize {
        match self {
            ValueRef::Str(s) => s.len(),
            ValueRef::Hash(h) if h.is_packed() => h.packed_len(),
            ValueRef::ZSet(z) => z.heap_size_quick(),
            other => other.heap_size(),
        }
    }
}

/// What a key holds.
///
/// Hashes, sets and sorted sets are held inline: their handles (a compact encoding's
/// buffer, or a pointer to the big structure) are no bigger than an entry's padding
/// allows, so a small collection costs one allocation fewer than if it were boxed.
/// A list's handle is bigger and stays boxed.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Str(Str),
    List(Box<List>),
    ZSet(ZSet),
    Hash(Hash),
    Set(Set),
    /// A string whose bytes were moved out of memory (`maxmemory-policy tiered`):
    /// they are the key's live record in the store, which a lookup reads back.
    Cold(Cold),
}

/// Values moved out of memory in this process, and their bytes (see [`Cold`]).
static COLD_KEYS: AtomicU64 = AtomicU64::new(0);
static COLD_BYTES: AtomicU64 = AtomicU64::new(0);
/// Tells cold values apart (see [`Cold::token`]).
static COLD_TOKENS: AtomicU32 = AtomicU32::new(1);

/// The placeholder of a string value that lives only in the store.
///
/// What stays in memory is the key's entry (key, expiry, access time) and this: the
/// string's length and a token. Whoever reads the value back from the store puts it
/// in place of the placeholder only if the entry still holds the same token, so a
/// read that raced with an overwrite (and a new move out) never installs old bytes.
///
/// Every placeholder alive is counted ([`cold_keys`], [`cold_bytes`]): creating one
/// adds, dropping one subtracts, so the counts are exact whatever path replaces or
/// deletes a cold value.
#[derive(Debug, PartialEq, Eq)]
pub struct Cold {
    len: u32,
    token: u32,
}

impl Cold {
    pub fn new(len: usize) -> Cold {
        let len = u32::try_from(len).unwrap_or(u32::MAX);
        COLD_KEYS.fetch_add(1, Ordering::Relaxed);
        COLD_BYTES.fetch_add(u64::from(len), Ordering::Relaxed);
        Cold {
            len,
            token: COLD_TOKENS.fetch_add(1, Ordering::Relaxed),
        }
    }

    /// The string's length in bytes.
    pub fn len(&self) -> usize {
        self.len as usize
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Tells this placeholder from any other made in this process (until the
    /// 32-bit counter wraps, billions of moves later).
    pub fn token(&self) -> u32 {
        self.token
    }
}

impl Clone for Cold {
    fn clone(&self) -> Cold {
        COLD_KEYS.fetch_add(1, Ordering::Relaxed);
        COLD_BYTES.fetch_add(u64::from(self.len), Ordering::Relaxed);
        Cold {
            len: self.len,
            token: self.token,
        }
    }
}

impl Drop for Cold {
    fn drop(&mut self) {
        COLD_KEYS.fetch_sub(1, Ordering::Relaxed);
        COLD_BYTES.fetch_sub(u64::from(self.len), Ordering::Relaxed);
    }
}

/// How many values live only in the store (in this process).
#[inline]
pub fn cold_keys() -> u64 {
    COLD_KEYS.load(Ordering::Relaxed)
}

/// The bytes of those values.
pub fn cold_bytes() -> u64 {
    COLD_BYTES.load(Ordering::Relaxed)
}

/// Redis's type names, as TYPE and SCAN TYPE use them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ValueType {
    String,
    List,
    Set,
    ZSet,
    Hash,
    Stream,
}

impl ValueType {
    pub fn name(self) -> &'static str {
        match self {
            ValueType::String => "string",
            ValueType::List => "list",
            ValueType::Set => "set",
            ValueType::ZSet => "zset",
            ValueType::Hash => "hash",
            ValueType::Stream => "stream",
        }
    }

    pub fn from_name(name: &[u8]) -> Option<ValueType> {
        let t = match name.to_ascii_lowercase().as_slice() {
            b"string" => ValueType::String,
            b"list" => ValueType::List,
            b"set" => ValueType::Set,
            b"zset" => ValueType::ZSet,
            b"hash" => ValueType::Hash,
            b"stream" => ValueType::Stream,
            _ => return None,
        };
        Some(t)
    }
}

impl Value {
    pub fn string(bytes: &[u8]) -> Value {
        Value::Str(Str::new(bytes))
    }

    /// The value borrowed as an entry would hold it.
    #[inline]
    pub fn as_ref(&self) -> ValueRef<'_> {
        ValueRef::from(self)
    }

    pub fn value_type(&self) -> ValueType {
        self.as_ref().value_type()
    }

    pub fn encoding(&self) -> &'static str {
        self.as_ref().encoding()
    }

    /// See [`ValueRef::free_effort`].
    pub fn free_effort(&self) -> usize {
        self.as_ref().free_effort()
    }

    /// See [`ValueRef::free_lazily`].
    pub fn free_lazily(&self) -> bool {
        self.as_ref().free_lazily()
    }

    /// The copy COPY stores (see [`Str::duplicate`]).
    pub fn duplicate(&self) -> Value {
        self.as_ref().duplicate()
    }

    /// Whether this is a placeholder for a value in the store.
    #[inline]
    pub fn is_cold(&self) -> bool {
        matches!(self, Value::Cold(_))
    }

    /// The string, if this is a string value held in memory.
    pub fn as_str(&self) -> Option<&Str> {
        match self {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }

    /// The list, if this is a list value.
    pub fn as_list(&self) -> Option<&List> {
        self.as_ref().as_list()
    }

    /// The hash, if this is a hash value.
    pub fn as_hash(&self) -> Option<HashRef<'_>> {
        self.as_ref().as_hash()
    }

    /// The set, if this is a set value.
    pub fn as_set(&self) -> Option<&Set> {
        self.as_ref().as_set()
    }

    /// Bytes on the heap beyond the value itself.
    pub fn heap_size(&self) -> usize {
        match self {
            Value::Str(s) => s.heap_size(),
            other => other.as_ref().heap_size(),
        }
    }
}

/// Parses `bytes` as an i64 only if it is the canonical decimal form of that number
/// (no sign on zero, no leading zeros or '+', no spaces), like Redis's `string2ll`.
pub fn parse_canonical_i64(bytes: &[u8]) -> Option<i64> {
    if bytes.is_empty() || bytes.len() > 20 {
        return None;
    }
    if bytes == b"0" {
        return Some(0);
    }
    let (neg, digits) = match bytes[0] {
        b'-' => (true, &bytes[1..]),
        _ => (false, bytes),
    };
    match digits.first() {
        Some(b'1'..=b'9') => {}
        _ => return None,
    }
    let mut v: i64 = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return None;
        }
        let d = (d - b'0') as i64;
        v = v.checked_mul(10)?;
        v = if neg {
            v.checked_sub(d)?
        } else {
            v.checked_add(d)?
        };
    }
    Some(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_integers() {
        for (s, v) in [("0", Some(0)), ("-1", Some(-1)), ("123", Some(123))] {
            assert_eq!(parse_canonical_i64(s.as_bytes()), v);
        }
        let max = i64::MAX.to_string();
        let min = i64::MIN.to_string();
        assert_eq!(parse_canonical_i64(max.as_bytes()), Some(i64::MAX));
        assert_eq!(parse_canonical_i64(min.as_bytes()), Some(i64::MIN));
        for s in [
            "",
            "-",
            "-0",
            "01",
            "+1",
            " 1",
            "1 ",
            "9223372036854775808",
            "1.0",
            "abc",
        ] {
            assert_eq!(parse_canonical_i64(s.as_bytes()), None, "{s:?}");
        }
    }

    #[test]
    fn encodings() {
        assert_eq!(Str::new(b"12").encoding(), "int");
        assert_eq!(Str::new(b"012").encoding(), "embstr");
        assert_eq!(Str::new(&[b'x'; 44]).encoding(), "embstr");
        assert_eq!(Str::new(&[b'x'; 45]).encoding(), "raw");
        assert_eq!(Str::raw(b"a".to_vec()).encoding(), "raw");
        assert_eq!(Str::Int(-5).to_vec(), b"-5");
        assert_eq!(Str::Int(7).duplicate().encoding(), "int");
        assert_eq!(Str::Int(7).refcount(), i32::MAX as i64);
        assert_eq!(Str::Int(7).duplicate().refcount(), 1);
        assert_eq!(Str::Int(10_000).refcount(), 1);
    }

    /// A value held whole in an entry (anything but a string: see
    /// [`crate::entry`]) takes 24 bytes because the string's own tag leaves room for
    /// every other variant's payload (at most 16 bytes: hashes and sorted sets hold a
    /// count-less `ForwardPack`) beside it, so `Value` needs no tag of its own. A new
    /// variant with a bigger payload would cost every collection's entry 8 bytes; the
    /// entry itself is one pointer in its table slot.
    #[test]
    fn sizes_are_pinned() {
        use std::mem::size_of;
        assert_eq!(size_of::<Str>(), 24);
        assert_eq!(size_of::<crate::pack::Pack>(), 24);
        assert_eq!(size_of::<Hash>(), 16);
        assert_eq!(size_of::<ZSet>(), 16);
        assert_eq!(size_of::<Set>(), 16);
        assert_eq!(size_of::<Value>(), 24);
        assert_eq!(size_of::<crate::Entry>(), 8);
    }
}
