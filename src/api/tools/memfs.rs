//! `mem_fs`: the `/fs` tree through one tool, in the shell form (`"ls /"`, `"grep -E 'a|b' /memories"`,
//! POSIX-shell quoting) and in the structured form (`command` is the verb, with `path`, `query`, `line`,
//! `lines`, `body`). Each verb answers the JSON of its `/fs/*` route; a missing path is an error result whose
//! text says `ENOENT: no such file or directory`.

use serde_json::Value;

use super::memory::to_json;
use super::{Call, ToolError};
use crate::api::fs::{self, FsDeleteRequest, FsWriteRequest};
use crate::api::query::{ParamSpec, Query};
use crate::error::Error;

type Out = Result<Value, ToolError>;

/// The command line's options as the parameters of the verb's route: each value is checked by the route's own
/// [`ParamSpec`]s, so that a bad `--limit` gives the same 422 as the route does.
fn params(pairs: &[(&str, String)], specs: &[ParamSpec]) -> Result<Query, ToolError> {
    let mut qs = form_urlencoded::Serializer::new(String::new());
    for (k, v) in pairs {
        qs.append_pair(k, v);
    }
    Ok(Query::parse(&qs.finish(), specs)?)
}

fn usage(msg: impl Into<String>, input: &str) -> ToolError {
    ToolError::Failed(Error::invalid_field(&["arguments", "command"], "value_error", msg, input.into()))
}

/// One parsed invocation: the verb, positional words and `--flag [value]` options.
#[derive(Debug, Default, PartialEq)]
struct Invocation {
    verb: String,
    words: Vec<String>,
    flags: Vec<(String, Option<String>)>,
}

/// Flags that take no value.
const SWITCHES: &[&str] = &["-E", "--regex", "--case-sensitive", "-i", "--ignore-case", "--jsonl", "--raw"];

fn parse(command: &str) -> Result<Invocation, ToolError> {
    let words = shlex::split(command).ok_or_else(|| usage("unbalanced quotes in command", command))?;
    let mut it = words.into_iter();
    let verb = it.next().ok_or_else(|| usage("empty command", command))?;
    let mut inv = Invocation { verb, ..Default::default() };
    let rest: Vec<String> = it.collect();
    let mut i = 0;
    while i < rest.len() {
        let w = &rest[i];
        if w.starts_with('-') && w.len() > 1 && w.parse::<f64>().is_err() {
            if let Some((k, v)) = w.split_once('=') {
                inv.flags.push((k.to_string(), Some(v.to_string())));
            } else if SWITCHES.contains(&w.as_str()) || i + 1 >= rest.len() {
                inv.flags.push((w.clone(), None));
            } else {
                inv.flags.push((w.clone(), Some(rest[i + 1].clone())));
                i += 1;
            }
        } else {
            inv.words.push(w.clone());
        }
        i += 1;
    }
    Ok(inv)
}

impl Invocation {
    fn flag(&self, names: &[&str]) -> Option<String> {
        self.flags.iter().find(|(k, _)| names.contains(&k.as_str())).map(|(_, v)| v.clone().unwrap_or_default())
    }
    fn has(&self, names: &[&str]) -> bool {
        self.flags.iter().any(|(k, _)| names.contains(&k.as_str()))
    }
}

