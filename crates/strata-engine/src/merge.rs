//! Merge operators: how a key's value is rebuilt from a full value and operands.
//!
//! A [`Kind::Merge`](crate::record::Kind::Merge) record does not replace the
//! key's value; it is an *operand* appended after it. The key's value is the
//! last full value (if any) combined with every operand after it, in log
//! order, by the [`MergeOperator`] given in [`Options`](crate::Options).
//! `get` applies the operator on read; compaction applies it once and writes
//! the result back as a full value.
//!
//! Invariant the operator must keep: folding in steps gives the same value as
//! folding at once, i.e. `full_merge(k, Some(&full_merge(k, v, a)), b)` equals
//! `full_merge(k, v, a ++ b)`, because compaction folds a prefix of the
//! operands while later ones keep arriving.

use std::fmt;

/// Combines a key's last full value with the merge operands written after it.
pub trait MergeOperator: Send + Sync + fmt::Debug {
    /// Returns the key's value: `existing` (absent if the key had no full
    /// value) with `operands` applied in order.
    fn full_merge(&self, key: &[u8], existing: Option<&[u8]>, operands: &[&[u8]]) -> Vec<u8>;
}

/// A merge operator that appends each operand to the value.
#[derive(Debug, Default, Clone, Copy)]
pub struct AppendOperator;

impl MergeOperator for AppendOperator {
    fn full_merge(&self, _key: &[u8], existing: Option<&[u8]>, operands: &[&[u8]]) -> Vec<u8> {
        let len = existing.map_or(0, <[u8]>::len) + operands.iter().map(|o| o.len()).sum::<usize>();
        let mut out = Vec::with_capacity(len);
        out.extend_from_slice(existing.unwrap_or_default());
        for operand in operands {
            out.extend_from_slice(operand);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn append_folds_in_steps_like_at_once() {
        let op = AppendOperator;
        let once = op.full_merge(b"k", Some(b"a"), &[b"b", b"c"]);
        let step = op.full_merge(b"k", Some(b"a"), &[b"b"]);
        let twice = op.full_merge(b"k", Some(&step), &[b"c"]);
        assert_eq!(once, b"abc");
        assert_eq!(once, twice);
        assert_eq!(op.full_merge(b"k", None, &[b"x"]), b"x");
    }
}
