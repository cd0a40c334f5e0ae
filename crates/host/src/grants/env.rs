//! The environment grant: what a component finds in its environment, and nothing more.
//!
//! - `MURMUR_CAPSULE_NAME`, `MURMUR_CAPSULE_VERSION`, and when known `MURMUR_SESSION_ID` and
//!   `MURMUR_CAPSULE_URL` (when the capsule is served): who the component works for.
//! - `MURMUR_ARTIFACT_CONFIG`: the artifact entry's `config:` as JSON, when it has one.
//! - Each name of `capabilities.env.allow` that is set on the host, with the host's value.
//! - For a driver, where to send and what to ask for ([`InferenceTarget`]):
//!   `MURMUR_INFERENCE_ENDPOINT`, `MURMUR_INFERENCE_MODEL`, `MURMUR_INFERENCE_DRIVER`, and its
//!   config again as `MURMUR_INFERENCE_DRIVER_CONFIG` (the name drivers written for another
//!   Murmur runtime read); a session's tools and hooks see the first three naming its primary
//!   choice, never a driver's config.
//!
//! Nothing is inherited: a host variable not named in the allow list does not exist for the
//! component, and the runtime never puts a credential here (a driver's key is attached to its
//! requests by [`super::http`], outside the sandbox). Allow-list names in the runtime's own
//! `MURMUR_` namespace are ignored, so a manifest cannot forge the identity variables.

/// Who a component works for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Identity {
    pub capsule_name: String,
    pub capsule_version: String,
    pub session_id: Option<String>,
    pub capsule_url: Option<String>,
}

impl Identity {
    /// The capsule's name and version, in session `session_id` when there is one.
    pub fn of(
        capsule: &murmur_manifest::capsule::CapsuleManifest,
        session_id: Option<&str>,
    ) -> Self {
        Identity {
            capsule_name: capsule.name.clone(),
            capsule_version: capsule.version.clone(),
            session_id: session_id.map(str::to_string),
            capsule_url: None,
        }
    }
}

/// What a driver is told of the call it makes: never a key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InferenceTarget {
    pub endpoint: String,
    pub model: String,
    pub driver: String,
    /// The driver's config, for the driver itself only.
    pub config: Option<serde_json::Value>,
}

impl InferenceTarget {
    /// The `MURMUR_INFERENCE_*` variables; no `MURMUR_INFERENCE_ENDPOINT` when there is no
    /// endpoint (a driver without a gateway), `MURMUR_INFERENCE_DRIVER_CONFIG` only with a
    /// config.
    pub fn env(&self) -> Vec<(String, String)> {
        let endpoint = self.endpoint.trim_end_matches('/');
        let mut env = Vec::new();
        if !endpoint.is_empty() {
            env.push((
                "MURMUR_INFERENCE_ENDPOINT".to_string(),
                endpoint.to_string(),
            ));
        }
        env.push(("MURMUR_INFERENCE_MODEL".to_string(), self.model.clone()));
        env.push(("MURMUR_INFERENCE_DRIVER".to_string(), self.driver.clone()));
        if let Some(config) = &self.config {
            env.push((
                "MURMUR_INFERENCE_DRIVER_CONFIG".to_string(),
                config.to_string(),
            ));
        }
        env
    }
}

/// The complete environment of a component: identity, the artifact's config, and the allowed
/// host variables `host` has values for.
pub fn component_env(
    identity: &Identity,
    artifact_config: Option<&serde_json::Value>,
    allow: &[String],
    host: &dyn Fn(&str) -> Option<String>,
) -> Vec<(String, String)> {
    let mut env = vec![
        (
            "MURMUR_CAPSULE_NAME".to_string(),
            identity.capsule_name.clone(),
        ),
        (
            "MURMUR_CAPSULE_VERSION".to_string(),
            identity.capsule_version.clone(),
        ),
    ];
    if let Some(session_id) = &identity.session_id {
        env.push(("MURMUR_SESSION_ID".to_string(), session_id.clone()));
    }
    if let Some(url) = &identity.capsule_url {
        env.push(("MURMUR_CAPSULE_URL".to_string(), url.clone()));
    }
    if let Some(config) = artifact_config {
        env.push(("MURMUR_ARTIFACT_CONFIG".to_string(), config.to_string()));
    }
    for name in allow {
        if name.starts_with("MURMUR_") || env.iter().any(|(existing, _)| existing == name) {
            continue;
        }
        if let Some(value) = host(name) {
            env.push((name.clone(), value));
        }
    }
    env
}

