//! What the tool benches share: a current-thread runtime beside a pooling engine with no
//! compile cache (so a run measures the calls, not the cache), and a component of this
//! repository built from source when stale and loaded as a tool.

use std::path::Path;

use murmur_registry::source::{LocalArtifact, ensure_components};
use murmur_runtime::{Engine, EngineConfig, LoadedComponent, RunWorld};

/// A current-thread runtime and an engine with pooling and no compile cache.
pub fn runtime_and_engine() -> (tokio::runtime::Runtime, Engine) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let engine = Engine::new(EngineConfig {
        cache_dir: None,
        pooling: true,
        ..EngineConfig::default()
    })
    .unwrap();
    (runtime, engine)
}

/// The tool at `relative` (from the repository's root), built when stale, loaded.
pub fn load_tool(engine: &Engine, relative: &str) -> LoadedComponent {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(relative);
    let artifact = LocalArtifact::open(&dir, &|_| None).expect("artifact manifest");
    ensure_components(&[&artifact]).expect("building the component");
    engine
        .load_component(
            &artifact.manifest.name,
            &artifact.component_path(),
            RunWorld::Tool,
        )
        .expect("loading the component")
}
