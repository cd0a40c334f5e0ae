//! The engine: one `wasmtime::Engine` per process, the linker every tool and driver component
//! is instantiated through, the epoch ticker behind call deadlines, and the compiled-component
//! cache.
//!
//! What it promises:
//!
//! - Components are compiled once per content (see [`cache`], bounded, least recently used
//!   out first) and pre-linked once per load, so a call pays only for instantiation, the call
//!   itself and teardown. A compile the cache cannot answer is told to
//!   [`EngineConfig::on_compile`] before and after, so a long one is never silent.
//! - Every linker offers WASI 0.2 (filesystem, clocks, random, cli, and sockets that every store
//!   denies) and `wasi:http` outgoing requests checked by [`crate::grants::http`]. Beyond that,
//!   each world links exactly its `murmur:*` imports in `wit/worlds.wit` ([`World`]):
//!   - a **driver** gets `murmur:text/chunks` (also under the name another Murmur runtime gives
//!     it, `murmur:stream/events`);
//!   - a **tool** gets those and `murmur:task/task`;
//!   - a **hook** gets `murmur:runtime/inference`, `murmur:runtime/tokens`,
//!     `murmur:task-io/read` and `murmur:conversation/read`, each answering only when its
//!     artifact entry grants it (an interface not granted is linked with functions that refuse
//!     every call, naming the grant);
//!   - a **capsule component** (`world capsule` with the `runtime-host` interfaces) gets
//!     `murmur:tool-registry/invoke`, `murmur:artifact-manager/manage`, `murmur:shell/execute`
//!     and `murmur:message/send`.
//! - A component that imports a `murmur:*` interface its world does not provide fails to load
//!   before anything is linked, with [`RuntimeError::WorldImport`] naming the import, the world
//!   and the worlds that do provide it ([`Engine::check_world`]): a tool importing
//!   `murmur:message/send` is refused (a capsule delegates to a peer through a named `peers:`
//!   entry, which the model asks through the runtime's tool `ask-<name>`). Any other import the
//!   linker lacks fails to load with an error naming it.
//! - Every call goes one way (`Engine::bounded`): its own limited store, a deadline, a failure named for
//!   what it was. Deadlines are counted in epoch ticks of [`TICK`]; a call is stopped at most
//!   one tick late.

pub mod cache;
mod call;
pub use crate::limits;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use murmur_manifest::capsule::HookGrant;
use wasmtime::component::{Component, HasSelf, Linker};

use crate::bindings::ToolPre;
use crate::error::RuntimeError;
use crate::grants::HostState;
use crate::grants::artifacts::ManagerSlot;
use crate::grants::chunks::ChunkSink;
use crate::grants::hook::HookSlot;
use crate::grants::message::MessageGrant;
use crate::grants::shell::ShellSlot;
use crate::grants::task::TaskInput;
use crate::grants::tool_registry::ToolRegistryGrant;
pub use cache::{CacheEntry, CacheStatus, ComponentCache};
pub use limits::CallLimits;

/// How often the epoch advances: the resolution of every call deadline.
pub const TICK: Duration = Duration::from_millis(10);

/// How the engine is set up.
#[derive(Debug, Clone, Default)]
pub struct EngineConfig {
    /// Where compiled components are kept between processes. `None` compiles on every load.
    pub cache_dir: Option<PathBuf>,
    /// The bound of that cache in bytes; `None` is [`cache::DEFAULT_LIMIT_BYTES`].
    pub cache_limit: Option<u64>,
    /// Told before and after each compile the cache could not answer, so a long one is never
    /// silent.
    pub on_compile: CompileProgress,
    /// Use wasmtime's pooling instance allocator: pays when one process instantiates many times
    /// (sessions, the door, benchmarks); a one-shot call is as fast without it.
    pub pooling: bool,
}

