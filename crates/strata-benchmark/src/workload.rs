//! The workload: which commands, in what proportions, with what values.
//!
//! A [`Mix`] is a list of command templates with integer weights (`--ratio
//! set:get=1:10` gives SET weight 1 and GET weight 10); each request draws its
//! command from it. Values are slices of one shared pool of random letters, of a fixed
//! size or a size drawn uniformly from a range, so no request allocates one.
//! [`RequestGen`] puts the pieces together for one connection: it appends the next
//! request to an output buffer and says which command it was.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use crate::Error;
use crate::keys::{Distribution, KeyPicker};
use crate::template::{Scratch, Template};

/// Commands and their weights.
#[derive(Debug, Clone)]
pub struct Mix {
    templates: Vec<Template>,
    /// Running totals of the weights: command `i` is drawn for a number in
    /// `cumulative[i - 1]..cumulative[i]`.
    cumulative: Vec<u64>,
}

impl Mix {
    /// A mix of these commands; at least one weight must be positive.
    pub fn new(entries: Vec<(Template, u32)>) -> Result<Mix, Error> {
        let mut templates = Vec::new();
        let mut cumulative = Vec::new();
        let mut total = 0u64;
        for (template, weight) in entries {
            if weight == 0 {
                continue;
            }
            total += u64::from(weight);
            templates.push(template);
            cumulative.push(total);
        }
        if templates.is_empty() {
            return Err(Error::Usage(
                "the command mix has no command of positive weight".into(),
            ));
        }
        dedupe_labels(&mut templates);
        Ok(Mix {
            templates,
            cumulative,
        })
    }

    /// The commands, in the order their statistics are kept.
    pub fn templates(&self) -> &[Template] {
        &self.templates
    }

    /// The sum of the weights.
    pub fn total_weight(&self) -> u64 {
        self.cumulative.last().copied().unwrap_or(0)
    }

    /// The weight of command `i`.
    pub fn weight(&self, i: usize) -> u64 {
        let below = if i == 0 { 0 } else { self.cumulative[i - 1] };
        self.cumulative[i] - below
    }

    /// The command for a number drawn uniformly from `0..total_weight()`.
    #[inline]
    pub fn pick(&self, draw: u64) -> usize {
        self.cumulative
            .partition_point(|&c| c <= draw)
            .min(self.templates.len() - 1)
    }

    /// `SET:GET=1:10`, for reports.
    pub fn describe(&self) -> String {
        let names: Vec<&str> = self.templates.iter().map(|t| t.label.as_str()).collect();
        let weights: Vec<String> = (0..self.templates.len())
            .map(|i| self.weight(i).to_string())
            .collect();
        format!("{}={}", names.join(":"), weights.join(":"))
    }
}

/// Gives distinct report labels to commands that share a name (`HSET`, `HSET#2`).
fn dedupe_labels(templates: &mut [Template]) {
    let names: Vec<String> = templates.iter().map(|t| t.label.clone()).collect();
    for (i, template) in templates.iter_mut().enumerate() {
        let earlier = names[..i].iter().filter(|n| **n == names[i]).count();
        if earlier > 0 {
            template.label = format!("{}#{}", names[i], earlier + 1);
        }
    }
}

/// Parses `--ratio`: `NAME:NAME...=W:W...`, one weight per name; a single name may
/// stand alone (`get` = `get=1`).
pub fn parse_ratio(text: &str) -> Result<Vec<(String, u32)>, String> {
    let (names, weights) = match text.split_once('=') {
        Some((names, weights)) => (names, Some(weights)),
        None => (text, None),
    };
    let names: Vec<&str> = names.split(':').map(str::trim).collect();
    if names.iter().any(|n| n.is_empty()) {
        return Err(format!("an empty command name in '{text}'"));
    }
    let weights = match weights {
        None => vec![1; names.len()],
        Some(w) => parse_weights(w)?,
    };
    if weights.len() != names.len() {
        return Err(format!(
            "'{text}' names {} commands but gives {} weights",
            names.len(),
            weights.len()
        ));
    }
    Ok(names
        .into_iter()
        .map(|n| n.to_ascii_lowercase())
        .zip(weights)
        .collect())
}

/// Parses `W:W:...`, non-negative integer weights.
pub fn parse_weights(text: &str) -> Result<Vec<u32>, String> {
    text.split(':')
        .map(|w| {
            w.trim()
                .parse::<u32>()
                .map_err(|_| format!("'{w}' is not a weight (a whole number) in '{text}'"))
        })
        .collect()
}

/// The size of the values of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueSize {
    Fixed(usize),
    /// A size drawn uniformly from `min..=max` for each request.
    Range(usize, usize),
}