/// Looks up a host environment variable: where the allowed names take their values.
pub type HostEnv = std::sync::Arc<dyn Fn(&str) -> Option<String> + Send + Sync>;

#[cfg(test)]
mod tests {
    use super::*;

    fn host(name: &str) -> Option<String> {
        match name {
            "LANG" => Some("C.UTF-8".to_string()),
            "SECRET_TOKEN" => Some("s3cr3t".to_string()),
            "MURMUR_CAPSULE_NAME" => Some("forged".to_string()),
            _ => None,
        }
    }

    fn identity() -> Identity {
        Identity {
            capsule_name: "reviewer".to_string(),
            capsule_version: "1.0.0".to_string(),
            session_id: Some("ses_0123456789abcdef0123456789abcdef".to_string()),
            capsule_url: None,
        }
    }

    #[test]
    fn only_identity_config_and_allowed_names_are_present() {
        let config = serde_json::json!({"keep_last": 6});
        let env = component_env(&identity(), Some(&config), &["LANG".to_string()], &host);
        assert_eq!(
            env,
            vec![
                ("MURMUR_CAPSULE_NAME".to_string(), "reviewer".to_string()),
                ("MURMUR_CAPSULE_VERSION".to_string(), "1.0.0".to_string()),
                (
                    "MURMUR_SESSION_ID".to_string(),
                    "ses_0123456789abcdef0123456789abcdef".to_string()
                ),
                (
                    "MURMUR_ARTIFACT_CONFIG".to_string(),
                    r#"{"keep_last":6}"#.to_string()
                ),
                ("LANG".to_string(), "C.UTF-8".to_string()),
            ]
        );
    }

    #[test]
    fn a_host_variable_not_allowed_is_absent() {
        let env = component_env(&identity(), None, &[], &host);
        assert!(env.iter().all(|(name, _)| name != "SECRET_TOKEN"));
    }

    #[test]
    fn an_allowed_name_cannot_forge_the_identity() {
        let env = component_env(
            &identity(),
            None,
            &["MURMUR_CAPSULE_NAME".to_string()],
            &host,
        );
        let names: Vec<_> = env
            .iter()
            .filter(|(n, _)| n == "MURMUR_CAPSULE_NAME")
            .collect();
        assert_eq!(names.len(), 1);
        assert_eq!(names[0].1, "reviewer");
    }

    #[test]
    fn an_allowed_name_unset_on_the_host_is_absent() {
        let env = component_env(&identity(), None, &["HOME_NOT_SET".to_string()], &host);
        assert!(env.iter().all(|(name, _)| name != "HOME_NOT_SET"));
    }

    #[test]
    fn a_drivers_target_carries_its_config_and_no_empty_endpoint() {
        let target = InferenceTarget {
            endpoint: String::new(),
            model: "m".to_string(),
            driver: "d".to_string(),
            config: Some(serde_json::json!({"k": 1})),
        };
        let env = target.env();
        let names: Vec<&str> = env.iter().map(|(name, _)| name.as_str()).collect();
        assert_eq!(
            names,
            [
                "MURMUR_INFERENCE_MODEL",
                "MURMUR_INFERENCE_DRIVER",
                "MURMUR_INFERENCE_DRIVER_CONFIG"
            ]
        );
        assert_eq!(env[2].1, r#"{"k":1}"#);
        let with_gateway = InferenceTarget {
            endpoint: "http://127.0.0.1:9/".to_string(),
            config: None,
            ..target
        };
        assert_eq!(
            with_gateway.env()[0],
            (
                "MURMUR_INFERENCE_ENDPOINT".to_string(),
                "http://127.0.0.1:9".to_string()
            )
        );
        assert_eq!(with_gateway.env().len(), 3);
    }
}
