//! Comparing two replies: byte for byte, or structurally where Redis leaves the order
//! unspecified or the value is inherently different.

use strata_resp::value::Value;

/// How two replies are compared.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Cmp {
    /// Byte for byte.
    Exact,
    /// An array whose order Redis leaves unspecified (KEYS).
    Unordered,
    /// Integers that may differ by the given amount when both are non-negative
    /// (TTLs, idle times); otherwise byte for byte.
    Near(i64),
    /// Name-value pairs in any order (CONFIG GET).
    Pairs,
    /// COMMAND INFO: exact but for the order of subcommands.
    CommandInfo,
    /// HELLO: exact but for the client id.
    Hello,
    /// CLIENT ID: an integer on both.
    ClientId,
    /// OBJECT IDLETIME: non-negative integers on both, or the same bytes (nil,
    /// errors). See the generator for why the numbers may differ.
    Idle,
    /// MEMORY USAGE: an integer on both (sizes are each server's own), or the same
    /// bytes (nil, errors).
    Size,
    /// CLIENT INFO: the same fields, and the same values for those that are not
    /// addresses, times or buffer sizes.
    ClientInfo,
    /// CLIENT LIST: the same type, one line per client.
    ClientList,
    /// INFO: the same sections and key counts.
    Info,
    /// TIME: two numbers, seconds within two of each other.
    Time,
    /// RANDOMKEY: both nil, or each server's key exists on the other.
    RandomKey,
}

/// A reply, decoded and raw.
pub type Reply = (Value, Vec<u8>);

/// Compares two replies; `Err` describes the difference.
pub fn compare(cmp: Cmp, redis: &Reply, ours: &Reply) -> Result<(), String> {
    if redis.1 == ours.1 {
        return Ok(());
    }
    let (r, s) = (&redis.0, &ours.0);
    let same = match cmp {
        Cmp::Exact | Cmp::RandomKey => false,
        Cmp::Unordered => sorted(r) == sorted(s),
        Cmp::Near(tol) => match (r, s) {
            (Value::Integer(a), Value::Integer(b)) => *a >= 0 && *b >= 0 && (a - b).abs() <= tol,
            _ => false,
        },
        Cmp::Pairs => pairs(r) == pairs(s),
        Cmp::CommandInfo => normalize_info(r) == normalize_info(s),
        Cmp::Hello => mask_id(r) == mask_id(s),
        Cmp::ClientId => {
            matches!((r, s), (Value::Integer(a), Value::Integer(b)) if *a > 0 && *b > 0)
        }
        Cmp::Idle => {
            matches!((r, s), (Value::Integer(a), Value::Integer(b)) if *a >= 0 && *b >= 0) || r == s
        }
        Cmp::Size => {
            matches!((r, s), (Value::Integer(a), Value::Integer(b)) if *a > 0 && *b > 0) || r == s
        }
        Cmp::ClientInfo => return client_info(r, s),
        Cmp::ClientList => {
            same_kind(r, s)
                && [r, s].iter().all(|v| {
                    v.as_bytes().is_some_and(|t| {
                        t.split(|&c| c == b'\n')
                            .filter(|l| !l.is_empty())
                            .all(|l| l.starts_with(b"id="))
                    })
                })
        }
        Cmp::Info => return info(r, s),
        Cmp::Time => time(r)
            .zip(time(s))
            .is_some_and(|(a, b)| (a - b).abs() <= 2),
    };
    if same {
        Ok(())
    } else {
        Err("replies differ".to_string())
    }
}

fn same_kind(a: &Value, b: &Value) -> bool {
    std::mem::discriminant(a) == std::mem::discriminant(b)
}

/// The elements of an array (or set) in sorted order, and the container's kind.
fn sorted(v: &Value) -> Option<(bool, Vec<Vec<u8>>)> {
    let (is_set, items) = match v {
        Value::Array(items) => (false, items),
        Value::Set(items) => (true, items),
        _ => return None,
    };
    let mut out: Vec<Vec<u8>> = items.iter().map(Value::to_bytes).collect();
    out.sort();
    Some((is_set, out))
}

/// Name-value pairs, each as its encoded bytes.
type Pairs = Vec<(Vec<u8>, Vec<u8>)>;

