//! Delimited data files (CSV and TSV, RFC 4180 quoting) for the library: parsing with the `csv` crate, typed
//! column statistics ([`analyze`], served by `GET /sources/{id}/analysis` and the MCP tool
//! `analyze_source_data`), and the text the library indexes ([`render`]: one line per row of `column: value`
//! pairs, chunks of whole rows, so a search for a value finds its row).
//!
//! Types are inferred per column over its non-null cells: the narrowest of `boolean` (`true`/`false`/`yes`/`no`,
//! any case), `integer` (i64), `float` (finite f64), `date` (ISO 8601 `YYYY-MM-DD`, optionally with a time),
//! then `string`; a column of nulls only is `empty`. Null cells are empty or `N/A`, `null`, `none`, `nan`, `-`
//! (any case, trimmed); not `NA`, which is also Namibia's country code (pandas reads it as null and loses
//! those rows of the world-cities data set).

use std::collections::HashMap;

use serde::Serialize;
use utoipa::ToSchema;

use super::document::{CHUNK_CHARS, Chunk, Parsed};

/// Most distinct values listed in a column's `top`.
pub const TOP_VALUES: usize = 5;

/// A parsed delimited file: header names (made unique and non-empty) and rows of cells (each row as long as
/// the header; missing cells are empty).
#[derive(Debug, Clone, PartialEq)]
pub struct Table {
    /// Column names, in file order.
    pub headers: Vec<String>,
    /// Rows, without the header.
    pub rows: Vec<Vec<String>>,
    /// The field delimiter used (`,`, `;` or tab).
    pub delimiter: u8,
}

/// The delimiter of a `.csv` file: `;` when the first line has more semicolons than commas (spreadsheets in
/// locales with a decimal comma write that), else `,`.
fn sniff(bytes: &[u8]) -> u8 {
    let first = bytes.split(|b| *b == b'\n').next().unwrap_or(&[]);
    let count = |c: u8| first.iter().filter(|b| **b == c).count();
    if count(b';') > count(b',') { b';' } else { b',' }
}

/// Parses `bytes` (UTF-8; invalid bytes replaced by U+FFFD, a byte-order mark dropped) as a delimited file
/// with a header row; `tab` for TSV, else the delimiter is sniffed (`,` or `;`). Rows may have fewer or more
/// cells than the header (extra cells get columns `column_N`, N from 1).
///
/// # Errors
/// A message when the file has no header row, or the `csv` crate reports a malformed record (with its line).
pub fn parse(bytes: &[u8], tab: bool) -> Result<Table, String> {
    let text = String::from_utf8_lossy(bytes);
    let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
    let delimiter = if tab { b'\t' } else { sniff(text.as_bytes()) };
    let mut reader =
        csv::ReaderBuilder::new().delimiter(delimiter).has_headers(false).flexible(true).from_reader(text.as_bytes());
    let mut records = reader.records();
    let header = match records.next() {
        Some(Ok(h)) => h,
        Some(Err(e)) => return Err(format!("the header row could not be read: {e}")),
        None => return Err("the file is empty: a header row is needed".into()),
    };
    let mut headers: Vec<String> = header.iter().map(|h| h.trim().to_string()).collect();
    let mut rows = Vec::new();
    for r in records {
        let r = r.map_err(|e| format!("a row could not be read: {e}"))?;
        if r.iter().all(|c| c.trim().is_empty()) {
            continue;
        }
        rows.push(r.iter().map(str::to_string).collect::<Vec<_>>());
    }
    let width = rows.iter().map(Vec::len).max().unwrap_or(0).max(headers.len());
    headers.resize(width, String::new());
    let mut seen: HashMap<String, usize> = HashMap::new();
    for (i, h) in headers.iter_mut().enumerate() {
        if h.is_empty() {
            *h = format!("column_{}", i + 1);
        }
        let n = seen.entry(h.clone()).or_insert(0);
        *n += 1;
        if *n > 1 {
            *h = format!("{h}_{n}");
        }
    }
    for r in &mut rows {
        r.resize(width, String::new());
    }
    Ok(Table { headers, rows, delimiter })
}

/// Whether a cell counts as missing.
pub fn is_null(cell: &str) -> bool {
    let c = cell.trim();
    c.is_empty() || ["n/a", "null", "none", "nan", "-"].iter().any(|n| c.eq_ignore_ascii_case(n))
}

fn parse_bool(c: &str) -> Option<bool> {
    match c.to_ascii_lowercase().as_str() {
        "true" | "yes" => Some(true),
        "false" | "no" => Some(false),
        _ => None,
    }
}