/// A compile the cache could not answer: its start (the component's size) and its end.
#[derive(Debug, Clone, Copy)]
pub enum CompileEvent<'a> {
    Started { name: &'a str, bytes: u64 },
    Finished { name: &'a str, elapsed: Duration },
}

/// What is told of each [`CompileEvent`].
pub type CompileListener = Arc<dyn Fn(CompileEvent<'_>) + Send + Sync>;

/// Where [`CompileEvent`]s go; none by default.
#[derive(Clone, Default)]
pub struct CompileProgress(pub Option<CompileListener>);

impl std::fmt::Debug for CompileProgress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "CompileProgress(told)"
        } else {
            "CompileProgress(none)"
        })
    }
}

/// The process's engine. Cheap to share by reference; create one per process.
pub struct Engine {
    wasm: wasmtime::Engine,
    /// The linkers of the tool and driver worlds and of capsule components, each built when a
    /// component first needs it (a run that loads no capsule component never builds that one).
    tool_linker: LazyLinker,
    driver_linker: LazyLinker,
    capsule_linker: LazyLinker,
    /// Hook linkers, one per set of granted host interfaces, built when first needed.
    hook_linkers:
        std::sync::Mutex<std::collections::HashMap<Vec<HookGrant>, Arc<Linker<HostState>>>>,
    cache: Option<ComponentCache>,
    on_compile: CompileProgress,
    ticker_stop: Arc<AtomicBool>,
}

/// The two worlds whose components export `murmur:tool/run`, which decide what is linked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunWorld {
    /// A tool: may ask for input (`murmur:task/task`) and stream text.
    Tool,
    /// An inference driver: may only stream text (`murmur:text/chunks`).
    Driver,
}

impl RunWorld {
    /// The world of an artifact by its manifest's `runtime`: a driver's, else a tool's.
    pub fn of(runtime: murmur_manifest::artifact::Runtime) -> RunWorld {
        match runtime {
            murmur_manifest::artifact::Runtime::Driver => RunWorld::Driver,
            _ => RunWorld::Tool,
        }
    }

    fn name(self) -> &'static str {
        World::from(self).name()
    }
}

/// The worlds of `wit/worlds.wit` a component is loaded as: what decides its `murmur:*`
/// imports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum World {
    Tool,
    Driver,
    Hook,
    /// A capsule component: `world capsule` and the `runtime-host` interfaces.
    Capsule,
}

impl World {
    const ALL: [World; 4] = [World::Tool, World::Driver, World::Hook, World::Capsule];

    /// The world's name in `wit/worlds.wit`.
    pub fn name(self) -> &'static str {
        match self {
            World::Tool => "tool",
            World::Driver => "driver",
            World::Hook => "hook",
            World::Capsule => "capsule",
        }
    }

    /// What a component of this world is called in an error.
    fn component_kind(self) -> &'static str {
        match self {
            World::Capsule => "capsule component",
            other => other.name(),
        }
    }

    /// The `murmur:*` interfaces (without their version) its linker provides.
    pub fn murmur_imports(self) -> &'static [&'static str] {
        const CHUNKS: &str = "murmur:text/chunks";
        const STREAM_EVENTS: &str = "murmur:stream/events";
        match self {
            World::Tool => &["murmur:task/task", CHUNKS, STREAM_EVENTS],
            World::Driver => &[CHUNKS, STREAM_EVENTS],
            World::Hook => &[
                "murmur:runtime/inference",
                "murmur:runtime/tokens",
                "murmur:task-io/read",
                "murmur:conversation/read",
            ],
            World::Capsule => &[
                "murmur:tool-registry/invoke",
                "murmur:artifact-manager/manage",
                "murmur:shell/execute",
                "murmur:message/send",
            ],
        }
    }

    /// Whether this world's linker provides the interface `import` (a full import name, its
    /// version after `@`).
    fn provides(self, import: &str) -> bool {
        let unversioned = import.split('@').next().unwrap_or(import);
        self.murmur_imports().contains(&unversioned)
    }
}

impl From<RunWorld> for World {
    fn from(world: RunWorld) -> World {
        match world {
            RunWorld::Tool => World::Tool,
            RunWorld::Driver => World::Driver,
        }
    }
}

