//! A key's entry: the key, its value and what the keyspace keeps about it (access
//! time, TTL flag, log location), in one allocation of the size they need.
//!
//! # Concept
//!
//! A fixed-size entry pays for the largest thing it may hold: 24 bytes of key and 24
//! of value, 64 bytes with the metadata, whatever the key and value. Most keys are a
//! few bytes and most values a short string, so here a string's key and bytes sit
//! one after the other behind the metadata, and the entry is exactly as big as they
//! are: `key:123` holding `x` takes one 32-byte allocation, a 100-byte value with a
//! ten-byte key one of 128 bytes (the 64-byte entry and a 112-byte value before).
//! A small hash is laid out the same way, its pack's bytes ("listpack") as the
//! value: five short fields under `key:123456` take one 80-byte allocation instead
//! of a 48-byte entry and a 48-byte pack. Other values (lists, sets, sorted sets,
//! big hashes, cold placeholders) keep their handle (at most 16 bytes: the kind says
//! which type it is, so no `Value` tag is stored) at a fixed offset, where commands
//! borrow it; their key follows.
//!
//! ```text
//! offset 0   Meta (16 bytes): log slot, access time, log length, flags, kind
//! packed     16: key length, value length (LEB128), key bytes, value bytes
//!            (an integer's value bytes are its zigzag LEB128 form, a packed
//!            hash's its pack's elements)
//! other      16: handle (List box, Hash, Set, ZSet or Cold; 16 bytes),
//!            32: key length (LEB128), key bytes
//! ```
//!
//! A packed hash in an entry is read where it lies ([`HashRef`]) and changed there
//! through [`HashMut`]: setting or removing a field moves the bytes after it and
//! resizes the allocation (in place while jemalloc's size class allows). A change
//! that converts it, or grows it past `HASH_PACK_MAX` (512) bytes, takes it out into a
//! `Hash` held by its handle.
//!
//! [`Entry`] is one non-null pointer, so a table slot holding an `Option<Entry>` is
//! eight bytes.
//!
//! # Safety
//!
//! This is the keyspace's only unsafe code. Its invariants:
//!
//! - `ptr`, its top seven and low four bits cleared (`Entry::base`), points to a
//!   live allocation of 16-byte-aligned, `Entry::size` bytes made by this module,
//!   owned by the entry alone (no two entries share one). The top bits hold the
//!   keyspace table's tag for the entry's slot ([`DictEntry::slot_tag`]), the low
//!   ones its distance mark ([`DictEntry::slot_dist`]); neither is dereferenced.
//! - The first 16 bytes are a `Meta` whose `kind` says how the rest is laid out, and
//!   every length stored matches the bytes that follow it.
//! - For a handle kind (`kind::LIST`... `kind::COLD`), bytes 16..32 begin with an
//!   initialized handle of that kind's type, which the entry owns; `kind::MOVED`
//!   means it was moved out and must not be dropped. Packed kinds (strings, packed
//!   hashes) initialize every byte of the allocation, so it may be read as a slice;
//!   the other kinds only from offset 32.
#![allow(unsafe_code)]

use std::alloc::{self, Layout};
use std::fmt;
use std::mem::{self, size_of};
use std::ptr::{self, NonNull};

use crate::access;
use crate::compact::INLINE_CAPACITY;
use crate::dict::DictEntry;
use crate::hash::{Hash, HashRef, find_packed_pair};
use crate::list::List;
use crate::logref::NarrowSlot;
use crate::pack::{Elements, varint_len, write_varint};
use crate::set::Set;
use crate::value::{Cold, Str, StrRef, Value, ValueRef};
use crate::zset::ZSet;
use crate::{EncodingLimits, size_class};

/// What the keyspace keeps about a key besides its value.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
struct Meta {
    log_slot: NarrowSlot,
    lru: u32,
    log_len: u16,
    flags: u8,
    kind: u8,
}

impl Meta {
    /// A new key's: accessed at `now_ms`, no TTL, no log location.
    fn new(now_ms: u64) -> Meta {
        Meta {
            log_slot: NarrowSlot::default(),
            lru: access::initial(now_ms),
            log_len: 0,
            flags: 0,
            kind: kind::MOVED,
        }
    }
}

const META: usize = size_of::<Meta>();
const _: () = assert!(META == 16);
/// Where a collection's or placeholder's handle sits, and where the key of such an
/// entry starts.
const HANDLE_AT: usize = META;
const HANDLE: usize = 16;
const KEY_AFTER_HANDLE: usize = HANDLE_AT + HANDLE;
/// Every entry's alignment: enough for `Meta` and every handle, and four low address
/// bits for the table's distance mark (jemalloc aligns every size class from 16
/// bytes up to 16 anyway, and an entry is at least `META` bytes).
const ALIGN: usize = 16;

/// Checks at compile time that `T` fits the handle's place.
const fn fits<T>() -> bool {
    size_of::<T>() <= HANDLE
        && mem::align_of::<T>() <= ALIGN
        && HANDLE_AT.is_multiple_of(mem::align_of::<T>())
}
const _: () = assert!(fits::<Box<List>>() && fits::<Hash>() && fits::<Set>());
const _: () = assert!(fits::<ZSet>() && fits::<Cold>() && mem::align_of::<Meta>() <= ALIGN);
const _: () = assert!(fits::<Box<[u8]>>());

/// How an entry's bytes after the `Meta` are laid out.
mod kind {
    /// Handle kinds: the handle at offset 16, the key after it.
    pub const LIST: u8 = 0;
    pub const HASH: u8 = 1;
    pub const SET: u8 = 2;
    pub const ZSET: u8 = 3;
    pub const COLD: u8 = 4;
    /// A string in its own allocation (a `Box<[u8]>` handle): "embstr", "raw".
    pub const EMB_HEAP: u8 = 5;
    pub const RAW_HEAP: u8 = 6;
    /// Laid out as a handle kind, but the handle was moved out: nothing to drop.
    pub const MOVED: u8 = 7;
    /// Packed string kinds: key and value bytes after their two lengths.
    pub const INT: u8 = 8;
    pub const OWN_INT: u8 = 9;
    pub const EMB: u8 = 10;
    pub const RAW: u8 = 11;
    /// A packed hash ("listpack") laid out as a packed string: its pack's bytes are
    /// the value's.
    pub const HASH_PACK: u8 = 12;
}

const VOLATILE: u8 = 1;
const LOGGED: u8 = 2;

/// A key and what it holds (see the module docs).
pub struct Entry {
    /// The allocation, with the keyspace table's marks for the entry's slot (tag in
    /// the pointer's top bits, distance in its low ones; see [`Entry::base`]).
    ptr: Marked,
}

use crate::marks::{self, Marked};
const _: () = assert!(marks::DIST_MASK < ALIGN);

// SAFETY: an entry owns its allocation and the handle in it exclusively, like a
// `Box<(Meta, Value, [u8])>`; `Value`, holding every handle type, is itself `Send`
// and `Sync` (checked below).
unsafe impl Send for Entry {}
// SAFETY: as above; `&Entry` only gives shared access to what it owns.
unsafe impl Sync for Entry {}

const _: fn() = || {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<Value>();
};

/// Reads a LEB128 number written by `write_varint` at `p`: the number and its length.
///
/// # Safety
///
/// `p` must point to a complete LEB128 number inside one allocation.
#[inline]
pub(crate) unsafe fn read_varint(p: *const u8) -> (usize, usize) {
    // SAFETY: the caller guarantees a whole number at `p`.
    let first = unsafe { *p };
    if first < 0x80 {
        return (first as usize, 1);
    }
    let (mut n, mut shift, mut i) = ((first & 0x7f) as usize, 7, 1);
    loop {
        // SAFETY: the number continues while the high bit is set.
        let b = unsafe { *p.add(i) };
        n |= ((b & 0x7f) as usize) << shift;
        i += 1;
        if b < 0x80 {
            return (n, i);
        }
        shift += 7;
    }
}

/// An integer's bytes in an entry: zigzag LEB128 (one byte for -64..=63).
fn int_bytes(n: i64, buf: &mut [u8; 10]) -> usize {
    write_varint(buf, ((n << 1) ^ (n >> 63)) as u64 as usize)
}

