//! Pins the one route table (`engram::api::ROUTES`) that the HTTP server, the C API's `engram_request`, the
//! OpenAPI document and the fuzzing all read: order, method, path, operationId, query parameters, body and
//! response schema, and whether the route is public. A change to the table shows up as a diff of
//! `tests/snapshots/routes.txt`; run with `ENGRAM_BLESS=1` to accept it.

use engram::api::ROUTES;

fn table() -> String {
    let mut out = String::new();
    for r in ROUTES {
        let query: Vec<String> =
            r.query.iter().map(|p| if p.required { format!("{}!", p.name) } else { p.name.to_string() }).collect();
        out.push_str(&format!(
            "{} {} {} query=[{}] body={} response={:?}{}\n",
            r.method,
            r.path,
            r.operation_id,
            query.join(","),
            r.body.unwrap_or("-"),
            r.response,
            if r.public { " public" } else { "" }
        ));
    }
    out
}

#[test]
fn the_route_table_is_pinned() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/snapshots/routes.txt");
    let now = table();
    if std::env::var_os("ENGRAM_BLESS").is_some() {
        std::fs::write(path, &now).expect("write snapshot");
        return;
    }
    let pinned = std::fs::read_to_string(path).expect("tests/snapshots/routes.txt (ENGRAM_BLESS=1 writes it)");
    if pinned != now {
        let diff: Vec<String> = diff_lines(&pinned, &now);
        panic!("the route table changed (ENGRAM_BLESS=1 accepts it):\n{}", diff.join("\n"));
    }
}

fn diff_lines(old: &str, new: &str) -> Vec<String> {
    let (o, n): (Vec<&str>, Vec<&str>) = (old.lines().collect(), new.lines().collect());
    let mut out: Vec<String> = o.iter().filter(|l| !n.contains(l)).map(|l| format!("- {l}")).collect();
    out.extend(n.iter().filter(|l| !o.contains(l)).map(|l| format!("+ {l}")));
    if out.is_empty() {
        out.push("(same lines, other order)".into());
    }
    out
}

#[test]
fn method_and_path_are_unique() {
    let mut seen = std::collections::HashSet::new();
    for r in ROUTES {
        assert!(seen.insert((r.method, r.path)), "{} {} twice", r.method, r.path);
        assert!(!r.operation_id.is_empty());
    }
    assert!(ROUTES.len() >= 100, "{} routes", ROUTES.len());
}
