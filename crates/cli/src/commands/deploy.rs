//! `mur deploy kubernetes [DIR] --image IMAGE [--capsule-ref REF] [--port N] [--namespace NS]
//! [--out FILE] [--json]`: the Kubernetes objects that serve a capsule on a cluster.
//!
//! What it promises (each object is the API's own shape, so `kubectl apply -f` takes it):
//!
//! - **A Deployment** whose one container runs `mur run /capsule --serve` on the door's port,
//!   with the capsule either baked into the image at `/capsule` (the default) or pulled at
//!   start by two init containers, `mur pull REF@sha256:…` then `mur install --locked` from the
//!   one OCI registry the lock pins its artifacts in (`--capsule-ref`, which must name a
//!   digest: what runs is exactly what was pushed).
//! - **Credentials are references, never values.** Every credential the capsule names (a
//!   driver's key, a door principal's, a peer's, an MCP server header's) is an environment
//!   variable from the Secret `<name>-credentials` by key; `control.secrets` names are optional
//!   there (a controller may inject them). The other `${NAME}`s the manifest reads (an
//!   endpoint, a model) are configuration: rendered, with the values they have where `mur
//!   deploy` runs, into the ConfigMap `<name>-env`.
//! - **Probes on the agent card** (`/.well-known/agent-card.json`): a startup probe that
//!   waits out the first compile, readiness and liveness.
//! - **Limits from the manifest**: memory is the runtime's own 128 MiB plus
//!   `capabilities.limits.memory_bytes` (default 64 MiB) for each component that may be
//!   instantiated at once (the driver, one tool, each hook); `deadline_seconds` bounds the
//!   grace period a stopping pod gets.
//! - **A restricted security context**: non-root (65532), read-only root filesystem,
//!   no privilege escalation, every capability dropped, the runtime's default seccomp
//!   profile, no service-account token; writable only its emptyDir volumes (`/work` the
//!   workdirs, `/murmur-home` the compile cache, `/tmp`, and `/capsule` when pulled).
//! - **A Service** named after the capsule, port 80 to the door: capsules that delegate to
//!   each other reach each other by Service name (`peers: [{ url: "http://<name>" }]`).
//! - **A NetworkPolicy** letting in only the door's port and letting out only DNS and what
//!   the capsule may reach: each `network.allow` entry and driver gateway on its ports (an IP
//!   as itself; an in-cluster Service name, `NAME` or `NAME.NS.svc…`, as that capsule's pods
//!   on the door's port; any other host name, which the API cannot name, as public addresses
//!   on those ports, the hosts listed in the `murmur.dev/egress-hosts` annotation and enforced
//!   by the runtime itself), and the registry a pulled capsule comes from.
//! - **Refusals before anything is written**: no `door.auth` (a door beyond loopback must ask
//!   for credentials), a capsule component or a capsule without inference, or a name that is
//!   no DNS label is `E-DEP-001`; a `--capsule-ref` not by digest, or registry artifacts not
//!   locked from one OCI registry, `E-DEP-002`; an output that cannot be written `E-DEP-003`;
//!   no `--image` (there is no published image of `mur` to default to) `E-DEP-005`.
//!   What the image must supply (a harness CLI under `transport: process`, the binaries a
//!   shell grant runs, read-only paths) is `W-DEP-004` on stderr.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use murmur_manifest::network::EgressHost;
use murmur_manifest::{CapsuleManifest, Diagnostic, NetworkRule, Runtime};
use serde_json::{Value, json};

use crate::environment::{capsule_paths, host_env};
use crate::exit::Exit;
use crate::render;

/// The door's port inside the pod, unless `--port` or the manifest's `door.port` says otherwise.
const DEFAULT_PORT: u16 = 8080;
/// The user and group the container runs as.
const RUN_AS: u64 = 65532;
/// The memory the runtime itself is given, beside its components'.
const RUNTIME_MEMORY: u64 = 128 << 20;
/// A component's memory when the manifest sets no `memory_bytes`.
const DEFAULT_COMPONENT_MEMORY: u64 = 64 << 20;

#[derive(clap::Subcommand)]
pub enum DeployCommand {
    /// Render the Kubernetes objects that serve a capsule: Deployment, Service, NetworkPolicy
    /// (and a ConfigMap of its settings).
    Kubernetes(KubernetesArgs),
}