fn int_from_bytes(bytes: &[u8]) -> i64 {
    let mut zigzag = 0u64;
    for (i, b) in bytes.iter().enumerate() {
        zigzag |= u64::from(b & 0x7f) << (7 * i);
    }
    ((zigzag >> 1) as i64) ^ -((zigzag & 1) as i64)
}

/// The kind and bytes a string is stored as.
fn str_payload<'a>(s: StrRef<'a>, buf: &'a mut [u8; 10]) -> (u8, &'a [u8]) {
    match s {
        StrRef::Int(n) => {
            let len = int_bytes(n, buf);
            (kind::INT, &buf[..len])
        }
        StrRef::OwnInt(n) => {
            let len = int_bytes(n, buf);
            (kind::OWN_INT, &buf[..len])
        }
        StrRef::Emb(b) => (kind::EMB, b),
        StrRef::Raw(b) => (kind::RAW, b),
    }
}

/// Whether the kind packs its value's bytes into the entry (a string, or a packed
/// hash's pack).
fn is_packed(kind: u8) -> bool {
    kind >= kind::INT
}

/// Whether the kind is a string packed into the entry.
fn is_packed_str(kind: u8) -> bool {
    (kind::INT..=kind::RAW).contains(&kind)
}

/// Whether a string of `len` bytes under a key of `key_len` bytes costs less packed
/// into its entry than in an allocation of its own beside a handle entry: packing
/// saves the handle and an allocation, but may cross a size class (a 1,000-byte
/// value packed takes 1,280 bytes, apart 1,024 and a 48-byte entry).
fn packs(key_len: usize, len: usize) -> bool {
    let key = varint_len(key_len) + key_len;
    let packed = META + key + varint_len(len) + len;
    size_class(packed) <= size_class(KEY_AFTER_HANDLE + key) + size_class(len)
}

/// Packed hashes up to this many bytes live in their key's entry (when [`packs`]
/// agrees): a change to one copies it out and back (see [`HashMut`]), which for a
/// few hundred bytes costs less than the allocation it saves.
const HASH_PACK_MAX: usize = 512;

/// Whether a packed hash of `len` bytes under a key of `key_len` bytes lives in its
/// entry.
fn packs_hash(key_len: usize, len: usize) -> bool {
    len <= HASH_PACK_MAX && packs(key_len, len)
}

fn layout(size: usize) -> Layout {
    // Sizes come from keys and values that exist in memory, far below isize::MAX.
    Layout::from_size_align(size, ALIGN).expect("entry size overflows a layout")
}

/// A fresh allocation of `size` bytes with `meta` written at its start.
fn allocate(size: usize, meta: Meta) -> NonNull<u8> {
    let layout = layout(size);
    // SAFETY: `size` is at least META, so the layout is not zero-sized.
    let raw = unsafe { alloc::alloc(layout) };
    let Some(ptr) = NonNull::new(raw) else {
        alloc::handle_alloc_error(layout)
    };
    // SAFETY: the allocation is `ALIGN`-aligned and at least META bytes long.
    unsafe { ptr.as_ptr().cast::<Meta>().write(meta) };
    ptr
}

/// Where the parts of an entry are.
struct Parts {
    key_at: usize,
    key_len: usize,
    /// The value's bytes (string kinds only).
    value_at: usize,
    value_len: usize,
}

impl Parts {
    fn size(&self) -> usize {
        self.value_at + self.value_len
    }
}

impl Entry {
    /// The allocation's address: the pointer without the table's marks.
    #[inline(always)]
    fn base(&self) -> *mut u8 {
        self.ptr.base()
    }

    /// Puts `new` in this entry's place, with this entry's table marks, and returns
    /// the entry it replaced.
    fn replace(&mut self, mut new: Entry) -> Entry {
        self.ptr.lend_marks(&mut new.ptr);
        mem::replace(self, new)
    }

    /// A new entry for `key` holding `value`, accessed at `now_ms`, with no TTL and
    /// no log location.
    pub fn new(key: &[u8], value: Value, now_ms: u64) -> Entry {
        Entry::holding(key, value, Meta::new(now_ms))
    }

    /// An entry for `key` holding `value` with `meta`, laid out as the value needs.
    fn holding(key: &[u8], value: Value, meta: Meta) -> Entry {
        match value {
            Value::Str(s) => Entry::string(key, s.as_ref(), meta),
            Value::Hash(h) => Entry::hash(key, h, meta),
            other => Entry::whole(key, other, meta),
        }
    }

    /// An entry holding a hash: a packed one's bytes in the entry when they fit (see
    /// [`packs_hash`]), else the `Hash` by its handle.
    fn hash(key: &[u8], h: Hash, meta: Meta) -> Entry {
        match h.packed_bytes() {
            Some(bytes) if packs_hash(key.len(), bytes.len()) => {
                Entry::packed(key, kind::HASH_PACK, bytes, meta)
            }
            _ => Entry::whole(key, Value::Hash(h), meta),
        }
    }

    /// [`Entry::new`] for a string given by reference.
    pub fn new_str(key: &[u8], value: StrRef<'_>, now_ms: u64) -> Entry {
        Entry::string(key, value, Meta::new(now_ms))
    }

    /// An entry holding a string, packed or beside it (see [`packs`]).
    fn string(key: &[u8], s: StrRef<'_>, meta: Meta) -> Entry {
        match s {
            StrRef::Emb(b) if !packs(key.len(), b.len()) => {
                Entry::whole(key, Value::Str(Str::EmbHeap(b.into())), meta)
            }
            StrRef::Raw(b) if !packs(key.len(), b.len()) => {
                Entry::whole(key, Value::Str(Str::RawHeap(b.into())), meta)
            }
            _ => {
                let mut buf = [0; 10];
                let (kind, payload) = str_payload(s, &mut buf);
                Entry::packed(key, kind, payload, meta)
            }
        }
    }

    /// An entry of a packed kind holding `payload`, its value's bytes.
    fn packed(key: &[u8], kind: u8, payload: &[u8], mut meta: Meta) -> Entry {
        debug_assert!(is_packed(kind));
        meta.kind = kind;
        let head = varint_len(key.len()) + varint_len(payload.len());
        let size = META + head + key.len() + payload.len();
        let ptr = allocate(size, meta);
        // SAFETY: the allocation is `size` bytes; the rest after META is written
        // below, every byte of it, before the slice is read.
        let body = unsafe {
            let p = ptr.as_ptr().add(META);
            ptr::write_bytes(p, 0, size - META);
            std::slice::from_raw_parts_mut(p, size - META)
        };
        let mut at = write_varint(body, key.len());
        at += write_varint(&mut body[at..], payload.len());
        body[at..at + key.len()].copy_from_slice(key);
        body[at + key.len()..].copy_from_slice(payload);
        Entry {
            ptr: Marked::new(ptr),
        }
    }

    /// An entry holding a value by its handle: not a string, or a string in its own
    /// allocation.
    fn whole(key: &[u8], value: Value, mut meta: Meta) -> Entry {
        meta.kind = kind::MOVED;
        let size = KEY_AFTER_HANDLE + varint_len(key.len()) + key.len();
        let mut entry = Entry {
            ptr: Marked::new(allocate(size, meta)),
        };
        // SAFETY: the allocation is `size` bytes; the key's length and bytes go after
        // the handle's place (zeroed first, so the slice is never uninitialized), and
        // the handle is written (and the kind set) last, so the entry is whole before
        // anything reads it.
        unsafe {
            let at = entry.base().add(KEY_AFTER_HANDLE);
            ptr::write_bytes(at, 0, size - KEY_AFTER_HANDLE);
            let tail = std::slice::from_raw_parts_mut(at, size - KEY_AFTER_HANDLE);
            let at = write_varint(tail, key.len());
            tail[at..].copy_from_slice(key);
        }
        entry.put_handle(value);
        entry
    }

