//! Pins the one route table (`engram::api::ROUTES`) that the HTTP server, the C API's `engram_request`, the
//! OpenAPI document and the fuzzing all read: order, method, path, operationId, query parameters, body and
//! response schema, and whether the route is public. A change to the table shows up as a diff of
//! `tests/snapshots/routes.txt`; run with `ENGRAM_BLESS=1` to accept it.

use engram::api::ROUTES;

fn table() -> String {
    let mut out = String::new();
    for r in ROUTES.iter() {
        let query: Vec<String> =
            r.query.iter().map(|p| if p.required { format!("{}!", p.name) } else { p.name.to_string() }).collect();
        out.push_str(&format!(
            "{} {} {} query=[{}] body={} response={:?}{}\n",
            r.method,
            r.path,
            r.operation_id,
            query.join(","),
            r.body.map_or("-".into(), |d| d.name()),
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
    for r in ROUTES.iter() {
        assert!(seen.insert((r.method, r.path)), "{} {} twice", r.method, r.path);
        assert!(!r.operation_id.is_empty());
    }
    assert!(ROUTES.len() >= 100, "{} routes", ROUTES.len());
}

/// Dispatch picks, among the routes of a method whose template matches, the one with the most literal
/// segments; the table's order must never decide. Two templates tie when some path matches both with as many
/// literals: same segment count, equal literals wherever both have one, and equal literal counts.
#[test]
fn no_two_routes_can_tie_so_the_order_never_decides() {
    let segs = |p: &'static str| -> Vec<&'static str> { p.trim_matches('/').split('/').collect() };
    let is_param = |s: &str| s.starts_with('{');
    for (i, a) in ROUTES.iter().enumerate() {
        for b in ROUTES.iter().skip(i + 1) {
            if a.method != b.method {
                continue;
            }
            let (sa, sb) = (segs(a.path), segs(b.path));
            if sa.len() != sb.len() {
                continue;
            }
            let compatible = sa.iter().zip(&sb).all(|(x, y)| is_param(x) || is_param(y) || x == y);
            let literals = |s: &[&str]| s.iter().filter(|x| !is_param(x)).count();
            assert!(
                !(compatible && literals(&sa) == literals(&sb)),
                "{} {} and {} tie: the table order would decide",
                a.method,
                a.path,
                b.path
            );
        }
    }
}

/// `limit` is checked in one place: the route's declaration, which [`engram::api::Query::parse`] applies before
/// the handler runs and handlers read through `Query::limit`. So every route that takes a `limit` declares it
/// as an integer with a lower bound of at least 1, an upper bound and a default.
#[test]
fn every_limit_is_declared_with_bounds_and_a_default() {
    let mut seen = 0;
    for r in ROUTES.iter() {
        for p in r.query.iter().filter(|p| p.name == "limit") {
            seen += 1;
            match p.kind {
                engram::api::ParamKind::Int { min, max: Some(max), default: Some(d) } => {
                    assert!(
                        min >= 1 && (min..=max).contains(&d),
                        "{} {}: limit {min}..={max}, default {d}",
                        r.method,
                        r.path
                    )
                }
                other => panic!("{} {}: limit is declared as {other:?}", r.method, r.path),
            }
        }
    }
    assert!(seen >= 20, "{seen} routes take a limit");
}
