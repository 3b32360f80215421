//! docs/results.schema.json and a validator for exactly the subset of JSON Schema 2020-12 it
//! uses (any other keyword panics, so the schema cannot silently rely on something nobody
//! checks). Shared by the tests of every crate that writes result documents
//! (`#[path = ".../control/tests/json_schema/mod.rs"] mod json_schema;`).

use std::collections::HashSet;

use serde_json::{json, Value};

const SCHEMA_TEXT: &str = include_str!("../../../../docs/results.schema.json");

/// The published schema, parsed.
pub fn schema() -> Value {
    serde_json::from_str(SCHEMA_TEXT).expect("docs/results.schema.json is valid JSON")
}

/// Keywords that only annotate.
const ANNOTATIONS: &[&str] = &[
    "$schema",
    "$id",
    "$defs",
    "$comment",
    "title",
    "description",
];

pub struct Validator<'a> {
    root: &'a Value,
    /// `$defs` entries that validated a non-null instance: coverage of the schema.
    pub used: HashSet<String>,
}

impl<'a> Validator<'a> {
    pub fn new(root: &'a Value) -> Self {
        Validator {
            root,
            used: HashSet::new(),
        }
    }

    /// Errors of `instance` against the `$defs` entry `name` (or the root for `None`).
    pub fn check(&mut self, name: Option<&str>, instance: &Value) -> Vec<String> {
        let schema = match name {
            Some(n) => json!({ "$ref": format!("#/$defs/{n}") }),
            None => json!({ "$ref": "#" }),
        };
        let mut errors = Vec::new();
        self.validate(&schema, instance, "$", &mut errors);
        errors
    }

    fn resolve(&self, reference: &str) -> &'a Value {
        let pointer = reference
            .strip_prefix('#')
            .unwrap_or_else(|| panic!("only local references are supported: {reference}"));
        self.root
            .pointer(pointer)
            .unwrap_or_else(|| panic!("dangling reference {reference}"))
    }

    fn validate(&mut self, schema: &Value, instance: &Value, path: &str, errors: &mut Vec<String>) {
        let schema = match schema {
            Value::Bool(true) => return,
            Value::Bool(false) => {
                errors.push(format!("{path}: not allowed"));
                return;
            }
            Value::Object(map) => map,
            other => panic!("a schema must be an object or a boolean, not {other}"),
        };
        for (keyword, value) in schema {
            match keyword.as_str() {
                "$ref" => {
                    let reference = value.as_str().expect("$ref is a string");
                    let target = self.resolve(reference);
                    let before = errors.len();
                    self.validate(target, instance, path, errors);
                    if errors.len() == before && !instance.is_null() {
                        if let Some(name) = reference.strip_prefix("#/$defs/") {
                            self.used.insert(name.to_string());
                        }
                    }
                }
                "type" => {
                    let allowed: Vec<&str> = match value {
                        Value::String(t) => vec![t.as_str()],
                        Value::Array(ts) => ts.iter().map(|t| t.as_str().expect("type")).collect(),
                        other => panic!("bad type keyword {other}"),
                    };
                    if !allowed.iter().any(|t| has_type(instance, t)) {
                        errors.push(format!("{path}: {instance} is not of type {allowed:?}"));
                    }
                }
                "enum" => {
                    let options = value.as_array().expect("enum is an array");
                    if !options.contains(instance) {
                        errors.push(format!("{path}: {instance} is not one of {value}"));
                    }
                }
                "const" => {
                    if instance != value {
                        errors.push(format!("{path}: {instance} is not {value}"));
                    }
                }
                "minimum" | "maximum" => {
                    let bound = value.as_f64().expect("numeric bound");
                    if let Some(x) = instance.as_f64() {
                        let ok = if keyword == "minimum" {
                            x >= bound
                        } else {
                            x <= bound
                        };
                        if !ok {
                            errors.push(format!("{path}: {x} is beyond the {keyword} {bound}"));
                        }
                    }
                }
                "properties" => {
                    if let Value::Object(object) = instance {
                        for (key, sub) in value.as_object().expect("properties is an object") {
                            if let Some(v) = object.get(key) {
                                self.validate(sub, v, &format!("{path}.{key}"), errors);
                            }
                        }
                    }
                }
                "required" => {
                    if let Value::Object(object) = instance {
                        for key in value.as_array().expect("required is an array") {
                            let key = key.as_str().expect("required names are strings");
                            if !object.contains_key(key) {
                                errors.push(format!("{path}: missing required field '{key}'"));
                            }
                        }
                    }
                }
                "additionalProperties" => {
                    if let Value::Object(object) = instance {
                        let known = schema.get("properties").and_then(Value::as_object);
                        for (key, v) in object {
                            if known.is_some_and(|k| k.contains_key(key)) {
                                continue;
                            }
                            let before = errors.len();
                            self.validate(value, v, &format!("{path}.{key}"), errors);
                            if errors.len() > before && *value == Value::Bool(false) {
                                errors.truncate(before);
                                errors.push(format!("{path}: unknown field '{key}'"));
                            }
                        }
                    }
                }
                "items" => {
                    if let Value::Array(items) = instance {
                        for (i, item) in items.iter().enumerate() {
                            self.validate(value, item, &format!("{path}[{i}]"), errors);
                        }
                    }
                }
                "anyOf" => {
                    let branches = value.as_array().expect("anyOf is an array");
                    let mut all = Vec::new();
                    let matched = branches.iter().any(|branch| {
                        let mut e = Vec::new();
                        self.validate(branch, instance, path, &mut e);
                        let ok = e.is_empty();
                        all.extend(e);
                        ok
                    });
                    if !matched {
                        errors.push(format!("{path}: matches no anyOf branch: {all:?}"));
                    }
                }
                k if ANNOTATIONS.contains(&k) => {}
                other => panic!("the test validator does not support the keyword '{other}'"),
            }
        }
    }
}

fn has_type(v: &Value, t: &str) -> bool {
    match t {
        "null" => v.is_null(),
        "boolean" => v.is_boolean(),
        "object" => v.is_object(),
        "array" => v.is_array(),
        "string" => v.is_string(),
        "number" => v.is_number(),
        "integer" => v.is_u64() || v.is_i64() || v.as_f64().is_some_and(|x| x.fract() == 0.0),
        other => panic!("unknown type '{other}'"),
    }
}
