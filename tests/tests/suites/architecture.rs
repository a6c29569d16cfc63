//! The house's rules, checked on its sources: no module imports one that
//! imports it back, in any crate of the repository (the module graph of
//! every crate is acyclic), and ARCHITECTURE.md stays short and names only
//! files that exist.
//!
//! A module is a file (`lib.rs`, `main.rs`, `foo.rs`, `foo/mod.rs`) reached
//! from a crate root by `mod` declarations; an edge runs from a module to
//! every module a path in its code names (`use` trees, and paths written
//! in place: `crate::a::b`, `super::c`, `self::d`, a child's name), the
//! module being the longest prefix of the path that is one. An item a
//! parent re-exports is the parent's: a child that names `crate::Thing`
//! imports the crate root. Code under `#[cfg(test)]` is left out (tests
//! beside the code import what they test), and so are comments and
//! strings. `mod` declarations draw no edge: a parent that only declares
//! and re-exports its children imports them, and none imports it back.
//!
//! On failure the test names each cycle with the paths that tie it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

type Module = Vec<String>;

/// One crate: its modules by path, each with its file.
struct Crate {
    root: PathBuf,
    modules: BTreeMap<Module, PathBuf>,
}

#[test]
fn no_module_should_import_one_that_imports_it_back() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the tests crate sits in the repository");
    let crates = crates(repo);
    assert!(
        crates.len() >= 7,
        "found only {} crates under {}",
        crates.len(),
        repo.display()
    );
    let mut cycles = Vec::new();
    let mut modules = 0;
    for krate in &crates {
        modules += krate.modules.len();
        let edges = edges(krate);
        for component in strongly_connected(&krate.modules, &edges) {
            let mut lines = vec![format!("a cycle in {}:", krate.root.display())];
            for from in &component {
                for (to, named) in edges.get(from).into_iter().flatten() {
                    if component.contains(to) {
                        lines.push(format!(
                            "  {} -> {}: {}",
                            show(krate, from),
                            show(krate, to),
                            named.iter().cloned().collect::<Vec<_>>().join(", ")
                        ));
                    }
                }
            }
            cycles.push(lines.join("\n"));
        }
    }
    assert!(modules > 100, "found only {modules} modules");
    assert!(cycles.is_empty(), "{}", cycles.join("\n"));
}

#[test]
fn architecture_md_should_be_short_and_name_only_what_exists() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the tests crate sits in the repository");
    let text = std::fs::read_to_string(repo.join("ARCHITECTURE.md")).expect("ARCHITECTURE.md");
    let lines = text.lines().count();
    assert!(
        lines < 200,
        "ARCHITECTURE.md has {lines} lines, 200 at most"
    );
    let missing = missing_paths(repo, &text);
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md names what does not exist: {missing:?}"
    );
}

#[test]
fn the_path_check_should_find_a_file_that_is_gone() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the tests crate sits in the repository");
    let text =
        "### `runtime/`\n`lib.rs` and `action/plan.rs`, `gone.rs`, `no/such/dir/`, `Plugin::map`\n";
    assert_eq!(missing_paths(repo, text), vec!["gone.rs", "no/such/dir/"]);
}

/// The backquoted paths of `text` (with a `/`, or a file name with an
/// extension) that name nothing: from the repository's root, or anywhere
/// under a directory the section's heading names (`### \`runtime/\``).
fn missing_paths(repo: &Path, text: &str) -> Vec<String> {
    let mut sections: Vec<PathBuf> = Vec::new();
    let mut missing = Vec::new();
    for line in text.lines() {
        let quoted: Vec<&str> = line.split('`').skip(1).step_by(2).collect();
        if line.starts_with("### ") {
            sections = quoted
                .iter()
                .filter(|dir| dir.ends_with('/'))
                .map(|dir| repo.join(dir))
                .collect();
        }
        for path in quoted {
            let is_path = path
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "_.-/".contains(c))
                && (path.contains('/')
                    || [".rs", ".md", ".toml", ".wit"]
                        .iter()
                        .any(|e| path.ends_with(e)));
            let tail = path.trim_end_matches('/');
            if is_path && !repo.join(path).exists() && !sections.iter().any(|dir| under(dir, tail))
            {
                missing.push(path.to_owned());
            }
        }
    }
    missing
}