/// The largest value a run may send (Redis's default `proto-max-bulk-len` is 512 MB;
/// a load generator has no use for values near it).
pub const MAX_VALUE_SIZE: usize = 64 << 20;

impl ValueSize {
    pub fn max(self) -> usize {
        match self {
            ValueSize::Fixed(n) | ValueSize::Range(_, n) => n,
        }
    }
}

impl FromStr for ValueSize {
    type Err = String;

    /// `100` or `32-512` (bytes).
    fn from_str(text: &str) -> Result<ValueSize, String> {
        let number = |s: &str| {
            s.trim()
                .parse::<usize>()
                .ok()
                .filter(|&n| n <= MAX_VALUE_SIZE)
                .ok_or_else(|| format!("'{s}' is not a size in bytes (at most {MAX_VALUE_SIZE})"))
        };
        match text.split_once('-') {
            None => Ok(ValueSize::Fixed(number(text)?)),
            Some((lo, hi)) => {
                let (lo, hi) = (number(lo)?, number(hi)?);
                if lo > hi {
                    return Err(format!("the range '{text}' is empty"));
                }
                Ok(if lo == hi {
                    ValueSize::Fixed(lo)
                } else {
                    ValueSize::Range(lo, hi)
                })
            }
        }
    }
}

impl fmt::Display for ValueSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ValueSize::Fixed(n) => write!(f, "{n}"),
            ValueSize::Range(lo, hi) => write!(f, "{lo}-{hi}"),
        }
    }
}

/// Random letters that values are cut from.
#[derive(Debug, Clone)]
pub struct ValuePool {
    bytes: Arc<[u8]>,
}

impl ValuePool {
    /// A pool for values of up to `max` bytes.
    pub fn new(max: usize, seed: u64) -> ValuePool {
        let mut rng = SmallRng::seed_from_u64(seed);
        // Twice the largest value (at least 4 KiB), so values start at varied offsets.
        let len = (max * 2).max(4096);
        let bytes: Vec<u8> = (0..len).map(|_| b'a' + rng.random_range(0..26u8)).collect();
        ValuePool {
            bytes: bytes.into(),
        }
    }

    /// `len` bytes starting near `offset`.
    #[inline]
    pub fn value(&self, len: usize, offset: u64) -> &[u8] {
        let room = self.bytes.len().saturating_sub(len) as u64 + 1;
        let start = (offset % room) as usize;
        self.bytes.get(start..start + len).unwrap_or(&self.bytes)
    }
}

/// What a connection needs to generate its requests.
#[derive(Debug, Clone)]
pub struct Workload {
    pub mix: Arc<Mix>,
    pub distribution: Distribution,
    pub keys: u64,
    pub value_size: ValueSize,
    pub pool: ValuePool,
    pub seed: u64,
}

/// One connection's request generator.
#[derive(Debug)]
pub struct RequestGen {
    mix: Arc<Mix>,
    picker: KeyPicker,
    value_size: ValueSize,
    pool: ValuePool,
    scratch: Scratch,
}

impl RequestGen {
    /// The generator of connection `index` of `connections`.
    pub fn new(workload: &Workload, index: u64, connections: u64) -> Result<RequestGen, Error> {
        Ok(RequestGen {
            mix: workload.mix.clone(),
            picker: KeyPicker::new(
                workload.distribution,
                workload.keys,
                workload.seed,
                index,
                connections,
            )?,
            value_size: workload.value_size,
            pool: workload.pool.clone(),
            scratch: Scratch::default(),
        })
    }

