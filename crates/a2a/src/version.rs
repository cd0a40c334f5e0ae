//! The two A2A protocol versions this crate speaks.

use crate::RpcError;

/// An A2A protocol version.
///
/// On JSON-RPC the method name tells them apart (`SendMessage` is 1.0, `message/send` is 0.3),
/// and that name decides the version of everything in the answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Version {
    /// A2A 0.3: `kind` discriminators, kebab-case states, lowercase roles, slash method names.
    V0_3,
    /// A2A 1.0: ProtoJSON (camelCase fields, `SCREAMING_SNAKE` enums, oneof wrappers),
    /// PascalCase method names.
    V1_0,
}

impl Version {
    /// Both versions, newest first.
    pub const ALL: [Version; 2] = [Version::V1_0, Version::V0_3];

    /// `"0.3"` or `"1.0"`: the `Major.Minor` form used in `A2A-Version` and
    /// `AgentInterface.protocolVersion`.
    pub fn as_str(self) -> &'static str {
        match self {
            Version::V0_3 => "0.3",
            Version::V1_0 => "1.0",
        }
    }

    /// Reads an `A2A-Version` value (header or query parameter). `Major.Minor` decides; a patch
    /// number is ignored (`1.0.1` is 1.0). An empty value means 0.3, as A2A 1.0 §3.6.2 requires.
    /// Anything else is `VersionNotSupported` (-32009), naming the supported versions.
    ///
    /// The JSON-RPC method name decides a request's version; what to do when the header says
    /// otherwise is the server's call.
    pub fn from_header(value: &str) -> Result<Version, RpcError> {
        let value = value.trim();
        if value.is_empty() {
            return Ok(Version::V0_3);
        }
        let mut numbers = value.split('.');
        let major = numbers.next().and_then(|n| n.parse::<u32>().ok());
        let minor = numbers.next().and_then(|n| n.parse::<u32>().ok());
        let patch_ok = numbers.next().is_none_or(|n| n.parse::<u32>().is_ok());
        let extra = numbers.next().is_some();
        match (major, minor, patch_ok && !extra) {
            (Some(0), Some(3), true) => Ok(Version::V0_3),
            (Some(1), Some(0), true) => Ok(Version::V1_0),
            _ => Err(RpcError::version_not_supported(value)),
        }
    }
}

impl std::fmt::Display for Version {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
