//! docs/results.schema.json, checked by the `jsonschema` crate under the draft it declares
//! (2020-12), with the `$defs` entries each check exercised. Shared by the tests of every crate
//! that writes result documents (`#[path = ".../control/tests/json_schema/mod.rs"] mod
//! json_schema;`).

use std::collections::{HashMap, HashSet};

use jsonschema::OutputUnit;
use serde_json::{json, Value};

const SCHEMA_TEXT: &str = include_str!("../../../../docs/results.schema.json");

/// The draft the schema declares, and the only one these tests accept.
const DRAFT_2020_12: &str = "https://json-schema.org/draft/2020-12/schema";

/// The published schema, parsed and checked against its draft's meta-schema.
pub fn schema() -> Value {
    let schema: Value =
        serde_json::from_str(SCHEMA_TEXT).expect("docs/results.schema.json is valid JSON");
    assert_eq!(
        schema["$schema"], DRAFT_2020_12,
        "the schema's declared draft"
    );
    if let Err(e) = jsonschema::meta::validate(&schema) {
        panic!("docs/results.schema.json breaks the 2020-12 meta-schema: {e}");
    }
    schema
}

pub struct Validator<'a> {
    root: &'a Value,
    /// One compiled validator per checked entry (`None`: the root).
    compiled: HashMap<Option<String>, jsonschema::Validator>,
    /// `$defs` entries that validated a non-null instance: coverage of the schema.
    pub used: HashSet<String>,
}

impl<'a> Validator<'a> {
    pub fn new(root: &'a Value) -> Self {
        Validator {
            root,
            compiled: HashMap::new(),
            used: HashSet::new(),
        }
    }

    /// Errors of `instance` against the `$defs` entry `name` (or the root for `None`), one
    /// line each with the instance's location.
    pub fn check(&mut self, name: Option<&str>, instance: &Value) -> Vec<String> {
        let root = self.root;
        let validator = self
            .compiled
            .entry(name.map(str::to_string))
            .or_insert_with(|| compile(root, name));
        let evaluation = validator.evaluate(instance);
        let errors: Vec<String> = evaluation
            .iter_errors()
            .map(|e| format!("${}: {}", e.instance_location.as_str(), e.error))
            .collect();
        if errors.is_empty() {
            if let Some(name) = name {
                self.used.insert(name.to_string());
            }
            mark_used(evaluation.root(), instance, &mut self.used);
        }
        errors
    }
}

/// A validator of the root, or of one `$defs` entry. An entry is reached through the root
/// embedded under an `$id`, so its references to `#` (`TestResult`) still mean the root.
fn compile(root: &Value, name: Option<&str>) -> jsonschema::Validator {
    const ROOT_ID: &str = "urn:flowlab:results";
    let schema = match name {
        None => root.clone(),
        Some(name) => {
            let mut embedded = root.clone();
            embedded["$id"] = json!(ROOT_ID);
            json!({
                "$schema": root["$schema"],
                "$defs": { "results": embedded },
                "$ref": format!("{ROOT_ID}#/$defs/{name}"),
            })
        }
    };
    jsonschema::draft202012::new(&schema).expect("the schema compiles")
}

/// Adds every `$defs` entry that a valid unit of the evaluation applied to a non-null value.
fn mark_used(unit: OutputUnit<'_>, instance: &Value, used: &mut HashSet<String>) {
    if !unit.valid() {
        return;
    }
    let location = unit.schema_location();
    if let Some((_, name)) = location.rsplit_once("/$defs/") {
        let at = instance.pointer(unit.instance_location().as_str());
        if !name.contains('/') && at.is_some_and(|v| !v.is_null()) {
            used.insert(name.to_string());
        }
    }
    for child in unit.children() {
        mark_used(child, instance, used);
    }
}