    /// Writes the handle of `value` (not a string) in the handle's place of an entry
    /// whose handle is `MOVED`, and sets the kind.
    fn put_handle(&mut self, value: Value) {
        debug_assert_eq!(self.meta().kind, kind::MOVED);
        let at = self.base().wrapping_add(HANDLE_AT);
        // SAFETY: the handle's place is 16 bytes at an 8-aligned offset (every
        // handle type fits: checked at compile time) and holds nothing to drop.
        let kind = unsafe {
            match value {
                Value::List(l) => {
                    at.cast::<Box<List>>().write(l);
                    kind::LIST
                }
                Value::Hash(h) => {
                    at.cast::<Hash>().write(h);
                    kind::HASH
                }
                Value::Set(v) => {
                    at.cast::<Set>().write(v);
                    kind::SET
                }
                Value::ZSet(z) => {
                    at.cast::<ZSet>().write(z);
                    kind::ZSET
                }
                Value::Cold(c) => {
                    at.cast::<Cold>().write(c);
                    kind::COLD
                }
                Value::Str(Str::EmbHeap(b)) => {
                    at.cast::<Box<[u8]>>().write(b);
                    kind::EMB_HEAP
                }
                Value::Str(Str::RawHeap(b)) => {
                    at.cast::<Box<[u8]>>().write(b);
                    kind::RAW_HEAP
                }
                Value::Str(_) => unreachable!("short strings are packed, never a handle"),
            }
        };
        self.meta_mut().kind = kind;
    }

    /// The handle of a handle kind, as `T`.
    ///
    /// # Safety
    ///
    /// The entry's kind must hold a `T`.
    #[inline]
    unsafe fn handle<T>(&self) -> &T {
        // SAFETY: the caller guarantees a `T` in the handle's place.
        unsafe { &*self.base().add(HANDLE_AT).cast::<T>() }
    }

    /// # Safety
    ///
    /// As [`Entry::handle`].
    #[inline]
    unsafe fn handle_mut<T>(&mut self) -> &mut T {
        // SAFETY: as in `handle`; `&mut self` is exclusive.
        unsafe { &mut *self.base().add(HANDLE_AT).cast::<T>() }
    }

    #[inline]
    fn meta(&self) -> &Meta {
        // SAFETY: every entry starts with an initialized, aligned `Meta`.
        unsafe { &*self.base().cast::<Meta>() }
    }

    #[inline]
    fn meta_mut(&mut self) -> &mut Meta {
        // SAFETY: as in `meta`, and `&mut self` gives exclusive access.
        unsafe { &mut *self.base().cast::<Meta>() }
    }

    #[inline]
    fn parts(&self) -> Parts {
        let p = self.base();
        if is_packed(self.meta().kind) {
            // SAFETY: a packed entry's two lengths follow its `Meta`.
            let ((key_len, a), (value_len, b)) = unsafe {
                let k = read_varint(p.add(META));
                (k, read_varint(p.add(META + k.1)))
            };
            let key_at = META + a + b;
            Parts {
                key_at,
                key_len,
                value_at: key_at + key_len,
                value_len,
            }
        } else {
            // SAFETY: the key's length follows the handle's place.
            let (key_len, a) = unsafe { read_varint(p.add(KEY_AFTER_HANDLE)) };
            let key_at = KEY_AFTER_HANDLE + a;
            Parts {
                key_at,
                key_len,
                value_at: key_at + key_len,
                value_len: 0,
            }
        }
    }

    /// `len` initialized bytes at `at`.
    #[inline]
    fn bytes(&self, at: usize, len: usize) -> &[u8] {
        // SAFETY: callers pass ranges from `parts`, which are initialized bytes of
        // this allocation (see the module's invariants).
        unsafe { std::slice::from_raw_parts(self.base().add(at), len) }
    }

    /// The bytes the allocation takes.
    fn size(&self) -> usize {
        self.parts().size()
    }

    #[inline]
    pub fn key(&self) -> &[u8] {
        let parts = self.parts();
        self.bytes(parts.key_at, parts.key_len)
    }

