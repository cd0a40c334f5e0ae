//! The venv of the official MCP Python SDK that `scripts/python-env mcp` makes under
//! `target/`, for tests that run `tests/python/mcp/notes_server.py`, and a port to serve it on.

use std::path::PathBuf;

use crate::repo_root;

/// The venv's Python and what a confined run of it needs.
pub struct McpPython {
    pub python: PathBuf,
    /// Its `site-packages`. Run by its canonical path (as every confined child is), the
    /// interpreter no longer finds its venv by itself: give it this as `PYTHONPATH`.
    pub site_packages: String,
    /// What it reads to start: the venv, its base prefix, the servers' folder.
    pub reads: Vec<PathBuf>,
    /// The notes server's script.
    pub notes_server: PathBuf,
}

/// The venv, asked where its parts are. Panics, saying how to make it, when it is missing.
pub fn mcp_python() -> McpPython {
    let venv = repo_root().join("target/mcp-python-venv");
    let python = venv.join("bin/python");
    assert!(
        python.exists() && venv.join(".requirements.sha256").exists(),
        "{} is missing: run `scripts/python-env mcp` and run this test again",
        venv.display()
    );
    let ask = |code: &str| {
        let output = std::process::Command::new(&python)
            .args(["-c", code])
            .output()
            .expect("the venv's Python runs");
        String::from_utf8_lossy(&output.stdout).trim().to_string()
    };
    let site_packages = ask("import sysconfig; print(sysconfig.get_paths()['purelib'])");
    let base = PathBuf::from(ask("import sys; print(sys.base_prefix)"));
    let servers = repo_root()
        .join("tests/python/mcp")
        .canonicalize()
        .expect("tests/python/mcp");
    McpPython {
        reads: vec![
            venv.canonicalize().expect("the venv"),
            base,
            servers.clone(),
        ],
        notes_server: servers.join("notes_server.py"),
        python,
        site_packages,
    }
}

/// A loopback port free when asked (for a test server to listen on).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|addr| addr.port())
        .expect("a free loopback port")
}
