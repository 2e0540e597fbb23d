//! `instances.list` filters: `name = "x"`, `name != x`, `labels.k = "v"`, `labels.k:*`, `status = RUNNING`,
//! conjunctions (`(a) (b)`, `a AND b`), and the older `name eq <regex>` / `ne` form.

use regex::Regex;

use crate::world::Instance;

#[derive(Debug, Clone)]
enum Op {
    Eq(String),
    Ne(String),
    Has(String),
    Re(Regex, bool),
}

/// A parsed filter: all clauses must match.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    clauses: Vec<(String, Op)>,
}

#[derive(Debug, PartialEq)]
enum Tok {
    Word(String),
    Str(String),
    Open,
    Close,
    Sym(&'static str),
}

fn tokens(s: &str) -> Result<Vec<Tok>, String> {
    let mut out = Vec::new();
    let mut it = s.chars().peekable();
    while let Some(c) = it.next() {
        match c {
            c if c.is_whitespace() => {}
            '(' => out.push(Tok::Open),
            ')' => out.push(Tok::Close),
            '=' => out.push(Tok::Sym("=")),
            ':' => out.push(Tok::Sym(":")),
            '!' if it.peek() == Some(&'=') => {
                it.next();
                out.push(Tok::Sym("!="));
            }
            '"' => {
                let mut v = String::new();
                loop {
                    match it.next() {
                        Some('\\') => v.extend(it.next()),
                        Some('"') => break,
                        Some(c) => v.push(c),
                        None => return Err("unterminated string".into()),
                    }
                }
                out.push(Tok::Str(v));
            }
            c => {
                let mut w = String::from(c);
                while let Some(&n) = it.peek() {
                    if n.is_whitespace() || "()=:!\"".contains(n) {
                        break;
                    }
                    w.push(n);
                    it.next();
                }
                out.push(Tok::Word(w));
            }
        }
    }
    Ok(out)
}

impl Filter {
    /// Parses `filter`; an empty filter matches everything.
    pub fn parse(filter: &str) -> Result<Self, String> {
        let toks = tokens(filter)?;
        let mut clauses = Vec::new();
        let mut i = 0;
        let word = |t: Option<&Tok>| match t {
            Some(Tok::Word(w)) | Some(Tok::Str(w)) => Some(w.clone()),
            _ => None,
        };
        while i < toks.len() {
            match &toks[i] {
                Tok::Open | Tok::Close => i += 1,
                Tok::Word(w) if w.eq_ignore_ascii_case("AND") => i += 1,
                Tok::Word(field) => {
                    let op = toks.get(i + 1);
                    let value =
                        word(toks.get(i + 2)).ok_or_else(|| format!("missing value after {field}"))?;
                    let op = match op {
                        Some(Tok::Sym("=")) => Op::Eq(value),
                        Some(Tok::Sym("!=")) => Op::Ne(value),
                        Some(Tok::Sym(":")) => Op::Has(value),
                        Some(Tok::Word(w)) if w == "eq" || w == "ne" => {
                            let re = Regex::new(&format!("^(?:{value})$"))
                                .map_err(|e| format!("bad regex: {e}"))?;
                            Op::Re(re, w == "eq")
                        }
                        _ => return Err(format!("expected =, !=, :, eq or ne after {field}")),
                    };
                    if field != "name" && field != "status" && !field.starts_with("labels.") {
                        return Err(format!("unsupported field {field}"));
                    }
                    clauses.push((field.clone(), op));
                    i += 3;
                }
                other => return Err(format!("unexpected {other:?}")),
            }
        }
        Ok(Self { clauses })
    }

    /// True when the instance `name` matches every clause.
    pub fn matches(&self, name: &str, inst: &Instance) -> bool {
        self.clauses.iter().all(|(field, op)| {
            let value: Option<&str> = match field.as_str() {
                "name" => Some(name),
                "status" => Some(inst.status.name()),
                f => inst.labels.get(&f["labels.".len()..]).map(String::as_str),
            };
            match op {
                Op::Eq(v) => value == Some(v.as_str()),
                Op::Ne(v) => value != Some(v.as_str()),
                Op::Has(v) if v == "*" => value.is_some(),
                Op::Has(v) => value == Some(v.as_str()),
                Op::Re(re, want) => value.is_some_and(|x| re.is_match(x)) == *want,
            }
        })
    }
}

#[cfg(test)]
mod tests;
