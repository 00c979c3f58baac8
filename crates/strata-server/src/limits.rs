//! The open-files limit and `maxclients`, fitted to each other at start-up as Redis's
//! `adjustOpenFilesLimit` does.
//!
//! Every client costs a file descriptor, and the server needs a few more of its own
//! (listeners, the log's files, the runtime's event queue): [`RESERVED_FDS`]. If the
//! soft `RLIMIT_NOFILE` is below `maxclients + RESERVED_FDS`, strata raises it (up to
//! the hard limit); if it still falls short, `maxclients` is lowered to what fits, so
//! that the accept loop refuses clients with Redis's "max number of clients reached"
//! instead of failing to accept with EMFILE.

use rlimit::Resource;

/// File descriptors kept for the server itself (Redis's `CONFIG_MIN_RESERVED_FDS`).
pub const RESERVED_FDS: u64 = 32;

/// Raises the open-files limit for `maxclients` clients, or returns the lower
/// `maxclients` that fits the limit there is; an error if not even one client fits.
pub fn fit_maxclients(maxclients: u32) -> anyhow::Result<u32> {
    let wanted = u64::from(maxclients) + RESERVED_FDS;
    let Ok((soft, hard)) = rlimit::getrlimit(Resource::NOFILE) else {
        tracing::warn!("Unable to obtain the current NOFILE limit, assuming 1024");
        return fit(maxclients, 1024, wanted);
    };
    if soft >= wanted {
        return Ok(maxclients);
    }
    let target = wanted.min(hard);
    let limit = match rlimit::setrlimit(Resource::NOFILE, target, hard) {
        Ok(()) => target,
        Err(e) => {
            tracing::warn!(
                "Server can't set maximum open files to {target} because of OS error: {e}."
            );
            soft
        }
    };
    fit(maxclients, limit, wanted)
}

fn fit(maxclients: u32, limit: u64, wanted: u64) -> anyhow::Result<u32> {
    if limit >= wanted {
        return Ok(maxclients);
    }
    if limit <= RESERVED_FDS {
        anyhow::bail!(
            "Your current 'ulimit -n' of {limit} is not enough for the server to start. \
             Please increase your open file limit to at least {}. Exiting.",
            RESERVED_FDS + 1
        );
    }
    let fitted = u32::try_from(limit - RESERVED_FDS).unwrap_or(u32::MAX);
    tracing::warn!(
        "You requested maxclients of {maxclients} requiring at least {wanted} max file \
         descriptors. Current maximum open files is {limit}. maxclients has been reduced to \
         {fitted} to compensate for low ulimit. If you need higher maxclients increase \
         'ulimit -n'."
    );
    Ok(fitted)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maxclients_fits_the_limit() {
        assert_eq!(fit(100, 1024, 132).ok(), Some(100));
        assert_eq!(fit(10_000, 1024, 10_032).ok(), Some(992));
        assert!(fit(10, 32, 42).is_err());
        // The running process can always have at least one client.
        assert!(fit_maxclients(1).is_ok_and(|m| m == 1));
    }
}