/// ISO 8601 dates, optionally with a time: `2024-03-01`, `2024-03-01T09:30`, `2024-03-01 09:30:00Z`.
fn is_date(c: &str) -> bool {
    let b = c.as_bytes();
    let digits = |r: std::ops::Range<usize>| b.get(r).is_some_and(|s| s.iter().all(u8::is_ascii_digit));
    if b.len() < 10 || !digits(0..4) || b[4] != b'-' || !digits(5..7) || b[7] != b'-' || !digits(8..10) {
        return false;
    }
    let (m, d) = ((b[5] - b'0') * 10 + (b[6] - b'0'), (b[8] - b'0') * 10 + (b[9] - b'0'));
    if !(1..=12).contains(&m) || !(1..=31).contains(&d) {
        return false;
    }
    b.len() == 10 || ((b[10] == b'T' || b[10] == b' ') && digits(11..13) && b.get(13) == Some(&b':'))
}

/// A column's inferred type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Dtype {
    /// Only null cells.
    Empty,
    /// `true`/`false`/`yes`/`no`.
    Boolean,
    /// 64-bit signed integers.
    Integer,
    /// Finite floating-point numbers (integers mixed in are fine).
    Float,
    /// ISO 8601 dates or date-times.
    Date,
    /// Anything else.
    String,
}

/// One of a column's most frequent values.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct TopValue {
    /// The cell, trimmed.
    pub value: String,
    /// Rows holding it.
    pub count: u64,
}

/// Statistics of one column.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct ColumnStats {
    /// Column name (from the header row).
    pub name: String,
    /// Inferred type.
    pub dtype: Dtype,
    /// Rows (null cells included).
    pub count: u64,
    /// Cells that are not null ([`is_null`]).
    pub non_null_count: u64,
    /// Null cells.
    pub null_count: u64,
    /// Distinct non-null values.
    pub unique_count: u64,
    /// Smallest value: a number for `integer` and `float`, the earliest ISO text for `date`; null otherwise.
    pub min: serde_json::Value,
    /// Largest value, as `min`.
    pub max: serde_json::Value,
    /// Arithmetic mean of `integer` and `float` columns; null otherwise.
    pub mean: Option<f64>,
    /// The [`TOP_VALUES`] most frequent non-null values, most frequent first (ties by value).
    pub top: Vec<TopValue>,
}

/// Statistics of one table (a CSV or TSV file is one sheet).
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct SheetAnalysis {
    /// The file name.
    pub sheet_name: String,
    /// Data rows (the header excluded).
    pub row_count: u64,
    /// Columns in the file.
    pub column_count: u64,
    /// The columns asked for (all by default), in file order.
    pub columns: Vec<ColumnStats>,
}

fn number(v: f64) -> serde_json::Value {
    serde_json::Number::from_f64(v).map(serde_json::Value::Number).unwrap_or(serde_json::Value::Null)
}

/// Statistics of column `i` of `table`.
pub fn column_stats(table: &Table, i: usize) -> ColumnStats {
    let cells: Vec<&str> = table.rows.iter().map(|r| r.get(i).map(|c| c.trim()).unwrap_or("")).collect();
    let values: Vec<&str> = cells.iter().copied().filter(|c| !is_null(c)).collect();
    let dtype = if values.is_empty() {
        Dtype::Empty
    } else if values.iter().all(|c| parse_bool(c).is_some()) {
        Dtype::Boolean
    } else if values.iter().all(|c| c.parse::<i64>().is_ok()) {
        Dtype::Integer
    } else if values.iter().all(|c| c.parse::<f64>().is_ok_and(f64::is_finite)) {
        Dtype::Float
    } else if values.iter().all(|c| is_date(c)) {
        Dtype::Date
    } else {
        Dtype::String
    };
    let mut freq: HashMap<&str, u64> = HashMap::new();
    for v in &values {
        *freq.entry(v).or_insert(0) += 1;
    }
    let mut top: Vec<(&str, u64)> = freq.iter().map(|(v, n)| (*v, *n)).collect();
    top.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    let top = top.into_iter().take(TOP_VALUES).map(|(v, n)| TopValue { value: v.to_string(), count: n }).collect();
    let (mut min, mut max, mut mean) = (serde_json::Value::Null, serde_json::Value::Null, None);
    match dtype {
        Dtype::Integer => {
            let nums: Vec<i64> = values.iter().filter_map(|c| c.parse().ok()).collect();
            min = nums.iter().min().map(|v| serde_json::Value::from(*v)).unwrap_or_default();
            max = nums.iter().max().map(|v| serde_json::Value::from(*v)).unwrap_or_default();
            mean = Some(nums.iter().map(|v| *v as f64).sum::<f64>() / nums.len() as f64);
        }
        Dtype::Float => {
            let nums: Vec<f64> = values.iter().filter_map(|c| c.parse().ok()).collect();
            min = number(nums.iter().copied().fold(f64::INFINITY, f64::min));
            max = number(nums.iter().copied().fold(f64::NEG_INFINITY, f64::max));
            mean = Some(nums.iter().sum::<f64>() / nums.len() as f64);
        }
        Dtype::Date => {
            min = values.iter().min().map(|v| serde_json::Value::from(*v)).unwrap_or_default();
            max = values.iter().max().map(|v| serde_json::Value::from(*v)).unwrap_or_default();
        }
        Dtype::Empty | Dtype::Boolean | Dtype::String => {}
    }
    ColumnStats {
        name: table.headers.get(i).cloned().unwrap_or_default(),
        dtype,
        count: cells.len() as u64,
        non_null_count: values.len() as u64,
        null_count: (cells.len() - values.len()) as u64,
        unique_count: freq.len() as u64,
        min,
        max,
        mean,
        top,
    }
}

