//! The fleet's files (docs/fleet.md): the Containerfile, checked statically since images cannot
//! be pulled here; the Kubernetes manifests of contrib/k8s, validated against Kubernetes'
//! OpenAPI schemas by `kubernetes-validate` (skipped, saying so, where it is not installed) and
//! their command lines against this binary; and the mesh that contrib/k8s/mesh.py writes, loaded
//! by the experiment parser the controller uses.

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;

const WORKSPACE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
const MANIFESTS: [&str; 4] = [
    "namespace.yaml",
    "secret.yaml",
    "agent.yaml",
    "cronjob.yaml",
];

fn read(path: &str) -> String {
    std::fs::read_to_string(Path::new(WORKSPACE).join(path))
        .unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// `program` on `PATH`, or where the environment variable `var` says.
fn find_tool(var: &str, program: &str) -> Option<PathBuf> {
    if let Some(p) = std::env::var_os(var) {
        return Some(PathBuf::from(p));
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(program))
        .find(|p| p.is_file())
}

#[test]
fn the_containerfile_builds_in_one_stage_and_runs_unprivileged_in_another() {
    let file = read("Containerfile");
    let lines: Vec<&str> = file
        .lines()
        .map(str::trim)
        .filter(|l| !l.starts_with('#'))
        .collect();
    let stages: Vec<&str> = lines
        .iter()
        .copied()
        .filter(|l| l.starts_with("FROM "))
        .collect();
    assert_eq!(stages.len(), 2, "{stages:?}");
    assert!(
        stages[0].starts_with("FROM docker.io/library/rust:") && stages[0].ends_with(" AS build")
    );
    let runtime = stages[1];
    assert!(
        runtime.contains("debian:stable-slim") || runtime.contains("distroless"),
        "{runtime}"
    );
    let last_stage = &lines[lines.iter().position(|l| *l == runtime).unwrap()..];
    assert!(last_stage
        .iter()
        .any(|l| l.starts_with("COPY --from=build ")));
    assert!(
        !last_stage.iter().any(|l| l.contains("cargo")),
        "no toolchain in the runtime image"
    );
    let users: Vec<&str> = last_stage
        .iter()
        .filter_map(|l| l.strip_prefix("USER "))
        .collect();
    assert_eq!(users.len(), 1, "one USER in the runtime stage");
    let user = users[0].split(':').next().unwrap();
    assert!(!["root", "0"].contains(&user), "runs as {user}");
    assert!(lines
        .iter()
        .any(|l| l.contains("cargo build --release --locked")));
    assert_eq!(lines.last(), Some(&"CMD [\"serve\"]"));
    // The build context leaves out build output.
    assert!(read(".dockerignore").lines().any(|l| l == "target"));
}

#[test]
fn nothing_asks_for_privileged_containers() {
    let mut texts = vec![("Containerfile".to_string(), read("Containerfile"))];
    texts.push(("docs/fleet.md".into(), read("docs/fleet.md")));
    for m in MANIFESTS {
        texts.push((m.into(), read(&format!("contrib/k8s/{m}"))));
    }
    for (name, text) in &texts {
        for banned in [
            "--privileged",
            "privileged: true",
            "SYS_ADMIN",
            "allowPrivilegeEscalation: true",
        ] {
            let advice = text
                .lines()
                .find(|l| l.contains(banned) && !l.contains("never"));
            assert!(advice.is_none(), "{name}: {advice:?}");
        }
    }
    // Every container drops every capability and runs as the image's user, within limits.
    for m in ["agent.yaml", "cronjob.yaml"] {
        let text = read(&format!("contrib/k8s/{m}"));
        let containers = text.matches("image: ").count();
        for must in [
            "- ALL",
            "runAsNonRoot: true",
            "runAsUser: 10001",
            "readOnlyRootFilesystem: true",
            "limits:",
            "allowPrivilegeEscalation: false",
        ] {
            assert_eq!(text.matches(must).count(), containers, "{m}: {must}");
        }
        assert!(!text.contains("add:"), "{m} adds a capability");
    }
}

#[test]
fn the_manifests_validate_against_the_kubernetes_schemas() {
    let Some(validator) = find_tool("FLOWLAB_K8S_VALIDATE", "kubernetes-validate") else {
        eprintln!("skipped: kubernetes-validate not found (pip install kubernetes-validate, as .ci/run does)");
        return;
    };
    let dir = Path::new(WORKSPACE).join("contrib/k8s");
    let o = Command::new(&validator)
        .arg("--strict")
        .args(MANIFESTS)
        .current_dir(&dir)
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{out}");
    for kind in [
        "namespace/flowlab",
        "secret/flowlab",
        "daemonset/flowlab-agent",
        "service/flowlab-agent",
        "cronjob/flowlab-mesh",
    ] {
        assert!(
            out.contains(&format!("passed for resource {kind}")),
            "{kind}: {out}"
        );
    }
    // What `kubectl apply -k` applies, the generated ConfigMap included, where kubectl is here.
    let Some(kubectl) = find_tool("FLOWLAB_KUBECTL", "kubectl") else {
        eprintln!("skipped: kubectl not found, so the kustomization is not rendered");
        return;
    };
    let rendered = Command::new(kubectl)
        .args(["kustomize", "."])
        .current_dir(&dir)
        .output()
        .unwrap();
    assert!(rendered.status.success(), "{}", stderr(&rendered));
    let file = std::env::temp_dir().join(format!("flowlab-k8s-{}.yaml", std::process::id()));
    std::fs::write(&file, &rendered.stdout).unwrap();
    let o = Command::new(&validator)
        .arg("--strict")
        .arg(&file)
        .output()
        .unwrap();
    let _ = std::fs::remove_file(&file);
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        o.status.success() && out.contains("configmap/flowlab-mesh"),
        "{out}"
    );
}