/// Whether a file or directory under `dir` has a path ending in `tail`.
fn under(dir: &Path, tail: &str) -> bool {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return false;
    };
    entries.flatten().any(|entry| {
        let path = entry.path();
        let name = entry.file_name();
        if matches!(name.to_str(), Some("target" | "node_modules")) {
            return false;
        }
        path.to_string_lossy().ends_with(&format!("/{tail}"))
            || (path.is_dir() && under(&path, tail))
    })
}

#[test]
fn the_checker_should_see_a_cycle_through_a_re_export() {
    let dir = tempfile::tempdir().expect("tempdir");
    let src = dir.path().join("src");
    std::fs::create_dir_all(src.join("a")).expect("mkdir");
    let write = |path: &str, text: &str| std::fs::write(src.join(path), text).expect("write");
    write("lib.rs", "mod a;\nmod b;\npub use b::Thing;\n");
    write(
        "a/mod.rs",
        "// crate::b::Nothing in a comment\nmod c;\nfn f() -> &'static str { \"super::b\" }\n",
    );
    write(
        "a/c.rs",
        "use super::super::b::{self as bee, Other};\nmod inner { use super::Local; }\n",
    );
    write(
        "b.rs",
        "pub struct Thing;\npub struct Other;\n#[cfg(test)]\nmod tests { use crate::a::c; }\nfn g() { crate::Thing; }\n",
    );
    let krate = Crate {
        root: dir.path().to_owned(),
        modules: modules(&src.join("lib.rs")),
    };
    let edges = edges(&krate);
    let cycles = strongly_connected(&krate.modules, &edges);
    let m = |s: &str| -> Module {
        s.split("::")
            .filter(|s| !s.is_empty())
            .map(String::from)
            .collect()
    };
    assert_eq!(cycles, vec![BTreeSet::from([m(""), m("b")])]);
    assert!(edges[&m("a::c")].contains_key(&m("b")));
    assert!(
        !edges.contains_key(&m("a")),
        "comments and strings name nothing"
    );
}

/// Every crate under `repo` (a directory with a `Cargo.toml` and a `src/`),
/// build output and vendored trees aside; a crate's binaries are crates of
/// their own.
fn crates(repo: &Path) -> Vec<Crate> {
    let mut found = Vec::new();
    let mut dirs = vec![repo.to_owned()];
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            if path.is_dir()
                && !name.starts_with('.')
                && !matches!(name.as_str(), "target" | "node_modules" | "src")
            {
                dirs.push(path);
            }
        }
        let src = dir.join("src");
        if !dir.join("Cargo.toml").is_file() || !src.is_dir() {
            continue;
        }
        let mut roots: Vec<PathBuf> = ["lib.rs", "main.rs"]
            .iter()
            .map(|f| src.join(f))
            .filter(|p| p.is_file())
            .collect();
        if let Ok(bins) = std::fs::read_dir(src.join("bin")) {
            for bin in bins.flatten().map(|e| e.path()) {
                if bin.extension().is_some_and(|e| e == "rs") {
                    roots.push(bin);
                } else if bin.join("main.rs").is_file() {
                    roots.push(bin.join("main.rs"));
                }
            }
        }
        for root in roots {
            found.push(Crate {
                modules: modules(&root),
                root,
            });
        }
    }
    found
}

/// The modules reached from `root` by `mod` declarations outside
/// `#[cfg(test)]`.
fn modules(root: &Path) -> BTreeMap<Module, PathBuf> {
    let mut modules = BTreeMap::new();
    let mut pending = vec![(Module::new(), root.to_owned())];
    while let Some((module, file)) = pending.pop() {
        let Ok(text) = std::fs::read_to_string(&file) else {
            continue;
        };
        let code = without_tests(&strip(&text));
        // A root, a mod.rs or main.rs keeps its children beside it; a.rs
        // keeps them in a/.
        let stem = file.file_stem().map(|s| s.to_string_lossy().into_owned());
        let dir = match stem.as_deref() {
            Some("lib" | "main" | "mod") => file.parent().map(Path::to_owned),
            _ if module.is_empty() => file.parent().map(Path::to_owned),
            Some(stem) => file.parent().map(|p| p.join(stem)),
            None => None,
        };
        if let Some(dir) = dir {
            for child in declared_files(&code) {
                let candidates = [
                    dir.join(format!("{child}.rs")),
                    dir.join(&child).join("mod.rs"),
                ];
                if let Some(path) = candidates.into_iter().find(|p| p.is_file()) {
                    let mut path_of = module.clone();
                    path_of.push(child);
                    pending.push((path_of, path));
                }
            }
        }
        modules.insert(module, file);
    }
    modules
}