pub(super) fn mem_fs(c: &Call<'_>) -> Out {
    let a = &c.args;
    let command = a.req_str("command")?;
    let mut inv = parse(&command)?;
    // Structured form: the arguments fill what the command line did not say.
    let path_arg = a.text("path", 4096)?;
    let query_arg = a.text("query", 4096)?;
    for (key, flag) in [("line", "--line"), ("lines", "--lines"), ("limit", "--limit")] {
        if let Some(n) = a.opt_int(key, 1, 1_000_000)? {
            inv.flags.push((flag.into(), Some(n.to_string())));
        }
    }
    if a.bool("regex", false)? {
        inv.flags.push(("-E".into(), None));
    }
    if let Some(b) = a.opt_str("body")? {
        inv.flags.push(("--body".into(), Some(b)));
    }
    let space = ("space_id", c.space.clone());
    let word = |i: usize| inv.words.get(i).cloned();
    let verb = inv.verb.to_ascii_lowercase();
    let limit = inv.flag(&["--limit", "-n"]);
    let api = c.api;
    let out = match verb.as_str() {
        "capabilities" | "caps" => to_json(&fs::capabilities()),
        "ls" => {
            let path = word(0).or(path_arg).unwrap_or_else(|| "/".into());
            let mut q = vec![("path", path), space];
            if let Some(l) = limit {
                q.push(("limit", l));
            }
            if let Some(cur) = inv.flag(&["--cursor"]) {
                q.push(("cursor", cur));
            }
            to_json(&fs::ls(api, &params(&q, fs::LS_PARAMS)?)?)
        }
        "cat" | "read" => {
            let path = word(0).or(path_arg).ok_or_else(|| usage("cat needs a path", &command))?;
            let mut q = vec![("path", path), space];
            if let Some(l) = inv.flag(&["--line"]) {
                q.push(("line", l));
            }
            if let Some(l) = inv.flag(&["--lines"]) {
                q.push(("lines", l));
            }
            to_json(&fs::cat(api, &params(&q, fs::CAT_PARAMS)?)?)
        }
        "stat" => {
            let path = word(0).or(path_arg).ok_or_else(|| usage("stat needs a path", &command))?;
            to_json(&fs::stat(api, &params(&[("path", path), space], fs::STAT_PARAMS)?)?)
        }
        "find" => {
            let mut q = vec![space];
            if let Some(p) = word(0).or(path_arg) {
                q.push(("path", p));
            }
            for (flag, key) in [
                ("--unit-type", "unit_type"),
                ("--label", "label"),
                ("--since", "since"),
                ("--until", "until"),
                ("--mentions", "mentions"),
                ("--type", "type"),
                ("--cursor", "cursor"),
            ] {
                if let Some(v) = inv.flag(&[flag]) {
                    q.push((key, v));
                }
            }
            if let Some(l) = limit {
                q.push(("limit", l));
            }
            to_json(&fs::find(api, &params(&q, fs::FIND_PARAMS)?)?)
        }
        "grep" => {
            let query = word(0).or(query_arg).ok_or_else(|| usage("grep needs a pattern", &command))?;
            let path = word(1).or(path_arg).unwrap_or_else(|| "/memories".into());
            let mut q = vec![("q", query), ("path", path), space];
            if inv.has(&["-E", "--regex"]) {
                q.push(("regex", "true".into()));
            }
            if inv.has(&["--case-sensitive"]) {
                q.push(("case_sensitive", "true".into()));
            }
            if let Some(u) = inv.flag(&["--unit-type"]) {
                q.push(("unit_type", u));
            }
            if let Some(l) = limit {
                q.push(("limit", l));
            }
            to_json(&fs::grep(api, &params(&q, fs::GREP_PARAMS)?)?)
        }
        "recall" => {
            let query = if inv.words.is_empty() { query_arg } else { Some(inv.words.join(" ")) }
                .ok_or_else(|| usage("recall needs a query", &command))?;
            let mut q = vec![("query", query), space];
            if let Some(p) = inv.flag(&["--in"]).or(path_arg) {
                q.push(("path", p));
            }
            if let Some(k) = inv.flag(&["-k", "--k"]).or(limit) {
                q.push(("k", k));
            }
            to_json(&fs::recall(api, &params(&q, fs::RECALL_PARAMS)?)?)
        }
        "write" => {
            let path = word(0).or(path_arg).ok_or_else(|| usage("write needs a path", &command))?;
            let body = inv.flag(&["--body"]).ok_or_else(|| usage("write needs --body TEXT", &command))?;
            let r = FsWriteRequest {
                path: Some(path),
                body: Some(body),
                space_id: Some(c.space.clone()),
                ..Default::default()
            };
            to_json(&fs::write(api, r, &c.space)?)
        }
        "rm" | "delete" => {
            let path = word(0).or(path_arg).ok_or_else(|| usage("rm needs a path", &command))?;
            let r = FsDeleteRequest { path: Some(path), space_id: Some(c.space.clone()) };
            to_json(&fs::delete(api, r, &c.space)?)
        }
        other => {
            return Err(usage(
                format!("unknown verb '{other}': use capabilities, ls, cat, stat, find, grep, recall, write or rm"),
                &command,
            ));
        }
    };
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shell_commands_split_into_verb_words_and_flags() {
        let i = parse(r#"grep -E "a|b c" /memories --limit 5"#).expect("parse");
        assert_eq!(i.verb, "grep");
        assert_eq!(i.words, vec!["a|b c".to_string(), "/memories".to_string()]);
        assert!(i.has(&["-E"]));
        assert_eq!(i.flag(&["--limit"]).as_deref(), Some("5"));
        let i = parse("cat /memories/by-id/x.memory.md --line=3 --lines 4").expect("parse");
        assert_eq!(i.flag(&["--line"]).as_deref(), Some("3"));
        assert_eq!(i.flag(&["--lines"]).as_deref(), Some("4"));
        assert!(parse("ls 'unclosed").is_err());
        assert!(parse("   ").is_err());
    }
}
