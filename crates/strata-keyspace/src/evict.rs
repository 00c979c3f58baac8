//! Choosing keys to evict: Redis's approximated LRU, LFU and TTL orders, by sampling
//! and a pool of the best candidates seen.
//!
//! Exact orders would cost memory and work on every access (a list to relink on each
//! read); sampling costs nothing until memory runs out. Each eviction round samples a
//! few keys ([`crate::Db::eviction_sample`], O(1) per sample through the dict's random
//! pick, or through the expiry index for keys with a TTL) and offers them to a
//! [`Pool`] of the [`POOL_SIZE`] best candidates kept across rounds, so that good
//! candidates found earlier are not forgotten; the best is evicted.
//!
//! # Invariants
//!
//! - The pool is sorted by score, best last, and never holds the same key twice.
//! - Scores are comparable only under one policy: the pool is emptied when the policy
//!   changes.

/// Candidates kept across rounds (Redis's `EVPOOL_SIZE`).
pub const POOL_SIZE: usize = 16;

/// What makes a key a good candidate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    /// Longest idle first.
    Lru,
    /// Least frequently used first.
    Lfu,
    /// Nearest expiry first (keys with a TTL only).
    Ttl,
    /// Any key.
    Random,
}

/// A key that may be evicted, and how good a choice it was when sampled.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Candidate {
    pub score: u64,
    pub db: usize,
    pub key: Vec<u8>,
}

/// The best candidates seen so far.
#[derive(Debug, Default)]
pub struct Pool {
    /// Ascending by score: the best candidate is last.
    items: Vec<Candidate>,
    /// The policy whose scores the pool holds.
    policy: Option<(Policy, bool)>,
}

impl Pool {
    /// Empties the pool if its scores were computed under another policy.
    pub fn use_policy(&mut self, policy: Policy, volatile: bool) {
        if self.policy != Some((policy, volatile)) {
            self.items.clear();
            self.policy = Some((policy, volatile));
        }
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Offers a sampled key: kept if the pool has room or the key beats its worst.
    pub fn offer(&mut self, score: u64, db: usize, key: &[u8]) {
        // Most samples of a full pool score below all of it: they are turned away
        // before the search for the same key (should it be there with a better
        // score, that one stands: the eviction re-scores it anyway).
        if self.items.len() >= POOL_SIZE && self.items.first().is_some_and(|c| score <= c.score) {
            return;
        }
        if let Some(i) = self.items.iter().position(|c| c.db == db && c.key == key) {
            self.items.remove(i);
        }
        let at = self.items.partition_point(|c| c.score <= score);
        self.items.insert(
            at,
            Candidate {
                score,
                db,
                key: key.to_vec(),
            },
        );
        if self.items.len() > POOL_SIZE {
            self.items.remove(0);
        }
    }

    /// Takes the best candidate out.
    pub fn pop_best(&mut self) -> Option<Candidate> {
        self.items.pop()
    }

    /// The score of the best candidate left.
    pub fn best_score(&self) -> Option<u64> {
        self.items.last().map(|c| c.score)
    }

    pub fn clear(&mut self) {
        self.items.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pool_keeps_the_best_sorted_and_unique() {
        let mut pool = Pool::default();
        pool.use_policy(Policy::Lru, false);
        for i in 0..40u64 {
            pool.offer((i * 7) % 40, 0, format!("k{i}").as_bytes());
        }
        assert_eq!(pool.len(), POOL_SIZE);
        pool.offer(1, 0, b"low");
        assert_eq!(pool.len(), POOL_SIZE);
        assert!(pool.items.iter().all(|c| c.key != b"low"));
        // Offering a key again replaces its entry.
        let best = pool.best_score().expect("full");
        pool.offer(best + 1, 0, b"k1");
        pool.offer(best + 5, 0, b"k1");
        assert_eq!(pool.items.iter().filter(|c| c.key == b"k1").count(), 1);
        let mut last = u64::MAX;
        let first = pool.pop_best().expect("full");
        assert_eq!((first.score, first.key.as_slice()), (best + 5, &b"k1"[..]));
        while let Some(c) = pool.pop_best() {
            assert!(c.score <= last);
            last = c.score;
        }
        pool.offer(3, 0, b"x");
        pool.use_policy(Policy::Lfu, false);
        assert!(pool.is_empty());
    }
}