    /// What the key holds.
    #[inline]
    pub fn value(&self) -> ValueRef<'_> {
        // SAFETY (each arm): the kind says which handle the entry holds.
        match self.meta().kind {
            kind::LIST => ValueRef::List(unsafe { self.handle::<Box<List>>() }),
            kind::HASH => ValueRef::Hash(unsafe { self.handle::<Hash>() }.as_ref()),
            kind::SET => ValueRef::Set(unsafe { self.handle::<Set>() }),
            kind::ZSET => ValueRef::ZSet(unsafe { self.handle::<ZSet>() }),
            kind::COLD => ValueRef::Cold(unsafe { self.handle::<Cold>() }),
            kind::EMB_HEAP => ValueRef::Str(StrRef::Emb(unsafe { self.handle::<Box<[u8]>>() })),
            kind::RAW_HEAP => ValueRef::Str(StrRef::Raw(unsafe { self.handle::<Box<[u8]>>() })),
            kind::HASH_PACK => ValueRef::Hash(HashRef::packed_in_place(self.value_bytes())),
            kind => {
                debug_assert!(is_packed(kind), "a moved entry is never read");
                let parts = self.parts();
                let bytes = self.bytes(parts.value_at, parts.value_len);
                ValueRef::Str(match kind {
                    kind::INT => StrRef::Int(int_from_bytes(bytes)),
                    kind::OWN_INT => StrRef::OwnInt(int_from_bytes(bytes)),
                    kind::EMB => StrRef::Emb(bytes),
                    _ => StrRef::Raw(bytes),
                })
            }
        }
    }

    /// The list, to change in place.
    #[inline]
    pub fn as_list_mut(&mut self) -> Option<&mut List> {
        // SAFETY: a `LIST` entry holds a `Box<List>`.
        (self.meta().kind == kind::LIST).then(|| &mut **unsafe { self.handle_mut::<Box<List>>() })
    }

    /// The hash, to change in place: the entry's own, or a packed hash taken out of
    /// the entry and put back when the guard goes (see [`HashMut`]).
    #[inline]
    pub fn as_hash_mut(&mut self) -> Option<HashMut<'_>> {
        match self.meta().kind {
            kind::HASH | kind::HASH_PACK => Some(HashMut {
                entry: self,
                taken: None,
            }),
            _ => None,
        }
    }

    /// A packed kind's value bytes.
    #[inline]
    fn value_bytes(&self) -> &[u8] {
        debug_assert!(is_packed(self.meta().kind));
        let parts = self.parts();
        self.bytes(parts.value_at, parts.value_len)
    }

    /// Puts back a hash taken out of a `HASH_PACK` entry by [`Entry::as_hash_mut`]:
    /// its bytes over the old ones (the allocation resized in place where the
    /// allocator can), or, if it no longer fits, the entry rebuilt around its handle.
    fn put_back_hash(&mut self, h: Hash) {
        debug_assert_eq!(self.meta().kind, kind::HASH_PACK);
        let parts = self.parts();
        match h.packed_bytes() {
            Some(bytes) if packs_hash(parts.key_len, bytes.len()) => {
                let at = self.resize_value(bytes.len());
                // SAFETY: `resize_value` made `bytes.len()` bytes at `at` the value's,
                // inside this allocation, which `&mut self` holds exclusively.
                unsafe {
                    let dst = self.base().add(at);
                    ptr::copy_nonoverlapping(bytes.as_ptr(), dst, bytes.len());
                }
            }
            _ => {
                let new = Entry::whole(self.key(), Value::Hash(h), *self.meta());
                self.replace(new);
            }
        }
    }

    /// Sets `field` to `value` in a `HASH_PACK` entry's pack, in place: `Some(true)`
    /// if the field is new, `Some(false)` if it was there; `None`, changing nothing,
    /// if the hash must change encoding (more than `max_entries` fields) or no longer
    /// fits the entry.
    fn pack_insert(&mut self, field: &[u8], value: &[u8], max_entries: u64) -> Option<bool> {
        let parts = self.parts();
        let new_enc = varint_len(value.len()) + value.len();
        let data = self.value_bytes();
        match find_packed_pair(data, field) {
            Ok([_, value_at, end]) => {
                // As Redis, an update converts too when the limit was lowered since.
                let total = Elements::new(data).count() as u64 / 2;
                let len = data.len() - (end - value_at) + new_enc;
                if total > max_entries || !packs_hash(parts.key_len, len) {
                    return None;
                }
                let hole = self.splice(value_at, end - value_at, new_enc);
                self.fill(hole, &[value]);
                Some(false)
            }
            Err(fields) => {
                let add = varint_len(field.len()) + field.len() + new_enc;
                let len = data.len() + add;
                if fields as u64 + 1 > max_entries || !packs_hash(parts.key_len, len) {
                    return None;
                }
                let hole = self.splice(data.len(), 0, add);
                self.fill(hole, &[field, value]);
                Some(true)
            }
        }
    }

    /// Removes `field` from a `HASH_PACK` entry's pack, in place; whether it was
    /// there.
    fn pack_remove(&mut self, field: &[u8]) -> bool {
        match find_packed_pair(self.value_bytes(), field) {
            Ok([at, _, end]) => {
                self.splice(at, end - at, 0);
                true
            }
            Err(_) => false,
        }
    }

    /// Replaces `remove` bytes at offset `at` of a packed entry's value by a hole of
    /// `insert` bytes (old or zeroed bytes, for the caller to overwrite); returns the
    /// hole's offset in the entry.
    fn splice(&mut self, at: usize, remove: usize, insert: usize) -> usize {
        let parts = self.parts();
        let old_len = parts.value_len;
        debug_assert!(at + remove <= old_len);
        let tail = old_len - at - remove;
        let len = old_len - remove + insert;
        // SAFETY: both moves stay inside the value's bytes of the allocation as it
        // is when they run (before a shrink, after a growth); `copy` handles the
        // overlap, and `&mut self` holds the entry exclusively.
        let value_at = if insert < remove {
            unsafe {
                let p = self.base().add(parts.value_at);
                ptr::copy(p.add(at + remove), p.add(at + insert), tail);
            }
            self.resize_value(len)
        } else {
            let value_at = self.resize_value(len);
            unsafe {
                let p = self.base().add(value_at);
                ptr::copy(p.add(at + remove), p.add(at + insert), tail);
            }
            value_at
        };
        value_at + at
    }

    /// Writes `elements`, each as a pack element (its LEB128 length, its bytes),
    /// at offset `at`, a hole [`Entry::splice`] made exactly their size.
    fn fill(&mut self, at: usize, elements: &[&[u8]]) {
        let size: usize = elements.iter().map(|e| varint_len(e.len()) + e.len()).sum();
        debug_assert!(at + size <= self.size());
        // SAFETY: the hole is `size` initialized bytes at `at`, inside this
        // allocation, which `&mut self` holds exclusively.
        let hole = unsafe { std::slice::from_raw_parts_mut(self.base().add(at), size) };
        let mut i = 0;
        for e in elements {
            i += write_varint(&mut hole[i..], e.len());
            hole[i..i + e.len()].copy_from_slice(e);
            i += e.len();
        }
    }

    /// Gives a packed entry's value `len` bytes, keeping its kind, key and the first
    /// bytes of its value (zeroes after them when it grows); returns the offset the
    /// value now starts at. The allocation is resized in place where the allocator
    /// can.
    fn resize_value(&mut self, len: usize) -> usize {
        debug_assert!(is_packed(self.meta().kind));
        let parts = self.parts();
        if len == parts.value_len {
            // A value replaced by one of its length (HSET of a field's new value):
            // nothing moves, and a `realloc` to the same size still cost some 200
            // instructions.
            return parts.value_at;
        }
        let old_size = parts.size();
        let head = varint_len(parts.key_len) + varint_len(len);
        let key_at = META + head;
        let value_at = key_at + parts.key_len;
        let new_size = value_at + len;
        let new_layout = layout(new_size);
        let kept = parts.value_len.min(len);
        // The lengths are encoded here and copied in: a grown head can reach past
        // the old allocation's end, bytes not initialized until written.
        let mut lengths = [0u8; 20]; // two LEB128 `usize`s, ten bytes each at most
        let at = write_varint(&mut lengths, parts.key_len);
        write_varint(&mut lengths[at..], len);
        // SAFETY: the allocation was made with `layout(old_size)`; `realloc` keeps
        // its first `min(old_size, new_size)` bytes. When the lengths take fewer
        // bytes, the key and the value's kept bytes move down before a shrink cuts
        // them; when they take more, they move up after the allocation grows (`copy`
        // handles the overlap). The lengths are rewritten and any new value bytes
        // zeroed, so every byte up to `new_size` is initialized; `&mut self` holds
        // the entry exclusively.
        unsafe {
            let moved = parts.key_len + kept;
            if key_at < parts.key_at {
                let p = self.base();
                ptr::copy(p.add(parts.key_at), p.add(key_at), moved);
            }
            let raw = alloc::realloc(self.base(), layout(old_size), new_size);
            let Some(ptr) = NonNull::new(raw) else {
                alloc::handle_alloc_error(new_layout)
            };
            self.ptr.move_to(ptr);
            let p = ptr.as_ptr();
            if key_at > parts.key_at {
                ptr::copy(p.add(parts.key_at), p.add(key_at), moved);
            }
            ptr::copy_nonoverlapping(lengths.as_ptr(), p.add(META), head);
            ptr::write_bytes(p.add(value_at + kept), 0, len - kept);
        }
        value_at
    }

    /// The set, to change in place.
    #[inline]
    pub fn as_set_mut(&mut self) -> Option<&mut Set> {
        // SAFETY: a `SET` entry holds a `Set`.
        (self.meta().kind == kind::SET).then(|| unsafe { self.handle_mut::<Set>() })
    }

    /// The sorted set, to change in place.
    #[inline]
    pub fn as_zset_mut(&mut self) -> Option<&mut ZSet> {
        // SAFETY: a `ZSET` entry holds a `ZSet`.
        (self.meta().kind == kind::ZSET).then(|| unsafe { self.handle_mut::<ZSet>() })
    }

    /// Replaces the value, keeping the key and metadata; returns the old value if
    /// it was not a string (a replaced string is freed here: it never needs freeing
    /// elsewhere).
    pub fn set_value(&mut self, value: Value) -> Option<Value> {
        match value {
            Value::Str(s) => self.set_str(s.as_ref()),
            other if is_packed(self.meta().kind) || matches!(other, Value::Hash(_)) => {
                let new = Entry::holding(self.key(), other, *self.meta());
                self.replace(new)
                    .into_whole()
                    .filter(|v| !matches!(v, Value::Str(_)))
            }
            other => {
                let old = self.take_whole();
                self.put_handle(other);
                old.filter(|v| !matches!(v, Value::Str(_)))
            }
        }
    }

    /// Replaces the value by the string `s` (see [`Entry::set_value`]), in place
    /// when the entry held a string of the same size.
    pub fn set_str(&mut self, s: StrRef<'_>) -> Option<Value> {
        if self.overwrite_str(s) {
            return None;
        }
        let new = Entry::string(self.key(), s, *self.meta());
        self.replace(new)
            .into_whole()
            .filter(|v| !matches!(v, Value::Str(_)))
    }

    /// Writes `s` over the string held when it takes the same bytes in the same
    /// place (packed, or in its own allocation); false, changing nothing, otherwise.
    fn overwrite_str(&mut self, s: StrRef<'_>) -> bool {
        let kind = self.meta().kind;
        if kind == kind::EMB_HEAP || kind == kind::RAW_HEAP {
            let (Some(bytes), Some(old)) = (s.as_bytes(), self.value().as_str()) else {
                return false;
            };
            if old.len() != bytes.len() {
                return false;
            }
            let raw = matches!(s, StrRef::Raw(_));
            self.meta_mut().kind = if raw { kind::RAW_HEAP } else { kind::EMB_HEAP };
            // SAFETY: a heap string kind holds a `Box<[u8]>`.
            unsafe { self.handle_mut::<Box<[u8]>>() }.copy_from_slice(bytes);
            return true;
        }
        if !is_packed_str(kind) {
            return false;
        }
        let mut buf = [0; 10];
        let (kind, payload) = str_payload(s, &mut buf);
        let parts = self.parts();
        if parts.value_len != payload.len() {
            return false;
        }
        self.meta_mut().kind = kind;
        // SAFETY: the value's bytes are `payload.len()` bytes at `value_at`, inside
        // this allocation, which `&mut self` holds exclusively.
        unsafe {
            let dst = self.base().add(parts.value_at);
            ptr::copy_nonoverlapping(payload.as_ptr(), dst, payload.len());
        }
        true
    }

    /// Appends `extra` to a string that is not an integer, which becomes "raw";
    /// returns its new length, or `None` (changing nothing) for any other value. The
    /// allocation grows in place where the allocator can (as a big string's does).
    pub fn append(&mut self, extra: &[u8]) -> Option<usize> {
        let kind = self.meta().kind;
        if kind == kind::EMB_HEAP || kind == kind::RAW_HEAP {
            // SAFETY: a heap string kind holds a `Box<[u8]>`.
            let b = unsafe { self.handle_mut::<Box<[u8]>>() };
            let mut bytes = mem::take(b).into_vec();
            bytes.extend_from_slice(extra);
            *b = bytes.into_boxed_slice();
            let len = b.len();
            self.meta_mut().kind = kind::RAW_HEAP;
            return Some(len);
        }
        if kind != kind::EMB && kind != kind::RAW {
            return None;
        }
        let old_len = self.parts().value_len;
        let len = old_len + extra.len();
        let at = self.resize_value(len);
        // SAFETY: `resize_value` made `len` bytes at `at` the value's, its first
        // `old_len` kept; `extra` goes after them. `&mut self` is exclusive.
        unsafe {
            let dst = self.base().add(at + old_len);
            ptr::copy_nonoverlapping(extra.as_ptr(), dst, extra.len());
        }
        self.meta_mut().kind = kind::RAW;
        Some(len)
    }

    /// The value, taking it out of the entry.
    pub fn into_value(self) -> Value {
        match self.meta().kind {
            kind::HASH_PACK => return Value::Hash(Hash::from_packed_bytes(self.value_bytes())),
            kind if is_packed(kind) => {
                let s = self.value().as_str().expect("a packed string");
                return Value::Str(s.to_owned());
            }
            _ => {}
        }
        match self.into_whole().expect("a handle") {
            // A short string beside a long key: back in place, as `Str` holds it.
            Value::Str(s) if s.len() <= INLINE_CAPACITY => Value::Str(s.as_ref().to_owned()),
            value => value,
        }
    }

    /// The value of a handle kind, moved out; `None` for a packed string.
    fn into_whole(mut self) -> Option<Value> {
        self.take_whole()
    }

    /// Moves the value of a handle kind out, leaving the entry `MOVED`: it must then
    /// be given another handle or dropped, never read.
    fn take_whole(&mut self) -> Option<Value> {
        let kind = self.meta().kind;
        let at = self.base().wrapping_add(HANDLE_AT);
        // SAFETY: the kind says which handle is in place; marking the entry `MOVED`
        // keeps it from being dropped twice.
        let value = unsafe {
            match kind {
                kind::LIST => Value::List(at.cast::<Box<List>>().read()),
                kind::HASH => Value::Hash(at.cast::<Hash>().read()),
                kind::SET => Value::Set(at.cast::<Set>().read()),
                kind::ZSET => Value::ZSet(at.cast::<ZSet>().read()),
                kind::COLD => Value::Cold(at.cast::<Cold>().read()),
                kind::EMB_HEAP => Value::Str(Str::EmbHeap(at.cast::<Box<[u8]>>().read())),
                kind::RAW_HEAP => Value::Str(Str::RawHeap(at.cast::<Box<[u8]>>().read())),
                _ => return None,
            }
        };
        self.meta_mut().kind = kind::MOVED;
        Some(value)
    }

    /// Gives the entry another key (RENAME, MOVE): it must then be inserted under it.
    pub fn set_key(&mut self, key: &[u8]) {
        let meta = *self.meta();
        let new = match self.take_whole() {
            Some(value) => Entry::whole(key, value, meta),
            None if meta.kind == kind::HASH_PACK => {
                Entry::hash(key, Hash::from_packed_bytes(self.value_bytes()), meta)
            }
            None => Entry::string(key, self.value().as_str().expect("a packed string"), meta),
        };
        *self = new;
    }

    /// Whether the key has a TTL (the database's `Expires` holds it).
    #[inline]
    pub fn has_ttl(&self) -> bool {
        self.meta().flags & VOLATILE != 0
    }

    #[inline]
    pub(crate) fn set_volatile(&mut self, volatile: bool) {
        self.set_flag(VOLATILE, volatile);
    }

    #[inline]
    fn set_flag(&mut self, flag: u8, on: bool) {
        let m = self.meta_mut();
        m.flags = if on { m.flags | flag } else { m.flags & !flag };
    }

    /// Whether the database knows where the key's records are in the store's log.
    #[inline]
    pub fn is_logged(&self) -> bool {
        self.meta().flags & LOGGED != 0
    }

    #[inline]
    pub(crate) fn set_logged(&mut self, logged: bool) {
        self.set_flag(LOGGED, logged);
    }

    /// Where the key's one record is in the log, and its length (0: not held here).
    #[inline]
    pub(crate) fn log_slot(&self) -> (NarrowSlot, u16) {
        let m = self.meta();
        (m.log_slot, m.log_len)
    }

    #[inline]
    pub(crate) fn set_log_slot(&mut self, slot: NarrowSlot, len: u16) {
        let m = self.meta_mut();
        m.log_slot = slot;
        m.log_len = len;
    }

    /// The access time or LFU counter (see [`crate::access`]).
    #[inline]
    pub(crate) fn lru(&self) -> u32 {
        self.meta().lru
    }

    /// Records an access at `now_ms` (a new time under LRU, a counter increment under
    /// LFU).
    #[inline]
    pub fn touch(&mut self, now_ms: u64) {
        let m = self.meta_mut();
        m.lru = access::accessed(m.lru, now_ms);
    }

    /// Seconds since the last access (meaningful under LRU).
    pub fn idle_seconds(&self, now_ms: u64) -> u64 {
        access::idle_ms(self.lru(), now_ms) / 1000
    }

    /// The LFU counter after its decay (meaningful under LFU).
    pub fn freq(&self, now_ms: u64) -> u8 {
        access::lfu_decayed(self.lru(), now_ms)
    }

    /// Bytes this entry holds: its allocation and what its value holds beyond it.
    pub fn memory_usage(&self) -> usize {
        let beside = match self.value() {
            ValueRef::Str(s) if !is_packed(self.meta().kind) => s.len(),
            other => other.heap_size(),
        };
        self.size() + beside
    }
}

