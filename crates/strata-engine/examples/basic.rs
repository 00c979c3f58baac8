//! A tour of the engine's API: open, write, read, merge, batch, iterate,
//! compact, close and reopen.
//!
//! Run with `cargo run -p strata-engine --example basic [DIR]`; without a
//! directory the store is created under the system's temporary directory.

use std::sync::Arc;

use strata_engine::{AppendOperator, Engine, FsyncPolicy, Options, Result, WriteBatch, WriteMeta};

fn main() -> Result<()> {
    let dir = std::env::args()
        .nth(1)
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| {
            std::env::temp_dir().join(format!("strata-basic-{}", std::process::id()))
        });
    let options = Options::default()
        .with_fsync(FsyncPolicy::Always)
        .with_merge_operator(Arc::new(AppendOperator));

    let engine = Arc::new(Engine::open(&dir, options.clone())?);

    // Plain puts return the version the engine assigned; explicit versions are kept.
    let v = engine.put(b"user:1", b"ada")?;
    engine.put_with(b"user:2", b"grace", WriteMeta::new().with_version(v + 100))?;
    let user2 = engine
        .get_value(b"user:2")?
        .expect("user:2 was just written");
    println!(
        "user:2 = {:?} (version {})",
        String::from_utf8_lossy(&user2.bytes),
        user2.version
    );

    // Merge operands append to a value without rewriting it.
    engine.merge(b"log", b"started;")?;
    engine.merge(b"log", b"ready;")?;
    println!(
        "log = {:?}",
        String::from_utf8_lossy(&engine.get(b"log")?.unwrap_or_default())
    );

    // An absolute expiry (Unix milliseconds): a key that expired reads as absent.
    engine.put_with_expiry(b"session", b"token", 1)?;
    println!("session present: {}", engine.contains(b"session"));

    // A batch is applied all or nothing, also across crashes.
    let mut batch = WriteBatch::new();
    batch
        .put(b"account:a", b"90")
        .put(b"account:b", b"110")
        .delete(b"user:1");
    engine.write(&batch)?;

    // Concurrent writers share fsyncs (group commit).
    let writers: Vec<_> = (0..4)
        .map(|t| {
            let engine = engine.clone();
            std::thread::spawn(move || -> Result<()> {
                for i in 0..100 {
                    engine.put(format!("t{t}:{i}").as_bytes(), b"x")?;
                }
                Ok(())
            })
        })
        .collect();
    for writer in writers {
        writer.join().expect("writer thread panicked")?;
    }

    let total = engine.fold(0usize, |n, _key, value| n + value.bytes.len())?;
    println!("{} live keys, {total} value bytes", engine.keys().count());

    let report = engine.compact()?;
    println!("compaction: {report:?}");
    println!("stats: {:?}", engine.stats());

    Arc::into_inner(engine)
        .expect("all writers joined")
        .close()?;
    let engine = Engine::open(&dir, options)?;
    println!(
        "after reopen: account:b = {:?}",
        engine.get(b"account:b")?.map(String::from_utf8)
    );
    drop(engine);
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}