#[derive(clap::Args)]
pub struct KubernetesArgs {
    /// The capsule (a directory holding `murmur.yaml`, or the file). Default: the current
    /// directory.
    dir: Option<PathBuf>,
    /// The image holding `mur` (and, unless --capsule-ref, the capsule at /capsule with its
    /// artifacts installed): one you built and pushed (docs/deploy.md). Required: no image of
    /// `mur` is published for you.
    #[arg(long)]
    image: Option<String>,
    /// Pull the capsule at start from this pushed image, by digest:
    /// `oci://HOST/REPOSITORY@sha256:…` (what `mur push` prints).
    #[arg(long, value_name = "REF")]
    capsule_ref: Option<String>,
    /// The door's port in the pod (default: the manifest's `door.port`, else 8080).
    #[arg(long)]
    port: Option<u16>,
    /// The namespace the objects go in (else kubectl's current one).
    #[arg(long)]
    namespace: Option<String>,
    /// Write the objects here instead of stdout.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Print a Kubernetes `List` in JSON instead of YAML documents.
    #[arg(long)]
    json: bool,
}

pub fn run(command: DeployCommand) -> Exit {
    match command {
        DeployCommand::Kubernetes(args) => kubernetes(args),
    }
}

/// What the objects are rendered from.
struct Plan {
    name: String,
    version: String,
    namespace: Option<String>,
    image: String,
    port: u16,
    /// `(credential, optional)`.
    credentials: Vec<(String, bool)>,
    /// Configuration variables with their values here.
    config: BTreeMap<String, String>,
    /// Pulled at start: the reference by digest and the registry to install from.
    pulled: Option<Pulled>,
    memory: u64,
    grace_seconds: u64,
    egress: Egress,
    manifest_sha256: String,
}

struct Pulled {
    reference: String,
    /// The OCI registry the lock pins the registry artifacts in, when there are any.
    registry: Option<String>,
}

fn kubernetes(args: KubernetesArgs) -> Exit {
    let (file, capsule_dir) = capsule_paths(args.dir.as_deref());
    // The names the manifest reads at load are recorded: the pod must be given each.
    let asked: Mutex<BTreeSet<String>> = Mutex::new(BTreeSet::new());
    let recording = |name: &str| {
        if let Ok(mut asked) = asked.lock() {
            asked.insert(name.to_string());
        }
        host_env(name)
    };
    let source = murmur_manifest::CapsuleSource::read(&file, &recording);
    let (Some(text), Some(manifest)) = (source.text.as_deref(), source.loaded.manifest.as_ref())
    else {
        return diagnostics_exit(args.json, &source.loaded.diagnostics);
    };
    if source.loaded.diagnostics.iter().any(Diagnostic::is_error) {
        return diagnostics_exit(args.json, &source.loaded.diagnostics);
    }
    let asked = asked.into_inner().unwrap_or_default();
    let plan = match plan(&args, &file, &capsule_dir, text, manifest, asked) {
        Ok((plan, warnings)) => {
            render::diagnostics_human(&warnings);
            plan
        }
        Err(refusal) => {
            return render::failure(args.json, refusal.0, &refusal.1, &refusal.2, Exit::Failed);
        }
    };
    let objects = objects(&plan, manifest);
    let output = if args.json {
        let list = json!({"apiVersion": "v1", "kind": "List", "items": objects});
        format!("{list:#}\n")
    } else {
        objects.iter().map(yaml_document).collect::<String>()
    };
    match &args.out {
        None => {
            print!("{output}");
            Exit::Ok
        }
        Some(path) => match write_atomically(path, &output) {
            Ok(()) => {
                if !args.json {
                    eprintln!(
                        "wrote {} objects for `{}` to {}",
                        objects.len(),
                        plan.name,
                        path.display()
                    );
                }
                Exit::Ok
            }
            Err(error) => render::failure(
                args.json,
                "E-DEP-003",
                &format!("{} cannot be written: {error}", path.display()),
                "check the directory exists and is writable",
                Exit::Failed,
            ),
        },
    }
}

fn diagnostics_exit(json: bool, diagnostics: &[Diagnostic]) -> Exit {
    if json {
        println!("{}", render::json(&json!({ "diagnostics": diagnostics })));
    } else {
        render::diagnostics_human(diagnostics);
    }
    Exit::BadInput
}

