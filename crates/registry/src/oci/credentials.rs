//! Which registry credentials go to which host.
//!
//! What this module promises:
//!
//! - **Credentials are bound to hosts.** `MURMUR_REGISTRY_TOKEN`, or `MURMUR_REGISTRY_USERNAME`
//!   with `MURMUR_REGISTRY_PASSWORD` (from the environment or `$MURMUR_HOME/credentials.yaml`),
//!   go only to the registry host `$MURMUR_REGISTRY` names (when it is unset: the registry given
//!   on the command line with `--registry`) and to the hosts listed in
//!   `MURMUR_REGISTRY_HOSTS=HOST[:PORT],…`. A credential of one host is written
//!   `NAME@HOST[:PORT]` (e.g. `MURMUR_REGISTRY_TOKEN@registry.example.com` in the credentials
//!   file) and goes to that host only. The Docker credential file (`$DOCKER_CONFIG/config.json`,
//!   else `~/.docker/config.json`, with its credential helpers) is per host already. Any other
//!   host is spoken to anonymously; when it asks for credentials the error says why none were
//!   sent and how to bind one ([`Credentials::Withheld`]).
//! - **Hosts compare as the registry would be reached:** case-insensitively, port included, a
//!   registry's default port (`443`, or `80` for a loopback one spoken to over HTTP) the same
//!   as none ([`host_key`]).
//! - A value is never printed, never in an error, never in `Debug`.

use std::path::Path;
use std::sync::Arc;

use super::host::host_key;
use crate::answer::RegistryError;

/// The names of the credentials taken from the credential sources.
pub const USERNAME_CREDENTIAL: &str = "MURMUR_REGISTRY_USERNAME";
pub const PASSWORD_CREDENTIAL: &str = "MURMUR_REGISTRY_PASSWORD";
pub const TOKEN_CREDENTIAL: &str = "MURMUR_REGISTRY_TOKEN";
/// The hosts, besides `$MURMUR_REGISTRY`'s, the unqualified credentials are bound to.
pub const HOSTS_VARIABLE: &str = "MURMUR_REGISTRY_HOSTS";
/// The most hosts [`HOSTS_VARIABLE`] may list.
pub const MAX_BOUND_HOSTS: usize = 64;

/// How to prove who we are to a registry. Never printed.
#[derive(Clone, PartialEq, Eq, Default)]
pub enum Credentials {
    #[default]
    Anonymous,
    /// Anonymous, because the credentials the sources hold (from `origin`) are bound to other
    /// hosts (`bound`, as the user wrote them).
    Withheld {
        origin: &'static str,
        bound: Vec<String>,
    },
    Basic {
        username: String,
        password: String,
        origin: &'static str,
    },
    Bearer {
        token: String,
        origin: &'static str,
    },
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Credentials({})", self.origin())
    }
}

impl Credentials {
    /// Where the credentials came from, for messages (never the values).
    pub fn origin(&self) -> &'static str {
        match self {
            Credentials::Anonymous | Credentials::Withheld { .. } => "none",
            Credentials::Basic { origin, .. } | Credentials::Bearer { origin, .. } => origin,
        }
    }

    /// Whether a credential is presented.
    pub fn is_some(&self) -> bool {
        matches!(self, Credentials::Basic { .. } | Credentials::Bearer { .. })
    }
}

/// The credential sources (the environment, then the user's credentials file) and the registry
/// their unqualified credentials belong to: what [`CredentialSources::find`] reads.
#[derive(Clone)]
pub struct CredentialSources {
    /// `$MURMUR_REGISTRY` (or the registry given when it is unset), as given.
    home: Option<String>,
    lookup: Lookup,
}

/// Looks a credential up by name.
type Lookup = Arc<dyn Fn(&str) -> Option<String> + Send + Sync>;

impl std::fmt::Debug for CredentialSources {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CredentialSources")
            .field("home", &self.home)
            .finish_non_exhaustive()
    }
}

impl PartialEq for CredentialSources {
    fn eq(&self, other: &Self) -> bool {
        self.home == other.home && Arc::ptr_eq(&self.lookup, &other.lookup)
    }
}

impl Eq for CredentialSources {}

