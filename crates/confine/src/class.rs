//! Containment classes: what a capsule's native children are held by, and whether this host
//! can hold them so.
//!
//! The contract:
//!
//! - **The class a session runs under is the stronger of what the capsule asks
//!   (`capabilities.containment`) and what the operator asks (`mur run --containment`)**, and
//!   `scoped` when neither asks. Nothing weakens it but an explicit `advisory`.
//! - **A host that cannot give the class refuses the launch** ([`achieve`]), before any model
//!   call, with `E-CAP-020` naming the missing mechanism and how to get it (or how to choose a
//!   weaker class knowingly). It never runs a child under less than it promised.
//! - **Every mechanism is reported** ([`Achieved::mechanisms`]): enforced, stood in for by
//!   another (and which), or off, so `session_start` and `mur check` say exactly what holds.
//!
//! The classes:
//!
//! - `advisory`: files by Landlock (the workdir, what programs need to start, declared
//!   read-only paths, programs may execute anything they can read), TCP `connect` only to the
//!   allowlist's ports, resource limits per process, the process-group guardian. What Murmur
//!   did before classes existed; only when chosen.
//! - `scoped`: Landlock exact (the workdir without execute or device/socket creation; execute
//!   only the allowlisted binaries and what they load; read-only the runtimes interpreters
//!   need); seccomp default-deny; its own user, network and PID namespaces, whose only way out
//!   is the egress proxy in `mur` deciding by host and port; every capability cleared and
//!   `no_new_privs`; signals and abstract sockets only within its own; a cgroup per child
//!   (process, memory, CPU limits, and the whole group killed when the child's call ends).
//! - `sealed`: `scoped` in a composed root of its own ([`sealed`](crate::sealed)), its own
//!   mount and PID namespaces: the workdir, the allowed binaries and their closure, runtimes
//!   and system libraries read-only, a curated `/etc` with a synthetic `passwd`, a private
//!   `/dev`, a fresh `/proc`, a tmpfs `/tmp`; nothing else of the host exists for it. Given
//!   where `scoped` is and a probe composes such a root here.

use std::sync::OnceLock;

pub use murmur_manifest::capsule::Containment as Class;

/// Whether a mechanism holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum State {
    /// The kernel enforces it.
    Enforced,
    /// Another mechanism stands in for it ([`Mechanism::detail`] says which); the class holds.
    StandIn,
    /// Not applied: the class does not ask for it.
    Off,
}

/// One mechanism and how it holds.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Mechanism {
    pub name: &'static str,
    pub state: State,
    pub detail: String,
}

/// The class a capsule's children run under on this host, and how.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Achieved {
    pub asked: Class,
    pub achieved: Class,
    pub mechanisms: Vec<Mechanism>,
}

impl Achieved {
    /// The mechanism named `name`, if the class has it.
    pub fn mechanism(&self, name: &str) -> Option<&Mechanism> {
        self.mechanisms.iter().find(|m| m.name == name)
    }

    /// Whether resource limits are held by a cgroup (else by per-process limits).
    pub fn uses_cgroups(&self) -> bool {
        self.mechanism("cgroup")
            .is_some_and(|m| m.state == State::Enforced)
    }
}

/// What this host offers, probed once per process by trying each mechanism in a throwaway
/// child.
#[derive(Debug)]
pub struct HostSupport {
    pub landlock_abi: Option<i32>,
    pub seccomp: Result<(), String>,
    pub namespaces: Result<(), String>,
    pub cgroups: &'static crate::cgroup::CgroupSupport,
    /// Whether a sealed root can be composed here: probed on first call (only `sealed`
    /// asks), then kept.
    pub sealed_root: fn() -> Result<(), String>,
}

/// The host's support, probed on first use.
pub fn host() -> &'static HostSupport {
    static HOST: OnceLock<HostSupport> = OnceLock::new();
    HOST.get_or_init(|| HostSupport {
        landlock_abi: crate::landlock_abi(),
        seccomp: crate::seccomp::seccomp_available()
            .then_some(())
            .ok_or_else(|| "the kernel refuses seccomp filters".to_string()),
        namespaces: crate::netns::netns_available(),
        cgroups: crate::cgroup::cgroup_support(),
        sealed_root: crate::sealed::root_available,
    })
}

/// The lowest Landlock ABI `scoped` needs: 3 is the first that controls renaming and linking
/// across directories (2) and truncation (3) as well as execution and device creation.
pub const SCOPED_LANDLOCK_ABI: i32 = 3;