/// A refusal: code, message, hint.
type Refusal = (&'static str, String, String);

fn refuse(code: &'static str, message: impl Into<String>, hint: impl Into<String>) -> Refusal {
    (code, message.into(), hint.into())
}

/// What the objects are made from, with the warnings of what the image must supply.
fn plan(
    args: &KubernetesArgs,
    file: &Path,
    capsule_dir: &Path,
    text: &str,
    manifest: &CapsuleManifest,
    asked: BTreeSet<String>,
) -> Result<(Plan, Vec<Diagnostic>), Refusal> {
    let image = args
        .image
        .clone()
        .filter(|image| !image.trim().is_empty())
        .ok_or_else(|| {
            refuse(
                "E-DEP-005",
                "no image to run: `--image` is required, since no image of `mur` is published"
                    .to_string(),
                "build the image from the repository's Containerfile, push it, and pass it: \
             `--image registry.example.com/murmur/mur:VERSION` (docs/deploy.md)",
            )
        })?;
    let name = dns_label(&manifest.name).ok_or_else(|| {
        refuse(
            "E-DEP-001",
            format!(
                "the capsule's name `{}` cannot name Kubernetes objects",
                manifest.name
            ),
            "name the capsule with lowercase letters, digits and `-` (at most 63, a letter first)",
        )
    })?;
    let Some(inference) = &manifest.inference else {
        return Err(refuse(
            "E-DEP-001",
            "the capsule has no `inference:`: only an agent capsule is served (a capsule component runs once)",
            "give the capsule an `inference:` block",
        ));
    };
    if manifest.door.auth.is_empty() {
        return Err(refuse(
            "E-DEP-001",
            "the capsule has no `door.auth`: on a cluster its door would answer anyone who reaches it",
            "add `door: { auth: [ { principal: NAME, bearer: \"${TOKEN}\" } ] }`; the token comes from the Secret",
        ));
    }
    if let Some(namespace) = &args.namespace
        && dns_label(namespace).as_deref() != Some(namespace.as_str())
    {
        return Err(refuse(
            "E-DEP-001",
            format!("`{namespace}` is not a namespace name"),
            "a namespace is lowercase letters, digits and `-`, at most 63",
        ));
    }

    let credentials = manifest.credential_names();
    let secret: BTreeSet<&str> = credentials.iter().map(|(n, _)| n.as_str()).collect();
    let mut config = BTreeMap::new();
    for variable in asked.iter().filter(|n| !secret.contains(n.as_str())) {
        if let Some(value) = murmur_manifest::variable(variable, file, &host_env) {
            config.insert(variable.clone(), value);
        }
    }

    let mut warnings = Vec::new();
    let warn = |message: String, hint: &str| {
        Diagnostic::new(murmur_manifest::diagnostic::code::W_DEP_004, message)
            .hint(hint.to_string())
    };
    if inference.transport == murmur_manifest::capsule::Transport::Process {
        warnings.push(warn(
            "the capsule's model is a harness CLI (`transport: process`): the image must hold it"
                .into(),
            "build an image FROM the mur image that installs the CLI `inference.command` runs",
        ));
    }
    if !manifest.capabilities.shell.allow.is_empty() {
        warnings.push(warn(
            format!(
                "the capsule's shell grant runs {}: the image must hold them",
                manifest.capabilities.shell.allow.join(", ")
            ),
            "use an image FROM the mur image that installs those binaries",
        ));
    }
    if !manifest.capabilities.filesystem.read_only.is_empty() {
        warnings.push(warn(
            "the capsule reads `filesystem.read_only` paths: the image must hold them, or a volume mount them".into(),
            "mount them at the same paths",
        ));
    }

    let pulled = match &args.capsule_ref {
        None => None,
        Some(reference) => Some(pulled(reference, capsule_dir, manifest)?),
    };

    let hooks = manifest
        .artifacts
        .iter()
        .filter(|a| a.runtime == Runtime::Hook)
        .count() as u64;
    let limits = &manifest.capabilities.limits;
    let component = limits.memory_bytes.unwrap_or(DEFAULT_COMPONENT_MEMORY);
    let memory = RUNTIME_MEMORY + component.saturating_mul(2 + hooks);
    let grace_seconds = limits.deadline_seconds.unwrap_or(30).clamp(10, 300);

    let mut egress = Egress::default();
    for rule in &manifest.capabilities.network.allow {
        egress.add(rule);
    }
    for entry in &manifest.artifacts {
        if let Some(gateway) = &entry.gateway
            && let Some(rule) = origin_rule(&gateway.endpoint)
        {
            egress.add(&rule);
        }
    }
    if let Some(pulled) = &pulled {
        for reference in std::iter::once(&pulled.reference).chain(pulled.registry.iter()) {
            let host = reference
                .strip_prefix("oci://")
                .and_then(|rest| rest.split('/').next())
                .unwrap_or_default();
            let url = if host.contains(':') {
                format!("https://{host}")
            } else {
                format!("https://{host}:443")
            };
            if let Some(rule) = origin_rule(&url) {
                egress.add(&rule);
            }
        }
    }

    Ok((
        Plan {
            name,
            version: manifest.version.clone(),
            namespace: args.namespace.clone(),
            image,
            port: args.port.or(manifest.door.port).unwrap_or(DEFAULT_PORT),
            credentials,
            config,
            pulled,
            memory,
            grace_seconds,
            egress,
            manifest_sha256: murmur_registry::sha256_hex(text.as_bytes()),
        },
        warnings,
    ))
}

/// The capsule pulled at start from `reference`: by digest, and its registry artifacts locked
/// from one OCI registry.
fn pulled(
    reference: &str,
    capsule_dir: &Path,
    manifest: &CapsuleManifest,
) -> Result<Pulled, Refusal> {
    let parsed =
        murmur_registry::oci::capsule::CapsuleReference::parse(reference).map_err(|e| {
            refuse(
                "E-DEP-002",
                e.to_string(),
                "give oci://HOST/REPOSITORY@sha256:DIGEST",
            )
        })?;
    if !parsed.has_digest() {
        return Err(refuse(
            "E-DEP-002",
            format!("`{reference}` names a tag, which may move: a deployment pulls by digest"),
            "give the reference `mur push` printed, oci://HOST/REPOSITORY@sha256:DIGEST",
        ));
    }
    let from_registry: Vec<&str> = manifest
        .artifacts
        .iter()
        .filter(|a| a.path.is_none() && a.runtime != Runtime::Mcp)
        .map(|a| a.name.as_str())
        .collect();
    if from_registry.is_empty() {
        return Ok(Pulled {
            reference: reference.to_string(),
            registry: None,
        });
    }
    let lock = murmur_registry::install::read_lock(capsule_dir).map_err(|e| {
        refuse(
            "E-DEP-002",
            format!("murmur.lock cannot be read: {e}"),
            "run `mur install`",
        )
    })?;
    let mut sources = BTreeSet::new();
    for name in &from_registry {
        let Some(locked) = lock.get(name) else {
            return Err(refuse(
                "E-DEP-002",
                format!(
                    "artifact `{name}` is not in murmur.lock: a pulled capsule installs only what its lock pins"
                ),
                "run `mur install --registry oci://HOST/NAMESPACE`, then `mur push` again",
            ));
        };
        sources.insert(locked.source.as_str());
    }
    let sources: Vec<&str> = sources.into_iter().collect();
    match sources.as_slice() {
        [one] if one.starts_with("oci://") => Ok(Pulled {
            reference: reference.to_string(),
            registry: Some(one.to_string()),
        }),
        _ => Err(refuse(
            "E-DEP-002",
            format!(
                "murmur.lock pins the registry artifacts from {}: a pod installs from one OCI registry",
                sources.join(", ")
            ),
            "publish them to an OCI registry (`mur publish --registry oci://HOST/NAMESPACE`), run `mur install` from it, and push again",
        )),
    }
}

/// `text` as a DNS label: lowercase, every other character `-`, trimmed; none when nothing
/// is left or it does not begin with a letter.
fn dns_label(text: &str) -> Option<String> {
    let mut label: String = text
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    label.truncate(63);
    let label = label.trim_matches('-').to_string();
    label
        .starts_with(|c: char| c.is_ascii_lowercase())
        .then_some(label)
}

/// The allowlist entry of a URL's origin (`https://host:port`).
fn origin_rule(url: &str) -> Option<NetworkRule> {
    let parsed = url::Url::parse(url).ok()?;
    let host = parsed.host_str()?;
    let port = parsed.port_or_known_default()?;
    NetworkRule::parse(&format!("{host}:{port}")).ok()
}

/// Where the pod may connect, by kind of destination.
#[derive(Default)]
struct Egress {
    /// IP address → ports.
    addresses: BTreeMap<IpAddr, BTreeSet<u16>>,
    /// In-cluster capsule Services: (name, namespace) → reached on the door's port.
    services: BTreeSet<(String, Option<String>)>,
    /// Host names the API cannot name → ports; the hosts themselves for the annotation.
    public_ports: BTreeSet<u16>,
    public_hosts: BTreeSet<String>,
}

impl Egress {
    fn add(&mut self, rule: &NetworkRule) {
        match rule.host() {
            EgressHost::Ip(ip) => {
                self.addresses.entry(ip).or_default().extend(rule.ports());
            }
            EgressHost::Name(name) => match in_cluster(&name) {
                Some(service) => {
                    self.services.insert(service);
                }
                None => {
                    self.public_ports.extend(rule.ports());
                    self.public_hosts.insert(rule.as_str().to_string());
                }
            },
            EgressHost::Subdomains(_) => {
                self.public_ports.extend(rule.ports());
                self.public_hosts.insert(rule.as_str().to_string());
            }
        }
    }
}

/// `(service, namespace)` when `host` names a Service in the cluster: a single label, or
/// `NAME.NAMESPACE.svc[.cluster.local]`.
fn in_cluster(host: &str) -> Option<(String, Option<String>)> {
    let labels: Vec<&str> = host.split('.').collect();
    match labels.as_slice() {
        [name] if *name != "localhost" => Some((name.to_string(), None)),
        [name, namespace, "svc"] | [name, namespace, "svc", "cluster", "local"] => {
            Some((name.to_string(), Some(namespace.to_string())))
        }
        _ => None,
    }
}

/// Every object, in the order `kubectl apply` wants them.
fn objects(plan: &Plan, manifest: &CapsuleManifest) -> Vec<Value> {
    let mut objects = Vec::new();
    if !plan.config.is_empty() {
        objects.push(json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": metadata(plan, &format!("{}-env", plan.name)),
            "data": plan.config,
        }));
    }
    objects.push(deployment(plan, manifest));
    objects.push(json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": metadata(plan, &plan.name),
        "spec": {
            "selector": selector(plan),
            "ports": [{"name": "a2a", "port": 80, "targetPort": "a2a", "protocol": "TCP"}],
        },
    }));
    objects.push(network_policy(plan));
    objects
}

