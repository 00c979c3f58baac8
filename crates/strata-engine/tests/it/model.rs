//! A model test: random operations against the engine and a `BTreeMap`.
//!
//! Puts, deletes, merges, batches, expiries (on a manual clock), compactions,
//! clean reopens and simulated crashes run against the engine on a simulated
//! file system and against a plain map; after every step every key must read
//! the same from both, and iteration must see the same live keys.

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;
use strata_engine::{Engine, ManualClock, SimVfs, WriteBatch, WriteMeta};

use crate::common::{sim_dir, sim_options};

const KEYS: u8 = 8;

#[derive(Debug, Clone)]
enum Write {
    Put { key: u8, len: u16, ttl: Option<u8> },
    Delete { key: u8 },
    Merge { key: u8, byte: u8, ttl: Option<u8> },
}

#[derive(Debug, Clone)]
enum Step {
    One(Write),
    Batch(Vec<Write>),
    Advance(u8),
    Compact,
    Reopen,
    Crash(u64),
}

fn write() -> impl Strategy<Value = Write> {
    prop_oneof![
        4 => (0..KEYS, 0u16..400, proptest::option::weighted(0.3, 0u8..40))
            .prop_map(|(key, len, ttl)| Write::Put { key, len, ttl }),
        2 => (0..KEYS).prop_map(|key| Write::Delete { key }),
        3 => (0..KEYS, any::<u8>(), proptest::option::weighted(0.2, 0u8..40))
            .prop_map(|(key, byte, ttl)| Write::Merge { key, byte, ttl }),
    ]
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        10 => write().prop_map(Step::One),
        2 => proptest::collection::vec(write(), 2..6).prop_map(Step::Batch),
        2 => (0u8..30).prop_map(Step::Advance),
        1 => Just(Step::Compact),
        1 => Just(Step::Reopen),
        1 => any::<u64>().prop_map(Step::Crash),
    ]
}

#[derive(Default)]
struct Model {
    /// Value and expiry (0: never) of each key.
    map: BTreeMap<u8, (Vec<u8>, u64)>,
}

impl Model {
    fn live(&self, key: u8, now: u64) -> Option<&(Vec<u8>, u64)> {
        self.map.get(&key).filter(|(_, at)| *at == 0 || *at > now)
    }

    fn apply(&mut self, w: &Write, now: u64) {
        match *w {
            Write::Put { key, len, ttl } => {
                self.map
                    .insert(key, (put_value(key, len), expiry(ttl, now)));
            }
            Write::Delete { key } => {
                self.map.remove(&key);
            }
            Write::Merge { key, byte, ttl } => {
                let (mut value, at) = self.live(key, now).cloned().unwrap_or_default();
                value.push(byte);
                let at = match ttl {
                    Some(_) => expiry(ttl, now),
                    None => at,
                };
                self.map.insert(key, (value, at));
            }
        }
    }
}

fn put_value(key: u8, len: u16) -> Vec<u8> {
    (0..len).map(|i| key.wrapping_add(i as u8)).collect()
}

fn expiry(ttl: Option<u8>, now: u64) -> u64 {
    ttl.map_or(0, |t| now + u64::from(t))
}

fn key_bytes(key: u8) -> Vec<u8> {
    vec![b'k', key]
}

fn write_to_batch(batch: &mut WriteBatch, w: &Write, now: u64) {
    match *w {
        Write::Put { key, len, ttl } => {
            let meta = match ttl {
                Some(_) => WriteMeta::new().with_expiry(expiry(ttl, now)),
                None => WriteMeta::new(),
            };
            batch.put_with(&key_bytes(key), &put_value(key, len), meta);
        }
        Write::Delete { key } => {
            batch.delete(&key_bytes(key));
        }
        Write::Merge { key, byte, ttl } => {
            let meta = match ttl {
                Some(_) => WriteMeta::new().with_expiry(expiry(ttl, now)),
                None => WriteMeta::new(),
            };
            batch.merge_with(&key_bytes(key), &[byte], meta);
        }
    }
}

fn check(engine: &Engine, model: &Model, now: u64) {
    for key in 0..KEYS {
        let expected = model.live(key, now).map(|(v, _)| v.clone());
        let got = engine.get(&key_bytes(key)).expect("get");
        assert_eq!(got, expected, "key {key} at {now}");
        assert_eq!(engine.contains(&key_bytes(key)), expected.is_some());
    }
    let keys: BTreeSet<Vec<u8>> = engine.keys().collect();
    let expected: BTreeSet<Vec<u8>> = (0..KEYS)
        .filter(|k| model.live(*k, now).is_some())
        .map(key_bytes)
        .collect();
    assert_eq!(keys, expected);
}

fn run(steps: Vec<Step>) {
    let clock = ManualClock::new(1_000);
    let mut vfs = SimVfs::new();
    let mut engine = Some(Engine::open(sim_dir(), sim_options(&vfs, &clock)).expect("open"));
    let mut model = Model::default();
    for step in steps {
        let now = clock.now_ms_for_test();
        let e = engine.as_ref().expect("engine");
        match &step {
            Step::One(w) => {
                let meta = |ttl: Option<u8>| match ttl {
                    Some(_) => WriteMeta::new().with_expiry(expiry(ttl, now)),
                    None => WriteMeta::new(),
                };
                match *w {
                    Write::Put { key, len, ttl } => {
                        e.put_with(&key_bytes(key), &put_value(key, len), meta(ttl))
                            .expect("put");
                    }
                    Write::Delete { key } => {
                        e.delete(&key_bytes(key)).expect("delete");
                    }
                    Write::Merge { key, byte, ttl } => {
                        e.merge_with(&key_bytes(key), &[byte], meta(ttl))
                            .expect("merge");
                    }
                }
                model.apply(w, now);
            }
            Step::Batch(ws) => {
                let mut batch = WriteBatch::new();
                for w in ws {
                    write_to_batch(&mut batch, w, now);
                    model.apply(w, now);
                }
                e.write(&batch).expect("batch");
            }
            Step::Advance(ms) => clock.advance(u64::from(*ms)),
            Step::Compact => {
                e.compact().expect("compact");
            }
            Step::Reopen => {
                engine.take().expect("engine").close().expect("close");
                engine = Some(Engine::open(sim_dir(), sim_options(&vfs, &clock)).expect("reopen"));
            }
            Step::Crash(seed) => {
                vfs = vfs.crash(*seed);
                drop(engine.take());
                engine = Some(
                    Engine::open(sim_dir(), sim_options(&vfs, &clock)).expect("open after crash"),
                );
            }
        }
        check(
            engine.as_ref().expect("engine"),
            &model,
            clock.now_ms_for_test(),
        );
    }
}

trait NowForTest {
    fn now_ms_for_test(&self) -> u64;
}

impl NowForTest for ManualClock {
    fn now_ms_for_test(&self) -> u64 {
        strata_engine::Clock::now_ms(self)
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, max_shrink_iters: 2_000, ..ProptestConfig::default() })]

    #[test]
    fn engine_matches_a_btreemap(steps in proptest::collection::vec(step(), 1..80)) {
        run(steps);
    }
}