/// Statistics of the columns of `table` named in `columns` (all when empty), in file order.
///
/// # Errors
/// The names in `columns` that are not columns of the table.
pub fn analyze(table: &Table, name: &str, columns: &[String]) -> Result<SheetAnalysis, Vec<String>> {
    let unknown: Vec<String> = columns.iter().filter(|c| !table.headers.contains(c)).cloned().collect();
    if !unknown.is_empty() {
        return Err(unknown);
    }
    let wanted = |h: &String| columns.is_empty() || columns.contains(h);
    Ok(SheetAnalysis {
        sheet_name: name.to_string(),
        row_count: table.rows.len() as u64,
        column_count: table.headers.len() as u64,
        columns: (0..table.headers.len())
            .filter(|i| wanted(&table.headers[*i]))
            .map(|i| column_stats(table, i))
            .collect(),
    })
}

/// One line describing the table: rows, columns and their types (the source's summary and the memory made
/// from it).
pub fn describe(table: &Table, name: &str) -> String {
    let cols: Vec<String> = (0..table.headers.len())
        .map(|i| {
            let s = column_stats(table, i);
            format!(
                "{} ({})",
                s.name,
                serde_json::to_value(s.dtype).ok().and_then(|v| v.as_str().map(String::from)).unwrap_or_default()
            )
        })
        .collect();
    format!("Data table {name}: {} rows, {} columns: {}.", table.rows.len(), table.headers.len(), cols.join(", "))
}

