//! The scripting engine's shared state: the EVAL script cache, the FUNCTION
//! libraries, the pools of Lua interpreters, and the scripts running now.
//!
//! Scripts on different keys run in parallel, each in an interpreter of its own taken
//! from a pool ([`Scripting::checkout`]). An EVAL interpreter compiles a cached script
//! the first time it runs it; a FUNCTION interpreter reloads every library when the
//! library set has changed since it last ran (the set carries a version). Every
//! interpreter is the same sandbox, and scripts cannot keep state between runs, so
//! which interpreter runs a script never shows.
//!
//! Running scripts are registered ([`Scripting::start`]) so that SCRIPT KILL /
//! FUNCTION KILL find them and so that, once one has run past `busy-reply-threshold`,
//! other clients are answered BUSY: a server-wide check made before a command takes
//! any lock ([`Scripting::busy_error`]), as Redis does.
//!
//! Invariants: a library is in the set only if its code loaded without error and none
//! of its functions collides with another library's; function names are unique
//! without regard to case.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use parking_lot::{Mutex, RwLock};
use strata_lua::{FunctionMeta, Kind, ScriptFlags, Vm, Watchdog};

/// Redis's BUSY texts.
pub const BUSY_EVAL: &str =
    "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.";
pub const BUSY_FUNCTION: &str =
    "BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE.";

/// How long FUNCTION LOAD lets a library's code run.
const LOAD_TIMEOUT: Duration = Duration::from_millis(500);

/// An EVAL script in the cache.
#[derive(Debug)]
pub struct Script {
    pub body: Vec<u8>,
    /// The shebang's flags; `None` without a shebang (no flag checks at all).
    pub flags: Option<ScriptFlags>,
    /// Where the code after the shebang starts.
    pub code_start: usize,
}

/// A FUNCTION library.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Library {
    pub name: Vec<u8>,
    /// The whole code, header included, as FUNCTION LIST WITHCODE shows it.
    pub code: Vec<u8>,
    /// Where the code after the header line starts.
    pub code_start: usize,
    pub functions: Vec<FunctionMeta>,
}

/// The libraries and an index of their functions.
#[derive(Debug, Default)]
pub struct Libraries {
    /// Bumped on every change, so interpreters know to reload.
    pub version: u64,
    pub libs: BTreeMap<Vec<u8>, Library>,
    /// Lower-case function name → library name.
    pub functions: HashMap<Vec<u8>, Vec<u8>>,
}

impl Libraries {
    /// The function called `name` (any case) and its library.
    pub fn function(&self, name: &[u8]) -> Option<(&Library, &FunctionMeta)> {
        let lib = self
            .libs
            .get(self.functions.get(&name.to_ascii_lowercase())?)?;
        let meta = lib
            .functions
            .iter()
            .find(|f| f.name.eq_ignore_ascii_case(name))?;
        Some((lib, meta))
    }

    /// Adds (or replaces) a library whose functions were checked not to collide.
    pub fn insert(&mut self, lib: Library) {
        self.remove(&lib.name.clone());
        for f in &lib.functions {
            self.functions
                .insert(f.name.to_ascii_lowercase(), lib.name.clone());
        }
        self.libs.insert(lib.name.clone(), lib);
        self.version += 1;
    }

    pub fn remove(&mut self, name: &[u8]) -> Option<Library> {
        let lib = self.libs.remove(name)?;
        for f in &lib.functions {
            self.functions.remove(&f.name.to_ascii_lowercase());
        }
        self.version += 1;
        Some(lib)
    }

    pub fn clear(&mut self) {
        self.libs.clear();
        self.functions.clear();
        self.version += 1;
    }

    /// A function of `lib` whose name another library already uses.
    pub fn collision<'a>(&self, lib: &'a Library) -> Option<&'a [u8]> {
        lib.functions.iter().map(|f| f.name.as_slice()).find(|n| {
            self.functions
                .get(&n.to_ascii_lowercase())
                .is_some_and(|owner| *owner != lib.name)
        })
    }

    pub fn function_count(&self) -> usize {
        self.functions.len()
    }
}

/// One script running now.
#[derive(Debug)]
pub struct Run {
    pub id: u64,
    /// EVAL (as opposed to FCALL).
    pub is_eval: bool,
    /// The SHA1 or the function's name.
    pub name: String,
    /// The command that started it (FUNCTION STATS).
    pub argv: Vec<Vec<u8>>,
    pub started: Instant,
    pub killed: AtomicBool,
    /// It ran a write command (SCRIPT KILL then refuses).
    pub wrote: AtomicBool,
    /// It passed `busy-reply-threshold`.
    pub timed_out: AtomicBool,
    threshold_ms: u64,
    busy: Arc<AtomicUsize>,
}

