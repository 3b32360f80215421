//! Labs from the example files for root tests, under names of this test process.

use std::process::Command;

use super::{json, stderr, test_db, FLOWLAB};

/// A lab from an example file under a name of this test process, torn down when dropped.
pub struct Lab {
    pub name: String,
    pub dir: std::path::PathBuf,
}

impl Lab {
    pub fn up(example: &str, base_name: &str) -> Lab {
        // Lab names are short (interface names derive from them): a prefix and this process.
        let name = format!("t{}{}", &base_name[..2], std::process::id() % 100_000);
        let text = std::fs::read_to_string(format!(
            "{}/../../examples/lab/{example}",
            env!("CARGO_MANIFEST_DIR")
        ))
        .unwrap()
        .replace(
            &format!("name = \"{base_name}\""),
            &format!("name = \"{name}\""),
        );
        Lab::from_text(name, &text)
    }

    /// The lab `text` describes, named `name`, brought up.
    pub fn from_text(name: String, text: &str) -> Lab {
        let dir = std::env::temp_dir().join(format!("flowlab-lab-{name}"));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("lab.toml");
        std::fs::write(&file, text).unwrap();
        let o = Command::new(FLOWLAB)
            .args(["lab", "up"])
            .arg(&file)
            .env("FLOWLAB_LAB_DIR", &dir)
            .output()
            .unwrap();
        assert!(o.status.success(), "lab up: {}", stderr(&o));
        Lab { name, dir }
    }

    /// `flowlab run` of an example experiment from inside `host`, with the lab's addresses;
    /// `edit` may change the file's text first.
    pub fn run(
        &self,
        host: &str,
        experiment: &str,
        edit: impl Fn(String) -> String,
    ) -> serde_json::Value {
        let example = format!(
            "{}/../../examples/experiments/{experiment}",
            env!("CARGO_MANIFEST_DIR")
        );
        let file = self.dir.join(experiment);
        std::fs::write(&file, edit(std::fs::read_to_string(example).unwrap())).unwrap();
        let file = file.to_str().unwrap().to_string();
        let o = Command::new(FLOWLAB)
            .args([
                "lab", "exec", "--lab", &self.name, host, "--", FLOWLAB, "run", &file, "--lab",
                &self.name, "--json",
            ])
            .env("FLOWLAB_LAB_DIR", &self.dir)
            .env("FLOWLAB_DB", test_db())
            .output()
            .unwrap();
        assert!(o.status.success(), "run: {}", stderr(&o));
        json(&o)
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        let o = Command::new(FLOWLAB)
            .args(["lab", "down", &self.name])
            .env("FLOWLAB_LAB_DIR", &self.dir)
            .output()
            .unwrap();
        assert!(o.status.success(), "lab down: {}", stderr(&o));
        let left = Command::new("ip").args(["netns", "list"]).output().unwrap();
        let prefix = format!("fl-{}-", self.name);
        assert!(
            !String::from_utf8_lossy(&left.stdout).contains(&prefix),
            "lab down left namespaces behind"
        );
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