/// The names of `mod name;` declarations (inline modules are the file's).
fn declared_files(code: &str) -> Vec<String> {
    let tokens = tokens(code);
    tokens
        .windows(3)
        .filter(|w| w[0] == "mod" && w[2] == ";" && is_ident(&w[1]))
        .map(|w| w[1].clone())
        .collect()
}

/// From each module, the modules it names, with the paths that name them.
fn edges(krate: &Crate) -> BTreeMap<Module, BTreeMap<Module, BTreeSet<String>>> {
    let mut edges: BTreeMap<Module, BTreeMap<Module, BTreeSet<String>>> = BTreeMap::new();
    for (module, file) in &krate.modules {
        let Ok(text) = std::fs::read_to_string(file) else {
            continue;
        };
        let tokens = tokens(&without_tests(&strip(&text)));
        for (inline, path) in paths(&tokens) {
            let mut at = module.clone();
            at.extend(inline);
            if let Some(target) = resolve(krate, &at, &path)
                && &target != module
            {
                edges
                    .entry(module.clone())
                    .or_default()
                    .entry(target)
                    .or_default()
                    .insert(path.join("::"));
            }
        }
    }
    edges
}

/// The module a path written in `module` (a file's, or an inline module
/// inside it) names: the longest prefix of it that is a file of the crate.
/// `None` for a path outside the crate.
fn resolve(krate: &Crate, module: &Module, path: &[String]) -> Option<Module> {
    let mut segments = path.iter().peekable();
    let mut at: Module = match segments.peek().map(|s| s.as_str()) {
        Some("crate" | "$crate") => {
            segments.next();
            Module::new()
        }
        Some("self") => {
            segments.next();
            module.clone()
        }
        Some("super") => {
            let mut at = module.clone();
            while segments.peek().is_some_and(|s| *s == "super") {
                segments.next();
                at.pop();
            }
            at
        }
        Some(first) => {
            let mut child = module.clone();
            child.push(first.to_owned());
            if !krate.modules.contains_key(&child) {
                return None;
            }
            module.clone()
        }
        None => return None,
    };
    at.extend(segments.cloned());
    while !krate.modules.contains_key(&at) {
        at.pop()?;
    }
    Some(at)
}

/// Every path the code names, with the inline modules it is written in:
/// each leaf of a `use` tree whole, and each path written in place
/// (`a::b::c`, from its first segment).
fn paths(tokens: &[String]) -> Vec<(Module, Vec<String>)> {
    let mut found = Vec::new();
    // The inline modules open here, each with the depth of its brace.
    let mut inline: Vec<(String, usize)> = Vec::new();
    let mut depth = 0;
    let mut i = 0;
    while i < tokens.len() {
        match tokens[i].as_str() {
            "mod" if tokens.get(i + 2).is_some_and(|t| t == "{") => {
                depth += 1;
                inline.push((tokens[i + 1].clone(), depth));
                i += 3;
                continue;
            }
            "{" => depth += 1,
            "}" => {
                if inline.last().is_some_and(|(_, d)| *d == depth) {
                    inline.pop();
                }
                depth = depth.saturating_sub(1);
            }
            _ => {}
        }
        if tokens[i] == "use" {
            let end = tokens[i..]
                .iter()
                .position(|t| t == ";")
                .map_or(tokens.len(), |p| i + p);
            let mut leaves = Vec::new();
            use_tree(&tokens[i + 1..end], &mut Vec::new(), &mut leaves);
            found.extend(leaves.into_iter().map(|leaf| (scope(&inline), leaf)));
            i = end + 1;
            continue;
        }
        let starts = is_ident(&tokens[i])
            && tokens.get(i + 1).is_some_and(|t| t == "::")
            && (i == 0 || tokens[i - 1] != "::");
        if starts {
            let mut path = vec![tokens[i].clone()];
            let mut j = i + 1;
            while tokens.get(j).is_some_and(|t| t == "::")
                && tokens.get(j + 1).is_some_and(|t| is_ident(t))
            {
                path.push(tokens[j + 1].clone());
                j += 2;
            }
            found.push((scope(&inline), path));
            i = j;
            continue;
        }
        i += 1;
    }
    found
}