fn labels(plan: &Plan) -> Value {
    let version: String = plan
        .version
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(63)
        .collect();
    json!({
        "app.kubernetes.io/name": plan.name,
        "app.kubernetes.io/version": version,
        "app.kubernetes.io/part-of": "murmur",
        "app.kubernetes.io/managed-by": "mur",
    })
}

fn selector(plan: &Plan) -> Value {
    json!({"app.kubernetes.io/name": plan.name})
}

fn metadata(plan: &Plan, name: &str) -> Value {
    let mut metadata = json!({"name": name, "labels": labels(plan)});
    if let Some(namespace) = &plan.namespace {
        metadata["namespace"] = json!(namespace);
    }
    metadata
}

fn container_security() -> Value {
    json!({
        "runAsNonRoot": true,
        "runAsUser": RUN_AS,
        "runAsGroup": RUN_AS,
        "allowPrivilegeEscalation": false,
        "readOnlyRootFilesystem": true,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    })
}

fn deployment(plan: &Plan, manifest: &CapsuleManifest) -> Value {
    let secret = format!("{}-credentials", plan.name);
    let mut env = vec![
        json!({"name": "MURMUR_HOME", "value": "/murmur-home"}),
        json!({"name": "HOME", "value": "/tmp"}),
    ];
    for (credential, optional) in &plan.credentials {
        let mut reference = json!({"name": secret, "key": credential});
        if *optional {
            reference["optional"] = json!(true);
        }
        env.push(json!({"name": credential, "valueFrom": {"secretKeyRef": reference}}));
    }
    let mut mounts = vec![
        json!({"name": "work", "mountPath": "/work"}),
        json!({"name": "murmur-home", "mountPath": "/murmur-home"}),
        json!({"name": "tmp", "mountPath": "/tmp"}),
    ];
    let mut volumes = vec![
        json!({"name": "work", "emptyDir": {"sizeLimit": "1Gi"}}),
        json!({"name": "murmur-home", "emptyDir": {"sizeLimit": "1Gi"}}),
        json!({"name": "tmp", "emptyDir": {"sizeLimit": "256Mi"}}),
    ];
    let mut init = Vec::new();
    if let Some(pulled) = &plan.pulled {
        volumes.push(json!({"name": "capsule", "emptyDir": {"sizeLimit": "512Mi"}}));
        let init_mounts = json!([
            {"name": "capsule", "mountPath": "/capsule"},
            {"name": "murmur-home", "mountPath": "/murmur-home"},
            {"name": "tmp", "mountPath": "/tmp"},
        ]);
        let registry_secret = format!("{}-registry", plan.name);
        // The registry credentials are bound to the hosts the pod pulls from, and to no other.
        let mut hosts: Vec<&str> = std::iter::once(&pulled.reference)
            .chain(pulled.registry.iter())
            .filter_map(|r| r.strip_prefix("oci://")?.split('/').next())
            .collect();
        hosts.dedup();
        let registry_env: Vec<Value> = [
            json!({"name": "MURMUR_HOME", "value": "/murmur-home"}),
            json!({"name": "HOME", "value": "/tmp"}),
            json!({"name": "MURMUR_REGISTRY_HOSTS", "value": hosts.join(",")}),
        ]
        .into_iter()
        .chain(
            ["MURMUR_REGISTRY_USERNAME", "MURMUR_REGISTRY_PASSWORD"].map(|key| {
                json!({"name": key, "valueFrom": {"secretKeyRef": {
                    "name": registry_secret, "key": key, "optional": true}}})
            }),
        )
        .collect();
        let step = |name: &str, args: Vec<String>| {
            json!({
                "name": name,
                "image": plan.image,
                "args": args,
                "env": registry_env,
                "volumeMounts": init_mounts,
                "securityContext": container_security(),
                "resources": {
                    "requests": {"cpu": "100m", "memory": "128Mi"},
                    "limits": {"memory": "256Mi"},
                },
            })
        };
        init.push(step(
            "pull",
            vec!["pull".into(), pulled.reference.clone(), "/capsule".into()],
        ));
        if let Some(registry) = &pulled.registry {
            init.push(step(
                "install",
                vec![
                    "install".into(),
                    "--locked".into(),
                    "--registry".into(),
                    registry.clone(),
                    "/capsule".into(),
                ],
            ));
        }
        mounts.push(json!({"name": "capsule", "mountPath": "/capsule", "readOnly": true}));
    }
    let probe = |period: u64, failures: u64| {
        json!({
            "httpGet": {"path": "/.well-known/agent-card.json", "port": "a2a"},
            "periodSeconds": period,
            "timeoutSeconds": 5,
            "failureThreshold": failures,
        })
    };
    let mut container = json!({
        "name": "capsule",
        "image": plan.image,
        "args": [
            "run", "/capsule", "--serve", "--host", "0.0.0.0",
            "--port", plan.port.to_string(), "--workdir", "/work", "--insecure-no-tls",
        ],
        "ports": [{"name": "a2a", "containerPort": plan.port, "protocol": "TCP"}],
        "env": env,
        "startupProbe": probe(2, 60),
        "readinessProbe": probe(5, 3),
        "livenessProbe": probe(20, 3),
        "resources": {
            "requests": {"cpu": "250m", "memory": mebibytes(plan.memory)},
            "limits": {"memory": mebibytes(plan.memory)},
        },
        "securityContext": container_security(),
        "volumeMounts": mounts,
    });
    if !plan.config.is_empty() {
        container["envFrom"] = json!([{"configMapRef": {"name": format!("{}-env", plan.name)}}]);
    }
    let mut annotations = json!({"murmur.dev/manifest-sha256": plan.manifest_sha256});
    if let Some(pulled) = &plan.pulled {
        annotations["murmur.dev/capsule"] = json!(pulled.reference);
    }
    if !manifest.capabilities.shell.allow.is_empty() {
        annotations["murmur.dev/shell-allow"] = json!(manifest.capabilities.shell.allow.join(","));
    }
    let mut pod = json!({
        "automountServiceAccountToken": false,
        "enableServiceLinks": false,
        "securityContext": {
            "runAsNonRoot": true,
            "runAsUser": RUN_AS,
            "runAsGroup": RUN_AS,
            "fsGroup": RUN_AS,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "terminationGracePeriodSeconds": plan.grace_seconds,
        "containers": [container],
        "volumes": volumes,
    });
    if !init.is_empty() {
        pod["initContainers"] = json!(init);
    }
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": metadata(plan, &plan.name),
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": selector(plan)},
            "template": {
                "metadata": {"labels": labels(plan), "annotations": annotations},
                "spec": pod,
            },
        },
    })
}