/// The `- ITEM` lines of the YAML list under `key:` in `text`.
fn yaml_list(text: &str, key: &str) -> Vec<String> {
    let mut lines = text.lines().skip_while(|l| l.trim() != key).skip(1);
    let first = lines.next().expect(key);
    let indent = first.len() - first.trim_start().len();
    std::iter::once(first)
        .chain(lines.take_while(|l| {
            l.len() - l.trim_start().len() == indent && l.trim_start().starts_with("- ")
        }))
        .map(|l| l.trim_start()[2..].to_string())
        .collect()
}

/// The manifests' command lines are flags this flowlab takes: with `--help` at the end, clap
/// parses and checks every flag before it, and exits 2 on any it does not know.
#[test]
fn the_manifests_command_lines_are_flowlab_flags() {
    let agent: Vec<String> = yaml_list(&read("contrib/k8s/agent.yaml"), "args:")
        .into_iter()
        .map(|a| a.replace("$(NODE_IP)", "127.0.0.1"))
        .collect();
    assert_eq!(agent[0], "serve");
    let mesh = read("contrib/k8s/cronjob.yaml");
    let run_line = mesh
        .lines()
        .map(str::trim)
        .find(|l| l.starts_with("flowlab run "))
        .expect("flowlab run");
    let run: Vec<String> = run_line
        .trim_end_matches(" || status=1;")
        .split_whitespace()
        .skip(1)
        .map(|a| a.replace("\"$f\"", "mesh.toml"))
        .collect();
    for args in [agent, run] {
        let o = Command::new(FLOWLAB)
            .args(&args)
            .arg("--help")
            .output()
            .unwrap();
        assert!(o.status.success(), "flowlab {args:?}: {}", stderr(&o));
    }
}

/// 100 sites, as docs/fleet.md plans them: every ordered pair tested once a cycle, no agent in
/// more than one test as client and one as server at a time, each file within an experiment's
/// limits; and the example mesh is what the generator writes for the example sites.
#[test]
fn the_mesh_generator_covers_every_pair_one_test_per_agent_at_a_time() {
    let Some(python) = find_tool("FLOWLAB_PYTHON", "python3") else {
        eprintln!("skipped: python3 not found");
        return;
    };
    let tmp = std::env::temp_dir().join(format!("flowlab-mesh-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp).unwrap();
    let sites: String = (0..100)
        .map(|i| format!("site{i:03} 192.0.2.{}\n", i + 1))
        .collect();
    std::fs::write(tmp.join("sites.txt"), sites).unwrap();
    let generate = |sites: &Path, out: &Path, shards: &str| {
        let o = Command::new(&python)
            .arg(Path::new(WORKSPACE).join("contrib/k8s/mesh.py"))
            .args([sites.as_os_str(), out.as_os_str()])
            .args(["--shards", shards])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", stderr(&o));
    };
    generate(&tmp.join("sites.txt"), &tmp.join("mesh"), "10");
    let (mut pairs, mut rounds) = (BTreeSet::new(), 0);
    for shard in 0..10 {
        let text = std::fs::read_to_string(tmp.join(format!("mesh/mesh-{shard:02}.toml"))).unwrap();
        let experiment =
            flowlab_experiment::load(&text).unwrap_or_else(|e| panic!("shard {shard}: {e}"));
        for step in flowlab_experiment::plan(&experiment) {
            rounds += 1;
            let clients: BTreeSet<&str> = step.flows.iter().map(|f| f.from.as_str()).collect();
            let servers: BTreeSet<&str> = step.flows.iter().map(|f| f.to.as_str()).collect();
            assert_eq!(
                clients.len(),
                step.flows.len(),
                "a site runs two tests at once"
            );
            assert_eq!(
                servers.len(),
                step.flows.len(),
                "a site serves two tests at once"
            );
            for f in &step.flows {
                assert_eq!(f.spec.duration_ns, Some(3_000_000_000));
                assert!(
                    pairs.insert((f.from.clone(), f.to.clone())),
                    "{} twice",
                    f.name
                );
            }
        }
    }
    assert_eq!((pairs.len(), rounds), (100 * 99, 99));

    let example = Path::new(WORKSPACE).join("contrib/k8s");
    generate(&example.join("sites.txt"), &tmp.join("example"), "1");
    let fresh = std::fs::read_to_string(tmp.join("example/mesh-00.toml")).unwrap();
    assert_eq!(
        fresh,
        read("contrib/k8s/mesh/mesh-00.toml"),
        "run contrib/k8s/mesh.py contrib/k8s/sites.txt contrib/k8s/mesh"
    );
    let _ = std::fs::remove_dir_all(&tmp);
}