/// The names of the inline modules open.
fn scope(inline: &[(String, usize)]) -> Module {
    inline.iter().map(|(name, _)| name.clone()).collect()
}

/// Expands a `use` tree (`a::{b, c::{d as e, *}}`) into its leaves,
/// `self` leaves naming their parent.
fn use_tree(tokens: &[String], prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    let mut i = 0;
    let depth = prefix.len();
    while i < tokens.len() {
        match tokens[i].as_str() {
            "::" | "pub" | "(" | ")" | "in" => i += 1,
            "{" => {
                let close = matching(tokens, i);
                for item in split_top(&tokens[i + 1..close]) {
                    use_tree(item, prefix, out);
                }
                prefix.truncate(depth);
                return;
            }
            "*" => break,
            "as" => {
                break;
            }
            "self" if i > 0 || depth > 0 => break,
            ident => {
                prefix.push(ident.to_owned());
                i += 1;
            }
        }
    }
    if prefix.len() > depth || tokens.first().is_some_and(|t| t == "self" || t == "*") {
        out.push(prefix.clone());
    }
    prefix.truncate(depth);
}

/// The index of the `}` closing the `{` at `open`.
fn matching(tokens: &[String], open: usize) -> usize {
    let mut depth = 0;
    for (i, t) in tokens.iter().enumerate().skip(open) {
        match t.as_str() {
            "{" => depth += 1,
            "}" => {
                depth -= 1;
                if depth == 0 {
                    return i;
                }
            }
            _ => {}
        }
    }
    tokens.len()
}