impl CredentialSources {
    /// The sources `lookup` reads, whose unqualified credentials belong to the registry `home`
    /// names (`oci://HOST[:PORT]/…`; anything else binds them to no host) and to the hosts
    /// `MURMUR_REGISTRY_HOSTS` lists.
    pub fn new(
        home: Option<&str>,
        lookup: impl Fn(&str) -> Option<String> + Send + Sync + 'static,
    ) -> CredentialSources {
        CredentialSources {
            home: home.map(str::to_string).filter(|h| !h.trim().is_empty()),
            lookup: Arc::new(lookup),
        }
    }

    /// Sources holding nothing: every host is spoken to anonymously (the Docker credential file
    /// aside).
    pub fn none() -> CredentialSources {
        CredentialSources::new(None, |_| None)
    }

    fn get(&self, name: &str) -> Option<String> {
        (self.lookup)(name).filter(|value| !value.is_empty())
    }

    /// The hosts the unqualified credentials are bound to, as written (`$MURMUR_REGISTRY`'s
    /// first), or why `MURMUR_REGISTRY_HOSTS` is not a list of hosts.
    pub fn bound_hosts(&self) -> Result<Vec<String>, String> {
        let mut hosts = Vec::new();
        if let Some(home) = &self.home
            && let Some(rest) = home.trim().strip_prefix(super::host::SCHEME)
        {
            let host = rest.split('/').next().unwrap_or(rest);
            if host_key(host).is_ok() {
                hosts.push(host.to_string());
            }
        }
        if let Some(list) = self.get(HOSTS_VARIABLE) {
            hosts.extend(parse_host_list(&list)?);
        }
        Ok(hosts)
    }

    /// The credentials for registry `host` (see the module docs): its own (`NAME@HOST`), else
    /// the unqualified ones when they are bound to it, else the Docker credential file's, else
    /// none ([`Credentials::Withheld`] when unqualified ones are set for other hosts). A Docker
    /// credential file that exists but cannot be used is an error naming why; its values are
    /// never in it.
    pub fn find(&self, host: &str) -> Result<Credentials, RegistryError> {
        let refuse = |detail: String, hint: Option<String>| RegistryError::Credentials {
            registry: host.to_string(),
            detail,
            hint,
        };
        let key = host_key(host).map_err(|why| refuse(why, None))?;
        // Its own: written with the host as given or as compared.
        let mut suffixes = vec![format!("@{host}")];
        if !key.eq_ignore_ascii_case(host) {
            suffixes.push(format!("@{key}"));
        }
        for suffix in &suffixes {
            if let Some(found) = self.pair(suffix, host)? {
                return Ok(found);
            }
        }
        let bound = self
            .bound_hosts()
            .map_err(|why| refuse(format!("{HOSTS_VARIABLE} {why}"), None))?;
        let is_bound = bound.iter().any(|b| host_key(b).is_ok_and(|b| b == key));
        let withheld = match self.pair("", host)? {
            Some(found) if is_bound => return Ok(found),
            Some(found) => Some(Credentials::Withheld {
                origin: found.origin(),
                bound,
            }),
            None => None,
        };
        match docker_credentials(host)? {
            Credentials::Anonymous => Ok(withheld.unwrap_or(Credentials::Anonymous)),
            found => Ok(found),
        }
    }

    /// The token, or the user name and password, named with `suffix` (`""` or `@HOST`).
    fn pair(&self, suffix: &str, host: &str) -> Result<Option<Credentials>, RegistryError> {
        let origin = |unqualified: &'static str, qualified: &'static str| {
            if suffix.is_empty() {
                unqualified
            } else {
                qualified
            }
        };
        if let Some(token) = self.get(&format!("{TOKEN_CREDENTIAL}{suffix}")) {
            return Ok(Some(Credentials::Bearer {
                token,
                origin: origin(TOKEN_CREDENTIAL, "MURMUR_REGISTRY_TOKEN@HOST"),
            }));
        }
        match (
            self.get(&format!("{USERNAME_CREDENTIAL}{suffix}")),
            self.get(&format!("{PASSWORD_CREDENTIAL}{suffix}")),
        ) {
            (Some(username), Some(password)) => Ok(Some(Credentials::Basic {
                username,
                password,
                origin: origin(
                    "MURMUR_REGISTRY_USERNAME and MURMUR_REGISTRY_PASSWORD",
                    "MURMUR_REGISTRY_USERNAME@HOST and MURMUR_REGISTRY_PASSWORD@HOST",
                ),
            })),
            (Some(_), None) | (None, Some(_)) => Err(RegistryError::Credentials {
                registry: host.to_string(),
                detail: format!(
                    "only one of MURMUR_REGISTRY_USERNAME{suffix} and \
                     MURMUR_REGISTRY_PASSWORD{suffix} is set"
                ),
                hint: None,
            }),
            (None, None) => Ok(None),
        }
    }
}

