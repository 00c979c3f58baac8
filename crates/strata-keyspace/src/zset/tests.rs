//! Model tests: both encodings against a plain reference, through conversions.

use super::*;
use proptest::prelude::*;
use std::collections::BTreeMap;

/// The reference: member → score, sorted on demand.
#[derive(Default, Debug)]
struct Model {
    scores: BTreeMap<Vec<u8>, f64>,
    /// Whether the listpack would have stored the scores (no -0).
    listpack: bool,
}

impl Model {
    fn sorted(&self) -> Vec<(Vec<u8>, f64)> {
        let mut v: Vec<(Vec<u8>, f64)> = self.scores.iter().map(|(m, s)| (m.clone(), *s)).collect();
        v.sort_by(|a, b| {
            a.1.partial_cmp(&b.1)
                .unwrap_or(Ordering::Equal)
                .then_with(|| a.0.cmp(&b.0))
        });
        v
    }

    /// Redis's listpack walk for the first item of a lex range.
    fn first_in_lex(&self, r: &LexRange) -> Option<usize> {
        let v = self.sorted();
        let (first, last) = (v.first()?, v.last()?);
        if r.is_empty() || !r.gte_min(&last.0) || !r.lte_max(&first.0) {
            return None;
        }
        let i = v.iter().position(|(m, _)| r.gte_min(m))?;
        r.lte_max(&v[i].0).then_some(i)
    }

    fn last_in_lex(&self, r: &LexRange) -> Option<usize> {
        let v = self.sorted();
        let (first, last) = (v.first()?, v.last()?);
        if r.is_empty() || !r.gte_min(&last.0) || !r.lte_max(&first.0) {
            return None;
        }
        let i = v.iter().rposition(|(m, _)| r.lte_max(m))?;
        r.gte_min(&v[i].0).then_some(i)
    }
}

fn limits(entries: u64, value: u64) -> EncodingLimits {
    EncodingLimits {
        zset_max_listpack_entries: entries,
        zset_max_listpack_value: value,
        ..EncodingLimits::default()
    }
}

fn contents(z: &ZSet) -> Vec<(Vec<u8>, f64)> {
    z.iter().map(|(m, s)| (m.to_vec(), s)).collect()
}

#[derive(Debug, Clone)]
enum Op {
    Add(i8, u8, AddFlags),
    Remove(u8),
    RemoveRanks(u8, u8),
    Pop(bool),
    ScoreRange(i8, i8, bool, bool),
    LexRange(u8, u8, u8),
}

fn flags() -> impl Strategy<Value = AddFlags> {
    (0..8u8, any::<bool>()).prop_map(|(k, incr)| AddFlags {
        nx: k == 1,
        xx: k == 2 || k == 5,
        gt: k == 3 || k == 5,
        lt: k == 4,
        incr,
    })
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (any::<i8>(), any::<u8>(), flags()).prop_map(|(s, m, f)| Op::Add(s, m, f)),
        3 => any::<u8>().prop_map(Op::Remove),
        1 => (any::<u8>(), 0..6u8).prop_map(|(a, n)| Op::RemoveRanks(a, n)),
        1 => any::<bool>().prop_map(Op::Pop),
        2 => (any::<i8>(), any::<i8>(), any::<bool>(), any::<bool>())
            .prop_map(|(a, b, x, y)| Op::ScoreRange(a, b, x, y)),
        2 => (any::<u8>(), any::<u8>(), 0..16u8).prop_map(|(a, b, k)| Op::LexRange(a, b, k)),
    ]
}

fn member(m: u8) -> Vec<u8> {
    // A few members are longer than the value limit used below.
    if m.is_multiple_of(61) {
        format!("long-member-{m:03}-xxxxxxxxxxxxxxxxxxxx").into_bytes()
    } else {
        format!("m{:02}", m % 90).into_bytes()
    }
}

fn score(s: i8) -> f64 {
    match s {
        i8::MIN => f64::NEG_INFINITY,
        i8::MAX => f64::INFINITY,
        0 => -0.0,
        s => f64::from(s / 4) / 2.0,
    }
}

fn lex_bound(k: u8, m: u8, min: bool) -> LexBound {
    match k % 4 {
        0 if min => LexBound::Min,
        0 => LexBound::Max,
        1 => LexBound::Inclusive(member(m)),
        2 => LexBound::Exclusive(member(m)),
        _ if min => LexBound::Max,
        _ => LexBound::Min,
    }
}