/// The refusal of a component `name` of `world` that imports `import`, a `murmur:*`
/// interface the world does not provide.
fn world_refusal(name: &str, world: World, import: &str) -> RuntimeError {
    let givers: Vec<&str> = World::ALL
        .into_iter()
        .filter(|other| other.provides(import))
        .map(World::component_kind)
        .collect();
    let given_to = match givers.as_slice() {
        [] => "no Murmur world provides it".to_string(),
        [one] => format!("it is given to {one}s only"),
        many => format!("it is given to {}s only", many.join("s and ")),
    };
    let unversioned = import.split('@').next().unwrap_or(import);
    let advice = if world != World::Capsule && unversioned == "murmur:message/send" {
        "; to delegate, name the peer in `peers:` and the model asks it through `ask-<name>`"
    } else {
        ""
    };
    RuntimeError::WorldImport {
        kind: world.component_kind(),
        component: name.to_string(),
        import: import.to_string(),
        world: world.name(),
        why: format!("{given_to}{advice}"),
    }
}

/// A component compiled and pre-linked, ready to be called any number of times.
pub struct LoadedComponent {
    name: String,
    sha256: String,
    cache_status: CacheStatus,
    pub(crate) pre: ToolPre<HostState>,
}

impl LoadedComponent {
    /// The name calls and errors refer to it by.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The sha256 of the component's bytes, lowercase hex.
    pub fn sha256(&self) -> &str {
        &self.sha256
    }

    /// Whether the compiled form came from the cache.
    pub fn cache_status(&self) -> CacheStatus {
        self.cache_status
    }
}

impl Engine {
    pub fn new(config: EngineConfig) -> Result<Engine, RuntimeError> {
        let mut wasm_config = wasmtime::Config::new();
        wasm_config
            .wasm_component_model(true)
            .epoch_interruption(true)
            .cranelift_opt_level(wasmtime::OptLevel::Speed);
        if config.pooling {
            let mut pool = wasmtime::PoolingAllocationConfig::default();
            pool.total_component_instances(256)
                .total_core_instances(2048)
                .total_memories(512)
                .total_tables(512)
                .total_stacks(256);
            wasm_config.allocation_strategy(wasmtime::InstanceAllocationStrategy::Pooling(pool));
        }
        let wasm = wasmtime::Engine::new(&wasm_config).map_err(|error| RuntimeError::Load {
            component: "<engine>".to_string(),
            reason: error.to_string(),
        })?;
        let limit = config.cache_limit.unwrap_or(cache::DEFAULT_LIMIT_BYTES);
        let cache = config
            .cache_dir
            .map(|dir| ComponentCache::new(dir, &wasm, limit));
        let ticker_stop = Arc::new(AtomicBool::new(false));
        spawn_epoch_ticker(wasm.clone(), ticker_stop.clone()).map_err(|source| {
            RuntimeError::Io {
                context: "starting the epoch ticker thread".to_string(),
                source,
            }
        })?;
        Ok(Engine {
            wasm,
            tool_linker: LazyLinker::new(tool_linker),
            driver_linker: LazyLinker::new(driver_linker),
            capsule_linker: LazyLinker::new(capsule_linker),
            hook_linkers: Default::default(),
            cache,
            on_compile: config.on_compile,
            ticker_stop,
        })
    }

    /// Reads, compiles (or loads from the cache) and pre-links the component at `path` as a
    /// component of `world`. `name` is what later errors call it.
    pub fn load_component(
        &self,
        name: &str,
        path: &Path,
        world: RunWorld,
    ) -> Result<LoadedComponent, RuntimeError> {
        let bytes = read_component(name, path)?;
        self.load_component_bytes(name, &bytes, world)
    }

