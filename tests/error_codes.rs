//! The error table of `docs/api.md` is the one in `src/error.rs` ([`ErrorKind::row`] and [`ErrorCode`]): every
//! code with its HTTP status, C code and retryability, and no code the table does not have. On a mismatch the
//! test prints the table to paste into the document.

use engram::{ErrorCode, ErrorKind};

fn expected_table() -> String {
    let mut rows: Vec<(u16, u8, String)> = Vec::new();
    for k in ErrorKind::ALL {
        let r = k.row();
        let retry = if r.retryable { "yes" } else { "no" };
        rows.push((
            r.http_status,
            0,
            format!("| {} | `{}` | {} | {retry} | {} |", r.http_status, r.code, r.c_code, k.when()),
        ));
    }
    for c in ErrorCode::ALL {
        let r = c.kind().row();
        let retry = if r.retryable { "yes" } else { "no" };
        rows.push((
            r.http_status,
            1,
            format!("| {} | `{}` | {} | {retry} | {} |", r.http_status, c.as_str(), r.c_code, c.when()),
        ));
    }
    // Stable: by status, the kind's own code first, then the specific codes in table order.
    rows.sort_by_key(|r| (r.0, r.1));
    let mut out = String::from("| HTTP | `error_code` | C code | Retryable | When |\n|---|---|---|---|---|\n");
    for (_, _, line) in rows {
        out.push_str(&line);
        out.push('\n');
    }
    out
}

#[test]
fn docs_api_md_error_table_is_the_code_table() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/api.md");
    let doc = std::fs::read_to_string(path).expect("docs/api.md");
    let want = expected_table();
    if std::env::var_os("ENGRAM_BLESS").is_some() && !doc.contains(&want) {
        // The table starts at its header row and ends at the first line that is no table row.
        let start = doc.find("| HTTP | `error_code` |").expect("the error table's header row");
        let len = doc[start..].lines().take_while(|l| l.starts_with('|')).map(|l| l.len() + 1).sum::<usize>();
        let blessed = format!("{}{}{}", &doc[..start], want, &doc[start + len..]);
        std::fs::write(path, blessed).expect("write docs/api.md");
        return;
    }
    assert!(
        doc.contains(&want),
        "docs/api.md's error table differs from src/error.rs (ENGRAM_BLESS=1 rewrites it); it should be:\n\n{want}"
    );
}

#[test]
fn codes_are_unique_and_kinds_consistent() {
    let mut seen = std::collections::HashSet::new();
    for k in ErrorKind::ALL {
        assert!(seen.insert(k.row().code), "duplicate code {}", k.row().code);
    }
    for c in ErrorCode::ALL {
        assert!(seen.insert(c.as_str()), "duplicate code {}", c.as_str());
        let e = engram::Error::coded(*c, "x");
        assert_eq!(e.code(), c.as_str());
        assert_eq!(e.kind(), c.kind());
        assert_eq!(e.specific_code(), Some(*c));
    }
    let c_codes: std::collections::HashSet<i32> = ErrorKind::ALL.iter().map(|k| k.row().c_code).collect();
    assert_eq!(c_codes.len(), ErrorKind::ALL.len(), "C codes are unique per kind");
}
