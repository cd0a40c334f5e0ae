//! Host bindings generated from `wit/`, the one source of truth for the contract.

wasmtime::component::bindgen!({
    path: "../../wit",
    world: "murmur:worlds/tool",
    imports: { default: async | trappable },
    exports: { default: async },
    // The world's WASI imports are Wasmtime's own, linked once for every component.
    with: {
        "wasi": wasmtime_wasi::p2::bindings,
        "wasi:http": wasmtime_wasi_http::p2::bindings::http,
    },
});

pub(crate) use exports::murmur::tool::run::{Status, ToolInput, ToolResult};

/// The `hook` world: lifecycle handlers exported by hooks, and the host interfaces a capsule
/// may grant them. Handlers are looked up one by one (two are optional), so only the types and
/// the import traits are used from here.
pub mod hook {
    wasmtime::component::bindgen!({
        path: "../../wit",
        world: "murmur:worlds/hook",
        imports: { default: async | trappable },
        exports: { default: async },
        with: {
            "wasi": wasmtime_wasi::p2::bindings,
            "wasi:http": wasmtime_wasi_http::p2::bindings::http,
        },
    });
}

/// The `runtime-host` world: what the runtime provides to components beyond their own world.
/// `murmur:message/send` is linked into the tool linker (see [`crate::grants::message`]);
/// `murmur:artifact-manager/manage`, `murmur:shell/execute` and `murmur:message/send` into the
/// capsule linker (see [`crate::grants::artifacts`], [`crate::grants::shell`]). Its
/// `murmur:tool-registry/invoke` is the `capsule` world's (below).
pub mod host {
    wasmtime::component::bindgen!({
        path: "../../wit",
        world: "murmur:worlds/runtime-host",
        imports: { default: async | trappable },
    });
}

/// The `capsule` world: `murmur:capsule/run` exported by capsule components, and the
/// `murmur:tool-registry/invoke` they import (see [`crate::grants::tool_registry`]).
pub mod capsule {
    wasmtime::component::bindgen!({
        path: "../../wit",
        world: "murmur:worlds/capsule",
        imports: { default: async | trappable },
        exports: { default: async },
    });
}
