//! Side-by-side sessions for the collection differential tests: every command goes to
//! a real Redis and to strata, and the replies are compared byte for byte — or, where
//! Redis leaves the order unspecified (hashtable-encoded hashes and sets), as
//! multisets of elements or of field/value pairs.

use std::collections::BTreeSet;

use strata_resp::value::Value;

use crate::support::{Proc, Raw, redis_available, redis_server, strata};

/// How the elements of a reply are grouped when order does not matter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    /// An array or set of members.
    Members,
    /// Field/value pairs: a map (RESP3) or a flat array (RESP2).
    Pairs,
}

/// Redis and strata, each with one connection.
pub struct Pair {
    pub redis: Raw,
    pub strata: Raw,
    mismatches: Vec<String>,
    _servers: (Proc, Proc),
}

/// The command as text, for messages.
pub fn show(args: &[&[u8]]) -> String {
    let parts: Vec<String> = args
        .iter()
        .map(|a| {
            let s = String::from_utf8_lossy(a);
            if s.len() > 40 {
                format!("{}…({} bytes)", &s[..s.floor_char_boundary(40)], a.len())
            } else {
                format!("{s:?}")
            }
        })
        .collect();
    parts.join(" ")
}

fn shorten(v: &Value) -> String {
    let s = format!("{v:?}");
    if s.len() > 400 {
        format!("{}…", &s[..s.floor_char_boundary(400)])
    } else {
        s
    }
}

/// The elements of an aggregate reply, if it is one.
pub fn elements(v: &Value) -> Option<Vec<Value>> {
    match v {
        Value::Array(items) | Value::Set(items) => Some(items.clone()),
        Value::Map(pairs) => Some(
            pairs
                .iter()
                .flat_map(|(k, v)| [k.clone(), v.clone()])
                .collect(),
        ),
        _ => None,
    }
}

/// The reply with its elements sorted (members, or pairs kept together), so that
/// two replies differing only in order compare equal. Non-aggregates stay as they are.
pub fn canonical(v: &Value, shape: Shape) -> Vec<u8> {
    let mut out = Vec::new();
    let Some(items) = elements(v) else {
        v.encode(&mut out);
        return out;
    };
    let mut groups: Vec<Vec<u8>> = match shape {
        Shape::Members => items.iter().map(Value::to_bytes).collect(),
        Shape::Pairs => items
            .chunks(2)
            .map(|c| c.iter().flat_map(Value::to_bytes).collect())
            .collect(),
    };
    groups.sort();
    // The aggregate's own header (type and length) is kept by encoding it empty.
    let header = match v {
        Value::Array(_) => format!("*{}", items.len()),
        Value::Set(_) => format!("~{}", items.len()),
        Value::Map(_) => format!("%{}", items.len() / 2),
        _ => String::new(),
    };
    out.extend_from_slice(header.as_bytes());
    for g in groups {
        out.extend_from_slice(&g);
    }
    out
}

/// The bulk strings of an aggregate reply (empty otherwise).
pub fn bulks(v: &Value) -> Vec<Vec<u8>> {
    elements(v)
        .unwrap_or_default()
        .iter()
        .filter_map(|e| e.as_bytes().map(<[u8]>::to_vec))
        .collect()
}

impl Pair {
    /// Both servers (with the same extra directives), or `None` when Redis is not
    /// installed and not required.
    pub fn start(extra: &[&str]) -> Option<Pair> {
        if !redis_available() {
            return None;
        }
        let r = redis_server(extra);
        let s = strata(extra);
        Some(Pair {
            redis: r.client(),
            strata: s.client(),
            mismatches: Vec::new(),
            _servers: (r, s),
        })
    }

    /// Sends `args` to both servers; returns Redis's reply and strata's, each with its
    /// exact bytes.
    pub fn send(&mut self, args: &[&[u8]]) -> ((Value, Vec<u8>), (Value, Vec<u8>)) {
        self.redis.send(args);
        self.strata.send(args);
        (self.redis.read(), self.strata.read())
    }

    pub fn mismatch(&mut self, text: String) {
        self.mismatches.push(text);
    }

    fn report(&mut self, args: &[&[u8]], want: &Value, got: &Value) {
        let text = format!(
            "{}\n  redis:  {}\n  strata: {}",
            show(args),
            shorten(want),
            shorten(got)
        );
        self.mismatch(text);
    }

    /// Requires byte-identical replies; returns Redis's.
    pub fn exact(&mut self, args: &[&[u8]]) -> Value {
        let ((want, want_raw), (got, got_raw)) = self.send(args);
        if want_raw != got_raw {
            self.report(args, &want, &got);
        }
        want
    }

    /// [`Pair::exact`] for string arguments.
    pub fn run(&mut self, args: &[&str]) -> Value {
        let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        self.exact(&args)
    }