fn mebibytes(bytes: u64) -> String {
    format!("{}Mi", bytes.div_ceil(1 << 20))
}

fn network_policy(plan: &Plan) -> Value {
    let tcp = |ports: &BTreeSet<u16>| -> Vec<Value> {
        ports
            .iter()
            .map(|p| json!({"protocol": "TCP", "port": p}))
            .collect()
    };
    let mut egress = vec![json!({
        "to": [{
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
            "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}},
        }],
        "ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}],
    })];
    for (ip, ports) in &plan.egress.addresses {
        let cidr = match ip {
            IpAddr::V4(_) => format!("{ip}/32"),
            IpAddr::V6(_) => format!("{ip}/128"),
        };
        egress.push(json!({"to": [{"ipBlock": {"cidr": cidr}}], "ports": tcp(ports)}));
    }
    for (service, namespace) in &plan.egress.services {
        let mut peer = json!({"podSelector": {"matchLabels": {"app.kubernetes.io/name": service}}});
        if let Some(namespace) = namespace {
            peer["namespaceSelector"] =
                json!({"matchLabels": {"kubernetes.io/metadata.name": namespace}});
        }
        egress.push(json!({
            "to": [peer],
            "ports": [{"protocol": "TCP", "port": plan.port}],
        }));
    }
    if !plan.egress.public_ports.is_empty() {
        egress.push(json!({
            "to": [{"ipBlock": {"cidr": "0.0.0.0/0", "except": [
                "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "169.254.0.0/16", "100.64.0.0/10",
            ]}}],
            "ports": tcp(&plan.egress.public_ports),
        }));
    }
    let mut metadata = metadata(plan, &plan.name);
    if !plan.egress.public_hosts.is_empty() {
        metadata["annotations"] = json!({
            "murmur.dev/egress-hosts": plan.egress.public_hosts.iter().cloned().collect::<Vec<_>>().join(","),
        });
    }
    json!({
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": metadata,
        "spec": {
            "podSelector": {"matchLabels": selector(plan)},
            "policyTypes": ["Ingress", "Egress"],
            "ingress": [{"ports": [{"protocol": "TCP", "port": plan.port}]}],
            "egress": egress,
        },
    })
}