/// `HOST[:PORT],…` (spaces around entries allowed, empty entries skipped) as the hosts written,
/// or why it is not such a list.
pub fn parse_host_list(list: &str) -> Result<Vec<String>, String> {
    let mut hosts = Vec::new();
    for entry in list.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        if entry.contains("://") || entry.contains('/') {
            return Err(format!(
                "lists `{}`, which is not HOST[:PORT] (no scheme, no path)",
                entry.escape_debug()
            ));
        }
        host_key(entry).map_err(|why| {
            format!(
                "lists `{}`, which is not HOST[:PORT]: {why}",
                entry.escape_debug()
            )
        })?;
        hosts.push(entry.to_string());
        if hosts.len() > MAX_BOUND_HOSTS {
            return Err(format!("lists more than {MAX_BOUND_HOSTS} hosts"));
        }
    }
    Ok(hosts)
}

/// The Docker credential file: `$DOCKER_CONFIG/config.json`, else `~/.docker/config.json`.
fn docker_config_file() -> Option<std::path::PathBuf> {
    let dir = std::env::var_os("DOCKER_CONFIG")
        .filter(|dir| !dir.is_empty())
        .map(std::path::PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| Path::new(&home).join(".docker")))?;
    Some(dir.join("config.json"))
}

/// The Docker credential file's credentials for `host`, else none.
fn docker_credentials(host: &str) -> Result<Credentials, RegistryError> {
    use docker_credential::{CredentialRetrievalError as Failure, DockerCredential};
    let refuse = |detail: String| RegistryError::Credentials {
        registry: host.to_string(),
        detail,
        hint: None,
    };
    let Some(file) = docker_config_file() else {
        return Ok(Credentials::Anonymous);
    };
    let reader = match std::fs::File::open(&file) {
        Ok(reader) => std::io::BufReader::new(reader),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            return Ok(Credentials::Anonymous);
        }
        Err(error) => {
            return Err(refuse(format!(
                "the Docker credential file {} cannot be read: {error}",
                file.display()
            )));
        }
    };
    match docker_credential::get_credential_from_reader(reader, host) {
        Ok(DockerCredential::UsernamePassword(username, password)) => Ok(Credentials::Basic {
            username,
            password,
            origin: "the Docker credential file",
        }),
        Ok(DockerCredential::IdentityToken(_)) => Err(refuse(
            "the Docker credential file holds an identity token for it, which mur cannot use; \
             log in with a user name and password or token instead"
                .to_string(),
        )),
        Err(Failure::ConfigNotFound | Failure::NoCredentialConfigured) => {
            Ok(Credentials::Anonymous)
        }
        Err(Failure::ConfigReadError) => Err(refuse(format!(
            "the Docker credential file {} is not one",
            file.display()
        ))),
        Err(error) => Err(refuse(format!(
            "the credential helper the Docker credential file {} names for it failed ({error:?})",
            file.display()
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn sources(home: Option<&str>, pairs: &[(&str, &str)]) -> CredentialSources {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        CredentialSources::new(home, move |name| map.get(name).cloned())
    }

    #[test]
    fn hosts_compare_without_case_and_with_the_port() {
        assert_eq!(
            host_key("Registry.Example.COM").unwrap(),
            "registry.example.com"
        );
        assert_eq!(
            host_key("registry.example.com:443").unwrap(),
            "registry.example.com"
        );
        assert_eq!(
            host_key("registry.example.com:5000").unwrap(),
            "registry.example.com:5000"
        );
        assert_eq!(host_key("LOCALHOST:5000").unwrap(), "localhost:5000");
        assert_eq!(host_key("127.0.0.1:80").unwrap(), "127.0.0.1");
        assert_eq!(host_key("[::1]:5000").unwrap(), "[::1]:5000");
        assert_ne!(host_key("localhost:5000"), host_key("127.0.0.1:5000"));
        assert_ne!(host_key("127.0.0.1:5000"), host_key("127.0.0.1:5001"));
        for bad in ["", "a b", "user:pw@host", "host/path", "host?x"] {
            assert!(host_key(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_host_list_is_hosts_and_ports_only() {
        assert_eq!(
            parse_host_list(" a.example , B.example:5000,,").unwrap(),
            ["a.example", "B.example:5000"]
        );
        for bad in [
            "https://a.example",
            "a.example/ns",
            "user:pw@a.example",
            "a b",
            "a.example:port",
        ] {
            let error = parse_host_list(bad).unwrap_err();
            assert!(!error.contains("pw@") || bad.contains("pw@"), "{error}");
        }
        let many = vec!["h.example"; MAX_BOUND_HOSTS + 1].join(",");
        assert!(parse_host_list(&many).is_err());
    }

    #[test]
    fn unqualified_credentials_go_only_to_the_bound_hosts() {
        let with_env = [
            (USERNAME_CREDENTIAL, "ci"),
            (PASSWORD_CREDENTIAL, "s3cret"),
            (HOSTS_VARIABLE, "mirror.example:5000"),
        ];
        let sources = sources(Some("oci://Registry.Example/team"), &with_env);
        for bound in [
            "registry.example",
            "REGISTRY.example:443",
            "mirror.example:5000",
        ] {
            assert!(
                matches!(sources.find(bound).unwrap(), Credentials::Basic { .. }),
                "{bound}"
            );
        }
        for other in [
            "evil.example",
            "registry.example:5000",
            "mirror.example",
            "127.0.0.1:5000",
        ] {
            match sources.find(other).unwrap() {
                Credentials::Withheld { bound, .. } => {
                    assert_eq!(bound, ["Registry.Example", "mirror.example:5000"]);
                }
                other => panic!("{other:?}"),
            }
        }
        // A directory registry binds them to no host.
        let dir = super::tests::sources(Some("/srv/registry"), &with_env[..2]);
        assert!(matches!(
            dir.find("registry.example").unwrap(),
            Credentials::Withheld { .. }
        ));
    }

    #[test]
    fn a_host_s_own_credential_goes_to_it_alone() {
        let sources = sources(
            None,
            &[
                ("MURMUR_REGISTRY_TOKEN@auth.example", "t0ken"),
                ("MURMUR_REGISTRY_USERNAME@127.0.0.1:5000", "u"),
                ("MURMUR_REGISTRY_PASSWORD@127.0.0.1:5000", "p"),
                ("MURMUR_REGISTRY_USERNAME@half.example", "u"),
            ],
        );
        assert!(matches!(
            sources.find("Auth.Example:443").unwrap(),
            Credentials::Bearer { .. }
        ));
        assert!(matches!(
            sources.find("127.0.0.1:5000").unwrap(),
            Credentials::Basic { .. }
        ));
        assert!(matches!(
            sources.find("localhost:5000").unwrap(),
            Credentials::Anonymous
        ));
        let error = sources.find("half.example").unwrap_err();
        assert!(!format!("{error}").contains('u') || !format!("{error:?}").contains("\"u\""));
    }

    #[test]
    fn no_value_is_in_debug() {
        let credentials = Credentials::Basic {
            username: "the-user".into(),
            password: "the-pass".into(),
            origin: "here",
        };
        let shown = format!("{credentials:?}");
        assert!(
            !shown.contains("the-user") && !shown.contains("the-pass"),
            "{shown}"
        );
    }

    proptest::proptest! {
        #[test]
        fn no_host_list_makes_the_parser_panic(list in "\\PC{0,80}") {
            let _ = parse_host_list(&list);
        }

        #[test]
        fn no_host_makes_the_key_panic(host in "\\PC{0,40}") {
            let _ = host_key(&host);
        }
    }
}
