//! Host bindings generated from `wit/`, the one source of truth for the contract.

wasmtime::component::bindgen!({
    path: "../../wit",
    world: "murmur:worlds/tool",
    imports: { default: async | trappable },
    exports: { default: async },
});

pub(crate) use exports::murmur::tool::run::{Status, ToolInput, ToolResult};