/// The comma-separated items of a brace group, nested groups kept whole.
fn split_top(tokens: &[String]) -> Vec<&[String]> {
    let mut items = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (i, t) in tokens.iter().enumerate() {
        match t.as_str() {
            "{" => depth += 1,
            "}" => depth -= 1,
            "," if depth == 0 => {
                items.push(&tokens[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    items.push(&tokens[start..]);
    items.retain(|item| !item.is_empty());
    items
}

fn is_ident(token: &str) -> bool {
    token
        .chars()
        .next()
        .is_some_and(|c| c.is_alphabetic() || c == '_' || c == '$')
}

/// The code as tokens: identifiers (with a leading `$`), `::`, and every
/// other character on its own.
fn tokens(code: &str) -> Vec<String> {
    let chars: Vec<char> = code.chars().collect();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
        } else if c.is_alphanumeric() || c == '_' || c == '$' {
            let start = i;
            i += 1;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            // `r#type` is `type`.
            tokens.push(word.strip_prefix("r#").map_or(word.clone(), String::from));
        } else if c == ':' && chars.get(i + 1) == Some(&':') {
            tokens.push("::".into());
            i += 2;
        } else {
            tokens.push(c.to_string());
            i += 1;
        }
    }
    tokens
}

/// The text with comments, strings and character literals blanked (their
/// line breaks kept), lifetimes left alone.
fn strip(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let blank = |out: &mut String, cs: &[char]| {
        out.extend(cs.iter().map(|&c| if c == '\n' { '\n' } else { ' ' }));
    };
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        let start = i;
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if c == 'r'
            && (next == Some('"') || next == Some('#'))
            && (i == 0 || !(chars[i - 1].is_alphanumeric() || chars[i - 1] == '_'))
            && raw_string_end(&chars, i).is_some()
        {
            i = raw_string_end(&chars, i).unwrap_or(chars.len());
        } else if c == '"' {
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                i += if chars[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
        } else if c == '\'' && next == Some('\\') {
            i += 2;
            while i < chars.len() && chars[i] != '\'' {
                i += 1;
            }
            i += 1;
        } else if c == '\'' && chars.get(i + 2) == Some(&'\'') {
            i += 3;
        } else {
            out.push(c);
            i += 1;
            continue;
        }
        let end = i.min(chars.len());
        blank(&mut out, &chars[start..end]);
    }
    out
}

/// Where the raw string opening at `start` (`r"`, `r#"`, ...) ends.
fn raw_string_end(chars: &[char], start: usize) -> Option<usize> {
    let mut i = start + 1;
    let mut hashes = 0;
    while chars.get(i) == Some(&'#') {
        hashes += 1;
        i += 1;
    }
    if chars.get(i) != Some(&'"') {
        return None;
    }
    i += 1;
    while i < chars.len() {
        if chars[i] == '"' && (1..=hashes).all(|h| chars.get(i + h) == Some(&'#')) {
            return Some(i + 1 + hashes);
        }
        i += 1;
    }
    Some(chars.len())
}

/// The code without the items under `#[cfg(test)]` (a `mod tests { .. }`,
/// a `mod tests;`, a test-only function or import).
fn without_tests(code: &str) -> String {
    const MARK: &str = "#[cfg(test)]";
    let mut out = String::with_capacity(code.len());
    let mut rest = code;
    while let Some(at) = rest.find(MARK) {
        out.push_str(&rest[..at]);
        let item = &rest[at + MARK.len()..];
        // The item ends at its first `;` outside braces, or with the brace
        // group it opens.
        let mut depth = 0usize;
        let mut end = item.len();
        for (i, c) in item.char_indices() {
            match c {
                '{' => depth += 1,
                // The end of the scope holding the item (a field's, an
                // arm's): the item ends before it.
                '}' if depth == 0 => {
                    end = i;
                    break;
                }
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = i + 1;
                        break;
                    }
                }
                ';' if depth == 0 => {
                    end = i + 1;
                    break;
                }
                _ => {}
            }
        }
        rest = &item[end..];
    }
    out.push_str(rest);
    out
}

/// The strongly connected components of more than one module (Tarjan).
fn strongly_connected(
    modules: &BTreeMap<Module, PathBuf>,
    edges: &BTreeMap<Module, BTreeMap<Module, BTreeSet<String>>>,
) -> Vec<BTreeSet<Module>> {
    struct Walk<'a> {
        edges: &'a BTreeMap<Module, BTreeMap<Module, BTreeSet<String>>>,
        index: BTreeMap<&'a Module, usize>,
        low: BTreeMap<&'a Module, usize>,
        stack: Vec<&'a Module>,
        on_stack: BTreeSet<&'a Module>,
        found: Vec<BTreeSet<Module>>,
    }
    impl<'a> Walk<'a> {
        fn visit(&mut self, v: &'a Module) {
            let n = self.index.len();
            self.index.insert(v, n);
            self.low.insert(v, n);
            self.stack.push(v);
            self.on_stack.insert(v);
            for w in self.edges.get(v).into_iter().flat_map(BTreeMap::keys) {
                if !self.index.contains_key(w) {
                    self.visit(w);
                    let low = self.low[v].min(self.low[w]);
                    self.low.insert(v, low);
                } else if self.on_stack.contains(w) {
                    let low = self.low[v].min(self.index[w]);
                    self.low.insert(v, low);
                }
            }
            if self.low[v] == self.index[v] {
                let mut component = BTreeSet::new();
                while let Some(w) = self.stack.pop() {
                    self.on_stack.remove(w);
                    component.insert(w.clone());
                    if w == v {
                        break;
                    }
                }
                if component.len() > 1 {
                    self.found.push(component);
                }
            }
        }
    }
    let mut walk = Walk {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for module in modules.keys() {
        if !walk.index.contains_key(module) {
            walk.visit(module);
        }
    }
    walk.found
}

fn show(krate: &Crate, module: &Module) -> String {
    krate
        .modules
        .get(module)
        .map_or_else(|| module.join("::"), |file| file.display().to_string())
}
