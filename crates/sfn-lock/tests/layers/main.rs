//! The library's layers (DESIGN.md, "Layers"), read from its own source as the
//! compiler parses it (`syn`): which module a file is, which modules and
//! crates it names. A name that points up a layer, a store naming another
//! store, a service naming a store or an AWS crate, or two modules naming each
//! other fails here, with the file and the path it named.
//!
//! `cfg(test)` items are skipped: a test may reach anything.

mod rules;
mod source;

use std::collections::BTreeMap;
use std::path::Path;

use rules::{check, cycles, Violation};
use source::{read_crate, Module};

fn library() -> BTreeMap<String, Module> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    read_crate(&src).unwrap_or_else(|error| panic!("cannot read {}: {error}", src.display()))
}

fn report(violations: &[Violation]) -> String {
    violations
        .iter()
        .map(|v| format!("  {v}"))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn every_import_points_down_a_layer() {
    let modules = library();
    let violations = check(&modules);
    assert!(
        violations.is_empty(),
        "{} import(s) against DESIGN.md's layers:\n{}",
        violations.len(),
        report(&violations)
    );
}

#[test]
fn no_two_modules_import_each_other() {
    let modules = library();
    let found = cycles(&modules);
    assert!(
        found.is_empty(),
        "import cycles:\n{}",
        found
            .iter()
            .map(|cycle| format!("  {}", cycle.join(" -> ")))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// The check itself: an upward import planted in a copy of a real file is
/// found, and so is a cycle.
#[test]
fn a_planted_upward_import_is_found() {
    let mut modules = library();
    let vocab = modules
        .values_mut()
        .find(|module| module.path.starts_with("vocab::"))
        .expect("the tree has a vocab module");
    vocab
        .imports
        .push(("crate::locker::Locker".into(), "locker".into()));
    let violations = check(&modules);
    assert!(
        violations
            .iter()
            .any(|v| v.to == "locker" && v.from.starts_with("vocab::")),
        "planted vocab -> locker not reported: {violations:?}"
    );
}

#[test]
fn a_planted_cycle_is_found() {
    let mut modules = library();
    let names: Vec<String> = modules.keys().cloned().collect();
    let (a, b) = (names[1].clone(), names[2].clone());
    if let Some(module) = modules.get_mut(&a) {
        module.imports.push((format!("crate::{b}"), b.clone()));
    }
    if let Some(module) = modules.get_mut(&b) {
        module.imports.push((format!("crate::{a}"), a.clone()));
    }
    assert!(
        cycles(&modules)
            .iter()
            .any(|c| c.contains(&a) && c.contains(&b)),
        "planted cycle {a} <-> {b} not reported"
    );
}

#[test]
fn a_store_naming_another_store_is_found() {
    let mut modules = library();
    let doc = modules
        .get_mut("store::document::doc")
        .expect("the tree has store::document::doc");
    doc.imports.push((
        "crate::store::dynamodb::table::DynamoStore".into(),
        "store::dynamodb::table".into(),
    ));
    let violations = check(&modules);
    assert!(
        violations
            .iter()
            .any(|v| v.from == "store::document::doc" && v.to == "store::dynamodb::table"),
        "planted store -> store not reported: {violations:?}"
    );
}
