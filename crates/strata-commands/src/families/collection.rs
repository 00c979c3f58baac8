//! Helpers shared by the collection families: the options and replies of the SCAN
//! family over one key, and the counts and sampling of the random-member commands.

use strata_keyspace::glob;

use crate::ctx::Ctx;
use strata_resp::ReplyWriter;

use crate::error::{CmdError, CmdResult};
use crate::parse::{self, is};

/// The most bytes a reply of repeated random picks (HRANDFIELD, SRANDMEMBER and
/// ZRANDMEMBER with a negative count) may take. Its size follows the count the
/// client asks for, not the data — one member asked for 2^62 times — and a reply
/// is built whole before it is written, so unbounded it would exhaust memory (as
/// it does in Redis).
const MAX_RANDOM_REPLY: usize = 512 << 20;

/// The fewest bytes one pick adds to such a reply: an empty bulk string, `$0\r\n\r\n`.
const MIN_PICK_BYTES: u64 = 6;

/// Picks written between two checks of the reply's size.
const PICKS_PER_CHECK: u64 = 1024;

/// Writes a reply of `n` repeated random picks: `header` writes its aggregate
/// header, `picks(out, k)` writes `k` more picks. A reply that would pass
/// [`MAX_RANDOM_REPLY`] is an error instead: at once when even the smallest picks
/// would pass it, else as soon as it does, with what was written of it taken back.
pub(crate) fn repeated_picks(
    out: &mut ReplyWriter,
    n: u64,
    header: impl FnOnce(&mut ReplyWriter),
    mut picks: impl FnMut(&mut ReplyWriter, usize),
) -> CmdResult {
    let too_large = || {
        CmdError::err(
            "reply too large: a negative count may ask for at most 512mb of repeated elements",
        )
    };
    if n > MAX_RANDOM_REPLY as u64 / MIN_PICK_BYTES {
        return Err(too_large());
    }
    let start = out.buffer().len();
    header(out);
    let mut left = n;
    while left > 0 {
        let k = left.min(PICKS_PER_CHECK);
        picks(out, k as usize);
        if out.buffer().len() - start > MAX_RANDOM_REPLY {
            out.buffer().truncate(start);
            return Err(too_large());
        }
        left -= k;
    }
    Ok(())
}

/// Parses the count of HRANDFIELD, SRANDMEMBER and ZRANDMEMBER: any integer but
/// i64::MIN, with Redis's error text.
pub(crate) fn parse_rand_count(arg: &[u8]) -> Result<i64, CmdError> {
    let n = parse::int(arg)?;
    if n == i64::MIN {
        return Err(CmdError::err(format!(
            "value is out of range, value must between {} and {}",
            -i64::MAX,
            i64::MAX
        )));
    }
    Ok(n)
}

/// Picks `count` distinct items of `all` at random (a partial shuffle), in the order
/// picked.
pub(crate) fn sample<T>(mut all: Vec<T>, count: usize) -> Vec<T> {
    let count = count.min(all.len());
    for i in 0..count {
        let j = i + (rand::random::<u64>() % (all.len() - i) as u64) as usize;
        all.swap(i, j);
    }
    all.truncate(count);
    all
}

/// The options of HSCAN, SSCAN and ZSCAN.
pub(crate) struct ScanOptions<'a> {
    pub count: usize,
    pub pattern: Option<&'a [u8]>,
}

impl<'a> ScanOptions<'a> {
    /// Parses COUNT and MATCH as Redis's `scanGenericCommand` does for a collection.
    pub(crate) fn parse(args: &[&'a [u8]]) -> Result<ScanOptions<'a>, CmdError> {
        let mut opts = ScanOptions {
            count: 10,
            pattern: None,
        };
        let mut i = 0;
        while i < args.len() {
            let more = i + 1 < args.len();
            if is(args[i], "count") && more {
                let n = parse::int(args[i + 1])?;
                if n < 1 {
                    return Err(CmdError::Syntax);
                }
                opts.count = usize::try_from(n).unwrap_or(usize::MAX);
            } else if is(args[i], "match") && more {
                opts.pattern = Some(args[i + 1]).filter(|p| *p != b"*");
            } else {
                return Err(CmdError::Syntax);
            }
            i += 2;
        }
        Ok(opts)
    }

    pub(crate) fn matches(&self, item: &[u8]) -> bool {
        self.pattern.is_none_or(|p| glob::matches(p, item))
    }
}

/// Writes a collection SCAN reply: the cursor and the items.
pub(crate) fn scan_reply<'b>(
    ctx: &mut Ctx,
    cursor: u64,
    items: impl ExactSizeIterator<Item = &'b [u8]>,
) {
    ctx.out.array(2);
    ctx.out.bulk(itoa::Buffer::new().format(cursor).as_bytes());
    ctx.out.array(items.len());
    for item in items {
        ctx.out.bulk(item);
    }
}