impl Watchdog for Run {
    fn check(&self) -> Option<String> {
        if self.killed.load(Ordering::Acquire) {
            tracing::warn!("Lua script killed by user with SCRIPT KILL.");
            return Some("Script killed by user with SCRIPT KILL...".to_string());
        }
        let elapsed = self.started.elapsed().as_millis() as u64;
        if self.threshold_ms > 0
            && elapsed >= self.threshold_ms
            && !self.timed_out.swap(true, Ordering::AcqRel)
        {
            self.busy.fetch_add(1, Ordering::AcqRel);
            tracing::warn!(
                "Slow script detected: still in execution after {elapsed} milliseconds. You can try killing the script using the {} command. Script name is: {}.",
                if self.is_eval {
                    "SCRIPT KILL"
                } else {
                    "FUNCTION KILL"
                },
                self.name
            );
        }
        None
    }
}

/// FUNCTION LOAD's timeout.
struct LoadTimeout(Instant);

impl Watchdog for LoadTimeout {
    fn check(&self) -> Option<String> {
        (self.0.elapsed() > LOAD_TIMEOUT).then(|| "FUNCTION LOAD timeout".to_string())
    }
}

/// An interpreter lent out of its pool; it goes back when dropped.
pub struct Lease<'a> {
    engine: &'a Scripting,
    vm: Option<Vm>,
    generation: u64,
}

impl Lease<'_> {
    pub fn vm(&mut self) -> &mut Vm {
        // The option is only emptied by drop.
        match self.vm.as_mut() {
            Some(vm) => vm,
            None => unreachable!("a lease always holds its interpreter"),
        }
    }
}

impl Drop for Lease<'_> {
    fn drop(&mut self) {
        if let Some(vm) = self.vm.take() {
            self.engine.give_back(vm, self.generation);
        }
    }
}

/// The scripting engine (see the module docs).
pub struct Scripting {
    scripts: RwLock<HashMap<String, Arc<Script>>>,
    pub libraries: RwLock<Libraries>,
    eval_pool: Mutex<Vec<Vm>>,
    function_pool: Mutex<Vec<Vm>>,
    /// Bumped by SCRIPT FLUSH: EVAL interpreters of an older generation are dropped.
    eval_generation: AtomicU64,
    running: Mutex<Vec<Arc<Run>>>,
    /// `running.len()`, readable without the lock on every command's path.
    running_count: AtomicUsize,
    next_run: AtomicU64,
    /// Runs past the threshold right now.
    busy: Arc<AtomicUsize>,
    /// `busy-reply-threshold`, in milliseconds (0: never busy).
    pub busy_threshold_ms: AtomicU64,
    /// The memory bound of each interpreter, in bytes (0: none).
    pub memory_limit: AtomicUsize,
    /// Scripts (by SHA1) and functions (by lower-case name) seen reaching keys they
    /// did not declare: they lock every shard from the start from then on.
    undeclared: Mutex<HashSet<String>>,
    /// Memory of the interpreters in the pools when last returned, for INFO.
    eval_memory: AtomicUsize,
    function_memory: AtomicUsize,
}

impl std::fmt::Debug for Scripting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scripting").finish()
    }
}

impl Default for Scripting {
    fn default() -> Self {
        Scripting::new()
    }
}

impl Scripting {
    pub fn new() -> Scripting {
        Scripting {
            scripts: RwLock::new(HashMap::new()),
            libraries: RwLock::new(Libraries::default()),
            eval_pool: Mutex::new(Vec::new()),
            function_pool: Mutex::new(Vec::new()),
            eval_generation: AtomicU64::new(0),
            running: Mutex::new(Vec::new()),
            running_count: AtomicUsize::new(0),
            next_run: AtomicU64::new(1),
            busy: Arc::new(AtomicUsize::new(0)),
            busy_threshold_ms: AtomicU64::new(5000),
            memory_limit: AtomicUsize::new(0),
            undeclared: Mutex::new(HashSet::new()),
            eval_memory: AtomicUsize::new(0),
            function_memory: AtomicUsize::new(0),
        }
    }

    /// The cached script with this SHA1 (any case).
    pub fn script(&self, sha: &str) -> Option<Arc<Script>> {
        let scripts = self.scripts.read();
        if let Some(s) = scripts.get(sha) {
            return Some(s.clone());
        }
        scripts.get(&sha.to_ascii_lowercase()).cloned()
    }

    pub fn cache_script(&self, sha: String, script: Arc<Script>) {
        self.scripts.write().insert(sha, script);
    }

    pub fn script_count(&self) -> usize {
        self.scripts.read().len()
    }

    /// Bytes held by the cached scripts' bodies.
    pub fn scripts_memory(&self) -> usize {
        self.scripts
            .read()
            .iter()
            .map(|(k, s)| k.len() + s.body.len() + 64)
            .sum()
    }

