//! Helpers shared by the collection families: the options and replies of the SCAN
//! family over one key, and the counts and sampling of the random-member commands.

use strata_keyspace::glob;

use crate::ctx::Ctx;
use crate::error::CmdError;
use crate::parse::{self, is};

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
