//! The crate's modules, one per file, and what each names: other modules of
//! the crate (resolved to the longest module path that exists) and crates.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use syn::visit::Visit;

#[derive(Debug, Clone)]
pub struct Module {
    /// `store::dynamodb::item`; the crate root is `""`.
    pub path: String,
    pub file: String,
    /// (the path as written, resolved, the module it lands in).
    pub imports: Vec<(String, String)>,
    /// The crates it names (`aws_sdk_ssm`, `lambda_runtime`, ...).
    pub crates: BTreeSet<String>,
}

/// Every `.rs` file under `src` as its module.
pub fn read_crate(src: &Path) -> Result<BTreeMap<String, Module>, String> {
    let mut files = Vec::new();
    collect(src, src, &mut files)?;
    let paths: BTreeSet<String> = files.iter().map(|(path, _)| path.clone()).collect();
    let mut modules = BTreeMap::new();
    for (path, file) in files {
        let text = std::fs::read_to_string(src.join(&file)).map_err(|e| format!("{file}: {e}"))?;
        let syntax = syn::parse_file(&text).map_err(|e| format!("{file}: {e}"))?;
        let mut names = Names {
            module: path.clone(),
            children: declared_children(&syntax),
            found: Vec::new(),
        };
        for item in &syntax.items {
            if !is_test_only(item_attrs(item)) {
                names.visit_item(item);
            }
        }
        let mut module = Module {
            path: path.clone(),
            file,
            imports: Vec::new(),
            crates: BTreeSet::new(),
        };
        for segments in names.found {
            match segments.first().map(String::as_str) {
                Some("crate") => {
                    let target = longest_module(&paths, &segments[1..]);
                    if target != path {
                        module.imports.push((segments.join("::"), target));
                    }
                }
                Some(first) if is_crate_name(first) => {
                    module.crates.insert(first.to_string());
                }
                _ => {}
            }
        }
        modules.insert(path, module);
    }
    Ok(modules)
}

fn collect(src: &Path, dir: &Path, files: &mut Vec<(String, String)>) -> Result<(), String> {
    let entries = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    for entry in entries {
        let path = entry.map_err(|e| e.to_string())?.path();
        if path.is_dir() {
            collect(src, &path, files)?;
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            let file = path
                .strip_prefix(src)
                .map_err(|e| e.to_string())?
                .to_string_lossy()
                .replace('\\', "/");
            files.push((module_path(&file), file));
        }
    }
    Ok(())
}

/// `store/dynamodb/mod.rs` and `store/dynamodb.rs` are `store::dynamodb`.
fn module_path(file: &str) -> String {
    let stem = file.trim_end_matches(".rs");
    let stem = stem.strip_suffix("/mod").unwrap_or(stem);
    if stem == "lib" {
        String::new()
    } else {
        stem.replace('/', "::")
    }
}

fn longest_module(paths: &BTreeSet<String>, segments: &[String]) -> String {
    (0..=segments.len())
        .rev()
        .map(|n| segments[..n].join("::"))
        .find(|candidate| paths.contains(candidate))
        .unwrap_or_default()
}

/// Names a crate, not a local item: `aws_*`, `lambda_runtime`, and the
/// other dependencies the layers speak about.
fn is_crate_name(first: &str) -> bool {
    first.starts_with("aws_")
        || matches!(
            first,
            "lambda_runtime" | "tokio" | "serde_json" | "sha2" | "tracing"
        )
}

fn declared_children(file: &syn::File) -> BTreeSet<String> {
    file.items
        .iter()
        .filter_map(|item| match item {
            syn::Item::Mod(module) if module.content.is_none() => Some(module.ident.to_string()),
            _ => None,
        })
        .collect()
}

fn item_attrs(item: &syn::Item) -> &[syn::Attribute] {
    match item {
        syn::Item::Const(i) => &i.attrs,
        syn::Item::Enum(i) => &i.attrs,
        syn::Item::Fn(i) => &i.attrs,
        syn::Item::Impl(i) => &i.attrs,
        syn::Item::Mod(i) => &i.attrs,
        syn::Item::Static(i) => &i.attrs,
        syn::Item::Struct(i) => &i.attrs,
        syn::Item::Trait(i) => &i.attrs,
        syn::Item::Type(i) => &i.attrs,
        syn::Item::Use(i) => &i.attrs,
        _ => &[],
    }
}

fn is_test_only(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|attr| {
        attr.path().is_ident("cfg")
            && attr
                .parse_args::<syn::Ident>()
                .is_ok_and(|ident| ident == "test")
    })
}

/// Every path the file's items name, made absolute where it names the crate
/// (`crate::`, `super::`, `self::`, a child module).
struct Names {
    module: String,
    children: BTreeSet<String>,
    found: Vec<Vec<String>>,
}

impl Names {
    fn absolute(&self, written: Vec<String>) -> Vec<String> {
        let here: Vec<String> = if self.module.is_empty() {
            Vec::new()
        } else {
            self.module.split("::").map(String::from).collect()
        };
        let mut segments = written;
        let mut base = here.clone();
        let mut relative = false;
        while let Some(first) = segments.first().cloned() {
            match first.as_str() {
                "super" => {
                    base.pop();
                    relative = true;
                }
                "self" => relative = true,
                _ => break,
            }
            segments.remove(0);
        }
        let child = segments.first().is_some_and(|s| self.children.contains(s));
        if relative || child {
            let mut absolute = vec!["crate".to_string()];
            absolute.extend(if relative { base } else { here });
            absolute.extend(segments);
            absolute
        } else {
            segments
        }
    }

    fn use_tree(&mut self, prefix: Vec<String>, tree: &syn::UseTree) {
        match tree {
            syn::UseTree::Path(p) => {
                let mut next = prefix;
                next.push(p.ident.to_string());
                self.use_tree(next, &p.tree);
            }
            syn::UseTree::Name(n) => self.push_use(prefix, Some(n.ident.to_string())),
            syn::UseTree::Rename(r) => self.push_use(prefix, Some(r.ident.to_string())),
            syn::UseTree::Glob(_) => self.push_use(prefix, None),
            syn::UseTree::Group(g) => {
                for tree in &g.items {
                    self.use_tree(prefix.clone(), tree);
                }
            }
        }
    }

    fn push_use(&mut self, mut segments: Vec<String>, last: Option<String>) {
        if let Some(last) = last.filter(|l| l != "self") {
            segments.push(last);
        }
        let absolute = self.absolute(segments);
        self.found.push(absolute);
    }
}

impl<'ast> Visit<'ast> for Names {
    fn visit_item_use(&mut self, item: &'ast syn::ItemUse) {
        self.use_tree(Vec::new(), &item.tree);
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        let segments = path.segments.iter().map(|s| s.ident.to_string()).collect();
        let absolute = self.absolute(segments);
        self.found.push(absolute);
        syn::visit::visit_path(self, path);
    }

    /// `pub(crate)` is a visibility, not a use of the crate root.
    fn visit_visibility(&mut self, _: &'ast syn::Visibility) {}

    fn visit_impl_item_fn(&mut self, item: &'ast syn::ImplItemFn) {
        if !is_test_only(&item.attrs) {
            syn::visit::visit_impl_item_fn(self, item);
        }
    }

    fn visit_item_mod(&mut self, item: &'ast syn::ItemMod) {
        if !is_test_only(&item.attrs) {
            syn::visit::visit_item_mod(self, item);
        }
    }
}