fn check_model(z: &ZSet, m: &Model) -> Result<(), TestCaseError> {
    let want = m.sorted();
    let got = contents(z);
    prop_assert_eq!(got.len(), want.len());
    for ((gm, gs), (wm, ws)) in got.iter().zip(&want) {
        prop_assert_eq!(gm, wm);
        prop_assert_eq!(gs.to_bits(), ws.to_bits(), "score of {:?}", wm);
    }
    for (r, (mem, s)) in want.iter().enumerate() {
        prop_assert_eq!(z.rank(mem), Some((r, *s)));
        prop_assert_eq!(z.score(mem).map(f64::to_bits), Some(s.to_bits()));
    }
    let back: Vec<Vec<u8>> = z
        .iter_from(z.len().wrapping_sub(1), true)
        .map(|(m, _)| m.to_vec())
        .collect();
    let mut exp: Vec<Vec<u8>> = want.iter().map(|(m, _)| m.clone()).collect();
    exp.reverse();
    prop_assert_eq!(back, exp);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]
    #[test]
    fn both_encodings_behave_like_the_model(
        ops in proptest::collection::vec(op(), 1..400),
        entries in 0..20u64,
        start_big in any::<bool>(),
    ) {
        let lim = limits(entries, 20);
        let mut z = if start_big { ZSet::new_skiplist() } else { ZSet::for_first_member(1, &lim) };
        let mut m = Model { listpack: z.is_listpack(), ..Model::default() };
        for op in ops {
            match op {
                Op::Add(s, k, f) => {
                    let (s, mem) = (score(s), member(k));
                    let was_listpack = z.is_listpack();
                    let got = z.add(s, &mem, f, &lim);
                    // What zsetAdd does, step by step.
                    let want = match m.scores.get(&mem).copied() {
                        Some(_) if f.nx => Added::Refused,
                        Some(cur) => {
                            let new = if f.incr { s + cur } else { s };
                            if new.is_nan() {
                                Added::NotANumber
                            } else if (f.lt && new >= cur) || (f.gt && new <= cur) {
                                Added::Refused
                            } else if new == cur {
                                Added::Same(new)
                            } else {
                                Added::Updated(new)
                            }
                        }
                        None if f.xx => Added::Refused,
                        None => Added::New(s),
                    };
                    prop_assert_eq!(got, want);
                    if was_listpack && matches!(want, Added::New(_))
                        && (m.scores.len() as u64 + 1 > entries || mem.len() > 20)
                    {
                        prop_assert!(!z.is_listpack(), "should have converted");
                        m.listpack = false;
                    }
                    if !was_listpack {
                        prop_assert!(!z.is_listpack(), "conversions are one-way");
                    }
                    if let Added::New(v) | Added::Updated(v) = want {
                        let stored = if m.listpack { listpack::stored(v) } else { v };
                        m.scores.insert(mem, stored);
                    }
                }
                Op::Remove(k) => {
                    let mem = member(k);
                    prop_assert_eq!(z.remove(&mem), m.scores.remove(&mem).is_some());
                }
                Op::RemoveRanks(a, n) => {
                    let sorted = m.sorted();
                    let gone: Vec<_> = sorted.iter().skip(a as usize).take(n as usize).collect();
                    prop_assert_eq!(z.remove_ranks(a as usize, n as usize), gone.len());
                    for (mem, _) in gone {
                        m.scores.remove(mem);
                    }
                }
                Op::Pop(max) => {
                    let sorted = m.sorted();
                    let want = if max { sorted.last() } else { sorted.first() }.cloned();
                    let got = z.pop(max);
                    prop_assert_eq!(got.as_ref().map(|g| (&g.0, g.1.to_bits())), want.as_ref().map(|w| (&w.0, w.1.to_bits())));
                    if let Some((mem, _)) = want {
                        m.scores.remove(&mem);
                    }
                }
                Op::ScoreRange(a, b, x, y) => {
                    let r = ScoreRange { min: score(a), max: score(b), min_exclusive: x, max_exclusive: y };
                    let sorted = m.sorted();
                    let first = sorted.iter().position(|(_, s)| r.gte_min(*s) && r.lte_max(*s));
                    let last = sorted.iter().rposition(|(_, s)| r.gte_min(*s) && r.lte_max(*s));
                    prop_assert_eq!(z.first_in_score_range(&r), first);
                    prop_assert_eq!(z.last_in_score_range(&r), last);
                }
                Op::LexRange(a, b, k) => {
                    let r = LexRange { min: lex_bound(k, a, true), max: lex_bound(k / 4, b, false) };
                    let sorted = m.sorted();
                    let monotone = sorted.windows(2).all(|w| w[0].1 == w[1].1);
                    if z.is_listpack() || monotone {
                        prop_assert_eq!(z.first_in_lex_range(&r), m.first_in_lex(&r));
                        prop_assert_eq!(z.last_in_lex_range(&r), m.last_in_lex(&r));
                        let count = match m.first_in_lex(&r) {
                            Some(f) => sorted[f..].iter().take_while(|(mem, _)| r.lte_max(mem)).count(),
                            None => 0,
                        };
                        prop_assert_eq!(z.lex_count(&r), count);
                    }
                }
            }
            prop_assert_eq!(z.len(), m.scores.len());
        }
        check_model(&z, &m)?;
        if let Repr::Skiplist(b) = &z.repr {
            b.tree.check();
            prop_assert_eq!(b.dict.len(), b.tree.len());
        }
        // A clone is equal, and a scan sees every member.
        prop_assert_eq!(&z.clone(), &z);
        let mut seen = BTreeMap::new();
        let mut c = 0;
        loop {
            c = z.scan(c, |mem, s| { seen.insert(mem.to_vec(), s); });
            if c == 0 { break; }
        }
        prop_assert_eq!(seen.len(), m.scores.len());
    }
}