    /// As [`Engine::load_component`], from bytes already in memory.
    pub fn load_component_bytes(
        &self,
        name: &str,
        bytes: &[u8],
        world: RunWorld,
    ) -> Result<LoadedComponent, RuntimeError> {
        let load_error = |reason: String| RuntimeError::Load {
            component: name.to_string(),
            reason,
        };
        let (component, sha256, cache_status) = self.compile(name, bytes)?;
        self.check_world(name, &component, world.into())?;
        let linker = match world {
            RunWorld::Tool => &self.tool_linker,
            RunWorld::Driver => &self.driver_linker,
        }
        .get(&self.wasm)?;
        let instance_pre = linker.instantiate_pre(&component).map_err(|error| {
            load_error(format!(
                "linking it as a `{}`-world component: {}",
                world.name(),
                error_chain(&error)
            ))
        })?;
        let pre = ToolPre::new(instance_pre).map_err(|error| {
            load_error(format!(
                "it does not export `murmur:tool/run@0.1.0` as the tool and driver worlds \
                 require: {}",
                error_chain(&error)
            ))
        })?;
        Ok(LoadedComponent {
            name: name.to_string(),
            sha256,
            cache_status,
            pre,
        })
    }

    /// Compiles `bytes` (or loads them from the cache): the component, its sha256, and
    /// whether the cache answered.
    pub fn compile(
        &self,
        name: &str,
        bytes: &[u8],
    ) -> Result<(Component, String, CacheStatus), RuntimeError> {
        let load_error = |reason: String| RuntimeError::Load {
            component: name.to_string(),
            reason,
        };
        let sha256 = murmur_registry::sha256_hex(bytes);
        let told = self
            .on_compile
            .0
            .as_ref()
            .filter(|_| self.cache.as_ref().is_none_or(|cache| !cache.has(&sha256)));
        let started = std::time::Instant::now();
        if let Some(tell) = told {
            tell(CompileEvent::Started {
                name,
                bytes: bytes.len() as u64,
            });
        }
        let (component, cache_status) = match &self.cache {
            Some(cache) => cache
                .load(&self.wasm, &sha256, bytes)
                .map_err(|error| load_error(error_chain(&error)))?,
            None => (
                Component::new(&self.wasm, bytes)
                    .map_err(|error| load_error(error_chain(&error)))?,
                CacheStatus::Uncached,
            ),
        };
        if let Some(tell) = told {
            tell(CompileEvent::Finished {
                name,
                elapsed: started.elapsed(),
            });
        }
        Ok((component, sha256, cache_status))
    }

    /// The compile cache, when one is configured.
    pub fn cache(&self) -> Option<&ComponentCache> {
        self.cache.as_ref()
    }

    /// The linker of the `hook` world answering exactly `grants` of its host interfaces: an
    /// interface not granted is linked with functions that refuse every call, naming the grant.
    pub fn hook_linker(&self, grants: &[HookGrant]) -> wasmtime::Result<Arc<Linker<HostState>>> {
        let mut key: Vec<HookGrant> = grants.to_vec();
        key.sort_by_key(|grant| grant.as_str());
        key.dedup();
        let mut linkers = self
            .hook_linkers
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        if let Some(linker) = linkers.get(&key) {
            return Ok(linker.clone());
        }
        let linker = Arc::new(hook_world_linker(&self.wasm, &key)?);
        linkers.insert(key, linker.clone());
        Ok(linker)
    }

    pub(crate) fn capsule_linker(&self) -> Result<&Linker<HostState>, RuntimeError> {
        self.capsule_linker.get(&self.wasm)
    }

    pub(crate) fn wasm(&self) -> &wasmtime::Engine {
        &self.wasm
    }

    /// Refuses `component` (called `name`) when it imports a `murmur:*` interface that
    /// `world` does not provide ([`RuntimeError::WorldImport`], naming the first such import,
    /// the world, and the worlds that provide it). Run before linking, so the refusal names
    /// the import rather than a linker's missing definition.
    pub fn check_world(
        &self,
        name: &str,
        component: &Component,
        world: World,
    ) -> Result<(), RuntimeError> {
        use wasmtime::component::types::ComponentItem;
        let component_type = component.component_type();
        // An interface of types alone (`murmur:conversation/types`, which a provided
        // interface uses) gives nothing to call: only one with functions is held to the world.
        let callable = |item: &ComponentItem| match item {
            ComponentItem::ComponentInstance(instance) => instance
                .exports(&self.wasm)
                .any(|(_, export)| matches!(export.ty, ComponentItem::ComponentFunc(_))),
            _ => true,
        };
        let refused = component_type
            .imports(&self.wasm)
            .find(|(import, item)| {
                import.starts_with("murmur:") && !world.provides(import) && callable(&item.ty)
            })
            .map(|(import, _)| import);
        match refused {
            Some(import) => Err(world_refusal(name, world, import)),
            None => Ok(()),
        }
    }

