//! What containment adds to starting a native child (issue 40's goal: at most 5 ms for
//! `scoped` over `advisory` on the CI machine).
//!
//! - `shell_call/advisory`: a shell call of `true` through `ShellGrant::execute`, held as
//!   `advisory` (Landlock on files and ports, per-process limits, the guardian).
//! - `shell_call/scoped`: the same under `scoped` as this host gives it (exact Landlock,
//!   seccomp with its notification listener, user/network/PID/mount namespaces with the egress
//!   proxy's listener, capabilities cleared, a cgroup per call where the host has cgroups).
//! - `shell_call/scoped_without_cgroup`: `scoped` with its limits held by the stand-ins
//!   (per-process limits and the PID namespace), to show what moving a child into a cgroup
//!   costs on this host.
//! - `shell_call/sealed`: under `sealed`, when this host gives it.
//!
//! Each iteration spawns, waits for the child to end and collects its report: the call's whole
//! start-up and teardown.

use std::sync::Arc;
use std::time::Duration;

use criterion::Criterion;
use murmur_beneath::BeneathDir;
use murmur_confine::{Class, Confinement, ShellGrant, ShellRequest, State, TimeLimits};

fn grant(workdir: &std::path::Path, confinement: Confinement) -> ShellGrant {
    ShellGrant::new(
        &["true".to_string()],
        "/usr/bin:/bin",
        Arc::new(BeneathDir::open(workdir).unwrap()),
        Vec::new(),
        confinement,
        TimeLimits {
            default: Duration::from_secs(10),
            max: Duration::from_secs(10),
        },
    )
}

fn bench(c: &mut Criterion) {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let workdir = tempfile::tempdir().unwrap();
    let mut arms = vec![
        (
            "advisory",
            Confinement::on_this_host(Class::Advisory).expect("advisory is given anywhere"),
        ),
        (
            "scoped",
            Confinement::on_this_host(Class::Scoped).expect("this host gives `scoped`"),
        ),
    ];
    let mut without_cgroup =
        Confinement::on_this_host(Class::Scoped).expect("this host gives `scoped`");
    for mechanism in &mut without_cgroup.achieved.mechanisms {
        if mechanism.name == "cgroup" {
            mechanism.state = State::StandIn;
        }
    }
    arms.push(("scoped_without_cgroup", without_cgroup));
    match Confinement::on_this_host(Class::Sealed) {
        Ok(sealed) => arms.push(("sealed", sealed)),
        Err(missing) => eprintln!("shell_call/sealed skipped: {missing}"),
    }
    let request = ShellRequest {
        binary: "true".to_string(),
        args: Vec::new(),
        stdin: None,
        timeout_secs: None,
    };
    let mut group = c.benchmark_group("shell_call");
    group.sample_size(60);
    for (name, confinement) in arms {
        let grant = grant(workdir.path(), confinement);
        group.bench_function(name, |b| {
            b.iter(|| {
                let output = runtime.block_on(grant.execute(&request)).unwrap();
                assert_eq!(output.exit_code, Some(0), "{output:?}");
            })
        });
    }
    group.finish();
}

fn main() {
    let mut criterion = Criterion::default().configure_from_args();
    bench(&mut criterion);
    criterion.final_summary();
}
