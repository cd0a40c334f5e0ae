//! A real OCI registry on loopback for tests: the distribution project's `docker-registry`
//! (installed by `scripts/setup --tests`), started on a free port with its storage in a temporary
//! directory, optionally asking for a user name and password, and stopped when dropped. Its
//! storage can be tampered with and its tags moved behind its back, as a hostile registry would.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The program that serves the registry.
pub const PROGRAM: &str = "docker-registry";

/// A running registry; stopped when dropped.
pub struct OciRegistry {
    child: Child,
    port: u16,
    storage: tempfile::TempDir,
    user: Option<(String, String)>,
    log: PathBuf,
}

impl OciRegistry {
    /// Starts a registry anyone may read and write.
    pub fn start() -> OciRegistry {
        OciRegistry::launch(None)
    }

    /// Starts a registry that answers only `user` with `password` (HTTP basic, htpasswd).
    pub fn start_with_user(user: &str, password: &str) -> OciRegistry {
        OciRegistry::launch(Some((user.to_string(), password.to_string())))
    }

    fn launch(user: Option<(String, String)>) -> OciRegistry {
        let storage = tempfile::tempdir().expect("a storage directory");
        let port = crate::free_port();
        let mut config = format!(
            "version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\nhttp:\n  addr: 127.0.0.1:{port}\n",
            storage.path().join("data").display()
        );
        if let Some((name, password)) = &user {
            let hash = bcrypt::hash(password, 4).expect("a bcrypt hash");
            let htpasswd = storage.path().join("htpasswd");
            std::fs::write(&htpasswd, format!("{name}:{hash}\n")).expect("htpasswd");
            config.push_str(&format!(
                "auth:\n  htpasswd:\n    realm: murmur-tests\n    path: {}\n",
                htpasswd.display()
            ));
        }
        let config_file = storage.path().join("config.yml");
        std::fs::write(&config_file, config).expect("the registry's config");
        let log = storage.path().join("registry.log");
        let child = Command::new(PROGRAM)
            .arg("serve")
            .arg(&config_file)
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&log).expect("the log"))
            .stderr(std::fs::File::create(storage.path().join("registry.err")).expect("the log"))
            .spawn()
            .unwrap_or_else(|e| {
                panic!("`{PROGRAM}` cannot be started ({e}); `scripts/setup --tests` installs it")
            });
        let registry = OciRegistry {
            child,
            port,
            storage,
            user,
            log,
        };
        registry.wait_until_ready();
        registry
    }

    fn wait_until_ready(&self) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if let Ok(response) = self.client().get(self.url("/v2/")).send() {
                // 200, or 401 when it asks for credentials: either way it is serving.
                if response.status().as_u16() == 200 || response.status().as_u16() == 401 {
                    return;
                }
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let mut err = String::new();
        let _ = std::fs::File::open(self.storage.path().join("registry.err"))
            .and_then(|mut f| f.read_to_string(&mut err));
        panic!("the registry did not start on port {}: {err}", self.port);
    }

    /// `127.0.0.1:PORT`.
    pub fn host(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// `oci://127.0.0.1:PORT/NAMESPACE`.
    pub fn oci(&self, namespace: &str) -> String {
        format!("oci://{}/{namespace}", self.host())
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.host())
    }

    fn client(&self) -> reqwest::blocking::Client {
        let _ = rustls::crypto::ring::default_provider().install_default();
        reqwest::blocking::Client::builder()
            .no_proxy()
            .timeout(Duration::from_secs(10))
            .build()
            .expect("an HTTP client")
    }

    fn authed(
        &self,
        request: reqwest::blocking::RequestBuilder,
    ) -> reqwest::blocking::RequestBuilder {
        match &self.user {
            Some((name, password)) => request.basic_auth(name, Some(password)),
            None => request,
        }
    }

    /// The manifest tagged `tag` in `repository` (its bytes), as the registry serves it.
    pub fn manifest(&self, repository: &str, tag: &str) -> Vec<u8> {
        let response = self
            .authed(
                self.client()
                    .get(self.url(&format!("/v2/{repository}/manifests/{tag}")))
                    .header("Accept", "application/vnd.oci.image.manifest.v1+json"),
            )
            .send()
            .expect("the manifest");
        assert!(response.status().is_success(), "{response:?}");
        response.bytes().expect("the manifest's bytes").to_vec()
    }

    /// The blob `digest` (`sha256:…`) of `repository`.
    pub fn blob(&self, repository: &str, digest: &str) -> Vec<u8> {
        let response = self
            .authed(
                self.client()
                    .get(self.url(&format!("/v2/{repository}/blobs/{digest}"))),
            )
            .send()
            .expect("the blob");
        assert!(response.status().is_success(), "{response:?}");
        response.bytes().expect("the blob's bytes").to_vec()
    }

    /// Puts `manifest` under `tag` in `repository` (its blobs must be there): moves the tag.
    pub fn put_manifest(&self, repository: &str, tag: &str, manifest: &[u8]) {
        let response = self
            .authed(
                self.client()
                    .put(self.url(&format!("/v2/{repository}/manifests/{tag}")))
                    .header("Content-Type", "application/vnd.oci.image.manifest.v1+json")
                    .body(manifest.to_vec()),
            )
            .send()
            .expect("the manifest put");
        assert!(response.status().is_success(), "{response:?}");
    }

    /// The file holding blob `digest` in the registry's storage: writing it changes what the
    /// registry serves without changing what its manifests say.
    pub fn blob_file(&self, digest: &str) -> PathBuf {
        let hex = digest.strip_prefix("sha256:").expect("a sha256 digest");
        self.storage
            .path()
            .join("data/docker/registry/v2/blobs/sha256")
            .join(&hex[..2])
            .join(hex)
            .join("data")
    }

    /// The registry's own log, for failure messages.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Where the registry keeps everything.
    pub fn storage(&self) -> &Path {
        self.storage.path()
    }
}

impl Drop for OciRegistry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