    /// The names `component` exports, in its order: what a load error lists when the
    /// entry point its world needs is not among them.
    pub fn export_names(&self, component: &Component) -> Vec<String> {
        component
            .component_type()
            .exports(&self.wasm)
            .map(|(name, _)| name.to_string())
            .collect()
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        self.ticker_stop.store(true, Ordering::Relaxed);
    }
}

/// The bytes of the component file at `path`, which errors call `name`: a missing file is
/// [`RuntimeError::ComponentMissing`].
pub fn read_component(name: &str, path: &Path) -> Result<Vec<u8>, RuntimeError> {
    std::fs::read(path).map_err(|error| {
        if error.kind() == std::io::ErrorKind::NotFound {
            RuntimeError::ComponentMissing {
                path: path.to_path_buf(),
            }
        } else {
            RuntimeError::Load {
                component: name.to_string(),
                reason: format!("reading {}: {error}", path.display()),
            }
        }
    })
}

/// A linker built on first use, from the function that builds it.
struct LazyLinker {
    build: fn(&wasmtime::Engine) -> wasmtime::Result<Linker<HostState>>,
    built: std::sync::OnceLock<Linker<HostState>>,
}

impl LazyLinker {
    fn new(build: fn(&wasmtime::Engine) -> wasmtime::Result<Linker<HostState>>) -> LazyLinker {
        LazyLinker {
            build,
            built: std::sync::OnceLock::new(),
        }
    }

    /// The linker, built now if it was not. (Two threads may both build it the first time;
    /// one result is kept.)
    fn get(&self, engine: &wasmtime::Engine) -> Result<&Linker<HostState>, RuntimeError> {
        if let Some(linker) = self.built.get() {
            return Ok(linker);
        }
        let linker = (self.build)(engine).map_err(|error| RuntimeError::Load {
            component: "<linker>".to_string(),
            reason: error_chain(&error),
        })?;
        Ok(self.built.get_or_init(|| linker))
    }
}

/// The WASI every component may hold (each store decides what it grants), and `wasi:http`.
pub(crate) fn wasi_linker(engine: &wasmtime::Engine) -> wasmtime::Result<Linker<HostState>> {
    let mut linker = Linker::new(engine);
    wasmtime_wasi::p2::add_to_linker_async(&mut linker)?;
    wasmtime_wasi_http::p2::add_only_http_to_linker_async(&mut linker)?;
    Ok(linker)
}

/// The linker of the `tool` world: the driver's and `murmur:task/task`. (`murmur:message/send`
/// is `runtime-host`'s, given to capsule components only.)
fn tool_linker(engine: &wasmtime::Engine) -> wasmtime::Result<Linker<HostState>> {
    let mut linker = driver_linker(engine)?;
    add_task(&mut linker)?;
    Ok(linker)
}

/// The linker of the `driver` world: `murmur:text/chunks` only (and the same channel under
/// the name another Murmur runtime gives it, `murmur:stream/events`).
fn driver_linker(engine: &wasmtime::Engine) -> wasmtime::Result<Linker<HostState>> {
    let mut linker = wasi_linker(engine)?;
    crate::bindings::murmur::text::chunks::add_to_linker::<_, HasSelf<Option<ChunkSink>>>(
        &mut linker,
        |state: &mut HostState| &mut state.chunks,
    )?;
    crate::grants::chunks::add_stream_events(&mut linker)?;
    Ok(linker)
}