/// A hash to change in place, from [`Entry::as_hash_mut`]. A hash held by its
/// handle is changed where it is. A packed hash held in the entry's bytes is changed
/// there by the common changes (a field set or removed, resizing the entry in place
/// where the allocator can); anything else (a conversion to a hashtable, a hash
/// growing past what the entry holds) takes it out into a `Hash` first, which goes
/// back into the entry, or by its handle, when the guard is dropped.
pub struct HashMut<'a> {
    entry: &'a mut Entry,
    /// The hash taken out of a `HASH_PACK` entry, if it has been.
    taken: Option<Hash>,
}

impl<'a> HashMut<'a> {
    /// The hash, borrowed.
    pub fn as_ref(&self) -> HashRef<'_> {
        match &self.taken {
            Some(h) => h.as_ref(),
            None => self.entry.value().as_hash().expect("a hash entry"),
        }
    }

    pub fn len(&self) -> usize {
        self.as_ref().len()
    }

    pub fn is_empty(&self) -> bool {
        self.as_ref().is_empty()
    }

    pub fn contains(&self, field: &[u8]) -> bool {
        self.as_ref().contains(field)
    }

    /// Whether the hash is still packed in the entry's bytes.
    fn in_entry(&self) -> bool {
        self.taken.is_none() && self.entry.meta().kind == kind::HASH_PACK
    }

    /// The hash as a `Hash`, taken out of the entry if it was packed there.
    fn hash(&mut self) -> &mut Hash {
        if self.in_entry() {
            self.taken = Some(Hash::from_packed_bytes(self.entry.value_bytes()));
        }
        match &mut self.taken {
            Some(h) => h,
            // SAFETY: not taken and not `HASH_PACK`: `as_hash_mut` checked that the
            // entry is a `HASH` entry, and the guard holds it exclusively since.
            None => unsafe { self.entry.handle_mut::<Hash>() },
        }
    }

    /// [`Hash::fit`] for the fields and values about to be set.
    pub fn fit(&mut self, args: &[&[u8]], limits: &EncodingLimits) {
        // An entry's pack is at most `HASH_PACK_MAX` bytes, and arguments that add
        // up to more would move it out anyway: those, and a long argument, go to
        // `Hash::fit`; short ones cannot make it convert.
        let max = limits.hash_max_listpack_value;
        let sum: usize = args.iter().map(|a| a.len()).sum();
        if !self.in_entry() || sum > HASH_PACK_MAX || args.iter().any(|a| a.len() as u64 > max) {
            self.hash().fit(args.iter().copied(), limits);
        }
    }

    /// [`Hash::insert`]: sets `field` to `value`; true if the field is new.
    pub fn insert(&mut self, field: &[u8], value: &[u8], limits: &EncodingLimits) -> bool {
        let max = limits.hash_max_listpack_value;
        if self.in_entry() && field.len() as u64 <= max && value.len() as u64 <= max {
            let entries = limits.hash_max_listpack_entries;
            if let Some(new) = self.entry.pack_insert(field, value, entries) {
                return new;
            }
        }
        self.hash().insert(field, value, limits)
    }

    /// [`Hash::remove`]: removes `field`; returns whether it was there.
    pub fn remove(&mut self, field: &[u8]) -> bool {
        if self.in_entry() {
            return self.entry.pack_remove(field);
        }
        self.hash().remove(field)
    }
}