/// The text the library stores and indexes for a table: [`describe`]'s line, a blank line, then one line per
/// row, `row N: column: value | column: value` (null cells left out), N from 1. Chunks hold whole rows up to
/// [`CHUNK_CHARS`] characters (a longer row is a chunk of its own); each chunk's section is `rows A-B`.
pub fn render(table: &Table, name: &str) -> Parsed {
    let mut text = describe(table, name);
    text.push_str("\n\n");
    let mut chunks: Vec<Chunk> = Vec::new();
    let (mut start, mut first_row) = (text.len(), 1usize);
    for (n, row) in table.rows.iter().enumerate() {
        let cells: Vec<String> = table
            .headers
            .iter()
            .zip(row)
            .filter(|(_, c)| !is_null(c))
            .map(|(h, c)| format!("{h}: {}", c.trim().replace(['\n', '\r'], " ")))
            .collect();
        let line = format!("row {}: {}\n", n + 1, cells.join(" | "));
        if text.len() > start && text.len() - start + line.len() > CHUNK_CHARS {
            chunks.push(Chunk {
                offset: start as u64,
                length: (text.len() - start) as u64,
                section: format!("rows {first_row}-{n}"),
            });
            (start, first_row) = (text.len(), n + 1);
        }
        text.push_str(&line);
    }
    if text.len() > start {
        let last = table.rows.len();
        chunks.push(Chunk {
            offset: start as u64,
            length: (text.len() - start) as u64,
            section: format!("rows {first_row}-{last}"),
        });
    }
    Parsed { text, sections: Vec::new(), chunks, title: None }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn types_nulls_and_statistics() {
        let csv = "name,age,score,joined,active,note\n\
                   Alice,31,4.5,2024-01-05,yes,\n\
                   Bob,null,3,2023-12-31T08:00,no,likes \"tea\"\n\
                   Carol,45,,2024-02-10,true,n/a\n\
                   Alice,28,5.25,2024-03-01,false,\"comma, inside\"\n";
        let t = parse(csv.as_bytes(), false).unwrap();
        assert_eq!(t.headers, ["name", "age", "score", "joined", "active", "note"]);
        assert_eq!(t.rows.len(), 4);
        let a = analyze(&t, "people.csv", &[]).unwrap();
        let col = |n: &str| a.columns.iter().find(|c| c.name == n).unwrap().clone();
        assert_eq!(col("name").dtype, Dtype::String);
        assert_eq!(col("name").top[0], TopValue { value: "Alice".into(), count: 2 });
        assert_eq!(col("name").unique_count, 3);
        let age = col("age");
        assert_eq!((age.dtype, age.non_null_count, age.null_count), (Dtype::Integer, 3, 1));
        assert_eq!((age.min.clone(), age.max.clone()), (serde_json::json!(28), serde_json::json!(45)));
        assert!((age.mean.unwrap() - 104.0 / 3.0).abs() < 1e-9);
        let score = col("score");
        assert_eq!(score.dtype, Dtype::Float);
        assert_eq!((score.min.clone(), score.max.clone()), (serde_json::json!(3.0), serde_json::json!(5.25)));
        assert_eq!(col("joined").dtype, Dtype::Date);
        assert_eq!(col("joined").min, serde_json::json!("2023-12-31T08:00"));
        assert_eq!(col("active").dtype, Dtype::Boolean);
        assert_eq!(col("note").dtype, Dtype::String);
        assert_eq!(col("note").non_null_count, 2);
        assert!(col("note").top.iter().any(|v| v.value == "comma, inside"));
        let only = analyze(&t, "people.csv", &["age".into()]).unwrap();
        assert_eq!(only.columns.len(), 1);
        assert_eq!(analyze(&t, "people.csv", &["agee".into()]).unwrap_err(), vec!["agee".to_string()]);
    }

    #[test]
    fn delimiters_ragged_rows_and_headers() {
        let t = parse("a;b;b\n1;2;3;4\n5\n".as_bytes(), false).unwrap();
        assert_eq!(t.delimiter, b';');
        assert_eq!(t.headers, ["a", "b", "b_2", "column_4"]);
        assert_eq!(t.rows, [vec!["1", "2", "3", "4"], vec!["5", "", "", ""]]);
        let t = parse("x\ty\n1\t2\n".as_bytes(), true).unwrap();
        assert_eq!((t.headers.len(), t.rows[0][1].as_str()), (2, "2"));
        assert!(parse(b"", false).is_err());
        let t = parse("\u{feff}h\n\n  \nv\n".as_bytes(), false).unwrap();
        assert_eq!((t.headers[0].as_str(), t.rows.len()), ("h", 1));
    }

    #[test]
    fn dates_are_checked_not_guessed() {
        for (s, ok) in [
            ("2024-02-29", true),
            ("2024-02-29T10:00:00Z", true),
            ("2024-13-01", false),
            ("2024-1-01", false),
            ("20240101", false),
            ("2024-01-01x", false),
        ] {
            assert_eq!(is_date(s), ok, "{s}");
        }
    }

    #[test]
    fn rows_render_as_searchable_lines_in_whole_row_chunks() {
        let mut csv = String::from("city,population\n");
        for i in 0..200 {
            csv.push_str(&format!("Town{i},{}\n", 1000 + i));
        }
        let t = parse(csv.as_bytes(), false).unwrap();
        let p = render(&t, "towns.csv");
        assert!(p.text.starts_with("Data table towns.csv: 200 rows, 2 columns: city (string), population (integer)."));
        assert!(p.text.contains("row 43: city: Town42 | population: 1042\n"));
        assert!(p.chunks.len() > 1);
        let mut next_row = 1;
        for c in &p.chunks {
            let body = &p.text[c.offset as usize..(c.offset + c.length) as usize];
            assert!(body.len() <= CHUNK_CHARS && body.ends_with('\n') && body.starts_with("row "));
            let (a, b) = c.section.trim_start_matches("rows ").split_once('-').unwrap();
            assert_eq!(a.parse::<usize>().unwrap(), next_row);
            assert_eq!(body.lines().count(), b.parse::<usize>().unwrap() - next_row + 1);
            next_row = b.parse::<usize>().unwrap() + 1;
        }
        assert_eq!(next_row, 201);
    }

    proptest::proptest! {
        /// Any bytes: a table or an error, never a panic; every row as wide as the header, the rendering's
        /// chunks tile its rows in order, and the statistics count every row.
        #[test]
        fn any_bytes_parse_render_and_analyse(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..600), tab: bool) {
            if let Ok(t) = parse(&bytes, tab) {
                proptest::prop_assert!(t.rows.iter().all(|r| r.len() == t.headers.len()));
                let p = render(&t, "x.csv");
                let mut at = p.chunks.first().map(|c| c.offset).unwrap_or(0);
                for c in &p.chunks {
                    proptest::prop_assert_eq!(c.offset, at);
                    at += c.length;
                }
                proptest::prop_assert!(at as usize <= p.text.len());
                let a = analyze(&t, "x.csv", &[]).unwrap();
                proptest::prop_assert!(a.columns.iter().all(|c| c.count == t.rows.len() as u64
                    && c.non_null_count + c.null_count == c.count));
            }
        }
    }
}
