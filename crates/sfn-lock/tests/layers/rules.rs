//! DESIGN.md's layers as data: for each part of the library, which other
//! parts it may name, and whether it may name an AWS crate. The list is
//! ordered bottom up; every module of the crate must fall in one part.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use crate::source::Module;

struct Part {
    /// A module path prefix (`store` covers `store::dynamodb::item`).
    prefix: &'static str,
    /// The parts it may name, besides itself.
    may_name: &'static [&'static str],
    /// Whether it may name an AWS crate (`aws_*`, `lambda_runtime`).
    aws: bool,
}

const PARTS: &[Part] = &[
    // The old module paths, re-exported for one release (lib.rs's level).
    Part {
        prefix: "compat",
        may_name: &[
            "vocab", "ports", "aws", "store", "sweep", "metrics", "locker",
        ],
        aws: false,
    },
    // The words every other part speaks: names, times, requests, answers, errors.
    Part {
        prefix: "vocab",
        may_name: &[],
        aws: false,
    },
    // What the services need from the outside world: the store contract,
    // wake-ups, what Step Functions says about an execution.
    Part {
        prefix: "ports",
        may_name: &["vocab"],
        aws: false,
    },
    // SDK plumbing shared by every adapter: config, HTTPS, error
    // classification, the service's clock; and the Step Functions and SQS
    // adapters of the ports.
    Part {
        prefix: "aws",
        may_name: &["vocab", "ports"],
        aws: true,
    },
    // The stores, each behind the contract (siblings: STORE_SIBLINGS).
    Part {
        prefix: "store",
        may_name: &["vocab", "ports", "aws"],
        aws: true,
    },
    // The services, naming only ports (and each other, downwards).
    Part {
        prefix: "sweep",
        may_name: &["vocab", "ports"],
        aws: false,
    },
    Part {
        prefix: "metrics",
        may_name: &["vocab", "ports", "sweep"],
        aws: false,
    },
    Part {
        prefix: "locker",
        may_name: &["vocab", "ports", "metrics"],
        aws: false,
    },
    // The Lambda glue: configuration from the environment, the handlers.
    Part {
        prefix: "lambda",
        may_name: &[
            "vocab", "ports", "aws", "store", "sweep", "metrics", "locker",
        ],
        aws: true,
    },
];

/// Inside `store`, each store is its own folder and names no other store;
/// `store::any` (the store `LOCK_STORE_URL` names) is the one that holds them
/// all, and the shared helpers (`store::names`, `store::url`) name no store.
const STORES: &[&str] = &[
    "store::dynamodb",
    "store::document::s3",
    "store::document::ssm",
];
const MAY_NAME_EVERY_STORE: &[&str] = &["store::any", "compat"];

/// Listed exceptions, each with its reason: (from, named crate or module).
const EXCEPTIONS: &[(&str, &str, &str)] = &[
    (
        "vocab::time",
        "aws_smithy_types",
        "RFC 3339 text of a time: aws-smithy-types' DateTime is a value type \
         with no client and no I/O, in every binary already; a date crate \
         would add code for the same job",
    ),
    (
        "sweep::cleanup",
        "aws_lambda_events",
        "the SQS batch the sweep answers record by record: serde types of the \
         event, no client and no runtime",
    ),
    (
        "sweep::events",
        "aws_lambda_events",
        "EventBridge's envelope of the end event: a serde type, no client and \
         no runtime",
    ),
];

#[derive(Debug)]
pub struct Violation {
    pub from: String,
    pub file: String,
    pub to: String,
    pub written: String,
    pub rule: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} ({}) names {}: {}",
            self.from, self.file, self.written, self.rule
        )
    }
}

fn part_of(path: &str) -> Option<&'static Part> {
    PARTS
        .iter()
        .find(|part| path == part.prefix || path.starts_with(&format!("{}::", part.prefix)))
}

fn top(path: &str) -> &str {
    path.split("::").next().unwrap_or(path)
}

fn excepted(from: &str, named: &str) -> bool {
    EXCEPTIONS.iter().any(|(f, n, _)| *f == from && *n == named)
}

fn store_of(path: &str) -> Option<&'static str> {
    STORES
        .iter()
        .copied()
        .find(|store| path == *store || path.starts_with(&format!("{store}::")))
}

pub fn check(modules: &BTreeMap<String, Module>) -> Vec<Violation> {
    let mut found = Vec::new();
    for module in modules.values() {
        if module.path.is_empty() {
            continue; // lib.rs: the module tree and the public re-exports.
        }
        let violation = |to: &str, written: &str, rule: String| Violation {
            from: module.path.clone(),
            file: module.file.clone(),
            to: to.to_string(),
            written: written.to_string(),
            rule,
        };
        let Some(part) = part_of(&module.path) else {
            found.push(violation(
                "",
                "",
                "a module in no layer (rules.rs PARTS)".into(),
            ));
            continue;
        };
        for krate in &module.crates {
            let aws = krate.starts_with("aws_") || krate == "lambda_runtime";
            if aws && !part.aws && !excepted(&module.path, krate) {
                found.push(violation(
                    krate,
                    krate,
                    format!("{} names no AWS crate", part.prefix),
                ));
            }
        }
        for (written, to) in &module.imports {
            if to.is_empty() {
                found.push(violation(
                    to,
                    written,
                    "the crate root is for re-exports only".into(),
                ));
                continue;
            }
            let target = top(to);
            if target != part.prefix && !part.may_name.contains(&target) {
                found.push(violation(
                    to,
                    written,
                    format!("{} may name only {:?}", part.prefix, part.may_name),
                ));
                continue;
            }
            let inside_store = module.path.starts_with("store::");
            if let Some(store) = store_of(to).filter(|_| inside_store) {
                let own = store_of(&module.path);
                let free = MAY_NAME_EVERY_STORE.iter().any(|m| module.path == *m);
                if own != Some(store) && !free {
                    found.push(violation(
                        to,
                        written,
                        "a store names no other store".into(),
                    ));
                }
            }
        }
    }
    found
}

/// Groups of modules that name each other, directly or around a loop.
pub fn cycles(modules: &BTreeMap<String, Module>) -> Vec<Vec<String>> {
    // The crate root only declares and re-exports: its edges are no imports.
    let edges: BTreeMap<&str, BTreeSet<&str>> = modules
        .iter()
        .filter(|(path, _)| !path.is_empty())
        .map(|(path, module)| {
            let to = module.imports.iter().map(|(_, to)| to.as_str());
            let to = to.filter(|to| to != path && !to.is_empty());
            (path.as_str(), to.collect())
        })
        .collect();
    let reach = |from: &str| {
        let mut seen = BTreeSet::new();
        let mut stack = vec![from];
        while let Some(next) = stack.pop() {
            for to in edges.get(next).into_iter().flatten() {
                if seen.insert(*to) {
                    stack.push(to);
                }
            }
        }
        seen
    };
    let reachable: BTreeMap<&str, BTreeSet<&str>> = edges.keys().map(|m| (*m, reach(m))).collect();
    let mut groups: Vec<Vec<String>> = Vec::new();
    let mut placed: BTreeSet<String> = BTreeSet::new();
    for (module, from_here) in &reachable {
        if placed.contains(*module) || !from_here.contains(module) {
            continue;
        }
        let group: Vec<String> = from_here
            .iter()
            .filter(|other| reachable.get(*other).is_some_and(|r| r.contains(module)))
            .map(|m| m.to_string())
            .collect();
        placed.extend(group.iter().cloned());
        groups.push(group);
    }
    groups
}