/// One YAML document (`---` first) of `value`.
fn yaml_document(value: &Value) -> String {
    let mut out = String::new();
    let mut emitter = saphyr::YamlEmitter::new(&mut out);
    // A document that cannot be emitted is a bug here, not input: JSON always is YAML.
    let _ = emitter.dump(&to_yaml(value));
    out.push('\n');
    out
}

fn to_yaml(value: &Value) -> saphyr::Yaml<'static> {
    use saphyr::{Scalar, Yaml};
    match value {
        Value::Null => Yaml::Value(Scalar::Null),
        Value::Bool(b) => Yaml::Value(Scalar::Boolean(*b)),
        Value::Number(n) => match n.as_i64() {
            Some(i) => Yaml::Value(Scalar::Integer(i)),
            None => Yaml::Value(Scalar::String(n.to_string().into())),
        },
        Value::String(s) => Yaml::Value(Scalar::String(s.clone().into())),
        Value::Array(items) => Yaml::Sequence(items.iter().map(to_yaml).collect()),
        Value::Object(map) => {
            let mut mapping = saphyr::Mapping::new();
            for (key, child) in map {
                mapping.insert(
                    Yaml::Value(Scalar::String(key.clone().into())),
                    to_yaml(child),
                );
            }
            Yaml::Mapping(mapping)
        }
    }
}

/// Writes `text` to `path` through a temporary file beside it, renamed over it.
fn write_atomically(path: &Path, text: &str) -> std::io::Result<()> {
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let mut temp = tempfile::NamedTempFile::new_in(dir)?;
    std::io::Write::write_all(&mut temp, text.as_bytes())?;
    temp.persist(path).map_err(|e| e.error)?;
    Ok(())
}