/// CONFIG GET's pairs, sorted, and whether they came as a map.
fn pairs(v: &Value) -> Option<(bool, Pairs)> {
    let (is_map, mut out): (bool, Pairs) = match v {
        Value::Array(items) if items.len() % 2 == 0 => (
            false,
            items
                .chunks(2)
                .map(|p| (p[0].to_bytes(), p[1].to_bytes()))
                .collect(),
        ),
        Value::Map(items) => (
            true,
            items
                .iter()
                .map(|(k, v)| (k.to_bytes(), v.to_bytes()))
                .collect(),
        ),
        _ => return None,
    };
    out.sort();
    Some((is_map, out))
}

/// COMMAND INFO with every subcommand list sorted (Redis keeps them in a dict).
fn normalize_info(v: &Value) -> Value {
    match v {
        Value::Array(entries) => Value::Array(entries.iter().map(normalize_entry).collect()),
        other => other.clone(),
    }
}

fn normalize_entry(v: &Value) -> Value {
    match v {
        Value::Array(fields) if fields.len() == 10 => {
            let mut fields = fields.clone();
            if let Value::Array(subs) = &fields[9] {
                let mut subs: Vec<Value> = subs.iter().map(normalize_entry).collect();
                subs.sort_by_key(Value::to_bytes);
                fields[9] = Value::Array(subs);
            }
            Value::Array(fields)
        }
        other => other.clone(),
    }
}

/// HELLO's reply with the client id replaced by 0.
fn mask_id(v: &Value) -> Value {
    let id = Value::bulk("id");
    match v {
        Value::Array(items) => {
            let mut items = items.clone();
            for i in (0..items.len().saturating_sub(1)).step_by(2) {
                if items[i] == id {
                    items[i + 1] = Value::Integer(0);
                }
            }
            Value::Array(items)
        }
        Value::Map(pairs) => Value::Map(
            pairs
                .iter()
                .map(|(k, v)| {
                    let v = if *k == id {
                        Value::Integer(0)
                    } else {
                        v.clone()
                    };
                    (k.clone(), v)
                })
                .collect(),
        ),
        other => other.clone(),
    }
}

/// CLIENT INFO fields that describe the connection's state rather than its address,
/// age or buffers.
const CLIENT_FIELDS: &[&str] = &[
    "name", "flags", "db", "sub", "psub", "ssub", "multi", "obl", "oll", "events", "cmd", "user",
    "redir", "resp",
];

fn client_info(r: &Value, s: &Value) -> Result<(), String> {
    if !same_kind(r, s) {
        return Err("different reply types".to_string());
    }
    let fields = |v: &Value| -> Vec<(String, String)> {
        let text = String::from_utf8_lossy(v.as_bytes().unwrap_or_default()).into_owned();
        text.split_whitespace()
            .filter_map(|f| f.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    let (a, b) = (fields(r), fields(s));
    let names = |f: &[(String, String)]| f.iter().map(|(k, _)| k.clone()).collect::<Vec<_>>();
    if names(&a) != names(&b) {
        return Err("different CLIENT INFO fields".to_string());
    }
    for ((k, x), (_, y)) in a.iter().zip(&b) {
        if CLIENT_FIELDS.contains(&k.as_str()) && x != y {
            return Err(format!("CLIENT INFO {k}: redis {x}, strata {y}"));
        }
    }
    Ok(())
}

/// INFO: the same section headers, and the same key and expiry counts per database.
fn info(r: &Value, s: &Value) -> Result<(), String> {
    if !same_kind(r, s) {
        return Err("different reply types".to_string());
    }
    let summary = |v: &Value| -> Vec<String> {
        let text = String::from_utf8_lossy(v.as_bytes().unwrap_or_default()).into_owned();
        text.lines()
            .filter_map(|l| {
                if l.starts_with('#') {
                    return Some(l.to_string());
                }
                let (db, rest) = l.split_once(':')?;
                if !db.starts_with("db") {
                    return None;
                }
                let counts: Vec<&str> = rest
                    .split(',')
                    .filter(|f| f.starts_with("keys=") || f.starts_with("expires="))
                    .collect();
                Some(format!("{db}:{}", counts.join(",")))
            })
            .collect()
    };
    let (a, b) = (summary(r), summary(s));
    if a == b {
        Ok(())
    } else {
        Err(format!("INFO differs: redis {a:?}, strata {b:?}"))
    }
}

fn time(v: &Value) -> Option<i64> {
    let Value::Array(items) = v else { return None };
    let [Value::Bulk(secs), Value::Bulk(micros)] = items.as_slice() else {
        return None;
    };
    let micros: i64 = std::str::from_utf8(micros).ok()?.parse().ok()?;
    (0..1_000_000).contains(&micros).then_some(())?;
    std::str::from_utf8(secs).ok()?.parse().ok()
}