/// The linker of capsule components: WASI, `murmur:tool-registry/invoke`,
/// `murmur:artifact-manager/manage` and `murmur:message/send`.
fn capsule_linker(engine: &wasmtime::Engine) -> wasmtime::Result<Linker<HostState>> {
    let mut linker = wasi_linker(engine)?;
    crate::bindings::capsule::Capsule::add_to_linker::<_, HasSelf<Option<ToolRegistryGrant>>>(
        &mut linker,
        |state: &mut HostState| &mut state.tool_registry,
    )?;
    crate::bindings::host::murmur::artifact_manager::manage::add_to_linker::<
        _,
        HasSelf<ManagerSlot>,
    >(&mut linker, |state: &mut HostState| &mut state.artifacts)?;
    crate::bindings::host::murmur::shell::execute::add_to_linker::<_, HasSelf<ShellSlot>>(
        &mut linker,
        |state: &mut HostState| &mut state.shell,
    )?;
    add_message(&mut linker)?;
    Ok(linker)
}

/// `murmur:task/task`, answered by the call's input broker.
fn add_task(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
    crate::bindings::murmur::task::task::add_to_linker::<_, HasSelf<TaskInput>>(
        linker,
        |state: &mut HostState| &mut state.input,
    )
}

/// `murmur:message/send` of `runtime-host`, answered by the call's message grant.
fn add_message(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
    crate::bindings::host::murmur::message::send::add_to_linker::<_, HasSelf<MessageGrant>>(
        linker,
        |state: &mut HostState| &mut state.message,
    )
}

/// The linker of hooks granted exactly `grants`.
fn hook_world_linker(
    engine: &wasmtime::Engine,
    grants: &[HookGrant],
) -> wasmtime::Result<Linker<HostState>> {
    let mut linker = wasi_linker(engine)?;
    fn get(state: &mut HostState) -> &mut HookSlot {
        &mut state.hook
    }
    for grant in grants {
        match grant {
            HookGrant::Inference => {
                crate::bindings::hook::murmur::runtime::inference::add_to_linker::<
                    _,
                    HasSelf<HookSlot>,
                >(&mut linker, get)?
            }
            HookGrant::Tokens => crate::bindings::hook::murmur::runtime::tokens::add_to_linker::<
                _,
                HasSelf<HookSlot>,
            >(&mut linker, get)?,
            HookGrant::TaskIo => crate::bindings::hook::murmur::task_io::read::add_to_linker::<
                _,
                HasSelf<HookSlot>,
            >(&mut linker, get)?,
            HookGrant::Conversation => {
                crate::bindings::hook::murmur::conversation::read::add_to_linker::<
                    _,
                    HasSelf<HookSlot>,
                >(&mut linker, get)?
            }
        }
    }
    // An interface not granted is linked all the same, each function refusing when called:
    // toolchains that import every interface of the world (componentize-py, componentize-js)
    // load without the grant, and calling what was not granted still fails, naming the grant.
    for (grant, interface, functions) in [
        (
            HookGrant::Inference,
            "murmur:runtime/inference@0.1.0",
            &["run-inference"][..],
        ),
        (
            HookGrant::Tokens,
            "murmur:runtime/tokens@0.1.0",
            &["count-tokens"][..],
        ),
        (
            HookGrant::TaskIo,
            "murmur:task-io/read@0.1.0",
            &["task-input", "task-result"][..],
        ),
        (
            HookGrant::Conversation,
            "murmur:conversation/read@0.1.0",
            &["history"][..],
        ),
    ] {
        if grants.contains(&grant) {
            continue;
        }
        let mut instance = linker.instance(interface)?;
        for function in functions {
            let refusal = format!(
                "`{interface}` `{function}` is not granted to this hook: list `{}` in its \
                 artifact entry's `grants:`",
                grant.as_str()
            );
            instance.func_new(function, move |_, _, _, _| {
                Err(wasmtime::format_err!("{refusal}"))
            })?;
        }
    }
    Ok(linker)
}

/// Advances the engine's epoch every [`TICK`] until `stop` is set.
fn spawn_epoch_ticker(engine: wasmtime::Engine, stop: Arc<AtomicBool>) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name("murmur-epoch".to_string())
        .spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(TICK);
                engine.increment_epoch();
            }
        })
        .map(drop)
}

