//! Who may use the door: the principals of `door.auth`, each with one credential.
//!
//! What this module promises:
//!
//! - **Resolved once, before the door listens.** Every `door.auth` credential is looked up
//!   where a run looks (the environment, the `.env` beside the manifest, the user's credentials
//!   file) when the door starts. One set nowhere stops the start (`E-RUN-012`, naming the
//!   principal and the credential); two principals whose credentials hold the same value stop it
//!   too (`E-A2A-009`): the door could not tell them apart.
//! - **Compared in constant time.** A presented value is compared with every principal's, each
//!   comparison over the sha256 of both values, so neither the time taken nor its length tells
//!   how close a guess came or which principal it was near. No value is ever printed, logged
//!   or traced; the trace names the principal.
//! - **Open only with no principals.** With `door.auth` empty the door asks no one for a
//!   credential (and listens on loopback only, unless the operator says `--insecure-no-auth`).
//!   With principals, a request that presents none of their credentials is refused before
//!   anything else is read of it.

use axum::http::HeaderMap;
use murmur_a2a::SecurityScheme;
use murmur_front::secret::{digest, same_digest};
use murmur_manifest::door::{Door, Presented, PrincipalTrust};

/// One principal with its credential's value.
pub struct Principal {
    pub name: String,
    pub trust: PrincipalTrust,
    presented: Presented,
    /// sha256 of the credential's value.
    digest: [u8; 32],
}

impl std::fmt::Debug for Principal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Principal")
            .field("name", &self.name)
            .field("trust", &self.trust)
            .field("scheme", &self.presented.scheme())
            .finish_non_exhaustive()
    }
}

/// The door's principals; empty when the door asks for no credential.
#[derive(Debug, Default)]
pub struct DoorAuth {
    principals: Vec<Principal>,
}

/// Why the door's credentials cannot be resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthError {
    pub code: &'static str,
    pub message: String,
    pub hint: String,
}

impl DoorAuth {
    /// The principals of `door`, their credentials looked up by `lookup` (which says where it
    /// looked when it finds nothing).
    pub fn resolve(
        door: &Door,
        lookup: &dyn Fn(&str) -> Result<String, String>,
    ) -> Result<DoorAuth, AuthError> {
        let mut principals: Vec<Principal> = Vec::new();
        for entry in &door.auth {
            // Loading refused every entry without exactly one credential reference.
            let Some(presented) = entry.presented() else {
                continue;
            };
            let value = lookup(presented.credential()).map_err(|looked| AuthError {
                code: "E-RUN-012",
                message: format!(
                    "door principal `{}` needs the credential {}, which is set nowhere ({looked})",
                    entry.principal,
                    presented.credential()
                ),
                hint: format!(
                    "set {} in the environment, the .env beside murmur.yaml or the credentials \
                     file, or remove the principal",
                    presented.credential()
                ),
            })?;
            let digest = digest(value.as_bytes());
            if let Some(twin) = principals.iter().find(|p| same_digest(&p.digest, &digest)) {
                return Err(AuthError {
                    code: "E-A2A-009",
                    message: format!(
                        "door principals `{}` and `{}` have the same credential value: the door \
                         could not tell them apart",
                        twin.name, entry.principal
                    ),
                    hint: "give each principal a credential of its own".to_string(),
                });
            }
            principals.push(Principal {
                name: entry.principal.clone(),
                trust: entry.trust,
                presented,
                digest,
            });
        }
        Ok(DoorAuth { principals })
    }

    /// Whether the door asks for a credential.
    pub fn required(&self) -> bool {
        !self.principals.is_empty()
    }

    /// The principal whose credential `headers` present. Every principal's credential is
    /// compared, whichever matches, so the time taken does not say which one did.
    pub fn authenticate(&self, headers: &HeaderMap) -> Option<&Principal> {
        let bearer = headers
            .get(axum::http::header::AUTHORIZATION)
            .and_then(|value| value.to_str().ok())
            .and_then(murmur_front::secret::bearer_token);
        let mut found = None;
        for principal in &self.principals {
            let presented = match &principal.presented {
                Presented::Bearer { .. } => bearer,
                Presented::ApiKey { header, .. } => headers
                    .get(header.as_str())
                    .and_then(|value| value.to_str().ok())
                    .map(str::trim),
            };
            let Some(presented) = presented.filter(|p| !p.is_empty()) else {
                continue;
            };
            let matches = same_digest(&digest(presented.as_bytes()), &principal.digest);
            if matches && found.is_none() {
                found = Some(principal);
            }
        }
        found
    }