    /// SCRIPT FLUSH: forgets every script; EVAL interpreters start afresh.
    pub fn flush_scripts(&self) {
        self.scripts.write().clear();
        self.eval_generation.fetch_add(1, Ordering::AcqRel);
        self.eval_pool.lock().clear();
        self.eval_memory.store(0, Ordering::Relaxed);
    }

    /// An interpreter of this kind, from the pool or new. A FUNCTION interpreter
    /// comes with the current libraries loaded.
    pub fn checkout(&self, kind: Kind) -> Result<Lease<'_>, String> {
        let generation = self.eval_generation.load(Ordering::Acquire);
        let pooled = match kind {
            Kind::Eval => self.eval_pool.lock().pop(),
            Kind::Function => self.function_pool.lock().pop(),
        };
        let mut vm = match pooled {
            Some(vm) => vm,
            None => Vm::new(kind, self.memory_limit.load(Ordering::Relaxed))
                .map_err(|e| format!("can't create a Lua interpreter: {e}"))?,
        };
        vm.set_memory_limit(self.memory_limit.load(Ordering::Relaxed));
        if kind == Kind::Function {
            self.sync_functions(&mut vm);
        }
        Ok(Lease {
            engine: self,
            vm: Some(vm),
            generation,
        })
    }

    fn give_back(&self, vm: Vm, generation: u64) {
        // A script that ran near the bound (or failed on it) leaves garbage the next
        // one would pay for.
        let limit = self.memory_limit.load(Ordering::Relaxed);
        if limit > 0 && vm.used_memory() > limit / 2 {
            vm.collect_garbage();
        }
        let memory = vm.used_memory();
        match vm.kind() {
            Kind::Eval => {
                if generation == self.eval_generation.load(Ordering::Acquire) {
                    let mut pool = self.eval_pool.lock();
                    pool.push(vm);
                    self.eval_memory
                        .store(memory * pool.len().max(1), Ordering::Relaxed);
                }
            }
            Kind::Function => {
                let mut pool = self.function_pool.lock();
                pool.push(vm);
                self.function_memory
                    .store(memory * pool.len().max(1), Ordering::Relaxed);
            }
        }
    }

    /// Reloads every library into `vm` if the set changed since it last loaded them.
    fn sync_functions(&self, vm: &mut Vm) {
        let libs = self.libraries.read();
        if vm.library_version == libs.version {
            return;
        }
        vm.clear_functions();
        for lib in libs.libs.values() {
            let code = lib.code.get(lib.code_start..).unwrap_or_default();
            if let Err(e) = vm.load_library(code, Arc::new(LoadTimeout(Instant::now()))) {
                tracing::warn!(
                    "library {} failed to load into an interpreter: {e}",
                    String::from_utf8_lossy(&lib.name)
                );
            }
        }
        vm.library_version = libs.version;
    }

    /// Runs a library's code (after its header) to validate it and learn its
    /// functions. The error is the reply text without `ERR `.
    pub fn load_library(&self, vm: &mut Vm, code: &[u8]) -> Result<Vec<FunctionMeta>, String> {
        vm.load_library(code, Arc::new(LoadTimeout(Instant::now())))
    }

    /// Registers a script starting to run.
    pub fn start(&self, is_eval: bool, name: String, argv: &[&[u8]]) -> Arc<Run> {
        let run = Arc::new(Run {
            id: self.next_run.fetch_add(1, Ordering::Relaxed),
            is_eval,
            name,
            argv: argv.iter().map(|a| a.to_vec()).collect(),
            started: Instant::now(),
            killed: AtomicBool::new(false),
            wrote: AtomicBool::new(false),
            timed_out: AtomicBool::new(false),
            threshold_ms: self.busy_threshold_ms.load(Ordering::Relaxed),
            busy: self.busy.clone(),
        });
        let mut running = self.running.lock();
        running.push(run.clone());
        self.running_count.store(running.len(), Ordering::Release);
        run
    }

    /// Unregisters a script that ended.
    pub fn finish(&self, run: &Arc<Run>) {
        let mut running = self.running.lock();
        running.retain(|r| r.id != run.id);
        self.running_count.store(running.len(), Ordering::Release);
        drop(running);
        if run.timed_out.load(Ordering::Acquire) {
            self.busy.fetch_sub(1, Ordering::AcqRel);
        }
    }

    /// Whether any script is running (commands then wait for locks in slices, so that
    /// they can turn to BUSY).
    pub fn any_running(&self) -> bool {
        self.running_count.load(Ordering::Acquire) > 0
    }

    /// The BUSY error other clients get while a script is past the threshold.
    pub fn busy_error(&self) -> Option<&'static str> {
        if self.busy.load(Ordering::Acquire) == 0 {
            return None;
        }
        let running = self.running.lock();
        let busy = running
            .iter()
            .find(|r| r.timed_out.load(Ordering::Acquire))?;
        Some(if busy.is_eval {
            BUSY_EVAL
        } else {
            BUSY_FUNCTION
        })
    }

    /// The script running the longest.
    pub fn oldest_run(&self) -> Option<Arc<Run>> {
        self.running.lock().first().cloned()
    }

    /// SCRIPT KILL (`is_eval`) / FUNCTION KILL, as Redis's `scriptKill`: the reply
    /// text on refusal.
    pub fn kill(&self, is_eval: bool) -> Result<(), &'static str> {
        let Some(run) = self.oldest_run() else {
            return Err("NOTBUSY No scripts in execution right now.");
        };
        if run.wrote.load(Ordering::Acquire) {
            return Err(
                "UNKILLABLE Sorry the script already executed write commands against the dataset. You can either wait the script termination or kill the server in a hard way using the SHUTDOWN NOSAVE command.",
            );
        }
        if is_eval && !run.is_eval {
            return Err(BUSY_FUNCTION);
        }
        if !is_eval && run.is_eval {
            return Err(BUSY_EVAL);
        }
        run.killed.store(true, Ordering::Release);
        Ok(())
    }

    /// Stops every running script (shutdown).
    pub fn kill_all(&self) {
        for run in self.running.lock().iter() {
            run.killed.store(true, Ordering::Release);
        }
    }

    /// Whether the script or function reached undeclared keys before.
    pub fn needs_all_shards(&self, name: &str) -> bool {
        self.undeclared.lock().contains(name)
    }

    pub fn mark_needs_all_shards(&self, name: &str) {
        self.undeclared.lock().insert(name.to_string());
    }

    /// INFO's figures: (EVAL interpreters' memory, FUNCTION interpreters' memory).
    pub fn vm_memory(&self) -> (usize, usize) {
        (
            self.eval_memory.load(Ordering::Relaxed),
            self.function_memory.load(Ordering::Relaxed),
        )
    }

    /// FUNCTION DUMP's payload: every library's code (see [`decode_payload`]).
    pub fn dump(&self) -> Vec<u8> {
        let libs = self.libraries.read();
        encode_payload(libs.libs.values().map(|l| l.code.as_slice()))
    }
}