/// An error and its causes, one line.
pub fn error_chain(error: &wasmtime::Error) -> String {
    let mut text = String::new();
    for cause in error.chain() {
        let cause_text = cause.to_string();
        if text.contains(&cause_text) {
            continue;
        }
        if !text.is_empty() {
            text.push_str(": ");
        }
        text.push_str(&cause_text);
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use murmur_manifest::Coded;

    /// A component importing each of `imports` (as an instance of one function) and exporting
    /// nothing.
    fn importing(imports: &[&str]) -> Vec<u8> {
        let mut text = String::from("(component\n");
        for import in imports {
            text.push_str(&format!(
                "  (import \"{import}\" (instance (export \"call\" (func))))\n"
            ));
        }
        text.push(')');
        wat::parse_str(text).unwrap()
    }

    #[test]
    fn an_interface_of_types_alone_is_no_import_to_hold_to_the_world() {
        let engine = engine();
        let bytes =
            wat::parse_str("(component (import \"murmur:conversation/types@0.1.0\" (instance)))")
                .unwrap();
        let (component, _, _) = engine.compile("typed", &bytes).unwrap();
        assert!(engine.check_world("typed", &component, World::Hook).is_ok());
        let (component, _, _) = engine
            .compile("caller", &importing(&["murmur:conversation/types@0.1.0"]))
            .unwrap();
        assert!(
            engine
                .check_world("caller", &component, World::Hook)
                .is_err()
        );
    }

    fn engine() -> Engine {
        Engine::new(EngineConfig::default()).unwrap()
    }

    #[test]
    fn a_tool_importing_message_send_is_refused_naming_the_import_and_the_world() {
        let engine = engine();
        let bytes = importing(&["murmur:task/task@0.1.0", "murmur:message/send@0.1.0"]);
        let Err(error) = engine.load_component_bytes("sender", &bytes, RunWorld::Tool) else {
            panic!("a tool importing murmur:message/send loaded");
        };
        assert_eq!(error.code(), "E-RUN-001");
        assert_eq!(
            error.to_string(),
            "tool `sender` imports `murmur:message/send@0.1.0`, which the `tool` world does \
             not provide: it is given to capsule components only; to delegate, name the peer \
             in `peers:` and the model asks it through `ask-<name>`"
        );
        assert!(error.hint().contains("`tool` world"), "{}", error.hint());
    }

    #[test]
    fn each_world_takes_exactly_its_own_murmur_imports() {
        let engine = engine();
        let check = |world: World, import: &str| {
            let bytes = importing(&[import]);
            let (component, _, _) = engine.compile("c", &bytes).unwrap();
            engine
                .check_world("c", &component, world)
                .map_err(|error| error.to_string())
        };
        for world in World::ALL {
            for import in world.murmur_imports() {
                let import = format!("{import}@0.1.0");
                assert_eq!(check(world, &import), Ok(()), "{world:?} {import}");
            }
        }
        // The capsule's interfaces reach no other world; a hook's none but hooks.
        for world in [World::Tool, World::Driver, World::Hook] {
            let refused = check(world, "murmur:message/send@0.1.0").unwrap_err();
            assert!(
                refused.contains("given to capsule components only; to delegate"),
                "{refused}"
            );
        }
        let refused = check(World::Driver, "murmur:task/task@0.1.0").unwrap_err();
        assert!(
            refused.starts_with("driver `c` imports `murmur:task/task@0.1.0`, which the `driver` world does not provide: it is given to tools only"),
            "{refused}"
        );
        let refused = check(World::Tool, "murmur:runtime/inference@0.1.0").unwrap_err();
        assert!(refused.ends_with("it is given to hooks only"), "{refused}");
        let refused = check(World::Capsule, "murmur:text/chunks@0.1.0").unwrap_err();
        assert!(
            refused.starts_with("capsule component `c` imports `murmur:text/chunks@0.1.0`")
                && refused.ends_with("given to tools and drivers only"),
            "{refused}"
        );
        let refused = check(World::Tool, "murmur:nowhere/at-all@0.1.0").unwrap_err();
        assert!(
            refused.ends_with("no Murmur world provides it"),
            "{refused}"
        );
        // A WASI import is every world's.
        assert_eq!(check(World::Hook, "wasi:cli/environment@0.2.6"), Ok(()));
    }
}