    /// Appends the next request to `out`; returns the index of its command in the mix.
    #[inline]
    pub fn next(&mut self, out: &mut Vec<u8>) -> usize {
        let command = if self.mix.templates.len() == 1 {
            0
        } else {
            let draw = self.picker.below(self.mix.total_weight());
            self.mix.pick(draw)
        };
        let template = &self.mix.templates[command];
        let key = self.picker.next_key();
        let len = match self.value_size {
            ValueSize::Fixed(n) => n,
            ValueSize::Range(lo, hi) => lo + self.picker.below((hi - lo + 1) as u64) as usize,
        };
        let rand = self.picker.random();
        let value = self.pool.value(len, rand.rotate_left(17));
        template.expand(key, value, rand, &mut self.scratch, out);
        command
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use strata_resp::Value;

    fn mix(ratio: &str) -> Mix {
        let entries = parse_ratio(ratio)
            .unwrap()
            .into_iter()
            .map(|(n, w)| (Template::builtin(&n).unwrap(), w))
            .collect();
        Mix::new(entries).unwrap()
    }

    #[test]
    fn parses_ratios() {
        assert_eq!(
            parse_ratio("set:get=1:10").unwrap(),
            [("set".to_string(), 1), ("get".to_string(), 10)]
        );
        assert_eq!(parse_ratio("GET").unwrap(), [("get".to_string(), 1)]);
        assert_eq!(
            parse_ratio("set:get").unwrap(),
            [("set".to_string(), 1), ("get".to_string(), 1)]
        );
        assert!(parse_ratio("set:get=1").is_err());
        assert!(parse_ratio("set:get=1:x").is_err());
        assert!(parse_ratio("set::get=1:2:3").is_err());
        assert!(parse_ratio("set=-1").is_err());
        assert_eq!(parse_weights("3:0:2").unwrap(), [3, 0, 2]);
    }

    #[test]
    fn mixes_follow_their_weights() {
        let m = mix("set:get=1:10");
        assert_eq!(m.total_weight(), 11);
        assert_eq!(m.describe(), "SET:GET=1:10");
        assert_eq!(m.pick(0), 0);
        assert!((1..11).all(|d| m.pick(d) == 1));
        // A zero weight drops the command.
        let m = mix("set:get:incr=0:1:1");
        assert_eq!(m.templates().len(), 2);
        assert_eq!((m.pick(0), m.pick(1)), (0, 1));
        assert_eq!(m.templates()[0].label, "GET");
        assert!(Mix::new(vec![(Template::builtin("get").unwrap(), 0)]).is_err());
    }

    #[test]
    fn same_named_commands_get_distinct_labels() {
        let t = Template::parse("HSET a __key__ __value__").unwrap();
        let m = Mix::new(vec![(t.clone(), 1), (t.clone(), 1), (t, 1)]).unwrap();
        let labels: Vec<&str> = m.templates().iter().map(|t| t.label.as_str()).collect();
        assert_eq!(labels, ["HSET", "HSET#2", "HSET#3"]);
    }

    #[test]
    fn parses_value_sizes() {
        assert_eq!("100".parse(), Ok(ValueSize::Fixed(100)));
        assert_eq!("32-512".parse(), Ok(ValueSize::Range(32, 512)));
        assert_eq!("7-7".parse(), Ok(ValueSize::Fixed(7)));
        assert_eq!("0".parse(), Ok(ValueSize::Fixed(0)));
        assert!("512-32".parse::<ValueSize>().is_err());
        assert!("x".parse::<ValueSize>().is_err());
        assert!("1-".parse::<ValueSize>().is_err());
        assert!(
            format!("{}", MAX_VALUE_SIZE + 1)
                .parse::<ValueSize>()
                .is_err()
        );
        assert_eq!(ValueSize::Range(1, 9).to_string(), "1-9");
    }

    #[test]
    fn generated_requests_follow_mix_sizes_and_keys() {
        let workload = Workload {
            mix: Arc::new(mix("set:get=1:3")),
            distribution: Distribution::Uniform,
            keys: 50,
            value_size: ValueSize::Range(5, 9),
            pool: ValuePool::new(9, 1),
            seed: 3,
        };
        let mut generator = RequestGen::new(&workload, 0, 1).unwrap();
        let mut counts = [0usize; 2];
        let mut sizes = std::collections::BTreeSet::new();
        for _ in 0..4_000 {
            let mut out = Vec::new();
            let command = generator.next(&mut out);
            counts[command] += 1;
            let (request, used) = strata_resp::decode(&out).unwrap().unwrap();
            assert_eq!(used, out.len());
            let Value::Array(args) = request else {
                panic!("not an array")
            };
            let name = args[0].as_bytes().unwrap();
            let key = args[1].as_bytes().unwrap();
            let n: u64 = std::str::from_utf8(&key[4..]).unwrap().parse().unwrap();
            assert!(key.starts_with(b"key:") && n < 50);
            if command == 0 {
                assert_eq!(name, b"SET");
                sizes.insert(args[2].as_bytes().unwrap().len());
            } else {
                assert_eq!((name, args.len()), (&b"GET"[..], 2));
            }
        }
        // 1:3 over 4,000 requests: about 1,000 SETs.
        assert!((850..1_150).contains(&counts[0]), "{counts:?}");
        assert_eq!(sizes.into_iter().collect::<Vec<_>>(), [5, 6, 7, 8, 9]);
    }

    #[test]
    fn values_come_from_the_pool() {
        let pool = ValuePool::new(100, 9);
        for offset in [0, 1, 999, u64::MAX] {
            let v = pool.value(100, offset);
            assert_eq!(v.len(), 100);
            assert!(v.iter().all(u8::is_ascii_lowercase));
        }
        assert!(pool.value(0, 5).is_empty());
    }
}