/// The magic at the start of a FUNCTION DUMP payload.
const PAYLOAD_MAGIC: &[u8; 4] = b"STRF";
const PAYLOAD_VERSION: u8 = 1;

/// FUNCTION DUMP's payload: `STRF`, a version byte, the number of libraries and each
/// library's code (little-endian `u32` lengths), then a CRC32C of all that.
pub fn encode_payload<'a>(codes: impl Iterator<Item = &'a [u8]>) -> Vec<u8> {
    let codes: Vec<&[u8]> = codes.collect();
    let mut out = PAYLOAD_MAGIC.to_vec();
    out.push(PAYLOAD_VERSION);
    out.extend_from_slice(&(codes.len() as u32).to_le_bytes());
    for code in codes {
        out.extend_from_slice(&(code.len() as u32).to_le_bytes());
        out.extend_from_slice(code);
    }
    let crc = crc32c::crc32c(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// Reads a payload written by [`encode_payload`]; `None` for anything else (wrong
/// magic, version or checksum, truncated). Never panics.
pub fn decode_payload(bytes: &[u8]) -> Option<Vec<Vec<u8>>> {
    let (body, crc) = bytes.split_at_checked(bytes.len().checked_sub(4)?)?;
    if crc32c::crc32c(body).to_le_bytes() != crc {
        return None;
    }
    let rest = body.strip_prefix(PAYLOAD_MAGIC.as_slice())?;
    let (&version, rest) = rest.split_first()?;
    if version != PAYLOAD_VERSION {
        return None;
    }
    let (count, mut rest) = rest.split_first_chunk::<4>()?;
    let count = u32::from_le_bytes(*count) as usize;
    let mut codes = Vec::with_capacity(count.min(1024));
    for _ in 0..count {
        let (len, r) = rest.split_first_chunk::<4>()?;
        let len = u32::from_le_bytes(*len) as usize;
        let (code, r) = r.split_at_checked(len)?;
        codes.push(code.to_vec());
        rest = r;
    }
    rest.is_empty().then_some(codes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_round_trip_and_reject_damage() {
        let p = encode_payload([&b"#!lua name=a\n"[..], b"#!lua name=b\nx"].into_iter());
        assert_eq!(
            decode_payload(&p),
            Some(vec![
                b"#!lua name=a\n".to_vec(),
                b"#!lua name=b\nx".to_vec()
            ])
        );
        for cut in 0..p.len() {
            assert_eq!(decode_payload(&p[..cut]), None, "cut at {cut}");
        }
        let mut bad = p.clone();
        bad[6] ^= 1;
        assert_eq!(decode_payload(&bad), None);
    }
}