    /// Requires the same replies up to the order of their elements; returns Redis's.
    pub fn unordered(&mut self, args: &[&[u8]], shape: Shape) -> Value {
        let ((want, want_raw), (got, got_raw)) = self.send(args);
        if want_raw != got_raw && canonical(&want, shape) != canonical(&got, shape) {
            self.report(args, &want, &got);
        }
        want
    }

    /// Asks Redis alone (to learn the state both servers should be in).
    pub fn redis_only(&mut self, args: &[&[u8]]) -> Value {
        self.redis.send(args);
        self.redis.read().0
    }

    /// The encoding Redis reports for `key` ("" if the key does not exist).
    pub fn encoding(&mut self, key: &[u8]) -> String {
        let v = self.redis_only(&[b"OBJECT", b"ENCODING", key]);
        v.as_bytes()
            .map(|b| String::from_utf8_lossy(b).into_owned())
            .unwrap_or_default()
    }

    /// Whether any of `keys` is a hashtable in Redis (whose order is unspecified).
    pub fn any_hashtable(&mut self, keys: &[&[u8]]) -> bool {
        keys.iter().any(|k| self.encoding(k) == "hashtable")
    }

    /// Runs a command whose reply lists the members (or pairs) of the keys given:
    /// exactly when none of them is a hashtable, ignoring order otherwise.
    pub fn listing(&mut self, args: &[&[u8]], keys: &[&[u8]], shape: Shape) -> Value {
        if self.any_hashtable(keys) {
            self.unordered(args, shape)
        } else {
            self.exact(args)
        }
    }

    /// Compares the whole state of `keys`: type, encoding, TTL presence and contents.
    pub fn check_keys(&mut self, keys: &[&[u8]]) {
        for key in keys {
            let t = self.exact(&[b"TYPE", key]);
            self.exact(&[b"OBJECT", b"ENCODING", key]);
            self.exact(&[b"EXPIRETIME", key]);
            match t.as_bytes() {
                Some(b"hash") => {
                    self.listing(&[b"HGETALL", key], &[key], Shape::Pairs);
                }
                Some(b"set") => {
                    self.listing(&[b"SMEMBERS", key], &[key], Shape::Members);
                }
                Some(b"string") => {
                    self.exact(&[b"GET", key]);
                }
                _ => {}
            }
        }
    }

    /// Runs a full SCAN-family iteration (`args` with cursor 0 at `cursor_at`) on one
    /// connection; returns the distinct items seen, or the error.
    fn full_scan(
        raw: &mut Raw,
        args: &[&[u8]],
        cursor_at: usize,
        shape: Shape,
    ) -> Result<BTreeSet<Vec<u8>>, Value> {
        let mut args: Vec<Vec<u8>> = args.iter().map(|a| a.to_vec()).collect();
        let mut seen = BTreeSet::new();
        for _ in 0..100_000 {
            let refs: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
            raw.send(&refs);
            let (v, _) = raw.read();
            let Value::Array(parts) = &v else {
                return Err(v);
            };
            let [cursor, items] = parts.as_slice() else {
                return Err(v);
            };
            let items = bulks(items);
            match shape {
                Shape::Members => seen.extend(items),
                Shape::Pairs => seen.extend(items.chunks(2).map(|c| c.concat())),
            }
            let cursor = cursor.as_bytes().unwrap_or(b"0").to_vec();
            if cursor == b"0" {
                return Ok(seen);
            }
            args[cursor_at] = cursor;
        }
        Err(Value::error("scan did not finish"))
    }

    /// A SCAN-family command on `key`: one exact call when Redis returns the whole
    /// collection at once (compact encodings), otherwise a full iteration on each side,
    /// compared as sets.
    pub fn scan(&mut self, args: &[&[u8]], key: &[u8], shape: Shape) {
        // Cursor 0, as strtoul reads "0" and "".
        let start = args.get(2).is_some_and(|c| c.is_empty() || *c == b"0");
        if !start || !self.any_hashtable(&[key]) {
            self.exact(args);
            return;
        }
        let want = Self::full_scan(&mut self.redis, args, 2, shape);
        let got = Self::full_scan(&mut self.strata, args, 2, shape);
        if want != got {
            let text = format!(
                "{} (full iteration)\n  redis:  {want:?}\n  strata: {got:?}",
                show(args)
            );
            self.mismatch(text);
        }
    }

    /// Fails the test if any reply differed.
    pub fn finish(self) {
        assert!(
            self.mismatches.is_empty(),
            "{} mismatches:\n{}",
            self.mismatches.len(),
            self.mismatches
                .iter()
                .take(40)
                .cloned()
                .collect::<Vec<_>>()
                .join("\n")
        );
    }
}