/// Why a class cannot be had here.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("containment `{asked}` cannot be had on this host: {mechanism} is missing ({why})")]
pub struct Missing {
    pub asked: Class,
    pub mechanism: &'static str,
    pub why: String,
    pub how: String,
}

impl murmur_manifest::Coded for Missing {
    fn code(&self) -> &'static str {
        "E-CAP-020"
    }

    fn message(&self) -> String {
        self.to_string()
    }

    fn hint(&self) -> String {
        format!(
            "{}; or run with a weaker class knowingly (`mur run --containment advisory`, or \
             `capabilities.containment: advisory`)",
            self.how
        )
    }
}

/// The class of `asked` on `host`, or what is missing for it.
pub fn achieve(asked: Class, host: &HostSupport) -> Result<Achieved, Missing> {
    let missing = |mechanism: &'static str, why: String, how: &str| Missing {
        asked,
        mechanism,
        why,
        how: how.to_string(),
    };
    let mut mechanisms = Vec::new();
    let landlock = match host.landlock_abi {
        Some(abi) => format!("ABI {abi}"),
        None => "absent".to_string(),
    };
    if asked == Class::Advisory {
        mechanisms.push(Mechanism {
            name: "landlock",
            state: if host.landlock_abi.is_some() {
                State::Enforced
            } else {
                State::Off
            },
            detail: format!("{landlock}: files and TCP ports, programs may execute what they read"),
        });
        mechanisms.push(Mechanism {
            name: "rlimits",
            state: State::Enforced,
            detail: "per process: open files, file size, CPU time, no core dumps".to_string(),
        });
        for name in ["seccomp", "namespaces", "capabilities", "cgroup"] {
            mechanisms.push(Mechanism {
                name,
                state: State::Off,
                detail: "advisory does not apply it".to_string(),
            });
        }
        return Ok(Achieved {
            asked,
            achieved: asked,
            mechanisms,
        });
    }
    match host.landlock_abi {
        Some(abi) if abi >= SCOPED_LANDLOCK_ABI => mechanisms.push(Mechanism {
            name: "landlock",
            state: State::Enforced,
            detail: format!(
                "ABI {abi}: the workdir without execute or device creation, execute only the \
                 allowed binaries and their libraries{}",
                if abi >= 6 {
                    ", signals and abstract sockets scoped"
                } else {
                    ""
                }
            ),
        }),
        found => {
            return Err(missing(
                "Landlock",
                match found {
                    Some(abi) => {
                        format!("the kernel offers ABI {abi}, {SCOPED_LANDLOCK_ABI} is needed")
                    }
                    None => "the kernel offers no Landlock".to_string(),
                },
                "use Linux 6.2 or newer with Landlock enabled (`lsm=landlock,...` on the kernel \
                 command line)",
            ));
        }
    }
    if let Err(why) = &host.seccomp {
        return Err(missing(
            "seccomp",
            why.clone(),
            "use a kernel built with CONFIG_SECCOMP_FILTER, outside a container that forbids it",
        ));
    }
    mechanisms.push(Mechanism {
        name: "seccomp",
        state: State::Enforced,
        detail: "default-deny system calls; refusals counted".to_string(),
    });
    if let Err(why) = &host.namespaces {
        return Err(missing(
            "user and network namespaces",
            why.clone(),
            "allow unprivileged user namespaces (`sysctl kernel.unprivileged_userns_clone=1`, \
             or on Ubuntu `kernel.apparmor_restrict_unprivileged_userns=0`)",
        ));
    }
    mechanisms.push(Mechanism {
        name: "namespaces",
        state: State::Enforced,
        detail: if asked == Class::Sealed {
            "own user, network, mount and PID namespaces; out only through the egress proxy"
        } else {
            "own user, network and PID namespaces; out only through the egress proxy"
        }
        .to_string(),
    });
    mechanisms.push(Mechanism {
        name: "capabilities",
        state: State::Enforced,
        detail: "every set cleared, no_new_privs".to_string(),
    });
    match host.cgroups.describe() {
        Ok(layout) => mechanisms.push(Mechanism {
            name: "cgroup",
            state: State::Enforced,
            detail: format!("{layout}: processes, memory (and swap), CPU per child; killed whole"),
        }),
        Err(why) => mechanisms.push(Mechanism {
            name: "cgroup",
            state: State::StandIn,
            detail: format!(
                "{why}; instead: the process count by RLIMIT_NPROC (which the kernel counts \
                 over all of this user's processes: each child may start max_processes more \
                 than the user runs when it starts, and a root user is not held by it), \
                 memory by RLIMIT_AS (address space, not resident memory), CPU by RLIMIT_CPU \
                 (time, not rate), and the whole tree killed with its PID namespace"
            ),
        }),
    }
    if asked == Class::Sealed {
        if let Err(why) = (host.sealed_root)() {
            return Err(missing(
                "a composed root",
                why,
                "run where a user namespace may mount (a tmpfs, bind mounts, a fresh /proc: \
                 not inside a container that masks /proc or forbids mount), or ask for \
                 `scoped` (`mur run --containment scoped`)",
            ));
        }
        mechanisms.push(Mechanism {
            name: "root",
            state: State::Enforced,
            detail: "a composed root: the workdir, the allowed binaries and their closure, \
                     runtimes and system libraries read-only, a curated /etc with a synthetic \
                     passwd, a private /dev (null, zero, random, urandom), a fresh /proc of its \
                     own PID namespace, a tmpfs /tmp"
                .to_string(),
        });
    }
    Ok(Achieved {
        asked,
        achieved: asked,
        mechanisms,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(landlock_abi: Option<i32>, namespaces: Result<(), String>) -> HostSupport {
        HostSupport {
            landlock_abi,
            seccomp: Ok(()),
            namespaces,
            cgroups: crate::cgroup::cgroup_support(),
            sealed_root: || Ok(()),
        }
    }

    #[test]
    fn advisory_is_given_anywhere_and_says_what_it_leaves_off() {
        let achieved = achieve(Class::Advisory, &host(None, Err("no".into()))).unwrap();
        assert_eq!(achieved.achieved, Class::Advisory);
        assert_eq!(achieved.mechanism("seccomp").unwrap().state, State::Off);
        assert_eq!(achieved.mechanism("landlock").unwrap().state, State::Off);
    }

    #[test]
    fn scoped_is_refused_naming_what_is_missing() {
        let old = achieve(Class::Scoped, &host(Some(2), Ok(()))).unwrap_err();
        assert_eq!(old.mechanism, "Landlock");
        assert!(old.why.contains("ABI 2"), "{old}");
        let no_userns = achieve(Class::Scoped, &host(Some(7), Err("EPERM".into()))).unwrap_err();
        assert_eq!(no_userns.mechanism, "user and network namespaces");
        assert_eq!(murmur_manifest::Coded::code(&no_userns), "E-CAP-020");
        assert!(murmur_manifest::Coded::hint(&no_userns).contains("--containment advisory"));
    }

    #[test]
    fn sealed_needs_what_scoped_needs_and_a_root_it_can_compose() {
        let no_userns = achieve(Class::Sealed, &host(Some(7), Err("EPERM".into()))).unwrap_err();
        assert_eq!(no_userns.asked, Class::Sealed);
        assert_eq!(no_userns.mechanism, "user and network namespaces");
        let mut masked = host(Some(7), Ok(()));
        masked.sealed_root = || Err("mounting a fresh /proc on /mnt/proc failed: EPERM".into());
        let refused = achieve(Class::Sealed, &masked).unwrap_err();
        assert_eq!(refused.mechanism, "a composed root");
        assert!(refused.why.contains("/proc"), "{refused}");
        assert!(murmur_manifest::Coded::hint(&refused).contains("--containment scoped"));
        let achieved = achieve(Class::Sealed, &host(Some(7), Ok(()))).unwrap();
        assert_eq!(achieved.achieved, Class::Sealed);
        for name in ["landlock", "seccomp", "namespaces", "capabilities", "root"] {
            assert_eq!(
                achieved.mechanism(name).map(|m| m.state),
                Some(State::Enforced),
                "{name}"
            );
        }
        assert!(
            achieve(Class::Scoped, &host(Some(7), Ok(())))
                .unwrap()
                .mechanism("root")
                .is_none()
        );
    }

    #[test]
    fn this_host_composes_a_sealed_root() {
        assert_eq!(crate::sealed::root_available(), Ok(()));
        assert_eq!(
            achieve(Class::Sealed, super::host()).map(|a| a.achieved),
            Ok(Class::Sealed)
        );
    }

    #[test]
    fn scoped_on_a_capable_host_lists_every_mechanism() {
        let achieved = achieve(Class::Scoped, &host(Some(7), Ok(()))).unwrap();
        for name in [
            "landlock",
            "seccomp",
            "namespaces",
            "capabilities",
            "cgroup",
        ] {
            assert!(achieved.mechanism(name).is_some(), "{name} is reported");
        }
    }
}