    /// The card's security schemes: one per distinct way of presenting a credential (`bearer`,
    /// `api_key` for the default header, `api_key_<header>` for another).
    pub fn card_schemes(&self) -> Vec<(String, SecurityScheme)> {
        let mut schemes: Vec<(String, SecurityScheme)> = Vec::new();
        for principal in &self.principals {
            let scheme = match &principal.presented {
                Presented::Bearer { .. } => ("bearer".to_string(), SecurityScheme::Bearer),
                Presented::ApiKey { header, .. } => {
                    let name = if header
                        .eq_ignore_ascii_case(murmur_manifest::door::DEFAULT_API_KEY_HEADER)
                    {
                        "api_key".to_string()
                    } else {
                        format!("api_key_{}", header.to_ascii_lowercase())
                    };
                    (
                        name,
                        SecurityScheme::ApiKeyHeader {
                            header: header.clone(),
                        },
                    )
                }
            };
            if !schemes.iter().any(|(name, _)| *name == scheme.0) {
                schemes.push(scheme);
            }
        }
        schemes
    }

    /// The `WWW-Authenticate` challenge of a 401: the schemes the door takes.
    pub fn challenge(&self) -> String {
        let mut challenges: Vec<String> = Vec::new();
        for (_, scheme) in self.card_schemes() {
            challenges.push(match scheme {
                SecurityScheme::Bearer => "Bearer realm=\"a2a\"".to_string(),
                SecurityScheme::ApiKeyHeader { header } => {
                    format!("ApiKey realm=\"a2a\", header=\"{header}\"")
                }
            });
        }
        challenges.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use murmur_manifest::door::Principal as Entry;

    fn entry(
        name: &str,
        bearer: Option<&str>,
        api_key: Option<&str>,
        header: Option<&str>,
    ) -> Entry {
        Entry {
            principal: name.into(),
            bearer: bearer.map(Into::into),
            api_key: api_key.map(Into::into),
            header: header.map(Into::into),
            trust: PrincipalTrust::External,
        }
    }

    fn door(entries: Vec<Entry>) -> Door {
        Door {
            auth: entries,
            ..Door::default()
        }
    }

    fn lookup(name: &str) -> Result<String, String> {
        match name {
            "OPS" => Ok("ops-secret".into()),
            "CI" => Ok("ci-secret".into()),
            "SAME" => Ok("ops-secret".into()),
            _ => Err("not in the test's table".into()),
        }
    }

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(
                axum::http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
                value.parse().unwrap(),
            );
        }
        map
    }

    #[test]
    fn each_principal_is_known_by_its_own_credential_only() {
        let auth = DoorAuth::resolve(
            &door(vec![
                entry("ops", Some("${OPS}"), None, None),
                entry("ci", None, Some("${CI}"), Some("X-Team-Key")),
            ]),
            &lookup,
        )
        .unwrap();
        assert!(auth.required());
        let who =
            |pairs: &[(&str, &str)]| auth.authenticate(&headers(pairs)).map(|p| p.name.clone());
        assert_eq!(
            who(&[("authorization", "Bearer ops-secret")]).as_deref(),
            Some("ops")
        );
        assert_eq!(
            who(&[("authorization", "bearer  ops-secret ")]).as_deref(),
            Some("ops")
        );
        assert_eq!(who(&[("x-team-key", "ci-secret")]).as_deref(), Some("ci"));
        // A value in the wrong place, a near miss, a prefix, nothing: no one.
        assert_eq!(who(&[("x-team-key", "ops-secret")]), None);
        assert_eq!(who(&[("authorization", "Bearer ci-secret")]), None);
        assert_eq!(who(&[("authorization", "Bearer ops-secreT")]), None);
        assert_eq!(who(&[("authorization", "Bearer ops")]), None);
        assert_eq!(who(&[("authorization", "Basic ops-secret")]), None);
        assert_eq!(who(&[]), None);
        assert_eq!(
            auth.card_schemes(),
            vec![
                ("bearer".to_string(), SecurityScheme::Bearer),
                (
                    "api_key_x-team-key".to_string(),
                    SecurityScheme::ApiKeyHeader {
                        header: "X-Team-Key".into()
                    }
                )
            ]
        );
        assert_eq!(
            auth.challenge(),
            "Bearer realm=\"a2a\", ApiKey realm=\"a2a\", header=\"X-Team-Key\""
        );
        // Nothing of a value reaches a debug print.
        assert!(!format!("{auth:?}").contains("secret"));
    }

    #[test]
    fn an_unset_or_shared_credential_stops_the_door() {
        let unset = DoorAuth::resolve(
            &door(vec![entry("ops", Some("${NOPE}"), None, None)]),
            &lookup,
        )
        .unwrap_err();
        assert_eq!(unset.code, "E-RUN-012");
        assert!(
            unset.message.contains("`ops`") && unset.message.contains("NOPE"),
            "{unset:?}"
        );
        let shared = DoorAuth::resolve(
            &door(vec![
                entry("ops", Some("${OPS}"), None, None),
                entry("twin", None, Some("${SAME}"), None),
            ]),
            &lookup,
        )
        .unwrap_err();
        assert_eq!(shared.code, "E-A2A-009");
        assert!(!shared.message.contains("ops-secret"));
        let open = DoorAuth::resolve(&door(Vec::new()), &lookup).unwrap();
        assert!(!open.required());
        assert!(open.card_schemes().is_empty());
    }
}