impl Drop for HashMut<'_> {
    fn drop(&mut self) {
        if let Some(h) = self.taken.take() {
            self.entry.put_back_hash(h);
        }
    }
}

impl DictEntry for Entry {
    #[inline]
    fn key(&self) -> &[u8] {
        Entry::key(self)
    }

    const TAGS_INSIDE: bool = marks::TAGGED;

    #[inline]
    fn slot_tag(&self) -> u8 {
        self.ptr.tag()
    }

    #[inline]
    fn set_slot_tag(&mut self, tag: u8) {
        self.ptr.set_tag(tag);
    }

    #[inline]
    fn slot_dist(&self) -> u8 {
        self.ptr.dist()
    }

    #[inline]
    fn addr(&self) -> Option<usize> {
        Some(self.base().addr())
    }

    #[inline]
    fn set_slot_dist(&mut self, mark: u8) {
        self.ptr.set_dist(mark);
    }
}

impl Drop for Entry {
    fn drop(&mut self) {
        let size = self.size();
        drop(self.take_whole());
        // SAFETY: the allocation was made by `allocate` with this size and alignment.
        unsafe { alloc::dealloc(self.base(), layout(size)) };
    }
}

impl fmt::Debug for Entry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Entry")
            .field("key", &String::from_utf8_lossy(self.key()))
            .field("value", &self.value())
            .field("meta", self.meta())
            .finish()
    }
}

