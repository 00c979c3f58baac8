//! LCS: the longest common subsequence of two strings.
//!
//! A dynamic-programming table of prefix LCS lengths, then a walk back from the end
//! that rebuilds the subsequence and groups it into ranges that are contiguous in both
//! strings, reported from the end of the strings towards the start, as Redis does.

use crate::ctx::Ctx;
use crate::error::{CmdError, CmdResult};
use crate::parse::{self, is};

/// A run of matched bytes: `a[a_start..=a_end]` equals `b[b_start..=b_end]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Run {
    a_start: usize,
    a_end: usize,
    b_start: usize,
    b_end: usize,
}

impl Run {
    fn len(&self) -> usize {
        self.a_end - self.a_start + 1
    }
}

pub fn lcs(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let mut values: [Vec<u8>; 2] = [Vec::new(), Vec::new()];
    let mut wrong_type = false;
    for (slot, key) in values.iter_mut().zip(&args[1..3]) {
        match ctx.keys.read(key).map(|e| e.value().as_str()) {
            Some(Some(s)) => *slot = s.to_vec(),
            Some(None) => wrong_type = true,
            None => {}
        }
    }
    if wrong_type {
        return Err(CmdError::err(
            "The specified keys must contain string values",
        ));
    }
    let (mut idx, mut len, mut with_len) = (false, false, false);
    let mut min_len: i64 = 0;
    let mut i = 3;
    while i < args.len() {
        let opt = args[i];
        if is(opt, "idx") {
            idx = true;
        } else if is(opt, "len") {
            len = true;
        } else if is(opt, "withmatchlen") {
            with_len = true;
        } else if is(opt, "minmatchlen") && i + 1 < args.len() {
            min_len = parse::int(args[i + 1])?.max(0);
            i += 1;
        } else {
            return Err(CmdError::Syntax);
        }
        i += 1;
    }
    if idx && len {
        return Err(CmdError::err(
            "If you want both the length and indexes, please just use IDX.",
        ));
    }
    let [a, b] = &values;
    let cells = (a.len() as u64 + 1) * (b.len() as u64 + 1);
    if cells.saturating_mul(4) > ctx.server.max_bulk_len() as u64 {
        return Err(CmdError::err(
            "Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len",
        ));
    }
    let table = Table::build(a, b);
    let total = table.at(a.len(), b.len());
    if len {
        ctx.out.integer(total as i64);
        return Ok(());
    }
    let (subsequence, runs) = table.walk_back(a, b);
    if !idx {
        ctx.out.bulk(&subsequence);
        return Ok(());
    }
    let shown: Vec<&Run> = runs
        .iter()
        .filter(|r| min_len == 0 || r.len() as i64 >= min_len)
        .collect();
    ctx.out.map(2);
    ctx.out.bulk(b"matches");
    ctx.out.array(shown.len());
    for r in shown {
        ctx.out.array(if with_len { 3 } else { 2 });
        ctx.out.array(2);
        ctx.out.integer(r.a_start as i64);
        ctx.out.integer(r.a_end as i64);
        ctx.out.array(2);
        ctx.out.integer(r.b_start as i64);
        ctx.out.integer(r.b_end as i64);
        if with_len {
            ctx.out.integer(r.len() as i64);
        }
    }
    ctx.out.bulk(b"len");
    ctx.out.integer(total as i64);
    Ok(())
}

/// `cells[i * (b.len() + 1) + j]` = LCS length of `a[..i]` and `b[..j]`.
struct Table {
    cells: Vec<u32>,
    width: usize,
}

impl Table {
    fn build(a: &[u8], b: &[u8]) -> Table {
        let width = b.len() + 1;
        let mut cells = vec![0u32; (a.len() + 1) * width];
        for i in 1..=a.len() {
            for j in 1..=b.len() {
                cells[i * width + j] = if a[i - 1] == b[j - 1] {
                    cells[(i - 1) * width + j - 1] + 1
                } else {
                    cells[(i - 1) * width + j].max(cells[i * width + j - 1])
                };
            }
        }
        Table { cells, width }
    }

    fn at(&self, i: usize, j: usize) -> u32 {
        self.cells[i * self.width + j]
    }

    /// Rebuilds the subsequence from the end and collects its contiguous runs, last
    /// run first. A run ends when the walk leaves the diagonal or reaches the start of
    /// either string.
    fn walk_back(&self, a: &[u8], b: &[u8]) -> (Vec<u8>, Vec<Run>) {
        let mut out = vec![0u8; self.at(a.len(), b.len()) as usize];
        let mut k = out.len();
        let mut runs = Vec::new();
        let mut current: Option<Run> = None;
        let (mut i, mut j) = (a.len(), b.len());
        while i > 0 && j > 0 {
            let mut close = false;
            if a[i - 1] == b[j - 1] {
                out[k - 1] = a[i - 1];
                k -= 1;
                match &mut current {
                    None => {
                        current = Some(Run {
                            a_start: i - 1,
                            a_end: i - 1,
                            b_start: j - 1,
                            b_end: j - 1,
                        })
                    }
                    Some(r) if r.a_start == i && r.b_start == j => {
                        r.a_start -= 1;
                        r.b_start -= 1;
                    }
                    Some(_) => close = true,
                }
                if current.is_some_and(|r| r.a_start == 0 || r.b_start == 0) {
                    close = true;
                }
                i -= 1;
                j -= 1;
            } else {
                if self.at(i - 1, j) > self.at(i, j - 1) {
                    i -= 1;
                } else {
                    j -= 1;
                }
                close = current.is_some();
            }
            if close && let Some(r) = current.take() {
                runs.push(r);
            }
        }
        (out, runs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documented_example() {
        let (a, b) = (b"ohmytext".as_slice(), b"mynewtext".as_slice());
        let t = Table::build(a, b);
        let (s, runs) = t.walk_back(a, b);
        assert_eq!(s, b"mytext");
        assert_eq!(
            runs,
            vec![
                Run {
                    a_start: 4,
                    a_end: 7,
                    b_start: 5,
                    b_end: 8
                },
                Run {
                    a_start: 2,
                    a_end: 3,
                    b_start: 0,
                    b_end: 1
                }
            ]
        );
    }
}