#[test]
fn lex_bounds_order_as_redis() {
    let r = |min, max| LexRange { min, max }.is_empty();
    use LexBound::*;
    assert!(r(Min, Min));
    assert!(r(Max, Max));
    assert!(!r(Min, Max));
    assert!(r(Max, Min));
    assert!(r(Inclusive(b"b".to_vec()), Inclusive(b"a".to_vec())));
    assert!(!r(Inclusive(b"a".to_vec()), Inclusive(b"a".to_vec())));
    assert!(r(Inclusive(b"a".to_vec()), Exclusive(b"a".to_vec())));
    assert!(r(Max, Inclusive(b"a".to_vec())));
    assert!(r(Inclusive(b"a".to_vec()), Min));
}

#[test]
fn store_results_pick_their_encoding() {
    let lim = limits(3, 5);
    let small = ZSet::from_sorted(vec![(b"a".to_vec(), -0.0), (b"b".to_vec(), 1.5)], &lim);
    assert_eq!(small.encoding(), "listpack");
    assert!(small.score(b"a").is_some_and(|s| s.is_sign_positive()));
    let long = ZSet::from_sorted(vec![(b"toolong".to_vec(), -0.0)], &lim);
    assert_eq!(long.encoding(), "skiplist");
    assert!(long.score(b"toolong").is_some_and(|s| s.is_sign_negative()));
    let many: Vec<(Vec<u8>, f64)> = (0..4).map(|i| (vec![b'a' + i], f64::from(i))).collect();
    assert_eq!(ZSet::from_sorted(many, &lim).encoding(), "skiplist");
    assert_eq!(ZSet::for_store(Some(4), &lim).encoding(), "skiplist");
    assert_eq!(ZSet::for_store(None, &lim).encoding(), "listpack");
    assert_eq!(ZSet::for_first_member(6, &lim).encoding(), "skiplist");
    assert_eq!(
        ZSet::for_first_member(1, &limits(0, 5)).encoding(),
        "skiplist"
    );
}

#[test]
fn a_million_members_in_order_and_not() {
    let lim = EncodingLimits::default();
    let mut z = ZSet::new_listpack();
    let n = 200_000u32;
    for i in 0..n {
        // A scattered insertion order.
        let k = (u64::from(i) * 2_654_435_761 % u64::from(n)) as u32;
        z.add(
            f64::from(k % 1000),
            &k.to_be_bytes(),
            AddFlags::default(),
            &lim,
        );
    }
    assert_eq!(z.len(), n as usize);
    assert_eq!(z.encoding(), "skiplist");
    let r = ScoreRange {
        min: 10.0,
        max: 20.0,
        min_exclusive: false,
        max_exclusive: true,
    };
    let first = z.first_in_score_range(&r);
    let last = z.last_in_score_range(&r);
    assert_eq!(first, Some(10 * 200));
    assert_eq!(last, Some(20 * 200 - 1));
    assert_eq!(z.remove_ranks(1000, 150_000), 150_000);
    assert_eq!(z.len(), 50_000);
    assert!(z.heap_size() > 50_000 * 32);
}

/// Bytes per member of a million-member set, in order and scattered (run with
/// `--ignored --nocapture`; compare with Redis's `used_memory` for the same ZADDs).
#[test]
#[ignore]
fn bytes_per_member_of_a_million() {
    let lim = EncodingLimits::default();
    let n = 1_000_000u64;
    for scattered in [false, true] {
        let start = std::time::Instant::now();
        let mut z = ZSet::new_skiplist();
        for i in 1..=n {
            let s = if scattered { (i * 7919) % 1_000_003 } else { i };
            z.add(
                s as f64,
                format!("member:{i}").as_bytes(),
                AddFlags::default(),
                &lim,
            );
        }
        let per = (z.heap_size() + std::mem::size_of::<ZSet>()) as f64 / n as f64;
        println!(
            "scattered={scattered}: {per:.1} bytes per member, {:?} to add",
            start.elapsed()
        );
    }
}