/// Starts loading the cache line at `addr` (a hint: it never faults, whatever the
/// address).
#[inline]
pub(crate) fn prefetch_line(addr: usize) {
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    // SAFETY: a prefetch only hints the cache; it reads nothing and never faults,
    // even for an address that is not mapped.
    unsafe {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        _mm_prefetch::<_MM_HINT_T0>(std::ptr::without_provenance::<i8>(addr));
    }
    #[cfg(not(all(target_arch = "x86_64", not(miri))))]
    let _ = addr;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A hash of `n` fields in a hashtable (held by its handle).
    fn table_hash(n: usize) -> Hash {
        let limits = crate::EncodingLimits {
            hash_max_listpack_entries: 0,
            ..crate::EncodingLimits::default()
        };
        let mut h = Hash::default();
        for i in 0..n {
            h.insert(format!("f{i}").as_bytes(), b"v", &limits);
        }
        h
    }

    /// A hash's fields and values, sorted.
    fn hash_pairs(e: &Entry) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut pairs: Vec<_> = (e.value().as_hash().unwrap().iter())
            .map(|(f, v)| (f.to_vec(), v.to_vec()))
            .collect();
        pairs.sort();
        pairs
    }

    fn str_value(e: &Entry) -> Vec<u8> {
        e.value().as_str().expect("a string").to_vec()
    }

    #[test]
    fn small_strings_fit_32_bytes() {
        let e = Entry::new(b"key:123456", Value::string(b"x"), 0);
        assert_eq!(e.size(), 29);
        assert_eq!(e.key(), b"key:123456");
        assert_eq!(str_value(&e), b"x");
        assert_eq!(size_of::<Entry>(), 8);
        assert_eq!(size_of::<Option<Entry>>(), 8);
    }

    /// A table's tag rides in the pointer: every read and change of the entry
    /// sees through it, and it survives the entry's reallocation.
    #[test]
    fn the_slot_marks_ride_along() {
        let mut e = Entry::new(b"key:1", Value::string(b"abc"), 0);
        assert_eq!((e.slot_tag(), e.slot_dist()), (0, 0));
        e.set_slot_tag(0x5a);
        e.set_slot_dist(0xf);
        let inside = |m: u8| if Entry::TAGS_INSIDE { m } else { 0 };
        let marks = (inside(0x5a), inside(0xf));
        assert_eq!((e.slot_tag(), e.slot_dist()), marks);
        assert_eq!(e.key(), b"key:1");
        assert_eq!(str_value(&e), b"abc");
        // Growth by reallocation keeps the marks.
        for _ in 0..20 {
            e.append(&[b'x'; 50]);
        }
        assert_eq!((e.slot_tag(), e.slot_dist()), marks);
        assert_eq!(str_value(&e).len(), 3 + 1000);
        // Each mark is set without touching the other.
        e.set_slot_tag(0x7f);
        e.set_slot_dist(3);
        let marks = (inside(0x7f), inside(3));
        assert_eq!((e.slot_tag(), e.slot_dist()), marks);
        e.set_slot_tag(0x7f);
        assert_eq!(e.slot_dist(), inside(3));
        // So does a change of the value's kind or size, which makes a new entry.
        assert!(e.set_value(Value::Hash(table_hash(4))).is_none());
        assert_eq!(hash_pairs(&e).len(), 4);
        assert_eq!(e.key(), b"key:1");
        assert_eq!((e.slot_tag(), e.slot_dist()), marks);
        e.set_str(StrRef::new(b"a string of another size"));
        assert_eq!(str_value(&e), b"a string of another size");
        assert_eq!((e.slot_tag(), e.slot_dist()), marks);
    }

    #[test]
    fn integers_keep_their_encoding() {
        for n in [0, 1, -1, 63, -64, 64, 9999, 10_000, i64::MAX, i64::MIN] {
            let e = Entry::new(b"k", Value::Str(Str::Int(n)), 0);
            assert_eq!(e.value().as_str().and_then(|s| s.as_int()), Some(n));
            assert_eq!(e.value().encoding(), "int");
            let own = Entry::new(b"k", Value::Str(Str::OwnInt(n)), 0);
            assert_eq!(own.value().as_str().unwrap().refcount(), 1);
            assert_eq!(own.into_value(), Value::Str(Str::OwnInt(n)));
        }
    }

    #[test]
    fn encodings_survive_the_round_trip() {
        let cases = [
            Str::new(b"hello"),
            Str::new(&[b'a'; 44]),
            Str::new(&[b'a'; 45]),
            Str::raw(b"ab".to_vec()),
            Str::raw(vec![b'z'; 300]),
            Str::new(b""),
        ];
        for s in cases {
            let e = Entry::new(b"key", Value::Str(s.clone()), 0);
            assert_eq!(e.value().encoding(), s.encoding());
            assert_eq!(e.into_value(), Value::Str(s));
        }
    }

    #[test]
    fn values_change_kind_and_size() {
        let mut e = Entry::new(&[7; 200], Value::string(b"short"), 0);
        e.set_volatile(true);
        e.touch(12345);
        let lru = e.lru();
        assert!(e.set_value(Value::string(&[1; 1000])).is_none());
        assert_eq!(str_value(&e), vec![1; 1000]);
        assert!(e.set_value(Value::string(&[2; 1000])).is_none());
        assert_eq!(str_value(&e), vec![2; 1000]);
        assert!(e.set_value(Value::Hash(Hash::default())).is_none());
        assert!(e.value().as_hash().is_some());
        assert!(e.as_hash_mut().is_some() && e.as_set_mut().is_none());
        assert!(
            e.set_value(Value::Hash(table_hash(3))).is_none(),
            "freed in place"
        );
        let old = e.set_value(Value::string(b"back"));
        assert!(matches!(old, Some(Value::Hash(_))));
        assert_eq!(str_value(&e), b"back");
        assert_eq!(e.key(), &[7; 200][..]);
        assert!(e.has_ttl());
        assert_eq!(e.lru(), lru);
    }

    #[test]
    fn keys_change_and_values_move_with_them() {
        let mut h = Hash::default();
        h.insert(b"f", b"v", &crate::EncodingLimits::default());
        let mut e = Entry::new(b"a", Value::Hash(h.clone()), 0);
        e.set_logged(true);
        e.set_key(&[b'k'; 130]);
        assert_eq!(e.key(), &[b'k'; 130][..]);
        assert!(e.is_logged());
        assert_eq!(e.value().as_hash().map(HashRef::len), Some(1));
        assert_eq!(e.into_value(), Value::Hash(h));
        let mut s = Entry::new(b"a", Value::string(b"v"), 0);
        s.set_key(b"bb");
        assert_eq!((s.key(), str_value(&s)), (&b"bb"[..], b"v".to_vec()));
    }

    #[test]
    fn metadata_is_independent_of_the_value() {
        let mut e = Entry::new(b"k", Value::string(b"v"), 0);
        assert!(!e.has_ttl() && !e.is_logged());
        e.set_logged(true);
        e.set_volatile(true);
        e.set_volatile(false);
        assert!(e.is_logged() && !e.has_ttl());
        e.set_log_slot(NarrowSlot::default(), 9);
        assert_eq!(e.log_slot().1, 9);
        e.set_value(Value::string(b"longer value"));
        assert_eq!(e.log_slot().1, 9);
        assert!(e.is_logged());
    }

    #[test]
    fn every_handle_kind_moves_and_drops_once() {
        let limits = crate::EncodingLimits::default();
        let mut list = List::default();
        list.push_back(b"a");
        list.push_back(&[b'b'; 100]);
        let hash = table_hash(1);
        let mut set = Set::new();
        set.insert(b"m", &limits);
        set.insert(b"12", &limits);
        let mut zset = ZSet::new_skiplist();
        zset.add(1.5, b"z", crate::zset::AddFlags::default(), &limits);
        let values = [
            Value::List(Box::new(list)),
            Value::Hash(hash),
            Value::Set(set),
            Value::ZSet(zset),
            Value::Cold(Cold::new(300)),
        ];
        for (i, v) in values.iter().enumerate() {
            let mut e = Entry::new(b"key", v.clone(), 0);
            assert_eq!(e.size(), 36, "16 + 16 + the key and its length");
            assert_eq!(e.value().to_value(), *v);
            e.set_key(&[b'k'; 40]);
            assert_eq!(e.value().to_value(), *v);
            let next = values[(i + 1) % values.len()].clone();
            assert_eq!(e.set_value(next.clone()), Some(v.clone()));
            assert_eq!(e.set_value(Value::string(b"s")), Some(next));
            assert_eq!(e.set_value(v.clone()), None);
            assert_eq!(e.into_value(), *v);
        }
    }

    #[test]
    fn strings_pack_unless_their_own_allocation_costs_less() {
        let classes = [
            0, 8, 9, 16, 17, 128, 129, 160, 161, 256, 257, 1000, 1025, 5000,
        ];
        assert_eq!(
            classes.map(size_class),
            [
                8, 8, 16, 16, 32, 128, 160, 160, 192, 256, 320, 1024, 1280, 5120
            ]
        );
        // 100 bytes: 128 packed against 48 + 112 apart.
        let e = Entry::new(b"key:123456", Value::string(&[1; 100]), 0);
        assert_eq!((e.size(), e.memory_usage()), (128, 128));
        // 1,000 bytes: 1,280 packed against 48 + 1,024 apart.
        let mut e = Entry::new(b"key:123456", Value::string(&[2; 1000]), 0);
        assert_eq!((e.size(), e.memory_usage()), (43, 1043));
        assert_eq!(e.value().encoding(), "raw");
        assert_eq!(str_value(&e), vec![2; 1000]);
        assert_eq!(e.set_str(StrRef::Emb(&[3; 1000])), None);
        assert_eq!(str_value(&e), vec![3; 1000]);
        assert_eq!(e.append(b"xy"), Some(1002));
        assert_eq!(e.value().encoding(), "raw");
        e.set_key(b"k");
        assert_eq!(
            (e.key(), e.value().as_str().map(StrRef::len)),
            (&b"k"[..], Some(1002))
        );
        assert_eq!(e.set_value(Value::string(b"short")), None);
        assert_eq!((e.size(), str_value(&e)), (24, b"short".to_vec()));
        assert_eq!(e.set_str(StrRef::Raw(&[4; 3000])), None);
        assert_eq!(
            e.into_value(),
            Value::Str(Str::RawHeap(vec![4; 3000].into()))
        );
        let h = Entry::new(b"k", Value::Str(Str::EmbHeap(vec![5; 40].into())), 0);
        assert_eq!(h.value().encoding(), "embstr");
        // Beside a 220-byte key, 19 bytes cost less apart (256 + 32 against 320
        // packed); taken out they are held in place again, as `Value::string` holds
        // them.
        let key = [0; 220];
        let short = Entry::new(&key, Value::string(&[6; 19]), 0);
        assert_eq!(short.size(), KEY_AFTER_HANDLE + 2 + 220);
        assert_eq!(short.into_value(), Value::string(&[6; 19]));
    }

    #[test]
    fn appends_grow_the_string_in_place() {
        let mut e = Entry::new(b"k", Value::string(b"ab"), 0);
        let mut want = b"ab".to_vec();
        // Through the lengths whose LEB128 form grows a byte (128, 16384).
        for i in 0..400u32 {
            let piece = vec![i as u8; (i % 97) as usize];
            want.extend_from_slice(&piece);
            assert_eq!(e.append(&piece), Some(want.len()));
        }
        assert!(want.len() > 16384);
        assert_eq!(e.key(), b"k");
        assert_eq!(e.value().encoding(), "raw");
        assert_eq!(str_value(&e), want);
        let mut n = Entry::new(b"k", Value::string(b"12"), 0);
        assert_eq!(n.append(b"3"), None, "integers are converted by the caller");
        assert_eq!(str_value(&n), b"12");
    }

    #[test]
    fn a_length_growing_a_byte_past_a_short_entry_is_written_whole() {
        // An empty key and value: the allocation ends right after the two
        // one-byte lengths, so the value's length taking two bytes reaches past
        // the old end, memory `realloc` leaves uninitialized until it is written.
        let mut e = Entry::new(b"", Value::string(b""), 0);
        let piece = vec![7u8; 200];
        assert_eq!(e.append(&piece), Some(200));
        assert_eq!(e.key(), b"");
        assert_eq!(str_value(&e), piece);
        let mut k = Entry::new(b"", Value::string(b"x"), 0);
        let mut want = b"x".to_vec();
        want.extend_from_slice(&[9u8; 20_000]);
        assert_eq!(k.append(&[9u8; 20_000]), Some(want.len()));
        assert_eq!(str_value(&k), want);
    }

    #[test]
    fn a_packed_value_of_the_same_length_is_replaced_in_place() {
        let limits = crate::EncodingLimits::default();
        let mut h = Hash::default();
        h.insert(b"a", b"1", &limits);
        h.insert(b"f", b"aaaa", &limits);
        h.insert(b"z", b"26", &limits);
        let mut e = Entry::new(b"key", Value::Hash(h), 0);
        assert_eq!(e.meta().kind, kind::HASH_PACK);
        let (addr, size) = (DictEntry::addr(&e), e.size());
        assert!(!e.as_hash_mut().unwrap().insert(b"f", b"bbbb", &limits));
        assert_eq!((DictEntry::addr(&e), e.size()), (addr, size));
        let pairs = |e: &Entry| -> Vec<(String, String)> {
            hash_pairs(e)
                .into_iter()
                .map(|(f, v)| (String::from_utf8(f).unwrap(), String::from_utf8(v).unwrap()))
                .collect()
        };
        let want = |v: &str| {
            vec![
                ("a".to_string(), "1".to_string()),
                ("f".to_string(), v.to_string()),
                ("z".to_string(), "26".to_string()),
            ]
        };
        assert_eq!(pairs(&e), want("bbbb"));
        // Shorter and longer values still resize it.
        assert!(!e.as_hash_mut().unwrap().insert(b"f", b"cc", &limits));
        assert_eq!((pairs(&e), e.size()), (want("cc"), size - 2));
        assert!(!e.as_hash_mut().unwrap().insert(b"f", b"dddddd", &limits));
        assert_eq!((pairs(&e), e.size()), (want("dddddd"), size + 2));
    }

    #[test]
    fn small_hashes_live_in_the_entry() {
        let limits = crate::EncodingLimits::default();
        let mut h = Hash::default();
        for (f, v) in [("name", "alice"), ("age", "30"), ("city", "paris")] {
            h.insert(f.as_bytes(), v.as_bytes(), &limits);
        }
        let bytes = h.packed_bytes().unwrap().len();
        let mut e = Entry::new(b"key:123456", Value::Hash(h.clone()), 0);
        assert_eq!(e.meta().kind, kind::HASH_PACK);
        assert_eq!(e.size(), META + 2 + 10 + bytes);
        assert_eq!(e.memory_usage(), e.size(), "nothing beside the entry");
        let seen = e.value().as_hash().unwrap();
        assert_eq!(
            (seen.encoding(), seen.get(b"city")),
            ("listpack", Some(&b"paris"[..]))
        );
        assert_eq!(e.value().to_value(), Value::Hash(h.clone()));

        // Changes go through a guard and come back; growing past what the entry
        // holds moves the hash out to its handle, still packed.
        let mut model: Vec<(Vec<u8>, Vec<u8>)> = hash_pairs(&e);
        let mut i = 0;
        while e.meta().kind == kind::HASH_PACK {
            let (f, v) = (format!("field:{i}"), vec![b'v'; i % 40]);
            assert!(e.as_hash_mut().unwrap().insert(f.as_bytes(), &v, &limits));
            model.push((f.into_bytes(), v));
            model.sort();
            assert_eq!(hash_pairs(&e), model);
            assert_eq!(e.key(), b"key:123456");
            i += 1;
        }
        assert!(i > 10);
        assert_eq!(e.meta().kind, kind::HASH);
        assert_eq!(e.value().encoding(), "listpack");
        assert_eq!(hash_pairs(&e), model);

        // A hash set whole goes back in; its key can change; it comes out whole.
        e.set_value(Value::Hash(h.clone()));
        assert_eq!(e.meta().kind, kind::HASH_PACK);
        e.set_key(&[b'k'; 300]);
        assert_eq!(
            (e.key(), e.meta().kind),
            (&[b'k'; 300][..], kind::HASH_PACK)
        );
        assert!(e.as_hash_mut().unwrap().remove(b"age"));
        assert!(!e.as_hash_mut().unwrap().remove(b"age"));
        assert_eq!(e.value().as_hash().map(HashRef::len), Some(2));
        let mut want = h;
        want.remove(b"age");
        assert_eq!(e.into_value(), Value::Hash(want));
    }

    proptest::proptest! {
        /// Any sequence of field changes leaves the fields a model predicts, whether
        /// the hash lives in the entry or by its handle, through the LEB128 length
        /// boundary of the value's bytes (128) and keys of any length.
        #[test]
        fn hash_changes_follow_a_model(
            key_len in 0usize..300,
            max_entries in 2u64..40,
            ops in proptest::collection::vec((0u8..4, 0u8..40, 0usize..70), 1..60),
        ) {
            let limits = crate::EncodingLimits {
                hash_max_listpack_entries: max_entries,
                ..crate::EncodingLimits::default()
            };
            let mut key = vec![b'k'; key_len];
            let mut model = std::collections::BTreeMap::new();
            // The same changes on a `Hash` of its own: encodings must agree.
            let mut plain = Hash::default();
            let mut e = Entry::new(&key, Value::Hash(Hash::default()), 0);
            for (op, field, len) in ops {
                let field = format!("f{field}").into_bytes();
                match op {
                    0 | 1 => {
                        // As HSET: fit the arguments, then set.
                        let value = vec![b'v'; len];
                        let mut h = e.as_hash_mut().unwrap();
                        h.fit(&[&field, &value], &limits);
                        let new = h.insert(&field, &value, &limits);
                        drop(h);
                        plain.fit([&field[..], &value[..]], &limits);
                        plain.insert(&field, &value, &limits);
                        proptest::prop_assert_eq!(new, model.insert(field, value).is_none());
                    }
                    2 => {
                        let gone = e.as_hash_mut().unwrap().remove(&field);
                        plain.remove(&field);
                        proptest::prop_assert_eq!(gone, model.remove(&field).is_some());
                    }
                    _ => {
                        key = vec![b'j'; len * 4];
                        e.set_key(&key);
                    }
                }
                proptest::prop_assert_eq!(e.key(), &key[..]);
                if e.value().encoding() == "listpack" {
                    proptest::prop_assert!(model.len() as u64 <= max_entries);
                }
                proptest::prop_assert_eq!(e.value().encoding(), plain.encoding());
                let want: Vec<_> = model.iter().map(|(f, v)| (f.clone(), v.clone())).collect();
                proptest::prop_assert_eq!(hash_pairs(&e), want);
            }
            let Value::Hash(h) = e.into_value() else { panic!("a hash") };
            proptest::prop_assert_eq!(h.len(), model.len());
        }

        #[test]
        fn any_key_and_string_round_trips(
            key in proptest::collection::vec(proptest::num::u8::ANY, 0..300),
            first in proptest::collection::vec(proptest::num::u8::ANY, 0..300),
            second in proptest::collection::vec(proptest::num::u8::ANY, 0..300),
        ) {
            let mut e = Entry::new(&key, Value::string(&first), 0);
            proptest::prop_assert_eq!(e.key(), &key[..]);
            proptest::prop_assert_eq!(str_value(&e), first);
            e.set_value(Value::string(&second));
            proptest::prop_assert_eq!(e.key(), &key[..]);
            proptest::prop_assert_eq!(str_value(&e), second.clone());
            proptest::prop_assert_eq!(e.into_value(), Value::string(&second));
        }

        /// Any sequence of changes leaves the key and value a model predicts,
        /// across both string layouts and every size class on the way.
        #[test]
        fn changes_follow_a_model(
            ops in proptest::collection::vec((0u8..4, 0usize..3000, proptest::num::u8::ANY), 1..12),
        ) {
            let mut key = b"key".to_vec();
            let mut value = Vec::new();
            let mut e = Entry::new(&key, Value::string(&value), 0);
            for (op, len, byte) in ops {
                match op {
                    0 => {
                        value = vec![byte; len];
                        e.set_str(StrRef::Raw(&value));
                    }
                    1 => {
                        let extra = vec![byte; len % 300];
                        value.extend_from_slice(&extra);
                        if e.append(&extra).is_none() {
                            e.set_str(StrRef::Raw(&value));
                        }
                    }
                    2 => {
                        key = vec![byte; len % 400];
                        e.set_key(&key);
                    }
                    _ => {
                        e.set_value(Value::Hash(Hash::default()));
                        e.set_value(Value::string(&value));
                    }
                }
                proptest::prop_assert_eq!(e.key(), &key[..]);
                proptest::prop_assert_eq!(str_value(&e), value.clone());
            }
            proptest::prop_assert_eq!(e.into_value().as_str().map(Str::to_vec), Some(value));
        }
    }
}
